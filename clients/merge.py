"""Scatter-gather on a partitioned stream: the query each partition runs, and how their answers
merge into the one answer of the query over the union of the partitions' rows (docs/partitions.md).

Two shapes, both exact:
- **by group**, when the GROUP BY (or DISTINCT) columns include every partition key column: each
  group lives in one partition, so each partition's answer rows are final. The partitions run the
  query itself (HAVING, ORDER BY and LIMIT pushed down: the global top k is among the partitions'
  top k), and the merge concatenates, orders (as the store does: ORDER BY items, then the group
  keys, NULLs last) and limits.
- **in partial form**, otherwise: each partition answers per group (and, for QUANTILE and COUNT
  DISTINCT, per group and value) the decomposable parts: COUNT, SUM, MIN, MAX (AVG as SUM and
  COUNT), and COUNT(*) per value for the holistic aggregates; the merge adds, takes extremes,
  counts values and finishes each aggregate with the store's own definitions (functions.py's
  quantile_index; planner.py's ordering). HAVING needs the first shape.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from decimal import Decimal

from windowstore.store.expr_decimal import add, mean
from windowstore.store.functions import quantile_index
from windowstore.store.parser import to_text
from windowstore.store.planner import sorted_positions
from windowstore.store.query import Aggregate, KeyColumn, Query

from .answer import Answer
from .errors import InvalidArgument

_DECOMPOSABLE = ("count", "sum", "min", "max", "avg")
_HOLISTIC = ("quantile", "count_distinct")
_VALUE_TYPES = ("int64", "string")  # columns the store groups by: the holistic aggregates' values are counted so


def _expr(a: Aggregate) -> tuple:
    return (a.func, a.column, a.q)


@dataclass
class MergePlan:
    query: Query                      # what each partition runs (its stream and AS OF set per call)
    labels: list[str]                 # the answer's columns
    pushdown: bool
    group: list[str]                  # the GROUP BY (or DISTINCT) columns
    order: list[tuple[int | tuple, bool]]  # per ORDER BY key: what it reads (see _column), descending
    limit: int | None
    shown: int = 0                    # pushdown: the partition answer's columns that are the answer's
    key_at: list[int] = field(default_factory=list)  # pushdown: each group column's position in its rows
    values: list[str] = field(default_factory=list)  # partial: value columns (holistic aggregates)
    parts: list[tuple] = field(default_factory=list)  # partial: (func, column) of each part column
    finals: list[int | tuple] = field(default_factory=list)  # partial: per answer column, a key index or an expression

    def partition_text(self, stream: str, slide: int) -> str:
        return to_text(replace(self.query, stream=stream, as_of_slide=slide))

    def merge(self, answers: list[Answer]) -> Answer:
        rows, types = self._pushdown(answers) if self.pushdown else self._partial(answers)
        return merged_answer(answers, self.labels, rows, types, exact=all(a.exact for a in answers),
                             guaranteed=None if any(a.guaranteed is None for a in answers)
                             else all(a.guaranteed for a in answers))

    # -- by group: the partitions' rows are final --------------------------------------------------
    def _pushdown(self, answers: list[Answer]) -> tuple[list[tuple], list[str]]:
        rows = [r for a in answers for r in a.rows]
        cols = list(zip(*rows)) if rows else [()] * len(answers[0].columns)
        keys = [(list(cols[self.key_at[i]]), False) for i in range(len(self.group))]
        order = [(list(cols[ref]), d) for ref, d in self.order]  # type: ignore[index]  # pushdown: positions
        positions = sorted_positions(len(rows), order + keys)
        if self.limit is not None:
            positions = positions[:self.limit]
        return [rows[i][:self.shown] for i in positions], answers[0].types[:self.shown]

    # -- in partial form ---------------------------------------------------------------------------
    def _partial(self, answers: list[Answer]) -> tuple[list[tuple], list[str]]:
        m, v = len(self.group), len(self.values)
        acc: dict[tuple, list] = {}
        counted: dict[tuple, dict[str, Counter]] = defaultdict(lambda: {c: Counter() for c in self.values})
        weight = next((i for i, p in enumerate(self.parts) if p == ("count", None)), None)
        for a in answers:
            for row in a.rows:
                key = tuple(row[:m])
                parts = row[m + v:]
                got = acc.get(key)
                if got is None:
                    acc[key] = list(parts)
                else:
                    acc[key] = [_combine(f, x, y) for (f, _), x, y in zip(self.parts, got, parts)]
                if v:
                    for c, value in zip(self.values, row[m:m + v]):
                        if value is not None:
                            counted[key][c][value] += parts[weight]  # type: ignore[index]  # holistic: a ("count", None) part
        if not self.group and () not in acc:  # an ungrouped query has one row, also over no rows
            acc[()] = [0 if f == "count" else None for f, _ in self.parts]
        part_types = dict(zip(self.parts, answers[0].types[m + v:]))
        value_types = dict(zip(self.values, answers[0].types[m:m + v]))
        key_types = answers[0].types[:m]

        def final(key: tuple, what):
            if isinstance(what, int):
                return key[what]
            func, column, q = what
            parts = acc[key]
            at = {p: parts[i] for i, p in enumerate(self.parts)}
            if func in ("count", "sum", "min", "max"):
                return at[(func, column)]
            if func == "avg":
                return mean_of(at[("sum", column)], at[("count", column)])
            values = counted[key][column] if key in counted else Counter()
            if func == "count_distinct":
                return len(values)
            n = sum(values.values())
            if not n:
                return None
            rank, seen = quantile_index(q, n), 0
            for value in sorted(values):
                seen += values[value]
                if seen > rank:
                    return value
            raise AssertionError("rank beyond the values")

        def final_type(what) -> str:
            if isinstance(what, int):
                return key_types[what]
            func, column, _ = what
            if func in ("count", "count_distinct"):
                return "int64"
            if func in ("sum", "min", "max"):
                return part_types[(func, column)]
            if func == "avg":
                return "float64"  # of a decimal too, as DuckDB (expr_decimal.mean)
            return value_types[column]

        keys = list(acc)
        order = [([final(k, what) for k in keys], d) for what, d in self.order]
        positions = sorted_positions(len(keys), order + [([k[i] for k in keys], False) for i in range(m)])
        if self.limit is not None:
            positions = positions[:self.limit]
        rows = [tuple(final(keys[i], what) for what in self.finals) for i in positions]
        return rows, [final_type(what) for what in self.finals]


def mean_of(total, count: int | None):
    """AVG from its partial form, the partitions' SUM and COUNT merged: the store's own mean (a
    DOUBLE; of a decimal the double nearest the exact mean, expr_decimal.mean), None over no value."""
    if not count or total is None:
        return None
    if isinstance(total, Decimal):
        return mean(total, count)
    return total / count  # (Python's int / int: the nearest double to the exact quotient)


def _combine(func: str, x, y):
    if func in ("count",):
        return (x or 0) + (y or 0)
    if x is None:
        return y
    if y is None:
        return x
    if func == "sum":  # decimals exactly (the default context would round past 28 digits)
        return add(x, y) if isinstance(x, Decimal) or isinstance(y, Decimal) else x + y
    return min(x, y) if func == "min" else max(x, y)


def plan_merge(q: Query, partition_by: tuple[str, ...], types: dict[str, str] | None = None) -> MergePlan:
    """How `q` runs on the partitions of a stream partitioned by `partition_by` (column `types`:
    the stream's schema); InvalidArgument for what does not merge exactly (yet)."""
    if q.outer:
        raise InvalidArgument("outer aggregates (SELECT ... FROM (subquery)) on a partitioned stream are not "
                              "supported yet")
    if q.approximate:  # (partitioned.py plans it with approx_merge.py: the thesis's bounds)
        raise InvalidArgument("APPROXIMATE on a partitioned stream is not supported yet by the exact merge: it "
                              "merges with the top-k lists' bounds (approx_merge.plan_approx_merge)")
    if q.slide is not None:
        raise InvalidArgument("a one-time query has no SLIDE")
    if q.range is not None and q.range.unit == "rows":
        raise InvalidArgument("RANGE in ROWS counts rows per partition: give the range in ms or SUBWINDOWS")
    if q.as_of_slide is not None:
        raise InvalidArgument("give the slide as as_of_slide= (the partitions are read AS OF one slide)")
    for it in q.items:
        if isinstance(it, Aggregate) and it.func not in _DECOMPOSABLE + _HOLISTIC:
            raise InvalidArgument(f"{it.label} on a partitioned stream is not supported yet")
    group: list[str] = [it.column for it in q.items] if q.distinct else list(q.group_columns)  # type: ignore[misc]  # DISTINCT selects columns
    labels = q.labels
    if group and set(partition_by) <= set(group):
        return _plan_pushdown(q, group, labels)
    if q.having is not None:
        raise InvalidArgument(f"HAVING on a partitioned stream needs GROUP BY to include the partition key "
                              f"({', '.join(partition_by)})")
    return _plan_partial(q, group, labels, types or {})


def _plan_pushdown(q: Query, group: list[str], labels: list[str]) -> MergePlan:
    items = list(q.items)
    hidden = 0

    def add(item) -> int:
        nonlocal hidden
        items.append(replace(item, alias=f"__merge{hidden}"))
        hidden += 1
        return len(items) - 1

    order: list[tuple[int | tuple, bool]] = [(_order_ref(q, o, items, add), o.descending) for o in q.order_by]
    key_at = []
    for g in group:
        at = next((i for i, it in enumerate(items) if isinstance(it, KeyColumn) and it.column == g), None)
        key_at.append(add(KeyColumn(g)) if at is None else at)
    if q.distinct and hidden:  # DISTINCT's items are its keys: all selected, nothing hidden to add
        raise AssertionError("DISTINCT with a hidden column")
    return MergePlan(query=replace(q, items=tuple(items)), labels=labels, pushdown=True, group=group, order=order,
                     limit=q.limit, shown=len(q.items), key_at=key_at)


def _order_ref(q: Query, o, items: list, add) -> int:
    """An ORDER BY key's position among the (extended) select items: as the binder resolves it."""
    if o.expr is not None:
        at = next((i for i, it in enumerate(items) if isinstance(it, Aggregate) and it.same_expression(o.expr)), None)
        return add(o.expr) if at is None else at
    if o.name is not None:
        hits = [i for i, it in enumerate(q.items) if it.label == o.name]
        if hits:
            return hits[0]
        if o.name in q.group_columns:
            return add(KeyColumn(o.name))
        raise InvalidArgument(f"ORDER BY {o.name!r} names no select item or GROUP BY column")
    if o.item is None or not 0 <= o.item < len(q.items):
        raise InvalidArgument(f"ORDER BY {'?' if o.item is None else o.item + 1} is not a select item "
                              f"(1..{len(q.items)})")
    return o.item


def _plan_partial(q: Query, group: list[str], labels: list[str], types: dict[str, str]) -> MergePlan:
    exprs: list[tuple] = []
    for it in q.items:
        if isinstance(it, Aggregate):
            exprs.append(_expr(it))
    order: list[tuple[int | tuple, bool]] = []
    for o in q.order_by:
        if o.expr is not None:
            exprs.append(_expr(o.expr))
            order.append((_expr(o.expr), o.descending))
            continue
        if o.name is not None:
            hits = [it for it in q.items if it.label == o.name]
            if hits:
                it = hits[0]
            elif o.name in group:
                order.append((group.index(o.name), o.descending))
                continue
            else:
                raise InvalidArgument(f"ORDER BY {o.name!r} names no select item or GROUP BY column")
        elif o.item is not None and 0 <= o.item < len(q.items):
            it = q.items[o.item]
        else:
            raise InvalidArgument(f"ORDER BY {'?' if o.item is None else o.item + 1} is not a select item "
                                  f"(1..{len(q.items)})")
        order.append((group.index(it.column), o.descending) if isinstance(it, KeyColumn) else
                     (_expr(it), o.descending))
    for f, _, _ in exprs:
        if f not in _DECOMPOSABLE + _HOLISTIC:
            raise InvalidArgument(f"{f.upper()} on a partitioned stream is not supported yet")
    values = list(dict.fromkeys(c for f, c, _ in exprs if f in _HOLISTIC and c not in group))
    for f, c, q_ in exprs:
        if f in _HOLISTIC and c in values and types.get(c, "int64") not in _VALUE_TYPES:
            raise InvalidArgument(f"{Aggregate(f, c, q_).label} of {types[c]} column {c!r} "
                                  f"on a partitioned stream is exact only grouped by the partition key: GROUP BY "
                                  f"columns including it (its values are counted per partition as a group column, "
                                  f"and a {types[c]} column cannot be one)")
    parts: list[tuple] = []
    for f, c, _ in exprs:
        for p in ([("sum", c), ("count", c)] if f == "avg" else [("count", None)] if f in _HOLISTIC else [(f, c)]):
            if p not in parts:
                parts.append(p)
    if not parts:  # DISTINCT: a grouped query selects an aggregate
        parts.append(("count", None))
    finals = [group.index(it.column) if isinstance(it, KeyColumn) else _expr(it) for it in q.items]
    by = group + values
    items = tuple([KeyColumn(c, alias=f"__g{i}") for i, c in enumerate(by)] +
                  [Aggregate(f, c, alias=f"__p{i}") for i, (f, c) in enumerate(parts)])
    if not items:
        raise InvalidArgument("nothing to select")
    partial = Query(stream=q.stream, items=items, where=q.where, group_by=by[0] if by else None,
                    group_by_more=tuple(by[1:]), range=q.range)
    return MergePlan(query=partial, labels=labels, pushdown=False, group=group, order=order, limit=q.limit,
                     values=values, parts=parts, finals=finals)


def merged_answer(answers: list[Answer], columns: list[str], rows: list[tuple], types: list[str], *, exact: bool,
                  guaranteed: bool | None, bounds: list | None = None) -> Answer:
    """One answer from the partitions' answers of one slide: their rows merged into `rows`, and the
    provenance of them all (the first's slide, the union of their windows, the slowest staleness
    and response, the restarts summed)."""
    first = answers[0]
    starts = [a.window_start_ms for a in answers if a.window_start_ms is not None]
    ends = [a.window_end_ms for a in answers if a.window_end_ms is not None]
    stale = [a.staleness_ms for a in answers if a.staleness_ms is not None]
    return Answer(
        columns=list(columns), rows=rows, slide=first.slide,
        window_start_ms=min(starts) if starts else None, window_end_ms=max(ends) if ends else None,
        staleness_ms=max(stale) if stale else None, response_ms=max(a.response_ms for a in answers),
        restarts=sum(a.restarts for a in answers), policy=first.policy, access=first.access,
        exact=exact, guaranteed=guaranteed, query_id="", execution=0,
        late_slides=max(a.late_slides for a in answers), inter_exec_ms=None,
        answered_ms=max(a.answered_ms for a in answers), stream=first.stream, types=list(types), bounds=list(bounds or ()))
