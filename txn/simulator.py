"""`windowstore simulate`: the real scheduler and store in virtual time, on the workload of thesis
section 7.5.1, with a cost model instead of the wall clock.

Workload: one stream of synthetic IP packets (src, dst among 1,000 addresses each, bytes 1-100),
about `rows_per_ms` packets per ms with each sub-window's rate drawn between 1/sqrt(10) and sqrt(10)
times that (so rates differ by up to 10x); `periodic` queries (top-10 sources or destinations by
bandwidth, or a 25th..99th percentile of per-address bandwidth) over random window lengths 1..n,
re-executed continually round-robin as in the thesis; one-time aggregates over a few random
addresses, at random (Poisson) times with `onetime_rate` per second, at high priority.

Access model (`Access`): how the queries read the window. `thesis` (the default) is the thesis's
path: every query reads its sub-windows one at a time through the scheduler, so a query over k
sub-windows is k atomic operations between which slides happen, and the real LWS/TTU conflict
rules meet it. `store` is what this store's planner picks: the workload's GROUP BY queries (SUM or
COUNT per address) are probes of the running per-key totals (store/key_running.py), one atomic read
of the whole window whatever its length, which no slide can interrupt, so no policy ever aborts.

Cost model (virtual time): reading a sub-window costs read_fixed_us + row_cost_us x its rows (the
thesis scans the window for every query; the answer itself is computed by the planner's path);
a probe costs read_fixed_us; a slide costs seal_row_us x its rows. Defaults are calibrated from
this store's real window scan and seal (see `calibrate()`); pass --row-cost-us to model slower
hardware or heavier queries (8 us per row is the thesis's regime: a whole-window query takes
about as long as a sub-window). Same seed, same output.

Time is virtual, so what an answer costs to compute for real changes nothing simulated: a plan's
final merge over the same sub-window versions, and its probe of the same window state, are
computed once and remembered (`remember`; sealed sub-windows never change). Every operation still
runs through the real scheduler, in the same order, with the same history; `remember=False`
computes every answer again (the reference the tests compare with).
"""
from __future__ import annotations

import enum
import json
import math
import os
import statistics
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from windowstore.store import InvalidInput, Plan, Stream, WindowSpec, parse_query, plan_query
from windowstore.store.kinds import AccessPath

from .history import History
from .query import Result
from .kinds import Step
from .scheduler import Scheduler

# Calibrated on this store's window scan of the workload's group-by query and its seal
# (python -m windowstore.txn.simulator --calibrate): per-row and per-read costs in microseconds.
DEFAULT_ROW_COST_US = 0.01
DEFAULT_READ_FIXED_US = 80.0
DEFAULT_SEAL_ROW_US = 0.075
ADDRESSES = 1000
PERCENTILES = (0.25, 0.5, 0.75, 0.9, 0.95, 0.99)


class Access(enum.StrEnum):
    """How a simulated query reads the window (see the module docstring)."""

    THESIS = "thesis"  # sub-window by sub-window, each read costed per row
    STORE = "store"    # the planner's choice: probes of running totals where they answer

    def plan(self, text: str, stream: Stream) -> Plan:
        plan = plan_query(parse_query(text), stream)
        if self is Access.STORE or plan.access != AccessPath.PROBE:
            return plan
        # The same answer from the per-sub-window synopses (or raw rows where they do not answer):
        # the scheduler then reads it one sub-window per operation, as the thesis's queries do.
        try:
            return plan_query(plan.query, stream, access=AccessPath.SYNOPSIS)
        except InvalidInput:
            return plan_query(plan.query, stream, access=AccessPath.WINDOW)


@dataclass
class SimConfig:
    policy: str
    subwindows: int = 20
    subwindow_ms: int = 1000
    periodic: int = 40
    onetime_rate: float = 0.0
    duration_s: float | None = None     # default: one window length, as in the thesis
    seed: int = 0
    rows_per_ms: float = 1.0
    row_cost_us: float = DEFAULT_ROW_COST_US
    read_fixed_us: float = DEFAULT_READ_FIXED_US
    seal_row_us: float = DEFAULT_SEAL_ROW_US
    history_path: str | None = None
    access: Access | str = Access.THESIS
    remember: bool = True               # compute an answer over unchanged inputs once (module docstring)


def remembered(plan: Plan) -> Plan:
    """`plan` with its final merge and its probe remembered per input: a merge's answer is a
    function of the versions merged (a sealed sub-window never changes), a probe's of the window's
    latest installed slide. A periodic query re-executed between two slides merges the same
    versions again: its answer is not computed again. The plan is changed in place."""
    finish, probe, window = plan.finish, plan.probe, plan.stream.window
    answers: dict[tuple, object] = {}

    def once(key: tuple, compute):
        answer = answers.get(key, answers)
        if answer is answers:
            if len(answers) >= 16:  # versions that have left the window are not merged again
                answers.clear()
            answer = answers[key] = compute()
        return answer

    plan.finish = lambda partial: once(("finish", *partial.versions()), lambda: finish(partial))  # type: ignore[method-assign]  # this plan's own
    plan.probe = lambda: once(("probe", window.latest), probe)  # type: ignore[method-assign]  # this plan's own
    return plan


def workload_queries(rng: np.random.Generator, n: int, count: int) -> list[str]:
    out = []
    for _ in range(count):
        k = int(rng.integers(1, n + 1))
        col = "src" if rng.random() < 0.5 else "dst"
        if rng.random() < 0.5:
            out.append(f"SELECT {col}, SUM(bytes) FROM packets [RANGE {k} SUBWINDOWS] GROUP BY {col} ORDER BY 2 DESC LIMIT 10")
        else:
            q = PERCENTILES[int(rng.integers(0, len(PERCENTILES)))]
            out.append(f"SELECT QUANTILE(total, {q}) FROM (SELECT {col}, SUM(bytes) AS total FROM packets "
                       f"[RANGE {k} SUBWINDOWS] GROUP BY {col})")
    return out


def onetime_query(rng: np.random.Generator, n: int) -> str:
    col = "src" if rng.random() < 0.5 else "dst"
    picks = ", ".join(f"'{_addr(int(a))}'" for a in rng.integers(0, ADDRESSES, 3))
    k = int(rng.integers(1, n + 1))
    return f"SELECT SUM(bytes), COUNT(*), MAX(bytes) FROM packets [RANGE {k} SUBWINDOWS] WHERE {col} IN ({picks})"


def _addr(i: int) -> str:
    return f"10.{i // 256}.{i % 256}.1"


_NAMES = pa.array([_addr(i) for i in range(ADDRESSES)], pa.string())


def packets(rng: np.random.Generator, rows: int, t0: int, span_ms: int) -> dict:
    """`rows` packets in [t0, t0 + span_ms); addresses dictionary-encoded (as the SDK sends them),
    so that appending them maps 1,000 names instead of checking every row's string."""
    return {
        "ts": t0 + np.sort(rng.integers(0, span_ms, rows)),
        "src": _addresses(rng.integers(0, ADDRESSES, rows)),
        "dst": _addresses(rng.integers(0, ADDRESSES, rows)),
        "bytes": rng.integers(1, 101, rows),
    }


def _addresses(picks: np.ndarray) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(picks.astype(np.int32), pa.int32()), _NAMES)


def simulate(cfg: SimConfig) -> dict:
    # One random stream each for the window's rows, the periodic workload and the one-time queries:
    # each is drawn in an order no policy changes, so every policy meets the same rows and queries
    # (the thesis tests its schedulers "over an identical query workload").
    rows_rng, periodic_rng, onetime_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(cfg.seed).spawn(3))
    access = Access(cfg.access)
    n, t = cfg.subwindows, cfg.subwindow_ms
    duration_ms = (cfg.duration_s * 1000.0) if cfg.duration_s is not None else float(n * t)
    clock = [0.0]
    history = History(cfg.history_path, keep=0) if cfg.history_path else None
    # the thesis's algorithms as it ran them (7.5): no restart limit, and no fallback under ttu
    # (Outcomes._fall_back holds windows, which Algorithm 8 never does)
    sched = Scheduler(cfg.policy, clock=lambda: clock[0], history=history, max_restarts=1_000_000,
                      fallback_after=1_000_001)
    stream = Stream("packets", {"ts": "int64", "src": "string", "dst": "string", "bytes": "int64"},
                    WindowSpec(subwindows=n, subwindow_ms=t, group_by=("src", "dst")), created_ms=-(n * t))
    sched.add_stream(stream)
    plan_of = (lambda text: remembered(access.plan(text, stream))) if cfg.remember else (lambda text: access.plan(text, stream))
    # Fill the window before the measured run (the thesis initialises it the same way), through
    # the scheduler so that the history holds every slide from version 0.
    for j in range(n):
        stream.append(packets(rows_rng, _rows_for_subwindow(rows_rng, cfg), -(n - j) * t, t))
        clock[0] = float(-(n - j - 1) * t)
        assert sched.step() == Step.SLIDE
    clock[0] = 0.0
    answers: list[Result] = []
    onetime: list[Result] = []
    fresh: list[Result] = []
    tasks = []
    for text in workload_queries(periodic_rng, n, cfg.periodic):
        # a task that never answered ages from its registration (Task.since) like one that answered
        # then: the earliest-deadline-first order of these continual tasks is the thesis's round robin
        tasks.append(sched.register(plan_of(text), every=0, on_answer=fresh.append))
    arrivals = []
    if cfg.onetime_rate > 0:
        at = 0.0
        while True:
            at += onetime_rng.exponential(1000.0 / cfg.onetime_rate)
            if at >= duration_ms:
                break
            arrivals.append(at)
    arrivals.reverse()
    next_fill = 0  # the next sub-window whose rows have not all arrived yet
    while clock[0] < duration_ms:
        while (next_fill + 1) * t <= clock[0]:
            # the rows of sub-window [next_fill*t, (next_fill+1)*t) have all arrived by its end, when
            # its slide falls due (a slide delayed past the next one's end cuts both: Window.cut)
            stream.append(packets(rows_rng, _rows_for_subwindow(rows_rng, cfg), next_fill * t, t))
            next_fill += 1
        while arrivals and arrivals[-1] <= clock[0]:
            at = arrivals.pop()
            txn = sched.submit(plan_of(onetime_query(onetime_rng, n)), priority=1,
                               on_done=lambda tx: fresh.append(tx.result) if tx.result else None)
            txn.submitted_ms = at
        fresh.clear()
        op = sched.step()
        if op is None:
            upcoming = [(stream.window.next_due_ms() or duration_ms)] + ([arrivals[-1]] if arrivals else [])
            clock[0] = max(clock[0], min(upcoming))
            continue
        cost = (sched.last_rows * cfg.seal_row_us if op == Step.SLIDE
                else cfg.read_fixed_us + sched.last_rows * cfg.row_cost_us) / 1000.0
        if op == Step.PROBE:
            cost = cfg.read_fixed_us / 1000.0
        clock[0] += cost
        for r in fresh:  # an answer is reported when its last operation finishes
            r.answered_ms += cost
            r.response_ms += cost
            if r.staleness_ms is not None:
                r.staleness_ms += cost
            (answers if r.execution else onetime).append(r)
    if history is not None:
        history.close()
    out = summarize(cfg, sched, answers, onetime, duration_ms)
    out["periodic_answered"] = sum(task.executions > 0 for task in tasks)  # (round robin: all of them)
    return out


def _rows_for_subwindow(rng, cfg: SimConfig) -> int:
    factor = math.sqrt(10) ** rng.uniform(-1, 1)
    return max(0, int(round(cfg.rows_per_ms * cfg.subwindow_ms * factor)))


def summarize(cfg, sched: Scheduler, periodic, onetime, duration_ms) -> dict:
    totals = sched.totals()
    allans = periodic + onetime
    stale = [r.staleness_ms for r in allans if r.staleness_ms is not None]
    inter = [r.inter_exec_ms for r in periodic if r.inter_exec_ms is not None]
    delays = list(sched.slide_delays["packets"])
    attempts = totals["committed"] + totals["aborts"]

    def mean(xs):
        return round(statistics.fmean(xs), 3) if xs else None

    def p99(xs):
        return round(float(np.percentile(xs, 99)), 3) if xs else None

    return {
        "policy": cfg.policy,
        "access": Access(cfg.access).value,
        "committed": totals["committed"],
        "aborts": totals["aborts"],
        "abort_pct": round(100.0 * totals["aborts"] / attempts, 2) if attempts else 0.0,
        "restarts": totals["restarts"],
        "staleness_ms_mean": mean(stale),
        "staleness_ms_p99": p99(stale),
        "onetime_response_ms_mean": mean([r.response_ms for r in onetime]),
        "inter_exec_ms_mean": mean(inter),
        "throughput_qps": round(totals["committed"] / (duration_ms / 1000.0), 3),
        "max_slide_delay_ms": round(max(delays), 3) if delays else 0.0,
        "onetime_staleness_ms_mean": mean([r.staleness_ms for r in onetime if r.staleness_ms is not None]),
        "periodic_staleness_ms_mean": mean([r.staleness_ms for r in periodic if r.staleness_ms is not None]),
    }


def run_many(policies: list[str], history_dir: str | None = None, **kw) -> dict:
    results = []
    for p in policies:
        path = os.path.join(history_dir, f"{p}.jsonl") if history_dir else None
        if history_dir:
            os.makedirs(history_dir, exist_ok=True)
        results.append(simulate(SimConfig(policy=p, history_path=path, **kw)))
    return {"results": results}


def calibrate(repeat: int = 5) -> dict:
    """Measure this machine's window-scan and seal costs for the workload (not deterministic)."""
    import time

    rng = np.random.default_rng(1)
    out = {}
    for rows in (1000, 20000):
        s = Stream("packets", {"ts": "int64", "src": "string", "dst": "string", "bytes": "int64"},
                   WindowSpec(subwindows=2, subwindow_ms=1000, group_by=("src", "dst")), created_ms=0)
        s.append(packets(rng, rows, 0, 1000))
        t0 = time.perf_counter()
        sub = s.window.slide(1000)
        seal = time.perf_counter() - t0
        plan = plan_query(parse_query(workload_queries(rng, 1, 1)[0]), s, access=AccessPath.WINDOW)
        t0 = time.perf_counter()
        for _ in range(repeat):
            plan.read(sub)
        out[rows] = ((time.perf_counter() - t0) / repeat * 1e6, seal * 1e6)
    (r1, _), (r2, s2) = out[1000], out[20000]
    row = (r2 - r1) / 19000
    return {"row_cost_us": round(row, 4), "read_fixed_us": round(r1 - row * 1000, 1), "seal_row_us": round(s2 / 20000, 4)}


if __name__ == "__main__":
    print(json.dumps(calibrate()))
