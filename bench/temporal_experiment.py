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
query) runs once per slide under each strategy. Measured: the thread's CPU time of each execution
(time.thread_time, the server's work clock; the harness is one thread, and on this machine
time.process_time costs from 0.3 to 80 us a call, heavy-tailed) (the machine is shared; waiting for a
core is no cost of either), and the eager runs' extra memory in the paper's byte model.

Before the sweep the model's per-operation costs are measured on this machine (`calibrate`, as the
paper set its own from measurements; `--shipped-costs` keeps those in store/temporal.py). Each
cell runs `--repeats` times; a cell's verdict compares the chosen strategy with the other on the
paired executions (`judge`: slower beyond the noise when the 95 % interval of the median time
ratio lies above 1), and the spread of the repeats is reported.

    python -m bench.temporal_experiment [--tuples 200000] [--quick] [--repeats 5] [--out docs/coalesce]
"""
from __future__ import annotations

import argparse
import gzip
import itertools
import json
import math
import time
from pathlib import Path

from bench.coalesce_experiment import GRID, stream
from windowstore.store import Stream, WindowSpec, parse_query, plan_query
from windowstore.store.coalesce import EAGER, LAZY
from windowstore.store.planner.plan import run_plan
from windowstore.store.temporal import coalesce_rows

QUERY = "SELECT g1, g2, g3, MAX(DURATION(VALID(v))) FROM s [SLIDE 1 SUBWINDOWS] GROUP BY g1, g2, g3"
SCHEMA = {"ts": "int64", "g1": "int64", "g2": "int64", "g3": "int64", "v": "int64"}


MEASURED = "measured"
PLANS = (EAGER, LAZY, MEASURED)
# The A/A control: eager forced a second time, on a fourth copy of the stream. Its paired ratio to
# eager is the noise floor of the comparison itself (two runs of one plan, timed the same way).
AA = "eager-aa"


def slide_all(streams: dict, batch: list, k: int, subwindows: int) -> bool:
    """Append `batch` to every copy of the stream and slide them at `k`; is the window full?"""
    for s in streams.values():
        _append(s, batch)
        s.window.slide(k)
    return next(iter(streams.values())).window.latest + 1 >= subwindows


def _append(s: Stream, batch: list) -> None:
    s.append({"ts": [r[0] for r in batch], "g1": [r[1][0] for r in batch], "g2": [r[1][1] for r in batch],
              "g3": [r[1][2] for r in batch], "v": [r[2][0] for r in batch]})


def cell(n: int, cp: float, oop: float, per_slide: int, subwindows: int, seed: int, repeats: int = 1,
         aa: bool = False) -> dict:
    """Three plans over one stream, `repeats` times: eager forced, lazy forced, and the measured
    choice (temporal.MeasuredChoice, starting from the cost model's plan, as a server runs a
    periodic query). Each plan reads its own copy of the stream (the same rows), so that eager's
    runs, built once per sub-window, are built and paid for by each plan that uses them; every
    slide times the three back to back, their order rotating. The first execution on a full window
    is not timed (eager would build every sub-window's runs in it, once per stream: the model's
    steady state has one new sub-window per slide). Per plan: CPU seconds of the timed executions,
    one number per repeat, and each timed execution's seconds (`times`, paired by position), with
    the strategy the measured choice ran in each (`measured_ran`). With `aa` a fourth plan, eager
    forced again (AA), gives the noise floor of a paired comparison.

    The plans' order per slide cycles through every permutation: a plan run right after lazy pays
    for lazy's garbage (a collection falls due) and cold caches, so a rotation, in which one plan
    always follows lazy, charges that plan alone. Each repeat makes fresh copies, the plans' copies
    (streams and plans) created in the order `creation_order` gives it: a later-created copy runs
    slower, so over as many repeats as plans each plan is created in each place once.
    `rep_executions` says how many of the timed executions each repeat ran. The eager runs' memory
    figures are counted from each slide's batch coalesced on its own (a manual slide cuts exactly the
    rows appended since the last), not read from a timed copy: reading forced eager's runs after each
    slide made its next execution faster than its A/A copy's, by about 2 % (docs/coalesce.md, round 24)."""
    rows = stream(n, cp, oop, per_slide * 2, seed)  # late by up to one slide's rows
    q = parse_query(QUERY)
    names = PLANS + ((AA,) if aa else ())
    orders = list(itertools.permutations(names))
    out: dict = {"cp": cp, "oop": oop, **{st: [] for st in names}, "ratios": [], "times": {st: [] for st in names},
                 "measured_ran": [], "executions": 0, "rep_executions": [], "answers_equal": True}
    for rep in range(repeats):
        made = creation_order(names, rep)
        streams = {st: Stream("s", SCHEMA, WindowSpec(subwindows=subwindows, subwindow_ms=1, clock="manual"), 0)
                   for st in made}
        plans: dict = {}
        total = {st: 0.0 for st in names}
        runs = stamps = executions = 0
        held: list[tuple[int, int]] = []  # (runs, readings) of the window's sub-windows, oldest first
        for k in range(0, len(rows), per_slide):
            batch = rows[k:k + per_slide]
            sub_runs = coalesce_rows([(g, ts, v) for ts, g, v in batch])
            held = (held + [(sum(len(r) for r in sub_runs.values()), len(batch))])[-subwindows:]
            if not slide_all(streams, batch, k, subwindows):
                continue  # the window fills first
            answers = {}
            if not plans:  # a periodic query is planned once: here, on a full window
                chosen = plan_query(q, streams[EAGER], periodic=True)._temporal
                out["chosen"], out["cp_est"], out["oop_est"] = chosen.strategy, chosen.cp, chosen.oop
                out["eager_cp_est"], out["splits_est"] = chosen.eager_cp, chosen.splits
                out["model_us"] = {EAGER: chosen.model.all_eager, LAZY: chosen.model.all_lazy}
                for st in made:
                    if st == MEASURED:
                        plans[st] = plan_query(q, streams[st], periodic=True, work_clock=time.thread_time)
                    else:
                        plans[st] = plan_query(q, streams[st], periodic=True)
                        plans[st]._temporal.use(EAGER if st == AA else st)
                    answers[st] = run_plan(plans[st]).rows  # the untimed first execution
            else:
                took = {}
                out["measured_ran"].append(plans[MEASURED]._temporal.strategy)
                for st in orders[executions % len(orders)]:  # each plan after each other equally often
                    t0 = time.thread_time()
                    answers[st] = run_plan(plans[st]).rows
                    took[st] = time.thread_time() - t0
                    total[st] += took[st]
                    out["times"][st].append(took[st])
                out["ratios"].append(took[EAGER] / max(took[LAZY], 1e-9))  # paired: the same moment's load
                executions += 1
            out["answers_equal"] &= all(a == answers[EAGER] for a in answers.values())
            runs += sum(r for r, _ in held)
            stamps += sum(n for _, n in held)
        for st in names:
            out[st].append(total[st])
        m = plans[MEASURED]._temporal.measured
        out.setdefault("measured_plan", []).append({"final": m.strategy, "trials": m.trials, "rounds": m.rounds,
                                                    "pairs": len(m.pairs), "ratio": m.ratio(),
                                                    "probes": m.probes, "switches": m.switches,
                                                    "median_s": {st: m.median(st) for st in (EAGER, LAZY)}})
        out["executions"] = executions
        out["rep_executions"].append(executions)
        e = max(executions + 1, 1)
        out["eager_runs"], out["eager_extra_stamps"] = runs / e, (stamps - runs) / e
    return out


def creation_order(names: tuple, rep: int) -> tuple:
    """The order in which repeat `rep` creates the plans' copies: `names` rotated by `rep`, so that
    over len(names) repeats each plan is created in each place once (a Latin square)."""
    k = rep % len(names)
    return names[k:] + names[:k]


def _filled(n: int, cp: float, oop: float, per_slide: int, subwindows: int, seed: int) -> Stream:
    rows = stream(n, cp, oop, per_slide * 2, seed)
    s = Stream("s", SCHEMA, WindowSpec(subwindows=subwindows, subwindow_ms=1, clock="manual"), 0)
    for k in range(0, len(rows), per_slide):
        _append(s, rows[k:k + per_slide])
        s.window.slide(k)
    return s


CORNERS = ((0.0, 0.0), (1.0, 0.0), (0.0, 1.0))


def calibrate(per_slide: int, subwindows: int, seed: int, repeat: int = 5) -> dict:
    """Per-operation costs (µs) of the store's two paths on this machine, for the cost model
    (temporal.STORE_EAGER / STORE_LAZY / STORE_STAMP), from whole executions of the periodic query
    on the corner cells (cp, oop) = (0, 0), (1, 0) and (0, 1), as the sweep runs them: the three
    streams slide in lockstep and each slide times both strategies on all three, so that every
    figure is taken under the same load; per (cell, strategy) the median execution. Building a
    sub-window's runs (eager's update, once per row) is timed on its own, `repeat` times, the fastest
    kept: insert at cp 0, merge at cp 1. The rest of an eager execution is its read, modelled as
    `read` per run (answering included) and `read * stamp` per further timestamp: cells (0, 0) and
    (1, 0) give the two; split = the rest at (0, 1) per re-merged reading. Lazy read = a lazy
    execution per window row at (0, 0), coalesce = its change per share of repeated values at
    (1, 0) (negative: fewer runs to build and answer)."""
    from windowstore.store import temporal

    n = per_slide * subwindows
    q = parse_query(QUERY)
    us = 1e6
    rows = {c: stream(5 * n, c[0], c[1], per_slide * 2, seed) for c in CORNERS}
    streams = {c: Stream("s", SCHEMA, WindowSpec(subwindows=subwindows, subwindow_ms=1, clock="manual"), 0)
               for c in CORNERS}
    plans: dict = {}
    took: dict = {(c, st): [] for c in CORNERS for st in (EAGER, LAZY)}
    for k in range(0, 5 * n, per_slide):
        for c in CORNERS:
            s = streams[c]
            _append(s, rows[c][k:k + per_slide])
            s.window.slide(k)
            if s.window.latest + 1 < subwindows:
                continue
            for st in (EAGER, LAZY) if (k // per_slide) % 2 else (LAZY, EAGER):
                if (c, st) not in plans:  # planned on the first full window; its first execution untimed
                    plans[(c, st)] = plan_query(q, s, periodic=True)
                    plans[(c, st)]._temporal.use(st)
                    run_plan(plans[(c, st)])
                    continue
                t0 = time.thread_time()
                run_plan(plans[(c, st)])
                took[(c, st)].append(time.thread_time() - t0)
    med = {key: sorted(v)[len(v) // 2] * us for key, v in took.items()}
    out = {}
    for c in CORNERS:
        tp = plan_query(q, streams[c], periodic=True)._temporal
        subs = list(reversed(streams[c].window.youngest(subwindows)))
        times = []
        for _ in range(repeat):
            t0 = time.thread_time()
            parts = [temporal.coalesce_rows(tp.decoded(sub)) for sub in subs]
            times.append(time.thread_time() - t0)
        ecp, splits = tp.eager_cp, tp.splits
        out[c] = {"build": min(times) / n * us, "eager": med[(c, EAGER)], "lazy": med[(c, LAZY)],
                  "eager_cp": ecp, "splits": splits, "runs": sum(len(r) for p in parts for r in p.values()),
                  "remerged": temporal._merge(parts)[1]}
    a, b, c = (out[x] for x in CORNERS)
    rest = {x: out[x]["eager"] - out[x]["build"] * per_slide for x in CORNERS}  # one new sub-window per execution
    read = max(rest[CORNERS[0]] / a["runs"], 1e-3)
    stamp = max((rest[CORNERS[1]] / read - b["runs"]) / max(n - b["runs"], 1), 0.0)
    split = max(rest[CORNERS[2]] - read * (c["runs"] + stamp * (n - c["runs"])), 0.0) / max(c["remerged"], 1)
    lazy_read = a["lazy"] / n
    coalesce = (b["lazy"] / n - lazy_read) / max(b["eager_cp"], 1e-9)
    return {"eager": {"insert": a["build"], "merge": b["build"], "read": read, "split": split},
            "stamp": stamp, "lazy": {"read": lazy_read, "coalesce": coalesce},
            "corners": {f"{x[0]},{x[1]}": v for x, v in out.items()}}


def use_calibration(cal: dict) -> None:
    """Make the store's cost model use `cal` (calibrate's answer)."""
    from windowstore.store import temporal
    from windowstore.store.coalesce import OpCosts

    temporal.set_costs(OpCosts(delete=0.0, detach=0.0, coalesce=0.0, **cal["eager"]),
                       OpCosts(insert=0.0, delete=0.0, detach=0.0, merge=0.0, split=0.0, **cal["lazy"]),
                       cal["stamp"])


def plot(result: dict, out: Path) -> None:
    """Left: (eager - lazy) / max per cell with the cost model's choice; right: the measured
    choice's paired median time over the better strategy's, with the strategy it ended on."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    grid = sorted({c["cp"] for c in result["cells"]})
    n, half = len(grid), (grid[1] - grid[0]) / 2 if len(grid) > 1 else 0.05
    diff, over = np.zeros((n, n)), np.zeros((n, n))
    for c in result["cells"]:
        e, l = c["median"][EAGER], c["median"][LAZY]
        diff[grid.index(c["oop"]), grid.index(c["cp"])] = (e - l) / max(e, l)
        over[grid.index(c["oop"]), grid.index(c["cp"])] = c["measured_ratio"]["median"] - 1
    fig, axes = plt.subplots(1, 2, figsize=(12.4, 5.4), constrained_layout=True)
    ext = (grid[0] - half, grid[-1] + half, grid[0] - half, grid[-1] + half)
    lim = max(abs(diff).max(), 1e-9)
    im = axes[0].imshow(diff, origin="lower", cmap="coolwarm", vmin=-lim, vmax=lim, extent=ext)
    lim2 = max(abs(over).max(), 1e-9)
    im2 = axes[1].imshow(over, origin="lower", cmap="PuOr_r", vmin=-lim2, vmax=lim2, extent=ext)
    for c in result["cells"]:
        letter = ("E" if c["chosen"] == EAGER else "L") + ("!" if c["worse_beyond_noise"] else "")
        axes[0].text(c["cp"], c["oop"], letter, ha="center", va="center", fontsize=7,
                     color="black" if c["chosen_is_cheaper"] else "yellow", fontweight="bold")
        final = c["measured_plan"][0]["final"]
        letter = ("E" if final == EAGER else "L") + ("!" if c["measured_worse_beyond_noise"] else "")
        axes[1].text(c["cp"], c["oop"], letter, ha="center", va="center", fontsize=7,
                     color="black" if final == c["better"] else "red", fontweight="bold")
    for ax in axes:
        ax.set_xlabel("coalescing probability")
        ax.set_ylabel("out-of-order probability")
    axes[0].set_title(f"(eager - lazy) / max CPU time, medians of {result['repeats']} runs\nletters: the cost "
                      "model's choice (yellow: the slower median; !: slower beyond the noise)", fontsize=9)
    axes[1].set_title("measured choice: paired median time / the better's - 1\nletters: its final strategy (red: "
                      "not the better's; !: slower beyond the noise)", fontsize=9)
    fig.colorbar(im, ax=axes[0], shrink=0.8)
    fig.colorbar(im2, ax=axes[1], shrink=0.8)
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
    ap.add_argument("--repeats", type=int, default=5, help="runs of each cell per strategy")
    ap.add_argument("--grid-every", type=int, default=1, help="every k-th of the 11 values of cp and oop (2: 0, 0.2, ...)")
    ap.add_argument("--cells", default=None, help="only these cells, 'cp,oop;cp,oop' (no figure)")
    ap.add_argument("--calibration-repeats", type=int, default=15, help="timings per corner cell (the fastest kept)")
    ap.add_argument("--aa", action="store_true", help="a fourth plan, eager forced again: the A/A noise floor")
    ap.add_argument("--shipped-costs", action="store_true",
                    help="use the costs in store/temporal.py instead of measuring them first")
    ap.add_argument("--replot", action="store_true",
                    help="judge and draw --out's store_results.json again (an --aa run) and stop")
    ap.add_argument("--against", type=Path, default=None,
                    help="with --replot: how far the verdict over repeats moved from this other run's")
    args = ap.parse_args()
    if args.replot:
        result = load(args.out)
        judged(result, args.out)
        save(result, args.out)
        if args.against is not None:
            other = load(args.against)
            print("against " + str(args.against) + ": " + agreement(result["verdict"], verdict(other["cells"])))
        return
    if args.calibrate:
        print(json.dumps(calibrate(args.per_slide, args.subwindows, args.seed), indent=1))
        return
    if args.quick:
        args.tuples = 10_000
    args.out.mkdir(parents=True, exist_ok=True)
    cal = None
    if not args.shipped_costs:  # the paper sets its costs from its own measurements: so does this
        cal = calibrate(args.per_slide, args.subwindows, args.seed, repeat=args.calibration_repeats)
        use_calibration(cal)
        print("calibrated: " + json.dumps({k: v for k, v in cal.items() if k != "corners"}), flush=True)
    cells = []
    only = {tuple(float(x) for x in c.split(",")) for c in args.cells.split(";")} if args.cells else None
    for oop in GRID[::args.grid_every]:
        for cp in GRID[::args.grid_every]:
            if only is not None and (cp, oop) not in only:
                continue
            c = cell(args.tuples, cp, oop, args.per_slide, args.subwindows, args.seed, args.repeats, args.aa)
            judge(c)
            cells.append(c)
            print(f"cp={cp:.1f} oop={oop:.1f} eager {c['median'][EAGER]:.3f} s lazy {c['median'][LAZY]:.3f} s "
                  f"(spread {c['spread'][EAGER]:.0%} / {c['spread'][LAZY]:.0%}) chosen {c['chosen']}, paired "
                  f"{c['paired_ratio']['median']:.2f} [{c['paired_ratio']['ci95'][0]:.2f}, {c['paired_ratio']['ci95'][1]:.2f}]"
                  f"{' WORSE beyond noise' if c['worse_beyond_noise'] else ''} (cp {c['eager_cp_est']:.2f}, "
                  f"re-merged {c['splits_est']:.2f}); measured {c['median'][MEASURED]:.3f} s, over the better "
                  f"{c['measured_ratio']['median']:.2f} [{c['measured_ratio']['ci95'][0]:.2f}, "
                  f"{c['measured_ratio']['ci95'][1]:.2f}] total {c['measured_excess']:+.1%}"
                  f"{' WORSE beyond noise' if c['measured_worse_beyond_noise'] else ''}; measuring cost "
                  f"{c['measuring_cost']:+.1%}, steady {c['steady_excess']:+.1%} ({c['measured_steady']} steady, paired "
                  f"{_ci_text(c['measured_steady_ratio'])})" + (f"; A/A {_ci_text(c['aa_ratio'])} total {c['aa_total']:+.1%}"
                                                             if "aa_ratio" in c else ""), flush=True)
    total = {st: sum(c["median"][st] for c in cells) for st in (EAGER, LAZY)}
    total["chosen"] = sum(c["median"][c["chosen"]] for c in cells)
    total[MEASURED] = sum(c["median"][MEASURED] for c in cells)
    total["better"] = sum(c["median"][c["better"]] for c in cells)
    spreads = sorted(c["spread"][st] for c in cells for st in (EAGER, LAZY))
    result = {"tuples": args.tuples, "per_slide": args.per_slide, "subwindows": args.subwindows, "seed": args.seed,
              "repeats": args.repeats, "query": QUERY, "calibration": cal, "cells": cells,
              "eager_cheaper": sum(c["median"][EAGER] <= c["median"][LAZY] for c in cells),
              "chosen_is_measured_cheaper": sum(c["chosen_is_cheaper"] for c in cells),
              "worse_beyond_noise": sum(c["worse_beyond_noise"] for c in cells),
              "max_excess": max(c["excess"] for c in cells),
              "spread_median": spreads[len(spreads) // 2], "spread_max": spreads[-1],
              "measured_worse_beyond_noise": sum(c["measured_worse_beyond_noise"] for c in cells),
              "measured_max_excess": max(c["measured_excess"] for c in cells),
              "measured_median_ratio_max": max(c["measured_ratio"]["median"] for c in cells),
              "total_cpu_s": total, "answers_equal": all(c["answers_equal"] for c in cells)}
    if args.aa:
        judged(result, args.out, draw=only is None)
    elif only is None:
        plot(result, args.out)
    save(result, args.out)
    print(f"eager cheaper (median of {args.repeats}) in {result['eager_cheaper']}/{len(cells)} cells; the plan chose the "
          f"cheaper in {result['chosen_is_measured_cheaper']}/{len(cells)}, worse beyond noise in "
          f"{result['worse_beyond_noise']}, worst excess of the medians {result['max_excess']:.1%}; spread of the "
          f"repeats (max - min) / median: median {result['spread_median']:.0%}, max {result['spread_max']:.0%}; "
          f"CPU s in all (medians): eager {total[EAGER]:.2f}, lazy {total[LAZY]:.2f}, chosen {total['chosen']:.2f}, "
          f"measured {total[MEASURED]:.2f}, the better per cell {total['better']:.2f}; the measured choice worse "
          f"beyond noise in {result['measured_worse_beyond_noise']}, worst excess of its totals "
          f"{result['measured_max_excess']:.1%}; answers equal: {result['answers_equal']}")


def judged(result: dict, out: Path | None = None, draw: bool = True) -> None:
    """Judge the claim on an --aa run's cells (`claim`, all executions of a cell as one run; with
    repeats also `verdict`, over them), print it, and draw the figure of the verdict, or of the
    claim without repeats, into `out`."""
    result["claim"] = claim(result["cells"])
    print(("all repeats as one run: " if result["repeats"] > 1 else "") + claim_text(result["claim"]))
    if result["repeats"] > 1:
        result["verdict"] = verdict(result["cells"])
        print(verdict_text(result["verdict"]))
    if draw and out is not None:
        plot_claim(result.get("verdict", result["claim"]), out)


PER_EXECUTION = ("times", "ratios", "measured_ran")


def save(result: dict, out: Path) -> None:
    """store_results.json: everything but the per-execution series, which go, in whole µs, to
    store_times.json.gz (keyed by cell; `load` joins them again)."""
    cells = [{k: v for k, v in c.items() if k not in PER_EXECUTION} for c in result["cells"]]
    (out / "store_results.json").write_text(json.dumps({**result, "cells": cells}, indent=1) + "\n")
    series = {f"{c['cp']},{c['oop']}": {"times_us": {k: [round(x * 1e6) for x in v] for k, v in c["times"].items()},
                                        "measured_ran": c["measured_ran"]}
              for c in result["cells"]}
    (out / "store_times.json.gz").write_bytes(gzip.compress(json.dumps(series, separators=(",", ":")).encode(), 9, mtime=0))


def load(out: Path) -> dict:
    """`save`'s two files as one result (times in seconds, the paired eager / lazy ratios again)."""
    result = json.loads((out / "store_results.json").read_text())
    series = json.loads(gzip.decompress((out / "store_times.json.gz").read_bytes()))
    for c in result["cells"]:
        s = series[f"{c['cp']},{c['oop']}"]
        c["times"] = {k: [x / 1e6 for x in v] for k, v in s["times_us"].items()}
        c["measured_ran"] = s["measured_ran"]
        c["ratios"] = [e / max(lz, 1e-9) for e, lz in zip(c["times"][EAGER], c["times"][LAZY])]
    return result


def claim(cells: list[dict]) -> dict:
    """The paper's claim, "the chosen plan is never worse than either", judged per cell on paired
    executions against the A/A noise floor (cells run with `--aa`). Per cell the better strategy
    is the one whose paired median time is the lower (eager's over lazy's at or below 1: eager);
    each plan's paired median over it, with its 95 % interval. The noise floor N is the largest
    distance of the A/A paired median from 1 over the cells: two runs of one plan differ by that
    much. A plan is over the floor in a cell when its paired median over the better exceeds 1 + N,
    and clearly over when its whole interval does. Totals (each plan's CPU seconds over the cell)
    are given beside the A/A totals' range: a few executions slowed 3-4 times by a collection of
    the whole heap move them more than the medians. The measured choice's cells over the floor
    are told apart by `cause`."""
    out: dict = {"cells": []}
    for c in cells:
        t = c["times"]
        better = EAGER if _median_ci(c["ratios"])["median"] <= 1 else LAZY
        row = {"cp": c["cp"], "oop": c["oop"], "better": better, "chosen": c["chosen"],
               "final": c["measured_plan"][0]["final"], "aa": c["aa_ratio"], "aa_total": c["aa_total"],
               "eager_over_lazy": _median_ci(c["ratios"]),
               "ran_better": sum(st == better for st in c["measured_ran"]) / max(len(c["measured_ran"]), 1)}
        for name, st in (("model", c["chosen"]), (MEASURED, MEASURED), (EAGER, EAGER), (LAZY, LAZY)):
            row[name] = _median_ci([x / max(b, 1e-9) for x, b in zip(t[st], t[better])])
            row[name + "_total"] = sum(t[st]) / max(sum(t[better]), 1e-9) - 1
        out["cells"].append(row)
    floor = max(abs(r["aa"]["median"] - 1) for r in out["cells"])
    out["aa_floor"] = floor
    out["aa_total_range"] = [min(r["aa_total"] for r in out["cells"]), max(r["aa_total"] for r in out["cells"])]
    for name in ("model", MEASURED, EAGER, LAZY):
        over = [r for r in out["cells"] if r[name]["median"] > 1 + floor]
        out[name] = {"over_floor": len(over), "clearly_over": sum(r[name]["ci95"][0] > 1 + floor for r in out["cells"]),
                     "worst_median": max(r[name]["median"] for r in out["cells"]),
                     "over_cells": [(r["cp"], r["oop"], round(r[name]["median"], 3)) for r in over],
                     "worst_total": max(r[name + "_total"] for r in out["cells"]),
                     "cpu_s": sum(sum(c["times"][c["chosen"] if name == "model" else name]) for c in cells)}
    over = [r for r in out["cells"] if r[MEASURED]["median"] > 1 + floor]
    why = [cause(r["ran_better"], max(r[EAGER]["median"], r[LAZY]["median"]) - 1, floor) for r in over]
    out[MEASURED]["causes"] = {k: [(r["cp"], r["oop"]) for r, w in zip(over, why) if w == k] for k in CAUSES}
    out["better_cpu_s"] = sum(sum(c["times"][r["better"]]) for c, r in zip(cells, out["cells"]))
    out["cells_n"] = len(cells)
    return out


def by_repeat(c: dict) -> list[dict]:
    """A cell run several times (`cell`'s repeats) as one judged cell per repeat: its times, paired
    ratios and the measured choice's life cut where each repeat's timed executions end."""
    out, start = [], 0
    for r, n in enumerate(c.get("rep_executions") or [len(c["measured_ran"])]):
        part = slice(start, start + n)
        start += n
        times = {st: v[part] for st, v in c["times"].items()}
        rc = {"cp": c["cp"], "oop": c["oop"], "chosen": c["chosen"], "times": times, "ratios": c["ratios"][part],
              "measured_ran": c["measured_ran"][part], "measured_plan": [c["measured_plan"][r]],
              **{st: [sum(v)] for st, v in times.items()}}
        judge(rc)
        out.append(rc)
    return out


# The verdict over repeats (`verdict`). Per cell and repeat a plan's figure is log(its paired median
# over the better strategy), the better being the one whose mean over the repeats of log(eager / lazy
# paired median) is the lower; the A/A's is log(A/A over eager); a cell's figure is the mean over its
# repeats. The floor is FLOOR_Z x the root mean square of the A/A's cell figures over the grid (121 of
# them: an estimate that moves little from run to run, where the largest of 121 is an extreme value
# that moves by half): a plan whose cost equals the better's is over it in a given cell with
# probability 1 % (two-sided), in about one cell of 121 by chance. A plan is over the floor in a cell
# when its figure is; clearly over when the 95 % interval of its figure (Student's t over the
# repeats, the cell's own spread between them) is. The cells' spread counts what the repeats of a
# cell share, if anything; the floor that takes them as independent (FLOOR_Z x the A/A's spread over
# every repeat / sqrt(R)) is given beside as a check (`floor_independent`, and the A/A's count over
# it): the two part when the repeats share a bias (docs/coalesce.md, round 24).
FLOOR_Z = 2.576
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)  # Student's t, 1 to 10 df


def _mean_ci(logs: list[float]) -> dict:
    """The mean of per-repeat log ratios as a ratio ("median": the cell's figure, as `claim`'s), its
    95 % interval (Student's t; None for one repeat) and the repeats' own ratios."""
    n = len(logs)
    mean = sum(logs) / n
    ci = None
    if 1 < n <= len(T975) + 1:
        sd = (sum((x - mean) ** 2 for x in logs) / (n - 1)) ** 0.5
        half = T975[n - 2] * sd / n ** 0.5
        ci = [math.exp(mean - half), math.exp(mean + half)]
    return {"median": math.exp(mean), "log": mean, "ci95": ci, "repeats": [math.exp(x) for x in logs]}


def verdict(cells: list[dict]) -> dict:
    """The claim judged over the repeats of every cell (cells run with `--aa` and `--repeats` R of
    at least 2): the A/A floor from the spread of the A/A's cell figures, each plan's mean excess
    over the better per cell against it (FLOOR_Z above), the measured choice's cells over it
    by `cause`; and, beside, `claim`'s per-run figures for each repeat on its own (`per_repeat`),
    the floor each single run would have had."""
    reps = [by_repeat(c) for c in cells]
    n_rep = min(len(r) for r in reps)
    if n_rep < 2 or n_rep > len(T975) + 1:
        raise ValueError(f"the verdict over repeats needs 2 to {len(T975) + 1} repeats per cell, not {n_rep}")
    aa = [[math.log(rc["aa_ratio"]["median"]) for rc in rr] for rr in reps]
    spread = (sum((sum(a) / len(a)) ** 2 for a in aa) / len(aa)) ** 0.5
    floor = FLOOR_Z * spread
    independent = FLOOR_Z * (sum(x * x for a in aa for x in a) / sum(len(a) for a in aa)) ** 0.5 / n_rep ** 0.5
    out: dict = {"repeats": n_rep, "aa_spread": spread, "floor_log": floor, "aa_floor": math.expm1(floor),
                 "floor_independent": math.expm1(independent),
                 "aa_over_independent": sum(abs(sum(a) / len(a)) > independent for a in aa),
                 "cells": [], "cells_n": len(cells)}
    for c, rr, a in zip(cells, reps, aa):
        el = [math.log(_median_ci(rc["ratios"])["median"]) for rc in rr]
        better = EAGER if sum(el) <= 0 else LAZY
        ran = [st for rc in rr for st in rc["measured_ran"]]
        row = {"cp": c["cp"], "oop": c["oop"], "better": better, "chosen": c["chosen"],
               "final": rr[-1]["measured_plan"][0]["final"], "finals": [rc["measured_plan"][0]["final"] for rc in rr],
               "eager_over_lazy": _mean_ci(el), "aa": _mean_ci(a),
               "ran_better": sum(st == better for st in ran) / max(len(ran), 1)}
        for name, st in (("model", c["chosen"]), (MEASURED, MEASURED), (EAGER, EAGER), (LAZY, LAZY)):
            row[name] = _mean_ci([math.log(_median_ci([x / max(b, 1e-9) for x, b in zip(rc["times"][st], rc["times"][better])])
                                           ["median"]) for rc in rr])
            row[name + "_total"] = sum(c["times"][st]) / max(sum(c["times"][better]), 1e-9) - 1
        out["cells"].append(row)
    rows = out["cells"]
    out["aa_over"] = sum(abs(r["aa"]["log"]) > floor for r in rows)
    out["aa_largest"] = max(abs(math.expm1(r["aa"]["log"])) for r in rows)
    for name in ("model", MEASURED, EAGER, LAZY):
        over = [r for r in rows if r[name]["log"] > floor]
        out[name] = {"over_floor": len(over),
                     "clearly_over": sum(r[name]["ci95"][0] > math.exp(floor) for r in rows),
                     "worst_median": max(r[name]["median"] for r in rows),
                     "over_cells": [(r["cp"], r["oop"], round(r[name]["median"], 3)) for r in over],
                     "cpu_s": sum(sum(c["times"][c["chosen"] if name == "model" else name]) for c in cells)}
    over = [r for r in rows if r[MEASURED]["log"] > floor]
    why = [cause(r["ran_better"], max(r[EAGER]["median"], r[LAZY]["median"]) - 1, out["aa_floor"]) for r in over]
    out[MEASURED]["causes"] = {k: [(r["cp"], r["oop"]) for r, w in zip(over, why) if w == k] for k in CAUSES}
    out["better_cpu_s"] = sum(sum(c["times"][r["better"]]) for c, r in zip(cells, rows))
    out["per_repeat"] = []
    for i in range(n_rep):
        cl = claim([rr[i] for rr in reps])
        out["per_repeat"].append({"aa_floor": cl["aa_floor"], **{name: {k: cl[name][k] for k in (
            "over_floor", "clearly_over", "worst_median")} for name in ("model", MEASURED)}})
    return out


def verdict_text(v: dict) -> str:
    """`verdict` in a paragraph, the per-run figures of each repeat beside it."""
    parts = [f"over {v['repeats']} repeats: the A/A's cell figures' spread {v['aa_spread']:.4f} (log), floor "
             f"{v['aa_floor']:.2%} ({FLOOR_Z} x spread); the A/A over it in {v['aa_over']}/{v['cells_n']} cells, largest "
             f"{v['aa_largest']:.2%} (the repeats taken as independent: floor {v['floor_independent']:.2%}, the A/A over it "
             f"in {v['aa_over_independent']})"]
    for name in ("model", MEASURED, EAGER, LAZY):
        x = v[name]
        parts.append(f"{name}: over the floor in {x['over_floor']}/{v['cells_n']} (clearly {x['clearly_over']}), worst "
                     f"mean {x['worst_median']:.3f}, CPU {x['cpu_s']:.1f} s")
    parts.append(_causes_text(v[MEASURED]["causes"]))
    parts.append(f"the better per cell CPU {v['better_cpu_s']:.1f} s")
    per = "; ".join(f"repeat {i + 1}: floor {r['aa_floor']:.1%}, measured over {r[MEASURED]['over_floor']} (clearly "
                    f"{r[MEASURED]['clearly_over']}, worst {r[MEASURED]['worst_median']:.3f}), model over "
                    f"{r['model']['over_floor']} (clearly {r['model']['clearly_over']})"
                    for i, r in enumerate(v["per_repeat"]))
    return "; ".join(parts) + "\nper-run figures of each repeat alone (claim): " + per


def agreement(a: dict, b: dict) -> str:
    """How far two verdicts (two runs of the same code) are apart: floors, counts, the cells over the
    floor in both and in one only, and the mean absolute change of a cell's figure."""
    lines = [f"floor {a['aa_floor']:.2%} / {b['aa_floor']:.2%}"]
    key = {(r["cp"], r["oop"]): r for r in b["cells"]}
    for name in ("model", MEASURED, EAGER, LAZY):
        sa = {(r["cp"], r["oop"]) for r in a["cells"] if r[name]["log"] > a["floor_log"]}
        sb = {k for k, r in key.items() if r[name]["log"] > b["floor_log"]}
        moved = sum(abs(r[name]["log"] - key[(r["cp"], r["oop"])][name]["log"]) for r in a["cells"]) / len(a["cells"])
        lines.append(f"{name}: over {len(sa)} / {len(sb)}, in both {len(sa & sb)}, in one only {len(sa ^ sb)}; a "
                     f"cell's figure moves by {moved:.2%} on average (log)")
    return "; ".join(lines)


# Why the measured choice is over the floor in a cell: `decision` (it ran the worse strategy for 3/4
# of the life or more, and the worse is over the floor itself), `copy` (it ran one strategy for 3/4
# of the life or more, one within the floor of the better: its executions cost more than the forced
# plan's at the same slides, its copy's excess and its probes' disturbance), `switching` (it went
# back and forth, or decided late).
CAUSES = ("copy", "switching", "decision")


def cause(ran_better: float, gap: float, floor: float) -> str:
    """The cause of a cell over the floor (CAUSES), from the share of the life that ran the better
    and the worse strategy's paired median over the better less 1 (`gap`)."""
    if ran_better <= 0.25 and gap > floor:
        return "decision"
    return "copy" if ran_better >= 0.75 or ran_better <= 0.25 else "switching"


def plot_claim(cl: dict, out: Path) -> None:
    """Three panels over the grid, from `claim` or `verdict` (`cl`): eager's paired median over
    lazy's (the letter the cost model's choice, yellow where it is over the A/A floor); the measured
    choice's paired median over the better strategy's (the letter the strategy it ended on; ! where
    over the floor); and the A/A control's, on the same colour scale as the measured choice's. With
    repeats (a verdict), each figure is the mean over them of the repeats' paired medians (log)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    grid = sorted({r["cp"] for r in cl["cells"]})
    n, half = len(grid), (grid[1] - grid[0]) / 2 if len(grid) > 1 else 0.05
    stat = f"mean of {cl['repeats']} repeats' paired medians" if "repeats" in cl else "paired median"
    panels = {k: np.zeros((n, n)) for k in ("el", MEASURED, "aa")}
    for r in cl["cells"]:
        i, j = grid.index(r["oop"]), grid.index(r["cp"])
        panels["el"][i, j] = r["eager_over_lazy"]["median"] - 1
        panels[MEASURED][i, j] = r[MEASURED]["median"] - 1
        panels["aa"][i, j] = r["aa"]["median"] - 1
    fig, axes = plt.subplots(1, 3, figsize=(18, 5.8), constrained_layout=True)
    ext = (grid[0] - half, grid[-1] + half, grid[0] - half, grid[-1] + half)
    lim = max(abs(panels["el"]).max(), 1e-9)
    im0 = axes[0].imshow(panels["el"], origin="lower", cmap="coolwarm", vmin=-lim, vmax=lim, extent=ext)
    lim2 = max(abs(panels[MEASURED]).max(), abs(panels["aa"]).max(), 1e-9)
    im1 = axes[1].imshow(panels[MEASURED], origin="lower", cmap="PuOr_r", vmin=-lim2, vmax=lim2, extent=ext)
    axes[2].imshow(panels["aa"], origin="lower", cmap="PuOr_r", vmin=-lim2, vmax=lim2, extent=ext)
    floor = cl["aa_floor"]
    for r in cl["cells"]:
        over = r["model"]["median"] > 1 + floor
        axes[0].text(r["cp"], r["oop"], "E" if r["chosen"] == EAGER else "L", ha="center", va="center", fontsize=7,
                     color="yellow" if over else "black", fontweight="bold")
        over = r[MEASURED]["median"] > 1 + floor
        axes[1].text(r["cp"], r["oop"], ("E" if r["final"] == EAGER else "L") + ("!" if over else ""), ha="center",
                     va="center", fontsize=7, color="red" if over else "black", fontweight="bold")
    for ax in axes:
        ax.set_xlabel("coalescing probability")
        ax.set_ylabel("out-of-order probability")
    axes[0].set_title(f"eager / lazy - 1 ({stat})\nletters: the cost model's choice "
                      f"(yellow: over the better by more than {floor:.1%})", fontsize=9)
    axes[1].set_title(f"measured choice / the better - 1 ({stat})\nletters: its final strategy (! red: over "
                      f"the A/A floor {floor:.1%})", fontsize=9)
    axes[2].set_title(f"A/A: eager / eager again - 1 ({stat})\nthe noise floor of the comparison", fontsize=9)
    fig.colorbar(im0, ax=axes[0], shrink=0.8)
    fig.colorbar(im1, ax=axes[1:], shrink=0.8)
    fig.savefig(out / "store_choice.png", dpi=100)
    plt.close(fig)


def claim_text(cl: dict) -> str:
    parts = [f"A/A floor {cl['aa_floor']:.1%} (A/A totals {cl['aa_total_range'][0]:+.1%} to {cl['aa_total_range'][1]:+.1%})"]
    for name in ("model", MEASURED, EAGER, LAZY):
        x = cl[name]
        parts.append(f"{name}: over the floor in {x['over_floor']}/{cl['cells_n']} (clearly {x['clearly_over']}), worst "
                     f"paired median {x['worst_median']:.3f}, worst total {x['worst_total']:+.1%}, CPU {x['cpu_s']:.1f} s")
    parts.append(_causes_text(cl[MEASURED]["causes"]))
    return "; ".join(parts) + f"; the better per cell CPU {cl['better_cpu_s']:.1f} s"


def _causes_text(causes: dict) -> str:
    return "the measured choice's cells over the floor by cause: " + ", ".join(
        f"{k} {len(causes[k])} {causes[k]}" for k in CAUSES)


def _ci_text(r: dict | None) -> str:
    return "-" if r is None else f"{r['median']:.3f} [{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]"


def _median_ci(ratios: list[float]) -> dict:
    """The median of paired ratios with its distribution-free 95 % confidence interval (order
    statistics of the sorted ratios, binomial(n, 1/2))."""
    r = sorted(ratios)
    n = len(r)
    half = 1.96 * n ** 0.5 / 2
    lo, hi = max(int(n / 2 - half), 0), min(int(n / 2 + half + 1), n - 1)
    return {"median": r[n // 2], "ci95": [r[lo], r[hi]]}


def judge(c: dict) -> None:
    """Adds to a cell: the median and spread ((max - min) / median) of each plan's repeats; for
    the cost model's choice, whether it was the cheaper, by how much it exceeded the cheaper
    (medians), and whether it was slower beyond the noise; the same for the measured choice against
    the better of eager and lazy (`measured_*`), and its excess on the totals, which include its
    paired executions. The noise is judged on paired executions (the plans run back to back, so
    all see the same load): the median of one's time over the other's with its 95 % interval;
    slower beyond the noise when the whole interval is above 1."""
    names = [st for st in (*PLANS, AA) if st in c]
    med = {st: sorted(c[st])[len(c[st]) // 2] for st in names}
    other = LAZY if c["chosen"] == EAGER else EAGER
    better = EAGER if med[EAGER] <= med[LAZY] else LAZY
    best = med[better]
    c["median"] = med
    c["spread"] = {st: (max(c[st]) - min(c[st])) / med[st] for st in names}
    c["chosen_is_cheaper"] = med[c["chosen"]] <= med[other]
    c["excess"] = (med[c["chosen"]] - best) / best
    c["paired_ratio"] = _median_ci([x if c["chosen"] == EAGER else 1 / x for x in c["ratios"]])
    c["worse_beyond_noise"] = c["paired_ratio"]["ci95"][0] > 1
    t = c["times"]
    c["better"] = better
    c["measured_excess"] = (med[MEASURED] - best) / best
    c["measured_ratio"] = _median_ci([m / max(b, 1e-9) for m, b in zip(t[MEASURED], t[better])])
    c["measured_worse_beyond_noise"] = c["measured_ratio"]["ci95"][0] > 1
    c["model_ratio"] = _median_ci([m / max(b, 1e-9) for m, b in zip(t[c["chosen"]], t[better])])
    # The measured choice's executions in two kinds: steady (it ran the better strategy, and did in
    # the execution before, so no build after a probe is in it) and measuring (trials, probes and
    # the execution after each); the second kind's excess over the better, as a share of the
    # better's total, is what measuring cost.
    ran = c["measured_ran"]
    steady = [i for i, st in enumerate(ran) if st == better and (i == 0 or ran[i - 1] == better)]
    rest = sorted(set(range(len(ran))) - set(steady))
    c["measured_steady"] = len(steady)
    c["measured_steady_ratio"] = _median_ci([t[MEASURED][i] / max(t[better][i], 1e-9) for i in steady]) if steady else None
    c["measuring_cost"] = sum(t[MEASURED][i] - t[better][i] for i in rest) / max(sum(t[better]), 1e-9)
    c["steady_excess"] = sum(t[MEASURED][i] - t[better][i] for i in steady) / max(sum(t[better]), 1e-9)
    if AA in t:
        c["aa_ratio"] = _median_ci([a / max(e, 1e-9) for a, e in zip(t[AA], t[EAGER])])
        c["aa_beyond_noise"] = c["aa_ratio"]["ci95"][0] > 1 or c["aa_ratio"]["ci95"][1] < 1
        c["aa_total"] = sum(t[AA]) / max(sum(t[EAGER]), 1e-9) - 1


if __name__ == "__main__":
    main()
