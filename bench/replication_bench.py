"""Replication benchmark (docs/replication.md): ingest into a stream with 2 replicas and acks=all
against the same stream with 1 replica, on the same two `windowstore serve` processes on
127.0.0.1 (durable, --fsync always; one cluster file), from 3 writer processes appending 10^5-row
Arrow batches back to back. Rounds interleaved (R=1, R=2, R=1, R=2); each figure is the mean of its
rounds. Every Append to the R=2 stream is acknowledged only once both replicas' logs hold it.

`python -m bench.replication_bench --lag` (make replication-lag) measures the follower-lag goal of
issue 36 instead: a processing-time stream (1-s sub-windows) with 2 replicas under the same writers,
for each acks setting, sampling both replicas' ReplicaStatus (the figures `windowstore cluster
status` shows) every 50 ms: the lag in slides (leader's applied slide - follower's, the follower read
first, so it never reads low) and in time (for each slide, when the follower first reported it
applied after the leader first did)."""
from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

from windowstore.clients import Client
from windowstore.server.process import ServerProcess, free_ports
from windowstore.store.partitions import StaticCluster

from .common import SCHEMA, fmt_rate
from .server_bench import _sender, _senders

ROWS = 100_000
SECONDS = 5.0
SENDERS = 3


@contextlib.contextmanager
def _two_servers(prefix: str):
    """Two durable servers on 127.0.0.1 with one cluster file: their addresses; stopped (and their
    data removed) afterwards."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    ports = free_ports(2)
    addresses = [f"127.0.0.1:{p}" for p in ports]
    cluster = tmp / "cluster.toml"
    cluster.write_text("nodes = [" + ", ".join(f'"{a}"' for a in addresses) + "]\n")
    servers = [ServerProcess("--cluster", str(cluster), "--node", str(i), port=ports[i], data_dir=str(tmp / f"n{i}"))
               for i in range(2)]
    try:
        yield addresses
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _ingest(addresses: list[str], stream: str, replication: int, acks: str, per_s: float | None, seconds: float,
            senders: int = SENDERS, during=None) -> tuple[int, int]:
    """Create `stream` (`acks` "" for the default) on the node the cluster map makes its leader, have `senders` writer processes
    append to it for `seconds` (`per_s` batches a second each, or back to back) while
    `during(leader's address, the other's)` (a thread) runs, drop it: (rows sent, refusals)."""
    leader = StaticCluster(tuple(addresses)).owner(stream, 0)
    with Client(addresses[leader], timeout=60) as ws:
        ws.create_stream(stream, SCHEMA, subwindows=10, subwindow_ms=1000, group_by=["src"], replication=replication,
                         acks=acks)
    watch = during(addresses[leader], addresses[1 - leader]) if during is not None else None
    if watch is not None:
        watch.start()
    try:
        return _senders(_sender, (addresses[leader], stream, ROWS, per_s, seconds), senders)
    finally:
        if watch is not None:
            watch.halt.set()
            watch.join(30)
        with Client(addresses[leader], timeout=60) as ws:
            ws.drop_stream(stream)


def measure(rounds: int = 2, seconds: float = SECONDS) -> dict:
    """{"r1": [rows/s per round], "r2": [...]} on a fresh two-server cluster."""
    out: dict[str, list[float]] = {"r1": [], "r2": []}
    with _two_servers("ws-repl-bench-") as addresses:
        for r in range(rounds):
            for label, replication in (("r1", 1), ("r2", 2)):
                sent, _ = _ingest(addresses, f"bench_{label}_{r}", replication, "", None, seconds)
                out[label].append(sent / seconds)
    return out


class _LagSampler(threading.Thread):
    """Both replicas' applied slides every `every_s` while the writers run."""

    def __init__(self, leader: str, follower: str, stream: str, every_s: float = 0.05):
        super().__init__(daemon=True)
        self.addresses, self.stream, self.every_s = (leader, follower), stream, every_s
        self.samples: list[tuple[float, int, int]] = []  # (time, leader's applied slide, follower's)
        self.halt = threading.Event()

    def run(self) -> None:
        with Client(self.addresses[0], timeout=10) as lead, Client(self.addresses[1], timeout=10) as follow:
            while not self.halt.wait(self.every_s):
                f = follow.replica_status(self.stream).get("applied_slide", -1)
                t = time.monotonic()
                lead_slide = lead.replica_status(self.stream).get("applied_slide", -1)
                self.samples.append((t, int(lead_slide), int(f)))


def lag_figures(samples: list[tuple[float, int, int]]) -> dict:
    """Lag in slides per sample, and per slide the time from the leader's first report of it to
    the follower's (slides both reported while sampled)."""
    behind = [lead - f for _, lead, f in samples if lead >= 0]
    first_lead: dict[int, float] = {}
    first_follow: dict[int, float] = {}
    for t, lead, f in samples:
        first_lead.setdefault(lead, t)
        first_follow.setdefault(f, t)
    # a slide the follower reported before the leader was sampled at it: lag 0 at this resolution
    times = [max(0.0, first_follow[s] - first_lead[s]) for s in first_lead if s >= 0 and s in first_follow]
    return {"samples": len(samples), "slides": len(times),
            "lag_slides_max": max(behind, default=None), "lag_slides_median": statistics.median(behind) if behind else None,
            "samples_over_1_slide": sum(b > 1 for b in behind),
            "lag_s_median": round(statistics.median(times), 3) if times else None,
            "lag_s_max": round(max(times), 3) if times else None}


def measure_lag(seconds: float = 10.0, senders: int = SENDERS, acks=("all", "leader"), rate: float | None = None) -> dict:
    """{acks: {rows_per_s, lag figures}} on a fresh two-server cluster; `rate` rows/s in all (paced),
    else back to back."""
    per_s = rate / ROWS / senders if rate else None
    out = {}
    with _two_servers("ws-repl-lag-") as addresses:
        for a in acks:
            samplers: list[_LagSampler] = []

            def sampler(leader: str, follower: str, stream: str = f"lag_{a}") -> _LagSampler:
                samplers.append(_LagSampler(leader, follower, stream))
                return samplers[-1]
            sent, refused = _ingest(addresses, f"lag_{a}", 2, a, per_s, seconds, senders, during=sampler)
            out[a] = {"rows_per_s": round(sent / seconds), "refused": refused, **lag_figures(samplers[0].samples)}
    return out


def run() -> list[dict]:
    m = measure()
    r1, r2 = (sum(v) / len(v) for v in (m["r1"], m["r2"]))
    ratio = r2 / r1
    each = "; ".join(f"{k} " + " / ".join(fmt_rate(x) for x in v) for k, v in m.items())
    return [{"name": f"ingest, 10^5-row Arrow batches, {SENDERS} writers, --fsync always, mean of two interleaved "
                     f"rounds ({each}): replication 2 with acks=all / replication 1",
             "value": [r2, r1, ratio], "shown": f"{fmt_rate(r2)} / {fmt_rate(r1)} = {ratio:.2f}",
             "target": ">= 0.6"}]


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lag", action="store_true", help="measure the follower's lag instead (see the docstring)")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=None, help="with --lag: rows/s in all, paced (default: as fast "
                                                            "as the writers go)")
    ap.add_argument("--json", default=None, help="with --lag: write the figures here")
    args = ap.parse_args()
    if args.lag:
        figures = measure_lag(args.seconds, rate=args.rate)
        print(json.dumps(figures, indent=2))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(figures, f, indent=2)
    else:
        for row in run():
            print(f"{row['name']}: {row['shown']} (target {row['target']})")
