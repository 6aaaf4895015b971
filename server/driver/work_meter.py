"""The server's work clock for the measured choice of temporal queries: the calling thread's CPU
time, and the garbage collections run on it (store/temporal.py's WorkMeter, issue 34).

Owns one gc callback for the process (installed once, on the first `work_meter()`), which times
each collection with the collecting thread's CPU clock and counts the container allocations
before it (gc.get_count()'s first generation, read as a collection starts); the core reads the
counters through `collected()` and never the collector. Callers: bench/temporal_experiment.py
(`--metered`) and bench/temporal_order.py; a server would pass it as the engine's work_clock (it
does not by default: docs/coalesce.md, round 20).
"""
from __future__ import annotations

import gc
import threading
import time

from windowstore.store.temporal import Collected, WorkMeter


class GcWorkMeter(WorkMeter):
    """time.thread_time with the collections on each thread counted: young (generations 0 and 1)
    and full seconds per thread, allocations for the process (gc's counts are the process's; on
    the query thread those of other threads add a little noise to the rate, not a bias)."""

    def __init__(self) -> None:
        self.per_thread: dict[int, list[float]] = {}  # thread id -> [young seconds, full seconds]
        self.started: dict[int, float] = {}  # thread id -> CPU time at the current collection's start
        self.allocations = 0  # allocations counted up to the latest collection's start
        self.collections = 0

    def __call__(self) -> float:
        return time.thread_time()

    def collected(self) -> Collected:
        young, full = self.per_thread.get(threading.get_ident(), (0.0, 0.0))
        return Collected(young_s=young, full_s=full, allocated=self.allocations + gc.get_count()[0])

    def on_gc(self, phase: str, info: dict) -> None:
        """gc.callbacks' hook: time the collection on the thread it runs on."""
        me = threading.get_ident()
        if phase == "start":
            self.allocations += gc.get_count()[0]
            self.started[me] = time.thread_time()
            return
        start = self.started.pop(me, None)
        if start is None:  # installed while a collection ran
            return
        acc = self.per_thread.get(me)
        if acc is None:
            acc = self.per_thread[me] = [0.0, 0.0]
        acc[0 if info.get("generation", 2) < 2 else 1] += time.thread_time() - start
        self.collections += 1


_METER: GcWorkMeter | None = None
_LOCK = threading.Lock()


def work_meter() -> GcWorkMeter:
    """The process's meter, its gc callback installed on the first call (one for all servers and
    queries of the process: a callback per collection, two CPU-clock reads)."""
    global _METER
    with _LOCK:
        if _METER is None:
            _METER = GcWorkMeter()
            gc.callbacks.append(_METER.on_gc)
        return _METER
