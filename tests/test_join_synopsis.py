"""The basic-interval-join synopsis (thesis 8.3.2; store/join/synopsis.py Intervals): periodic COUNT, SUM, AVG,
MIN and MAX over a join keep pre-aggregated intervals labelled by when their rows expire, never the
result rows, and answer exactly what recomputing the join from scratch answers: after every slide of
every joined stream, eager or lazy, with sums beyond int64, self-joins, three-way joins, string
dictionary compaction (re-sealed sub-windows), and through the scheduler as a periodic query."""
from __future__ import annotations

import random

import pytest

from windowstore.store import Stream, WindowSpec
from windowstore.store.errors import ResourceLimit
from windowstore.store.join import plan_join, window_inputs
from windowstore.store.parser import parse_statement
from windowstore.txn import History, Scheduler, check
from windowstore.txn.joins import JoinQueryPlan

SCHEMA = {"ts": "int64", "k": "string", "g": "int64", "v": "int64", "f": "float64"}
BIG = 2**62

QUERIES = [
    "SELECT COUNT(*), SUM(b.v), AVG(a.v), MIN(b.v), MAX(a.g) FROM s0 a [RANGE {r0} SUBWINDOWS] "
    "JOIN s1 b [RANGE {r1} SUBWINDOWS] ON a.k = b.k",
    "SELECT SUM(a.v), COUNT(b.k), AVG(b.v) FROM s0 a [RANGE {r0} SUBWINDOWS] JOIN s1 b [RANGE {r1} SUBWINDOWS] "
    "ON a.g = b.g AND b.ts BETWEEN a.ts - 3 AND a.ts + 3 WHERE a.v > 0",
    "SELECT COUNT(*), SUM(y.v) FROM s0 x [RANGE {r0} SUBWINDOWS] JOIN s0 y [RANGE {r1} SUBWINDOWS] ON x.k = y.k",
    "SELECT COUNT(*), MAX(c.v), SUM(c.v) FROM s0 a [RANGE {r0} SUBWINDOWS] JOIN s1 b [RANGE {r1} SUBWINDOWS] "
    "ON a.k = b.k JOIN s2 c ON c.g = b.g WITHIN 5 ms",
]


def streams(n=(4, 3, 5)):
    return {f"s{i}": Stream(f"s{i}", SCHEMA, WindowSpec(subwindows=m, subwindow_ms=1, clock="manual"), 0)
            for i, m in enumerate(n)}


def feed(rng, s: Stream, t: int, big: bool) -> None:
    rows = rng.randint(0, 6)
    s.append({"ts": [t + rng.randint(0, 4) for _ in range(rows)],
              "k": [f"k{rng.randint(0, 3)}" for _ in range(rows)],
              "g": [rng.randint(0, 2) for _ in range(rows)],
              "v": [rng.choice([BIG, -BIG, BIG - 1]) if big else rng.randint(-9, 20) for _ in range(rows)],
              "f": [rng.random() for _ in range(rows)]})


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(24))
def test_synopsis_answers_equal_recomputation_after_every_slide(seed):
    rng = random.Random(seed)
    ss = streams()
    text = QUERIES[seed % len(QUERIES)].format(r0=rng.randint(1, 4), r1=rng.randint(1, 3))
    query = parse_statement(text)
    kept = plan_join(query, ss, cache=True)
    assert kept.synopsis
    eager = seed % 2 == 0
    big = seed % 3 == 0
    for t in range(40):
        name = rng.choice(list(ss))
        feed(rng, ss[name], t, big)
        ss[name].window.slide(t)
        if t == 25 and seed % 4 == 1:
            ss["s0"].compact_strings()  # every live sub-window of s0 re-sealed: expired and new to the plan
        if eager:
            kept.refresh(window_inputs(kept, ss))
        if t % 3 == 0 or eager:
            fresh = plan_join(query, ss, cache=False)
            assert not fresh.synopsis
            expected = fresh.evaluate(window_inputs(fresh, ss))
            got = kept.evaluate(window_inputs(kept, ss))
            assert got.rows == expected.rows, (t, text)      # exactly: no rounding anywhere
            assert got.types == expected.types and got.columns == expected.columns
            assert kept._chunks == []                        # no result rows kept
            sizes = [len(ss[s.stream].window.youngest(s.n_q)) for s in kept.bound.sources]
            bound = 1
            for n in sizes:
                bound *= n
            assert len(kept._intervals.labels) <= bound


def test_synopsis_only_where_it_is_exact():
    ss = streams()
    for text, expect in [
        ("SELECT COUNT(*), SUM(b.v) FROM s0 a JOIN s1 b ON a.k = b.k", True),
        ("SELECT a.k, COUNT(*) FROM s0 a JOIN s1 b ON a.k = b.k GROUP BY a.k", False),
        ("SELECT SUM(b.f) FROM s0 a JOIN s1 b ON a.k = b.k", False),            # float sums: order-dependent
        ("SELECT MIN(b.k) FROM s0 a JOIN s1 b ON a.k = b.k", False),
        ("SELECT COUNT(DISTINCT b.v) FROM s0 a JOIN s1 b ON a.k = b.k", False),
        ("SELECT a.v, b.v FROM s0 a JOIN s1 b ON a.k = b.k", False),
    ]:
        q = parse_statement(text)
        assert plan_join(q, ss, cache=True).synopsis is expect, text
        assert plan_join(q, ss, cache=False).synopsis is False


def test_synopsis_is_bounded_by_the_row_limit():
    """Eager refreshes join one new sub-window at a time (small intermediates), but the rows the intervals
    summarise add up: 3 x 3 of them are more than a limit of 5 (refused as a one-time join would be)."""
    ss = streams((3, 3, 2))
    q = parse_statement("SELECT COUNT(*) FROM s0 a JOIN s1 b ON a.k = b.k")
    plan = plan_join(q, ss, max_rows=5, cache=True)
    refused = 0
    for t in range(3):
        for name in ("s0", "s1"):
            ss[name].append({"ts": [t], "k": ["x"], "g": [0], "v": [1], "f": [0.0]})
            ss[name].window.slide(t)
            try:
                plan.refresh(window_inputs(plan, ss))
            except ResourceLimit as e:
                assert "the join result" in str(e)
                refused += 1
    assert refused > 0
    roomy = plan_join(q, ss, max_rows=9, cache=True)
    assert roomy.evaluate(window_inputs(roomy, ss)).rows == [(9,)]


def test_periodic_join_through_the_scheduler_uses_the_synopsis():
    now = [0]
    h = History()
    sched = Scheduler("ttu", clock=lambda: now[0], history=h)
    ss = streams()
    for s in ss.values():
        sched.add_stream(s)
    text = ("SELECT COUNT(*), SUM(b.v), AVG(a.v) FROM s0 a [RANGE 3 SUBWINDOWS SLIDE 1 SUBWINDOWS] "
            "JOIN s1 b ON a.k = b.k")
    plan = JoinQueryPlan(plan_join(parse_statement(text), ss, cache=True), ss)
    assert plan.join.synopsis
    answers = []

    def answered(r):
        fresh = plan_join(parse_statement(text), ss, cache=False)
        answers.append((r.answer.rows, fresh.evaluate(window_inputs(fresh, ss)).rows))
    sched.register(plan, every=1, on_answer=answered)
    rng = random.Random(5)
    for t in range(30):
        now[0] = t
        name = rng.choice(["s0", "s1"])
        feed(rng, ss[name], t, big=t % 2 == 0)
        sched.request_slide(name)
        sched.run_until_idle()
    assert len(answers) > 10
    assert all(got == want for got, want in answers)
    assert plan.join.stats.rows_reused > 0 and plan.join.stats.rows_expired > 0
    assert check(h.events).violations("lws") == []


TYPED = {"ts": "int64", "k": "int64", "v": "int64", "d": "decimal(18,3)", "at": "timestamp", "b": "boolean"}


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_synopsis_with_nulls_and_typed_columns_agrees_with_duckdb(seed):
    """NULLs in the key, the aggregated columns (whole intervals of only NULLs too) and decimal sums beyond
    int64: the kept intervals answer what DuckDB answers over the windows read, after every slide. MIN and MAX
    of booleans are recomputed from kept rows (not a synopsis), and agree too."""
    from decimal import Decimal
    from fractions import Fraction
    from types import SimpleNamespace

    import differential as D

    rng = random.Random(100 + seed)
    ss = {f"s{i}": Stream(f"s{i}", TYPED, WindowSpec(subwindows=m, subwindow_ms=1, clock="manual"), 0)
          for i, m in enumerate((3, 4))}
    history = {name: [] for name in ss}
    text = ("SELECT COUNT(*), COUNT(b.v), SUM(a.v), AVG(b.d), SUM(b.d), MIN(a.at), MAX(b.d), MAX(a.v), MIN(b.at) "
            "FROM s0 a [RANGE 2 SUBWINDOWS] JOIN s1 b ON a.k = b.k")
    plan = plan_join(parse_statement(text), ss, cache=True)
    assert plan.synopsis
    bools = plan_join(parse_statement(text.replace("SELECT", "SELECT MAX(b.b), MIN(a.b),")), ss, cache=True)
    assert not bools.synopsis
    con = D.duckdb_connection()
    huge = Decimal("999999999999999.999")

    def value(col):
        if rng.random() < (0.6 if seed % 2 else 0.25):
            return None
        return {"k": rng.randint(0, 2), "v": rng.choice([-3, 5, 2**62]), "d": rng.choice([huge, Decimal("-0.005"), -huge]),
                "at": rng.choice([0, -1, 1_767_225_600_000_000]), "b": rng.random() < 0.5}[col]

    for t in range(24):
        name = rng.choice(list(ss))
        rows = [(t,) + tuple(value(c) for c in list(TYPED)[1:]) for _ in range(rng.randint(0, 5))]
        if rows:
            ss[name].append({c: [r[i] for r in rows] for i, c in enumerate(TYPED)})
        ss[name].window.slide(t)
        history[name].append(rows)
        if seed % 2 == 0:
            plan.refresh(window_inputs(plan, ss))
        if t % 2:
            continue
        for src, name_, n_q in (("a", "s0", 2), ("b", "s1", 4)):
            visible = [r for sub in history[name_][-n_q:] for r in sub]
            con.register(src, D.arrow_columns(SimpleNamespace(schema=list(TYPED.items())), visible))
        want = con.execute(
            "SELECT count(*), count(b.v), sum(a.v), count(b.d), "
            "sum(b.d), epoch_us(min(a.at)), max(b.d), max(a.v), epoch_us(min(b.at)), max(b.b), min(a.b) "
            "FROM a JOIN b ON a.k = b.k").fetchall()[0]
        want = list(want)
        # AVG of a DECIMAL is a DOUBLE (DuckDB's type): the double nearest the exact mean
        want[3] = None if not want[3] else float(Fraction(want[4]) / want[3])
        got = plan.evaluate(window_inputs(plan, ss))
        assert list(got.rows[0]) == want[:9], (t, got.rows, want)
        assert [type(v) for v in got.rows[0]] == [type(v) for v in want[:9]]
        assert got.types == ["int64", "int64", "int128", "float64", "decimal(38,3)", "timestamp",
                             "decimal(18,3)", "int64", "timestamp"]
        assert plan._chunks == []
        assert list(bools.evaluate(window_inputs(bools, ss)).rows[0]) == want[9:] + want[:9]
