"""Durability against a real server process: kill -9 and restart on the same data directory,
torn and damaged logs, snapshots, a full disk, processing-time catch-up."""
from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
import grpc

from conftest import wait_for
from windowstore.clients import Client, FailedPrecondition, Unavailable
from windowstore.server.process import ServerProcess

SCHEMA = {"ts": "int64", "k": "string", "v": "int64"}
QUERIES = ["SELECT k, COUNT(*), SUM(v), MIN(k) FROM s GROUP BY k", "SELECT COUNT(*), SUM(v), MAX(v) FROM s",
           "SELECT MEDIAN(v) FROM s [RANGE 2 SUBWINDOWS]"]


def answers(ws):
    return [ws.query(q).rows for q in QUERIES]


def fill(ws, batches=6):
    ws.create_stream("s", SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual", group_by=["k"])
    for b in range(batches):
        ws.append("s", {"ts": [b * 10 + i for i in range(5)], "k": ["a", "b", "é", "a", "c"][: 5],
                        "v": [2**62, -1, b, 7, 2**62]}, writer_id="w", batch_id=b)
        if b % 2:
            ws.slide("s", writer_id="slider", batch_id=b)


def large_batch(rows: int = 80_000) -> dict[str, dict]:
    """A batch whose payload is over 1 MiB (the server decodes and digests it on a worker thread),
    the same rows in another order, and the batch with one value changed."""
    rng = np.random.default_rng(3)
    big = {"ts": np.sort(rng.integers(0, 1000, rows)), "k": rng.choice(["a", "b", "é", ""], rows).tolist(),
           "v": rng.integers(-2**40, 2**40, rows)}
    order = rng.permutation(rows)
    return {"batch": big, "reordered": {"ts": big["ts"][order], "k": [big["k"][i] for i in order], "v": big["v"][order]},
            "changed": {**big, "v": np.concatenate([big["v"][:1] + 1, big["v"][1:]])}}


def recognised(ws, writer: str, batch_id: int, reordered, changed) -> None:
    """A keyed batch sent again: its rows in another order, a duplicate; one value changed, refused."""
    assert ws.append("s", reordered, writer_id=writer, batch_id=batch_id).duplicate
    with pytest.raises(FailedPrecondition, match="other rows"):
        ws.append("s", changed, writer_id=writer, batch_id=batch_id)


def kill(srv):
    srv.proc.kill()
    srv.proc.wait()


@pytest.mark.slow
def test_acknowledged_writes_survive_kill_9(tmp_path):
    srv = ServerProcess(data_dir=str(tmp_path))
    large = large_batch()
    with Client(srv.target, timeout=30) as ws:
        fill(ws)
        assert not ws.append("s", large["batch"], writer_id="big", batch_id=0).duplicate
        recognised(ws, "big", 0, large["reordered"], large["changed"])
        pid = ws.register("SELECT SUM(v) FROM s [RANGE 2 SUBWINDOWS SLIDE 1 SUBWINDOWS]", key="sum-2")
        before = answers(ws)
        latest = ws.describe_stream("s")["latest_slide"]
        buffered = ws.describe_stream("s")["buffered_rows"]
    kill(srv)
    srv = ServerProcess(data_dir=str(tmp_path))
    try:
        with Client(srv.target, timeout=30) as ws:
            assert answers(ws) == before
            info = ws.describe_stream("s")
            assert (info["latest_slide"], info["buffered_rows"]) == (latest, buffered)
            # the idempotency tables came back: replays are still recognised
            replay = {"ts": [30 + i for i in range(5)], "k": ["a", "b", "é", "a", "c"], "v": [2**62, -1, 3, 7, 2**62]}
            assert ws.append("s", replay, writer_id="w", batch_id=3).duplicate
            # ... in another order too (the digests were logged with the Appends), and other rows are refused
            recognised(ws, "w", 3, {c: v[::-1] for c, v in replay.items()}, {**replay, "v": [2**62, -1, 3, 8, 2**62]})
            recognised(ws, "big", 0, large["reordered"], large["changed"])
            assert ws.slide("s", writer_id="slider", batch_id=5) == 2  # the slide it made the first time
            assert ws.describe_stream("s")["latest_slide"] == latest
            # slide numbers continue; the periodic query kept its id and answers its subscribers
            assert ws.slide("s") == latest + 1
            assert [q["query_id"] for q in ws.list_queries()] == [pid.id]
            # its idempotency key came back with it (the log's Register): sent again, it is the same query
            assert ws.register("SELECT SUM(v) FROM s [RANGE 2 SUBWINDOWS SLIDE 1 SUBWINDOWS]", key="sum-2").id == pid.id
            answers_of = ws.subscribe(pid.id)
            errors = []

            def slide_once_subscribed():
                try:
                    wait_for(lambda: [q["subscribers"] for q in ws.list_queries()] == [1], "the subscription to be open")
                    ws.slide("s")
                except BaseException as e:  # noqa: BLE001
                    errors.append(e)
            slider = threading.Thread(target=slide_once_subscribed)
            slider.start()
            first = next(iter(answers_of))
            slider.join()
            assert not errors, errors
            assert first.query_id == pid.id and first.slide == latest + 2
    finally:
        srv.stop()


@pytest.mark.slow
@pytest.mark.parametrize("snapshots", [False, True])
def test_periodic_answers_survive_kill_9_for_readers_that_resume(tmp_path, snapshots):
    """The answer log is durable state: a reader that resumes after the newest slide it read gets
    the same answers after a kill -9 and restart (from the log, or from a snapshot and the log's
    tail) that it would have got before, then new ones, without gaps or repeats. Shared executions'
    answers (the same panel twice and at another length: one AnsweredMany record per execution,
    docs/sharing.md) come back as they were, too."""
    args = ("--snapshot-every-mb", "0.001") if snapshots else ()
    srv = ServerProcess(*args, "--sharing", "conservative", data_dir=str(tmp_path))
    with Client(srv.target, timeout=30) as ws:
        ws.create_stream("s", {**SCHEMA, "d": "decimal(12,2)"}, subwindows=4, subwindow_ms=1000, clock="manual")
        q = ws.register("SELECT k, COUNT(*), SUM(v), SUM(d), MAX(v) FROM s [RANGE 2 SUBWINDOWS SLIDE 1 SUBWINDOWS] "
                        "GROUP BY k ORDER BY k")
        panels = [ws.register(f"SELECT k, SUM(d), COUNT(*) FROM s [RANGE {n} SUBWINDOWS SLIDE 1 SUBWINDOWS] WHERE v >= 0 "
                              "GROUP BY k ORDER BY k") for n in (2, 2, 3)]
        for b in range(8):
            ws.append("s", {"ts": [b * 10, b * 10 + 1], "k": ["a", None if b % 3 else "é"], "v": [2**62, b],
                            "d": ["1.25", None]})
            ws.slide("s")
            # the query answers each slide in its own time; one that falls behind answers the latest
            # slide only, so the next slide waits for this one's answer
            wait_for(lambda: ws.read_answers(q.id)[1] == b, f"the periodic query's answer for slide {b}")
        kept, newest, oldest = ws.read_answers(q.id)
        assert [a.slide for a in kept] == list(range(8)) and oldest == -1  # -1: the first, over the empty window
        for p in panels:
            wait_for(lambda p=p: ws.read_answers(p.id)[1] == 7, "the panels' answers for slide 7")
        shared = [ws.read_answers(p.id)[0] for p in panels]
        assert all(a.group for a in shared[0][-3:]), "the panels are answered by shared executions"
        ws.append("s", {"ts": [99], "k": ["z"], "v": [0], "d": ["0"]})  # acknowledged: everything before is durable
    kill(srv)
    srv = ServerProcess(data_dir=str(tmp_path))
    try:
        with Client(srv.target, timeout=30) as ws:
            after, newest, first = ws.read_answers(q.id, after_slide=2)
            assert (newest, first) == (7, oldest)
            assert [(a.slide, a.rows, a.window_start_ms, a.window_end_ms, a.execution, a.types) for a in after] == \
                [(a.slide, a.rows, a.window_start_ms, a.window_end_ms, a.execution, a.types) for a in kept[3:]]
            for p, before in zip(panels, shared):
                again = ws.read_answers(p.id)[0]
                assert [(a.slide, a.rows, a.window_start_ms, a.window_end_ms, a.execution, a.group, a.early_slides)
                        for a in again] == \
                    [(a.slide, a.rows, a.window_start_ms, a.window_end_ms, a.execution, a.group, a.early_slides)
                     for a in before], p.id
            ws.slide("s")  # the query goes on: the next answer follows the last one kept
            more, newest, _ = wait_for(lambda: (got := ws.read_answers(q.id, after_slide=7))[0] and got,
                                       "an answer after slide 7")
            assert [a.slide for a in more] == [8]
    finally:
        srv.stop()


@pytest.mark.slow
def test_snapshots_bound_the_log_and_recovery_uses_them(tmp_path):
    # a tiny snapshot threshold: many snapshots, old segments deleted, same answers after kill -9
    srv = ServerProcess("--snapshot-every-mb", "0.001", data_dir=str(tmp_path))
    with Client(srv.target, timeout=30) as ws:
        fill(ws, batches=40)
        before = answers(ws)
        # the last background snapshot finishes by itself: a snapshot is kept and the log before it removed
        wait_for(lambda: any(s.isdigit() for s in os.listdir(tmp_path / "snapshots"))
                 and len(os.listdir(tmp_path / "wal")) <= 3, "a snapshot that leaves at most 3 log segments")
    kill(srv)
    snaps = os.listdir(tmp_path / "snapshots")
    assert len([s for s in snaps if s.isdigit()]) >= 1
    segments = os.listdir(tmp_path / "wal")
    srv = ServerProcess(data_dir=str(tmp_path))
    try:
        with Client(srv.target, timeout=30) as ws:
            assert answers(ws) == before
            # an early batch, remembered by a snapshot: in another order a duplicate, with other rows refused
            replay = {"ts": [30 + i for i in range(5)], "k": ["a", "b", "é", "a", "c"], "v": [2**62, -1, 3, 7, 2**62]}
            recognised(ws, "w", 3, {c: v[::-1] for c, v in replay.items()}, {**replay, "k": ["a", "b", "é", "a", "d"]})
            assert answers(ws) == before
    finally:
        srv.stop()
    assert len(segments) <= 3, segments  # the log does not keep the history
    # a clean shutdown leaves a snapshot and an (almost) empty log
    assert sum(os.path.getsize(tmp_path / "wal" / f) for f in os.listdir(tmp_path / "wal")) < 4096


def _last_segment(path: Path) -> Path:
    return sorted((path / "wal").iterdir())[-1]


@pytest.mark.slow
def test_a_torn_tail_is_truncated_with_a_warning(tmp_path):
    srv = ServerProcess(data_dir=str(tmp_path))
    with Client(srv.target, timeout=30) as ws:
        fill(ws)
        before = answers(ws)
    kill(srv)
    seg = _last_segment(tmp_path)
    with open(seg, "ab") as f:
        f.write(b"\x40\x00\x00\x00garbage-of-a-half-written-record")
    srv = ServerProcess("-v", data_dir=str(tmp_path))
    with Client(srv.target, timeout=30) as ws:
        assert answers(ws) == before
    _, _, err = srv.stop()
    assert "torn tail" in err and seg.name in err


@pytest.mark.slow
def test_a_damaged_record_in_the_middle_stops_start_up(tmp_path):
    srv = ServerProcess(data_dir=str(tmp_path))
    with Client(srv.target, timeout=30) as ws:
        fill(ws)
    kill(srv)
    seg = _last_segment(tmp_path)
    data = bytearray(seg.read_bytes())
    middle = len(data) // 2
    data[middle] ^= 0xFF
    seg.write_bytes(bytes(data))
    with pytest.raises(RuntimeError) as err:
        ServerProcess(data_dir=str(tmp_path))
    assert seg.name in str(err.value) and "offset" in str(err.value) and "damaged record" in str(err.value)


@pytest.mark.slow
def test_a_crash_while_writing_a_snapshot_loses_nothing(tmp_path):
    srv = ServerProcess(data_dir=str(tmp_path))
    with Client(srv.target, timeout=30) as ws:
        fill(ws)
        before = answers(ws)
    kill(srv)
    # what a crash in the middle of writing a snapshot leaves: a partial temporary directory
    tmp = tmp_path / "snapshots" / f"{10**6:020d}.tmp"
    tmp.mkdir(parents=True)
    (tmp / "state.json").write_bytes(b'{"format": 1, "ls')
    srv = ServerProcess(data_dir=str(tmp_path))
    try:
        with Client(srv.target, timeout=30) as ws:
            assert answers(ws) == before
        assert not tmp.exists()
    finally:
        srv.stop()


def _limit_file_size(limit: int):
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


@pytest.mark.slow
def test_a_full_disk_refuses_writes_and_keeps_answering(tmp_path):
    # RLIMIT_FSIZE makes writes past 64 KiB fail with EFBIG, as a full disk fails them
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "windowstore.server.cli", "serve", "--port", "0", "--data-dir",
                             str(tmp_path), "--snapshot-every-mb", "1000"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, preexec_fn=_limit_file_size(64 * 1024))
    first = proc.stdout.readline()
    if "serving on " not in first:  # (say why it did not start, should it ever not)
        proc.kill()
        pytest.fail(f"the server did not start: stdout {first!r}, exit {proc.wait()}, stderr {proc.stderr.read()[-2000:]!r}")
    target = first.split("serving on ")[1].split()[0]
    try:
        with Client(target, timeout=30, retries=0) as ws:
            ws.create_stream("s", SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual")
            acked = 0
            with pytest.raises(Unavailable, match="log"):
                for b in range(1000):
                    ws.append("s", {"ts": list(range(200)), "k": ["x" * 20] * 200, "v": list(range(200))},
                              writer_id="w", batch_id=b)
                    acked += 200
            with pytest.raises(Unavailable, match="refused"):
                ws.slide("s")
            assert ws.query("SELECT COUNT(*) FROM s").rows == [(0,)]  # queries still answered
            assert acked > 0
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    # every acknowledged row is on disk: a restart without the limit has them all
    srv = ServerProcess(data_dir=str(tmp_path))
    try:
        with Client(srv.target, timeout=30) as ws:
            assert ws.describe_stream("s")["buffered_rows"] >= acked
    finally:
        srv.stop()


@pytest.mark.slow
def test_processing_clock_catches_up_after_downtime(tmp_path):
    """Slides fall due at the ends of the wall clock's 100 ms slots. Every slot that ended after the
    old server was dead and before the new one started was missed, and recovery applies it: bounds
    from the clock readings around kill and restart, whatever the load (the sleep only makes some
    slots end while the server is down; the bounds do not depend on its length)."""
    def slot() -> int:
        return int(time.time() * 1000) // 100

    n = 600             # sub-windows: the rows stay in the window for a minute of restart
    srv = ServerProcess(data_dir=str(tmp_path))
    with Client(srv.target, timeout=30) as ws:
        ws.create_stream("p", SCHEMA, subwindows=n, subwindow_ms=100)
        before = ws.describe_stream("p")["latest_slide"]
        ws.append("p", {"ts": [1, 2, 3], "k": ["a", "b", "c"], "v": [1, 2, 3]})
        latest = ws.describe_stream("p")["latest_slide"]   # the rows are sealed into slide before+1 .. latest+1
        read = slot()   # no slide is applied before it is due: latest_slide ends at or before this slot
    kill(srv)
    down = slot()       # the server is dead: it applied no slide due after this slot
    wait_for(lambda: slot() >= down + 10, "ten slots to pass while it is down", poll=0.05)
    up = slot()         # the new server recovers at this slot or later
    assert up - down >= 10
    srv = ServerProcess(data_dir=str(tmp_path))
    try:
        with Client(srv.target, timeout=30) as ws:
            info = ws.describe_stream("p")
            assert info["latest_slide"] >= latest + (up - read)  # slides that fell due while down
            a = ws.query("SELECT COUNT(*) FROM p")   # the buffered rows were sealed, kept (until they expire)
            if a.slide - (before + 1) < n:
                assert a.rows == [(3,)], (a.slide, before, latest)
            elif a.slide - (latest + 1) >= n:
                assert a.rows == [(0,)], (a.slide, before, latest)
            stats = ws.stats("p")["streams"][0]
            assert stats["catch_up_slides"] >= up - down
    finally:
        srv.stop()


@pytest.mark.slow
def test_health_is_serving_after_recovery(tmp_path):
    srv = ServerProcess(data_dir=str(tmp_path))
    try:
        with grpc.insecure_channel(srv.target) as ch:
            resp = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
            assert resp.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        srv.stop()


def test_a_write_whose_deadline_passed_in_the_queue_is_not_applied():
    import pyarrow as pa

    from windowstore.server.config import ServerConfig
    from windowstore.server.driver import DeadlineExceeded, Driver
    from windowstore.store import WindowSpec
    from windowstore.txn.commands import Append, CreateStream

    driver = Driver(ServerConfig(in_memory=True))
    driver.start()
    try:
        driver.command(CreateStream("s", (("ts", "int64"), ("v", "int64")), "ts",
                                    WindowSpec(subwindows=2, subwindow_ms=1000, clock="manual"), 0)).result(10)
        gate = threading.Event()
        busy = driver.call(lambda: gate.wait(30))  # the driver is busy until the gate opens
        late = driver.command(Append("s", pa.table({"ts": [1], "v": [1]}), "w", 1, 0), timeout_s=0.05)
        queued = time.monotonic()  # the write's deadline is at most 0.05 s after this
        wait_for(lambda: time.monotonic() > queued + 0.05, "the queued write's deadline to pass", poll=0.01)
        gate.set()
        assert busy.result(10)
        with pytest.raises(DeadlineExceeded, match="nothing was done"):
            late.result(10)
        assert driver.call(lambda: driver.stream("s").window.buffered_rows).result(10) == 0
        assert driver.call(lambda: driver.engine.books["s"].acks).result(10) == {}  # the key is free
    finally:
        driver.stop(5)


def test_a_snapshot_waits_for_as_much_log_as_the_last_one_held(tmp_path):
    """Snapshots follow the log: after the setting's bytes of log, or once the log since the last
    snapshot is as large as that snapshot (whichever is more), so a large window is not written
    out again every few hundred MB while its replay stays bounded by the state it rebuilds."""
    import pyarrow as pa

    from windowstore.server.durability import Durability
    from windowstore.store import WindowSpec
    from windowstore.txn.commands import Append, CreateStream, Slide
    from windowstore.txn.engine import Engine, EngineConfig

    engine = Engine(EngineConfig())
    dur = Durability(str(tmp_path), fsync="off", snapshot_every_bytes=1)
    engine.apply(CreateStream("s", (("ts", "int64"), ("v", "int64")), "ts",
                              WindowSpec(subwindows=50, subwindow_ms=1000, clock="manual"), 0.0))
    dur.log(engine.drain(), engine, lambda error: None)
    dur.snapshot(engine, wait=True)
    held, log_at = [], []
    for i in range(60):
        engine.apply(Append("s", pa.table({"ts": list(range(2000)), "v": list(range(2000))}), "", None, float(i)))
        engine.apply(Slide("s", float(i)))
        before = dur.snapshots_taken
        dur.log(engine.drain(), engine, lambda error: None)
        dur._thread.join()
        if dur.snapshots_taken > before:
            held.append(dur.snapshots.held_bytes)
            log_at.append(dur.wal.bytes_written)
    assert len(held) >= 3, held  # it does snapshot as the state grows
    for prev_held, prev_log, log in zip(held, log_at, log_at[1:]):
        assert log - prev_log >= prev_held  # never before the log since matched the last snapshot
    dur.close(engine)


def test_a_snapshot_waits_for_a_seal_in_flight_but_not_for_ever(tmp_path, held_seals, caplog):
    """A snapshot is not taken while a slide is being sealed (its Slide is logged, its sub-window
    not yet installed). Past its wait (here none) the seals in flight are sealed on the loop and
    the snapshot taken, so a stream always sealing cannot make the log grow without a bound; the
    seal thread's own result is then discarded, and a restart restores the same state. (The clean
    stop finds nothing logged since that snapshot: it writes none, and reports no failure.)"""
    import pyarrow as pa

    from windowstore.server.config import ServerConfig
    from windowstore.server.driver import Driver
    from windowstore.store import WindowSpec
    from windowstore.txn.commands import Append, CreateStream

    entered, release = held_seals

    def start(clock):
        d = Driver(ServerConfig(data_dir=str(tmp_path), fsync="off", snapshot_every_bytes=1, snapshot_every_s=1e9,
                                seal_offload_rows=1), clock=lambda: clock[0])
        d.start()
        d.recovered.wait(10)
        return d
    clock = [1_000_000.0]
    driver = start(clock)
    try:
        driver.command(CreateStream("s", (("ts", "int64"), ("v", "int64")), "ts",
                                    WindowSpec(subwindows=4, subwindow_ms=1_000_000), 0)).result(10)
        driver.durability.snapshot_wait_s = 3600.0  # first: it waits
        driver.command(Append("s", pa.table({"ts": [1, 2, 3], "v": [1, 2, 3]}), "", None, 0)).result(10)
        stream = driver.run(lambda: driver.stream("s"))

        def written():  # the snapshots started so far, written
            thread = driver.run(lambda: driver.durability._thread)
            if thread is not None:
                thread.join(10)
            return driver.durability.snapshots_taken
        taken = written()
        clock[0] = driver.run(lambda: stream.window.next_due_ms()) + 1
        driver.run(lambda: driver.read(lambda: None))
        assert entered.wait(10)
        driver.command(Append("s", pa.table({"ts": [4], "v": [10]}), "", None, 0)).result(10)
        assert written() == taken and driver.run(lambda: stream.window.latest) == -1
        driver.durability.snapshot_wait_s = 0.0  # now it has waited long enough
        driver.command(Append("s", pa.table({"ts": [5], "v": [100]}), "", None, 0)).result(10)
        assert written() == taken + 1 and driver.run(lambda: stream.window.latest) == 0
        release.set()
        expected = driver.run(lambda: (stream.window.subs[0].rows, stream.window.buffered_rows))
        assert expected == (3, 2)
        digest = driver.run(lambda: driver.engine.digest())
    finally:
        release.set()
        driver.stop(5)
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text
    again = start(clock)
    try:
        assert again.run(lambda: again.engine.digest()) == digest
        assert again.run(lambda: again.durability_stats()["snapshot_lsn"]) > 0
    finally:
        again.stop(5)
