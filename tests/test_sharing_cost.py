"""What issue 30's round 21 changed in a joint execution's cost (bench/sharing_cost.py measures it):
a quantile over per-key sums (8.5's queries) selected from the sums' column, not from decoded and
sorted rows; readers of the same per-key counters (a top-k and quantiles over them) sharing one
read and one combine. Checked against DuckDB over the window's rows and against the query run
alone AS OF its slide (an independent path: one query, its own transaction)."""
from __future__ import annotations

import random
import re
from decimal import Decimal

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, strategies as st

from windowstore.store import WindowSpec, parse_query, plan_query
from windowstore.store.functions import FUNCTIONS
from windowstore.txn.commands import Append, CreateStream, Register, Slide
from windowstore.txn.engine import Engine, EngineConfig
from windowstore.txn.history import History
from differential import QUANTILE_FRACTIONS, quantile_sql
from sharing_checks import alone_and_window, delivered, equal, run_accepted, sharing_consistent, slide_and_step

COLUMNS = (("ts", "int64"), ("src", "string"), ("port", "int64"), ("bytes", "int64"))
N = 12  # sub-windows in the window


class _Bound:  # what Quantile.over and over_column read of a bound aggregate
    def __init__(self, q: str):
        self.q = Decimal(q)


@given(st.lists(st.integers(-(2**62), 2**62), max_size=60), st.sampled_from(QUANTILE_FRACTIONS), st.randoms())
def test_a_quantile_over_an_integer_column_is_over_of_its_values_in_any_order(values, q, rnd):
    fn = FUNCTIONS["quantile"]
    b = _Bound(q)
    shuffled = list(values)
    rnd.shuffle(shuffled)
    got = fn.over_column(b, np.array(shuffled, dtype=np.int64))
    assert got == fn.over(b, values)
    assert type(got) is type(fn.over(b, values))  # a Python int (or None), as the rows give


def test_a_quantile_over_a_float_or_object_column_is_left_to_the_rows():
    fn = FUNCTIONS["quantile"]
    assert fn.over_column(_Bound("0.5"), np.array([1.0, 2.0])) is NotImplemented
    assert fn.over_column(_Bound("0.5"), np.array([1, None], dtype=object)) is NotImplemented


def batch(rng: random.Random, ts: int, n: int) -> pa.Table:
    return pa.table({"ts": pa.array([ts] * n, pa.int64()),
                     "src": pa.array([f"s{rng.randrange(30)}" for _ in range(n)], pa.string()),
                     "port": pa.array([rng.randrange(8) for _ in range(n)], pa.int64()),
                     "bytes": pa.array([rng.randint(-50, 1500) for _ in range(n)], pa.int64())})


KEYS = ["src", "port", "src, port"]


def template(rng: random.Random, keys: str) -> str:
    """8.5's queries over the per-key bandwidth (bench/sharing_real.panels), `{window}` left open;
    some with a HAVING or an inner LIMIT (the rows' path), some quantiles of several fractions."""
    per_key = f"SELECT {keys}, SUM(bytes) AS b FROM p {{window}} GROUP BY {keys}"
    kind = rng.random()
    if kind < 0.4:
        return f"{per_key} ORDER BY b DESC, {keys} LIMIT {rng.randint(1, 5)}"
    q = rng.choice(["0.5", "0.9", "0.99", "0", "1", "0.25"])
    if kind < 0.85:
        return f"SELECT QUANTILE(b, {q}) FROM ({per_key})"
    if kind < 0.93:
        return f"SELECT QUANTILE(b, {q}), COUNT(*), MAX(b) FROM ({per_key} HAVING SUM(bytes) > 100)"
    return f"SELECT QUANTILE(b, {q}) FROM ({per_key} ORDER BY b DESC LIMIT 4)"


def duckdb_rows(con, window: pa.Table, text: str) -> list[tuple]:
    """The query's answer by DuckDB over the window's rows, QUANTILE as the store's discrete
    quantile (tests/differential.quantile_sql)."""
    con.register("w", window)
    m = re.match(r"SELECT QUANTILE\(b, ([0-9.]+)\)(.*) FROM \((.*)\)$", text)
    if m:
        q, more, inner = m.groups()
        return con.execute(f"SELECT {quantile_sql('b', q)}{more} FROM ({inner.replace('FROM p', 'FROM w')})").fetchall()
    return con.execute(text.replace("FROM p", "FROM w")).fetchall()


@pytest.mark.parametrize("mode", ["aggressive", "conservative", "hybrid", "hybrid-lp"])
@pytest.mark.parametrize("policy", ["ws", "ttu"])
def test_shared_top_k_and_quantiles_over_per_key_sums_equal_the_query_alone_and_duckdb(mode, policy):
    rng = random.Random(f"{mode}/{policy}")
    history = History(None, keep=10_000_000)
    e = Engine(EngineConfig(policy=policy, sharing=mode), history)
    e.apply(CreateStream("p", COLUMNS, "ts", WindowSpec(N, 10, None, "manual", 0, (), 4), 0))
    got: list = []
    e.on_answer = lambda qid, r: got.append((qid, r))
    templates = {}
    for i in range(14):
        keys = KEYS[i % len(KEYS)]
        tmpl = template(rng, keys)
        length = rng.randint(1, N)
        e.apply(Register(f"Q{i}", tmpl.format(window=f"[RANGE {length} SUBWINDOWS SLIDE {rng.randint(1, 4)} SUBWINDOWS]"),
                         0, 0))
        templates[f"Q{i}"] = (tmpl, length)
    kept: dict[int, pa.Table] = {}  # slide -> its sub-window's rows
    answered = {qid: 0 for qid in templates}
    checked = 0
    con = duckdb.connect()
    ts = 0
    for j in range(24):
        ts += 1
        rows = batch(rng, ts, rng.randint(0, 25))
        slide_and_step(e, rows, ts, kept, rng.randint(0, 40), True)
        for qid, r, tmpl, length in delivered(got, answered, templates):
            window = alone_and_window(e, r, tmpl, length, kept, batch(rng, 0, 0), (mode, policy, qid, r.slide, tmpl))
            assert r.answer.rows == duckdb_rows(con, window, tmpl.format(window="")), (mode, policy, qid, r.slide, tmpl)
            checked += 1
        got.clear()
    run_accepted(answered, history, policy)
    sharing_consistent(e, checked, mode, policy)
    assert e.sched.sharing.stats()["executions"] > 0, "the queries were answered by joint executions"


@pytest.mark.parametrize("select", ["src, SUM(bytes), COUNT(*), MIN(bytes), MAX(port), AVG(bytes)",
                                    "port, SUM(bytes)", "src, port, MAX(bytes), COUNT(bytes)", "SUM(bytes), MIN(src)"])
def test_combining_every_prefix_at_once_equals_combining_each_prefix(select):
    from windowstore.store.planner.merge import combine_contributions, combine_prefixes
    rng = random.Random(select)
    e = Engine(EngineConfig(policy="ws"))
    e.apply(CreateStream("p", COLUMNS, "ts", WindowSpec(N, 10, None, "manual", 0, (), 4), 0))
    for ts in range(1, N + 1):
        e.apply(Append("p", batch(rng, ts, rng.choice([0, 1, 5, 20])), "", None, ts))
        e.apply(Slide("p", ts))
    keys = [c.strip() for c in select.split(",") if "(" not in c]
    group = f" GROUP BY {', '.join(keys)}" if keys else ""
    plan = plan_query(parse_query(f"SELECT {select} FROM p [RANGE {N} SUBWINDOWS]{group}"), e.stream("p"))
    contributions = [plan.read(sub) for sub in reversed(list(e.stream("p").window.youngest(N)))]  # oldest first: any order combines alike
    for _ in range(20):
        ends = sorted(rng.sample(range(1, N + 1), rng.randint(1, 6)))
        got = combine_prefixes(plan.bound, contributions, ends, plan.strings)
        for n, c in zip(ends, got):
            want = combine_contributions(plan.bound, contributions[:n], plan.strings)
            assert equal(c, want), (n, ends)


def test_a_prefix_keeps_its_own_key_type_when_only_an_older_sub_window_has_a_null_key():
    """An integer key NULL only in the oldest sub-window: the shorter prefixes' keys are integers,
    as combining each prefix alone gives them, not the longest prefix's objects."""
    from windowstore.store.planner.merge import combine_contributions, combine_prefixes
    rng = random.Random(7)
    e = Engine(EngineConfig(policy="ws"))
    e.apply(CreateStream("p", COLUMNS, "ts", WindowSpec(N, 10, None, "manual", 0, (), 4), 0))
    for ts in range(1, N + 1):
        rows = batch(rng, ts, 5)
        if ts == 1:  # the oldest
            rows = rows.set_column(2, "port", pa.array([None, 1, 2, 3, 4], pa.int64()))
        e.apply(Append("p", rows, "", None, ts))
        e.apply(Slide("p", ts))
    plan = plan_query(parse_query(f"SELECT port, SUM(bytes) FROM p [RANGE {N} SUBWINDOWS] GROUP BY port"), e.stream("p"))
    contributions = [plan.read(sub) for sub in e.stream("p").window.youngest(N)]  # youngest first, as a shared reader scans
    ends = [1, 3, N]
    for n, c in zip(ends, combine_prefixes(plan.bound, contributions, ends, plan.strings)):
        want = combine_contributions(plan.bound, contributions[:n], plan.strings)
        assert equal(c, want), n
        assert c[0].dtype == want[0].dtype, (n, c[0].dtype, want[0].dtype)
    assert combine_prefixes(plan.bound, contributions, [N], plan.strings)[0][0].dtype == object, "the NULL key is there"


def test_a_top_k_and_quantiles_over_the_same_per_key_sums_read_alike():
    from windowstore.store.memo import contribution_key
    e = Engine(EngineConfig(policy="ws"))
    e.apply(CreateStream("p", COLUMNS, "ts", WindowSpec(N, 10, None, "manual", 0, (), 4), 0))
    per_key = "SELECT src, SUM(bytes) AS b FROM p [RANGE {} SUBWINDOWS] GROUP BY src"

    def key(text: str):
        return contribution_key(plan_query(parse_query(text), e.stream("p")))
    same = {key(per_key.format(3) + " ORDER BY b DESC, src LIMIT 10"), key(f"SELECT QUANTILE(b, 0.5) FROM ({per_key.format(5)})"),
            key(f"SELECT QUANTILE(b, 0.99), COUNT(*) FROM ({per_key.format(7)})"), key(per_key.format(2))}
    assert len(same) == 1
    assert key(per_key.format(3) + " HAVING COUNT(*) > 2") not in same, "a hidden aggregate is read too"
    assert key(per_key.format(3).replace("SUM", "MAX")) not in same
    assert key(per_key.format(3).replace("GROUP BY src", "WHERE port > 2 GROUP BY src")) not in same


def test_the_cost_bench_accounts_for_every_part_of_a_joint_execution():
    """bench/sharing_cost.py on a small group: joint executions answering every member
    (aggressive), each new sub-window read once, and no part timed inside another (what is left
    of an execution beside the parts is not negative)."""
    from bench import sharing_cost
    r = sharing_cost.run(group=3, scale=1, slides=4, per_group=5)
    assert r["executions"] >= 1 and r["answers_per_execution"] == r["members"] == 5
    reads = r["read_fresh_per_execution"] * r["executions"]
    assert reads == 4, "each new sub-window read once: the top-k lists and quantiles of the group share one reader"
    assert all(v >= 0 for v in r["shares_of_execution"].values()), "no part counted twice (the rest is not negative)"
