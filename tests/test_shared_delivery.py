"""A shared execution's answers delivered at once (txn/sharing/runtime.py, txn/engine.py): one
AnsweredMany record per execution in the log instead of an Answered per member, each distinct
answer written once; replaying the log gives back every member's answer log exactly (through
the encoded bytes), the queries go on after it without answering a slide twice, and each answer
equals brute force over the rows of the sub-windows it reflects."""
from __future__ import annotations

import json
import random
from decimal import Decimal

import pyarrow as pa
import pytest

from windowstore.store import WindowSpec
from windowstore.txn import commands
from windowstore.txn.answers import to_plain
from windowstore.txn.commands import Answered, AnsweredMany, Append, CreateStream, Register, Slide
from windowstore.txn.engine import Engine, EngineConfig

COLUMNS = (("ts", "int64"), ("k", "string"), ("v", "int64"), ("d", "decimal(12,2)"))
N = 4
# (text, its length): duplicates, CS8 repeats (longer SLIDE) and other lengths of one group
PANELS = [("SELECT k, SUM(v), SUM(d), COUNT(*) FROM p [RANGE {n} SUBWINDOWS SLIDE {s} SUBWINDOWS] GROUP BY k ORDER BY k", n, s)
          for n, s in ((2, 1), (2, 1), (2, 2), (4, 1), (4, 1), (4, 3))] + \
         [("SELECT SUM(v), MAX(v), SUM(d) FROM p [RANGE {n} SUBWINDOWS SLIDE {s} SUBWINDOWS] WHERE v > 2", n, s)
          for n, s in ((1, 1), (1, 1), (3, 1), (3, 2))]


def world(mode: str = "conservative") -> Engine:
    e = Engine(EngineConfig(policy="ttu", sharing=mode))
    e.apply(CreateStream("p", COLUMNS, "ts", WindowSpec(N, 10, None, "manual", 0, ("k",), 4), 0))
    for i, (text, n, s) in enumerate(PANELS):
        e.apply(Register(f"P{i}", text.format(n=n, s=s), 0, 0))
    return e


def batch(rng: random.Random, ts: int) -> list[tuple]:
    return [(ts, rng.choice(["a", "b", None]), rng.choice([None, rng.randint(-3, 9)]),
             rng.choice([None, Decimal(rng.randint(-500, 500)) / 100])) for _ in range(rng.randint(0, 5))]


def table(rows: list[tuple]) -> pa.Table:
    return pa.table({"ts": pa.array([r[0] for r in rows], pa.int64()), "k": pa.array([r[1] for r in rows], pa.string()),
                     "v": pa.array([r[2] for r in rows], pa.int64()),
                     "d": pa.array([r[3] for r in rows], pa.decimal128(12, 2))})


def brute(i: int, rows: list[tuple]) -> list[tuple]:
    """Panel i over `rows`, by hand (SQL's NULL rules: SUM of no value is NULL)."""
    def total(xs):
        xs = [x for x in xs if x is not None]
        return sum(xs) if xs else None
    if i < 6:
        keys = sorted({r[1] for r in rows}, key=lambda k: (k is None, k))
        return [(k, total(r[2] for r in rows if r[1] == k), total(r[3] for r in rows if r[1] == k),
                 sum(1 for r in rows if r[1] == k)) for k in keys]
    kept = [r for r in rows if r[2] is not None and r[2] > 2]
    return [(total(r[2] for r in kept), max((r[2] for r in kept), default=None), total(r[3] for r in kept))]


@pytest.mark.parametrize("mode", ["conservative", "aggressive", "hybrid-lp"])
def test_one_record_per_shared_execution_and_replay_gives_back_every_answer_log(mode):
    rng = random.Random(11)
    live = world(mode)
    log: list = []
    batches: dict[int, list] = {}
    got: list = []
    live.on_answer = lambda qid, r: got.append((qid, r))
    for ts in range(1, 13):
        rows = batch(rng, ts)
        live.apply(Append("p", table(rows), "", None, ts))
        live.apply(Slide("p", ts))
        batches[live.stream("p").window.latest] = rows
        live.sched.run_until_idle()
        live._check()
        log += [commands.decode(commands.encode(c)) for c in live.drain()]
    many = [c for c in log if isinstance(c, AnsweredMany)]
    executions = live.sched.sharing.stats()["executions"]
    assert many and len(many) <= executions, "one record per shared execution (at most)"
    for c in many:
        indexes = c.answer_indexes()
        assert len(c.answers) < len(indexes) and len(set(indexes)) == len(c.answers)
    assert sum(len(c.query_ids()) for c in many) + sum(isinstance(c, Answered) for c in log) == len(got)
    for qid, r in got:
        i = int(qid[1:])
        _, n, _ = PANELS[i]
        rows = [x for v in range(r.slide - n + 1, r.slide + 1) for x in batches.get(v, [])]
        assert r.answer.rows == brute(i, rows), (qid, r.slide)

    replayed = Engine(EngineConfig(policy="ttu", sharing=mode))
    for cmd in log:  # (its first records: the stream and the registrations)
        replayed.replay(cmd)
        replayed._check()
    assert replayed.digest() == live.digest()
    for i in range(len(PANELS)):
        want = live.answers.read(f"P{i}", -2, None, 100)[0]
        have = replayed.answers.read(f"P{i}", -2, None, 100)[0]
        assert want and [json.dumps(to_plain(r)) for r in have] == [json.dumps(to_plain(r)) for r in want]
    replayed.drain()
    replayed.sched.run_until_idle()  # the queries go on after their last logged answers: no slide answered twice
    assert not any(isinstance(c, (Answered, AnsweredMany)) for c in replayed.drain())

