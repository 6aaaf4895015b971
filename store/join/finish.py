"""From joined rows to the answer: Finisher aggregates, groups, orders and limits a join's result
rows with the aggregate functions of functions.py, exactly as planner.Plan does for one stream, so a
join answer equals what one stream would answer over the joined rows; typed_rows turns decimal
results into Decimals. Reads the plan's rows; keeps nothing.

NULLs and types: every aggregate gets only the non-null values of its column, NULL keys form one
group and sort last both ways, projections carry NULL through as None. Boolean, timestamp, date and
decimal columns keep their storage dtype (int8, int64 microseconds / days, int64 value * 10**s) as
keys, group keys and values; result types and decimal results come from functions.py and planner.py.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..dictionary import StringDictionary
from ..join_binder import BoundJoin, ColumnRef
from ..planner import Answer, _decimal, decode_keys, group_rows
from ..schema import decimal_type
from ..synopsis import group_keys, keys_with_nulls

if TYPE_CHECKING:
    from .plan import JoinPlan

def typed_rows(rows: list[tuple], types: Sequence[str]) -> list[tuple]:
    """Answer rows with decimal columns (computed on value * 10**s integers, as planner.Plan does) as
    Decimals of their type's scale; NULLs stay None."""
    scales = {i: decimal_type(t)[1] for i, t in enumerate(types) if decimal_type(t)}  # type: ignore[index]  # not None: the condition
    if not scales:
        return rows
    return [tuple(_decimal(v, scales[i]) if i in scales else v for i, v in enumerate(r)) for r in rows]


def grouped_rows(b: BoundJoin, uniq: np.ndarray, results: list[np.ndarray], strings: StringDictionary) -> list[tuple]:
    """The grouped answer's rows: keys decoded (NULL as None), ordered as planner.Plan orders them."""
    return group_rows(decode_keys(uniq, b.group_by.type, strings),  # type: ignore[union-attr]  # grouped
                      [r.tolist() for r in results], b.order, b.limit, b.items)


class Finisher:
    """Aggregates, groups, orders and limits the joined rows with the aggregate functions of
    functions.py (each reading its own source's dictionary), exactly as planner.Plan does for one
    stream: every function gets only the non-null values of its column (COUNT(col) counts them,
    COUNT(*) rows, an aggregate of no value is NULL), GROUP BY puts the NULLs in one group
    (synopsis.keys_with_nulls), NULL sorts last both ways, and decimal results become Decimals of
    their result type's scale (functions.py's result types)."""

    def __init__(self, plan: JoinPlan, ver: np.ndarray, row: np.ndarray, data: JoinPlan | None = None):
        """`data`: the plan whose prepared sub-windows the rows' tags point into, when it is not
        `plan` (a shared join synopsis answering a member's query, shared.py)."""
        self.plan, self.b = plan, plan.bound
        self.data = data if data is not None else plan
        self.ver, self.row = ver, row
        self.n = ver.shape[1]
        self._cols: dict[ColumnRef, tuple[np.ndarray, np.ndarray | None]] = {}

    def col(self, ref: ColumnRef) -> tuple[np.ndarray, np.ndarray | None]:
        """(values, validity or None when no row of them is NULL)."""
        out = self._cols.get(ref)
        if out is None and ref.source < 0:  # PROB(): computed from the pair's intervals
            out = self._cols[ref] = (self.data.timing_probabilities(self.ver, self.row), None)
        if out is None:
            values, valid = self.data.gather(ref, self.ver[ref.source], self.row[ref.source])
            if valid is not None and valid.all():
                valid = None
            out = self._cols[ref] = (values, valid)
        return out

    def nonnull(self, ref: ColumnRef | None) -> np.ndarray | None:
        if ref is None:
            return None
        values, valid = self.col(ref)
        return values if valid is None else values[valid]

    def strings(self, ref: ColumnRef | None) -> StringDictionary:
        return self.plan.strings[ref.source if ref is not None else 0]

    def answer(self) -> Answer:
        b = self.b
        if b.projection:
            rows = self.projection()
        elif b.group_by is None:
            values = []
            for a, ref in zip(b.aggs, b.agg_refs):
                s = self.strings(ref)
                values.append(a.fn.finish(a, [a.fn.from_rows(a, self.nonnull(ref), self.n, s)], s))
            rows = [tuple(values[it.agg] for it in b.items)]  # type: ignore[index]  # no GROUP BY: aggregates only
            rows = rows if b.limit is None else rows[: b.limit]
        else:
            rows = self.groups()
            if b.outer:
                rows = [tuple(a.fn.over(a, rows if item is None else [r[item] for r in rows]) for a, item in b.outer)]
        return Answer(self.plan.labels, typed_rows(rows, self.plan.types), "join", types=self.plan.types)

    def groups(self) -> list[tuple]:
        b = self.b
        keys, kvalid = self.col(b.group_by)  # type: ignore[arg-type]  # grouped
        keys = keys_with_nulls(keys, kvalid)
        uniq, inverse = group_keys(keys, dense=b.group_by.type == "string")  # type: ignore[union-attr]  # grouped
        g = len(uniq)
        results = []
        for a, ref in zip(b.aggs, b.agg_refs):
            s = self.strings(ref)
            if ref is None:
                part = a.fn.from_group_rows(a, inverse, g, None, keys, s)
            else:
                values, valid = self.col(ref)
                if valid is None:
                    part = a.fn.from_group_rows(a, inverse, g, values, keys, s)
                else:
                    part = a.fn.from_group_rows(a, inverse[valid], g, values[valid], keys[valid], s)
            results.append(a.fn.finish_groups(a, np.arange(g), g, [part], uniq, s))
        return grouped_rows(b, uniq, results, self.strings(b.group_by))

    def projection(self) -> list[tuple]:
        """The joined rows' selected columns (NULL as None), ordered by the ORDER BY columns, then by
        every selected column ascending (a total order on what is visible; NULL last both ways),
        then LIMIT."""
        b = self.b
        keys = [(r, d) for r, d in b.sort] + [(r, False) for r in b.item_refs]
        if self.n and keys:
            order = np.lexsort([self._rank(r, d) for r, d in reversed(keys)])
        else:
            order = np.arange(self.n)
        if b.limit is not None:
            order = order[: b.limit]
        out = []
        for ref in b.item_refs:
            values, valid = self.col(ref)
            picked = values[order]
            vals: list
            if ref.type == "string":
                vals = self.strings(ref).decode(picked)
            elif ref.type == "boolean":
                vals = [bool(v) for v in picked.tolist()]
            else:
                vals = picked.tolist()
            if valid is not None:
                vals = [v if ok else None for v, ok in zip(vals, valid[order].tolist())]
            out.append(vals)
        return list(zip(*out)) if out else [() for _ in order]

    def _rank(self, ref: ColumnRef, descending: bool) -> np.ndarray:
        """Sort keys of a column's values in the order the answer sorts them, ascending or
        descending (strings by code point, -0.0 equal to 0.0), NULLs after every value."""
        values, valid = self.col(ref)
        uniq, inverse = np.unique(values, return_inverse=True)
        inverse = inverse.reshape(-1).astype(np.int64)
        u = len(uniq)
        if ref.type == "string":
            decoded = self.strings(ref).decode(uniq)
            order = sorted(range(u), key=decoded.__getitem__)
            rank = np.empty(u, dtype=np.int64)
            rank[order] = np.arange(u)
            inverse = rank[inverse]
        if descending:
            inverse = u - 1 - inverse
        if valid is not None:
            inverse = np.where(valid, inverse, u)
        return inverse

