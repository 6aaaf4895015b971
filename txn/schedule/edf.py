"""Periodic queries and the order queries run in: Task (a registered periodic query), when one is
due, its deadline, and the rank the scheduler picks the next query by (one-time queries first,
then earliest deadline first, Algorithm 9). It reads tasks, plans and windows; it never submits,
records or changes a query."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping

from windowstore.store import Plan
from windowstore.store.hop import due_by_windows
from windowstore.store.slicing import slides_until_due

from ..joins import JoinQueryPlan, stream_names
from ..kinds import QueryKind

if TYPE_CHECKING:
    from ..query import QueryTxn, Result
    from ..sharing.runtime import Joint


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
    # per stream read, its latest slide when the task was registered: a task that never answered
    # ages from there like one that answered then (it is due at once, and more overdue with every
    # slide it goes without an answer), so under overload it is not starved by tasks that did
    since: dict[str, int] | None = None
    shared: Joint | None = None  # a shared execution's task: whom it answers (txn/sharing/runtime.py)

    def slides_behind(self, latest: int) -> int:
        if self.last_reflected is not None:
            return latest - self.last_reflected
        if self.since:
            return latest - (next(iter(self.since.values())) - self.every)
        return self.every

    def answered(self, result: Result, now: float) -> None:
        """An execution of the task answered `result` at `now`: the result gets the time since
        the task's last answer and the execution's number; the task reflects its slide from here."""
        result.inter_exec_ms = None if self.last_answer_ms is None else now - self.last_answer_ms
        self.last_reflected = result.slide
        self.last_answer_ms = now
        self.executions += 1
        result.execution = self.executions

    def _check(self) -> None:
        assert self.executions >= 0 and self.late <= self.executions, (self.id, self.executions, self.late)
        assert self.running is None or (self.running.task is self and self.active), self.id

    def is_due(self, latest: int) -> bool:
        hop = due_by_windows(self)  # HOP/TUMBLE, sliced and CUMULATE windows: due when a slide completes one
        if hop is not None:
            return (self.active and self.running is None
                    and slides_until_due(hop, self.plan.stream.window, self.last_reflected) <= 0)
        return self.active and self.running is None and (self.last_reflected is None or latest - self.last_reflected >= self.every)


def task_due(task: Task, failed: Mapping[str, str]) -> bool:
    """Whether the periodic query is due for an execution now (none runs, and its SLIDE has
    passed); never while a stream it reads has failed."""
    plan = task.plan
    if failed and any(n in failed for n in stream_names(plan)):
        return False  # it would read a window that no longer slides (until the stream is dropped)
    if not isinstance(plan, JoinQueryPlan):
        return task.is_due(plan.stream.window.latest)
    if not task.active or task.running is not None:
        return False
    if task.reflected is None:
        return True
    latest = {s.name: s.window.latest for s in plan.streams}
    return any(latest[n] - task.reflected.get(n, -1) >= every for n, every in plan.every.items())


def deadline(task: Task) -> int:
    """Slides until the task is due (EDF, Algorithm 9); a join: the soonest of its SLIDEs. A
    window sequence's (due_by_windows): until a slide completes its next window; one that never
    answered ages from its registration like any task (more overdue with every slide since)."""
    plan = task.plan
    hop = due_by_windows(task)
    if hop is not None:
        if task.last_reflected is None:
            return min(0, task.every - task.slides_behind(plan.stream.window.latest))
        return slides_until_due(hop, plan.stream.window, task.last_reflected)
    if not isinstance(plan, JoinQueryPlan):
        return task.every - task.slides_behind(plan.stream.window.latest)
    latest = {s.name: s.window.latest for s in plan.streams}
    out = None
    for n, every in plan.every.items():
        if task.reflected is not None:
            behind = latest[n] - task.reflected.get(n, -1)
        else:
            behind = every + (latest[n] - task.since[n] if task.since and n in task.since else 0)
        d = every - behind
        out = d if out is None else min(out, d)
    return 0 if out is None else out


def rank(txn: QueryTxn) -> tuple:
    """The key the scheduler picks the next query by (the lowest first)."""
    if txn.kind == QueryKind.ONETIME:
        return (0, -txn.priority, 0, 0, txn.seq)
    # Algorithm 9: the lowest time-until-deadline first. A periodic execution that has begun
    # is not pre-empted by another periodic one (only one-time queries pre-empt it): Algorithm
    # 9 runs tasks in isolation, and a half-read query left waiting only collects conflicts.
    task = txn.task
    until = deadline(task) if task else 0
    return (1, not txn.begun, until, -txn.priority, txn.seq)
