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

The stream's density decides the curve. Scotty's own benchmark stamps each tuple with the wall
clock as it generates 1.7-2 million tuples a second (its `LoadGeneratorSource` and benchmark
configurations), so its windows see that many tuples per second of event time: the default
here, `SCOTTY_RATE`. The same windows over a sparse stream (`SPARSE_RATE`, 20,000 tuples per
second of event time) are run too: there a slide's fixed cost (cutting the new sub-window at every
window's edges, combining and answering the due windows) outweighs its rows, and the curve falls.

    python -m bench.slicing_bench [--windows 1 10 100 1000] [--slides 30] [--rates 2000000 20000]
                                  [--clock cpu] [--out DIR]
    python -m bench.slicing_bench --sweep [--clock cpu] [--out DIR]   # 1,000 windows over 1, by density

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
SCOTTY_RATE = 2_000_000  # tuples per second of event time, as Scotty's benchmark generates them
SPARSE_RATE = 20_000
RATES = (SCOTTY_RATE, SPARSE_RATE)
SWEEP = (20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000, 2_000_000)
BASELINES = ("shared, slices from rows", "one-by-one", "duckdb")  # fewer timed slides when slow
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


def _batch(slot: int, rows: int, rng: np.random.Generator) -> dict:
    """`rows` tuples uniform over the slot's milliseconds, in order: the counts per millisecond
    drawn at once (multinomial), which is the distribution of sorted uniform draws without the sort
    of millions of them."""
    per_ms = rng.multinomial(rows, np.full(T_MS, 1.0 / T_MS))
    ts = np.repeat(np.arange(slot * T_MS, (slot + 1) * T_MS, dtype=np.int64), per_ms)
    return {"ts": ts, "v": rng.integers(-1000, 1000, rows)}


def run_mode(mode: str, count: int, slides: int, seed: int = 1, check: bool = False,
             rows: int = SCOTTY_RATE) -> dict:
    """Feed N_SUB sub-windows of `rows` tuples (warm-up, not timed), then `slides` more,
    answering every window due after each; returns tuples/s over the timed part and the answers."""
    if mode == "shared, slices from rows":  # plans made while RunStore.for_query says no read parts from rows
        for_query = slicing.RunStore.for_query
        slicing.RunStore.for_query = staticmethod(lambda inner: False)  # type: ignore[method-assign]
        try:
            return run_mode("shared", count, slides, seed, check, rows)
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
        batch = _batch(slot, rows, data)
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
                got_rows = [(lo, hi, *row)] if row[0] else []
            else:
                got_rows = run_plan(plan).rows
            reflected[i] = s.window.latest
            if check and timed:
                answers.append((slot, i, [tuple(int(x) for x in r) for r in got_rows]))
        if timed:
            elapsed += CLOCK() - t0
            tuples += rows
    if mode == "one-by-one":
        slicing._kept = weakref.WeakKeyDictionary()
    return {"rate": tuples / elapsed, "answers": answers}


MODES = ("together", "shared", "shared, slices from rows", "one-by-one", "duckdb")


def _slides(mode: str, count: int, rows: int, slides: int) -> int:
    """Timed slides for a mode: ten times as many over a sparse stream, whose slides take a fraction
    of a millisecond (a few would measure the clock's noise); fewer for the baselines over many
    windows, which take seconds a slide (one by one at 1,000 windows and 2 M tuples a second: 25 s)."""
    if mode not in BASELINES:
        return slides if rows >= 1_000_000 else 10 * slides
    if count < 100:
        return slides
    return max(2, slides // 15) if rows >= 1_000_000 else max(5, slides // 3)


def run(windows=(1, 10, 100, 1000), slides: int = 30, rates=RATES) -> list[dict]:
    """Every mode at every window count, per density. The fewest windows' `together` rate, the
    base of the ratios, is measured again after the others and the higher of the two kept (the
    first run of a process pays for memory the later ones reuse), so no ratio is flattered."""
    out: list[dict] = []
    for rows in rates:
        rate: dict = {}
        for count in windows:
            check = count <= 10
            got = {}
            for mode in MODES:
                res = run_mode(mode, count, _slides(mode, count, rows, slides), check=check, rows=rows)
                rate[(mode, count)] = res["rate"]
                got[mode] = res["answers"]
            if check:  # over the slides every mode timed (the baselines time fewer)
                last = N_SUB + min(_slides(m, count, rows, slides) for m in MODES)
                common = {m: [a for a in got[m] if a[0] < last] for m in MODES}
                assert common["duckdb"] and all(common[m] == common["duckdb"] for m in MODES), "the modes disagree"
        again = run_mode("together", windows[0], _slides("together", windows[0], rows, slides), rows=rows)["rate"]
        base = max(rate[("together", windows[0])], again)
        scotty = rows == SCOTTY_RATE
        for count in windows:
            tog, one, by_one = rate[("together", count)], rate[("shared", count)], rate[("one-by-one", count)]
            out.append({"name": (f"{count} concurrent sliding windows of random RANGE/SLIDE, {rows:,} tuples per "
                                 f"second of event time{' (Scotty)' if scotty else ''}, tuples/s sustained"),
                        "value": tog,
                        "shown": (f"together {tog:,.0f}/s ({tog / base:.2f}x of 1 window; {tog / by_one:.1f}x "
                                  f"one by one); shared, each its own execution {one:,.0f}/s "
                                  f"({one / rate[('shared', windows[0])]:.3f}x of 1 window); "
                                  f"slices from rows {rate[('shared, slices from rows', count)]:,.0f}/s; "
                                  f"one by one {by_one:,.0f}/s; DuckDB {rate[('duckdb', count)]:,.0f}/s"),
                        "target": (">= 0.5x of 1 window and >= 10x one by one"
                                   if count == 1000 and scotty else ""),
                        "windows": count, "rows_per_s": rows, "base": base, "one_window_again": again,
                        "rates": {m: rate[(m, count)] for m in MODES}})
    return out


def sweep(rates=SWEEP, count: int = 1000, slides: int = 30) -> list[dict]:
    """`together` at 1 and `count` windows over streams of each density, one window measured before
    and after (its spread is the run's noise): where a slide's fixed cost stops deciding the rate."""
    out = []
    for rows in rates:
        n = _slides("together", count, rows, slides)
        before = run_mode("together", 1, n, rows=rows)["rate"]
        many = run_mode("together", count, n, rows=rows)["rate"]
        after = run_mode("together", 1, n, rows=rows)["rate"]
        out.append({"rows_per_s": rows, "one": [before, after], "many": many, "windows": count,
                    "ratio": [many / max(before, after), many / min(before, after)]})
        print(f"{rows:>9,} tuples/s of event time: 1 window {before:,.0f} / {after:,.0f}, {count} windows "
              f"{many:,.0f}: {out[-1]['ratio'][0]:.2f}-{out[-1]['ratio'][1]:.2f}x", flush=True)
    return out


def _clock_name() -> str:
    return "CPU" if CLOCK is time.process_time else "wall"


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
    ax.set_ylabel(f"tuples/s sustained ({_clock_name()} time)")
    ax.set_title(f"random RANGE/SLIDE windows, {results[0]['rows_per_s']:,} tuples/s of event time")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


def plot_sweep(points: list[dict], path: str) -> None:
    """The rate at `count` windows over the rate at one window, against the stream's density."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4))
    xs = [p["rows_per_s"] for p in points]
    lo, hi = [p["ratio"][0] for p in points], [p["ratio"][1] for p in points]
    ax.fill_between(xs, lo, hi, alpha=0.3, label="between the two one-window runs")
    ax.plot(xs, [(a + b) / 2 for a, b in zip(lo, hi)], marker="o", label=f"{points[0]['windows']} windows / 1 window")
    ax.axhline(0.5, color="grey", linestyle="--", label="0.5x")
    ax.axvline(SCOTTY_RATE, color="grey", linestyle=":", label="Scotty's benchmark rate")
    ax.set_xscale("log")
    ax.set_ylim(0, 1.2)
    ax.set_xlabel("tuples per second of event time")
    ax.set_ylabel(f"rate ratio ({_clock_name()} time)")
    ax.set_title("together: 1,000 concurrent windows against one, by density")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


if __name__ == "__main__":
    import json
    import os

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--windows", type=int, nargs="+", default=[1, 10, 100, 1000])
    ap.add_argument("--slides", type=int, default=30)
    ap.add_argument("--rates", type=int, nargs="+", default=list(RATES),
                    help="tuples per second of event time, one run of every window count each")
    ap.add_argument("--sweep", action="store_true", help="only `together`, 1 and 1,000 windows, by density")
    ap.add_argument("--out", help="a directory for slicing.json and the plots")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    a = ap.parse_args()
    if a.clock == "cpu":
        CLOCK = time.process_time
    if a.out:
        os.makedirs(a.out, exist_ok=True)
    if a.sweep:
        points = sweep(slides=a.slides)
        if a.out:
            with open(os.path.join(a.out, "sweep.json"), "w") as f:
                json.dump(points, f, indent=1)
            plot_sweep(points, os.path.join(a.out, "sweep.svg"))
        raise SystemExit(0)
    results = run(tuple(a.windows), a.slides, tuple(a.rates))
    for r in results:
        print(f"{r['name']}: {r['shown']}" + (f"   (target {r['target']})" if r["target"] else ""))
    if a.out:
        with open(os.path.join(a.out, "slicing.json"), "w") as f:
            json.dump([{k: r[k] for k in ("windows", "rows_per_s", "base", "one_window_again", "rates")}
                       for r in results], f, indent=1)
        for rows in a.rates:
            name = "slicing.svg" if rows == SCOTTY_RATE else f"slicing_{rows}.svg"
            plot([r for r in results if r["rows_per_s"] == rows], os.path.join(a.out, name))
