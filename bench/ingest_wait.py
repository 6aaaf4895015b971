"""What a query under ingest waits behind: the peer bench's "under ingest" queries (bench/peer_bench.py:
the window filled, then one writer process appending one-second 10^5-row batches back to back
while this process asks the probe, top-k and filter queries in turn) against a server whose
event loop, collector and Query handler are timed, and the threads of all three processes read
from /proc (schedstat: time running and time runnable but waiting for a core).

    python -m bench.ingest_wait [--busy-s 12]

Prints, for the ingest span only:
- each query class's p50 / p99 as the client saw it, and its slowest 5% split into the time
  before the server's handler began (the client's send, gRPC's receive, the loop reaching the
  call), in the handler, and after it (the reply's way back), matched call by call;
- the loop's callbacks longer than 1 ms by kind (the task's awaited chain after its step), their
  wall and thread CPU time, and the collections of the collector by thread;
- each busy thread's share of the span running and waiting in the run queue.

The instrumentation (a wrapper around asyncio's Handle._run, a gc callback and a wrapper around
WindowStoreService.Query) runs in the server process only (`serve`) and costs the loop a few
microseconds per callback: read its figures as shares and against a run of the same build."""
from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import json
import multiprocessing as mp
import os
import sys
import tempfile
import threading
import time
from asyncio import events

import numpy as np

from windowstore.clients import Client
from windowstore.server.process import ServerProcess

from . import peer_bench as pb


# -- in the server process --------------------------------------------------------------------------
def _chain(task: asyncio.Task) -> str:
    """The coroutines a task awaits, outermost first (what it was waiting for or went on to)."""
    names, c = [], task.get_coro()
    while c is not None and len(names) < 12:
        names.append(getattr(c, "__qualname__", type(c).__name__))
        c = getattr(c, "cr_await", None) or getattr(c, "gi_yieldfrom", None)
    return ">".join(n for n in names[3:] if n != "coroutine_wrapper")


def _kind(handle) -> str:
    task = getattr(handle._callback, "__self__", None)
    if isinstance(task, asyncio.Task):
        return "done" if task.done() else "task " + _chain(task)
    fn = getattr(handle._callback, "func", handle._callback)  # a functools.partial: what it calls
    return getattr(fn, "__qualname__", type(fn).__name__)[:100]


def serve(out: str, argv: list[str]) -> int:
    """The server (`windowstore serve ARGV`), instrumented; its records go to `out` at exit."""
    slow: list[tuple] = []  # (time, wall ms, thread CPU ms, kind after the step)
    collections_: list[tuple] = []  # (time, generation, ms, thread name)
    queries: list[tuple] = []  # (handler start, handler end, thread CPU ms)
    started: dict[int, float] = {}

    def on_gc(phase, info):
        tid = threading.get_ident()
        if phase == "start":
            started[tid] = time.perf_counter()
        elif tid in started:
            ms = (time.perf_counter() - started.pop(tid)) * 1e3
            collections_.append((time.time(), info["generation"], ms, threading.current_thread().name))
    gc.callbacks.append(on_gc)

    run = events.Handle._run

    def timed(self):
        t0, c0 = time.perf_counter(), time.thread_time()
        run(self)
        wall = (time.perf_counter() - t0) * 1e3
        if wall > 1.0:
            slow.append((time.time(), wall, (time.thread_time() - c0) * 1e3, _kind(self)))
    events.Handle._run = timed  # type: ignore[method-assign]

    from windowstore.server import service
    query = service.WindowStoreService.Query

    async def timed_query(self, request, context):
        t0, c0 = time.time(), time.thread_time()
        try:
            return await query(self, request, context)
        finally:
            queries.append((t0, time.time(), (time.thread_time() - c0) * 1e3))
    service.WindowStoreService.Query = timed_query  # type: ignore[method-assign]

    from windowstore.server.cli import main
    try:
        return main(["serve", *argv])
    finally:
        with open(out, "w") as f:
            json.dump({"slow": slow, "gc": collections_, "queries": queries}, f)


# -- the client ---------------------------------------------------------------------------------------
def _sched(pid: int) -> dict[str, tuple[int, int, str]]:
    """tid -> (ns running, ns waiting in the run queue, name) of a process's threads."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                run, wait, _ = f.read().split()
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                out[tid] = (int(run), int(wait), f.read().strip())
        except OSError:  # the thread ended meanwhile
            pass
    return out


def measure(busy_s: float) -> dict:
    fd, records = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    srv = ServerProcess(serve=("-m", "bench.ingest_wait", "serve", records))
    target = srv.target
    batches = pb.Batches()
    calls: list[tuple[str, float, float]] = []
    try:
        with Client(target) as ws:
            pb._create(ws)
            for i in range(pb.WINDOW_S + 1):
                ws.append("peer", batches.second(i))
            pb._settled(ws)
            for kind in pb.QUERIES:
                ws.query(pb.QUERIES[kind][0])
            ctx = mp.get_context("spawn")
            out, stop = ctx.Queue(), ctx.Event()
            proc = ctx.Process(target=pb._ws_feeder, args=(target, pb.WINDOW_S + 1, stop, out))
            proc.start()
            assert pb._got(out, 120) == "ready"
            before = {who: _sched(pid) for who, pid in (("server", srv.proc.pid), ("client", os.getpid()),
                                                         ("writer", proc.pid))}
            t0 = time.time()
            for kind in pb.QUERIES:
                until = time.monotonic() + busy_s / len(pb.QUERIES)
                while time.monotonic() < until:
                    a = time.time()
                    ws.query(pb.QUERIES[kind][0])
                    calls.append((kind, a, time.time()))
            t1 = time.time()
            after = {who: _sched(pid) for who, pid in (("server", srv.proc.pid), ("client", os.getpid()),
                                                        ("writer", proc.pid))}
            stop.set()
            rows, wall = pb._got(out, 120)
            proc.join()
    finally:
        code, _, err = srv.stop(timeout=60)
    if code != 0:
        raise RuntimeError(f"the server exited with {code}: {err[-2000:]}")
    with open(records) as f:
        rec = json.load(f)
    os.unlink(records)
    threads = []
    for who in before:
        for tid, (run, wait, name) in after[who].items():
            if tid in before[who]:
                r, w = run - before[who][tid][0], wait - before[who][tid][1]
                if r > 0.02 * (t1 - t0) * 1e9:
                    threads.append((who, name, tid, r / 1e9 / (t1 - t0), w / 1e9 / (t1 - t0)))
    return {"span": (t0, t1), "calls": calls, "rec": rec, "threads": threads, "ingest": rows / wall}


def report(m: dict) -> None:
    t0, t1 = m["span"]
    calls = m["calls"]
    handled = [q for q in m["rec"]["queries"] if t0 - 0.01 <= q[0] <= t1 + 0.01][-len(calls):]
    assert len(handled) == len(calls), (len(handled), len(calls))  # one client, one call at a time
    print(f"ingest span {t1 - t0:.1f} s, {m['ingest'] / 1e6:.2f} M rows/s appended")
    for kind in pb.QUERIES:
        r = np.array([((c1 - c0) * 1e3, (s0 - c0) * 1e3, (s1 - s0) * 1e3, (c1 - s1) * 1e3, cpu)
                      for (k, c0, c1), (s0, s1, cpu) in zip(calls, handled) if k == kind])
        slowest = r[r[:, 0] >= np.percentile(r[:, 0], 95)]
        p50, p99 = np.percentile(r[:, 0], [50, 99])
        b, h, a, cpu = (slowest[:, i].mean() for i in (1, 2, 3, 4))
        print(f"{kind}: p50 / p99 {p50:.2f} / {p99:.2f} ms; its slowest 5% ({len(slowest)}) on average "
              f"{slowest[:, 0].mean():.2f} ms: before the handler {b:.2f}, in it {h:.2f} (CPU {cpu:.2f}), after {a:.2f}")
    slow = [s for s in m["rec"]["slow"] if t0 <= s[0] <= t1]
    print(f"loop callbacks over 1 ms: {len(slow)}, wall {sum(s[1] for s in slow):.0f} ms, "
          f"thread CPU {sum(s[2] for s in slow):.0f} ms")
    by = collections.defaultdict(list)
    for _, wall, cpu, kind in slow:
        by[kind].append((wall, cpu))
    for kind, v in sorted(by.items(), key=lambda kv: -sum(w for w, _ in kv[1]))[:8]:
        walls = sorted(w for w, _ in v)
        print(f"  {len(v):5d}  wall {sum(walls):7.0f} ms (max {walls[-1]:6.2f})  CPU {sum(c for _, c in v):6.0f} ms  {kind[:110]}")
    gcs = collections.defaultdict(list)
    for t, gen, ms, name in m["rec"]["gc"]:
        if t0 <= t <= t1:
            gcs[(name, gen)].append(ms)
    for (name, gen), v in sorted(gcs.items()):
        print(f"collections of generation {gen} on {name}: {len(v)}, {sum(v):.1f} ms, the longest {max(v):.2f} ms")
    for who, name, tid, run, wait in sorted(m["threads"], key=lambda x: -x[3]):
        print(f"{who} thread {tid} ({name}): running {run:.0%} of the span, waiting for a core {wait:.0%}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:
        return serve(argv[1], argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--busy-s", type=float, default=12.0, help="seconds of queries under ingest (split over the classes)")
    args = ap.parse_args(argv)
    report(measure(args.busy_s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
