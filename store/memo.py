"""A sealed sub-window's contributions, by query: the one cache of per-sub-window reads, used by a
lone window scan run again (issue 33: a filtered COUNT over 10 s read 10 x 100,000 rows on every
call, for the same 9 sub-windows each time) and by the readers of shared executions (issue 30,
txn/sharing/runtime.py: a group's next execution reads only the sub-windows sealed since).

It is a sub-window's pre-aggregate (thesis 2.3.4, basic interval synopses; 8.3.1 CS2, the same
synopsis read by every query of a group) for one query's WHERE and aggregates, computed at its
first read instead of at the seal: a sealed sub-window never changes (a slide replaces one, it
never edits one), so a query's read of it gives the same contribution every time; the memo needs
no invalidation and goes with its sub-window when a slide overwrites it (or a dictionary
compaction replaces it: a copy starts empty).

One key (`contribution_key`): the plan's access path and its query but for RANGE, SLIDE, LIMIT
and AS OF SLIDE, none of which changes what is read from one sub-window, so a lone run and a
shared reader of the same query over any lengths find each other's contributions.

One bounded policy (`ReadMemo.put`): a sub-window keeps at most MAX_ENTRIES contributions, of
which at most MAX_LARGE whose size grows with the rows (GROUP BY keys, holistic values, a
projection's rows), the oldest put first out. A lone plan keeps only contributions of a bounded
size (Plan.memo_key says which: nothing says that query comes back); a shared reader keeps large
ones too, since its group's registered queries read them again at the next execution.

Reads may run on worker threads (offloaded query work, txn/schedule/offload.py: a shared
execution's read puts from there), so put is atomic under a lock; get is one dict lookup.
"""
from __future__ import annotations

import dataclasses
import threading
from typing import Any, Hashable

MAX_ENTRIES = 64
MAX_LARGE = 16

_lock = threading.Lock()  # put's eviction and insertion as one step (reads may be offloaded)


class _Miss:
    def __repr__(self) -> str:
        return "MISS"


MISS: Any = _Miss()  # what get() returns for a query not memoised (None is a contribution: MIN of no rows)


def contribution_key(plan) -> tuple:
    """What a plan's read of one sealed sub-window depends on: its access path and its query but
    for RANGE, SLIDE, LIMIT and AS OF SLIDE, and but for what is done with the finished groups
    (ORDER BY, HAVING, an outer query's aggregates: a top-k list and quantiles over the same
    per-key counters read the same, thesis 8.5.1), with the aggregates it reads (the bound
    query's, hidden ones for ORDER BY or HAVING too). Plans with equal keys read equal
    contributions (a joint execution gives them one reader: CS2's same synopsis; a sub-window
    keeps it once). An APPROXIMATE top k or an expression query keeps its whole query."""
    q = plan.query
    if q.expr is not None or q.approximate:
        return plan.access, dataclasses.replace(q, range=None, slide=None, limit=None, as_of_slide=None)
    reads = tuple((a.fn.name, a.column, a.input_type, a.q, a.sketch) for a in plan.aggs)
    return (plan.access, dataclasses.replace(q, range=None, slide=None, limit=None, as_of_slide=None, order_by=(),
                                             outer=(), having=None), reads)


def large(plan) -> bool:
    """Whether a plan's contribution from one sub-window grows with its rows: GROUP BY keys, a
    projection's rows (or an expression query's columns: no aggregates), holistic values."""
    b = plan.bound
    return bool(b.projection or b.group_keys or not b.aggs or not all(a.fn.bounded_contribution for a in b.aggs))


class ReadMemo:
    """Contributions of one sub-window by contribution key, oldest put first."""

    __slots__ = ("_by", "_large")

    def __init__(self) -> None:
        self._by: dict[Hashable, Any] = {}
        self._large: dict[Hashable, None] = {}  # the keys of large contributions, oldest put first

    def get(self, key: Hashable) -> Any:
        return self._by.get(key, MISS)

    def put(self, key: Hashable, value: Any, large: bool = False) -> None:
        """Keep `value` under `key`; `large`: its size grows with the sub-window's rows."""
        with _lock:
            by, big = self._by, self._large
            if key in by:
                by[key] = value
                return
            if large and len(big) >= MAX_LARGE:
                del by[next(iter(big))]
                del big[next(iter(big))]
            if len(by) >= MAX_ENTRIES:
                old = next(iter(by))
                del by[old]
                big.pop(old, None)
            by[key] = value
            if large:
                big[key] = None

    def __len__(self) -> int:
        return len(self._by)

    def __getstate__(self) -> dict:
        return {}  # a copy of the sub-window elsewhere (a snapshot, another process) starts empty

    def __setstate__(self, state: dict) -> None:
        self._by, self._large = {}, {}

    def _check(self) -> None:
        with _lock:  # (a put from a worker thread may be under way)
            self._check_locked()

    def _check_locked(self) -> None:
        assert len(self._by) <= MAX_ENTRIES, f"a memo keeps at most {MAX_ENTRIES} queries ({len(self._by)})"
        assert len(self._large) <= MAX_LARGE, f"at most {MAX_LARGE} large contributions ({len(self._large)})"
        assert all(k in self._by for k in self._large), "a large key is a kept key"
        assert all(v is not MISS for v in self._by.values()), "MISS is never a contribution"
