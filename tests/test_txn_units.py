"""Deterministic scheduler cases: every abort path, restart limits, cancellation, SERIAL's lock,
priorities, and periodic EDF scheduling with lateness."""
from __future__ import annotations

import pytest

from windowstore.store import Stream, WindowSpec, parse_query, plan_query, run_plan
from windowstore.txn import (POLICIES, History, JobKind, PolicyName, QueryKind, QueryWithdrawn, RestartLimitExceeded,
                             Scheduler, Step, check)


def setup(policy, n=4, fill=True, max_restarts=16):
    now = [0]
    h = History()
    s = Stream("s", {"ts": "int64", "v": "int64"}, WindowSpec(subwindows=n, subwindow_ms=1, clock="manual"), 0)
    sched = Scheduler(policy, clock=lambda: now[0], history=h, max_restarts=max_restarts)
    sched.add_stream(s)
    if fill:
        for j in range(n):
            slide(sched, s, j)
    return sched, s, h, now


def slide(sched, s, value):
    s.append({"ts": [value], "v": [value]})
    sched.request_slide("s")
    assert sched.step() == "slide"


def scan(s, text="SELECT SUM(v) FROM s"):
    return plan_query(parse_query(text), s, access="window")


def burst_mid_query(policy, **kw):
    """A query reads all but one sub-window, then two slides arrive at once."""
    sched, s, h, now = setup(policy, **kw)
    txn = sched.submit(scan(s))
    for _ in range(3):
        sched.step()
    for value in (100, 1000):
        s.append({"ts": [value], "v": [value]})
        sched.request_slide("s")
    sched.run_until_idle()
    return sched, txn, h


def test_ttu_aborts_when_two_slides_overtake_a_query():
    sched, txn, h = burst_mid_query("ttu")
    assert sched.totals()["aborts"] == 1 and txn.result.restarts == 1
    assert txn.result.answer.rows == [(2 + 3 + 100 + 1000,)]
    assert check(h.events).violations("lws") == []


def test_ttu_rescan_removes_instead_of_aborting():
    sched, txn, h = burst_mid_query("ttu-rescan")
    t = sched.totals()
    assert t["aborts"] == 0 and t["removals"] == 1 and txn.result.restarts == 0
    assert [e["version"] for e in h.events if e["op"] == "u"] == [1]  # read 3, 2, 1; slides 4, 5 expire 1
    assert txn.result.answer.rows == [(2 + 3 + 100 + 1000,)]
    assert check(h.events).violations("lws") == []


def test_ttu_rescan_falls_back_to_abort_without_removable_partials():
    sched, s, h, now = setup("ttu-rescan")
    plan = scan(s)
    plan.supports_remove = False
    txn = sched.submit(plan)
    for _ in range(3):
        sched.step()
    sched.request_slide("s")
    sched.request_slide("s")
    sched.run_until_idle()
    assert sched.totals()["aborts"] == 1 and sched.totals()["removals"] == 0 and txn.result is not None


def test_restart_limit_fails_the_query_with_a_clear_error():
    sched, s, h, now = setup("lws", max_restarts=2)
    txn = sched.submit(scan(s))
    while not txn.done:
        sched.step()                     # read the oldest ...
        if not txn.done:
            slide(sched, s, 7)           # ... and expire it, every time
    assert isinstance(txn.error, RestartLimitExceeded) and "3 times" in str(txn.error)
    assert sched.by_class["onetime"].failed == 1 and sched.by_class["onetime"].restarts == 2


def test_cancel_withdraws_a_running_query():
    sched, s, h, now = setup("ttu")
    txn = sched.submit(scan(s))
    sched.step()
    assert sched.cancel(txn) and isinstance(txn.error, QueryWithdrawn)
    assert sched.step() is None and not sched.cancel(txn)
    assert [e["op"] for e in h.events][-2:] == ["r", "a"]


def test_serial_holds_slides_until_the_running_query_commits():
    sched, s, h, now = setup("serial")
    txn = sched.submit(scan(s))
    sched.step()
    sched.request_slide("s")
    assert sched.step() == "read"        # the due slide waits
    sched.step()
    sched.step()
    assert txn.done and txn.result.answer.rows == [(0 + 1 + 2 + 3,)]
    assert sched.step() == "slide"


def test_onetime_queries_preempt_periodic_ones_between_operations():
    sched, s, h, now = setup("ttu")
    answers = []
    sched.register(scan(s), every=1, on_answer=answers.append)
    sched.step()                          # the periodic query has begun
    one = sched.submit(scan(s, "SELECT COUNT(*) FROM s [RANGE 2 SUBWINDOWS]"))
    sched.step()
    sched.step()
    assert one.done and not answers       # ran to commit ahead of the periodic query
    sched.run_until_idle()
    assert len(answers) == 1 and answers[0].answer.rows == [(6,)]


def test_higher_user_priority_runs_first():
    sched, s, h, now = setup("ttu")
    low = sched.submit(scan(s), priority=0)
    high = sched.submit(scan(s), priority=5)
    for _ in range(4):
        sched.step()
    assert high.done and not low.done


def test_periodic_tasks_run_every_m_slides_earliest_deadline_first():
    sched, s, h, now = setup("ttu")
    seen = []
    every3 = sched.register(scan(s), every=3, on_answer=lambda r: seen.append(("every3", r.slide)))
    every1 = sched.register(scan(s), every=1, on_answer=lambda r: seen.append(("every1", r.slide)))
    sched.run_until_idle()
    assert sorted(seen) == [("every1", 3), ("every3", 3)]   # both run once at registration
    seen.clear()
    slide(sched, s, 4)
    sched.run_until_idle()
    assert seen == [("every1", 4)]        # every3 is not due after one slide
    seen.clear()
    for v in (5, 6, 7):
        slide(sched, s, v)
    # time-until-deadline: every1 is 3 slides behind its last state (1 - 3 = -2), every3 is 4 behind (3 - 4 = -1)
    sched.run_until_idle()
    assert seen == [("every1", 7), ("every3", 7)]
    assert every1.late == 1 and every1.executions == 3
    seen.clear()
    for v in (8, 9, 10):
        slide(sched, s, v)
    sched.unregister(every1.id)
    sched.run_until_idle()
    assert seen == [("every3", 10)] and every3.late == 1   # late once (at 7), on time at 10


def test_ws_never_aborts_and_reports_what_it_read():
    sched, txn, h = burst_mid_query("ws")
    assert sched.totals()["aborts"] == 0 and txn.result.slide == 3
    assert txn.result.answer.rows == [(0 + 1 + 2 + 3,)]
    assert txn.result.staleness_ms is not None


def test_probe_plans_are_one_atomic_operation():
    sched, s, h, now = setup("lws")
    txn = sched.submit(plan_query(parse_query("SELECT COUNT(*), SUM(v), MAX(v) FROM s [RANGE 3 SUBWINDOWS]"), s))
    assert txn.plan.access == "probe"
    assert sched.step() == "probe" and txn.done
    assert txn.result.answer.rows == [(3, 6, 3)]
    assert [v.level for v in check(h.events).verdicts] == ["lws"]


@pytest.mark.parametrize("policy", ["lws", "ttu", "ttu-rescan", "ws", "serial"])
@pytest.mark.parametrize("text", ["SELECT COUNT(*), SUM(v), MAX(v) FROM s [RANGE 3 SUBWINDOWS]",  # a probe
                                  "SELECT MEDIAN(v), COUNT(*) FROM s [RANGE 3 SUBWINDOWS] WHERE v > 0"])  # a scan
def test_run_now_is_submit_and_steps_when_nothing_else_waits(policy, text):
    runs = []
    for at_once in (False, True):
        sched, s, h, now = setup(policy)
        plan = plan_query(parse_query(text), s)
        if at_once:
            txn = sched.run_now(plan, priority=2)
        else:
            txn = sched.submit(plan, priority=2)
            sched.run_until_idle()
        sched._check()
        assert txn.done and not sched.active
        runs.append((txn.result, h.events, sched.totals()))
    (a, ha, ta), (b, hb, tb) = runs
    assert a == b and ha == hb and ta == tb
    assert a.answer.rows == ([(3, 6, 3)] if plan.access == "probe" else [(2, 3)])
    assert (a.slide, a.window_start_ms, a.window_end_ms) == (3, 0, 0)  # a manual clock at 0


def test_run_now_waits_its_turn_behind_a_due_slide_another_query_or_a_periodic_start():
    probe = "SELECT COUNT(*) FROM s [RANGE 2 SUBWINDOWS]"
    sched, s, h, now = setup("ttu")
    plan = plan_query(parse_query(probe), s)
    sched.request_slide("s")              # a slide is due: it goes first
    before = len(h.events)
    assert sched.run_now(plan) is None and not sched.active and len(h.events) == before
    assert sched.step() == "slide"
    scan_txn = sched.submit(scan(s))      # another query is active: the scheduler chooses
    assert sched.run_now(plan) is None and sched.active == [scan_txn]
    sched.run_until_idle()
    sched.register(scan(s), every=1)      # a periodic execution is to start first
    assert sched.run_now(plan) is None and [t.kind for t in sched.active] == ["periodic"]
    sched.run_until_idle()
    before = len(h.events)
    txn = sched.run_now(plan)
    assert txn is not None and txn.done and txn.result.answer.rows == [(1,)] and len(h.events) == before + 4
    assert [v.level for v in check(h.events).verdicts] == ["lws"] * 3  # the scan, the periodic one, the probe


def processing_stream(sched, name="p", n=4, period=10):
    s = Stream(name, {"ts": "int64", "v": "int64"}, WindowSpec(subwindows=n, subwindow_ms=period), 0)
    sched.add_stream(s)
    return s


@pytest.mark.parametrize("policy", ["ttu", "serial"])
def test_run_now_stops_where_a_slide_falls_due_and_the_steps_go_on(policy):
    """A slide falling due on the clock between two reads stops it after the read: step() then
    applies the slide before the next read (the scheduler's rule), except under serial, whose
    running query holds its window's slides until it commits."""
    now = [0]
    h = History()

    def clock():
        now[0] += 1  # every reading of the clock is 1 ms later
        return now[0]
    sched = Scheduler(policy, clock=clock, history=h)
    s = processing_stream(sched, period=50)
    while s.window.latest < 3:
        s.append({"ts": [now[0]], "v": [1]})
        sched.step()
    now[0] = s.window.next_due_ms() - 4  # it falls due while the query reads
    txn = sched.run_now(scan(s))
    assert not txn.done and len(txn.sources[0].read) >= 1 and sched.active == [txn] and sched.running is txn
    assert now[0] >= s.window.next_due_ms()  # it stopped because a slide is due
    ops = []
    while not txn.done:
        ops.append(sched.step())
    assert (ops[0] == "slide") == (policy != "serial")
    assert [v.level for v in check(h.events).verdicts] == ["lws"]


def test_run_now_stops_at_its_budget_and_at_an_offloaded_job():
    sched, s, h, now = setup("ttu")
    txn = sched.run_now(scan(s), go_on=lambda: False)  # the caller's budget allows one operation
    assert not txn.done and len(txn.sources[0].read) == 1 and sched.active == [txn]
    sched.run_until_idle()
    assert txn.done and txn.result.answer.rows == [(0 + 1 + 2 + 3,)]
    jobs = []
    sched.offload, sched.offload_ms = jobs.append, 0
    txn = sched.run_now(scan(s))
    assert not txn.done and len(jobs) == 1 and txn.job is jobs[0] and sched.active == [txn]
    sched._check()


def test_the_closed_sets_are_enums_with_the_wire_spellings():
    """Policies, query kinds, job kinds and step() results are StrEnum members: they compare and
    serialise as the strings the wire, the CLI and the counters use; an answer names its policy as
    a plain string."""
    assert POLICIES == ("serial", "ws", "lws", "ttu", "ttu-rescan") == tuple(p.value for p in PolicyName)
    assert (QueryKind.ONETIME, QueryKind.PERIODIC) == ("onetime", "periodic")
    assert (JobKind.READ, JobKind.FINISH) == ("read", "finish")
    sched, s, h, now = setup("ttu-rescan", fill=False)
    assert sched.policy is PolicyName.TTU_RESCAN and sched.policy == "ttu-rescan"
    s.append({"ts": [1], "v": [1]})
    sched.request_slide("s")
    assert sched.step() is Step.SLIDE
    txn = sched.submit(scan(s))
    assert txn.kind is QueryKind.ONETIME and sched.step() is Step.READ and sched.step() is None
    assert txn.result.policy == "ttu-rescan" and type(txn.result.policy) is str
    assert set(sched.by_class) == {"onetime", "periodic"}


def test_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="unknown policy"):
        Scheduler("optimistic", clock=lambda: 0)


def test_dropping_a_stream_withdraws_its_queries():
    sched, s, h, now = setup("ttu")
    txn = sched.submit(scan(s))
    task = sched.register(scan(s), every=1)
    sched.drop_stream("s")
    assert isinstance(txn.error, QueryWithdrawn) and not sched.tasks and not task.active


def test_a_group_by_probe_is_one_operation_while_its_running_totals_are_kept_else_a_scan():
    """A GROUP BY of running per-key totals commits in one operation; while the totals are not
    kept (a value whose totals could wrap is in the window) it reads sub-window by sub-window
    like a synopsis scan, so a long merge never becomes one atomic operation."""
    for big in (False, True):
        now = [0]
        h = History()
        s = Stream("s", {"ts": "int64", "k": "string", "v": "int64"},
                   WindowSpec(subwindows=4, subwindow_ms=1, clock="manual", group_by=("k",)), 0)
        sched = Scheduler("ttu", clock=lambda: now[0], history=h)
        sched.add_stream(s)
        for j in range(4):
            s.append({"ts": [j, j], "k": ["a", "b"], "v": [2**62 if big and j == 1 else j, 1]})
            sched.request_slide("s")
            assert sched.step() == "slide"
        plan = plan_query(parse_query("SELECT k, SUM(v) FROM s GROUP BY k ORDER BY 1"), s)
        assert plan.access == "probe" and plan.probes_now() == (not big)
        txn = sched.submit(plan)
        ops = []
        while not txn.done:
            ops.append(sched.step())
        assert ops == (["read"] * 4 if big else ["probe"])
        want = plan_query(parse_query("SELECT k, SUM(v) FROM s GROUP BY k ORDER BY 1"), s, access="window")
        assert txn.result.answer.rows == run_plan(want).rows
        assert [v.level for v in check(h.events).verdicts] == ["lws"]


def test_each_policy_is_a_class_chosen_once_and_a_new_one_plugs_in():
    """The registry maps every PolicyName to its class; the scheduler takes a Policy instance as it
    is. A policy that is LWS reading youngest first (TTU's order, without its holds) plugs in with
    no change to the scheduler and aborts exactly where TTU does, where LWS aborts more."""
    from windowstore.txn.policies import POLICY_CLASSES, Lws, Ttu

    assert set(POLICY_CLASSES) == set(PolicyName) and all(c.name is p for p, c in POLICY_CLASSES.items())

    class YoungestFirst(Lws):
        def order(self, vs):
            return Ttu.order(self, vs)

    aborts = {}
    for policy in ("lws", "ttu", YoungestFirst()):
        sched, s, h, now = setup(policy)
        txn = sched.submit(scan(s))
        sched.step()                      # one read, then a slide before each of the others
        for value in (10, 20, 30):
            slide(sched, s, value)
            sched.step()
        sched.run_until_idle()
        assert txn.result.answer.rows == [(10 + 20 + 30 + 3,)] and check(h.events).violations("lws") == []
        aborts[policy if isinstance(policy, str) else "custom"] = sched.totals()["aborts"]
    assert aborts["custom"] == aborts["ttu"] < aborts["lws"], aborts


def test_kept_history_records_leave_the_garbage_collector_s_walk_and_expand_as_recorded():
    """The 100,000 records a server keeps would lengthen every full collection (a pause of the
    event loop) if the collector tracked them: after one collection it tracks none, and the events
    read back are the ones recorded."""
    import gc

    from windowstore.txn import Op

    h = History()
    h.record("s", Op.BEGIN, "q1", 1.5, window_len=3)
    h.record_reads("s", "q1", 2.0, range(4, 7), 3)
    h.record("s", Op.COMMIT, "q1", 2.5)
    h.record("s", Op.BEGIN, "q2", 3.0, window_len=3, as_of=5)  # a pinned read: a dict, kept as it is
    gc.collect()
    assert [gc.is_tracked(item) for item in h._log] == [False, False, False, True]
    reads = [{"seq": 1 + i, "stream": "s", "op": Op.READ, "txn": "q1", "subwindow": v % 3, "version": v,
              "window_len": None, "t": 2.0} for i, v in enumerate(range(4, 7))]
    assert h.events == [{"seq": 0, "stream": "s", "op": Op.BEGIN, "txn": "q1", "subwindow": None, "version": None,
                         "window_len": 3, "t": 1.5}, *reads,
                        {"seq": 4, "stream": "s", "op": Op.COMMIT, "txn": "q1", "subwindow": None, "version": None,
                         "window_len": None, "t": 2.5},
                        {"seq": 5, "stream": "s", "op": Op.BEGIN, "txn": "q2", "subwindow": None, "version": None,
                         "window_len": 3, "t": 3.0, "as_of": 5}]
    assert all(type(ev["op"]) is Op for ev in h.events) and h.since(2, "s") == h.events[2:]


def test_run_now_leaves_a_scan_to_step_once_a_processing_time_slide_falls_due_during_it():
    """run_now (the server's call when nothing else waits) stops between two operations once a
    processing-time slide has fallen due on the clock, as step() would apply that slide first:
    the query is left active, the next operation is the slide, and the query's answer is then
    the count of the rows its window holds, with a history the checker accepts."""
    from windowstore.txn import check

    now = [0]
    history = History()
    sched = Scheduler("ttu", clock=lambda: now[0], history=history)
    stream = Stream("s", {"ts": "int64", "v": "int64"}, WindowSpec(subwindows=4, subwindow_ms=10), 0)
    sched.add_stream(stream)
    for i in range(7):
        stream.append({"ts": [now[0]] * 3, "v": [i, i + 1, i + 2]})
        now[0] += 10
        sched.run_until_idle()
    plan = plan_query(parse_query("SELECT COUNT(*) FROM s WHERE v >= 0"), stream)  # a scan: an operation per read
    due = sched.next_due()[0]
    asked = []

    def go_on():  # between the first and the second read, the clock reaches the next slide
        asked.append(now[0])
        now[0] = due
        return True
    txn = sched.run_now(plan, go_on=go_on)
    assert txn is not None and not txn.done and asked == [due - 10]
    assert sched.stream_due_to_slide() == "s" and sched.step() == "slide"
    sched.run_until_idle()
    assert txn.done and txn.result.answer.rows == [(sum(s.rows for s in stream.window.youngest(stream.window.n)),)]
    report = check(history.events)
    assert report.errors == [] and report.violations("lws") == []


def test_a_slide_due_is_found_whatever_changed_since_the_scheduler_last_looked():
    """stream_due_to_slide looks at every stream only once a slide may have fallen due on the clock
    or been asked for (_quiet_until); in between, the streams whose slides fall due on their rows.
    A slide due in each way is found, the memo checked (_check) at each point."""
    now = [0.0]
    schema = {"ts": "int64", "v": "int64"}
    sched = Scheduler("lws", clock=lambda: now[0])

    def due():
        sched._check()
        return sched.stream_due_to_slide()

    sched.add_stream(Stream("p", schema, WindowSpec(4, 100, clock="processing"), 0))
    assert due() is None and sched._quiet_until == 100  # kept: no walk over every stream before then
    now[0] = 99.0
    assert due() is None  # the first slide of p falls due at 100
    sched.add_stream(Stream("m", schema, WindowSpec(4, 100, clock="manual"), 0))
    assert due() is None
    sched.request_slide("m")  # asked for
    assert sched._quiet_until == -float("inf") and due() == "m"
    assert sched.step() == "slide" and due() is None
    rows = Stream("c", schema, WindowSpec(4, subwindow_rows=2, clock="processing"), 0)
    event = Stream("e", schema, WindowSpec(4, 100, clock="event"), 0)
    sched.add_stream(rows)
    sched.add_stream(event)
    assert due() is None
    rows.append({"ts": [0, 1], "v": [1, 2]})  # straight into the window: the scheduler is not told
    assert due() == "c"
    assert sched.step() == "slide" and due() is None
    event.append({"ts": [0], "v": [1]})
    event.append({"ts": [250], "v": [2]})  # event time passes sub-windows 0 and 1
    assert due() == "e"
    sched.run_until_idle()
    assert due() is None
    now[0] = 100.0  # on the clock: p's first slide
    assert due() == "p"
    sched.run_until_idle()
    assert due() is None and sched.streams["p"].window.latest == 0
    sched.drop_stream("c")
    now[0] = 199.0
    assert due() is None
    now[0] = 200.0
    assert due() == "p"
