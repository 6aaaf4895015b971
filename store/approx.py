"""The approximate aggregates answered from per-sub-window sketches: APPROX_QUANTILE (KLL),
APPROX_COUNT_DISTINCT (HLL or CPC) and APPROX_TOP_K (frequent items), under the names DuckDB and
Spark use. One class each, registered in functions.FUNCTIONS.

A column answers one of them only where the stream declares a sketch of that family on it
(WindowSpec.sketches, sketch_columns.py). A sketch covers every row of its sub-window, so these
aggregates take no WHERE and no GROUP BY; the other aggregates of the same select list are answered
as usual. Each sub-window contributes its sketch, and a query merges them so that the answer
does not depend on the order of the sub-windows: the library's HLL and CPC unions and its
frequent-items merge are not commutative bit for bit, so their sketches are merged in the order of
their serialized bytes (canonical); KLL sketches are merged by pooling their retained weighted
items (no further compaction, so no random bits at query time), and the quantile is read from the
pooled items as KLL reads its own.

Every result is an Estimate: the value and its ErrorBound, which the planner moves into the
answer's `bounds` (one per approximate cell).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import numpy as np

from . import sketch_columns
from .errors import QueryError
from .functions import AggregateFunction, ReadsSynopsis, quantile_index, register
from .sketch_columns import FrequentSketch
from .sketches import CONFIDENCE_STD, CpcDistinct, HllDistinct, KllQuantiles

KLL_CONFIDENCE = 0.99  # the library's normalized rank error holds with 99% confidence
DISTINCT_STD = 2       # APPROX_COUNT_DISTINCT's bounds: 2 standard deviations (95.45%)


@dataclass(frozen=True)
class ErrorBound:
    """How far an approximate cell may be from the truth.

    APPROX_QUANTILE: `rank_error` (normalized): the value's true rank in the window lies within
    q +- rank_error with `confidence`. APPROX_COUNT_DISTINCT: the true count lies in [lower, upper]
    with `confidence`. APPROX_TOP_K: the key's true count lies in [lower, upper] (confidence 1),
    `estimate` is the sketch's estimate of it. APPROXIMATE over top-k lists (sketch "top-k lists",
    frequent_query.py): the key's true COUNT or SUM lies in [lower, upper]; `delta` as there."""

    sketch: str
    confidence: float
    rank_error: float | None = None
    estimate: float | None = None
    lower: float | None = None
    upper: float | None = None
    delta: float | None = None  # APPROXIMATE from top-k lists: the most an unlisted key can have


@dataclass(frozen=True)
class Estimate:
    """An approximate aggregate's result; APPROX_TOP_K's value is a list of (key, ErrorBound)."""

    value: Any
    bound: ErrorBound | None
    # the sub-windows' sketches it was computed from and their (kind, size, input type): what
    # merged_sketch() merges when a partitioned stream's client asks for the window's sketch
    parts: tuple = field(default=(), compare=False, repr=False)
    declared: tuple | None = field(default=None, compare=False, repr=False)


class _SketchFunction(AggregateFunction, ReadsSynopsis):
    """Answered from the column's declared sketch of `family`; contributions are sketches."""

    family = ""
    exact = False

    def synopsis_ok(self, b, declared):
        return True  # the binder has checked the sketch is declared

    def read_synopsis(self, b):
        key = sketch_columns.sketch_key(b.column, b.sketch[0])
        return lambda sub: sub.synopsis.sketches[key]

    def _declared(self, b) -> tuple[str, int]:
        kind = sketch_columns.FAMILY_KINDS[self.family][0]
        return b.sketch or (kind, sketch_columns.KINDS[kind][1])

    def from_rows(self, b, values, rows, strings):
        kind, size = self._declared(b)
        return sketch_columns.build_one(kind, size, values, b.input_type, strings)

    def over(self, b, values):
        kind, size = self._declared(b)
        kept = [v for v in values if v is not None]
        column = np.empty(len(kept), dtype=object) if b.input_type == "string" else np.asarray(kept)
        if b.input_type == "string":
            column[:] = kept
        return self.finish(b, [sketch_columns.build_one(kind, size, column, b.input_type, None)], None)

    def from_group_rows(self, b, inverse, groups, values, keys, strings):
        raise QueryError(f"{self.name} takes no GROUP BY")  # (the binder refuses it first)

    def finish_groups(self, b, inverse, groups, parts, uniq, strings):
        raise QueryError(f"{self.name} takes no GROUP BY")  # (the binder refuses it first)


_KLL_ERROR: dict[int, float] = {}  # k -> the library's normalized rank error (one estimate)


class ApproxQuantile(_SketchFunction):
    """APPROX_QUANTILE(col, q): the value at normalized rank q of the window's values, from KLL."""

    name = "approx_quantile"
    family = "quantile"
    inputs = frozenset({"int64", "float64"})

    def result_type(self, input_type):
        return input_type

    def finish(self, b, parts, strings):
        k = self._declared(b)[1]
        error = _KLL_ERROR.get(k) or _KLL_ERROR.setdefault(k, KllQuantiles.build(np.empty(0), k).sketch
                                                           .normalized_rank_error(False))
        held = [p.weighted_items() for p in parts]  # (items, weights) retained by each sketch
        src = {"parts": tuple(parts), "declared": (*self._declared(b), b.input_type)}
        if not any(len(items) for items, _ in held):
            return Estimate(None, ErrorBound("kll", KLL_CONFIDENCE, rank_error=error), **src)
        pooled = np.concatenate([items for items, _ in held])
        weights = np.concatenate([w for _, w in held])
        order = np.argsort(pooled, kind="stable")
        values, weights = pooled[order], weights[order]
        cum = np.cumsum(weights)
        n = int(cum[-1])
        v = float(values[int(np.searchsorted(cum, quantile_index(b.q, n) + 1))])
        return Estimate(int(v) if b.input_type == "int64" else v, ErrorBound("kll", KLL_CONFIDENCE, rank_error=error),
                        **src)


class ApproxCountDistinct(_SketchFunction):
    """APPROX_COUNT_DISTINCT(col): the estimate rounded to an integer, from HLL or CPC."""

    name = "approx_count_distinct"
    family = "distinct"

    def result_type(self, input_type):
        return "int64"

    def finish(self, b, parts, strings):
        kind, size = self._declared(b)
        cls = HllDistinct if kind == "hll" else CpcDistinct
        merged = cls.merged(canonical(parts), size)
        est = merged.estimate(DISTINCT_STD)
        return Estimate(int(round(est.estimate)), ErrorBound(kind, CONFIDENCE_STD[DISTINCT_STD], estimate=est.estimate,
                                                             lower=est.lower, upper=est.upper),
                        parts=(merged,), declared=(kind, size, b.input_type))


class ApproxTopK(_SketchFunction):
    """APPROX_TOP_K(col, k): the at most k most frequent values of the window (no false positives:
    each listed value's count is provably above the sketch's error), heaviest first, one answer row
    each; the bound of each gives its estimated count and the interval its true count lies in."""

    name = "approx_top_k"
    family = "frequent"
    inputs = frozenset({"int64", "string", "boolean"})

    def finish(self, b, parts, strings):
        kind, size = self._declared(b)
        ordered = canonical(parts)
        merged = FrequentSketch.merged(ordered, b.input_type, size)
        out = []
        for key, est, _, _ in merged.top(2**62):
            # the bounds summed over the parts: the library's merge drops the error of a part whose
            # map was purged empty, so the merged sketch's own bounds can miss the true count
            lo = sum(p.sketch.get_lower_bound(key) for p in ordered)
            hi = sum(p.sketch.get_upper_bound(key) for p in ordered)
            if lo <= hi - lo:  # no false positives: listed only when provably above the error
                continue
            out.append((bool(key) if b.input_type == "boolean" else key,
                        ErrorBound("frequent", 1.0, estimate=float(est), lower=float(lo), upper=float(hi))))
            if len(out) == int(b.q):
                break
        return Estimate(out, None, parts=tuple(ordered), declared=(kind, size, b.input_type))


def merged_sketch(e: Estimate) -> tuple[str, int, bytes, float]:
    """(kind, size, serialized sketch, dropped error) of the window's sketch behind `e`, merged
    with the library's merge: KLL sketches by the library's merge (which compacts with random bits,
    within the same rank error), HLL and CPC by their union in canonical order, frequent items into
    a map that purges nothing. The library's frequent-items merge skips a part purged empty and so
    its error: the dropped error is the sum of those parts' maximum errors, which every key's upper
    bound must add."""
    kind, size, typ = e.declared  # type: ignore[misc]  # set by every sketch function's finish
    parts = list(e.parts)
    if kind == "kll":
        return kind, size, KllQuantiles.merged(parts, size).to_bytes(), 0.0
    if kind in ("hll", "cpc"):
        cls = HllDistinct if kind == "hll" else CpcDistinct
        return kind, size, (parts[0] if len(parts) == 1 else cls.merged(canonical(parts), size)).to_bytes(), 0.0
    ordered = canonical(parts)
    absent = "" if typ == "string" else 0  # an empty sketch's upper bound of any key is its error
    dropped = sum(float(p.sketch.get_upper_bound(absent)) for p in ordered if p.sketch.is_empty() and p.total_weight)
    return kind, size, FrequentSketch.merged(ordered, typ, size).to_bytes(), dropped


def sketch_cells(rows: list[tuple]) -> list[tuple[int, Estimate]]:
    """(column, Estimate) of each sketch aggregate of an ungrouped answer's row (before
    estimates_out): what a partition returns its merged sketches for."""
    if not rows:
        return []
    return [(i, v) for i, v in enumerate(rows[0]) if isinstance(v, Estimate) and v.declared is not None]


def canonical(parts: list) -> list:
    """Sketches in the order of their serialized bytes: a merge of them in this order depends
    only on which sketches they are, not on the order they came in."""
    return [p for _, p in sorted(((p.to_bytes(), i), p) for i, p in enumerate(parts))] if len(parts) > 1 else parts


for _fn in (ApproxQuantile(), ApproxCountDistinct(), ApproxTopK()):
    register(_fn)

SKETCH_FUNCTIONS = ("approx_quantile", "approx_count_distinct", "approx_top_k")


def parameter(func: str, value: Any, fail, loc) -> Decimal | None:
    """The bound form of an approximate aggregate's second argument: APPROX_QUANTILE's fraction
    (exactly, in [0, 1]) or APPROX_TOP_K's k (an integer from 1 to 10,000); None for the others."""
    if func == "approx_quantile":
        q = value if value is None or isinstance(value, Decimal) else Decimal(repr(float(value)))
        if q is None or not q.is_finite() or not 0 <= q <= 1:
            fail(f"APPROX_QUANTILE's fraction must be between 0 and 1, got {str(value)[:40]}", loc)
        return q
    if func == "approx_top_k":
        k = value if isinstance(value, Decimal) else Decimal(repr(float(value))) if value is not None else None
        if k is None or not k.is_finite() or k != k.to_integral_value() or not 1 <= k <= 10_000:
            fail(f"APPROX_TOP_K's k must be an integer from 1 to 10000, got {str(value)[:40]}", loc)
        return k
    return None


def declared_sketch(fn, column: str, spec, fail, loc) -> tuple[str, int]:
    """(kind, size) of the sketch that answers `fn` on `column`, or a failure naming the column
    and how to declare one."""
    found = sketch_columns.declared(spec.sketches, column, fn.family)
    if found is None:
        kinds = " or ".join(repr(k) for k in sketch_columns.FAMILY_KINDS[fn.family])
        first = sketch_columns.FAMILY_KINDS[fn.family][0]
        fail(f"{fn.name.upper()}({column}) is answered from a {' or '.join(sketch_columns.FAMILY_KINDS[fn.family])} "
             f"sketch of column {column!r}, which the stream does not declare: declare one when the stream is "
             f"created (sketches={{{column!r}: ({first!r}, size)}} in the SDK, --sketch {column}={first}:size in the "
             f"CLI; kinds {kinds})", loc, column)
    return found  # type: ignore[return-value]  # fail() does not return


def check_query(q, bound, fail) -> None:
    """A query with a sketch aggregate: no WHERE, GROUP BY, sub-query, APPROXIMATE or AS OF on it
    (a sketch covers a whole sub-window), APPROX_TOP_K alone in its select list."""
    sketched = [a for a in bound.aggs if a.fn.name in SKETCH_FUNCTIONS]
    if not sketched:
        return
    what = sketched[0].fn.name.upper()
    for present, clause in ((q.where, "WHERE"), (q.group_by is not None, "GROUP BY"), (q.outer, "a sub-query"),
                            (q.having is not None, "HAVING"), (q.approximate, "APPROXIMATE")):
        if present:
            fail(f"{what} is answered from per-sub-window sketches of every row: it takes no {clause}", q.loc)
    if any(a.fn.name == "approx_top_k" for a in sketched) and len(q.items) > 1:
        fail("APPROX_TOP_K answers one row per frequent value: it must be the only select item", q.loc)


def is_sketch(fn) -> bool:
    return fn.name in SKETCH_FUNCTIONS


def estimates_out(rows: list[tuple]) -> tuple[list[tuple], list[tuple[int, int, ErrorBound]]]:
    """An answer's rows with each Estimate replaced by its value, and the bounds as (row, column,
    ErrorBound). APPROX_TOP_K's cell (a list of keys) becomes one row per key, its other cells
    repeated (it is the only select item: the binder sees to it)."""
    out: list[tuple] = []
    bounds: list[tuple[int, int, ErrorBound]] = []
    for row in rows:
        listed = next((i for i, v in enumerate(row) if isinstance(v, Estimate) and isinstance(v.value, list)), None)
        if listed is not None:
            for key, bound in row[listed].value:
                bounds.append((len(out), listed, bound))
                out.append(tuple(key if i == listed else v for i, v in enumerate(row)))
            continue
        cells = []
        for i, v in enumerate(row):
            if isinstance(v, Estimate):
                if v.bound is not None:
                    bounds.append((len(out), i, v.bound))
                v = v.value
            cells.append(v)
        out.append(tuple(cells))
    return out, bounds
