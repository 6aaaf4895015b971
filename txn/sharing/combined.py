"""The combined windows of shared readers kept from one joint execution to the next (thesis 8.3.1
CS2, 8.4.3-8.4.4: an execution costs the intervals it accesses). Per reader (its read key) and
length, the combined contribution of the sub-windows it answered last; the next execution of that
reader combines in the sub-windows that entered and takes out those that left (store/planner/
merge.slide_combined), where its aggregates are invertible (merge.inverts), instead of combining
the whole window again. Owned by SharedTasks (one per engine), used by SharedPlan.finish. Pure:
no threads, clock or I/O; it reads no sub-window, only the contributions it is given."""
from __future__ import annotations

import collections
from typing import Any, Hashable

import numpy as np

from windowstore.store.planner.merge import combine_contributions, combine_prefixes, slide_combined, uncombine

# Bounds on what is kept (the least recently used window first out): windows, and the keys of the
# grouped ones (a window of K keys holds its keys, its aggregates' per-key partials and a count).
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

    def __init__(self) -> None:
        self._by: collections.OrderedDict[Hashable, CombinedWindow] = collections.OrderedDict()
        self._keys = 0  # keys of the grouped windows kept
        self.slid = 0
        self.combined = 0
        self.slid_contributions = 0      # contributions combined in or taken out by slid windows
        self.combined_contributions = 0  # contributions combined by windows combined anew (their longest)

    def prefixes(self, reader: Hashable, b, versions: list[int], values: list, ends: list[int], strings) -> list:
        """merge.combine_prefixes(b, values, ends, strings) (the combined contribution of the n
        youngest for each n of `ends`, ascending), for a reader whose aggregates are invertible
        (merge.inverts): `versions` are the sub-windows' versions, youngest first, `values` their
        contributions (the same order; at least ends[-1] of them). Each length's kept window is
        moved where it can be, the others combined (in one scan) and kept."""
        out: list = [None] * len(ends)
        anew: list[int] = []  # indexes of ends combined anew
        grouped = b.group_by is not None
        for j, n in enumerate(ends):
            kept = self._by.get((reader, n))
            moved = None if kept is None else self._slide(kept, b, versions[:n], values[:n], strings)
            if moved is None:
                anew.append(j)
                continue
            out[j] = moved.combined
            self._keep((reader, n), moved)
        if anew:
            lengths = [ends[j] for j in anew]
            got = combine_prefixes(b, values, lengths, strings, presence=grouped)
            self.combined += len(anew)
            self.combined_contributions += lengths[-1]
            for j, n, g in zip(anew, lengths, got):
                combined, presence = g if grouped else (g, None)
                window = CombinedWindow(dict(zip(versions[:n], values[:n])), combined, presence)
                if grouped and combined[0].dtype != (dtype := np.result_type(*window.kinds)):  # type: ignore[arg-type]
                    # (a shorter prefix's keys as its own contributions' give them: combine_contributions')
                    combined = window.combined = (combined[0].astype(dtype), combined[1])
                out[j] = combined
                if _contiguous(versions[:n]):
                    self._keep((reader, n), window)
        return out

    def _slide(self, kept: CombinedWindow, b, versions: list[int], values: list, strings) -> CombinedWindow | None:
        """`kept` moved to the window of `versions` (youngest first) and `values`, or None where
        it cannot be (combine anew)."""
        if not _contiguous(versions):
            return None
        held = kept.held
        entering, overlap = [], 0
        for v, c in zip(versions, values):
            got = held.get(v)
            if got is None:
                entering.append(c)
            elif got is not c:
                return None  # another contribution of that version (a replaced sub-window, another stream)
            else:
                overlap += 1
        leaving_n = len(held) - overlap
        if not overlap or len(entering) + leaving_n >= len(versions):
            return None
        now = set(versions)
        leaving = [c for v, c in held.items() if v not in now]
        if b.group_by is None:
            combined = uncombine(b, combine_contributions(b, [kept.combined, *entering], strings), leaving, strings)
            presence = kinds = None
        else:
            kinds = kept.kinds.copy()  # type: ignore[union-attr]  # (grouped: counted)
            kinds.update(c[0].dtype for c in entering)
            kinds.subtract(c[0].dtype for c in leaving)
            kinds = +kinds  # (without the kinds none holds any more)
            combined, presence = slide_combined(b, kept.combined, kept.presence, entering, leaving, strings,
                                                np.result_type(*kinds))
        self.slid += 1
        self.slid_contributions += len(entering) + len(leaving)
        return CombinedWindow(dict(zip(versions, values)), combined, presence, kinds)

    def _keep(self, key: Hashable, window: CombinedWindow) -> None:
        old = self._by.pop(key, None)
        if old is not None:
            self._keys -= old.keys()
        self._by[key] = window
        self._keys += window.keys()
        while len(self._by) > MAX_WINDOWS or (self._keys > MAX_KEYS and len(self._by) > 1):
            _, dropped = self._by.popitem(last=False)
            self._keys -= dropped.keys()

    def forget(self) -> None:
        """Drop every kept window (their readers' queries are gone or changed)."""
        self._by.clear()
        self._keys = 0

    def __len__(self) -> int:
        return len(self._by)

    def _check(self) -> None:
        assert len(self._by) <= MAX_WINDOWS
        assert self._keys == sum(w.keys() for w in self._by.values()), "the kept keys are counted"
        assert self._keys <= MAX_KEYS or len(self._by) == 1
        assert min(self.slid, self.combined, self.slid_contributions, self.combined_contributions) >= 0
        for w in self._by.values():
            w._check()


def _contiguous(versions: list[int]) -> bool:
    """Youngest first, each one older than the one before."""
    return bool(versions) and versions[0] - versions[-1] == len(versions) - 1
