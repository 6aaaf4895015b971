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
from windowstore.txn.answers import many_from_plain, plain_meta, to_plain
from windowstore.txn.commands import Answered, AnsweredMany, Append, CreateStream, Register, Slide
from windowstore.txn.engine import Engine, EngineConfig

COLUMNS = (("ts", "int64"), ("k", "string"), ("v", "int64"), ("d", "decimal(12,2)"))
N = 4
# (text, its length): duplicates, CS8 repeats (longer SLIDE) and other lengths of one group
PANELS = [("SELECT k, SUM(v), SUM(d), COUNT(*) FROM p [RANGE {n} SUBWINDOWS SLIDE {s} SUBWINDOWS] GROUP BY k ORDER BY k", n, s)
          for n, s in ((2, 1), (2, 1), (2, 2), (4, 1), (4, 1), (4, 3))] + \
         [("SELECT SUM(v), MAX(v), SUM(d) FROM p [RANGE {n} SUBWINDOWS SLIDE {s} SUBWINDOWS] WHERE v > 2", n, s)
          for n, s in ((1, 1), (1, 1), (3, 1), (3, 2))]


def world(mode: str = "conservative", policy: str = "ttu") -> Engine:
    e = Engine(EngineConfig(policy=policy, sharing=mode))
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



def run_slides(e: Engine, rng: random.Random, slides: range, batches: dict | None = None, extra=None) -> list:
    """A batch per slide (and `extra(ts)`'s rows), each slide's queries run; the records logged,
    through their encoding. `batches`: each slide's rows by the slide they went into."""
    log: list = []
    for ts in slides:
        rows = batch(rng, ts) + (extra(ts) if extra else [])
        e.apply(Append("p", table(rows), "", None, ts))
        e.apply(Slide("p", ts))
        if batches is not None:
            batches[e.stream("p").window.latest] = rows
        e.sched.run_until_idle()
        e._check()
        log += [commands.decode(commands.encode(c)) for c in e.drain()]
    return log


def rows_form(c: AnsweredMany) -> AnsweredMany:
    """A columnar record (round 16) written as a round-15 server wrote it: per member its query,
    its answer's index and all its fields."""
    answers = json.loads(json.dumps(list(c.answers)))  # (from_plain makes the rows' decimals Decimals in place)
    pairs = many_from_plain(json.loads(json.dumps(answers)), c.members, c.common)
    return AnsweredMany(answers,
                        [[qid, i, plain_meta(r)] for (qid, r), i in zip(pairs, c.answer_indexes())], c.now_ms)


def test_columnar_records_and_rows_form_records_replay_to_the_same_answer_logs():
    """Compatibility of the record format: a shared execution's record is columnar since round 16
    (its members' common fields once, then a list per field); a log written before (rows form,
    no `common`) replays as before, to the same answer logs, and is still written byte for byte
    as then (no `common` key) where the rows form is used."""
    live = world()
    log = run_slides(live, random.Random(5), range(1, 10))
    many = [c for c in log if isinstance(c, AnsweredMany)]
    assert many and all(c.common is not None and isinstance(c.members, dict) for c in many)
    for c in many:
        n = len(c.members["query_id"])
        assert all(len(col) == n for col in c.members.values()), "a value per member in every column"
    old = [rows_form(c) if isinstance(c, AnsweredMany) else c for c in log]
    for c in old:
        if isinstance(c, AnsweredMany):
            head = commands.encode(c)[6:]
            assert b'"common"' not in head and b'"members":[[' in head
    replays = []
    for records in (log, [commands.decode(commands.encode(c)) for c in old]):
        e = Engine(EngineConfig(policy="ttu", sharing="conservative"))
        for cmd in records:
            e.replay(cmd)
        e._check()
        replays.append(e)
    assert replays[0].digest() == replays[1].digest() == live.digest()
    for i in range(len(PANELS)):
        want = [json.dumps(to_plain(r)) for r in live.answers.read(f"P{i}", -2, None, 100)[0]]
        assert want
        for e in replays:
            assert [json.dumps(to_plain(r)) for r in e.answers.read(f"P{i}", -2, None, 100)[0]] == want


def test_members_answered_alike_share_one_result_and_one_spawn_per_slide(monkeypatch):
    """Exact duplicates (P0 and P1: registered together, the same SLIDE) are answered alike: one
    Result in both answer logs. The shared scheduler looks for due tasks once per slide, not again
    after each joint execution, when no due task waited for one; no answer is late."""
    live = world()
    spawns = []
    real = type(live.sched.sharing).spawn
    monkeypatch.setattr(type(live.sched.sharing), "spawn", lambda self, sched: (spawns.append(1), real(self, sched))[1])
    late = []
    live.on_answer = lambda qid, r: late.append(r.late_slides)
    rng = random.Random(3)
    run_slides(live, rng, range(1, 4))
    spawns.clear()
    run_slides(live, rng, range(4, 12))
    assert len(spawns) == 8, "one look for due tasks per slide"
    assert live.sched.sharing.stats()["executions"] >= 16, "several joint executions per slide"
    assert late and not any(late)
    a, b = live.answers.newest("P0"), live.answers.newest("P1")
    assert a is b and a.slide == live.stream("p").window.latest
    live._check()


def test_a_slide_during_a_joint_execution_answers_its_members_again_without_waiting():
    """A slide that comes while a joint execution runs makes its SLIDE 1 members due again: under
    ws the execution answers the slide of its snapshot, and when it ends its members are started
    again at once (a due task that waited for them), not at the next slide."""
    live = world(policy="ws")
    rng = random.Random(8)
    run_slides(live, rng, range(1, 4))
    live.apply(Append("p", table(batch(rng, 4)), "", None, 4))
    live.apply(Slide("p", 4))
    while not live.sched.active:
        assert live.sched.step() is not None
    for _ in range(2):
        live.sched.step()  # a joint execution has begun and read
    assert live.sched.sharing.busy
    live.apply(Append("p", table(batch(rng, 5)), "", None, 5))
    live.apply(Slide("p", 5))
    live.sched.run_until_idle()
    latest = live.stream("p").window.latest
    for i, (_, _, s) in enumerate(PANELS):
        if s == 1:
            assert live.answers.newest(f"P{i}").slide == latest, f"P{i}"
    live._check()


def alternating_world(mode: str = "conservative") -> Engine:
    """One output's members (the same query) registered with SLIDEs 1, 2, 3, 1, 2, 3, ...: each
    member's lateness and earliness differ from its neighbour's in registration order, and those
    of SLIDE 2 and 3 are CS8 repeats of the SLIDE 1 ones."""
    e = Engine(EngineConfig(policy="ttu", sharing=mode))
    e.apply(CreateStream("p", COLUMNS, "ts", WindowSpec(N, 10, None, "manual", 0, ("k",), 4), 0))
    text, n, _ = PANELS[3]
    for i in range(9):
        e.apply(Register(f"A{i}", text.format(n=n, s=1 + i % 3), 0, 0))
    return e


@pytest.mark.parametrize("mode", ["conservative", "aggressive", "hybrid-lp"])
def test_cs8_repeats_are_answered_at_their_own_slide_and_alike_members_share_results(mode):
    """A CS8 repeat (SLIDE 2 or 3 beside SLIDE 1 members of one output) is answered when it is
    due, at once when new, then every SLIDE slides, never early nor late, though its output runs
    every slide; members
    answered alike share one Result though they alternate with others in the output; every
    member's answer log is still its own (checked by hand: its execution number, its slide, how
    early each came), equals brute force, and replaying the log (ReadAnswers after a restart)
    gives back exactly the same logs."""
    live = alternating_world(mode)
    batches: dict[int, list] = {}
    log = run_slides(live, random.Random(21), range(1, 14), batches)
    assert any(isinstance(c, AnsweredMany) for c in log)
    by_slide: dict[int, list] = {}
    first = live.answers.read("A0", -2, None, 100)[0][0].slide
    for i in range(9):
        every = 1 + i % 3
        answers = live.answers.read(f"A{i}", -2, None, 100)[0]
        assert len(answers) >= 12 // every and answers[0].slide == first, "a new repeat is answered at once too"
        for k, r in enumerate(answers):
            assert r.execution == k + 1 and r.late_slides == 0 and r.early_slides == 0, (i, r.slide)
            if k:
                assert r.slide - answers[k - 1].slide == every, (i, r.slide)
            rows = [x for v in range(r.slide - PANELS[3][1] + 1, r.slide + 1) for x in batches.get(v, [])]
            assert r.answer.rows == brute(3, rows)
            by_slide.setdefault(r.slide, []).append(id(r))
    assert any(len(set(ids)) < len(ids) for ids in by_slide.values()), "members answered alike share a Result"
    assert live.sched.sharing.stats()["early_runs"] == 0
    replayed = Engine(EngineConfig(policy="ttu", sharing=mode))
    for cmd in log:
        replayed.replay(cmd)
    replayed._check()
    for i in range(9):
        want = [json.dumps(to_plain(r)) for r in live.answers.read(f"A{i}", -2, None, 100)[0]]
        assert [json.dumps(to_plain(r)) for r in replayed.answers.read(f"A{i}", -2, None, 100)[0]] == want


def test_a_joint_executions_plan_is_kept_while_its_members_stay_and_made_again_when_they_change(monkeypatch):
    """The SharedPlan of a group's joint executions is reused while no query comes or goes (its
    per-execution counts start again each time: the stats equal those of a run that builds a
    new plan for every execution), and a new one is made once a query registers."""
    from windowstore.txn.sharing import runtime

    def run(fresh: bool):
        if fresh:
            monkeypatch.setattr(runtime.SharedTasks, "_shared_plan",
                                lambda self, key, outputs, plans: runtime.SharedPlan(
                                    plans, read_keys=[self._read_key(m[0]) for m in outputs]))
        e = world()
        for i, where in enumerate(("WHERE v < 3", "WHERE v >= 3", "WHERE v IS NOT NULL")):  # the third: a cover's
            e.apply(Register(f"C{i}", f"SELECT SUM(v), COUNT(*) FROM p [RANGE 3 SUBWINDOWS SLIDE 1 SUBWINDOWS] {where}",
                             0, 0))
        plans: list = []
        real = runtime.SharedTasks._submit

        def submit(self, sched, ex):
            real(self, sched, ex)
            got = self.busy.get(next(iter(ex.early)))
            if got is not None and isinstance(got.plan, runtime.SharedPlan):
                plans.append(got.plan)
        monkeypatch.setattr(runtime.SharedTasks, "_submit", submit)
        rng = random.Random(4)
        run_slides(e, rng, range(1, 7))
        plans.append(None)  # (where C3 registers)
        e.apply(Register("C3", "SELECT SUM(v), COUNT(*) FROM p [RANGE 2 SUBWINDOWS SLIDE 1 SUBWINDOWS] WHERE v < 3", 0, 0))
        run_slides(e, rng, range(7, 10))
        e._check()
        monkeypatch.undo()
        answers = {q: [json.dumps(to_plain(r)) for r in e.answers.read(q, -2, None, 100)[0]] for q in e.periodic}
        return e.sched.sharing.stats(), answers, plans

    kept_stats, kept_answers, plans = run(fresh=False)
    fresh_stats, fresh_answers, _ = run(fresh=True)
    assert kept_stats == fresh_stats and kept_stats["cover_executions_saved"] > 0
    assert kept_answers == fresh_answers
    cut = plans.index(None)
    before, after = {id(p) for p in plans[:cut]}, {id(p) for p in plans[cut + 1:]}  # (all alive: in `plans`)
    assert cut > len(before), "a plan runs several executions"
    assert after and not before & after, "made again when a query registers"


def test_a_where_that_selects_every_row_of_a_sub_window_answers_as_brute_force():
    """A WHERE that keeps every row of a sub-window (ts > 3 from slide 4 on: none before) reads
    the columns as they are (store/planner/read.py): per key, nulls in the key and the values
    included, the answers equal brute force over the rows it selects."""
    e = Engine(EngineConfig(policy="ttu", sharing="conservative"))
    e.apply(CreateStream("p", COLUMNS, "ts", WindowSpec(N, 10, None, "manual", 0, ("k",), 4), 0))
    text = PANELS[0][0].format(n=3, s=1).replace(" GROUP BY", " WHERE ts > 3 GROUP BY")
    for q in ("W0", "W1"):
        e.apply(Register(q, text, 0, 0))
    batches: dict[int, list] = {}
    run_slides(e, random.Random(17), range(1, 10), batches, lambda ts: [(ts, None, None, None), (ts, "a", 1, None)])
    answers = e.answers.read("W0", -2, None, 100)[0]
    assert len(answers) >= 8
    for r in answers:
        rows = [x for v in range(r.slide - 2, r.slide + 1) for x in batches.get(v, []) if x[0] > 3]
        assert r.answer.rows == brute(0, rows), r.slide
