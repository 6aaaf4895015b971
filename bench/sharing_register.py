"""Registering the 8.5 workload under a sharing mode, in the engine alone (no server, no client):
how long each engine call takes while the queries register and then while the stream slides.
Every query is on one stream (one CS2 group, as `bench.sharing_real --streams 1` registers them),
so a hybrid's choice of periods is over all of them (tens of distinct SLIDEs).

Per run: the longest and the total time of the Register calls, how much of it was the hybrid's
choice of periods (cost.choose_periods, or the incremental choice's steps), and the longest call
among the slides that follow (each Slide and the scheduler's work until idle), which is where an
incremental choice does its steps, with how many slides it took to complete.

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
    register: list[float] = []
    choice_at_register = 0.0
    for i, p in enumerate(panels(per_group, seed)):
        n = len(spent)
        t = time.perf_counter()
        e.apply(Register(f"Q{i}", p.periodic(), 0, ts))
        register.append(time.perf_counter() - t)
        choice_at_register += sum(spent[n:])
    sliding: list[float] = []
    choice_sliding = 0.0
    pending_until = None
    for j in range(slides):
        ts += 1
        e.apply(Append(STREAM, pa.table(packets(rng, rows, 1, ts)), "", None, ts))
        n = len(spent)
        t = time.perf_counter()
        e.apply(Slide(STREAM, ts))
        e.sched.run_until_idle()
        sliding.append(time.perf_counter() - t)
        choice_sliding += sum(spent[n:])
        pending = getattr(e.sched.sharing.local, "choosing", None)  # (an incremental choice only)
        if pending_until is None and pending is not None and not pending():
            pending_until = j + 1
    return {"mode": mode, "queries": len(register), "register_max_s": round(max(register), 4),
            "register_total_s": round(sum(register), 2),
            "choice_in_register_s": round(choice_at_register, 2),
            "choice_in_slides_s": round(choice_sliding, 2), "slide_max_s": round(max(sliding), 4), "slide_mean_s": round(sum(sliding) / len(sliding), 4),
            "choice_complete_after_slides": pending_until,
            "tasks": e.sched.sharing.stats()["tasks"]}


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, nargs="+", default=[40, 80, 240])
    ap.add_argument("--mode", default="hybrid")
    ap.add_argument("--slides", type=int, default=40, help="slides after the registrations, each timed")
    args = ap.parse_args(argv)
    out = []
    for q in args.queries:
        r = run(q, args.mode, args.slides)
        print(json.dumps(r), flush=True)
        out.append(r)
    return out


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
