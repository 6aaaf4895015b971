"""Many concurrent windows that cut sub-windows answered together (store/slicing_shared.py),
against three independent answers: each window answered alone (run_plan of its own plan),
Definition 10 of seed 003 evaluated directly in Python over the rows the stream accepted, and
DuckDB over those rows with the bounds each answer reports. Random sets of shapes (unaligned RANGE
and SLIDE, with and without window_start/window_end, GROUP BY or not, WHERE or not) registered
together over one event-time stream with rows out of order within the allowed lateness."""
from __future__ import annotations

import random

import duckdb
import numpy as np
import pytest

from test_slicing import WHERE, Fed, definition_10, expected, feed_random, random_case

from windowstore.store import Stream, WindowSpec, parse_query, plan_query, run_plan
from windowstore.store.binder import BoundAggregate
from windowstore.store.exact import INT64_MAX, INT64_MIN
from windowstore.store.functions import FUNCTIONS
from windowstore.store.slicing import Shape
from windowstore.store.slicing_shared import SharedSlices, run_shared
from windowstore.txn import POLICIES

AGGS = "COUNT(*), SUM(b), MIN(b), MAX(b), COUNT(b)"


def shapes(rng: random.Random, n: int, t: int, count: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    while len(out) < count:
        r, s = rng.randint(1, (n - 1) * t), rng.randint(max(1, t // 20), 3 * t)
        if r % t or s % t:
            out.append((r, s))
    return out


def texts(r: int, s: int, keyed: bool, bounds: bool, where: str, holistic: bool) -> str:
    keys = ", src" if keyed else ""
    aggs = AGGS + (", MEDIAN(b)" if holistic else "") + ", AVG(b)"
    if bounds:
        return (f"SELECT window_start, window_end{keys}, {aggs} FROM s [RANGE {r} ms SLIDE {s} ms] {where} "
                f"GROUP BY window_start{keys}")
    return f"SELECT {aggs.replace('COUNT(b)', 'COUNT(b) AS nb')} FROM s [RANGE {r} ms SLIDE {s} ms] {where}"


def check_case(seed: int) -> int:
    """One random set of concurrent windows of one inner query; returns the windows compared."""
    rng = random.Random(seed)
    n, t, lateness, _, _ = random_case(rng)
    keyed, bounds = rng.random() < 0.3, rng.random() < 0.7
    keyed = keyed and bounds  # (GROUP BY a key without the bounds: the newest window's rows per key)
    where, holistic = rng.choice(list(WHERE)), rng.random() < 0.2
    fed = Fed(n, t, lateness, group_by=("src",) if rng.random() < 0.5 else ())
    shp = shapes(rng, n, t, rng.randint(1, 12))
    shp += rng.sample(shp, min(2, len(shp)))  # the same shape twice: one slice set for both
    plans = [plan_query(parse_query(texts(r, s, keyed, bounds, where, holistic)), fed.s, periodic=True)
             for r, s in shp]
    shared = SharedSlices(plans)
    start = rng.randint(-5, 5) * t + rng.randint(0, t - 1)
    con = duckdb.connect()
    con.execute("CREATE TABLE r (ts BIGINT, src VARCHAR, b BIGINT)")
    compared = 0
    for _round in range(rng.randint(1, 4)):
        span = rng.randint(1, 2 * n) * t
        feed_random(rng, fed, start, span, rng.randint(0, 80), lateness)
        start += span
        if fed.s.window.latest < 0:
            continue
        got = run_shared(shared)
        alone = [run_plan(p) for p in plans]
        assert [a.rows for a in got] == [a.rows for a in alone], (seed, "shared == alone")
        # against Definition 10 and DuckDB over the accepted rows, with each window's bounds
        con.execute("DELETE FROM r")
        if fed.accepted:
            con.executemany("INSERT INTO r VALUES (?, ?, ?)", fed.accepted)
        for (r, s), plan, answer in zip(shp, plans, got):
            lo, hi = fed.retained(plan.n_q)
            ks = Shape(r, s).indexes(lo, hi)
            if not len(ks):
                continue
            a, b = ks[-1] * s, ks[-1] * s + r
            want = expected({(a, b): definition_10(fed.accepted, a, b, r, s)[(a, b)]}, keyed, WHERE[where])
            if not holistic:
                want = [x[:-1] for x in want]
            if bounds:  # (AVG last: Definition 10's oracle has the others)
                assert [row[:-1] for row in answer.rows] == want, (seed, r, s)
                for row in answer.rows:
                    key = "AND src IS NOT DISTINCT FROM ?" if keyed else ""
                    ref = con.execute(f"SELECT count(*), sum(b), min(b), max(b), count(b), avg(b) FROM r WHERE ts >= ? "
                                      f"AND ts < ? {key} {where.replace('WHERE', 'AND')}",
                                      [row[0], row[1], *([row[2]] if keyed else [])]).fetchone()
                    assert (*row[3 if keyed else 2:][:5], row[-1]) == tuple(ref), (seed, r, s, row)
            else:  # without the bounds: the one row of the newest window (COUNT(*) 0 where none)
                ref = con.execute(f"SELECT count(*), sum(b), min(b), max(b), count(b), avg(b) FROM r WHERE ts >= ? AND "
                                  f"ts < ? {where.replace('WHERE', 'AND')}", [a, b]).fetchone()
                assert (*answer.rows[0][:5], answer.rows[0][-1]) == tuple(ref), (seed, r, s)
            compared += 1
    return compared


@pytest.mark.parametrize("seed", range(60))
def test_windows_answered_together_match_each_alone_definition_10_and_duckdb(seed):
    check_case(seed)


def test_the_cases_compare_windows():
    """The differential cases above compare answers (a case whose windows never complete would
    compare nothing): most seeds compare at least one window."""
    assert sum(check_case(seed) > 0 for seed in range(20)) >= 15


@pytest.mark.parametrize("edge", ["low", "high", "zero"])
def test_cuts_of_all_shapes_are_each_shapes_cuts_near_the_int64_limits(edge):
    """The union of cuts (vectorised in int64 away from the limits, Python ints near them) is
    exactly the union of every shape's own cuts."""
    rng = random.Random(edge)
    s = Stream("s", {"ts": "int64", "b": "int64"}, WindowSpec(subwindows=8, subwindow_ms=1000, clock="event"), 0)
    shp = [(rng.randint(1, 6000), rng.randint(1, 3000)) for _ in range(30)]
    plans = [plan_query(parse_query(f"SELECT COUNT(*) FROM s [RANGE {r} ms SLIDE {sl} ms]"), s, periodic=True)
             for r, sl in shp]
    shared = SharedSlices(plans)
    base = {"low": INT64_MIN, "high": INT64_MAX - 10_000, "zero": -5_000}[edge]
    for lo in (base, base + 999, base + 4_321):
        hi = lo + 1000
        want = sorted(set().union(*(Shape(r, sl).cuts(lo, hi) for r, sl in shp)))
        assert shared.cuts(lo, hi) == want


@pytest.mark.parametrize("func,typ", [("count", None), ("sum", "int64"), ("avg", "int64"), ("min", "int64"),
                                      ("max", "int64"), ("max", "timestamp")])
def test_combine_runs_is_combine_of_the_run(func, typ):
    """An aggregate's combine_runs over every run of contributions at once, lowered by
    finish_unique, equals the finish of its combine of each run: the range form is the same merge
    (empty slices, sums beyond int64 near its limits included)."""
    rng = random.Random(func)
    b = BoundAggregate(FUNCTIONS[func], None if typ is None else "x", typ, None, func, FUNCTIONS[func].result_type(typ))
    fn = b.fn
    for _ in range(20):
        parts = []
        for _ in range(rng.randint(1, 40)):
            vals = np.array([rng.choice([rng.randint(-99, 99), INT64_MAX // 8, INT64_MIN // 8])
                             for _ in range(rng.randint(0, 5))], dtype=np.int64)
            parts.append(fn.from_rows(b, None if typ is None else vals, len(vals), None))
        cols = fn.combine_columns(b, parts)
        assert cols is not None
        pairs = [(i, j) for i in range(len(parts)) for j in range(i + 1, len(parts) + 1)]
        i, j = (np.array(x, dtype=np.int64) for x in zip(*pairs))
        got = fn.finish_unique(b, fn.combine_runs(b, cols)(i, j), np.arange(len(pairs)), None).tolist()
        assert got == [fn.finish(b, [fn.combine(b, parts[x:y], None)], None) for x, y in pairs], func


def test_a_sum_beyond_int64_combines_without_runs():
    """Slice sums beyond int64 (exact Python ints) have no array form: such windows are combined
    by `combine` (combine_columns None), never wrapped."""
    b = BoundAggregate(FUNCTIONS["sum"], "x", "int64", None, "sum", "int128")
    assert b.fn.combine_columns(b, [(INT64_MAX, 1), (INT64_MAX + 5, 2)]) is None


@pytest.mark.parametrize("func,typ", [("count", None), ("count", "int64"), ("sum", "int64"), ("avg", "int64"),
                                      ("min", "int64"), ("max", "int64"), ("min", "timestamp")])
def test_run_columns_are_the_combine_columns_of_each_runs_contribution(func, typ):
    """A sub-window cut into consecutive runs in one vectorised pass (run_columns) gives what
    reading each run (from_rows) and putting the partials in columns gives, empty runs included."""
    rng = random.Random(func + str(typ))
    b = BoundAggregate(FUNCTIONS[func], None if typ is None else "x", typ, None, func, FUNCTIONS[func].result_type(typ))
    fn = b.fn
    for _ in range(30):
        n = rng.randint(0, 60)
        values = np.array([rng.choice([rng.randint(-99, 99), INT64_MAX // 128, INT64_MIN // 128]) for _ in range(n)],
                          dtype=np.int64)
        bounds = np.array(sorted([0, n, *(rng.randint(0, n) for _ in range(rng.randint(0, 8)))]), dtype=np.int64)
        got = fn.run_columns(b, None if typ is None else values, bounds)
        parts = [fn.from_rows(b, None if typ is None else values[i:j], j - i, None) for i, j in zip(bounds, bounds[1:])]
        want = fn.combine_columns(b, parts)
        assert got is not None and want is not None
        assert [c.tolist() for c in got] == [c.tolist() for c in want], (func, bounds)


@pytest.mark.parametrize("maximum", [True, False])
def test_range_extremes_are_each_runs_extreme(maximum):
    """kernels.range_extremes over many runs at once (across blocks and within one) against a
    reduction of each run's values, near the int64 limits too."""
    from windowstore.store.kernels import range_extremes

    rng = random.Random(maximum)
    for n in (1, 63, 64, 65, 200, 1000, 4097):
        values = np.array([rng.choice([rng.randint(-1000, 1000), INT64_MAX, INT64_MIN]) for _ in range(n)],
                          dtype=np.int64)
        i = np.array([rng.randrange(n) for _ in range(300)], dtype=np.int64)
        j = np.array([rng.randint(int(x) + 1, n) for x in i], dtype=np.int64)
        got = range_extremes(values, maximum)(i, j).tolist()
        assert got == [int(values[x:y].max() if maximum else values[x:y].min()) for x, y in zip(i, j)], n


def engine_run(sharing: str, policy: str, seed: int):
    """Sliced periodic queries of one inner query (and one of another) registered on the engine,
    fed out-of-order rows with the scheduler kept idle; their answers, the rows accepted, the
    history and the sharing stats."""
    from windowstore.txn.commands import Append, CreateStream, Register
    from windowstore.txn.engine import Engine, EngineConfig
    from windowstore.txn.history import History

    rng = random.Random(seed)
    history = History()
    e = Engine(EngineConfig(policy=policy, sharing=sharing), history=history)
    e.apply(CreateStream("s", {"ts": "int64", "src": "string", "b": "int64"}, "ts",
                         WindowSpec(20, 7000, None, "event", 2000, (), 4), 0))
    got: list = []
    e.on_answer = lambda qid, res: got.append((qid, res.slide, res.window_start_ms, res.window_end_ms, res.answer.rows))
    accepted: list = []  # the rows the stream kept, found without asking it: a row is late when its slot is cut
    window, first_slot = e.sched.streams["s"].window, None
    shapes_ = [(rng.randint(8, 120) * 1000 + rng.choice([0, 500]), rng.randint(3, 30) * 1000) for _ in range(6)]
    queries = {}
    for x, (r, s) in enumerate(shapes_):
        queries[f"W{x}"] = (r, s)
        e.apply(Register(f"W{x}", f"SELECT window_start, window_end, COUNT(*), SUM(b), MAX(b) FROM s "
                                  f"[RANGE {r} ms SLIDE {s} ms] GROUP BY window_start", 0, 0))
    e.apply(Register("N", "SELECT COUNT(*), SUM(b), MAX(b) FROM s [RANGE 20 s SLIDE 3 s]", 0, 0))
    e.apply(Register("X", "SELECT window_start, COUNT(*) FROM s [RANGE 20 s SLIDE 3 s] GROUP BY window_start", 0, 0))
    for step in range(120):
        base = step * 2000
        batch = [(base + rng.randint(0, 1999) - rng.randint(0, 2000), rng.choice("ab"), rng.randint(-9, 9))
                 for _ in range(rng.randint(0, 6))]
        batch = [x for x in batch if x[0] >= 0]
        if batch:
            first_slot = min(x[0] for x in batch) // 7000 if first_slot is None else first_slot
            accepted += [x for x in batch if x[0] >= (first_slot + window.cut_through + 1) * 7000]
            e.apply(Append("s", {"ts": [x[0] for x in batch], "src": [x[1] for x in batch],
                                 "b": [x[2] for x in batch]}, "", None, base))
        e.tick(base)
        e.sched.run_until_idle()
    stats = e.sched.sharing.stats() if e.sched.sharing is not None else {}
    return got, history, stats, queries, accepted


@pytest.mark.parametrize("policy", POLICIES)
def test_sliced_windows_due_together_run_as_one_shared_execution(policy):
    """Under --sharing, the sliced queries of one inner query due at the same slide run as one
    read-only transaction (slices groups, txn/sharing/slices.py), under every policy: each answers
    what it answers with sharing off, window by window, each window once; each answer row equals
    DuckDB over the rows the stream kept within the bounds the row reports; the history passes the
    checker (WS under ws, LWS under the others)."""
    from windowstore.txn.checker import check

    alone, _, _, _, _ = engine_run("none", policy, 5)
    shared, history, stats, queries, accepted = engine_run("conservative", policy, 5)
    assert stats["slice_executions"] > 0 and stats["slice_answers"] > stats["slice_executions"], stats
    assert sorted(shared, key=lambda a: (a[0], a[1])) == sorted(alone, key=lambda a: (a[0], a[1]))
    for qid, (r, s) in queries.items():
        windows = [tuple(row[:2]) for q, *_, rows in shared if q == qid for row in rows]
        assert len(windows) == len(set(windows)) and all(b - a == r and a % s == 0 for a, b in windows), qid
    con = duckdb.connect()
    con.execute("CREATE TABLE r (ts BIGINT, src VARCHAR, b BIGINT)")
    con.executemany("INSERT INTO r VALUES (?, ?, ?)", accepted)
    compared = 0
    for qid, *_, rows in shared:
        for row in rows if qid.startswith("W") else ():
            ref = con.execute("SELECT count(*), sum(b), max(b) FROM r WHERE ts >= ? AND ts < ?", list(row[:2])).fetchone()
            assert tuple(row[2:]) == ref, (policy, qid, row)
            compared += 1
    assert compared > 20, compared
    report = check(history.events)
    expect = "ws" if policy == "ws" else "lws"
    assert report.errors == [] and report.violations(expect) == [], (report.errors, report.violations(expect))


def test_explain_says_a_sliced_query_joins_its_slices_group():
    """`explain` under --sharing: a sliced periodic query joins the slices group of the registered
    windows of the same inner query, and runs alone for now when there are none."""
    from windowstore.txn.commands import CreateStream, Register
    from windowstore.txn.engine import Engine, EngineConfig

    e = Engine(EngineConfig(policy="lws", sharing="conservative"))
    e.apply(CreateStream("s", {"ts": "int64", "src": "string", "b": "int64"}, "ts",
                         WindowSpec(20, 7000, None, "event", 2000, (), 4), 0))
    text = "SELECT window_start, COUNT(*), SUM(b) FROM s [RANGE {} ms SLIDE {} ms] GROUP BY window_start"
    stream = e.sched.streams["s"]
    plan = plan_query(parse_query(text.format(90_000, 20_000)), stream, periodic=True)
    assert "runs alone for now" in e.sched.sharing.explain(plan, plan.bound.every)
    e.apply(Register("W1", text.format(45_500, 3_000), 0, 0))
    e.apply(Register("W2", text.format(30_000, 11_000), 0, 0))
    said = e.sched.sharing.explain(plan, plan.bound.every)
    assert "joins the slices group of 2 window(s)" in said and "W1, W2" in said, said


@pytest.mark.parametrize("edge", ["max", "min"])
def test_windows_answered_together_at_the_edges_of_int64_are_exact(edge):
    """Near INT64_MAX and INT64_MIN the shared execution computes cuts, slice starts and windows in
    Python integers (object arrays): the same answers as each window alone, and as Definition 10."""
    t, n = 7000, 6
    spec = WindowSpec(subwindows=n, subwindow_ms=t, clock="event")
    lo_ok, hi_ok = spec.event_time_limits()
    top = hi_ok - 3 if edge == "max" else lo_ok + 9 * t
    start = top - 8 * t
    fed = Fed(n, t, 0)
    for i in range((top - start) // 997):
        fed.feed([(start + i * 997, "a", i)])
    shp = [(13_001, 2_999), (9_500, 4_000), (20_000, 1_500), (13_001, 2_999)]
    text = "SELECT window_start, window_end, COUNT(*), SUM(b), MAX(b) FROM s [RANGE {} ms SLIDE {} ms] GROUP BY window_start"
    plans = [plan_query(parse_query(text.format(r, s)), fed.s, periodic=True) for r, s in shp]
    got = [a.rows for a in run_shared(SharedSlices(plans))]
    assert got == [run_plan(p).rows for p in plans] and all(got)
    for (r, s), rows, plan in zip(shp, got, plans):
        (a, b, *_), = rows
        v = definition_10(fed.accepted, a, b, r, s)[(a, b)]
        assert rows == [(a, b, len(v), sum(x[2] for x in v), max(x[2] for x in v))]
        assert INT64_MIN <= a < b <= INT64_MAX


@pytest.mark.parametrize("kind", ["sums", "max", "min"])
def test_range_readers_extended_answer_as_made_over_all_values(kind):
    """exact.RangeSums and kernels.RangeExtremes extended chunk by chunk (empty chunks, chunks
    within a block and across many, values near the int64 limits) answer every run as a reduction
    of the run's values; a RangeSums refuses to extend (False) only where an int64 prefix could
    wrap, and one made again over all values then answers exactly."""
    from windowstore.store.exact import RangeSums
    from windowstore.store.kernels import RangeExtremes

    rng = random.Random(kind)
    for case in range(12):
        big = case % 3 == 2
        values = np.empty(0, dtype=np.int64)
        reader = None
        for _ in range(rng.randint(1, 12)):
            chunk = np.array([rng.choice([rng.randint(-1000, 1000), INT64_MAX // 3 if big else 7, INT64_MIN // 3 if big else -7])
                              for _ in range(rng.choice([0, 1, 5, 63, 64, 65, 300]))], dtype=np.int64)
            values = np.concatenate((values, chunk))
            if reader is None or not reader.extend(chunk):
                if reader is not None and kind == "sums":
                    assert big, "an int64 prefix refused only where it could wrap"
                reader = RangeSums(values) if kind == "sums" else RangeExtremes(values, kind == "max")
            n = len(values)
            if not n:
                continue
            i = np.array([rng.randrange(n) for _ in range(100)], dtype=np.int64)
            j = np.array([rng.randint(int(x) + 1, n) for x in i], dtype=np.int64)
            got = reader(i, j).tolist()
            reduce = {"sums": lambda v: sum(v.tolist()), "max": lambda v: int(v.max()), "min": lambda v: int(v.min())}[kind]
            assert got == [reduce(values[x:y]) for x, y in zip(i.tolist(), j.tolist())], (kind, case, n)


@pytest.mark.parametrize("func,typ", [("count", None), ("sum", "int64"), ("max", "int64"), ("min", "timestamp")])
def test_a_run_reader_extended_is_combine_runs_over_all_contributions(func, typ):
    """An aggregate's combine_runs reader extended with more contributions' columns (Runs.extend)
    answers every run as combine_runs made over all of them, and as `combine` of the run."""
    rng = random.Random(func)
    b = BoundAggregate(FUNCTIONS[func], None if typ is None else "x", typ, None, func, FUNCTIONS[func].result_type(typ))
    fn = b.fn
    parts: list = []
    runs = None
    for _ in range(8):
        more = []
        for _ in range(rng.randint(0, 30)):
            vals = np.array([rng.randint(-99, 99) for _ in range(rng.randint(0, 4))], dtype=np.int64)
            more.append(fn.from_rows(b, None if typ is None else vals, len(vals), None))
        parts += more
        if runs is None:
            runs = fn.combine_runs(b, fn.combine_columns(b, parts))
        else:
            assert runs.extend(fn.combine_columns(b, more) if more else tuple(
                np.empty(0, dtype=np.int64) for _ in fn.combine_columns(b, parts)))
        if not parts:
            continue
        pairs = [(x, y) for x in range(len(parts)) for y in range(x + 1, len(parts) + 1)]
        i, j = (np.array(z, dtype=np.int64) for z in zip(*pairs))
        keys = np.arange(len(pairs))
        got = fn.finish_unique(b, runs(i, j), keys, None).tolist()
        fresh = fn.finish_unique(b, fn.combine_runs(b, fn.combine_columns(b, parts))(i, j), keys, None).tolist()
        assert got == fresh == [fn.finish(b, [fn.combine(b, parts[x:y], None)], None) for x, y in pairs], func


def insert_new(con, fed: Fed, inserted: int) -> int:
    """The rows the stream accepted since the first `inserted` into DuckDB's table r (accepted rows
    are only ever added); how many are in it now."""
    rows = fed.accepted[inserted:]
    if rows:
        con.execute("INSERT INTO r SELECT * FROM (VALUES " + ", ".join("(?, ?, ?)" for _ in rows) + ")",
                    [x for row in rows for x in row])
    return len(fed.accepted)


def fed_steps(fed: Fed, rng: random.Random, steps: int, most: int):
    """Per step up to `most` random rows of that step's sub-window fed: the steps after which the
    stream has slid (its window holds a sub-window to answer from)."""
    t = fed.t
    for step in range(steps):
        fed.feed([(step * t + rng.randint(0, t - 1), "a", rng.randint(-50, 50)) for _ in range(rng.randint(0, most))])
        if fed.s.window.latest >= 0:
            yield step


def test_a_shared_execution_slide_after_slide_answers_as_each_window_alone():
    """One shared execution answering after every slide (its joined slices and run readers kept
    and extended across slides, compacted as the window slides far) answers every member's newest
    window as the member alone does, and as Definition 10 over the rows fed; each answer is made
    once, when read."""
    rng = random.Random(7)
    t, n = 1000, 6
    fed = Fed(n, t, 0)
    shp = [(rng.randint(1, (n - 2) * t), rng.randint(50, 2 * t)) for _ in range(40)]
    text = "SELECT window_start, window_end, COUNT(*), SUM(b), MAX(b) FROM s [RANGE {} ms SLIDE {} ms] GROUP BY window_start"
    plans = [plan_query(parse_query(text.format(r, s)), fed.s, periodic=True) for r, s in shp]
    plans += [plan_query(parse_query(f"SELECT COUNT(*), MIN(b) FROM s [RANGE {r} ms SLIDE {s} ms]"), fed.s, periodic=True)
              for r, s in shp[:3]]
    shared = SharedSlices(plans[:40])
    other = SharedSlices(plans[40:])
    compared = 0
    for step in fed_steps(fed, rng, 120, 30):
        got = run_shared(shared)
        assert len(got) == 40 and got[3] is got[3] and got[-1] is got[39] and got[1:3] == [got[1], got[2]]
        assert [a.rows for a in got] == [run_plan(p).rows for p in plans[:40]], step
        assert [a.rows for a in run_shared(other)] == [run_plan(p).rows for p in plans[40:]], step
        # an execution of the members with the shorter windows reads fewer sub-windows (as a slices
        # group's does when only they are due): the same answers, the longer reads kept for the next
        m = rng.randint(2, shared.n_q)
        few = [x for x, p in enumerate(plans[:40]) if p.n_q <= m]
        reads = [shared.read(sub) for sub in fed.s.window.youngest(m)]
        newest = shared.newest(reads)
        assert [a.rows for a in shared.answer(reads, [(x, newest[x]) for x in few])] == \
            [run_plan(plans[x]).rows for x in few], (step, m)
        for (r, s), answer in zip(shp, got):
            for a, b, count, total, top in answer.rows:
                v = definition_10(fed.accepted, a, b, r, s)[(a, b)]
                assert (count, total, top) == (len(v), sum(x[2] for x in v), max(x[2] for x in v)), (step, r, s)
                compared += 1
    assert compared > 1000, compared


def test_a_slices_group_keeps_one_joint_execution_until_its_members_change():
    """Every execution of a slices group is its registered members' one joint execution (each
    sub-window cut once at all their edges, the run readers extended slide after slide), whichever
    members are due; a member registered or unregistered makes the group a new one."""
    from windowstore.txn.commands import Append, CreateStream, Register, Unregister
    from windowstore.txn.engine import Engine, EngineConfig

    e = Engine(EngineConfig(policy="lws", sharing="conservative"))
    e.apply(CreateStream("s", {"ts": "int64", "b": "int64"}, "ts", WindowSpec(20, 1000, None, "event", 0, (), 4), 0))
    for x, (r, s) in enumerate([(3500, 2000), (5500, 3000), (2500, 1000)]):
        e.apply(Register(f"W{x}", f"SELECT window_start, COUNT(*) FROM s [RANGE {r} ms SLIDE {s} ms] GROUP BY window_start", 0, 0))
    groups = e.sched.sharing.slices
    (key,) = groups.joints
    seen = []
    for step in range(30):
        e.apply(Append("s", {"ts": [step * 1000 + 10, step * 1000 + 600], "b": [1, 2]}, "", None, step * 1000))
        e.tick(step * 1000)
        e.sched.run_until_idle()
        seen.append(groups.joints[key].shared)
        if step == 19:
            before = groups.joints[key]
            e.apply(Register("W3", "SELECT window_start, COUNT(*) FROM s [RANGE 4500 ms SLIDE 2000 ms] "
                                   "GROUP BY window_start", 0, 0))
            assert groups.joints[key] is not before and groups.joints[key].shared is None, "made again"
    assert e.sched.sharing.stats()["slice_executions"] > 5
    first = next(s for s in seen if s is not None)
    assert all(s is first for s in seen[seen.index(first):20]), "one joint execution while the members stay"
    assert seen[-1] is not None and seen[-1] is not first, "a new one after a member joined"
    e.apply(Unregister("W3", 30_000))
    assert groups.joints[key].shared is None


@pytest.mark.parametrize("edge", ["low", "high", "zero"])
def test_cuts_of_shapes_sliding_at_least_a_sub_window_are_each_shapes_cuts(edge):
    """Where every SLIDE is at least the sub-window (at most one start and one end of each shape
    inside it: the one-edge pass), the union of cuts is still exactly the union of every shape's
    own cuts, near the int64 limits too."""
    rng = random.Random(edge)
    s = Stream("s", {"ts": "int64", "b": "int64"}, WindowSpec(subwindows=8, subwindow_ms=1000, clock="event"), 0)
    shp = [(rng.randint(1, 6000), rng.randint(1000, 3000)) for _ in range(30)]
    shp = [(r, sl) for r, sl in shp if r % 1000 or sl % 1000]
    plans = [plan_query(parse_query(f"SELECT COUNT(*) FROM s [RANGE {r} ms SLIDE {sl} ms]"), s, periodic=True)
             for r, sl in shp]
    shared = SharedSlices(plans)
    base = {"low": INT64_MIN, "high": INT64_MAX - 10_000, "zero": -5_000}[edge]
    for lo in (base, base + 999, base + 4_321, base + 1000):
        hi = lo + 1000
        want = sorted(set().union(*(Shape(r, sl).cuts(lo, hi) for r, sl in shp)))
        assert want and shared.cuts(lo, hi) == want


@pytest.mark.parametrize("typ", ["int64", "boolean", "float64"])
def test_min_max_finish_unique_is_each_keys_own_extreme(typ):
    """MIN/MAX's finish_unique (one contribution, a key per entry: nothing to merge) gives each
    key's entry, None where the key had no value, as the general merge (finish_groups) does."""
    rng = random.Random(typ)
    for func in ("min", "max"):
        fn = FUNCTIONS[func]
        b = BoundAggregate(fn, "b", typ, None, f"{func}(b)", typ)
        for n in (0, 1, 7, 200):
            kind = {"int64": np.int64, "boolean": np.int8, "float64": np.float64}[typ]
            values = np.array([rng.choice([rng.randint(-9, 9), 0, 1]) for _ in range(n)], dtype=kind)
            present = np.array([rng.random() < 0.8 for _ in range(n)], dtype=bool)
            keys = np.arange(n)
            got = fn.finish_unique(b, (values, present), keys, None).tolist()
            cast = bool if typ == "boolean" else float if typ == "float64" else int
            assert got == [cast(v) if p else None for v, p in zip(values.tolist(), present.tolist())], (func, n)
            general = fn.finish_groups(b, keys, n, [(values, present)], keys, None).tolist()
            assert got == general, (func, n)


def test_members_of_different_answer_forms_answered_together_as_each_alone_and_duckdb():
    """Members of one inner query answered together whose answers differ in form (the bounds shown
    or not, in either order, LIMIT 0 or 1, the hidden row count shown under its own name): each
    form's Answers are made at once, whether some were read by index first or all by iteration,
    and every answer is the member's own (run_plan alone) and DuckDB's over the window it reports
    (the newest window within the sub-windows read, by Definition 10's bounds)."""
    rng = random.Random(31)
    t, n = 1000, 8
    fed = Fed(n, t, 0)
    aggs = "COUNT(*), SUM(b), MAX(b)"
    forms = [("window_start, window_end, ", "GROUP BY window_start"), ("window_end, ", "GROUP BY window_end"),
             ("window_end, window_start, ", "GROUP BY window_start"), ("window_start, ", "GROUP BY window_start LIMIT 0"),
             ("window_start, ", "GROUP BY window_start LIMIT 1"), ("", "")]
    members = []
    for x in range(24):
        shows, tail = forms[x % len(forms)]
        r, s = rng.randint(1, (n - 2) * t), rng.randint(300, 2 * t)
        extra = "" if shows else ", COUNT(*) AS __window_rows__"  # (the bounds' hidden row count, shown: one inner query)
        text = f"SELECT {shows}{aggs}{extra} FROM s [RANGE {r} ms SLIDE {s} ms] {tail}"
        members.append((r, s, shows, tail, plan_query(parse_query(text), fed.s, periodic=True)))
    plans = [m[-1] for m in members]
    shared = SharedSlices(plans)
    assert len({p.window_form for p in plans}) == len(forms), "every form"
    con = duckdb.connect()
    con.execute("CREATE TABLE r (ts BIGINT, src VARCHAR, b BIGINT)")
    compared = inserted = 0
    for step in fed_steps(fed, rng, 40, 25):
        got = run_shared(shared)
        picked = rng.sample(range(len(plans)), step % 5)  # (some read by index before the rest by iteration)
        first = {x: got[x] for x in picked}
        answers = list(got)
        assert all(answers[x] is first[x] for x in picked)
        assert [a.rows for a in answers] == [run_plan(p).rows for p in plans], step
        inserted = insert_new(con, fed, inserted)
        for (r, s, shows, tail, plan), answer in zip(members, answers):
            lo, hi = fed.retained(plan.n_q)
            ks = Shape(r, s).indexes(lo, hi)
            if not len(ks):
                continue
            a, b = ks[-1] * s, ks[-1] * s + r
            count, total, top = con.execute("SELECT count(*), sum(b), max(b) FROM r WHERE ts >= ? AND ts < ?", [a, b]).fetchone()
            bounds = {"window_start": a, "window_end": b}
            shown = tuple(bounds[c] for c in shows.replace(",", " ").split())
            if not shows:  # (the newest window's one row, COUNT(*) 0 where it has none)
                want = [(count, total, top, count)]
            else:
                want = [] if count == 0 or "LIMIT 0" in tail else [(*shown, count, total, top)]
            assert answer.rows == want, (step, r, s, shows, tail)
            compared += 1
    assert compared > 500, compared


def few_windows(rng: random.Random, count: int) -> tuple[Fed, SharedSlices, duckdb.DuckDBPyConnection]:
    """`count` random windows (COUNT(*), SUM, MAX with their bounds) of a 6-sub-window stream of
    1 s sub-windows answered together, and an empty DuckDB table r for the rows fed."""
    t, n = 1000, 6
    fed = Fed(n, t, 0)
    shp = [(rng.randint(1, (n - 2) * t), rng.randint(200, 2 * t)) for _ in range(count)]
    text = "SELECT window_start, window_end, COUNT(*), SUM(b), MAX(b) FROM s [RANGE {} ms SLIDE {} ms] GROUP BY window_start"
    shared = SharedSlices([plan_query(parse_query(text.format(r, s)), fed.s, periodic=True) for r, s in shp])
    con = duckdb.connect()
    con.execute("CREATE TABLE r (ts BIGINT, src VARCHAR, b BIGINT)")
    return fed, shared, con


def compare_with_duckdb(con, rows: list[tuple], step: int) -> int:
    """Each answer row (bounds, COUNT(*), SUM, MAX) is DuckDB's over table r within its bounds; how many."""
    for a, b, count, total, top in rows:
        assert (count, total, top) == con.execute(
            "SELECT count(*), sum(b), max(b) FROM r WHERE ts >= ? AND ts < ?", [a, b]).fetchone(), (step, a, b)
    return len(rows)


def test_sub_windows_already_read_answer_from_the_recent_reads_as_duckdb_does():
    """An execution slide after slide reads each sub-window once (a sub-window read again is the
    same read, from the execution's recent reads, not its kept entries), keeps the reads of a few
    sub-windows only however long it runs, and every answer is DuckDB's over the rows fed within
    the bounds it reports."""
    rng = random.Random(3)
    fed, shared, con = few_windows(rng, 12)
    compared = inserted = 0
    for step in fed_steps(fed, rng, 80, 20):
        subs = list(fed.s.window.youngest(shared.n_q))
        before = [shared.read(sub) for sub in subs[1:]]  # (read by the execution before this slide's)
        got = run_shared(shared)
        assert all(shared.read(sub) is read for sub, read in zip(subs[1:], before)), step
        shared._check()
        inserted = insert_new(con, fed, inserted)
        compared += sum(compare_with_duckdb(con, answer.rows, step) for answer in got)
    assert compared > 300, compared


def test_the_sub_windows_read_answer_alike_in_any_order_as_duckdb_does_and_a_gap_is_refused():
    """An execution's reads come youngest first (a window lists them so), oldest first or in any
    order (a transaction's contributions): each order gives every due window the answer DuckDB
    gives over the rows fed within the bounds it reports, and reads that are not consecutive
    sub-windows (one left out) are refused rather than answered over a gap."""
    rng = random.Random(5)
    fed, shared, con = few_windows(rng, 8)
    compared = inserted = 0
    for step in fed_steps(fed, rng, 40, 20):
        reads = [shared.read(sub) for sub in fed.s.window.youngest(shared.n_q)]
        shuffled = rng.sample(reads, len(reads))
        due = list(enumerate(shared.newest(reads)))
        inserted = insert_new(con, fed, inserted)
        answers = [[a.rows for a in shared.answer(order, due)] for order in (reads, reads[::-1], shuffled)]
        assert answers[0] == answers[1] == answers[2], step
        compared += sum(compare_with_duckdb(con, rows, step) for rows in answers[0])
        if len(reads) > 2:
            with pytest.raises(AssertionError, match="consecutive"):
                shared.answer(reads[:1] + reads[2:], due)
    assert compared > 50, compared


def test_an_edge_on_a_sub_windows_bound_is_not_a_cut_of_it():
    """Window edges that fall exactly on a sub-window's start or end (a SLIDE or RANGE of whole
    sub-windows beside one that is not) cut neither sub-window: the union of cuts of shapes sliding
    at least a sub-window is every shape's own cuts strictly inside each sub-window."""
    s = Stream("s", {"ts": "int64", "b": "int64"}, WindowSpec(subwindows=8, subwindow_ms=1000, clock="event"), 0)
    shp = [(1500, 1000), (2000, 1500), (3000, 2500), (2500, 1000)]
    plans = [plan_query(parse_query(f"SELECT COUNT(*) FROM s [RANGE {r} ms SLIDE {sl} ms]"), s, periodic=True)
             for r, sl in shp]
    shared = SharedSlices(plans)
    on_bounds = 0
    for lo in range(-3000, 8000, 1000):
        hi = lo + 1000
        want = sorted(set().union(*(Shape(r, sl).cuts(lo, hi) for r, sl in shp)))
        assert shared.cuts(lo, hi) == want, lo
        on_bounds += any((hi - r) % sl == 0 or hi % sl == 0 for r, sl in shp)
    assert on_bounds > 5, "edges on the sub-windows' bounds were compared"
