"""The query threads and the seal thread: scheduler jobs run off the event loop.

A window scan's read of a sub-window and its final merge (a holistic aggregate's sort of the whole
window) that took at least `offload_ms` on earlier runs of the same query are not run on the loop:
the scheduler issues them as jobs (txn/schedule/offload.py) and a query thread computes them
while the loop goes on with slides and other calls. There are two, one per lane (Job.lane): one
for periodic executions (registered queries, shared groups' merges) and one for one-time queries,
so a one-time scan never waits for a periodic job (issue 30: the one-time queries of thesis 8.5.1
beside the periodic ones); within a lane the scheduler issues one scan's jobs at a time. NumPy
releases the GIL in its heavy loops, and the switch interval (config.switch_interval_ms) bounds
how long the loop waits for it otherwise.
A slide's seal (concatenating the cut rows, building the synopses) of at least `seal_offload_rows`
rows (config.py: above a hand-off's cost) runs on the seal thread likewise (txn/schedule/seals.py,
"Sealing off the scheduler's thread"): the loop cuts the rows and logs the Slide, goes on serving
appends and other streams, and installs the sub-window when it comes back; queries of that stream
that come meanwhile read the sub-windows installed (with --wait-for-seals: they wait for it).

Owns the three threads. A job's result goes back to the loop (`done`, posted with its running time);
nothing here touches the engine.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from windowstore.txn.kinds import QueryKind

__all__ = ["JobThreads"]


def lower_priority(nice: int) -> Callable[[], None]:
    """A thread pool's initializer: its thread runs `nice` steps below the event loop's thread
    (Linux: a thread's own nice value). On a busy machine the loop thread then gets the core first
    when both are runnable: measured, the long steps of the loop under ingest were mostly spent
    waiting in the run queue, not computing (docs/performance.md, Round 18)."""
    def init() -> None:
        if nice > 0 and hasattr(os, "setpriority") and sys.platform.startswith("linux"):
            me = threading.get_native_id()  # a new thread starts at its creator's (the loop's) value
            try:
                os.setpriority(os.PRIO_PROCESS, me, min(19, os.getpriority(os.PRIO_PROCESS, me) + nice))
            except OSError:  # not permitted here: the thread keeps the process's priority
                pass
    return init


class JobThreads:
    def __init__(self, post: Callable[..., bool], done: Callable[..., None], background_nice: int = 0):
        """`post(fn, *args)` runs fn on the loop; `done(job, value, error, ms)` is posted there
        when a job has run. The seal thread and the periodic lane's thread run `background_nice`
        below the loop (lower_priority): both are background work a client is not waiting on in
        its call; the one-time lane's thread keeps the loop's priority."""
        self.post, self.done = post, done
        # a thread per lane for offloaded query work (more would only contend for the GIL); jobs in
        # flight are bounded by the queries admitted (at most one per query), and the scheduler
        # issues one scan's at a time per lane
        self._lanes = {
            QueryKind.ONETIME: ThreadPoolExecutor(1, thread_name_prefix="windowstore-query-onetime"),
            QueryKind.PERIODIC: ThreadPoolExecutor(1, thread_name_prefix="windowstore-query-periodic",
                                                   initializer=lower_priority(background_nice)),
        }
        # seals on a thread of their own: one does not queue behind a scan's reads, nor they behind it
        self._seal_thread = ThreadPoolExecutor(1, thread_name_prefix="windowstore-seal",
                                               initializer=lower_priority(background_nice))

    def offload(self, job) -> None:
        """Run a scheduler job on its lane's query thread; its result comes back to the loop."""
        self._lanes[job.lane].submit(self._run, job)

    def seal(self, job) -> None:
        """Seal a slide's cut on the seal thread; the sub-window comes back to the loop."""
        self._seal_thread.submit(self._run, job)

    def shutdown(self) -> None:
        """Jobs not started are dropped; one running finishes, its result is no longer taken."""
        for pool in (*self._lanes.values(), self._seal_thread):
            pool.shutdown(wait=False, cancel_futures=True)

    def _run(self, job) -> None:
        t0 = time.perf_counter()
        try:
            value, error = job.run(), None
        except Exception as e:  # noqa: BLE001 - the query fails (INTERNAL), the server goes on
            value, error = None, e
        self.post(self.done, job, value, error, (time.perf_counter() - t0) * 1000.0)
