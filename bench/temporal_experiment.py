"""Section 7's sweep through the store's query path (store/temporal.py): a temporal query run on
every slide of a stream, coalesced eagerly (each sealed sub-window's runs built once, merged per
execution) or lazily (the window's rows coalesced per execution), over synthetic streams whose
coalescing probability and out-of-order probability are each swept 0..1 by 0.1; per cell the
strategy the plan's cost model picks, and whether it was the measured cheaper one.

Per cell: `--tuples` readings (bench/coalesce_experiment.py's generator: three grouping attributes
of 3, 5 and 7 values, a reading repeats its group's previous value with probability cp and arrives
late, by up to half a window, with probability oop), appended `--per-slide` per slide to a manual
stream of `--subwindows` sub-windows; after the window has filled, the query
`SELECT g1, g2, g3, MAX(DURATION(VALID(v))) FROM s [SLIDE 1 SUBWINDOWS] GROUP BY g1, g2, g3` (a periodic
query) runs once per slide under each strategy. Measured: process CPU time of each execution (the machine is shared; waiting for a
core is no cost of either), and the eager runs' extra memory in the paper's byte model.

    python -m bench.temporal_experiment [--tuples 200000] [--quick] [--out docs/coalesce]
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench.coalesce_experiment import GRID, stream
from windowstore.store import Stream, WindowSpec, parse_query, plan_query
from windowstore.store.coalesce import EAGER, LAZY
from windowstore.store.planner.plan import run_plan

QUERY = "SELECT g1, g2, g3, MAX(DURATION(VALID(v))) FROM s [SLIDE 1 SUBWINDOWS] GROUP BY g1, g2, g3"
SCHEMA = {"ts": "int64", "g1": "int64", "g2": "int64", "g3": "int64", "v": "int64"}


def cell(n: int, cp: float, oop: float, per_slide: int, subwindows: int, seed: int) -> dict:
    rows = stream(n, cp, oop, per_slide * 2, seed)  # late by up to one slide's rows
    s = Stream("s", SCHEMA, WindowSpec(subwindows=subwindows, subwindow_ms=1, clock="manual"), 0)
    q = parse_query(QUERY)
    out: dict = {"cp": cp, "oop": oop, EAGER: 0.0, LAZY: 0.0, "executions": 0, "answers_equal": True}
    plans: dict = {}
    runs = stamps = 0
    for k in range(0, len(rows), per_slide):
        batch = rows[k:k + per_slide]
        s.append({"ts": [r[0] for r in batch], "g1": [r[1][0] for r in batch], "g2": [r[1][1] for r in batch],
                  "g3": [r[1][2] for r in batch], "v": [r[2][0] for r in batch]})
        s.window.slide(k)
        if s.window.latest + 1 < subwindows:
            continue  # the window fills first
        if not plans:  # a periodic query is planned once: here, on a full window
            chosen = plan_query(q, s, periodic=True)
            out["chosen"], out["cp_est"], out["oop_est"] = chosen._temporal.strategy, chosen._temporal.cp, chosen._temporal.oop
            for strategy in (EAGER, LAZY):
                plans[strategy] = plan_query(q, s, periodic=True)
                plans[strategy]._temporal.use(strategy)
        answers = {}
        for strategy in (EAGER, LAZY):
            t0 = time.process_time()
            answers[strategy] = run_plan(plans[strategy]).rows
            out[strategy] += time.process_time() - t0
        out["answers_equal"] &= answers[EAGER] == answers[LAZY]
        out["executions"] += 1
        partial = [plans[EAGER].read(sub)[1] for sub in s.window.youngest(subwindows)]  # (cached: no work)
        runs += sum(len(r) for p in partial for r in p.values())
        stamps += sum(len(st) for p in partial for r in p.values() for _, st in r)
    e = max(out["executions"], 1)
    out["eager_runs"], out["eager_extra_stamps"] = runs / e, (stamps - runs) / e
    return out


def _filled(n: int, cp: float, oop: float, per_slide: int, subwindows: int, seed: int) -> Stream:
    rows = stream(n, cp, oop, per_slide * 2, seed)
    s = Stream("s", SCHEMA, WindowSpec(subwindows=subwindows, subwindow_ms=1, clock="manual"), 0)
    for k in range(0, len(rows), per_slide):
        batch = rows[k:k + per_slide]
        s.append({"ts": [r[0] for r in batch], "g1": [r[1][0] for r in batch], "g2": [r[1][1] for r in batch],
                  "g3": [r[1][2] for r in batch], "v": [r[2][0] for r in batch]})
        s.window.slide(k)
    return s


def calibrate(per_slide: int, subwindows: int, seed: int, repeat: int = 5) -> dict:
    """Per-operation costs (µs) of the store's two paths, read off the corner cells, for the cost
    model's constants (temporal.STORE_EAGER / STORE_LAZY): eager insert / merge = building a sealed
    sub-window's runs per row at cp 0 / 1; eager read = merging the window's runs and answering,
    per run; eager split = the extra of that merge per window row when every part interleaves
    (oop 1); lazy read = a lazy execution per window row at cp 0, coalesce = its extra at cp 1."""
    from windowstore.store import temporal

    n = per_slide * subwindows
    q = parse_query(QUERY)
    us = 1e6
    out = {}
    for cp, oop in ((0.0, 0.0), (1.0, 0.0), (0.0, 1.0)):
        s = _filled(n, cp, oop, per_slide, subwindows, seed)
        tp = plan_query(q, s, periodic=True)._temporal
        subs = s.window.youngest(subwindows)
        t0 = time.process_time()
        for _ in range(repeat):
            parts = [temporal.coalesce_rows(tp.decoded(sub)) for sub in subs]
        build = (time.process_time() - t0) / repeat / n
        t0 = time.process_time()
        for _ in range(repeat):
            temporal.answer_rows(tp.spec, temporal.merge_runs(list(reversed(parts))))
        merge = (time.process_time() - t0) / repeat
        runs = sum(len(r) for p in parts for r in p.values())
        lazy_plan = plan_query(q, s, periodic=True)
        lazy_plan._temporal.use(LAZY)
        t0 = time.process_time()
        for _ in range(repeat):
            run_plan(lazy_plan)
        lazy = (time.process_time() - t0) / repeat / n
        out[(cp, oop)] = {"build": build * us, "merge": merge * us, "runs": runs, "lazy": lazy * us}
    c00, c10, c01 = out[(0.0, 0.0)], out[(1.0, 0.0)], out[(0.0, 1.0)]
    return {"eager": {"insert": c00["build"], "merge": c10["build"], "read": c00["merge"] / max(c00["runs"], 1),
                      "split": max(c01["merge"] - c00["merge"], 0.0) / n},
            "lazy": {"read": c00["lazy"], "coalesce": max(c10["lazy"] - c00["lazy"], 0.0)}}


def plot(result: dict, out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    n = len(GRID)
    diff = np.zeros((n, n))
    for c in result["cells"]:
        diff[GRID.index(c["oop"]), GRID.index(c["cp"])] = (c[EAGER] - c[LAZY]) / max(c[EAGER], c[LAZY])
    fig, ax = plt.subplots(figsize=(6.4, 5.2), constrained_layout=True)
    lim = max(abs(diff).max(), 1e-9)
    im = ax.imshow(diff, origin="lower", cmap="coolwarm", vmin=-lim, vmax=lim, extent=(-0.05, 1.05, -0.05, 1.05))
    for c in result["cells"]:
        best = EAGER if c[EAGER] <= c[LAZY] else LAZY
        ax.text(c["cp"], c["oop"], "E" if c["chosen"] == EAGER else "L", ha="center", va="center", fontsize=7,
                color="black" if c["chosen"] == best else "yellow", fontweight="bold")
    ax.set_xlabel("coalescing probability")
    ax.set_ylabel("out-of-order probability")
    ax.set_title("(eager - lazy) / max CPU time per execution\nletters: the plan's choice (yellow: measured loser)",
                 fontsize=9)
    fig.colorbar(im, ax=ax, shrink=0.8)
    fig.savefig(out / "store_cost_difference.png", dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tuples", type=int, default=200_000)
    ap.add_argument("--quick", action="store_true", help="10,000 tuples per cell")
    ap.add_argument("--per-slide", type=int, default=500)
    ap.add_argument("--subwindows", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("docs/coalesce"))
    ap.add_argument("--calibrate", action="store_true", help="print the per-operation costs for the model and stop")
    args = ap.parse_args()
    if args.calibrate:
        print(json.dumps(calibrate(args.per_slide, args.subwindows, args.seed), indent=1))
        return
    if args.quick:
        args.tuples = 10_000
    args.out.mkdir(parents=True, exist_ok=True)
    cells = []
    for oop in GRID:
        for cp in GRID:
            c = cell(args.tuples, cp, oop, args.per_slide, args.subwindows, args.seed)
            cells.append(c)
            print(f"cp={cp:.1f} oop={oop:.1f} eager {c[EAGER]:.3f} s lazy {c[LAZY]:.3f} s chosen {c['chosen']} "
                  f"(estimated cp {c['cp_est']:.2f} oop {c['oop_est']:.2f})", flush=True)
    worse = [c for c in cells if c[c["chosen"]] > min(c[EAGER], c[LAZY])]
    regret = max([(c[c["chosen"]] - min(c[EAGER], c[LAZY])) / min(c[EAGER], c[LAZY]) for c in cells] + [0.0])
    total = {s: sum(c[s] for c in cells) for s in (EAGER, LAZY)}
    total["chosen"] = sum(c[c["chosen"]] for c in cells)
    result = {"tuples": args.tuples, "per_slide": args.per_slide, "subwindows": args.subwindows, "seed": args.seed,
              "query": QUERY, "cells": cells, "eager_cheaper": sum(c[EAGER] <= c[LAZY] for c in cells),
              "chosen_is_measured_cheaper": len(cells) - len(worse), "max_regret": regret, "total_cpu_s": total,
              "answers_equal": all(c["answers_equal"] for c in cells)}
    (args.out / "store_results.json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result, args.out)
    print(f"eager cheaper in {result['eager_cheaper']}/{len(cells)} cells; the plan chose the measured cheaper in "
          f"{result['chosen_is_measured_cheaper']}/{len(cells)}, worst excess {regret:.1%}; CPU s in all: eager "
          f"{total[EAGER]:.2f}, lazy {total[LAZY]:.2f}, chosen {total['chosen']:.2f}; answers equal: "
          f"{result['answers_equal']}")


if __name__ == "__main__":
    main()
