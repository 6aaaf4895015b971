"""bench/cpu_quota.py: a process under a CPU quota is held back by it, and closing the quota puts
it back and removes the group (the thesis-goal runs of bench/sharing_real.py use it)."""
import subprocess
import sys

import pytest

from bench.cpu_quota import CpuQuota

pytestmark = pytest.mark.skipif(CpuQuota.available() is not None, reason=f"no CPU quota here: {CpuQuota.available()}")

BURN = "import time\nwhile time.process_time() < 0.3:\n    pass\nprint('done')"


def test_a_busy_process_under_a_quota_is_throttled_and_let_go():
    child = subprocess.Popen([sys.executable, "-c", "import sys\nsys.stdin.readline()\n" + BURN],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    with CpuQuota(0.1, name="windowstore-test-quota") as quota:
        quota.add(child.pid)
        assert str(child.pid) in (quota.path / "cgroup.procs").read_text().split()
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "done"  # 0.3 s of CPU at 0.1 cores: over several periods
        assert quota.throttled_s() > 0.0
        child.wait()
    assert not quota.path.exists()


def test_closing_puts_a_live_process_back_and_removes_the_group():
    child = subprocess.Popen([sys.executable, "-c", "import sys\nsys.stdin.readline()"], stdin=subprocess.PIPE, text=True)
    try:
        quota = CpuQuota(0.5, name="windowstore-test-quota-2")
        quota.add(child.pid)
        quota.close()
        assert not quota.path.exists()
        assert child.poll() is None
    finally:
        child.communicate("bye\n")


def test_a_quota_beyond_the_machine_is_refused():
    with pytest.raises(ValueError, match="cores"):
        CpuQuota(10_000)
