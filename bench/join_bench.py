"""Window-join benchmarks (issue 14): join result rows/s against DuckDB over the same window contents
(a one-time two-way equi-join aggregate is answered per join key, without forming its joined rows:
store/join/by_key.py; the same join with the joined rows formed is measured in the
same run for comparison),
eager vs lazy evaluation of a periodic join, and the thesis's join-order heuristic against the worst
order (chapter 5's experiments, in miniature).

    python -m bench.join_bench            # prints the rows; bench/run.py imports run()

DuckDB reads the same rows (Arrow tables of each source's window, registered before timing) and
computes the same SQL; its answer is checked equal to the store's. It uses its default thread count
(every core) and, in one more row, one thread; the store's join runs on one thread. Eager/lazy and
the join orders check that every variant gives the same answers.
"""
from __future__ import annotations

import itertools
import statistics
import time

import numpy as np
import pyarrow as pa

from windowstore.store import Stream, WindowSpec
from windowstore.store.join import JoinPlan, order_cost, plan_join, window_inputs
from windowstore.store.parser import parse_statement

from .common import fmt_rate, fmt_time, timeit

SCHEMA = {"ts": "int64", "k": "int64", "y": "int64", "v": "int64"}


def stream(name: str, subwindows: int, rows_per_sub: int, keys: int, seed: int, y_domain: int | None = None) -> Stream:
    """A manual-clock stream with `subwindows` sealed sub-windows of uniform random keys."""
    rng = np.random.default_rng(seed)
    s = Stream(name, SCHEMA, WindowSpec(subwindows=subwindows, subwindow_ms=1000, clock="manual"), created_ms=0)
    for j in range(subwindows):
        seal(s, rng, j, rows_per_sub, keys, y_domain)
    return s


def seal(s: Stream, rng, j: int, rows: int, keys: int, y_domain: int | None = None) -> None:
    s.append({"ts": np.sort(rng.integers(j * 1000, (j + 1) * 1000, rows)).astype(np.int64),
              "k": rng.integers(0, keys, rows).astype(np.int64),
              "y": rng.integers(0, y_domain or keys, rows).astype(np.int64),
              "v": rng.integers(0, 1000, rows).astype(np.int64)})
    s.window.slide((j + 1) * 1000)


def arrow_window(s: Stream, n_q: int | None = None) -> pa.Table:
    subs = s.window.youngest(n_q or s.window.n)
    return pa.table({c: np.concatenate([sub.columns[c] for sub in subs]) for c in SCHEMA})


def duckdb_time(tables: dict[str, pa.Table], sql: str, repeat: int = 3, threads: int | None = None) -> tuple[float, list]:
    import duckdb

    con = duckdb.connect()
    if threads is not None:
        con.execute(f"SET threads = {threads}")
    for name, t in tables.items():
        con.register(name, t)
    out = []
    t = timeit(lambda: out.append(con.execute(sql).fetchall()), repeat=repeat)
    con.close()
    return t, out[-1]


def two_way(out: list[dict]) -> None:
    """2-way equi-join, 10^5 x 10^5 rows (10 sub-windows of 10^4 each), ~10^6 result rows."""
    a = stream("a", 10, 10_000, 10_000, seed=1)
    b = stream("b", 10, 10_000, 10_000, seed=2)
    streams = {"a": a, "b": b}
    text = "SELECT COUNT(*), SUM(b.v), MAX(a.v) FROM a JOIN b ON a.k = b.k"
    q = parse_statement(text)
    answer = []

    def store_join(by_key=True):
        plan = plan_join(q, streams, max_rows=10**8, cache=False)
        plan.by_key = plan.by_key and by_key
        answer.append(plan.evaluate(window_inputs(plan, streams)).rows)
        assert plan.stats.by_key == int(by_key)
    t_store = timeit(store_join, repeat=5)
    result_rows = answer[-1][0][0]
    t_rows = timeit(lambda: store_join(by_key=False), repeat=3)
    assert answer[-1] == answer[0]
    t_duck, duck = duckdb_time({"a": arrow_window(a), "b": arrow_window(b)},
                               "SELECT COUNT(*), SUM(b.v), MAX(a.v) FROM a JOIN b ON a.k = b.k")
    assert tuple(duck[0]) == tuple(answer[-1][0]), (duck, answer[-1])
    ratio = t_duck / t_store
    out.append({"name": f"2-way equi-join 10^5 x 10^5 rows ({result_rows:,} result rows), COUNT/SUM/MAX: store",
                "value": result_rows / t_store, "shown": f"{fmt_rate(result_rows / t_store)} ({fmt_time(t_store)})",
                "target": ""})
    out.append({"name": "... the same join in DuckDB over the same window contents",
                "value": result_rows / t_duck, "shown": f"{fmt_rate(result_rows / t_duck)} ({fmt_time(t_duck)})",
                "target": ""})
    out.append({"name": "2-way equi-join result rows/s, store / DuckDB", "value": ratio, "shown": f"{ratio:.2f}x",
                "target": ">= 1x"})
    out.append({"name": "... store / DuckDB with the joined rows formed (the path before per-key aggregation)",
                "value": t_duck / t_rows, "shown": f"{t_duck / t_rows:.2f}x (store {fmt_time(t_rows)})", "target": ""})
    t_one, _ = duckdb_time({"a": arrow_window(a), "b": arrow_window(b)},
                           "SELECT COUNT(*), SUM(b.v), MAX(a.v) FROM a JOIN b ON a.k = b.k", threads=1)
    out.append({"name": "... store / DuckDB with one thread (SET threads = 1)", "value": t_one / t_store,
                "shown": f"{t_one / t_store:.2f}x (DuckDB {fmt_time(t_one)})", "target": ""})

    # grouped by a column of one side: that side is grouped by (key, group), the other per key
    text = "SELECT a.y, COUNT(*), SUM(b.v), AVG(a.v), MIN(b.v) FROM a JOIN b ON a.k = b.k GROUP BY a.y"
    qg = parse_statement(text)

    def store_grouped():
        plan = plan_join(qg, streams, max_rows=10**8, cache=False)
        answer.append(plan.evaluate(window_inputs(plan, streams)).rows)
    t_store = timeit(store_grouped, repeat=5)
    t_duck, duck = duckdb_time({"a": arrow_window(a), "b": arrow_window(b)}, text + " ORDER BY a.y")
    assert [tuple(r) for r in duck] == answer[-1], (duck[:3], answer[-1][:3])
    out.append({"name": "2-way equi-join GROUP BY a column of one side (10^4 groups), store / DuckDB",
                "value": t_duck / t_store,
                "shown": f"{t_duck / t_store:.2f}x (store {fmt_time(t_store)}, DuckDB {fmt_time(t_duck)})",
                "target": ">= 1x"})

    # the same with a W-join band on event time (most pairs pruned by sub-window)
    text = "SELECT COUNT(*), SUM(b.v) FROM a JOIN b ON a.k = b.k AND b.ts BETWEEN a.ts - 500 AND a.ts + 500"
    q2 = parse_statement(text)

    def store_band():
        plan = plan_join(q2, streams, max_rows=10**8, cache=False)
        answer.append(plan.evaluate(window_inputs(plan, streams)).rows)
    t_store = timeit(store_band, repeat=3)
    t_duck, duck = duckdb_time({"a": arrow_window(a), "b": arrow_window(b)},
                               "SELECT COUNT(*), SUM(b.v) FROM a JOIN b ON a.k = b.k "
                               "AND b.ts BETWEEN a.ts - 500 AND a.ts + 500")
    assert tuple(duck[0]) == tuple(answer[-1][0]), (duck, answer[-1])
    out.append({"name": "2-way equi-join + band (W-join window of ±500 ms), store / DuckDB", "value": t_duck / t_store,
                "shown": f"{t_duck / t_store:.2f}x (store {fmt_time(t_store)}, DuckDB {fmt_time(t_duck)})",
                "target": ""})


def eager_vs_lazy(out: list[dict]) -> None:
    """A periodic 2-way join over 20 sub-windows of each stream, re-executed every 5 slides: eager
    refreshes after every slide (new sub-windows joined one by one), lazy joins the 5 new sub-windows of
    each stream as groups at re-execution; both against recomputing the join each time (a one-time
    plan: per join key, without joined rows)."""
    rows, keys, slides, every = 5_000, 5_000, 20, 5
    text = "SELECT COUNT(*), SUM(b.v) FROM a JOIN b ON a.k = b.k"
    q = parse_statement(text)
    timings = {}
    answers = {}
    for mode in ("eager", "lazy", "recompute"):
        def cycle(mode=mode):
            """The join's own time over the slides (refreshes and evaluations; sealing not counted)."""
            a = stream("a", 20, rows, keys, seed=3)
            b = stream("b", 20, rows, keys, seed=4)
            streams = {"a": a, "b": b}
            rng = np.random.default_rng(5)
            plan = plan_join(q, streams, max_rows=10**8, cache=mode != "recompute")
            plan.evaluate(window_inputs(plan, streams))
            got, spent = [], 0.0
            for j in range(20, 20 + slides):
                for s in (a, b):
                    seal(s, rng, j, rows, keys)
                    if mode == "eager":
                        t0 = time.perf_counter()
                        plan.refresh(window_inputs(plan, streams))
                        spent += time.perf_counter() - t0
                if (j + 1) % every == 0:
                    t0 = time.perf_counter()
                    got.append(plan.evaluate(window_inputs(plan, streams)).rows)
                    spent += time.perf_counter() - t0
            answers[mode] = got
            return spent
        timings[mode] = statistics.median(cycle() for _ in range(3))
    assert answers["eager"] == answers["lazy"] == answers["recompute"]
    for mode in ("eager", "lazy", "recompute"):
        t = timings[mode]
        out.append({"name": f"periodic join 10^5 x 10^5 rows, {slides} slides per stream, answer every {every}: {mode}",
                    "value": t / slides, "shown": f"{fmt_time(t / slides)} per slide", "target": ""})


def join_order(out: list[dict]) -> None:
    """3-way join where the order matters: a.k = b.k has 200 keys (a large intermediate), b.y = c.y is
    selective (c's y mostly matches nothing). The heuristic (5.3) against the worst order by its cost."""
    a = stream("a", 4, 5_000, 200, seed=6)
    b = stream("b", 4, 5_000, 200, seed=7, y_domain=20_000)
    c = stream("c", 4, 500, 200, seed=8, y_domain=2_000_000)
    streams = {"a": a, "b": b, "c": c}
    q = parse_statement("SELECT COUNT(*), SUM(c.v) FROM a JOIN b ON a.k = b.k JOIN c ON c.y = b.y")
    probe = plan_join(q, streams, max_rows=10**8, cache=False)
    probe.evaluate(window_inputs(probe, streams))
    chosen = list(probe.stats.order)
    costs = {}
    for perm in itertools.permutations(range(3)):
        m = _inputs_of(probe, streams)
        costs[perm] = order_cost(list(perm), m)
    worst = list(max(costs, key=costs.get))
    results = {}
    for label, order in (("heuristic", chosen), ("worst", worst)):
        def run_once(order=order):
            plan = plan_join(q, streams, max_rows=10**8, cache=False)
            plan._order = lambda inputs, preps, order=order: list(order)
            results[label] = plan.evaluate(window_inputs(plan, streams)).rows
        results[label + "_t"] = timeit(run_once, repeat=3)
    assert results["heuristic"] == results["worst"]
    ratio = results["worst_t"] / results["heuristic_t"]
    out.append({"name": f"3-way join, heuristic order {chosen} vs worst {worst} (by the 5.3.1 cost)", "value": ratio,
                "shown": f"worst/heuristic time {ratio:.1f}x ({fmt_time(results['heuristic_t'])} vs "
                         f"{fmt_time(results['worst_t'])})", "target": "> 1x"})


def _inputs_of(plan: JoinPlan, streams):
    """The cost model's inputs for the plan's current windows (as JoinPlan._order computes them)."""
    captured = {}
    orig = plan._order.__func__

    def spy(self, inputs, preps):
        from windowstore.store.join import plan as J  # the module JoinPlan._order calls choose_order from
        real_choose = J.choose_order

        def capture(m):
            captured["m"] = m
            return real_choose(m)
        J.choose_order = capture
        try:
            return orig(self, inputs, preps)
        finally:
            J.choose_order = real_choose
    fresh = plan_join(plan.query, streams, max_rows=10**8, cache=False)
    fresh._order = spy.__get__(fresh)
    fresh.evaluate(window_inputs(fresh, streams))
    return captured["m"]


def run() -> list[dict]:
    out: list[dict] = []
    two_way(out)
    eager_vs_lazy(out)
    join_order(out)
    return out


if __name__ == "__main__":
    for r in run():
        print(f"{r['name']}: {r['shown']}" + (f"   (target {r['target']})" if r["target"] else ""))
