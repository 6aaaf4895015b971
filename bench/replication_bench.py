"""Replication benchmark (docs/replication.md): ingest into a stream with 2 replicas and acks=all
against the same stream with 1 replica, on the same two `windowstore serve` processes on
127.0.0.1 (durable, --fsync always; one cluster file), from 3 writer processes appending 10^5-row
Arrow batches back to back. Rounds interleaved (R=1, R=2, R=1, R=2); each figure is the mean of its
rounds. Every Append to the R=2 stream is acknowledged only once both replicas' logs hold it."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from windowstore.clients import Client
from windowstore.server.process import ServerProcess, free_ports
from windowstore.store.partitions import StaticCluster

from .common import SCHEMA, fmt_rate
from .server_bench import _sender, _senders

ROWS = 100_000
SECONDS = 5.0
SENDERS = 3


def measure(rounds: int = 2, seconds: float = SECONDS) -> dict:
    """{"r1": [rows/s per round], "r2": [...]} on a fresh two-server cluster."""
    tmp = Path(tempfile.mkdtemp(prefix="ws-repl-bench-"))
    ports = free_ports(2)
    addresses = [f"127.0.0.1:{p}" for p in ports]
    cluster = tmp / "cluster.toml"
    cluster.write_text("nodes = [" + ", ".join(f'"{a}"' for a in addresses) + "]\n")
    servers = [ServerProcess("--cluster", str(cluster), "--node", str(i), port=ports[i], data_dir=str(tmp / f"n{i}"))
               for i in range(2)]
    try:
        out: dict[str, list[float]] = {"r1": [], "r2": []}
        for r in range(rounds):
            for label, replication in (("r1", 1), ("r2", 2)):
                stream = f"bench_{label}_{r}"
                # the stream's leader is the cluster map's owner of it
                leader = StaticCluster(tuple(addresses)).owner(stream, 0)
                with Client(addresses[leader], timeout=60) as ws:
                    ws.create_stream(stream, SCHEMA, subwindows=10, subwindow_ms=1000, group_by=["src"],
                                     replication=replication)
                sent, _ = _senders(_sender, (addresses[leader], stream, ROWS, None, seconds), SENDERS)
                out[label].append(sent / seconds)
                with Client(addresses[leader], timeout=60) as ws:
                    ws.drop_stream(stream)
        return out
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)


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
    for row in run():
        print(f"{row['name']}: {row['shown']} (target {row['target']})")
