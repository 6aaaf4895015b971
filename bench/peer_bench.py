"""windowstore against what a user would pick instead: DuckDB in process, on the same workload.

A 60-s event-time window sliding every second, 1,000 source keys (Zipf-skewed), 100,000 rows per
second of event time, sent as Arrow batches of one second (and of 10^4 rows). windowstore runs
`--in-memory` in its own process with the client here; DuckDB (2 threads) runs in this process,
appending each batch to a table and deleting what left the window once a second of event time.
Three query classes: the whole-window SUM (a synopsis probe), the top-10 sources by SUM(bytes) over
10 s (per-key running totals), COUNT(*) with a filter over 10 s (a scan). Every windowstore answer
is checked equal to DuckDB over the window bounds it reported (a reference table that keeps every
row), so a faster wrong answer cannot count. Figures are ratios measured in one run: DuckDB's
time over windowstore's (above 1: windowstore faster). Beside the queries under ingest, the
transport's own: a no-op call to bench/bare_server.py while the same writer's Appends reach it at
windowstore's rate (the floor of any call's latency under that ingest on this machine).

chDB (ClickHouse embedded in the process, `pip install -e '.[peer]'`, `make peer-bench`) is the
second peer when it is installed: a Memory table appended from Arrow, the rows that left the
window deleted once a second of event time, on one session whose calls are serialised (two
threads calling one session at once hang). Its answers are checked against DuckDB's over every
row too."""
from __future__ import annotations

import multiprocessing as mp
import threading
import time
from typing import Callable

import duckdb
import numpy as np
import pyarrow as pa

from windowstore.clients import Client, ResourceExhausted
from windowstore.server.process import ServerProcess

from .common import packets

SECOND_ROWS = 100_000
WINDOW_S = 60
KEYS = 1_000
INGEST_ROWS = 9_000_000
SCHEMA = {"ts": "int64", "src": "string", "bytes": "int64", "lat": "float64"}
QUERIES = {
    "probe": ("SELECT SUM(bytes) FROM peer", "SELECT SUM(bytes) FROM t WHERE ts >= ? AND ts < ?"),
    "top-k": ("SELECT src, SUM(bytes) FROM peer [RANGE 10 s] GROUP BY src ORDER BY 2 DESC, 1 LIMIT 10",
              "SELECT src, SUM(bytes) FROM t WHERE ts >= ? AND ts < ? GROUP BY src ORDER BY 2 DESC, 1 LIMIT 10"),
    "filter": ("SELECT COUNT(*) FROM peer [RANGE 10 s] WHERE bytes > 1400",
               "SELECT COUNT(*) FROM t WHERE ts >= ? AND ts < ? AND bytes > 1400"),
}
SYNOPSIS_BACKED = ("probe", "top-k")
_BASES = 8
# one writer's Appends in flight (Client.append_all's in_flight), per batches per second. One for
# both sizes: on loopback the server is CPU-bound, and several in flight need idempotency keys,
# whose digest of each batch costs more than the overlap saves (docs/performance.md, Round 18)
IN_FLIGHT = {1: 1, 10: 1}
# every query asked of the peers: QUERIES and, after an ingest run, the whole window's rows and
# bytes (each store's checked against DuckDB over every row, over the bounds it reported)
CHECKED = {**QUERIES, "window": ("SELECT COUNT(*), SUM(bytes) FROM peer",
                                 "SELECT COUNT(*), SUM(bytes) FROM t WHERE ts >= ? AND ts < ?")}


def writer_seconds(writer: int, writers: int, seconds: int) -> list[int]:
    """The seconds of event time one of `writers` sends, in its order: every writers-th second
    from its own (one writer: all, in order). The writers take turns through event time, as ten
    sources of one stream do, so the newest second sent, and the stream's watermark, advance
    throughout the run."""
    return list(range(writer, seconds, writers))


def lateness_s(writers: int, in_flight: int = 1) -> int:
    """The stream's allowed lateness for `writers` concurrent writers keeping to Turns, each with
    `in_flight` Appends in flight: when the newest row to arrive is of a writer's round r (second
    writers * r + w), that writer took round r once every writer had taken round r - 1, and each
    writer takes a round while the batch before it is still to be sent (append_all builds the
    next request during a call), so every writer had its round r - 2 - in_flight answered and a row
    still to come is of round r - 1 - in_flight or later: at most (2 + in_flight) * writers - 1
    seconds older than the newest. Unpaced, writers drifted two rounds and more apart on this
    loaded machine (rows late with 2 * writers seconds of lateness)."""
    return 0 if writers == 1 else (2 + in_flight) * writers


def ingest_seconds(writers: int, in_flight: int = 1) -> int:
    """Seconds of event time an ingest run sends: INGEST_ROWS' worth and, with several writers, as
    many more as their lateness, so that the watermark passes as many seconds past the first full
    window as one writer's does (30 sub-windows leave the window in every case)."""
    return INGEST_ROWS // SECOND_ROWS + lateness_s(writers, in_flight)


class Turns:
    """Writers taking turns through event time: a writer takes its round r (its r-th second of
    writer_seconds) once every writer has taken round r - 1, as sources sending in real time keep
    together; a writer held up holds the others back by at most a round. `taken` (one count per
    writer) and `turn` (a Condition) are shared by processes or threads."""

    def __init__(self, taken, turn):
        self.taken, self.turn = taken, turn

    def take(self, writer: int, r: int, timeout_s: float = 120.0) -> None:
        with self.turn:
            if not self.turn.wait_for(lambda: min(self.taken) >= r, timeout_s):
                raise WriterFailed(f"writer {writer}: the others did not take round {r - 1} within {timeout_s:g} s")
            self.taken[writer] = r + 1
            self.turn.notify_all()

    def rounds(self, writer: int, work: list[list]):
        """`work` (a list of batches per round), each round taken in turn."""
        for r, batches in enumerate(work):
            self.take(writer, r)
            yield from batches


class Batches:
    """Second i of event time: one of a few generated batches with its times moved to
    [i s, (i + 1) s), the same in every process that asks (so answers can be checked)."""

    def __init__(self, rows: int = SECOND_ROWS):
        self.rows = rows
        self.bases = [pa.table(packets(rows, keys=KEYS, seed=b)) for b in range(_BASES)]

    def second(self, i: int) -> pa.Table:
        base = self.bases[i % _BASES]
        return base.set_column(0, "ts", pa.array(base.column("ts").to_numpy() + i * 1000, pa.int64()))

    def split(self, i: int, parts: int) -> list[pa.Table]:
        t = self.second(i)
        step = len(t) // parts
        return [t.slice(k * step, step) for k in range(parts)]


class DuckWindow:
    """The user's alternative: an in-process DuckDB table holding the window, rows appended as
    they come, those older than the window deleted once per second of event time."""

    def __init__(self, threads: int = 2):
        self.con = duckdb.connect(config={"threads": threads})
        self.con.execute("CREATE TABLE t (ts BIGINT, src VARCHAR, bytes BIGINT, lat DOUBLE)")

    def append(self, batch: pa.Table, con=None) -> None:
        (con or self.con).from_arrow(batch).insert_into("t")

    def expire(self, end_s: int, con=None) -> None:
        (con or self.con).execute("DELETE FROM t WHERE ts < ?", [(end_s - WINDOW_S) * 1000])

    def cursor(self):
        return self.con.cursor()

    @staticmethod
    def rows(con, kind: str, lo: int, hi: int) -> list:
        return con.execute(CHECKED[kind][1], [lo, hi]).fetchall()


# the same queries in ClickHouse's dialect (named, typed parameters), at DuckDB's two threads
CH_QUERIES = {kind: sql.replace("ts >= ? AND ts < ?", "ts >= {lo:Int64} AND ts < {hi:Int64}") + " SETTINGS max_threads = 2"
              for kind, (_, sql) in CHECKED.items()}


def chdb_installed() -> bool:
    import importlib.util
    return importlib.util.find_spec("chdb") is not None


class ChWindow:
    """The second peer: chDB (ClickHouse in process) holding the window in memory (a Memory table:
    its scans took a fifth of a MergeTree's partitioned by second here), appended from Arrow, the
    rows older than the window deleted once a second of event time (a mutation, synchronous on a
    Memory table). One session, its calls serialised by a lock (the cursor is the window itself)."""

    def __init__(self, threads: int = 2):
        from chdb import session

        self.session = session.Session()
        self.lock = threading.Lock()
        self.session.query("CREATE TABLE t (ts Int64, src String, bytes Int64, lat Float64) ENGINE = Memory")

    def append(self, batch: pa.Table, con=None) -> None:
        with self.lock:  # (chDB's Python() table function reads the local variable `batch`)
            self.session.query("INSERT INTO t SELECT ts, src, bytes, lat FROM Python(batch)")

    def expire(self, end_s: int, con=None) -> None:
        with self.lock:
            self.session.query("ALTER TABLE t DELETE WHERE ts < {cut:Int64}", params={"cut": (end_s - WINDOW_S) * 1000})

    def cursor(self):
        return self

    @staticmethod
    def rows(con, kind: str, lo: int, hi: int) -> list:
        with con.lock:
            table = con.session.query(CH_QUERIES[kind], "ArrowTable", params={"lo": lo, "hi": hi})
        return [tuple(r.values()) for r in table.to_pylist()]


def _ms(samples: list[float]) -> tuple[float, float]:
    a = np.array(samples) * 1e3
    return float(np.percentile(a, 50)), float(np.percentile(a, 99))


# -- ingest ------------------------------------------------------------------------------------------

def _feed_seconds(target: str, writer: int, writers: int, parts: int, in_flight: int, out, go, turns: Turns,
                  keyed: bool = False) -> None:
    """A writer process: its seconds of event time (writer_seconds), each in `parts` Appends, taken
    in turn with the other writers, once `go` is set (every writer ready: a fast writer's result
    must not come before a slow one's "ready"). A failure is put on `out` for the parent to raise
    (a writer that dies must not count); so is a row the server found late (not stored)."""
    seconds = writer_seconds(writer, writers, ingest_seconds(writers, in_flight))
    try:
        batches = Batches()
        work = [batches.split(i, parts) for i in seconds]
        with Client(target) as c:
            out.put("ready")
            go.wait()
            t0, c0 = time.perf_counter(), time.process_time()
            todo = turns.rounds(writer, work)
            if in_flight > 1 or keyed:  # several calls in flight: the idempotency keys keep each batch once if sent again
                acks = c.append_all("peer", todo, writer_id=f"writer-{writer}", first_batch_id=0, in_flight=in_flight)
            else:  # in order, one in flight, the next one serialised meanwhile
                acks = c.append_all("peer", todo)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            late = sum(a.late for a in acks)
            if late:
                raise WriterFailed(f"{late} rows late (more than the stream's allowed lateness behind the newest row)")
            out.put((sum(len(b) for bs in work for b in bs), wall, cpu))
    except BaseException as e:
        out.put(("failed", f"writer {writer} (seconds {seconds[0]}, {seconds[1] if len(seconds) > 1 else ''}...): {e!r}"))
        raise


class WriterFailed(RuntimeError):
    """A writer (process or thread) of an ingest run failed: the run's rate would count rows never
    written, so the run fails instead."""


def _got(out, timeout: float):
    item = out.get(timeout=timeout)
    if isinstance(item, tuple) and item[0] == "failed":
        raise WriterFailed(item[1])
    return item


def _writers(target: str, writers: int, parts: int, in_flight: int, keyed: bool = False, server=None,
             cpu: dict | None = None, after: Callable[[], None] | None = None) -> float:
    """Rows/s of `writers` processes (_feed_seconds), each `in_flight` calls in flight, started
    together; `keyed`: every Append with an idempotency key (writer_id, batch_id). `cpu`, when
    given, gets the CPU seconds (user + system) of the server process `server` (all its threads)
    and of the writers (theirs, from the start signal to their last answer) over the run, and its rows.
    `after` runs once the last writer answered, before the writer processes are joined (ten of
    them take seconds to exit on a busy machine: not the server's time)."""
    ctx = mp.get_context("spawn")
    out, go = ctx.Queue(), ctx.Event()
    turns = Turns(ctx.Array("i", writers), ctx.Condition())
    procs = [ctx.Process(target=_feed_seconds, args=(target, w, writers, parts, in_flight, out, go, turns, keyed))
             for w in range(writers)]
    for p in procs:
        p.start()
    try:
        got = [_got(out, 120) for _ in procs]
        assert all(g == "ready" for g in got), got
        server_cpu = server.cpu_seconds() if server is not None else 0.0
        t0 = time.perf_counter()
        if cpu is not None:
            cpu.update(go=t0, server_at_go=server_cpu)
        go.set()
        done = [_got(out, 600) for _ in procs]
        wall = time.perf_counter() - t0
        if cpu is not None:
            cpu.update(server=server.cpu_seconds() - server_cpu if server is not None else None,
                       writers=sum(c for _, _, c in done), rows=sum(r for r, _, _ in done))
        if after is not None:
            after()
    finally:
        for p in procs:
            p.join(timeout=30)
    failed = [p.exitcode for p in procs if p.exitcode != 0]
    if failed:
        raise WriterFailed(f"writer processes exited with {failed}")
    return sum(r for r, _, _ in done) / wall


def _create(ws: Client, writers: int = 1, in_flight: int = 1) -> None:
    ws.create_stream("peer", SCHEMA, subwindows=WINDOW_S, subwindow_ms=1000, clock="event", group_by=["src"],
                     allowed_lateness_ms=lateness_s(writers, in_flight) * 1000)


def windowstore_ingest(parts: int, writers: int, in_flight: int | None = None, keyed: bool = False,
                       cpu: dict | None = None, checker: Checker | None = None) -> float:
    """Rows/s into a fresh server: ingest_seconds of event time, each second in `parts` Appends, by
    `writers` processes taking turns through event time (writer_seconds; one writer: in order),
    the stream's lateness lateness_s(writers); `keyed`: each Append with an idempotency key (whose
    content digest the server computes). `cpu`: see _writers; it also gets the newest slide when
    the writers ended, the rate until the run's last due slide was installed ("sealed_rate", not
    counting the writer processes' exit), the server's CPU seconds until then ("server_sealed")
    and its seals' wall times (GetStats seal_ms: "seal_ms"). With `checker`, the window after the
    run is checked against it (CHECKED's "window")."""
    k = IN_FLIGHT.get(parts, 1) if in_flight is None else in_flight
    with ServerProcess() as srv:
        with Client(srv.target) as ws:
            _create(ws, writers, k)

        def until_sealed() -> None:  # rows are answered once sealed: the rate until the last slide due is installed
            with Client(srv.target) as ws:
                cpu["slide"] = ws.query(CHECKED["window"][0]).slide  # how far the seals were when the writers ended
                _settled(ws, ingest_seconds(writers, k) - lateness_s(writers, k) - 2, poll_s=0.01)
                cpu["sealed_rate"] = cpu["rows"] / (time.perf_counter() - cpu["go"])
                cpu["server_sealed"] = srv.cpu_seconds() - cpu["server_at_go"]
                cpu["seal_ms"] = ws.stats("peer")["streams"][0]["seal_ms"]  # each seal's wall time on its thread

        rate = _writers(srv.target, writers, parts, k, keyed, srv, cpu, None if cpu is None else until_sealed)
        if checker is not None:
            with Client(srv.target) as ws:
                answer = ws.query(CHECKED["window"][0])
            checker.check("window", answer)
        return rate


def duckdb_ingest(parts: int, writers: int, peer=DuckWindow, cpu: dict | None = None,
                  checker: Checker | None = None, in_flight: int = 1) -> float:
    """Rows/s into DuckDB in process (or `peer`, chDB's ChWindow): the same batches, each writer a
    thread with its own cursor sending windowstore's writer's seconds (writer_seconds).
    Once per second of event time (the newest any writer finished) the rows that left the window
    of the watermark (that second less windowstore's lateness_s for `in_flight`) are deleted, by
    one thread at a time: two DELETEs of the same rows in concurrent transactions conflict in
    DuckDB ("Conflict on tuple deletion"), so a user serializes them. A writer thread that fails fails the run (its rows
    were never written). `cpu`, when given, gets the CPU seconds of this process (the peer's
    threads and the writer threads) over the run. With `checker`, the rows kept after the run are
    checked against it (CHECKED's "window" over the window of the last delete)."""
    batches = Batches()
    seconds = ingest_seconds(writers, in_flight)
    late = lateness_s(writers, in_flight)
    db = peer()
    work = [[(i, batches.split(i, parts)) for i in writer_seconds(w, writers, seconds)] for w in range(writers)]
    turns = Turns([0] * writers, threading.Condition())
    expiring = threading.Lock()
    state = {"expired": 0}
    errors: list[BaseException] = []

    def write(writer, jobs):
        try:
            con = db.cursor()
            for r, (i, bs) in enumerate(jobs):
                turns.take(writer, r)
                for b in bs:
                    db.append(b, con)
                with expiring:  # once per second of the newest event time, one DELETE at a time
                    if i + 1 > state["expired"]:
                        db.expire(i + 1 - late, con)
                        state["expired"] = i + 1
        except BaseException as e:
            errors.append(e)
    t0, c0 = time.perf_counter(), time.process_time()
    threads = [threading.Thread(target=write, args=(w, jobs)) for w, jobs in enumerate(work)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if cpu is not None:
        cpu.update(process=time.process_time() - c0, rows=sum(b.num_rows for jobs in work for _, bs in jobs for b in bs))
    if errors:
        raise WriterFailed(f"{len(errors)} of {writers} {peer.__name__} writer threads failed: {errors[0]!r}") from errors[0]
    if checker is not None:
        lo, hi = (state["expired"] - late - WINDOW_S) * 1000, seconds * 1000
        got = [tuple(r) for r in peer.rows(db.cursor(), "window", lo, hi)]
        assert got == checker.want("window", lo, hi), (peer.__name__, lo, hi, got)
    return sum(b.num_rows for jobs in work for _, bs in jobs for b in bs) / wall


# -- queries -----------------------------------------------------------------------------------------

class Checker:
    """DuckDB over every row ever appended: what each windowstore answer must equal over the
    window bounds it reported."""

    def __init__(self, batches: Batches):
        self.batches = batches
        self.con = duckdb.connect()
        self.con.execute("CREATE TABLE t (ts BIGINT, src VARCHAR, bytes BIGINT, lat DOUBLE)")
        self.through = 0

    def want(self, kind: str, lo: int, hi: int) -> list[tuple]:
        while self.through * 1000 < hi:
            self.con.from_arrow(self.batches.second(self.through)).insert_into("t")
            self.through += 1
        return [tuple(r) for r in self.con.execute(CHECKED[kind][1], [lo, hi]).fetchall()]

    def check(self, kind: str, answer) -> None:
        want = self.want(kind, answer.window_start_ms, answer.window_end_ms)
        got = [tuple(r) for r in answer.rows]
        assert want == got, (kind, answer.window_start_ms, answer.window_end_ms, got[:3], want[:3])


def _ws_latencies(ws: Client, kind: str, n: int, until: float | None, checker: Checker | None) -> list[float]:
    text = QUERIES[kind][0]
    out, answers = [], []
    while len(out) < n or (until is not None and time.monotonic() < until):
        t0 = time.perf_counter()
        a = ws.query(text)
        out.append(time.perf_counter() - t0)
        if checker is not None and len(answers) < 50:
            answers.append(a)
    for a in answers:
        checker.check(kind, a)
    return out


def _peer_latencies(peer, con, kind: str, bounds: tuple[int, int] | None, n: int, until: float | None,
                    end_ms=None) -> list[float]:
    out = []
    while len(out) < n or (until is not None and time.monotonic() < until):
        lo, hi = bounds if bounds is not None else end_ms()
        if kind != "probe":
            lo = hi - 10_000
        t0 = time.perf_counter()
        peer.rows(con, kind, lo, hi)
        out.append(time.perf_counter() - t0)
    return out


def _settled(ws: Client, slide: int = WINDOW_S - 1, deadline_s: float = 120.0, poll_s: float = 0.05) -> None:
    """Wait until the window reflects every slide the fill made due (`slide`): the fill appends
    faster than seals run, so its last few seals were still running (beside the first "idle"
    queries, which answered an older slide) when the idle measurement began."""
    until = time.monotonic() + deadline_s
    while ws.query("SELECT COUNT(*) FROM peer").slide < slide:
        if time.monotonic() > until:
            raise TimeoutError(f"the window did not reach slide {slide} within {deadline_s:g} s")
        time.sleep(poll_s)


def _ws_feeder(target: str, first: int, stop, out) -> None:
    """Under ingest: seconds from `first` on, back to back, until `stop` is set."""
    try:
        batches = Batches()
        sent = 0
        with Client(target) as c:
            out.put("ready")
            t0 = time.perf_counter()
            i = first
            while not stop.is_set():
                try:
                    c.append("peer", batches.second(i))
                except ResourceExhausted:  # seals behind the rows arriving: back off and retry, as it asks
                    time.sleep(0.01)
                    continue
                i += 1
                sent += SECOND_ROWS
            out.put((sent, time.perf_counter() - t0))
    except BaseException as e:
        out.put(("failed", f"the writer under ingest: {e!r}"))
        raise


def _bare_feeder(target: str, first: int, per_s: float, stop, out) -> None:
    """The transport under the same writer: _ws_feeder's seconds, built into the same Append
    requests, sent at `per_s` a second (windowstore's rate while queried) to bench/bare_server.py,
    which only receives them."""
    import grpc

    from windowstore.clients.client import _OPTIONS, append_request, serialized

    from .bare_server import APPEND
    from .server_bench import _Pace
    try:
        batches = Batches()
        with grpc.insecure_channel(target, options=_OPTIONS) as channel:
            call = channel.unary_unary(APPEND, request_serializer=serialized, response_deserializer=lambda b: b)
            call(append_request("peer", batches.second(first), "", None, None))
            out.put("ready")
            pace, i, sent, t0 = _Pace(per_s), first + 1, 0, time.perf_counter()
            while not stop.is_set():
                pace.wait()
                call(append_request("peer", batches.second(i), "", None, None))
                i += 1
                sent += 1
            out.put((sent, time.perf_counter() - t0))
    except BaseException as e:
        out.put(("failed", f"the writer to the bare transport: {e!r}"))
        raise


def transport_under_ingest(appends_per_s: float, samples: int, busy_s: float) -> dict:
    """The floor of a query's latency under this ingest: a no-op unary call to
    bench/bare_server.py (p50, p99 in ms), idle and while a writer process sends it the same
    one-second Append requests at `appends_per_s`, and the Appends a second it sent."""
    from .server_bench import _bare_latency, _BareServer

    with _BareServer() as bare:
        idle = _ms(np.array(_bare_latency(bare.target, samples)) / 1e3)  # (ms there, seconds here)
        ctx = mp.get_context("spawn")
        out, stop = ctx.Queue(), ctx.Event()
        proc = ctx.Process(target=_bare_feeder, args=(bare.target, WINDOW_S + 1, appends_per_s, stop, out))
        proc.start()
        assert _got(out, 120) == "ready"
        busy = _ms(np.array(_bare_latency(bare.target, 1 << 30, time.monotonic() + busy_s / 3)) / 1e3)
        stop.set()
        sent, wall = _got(out, 120)
        proc.join()
    return {("bare", "idle"): idle, ("bare", "busy"): busy, ("bare", "appends/s"): sent / wall}


def queries(samples: int = 300, busy_s: float = 6.0) -> dict:
    """p50/p99 (ms) per query class, idle and under ingest, for both; ingest rates while queried."""
    batches = Batches()
    res: dict = {}
    with ServerProcess() as srv, Client(srv.target) as ws:
        _create(ws)
        for i in range(WINDOW_S + 1):  # a full window, and one more second so the last seals
            ws.append("peer", batches.second(i))
        _settled(ws)
        checker = Checker(batches)
        for kind in QUERIES:
            ws.query(QUERIES[kind][0])  # once unmeasured (its plan cached), as for DuckDB below
            res[("ws", kind, "idle")] = _ms(_ws_latencies(ws, kind, samples, None, checker))
        ctx = mp.get_context("spawn")
        out, stop = ctx.Queue(), ctx.Event()
        proc = ctx.Process(target=_ws_feeder, args=(srv.target, WINDOW_S + 1, stop, out))
        proc.start()
        assert _got(out, 120) == "ready"
        for kind in QUERIES:
            res[("ws", kind, "busy")] = _ms(_ws_latencies(ws, kind, 0, time.monotonic() + busy_s / 3, checker))
        stop.set()
        rows, wall = _got(out, 120)
        proc.join()
        if proc.exitcode != 0:
            raise WriterFailed(f"the writer under ingest exited with {proc.exitcode}")
        res[("ws", "ingest while queried")] = rows / wall
    res.update(transport_under_ingest(rows / wall / SECOND_ROWS, samples, busy_s))
    res.update(peer_queries(DuckWindow, "duck", batches, samples, busy_s, checker))
    if chdb_installed():
        res.update(peer_queries(ChWindow, "chdb", batches, samples, busy_s, checker))
    return res


def peer_queries(peer, name: str, batches: Batches, samples: int, busy_s: float, checker: Checker) -> dict:
    """A peer's p50/p99 (ms) per query class, idle and under ingest (a thread of this process
    appends: the peer is embedded, no other process can), and its ingest rate while queried; its
    idle answers checked against `checker` (DuckDB over every row)."""
    res: dict = {}
    db = peer()
    for i in range(WINDOW_S + 1):
        db.append(batches.second(i))
        db.expire(i + 1)
    end = (WINDOW_S + 1) * 1000
    for kind in QUERIES:
        lo = end - (WINDOW_S * 1000 if kind == "probe" else 10_000)
        got = peer.rows(db.cursor(), kind, lo, end)  # once unmeasured, and checked
        assert got == checker.want(kind, lo, end), (name, kind, got[:3])
        res[(name, kind, "idle")] = _ms(_peer_latencies(peer, db.cursor(), kind, (end - WINDOW_S * 1000, end), samples, None))
    stop_t = threading.Event()
    state = {"end": end, "rows": 0}
    errors: list[BaseException] = []

    def feed():
        try:
            con = db.cursor()
            i = WINDOW_S + 1
            t0 = time.perf_counter()
            while not stop_t.is_set():
                db.append(batches.second(i), con)
                db.expire(i + 1, con)
                i += 1
                state["end"], state["rows"] = (i) * 1000, state["rows"] + SECOND_ROWS
            state["wall"] = time.perf_counter() - t0
        except BaseException as e:
            errors.append(e)
    feeder = threading.Thread(target=feed)
    feeder.start()
    q = db.cursor()
    for kind in QUERIES:
        res[(name, kind, "busy")] = _ms(_peer_latencies(
            peer, q, kind, None, 0, time.monotonic() + busy_s / 3, end_ms=lambda: (state["end"] - WINDOW_S * 1000,
                                                                                   state["end"])))
    stop_t.set()
    feeder.join()
    if errors:
        raise WriterFailed(f"the {peer.__name__} writer under ingest failed: {errors[0]!r}") from errors[0]
    res[(name, "ingest while queried")] = state["rows"] / state["wall"]
    return res


# the peers: (key in queries()' results, name, ingest), chDB's when it is installed
PEERS = [("duck", "DuckDB", lambda parts, writers, checker: duckdb_ingest(parts, writers, checker=checker)),
         ("chdb", "chDB", lambda parts, writers, checker: duckdb_ingest(parts, writers, ChWindow, checker=checker))]


def run() -> list[dict]:
    out = []
    peers = PEERS if chdb_installed() else PEERS[:1]
    checker = Checker(Batches())
    for parts, writers in ((1, 1), (10, 1), (1, 10)):
        ws_rate = windowstore_ingest(parts, writers, checker=checker)
        rows = SECOND_ROWS // parts
        k = IN_FLIGHT.get(parts, 1)
        for _, name, ingest in peers:
            rate = ingest(parts, writers, checker)
            how = ("deleting what left the window once a second of event time" if name == "DuckDB" else
                   "a Memory table, one session, deleting what left the window once a second of event time")
            out.append({"name": f"ingest, {writers} writer{'s' if writers > 1 else ''}, Arrow batches of {rows:,} rows, "
                                f"{k} Append{'s' if k > 1 else ''} in flight each, "
                                f"{lateness_s(writers)} s of lateness, "
                                f"{ingest_seconds(writers) * SECOND_ROWS / 1e6:.0f} M rows: windowstore (its own process) vs "
                                f"{name} in process ({how})",
                        "value": [ws_rate, rate, ws_rate / rate],
                        "shown": f"{ws_rate / 1e6:.2f} M vs {rate / 1e6:.2f} M rows/s = {ws_rate / rate:.2f}x",
                        "target": f">= 1.5x {name}"})
    res = queries()
    for kind in QUERIES:
        for mode in ("idle", "busy"):
            for key, name, _ in peers:
                (w50, w99), (d50, d99) = res[("ws", kind, mode)], res[(key, kind, mode)]
                goal = 3.0 if kind in SYNOPSIS_BACKED else 1.0
                out.append({"name": f"{kind} ({QUERIES[kind][0]}), {'idle' if mode == 'idle' else 'under ingest'}: "
                                    f"windowstore p50 / p99 {w50:.2f} / {w99:.2f} ms, {name} {d50:.2f} / {d99:.2f} ms; "
                                    f"{name}'s time over windowstore's at p50 / p99",
                            "value": [w50, w99, d50, d99, d50 / w50, d99 / w99],
                            "shown": f"{d50 / w50:.2f}x / {d99 / w99:.2f}x",
                            "target": f">= {goal:g}x"})
    (b50, b99), (u50, u99) = res[("bare", "idle")], res[("bare", "busy")]
    d99 = res[("duck", "probe", "busy")][1]
    out.append({"name": "the transport's own, the floor of a call under this ingest: a no-op unary call to "
                        f"bench/bare_server.py, idle p50 / p99 {b50:.2f} / {b99:.2f} ms, while a writer process sends "
                        f"it the same one-second Appends at windowstore's rate while queried "
                        f"({res[('bare', 'appends/s')]:.0f} a second); beside it the probe's p99 under ingest "
                        f"that DuckDB's / 3 allows",
                "value": [b50, b99, u50, u99, d99 / 3],
                "shown": f"{u50:.2f} / {u99:.2f} ms (the probe's 3x goal: p99 <= {d99 / 3:.2f} ms)",
                "target": ""})
    rates = [res[("ws", "ingest while queried")]] + [res[(key, "ingest while queried")] for key, _, _ in peers]
    out.append({"name": "ingest while the queries above run (one writer, one-second batches, back to back): windowstore vs "
                        + " vs ".join(name for _, name, _ in peers),
                "value": rates, "shown": " vs ".join(f"{r / 1e6:.2f} M" for r in rates) + " rows/s",
                "target": ""})
    return out


def ingest_only(keyed: bool, cases: list[tuple[int, int]], in_flight: int) -> list[dict]:
    """The ingest cases alone, (batches per second, writers) each, windowstore then DuckDB; beside
    the rates, the CPU seconds per million rows of windowstore's server process (all its threads),
    of its writer processes, and of DuckDB's process (its threads and the writer threads): counts
    that depend less on the machine's load than the rates do."""
    out = []
    checker = Checker(Batches())
    for parts, writers in cases:
        ws_cpu: dict = {}
        duck_cpu: dict = {}
        ws_rate = windowstore_ingest(parts, writers, in_flight, keyed, ws_cpu, checker)
        duck_rate = duckdb_ingest(parts, writers, cpu=duck_cpu, checker=checker, in_flight=in_flight)
        per_m = {"server": ws_cpu["server"] / ws_cpu["rows"] * 1e6, "writers": ws_cpu["writers"] / ws_cpu["rows"] * 1e6,
                 "sealed": ws_cpu["server_sealed"] / ws_cpu["rows"] * 1e6,
                 "duckdb": duck_cpu["process"] / duck_cpu["rows"] * 1e6}
        out.append({"name": f"ingest, {writers} writer(s), {ws_cpu['rows'] / 1e6:.0f} M rows in {SECOND_ROWS // parts:,}-row batches, "
                            f"{'keyed' if keyed else 'unkeyed'}, {in_flight} in flight, "
                            f"{lateness_s(writers, in_flight)} s of lateness (windowstore's newest slide as the writers ended "
                            f"{ws_cpu['slide']} of {ingest_seconds(writers, in_flight) - lateness_s(writers, in_flight) - 2})",
                    "value": [ws_rate, duck_rate, ws_rate / duck_rate, per_m["server"], per_m["writers"], per_m["duckdb"]],
                    "shown": f"{ws_rate / 1e6:.2f} M vs {duck_rate / 1e6:.2f} M rows/s = {ws_rate / duck_rate:.2f}x "
                             f"(windowstore's until sealed {ws_cpu['sealed_rate'] / 1e6:.2f} M = "
                             f"{ws_cpu['sealed_rate'] / duck_rate:.2f}x); "
                             f"CPU s per M rows: server {per_m['server']:.3f} ({per_m['sealed']:.3f} until sealed), "
                             f"seal_ms p50 {ws_cpu['seal_ms']['p50']:.1f} p99 {ws_cpu['seal_ms']['p99']:.1f}, "
                             f"writers {per_m['writers']:.3f}, "
                             f"DuckDB {per_m['duckdb']:.3f}",
                    "target": ">= 1.5x DuckDB"})
    return out


def main(argv: list[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m bench.peer_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--ingest-only", action="store_true", help="run the ingest cases only (no queries)")
    ap.add_argument("--keyed", action="store_true",
                    help="with --ingest-only: every Append with an idempotency key (writer_id, batch_id)")
    ap.add_argument("--in-flight", type=int, default=1, help="with --ingest-only: one writer's Appends in flight")
    ap.add_argument("--cases", default="1x1,10x1,1x10,10x10",
                    help="with --ingest-only: PARTSxWRITERS,...: batches per second of event time (1: 10^5 rows, "
                         "10: 10^4 rows) and writer processes")
    args = ap.parse_args(argv)
    if args.ingest_only:
        cases = [tuple(int(x) for x in c.split("x")) for c in args.cases.split(",")]
        results = ingest_only(args.keyed, cases, args.in_flight)  # type: ignore[arg-type]
    else:
        results = run()
    for r in results:
        print(f"{r['name']}: {r['shown']}   (target {r['target']})", flush=True)


if __name__ == "__main__":
    main()
