"""A query as the scheduler runs it: the read-only transaction (QueryTxn) with its per-stream read
state (Source), an offloaded computation of it (Job), its answer's metadata (Result), and the
ways a query fails. Plain state and what follows from it; the scheduler core changes it (nothing
here records history, counts, or chooses what runs)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from windowstore.store import Answer, Plan, Stream, StoreError, SubWindow
from windowstore.store.aggregates import Partial
from windowstore.store.errors import InvalidInput, ResourceLimit
from windowstore.store.kinds import AccessPath

from .joins import JoinQueryPlan, StreamWindow
from .kinds import JobKind, QueryKind

if TYPE_CHECKING:
    from .answer_cache import CachedAnswer
    from .schedule.edf import Task


class RestartLimitExceeded(StoreError):
    """A query was aborted by concurrent slides more times than allowed."""


class QueryWithdrawn(StoreError):
    """A query was cancelled by its client or its stream was dropped."""


class StreamFailed(StoreError):
    """Sealing a slide of the stream raised (a defect, or memory ran out): the stream stops
    (Scheduler._seal_failed). Its queries and writes fail with this until it is dropped; the
    server's log still holds its rows and the Slide, so a restart seals that slide again."""


class QueryFailed(StoreError):
    """A query's execution raised an unexpected error: the query fails with its message (the
    client sees INTERNAL), it is counted, and the scheduler goes on with the others."""

    @staticmethod
    def of(error: BaseException) -> StoreError:
        """What a query's execution error fails it with: bad input found only once its data is read
        (an `InvalidInput`, e.g. APPROXIMATE top-k by SUM over a negative per-key sum) and a bound
        it crossed (`ResourceLimit`) as they are, named for the client; anything else as INTERNAL,
        its cause kept."""
        if isinstance(error, (InvalidInput, ResourceLimit)):
            return error
        failed = QueryFailed(f"internal error while executing the query: {type(error).__name__}: {error}")
        failed.__cause__ = error
        return failed


@dataclass
class Result:
    """An answer and the metadata every answer carries."""

    answer: Answer
    slide: int                  # newest slide reflected (-1: the window was still empty)
    window_start_ms: int | None
    window_end_ms: int | None
    staleness_ms: float | None  # reported - commit time of the newest slide reflected
    response_ms: float          # submit -> answer
    restarts: int
    policy: str                 # PolicyName.value
    txn: str
    answered_ms: float
    execution: int = 0          # periodic: the how-manieth answer
    late_slides: int = 0        # periodic: slides beyond its SLIDE when answered
    early_slides: int = 0       # periodic, shared: slides before its SLIDE when answered (txn/sharing/)
    fallback: bool = False      # answered by an attempt that held its windows' slides, after aborts (Outcomes._fall_back)
    group: str = ""             # periodic, shared: the group whose joint execution answered it
    inter_exec_ms: float | None = None
    sources: list[StreamWindow] | None = None  # joins: what it reflects of each joined stream
    cached: CachedAnswer | None = None  # one-time: the answer cache's entry it was answered from (txn/answer_cache.py)


@dataclass(eq=False)
class Job:
    """One query operation's computation, to run off the scheduler's thread: `run()` reads only
    sealed sub-windows and the plan (immutable), so it can run while slides are applied. Handed
    back with Scheduler.complete(job, value)."""

    txn: "QueryTxn"
    kind: JobKind               # one sub-window's read, or the final merge
    version: int | None         # read: the version it reads
    run: Callable[[], object]
    rows: int = 0               # rows it covers

    @property
    def lane(self) -> QueryKind:
        """Which job thread runs it: periodic executions (registered queries, shared groups) and
        one-time queries each have a lane of their own, so a one-time query never waits behind
        periodic work (issue 30: one-time queries beside the periodic ones of thesis 8.5.1)."""
        return self.txn.kind


@dataclass(eq=False)
class Source:
    """One stream a query reads, and what its current attempt has read of it: a single-stream
    query has one source, a join one per distinct joined stream (FROM order). Only the policy
    (the read order, the snapshot) and the scheduler's read and conflict paths change it."""

    stream: Stream
    n_q: int                    # it reads the n_q youngest sub-windows of the stream ...
    as_of: int | None = None    # ... or, pinned (AS OF SLIDE k), slide k's
    read: dict[int, SubWindow] = field(default_factory=dict)  # version -> sub-window read in this attempt
    snapshot: list[SubWindow] | None = None  # ws: the sub-windows as of begin
    cursor: tuple[int, int] | None = None    # (window.latest, i): the policy's order is read before i

    @property
    def name(self) -> str:
        return self.stream.name

    @property
    def window(self):
        return self.stream.window

    def versions(self) -> range:
        """The versions the attempt reads, ascending (not under ws, which reads its snapshot): the
        pinned slide's (AS OF SLIDE k), or the n_q youngest."""
        if self.as_of is not None:
            return range(max(0, self.as_of - self.n_q + 1), self.as_of + 1)
        latest = self.stream.window.latest
        return range(max(0, latest - self.n_q + 1), latest + 1)

    def reset(self) -> None:
        """A (re)started attempt has read nothing."""
        self.read = {}
        self.snapshot = None
        self.cursor = None

    def _check(self) -> None:
        assert all(sub.slide == v for v, sub in self.read.items()), "read: version -> its sub-window"
        assert self.as_of is None or self.snapshot is not None or set(self.read) <= set(self.versions())
        assert self.cursor is None or 0 <= self.cursor[1] <= len(self.versions()), self.cursor


def sources_of(plan) -> list[Source]:
    """A plan's sources: a join's distinct streams (FROM order), or the one stream of a query."""
    if isinstance(plan, JoinQueryPlan):
        return [Source(s, plan.n_q[s.name]) for s in plan.streams]
    return [Source(plan.stream, plan.n_q, plan.as_of)]


@dataclass(eq=False)
class QueryTxn:
    id: str
    plan: Plan
    kind: QueryKind
    priority: int
    seq: int
    submitted_ms: float
    on_done: Callable[["QueryTxn"], None] | None = None
    task: Task | None = None
    restarts: int = 0
    rescans: int = 0            # slides whose re-scan orphaned its final merge in flight (ttu-rescan)
    # its attempt holds its windows: their slides wait for its commit (as under serial); set once
    # slides aborted (or re-scanned) it fallback_after times (Outcomes._fall_back)
    fallback: bool = False
    begun: bool = False
    partial: Partial = field(default_factory=Partial)  # a window scan's contributions so far
    result: Result | None = None
    error: Exception | None = None
    done: bool = False
    job: Job | None = None      # its offloaded computation in flight; it waits until complete()
    held_at: int | None = None  # it waits for the slide after this one of its stream (see _hold)
    # per stream being sealed when it was submitted, the slide it waits for (see _waits_for_seal)
    sealed_first: dict[str, int] | None = None
    sources: list[Source] = field(default_factory=list)  # per stream it reads, its read state
    # a single-stream attempt: its window's version when it began (what the answer cache keys on)
    window_version: int = -1

    def __post_init__(self) -> None:
        if not self.sources:
            self.sources = sources_of(self.plan)

    def source(self, name: str) -> Source:
        return next(src for src in self.sources if src.stream.name == name)

    def read_sets(self) -> dict[str, dict[int, SubWindow]]:
        """Per stream name, the sub-windows read (a join's evaluate and provenance take these)."""
        return {src.stream.name: src.read for src in self.sources}

    @property
    def stream(self) -> str:
        return self.plan.stream.name

    @property
    def join(self) -> bool:
        return isinstance(self.plan, JoinQueryPlan)

    @property
    def streams(self) -> list[str]:
        return [src.stream.name for src in self.sources]


def may_offload(txn: QueryTxn) -> bool:
    return not txn.join and txn.plan.access == AccessPath.WINDOW


# -- pinned reads (AS OF SLIDE k) ------------------------------------------------------------------------
# A one-time query may ask for the window as it stood right after slide k: it reads exactly slide k's
# n_Q sub-windows (k - n_Q + 1 .. k, from 0 while the window filled), never one sealed later, so two
# reads of the same k answer the same. It is answerable while all of them are still in the circular
# array; it begins only then, reads them oldest first (the next to be overwritten), and a slide that
# overwrites one it has not read yet ends it (FAILED_PRECONDITION), since it can never be answered again.
# Slides that only move the current window on do not conflict with it: it never aborts or restarts.
def pinned_live(plan, window) -> bool:
    span = window.answerable(plan.n_q)
    return span is not None and span[0] <= plan.as_of <= span[1]


def expired(plan, window, during: bool = False) -> Exception:
    from .engine import FailedPrecondition  # the engine's error (FAILED_PRECONDITION); it imports this module

    span = window.answerable(plan.n_q)
    can = (f"it can answer AS OF SLIDE {span[0]} to {span[1]} for this RANGE ({plan.n_q} sub-windows)"
           if span else "it can answer no slide yet (nothing sealed)")
    k = plan.as_of
    if during:
        why = f"slide {k}'s sub-windows left the window while the query read them"
    elif k > window.latest:
        why = f"slide {k} has not happened yet (the latest slide is {window.latest})"
    else:
        why = f"slide {k}'s sub-windows have left the window (it holds slides {max(0, window.latest - window.n + 1)} to " \
              f"{window.latest})"
    return FailedPrecondition(f"AS OF SLIDE {k} on stream {plan.stream.name!r}: {why}; {can}")
