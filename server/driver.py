"""The driver: the one thread that owns the pure core.

RPC handlers hand it closures (`call`) and wait on futures; between closures it runs the
scheduler one operation at a time, so a due slide is applied before the next read. When idle it
sleeps until the next processing-time slide is due or work arrives.

Everything that changes state (streams, accepted batches, slides, periodic query definitions)
goes through the methods below, run on this thread: the single write path where a write-ahead
log and snapshots will hook in.
"""
from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from windowstore.store import InvalidInput, Stream, StoreError, plan_query
from windowstore.txn import History, QueryFailed, Result, Scheduler, Task

from .config import ServerConfig

log = logging.getLogger("windowstore.driver")


class NotFound(StoreError):
    pass


class AlreadyExists(StoreError):
    pass


class ResourceExhausted(StoreError):
    pass


class FailedPrecondition(StoreError):
    pass


class ShuttingDown(StoreError):
    pass


class DeadlineExceeded(StoreError):
    pass


def wall_ms() -> float:
    return time.time() * 1000.0


CLOSED = object()  # sentinel pushed to subscribers when their query ends


@dataclass
class Periodic:
    task: Task
    text: str
    subscribers: list[queue.Queue] = field(default_factory=list)
    dropped: int = 0


@dataclass
class StreamBook:
    """Per-stream bookkeeping the scheduler does not keep."""

    accepted_rows: int = 0
    duplicate_batches: int = 0
    acks: dict[str, collections.OrderedDict] = field(default_factory=dict)  # writer -> batch -> ack
    slide_acks: dict[str, collections.OrderedDict] = field(default_factory=dict)  # writer -> batch -> slide
    staleness: collections.deque = field(default_factory=lambda: collections.deque(maxlen=10_000))
    response: collections.deque = field(default_factory=lambda: collections.deque(maxlen=10_000))


@dataclass
class AppendAck:
    accepted: int
    late: int
    duplicate: bool
    latest_slide: int


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
        self.sched = Scheduler(config.policy, clock, self.history, max_restarts=config.max_restarts)
        self.books: dict[str, StreamBook] = {}
        self.periodic: dict[str, Periodic] = {}
        self.inflight = 0
        self._inbox: collections.deque = collections.deque()
        self._cv = threading.Condition()
        self._stopping = False
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="windowstore-driver", daemon=True)

    # -- the loop ------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def call(self, fn: Callable[[], Any]) -> Future:
        """Run fn on the driver thread; its result or exception arrives on the future."""
        fut: Future = Future()
        with self._cv:
            if self._closed:
                fut.set_exception(ShuttingDown("the server is shutting down"))
                return fut
            self._inbox.append((fn, fut))
            self._cv.notify()
        return fut

    def run(self, fn: Callable[[], Any], timeout: float | None = None) -> Any:
        return self.call(fn).result(timeout)

    def _run(self) -> None:
        sched = self.sched
        while True:
            with self._cv:
                work = list(self._inbox)
                self._inbox.clear()
            for fn, fut in work:
                if fut.set_running_or_notify_cancel():
                    try:
                        fut.set_result(fn())
                    except BaseException as e:  # noqa: BLE001 - the caller gets it
                        fut.set_exception(e)
            if self._stopping and not sched.active:
                break
            try:
                op = sched.step()
            except Exception as e:  # a bug must not take the server down: fail the query, keep serving
                log.exception("scheduler step failed")
                self._fail_current(e)
                continue
            if op == "error":
                log.error("%s", sched.last_error, exc_info=sched.last_error.__cause__)
            if op is not None:
                continue
            with self._cv:
                if self._inbox or self._stopping:
                    continue
                self._cv.wait(self._idle_timeout())
        self._close_subscribers("the server is shutting down")
        self.history.close()

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
                self._inbox.append((withdraw, Future()))
                self._cv.notify()
            self._thread.join(5)

    # -- streams (driver thread only) ---------------------------------------------------------
    def stream(self, name: str) -> Stream:
        s = self.sched.streams.get(name)
        if s is None:
            raise NotFound(f"stream {name!r} does not exist")
        return s

    def create_stream(self, name: str, columns: dict, time_column: str, spec) -> Stream:
        if name in self.sched.streams:
            raise AlreadyExists(f"stream {name!r} already exists")
        if len(self.sched.streams) >= self.config.max_streams:
            raise ResourceExhausted(f"at most {self.config.max_streams} streams")
        stream = Stream(name, columns, spec, created_ms=int(self.clock()), time_column=time_column)
        self.sched.add_stream(stream)
        self.books[name] = StreamBook()
        return stream

    def drop_stream(self, name: str) -> None:
        self.stream(name)
        for qid in [q for q, p in self.periodic.items() if p.task.plan.stream.name == name]:
            self.unregister(qid, reason=f"stream {name!r} was dropped")
        self.sched.drop_stream(name)
        del self.books[name]

    def append(self, name: str, batch, writer_id: str, batch_id: int | None) -> AppendAck:
        stream = self.stream(name)
        book = self.books[name]
        acks = None
        if writer_id and batch_id is not None:
            acks = book.acks.setdefault(writer_id, collections.OrderedDict())
            seen = acks.get(batch_id)
            if seen is not None:
                book.duplicate_batches += 1
                return AppendAck(seen.accepted, seen.late, True, seen.latest_slide)
        result = stream.append(batch)  # raises InvalidInput with nothing applied
        book.accepted_rows += result.accepted
        ack = AppendAck(result.accepted, result.late, False, stream.window.latest)
        if acks is not None:
            acks[batch_id] = ack
            if len(acks) > self.config.idempotency_keep:
                acks.popitem(last=False)
        return ack

    def slide(self, name: str, writer_id: str = "", batch_id: int | None = None) -> tuple[int, int, bool]:
        stream = self.stream(name)
        seen = None
        if writer_id and batch_id is not None:
            seen = self.books[name].slide_acks.setdefault(writer_id, collections.OrderedDict())
            if batch_id in seen:
                return (*seen[batch_id], True)
        if stream.spec.clock != "manual" or stream.spec.count_based:
            raise FailedPrecondition(f"stream {name!r} slides on its {stream.spec.clock if not stream.spec.count_based else 'row count'} "
                                     "clock; Slide applies to clock='manual' streams")
        before = stream.window.latest
        self.sched.request_slide(name)
        while self.sched.manual_requests.get(name, 0) > 0:
            self.sched.step()  # due slides run first (under serial, after the running query)
        sub = stream.window.subs[(before + 1) % stream.window.n]
        if seen is not None:
            seen[batch_id] = (sub.slide, sub.rows)
            if len(seen) > self.config.idempotency_keep:
                seen.popitem(last=False)
        return sub.slide, sub.rows, False

    # -- queries -------------------------------------------------------------------------------
    def plan(self, query):
        stream = self.stream(query.stream)
        return plan_query(query, stream)

    def submit(self, query, priority: int, done: Future):
        """Plan and submit a one-time query; `done` gets the Result or the error."""
        if query.slide is not None:
            raise InvalidInput("a query with SLIDE is periodic: register it instead")
        if self.inflight >= self.config.max_concurrent_queries:
            raise ResourceExhausted(f"{self.inflight} queries in flight (limit {self.config.max_concurrent_queries})")
        plan = self.plan(query)
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
                self.sched.step()
        return txn

    def cancel(self, txn) -> None:
        self.sched.cancel(txn)

    def register(self, query, text: str, priority: int) -> Periodic:
        if len(self.periodic) >= self.config.max_periodic_queries:
            raise ResourceExhausted(f"at most {self.config.max_periodic_queries} periodic queries")
        plan = self.plan(query)
        every = plan.bound.every
        if every is None:
            raise InvalidInput("a periodic query needs SLIDE (e.g. [RANGE 1 min SLIDE 10 s])")
        holder: dict = {}
        task = self.sched.register(plan, every, priority, on_answer=lambda r: self._publish(holder["p"], r),
                                   on_error=lambda t, e: self._publish_error(holder["p"], e))
        p = Periodic(task, text)
        holder["p"] = p
        self.periodic[task.id] = p
        return p

    def unregister(self, query_id: str, reason: str = "the periodic query was unregistered") -> None:
        p = self.periodic.pop(query_id, None)
        if p is None:
            raise NotFound(f"periodic query {query_id!r} does not exist")
        self.sched.unregister(query_id)
        for q in p.subscribers:
            _offer(q, (CLOSED, reason))

    def subscribe(self, query_id: str) -> queue.Queue:
        p = self.periodic.get(query_id)
        if p is None:
            raise NotFound(f"periodic query {query_id!r} does not exist")
        total = sum(len(x.subscribers) for x in self.periodic.values())
        if total >= self.config.max_subscribers:
            raise ResourceExhausted(f"at most {self.config.max_subscribers} subscribers")
        q: queue.Queue = queue.Queue(maxsize=self.config.subscriber_buffer)
        p.subscribers.append(q)
        return q, p.task.plan.stream.name

    def unsubscribe(self, query_id: str, q: queue.Queue) -> None:
        p = self.periodic.get(query_id)
        if p is not None and q in p.subscribers:
            p.subscribers.remove(q)

    def _publish(self, p: Periodic, result: Result) -> None:
        self._note_answer(p.task.plan.stream.name, result)
        for q in p.subscribers:
            if not _offer(q, result):
                p.dropped += 1

    def _publish_error(self, p: Periodic, error: Exception) -> None:
        for q in p.subscribers:
            _offer(q, (error, str(error)))
        if not p.task.active:  # failed for good (an internal error): it is gone
            self.periodic.pop(p.task.id, None)

    def _note_answer(self, name: str, result: Result) -> None:
        book = self.books.get(name)
        if book is not None:
            if result.staleness_ms is not None:
                book.staleness.append(result.staleness_ms)
            book.response.append(result.response_ms)

    def _close_subscribers(self, reason: str) -> None:
        for p in self.periodic.values():
            for q in p.subscribers:
                _offer(q, (CLOSED, reason))

    # -- introspection -------------------------------------------------------------------------
    def stats(self, name: str | None) -> dict:
        names = [name] if name else list(self.sched.streams)
        out = []
        for n in names:
            stream = self.stream(n)
            c = self.sched.by_stream[n]
            book = self.books[n]
            out.append({"stream": n, "slides": c.slides, "queries": c.committed, "aborts": c.aborts,
                        "restarts": c.restarts, "failed": c.failed, "errors": c.errors,
                        "late_rows": stream.window.late_rows,
                        "duplicate_batches": book.duplicate_batches, "accepted_rows": book.accepted_rows,
                        "staleness_ms": percentiles(book.staleness), "response_ms": percentiles(book.response),
                        "slide_delay_ms": percentiles(self.sched.slide_delays[n])})
        return {"policy": self.sched.policy, "streams": out,
                "onetime": self.sched.by_class["onetime"].as_dict(), "periodic": self.sched.by_class["periodic"].as_dict()}


def _offer(q: queue.Queue, item) -> bool:
    """Queue for a subscriber without ever blocking the driver: a slow subscriber loses its
    oldest answers (counted), never holds up slides or other queries."""
    try:
        q.put_nowait(item)
        return True
    except queue.Full:
        try:
            q.get_nowait()
        except queue.Empty:
            pass
        try:
            q.put_nowait(item)
        except queue.Full:
            pass
        return False
