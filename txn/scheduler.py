"""The transaction scheduler: a deterministic state machine over the store's streams.

Write-only transactions are slides: T_j seals the open buffer into sub-window j mod n and commits
at once. Read-only transactions are queries over the n_Q youngest sub-windows, one sub-window per
operation. `step()` runs exactly one atomic operation (one slide, or one read, with the begin and
commit that bracket it) and records it in the history; the caller owns the loop and the clock.

The policy (thesis chapter 7: serial, ws, lws, ttu, ttu-rescan) is a class chosen once, when the
scheduler is built (policies.py): it says which sub-window a query reads next, what a slide that
expires a sub-window a query read does to it (abort, keep, or re-scan), whether a begun query
holds its windows, and whether a window scan may wait for a slide. The scheduler never asks which
policy it runs.

Join queries (joins.py) are read-only transactions over several streams' windows, one sub-window
per operation; the join itself runs once, at commit, over the sub-windows read. The history has
one begin, commit or abort record per joined stream (the begin with that stream's window length
and the list of joined streams); reads name their stream.

Every slide due is applied before the next read (except under serial, on purpose). One-time
queries pre-empt periodic ones between operations; within a class, higher user priority first;
periodic executions are earliest-deadline-first (Algorithm 9).

Offloaded work. A window scan's read of a sub-window, and its final merge, may take
milliseconds. With `offload` set, such an operation, when its cost measured on earlier runs of the
same query reaches `offload_ms` (`timer` measures the operations run inline; the caller reports
a job's), is issued as a `Job` instead of computed in the step: the read is recorded (and its version is in the read set) when it is issued, because
a sealed sub-window never changes, so when the computation runs does not change what it returns.
The query waits (other queries and every slide go on) until the caller hands the result back with
`complete()`, on the scheduler's thread. Conflicts are resolved at slide time exactly as without
offloading; a job whose query was aborted, rescanned past it, withdrawn or finished since is
orphaned and its result discarded. A final merge commits only if no slide changed the read set
while it ran (LWS at commit). The scheduler itself still holds no thread: the server runs jobs on a
worker thread (server/driver.py); without `offload` everything is computed inline, as before.

Sealing off the scheduler's thread. A slide is a write transaction in two steps: its cut (T_j
begins: the rows of sub-window j are detached from the open buffer, the Slide's place in the log)
and its install (T_j commits: sub-window j takes its position, conflicts are resolved, the history
records the write). Sealing in between (concatenating the rows, building the synopses) touches
only the cut, which nothing changes, so with `seal_offload` set a cut of at least
`seal_offload_rows` rows is sealed as a `SealJob` elsewhere and installed when `complete()` hands
the sub-window back. Meanwhile the window is as of slide j - 1 and appends go on into slide j + 1;
queries of the stream submitted meanwhile wait for the install (a due slide still runs before the
next read), as does its next slide; other streams and their queries go on (see _waits_for_seal).
`settle()` seals one in flight here and now, for a caller that must answer with the sub-window.
"""
from __future__ import annotations

import collections
import itertools
import math
import operator
from dataclasses import dataclass, field
from typing import Callable

from windowstore.store import Answer, Plan, Stream, StoreError, SubWindow
from windowstore.store.window import Cut
from windowstore.store.errors import ResourceLimit
from windowstore.store.aggregates import Partial

from .history import History, Op
from .kinds import AbortCause, JobKind, PolicyName, QueryKind, Reaction, SlideCause, Step
from .policies import Policy, make_policy
from .joins import JoinQueryPlan, StreamWindow, stream_names

POLICIES = tuple(p.value for p in PolicyName)  # the wire and CLI spellings
_START_MS, _END_MS = operator.attrgetter("start_ms"), operator.attrgetter("end_ms")
ONETIME, PERIODIC = QueryKind.ONETIME, QueryKind.PERIODIC


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


@dataclass
class Result:
    """An answer and the metadata DESIGN.md promises with every answer."""

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
    inter_exec_ms: float | None = None
    sources: list[StreamWindow] | None = None  # joins: what it reflects of each joined stream


@dataclass(eq=False)
class Task:
    """A periodic query: re-executes once `every` slides have happened since the state it last
    reflected (thesis 8.4.1), earliest deadline first among those due. every = 0 re-executes
    continually, round-robin (the workload of the thesis's experiments, 7.5)."""

    id: str
    plan: Plan
    every: int
    priority: int = 0
    on_answer: Callable[[Result], None] | None = None
    on_error: Callable[["Task", Exception], None] | None = None
    last_reflected: int | None = None
    last_answer_ms: float | None = None
    executions: int = 0
    late: int = 0
    running: "QueryTxn | None" = None
    active: bool = True
    reflected: dict[str, int] | None = None  # joins: per stream, the slide its last answer reflected

    def slides_behind(self, latest: int) -> int:
        return latest - (self.last_reflected if self.last_reflected is not None else latest - self.every)

    def is_due(self, latest: int) -> bool:
        return self.active and self.running is None and (self.last_reflected is None or latest - self.last_reflected >= self.every)


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


@dataclass(eq=False)
class SealJob:
    """Sealing one slide's cut off the scheduler's thread (see the module docstring): `run()`
    builds the sub-window from the cut alone. Handed back with Scheduler.complete(job, sub)."""

    stream: Stream
    cut: Cut
    cause: SlideCause
    delay: float | None         # ms the cut came after the slide fell due (processing time)

    def run(self) -> SubWindow:
        return self.stream.window.seal_cut(self.cut)


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


@dataclass
class Counters:
    committed: int = 0
    aborts: int = 0
    restarts: int = 0
    failed: int = 0
    removals: int = 0
    errors: int = 0
    slides: int = 0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class Scheduler:
    def __init__(self, policy: "str | Policy", clock: Callable[[], float], history: History | None = None,
                 max_restarts: int = 16):
        self.control: Policy = make_policy(policy)  # the concurrency-control hooks (policies.py)
        self.policy: PolicyName = self.control.name
        self.clock = clock
        self.history = history
        self.max_restarts = max_restarts
        self.streams: dict[str, Stream] = {}
        self.active: list[QueryTxn] = []
        self.tasks: dict[str, Task] = {}
        self.manual_requests: dict[str, int] = {}
        self.in_place: set[str] = set()  # streams whose next slide asked for is sealed in place (request_slide)
        self.by_class = {ONETIME: Counters(), PERIODIC: Counters()}
        self.by_stream: dict[str, Counters] = {}
        self._ids = itertools.count(1)
        self._seq = itertools.count()
        self._current: QueryTxn | None = None
        self._reselect = True
        self._tasks_changed = False
        self.slide_delays: dict[str, collections.deque] = {}
        self.seal_ms: dict[str, collections.deque] = {}  # how long each seal took (when measured)
        self.last_seal_ms: float | None = None  # ... the last one installed
        self.last_rows = 0  # rows touched by the last operation (cost models, benchmarks)
        self.last_error: StoreError | None = None  # the last query (or seal) failure, for the operator's log
        self.last_slide_delay: float | None = None  # ms the last slide came after it fell due (processing time)
        self._refresh: dict[str, Task] = {}  # eager periodic joins whose windows slid since their last refresh
        self.refresh_errors = 0
        # Called when a slide step() applies begins, with its cut and cause ('due' on its clock, or
        # 'manual'): the engine logs it as a command; and when it is installed, with the sub-window.
        self.on_cut: Callable[[str, Cut, str], None] | None = None
        self.on_slide: Callable[[str, SubWindow], None] | None = None
        # Where the seals of cuts of at least seal_offload_rows rows run (see the module docstring);
        # None: inline. The slides being sealed, by stream.
        self.seal_offload: Callable[[SealJob], None] | None = None
        self.seal_offload_rows = 100_000
        self.sealing: dict[str, SealJob] = {}
        self.seals_offloaded = 0
        # Streams whose seal raised, and why: fail-stop (_seal_failed); their slides stop.
        self.failed: dict[str, str] = {}
        # Where window-scan reads and final merges that cost at least offload_ms run (see the module
        # docstring; offload_ms <= 0: all of them); None: inline. `timer` (seconds, monotonic)
        # measures the ones run inline; None: nothing is measured. One not measured yet (a query's
        # first run) is a job when it covers offload_unmeasured_rows rows or more: a first final
        # merge of a holistic aggregate over a large window would otherwise hold the thread once.
        self.offload: Callable[[Job], None] | None = None
        self.offload_ms = 0.25
        self.offload_unmeasured_rows = 100_000
        self.timer: Callable[[], float] | None = None
        self.costs = Costs()
        self.jobs = 0            # jobs issued
        self.jobs_discarded = 0  # results of orphaned jobs thrown away
        self.holds = 0           # queries that waited for a slide instead of risking an abort

    # -- streams and input ---------------------------------------------------------------------
    def add_stream(self, stream: Stream) -> None:
        self.streams[stream.name] = stream
        self.by_stream[stream.name] = Counters()
        self.slide_delays[stream.name] = collections.deque(maxlen=10_000)
        self.seal_ms[stream.name] = collections.deque(maxlen=10_000)

    def drop_stream(self, name: str) -> None:
        stream = self.streams.pop(name)
        for txn in [t for t in self.active if name in t.streams]:
            self._withdraw(txn, QueryWithdrawn(f"stream {name!r} was dropped"))
        for task in [t for t in self.tasks.values() if t.plan.stream is stream or name in stream_names(t.plan)]:
            self.unregister(task.id)  # a join's plan holds the dropped stream's dictionary: it goes
        self.manual_requests.pop(name, None)
        self.in_place.discard(name)
        self.sealing.pop(name, None)  # its seal in flight is orphaned
        self.failed.pop(name, None)
        self.slide_delays.pop(name, None)
        self.seal_ms.pop(name, None)
        self.by_stream.pop(name, None)

    def request_slide(self, name: str, in_place: bool = False) -> None:
        """A client asks to seal the open sub-window of a manual-clock stream now; `in_place`: that
        slide is sealed where it is cut, never offloaded (its requester answers with the sub-window)."""
        self.manual_requests[name] = self.manual_requests.get(name, 0) + 1
        if in_place:
            self.in_place.add(name)

    def slides_due(self, name: str) -> int:
        """Slides of `name` waiting to be applied: due on its clock, plus those asked for."""
        return self.streams[name].window.due(int(self.clock())) + self.manual_requests.get(name, 0)

    def _check(self) -> None:
        """Invariants (property tests call this after every step): every active query is live and
        its stream exists; a query waits for at most one job, only in a begun attempt, only for
        what that attempt still needs; while a job is in flight no other window scan has one."""
        waiting = 0
        for txn in self.active:
            assert not txn.done and all(n in self.streams for n in txn.streams), "active queries are live"
            job = txn.job
            if job is None:
                continue
            waiting += 1
            assert job.txn is txn and txn.begun and self.offload is not None and not txn.join
            if job.kind == JobKind.READ:
                assert job.version in txn.sources[0].read and job.version not in txn.partial.contributions
            else:
                assert job.kind == JobKind.FINISH and self.control.next_read(txn) is None
        for txn in self.active:
            assert [src.stream.name for src in txn.sources] == stream_names(txn.plan), "a source per stream read"
            if txn.begun:  # what the policy's all_read counts on
                for src in txn.sources:
                    src._check()
                    assert set(src.read) <= set(self.control.readable(src)), (txn.id, src.name, sorted(src.read))
                assert self.control.all_read(txn) == (self.control.next_read(txn) is None)
        assert waiting <= 1, "one job in flight at a time"
        assert self.running is None or self.running in self.active
        for name, stream in self.streams.items():
            w, job = stream.window, self.sealing.get(name)
            if name in self.failed:
                assert job is None and w.cutting is not None, "a failed stream keeps the cut it could not seal"
                assert not any(name in t.streams for t in self.active), "no query runs on a failed stream"
                continue
            if job is None:
                assert w.cutting is None, "a cut is sealed at once or in flight"
                continue
            assert job.stream is stream and w.cutting is job.cut and job.cut.slide == w.latest + 1
            if self.control.locks:
                assert not any(t.begun and name in t.streams for t in self.active), "locked windows are not cut"
        assert all(self.manual_requests.get(n, 0) > 0 for n in self.in_place), "sealed in place: a request pending"

    # -- queries -------------------------------------------------------------------------------
    def submit(self, plan: Plan, kind: QueryKind = ONETIME, priority: int = 0,
               on_done: Callable[[QueryTxn], None] | None = None, task: Task | None = None) -> QueryTxn:
        txn = QueryTxn(f"Q{next(self._ids)}", plan, kind, priority, next(self._seq), self.clock(), on_done, task)
        if self.sealing:
            txn.sealed_first = {n: self.sealing[n].cut.slide for n in txn.streams if n in self.sealing}
        self.active.append(txn)
        self._reselect = True
        return txn

    def cancel(self, txn: QueryTxn) -> bool:
        """Withdraw a query (client deadline or cancellation). False if it had already finished."""
        if txn.done:
            return False
        self._withdraw(txn, QueryWithdrawn("cancelled by the client"))
        return True

    def register(self, plan: Plan, every: int, priority: int = 0,
                 on_answer: Callable[[Result], None] | None = None,
                 on_error: Callable[[Task, Exception], None] | None = None, task_id: str | None = None) -> Task:
        task = Task(task_id or f"P{next(self._ids)}", plan, every, priority, on_answer, on_error)
        if task.id in self.tasks:
            raise ValueError(f"periodic query {task.id!r} already exists")
        if isinstance(plan, JoinQueryPlan) and not plan.every:
            plan.every = {n: every for n in plan.names}  # no SLIDE anywhere: `every` slides of any stream
        self.tasks[task.id] = task
        self._tasks_changed = True
        return task

    def unregister(self, task_id: str) -> Task:
        task = self.tasks.pop(task_id)
        task.active = False
        self._refresh.pop(task_id, None)
        if task.running is not None and not task.running.done:
            self._withdraw(task.running, QueryWithdrawn("periodic query unregistered"))
        return task

    # -- the state machine ---------------------------------------------------------------------
    def step(self) -> Step | None:
        """Run one atomic operation. Returns what it did: 'slide', 'read', 'probe', 'hold' (a query
        waits for a slide, see _hold), 'error' (a query or a slide's seal failed: last_error), or
        None if idle (or every query waits for a job or a slide)."""
        name = self._due_slide()
        if name is not None:
            return self._slide(name)
        self._spawn_due_tasks()
        txn = self._choose()
        if self._refresh and (txn is None or (txn.kind != ONETIME and not (self.control.locks and txn.begun))):
            # eager join maintenance: its own operation, after due slides, before periodic reads
            self._refresh_one()
            return Step.REFRESH
        if txn is None:
            return None
        return self._run(txn)

    def _run(self, txn: QueryTxn) -> Step:
        """One operation of txn (_advance); an exception fails that query, not the scheduler."""
        try:
            return self._advance(txn)
        except Exception as e:  # noqa: BLE001 - a query's own failure must not stop the others
            if txn.done:
                raise
            self.last_error = QueryFailed(f"internal error while executing the query: {type(e).__name__}: {e}")
            self.last_error.__cause__ = e
            self.fail(txn, self.last_error)
            return Step.ERROR

    def run_now(self, plan: Plan, priority: int = 0, on_done: Callable[[QueryTxn], None] | None = None,
                go_on: Callable[[], bool] | None = None) -> QueryTxn | None:
        """A one-time query run now, operation after operation, while it is what step() would run:
        no slide is due, its stream is not being sealed and, once the periodic executions due have
        started (as step() starts them), no other query is active but those waiting for a seal and
        no join waits for its refresh. It is then the same as submit() and those step()s: the same
        history, counters and Result, without choosing among the active queries between its reads
        (the serving path's one-caller case, answered in its own call). Between two operations it
        calls go_on() (the caller may advance the clock there) and stops, the query left active for
        step(), when that returns False, when a slide has fallen due, or when the query waits for a
        job or a slide. None when it cannot start now: submit it."""
        if isinstance(plan, JoinQueryPlan) or self._due_slide() is not None or plan.stream.name in self.sealing:
            return None
        self._spawn_due_tasks()
        if self._refresh or not all(self._waits_for_seal(t) for t in self.active):
            return None
        txn = self.submit(plan, ONETIME, priority, on_done)
        self._current = txn  # (what _choose would pick: under serial, it holds its window's slides)
        # Only the clock makes a slide due during this call (a manual, count-based or event-time
        # one comes with a command): the first processing-time slide to fall due stops it.
        due_at = self.next_due()[0]
        while True:
            self._run(txn)
            if (txn.done or txn.job is not None or txn.held_at is not None
                    or (go_on is not None and not go_on()) or self.clock() >= due_at):
                return txn

    def next_due(self) -> tuple[float, Stream | None]:
        """The clock time of the next processing-time slide and its stream ((inf, None): none;
        a stream being sealed is left out)."""
        due, first = math.inf, None
        for stream in self.streams.values():
            if stream.name in self.sealing or stream.name in self.failed:
                continue  # its next slide waits for the install (or never comes)
            d = stream.window.next_due_ms()
            if d is not None and d < due:
                due, first = d, stream
        return due, first

    @property
    def running(self) -> QueryTxn | None:
        """The query the scheduler is executing, if any."""
        cur = self._current
        return cur if cur is not None and not cur.done else None

    def run_until_idle(self, max_ops: int = 10_000_000) -> int:
        n = 0
        while n < max_ops and self.step() is not None:
            n += 1
        return n

    def _due_slide(self) -> str | None:
        for name in self.streams:
            if name in self.sealing or name in self.failed or self.slides_due(name) <= 0:
                continue
            if (self.control.locks and self._current is not None and self._current.begun
                    and name in self._current.streams):
                continue  # the running query locks its window(s)
            return name
        return None

    def _slide(self, name: str) -> Step:
        """Begin (and unless offloaded, commit) the slide due on `name`: 'slide', or 'error' when
        sealing it raised (the stream failed; last_error says why)."""
        stream = self.streams[name]
        cause, in_place = SlideCause.DUE, False
        if self.manual_requests.get(name, 0) > 0 and stream.window.due(int(self.clock())) == 0:
            self.manual_requests[name] -= 1
            cause, in_place = SlideCause.MANUAL, name in self.in_place
            self.in_place.discard(name)
        job = self._cut(stream, cause)
        if self.on_cut is not None:
            self.on_cut(name, job.cut, cause)
        if not in_place and self.seal_offload is not None and job.cut.rows >= self.seal_offload_rows:
            self.sealing[name] = job
            self.seals_offloaded += 1
            self._reselect = True  # its queries wait
            self.seal_offload(job)
            return Step.SLIDE
        return Step.SLIDE if self._seal_here(job) else Step.ERROR

    def apply_slide(self, name: str) -> SubWindow:
        """Write transaction T_j on `name`, now and at once (replay): cut, seal and install."""
        assert name not in self.sealing, "a slide of this stream is being sealed"
        job = self._cut(self.streams[name], SlideCause.DUE)
        sub = self._timed_seal(job)
        self._install(job, sub, notify=False)
        return sub

    def settle(self, name: str) -> None:
        """Seal the slide of `name` in flight here and now and install it (its job's own result,
        when it comes back, is discarded): for a caller that must answer with the sub-window."""
        job = self.sealing.get(name)
        if job is not None:
            self._seal_here(job)

    def _cut(self, stream: Stream, cause: SlideCause) -> SealJob:
        """T_j begins: its rows are cut from the open buffer (Window.cut)."""
        now = self.clock()
        due_at = stream.window.next_due_ms()
        cut = stream.window.cut(int(now))
        self.last_rows = cut.rows
        return SealJob(stream, cut, cause, None if due_at is None else max(0.0, now - due_at))

    def _seal_here(self, job: SealJob) -> bool:
        """Seal job's cut on this thread and install it; False when sealing raised (the stream
        failed: _seal_failed)."""
        try:
            sub = self._timed_seal(job)
        except Exception as e:  # noqa: BLE001 - one stream's defect must not stop the others
            self._seal_failed(job, e)
            return False
        self._install(job, sub, notify=True)
        return True

    def _seal_failed(self, job: SealJob, error: Exception) -> None:
        """Fail-stop for the stream: its cut stays uninstalled and it slides no more; the queries
        reading it fail now (none may wait for a slide that will not come), as do its later
        queries and writes (the engine refuses them) until it is dropped. Replay from the log
        seals the same cut again, so a restart retries it."""
        name = job.stream.name
        if self.sealing.get(name) is job:
            del self.sealing[name]
        why = (f"stream {name!r} stopped: sealing its slide {job.cut.slide} failed "
               f"({type(error).__name__}: {str(error)[:200]})")
        self.failed[name] = why
        self.manual_requests.pop(name, None)
        self.in_place.discard(name)
        self.last_error = StreamFailed(why)
        self.last_error.__cause__ = error
        for txn in [t for t in self.active if name in t.streams]:
            self.fail(txn, self.last_error)
        self._reselect = True

    def _timed_seal(self, job: SealJob) -> SubWindow:
        self.last_seal_ms = None
        if self.timer is None:
            return job.run()
        t0 = self.timer()
        sub = job.run()
        self._note_seal(job, (self.timer() - t0) * 1000.0)
        return sub

    def _note_seal(self, job: SealJob, ms: float) -> None:
        self.last_seal_ms = ms
        self.seal_ms[job.stream.name].append(ms)

    def _install(self, job: SealJob, sub: SubWindow, notify: bool) -> None:
        """T_j commits: install its sub-window, record it, and resolve its conflicts with running
        queries (abort, or remove under ttu-rescan)."""
        name = job.stream.name
        if self.sealing.get(name) is job:
            del self.sealing[name]
            self._reselect = True  # its queries may go on
        stream = self.streams[name]
        stream.window.install(sub)
        j = sub.slide
        self.last_slide_delay = job.delay
        if job.delay is not None:
            self.slide_delays[name].append(job.delay)
        txn_id = f"T{j}"
        self._record(name, Op.WRITE, txn_id, subwindow=sub.position, version=j)
        self._record(name, Op.COMMIT, txn_id)
        self.by_stream[name].slides += 1
        self._reselect = True  # EDF deadlines moved
        self._tasks_changed = True
        for task in self.tasks.values():
            if isinstance(task.plan, JoinQueryPlan) and task.plan.eager and task.plan.reads_stream(name):
                self._refresh[task.id] = task
        self._resolve_conflicts(stream, j)
        if notify and self.on_slide is not None:
            self.on_slide(name, sub)

    def _resolve_conflicts(self, stream: Stream, j: int) -> None:
        """Slide j of `stream` was installed: each begun query reading it meets it as its policy says
        (Reaction): versions up to j - n_Q of that stream have left the window it must reflect
        (thesis: bit (j + n - n_Q) mod n); they abort its attempt or are removed (re-scan)."""
        name = stream.name
        for txn in [t for t in self.active if t.begun and name in t.streams]:
            reaction = self.control.on_slide(txn.plan)
            if reaction is Reaction.KEEP:
                continue
            src = txn.source(name)
            if src.as_of is not None:  # pinned: only an unread sub-window of slide k overwritten matters
                if any(v <= j - stream.window.n and v not in src.read for v in src.versions()):
                    self._refuse(txn, _expired(txn.plan, stream.window, during=True))
                continue
            stale = [v for v in src.read if v <= j - src.n_q]
            if not stale:
                if txn.job is not None and txn.job.kind == JobKind.FINISH:
                    txn.job = None  # a window not yet full gained a sub-window the merge lacks: orphaned
                    self._reselect = True
                continue
            if reaction is Reaction.RESCAN:
                for v in sorted(stale):
                    old = src.read.pop(v)  # (a join at commit never sees its rows)
                    src.cursor = None
                    if v in txn.partial.contributions:  # (a read still in flight has none yet)
                        txn.partial.remove(v)
                    self._record(name, Op.REMOVE, txn.id, subwindow=old.position, version=v)
                    self._count(txn, "removals")
                job = txn.job
                if job is not None and (job.kind == JobKind.FINISH or job.version not in src.read):
                    txn.job = None  # what it computes no longer counts: orphaned
                    self._reselect = True
            else:
                self._abort(txn)

    def _spawn_due_tasks(self) -> None:
        if not self._tasks_changed:
            return
        self._tasks_changed = False
        for task in self.tasks.values():
            if self._task_due(task):
                task.running = self.submit(task.plan, PERIODIC, task.priority, task=task)

    def _task_due(self, task: Task) -> bool:
        plan = task.plan
        if self.failed and any(n in self.failed for n in stream_names(plan)):
            return False  # it would read a window that no longer slides (until the stream is dropped)
        if not isinstance(plan, JoinQueryPlan):
            return task.is_due(plan.stream.window.latest)
        if not task.active or task.running is not None:
            return False
        if task.reflected is None:
            return True
        latest = {s.name: s.window.latest for s in plan.streams}
        return any(latest[n] - task.reflected.get(n, -1) >= every for n, every in plan.every.items())

    def _deadline(self, task: Task) -> int:
        """Slides until the task is due (EDF, Algorithm 9); a join: the soonest of its SLIDEs."""
        plan = task.plan
        if not isinstance(plan, JoinQueryPlan):
            return task.every - task.slides_behind(plan.stream.window.latest)
        latest = {s.name: s.window.latest for s in plan.streams}
        out = None
        for n, every in plan.every.items():
            behind = every if task.reflected is None else latest[n] - task.reflected.get(n, -1)
            d = every - behind
            out = d if out is None else min(out, d)
        return 0 if out is None else out

    def _refresh_one(self) -> None:
        task_id, task = next(iter(self._refresh.items()))
        del self._refresh[task_id]
        try:
            task.plan.refresh()
        except ResourceLimit:
            # too large a join result: what is kept stays consistent; the next execution evaluates
            # again and reports the error to its subscribers
            self.refresh_errors += 1
        except Exception:  # noqa: BLE001 - maintenance must not stop the scheduler
            self.refresh_errors += 1
            task.plan.join.clear()  # a bug: forget what is kept, the next execution starts afresh
        self.last_rows = 0

    def _choose(self) -> QueryTxn | None:
        if not self.active:
            self._current = None
            return None
        cur = self._current
        if self.control.locks and cur is not None and cur.begun and not cur.done:
            return None if cur.job is not None else cur  # no pre-emption
        if self._reselect or cur is None or cur.done or cur.job is not None:
            # Not waiting for a job; and while one is in flight, no other window scan goes on: its
            # jobs would only queue behind it and stretch both queries across more slides (more
            # aborts), while probes and synopsis scans still run between.
            busy = any(t.job is not None for t in self.active)
            ready = [t for t in self.active if t.job is None and not (busy and _may_offload(t))
                     and (t.held_at is None or t.plan.stream.window.latest > t.held_at)
                     and not self._waits_for_seal(t)]
            self._current = min(ready, key=self._rank) if ready else None
            self._reselect = False
        return self._current

    def _waits_for_seal(self, txn: QueryTxn) -> bool:
        """Whether txn waits for a slide that was being sealed when it was submitted: a due slide
        runs before the reads that come after it. A slide cut after the submit does not hold it
        up (it reads the sub-windows installed, and meets that slide at its install as any
        concurrent write), so under sustained ingest, where the next seal starts as the last one
        is installed, a query still runs. Under serial a query begins only on a window no slide is
        being sealed into (its install would change the window under the query)."""
        if self.control.locks and not txn.begun and self.sealing and any(n in self.sealing for n in txn.streams):
            return True
        first = txn.sealed_first
        streams = self.streams
        return first is not None and any(n in streams and streams[n].window.latest < j for n, j in first.items())

    def _rank(self, txn: QueryTxn) -> tuple:
        if txn.kind == ONETIME:
            return (0, -txn.priority, 0, 0, txn.seq)
        # Algorithm 9: the lowest time-until-deadline first. A periodic execution that has begun
        # is not pre-empted by another periodic one (only one-time queries pre-empt it): Algorithm
        # 9 runs tasks in isolation, and a half-read query left waiting only collects conflicts.
        task = txn.task
        deadline = self._deadline(task) if task else 0
        return (1, not txn.begun, deadline, -txn.priority, txn.seq)

    def _advance(self, txn: QueryTxn) -> Step:
        """One operation of txn: its begin (and a probe's one atomic read), or the read of the
        sub-window its policy orders next, of whichever source; and its commit once all is read."""
        if not txn.begun:
            step = self._begin(txn)
            if step is not None:
                return step
        plan = txn.plan
        nxt = self.control.next_read(txn)
        self.last_rows = 0
        if nxt is not None:
            src, sub = nxt
            v = sub.slide
            self.last_rows = rows = sub.rows
            if not txn.join:  # a join keeps a reference (sealed sub-windows never change); it runs at commit
                may_offload = self.offload is not None and plan.access == "window"
                if may_offload and self._hold(txn, src, sub):
                    return Step.HOLD
                if may_offload and self._offloads(plan, JobKind.READ, rows):
                    src.read[v] = sub
                    self._record(src.name, Op.READ, txn.id, subwindow=sub.position, version=v)
                    self._issue(txn, JobKind.READ, lambda: plan.read(sub), v, rows)
                    return Step.READ
                txn.partial.add(v, self._timed(plan, JobKind.READ, rows, plan.read, sub))
            src.read[v] = sub
            self._record(src.name, Op.READ, txn.id, subwindow=sub.position, version=v)
        if self.control.all_read(txn):
            self._evaluate(txn)
        return Step.READ

    def _begin(self, txn: QueryTxn) -> Step | None:
        """Begin an attempt: a begin record per source, then the policy takes what it needs. A
        probe reads and commits here (Step.PROBE); a pinned read whose slide has left the window is
        refused before it begins. None: go on to the first read."""
        plan = txn.plan
        for src in txn.sources:
            if src.as_of is not None and not _pinned_live(plan, src.window):
                self._refuse(txn, _expired(plan, src.window))  # nothing recorded: it never began
                return Step.READ
        txn.begun = True
        streams = stream_names(plan) if txn.join else None
        for src in txn.sources:
            self._record(src.name, Op.BEGIN, txn.id, window_len=src.n_q, streams=streams, as_of=src.as_of)
        if plan.access == "probe" and plan.probes_now():
            # one atomic read of the window-level synopses: it reflects exactly these versions
            # (window.youngest(n_q), as versions); the read set is not built sub-window by
            # sub-window: a probe of 100 spent a third of its time on it
            window = plan.stream.window
            self.last_rows = 0
            versions = range(window.latest, max(window.latest - plan.n_q, -1), -1)
            if self.history is not None and versions:
                self.history.record_reads(txn.stream, txn.id, self.clock(), versions, window.n)
            newest = window.subs[window.latest % window.n] if versions else None
            self._commit(txn, plan.probe(), (newest, *window.bounds(plan.n_q)))
            return Step.PROBE
        for src in txn.sources:  # a restart begins afresh
            src.reset()
        txn.partial = Partial()
        self.control.begin(txn)  # (a probe reads in one step: it needs no snapshot)
        return None

    def _evaluate(self, txn: QueryTxn) -> None:
        """Everything is read: a join runs once over what was read; a window scan's final merge
        runs here or as a job."""
        plan = txn.plan
        if txn.join:
            try:
                answer = plan.evaluate(txn.read_sets())  # the join runs once, over exactly what was read
            except ResourceLimit as e:
                self._refuse(txn, e)
                return
            self._commit(txn, answer)
            return
        rows = sum(s.rows for s in txn.sources[0].read.values())
        if self._offloads(plan, JobKind.FINISH, rows):
            parts = Partial()
            parts.contributions = dict(txn.partial.contributions)  # later removals do not reach it
            self._issue(txn, JobKind.FINISH, lambda: plan.finish(parts), None, rows)
        else:
            self._commit(txn, self._timed(plan, JobKind.FINISH, rows, plan.finish, txn.partial))

    # -- offloaded computations ----------------------------------------------------------------------
    def _offloads(self, plan: Plan, kind: JobKind, rows: int) -> bool:
        if self.offload is None or plan.access != "window":
            return False
        if self.offload_ms <= 0:
            return True
        ms = self.costs.estimate(plan, kind, rows)
        if ms is None:
            return rows >= self.offload_unmeasured_rows
        return ms >= self.offload_ms

    def _timed(self, plan: Plan, kind: JobKind, rows: int, fn, arg):
        """fn(arg), a window scan's read or merge run inline, its cost noted when there is a timer."""
        if self.timer is None or plan.access != "window":
            return fn(arg)
        t0 = self.timer()
        out = fn(arg)
        self.costs.note(plan, kind, rows, (self.timer() - t0) * 1000.0)
        return out

    def _issue(self, txn: QueryTxn, kind: JobKind, run: Callable[[], object], version: int | None, rows: int) -> None:
        txn.job = job = Job(txn, kind, version, run, rows)
        self.jobs += 1
        txn.held_at = None
        self._reselect = True
        self.offload(job)

    def _hold(self, txn: QueryTxn, src: Source, sub: SubWindow) -> bool:
        """Under ttu, the last read is of the sub-window the next slide overwrites, and from it to
        the commit (the final merge) a slide means an abort. When the stream's next slide is due
        before the read and the merge would be done (as measured on the query's earlier runs), the
        query waits for that slide instead: the sub-window leaves unread (no conflict) and the
        newest one is read instead. Only when the estimate is under half a slide period (no
        livelock)."""
        plan = txn.plan
        if (self.offload is None or not self.control.holds or src.as_of is not None
                or len(src.read) + 1 < src.n_q):
            return False
        window = src.window
        due = window.next_due_ms()
        rows = sub.rows + sum(s.rows for s in src.read.values())
        if due is None or not self._offloads(plan, JobKind.FINISH, rows):  # (an inline merge commits in this step)
            return False
        merge = self.costs.estimate(plan, JobKind.FINISH, rows)
        read = self.costs.estimate(plan, JobKind.READ, sub.rows) if self._offloads(plan, JobKind.READ, sub.rows) else 0.0
        if merge is None or read is None or not (due - self.clock() < read + merge < window.spec.subwindow_ms / 2):
            return False
        txn.held_at = window.latest
        self.holds += 1
        self._reselect = True
        return True

    def complete(self, job: Job | SealJob, value: object = None, error: BaseException | None = None,
                 ms: float | None = None) -> Step:
        """An offloaded job's result (or the exception it raised), back on the scheduler's thread,
        with how long it ran (`ms`, when measured). A read adds its contribution; a final merge
        commits (nothing changed the read set since it was issued, or it would be orphaned); a
        seal installs its sub-window. Returns 'read', 'commit', 'slide', 'error' or 'discarded'."""
        if isinstance(job, SealJob):
            return self._sealed(job, value, error, ms)
        txn = job.txn
        if ms is not None:
            self.costs.note(txn.plan, job.kind, job.rows, ms)
        if txn.job is not job or txn.done:
            self.jobs_discarded += 1
            return Step.DISCARDED
        txn.job = None
        self._reselect = True
        if error is not None:
            self.last_error = QueryFailed(
                f"internal error while executing the query: {type(error).__name__}: {error}")
            self.last_error.__cause__ = error
            self.fail(txn, self.last_error)
            return Step.ERROR
        if job.kind == JobKind.READ:
            txn.partial.add(job.version, value)
            return Step.READ
        self._commit(txn, value)
        return Step.COMMIT

    def _sealed(self, job: SealJob, sub: SubWindow | None, error: BaseException | None, ms: float | None) -> Step:
        name = job.stream.name
        if self.sealing.get(name) is not job:  # settled here already, or its stream dropped
            self.jobs_discarded += 1
            return Step.DISCARDED
        if error is not None:
            # sealing is a pure function of the cut: seal again here (memory may have run out there)
            return Step.SLIDE if self._seal_here(job) else Step.ERROR
        self.last_seal_ms = None
        if ms is not None:
            self._note_seal(job, ms)
        self._install(job, sub, notify=True)
        return Step.SLIDE

    def _refuse(self, txn: QueryTxn, error: Exception) -> None:
        """End a query the store refused to answer (a join beyond its row limit): the client gets the
        error (RESOURCE_EXHAUSTED). A periodic join stays registered: this execution is skipped (its
        subscribers are told), the next one comes after its SLIDE, over other windows."""
        self._aborted(txn, AbortCause.REFUSED)
        txn.error = error
        task = txn.task
        if task is not None:
            task.running = None
            if isinstance(txn.plan, JoinQueryPlan):
                task.reflected = {s.name: s.window.latest for s in txn.plan.streams}
                task.last_reflected = txn.plan.stream.window.latest
        self._finish(txn)
        if task is not None and task.on_error is not None:
            task.on_error(task, error)

    def _commit(self, txn: QueryTxn, answer: Answer, span: tuple | None = None) -> None:
        """`span`: (newest sub-window, start, end) of what the query read; from its read set if
        not given."""
        if txn.join:
            return self._commit_join(txn, answer)
        now = self.clock()
        self._record(txn.stream, Op.COMMIT, txn.id)
        read = txn.sources[0].read
        if span is None:
            span = ((read[max(read)], min(map(_START_MS, read.values())), max(map(_END_MS, read.values())))
                    if read else (None, None, None))
        newest, start_ms, end_ms = span
        task = txn.task
        result = Result(
            answer=answer,
            slide=newest.slide if newest else -1,
            window_start_ms=start_ms,
            window_end_ms=end_ms,
            staleness_ms=(now - newest.sealed_at_ms) if newest else None,
            response_ms=now - txn.submitted_ms,
            restarts=txn.restarts,
            policy=self.policy.value,
            txn=txn.id,
            answered_ms=now,
        )
        late = None
        if task is not None and task.last_reflected is not None:
            late = max(0, txn.plan.stream.window.latest - task.last_reflected - task.every)
        self._deliver(txn, result, now, late)

    def _deliver(self, txn: QueryTxn, result: Result, now: float, late: int | None) -> None:
        """A committed answer: counted, a periodic task's execution noted (`late`: slides it lagged
        behind its period, None on its first), the transaction finished and the answer published."""
        self._count(txn, "committed")
        task = txn.task
        if task is not None:
            if late is not None:
                result.late_slides = late
                task.late += late > 0
            result.inter_exec_ms = None if task.last_answer_ms is None else now - task.last_answer_ms
            task.last_reflected = result.slide
            task.last_answer_ms = now
            task.executions += 1
            result.execution = task.executions
            task.running = None
        txn.result = result
        self._finish(txn)
        if task is not None and task.on_answer is not None and task.active:
            task.on_answer(result)

    def resume(self, task_id: str, result: Result) -> None:
        """Recovery: `result` is a periodic task's newest logged answer. The task goes on from it
        as it would have (its next execution after `every` more slides, its execution count), so
        a restart never answers a slide twice."""
        task = self.tasks[task_id]
        task.last_reflected = result.slide
        task.last_answer_ms = result.answered_ms
        task.executions = result.execution
        if result.sources is not None:
            task.reflected = {s.stream: s.slide for s in result.sources}

    def _commit_join(self, txn: QueryTxn, answer: Answer) -> None:
        """Commit a join: its answer reflects, per joined stream, the sub-windows read; Result.slide
        and the window bounds are the first source's stream's, `sources` has every stream's."""
        now = self.clock()
        plan: JoinQueryPlan = txn.plan
        for name in plan.names:
            self._record(name, Op.COMMIT, txn.id)
        reads = txn.read_sets()
        sources = plan.provenance(reads)
        subs = [sub for got in reads.values() for sub in got.values()]
        first = sources[0]
        task = txn.task
        result = Result(
            answer=answer, slide=first.slide, window_start_ms=first.window_start_ms,
            window_end_ms=first.window_end_ms,
            staleness_ms=(now - max(s.sealed_at_ms for s in subs)) if subs else None,
            response_ms=now - txn.submitted_ms, restarts=txn.restarts, policy=self.policy.value, txn=txn.id,
            answered_ms=now, sources=sources)
        late = None
        if task is not None:
            if task.reflected is not None:
                latest = {s.name: s.window.latest for s in plan.streams}
                late = max([0] + [latest[n] - task.reflected.get(n, -1) - every for n, every in plan.every.items()])
            task.reflected = {s.stream: s.slide for s in sources}
        self._deliver(txn, result, now, late)

    def _abort(self, txn: QueryTxn) -> None:
        """A slide expired a sub-window the attempt read: it aborts and restarts (or fails)."""
        self._aborted(txn, AbortCause.CONFLICT)
        txn.begun = False
        txn.job = None  # a job in flight is orphaned
        for src in txn.sources:
            src.reset()
        txn.partial = Partial()
        txn.restarts += 1
        if txn.restarts > self.max_restarts:
            self._aborted(txn, AbortCause.RESTART_LIMIT)
            txn.error = RestartLimitExceeded(
                f"query aborted {txn.restarts} times by concurrent slides (limit {self.max_restarts}); "
                f"try a shorter RANGE or the ttu policy")
            self._finish(txn)
            if txn.task is not None:
                txn.task.running = None
                if txn.task.on_error is not None:
                    txn.task.on_error(txn.task, txn.error)
        else:
            self._count(txn, "restarts")
        self._reselect = True

    def fail(self, txn: QueryTxn, error: Exception) -> None:
        """End a query with an internal error. A periodic query that fails so is unregistered (it
        would fail again on every execution) and its on_error told."""
        if txn.done:
            return
        self._aborted(txn, AbortCause.ERROR)
        txn.error = error
        task = txn.task
        if task is not None:
            task.running = None
            self._refresh.pop(task.id, None)
            if self.tasks.pop(task.id, None) is not None:
                task.active = False
                self._tasks_changed = True
        self._finish(txn)
        if task is not None and task.on_error is not None:
            task.on_error(task, error)

    def _withdraw(self, txn: QueryTxn, error: Exception) -> None:
        self._aborted(txn, AbortCause.WITHDRAWN)
        txn.error = error
        if txn.task is not None:
            txn.task.running = None
        self._finish(txn)

    def _finish(self, txn: QueryTxn) -> None:
        txn.done = True
        txn.job = None
        self._tasks_changed |= txn.task is not None
        self.active.remove(txn)
        if self._current is txn:
            self._current = None
        self._reselect = True
        if txn.on_done is not None:
            txn.on_done(txn)

    def _aborted(self, txn: QueryTxn, cause: AbortCause) -> None:
        """An attempt ends without commit: an abort record per stream it began on, and the counter
        of its cause (_ABORT_COUNTERS)."""
        if txn.begun:
            for name in txn.streams:
                self._record(name, Op.ABORT, txn.id)
        what = _ABORT_COUNTERS[cause]
        if what is not None:
            self._count(txn, what)

    def _count(self, txn: QueryTxn, what: str) -> None:
        """Per class, and per stream (a join counts for each stream it reads)."""
        for c in (self.by_class[txn.kind], *(self.by_stream.get(n) for n in txn.streams)):
            if c is not None:
                setattr(c, what, getattr(c, what) + 1)

    def _record(self, stream: str, op: str, txn: str, subwindow=None, version=None, window_len=None,
                streams=None, as_of=None) -> None:
        if self.history is not None:
            if as_of is None:
                self.history.record(stream, op, txn, self.clock(), subwindow, version, window_len, streams)
            else:
                self.history.record(stream, op, txn, self.clock(), subwindow, version, window_len, streams, as_of)

    def totals(self) -> dict:
        out = Counters()
        for c in self.by_class.values():
            for k, v in c.as_dict().items():
                setattr(out, k, getattr(out, k) + v)
        out.slides = sum(c.slides for c in self.by_stream.values())
        return out.as_dict()


# An abort's cause -> the Counters field it counts in (a conflict's restart counts in `restarts` too;
# a withdrawn query is not counted).
_ABORT_COUNTERS = {AbortCause.CONFLICT: "aborts", AbortCause.RESTART_LIMIT: "failed",
                   AbortCause.REFUSED: "failed", AbortCause.ERROR: "errors", AbortCause.WITHDRAWN: None}


# -- pinned reads (AS OF SLIDE k) ------------------------------------------------------------------------
# A one-time query may ask for the window as it stood right after slide k: it reads exactly slide k's
# n_Q sub-windows (k - n_Q + 1 .. k, from 0 while the window filled), never one sealed later, so two
# reads of the same k answer the same. It is answerable while all of them are still in the circular
# array; it begins only then, reads them oldest first (the next to be overwritten), and a slide that
# overwrites one it has not read yet ends it (FAILED_PRECONDITION), since it can never be answered again.
# Slides that only move the current window on do not conflict with it: it never aborts or restarts.
# (Source.versions)


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


def _may_offload(txn: QueryTxn) -> bool:
    return not txn.join and txn.plan.access == "window"


def _pinned_live(plan, window) -> bool:
    span = window.answerable(plan.n_q)
    return span is not None and span[0] <= plan.as_of <= span[1]


def _expired(plan, window, during: bool = False) -> Exception:
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
