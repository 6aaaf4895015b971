"""How a query's attempt ends (Outcomes, a part of Scheduler): commit (one stream's or a join's),
the answer delivered to its caller or periodic task, abort and restart, refusal, failure,
withdrawal; the history records and counters each writes, and a task resumed from its logged
answer. It owns no state of its own (it writes the core's counters and the tasks'); it must not
choose what runs next or read a sub-window (the core, txn/scheduler.py, and the policy do).
"""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Callable

from windowstore.store.aggregates import Partial

from ..history import History, Op
from ..joins import JoinQueryPlan
from ..kinds import AbortCause, PolicyName, QueryKind
from ..query import QueryTxn, RestartLimitExceeded, Result
from .counters import ABORT_COUNTERS, Counters, total
from .edf import deadline

if TYPE_CHECKING:
    from windowstore.store import Answer

    from ..answer_cache import AnswerCache
    from ..policies import Policy
    from ..sharing.runtime import SharedTasks
    from .edf import Task

_START_MS, _END_MS = operator.attrgetter("start_ms"), operator.attrgetter("end_ms")


class Outcomes:
    """The commit and abort half of Scheduler (a mixin: the core and this share `self`)."""

    if TYPE_CHECKING:  # what it uses of the core (Scheduler)
        clock: Callable[[], float]
        history: History | None
        policy: PolicyName
        _policy_value: str
        max_restarts: int
        fallback_after: int
        control: Policy
        active: list[QueryTxn]
        holding: list[QueryTxn]
        tasks: dict[str, Task]
        by_class: dict[QueryKind, Counters]
        by_stream: dict[str, Counters]
        sharing: SharedTasks | None
        _current: QueryTxn | None
        _reselect: bool
        _tasks_changed: bool
        _refresh: dict[str, Task]
        _joins: dict[str, Task]
        answer_cache: AnswerCache | None

        def _keep_answer(self, cache: AnswerCache, txn: QueryTxn, result: Result, sealed_at_ms: float | None) -> None: ...

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
        window = getattr(answer, "window", None)  # (store Answers have it; a shared execution's may not)
        if window is not None:  # a landmark or CUMULATE answer reports the window it is over
            start_ms, end_ms = window
        task = txn.task
        # (answer, slide, window_start_ms, window_end_ms, staleness_ms, response_ms, restarts, policy,
        # txn, answered_ms: positional, as Scheduler._recalled's)
        result = Result(answer, newest.slide if newest else -1, start_ms, end_ms,
                        (now - newest.sealed_at_ms) if newest else None, now - txn.submitted_ms, txn.restarts,
                        self._policy_value, txn.id, now, fallback=txn.fallback)
        late = None
        if task is not None and task.last_reflected is not None:
            late = max(0, -deadline(task))  # slides past the one it was due at (every slides, or a window's completion)
        elif (cache := self.answer_cache) is not None and txn.kind is QueryKind.ONETIME:
            self._keep_answer(cache, txn, result, newest.sealed_at_ms if newest else None)
        self._deliver(txn, result, now, late)

    def _deliver(self, txn: QueryTxn, result: Result, now: float, late: int | None) -> None:
        """A committed answer: counted, a periodic task's execution noted (`late`: slides it lagged
        behind its period, None on its first), the transaction finished and the answer published."""
        if txn.task is not None and getattr(txn.task, "shared", None) is not None:
            self.sharing.deliver(self, txn, result, now)  # type: ignore[union-attr,arg-type]  # a shared execution: answered per member
            return
        task = txn.task
        if task is not None:
            if late is not None:
                result.late_slides = late
                task.late += late > 0
            task.answered(result, now)
            task.running = None
        self.finish_committed(txn, result)
        if task is not None and task.on_answer is not None and task.active:
            task.on_answer(result)

    def finish_committed(self, txn: QueryTxn, result: Result, respawn: bool = True) -> None:
        """Every committed transaction's end, however it is answered (computed, by _deliver; a
        shared execution's, delivered per member by txn/sharing/runtime.py; from the answer
        cache): counted as committed, and the transaction finished with `result`. respawn=False: the caller looks for due tasks again itself when one may
        have waited for this execution (recheck_due_tasks), not after every execution."""
        self._count(txn, "committed")
        txn.result = result
        self._finish(txn, respawn)

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
        plan: JoinQueryPlan = txn.plan  # type: ignore[assignment]  # QueryTxn.plan: a join's plan here
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
            response_ms=now - txn.submitted_ms, restarts=txn.restarts, policy=self._policy_value, txn=txn.id,
            answered_ms=now, sources=sources, fallback=txn.fallback)
        late = None
        if task is not None:
            if task.reflected is not None:
                latest = {s.name: s.window.latest for s in plan.streams}
                late = max([0] + [latest[n] - task.reflected.get(n, -1) - every for n, every in plan.every.items()])
            task.reflected = {s.stream: s.slide for s in sources}
        self._deliver(txn, result, now, late)

    def _abort(self, txn: QueryTxn) -> None:
        """A slide expired a sub-window the attempt read: it aborts and restarts (or fails; or,
        aborted often enough under ttu, its next attempt holds its windows: _fall_back)."""
        self._aborted(txn, AbortCause.CONFLICT)
        txn.begun = False
        txn.job = None  # a job in flight is orphaned
        for src in txn.sources:
            src.reset()
        txn.partial = Partial()
        txn.restarts += 1
        if self.control.falls_back and not txn.fallback and self.fallback_after <= txn.restarts <= self.max_restarts:
            self._fall_back(txn)
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

    def _fall_back(self, txn: QueryTxn) -> None:
        """Liveness under time-to-update reading. Algorithm 8 (thesis 7.4.2) aborts only an
        attempt that meets more slides than it can absorb: reads slower than the slides, or a
        final merge that outlives one (7.5.2: it aborted nothing where a query meets at most one
        concurrent window update). Started again, such a query meets the same slides and aborts
        again, until the restart limit fails it: a shared group's joint execution, many queries'
        work in one, never answers. Re-scanning instead (7.4.2's variant, ttu-rescan) does not
        end it either: the merge after each re-scan outlives the next slide as well.

        So a query that slides aborted `fallback_after` times runs its next attempt as the Serial
        scheduler of 7.5.1 runs every query; under ttu-rescan, an attempt whose final merge
        re-scans orphaned that many times goes on so (what it has read is of the window then,
        less what the re-scans removed: it never aborts; one whose reads run slower than the
        slides is not helped, see docs/sharing.md). It holds its windows: their slides wait for its commit
        (stream_due_to_slide, next_due; a manual Slide runs its jobs here, settle_held).
        No slide is concurrent with it, so it reads the window as of its commit (latest-window
        serializable: Theorem 7.2 holds with no concurrent T_i), cannot be aborted, and answers
        after its reads and merge. What it costs is what Serial costs: the slides of its streams
        are applied late by at most that one attempt (slide_delays). Counted (`fallbacks`),
        said in its Result (`fallback`). Algorithm 7 (lws) keeps its restart limit."""
        txn.fallback = True
        self.holding.append(txn)
        self._count(txn, "fallbacks")

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
            self._joins.pop(task.id, None)
            if self.tasks.pop(task.id, None) is not None:
                task.active = False
                self._tasks_changed = True
                if self.sharing is not None:
                    self.sharing.unregistered(task.id)
        self._finish(txn)
        if task is not None and task.on_error is not None:
            task.on_error(task, error)

    def _withdraw(self, txn: QueryTxn, error: Exception) -> None:
        self._aborted(txn, AbortCause.WITHDRAWN)
        txn.error = error
        if txn.task is not None:
            txn.task.running = None
        self._finish(txn)

    def _finish(self, txn: QueryTxn, respawn: bool = True) -> None:
        txn.done = True
        txn.job = None
        if txn.fallback:
            self.holding.remove(txn)  # its windows slide again
        self._tasks_changed |= respawn and txn.task is not None
        self.active.remove(txn)
        if self._current is txn:
            self._current = None
        self._reselect = True
        if txn.on_done is not None:
            txn.on_done(txn)

    def _aborted(self, txn: QueryTxn, cause: AbortCause) -> None:
        """An attempt ends without commit: an abort record per stream it began on, and the counter
        of its cause (ABORT_COUNTERS)."""
        if txn.begun:
            for name in txn.streams:
                self._record(name, Op.ABORT, txn.id)
        what = ABORT_COUNTERS[cause]
        if what is not None:
            self._count(txn, what)

    def _count(self, txn: QueryTxn, what: str) -> None:
        """Per class, and per stream (a join counts for each stream it reads)."""
        self._tally(txn.kind, [src.stream.name for src in txn.sources], what)

    def _tally(self, kind: QueryKind, streams, what: str) -> None:
        """`what` counted once for class `kind` and once for each of `streams` (a transaction that
        never was a QueryTxn, Scheduler.answer_known, is counted here directly)."""
        c = self.by_class[kind]
        setattr(c, what, getattr(c, what) + 1)
        by_stream = self.by_stream
        for name in streams:
            c = by_stream.get(name)  # type: ignore[assignment]  # (a dropped stream's: None)
            if c is not None:
                setattr(c, what, getattr(c, what) + 1)

    def _record(self, stream: str, op: Op, txn: str, subwindow=None, version=None, window_len=None,
                streams=None, as_of=None) -> None:
        if self.history is not None:
            if as_of is None:
                self.history.record(stream, op, txn, self.clock(), subwindow, version, window_len, streams)
            else:
                self.history.record(stream, op, txn, self.clock(), subwindow, version, window_len, streams, as_of)

    def totals(self) -> dict:
        return total(self.by_class, self.by_stream)
