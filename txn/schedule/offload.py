"""Offloaded query work (Offload, a part of Scheduler): a window scan's read or final merge issued
as a Job, complete(), and holding a read for the next slide. It owns what _init_offload sets; it
must not pick the read order or commit except through the core (Scheduler._commit).

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
thread per lane (Job.lane: periodic executions, one-time queries; server/driver/job_threads.py), and
the scheduler issues one window scan's jobs at a time per lane (Scheduler._choose), so a one-time
query never waits for a periodic job; without `offload` everything is computed inline, as before.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from windowstore.store import Plan, SubWindow
from windowstore.store.kinds import AccessPath

from ..kinds import JobKind, QueryKind, Step
from ..query import Job, QueryFailed, QueryTxn, Source
from .costs import Costs
from .seals import SealJob

if TYPE_CHECKING:
    from windowstore.store import Answer, StoreError

    from ..policies import Policy


class Offload:
    """The offload half of Scheduler (a mixin: the core and this share `self`)."""

    if TYPE_CHECKING:  # what it uses of the core (Scheduler) and of Slides
        active: list[QueryTxn]
        control: Policy
        clock: Callable[[], float]
        last_error: StoreError | None
        _reselect: bool

        def _commit(self, txn: QueryTxn, answer: Answer, span: tuple | None = None) -> None: ...
        def holders(self, name: str) -> list[QueryTxn]: ...
        def fail(self, txn: QueryTxn, error: Exception) -> None: ...
        def _sealed(self, job: SealJob, sub: SubWindow | None, error: BaseException | None, ms: float | None) -> Step: ...

    def _init_offload(self) -> None:
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
        self.reads_recalled = 0  # window-scan reads taken from a sub-window's memo, not scanned (store/memo.py)

    def _check_jobs(self) -> None:
        """A query waits for at most one job, only in a begun attempt, only for what that attempt
        still needs; while a job is in flight no other window scan of its lane has one."""
        self.costs._check()
        lanes: list[QueryKind] = []
        for txn in self.active:
            job = txn.job
            if job is None:
                continue
            lanes.append(job.lane)
            assert job.txn is txn and txn.begun and self.offload is not None and not txn.join
            if job.kind == JobKind.READ:
                assert job.version in txn.sources[0].read and job.version not in txn.partial.contributions
            else:
                assert job.kind == JobKind.FINISH and self.control.next_read(txn) is None
        assert len(set(lanes)) == len(lanes), f"one job in flight at a time per lane: {lanes}"

    def _offloads(self, plan: Plan, kind: JobKind, rows: int) -> bool:
        if self.offload is None or plan.access != AccessPath.WINDOW:
            return False
        if self.offload_ms <= 0:
            return True
        ms = self.costs.estimate(plan, kind, rows)
        if ms is None:
            return rows >= self.offload_unmeasured_rows
        return ms >= self.offload_ms

    def _timed(self, plan: Plan, kind: JobKind, rows: int, fn, arg):
        """fn(arg), a window scan's read or merge run inline, its cost noted when there is a timer."""
        if self.timer is None or plan.access != AccessPath.WINDOW:
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
        self.offload(job)  # type: ignore[misc]  # issued only when offload is set

    def _hold(self, txn: QueryTxn, src: Source, sub: SubWindow) -> bool:
        """Under ttu, the last read is of the sub-window the next slide overwrites, and from it to
        the commit (the final merge) a slide means an abort. When the stream's next slide is due
        before the read and the merge would be done (as measured on the query's earlier runs), the
        query waits for that slide instead: the sub-window leaves unread (no conflict) and the
        newest one is read instead. Only when the estimate is under half a slide period (no
        livelock)."""
        plan = txn.plan
        if (self.offload is None or not self.control.holds or txn.fallback or src.as_of is not None
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

    def settle_held(self, name: str) -> None:
        """While a query holds `name`'s window (under serial, or it fell back: Scheduler.held),
        run here and now the query job in flight in its lane (its own, or one it waits behind),
        as settle() seals a slide here: for a caller that must apply a slide of `name` in its
        call (a manual Slide, which spun for ever under serial when that query waited for its
        job); the query then goes on inline (step()) to its commit. The job's own result, when it
        comes back, is discarded. Another lane's job goes on on its thread."""
        lanes = {t.kind for t in self.holders(name)}
        if not lanes:
            return
        for txn in [t for t in self.active if t.job is not None and t.kind in lanes]:
            job = txn.job
            try:
                value = job.run()  # type: ignore[union-attr]  # (checked: not None)
            except Exception as e:  # noqa: BLE001 - the query's own failure, as complete() takes it
                self.complete(job, error=e)  # type: ignore[arg-type]
            else:
                self.complete(job, value)  # type: ignore[arg-type]

    def complete(self, job: Job | SealJob, value: object = None, error: BaseException | None = None,
                 ms: float | None = None) -> Step:
        """An offloaded job's result (or the exception it raised), back on the scheduler's thread,
        with how long it ran (`ms`, when measured). A read adds its contribution; a final merge
        commits (nothing changed the read set since it was issued, or it would be orphaned); a
        seal installs its sub-window. Returns 'read', 'commit', 'slide', 'error' or 'discarded'."""
        if isinstance(job, SealJob):
            return self._sealed(job, value, error, ms)  # type: ignore[arg-type]  # a seal job's value: its sub-window
        txn = job.txn
        if ms is not None:
            self.costs.note(txn.plan, job.kind, job.rows, ms)
        if txn.job is not job or txn.done:
            self.jobs_discarded += 1
            return Step.DISCARDED
        txn.job = None
        self._reselect = True
        if error is not None:
            self.last_error = QueryFailed.of(error)
            self.fail(txn, self.last_error)
            return Step.ERROR
        if job.kind == JobKind.READ:
            txn.partial.add(job.version, value)  # type: ignore[arg-type]  # a read job has its version
            if txn.plan.memo_key is not None:  # kept for the query's next read of it (store/memo.py)
                txn.sources[0].read[job.version].memo.put(txn.plan.memo_key, value)  # type: ignore[index]  # recorded at issue
            return Step.READ
        self._commit(txn, value)  # type: ignore[arg-type]  # a final merge's value: its answer
        return Step.COMMIT
