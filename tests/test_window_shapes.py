"""Session windows and count-based windows on time streams (store/window_shapes.py), against two
independent oracles over the raw rows: seed 003's window sequence operator (Definition 10: temporal
scope, positional order) evaluated directly in Python, and DuckDB (sessions by LAG gaps-and-islands,
the last n rows by ROW_NUMBER) with the window bounds each answer reports. Rows arrive out of order
within the allowed lateness; a row is sealed into its sub-window when the watermark passes it."""
from __future__ import annotations

import random

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import examples

from windowstore.store import QueryError, Stream, WindowSpec, parse_query, plan_query, run_plan
from windowstore.store.exact import INT64_MAX

SCHEMA = {"ts": "int64", "k": "string", "v": "int64"}


def feed(s: Stream, rows: list[tuple], batch: int, rng: random.Random) -> None:
    """Append `rows` in batches of up to `batch`, sliding whenever a slide falls due."""
    i = 0
    while i < len(rows):
        n = rng.randint(1, batch)
        part = rows[i:i + n]
        i += n
        s.append({"ts": [r[0] for r in part], "k": [r[1] for r in part], "v": [r[2] for r in part]})
        while s.window.due(0):
            s.window.slide(0)


def disordered(rng: random.Random, count: int, start: int, span: int, lateness: int, step: int = 900) -> list[tuple]:
    """Rows in arrival order whose event times lag the newest so far by at most `lateness`: none is
    ever late enough to be dropped, so the window retains exactly the rows inside its bounds."""
    rows, newest = [], start
    for _ in range(count):
        newest = min(start + span, newest + min(step, rng.choice([0, 1, 5, 40, 300, 900])))
        ts = max(start, newest - rng.randint(0, lateness))
        rows.append((ts, rng.choice(["a", "b", "c", None]), rng.choice([None, rng.randint(-5, 50)])))
    return rows


# -- the oracles ---------------------------------------------------------------------------------------
def sessions_definition(rows, lo: int, hi: int, gap: int, whole: bool = False):
    """Sessions per key of the rows retained in [lo, hi) (arrival order kept: rows are (ts, k, v)):
    a row at least `gap` after the previous of its key starts a new one; a session [first, last+gap)
    is answered when it lies in the window: first - gap + 1 >= lo (unless the window is `whole`:
    nothing evicted yet) and last + gap <= hi. Returns {(key, start, end): [rows]}."""
    by_key: dict = {}
    for r in rows:
        if lo <= r[0] < hi:
            by_key.setdefault(r[1], []).append(r)
    out = {}
    for key, rs in by_key.items():
        rs = sorted(rs, key=lambda r: r[0])  # stable: arrival order among equal times
        cur: list = []
        for r in rs + [None]:
            if r is None or (cur and r[0] - cur[-1][0] >= gap):
                first, last = cur[0][0], cur[-1][0]
                if (whole or first - gap + 1 >= lo) and last + gap <= hi:
                    out[(key, first, last + gap)] = cur
                cur = []
            if r is not None:
                cur.append(r)
    return out


def session_rows(sessions, pred=lambda r: True):
    """(window_start, window_end, k, COUNT(*), SUM(v), MIN(v)) per session with a row passing pred."""
    out = []
    for (key, a, b), rs in sessions.items():
        rs = [r for r in rs if pred(r)]
        if not rs:
            continue
        vals = [r[2] for r in rs if r[2] is not None]
        out.append((a, b, key, len(rs), sum(vals) if vals else None, min(vals, default=None)))
    return sorted(out, key=repr)


def duckdb_sessions(rows, lo: int, hi: int, gap: int, where: str = "TRUE", whole: bool = False):
    con = duckdb.connect()
    con.execute("CREATE TABLE r (ts BIGINT, k VARCHAR, v BIGINT, arrival BIGINT)")
    if rows:
        con.executemany("INSERT INTO r VALUES (?, ?, ?, ?)", [(*r, i) for i, r in enumerate(rows)])
    got = con.execute(f"""
        WITH w AS (SELECT * FROM r WHERE ts >= {lo} AND ts < {hi}),
        l AS (SELECT *, CASE WHEN LAG(ts) OVER (PARTITION BY k ORDER BY ts, arrival) IS NULL
                             OR ts - LAG(ts) OVER (PARTITION BY k ORDER BY ts, arrival) >= {gap} THEN 1 ELSE 0 END AS new
              FROM w),
        s AS (SELECT *, SUM(new) OVER (PARTITION BY k ORDER BY ts, arrival ROWS UNBOUNDED PRECEDING) AS sid FROM l),
        b AS (SELECT k, sid, MIN(ts) AS ws, MAX(ts) + {gap} AS we FROM s GROUP BY k, sid)
        SELECT b.ws, b.we, s.k, COUNT(*), SUM(s.v), MIN(s.v)
        FROM s JOIN b ON s.k IS NOT DISTINCT FROM b.k AND s.sid = b.sid
        WHERE ({'TRUE' if whole else 'FALSE'} OR b.ws - {gap} + 1 >= {lo}) AND b.we <= {hi} AND ({where})
        GROUP BY b.ws, b.we, s.k, s.sid""").fetchall()
    return sorted([tuple(int(x) if isinstance(x, (int, float)) and x is not None and not isinstance(x, bool)
                         else x for x in row) for row in got], key=repr)


def last_rows_definition(rows, lo: int, hi: int, n: int):
    """Definition 10 for a positional window of the last n rows: the rows retained in [lo, hi), in
    the positional order (event time, then arrival), the last n of them."""
    kept = [(r[0], i, r) for i, r in enumerate(rows) if lo <= r[0] < hi]
    return [r for _, _, r in sorted(kept)[-n:]]


def duckdb_last_rows(rows, lo: int, hi: int, n: int):
    con = duckdb.connect()
    con.execute("CREATE TABLE r (ts BIGINT, k VARCHAR, v BIGINT, arrival BIGINT)")
    if rows:
        con.executemany("INSERT INTO r VALUES (?, ?, ?, ?)", [(*r, i) for i, r in enumerate(rows)])
    return con.execute(f"""
        SELECT k, COUNT(*), SUM(v), MAX(ts) FROM (
            SELECT *, ROW_NUMBER() OVER (ORDER BY ts DESC, arrival DESC) AS pos FROM r WHERE ts >= {lo} AND ts < {hi})
        WHERE pos <= {n} GROUP BY k ORDER BY k NULLS LAST""").fetchall()


# -- sessions -----------------------------------------------------------------------------------------
SESSION_Q = ("SELECT window_start, window_end, k, COUNT(*), SUM(v), MIN(v) FROM s [SESSION GAP {gap} ms] {where} "
             "GROUP BY k, window_start")


def session_case(seed: int):
    rng = random.Random(seed)
    n, t = rng.randint(3, 12), rng.choice([1, 10, 100, 1000])
    lateness = rng.choice([0, t, 3 * t])
    rows = disordered(rng, rng.randint(1, 80), rng.randint(0, 3) * t, (n + rng.randint(0, 2 * n)) * t, lateness,
                      step=5 * n * t)
    gap = rng.randint(1, max(1, (n * t + 1) // 2))
    s = Stream("s", SCHEMA, WindowSpec(subwindows=n, subwindow_ms=t, clock="event", allowed_lateness_ms=lateness), 0)
    feed(s, rows, 7, rng)
    return s, rows, gap, n


@pytest.mark.parametrize("seed", range(50))
def test_sessions_match_definition_10_and_duckdb(seed):
    s, rows, gap, n = session_case(seed)
    assert s.window.late_rows == 0
    for where, pred in [("", lambda r: True), ("WHERE v > 3", lambda r: r[2] is not None and r[2] > 3)]:
        plan = plan_query(parse_query(SESSION_Q.format(gap=gap, where=where)), s)
        got = run_plan(plan).rows
        lo, hi = s.window.bounds(plan.n_q)
        if lo is None:
            assert got == []
            continue
        assert [r[0] for r in got] == sorted(r[0] for r in got), "in window_start order"
        whole = s.window.latest < s.window.n  # slide 0 still in the window: nothing evicted
        want = session_rows(sessions_definition(rows, lo, hi, gap, whole=whole), pred)
        assert sorted(got, key=repr) == want
        assert want == duckdb_sessions(rows, lo, hi, gap, "s.v > 3" if where else "TRUE", whole)


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.sampled_from(["a", "b"]), st.integers(-3, 3)), max_size=40),
       st.integers(1, 12))
def test_sessions_property_against_the_definition(events, gap):
    """Any rows (ts in 0..60, sorted into arrival with disorder bounded by the lateness) on a
    window of 8 sub-windows of 10 ms: the answer is Definition 10's sessions."""
    rows, newest = [], 0
    for ts, k, v in events:
        newest = max(newest, ts)
        rows.append((max(ts, newest - 20), k, v))
    s = Stream("s", SCHEMA, WindowSpec(subwindows=8, subwindow_ms=10, clock="event", allowed_lateness_ms=20), 0)
    if rows:
        feed(s, [(0, "a", 0)] + rows + [(200, "z", 0)], 5, random.Random(1))
    plan = plan_query(parse_query(SESSION_Q.format(gap=gap, where="")), s)
    lo, hi = s.window.bounds(plan.n_q)
    got = run_plan(plan).rows
    if lo is None:
        assert got == []
        return
    whole = s.window.latest < s.window.n
    assert sorted(got, key=repr) == session_rows(sessions_definition([(0, "a", 0)] + rows + [(200, "z", 0)],
                                                                     lo, hi, gap, whole=whole))


def test_late_rows_extend_bridge_and_open_sessions():
    """A late row within the allowed lateness joins the session it falls into, bridges two
    sessions into one, or opens a new one in a gap (as Scotty's session windows do); a row later
    than the allowed lateness is dropped and changes nothing."""
    def run(rows):
        s = Stream("s", SCHEMA, WindowSpec(subwindows=20, subwindow_ms=100, clock="event",
                                           allowed_lateness_ms=1000), 0)
        s.append({"ts": [0], "k": ["x"], "v": [0]})
        feed(s, rows + [(3000, "z", 0)], 1, random.Random(0))
        rows = run_plan(plan_query(parse_query(SESSION_Q.format(gap=100, where="")), s)).rows
        return s, [r[:4] for r in rows if r[2] == "a"]

    base = [(200, "a", 1), (250, "a", 1), (500, "a", 1), (550, "a", 1), (1000, "a", 1)]
    _, got = run(base)
    assert got == [(200, 350, "a", 2), (500, 650, "a", 2), (1000, 1100, "a", 1)]
    _, got = run(base + [(300, "a", 1)])                       # extends the first session
    assert got[0] == (200, 400, "a", 3)
    _, got = run(base + [(340, "a", 1), (420, "a", 1)])        # bridges the first two into one
    assert got[0] == (200, 650, "a", 6)
    _, got = run(base + [(800, "a", 1)])                       # opens a session in the gap
    assert got == [(200, 350, "a", 2), (500, 650, "a", 2), (800, 900, "a", 1), (1000, 1100, "a", 1)]
    s, got = run(base + [(1500, "b", 1), (2800, "a", 1), (340, "a", 1)])  # 340 comes 2460 ms late: dropped
    assert s.window.late_rows == 1 and got[:2] == [(200, 350, "a", 2), (500, 650, "a", 2)]


def test_periodic_sessions_answer_every_whole_session_the_same_each_time():
    """Registered with SLIDE: each execution answers every session its window holds whole (none is
    missed when an execution comes late), and a session's row is the same in every answer that
    has it."""
    from windowstore.store import WindowSpec as Spec
    from windowstore.txn.commands import Append, CreateStream, Register
    from windowstore.txn.engine import Engine, EngineConfig

    rng = random.Random(5)
    rows = disordered(rng, 300, 0, 20_000, 300)
    e = Engine(EngineConfig(policy="ttu"))
    e.apply(CreateStream("s", tuple(SCHEMA.items()), "ts", Spec(10, 100, None, "event", 300, (), 4), 0))
    got: dict = {}
    e.on_answer = lambda qid, r: got.setdefault(r.slide, (r.answer.rows, r.window_start_ms, r.window_end_ms))
    e.apply(Register("Q", "SELECT k, window_start, window_end, COUNT(*) FROM s [SESSION GAP 250 ms SLIDE 200 ms] "
                          "GROUP BY k", 0, 0))
    for i in range(0, len(rows), 4):
        part = rows[i:i + 4]
        e.apply(Append("s", {"ts": [r[0] for r in part], "k": [r[1] for r in part], "v": [r[2] for r in part]},
                       "", None, 0))
        e.sched.run_until_idle()
    assert len(got) > 10
    seen: dict = {}
    for slide, (rows_, lo, hi) in got.items():  # each execution: every session whole in its window
        want = sessions_definition(rows, lo, hi, 250, whole=slide < 10)
        assert sorted(rows_, key=repr) == sorted([(k, a, b, len(v)) for (k, a, b), v in want.items()], key=repr)
        for k, a, b, n in rows_:
            assert seen.setdefault((k, a), (b, n)) == (b, n), "a session's row never changes"
    assert len(seen) > 10


# -- count-based windows on time streams ------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("clock", ["event", "processing"])
def test_last_n_rows_match_definition_10_and_duckdb(seed, clock):
    rng = random.Random(seed)
    t = rng.choice([10, 100])
    lateness = 3 * t if clock == "event" else 0
    rows = disordered(rng, rng.randint(1, 60), 0, 40 * t, 3 * t, step=5 * t)
    spec = WindowSpec(subwindows=rng.randint(2, 10), subwindow_ms=t, clock=clock, allowed_lateness_ms=lateness)
    s = Stream("s", SCHEMA, spec, 0)
    if clock == "event":
        feed(s, rows, 6, rng)
    else:  # processing time: the rows' event times are any order; arrival decides ties
        for i in range(0, len(rows), 5):
            part = rows[i:i + 5]
            s.append({"ts": [r[0] for r in part], "k": [r[1] for r in part], "v": [r[2] for r in part]})
            s.window.slide((s.window.latest + 2 + s.window._base_slot) * t)
        rows = [r for r in rows]  # all retained while the window holds them: bounds below are event times
    n = rng.choice([1, 3, 10, 1000, INT64_MAX])
    plan = plan_query(parse_query(f"SELECT k, COUNT(*), SUM(v), MAX(ts) FROM s [ROWS {n}] GROUP BY k "
                                  "ORDER BY k"), s)
    got = run_plan(plan).rows
    if clock == "event":
        lo, hi = s.window.bounds(plan.n_q)
        if lo is None:
            assert got == []
            return
    else:  # the retained rows: the youngest sub-windows' rows (event times unrelated to their bounds)
        kept = {id(r) for r in rows}
        subs = s.window.youngest(plan.n_q)
        retained = sum(x.rows for x in subs)
        rows = rows[len(rows) - retained:]
        lo, hi = min(r[0] for r in rows) if rows else 0, (max(r[0] for r in rows) + 1) if rows else 0
        del kept
    last = last_rows_definition(rows, lo, hi, n)
    groups: dict = {}
    for r in last:
        groups.setdefault(r[1], []).append(r)
    want = []
    for key in sorted(groups, key=lambda k: (k is None, k)):
        vals = [r[2] for r in groups[key] if r[2] is not None]
        want.append((key, len(groups[key]), sum(vals) if vals else None, max(r[0] for r in groups[key])))
    assert got == want
    assert [tuple(int(x) if isinstance(x, float) else x for x in r) for r in duckdb_last_rows(rows, lo, hi, n)] == want


def test_selection_commutes_with_temporal_windows_not_positional_ones_except_landmark():
    """Seed 003 Example 6 and Property 3: WHERE over [RANGE r] is the window of the selected
    stream; WHERE over [ROWS n] selects among the last n rows (sigma(S[n])), which is not the
    last n selected rows ((sigma S)[n]), except for the landmark window (all the rows)."""
    temps = [3, -1, 4, -1, -5, 9, -2, 6, 5, -3, 5, -8, 9, 7, -9]
    s = Stream("s", {"ts": "int64", "temp": "int64"}, WindowSpec(subwindows=20, subwindow_ms=10, clock="event"), 0)
    s.append({"ts": list(range(0, 10 * len(temps), 10)) + [200], "temp": temps + [0]})  # 200: the watermark
    while s.window.due(0):
        s.window.slide(0)
    assert s.window.bounds(20) == (0, 200)
    rows = list(zip(range(0, 10 * len(temps), 10), temps))

    def ask(text):
        return run_plan(plan_query(parse_query(text), s)).rows

    # temporal: sigma(S[RANGE]) = (sigma S)[RANGE], both the positive rows of [100, 200)
    assert ask("SELECT COUNT(*) FROM s [RANGE 100 ms] WHERE temp > 0") == \
        [(sum(1 for ts, x in rows if x > 0 and 100 <= ts < 200),)]
    # positional: sigma(S[ROWS 10]) has the positive ones among the last ten
    last10 = [x for _, x in rows][-10:]
    assert ask("SELECT COUNT(*) FROM s [ROWS 10] WHERE temp > 0") == [(sum(1 for x in last10 if x > 0),)]
    positives = [x for _, x in rows if x > 0]
    assert sum(1 for x in last10 if x > 0) != len(positives[-10:]), "(sigma S)[10] would hold ten rows"
    # landmark: every row retained, so the selection commutes again
    assert ask("SELECT COUNT(*) FROM s [ROWS 1000] WHERE temp > 0") == [(len(positives),)]


# -- int64 edges and refusals ----------------------------------------------------------------------------
def test_sessions_at_the_edges_of_int64_are_exact():
    t = 1000
    spec = WindowSpec(subwindows=4, subwindow_ms=t, clock="event")
    lo, hi = spec.event_time_limits()
    s = Stream("s", SCHEMA, spec, 0)
    top = hi - 3 * t  # the last four slots end at the largest bound int64 holds
    start = top - top % t
    rows = [(start - 1, "e", 0), (start, "a", 1), (start + 999, "a", 2), (start + 2500, "a", 4), (start + 3999, "a", 8)]
    s.append({"ts": [r[0] for r in rows], "k": [r[1] for r in rows], "v": [r[2] for r in rows]})
    for _ in range(5):  # the slot before `start` is evicted
        s.window.slide(0)
    assert s.window.bounds(4) == (start, hi + 1) and start + 4 * t - 1 == hi
    got = run_plan(plan_query(parse_query("SELECT window_start, window_end, SUM(v) FROM s [SESSION GAP 1 s] "), s)).rows
    # the first session may have begun before the window; the last would end past int64: neither answered
    assert got == [(start + 2500, start + 3500, 4)]
    low = Stream("s", SCHEMA, spec, 0)
    first = lo
    low.append({"ts": [first, first + 2000, first + 3999], "k": ["a"] * 3, "v": [1, 2, 3]})
    for _ in range(4):
        low.window.slide(0)
    got = run_plan(plan_query(parse_query("SELECT window_start, window_end, SUM(v) FROM s [SESSION GAP 1 s]"), low)).rows
    # nothing evicted yet: the first session is whole; the last is still open
    assert got == [(first, first + 1000, 1), (first + 2000, first + 3000, 2)]


@pytest.mark.parametrize("text, message", [
    ("SELECT COUNT(*) FROM s [SESSION GAP 3 s]", "can never be answered"),
    ("SELECT COUNT(*) FROM s [SESSION GAP 9223372036854775807 s]", "beyond int64"),
    ("SELECT COUNT(*) FROM s [SESSION GAP 9223372036854775808 ms]", "too large"),
    ("SELECT COUNT(*) FROM s [SESSION GAP 0 s]", "must be positive"),
    ("SELECT COUNT(*) FROM s [ROWS 0]", "must be positive"),
    ("SELECT COUNT(*) FROM s [ROWS 9223372036854775808]", "too large"),
    ("SELECT k, COUNT(*) FROM s [SESSION GAP 1 s] GROUP BY k ORDER BY k", "ORDER BY is not supported"),
    ("SELECT window_start, COUNT(*) FROM s [ROWS 5]", "SESSION windows only"),
    ("SELECT COUNT(*) FROM s [ROWS 5] AS OF SLIDE 1", "AS OF SLIDE is not supported"),
    ("SELECT COUNT(*) FROM s [ROWS 5 SLIDE 1500 ms]", "not a multiple"),
])
def test_refusals_name_the_reason(text, message):
    s = Stream("s", SCHEMA, WindowSpec(subwindows=5, subwindow_ms=1000, clock="event"), 0)
    with pytest.raises(QueryError, match=message):
        plan_query(parse_query(text), s)


def test_sessions_need_an_event_time_stream():
    s = Stream("s", SCHEMA, WindowSpec(subwindows=5, subwindow_ms=1000), 0)
    with pytest.raises(QueryError, match="event-time stream"):
        plan_query(parse_query("SELECT COUNT(*) FROM s [SESSION GAP 1 s]"), s)


def test_the_query_text_and_the_structured_form_round_trip():
    from windowstore.server.convert import query_from_pb, query_to_pb
    from windowstore.store import to_text

    for text in ["SELECT k, window_start, COUNT(*) FROM s [SESSION GAP 30 s SLIDE 1 s] GROUP BY k",
                 "SELECT SUM(v) FROM s [ROWS 1000 SLIDE 1 s]", 'SELECT "k", v FROM s [PARTITION BY k, "v" ROWS 2]']:
        q = parse_query(text)
        assert parse_query(to_text(q)) == q
        assert query_from_pb(query_to_pb(q)) == q  # (tests/test_structured_windows.py: its answers)


def test_one_time_and_periodic_through_the_server():
    """Through gRPC: a one-time session query and a registered [ROWS n SLIDE s] query, whose answer
    reports the bounds of the window it read; a refusal is INVALID_ARGUMENT naming the reason."""
    from conftest import wait_for
    from windowstore.clients import Client, InvalidArgument
    from windowstore.server.process import ServerProcess

    with ServerProcess() as server, Client(server.target, timeout=30) as ws:
        ws.create_stream("e", schema=SCHEMA, subwindows=10, subwindow_ms=100, clock="event")
        q = ws.register("SELECT COUNT(*), SUM(v) FROM e [ROWS 3 SLIDE 200 ms]")
        rows = [(10 * i, "a" if i % 3 else "b", i) for i in range(0, 150, 7)]
        ws.append("e", {"ts": [r[0] for r in rows], "k": [r[1] for r in rows], "v": [r[2] for r in rows]})
        ws.append("e", {"ts": [5000], "k": ["z"], "v": [0]})  # the watermark passes every row above
        a = ws.query("SELECT k, window_start, window_end, COUNT(*) FROM e [SESSION GAP 100 ms] GROUP BY k")
        lo, hi = a.window_start_ms, a.window_end_ms
        want = sessions_definition(rows, lo, hi, 100, whole=a.slide < 10)
        assert sorted(a.rows, key=repr) == sorted([(k, x, y, len(v)) for (k, x, y), v in want.items()], key=repr)
        got = wait_for(lambda: ws.read_answers(q.id)[0] or None, "the ROWS query's answers")
        for ans in got:
            last = last_rows_definition(rows, ans.window_start_ms, ans.window_end_ms, 3)
            assert ans.rows == [(len(last), sum(r[2] for r in last) if last else None)]
        with pytest.raises(InvalidArgument, match="event-time stream"):
            ws.create_stream("p", schema=SCHEMA, subwindows=10, subwindow_ms=100)
            ws.query("SELECT COUNT(*) FROM p [SESSION GAP 100 ms]")
        ws.unregister(q.id)


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.sampled_from(["a", "b", None]), st.integers(-3, 3)), max_size=40),
       st.integers(1, 50), st.integers(1, 6))
def test_last_n_rows_property_against_the_definition(events, n, subwindows):
    """Any rows (disorder bounded by the lateness) and any n: [ROWS n] reads Definition 10's last n."""
    rows, newest = [], 0
    for ts, k, v in events:
        newest = max(newest, ts)
        rows.append((max(ts, newest - 10), k, v))
    rows = [(0, "a", 0)] + rows + [(45, "z", 0)]  # 45: the watermark passes every row before it
    s = Stream("s", SCHEMA, WindowSpec(subwindows=subwindows, subwindow_ms=5, clock="event", allowed_lateness_ms=10), 0)
    feed(s, rows, 4, random.Random(2))
    plan = plan_query(parse_query(f"SELECT ts, k, v FROM s [ROWS {n}]"), s)
    lo, hi = s.window.bounds(plan.n_q)
    got = run_plan(plan).rows
    assert sorted(got, key=repr) == sorted(last_rows_definition(rows, lo, hi, n), key=repr)


def test_explain_and_sharing_say_what_these_windows_read():
    from windowstore.txn.commands import CreateStream
    from windowstore.txn.engine import Engine, EngineConfig

    s = Stream("s", SCHEMA, WindowSpec(subwindows=10, subwindow_ms=1000, clock="event"), 0)
    e = plan_query(parse_query("SELECT k, window_start, COUNT(*) FROM s [SESSION GAP 1 s] GROUP BY k"), s).explain()
    assert e["group_by"] == ["k"] and "sessions per key (gap 1000 ms)" in e["how"] and e["reads"] == 10
    assert "the last 5 rows" in plan_query(parse_query("SELECT COUNT(*) FROM s [ROWS 5]"), s).explain()["how"]
    eng = Engine(EngineConfig(policy="ttu", sharing="conservative"))
    eng.apply(CreateStream("s", tuple(SCHEMA.items()), "ts", WindowSpec(subwindows=10, subwindow_ms=1000,
                                                                         clock="event"), 0))
    why = eng.sched.sharing.explain(eng.plan(parse_query("SELECT COUNT(*) FROM s [ROWS 5 SLIDE 1 s]"), periodic=True), 1)
    assert "runs alone: rows windows are cut from the rows" in why, why


def test_seed_003_example_2_the_last_10_items_of_every_100():
    """Seed 003 Examples 1 and 2: per 100 items the last 10 (alpha(j) = 100 j + 91, beta(j) =
    100 (j + 1), r = 100 items, 1-based), on a stream of one item per second: at t = 1024 s the
    delaying function gives gamma = floor(1024 / 100) - 1 = 9, so the window answered is the 10th,
    items 991..1000. Here: a count-based stream of 100-row sub-windows and [ROWS 10 SLIDE 100 ROWS],
    the items numbered from 0 by their value."""
    s = Stream("s", {"ts": "int64", "v": "int64"}, WindowSpec(subwindows=3, subwindow_rows=100), 0)
    for t in range(0, 1024, 8):  # one item per second, in batches; each 100 seals a sub-window
        items = list(range(t, min(t + 8, 1024)))
        s.append({"ts": items, "v": items})
        while s.window.due(0):
            s.window.slide(0)
    gamma = 1024 // 100 - 1
    alpha, beta = 100 * gamma + 91, 100 * (gamma + 1)  # 1-based item numbers
    want = [(alpha - 1, beta - 1, beta - alpha + 1)]     # values are 0-based item numbers
    plan = plan_query(parse_query("SELECT MIN(v), MAX(v), COUNT(*) FROM s [ROWS 10 SLIDE 100 ROWS]"), s,
                      periodic=True)
    assert s.window.latest == gamma and plan.bound.every == 1
    assert run_plan(plan).rows == want == [(990, 999, 10)]
