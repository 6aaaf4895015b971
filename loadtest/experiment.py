"""The experiment of thesis section 7.5 on the real server (`make experiment`).

Time is scaled down 25x so the whole run stays under 10 minutes: sub-windows of t = 40 ms and
200 ms stand for the thesis's 1 s and 5 s (at 20,000 packets/s they hold about 800 and 4,000
rows; the thesis's 1 packet/ms gave 1,000 and 5,000); n in {10, 20, 50, 100}; 40 periodic queries at the
short t and 100 at the long one (top-10 sources/destinations by bytes and percentiles of per-address
bandwidth over random window lengths 1..n, re-executed every slide, window scans as in the thesis);
one-time aggregates over a few addresses at random (Poisson) times; every policy on the same
workload. A writer feeds packets at a fixed rate. Per cell: abort %, staleness, one-time response
time (client side), committed queries per second, slide delay; ttu histories must be LWS.

Writes OUT/report.md, OUT/results.json and PNG plots next to the simulator's figures
(docs/simulation.json, from `make experiment-sim`).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
POLICIES = ["serial", "ws", "lws", "ttu", "ttu-rescan"]
SCHEMA = {"ts": "int64", "src": "string", "dst": "string", "bytes": "int64"}
NAMES = np.array([f"10.{i // 256}.{i % 256}.1" for i in range(1000)], dtype=object)


def periodic_text(rng: random.Random, n: int, filler: str) -> str:
    k = rng.randint(1, n)
    col = rng.choice(["src", "dst"])
    if rng.random() < 0.5:
        return (f"SELECT {col}, SUM(bytes) FROM packets [RANGE {k} SUBWINDOWS SLIDE 1 SUBWINDOWS] WHERE {filler} "
                f"GROUP BY {col} ORDER BY 2 DESC LIMIT 10")
    q = rng.choice([0.25, 0.5, 0.75, 0.9, 0.95, 0.99])
    return (f"SELECT QUANTILE(total, {q}) FROM (SELECT {col}, SUM(bytes) AS total FROM packets "
            f"[RANGE {k} SUBWINDOWS SLIDE 1 SUBWINDOWS] WHERE {filler} GROUP BY {col})")


def run_cell(policy: str, t_ms: int, n: int, periodic: int, args, out: Path) -> dict:
    from windowstore.clients import Client, WindowStoreError
    from windowstore.server.process import ServerProcess
    from windowstore.txn import check, read_jsonl

    history = out / f"history-{policy}-{t_ms}-{n}.jsonl"
    srv = ServerProcess("--policy", policy, "--history", str(history), "--history-keep", "1000",
                        "--max-periodic-queries", "1000", "--max-restarts", "1000")
    rng = random.Random(args.seed)
    responses, stop, errors = [], threading.Event(), []
    try:
        ws = Client(srv.target, timeout=120)
        ws.create_stream("packets", SCHEMA, subwindows=n, subwindow_ms=t_ms, group_by=["src", "dst"])
        rows_per_batch = max(1, int(args.rows_per_s * 0.02))

        def writer():
            gen = np.random.default_rng(args.seed)
            with Client(srv.target) as c:
                while not stop.is_set():
                    k = int(rows_per_batch * 10 ** gen.uniform(-0.5, 0.5))   # rates vary up to 10x
                    c.append("packets", {"ts": np.full(k, int(time.time() * 1000)), "src": NAMES[gen.integers(0, 1000, k)],
                                         "dst": NAMES[gen.integers(0, 1000, k)], "bytes": gen.integers(1, 101, k)})
                    time.sleep(0.02)

        def onetime():
            gen = random.Random(args.seed + 1)
            with Client(srv.target, timeout=120) as c:
                while not stop.is_set():
                    time.sleep(gen.expovariate(args.onetime_rate))
                    picks = ", ".join(f"'{NAMES[gen.randrange(1000)]}'" for _ in range(3))
                    text = (f"SELECT SUM(bytes), COUNT(*) FROM packets [RANGE {gen.randint(1, n)} SUBWINDOWS] "
                            f"WHERE src IN ({picks})")
                    t0 = time.perf_counter()
                    try:
                        c.query(text, priority=1)
                        responses.append((time.perf_counter() - t0) * 1000)
                    except WindowStoreError as e:
                        errors.append(e)
        feed = threading.Thread(target=writer, daemon=True)
        feed.start()
        time.sleep(n * t_ms / 1000.0 + 0.2)  # fill the window first, as the thesis does
        for _ in range(periodic):
            ws.register(periodic_text(rng, n, "bytes > 0"))
        before = ws.stats("packets")
        ot = threading.Thread(target=onetime, daemon=True)
        ot.start()
        t0 = time.time()
        time.sleep(args.cell_s)
        stop.set()
        after = ws.stats("packets")
        elapsed = time.time() - t0
        ot.join(30)
        feed.join(10)
        ws.close()
    finally:
        code, _, err = srv.stop()
    with open(history) as f:
        report = check(read_jsonl(f))
    history.unlink()
    b, a = before["streams"][0], after["streams"][0]
    committed = int(a["queries"]) - int(b["queries"])
    aborts = int(a["aborts"]) - int(b["aborts"])
    return {"policy": policy, "t_ms": t_ms, "n": n, "periodic": periodic, "seconds": round(elapsed, 1),
            "committed": committed, "aborts": aborts,
            "abort_pct": round(100.0 * aborts / (committed + aborts), 2) if committed + aborts else 0.0,
            "throughput_qps": round(committed / elapsed, 2),
            "staleness_ms_p50": round(float(a["staleness_ms"]["p50"]), 1),
            "staleness_ms_p99": round(float(a["staleness_ms"]["p99"]), 1),
            "onetime_response_ms_mean": round(float(np.mean(responses)), 1) if responses else None,
            "onetime_answers": len(responses), "onetime_errors": len(errors),
            "slide_delay_ms_p99": round(float(a["slide_delay_ms"]["p99"]), 1),
            "history": report.summary(), "server_exit": code, "server_traceback": "Traceback" in err}


def plots(results: list[dict], sim: list[dict], out: Path) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    short = min(r["t_ms"] for r in results)
    metrics = [("abort_pct", "abort_pct", "aborted attempts (%)", "Aborts: real server vs simulator"),
               ("staleness_ms_p50", "staleness_ms_mean", "staleness (ms)", "Staleness: real server (p50) vs simulator (mean)"),
               ("onetime_response_ms_mean", "onetime_response_ms_mean", "one-time response (ms)",
                "One-time response time: real server vs simulator")]
    for key, sim_key, ylabel, title in metrics:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for ax, (data, k, label) in zip(axes, ((results, key, f"real server, t = {short} ms (thesis 1 s)"),
                                               (sim, sim_key, "simulator, t = 1 s, with one-time queries"))):
            for p in POLICIES:
                pts = sorted((r["n"], r[k]) for r in data if r["policy"] == p and r[k] is not None
                             and r.get("t_ms") in (short, 1000) and r.get("onetime_rate", 1.0) == 1.0)
                if pts:
                    ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=p)
            ax.set_title(label, fontsize=10)
            ax.set_xlabel("sub-windows per window (n)")
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle(title)
        fig.tight_layout()
        name = f"{key}.png"
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        files.append(name)
    return files


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "docs" / "experiment"))
    ap.add_argument("--t-ms", type=int, action="append", help="sub-window lengths (default 40 and 200)")
    ap.add_argument("--n", type=int, action="append", help="sub-windows (default 10, 20, 50, 100)")
    ap.add_argument("--policy", action="append", choices=POLICIES)
    ap.add_argument("--cell-s", type=float, default=4.0, help="measured seconds per cell (default 4)")
    ap.add_argument("--rows-per-s", type=float, default=20_000)
    ap.add_argument("--onetime-rate", type=float, default=5.0, help="one-time queries per second (default 5)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--replot", action="store_true", help="redraw the report from OUT/results.json, run nothing")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.replot:
        saved = json.loads((out / "results.json").read_text())
        results, elapsed = saved["cells"], saved["seconds"]
    else:
        results = []
        started = time.time()
        for t_ms in args.t_ms or [40, 200]:
            periodic = 40 if t_ms <= 40 else 100
            for n in args.n or [10, 20, 50, 100]:
                for p in args.policy or POLICIES:
                    r = run_cell(p, t_ms, n, periodic, args, out)
                    results.append(r)
                    print(json.dumps(r), flush=True)
        elapsed = time.time() - started
        (out / "results.json").write_text(json.dumps({"seconds": round(elapsed), "cells": results}, indent=1))
    sim_path = ROOT / "docs" / "simulation.json"
    sim = json.loads(sim_path.read_text())["thesis_regime"] if sim_path.exists() else []
    files = plots(results, sim, out)
    bad = [r for r in results if r["policy"] == "ttu" and (r["history"]["torn"] or r["history"]["ws_only"] or r["history"]["errors"])]
    lines = [f"# Section 7.5 on the real server ({time.strftime('%Y-%m-%d')}, {elapsed:.0f} s in all)", "",
             "`make experiment` (loadtest/experiment.py). Time scaled down 25x: t = 40 ms and 200 ms stand for the "
             f"thesis's 1 s and 5 s. {args.rows_per_s:g} packets/s, one-time queries at {args.onetime_rate:g}/s, "
             f"{args.cell_s:g} s measured per cell after the window filled. One run per cell.", "",
             "| t | n | periodic | policy | abort % | committed q/s | staleness p50 / p99 (ms) | one-time response mean (ms) | slide delay p99 (ms) | history |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        h = r["history"]
        lines.append(f"| {r['t_ms']} ms | {r['n']} | {r['periodic']} | {r['policy']} | {r['abort_pct']} | {r['throughput_qps']} | "
                     f"{r['staleness_ms_p50']} / {r['staleness_ms_p99']} | {r['onetime_response_ms_mean']} | "
                     f"{r['slide_delay_ms_p99']} | {h['lws']} LWS, {h['ws_only']} WS only, {h['torn']} torn |")
    lines += ["", "Plots (left: real server; right: the simulator's thesis-regime figures from docs/simulation.md):", ""]
    lines += [f"![{f}]({f})" for f in files]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print(f"report: {out / 'report.md'}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
