"""--background-nice (driver/job_threads.lower_priority): the seal and decode threads run that many
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
