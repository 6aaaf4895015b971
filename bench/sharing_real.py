"""The thesis's experiment of 8.5 (figures 8.7-8.10) on the real server: for each --sharing mode a
`windowstore serve --in-memory --sharing MODE` on 127.0.0.1, one stream of packet headers fed at a
paced rate, the 8.5 workload registered as periodic queries through the SDK, one one-time query a
second beside them. Measured from the answers' provenance (ReadAnswers after the run): throughput
(answers delivered per second), latency (per query, the average slides beyond its SLIDE between
consecutive answers, averaged over the queries: 8.5.1), late answers, the one-time queries'
response time. Some answers are checked against the same query run alone AS OF their slide.
Writes OUT/experiment.json and, with matplotlib, OUT/throughput_RATE.png and OUT/latency_RATE.png.

    python -m bench.sharing_real [--out docs/sharing/real] [--seconds 20] [--warmup 5] [--subwindow-ms 100]
                                 [--policy ttu] [--streams 1] [--register-s 60] [--cpu-quota CORES]
                                 [--ingest inline|writer]

`make sharing-experiment-real` runs it twice (docs/sharing.md): under the server's default policy
with every query on one stream, and as the thesis ran it, answers as of their begin and never
aborted (--policy ws) with a stream, hence a basic interval synopsis, per group (--streams 8).

The workload's WINDOW and SLIDE come from the simulation's generator (txn/sharing/experiment.py,
`workload`), so the simulated and the real run register the same lengths and periods.
"""
from __future__ import annotations

import argparse
import contextlib
import enum
import json
import multiprocessing
import random
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from .cpu_quota import CpuQuota
from windowstore.clients import Client
from windowstore.server.process import ServerProcess
from windowstore.txn.sharing.experiment import MODES, workload


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


STREAM = "p"
SCHEMA = {"ts": "int64", "src": "string", "dst": "string", "proto": "int64", "port": "int64", "bytes": "int64"}
# 8.5.1 names six keys of the bandwidth counters for its eight groups (source, destination, the pair,
# protocol, port, protocol-port pairs); the two more here are source-protocol and destination-port.
KEYS = (("src",), ("dst",), ("src", "dst"), ("proto",), ("port",), ("proto", "port"), ("src", "proto"), ("dst", "port"))
PER_GROUP = (5, 10, 20, 30)
RATES = (1500, 3000)
KEEP = 200          # sub-windows the stream keeps: twice the longest WINDOW, so recent answers can be read AS OF SLIDE
TOP_K = 10


@dataclass(frozen=True)
class Panel:
    """One periodic query of the workload: `text` has a `{window}` hole for its window clause."""

    group: int
    length: int
    period: int
    text: str
    stream: str = STREAM

    def periodic(self) -> str:
        return self.text.format(window=f"[RANGE {self.length} SUBWINDOWS SLIDE {self.period} SUBWINDOWS]")

    def alone(self, slide: int) -> str:
        return self.text.format(window=f"[RANGE {self.length} SUBWINDOWS] AS OF SLIDE {slide}")


def panels(per_group: int, seed: int = 1, streams: int = 1) -> list[Panel]:
    """8.5.1's queries: per group a key of KEYS, top-k lists (even j) and quantiles (odd j) over the
    bandwidth (SUM(bytes)) per key; WINDOW and SLIDE as the simulation draws them. `streams` 1: all
    on one stream (the store forms one CS2 group of them); len(KEYS): group i on stream p<i>, each
    fed the same packets (8.5.1's eight basic interval synopses, one per group)."""
    out = []
    for m in workload(per_group, seed).members.values():
        i, j = m.key
        keys = ", ".join(KEYS[i])
        stream = STREAM if streams == 1 else f"{STREAM}{i}"
        per_key = f"SELECT {keys}, SUM(bytes) AS b FROM {stream} {{window}} GROUP BY {keys}"
        text = (f"{per_key} ORDER BY b DESC, {keys} LIMIT {TOP_K}" if j % 2 == 0
                else f"SELECT QUANTILE(b, 0.{(5, 9, 99)[j // 2 % 3]}) FROM ({per_key})")
        out.append(Panel(i, m.length, m.period, text, stream))
    return out


def packets(rng: np.random.Generator, rows: int, scale: int, ts: int) -> dict:
    """`rows` packet headers: 1,000 source and destination addresses, 100 protocols and ports,
    times `scale` (8.5.1 doubles every field's distinct values at 3,000 tuples/s)."""
    def names(prefix: str, n: int) -> list[str]:
        return [f"{prefix}{v}" for v in rng.integers(0, n, rows)]
    return {"ts": np.full(rows, ts, dtype=np.int64), "src": names("s", 1000 * scale), "dst": names("d", 1000 * scale),
            "proto": rng.integers(0, 100 * scale, rows), "port": rng.integers(0, 100 * scale, rows),
            "bytes": rng.integers(40, 1500, rows)}


class Ingest(enum.StrEnum):
    """How the paced rows reach the server. INLINE: the driving process appends and slides each
    stream in turn, synchronously, beside its one-time queries: an overloaded server receives its
    rows later (the pace falls behind), so it sets its own rate. WRITER: a separate process with a
    thread per stream, each appending and sliding its stream on the wall clock's deadlines (behind:
    no pause, catching up), so the rate the server is offered does not wait for the other streams'
    calls or the driver's; what the server cannot take in still slows it (a call waits for its
    reply), as a real writer's would."""

    INLINE = "inline"
    WRITER = "writer"


def write(target: str, streams: list[str], rows: int, scale: int, subwindow_ms: int, seed: int, first: int,
          start: float, total: float, done, stop) -> None:
    """The WRITER ingest (run in its own process): a thread per stream appends sub-window k's
    packets (the same in every stream, drawn from (seed, k)) and slides it, for k from `first`, at
    `start` (time.monotonic, the same clock in every process) + n sub-windows, until `total` seconds
    or `stop`; `done[i]`: the sub-windows stream i has slid. A thread's error stops the others and
    fails the process (its exit code tells the driver)."""
    failed: list[BaseException] = []

    def one(i: int, name: str) -> None:
        try:
            with Client(target, timeout=120) as ws:
                n = 0
                while time.monotonic() - start < total and not stop.is_set():
                    k = first + n
                    ws.append(name, packets(np.random.default_rng((seed, k)), rows, scale, k * subwindow_ms))
                    ws.slide(name)
                    n += 1
                    done[i] = n
                    pause = start + n * subwindow_ms / 1000 - time.monotonic()
                    if pause > 0:
                        stop.wait(pause)
        except BaseException as e:
            failed.append(e)
            stop.set()
    threads = [threading.Thread(target=one, args=(i, name), name=f"writer-{name}") for i, name in enumerate(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failed:
        raise failed[0]


@dataclass
class Drive:
    """What one run against a server saw: every kept answer per query (query id -> its Panel and
    answers), the measured span in server wall-clock ms and in slides, the one-time queries."""

    panels: dict[str, Panel]
    answers: dict[str, list] = field(default_factory=dict)
    t0_ms: float = 0.0
    t1_ms: float = 0.0
    slide0: int = 0
    slide1: int = 0
    onetime_ms: list[float] = field(default_factory=list)       # client wall clock, call to answer
    onetime_server_ms: list[float] = field(default_factory=list)  # the server's response_ms
    register_s: float = 0.0
    counters: dict = field(default_factory=dict)  # GetStats' `counters` over the measured span (end minus start)
    server_cpu_s: float = 0.0  # the server process's CPU seconds over the measured span (all threads)


def counters(stats: dict) -> dict[str, int]:
    """GetStats' counters the figures report: the periodic transactions' (committed, aborts,
    restarts, fallbacks, failed) and sharing's (joint executions, their answers, early and late runs, aborts,
    fallbacks: under ttu, executions that held their window after aborts)."""
    periodic, sharing = stats.get("periodic", {}), stats.get("sharing", {})
    return {**{f"periodic_{k}": periodic.get(k, 0) for k in ("committed", "aborts", "restarts", "fallbacks", "failed")},
            **{f"shared_{k}": sharing.get(k, 0) for k in ("executions", "answers", "early_runs", "late_runs", "aborts",
                                                          "fallbacks")}}


class SlowRegistration(Exception):
    """Registering the workload took longer than the run's budget: `registered` queries in `seconds`."""

    def __init__(self, registered: int, seconds: float):
        super().__init__(f"{registered} queries registered in {seconds} s")
        self.registered, self.seconds = registered, seconds


def drive(target: str, items: list[Panel], rate: int, subwindow_ms: int, warmup_s: float, seconds: float,
          seed: int = 1, scale: int = 1, register_s: float = 60.0, cpu: Callable[[], float] = lambda: 0.0,
          registered: Callable[[], None] = lambda: None, ingest: Ingest = Ingest.INLINE) -> Drive:
    """Fill the stream's window (KEEP sub-windows, back to back), register `items`, then append and
    slide at `rate` rows/s in sub-windows of `subwindow_ms` (paced as `ingest` says, on a manual
    clock) for `warmup_s` and then `seconds` measured, with one one-time query a second on another
    thread.
    SlowRegistration when registering takes more than `register_s` (the run is not made). `cpu()`:
    the server's CPU seconds so far (its figure over the measured span is `server_cpu_s`).
    `registered()` is called once the queries are registered, before the paced ingest."""
    with Client(target, timeout=120) as ws:
        return _drive(ws, target, items, rate, subwindow_ms, warmup_s, seconds, seed, scale, register_s, cpu, registered,
                      ingest)


def _drive(ws: Client, target: str, items: list[Panel], rate: int, subwindow_ms: int, warmup_s: float, seconds: float,
           seed: int, scale: int, register_s: float, cpu: Callable[[], float], registered: Callable[[], None],
           ingest_by: Ingest) -> Drive:
    rng = np.random.default_rng(seed)
    streams = sorted({p.stream for p in items})
    for name in streams:
        ws.create_stream(name, schema=SCHEMA, subwindows=KEEP, subwindow_ms=subwindow_ms, clock="manual")
    rows = max(1, rate * subwindow_ms // 1000)

    def ingest(k: int) -> None:  # one sub-window's packets, the same into every stream, then their slides
        batch = packets(rng, rows, scale, k * subwindow_ms)
        for name in streams:
            ws.append(name, batch)
            ws.slide(name)
    for k in range(KEEP):
        ingest(k)
    log(f"window filled ({KEEP} sub-windows)")
    run = Drive({})
    t = time.monotonic()
    for p in items:
        if time.monotonic() - t > register_s:
            raise SlowRegistration(len(run.panels), round(time.monotonic() - t, 1))
        run.panels[ws.register(p.periodic()).id] = p
    run.register_s = round(time.monotonic() - t, 2)
    log(f"{len(items)} queries registered in {run.register_s} s")
    registered()
    stop = threading.Event()

    def onetime() -> None:  # 8.5.1: bandwidth statistics of a random source address, about once a second
        r = random.Random(seed)
        with Client(target, timeout=60) as c:
            while not stop.wait(1.0):
                t = time.perf_counter()
                a = c.query(f"SELECT SUM(bytes), COUNT(*) FROM {streams[0]} [RANGE 100 SUBWINDOWS] "
                            f"WHERE src = 's{r.randrange(1000 * scale)}'")
                run.onetime_ms.append(1000 * (time.perf_counter() - t))
                run.onetime_server_ms.append(a.response_ms)
    prober = threading.Thread(target=onetime, name="onetime", daemon=True)
    prober.start()
    k = KEEP
    before: dict = {}
    cpu0 = 0.0
    start = time.monotonic()
    total = warmup_s + seconds
    n = 0
    try:
        if ingest_by is Ingest.INLINE:
            while (now := time.monotonic() - start) < total:
                if not run.t0_ms and now >= warmup_s:
                    run.t0_ms, run.slide0 = time.time() * 1000, k - 1
                    before = counters(ws.stats())
                    cpu0 = cpu()
                ingest(k)
                k += 1
                n += 1
                pause = start + n * subwindow_ms / 1000 - time.monotonic()  # pacing (behind: no pause, catch up)
                if pause > 0:
                    time.sleep(pause)
            run.t1_ms, run.slide1 = time.time() * 1000, k - 1
        else:
            spawn = multiprocessing.get_context("spawn")  # (no fork of a process holding gRPC channels)
            done, halt = spawn.Array("q", len(streams)), spawn.Event()
            writer = spawn.Process(target=write, args=(target, streams, rows, scale, subwindow_ms, seed, k, start,
                                                       total, done, halt), name="writer")
            writer.start()
            try:
                stop.wait(max(0.0, start + warmup_s - time.monotonic()))
                run.t0_ms, run.slide0 = time.time() * 1000, k + max(done) - 1  # (the stream that slid the most)
                before = counters(ws.stats())
                cpu0 = cpu()
                stop.wait(max(0.0, start + total - time.monotonic()))
                run.t1_ms = time.time() * 1000
            finally:
                halt.set()
                writer.join(timeout=120)
                if writer.is_alive():
                    writer.kill()
            if writer.exitcode:
                raise RuntimeError(f"the writer process failed: exit code {writer.exitcode}")
            run.slide1 = k + max(done) - 1  # (its calls in flight at the end included: no answer beyond it)
        run.server_cpu_s = cpu() - cpu0
        after = counters(ws.stats())
        run.counters = {key: after[key] - before.get(key, 0) for key in after}
    finally:
        stop.set()
        prober.join(timeout=120)
    log(f"ingest stopped at slide {run.slide1}")
    for qid in run.panels:
        run.answers[qid] = ws.read_answers(qid, after_slide=-1, limit=10_000)[0]
    log("answers read")
    return run


def lateness(answers: list, period: int) -> list[int]:
    """Slides beyond `period` between each answer and the one before it (8.5.1's latency; 0 when
    on time or early), for every answer but the first: computed from the answers' slides."""
    return [max(0, b.slide - a.slide - period) for a, b in zip(answers, answers[1:])]


def figures(run: Drive) -> dict:
    """The measured figures of one run, from its answers alone: throughput, answers delivered per
    second in the measured span; latency, per query the mean of `lateness` over its answers
    delivered in the span, averaged over the queries answered there (None when none was; the
    queries never answered in the span are counted apart, `unanswered_queries`); late answers (server's
    late_slides > 0); the one-time queries' response times; answers per CPU second of the server
    (8.5's throughput is that of an overloaded server, its capacity over the cost of an answer: on
    a shared machine whose other load moves the capacity, answers per CPU second is the cost's
    part of it, ingest and one-time queries included)."""
    span_s = (run.t1_ms - run.t0_ms) / 1000
    delivered = late_answers = 0
    per_query = []
    starved = 0
    for qid, p in run.panels.items():
        got = sorted(run.answers[qid], key=lambda a: (a.slide, a.execution))
        inside = [i for i, a in enumerate(got) if run.t0_ms <= a.answered_ms <= run.t1_ms]
        delivered += len(inside)
        late_answers += sum(got[i].late_slides > 0 for i in inside)
        within = set(inside)
        gaps = [x for i, x in enumerate(lateness(got, p.period), start=1) if i in within]
        if gaps:
            per_query.append(sum(gaps) / len(gaps))
        elif not inside:
            starved += 1
    slides = run.slide1 - run.slide0
    ot = sorted(run.onetime_ms)
    return {"register_s": run.register_s, "answers": delivered, "seconds": round(span_s, 2), "slides": slides,
            "slides_per_s": round(slides / span_s, 2) if span_s else 0.0,
            "throughput": round(delivered / span_s, 2) if span_s else 0.0,
            "server_cpu_s": round(run.server_cpu_s, 2),
            "answers_per_cpu_s": round(delivered / run.server_cpu_s, 2) if run.server_cpu_s else None,
            "latency": round(sum(per_query) / len(per_query), 3) if per_query else None,  # (no answer: none)
            "late_answers": late_answers, "unanswered_queries": starved,
            "onetime": len(ot), "onetime_ms_mean": round(sum(ot) / len(ot), 1) if ot else None,
            "onetime_ms_max": round(ot[-1], 1) if ot else None,
            "onetime_server_ms_mean": round(sum(run.onetime_server_ms) / len(ot), 1) if ot else None,
            **run.counters}


def check(ws: Client, run: Drive, count: int, seed: int = 1) -> int:
    """`count` answers of the measured span (all when fewer), each against the same query run alone
    AS OF its slide (the stream's slides are held still now). Raises on a difference; returns the
    number checked."""
    r = random.Random(seed)
    latest = run.slide1
    pool = [(qid, a) for qid, ans in run.answers.items() for a in ans
            if a.slide > run.slide0 and a.slide - run.panels[qid].length + 1 > latest - KEEP]
    for qid, a in r.sample(pool, min(count, len(pool))):
        again = ws.query(run.panels[qid].alone(a.slide))
        if a.rows != again.rows:
            raise AssertionError(f"{qid} at slide {a.slide}: shared {a.rows} != alone {again.rows}")
    return min(count, len(pool))


@dataclass
class Point:
    mode: str
    queries: int
    rate: int
    subwindow_ms: int
    checked: int
    figures: dict
    skipped: str = ""   # why the point has no figures (registering the workload took too long)
    policy: str = "ttu"
    streams: int = 1
    cpu_quota: float | None = None  # the server's CPU cap in cores while paced (bench/cpu_quota.py), None: none
    ingest: str = Ingest.INLINE.value


def point(mode: str, per_group: int, rate: int, subwindow_ms: int, warmup_s: float, seconds: float,
          checks: int, seed: int, register_s: float, policy: str = "ttu", streams: int = 1,
          cpu_quota: float | None = None, ingest: Ingest = Ingest.INLINE) -> Point:
    """One mode at one point. With `cpu_quota` the server runs the paced ingest (warm-up and
    measured span) under that many cores of CPU; registering and the checks after are not capped."""
    items = panels(per_group, seed, streams)
    scale = 2 if rate >= 3000 else 1
    with ServerProcess("--sharing", mode, "--policy", policy, "--max-periodic-queries", "10000") as s, \
            contextlib.ExitStack() as capped:
        quota = capped.enter_context(CpuQuota(cpu_quota)) if cpu_quota else None
        try:
            run = drive(s.target, items, rate, subwindow_ms, warmup_s, seconds, seed, scale, register_s, s.cpu_seconds,
                        (lambda: quota.add(s.proc.pid)) if quota else (lambda: None), ingest)
        except SlowRegistration as e:
            return Point(mode, len(items), rate, subwindow_ms, 0, {"registered": e.registered, "register_s": e.seconds},
                         f"registering {len(items)} queries took more than {register_s:g} s ({e})", policy, streams,
                         cpu_quota, ingest.value)
        figs = figures(run)
        if quota:
            figs["throttled_s"] = round(quota.throttled_s(), 2)
            capped.close()
        with Client(s.target, timeout=120) as ws:
            checked = check(ws, run, checks, seed)
    return Point(mode, len(items), rate, subwindow_ms, checked, figs, "", policy, streams, cpu_quota, ingest.value)


def plot(rows: list[dict], out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for rate in sorted({r["rate"] for r in rows}):
        for key, ylabel in (("throughput", "queries re-executed per second"),
                            ("latency", "slides beyond SLIDE, average per query")):
            fig, ax = plt.subplots(figsize=(6, 4))
            for m in MODES:
                pts = sorted((r["queries"], r["figures"][key]) for r in rows
                             if r["mode"] == m.value and r["rate"] == rate and r["figures"].get(key) is not None)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=m.value)
            ax.set_xlabel("periodic queries")
            ax.set_ylabel(ylabel)
            first = rows[0]
            ax.set_title(f"{key}, {rate} tuples/s, real server\n--policy {first.get('policy', 'ttu')}, "
                         f"{first.get('streams', 1)} stream(s)", fontsize=10)
            ax.legend()
            fig.tight_layout()
            fig.savefig(out / f"{key}_{rate}.png", dpi=90)
            plt.close(fig)


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="docs/sharing/real")
    ap.add_argument("--seconds", type=float, default=20.0, help="measured seconds per point")
    ap.add_argument("--warmup", type=float, default=5.0, help="paced seconds before measuring")
    ap.add_argument("--subwindow-ms", type=int, default=100)
    ap.add_argument("--checks", type=int, default=5, help="answers per point checked against the query alone AS OF its slide")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mode", action="append", choices=[m.value for m in MODES])
    ap.add_argument("--per-group", type=int, action="append", choices=PER_GROUP)
    ap.add_argument("--rate", type=int, action="append")
    ap.add_argument("--policy", default="ttu", help="the servers' --policy (ttu: the default; ws: answers as of their "
                                                    "begin, never aborted, as 8.4.1's re-executions)")
    ap.add_argument("--register-s", type=float, default=60.0,
                    help="seconds registering a point's queries may take; beyond, the point and the mode's larger ones are skipped")
    ap.add_argument("--streams", type=int, choices=(1, len(KEYS)), default=1,
                    help=f"1: every query on one stream; {len(KEYS)}: a stream per group, fed the same packets")
    ap.add_argument("--cpu-quota", type=float, metavar="CORES",
                    help="cap the server at CORES of CPU while paced (Linux cgroups, root): the overload the "
                         "thesis's machine was in at these points (bench/cpu_quota.py)")
    ap.add_argument("--ingest", choices=[i.value for i in Ingest], default=Ingest.INLINE.value,
                    help="inline: the driver appends and slides each stream in turn (an overloaded server gets its "
                         "rows later); writer: a separate process, a thread per stream, paced by the wall clock")
    ap.add_argument("--replot", action="store_true", help="only draw the plots again from OUT/experiment.json")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if args.replot:
        rows = json.loads((out / "experiment.json").read_text())
        plot(rows, out)
        return rows
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    too_slow: dict[str, int] = {}  # mode -> the fewest queries it could not register in time
    for rate in args.rate or RATES:
        for k in args.per_group or PER_GROUP:
            for m in args.mode or [m.value for m in MODES]:
                if m in too_slow and len(KEYS) * k >= too_slow[m]:
                    p = asdict(Point(m, len(KEYS) * k, rate, args.subwindow_ms, 0, {},
                                     f"not run: registering {too_slow[m]} queries took more than {args.register_s:g} s",
                                     args.policy, args.streams, args.cpu_quota, args.ingest))
                else:
                    p = asdict(point(m, k, rate, args.subwindow_ms, args.warmup, args.seconds, args.checks, args.seed,
                                     args.register_s, args.policy, args.streams, args.cpu_quota, Ingest(args.ingest)))
                    if p["skipped"]:
                        too_slow[m] = min(too_slow.get(m, p["queries"]), p["queries"])
                print(json.dumps(p), flush=True)
                rows.append(p)
                (out / "experiment.json").write_text(json.dumps(rows, indent=1) + "\n")
    plot(rows, out)
    return rows


if __name__ == "__main__":
    main()
