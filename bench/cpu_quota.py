"""A CPU quota for one process, through Linux cgroups: a benchmark's server given a fraction of a core.

The thesis's scheduling results (8.5) are those of an overloaded system: at 240 periodic queries and
1,500 tuples/s its schedulers could not all keep up, and the ratios between them are ratios of what
each answered in the CPU it had. A server on a faster machine keeps up with every mode at the same
point and the ratios are ~1 by construction. A quota reproduces the thesis's condition without
depending on what else the machine runs: the server gets at most `cores` of CPU per period, and
its group's weight is raised (8x the default) so that other load beside it takes little of that
share (a cap with priority, not a reservation: `throttled_s` says the cap was reached).

cgroup v2 (`cpu.max`, the cpu controller enabled at the root) or v1 (`cpu.cfs_quota_us` under
/sys/fs/cgroup/cpu); writing either needs root. `CpuQuota.available()` says why not when neither
can be used.
"""
from __future__ import annotations

import os
from pathlib import Path

PERIOD_US = 100_000
_V2 = Path("/sys/fs/cgroup")
_V1 = Path("/sys/fs/cgroup/cpu")


class QuotaUnavailable(RuntimeError):
    """This machine gives no writable cgroup cpu controller (not root, or no cpu controller)."""


class CpuQuota:
    """`cores` of CPU (e.g. 0.5) for the processes added with `add`, until `close`."""

    def __init__(self, cores: float, name: str | None = None):
        if not 0.01 <= cores <= (os.cpu_count() or 1):
            raise ValueError(f"cores: {cores} (0.01 to {os.cpu_count()})")
        self.cores = cores
        root, self._v2 = _root()
        self.path = root / (name or f"windowstore-bench-{os.getpid()}")
        self.path.mkdir(exist_ok=True)
        quota = int(cores * PERIOD_US)
        if self._v2:
            (self.path / "cpu.max").write_text(f"{quota} {PERIOD_US}\n")
            (self.path / "cpu.weight").write_text(f"{8 * 100}\n")
        else:
            (self.path / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
            (self.path / "cpu.cfs_quota_us").write_text(f"{quota}\n")
            (self.path / "cpu.shares").write_text(f"{8 * 1024}\n")

    @staticmethod
    def available() -> str | None:
        """None when a quota can be set here, else why not."""
        try:
            _root()
        except QuotaUnavailable as e:
            return str(e)
        return None

    def add(self, pid: int) -> None:
        """Move process `pid` (all its threads) under the quota."""
        (self.path / "cgroup.procs").write_text(f"{pid}\n")

    def throttled_s(self) -> float:
        """Seconds the group's processes were held back by the quota so far."""
        stat = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines())
        if self._v2:
            return int(stat.get("throttled_usec", 0)) / 1e6
        return int(stat.get("throttled_time", 0)) / 1e9

    def close(self) -> None:
        """Move what is left in the group back to the root group and remove the group."""
        if not self.path.exists():
            return
        for pid in (self.path / "cgroup.procs").read_text().split():
            try:
                (self.path.parent / "cgroup.procs").write_text(f"{pid}\n")
            except ProcessLookupError:  # it exited meanwhile
                pass
        self.path.rmdir()

    def __enter__(self) -> CpuQuota:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _root() -> tuple[Path, bool]:
    """The cgroup directory to make groups in and whether it is v2."""
    controllers = _V2 / "cgroup.controllers"
    if controllers.exists() and "cpu" in controllers.read_text().split():
        if "cpu" not in (_V2 / "cgroup.subtree_control").read_text().split():
            raise QuotaUnavailable(f"cgroup v2: the cpu controller is not enabled in {_V2 / 'cgroup.subtree_control'}")
        root, v2 = _V2, True
    elif (_V1 / "cpu.cfs_quota_us").exists():
        root, v2 = _V1, False
    else:
        raise QuotaUnavailable("no cgroup cpu controller (neither v2 with cpu nor v1 under /sys/fs/cgroup/cpu)")
    if not os.access(root, os.W_OK):
        raise QuotaUnavailable(f"{root} is not writable (a CPU quota needs root)")
    return root, v2
