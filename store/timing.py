"""Timing correlation of rows with uncertain times (Lee and Lee, "Lazy Approaches for Interval
Timing Correlation of Sensor Data Streams", Sensors 2010).

A row's time is uniform over ``[lo, hi]`` (``lo == hi`` is a point time). A timing condition is a
predicate on ``D = I2 - I1`` (right row minus left row) with a confidence threshold ``ct``:

* deadline ``I1 + d >= I2``  -> ``D <= d`` (Theorem 1),
* delay    ``I1 + d <= I2``  -> ``D >= d``,
* mutual   ``|I1 - I2| <= d`` -> ``-d <= D <= d`` (Corollary 1),

all three being a band ``lo <= D <= hi`` with an open end for deadline and delay. A pair satisfies
the condition when its exact probability is at least ``ct`` (the float's exact value); the float
closed form decides unless it lies within its error bound of ``ct``, where the rational form
decides, so every algorithm makes the same decision for the same pair.

The probabilities, the conditions, rows and matches, and the accept / probe / violation regions
that bound the probability over all target lengths in ``[rho, pi]`` (what Eager and Lazy use to
skip work) are timing_probability.py's, and import from here too. This module owns the paper's
join algorithms behind one interface (:class:`Correlator`): Simple and SSort (nested loops),
Eager, Lazy (blocks) and Lazy with a look-up table (Algorithms 6 and 7). It is pure: no threads,
files or clock; the caller passes the stream time to ``insert`` and the watermark to ``expire``.

Join semantics: the pair (left, right) is output once, with its probability, when the condition is
satisfied and, if a window is given, ``right.hi <= left.hi + window`` and ``left.hi <= right.hi +
window`` (a time-based sliding window over the rows' latest times; deadline and delay need one,
since they do not bound the distance on one side). ``expire(w)`` promises that no later row has
``hi < w``; rows that then cannot match any later row are invalidated.

Queries reach these correlators through a join's ON clause (timing_syntax.py parses it,
timing_binder.py binds it, join/timing.py runs a correlator per join step as an access path)::

    ... JOIN b ON PROB(ABS(INTERVAL(a.lo, a.hi) - INTERVAL(b.lo, b.hi)) <= 5 s) >= 0.8   -- mutual
    ... JOIN b ON PROB(INTERVAL(a.lo, a.hi) + 5 s >= INTERVAL(b.lo, b.hi)) >= 0.8        -- deadline
    ... JOIN b ON PROB(INTERVAL(a.lo, a.hi) + 5 s <= INTERVAL(b.lo, b.hi)) >= 0.8        -- delay

with ``PROB()`` in the select list naming the pair's probability.
"""
from __future__ import annotations

import bisect
from abc import ABC, abstractmethod
import math

from . import gc_pause

from .timing_probability import (Match, Regions, Row, TimingCondition, band_probability, band_probability_exact,
                                 deadline, delay, mutual, probability, probability_exact, regions, satisfied)

__all__ = [
    "Row", "Match", "TimingCondition", "deadline", "delay", "mutual",
    "band_probability", "band_probability_exact", "probability", "probability_exact", "satisfied",
    "Regions", "Correlator", "SimpleCorrelator", "SSortCorrelator", "EagerCorrelator",
    "LazyCorrelator", "LazyLookupCorrelator", "ALGORITHMS",
]


# ---------------------------------------------------------------------------------------------
# The correlators

_SIDES = ("left", "right")


class _Side:
    """One stream's buffer sorted by (hi, lo, seq), with parallel keys for bisection."""
    __slots__ = ("rows", "his", "wins")

    def __init__(self):
        self.rows: list[tuple[float, float, int, Row]] = []
        self.his: list[float] = []
        self.wins: list[float] = []  # fl(hi + window), non-decreasing in hi

    def add(self, row: Row, seq: int, window: float | None):
        item = (row.hi, row.lo, seq, row)
        i = bisect.bisect_right(self.rows, item[:3], key=lambda t: t[:3])
        self.rows.insert(i, item)
        self.his.insert(i, row.hi)
        self.wins.insert(i, row.hi + window if window is not None else math.inf)

    def drop_prefix(self, n: int):
        if n:
            del self.rows[:n], self.his[:n], self.wins[:n]

    def __len__(self):
        return len(self.rows)


def _margin(*xs: float) -> float:
    return 4 * math.ulp(max([abs(x) for x in xs if math.isfinite(x)] + [1.0]))


class Correlator(ABC):
    """The interface: ``insert(side, row, now)`` returns the matches it completes, ``expire(w)``
    invalidates obsolete rows (and may return matches a lazy correlator completes first),
    ``flush()`` completes every pending row. Counters: ``evaluations`` (probabilities computed to
    decide a pair), ``probes`` (pairs in probe regions), ``hits`` (probes answered by the look-up
    table)."""

    name = "base"

    def __init__(self, cond: TimingCondition, rho: float, pi: float, window: float | None = None):
        if not (0 <= rho <= pi and math.isfinite(pi)):
            raise ValueError(f"rho, pi: need 0 <= rho <= pi < inf, got rho={rho!r}, pi={pi!r}")
        if window is None and (cond.lo is None or cond.hi is None):
            raise ValueError("window: required for deadline and delay conditions")
        if window is not None and not (window >= 0 and math.isfinite(window)):
            raise ValueError(f"window: must be a finite number >= 0, got {window!r}")
        self.cond, self.rho, self.pi, self.window = cond, float(rho), float(pi), window
        self.evaluations = self.probes = self.hits = 0
        self.watermark = -math.inf
        self._seq = 0
        self._regions: dict[tuple[int, float], Regions] = {}

    # -- shared helpers
    def _validate(self, side: str, row: Row):
        if side not in _SIDES:
            raise ValueError(f"side: must be 'left' or 'right', got {side!r}")
        if not (math.isfinite(row.lo) and math.isfinite(row.hi) and row.lo <= row.hi):
            raise ValueError(f"row: need finite lo <= hi, got lo={row.lo!r}, hi={row.hi!r}")
        length = row.hi - row.lo
        if not (self.rho <= length <= self.pi):
            raise ValueError(f"row: length {length!r} outside [rho, pi] = [{self.rho!r}, {self.pi!r}]")
        if row.hi < self.watermark:
            raise ValueError(f"row: hi {row.hi!r} below the watermark {self.watermark!r}")

    def _pair(self, side: str, base: Row, target: Row) -> tuple[Row, Row]:
        return (base, target) if side == "left" else (target, base)

    def _in_window(self, side: str, base: Row, target: Row) -> bool:
        if self.window is None:
            return True
        left, right = self._pair(side, base, target)
        return right.hi <= left.hi + self.window and left.hi <= right.hi + self.window

    def _probe(self, side: str, base: Row, target: Row) -> tuple[bool, float]:
        left, right = self._pair(side, base, target)
        self.evaluations += 1
        return satisfied(self.cond, left, right)

    def _match(self, side: str, base: Row, target: Row, p: float | None = None) -> Match:
        left, right = self._pair(side, base, target)
        return Match(self.cond, left, right, p)

    def _band(self, side: str):
        return (self.cond.lo, self.cond.hi) if side == "left" else self.cond.mirrored()

    def regions(self, side: str, base_len: float) -> Regions:
        key = (0 if side == "left" else 1, base_len)
        r = self._regions.get(key)
        if r is None:
            if len(self._regions) > 4096:  # lengths need not repeat; keep the memo bounded
                self._regions.clear()
            r = self._regions[key] = regions(self._band(side), self.cond.ct, base_len, self.rho, self.pi)
        return r

    def _ranges(self, side: str, base: Row, tgt: _Side):
        """Index ranges in the target buffer: (window range, accept range, possible range)."""
        n = len(tgt)
        if self.window is None:
            w0, w1 = 0, n
        else:
            w0 = bisect.bisect_left(tgt.wins, base.hi)  # base.hi <= target.hi + window
            w1 = bisect.bisect_right(tgt.his, base.hi + self.window)
        r = self.regions(side, base.hi - base.lo)
        b = base.hi
        m = _margin(b, r.acc_lo, r.acc_hi, r.pos_lo, r.pos_hi)
        if r.acc_lo <= r.acc_hi:
            a0 = bisect.bisect_left(tgt.his, b + r.acc_lo + m)
            a1 = bisect.bisect_right(tgt.his, b + r.acc_hi - m)
        else:
            a0 = a1 = 0
        p0 = 0 if r.pos_lo == -math.inf else bisect.bisect_left(tgt.his, b + r.pos_lo - m)
        p1 = n if r.pos_hi == math.inf else bisect.bisect_right(tgt.his, b + r.pos_hi + m)
        p0, p1 = max(p0, w0), min(p1, w1)
        a0, a1 = max(a0, p0), min(a1, p1)
        if a0 >= a1:
            a0 = a1 = p1  # no accept region: everything possible is probed on the left
        return p0, a0, a1, p1

    def _obsolete_before(self, side: str, buf: _Side) -> int:
        """How many of ``buf``'s first rows (a ``side`` buffer) cannot match a later row of the
        other side: its window is over, or it lies left of the possible region of any later base
        (a base of length pi whose hi is the watermark bounds them all)."""
        w = self.watermark
        if w == -math.inf:
            return 0
        n = bisect.bisect_left(buf.wins, w) if self.window is not None else 0
        other = "right" if side == "left" else "left"
        r = self.regions(other, self.pi)
        if r.pos_lo != -math.inf:
            n = max(n, bisect.bisect_left(buf.his, w + r.pos_lo - _margin(w, r.pos_lo)))
        return n

    def _is_obsolete(self, side: str, row: Row) -> bool:
        w = self.watermark
        if w == -math.inf:
            return False
        if self.window is not None and row.hi + self.window < w:
            return True
        other = "right" if side == "left" else "left"
        r = self.regions(other, self.pi)
        return r.pos_lo != -math.inf and row.hi < w + r.pos_lo - _margin(w, r.pos_lo)

    # -- the interface
    @abstractmethod
    def insert(self, side: str, row: Row, now: float) -> list[Match]:
        """Take one row of `side`; the pairs it completes."""

    def expire(self, watermark: float) -> list[Match]:
        if watermark > self.watermark:
            self.watermark = watermark
        return []

    def flush(self) -> list[Match]:
        return []

    @abstractmethod
    def buffered(self) -> int:
        """Rows held."""

    @abstractmethod
    def _check(self):
        """Each algorithm's invariants."""


class SimpleCorrelator(Correlator):
    """Algorithm 1: every target row is probed; obsolete targets are marked during the scan."""
    name = "simple"

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.bufs: dict[str, list] = {"left": [], "right": []}

    def insert(self, side, row, now):
        self._validate(side, row)
        other = "right" if side == "left" else "left"
        out, keep = [], []
        for t in self.bufs[other]:
            if self._in_window(side, row, t):
                self.probes += 1
                ok, p = self._probe(side, row, t)
                if ok:
                    out.append(self._match(side, row, t, p))
            if not self._is_obsolete(other, t):
                keep.append(t)
        self.bufs[other] = keep
        self.bufs[side].append(row)
        return out

    def buffered(self):
        return len(self.bufs["left"]) + len(self.bufs["right"])

    def _check(self):
        for side, buf in self.bufs.items():
            for r in buf:
                assert isinstance(r, Row) and self.rho <= r.hi - r.lo <= self.pi, (side, r)


class SSortCorrelator(Correlator):
    """Simple over buffers sorted by hi: the obsolete rows are a prefix, cut in one step."""
    name = "ssort"

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.bufs = {"left": _Side(), "right": _Side()}

    def insert(self, side, row, now):
        self._validate(side, row)
        other = "right" if side == "left" else "left"
        tgt = self.bufs[other]
        tgt.drop_prefix(self._obsolete_before(other, tgt))
        out = []
        for _, _, _, t in tgt.rows:
            if self._in_window(side, row, t):
                self.probes += 1
                ok, p = self._probe(side, row, t)
                if ok:
                    out.append(self._match(side, row, t, p))
        self._seq += 1
        self.bufs[side].add(row, self._seq, self.window)
        return out

    def buffered(self):
        return len(self.bufs["left"]) + len(self.bufs["right"])

    def _check(self):
        for buf in self.bufs.values():
            assert [r[:3] for r in buf.rows] == sorted(r[:3] for r in buf.rows)
            assert buf.his == [r[0] for r in buf.rows]
            assert len(buf.wins) == len(buf.rows)
            assert all(a <= b for a, b in zip(buf.wins, buf.wins[1:]))


class EagerCorrelator(SSortCorrelator):
    """Algorithm 2: per arriving row, the accept region is output without probabilities, the two
    probe regions are probed, the violation regions are skipped; obsolete rows are cut on expire."""
    name = "eager"

    def _join(self, side: str, base: Row, tgt: _Side, out: list[Match]):
        p0, a0, a1, p1 = self._ranges(side, base, tgt)
        rows = tgt.rows
        for i in range(a0, a1):
            out.append(self._match(side, base, rows[i][3]))
        for i in (*range(p0, a0), *range(a1, p1)):
            t = rows[i][3]
            self.probes += 1
            ok, p = self._probe(side, base, t)
            if ok:
                out.append(self._match(side, base, t, p))

    def insert(self, side, row, now):
        self._validate(side, row)
        other = "right" if side == "left" else "left"
        out: list[Match] = []
        self._join(side, row, self.bufs[other], out)
        self._seq += 1
        self.bufs[side].add(row, self._seq, self.window)
        return out

    def expire(self, watermark):
        super().expire(watermark)
        for s in _SIDES:
            self.bufs[s].drop_prefix(self._obsolete_before(s, self.bufs[s]))
        return []


class LazyCorrelator(EagerCorrelator):
    """Algorithms 4 and 5: rows wait in a pending block until ``block`` rows are pending or
    ``interval`` of stream time (the caller's unit; 1,000 is a second in ms) has passed since the
    last block; a block joins the new left rows with every right row, then the new right rows with
    the old left rows, and invalidates."""
    name = "lazy"

    def __init__(self, *a, block: int = 1000, interval: float | None = 1000.0, **k):
        super().__init__(*a, **k)
        if block < 1:
            raise ValueError(f"block: must be >= 1, got {block!r}")
        self.block, self.interval = block, interval
        self.pending: dict[str, list[Row]] = {"left": [], "right": []}
        self.last_block: float | None = None

    def insert(self, side, row, now):
        self._validate(side, row)
        self.pending[side].append(row)
        if self.last_block is None:
            self.last_block = now
        n = len(self.pending["left"]) + len(self.pending["right"])
        if n >= self.block or (self.interval is not None and now - self.last_block >= self.interval):
            self.last_block = now
            return self.flush()
        return []

    def flush(self):
        with gc_pause.paused():  # a block's matches live until it returns (store/gc_pause.py)
            return self._flush()

    def _flush(self):
        out: list[Match] = []
        newl = sorted(self.pending["left"], key=lambda r: (r.hi, r.lo))
        newr = sorted(self.pending["right"], key=lambda r: (r.hi, r.lo))
        self.pending = {"left": [], "right": []}
        for r in newr:
            self._seq += 1
            self.bufs["right"].add(r, self._seq, self.window)
        self._block("left", newl, self.bufs["right"], out)   # new left x all right
        self._block("right", newr, self.bufs["left"], out)   # new right x old left
        for r in newl:
            self._seq += 1
            self.bufs["left"].add(r, self._seq, self.window)
        for s in _SIDES:
            self.bufs[s].drop_prefix(self._obsolete_before(s, self.bufs[s]))
        return out

    def _block(self, side: str, bases: list[Row], tgt: _Side, out: list[Match]):
        for base in reversed(bases):
            self._join(side, base, tgt, out)

    def expire(self, watermark):
        if watermark > self.watermark:
            self.watermark = watermark  # applied at the end of the next block
        return []

    def buffered(self):
        return super().buffered() + len(self.pending["left"]) + len(self.pending["right"])

    def _check(self):
        super()._check()
        for s in _SIDES:
            for r in self.pending[s]:
                assert isinstance(r, Row)


class LazyLookupCorrelator(LazyCorrelator):
    """Algorithms 6 and 7: a block's accept regions first, then its left probe regions with the
    bases in descending order and its right probe regions in ascending order, each pass with a
    look-up table holding, per target row, the last base probed against it and the decision. A
    satisfied entry answers for a new base when the decision provably carries over
    (:meth:`_carries`); otherwise the pair is probed and the entry replaced."""
    name = "lazy-lookup"

    def _carries(self, side: str, new: Row, old: Row, target: Row, leftward: bool) -> bool:
        """Whether (old, target) satisfied implies (new, target) does (Corollary 2 with Theorem
        2's argument, without assuming d >= pi). With D = target - base on the band [lo, hi]:
        a base earlier in both ends makes D larger, so P(D >= lo) only grows; if moreover D <= hi
        surely for the new base, the probability is P(D >= lo) and cannot fall. Mirrored for a
        later base."""
        lo, hi = self._band(side)
        if leftward:
            if not (new.lo <= old.lo and new.hi <= old.hi):
                return False
            if hi is None:
                return True
            return target.hi - new.lo < hi - _margin(target.hi, new.lo, hi)
        if not (new.lo >= old.lo and new.hi >= old.hi):
            return False
        if lo is None:
            return True
        return target.lo - new.hi > lo + _margin(target.lo, new.hi, lo)

    def _block(self, side, bases, tgt, out):
        rows = tgt.rows
        ranges = [(b, self._ranges(side, b, tgt)) for b in bases]
        for b, (p0, a0, a1, p1) in reversed(ranges):
            for i in range(a0, a1):
                out.append(self._match(side, b, rows[i][3]))
        for leftward in (True, False):
            table: dict[int, tuple[Row, bool]] = {}
            seq = reversed(ranges) if leftward else ranges
            for b, (p0, a0, a1, p1) in seq:
                for i in (range(p0, a0) if leftward else range(a1, p1)):
                    t = rows[i][3]
                    self.probes += 1
                    entry = table.get(i)
                    if entry is not None and entry[1] and self._carries(side, b, entry[0], t, leftward):
                        self.hits += 1
                        out.append(self._match(side, b, t))
                        continue
                    ok, p = self._probe(side, b, t)
                    table[i] = (b, ok)
                    if ok:
                        out.append(self._match(side, b, t, p))


ALGORITHMS: dict[str, type[Correlator]] = {
    c.name: c for c in (SimpleCorrelator, SSortCorrelator, EagerCorrelator, LazyCorrelator, LazyLookupCorrelator)
}
