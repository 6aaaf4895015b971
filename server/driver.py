"""The driver: the one thread that runs the engine.

RPC handlers hand it commands (`command`: writes) and closures (`call`: reads) and wait on
futures. Each turn it applies everything that arrived, writes the commands the engine emitted to
the write-ahead log with one sync for all of them (group commit), and only then acknowledges the
writes; between turns it runs the scheduler one operation at a time, so a due slide is applied
before the next read. When idle it sleeps until the next processing-time slide is due or work
arrives.

The engine (windowstore.txn.engine) is where state changes; this module only moves commands in
and results out, and keeps what is not state: subscribers and response-time statistics.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from windowstore.store import StoreError
from windowstore.txn import History, QueryFailed, Result
from windowstore.txn.commands import Command
from windowstore.txn.engine import (AlreadyExists, AppendAck, Engine, EngineConfig, FailedPrecondition, NotFound,
                                    ResourceExhausted, SlideAck)

from .config import ServerConfig
from .durability import Durability

log = logging.getLogger("windowstore.driver")

__all__ = ["AlreadyExists", "AppendAck", "CLOSED", "DeadlineExceeded", "Driver", "FailedPrecondition", "NotFound",
           "ResourceExhausted", "ShuttingDown", "SlideAck", "Unavailable"]


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
    """A subscriber's answers, bounded by count and by bytes: the driver never blocks on it; when
    full, the oldest answers are dropped (counted), so a subscriber that never reads holds at most
    the bound, not everything it was sent."""

    def __init__(self, max_items: int, max_bytes: int):
        self.max_items, self.max_bytes = max_items, max_bytes
        self._items: collections.deque = collections.deque()
        self._bytes = 0
        self._lock = threading.Lock()
        self._waiter: tuple | None = None  # (event loop, asyncio.Event) of the coroutine waiting in next()

    @staticmethod
    def size(item) -> int:
        rows = getattr(getattr(item, "answer", None), "rows", ())
        return 256 + sum(16 * len(r) + sum(len(v) for v in r if isinstance(v, str)) for r in rows)

    def offer(self, item) -> bool:
        """Queue `item`; False when older answers had to be dropped for it."""
        n = self.size(item)
        dropped = False
        with self._lock:
            while self._items and (len(self._items) >= self.max_items or self._bytes + n > self.max_bytes):
                self._bytes -= self._items.popleft()[1]
                dropped = True
            self._items.append((item, n))
            self._bytes += n
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            loop, event = waiter
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # the loop is closed: the server is gone
                pass
        return not dropped

    async def next(self):
        """The oldest queued item; waits (on the caller's event loop, holding no thread) for one."""
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                if self._items:
                    item, n = self._items.popleft()
                    self._bytes -= n
                    self._waiter = None
                    return item
                event = asyncio.Event()
                self._waiter = (loop, event)
            await event.wait()


@dataclass
class Subscribers:
    queues: list[SubscriberQueue] = field(default_factory=list)
    dropped: int = 0


@dataclass
class Metrics:
    """Per-stream response statistics (not state: they start afresh with the process)."""

    staleness: collections.deque = field(default_factory=lambda: collections.deque(maxlen=10_000))
    response: collections.deque = field(default_factory=lambda: collections.deque(maxlen=10_000))


def percentiles(values) -> dict:
    if not values:
        return {"count": 0, "p50": 0.0, "p90": 0.0, "p99": 0.0, "max": 0.0}
    a = np.fromiter(values, dtype=float)
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return {"count": len(a), "p50": float(p50), "p90": float(p90), "p99": float(p99), "max": float(a.max())}


class Driver:
    def __init__(self, config: ServerConfig, clock: Callable[[], float] = wall_ms):
        self.config = config
        self.clock = clock
        self.history = History(config.history_path, keep=config.history_keep)
        self.engine = Engine(EngineConfig(policy=config.policy, max_restarts=config.max_restarts,
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
        self.durability = None if config.in_memory else Durability(config.data_dir, config.fsync,
                                                                   config.snapshot_every_bytes,
                                                                   config.snapshot_every_s)
        self.prometheus = None  # metrics.Metrics, when serving them
        self.subscribers: dict[str, Subscribers] = {}
        self.metrics: dict[str, Metrics] = collections.defaultdict(Metrics)
        self.inflight = 0
        self.recovered = threading.Event()
        self.recovery_error: Exception | None = None
        self.catch_up: dict[str, int] = {}
        self.write_failure: str | None = None
        self.heartbeat = time.monotonic()  # the loop's last turn (health watches it)
        self.shed = 0  # requests refused for load (RESOURCE_EXHAUSTED)
        self._inbox: collections.deque = collections.deque()
        self._cv = threading.Condition()
        self._stopping = False
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="windowstore-driver", daemon=True)

    # -- the loop ------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def call(self, fn: Callable[[], Any], timeout_s: float | None = None) -> Future:
        """Run fn on the driver thread (reads); its result or exception arrives on the future."""
        return self._enqueue(False, fn, timeout_s)

    def command(self, cmd: Command, timeout_s: float | None = None) -> Future:
        """Apply a write; the future resolves once the command is durable (per the fsync policy).
        A command still waiting when `timeout_s` has passed (the caller's deadline) is not applied."""
        return self._enqueue(True, cmd, timeout_s)

    def note_shed(self) -> None:
        with self._cv:
            self.shed += 1

    @property
    def pending(self) -> int:
        return len(self._inbox)

    def stuck_for(self) -> float:
        """Seconds since the loop last turned while work waits (0 when idle or turning)."""
        return time.monotonic() - self.heartbeat if self._inbox else 0.0

    def _enqueue(self, is_command: bool, work, timeout_s: float | None = None) -> Future:
        fut: Future = Future()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cv:
            if self._closed:
                fut.set_exception(ShuttingDown("the server is shutting down"))
                return fut
            if len(self._inbox) >= self.config.max_pending:
                self.shed += 1
                fut.set_exception(ResourceExhausted(f"the server is overloaded: {len(self._inbox)} requests are waiting "
                                                    "(limit {}); retry with backoff".format(self.config.max_pending)))
                return fut
            self._inbox.append((is_command, work, fut, deadline))
            self._cv.notify()
        return fut

    def run(self, fn: Callable[[], Any], timeout: float | None = None) -> Any:
        return self.call(fn).result(timeout)

    def _run(self) -> None:
        try:
            self._recover()
        except Exception as e:  # noqa: BLE001 - start-up fails loudly, nothing is served
            log.critical("recovery failed: %s", e)
            self.recovery_error = e
            self._close_inbox(ShuttingDown(f"recovery failed: {e}"))
            self.recovered.set()
            return
        self.recovered.set()
        engine = self.engine
        while True:
            self.heartbeat = time.monotonic()
            with self._cv:
                work = list(self._inbox)
                self._inbox.clear()
            acks = []
            for is_command, item, fut, deadline in work:
                if not fut.set_running_or_notify_cancel():
                    continue
                if deadline is not None and time.monotonic() > deadline:
                    fut.set_exception(DeadlineExceeded("the deadline passed before the request ran: nothing was done"))
                    continue
                try:
                    if is_command:
                        item = self._stamp(item)
                        acks.append((fut, engine.apply(item)))
                    else:
                        fut.set_result(item())
                except BaseException as e:  # noqa: BLE001 - the caller gets it
                    fut.set_exception(e)
            self._persist(acks)
            if self._stopping and not self.sched.active:
                break
            engine.tick(self.clock())
            try:
                op = engine.step()
            except Exception as e:  # a bug must not take the server down: fail the query, keep serving
                log.exception("scheduler step failed")
                self._fail_current(e)
                continue
            if op == "error":
                log.error("%s", self.sched.last_error, exc_info=self.sched.last_error.__cause__)
            if op is not None:
                continue
            self._persist()
            with self._cv:
                if self._inbox or self._stopping:
                    continue
                self._cv.wait(self._idle_timeout())
        self._persist()
        if self.durability is not None:
            self.durability.close(self.engine if not self.write_failure else None)
        self._close_subscribers("the server is shutting down")
        self.history.close()

    def _stamp(self, cmd: Command) -> Command:
        """Commands carry the time they are applied at (time enters the engine as data)."""
        if self.write_failure:
            raise Unavailable(f"writes are refused: {self.write_failure}")
        return replace(cmd, now_ms=max(self.clock(), self.engine.now_ms))

    def _persist(self, acks: list | tuple = ()) -> None:
        """Log what the engine applied since the last call (group commit); each (future, result)
        of `acks` is answered once its write is durable (under --fsync always, by the syncer
        thread while this one goes on), or UNAVAILABLE if the log failed."""
        cmds = self.engine.drain()
        if self.durability is None or self.write_failure:
            self._acknowledge(acks, self.write_failure)
            return
        try:
            self.durability.log(cmds, self.engine, lambda error: self._acknowledge(acks, error))
        except OSError as e:
            self._acknowledge(acks, str(e))

    def _acknowledge(self, acks, error: str | None) -> None:
        if error and not self.write_failure:
            self.write_failure = error
            log.error("the log cannot be written (%s): writes are refused from now on, queries go on", error)
        for fut, result in acks:
            if error:
                fut.set_exception(Unavailable(f"the write was not made durable: {error}"))
            else:
                fut.set_result(result)

    def _recover(self) -> None:
        if self.durability is None:
            return
        t0 = time.monotonic()
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
        log.info("recovered %s", self.recovery_stats)

    def _close_inbox(self, error: Exception) -> None:
        with self._cv:
            self._closed = True
            work = list(self._inbox)
            self._inbox.clear()
        for _, _, fut, _ in work:
            if fut.set_running_or_notify_cancel():
                fut.set_exception(error)

    def _idle_timeout(self) -> float:
        now = self.clock()
        due = [s.window.next_due_ms() for s in self.sched.streams.values()]
        due = [d for d in due if d is not None]
        if not due:
            return 1.0
        return max(0.0, min(1.0, (min(due) - now) / 1000.0))

    def _fail_current(self, error: Exception) -> None:
        txn = self.sched.running
        if txn is not None:
            self.sched.fail(txn, QueryFailed(f"internal error while executing the query: {type(error).__name__}: {error}"))

    def stop(self, grace_s: float) -> None:
        """Finish in-flight queries (up to grace_s), tell subscribers, stop the thread."""
        with self._cv:
            self._closed = True
            self._stopping = True
            self._cv.notify()
        self._thread.join(grace_s)
        if self._thread.is_alive():  # queries still running past the grace period: withdraw them
            def withdraw():
                for txn in list(self.sched.active):
                    self.sched.cancel(txn)
            with self._cv:
                self._inbox.append((False, withdraw, Future(), None))
                self._cv.notify()
            self._thread.join(5)

    # -- reads (driver thread only) ------------------------------------------------------------
    def stream(self, name: str):
        return self.engine.stream(name)

    def submit(self, query, priority: int, done: Future):
        """Plan and submit a one-time query (one stream's, or a join); `done` gets the Result or the error."""
        if self.inflight >= self.config.max_concurrent_queries:
            raise ResourceExhausted(f"{self.inflight} queries in flight (limit {self.config.max_concurrent_queries})")
        plan = self.engine.plan(query)  # refuses SLIDE: a periodic query is registered instead
        self.inflight += 1
        name = plan.stream.name

        def finished(txn):
            self.inflight -= 1
            if txn.result is not None:
                self._note_answer(name, txn.result)
                done.set_result(txn.result)
            else:
                done.set_exception(txn.error)
        txn = self.sched.submit(plan, priority=priority, on_done=finished)
        if plan.access == "probe":
            # One atomic operation: run it in this turn, so the handler gets its answer without a
            # second hand-off. step() still applies any due slide and any higher-priority work first.
            while not txn.done:
                self.engine.step()
        return txn

    def cancel(self, txn) -> None:
        self.sched.cancel(txn)

    def read_answers(self, query_id: str, after_slide: int, through_slide: int | None, limit: int):
        """(answers reflecting a slide in (after, through], newest answer's slide, oldest kept's slide)."""
        p = self.engine.periodic.get(query_id)
        if p is None:
            raise NotFound(f"periodic query {query_id!r} does not exist")
        return (*self.engine.answers.read(query_id, after_slide, through_slide, limit), p.task.plan.stream.name)

    def close_periodic(self, query_ids, reason: str) -> None:
        """Periodic queries that are gone (unregistered, their stream dropped): end their streams."""
        for qid in query_ids:
            for q in self.subscribers.pop(qid, Subscribers()).queues:
                _offer(q, (CLOSED, reason))

    def subscribe(self, query_id: str):
        p = self.engine.periodic.get(query_id)
        if p is None:
            raise NotFound(f"periodic query {query_id!r} does not exist")
        total = sum(len(x.queues) for x in self.subscribers.values())
        if total >= self.config.max_subscribers:
            raise ResourceExhausted(f"{total} subscriptions are open (limit {self.config.max_subscribers}, "
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
            self._note_answer(p.task.plan.stream.name, result, "periodic")
        subs = self.subscribers.get(query_id)
        if subs is not None:
            for q in subs.queues:
                if not _offer(q, result):
                    subs.dropped += 1

    def _publish_error(self, query_id: str, error: Exception) -> None:
        subs = self.subscribers.get(query_id)
        for q in subs.queues if subs else ():
            _offer(q, (error, str(error)))
        if query_id not in self.engine.periodic:  # failed for good: it is gone
            self.subscribers.pop(query_id, None)

    def metrics_snapshot(self) -> dict:
        """Everything the Prometheus collector exports, in one driver turn."""
        s = self.stats(None)
        for st in s["streams"]:
            stream = self.stream(st["stream"])
            w = stream.window
            held = sum(a.nbytes for sub in w.subs if sub is not None for a in sub.columns.values())
            held += sum(a.nbytes for buf in [w._buffer, *w._slots.values()] for ch in buf.chunks for a in ch.values())
            st["bytes"] = held
            st["strings"] = len(stream.strings)
        s["subscriber_drops"] = sum(x.dropped for x in self.subscribers.values())
        s["shed"] = self.shed
        return s

    def _note_answer(self, name: str, result: Result, query_class: str = "onetime") -> None:
        if self.prometheus is not None:
            self.prometheus.observe_answer(name, query_class, result)
        m = self.metrics[name]
        if result.staleness_ms is not None:
            m.staleness.append(result.staleness_ms)
        m.response.append(result.response_ms)

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
                        "slide_delay_ms": percentiles(self.sched.slide_delays[n])})
        return {"policy": self.sched.policy, "streams": out, "durability": self.durability_stats(),
                "onetime": self.sched.by_class["onetime"].as_dict(), "periodic": self.sched.by_class["periodic"].as_dict()}

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
