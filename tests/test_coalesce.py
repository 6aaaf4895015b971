"""Temporal coalescing on window extents (store/coalesce.py): eager and lazy against a DuckDB
gaps-and-islands oracle on every slide, the temporal functions against point-set semantics, the
paper's Example 2, and the eager/lazy choice against a closed-form solution of the 0-1 program."""
from __future__ import annotations

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from windowstore.store.coalesce import (AFTER, BEFORE, CONTAINS, DCQ, DURATION, EAGER, INTERSECT, LAZY,
                                        OVERLAPS, TIME, TUPLE, VALID, Coalesced, EagerCoalescer,
                                        LazyCoalescer, OpCosts, Weights, Workload, choose_plan,
                                        coalescer, memory_eager, plan_cost, scan_eager, scan_lazy,
                                        update_eager, update_lazy)

pytestmark = pytest.mark.slow  # servers in subprocesses, or long property runs: make test-fast skips them

BOTH = [EagerCoalescer, LazyCoalescer]


def feed(cls, kind, size, rows):
    c = cls(kind, size)
    accepted = [c.insert(ts, g, v) for ts, g, v in rows]
    c._check()
    return c, accepted


# -- the paper's examples and hand-worked cases ----------------------------------------------------
@pytest.mark.parametrize("cls", BOTH)
def test_example_4_nine_readings_coalesce_to_five(cls):
    # Figure 2: hourly readings 1-3 p.m. of three regions; region 2 goes 81, 79, 81.
    temps = {1: [81, 81, 81], 2: [81, 79, 81], 3: [81, 81, 81]}
    rows = [(13 * 10 + h * 10 + r, r, temps[r][h]) for h in range(3) for r in (1, 2, 3)]
    c, _ = feed(cls, TUPLE, 9, rows)
    assert c.scan() == [
        Coalesced(1, 131, 151, 81, 3),
        Coalesced(2, 132, 142, 81, 1), Coalesced(2, 142, 152, 79, 1), Coalesced(2, 152, 152, 81, 1),
        Coalesced(3, 133, 153, 81, 3),
    ]


@pytest.mark.parametrize("cls", BOTH)
def test_late_reading_splits_a_run_and_a_later_one_re_merges(cls):
    c, _ = feed(cls, TIME, 100, [(0, "s", 5), (10, "s", 5), (20, "s", 5), (30, "s", 6)])
    assert c.scan() == [Coalesced("s", 0, 30, 5, 3), Coalesced("s", 30, 30, 6, 1)]
    assert c.insert(15, "s", 7)  # late, inside [0, 30): splits it
    c._check()
    assert c.scan() == [Coalesced("s", 0, 15, 5, 2), Coalesced("s", 15, 20, 7, 1),
                        Coalesced("s", 20, 30, 5, 1), Coalesced("s", 30, 30, 6, 1)]
    assert c.insert(25, "s", 6)  # late, joins the run it precedes
    assert c.insert(5, "s", 5)  # late, inside a run of its own value
    c._check()
    assert c.scan() == [Coalesced("s", 0, 15, 5, 3), Coalesced("s", 15, 20, 7, 1),
                        Coalesced("s", 20, 25, 5, 1), Coalesced("s", 25, 30, 6, 2)]


@pytest.mark.parametrize("cls", BOTH)
def test_expiry_is_partial_and_too_late_rows_are_discarded(cls):
    c, acc = feed(cls, TUPLE, 3, [(1, "a", 0), (2, "a", 0), (3, "a", 0), (4, "a", 1)])
    assert acc == [True] * 4
    assert c.scan() == [Coalesced("a", 2, 4, 0, 2), Coalesced("a", 4, 4, 1, 1)]
    assert not c.insert(1, "a", 0) and not c.insert(0, "b", 9)  # older than the whole window
    c.expire(4)  # a slide: everything before 4 leaves
    c._check()
    assert c.scan() == [Coalesced("a", 4, 4, 1, 1)]
    assert not c.insert(3, "a", 1)
    t, acc = feed(cls, TIME, 10, [(0, "a", 0), (5, "a", 0), (12, "a", 0), (1, "a", 0)])
    assert acc == [True, True, True, False]
    assert t.scan() == [Coalesced("a", 5, 12, 0, 2)]


@pytest.mark.parametrize("cls", BOTH)
def test_bad_input_is_a_value_error(cls):
    c = cls(TIME, 10)
    c.insert(1, "a", 0)
    with pytest.raises(ValueError, match="duplicate ts 1"):
        c.insert(1, "a", 1)
    with pytest.raises(ValueError, match="ts must be an int"):
        c.insert(1.5, "a", 0)
    with pytest.raises(ValueError, match="size"):
        cls(TIME, 0)
    with pytest.raises(ValueError, match="kind"):
        cls("rows", 3)
    with pytest.raises(ValueError, match="strategy"):
        coalescer("sometimes", TIME, 3)


# -- the oracle: gaps and islands in DuckDB over the window's rows, on every slide -----------------
ISLANDS = """
WITH t AS (
  SELECT g, ts, v,
         COALESCE(LEAD(ts) OVER (PARTITION BY g ORDER BY ts), ts) AS te,
         CASE WHEN LAG(v) OVER (PARTITION BY g ORDER BY ts) = v THEN 0 ELSE 1 END AS brk
  FROM win),
r AS (SELECT *, SUM(brk) OVER (PARTITION BY g ORDER BY ts ROWS UNBOUNDED PRECEDING) AS run FROM t)
SELECT g, MIN(ts), MAX(te), ANY_VALUE(v), COUNT(*) FROM r GROUP BY g, run ORDER BY g, MIN(ts)
"""


def oracle(con, rows):
    if not rows:
        return []
    values = ",".join(f"({g},{ts},{v})" for ts, g, v in rows)
    con.execute(f"CREATE OR REPLACE TEMP TABLE win AS SELECT * FROM (VALUES {values}) t(g, ts, v)")
    return [Coalesced(*r) for r in con.execute(ISLANDS).fetchall()]


def window_rows(kind, size, received, watermark):
    """The window by definition: of the rows received, those not before the slide's watermark,
    then the `size` latest (tuple) or those within `size` of the latest ts received (time)."""
    live = [r for r in received if watermark is None or r[0] >= watermark]
    if kind == TUPLE:
        return sorted(live)[-size:]
    latest = max(r[0] for r in received)
    return sorted(r for r in live if r[0] >= latest - size)


@st.composite
def streams(draw):
    n = draw(st.integers(1, 40))
    oop = draw(st.sampled_from([0.0, 0.2, 0.5, 1.0]))
    gap = draw(st.integers(1, 3))
    ts = [i * gap for i in range(n)]
    arrival = list(ts)
    for i in range(n):  # displace a share of the rows, each by up to eight positions
        if draw(st.floats(0, 1)) < oop:
            arrival[i] += draw(st.integers(1, 8)) * gap + 0.5
    order = sorted(range(n), key=lambda i: arrival[i])
    groups = draw(st.integers(1, 3))
    values = draw(st.integers(1, 3))
    ops = []
    for i in order:
        if draw(st.integers(0, 9)) == 0:  # now and then a slide to a watermark
            ops.append(("expire", draw(st.integers(0, max(ts[i], 1)))))
        ops.append(("insert", (ts[i], draw(st.integers(0, groups - 1)), draw(st.integers(0, values - 1)))))
    return ops


@pytest.mark.long  # make test-long (the query path's own oracle test, tests/test_temporal.py, runs in make test)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.sampled_from([TUPLE, TIME]), st.integers(1, 12))
def test_eager_lazy_and_gaps_and_islands_agree_on_every_slide(ops, kind, size):
    con = duckdb.connect()
    eager, lazy = EagerCoalescer(kind, size), LazyCoalescer(kind, size)
    received, watermark = [], None
    for op, arg in ops:
        if op == "expire":
            watermark = arg if watermark is None else max(watermark, arg)
            eager.expire(arg)
            lazy.expire(arg)
        else:
            received.append(arg)
            ok_e, ok_l = eager.insert(*arg), lazy.insert(*arg)
            want = window_rows(kind, size, received, watermark)
            assert ok_e == ok_l == (arg in want)
        eager._check()
        lazy._check()
        want = oracle(con, window_rows(kind, size, received, watermark) if received else [])
        assert eager.scan() == want
        assert lazy.scan() == want
        assert sum(eager.footprint()) == len(lazy) == sum(c.count for c in want)
        assert eager.footprint()[0] == len(want)


# -- temporal functions ----------------------------------------------------------------------------
def test_temporal_functions_on_hand_worked_intervals():
    run = Coalesced("s", 10, 40, 7, 3)
    assert VALID(run) == (10, 40) and DURATION(VALID(run)) == 30
    assert OVERLAPS((10, 40), (39, 50)) and not OVERLAPS((10, 40), (40, 50))  # half-open
    assert CONTAINS((10, 40), (10, 40)) and CONTAINS((10, 40), (20, 30)) and not CONTAINS((10, 40), (5, 30))
    assert BEFORE((10, 40), (40, 50)) and not BEFORE((10, 41), (40, 50))
    assert AFTER((40, 50), (10, 40)) and not AFTER((10, 40), (40, 50))
    assert INTERSECT((10, 40), (30, 60)) == (30, 40) and INTERSECT((10, 40), (40, 60)) is None


intervals = st.tuples(st.integers(-20, 20), st.integers(1, 15)).map(lambda p: (p[0], p[0] + p[1]))


@given(intervals, intervals)
def test_temporal_functions_match_point_sets(a, b):
    pa_, pb = set(range(*a)), set(range(*b))  # a half-open integer interval as its instants
    assert DURATION(a) == len(pa_)
    assert OVERLAPS(a, b) == bool(pa_ & pb) == OVERLAPS(b, a)
    assert CONTAINS(a, b) == (pb <= pa_)
    assert BEFORE(a, b) == (max(pa_) < min(pb))
    assert AFTER(a, b) == (min(pa_) > max(pb))
    inter = INTERSECT(a, b)
    assert (set(range(*inter)) if inter else set()) == pa_ & pb


# -- Example 2: the longest time the temperature stayed constant, per sensor, last 24 h, hourly ----
HOUR, DAY = 3600, 24 * 3600


def longest_constant_brute_force(readings, lo, hi):
    """Per sensor, over readings with lo <= ts <= hi: the largest te(j) - ts(i) over i <= j whose
    readings all hold one temperature (te(j) the next reading's ts, or ts(j) for the last)."""
    out = {}
    for sensor in {s for _, s, _ in readings}:
        rs = sorted((ts, t) for ts, s, t in readings if s == sensor and lo <= ts <= hi)
        for i in range(len(rs)):
            for j in range(i, len(rs)):
                if any(rs[k][1] != rs[i][1] for k in range(i, j + 1)):
                    break
                te = rs[j + 1][0] if j + 1 < len(rs) else rs[j][0]
                out[sensor] = max(out.get(sensor, 0), te - rs[i][0])
    return out


@pytest.mark.parametrize("strategy", [EAGER, LAZY])
@given(st.lists(st.tuples(st.integers(60, 1800), st.integers(0, 2), st.integers(20, 22)),
                min_size=1, max_size=150))
@settings(max_examples=25, deadline=None)
def test_example_2_longest_constant_temperature_per_sensor(strategy, steps):
    readings, ts = [], 0
    for step, sensor, temp in steps:
        ts += step
        readings.append((ts, sensor, temp))
    c = coalescer(strategy, TIME, DAY)
    pending = list(readings)
    for hour in range(HOUR, ts + 2 * HOUR, HOUR):
        while pending and pending[0][0] <= hour:
            assert c.insert(*pending.pop(0))
        c.expire(hour - DAY)
        answer = {}
        for run in c.scan():
            answer[run.group] = max(answer.get(run.group, 0), DURATION(VALID(run)))
        assert answer == longest_constant_brute_force(readings, hour - DAY, hour), hour


# -- section 6: the cost model and the 0-1 program -------------------------------------------------
def test_cost_equations_by_hand():
    ops = OpCosts(read=1, insert=2, delete=3, detach=4, merge=5, split=7, coalesce=11)
    q = DCQ("q", cp=0.5, oop=0.25, r_eager=24, ops=ops)
    wl = Workload(w=10, k=30, r_lazy=40, m=8, ops=ops)
    assert memory_eager(q, wl) == 10 * (0.5 * 8 + 0.5 * 24)  # 160
    # per arrival: .75*.5*2 + .75*.5*5 + .25*.5*(2+7) + .25*.5*5 = 4.375; per expiry .5*4+.5*3
    assert update_eager(q, wl) == 30 * 4.375 + 20 * 3.5
    assert update_lazy(wl) == 30 * 2 + 20 * 3
    assert scan_eager(q, wl) == 160 / 24
    assert scan_lazy(q, wl) == 10 * (0.5 * 12 + 0.5 * 1)


def closed_form(costs, shared):
    """Independent solution: all eager, or else each DCQ at its cheaper side plus the shared
    lazy extent once (forcing the DCQ that loses least to lazy if all preferred eager)."""
    eager_all = sum(c.eager for c in costs)
    picks = [c.eager < c.lazy_scan for c in costs]
    if all(picks):
        k = min(range(len(costs)), key=lambda i: costs[i].lazy_scan - costs[i].eager)
        picks[k] = False
    mixed = sum(c.eager if p else c.lazy_scan for c, p in zip(costs, picks)) + shared
    return min(eager_all, mixed)


prob = st.floats(0, 1)
dcqs = st.lists(st.tuples(prob, prob, st.integers(8, 40), st.lists(st.floats(0.1, 20), min_size=7, max_size=7)),
                min_size=1, max_size=8)


@given(dcqs, st.integers(1, 1000), st.integers(1, 5000),
       st.tuples(st.floats(0, 100), st.floats(0, 100), st.floats(0, 100)))
def test_choice_is_the_exact_optimum_of_the_0_1_program(raw, w, k, lam):
    qs = [DCQ(f"q{i}", cp, oop, r, OpCosts(*c)) for i, (cp, oop, r, c) in enumerate(raw)]
    plan = choose_plan(qs, Workload(w=w, k=k, r_lazy=48), Weights(*lam))
    chosen = [plan.choice[q.name] == EAGER for q in qs]
    assert plan.total == pytest.approx(plan_cost(chosen, plan.costs, plan.shared_lazy))
    assert plan.total == pytest.approx(closed_form(plan.costs, plan.shared_lazy))
    assert plan.total <= plan.all_eager + 1e-12 and plan.total <= plan.all_lazy + 1e-12


@given(prob, prob, prob, prob, st.floats(0, 50), st.tuples(st.floats(0, 100), st.floats(0, 100), st.floats(0, 100)))
def test_choice_follows_the_papers_trends(cp1, cp2, oop1, oop2, split, lam):
    """Unit costs but a split: eager only gets more attractive as cp rises and as oop falls
    (section 7.4), so a single query chosen eager stays eager at higher cp or lower oop."""
    wl = Workload(w=1000, k=200_000, r_lazy=40)
    ops = OpCosts(split=split)

    def eager(cp, oop):
        return choose_plan([DCQ("q", cp, oop, 24, ops)], wl, Weights(*lam)).choice["q"] == EAGER

    (lo_cp, hi_cp), (lo_oop, hi_oop) = sorted((cp1, cp2)), sorted((oop1, oop2))
    assert not eager(lo_cp, oop1) or eager(hi_cp, oop1)
    assert not eager(cp1, hi_oop) or eager(cp1, lo_oop)


@pytest.mark.parametrize("queries, wl, match", [
    ([], Workload(10, 10, 40), "queries must not be empty"),
    ([DCQ("a", 1.5, 0, 8)], Workload(10, 10, 40), r"a\.cp"),
    ([DCQ("a", 0.5, -0.1, 8)], Workload(10, 10, 40), r"a\.oop"),
    ([DCQ("a", 0.5, 0, 8), DCQ("a", 0.5, 0, 8)], Workload(10, 10, 40), "names must be distinct"),
    ([DCQ("a", 0.5, 0, 8)], Workload(0, 10, 40), "w and k"),
    ([DCQ(f"q{i}", 0.5, 0, 8) for i in range(21)], Workload(10, 10, 40), "at most 20"),
])
def test_choice_rejects_bad_input_naming_the_field(queries, wl, match):
    with pytest.raises(ValueError, match=match):
        choose_plan(queries, wl)


# -- the experiment's synthetic streams (bench/coalesce_experiment.py) ------------------------------
def test_experiment_streams_have_the_requested_extremes():
    from bench.coalesce_experiment import stream
    window = 100
    in_order = stream(2000, 0.0, 0.0, window, seed=3)
    assert [ts for ts, _, _ in in_order] == list(range(2000))
    assert len({v for _, _, v in in_order}) == 2000  # cp = 0: no reading repeats a value
    constant = stream(2000, 1.0, 1.0, window, seed=3)
    assert len({(g, v) for _, g, v in constant}) == len({g for _, g, _ in constant})  # cp = 1
    late = [ts for ts, _, _ in constant]
    assert sorted(late) == list(range(2000)) and late != sorted(late)
    c = EagerCoalescer(TUPLE, window)
    assert all(c.insert(*row) for row in constant)  # late, but never too late
