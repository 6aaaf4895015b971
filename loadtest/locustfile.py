"""Load test for windowstore (locust): writers, one-time query users, periodic subscribers.

    locust -f loadtest/locustfile.py --host 127.0.0.1:50051

On test start it creates the stream and registers the periodic queries it needs (settings below,
from the environment); on test stop it unregisters and drops them. Entries:

- "Append", "Query <kind>", "Subscribe answer": request time = response time (ms);
- "staleness one-time" / "staleness periodic": the answer's staleness in ms as the "response time";
- "restarts": one entry per answer that was restarted, its count as the response time;
  an ABORTED answer (restart limit) is a failure of its Query entry.

Environment: WS_STREAM (ls_packets), WS_SUBWINDOWS (20), WS_SUBWINDOW_MS (250), WS_PERIODIC (8),
WS_BATCH_ROWS (2000). Against a server with TLS and tokens: WS_TLS_CA (PEM file of the CA that
signed the server's certificate), WS_TLS_CERT and WS_TLS_KEY (a client certificate, for mutual
TLS), WS_TOKEN (a bearer token that may admin the stream).
"""
from __future__ import annotations

import gevent.monkey

gevent.monkey.patch_all()
import grpc.experimental.gevent as grpc_gevent  # noqa: E402

grpc_gevent.init_gevent()

import os  # noqa: E402
import random  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
from locust import User, between, constant, events, task  # noqa: E402

from windowstore.clients import Client, NotFound, WindowStoreError  # noqa: E402

STREAM = os.environ.get("WS_STREAM", "ls_packets")
SUBWINDOWS = int(os.environ.get("WS_SUBWINDOWS", "20"))
SUBWINDOW_MS = int(os.environ.get("WS_SUBWINDOW_MS", "250"))
PERIODIC = int(os.environ.get("WS_PERIODIC", "8"))
BATCH_ROWS = int(os.environ.get("WS_BATCH_ROWS", "2000"))
SCHEMA = {"ts": "int64", "src": "string", "dst": "string", "bytes": "int64"}
ADDRESSES = np.array([f"10.1.{i // 256}.{i % 256}" for i in range(500)], dtype=object)
ONETIME = {
    "total": "SELECT COUNT(*), SUM(bytes), MAX(bytes) FROM {s}",
    "top-k": "SELECT src, SUM(bytes) FROM {s} [RANGE {k} SUBWINDOWS] GROUP BY src ORDER BY 2 DESC LIMIT 10",
    "filtered": "SELECT COUNT(*), AVG(bytes) FROM {s} [RANGE {k} SUBWINDOWS] WHERE src IN ('10.1.0.1', '10.1.0.2') OR bytes > 1400",
    "percentile": "SELECT QUANTILE(total, 0.9) FROM (SELECT dst, SUM(bytes) AS total FROM {s} [RANGE {k} SUBWINDOWS] GROUP BY dst)",
}
REGISTERED: list[str] = []


def connect(host: str, **kw) -> Client:
    env = os.environ.get
    return Client(host, tls=bool(env("WS_TLS_CA")), ca=env("WS_TLS_CA") or None, cert=env("WS_TLS_CERT") or None,
                  key=env("WS_TLS_KEY") or None, token=env("WS_TOKEN") or None, **kw)


def periodic_queries(n: int) -> list[str]:
    rng = random.Random(7)
    out = []
    for i in range(n):
        k = rng.randint(1, SUBWINDOWS)
        m = rng.randint(1, max(1, min(4, k)))
        col = "src" if i % 2 else "dst"
        if i % 3 == 0:
            out.append(f"SELECT QUANTILE(total, 0.{rng.choice([5, 9, 99])}) FROM (SELECT {col}, SUM(bytes) AS total FROM {STREAM} "
                       f"[RANGE {k} SUBWINDOWS SLIDE {m} SUBWINDOWS] GROUP BY {col})")
        else:
            out.append(f"SELECT {col}, SUM(bytes) FROM {STREAM} [RANGE {k} SUBWINDOWS SLIDE {m} SUBWINDOWS] "
                       f"GROUP BY {col} ORDER BY 2 DESC LIMIT 10")
    return out


@events.test_start.add_listener
def setup(environment, **_):
    with connect(environment.host) as ws:
        try:
            ws.drop_stream(STREAM)
        except NotFound:
            pass
        ws.create_stream(STREAM, SCHEMA, subwindows=SUBWINDOWS, subwindow_ms=SUBWINDOW_MS, group_by=["src", "dst"])
        REGISTERED[:] = [ws.register(q).id for q in periodic_queries(PERIODIC)]


@events.test_stop.add_listener
def teardown(environment, **_):
    with connect(environment.host) as ws:
        for qid in REGISTERED:
            try:
                ws.unregister(qid)
            except WindowStoreError:
                pass


def fire(name: str, started: float, request_type: str = "grpc", exception: Exception | None = None, length: int = 0):
    events.request.fire(request_type=request_type, name=name, response_time=(time.perf_counter() - started) * 1000,
                        response_length=length, exception=exception, context={})


def fire_value(name: str, value: float, request_type: str):
    """A measured quantity (staleness, restarts) as its own entry: its value as the 'response time'."""
    events.request.fire(request_type=request_type, name=name, response_time=value, response_length=0,
                        exception=None, context={})


class WindowStoreUser(User):
    abstract = True

    def on_start(self):
        self.ws = connect(self.host, timeout=30)

    def on_stop(self):
        self.ws.close()


class Writer(WindowStoreUser):
    weight = 2
    wait_time = constant(0.05)

    @task
    def append(self):
        n = BATCH_ROWS
        batch = pa.table({"ts": np.full(n, int(time.time() * 1000), dtype=np.int64),
                          "src": ADDRESSES[np.random.zipf(1.3, n) % len(ADDRESSES)],
                          "dst": ADDRESSES[np.random.randint(0, len(ADDRESSES), n)],
                          "bytes": np.random.randint(40, 1500, n)})
        t0 = time.perf_counter()
        try:
            self.ws.append(STREAM, batch)
            fire("Append", t0, length=n)
        except WindowStoreError as e:
            fire("Append", t0, exception=e)


class OneTimeQueries(WindowStoreUser):
    weight = 4
    wait_time = between(0.05, 0.2)

    @task
    def query(self):
        kind = random.choice(list(ONETIME))
        text = ONETIME[kind].format(s=STREAM, k=random.randint(1, SUBWINDOWS))
        t0 = time.perf_counter()
        try:
            a = self.ws.query(text)
        except WindowStoreError as e:
            fire(f"Query {kind}", t0, exception=e)
            return
        fire(f"Query {kind}", t0, length=len(a.rows))
        if a.staleness_ms is not None:
            fire_value("staleness one-time", a.staleness_ms, "staleness")
        if a.restarts:
            fire_value("restarts one-time", a.restarts, "restarts")


class Subscriber(WindowStoreUser):
    weight = 1
    wait_time = constant(0)

    @task
    def follow(self):
        if not REGISTERED:
            time.sleep(0.1)
            return
        qid = random.choice(REGISTERED)
        t0 = time.perf_counter()
        try:
            for a in self.ws.subscribe(qid, timeout=5):
                fire("Subscribe answer", t0, length=len(a.rows))
                t0 = time.perf_counter()
                if a.staleness_ms is not None:
                    fire_value("staleness periodic", a.staleness_ms, "staleness")
                if a.restarts:
                    fire_value("restarts periodic", a.restarts, "restarts")
        except WindowStoreError as e:
            if e.code.name != "DEADLINE_EXCEEDED":  # the 5 s subscription ending is expected
                fire("Subscribe answer", t0, exception=e)
