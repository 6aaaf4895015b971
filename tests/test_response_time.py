"""Response times are measured at the server's edge: from a call's arrival to its answer ready to
send (a periodic answer: from its execution's start to its publication), and that figure is what
the answer, GetStats and the Prometheus histogram report. Real server on 127.0.0.1, real SDK."""
from __future__ import annotations

import json
import re
import threading
import time

import pytest

from windowstore.clients import Client
from conftest import wait_for
from test_metrics import scrape
from windowstore.server import cli
from windowstore.server.app import WindowStoreServer
from windowstore.server.config import ServerConfig

SCHEMA = {"ts": "int64", "v": "int64"}




def histogram(metrics: dict[str, float], stream: str, query_class: str) -> tuple[float, float]:
    """(count, sum in seconds) of windowstore_query_response_seconds for the stream and class."""
    labels = f'{{query_class="{query_class}",stream="{stream}"}}'
    return (metrics.get(f"windowstore_query_response_seconds_count{labels}", 0.0),
            metrics.get(f"windowstore_query_response_seconds_sum{labels}", 0.0))


def _server(**config):
    # seals of 3 rows and more on the seal thread (where the held_seals fixture can hold them)
    return WindowStoreServer(ServerConfig(port=0, in_memory=True, metrics_port=0, seal_offload_rows=3, **config)).start()


@pytest.fixture
def server():
    srv = _server()
    try:
        yield srv
    finally:
        srv.stop(5)


@pytest.fixture
def waiting_server():
    """Queries of a stream being sealed wait for the install (--wait-for-seals)."""
    srv = _server(read_during_seal=False)
    try:
        yield srv
    finally:
        srv.stop(5)


def _metrics_url(srv) -> str:
    return f"http://127.0.0.1:{srv.metrics_port}/metrics"


def test_a_simple_query_reports_a_response_time_and_the_stats_count_it(server):
    with Client(server.address) as ws:
        ws.create_stream("s", SCHEMA, subwindows=4, subwindow_rows=2, clock="manual")
        ws.append("s", {"ts": [1, 2], "v": [3, 4]})
        answers = [ws.query("SELECT SUM(v), COUNT(*) FROM s") for _ in range(5)]
        stats = ws.stats("s")
    assert [a.rows for a in answers] == [[(7, 2)]] * 5
    assert all(a.response_ms > 0 for a in answers), [a.response_ms for a in answers]
    response = stats["streams"][0]["response_ms"]
    assert response["count"] == 5
    assert response["max"] == pytest.approx(max(a.response_ms for a in answers))
    assert response["p50"] > 0 and response["p99"] > 0
    count, total = histogram(scrape(_metrics_url(server)), "s", "onetime")
    assert count == 5
    assert total * 1000 == pytest.approx(sum(a.response_ms for a in answers), rel=1e-6)


def test_the_command_line_prints_the_response_time_and_the_stats_count_it(server, capsys):
    with Client(server.address) as ws:
        ws.create_stream("c", SCHEMA, subwindows=4, subwindow_rows=2, clock="manual")
        ws.append("c", {"ts": [1, 2], "v": [3, 4]})
    assert cli.main(["query", "SELECT SUM(v) FROM c", "--target", server.address]) == 0
    text = capsys.readouterr().out
    printed = float(re.search(r"response (\d+\.\d+) ms", text).group(1))
    assert cli.main(["query", "SELECT SUM(v) FROM c", "--json", "--target", server.address]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["rows"] == [[7]] and answer["response_ms"] > 0
    assert cli.main(["stats", "c", "--output", "json", "--target", server.address]) == 0
    response = json.loads(capsys.readouterr().out)["streams"][0]["response_ms"]
    assert response["count"] == 2 and response["max"] == pytest.approx(max(printed, answer["response_ms"]), abs=0.01)
    assert response["max"] > 0


def test_a_query_that_waits_for_a_seal_reports_the_wait(waiting_server, held_seals):
    """The seal of the stream's slide is held on the seal thread; a query of the stream waits for
    it (--wait-for-seals). Its response_ms includes the time the test held the seal after the query had arrived, and
    the stats and the histogram count that query with its figure."""
    entered, release = held_seals
    server = waiting_server
    driver = server.driver
    with Client(server.address) as ws:
        ws.create_stream("a", SCHEMA, subwindows=4, subwindow_rows=3, clock="manual")
        ws.append("a", {"ts": [1, 2, 3], "v": [1, 2, 3]})  # a full sub-window: it slides, sealed elsewhere
        assert entered.wait(10), "the seal did not start on the seal thread"
        got = {}

        def query():
            with Client(server.address) as c:
                got["answer"] = c.query("SELECT SUM(v), COUNT(*) FROM a")
        t = threading.Thread(target=query)
        t.start()
        try:
            # the query has arrived and waits for the seal (it is in flight, not answered)
            wait_for(lambda: driver.inflight == 1, "the query to wait for the seal")
            waiting_since = time.monotonic()
            assert ws.stats("a")["streams"][0]["response_ms"]["count"] == 0
            assert histogram(scrape(_metrics_url(server)), "a", "onetime")[0] == 0
            assert "answer" not in got
            held_ms = (time.monotonic() - waiting_since) * 1000
        finally:
            release.set()
            t.join(10)
        answer = got["answer"]
        assert answer.rows == [(6, 3)] and answer.slide == 0
        assert answer.response_ms >= held_ms > 0
        response = ws.stats("a")["streams"][0]["response_ms"]
    assert response["count"] == 1 and response["max"] == pytest.approx(answer.response_ms)
    count, total = histogram(scrape(_metrics_url(server)), "a", "onetime")
    assert count == 1 and total * 1000 == pytest.approx(answer.response_ms, rel=1e-6)


def test_a_periodic_answer_reports_its_execution_time_to_subscribers_readers_and_stats(server):
    """A periodic query's execution is held in the scheduler (its operations do nothing until the
    test lets them): its answer, as subscribed and as read back, reports the time from its start
    to its publication, at least the time the test held it after it had started."""
    sched = server.driver.sched
    advance = sched._advance
    hold, held = threading.Event(), threading.Event()

    def gated_advance(txn):
        if hold.is_set() and txn.task is not None:
            held.set()
            return "read"  # an operation of the periodic execution: it is not done yet
        return advance(txn)
    sched._advance = gated_advance

    with Client(server.address, timeout=30) as ws:
        ws.create_stream("p", SCHEMA, subwindows=4, subwindow_rows=3, clock="manual")
        q = ws.register("SELECT SUM(v), COUNT(*) FROM p [SLIDE 1 SUBWINDOWS]")
        subscribed = []
        done = threading.Event()

        def subscribe():
            with Client(server.address) as c:
                for a in c.subscribe(q.id, timeout=30):
                    subscribed.append(a)
                    if a.slide == 1:
                        done.set()
                        return
        t = threading.Thread(target=subscribe)
        t.start()
        wait_for(lambda: server.driver.subscribers.get(q.id) is not None, "the subscription")
        ws.append("p", {"ts": [1, 2, 3], "v": [1, 2, 3]})  # slide 0: answered at once
        wait_for(lambda: ws.read_answers(q.id)[1] == 0, "the answer to slide 0")
        hold.set()
        ws.append("p", {"ts": [4, 5, 6], "v": [4, 5, 6]})  # slide 1: its execution starts and is held
        assert held.wait(10), "the execution did not start"
        waiting_since = time.monotonic()
        assert ws.read_answers(q.id)[1] == 0 and not done.is_set()
        held_ms = (time.monotonic() - waiting_since) * 1000
        hold.clear()
        assert done.wait(30), "no answer to slide 1"
        t.join(10)
        answer = subscribed[-1]
        assert answer.rows == [(21, 6)]
        assert answer.response_ms >= held_ms > 0
        # every answer kept (the first, at registration, reflects the empty window: slide -1)
        read, latest, _ = ws.read_answers(q.id, after_slide=-2)
        assert latest == 1 and [a.slide for a in read] == [-1, 0, 1]
        assert read[-1].response_ms == answer.response_ms
        assert all(a.response_ms > 0 for a in read)
        response = ws.stats("p")["streams"][0]["response_ms"]
    assert response["count"] == 3 and response["max"] == pytest.approx(answer.response_ms)
    count, total = histogram(scrape(_metrics_url(server)), "p", "periodic")
    assert count == 3 and total * 1000 == pytest.approx(sum(a.response_ms for a in read), rel=1e-6)


def test_answers_recovered_after_a_restart_report_no_response_time(tmp_path):
    """The response time of a periodic answer is measured by the process that published it; one
    recovered from the log reports 0 (not the engine's figure), the next ones theirs."""
    def start():
        return WindowStoreServer(ServerConfig(port=0, data_dir=str(tmp_path), fsync="off")).start()

    srv = start()
    try:
        with Client(srv.address) as ws:
            ws.create_stream("r", SCHEMA, subwindows=4, subwindow_rows=2, clock="manual")
            q = ws.register("SELECT SUM(v) FROM r [SLIDE 1 SUBWINDOWS]")
            ws.append("r", {"ts": [1, 2], "v": [1, 2]})
            wait_for(lambda: ws.read_answers(q.id)[1] == 0, "the answer to slide 0")
            before = ws.read_answers(q.id, after_slide=-2)[0]
    finally:
        srv.stop(5)
    assert [a.slide for a in before] == [-1, 0] and all(a.response_ms > 0 for a in before)
    srv = start()
    try:
        with Client(srv.address) as ws:
            ws.append("r", {"ts": [3, 4], "v": [3, 4]})
            wait_for(lambda: ws.read_answers(q.id)[1] == 1, "the answer to slide 1")
            after = ws.read_answers(q.id, after_slide=-2)[0]
    finally:
        srv.stop(5)
    assert [(a.slide, a.rows) for a in after] == [(-1, [(None,)]), (0, [(3,)]), (1, [(10,)])]
    assert [a.response_ms for a in after[:2]] == [0.0, 0.0] and after[2].response_ms > 0
