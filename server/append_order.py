"""One writer's pipelined Appends kept in its order (`AppendRequest.after_batch_id`, docs/sdk.md).

gRPC gives no order among the concurrent calls of one client: a large payload is decoded on a
worker thread, and the frames of calls in flight interleave on the connection. So a batch that
names the batch it follows waits here, on the event loop, until that batch was applied, and is
refused (ABORTED, nothing applied) when that batch was refused or did not come within the bound:
the writer then sends again from its first unacknowledged batch, and the idempotency keys keep
every batch exactly once (txn/ingest.py). Owns the waiters and the recent refusals, on the loop
thread only; service.Append calls it. It applies nothing and reads no engine state itself.
"""
from __future__ import annotations

import asyncio
import collections
from typing import Callable

from windowstore.store import StoreError
from windowstore.store.errors import ResourceLimit

Key = tuple[str, str, int]  # (stream, writer_id, batch_id)


class OutOfOrder(StoreError):
    """A batch's predecessor (after_batch_id) was not applied: refused, or not come in time. ABORTED."""


class AppendOrder:
    """Waiters for a writer's batch to be applied, and the batches refused lately (bounded)."""

    def __init__(self, wait_s: float, keep: int = 4096, most_waiting: int = 1024):
        self.wait_s = wait_s
        self.keep = keep
        self.most_waiting = most_waiting  # Appends held for their predecessor at once (each holds its batch)
        self.waiting = 0
        self.waiters: dict[Key, list[asyncio.Future]] = {}
        self.refused: collections.OrderedDict[Key, None] = collections.OrderedDict()

    def _check(self) -> None:
        assert len(self.refused) <= self.keep, "refusals are bounded"
        assert all(self.waiters.values()), "no empty waiter lists are kept"
        assert 0 <= self.waiting <= self.most_waiting, "held Appends are bounded"

    def arrived(self, key: Key) -> None:
        """An Append of `key` began: an earlier refusal of it no longer decides its successors."""
        self.refused.pop(key, None)

    def settled(self, key: Key, applied: bool) -> None:
        """An Append of `key` ended, applied (or acknowledged as a replay) or refused: wake the
        batches waiting for it."""
        if applied:
            self.refused.pop(key, None)
        else:
            self.refused[key] = None
            self.refused.move_to_end(key)
            while len(self.refused) > self.keep:
                self.refused.popitem(last=False)
        for fut in self.waiters.pop(key, ()):
            if not fut.done():
                fut.set_result(None)

    async def after(self, key: Key, applied: Callable[[], bool]) -> None:
        """Return once batch `key` is applied (`applied()` says so); OutOfOrder if it was refused
        or is not applied within wait_s."""
        loop = asyncio.get_running_loop()
        until = loop.time() + self.wait_s
        stream, writer, batch = key
        while not applied():
            if key in self.refused:
                raise OutOfOrder(f"AppendRequest.after_batch_id: batch {batch} of writer {writer!r} (stream "
                                 f"{stream!r}) was refused, so this batch was not applied; send again from it")
            left = until - loop.time()
            if left <= 0:
                raise OutOfOrder(f"AppendRequest.after_batch_id: batch {batch} of writer {writer!r} (stream "
                                 f"{stream!r}) was not appended within {self.wait_s:g} s, so this batch was "
                                 "not applied; send again from it")
            if self.waiting >= self.most_waiting:
                raise ResourceLimit(f"AppendRequest.after_batch_id: {self.waiting} Appends are already waiting for the "
                                    f"batch they follow (limit {self.most_waiting}); send again from batch {batch} "
                                    "once it is acknowledged")
            fut = loop.create_future()
            self.waiters.setdefault(key, []).append(fut)
            self.waiting += 1
            try:
                await asyncio.wait({fut}, timeout=left)
            finally:
                self.waiting -= 1
                self._forget(key, fut)

    def _forget(self, key: Key, fut: asyncio.Future) -> None:
        waiting = self.waiters.get(key)
        if waiting is not None and fut in waiting:
            waiting.remove(fut)
            if not waiting:
                del self.waiters[key]
