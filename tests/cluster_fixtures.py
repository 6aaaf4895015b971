"""The partition tests' shared set-up: servers on 127.0.0.1 (plain ones, or a cluster with its cluster
file), a partitioned stream filled slide by slide, and the DuckDB oracle over the union of the
partitions' rows of a slide. The fixtures over these are in conftest.py (`two_servers`, `cluster`)."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import duckdb
import pyarrow as pa

from windowstore.server.process import ServerProcess, free_ports


class Cluster:
    """`nodes` servers started with one cluster file (--cluster, --node i); `durable`: each with a
    data directory under tmp_path, so a stopped one restarts with its state."""

    def __init__(self, tmp_path, nodes: int = 3, durable: bool = False):
        self.ports = free_ports(nodes)
        self.addresses = [f"127.0.0.1:{p}" for p in self.ports]
        self.file = tmp_path / "cluster.toml"
        self.file.write_text("nodes = [" + ", ".join(f'"{a}"' for a in self.addresses) + "]\n")
        self.dirs = [str(tmp_path / f"node{i}") if durable else None for i in range(nodes)]
        self.servers: list[ServerProcess | None] = []
        try:
            for i in range(nodes):
                self.servers.append(self.start(i))
        except BaseException:
            self.stop()
            raise

    def start(self, i: int) -> ServerProcess:
        return ServerProcess("--cluster", str(self.file), "--node", str(i), port=self.ports[i], data_dir=self.dirs[i])

    def stop(self) -> None:
        for s in self.servers:
            if s is not None:
                s.stop()


@contextmanager
def servers(n: int = 2, start: Callable[[int], ServerProcess] | None = None) -> Iterator[list[str]]:
    """`n` servers (ServerProcess() each, or `start(i)`): their addresses, for Client([...]); all
    stopped at the end, also when one fails to start."""
    started: list[ServerProcess] = []
    try:
        for i in range(n):
            started.append(start(i) if start is not None else ServerProcess())
        yield [s.target for s in started]
    finally:
        for s in started:
            s.stop()


def seal_batches(ws, stream: str, batches: list[dict], batch0: int = 0,
                 after_slide: Callable[[int], object] | None = None) -> dict[int, pa.Table]:
    """Append each batch (writer "w", batch ids from `batch0`) and slide after it, then call
    `after_slide(k)` (a wait for what slide k causes): the rows by the slide that sealed them."""
    sealed = {}
    for b, rows in enumerate(batches):
        ws.append(stream, rows, writer_id="w", batch_id=batch0 + b)
        k = ws.slide(stream)
        sealed[k] = pa.table(rows)
        if after_slide is not None:
            after_slide(k)
    return sealed


def periodic_answered(ws, k: int) -> Callable[[], bool]:
    """Whether every periodic query on every server has answered slide k (a wait_for predicate)."""
    return lambda: all(q["last_slide"] >= k for q in ws.list_queries())


def window(sealed: dict[int, pa.Table], k: int, n: int) -> pa.Table:
    """The union of the partitions' rows of slide k's window of n sub-windows."""
    return pa.concat_tables([sealed[j] for j in range(max(0, k - n + 1), k + 1)])


def duck(table: pa.Table, sql: str, name: str = "w") -> list[tuple]:
    """DuckDB's answer to `sql` over `table`, registered as `name`: the independent oracle."""
    con = duckdb.connect()
    con.register(name, table)
    return [tuple(r) for r in con.execute(sql).fetchall()]
