"""Merging the partials of a plan's sub-windows (in window order) into each aggregate's finished
values: one value per aggregate without GROUP BY, one array per aggregate over the merged, sorted
group keys with it, and the merged top-k lists of APPROXIMATE. The merges themselves are each
function's own (functions.py); this module only lines the partials up. It must not read sub-windows,
filter (HAVING), order or decode."""
from __future__ import annotations

from typing import Any, cast

import numpy as np

from ..binder import BoundQuery
from ..exact import grouped_count
from ..functions import Combines, Inverts
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


def inverts(b: BoundQuery) -> bool:
    """Whether the contributions of `b` combine and each has an inverse (every aggregate is
    functions.invertible: COUNT, integer SUM and AVG): a combined window then slides by what
    entered and left (uncombine, slide_combined) rather than being combined again."""
    return combines(b) and all(a.fn.invertible(a) for a in b.aggs)


def negated(b: BoundQuery, contribution: Any) -> Any:
    """The contribution that combined with `contribution` gives the empty one (only where
    `inverts(b)`): each aggregate's own Inverts.negate, the same keys with GROUP BY."""
    if b.group_by is None:
        return tuple(cast(Inverts, a.fn).negate(a, contribution[i]) for i, a in enumerate(b.aggs))
    keys, parts = contribution
    return keys, tuple(cast(Inverts, a.fn).negate(a, parts[i]) for i, a in enumerate(b.aggs))


def uncombine(b: BoundQuery, total: Any, parts: list, strings) -> Any:
    """An ungrouped combined contribution minus `parts` (each combined into it, or within it: a
    cover's pieces, thesis 8.3.3 CS7): `total` combined with their negations (only where
    `inverts(b)`)."""
    return combine_contributions(b, [total, *(negated(b, p) for p in parts)], strings)


def slide_combined(b: BoundQuery, combined: Any, presence: np.ndarray, entering: list, leaving: list, strings,
                   dtype: np.dtype | None = None) -> tuple[Any, np.ndarray]:
    """A grouped combined contribution (sorted unique keys; only where `inverts(b)`) moved: the
    contributions `entering` combined in and `leaving` (among those it was combined from) taken
    out, by the aggregates' own combine_groups over their negations. `presence`: per key, how many
    of the contributions it was combined from hold the key; a key none holds any more leaves (its
    sums and counts are 0, but the window has no row of it: combine_contributions would not list
    it). The keys that entered are merged into the sorted ones (searchsorted), which are not
    sorted again. `dtype`: the keys' type in the moved window (as concatenating its contributions'
    keys gives it: an integer key with NULL is an object array). Returns the moved contribution
    and its presence."""
    if not entering and not leaving:
        return combined, presence
    keys, parts = combined
    delta = list(entering) + [negated(b, c) for c in leaving]
    dkeys = np.concatenate([c[0] for c in delta])
    signs = np.concatenate([np.full(len(c[0]), 1 if i < len(entering) else -1, dtype=np.int64)
                            for i, c in enumerate(delta)])
    du, dinv = group_keys(dkeys, dense=b.group_type == "string" and len(b.group_keys) == 1)
    if du.dtype != keys.dtype:
        common = np.result_type(keys.dtype, du.dtype)
        keys, du = keys.astype(common, copy=False), du.astype(common, copy=False)
    at = np.searchsorted(keys, du)
    found = at < len(keys)
    found[found] = keys[at[found]] == du[found]
    if found.all():
        uniq, old, dpos = keys, np.arange(len(keys)), at
    else:
        new = du[~found]  # (sorted)
        ins = at[~found]  # each new key's place among the kept ones (before keys[ins])
        uniq = np.insert(keys, ins, new)
        # a kept key moves up by the new keys placed before it (no comparison of keys: composite
        # keys are byte strings)
        old = np.arange(len(keys)) + np.cumsum(np.bincount(ins, minlength=len(keys) + 1))[:len(keys)]
        dpos = np.empty(len(du), dtype=np.int64)
        dpos[found] = old[at[found]]
        dpos[~found] = ins + np.arange(len(new))
    inverse = np.concatenate([old, dpos[dinv]])
    g = len(uniq)
    moved = tuple(cast(Combines, a.fn).combine_groups(a, inverse, g, [parts[i]] + [c[1][i] for c in delta], strings)
                  for i, a in enumerate(b.aggs))
    count = grouped_count(inverse, np.concatenate([presence, signs]), g)
    keep = count > 0
    if not keep.all():
        uniq, count, moved = uniq[keep], count[keep], tuple(_take(p, keep) for p in moved)
    if dtype is not None and uniq.dtype != dtype:
        uniq = uniq.astype(dtype)
    return (uniq, moved), count


def _take(part: Any, keep: np.ndarray) -> Any:
    """A per-key partial (an array, or a tuple of arrays: from_group_rows' forms) at the kept keys."""
    return tuple(_take(p, keep) for p in part) if isinstance(part, tuple) else part[keep]


def combine_prefixes(b: BoundQuery, contributions: list, ends: list[int], strings, presence: bool = False) -> list:
    """combine_contributions(b, contributions[:n], strings) for each n of `ends` (ascending, each
    at least 1 and at most len(contributions)): one youngest-to-oldest scan answers the shorter
    windows on the way (thesis 8.4.3, CS2), a running contribution combined with the next
    contributions at each length. With GROUP BY the keys of the longest prefix are grouped once
    (sorted unique keys, each row's place among them): each step's keys are those present in the
    running contribution and the new rows, in that order, so no step sorts keys again; the
    aggregates' own combine_groups combine them. `presence` (GROUP BY only): each item is
    (the combined contribution, per key how many of the n contributions hold it: slide_combined's)."""
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
    # A NULL key makes uniq an object array; a prefix without it keeps the key type it has alone.
    typed = [c[0].dtype for c in contributions[:last]] if uniq.dtype.kind == "O" else None
    held = np.zeros(len(uniq), dtype=np.int64) if presence else None  # per key of uniq, contributions holding it
    for n in ends:
        if n > at:
            new = inverse[sizes[at - 1] if at else 0:sizes[n - 1]]
            if held is not None:
                held += np.bincount(new, minlength=len(uniq))  # (a contribution's keys are unique)
            if at == 0 and n == 1:
                running, where = contributions[0], new  # (its keys are sorted and unique)
            else:
                rows = np.concatenate([where, new]) if at else new
                present = np.bincount(rows, minlength=len(uniq)) > 0
                where = np.flatnonzero(present)
                parts = ([running] if at else []) + contributions[at:n]
                inv = (np.cumsum(present) - 1)[rows]
                keys = uniq[where]
                if typed is not None and (prefix_type := np.result_type(*typed[:n])).kind != "O":
                    keys = keys.astype(prefix_type)
                running = keys, tuple(cast(Combines, a.fn).combine_groups(a, inv, len(where), [c[1][i] for c in parts],
                                                                                 strings) for i, a in enumerate(b.aggs))
            at = n
        out.append(running if held is None else (running, held[where]))
    return out
