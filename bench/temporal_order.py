"""Where the measured choice's pairs lean (docs/coalesce.md, "What is left: the order's bias"):
the sweep's harness (bench/temporal_experiment.py's `cell`, eager forced, lazy forced and the
measured choice over their own copies of one stream, their order cycling through the
permutations), with every garbage collection timed and attributed through `gc.callbacks`
(generation; the plan and strategy whose execution it fell in; the container allocations counted
by `gc.get_count()` since the one before), and every execution's allocations. Per cell it compares
the measured choice's own evidence (log eager / lazy of its pairs, as it charged them) with the
forced plans' at the same slides, and takes the difference apart: with the collections' time taken
out of both (the collections' share), and with the choice's executions timed whole as the harness
times the forced ones (what the choice's scope leaves out or adds: the steady build charge, the
look-ups), the rest being the carry-over of the pair's order (caches, warm-up).

    python -m bench.temporal_order --cells "0.4,0.1;0,0.1;0.2,0.8;0.5,0.5" [--tuples 45000]
"""
from __future__ import annotations

import argparse
import gc
import itertools
import json
import math
import statistics
import time

from bench.coalesce_experiment import stream
from bench.temporal_experiment import QUERY, SCHEMA, calibrate, slide_all, use_calibration
from windowstore.store import Stream, WindowSpec, parse_query, plan_query
from windowstore.store.coalesce import EAGER, LAZY
from windowstore.store.planner.plan import run_plan
from windowstore.store.temporal import MeasuredChoice


class Collections:
    """Every collection's thread CPU time, generation and the allocations before it, attributed to
    the execution running (`label`)."""

    def __init__(self):
        self.label = None
        self.seconds = 0.0  # cumulative
        self.allocated = 0  # cumulative container allocations (gen 0 count at each collection, plus now)
        self.log: list[tuple] = []
        self._t0 = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.allocated += gc.get_count()[0]
            self._t0 = time.thread_time()
        else:
            took = time.thread_time() - self._t0
            self.seconds += took
            self.log.append((self.label, info["generation"], took))

    def allocations(self) -> int:
        return self.allocated + gc.get_count()[0]


def _med(x):
    return statistics.median(x) if x else float("nan")


def _iqr(x):
    if len(x) < 4:
        return float("nan")
    q = statistics.quantiles(x, n=4)
    return q[2] - q[0]


def cell(n: int, cp: float, oop: float, per_slide: int, subwindows: int, seed: int, long_round: bool = False) -> dict:
    """One cell in the harness; `long_round`: the measured plan pairs every execution (one round for
    its life)."""
    col = Collections()
    gc.callbacks.append(col)
    try:
        return _cell(col, n, cp, oop, per_slide, subwindows, seed, long_round)
    finally:
        gc.callbacks.remove(col)


def _cell(col: Collections, n, cp, oop, per_slide, subwindows, seed, long_round) -> dict:
    rows = stream(n, cp, oop, per_slide * 2, seed)
    q = parse_query(QUERY)
    names = (EAGER, LAZY, "measured")
    orders = list(itertools.permutations(names))
    streams = {st: Stream("s", SCHEMA, WindowSpec(subwindows=subwindows, subwindow_ms=1, clock="manual"), 0)
               for st in names}
    calls: list[tuple[float, float]] = []  # the measured plan's clock reads: (thread time, collections so far)

    def clock() -> float:
        t = time.thread_time()
        calls.append((t, col.seconds))
        return t

    plans: dict = {}
    obs: list[dict] = []  # per observe of the measured choice
    execs: list[dict] = []  # per slide: per plan time, collection time, allocations
    for k in range(0, len(rows), per_slide):
        if not slide_all(streams, rows[k:k + per_slide], k, subwindows):
            continue
        if not plans:
            for st in names:
                if st == "measured":
                    plans[st] = plan_query(q, streams[st], periodic=True, work_clock=clock)
                    if long_round:  # one round for the whole life: every execution in a pair
                        t = plans[st]._temporal
                        t.measure_with(clock, MeasuredChoice(t.measured.strategy, trials=10 ** 6, max_trials=10 ** 6))
                    m = plans[st]._temporal.measured
                    real = m.observe

                    def observe(strategy, seconds, overhead=0.0, _real=real, _m=m):
                        pairs = calls[:]
                        gc_in = [g1 - g0 for (_, g0), (_, g1) in zip(pairs[::2], pairs[1::2])]
                        counted = (gc_in[-1:] if strategy == EAGER else gc_in) if gc_in else []
                        obs.append({"slide": len(execs), "strategy": strategy, "seconds": seconds,
                                    "gc": sum(counted), "round": _m.measuring(), "overhead": overhead})
                        _real(strategy, seconds, overhead)

                    m.observe = observe
                else:
                    plans[st] = plan_query(q, streams[st], periodic=True)
                    plans[st]._temporal.use(st)
                run_plan(plans[st])
            continue
        row: dict = {}
        order = orders[len(execs) % len(orders)]
        for i, st in enumerate(order):
            calls.clear()
            col.label = (st, plans[st]._temporal.strategy, order[i - 1] if i else None)
            n0 = len(col.log)
            g0, a0, t0 = col.seconds, col.allocations(), time.thread_time()
            run_plan(plans[st])
            t1 = time.thread_time()
            young = sum(x for lab, gen, x in col.log[n0:] if gen < 2)
            row[st] = {"t": t1 - t0, "gc": col.seconds - g0, "young": young, "alloc": col.allocations() - a0,
                       "ran": col.label[1], "after": col.label[2]}
            col.label = None
        execs.append(row)
    return _analyse(cp, oop, obs, execs, col)


def _analyse(cp, oop, obs, execs, col) -> dict:
    """The round pairs' bias against the forced plans at the same slides, taken apart."""
    out: dict = {"cp": cp, "oop": oop, "executions": len(execs)}
    rnd = [o for o in obs if o["round"]]
    pairs = [(a, b) for a, b in zip(rnd[::2], rnd[1::2]) if a["strategy"] != b["strategy"]]
    out["round_pairs"] = len(pairs)

    def ratio(a, b, f):
        e, lz = (a, b) if a["strategy"] == EAGER else (b, a)
        return math.log(max(f(e), 1e-9) / max(f(lz), 1e-9))

    def forced(a, b, f):
        e, lz = (a, b) if a["strategy"] == EAGER else (b, a)
        return math.log(max(f(execs[e["slide"]][EAGER]), 1e-9) / max(f(execs[lz["slide"]][LAZY]), 1e-9))

    # the carry-over: pairs whose second execution is eager (eager after lazy) against lazy second
    second = {st: [ratio(a, b, lambda o: o["seconds"]) - forced(a, b, lambda x: x["t"])
                   for a, b in pairs if b["strategy"] == st] for st in (EAGER, LAZY)}
    out["bias_by_second"] = {st: _med(v) for st, v in second.items()}
    # the young collections charged by allocations at each strategy's rate over the round's executions
    whole = lambda o: execs[o["slide"]]["measured"]  # noqa: E731
    rate = {st: sum(whole(o)["young"] for o in rnd if o["strategy"] == st)
            / max(sum(whole(o)["alloc"] for o in rnd if o["strategy"] == st), 1) for st in (EAGER, LAZY)}
    out["young_ns_per_alloc"] = {st: r * 1e9 for st, r in rate.items()}
    charged = lambda o: o["seconds"] - o["gc"] + whole(o)["alloc"] * rate[o["strategy"]]  # noqa: E731
    d = {
        "choice_charged": [ratio(a, b, charged) for a, b in pairs],
        # the choice's evidence as it charged it, and with collections taken out
        "choice": [ratio(a, b, lambda o: o["seconds"]) for a, b in pairs],
        "choice_nogc": [ratio(a, b, lambda o: o["seconds"] - o["gc"]) for a, b in pairs],
        # the measured plan's same executions timed whole, as the harness times the forced plans
        "whole": [ratio(a, b, lambda o: execs[o["slide"]]["measured"]["t"]) for a, b in pairs],
        "whole_nogc": [ratio(a, b, lambda o: execs[o["slide"]]["measured"]["t"] - execs[o["slide"]]["measured"]["gc"])
                       for a, b in pairs],
        "forced": [forced(a, b, lambda x: x["t"]) for a, b in pairs],
        "forced_nogc": [forced(a, b, lambda x: x["t"] - x["gc"]) for a, b in pairs],
    }
    # over the whole life: the forced plans' paired eager / lazy (the reference the claim uses)
    life = [math.log(r[EAGER]["t"] / r[LAZY]["t"]) for r in execs]
    life_nogc = [math.log((r[EAGER]["t"] - r[EAGER]["gc"]) / (r[LAZY]["t"] - r[LAZY]["gc"])) for r in execs]
    out["median_log"] = {k: _med(v) for k, v in d.items()}
    out["iqr_log"] = {k: _iqr(v) for k, v in d.items()}
    out["life_forced"] = _med(life)
    out["life_forced_nogc"] = _med(life_nogc)
    # the bias: choice - forced at the same slides, per pair, median; and its parts
    diff = lambda x, y: _med([p - q for p, q in zip(d[x], d[y])])  # noqa: E731
    out["bias"] = {"total": diff("choice", "forced"), "charged": diff("choice_charged", "forced"), "without_collections": diff("choice_nogc", "forced_nogc"),
                   "whole_executions": diff("whole", "forced"), "whole_without_collections": diff("whole_nogc", "forced_nogc")}
    # collections per plan and strategy: time and count per execution, by generation; allocations
    per: dict = {}
    for r in execs:
        for st, x in r.items():
            key = f"{st}:{x['ran']}"
            p = per.setdefault(key, {"n": 0, "t": 0.0, "gc": 0.0, "alloc": 0, "after_other": 0, "gc_after_other": 0.0})
            p["n"] += 1
            p["t"] += x["t"]
            p["gc"] += x["gc"]
            p["alloc"] += x["alloc"]
    for label, gen, took in col.log:
        if label is None:
            continue
        key = f"{label[0]}:{label[1]}"
        per[key].setdefault("gen", {}).setdefault(str(gen), [0, 0.0])
        per[key]["gen"][str(gen)][0] += 1
        per[key]["gen"][str(gen)][1] += took
    for p in per.values():
        n = p["n"]
        p.update({"t_us": p["t"] / n * 1e6, "gc_us": p["gc"] / n * 1e6, "gc_share": p["gc"] / p["t"],
                  "alloc_per_exec": p["alloc"] / n, "gc_ns_per_alloc": p["gc"] / max(p["alloc"], 1) * 1e9})
        p["gen"] = {g: {"per_exec": c / n, "us_each": s / max(c, 1) * 1e6} for g, (c, s) in p.get("gen", {}).items()}
        for k in ("t", "gc", "alloc", "after_other", "gc_after_other"):
            p.pop(k)
    out["per_plan"] = per
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default="0.4,0.1;0,0.1;0.2,0.8;0.5,0.5")
    ap.add_argument("--tuples", type=int, default=45_000)
    ap.add_argument("--per-slide", type=int, default=100)
    ap.add_argument("--subwindows", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--long-round", action="store_true", help="the measured plan in one round for its whole life")
    args = ap.parse_args()
    use_calibration(calibrate(args.per_slide, args.subwindows, args.seed))
    for c in args.cells.split(";"):
        cp, oop = (float(x) for x in c.split(","))
        r = cell(args.tuples, cp, oop, args.per_slide, args.subwindows, args.seed, args.long_round)
        print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
