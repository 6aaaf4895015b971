"""Queries with expressions (store/expr_query.py) on a partitioned stream: the partitions compute the
groups' partial aggregates, the client merges them per group and evaluates the rest of the query
(docs/partitions.md).

Each partition runs `SELECT <group keys>, <partial aggregates> FROM S.p{i} WHERE ... GROUP BY
<group keys>` AS OF the common slide: the WHERE clause, the GROUP BY key expressions and the
expressions inside the aggregates (`SUM(bytes * 8)`, `COUNT(*) FILTER (WHERE ...)`) are pushed to
every partition as they are, since they are evaluated row by row. Each aggregate is sent in its
partial form (COUNT, SUM, MIN and MAX as themselves, AVG as SUM and COUNT), merged here per group
key, and then the select items (`SUM(a) / COUNT(*)`, `SUM(bytes) * 8`), HAVING, ORDER BY, DISTINCT
and LIMIT are evaluated over the merged groups by the store's own output step (expr_query.run on the
groups), as the store's synopsis path does over its own groups. What has no exact partial form is
refused by name: COUNT(DISTINCT ...), QUANTILE and MEDIAN, a sub-query, NOW(), and a query that does
not aggregate.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import pyarrow as pa

from windowstore.store.errors import QueryError
from windowstore.store.expr import Agg
from windowstore.store.expr import arrow_type
from windowstore.store.expr_query import Compiled, Select, SelectExpr, _storage, run, select_text
from windowstore.store.query import Query

from .answer import Answer
from .errors import InvalidArgument
from .merge import merged_answer

_PARTIAL = ("count", "sum", "min", "max", "avg")


@dataclass
class ExprMergePlan:
    query: Query          # what each partition runs (its stream and AS OF set per call)
    compiled: Compiled    # the whole query, bound against the stream's column types
    keys: int             # group key columns first in each partition's rows
    parts: list[tuple]    # (func, aggregate index) of each partial column after the keys

    def partition_text(self, stream: str, slide: int) -> str:
        return select_text(replace(self.query, stream=stream, as_of_slide=slide))

    def merge(self, answers: list[Answer]) -> Answer:
        from .merge import _combine, mean_of

        k = self.keys
        acc: dict[tuple, list] = {}
        for a in answers:
            for row in a.rows:
                key, got = tuple(row[:k]), list(row[k:])
                old = acc.get(key)
                acc[key] = got if old is None else [_combine(f, x, y) for (f, _), x, y in zip(self.parts, old, got)]
        c = self.compiled
        if not c.keys and () not in acc:  # an ungrouped aggregate has one row, also over no rows
            acc[()] = [0 if f == "count" else None for f, _ in self.parts]
        groups = list(acc)
        raw: dict[str, list] = {}
        for j in range(k):
            raw[f"#k{j}"] = [g[j] for g in groups]
        for j, agg in enumerate(c.aggs):
            at = {f: i for i, (f, ref) in enumerate(self.parts) if ref == j}
            if agg.name == "avg":
                raw[f"#a{j}"] = [mean_of(acc[g][at["sum"]], acc[g][at["count"]]) for g in groups]
            else:
                raw[f"#a{j}"] = [acc[g][at[agg.name]] for g in groups]
        gcols: dict[str, pa.Array | None] = {}
        for j in range(k + len(c.aggs)):
            name = f"#k{j}" if j < k else f"#a{j - k}"
            typ = c.type(c.keys[j] if j < k else c.aggs[j - k])
            try:
                gcols[name] = pa.array(raw[name], type=arrow_type(_storage(typ)))
            except (pa.ArrowInvalid, OverflowError):
                gcols[name] = None
        try:
            rows = run(c, {}, 0, None, grouped_input=(gcols, raw, len(groups)))
        except QueryError as e:
            raise InvalidArgument(str(e)) from None
        return merged_answer(answers, c.labels, rows, c.types, exact=all(a.exact for a in answers), guaranteed=None)


def plan_expr_merge(q: Query, types: dict[str, str], time_column: str | None = None) -> ExprMergePlan:
    """The plan of a query with expressions on a partitioned stream (column `types`: the stream's
    schema; `time_column`: its event-time column, which meets a TIMESTAMP as one, as on a server);
    InvalidArgument naming what has no exact merge."""
    sel: Select = q.expr  # type: ignore[assignment]  # a query with expressions
    if sel.inner is not None:
        raise InvalidArgument("a sub-query (SELECT ... FROM (SELECT ...)) on a partitioned stream is not supported")
    try:
        c = Compiled(sel, dict(types), time_column=time_column)
    except QueryError as e:
        raise InvalidArgument(str(e)) from None
    if c.uses_now:
        raise InvalidArgument("NOW() in a query on a partitioned stream is not supported")
    if not c.grouped:
        raise InvalidArgument("a query with expressions and no aggregate on a partitioned stream is not supported: "
                              "query its partitions' streams (S.p0, S.p1, ...)")
    parts: list[tuple] = []
    items = [SelectExpr(key, alias=f"__g{i}") for i, key in enumerate(c.keys)]
    for j, agg in enumerate(c.aggs):
        if agg.name not in _PARTIAL or agg.distinct:
            what = f"{agg.name.upper()}({'DISTINCT ' if agg.distinct else ''}...)"
            raise InvalidArgument(f"{what} in a query with expressions on a partitioned stream is not supported: "
                                  f"only COUNT, SUM, MIN, MAX and AVG (of any expression) merge exactly")
        for f in (("sum", "count") if agg.name == "avg" else (agg.name,)):
            part = Agg(f, () if f == "count" and not agg.args else agg.args, filter=agg.filter)
            items.append(SelectExpr(part, alias=f"__p{len(parts)}"))
            parts.append((f, j))
    partition = Select(items=tuple(items), where=sel.where, group_by=tuple(c.keys))
    return ExprMergePlan(query=replace(q, expr=partition, as_of_slide=None), compiled=c, keys=len(c.keys),
                         parts=parts)
