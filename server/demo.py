"""`windowstore demo` (`make demo`): the whole product for about a minute on embedded defaults.

Starts a server (policy ttu) on a free loopback port, the Spark feeder (rate source -> synthetic
IP packets -> foreachBatch writer), registers periodic top-k and percentile queries, issues
one-time queries, and shows a live view of the answers with their staleness and response time.
Then it shuts everything down and prints what the server measured.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from windowstore.clients import Answer, Client
from windowstore.clients.jobs.feeder import PACKET_SCHEMA

PERIODIC = [
    ("top talkers (10 s, every 1 s)",
     "SELECT src, SUM(bytes) AS bytes FROM packets [RANGE 10 s SLIDE 1 s] GROUP BY src ORDER BY 2 DESC LIMIT 5"),
    ("90th pct bandwidth per source (30 s, every 2 s)",
     "SELECT QUANTILE(total, 0.9), MEDIAN(total), COUNT(*) FROM (SELECT src, SUM(bytes) AS total FROM packets "
     "[RANGE 30 s SLIDE 2 s] GROUP BY src)"),
    ("traffic by protocol (5 s, every 1 s)",
     "SELECT protocol, COUNT(*), AVG(bytes) FROM packets [RANGE 5 s SLIDE 1 s] GROUP BY protocol ORDER BY 2 DESC"),
]
ONETIME = [
    "SELECT COUNT(*), SUM(bytes), MAX(bytes) FROM packets",
    "SELECT COUNT(DISTINCT dst) FROM packets [RANGE 20 s] WHERE protocol = 'udp'",
    "SELECT dst, COUNT(*) FROM packets [RANGE 15 s] WHERE port IN (22, 3306) GROUP BY dst ORDER BY 2 DESC LIMIT 3",
]


def _ms(x) -> str:
    return "     -" if x is None else f"{x:6.1f}"


def _fmt(a) -> str:
    """The first rows of an answer, each value labelled with its column."""
    def value(v) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)
    rows = "; ".join(", ".join(f"{c}={value(v)}" for c, v in zip(a.columns, r)) for r in a.rows[:5])
    return rows or "(empty)"


LEGEND = """\
What you see, every 2 s:
  - each periodic query's newest answer: the slide (sub-window number) it reflects, its staleness (how
    long after that slide's commit it was produced) and its first rows, each value named by its column;
  - one one-time query, its answer, its response time (arrival to reply at the server) and the access
    path it took (a synopsis probe, running per-key totals, or a scan of the window's rows).
The stream slides every second (processing time) over a 30 s window. Spark's rate source makes rows
for every second since its query started: the first micro-batches, sent while Spark warms up, carry
that backlog, so the first windows hold more rows than the feed's rate; counts settle within ~20 s."""


def run(duration_s: float = 60.0, rate: int = 20_000) -> int:
    from .process import PipeTail, ServerProcess

    print("== windowstore demo: server + Spark feeder + periodic and one-time queries", flush=True)
    data_dir = tempfile.mkdtemp(prefix="windowstore-demo-")
    srv = ServerProcess("--policy", "ttu", data_dir=data_dir)
    print(f"server on {srv.target} (policy ttu)", flush=True)
    ws = Client(srv.target)
    ws.create_stream("packets", PACKET_SCHEMA, subwindows=30, subwindow_ms=1000, group_by=["src", "dst", "protocol"])
    feeder = subprocess.Popen([sys.executable, "-m", "windowstore.clients.jobs.feeder", "--target", srv.target,
                               "--stream", "packets", "--rows-per-second", str(rate), "--duration-s",
                               str(duration_s + 30)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
    feeder_output = PipeTail(feeder.stdout, "demo-feeder-output")  # read as it comes: a full pipe would stop it
    print("starting the Spark feeder (the JVM takes a few seconds)...", flush=True)
    latest: dict[str, Answer] = {}
    stop = threading.Event()
    queries = []
    for title, text in PERIODIC:
        q = ws.register(text)
        queries.append(q)
        threading.Thread(target=_follow, args=(srv.target, q.id, title, latest, stop), daemon=True).start()
    t_end = None
    shown = 0
    try:
        while True:
            if t_end is None and ws.describe_stream("packets").get("window_rows") not in (None, "0", 0):
                t_end = time.monotonic() + duration_s
                print(f"data is flowing at {rate:,} rows/s: showing answers for {duration_s:.0f} s\n{LEGEND}",
                      flush=True)
            if t_end is not None and time.monotonic() >= t_end:
                break
            if feeder.poll() is not None:
                feeder_output.join(10.0)
                print(feeder_output.text(), flush=True)
                print("the feeder stopped early", flush=True)
                break
            time.sleep(2.0)
            if t_end is None:
                continue
            shown += 1
            print(f"\n--- t+{duration_s - (t_end - time.monotonic()):4.0f} s " + "-" * 60, flush=True)
            for title, _ in PERIODIC:
                a = latest.get(title)
                if a is not None:
                    print(f"  {title:<48} slide {a.slide:>4}  staleness {_ms(a.staleness_ms)} ms   {_fmt(a)}", flush=True)
            text = ONETIME[shown % len(ONETIME)]
            a = ws.query(text)
            print(f"  one-time: {text}\n    -> {_fmt(a)}   response {a.response_ms:.2f} ms, staleness "
                  f"{_ms(a.staleness_ms).strip()} ms, access: {a.access}", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    finally:
        stop.set()
        stats = ws.stats("packets")
        for q in queries:
            ws.unregister(q.id)
        feeder.terminate()
        try:
            feeder.wait(30)
        except subprocess.TimeoutExpired:
            feeder.kill()
        ws.close()
        code, out, err = srv.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    s = stats["streams"][0]
    print("\n== what the server measured", flush=True)
    print(f"  rows accepted {s['accepted_rows']}, slides {s['slides']}, queries answered {s['queries']}, "
          f"aborts {s['aborts']}, late rows {s['late_rows']}", flush=True)
    for key, label in (("staleness_ms", "answer staleness"), ("response_ms", "query response"),
                       ("slide_delay_ms", "slide delay")):
        p = s[key]
        print(f"  {label:<18} p50 {p['p50']:.1f} ms   p99 {p['p99']:.1f} ms   max {p['max']:.1f} ms", flush=True)
    print(f"server stopped (exit {code})", flush=True)
    return 0 if code == 0 else 1


def _follow(target: str, query_id: str, title: str, latest: dict, stop: threading.Event) -> None:
    with Client(target) as ws:
        try:
            for a in ws.subscribe(query_id):
                latest[title] = a
                if stop.is_set():
                    return
        except Exception:  # noqa: BLE001 - ends when the query is unregistered or the server stops
            return
