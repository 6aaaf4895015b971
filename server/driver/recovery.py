"""Recovery before serving: the engine rebuilt from the data directory (snapshot, then the log),
and the processing-time slides that fell due while the server was down applied and logged.

Runs once, on a thread of its own, before the engine is served (the driver's start): nothing else
touches the engine meanwhile. Owns nothing after it returns; the durability layer owns the files.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

from windowstore.store.kinds import Clock
from windowstore.txn.engine import Engine
from windowstore.txn.kinds import Step

from .. import oplog
from ..durability import Durability

__all__ = ["recover"]


def recover(engine: Engine, durability: Durability, clock: Callable[[], float],
            replication=None) -> tuple[dict[str, int], dict]:
    """Recover `engine` from `durability`'s data directory (and its replicated streams from their
    replica logs); returns (catch-up slides by stream, the recovery's statistics)."""
    t0 = time.monotonic()
    oplog.event("recovery_started", data_dir=durability.dir)
    stats = durability.recover(engine, replication.server_log_filter() if replication is not None else None)
    if replication is not None:
        stats["replicated_records"] = sum(replication.recover(engine).values())
    engine.drain()  # recovered commands are on disk already
    now = clock()
    sched = engine.sched
    # processing time went on while the server was down: the slides that fell due are applied
    # now, before serving (the first seals what was buffered, the rest are empty), and logged
    catch_up = {n: s.window.due(int(now)) for n, s in sched.streams.items()
                if s.spec.clock == Clock.PROCESSING and not s.spec.count_based}
    engine.tick(now)
    while sched.step() == Step.SLIDE:
        pass
    recovery_stats = {**stats, "seconds": time.monotonic() - t0}
    oplog.event("recovered", **recovery_stats, catch_up_slides=sum(catch_up.values()))
    for name, why in sched.failed.items():
        oplog.event("stream_stopped", logging.ERROR, stream=name, reason=why)
    return catch_up, recovery_stats
