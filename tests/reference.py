"""Brute-force answers over plain Python rows: the oracle the store is tested against."""
from __future__ import annotations

import math
from fractions import Fraction

from windowstore.store.query import Aggregate, KeyColumn, Query


_OPS = {"=": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
        "in": lambda a, b: a in b, "not in": lambda a, b: a not in b}


def _cmp(a, op, b):
    return _OPS[op](a, b)


def _agg(a: Aggregate, rows: list[dict]):
    vals = [r[a.column] for r in rows] if a.column else None
    if a.func == "count":
        return len(rows)
    if not rows:
        return 0 if a.func == "count_distinct" else None
    if a.func == "sum":
        return sum(vals)
    if a.func == "avg":
        return sum(vals) / len(vals)
    if a.func == "min":
        return min(vals)
    if a.func == "max":
        return max(vals)
    if a.func == "count_distinct":
        return len(set(vals))
    if a.func == "quantile":
        k = max(1, math.ceil(Fraction(str(a.q)) * len(vals)))
        return sorted(vals)[k - 1]
    raise AssertionError(a.func)


def answer(q: Query, rows: list[dict]) -> list[tuple]:
    rows = [r for r in rows if not q.where or any(all(_cmp(r[p.column], p.op, p.value) for p in conj) for conj in q.where)]
    aggs = [it for it in q.items if isinstance(it, Aggregate)]
    if q.group_by is None:
        return [tuple(_agg(a, rows) for a in aggs)]
    groups: dict = {}
    for r in rows:
        groups.setdefault(r[q.group_by], []).append(r)
    out = []
    for key in sorted(groups):
        out.append(tuple(key if isinstance(it, KeyColumn) else _agg(it, groups[key]) for it in q.items))
    for ob in reversed(q.order_by):
        out.sort(key=lambda t: t[ob.item], reverse=ob.descending)
    if q.limit is not None:
        out = out[: q.limit]
    if q.outer:
        labels = [it.label for it in q.items]
        out = [tuple(_agg(Aggregate(a.func, "v" if a.column else None, a.q), [{"v": t[labels.index(a.column)]} for t in out] if a.column else
                          [{} for _ in out]) for a in q.outer)]
    return out


def same(a, b) -> bool:
    """Answers equal, floats within 1e-9 relative (summation order differs)."""
    if len(a) != len(b):
        return False
    for ra, rb in zip(a, b):
        if len(ra) != len(rb):
            return False
        for x, y in zip(ra, rb):
            if isinstance(x, float) or isinstance(y, float):
                if x is None or y is None or not math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9):
                    return False
            elif x != y:
                return False
    return True
