"""The server's HTTP side: Prometheus metrics at /metrics, liveness at /healthz, readiness at
/readyz, and with `--http-port` the live status page (/ and its data at /api/status, static files
shipped in server/static, no build step). Any other path is 404.

It owns an HTTP server on a thread of its own and, for the status page, a bounded history of
samples (staleness and aborts per stream over the last minutes). It reads the engine only through
Driver.call, so each response is one consistent view taken between two engine operations; it
changes nothing. It binds the server's own host, so protected mode covers it as it covers gRPC.
"""
from __future__ import annotations

import collections
import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Callable

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

log = logging.getLogger("windowstore.http")

STATIC = {"/": ("status.html", "text/html; charset=utf-8"),
          "/status.js": ("status.js", "text/javascript; charset=utf-8"),
          "/status.css": ("status.css", "text/css; charset=utf-8")}
SAMPLE_EVERY_S = 2.0
SAMPLES_KEPT = 300          # ten minutes at one sample every two seconds
ANSWER_ROWS_SHOWN = 10


class Health:
    """Liveness and readiness, decided by the server (app.py) and read here."""

    def __init__(self, live: Callable[[], tuple[bool, str]], ready: Callable[[], tuple[bool, str]]):
        self.live, self.ready = live, ready


class StatusHistory:
    """Per-stream samples over the last minutes (a bounded ring: SAMPLES_KEPT of them)."""

    def __init__(self, keep: int = SAMPLES_KEPT):
        self.samples: collections.deque = collections.deque(maxlen=keep)

    def add(self, t_ms: float, stats: dict) -> None:
        self.samples.append({"t": t_ms, "streams": {
            s["stream"]: {"staleness_p50": s["staleness_ms"]["p50"], "staleness_p99": s["staleness_ms"]["p99"],
                          "aborts": s["aborts"], "queries": s["queries"], "slides": s["slides"]}
            for s in stats["streams"]}})

    def series(self) -> dict:
        return {"t": [s["t"] for s in self.samples],
                "streams": {name: {k: [s["streams"].get(name, {}).get(k) for s in self.samples]
                                   for k in ("staleness_p50", "staleness_p99", "aborts", "queries", "slides")}
                            for name in {n for s in self.samples for n in s["streams"]}}}


def status_snapshot(driver) -> dict:
    """What the status page shows, read on the engine's loop (Driver.call)."""
    stats = driver.metrics_snapshot()
    by_name = {s["stream"]: s for s in stats["streams"]}
    streams = []
    for name in sorted(by_name):
        stream = driver.stream(name)
        w, spec, st = stream.window, stream.spec, by_name[name]
        lo, hi = w.bounds(w.n)
        streams.append({"name": name, "clock": spec.clock, "subwindows": spec.subwindows,
                        "subwindow_ms": spec.subwindow_ms, "subwindow_rows": spec.subwindow_rows,
                        "group_by": list(spec.group_by), "latest_slide": w.latest,
                        "sealed": min(w.latest + 1, w.n), "window_start_ms": lo, "window_end_ms": hi,
                        "window_rows": sum(x.rows for x in w.youngest(w.n)), "buffered_rows": w.buffered_rows,
                        "next_slide_ms": w.next_due_ms(), **{k: st[k] for k in (
                            "bytes", "late_rows", "accepted_rows", "slides", "queries", "aborts", "restarts",
                            "staleness_ms", "response_ms", "stopped")}})
    queries = []
    engine = driver.engine
    for qid, p in sorted(engine.periodic.items()):
        latest = None
        if qid in engine.answers.queries():
            r = engine.answers.newest(qid)
            a = r.answer
            latest = {"slide": r.slide, "window_start_ms": r.window_start_ms, "window_end_ms": r.window_end_ms,
                      "staleness_ms": r.staleness_ms, "columns": list(a.columns),
                      "rows": [[_plain(x) for x in row] for row in a.rows[:ANSWER_ROWS_SHOWN]],
                      "rows_total": len(a.rows)}
        queries.append({"id": qid, "text": p.text, "every_slides": p.task.every, "latest": latest})
    return {"time_ms": time.time() * 1000.0, "policy": stats["policy"], "durability": stats["durability"],
            "onetime": stats["onetime"], "periodic": stats["periodic"], "streams": streams, "queries": queries}


def _plain(x):
    """An answer value as JSON can carry it: big integers and decimals as text, floats as they are."""
    if isinstance(x, bool) or x is None or isinstance(x, (str, float)):
        return x
    if isinstance(x, int):
        return x if abs(x) < 2**53 else str(x)
    return str(x)


class Endpoints:
    """One HTTP server: /metrics, /healthz and /readyz always; the status page when `status`."""

    def __init__(self, registry, health: Health, status: bool):
        self.registry, self.health, self.status = registry, health, status
        self.driver = None  # until attach(): the port is bound before the data directory is opened
        self.history = StatusHistory() if status else None
        self._stop = threading.Event()
        self._server: ThreadingHTTPServer | None = None

    def attach(self, driver) -> None:
        """The driver to read, once there is one; the status page's sampling starts."""
        self.driver = driver
        if self.history is not None:
            threading.Thread(target=self._sample, name="windowstore-http-sampler", daemon=True).start()

    def serve(self, host: str, port: int) -> int:
        """Bind and serve on a daemon thread; returns the bound port (port 0: a free one). OSError
        when the port cannot be bound."""
        endpoints = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the http.server protocol
                endpoints.handle(self)

            def log_message(self, fmt, *args):  # requests are not operator events
                pass
        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="windowstore-http", daemon=True).start()
        return self._server.server_address[1]

    def close(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY_S):
            try:
                stats = self.driver.call(lambda: self.driver.stats(None)).result(10)  # type: ignore[attr-defined]  # attach() set the driver before starting this thread
            except Exception:  # noqa: BLE001 - not recovered yet, or shutting down: skip this sample
                continue
            self.history.add(time.time() * 1000.0, stats)  # type: ignore[union-attr]  # started only when there is one

    def handle(self, req: BaseHTTPRequestHandler) -> None:
        path = req.path.split("?", 1)[0]
        if path == "/metrics" and self.registry is not None:
            return _send(req, 200, CONTENT_TYPE_LATEST, generate_latest(self.registry))
        if path == "/healthz":
            ok, why = self.health.live()
            return _send(req, 200 if ok else 503, "text/plain; charset=utf-8", (why or "ok").encode() + b"\n")
        if path == "/readyz":
            ok, why = self.health.ready()
            return _send(req, 200 if ok else 503, "text/plain; charset=utf-8", (why or "ready").encode() + b"\n")
        if self.status and path == "/api/status":
            if self.driver is None:
                return _send(req, 503, "application/json", b'{"error": "starting"}')
            try:
                snap = self.driver.call(lambda: status_snapshot(self.driver)).result(10)
            except Exception as e:  # noqa: BLE001 - the page shows the server is not answering, and why
                return _send(req, 503, "application/json", json.dumps({"error": str(e)[:500]}).encode())
            ok, why = self.health.ready()
            snap["health"] = {"ready": ok, "reason": why, "live": self.health.live()[0]}
            snap["history"] = self.history.series()
            return _send(req, 200, "application/json", json.dumps(snap, default=str).encode())
        if self.status and path in STATIC:
            name, ctype = STATIC[path]
            return _send(req, 200, ctype, resources.files("windowstore.server").joinpath("static", name).read_bytes())
        return _send(req, 404, "text/plain; charset=utf-8", b"not found\n")


def _send(req: BaseHTTPRequestHandler, code: int, ctype: str, body: bytes) -> None:
    req.send_response(code)
    req.send_header("Content-Type", ctype)
    req.send_header("Content-Length", str(len(body)))
    req.send_header("Cache-Control", "no-store")
    req.end_headers()
    req.wfile.write(body)
