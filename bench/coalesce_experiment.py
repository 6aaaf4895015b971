"""Section 7 of "Temporal Coalescing on Window Extents over Data Streams": eager against lazy
coalescing (store/coalesce.py) over synthetic streams, coalescing probability and out-of-order
probability each swept 0..1 by 0.1, and the plan the cost model (choose_plan) picks per cell.

Per cell both strategies run the same stream through a tuple-based window of `--window` tuples,
scanning the coalesced extent every `--scan-every` arrivals; measured: update time per arrival,
time per scan and the memory of the extent in the paper's byte model (40-byte tuples, 8-byte
timestamps). Costs are the paper's weighted sums of normalised memory, update and scan, for its
weights <1,1,1>, <1,50,1>, <1,100,1> and <0,1,1>. The model's per-operation costs are calibrated
from four corner cells, then it chooses a plan for every cell from (cp, oop) alone.

    python -m bench.coalesce_experiment [--tuples 200000] [--quick] [--out docs/coalesce]
"""
from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from windowstore.store.coalesce import (DCQ, EAGER, LAZY, TUPLE, EagerCoalescer, LazyCoalescer, OpCosts,
                                        Weights, Workload, choose_plan, normalizers)

GRID = [round(i / 10, 1) for i in range(11)]
WEIGHTS = {"1-1-1": Weights(1, 1, 1), "1-50-1": Weights(1, 50, 1), "1-100-1": Weights(1, 100, 1),
           "0-1-1": Weights(0, 1, 1)}
R_TUPLE = 3 * 4 + 3 * 4 + 8 + 8  # three time-varying and three time-invariant 4-byte attributes, ts, te
M_STAMP = 8
GROUPS = (3, 5, 7)


def stream(n: int, cp: float, oop: float, window: int, seed: int) -> list[tuple[int, tuple, tuple]]:
    """n readings in arrival order. In ts order each one repeats its group's previous value with
    probability cp (else takes a new one); with probability oop it arrives late, behind up to half a
    window of later readings (so it is late but not too late)."""
    rng = random.Random(seed)
    last: dict[tuple, tuple] = {}
    rows, arrival = [], []
    for ts in range(n):
        group = tuple(rng.randrange(g) for g in GROUPS)
        prev = last.get(group)
        if prev is not None and rng.random() < cp:
            value = prev
        else:
            value = (ts, rng.randrange(100), rng.randrange(100))  # never equal to an earlier value
        last[group] = value
        rows.append((ts, group, value))
        arrival.append(ts + (rng.uniform(1, window / 2) if rng.random() < oop else 0))
    order = sorted(range(n), key=arrival.__getitem__)
    return [rows[i] for i in order]


def run(cls, rows, window: int, scan_every: int) -> dict:
    """Update seconds per arrival, seconds per scan, mean extent bytes at the scans. Times are the
    process's CPU time, not wall-clock time: the machine is shared, and waiting for a core is not
    a cost of either strategy."""
    c = cls(TUPLE, window)
    update = scan = 0.0
    scans = 0
    memory = 0.0
    perf = time.process_time
    for i in range(0, len(rows), scan_every):
        t0 = perf()
        for ts, group, value in rows[i:i + scan_every]:
            c.insert(ts, group, value)
        update += perf() - t0
        t0 = perf()
        c.scan()
        scan += perf() - t0
        scans += 1
        tuples, stamps = c.footprint()
        memory += tuples * R_TUPLE + stamps * M_STAMP
    return {"update_s": update / len(rows), "scan_s": scan / scans, "memory_b": memory / scans}


def calibrate(n: int, window: int, scan_every: int, seed: int) -> tuple[OpCosts, OpCosts]:
    """Per-operation costs (microseconds) for the model, from the corner cells (section 7.2 measured
    them per operation; here they are read off whole runs): eager (cp, oop) = (0, 0) is an insert
    and a delete per arrival, (1, 0) a merge and a detach, (0, 1) adds a split; lazy is an insert
    and a delete; a scan reads each tuple (lazy at cp = 1 also coalesces each)."""
    def measure(cls, cp, oop):
        return run(cls, stream(n, cp, oop, window, seed), window, scan_every)
    e00, e10, e01 = measure(EagerCoalescer, 0, 0), measure(EagerCoalescer, 1, 0), measure(EagerCoalescer, 0, 1)
    l00, l10 = measure(LazyCoalescer, 0, 0), measure(LazyCoalescer, 1, 0)
    us = 1e6
    eager = OpCosts(read=e00["scan_s"] / window * us, insert=e00["update_s"] / 2 * us,
                    delete=e00["update_s"] / 2 * us, merge=e10["update_s"] / 2 * us,
                    detach=e10["update_s"] / 2 * us,
                    split=max(e01["update_s"] - e00["update_s"], 0.0) * us, coalesce=0.0)
    read = l00["scan_s"] / window * us
    lazy = OpCosts(read=read, insert=l00["update_s"] / 2 * us, delete=l00["update_s"] / 2 * us,
                   coalesce=max(l10["scan_s"] / window * us - read, 0.0))
    return eager, lazy


def costs(cells: list[dict], weights: Weights, wl: Workload, eager_ops: OpCosts) -> None:
    """Adds the weighted normalised measured cost of eager and lazy to every cell (in place),
    normalised as the model normalises (choose_plan's M_max, U_max, S_max), so that the measured
    costs and the model's choice are on one scale: memory per extent, update summed over the k
    arrivals, scan per scan."""
    norm = normalizers([DCQ("q", 0, 0, R_TUPLE, eager_ops)], wl)
    for c in cells:
        for s in (EAGER, LAZY):
            c.setdefault("cost", {}).setdefault(s, {})[weights] = (
                weights.memory * c[s]["memory_b"] / norm.memory
                + weights.update * c[s]["update_s"] * 1e6 * wl.k / norm.update
                + weights.scan * c[s]["scan_s"] * 1e6 / norm.scan)


def sweep(args) -> dict:
    eager_ops, lazy_ops = calibrate(min(args.tuples, 20_000), args.window, args.scan_every, args.seed)
    cells = []
    for oop in GRID:
        for cp in GRID:
            rows = stream(args.tuples, cp, oop, args.window, args.seed)
            cell = {"cp": cp, "oop": oop, "window": args.window,
                    EAGER: run(EagerCoalescer, rows, args.window, args.scan_every),
                    LAZY: run(LazyCoalescer, rows, args.window, args.scan_every)}
            cells.append(cell)
            print(f"cp={cp:.1f} oop={oop:.1f} eager {cell[EAGER]['update_s'] * 1e6:.2f} us/arrival "
                  f"{cell[EAGER]['scan_s'] * 1e3:.3f} ms/scan {cell[EAGER]['memory_b']:.0f} B; lazy "
                  f"{cell[LAZY]['update_s'] * 1e6:.2f} us/arrival {cell[LAZY]['scan_s'] * 1e3:.3f} ms/scan "
                  f"{cell[LAZY]['memory_b']:.0f} B", flush=True)
    wl = Workload(w=args.window, k=args.tuples, r_lazy=R_TUPLE, m=M_STAMP, ops=lazy_ops)
    result = {"tuples": args.tuples, "window": args.window, "scan_every": args.scan_every,
              "seed": args.seed, "ops_us": {EAGER: vars(eager_ops), LAZY: vars(lazy_ops)},
              "cells": [], "weights": {}}
    for name, weights in WEIGHTS.items():
        costs(cells, weights, wl, eager_ops)
        summary = {"eager_wins": 0, "lazy_wins": 0, "chosen_is_measured_best": 0, "max_regret": 0.0}
        for c in cells:
            plan = choose_plan([DCQ("q", c["cp"], c["oop"], R_TUPLE, eager_ops)], wl, weights)
            e, l = c["cost"][EAGER][weights], c["cost"][LAZY][weights]
            chosen = plan.choice["q"]
            got = e if chosen == EAGER else l
            c.setdefault("chosen", {})[name] = chosen
            summary["eager_wins" if e < l else "lazy_wins"] += 1
            summary["chosen_is_measured_best"] += got <= min(e, l)
            summary["max_regret"] = max(summary["max_regret"], (got - min(e, l)) / min(e, l))
        result["weights"][name] = summary
    for c in cells:
        result["cells"].append({
            "cp": c["cp"], "oop": c["oop"], EAGER: c[EAGER], LAZY: c[LAZY], "chosen": c["chosen"],
            "cost": {s: {n: c["cost"][s][w] for n, w in WEIGHTS.items()} for s in (EAGER, LAZY)}})
    result["multi_query"] = table6(eager_ops, wl)
    return result


def table6(eager_ops: OpCosts, wl: Workload) -> list[dict]:
    """Section 7.3's Table 6 scenarios (six DCQs, weights <0,1,1>) through the calibrated model:
    all eager, all lazy and the optimum of the 0-1 program."""
    cases = [([0.2] * 6, [0.3] * 6), ([0.7] * 6, [0.6] * 6), ([0.5] * 6, [0.3] * 6),
             ([0.5] * 6, [0.7] * 6), ([0.4] * 3 + [0.2] * 3, [0.6] * 3 + [0.7] * 3),
             ([0.4] * 3 + [0.2] * 3, [0.6, 0.8, 0.8, 0.7, 0.7, 0.7])]
    out = []
    for i, (cps, oops) in enumerate(cases, 1):
        qs = [DCQ(f"Q{j + 1}", cp, oop, R_TUPLE, eager_ops) for j, (cp, oop) in enumerate(zip(cps, oops))]
        plan = choose_plan(qs, wl, WEIGHTS["0-1-1"])
        out.append({"case": i, "cp": cps, "oop": oops, "choice": plan.choice, "optimal": plan.total,
                    "all_eager": plan.all_eager, "all_lazy": plan.all_lazy})
    return out


def plot(result: dict, out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    cells = result["cells"]
    n = len(GRID)
    fig, axes = plt.subplots(1, len(WEIGHTS), figsize=(5 * len(WEIGHTS), 4.6), constrained_layout=True)
    for ax, name in zip(axes, WEIGHTS):
        diff = np.zeros((n, n))
        for c in cells:
            i, j = GRID.index(c["oop"]), GRID.index(c["cp"])
            diff[i, j] = c["cost"][EAGER][name] - c["cost"][LAZY][name]
        lim = max(abs(diff).max(), 1e-9)
        im = ax.imshow(diff, origin="lower", cmap="coolwarm", vmin=-lim, vmax=lim,
                       extent=(-0.05, 1.05, -0.05, 1.05))
        for c in cells:
            e, l = c["cost"][EAGER][name], c["cost"][LAZY][name]
            best = EAGER if e < l else LAZY
            ch = c["chosen"][name]
            ax.text(c["cp"], c["oop"], "E" if ch == EAGER else "L", ha="center", va="center", fontsize=7,
                    color="black" if ch == best else "yellow", fontweight="bold")
        ax.set_title(f"eager - lazy cost, weights <{name.replace('-', ',')}>")
        ax.set_xlabel("coalescing probability")
        ax.set_ylabel("out-of-order probability")
        fig.colorbar(im, ax=ax, shrink=0.8)
    fig.suptitle(f"Blue: eager cheaper, red: lazy cheaper. Letters: the model's plan "
                 f"(yellow where the measured other was cheaper). {result['tuples']:,} tuples, "
                 f"window {result['window']}")
    fig.savefig(out / "cost_difference.png", dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), constrained_layout=True)
    for oop, style in ((0.0, "-"), (0.5, "--"), (1.0, ":")):
        row = sorted((c for c in cells if c["oop"] == oop), key=lambda c: c["cp"])
        cps = [c["cp"] for c in row]
        for s, color in ((EAGER, "tab:blue"), (LAZY, "tab:orange")):
            axes[0].plot(cps, [c[s]["update_s"] * 1e6 for c in row], style, color=color, label=f"{s}, oop={oop}")
            axes[1].plot(cps, [c[s]["scan_s"] * 1e3 for c in row], style, color=color, label=f"{s}, oop={oop}")
            axes[2].plot(cps, [c[s]["memory_b"] / 1024 for c in row], style, color=color, label=f"{s}, oop={oop}")
    for ax, label in zip(axes, ("update, us per arrival", "scan, ms per scan", "extent, KiB (byte model)")):
        ax.set_xlabel("coalescing probability")
        ax.set_ylabel(label)
    axes[0].legend(fontsize=7)
    fig.savefig(out / "measures.png", dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tuples", type=int, default=200_000)
    ap.add_argument("--quick", action="store_true", help="20,000 tuples per cell")
    ap.add_argument("--window", type=int, default=1000)
    ap.add_argument("--scan-every", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("docs/coalesce"))
    args = ap.parse_args()
    if args.quick:
        args.tuples = 20_000
    args.out.mkdir(parents=True, exist_ok=True)
    result = sweep(args)
    (args.out / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result, args.out)
    for name, s in result["weights"].items():
        print(f"<{name}>: eager wins {s['eager_wins']}, lazy wins {s['lazy_wins']}, plan = measured best "
              f"in {s['chosen_is_measured_best']}/{len(result['cells'])}, max regret {s['max_regret']:.1%}")
    for case in result["multi_query"]:
        print(f"Table 6 case {case['case']}: optimal {case['optimal']:.3f} all eager {case['all_eager']:.3f} "
              f"all lazy {case['all_lazy']:.3f} {case['choice']}")


if __name__ == "__main__":
    main()
