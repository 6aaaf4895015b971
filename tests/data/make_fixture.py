"""Writes a data directory (wal/ and snapshots/, as the server lays them out) holding every kind
of command, for tests/test_log_format.py: python tests/data/make_fixture.py DIR

The engine is driven directly, with the clock given as data, so the commands are deterministic.
The log keeps every record from the first (the snapshot's segments are not deleted), so the
directory recovers both ways: from the snapshot and the records after it, and from the log alone.
The checked-in copies were written once, each by the code of its format version: never run this
to overwrite one (see logs/README.md)."""
from __future__ import annotations

import os
import sys
import typing
from decimal import Decimal as D

import pyarrow as pa

from windowstore.server import snapshot
from windowstore.server.wal import WriteAheadLog
from windowstore.store import WindowSpec, parse_query
from windowstore.txn import commands
from windowstore.txn.commands import (AbortBatch, Append, CommitBatch, CreateStream, DropStream, Register, Slide,
                                      StageRows, Unregister)
from windowstore.txn.engine import Engine

COLUMNS = (("ts", "int64"), ("k", "string"), ("v", "int64"), ("p", "decimal(12,2)"), ("f", "float64"),
           ("b", "boolean"))


def rows(ts, k, v, p, f, b) -> pa.Table:
    return pa.table({"ts": pa.array(ts, pa.int64()), "k": pa.array(k, pa.string()), "v": pa.array(v, pa.int64()),
                     "p": pa.array([None if x is None else D(x) for x in p], pa.decimal128(12, 2)),
                     "f": pa.array(f, pa.float64()), "b": pa.array(b, pa.bool_())})


def create(name, n, now, subwindow_ms=None, subwindow_rows=None, clock="processing", lateness=0, group_by=(), topk=16):
    return CreateStream(name, COLUMNS, "ts", WindowSpec(n, subwindow_ms, subwindow_rows, clock, lateness, group_by, topk), now)


class Writer:
    """The engine, and the log every command it applied goes to (as Durability.log writes it)."""

    def __init__(self, directory: str):
        self.engine = Engine()
        self.wal = WriteAheadLog(os.path.join(directory, "wal"), fsync="off")
        self.snapshots = snapshot.SnapshotWriter(os.path.join(directory, "snapshots"))
        self.kinds: list[set] = [set()]

    def __call__(self, cmd):
        out = self.engine.apply(cmd)
        self.settle()
        return out

    def settle(self) -> None:
        """Run the scheduler until idle (due slides, periodic queries), then log what was applied."""
        self.engine.sched.run_until_idle()
        for cmd in self.engine.drain():
            self.wal.append(*commands.encode_parts(cmd))
            self.kinds[-1].add(type(cmd).__name__)
        self.wal.flush()

    def tick(self, now: float) -> None:
        self.engine.tick(now)
        self.settle()

    def snapshot(self) -> None:
        self.wal.start_new_segment()
        self.snapshots.write(self.engine.capture(), self.wal.next_lsn - 1)
        self.kinds.append(set())


def write(directory: str, extra=None) -> Engine:
    """Every kind of command before and after a snapshot; `extra(w, now, part)` (a later version's
    additions, make_fixture_v2.py) runs before the snapshot (part 0) and at the end (part 1)."""
    w = Writer(directory)
    now = 1000.0
    # one stream per clock, with options
    w(create("proc", 3, now, subwindow_ms=1000, group_by=("k",), topk=4))
    w(create("evt", 4, now, subwindow_ms=100, clock="event", lateness=50, group_by=("k", "v")))
    w(create("man", 2, now, subwindow_ms=1000, clock="manual"))
    w(create("cnt", 2, now, subwindow_rows=3, clock="manual"))
    # appends with nulls in every column but the time, strings (one not ASCII, one empty) and decimals
    w(Append("proc", rows([1000, 1100, 1200, 1300], ["a", "b", None, "é"], [1, None, 3, -2**62],
                          ["1.25", None, "-0.01", "9999999999.99"], [0.5, None, -1.5, 2.0], [True, None, False, True]),
             "", None, now))
    w.tick(2000.0)
    w(Append("proc", rows([2000, 2500], ["a", ""], [10, 20], ["0.10", "0.20"], [1.0, 2.0], [False, False]), "", None, 2000.0))
    w(Append("evt", rows([0, 50, 120, 130, 260], ["x", "y", "x", None, "z"], [1, 2, 3, 4, 5],
                         ["1.00", "2.00", None, "4.00", "5.00"], [1.0, 2.0, 3.0, 4.0, None], [True, True, None, False, True]),
             "", None, 2000.0))
    w(Append("evt", rows([10, 400], ["late", "x"], [100, 6], ["0.01", "6.00"], [0.0, 6.0], [None, True]), "", None, 2000.0))
    # idempotent batches and a keyed manual slide
    for b in range(3):
        w(Append("man", rows([b * 10, b * 10 + 1], ["a", "b"], [b, 100 + b], [f"{b}.50", None], [None, float(b)],
                             [True, False]), "w", b, 2000.0 + b))
        if b % 2 == 0:
            w(Slide("man", 2000.0 + b, "slider", b))
    w(Append("man", rows([0, 1], ["a", "b"], [0, 100], ["0.50", None], [None, 0.0], [True, False]), "w", 0, 2010.0))
    w(Append("cnt", rows([5, 6, 7, 8, 9, 10, 11], ["a", "b", "c", "d", "e", "f", "g"], [1, 2, 3, 4, 5, 6, 7],
                         ["1", "2", "3", "4", "5", "6", "7"], [1.0] * 7, [True] * 7), "", None, 2010.0))
    # periodic queries: one stream, and a join
    w(Register("", "SELECT k, COUNT(*), SUM(v), SUM(p) FROM proc [RANGE 2 SUBWINDOWS SLIDE 1 SUBWINDOWS] GROUP BY k",
               0, 2020.0, "alice"))
    w(Register("", "SELECT COUNT(*), SUM(a.v), MAX(b.p) FROM proc a [RANGE 2 SUBWINDOWS SLIDE 1 SUBWINDOWS] "
               "JOIN man b [RANGE 2 SUBWINDOWS] ON a.k = b.k", 1, 2020.0, ""))
    w.tick(3000.0)
    # a Spark batch: one attempt staged, left uncommitted over the snapshot
    w(StageRows("man", "spark", 7, "a0", 0, rows([40, 41], ["a", "c"], [7, 8], ["7.00", "8.00"], [7.0, 8.0], [True, None]),
                3000.0))
    every_kind(w, 3000.0, "1", 5, "P3")
    if extra is not None:
        extra(w, 3000.0, 0)
    w.snapshot()

    # after the snapshot: every kind of command again
    now = 3100.0
    w(StageRows("man", "spark", 7, "a1", 0, rows([42], ["a"], [9], ["9.00"], [9.0], [False]), now))
    w(StageRows("man", "spark", 7, "a1", 1, rows([43, 44], ["b", None], [10, None], [None, "11.00"], [10.0, 11.0],
                                                 [True, True]), now))
    w(CommitBatch("man", "spark", 7, (("a1", 3),), True, now))
    w(Append("proc", rows([3100], ["b"], [30], ["0.30"], [3.0], [True]), "", None, now))
    w(Append("cnt", rows([12, 13], ["h", "i"], [8, 9], ["8", "9"], [1.0, 1.0], [False, False]), "", None, now))
    w(Append("evt", rows([500, 520, 600], ["x", "y", "x"], [7, 8, 9], ["7.00", "8.00", "9.00"], [7.0, 8.0, 9.0],
                         [True, True, True]), "", None, now))
    w(Slide("man", now, "slider", 3))
    every_kind(w, now, "2", 11, "P4")
    w(StageRows("man", "spark", 20, "a0", 0, rows([60], ["y"], [60], ["60.00"], [60.0], [None]), now))  # left staged
    w.tick(5000.0)
    if extra is not None:
        extra(w, 5000.0, 1)
    w.wal.close()
    every = {cls.__name__ for cls in typing.get_args(commands.Command)}
    if extra is None:  # v1 was written before SealedSketches (kind 11) existed
        every -= {"SealedSketches"}
    for part, kinds in zip(("before", "after"), w.kinds):
        assert kinds == every, f"the log {part} the snapshot lacks {every - kinds}"
    return w.engine


def every_kind(w: Writer, now: float, n: str, batch_id: int, query_id: str) -> None:
    """A stream created and dropped, a Spark batch committed with a slide and one aborted, a
    periodic query registered and unregistered, a string dictionary compacted."""
    w(create("gone" + n, 2, now, subwindow_ms=10, clock="manual"))
    w(Append("gone" + n, rows([1], ["g"], [1], ["1.00"], [1.0], [True]), "", None, now))
    w(DropStream("gone" + n, now))
    w(StageRows("man", "spark", batch_id, "a0", 0, rows([20], ["b"], [20], ["20.00"], [20.0], [False]), now))
    w(CommitBatch("man", "spark", batch_id, (("a0", 1),), True, now))
    w(StageRows("man", "spark", batch_id + 1, "a0", 0, rows([50], ["z"], [50], ["50.00"], [50.0], [True]), now))
    w(AbortBatch("man", "spark", batch_id + 1, now))
    w(Register("", "SELECT MAX(v) FROM cnt [SLIDE 1 SUBWINDOWS]", 0, now, ""))
    w(Unregister(query_id, now))
    # strings compacted: a dictionary far larger than what the one-sub-window stream still holds
    # (Stream.strings_need_compaction): the last slide finds 4200 of its 4300 codes dead
    name = "dict" + n
    w(CreateStream(name, (("ts", "int64"), ("k", "string")), "ts", WindowSpec(1, 10, clock="manual"), now))
    for first, count in ((0, 2100), (2100, 2100), (4200, 100)):
        w(Append(name, pa.table({"ts": pa.array(range(first, first + count), pa.int64()),
                                 "k": [f"s{i:05d}" for i in range(first, first + count)]}), "", None, now))
        w(Slide(name, now))


def main(directory: str) -> None:
    if os.path.exists(directory):
        sys.exit(f"{directory} exists: a checked-in format version is never written again")
    engine = write(directory)
    engine._check()
    print("digest", engine.digest())
    for name, s in engine.sched.streams.items():
        w = s.window
        print(name, "latest", w.latest, "rows", [sub.rows for sub in w.youngest(w.n)], "buffered", w.buffered_rows,
              "late", w.late_rows, "strings", len(s.strings), "accepted", engine.books[name].accepted_rows)
    for p in engine.periodic.values():
        print(p.query_id, p.priority, repr(p.owner), p.text,
              [(a.slide, a.answer.rows) for a in engine.answers.read(p.query_id, -1, None, 1000)[0]])
    txn = engine.sched.submit(engine.plan(parse_query(
        "SELECT k, COUNT(*), COUNT(v), SUM(v), SUM(p), MIN(f), COUNT(b) FROM proc GROUP BY k")))
    engine.sched.run_until_idle()
    print(txn.result.answer.rows)


if __name__ == "__main__":
    main(sys.argv[1])
