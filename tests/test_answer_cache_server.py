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
        metrics = scrape(url)
        assert metrics["windowstore_answer_cache_hits_total"] >= 3 * len(QUERIES)
        assert metrics["windowstore_answer_cache_entries"] >= len(QUERIES)

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
