"""Bounds that keep one client from taking the server: subscriber queues by bytes, the number of
open subscriptions (which hold no thread), the open buffer (see test_engine), load shedding (see
test_metrics)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import grpc
import pytest
from conftest import wait_until
from grpc_health.v1 import health_pb2, health_pb2_grpc

from windowstore.clients import AsyncClient, ResourceExhausted as ClientResourceExhausted
from windowstore.server.config import ServerConfig
from windowstore.server.driver import Driver, ResourceLimit, SubscriberQueue
from windowstore.server.process import ServerProcess
from windowstore.store import WindowSpec
from windowstore.txn.commands import CreateStream, Register


def answer(rows: int, width: int = 100):
    return SimpleNamespace(answer=SimpleNamespace(rows=[("x" * width, i) for i in range(rows)]))


def test_a_subscriber_that_never_reads_holds_at_most_its_byte_bound():
    q = SubscriberQueue(max_items=1_000, max_bytes=64 * 1024)
    kept = [q.offer(answer(100)) for _ in range(1_000)]  # ~12 KiB each
    assert not all(kept)
    assert q._bytes <= 64 * 1024 and len(q._items) <= 6
    # the newest answers are the ones kept, and next() hands them out in order
    kept_rows = len(q._items)
    items = asyncio.run(_take(q, kept_rows))
    assert len(items) == kept_rows and q._bytes == 0 and not q._items


async def _take(q: SubscriberQueue, n: int) -> list:
    return [await q.next() for _ in range(n)]


def test_subscriptions_are_capped_by_max_subscribers():
    driver = Driver(ServerConfig(in_memory=True, max_subscribers=4))
    driver.start()
    try:
        driver.command(CreateStream("s", (("ts", "int64"),), "ts", WindowSpec(subwindows=2, subwindow_ms=1000, clock="manual"),
                                    0)).result(10)
        p = driver.command(Register("", "SELECT COUNT(*) FROM s [SLIDE 1 SUBWINDOWS]", 0, 0)).result(10)
        for _ in range(4):
            driver.call(lambda: driver.subscribe(p.query_id)).result(10)
        with pytest.raises(ResourceLimit, match="4 subscriptions are open"):
            driver.call(lambda: driver.subscribe(p.query_id)).result(10)
    finally:
        driver.stop(5)


@pytest.mark.slow
def test_open_subscriptions_hold_no_thread():
    """200 open Subscribe streams on a server with one worker thread: health, queries and writes
    still answer, every stream gets the next answer, and the 201st subscription is refused."""
    n = 200
    # (all 200 open at once from one client: per-client admission would shed some of them)
    with ServerProcess("--max-subscribers", str(n), "--workers", "1", "--max-requests-per-client", "1000") as server:
        async def main():
            async with AsyncClient(server.target, timeout=30) as ws:
                await ws.create_stream("s", {"ts": "int64"}, subwindows=2, subwindow_ms=1000, clock="manual")
                p = await ws.register("SELECT COUNT(*) FROM s [SLIDE 1 SUBWINDOWS]")

                async def subscriber():
                    async for answer in ws.subscribe(p.id):
                        return answer.rows
                tasks = [asyncio.ensure_future(subscriber()) for _ in range(n)]
                async def subscribed():
                    return sum(q["subscribers"] for q in await ws.list_queries("s")) >= n
                await wait_until(subscribed, f"the server to hold all {n} subscriptions")
                assert sum(q["subscribers"] for q in await ws.list_queries("s")) == n
                async with grpc.aio.insecure_channel(server.target) as ch:
                    health = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
                    assert health.status == health_pb2.HealthCheckResponse.SERVING
                with pytest.raises(ClientResourceExhausted, match="200 subscriptions are open"):
                    async for _ in ws.subscribe(p.id):
                        break
                assert (await ws.append("s", {"ts": [1, 2, 3]})).accepted == 3
                assert await ws.slide("s") == 0
                assert (await ws.query("SELECT COUNT(*) FROM s")).rows == [(3,)]
                answers = await asyncio.wait_for(asyncio.gather(*tasks), 60)
                assert answers == [[(3,)]] * n
        asyncio.run(main())
