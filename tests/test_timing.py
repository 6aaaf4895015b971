"""Timing correlation of uncertain intervals (store/timing.py): the closed form against an
independent rational oracle (the trapezoid density of the difference of two uniforms) and against
Monte Carlo; the regions against the oracle; every algorithm against Simple, and Simple against
every pair of the whole input, on random streams."""
from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from windowstore.store import timing as T

pytestmark = pytest.mark.slow  # servers in subprocesses, or long property runs: make test-fast skips them

F = Fraction


def oracle(a1, b1, a2, b2, lo, hi) -> Fraction:
    """P(lo <= Y - X <= hi), X ~ U[a1, b1], Y ~ U[a2, b2], by integrating the density of D = Y - X:
    f(t) = |[a1, b1] & [a2 - t, b2 - t]| / (L1 L2), piecewise linear between a2 - b1, a2 - a1,
    b2 - b1 and b2 - a1 (a trapezoid), so the trapezoid rule between breakpoints is exact."""
    a1, b1, a2, b2 = map(F, (a1, b1, a2, b2))
    lo = None if lo is None else F(lo)
    hi = None if hi is None else F(hi)
    l1, l2 = b1 - a1, b2 - a2
    s0, s1 = a2 - b1, b2 - a1  # the support of D
    lo_ = s0 if lo is None else max(lo, s0)
    hi_ = s1 if hi is None else min(hi, s1)
    if l1 == 0 and l2 == 0:
        return F(int((lo is None or s0 >= lo) and (hi is None or s0 <= hi)))
    if hi_ < lo_:
        return F(0)
    if l1 == 0 or l2 == 0:  # D is uniform over its support
        return (hi_ - lo_) / (s1 - s0)

    def f(t):
        return max(F(0), min(b1, b2 - t) - max(a1, a2 - t)) / (l1 * l2)

    pts = sorted({lo_, hi_, *(x for x in (a2 - b1, a2 - a1, b2 - b1, b2 - a1) if lo_ < x < hi_)})
    return sum(((f(x) + f(y)) / 2 * (y - x) for x, y in zip(pts, pts[1:])), F(0))


def band_of(cond):
    return cond.lo, cond.hi


times = st.integers(-2000, 2000)
lengths = st.sampled_from([0, 0, 1, 3, 20, 50, 200])
conds = st.sampled_from(["deadline", "delay", "mutual"])


@settings(max_examples=400, deadline=None)
@given(times, lengths, times, lengths, st.integers(-600, 600), st.integers(0, 600), conds)
def test_closed_form_equals_the_trapezoid_oracle(t1, l1, t2, l2, d, dm, kind):
    if kind == "mutual":
        lo, hi = -dm, dm
    elif kind == "deadline":
        lo, hi = None, d
    else:
        lo, hi = d, None
    want = oracle(t1 - l1, t1, t2 - l2, t2, lo, hi)
    assert T.band_probability_exact(t1 - l1, t1, t2 - l2, t2, lo, hi) == want
    assert T.band_probability(t1 - l1, t1, t2 - l2, t2, lo, hi) == pytest.approx(float(want), abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.fractions(-50, 50, max_denominator=7), st.fractions(0, 9, max_denominator=5),
       st.fractions(-50, 50, max_denominator=7), st.fractions(0, 9, max_denominator=5),
       st.fractions(0, 20, max_denominator=3))
def test_rational_endpoints(a1, l1, a2, l2, d):
    for lo, hi in ((-d, d), (None, d), (d, None), (-d, None)):
        assert T.band_probability_exact(a1, a1 + l1, a2, a2 + l2, lo, hi) == oracle(a1, a1 + l1, a2, a2 + l2, lo, hi)


def test_known_values():
    # identical unit intervals, |X - Y| <= 1/2: 1 - (1/2)^2 = 3/4
    assert T.band_probability_exact(0, 1, 0, 1, F(-1, 2), F(1, 2)) == F(3, 4)
    # X ~ U[0,1], Y = 1 (a point): P(X + 1/4 >= 1) = 1/4
    assert T.band_probability_exact(0, 1, 1, 1, None, F(1, 4)) == F(1, 4)
    # two points: the boundary is included on both sides
    assert T.band_probability_exact(3, 3, 5, 5, -2, 2) == 1
    assert T.band_probability_exact(3, 3, 5, 5, 2, None) == 1
    assert T.band_probability_exact(3, 3, 5, 5, -1, 1) == 0
    # Corollary 3: with d >= pi an interval covering the other is certain
    assert T.probability_exact(T.mutual(10, 1.0), T.Row(0, 0, 10), T.Row(1, 2, 7)) == 1


def test_monte_carlo():
    """The closed form agrees with sampling (seeded; 6 standard errors)."""
    rng = np.random.default_rng(7)
    n = 200_000
    cases = [((0, 10), (3, 30), -5, 5), ((0, 200), (150, 170), None, 20), ((0, 0), (-4, 6), 1, None),
             ((5, 25), (5, 25), -3, 2), ((0, 50), (200, 260), None, 220)]
    for (a1, b1), (a2, b2), lo, hi in cases:
        x = rng.uniform(a1, b1, n) if b1 > a1 else np.full(n, float(a1))
        y = rng.uniform(a2, b2, n) if b2 > a2 else np.full(n, float(a2))
        dd = y - x
        ok = np.ones(n, bool)
        if lo is not None:
            ok &= dd >= lo
        if hi is not None:
            ok &= dd <= hi
        p = T.band_probability(a1, b1, a2, b2, lo, hi)
        se = math.sqrt(max(p * (1 - p), 1e-6) / n)
        assert abs(ok.mean() - p) <= 6 * se, ((a1, b1), (a2, b2), lo, hi, ok.mean(), p)


def test_corollary_1():
    """|I1 - I2| <= d equals I1 + d >= I2 when min(I1) <= min(I2) and d >= pi."""
    rng = random.Random(3)
    for _ in range(300):
        l1, l2 = rng.randint(0, 20), rng.randint(0, 20)
        a1 = rng.randint(0, 100)
        a2 = a1 + rng.randint(0, 60)
        d = rng.randint(20, 60)
        i1, i2 = T.Row(1, a1, a1 + l1), T.Row(2, a2, a2 + l2)
        assert T.probability_exact(T.mutual(d, 0.5), i1, i2) == T.probability_exact(T.deadline(d, 0.5), i1, i2)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conds, st.integers(0, 800), st.sampled_from([1.0, 0.9, 0.8, 0.5, 0.3, 0.1, 0.01]),
       st.integers(0, 40), st.integers(0, 40), st.integers(0, 60),
       st.lists(st.tuples(st.integers(-1500, 1500), st.integers(0, 100)), min_size=1, max_size=30))
def test_regions_bound_the_probability(kind, d, ct, rho, extra, base_len, targets):
    """A target in the accept region satisfies, one outside the possible region violates (oracle)."""
    pi = rho + extra
    base_len = min(base_len, pi)
    base_len = max(base_len, rho)
    cond = {"deadline": T.deadline, "delay": T.delay, "mutual": T.mutual}[kind](d, ct)
    for mirrored in (False, True):
        lo, hi = cond.mirrored() if mirrored else band_of(cond)
        r = T.regions((lo, hi), ct, base_len, rho, pi)
        for u, k in targets:
            ln = rho + k % (pi - rho + 1)
            p = oracle(-base_len, 0, u - ln, u, lo, hi)
            if r.acc_lo <= u <= r.acc_hi:
                assert p >= F(ct), (u, ln, p, r)
            if u <= r.pos_lo or u >= r.pos_hi:
                assert p < F(ct), (u, ln, p, r)


def run(alg: T.Correlator, events, watermark_lag):
    got: dict[tuple, float] = {}

    def add(ms):
        for m in ms:
            assert m.key() not in got, m.key()
            got[m.key()] = m.probability

    for i, (side, row, now) in enumerate(events):
        add(alg.expire(now - watermark_lag))
        add(alg.insert(side, row, now))
        if i % 17 == 0:
            alg._check()
    add(alg.flush())
    alg._check()
    return got


def streams(seed: int, n: int, rho: int, pi: int, gap: int, lag: int):
    """Rows in arrival order: times advance by up to 2*gap, each row arrives up to ``lag`` after
    its hi (out of order)."""
    rng = random.Random(seed)
    out, t = [], 0
    for i in range(n):
        t += rng.randint(0, 2 * gap)
        ln = rng.randint(rho, pi)
        out.append((rng.choice(("left", "right")), T.Row(i, t - ln, t), t + rng.randint(0, lag)))
    out.sort(key=lambda e: e[2])
    return out


def brute_force(cond, window, events):
    rows = {"left": [], "right": []}
    for side, row, _ in events:
        rows[side].append(row)
    want = {}
    for a in rows["left"]:
        for b in rows["right"]:
            if window is not None and not (b.hi <= a.hi + window and a.hi <= b.hi + window):
                continue
            if oracle(a.lo, a.hi, b.lo, b.hi, cond.lo, cond.hi) >= F(cond.ct):
                want[(a.id, b.id)] = T.probability(cond, a, b)
    return want


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6), conds, st.sampled_from([0, 5, 20, 60, 200]),
       st.sampled_from([1.0, 0.8, 0.7, 0.5, 0.4, 0.1]), st.integers(0, 20), st.integers(0, 30),
       st.sampled_from([None, 0, 50, 300]), st.integers(1, 40), st.integers(0, 60),
       st.sampled_from([1, 7, 50]))
def test_every_algorithm_outputs_what_simple_outputs(seed, kind, d, ct, rho, extra, window, gap, lag, block):
    pi = rho + extra
    cond = {"deadline": T.deadline, "delay": T.delay, "mutual": T.mutual}[kind](d, ct)
    if window is None and kind != "mutual":
        window = 300
    events = streams(seed, 120, rho, pi, gap, lag)
    simple = run(T.SimpleCorrelator(cond, rho, pi, window=window), events, lag)
    assert simple == brute_force(cond, window, events)
    for name, cls in T.ALGORITHMS.items():
        extra_args = {"block": block, "interval": 40} if name.startswith("lazy") else {}
        assert run(cls(cond, rho, pi, window=window, **extra_args), events, lag) == simple, name


@pytest.mark.parametrize("kind", ["deadline", "delay", "mutual"])
@pytest.mark.parametrize("ct", [1.0, 0.7, 0.1])
def test_paper_workload(kind, ct):
    """The section 5 setting in small (pi 200, rho 20, d 1000, ms): same output, fewer evaluations
    for the bound-based algorithms, invalidation keeps the buffers bounded."""
    cond = {"deadline": T.deadline, "delay": T.delay, "mutual": T.mutual}[kind](1000, ct)
    events = streams(11, 400, 20, 200, 4, 50)
    results, evals = {}, {}
    for name, cls in T.ALGORITHMS.items():
        kw = {"block": 200} if name.startswith("lazy") else {}
        alg = cls(cond, 20, 200, window=1200, **kw)
        results[name] = run(alg, events, 50)
        evals[name] = alg.evaluations
        assert alg.buffered() < 1000, (name, alg.buffered())
        if name == "lazy-lookup" and kind == "mutual" and ct >= 0.7:
            assert alg.hits > 0
    assert all(r == results["simple"] for r in results.values())
    assert results["simple"]
    assert evals["eager"] < evals["simple"] and evals["lazy-lookup"] <= evals["lazy"]


def test_accept_region_matches_carry_their_probability():
    cond = T.mutual(500, 0.5)
    alg = T.EagerCorrelator(cond, 20, 200)
    alg.insert("left", T.Row("a", 0, 100), 100)
    (m,) = alg.insert("right", T.Row("b", 50, 150), 150)
    assert alg.evaluations == 0  # accepted from the bounds
    assert m.probability == pytest.approx(float(oracle(0, 100, 50, 150, -500, 500)))


def test_lazy_waits_for_its_block_or_interval():
    cond = T.mutual(500, 0.5)
    alg = T.LazyCorrelator(cond, 20, 200, block=3, interval=1000)
    assert alg.insert("left", T.Row(1, 0, 100), 100) == []
    assert alg.insert("right", T.Row(2, 0, 100), 110) == []
    assert [m.key() for m in alg.insert("right", T.Row(3, 10, 110), 120)] == [(1, 2), (1, 3)]
    assert alg.insert("left", T.Row(4, 900, 1000), 1000) == []
    assert [m.key() for m in alg.insert("left", T.Row(5, 950, 1050), 1130)] == []  # interval: a block ran
    assert alg.buffered() == 5 and not alg.pending["left"]


def test_bad_input_names_the_field():
    with pytest.raises(ValueError, match="ct"):
        T.mutual(5, 1.5)
    with pytest.raises(ValueError, match="d:"):
        T.mutual(-1, 0.5)
    with pytest.raises(ValueError, match="d:"):
        T.deadline(math.inf, 0.5)
    with pytest.raises(ValueError, match="window"):
        T.EagerCorrelator(T.deadline(5, 0.5), 0, 10)
    with pytest.raises(ValueError, match="rho, pi"):
        T.EagerCorrelator(T.mutual(5, 0.5), 10, 0)
    alg = T.SimpleCorrelator(T.mutual(5, 0.5), 1, 10)
    with pytest.raises(ValueError, match="row: length"):
        alg.insert("left", T.Row(1, 0, 20), 0)
    with pytest.raises(ValueError, match="row: need finite"):
        alg.insert("left", T.Row(1, 5, 0), 0)
    with pytest.raises(ValueError, match="side"):
        alg.insert("middle", T.Row(1, 0, 5), 0)
    alg.expire(100)
    with pytest.raises(ValueError, match="watermark"):
        alg.insert("left", T.Row(1, 0, 5), 0)
    with pytest.raises(ValueError, match="block"):
        T.LazyCorrelator(T.mutual(5, 0.5), 1, 10, block=0)
