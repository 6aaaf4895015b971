"""Reading one sub-window for a plan: its share of the answer (a partial) from its rows (WHERE
masks, per-group partials, projections) or from its synopses. A reader is resolved once per plan,
since a read is on the hot path of every query (one per sub-window). It must not merge partials,
order rows or decode storage into answer values."""
from __future__ import annotations

from functools import partial
from typing import Any, Callable, cast

import numpy as np

from .. import frequent_query
from ..binder import BoundQuery
from ..functions import ReadsKeySynopsis, ReadsSynopsis
from ..kinds import AccessPath
from ..subwindow import SubWindow
from ..synopsis import group_keys, keys_with_nulls
from .decode import composite_keys


def reader(bound: BoundQuery, access: AccessPath, strings, topk: int = 16) -> Callable[[SubWindow], Any]:
    """The function that reads one sub-window's partial for `bound` on path `access`."""
    if bound.projection:
        return partial(read_projection, bound, strings)
    if access == AccessPath.WINDOW:
        return partial(read_rows, bound, strings)
    if bound.approximate:
        return frequent_query.reader(bound, strings, topk)
    if bound.group_by is None:
        getters = [cast(ReadsSynopsis, b.fn).read_synopsis(b) for b in bound.aggs]
        return lambda sub: tuple(get(sub) for get in getters)
    return partial(read_key_synopsis, bound)


def read_rows(b: BoundQuery, strings, sub: SubWindow) -> Any:
    """A scan of the sub-window's rows: per aggregate its partial, per group with GROUP BY."""
    cols = sub.columns
    mask = where_mask(b, strings, cols, sub.rows) if b.where else None
    rows = int(np.count_nonzero(mask)) if mask is not None else sub.rows
    if rows == sub.rows:
        mask = None  # every row selected (WHERE len > 0, as a rule): the columns as they are, no copies
    selected: dict[str, Any] = {}  # a column's selected rows, taken once for all the aggregates over it

    def sel(c):
        got = selected.get(c)
        if got is None:
            got = selected[c] = cols[c][mask] if mask is not None else cols[c]
        return got

    def valid(c):  # the selected rows' validity of c, or None when they hold no null
        m = cols.get("?" + c)
        if m is None:
            return None
        m = sel("?" + c)
        return None if m.all() else m

    if b.group_by is None:
        out = []
        for a in b.aggs:
            values = None
            if a.column:
                values, m = sel(a.column), valid(a.column)
                values = values if m is None else values[m]
            out.append(a.fn.from_rows(a, values, rows, strings))
        return tuple(out)
    if len(b.group_keys) > 1:
        keys = composite_keys([(sel(c), valid(c)) for c in b.group_keys])
    else:
        keys = keys_with_nulls(sel(b.group_by), valid(b.group_by))
    uniq, inverse = group_keys(keys, dense=b.group_type == "string" and len(b.group_keys) == 1)
    parts = []
    for a in b.aggs:
        if not a.column:
            parts.append(a.fn.from_group_rows(a, inverse, len(uniq), None, keys, strings))
            continue
        values, m = sel(a.column), valid(a.column)
        if m is None:
            parts.append(a.fn.from_group_rows(a, inverse, len(uniq), values, keys, strings))
        else:
            parts.append(a.fn.from_group_rows(a, inverse[m], len(uniq), values[m], keys[m], strings))
    return (uniq, tuple(parts))


def read_projection(b: BoundQuery, strings, sub: SubWindow) -> Any:
    """A projection's share of one sub-window: its selected rows' columns, with their validity."""
    cols = sub.columns
    mask = where_mask(b, strings, cols, sub.rows) if b.where else None
    out = []
    for c in dict.fromkeys(b.projection):
        values, valid = cols[c], cols.get("?" + c)
        if mask is not None:
            values, valid = values[mask], (None if valid is None else valid[mask])
        out.append((c, values, valid))
    return out


def read_key_synopsis(b: BoundQuery, sub: SubWindow) -> Any:
    """A GROUP BY's share from the sub-window's per-key synopsis of its declared column."""
    ks = sub.synopsis.by_key[b.group_by]  # type: ignore[index]  # with GROUP BY only
    return ks.keys, tuple([cast(ReadsKeySynopsis, a.fn).read_key_synopsis(a, ks) for a in b.aggs])


def where_mask(b: BoundQuery, strings, cols, rows: int) -> np.ndarray:
    """The rows WHERE selects: an OR of conjunctions of predicates."""
    out = None
    for conj in b.where:
        m = None
        for p in conj:  # each predicate's mask is a new array: the next ones are ANDed into the first
            pm = p.mask(cols[p.column], strings, cols.get("?" + p.column))
            m = pm if m is None else np.logical_and(m, pm, out=m)
        m = np.ones(rows, dtype=bool) if m is None else m
        out = m if out is None else (out | m)
    return out  # type: ignore[return-value]  # callers pass a WHERE
