"""Timing conditions as a join step's access path (issue 34, seed 002): the paper's algorithms
(store/timing.py's correlators: Simple, SSort, Eager, Lazy, Lazy with a look-up table), one access
path class each, joining a step's intermediate rows (the bases) with every incorporated row of the
next source (the targets); the rule that picks one per step from the paper's findings; the rows an
interval condition cannot read; the probability column. Pure: plan.JoinPlan calls it and keeps the
state.

A step is a block in the paper's sense: the targets are loaded into the correlator's buffer (sorted
by their latest time for all but Simple), then the bases are inserted in ascending order of their
latest time, each after ``expire(base.hi)`` (no later base is earlier), so the correlator
invalidates the targets no later base can reach (the paper's obsolete rows) as it goes. Every
algorithm outputs exactly the pairs whose exact probability is at least ``ct``
(tests/test_timing_join.py checks each against Simple's nested loop and the rational oracle).

The paper's rho and pi (the shortest and longest interval) are fixed at design time; here they
come from the data of the step, widened to powers of two (any bounds around the actual lengths keep
the regions correct, and stable ones let the memoised regions be reused from step to step). The
window the correlators take for deadline and delay is set beyond the step's span of times: the
store's sliding windows already bound the pairs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..timing import (ALGORITHMS, Correlator, EagerCorrelator, LazyCorrelator, LazyLookupCorrelator, Row,
                      SimpleCorrelator, SSortCorrelator, TimingCondition, band_probability)
from ..timing_binder import EXACT_FLOAT

# The paper's findings the choice follows (section 5). At low rates the simple family is as good
# as any (the bounds' bookkeeping does not pay; SSort beats Simple: its invalidation is cheaper).
# What a low rate means in the store is the pairs a step could form (rows arriving at a low rate
# over the window): measured with bench/timing_experiment.py's in-store runs, SSort is the fastest
# below about 2 x 10**4 pairs per step and falls behind above. Eager has the best response time,
# the lazy family the best throughput once a block is worth forming (the smallest block the paper
# measures is 200 rows); the look-up table's hit ratio levels off at a block of 1,200 and it pays
# most at high thresholds (the left probe region, where it helps, shrinks with ct).
SMALL_PAIRS = 16_384
MIN_BLOCK = 200
MAX_BLOCK = 1200
LOOKUP_CT = 0.5


@dataclass
class TimingRun:
    """What one step did: the algorithm and why, and the correlator's counters."""

    algorithm: str
    reason: str
    block: int | None = None
    bases: int = 0
    targets: int = 0
    pairs: int = 0
    evaluations: int = 0   # probabilities computed
    probes: int = 0        # pairs in probe regions (all pairs for Simple and SSort)
    hits: int = 0          # probes the look-up table answered
    invalidated: int = 0   # targets dropped as obsolete before the step ended


@dataclass
class TimingTotals:
    """Counters over a plan's steps, and the last step's choice (explain)."""

    steps: int = 0
    by_algorithm: dict = field(default_factory=dict)
    evaluations: int = 0
    probes: int = 0
    hits: int = 0
    invalidated: int = 0
    last: TimingRun | None = None

    def add(self, run: TimingRun) -> None:
        self.steps += 1
        self.by_algorithm[run.algorithm] = self.by_algorithm.get(run.algorithm, 0) + 1
        self.evaluations += run.evaluations
        self.probes += run.probes
        self.hits += run.hits
        self.invalidated += run.invalidated
        self.last = run


def interval_ok(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Rows whose interval a timing condition can read: finite, lo <= hi, exact as floats (within
    2**53 in magnitude). Others join nothing, as a NULL in a join column does."""
    ok = lo <= hi
    if lo.dtype.kind == "f":
        ok &= np.isfinite(lo) & np.isfinite(hi)
    else:
        ok &= (lo >= -EXACT_FLOAT) & (hi <= EXACT_FLOAT)
    return ok


def _pow2_floor(x: float) -> float:
    return 0.0 if x <= 0 else 2.0 ** math.floor(math.log2(x))


def _pow2_ceil(x: float) -> float:
    return 0.0 if x <= 0 else 2.0 ** math.ceil(math.log2(x))


class TimingAccess:
    """One algorithm as a join step's access path: ``join`` returns the (base, target) index pairs
    that satisfy the condition."""

    name = "base"
    correlator: type[Correlator]  # each algorithm's access names its correlator

    def __init__(self, block: int | None = None):
        self.block = block

    def _make(self, cond: TimingCondition, rho: float, pi: float, window: float | None) -> Correlator:
        return self.correlator(cond, rho, pi, window=window)

    def _load(self, corr: Correlator, side: str, rows: list[Row]) -> None:
        """Put the targets into the correlator's buffer of `side`, sorted by (hi, lo)."""
        buf = corr.bufs[side]  # type: ignore[attr-defined]  # every correlator here has buffers
        ordered = sorted(rows, key=lambda r: (r.hi, r.lo))
        buf.rows = [(r.hi, r.lo, i + 1, r) for i, r in enumerate(ordered)]
        buf.his = [r.hi for r in ordered]
        buf.wins = [r.hi + corr.window if corr.window is not None else math.inf for r in ordered]

    def _remaining(self, corr: Correlator, side: str) -> int:
        return len(corr.bufs[side])  # type: ignore[attr-defined]  # every correlator here has buffers

    def join(self, cond: TimingCondition, base_is_left: bool, base_lo: np.ndarray, base_hi: np.ndarray,
             tgt_lo: np.ndarray, tgt_hi: np.ndarray, run: TimingRun, limit: int | None = None,
             too_many: Callable[[int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The satisfying (base, target) index pairs; past `limit` pairs, `too_many(pairs)` is called
        (it raises) before more are collected."""
        nb, nt = len(base_lo), len(tgt_lo)
        run.bases, run.targets = nb, nt
        if nb == 0 or nt == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        bl, bh = base_lo.astype(np.float64), base_hi.astype(np.float64)
        tl, th = tgt_lo.astype(np.float64), tgt_hi.astype(np.float64)
        lengths = np.concatenate([bh - bl, th - tl])
        rho, pi = _pow2_floor(float(lengths.min())), _pow2_ceil(float(lengths.max()))
        window = None
        if cond.lo is None or cond.hi is None:
            span = max(float(bh.max()), float(th.max())) - min(float(bh.min()), float(th.min()))
            window = _pow2_ceil(span + 1.0)
        corr = self._make(cond, rho, pi, window)
        bside, tside = ("left", "right") if base_is_left else ("right", "left")
        self._load(corr, tside, [Row(i, lo, hi) for i, (lo, hi) in enumerate(zip(tl.tolist(), th.tolist()))])
        matches = []
        order = np.lexsort((bl, bh)).tolist()
        blist, hlist = bl.tolist(), bh.tolist()
        for i in order:
            hi = hlist[i]
            matches += corr.expire(hi)
            matches += corr.insert(bside, Row(i, blist[i], hi), hi)
            if limit is not None and too_many is not None and len(matches) > limit:
                too_many(len(matches))
        matches += corr.flush()
        if limit is not None and too_many is not None and len(matches) > limit:
            too_many(len(matches))
        run.invalidated = nt - self._remaining(corr, tside)
        run.evaluations, run.probes, run.hits = corr.evaluations, corr.probes, corr.hits
        run.pairs = len(matches)
        if base_is_left:
            bi = [m.left.id for m in matches]
            ti = [m.right.id for m in matches]
        else:
            bi = [m.right.id for m in matches]
            ti = [m.left.id for m in matches]
        return np.array(bi, dtype=np.int64), np.array(ti, dtype=np.int64)


class SimpleAccess(TimingAccess):
    """Algorithm 1: every target probed; obsolete targets marked during the scan."""
    name = "simple"
    correlator = SimpleCorrelator

    def _load(self, corr, side, rows):
        corr.bufs[side] = list(rows)  # Simple keeps arrival order


class SSortAccess(TimingAccess):
    """Simple over targets sorted by their latest time: the obsolete ones are a prefix."""
    name = "ssort"
    correlator = SSortCorrelator


class EagerAccess(TimingAccess):
    """Algorithm 2: per base, the accept region without probabilities, the probe regions probed."""
    name = "eager"
    correlator = EagerCorrelator


class LazyAccess(TimingAccess):
    """Algorithms 4 and 5: the bases in blocks of `block` rows."""
    name = "lazy"
    correlator = LazyCorrelator

    def _make(self, cond, rho, pi, window):
        return self.correlator(cond, rho, pi, window=window, block=self.block or 1000, interval=None)


class LazyLookupAccess(LazyAccess):
    """Algorithms 6 and 7: Lazy with the look-up table in the probe regions."""
    name = "lazy-lookup"
    correlator = LazyLookupCorrelator


ACCESS_PATHS: dict[str, type[TimingAccess]] = {
    c.name: c for c in (SimpleAccess, SSortAccess, EagerAccess, LazyAccess, LazyLookupAccess)}
assert set(ACCESS_PATHS) == set(ALGORITHMS)


def choose(bases: int, targets: int, rate: float | None, ct: float,
           forced: str | None = None) -> tuple[TimingAccess, TimingRun]:
    """The access path for a step of `bases` rows (arriving at `rate` tuples/s, None: unknown)
    against `targets` rows."""
    if forced is not None:
        cls = ACCESS_PATHS[forced]
        block = min(max(bases, 1), MAX_BLOCK) if issubclass(cls, LazyAccess) else None
        return cls(block), TimingRun(cls.name, "forced", block)
    shown = "unknown rate" if rate is None else f"{rate:.0f} rows/s"
    pairs = bases * targets
    if pairs <= SMALL_PAIRS:
        return SSortAccess(), TimingRun("ssort", f"{bases} x {targets} = {pairs} pairs <= {SMALL_PAIRS} ({shown}): "
                                        "the simple family, sorted")
    if bases < MIN_BLOCK:
        return EagerAccess(), TimingRun("eager", f"{shown}, {bases} rows < a block of {MIN_BLOCK}: eager")
    block = min(bases, MAX_BLOCK)
    if ct >= LOOKUP_CT:
        return LazyLookupAccess(block), TimingRun("lazy-lookup", f"{shown}, {bases} rows: blocks of {block}, "
                                                  f"ct {ct:g} >= {LOOKUP_CT}: with the look-up table", block)
    return LazyAccess(block), TimingRun("lazy", f"{shown}, {bases} rows: blocks of {block}, ct {ct:g} < "
                                        f"{LOOKUP_CT}: without the look-up table", block)


def describe_rule(forced: str | None = None) -> str:
    """The choice rule in words (explain)."""
    if forced is not None:
        return f"always {forced} (forced)"
    return (f"the algorithm chosen per join step: SSort up to {SMALL_PAIRS} pairs (new rows x the other "
            f"source's), else Eager below a block of {MIN_BLOCK} new rows, else blocks of up to {MAX_BLOCK} rows, "
            f"Lazy with the look-up table when ct >= {LOOKUP_CT}, plain Lazy below")


def satisfied_mask(cond: TimingCondition, llo, lhi, rlo, rhi) -> np.ndarray:
    """Per joined row, whether the condition holds exactly (a filter after another condition's step)."""
    from ..timing import satisfied
    out = np.zeros(len(llo), dtype=bool)
    for i, (a, b, c, d) in enumerate(zip(llo.tolist(), lhi.tolist(), rlo.tolist(), rhi.tolist())):
        out[i] = satisfied(cond, Row(None, float(a), float(b)), Row(None, float(c), float(d)))[0]
    return out


def probabilities(cond: TimingCondition, llo, lhi, rlo, rhi) -> np.ndarray:
    """Per joined row, the float probability of the condition's predicate (the PROB() column)."""
    return np.array([band_probability(a, b, c, d, cond.lo, cond.hi)
                     for a, b, c, d in zip(llo.tolist(), lhi.tolist(), rlo.tolist(), rhi.tolist())], dtype=np.float64)
