"""One cache of sub-windows' contributions (store/memo.py) for lone window scans and the readers of
shared executions (txn/sharing/runtime.py): one key, one bound, kept in the sub-window. A kept
None (MIN of no rows) is a hit; a lone run finds what a shared reader kept and the other way round;
answers are checked against brute force over the batches of the sub-windows they reflect."""
from __future__ import annotations

import random
import threading

import pyarrow as pa

from windowstore.store import WindowSpec, parse_query, plan_query
from windowstore.store.memo import MAX_ENTRIES, MAX_LARGE, MISS, ReadMemo, contribution_key
from windowstore.txn.commands import Append, CreateStream, Register, Slide
from windowstore.txn.engine import Engine, EngineConfig
from windowstore.txn.sharing.runtime import SharedPlan

COLUMNS = (("ts", "int64"), ("k", "string"), ("v", "int64"))
N = 6


class World:
    """An engine with sharing on, one manual-clock stream, and every batch by its slide."""

    def __init__(self, mode: str = "conservative", seed: int = 5):
        self.rng = random.Random(seed)
        self.e = Engine(EngineConfig(policy="ttu", sharing=mode))
        self.e.apply(CreateStream("p", COLUMNS, "ts", WindowSpec(N, 10, None, "manual", 0, ("k",), 4), 0))
        self.batches: dict[int, list[tuple]] = {}
        self.answers: list = []
        self.e.on_answer = lambda qid, r: self.answers.append((qid, r))

    def slide(self, ts: int, n: int = 6) -> None:
        batch = [(ts, self.rng.choice("ab"), self.rng.randint(-5, 20)) for _ in range(n)]
        self.e.apply(Append("p", pa.table({"ts": pa.array([b[0] for b in batch], pa.int64()),
                                           "k": pa.array([b[1] for b in batch], pa.string()),
                                           "v": pa.array([b[2] for b in batch], pa.int64())}), "", None, ts))
        self.e.apply(Slide("p", ts))
        self.batches[self.e.stream("p").window.latest] = batch
        self.e.sched.run_until_idle()
        self.e.sched._check()
        self.e.stream("p").window._check()

    def rows(self, slide: int, n: int) -> list[tuple]:
        return [r for v in range(slide - n + 1, slide + 1) for r in self.batches.get(v, [])]


def test_each_sealed_sub_window_is_read_once_per_reader_also_with_no_row_selected():
    """MIN and MAX of no rows are NULL: each sealed sub-window is read once per reader over the
    whole run, also those where the WHERE selects no row, and every answer is brute force's."""
    w = World()
    lengths = (1, 3, N)
    for i, n in enumerate(lengths):
        w.e.apply(Register(f"M{i}", f"SELECT MIN(v), MAX(v) FROM p [RANGE {n} SUBWINDOWS SLIDE 1 SUBWINDOWS] "
                                    f"WHERE v > 18", 0, 0))
    sharing = w.e.sched.sharing
    reads: list[int] = []
    for task in sharing.tasks.values():  # (the group's one reader is one of these plans)
        task.plan.read = lambda sub, real=task.plan.read: reads.append(sub.slide) or real(sub)
    for ts in range(1, 4 * N):
        w.slide(ts)
    empties = [v for v, b in w.batches.items() if not any(r[2] > 18 for r in b)]
    assert empties, "some sub-window has no row with v > 18 (its contribution is None)"
    assert sorted(reads) == sorted(set(reads)), "a sub-window read twice: its kept contribution was taken for a miss"
    assert sharing.stats()["executions"] == 4 * N - 1 and sharing.stats()["contributions_reused"] > 0
    assert {qid for qid, _ in w.answers} == {"M0", "M1", "M2"}
    for qid, r in w.answers:
        n = lengths[int(qid[1:])]
        kept = [x[2] for x in w.rows(r.slide, n) if x[2] > 18]
        assert r.answer.rows == [(min(kept), max(kept)) if kept else (None, None)], (qid, r.slide)


def test_a_kept_none_contribution_is_a_hit_for_the_next_shared_execution():
    """A reader whose contribution for a sub-window is None (the memo keeps any value; MISS is its
    miss) is not read again by the next execution of its group."""
    w = World()
    for ts in range(1, N + 1):
        w.slide(ts)
    s = w.e.stream("p")
    texts = ("SELECT MIN(v) FROM p [RANGE 2 SUBWINDOWS] WHERE v > 100", "SELECT MIN(v) FROM p [RANGE 4 SUBWINDOWS] WHERE v > 100")
    plans = [plan_query(parse_query(t), s) for t in texts]
    reads: list[int] = []
    plans[0].read = lambda sub: reads.append(sub.slide)  # (returns None: the value under test)
    sub = s.window.subs[s.window.latest % N]
    for _ in range(3):  # three executions of the group over the same sealed sub-window
        shared = SharedPlan(plans)
        got = shared.read(sub)
        assert got[1] == [None]
    assert reads == [sub.slide] and sub.memo.get(contribution_key(plans[0])) is None


def test_a_lone_run_takes_what_a_shared_reader_kept_and_the_other_way_round():
    """The same query at other lengths, run alone, reads no row of a sub-window a shared reader
    read (one key: RANGE, SLIDE and LIMIT are not part of it); a group registered after lone runs
    takes theirs."""
    w = World()
    text = "SELECT SUM(v), COUNT(*) FROM p [RANGE {n} SUBWINDOWS{slide}] WHERE k = 'a'"
    for i, n in enumerate((2, N)):
        w.e.apply(Register(f"S{i}", text.format(n=n, slide=" SLIDE 1 SUBWINDOWS"), 0, 0))
    for ts in range(1, 2 * N):
        w.slide(ts)
    sched = w.e.sched
    recalled = sched.reads_recalled
    latest = w.e.stream("p").window.latest
    txn = sched.submit(plan_query(parse_query(text.format(n=4, slide="")), w.e.stream("p")))
    sched.run_until_idle()
    assert sched.reads_recalled - recalled == 4, "every read taken from the shared reader's memo"
    kept = [x[2] for x in w.rows(latest, 4) if x[1] == "a"]
    assert txn.result.answer.rows == [(sum(kept) if kept else None, len(kept))]

    # the other way round: lone runs first, then a group of the same query reads nothing they read
    w2 = World(seed=9)
    for ts in range(1, N + 1):
        w2.slide(ts)
    lone = plan_query(parse_query(text.format(n=N, slide="")), w2.e.stream("p"))
    w2.e.sched.submit(lone)
    w2.e.sched.run_until_idle()
    for i, n in enumerate((3, N)):
        w2.e.apply(Register(f"T{i}", text.format(n=n, slide=" SLIDE 1 SUBWINDOWS"), 0, 0))
    reads: list[int] = []
    for task in w2.e.sched.sharing.tasks.values():
        task.plan.read = lambda sub, real=task.plan.read: reads.append(sub.slide) or real(sub)
    w2.e.sched.run_until_idle()
    assert w2.e.sched.sharing.stats()["executions"] == 1 and reads == []
    assert w2.e.sched.sharing.stats()["contributions_reused"] == N
    for qid, r in w2.answers:
        n = 3 if qid == "T0" else N
        kept = [x[2] for x in w2.rows(r.slide, n) if x[1] == "a"]
        assert r.answer.rows == [(sum(kept) if kept else None, len(kept))], qid


def test_one_key_for_both_paths_ignores_range_slide_limit_and_as_of():
    w = World()
    for ts in range(1, N + 1):
        w.slide(ts)
    s = w.e.stream("p")
    plans = [plan_query(parse_query(t), s) for t in (
        "SELECT COUNT(*) FROM p [RANGE 2 SUBWINDOWS] WHERE v > 3",
        "SELECT COUNT(*) FROM p [RANGE 5 SUBWINDOWS] WHERE v > 3",
        "SELECT COUNT(*) FROM p [RANGE 3 SUBWINDOWS] AS OF SLIDE 4 WHERE v > 3",
    )]
    assert len({contribution_key(p) for p in plans}) == 1
    assert {p.memo_key for p in plans} == {contribution_key(plans[0])}
    other = plan_query(parse_query("SELECT COUNT(*) FROM p [RANGE 2 SUBWINDOWS] WHERE v > 4"), s)
    assert contribution_key(other) != contribution_key(plans[0])


def test_large_contributions_are_bounded_apart_oldest_first():
    memo = ReadMemo()
    for k in range(MAX_LARGE + 3):
        memo.put(("big", k), k, large=True)
        memo._check()
    assert len(memo) == MAX_LARGE
    assert memo.get(("big", 0)) is MISS and memo.get(("big", 2)) is MISS and memo.get(("big", 3)) == 3
    for k in range(MAX_ENTRIES):
        memo.put(("small", k), k)
        memo._check()
    assert len(memo) == MAX_ENTRIES and memo.get(("small", MAX_ENTRIES - 1)) == MAX_ENTRIES - 1
    assert memo.get(("big", 3)) is MISS, "the oldest put leaves first, whatever its size"


def test_puts_from_several_threads_keep_the_bounds():
    """Shared reads may be offloaded to worker threads: concurrent puts (with evictions) never
    break the memo's bounds or lose its large keys' bookkeeping."""
    memo = ReadMemo()
    errors: list = []

    def put(t: int) -> None:
        try:
            for k in range(2000):
                memo.put((t, k), k, large=k % 3 == 0)
        except Exception as e:  # noqa: BLE001 - any error fails the test below
            errors.append(e)
    threads = [threading.Thread(target=put, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    memo._check()
    assert len(memo) == MAX_ENTRIES
