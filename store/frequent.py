"""Frequent items over a window from per-sub-window top-k lists (thesis 6.2, Algorithm 6).

Each sub-window keeps the k keys with the largest value (a count, or a weighted sum such as bytes)
and delta_i, the k-th listed value: no key missing from list i has more than delta_i there (0 when
the list holds every key of its sub-window). Over the window, delta = sum of delta_i. For a key,
`lower` is the sum of the values listed for it (its true value is at least that) and `upper` adds
delta_i of every list it is missing from (its true value is at most that).

A threshold query reports every key whose `lower` exceeds the threshold, so a reported key is
always truly over it (no false positives). Algorithm 6's threshold is delta itself; a caller may
instead give an absolute threshold or a fraction of the window's total. A key whose true value
exceeds threshold + delta is always reported (its lower bound is at least its true value minus
delta); keys between the two may be missed, and `complete` says when none can be.

Values must be non-negative: the bounds rest on every unlisted value lying in [0, delta_i]. Sums
do not depend on the lists' order: integers are summed exactly (int64, or Python ints where int64
could wrap), floats correctly rounded per key (math.fsum), so float bounds hold up to that rounding.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from .errors import InvalidInput
from .synopsis import KeySummary, TopKList

_INT64_SAFE = 1 << 62


@dataclass(frozen=True)
class FrequentItem:
    """A reported key: its true value over the window lies in [lower, upper], and lower > threshold."""

    key: object
    lower: int | float
    upper: int | float


@dataclass(frozen=True)
class FrequentAnswer:
    """Every key whose listed value over the window exceeds `threshold`, largest `lower` first.

    `delta` is the sum of the lists' delta_i: the most any key on no list can have. `complete` is
    true when no unreported key can exceed the threshold (each unreported listed key's `upper`,
    and `delta`, are at most the threshold): the answer is then exactly the keys over it.
    """

    items: list[FrequentItem]
    delta: int | float
    threshold: int | float
    complete: bool

    @property
    def keys(self) -> list:
        return [i.key for i in self.items]


def weighted_top_k(summary: KeySummary, column: str, k: int) -> TopKList:
    """A sub-window's top-k list by SUM(column) instead of COUNT(*), built from its key synopsis.

    The key synopsis keeps a per-key sum of every numeric column, but its stored list ranks by
    count; a SUM-weighted threshold query needs lists ranked by the sum (delta_i its k-th sum).
    """
    if k < 1:
        raise InvalidInput(f"k must be at least 1, got {k}")
    if column not in summary.sums:
        raise InvalidInput(f"column {column!r} has no per-key sums in this synopsis", column=column)
    sums = summary.sums[column]
    if len(sums) and min(sums) < 0:
        raise InvalidInput(f"column {column!r} has a negative per-key sum; frequent items need "
                           "non-negative values", column=column)
    keys = summary.keys
    if len(keys) <= k:
        order = sorted(range(len(keys)), key=lambda i: -sums[i])
        return TopKList(keys[order], sums[order], 0)
    order = sorted(range(len(keys)), key=lambda i: -sums[i])[:k]
    return TopKList(keys[order], sums[order], sums[order[-1]])


def frequent_items(lists: Iterable[TopKList | tuple], *, threshold: int | float | None = None,
                   fraction: float | None = None, total: int | float | None = None) -> FrequentAnswer:
    """Algorithm 6 over the window's lists: a TopKList each, or a (keys, values, delta) tuple.

    With neither `threshold` nor `fraction`, the threshold is delta (Algorithm 6 as the thesis
    gives it). `fraction` asks for keys over fraction * `total` (the window's COUNT(*), or the sum
    of the weighted column, which the caller knows from the sub-windows' column summaries).
    """
    keys, values, deltas = [], [], []
    for i, lst in enumerate(lists):
        k_, v_, d_ = (lst.keys, lst.counts, lst.delta) if isinstance(lst, TopKList) else lst
        k_, v_ = np.asarray(k_), np.asarray(v_)
        if k_.shape != v_.shape or k_.ndim != 1:
            raise InvalidInput(f"lists[{i}]: keys and values must be 1-d arrays of one length")
        keys.append(k_)
        values.append(v_)
        deltas.append(d_)
    return frequent_items_arrays(keys, values, deltas, threshold=threshold, fraction=fraction, total=total)


def frequent_items_arrays(keys: Sequence[np.ndarray], values: Sequence[np.ndarray], deltas: Sequence,
                          *, threshold: int | float | None = None, fraction: float | None = None,
                          total: int | float | None = None) -> FrequentAnswer:
    """Algorithm 6 with the lists given as parallel sequences (list i: keys[i], values[i], deltas[i])."""
    if not (len(keys) == len(values) == len(deltas)):
        raise InvalidInput("keys, values and deltas must have one entry per list")
    for i, d in enumerate(deltas):
        if isinstance(d, bool) or not isinstance(d, (int, float, np.integer, np.floating)) or not d >= 0:
            raise InvalidInput(f"lists[{i}].delta must be a non-negative number, got {d!r}")
    values = [np.asarray(v) for v in values]
    floats = any(v.dtype.kind == "f" for v in values) or any(isinstance(d, (float, np.floating)) for d in deltas)
    delta = math.fsum(float(d) for d in deltas) if floats else sum(int(d) for d in deltas)
    thr = _threshold(delta, threshold, fraction, total)
    if sum(len(k) for k in keys) == 0:
        return FrequentAnswer([], delta, thr, delta <= thr)
    all_keys = np.concatenate([np.asarray(k) for k in keys])
    per_entry_delta = [np.full(len(k), d, dtype=np.float64 if floats else
                               (np.int64 if int(d) < _INT64_SAFE else object)) for k, d in zip(keys, deltas)]
    flat_values, flat_deltas = np.concatenate(values), np.concatenate(per_entry_delta)
    if not (flat_values >= flat_deltas).all():
        bad = next(i for i, (v, d) in enumerate(zip(values, deltas)) if len(v) and not (v >= d).all())
        raise InvalidInput(f"lists[{bad}] lists a value below its delta ({deltas[bad]}) or a negative "
                           "value: not a top-k list of non-negative values")
    uniq, inverse = np.unique(all_keys, return_inverse=True)
    if len(uniq) != len(all_keys):
        list_of = np.repeat(np.arange(len(keys)), [len(k) for k in keys])
        if len(np.unique(np.stack([list_of, inverse.ravel()]), axis=1)[0]) != len(all_keys):
            raise InvalidInput("a list names one key twice")
    lower = _sum_by_key(inverse, [np.asarray(v) for v in values], len(uniq), floats)
    seen_delta = _sum_by_key(inverse, per_entry_delta, len(uniq), floats)
    upper = [(delta - s) + lo for lo, s in zip(lower, seen_delta)] if not floats else \
        [math.fsum((delta, -s, lo)) for lo, s in zip(lower, seen_delta)]
    reported = [i for i in range(len(uniq)) if lower[i] > thr]
    reported.sort(key=lambda i: (-lower[i], i))
    complete = delta <= thr and all(upper[i] <= thr for i in range(len(uniq)) if not lower[i] > thr)
    items = [FrequentItem(_plain(uniq[i]), lower[i], upper[i]) for i in reported]
    return FrequentAnswer(items, delta, thr, bool(complete))


def _threshold(delta, threshold, fraction, total):
    if threshold is not None and fraction is not None:
        raise InvalidInput("give threshold or fraction, not both")
    if fraction is not None:
        if total is None:
            raise InvalidInput("fraction needs the window's total")
        if not (isinstance(fraction, (int, float)) and 0 <= fraction <= 1):
            raise InvalidInput(f"fraction must be in [0, 1], got {fraction!r}")
        if not (isinstance(total, (int, float, np.integer, np.floating)) and total >= 0):
            raise InvalidInput(f"total must be a non-negative number, got {total!r}")
        return fraction * total
    if threshold is None:
        return delta
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.integer, np.floating)) \
            or math.isnan(threshold) or threshold < 0:
        raise InvalidInput(f"threshold must be a non-negative number, got {threshold!r}")
    return threshold


def _sum_by_key(inverse: np.ndarray, parts: list[np.ndarray], n: int, floats: bool) -> list:
    """Per key, the exact sum of its entries (entries in concatenation order of `parts`)."""
    if floats:
        groups: list[list[float]] = [[] for _ in range(n)]
        flat = [float(x) for p in parts for x in p]
        for g, x in zip(inverse.tolist(), flat):
            groups[g].append(x)
        return [math.fsum(g) for g in groups]
    if all(p.dtype.kind in "iu" for p in parts):
        ints = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
        if not len(ints) or int(ints.max()) * len(ints) < _INT64_SAFE:
            return _int64_sums(inverse, ints.astype(np.int64), n)
    out = [0] * n
    for g, x in zip(inverse.tolist(), (int(x) for p in parts for x in p.tolist())):
        out[g] += x
    return out


def _int64_sums(inverse: np.ndarray, flat: np.ndarray, n: int) -> list[int]:
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, inverse, flat)
    return out.tolist()


def _plain(key):
    return key.item() if isinstance(key, np.generic) else key
