"""The aggregate function registry: one class per function.

Each class says which column types it takes and what it returns, which access paths can answer
it (probe: window-level running/interval synopses; synopsis: per-sub-window basic interval or
per-key synopses; window: raw rows), what one sub-window contributes, how contributions combine
(`finish`, in version order: see aggregates.Partial), how it aggregates a plain list (the outer
query over a sub-query's rows), and which of a join's aggregate paths take it (store/join/: per-key
partials, the 8.3.2 join synopsis; raw joined rows always work). FUNCTIONS is the only list of
aggregates: the parser's keywords and error hint (SQL_NAMES), the binder, the protobuf conversion
(server/convert_query.py: an enum value where the proto has one, else the function's name) and the join
paths all ask it. Adding a function means writing one class and calling register(); see "Adding an
aggregate" in docs/architecture.md.

A bound aggregate `b` (binder.BoundAggregate) carries the column, its type and QUANTILE's q.
String columns hold dictionary codes; `strings` (the stream's StringDictionary) decodes them.

Nulls: the planner hands every function only the non-null values of its column (and, grouped, the
rows' group indices of those values), so COUNT(col) counts non-nulls, COUNT(*) rows, and a function
of no value gives NULL (None; per group too). `over` skips None itself.
"""
from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from decimal import Decimal
from fractions import Fraction
from typing import Any, Callable

import numpy as np

from .exact import (INT64_MAX, INT64_MIN, exact_sum, grouped_count, grouped_sum, max_abs, narrow, range_sums, ratio,
                    run_sums)
from .kernels import (concat_sums, grouped_extreme, null_where_empty, range_extremes, run_extremes, string_group_extreme,
                      unique_pairs,
                      weighted, without_null_key)

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


class Runs:
    """combine_runs' reader: per column of the contributions' combine_columns its range reader
    (exact.RangeSums, kernels.RangeExtremes: one value per run i[x]:j[x]), and how one run's
    contribution (from_group_rows' form) is made of those values. `extend` appends more
    contributions (their combine_columns), in place, so runs may end past the old ones; False where a
    range reader cannot (then make it again over every contribution)."""

    __slots__ = ("ranges", "form")

    def __init__(self, ranges: list, form: Callable[..., Any] | None = None):
        self.ranges, self.form = ranges, form

    def __call__(self, i: np.ndarray, j: np.ndarray) -> Any:
        got = [r(i, j) for r in self.ranges]
        return got[0] if self.form is None else self.form(*got)

    def extend(self, columns: tuple[np.ndarray, ...]) -> bool:
        assert len(columns) == len(self.ranges), "one column per range reader"
        return all(r.extend(c) for r, c in zip(self.ranges, columns))


class AggregateFunction(ABC):
    name = ""                 # the structured form's name (query.Aggregate.func)
    sql_names: tuple[str, ...] | None = None  # the words the query text calls it by (None: its name)
    inputs: frozenset = ANY   # column types it accepts
    exact = True
    removable = True          # a sub-window's contribution can be dropped (ttu-rescan)
    # one sub-window's contribution from rows is a few scalars, whatever its rows: a window scan
    # may keep it in the sub-window's memo (memo.py); holistic ones keep values, so never
    bounded_contribution = False

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

    # the readers of those paths are capabilities (the classes below), only called where the check
    # above said yes; tests/test_aggregate_capabilities.py checks that a class saying yes has them
    # -- one sub-window's raw rows ---------------------------------------------------------------
    @abstractmethod
    def from_rows(self, b, values: np.ndarray | None, rows: int, strings) -> Any:
        """One sub-window's contribution from its selected raw values (None for COUNT(*))."""

    @abstractmethod
    def finish(self, b, parts: list, strings) -> Any:
        """The result from the contributions of every sub-window read, in version order."""

    def runs(self, b, values: np.ndarray | None) -> Callable[[int, int], Any] | None:
        """from_rows' contribution of every run values[i:j] of one sub-window's selected values in
        time order (values None for COUNT(*): i and j count rows), as a function of (i, j) that costs
        O(1) or so after one pass over `values`: Scotty's aggregate store, so that the slices of
        windows of any length are read without a scan each (store/slicing.py). None (the default):
        slices are read from their rows; e.g. float sums, whose rounding depends on the additions."""
        return None

    def combine_columns(self, b, parts: list) -> tuple[np.ndarray, ...] | None:
        """Ungrouped contributions (from_rows' form) as arrays with one entry per contribution, the
        form combine_runs reads; None where they do not combine by runs (then each window's
        contributions are combined by `combine`). Made once per sealed sub-window's slices and
        concatenated over the window read (store/slicing_shared.py)."""
        return None

    def run_columns(self, b, values: np.ndarray | None, bounds: np.ndarray) -> tuple[np.ndarray, ...] | None:
        """combine_columns of the from_rows contributions of the consecutive runs
        values[bounds[x]:bounds[x + 1]] of one sub-window's selected values in time order (values
        None for COUNT(*): bounds count rows), in one vectorised pass: a sub-window cut at the edges
        of many windows at once (store/slicing_shared.py). None: its runs are read one by one."""
        return None

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

    def over_column(self, b, values: np.ndarray) -> Any:
        """What over() gives for values.tolist() (an inner query's aggregate column, in any order
        of its rows), computed on the array without making the rows; NotImplemented where over()
        alone is exact (then the caller makes the rows)."""
        return NotImplemented

    # -- joins (store/join/): which aggregate paths answer it, with from_group_rows' partials -----------
    def join_by_key_ok(self, b) -> bool:
        """Per-key partials answer it over a two-way equi-join, never forming the joined rows
        (join/by_key.py): the key side's from_group_rows partial per join key, taken once per row of
        the other side, merges through finish_groups with weighted_rows' partials of that side."""
        return False

    def reduce_rows(self, b, part) -> Any:
        """A per-row partial (weighted_rows' form) reduced to one entry, or None to leave it to
        finish_groups: the ungrouped per-key join answer reduces the rows first (cheaper)."""
        return None

    def join_synopsis_ok(self, b) -> bool:
        """Intervals of pre-aggregated joined rows answer it exactly (join/synopsis.py, thesis
        8.3.2): per interval the from_group_rows partial, merged by finish_groups in any order of
        intervals with the same result (so not float sums: their rounding depends on the order)."""
        return False

    # -- contributions combined into one (the shared scan of periodic queries, txn/sharing/) ------
    def combine_ok(self, b) -> bool:
        """Contributions combine into one contribution of the same form (combine, combine_groups)
        whose finish is the finish of them all, in any order of sub-windows with the same result:
        distributive and algebraic aggregates over exact values (the intervals of join_synopsis_ok).
        A youngest-to-oldest scan then answers every shorter window on the way."""
        return self.join_synopsis_ok(b)

    def invertible(self, b) -> bool:
        """Contributions have exact inverses under combine (Inverts.negate): a window's combined
        contribution slides by combining in the sub-windows that entered and the negations of those
        that left (Scotty's `invert`; txn/sharing/combined.py keeps a shared reader's so, thesis
        8.4.3's cost of the intervals accessed). Only where combine is exact over integers (COUNT,
        integer SUM and AVG): a float sum minus a part is not the sum of the rest."""
        return False


# -- optional capabilities: an aggregate class has a reader of a path only where it can be taken --------
class Probes(ABC):
    """Answered from the window's running totals (probe_ok)."""

    @abstractmethod
    def probe(self, b, window, n_q: int, count: int) -> Any:
        """The answer from the window's running totals (`count`: its rows). Needed when probe_ok."""


class ReadsSynopsis(ABC):
    """Answered from each sub-window's synopsis (synopsis_ok)."""

    @abstractmethod
    def read_synopsis(self, b) -> Callable[[Any], Any]:
        """The function reading one sub-window's partial from its synopsis. Needed when synopsis_ok."""


class ReadsKeySynopsis(ABC):
    """Answered per key from per-key synopses or running totals (key_synopsis_ok, key_running_ok)."""

    @abstractmethod
    def read_key_synopsis(self, b, ks) -> Any:
        """One sub-window's per-key partial from its per-key synopsis (or running totals) `ks`.
        Needed when key_synopsis_ok or key_running_ok."""


class CombinesRuns(ABC):
    """Many windows' runs of slice contributions merged at once (combine_columns not None)."""

    @abstractmethod
    def combine_runs(self, b, columns: tuple[np.ndarray, ...]) -> "Runs":
        """`combine` of each run parts[i[x]:j[x]] (i < j) of contributions in time order, for arrays
        of runs i, j at once, given the contributions' combine_columns: one contribution per run in
        from_group_rows' form (a key per run), which `finish_unique` lowers to one result per run.
        Scotty's shared merge of slice aggregates, so that many concurrent windows over the same
        slices cost a few array operations, not a merge each: prefix sums where the combine is
        invertible (COUNT, exact SUM/AVG), a sparse table for MIN/MAX (kernels.range_extremes).
        The reader extends with more contributions' columns (Runs.extend), so one over a sliding
        sequence of slices is kept across slides. Needed where combine_columns is not None."""


class JoinsByKey(ABC):
    """Per-key partials answer it over an equi-join without forming the joined rows (join_by_key_ok)."""

    @abstractmethod
    def weighted_rows(self, b, values: np.ndarray | None, valid: np.ndarray | None, weights: np.ndarray) -> Any:
        """A from_group_rows-form partial with one entry per row, each row standing for `weights`
        joined rows (those with weight 0 are already left out); `valid` masks nulls (None: none),
        `values` is None for COUNT(*). Needed when join_by_key_ok."""


class Combines(ABC):
    """Contributions combine into one of the same form (combine_ok)."""

    @abstractmethod
    def combine(self, b, parts: list, strings) -> Any:
        """Ungrouped contributions (from_rows' form) combined into one of that form."""

    @abstractmethod
    def combine_groups(self, b, inverse: np.ndarray, groups: int, parts: list, strings) -> Any:
        """Per-key contributions (from_group_rows' form) combined into one per key of 0..groups-1;
        `inverse` maps the concatenated contributions to them."""


class Inverts(ABC):
    """Contributions have inverses under combine (invertible)."""

    @abstractmethod
    def negate(self, b, part) -> Any:
        """The contribution that combined with `part` gives the empty one (a zero count and sum):
        from_rows' or from_group_rows' form, the same keys. Needed when invertible."""


class Count(AggregateFunction, Probes, ReadsSynopsis, ReadsKeySynopsis, CombinesRuns, JoinsByKey, Combines, Inverts):
    """COUNT(*) counts rows; COUNT(col) the non-null values of col."""

    name = "count"
    bounded_contribution = True

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

    def runs(self, b, values):
        return lambda i, j: j - i

    def finish(self, b, parts, strings):
        return int(sum(parts))

    def from_group_rows(self, b, inverse, groups, values, keys, strings):
        return np.bincount(inverse, minlength=groups).astype(np.int64)

    def finish_groups(self, b, inverse, groups, parts, uniq, strings):
        return grouped_count(inverse, np.concatenate(parts), groups)

    def combine(self, b, parts, strings):
        return int(sum(parts))

    def combine_columns(self, b, parts):
        return (np.asarray(parts, dtype=np.int64),)  # counts of rows: never beyond int64

    def run_columns(self, b, values, bounds):
        return (np.diff(bounds).astype(np.int64, copy=False),)

    def combine_runs(self, b, columns):
        return Runs([range_sums(columns[0])])

    def combine_groups(self, b, inverse, groups, parts, strings):
        return grouped_count(inverse, np.concatenate(parts), groups)

    def invertible(self, b):
        return True

    def negate(self, b, part):
        return -part  # (a count of rows: never INT64_MIN)

    def finish_unique(self, b, part, keys, strings):
        return part.astype(np.int64, copy=False)

    def over(self, b, values):
        return len(values) if b.column is None else sum(v is not None for v in values)

    def join_by_key_ok(self, b):
        return True

    def weighted_rows(self, b, values, valid, weights):
        return weights if valid is None else np.where(valid, weights, 0)

    def reduce_rows(self, b, part):
        return np.array([int(part.sum())], dtype=np.int64)

    def join_synopsis_ok(self, b):
        return True


class Sum(AggregateFunction, Probes, ReadsSynopsis, ReadsKeySynopsis, CombinesRuns, JoinsByKey, Combines, Inverts):
    """Exact over integers: SUM(int64) is an int128 (it never wraps; see exact.py)."""

    name = "sum"
    bounded_contribution = True
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

    def runs(self, b, values):
        if values is None or values.dtype.kind != "i":  # int64 storage only (float sums: order-dependent)
            return None
        total = run_sums(values)
        return lambda i, j: (total(i, j), j - i)

    def finish(self, b, parts, strings):
        count = sum(p[1] for p in parts)
        return sum(p[0] for p in parts) if count else None

    def from_group_rows(self, b, inverse, groups, values, keys, strings):
        return (grouped_sum(inverse, values, groups), np.bincount(inverse, minlength=groups).astype(np.int64))

    def finish_groups(self, b, inverse, groups, parts, uniq, strings):
        sums = grouped_sum(inverse, concat_sums([p[0] for p in parts]), groups)
        counts = grouped_count(inverse, np.concatenate([p[1] for p in parts]), groups)
        return null_where_empty(sums, counts)

    def finish_unique(self, b, part, keys, strings):
        return null_where_empty(narrow(part[0]), part[1])

    def combine(self, b, parts, strings):
        return (sum(p[0] for p in parts), sum(p[1] for p in parts))

    def combine_columns(self, b, parts):
        if not self.combine_ok(b):
            return None
        try:  # an exact sum beyond int64 (a Python int): those windows combine with `combine`
            sums = np.asarray([p[0] for p in parts], dtype=np.int64)
        except OverflowError:
            return None
        return sums, np.asarray([p[1] for p in parts], dtype=np.int64)

    def run_columns(self, b, values, bounds):
        if values is None or values.dtype.kind != "i" or not self.combine_ok(b):
            return None
        counts = np.diff(bounds).astype(np.int64, copy=False)
        if not len(values):
            return np.zeros(len(counts), dtype=np.int64), counts
        if max_abs(int(values.min()), int(values.max())) * len(values) > INT64_MAX:
            return None  # (an int64 sum could wrap: run_sums' halves, one run at a time)
        sums = np.zeros(len(counts), dtype=np.int64)
        present = counts > 0
        if present.any():  # each non-empty run summed in one pass (the empty ones between add nothing)
            sums[present] = np.add.reduceat(values[:bounds[-1]], bounds[:-1][present], dtype=np.int64)
        return sums, counts

    def combine_runs(self, b, columns):
        return Runs([range_sums(columns[0]), range_sums(columns[1])], lambda total, count: (total, count))  # (exact)

    def combine_groups(self, b, inverse, groups, parts, strings):
        return (grouped_sum(inverse, concat_sums([p[0] for p in parts]), groups),
                grouped_count(inverse, np.concatenate([p[1] for p in parts]), groups))

    def invertible(self, b):
        return self.join_synopsis_ok(b)  # exact integer sums (and AVG's: a sum and a count)

    def negate(self, b, part):
        total, count = part
        if isinstance(total, np.integer):
            total = int(total)
        if isinstance(total, np.ndarray) and total.dtype.kind == "i" and len(total) and total.min() == INT64_MIN:
            total = total.astype(object)  # (-INT64_MIN is beyond int64: exact as Python ints)
        return -total, -count

    def over(self, b, values):
        values = [v for v in values if v is not None]
        return sum(values) if values else None

    def join_by_key_ok(self, b):
        return True

    def weighted_rows(self, b, values, valid, weights):
        counted = weights if valid is None else np.where(valid, weights, 0)
        return (weighted(values if valid is None else np.where(valid, values, 0), weights), counted)

    def reduce_rows(self, b, part):
        total = exact_sum(part[0]) if len(part[0]) else 0
        out = np.array([total], dtype=part[0].dtype if part[0].dtype.kind == "f" else
                       np.int64 if INT64_MIN <= total <= INT64_MAX else object)
        return out, np.array([int(part[1].sum())], dtype=np.int64)

    def join_synopsis_ok(self, b):
        return _kind(b.input_type) in _INTEGERS  # exact sums; float sums depend on the order of addition


class Avg(Sum):
    """The exact sum divided by the count, rounded once to float64 (decimals too, as DuckDB types
    them: expr_decimal.mean, which expressions use; timestamps and dates: the mean instant as a
    timestamp, see mean_instant)."""

    name = "avg"
    inputs = NUMERIC | TEMPORAL

    def result_type(self, input_type):
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
            from .expr_decimal import mean
            return mean(int(total), count, _scale(b.input_type))  # type: ignore[arg-type]  # a decimal
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
        sums = grouped_sum(inverse, concat_sums([p[0] for p in parts]), groups)
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


class _Extreme(AggregateFunction, Probes, ReadsSynopsis, CombinesRuns, JoinsByKey, Combines):
    """MIN / MAX. Numbers by value; strings by Unicode code point (Python's str order, which is
    also the byte order of UTF-8)."""

    maximum = False
    inputs = ORDERED | {"int128"}
    bounded_contribution = True

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

    def runs(self, b, values):
        if values is None or b.input_type == "string" or values.dtype.kind not in "iu":  # (floats: NaN, -0.0)
            return None
        if not len(values):  # (every run of no values is empty)
            return lambda i, j: None
        extreme, boolean = run_extremes(values, self.maximum), b.input_type == "boolean"
        return lambda i, j: None if i == j else bool(extreme(i, j)) if boolean else extreme(i, j)

    def finish(self, b, parts, strings):
        vals = [p for p in parts if p is not None]
        if not vals:
            return None
        return max(vals) if self.maximum else min(vals)

    def from_group_rows(self, b, inverse, groups, values, keys, strings):
        present = np.bincount(inverse, minlength=groups) > 0
        if b.input_type == "string":
            return (string_group_extreme(inverse, groups, values, strings, self.maximum), present)
        return (grouped_extreme(self.maximum, inverse, values, groups), present)

    def finish_groups(self, b, inverse, groups, parts, uniq, strings):
        present = np.concatenate([p[1] for p in parts])
        values = np.concatenate([p[0] for p in parts])
        if not present.all():
            inverse, values = inverse[present], values[present]
        found = np.bincount(inverse, minlength=groups) > 0
        if b.input_type == "string":
            codes = string_group_extreme(inverse, groups, values, strings, self.maximum)
            out = np.empty(groups, dtype=object)
            out[found] = strings.decode(codes[found]) if found.any() else []
        else:
            out = grouped_extreme(self.maximum, inverse, values, groups)
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

    def combine(self, b, parts, strings):
        return self.finish(b, parts, strings)

    def combine_columns(self, b, parts):
        if b.input_type == "boolean" or not self.combine_ok(b):
            return None
        present = np.asarray([p is not None for p in parts], dtype=np.int64)
        identity = INT64_MIN if self.maximum else INT64_MAX  # (an empty slice's None: never picked)
        try:
            values = np.asarray([identity if p is None else p for p in parts], dtype=np.int64)
        except OverflowError:  # (an int128 column)
            return None
        return values, present

    def run_columns(self, b, values, bounds):
        if values is None or values.dtype.kind not in "iu" or b.input_type == "boolean" or not self.combine_ok(b):
            return None
        counts = np.diff(bounds)
        present = counts > 0
        out = np.full(len(counts), INT64_MIN if self.maximum else INT64_MAX, dtype=np.int64)
        if present.any():  # each non-empty run reduced (the empty ones between add nothing)
            op = np.maximum if self.maximum else np.minimum
            out[present] = op.reduceat(values[:bounds[-1]], bounds[:-1][present])
        return out, present.astype(np.int64)

    def combine_runs(self, b, columns):
        return Runs([range_extremes(columns[0], self.maximum), range_sums(columns[1])],
                    lambda extreme, present: (extreme, present > 0))

    def finish_unique(self, b, part, keys, strings):
        if b.input_type == "string" or part[0].dtype.kind not in "iufb":  # (codes: decoded and ranked by finish_groups)
            return super().finish_unique(b, part, keys, strings)
        values, present = part  # one contribution, one entry per key: each key's extreme is its entry
        out = values.astype(bool) if b.input_type == "boolean" else values.copy()  # (never the partial itself)
        if not present.all():
            out = out.astype(object)
            out[~present] = None
        return out

    def combine_groups(self, b, inverse, groups, parts, strings):
        present = np.concatenate([p[1] for p in parts])
        values = np.concatenate([p[0] for p in parts])
        if not present.all():
            inverse, values = inverse[present], values[present]
        return (grouped_extreme(self.maximum, inverse, values, groups), np.bincount(inverse, minlength=groups) > 0)

    def join_by_key_ok(self, b):
        return True

    def weighted_rows(self, b, values, valid, weights):
        return (values, np.ones(len(values), dtype=bool) if valid is None else valid)

    def reduce_rows(self, b, part):
        if b.input_type == "string":
            return None  # codes are not ordered like their strings: finish_groups decodes
        values, present = part
        if not present.all():
            values = values[present]
        if not len(values):
            return values[:0].copy(), np.zeros(0, dtype=bool)
        ext = values.max() if self.maximum else values.min()
        return np.array([ext], dtype=values.dtype), np.ones(1, dtype=bool)

    def join_synopsis_ok(self, b):
        return _kind(b.input_type) in _INTEGERS or b.input_type in TEMPORAL  # integers: exact, no decoding


class Min(_Extreme):
    name = "min"


class Max(_Extreme):
    name = "max"
    maximum = True


class CountDistinct(AggregateFunction, ReadsSynopsis):
    name = "count_distinct"
    sql_names = ()  # written COUNT(DISTINCT col)

    def result_type(self, input_type):
        return "int64"

    def synopsis_ok(self, b, declared):
        return b.column in declared  # the per-key synopsis lists the distinct keys

    def read_synopsis(self, b):
        column = b.column
        return lambda sub: without_null_key(sub.synopsis.by_key[column].keys)

    def from_rows(self, b, values, rows, strings):
        return np.unique(values)

    def finish(self, b, parts, strings):
        return int(len(np.unique(np.concatenate(parts)))) if parts else 0

    def from_group_rows(self, b, inverse, groups, values, keys, strings):
        return unique_pairs(keys, values)

    def finish_groups(self, b, inverse, groups, parts, uniq, strings):
        k, _ = unique_pairs(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
        return np.bincount(np.searchsorted(uniq, k), minlength=groups).astype(np.int64)

    def over(self, b, values):
        return len({v for v in values if v is not None})


class Quantile(AggregateFunction):
    """Exact discrete quantile: the smallest v such that at least ceil(q*N) of the N values are
    <= v (q = 0 gives MIN). Holistic: contributions keep the values."""

    name = "quantile"
    sql_names = ("quantile", "median")  # MEDIAN(c) is QUANTILE(c, 0.5)
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

    def over_column(self, b, values):
        """An integer column holds no NULL and its order does not matter: the value at the
        quantile's rank, selected (np.partition, as finish) rather than sorted."""
        if values.dtype.kind not in "iu":
            return NotImplemented
        if len(values) == 0:
            return None
        k = quantile_index(b.q, len(values))
        return np.partition(values, k)[k].item()


FUNCTIONS: dict[str, AggregateFunction] = {}
SQL_NAMES: dict[str, str] = {}  # a word of the query text -> the function it calls, in the order errors list them
_NAME = re.compile(r"[a-z][a-z0-9_]*")


def register(fn: AggregateFunction) -> AggregateFunction:
    """Add an aggregate function: from then on the parser, the binder, the protobuf conversion and
    the join paths know it by its name (and its sql_names). Refuses a name already taken."""
    words = (fn.name,) if fn.sql_names is None else tuple(fn.sql_names)
    for word in (fn.name, *words):
        if not isinstance(word, str) or not _NAME.fullmatch(word):
            raise ValueError(f"an aggregate's name is a lower-case word, not {word!r}")
    if fn.name in FUNCTIONS or any(w in SQL_NAMES for w in words):
        raise ValueError(f"an aggregate named {fn.name!r} is registered already")
    FUNCTIONS[fn.name] = fn
    for w in words:
        SQL_NAMES[w] = fn.name
    return fn


def unregister(name: str) -> None:
    """Remove the aggregate `name` (and the words that call it) from the registry."""
    del FUNCTIONS[name]
    for w in [w for w, f in SQL_NAMES.items() if f == name]:
        del SQL_NAMES[w]


for _fn in (Count(), Sum(), Avg(), Min(), Max(), CountDistinct(), Quantile()):
    register(_fn)


def quantile_index(q: Decimal | float, n: int) -> int:
    """0-based rank of the exact discrete quantile: the smallest v with ceil(q*n) values <= v,
    q taken as the exact decimal written (a float as its shortest decimal)."""
    exact = Fraction(q) if isinstance(q, Decimal) else Fraction(repr(float(q)))
    return max(1, math.ceil(exact * n)) - 1


# -- helpers -------------------------------------------------------------------------------------------
def _count_key(column: str) -> str:
    return "#" + column  # window.count_key (not imported: window imports this module's users)


from . import approx as _approx  # noqa: E402,F401  # registers APPROX_QUANTILE, APPROX_COUNT_DISTINCT, APPROX_TOP_K
