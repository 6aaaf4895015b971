"""Registering the 8.5 workload under a sharing mode, in the engine alone (no server, no client):
how long each engine call takes while the queries register and then while the stream slides.
Every query is on one stream (one CS2 group, as `bench.sharing_real --streams 1` registers them),
so a hybrid's choice of periods is over all of them (tens of distinct SLIDEs).

Per run: the longest and the total time of the Register calls and how much of it was the hybrid's
choice of periods (time in cost.schedule_cost), the registration phase's total with the scheduler
steps run after each call (as the server runs them), the longest single scheduler step while
registering and while sliding (where an incremental choice does its steps), the choice's time
in steps, its longest step (refine_max_s), and after how many slides no choice was left being made
(0: none left at the first).

    python -m bench.sharing_register [--queries 40 80 240] [--mode hybrid] [--slides 40]

Wall-clock figures: on a loaded machine they are loaded-machine figures.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import pyarrow as pa

from windowstore.store import WindowSpec
from windowstore.txn.commands import Append, CreateStream, Register, Slide
from windowstore.txn.engine import Engine, EngineConfig
from windowstore.txn.sharing import cost

from .sharing_real import KEYS, SCHEMA, STREAM, packets, panels


def timed_choice() -> list[float]:
    """Wrap cost.schedule_cost (what a choice of periods spends its time in: the schedules it
    simulates) so the seconds it takes are counted, one entry per call."""
    spent: list[float] = []
    plain = cost.schedule_cost

    def wrapped(*a, **kw):
        t = time.perf_counter()
        try:
            return plain(*a, **kw)
        finally:
            spent.append(time.perf_counter() - t)
    cost.schedule_cost = wrapped
    return spent


def run(queries: int, mode: str, slides: int, rows: int = 200, seed: int = 1) -> dict:
    per_group = queries // len(KEYS)
    spent = timed_choice() if mode.startswith("hybrid") else []
    e = Engine(EngineConfig(policy="ws", sharing=mode))
    columns = tuple(SCHEMA.items())
    e.apply(CreateStream(STREAM, columns, "ts", WindowSpec(200, 100, None, "manual", 0, (), 16), 0))
    rng = np.random.default_rng(seed)
    ts = 0
    for _ in range(100):  # a window of sub-windows to read
        ts += 1
        e.apply(Append(STREAM, pa.table(packets(rng, rows, 1, ts)), "", None, ts))
        e.apply(Slide(STREAM, ts))
    register: list[float] = []  # each Register call
    steps: list[float] = []     # each scheduler step (the server's unit of work between two calls)
    choice_at_register = 0.0

    def run_steps() -> None:
        while True:
            t = time.perf_counter()
            if e.sched.step() is None:
                break
            steps.append(time.perf_counter() - t)

    refines: list[float] = []  # each step of an incremental choice (Hybrid.refine), when the build has them
    local = e.sched.sharing.local
    if hasattr(local, "refine"):
        plain_refine = local.refine

        def refine(*args) -> bool:
            t = time.perf_counter()
            try:
                return plain_refine(*args)
            finally:
                refines.append(time.perf_counter() - t)
        local.refine = refine

    t0 = time.perf_counter()
    for i, p in enumerate(panels(per_group, seed)):
        n = len(spent)
        t = time.perf_counter()
        e.apply(Register(f"Q{i}", p.periodic(), 0, ts))
        register.append(time.perf_counter() - t)
        choice_at_register += sum(spent[n:])
        run_steps()
    registering = time.perf_counter() - t0
    register_steps = max(steps, default=0.0)
    choice_in_steps = sum(spent) - choice_at_register
    steps.clear()
    made_after = None
    choosing = getattr(e.sched.sharing.local, "choosing", None)  # (none: a build that chooses at once)
    for j in range(slides):
        if made_after is None and choosing is not None and not choosing():
            made_after = j
        ts += 1
        e.apply(Append(STREAM, pa.table(packets(rng, rows, 1, ts)), "", None, ts))
        e.apply(Slide(STREAM, ts))
        run_steps()
    return {"mode": mode, "queries": len(register), "register_max_s": round(max(register), 4),
            "register_total_s": round(sum(register), 2), "choice_in_register_s": round(choice_at_register, 2),
            "registering_with_steps_s": round(registering, 2), "step_max_while_registering_s": round(register_steps, 4),
            "choice_in_steps_s": round(choice_in_steps, 2), "step_max_while_sliding_s": round(max(steps, default=0.0), 4),
            "choice_made_after_slides": made_after, "refine_max_s": round(max(refines, default=0.0), 4),
            "tasks": e.sched.sharing.stats()["tasks"]}


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, nargs="+", default=[40, 80, 240])
    ap.add_argument("--mode", default="hybrid")
    ap.add_argument("--slides", type=int, default=40, help="slides after the registrations, their steps timed")
    args = ap.parse_args(argv)
    out = []
    for q in args.queries:
        r = run(q, args.mode, args.slides)
        print(json.dumps(r), flush=True)
        out.append(r)
    return out


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
