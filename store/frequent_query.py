"""APPROXIMATE queries answered from the per-sub-window top-k lists (thesis 6.2): their binding,
the read of one sub-window, and the answer.

Two shapes, both on a declared group-by column `g`, with one aggregate A = COUNT(*) or SUM(c) of a
non-negative int64 column c, and optionally a WHERE on `g` alone:

- top k:     SELECT g, A FROM s GROUP BY g ORDER BY A DESC LIMIT k APPROXIMATE
- threshold: SELECT g, A FROM s GROUP BY g HAVING A > t APPROXIMATE
             SELECT g, A FROM s GROUP BY g HAVING A > f * TOTAL APPROXIMATE

The threshold form is Algorithm 6 (frequent.py): every key whose lower bound exceeds t (or the
fraction f of the window's total of A, the total over the rows WHERE selects), so no reported key is
a false positive. Each answer row is (g, lower bound of A) and carries its bound: the key's true A
lies in [lower, upper]; `delta` (the sum of the lists' k-th values: the most any unlisted key can
have) is in every bound; `guaranteed` says that no unreported key can be over the threshold.

SUM(c) ranks each sub-window's keys by their sum (frequent.weighted_top_k over the per-key
synopsis, with the stream's topk as k). WHERE on g drops the listed keys it rejects: a key it keeps
that is missing from a list still has at most that list's delta.
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np

from .approx import ErrorBound
from .frequent import frequent_items, weighted_top_k
from .query import HavingTest, OfTotal
from .synopsis import NULL_KEY, TopKList, merge_topk_lists


@dataclass(frozen=True)
class Approximate:
    """What an APPROXIMATE query asks: the weight (None: COUNT(*)), and the threshold or fraction."""

    weight: str | None
    threshold: int | Decimal | None = None   # HAVING A > threshold
    fraction: Decimal | None = None          # HAVING A > fraction * TOTAL


def bind(binder, bound) -> Approximate:
    """Check an APPROXIMATE query's shape (binder: the binder, for the spec, types and failures)."""
    q, spec, fail = binder.q, binder.spec, binder.fail
    shape = ("APPROXIMATE needs GROUP BY a declared group-by column, one COUNT(*) or SUM of an int64 column, a WHERE "
             "on the grouped column only, and either ORDER BY it DESC LIMIT k or HAVING it > a number (or > a "
             "fraction * TOTAL); no sub-query")
    if q.group_by not in spec.group_by or q.group_by_more or q.outer or len(bound.aggs) != 1:
        fail(shape, q.loc)
    a = bound.aggs[0]
    if not ((a.fn.name == "count" and a.column is None) or (a.fn.name == "sum" and a.input_type == "int64")):
        fail(shape, q.loc)
    for conj in q.where:
        for p in conj:
            if p.column != q.group_by:
                fail(f"APPROXIMATE takes a WHERE on the grouped column {q.group_by!r} only, not on {p.column!r}",
                     p.loc, p.column)
    weight = a.column if a.fn.name == "sum" else None
    if q.having is None:
        if not (bound.order and bound.order[0] == (0, True) and q.limit is not None) or len(bound.order) > 1:
            fail(shape, q.loc)
        return Approximate(weight)
    h = q.having
    if not (isinstance(h, HavingTest) and h.op == ">" and not isinstance(h.operand, str)
            and h.operand.same_expression(q.items[[i for i, it in enumerate(bound.items) if it.agg == 0][0]])):
        fail("APPROXIMATE's HAVING is one test: the aggregate > a number, or > a fraction * TOTAL", h.loc)
    if q.order_by or q.limit is not None:
        fail("APPROXIMATE with HAVING answers every key over the threshold, heaviest first: no ORDER BY or LIMIT",
             q.loc)
    value = h.value
    if isinstance(value, OfTotal):
        if not 0 <= value.fraction <= 1:
            fail(f"the fraction of TOTAL must be between 0 and 1, got {value.fraction}", h.loc)
        return Approximate(weight, fraction=Decimal(value.fraction))
    if isinstance(value, bool) or not isinstance(value, (int, Decimal)) or value < 0:
        fail(f"APPROXIMATE's threshold must be a non-negative number, got {value!r}", h.loc)
    return Approximate(weight, threshold=value)


def reader(bound, strings, topk: int):
    """The function reading one sub-window's share: its top-k list (by A), WHERE applied to its
    keys, and the total of A over the keys WHERE keeps."""
    g, weight = bound.group_by, bound.approximate_spec.weight

    def read(sub) -> tuple[TopKList, int]:
        ks = sub.synopsis.by_key[g]
        lst = ks.topk if weight is None else weighted_top_k(ks, weight, topk)
        values = ks.counts if weight is None else ks.sums[weight]
        if not bound.where:
            return lst, int(sum(values.tolist()))
        keep = _where(bound, strings, lst.keys)
        lst = TopKList(lst.keys[keep], lst.counts[keep], lst.delta)
        return lst, int(sum(values[_where(bound, strings, ks.keys)].tolist()))
    return read


def _where(bound, strings, keys: np.ndarray) -> np.ndarray:
    """Which of a list's keys (group keys: the null group as NULL_KEY or code -1) WHERE keeps."""
    if keys.dtype == object:
        valid = np.array([k != NULL_KEY for k in keys.tolist()], dtype=bool)
        values = np.where(valid, keys, 0).astype(np.int64)
    elif keys.dtype == np.int32:
        valid, values = keys >= 0, keys
    else:
        valid, values = None, keys
    out = np.zeros(len(keys), dtype=bool)
    for conj in bound.where:
        m = np.ones(len(keys), dtype=bool)
        for p in conj:
            m &= p.mask(values, strings, valid)
        out |= m
    return out


def answer(bound, contributions: list, decode) -> tuple[list[tuple], dict[str, Any]]:
    """Rows (key, lower bound of A), heaviest first, and the Answer's other fields."""
    spec: Approximate = bound.approximate_spec
    lists = [c[0] for c in contributions]
    keys: list
    lower: list
    upper: list
    delta: int | float
    if spec.threshold is None and spec.fraction is None:  # top k
        est = merge_topk_lists(lists, bound.limit)
        keys, lower, upper, delta, ok = est.keys, est.lower, est.upper, est.delta, est.guaranteed
    else:
        total = sum(c[1] for c in contributions)
        got = frequent_items(lists, threshold=None if spec.threshold is None else _number(spec.threshold),
                             fraction=None if spec.fraction is None else float(spec.fraction),
                             total=total if spec.fraction is not None else None)
        keys = [i.key for i in got.items]
        lower, upper, delta, ok = [i.lower for i in got.items], [i.upper for i in got.items], got.delta, got.complete
    decoded = decode(keys)
    item_of = [it.agg for it in bound.items]
    rows = [tuple(k if agg is None else lo for agg in item_of) for k, lo in zip(decoded, lower)]
    column = item_of.index(0)
    bounds = [(r, column, ErrorBound("top-k lists", 1.0, estimate=float(lo), lower=float(lo), upper=float(hi),
                                     delta=float(delta)))
              for r, (lo, hi) in enumerate(zip(lower, upper))]
    return rows, {"exact": False, "guaranteed": bool(ok), "bounds": bounds}


def _number(v: int | Decimal) -> int | float:
    return v if isinstance(v, int) else float(v)
