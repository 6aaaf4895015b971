"""Time to a new leader after the leader stops: two `windowstore serve --etcd` processes on
127.0.0.1 replicating one partition, a throwaway etcd (server/coordination/local.py), ROUNDS
failovers. Each round SIGSTOPs the current leader's process and measures, on a watching
EtcdClusterView in this process, the time until the other node holds the leader key at the next
epoch; then SIGCONTs the stopped one and waits until its metrics show it follows at that epoch.

The goal (issue 36) is a new leader within 2 x the lease TTL. The lease is renewed every TTL/4, so
after a stop it runs out between 3/4 TTL and 1 TTL later; etcd checks for expired leases about
every 500 ms; the watch and the election add a few ms. Between rounds the bench writes the partition's
in-sync set back to both nodes, as the leader's replication would once the returned follower has
caught up (without it the old leader, out of sync, is rightly never elected again), through the
same guarded transaction a leader uses (election.set_in_sync).

    python -m bench.failover_bench --rounds 10 --ttl 2 [--json bench/results/failover_bench.json]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import sys
import time
import urllib.request

from windowstore.server.coordination.election import place, set_in_sync
from windowstore.server.coordination.keys import Keys
from windowstore.server.coordination.local import LocalEtcd
from windowstore.server.coordination.view import EtcdClusterView
from windowstore.server.process import ServerProcess


def _metric(url: str, name: str, partition: str) -> float | None:
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    m = re.search(rf'^{name}{{partition="{re.escape(partition)}"}} (\S+)$', text, re.M)
    return float(m.group(1)) if m else None


def _until(predicate, what: str, timeout: float):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def run(rounds: int, ttl: int) -> dict:
    keys = Keys()
    with LocalEtcd() as etcd:
        servers = [ServerProcess("--etcd", etcd.url, "--node", str(i), "--lease-ttl-s", str(ttl), "--metrics-port", "0")
                   for i in range(2)]
        metrics = [re.search(r"metrics on (http://[^\s)]+)", s.banner).group(1) for s in servers]  # type: ignore[union-attr]
        times: list[float] = []
        try:
            with EtcdClusterView(etcd.url) as view:
                if not view.wait(lambda v: len(v.live()) == 2, 30):
                    raise TimeoutError("the servers did not register in etcd")
                place(view.etcd, keys, "s", [[0, 1]])
                leader = view.wait(lambda v: v.leader("s", 0), 30)
                for r in range(rounds):
                    assert leader is not None
                    old, other = leader.node, 1 - leader.node
                    t0 = time.monotonic()
                    os.kill(servers[old].proc.pid, signal.SIGSTOP)
                    try:
                        new = view.wait(lambda v: (lambda x: x if x is not None and x.node == other else None)(
                            v.leader("s", 0)), 30 * ttl)
                        took = time.monotonic() - t0
                    finally:
                        os.kill(servers[old].proc.pid, signal.SIGCONT)
                    if new is None:
                        raise TimeoutError(f"round {r}: no new leader within {30 * ttl} s")
                    times.append(took)
                    print(f"round {r}: node {other} leads at epoch {new.epoch} {took:.3f} s after node {old} stopped",
                          flush=True)
                    _until(lambda: _metric(metrics[old], "windowstore_partition_epoch", "s.p0") == new.epoch,
                           f"node {old} to follow at epoch {new.epoch}", 30)
                    if not set_in_sync(view.etcd, keys, "s", 0, new.node, new.epoch, [new.node, old]):
                        raise RuntimeError(f"round {r}: the in-sync write as leader {new.node} was refused")
                    _until(lambda: view.partition("s", 0).in_sync == (new.node, old), "the in-sync set", 30)
                    leader = new
        finally:
            for s in servers:
                s.stop()
    return {"rounds": rounds, "lease_ttl_s": ttl, "goal_s": 2 * ttl,
            "failover_s": {"min": round(min(times), 3), "median": round(statistics.median(times), 3),
                           "max": round(max(times), 3)},
            "within_goal": sum(t <= 2 * ttl for t in times), "samples_s": [round(t, 3) for t in times]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--ttl", type=int, default=2, help="the lease TTL in seconds (default 2)")
    ap.add_argument("--json", help="also write the result here")
    args = ap.parse_args(argv)
    out = run(args.rounds, args.ttl)
    print(json.dumps(out, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
