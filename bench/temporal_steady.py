"""The measured choice's steady executions against the forced plan's, in one process, on one cell of
section 7's grid (bench/temporal_experiment.py's query, window and stream).

`--mode time` (the default): four plans on their own copies of the stream, run at every slide in a
shuffled order and timed with the thread's CPU clock: the strategy forced, the measured choice
settled on it (no round, no probe in the life: its executions untimed, as between probes), the same
with every execution timed (as the `keep` before a probe and the rounds are), and the strategy
forced again (the A/A); each one's paired median over the first forced plan's.

`--mode count` runs one plan (`--plan`: forced, untimed or timed) and is meant for callgrind: each
measured execution runs inside functools.reduce, so that

    valgrind --tool=callgrind --collect-atstart=no --toggle-collect='functools_reduce*' \\
        python -m bench.temporal_steady --mode count --plan untimed --strategy eager

counts the instructions of `--executions` executions and nothing else (PYTHONHASHSEED=0 for
repeatable counts).
"""
from __future__ import annotations

import argparse
import functools
import math
import random
import time

from bench.coalesce_experiment import stream
from bench.temporal_experiment import QUERY, SCHEMA, _append
from windowstore.store import Stream, WindowSpec, parse_query, plan_query
from windowstore.store.coalesce import EAGER, LAZY
from windowstore.store.planner.plan import run_plan
from windowstore.store.temporal import MeasuredChoice

PLANS = ("forced", "untimed", "timed", "forced-again")


class EveryExecutionTimed(MeasuredChoice):
    """A settled choice that times every execution (no probe is ever due)."""

    def untimed_ahead(self) -> int:
        return 0


def make_plan(kind: str, strategy: str, s: Stream):
    plan = plan_query(parse_query(QUERY), s, periodic=True)
    if kind.startswith("forced"):
        plan._temporal.use(strategy)
    else:  # settled from the start: no round, and the first probe beyond the life
        cls = EveryExecutionTimed if kind == "timed" else MeasuredChoice
        plan._temporal.measure_with(time.thread_time, cls(strategy, trials=0, first_gap=10 ** 9, max_gap=10 ** 9))
    return plan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("time", "count"), default="time")
    ap.add_argument("--plan", choices=PLANS[:3], default="untimed", help="--mode count: the plan counted")
    ap.add_argument("--strategy", choices=(EAGER, LAZY), default=EAGER)
    ap.add_argument("--cp", type=float, default=0.5)
    ap.add_argument("--oop", type=float, default=0.0)
    ap.add_argument("--executions", type=int, default=1000)
    ap.add_argument("--per-slide", type=int, default=100)
    ap.add_argument("--subwindows", type=int, default=10)
    args = ap.parse_args()
    warm = 10
    rows = stream((args.subwindows - 1 + warm + args.executions) * args.per_slide, args.cp, args.oop,
                  args.per_slide * 2, 1)
    batches = [rows[k:k + args.per_slide] for k in range(0, len(rows), args.per_slide)]
    names = PLANS if args.mode == "time" else (args.plan,)
    streams = {k: Stream("s", SCHEMA, WindowSpec(subwindows=args.subwindows, subwindow_ms=1, clock="manual"), 0)
               for k in names}
    took: dict = {k: [] for k in names}
    plans: dict = {}
    execute = functools.partial(functools.reduce, lambda _, p: run_plan(p))
    for i, batch in enumerate(batches):
        for s in streams.values():
            _append(s, batch)
            s.window.slide(i * args.per_slide)
        if i + 1 < args.subwindows:
            continue
        if not plans:
            plans = {k: make_plan(k, args.strategy, streams[k]) for k in names}
        if i + 1 < args.subwindows + warm:
            for p in plans.values():
                run_plan(p)
            continue
        if args.mode == "count":
            execute((plans[args.plan],), None)
            continue
        order = list(names)
        random.Random(i).shuffle(order)
        for k in order:
            t0 = time.thread_time()
            run_plan(plans[k])
            took[k].append(time.thread_time() - t0)
    if args.mode == "count":
        print(f"{args.plan} {args.strategy}: {args.executions} executions counted")
        return
    base = took["forced"]
    print(f"cp {args.cp} oop {args.oop}, {args.strategy}, {len(base)} executions, forced's median "
          f"{sorted(base)[len(base) // 2] * 1e6:,.0f} us")
    for k in names[1:]:
        logs = sorted(math.log(a / max(b, 1e-9)) for a, b in zip(took[k], base))
        print(f"  {k:13s} over forced: paired median {math.exp(logs[len(logs) // 2]):.4f}, "
              f"mean {math.exp(sum(logs) / len(logs)):.4f}")


if __name__ == "__main__":
    main()
