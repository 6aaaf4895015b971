"""Periodic queries' answers on their way out: the subscribers' bounded queues, what Subscribe and
ReadAnswers serve, and each execution's response time as it was published.

Owns the subscriber queues and the published response times. Runs on the event loop only (no
lock). Must not touch the engine's state: it reads the registered periodic queries and their
answer log, and is called by the engine (on_answer, on_error) when an execution answers or fails.

A periodic execution's response time is measured from its start (on the driver's clock, ticked
into the engine before every operation) to its answer being handed to the subscribers (`publish`).
"""
from __future__ import annotations

import asyncio
import collections
import logging
from dataclasses import dataclass, field
from typing import Callable

from windowstore.store.errors import ResourceLimit
from windowstore.txn import Result
from windowstore.txn.engine import Engine, NotFound

from .. import oplog
from ..config import ServerConfig

__all__ = ["CLOSED", "PeriodicAnswers", "SubscriberQueue", "Subscribers"]

CLOSED = object()  # sentinel pushed to subscribers when their query ends


class SubscriberQueue:
    """A subscriber's answers, bounded by count and by bytes: the engine never waits on it; when
    full, the oldest answers are dropped (counted), so a subscriber that never reads holds at most
    the bound, not everything it was sent, and a slow subscriber never holds up slides or other
    queries. Used on the event loop only (no lock)."""

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


class PeriodicAnswers:
    """The periodic queries' subscribers and published response times (event loop only).

    `note_answer(stream, result, response_ms, query_class)` is told of every answer published
    (the driver's statistics); `clock` is the driver's."""

    def __init__(self, engine: Engine, config: ServerConfig, clock: Callable[[], float],
                 note_answer: Callable[..., None]):
        self.engine = engine
        self.config = config
        self.clock = clock
        self.note_answer = note_answer
        self.subscribers: dict[str, Subscribers] = {}
        # per periodic query, execution -> its response time (ms) as published: what Subscribe and
        # ReadAnswers report; as many as its answer log or a subscriber's queue can hold
        self.response: dict[str, dict[int, float]] = {}
        self._keep_responses = max(config.answer_log_keep, config.subscriber_buffer)
        # per periodic query, the slides of its answers held until acks=all holds them
        # (Replication.hold_answer): ReadAnswers shows no answer a subscriber could not have seen
        self.held: dict[str, list[int]] = {}

    def read_answers(self, query_id: str, after_slide: int, through_slide: int | None, limit: int):
        """(answers reflecting a slide in (after, through], newest answer's slide, oldest kept's slide)."""
        p = self.engine.periodic.get(query_id)
        if p is None:
            raise NotFound(f"periodic query {query_id!r} does not exist")
        held = self.held.get(query_id)
        if held:  # nothing from the oldest held answer's slide on
            cap = min(held) - 1
            through_slide = cap if through_slide is None else min(through_slide, cap)
            answers, newest, oldest = self.engine.answers.read(query_id, after_slide, through_slide, limit)
            return answers, min(newest, cap), oldest, p.task.plan.stream.name
        return (*self.engine.answers.read(query_id, after_slide, through_slide, limit), p.task.plan.stream.name)

    def hold(self, query_id: str, slide: int) -> None:
        """An answer of `slide` is held until its slide is replicated: publish() releases it."""
        self.held.setdefault(query_id, []).append(slide)

    def close(self, query_ids, reason: str) -> None:
        """Periodic queries that are gone (unregistered, their stream dropped): end their streams."""
        for qid in query_ids:
            self.response.pop(qid, None)
            self.held.pop(qid, None)
            for q in self.subscribers.pop(qid, Subscribers()).queues:
                q.offer((CLOSED, reason))

    def fail(self, query_ids, error: Exception) -> None:
        """End the streams of these periodic queries' subscribers with `error` (its status): the
        queries stay registered (a replica that stepped down, server/replication/manager.py)."""
        for qid in query_ids:
            for q in self.subscribers.pop(qid, Subscribers()).queues:
                q.offer((error, str(error)))

    def close_all(self, reason: str) -> None:
        self.close(list(self.subscribers), reason)

    def subscribe(self, query_id: str, after_slide: int | None = None):
        """A new subscriber's queue and the query's stream. `after_slide` set: the queue starts
        with the kept answers reflecting a later slide (those ReadAnswers would give, oldest
        first), read in the same step as the queue is attached, so no answer falls between the two."""
        p = self.engine.periodic.get(query_id)
        if p is None:
            raise NotFound(f"periodic query {query_id!r} does not exist")
        total = sum(len(x.queues) for x in self.subscribers.values())
        if total >= self.config.max_subscribers:
            raise ResourceLimit(f"{total} subscriptions are open (limit {self.config.max_subscribers}, "
                                "--max-subscribers)")
        q = SubscriberQueue(self.config.subscriber_buffer, self.config.subscriber_buffer_mb << 20)
        if after_slide is not None:
            kept = self.read_answers(query_id, after_slide, None, self.config.answer_log_keep)[0]  # (all the log keeps)
            for r in kept[-self.config.subscriber_buffer:]:  # (the queue would drop the older ones)
                q.offer(r)
        self.subscribers.setdefault(query_id, Subscribers()).queues.append(q)
        return q, p.task.plan.stream.name

    def unsubscribe(self, query_id: str, q: SubscriberQueue) -> None:
        subs = self.subscribers.get(query_id)
        if subs is not None and q in subs.queues:
            subs.queues.remove(q)

    def dropped(self) -> int:
        """Answers dropped from subscribers' full queues, over the open subscriptions."""
        return sum(x.dropped for x in self.subscribers.values())

    def publish(self, query_id: str, result: Result) -> None:
        """An execution answered (the engine's on_answer): its response time, then its subscribers."""
        held = self.held.get(query_id)
        if held and result.slide in held:
            held.remove(result.slide)
            if not held:
                del self.held[query_id]
        p = self.engine.periodic.get(query_id)
        if p is not None:
            # the engine's clock when the execution was submitted (Result.response_ms is the
            # engine's own figure, answered_ms - submitted), to the driver's clock now
            started_ms = result.answered_ms - result.response_ms
            response_ms = max(0.0, self.clock() - started_ms)
            kept = self.response.setdefault(query_id, {})
            kept[result.execution] = response_ms
            while len(kept) > self._keep_responses:
                del kept[next(iter(kept))]
            self.note_answer(p.task.plan.stream.name, result, response_ms, "periodic")
        subs = self.subscribers.get(query_id)
        if subs is not None:
            for q in subs.queues:
                if not q.offer(result):
                    subs.dropped += 1

    def publish_error(self, query_id: str, error: Exception) -> None:
        """An execution failed (the engine's on_error): subscribers are told; gone if it failed for good."""
        oplog.event("query_stopped", logging.WARNING, query_id=query_id, error=str(error)[:500],
                    gone=query_id not in self.engine.periodic)
        subs = self.subscribers.get(query_id)
        for q in subs.queues if subs else ():
            q.offer((error, str(error)))
        if query_id not in self.engine.periodic:  # failed for good: it is gone
            self.subscribers.pop(query_id, None)
            self.response.pop(query_id, None)

    def response_ms(self, query_id: str, result: Result) -> float:
        """A periodic answer's response time as it was published; 0.0 when this process did not
        publish it (an answer recovered from the log after a restart) or no longer keeps it."""
        return self.response.get(query_id, {}).get(result.execution, 0.0)
