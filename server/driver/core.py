"""The driver: runs the engine on the server's event loop, the thread that also runs the RPCs.

There is no thread of its own and no hand-off per call. On the loop thread:

- reads (`read`) run inline in their handler, after any slide that is due (the scheduler's
  guarantee: a due slide runs before the next read);
- writes (`write`) are applied inline, logged together at the end of the loop iteration and
  acknowledged once durable (group_commit.py);
- the scheduler's multi-step work runs cooperatively, a budget of operations per loop callback,
  and a processing-time slide has a loop timer at its due time (stepper.py);
- slow reads and merges of window scans, and large seals, run on the query and seal threads
  (job_threads.py);
- periodic queries' answers go to their subscribers (periodic.py); statistics and explain are
  reports (reports.py).
Still on the loop, holding it for as long as it takes: a join's evaluation (bounded by the store's
limits).

Other threads (the metrics scrape, tests, the command line) use `call` and `command`, which hop
onto the loop and answer on a concurrent future (call_queue.py). Recovery runs on a thread of its
own before the engine is served (recovery.py); requests that arrive meanwhile wait for it.

This module owns the driver's life cycle (start, recovery, serving, stopping), admission (load
shedding, the requests pending), the calls that run on the engine and the per-stream answer
statistics; the modules above own the rest, each its own state, and this one asks them through
their public names (the stepper whether it is idle, the group commit how many writes wait). The
engine (windowstore.txn.engine) is where state changes; the driver only moves commands in and
results out, and keeps what is not state: subscribers and response-time statistics.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from concurrent.futures import Future
from dataclasses import replace
from typing import Any, Callable

from windowstore.store.errors import ResourceLimit
from windowstore.txn import History, Result
from windowstore.txn.commands import Command
from windowstore.txn.engine import (AlreadyExists, AppendAck, Engine, EngineConfig, FailedPrecondition, NotFound,
                                    SlideAck)

from ..config import ServerConfig
from ..durability import Durability
from . import reports
from .call_queue import CallQueue
from .errors import DeadlineExceeded, ShuttingDown, Unavailable
from .group_commit import GroupCommit
from .job_threads import JobThreads
from .loop_util import on_loop_thread, post, settle
from .periodic import CLOSED, PeriodicAnswers, SubscriberQueue, Subscribers
from .recovery import recover
from .reports import Metrics
from .stepper import Stepper

log = logging.getLogger("windowstore.driver")

__all__ = ["AlreadyExists", "AppendAck", "CLOSED", "DeadlineExceeded", "Driver", "FailedPrecondition", "NotFound",
           "ResourceLimit", "ShuttingDown", "SlideAck", "SubscriberQueue", "Subscribers", "Unavailable", "wall_ms"]


def wall_ms() -> float:
    return time.time() * 1000.0


class Driver:
    def __init__(self, config: ServerConfig, clock: Callable[[], float] = wall_ms):
        self.config = config
        self.history = History(config.history_path, keep=config.history_keep)
        self.engine = Engine(EngineConfig(policy=config.policy, sharing=config.sharing, max_restarts=config.max_restarts,
                                          fallback_after=config.fallback_after,
                                          max_streams=config.max_streams,
                                          max_periodic_queries=config.max_periodic_queries,
                                          idempotency_keep=config.idempotency_keep,
                                          idempotency_keep_total=config.idempotency_keep_total,
                                          max_buffered_rows=config.max_buffered_rows,
                                          max_staged_bytes=config.max_staged_mb << 20,
                                          max_join_rows=config.max_join_rows,
                                          answer_log_keep=config.answer_log_keep,
                                          answer_cache_entries=config.answer_cache_entries,
                                          answer_cache_bytes=int(config.answer_cache_mb * (1 << 20)),
                                          work_clock=time.thread_time), self.history)
        self.sched = self.engine.sched
        self.periodic_answers = PeriodicAnswers(self.engine, config, clock, self.note_answer)
        self.engine.on_answer = self._answered
        self.engine.on_error = self.periodic_answers.publish_error
        self.durability = None if config.in_memory else Durability(config.data_dir, config.fsync,
                                                                   config.snapshot_every_bytes,
                                                                   config.snapshot_every_s)
        self.group_commit = GroupCommit(self.engine, self.durability)
        self.replication: Any = None  # server/replication's Replication, set before start() with a cluster
        self.stepper = Stepper(self.engine, clock, self.group_commit.dirty)
        self.calls = CallQueue(self._admit, lambda: self._post(self._run_calls))
        self.job_threads = None  # the query and seal threads (none with offload_ms < 0: all inline)
        if config.offload_ms >= 0:
            self.job_threads = JobThreads(self._post, self.stepper.job_done, config.background_nice)
            self.sched.offload = self.job_threads.offload
            self.sched.offload_ms = config.offload_ms
            self.sched.timer = time.perf_counter
        self.clock = clock
        self.prometheus = None  # metrics.Metrics, when serving them
        self.metrics: dict[str, Metrics] = collections.defaultdict(Metrics)
        self.inflight = 0
        self.recovered = threading.Event()  # recovery is over (then `ready`, or `recovery_error`)
        self.finished = threading.Event()   # shut down: the log closed, subscribers told
        self.recovery_error: Exception | None = None
        self.recovery_stats: dict = {}
        self.catch_up: dict[str, int] = {}
        self.shed = 0  # requests refused for load (RESOURCE_EXHAUSTED)
        self.seconds_like: collections.Counter = collections.Counter()  # by stream: see note_seconds_like
        self.loop: asyncio.AbstractEventLoop | None = None
        self.ready = False  # recovered and serving (read on the loop thread)
        self._own_loop: threading.Thread | None = None  # a loop of our own (no server around it)
        self._ready_waiters: list[asyncio.Future] = []
        self._closed = False    # new requests are refused
        self._stopping = False  # finish what runs, then close

    @property
    def clock(self) -> Callable[[], float]:
        """The driver's clock (ms): the engine is ticked to it, slides fall due on it. Set it
        before `start`; the stepper and the periodic answers use the same one."""
        return self._clock

    @clock.setter
    def clock(self, clock: Callable[[], float]) -> None:
        self._clock = self.stepper.clock = self.periodic_answers.clock = clock

    @property
    def write_failure(self) -> str | None:
        """Why the log cannot be written (writes are refused), or None."""
        return self.group_commit.failure

    @property
    def heartbeat(self) -> float:
        """time.monotonic() of the last scheduler operation (health watches it)."""
        return self.stepper.heartbeat

    @property
    def subscribers(self) -> dict[str, Subscribers]:
        """By periodic query: its subscribers' queues (periodic.py)."""
        return self.periodic_answers.subscribers

    # -- life cycle ------------------------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Recover (on a thread of its own), then serve on `loop`: the server's event loop, or
        without one a loop on a thread of the driver's own (tests, tools)."""
        if loop is None:
            loop = asyncio.new_event_loop()
            self._own_loop = threading.Thread(target=loop.run_forever, name="windowstore-loop", daemon=True)
            self._own_loop.start()
        self.loop = self.stepper.loop = self.group_commit.loop = loop
        threading.Thread(target=self._recover_then_serve, name="windowstore-recover", daemon=True).start()

    def _recover_then_serve(self) -> None:
        try:
            if self.durability is not None:
                self.catch_up, self.recovery_stats = recover(self.engine, self.durability, self.clock,
                                                             self.replication)
        except Exception as e:  # noqa: BLE001 - start-up fails loudly, nothing is served
            log.critical("recovery failed: %s", e)
            self.recovery_error = e
            self._post(self._recovery_failed, e)
            return
        self._post(self._serve)

    def _post(self, fn, *args) -> bool:
        """Run fn on the loop (from any thread); False when the loop is gone."""
        return post(self.loop, fn, *args)  # type: ignore[arg-type]  # set by start()

    def _recovery_failed(self, error: Exception) -> None:
        self._closed = True
        self.stepper.halt()
        self._refuse_waiting(ShuttingDown(f"recovery failed: {error}"))
        self.recovered.set()
        self.finished.set()

    def _serve(self) -> None:
        if self.job_threads is not None:  # (recovery sealed at once, on its own thread)
            self.sched.seal_offload = self.job_threads.seal
            self.sched.seal_offload_rows = max(0, self.config.seal_offload_rows)
            self.sched.read_during_seal = self.config.read_during_seal
        self.ready = True
        if self.replication is not None:
            self.replication.start()
        self.stepper.start()
        self.recovered.set()
        for fut in self._ready_waiters:
            settle(fut)
        self._ready_waiters.clear()
        self.group_commit.dirty()  # the catch-up slides are logged
        self._run_calls()
        self.stepper.kick()
        if self._stopping:
            self._begin_stop()

    async def until_ready(self) -> None:
        """Wait (on the loop) for recovery to finish; ShuttingDown if the server will not serve."""
        if self.ready:
            return
        if self._closed:
            raise ShuttingDown("the server is shutting down")
        fut = self.loop.create_future()  # type: ignore[union-attr]  # set by start()
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
        if self.ready and not self.stepper.halted:
            self.stepper.finish_when_drained(self._finish)
        elif self.recovery_error is not None:
            self.finished.set()

    def _withdraw_all(self) -> None:
        if self.ready and not self.stepper.halted:
            for txn in list(self.sched.active):
                self.sched.cancel(txn)
            self.stepper.kick()

    def _finish(self) -> None:
        """The last scheduler operation has run: log what is left, tell subscribers, and close the
        log and the history on a thread (a final snapshot), leaving the loop to the RPCs."""
        self.stepper.halt()
        if self.job_threads is not None:
            self.job_threads.shutdown()
        self.group_commit.flush()
        self.periodic_answers.close_all("the server is shutting down")
        engine = None if self.write_failure else self.engine

        def close():
            try:
                if self.replication is not None:
                    self.replication.close()
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
            settle(fut, error=error)
        self._ready_waiters.clear()
        self.calls.refuse(error)

    # -- health and load -------------------------------------------------------------------------
    def note_shed(self) -> None:
        self.shed += 1

    @property
    def pending(self) -> int:
        """Requests waiting for the engine: queries in flight, writes not yet durable, requests
        from other threads and those waiting for recovery."""
        return self.inflight + self.group_commit.unacked + len(self.calls) + len(self._ready_waiters)

    def stuck_for(self) -> float:
        """Seconds since the scheduler last completed an operation while work waits (0 when idle),
        or since the oldest slide still being sealed was cut, if longer: a seal that does not come
        back holds its stream's slides and the queries waiting for them. (Read from the health
        thread: the list is taken in one step.)"""
        busy = self.stepper.busy or len(self.calls)
        stuck = time.monotonic() - self.stepper.heartbeat if busy else 0.0
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
        self.stepper.slides_first()
        return fn()

    async def until_unheld(self, name: str, most: int = 2) -> None:
        """Wait (on the loop) while a begun query holds `name`'s window (Stepper.until_unheld), up
        to `most` holders one after another: a manual slide then meets no holder and runs no
        query's job in its call. Past `most` (serial: a query after each) it is applied as it
        comes, settling the holder in its call (Engine.slide_now)."""
        for _ in range(most):
            waiting = self.stepper.until_unheld(name)
            if waiting is None:
                return
            await waiting

    def write(self, cmd: Command, fut=None, own: bool = False):
        """Apply a write now (loop thread); raises with nothing applied when it is refused.
        Returns (result, durable): `durable` is a future that resolves once the write is durable
        per the fsync policy (`fut` if given, e.g. a concurrent future), None without a log.
        `own`: the server's own housekeeping (a step-down's Unregister), not a client's request:
        not shed by --max-pending, whose purpose is to push back on clients; it is bounded by what
        it cleans up."""
        if own:
            if self._closed:
                raise ShuttingDown("the server is shutting down")
        else:
            self._admit()
        stepper = self.stepper
        stepper.slides_first()
        if self.group_commit.failure:
            raise Unavailable(f"writes are refused: {self.group_commit.failure}")
        result = self.engine.apply(replace(cmd, now_ms=max(self.clock(), self.engine.now_ms)))
        stepper.slide_may_be_due()
        stepper.kick()
        self.group_commit.dirty()
        if self.durability is None:
            if fut is not None:
                settle(fut, result)
            return result, fut
        if fut is None:
            fut = self.loop.create_future()  # type: ignore[union-attr]  # set by start()
        self.group_commit.add(fut, result)
        return result, fut

    def submit(self, query, priority: int):
        """Plan and submit a one-time query (one stream's, or a join). Returns (txn, future of its
        Result), or (txn, None) when txn is already done: when nothing else waits, a query runs in
        this call (Scheduler.run_now), up to the step budget."""
        self._admit()
        if self.inflight >= self.config.max_concurrent_queries:
            raise ResourceLimit(f"{self.inflight} queries in flight (limit {self.config.max_concurrent_queries})")
        stepper = self.stepper
        stepper.slides_first()
        plan = self.engine.plan(query)  # refuses SLIDE: a periodic query is registered instead
        txn = None
        idle = stepper.idle
        if idle:
            txn = self.engine.run_now(plan, priority, go_on=stepper.go_on())
            if txn is not None and txn.done:
                return txn, None
        done = self.loop.create_future()  # type: ignore[union-attr]  # set by start()

        def finished(txn):
            self.inflight -= 1
            if txn.result is not None:
                settle(done, txn.result)
            else:
                settle(done, error=txn.error)
        self.inflight += 1
        if txn is not None:  # begun in this call: it goes on in the scheduler's steps
            txn.on_done = finished
            stepper.kick()
        else:
            txn = self.sched.submit(plan, priority=priority, on_done=finished)
            if idle:
                # what the next step callback would do, now (up to its budget): a short query
                # behind another one is then answered in this call, without a loop round trip
                # to start it and another to wake its caller
                stepper.step()
            else:
                stepper.kick()
        return txn, done

    # -- a repeated query known by its request's bytes (the answer cache) ------------------------
    def known_stream(self, key: bytes) -> str | None:
        """The stream a request noted earlier (note_request) reads, or None: not known."""
        cache = self.sched.answer_cache
        entry = None if cache is None else cache.known(key)
        return None if entry is None else entry.plan.stream.name

    def note_request(self, key: bytes, result: Result) -> None:
        """A request whose answer came from the answer cache (result.cached) is known by its bytes
        from now on, while that entry answers (AnswerCache.note_request; the caller says which
        requests qualify)."""
        cache = self.sched.answer_cache
        if cache is not None and result.cached is not None:
            cache.note_request(key, result.cached, len(key))

    def answer_known(self, key: bytes):
        """A known request answered in this call from its entry (Scheduler.answer_known), where
        submit() would run it at once: serving and not stopping, no step running or scheduled, no
        replication (a replica's reads are checked per call). The engine's clock is advanced first
        (a slide due on it stops the answer). Its Result; None: submit the query."""
        if not self.ready or self._closed or not self.stepper.idle or self.replication is not None:
            return None
        self.engine.tick(self._clock())
        return self.sched.answer_known(key)

    def cancel(self, txn) -> None:
        if not self.stepper.halted:
            self.sched.cancel(txn)

    # -- from other threads ----------------------------------------------------------------------
    def call(self, fn: Callable[[], Any], timeout_s: float | None = None) -> Future:
        """Run fn on the loop, from another thread (reads); its result or exception arrives on the
        returned future. Not applied when `timeout_s` passed before the loop got to it."""
        return self.calls.add(False, fn, timeout_s)

    def command(self, cmd: Command, timeout_s: float | None = None) -> Future:
        """Apply a write, from another thread; the future resolves once the command is durable
        (per the fsync policy). A command still waiting when `timeout_s` has passed (the caller's
        deadline) is not applied."""
        return self.calls.add(True, cmd, timeout_s)

    def run(self, fn: Callable[[], Any], timeout: float | None = None) -> Any:
        """fn's result, run on the loop (from another thread; on the loop itself, now)."""
        if on_loop_thread(self.loop):
            return self.read(fn)
        return self.call(fn).result(timeout)

    def _run_calls(self) -> None:
        if not self.ready:
            return  # run once recovered (_serve)
        self.stepper.begin_work()
        try:
            self.calls.run_all(self.read, self.write, self.stepper.kick)
        finally:
            self.stepper.end_work()

    # -- streams and periodic queries (loop thread) ----------------------------------------------
    def stream(self, name: str):
        """The stream, for introspection (describe, stats, history, metrics): a stopped one too."""
        return self.engine.stream(name, failed_ok=True)

    def stopped(self, name: str) -> str | None:
        """Why the stream stopped (it refuses writes and queries until dropped), or None."""
        return self.sched.failed.get(name)

    def appended(self, name: str, writer_id: str, batch_id: int) -> bool:
        """Whether the writer's batch is applied to the stream (its acknowledgement is remembered)."""
        book = self.engine.books.get(name)
        return book is not None and book.append_ack(writer_id, batch_id) is not None

    def note_seconds_like(self, name: str) -> int:
        """An Append to `name` whose event times look like seconds (service.looks_like_seconds);
        returns how many so far."""
        self.seconds_like[name] += 1
        return self.seconds_like[name]

    def read_answers(self, query_id: str, after_slide: int, through_slide: int | None, limit: int):
        """(answers reflecting a slide in (after, through], newest answer's slide, oldest kept's slide)."""
        return self.periodic_answers.read_answers(query_id, after_slide, through_slide, limit)

    def close_periodic(self, query_ids, reason: str) -> None:
        """Periodic queries that are gone (unregistered, their stream dropped): end their streams."""
        self.periodic_answers.close(query_ids, reason)

    def _answered(self, query_id: str, result: Result) -> None:
        """The engine's on_answer: to the subscribers, once a replicated stream's slide is held by
        its in-sync replicas when its acks say so (Replication.hold_answer)."""
        repl = self.replication
        if repl is not None and repl.hold_answer(query_id, lambda: self.periodic_answers.publish(query_id, result)):
            self.periodic_answers.hold(query_id, result.slide)  # (ReadAnswers waits for it too)
        else:
            self.periodic_answers.publish(query_id, result)

    def fail_periodic(self, query_ids, error: Exception) -> None:
        """End these periodic queries' subscriptions with `error`; the queries stay registered."""
        self.periodic_answers.fail(query_ids, error)

    def subscribe(self, query_id: str, after_slide: int | None = None):
        """A new subscriber's queue for a periodic query's answers (first the kept ones reflecting
        a slide after `after_slide`, when set), and the query's stream."""
        return self.periodic_answers.subscribe(query_id, after_slide)

    def unsubscribe(self, query_id: str, q: SubscriberQueue) -> None:
        self.periodic_answers.unsubscribe(query_id, q)

    def response_ms(self, query_id: str, result: Result) -> float:
        """A periodic answer's response time as it was published; 0.0 when this process did not
        publish it (an answer recovered from the log after a restart) or no longer keeps it."""
        return self.periodic_answers.response_ms(query_id, result)

    def note_answer(self, name: str, result: Result, response_ms: float, query_class: str = "onetime") -> None:
        """An answer given: its staleness and its response time measured at the edge, into the
        stream's statistics and the Prometheus histograms (loop thread)."""
        if self.prometheus is not None:
            self.prometheus.observe_answer(name, query_class, result, response_ms)
        m = self.metrics[name]
        if result.staleness_ms is not None:
            m.staleness.append(result.staleness_ms)
        m.response.append(response_ms)

    # -- reports (reports.py) --------------------------------------------------------------------
    def explain(self, query) -> dict:
        """How `query` (parsed) would run now, without running it (Plan.explain)."""
        return reports.explain(self.engine, query)

    def stats(self, name: str | None) -> dict:
        return reports.stats(self, name)

    def metrics_snapshot(self) -> dict:
        """Everything the Prometheus collector exports, in one driver turn."""
        return reports.metrics_snapshot(self)

    def durability_stats(self) -> dict:
        return reports.durability_stats(self)
