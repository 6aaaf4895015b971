"""Temporal coalescing on window extents (AL-KATEB, KUNTA, LEE), and the choice between its two
evaluation strategies.

A reading `(ts, group, value)` stands for the half-open interval `[ts, te)` in which its value
holds: `te` is the `ts` of the group's next reading in the window, or `ts` itself for the group's
latest reading (section 2.3: the interval stays empty until a subsequent reading arrives).
Coalescing merges the adjacent intervals of value-equivalent readings of one group into maximal
runs (`Coalesced`). Value equivalence is equality of `value` (a tuple for several time-varying
attributes); timestamps are unique within a stream (section 2.1); a repeated one is a ValueError.

Windows: tuple-based (the `size` readings with the largest ts received so far) or time-based
(readings with `ts >= latest ts - size`). A reading that should already have expired is discarded
(`insert` returns False); a late reading inside the window splits the run it falls in, or merges
into it. Expiry is partial: a run whose earliest readings expire keeps its remaining readings and
starts at the earliest of them (its clip point), as Algorithm 2's timestamp vector does.

Two strategies with one interface (`insert`, `expire`, `scan`, `_check`):
- `EagerCoalescer` (Algorithm 2, Functions 1-3): the coalesced runs are kept per arrival, each
  with the vector of its readings' timestamps, so expiry and late readings can split them;
- `LazyCoalescer` (Algorithm 1): the extent keeps the readings in ts order and coalesces at scan.

`choose_plan` is section 6's cost model (equations 1-10) and the 0-1 program of Theorem 1 for
concurrent distinct coalescing queries, solved exactly by enumerating every assignment.

Pure: no threads, files or clock.
"""
from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
import itertools
from bisect import bisect_left
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Hashable, Iterable

class Strategy(StrEnum):
    """How a coalesced window is evaluated (section 4): eager (Algorithm 2, the coalesced state
    kept per arrival) or lazy (Algorithm 1, coalesced at scan time)."""

    EAGER = "eager"
    LAZY = "lazy"


class Extent(StrEnum):
    """What bounds a coalescer's window: its newest `size` tuples, or `size` time units."""

    TUPLE = "tuple"
    TIME = "time"


EAGER, LAZY = Strategy.EAGER, Strategy.LAZY
TUPLE, TIME = Extent.TUPLE, Extent.TIME

# Brute force enumerates 2**n assignments; past this many DCQs the caller is asked to split.
MAX_EXACT_QUERIES = 20


@dataclass(frozen=True, order=True)
class Coalesced:
    """One coalesced run: `value` held by `group` over `[ts, te)`, from `count` readings."""
    group: Any
    ts: int
    te: int
    value: Any
    count: int


class _Window(ABC):
    """The window bookkeeping both strategies share: which readings are in the extent."""

    def __init__(self, kind: str, size: int):
        if kind not in (TUPLE, TIME):
            raise ValueError(f"kind must be '{TUPLE}' or '{TIME}', not {kind!r}")
        if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
            raise ValueError(f"size must be a positive int, not {size!r}")
        self.kind = kind
        self.size = size
        self._order: list[tuple[int, Hashable]] = []  # heap of (ts, group) of every reading held
        self._start: int | None = None  # readings with ts below it are expired or too late
        self._latest: int | None = None

    def __len__(self) -> int:
        return len(self._order)

    def _admit(self, ts: int) -> bool:
        """Whether a reading at `ts` belongs in the window; advances the time-based start."""
        if not isinstance(ts, int) or isinstance(ts, bool):
            raise ValueError(f"ts must be an int, not {ts!r}")
        if self._start is not None and ts < self._start:
            return False
        if self.kind == TUPLE and len(self._order) >= self.size and ts < self._order[0][0]:
            return False
        if self.kind == TIME:
            if self._latest is not None and ts < self._latest - self.size:
                return False
            if self._latest is None or ts > self._latest:
                self._latest = ts
                self._expire_before(ts - self.size)
        return True

    def _overflow(self) -> None:
        """Tuple-based: evict the oldest readings beyond `size`."""
        while self.kind == TUPLE and len(self._order) > self.size:
            ts, group = heapq.heappop(self._order)
            self._drop_oldest(ts, group)

    def expire(self, before: int) -> None:
        """Expire every reading with ts < before (a slide); later readings below it are too late."""
        if self._start is None or before > self._start:
            self._start = before
        self._expire_before(before)

    def _expire_before(self, before: int) -> None:
        while self._order and self._order[0][0] < before:
            ts, group = heapq.heappop(self._order)
            self._drop_oldest(ts, group)

    @abstractmethod
    def _drop_oldest(self, ts: int, group: Hashable) -> None:
        """Remove the oldest reading `ts` of `group` from the strategy's own state."""

    def _check_window(self, stamps: list[int]) -> None:
        assert sorted(stamps) == sorted(ts for ts, _ in self._order), "heap and extent disagree"
        assert len(set(stamps)) == len(stamps), "duplicate timestamps"
        if self.kind == TUPLE:
            assert len(stamps) <= self.size
        if self._start is not None:
            assert all(ts >= self._start for ts in stamps)
        if self.kind == TIME and self._latest is not None:
            assert all(ts >= self._latest - self.size for ts in stamps)


class _Run:
    """An eagerly coalesced tuple: its value and the sorted vector of its readings' timestamps
    (`stamps[0]` is t_s; the paper's v is stamps[1:]) and its ending instant t_e."""
    __slots__ = ("value", "stamps", "te")

    def __init__(self, value: Any, stamps: list[int], te: int):
        self.value = value
        self.stamps = stamps
        self.te = te


class EagerCoalescer(_Window):
    """Coalesced runs maintained per arrival (Algorithm 2; mergeTuples, splitTuple, addTuple)."""

    def __init__(self, kind: str, size: int):
        super().__init__(kind, size)
        self._groups: dict[Hashable, list[_Run]] = {}

    def insert(self, ts: int, group: Hashable, value: Any) -> bool:
        """Add a reading; False when it arrived too late for the window (discarded)."""
        if not self._admit(ts):
            return False
        runs = self._groups.setdefault(group, [])
        j = bisect_left(runs, ts, key=lambda r: r.stamps[0])
        if j < len(runs) and runs[j].stamps[0] == ts:
            raise ValueError(f"duplicate ts {ts}")
        i = j - 1  # the last run starting before ts
        if i >= 0:
            run = runs[i]
            pos = bisect_left(run.stamps, ts)
            if pos < len(run.stamps) and run.stamps[pos] == ts:
                raise ValueError(f"duplicate ts {ts}")
            if pos < len(run.stamps):  # inside run: merge, or split it around the newcomer
                if value == run.value:
                    run.stamps.insert(pos, ts)
                else:
                    tail = _Run(run.value, run.stamps[pos:], run.te)
                    del run.stamps[pos:]
                    run.te = ts
                    runs[i + 1:i + 1] = [_Run(value, [ts], tail.stamps[0]), tail]
            elif value == run.value:  # after the run's last reading: extend it
                run.stamps.append(ts)
                if i + 1 == len(runs):
                    run.te = ts
            elif i + 1 < len(runs) and runs[i + 1].value == value:  # or join the next run
                nxt = runs[i + 1]
                nxt.stamps.insert(0, ts)
                run.te = ts
            else:  # a run of its own between them (addTuple)
                te = runs[i + 1].stamps[0] if i + 1 < len(runs) else ts
                runs.insert(i + 1, _Run(value, [ts], te))
                run.te = ts
        elif runs and runs[0].value == value:  # before the group's first run, same value
            runs[0].stamps.insert(0, ts)
        else:
            runs.insert(0, _Run(value, [ts], runs[0].stamps[0] if runs else ts))
        heapq.heappush(self._order, (ts, group))
        self._overflow()
        return True

    def _drop_oldest(self, ts: int, group: Hashable) -> None:
        # Algorithm 2 lines 1-8: detach the first timestamp, or remove the run it was alone in.
        runs = self._groups[group]
        first = runs[0]
        assert first.stamps[0] == ts
        if len(first.stamps) > 1:
            del first.stamps[0]
        else:
            del runs[0]
            if not runs:
                del self._groups[group]

    def scan(self) -> list[Coalesced]:
        """The coalesced runs, by group then ts (a linear read of the maintained state)."""
        out = []
        for group in sorted(self._groups):  # type: ignore[type-var]  # one stream's group keys: mutually comparable
            for run in self._groups[group]:
                out.append(Coalesced(group, run.stamps[0], run.te, run.value, len(run.stamps)))
        return out

    def footprint(self) -> tuple[int, int]:
        """(coalesced tuples, extra timestamps in their vectors): the memory model's counts."""
        runs = sum(len(r) for r in self._groups.values())
        return runs, len(self._order) - runs

    def _check(self) -> None:
        stamps = []
        for group, runs in self._groups.items():
            assert runs, f"empty group {group!r} kept"
            for j, run in enumerate(runs):
                assert run.stamps and run.stamps == sorted(set(run.stamps)), "vector unsorted"
                stamps.extend(run.stamps)
                if j + 1 < len(runs):
                    nxt = runs[j + 1]
                    assert run.stamps[-1] < nxt.stamps[0], "runs overlap"
                    assert run.value != nxt.value, "adjacent equal runs not coalesced"
                    assert run.te == nxt.stamps[0], "t_e is not the next run's t_s"
                else:
                    assert run.te == run.stamps[-1], "last run's t_e is not its last reading"
        self._check_window(stamps)


class LazyCoalescer(_Window):
    """Readings kept uncoalesced in ts order (Algorithm 1); runs are formed at scan time."""

    def __init__(self, kind: str, size: int):
        super().__init__(kind, size)
        self._extent: list[tuple[int, Hashable, Any]] = []  # sorted by ts (an array, as §7)

    def insert(self, ts: int, group: Hashable, value: Any) -> bool:
        """Add a reading; False when it arrived too late for the window (discarded)."""
        if not self._admit(ts):
            return False
        i = bisect_left(self._extent, ts, key=lambda row: row[0])
        if i < len(self._extent) and self._extent[i][0] == ts:
            raise ValueError(f"duplicate ts {ts}")
        self._extent.insert(i, (ts, group, value))
        heapq.heappush(self._order, (ts, group))
        self._overflow()
        return True

    def _drop_oldest(self, ts: int, group: Hashable) -> None:
        assert self._extent[0][0] == ts
        del self._extent[0]

    def scan(self) -> list[Coalesced]:
        """Coalesce the extent in one pass: the runs, by group then ts."""
        open_runs: dict[Hashable, list] = {}  # group -> [ts, last ts, value, count]
        done: list[Coalesced] = []
        for ts, group, value in self._extent:
            cur = open_runs.get(group)
            if cur is None:
                open_runs[group] = [ts, ts, value, 1]
            elif cur[2] == value:
                cur[1] = ts
                cur[3] += 1
            else:
                done.append(Coalesced(group, cur[0], ts, cur[2], cur[3]))
                open_runs[group] = [ts, ts, value, 1]
        done.extend(Coalesced(g, c[0], c[1], c[2], c[3]) for g, c in open_runs.items())
        done.sort(key=lambda c: (c.group, c.ts))
        return done

    def footprint(self) -> tuple[int, int]:
        """(tuples, extra timestamps): every reading is a tuple of its own."""
        return len(self._extent), 0

    def _check(self) -> None:
        stamps = [row[0] for row in self._extent]
        assert stamps == sorted(stamps), "extent out of ts order"
        self._check_window(stamps)


def coalescer(strategy: str, kind: str, size: int) -> EagerCoalescer | LazyCoalescer:
    """The coalescer of `strategy` ("eager" or "lazy") over a `kind` window of `size`."""
    if strategy == EAGER:
        return EagerCoalescer(kind, size)
    if strategy == LAZY:
        return LazyCoalescer(kind, size)
    raise ValueError(f"strategy must be '{EAGER}' or '{LAZY}', not {strategy!r}")


# ---- Temporal functions over coalesced intervals (half-open [ts, te)) ----

Interval = tuple[int, int]


def VALID(c: Coalesced) -> Interval:
    """The interval a coalesced run is valid in."""
    return (c.ts, c.te)


def DURATION(a: Interval) -> int:
    return a[1] - a[0]


def OVERLAPS(a: Interval, b: Interval) -> bool:
    """They share an instant: a.ts < b.te and b.ts < a.te (section 5)."""
    return a[0] < b[1] and b[0] < a[1]


def CONTAINS(a: Interval, b: Interval) -> bool:
    """Every instant of b is in a."""
    return a[0] <= b[0] and b[1] <= a[1]


def BEFORE(a: Interval, b: Interval) -> bool:
    """a ends no later than b starts."""
    return a[1] <= b[0]


def AFTER(a: Interval, b: Interval) -> bool:
    return BEFORE(b, a)


def INTERSECT(a: Interval, b: Interval) -> Interval | None:
    """The common part of two overlapping intervals, None when they do not overlap."""
    if not OVERLAPS(a, b):
        return None
    return (max(a[0], b[0]), min(a[1], b[1]))


# ---- Section 6: the cost model and the optimal eager/lazy selection ----

@dataclass(frozen=True)
class OpCosts:
    """Per-tuple atomic operation costs (table 4), in any one time unit."""
    read: float = 1.0
    insert: float = 1.0
    delete: float = 1.0
    detach: float = 1.0
    merge: float = 1.0
    split: float = 1.0
    coalesce: float = 1.0


@dataclass(frozen=True)
class Weights:
    """<lambda_mu, lambda_nu, lambda_sigma>: memory, update and scan weights."""
    memory: float = 1.0
    update: float = 1.0
    scan: float = 1.0


@dataclass(frozen=True)
class DCQ:
    """A distinct coalescing query: its coalescing and out-of-order probabilities and the size
    of one of its eagerly coalesced tuples (only the attributes it needs)."""
    name: str
    cp: float
    oop: float
    r_eager: float
    ops: OpCosts = field(default_factory=OpCosts)


@dataclass(frozen=True)
class Workload:
    """What the DCQs share: window size w (tuples), arrivals k, the raw tuple size, the
    timestamp size, and the lazy extent's operation costs."""
    w: int
    k: int
    r_lazy: float
    m: float = 8.0
    ops: OpCosts = field(default_factory=OpCosts)


def _probability(name: str, p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], not {p!r}")


def memory_eager(q: DCQ, wl: Workload) -> float:
    """Equation 1 with constant cp: (cp*m + (1-cp)*r) per tuple held, min(k, w) held."""
    return min(wl.k, wl.w) * (q.cp * wl.m + (1 - q.cp) * q.r_eager)


def memory_lazy(wl: Workload) -> float:
    """Equation 2."""
    return min(wl.k, wl.w) * wl.r_lazy


def update_eager(q: DCQ, wl: Workload) -> float:
    """Equation 3 with constant cp and oop (expiry terms once k > w)."""
    c, o, ops = q.cp, q.oop, q.ops
    per_arrival = ((1 - o) * (1 - c) * ops.insert + (1 - o) * c * ops.merge
                   + o * (1 - c) * (ops.insert + ops.split) + o * c * ops.merge)
    per_expiry = c * ops.detach + (1 - c) * ops.delete
    return wl.k * per_arrival + max(wl.k - wl.w, 0) * per_expiry


def update_lazy(wl: Workload) -> float:
    """Equation 4, summed over the k arrivals."""
    return wl.k * wl.ops.insert + max(wl.k - wl.w, 0) * wl.ops.delete


def scan_eager(q: DCQ, wl: Workload) -> float:
    """Equation 5: one read per coalesced tuple, M_eager / r_eager of them."""
    return q.ops.read * memory_eager(q, wl) / q.r_eager


def scan_lazy(q: DCQ, wl: Workload) -> float:
    """Equation 6 over the min(k, w) tuples held."""
    return min(wl.k, wl.w) * (q.cp * (wl.ops.coalesce + wl.ops.read) + (1 - q.cp) * wl.ops.read)


@dataclass(frozen=True)
class Normalizers:
    """M_max, U_max, S_max of section 6.2."""
    memory: float
    update: float
    scan: float


def normalizers(queries: Iterable[DCQ], wl: Workload) -> Normalizers:
    """M_max: the extent with no coalescing. S_max: the scan when every tuple coalesces during it.
    U_max: every arrival at the dearest per-arrival eager or lazy cost (the paper's "all tuples
    coalesced" is not an upper bound when a split costs more than a merge)."""
    qs = list(queries)
    held = min(wl.k, wl.w)
    arrival = max([wl.ops.insert] + [max(q.ops.insert + q.ops.split, q.ops.merge, q.ops.insert)
                                     for q in qs])
    expiry = max([wl.ops.delete] + [max(q.ops.detach, q.ops.delete) for q in qs])
    return Normalizers(
        memory=held * max([wl.r_lazy] + [q.r_eager for q in qs]),
        update=wl.k * arrival + max(wl.k - wl.w, 0) * expiry,
        scan=held * max([wl.ops.coalesce + wl.ops.read] + [q.ops.read for q in qs]),
    )


@dataclass(frozen=True)
class QueryCost:
    name: str
    eager: float  # equation 9: its own eagerly coalesced extent
    lazy_scan: float  # its scan of the shared lazy extent (equation 10's sum term)


@dataclass(frozen=True)
class Plan:
    """The chosen strategy per DCQ and what it and the uniform plans cost (Theorem 1's objective
    plus the shared lazy extent's memory and update, paid once when any DCQ is lazy)."""
    choice: dict[str, str]
    costs: tuple[QueryCost, ...]
    shared_lazy: float
    total: float
    all_eager: float
    all_lazy: float


def plan_cost(eager: Iterable[bool], costs: tuple[QueryCost, ...], shared_lazy: float) -> float:
    """The objective of one assignment (True = eager)."""
    eager = list(eager)
    total = sum(c.eager if e else c.lazy_scan for c, e in zip(costs, eager))
    return total + (shared_lazy if not all(eager) else 0.0)


def choose_plan(queries: Iterable[DCQ], wl: Workload, weights: Weights = Weights()) -> Plan:
    """Eager or lazy per DCQ minimising the weighted normalised cost (section 6.2). Exact: every
    one of the 2**n assignments is evaluated (n <= MAX_EXACT_QUERIES); ties go to lazy."""
    qs = list(queries)
    if not qs:
        raise ValueError("queries must not be empty")
    if len(qs) > MAX_EXACT_QUERIES:
        raise ValueError(f"queries: at most {MAX_EXACT_QUERIES} DCQs, got {len(qs)}")
    if len({q.name for q in qs}) != len(qs):
        raise ValueError("queries: names must be distinct")
    if wl.w <= 0 or wl.k <= 0:
        raise ValueError("workload: w and k must be positive")
    for q in qs:
        _probability(f"{q.name}.cp", q.cp)
        _probability(f"{q.name}.oop", q.oop)
    norm = normalizers(qs, wl)
    lm, lu, ls = weights.memory, weights.update, weights.scan
    costs = tuple(QueryCost(
        q.name,
        eager=(lm * memory_eager(q, wl) / norm.memory + lu * update_eager(q, wl) / norm.update
               + ls * scan_eager(q, wl) / norm.scan),
        lazy_scan=ls * scan_lazy(q, wl) / norm.scan,
    ) for q in qs)
    shared = lm * memory_lazy(wl) / norm.memory + lu * update_lazy(wl) / norm.update
    best, best_cost = None, None
    # Assignments in order of how many are eager, lazy first, so ties go to the fewer extents.
    for assignment in sorted(itertools.product((False, True), repeat=len(qs)), key=sum):
        cost = plan_cost(assignment, costs, shared)
        if best_cost is None or cost < best_cost:
            best, best_cost = assignment, cost
    return Plan(
        choice={q.name: EAGER if e else LAZY for q, e in zip(qs, best)},  # type: ignore[arg-type]  # set: the loop runs at least once
        costs=costs,
        shared_lazy=shared,
        total=best_cost,  # type: ignore[arg-type]  # set: the loop runs at least once
        all_eager=plan_cost([True] * len(qs), costs, shared),
        all_lazy=plan_cost([False] * len(qs), costs, shared),
    )
