"""The aggregate function registry: one class per function.

Each class says which column types it takes and what it returns, which access paths can answer
it (probe: window-level running/interval synopses; synopsis: per-sub-window basic interval or
per-key synopses; window: raw rows), what one sub-window contributes, how contributions combine
(`finish`, in version order: see aggregates.Partial), and how it aggregates a plain list (the outer
query over a sub-query's rows). Adding a function means adding a class here (and, for the
structured API, a value of the AggregateFunction enum).

A bound aggregate `b` (binder.BoundAggregate) carries the column, its type and QUANTILE's q.
String columns hold dictionary codes; `strings` (the stream's StringDictionary) decodes them.

Nulls: the planner hands every function only the non-null values of its column (and, grouped, the
rows' group indices of those values), so COUNT(col) counts non-nulls, COUNT(*) rows, and a function
of no value gives NULL (None; per group too). `over` skips None itself.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from .exact import exact_sum, grouped_count, grouped_sum, narrow, ratio
from .synopsis import NULL_KEY, group_keys

# Input kinds (binder: schema.type_kind; "decimal" stands for every decimal(p,s)). A decimal column
# holds value * 10**s as int64: SUM, MIN, MAX, QUANTILE and every synopsis work on those integers
# exactly (the planner turns results into Decimals by their output type's scale); AVG is exact too.
NUMERIC = frozenset({"int64", "float64", "int128", "decimal"})
ANY = frozenset({"int64", "float64", "string", "int128", "boolean", "timestamp", "date", "decimal"})
ORDERED = frozenset({"int64", "float64", "string", "boolean", "timestamp", "date", "decimal"})
_INTEGERS = ("int64", "decimal")  # exact integer storage with synopses


def _scale(typ: str | None) -> int | None:
    """The scale of a decimal(p,s) type, None for other types."""
    if typ is None or not typ.startswith("decimal("):
        return None
    return int(typ[typ.index(",") + 1:-1])


def _kind(typ: str | None) -> str | None:
    return "decimal" if _scale(typ) is not None else typ


TEMPORAL = frozenset({"timestamp", "date"})
US_PER_DAY = 86_400_000_000


def mean_instant(total: int, count: int, input_type: str) -> int:
    """AVG of a timestamp (microseconds) or date (days) column: the microsecond in which the exact
    mean instant falls (rounded toward the past, before or after the epoch alike; DuckDB does so
    for dates and truncates toward zero for timestamps); a date's mean is a timestamp (the mean of
    1 and 2 January is noon on the 1st)."""
    return (total * US_PER_DAY if input_type == "date" else total) // count


def decimal_avg(total: int, count: int) -> int:
    """AVG of a decimal(p,s) column: the exact sum / count rounded half away from zero to scale s+4
    (Spark's rule), as an integer scaled by 10**(s+4)."""
    q, r = divmod(abs(total) * 10**4, count)
    q += 2 * r >= count
    return -q if total < 0 else q


class AggregateFunction(ABC):
    name = ""                 # the structured form's name (query.Aggregate.func)
    inputs: frozenset = ANY   # column types it accepts
    exact = True
    removable = True          # a sub-window's contribution can be dropped (ttu-rescan)

    def result_type(self, input_type: str | None) -> str:
        return input_type  # type: ignore[return-value]  # a function without a column overrides this

    # -- access paths (raw rows always work) -----------------------------------------------------
    def probe_ok(self, input_type: str | None) -> bool:
        return False

    def synopsis_ok(self, b, declared: set[str]) -> bool:
        return False

    def key_synopsis_ok(self, b) -> bool:
        return False

    def key_running_ok(self, b) -> bool:
        """Answered from running per-key totals (COUNT(*), COUNT(c), integer SUM(c): key_running.py)
        through read_key_synopsis."""
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

    def finish_unique(self, b, part, keys: np.ndarray, strings) -> np.ndarray:
        """One result per key of a single contribution, whose keys are sorted and unique (one
        sub-window's, or running totals): nothing to merge."""
        return self.finish_groups(b, np.arange(len(keys)), len(keys), [part], keys, strings)

    @abstractmethod
    def over(self, b, values: list) -> Any:
        """The aggregate over a plain list of Python values (the outer query)."""


class Count(AggregateFunction):
    """COUNT(*) counts rows; COUNT(col) the non-null values of col."""

    name = "count"

    def result_type(self, input_type):
        return "int64"

    def probe_ok(self, input_type):
        return True

    def probe(self, b, window, n_q, count):
        return count if b.column is None else window.running_total(_count_key(b.column), n_q)

    def synopsis_ok(self, b, declared):
        return True

    def read_synopsis(self, b):
        column = b.column
        if column is None:
            return lambda sub: sub.rows
        return lambda sub: sub.rows - sub.synopsis.nulls.get(column, 0)

    def key_synopsis_ok(self, b):
        return b.column is None or _kind(b.input_type) in ("int64", "float64", "decimal")

    def key_running_ok(self, b):
        return self.key_synopsis_ok(b)

    def read_key_synopsis(self, b, ks):
        return ks.counts if b.column is None else ks.valid.get(b.column, ks.counts)

    def from_rows(self, b, values, rows, strings):
        return rows if values is None else len(values)

    def finish(self, b, parts, strings):
        return int(sum(parts))

    def from_group_rows(self, b, inverse, groups, values, keys, strings):
        return np.bincount(inverse, minlength=groups).astype(np.int64)

    def finish_groups(self, b, inverse, groups, parts, uniq, strings):
        return grouped_count(inverse, np.concatenate(parts), groups)

    def finish_unique(self, b, part, keys, strings):
        return part.astype(np.int64, copy=False)

    def over(self, b, values):
        return len(values) if b.column is None else sum(v is not None for v in values)


class Sum(AggregateFunction):
    """Exact over integers: SUM(int64) is an int128 (it never wraps; see exact.py)."""

    name = "sum"
    inputs = NUMERIC

    def result_type(self, input_type):
        if _scale(input_type) is not None:
            return f"decimal(38,{_scale(input_type)})"
        return "int128" if input_type in ("int64", "int128") else "float64"

    def probe_ok(self, input_type):
        return _kind(input_type) in _INTEGERS  # running prefix sums are exact only for integers

    def probe(self, b, window, n_q, count):
        return None if window.running_total(_count_key(b.column), n_q) == 0 else window.running_total(b.column, n_q)

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

    def key_running_ok(self, b):
        return _kind(b.input_type) in _INTEGERS  # running float sums are not exact

    def read_key_synopsis(self, b, ks):
        return (ks.sums[b.column], ks.valid.get(b.column, ks.counts))

    def from_rows(self, b, values, rows, strings):
        return (exact_sum(values) if len(values) else 0, len(values))

    def finish(self, b, parts, strings):
        count = sum(p[1] for p in parts)
        return sum(p[0] for p in parts) if count else None

    def from_group_rows(self, b, inverse, groups, values, keys, strings):
        return (grouped_sum(inverse, values, groups), np.bincount(inverse, minlength=groups).astype(np.int64))

    def finish_groups(self, b, inverse, groups, parts, uniq, strings):
        sums = grouped_sum(inverse, _concat([p[0] for p in parts]), groups)
        counts = grouped_count(inverse, np.concatenate([p[1] for p in parts]), groups)
        return _null_where_empty(sums, counts)

    def finish_unique(self, b, part, keys, strings):
        return _null_where_empty(narrow(part[0]), part[1])

    def over(self, b, values):
        values = [v for v in values if v is not None]
        return sum(values) if values else None


class Avg(Sum):
    """The exact sum divided by the count, rounded once to float64 (decimals: exact, see
    decimal_avg; timestamps and dates: the mean instant as a timestamp, see mean_instant)."""

    name = "avg"
    inputs = NUMERIC | TEMPORAL

    def result_type(self, input_type):
        if _scale(input_type) is not None:
            return f"decimal(38,{_scale(input_type) + 4})"  # type: ignore[operator]  # not None: the line above
        return "timestamp" if input_type in TEMPORAL else "float64"

    def synopsis_ok(self, b, declared):
        return b.input_type not in TEMPORAL  # temporal columns carry no sums in the synopses

    def key_synopsis_ok(self, b):
        return b.input_type not in TEMPORAL

    def key_running_ok(self, b):
        return _kind(b.input_type) in _INTEGERS

    @staticmethod
    def _mean(b, total, count):
        if _scale(b.input_type) is not None:
            return decimal_avg(int(total), count)
        return mean_instant(int(total), count, b.input_type) if b.input_type in TEMPORAL else total / count

    def probe(self, b, window, n_q, count):
        count = window.running_total(_count_key(b.column), n_q)
        if count == 0:
            return None
        return self._mean(b, window.running_total(b.column, n_q), count)

    def finish(self, b, parts, strings):
        count = sum(p[1] for p in parts)
        if not count:
            return None
        return self._mean(b, sum(p[0] for p in parts), count)

    def from_group_rows(self, b, inverse, groups, values, keys, strings):
        return (grouped_sum(inverse, values, groups), np.bincount(inverse, minlength=groups).astype(np.int64))

    def finish_groups(self, b, inverse, groups, parts, uniq, strings):
        sums = grouped_sum(inverse, _concat([p[0] for p in parts]), groups)
        counts = grouped_count(inverse, np.concatenate([p[1] for p in parts]), groups)
        return self._means(b, sums, counts)

    def finish_unique(self, b, part, keys, strings):
        return self._means(b, narrow(part[0]), part[1])

    def _means(self, b, sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
        empty = counts == 0
        if _scale(b.input_type) is not None or b.input_type in TEMPORAL:
            return np.array([None if c == 0 else self._mean(b, t, int(c)) for t, c in zip(sums.tolist(), counts.tolist())],
                            dtype=object)
        if empty.any():
            out = ratio(sums, np.where(empty, 1, counts)).astype(object)
            out[empty] = None
            return out
        return ratio(sums, counts)

    def over(self, b, values):
        values = [v for v in values if v is not None]
        if not values:
            return None
        return self._mean(b, sum(values), len(values))


class _Extreme(AggregateFunction):
    """MIN / MAX. Numbers by value; strings by Unicode code point (Python's str order, which is
    also the byte order of UTF-8)."""

    maximum = False
    inputs = ORDERED | {"int128"}

    def probe_ok(self, input_type):
        return _kind(input_type) in ("int64", "float64", "decimal")

    def probe(self, b, window, n_q, count):
        lo, hi = window.interval_minmax(b.column, n_q)
        return hi if self.maximum else lo

    def synopsis_ok(self, b, declared):
        return _kind(b.input_type) in ("int64", "float64", "decimal")

    def read_synopsis(self, b):
        column, maximum = b.column, self.maximum
        return lambda sub: (sub.synopsis.columns[column].max if maximum else sub.synopsis.columns[column].min)

    def from_rows(self, b, values, rows, strings):
        if not len(values):
            return None
        if b.input_type == "string":
            decoded = strings.decode(np.unique(values))
            return max(decoded) if self.maximum else min(decoded)
        out = (values.max() if self.maximum else values.min()).item()
        return bool(out) if b.input_type == "boolean" else out

    def finish(self, b, parts, strings):
        vals = [p for p in parts if p is not None]
        if not vals:
            return None
        return max(vals) if self.maximum else min(vals)

    def from_group_rows(self, b, inverse, groups, values, keys, strings):
        present = np.bincount(inverse, minlength=groups) > 0
        if b.input_type == "string":
            return (_string_group_extreme(inverse, groups, values, strings, self.maximum), present)
        return (_grouped_extreme(self.maximum, inverse, values, groups), present)

    def finish_groups(self, b, inverse, groups, parts, uniq, strings):
        present = np.concatenate([p[1] for p in parts])
        values = np.concatenate([p[0] for p in parts])
        if not present.all():
            inverse, values = inverse[present], values[present]
        found = np.bincount(inverse, minlength=groups) > 0
        if b.input_type == "string":
            codes = _string_group_extreme(inverse, groups, values, strings, self.maximum)
            out = np.empty(groups, dtype=object)
            out[found] = strings.decode(codes[found]) if found.any() else []
        else:
            out = _grouped_extreme(self.maximum, inverse, values, groups)
            if b.input_type == "boolean":
                out = out.astype(bool)
        if not found.all():
            out = out.astype(object)
            out[~found] = None
        return out

    def over(self, b, values):
        values = [v for v in values if v is not None]
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
        return lambda sub: _without_null_key(sub.synopsis.by_key[column].keys)

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
        return len({v for v in values if v is not None})


class Quantile(AggregateFunction):
    """Exact discrete quantile: the smallest v such that at least ceil(q*N) of the N values are
    <= v (q = 0 gives MIN). Holistic: contributions keep the values."""

    name = "quantile"
    inputs = NUMERIC | TEMPORAL  # a timestamp's or date's quantile is one of its values: same type

    def from_rows(self, b, values, rows, strings):
        return values

    def finish(self, b, parts, strings):
        vals = np.concatenate(parts) if parts else np.empty(0)
        if len(vals) == 0:
            return None
        k = quantile_index(b.q, len(vals))
        return np.partition(vals, k)[k].item()

    def from_group_rows(self, b, inverse, groups, values, keys, strings):
        # sorted by value here, one sub-window per scheduler step, so the final merge sorts runs
        order = np.argsort(values, kind="stable")
        return (keys[order], values[order])

    def finish_groups(self, b, inverse, groups, parts, uniq, strings):
        """Each group's values in order, without a lexsort of the whole window (the final merge runs
        in one step and holds back a due slide): a stable sort by value of the concatenated runs
        (each part is sorted by value: timsort merges them), then a stable sort by group, a radix
        sort when the group numbers fit in 16 bits."""
        k = np.concatenate([p[0] for p in parts])
        v = np.concatenate([p[1] for p in parts])
        by_value = np.argsort(v, kind="stable")
        group = np.searchsorted(uniq, k[by_value])
        by_group = np.argsort(group.astype(np.uint16) if groups <= 1 << 16 else group, kind="stable")
        v = v[by_value][by_group]
        counts = np.bincount(group, minlength=groups)
        starts = np.cumsum(counts) - counts
        ranks = np.array([quantile_index(b.q, int(c)) for c in counts], dtype=np.int64)
        empty = counts == 0
        if empty.any():  # a group with only nulls
            out = np.empty(groups, dtype=object)
            full = ~empty
            out[full] = v[starts[full] + ranks[full]]
            return out
        return v[starts + ranks] if groups else v[:0]

    def over(self, b, values):
        values = [v for v in values if v is not None]
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
def _count_key(column: str) -> str:
    return "#" + column  # window.count_key (not imported: window imports this module's users)


def _null_where_empty(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per-group sums, None where a group had no value (only nulls)."""
    empty = counts == 0
    if not empty.any():
        return sums
    out = sums.astype(object)
    out[empty] = None
    return out


def _without_null_key(keys: np.ndarray) -> np.ndarray:
    """A synopsis' distinct keys without the null group's key (synopsis.keys_with_nulls)."""
    if keys.dtype == np.int32:
        return keys[keys >= 0] if len(keys) and keys[0] < 0 else keys
    if keys.dtype == np.int8:
        return keys[keys != 2]
    if keys.dtype.kind == "O":
        return keys[keys != NULL_KEY]
    return keys


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
    if not len(uniq):
        return np.full(groups, -1, dtype=np.int64)
    best = _grouped_extreme(maximum, inverse, rank[local], groups)
    found = np.bincount(inverse, minlength=groups) > 0
    out = uniq[order][np.where(found, best, 0)].astype(np.int64)
    out[~found] = -1  # a group without a value (only nulls)
    return out


def _unique_pairs(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if len(keys) == 0:
        return keys, values
    order = np.lexsort((values, keys))
    k, v = keys[order], values[order]
    keep = np.ones(len(k), dtype=bool)
    keep[1:] = (k[1:] != k[:-1]) | (v[1:] != v[:-1])
    return k[keep], v[keep]
