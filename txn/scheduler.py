"""The transaction scheduler: a deterministic state machine over the store's streams.

Write-only transactions are slides: T_j seals the open buffer into sub-window j mod n and commits
at once. Read-only transactions are queries over the n_Q youngest sub-windows, one sub-window per
operation. `step()` runs exactly one atomic operation (one slide, or one read, with the begin and
commit that bracket it) and records it in the history; the caller owns the loop and the clock.

The policy (thesis chapter 7: serial, ws, lws, ttu, ttu-rescan) is a class chosen once, when the
scheduler is built (policies/): it says which sub-window a query reads next, what a slide that
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

Offloaded work (schedule/offload.py: in two lanes, periodic and one-time, one window scan's jobs
at a time in each), sealing off the scheduler's thread (schedule/seals.py) and
how an attempt ends (schedule/outcomes.py: commit, delivery, abort, refusal, failure) are parts of
the Scheduler class kept in their own modules; the EDF order of periodic queries is
schedule/edf.py; a query's state is txn/query.py.
"""
from __future__ import annotations

import collections
import itertools
import math
from typing import TYPE_CHECKING, Callable

from windowstore.store import Plan, Stream, StoreError, SubWindow
from windowstore.store.errors import ResourceLimit
from windowstore.store.aggregates import Partial
from windowstore.store.kinds import AccessPath
from windowstore.store.memo import MISS

from .answer_cache import AnswerCache, CachedAnswer, answer_bytes
from .history import History, Op
from .joins import JoinQueryPlan, stream_names
from .kinds import JobKind, PolicyName, QueryKind, Reaction, Step
from .policies import Policy, make_policy
from .query import (QueryFailed, QueryTxn, QueryWithdrawn, RestartLimitExceeded, Result, StreamFailed, expired,
                    may_offload, pinned_live)
from .schedule.counters import Counters
from .schedule.edf import Task, rank, task_due
from .schedule.offload import Offload
from .schedule.outcomes import Outcomes
from .schedule.seals import SealJob, Slides

if TYPE_CHECKING:
    from .sharing.runtime import SharedTasks

# Its callers import these from here (engine, driver, answers, txn/__init__).
__all__ = ["ONETIME", "PERIODIC", "POLICIES", "QueryFailed", "QueryTxn", "QueryWithdrawn", "RestartLimitExceeded",
           "Result", "Scheduler", "SealJob", "StreamFailed", "Task"]

POLICIES = tuple(p.value for p in PolicyName)  # the wire and CLI spellings
ONETIME, PERIODIC = QueryKind.ONETIME, QueryKind.PERIODIC


class Scheduler(Slides, Offload, Outcomes):
    """The core: the state machine step() runs, the queries and their reads, conflicts and commits.
    Its policy (policies/) decides the read order and what a slide does to a query; the slide path
    up to the install (Slides), offloaded query work (Offload) and commits and aborts (Outcomes) are
    parts of this class kept in txn/schedule/; so are the EDF order, the cost model and the counters it uses."""

    def __init__(self, policy: "str | Policy", clock: Callable[[], float], history: History | None = None,
                 max_restarts: int = 16, fallback_after: int = 2):
        self.control: Policy = make_policy(policy)  # the concurrency-control hooks (policies/)
        self.policy: PolicyName = self.control.name
        self._policy_value = self.policy.value  # (an enum's .value is a property: read once)
        self.clock = clock
        self.history = history
        self.max_restarts = max_restarts
        # Under a policy that falls back (Policy.falls_back: ttu), a query aborted this many times by
        # slides runs its next attempt holding its windows (Outcomes._fall_back); `holding`: those
        # queries, while active
        self.fallback_after = fallback_after
        self.holding: list[QueryTxn] = []
        self.streams: dict[str, Stream] = {}
        self.active: list[QueryTxn] = []
        self.tasks: dict[str, Task] = {}
        self.by_class = {ONETIME: Counters(), PERIODIC: Counters()}
        self.by_stream: dict[str, Counters] = {}
        self._ids = itertools.count(1)
        self._seq = itertools.count()
        self._current: QueryTxn | None = None
        self._at_once = False  # in run_now's operations (_recall_run)
        self._reselect = True
        self._tasks_changed = False
        self.last_rows = 0  # rows touched by the last operation (cost models, benchmarks)
        self.last_error: StoreError | None = None  # the last query (or seal) failure, for the operator's log
        self._refresh: dict[str, Task] = {}  # eager periodic joins whose windows slid since their last refresh
        # the registered periodic joins, in registration order: a slide looks among them for eager
        # ones to refresh, not among every periodic query (a thousand dashboard panels)
        self._joins: dict[str, Task] = {}
        self.refresh_errors = 0
        self.sharing: SharedTasks | None = None  # shared execution of periodic queries (txn/sharing/runtime.py), when enabled
        # the answers of one shared execution, (task, result) in order, told at once (the engine logs
        # them as one record); None: each task's on_answer, one by one
        self.on_answers: Callable[[list[tuple[Task, Result]]], None] | None = None
        # one-time answers kept by plan while their window is unchanged (answer_cache.py); None: off
        self.answer_cache: AnswerCache | None = None
        self._init_slides()
        self._init_offload()

    # -- streams and input ---------------------------------------------------------------------
    def add_stream(self, stream: Stream) -> None:
        self.streams[stream.name] = stream
        if stream.window.due_on_rows:
            self._due_on_rows[stream.name] = None
        self._quiet_until = -math.inf  # (its slides may fall due sooner than the others')
        self.by_stream[stream.name] = Counters()
        self.slide_delays[stream.name] = collections.deque(maxlen=10_000)
        self.seal_ms[stream.name] = collections.deque(maxlen=10_000)

    def drop_stream(self, name: str) -> None:
        stream = self.streams.pop(name)
        self._due_on_rows.pop(name, None)
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
        if self.answer_cache is not None:
            self.answer_cache.drop_stream(name)

    def _check(self) -> None:
        """Invariants (property tests call this after every step): every active query is live and
        its stream exists, with a source per stream it reads, and a begun one has read only what
        its policy reads now; then those of the slide path, offloaded jobs, tasks and counters."""
        for txn in self.active:
            assert not txn.done and all(n in self.streams for n in txn.streams), "active queries are live"
            assert [src.stream.name for src in txn.sources] == stream_names(txn.plan), "a source per stream read"
            assert txn.fallback == (txn in self.holding), "a query that fell back holds its windows until it ends"
            if txn.fallback and txn.begun:
                assert not any(n in self.sealing for n in txn.streams), "held windows are not cut"
            if txn.begun:  # what the policy's all_read counts on
                for src in txn.sources:
                    src._check()
                    assert set(src.read) <= set(self.control.readable(src)), (txn.id, src.name, sorted(src.read))
                assert self.control.all_read(txn) == (self.control.next_read(txn) is None)
        assert self.running is None or self.running in self.active
        assert all(t in self.active for t in self.holding) and len(set(map(id, self.holding))) == len(self.holding)
        self.control._check()
        assert list(self._due_on_rows) == [n for n, s in self.streams.items() if s.window.due_on_rows]
        assert int(self.clock()) >= self._quiet_until or self._first_due(self.streams) == self._first_due(
            self._due_on_rows), "before _quiet_until only the streams due on their rows may be due"
        self._check_jobs()
        self._check_slides()
        for task in self.tasks.values():
            task._check()
        assert list(self._joins.items()) == [(i, t) for i, t in self.tasks.items() if isinstance(t.plan, JoinQueryPlan)], \
            "the registered joins, in registration order"
        if self.sharing is not None:
            self.sharing._check()
        if self.answer_cache is not None:
            self.answer_cache._check()
            assert all(p.stream is self.streams.get(p.stream.name) for p in self.answer_cache.plans()), \
                "cached answers are of live streams"
        for c in (*self.by_class.values(), *self.by_stream.values()):
            c._check()

    # -- queries -------------------------------------------------------------------------------
    def submit(self, plan: Plan, kind: QueryKind = ONETIME, priority: int = 0,
               on_done: Callable[[QueryTxn], None] | None = None, task: Task | None = None) -> QueryTxn:
        txn = QueryTxn(f"Q{next(self._ids)}", plan, kind, priority, next(self._seq), self.clock(), on_done, task)
        if self.sealing and not self.read_during_seal:
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
        task.since = {s.name: s.window.latest for s in (plan.streams if isinstance(plan, JoinQueryPlan) else [plan.stream])}
        self.tasks[task.id] = task
        if isinstance(plan, JoinQueryPlan):
            self._joins[task.id] = task
        self._tasks_changed = True
        if self.sharing is not None:
            self.sharing.add(task)
        return task

    def unregister(self, task_id: str) -> Task:
        task = self.tasks.pop(task_id)
        self._joins.pop(task_id, None)
        task.active = False
        if self.sharing is not None:
            self.sharing.unregistered(task_id)
        self._refresh.pop(task_id, None)
        if task.running is not None and not task.running.done:
            self._withdraw(task.running, QueryWithdrawn("periodic query unregistered"))
        return task

    # -- the state machine ---------------------------------------------------------------------
    def step(self) -> Step | None:
        """Run one atomic operation. Returns what it did: 'slide', 'read', 'probe', 'hold' (a query
        waits for a slide, see _hold), 'error' (a query or a slide's seal failed: last_error), or
        None if idle (or every query waits for a job or a slide)."""
        name = self.stream_due_to_slide()
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
            self.last_error = QueryFailed.of(e)
            self.fail(txn, self.last_error)
            return Step.ERROR

    def run_now(self, plan: Plan, priority: int = 0, on_done: Callable[[QueryTxn], None] | None = None,
                go_on: Callable[[], bool] | None = None) -> QueryTxn | None:
        """A one-time query run now, operation after operation, while it is what step() would run:
        no slide is due, its stream is not being sealed (unless read_during_seal) and, once the periodic executions due have
        started (as step() starts them), no other query is active but those waiting for a seal and
        no join waits for its refresh. It is then the same as submit() and those step()s: the same
        history, counters and Result, without choosing among the active queries between its reads
        (the serving path's one-caller case, answered in its own call). Between two operations it
        calls go_on() (the caller may advance the clock there) and stops, the query left active for
        step(), when that returns False, when a slide has fallen due, or when the query waits for a
        job or a slide. None when it cannot start now: submit it."""
        if not self._begins_now(plan):
            return None
        cache = self.answer_cache
        if cache is not None:
            entry = cache.get(plan)
            if entry is not None:
                return self._recall_answer(plan, entry, priority, on_done)
        txn = self.submit(plan, ONETIME, priority, on_done)
        self._current = txn  # (what _choose would pick: under serial, it holds its window's slides)
        # Only the clock makes a slide due during this call (a manual, count-based or event-time
        # one comes with a command): the first processing-time slide to fall due stops it. When
        # that is, is asked only once the query goes on past its first operation: a probe, or a
        # scan answered from the memo, is done in one (it was a few percent of such a call).
        due_at = None
        self._at_once = True  # (_advance: memoised reads in one operation, _recall_run)
        try:
            while True:
                self._run(txn)
                if txn.done or txn.job is not None or txn.held_at is not None or (go_on is not None and not go_on()):
                    return txn
                if due_at is None:
                    due_at = self.next_due()[0]
                if self.clock() >= due_at:
                    return txn
        finally:
            self._at_once = False

    def _begins_now(self, plan: Plan) -> bool:
        """Whether step() would begin a one-time query of `plan` now, as run_now and answer_known
        ask: it reads one stream, no slide is due, its stream is not being sealed (unless
        read_during_seal) and, once the periodic executions due have started (as step() starts
        them), no other query is active but those waiting for a seal and no join waits for its
        refresh."""
        if isinstance(plan, JoinQueryPlan) or self.stream_due_to_slide() is not None:
            return False
        if plan.stream.name in self.sealing and (self.control.locks or not self.read_during_seal):
            return False
        if self._tasks_changed:
            self._spawn_due_tasks()
        return not self._refresh and (not self.active or all(self._waits_for_seal(t) for t in self.active))

    def answer_known(self, key) -> Result | None:
        """A one-time query known by its request (AnswerCache.note_request: `key` is the shell's)
        answered from the entry it asks for, where run_now would answer it from that entry now: the
        entry's stream is the live one, its window's version is the entry's and the query would
        begin at once (_begins_now). The same transaction as run_now's hit, recorded and counted
        alike (_recalled, _tally), without parsing or planning the query again, and
        without a QueryTxn: it is never active and nobody waits for it. Its Result (`txn`: its
        id); None: not so (run it the usual way)."""
        cache = self.answer_cache
        if cache is None:
            return None
        entry = cache.known(key)
        if entry is None:
            return None
        plan = entry.plan
        stream = plan.stream
        if self.streams.get(stream.name) is not stream or not entry.answers_now or not self._begins_now(plan):
            return None
        cache.hit(entry)
        next(self._seq)  # (the order a submitted query would have taken)
        result = self._recalled(entry, f"Q{next(self._ids)}", self.clock())
        self._tally(ONETIME, (stream.name,), "committed")
        return result

    def _recall_answer(self, plan: Plan, entry: CachedAnswer, priority: int,
                       on_done: Callable[[QueryTxn], None] | None) -> QueryTxn:
        """run_now's query answered from the answer cache: a transaction (_recalled), ended as
        every committed one is (finish_committed)."""
        txn = QueryTxn(f"Q{next(self._ids)}", plan, ONETIME, priority, next(self._seq), self.clock(), on_done)
        txn.begun = True
        txn.window_version = entry.version
        self.active.append(txn)  # (what finish_committed ends)
        self.finish_committed(txn, self._recalled(entry, txn.id, txn.submitted_ms))
        return txn

    def _recalled(self, entry: CachedAnswer, txn_id: str, now: float) -> Result:
        """A one-time query answered from the answer cache (answer_cache.py): a read-only transaction
        that begins, reads the window's sub-windows in one operation and commits, now, where run_now
        would have begun it (so at the latest committed window: its version is the entry's, nothing
        due before it). Recorded as a probe is (begin, the reads, commit); its Result, the per-call
        fields this call's. The caller counts it as committed."""
        plan = entry.plan
        name = plan.stream.name
        history = self.history
        if history is not None:  # (one clock reading for the begin, the reads and the commit)
            history.record_read_only(name, txn_id, now, plan.n_q, entry.reads, plan.stream.window.n, plan.as_of)
        self.last_rows = 0
        sealed = entry.sealed_at_ms
        # (positional: a call of a dataclass's __init__ by keywords costs twice as much)
        return Result(entry.answer, entry.slide, entry.window_start_ms, entry.window_end_ms,
                      None if sealed is None else now - sealed, 0.0, 0, self._policy_value, txn_id, now, cached=entry)

    def _keep_answer(self, cache: AnswerCache, txn: QueryTxn, result: Result, sealed_at_ms: float | None) -> None:
        """A one-time single-stream query committed (_commit's call): keep its answer in `cache`
        when its whole attempt saw one committed state of the window (its version unchanged since
        it began) and it read exactly that state's window (or the pinned slide's), as a hit will
        record; not the first time the plan runs (AnswerCache.admits)."""
        src = txn.sources[0]
        window = src.stream.window
        answer = result.answer
        if window.version != txn.window_version or getattr(answer, "sketches", None):
            return
        reads = src.versions()
        if src.read and not (len(src.read) == len(reads) and all(v in src.read for v in reads)):
            return  # (a probe reads the window in one operation: src.read stays empty)
        if not cache.admits(txn.plan):
            return  # its first execution: kept from the next on
        cache.put(CachedAnswer(txn.plan, window.version, answer, result.slide, result.window_start_ms,
                               result.window_end_ms, sealed_at_ms, reads, answer_bytes(answer)))

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

    def stream_due_to_slide(self) -> str | None:
        """A stream whose slide is due and may be applied now, or None. Before the clock time
        when one could fall due on the clock or on request (_quiet_until), only the streams whose
        slides fall due on their rows are looked at."""
        if int(self.clock()) < self._quiet_until:
            rows = self._due_on_rows
            return self._first_due(rows) if rows else None
        name = self._first_due(self.streams)
        if name is None:
            self._quiet_until = self._quiet_from_now()
        return name

    def _first_due(self, names) -> str | None:
        for name in names:
            if name in self.sealing or name in self.failed or self.slides_due(name) <= 0:
                continue
            if self.held(name):
                continue  # a query holds its window(s) until its commit
            return name
        return None

    def held(self, name: str) -> bool:
        """Whether a begun query holds the stream's window, its slides waiting for its commit: the
        running one under a policy that locks (serial), or an attempt that fell back
        (Outcomes._fall_back)."""
        return bool(self.holders(name))

    def holders(self, name: str) -> list[QueryTxn]:
        """The begun queries that hold the stream's window (see held)."""
        cur = self._current
        out = [t for t in self.holding if t.begun and name in t.streams]
        if self.control.locks and cur is not None and cur.begun and name in cur.streams and cur not in out:
            out.append(cur)
        return out

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
        for task in self._joins.values():
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
                    self._refuse(txn, expired(txn.plan, stream.window, during=True))
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
                    txn.rescans += job.kind == JobKind.FINISH
                    if (self.control.falls_back and not txn.fallback and txn.rescans >= self.fallback_after
                            and not any(n in self.sealing for n in txn.streams)):
                        # what it has read is of the window now: it goes on holding it (Outcomes._fall_back)
                        self._fall_back(txn)
            else:
                self._abort(txn)

    def recheck_due_tasks(self) -> None:
        """Look again at the next step for periodic tasks that are due (one may have waited for
        something that is now over, such as a shared execution holding its members)."""
        self._tasks_changed = True

    def _spawn_due_tasks(self) -> None:
        if not self._tasks_changed:
            return
        self._tasks_changed = False
        if self.sharing is not None:
            return self.sharing.spawn(self)
        for task in self.tasks.values():
            if task_due(task, self.failed):
                task.running = self.submit(task.plan, PERIODIC, task.priority, task=task)

    def _refresh_one(self) -> None:
        task_id, task = next(iter(self._refresh.items()))
        del self._refresh[task_id]
        try:
            task.plan.refresh()  # type: ignore[attr-defined]  # Task.plan: a join's plan here
        except ResourceLimit:
            # too large a join result: what is kept stays consistent; the next execution evaluates
            # again and reports the error to its subscribers
            self.refresh_errors += 1
        except Exception:  # noqa: BLE001 - maintenance must not stop the scheduler
            self.refresh_errors += 1
            task.plan.join.clear()  # type: ignore[attr-defined]  # a join's plan; a bug: forget what is kept, the next execution starts afresh
        self.last_rows = 0

    def _choose(self) -> QueryTxn | None:
        if not self.active:
            self._current = None
            return None
        cur = self._current
        if self.control.locks and cur is not None and cur.begun and not cur.done:
            return None if cur.job is not None else cur  # no pre-emption
        if cur is not None and cur.fallback and cur.begun and not cur.done and cur.job is None:
            return cur  # it holds its windows' slides: nothing pre-empts it (while its job runs, others do)
        if self._reselect or cur is None or cur.done or cur.job is not None:
            # Not waiting for a job; and while one is in flight in a lane (Job.lane: periodic or
            # one-time, each run on a job thread of its own), no other window scan of that lane
            # goes on: its jobs would only queue behind it and stretch both queries across more
            # slides (more aborts), while probes and synopsis scans still run between. A one-time
            # scan goes on beside a periodic job, never behind one (issue 30).
            busy = {t.kind for t in self.active if t.job is not None}
            ready = [t for t in self.active if t.job is None and not (t.kind in busy and may_offload(t))
                     and (t.held_at is None or t.plan.stream.window.latest > t.held_at)
                     and not self._waits_for_seal(t)]
            held = [t for t in ready if t.fallback and t.begun] if self.holding else None
            self._current = min(held or ready, key=rank) if ready else None
            self._reselect = False
        return self._current

    def _waits_for_seal(self, txn: QueryTxn) -> bool:
        """Whether txn waits for a slide that was being sealed when it was submitted: a due slide
        runs before the reads that come after it. A slide cut after the submit does not hold it
        up (it reads the sub-windows installed, and meets that slide at its install as any
        concurrent write), so under sustained ingest, where the next seal starts as the last one
        is installed, a query still runs. Under serial a query begins only on a window no slide is
        being sealed into (its install would change the window under the query)."""
        if ((self.control.locks or txn.fallback) and not txn.begun and self.sealing
                and any(n in self.sealing for n in txn.streams)):
            return True
        first = txn.sealed_first
        streams = self.streams
        return first is not None and any(n in streams and streams[n].window.latest < j for n, j in first.items())

    def _advance(self, txn: QueryTxn) -> Step:
        """One operation of txn: its begin (and a probe's one atomic read), or the read of the
        sub-window its policy orders next, of whichever source; and its commit once all is read.
        In run_now (`_at_once`), a read taken from the memo takes the memoised reads after it too
        (_recall_run)."""
        if not txn.begun:
            step = self._begin(txn)
            if step is not None:
                return step
        plan = txn.plan
        nxt = self.control.next_read(txn)
        self.last_rows = 0
        recall_more = False
        if nxt is not None:
            src, sub = nxt
            v = sub.slide
            self.last_rows = rows = sub.rows
            if not txn.join:  # a join keeps a reference (sealed sub-windows never change); it runs at commit
                may_offload = self.offload is not None and plan.access == AccessPath.WINDOW
                if may_offload and self._hold(txn, src, sub):
                    return Step.HOLD
                key = plan.memo_key
                got = MISS if key is None else sub.memo.get(key)
                if got is not MISS:  # the same query read this sealed sub-window before (store/memo.py)
                    self.last_rows = 0
                    self.reads_recalled += 1
                    txn.partial.add(v, got)
                    recall_more = self._at_once
                elif may_offload and self._offloads(plan, JobKind.READ, rows):
                    src.read[v] = sub
                    self._record(src.name, Op.READ, txn.id, subwindow=sub.position, version=v)
                    self._issue(txn, JobKind.READ, lambda: plan.read(sub), v, rows)
                    return Step.READ
                else:
                    got = self._timed(plan, JobKind.READ, rows, plan.read, sub)
                    txn.partial.add(v, got)
                    if key is not None:
                        sub.memo.put(key, got)
            src.read[v] = sub
            self._record(src.name, Op.READ, txn.id, subwindow=sub.position, version=v)
            if recall_more and self._recall_run(txn, src, plan.memo_key, may_offload):
                return Step.HOLD
        if self.control.all_read(txn):
            self._evaluate(txn)
        return Step.READ

    def _recall_run(self, txn: QueryTxn, src, key, may_offload: bool) -> bool:
        """After a read taken from the memo, in run_now: the reads that follow it in the policy's
        order, of the same source, while the memo holds them too, in the same operation. Sealed
        sub-windows never change, so their contributions recalled in one operation are what one
        operation each gives when nothing runs between them (run_now: nothing does); each read
        is recorded as before, in the same order (thesis Algorithm 8's order under ttu), as a
        probe reads many versions in one operation (_begin). Why: a repeated window scan's reads
        are dict lookups, and an operation each cost more than the lookup (docs/performance.md,
        where a query's time goes). Stops at the first read the memo does not hold; True when
        the query waits for a slide there instead (_hold: what the next operation would do)."""
        control = self.control
        while True:
            nxt = control.next_read(txn)
            if nxt is None or nxt[0] is not src:
                return False
            sub = nxt[1]
            got = sub.memo.get(key)
            if got is MISS:
                return False
            if may_offload and self._hold(txn, src, sub):
                return True
            v = sub.slide
            self.reads_recalled += 1
            txn.partial.add(v, got)
            src.read[v] = sub
            self._record(src.name, Op.READ, txn.id, subwindow=sub.position, version=v)

    def _begin(self, txn: QueryTxn) -> Step | None:
        """Begin an attempt: a begin record per source, then the policy takes what it needs. A
        probe reads and commits here (Step.PROBE); a pinned read whose slide has left the window is
        refused before it begins. None: go on to the first read."""
        plan = txn.plan
        for src in txn.sources:
            if src.as_of is not None and not pinned_live(plan, src.window):
                self._refuse(txn, expired(plan, src.window))  # nothing recorded: it never began
                return Step.READ
        txn.begun = True
        if not txn.join:
            txn.window_version = plan.stream.window.version
        streams = stream_names(plan) if txn.join else None
        for src in txn.sources:
            self._record(src.name, Op.BEGIN, txn.id, window_len=src.n_q, streams=streams, as_of=src.as_of)
        if plan.access == AccessPath.PROBE and plan.probes_now():
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
                answer = plan.evaluate(txn.read_sets())  # type: ignore[attr-defined]  # txn.join; the join runs once, over exactly what was read
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

