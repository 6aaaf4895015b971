"""Offloaded window scans (txn/schedule/offload.py, "Offloaded work"): a large read or final merge is a
job the caller runs elsewhere and hands back; slides and other queries go on meanwhile. Each
conflict path of a job in flight, deterministically (the jobs are run by hand here)."""
from __future__ import annotations

import pytest

from windowstore.store import Stream, WindowSpec, parse_query, plan_query
from windowstore.txn import History, QueryFailed, Scheduler, StreamFailed, check

MEDIAN = "SELECT MEDIAN(v), COUNT(*) FROM s"


def setup(policy, n=4, fill=4, clock="manual", subwindow_ms=1):
    now = [0]
    h = History()
    s = Stream("s", {"ts": "int64", "v": "int64"}, WindowSpec(subwindows=n, subwindow_ms=subwindow_ms, clock=clock), 0)
    sched = Scheduler(policy, clock=lambda: now[0], history=h)
    sched.add_stream(s)
    for j in range(fill):
        slide(sched, s, j)
    jobs = []
    sched.offload, sched.offload_ms = jobs.append, 0
    return sched, s, h, now, jobs


def slide(sched, s, value):
    s.append({"ts": [value], "v": [value]})
    sched.request_slide("s")
    assert sched.step() == "slide"
    sched._check()


def scan(s, text=MEDIAN):
    return plan_query(parse_query(text), s, access="window")


def run_job(sched, jobs, ms=None):
    job = jobs.pop(0)
    out = sched.complete(job, job.run(), ms=ms)
    sched._check()
    return out


def read_all(sched, jobs, n):
    """Issue and complete n reads; the last step issues the final merge."""
    for _ in range(n):
        assert sched.step() == "read" and len(jobs) == 1
        assert run_job(sched, jobs) == "read"
    assert sched.step() == "read" and jobs[0].kind == "finish"


def test_jobs_give_the_same_answer_as_inline_and_the_query_waits_for_them():
    sched, s, h, now, jobs = setup("ttu")
    txn = sched.submit(scan(s))
    read_all(sched, jobs, 4)
    assert sched.step() is None  # nothing else to do: it waits for its merge
    assert run_job(sched, jobs) == "commit"
    assert txn.result.answer.rows == [(1, 4)]  # MEDIAN of 0..3: the 2nd smallest
    assert check(h.events).violations("lws") == []


def test_ttu_a_slide_during_the_final_merge_aborts_and_the_late_result_is_discarded():
    sched, s, h, now, jobs = setup("ttu")
    txn = sched.submit(scan(s))
    read_all(sched, jobs, 4)
    slide(sched, s, 10)  # the merge in flight covers versions 0..3; 0 has left the window
    assert sched.totals()["aborts"] == 1
    assert run_job(sched, jobs) == "discarded" and sched.jobs_discarded == 1
    read_all(sched, jobs, 4)
    assert run_job(sched, jobs) == "commit"
    assert txn.result.answer.rows == [(2, 4)] and txn.result.restarts == 1  # 1, 2, 3, 10
    assert check(h.events).violations("lws") == []


def test_ttu_rescan_a_slide_during_the_final_merge_reads_the_new_one_and_merges_again():
    sched, s, h, now, jobs = setup("ttu-rescan")
    txn = sched.submit(scan(s))
    read_all(sched, jobs, 4)
    slide(sched, s, 10)
    assert sched.totals()["aborts"] == 0 and sched.totals()["removals"] == 1
    assert run_job(sched, jobs) == "discarded"
    read_all(sched, jobs, 1)  # only the new sub-window
    assert run_job(sched, jobs) == "commit"
    assert txn.result.answer.rows == [(2, 4)] and txn.result.restarts == 0
    assert check(h.events).violations("lws") == []


def test_a_read_in_flight_whose_version_a_rescan_removes_is_discarded():
    sched, s, h, now, jobs = setup("ttu-rescan")
    txn = sched.submit(scan(s))
    for _ in range(3):  # versions 3, 2, 1
        assert sched.step() == "read"
        run_job(sched, jobs)
    assert sched.step() == "read" and jobs[0].version == 0
    slide(sched, s, 10)  # expires version 0 while it is being read
    assert run_job(sched, jobs) == "discarded"
    read_all(sched, jobs, 1)  # version 4
    run_job(sched, jobs)
    assert txn.result.answer.rows == [(2, 4)]
    assert check(h.events).violations("lws") == []


def test_a_merge_in_flight_over_a_window_not_yet_full_is_discarded_when_a_sub_window_arrives():
    """No version expires (the window holds 2 of 4), but the window the merge must reflect at
    commit now has a third sub-window: the merge in flight lacks it."""
    sched, s, h, now, jobs = setup("ttu", fill=2)
    txn = sched.submit(scan(s))
    read_all(sched, jobs, 2)
    slide(sched, s, 10)
    assert sched.totals()["aborts"] == 0
    assert run_job(sched, jobs) == "discarded"
    read_all(sched, jobs, 1)
    run_job(sched, jobs)
    assert txn.result.answer.rows == [(1, 3)]  # 0, 1, 10
    assert check(h.events).violations("lws") == []


def test_while_a_job_is_in_flight_probes_run_and_other_window_scans_wait():
    sched, s, h, now, jobs = setup("ttu")
    first = sched.submit(scan(s))
    assert sched.step() == "read" and len(jobs) == 1
    second = sched.submit(scan(s))
    probe = sched.submit(plan_query(parse_query("SELECT SUM(v) FROM s"), s, access="probe"))
    assert sched.step() == "probe" and probe.result.answer.rows == [(6,)]
    assert sched.step() is None and len(jobs) == 1 and not second.begun  # no second job queued behind the first
    while not first.done:
        if jobs:
            run_job(sched, jobs)
        sched.step()
    while not second.done:  # then the second goes on
        if sched.step() is None:
            run_job(sched, jobs)
    assert first.result.answer.rows == second.result.answer.rows == [(1, 4)]


def test_cancel_orphans_the_job_and_a_failing_job_fails_only_its_query():
    sched, s, h, now, jobs = setup("ttu")
    txn = sched.submit(scan(s))
    sched.step()
    assert sched.cancel(txn)
    assert run_job(sched, jobs) == "discarded"
    other = sched.submit(scan(s))
    sched.step()
    job = jobs.pop(0)
    assert sched.complete(job, error=ValueError("boom")) == "error"
    assert isinstance(other.error, QueryFailed) and "boom" in str(other.error)
    assert not sched.active and sched.totals()["errors"] == 1


def test_ttu_waits_for_a_slide_due_before_its_last_read_and_merge_would_be_done():
    """Processing time: the next slide is due in 2 ms and, by the jobs so far, the last read and
    the merge take several. Instead of reading the sub-window that slide overwrites (then aborting
    at it), the query waits for the slide and reads the new sub-window."""
    sched, s, h, now, jobs = setup("ttu", clock="processing", subwindow_ms=100, fill=0)
    for j in range(4):
        now[0] = (j + 1) * 100
        s.append({"ts": [now[0] - 50], "v": [j]})
        assert sched.step() == "slide"
    warm = sched.submit(scan(s))  # its jobs' cost, as the caller measured them: 10 ms each
    while not warm.done:
        if sched.step() is None:
            run_job(sched, jobs, ms=10.0)
    due = s.window.next_due_ms()
    now[0] = due - 2
    s.append({"ts": [now[0]], "v": [10]})
    txn = sched.submit(scan(s))
    for _ in range(3):
        assert sched.step() == "read"
        run_job(sched, jobs)
    assert sched.step() == "hold" and not jobs and sched.holds == 1
    assert sched.step() is None
    now[0] = due
    assert sched.step() == "slide"
    read_all(sched, jobs, 1)
    run_job(sched, jobs)
    assert txn.result.answer.rows == [(2, 4)] and txn.result.restarts == 0  # 1, 2, 3, 10
    assert sched.totals()["aborts"] == 0
    assert check(h.events).violations("lws") == []


@pytest.mark.parametrize("policy", ["lws", "ws", "serial"])
def test_other_policies_never_hold(policy):
    sched, s, h, now, jobs = setup(policy)
    txn = sched.submit(scan(s))
    read_all(sched, jobs, 4)
    run_job(sched, jobs)
    assert txn.result.answer.rows == [(1, 4)] and sched.holds == 0


def test_what_runs_as_a_job_follows_the_measured_cost_of_the_same_query():
    """offload_ms > 0: a query's first run is inline and measured (the timer), unless a read or merge
    covers offload_unmeasured_rows rows or more; a read or merge that took offload_ms or more is a
    job the next time, a cheap one stays inline."""
    sched, s, h, now, jobs = setup("ttu")
    ticks = iter(range(0, 10**6))
    sched.timer = lambda: next(ticks) / 1000.0  # each timer call 1 ms after the previous: every op "takes" 1 ms
    sched.offload_ms = 2.0
    first = sched.submit(scan(s))
    sched.run_until_idle()
    assert first.done and not jobs  # nothing measured yet: all inline
    assert sched.costs.estimate(first.plan, "read", 1) == pytest.approx(1.0)  # 1 ms for a 1-row sub-window
    assert sched.costs.estimate(first.plan, "finish", 4) == pytest.approx(1.0)
    sched.offload_ms = 1.0
    again = sched.submit(scan(s))
    assert sched.step() == "read" and len(jobs) == 1 and jobs[0].kind == "read"
    run_job(sched, jobs, ms=0.1)  # faster this time: the estimate falls below offload_ms
    assert sched.costs.estimate(again.plan, "read", 1) < 1.0
    assert sched.step() == "read" and not jobs  # inline again
    while not again.done:
        if sched.step() is None:
            run_job(sched, jobs)
    assert again.result.answer.rows == [(1, 4)]
    other = sched.submit(scan(s, "SELECT COUNT(*) FROM s WHERE v > 0"))  # another query: no estimate, inline
    assert sched.step() == "read" and not jobs and not other.done
    while not other.done:  # (measured from its first read on: later ones may be jobs)
        if sched.step() is None:
            run_job(sched, jobs)
    sched.offload_unmeasured_rows = 1  # ... unless it is large: then a job from its first run
    large = sched.submit(scan(s, "SELECT MAX(v) FROM s WHERE v > 1"))
    assert sched.step() == "read" and len(jobs) == 1 and jobs[0].txn is large


# -- seals off the scheduler's thread ---------------------------------------------------------------
def sealing_setup(policy="ttu"):
    """Two full manual-clock streams, s (values 0..3) and t; every seal is a job."""
    sched, s, h, now, jobs = setup(policy)
    t = Stream("t", {"ts": "int64", "v": "int64"}, WindowSpec(subwindows=4, subwindow_ms=1, clock="manual"), 0)
    sched.add_stream(t)
    t.append({"ts": [0], "v": [100]})
    sched.request_slide("t")
    sched.step()
    seals = []
    sched.seal_offload, sched.seal_offload_rows = seals.append, 0
    return sched, s, t, h, jobs, seals


SUM = "SELECT SUM(v), COUNT(*) FROM {}"


def writes(h, stream, txn):
    return [e["op"] for e in h.events if e["stream"] == stream and e["txn"] == txn]


def probe(s):
    return plan_query(parse_query(SUM.format(s.name)), s, access="probe")


def test_a_slide_is_cut_at_once_and_installed_when_its_seal_comes_back():
    sched, s, t, h, jobs, seals = sealing_setup()
    s.append({"ts": [4], "v": [10]})
    sched.request_slide("s")
    assert sched.step() == "slide" and len(seals) == 1 and sched.sealing == {"s": seals[0]}
    assert s.window.latest == 3 and s.window.cut_through == 4 and s.window.buffered_rows == 1
    s.append({"ts": [5], "v": [1000]})  # after the cut: the next slide's
    q = sched.submit(probe(s))
    assert sched.run_now(probe(s)) is None  # a read of the stream being sealed waits for it
    assert sched.step() is None and not q.begun
    other = sched.run_now(probe(t))  # other streams go on
    assert other.done and other.result.answer.rows == [(100, 1)]
    assert not writes(h, "s", "T4")  # T_4 has not committed
    job = seals.pop()
    assert sched.complete(job, job.run()) == "slide"
    sched._check()
    assert s.window.latest == 4 and not sched.sealing and writes(h, "s", "T4") == ["w", "c"]
    assert sched.step() == "probe" and q.result.answer.rows == [(16, 4)] and q.result.slide == 4  # 1+2+3+10
    assert s.window.buffered_rows == 1  # the row appended during the seal waits for slide 5
    assert check(h.events).violations("lws") == []


def test_the_next_slide_of_a_stream_being_sealed_waits_for_its_install():
    sched, s, t, h, jobs, seals = sealing_setup()
    sched.request_slide("s")
    sched.request_slide("s")
    sched.request_slide("t")
    assert sched.step() == "slide" and sched.step() == "slide" and sched.step() is None
    assert set(sched.sealing) == {"s", "t"} and sched.slides_due("s") == 1
    first = seals.pop(0)
    sched.complete(first, first.run())
    assert sched.step() == "slide" and s.window.cut_through == 5 and s.window.latest == 4
    sched._check()


def test_a_begun_query_meets_the_slide_at_its_install_not_at_its_cut():
    sched, s, t, h, jobs, seals = sealing_setup()
    txn = sched.submit(scan(s))
    read_all(sched, jobs, 4)  # every sub-window read, its final merge in flight
    sched.request_slide("s")
    assert sched.step() == "slide" and txn.job is not None  # cut: nothing changed for the query
    job = seals.pop()
    sched.complete(job, job.run())  # installed: sub-window 0 left its window while it merged
    assert sched.totals()["aborts"] == 1 and run_job(sched, jobs) == "discarded"
    read_all(sched, jobs, 4)
    assert run_job(sched, jobs) == "commit" and txn.result.slide == 4
    assert check(h.events).violations("lws") == []


def test_settle_seals_here_a_failed_seal_is_sealed_again_and_a_dropped_streams_seal_is_discarded():
    sched, s, t, h, jobs, seals = sealing_setup()
    s.append({"ts": [4], "v": [10]})
    sched.request_slide("s")
    sched.step()
    job = seals.pop()
    sched.settle("s")
    assert s.window.latest == 4 and not sched.sealing
    assert sched.complete(job, job.run()) == "discarded"  # its own result came too late
    s.append({"ts": [5], "v": [20]})
    sched.request_slide("s")
    sched.step()
    failed = seals.pop()
    assert sched.complete(failed, error=MemoryError()) == "slide"  # sealed again, here
    assert s.window.subs[5 % 4].rows == 1 and s.window.subs[5 % 4].synopsis.columns["v"].sum == 20
    sched.request_slide("t")
    sched.step()
    gone = seals.pop()
    sched.drop_stream("t")
    assert sched.complete(gone, gone.run()) == "discarded"
    sched._check()


def _seal_raises(window, error):
    def seal_cut(cut):
        raise error
    window.seal_cut = seal_cut


@pytest.mark.parametrize("offloaded", [False, True])
def test_a_seal_that_raises_stops_its_stream_only_and_fails_its_queries_at_once(offloaded):
    """Fail-stop per stream: a seal that raises (here, and again here after the seal thread's
    attempt) leaves its cut uninstalled and the stream sliding no more; the queries reading it
    fail then (none waits for that slide), the other streams go on, and dropping it clears it."""
    sched, s, t, h, jobs, seals = sealing_setup()
    if not offloaded:
        sched.seal_offload_rows = 10**9
    reading = sched.submit(scan(s))
    assert sched.step() == "read" and len(jobs) == 1  # begun: its read is in flight
    waiting = sched.submit(probe(s))
    s.append({"ts": [4], "v": [10]})
    _seal_raises(s.window, MemoryError("no room for the columns"))
    sched.request_slide("s")
    if offloaded:
        assert sched.step() == "slide" and "s" in sched.sealing
        assert sched.complete(seals.pop(), error=MemoryError("on the seal thread")) == "error"
    else:
        assert sched.step() == "error"
    assert "s" not in sched.sealing and "sealing its slide 4 failed (MemoryError: no room" in sched.failed["s"]
    for txn in (reading, waiting):
        assert txn.done and isinstance(txn.error, StreamFailed) and "stopped" in str(txn.error)
    assert run_job(sched, jobs) == "discarded"
    sched._check()
    assert s.window.latest == 3 and s.window.cutting is not None
    sched.request_slide("s")
    assert sched.step() is None and sched.slides_due("s") == 1  # asked for, and never cut
    t.append({"ts": [1], "v": [1]})
    sched.request_slide("t")
    assert sched.step() == "slide"
    if offloaded:
        job = seals.pop()
        sched.complete(job, job.run())
    assert t.window.latest == 1 and sched.run_now(probe(t)).result.answer.rows == [(101, 2)]
    sched.drop_stream("s")
    assert not sched.failed
    sched._check()
    assert check(h.events).violations("lws") == []


def test_a_query_waits_only_for_the_seal_in_flight_when_it_came_so_ingest_cannot_starve_it():
    """Under sustained ingest the next seal starts as the last one is installed: a query waits for
    the slide being sealed when it arrived, not for the ones cut after it (it reads what is
    installed and meets them at their install, as any concurrent write)."""
    sched, s, t, h, jobs, seals = sealing_setup()
    s.append({"ts": [4], "v": [10]})
    sched.request_slide("s")
    sched.step()
    early = sched.submit(probe(s))  # came while slide 4 was being sealed
    job = seals.pop()
    sched.complete(job, job.run())
    s.append({"ts": [5], "v": [20]})
    sched.request_slide("s")
    assert sched.step() == "slide" and "s" in sched.sealing  # slide 5 cut before the query ran
    late = sched.submit(probe(s))
    assert sched.step() == "probe" and early.result.answer.rows == [(16, 4)] and early.result.slide == 4
    assert sched.step() is None and not late.begun  # came during slide 5's seal: waits for it
    job = seals.pop()
    sched.complete(job, job.run())
    assert sched.step() == "probe" and late.result.slide == 5 and late.result.answer.rows == [(35, 4)]
    assert check(h.events).violations("lws") == []


def test_under_serial_a_query_begins_only_on_a_window_no_seal_will_change():
    sched, s, t, h, jobs, seals = sealing_setup("serial")
    sched.request_slide("s")
    sched.step()
    job = seals.pop()
    sched.complete(job, job.run())
    s.append({"ts": [5], "v": [20]})
    sched.request_slide("s")
    early = sched.submit(scan(s))
    assert sched.step() == "slide"  # cut before the query began
    assert sched.step() is None and not early.begun
    job = seals.pop()
    sched.complete(job, job.run())
    while not early.done:
        if sched.step() is None:
            run_job(sched, jobs)
    assert early.result.slide == 5 and check(h.events).violations("lws") == []
