"""A sealed sub-window's memo of window-scan reads (store/memo.py): a query run again takes each
sub-window's contribution it read before instead of scanning it, and its answers stay those of
DuckDB over the same rows, through slides, inline and offloaded reads, under every policy."""
from __future__ import annotations

import dataclasses
import random

import duckdb
import pytest

from windowstore.store import Stream, WindowSpec, parse_query, plan_query
from windowstore.store.memo import MAX_ENTRIES, MISS, ReadMemo
from windowstore.txn import POLICIES, History, Scheduler, check
from windowstore.txn.history import Op

SCHEMA = {"ts": "int64", "src": "string", "bytes": "int64", "lat": "float64"}
N, RANGE = 6, 4
# (windowstore text, DuckDB SQL over table t): window scans whose contributions are kept
MEMOISED = [
    ("SELECT COUNT(*) FROM s [RANGE 4 SUBWINDOWS] WHERE bytes > 1400",
     "SELECT COUNT(*) FROM t WHERE bytes > 1400"),
    ("SELECT SUM(bytes), COUNT(lat), MAX(lat) FROM s [RANGE 4 SUBWINDOWS] WHERE src = 'k3' OR lat < 0.25",
     "SELECT SUM(bytes), COUNT(lat), MAX(lat) FROM t WHERE src = 'k3' OR lat < 0.25"),
    ("SELECT AVG(bytes), MIN(src) FROM s [RANGE 4 SUBWINDOWS] WHERE bytes >= 100 AND bytes <= 900",
     "SELECT AVG(bytes), MIN(src) FROM t WHERE bytes >= 100 AND bytes <= 900"),
    ("SELECT COUNT(*), SUM(bytes) FROM s [RANGE 4 SUBWINDOWS] WHERE src = 'never-seen'",
     "SELECT COUNT(*), SUM(bytes) FROM t WHERE src = 'never-seen'"),
]


def batch(rng: random.Random, rows: int, ts: int) -> dict:
    return {"ts": [ts] * rows, "src": [f"k{rng.randrange(8)}" for _ in range(rows)],
            "bytes": [rng.randrange(40, 1500) for _ in range(rows)],
            "lat": [None if rng.random() < 0.1 else rng.random() for _ in range(rows)]}


class World:
    """A manual-clock stream, its scheduler, and every batch by the slide that sealed it."""

    def __init__(self, policy: str = "ttu", seed: int = 1):
        self.rng = random.Random(seed)
        self.now = [0]
        self.history = History()
        self.sched = Scheduler(policy, clock=lambda: self.now[0], history=self.history)
        self.stream = Stream("s", SCHEMA, WindowSpec(subwindows=N, subwindow_ms=1, clock="manual"), 0)
        self.sched.add_stream(self.stream)
        self.batches: list[dict] = []

    def slide(self, rows: int = 50) -> None:
        b = batch(self.rng, rows, len(self.batches))
        self.stream.append(b)
        self.batches.append(b)
        self.sched.request_slide("s")
        assert self.sched.step() == "slide"
        self.sched._check()
        self.stream.window._check()

    def run(self, text: str):
        txn = self.sched.submit(plan_query(parse_query(text), self.stream))
        while self.sched.step() is not None:
            self.sched._check()
        self.stream.window._check()  # (its sub-windows' memos among them)
        assert txn.result is not None, txn.error
        return txn.result

    def duckdb(self, sql: str, result) -> list[tuple]:
        """DuckDB's answer over the rows of the sub-windows the result reflects."""
        versions = range(max(0, result.slide - RANGE + 1), result.slide + 1)
        con = duckdb.connect()
        con.execute("CREATE TABLE t (ts BIGINT, src VARCHAR, bytes BIGINT, lat DOUBLE)")
        for v in versions:
            b = self.batches[v]
            if b["ts"]:
                con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)",
                                list(zip(b["ts"], b["src"], b["bytes"], b["lat"])))
        return [tuple(r) for r in con.execute(sql).fetchall()]


def same(got: list[tuple], want: list[tuple]) -> bool:
    return len(got) == len(want) and all(
        len(g) == len(w) and all(x == y or (isinstance(x, float) and x == pytest.approx(y, rel=1e-12)) for x, y in zip(g, w))
        for g, w in zip(got, want))


def test_a_repeated_filtered_scan_reads_no_rows_and_equals_duckdb():
    w = World()
    for _ in range(N):
        w.slide()
    for text, sql in MEMOISED:
        first = w.run(text)
        recalled = w.sched.reads_recalled
        again = w.run(text)
        assert w.sched.reads_recalled - recalled == RANGE  # every read taken from the memo
        assert again.answer.rows == first.answer.rows
        assert same(again.answer.rows, w.duckdb(sql, again)), (text, again.answer.rows)


def test_after_slides_only_the_new_subwindows_are_scanned_and_answers_equal_duckdb():
    w = World()
    for _ in range(N):
        w.slide()
    for text, _ in MEMOISED:
        w.run(text)
    for k in range(1, 3 * N):
        for _ in range(k % 3):
            w.slide(w.rng.randrange(0, 80))
        for text, sql in MEMOISED:
            recalled = w.sched.reads_recalled
            got = w.run(text)
            assert w.sched.reads_recalled - recalled == RANGE - min(RANGE, k % 3)  # the rest was scanned
            assert same(got.answer.rows, w.duckdb(sql, got)), (text, got.slide, got.answer.rows)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_scan_run_again_at_once_recalls_its_reads_in_one_operation_and_records_each(policy):
    """run_now (the server's call when nothing else waits) takes a repeated scan's memoised reads
    in one operation: no operation boundary between them (go_on is never asked), the same read
    events in the same order as the first run's, and DuckDB's answer."""
    w = World(policy)
    for _ in range(N):
        w.slide()
    for text, sql in MEMOISED:
        plan = plan_query(parse_query(text), w.stream)
        between: list = []
        first = w.sched.run_now(plan, go_on=lambda: between.append(1) or True)
        assert first is not None and first.done and len(between) == RANGE - 1  # scanned: an operation per read
        between.clear()
        recalled = w.sched.reads_recalled
        again = w.sched.run_now(plan, go_on=lambda: between.append(1) or True)
        assert again is not None and again.done and between == []
        assert w.sched.reads_recalled - recalled == RANGE
        w.sched._check()

        def reads(txn):
            return [(e["subwindow"], e["version"]) for e in w.history.events if e["txn"] == txn.id and e["op"] == Op.READ]
        assert len(reads(again)) == RANGE and reads(again) == reads(first)
        assert again.result.answer.rows == first.result.answer.rows
        assert same(again.result.answer.rows, w.duckdb(sql, again.result)), (policy, text)
    report = check(w.history.events)
    assert report.errors == []
    assert report.violations("ws" if policy == "ws" else "lws") == []


def test_recalled_reads_at_once_stop_where_the_memo_has_none():
    """After a slide the newest sub-window is not in the memo: run_now recalls the reads before it
    in one operation and scans it in the next (ttu reads the newest first, so it is scanned first
    and the rest recalled after it)."""
    w = World("lws")  # oldest first: the recalled reads come first, the new sub-window last
    for _ in range(N):
        w.slide()
    text, sql = MEMOISED[0]
    plan = plan_query(parse_query(text), w.stream)
    w.sched.run_now(plan)
    w.slide()
    between: list = []
    txn = w.sched.run_now(plan, go_on=lambda: between.append(1) or True)
    assert txn is not None and txn.done and len(between) == 1  # the recalled reads, then the scan of the new one
    assert same(txn.result.answer.rows, w.duckdb(sql, txn.result))
    report = check(w.history.events)
    assert report.errors == [] and report.violations("lws") == []


# run_now's variants: the server's default policy (ttu) in make test, the others in make test-long
@pytest.mark.parametrize("policy, at_once", [
    *((p, False) for p in POLICIES),
    *((p, True) if p == "ttu" else pytest.param(p, True, marks=pytest.mark.long) for p in POLICIES)],
    ids=[*(f"{p}-stepped" for p in POLICIES), *(f"{p}-run_now" for p in POLICIES)])
def test_memoised_scans_interleaved_with_slides_keep_histories_isolated_and_answers_right(policy, at_once):
    """Random interleavings of appends, slides and the scheduler's steps of several queries in
    flight (`run_now`: a query submitted when nothing else runs is answered at once, as the
    server does, its memoised reads recalled in one operation): the checker finds the history LWS
    (WS for ws) and every answer equals DuckDB over the sub-windows it reflects."""
    w = World(policy, seed=7)
    for _ in range(N):
        w.slide()
    pending = batch(w.rng, 0, 0)
    done = []

    def step():
        nonlocal pending
        before = w.stream.window.latest
        w.now[0] += 1
        did = w.sched.step()
        w.sched._check()
        w.stream.window._check()
        if w.stream.window.latest != before:  # slide `latest` sealed what was appended since the last
            assert w.stream.window.latest == before + 1 == len(w.batches)
            w.batches.append(pending)
            pending = batch(w.rng, 0, 0)
        return did

    for _ in range(150):
        r = w.rng.random()
        if r < 0.2:
            b = batch(w.rng, w.rng.randrange(0, 60), len(w.batches))
            w.stream.append(b)
            for c in pending:
                pending[c] = pending[c] + b[c]
        elif r < 0.3:
            w.sched.request_slide("s")
        elif r < 0.55:
            i = w.rng.randrange(len(MEMOISED))
            plan = plan_query(parse_query(MEMOISED[i][0]), w.stream)
            if not (at_once and w.sched.run_now(plan, on_done=lambda t, i=i: done.append((i, t)))):
                w.sched.submit(plan, on_done=lambda t, i=i: done.append((i, t)))
        else:
            step()
    while step() is not None:
        pass
    report = check(w.history.events)
    assert report.errors == []
    assert report.violations("ws" if policy == "ws" else "lws") == []
    assert w.sched.reads_recalled > 0 and len(done) > 10
    for i, t in done:
        assert t.result is not None, t.error
        assert same(t.result.answer.rows, w.duckdb(MEMOISED[i][1], t.result)), (policy, MEMOISED[i][0], t.result)


def test_offloaded_reads_fill_the_memo_and_the_next_run_issues_no_read_job():
    w = World()
    for _ in range(N):
        w.slide()
    jobs: list = []
    w.sched.offload, w.sched.offload_ms = jobs.append, 0  # every window-scan read and merge is a job
    text, sql = MEMOISED[0]

    def run_with_jobs():
        txn = w.sched.submit(plan_query(parse_query(text), w.stream))
        reads = 0
        while not txn.done:
            if w.sched.step() is None:
                job = jobs.pop(0)
                reads += job.kind == "read"
                w.sched.complete(job, job.run())
            w.sched._check()
        return txn.result, reads

    first, reads = run_with_jobs()
    assert reads == RANGE
    again, reads = run_with_jobs()
    assert reads == 0 and again.answer.rows == first.answer.rows
    assert same(again.answer.rows, w.duckdb(sql, again))


@pytest.mark.parametrize("text", [
    "SELECT src, COUNT(*) FROM s WHERE bytes > 1400 GROUP BY src",       # per-key arrays
    "SELECT MEDIAN(bytes) FROM s WHERE bytes > 1400",                     # keeps the values
    "SELECT COUNT(DISTINCT src) FROM s WHERE bytes > 1400",              # keeps the distinct values
    "SELECT src, bytes FROM s WHERE bytes > 1400",                       # a projection: the rows
    "SELECT SUM(bytes) FROM s",                                          # a probe reads no rows
])
def test_reads_whose_contribution_grows_with_the_rows_are_not_kept(text):
    w = World()
    for _ in range(N):
        w.slide()
    plan = plan_query(parse_query(text), w.stream)
    assert plan.memo_key is None
    w.run(text)
    w.run(text)
    assert w.sched.reads_recalled == 0
    assert all(len(sub.memo) == 0 for sub in w.stream.window.subs if sub is not None)


def test_a_memo_keeps_at_most_max_entries_queries_the_oldest_put_leaving_first():
    memo = ReadMemo()
    for k in range(MAX_ENTRIES + 5):
        memo.put(("q", k), k)
        memo._check()
    assert len(memo) == MAX_ENTRIES
    assert memo.get(("q", 0)) is MISS and memo.get(("q", 4)) is MISS
    assert memo.get(("q", 5)) == 5 and memo.get(("q", MAX_ENTRIES + 4)) == MAX_ENTRIES + 4
    memo.put(("q", 5), None)  # None is a contribution (MIN of no rows), told apart from a miss
    assert memo.get(("q", 5)) is None and len(memo) == MAX_ENTRIES


def test_a_copy_of_a_subwindow_with_other_columns_starts_with_an_empty_memo():
    w = World()
    for _ in range(N):
        w.slide()
    w.run(MEMOISED[0][0])
    sub = w.stream.window.subs[w.stream.window.latest % N]
    assert len(sub.memo) == 1
    assert len(dataclasses.replace(sub, rows=0).memo) == 0  # (a dictionary remap replaces sub-windows so)
