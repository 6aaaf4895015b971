#!/usr/bin/env python
"""Random kill -9 and restarts of single servers under a partitioned stream, while one writer
appends and slides through the SDK: afterwards every row is present exactly once on its partition.

    python tests/partition_kills.py --kills 40 --seed 1 [--partitions 4] [--nodes 3]

A cluster of durable `windowstore serve` processes on 127.0.0.1 holds a manual-clock stream of P
partitions (split by `src`), with a window longer than the run can slide, so no row expires and the
check is on the set of rows. Each step sends one batch of rows (every row has a unique `id`) as a
writer would: with its writer id and batch id, retried until every partition has acknowledged it.
Every few batches the writer slides, with an idempotency key, retried the same way. A step may kill
one live server (SIGKILL) before the batch, while it is in flight, or right after its
acknowledgement, or restart a dead one; a write that fails with UNAVAILABLE restarts the dead
servers (each recovers its partitions from its own log) and retries. Checked every `--check-every`
kills and at the end:

 1. the merged window: COUNT(*), COUNT(DISTINCT id), SUM(id) and COUNT/SUM per `src` equal DuckDB
    over every row sent (every batch is acknowledged before the next one starts);
 2. each partition's own stream (`S.p{i}`, queried on its server) holds exactly the rows that hash
    to it: COUNT(*), COUNT(DISTINCT id), SUM(id);
 3. at the end, every batch re-sent with its keys is a duplicate on every partition, and the
    window is unchanged.
"""
from __future__ import annotations

import argparse
import random
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import duckdb
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))
from cluster_fixtures import Cluster  # noqa: E402  # the tests' cluster of serve processes

from windowstore.clients import Client, DeadlineExceeded, Unavailable  # noqa: E402
from windowstore.store.partitions import partition_name, partition_of_rows  # noqa: E402

SCHEMA = {"ts": "int64", "src": "string", "id": "int64"}
SOURCES = [f"s{i}" for i in range(23)]
SLIDE_EVERY = 3
_RETRYABLE = (Unavailable, DeadlineExceeded)


class Run:
    def __init__(self, work: Path, seed: int, partitions: int, nodes: int, log):
        self.rng = random.Random(seed)
        self.log = log
        self.cluster = Cluster(work, nodes=nodes, durable=True)
        self.partitions = partitions
        self.ws = Client(self.cluster.addresses, timeout=30, retries=1)
        self.ws.create_stream("k", SCHEMA, subwindows=100_000, subwindow_ms=1000, clock="manual",
                              partitions=partitions, partition_by=["src"])
        self.sent: list[pa.Table] = []
        self.slides = 0
        self.kills = self.restarts = self.retries = 0
        self.next_id = 0
        self.events: list[str] = []  # what happened, for the report of a failed check

    def close(self) -> None:
        self.ws.close()
        self.cluster.stop()

    # -- faults -----------------------------------------------------------------------------------
    def live(self) -> list[int]:
        return [i for i, s in enumerate(self.cluster.servers) if s is not None]

    def dead(self) -> list[int]:
        return [i for i, s in enumerate(self.cluster.servers) if s is None]

    def kill(self, i: int, why: str = "") -> None:
        self.events.append(f"kill node {i} {why}")
        self.cluster.servers[i].stop(signal.SIGKILL)  # type: ignore[union-attr]  # i is live
        self.cluster.servers[i] = None
        self.kills += 1

    def restart_dead(self) -> None:
        for i in self.dead():
            self.events.append(f"restart node {i}")
            self.cluster.servers[i] = self.cluster.start(i)  # returns once it serves (recovered)
            self.restarts += 1

    def deliver(self, send, timeout: float = 120.0):
        """`send()` until it is acknowledged: after UNAVAILABLE the dead servers are restarted and
        the same request (the same idempotency key) goes again, polled until the restarted server's
        channel reconnects; past `timeout` seconds the run fails naming the last error."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return send()
            except _RETRYABLE as e:
                self.retries += 1
                if time.monotonic() > deadline:
                    raise AssertionError(f"not acknowledged within {timeout} s of retries: {e}") from e
                self.restart_dead()
                time.sleep(0.05)

    # -- the workload -----------------------------------------------------------------------------
    def batch(self) -> pa.Table:
        n = self.rng.randint(1, 400)
        ids = list(range(self.next_id, self.next_id + n))
        self.next_id += n
        return pa.table({"ts": ids, "src": [self.rng.choice(SOURCES) for _ in ids], "id": ids})

    def step(self, b: int) -> None:
        table = self.batch()

        def send():
            ack = self.ws.append("k", table, writer_id="w", batch_id=b)
            # a partition that had the batch answers a duplicate with the count it took then
            assert ack.accepted == table.num_rows, f"batch {b}: {ack} for {table.num_rows} rows"
            return ack

        fault = self.rng.random()
        live = self.live()
        if self.dead() and fault < 0.25:
            self.restart_dead()
            self.deliver(send)
        elif fault < 0.55 and len(live) > 1:
            victim = self.rng.choice(live)
            when = self.rng.choice(["before", "in-flight", "after"])
            if when == "before":
                self.kill(victim, f"before batch {b}")
            elif when == "in-flight":
                result: list = []
                t = threading.Thread(target=lambda: result.append(self._try(send)))
                t.start()
                self.kill(victim, f"while batch {b} is in flight")
                t.join()
                self.events.append(f"in-flight batch {b}: {result[0]!r}")
            self.deliver(send)
            if when == "after":
                self.kill(victim, f"after batch {b} was acknowledged")
        else:
            self.deliver(send)
        self.sent.append(table)
        self.events.append(f"batch {b} acknowledged: ids {table['id'][0]}..{table['id'][-1]}")
        if b % SLIDE_EVERY == SLIDE_EVERY - 1:
            self.slide()

    def _try(self, send):
        try:
            return send()
        except _RETRYABLE as e:
            return e

    def slide(self) -> None:
        key = self.slides
        got = self.deliver(lambda: self.ws.slide("k", writer_id="slider", batch_id=key))
        self.slides += 1
        self.events.append(f"slide {key} acknowledged")
        assert got == key, f"slide key {key} acknowledged as slide {got}: the partitions' slides drifted"

    # -- checks -----------------------------------------------------------------------------------
    def partition_query(self, p: int, sql: str):
        """`sql` on partition p's own stream, on its server."""
        with Client(self.cluster.addresses[self.ws.cluster.owner("k", p)], timeout=30) as one:
            return one.query(sql.format(partition_name("k", p)))

    def check(self, final: bool = False) -> None:
        self.restart_dead()
        self.slide()  # seal the open sub-window so every row sent is visible
        every = pa.concat_tables(self.sent)
        con = duckdb.connect()
        con.register("w", every)
        split = partition_of_rows(every, ["src"], self.partitions)
        for p in range(self.partitions):
            mine = every.filter(pa.array(split == p))
            con.register("mine", mine)
            want_p = con.execute("SELECT COUNT(*), COUNT(DISTINCT id), SUM(id) FROM mine").fetchall()
            got_p = self.partition_query(p, "SELECT COUNT(*), COUNT(DISTINCT id), SUM(id) FROM {}")
            if [tuple(r) for r in want_p] != got_p.rows:
                held = {r[0] for r in self.partition_query(p, "SELECT id FROM {}").rows}
                sent = set(mine.column("id").to_pylist())
                raise AssertionError(
                    f"partition {p} (node {self.ws.cluster.owner('k', p)}): {got_p.rows} != {want_p}; "
                    f"missing ids {sorted(sent - held)[:40]}, extra {sorted(held - sent)[:40]}; "
                    f"events: {self.events[-60:]}")
        want = con.execute("SELECT COUNT(*), COUNT(DISTINCT id), SUM(id) FROM w").fetchall()
        got = self.deliver(lambda: self.ws.query("SELECT COUNT(*), COUNT(DISTINCT id), SUM(id) FROM k"))
        assert [tuple(r) for r in want] == got.rows, (want, got.rows, got.slide)
        want = con.execute("SELECT src, COUNT(*), SUM(id) FROM w GROUP BY src ORDER BY src").fetchall()
        got = self.deliver(lambda: self.ws.query("SELECT src, COUNT(*), SUM(id) FROM k GROUP BY src ORDER BY src"))
        assert [tuple(r) for r in want] == got.rows, "per-source counts differ from the rows sent"
        if final:
            for b, table in enumerate(self.sent):
                again = self.deliver(lambda: self.ws.append("k", table, writer_id="w", batch_id=b))
                assert again.duplicate, f"batch {b} re-sent was applied again"
            got = self.deliver(lambda: self.ws.query("SELECT COUNT(*), COUNT(DISTINCT id) FROM k"))
            assert got.rows == [(every.num_rows, every.num_rows)], got.rows
        self.log(f"checked: {every.num_rows} rows in {len(self.sent)} batches, {self.slides} slides, "
                 f"{self.kills} kills, {self.restarts} restarts, {self.retries} retried requests")


def run(work: Path, kills: int, seed: int, partitions: int = 4, nodes: int = 3, check_every: int = 5,
        log=print) -> dict:
    """Run until `kills` servers were killed; return the counts. Fails (AssertionError) on any row
    lost or applied twice."""
    r = Run(work, seed, partitions, nodes, log)
    try:
        b, checked_at = 0, 0
        while r.kills < kills:
            r.step(b)
            b += 1
            if r.kills - checked_at >= check_every:
                r.check()
                checked_at = r.kills
        r.check(final=True)
        return {"kills": r.kills, "restarts": r.restarts, "retries": r.retries, "batches": len(r.sent),
                "rows": sum(t.num_rows for t in r.sent), "slides": r.slides}
    finally:
        r.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--check-every", type=int, default=5)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="partition-kills-") as work:
        counts = run(Path(work), args.kills, args.seed, args.partitions, args.nodes, args.check_every)
    print("passed:", ", ".join(f"{k} {v}" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
