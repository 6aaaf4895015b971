"""kill -9 of a Spark streaming driver writing to a partitioned processing-time stream on 2 real
servers (127.0.0.1): the driver (tests/spark_kill_driver.py, its own process with its JVM) is
killed once between the partitions' commits of a micro-batch and once at a moment of the stream,
and restarted from the same checkpoint each time. Every source row is then on its partition
exactly once: the union of the partitions' rows equals the source rows under DuckDB."""
from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from conftest import wait_for  # noqa: E402
from cluster_fixtures import Cluster  # noqa: E402
from windowstore.clients import Client  # noqa: E402
from windowstore.store.partitions import partition_name, partition_of_rows  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.long]  # ~1 min: make test-long

SCHEMA = {"ts": "int64", "src": "string", "bytes": "int64"}
P = 2
FILES, PER = 10, 40
DRIVER = Path(__file__).with_name("spark_kill_driver.py")


def rows(b: int) -> list[dict]:
    return [{"ts": b * 1000 + i, "src": None if i % 13 == 0 else f"h{(i * 7 + b) % 11}", "bytes": (i * 31 + b) % 97}
            for i in range(PER)]


def write_files(src: Path) -> list[dict]:
    src.mkdir()
    t0 = time.time() - 100
    every = []
    for b in range(FILES):
        f = src / f"part{b:02d}.json"
        f.write_text("\n".join(json.dumps(r) for r in rows(b)))
        os.utime(f, (t0 + b, t0 + b))  # the file source takes files in modification-time order
        every.extend(rows(b))
    return every


class Driver:
    """The driver process, in a session of its own (its JVM child dies with the group)."""

    def __init__(self, cluster: Cluster, tmp: Path, *flags: str):
        self.progress = tmp / "progress"
        self.log = open(tmp / "driver.log", "ab")
        self.proc = subprocess.Popen([sys.executable, str(DRIVER), ",".join(cluster.addresses), "k", str(tmp / "src"),
                                      str(tmp / "ckpt"), str(self.progress), *flags],
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
                                     cwd=str(DRIVER.parent.parent))

    def lines(self) -> list[str]:
        return self.progress.read_text().splitlines() if self.progress.exists() else []

    def done(self) -> set[int]:
        return {int(x.split()[1]) for x in self.lines() if x.startswith("done ")}

    def kill9(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)  # the driver and its JVM: this test started them
        self.proc.wait(60)
        self.log.close()

    def wait_exit(self, timeout: float = 300) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)  # its JVM, if it outlived it
            self.log.close()


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, nodes=2)
    try:
        yield c
    finally:
        c.stop()


def stats(ws: Client, p: int) -> dict:
    (st,) = ws.nodes[ws.cluster.owner("k", p)].stats(partition_name("k", p))["streams"]
    return st


def test_a_killed_spark_driver_restarted_from_its_checkpoint_writes_every_row_once_on_every_partition(cluster,
                                                                                                      tmp_path):
    every = write_files(tmp_path / "src")
    with Client(cluster.addresses, timeout=60) as ws:
        # 200-ms sub-windows, a window of 20 minutes: nothing leaves it during the test
        ws.create_stream("k", SCHEMA, subwindows=6000, subwindow_ms=200, partitions=P, partition_by=["src"])

        # 1. killed between the partitions' commits of micro-batch 2
        d = Driver(cluster, tmp_path, "--block-at", "2")
        wait_for(lambda: "blocked 2" in d.lines() or d.proc.poll() is not None, "the driver to commit batch 2 on one "
                 "partition", timeout=300)
        assert d.proc.poll() is None, (tmp_path / "driver.log").read_text()[-3000:]
        assert d.done() == {0, 1}
        d.kill9()

        # 2. restarted from the checkpoint, killed at a random moment after it committed another batch
        d = Driver(cluster, tmp_path)
        target = random.Random().randrange(3, 6)
        wait_for(lambda: max(d.done(), default=-1) >= target or d.proc.poll() is not None,
                 f"the driver to commit batch {target}", timeout=300)
        assert d.proc.poll() is None, (tmp_path / "driver.log").read_text()[-3000:]
        d.kill9()

        # 3. restarted again: the rest, then it stops
        d = Driver(cluster, tmp_path, "--available-now")
        assert d.wait_exit() == 0, (tmp_path / "driver.log").read_text()[-3000:]
        assert d.done() >= {FILES - 1}

        # every commit published and sealed (the processing-time clock goes on)
        wait_for(lambda: all(stats(ws, p)["pending_commits"] == 0 for p in range(P)), "no pending commits")
        total = len(every)
        wait_for(lambda: ws.query("SELECT COUNT(*) FROM k").rows[0][0] == total, "every row in the window",
                 timeout=60)

        src = pa.Table.from_pylist(every, schema=pa.schema([("ts", pa.int64()), ("src", pa.string()),
                                                            ("bytes", pa.int64())]))
        owner = partition_of_rows(src, ["src"], P)
        got = []
        for p in range(P):
            part = ws.nodes[ws.cluster.owner("k", p)]
            a = part.query(f"SELECT ts, src, COUNT(*), SUM(bytes) FROM {partition_name('k', p)} GROUP BY ts, src")
            got.extend((p, *r) for r in a.rows)
        con = duckdb.connect()
        con.register("src_rows", src.append_column("p", pa.array(owner, pa.int64())))
        con.register("got", pa.Table.from_pylist([dict(zip(["p", "ts", "src", "n", "bytes"], r)) for r in got]))
        # every source row once, on its own partition, with its value; nothing else
        assert con.execute("SELECT COUNT(*) FROM got WHERE n <> 1").fetchone()[0] == 0
        diff = con.execute("""
            (SELECT p, ts, src, bytes FROM src_rows EXCEPT ALL SELECT p, ts, src, bytes FROM got)
            UNION ALL
            (SELECT p, ts, src, bytes FROM got EXCEPT ALL SELECT p, ts, src, bytes FROM src_rows)""").fetchall()
        assert diff == []
        a = ws.query("SELECT COUNT(*), SUM(bytes) FROM k")
        assert a.rows == [tuple(con.execute("SELECT COUNT(*), SUM(bytes) FROM src_rows").fetchone())]
        # the batch whose commit the kill cut between partitions may be a split batch (it is when the
        # restart takes longer than a sub-window); never more splits than kills
        assert sum(stats(ws, p)["split_batches"] for p in range(P)) <= 2
