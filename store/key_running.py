"""Per-key running synopses of a string group-by column (thesis 2.3.4's running synopsis, per key).

After each sealed sub-window of the window, every key's running COUNT(*), COUNT(c) of each numeric
column and integer SUM(c) of each integer column, as arrays with one slot per key of this column.
A GROUP BY of COUNT, integer SUM and AVG over the n_q youngest sub-windows is then the difference
of two such arrays: O(keys), answered like a probe in one atomic read, instead of a merge of n_q
key synopses (O(n_q * keys)).

Slots are given to keys (dictionary codes; the null group's is -1) as the column meets them, in
code order when the totals are rebuilt; a key that has left the window keeps its slot until the
next rebuild, which comes once more than half the slots (plus SLACK) are such keys, checked once
every n slides.

Exact, or nothing: the totals are int64 only while a bound proves none can wrap. A window whose
totals do not fit keeps none until the sub-window that did not fit has left it, and `range` then
answers None (the query then reads the sub-windows' key synopses, as a synopsis scan). They do
not fit when a total could wrap, when a key synopsis holds Python ints, or when the arrays would
hold more than MAX_CELLS cells or more than KEEP_RATIO times the cells of the key synopses they
sum (keys that change from one sub-window to the next: running totals would cost more memory than
they save time). Floating-point sums are not kept: a difference of running float sums is not the
sum of the window's values.
"""
from __future__ import annotations

import numpy as np

from .exact import INT64_MAX, max_abs
from .synopsis import KeySummary, TopKList

MAX_CELLS = 1 << 23     # int64 cells per column at most (64 MiB): sub-windows kept x slots x totals
KEEP_RATIO = 4          # ... and at most this many times the key synopses' entries they sum (+ SLACK)
SLACK = 1024
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
        # slide -> name -> totals per slot after it, for the window's sub-windows and the one
        # before the oldest (its totals are the oldest one's "before"); from `base` on, where
        # every total was 0 before it
        self.after: dict[int, dict[str, np.ndarray]] = {}
        self.bound: dict[int, int] = {}  # slide -> a bound on any total's magnitude after it
        self.entries: dict[int, int] = {}  # slide -> keys in its key synopsis (what the totals are weighed against)
        self.base = 0
        self.retry_at = 0  # no running totals before this slide (one that did not fit is in the window)
        self._new_slots()

    def _new_slots(self) -> None:
        self.slot_of = np.full(0, -1, dtype=np.int32)  # code + 1 -> slot, -1: none
        self.codes = np.empty(0, dtype=np.int32)       # slot -> code
        self.ordered = True                            # codes ascending with slots

    # -- maintenance, at each slide ----------------------------------------------------------------
    def add(self, slide: int, subs: list) -> None:
        """Sub-window `slide` was sealed; `subs` is the window (index: version mod n)."""
        for d in (self.after, self.bound, self.entries):
            d.pop(slide - self.n - 1, None)
        if slide < self.retry_at:
            return
        prev = self.after.get(slide - 1)
        if prev is not None and self._extend(slide, prev, self.bound[slide - 1], subs[slide % self.n]):
            if slide % self.n == 0 and 2 * self._live(slide) + SLACK < len(self.codes):
                self.rebuild(slide, subs)  # half the slots are keys that have left the window
            return
        self.rebuild(slide, subs)

    def _live(self, latest: int) -> int:
        """Keys in the window (slots whose count over it is not 0)."""
        ks = self.range(max(self.base, latest - self.n + 1), latest, ())
        return len(self.codes) if ks is None else len(ks.keys)

    def rebuild(self, latest: int, subs: list) -> None:
        """Recompute the totals from the window's sub-windows, 0 before its oldest; slots in code order."""
        self.after.clear()
        self.bound.clear()
        self.entries.clear()
        self._new_slots()
        oldest = max(0, latest - self.n + 1)
        while oldest < latest and (subs[oldest % self.n] is None or subs[oldest % self.n].slide != oldest):
            oldest += 1  # (a window being restored: its older sub-windows are placed next)
        self.base = oldest
        window = [subs[v % self.n] for v in range(oldest, latest + 1)]
        if any(sub is None or sub.slide != v for v, sub in zip(range(oldest, latest + 1), window)):
            self.retry_at = latest + self.n
            return
        keys = [sub.synopsis.by_key[self.column].keys for sub in window]
        self._slots(np.unique(np.concatenate(keys)).astype(np.int32) if keys else np.empty(0, dtype=np.int32))
        prev, bound = None, 0
        for v, sub in zip(range(oldest, latest + 1), window):
            if not self._extend(v, prev, bound, sub):
                self.after.clear()
                self.bound.clear()
                self.entries.clear()
                self.retry_at = v + self.n  # once v has left the window
                return
            prev, bound = self.after[v], self.bound[v]
        self.retry_at = 0

    def _slots(self, codes: np.ndarray) -> np.ndarray:
        """The slots of sorted, unique codes, new ones given the next slots."""
        at = codes.astype(np.intp) + 1
        top = int(at[-1]) + 1 if len(at) else 0
        if top > len(self.slot_of):
            grown = np.full(max(top, 2 * len(self.slot_of)), -1, dtype=np.int32)
            grown[:len(self.slot_of)] = self.slot_of
            self.slot_of = grown
        slots = self.slot_of[at]
        new = slots < 0
        if new.any():
            fresh = codes[new]
            if len(self.codes) and fresh[0] < self.codes[-1]:
                self.ordered = False  # (a code the column meets after larger ones: met in another column first)
            start = len(self.codes)
            slots[new] = np.arange(start, start + len(fresh), dtype=np.int32)
            self.slot_of[at[new]] = slots[new]
            self.codes = np.concatenate([self.codes, fresh.astype(np.int32)])
        return slots

    def _extend(self, v: int, prev: dict | None, bound: int, sub) -> bool:
        """after[v] = prev + sub-window v's key synopsis; False if it does not fit."""
        ks: KeySummary = sub.synopsis.by_key[self.column]
        cols = sub.synopsis.columns
        # every key's total of a column moves by at most rows * max |value| (a count: by rows)
        bound += sub.rows * max([1, *(max_abs(cols[c].min, cols[c].max) for c in self.integers if cols[c].count)])
        if bound > _BOUND or any(ks.sums[c].dtype.kind != "i" for c in self.integers):
            return False
        idx = self._slots(ks.keys)
        size = len(self.codes)
        held = len(self.after) + 1  # sub-windows' totals held, this one's included
        if (held * size * len(self.names) > MAX_CELLS
                or held * size > KEEP_RATIO * (sum(self.entries.values()) + len(ks.keys)) + SLACK):
            return False
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
        self.entries[v] = len(ks.keys)
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
        arrays = sum(a.nbytes for after in self.after.values() for a in after.values())
        return arrays + self.slot_of.nbytes + self.codes.nbytes

    def kept(self, latest: int) -> bool:
        """Whether totals are kept for the window ending at slide `latest` (any range of it)."""
        if latest < 0:
            return False  # (nothing sealed yet: an empty scan answers)
        oldest = max(0, latest - self.n + 1)
        return latest in self.after and oldest >= self.base and (oldest == self.base or oldest - 1 in self.after)

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
        keys = self.codes[present]
        if not self.ordered:
            order = np.argsort(keys)
            present, keys = present[order], keys[order]
        sums = {c: total(c)[present] for c in columns if c in after}
        valid = {c: total("#" + c)[present] for c in columns}
        return KeySummary(keys, counts[present], sums, _NO_TOPK, valid)

    def _check(self, latest: int, subs: list) -> None:
        """Invariants (property tests call this after every step): totals are kept for the
        window's sub-windows from `base` on (and the one before the oldest); each one's totals are
        the previous one's (0 before `base`) plus its key synopsis; slots and codes agree."""
        assert len(self.codes) == len(np.unique(self.codes))
        assert np.array_equal(self.slot_of[self.codes.astype(np.intp) + 1], np.arange(len(self.codes)))
        assert np.count_nonzero(self.slot_of >= 0) == len(self.codes)
        assert not self.ordered or np.all(np.diff(self.codes) > 0)
        for v, after in self.after.items():
            assert max(self.base, latest - self.n) <= v <= latest, (v, self.base, latest)
            prev = self.after.get(v - 1)
            if v > latest - self.n:  # (v's sub-window is still in the window)
                assert prev is not None or v == self.base
                ks = subs[v % self.n].synopsis.by_key[self.column]
                assert self.entries[v] == len(ks.keys)
                for name, arr in after.items():
                    want = np.zeros(len(arr), dtype=np.int64)
                    if prev is not None:
                        want[:len(prev[name])] = prev[name]
                    np.add.at(want, self.slot_of[ks.keys.astype(np.intp) + 1], self._part(ks, name))
                    assert np.array_equal(arr, want), (v, name)
