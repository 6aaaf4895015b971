"""Sketch aggregates on a partitioned stream: APPROX_QUANTILE, APPROX_COUNT_DISTINCT and
APPROX_TOP_K merged across the partitions with the sketch library's merge (docs/partitions.md).

Each partition runs the query AS OF the common slide and returns, besides its answer, the sketch of
each sketch aggregate merged over its window (QueryRequest.return_sketches, Answer.sketches). Here
the partitions' sketches are merged as one server merges its sub-windows' (store/approx.py): KLL
sketches pooled by their retained weighted items, HLL and CPC unioned in canonical order, frequent
items merged into a map that purges nothing. The bounds stated are the merged sketches':

- APPROX_QUANTILE: every partition's sketch has at most the library's normalized rank error for
  its k, so their pooled items have at most that error over the union of the rows;
- APPROX_COUNT_DISTINCT: the merged union's bounds (two standard deviations);
- APPROX_TOP_K: a value's true count lies in [sum of the partitions' lower bounds, sum of their
  upper bounds] (a partition's upper bound adds the error its own merge dropped, MergedSketch.
  dropped_error); listed only when that lower bound exceeds the error (no false positives).

The other aggregates of the select list (COUNT, SUM, MIN, MAX, AVG) are merged from their partial
forms as merge.py merges them; anything else beside a sketch aggregate is refused by name.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace

from windowstore.store.approx import (SKETCH_FUNCTIONS, ApproxCountDistinct, ApproxQuantile, ErrorBound, canonical)
from windowstore.store.parser import to_text
from windowstore.store.query import Aggregate, Query
from windowstore.store.sketch_columns import FrequentSketch
from windowstore.store.sketches import CpcDistinct, HllDistinct, KllQuantiles

from .answer import Answer, Bound
from .errors import InvalidArgument
from .merge import merged_answer

_PARTIAL = ("count", "sum", "min", "max", "avg")


def has_sketch(q: Query) -> bool:
    return any(isinstance(it, Aggregate) and it.func in SKETCH_FUNCTIONS for it in q.items)


@dataclass
class SketchMergePlan:
    """What each partition runs (the sketch aggregates, then the others' partial parts) and how
    their answers and sketches merge into one answer."""

    query: Query
    labels: list[str]
    items: list                      # per answer column: ("sketch", position) or (func, column) of an aggregate
    parts: list[tuple]               # the partial parts, after the sketch aggregates in each partition's row
    sketched: list[Aggregate]        # the sketch aggregates, in the partition query's order
    types: dict[str, str]
    limit: int | None
    wants_sketches = True

    def partition_text(self, stream: str, slide: int) -> str:
        return to_text(replace(self.query, stream=stream, as_of_slide=slide))

    def merge(self, answers: list[Answer]) -> Answer:
        from .merge import _combine

        n = len(self.sketched)
        got: list = [None] * len(self.parts)
        part_types = answers[0].types[n:]
        for a in answers:
            if a.rows and self.parts:
                got = [_combine(f, x, y) for (f, _), x, y in zip(self.parts, got, a.rows[0][n:])]
        got = [0 if f == "count" and x is None else x for (f, _), x in zip(self.parts, got)]
        estimates = [self._sketch(i, agg, answers) for i, agg in enumerate(self.sketched)]
        row: list = []
        types: list[str] = []
        bounds: list[tuple[int, ErrorBound]] = []
        listed = None
        for col, (what, ref) in enumerate(self.items):
            if what == "sketch":
                value, bound, typ = estimates[ref]
                if isinstance(value, list):
                    listed = (col, value)
                    row.append(None)
                else:
                    row.append(value)
                    if bound is not None:
                        bounds.append((col, bound))
                types.append(typ)
            else:
                value, typ = self._final(what, ref, got, part_types)
                row.append(value)
                types.append(typ)
        if listed is not None:  # APPROX_TOP_K: the only select item, one row per value
            col, values = listed
            values = values if self.limit is None else values[:self.limit]
            rows = [tuple(key if i == col else v for i, v in enumerate(row)) for key, _ in values]
            out_bounds = [_bound(r, col, b) for r, (_, b) in enumerate(values)]
        else:
            rows = [tuple(row)] if self.limit != 0 else []
            out_bounds = [_bound(0, c, b) for c, b in bounds] if rows else []
        return merged_answer(answers, self.labels, rows, types, exact=False, guaranteed=None, bounds=out_bounds)

    def _sketch(self, i: int, agg: Aggregate, answers: list[Answer]):
        """(value, ErrorBound or None, type) of the i-th sketch aggregate over every partition."""
        typ = self.types.get(agg.column, "int64")  # type: ignore[arg-type]  # a sketch aggregate names its column
        sketches = []
        for a in answers:
            mine = [s for s in a.sketches if s.column == i]
            if not mine:
                raise InvalidArgument(f"{agg.label}: a partition answered without its sketch (a server too old to "
                                      f"return sketches?)")
            sketches.append(mine[0])
        kind, size = sketches[0].kind, sketches[0].size
        b = SimpleNamespace(q=agg.q, input_type=typ, sketch=(kind, size), column=agg.column)
        if agg.func == "approx_quantile":
            e = ApproxQuantile().finish(b, [KllQuantiles.from_bytes(s.data) for s in sketches], None)
            return e.value, e.bound, typ
        if agg.func == "approx_count_distinct":
            cls = HllDistinct if kind == "hll" else CpcDistinct
            e = ApproxCountDistinct().finish(b, [cls.from_bytes(s.data) for s in sketches], None)
            return e.value, e.bound, "int64"
        return _top_k(sketches, typ, int(agg.q), size), None, typ  # type: ignore[arg-type]  # APPROX_TOP_K's k

    def _final(self, func: str, column, got: list, part_types: list[str]):
        at = {p: (got[i], part_types[i] if i < len(part_types) else "int64") for i, p in enumerate(self.parts)}
        if func != "avg":
            return at[(func, column)]
        from .merge import mean_of
        return mean_of(at[("sum", column)][0], at[("count", column)][0]), "float64"


def _top_k(sketches: list, typ: str, k: int, size: int) -> list[tuple]:
    """APPROX_TOP_K over the partitions' frequent-items sketches: (value, ErrorBound) of at most k
    values, heaviest estimate first, each listed only when its summed lower bound exceeds the
    summed error (as store/approx.py lists a server's)."""
    parts = [FrequentSketch.from_bytes(s.data, typ, s.size) for s in sketches]
    dropped = {id(p): s.dropped_error for p, s in zip(parts, sketches)}
    ordered = canonical(parts)
    merged = FrequentSketch.merged(ordered, typ, size)
    out = []
    for key, est, _, _ in merged.top(2**62):
        lo = sum(p.sketch.get_lower_bound(key) for p in ordered)
        hi = sum(p.sketch.get_upper_bound(key) + dropped[id(p)] for p in ordered)
        if lo <= hi - lo:
            continue
        out.append((bool(key) if typ == "boolean" else key,
                    ErrorBound("frequent", 1.0, estimate=float(est), lower=float(lo), upper=float(hi))))
        if len(out) == k:
            break
    return out


def _bound(row: int, column: int, b: ErrorBound) -> Bound:
    return Bound(row, column, b.sketch, b.confidence, b.rank_error, b.estimate, b.lower, b.upper, b.delta)


def plan_sketch_merge(q: Query, types: dict[str, str]) -> SketchMergePlan:
    """The plan of a query with a sketch aggregate on a partitioned stream; InvalidArgument naming
    what does not merge (the partitions refuse what a server refuses: WHERE, GROUP BY, ...)."""
    if q.group_by is not None or q.distinct:
        raise InvalidArgument("a sketch aggregate takes no GROUP BY (a sketch covers every row of its sub-window)")
    if q.order_by:
        raise InvalidArgument("ORDER BY with a sketch aggregate on a partitioned stream is not supported: "
                              "APPROX_TOP_K lists its values heaviest first")
    sketched: list[Aggregate] = []
    parts: list[tuple] = []
    items: list = []
    for it in q.items:
        if not isinstance(it, Aggregate):
            raise InvalidArgument(f"{it.label}: a column beside a sketch aggregate needs GROUP BY, which a sketch "
                                  f"aggregate does not take")
        if it.func in SKETCH_FUNCTIONS:
            items.append(("sketch", len(sketched)))
            sketched.append(replace(it, alias=f"__s{len(sketched)}"))
            continue
        if it.func not in _PARTIAL:
            raise InvalidArgument(f"{it.label} beside a sketch aggregate on a partitioned stream is not supported: "
                                  f"only COUNT, SUM, MIN, MAX and AVG merge exactly there")
        for p in ([("sum", it.column), ("count", it.column)] if it.func == "avg" else [(it.func, it.column)]):
            if p not in parts:
                parts.append(p)
        items.append((it.func, it.column))
    partition = replace(q, items=tuple(sketched) + tuple(Aggregate(f, c, alias=f"__p{i}")
                                                        for i, (f, c) in enumerate(parts)),
                        limit=None, as_of_slide=None)
    return SketchMergePlan(query=partition, labels=list(q.labels), items=items, parts=parts, sketched=sketched,
                           types=dict(types), limit=q.limit)
