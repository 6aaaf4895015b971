"""Fit section 6.2's cost model (seed 000; `temporal.choose`) to this store's own grid runs and say
how well it predicts, per cell, the forced plans' paired eager / lazy ratio (issue 34).

Input: `bench.temporal_experiment`'s results (`store_results.json` and `store_times.json.gz`), one
directory per run (`--runs DIR ...`), and with `--history` every version of the committed run in
this repository's git history (the rounds' grids). Per cell the model knows what the store knows at
planning time: from the two newest sub-windows the data's share of repeated values (`cp_est`) and
eager's coalescing share and re-merged readings per reading (`eager_cp_est`, `splits_est`); the
window's rows, the reads per row (the window's sub-windows over the slide's) and the share of rows
after a sub-window boundary. The target is the paired median of log(eager / lazy) over the cell's
executions: the two ran back to back, so the machine's load, which moves a cell's absolute times by
up to three times over a run, passes over the ratio.

The model is linear in its per-operation costs (the normalisers of section 6.2 cancel against the
weights `choose` gives them), so its design columns are read off `temporal.choose` itself, one cost
at a time (`columns`): no second copy of the model. The fit (`fit`) is least squares in two steps:
lazy's costs (read per row, coalesce per repeated share) on the lazy plan's per-execution medians
(absolute µs, the loaded machine's scale), then eager's on the paired ratio times the fitted lazy,
weighted by 1 / lazy: a ratio-scale residual, the error the choice pays for. Eager's insert and
merge are fitted as one cost (`BUILD`); `STORE_STAMP` stays 0 (every calibration measured it 0).
`physical` keeps every cost of an operation >= 0 (`nonnegative_lstsq`).

Two structures are fitted and judged: the store's (equation 6's lazy scan at the data's share of
repeated values, `lazy_cp`) and round 21's (at eager's share within a sub-window, which is below
the data's where runs are cut at sub-window boundaries: at most 0.38 on the grid where the data's
is 0.9). Judged: the root mean square of the held-out residual of log(eager / lazy) per cell, where
the fit saw (a) the other half of the cells (a checkerboard of the grid, both ways round), (b) the
other runs only (each run judged on a fit to the others: a fresh grid); beside the model with each
run's own calibration (what the grid ran), "no gap" everywhere, a free least-squares quadratic in
the same inputs (what they hold at all, with no model), and the between-run spread of each cell's
ratio (no predictor from these inputs can beat it). `replay` runs each fitted plan on the runs'
forced times. `--json` writes it all.

    python -m bench.temporal_fit --history [--runs DIR ...] [--json OUT]
"""
from __future__ import annotations

import argparse
import functools
import gzip
import itertools
import json
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np

from windowstore.store import temporal
from windowstore.store.coalesce import EAGER, LAZY, OpCosts

CHOICE = "docs/coalesce/choice"
EAGER_COSTS = ("insert", "merge", "read", "split")
LAZY_COSTS = ("read", "coalesce")
# Fitted as one: building a sealed sub-window's runs per row, new value or repeated (every
# calibration measured the two within 1.6 times of each other, most within 1.2). Apart, insert is
# the read per run in another unit (both are paid per run when no row is late) and the fit trades
# one for the other from one run to the next.
BUILD = ("insert", "merge")
ZERO = OpCosts(read=0.0, insert=0.0, delete=0.0, detach=0.0, merge=0.0, split=0.0, coalesce=0.0)
FLOOR = 0.029  # round 21's A/A floor, for the replays


def cells_of(results: dict, series: dict, name: str) -> list[dict]:
    """One row per cell: the model's inputs and the forced plans' times."""
    w = results["per_slide"] * results["subwindows"]
    reads = float(results["subwindows"])  # SLIDE 1 SUBWINDOWS: each row is read by every execution that holds it
    out = []
    for c in results["cells"]:
        t = series[f"{c['cp']},{c['oop']}"]["times_us"]
        e, lz = np.array(t[EAGER], float), np.array(t[LAZY], float)
        out.append({"run": name, "grid": (c["cp"], c["oop"]), "cp": c["cp_est"], "oop": c["oop_est"],
                    "eager_cp": c["eager_cp_est"], "splits": c["splits_est"], "w": w, "reads": reads,
                    "boundaries": (results["subwindows"] - 1) / results["subwindows"],
                    "lazy_us": float(np.median(lz)), "log_ratio": float(np.median(np.log(e / lz))),
                    "own_model": float(np.log(c["model_us"][EAGER] / c["model_us"][LAZY]))})
    return out


def read_dir(d: Path) -> list[dict]:
    res = json.loads((d / "store_results.json").read_text())
    series = json.loads(gzip.decompress((d / "store_times.json.gz").read_bytes()))
    return cells_of(res, series, str(d))


def read_history(repo: Path) -> list[dict]:
    """Every committed version of the grid's run (oldest first), from git."""
    log = subprocess.run(["git", "-C", str(repo), "log", "--format=%h", "--", f"{CHOICE}/store_times.json.gz"],
                         check=True, capture_output=True, text=True).stdout.split()
    rows = []
    for h in reversed(log):
        def show(p: str, h: str = h) -> bytes:
            return subprocess.run(["git", "-C", str(repo), "show", f"{h}:{CHOICE}/{p}"], check=True,
                                  capture_output=True).stdout
        res = json.loads(show("store_results.json"))
        if all("model_us" in c and "cp_est" in c for c in res.get("cells", [None])):
            rows += cells_of(res, json.loads(gzip.decompress(show("store_times.json.gz"))), h)
    return rows


def _per_read(cell: dict, eager: OpCosts, lazy: OpCosts, lazy_cp: bool) -> tuple[float, float]:
    """The model's eager and lazy µs per execution for these costs (temporal.choose's, per read)."""
    saved = temporal.STORE_EAGER, temporal.STORE_LAZY, temporal.STORE_STAMP
    try:
        temporal.set_costs(eager, lazy, 0.0)
        _, plan = temporal.choose(cell["eager_cp"], cell["splits"], cell["w"], cell["reads"], cell["boundaries"],
                                  lazy_cp=cell["cp"] if lazy_cp else None)
    finally:
        temporal.set_costs(*saved)
    return plan.all_eager / cell["reads"], plan.all_lazy / cell["reads"]


@functools.lru_cache(maxsize=None)
def _columns(key: tuple, lazy_cp: bool) -> tuple[np.ndarray, np.ndarray]:
    cell = dict(zip(("eager_cp", "splits", "w", "reads", "boundaries", "cp"), key))
    base = replace(ZERO, **{k: 1.0 for k in EAGER_COSTS})
    lbase = replace(ZERO, **{k: 1.0 for k in LAZY_COSTS})
    e0, l0 = _per_read(cell, base, lbase, lazy_cp)
    ecol = [_per_read(cell, replace(base, **{k: 2.0}), lbase, lazy_cp)[0] - e0 for k in EAGER_COSTS]
    lcol = [_per_read(cell, base, replace(lbase, **{k: 2.0}), lazy_cp)[1] - l0 for k in LAZY_COSTS]
    return np.array(ecol), np.array(lcol)


def columns(cell: dict, lazy_cp: bool) -> tuple[np.ndarray, np.ndarray]:
    """d(eager per execution) / d(each of EAGER_COSTS) and d(lazy) / d(each of LAZY_COSTS): the model
    is linear in them, so a unit step from a base of ones gives each column exactly."""
    return _columns(tuple(cell[k] for k in ("eager_cp", "splits", "w", "reads", "boundaries", "cp")), lazy_cp)


def nonnegative_lstsq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Least squares with every coefficient >= 0, exactly: the best of the unconstrained fits on
    each subset of the columns whose coefficients all come out >= 0 (three or two columns here)."""
    best, best_err = np.zeros(a.shape[1]), float(np.sum(b ** 2))
    for keep in itertools.product((False, True), repeat=a.shape[1]):
        idx = [i for i, k in enumerate(keep) if k]
        if not idx:
            continue
        x = np.linalg.lstsq(a[:, idx], b, rcond=None)[0]
        if (x < 0).any():
            continue
        err = float(np.sum((a[:, idx] @ x - b) ** 2))
        if err < best_err:
            best, best_err = np.zeros(a.shape[1]), err
            best[idx] = x
    return best


def fit(cells: list[dict], lazy_cp: bool = True, physical: bool = True) -> dict:
    """Least squares: lazy's costs on its per-execution medians, then eager's on the paired ratio
    times the fitted lazy (weighted by 1 / lazy). `physical`: eager's costs >= 0, and lazy's per row
    >= 0 whether its value repeats or not (read >= 0, read + coalesce >= 0: coalesce itself is a
    change, negative where a repeated value saves)."""
    cols = [columns(c, lazy_cp) for c in cells]
    ec, lc = np.array([e for e, _ in cols]), np.array([lz for _, lz in cols])
    built = [EAGER_COSTS.index(k) for k in BUILD]
    rest = [i for i in range(len(EAGER_COSTS)) if i not in built]
    ec = np.column_stack([ec[:, built].sum(axis=1)] + [ec[:, i] for i in rest])  # (build, read, split)
    lazy_us = np.array([c["lazy_us"] for c in cells])
    if physical:  # in the basis (read, read + coalesce), both >= 0
        to_basis = np.array([[1.0, 0.0], [-1.0, 1.0]])  # (read, coalesce) = to_basis @ (read, read + coalesce)
        theta_l = to_basis @ nonnegative_lstsq(lc @ to_basis, lazy_us)
    else:
        theta_l = np.linalg.lstsq(lc, lazy_us, rcond=None)[0]
    lhat = lc @ theta_l
    a, b = ec / lhat[:, None], np.exp([c["log_ratio"] for c in cells])
    theta = nonnegative_lstsq(a, b) if physical else np.linalg.lstsq(a, b, rcond=None)[0]
    eager = {**{k: float(theta[0]) for k in BUILD}, **{EAGER_COSTS[i]: float(x) for i, x in zip(rest, theta[1:])}}
    return {"eager": eager, "lazy": dict(zip(LAZY_COSTS, theta_l.tolist())), "lazy_cp": lazy_cp}


def predict(costs: dict, cell: dict) -> float:
    """The fitted model's log(eager / lazy) for a cell (where an estimate is not positive, +-inf as
    TemporalPlan.model_gap reads it)."""
    ecol, lcol = columns(cell, costs["lazy_cp"])  # linear: exact, and no normaliser of zero costs to divide by
    e = float(ecol @ np.array([costs["eager"][k] for k in EAGER_COSTS]))
    lz = float(lcol @ np.array([costs["lazy"][k] for k in LAZY_COSTS]))
    if e > 0 and lz > 0:
        return float(np.log(e / lz))
    return float("inf") if e > lz else float("-inf")


def rms(x) -> float:
    x = np.asarray(x, float)
    return float(np.sqrt(np.mean(x ** 2))) if len(x) else float("nan")


def _checker(c: dict) -> int:
    return round(c["grid"][0] * 10 + c["grid"][1] * 10) % 2


def held_out(cells: list[dict], fitter, predictor) -> dict:
    """RMS of the held-out residual: half the cells (checkerboard, both ways), and per run a fit to the others."""
    half = []
    for colour in (0, 1):
        model = fitter([c for c in cells if _checker(c) == colour])
        half += [predictor(model, c) - c["log_ratio"] for c in cells if _checker(c) != colour]
    runs = list(dict.fromkeys(c["run"] for c in cells))
    other = {}
    for r in runs:
        model = fitter([c for c in cells if c["run"] != r])
        other[r] = rms([predictor(model, c) - c["log_ratio"] for c in cells if c["run"] == r])
    return {"half_cells": rms(half), "other_runs": other}


def _quadratic_features(c: dict) -> list[float]:
    x = [c["cp"], c["oop"], c["eager_cp"], c["splits"]]
    return [1.0] + x + [a * b for a, b in itertools.combinations_with_replacement(x, 2)]


def quadratic_fit(cells: list[dict]) -> np.ndarray:
    """A free least-squares quadratic of log(eager / lazy) in the model's inputs: no model, only
    what the inputs hold (not for use: it knows nothing of window sizes or reads)."""
    return np.linalg.lstsq(np.array([_quadratic_features(c) for c in cells]), np.array([c["log_ratio"] for c in cells]),
                           rcond=None)[0]


def replay(predictor, cells: list[dict], floor: float = FLOOR) -> dict:
    """A plan (eager where `predictor` says log(eager / lazy) < 0) on one run's cells, its times the
    forced plan's: the cells where it picks the better (by the paired median), those where its
    paired median over the better exceeds the floor, and the worst."""
    over = [abs(c["log_ratio"]) for c in cells if (predictor(c) < 0) != (c["log_ratio"] <= 0)]
    return {"better": len(cells) - len(over), "over_floor": int(sum(x > np.log1p(floor) for x in over)),
            "worst": float(np.exp(max(over, default=0.0)))}


def judge(cells: list[dict]) -> dict:
    runs = list(dict.fromkeys(c["run"] for c in cells))
    out: dict = {"runs": runs, "cells": len(cells), "variants": {}}
    for name, lazy_cp, physical in (("store", True, True), ("store, unconstrained", True, False),
                                    ("round 21's inputs", False, True), ("round 21's inputs, unconstrained", False, False)):
        def fitter(cs, lazy_cp=lazy_cp, physical=physical):
            return fit(cs, lazy_cp, physical)
        costs = fitter(cells)
        v = {"costs": costs, "in_sample": rms([predict(costs, c) - c["log_ratio"] for c in cells]),
             **held_out(cells, fitter, predict),
             "replay": {r: replay(lambda c, m=fitter([x for x in cells if x["run"] != r]): predict(m, c),
                                  [c for c in cells if c["run"] == r]) for r in runs}}
        out["variants"][name] = v
    q = held_out(cells, quadratic_fit, lambda b, c: float(np.dot(b, _quadratic_features(c))))
    out["quadratic"] = q
    out["own_calibration"] = {r: rms([c["own_model"] - c["log_ratio"] for c in cells if c["run"] == r]) for r in runs}
    out["own_replay"] = {r: replay(lambda c: c["own_model"], [c for c in cells if c["run"] == r]) for r in runs}
    out["no_gap"] = rms([c["log_ratio"] for c in cells])
    by_cell: dict = {}
    for c in cells:
        by_cell.setdefault(c["grid"], []).append(c)
    spread = [np.std([c["log_ratio"] for c in v], ddof=1) for v in by_cell.values() if len(v) > 1]
    out["between_runs_sd"] = float(np.sqrt(np.mean(np.square(spread)))) if spread else None
    store = out["variants"]["store"]
    store["error"] = max(store["half_cells"], *store["other_runs"].values())
    out["per_cell"] = [{"cp": k[0], "oop": k[1], "measured": float(np.mean([c["log_ratio"] for c in v])),
                        "predicted": predict(store["costs"], v[0])} for k, v in sorted(by_cell.items())]
    out["sure"] = [sure_cells(out["per_cell"], store["error"], z) for z in (1.5, 2.0, 2.5, 3.0)]
    return out


def sure_cells(per_cell: list[dict], error: float, z: float) -> dict:
    """Where the fitted model is sure (|predicted log ratio| > z x its error), how often it is right."""
    sure = [p for p in per_cell if abs(p["predicted"]) > z * error]
    wrong = [p for p in sure if (p["predicted"] < 0) != (p["measured"] <= 0)]
    return {"z": z, "sure": len(sure), "right": len(sure) - len(wrong),
            "wrong": [(p["cp"], p["oop"], round(p["predicted"], 3), round(p["measured"], 3)) for p in wrong]}


def report(out: dict) -> str:
    lines = [f"{out['cells']} cells from {len(out['runs'])} runs ({', '.join(out['runs'])}); rms of log(eager / lazy) per cell"]
    for name, v in out["variants"].items():
        c = v["costs"]
        rp = v["replay"].values()
        lines.append(
            f"{name}: eager " + ", ".join(f"{k} {x:.3f}" for k, x in c["eager"].items()) + "; lazy "
            + ", ".join(f"{k} {x:.3f}" for k, x in c["lazy"].items()) + f" µs; in sample {v['in_sample']:.4f}, half the "
            f"cells {v['half_cells']:.4f}, other runs {min(v['other_runs'].values()):.4f}-{max(v['other_runs'].values()):.4f}; "
            f"replayed (fit on the other runs): the better in {min(r['better'] for r in rp)}-{max(r['better'] for r in rp)}, "
            f"over the {FLOOR:.1%} floor in {min(r['over_floor'] for r in rp)}-{max(r['over_floor'] for r in rp)}, worst "
            f"{min(r['worst'] for r in rp):.3f}-{max(r['worst'] for r in rp):.3f}")
    q, own, rp = out["quadratic"], out["own_calibration"], out["own_replay"].values()
    lines.append(f"a free quadratic in the inputs: half the cells {q['half_cells']:.4f}, other runs "
                 f"{min(q['other_runs'].values()):.4f}-{max(q['other_runs'].values()):.4f}")
    lines.append(f"the runs' own calibrations: {min(own.values()):.4f}-{max(own.values()):.4f}; their plans: the better in "
                 f"{min(r['better'] for r in rp)}-{max(r['better'] for r in rp)}, over the floor in "
                 f"{min(r['over_floor'] for r in rp)}-{max(r['over_floor'] for r in rp)}, worst "
                 f"{min(r['worst'] for r in rp):.3f}-{max(r['worst'] for r in rp):.3f}")
    lines.append(f"no gap everywhere {out['no_gap']:.4f}; a cell's spread between runs (sd) {out['between_runs_sd']:.4f}")
    pred = [p["predicted"] for p in out["per_cell"]]
    lines.append(f"the store's fit: error {out['variants']['store']['error']:.4f}; predicted log(eager / lazy) "
                 f"{min(pred):.3f} to {max(pred):.3f}")
    for s in out["sure"]:
        lines.append(f"  sure at {s['z']} x the error: {s['sure']} cells, the sign right in {s['right']}; wrong {s['wrong']}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="*", type=Path, default=[], help="directories with a grid run's results")
    ap.add_argument("--history", action="store_true", help="also every committed version of " + CHOICE)
    ap.add_argument("--json", type=Path, default=None, help="write the judgement here")
    args = ap.parse_args()
    cells = (read_history(Path(".")) if args.history else []) + [c for d in args.runs for c in read_dir(d)]
    if not cells:
        ap.error("no runs: give --history or --runs DIR")
    out = judge(cells)
    print(report(out))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
