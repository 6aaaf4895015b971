"""Integration: a real server process on loopback, used only through the SDK."""
from __future__ import annotations

import asyncio
import filecmp
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import grpc
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from conftest import wait_for
from reference import answer, same
from windowstore.server.app import WindowStoreServer
from windowstore.server.config import ServerConfig
from windowstore.server.process import ServerProcess
from windowstore.clients import (AlreadyExists, AsyncClient, Client, DeadlineExceeded, FailedPrecondition,
                                 InvalidArgument, NotFound, ResourceExhausted, Unavailable)
from windowstore.store import parse_query
from windowstore.txn import check

SCHEMA = {"ts": "int64", "src": "string", "bytes": "int64", "lat": "float64"}
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--max-rows-per-batch", "50000", "--max-subscribers", "4", "--max-message-mb", "4") as s:
        yield s


@pytest.fixture
def ws(server):
    with Client(server.target, timeout=30) as c:
        yield c


_names = iter(range(10**6))


def fresh(ws, **kw) -> str:
    name = f"s{next(_names)}"
    args = dict(schema=SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual", group_by=["src"])
    args.update(kw)
    ws.create_stream(name, **args)
    return name


def rows_of(batch) -> list[dict]:
    return [dict(zip(batch, vals)) for vals in zip(*batch.values())]


@pytest.mark.slow
def test_round_trips_equal_a_brute_force_reference(ws):
    name = fresh(ws)
    rng = np.random.default_rng(3)
    subwindows = []
    for j in range(6):
        n = int(rng.integers(0, 40))
        batch = {"ts": (j * 1000 + rng.integers(0, 1000, n)).tolist(), "src": [f"h{x}" for x in rng.integers(0, 5, n)],
                 "bytes": rng.integers(1, 1500, n).tolist(), "lat": rng.random(n).round(3).tolist()}
        # every accepted batch form: dict of lists, NumPy, pandas, pyarrow, plain protobuf
        form = j % 5
        if form == 1:
            sent = {k: np.asarray(v) for k, v in batch.items()}
        elif form == 2:
            sent = pd.DataFrame(batch)
        elif form == 3:
            sent = pa.table(batch)
        else:
            sent = batch
        if form == 4:
            r = ws.append(name, batch, columnar_types=SCHEMA)
        else:
            r = ws.append(name, sent)
        assert (r.accepted, r.late, r.duplicate) == (n, 0, False)
        assert ws.slide(name) == j
        subwindows.append(rows_of(batch))
    for text in [
        "SELECT COUNT(*), SUM(bytes), MIN(lat), MAX(bytes), AVG(bytes) FROM {s}",
        "SELECT src, SUM(bytes), COUNT(*) FROM {s} [RANGE 2 s] GROUP BY src ORDER BY 2 DESC LIMIT 3",
        "SELECT src, MEDIAN(lat), COUNT(DISTINCT bytes) FROM {s} WHERE bytes > 500 OR src IN ('h1', 'h2') GROUP BY src",
        "SELECT QUANTILE(total, 0.9), MAX(total) FROM (SELECT src, SUM(bytes) AS total FROM {s} [RANGE 3 s] GROUP BY src)",
        "SELECT COUNT(*) FROM {s} [RANGE 1 SUBWINDOWS] WHERE lat < 0.5 AND src != 'h0'",
    ]:
        q = parse_query(text.format(s=name))
        k = q.range.value // 1000 if q.range and q.range.unit == "ms" else (q.range.value if q.range else 4)
        expected = answer(q, [r for sub in subwindows[-k:] for r in sub])
        a = ws.query(text.format(s=name))
        assert same(a.rows, expected), (text, a.rows, expected)
        assert a.slide == 5 and a.policy == "ttu" and a.restarts == 0 and a.staleness_ms >= 0
        assert a.window_end_ms >= a.window_start_ms
    a = ws.query(f"SELECT src, SUM(bytes) FROM {name} GROUP BY src")
    assert a.to_pandas().shape == (len(a.rows), 2) and a.to_arrow().num_rows == len(a.rows)
    info = ws.describe_stream(name)
    assert info["latest_slide"] == "5" or info["latest_slide"] == 5


def test_replayed_batches_are_ignored(ws):
    name = fresh(ws)
    batch = {"ts": [1, 2], "src": ["a", "b"], "bytes": [10, 20], "lat": [0.1, 0.2]}
    first = ws.append(name, batch, writer_id="w1", batch_id=7)
    again = ws.append(name, batch, writer_id="w1", batch_id=7)
    other = ws.append(name, batch, writer_id="w2", batch_id=7)
    assert (first.duplicate, again.duplicate, other.duplicate) == (False, True, False)
    assert again.accepted == first.accepted == 2
    assert ws.slide(name, writer_id="w1", batch_id=7) == 0
    assert ws.slide(name, writer_id="w1", batch_id=7) == 0      # a replayed slide does not slide again
    assert ws.describe_stream(name)["latest_slide"] in ("0", 0)
    assert ws.query(f"SELECT COUNT(*), SUM(bytes) FROM {name}").rows == [(4, 60)]
    st = ws.stats(name)["streams"][0]
    assert int(st["duplicate_batches"]) == 1 and int(st["accepted_rows"]) == 4
    # a key names one batch: other rows under it are refused, never acknowledged
    with pytest.raises(FailedPrecondition, match="other rows"):
        ws.append(name, {**batch, "bytes": [10, 21]}, writer_id="w1", batch_id=7)
    assert ws.query(f"SELECT COUNT(*), SUM(bytes) FROM {name}").rows == [(4, 60)]


@pytest.mark.slow
def test_every_bad_input_gets_its_status_and_the_server_keeps_serving(ws):
    name = fresh(ws)
    cases = [
        (InvalidArgument, "unknown type", lambda: ws.create_stream("x1", {"ts": "int64", "a": "int128"}, 4, 1000)),
        (InvalidArgument, "exactly one", lambda: ws.create_stream("x2", SCHEMA, 4)),
        (AlreadyExists, "already exists", lambda: ws.create_stream(name, SCHEMA, 4, 1000)),
        (NotFound, "does not exist", lambda: ws.append("nope", {"ts": [1]})),
        (InvalidArgument, "missing column 'src'", lambda: ws.append(name, {"ts": [1], "bytes": [1], "lat": [1.0]})),
        (InvalidArgument, "'bytes' must be int64", lambda: ws.append(name, {"ts": [1], "src": ["a"], "bytes": [1.5], "lat": [1.0]})),
        (InvalidArgument, "may not be null", lambda: ws.append(name, {"ts": [None], "src": ["a"], "bytes": [1], "lat": [1.0]})),
        (ResourceExhausted, "exceeds the limit", lambda: ws.append(name, {"ts": np.zeros(60_000, np.int64), "src": ["a"] * 60_000,
                                                                           "bytes": np.zeros(60_000, np.int64), "lat": np.zeros(60_000)})),
        (ResourceExhausted, "", lambda: ws.append(name, {"ts": np.zeros(10, np.int64), "src": [f"{i}" + "x" * 500_000 for i in range(10)],
                                                         "bytes": np.zeros(10, np.int64), "lat": np.zeros(10)})),
        (InvalidArgument, "position 16", lambda: ws.query(f"SELECT COUNT(*) FORM {name}")),
        (InvalidArgument, "window holds 4", lambda: ws.query(f"SELECT COUNT(*) FROM {name} [RANGE 5 s]")),
        (InvalidArgument, "unknown column 'nope'", lambda: ws.query(f"SELECT SUM(nope) FROM {name}")),
        (NotFound, "does not exist", lambda: ws.query("SELECT COUNT(*) FROM missing")),
        (InvalidArgument, "periodic", lambda: ws.query(f"SELECT COUNT(*) FROM {name} [RANGE 2 s SLIDE 1 s]")),
        (InvalidArgument, "needs SLIDE", lambda: ws.register(f"SELECT COUNT(*) FROM {name}")),
        (NotFound, "does not exist", lambda: ws.unregister("P999999")),
        (NotFound, "does not exist", lambda: next(ws.subscribe("P999999"))),
        (NotFound, "does not exist", lambda: ws.drop_stream("nope")),
    ]
    for cls, text, call in cases:
        with pytest.raises(cls) as err:
            call()
        assert text in err.value.message, (cls, text, err.value.message)
    proc = fresh(ws, clock="processing")
    with pytest.raises(FailedPrecondition, match="clock='manual'"):
        ws.slide(proc)
    # nothing above changed the window
    ws.append(name, {"ts": [1], "src": ["a"], "bytes": [5], "lat": [1.0]})
    ws.slide(name)
    assert ws.query(f"SELECT COUNT(*), SUM(bytes) FROM {name}").rows == [(1, 5)]


def test_garbage_arrow_bytes_are_refused(server):
    from windowstore.v1 import windowstore_pb2 as pb, windowstore_pb2_grpc as pb_grpc
    with grpc.insecure_channel(server.target) as ch:
        stub = pb_grpc.WindowStoreServiceStub(ch)
        with Client(server.target) as ws:
            name = fresh(ws)
        for req in (pb.AppendRequest(stream=name, arrow_ipc=b"\x00garbage"), pb.AppendRequest(stream=name),
                    pb.AppendRequest(stream=name, arrow_ipc=b"", writer_id="", batch_id=3)):
            with pytest.raises(grpc.RpcError) as err:
                stub.Append(req)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_payloads_decoded_on_the_loop_and_on_the_decode_threads_land_alike(server):
    """Arrow payloads over 1 MiB are decoded on a worker thread, smaller ones on the event loop, and
    columnar batches by their own path: every kind lands whole, and garbage of either size is
    INVALID_ARGUMENT."""
    from windowstore.v1 import windowstore_pb2 as pb, windowstore_pb2_grpc as pb_grpc
    rng = np.random.default_rng(5)

    def batch(n):
        return {"ts": np.arange(n, dtype=np.int64), "src": [f"k{i % 97}" for i in range(n)],
                "bytes": rng.integers(0, 1000, n), "lat": rng.random(n)}
    big, small = batch(45_000), batch(300)
    with Client(server.target, timeout=30) as ws:
        name = fresh(ws)
        from windowstore.clients.batches import to_arrow, to_ipc
        assert len(to_ipc(to_arrow(big))) > 1 << 20 > len(to_ipc(to_arrow(small)))  # either side of the threshold
        ws.append(name, big)
        ws.append(name, small)
        ws.append(name, small, columnar_types=SCHEMA)
        ws.slide(name)
        got = ws.query(f"SELECT COUNT(*), SUM(bytes), COUNT(DISTINCT src) FROM {name}").rows[0]
        assert got == (45_600, int(big["bytes"].sum()) + 2 * int(small["bytes"].sum()), 97)
    with grpc.insecure_channel(server.target, options=[("grpc.max_send_message_length", 8 << 20)]) as ch:
        stub = pb_grpc.WindowStoreServiceStub(ch)
        for garbage in (b"\x01" * 100, b"\x01" * (2 << 20)):
            with pytest.raises(grpc.RpcError) as err:
                stub.Append(pb.AppendRequest(stream=name, arrow_ipc=garbage))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "Arrow IPC" in err.value.details()


def test_undecodable_request_bodies_are_invalid_argument(server):
    """Bytes that are not a valid message (a truncated field, invalid UTF-8 in a string) get
    INVALID_ARGUMENT naming the message type, from every method, never grpc's INTERNAL."""
    from windowstore.v1 import windowstore_pb2 as pb
    service = pb.DESCRIPTOR.services_by_name["WindowStoreService"]
    bodies = [b"\x0a\x05ab", b"\x0a\x02\xff\xfe", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"]
    with grpc.insecure_channel(server.target) as ch:
        for method in service.methods:
            path = f"/{service.full_name}/{method.name}"
            call = (ch.unary_stream if method.server_streaming else ch.unary_unary)(path)
            for body in bodies:
                try:  # (invalid UTF-8 in field 1 is fine where field 1 is not a string)
                    getattr(pb, method.input_type.name).FromString(body)
                    continue
                except Exception:  # noqa: BLE001 - not a valid message: what this test sends
                    pass
                with pytest.raises(grpc.RpcError) as err:
                    out = call(body, timeout=10)
                    if method.server_streaming:
                        list(out)
                assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (method.name, body, err.value)
                assert f"not a valid {method.input_type.full_name} message" in err.value.details()


@pytest.mark.slow
def test_compressed_arrow_is_sized_before_it_is_decompressed():
    """A small zstd payload that would decompress past --max-decompressed-mb is refused with
    RESOURCE_EXHAUSTED (the server never inflates it); one under the bound is appended."""
    import pyarrow as pa
    from windowstore.v1 import windowstore_pb2 as pb, windowstore_pb2_grpc as pb_grpc

    def ipc(rows: int) -> bytes:
        t = pa.table({"ts": pa.array(np.zeros(rows, np.int64)), "src": pa.array(["a"] * rows).dictionary_encode(),
                      "bytes": pa.array(np.zeros(rows, np.int64)), "lat": pa.array(np.zeros(rows))})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, t.schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
            w.write_table(t)
        return sink.getvalue().to_pybytes()
    with ServerProcess("--max-decompressed-mb", "8") as server, Client(server.target) as ws:
        ws.create_stream("z", SCHEMA, 4, 1000, clock="manual")
        big = ipc(400_000)  # 3 x 3.2 MB of zeros + 400k dictionary indices: ~11 MB inflated
        assert len(big) < 200_000
        with grpc.insecure_channel(server.target) as ch:
            stub = pb_grpc.WindowStoreServiceStub(ch)
            with pytest.raises(grpc.RpcError) as err:
                stub.Append(pb.AppendRequest(stream="z", arrow_ipc=big), timeout=10)
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "would decompress to more than 8 MiB" in err.value.details()
            assert stub.Append(pb.AppendRequest(stream="z", arrow_ipc=ipc(1_000)), timeout=10).accepted_rows == 1_000
        ws.slide("z")
        assert ws.query("SELECT COUNT(*) FROM z").rows == [(1_000,)]


def _seconds(rng, sizes) -> list[dict]:
    """One batch of rows per second of event time (second k: sizes[k] rows)."""
    return [{"ts": (k * 1000 + rng.integers(0, 1000, n)).tolist(), "src": [f"h{x}" for x in rng.integers(0, 4, n)],
             "bytes": rng.integers(1, 1500, n).tolist(), "lat": rng.random(n).tolist()} for k, n in enumerate(sizes)]


def test_append_all_applies_the_batches_in_the_order_given(ws):
    rng = np.random.default_rng(5)
    batches = _seconds(rng, (30, 12, 40, 1, 17, 25, 3))
    name = fresh(ws, clock="event")  # no lateness: a second applied after a later one is late
    results = ws.append_all(name, iter(batches))
    assert [(r.accepted, r.late, r.duplicate) for r in results] == [(len(b["ts"]), 0, False) for b in batches]
    a = ws.query(f"SELECT src, COUNT(*), SUM(bytes) FROM {name} GROUP BY src ORDER BY src")
    rows = [r for b in batches for r in rows_of(b) if a.window_start_ms <= r["ts"] < a.window_end_ms]
    assert a.window_end_ms > a.window_start_ms and rows
    assert a.rows == [(s, sum(r["src"] == s for r in rows), sum(r["bytes"] for r in rows if r["src"] == s))
                      for s in sorted({r["src"] for r in rows})]
    backwards = fresh(ws, clock="event")  # newest second first: every batch after the first is late
    results = ws.append_all(backwards, reversed(batches))
    assert [(r.accepted, r.late) for r in results] == [(3, 0)] + [(0, len(b["ts"])) for b in reversed(batches[:-1])]


def test_append_all_stops_at_the_first_refused_batch(ws):
    name = fresh(ws)
    good = {"ts": [1, 2], "src": ["a", "b"], "bytes": [10, 20], "lat": [0.1, 0.2]}
    taken = []

    def batches():
        for b in (good, {**good, "bytes": [1, 2**64]}, good, good):
            taken.append(b)
            yield b
    with pytest.raises(InvalidArgument, match="cannot turn the batch into columns"):
        ws.append_all(name, batches(), writer_id="w", first_batch_id=5)
    assert len(taken) <= 3  # at most the one after it was taken (built ahead), none sent
    assert ws.append(name, good, writer_id="w", batch_id=5).duplicate  # the first went as batch 5
    ws.slide(name)
    assert ws.query(f"SELECT COUNT(*), SUM(bytes) FROM {name}").rows == [(2, 30)]
    again = ws.append_all(name, [good, good], writer_id="w", first_batch_id=5)  # batch 5 again, then batch 6
    assert [(r.accepted, r.duplicate) for r in again] == [(2, True), (2, False)]
    ws.slide(name)
    assert ws.query(f"SELECT COUNT(*), SUM(bytes) FROM {name}").rows == [(4, 60)]


def test_the_sdk_raises_its_typed_error_for_values_protobuf_or_arrow_refuse(ws):
    name = fresh(ws)
    row = {"ts": [1], "src": ["a"], "bytes": [1], "lat": [1.0]}
    cases = [
        ("StreamSpec.subwindows = -1", lambda: ws.create_stream("x", SCHEMA, -1, 1000)),
        ("StreamSpec.subwindows = 3.0", lambda: ws.create_stream("x", SCHEMA, 3.0, 1000)),
        ("StreamSpec.subwindow_ms = 18446744073709551616", lambda: ws.create_stream("x", SCHEMA, 2, 2**64)),
        ("StreamSpec.name = '\\ud800'", lambda: ws.create_stream("\ud800", SCHEMA, 2, 1000)),
        ("AppendRequest.batch_id = 9223372036854775808", lambda: ws.append(name, row, writer_id="w", batch_id=2**63)),
        ("cannot turn the batch into columns", lambda: ws.append(name, {**row, "bytes": [2**64]})),
        ("column 'bytes' (int64)", lambda: ws.append(name, {**row, "bytes": [2**63]}, columnar_types=SCHEMA)),
        ("column 'bytes' (int64)", lambda: ws.append(name, {**row, "bytes": ["x"]}, columnar_types=SCHEMA)),
        ("SlideRequest.batch_id", lambda: ws.slide(name, writer_id="w", batch_id=-2**63 - 1)),
        ("QueryRequest.priority = 2147483648", lambda: ws.query(f"SELECT COUNT(*) FROM {name}", priority=2**31)),
        ("StreamHistoryRequest.since_seq = -1", lambda: ws.history(name, since_seq=-1)),
        ("AttemptRows.rows", lambda: ws.commit_batch(name, "w", 1, {"a": 2**63})),
    ]
    for text, call in cases:
        with pytest.raises(InvalidArgument) as err:
            call()
        assert text in err.value.message, (text, err.value.message)


@pytest.mark.slow
def test_deadline_withdraws_the_query(ws, server):
    name = fresh(ws, subwindows=50)
    big = {"ts": np.arange(40_000), "src": [f"k{i % 977}" for i in range(40_000)],
           "bytes": np.arange(40_000), "lat": np.random.default_rng(0).random(40_000)}
    for _ in range(50):
        ws.append(name, big)
        ws.slide(name)
    seq = ws.history(name)[-1]["seq"] + 1
    with pytest.raises(DeadlineExceeded):
        ws.query(f"SELECT src, MEDIAN(lat), COUNT(DISTINCT lat) FROM {name} WHERE bytes > 3 GROUP BY src", timeout=0.01)
    assert ws.query(f"SELECT COUNT(*) FROM {name}").rows == [(2_000_000,)]
    # the scan had begun (b, and reads) and was withdrawn (a) when the deadline passed: never committed
    events = ws.history(name, since_seq=seq)
    scan = events[0]["txn"]
    assert events[0]["op"] == "b" and [e["op"] for e in events if e["txn"] == scan][-1] == "a"


class FakeClock:
    def __init__(self, ms: float):
        self.ms = ms

    def __call__(self) -> float:
        return self.ms


@pytest.fixture
def clocked():
    """(client, clock): an in-process server whose processing clock is the test's, so a
    processing-time slide falls due exactly when the test moves the clock past its slot's end."""
    clock = FakeClock(1_000_000_000.0)   # a multiple of every sub-window length the tests use
    srv = WindowStoreServer(ServerConfig(port=0, in_memory=True))
    srv.driver.clock = clock             # (the server passes no clock to its Driver; set it before start)
    srv.start()
    try:
        with Client(srv.address, timeout=30) as c:
            yield c, clock
    finally:
        srv.stop(5)


def test_processing_time_slides_are_all_applied_under_50_concurrent_queries(clocked):
    """50 clients query a processing-time stream while it is fed and its clock moves one
    sub-window at a time: every slide that falls due is applied, once, and every reader is answered.
    (How late slides are under load is a timing figure: `make bench` measures it, "slide delay
    while 100 queries run".)"""
    ws, clock = clocked
    name = fresh(ws, subwindows=20, subwindow_ms=50, clock="processing")
    steps, n = 30, 2000
    done, errors = threading.Event(), []
    answered = [threading.Event() for _ in range(50)]

    def reader(k):
        try:
            with Client(ws.target) as c:
                while not done.is_set():
                    c.query(f"SELECT src, SUM(bytes), MEDIAN(bytes) FROM {name} [RANGE {1 + k % 20} SUBWINDOWS] "
                            "WHERE bytes > 10 GROUP BY src ORDER BY 2 DESC LIMIT 5")
                    answered[k].set()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    before = ws.stats(name)["streams"][0]
    latest = ws.describe_stream(name)["latest_slide"]
    threads = [threading.Thread(target=reader, args=(k,)) for k in range(50)]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: errors or all(e.is_set() for e in answered), "every reader's first answer")
        for i in range(steps):   # a batch, then the clock passes the end of its sub-window
            ws.append(name, {"ts": np.full(n, int(clock.ms)), "src": [f"h{(i + k) % 50}" for k in range(n)],
                             "bytes": np.arange(n), "lat": np.ones(n)})
            clock.ms += 50
            wait_for(lambda: errors or ws.describe_stream(name)["latest_slide"] == latest + i + 1,
                     f"slide {latest + i + 1}")
    finally:
        done.set()
        for t in threads:
            t.join()
    assert not errors, errors[:3]
    st = ws.stats(name)["streams"][0]
    slides = int(st["slides"]) - int(before["slides"])
    assert slides == steps and ws.describe_stream(name)["latest_slide"] == latest + steps   # none missed, none twice
    assert ws.query(f"SELECT COUNT(*) FROM {name}").rows == [(20 * n,)]   # the 20 youngest batches, each sealed once
    assert int(st["queries"]) >= 50                   # every reader was answered
    assert st["slide_delay_ms"]["count"] >= slides    # the delay was measured for every slide


def test_periodic_answers_arrive_every_slide(clocked):
    """A periodic query with SLIDE two sub-windows is answered at every second slide, none
    skipped, as the slide is applied: on the server's clock, the answers are 200 ms apart and none
    is stale (the test moves the clock one sub-window at a time, once the query has caught up)."""
    ws, clock = clocked
    name = fresh(ws, subwindows=10, subwindow_ms=100, clock="processing")
    q = ws.register(f"SELECT src, SUM(bytes) FROM {name} [RANGE 500 ms SLIDE 200 ms] GROUP BY src")
    assert q.every_slides == 2
    got, errors = [], []

    def subscriber():
        try:
            for a in ws.subscribe(q.id):
                got.append(a)
                if len(got) == 6:
                    return
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    sub = threading.Thread(target=subscriber)
    sub.start()
    wait_for(lambda: ws.list_queries(name)[0]["subscribers"] == 1, "the subscription to be open")
    latest = ws.describe_stream(name)["latest_slide"]
    sent = []
    while len(got) < 6 and not errors and latest < 100:
        row = {"ts": [int(clock.ms)], "src": ["a" if latest % 3 else "b"], "bytes": [latest], "lat": [0.0]}
        ws.append(name, row)
        sent.append(row)
        clock.ms += 100
        latest += 1
        wait_for(lambda: ws.describe_stream(name)["latest_slide"] == latest, f"slide {latest}")
        # the query caught up: it answered this slide, or it is not due before the next one
        wait_for(lambda: ws.list_queries(name)[0]["last_slide"] >= latest - 1, f"the answer due by slide {latest}")
        wait_for(lambda: errors or not got or got[-1].slide == ws.list_queries(name)[0]["last_slide"],
                 f"the subscriber to get the answer by slide {latest}")
    sub.join(30)
    assert not errors and len(got) == 6, (errors, len(got))
    slides = [a.slide for a in got]
    assert all(b - a == 2 for a, b in zip(slides, slides[1:])), slides   # every SLIDE, none skipped
    assert [b.answered_ms - a.answered_ms for a, b in zip(got, got[1:])] == [200.0] * 5
    assert [a.staleness_ms for a in got] == [0.0] * 6                     # answered as its slide was applied
    assert all(a.late_slides == 0 for a in got[1:]), [a.late_slides for a in got]
    listed = {x["query_id"]: x for x in ws.list_queries(name)}
    assert int(listed[q.id]["executions"]) >= 6
    ws.unregister(q.id)
    assert ws.list_queries(name) == []


def test_a_subscription_after_a_slide_gets_the_kept_answers_first_then_the_live_ones(ws):
    """SubscribeRequest.after_slide: the answers the query's log keeps for later slides come first,
    then the live ones, each slide once. Without it a subscription hears only what is published
    after it opens, so a registration's first answer (due at once) is not among them: what a
    subscription resumed after a failover must not lose (follow.Resubscribing)."""
    name = fresh(ws)
    row = {"ts": [0], "src": ["a"], "bytes": [1], "lat": [0.0]}
    ws.append(name, row)
    ws.slide(name)
    q = ws.register(f"SELECT COUNT(*) FROM {name} [SLIDE 1 SUBWINDOWS]")
    for _ in range(2):
        ws.append(name, row)
        ws.slide(name)
    latest = ws.describe_stream(name)["latest_slide"]
    kept = wait_for(lambda: (lambda got: got if got and got[-1].slide == latest else None)(ws.read_answers(q.id)[0]),
                    f"the answer for slide {latest}")
    assert [a.slide for a in kept] == [0, 1, 2] and [a.rows for a in kept] == [[(1,)], [(2,)], [(3,)]]
    live = ws.subscription(q.id)  # (open at once: subscribe() opens its call at the first next())
    every, after_first = ws.subscribe(q.id, after_slide=-1), ws.subscribe(q.id, after_slide=0)
    assert [(a.slide, a.rows) for a in (next(every), next(every), next(every))] == [(a.slide, a.rows) for a in kept]
    assert [next(after_first).slide, next(after_first).slide] == [1, 2]
    wait_for(lambda: ws.list_queries(name)[0]["subscribers"] == 3, "the three subscriptions to be open")
    ws.append(name, row)
    assert ws.slide(name) == 3
    assert (next(every).slide, next(after_first).slide, next(iter(live)).slide) == (3, 3, 3)  # then the live ones
    live.cancel()
    ws.unregister(q.id)
    assert list(every) == [] and list(after_first) == []  # each kept slide once: nothing more queued


def test_subscriber_limit_and_unregister_ends_the_stream(ws):
    name = fresh(ws, subwindows=4, subwindow_ms=50, clock="processing")
    q = ws.register(f"SELECT COUNT(*) FROM {name} [SLIDE 50 ms]")
    streams = [ws.subscribe(q.id) for _ in range(4)]
    firsts = [next(s) for s in streams]          # four subscribers, the limit
    assert all(a.query_id == q.id for a in firsts)
    with pytest.raises(ResourceExhausted):
        next(ws.subscribe(q.id))
    ws.unregister(q.id)
    for s, first in zip(streams, firsts):
        rest = list(s)    # the stream ends (no error, no wait for its deadline) after its queued answers
        assert all(a.query_id == q.id and a.rows == [(0,)] for a in rest), rest
        slides = [a.slide for a in [first] + rest]
        assert slides == sorted(set(slides)), slides   # each queued answer once, in slide order
    assert ws.list_queries(name) == []


@pytest.mark.slow
def test_a_registration_sent_again_with_its_key_is_the_same_query(ws, server):
    """RegisterQueryRequest.request_key: the same request again (a retry after UNAVAILABLE whose
    first attempt was applied) answers the query it registered; the key with another query is
    INVALID_ARGUMENT naming the field, as is a key over 200 characters. The SDK sets a new key per
    register() call, so two calls are two queries."""
    from windowstore.v1 import windowstore_pb2 as pb, windowstore_pb2_grpc as pb_grpc

    name = fresh(ws)
    text = f"SELECT COUNT(*) FROM {name} [SLIDE 1 SUBWINDOWS]"
    with grpc.insecure_channel(server.target) as ch:
        stub = pb_grpc.WindowStoreServiceStub(ch)
        first = stub.RegisterQuery(pb.RegisterQueryRequest(text=text, request_key="dash-7"), timeout=30)
        again = stub.RegisterQuery(pb.RegisterQueryRequest(text=text, request_key="dash-7"), timeout=30)
        assert again.query_id == first.query_id
        assert [q["query_id"] for q in ws.list_queries(name)] == [first.query_id]
        for request, why in ((pb.RegisterQueryRequest(text=text.replace("COUNT(*)", "SUM(bytes)"), request_key="dash-7"),
                              "request_key 'dash-7' is the key of periodic query"),
                             (pb.RegisterQueryRequest(text=text, request_key="k" * 201), "request_key is 201 characters")):
            with pytest.raises(grpc.RpcError) as e:
                stub.RegisterQuery(request, timeout=30)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and why in e.value.details()
    two = [ws.register(text).id for _ in range(2)]
    assert len(set(two + [first.query_id])) == 3
    assert ws.register(text, key="dash-7").id == first.query_id
    for qid in two + [first.query_id]:
        ws.unregister(qid)
    assert ws.list_queries(name) == []


@pytest.mark.slow
def test_ttu_history_is_lws_while_queries_and_slides_interleave(ws):
    """Queries and processing-time slides interleave under load (the load goes on until the history
    shows more than 50 verdicts and an attempt that saw a slide between its begin and its end, however
    long that takes): the history is latest-window serializable."""
    name = fresh(ws, subwindows=30, subwindow_ms=20, clock="processing")
    stop = threading.Event()

    def load():
        with Client(ws.target) as c:
            while not stop.is_set():
                c.append(name, {"ts": np.zeros(3000, np.int64), "src": [f"h{i % 97}" for i in range(3000)],
                                "bytes": np.arange(3000), "lat": np.zeros(3000)})
                c.query(f"SELECT src, SUM(bytes), MEDIAN(bytes) FROM {name} WHERE bytes > 5 GROUP BY src")

    def history():
        return [e for e in ws.history(limit=1_000_000) if e["stream"] == name]

    def interleaved(events) -> int:
        """Slides applied while some query attempt was open (between its begin and commit or abort)."""
        open_, n = set(), 0
        for e in events:
            if e["op"] == "b":
                open_.add(e["txn"])
            elif e["op"] in ("c", "a") and e["txn"] in open_:
                open_.discard(e["txn"])
            elif e["op"] == "w":
                n += len(open_)
        return n

    threads = [threading.Thread(target=load) for _ in range(8)]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: (events := history()) and len(check(events).verdicts) > 50 and interleaved(events) > 0,
                 "more than 50 verdicts and a query that saw a slide", timeout=120, poll=0.5)
    finally:
        stop.set()
        for t in threads:
            t.join()
    events = history()
    report = check(events)
    assert report.errors == [] and report.violations("lws") == []
    assert len(report.verdicts) > 50
    assert interleaved(events) > 0   # queries really did interleave with slides


def test_async_client_round_trip(server):
    async def main():
        async with AsyncClient(server.target) as ws:
            name = f"a{next(_names)}"
            await ws.create_stream(name, SCHEMA, subwindows=2, subwindow_ms=10, clock="manual", group_by=["src"])
            r = await ws.append(name, {"ts": [1, 2], "src": ["a", "a"], "bytes": [3, 4], "lat": [0.5, 1.5]},
                                writer_id="w", batch_id=1)
            assert r.accepted == 2
            assert await ws.slide(name) == 0
            a = await ws.query(f"SELECT src, SUM(bytes), AVG(lat) FROM {name} GROUP BY src")
            assert a.rows == [("a", 7, 1.0)] and a.access == "synopsis"
            assert (await ws.stats(name))["streams"][0]["stream"] == name
            with pytest.raises(NotFound):
                await ws.query("SELECT COUNT(*) FROM nope")
    asyncio.run(main())


def test_health_and_reflection_are_served(server):
    with grpc.insecure_channel(server.target) as ch:
        resp = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service="windowstore.v1.WindowStoreService"))
        assert resp.status == health_pb2.HealthCheckResponse.SERVING
        from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
        stub = reflection_pb2_grpc.ServerReflectionStub(ch)
        replies = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
        names = {s.name for r in replies for s in r.list_services_response.service}
        assert "windowstore.v1.WindowStoreService" in names


@pytest.mark.slow
def test_sigterm_shuts_down_gracefully_and_tells_subscribers():
    srv = ServerProcess()
    with Client(srv.target) as ws:
        ws.create_stream("g", SCHEMA, subwindows=4, subwindow_ms=50, clock="processing")
        q = ws.register("SELECT COUNT(*) FROM g [SLIDE 50 ms]")
        sub = ws.subscribe(q.id)
        next(sub)
        code, out, err = srv.stop()
        with pytest.raises(Unavailable):
            for _ in range(100):
                next(sub)
    assert code == 0 and "stopped" in out
    assert "Traceback" not in err, err


def test_generated_modules_are_not_stale():
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT / 'proto'}", f"--python_out={tmp}",
                        f"--pyi_out={tmp}", f"--grpc_python_out={tmp}", str(ROOT / "proto/windowstore/v1/windowstore.proto")],
                       check=True)
        for f in ("windowstore_pb2.py", "windowstore_pb2.pyi", "windowstore_pb2_grpc.py"):
            assert filecmp.cmp(Path(tmp) / "windowstore/v1" / f, ROOT / "proto/windowstore/v1" / f, shallow=False), \
                f"{f} is stale: run `make proto`"


def test_history_pages_continue_where_they_stopped(ws):
    name = fresh(ws)
    for _ in range(3):
        ws.append(name, {"ts": [1], "src": ["a"], "bytes": [1], "lat": [0.0]})
        ws.slide(name)
    ws.query(f"SELECT COUNT(*) FROM {name}")
    from windowstore.v1 import windowstore_pb2 as pb
    first = ws._stub.StreamHistory(pb.StreamHistoryRequest(stream=name, limit=4))
    rest = ws._stub.StreamHistory(pb.StreamHistoryRequest(stream=name, since_seq=first.next_seq))
    events = list(first.events) + list(rest.events)
    assert [e.op for e in events] == ["w", "c"] * 3 + ["b", "r", "r", "r", "c"]   # a probe reads all three
    again = ws._stub.StreamHistory(pb.StreamHistoryRequest(stream=name, since_seq=rest.next_seq))
    assert list(again.events) == [] and again.next_seq == rest.next_seq


def test_event_times_given_as_datetimes_arrive_as_milliseconds(ws):
    """pandas datetime64, Python datetimes and NumPy datetime64 in the event-time column are taken
    as times: int64 ms since the epoch, floor of any finer part (as Spark's timestamps are)."""
    import datetime as dt

    name = fresh(ws, group_by=[])
    t = dt.datetime(2026, 11, 27, 12, 0, 0, 123456, tzinfo=dt.timezone.utc)
    ms = int(t.timestamp() * 1000)
    frame = pd.DataFrame({"ts": [pd.Timestamp(t)], "src": ["a"], "bytes": [1], "lat": [0.5]})
    ws.append(name, frame)
    ws.append(name, {"ts": [t, t + dt.timedelta(milliseconds=1)], "src": ["b", "b"], "bytes": [2, 3], "lat": [1.0, 1.5]})
    ws.append(name, {"ts": np.array([np.datetime64(t.replace(tzinfo=None), "us")]), "src": ["c"], "bytes": [4],
                     "lat": [2.0]})
    ws.slide(name)
    assert ws.query(f"SELECT MIN(ts), MAX(ts), COUNT(*) FROM {name}").rows == [(ms, ms + 1, 4)]


def test_create_stream_with_exist_ok_returns_the_same_stream_and_refuses_another(ws):
    name = fresh(ws)
    again = ws.create_stream(name, SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual", group_by=["src"],
                             exist_ok=True)
    assert again["spec"]["name"] == name and again["latest_slide"] == -1
    with pytest.raises(AlreadyExists, match="exists with another definition: subwindows 4, not 5"):
        ws.create_stream(name, SCHEMA, subwindows=5, subwindow_ms=1000, clock="manual", group_by=["src"],
                         exist_ok=True)
