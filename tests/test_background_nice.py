"""--background-nice (driver/job_threads.lower_priority): the seal, decode and periodic-query threads run that many
nice steps below the event loop's thread, which keeps its own."""
from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from windowstore.server.driver.job_threads import lower_priority


def _nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own nice value is Linux's")
def test_a_pool_started_with_lower_priority_runs_below_the_thread_that_made_it():
    mine = _nice()
    if mine > 19 - 5:
        pytest.skip("this process runs too low to go 5 steps lower")
    with ThreadPoolExecutor(1, initializer=lower_priority(5)) as low, ThreadPoolExecutor(1, initializer=lower_priority(0)) as same:
        assert low.submit(_nice).result() == mine + 5
        assert same.submit(_nice).result() == mine
    assert _nice() == mine


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own nice value is Linux's")
def test_the_periodic_lanes_query_thread_runs_below_the_loop_and_the_one_time_lanes_beside_it():
    """JobThreads: periodic work runs --background-nice below the thread that made it (as seals
    do); one-time queries' jobs keep its priority (a client waits on them in its call)."""
    from dataclasses import dataclass

    from conftest import wait_for
    from windowstore.server.driver.job_threads import JobThreads
    from windowstore.txn.kinds import QueryKind

    mine = _nice()
    if mine > 19 - 5:
        pytest.skip("this process runs too low to go 5 steps lower")

    @dataclass
    class Job:
        lane: QueryKind

        def run(self) -> int:
            return _nice()

    got: dict[QueryKind, int] = {}

    def post(fn, *args) -> bool:
        fn(*args)  # (on the job's thread: this test has no loop)
        return True

    threads = JobThreads(post, lambda job, value, error, ms: got.setdefault(job.lane, value), background_nice=5)
    try:
        for lane in QueryKind:
            threads.offload(Job(lane))
        wait_for(lambda: len(got) == len(QueryKind), "both lanes' jobs")
        assert got == {QueryKind.ONETIME: mine, QueryKind.PERIODIC: mine + 5}
    finally:
        threads.shutdown()
