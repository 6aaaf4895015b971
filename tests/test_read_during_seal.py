"""A query of a stream whose slide is being sealed elsewhere reads the sub-windows installed instead
of waiting for the install (Scheduler.read_during_seal, the server's default): it serializes
before the slide, which has not committed, so the history stays LWS (WS under ws); one still
running at the install meets the slide there (aborted, or its expired read removed under
ttu-rescan); under serial a query still begins only on a window no seal will change. The oracle:
the history checker and the store's own answer over the versions the history says were read."""
from __future__ import annotations

import pytest
from hypothesis import given

import test_txn_properties as props
from conftest import wait_for
from test_engine_on_loop import FakeClock
from test_offload import probe, read_all, run_job, scan, sealing_setup, writes
from windowstore.server.config import ServerConfig
from windowstore.server.driver import Driver
from windowstore.store import WindowSpec, parse_query
from windowstore.txn import POLICIES, Scheduler, check
from windowstore.txn.commands import Append, CreateStream


def reading_setup(policy="ttu"):
    sched, s, t, h, jobs, seals = sealing_setup(policy)
    sched.read_during_seal = True
    return sched, s, t, h, jobs, seals


def test_a_probe_during_a_seal_answers_at_once_with_the_window_installed():
    sched, s, t, h, jobs, seals = reading_setup()
    s.append({"ts": [4], "v": [10]})
    sched.request_slide("s")
    assert sched.step() == "slide" and set(sched.sealing) == {"s"}
    q = sched.run_now(probe(s))
    assert q is not None and q.done
    assert q.result.slide == 3 and q.result.answer.rows == [(6, 4)]  # 0+1+2+3: slide 4 not yet installed
    assert not writes(h, "s", "T4")
    job = seals.pop()
    assert sched.complete(job, job.run()) == "slide"
    later = sched.run_now(probe(s))
    assert later.result.slide == 4 and later.result.answer.rows == [(16, 4)]  # 1+2+3+10
    sched._check()
    assert check(h.events).violations("lws") == []


@pytest.mark.parametrize("policy,aborts", [("ttu", 1), ("lws", 1), ("ttu-rescan", 0)])
def test_a_scan_begun_during_a_seal_meets_the_slide_at_its_install(policy, aborts):
    """The scan reads every installed sub-window while slide 4 seals; the install expires slide 0,
    which it read: its policy aborts it (ttu, lws) or removes that read (ttu-rescan), and the
    answer it commits reflects slide 4."""
    sched, s, t, h, jobs, seals = reading_setup(policy)
    s.append({"ts": [4], "v": [10]})
    sched.request_slide("s")
    assert sched.step() == "slide"
    txn = sched.submit(scan(s))
    read_all(sched, jobs, 4)  # every installed sub-window read, the merge in flight
    job = seals.pop()
    sched.complete(job, job.run())
    sched._check()
    assert sched.totals()["aborts"] == aborts
    while not txn.done:
        if sched.step() is None:
            run_job(sched, jobs)
    assert txn.result.slide == 4 and txn.result.answer.rows == [(2, 4)]  # the lower MEDIAN of 1, 2, 3, 10
    assert check(h.events).violations("lws") == []


def test_a_scan_that_commits_before_the_install_reflects_the_window_before_it():
    sched, s, t, h, jobs, seals = reading_setup("ttu")
    s.append({"ts": [4], "v": [10]})
    sched.request_slide("s")
    sched.step()
    txn = sched.submit(scan(s))
    read_all(sched, jobs, 4)
    assert run_job(sched, jobs) == "commit"
    assert txn.result.slide == 3 and txn.result.answer.rows == [(1, 4)]  # the lower MEDIAN of 0..3
    job = seals.pop()
    sched.complete(job, job.run())
    report = check(h.events)
    assert report.violations("lws") == [] and report.count("lws") == 1


def test_under_serial_a_query_still_waits_for_the_install():
    sched, s, t, h, jobs, seals = reading_setup("serial")
    s.append({"ts": [4], "v": [10]})
    sched.request_slide("s")
    sched.step()
    assert sched.run_now(probe(s)) is None
    q = sched.submit(probe(s))
    assert sched.step() is None and not q.begun
    job = seals.pop()
    sched.complete(job, job.run())
    assert sched.step() == "probe" and q.result.slide == 4


class _Reading(Scheduler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.read_during_seal = True


@pytest.mark.slow
@given(props.offloaded_actions)
def test_random_schedules_reading_during_seals_keep_histories_isolated_and_answers_right(script):
    """test_txn_properties' offloaded run (every read, merge and seal a job completed at a random
    later point) with queries reading during seals: the same guarantees."""
    saved = props.Scheduler
    props.Scheduler = _Reading
    try:
        for policy in POLICIES:
            sched, history, results, seen = props.run(policy, script, offload=True)
            props.assert_isolated_and_right(policy, history, results, seen)
            if policy == "ttu-rescan":
                assert sched.totals()["aborts"] == 0
    finally:
        props.Scheduler = saved


def test_on_the_driver_a_query_is_answered_while_its_streams_seal_is_held(held_seals):
    """The server's default: slide 1's seal is held on the seal thread; a query of its stream is
    answered meanwhile with slide 0's window, and after the install with slide 1's."""
    import pyarrow as pa


    entered, release = held_seals
    clock = FakeClock(1_000_000.0)
    driver = Driver(ServerConfig(in_memory=True, seal_offload_rows=3), clock=clock)
    assert ServerConfig().read_during_seal
    driver.start()
    try:
        driver.command(CreateStream("a", (("ts", "int64"), ("v", "int64")), "ts",
                                    WindowSpec(subwindows=4, subwindow_ms=1_000_000), 0)).result(10)
        a = driver.run(lambda: driver.stream("a"))
        driver.command(Append("a", pa.table({"ts": [1, 2], "v": [1, 2]}), "", None, 0)).result(10)
        clock.ms = driver.run(lambda: a.window.next_due_ms()) + 1
        driver.run(lambda: driver.read(lambda: None))  # slide 0: 2 rows, sealed on the loop
        assert driver.run(lambda: (a.window.latest, dict(driver.sched.sealing))) == (0, {})
        driver.command(Append("a", pa.table({"ts": [5, 6, 7], "v": [10, 20, 30]}), "", None, 0)).result(10)
        clock.ms = driver.run(lambda: a.window.next_due_ms()) + 1
        driver.run(lambda: driver.read(lambda: None))  # slide 1: 3 rows, sealed on the seal thread
        assert entered.wait(10), "the seal did not start on the seal thread"

        def answered(txn) -> bool:
            return wait_for(lambda: driver.run(lambda: txn.done), "the query to be answered")
        during, _ = driver.run(lambda: driver.submit(parse_query("SELECT SUM(v), COUNT(*) FROM a"), 0))
        assert answered(during) and during.result.answer.rows == [(3, 2)] and during.result.slide == 0
        assert driver.run(lambda: "a" in driver.sched.sealing) and not release.is_set()
        release.set()
        wait_for(lambda: driver.run(lambda: a.window.latest == 1), "the install")
        after, _ = driver.run(lambda: driver.submit(parse_query("SELECT SUM(v), COUNT(*) FROM a"), 0))
        assert answered(after) and after.result.answer.rows == [(63, 5)] and after.result.slide == 1
        events = driver.run(lambda: driver.history.since(0, None, 1000))
        assert check(events).violations("lws") == []
    finally:
        release.set()
        driver.stop(5)
