"""The answer cache on a real server, through the SDK (127.0.0.1): a query repeated on an unchanged
window is answered from the cache (the answer says so, the metrics and stats count it), and an
Append and a slide make the next one compute the new window's answer; --answer-cache-entries 0
turns it off."""
from __future__ import annotations

import re
import urllib.request

import duckdb
import pytest

from windowstore.clients import Client
from windowstore.server.process import ServerProcess
from windowstore.txn import check

SCHEMA = {"ts": "int64", "k": "string", "v": "int64"}
QUERIES = [  # (windowstore text, DuckDB over the window's rows)
    ("SELECT SUM(v), COUNT(*) FROM s [RANGE 3 SUBWINDOWS]", "SELECT SUM(v), COUNT(*) FROM t"),
    ("SELECT k, SUM(v) FROM s [RANGE 3 SUBWINDOWS] GROUP BY k ORDER BY 2 DESC, 1 LIMIT 2",
     "SELECT k, SUM(v) FROM t GROUP BY k ORDER BY 2 DESC, 1 LIMIT 2"),
    ("SELECT COUNT(*) FROM s [RANGE 3 SUBWINDOWS] WHERE v > 4", "SELECT COUNT(*) FROM t WHERE v > 4"),
]


def scrape(url: str) -> dict[str, float]:
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return {name: float(value) for name, value in (line.rsplit(" ", 1) for line in text.splitlines()
                                                  if line and not line.startswith("#"))}


def duckdb_answer(sql: str, batches: list[dict]) -> list[tuple]:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (ts BIGINT, k VARCHAR, v BIGINT)")
    rows = [r for b in batches for r in zip(b["ts"], b["k"], b["v"])]
    if rows:
        con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    return [tuple(r) for r in con.execute(sql).fetchall()]


def batch(i: int) -> dict:
    return {"ts": [i] * 5, "k": [f"k{(i + j) % 3}" for j in range(5)], "v": [i + j for j in range(5)]}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = ServerProcess("--metrics-port", "0", data_dir=str(tmp_path_factory.mktemp("cache")))
    yield srv, re.search(r"metrics on (http://[^\s;)]+)", srv.banner).group(1)
    srv.stop()


def test_repeated_queries_hit_and_a_slide_makes_the_next_compute_the_new_window(server):
    srv, url = server
    with Client(srv.target) as ws:
        ws.create_stream("s", SCHEMA, subwindows=5, subwindow_ms=1, clock="manual", group_by=["k"])
        sealed: list[dict] = []
        for i in range(4):
            ws.append("s", batch(i))
            ws.slide("s")
            sealed.append(batch(i))
        before = ws.stats()["answer_cache"]
        for text, sql in QUERIES:
            first = ws.query(text)
            assert not first.cached
            assert not ws.query(text).cached  # a query's first execution is not kept: its second is
            repeats = [ws.query(text) for _ in range(3)]
            assert all(a.cached for a in repeats)
            want = duckdb_answer(sql, sealed[-3:])
            for a in (first, *repeats):
                assert a.rows == want and a.slide == 3
                assert (a.window_start_ms, a.window_end_ms) == (first.window_start_ms, first.window_end_ms)
            assert len({a.query_id for a in (first, *repeats)}) == 4  # a transaction each
        after = ws.stats()["answer_cache"]
        assert after.get("hits", 0) - before.get("hits", 0) == 3 * len(QUERIES)
        assert after["entries"] >= len(QUERIES) and after["bytes"] > 0 and after["max_entries"] == 1024
        # each text's request bytes are known from its first hit on (answered before the engine)
        assert after["requests"] == len(QUERIES)
        metrics = scrape(url)
        assert metrics["windowstore_answer_cache_hits_total"] >= 3 * len(QUERIES)
        assert metrics["windowstore_answer_cache_entries"] >= len(QUERIES)
        assert metrics["windowstore_answer_cache_requests"] == len(QUERIES)

        ws.append("s", batch(10))  # in the open sub-window: the window is unchanged, still a hit
        assert all(ws.query(text).cached for text, _ in QUERIES)
        ws.slide("s")
        sealed.append(batch(10))
        for text, sql in QUERIES:
            a = ws.query(text)
            assert not a.cached and a.slide == 4 and a.rows == duckdb_answer(sql, sealed[-3:])
            assert ws.query(text).cached

        # the history of the hits passes the checker with the rest
        report = check(ws.history("s"))
        assert report.errors == [] and report.violations("lws") == []

        ws.drop_stream("s")
        ws.create_stream("s", SCHEMA, subwindows=5, subwindow_ms=1, clock="manual", group_by=["k"])
        ws.append("s", batch(20))
        ws.slide("s")
        text, sql = QUERIES[0]
        a = ws.query(text)
        assert not a.cached and a.rows == duckdb_answer(sql, [batch(20)])


def test_zero_entries_turns_the_cache_off(tmp_path):
    srv = ServerProcess("--answer-cache-entries", "0", data_dir=str(tmp_path))
    try:
        with Client(srv.target) as ws:
            ws.create_stream("s", SCHEMA, subwindows=5, subwindow_ms=1, clock="manual")
            ws.append("s", batch(1))
            ws.slide("s")
            answers = [ws.query(QUERIES[0][0]) for _ in range(3)]
            assert not any(a.cached for a in answers) and len({tuple(a.rows) for a in answers}) == 1
            ac = ws.stats()["answer_cache"]
            assert ac.get("hits", 0) == 0 and ac.get("max_entries", 0) == 0
    finally:
        srv.stop()


# -- a request known by its bytes (service.Query's _answer_known) ---------------------------------------

class FakeClock:
    def __init__(self, ms: float):
        self.ms = ms

    def __call__(self) -> float:
        return self.ms


PER_CALL = ("query_id", "answered_ms", "staleness_ms", "response_ms", "cached")


def per_query(answer):
    """An Answer without the fields of its call: what a computed answer and a cache's share."""
    out = type(answer)()
    out.CopyFrom(answer)
    for name in PER_CALL:
        out.ClearField(name)
    return out


def test_a_known_request_is_answered_from_its_bytes_as_the_computed_path_answers_until_its_window_changes():
    """In process, through rpc.py's Query method on the driver's loop, the clock injected: a request
    repeated with the same bytes is answered without being decoded (Driver.answer_known answers it)
    with the message the computed path gave for the same window, byte for byte but for the call's
    own fields; never after the window changed (an Append and the processing-time slide the clock
    makes due; the stream dropped and created again); the history with these answers checks."""
    import asyncio

    import pyarrow as pa

    from windowstore.server import rpc
    from windowstore.server.config import ServerConfig
    from windowstore.server.driver import Driver
    from windowstore.server.service import WindowStoreService
    from windowstore.store import WindowSpec
    from windowstore.txn.commands import Append, CreateStream, DropStream
    from windowstore.v1 import windowstore_pb2 as pb

    class Details:
        method = f"/{rpc.SERVICE.full_name}/Query"
        invocation_metadata = ()

    class Context:
        def peer(self):
            return "ipv4:127.0.0.1:1"

        def invocation_metadata(self):
            return ()

    period = 1_000_000.0  # (no slide timer fires during the test: the clock is moved by hand)
    clock = FakeClock(period)
    driver = Driver(ServerConfig(in_memory=True), clock=clock)
    driver.start()
    known = []  # per call: whether a noted request was answered from its bytes (absent: not noted)
    answer_known = driver.answer_known

    def spy(key):
        txn = answer_known(key)
        known.append(txn is not None)
        return txn
    driver.answer_known = spy  # type: ignore[method-assign]  # (the service calls it by attribute)
    method = rpc.handlers(WindowStoreService(driver), None).service(Details())

    def call(text: str) -> pb.Answer:
        async def one():
            return method.response_serializer(await method.unary_unary(method.request_deserializer(
                pb.QueryRequest(text=text).SerializeToString()), Context()))
        known.clear()
        reply = asyncio.run_coroutine_threadsafe(one(), driver.loop).result(30)
        assert isinstance(reply, bytes)
        return pb.QueryResponse.FromString(reply).answer

    def create():
        spec = WindowSpec(subwindows=5, subwindow_ms=int(period), group_by=("k",))
        driver.command(CreateStream("s", tuple(SCHEMA.items()), "ts", spec, clock.ms)).result(10)

    def append(b):
        driver.command(Append("s", pa.table({k: pa.array(v, pa.string() if k == "k" else pa.int64())
                                             for k, v in b.items()}), "", None, clock.ms)).result(10)
    try:
        create()
        sealed: list[dict] = []
        for i in range(4):
            append(batch(i))
            sealed.append(batch(i))
            clock.ms += period  # its slide falls due on the clock: applied by the next call
            call("SELECT MAX(v) FROM s [RANGE 1 SUBWINDOWS]")
        for text, sql in QUERIES:
            computed = call(text)
            assert not computed.cached and known == []  # (not noted: not looked at)
            call(text)  # (kept from the second execution on)
            call(text)  # a hit of the engine's cache: the request is noted
            assert known == []
            for _ in range(2):
                fast = call(text)
                assert known == [True] and fast.cached and fast.query_id != computed.query_id
                assert per_query(fast).SerializeToString(deterministic=True) == \
                    per_query(computed).SerializeToString(deterministic=True)
                assert [tuple(v.ListFields()[0][1] for v in r.values) for r in fast.rows] == \
                    duckdb_answer(sql, sealed[-3:])
                assert (fast.answered_ms, fast.staleness_ms) == (computed.answered_ms, computed.staleness_ms) == \
                    (clock.ms, 0.0)  # (the newest slide was sealed at this clock time)
        clock.ms += 5.0
        fast = call(QUERIES[0][0])
        assert known == [True] and (fast.answered_ms, fast.staleness_ms) == (clock.ms, 5.0)  # the call's own

        append(batch(10))  # into the open sub-window: the window is unchanged, still known
        assert call(QUERIES[0][0]).cached and known == [True]
        clock.ms += period  # the slide is due: not answered from the old window
        a = call(QUERIES[0][0])
        assert known == [False] and not a.cached and a.slide == 4  # (noted, and refused: computed)
        sealed.append(batch(10))
        assert [(r.values[0].int64_value, r.values[1].int64_value) for r in a.rows] == \
            duckdb_answer(QUERIES[0][1], sealed[-3:])

        driver.command(DropStream("s", clock.ms)).result(10)
        create()
        append(batch(20))
        clock.ms += period
        a = call(QUERIES[0][0])
        assert known == [] and not a.cached  # (its entry went with the stream, its request too)
        assert [(r.values[0].int64_value, r.values[1].int64_value) for r in a.rows] == \
            duckdb_answer(QUERIES[0][1], [batch(20)])

        events = driver.run(lambda: driver.history.since(0, "s", 100_000))
        # (the checker knows one stream per name: each generation is judged apart, the second from its T0)
        last = max(e["seq"] for e in events if e["txn"] == "T4")
        second = min(e["seq"] for e in events if e["txn"] == "T0" and e["seq"] > last)
        for part in ([e for e in events if e["seq"] < second], [e for e in events if e["seq"] >= second]):
            report = check(part)
            assert report.errors == [] and report.violations("lws") == []
        assert sum(e["op"] == "c" and e["txn"].startswith("Q") for e in events) >= 20
    finally:
        driver.stop(5)


def test_a_known_request_is_refused_to_a_principal_without_read_permission(tmp_path):
    """The same bytes from a principal who may not read the stream get PERMISSION_DENIED, never the
    answer another principal's call left known."""
    import json

    from windowstore.clients.errors import PermissionDenied
    from windowstore.server.security import token_hash

    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": {token_hash("t-admin"): "admin", token_hash("t-reader"): "reader",
                                             token_hash("t-other"): "other"},
                                  "grants": {"admin": {"*": ["admin"]}, "reader": {"s": ["read"]},
                                             "other": {"elsewhere": ["read"]}}}))
    srv = ServerProcess("--tokens", str(tokens), data_dir=str(tmp_path / "data"))
    try:
        with Client(srv.target, token="t-admin", timeout=10) as admin:
            admin.create_stream("s", SCHEMA, subwindows=5, subwindow_ms=1, clock="manual")
            admin.append("s", batch(1))
            admin.slide("s")
        text = QUERIES[0][0]
        with Client(srv.target, token="t-reader", timeout=10) as reader, \
                Client(srv.target, token="t-other", timeout=10, retries=0) as other:
            answers = [reader.query(text) for _ in range(5)]  # the third noted, the fourth on known
            assert [a.cached for a in answers] == [False, False, True, True, True]
            for _ in range(2):
                with pytest.raises(PermissionDenied, match="'other' may not read stream 's'"):
                    other.query(text)
            assert reader.query(text).cached
            hits = reader.stats()["answer_cache"]["hits"]
        assert hits == 4  # the refused calls were not answered, nor counted
    finally:
        srv.stop()
