"""A sealed sub-window's memo of window-scan reads: one query's contribution from its rows, kept so
that the next run of the same query takes it instead of scanning again (issue 33: a filtered
COUNT over 10 s read 10 x 100,000 rows on every call, for the same 9 sub-windows each time).

It is a sub-window's pre-aggregate (thesis 2.3.4, basic interval synopses) for one query's WHERE
and aggregates, computed at its first read instead of at the seal: a sealed sub-window never
changes (a slide replaces one, it never edits one), so a query's read of it gives the same
contribution every time; the memo needs no invalidation and goes with its sub-window when a slide
overwrites it. Only contributions of a bounded size are kept
(Plan.memo_key says which), at most MAX_ENTRIES queries per sub-window, the oldest put first out.
The scheduler alone reads and fills it, on its own thread (txn/scheduler.py), never an offloaded job.
"""
from __future__ import annotations

from typing import Any, Hashable

MAX_ENTRIES = 32


class _Miss:
    def __repr__(self) -> str:
        return "MISS"


MISS: Any = _Miss()  # what get() returns for a query not memoised (None is a contribution: MIN of no rows)


class ReadMemo:
    """Contributions of one sub-window by query (the plan's memo_key), oldest put first."""

    __slots__ = ("_by",)

    def __init__(self) -> None:
        self._by: dict[Hashable, Any] = {}

    def get(self, key: Hashable) -> Any:
        return self._by.get(key, MISS)

    def put(self, key: Hashable, value: Any) -> None:
        by = self._by
        if key not in by and len(by) >= MAX_ENTRIES:
            del by[next(iter(by))]
        by[key] = value

    def __len__(self) -> int:
        return len(self._by)

    def __getstate__(self) -> dict:
        return {}  # a copy of the sub-window elsewhere (a snapshot, another process) starts empty

    def __setstate__(self, state: dict) -> None:
        self._by = {}

    def _check(self) -> None:
        assert len(self._by) <= MAX_ENTRIES, f"a memo keeps at most {MAX_ENTRIES} queries ({len(self._by)})"
        assert all(v is not MISS for v in self._by.values()), "MISS is never a contribution"
