"""One writer's Appends with several in flight (`append_all(..., in_flight=k)`): the bookkeeping of
the window, without I/O; Client and AsyncClient (client.py) send and wait.

Exactly once rests on the server: every batch carries the writer's idempotency key (writer_id,
batch_id), so a batch sent again is acknowledged as a duplicate, and names the batch before it
(`after_batch_id`), so the server applies the writer's batches in their order however the calls
arrive, and refuses the successors of a batch it did not apply (server/append_order.py). Here:
batch ids in order, at most `limit` calls in flight, no new batch sent while a failure is being
settled, and after a failure every unacknowledged batch sent again, oldest first.
"""
from __future__ import annotations

import collections
from typing import Any

from .errors import Aborted, InvalidArgument, Unavailable, WindowStoreError

# refusals after which the unacknowledged batches are sent again: the server was unreachable, or a
# batch's predecessor had not been applied (ABORTED: server/append_order.py)
RETRYABLE = (Unavailable, Aborted)


class AppendWindow:
    """Batches first_batch_id, first_batch_id + 1, ... of one writer: which to send next, which are
    in flight, what came back. A failure ends the round: once nothing is in flight, `settle()`
    either raises the error of the oldest failed batch (the batches before it were all applied,
    none after it: the server keeps the order) or queues every unacknowledged batch again."""

    def __init__(self, first_batch_id: int, limit: int, retries: int):
        if limit < 1:
            raise InvalidArgument(f"in_flight must be at least 1, not {limit}")
        self.first = first_batch_id
        self.limit = limit
        self.retries = retries
        self.next_new = first_batch_id        # the id the next new batch gets
        self.exhausted = False                # the caller's batches are all taken
        self.requests: dict[int, Any] = {}    # batch id -> its request, until acknowledged
        self.results: dict[int, Any] = {}     # batch id -> its acknowledgement
        self.flying: set[int] = set()
        self.again: collections.deque[int] = collections.deque()  # to send again, oldest first
        self.failures: dict[int, WindowStoreError] = {}           # this round's
        self.attempt = 0                      # rounds failed without the oldest failure moving on
        self.oldest_failed = first_batch_id - 1
        self.built_error: Exception | None = None  # building a batch's request failed: no batch after it

    def _check(self) -> None:
        assert len(self.flying) <= self.limit, "at most `limit` calls in flight"
        assert self.flying <= set(self.requests), "only unacknowledged batches fly"
        assert not set(self.requests) & set(self.results), "a batch is acknowledged or waiting, not both"
        assert set(self.requests) | set(self.results) == set(range(self.first, self.next_new)), "ids without gaps"
        assert set(self.again) <= set(self.requests) - self.flying, "only waiting batches are queued to go again"
        assert list(self.again) == sorted(self.again), "sent again oldest first"

    def after(self, batch_id: int) -> int | None:
        """The batch this one follows (after_batch_id): none for the call's first batch."""
        return batch_id - 1 if batch_id > self.first else None

    def room(self) -> bool:
        """Whether another Append may go now: fewer than `limit` in flight and no failure unsettled."""
        return len(self.flying) < self.limit and not self.failures and (bool(self.again) or not self.exhausted)

    def resend(self) -> int | None:
        """The oldest batch to send again, if any (before any new one)."""
        return self.again.popleft() if self.again else None

    def take(self, built) -> int | None:
        """The next new batch, from the future that built its request (its result: the request, or
        None once the caller's batches are all taken): its id. None when there is none; an error
        building it is kept and raised by outcome(), once the batches before it are settled."""
        try:
            request = built.result()
        except Exception as e:  # noqa: BLE001 - the caller's batch could not be turned into a request
            self.built_error, request = e, None
        if request is None:
            self.exhausted = True
            return None
        return self.add(request)

    def add(self, request: Any) -> int:
        """A new batch's request: its id."""
        batch_id = self.next_new
        self.next_new += 1
        self.requests[batch_id] = request
        return batch_id

    def sending(self, batch_id: int) -> Any:
        """Batch `batch_id` goes out: its request."""
        self.flying.add(batch_id)
        return self.requests[batch_id]

    def acked(self, batch_id: int, result: Any) -> None:
        self.flying.discard(batch_id)
        self.requests.pop(batch_id, None)
        self.results[batch_id] = result

    def failed(self, batch_id: int, error: WindowStoreError) -> None:
        self.flying.discard(batch_id)
        self.failures[batch_id] = error

    def settle(self) -> int:
        """Once nothing is in flight after a failure: raise the oldest failed batch's error when it
        is not one to retry, or after `retries` rounds failing at the same batch; else queue every
        unacknowledged batch again, oldest first, and return the round's number (for a backoff)."""
        assert self.failures and not self.flying, "a round is settled once its calls have all ended"
        oldest = min(self.failures)
        error = self.failures[oldest]
        if not isinstance(error, RETRYABLE):
            raise error
        if oldest > self.oldest_failed:
            self.oldest_failed, self.attempt = oldest, 0
        if self.attempt >= self.retries:
            raise error
        self.attempt += 1
        self.failures.clear()
        self.again = collections.deque(sorted(self.requests))
        return self.attempt

    def finished(self) -> bool:
        return self.exhausted and not self.requests and not self.flying and not self.failures

    def ordered(self) -> list:
        """The acknowledgements, in batch order."""
        return [self.results[b] for b in range(self.first, self.next_new)]

    def outcome(self) -> list:
        """Once finished: the acknowledgements in batch order, or the error building a batch."""
        if self.built_error is not None:
            raise self.built_error
        return self.ordered()
