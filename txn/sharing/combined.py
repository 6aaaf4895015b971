"""The combined windows of shared readers kept from one joint execution to the next (thesis 8.3.1
CS2, 8.4.3-8.4.4: an execution costs the intervals it accesses). Per reader (its read key) and
length, the combined contribution of the sub-windows it answered last; the next execution of that
reader combines in the sub-windows that entered and takes out those that left (store/planner/
merge.slide_combined), where its aggregates are invertible (merge.inverts), instead of combining
the whole window again. Owned by SharedTasks (one per engine), used by SharedPlan.finish. Pure:
no threads, clock or I/O; it reads no sub-window, only the contributions it is given. A shared
execution's final merge may run on a worker thread (txn/schedule/offload.py) while another runs
inline: a kept window never changes once made (a move makes a new one), and keeping one is a step
under a lock, as store/memo.py's put."""
from __future__ import annotations

import collections
import threading
from typing import Any, Hashable

import numpy as np

from windowstore.store.planner.merge import combine_contributions, combine_prefixes, slide_combined, uncombine

# Bounds on what is kept (the least recently used window first out): windows, and the keys of the
# grouped ones (a window of K keys holds its keys, its aggregates' per-key partials and a count).
_lock = threading.Lock()  # _keep's replacement, count and eviction as one step

MAX_WINDOWS = 512
MAX_KEYS = 4_000_000


class CombinedWindow:
    """One reader's combined contribution over the contiguous sub-window versions of `held`
    (version -> that sub-window's contribution, as the memo gave it: the identity of each is
    checked before it is taken out again), and with GROUP BY `presence`: per key of the combined
    contribution, how many of the held contributions hold it, and `kinds`: how many of them have
    keys of each dtype (the combined keys' dtype is theirs together: merge.slide_combined)."""

    __slots__ = ("held", "combined", "presence", "kinds")

    def __init__(self, held: dict[int, Any], combined: Any, presence: np.ndarray | None,
                 kinds: collections.Counter | None = None):
        self.held, self.combined, self.presence = held, combined, presence
        if kinds is None and presence is not None:
            kinds = collections.Counter(c[0].dtype for c in held.values())
        self.kinds = kinds

    def keys(self) -> int:
        return 0 if self.presence is None else len(self.presence)

    def _check(self) -> None:
        versions = sorted(self.held)
        assert versions and versions == list(range(versions[0], versions[-1] + 1)), \
            f"a combined window holds contiguous sub-windows ({versions[:3]}...{versions[-3:]})"
        if self.presence is None:
            return
        keys = self.combined[0]
        assert len(keys) == len(self.presence) and (self.presence > 0).all(), "each key held by a contribution"
        held = np.concatenate([c[0] for c in self.held.values()])
        union = np.unique(held)
        assert union.tolist() == keys.tolist(), "its keys (sorted, unique) are those of the contributions it holds"
        counts = np.bincount(np.searchsorted(union, held), minlength=len(union))
        assert counts.tolist() == self.presence.tolist(), "presence counts the held contributions holding each key"
        assert self.kinds == collections.Counter(c[0].dtype for c in self.held.values()), "key dtypes counted"
        assert keys.dtype == np.result_type(*self.kinds), "the keys' dtype is the held keys' together"


class CombinedWindows:
    """The kept combined windows by (reader key, length), least recently used first, and what
    using them did: `slid` windows moved by what entered and left, `combined` ones combined anew
    (no kept window, or one that does not overlap the new one, holds other contributions (the
    sub-window was replaced) or is further from it than the window is long), and the
    contributions each way combined."""

    def __init__(self, move_cost: float | None = None) -> None:
        """`move_cost`: MOVE_COST (None), or another (0: every window that can move does)."""
        self.move_cost = MOVE_COST if move_cost is None else move_cost
        self._by: collections.OrderedDict[Hashable, CombinedWindow] = collections.OrderedDict()
        self._keys = 0  # keys of the grouped windows kept
        self.slid = 0
        self.combined = 0
        self.slid_contributions = 0      # contributions combined in or taken out by slid windows
        self.combined_contributions = 0  # contributions combined by windows combined anew (their longest)
        # readers whose windows moving would not pay (_worth): combined anew and not kept for this
        # many more executions, then judged again (a window that was small or empty grows)
        self._unpaid: dict[Hashable, int] = {}

    def prefixes(self, reader: Hashable, b, versions: list[int], values: list, ends: list[int], strings) -> list:
        """merge.combine_prefixes(b, values, ends, strings) (the combined contribution of the n
        youngest for each n of `ends`, ascending), for a reader whose aggregates are invertible
        (merge.inverts): `versions` are the sub-windows' versions, youngest first, `values` their
        contributions (the same order; at least ends[-1] of them). Where every length has a kept
        window that can move there and moving them touches fewer rows than combining anew reads
        (`_worth`), each is moved; else all are combined anew in one scan and kept, unless moving
        them would not have paid: then the reader combines anew for REJUDGE executions, keeping
        nothing (the hidden counts cost a pass), and is judged again."""
        grouped = b.group_by is not None
        moves: list[tuple[CombinedWindow, list, list]] = []
        for n in ends:
            kept = self._by.get((reader, n))
            move = None if kept is None else self._delta(kept, versions[:n], values[:n])
            if kept is None or move is None:
                break
            moves.append((kept, *move))
        if len(moves) == len(ends) and self._worth([_rows(k.combined, grouped) + _rows_of(e + lv, grouped)
                                               for k, e, lv in moves], values[:ends[-1]], grouped):
            out = []
            for n, (kept, entering, leaving) in zip(ends, moves):
                moved = self._slide(kept, b, versions[:n], values[:n], entering, leaving, strings)
                self._keep((reader, n), moved)
                out.append(moved.combined)
            return out
        keep = reader not in self._unpaid
        if not keep:
            self._unpaid[reader] -= 1
            if not self._unpaid[reader]:
                del self._unpaid[reader]
        got = combine_prefixes(b, values, ends, strings, presence=grouped and keep)
        self.combined += len(ends)
        self.combined_contributions += ends[-1]
        if not keep:
            return got
        if grouped:  # would moving them next time pay? (entering and leaving: a sub-window each way)
            youngest = _rows_of(values[:1], grouped)
            if not self._worth([len(p) + 2 * youngest for _, p in got], values[:ends[-1]], grouped):
                if len(self._unpaid) >= MAX_WINDOWS:
                    self._unpaid.clear()  # (bounded: readers come and go; each is judged again)
                self._unpaid[reader] = REJUDGE
                return [c for c, _ in got]
        out = []
        for n, g in zip(ends, got):
            combined, presence = g if grouped else (g, None)
            window = CombinedWindow(dict(zip(versions[:n], values[:n])), combined, presence)
            if grouped and combined[0].dtype != (dtype := np.result_type(*(window.kinds or ()))):
                # (a shorter prefix's keys as its own contributions' give them: combine_contributions')
                combined = window.combined = (combined[0].astype(dtype), combined[1])
            out.append(combined)
            if _contiguous(versions[:n]):
                self._keep((reader, n), window)
        return out

    def _worth(self, touched: list[int], window: list, grouped: bool) -> bool:
        """Whether moving windows that touch `touched` rows each (their keys, and the rows entering
        and leaving, and MOVE_FIXED per length) costs less than combining `window` (the longest's
        contributions) anew: its rows once, and each length's keys (the running combine's steps)."""
        return self.move_cost * (sum(touched) + MOVE_FIXED[grouped] * len(touched)) <= _rows_of(window, grouped) + sum(touched)

    @staticmethod
    def _delta(kept: CombinedWindow, versions: list[int], values: list) -> tuple[list, list] | None:
        """The contributions entering and leaving `kept` to make it the window of `versions`
        (youngest first) and `values`, or None where it cannot move there: not contiguous, no
        overlap, another contribution held for a version (a replaced sub-window, another
        stream's), or more to move than the window holds."""
        if not _contiguous(versions):
            return None
        held = kept.held
        entering, overlap = [], 0
        for v, c in zip(versions, values):
            got = held.get(v)
            if got is None:
                entering.append(c)
            elif got is not c:
                return None
            else:
                overlap += 1
        if not overlap or len(entering) + len(held) - overlap >= len(versions):
            return None
        now = set(versions)
        return entering, [c for v, c in held.items() if v not in now]

    def _slide(self, kept: CombinedWindow, b, versions: list[int], values: list, entering: list, leaving: list,
               strings) -> CombinedWindow:
        """`kept` moved to the window of `versions` and `values` (its _delta: `entering`, `leaving`)."""
        if b.group_by is None:
            combined = uncombine(b, combine_contributions(b, [kept.combined, *entering], strings), leaving, strings)
            presence = kinds = None
        else:
            assert kept.kinds is not None and kept.presence is not None, "a grouped window counts its keys"
            kinds = kept.kinds.copy()
            kinds.update(c[0].dtype for c in entering)
            kinds.subtract(c[0].dtype for c in leaving)
            kinds = +kinds  # (without the kinds none holds any more)
            combined, presence = slide_combined(b, kept.combined, kept.presence, entering, leaving, strings,
                                                np.result_type(*kinds))
        self.slid += 1
        self.slid_contributions += len(entering) + len(leaving)
        return CombinedWindow(dict(zip(versions, values)), combined, presence, kinds)

    def _keep(self, key: Hashable, window: CombinedWindow) -> None:
        with _lock:
            self._keep_locked(key, window)

    def _keep_locked(self, key: Hashable, window: CombinedWindow) -> None:
        old = self._by.pop(key, None)
        if old is not None:
            self._keys -= old.keys()
        self._by[key] = window
        self._keys += window.keys()
        while len(self._by) > MAX_WINDOWS or (self._keys > MAX_KEYS and len(self._by) > 1):
            _, dropped = self._by.popitem(last=False)
            self._keys -= dropped.keys()

    def __len__(self) -> int:
        return len(self._by)

    def _check(self) -> None:
        with _lock:
            self._check_locked()

    def _check_locked(self) -> None:
        assert len(self._by) <= MAX_WINDOWS and len(self._unpaid) <= MAX_WINDOWS
        assert all(0 < n <= REJUDGE for n in self._unpaid.values())
        assert self._keys == sum(w.keys() for w in self._by.values()), "the kept keys are counted"
        assert self._keys <= MAX_KEYS or len(self._by) == 1
        assert min(self.slid, self.combined, self.slid_contributions, self.combined_contributions) >= 0
        for w in self._by.values():
            w._check()


# Moving a length's window costs about twice per key what a step of combining anew does
# (merge.slide_combined merges keys into the kept ones; combine_prefixes' steps work on places
# among keys grouped once), and about 1,000 keys' worth more per length (its numpy calls: 70 to
# 110 us at 100 keys against a step's 40 to 60 us, at 0.05 us a key), measured on the 8.5 groups (bench/
# sharing_cost.py, docs/sharing.md "Round 22"). An ungrouped contribution is a few numbers: its
# moves' calls cost about what one contribution's combine does.
MOVE_COST = 2
MOVE_FIXED = {True: 1000, False: 1}  # per length moved, in keys (grouped) or contributions (not)
REJUDGE = 64  # executions a reader whose moves would not pay combines anew before it is judged again


def _rows(contribution: Any, grouped: bool) -> int:
    return len(contribution[0]) if grouped else 1


def _rows_of(contributions: list, grouped: bool) -> int:
    return sum(len(c[0]) for c in contributions) if grouped else len(contributions)


def _contiguous(versions: list[int]) -> bool:
    """Youngest first, each one older than the one before."""
    return bool(versions) and versions[0] - versions[-1] == len(versions) - 1
