"""Merging the partials of a plan's sub-windows (in window order) into each aggregate's finished
values: one value per aggregate without GROUP BY, one array per aggregate over the merged, sorted
group keys with it, and the merged top-k lists of APPROXIMATE. The merges themselves are each
function's own (functions.py); this module only lines the partials up. It must not read sub-windows,
filter (HAVING), order or decode."""
from __future__ import annotations

from typing import Any, cast

import numpy as np

from ..binder import BoundQuery
from ..functions import Combines
from ..synopsis import group_keys


def finish_values(b: BoundQuery, contributions: list, strings) -> list:
    """Without GROUP BY: each aggregate's value over all contributions."""
    return [a.fn.finish(a, [c[i] for c in contributions], strings) for i, a in enumerate(b.aggs)]


def finish_groups(b: BoundQuery, contributions: list, strings) -> tuple[np.ndarray, list[np.ndarray]]:
    """With GROUP BY: the sorted unique keys of all contributions, and per aggregate its values."""
    if not contributions:
        return np.empty(0, dtype=np.int64), [np.empty(0) for _ in b.aggs]
    if len(contributions) == 1:  # its keys are sorted and unique: nothing to merge
        keys, parts = contributions[0]
        return keys, [a.fn.finish_unique(a, parts[i], keys, strings) for i, a in enumerate(b.aggs)]
    uniq, inverse = group_keys(np.concatenate([c[0] for c in contributions]),
                               dense=b.group_type == "string" and len(b.group_keys) == 1)
    g = len(uniq)
    return uniq, [a.fn.finish_groups(a, inverse, g, [c[1][i] for c in contributions], uniq, strings)
                  for i, a in enumerate(b.aggs)]


def combines(b: BoundQuery) -> bool:
    """Whether the contributions of `b` combine into one (combine_contributions): every aggregate
    combines (functions.combine_ok), and there is no projection or APPROXIMATE top k."""
    return bool(b.aggs) and not b.projection and not b.approximate and all(a.fn.combine_ok(a) for a in b.aggs)


def combine_contributions(b: BoundQuery, contributions: list, strings) -> Any:
    """Contributions combined into one of the same form (only where `combines(b)`): finishing it
    gives what finishing them all gives. With GROUP BY its keys are sorted and unique."""
    if len(contributions) == 1:
        return contributions[0]
    if b.group_by is None:
        return tuple(cast(Combines, a.fn).combine(a, [c[i] for c in contributions], strings) for i, a in enumerate(b.aggs))
    uniq, inverse = group_keys(np.concatenate([c[0] for c in contributions]),
                               dense=b.group_type == "string" and len(b.group_keys) == 1)
    g = len(uniq)
    return uniq, tuple(cast(Combines, a.fn).combine_groups(a, inverse, g, [c[1][i] for c in contributions], strings)
                       for i, a in enumerate(b.aggs))


def combine_prefixes(b: BoundQuery, contributions: list, ends: list[int], strings) -> list:
    """combine_contributions(b, contributions[:n], strings) for each n of `ends` (ascending, each
    at least 1 and at most len(contributions)): one youngest-to-oldest scan answers the shorter
    windows on the way (thesis 8.4.3, CS2), a running contribution combined with the next
    contributions at each length. With GROUP BY the keys of the longest prefix are grouped once
    (sorted unique keys, each row's place among them): each step's keys are those present in the
    running contribution and the new rows, in that order, so no step sorts keys again; the
    aggregates' own combine_groups combine them."""
    out: list = []
    running: Any = None
    at = 0
    if b.group_by is None:
        for n in ends:
            if n > at:
                running = combine_contributions(b, ([running] if at else []) + contributions[at:n], strings)
                at = n
            out.append(running)
        return out
    if not ends:
        return out
    last = ends[-1]
    sizes = np.cumsum([len(c[0]) for c in contributions[:last]])  # rows of the first n: sizes[n - 1]
    uniq, inverse = group_keys(np.concatenate([c[0] for c in contributions[:last]]),
                               dense=b.group_type == "string" and len(b.group_keys) == 1)
    where = inverse[:0]  # the running contribution's keys, as places in uniq
    for n in ends:
        if n > at:
            new = inverse[sizes[at - 1] if at else 0:sizes[n - 1]]
            if at == 0 and n == 1:
                running, where = contributions[0], new  # (its keys are sorted and unique)
            else:
                rows = np.concatenate([where, new]) if at else new
                present = np.bincount(rows, minlength=len(uniq)) > 0
                where = np.flatnonzero(present)
                parts = ([running] if at else []) + contributions[at:n]
                inv = (np.cumsum(present) - 1)[rows]
                running = uniq[where], tuple(cast(Combines, a.fn).combine_groups(a, inv, len(where), [c[1][i] for c in parts],
                                                                                 strings) for i, a in enumerate(b.aggs))
            at = n
        out.append(running)
    return out
