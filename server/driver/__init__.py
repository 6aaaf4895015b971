"""The driver: runs the engine on the server's event loop (core.py, the `Driver`), one job per module:

- core.py: the life cycle (start, recovery, serving, stopping), admission, the calls on the engine;
- stepper.py: the scheduler's operations on the loop, a budget per callback, and the slide timer;
- group_commit.py: the log written once per loop iteration, writes acknowledged once durable;
- job_threads.py: the query and seal threads (offloaded scans and seals);
- call_queue.py: calls from other threads, waiting for the loop;
- periodic.py: periodic queries' answers to subscribers, and their published response times;
- recovery.py: the data directory replayed, and the slides that fell due while down;
- reports.py: statistics, the metrics snapshot and explain (read-only);
- errors.py, loop_util.py: the driver's refusals; posting to the loop and settling futures.

The names the server, the tools and the tests use are importable from here.
"""
from .core import (CLOSED, AlreadyExists, AppendAck, DeadlineExceeded, Driver, FailedPrecondition, NotFound,
                   ResourceLimit, ShuttingDown, SlideAck, SubscriberQueue, Subscribers, Unavailable, wall_ms)
from .reports import Metrics, percentiles

__all__ = ["AlreadyExists", "AppendAck", "CLOSED", "DeadlineExceeded", "Driver", "FailedPrecondition", "Metrics",
           "NotFound", "ResourceLimit", "ShuttingDown", "SlideAck", "SubscriberQueue", "Subscribers", "Unavailable",
           "percentiles", "wall_ms"]
