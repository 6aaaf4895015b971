"""Per-key running synopses of a string group-by column (thesis 2.3.4's running synopsis, per key).

After each sealed sub-window of the window, every key's running COUNT(*), COUNT(c) of each numeric
column and integer SUM(c) of each integer column, as arrays indexed by the key's dictionary code
(+1: the null group's code is -1). A GROUP BY of COUNT, integer SUM and AVG over the n_q youngest
sub-windows is then the difference of two such arrays: O(keys), answered like a probe in one atomic
read, instead of a merge of n_q key synopses (O(n_q * keys)).

Exact, or nothing: the totals are int64 only while a bound proves none can wrap; a window whose
keys or totals do not fit (MAX_CELLS, the bound, a key synopsis whose sums are Python ints) keeps
no running totals until the sub-window that did not fit has left it, and `range` then answers
None (the planner merges the sub-windows' key synopses in the same read instead). Floating-point
sums are not kept: a difference of running float sums is not the sum of the window's values.
"""
from __future__ import annotations

import numpy as np

from .exact import INT64_MAX, max_abs
from .synopsis import KeySummary, TopKList

MAX_CELLS = 1 << 23     # int64 cells kept per column (64 MiB): (n + 1) sub-windows x keys x totals
_BOUND = INT64_MAX >> 1  # a running total's magnitude stays below this (a difference of two cannot wrap)
_NO_TOPK = TopKList(np.empty(0, dtype=np.int32), np.empty(0, dtype=np.int64), 0)


class RunningKeys:
    """The running per-key totals of group-by column `column` of a window of n sub-windows."""

    def __init__(self, column: str, n: int, numeric: list[str], integers: list[str]):
        self.column = column
        self.n = n
        self.numeric = list(numeric)    # COUNT(c) of each, kept as "#c"
        self.integers = list(integers)  # SUM(c) of each
        self.names = ["*", *("#" + c for c in self.numeric), *self.integers]
        # slide -> name -> totals after it (index code + 1), for the window's sub-windows and the
        # one before the oldest (its totals are the oldest one's "before"); from `base` on, where
        # every total was 0 before it
        self.after: dict[int, dict[str, np.ndarray]] = {}
        self.bound: dict[int, int] = {}  # slide -> a bound on any total's magnitude after it
        self.base = 0
        self.retry_at = 0  # no running totals before this slide (one that did not fit is in the window)

    # -- maintenance, at each slide ----------------------------------------------------------------
    def add(self, slide: int, subs: list) -> None:
        """Sub-window `slide` was sealed; `subs` is the window (index: version mod n)."""
        self.after.pop(slide - self.n - 1, None)
        self.bound.pop(slide - self.n - 1, None)
        if slide < self.retry_at:
            return
        prev = self.after.get(slide - 1)
        sub = subs[slide % self.n]
        if prev is not None and self._extend(slide, prev, self.bound[slide - 1], sub):
            return
        self.rebuild(slide, subs)

    def rebuild(self, latest: int, subs: list) -> None:
        """Recompute the totals from the window's sub-windows, 0 before its oldest."""
        self.after.clear()
        self.bound.clear()
        oldest = max(0, latest - self.n + 1)
        while oldest < latest and (subs[oldest % self.n] is None or subs[oldest % self.n].slide != oldest):
            oldest += 1  # (a window being restored: its older sub-windows are placed next)
        self.base = oldest
        prev, bound = None, 0
        for v in range(oldest, latest + 1):
            sub = subs[v % self.n]
            if sub is None or sub.slide != v or not self._extend(v, prev, bound, sub):
                self.after.clear()
                self.bound.clear()
                self.retry_at = v + self.n  # once v has left the window
                return
            prev, bound = self.after[v], self.bound[v]
        self.retry_at = 0

    def _extend(self, v: int, prev: dict | None, bound: int, sub) -> bool:
        """after[v] = prev + sub-window v's key synopsis; False if it does not fit."""
        ks: KeySummary = sub.synopsis.by_key[self.column]
        cols = sub.synopsis.columns
        # every key's total of a column moves by at most rows * max |value| (a count: by rows)
        bound += sub.rows * max([1, *(max_abs(cols[c].min, cols[c].max) for c in self.integers if cols[c].count)])
        if bound > _BOUND or any(ks.sums[c].dtype.kind != "i" for c in self.integers):
            return False
        size = int(ks.keys.max()) + 2 if len(ks.keys) else 0
        if prev is not None:
            size = max(size, len(prev["*"]))
        if (self.n + 1) * size * len(self.names) > MAX_CELLS:
            return False
        idx = ks.keys.astype(np.intp) + 1
        out = {}
        for name in self.names:
            arr = np.zeros(size, dtype=np.int64)
            if prev is not None:
                arr[:len(prev[name])] = prev[name]
            arr[idx] += self._part(ks, name)  # (a sub-window's keys are unique)
            arr.flags.writeable = False
            out[name] = arr
        self.after[v] = out
        self.bound[v] = bound
        return True

    @staticmethod
    def _part(ks: KeySummary, name: str) -> np.ndarray:
        if name == "*":
            return ks.counts
        if name[0] == "#":
            return ks.valid[name[1:]]
        return ks.sums[name]

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for after in self.after.values() for a in after.values())

    # -- reading ------------------------------------------------------------------------------------
    def range(self, lo: int, hi: int, columns) -> KeySummary | None:
        """The key summary of sub-windows lo..hi (their keys, sorted, with COUNT(*), and of each
        of `columns` COUNT(c) and, for an integer c, SUM(c)), or None when no running totals are
        kept."""
        after = self.after.get(hi)
        if after is None or lo < self.base:
            return None
        before = self.after.get(lo - 1) if lo > self.base else None
        if before is None and lo > self.base:
            return None
        def total(name: str) -> np.ndarray:
            a = after[name]
            if before is None:
                return a
            out = a.copy()
            out[:len(before[name])] -= before[name]
            return out
        counts = total("*")
        present = np.flatnonzero(counts)
        keys = (present - 1).astype(np.int32)
        sums = {c: total(c)[present] for c in columns if c in after}
        valid = {c: total("#" + c)[present] for c in columns}
        return KeySummary(keys, counts[present], sums, _NO_TOPK, valid)

    def _check(self, latest: int, subs: list) -> None:
        """Invariants (property tests call this after every step): totals are kept for the
        window's sub-windows from `base` on (and the one before the oldest), and each one's totals
        are the previous one's (0 before `base`) plus its key synopsis."""
        for v, after in self.after.items():
            assert max(self.base, latest - self.n) <= v <= latest, (v, self.base, latest)
            prev = self.after.get(v - 1)
            if v > latest - self.n:  # (v's sub-window is still in the window)
                assert prev is not None or v == self.base
                ks = subs[v % self.n].synopsis.by_key[self.column]
                for name, arr in after.items():
                    want = np.zeros(len(arr), dtype=np.int64)
                    if prev is not None:
                        want[:len(prev[name])] = prev[name]
                    np.add.at(want, ks.keys.astype(np.intp) + 1, self._part(ks, name))
                    assert np.array_equal(arr, want), (v, name)
