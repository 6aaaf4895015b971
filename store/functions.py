"""The aggregate function registry: one class per function.

Each class says which column types it takes and what it returns, which access paths can answer
it (probe: window-level running/interval synopses; synopsis: per-sub-window basic interval or
per-key synopses; window: raw rows), what one sub-window contributes, how contributions combine
(`finish`, in version order: see aggregates.Partial), and how it aggregates a plain list (the outer
query over a sub-query's rows). Adding a function means adding a class here (and, for the
structured API, a value of the AggregateFunction enum).

A bound aggregate `b` (binder.BoundAggregate) carries the column, its type and QUANTILE's q.
String columns hold dictionary codes; `strings` (the stream's StringDictionary) decodes them.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from .exact import exact_sum, grouped_sum, ratio
from .synopsis import group_keys

NUMERIC = frozenset({"int64", "float64", "int128"})
ANY = frozenset({"int64", "float64", "string", "int128"})


class AggregateFunction(ABC):
    name = ""                 # the structured form's name (query.Aggregate.func)
    inputs: frozenset = ANY   # column types it accepts
    exact = True
    removable = True          # a sub-window's contribution can be dropped (ttu-rescan)

    def result_type(self, input_type: str | None) -> str:
        return input_type

    # -- access paths (raw rows always work) -----------------------------------------------------
    def probe_ok(self, input_type: str | None) -> bool:
        return False

    def synopsis_ok(self, b, declared: set[str]) -> bool:
        return False

    def key_synopsis_ok(self, b) -> bool:
        return False

    # -- one sub-window's raw rows ---------------------------------------------------------------
    @abstractmethod
    def from_rows(self, b, values: np.ndarray | None, rows: int, strings) -> Any:
        """One sub-window's contribution from its selected raw values (None for COUNT(*))."""

    @abstractmethod
    def finish(self, b, parts: list, strings) -> Any:
        """The result from the contributions of every sub-window read, in version order."""

    @abstractmethod
    def from_group_rows(self, b, inverse: np.ndarray, groups: int, values: np.ndarray | None,
                        keys: np.ndarray, strings) -> Any:
        """Per-key contribution; `inverse` maps rows to the sorted unique keys."""

    @abstractmethod
    def finish_groups(self, b, inverse: np.ndarray, groups: int, parts: list, uniq: np.ndarray,
                      strings) -> np.ndarray:
        """One result per key of `uniq`; `inverse` maps the concatenated contributions to them."""

    @abstractmethod
    def over(self, b, values: list) -> Any:
        """The aggregate over a plain list of Python values (the outer query)."""


class Count(AggregateFunction):
    """COUNT(*) and COUNT(col): columns hold no nulls, so both count rows."""

    name = "count"

    def result_type(self, input_type):
        return "int64"

    def probe_ok(self, input_type):
        return True

    def probe(self, b, window, n_q, count):
        return count

    def synopsis_ok(self, b, declared):
        return True

    def read_synopsis(self, b):
        return lambda sub: sub.rows

    def key_synopsis_ok(self, b):
        return True

    def read_key_synopsis(self, b, ks):
        return ks.counts

    def from_rows(self, b, values, rows, strings):
        return rows

    def finish(self, b, parts, strings):
        return int(sum(parts))

    def from_group_rows(self, b, inverse, groups, values, keys, strings):
        return np.bincount(inverse, minlength=groups).astype(np.int64)

    def finish_groups(self, b, inverse, groups, parts, uniq, strings):
        return grouped_sum(inverse, np.concatenate(parts), groups)

    def over(self, b, values):
        return len(values)


class Sum(AggregateFunction):
    """Exact over integers: SUM(int64) is an int128 (it never wraps; see exact.py)."""

    name = "sum"
    inputs = NUMERIC

    def result_type(self, input_type):
        return "int128" if input_type in ("int64", "int128") else "float64"

    def probe_ok(self, input_type):
        return input_type == "int64"  # running prefix sums are exact only for integers

    def probe(self, b, window, n_q, count):
        return None if count == 0 else window.running_total(b.column, n_q)

    def synopsis_ok(self, b, declared):
        return True

    def read_synopsis(self, b):
        column = b.column

        def read(sub):
            cs = sub.synopsis.columns[column]
            return (cs.sum, cs.count)
        return read

    def key_synopsis_ok(self, b):
        return True

    def read_key_synopsis(self, b, ks):
        return ks.sums[b.column]

    def from_rows(self, b, values, rows, strings):
        return (exact_sum(values) if rows else 0, rows)

    def finish(self, b, parts, strings):
        count = sum(p[1] for p in parts)
        return sum(p[0] for p in parts) if count else None

    def from_group_rows(self, b, inverse, groups, values, keys, strings):
        return grouped_sum(inverse, values, groups)

    def finish_groups(self, b, inverse, groups, parts, uniq, strings):
        return grouped_sum(inverse, _concat(parts), groups)

    def over(self, b, values):
        return sum(values) if values else None


class Avg(Sum):
    """The exact sum divided by the count, rounded once to float64."""

    name = "avg"

    def result_type(self, input_type):
        return "float64"

    def probe(self, b, window, n_q, count):
        return None if count == 0 else window.running_total(b.column, n_q) / count

    def read_key_synopsis(self, b, ks):
        return (ks.sums[b.column], ks.counts)

    def finish(self, b, parts, strings):
        count = sum(p[1] for p in parts)
        return sum(p[0] for p in parts) / count if count else None

    def from_group_rows(self, b, inverse, groups, values, keys, strings):
        return (grouped_sum(inverse, values, groups), np.bincount(inverse, minlength=groups).astype(np.int64))

    def finish_groups(self, b, inverse, groups, parts, uniq, strings):
        sums = grouped_sum(inverse, _concat([p[0] for p in parts]), groups)
        counts = grouped_sum(inverse, np.concatenate([p[1] for p in parts]), groups)
        return ratio(sums, counts)

    def over(self, b, values):
        return sum(values) / len(values) if values else None


class _Extreme(AggregateFunction):
    """MIN / MAX. Numbers by value; strings by Unicode code point (Python's str order, which is
    also the byte order of UTF-8)."""

    maximum = False

    def probe_ok(self, input_type):
        return input_type in ("int64", "float64")

    def probe(self, b, window, n_q, count):
        lo, hi = window.interval_minmax(b.column, n_q)
        return hi if self.maximum else lo

    def synopsis_ok(self, b, declared):
        return b.input_type in ("int64", "float64")

    def read_synopsis(self, b):
        column, maximum = b.column, self.maximum
        return lambda sub: (sub.synopsis.columns[column].max if maximum else sub.synopsis.columns[column].min)

    def from_rows(self, b, values, rows, strings):
        if not rows:
            return None
        if b.input_type == "string":
            decoded = strings.decode(np.unique(values))
            return max(decoded) if self.maximum else min(decoded)
        return (values.max() if self.maximum else values.min()).item()

    def finish(self, b, parts, strings):
        vals = [p for p in parts if p is not None]
        if not vals:
            return None
        return max(vals) if self.maximum else min(vals)

    def from_group_rows(self, b, inverse, groups, values, keys, strings):
        if b.input_type == "string":
            return _string_group_extreme(inverse, groups, values, strings, self.maximum)
        return _grouped_extreme(self.maximum, inverse, values, groups)

    def finish_groups(self, b, inverse, groups, parts, uniq, strings):
        values = np.concatenate(parts)
        if b.input_type == "string":
            codes = _string_group_extreme(inverse, groups, values, strings, self.maximum)
            return np.array(strings.decode(codes), dtype=object)
        return _grouped_extreme(self.maximum, inverse, values, groups)

    def over(self, b, values):
        if not values:
            return None
        return max(values) if self.maximum else min(values)


class Min(_Extreme):
    name = "min"


class Max(_Extreme):
    name = "max"
    maximum = True


class CountDistinct(AggregateFunction):
    name = "count_distinct"

    def result_type(self, input_type):
        return "int64"

    def synopsis_ok(self, b, declared):
        return b.column in declared  # the per-key synopsis lists the distinct keys

    def read_synopsis(self, b):
        column = b.column
        return lambda sub: sub.synopsis.by_key[column].keys

    def from_rows(self, b, values, rows, strings):
        return np.unique(values)

    def finish(self, b, parts, strings):
        return int(len(np.unique(np.concatenate(parts)))) if parts else 0

    def from_group_rows(self, b, inverse, groups, values, keys, strings):
        return _unique_pairs(keys, values)

    def finish_groups(self, b, inverse, groups, parts, uniq, strings):
        k, _ = _unique_pairs(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
        return np.bincount(np.searchsorted(uniq, k), minlength=groups).astype(np.int64)

    def over(self, b, values):
        return len(set(values))


class Quantile(AggregateFunction):
    """Exact discrete quantile: the smallest v such that at least ceil(q*N) of the N values are
    <= v (q = 0 gives MIN). Holistic: contributions keep the values."""

    name = "quantile"
    inputs = NUMERIC

    def from_rows(self, b, values, rows, strings):
        return values

    def finish(self, b, parts, strings):
        vals = np.concatenate(parts) if parts else np.empty(0)
        if len(vals) == 0:
            return None
        k = quantile_index(b.q, len(vals))
        return np.partition(vals, k)[k].item()

    def from_group_rows(self, b, inverse, groups, values, keys, strings):
        return (keys, values)

    def finish_groups(self, b, inverse, groups, parts, uniq, strings):
        k = np.concatenate([p[0] for p in parts])
        v = np.concatenate([p[1] for p in parts])
        order = np.lexsort((v, k))
        k, v = k[order], v[order]
        starts = np.searchsorted(k, uniq, side="left")
        counts = np.searchsorted(k, uniq, side="right") - starts
        ranks = np.array([quantile_index(b.q, int(c)) for c in counts], dtype=np.int64)
        return v[starts + ranks] if groups else v[:0]

    def over(self, b, values):
        if not values:
            return None
        return sorted(values)[quantile_index(b.q, len(values))]


FUNCTIONS: dict[str, AggregateFunction] = {f.name: f for f in (
    Count(), Sum(), Avg(), Min(), Max(), CountDistinct(), Quantile())}


def quantile_index(q: Decimal | float, n: int) -> int:
    """0-based rank of the exact discrete quantile: the smallest v with ceil(q*n) values <= v,
    q taken as the exact decimal written (a float as its shortest decimal)."""
    exact = Fraction(q) if isinstance(q, Decimal) else Fraction(repr(float(q)))
    return max(1, math.ceil(exact * n)) - 1


# -- helpers -------------------------------------------------------------------------------------------
def _concat(parts: list[np.ndarray]) -> np.ndarray:
    """Concatenate per-key integer sums, some of which may be object arrays of Python ints."""
    if any(p.dtype.kind == "O" for p in parts):
        return np.concatenate([p.astype(object) for p in parts])
    return np.concatenate(parts)


def _grouped_extreme(maximum: bool, inverse: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    if values.dtype.kind == "f":
        out = np.full(groups, -np.inf if maximum else np.inf)
    else:
        info = np.iinfo(values.dtype)
        out = np.full(groups, info.min if maximum else info.max, dtype=values.dtype)
    (np.maximum if maximum else np.minimum).at(out, inverse, values)
    return out


def _string_group_extreme(inverse, groups, codes, strings, maximum) -> np.ndarray:
    """Per group, the code of its smallest (largest) string. Codes are not ordered like their
    strings, so the distinct codes present are ranked by their decoded values first."""
    uniq, local = group_keys(codes)
    decoded = strings.decode(uniq)
    order = sorted(range(len(uniq)), key=decoded.__getitem__)
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[order] = np.arange(len(uniq))
    best = _grouped_extreme(maximum, inverse, rank[local], groups)
    return uniq[order][best]


def _unique_pairs(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if len(keys) == 0:
        return keys, values
    order = np.lexsort((values, keys))
    k, v = keys[order], values[order]
    keep = np.ones(len(k), dtype=bool)
    keep[1:] = (k[1:] != k[:-1]) | (v[1:] != v[:-1])
    return k[keep], v[keep]
