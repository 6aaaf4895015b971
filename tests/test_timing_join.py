"""Timing conditions in window joins (issue 34, seed 002), in process: the syntax and its errors, an
independent rational oracle of the probability (the trapezoid density of the difference of two
uniforms, point times included) checked against the store's exact form and against Monte Carlo,
and every access path (the paper's algorithms) returning exactly the reference set (a nested loop
over the windows deciding each pair with the oracle) on one-time and periodic queries over two
streams' sliding windows, with the PROB() column, the planner's choice and its explanation."""
from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import examples

from windowstore.store import Stream, WindowSpec
from windowstore.store.errors import QueryError, QuerySyntaxError, ResourceLimit
from windowstore.store.join import plan_join, run_join, window_inputs
from windowstore.store.join.timing import ACCESS_PATHS, choose
from windowstore.store.parser import parse_statement, to_text
from windowstore.store.timing import band_probability_exact
from windowstore.store.timing_syntax import Timing

SCHEMA = {"ts": "int64", "id": "int64", "lo": "int64", "hi": "int64", "tag": "string"}
MUTUAL = "SELECT a.id, b.id, PROB() FROM a JOIN b ON PROB(ABS(INTERVAL(a.lo, a.hi) - INTERVAL(b.lo, b.hi)) <= {d} ms) >= {ct}"
DEADLINE = "SELECT a.id, b.id, PROB() FROM a JOIN b ON PROB(INTERVAL(a.lo, a.hi) + {d} ms >= INTERVAL(b.lo, b.hi)) >= {ct}"
DELAY = "SELECT a.id, b.id, PROB() FROM a JOIN b ON PROB(INTERVAL(a.lo, a.hi) + {d} ms <= INTERVAL(b.lo, b.hi)) >= {ct}"
TEXTS = {"mutual": MUTUAL, "deadline": DEADLINE, "delay": DELAY}


# -- the oracle --------------------------------------------------------------------------------------------
def _ramp(s: Fraction) -> Fraction:
    return s * s / 2 if s > 0 else Fraction(0)


def oracle_cdf(a1, b1, a2, b2, t) -> Fraction:
    """P(Y - X <= t), X ~ U[a1, b1], Y ~ U[a2, b2] (a point where the ends are equal), exactly.
    Both proper: with X = b1 - u, Y = a2 + v, Y - X <= t is u + v <= s, s = t - (a2 - b1), whose area
    in [0, L1] x [0, L2] is R(s) - R(s - L1) - R(s - L2) + R(s - L1 - L2) (R(s) = s^2/2 for s > 0):
    the integral of the trapezoid density of the difference."""
    a1, b1, a2, b2, t = (Fraction(v) for v in (a1, b1, a2, b2, t))
    l1, l2 = b1 - a1, b2 - a2
    if l1 == 0 and l2 == 0:
        return Fraction(1) if a2 - a1 <= t else Fraction(0)
    if l1 == 0:  # Y - a1 uniform over [a2 - a1, b2 - a1]
        return min(Fraction(1), max(Fraction(0), (t - (a2 - a1)) / l2))
    if l2 == 0:  # a2 - X <= t iff X >= a2 - t
        return min(Fraction(1), max(Fraction(0), (b1 - (a2 - t)) / l1))
    s = t - (a2 - b1)
    return (_ramp(s) - _ramp(s - l1) - _ramp(s - l2) + _ramp(s - l1 - l2)) / (l1 * l2)


def oracle(kind: str, d, a: tuple, b: tuple) -> Fraction:
    """The probability of the timing predicate for I1 = [a], I2 = [b]."""
    (a1, b1), (a2, b2) = a, b
    d = Fraction(d)
    if a1 == b1 and a2 == b2:  # two points: D is one value
        diff = Fraction(a2) - Fraction(a1)
        ok = {"mutual": abs(diff) <= d, "deadline": diff <= d, "delay": diff >= d}[kind]
        return Fraction(int(ok))
    # D is continuous: P(D < x) == P(D <= x)
    if kind == "mutual":
        return oracle_cdf(a1, b1, a2, b2, d) - oracle_cdf(a1, b1, a2, b2, -d)
    if kind == "deadline":
        return oracle_cdf(a1, b1, a2, b2, d)
    return 1 - oracle_cdf(a1, b1, a2, b2, d)


BAND = {"mutual": lambda d: (-d, d), "deadline": lambda d: (None, d), "delay": lambda d: (d, None)}

ends = st.fractions(min_value=-50, max_value=50, max_denominator=12)


@settings(max_examples=examples(300), deadline=None)
@given(st.sampled_from(["mutual", "deadline", "delay"]), ends, ends, ends, st.fractions(0, 30, max_denominator=6),
       st.fractions(0, 30, max_denominator=6), st.sampled_from([0, 1]), st.sampled_from([0, 1]))
def test_the_exact_probability_equals_the_trapezoid_oracle(kind, d, a1, a2, l1, l2, point1, point2):
    l1, l2 = (0 if point1 else l1), (0 if point2 else l2)
    lo, hi = BAND[kind](d)
    if kind == "mutual":
        lo, hi = -abs(d), abs(d)
        d = abs(d)
    got = band_probability_exact(a1, a1 + l1, a2, a2 + l2, lo, hi)
    assert got == oracle(kind, d, (a1, a1 + l1), (a2, a2 + l2))


@pytest.mark.parametrize("kind,d,a,b", [
    ("mutual", 100, (0, 150), (80, 120)),
    ("mutual", 30, (0, 200), (150, 170)),
    ("deadline", 50, (0, 100), (60, 260)),
    ("delay", -20, (40, 60), (0, 200)),
    ("mutual", 10, (5, 5), (0, 40)),      # a point time
])
def test_the_oracle_agrees_with_monte_carlo(kind, d, a, b):
    rng = np.random.default_rng(7)
    n = 400_000
    x = rng.uniform(a[0], a[1], n) if a[1] > a[0] else np.full(n, float(a[0]))
    y = rng.uniform(b[0], b[1], n) if b[1] > b[0] else np.full(n, float(b[0]))
    diff = y - x
    hit = {"mutual": np.abs(diff) <= d, "deadline": diff <= d, "delay": diff >= d}[kind]
    p = float(oracle(kind, d, a, b))
    sigma = max((p * (1 - p) / n) ** 0.5, 1 / n)
    assert abs(hit.mean() - p) <= 6 * sigma, (hit.mean(), p)


# -- the syntax ---------------------------------------------------------------------------------------------
def test_the_three_forms_parse():
    [t] = parse_statement(MUTUAL.format(d=5000, ct=0.8)).sources[1].on
    assert isinstance(t, Timing) and (t.kind, t.left, t.right, t.d, str(t.ct)) == (
        "mutual", ("a.lo", "a.hi"), ("b.lo", "b.hi"), 5000, "0.8")
    t = parse_statement("SELECT a.id FROM a JOIN b ON PROB(INTERVAL(a.lo, a.hi) + 2 s >= INTERVAL(b.lo, b.hi)) >= 1"
                        ).sources[1].on[0]
    assert (t.kind, t.d, str(t.ct)) == ("deadline", 2000, "1")
    t = parse_statement("SELECT a.id FROM a JOIN b ON PROB(INTERVAL(a.lo, a.hi) - 3 <= INTERVAL(b.lo, b.hi)) >= .25 "
                        "AND a.tag = b.tag").sources[1].on
    assert (t[0].kind, t[0].d, str(t[0].ct)) == ("delay", -3, "0.25") and t[1].left == "a.tag"
    q = parse_statement(MUTUAL.format(d=1, ct=0.5) + " ORDER BY 3 DESC")
    assert q.items[2].label == "prob()"


@pytest.mark.parametrize("text", [
    MUTUAL.format(d=5000, ct="0.8"),
    DEADLINE.format(d=-20, ct="1") + " AND a.tag = b.tag ORDER BY 3 DESC LIMIT 4",
    DELAY.format(d=7, ct="0.125"),
])
def test_the_text_form_round_trips(text):
    q = parse_statement(text)
    assert parse_statement(to_text(q)) == q


@pytest.mark.parametrize("text,reason,token", [
    ("SELECT a.id FROM a JOIN b ON PROB(ABS(INTERVAL(a.lo, a.hi) - INTERVAL(b.lo, b.hi)) <= 5 s) >= 1.5",
     "confidence threshold", "1.5"),
    ("SELECT a.id FROM a JOIN b ON PROB(ABS(INTERVAL(a.lo, a.hi) - INTERVAL(b.lo, b.hi)) <= 5 s) >= 0",
     "confidence threshold", "0"),
    ("SELECT a.id FROM a JOIN b ON PROB(ABS(INTERVAL(a.lo, a.hi) + INTERVAL(b.lo, b.hi)) <= 5 s) >= 0.5",
     "expected '-'", "+"),
    ("SELECT a.id FROM a JOIN b ON PROB(ABS(INTERVAL(a.lo, a.hi) - INTERVAL(b.lo, b.hi)) <= -5) >= 0.5",
     "needs d >= 0", "-5"),
    ("SELECT a.id FROM a JOIN b ON PROB(ABS(a.lo - INTERVAL(b.lo, b.hi)) <= 5) >= 0.5", "expected INTERVAL", "a.lo"),
    ("SELECT a.id FROM a JOIN b ON PROB(INTERVAL(a.lo, a.hi) >= INTERVAL(b.lo, b.hi)) >= 0.5", "expected + d", ">="),
    ("SELECT a.id FROM a JOIN b ON PROB(INTERVAL(a.lo, a.hi) + 5 = INTERVAL(b.lo, b.hi)) >= 0.5", "expected >=", "="),
    ("SELECT a.id FROM a JOIN b ON PROB(INTERVAL(a.lo, a.hi) + 5 rows >= INTERVAL(b.lo, b.hi)) >= 0.5",
     "in ms, s, min or h", "rows"),
    ("SELECT a.id FROM a JOIN b ON PROB(INTERVAL(a.lo, a.hi) + 5 >= INTERVAL(b.lo, b.hi)) > 0.5",
     "expected >= and a confidence threshold", ">"),
])
def test_syntax_errors_name_position_and_token(text, reason, token):
    with pytest.raises(QuerySyntaxError) as e:
        parse_statement(text)
    assert reason in e.value.reason and e.value.token == token, e.value
    assert e.value.position == (text.rindex(token) if token == ">" else text.index(token))


def make(name: str, subwindows: int = 4) -> Stream:
    return Stream(name, SCHEMA, WindowSpec(subwindows=subwindows, subwindow_ms=1000, clock="manual"), created_ms=0)


def seal(stream: Stream, rows: list[dict], now_ms: int) -> None:
    if rows:
        stream.append({c: [r[c] for r in rows] for c in SCHEMA})
    stream.window.slide(now_ms)


@pytest.mark.parametrize("text,needle,token", [
    ("SELECT a.id FROM a JOIN b ON PROB(ABS(INTERVAL(a.lo, b.hi) - INTERVAL(b.lo, b.hi)) <= 5) >= 0.5",
     "belong to one source", "INTERVAL"),
    ("SELECT a.id FROM a JOIN b ON PROB(ABS(INTERVAL(a.lo, a.hi) - INTERVAL(a.lo, a.hi)) <= 5) >= 0.5",
     "relates two sources", "PROB"),
    ("SELECT a.id FROM a JOIN b ON PROB(ABS(INTERVAL(a.tag, a.hi) - INTERVAL(b.lo, b.hi)) <= 5) >= 0.5",
     "int64 or float64", "INTERVAL"),
    ("SELECT a.id FROM a JOIN b ON PROB(ABS(INTERVAL(a.lo, a.hi) - INTERVAL(b.lo, b.nope)) <= 5) >= 0.5",
     "unknown column 'nope'", "INTERVAL"),
    ("SELECT a.id, PROB() FROM a JOIN b ON a.tag = b.tag", "exactly one", "PROB"),
    ("SELECT COUNT(*), PROB() FROM a JOIN b ON PROB(ABS(INTERVAL(a.lo, a.hi) - INTERVAL(b.lo, b.hi)) <= 5) >= 0.5",
     "cannot be grouped or aggregated", "PROB"),
    ("SELECT a.id FROM a JOIN b ON PROB(INTERVAL(a.lo, a.hi) + 9007199254740993 >= INTERVAL(b.lo, b.hi)) >= 0.5",
     "within 2**53", "PROB"),
])
def test_bind_errors_name_position_and_token(text, needle, token):
    streams = {"a": make("a"), "b": make("b")}
    with pytest.raises(QueryError) as e:
        plan_join(parse_statement(text), streams)
    assert needle in e.value.reason and e.value.token == token, e.value
    assert e.value.position in (text.index(token), text.rindex(token))


def test_a_timing_condition_connects_its_sources_and_a_single_stream_has_no_prob():
    streams = {"a": make("a"), "b": make("b")}
    plan_join(parse_statement(MUTUAL.format(d=5, ct=0.5)), streams)  # no cross product
    with pytest.raises(QueryError):
        from windowstore.store import bind
        bind(parse_statement("SELECT PROB() FROM a"), streams["a"].schema, streams["a"].spec)


# -- the join: every access path returns the reference set ------------------------------------------------
def reference(kind: str, d: int, ct: str, left: list[dict], right: list[dict]) -> dict:
    """{(a.id, b.id): exact probability} of the pairs at or above ct (the float nearest ct, as the
    store compares): Simple's nested loop, decided by the oracle."""
    threshold = Fraction(float(ct))
    out = {}
    for x in left:
        for y in right:
            p = oracle(kind, d, (x["lo"], x["hi"]), (y["lo"], y["hi"]))
            if p >= threshold:
                out[(x["id"], y["id"])] = p
    return out


def window_rows(log: list[list[dict]], n: int) -> list[dict]:
    return [r for sub in log[-n:] for r in sub]


@st.composite
def scenarios(draw):
    kind = draw(st.sampled_from(["mutual", "deadline", "delay"]))
    d = draw(st.integers(0, 400) if kind == "mutual" else st.integers(-400, 400))
    ct = draw(st.sampled_from(["1", "0.95", "0.8", "0.5", "0.3", "0.05"]))
    slides = []
    ident = 0
    for j in range(draw(st.integers(2, 7))):
        step = []
        for side in ("a", "b"):
            rows = []
            for _ in range(draw(st.integers(0, 9))):
                hi = j * 1000 + draw(st.integers(-400, 1400))
                length = draw(st.sampled_from([0, 0, 1, 20, 100, 200, 350]) | st.integers(0, 400))
                rows.append({"ts": j * 1000, "id": ident, "lo": hi - length, "hi": hi, "tag": "x"})
                ident += 1
            step.append((side, rows))
        slides.append(step)
    return kind, d, ct, slides


def check_answer(ans, want: dict) -> None:
    got = {(r[0], r[1]): r[2] for r in ans.rows}
    assert len(got) == len(ans.rows)  # each pair once
    assert set(got) == set(want)
    for k, p in got.items():
        assert abs(p - float(want[k])) <= 1e-9, (k, p, want[k])


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenarios())
def test_every_access_path_returns_exactly_the_reference_set(scenario):
    kind, d, ct, slides = scenario
    a, b = make("a", 3), make("b", 4)
    streams = {"a": a, "b": b}
    log: dict[str, list[list[dict]]] = {"a": [], "b": []}
    q = parse_statement(TEXTS[kind].format(d=d, ct=ct))
    periodic = {alg: plan_join(q, streams) for alg in (None, *ACCESS_PATHS)}
    for alg, plan in periodic.items():
        plan.timing_algorithm = alg
    lazy = plan_join(q, streams)  # evaluated only at the end: the whole windows as one group
    for j, step in enumerate(slides):
        for side, rows in step:
            seal(streams[side], rows, (j + 1) * 1000)
            log[side].append(rows)
            for plan in periodic.values():  # eager maintenance after every slide
                plan.refresh(window_inputs(plan, streams))
        want = reference(kind, d, ct, window_rows(log["a"], 3), window_rows(log["b"], 4))
        for alg, plan in periodic.items():
            check_answer(run_join(plan, streams), want)
        one_time = plan_join(q, streams, cache=False)
        check_answer(run_join(one_time, streams), want)
    check_answer(run_join(lazy, streams), want)


def test_rows_a_condition_cannot_read_join_nothing():
    a, b = make("a"), make("b")
    seal(a, [{"ts": 0, "id": 1, "lo": 10, "hi": 5, "tag": "x"},               # lo > hi
             {"ts": 0, "id": 2, "lo": 2**53 + 2, "hi": 2**53 + 4, "tag": "x"},  # not exact as a float
             {"ts": 0, "id": 3, "lo": 0, "hi": 10, "tag": "x"}], 1000)
    seal(b, [{"ts": 0, "id": 9, "lo": 0, "hi": 10, "tag": "x"}], 1000)
    ans = run_join(plan_join(parse_statement(MUTUAL.format(d=1000, ct=0.5)), {"a": a, "b": b}), {"a": a, "b": b})
    assert ans.rows == [(3, 9, 1.0)]


def test_equalities_with_a_timing_condition_filter_the_hash_join():
    rng = random.Random(3)
    a, b = make("a"), make("b")
    log = {"a": [], "b": []}
    for j in range(4):
        for name, s in (("a", a), ("b", b)):
            rows = []
            for i in range(25):
                hi = j * 1000 + rng.randrange(1000)
                rows.append({"ts": hi, "id": j * 100 + i, "lo": hi - rng.randrange(200), "hi": hi,
                             "tag": rng.choice("xyz")})
            seal(s, rows, (j + 1) * 1000)
            log[name].append(rows)
    text = MUTUAL.format(d=300, ct=0.6) + " AND a.tag = b.tag"
    ans = run_join(plan_join(parse_statement(text), {"a": a, "b": b}), {"a": a, "b": b})
    tags = {name: {r["id"]: r["tag"] for sub in log[name] for r in sub} for name in log}
    want = {k: p for k, p in reference("mutual", 300, "0.6", window_rows(log["a"], 4), window_rows(log["b"], 4)).items()
            if tags["a"][k[0]] == tags["b"][k[1]]}
    assert want
    check_answer(ans, want)


# -- the planner's choice --------------------------------------------------------------------------------------
@pytest.mark.parametrize("bases,targets,rate,ct,algorithm,block", [
    (100, 150, 50.0, 0.8, "ssort", None),        # few pairs (a low rate over the window): the simple family
    (20, 5000, None, 0.8, "eager", None),        # fewer new rows than a block: per row
    (700, 900, 1000.0, 0.8, "lazy-lookup", 700),  # a block; a high threshold: the look-up table
    (5000, 300, 1000.0, 0.3, "lazy", 1200),      # a low threshold: plain lazy; blocks level off at 1,200
])
def test_the_choice_follows_the_papers_findings(bases, targets, rate, ct, algorithm, block):
    access, run = choose(bases, targets, rate, ct)
    assert access.name == run.algorithm == algorithm and run.block == block == access.block


def test_the_plan_says_which_algorithm_ran_and_invalidation_drops_obsolete_rows():
    rng = random.Random(5)
    a, b = make("a", 2), make("b", 2)
    streams = {"a": a, "b": b}
    plan = plan_join(parse_statement(MUTUAL.format(d=250, ct=0.9)), streams)
    for j in range(3):  # 900 rows a second: above the simple family's range
        for s in (b, a):
            rows = []
            for i in range(900):
                hi = j * 1000 + rng.randrange(1000)
                rows.append({"ts": hi, "id": j * 10_000 + i, "lo": hi - rng.randrange(20, 200), "hi": hi, "tag": "x"})
            seal(s, rows, (j + 1) * 1000)
        plan.refresh(window_inputs(plan, streams))
    info = plan.explain_timing()
    [t] = info["timing"]
    assert t["algorithm"] == "lazy-lookup" and "ct 0.9 >= 0.5" in t["why"] and "900 rows/s" in t["why"]
    assert t["lookup_hits"] > 0 and t["invalidated"] > 0 and t["evaluations"] < t["probes"]
    assert "look-up table when ct >= 0.5" in info["how"]


def test_a_three_way_join_with_two_timing_conditions_aggregates_the_reference_rows():
    """a ~ b and b ~ c by timing conditions, c = a by key, grouped: the synopsis of aggregates
    (periodic plans) and the one-time path over the same joined rows as the nested loop."""
    rng = random.Random(2)
    streams = {n: make(n, 3) for n in "abc"}
    log: dict[str, list[list[dict]]] = {n: [] for n in streams}
    for j in range(5):
        for n, s in streams.items():
            rows = []
            for i in range(15):
                hi = j * 1000 + rng.randrange(1000)
                rows.append({"ts": j * 1000, "id": j * 100 + i, "lo": hi - rng.randrange(150), "hi": hi,
                             "tag": rng.choice("xy")})
            seal(s, rows, (j + 1) * 1000)
            log[n].append(rows)
    w = {n: window_rows(log[n], 3) for n in streams}
    ab = reference("mutual", 200, "0.6", w["a"], w["b"])
    bc = reference("mutual", 300, "0.5", w["b"], w["c"])
    want: dict[str, list[int]] = {}
    for x in w["a"]:
        for y in w["b"]:
            if (x["id"], y["id"]) in ab:
                for z in w["c"]:
                    if z["tag"] == x["tag"] and (y["id"], z["id"]) in bc:
                        g = want.setdefault(x["tag"], [0, -1])
                        g[0] += 1
                        g[1] = max(g[1], z["id"])
    text = ("SELECT a.tag, COUNT(*), MAX(c.id) FROM a JOIN b ON PROB(ABS(INTERVAL(a.lo, a.hi) - INTERVAL(b.lo, b.hi)) "
            "<= 200 ms) >= 0.6 JOIN c ON PROB(ABS(INTERVAL(b.lo, b.hi) - INTERVAL(c.lo, c.hi)) <= 300 ms) >= 0.5 "
            "AND c.tag = a.tag GROUP BY a.tag")
    expected = sorted((k, n, m) for k, (n, m) in want.items())
    assert expected
    for cache in (True, False):
        assert run_join(plan_join(parse_statement(text), streams, cache=cache), streams).rows == expected


@pytest.mark.parametrize("algorithm", [None, *ACCESS_PATHS])
def test_a_timing_join_beyond_the_row_limit_is_a_resource_limit_and_leaves_the_plan_usable(algorithm):
    a, b = make("a"), make("b")
    rows = [{"ts": 0, "id": i, "lo": 10 * i, "hi": 10 * i + 5, "tag": "x"} for i in range(40)]
    seal(a, rows, 1000)
    seal(b, rows, 1000)
    streams = {"a": a, "b": b}
    text = MUTUAL.format(d=10_000, ct=0.5)  # every pair: 1,600 rows
    plan = plan_join(parse_statement(text), streams, max_rows=1000)
    plan.timing_algorithm = algorithm
    with pytest.raises(ResourceLimit):
        run_join(plan, streams)
    plan.max_rows = 2000
    assert len(run_join(plan, streams).rows) == 1600
