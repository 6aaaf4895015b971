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

import numpy as np

from ..exact import exact_sum, grouped_sum
from ..functions import _grouped_extreme, decimal_avg
from ..join_binder import BoundJoin, exact_number
from ..schema import decimal_type
from .index import Inter

_SYNOPSIS_FUNCS = ("count", "sum", "avg", "min", "max")


def synopsis_answers(b: BoundJoin) -> bool:
    """Can intervals of pre-aggregated join results answer this query exactly? COUNT of any column;
    SUM, AVG, MIN, MAX of int64 and decimal columns (integers: exact sums); MIN, MAX of timestamps and
    dates (integers too). NULLs are left out per interval (values counted), so an interval of only
    NULLs contributes nothing. Float sums (they depend on the order of addition), string extremes
    (decoding) and boolean extremes are recomputed from the kept result rows instead."""
    if b.projection or b.group_by is not None or b.outer or not b.aggs:
        return False
    for a in b.aggs:
        name = a.fn.name
        if name not in _SYNOPSIS_FUNCS:
            return False
        if name == "count":
            continue
        exact = a.input_type is not None and exact_number(a.input_type)
        if not exact and not (name in ("min", "max") and a.input_type in ("timestamp", "date")):
            return False
    return True


class Intervals:
    """Join results pre-aggregated per label (the combination of sub-windows they were joined from, so
    every row of an interval expires at the same slide): labels[i] is the version of each source, counts[i]
    the rows under it, and per aggregate a tuple of per-label arrays: COUNT(col) (values counted); SUM and
    AVG (exact sum, values counted); MIN and MAX (extreme, values counted). Values counted leave out
    nulls (a sub-window's validity mask, when it has one)."""

    def __init__(self, k: int, bound: BoundJoin):
        self.k, self.bound = k, bound
        self.labels = np.zeros((0, k), dtype=np.int64)
        self.counts = np.zeros(0, dtype=np.int64)
        self.parts: list[tuple | None] = []
        for a, ref in zip(bound.aggs, bound.agg_refs):
            empty = np.zeros(0, dtype=np.int64)
            self.parts.append(None if ref is None else (empty,) if a.fn.name == "count" else (empty, empty))

    @property
    def rows(self) -> int:
        return int(self.counts.sum())

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
        for a, ref, old in zip(self.bound.aggs, self.bound.agg_refs, self.parts):
            if old is None:
                parts.append(None)
                continue
            values, valid = gather(ref, inter.ver[ref.source], inter.row[ref.source])
            inv, counted = inverse, counts
            if valid is not None:
                inv, values = inverse[valid], values[valid]
                counted = np.bincount(inv, minlength=g).astype(np.int64)
            name = a.fn.name
            if name == "count":
                parts.append((counted,))
            elif name in ("sum", "avg"):
                parts.append((grouped_sum(inv, values, g), counted))
            else:
                parts.append((_grouped_extreme(name == "max", inv, values, g), counted))
        self.labels = np.concatenate([self.labels, labels])
        self.counts = np.concatenate([self.counts, counts])
        self.parts = [None if old is None else tuple(_concat_values(o, n) for o, n in zip(old, new))
                      for old, new in zip(self.parts, parts)]

    def expire(self, p: int, gone: np.ndarray) -> int:
        """Drop the intervals holding an expired sub-window of source p; the rows they summarised."""
        hit = np.isin(self.labels[:, p], gone)
        if not hit.any():
            return 0
        dropped = int(self.counts[hit].sum())
        keep = ~hit
        self.labels, self.counts = self.labels[keep], self.counts[keep]
        self.parts = [None if part is None else tuple(x[keep] for x in part) for part in self.parts]
        return dropped

    def answer(self) -> list[tuple]:
        b = self.bound
        values = []
        for a, part in zip(b.aggs, self.parts):
            name = a.fn.name
            if part is None:  # COUNT(*)
                values.append(int(self.counts.sum()))
                continue
            counted = part[-1]
            n = int(counted.sum())
            if name == "count":
                values.append(n)
            elif not n:
                values.append(None)
            elif name in ("sum", "avg"):
                sums = part[0]
                total = sum(sums.tolist()) if sums.dtype.kind == "O" else exact_sum(sums)
                if name == "sum":
                    values.append(total)
                else:  # AVG(decimal): scale s+4, half away from zero, as functions.Avg
                    values.append(decimal_avg(total, n) if decimal_type(a.input_type) else total / n)
            else:
                ext = part[0][counted > 0]
                values.append((ext.max() if name == "max" else ext.min()).item())
        rows = [tuple(values[it.agg] for it in b.items)]
        return rows if b.limit is None else rows[: b.limit]


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

