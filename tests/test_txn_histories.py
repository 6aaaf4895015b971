"""The thesis's histories H_a..H_f, the checker's verdicts on them, and the schedulers
producing H_e (TTU) and refusing H_f (LWS) on the same arrivals."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from thesis_histories import N, THESIS, ops, to_events
from windowstore.store import Stream, WindowSpec, parse_query, plan_query
from windowstore.txn import History, Op, Scheduler, check
from windowstore.txn.history import OPS, read_jsonl


@pytest.mark.parametrize("name, level", [
    ("H_a", "torn"), ("H_b", "ws"), ("H_c", "ws"), ("H_d", "lws"), ("H_e", "lws"), ("H_f", "ws"),
])
def test_checker_classifies_thesis_histories(name, level):
    report = check(to_events(THESIS[name]))
    assert report.errors == []
    assert [v.level for v in report.verdicts] == [level]
    assert report.violations("lws") == ([] if level == "lws" else report.verdicts)
    assert (report.violations("ws") == []) == (level != "torn")


def test_checker_reports_inconsistent_histories():
    events = to_events(THESIS["H_d"])
    bad = [dict(e) for e in events]
    for e in bad:
        if e["op"] == "r" and e["subwindow"] == 1:
            e["version"] = 1  # the sub-window held version 6 by then; version 1 was at 1 too: allowed
    assert check(bad).errors == []
    bad[-2]["subwindow"] = 3   # version 4 was never written to sub-window 3
    assert any("did not write" in err for err in check(bad).errors)


def scenario(policy: str, history: History):
    """Arrivals of H_e/H_f: Q1 after T4, T5 after Q1's first read, T6 after its fourth."""
    now = [0]
    stream = Stream("s", {"ts": "int64", "v": "int64"}, WindowSpec(subwindows=N, subwindow_ms=1, clock="manual"), 0)
    sched = Scheduler(policy, clock=lambda: now[0], history=history, max_restarts=3)
    sched.add_stream(stream)
    for j in range(N):
        stream.append({"ts": [j], "v": [j]})
        sched.request_slide("s")
        assert sched.step() == "slide"
    txn = sched.submit(plan_query(parse_query("SELECT SUM(v) FROM s"), stream, access="window"))
    assert txn.id == "Q1"
    sched.step()
    sched.request_slide("s")
    stream.append({"ts": [5], "v": [100]})
    sched.step()            # T5 before the next read
    for _ in range(3):
        sched.step()
    sched.request_slide("s")
    stream.append({"ts": [6], "v": [1000]})
    sched.run_until_idle()
    return txn, sched


def test_ttu_produces_h_e():
    h = History()
    txn, sched = scenario("ttu", h)
    assert ops(list(h.events)) == THESIS["H_e"].split()
    assert txn.result.answer.rows == [(2 + 3 + 4 + 100 + 1000,)] and txn.result.restarts == 0
    assert check(h.events).count("lws") == 1


def test_lws_aborts_where_h_f_would_violate_lws():
    h = History()
    txn, sched = scenario("lws", h)
    assert sched.by_class["onetime"].aborts >= 1
    assert txn.result.answer.rows == [(2 + 3 + 4 + 100 + 1000,)]   # restarted and committed on the latest window
    report = check(h.events)
    assert report.violations("lws") == [] and report.aborts >= 1


def test_ws_reads_its_snapshot_and_is_stale():
    h = History()
    txn, sched = scenario("ws", h)
    assert txn.result.answer.rows == [(0 + 1 + 2 + 3 + 4,)] and txn.result.slide == 4
    assert [v.level for v in check(h.events).verdicts] == ["ws"]


@pytest.mark.slow
def test_check_history_cli(tmp_path):
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text("\n".join(json.dumps(e) for e in to_events(THESIS["H_d"])))
    bad.write_text("\n".join(json.dumps(e) for e in to_events(THESIS["H_c"])))
    cli = [sys.executable, "-m", "windowstore.server.cli", "check-history"]
    assert subprocess.run(cli + [str(good), "--expect", "lws"], capture_output=True).returncode == 0
    r = subprocess.run(cli + [str(bad), "--expect", "lws"], capture_output=True, text=True)
    assert r.returncode == 1 and "Q1" in r.stdout
    assert subprocess.run(cli + [str(bad), "--expect", "ws"], capture_output=True).returncode == 0


@pytest.mark.parametrize("policy", ["ws", "lws", "ttu"])
def test_a_history_cut_at_the_front_is_judged_from_where_it_starts(policy):
    """The bounded history behind StreamHistory can start mid-stream: every query it shows whole
    gets the verdict the full history gives it, the others are counted as unjudged, and nothing is
    reported as an inconsistency."""
    import random

    rng = random.Random(3)
    now = [0]
    h = History()
    stream = Stream("s", {"ts": "int64", "v": "int64"}, WindowSpec(subwindows=4, subwindow_ms=1, clock="manual"), 0)
    sched = Scheduler(policy, clock=lambda: now[0], history=h, max_restarts=50)
    sched.add_stream(stream)
    for j in range(60):
        now[0] = j
        stream.append({"ts": [j], "v": [j]})
        if rng.random() < 0.5:
            sched.request_slide("s")
        if rng.random() < 0.4:
            rq = rng.choice(["SELECT SUM(v) FROM s", "SELECT COUNT(*) FROM s [RANGE 2 SUBWINDOWS]"])
            sched.submit(plan_query(parse_query(rq), stream, access="window"))
        for _ in range(rng.randint(0, 4)):
            sched.step()
    sched.run_until_idle()
    events = list(h.events)
    full = check(events)
    assert full.errors == [] and full.unjudged == 0 and len(full.verdicts) > 10
    verdict = {v.txn: v.level for v in full.verdicts}
    cut_points = [i for i, e in enumerate(events) if e["op"] in ("r", "w")][5::7]
    for cut in cut_points:
        part = check(events[cut:])
        assert part.errors == [], (cut, part.errors)
        assert all(verdict[v.txn] == v.level for v in part.verdicts), cut
        shown_whole = {e["txn"] for e in events[cut:] if e["op"] == "b"}
        assert {v.txn for v in part.verdicts} <= shown_whole
        assert len(part.verdicts) + part.unjudged + part.aborts >= len({v.txn for v in full.verdicts} & shown_whole)


def test_a_probe_s_reads_kept_as_one_record_are_the_same_events(tmp_path):
    """History.record_reads keeps a probe's reads as one record; read back (events, since, the
    JSONL file) they are exactly the r events recorded one by one."""
    one, many = History(str(tmp_path / "one.jsonl")), History(str(tmp_path / "many.jsonl"))
    for h in (one, many):
        h.record("s", "b", "Q1", 5.0, window_len=3)
        h.record("x", "w", "T0", 5.0, subwindow=0, version=0)
    one.record_reads("s", "Q1", 6.0, range(6, 3, -1), 4)
    for sub, version in ((2, 6), (1, 5), (0, 4)):
        many.record("s", "r", "Q1", 6.0, subwindow=sub, version=version)
    for h in (one, many):
        h.record("s", "c", "Q1", 6.0)
        h.close()
    assert one.events == many.events and one.seq == many.seq == 6
    for seq in range(7):
        for stream in (None, "s", "x"):
            for limit in (1, 2, 10):
                assert one.since(seq, stream, limit) == many.since(seq, stream, limit), (seq, stream, limit)
    lines = [json.loads(x) for x in (tmp_path / "one.jsonl").read_text().splitlines()]
    assert lines == [json.loads(x) for x in (tmp_path / "many.jsonl").read_text().splitlines()] == many.events


@pytest.mark.parametrize("reads", [range(6, 3, -1), range(0, 0)])
def test_a_read_only_transaction_kept_as_one_record_is_the_same_events(tmp_path, reads):
    """History.record_read_only keeps a transaction of one operation (begin, its reads, commit) as
    one record; read back (events, since, the JSONL file) it is exactly those events recorded one by
    one, between others (a window without reads: begin and commit)."""
    one, many = History(str(tmp_path / "one.jsonl")), History(str(tmp_path / "many.jsonl"))
    for h in (one, many):
        h.record("x", "w", "T0", 5.0, subwindow=0, version=0)
    one.record_read_only("s", "Q1", 6.0, 3, reads, 4)
    many.record("s", "b", "Q1", 6.0, window_len=3)
    for version in reads:
        many.record("s", "r", "Q1", 6.0, subwindow=version % 4, version=version)
    many.record("s", "c", "Q1", 6.0)
    for h in (one, many):
        h.record("x", "c", "T0", 7.0)
        h.close()
    assert one.events == many.events and one.seq == many.seq == len(reads) + 4
    for seq in range(one.seq + 1):
        for stream in (None, "s", "x"):
            for limit in (1, 2, 10):
                assert one.since(seq, stream, limit) == many.since(seq, stream, limit), (seq, stream, limit)
    lines = [json.loads(x) for x in (tmp_path / "one.jsonl").read_text().splitlines()]
    assert lines == [json.loads(x) for x in (tmp_path / "many.jsonl").read_text().splitlines()] == many.events


def test_op_codes_are_an_enum_that_writes_the_format_s_spellings(tmp_path):
    """History op codes are Op members; the file holds exactly the format's one-letter strings, and
    a file written so reads back (read_jsonl) as events equal to the ones kept."""
    assert [op.value for op in Op] == ["b", "r", "u", "w", "c", "a"] and OPS == ("b", "r", "u", "w", "c", "a")
    h = History(str(tmp_path / "h.jsonl"))
    h.record("s", Op.WRITE, "T0", 1.0, subwindow=0, version=0)
    h.record("s", Op.COMMIT, "T0", 1.0)
    h.record("s", Op.BEGIN, "Q1", 2.0, window_len=1)
    h.record_reads("s", "Q1", 2.0, range(0, 1), 4)
    h.record("s", Op.ABORT, "Q1", 2.0)
    h.close()
    text = (tmp_path / "h.jsonl").read_text()
    assert [json.loads(x)["op"] for x in text.splitlines()] == ["w", "c", "b", "r", "a"]
    assert '"op":"w"' in text and "Op." not in text
    assert list(read_jsonl(text.splitlines())) == h.events
    assert [type(ev["op"]) for ev in h.events] == [Op] * 5


def test_checker_levels_are_an_enum_with_the_report_s_spellings():
    """A verdict's level is a checker.Level member: it equals the string the CLI's --expect and the
    JSON report use, and violations() takes either."""
    from windowstore.txn.kinds import Level

    report = check(to_events(THESIS["H_b"]))
    assert [v.level for v in report.verdicts] == [Level.WS] and report.verdicts[0].level is Level.WS
    assert report.violations(Level.LWS) == report.violations("lws") == report.verdicts
    assert report.summary()["ws_only"] == 1 and json.loads(json.dumps(report.summary()))["ws_only"] == 1
    assert json.dumps([v.level for v in report.verdicts]) == '["ws"]'
