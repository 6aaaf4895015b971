"""Temporal coalescing queries (store/temporal.py): the syntax round trip, eager and lazy plans
against a DuckDB gaps-and-islands oracle over the window's rows on every slide (random
out-of-order rates, manual and event clocks), the paper's Example 2 as a periodic query, errors
naming what is wrong, and a server: SDK, explain, periodic answers and a restart."""
from __future__ import annotations

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import examples
from windowstore.store import QueryError, QuerySyntaxError, Stream, WindowSpec, parse_query, plan_query
from windowstore.store.coalesce import EAGER, LAZY
from windowstore.store.parser import parse_statement, to_text
from windowstore.store.planner.plan import run_plan

SCHEMA = {"ts": "int64", "sensor": "string", "temp": "int64"}

QUERIES = [
    "SELECT sensor, MAX(DURATION(VALID(temp))) FROM readings GROUP BY sensor",
    "SELECT sensor, temp, START(VALID(temp)), END(VALID(temp)), DURATION(VALID(temp)) AS d FROM readings GROUP BY sensor",
    "SELECT COUNT(*), SUM(DURATION(VALID(temp))), MIN(START(VALID(temp))), AVG(DURATION(VALID(temp))) FROM readings",
    "SELECT sensor, COUNT(VALID(temp)) FROM readings WHERE temp > 1 AND VALID(temp) OVERLAPS PERIOD(5, 40) GROUP BY sensor",
    "SELECT sensor, SUM(DURATION(INTERSECT(VALID(temp), PERIOD(10, 30)))) FROM readings GROUP BY sensor",
    "SELECT sensor, temp, START(VALID(temp)) FROM readings WHERE DURATION(VALID(temp)) >= 3 GROUP BY sensor",
    "SELECT sensor, COUNT(*) FROM readings WHERE VALID(temp) CONTAINS PERIOD(10, 12) AND PERIOD(0, 1) BEFORE VALID(temp) GROUP BY sensor",
    "SELECT sensor, COUNT(*) FROM readings WHERE VALID(temp) AFTER PERIOD(0, 20) GROUP BY sensor",
]


@pytest.mark.parametrize("text", QUERIES + [
    "SELECT sensor, MAX(DURATION(VALID(temp))) FROM readings [RANGE 24 h SLIDE 1 h] GROUP BY sensor ORDER BY 2 DESC LIMIT 3",
])
def test_text_round_trips(text):
    q = parse_statement(text)
    assert parse_statement(to_text(q)) == q


# -- the oracle ------------------------------------------------------------------------------------------
ISLANDS = """
CREATE OR REPLACE TEMP VIEW iv AS
WITH t AS (
  SELECT g, ts, v,
         COALESCE(LEAD(ts) OVER (PARTITION BY g ORDER BY ts), ts) AS te,
         CASE WHEN LAG(v) OVER (PARTITION BY g ORDER BY ts) IS NOT DISTINCT FROM v
                   AND LAG(ts) OVER (PARTITION BY g ORDER BY ts) IS NOT NULL THEN 0 ELSE 1 END AS brk
  FROM win),
r AS (SELECT *, SUM(brk) OVER (PARTITION BY g ORDER BY ts ROWS UNBOUNDED PRECEDING) AS run FROM t)
SELECT g, ANY_VALUE(v) AS v, MIN(ts) AS ts, MAX(te) AS te FROM r GROUP BY g, run
"""

# The same questions as QUERIES, asked of the gaps-and-islands view iv(g, v, ts, te).
ORACLE = [
    "SELECT g, MAX(te - ts) FROM iv GROUP BY g ORDER BY g",
    "SELECT g, v, ts, te, te - ts FROM iv ORDER BY g, ts",
    "SELECT COUNT(*), SUM(te - ts), MIN(ts), AVG(te - ts) FROM iv",  # (no GROUP BY: one group, below)
    None,  # (WHERE temp > 1 selects readings first: below)
    "SELECT g, SUM(CASE WHEN GREATEST(ts, 10) < LEAST(te, 30) THEN LEAST(te, 30) - GREATEST(ts, 10) END) "
    "FROM iv GROUP BY g ORDER BY g",
    "SELECT g, v, ts FROM iv WHERE te - ts >= 3 ORDER BY g, ts",
    "SELECT g, COUNT(*) FROM iv WHERE ts <= 10 AND 12 <= te AND 1 <= ts GROUP BY g ORDER BY g",
    "SELECT g, COUNT(*) FROM iv WHERE 20 <= ts GROUP BY g ORDER BY g",
]
FILTERED_ORACLE = "SELECT g, COUNT(*) FROM iv WHERE ts < 40 AND 5 < te GROUP BY g ORDER BY g"


def oracle(con, rows, sql, where=None):
    """`sql` over the islands of `rows` (ts, sensor, temp) that pass `where` (a Python test)."""
    rows = [r for r in rows if where is None or where(r)]
    con.execute("CREATE OR REPLACE TEMP TABLE win (g VARCHAR, ts BIGINT, v BIGINT)")
    if rows:
        con.executemany("INSERT INTO win VALUES (?, ?, ?)", [(g, ts, v) for ts, g, v in rows])
    con.execute(ISLANDS)
    out = [tuple(r) for r in con.execute(sql).fetchall()]
    return [tuple(None if x is None else float(x) if isinstance(x, float) else int(x) if not isinstance(x, str) else x
                  for x in r) for r in out]


def answers(stream, text):
    """The answer under each forced strategy, and the strategy the cost model chose."""
    out = {}
    for strategy in (EAGER, LAZY):
        plan = plan_query(parse_query(text), stream)
        plan._temporal.use(strategy)
        out[strategy] = [tuple(float(x) if isinstance(x, float) else x for x in r) for r in run_plan(plan).rows]
    return out, plan_query(parse_query(text), stream)._temporal.strategy


@st.composite
def slides(draw):
    """Batches of readings, one per slide: globally unique ts, a share of them late (appended in a
    later batch than their ts order puts them), few sensors and values so runs form."""
    n = draw(st.integers(1, 60))
    oop = draw(st.sampled_from([0.0, 0.1, 0.5, 1.0]))
    ts = sorted(draw(st.lists(st.integers(0, 120), min_size=n, max_size=n, unique=True)))
    sensors, values = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    batches: list[list] = [[] for _ in range(draw(st.integers(1, 8)))]
    for i, t in enumerate(ts):
        b = min(i * len(batches) // n, len(batches) - 1)
        if draw(st.floats(0, 1)) < oop:  # late: appended up to three slides after its place
            b = min(b + draw(st.integers(1, 3)), len(batches) - 1)
        batches[b].append((t, f"s{draw(st.integers(0, sensors - 1))}", draw(st.integers(0, values - 1))))
    for b in batches:  # arrival order inside a batch, shuffled too
        b[:] = draw(st.permutations(b))
    return batches


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(slides(), st.integers(1, 4))
def test_eager_lazy_and_gaps_and_islands_agree_on_every_slide(batches, n_q):
    con = duckdb.connect()
    s = Stream("readings", SCHEMA, WindowSpec(subwindows=4, subwindow_ms=10, clock="manual"), 0)
    held: list[list] = []
    rng = f"[RANGE {n_q} SUBWINDOWS]"
    for k, batch in enumerate(batches):
        if batch:
            s.append({"ts": [r[0] for r in batch], "sensor": [r[1] for r in batch], "temp": [r[2] for r in batch]})
        s.window.slide(k)
        held.append(batch)
        window = [r for b in held[-min(n_q, 4):] for r in b]
        for text, sql in zip(QUERIES, ORACLE):
            text = text.replace("FROM readings", f"FROM readings {rng}")
            got, _ = answers(s, text)
            if sql is None:
                want = oracle(con, window, FILTERED_ORACLE, where=lambda r: r[2] > 1)
            elif "GROUP BY" not in text:  # without GROUP BY every reading is of one group
                want = oracle(con, [(ts, "", v) for ts, _, v in window], sql)
            else:
                want = oracle(con, window, sql)
            assert got[EAGER] == got[LAZY] == want, (text, window)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 30), st.integers(0, 2)), max_size=8),
                min_size=1, max_size=6))
def test_merging_sub_windows_runs_equals_coalescing_their_rows_at_once(parts):
    """Eager's state, run by run: the sub-windows' runs merged (split where a part interleaves)
    are the runs of all the rows coalesced in one pass (ties on ts keep window order), every
    reading kept once."""
    from windowstore.store.temporal import coalesce_rows, merge_runs

    rows = [[((g,), ts, v) for g, ts, v in part] for part in parts]
    assert merge_runs([coalesce_rows(p) for p in rows if p]) == coalesce_rows([r for p in rows for r in p])


def test_the_cost_model_counts_the_readings_a_late_row_makes_eager_re_merge():
    """splitTuple cuts the run a late row falls in at the row: only the readings after it are
    re-merged with the late sub-window's, counted per reading of the later sub-windows."""
    from windowstore.store.temporal import coalesce_rows, eager_rates

    old = coalesce_rows([(("a",), 0, 5), (("a",), 10, 5), (("a",), 20, 5), (("a",), 30, 6)])
    late = coalesce_rows([(("a",), 15, 7)])
    assert eager_rates([old, late]) == (1 - 3 / 5, 3 / 1)  # 3 runs of 5 readings; 15, 20 and 30 re-merged
    in_order = coalesce_rows([(("a",), 40, 6), (("a",), 50, 6)])
    assert eager_rates([old, in_order]) == (1 - 3 / 6, 0.0)


def test_late_rows_split_and_re_merge_and_expiry_is_partial():
    s = Stream("readings", SCHEMA, WindowSpec(subwindows=3, subwindow_ms=10, clock="manual"), 0)
    text = "SELECT sensor, temp, START(VALID(temp)), END(VALID(temp)) FROM readings GROUP BY sensor"
    s.append({"ts": [0, 10, 20, 30], "sensor": ["a"] * 4, "temp": [5, 5, 5, 6]})
    s.window.slide(0)
    got, _ = answers(s, text)
    assert got[EAGER] == got[LAZY] == [("a", 5, 0, 30), ("a", 6, 30, 30)]
    s.append({"ts": [15], "sensor": ["a"], "temp": [7]})  # late, inside [0, 30): splits it
    s.window.slide(1)
    got, _ = answers(s, text)
    assert got[EAGER] == got[LAZY] == [("a", 5, 0, 15), ("a", 7, 15, 20), ("a", 5, 20, 30), ("a", 6, 30, 30)]
    s.append({"ts": [17], "sensor": ["a"], "temp": [5]})  # late again: re-merges 15..20 into nothing new
    s.window.slide(2)
    s.append({"ts": [40], "sensor": ["a"], "temp": [6]})
    s.window.slide(3)  # slide 0 leaves: the runs of its readings lose them (partial expiry)
    got, _ = answers(s, text)
    assert got[EAGER] == got[LAZY] == [("a", 7, 15, 17), ("a", 5, 17, 40), ("a", 6, 40, 40)]


def test_event_clock_late_rows_within_the_allowed_lateness():
    s = Stream("readings", SCHEMA, WindowSpec(subwindows=4, subwindow_ms=100, clock="event",
                                               allowed_lateness_ms=100), 0)
    text = "SELECT sensor, MAX(DURATION(VALID(temp))), COUNT(*) FROM readings GROUP BY sensor"
    s.append({"ts": [0, 50, 120], "sensor": ["a", "a", "a"], "temp": [1, 1, 1]})
    s.append({"ts": [60, 210], "sensor": ["a", "a"], "temp": [2, 1]})  # 60 is late (within lateness): splits
    while s.window.due(0):
        s.window.slide(0)
    got, _ = answers(s, text)
    assert got[EAGER] == got[LAZY] == [("a", 60, 2)]  # slot 0 sealed: [0, 60) at 1 (0, 50), then 60 at 2


def test_example_2_longest_constant_temperature_per_sensor_every_hour():
    """The paper's Example 2 as a periodic query on a 24 h window sliding each hour."""
    hour = 3_600_000
    s = Stream("readings", SCHEMA, WindowSpec(subwindows=24, subwindow_ms=hour, clock="manual"), 0)
    text = "SELECT sensor, MAX(DURATION(VALID(temp))) FROM readings [RANGE 24 h SLIDE 1 h] GROUP BY sensor"
    temps = {"a": [20, 20, 20, 21, 21, 20], "b": [18, 19, 19, 19, 19, 19]}
    for h in range(30):
        t = h * hour
        s.append({"ts": [t, t + 1000], "sensor": ["a", "b"], "temp": [temps["a"][h % 6], temps["b"][h % 6]]})
        s.window.slide(t)
    plan = plan_query(parse_query(text), s, periodic=True)
    assert plan.bound.every == 1
    rows = run_plan(plan).rows
    # a: 20 for 3 hours (3 h), then 21 for 2, then 20 again joins the next cycle's 20s: 4 h.
    # b: 19 for five hours, then 18 for one.
    assert rows == [("a", 4 * hour), ("b", 5 * hour)]


@pytest.mark.parametrize("text, match", [
    ("SELECT MAX(DURATION(VALID(nope))) FROM readings", "unknown column 'nope'"),
    ("SELECT MAX(DURATION(VALID(temp))), MAX(DURATION(VALID(ts))) FROM readings", "one column"),
    ("SELECT sensor, MAX(DURATION(VALID(temp))) FROM readings", "GROUP BY column"),
    ("SELECT sensor, DURATION(VALID(temp)), COUNT(*) FROM readings GROUP BY sensor", "needs an aggregate"),
    ("SELECT COUNT(*) FROM readings WHERE temp = 1 OR VALID(temp) OVERLAPS PERIOD(0, 1)", "under OR"),
    ("SELECT MAX(VALID(temp)) FROM readings", "take DURATION"),
    ("SELECT QUANTILE(DURATION(VALID(temp)), 0.5) FROM readings", None),
    ("SELECT sensor, COUNT(*) FROM readings GROUP BY sensor HAVING COUNT(*) > 1 ", None),
])
def test_bad_temporal_queries_name_the_problem(text, match):
    s = Stream("readings", SCHEMA, WindowSpec(subwindows=2, subwindow_ms=10, clock="manual"), 0)
    if match is None:  # not temporal, or refused as syntax: whatever it is, never a crash
        try:
            plan_query(parse_query(text), s)
        except (QueryError, QuerySyntaxError):
            pass
        return
    with pytest.raises(QueryError, match=match):
        plan_query(parse_query(text), s)


@pytest.mark.parametrize("text, match", [
    ("SELECT VALID(temp) FROM readings", "is an interval"),
    ("SELECT COUNT(*) FROM readings WHERE VALID(temp) NEAR PERIOD(0, 1)", "OVERLAPS"),
    ("SELECT COUNT(*) FROM readings WHERE VALID(temp) OVERLAPS PERIOD(5, 1)", "ends before"),
    ("SELECT MAX(DURATION(temp)) FROM readings", "expected an interval"),
])
def test_temporal_syntax_errors_name_position_and_token(text, match):
    with pytest.raises(QuerySyntaxError, match=match):
        parse_statement(text)


def test_the_plan_says_which_strategy_the_cost_model_chose():
    s = Stream("readings", SCHEMA, WindowSpec(subwindows=4, subwindow_ms=10, clock="manual"), 0)
    s.append({"ts": list(range(100)), "sensor": ["a"] * 100, "temp": [i // 50 for i in range(100)]})
    s.window.slide(0)
    plan = plan_query(parse_query("SELECT MAX(DURATION(VALID(temp))) FROM readings"), s)
    how = plan.explain()["how"]
    assert f"coalesced {plan._temporal.strategy}" in how and "cp 0.98" in how and "oop 0.00" in how


def test_the_cost_model_follows_cp_and_oop_and_picks_the_cheaper_estimate():
    from windowstore.store.temporal import choose

    assert choose(0.9, 0.0, 5000, 10)[0] == EAGER   # long runs in order: few runs to merge per read
    assert choose(0.0, 0.9, 5000, 10)[0] == LAZY    # new values arriving late: every read re-merges
    for cp, oop, reads in ((0.5, 0.5, 1), (0.2, 0.1, 24), (0.8, 0.9, 3)):
        strategy, m = choose(cp, oop, 1000, reads)
        assert m.total == min(m.all_eager, m.all_lazy)
        assert strategy == (EAGER if m.all_eager < m.all_lazy else LAZY)
