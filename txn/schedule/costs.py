"""The cost model of window-scan work (Costs): ms per row by query and kind, learnt from the runs
measured. It decides what the scheduler offloads and how long a query's end takes; it only
records and estimates, and never decides itself."""
from __future__ import annotations

import collections

from windowstore.store import Plan


class Costs:
    """What window-scan work costs, in ms per row, by query and kind ('read' of one sub-window,
    'finish' over the rows read): a moving average of the runs measured, for the `keep` queries
    seen last. It decides what runs off the scheduler's thread and how long a query's end takes."""

    def __init__(self, keep: int = 1024):
        self.keep = keep
        self._by: collections.OrderedDict = collections.OrderedDict()

    @staticmethod
    def _key(plan: Plan):
        return plan.stream.name, plan.query

    def _check(self) -> None:
        assert len(self._by) <= self.keep, (len(self._by), self.keep)
        assert all(ms >= 0 for by_kind in self._by.values() for ms in by_kind.values()), "costs are not negative"

    def estimate(self, plan: Plan, kind: str, rows: int) -> float | None:
        per_row = self._by.get(self._key(plan), {}).get(kind)
        return None if per_row is None else per_row * max(rows, 1)

    def note(self, plan: Plan, kind: str, rows: int, ms: float) -> None:
        key = self._key(plan)
        by_kind = self._by.get(key)
        if by_kind is None:
            by_kind = self._by[key] = {}
            if len(self._by) > self.keep:
                self._by.popitem(last=False)  # the query first seen longest ago
        per_row = ms / max(rows, 1)
        old = by_kind.get(kind)
        by_kind[kind] = per_row if old is None else old + 0.25 * (per_row - old)
