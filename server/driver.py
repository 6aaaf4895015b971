"""The driver: runs the engine on the server's event loop, the thread that also runs the RPCs.

There is no thread of its own and no hand-off per call. On the loop thread:

- reads (`read`) run inline in their handler, after any slide that is due (the scheduler's
  guarantee: a due slide runs before the next read);
- writes (`write`) are applied inline; the commands the engine applied during one loop iteration
  are written to the write-ahead log together (group commit, `_flush`), and a write is
  acknowledged once it is durable per the fsync policy (under `--fsync always` the syncer thread
  of durability.py syncs and the answer comes back with `call_soon_threadsafe`);
- the scheduler's multi-step work (slides, the steps of long queries, periodic queries, join
  refreshes) runs cooperatively, one operation per loop callback (`_step`, `loop.call_soon`), so
  other calls are answered between operations; a processing-time slide has a loop timer at its due
  time (`loop.call_later`) and is also checked before every read and write.

A window scan's read of a sub-window and its final merge (a holistic aggregate's sort of the whole
window) that took at least `offload_ms` on earlier runs of the same query are not run on the loop:
the scheduler issues them as jobs (txn/schedule/offload.py) and the query thread
computes them while the loop goes on with slides and other calls; the result comes back with
`call_soon_threadsafe`. NumPy releases the GIL in its heavy loops, and
the switch interval (config.switch_interval_ms) bounds how long the loop waits for it otherwise.
A slide's seal (concatenating the cut rows, building the synopses) of at least
`seal_offload_rows` rows (config.py; ~1 ms of work on the loop, about 11 ns a row here for 4
columns with a group-by, above a hand-off's cost) runs on a seal thread likewise (txn/schedule/seals.py, "Sealing off the
scheduler's thread"): the loop cuts the rows and logs the Slide, goes on serving appends and
other streams, and installs the sub-window when it comes back; queries of that stream that came
meanwhile wait for it.
Still on the loop, holding it for as long as it takes: a join's evaluation (bounded by the store's
limits).

Other threads (the metrics scrape, tests, the command line) use `call` and `command`, which hop
onto the loop and answer on a concurrent future. Recovery runs on a thread of its own before the
engine is served; requests that arrive meanwhile wait for it.

The engine (windowstore.txn.engine) is where state changes; this module only moves commands in
and results out, and keeps what is not state: subscribers and response-time statistics.

Response times are measured at the edge, not by the engine (whose clock only advances between its
operations): a one-time query's from the call's arrival at its handler to its reply ready to send
(service.py, then `note_answer`), including the waits in the loop, for a seal or a due slide, and
the restarts; a periodic execution's from its start (on the driver's clock, ticked into the engine
before every operation) to its answer being handed to the subscribers (`_publish`).
"""
from __future__ import annotations

import asyncio
import collections
import logging
import math
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from windowstore.store import StoreError
from windowstore.store.errors import ResourceLimit
from windowstore.txn import History, QueryFailed, Result
from windowstore.txn.commands import Command
from windowstore.txn.scheduler import SealJob
from windowstore.txn.engine import (AlreadyExists, AppendAck, Engine, EngineConfig, FailedPrecondition, NotFound,
                                    SlideAck)

from . import oplog
from .config import ServerConfig
from .durability import Durability

log = logging.getLogger("windowstore.driver")

__all__ = ["AlreadyExists", "AppendAck", "CLOSED", "DeadlineExceeded", "Driver", "FailedPrecondition", "NotFound",
           "ResourceLimit", "ShuttingDown", "SlideAck", "Unavailable"]


class ShuttingDown(StoreError):
    pass


class DeadlineExceeded(StoreError):
    pass


class Unavailable(StoreError):
    """Writes are refused: the log cannot be written (disk full, I/O error)."""


def wall_ms() -> float:
    return time.time() * 1000.0


CLOSED = object()  # sentinel pushed to subscribers when their query ends


class SubscriberQueue:
    """A subscriber's answers, bounded by count and by bytes: the engine never waits on it; when
    full, the oldest answers are dropped (counted), so a subscriber that never reads holds at most
    the bound, not everything it was sent. Used on the event loop only (no lock)."""

    def __init__(self, max_items: int, max_bytes: int):
        self.max_items, self.max_bytes = max_items, max_bytes
        self._items: collections.deque = collections.deque()
        self._bytes = 0
        self._waiter: asyncio.Future | None = None  # the coroutine waiting in next()

    @staticmethod
    def size(item) -> int:
        rows = getattr(getattr(item, "answer", None), "rows", ())
        return 256 + sum(16 * len(r) + sum(len(v) for v in r if isinstance(v, str)) for r in rows)

    def offer(self, item) -> bool:
        """Queue `item`; False when older answers had to be dropped for it."""
        n = self.size(item)
        dropped = False
        while self._items and (len(self._items) >= self.max_items or self._bytes + n > self.max_bytes):
            self._bytes -= self._items.popleft()[1]
            dropped = True
        self._items.append((item, n))
        self._bytes += n
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        return not dropped

    async def next(self):
        """The oldest queued item; waits (holding no thread) for one."""
        while True:
            if self._items:
                item, n = self._items.popleft()
                self._bytes -= n
                return item
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter


@dataclass
class Subscribers:
    queues: list[SubscriberQueue] = field(default_factory=list)
    dropped: int = 0


@dataclass
class Metrics:
    """Per-stream answer statistics, fed with the response times measured at the edge (not state:
    they start afresh with the process)."""

    staleness: collections.deque = field(default_factory=lambda: collections.deque(maxlen=10_000))
    response: collections.deque = field(default_factory=lambda: collections.deque(maxlen=10_000))


def percentiles(values) -> dict:
    if not values:
        return {"count": 0, "p50": 0.0, "p90": 0.0, "p99": 0.0, "max": 0.0}
    a = np.fromiter(values, dtype=float)
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return {"count": len(a), "p50": float(p50), "p90": float(p90), "p99": float(p99), "max": float(a.max())}


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
_STEP_BUDGET_S = 0.0005
# A loop timer wakes up to 1 ms late (epoll takes whole milliseconds, rounded up). The timer of a
# slide wakes _SPIN_MS early instead and the last stretch is waited for in loop iterations
# (call_soon; other callbacks run between), when slides come no more often than every
# _SPIN_MIN_PERIOD_MS: at most _SPIN_MS of the loop's time per slide.
_SPIN_MS = 1.2
_SPIN_MIN_PERIOD_MS = 20


def _settle(fut, result=None, error: BaseException | None = None) -> None:
    """Answer an asyncio or a concurrent future, unless its caller has gone (cancelled)."""
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


class Driver:
    def __init__(self, config: ServerConfig, clock: Callable[[], float] = wall_ms):
        self.config = config
        self.clock = clock
        self.history = History(config.history_path, keep=config.history_keep)
        self.engine = Engine(EngineConfig(policy=config.policy, sharing=config.sharing, max_restarts=config.max_restarts,
                                          max_streams=config.max_streams,
                                          max_periodic_queries=config.max_periodic_queries,
                                          idempotency_keep=config.idempotency_keep,
                                          idempotency_keep_total=config.idempotency_keep_total,
                                          max_buffered_rows=config.max_buffered_rows,
                                          max_staged_bytes=config.max_staged_mb << 20,
                                          max_join_rows=config.max_join_rows,
                                          answer_log_keep=config.answer_log_keep), self.history)
        self.engine.on_answer = self._publish
        self.engine.on_error = self._publish_error
        self.sched = self.engine.sched
        # one thread for offloaded query work (more would only contend for the GIL); jobs in flight
        # are bounded by the queries admitted (at most one per query)
        self._query_thread = self._seal_thread = None
        if config.offload_ms >= 0:
            self._query_thread = ThreadPoolExecutor(1, thread_name_prefix="windowstore-query")
            # seals on a thread of their own: one does not queue behind a scan's reads, nor they behind it
            self._seal_thread = ThreadPoolExecutor(1, thread_name_prefix="windowstore-seal")
            self.sched.offload = self._offload
            self.sched.offload_ms = config.offload_ms
            self.sched.timer = time.perf_counter
        self.durability = None if config.in_memory else Durability(config.data_dir, config.fsync,
                                                                   config.snapshot_every_bytes,
                                                                   config.snapshot_every_s)
        self.prometheus = None  # metrics.Metrics, when serving them
        self.subscribers: dict[str, Subscribers] = {}
        self.metrics: dict[str, Metrics] = collections.defaultdict(Metrics)
        # per periodic query, execution -> its response time (ms) as published: what Subscribe and
        # ReadAnswers report; as many as its answer log or a subscriber's queue can hold
        self.periodic_response: dict[str, dict[int, float]] = {}
        self._keep_responses = max(config.answer_log_keep, config.subscriber_buffer)
        self.inflight = 0
        self.recovered = threading.Event()  # recovery is over (then `ready`, or `recovery_error`)
        self.finished = threading.Event()   # shut down: the log closed, subscribers told
        self.recovery_error: Exception | None = None
        self.catch_up: dict[str, int] = {}
        self.write_failure: str | None = None
        self.heartbeat = time.monotonic()  # the last scheduler operation (health watches it)
        self.shed = 0  # requests refused for load (RESOURCE_EXHAUSTED)
        self.seconds_like: collections.Counter = collections.Counter()  # by stream: see note_seconds_like
        self.loop: asyncio.AbstractEventLoop | None = None
        self.ready = False  # recovered and serving (read on the loop thread)
        self._own_loop: threading.Thread | None = None  # a loop of our own (no server around it)
        self._ready_waiters: list[asyncio.Future] = []
        self._external: collections.deque = collections.deque()  # (is_command, work, Future, deadline)
        self._acks: list = []   # (future, result) of this iteration's writes: answered once durable
        self._unacked = 0       # writes applied, not yet acknowledged
        self._flush_handle: asyncio.Handle | None = None
        self._step_handle: asyncio.Handle | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due: float | None = None
        self._next_due_ms = -math.inf  # no slide is due before this clock time (-inf: look)
        self._spin = False  # the next slide's stream slides no faster than _SPIN_MIN_PERIOD_MS (_next_due)
        self._in_step = False
        self._closed = False    # new requests are refused
        self._stopping = False  # finish what runs, then close
        self._done = False      # closed: the engine is no longer touched on the loop

    # -- life cycle ------------------------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Recover (on a thread of its own), then serve on `loop`: the server's event loop, or
        without one a loop on a thread of the driver's own (tests, tools)."""
        if loop is None:
            loop = asyncio.new_event_loop()
            self._own_loop = threading.Thread(target=loop.run_forever, name="windowstore-loop", daemon=True)
            self._own_loop.start()
        self.loop = loop
        threading.Thread(target=self._recover_then_serve, name="windowstore-recover", daemon=True).start()

    def _recover_then_serve(self) -> None:
        try:
            self._recover()
        except Exception as e:  # noqa: BLE001 - start-up fails loudly, nothing is served
            log.critical("recovery failed: %s", e)
            self.recovery_error = e
            self._post(self._recovery_failed, e)
            return
        self._post(self._serve)

    def _post(self, fn, *args) -> bool:
        """Run fn on the loop (from any thread); False when the loop is gone."""
        try:
            self.loop.call_soon_threadsafe(fn, *args)
            return True
        except RuntimeError:  # the loop is closed: the server is gone
            return False

    def _recovery_failed(self, error: Exception) -> None:
        self._closed = self._done = True
        self._refuse_waiting(ShuttingDown(f"recovery failed: {error}"))
        self.recovered.set()
        self.finished.set()

    def _serve(self) -> None:
        if self._seal_thread is not None:  # (recovery sealed at once, on its own thread)
            self.sched.seal_offload = self._seal
            self.sched.seal_offload_rows = max(0, self.config.seal_offload_rows)
        self.ready = True
        self.heartbeat = time.monotonic()
        self.recovered.set()
        for fut in self._ready_waiters:
            _settle(fut)
        self._ready_waiters.clear()
        self._dirty()  # the catch-up slides are logged
        self._run_external()
        self._kick()
        if self._stopping:
            self._begin_stop()

    async def until_ready(self) -> None:
        """Wait (on the loop) for recovery to finish; ShuttingDown if the server will not serve."""
        if self.ready:
            return
        if self._closed:
            raise ShuttingDown("the server is shutting down")
        fut = self.loop.create_future()
        self._ready_waiters.append(fut)
        try:
            await fut
        finally:
            if fut in self._ready_waiters:
                self._ready_waiters.remove(fut)

    def stop(self, grace_s: float) -> None:
        """Finish in-flight queries (up to grace_s), tell subscribers, close the log. Called from
        any thread but the loop's."""
        if self.loop is None:
            return
        if self._post(self._begin_stop):
            if not self.finished.wait(grace_s):  # queries still running past the grace period: withdraw them
                self._post(self._withdraw_all)
                self.finished.wait(5)
        if self._own_loop is not None:
            self._post(self.loop.stop)
            self._own_loop.join(5)
            if not self._own_loop.is_alive():
                self.loop.close()

    def _begin_stop(self) -> None:
        self._closed = self._stopping = True
        self._refuse_waiting(ShuttingDown("the server is shutting down"))
        if self.ready and not self._done:
            self._kick()
        elif self.recovery_error is not None:
            self.finished.set()

    def _withdraw_all(self) -> None:
        if self.ready and not self._done:
            for txn in list(self.sched.active):
                self.sched.cancel(txn)
            self._kick()

    def _finish(self) -> None:
        """The last scheduler operation has run: log what is left, tell subscribers, and close the
        log and the history on a thread (a final snapshot), leaving the loop to the RPCs."""
        self._done = True
        if self._timer is not None:
            self._timer.cancel()
        for pool in (self._query_thread, self._seal_thread):
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        self._flush()
        self._close_subscribers("the server is shutting down")
        engine = None if self.write_failure else self.engine

        def close():
            try:
                if self.durability is not None:
                    self.durability.close(engine)
                self.history.close()
            except Exception:  # noqa: BLE001
                log.exception("closing the log failed")
            finally:
                self.finished.set()
        threading.Thread(target=close, name="windowstore-close", daemon=True).start()

    def _refuse_waiting(self, error: Exception) -> None:
        for fut in self._ready_waiters:
            _settle(fut, error=error)
        self._ready_waiters.clear()
        while self._external:
            _, _, fut, _ = self._external.popleft()
            if fut.set_running_or_notify_cancel():
                fut.set_exception(error)

    # -- health and load -------------------------------------------------------------------------
    def note_shed(self) -> None:
        self.shed += 1

    @property
    def pending(self) -> int:
        """Requests waiting for the engine: queries in flight, writes not yet durable, requests
        from other threads and those waiting for recovery."""
        return self.inflight + self._unacked + len(self._external) + len(self._ready_waiters)

    def stuck_for(self) -> float:
        """Seconds since the scheduler last completed an operation while work waits (0 when idle),
        or since the oldest slide still being sealed was cut, if longer: a seal that does not come
        back holds its stream's slides and the queries waiting for them. (Read from the health
        thread: the list is taken in one step.)"""
        busy = self._in_step or self._step_handle is not None or self._external
        stuck = time.monotonic() - self.heartbeat if busy else 0.0
        seals = list(self.sched.sealing.values())
        if seals:
            stuck = max(stuck, (self.clock() - min(job.cut.now_ms for job in seals)) / 1000.0)
        return stuck

    def _admit(self) -> None:
        if self._closed:
            raise ShuttingDown("the server is shutting down")
        n = self.pending
        if n >= self.config.max_pending:
            self.shed += 1
            raise ResourceLimit(f"the server is overloaded: {n} requests are waiting "
                                f"(limit {self.config.max_pending}); retry with backoff")

    # -- on the loop: reads, writes, queries -----------------------------------------------------
    def read(self, fn: Callable[[], Any]) -> Any:
        """Run a read now (loop thread), after any slide that is due."""
        if self._closed:
            raise ShuttingDown("the server is shutting down")
        self._slides_first()
        return fn()

    def write(self, cmd: Command, fut=None):
        """Apply a write now (loop thread); raises with nothing applied when it is refused.
        Returns (result, durable): `durable` is a future that resolves once the write is durable
        per the fsync policy (`fut` if given, e.g. a concurrent future), None without a log."""
        self._admit()
        self._slides_first()
        if self.write_failure:
            raise Unavailable(f"writes are refused: {self.write_failure}")
        result = self.engine.apply(replace(cmd, now_ms=max(self.clock(), self.engine.now_ms)))
        self._next_due_ms = -math.inf  # a count-based or event-time slide may be due now
        self._kick()
        self._dirty()
        if self.durability is None:
            if fut is not None:
                _settle(fut, result)
            return result, fut
        if fut is None:
            fut = self.loop.create_future()
        self._acks.append((fut, result))
        self._unacked += 1
        return result, fut

    def submit(self, query, priority: int):
        """Plan and submit a one-time query (one stream's, or a join). Returns (txn, future of its
        Result), or (txn, None) when txn is already done: when nothing else waits, a query runs in
        this call (Scheduler.run_now), up to the step budget."""
        self._admit()
        if self.inflight >= self.config.max_concurrent_queries:
            raise ResourceLimit(f"{self.inflight} queries in flight (limit {self.config.max_concurrent_queries})")
        self._slides_first()
        plan = self.engine.plan(query)  # refuses SLIDE: a periodic query is registered instead
        txn = None
        idle = self._step_handle is None and not self._in_step and self.ready and not self._done
        if idle:
            txn = self.engine.run_now(plan, priority, go_on=self._go_on(_STEP_BUDGET_S))
            if txn is not None and txn.done:
                return txn, None
        done = self.loop.create_future()

        def finished(txn):
            self.inflight -= 1
            if txn.result is not None:
                _settle(done, txn.result)
            else:
                _settle(done, error=txn.error)
        self.inflight += 1
        if txn is not None:  # begun in this call: it goes on in the scheduler's steps
            txn.on_done = finished
            self._kick()
        else:
            txn = self.sched.submit(plan, priority=priority, on_done=finished)
            if idle:
                # what the next step callback would do, now (up to its budget): a short query
                # behind another one is then answered in this call, without a loop round trip
                # to start it and another to wake its caller
                self._step()
            else:
                self._kick()
        return txn, done

    def _go_on(self, budget_s: float) -> Callable[[], bool]:
        """Between two operations run in one call: the engine's clock advanced (a slide falls due
        on it), and whether the call is still within its budget."""
        until = self.clock() + budget_s * 1000.0
        clock, tick = self.clock, self.engine.tick

        def go_on() -> bool:
            now = clock()
            tick(now)
            return now < until
        return go_on

    def cancel(self, txn) -> None:
        if not self._done:
            self.sched.cancel(txn)

    def _slides_first(self) -> None:
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
            self._dirty()
        self._next_due_ms, self._spin = self._next_due()

    def _next_due(self) -> tuple[float, bool]:
        """The clock time of the next processing-time slide (-inf while a slide waits: under the
        serial policy, for the running query's lock; +inf when none is scheduled), and whether its
        stream slides no faster than _SPIN_MIN_PERIOD_MS (its timer then wakes early, see there)."""
        if self.sched.stream_due_to_slide() is not None:
            return -math.inf, False
        due, stream = self.sched.next_due()
        return due, stream is not None and stream.spec.subwindow_ms >= _SPIN_MIN_PERIOD_MS

    # -- the scheduler, one operation per loop callback ------------------------------------------
    def _kick(self) -> None:
        if self._step_handle is None and self.ready and not self._done:
            self._step_handle = self.loop.call_soon(self._step)

    def _operation(self) -> str | None:
        """One scheduler operation; a failing one fails its query, never the server."""
        self.engine.tick(self.clock())
        try:
            op = self.engine.step()
        except Exception as e:  # a bug must not take the server down: fail the query, keep serving
            log.exception("scheduler step failed")
            self._fail_current(e)
            return "error"
        if op == "error":
            log.error("%s", self.sched.last_error, exc_info=self.sched.last_error.__cause__)
        return op

    def _step(self) -> None:
        self._step_handle = None
        if self._done:
            return
        self._in_step = True
        t0 = time.monotonic()
        try:
            op = self._operation()
            while op is not None and not self._done and time.monotonic() - t0 < _STEP_BUDGET_S:
                op = self._operation()
        finally:
            self._in_step = False
            self.heartbeat = time.monotonic()
        self._next_due_ms = -math.inf
        self._dirty()
        if op is not None:
            held = self.heartbeat - t0
            if held >= _LONG_STEP_S and self._step_handle is None and not self._done:
                # the operation held the loop: give the loop time for I/O (accepting a call and
                # answering one take a few iterations each) before the next one
                self._step_handle = self.loop.call_later(min(held * _IO_SHARE, _IO_PAUSE_MAX_S), self._step)
            else:
                self._kick()
        elif self._stopping and not self.sched.active and not self.sched.sealing:
            self._finish()
        else:
            self._arm_timer()

    # -- offloaded query work ----------------------------------------------------------------------
    def _offload(self, job) -> None:
        """Run a scheduler job on the query thread; its result comes back to the loop."""
        self._query_thread.submit(self._run_job, job)

    def _seal(self, job) -> None:
        """Seal a slide's cut on the seal thread; the sub-window comes back to the loop."""
        self._seal_thread.submit(self._run_job, job)

    def _run_job(self, job) -> None:
        t0 = time.perf_counter()
        try:
            value, error = job.run(), None
        except Exception as e:  # noqa: BLE001 - the query fails (INTERNAL), the server goes on
            value, error = None, e
        self._post(self._job_done, job, value, error, (time.perf_counter() - t0) * 1000.0)

    def _job_done(self, job, value, error, ms: float) -> None:
        if self._done:
            return
        self._slides_first()  # a slide due now comes first: the final merge then commits only if still valid
        if error is not None and isinstance(job, SealJob):
            log.error("sealing slide %d of %r failed on the seal thread (%s: %s): sealing it again on the loop",
                      job.cut.slide, job.stream.name, type(error).__name__, error)
        if self.engine.complete(job, value, error, ms) == "error":
            log.error("%s", self.sched.last_error, exc_info=self.sched.last_error.__cause__)
        self._next_due_ms = -math.inf  # an installed seal: its stream's next slide may be due already
        self._dirty()
        self._kick()

    def _arm_timer(self) -> None:
        """Wake at the next processing-time slide (at most a second ahead: the wall clock may jump)."""
        due, self._spin = self._next_due()
        self._next_due_ms = due
        if due == -math.inf:
            self._kick()
            return
        if due == math.inf:
            due = self.clock() + 1000.0
        if self._timer is not None:
            if self._timer_due == due:
                return
            self._timer.cancel()
        spin = _SPIN_MS if self._spin else -0.2  # (without the spin: wake just after it is due)
        delay = min(1.0, max(0.0, (due - self.clock() - spin) / 1000.0))
        self._timer_due = due
        self._timer = self.loop.call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        due = self._timer_due
        self._timer = self._timer_due = None
        if self._done:
            return
        left = due - self.clock() if due is not None else 0.0
        if 0.0 < left <= _SPIN_MS:  # the last stretch before a slide: check again next iteration
            self._timer_due = due
            self._timer = self.loop.call_soon(self._on_timer)
            return
        if self._step_handle is None:
            self._step()

    # -- group commit ----------------------------------------------------------------------------
    def _dirty(self) -> None:
        """Something may have been applied: log it at the end of this loop iteration."""
        if self._flush_handle is None:
            self._flush_handle = self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        """Log what the engine applied since the last flush (group commit); each (future, result)
        of this iteration's writes is answered once its write is durable (under --fsync always by
        the syncer thread, while the loop goes on), or UNAVAILABLE if the log failed."""
        self._flush_handle = None
        if self.durability is not None and self.durability.snapshot_overdue() and not self.write_failure:
            self.engine.settle()  # seals in flight, sealed here once: a snapshot does not wait for ever
        cmds = self.engine.drain()
        acks, self._acks = self._acks, []
        if not acks and not cmds:
            return
        if self.durability is None or self.write_failure:
            self._acknowledge(acks, self.write_failure)
            return
        try:
            self.durability.log(cmds, self.engine, lambda error: self._durable(acks, error))
        except OSError as e:
            self._acknowledge(acks, str(e))

    def _durable(self, acks, error: str | None) -> None:
        if self._on_loop_thread():
            self._acknowledge(acks, error)
        elif not self._post(self._acknowledge, acks, error):  # the loop is gone: answer from here
            self._acknowledge(acks, error)

    def _on_loop_thread(self) -> bool:
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False

    def _acknowledge(self, acks, error: str | None) -> None:
        if error and not self.write_failure:
            self.write_failure = error
            log.error("the log cannot be written (%s): writes are refused from now on, queries go on", error)
        self._unacked -= len(acks)
        for fut, result in acks:
            if error:
                _settle(fut, error=Unavailable(f"the write was not made durable: {error}"))
            else:
                _settle(fut, result)

    # -- from other threads ----------------------------------------------------------------------
    def call(self, fn: Callable[[], Any], timeout_s: float | None = None) -> Future:
        """Run fn on the loop, from another thread (reads); its result or exception arrives on the
        returned future. Not applied when `timeout_s` passed before the loop got to it."""
        return self._enqueue(False, fn, timeout_s)

    def command(self, cmd: Command, timeout_s: float | None = None) -> Future:
        """Apply a write, from another thread; the future resolves once the command is durable
        (per the fsync policy). A command still waiting when `timeout_s` has passed (the caller's
        deadline) is not applied."""
        return self._enqueue(True, cmd, timeout_s)

    def run(self, fn: Callable[[], Any], timeout: float | None = None) -> Any:
        """fn's result, run on the loop (from another thread; on the loop itself, now)."""
        if self._on_loop_thread():
            return self.read(fn)
        return self.call(fn).result(timeout)

    def _enqueue(self, is_command: bool, work, timeout_s: float | None) -> Future:
        fut: Future = Future()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            self._admit()
        except Exception as e:  # noqa: BLE001 - the caller gets it
            fut.set_exception(e)
            return fut
        self._external.append((is_command, work, fut, deadline))
        if not self._post(self._run_external):
            self._external.clear()
            fut.set_exception(ShuttingDown("the server is shutting down"))
        return fut

    def _run_external(self) -> None:
        if not self.ready:
            return  # run once recovered (_serve)
        self._in_step = True
        try:
            while self._external:
                is_command, work, fut, deadline = self._external.popleft()
                if not fut.set_running_or_notify_cancel():
                    continue
                if deadline is not None and time.monotonic() > deadline:
                    fut.set_exception(DeadlineExceeded("the deadline passed before the request ran: nothing was done"))
                    continue
                try:
                    if is_command:
                        self.write(work, fut)
                    else:
                        fut.set_result(self.read(work))
                        self._kick()  # a closure may have given the scheduler work
                except BaseException as e:  # noqa: BLE001 - the caller gets it
                    fut.set_exception(e)
        finally:
            self._in_step = False
            self.heartbeat = time.monotonic()

    # -- recovery --------------------------------------------------------------------------------
    def _recover(self) -> None:
        if self.durability is None:
            return
        t0 = time.monotonic()
        oplog.event("recovery_started", data_dir=self.durability.dir)
        stats = self.durability.recover(self.engine)
        self.engine.drain()  # recovered commands are on disk already
        now = self.clock()
        # processing time went on while the server was down: the slides that fell due are applied
        # now, before serving (the first seals what was buffered, the rest are empty), and logged
        self.catch_up = {n: s.window.due(int(now)) for n, s in self.sched.streams.items()
                         if s.spec.clock == "processing" and not s.spec.count_based}
        self.engine.tick(now)
        while self.engine.sched.step() == "slide":
            pass
        self.recovery_stats = {**stats, "seconds": time.monotonic() - t0}
        oplog.event("recovered", **self.recovery_stats, catch_up_slides=sum(self.catch_up.values()))
        for name, why in self.sched.failed.items():
            oplog.event("stream_stopped", logging.ERROR, stream=name, reason=why)

    def _fail_current(self, error: Exception) -> None:
        txn = self.sched.running
        if txn is not None:
            self.sched.fail(txn, QueryFailed(f"internal error while executing the query: {type(error).__name__}: {error}"))

    # -- reads (loop thread) -------------------------------------------------------------------
    def stream(self, name: str):
        """The stream, for introspection (describe, stats, history, metrics): a stopped one too."""
        return self.engine.stream(name, failed_ok=True)

    def explain(self, query) -> dict:
        """How `query` (parsed) would run now, without running it (Plan.explain), with its period
        in slides (0: one-time) and whether it would share its execution."""
        from windowstore.store.query import JoinQuery

        if isinstance(query, JoinQuery):
            periodic = any(s.slide is not None for s in query.sources)
        else:
            periodic = query.slide is not None
        plan = self.engine.plan(query, periodic=periodic)
        out = plan.explain()
        if isinstance(query, JoinQuery):  # a join: its most frequent source
            out["every_slides"] = min(plan.every.values()) if plan.every else 0
        else:
            out["every_slides"] = plan.bound.every or 0
        sharing = self.sched.sharing
        if not periodic:
            out["sharing"] = "a one-time query runs alone"
        elif sharing is None or isinstance(query, JoinQuery):
            out["sharing"] = ("runs alone: shared execution is off (--sharing none)" if sharing is None
                              else "runs alone: the join synopses of 8.3.2 are not shared yet")
        else:  # which group it would join and why (txn/sharing/runtime.py)
            out["sharing"] = sharing.explain(plan, out["every_slides"])
        return out

    def note_seconds_like(self, name: str) -> int:
        """An Append to `name` whose event times look like seconds (service.looks_like_seconds);
        returns how many so far."""
        self.seconds_like[name] += 1
        return self.seconds_like[name]

    def stopped(self, name: str) -> str | None:
        """Why the stream stopped (it refuses writes and queries until dropped), or None."""
        return self.sched.failed.get(name)

    def read_answers(self, query_id: str, after_slide: int, through_slide: int | None, limit: int):
        """(answers reflecting a slide in (after, through], newest answer's slide, oldest kept's slide)."""
        p = self.engine.periodic.get(query_id)
        if p is None:
            raise NotFound(f"periodic query {query_id!r} does not exist")
        return (*self.engine.answers.read(query_id, after_slide, through_slide, limit), p.task.plan.stream.name)

    def close_periodic(self, query_ids, reason: str) -> None:
        """Periodic queries that are gone (unregistered, their stream dropped): end their streams."""
        for qid in query_ids:
            self.periodic_response.pop(qid, None)
            for q in self.subscribers.pop(qid, Subscribers()).queues:
                _offer(q, (CLOSED, reason))

    def subscribe(self, query_id: str):
        p = self.engine.periodic.get(query_id)
        if p is None:
            raise NotFound(f"periodic query {query_id!r} does not exist")
        total = sum(len(x.queues) for x in self.subscribers.values())
        if total >= self.config.max_subscribers:
            raise ResourceLimit(f"{total} subscriptions are open (limit {self.config.max_subscribers}, "
                                "--max-subscribers)")
        q = SubscriberQueue(self.config.subscriber_buffer, self.config.subscriber_buffer_mb << 20)
        self.subscribers.setdefault(query_id, Subscribers()).queues.append(q)
        return q, p.task.plan.stream.name

    def unsubscribe(self, query_id: str, q: SubscriberQueue) -> None:
        subs = self.subscribers.get(query_id)
        if subs is not None and q in subs.queues:
            subs.queues.remove(q)

    def _publish(self, query_id: str, result: Result) -> None:
        p = self.engine.periodic.get(query_id)
        if p is not None:
            # the engine's clock when the execution was submitted (Result.response_ms is the
            # engine's own figure, answered_ms - submitted), to the driver's clock now
            started_ms = result.answered_ms - result.response_ms
            response_ms = max(0.0, self.clock() - started_ms)
            kept = self.periodic_response.setdefault(query_id, {})
            kept[result.execution] = response_ms
            while len(kept) > self._keep_responses:
                del kept[next(iter(kept))]
            self.note_answer(p.task.plan.stream.name, result, response_ms, "periodic")
        subs = self.subscribers.get(query_id)
        if subs is not None:
            for q in subs.queues:
                if not _offer(q, result):
                    subs.dropped += 1

    def _publish_error(self, query_id: str, error: Exception) -> None:
        oplog.event("query_stopped", logging.WARNING, query_id=query_id, error=str(error)[:500],
                    gone=query_id not in self.engine.periodic)
        subs = self.subscribers.get(query_id)
        for q in subs.queues if subs else ():
            _offer(q, (error, str(error)))
        if query_id not in self.engine.periodic:  # failed for good: it is gone
            self.subscribers.pop(query_id, None)
            self.periodic_response.pop(query_id, None)

    def metrics_snapshot(self) -> dict:
        """Everything the Prometheus collector exports, in one driver turn."""
        s = self.stats(None)
        for st in s["streams"]:
            stream = self.stream(st["stream"])
            w = stream.window
            held = sum(a.nbytes for sub in w.subs if sub is not None for a in sub.columns.values())
            held += sum(sub.synopsis.nbytes for sub in w.subs if sub is not None)
            buffer, slots = w.open_chunks()
            chunks = buffer + [ch for chunks in slots.values() for ch in chunks]
            chunks += w.cutting.chunks if w.cutting is not None else ()
            held += sum(a.nbytes for ch in chunks for a in ch.values())
            held += sum(keys.nbytes for keys in w.running_keys.values())
            st["bytes"] = held
            st["strings"] = len(stream.strings)
        s["subscriber_drops"] = sum(x.dropped for x in self.subscribers.values())
        s["shed"] = self.shed
        sched = self.sched
        s["offload"] = {"jobs": sched.jobs, "discarded": sched.jobs_discarded, "holds": sched.holds}
        return s

    def note_answer(self, name: str, result: Result, response_ms: float, query_class: str = "onetime") -> None:
        """An answer given: its staleness and its response time measured at the edge, into the
        stream's statistics and the Prometheus histograms (loop thread)."""
        if self.prometheus is not None:
            self.prometheus.observe_answer(name, query_class, result, response_ms)
        m = self.metrics[name]
        if result.staleness_ms is not None:
            m.staleness.append(result.staleness_ms)
        m.response.append(response_ms)

    def response_ms(self, query_id: str, result: Result) -> float:
        """A periodic answer's response time as it was published; 0.0 when this process did not
        publish it (an answer recovered from the log after a restart) or no longer keeps it."""
        return self.periodic_response.get(query_id, {}).get(result.execution, 0.0)

    def _close_subscribers(self, reason: str) -> None:
        self.close_periodic(list(self.subscribers), reason)

    # -- introspection -------------------------------------------------------------------------
    def stats(self, name: str | None) -> dict:
        names = [name] if name else list(self.sched.streams)
        out = []
        for n in names:
            stream = self.stream(n)
            c = self.sched.by_stream[n]
            book = self.engine.books[n]
            m = self.metrics[n]
            out.append({"stream": n, "slides": c.slides, "queries": c.committed, "aborts": c.aborts,
                        "restarts": c.restarts, "failed": c.failed, "errors": c.errors,
                        "catch_up_slides": self.catch_up.get(n, 0), "discarded_rows": book.discarded_rows,
                        "staged_rows": sum(t.num_rows for ats in book.staged.values() for cs in ats.values()
                                           for t in cs.values()),
                        "late_rows": stream.window.late_rows,
                        "duplicate_batches": book.duplicate_batches, "accepted_rows": book.accepted_rows,
                        "staleness_ms": percentiles(m.staleness), "response_ms": percentiles(m.response),
                        "slide_delay_ms": percentiles(self.sched.slide_delays[n]),
                        "seal_ms": percentiles(self.sched.seal_ms[n]), "stopped": self.sched.failed.get(n),
                        "seconds_like_batches": self.seconds_like[n]})
        return {"policy": self.sched.policy, "streams": out, "durability": self.durability_stats(),
                "onetime": self.sched.by_class["onetime"].as_dict(), "periodic": self.sched.by_class["periodic"].as_dict(),
                "sharing": self.sched.sharing.stats() if self.sched.sharing is not None else {"mode": "none"}}

    def durability_stats(self) -> dict:
        dur = self.durability
        if dur is None:
            return {"enabled": False}
        rec = getattr(self, "recovery_stats", {})
        return {"enabled": True, "fsync": dur.wal.policy, "last_lsn": dur.wal.next_lsn - 1,
                "log_bytes": dur.wal.bytes_written, "snapshots": dur.snapshots_taken,
                "last_snapshot_pause_ms": dur.last_capture_ms, "max_snapshot_pause_ms": dur.max_capture_ms,
                "write_failure": self.write_failure or "", "snapshot_error": dur.snapshot_error or "",
                "recovery_s": rec.get("seconds", 0.0), "recovered_records": rec.get("replayed", 0),
                "snapshot_lsn": rec.get("snapshot_lsn", 0)}


def _offer(q: SubscriberQueue, item) -> bool:
    """Queue for a subscriber without ever blocking the driver: a slow subscriber loses its
    oldest answers (counted), never holds up slides or other queries."""
    return q.offer(item)
