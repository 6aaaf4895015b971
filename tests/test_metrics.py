"""Prometheus metrics scraped over HTTP from a real server while it works."""
from __future__ import annotations

import re
import threading
import urllib.request

import pytest

from conftest import wait_for
from windowstore.clients import Client, InvalidArgument
from windowstore.server.process import ServerProcess

SCHEMA = {"ts": "int64", "k": "string", "v": "int64"}


def scrape(url: str) -> dict[str, float]:
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


@pytest.mark.slow
def test_metrics_are_scraped_while_load_runs(tmp_path):
    srv = ServerProcess("--metrics-port", "0", "--offload-ms", "0", data_dir=str(tmp_path))
    url = re.search(r"metrics on (http://[^\s;)]+)", srv.banner).group(1)
    try:
        with Client(srv.target) as ws:
            ws.create_stream("m", SCHEMA, subwindows=10, subwindow_ms=100, group_by=["k"])
            ws.register("SELECT k, SUM(v) FROM m [SLIDE 100 ms] GROUP BY k")
            stop = threading.Event()

            def load():
                with Client(srv.target) as c:
                    i = 0
                    while not stop.is_set() and i < 400:
                        c.append("m", {"ts": [i], "k": [f"k{i % 7}"], "v": [i]}, writer_id="w", batch_id=i)
                        c.query("SELECT COUNT(*) FROM m")
                        if i % 20 == 0:  # a window scan: its reads and final merge run on the query thread
                            c.query("SELECT MEDIAN(v) FROM m")
                        i += 1
            t = threading.Thread(target=load)
            t.start()
            during = scrape(url)  # while the load runs
            # all 400 iterations, however long they take under load (the deadline only bounds a hang)
            wait_for(lambda: not t.is_alive(), "the load's 400 appends and queries", timeout=600, poll=0.1)
            # a processing-time slide and the periodic query's answer to it (100 ms sub-windows)
            wait_for(lambda: scrape(url).get('windowstore_answer_staleness_seconds_count{query_class="periodic",'
                                             'stream="m"}', 0) >= 1, "a periodic answer after a slide", poll=0.1)
            stop.set()
            try:
                ws.query("SELECT nope FROM m")
            except InvalidArgument:
                pass
            after = scrape(url)
        key = 'grpc_server_handled_total{grpc_code="OK",grpc_method="Append",grpc_service="windowstore.v1.WindowStoreService",grpc_type="unary"}'
        assert after[key] >= 400 and after[key] >= during.get(key, 0)
        bad = 'grpc_server_handled_total{grpc_code="INVALID_ARGUMENT",grpc_method="Query",grpc_service="windowstore.v1.WindowStoreService",grpc_type="unary"}'
        assert after[bad] == 1
        assert after['windowstore_rows_accepted_total{stream="m"}'] == 400
        assert after['windowstore_slides_total{stream="m"}'] >= 1
        assert after['windowstore_queries_committed_total{policy="ttu",query_class="onetime"}'] >= 400
        assert after['windowstore_answer_staleness_seconds_count{query_class="periodic",stream="m"}'] >= 1
        assert after['windowstore_slide_delay_seconds_count{stream="m"}'] >= 1
        assert after['windowstore_stream_bytes{stream="m"}'] > 0
        assert after["windowstore_log_bytes_total"] > 0
        assert after["windowstore_query_jobs_total"] >= 2 * 20  # each scan: at least a read and a merge
        assert 0 <= after["windowstore_query_jobs_discarded_total"] <= after["windowstore_query_jobs_total"]
        assert "windowstore_query_holds_total" in after
        assert 'windowstore_queries_fallbacks_total{policy="ttu",query_class="periodic"}' in after
        assert after["windowstore_query_reads_recalled_total"] == 0  # MEDIAN's reads are never kept (store/memo.py)
        assert 'grpc_server_handling_seconds_bucket{grpc_method="Query",grpc_service="windowstore.v1.WindowStoreService",grpc_type="unary",le="+Inf"}' in after
    finally:
        srv.stop()


@pytest.mark.slow
def test_overload_is_shed_with_resource_exhausted_and_the_server_recovers():
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from windowstore.clients import ResourceExhausted

    srv = ServerProcess("--max-requests-per-client", "4", "--max-pending", "8", "--workers", "48",
                        "--metrics-port", "0")
    url = re.search(r"metrics on (http://[^\s;)]+)", srv.banner).group(1)
    try:
        with Client(srv.target) as ws:
            ws.create_stream("o", SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual")
            n = 200_000
            ws.append("o", {"ts": np.arange(n), "k": np.array([f"k{i % 1000}" for i in range(n)], dtype=object),
                            "v": np.arange(n)})
            ws.slide("o")
            heavy = "SELECT k, MEDIAN(v), COUNT(DISTINCT v) FROM o WHERE v >= 0 GROUP BY k ORDER BY 2 DESC LIMIT 3"

            def one(_):
                try:
                    ws.query(heavy)
                    return "ok"
                except ResourceExhausted:
                    return "shed"
            with ThreadPoolExecutor(40) as pool:  # one client (one connection), 40 at once
                outcomes = list(pool.map(one, range(120)))
            assert outcomes.count("shed") > 0 and outcomes.count("ok") > 0
            assert set(outcomes) <= {"ok", "shed"}
            assert ws.query("SELECT COUNT(*) FROM o").rows == [(n,)]  # and it recovers
        assert scrape(url)["windowstore_requests_shed_total"] == outcomes.count("shed")
    finally:
        srv.stop()


def test_stream_bytes_count_the_key_synopses():
    """windowstore_stream_bytes counts each sealed sub-window's key synopses: two streams hold the
    same rows, one grouped by a column of 20,000 distinct keys a sub-window; the grouped one holds
    at least their keys (int32 codes) and counts (int64) more than the other, beyond its running
    per-key totals."""
    import pyarrow as pa

    from windowstore.server.config import ServerConfig
    from windowstore.server.driver import Driver
    from windowstore.store import WindowSpec
    from windowstore.txn.commands import Append, CreateStream, Slide

    driver = Driver(ServerConfig(in_memory=True))
    driver.start()
    try:
        keys, subs = 20_000, 3
        for name, group_by in (("plain", ()), ("grouped", ("k",))):
            driver.command(CreateStream(name, (("ts", "int64"), ("k", "string"), ("v", "int64")), "ts",
                                        WindowSpec(subwindows=4, subwindow_ms=1000, clock="manual", group_by=group_by),
                                        0)).result(10)
            for j in range(subs):
                batch = pa.table({"ts": list(range(keys)), "k": [f"key{i}" for i in range(keys)], "v": list(range(keys))})
                driver.command(Append(name, batch, "", None, 0)).result(10)
                driver.command(Slide(name, 0)).result(10)
        snap = driver.run(driver.metrics_snapshot)
        held = {st["stream"]: st["bytes"] for st in snap["streams"]}
        running = driver.run(lambda: sum(k.nbytes for k in driver.stream("grouped").window.running_keys.values()))
        assert held["grouped"] - held["plain"] - running >= subs * keys * (4 + 8)
    finally:
        driver.stop(5)


def test_calls_and_answers_are_counted_in_their_own_series():
    """rpc.py counts each call under its method and status code and times it; observe_answer puts
    each answer in its stream's and query class's histograms (the series looked up once, kept)."""
    import time
    from types import SimpleNamespace

    import grpc

    from windowstore.server import rpc
    from windowstore.server.metrics import Metrics

    from windowstore.server.oplog import Limited

    m = Metrics()
    refused = Limited("client_error", ("method", "code"), 0)
    query, append = rpc._Call("Query", None, m, False, refused), rpc._Call("Append", None, m, False, refused)
    for call, code in ((query, grpc.StatusCode.OK), (query, grpc.StatusCode.INVALID_ARGUMENT),
                       (query, grpc.StatusCode.OK), (append, grpc.StatusCode.OK)):
        call.end(time.perf_counter(), code)
    svc = rpc.SERVICE.full_name

    def sample(name, **labels):
        return m.registry.get_sample_value(name, labels) or 0.0

    def handled(method, code):
        return sample("grpc_server_handled_total", grpc_type="unary", grpc_service=svc, grpc_method=method,
                      grpc_code=code)
    assert (handled("Query", "OK"), handled("Query", "INVALID_ARGUMENT"), handled("Append", "OK")) == (2, 1, 1)
    assert handled("Append", "INVALID_ARGUMENT") == 0
    assert sample("grpc_server_handling_seconds_count", grpc_type="unary", grpc_service=svc, grpc_method="Query") == 3
    m.observe_answer("p", "onetime", SimpleNamespace(staleness_ms=1500.0), 2.0)
    m.observe_answer("p", "onetime", SimpleNamespace(staleness_ms=None), 4.0)
    m.observe_answer("q", "periodic", SimpleNamespace(staleness_ms=10.0), 1.0)
    for stream, cls, answers, stale, response_s in (("p", "onetime", 2, 1, 0.006), ("q", "periodic", 1, 1, 0.001)):
        assert sample("windowstore_query_response_seconds_count", stream=stream, query_class=cls) == answers
        assert sample("windowstore_query_response_seconds_sum", stream=stream, query_class=cls) == pytest.approx(response_s)
        assert sample("windowstore_answer_staleness_seconds_count", stream=stream, query_class=cls) == stale
    assert sample("windowstore_answer_staleness_seconds_sum", stream="p", query_class="onetime") == pytest.approx(1.5)
