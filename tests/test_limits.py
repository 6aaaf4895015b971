"""Bounds that keep one client from taking the server: subscriber queues by bytes, the number of
open subscriptions, the open buffer (see test_engine), load shedding (see test_metrics)."""
from __future__ import annotations

import queue
from types import SimpleNamespace

import pytest

from windowstore.server.config import ServerConfig
from windowstore.server.driver import Driver, ResourceExhausted, SubscriberQueue
from windowstore.txn.commands import CreateStream, Register


def answer(rows: int, width: int = 100):
    return SimpleNamespace(answer=SimpleNamespace(rows=[("x" * width, i) for i in range(rows)]))


def test_a_subscriber_that_never_reads_holds_at_most_its_byte_bound():
    q = SubscriberQueue(max_items=1_000, max_bytes=64 * 1024)
    kept = [q.offer(answer(100)) for _ in range(1_000)]  # ~12 KiB each
    assert not all(kept)
    assert q._bytes <= 64 * 1024 and len(q._items) <= 6
    # the newest answers are the ones kept
    items = []
    while True:
        try:
            items.append(q.get(0.01))
        except queue.Empty:
            break
    assert items and q._bytes == 0


def test_open_subscriptions_leave_handler_threads_for_everything_else():
    driver = Driver(ServerConfig(in_memory=True, workers=8, max_subscribers=256))
    driver.start()
    try:
        driver.command(CreateStream("s", (("ts", "int64"),), "ts", 2, 1000, None, "manual", 0, (), 16, 0)).result(10)
        p = driver.command(Register("", "SELECT COUNT(*) FROM s [SLIDE 1 SUBWINDOWS]", 0, 0)).result(10)
        for _ in range(4):
            driver.call(lambda: driver.subscribe(p.query_id)).result(10)
        with pytest.raises(ResourceExhausted, match="half of the 8 handler threads"):
            driver.call(lambda: driver.subscribe(p.query_id)).result(10)
    finally:
        driver.stop(5)
