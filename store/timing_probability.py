"""The probabilities of timing conditions between rows with uncertain times (Lee and Lee, Sensors
2010; see timing.py for the model): the band probability in float and rational form and the
decision between them, the conditions (deadline, delay, mutual), rows and matches, and the
accept / probe / violation regions that bound the probability over all target lengths in
[rho, pi]. Pure functions and values: it must not buffer rows or join (the correlators in
timing.py do).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable


# ---------------------------------------------------------------------------------------------
# Probabilities

def _cdf(a1, b1, a2, b2, c):
    """P(Y - X <= c) for X ~ U[a1, b1], Y ~ U[a2, b2], not both points; generic over float and
    Fraction. Theorem 1's integral: (1/(L1 L2)) * int_{a1}^{b1} clamp(x + c - a2, 0, L2) dx."""
    l1 = b1 - a1
    l2 = b2 - a2
    if l1 == 0:
        v = (a1 + c - a2) / l2
        return 0 if v <= 0 else (1 if v >= 1 else v)
    if l2 == 0:
        v = (b1 - a2 + c) / l1
        return 0 if v <= 0 else (1 if v >= 1 else v)

    def g(v):  # int_{-inf}^{v} clamp(s, 0, l2) ds
        if v <= 0:
            return 0
        if v <= l2:
            return v * v / 2
        return l2 * (v - l2 / 2)

    p = (g(b1 + c - a2) - g(a1 + c - a2)) / (l1 * l2)
    return 0 if p <= 0 else (1 if p >= 1 else p)


def _band(a1, b1, a2, b2, lo, hi):
    """P(lo <= Y - X <= hi); ``None`` is an open end."""
    if a1 == b1 and a2 == b2:
        d = a2 - a1
        return 1 if (lo is None or d >= lo) and (hi is None or d <= hi) else 0
    up = 1 if hi is None else _cdf(a1, b1, a2, b2, hi)
    down = 0 if lo is None else _cdf(a1, b1, a2, b2, lo)  # continuous: P(D < lo) == P(D <= lo)
    p = up - down
    return p if p > 0 else 0


def band_probability(a1: float, b1: float, a2: float, b2: float, lo: float | None, hi: float | None) -> float:
    """P(lo <= Y - X <= hi) in closed form (float)."""
    return float(_band(float(a1), float(b1), float(a2), float(b2),
                       None if lo is None else float(lo), None if hi is None else float(hi)))


def band_probability_exact(a1, b1, a2, b2, lo, hi) -> Fraction:
    """P(lo <= Y - X <= hi) with rational arithmetic (the inputs' exact values)."""
    f = Fraction
    return f(_band(f(a1), f(b1), f(a2), f(b2), None if lo is None else f(lo), None if hi is None else f(hi)))


def _error_bound(a1, b1, a2, b2, lo, hi) -> float:
    """A bound on the float closed form's error (rounding of the times' differences, divided by the
    shortest non-zero length)."""
    scale = max(abs(a1), abs(b1), abs(a2), abs(b2), abs(lo or 0.0), abs(hi or 0.0), 1.0)
    short = min([x for x in (b1 - a1, b2 - a2) if x > 0] or [1.0])
    return 1e-12 + 64 * math.ulp(scale) / short


@dataclass(frozen=True)
class TimingCondition:
    """A band ``lo <= I2 - I1 <= hi`` (``None`` open) with a confidence threshold ``ct``."""
    kind: str
    d: float
    ct: float
    lo: float | None
    hi: float | None

    def __post_init__(self):
        if not (isinstance(self.d, (int, float)) and math.isfinite(self.d)):
            raise ValueError(f"d: must be a finite number, got {self.d!r}")
        if not (isinstance(self.ct, (int, float)) and 0 < self.ct <= 1):
            raise ValueError(f"ct: must be in (0, 1], got {self.ct!r}")
        if self.kind == "mutual" and self.d < 0:
            raise ValueError(f"d: a mutual deadline needs d >= 0, got {self.d!r}")

    def mirrored(self) -> tuple[float | None, float | None]:
        """The band on ``I1 - I2`` (for a right row as the base)."""
        return (None if self.hi is None else -self.hi, None if self.lo is None else -self.lo)


def deadline(d: float, ct: float) -> TimingCondition:
    """``I1 + d >= I2`` with confidence ``ct``."""
    return TimingCondition("deadline", d, ct, None, d)


def delay(d: float, ct: float) -> TimingCondition:
    """``I1 + d <= I2`` with confidence ``ct``."""
    return TimingCondition("delay", d, ct, d, None)


def mutual(d: float, ct: float) -> TimingCondition:
    """``|I1 - I2| <= d`` with confidence ``ct``."""
    return TimingCondition("mutual", d, ct, -d if isinstance(d, (int, float)) else d, d)


def _sub_cmp(x: float, y: float, c: float) -> int:
    """The sign of the exact ``(x - y) - c`` for floats (TwoSum gives the subtraction's error)."""
    s = x - y
    if s != c:
        return 1 if s > c else -1  # rounding is monotone and c is a float
    bb = s - x
    err = (x - (s - bb)) + (-y - bb)
    return (err > 0) - (err < 0)


def _decide(a1, b1, a2, b2, lo, hi, ct) -> tuple[bool, float]:
    """(exact probability >= ct, float probability)."""
    p = band_probability(a1, b1, a2, b2, lo, hi)
    if abs(p - ct) > _error_bound(a1, b1, a2, b2, lo, hi):
        return p >= ct, p
    if (hi is None or _sub_cmp(b2, a1, hi) <= 0) and (lo is None or _sub_cmp(a2, b1, lo) >= 0):
        return True, p  # the band holds the whole support of I2 - I1: certain
    return band_probability_exact(a1, b1, a2, b2, lo, hi) >= Fraction(ct), p


def probability(cond: TimingCondition, left: "Row", right: "Row") -> float:
    """The condition's predicate's probability for (left, right), float closed form."""
    return band_probability(left.lo, left.hi, right.lo, right.hi, cond.lo, cond.hi)


def probability_exact(cond: TimingCondition, left: "Row", right: "Row") -> Fraction:
    return band_probability_exact(left.lo, left.hi, right.lo, right.hi, cond.lo, cond.hi)


def satisfied(cond: TimingCondition, left: "Row", right: "Row") -> tuple[bool, float]:
    """(whether the pair satisfies the condition, exactly; its float probability)."""
    return _decide(left.lo, left.hi, right.lo, right.hi, cond.lo, cond.hi, cond.ct)


# ---------------------------------------------------------------------------------------------
# Rows and matches

@dataclass(frozen=True, slots=True)
class Row:
    """A row with an uncertain time uniform over [lo, hi]; ``id`` names it in the output."""
    id: object
    lo: float
    hi: float


@dataclass(slots=True)
class Match:
    """An output pair; the probability is computed on first use when the pair was accepted from
    the bounds alone (the accept region exists to skip that computation)."""
    cond: TimingCondition
    left: Row
    right: Row
    _p: float | None = None

    @property
    def probability(self) -> float:
        if self._p is None:
            self._p = probability(self.cond, self.left, self.right)
        return self._p

    def key(self) -> tuple:
        return (self.left.id, self.right.id)


# ---------------------------------------------------------------------------------------------
# Regions from the bounds

@dataclass(frozen=True)
class Regions:
    """For a base of one length, in offsets ``u = target.hi - base.hi``: targets with ``u`` in
    ``[acc_lo, acc_hi]`` satisfy whatever their length in [rho, pi] (accept region), targets outside
    ``[pos_lo, pos_hi]`` violate (violation regions), the rest must be probed. Each end is exact:
    the probability bound at it was decided exactly. ``acc_lo > acc_hi`` means no accept region."""
    acc_lo: float
    acc_hi: float
    pos_lo: float
    pos_hi: float


def _sup(f: Callable[[float], tuple[bool, float]], good: float, bad: float) -> tuple[float, float]:
    """For a predicate (``f(u)`` gives the exact decision and the float probability's verdict)
    true at ``good`` and false at ``bad`` and monotone between, a pair (g, b) close together with
    the exact f(g) true and f(b) false. The bisection follows the float verdicts; the two ends are
    then decided exactly and moved outwards until they hold."""
    g0, b0 = good, bad
    for _ in range(80):
        mid = (good + bad) / 2
        if mid == good or mid == bad:
            break
        if f(mid)[1]:
            good = mid
        else:
            bad = mid
    step = max(abs(bad - good), 1e-9 * (1 + abs(good)))  # a few exact steps, not one per ulp
    while not f(good)[0]:
        good = good + (step if g0 > good else -step) if abs(g0 - good) > step else g0
        step *= 2
    step = max(abs(bad - good), 1e-9 * (1 + abs(bad)))
    while f(bad)[0]:
        bad = bad + (step if b0 > bad else -step) if abs(b0 - bad) > step else b0
        step *= 2
    return good, bad


class _Lazy:
    """A truth value computed when first tested."""
    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __bool__(self):
        return bool(self.fn())


@functools.lru_cache(maxsize=8192)
def regions(band: tuple[float | None, float | None], ct: float, base_len: float,
            rho: float, pi: float) -> Regions:
    """The regions for a base ``X ~ U[-base_len, 0]`` and targets ``Y ~ U[u - l, u]``, l in
    [rho, pi], with the predicate ``lo <= Y - X <= hi``.

    ``up_l(u) = P(D <= hi)`` falls with u, ``low_l(u) = P(D >= lo)`` rises, and for a fixed u a
    shorter target is stochastically later, so the bounds are: the band probability
    ``up + low - 1`` is at least ``up_rho + low_pi - 1`` and at most ``min(up_pi, low_rho)``.
    Where ``up_rho == 1`` for every u below the point where ``low_pi`` reaches 1 (the tails do not
    overlap; Corollary 1's ``d >= pi`` gives it), the lower bound is at least ct on
    ``[inf low_pi >= ct, sup up_rho >= ct]``; otherwise there is no accept region."""
    lo, hi = band
    x1, x2 = -float(base_len), 0.0

    def verdicts(u, l, band_lo, band_hi):
        return (lambda: _decide(x1, x2, u - l, u, band_lo, band_hi, ct)[0],
                band_probability(x1, x2, u - l, u, band_lo, band_hi) >= ct)

    def up(l):
        def f(u):
            exact, fast = verdicts(u, l, None, hi)
            return _Lazy(exact), fast
        return f

    def low(l):
        def f(u):
            exact, fast = verdicts(u, l, lo, None)
            return _Lazy(exact), fast
        return f

    inf = math.inf
    span = float(base_len) + pi + 1.0
    # sup{u : up_l(u) >= ct}: true at hi - base_len (up == 1), false at hi + l + 1 (up == 0).
    if hi is None:
        acc_hi = pos_hi = inf
    else:
        acc_hi, _ = _sup(up(rho), hi - base_len, hi + span)
        _, pos_hi = _sup(up(pi), hi - base_len, hi + span)
    # inf{u : low_l(u) >= ct}: true at lo + l (low == 1), false at lo - base_len - 1.
    if lo is None:
        acc_lo = pos_lo = -inf
    else:
        acc_lo, _ = _sup(low(pi), lo + pi, lo - span)
        _, pos_lo = _sup(low(rho), lo + pi, lo - span)
    if lo is not None and hi is not None and lo + pi > hi - base_len:
        acc_lo, acc_hi = inf, -inf  # the tails overlap: probe everything possible
    return Regions(acc_lo, acc_hi, pos_lo, pos_hi)

