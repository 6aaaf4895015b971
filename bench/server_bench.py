"""Server benchmarks over gRPC on loopback: ingest, one-time query latency (idle and under
ingest), small-query throughput with 32 concurrent clients, slide delay under 100 queries."""
from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pyarrow as pa

from windowstore.clients import AsyncClient, Client
from windowstore.server.process import ServerProcess

from .common import SCHEMA, fmt_rate, packets


def _pcts(samples: list[float]) -> tuple[float, float]:
    a = np.array(samples)
    return float(np.percentile(a, 50)), float(np.percentile(a, 99))


def _writer_process() -> None:
    """A writer process of the ingest benchmarks keeps its freed memory, as the server does
    (server/allocator.py): with glibc's default every 10^5-row Append mapped fresh pages for the
    request it builds and sends, and the three writers, on the same two cores as the server, used
    more CPU than it (measured on 2026-11-27, before the SDK serialized its requests itself: client
    CPU per 10^5-row Append 10-11 ms -> 4-5 ms),
    which made the load generator the bottleneck. The bare-RPC floor's writers do the same."""
    from windowstore.server.allocator import keep_freed_memory

    keep_freed_memory()


class _Pace:
    """Back to back (`per_s` None), or `per_s` calls a second on a schedule, so what is sent does
    not depend on how fast the server answers: a call more than a period late skips the slots it
    missed (counted in `missed`) rather than bursting to catch up. `sleep` waits (it may return
    early, e.g. a stop event's wait)."""

    def __init__(self, per_s: float | None, sleep=time.sleep):
        self.every = 1.0 / per_s if per_s else 0.0
        self.due = time.monotonic()
        self.missed = 0
        self.sleep = sleep

    def wait(self) -> None:
        if not self.every:
            return
        now = time.monotonic()
        if now - self.due > self.every:  # behind by more than a period: skip, do not burst
            late = int((now - self.due) / self.every)
            self.missed += late
            self.due += late * self.every
        if self.due > now:
            self.sleep(self.due - now)
        self.due += self.every


def _sender(target: str, stream: str, rows: int, per_s: float | None, seconds: float, out) -> None:
    """Appends `rows`-row batches back to back (or `per_s` a second) for `seconds`; a refusal
    because the stream's buffer is full (its slide is behind) is backed off for 10 ms and counted,
    as a writer would."""
    from windowstore.clients import ResourceExhausted

    _writer_process()
    table = pa.table(packets(rows))
    sent = refused = 0
    with Client(target) as c:
        give_up = time.monotonic() + 60.0
        while True:  # connect and warm up before the clock starts (the buffer may be full: back off)
            try:
                c.append(stream, table)
                break
            except ResourceExhausted:
                if time.monotonic() > give_up:
                    raise
                time.sleep(0.01)
        out.put("ready")
        stop = time.monotonic() + seconds
        pace = _Pace(per_s)
        while time.monotonic() < stop:
            pace.wait()
            try:
                c.append(stream, table)
                sent += rows
            except ResourceExhausted:
                refused += 1
                time.sleep(0.01)
    out.put((sent, refused))


FILL_S = 11.0  # the ingest stream's window holds 10 s: this long fills it and slides one sub-window out


def ingest(target: str, rows: int, seconds: float = 5.0, senders: int = 3,
           fill_s: float = FILL_S) -> tuple[float | None, float, int]:
    """Rows/s appended by `senders` writer processes (as Spark executors would be): while the
    window fills (its first `fill_s` seconds; None when 0), then for `seconds` after that; and
    how many Appends were refused (a full buffer: backed off and retried).

    Filling costs more here: every sealed sub-window takes memory the process has not touched yet,
    and on this VM a page fault costs ~10x the copy that fills the page (84 MB of fresh pages: ~45
    ms to fill, ~3.4 ms once touched). A full window's seals reuse the memory of what slid out."""
    with Client(target) as ws:
        ws.create_stream(f"ingest{rows}", SCHEMA, subwindows=10, subwindow_ms=1000, group_by=["src"])
    stream = f"ingest{rows}"
    fill_rows, fill_refused = _senders(_sender, (target, stream, rows, None, fill_s), senders) if fill_s else (0, 0)
    sent, refused = _senders(_sender, (target, stream, rows, None, seconds), senders)
    return fill_rows / fill_s if fill_s else None, sent / seconds, fill_refused + refused


def ingest_report(target: str, rows: int) -> dict:
    """What the server says of the ingest stream once `ingest` ran: its slides and their delays
    (due to cut; the next cut waits for the last one's seal). The refused Appends are ingest's count."""
    with Client(target) as ws:
        st = next(s for s in ws.stats()["streams"] if s["stream"] == f"ingest{rows}")
    return {"slide_delay_ms": st["slide_delay_ms"], "slides": st["slides"]}


class _Writers:
    """`n` writer processes running fn(*args, queue), each putting "ready" once connected and warmed
    up, then its own (rows, refused)."""

    def __init__(self, fn, args: tuple, n: int):
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        self.out = ctx.Queue()
        self.procs = [ctx.Process(target=fn, args=(*args, self.out)) for _ in range(n)]
        self.counts: list[tuple[int, int]] = []
        self.ready = 0
        for p in self.procs:
            p.start()

    def _next(self):
        import queue

        while True:
            try:
                return self.out.get(timeout=1.0)
            except queue.Empty:
                if not any(p.is_alive() for p in self.procs) and self.out.empty():
                    raise RuntimeError("a writer process failed (its traceback is above)") from None

    def _take(self) -> None:
        x = self._next()
        if x == "ready":
            self.ready += 1
        else:
            self.counts.append(x)

    def wait_ready(self) -> None:
        while self.ready < len(self.procs):
            self._take()

    def finish(self) -> tuple[int, int]:
        """(rows sent, requests refused) of all of them, once they are done."""
        while len(self.counts) < len(self.procs):
            self._take()
        for p in self.procs:
            p.join()
        return sum(c[0] for c in self.counts), sum(c[1] for c in self.counts)


def _senders(fn, args: tuple, senders: int) -> tuple[int, int]:
    """(rows sent, requests refused) by `senders` processes running fn(*args, queue)."""
    return _Writers(fn, args, senders).finish()


def _bare_sender(target: str, rows: int, per_s: float | None, seconds: float, out) -> None:
    """As _sender, with the same request built per call, to a server that only receives it."""
    import grpc

    from windowstore.clients.client import _OPTIONS, append_request, serialized
    from .bare_server import APPEND

    _writer_process()
    table = pa.table(packets(rows))
    sent = 0
    with grpc.insecure_channel(target, options=_OPTIONS) as channel:
        call = channel.unary_unary(APPEND, request_serializer=serialized,
                                   response_deserializer=lambda b: b)
        call(append_request("ingest", table, "", None, None))
        out.put("ready")
        stop = time.monotonic() + seconds
        pace = _Pace(per_s)
        while time.monotonic() < stop:
            pace.wait()
            call(append_request("ingest", table, "", None, None))
            sent += rows
    out.put((sent, 0))


class _BareServer:
    """bench/bare_server.py in a process of its own: `target`, stopped on exit."""

    def __enter__(self) -> _BareServer:
        import re
        import subprocess
        import sys

        self.proc = subprocess.Popen([sys.executable, "-m", "bench.bare_server"], stdout=subprocess.PIPE, text=True)
        self.target = re.search(r"serving on (\S+)", self.proc.stdout.readline()).group(1)
        return self

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def ingest_bare(rows: int, seconds: float = 5.0, senders: int = 3) -> float:
    """Rows/s the same writer processes send to bench/bare_server.py (the transport's floor)."""
    with _BareServer() as bare:
        return _senders(_bare_sender, (bare.target, rows, None, seconds), senders)[0] / seconds


def _bare_latency(target: str, n: int = 2000, until: float | None = None) -> list[float]:
    """Milliseconds per no-op unary call (an empty Append, answered empty) to bench/bare_server.py."""
    import grpc

    from .bare_server import APPEND

    out = []
    with grpc.insecure_channel(target) as channel:
        call = channel.unary_unary(APPEND, request_serializer=lambda b: b, response_deserializer=lambda b: b)
        for _ in range(50):
            call(b"")
        while len(out) < n and (until is None or time.monotonic() < until):
            t0 = time.perf_counter()
            call(b"")
            out.append((time.perf_counter() - t0) * 1000)
    return out


INGEST_PROBE_ROWS = 10_000  # rows per Append of the writer beside the latency measurements
STEADY_APPENDS_S = 100       # ... and its steady rate: 1 M rows/s


def under_ingest(measure, writer, args: tuple, rows: int, per_s: float | None = None, seconds: float = 6.0):
    """(idle (p50, p99), under ingest (p50, p99), Appends/s): `measure(until)` returns latencies in
    ms, first alone, then while one writer process (`writer(*args, rows, per_s, seconds, queue)`)
    appends `rows`-row batches back to back (`per_s` None) or `per_s` a second. The writer is a
    process of its own, so the latencies are the server's and not the GIL of a writer thread
    beside the caller."""
    idle = _pcts(measure(None))
    w = _Writers(writer, (*args, rows, per_s, seconds), 1)
    w.wait_ready()
    busy = _pcts(measure(time.monotonic() + seconds - 0.5))
    sent, _ = w.finish()
    return idle, busy, sent / rows / seconds


class Feeder:
    """Appends `rows`-row batches to a stream in a background thread until stopped, one per
    `every_s` on a schedule (_Pace: the rows per sub-window do not depend on how fast the server
    answers; batches more than a period late are skipped, counted in `missed`)."""

    def __init__(self, target: str, stream: str, rows: int, every_s: float):
        self.stop_event = threading.Event()
        self.sent = 0
        self.pace = _Pace(1.0 / every_s, self.stop_event.wait)
        table = pa.table(packets(rows))

        def feed():
            with Client(target) as c:
                while True:
                    self.pace.wait()
                    if self.stop_event.is_set():
                        break
                    c.append(stream, table)
                    self.sent += 1
        self.thread = threading.Thread(target=feed)
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join()

    @property
    def missed(self) -> int:
        return self.pace.missed


def latency(target: str, stream: str, text: str, n: int = 2000, until: float | None = None) -> list[float]:
    """Milliseconds per one-time query, one caller: n of them, or as many as fit before `until`."""
    out = []
    with Client(target) as ws:
        for _ in range(50):
            ws.query(text)
        while len(out) < n and (until is None or time.monotonic() < until):
            t0 = time.perf_counter()
            ws.query(text)
            out.append((time.perf_counter() - t0) * 1000)
    return out


async def _throughput(target: str, text: str, clients: int, seconds: float) -> float:
    done = 0
    stop = time.monotonic() + seconds

    async def worker():
        nonlocal done
        async with AsyncClient(target) as ws:
            while time.monotonic() < stop:
                await ws.query(text)
                done += 1
    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(clients)))
    return done / (time.perf_counter() - t0)


def _baseline(target: str) -> tuple[float, float, float]:
    """Bare Python gRPC on this machine: the server's health check (no application work)."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(target) as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        for _ in range(100):
            stub.Check(health_pb2.HealthCheckRequest())
        xs = []
        for _ in range(2000):
            t0 = time.perf_counter()
            stub.Check(health_pb2.HealthCheckRequest())
            xs.append((time.perf_counter() - t0) * 1000)

    async def tp():
        done = 0
        stop = time.monotonic() + 4.0

        async def worker():
            nonlocal done
            async with grpc.aio.insecure_channel(target) as ch:
                st = health_pb2_grpc.HealthStub(ch)
                while time.monotonic() < stop:
                    await st.Check(health_pb2.HealthCheckRequest())
                    done += 1
        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(32)))
        return done / (time.perf_counter() - t0)
    p50, p99 = _pcts(xs)
    return p50, p99, asyncio.run(tp())


def run() -> list[dict]:
    out = []
    with ServerProcess() as srv:
        p50, p99, qps = _baseline(srv.target)
        out.append({"name": "baseline: bare gRPC health check (no windowstore work): p50 / p99, 32-client throughput",
                    "value": [p50, p99, qps], "shown": f"{p50:.2f} ms / {p99:.2f} ms, {qps:,.0f} calls/s", "target": ""})
    with ServerProcess() as srv:
        for rows in (10_000, 100_000):
            filling, rate, refused = ingest(srv.target, rows)
            report = ingest_report(srv.target, rows)
            bare = ingest_bare(rows)
            d = report["slide_delay_ms"]
            out.append({"name": f"ingest over gRPC, Arrow batches of {rows:,} rows (3 writer processes, keeping freed "
                                "memory), window full; beside it, the same requests to a server that only receives "
                                f"them (bench/bare_server.py); while the window filled: {fmt_rate(filling)}; "
                                f"slide delay p99 / max {d['p99']:.0f} / {d['max']:.0f} ms over {report['slides']} "
                                f"slides; {refused} Appends refused (buffer full) and retried",
                        "value": [rate, bare, filling, d["p99"], d["max"], refused],
                        "shown": f"{fmt_rate(rate)} vs {fmt_rate(bare)} = {rate / bare:.2f}x",
                        "target": ">= 10 M rows/s at 10^5, 3 M at 10^4; >= 0.5x the bare RPC"})
    with ServerProcess() as srv:
        with Client(srv.target) as ws:
            ws.create_stream("q", SCHEMA, subwindows=100, subwindow_ms=1000, clock="manual", group_by=["src"])
            ws.create_stream("feed", SCHEMA, subwindows=10, subwindow_ms=1000, group_by=["src"])
            batch = pa.table(packets(1000))
            for _ in range(100):
                ws.append("q", batch)
                ws.slide("q")
        text = "SELECT SUM(bytes) FROM q [RANGE 100 SUBWINDOWS]"
        p50, p99 = _pcts(latency(srv.target, "q", text))
        out.append({"name": "one-time SUM over 100 sub-windows, idle: p50 / p99", "value": [p50, p99],
                    "shown": f"{p50:.2f} ms / {p99:.2f} ms", "target": "p50 <= 1 ms, p99 <= 5 ms"})
        for per_s in (None, STEADY_APPENDS_S):
            ws_idle, ws_busy, ws_rate = under_ingest(lambda until: latency(srv.target, "q", text, until=until),
                                                     _sender, (srv.target, "feed"), INGEST_PROBE_ROWS, per_s)
            with _BareServer() as bare:
                bare_idle, bare_busy, bare_rate = under_ingest(lambda until: _bare_latency(bare.target, until=until),
                                                               _bare_sender, (bare.target,), INGEST_PROBE_ROWS, per_s)
            ratio, bare_ratio = ws_busy[1] / ws_idle[1], bare_busy[1] / bare_idle[1]
            how = ("back to back" if per_s is None else
                   f"at a steady {per_s * INGEST_PROBE_ROWS / 1e6:.0f} M rows/s ({per_s} a second)")
            out.append({"name": "one-time SUM over 100 sub-windows, under concurrent ingest (one writer process, 10^4-row "
                                f"Arrow batches {how} into another stream whose 1 s sub-windows slide, "
                                f"{ws_rate:,.0f} Appends/s; idle just before: p50 / p99 {ws_idle[0]:.2f} / "
                                f"{ws_idle[1]:.2f} ms); beside it the transport's own: a no-op unary call to "
                                f"bench/bare_server.py, idle p50 / p99 {bare_idle[0]:.2f} / {bare_idle[1]:.2f} ms, under "
                                f"the same writer ({bare_rate:,.0f} Appends/s) {bare_busy[0]:.2f} / {bare_busy[1]:.2f} ms "
                                f"= {bare_ratio:.1f}x: p50 / p99, p99 under ingest / idle",
                        "value": [ws_busy[0], ws_busy[1], ratio, bare_ratio, ws_idle[1], bare_idle[1], bare_busy[1]],
                        "shown": f"{ws_busy[0]:.2f} ms / {ws_busy[1]:.2f} ms, {ratio:.1f}x idle (bare transport "
                                 f"{bare_ratio:.1f}x)",
                        "target": "p99 <= 2x idle"})
        qps = asyncio.run(_throughput(srv.target, "SELECT COUNT(*), MAX(bytes) FROM q [RANGE 10 SUBWINDOWS]", 32, 5.0))
        out.append({"name": "small-query throughput, 32 concurrent clients (asyncio, one process)", "value": qps,
                    "shown": f"{qps:,.0f} queries/s", "target": ">= 3,000/s"})
    # 100 callers on one connection: admit them all (the default admits 64 in progress per client)
    with ServerProcess("--max-requests-per-client", "200") as srv:
        with Client(srv.target) as ws:
            ws.create_stream("d", SCHEMA, subwindows=20, subwindow_ms=100, group_by=["src"])
            # a fixed rate: 5,000 rows every 20 ms (25,000 rows per 100 ms sub-window, 500,000 in the window)
            feeder = Feeder(srv.target, "d", 5_000, every_s=0.02)
            text = "SELECT src, SUM(bytes), MEDIAN(bytes) FROM d WHERE bytes > 100 GROUP BY src ORDER BY 2 DESC LIMIT 10"
            t0 = time.monotonic()
            qps = asyncio.run(_throughput(srv.target, text, 100, 6.0))
            feeder.stop()
            fed = feeder.sent * 5_000 / (time.monotonic() - t0)
            st = ws.stats("d")["streams"][0]
            d = st["slide_delay_ms"]
        out.append({"name": "slide delay while 100 queries run (100 ms sub-windows, window scans, "
                            f"{qps:,.0f} q/s, {st['aborts']} aborts in {st['queries']} queries; fed 5,000 rows per "
                            f"20 ms: {fed:,.0f} rows/s, {feeder.missed} batches missed their slot): p50 / p99 / max",
                    "value": [d["p50"], d["p99"], d["max"]],
                    "shown": f"{d['p50']:.2f} / {d['p99']:.2f} / {d['max']:.2f} ms", "target": "p99 <= 2 ms, max <= 5 ms"})
    return out
