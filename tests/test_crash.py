"""Crash safety against a real server process: the harness in tests/crash.py, bounded.

It kills `windowstore serve` with SIGKILL at random moments (during start-up, mid-workload, with
a big batch in flight, while a snapshot or a new log segment is being written, when idle),
restarts it on the same data directory and verifies after every restart that no acknowledged
write was lost or duplicated, in-doubt writes resolve exactly once when re-sent with their
idempotency key, slide numbers never go backwards, exact aggregates match a reference, and
acknowledged periodic queries keep their ids. The fsync policy varies per start (always,
interval, off: a process kill loses nothing under any of them). `make crash` runs it at length.
"""
from __future__ import annotations

import pytest

import crash
from windowstore.clients import Client
from windowstore.server.process import ServerProcess


@pytest.mark.slow
def test_kill_9_loses_and_duplicates_nothing(tmp_path):
    res = crash.run(kills=6, seed=4, fsync="mixed", workdir=str(tmp_path / "crash"), out=None)
    assert (res.passed, res.failed) == (6, 0), res.report
    assert res.clean_restart == "passed", res.report
    # the servers' output reached server.log: each verified restart logged its recovery
    recovered = crash.recoveries(str(tmp_path / "crash" / "server.log"))
    assert int(recovered.split()[0]) >= res.verifications, recovered


@pytest.mark.slow
def test_writes_are_acknowledged_after_a_clean_restart(tmp_path):
    """A clean shutdown (SIGTERM) followed by a start: the store must take writes again."""
    schema = {"ts": "int64", "v": "int64"}
    srv = ServerProcess(data_dir=str(tmp_path))
    try:
        with Client(srv.target, timeout=30, retries=0) as ws:
            ws.create_stream("s", schema, subwindows=4, subwindow_ms=1000, clock="manual")
            ws.append("s", {"ts": [1], "v": [1]}, writer_id="w", batch_id=1)
    finally:
        assert srv.stop()[0] == 0
    srv = ServerProcess(data_dir=str(tmp_path))
    try:
        with Client(srv.target, timeout=30, retries=0) as ws:
            assert not ws.append("s", {"ts": [2], "v": [2]}, writer_id="w", batch_id=2).duplicate
            assert ws.append("s", {"ts": [1], "v": [1]}, writer_id="w", batch_id=1).duplicate
            ws.slide("s", writer_id="w", batch_id=3)
            assert ws.query("SELECT COUNT(*), SUM(v) FROM s").rows == [(2, 3)]
    finally:
        srv.stop()
