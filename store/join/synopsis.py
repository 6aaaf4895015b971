"""Aggregates over a join kept between evaluations: the basic-interval-join synopsis of thesis
8.3.2. A plan that keeps its state (cache=True: periodic queries) and answers COUNT(*), COUNT(col),
and SUM, AVG, MIN, MAX of int64 and decimal columns, MIN and MAX of timestamps and dates (all
integers: exact; nulls left out per interval) without GROUP BY keeps no result rows at all: new
result rows are pre-aggregated into intervals labelled by when they expire, and an answer merges the
live intervals. A label is the combination of sub-windows (one per source) the rows were joined
from: all rows under one label expire together, at the first slide that expires one of those
sub-windows, so expiration drops whole intervals and never subtracts (the thesis labels intervals by
expiration time; with streams on different clocks, manual or event time, no expiration time is
known in advance, so the combination itself is the label). Evaluation costs O(labels), not O(result
rows), the kept state is O(labels) (at most the product of the sources' sub-window counts), and the
answers are exactly the recomputed ones (integer sums are exact; AVG divides the exact sum once).
The row bound is the same as without the synopsis (the rows the intervals summarise), so a join is
refused or answered alike whether it is one-time or periodic.

Owns the intervals; the plan decides when rows are added or expire.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..dictionary import StringDictionary
from ..join_binder import BoundJoin
from .index import Inter


def synopsis_answers(b: BoundJoin) -> bool:
    """Can intervals of pre-aggregated join results answer this query exactly? When every aggregate's
    class says so (join_synopsis_ok: COUNT of any column; SUM, AVG, MIN, MAX of int64 and decimal
    columns, integers: exact sums; MIN, MAX of timestamps and dates, integers too). NULLs are left
    out per interval (values counted), so an interval of only NULLs contributes nothing. Float sums
    (they depend on the order of addition), string extremes (decoding) and boolean extremes are
    recomputed from the kept result rows instead."""
    if b.projection or b.group_by is not None or b.outer or not b.aggs:
        return False
    return all(a.fn.join_synopsis_ok(a) for a in b.aggs)


class Intervals:
    """Join results pre-aggregated per label (the combination of sub-windows they were joined from, so
    every row of an interval expires at the same slide): labels[i] is the version of each source,
    counts[i] the rows under it, and per aggregate its function's from_group_rows partial with one
    entry per label (functions.py: COUNT the values counted, SUM and AVG (exact sum, values counted),
    MIN and MAX (extreme, present)), so an answer merges them with the function's finish_groups, as
    the single-stream path merges sub-windows' per-key contributions. Values counted leave out nulls
    (a sub-window's validity mask, when it has one)."""

    def __init__(self, k: int, bound: BoundJoin, strings: Sequence[StringDictionary]):
        self.k, self.bound, self.strings = k, bound, strings
        self.labels = np.zeros((0, k), dtype=np.int64)
        self.counts = np.zeros(0, dtype=np.int64)
        self.parts: list = [None] * len(bound.aggs)  # None until the first interval

    @property
    def rows(self) -> int:
        return int(self.counts.sum())

    def _strings(self, ref) -> StringDictionary:
        return self.strings[ref.source if ref is not None else 0]

    def add(self, inter: Inter, gather, max_rows: int, too_many) -> None:
        """Pre-aggregate new result rows (each has at least one newly incorporated sub-window, so its
        label is new)."""
        total = self.rows + inter.n  # the same bound as for kept rows: a periodic join is refused as a one-time one
        if total > max_rows:
            too_many(total, "the join result")
        labels, inverse = _labels([inter.ver[q] for q in range(self.k)])
        g = len(labels)
        counts = np.bincount(inverse, minlength=g).astype(np.int64)
        parts = []
        for a, ref in zip(self.bound.aggs, self.bound.agg_refs):
            values, inv = None, inverse  # COUNT(*)
            if ref is not None:
                values, valid = gather(ref, inter.ver[ref.source], inter.row[ref.source])
                if valid is not None:
                    inv, values = inverse[valid], values[valid]
            parts.append(a.fn.from_group_rows(a, inv, g, values, inv, self._strings(ref)))
        self.labels = np.concatenate([self.labels, labels])
        self.counts = np.concatenate([self.counts, counts])
        self.parts = [new if old is None else _map(_concat_values, old, new) for old, new in zip(self.parts, parts)]

    def expire(self, p: int, gone: np.ndarray) -> int:
        """Drop the intervals holding an expired sub-window of source p; the rows they summarised."""
        hit = np.isin(self.labels[:, p], gone)
        if not hit.any():
            return 0
        dropped = int(self.counts[hit].sum())
        keep = ~hit
        self.labels, self.counts = self.labels[keep], self.counts[keep]
        self.parts = [None if part is None else _map(lambda x: x[keep], part) for part in self.parts]
        return dropped

    def answer(self) -> list[tuple]:
        b = self.bound
        n = len(self.labels)
        values = []
        for a, ref, part in zip(b.aggs, b.agg_refs, self.parts):
            s = self._strings(ref)
            if part is None or not n:
                values.append(a.fn.finish(a, [], s))  # no interval: the aggregate of no row
            else:  # every interval into one group
                one = np.zeros(1, dtype=np.int64)
                values.append(a.fn.finish_groups(a, np.zeros(n, dtype=np.int64), 1, [part], one, s).tolist()[0])
        rows = [tuple(values[it.agg] for it in b.items)]  # type: ignore[index]  # no GROUP BY: aggregates only
        return rows if b.limit is None else rows[: b.limit]


def _map(f, *parts):
    """f applied to the arrays of partials (one array, or tuples of arrays alike)."""
    if isinstance(parts[0], np.ndarray):
        return f(*parts)
    return tuple(f(*xs) for xs in zip(*parts))


def _labels(vers: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct version combinations (rows of a [labels, k] array) and each row's label."""
    los = [int(v.min()) for v in vers]
    spans = [int(v.max()) - lo + 1 for v, lo in zip(vers, los)]
    radix = 1
    for s in spans:
        radix *= s
    if radix < 2**62:  # one int64 code per combination: a 1-d unique (much faster than a row-wise one)
        code = np.zeros(len(vers[0]), dtype=np.int64)
        for v, lo, span in zip(vers, los, spans):
            code = code * span + (v - lo)
        if radix <= 4 * len(code) + 1024:  # few combinations possible: count them, no sort
            present = np.bincount(code, minlength=radix) > 0
            uniq = np.flatnonzero(present)
            dense = np.cumsum(present) - 1
            inverse = dense[code]
        else:
            uniq, inverse = np.unique(code, return_inverse=True)
        out = np.empty((len(uniq), len(vers)), dtype=np.int64)
        rest = uniq
        for q in range(len(vers) - 1, -1, -1):
            out[:, q] = rest % spans[q] + los[q]
            rest = rest // spans[q]
        return out, inverse.reshape(-1)
    labels, inverse = np.unique(np.stack(vers, axis=1), axis=0, return_inverse=True)
    return labels, inverse.reshape(-1)


def _concat_values(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    if old.dtype.kind == "O" or new.dtype.kind == "O":
        return np.concatenate([old.astype(object), new.astype(object)])
    return np.concatenate([old, new])

