"""Aggregates with a partial-result interface.

A query reads sub-windows one at a time in any order. Each read yields a *contribution* (the
sub-window's share of every aggregate: scalars, or per-key arrays when grouping); a `Partial`
keeps contributions keyed by the sub-window's version, so

- merging is a union and independent of read order (finishing combines in version order, so
  even float sums are bit-identical whatever the order of reads);
- removing a sub-window's contribution (the re-scan-instead-of-abort scheduler) drops one key;
- finishing does the vectorised combine once: cheap sums stay O(n_Q), holistic aggregates
  (COUNT DISTINCT, exact QUANTILE) concatenate the values their contributions kept.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Iterable

import numpy as np

from .query import Aggregate
from .synopsis import group_keys, grouped_sum


class Partial:
    """Contributions of the sub-windows read so far, by version."""

    __slots__ = ("contributions",)

    def __init__(self) -> None:
        self.contributions: dict[int, Any] = {}

    def add(self, version: int, contribution: Any) -> None:
        self.contributions[version] = contribution

    def remove(self, version: int) -> None:
        del self.contributions[version]

    def merge(self, other: "Partial") -> "Partial":
        out = Partial()
        out.contributions = {**self.contributions, **other.contributions}
        return out

    def versions(self) -> list[int]:
        return sorted(self.contributions)

    def ordered(self) -> list[Any]:
        c = self.contributions
        return [c[v] for v in sorted(c)]


# -- contributions of one sub-window ---------------------------------------------------------------
def scalar_part(agg: Aggregate, values: np.ndarray | None, rows: int) -> Any:
    """One aggregate's contribution from the selected raw values of one sub-window."""
    f = agg.func
    if f == "count":
        return rows
    if f in ("sum", "avg"):
        return (values.sum().item() if rows else 0, rows)
    if f == "min":
        return values.min().item() if rows else None
    if f == "max":
        return values.max().item() if rows else None
    if f == "count_distinct":
        return np.unique(values)
    if f == "quantile":
        return values
    raise AssertionError(f)


def group_part(agg: Aggregate, inverse: np.ndarray, groups: int, values: np.ndarray | None,
               keys_per_row: np.ndarray) -> Any:
    """One aggregate's per-key contribution; `inverse` maps rows to the sorted unique keys."""
    f = agg.func
    if f == "count":
        return np.bincount(inverse, minlength=groups).astype(np.int64)
    if f == "sum":
        return grouped_sum(inverse, values, groups)
    if f == "avg":
        return (grouped_sum(inverse, values, groups), np.bincount(inverse, minlength=groups).astype(np.int64))
    if f in ("min", "max"):
        return _grouped_extreme(f, inverse, values, groups)
    if f == "count_distinct":
        return _unique_pairs(keys_per_row, values)
    if f == "quantile":
        return (keys_per_row, values)
    raise AssertionError(f)


def _grouped_extreme(f: str, inverse: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    if values.dtype.kind == "f":
        out = np.full(groups, np.inf if f == "min" else -np.inf)
    else:
        info = np.iinfo(values.dtype)
        out = np.full(groups, info.max if f == "min" else info.min, dtype=values.dtype)
    (np.minimum if f == "min" else np.maximum).at(out, inverse, values)
    return out


def _unique_pairs(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if len(keys) == 0:
        return keys, values
    order = np.lexsort((values, keys))
    k, v = keys[order], values[order]
    keep = np.ones(len(k), dtype=bool)
    keep[1:] = (k[1:] != k[:-1]) | (v[1:] != v[:-1])
    return k[keep], v[keep]


# -- finishing -------------------------------------------------------------------------------------
def quantile_index(q: float, n: int) -> int:
    """0-based rank of the exact discrete quantile: the smallest v with ceil(q*n) values <= v."""
    return max(1, math.ceil(Fraction(repr(float(q))) * n)) - 1


def finish_scalar(agg: Aggregate, parts: list[Any]) -> Any:
    f = agg.func
    if f == "count":
        return int(sum(parts))
    if f in ("sum", "avg"):
        if not parts:
            return None
        sums, counts = zip(*parts)
        total, count = sum(sums), sum(counts)
        if count == 0:
            return None
        return total if f == "sum" else total / count
    if f in ("min", "max"):
        vals = [p for p in parts if p is not None]
        if not vals:
            return None
        return min(vals) if f == "min" else max(vals)
    if f == "count_distinct":
        if not parts:
            return 0
        return int(len(np.unique(np.concatenate(parts))))
    if f == "quantile":
        vals = np.concatenate(parts) if parts else np.empty(0)
        if len(vals) == 0:
            return None
        k = quantile_index(agg.q, len(vals))
        return np.partition(vals, k)[k].item()
    raise AssertionError(f)


def scalar_over(agg: Aggregate, values: np.ndarray) -> Any:
    """An aggregate over a plain array (the outer query over per-group totals)."""
    return finish_scalar(agg, [scalar_part(agg, values, len(values))])


def finish_groups(aggs: list[Aggregate], contributions: Iterable[tuple[np.ndarray, tuple]],
                  dense: bool = False) -> tuple[np.ndarray, list[np.ndarray]]:
    """Combine per-key contributions: (sorted keys, one result array per aggregate).

    `dense`: keys are dictionary codes, grouped by counting instead of sorting."""
    contributions = list(contributions)
    if not contributions:
        return np.empty(0, dtype=np.int64), [np.empty(0) for _ in aggs]
    all_keys = np.concatenate([c[0] for c in contributions])
    uniq, inverse = group_keys(all_keys, dense=dense)
    g = len(uniq)
    results = []
    for i, agg in enumerate(aggs):
        parts = [c[1][i] for c in contributions]
        f = agg.func
        if f in ("count", "sum"):
            results.append(grouped_sum(inverse, np.concatenate(parts), g))
        elif f == "avg":
            s = grouped_sum(inverse, np.concatenate([p[0] for p in parts]), g)
            n = grouped_sum(inverse, np.concatenate([p[1] for p in parts]), g)
            results.append(s / n)
        elif f in ("min", "max"):
            results.append(_grouped_extreme(f, inverse, np.concatenate(parts), g))
        elif f == "count_distinct":
            k, v = _unique_pairs(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
            results.append(np.bincount(np.searchsorted(uniq, k), minlength=g).astype(np.int64))
        elif f == "quantile":
            k = np.concatenate([p[0] for p in parts])
            v = np.concatenate([p[1] for p in parts])
            order = np.lexsort((v, k))
            k, v = k[order], v[order]
            starts = np.searchsorted(k, uniq, side="left")
            counts = np.searchsorted(k, uniq, side="right") - starts
            ranks = np.array([quantile_index(agg.q, int(c)) for c in counts], dtype=np.int64)
            results.append(v[starts + ranks] if g else v[:0])
        else:
            raise AssertionError(f)
    return uniq, results
