"""Operator logging through the real CLI: `serve --log-format json` writes one JSON object per
line on stderr for each event an operator acts on, and `text` one line with the same fields."""
from __future__ import annotations

import json

import pytest

from windowstore.clients import Client, NotFound
from windowstore.server.process import ServerProcess

pytestmark = pytest.mark.slow  # servers in subprocesses, or long property runs: make test-fast skips them

SCHEMA = {"ts": "int64", "v": "int64"}


def events(stderr: str) -> list[dict]:
    out = []
    for line in stderr.splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return [e for e in out if "event" in e]


def test_each_operator_event_is_one_json_line(tmp_path):
    srv = ServerProcess("--log-format", "json", "--slow-query-ms", "0", data_dir=str(tmp_path))
    with Client(srv.target, timeout=30) as ws:
        ws.create_stream("s", SCHEMA, subwindows=2, subwindow_ms=1000, clock="manual")
        q = ws.register("SELECT COUNT(*) FROM s [SLIDE 1 s]")
        ws.query("SELECT COUNT(*) FROM s")            # slower than 0 ms: a slow query
        with pytest.raises(NotFound):
            ws.query("SELECT COUNT(*) FROM nope")     # a client error
        ws.unregister(q.id)
        ws.drop_stream("s")
    code, _, err = srv.stop()
    assert code == 0
    seen = events(err)
    names = [e["event"] for e in seen]
    for want in ("recovery_started", "recovered", "stream_created", "query_registered", "slow_query", "client_error",
                 "query_unregistered", "stream_dropped"):
        assert want in names, (want, names)
    by = {e["event"]: e for e in seen}
    assert by["stream_created"]["stream"] == "s" and by["stream_created"]["clock"] == "manual"
    assert by["query_registered"]["query_id"] == q.id and "SELECT COUNT(*) FROM s" in by["query_registered"]["query"]
    assert by["client_error"]["code"] == "NOT_FOUND" and by["client_error"]["method"] == "Query"
    assert "does not exist" in by["client_error"]["message"]
    assert by["slow_query"]["response_ms"] > 0 and by["slow_query"]["streams"] == ["s"]
    assert by["stream_dropped"]["periodic_queries_ended"] == 0 and by["recovered"]["replayed"] == 0
    assert all(e["level"] in ("INFO", "WARNING", "ERROR") and isinstance(e["time"], float) for e in seen)


def test_text_lines_carry_the_same_fields():
    with ServerProcess("--slow-query-ms", "100000") as srv:
        with Client(srv.target, timeout=30) as ws:
            ws.create_stream("ts1", SCHEMA, subwindows=2, subwindow_ms=1000, clock="manual")
            ws.query("SELECT COUNT(*) FROM ts1")
        code, _, err = srv.stop()
    lines = [ln for ln in err.splitlines() if " stream_created " in ln]
    assert len(lines) == 1 and "stream=ts1 clock=manual subwindows=2 subwindow_ms=1000" in lines[0]
    assert " slow_query " not in err  # faster than 100 s


def test_event_times_in_seconds_are_counted_and_warned_of_once():
    import time

    from windowstore.server.service import looks_like_seconds
    import pyarrow as pa

    now_ms = time.time() * 1000
    assert looks_like_seconds(pa.array([int(now_ms // 1000)], pa.int64()), now_ms)
    assert not looks_like_seconds(pa.array([int(now_ms)], pa.int64()), now_ms)          # milliseconds
    assert not looks_like_seconds(pa.array([1, 2, 3], pa.int64()), now_ms)              # small test times
    assert not looks_like_seconds(pa.array([int(now_ms // 1000), int(now_ms)], pa.int64()), now_ms)  # mixed
    assert not looks_like_seconds(pa.array([int(now_ms), int(now_ms // 1000)], pa.int64()), now_ms)  # mixed
    assert looks_like_seconds(pa.chunked_array([[None, int(now_ms // 1000)], [int(now_ms // 1000) - 5]]), now_ms)
    with ServerProcess("--log-format", "json") as srv:
        with Client(srv.target, timeout=30) as ws:
            ws.create_stream("u", SCHEMA, subwindows=2, subwindow_ms=1000)
            seconds = int(time.time())
            for i in range(3):
                ws.append("u", {"ts": [seconds + i], "v": [i]})
            ws.append("u", {"ts": [int(time.time() * 1000)], "v": [9]})
            (st,) = ws.stats("u")["streams"]
        code, _, err = srv.stop()
    assert st["seconds_like_batches"] == 3
    warned = [e for e in events(err) if e["event"] == "event_times_look_like_seconds"]
    assert len(warned) == 1 and warned[0]["stream"] == "u" and warned[0]["level"] == "WARNING"
