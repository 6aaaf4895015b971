"""What one joint execution of an 8.5 group costs on this server, broken down (issue 30; thesis
8.4.3-8.4.4's cost model: intervals accessed, combining along the scan, post-processing per
answer). In the engine alone (no gRPC; the driver's answer publishing attached, as the server
runs it): per group of 8.5 (`bench.sharing_real`'s queries, `--per-group` of them on one stream,
`--policy ws`, `--sharing aggressive` so that every slide runs the whole group in one joint
execution), the stream's window filled, then `--slides` slides, each followed by the joint
execution it makes due. Each part is timed where it runs (wrappers around the functions, so a
part's figure includes a wrapper's call, under a microsecond):

- `read_fresh`: a reader's contribution of a sub-window not read before (the per-key bandwidth
  counters of its rows): per read, and reads per execution;
- `access`: per sub-window accessed by the scan, beyond the fresh reads (the transaction's
  operation, the memo look-ups): the step's time less the fresh reads, per sub-window;
- `combine`: combining the readers' contributions along the scan (one running combine per
  reader, runtime.SharedPlan.finish; an invertible reader's kept windows moved by what entered
  and left, combined.py), per execution and per contribution of the windows answered;
- `post_topk`, `post_quantile`: a member's post-processing of the combined counters
  (Plan.finish: the top-10, the quantile over the per-key sums), per answer;
- `fixed`: per answer, delivering it: its Result, provenance, the scheduler's bookkeeping, the
  answer log (ReadAnswers), the AnsweredMany record, publishing (response time, metrics,
  subscribers) (SharedTasks.deliver);
- `other`: the rest of the execution (begin, commit, the history, planning the next step).

    python -m bench.sharing_cost [--groups 0 2] [--scales 1 2] [--slides 30] [--per-group 30] [--out FILE] [--move-cost 0]

Wall-clock figures: on a loaded machine they are loaded-machine figures.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import json
import statistics
import sys
import time

import numpy as np
import pyarrow as pa

from windowstore.server.config import ServerConfig
from windowstore.server.driver.periodic import PeriodicAnswers
from windowstore.server.driver.reports import Metrics
from windowstore.store import WindowSpec
from windowstore.store.parser import parse_query
from windowstore.store.planner.plan import run_plan
from windowstore.txn.commands import Append, CreateStream, Register, Slide
from windowstore.txn.engine import Engine, EngineConfig
from windowstore.txn.sharing import runtime

from .sharing_real import KEEP, KEYS, SCHEMA, packets, panels


class Clocks:
    """Seconds spent per part, and how many times each was entered."""

    def __init__(self) -> None:
        self.spent: collections.Counter = collections.Counter()
        self.calls: collections.Counter = collections.Counter()

    def wrap(self, part: str, fn, count=None):
        """`fn` timed into `part`; `count(args, result)`: what one call adds to the part's count (1)."""
        spent, calls = self.spent, self.calls

        def timed(*a, **kw):
            t = time.perf_counter()
            try:
                out = fn(*a, **kw)
            finally:
                spent[part] += time.perf_counter() - t
            calls[part] += 1 if count is None else count(a, out)
            return out
        return timed


def run(group: int, scale: int, slides: int, per_group: int, rows: int | None = None, seed: int = 1,
        move_cost: float | None = None) -> dict:
    """`move_cost`: the shared readers' combined windows' (txn/sharing/combined.py; None: its
    MOVE_COST; 0: every window that can move does)."""
    items = [p for p in panels(per_group, seed, len(KEYS)) if p.group == group]
    stream = items[0].stream
    rows = rows or 150 * scale
    e = Engine(EngineConfig(policy="ws", sharing="aggressive"))
    driver_metrics: dict = collections.defaultdict(Metrics)

    def note_answer(name, result, response_ms, query_class="onetime") -> None:  # (Driver.note_answer, no Prometheus)
        m = driver_metrics[name]
        if result.staleness_ms is not None:
            m.staleness.append(result.staleness_ms)
        m.response.append(response_ms)
    published = PeriodicAnswers(e, ServerConfig(), lambda: e.now_ms, note_answer)
    e.on_answer = published.publish
    e.apply(CreateStream(stream, tuple(SCHEMA.items()), "ts", WindowSpec(KEEP, 100, None, "manual", 0, (), 16), 0))
    rng = np.random.default_rng(seed)
    ts = 0

    def slide() -> None:
        nonlocal ts
        ts += 1
        e.apply(Append(stream, pa.table(packets(rng, rows, scale, ts)), "", None, ts))
        e.apply(Slide(stream, ts))
        e.drain()  # (the server's write-ahead log takes them; nothing here)

    for _ in range(KEEP):
        slide()
    for i, p in enumerate(items):
        e.apply(Register(f"Q{i}", p.periodic(), 0, ts))

    clocks = Clocks()
    sharing = e.sched.sharing
    if move_cost is not None:
        sharing.windows = runtime.CombinedWindows(move_cost)
    kinds = {}
    for i, p in enumerate(items):
        plan = e.periodic[f"Q{i}"].task.plan
        kinds[id(plan)] = "post_topk" if "LIMIT" in p.text else "post_quantile"
        plan.read = clocks.wrap("read_fresh", plan.read)
        plan.finish = clocks.wrap(kinds[id(plan)], plan.finish)
    sharing.deliver = clocks.wrap("fixed", sharing.deliver)
    with timed_runtime(clocks):
        return measure(e, sharing, clocks, items, slides, slide, group, scale, rows, stream)


@contextlib.contextmanager
def timed_runtime(clocks: Clocks):
    """The shared runtime's combining and SharedPlan's scan and finish timed into `clocks`, and
    put back as they were afterwards."""
    count = lambda a, out: len(a[1])  # contributions combined
    patches = [(runtime, "combine_contributions", "combine", count), (runtime.SharedPlan, "read", "scan", None),
               (runtime.SharedPlan, "finish", "finish", None)]
    if hasattr(runtime, "combine_prefixes"):  # (how a joint execution combines since round 21)
        patches.append((runtime, "combine_prefixes", "combine", count))
    if hasattr(runtime, "CombinedWindows"):  # (an invertible reader's, since round 22: its windows moved)
        patches.append((runtime.CombinedWindows, "prefixes", "combine", lambda a, out: len(a[4])))
    kept = [(owner, name, getattr(owner, name)) for owner, name, _, _ in patches]
    for owner, name, part, counted in patches:
        setattr(owner, name, clocks.wrap(part, getattr(owner, name), counted))
    try:
        yield
    finally:
        for owner, name, fn in kept:
            setattr(owner, name, fn)


def measure(e: Engine, sharing, clocks: Clocks, items, slides: int, slide, group: int, scale: int, rows: int,
            stream: str) -> dict:
    steps = clocks.wrap("steps", e.sched.step)

    def run_steps() -> None:
        while steps() is not None:
            pass
        e.drain()

    for _ in range(5):  # warm: the memos hold every sub-window's contributions, as in steady state
        run_steps()
        slide()
    run_steps()
    clocks.spent.clear()
    clocks.calls.clear()
    executions0, answers0 = sharing.executions, sharing.answers
    lengths = sorted(p.length for p in items)
    for _ in range(slides):
        slide()
        run_steps()
    executions = sharing.executions - executions0
    answers = sharing.answers - answers0
    s, c = clocks.spent, clocks.calls
    assert executions > 0, "the group ran"
    us = 1e6
    per_ex = {k: s[k] * us / executions for k in s}
    accessed = c["scan"]  # sub-windows the executions' scans visited
    out = {
        "group": group, "key": ",".join(KEYS[group]), "scale": scale, "rows_per_subwindow": rows,
        "distinct_keys": distinct(e, stream, items), "members": len(items), "topk": sum("LIMIT" in p.text for p in items),
        "longest_window": lengths[-1], "executions": executions, "answers_per_execution": round(answers / executions, 1),
        "us_per_execution": round(per_ex["steps"], 1),
        "read_fresh_us_each": round(s["read_fresh"] * us / max(c["read_fresh"], 1), 1),
        "read_fresh_per_execution": round(c["read_fresh"] / executions, 2),
        "access_us_per_subwindow": round((s["steps"] - s["read_fresh"] - s["finish"] - s["fixed"]) * us / max(accessed, 1), 2),
        "subwindows_per_execution": round(accessed / executions, 1),
        "combine_us_per_execution": round(per_ex.get("combine", 0.0), 1),
        "combine_us_per_contribution": round(s["combine"] * us / max(c["combine"], 1), 2),
        "post_topk_us_each": round(s["post_topk"] * us / max(c["post_topk"], 1), 1),
        "post_quantile_us_each": round(s["post_quantile"] * us / max(c["post_quantile"], 1), 1),
        "fixed_us_per_answer": round(s["fixed"] * us / max(answers, 1), 1),
        "windows_moved": getattr(getattr(sharing, "windows", None), "slid", None),
        "finish_glue_us_per_execution": round((s["finish"] - s["combine"] - s["post_topk"] - s["post_quantile"]) * us
                                              / executions, 1),
    }
    out["shares_of_execution"] = {k: round(v / s["steps"], 3) for k, v in (
        ("read_fresh", s["read_fresh"]), ("combine", s["combine"]), ("post", s["post_topk"] + s["post_quantile"]),
        ("fixed", s["fixed"]), ("access_and_rest", s["steps"] - s["read_fresh"] - s["finish"] - s["fixed"]),
        ("finish_glue", s["finish"] - s["combine"] - s["post_topk"] - s["post_quantile"]))}
    return out


def distinct(e: Engine, stream: str, items) -> int:
    """Distinct keys of the group's per-key counters over its longest window (the answer of the
    longest top-k query without its LIMIT, counted by the engine's own one-time query)."""
    longest = max(items, key=lambda p: p.length)
    keys = ", ".join(KEYS[items[0].group])
    text = f"SELECT COUNT(*) FROM (SELECT {keys}, SUM(bytes) AS b FROM {stream} [RANGE {longest.length} SUBWINDOWS] GROUP BY {keys})"
    return int(run_plan(e.plan(parse_query(text))).rows[0][0])


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--groups", type=int, nargs="+", default=list(range(len(KEYS))), help="8.5 groups (bench.sharing_real.KEYS)")
    ap.add_argument("--scales", type=int, nargs="+", default=[1, 2], help="1: 1,000 addresses, 150 rows a sub-window; 2: doubled")
    ap.add_argument("--slides", type=int, default=30, help="measured slides (one joint execution each)")
    ap.add_argument("--per-group", type=int, default=30)
    ap.add_argument("--out", help="also write the rows here (JSON)")
    ap.add_argument("--move-cost", type=float, help="combined.CombinedWindows' move_cost (0: every window that can move does)")
    args = ap.parse_args(argv)
    rows = []
    for scale in args.scales:
        for g in args.groups:
            r = run(g, scale, args.slides, args.per_group, move_cost=args.move_cost)
            print(json.dumps(r), flush=True)
            rows.append(r)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    summary = {k: statistics.median(r[k] for r in rows) for k in rows[0] if isinstance(rows[0][k], float)}
    print(json.dumps({"median": summary}), file=sys.stderr)
    return rows


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
