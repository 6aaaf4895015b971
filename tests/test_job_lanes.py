"""One-time queries do not queue behind periodic work (issues 30 and 33): offloaded scheduler jobs
run in two lanes, one for periodic executions (registered queries, shared groups) and one for
one-time queries, each with a job thread of its own (server/driver/job_threads.py), and the
scheduler lets one offloadable window scan go on per lane (Scheduler._choose). So a one-time
window scan begins, reads and answers while a periodic execution's final merge is still running;
within a lane, one scan at a time as before. Answers are checked against DuckDB over the rows of
the window each answer reports (or a brute-force median), histories against the checker."""
from __future__ import annotations


import duckdb
import pyarrow as pa
import pytest

from conftest import hold_final_merges, wait_for
from windowstore.store import Stream, WindowSpec, parse_query, plan_query
from windowstore.txn import History, Scheduler, check
from windowstore.txn.kinds import JobKind, QueryKind

MEDIAN = "SELECT MEDIAN(v), COUNT(*) FROM s"
FILTERED = "SELECT SUM(v), COUNT(*) FROM s WHERE v > 0"


# -- the scheduler alone: jobs run by hand -------------------------------------------------------------
def setup(policy: str, values=(3, 1, 4, 1), fallback_after: int = 2):
    now = [0]
    h = History()
    s = Stream("s", {"ts": "int64", "v": "int64"}, WindowSpec(subwindows=len(values), subwindow_ms=1, clock="manual"), 0)
    sched = Scheduler(policy, clock=lambda: now[0], history=h, fallback_after=fallback_after)
    sched.add_stream(s)
    for j, v in enumerate(values):
        s.append({"ts": [j], "v": [v]})
        sched.request_slide("s")
        assert sched.step() == "slide"
    jobs: list = []
    sched.offload, sched.offload_ms = jobs.append, 0  # every window-scan read and merge is a job
    return sched, s, h, jobs


def scan(s, text=MEDIAN):
    return plan_query(parse_query(text), s, access="window")


def lower_median(values) -> int:
    return sorted(values)[(len(values) - 1) // 2]


def take(jobs, lane: QueryKind, kind: JobKind | None = None):
    """The job in flight of `lane` (and `kind`), out of the list."""
    job = next(j for j in jobs if j.txn.kind == lane and (kind is None or j.kind == kind))
    jobs.remove(job)
    return job


def complete(sched, job) -> str:
    out = sched.complete(job, job.run())
    sched._check()
    return out


def periodic_merge_in_flight(sched, jobs, s):
    """A registered periodic scan reads its window (its reads completed) and issues its final
    merge, which is left in flight."""
    answers: list = []
    sched.register(scan(s), every=1, on_answer=answers.append)
    while True:
        step = sched.step()
        sched._check()
        job = next((j for j in jobs if j.txn.kind == QueryKind.PERIODIC), None)
        if job is not None and job.kind == JobKind.FINISH:
            return job, answers
        if job is not None:
            complete(sched, take(jobs, QueryKind.PERIODIC))
        else:
            assert step is not None, "the periodic execution stopped before its final merge"


@pytest.mark.parametrize("policy", ["lws", "ttu", "ttu-rescan", "ws"])
def test_a_one_time_scan_answers_while_a_periodic_final_merge_is_in_flight(policy):
    values = (3, 1, 4, 1)
    sched, s, h, jobs = setup(policy, values)
    merge, answers = periodic_merge_in_flight(sched, jobs, s)
    onetime = sched.submit(scan(s))
    while not onetime.done:
        step = sched.step()
        sched._check()
        mine = [j for j in jobs if j.txn.kind == QueryKind.ONETIME]
        assert len(mine) <= 1
        if mine:
            assert len(jobs) == 2, "both lanes have a job in flight at once"
            complete(sched, take(jobs, QueryKind.ONETIME))
        else:
            assert step is not None, "the one-time scan waits behind the periodic merge"
    assert merge.txn.job is merge and not merge.txn.done, "the periodic merge is still in flight"
    assert onetime.result.answer.rows == [(lower_median(values), len(values))]
    assert complete(sched, take(jobs, QueryKind.PERIODIC)) == "commit"
    assert [a.answer.rows for a in answers] == [[(lower_median(values), len(values))]]
    expect = "ws" if policy == "ws" else "lws"
    assert check(h.events).violations(expect) == []


def test_within_a_lane_one_scan_at_a_time_and_a_one_time_query_is_never_behind_periodic_work():
    sched, s, h, jobs = setup("ttu")
    merge, _ = periodic_merge_in_flight(sched, jobs, s)
    other = sched.register(scan(s, "SELECT MEDIAN(v) FROM s [RANGE 2 SUBWINDOWS]"), every=1)
    first, second = sched.submit(scan(s)), sched.submit(scan(s, FILTERED))
    assert sched.step() == "read"
    assert [j.txn for j in jobs] == [merge.txn, first], "the one-time lane's first job"
    assert sched.step() is None, "no second job in either lane"
    assert not second.begun and (other.running is None or not other.running.begun)
    complete(sched, take(jobs, QueryKind.ONETIME))
    assert sched.step() == "read" and take(jobs, QueryKind.ONETIME).txn is first, "the first one-time scan goes on"


def test_serial_does_not_pre_empt_the_periodic_holder_while_its_merge_runs():
    sched, s, h, jobs = setup("serial")
    merge, _ = periodic_merge_in_flight(sched, jobs, s)
    onetime = sched.submit(scan(s))
    assert sched.step() is None and not onetime.begun, "the holder's window stays locked until its commit"
    assert complete(sched, merge) == "commit"
    while not onetime.done:
        if sched.step() is None:
            complete(sched, take(jobs, QueryKind.ONETIME))
    assert check(h.events).violations("lws") == []


def test_settling_a_held_window_runs_the_holders_lane_only():
    """A periodic attempt fallen back under ttu holds the window with its read in flight; a
    one-time scan has its own read in flight in the other lane. A manual slide's settle_held runs
    the holder's job here (so it can go on to its commit); the one-time job stays on its thread."""
    sched, s, h, jobs = setup("ttu", fallback_after=1)
    merge, answers = periodic_merge_in_flight(sched, jobs, s)
    s.append({"ts": [9], "v": [5]})
    sched.request_slide("s")
    assert sched.step() == "slide"  # it expires a sub-window the merge read: abort, then the fallback
    holder = merge.txn
    assert holder.fallback and holder.job is None
    jobs.remove(merge)
    assert complete(sched, merge) == "discarded"
    assert sched.step() == "read" and holder.job is not None and holder.begun
    onetime = sched.submit(scan(s))
    assert sched.step() == "read" and onetime.job is not None
    held, mine = holder.job, onetime.job
    sched.settle_held("s")
    sched._check()
    assert holder.job is not held and onetime.job is mine, "the holder's job ran here, the one-time one did not"
    while not (holder.done and onetime.done):
        if sched.step() is None:
            complete(sched, jobs.pop(0))
    values = [1, 4, 1, 5]  # the window after the slide
    assert onetime.result.answer.rows == [(lower_median(values), 4)]
    assert [a.answer.rows for a in answers] == [[(lower_median(values), 4)]] and answers[0].fallback
    assert check(h.events).violations("lws") == []


# -- on the server's loop, the lanes on their threads ---------------------------------------------------
class FakeClock:
    def __init__(self, ms: float):
        self.ms = ms

    def __call__(self) -> float:
        return self.ms


def test_on_the_server_a_one_time_scan_is_answered_while_a_periodic_merge_holds_its_thread(monkeypatch):
    """A periodic query's final merge is held on its thread (until released); a one-time filtered
    window scan submitted meanwhile is answered (on the loop and the one-time lane) before the
    merge is released. Before the lanes, it was not begun until the periodic job came back."""
    from windowstore.server.config import ServerConfig
    from windowstore.server.driver import Driver
    from windowstore.txn.commands import Append, CreateStream, Register, Slide

    entered, release, runs = hold_final_merges(monkeypatch, lambda job: job.txn.kind == QueryKind.PERIODIC)

    clock = FakeClock(1_000_000.0)
    driver = Driver(ServerConfig(in_memory=True, offload_ms=0), clock=clock)  # every window-scan read and merge is a job
    driver.start()
    tables = []
    try:
        driver.command(CreateStream("p", (("ts", "int64"), ("v", "int64")), "ts",
                                    WindowSpec(4, 1000, None, "manual", 0), 0)).result(10)
        for ts in range(4):
            t = pa.table({"ts": pa.array([ts] * 3, pa.int64()), "v": pa.array([ts - 1, ts, ts + 2], pa.int64())})
            tables.append(t)
            driver.command(Append("p", t, "", None, 0)).result(10)
            driver.command(Slide("p", 0)).result(10)
        driver.command(Register("P", "SELECT MEDIAN(v), COUNT(*) FROM p [RANGE 4 SUBWINDOWS SLIDE 1 SUBWINDOWS]",
                                0, clock.ms)).result(10)
        assert entered.wait(30), "the periodic query's final merge did not start on its thread"
        txn, done = driver.run(lambda: driver.submit(parse_query("SELECT SUM(v), COUNT(*) FROM p WHERE v > 0"), 0))
        wait_for(lambda: driver.run(lambda: txn.done), "the one-time scan to be answered beside the periodic merge")
        periodic = driver.run(lambda: next(t for t in driver.sched.active if t.kind == QueryKind.PERIODIC))
        assert not periodic.done, "the periodic merge is still held"
        db = duckdb.connect()
        db.register("w", pa.concat_tables(tables))  # the window: every row appended (4 sub-windows of 4)
        assert txn.result.answer.rows == db.sql("SELECT SUM(v), COUNT(*) FROM w WHERE v > 0").fetchall()
        release.set()
        wait_for(lambda: driver.run(lambda: periodic.done), "the periodic execution to commit once released")
        assert periodic.result is not None and periodic.result.answer.rows == db.sql(
            "SELECT QUANTILE_DISC(v, 0.5), COUNT(*) FROM w").fetchall()
        assert [name.startswith("windowstore-query-periodic") for name in runs] == [True], runs
        events = driver.run(lambda: driver.history.since(0, "p", 1000))
        assert check(events).violations("lws") == []
    finally:
        release.set()
        driver.stop(5)
