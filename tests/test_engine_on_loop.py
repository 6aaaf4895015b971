"""The engine runs on the server's event loop (server/driver/): a slide that is due is applied
before a read that arrives after its due time, and the scheduler's multi-step work runs one
operation per loop callback, so other calls are answered between its operations."""
from __future__ import annotations

import asyncio
import threading
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from conftest import wait_for
from windowstore.clients import Client
from windowstore.server.app import WindowStoreServer
from windowstore.server.config import ServerConfig
from windowstore.server.driver import Driver
from windowstore.store import WindowSpec
from windowstore.txn.commands import Append, CreateStream


class FakeClock:
    def __init__(self, ms: float):
        self.ms = ms

    def __call__(self) -> float:
        return self.ms


def test_a_due_slide_is_applied_before_a_read_that_arrives_after_its_due_time():
    import pyarrow as pa

    clock = FakeClock(1_000_000.0)
    driver = Driver(ServerConfig(in_memory=True), clock=clock)
    driver.start()
    try:
        # processing time, 1,000 s sub-windows: no timer fires during the test
        driver.command(CreateStream("s", (("ts", "int64"), ("v", "int64")), "ts",
                                    WindowSpec(subwindows=4, subwindow_ms=1_000_000), 0)).result(10)
        driver.command(Append("s", pa.table({"ts": [1, 2, 3], "v": [1, 2, 3]}), "", None, 0)).result(10)
        stream = driver.run(lambda: driver.stream("s"))
        due = driver.run(lambda: stream.window.next_due_ms())
        before = driver.run(lambda: (stream.window.latest, stream.window.buffered_rows))

        def read_after_due():
            # one loop callback: the clock passes the due time and a read comes in, with no timer or
            # scheduler callback in between; the read sees the slide applied
            clock.ms = due + 1
            return driver.read(lambda: (stream.window.latest, stream.window.buffered_rows,
                                        sum(s.rows for s in stream.window.youngest(stream.window.n))))
        latest, buffered, window_rows = driver.run(read_after_due)
        assert (latest, buffered, window_rows) == (before[0] + 1, 0, 3)
        events = driver.run(lambda: driver.history.since(0, "s", 100))
        assert [e["op"] for e in events if e["txn"] == f"T{latest}"] == ["w", "c"]
    finally:
        driver.stop(5)


def test_the_servers_own_writes_are_not_shed_when_clients_writes_are():
    """--max-pending pushes back on clients; a write the server makes of its own (a step-down's
    Unregister of the periodic queries it no longer serves, replication/manager.py) is applied
    even then, or the query would stay registered on a follower, answering unread."""
    from windowstore.store.errors import ResourceLimit
    from windowstore.txn.commands import Register, Unregister

    driver = Driver(ServerConfig(in_memory=True), clock=FakeClock(1_000_000.0))
    driver.start()
    try:
        driver.command(CreateStream("s", (("ts", "int64"), ("v", "int64")), "ts",
                                    WindowSpec(subwindows=4, subwindow_ms=1_000_000), 0)).result(10)
        qid = driver.command(Register("", "SELECT COUNT(*) FROM s [SLIDE 1 SUBWINDOWS]", 0, 1.0)).result(10).task.id

        def overloaded():  # (on the loop: calls from other threads are shed too)
            limit, driver.config.max_pending = driver.config.max_pending, 0  # every client request shed
            try:
                with pytest.raises(ResourceLimit, match="overloaded"):
                    driver.write(Unregister(qid, 0.0))
                shed_kept = qid in driver.engine.periodic
                driver.write(Unregister(qid, 0.0), own=True)
                return shed_kept, qid in driver.engine.periodic
            finally:
                driver.config.max_pending = limit
        assert driver.run(overloaded) == (True, False)
    finally:
        driver.stop(5)


@pytest.fixture
def server():
    srv = WindowStoreServer(ServerConfig(port=0, in_memory=True)).start()
    try:
        yield srv
    finally:
        srv.stop(5)


def test_calls_are_answered_between_the_operations_of_a_long_query(server):
    """A query that takes many scheduler operations (held here until released) does not keep
    health checks, stats and writes from being answered between its operations."""
    sched = server.driver.engine.sched
    advance = sched._advance
    hold = threading.Event()
    held = threading.Event()
    ops_while_held = []

    def gated_advance(txn):
        if hold.is_set():
            held.set()
            ops_while_held.append(1)
            return "read"  # an operation of the long query: it is not done yet
        return advance(txn)
    sched._advance = gated_advance

    with Client(server.address, timeout=30) as ws:
        ws.create_stream("s", {"ts": "int64", "v": "int64"}, subwindows=8, subwindow_ms=1000, clock="manual")
        for i in range(8):
            ws.append("s", {"ts": [i, i + 1], "v": [i, i + 1]})
            ws.slide("s")
        hold.set()
        answer = {}
        q = threading.Thread(target=lambda: answer.setdefault("rows", ws.query("SELECT COUNT(*) FROM s WHERE v > 0").rows))
        q.start()
        assert held.wait(30), "the query never reached the scheduler"
        with grpc.insecure_channel(server.address) as ch:
            reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=30)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        stats = ws.stats("s")
        assert stats["streams"][0]["slides"] == 8
        assert ws.append("s", {"ts": [100], "v": [100]}).accepted == 1
        assert "rows" not in answer and q.is_alive()  # the query was still running all along
        n = len(ops_while_held)
        hold.clear()
        q.join(30)
        assert answer["rows"] == [(15,)]  # v > 0 in the window: 2 rows per slide, v=0 excluded
        assert n > 1


def test_a_slide_is_applied_while_a_final_merge_runs_on_the_query_thread(monkeypatch):
    """A window scan's final merge runs on the query thread (held here until released): a slide
    that falls due meanwhile is applied at once, not after the merge; the merge's result then no
    longer reflects the latest window, so the query (ttu) restarts and answers over the new one."""
    import pyarrow as pa

    from windowstore.store import parse_query
    from windowstore.store.functions import Quantile
    from windowstore.txn import check

    entered, release = threading.Event(), threading.Event()
    finish = Quantile.finish

    def held_finish(self, b, parts, strings):
        if not release.is_set():
            entered.set()
            release.wait(10)
        return finish(self, b, parts, strings)
    monkeypatch.setattr(Quantile, "finish", held_finish)

    clock = FakeClock(1_000_000.0)
    driver = Driver(ServerConfig(in_memory=True, offload_ms=0), clock=clock)
    driver.start()
    try:
        driver.command(CreateStream("s", (("ts", "int64"), ("v", "int64")), "ts",
                                    WindowSpec(subwindows=4, subwindow_ms=1_000_000), 0)).result(10)
        stream = driver.run(lambda: driver.stream("s"))

        def slide_with(v):
            driver.command(Append("s", pa.table({"ts": [int(clock.ms)], "v": [v]}), "", None, 0)).result(10)
            clock.ms = driver.run(lambda: stream.window.next_due_ms()) + 1
            return driver.run(lambda: driver.read(lambda: stream.window.latest))
        for v in range(4):
            slide_with(v)
        txn, _ = driver.run(lambda: driver.submit(parse_query("SELECT MEDIAN(v), COUNT(*) FROM s"), 0))
        assert entered.wait(10), "the final merge did not start"
        before = driver.run(lambda: stream.window.latest)
        assert slide_with(10) == before + 1  # applied while the merge is held
        assert not driver.run(lambda: txn.done)
        release.set()
        wait_for(lambda: driver.run(lambda: txn.done), "the query to finish")
        assert txn.result is not None and txn.result.restarts == 1
        assert txn.result.answer.rows == [(2, 4)]  # 1, 2, 3, 10
        events = driver.run(lambda: driver.history.since(0, "s", 1000))
        assert check(events).violations("lws") == []
    finally:
        release.set()
        driver.stop(5)


def test_a_seal_runs_off_the_loop_while_appends_and_other_streams_go_on(held_seals):
    """A slide's seal on the seal thread is held there: meanwhile an append to its stream is
    acknowledged (for the next slide), a query of another stream is answered, and a query of its
    stream waits (--wait-for-seals; by default it reads what is installed, test_read_during_seal);
    released, the sub-window is installed and that query reflects it."""
    import pyarrow as pa

    from windowstore.store import parse_query
    from windowstore.txn import check

    entered, release = held_seals

    clock = FakeClock(1_000_000.0)
    driver = Driver(ServerConfig(in_memory=True, seal_offload_rows=3, read_during_seal=False),  # cuts of 3 rows and more
                    clock=clock)
    driver.start()
    try:
        for name in ("a", "b"):
            driver.command(CreateStream(name, (("ts", "int64"), ("v", "int64")), "ts",
                                        WindowSpec(subwindows=4, subwindow_ms=1_000_000), 0)).result(10)
        driver.command(Append("a", pa.table({"ts": [1, 2, 3], "v": [1, 2, 3]}), "", None, 0)).result(10)
        driver.command(Append("b", pa.table({"ts": [1], "v": [7]}), "", None, 0)).result(10)
        a, b = driver.run(lambda: (driver.stream("a"), driver.stream("b")))
        clock.ms = driver.run(lambda: a.window.next_due_ms()) + 1
        driver.run(lambda: driver.read(lambda: None))  # the due slides: a's is cut and sealed elsewhere
        assert entered.wait(10), "the seal did not start on the seal thread"
        assert driver.run(lambda: (a.window.latest, a.window.cut_through, b.window.latest)) == (-1, 0, 0)
        ack = driver.command(Append("a", pa.table({"ts": [4], "v": [100]}), "", None, 0)).result(10)
        assert ack.accepted == 1 and ack.latest_slide == 0  # slide 0 has begun: this row is in slide 1
        def answered(txn) -> bool:
            return wait_for(lambda: driver.run(lambda: txn.done), "the query to be answered")
        mine, _ = driver.run(lambda: driver.submit(parse_query("SELECT SUM(v), COUNT(*) FROM a"), 0))
        other, _ = driver.run(lambda: driver.submit(parse_query("SELECT SUM(v), COUNT(*) FROM b"), 0))
        assert answered(other) and other.result.answer.rows == [(7, 1)]
        assert not driver.run(lambda: mine.done) and entered.is_set()  # waits for the install
        clock.ms += 30_000  # a seal that does not come back: health counts it as no progress
        assert driver.stuck_for() >= 30.0
        release.set()
        assert answered(mine)
        assert mine.result.answer.rows == [(6, 3)] and mine.result.slide == 0  # not the row appended meanwhile
        assert driver.run(lambda: (a.window.latest, a.window.buffered_rows)) == (0, 1)
        assert driver.run(lambda: driver.stats("a"))["streams"][0]["seal_ms"]["count"] == 1
        assert driver.stuck_for() < 30.0
        events = driver.run(lambda: driver.history.since(0, None, 1000))
        assert check(events).violations("lws") == []
    finally:
        release.set()
        driver.stop(5)


def test_a_stream_whose_seal_raises_stops_alone_and_a_restart_seals_that_slide_from_the_log(tmp_path, monkeypatch):
    """Over gRPC: the Slide whose seal raises answers FAILED_PRECONDITION saying why, as do the
    stream's later writes and queries; the other stream is served; health says NOT_SERVING. After
    a restart on the same data directory (the defect gone) the slide is sealed again from the log
    and every acknowledged row is there."""
    import urllib.request

    import numpy as np

    from windowstore.clients import FailedPrecondition
    from windowstore.store.window import Window

    seal_cut = Window.seal_cut

    def broken_seal(self, cut):
        if any(np.any(chunk["v"] == 666) for chunk in cut.chunks):
            raise RuntimeError("a defect met row 666")
        return seal_cut(self, cut)
    monkeypatch.setattr(Window, "seal_cut", broken_seal)

    def health(address):
        with grpc.insecure_channel(address) as ch:
            return health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=30).status

    schema = {"ts": "int64", "v": "int64"}
    config = ServerConfig(port=0, data_dir=str(tmp_path), metrics_port=0)
    srv = WindowStoreServer(config).start()
    try:
        with Client(srv.address, timeout=30) as ws:
            for name, v in (("bad", 666), ("good", 2)):
                ws.create_stream(name, schema, subwindows=4, subwindow_ms=1000, clock="manual")
                ws.append(name, {"ts": [1, 2], "v": [1, v]}, writer_id="w", batch_id=1)
            assert ws.slide("good") == 0
            with pytest.raises(FailedPrecondition, match="stream 'bad' stopped: sealing its slide 0 failed "
                                                         r"\(RuntimeError: a defect met row 666\)"):
                ws.slide("bad")
            with pytest.raises(FailedPrecondition, match="stopped"):
                ws.append("bad", {"ts": [3], "v": [3]})
            with pytest.raises(FailedPrecondition, match="drop the stream, or restart"):
                ws.query("SELECT COUNT(*) FROM bad")
            assert ws.query("SELECT COUNT(*), SUM(v) FROM good").rows == [(2, 3)]
            wait_for(lambda: health(srv.address) == health_pb2.HealthCheckResponse.NOT_SERVING,
                     "health to report NOT_SERVING")
            assert ws.describe_stream("bad")["latest_slide"] == -1  # introspection still answers
            stopped = {st["stream"]: st["stopped"] for st in ws.stats()["streams"]}
            assert stopped["good"] is None and "sealing its slide 0 failed" in stopped["bad"]
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{srv.metrics_port}/metrics", timeout=10).read().decode()
        assert 'windowstore_stream_stopped{stream="bad"} 1.0' in metrics
        assert 'windowstore_stream_stopped{stream="good"} 0.0' in metrics
    finally:
        srv.stop(5)
    monkeypatch.undo()
    srv = WindowStoreServer(config).start()
    try:
        with Client(srv.address, timeout=30) as ws:
            assert ws.query("SELECT COUNT(*), SUM(v) FROM bad").rows == [(2, 667)]
            assert ws.append("bad", {"ts": [1, 2], "v": [1, 666]}, writer_id="w", batch_id=1).duplicate  # its ack too
            assert ws.slide("bad") == 1
        assert health(srv.address) == health_pb2.HealthCheckResponse.SERVING
    finally:
        srv.stop(5)


async def _next_loop_turn() -> None:
    """Let every callback already scheduled on the running loop run first (a turn of the loop,
    not a wait for time or for a condition)."""
    turn = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(turn.set_result, None)
    await turn


def test_concurrent_callers_on_the_loop_are_each_answered_in_their_call_and_exactly():
    """Sixteen callers on the server's loop, as grpc.aio runs sixteen concurrent calls: each probe
    is answered in its own call (Driver.submit gives no future to wait on: no scheduler step and no
    loop round trip), which is the path the server takes under a load generator's concurrency
    (docs/performance.md, Round 22), and each answer is the sum over the window's rows."""
    import pyarrow as pa

    from windowstore.store.kinds import Clock
    from windowstore.store.parser import parse_statement
    from windowstore.txn.commands import Slide

    driver = Driver(ServerConfig(in_memory=True))
    driver.start()
    try:
        driver.command(CreateStream("s", (("ts", "int64"), ("v", "int64")), "ts",
                                    WindowSpec(subwindows=4, subwindow_ms=1000, clock=Clock.MANUAL), 0)).result(10)
        appended = []
        for i in range(6):  # six slides of a four-sub-window window: the last four are in it
            rows = [i * 10 + k for k in range(5)]
            appended.append(rows)
            driver.command(Append("s", pa.table({"ts": [0] * 5, "v": rows}), "", None, 0)).result(10)
            driver.command(Slide("s", 0)).result(10)
        want = sum(sum(rows) for rows in appended[-4:])
        query = parse_statement("SELECT SUM(v) FROM s")

        async def callers():
            paths, answers = [], []

            async def caller():
                for _ in range(20):
                    txn, done = driver.submit(query, 0)
                    paths.append(done is None)
                    answers.append((await done if done is not None else txn.result).answer.rows)
                    await _next_loop_turn()  # (the other callers run before this one goes on: calls interleave)
            await asyncio.gather(*(caller() for _ in range(16)))
            return paths, answers
        paths, answers = asyncio.run_coroutine_threadsafe(callers(), driver.loop).result(60)
        assert len(paths) == 16 * 20 and all(paths)
        assert answers == [[(want,)]] * (16 * 20)
    finally:
        driver.stop(5)


def test_writes_that_make_no_slide_due_by_the_clock_do_not_arm_a_timer_each():
    """With no processing-time slide scheduled the stepper keeps one wake-up armed (at most a second
    ahead); it used to cancel it and arm a new one after every write, a loop timer per Append
    (docs/performance.md, Round 23). Event-time slides still happen: writes make them due."""
    import pyarrow as pa

    from windowstore.store.kinds import Clock

    driver = Driver(ServerConfig(in_memory=True))
    driver.start()
    try:
        driver.command(CreateStream("s", (("ts", "int64"), ("v", "int64")), "ts",
                                    WindowSpec(subwindows=4, subwindow_ms=1000, clock=Clock.EVENT), 0)).result(10)
        driver.run(lambda: None)  # the create's step has run and armed its wake-up
        armed = []
        loop = driver.loop
        real_call_later = loop.call_later

        def counting_call_later(delay, callback, *args, **kwargs):
            armed.append(delay)
            return real_call_later(delay, callback, *args, **kwargs)
        driver.run(lambda: setattr(loop, "call_later", counting_call_later))
        began = time.monotonic()
        for i in range(100):  # five seconds of event time, twenty batches a second
            driver.command(Append("s", pa.table({"ts": [i * 50 + k for k in range(5)], "v": [1] * 5}),
                                  "", None, 0)).result(10)
        # seconds 0-3 slide (second 4 is open), by event time alone
        wait_for(lambda: driver.run(lambda: driver.stream("s").window.latest) == 3, "the event-time slides")
        driver.run(lambda: delattr(loop, "call_later"))
        # the wake-up is armed again when it fires, once a second: not once per write (100)
        assert len(armed) <= 1 + int(time.monotonic() - began), armed
    finally:
        driver.stop(5)
