"""Aggregates over a two-way equi-join without joined rows (one-time queries). The size of an
equi-join is the sum over key values v of |A_v| x |B_v| (the cardinality behind thesis 5.3's
selectivity estimates); COUNT, SUM, AVG, MIN and MAX over it need only per-key partial aggregates of
one side and a pass over the other side's rows, never the joined rows: a row of A with key v stands
for |B_v| joined rows (COUNT(*) adds |B_v|, SUM(a.x) adds x |B_v|, SUM(b.y) adds sum_y(B_v), MIN/MAX
take the extremes of the rows whose key both sides have). The plan answers so when nothing needs
joined rows (no band, no filter across sources, no projection, no holistic aggregate; GROUP BY one
column of either side) and nothing is kept between evaluations (cache=False: one-time queries;
periodic ones keep their incremental state or the 8.3.2 synopsis). Cost: linear in the windows'
rows, not in the join's size; answers equal the other paths' (integer sums exact), and the row bound
still applies to the join's size, counted exactly.

Owns only this evaluation; reads the plan's prepared sub-windows and never changes its kept state.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence, cast

import numpy as np

from ..errors import InvalidInput
from ..functions import JoinsByKey
from ..join_binder import BoundJoin, ColumnRef
from ..planner import Answer
from ..schema import valid_key as _valid_key
from ..subwindow import SubWindow
from ..synopsis import group_keys, keys_with_nulls
from .finish import grouped_rows, typed_rows
from .index import DTYPES, Prepared

if TYPE_CHECKING:
    from .plan import JoinPlan

def by_key_answers(b: BoundJoin, residual: bool) -> bool:
    """Can per-key partial aggregates answer this query (aggregate_by_key)? Two sources
    joined by equalities only (a band pairs rows, not key values), WHERE pushed down whole to one
    source at a time (no OR across sources), aggregates whose class says per-key partials answer them
    (join_by_key_ok: COUNT, SUM, AVG, MIN and MAX, distributive and algebraic; the holistic QUANTILE
    and COUNT(DISTINCT) need the rows), at most one GROUP BY column (of either source). Projections
    need the joined rows too."""
    return (len(b.sources) == 2 and bool(b.equalities) and not b.bands and not b.timings and not residual and not b.projection
            and bool(b.aggs) and all(a.fn.join_by_key_ok(a) for a in b.aggs))


def _dense_keys(ka: list[np.ndarray], kb: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, int]:
    """One int64 id per row of each side for a (composite) equality key, in 0..span-1 with span at most
    about 4 x the rows, equal exactly where every class's values are equal: integer keys of a narrow
    range are their offsets (no sort); others are ranked among the distinct values of both sides."""
    na, nb = len(ka[0]), len(kb[0])
    room = 4 * (na + nb) + 1024
    if len(ka) == 1 and ka[0].dtype.kind in "iu" and na and nb:
        a, b = ka[0], kb[0]
        lo = min(int(a.min()), int(b.min()))
        hi = max(int(a.max()), int(b.max()))
        if hi - lo <= room:
            return a.astype(np.int64, copy=False) - lo, b.astype(np.int64, copy=False) - lo, hi - lo + 1
    ida = np.zeros(na, dtype=np.int64)
    idb = np.zeros(nb, dtype=np.int64)
    span = 1
    for a, b in zip(ka, kb):
        u = np.unique(np.concatenate([a, b]))
        if span * max(len(u), 1) >= 2**62:  # renumber what is combined so far first
            both, inv = np.unique(np.concatenate([ida, idb]), return_inverse=True)
            inv = inv.reshape(-1)
            ida, idb, span = inv[:na], inv[na:], len(both)
        ida = ida * len(u) + np.searchsorted(u, a)
        idb = idb * len(u) + np.searchsorted(u, b)
        span *= max(len(u), 1)
    if span > room:
        both, inv = np.unique(np.concatenate([ida, idb]), return_inverse=True)
        inv = inv.reshape(-1).astype(np.int64)
        ida, idb, span = inv[:na], inv[na:], len(both)
    return ida, idb, span


def _concat_rows(parts: list[np.ndarray], dtype) -> np.ndarray:
    if not parts:
        return np.zeros(0, dtype=dtype)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _side_column(xs: list[Prepared], ref: ColumnRef) -> tuple[np.ndarray, np.ndarray | None]:
    """A column's values over the selected rows of the sub-windows `xs`, in order, and their validity
    (None: no null among them)."""
    values = _concat_rows([x.column(ref.column) for x in xs], DTYPES.get(ref.type, np.int64))
    vkey = _valid_key(ref.column)
    if not any(vkey in x.sub.columns for x in xs):
        return values, None
    return values, _concat_rows([x.column(vkey) for x in xs], bool)


def aggregate_by_key(plan: JoinPlan, inputs: Sequence[Sequence[SubWindow]]) -> Answer:
    """Aggregates of a two-way equi-join computed per join key, never forming the joined rows
    (one-time queries; see by_key_answers for which). One side, the "key side", is aggregated per
    join key: its rows per key and, per aggregate reading it, the function's from_group_rows partial
    per key (COUNT: values counted; SUM, AVG: exact sum, values counted; MIN, MAX: extreme, present).
    Every row of the other side, the "row side" (the GROUP BY column's source, else the smaller),
    joins the rows of its key: it stands for cnt(k) joined rows, and the function's weighted_rows says
    what such a row contributes. So, per group, COUNT(*) = sum of cnt(k); SUM(row.x) = sum of x *
    cnt(k); SUM(key.y) = sum of sum_y(k); COUNT likewise; MIN and MAX over the values of rows whose key
    the other side has; AVG = SUM / COUNT. The sums are exact (integers: exact.py; a product leaving
    int64 is taken as a Python int), the answer is finished by the function's finish_groups as for
    joined rows. Cost: linear in the windows (keys are dense ids:
    a table lookup, or a sort of the distinct keys), not in the join's result (thesis 5.1's
    cardinality argument: per key value, the join pairs every row of one side with every row of
    the other). The row bound is still the join's size (its count is known exactly), so a join is
    refused or answered alike by this path and the others."""
    if len(inputs) != plan.k:
        raise InvalidInput(f"a join of {plan.k} sources needs {plan.k} lists of sub-windows")
    b = plan.bound
    plan.stats.evaluations += 1
    plan.stats.by_key += 1
    preps = [[pr for pr in (plan.prepare(p, sub) for sub in subs) if pr.n] for p, subs in enumerate(inputs)]
    sizes = [sum(pr.n for pr in xs) for xs in preps]
    r = b.group_by.source if b.group_by is not None else (0 if sizes[0] <= sizes[1] else 1)
    o = 1 - r
    classes = sorted(plan.class_cols[r])

    def keys(p):
        return [_concat_rows([x.keys[c] for x in preps[p]], np.int64) for c in classes]

    kr, ko, span = _dense_keys(keys(r), keys(o))
    cnt_o = np.bincount(ko, minlength=span).astype(np.int64)
    per_row = cnt_o[kr] if len(kr) else np.zeros(0, np.int64)
    hit = per_row > 0
    keep = None if hit.all() else hit  # the row side's rows whose key the key side has
    if keep is not None:
        kr, per_row = kr[keep], per_row[keep]

    def row_side(ref) -> tuple[np.ndarray, np.ndarray | None]:  # (values, validity or None) of the row side's joining rows
        values, valid = _side_column(preps[r], ref)
        if keep is not None:
            values, valid = values[keep], (None if valid is None else valid[keep])
        return values, (None if valid is None or valid.all() else valid)

    total = int(per_row.sum())
    if total > plan.max_rows:
        plan.too_many(total, "the join result")
    plan.stats.rows_computed += total
    if b.group_by is not None:
        gkeys = keys_with_nulls(*row_side(b.group_by))
        uniq, inverse = group_keys(gkeys, dense=gkeys.dtype.kind in "iu")  # a narrow range: counted, no sort
    else:
        uniq, inverse = np.zeros(1, dtype=np.int64), np.zeros(len(kr), dtype=np.int64)
    g = len(uniq)
    key_side: dict[tuple, object] = {}
    results = []
    for a, ref in zip(b.aggs, b.agg_refs):
        fn = a.fn
        s = plan.strings[ref.source if ref is not None else 0]
        if ref is None:  # COUNT(*)
            part = cast(JoinsByKey, fn).weighted_rows(a, None, None, per_row)
        elif ref.source == r:
            part = cast(JoinsByKey, fn).weighted_rows(a, *row_side(ref), per_row)
        else:  # the key side's partial per join key, taken at each joining row's key
            per_key = key_side.get((ref, fn.name))
            if per_key is None:
                per_key = key_side[(ref, fn.name)] = _key_partial(a, ref, preps[o], ko, span, s)
            part = _take(per_key, kr)
        reduced = fn.reduce_rows(a, part) if b.group_by is None else None
        if reduced is not None:  # one group: the rows reduced first (cheaper)
            part = reduced
            inv = np.zeros(len(part if isinstance(part, np.ndarray) else part[0]), dtype=np.int64)
        else:
            inv = inverse
        results.append(a.fn.finish_groups(a, inv, g, [part], uniq, s))
    if b.group_by is None:
        values = [res.tolist()[0] for res in results]
        rows = [tuple(values[it.agg] for it in b.items)]  # type: ignore[index]  # no GROUP BY: aggregates only
        rows = rows if b.limit is None else rows[: b.limit]
    else:
        rows = grouped_rows(b, uniq, results, plan.strings[b.group_by.source])
        if b.outer:
            rows = [tuple(a.fn.over(a, rows if item is None else [r[item] for r in rows]) for a, item in b.outer)]
    return Answer(plan.labels, typed_rows(rows, plan.types), "join", types=plan.types)

def _key_partial(a, ref: ColumnRef, xs: list[Prepared], key: np.ndarray, span: int, strings):
    """Per dense join key of the key side: the aggregate's from_group_rows partial of its non-null
    values (functions.py's partial algebra, as one sub-window's per-key contribution)."""
    values, valid = _side_column(xs, ref)
    if valid is not None and not valid.all():
        values, key = values[valid], key[valid]
    return a.fn.from_group_rows(a, key, span, values, key, strings)


def _take(part, at: np.ndarray):
    """A partial (one array, or a tuple of arrays, one entry per key) at the keys `at`."""
    return part[at] if isinstance(part, np.ndarray) else tuple(x[at] for x in part)
