"""The scheduler's work on the event loop: its multi-step work (slides, the steps of long queries,
periodic queries, join refreshes) runs cooperatively, a budget of operations per loop callback
(`step`, `loop.call_soon`), so other calls are answered between them; a processing-time slide has
a loop timer at its due time (`loop.call_later`) and is also applied before every read and write
(`slides_first`: the scheduler's guarantee that a due slide runs before the next read); a job back
from the query or seal thread is completed here.

Owns the step callback, the slide timer, when the next slide is due, and the heartbeat (the last
scheduler operation, which health watches). Runs on the event loop only. Must not touch the log
(it tells `dirty` that something may have been applied), the calls from other threads or the
subscribers.
"""
from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import Callable

from windowstore.txn import QueryFailed
from windowstore.txn.engine import Engine
from windowstore.txn.kinds import Step
from windowstore.txn.scheduler import SealJob

log = logging.getLogger("windowstore.driver")

__all__ = ["STEP_BUDGET_S", "Stepper"]

# After a scheduler operation that held the loop at least _LONG_STEP_S, the next one waits a
# quarter of that (at most 5 ms), so the loop accepts and answers calls meanwhile: under a load of
# long operations the engine has 80% of the loop, and a call is accepted (and so admitted or shed)
# without waiting behind every queued operation.
_LONG_STEP_S = 0.002
_IO_SHARE = 0.25
_IO_PAUSE_MAX_S = 0.005
# One loop callback runs scheduler operations until this much time has passed (or none is left):
# a loop iteration costs about as much as a short operation (grpc.aio polls its completion queue
# on each), so a 10-sub-window query took 10 of them; calls still get the loop every budget.
STEP_BUDGET_S = 0.0005
# A loop timer wakes up to 1 ms late (epoll takes whole milliseconds, rounded up). The timer of a
# slide wakes _SPIN_MS early instead and the last stretch is waited for in loop iterations
# (call_soon; other callbacks run between), when slides come no more often than every
# _SPIN_MIN_PERIOD_MS: at most _SPIN_MS of the loop's time per slide.
_SPIN_MS = 1.2
_SPIN_MIN_PERIOD_MS = 20


class Stepper:
    def __init__(self, engine: Engine, clock: Callable[[], float], dirty: Callable[[], None]):
        """`clock` is the driver's; `dirty()` is called when the engine may have applied something
        (the log's group commit)."""
        self.engine = engine
        self.sched = engine.sched
        self.clock = clock
        self.dirty = dirty
        self.loop: asyncio.AbstractEventLoop | None = None  # the driver's, once started
        self.heartbeat = time.monotonic()  # the last scheduler operation (health watches it)
        self.serving = False  # recovered: steps run from now on (start)
        self.halted = False   # closed: the engine is no longer touched on the loop (halt)
        self._on_drained: Callable[[], None] | None = None  # stopping: called once nothing is left
        self._step_handle: asyncio.Handle | None = None
        self._timer: asyncio.Handle | None = None
        self._timer_due: float | None = None
        self._next_due_ms = -math.inf  # no slide is due before this clock time (-inf: look)
        self._spin = False  # the next slide's stream slides no faster than _SPIN_MIN_PERIOD_MS (_next_due)
        self._in_step = False
        self._unheld: dict[str, list[asyncio.Future]] = {}  # per stream: manual slides waiting (until_unheld)

    # -- life cycle ----------------------------------------------------------------------------
    def start(self) -> None:
        """Serve: steps and timers run from now on."""
        self.serving = True
        self.heartbeat = time.monotonic()

    def finish_when_drained(self, callback: Callable[[], None]) -> None:
        """Stopping: once no query is active and no seal is in flight, `callback()` (instead of
        waiting for the next slide)."""
        self._on_drained = callback
        self.kick()

    def halt(self) -> None:
        """No more steps or timers: the engine is no longer touched on the loop."""
        self.halted = True
        if self._timer is not None:
            self._timer.cancel()
        self._release_unheld()

    # -- state the driver asks about -----------------------------------------------------------
    @property
    def idle(self) -> bool:
        """Serving, and no step is running or scheduled: work submitted now may run at once."""
        return self._step_handle is None and not self._in_step and self.serving and not self.halted

    @property
    def busy(self) -> bool:
        """A step is running or scheduled."""
        return self._in_step or self._step_handle is not None

    def begin_work(self) -> None:
        """The loop runs engine work outside a step (calls from other threads): busy meanwhile."""
        self._in_step = True

    def end_work(self) -> None:
        self._in_step = False
        self.heartbeat = time.monotonic()

    def slide_may_be_due(self) -> None:
        """A write happened: a count-based or event-time slide may be due now."""
        self._next_due_ms = -math.inf

    # -- slides before reads and writes --------------------------------------------------------
    def slides_first(self) -> None:
        """Apply every slide that is due now (a due slide runs before the next read or write)."""
        now = self.clock()
        self.engine.tick(now)
        if now < self._next_due_ms:
            return
        sched = self.sched
        slid = False
        while sched.stream_due_to_slide() is not None:
            self.engine.step()
            slid = True
        if slid:
            self.dirty()
        self._next_due_ms, self._spin = self._next_due()

    def _next_due(self) -> tuple[float, bool]:
        """The clock time of the next processing-time slide (-inf while a slide waits: under the
        serial policy, for the running query's lock; +inf when none is scheduled), and whether its
        stream slides no faster than _SPIN_MIN_PERIOD_MS (its timer then wakes early, see there)."""
        if self.sched.stream_due_to_slide() is not None:
            return -math.inf, False
        due, stream = self.sched.next_due()
        return due, stream is not None and stream.spec.subwindow_ms >= _SPIN_MIN_PERIOD_MS  # type: ignore[operator]  # a time-based window

    def go_on(self, budget_s: float = STEP_BUDGET_S) -> Callable[[], bool]:
        """Between two operations run in one call: the engine's clock advanced (a slide falls due
        on it), and whether the call is still within its budget."""
        until = self.clock() + budget_s * 1000.0
        clock, tick = self.clock, self.engine.tick

        def go_on() -> bool:
            now = clock()
            tick(now)
            return now < until
        return go_on

    # -- the scheduler, a budget of operations per loop callback -------------------------------
    def kick(self) -> None:
        if self._step_handle is None and self.serving and not self.halted:
            self._step_handle = self.loop.call_soon(self.step)  # type: ignore[union-attr]  # set by start()

    def _fail_current(self, error: Exception) -> None:
        txn = self.sched.running
        if txn is not None:
            self.sched.fail(txn, QueryFailed.of(error))

    def _operation(self) -> str | None:
        """One scheduler operation; a failing one fails its query, never the server."""
        self.engine.tick(self.clock())
        try:
            op = self.engine.step()
        except Exception as e:  # a bug must not take the server down: fail the query, keep serving
            log.exception("scheduler step failed")
            self._fail_current(e)
            return Step.ERROR
        if op == Step.ERROR:
            log.error("%s", self.sched.last_error, exc_info=self.sched.last_error.__cause__)  # type: ignore[union-attr]  # an "error" step sets it
        return op

    def step(self) -> None:
        """Run scheduler operations for up to the step budget, then schedule the next step (or
        the slide timer, when there is nothing to do)."""
        self._step_handle = None
        if self.halted:
            return
        self._in_step = True
        t0 = time.monotonic()
        try:
            op = self._operation()
            while op is not None and not self.halted and time.monotonic() - t0 < STEP_BUDGET_S:
                op = self._operation()
        finally:
            self._in_step = False
            self.heartbeat = time.monotonic()
        self._next_due_ms = -math.inf
        self.dirty()
        if self._unheld:
            self._release_unheld()
        if op is not None:
            held = self.heartbeat - t0
            if held >= _LONG_STEP_S and self._step_handle is None and not self.halted:
                # the operation held the loop: give the loop time for I/O (accepting a call and
                # answering one take a few iterations each) before the next one
                self._step_handle = self.loop.call_later(min(held * _IO_SHARE, _IO_PAUSE_MAX_S), self.step)  # type: ignore[union-attr]  # set by start()
            else:
                self.kick()
        elif self._on_drained is not None and not self.sched.active and not self.sched.sealing:
            self._on_drained()
        else:
            self._arm_timer()

    # -- a manual slide waiting for the query that holds its stream's window ----------------------
    def until_unheld(self, name: str) -> "asyncio.Future | None":
        """None when no begun query holds `name`'s window (Scheduler.held: serial's running query,
        or an attempt that fell back under ttu); else a future set once none does (or the stepper
        halts). A manual Slide awaits it before it is applied, so the holding query goes on with
        its jobs on its lane's query thread and the loop serves other calls meanwhile; applied while held,
        the Slide would run the query's job on the loop, in its call (Engine.slide_now)."""
        if self.halted or self.loop is None or not self.sched.held(name):
            return None
        waiting = self.loop.create_future()
        self._unheld.setdefault(name, []).append(waiting)
        return waiting

    def _release_unheld(self) -> None:
        for name in [n for n in self._unheld if self.halted or not self.sched.held(n)]:
            for waiting in self._unheld.pop(name):
                if not waiting.done():
                    waiting.set_result(None)

    # -- offloaded jobs coming back ------------------------------------------------------------
    def job_done(self, job, value, error, ms: float) -> None:
        """A job back from the query or seal thread (JobThreads): completed in the engine."""
        if self.halted:
            return
        self.slides_first()  # a slide due now comes first: the final merge then commits only if still valid
        if error is not None and isinstance(job, SealJob):
            log.error("sealing slide %d of %r failed on the seal thread (%s: %s): sealing it again on the loop",
                      job.cut.slide, job.stream.name, type(error).__name__, error)
        if self.engine.complete(job, value, error, ms) == Step.ERROR:
            log.error("%s", self.sched.last_error, exc_info=self.sched.last_error.__cause__)  # type: ignore[union-attr]  # an "error" step sets it
        self._next_due_ms = -math.inf  # an installed seal: its stream's next slide may be due already
        self.dirty()
        if self._unheld:
            self._release_unheld()
        self.kick()

    # -- the slide timer -----------------------------------------------------------------------
    def _arm_timer(self) -> None:
        """Wake at the next processing-time slide (at most a second ahead: the wall clock may jump)."""
        due, self._spin = self._next_due()
        self._next_due_ms = due
        if due == -math.inf:
            self.kick()
            return
        if due == math.inf:
            if self._timer is not None:
                return  # armed already, at most a second ahead; re-arming it after every write cost each Append a timer
            due = self.clock() + 1000.0
        if self._timer is not None:
            if self._timer_due == due:
                return
            self._timer.cancel()
        spin = _SPIN_MS if self._spin else -0.2  # (without the spin: wake just after it is due)
        delay = min(1.0, max(0.0, (due - self.clock() - spin) / 1000.0))
        self._timer_due = due
        self._timer = self.loop.call_later(delay, self._on_timer)  # type: ignore[union-attr]  # set by start()

    def _on_timer(self) -> None:
        due = self._timer_due
        self._timer = self._timer_due = None
        if self.halted:
            return
        left = due - self.clock() if due is not None else 0.0
        if 0.0 < left <= _SPIN_MS:  # the last stretch before a slide: check again next iteration
            self._timer_due = due
            self._timer = self.loop.call_soon(self._on_timer)  # type: ignore[union-attr]  # set by start()
            return
        if self._step_handle is None:
            self.step()
