"""One writer's pipelined Appends (append_all(..., in_flight=k); clients/pipeline.py, server/append_order.py):
every batch applied exactly once and in the writer's order, at most k calls in flight, a refusal
raised to the caller. The window's logic against a model of the server's rule (a batch is applied
only after the one it names, a replay is acknowledged, not applied), with calls ending in any
order and failing before or after the server applied them; then the same on a real server, through
a proxy that resets the connection mid-way, checked against a brute-force count of the rows sent."""
from __future__ import annotations

import threading

import grpc
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from conftest import wait_for

from windowstore.clients import Client
from windowstore.clients.errors import Aborted, InvalidArgument, Unavailable
from windowstore.clients.pipeline import AppendWindow
from windowstore.v1 import windowstore_pb2 as pb
from windowstore.v1 import windowstore_pb2_grpc as pb_grpc


class ServerModel:
    """The server's rule for a writer's batches, independent of the window: `after_batch_id` must
    be applied first (else ABORTED, nothing applied), a batch applied before is a duplicate, and a
    `bad` batch is refused. `applied` lists the batches in the order they were applied."""

    def __init__(self, bad: int | None = None):
        self.applied: list[int] = []
        self.bad = bad

    def call(self, batch: int, after: int | None):
        if batch in self.applied:
            return ("ack", batch, True)
        if after is not None and after not in self.applied:
            raise Aborted(f"batch {after} was not applied")
        if batch == self.bad:
            raise InvalidArgument(f"batch {batch} is refused")
        self.applied.append(batch)
        return ("ack", batch, False)


def drive(win: AppendWindow, n: int, model: ServerModel, rng, fault_p: float = 0.0) -> list[int]:
    """Run the window over batches 0..n-1 against the model: calls end in a random order, each lost
    with probability fault_p before the model sees it or after it applied it (UNAVAILABLE either way).
    Returns the ids in the order they were sent; raises what the window raises."""
    sent: list[int] = []
    flying: list[int] = []
    taken = 0
    while not win.finished():
        while win.room():
            batch = win.resend()
            if batch is None:
                if taken == n:
                    win.exhausted = True
                    break
                batch = win.add(("request", taken))
                taken += 1
            assert win.sending(batch) == ("request", batch - win.first)
            sent.append(batch)
            flying.append(batch)
            assert len(flying) <= win.limit
        if flying:
            batch = flying.pop(int(rng.integers(len(flying))))
            fault = rng.random() < fault_p
            try:
                if fault and rng.random() < 0.5:
                    raise Unavailable("lost on the way")
                got = model.call(batch, win.after(batch))
                if fault:
                    raise Unavailable("the answer was lost")
                win.acked(batch, got)
            except (Aborted, InvalidArgument, Unavailable) as e:
                win.failed(batch, e)
        elif win.failures:
            win.settle()
        win._check()
    return sent


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 40), st.integers(1, 6), st.integers(-5, 100), st.sampled_from([0.0, 0.1, 0.3]),
       st.integers(0, 2**32 - 1))
def test_every_batch_is_applied_once_in_order_whatever_the_calls_do(n, limit, first, fault_p, seed):
    rng = np.random.default_rng(seed)
    model = ServerModel()
    win = AppendWindow(first, limit, retries=60)
    sent = drive(win, n, model, rng, fault_p)
    assert model.applied == list(range(first, first + n))
    assert [r[1] for r in win.ordered()] == list(range(first, first + n))
    new = [b for i, b in enumerate(sent) if b not in sent[:i]]
    assert new == list(range(first, first + n)), "new batches go out in id order"


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 30), st.integers(1, 6), st.data())
def test_a_refused_batch_is_raised_with_those_before_it_applied_and_none_after(n, limit, data):
    bad = data.draw(st.integers(0, n - 1))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    model = ServerModel(bad=bad)
    win = AppendWindow(0, limit, retries=60)
    with pytest.raises(InvalidArgument, match=f"batch {bad} is refused"):
        drive(win, n, model, rng, data.draw(st.sampled_from([0.0, 0.2])))
    assert model.applied == list(range(bad))


def test_a_batch_failing_every_time_is_raised_after_the_retries():
    class Down(ServerModel):
        def call(self, batch, after):
            raise Unavailable("down")
    win = AppendWindow(0, 3, retries=2)
    with pytest.raises(Unavailable, match="down"):
        drive(win, 5, Down(), np.random.default_rng(1))
    assert win.attempt == 2  # two rounds sent again, the third failure raised


def test_a_window_needs_room_for_one_call():
    with pytest.raises(InvalidArgument, match="in_flight must be at least 1"):
        AppendWindow(0, 0, retries=3)


# -- on a real server -------------------------------------------------------------------------------
SCHEMA = {"ts": "int64", "src": "string", "bytes": "int64"}


def _seconds(rng, sizes) -> list[dict]:
    """Batch k: sizes[k] rows of second k of event time."""
    return [{"ts": (k * 1000 + rng.integers(0, 1000, n)).tolist(), "src": [f"h{x}" for x in rng.integers(0, 8, n)],
             "bytes": rng.integers(1, 1500, n).tolist()} for k, n in enumerate(sizes)]


@pytest.fixture(scope="module")
def server():
    from windowstore.server.process import ServerProcess

    with ServerProcess("--append-order-wait-s", "1") as srv:
        yield srv


def _totals(ws: Client, name: str, seconds: int) -> tuple[int, int]:
    """(COUNT(*), SUM(bytes)) over the first `seconds` seconds of event time: a row just after them
    seals them all, and the answer is read once it reflects that slide (the window holds 1,000 s)."""
    end = (seconds + 1) * 1000
    ws.append(name, {"ts": [end], "src": ["end"], "bytes": [0]})
    got = ws.query(f"SELECT COUNT(*), SUM(bytes) FROM {name}", min_slide=seconds, min_slide_wait_ms=30_000)
    assert (got.window_start_ms, got.window_end_ms) == (0, end)
    return got.rows[0]


@pytest.mark.slow
def test_pipelined_batches_are_applied_in_order_with_large_ones_decoded_off_the_loop(server):
    """No lateness: a second applied after a later one would be counted late. Batches over 1 MiB
    are decoded on the server's worker threads, where a later one may finish first."""
    rng = np.random.default_rng(3)
    batches = _seconds(rng, [60_000 if k % 3 == 0 else 500 for k in range(7)])
    with Client(server.target) as ws:
        ws.create_stream("ordered", SCHEMA, 1000, 1000, clock="event")
        results = ws.append_all("ordered", batches, writer_id="w", first_batch_id=0, in_flight=4)
        assert [(r.accepted, r.late, r.duplicate) for r in results] == [(len(b["ts"]), 0, False) for b in batches]
        rows = [b for batch in batches for b in batch["bytes"]]
        assert _totals(ws, "ordered", len(batches)) == (len(rows), sum(rows))


@pytest.mark.slow
def test_a_reset_connection_mid_way_leaves_every_row_counted_once(server):
    from tests.netfault import Fault, Network

    rng = np.random.default_rng(4)
    batches = _seconds(rng, rng.integers(200, 2_000, 60))
    net = Network()
    try:
        port = int(server.target.rsplit(":", 1)[1])
        net.link("writer", "server", port)
        with Client(server.target) as ws, Client(net.address("writer", "server"), retries=6) as writer:
            ws.create_stream("reset", SCHEMA, 1000, 1000, clock="event")

            def taken():  # (taken on the SDK's helper thread, one ahead of the calls in flight)
                for k, b in enumerate(batches):
                    if k == 25:  # the writer's connection reset while the batches before are in flight
                        net.cut("writer", "server", Fault.RESET)
                        threading.Thread(target=heal).start()
                    yield b

            def heal():  # once the writer has tried again across the cut, let its retries through
                try:
                    wait_for(lambda: net.resets >= 2, "the writer's call across the cut", poll=0.005)
                finally:
                    net.heal()
            results = writer.append_all("reset", taken(), writer_id="w", first_batch_id=100, in_flight=4)
            assert net.resets >= 2, "the connection was reset mid-way, and the writer's next one too"
            assert [r.accepted + r.late for r in results] == [len(b["ts"]) for b in batches]
            assert sum(r.late for r in results) == 0
            rows = [b for batch in batches for b in batch["bytes"]]
            assert _totals(ws, "reset", len(batches)) == (len(rows), sum(rows))
            again = writer.append_all("reset", batches[:5], writer_id="w", first_batch_id=100, in_flight=4)
            assert all(r.duplicate for r in again)
    finally:
        net.close()


@pytest.mark.slow
@pytest.mark.parametrize("bad, why", [
    ([2**64] * 300, "cannot turn the batch into columns"),  # no int64: refused by the SDK as it builds the request
    (["x"] * 300, "bytes"),                                 # a string for an int64 column: refused by the server
])
def test_a_refused_batch_is_raised_and_those_after_it_are_not_applied(server, bad, why):
    rng = np.random.default_rng(5)
    batches = _seconds(rng, [300] * 12)
    name = f"refused_{type(bad[0]).__name__}"
    with Client(server.target) as ws:
        ws.create_stream(name, SCHEMA, 1000, 1000, clock="event")
        sent = batches[:6] + [{**batches[6], "bytes": bad}] + batches[7:]
        with pytest.raises(InvalidArgument, match=why):
            ws.append_all(name, sent, writer_id="w", first_batch_id=0, in_flight=4)
        rows = [b for batch in batches[:6] for b in batch["bytes"]]
        assert _totals(ws, name, len(batches)) == (len(rows), sum(rows))


def _raw(batch: dict, stream: str, batch_id: int, after: int | None) -> pb.AppendRequest:
    import pyarrow as pa

    from windowstore.clients.batches import to_ipc

    return pb.AppendRequest(stream=stream, writer_id="w", batch_id=batch_id, after_batch_id=after,
                            arrow_ipc=to_ipc(pa.table(batch)))


@pytest.mark.slow
def test_the_server_holds_a_batch_until_the_one_it_names_and_refuses_it_after_a_refusal(server):
    rng = np.random.default_rng(6)
    first, second, third = _seconds(rng, [100, 100, 100])
    with Client(server.target) as ws, grpc.insecure_channel(server.target) as ch:
        ws.create_stream("held", SCHEMA, 1000, 1000, clock="event")
        stub = pb_grpc.WindowStoreServiceStub(ch)
        later = stub.Append.future(_raw(second, "held", 2, 1), timeout=30)  # sent before the batch it follows
        assert stub.Append(_raw(first, "held", 1, None), timeout=30).accepted_rows == 100
        assert later.result().accepted_rows == 100 and later.result().late_rows == 0
        with pytest.raises(grpc.RpcError) as refused:  # the batch it names was never sent: refused in 1 s
            stub.Append(_raw(third, "held", 9, 8), timeout=30)
        assert refused.value.code() == grpc.StatusCode.ABORTED
        assert "AppendRequest.after_batch_id: batch 8 of writer 'w'" in refused.value.details()
        with pytest.raises(grpc.RpcError) as bad:
            stub.Append(pb.AppendRequest(stream="held", after_batch_id=1, arrow_ipc=b""), timeout=30)
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "AppendRequest.after_batch_id needs a writer_id and a batch_id" in bad.value.details()
        rows = first["bytes"] + second["bytes"]
        assert _totals(ws, "held", 3) == (len(rows), sum(rows))


@pytest.mark.slow
def test_the_asyncio_client_keeps_the_order_with_several_in_flight(server):
    import asyncio

    from windowstore.clients import AsyncClient

    batches = _seconds(np.random.default_rng(7), [400] * 10)

    async def send():
        async with AsyncClient(server.target) as ws:
            await ws.create_stream("async", SCHEMA, 1000, 1000, clock="event")
            return await ws.append_all("async", batches, writer_id="w", first_batch_id=0, in_flight=3)
    results = asyncio.run(send())
    assert [(r.accepted, r.late, r.duplicate) for r in results] == [(400, 0, False)] * 10
    rows = [b for batch in batches for b in batch["bytes"]]
    with Client(server.target) as ws:
        assert _totals(ws, "async", len(batches)) == (len(rows), sum(rows))


def test_several_in_flight_need_the_idempotency_keys():
    from windowstore.clients.client import windowed_requests

    for writer_id, first in (("", 0), ("w", None)):
        with pytest.raises(InvalidArgument, match="in_flight=4 needs a writer_id and a first_batch_id"):
            windowed_requests("s", [], writer_id, first, 4, 3)


async def _turns_until(predicate, most: int = 100) -> None:
    """Let the event loop run the tasks made so far until `predicate()` holds: a poll bounded in
    loop turns, not in time (each turn a future the loop resolves next, so the tasks queued before
    it run first), which ends a test that would otherwise hang."""
    import asyncio

    loop = asyncio.get_running_loop()
    for _ in range(most):
        if predicate():
            return
        turn = loop.create_future()
        loop.call_soon(turn.set_result, None)
        await turn
    raise AssertionError(f"not reached in {most} loop turns")


def test_the_server_s_order_book_wakes_waiters_and_refuses_after_a_refusal():
    import asyncio

    from windowstore.server.append_order import AppendOrder, OutOfOrder

    async def run():
        order = AppendOrder(wait_s=30)
        applied: set = set()
        key = ("s", "w", 1)
        waiting = asyncio.ensure_future(order.after(key, lambda: key in applied))
        await _turns_until(lambda: order.waiters)  # it waits now
        assert not waiting.done()
        order._check()
        applied.add(key)
        order.settled(key, True)
        await waiting  # woken, and the batch it names is applied
        assert not order.waiters
        refused = ("s", "w", 2)
        later = asyncio.ensure_future(order.after(refused, lambda: False))
        await _turns_until(lambda: refused in order.waiters)
        order.settled(refused, False)
        with pytest.raises(OutOfOrder, match="batch 2 of writer 'w'.*was refused"):
            await later
        with pytest.raises(OutOfOrder, match="was refused"):  # one that comes after the refusal too
            await order.after(refused, lambda: False)
        order.arrived(refused)  # an Append of it again: its successors wait for that one
        assert refused not in order.refused
        order._check()
        short = AppendOrder(wait_s=0.01)
        with pytest.raises(OutOfOrder, match="was not appended within 0.01 s"):
            await short.after(("s", "w", 9), lambda: False)
        assert not short.waiters
    asyncio.run(run())


def test_the_appends_held_for_their_predecessor_are_bounded():
    """No queue grows without a bound: Appends waiting for the batch they follow each hold their
    batch, so past `most_waiting` another is refused (RESOURCE_EXHAUSTED, naming the field), and
    the count goes back down as they end."""
    import asyncio

    from windowstore.server.append_order import AppendOrder
    from windowstore.store.errors import ResourceLimit

    async def run():
        order = AppendOrder(wait_s=30, most_waiting=3)
        held = [asyncio.ensure_future(order.after(("s", "w", b), lambda: False)) for b in range(3)]
        await _turns_until(lambda: order.waiting == 3)
        assert order.waiting == 3
        order._check()
        with pytest.raises(ResourceLimit, match="after_batch_id: 3 Appends are already waiting"):
            await order.after(("s", "w", 7), lambda: False)
        for b in range(3):
            order.settled(("s", "w", b), False)
        for h in held:
            with pytest.raises(Exception, match="was refused"):
                await h
        assert order.waiting == 0 and not order.waiters
        order._check()
    asyncio.run(run())
