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
    windows on the way (thesis 8.4.3, CS2). With GROUP BY the keys of the longest prefix are
    grouped once, and each shorter prefix's groups are those its rows have (its sorted unique
    keys are a subsequence of the longest's): the aggregates' own combine_groups then combine
    each prefix, rather than a running contribution's keys sorted again at every length."""
    out: list = []
    if b.group_by is None:
        running, at = None, 0
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
    made: dict[int, Any] = {}
    for n in ends:
        got = made.get(n)
        if got is None:
            if n == 1:
                got = contributions[0]
            else:
                inv, keys = inverse[:sizes[n - 1]], uniq
                if n < last:
                    present = np.bincount(inv, minlength=len(uniq)) > 0
                    if not present.all():
                        inv, keys = (np.cumsum(present) - 1)[inv], uniq[present]
                got = keys, tuple(cast(Combines, a.fn).combine_groups(a, inv, len(keys), [c[1][i] for c in contributions[:n]],
                                                                      strings) for i, a in enumerate(b.aggs))
            made[n] = got
        out.append(got)
    return out
