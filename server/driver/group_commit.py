"""Group commit: the commands the engine applied during one loop iteration are written to the
write-ahead log together, at the end of the iteration (`flush`), and each write of the iteration is
acknowledged once it is durable per the fsync policy (under `--fsync always` the syncer thread of
durability.py syncs and the answer comes back to the loop), or refused with UNAVAILABLE if the log
failed; from then on writes are refused (`failure`) and queries go on.

Owns the writes waiting for their acknowledgement and the log's failure. Runs on the event loop
(the syncer's callback hops back onto it). Must not change the engine's state: it only drains the
commands the engine applied (and settles seals in flight before an overdue snapshot).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from windowstore.txn.engine import Engine

from ..durability import Durability
from .errors import Unavailable
from .loop_util import on_loop_thread, post, settle

log = logging.getLogger("windowstore.driver")

__all__ = ["GroupCommit"]


class GroupCommit:
    def __init__(self, engine: Engine, durability: Durability | None):
        self.engine = engine
        self.durability = durability
        self.loop: asyncio.AbstractEventLoop | None = None  # the driver's, once started
        self.failure: str | None = None  # why the log cannot be written: writes are refused
        self._acks: list = []   # (future, result) of this iteration's writes: answered once durable
        self._unacked = 0       # writes applied, not yet acknowledged
        self._flush_handle: asyncio.Handle | None = None
        self.replication: Any = None  # server/replication: takes the commands of replicated streams to their own logs

    @property
    def unacked(self) -> int:
        """Writes applied, not yet acknowledged."""
        return self._unacked

    def add(self, fut, result) -> None:
        """A write applied in this iteration: `fut` gets `result` once it is durable."""
        self._acks.append((fut, result))
        self._unacked += 1

    def dirty(self) -> None:
        """Something may have been applied: log it at the end of this loop iteration."""
        if self._flush_handle is None:
            self._flush_handle = self.loop.call_soon(self.flush)  # type: ignore[union-attr]  # set by start()

    def flush(self) -> None:
        """Log what the engine applied since the last flush (group commit); each (future, result)
        of this iteration's writes is answered once its write is durable (under --fsync always by
        the syncer thread, while the loop goes on), or UNAVAILABLE if the log failed."""
        self._flush_handle = None
        if self.durability is not None and self.durability.snapshot_overdue() and not self.failure:
            self.engine.settle()  # seals in flight, sealed here once: a snapshot does not wait for ever
        cmds = self.engine.drain()
        if self.replication is not None:
            cmds = self.replication.take(cmds)
        acks, self._acks = self._acks, []
        if not acks and not cmds:
            return
        if self.durability is None or self.failure:
            self._acknowledge(acks, self.failure)
            return
        try:
            self.durability.log(cmds, self.engine, lambda error: self._durable(acks, error))
        except OSError as e:
            self._acknowledge(acks, str(e))

    def _durable(self, acks, error: str | None) -> None:
        if on_loop_thread(self.loop):
            self._acknowledge(acks, error)
        elif not post(self.loop, self._acknowledge, acks, error):  # type: ignore[arg-type]  # started; False: the loop is gone, answer from here
            self._acknowledge(acks, error)

    def _acknowledge(self, acks, error: str | None) -> None:
        if error and not self.failure:
            self.failure = error
            log.error("the log cannot be written (%s): writes are refused from now on, queries go on", error)
        self._unacked -= len(acks)
        for fut, result in acks:
            if error:
                settle(fut, error=Unavailable(f"the write was not made durable: {error}"))
            else:
                settle(fut, result)
