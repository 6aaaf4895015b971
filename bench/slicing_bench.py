"""Scotty's setting (general stream slicing, issue 31) on this machine: 1, 10, 100 and 1,000
concurrent sliding windows of random RANGE and SLIDE (whole milliseconds, not whole sub-windows)
over one event-time stream, each answered as a periodic query whenever a slide completes one of
its windows. Measured: tuples per second sustained with every window answered before the next
sub-window is ingested (so none is late), for

- together: the due windows of all of them answered in one shared execution per slide
  (store/slicing_shared.py: each sub-window cut once at every window's edges, the run readers
  kept across slides and extended with the new slices, every due window's merge a few lookups in
  them, and every due window's Answer made, as a delivery makes them: iterating the answers);
- shared: each window answered by its own execution (store/slicing.py: slice partials kept per
  sub-window and read by every window that covers them; a slice of part of a sub-window read
  from the sub-window's aggregate store, slicing.RunStore: prefix sums and block extremes);
- shared, slices from rows: the same, each part of a sub-window read by a scan of its rows (the
  store before the aggregate store: the before/after of that change in one run);
- one by one: the same windows, each computing its own slices (the kept partials dropped before
  each execution);
- DuckDB: each window answered by SQL over the raw rows with its bounds.

The answers of all five agree (checked on every execution of the runs with few windows).

    python -m bench.slicing_bench [--windows 1 10 100 1000] [--slides 30] [--clock cpu] [--out DIR]

`--clock cpu` times the process's CPU time instead of the wall clock: on a machine other
processes load, the wall clock measures the scheduler's share as much as this code.
"""
from __future__ import annotations

import argparse
import random
import time
import weakref

import numpy as np
import pyarrow as pa

from windowstore.store import Stream, WindowSpec, parse_query, plan_query, run_plan
from windowstore.store import slicing
from windowstore.store.slicing import slides_until_due
from windowstore.store.slicing_shared import SharedSlices

CLOCK = time.perf_counter  # (--clock cpu: time.process_time)
T_MS = 1_000            # sub-window length
N_SUB = 64              # sub-windows kept (the longest RANGE is 60 s)
ROWS_PER_SUB = 20_000   # tuples per second of event time
SCHEMA = {"ts": "int64", "v": "int64"}


def shapes(count: int, rng: random.Random) -> list[tuple[int, int]]:
    out = []
    while len(out) < count:
        r, s = rng.randint(2_000, 60_000), rng.randint(1_000, 10_000)
        if r % T_MS or s % T_MS:
            out.append((r, s))
    return out


def text(r: int, s: int) -> str:
    return (f"SELECT window_start, window_end, COUNT(*), SUM(v), MAX(v) FROM s [RANGE {r} ms SLIDE {s} ms] "
            "GROUP BY window_start")


def _batch(slot: int, rng: np.random.Generator) -> dict:
    ts = np.sort(rng.integers(slot * T_MS, (slot + 1) * T_MS, ROWS_PER_SUB))
    return {"ts": ts, "v": rng.integers(-1000, 1000, ROWS_PER_SUB)}


def run_mode(mode: str, count: int, slides: int, seed: int = 1, check: bool = False) -> dict:
    """Feed N_SUB sub-windows (warm-up, not timed), then `slides` more, answering every window
    due after each; returns tuples/s over the timed part and the answers."""
    if mode == "shared, slices from rows":  # plans made while RunStore.for_query says no read parts from rows
        for_query = slicing.RunStore.for_query
        slicing.RunStore.for_query = staticmethod(lambda inner: False)  # type: ignore[method-assign]
        try:
            return run_mode("shared", count, slides, seed, check)
        finally:
            slicing.RunStore.for_query = for_query  # type: ignore[method-assign]
    rng, data = random.Random(seed), np.random.default_rng(seed)
    shp = shapes(count, rng)
    s = Stream("s", SCHEMA, WindowSpec(subwindows=N_SUB, subwindow_ms=T_MS, clock="event"), 0)
    plans = [plan_query(parse_query(text(r, sl)), s, periodic=True) for r, sl in shp]
    shared = SharedSlices(plans) if mode == "together" else None
    reflected: list[int | None] = [None] * count
    answered = np.zeros(count, dtype=np.int64)  # (together: the window each answered last,
    answering = np.zeros(count, dtype=bool)     # once it has answered one)
    con = None
    if mode == "duckdb":
        import duckdb
        con = duckdb.connect()
        con.execute("CREATE TABLE r (ts BIGINT, v BIGINT)").fetchall()
    answers: list = []
    elapsed, tuples = 0.0, 0
    for slot in range(N_SUB + slides):
        batch = _batch(slot, data)
        timed = slot >= N_SUB
        t0 = CLOCK()
        s.append(batch)
        if con is not None:
            b = pa.table(batch)  # noqa: F841  (DuckDB reads the local by name)
            con.execute("INSERT INTO r SELECT * FROM b").fetchall()
            con.execute(f"DELETE FROM r WHERE ts < {(slot - N_SUB) * T_MS}").fetchall()
        # the watermark passes this slot when the next one's first row arrives: seal it now
        s.window.slide(0)
        if slot < N_SUB - 1:  # filling the window: the first executions come with its last warm-up slide
            continue
        if shared is not None:  # every due window in one execution: one read of the sub-windows
            reads = [shared.read(sub) for sub in s.window.youngest(shared.n_q)]
            ks, has = shared.newest_windows(reads)  # due: a window completed since its last answer (slides_until_due)
            due = np.flatnonzero(has & ~(answering & (ks == answered)))
            answered[due], answering[due] = ks[due], True
            due_list = due.tolist()
            for i, got in zip(due_list, shared.answer(reads, list(zip(due_list, ks[due].tolist())))):  # each answer made (delivered)
                if check and timed:
                    answers.append((slot, i, [tuple(int(x) for x in r) for r in got.rows]))
        for i, plan in enumerate(plans if shared is None else ()):  # (together: answered above)
            if slides_until_due(plan.bound.hop, s.window, reflected[i]) > 0:
                continue
            if mode == "one-by-one":
                slicing._kept = weakref.WeakKeyDictionary()
            if con is not None:
                r, sl = shp[i]
                k = (s.window.sealed(s.window.latest).end_ms - r) // sl
                lo, hi = k * sl, k * sl + r
                row = con.execute(f"SELECT count(*), sum(v), max(v) FROM r WHERE ts >= {lo} AND ts < {hi}").fetchone()
                rows = [(lo, hi, *row)] if row[0] else []
            else:
                rows = run_plan(plan).rows
            reflected[i] = s.window.latest
            if check and timed:
                answers.append((slot, i, [tuple(int(x) for x in r) for r in rows]))
        if timed:
            elapsed += CLOCK() - t0
            tuples += ROWS_PER_SUB
    if mode == "one-by-one":
        slicing._kept = weakref.WeakKeyDictionary()
    return {"rate": tuples / elapsed, "answers": answers}


MODES = ("together", "shared", "shared, slices from rows", "one-by-one", "duckdb")


def run(windows=(1, 10, 100, 1000), slides: int = 30) -> list[dict]:
    out: list[dict] = []
    rates: dict = {}
    for count in windows:
        check = count <= 10
        got = {}
        for mode in MODES:
            n_slides = slides if (count < 1000 or mode.startswith("shared")) else max(5, slides // 3)
            res = run_mode(mode, count, n_slides, check=check)
            rates[(mode, count)] = res["rate"]
            got[mode] = res["answers"]
        if check:
            assert all(got[m] == got["duckdb"] for m in MODES), "the modes disagree"
        base = rates[("together", windows[0])]
        tog, one = rates[("together", count)], rates[("shared", count)]
        rows_mode = rates[("shared, slices from rows", count)]
        out.append({"name": f"{count} concurrent sliding windows of random RANGE/SLIDE, tuples/s sustained",
                    "value": tog,
                    "shown": (f"together {tog:,.0f}/s ({tog / base:.2f}x of 1 window; "
                              f"{tog / rates[('one-by-one', count)]:.1f}x one by one); "
                              f"shared, each its own execution {one:,.0f}/s "
                              f"({one / rates[('shared', windows[0])]:.3f}x of 1 window); "
                              f"slices from rows {rows_mode:,.0f}/s; "
                              f"one by one {rates[('one-by-one', count)]:,.0f}/s; "
                              f"DuckDB {rates[('duckdb', count)]:,.0f}/s"),
                    "target": ">= 0.5x of 1 window and >= 10x one by one" if count == 1000 else "",
                    "windows": count, "rates": {m: rates[(m, count)] for m in MODES}})
    return out


def plot(results: list[dict], path: str) -> None:
    """Tuples per second against concurrent windows, one line per mode (log-log), as SVG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4))
    counts = [r["windows"] for r in results]
    for m in MODES:
        ax.plot(counts, [r["rates"][m] for r in results], marker="o", label=m)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("concurrent windows")
    ax.set_ylabel(f"tuples/s sustained ({'CPU' if CLOCK is time.process_time else 'wall'} time)")
    ax.set_title("random RANGE/SLIDE windows over one stream (loaded 2-core machine)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--windows", type=int, nargs="+", default=[1, 10, 100, 1000])
    ap.add_argument("--slides", type=int, default=30)
    ap.add_argument("--out", help="a directory for slicing.json and the plot slicing.svg")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    a = ap.parse_args()
    if a.clock == "cpu":
        CLOCK = time.process_time
    results = run(tuple(a.windows), a.slides)
    for r in results:
        print(f"{r['name']}: {r['shown']}" + (f"   (target {r['target']})" if r["target"] else ""))
    if a.out:
        import json
        import os
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "slicing.json"), "w") as f:
            json.dump([{"windows": r["windows"], "rates": r["rates"]} for r in results], f, indent=1)
        plot(results, os.path.join(a.out, "slicing.svg"))
