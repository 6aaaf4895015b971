"""A shared reader's combined window kept from one execution to the next (txn/sharing/combined.py,
merge.slide_combined; thesis 8.4.3: an execution costs the intervals it accesses): moved by the
sub-windows that entered and left, it equals combining the window anew (brute force, strictly:
the same keys, dtypes and values) through windows that move by any amount, backwards too,
keys that leave the window and come back, NULL keys, several lengths, contributions replaced;
and in the engine, every shared answer equals the query alone AS OF SLIDE and DuckDB."""
from __future__ import annotations

import functools
import math
import random

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import Phase, given, settings, strategies as st

from windowstore.store import WindowSpec, parse_query, plan_query
from windowstore.store.functions import FUNCTIONS
from windowstore.store.planner.merge import combine_contributions, inverts, negated, uncombine
from windowstore.txn.commands import Append, CreateStream, Register, Slide
from windowstore.txn.engine import Engine, EngineConfig
from windowstore.txn.history import History
from windowstore.txn.sharing.combined import CombinedWindows
from sharing_checks import (alone_and_window, delivered, equal, run_accepted, sharing_consistent, slide_and_step,
                            window_rows)

COLUMNS = (("ts", "int64"), ("k", "string"), ("port", "int64"), ("v", "int64"), ("f", "float64"))
KEEP = 48  # sub-windows the stream keeps


def batch(rng: random.Random, ts: int, n: int, keys: str) -> pa.Table:
    """Rows whose string key is drawn from `keys` (a key left out of a stretch of batches leaves
    the window), some NULL; v sometimes NULL (a key with rows and no value: SUM NULL, COUNT(*) > 0)."""
    return pa.table({"ts": pa.array([ts] * n, pa.int64()),
                     "k": pa.array([None if rng.random() < 0.1 else rng.choice(keys) for _ in range(n)], pa.string()),
                     "port": pa.array([None if rng.random() < 0.05 else rng.randrange(4) for _ in range(n)], pa.int64()),
                     "v": pa.array([None if rng.random() < 0.1 else rng.randint(-2**40, 2**40) for _ in range(n)],
                                   pa.int64()),
                     "f": pa.array([rng.random() for _ in range(n)], pa.float64())})


def keys_at(ts: int) -> str:
    """The keys of slide ts's rows: 'c' and 'd' absent for stretches longer than the windows."""
    return "ab" + ("c" if (ts // 15) % 2 == 0 else "") + ("d" if (ts // 7) % 3 != 1 else "") + "e" * (ts % 5 == 0)


SELECTS = ["k, SUM(v), COUNT(*)", "k, SUM(v)", "k, port, COUNT(v), AVG(v)", "port, AVG(v)", "SUM(v), COUNT(*), AVG(v)",
           "COUNT(v)"]


@functools.lru_cache(maxsize=None)
def contributions_of(select: str, slides: int, seed: int):
    """A plan of `select` over a stream slid `slides` times, and every sub-window's contribution
    by version (read once, as the memo keeps it)."""
    rng = random.Random(seed)
    e = Engine(EngineConfig(policy="ws"))
    e.apply(CreateStream("p", COLUMNS, "ts", WindowSpec(KEEP, 10, None, "manual", 0, (), 4), 0))
    keys = [c.strip() for c in select.split(",") if "(" not in c]
    group = f" GROUP BY {', '.join(keys)}" if keys else ""
    plan = plan_query(parse_query(f"SELECT {select} FROM p [RANGE {KEEP} SUBWINDOWS]{group}"), e.stream("p"))
    by_version = {}
    for ts in range(1, slides + 1):
        e.apply(Append("p", batch(rng, ts, rng.choice([0, 1, 3, 8]), keys_at(ts)), "", None, ts))
        e.apply(Slide("p", ts))
        (sub,) = e.stream("p").window.youngest(1)
        by_version[ts] = plan.read(sub)
    return plan, by_version


@pytest.mark.parametrize("select", SELECTS)
def test_the_readers_of_the_8_5_workload_and_these_are_invertible(select):
    plan, _ = contributions_of(select, 1, 0)
    assert inverts(plan.bound)
    for text in ("SELECT k, MAX(v) FROM p GROUP BY k", "SELECT SUM(f) FROM p", "SELECT QUANTILE(v, 0.5) FROM p"):
        other = plan_query(parse_query(text), plan.stream)
        assert not inverts(other.bound), text


@settings(max_examples=25, deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate))  # (no shrinking: slow)
@given(st.sampled_from(SELECTS), st.integers(0, 3), st.data())
def test_a_slid_window_equals_the_window_combined_anew(select, seed, data):
    """Windows of several lengths moved forward by 0 to beyond their length, sometimes backwards
    (an older snapshot), some executions missed, a contribution sometimes replaced by an equal
    copy (a sub-window replaced: not the one held, so combined anew): each answer is the brute
    force's, and the kept windows' invariants hold after each execution."""
    plan, by_version = contributions_of(select, 120, seed)
    by_version = dict(by_version)  # (replaced below: the cached ones stay)
    b, strings = plan.bound, plan.strings
    windows = CombinedWindows(move_cost=0)  # (every window that can move does: what is tested here)
    latest = data.draw(st.integers(30, 40))
    ends = None
    for _ in range(30):
        step = data.draw(st.sampled_from([0, 1, 1, 1, 2, 3, 5, 40, -1, -2]))
        latest = min(max(latest + step, 30), 120)
        if data.draw(st.integers(0, 9)) == 0:  # a replaced sub-window: an equal contribution, another object
            v = data.draw(st.integers(latest - 20, latest))
            by_version[v] = tuple(x.copy() if isinstance(x, np.ndarray) else x for x in by_version[v]) \
                if b.group_by is not None else tuple(by_version[v])
        if ends is None or data.draw(st.integers(0, 9)) == 0:  # the reader's members' lengths (now and then others)
            ends = sorted(data.draw(st.sets(st.integers(1, 30), min_size=1, max_size=4)))
        versions = list(range(latest, latest - ends[-1], -1))
        values = [by_version[v] for v in versions]
        got = windows.prefixes(("reader", select), b, versions, values, ends, strings)
        for n, g in zip(ends, got):
            assert equal(g, combine_contributions(b, values[:n], strings)), (select, n, latest)
        windows._check()
    assert windows.slid > 0, "some windows moved rather than combined anew"


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(-2**63, 2**63 - 1), st.integers(0, 50)), min_size=1, max_size=6), st.data())
def test_a_sum_minus_parts_is_the_sum_of_the_rest_even_at_the_int64_bounds(parts, data):
    """uncombine (ungrouped) and negate on SUM's and COUNT's partials: exact at any magnitude."""
    plan, _ = contributions_of("SUM(v), COUNT(*)", 1, 0)
    b = plan.bound
    contributions = [((s, c), c) for s, c in parts]
    total = combine_contributions(b, contributions, None)
    k = data.draw(st.integers(0, len(contributions)))
    assert uncombine(b, total, contributions[:k], None) == combine_contributions(b, contributions[k:] or [((0, 0), 0)], None)
    keys = np.arange(len(parts), dtype=np.int64)
    grouped = (np.array([s for s, _ in parts], dtype=np.int64), np.array([c for _, c in parts], dtype=np.int64))
    neg = FUNCTIONS["sum"].negate(b.aggs[0], grouped)
    assert [-s for s, _ in parts] == neg[0].tolist() and [-c for _, c in parts] == neg[1].tolist()
    assert negated(b, ((7, 2), 2)) == ((-7, -2), -2)
    del keys


SHARED = ["SELECT k, SUM(v), COUNT(*) FROM p {window} GROUP BY k",
          "SELECT k, SUM(v) AS t FROM p {window} GROUP BY k ORDER BY t DESC, k LIMIT 2",
          "SELECT k, port, COUNT(v), AVG(v) FROM p {window} GROUP BY k, port",
          "SELECT SUM(v), COUNT(*), AVG(v) FROM p {window}",
          "SELECT k, MAX(v) FROM p {window} GROUP BY k",
          "SELECT COUNT(*) FROM (SELECT k, SUM(v) AS t FROM p {window} GROUP BY k)"]


def duckdb_rows(con, window: pa.Table, text: str) -> list:
    con.register("w", window)
    return con.execute(text.replace("FROM p", "FROM w")).fetchall()


def same_rows(got: list, want: list) -> bool:
    """Equal as row sets (DuckDB's group order is its own); floats (AVG) to DuckDB's rounding."""
    def norm(rows):
        return sorted((tuple((0, "") if v is None else (1, v) for v in r) for r in rows))
    g, w = norm(got), norm(want)
    return len(g) == len(w) and all(
        len(x) == len(y) and all(a == c or (isinstance(a[1], float) and math.isclose(a[1], c[1], rel_tol=1e-12))
                                 for a, c in zip(x, y)) for x, y in zip(g, w))


FAST = {("aggressive", "ws"), ("conservative", "lws"), ("hybrid", "ttu"), ("hybrid-lp", "lws"), ("aggressive", "ttu-rescan")}


@pytest.mark.parametrize("mode, policy", [
    (m, p) if (m, p) in FAST else pytest.param(m, p, marks=pytest.mark.long)  # (make test keeps to its time)
    for p in ("ws", "lws", "ttu", "ttu-rescan") for m in ("aggressive", "conservative", "hybrid", "hybrid-lp")])
def test_shared_answers_from_slid_windows_equal_the_query_alone_and_duckdb(mode, policy):
    """Many consecutive executions of readers with members of different lengths (one reader's
    windows of several lengths), keys that leave the window and come back, NULL keys and values,
    slides during executions (under lws: aborts, executions run again): each answer equals
    DuckDB over the window's rows and, while its window is in the stream, the query alone AS OF
    SLIDE its slide; the history checker accepts the history; kept windows moved."""
    rng = random.Random(f"{mode}/{policy}")
    n = 12
    history = History(None, keep=10_000_000)
    e = Engine(EngineConfig(policy=policy, sharing=mode), history)
    e.apply(CreateStream("p", COLUMNS, "ts", WindowSpec(n, 10, None, "manual", 0, (), 4), 0))
    e.sched.sharing.windows = CombinedWindows(move_cost=0)  # every window that can move does (what is tested)
    got: list = []
    e.on_answer = lambda qid, r: got.append((qid, r))
    templates = {}
    for i in range(16):
        tmpl = SHARED[i % len(SHARED)]
        length = n if i % 2 else rng.randint(2, n)  # (the whole window: a slide during its execution conflicts)
        e.apply(Register(f"Q{i}", tmpl.format(window=f"[RANGE {length} SUBWINDOWS SLIDE {rng.randint(1, 3)} SUBWINDOWS]"),
                         0, 0))
        templates[f"Q{i}"] = (tmpl, length)
    kept: dict[int, pa.Table] = {}
    answered = {qid: 0 for qid in templates}
    checked = alone = 0
    con = duckdb.connect()
    for ts in range(1, 45):
        rows = batch(rng, ts, rng.randint(0, 6), keys_at(ts))
        slide_and_step(e, rows, ts, kept, rng.randint(0, 30), rng.random() < 0.7)
        for qid, r, tmpl, length in delivered(got, answered, templates):
            if (span := e.stream("p").window.answerable(length)) and span[0] <= r.slide <= span[1]:
                window = alone_and_window(e, r, tmpl, length, kept, batch(rng, 0, 0, "a"), (mode, policy, qid, r.slide, tmpl))
                alone += 1
            else:  # (answered after its window left the stream: DuckDB's check only)
                window = window_rows(r, length, kept, batch(rng, 0, 0, "a"))
            assert same_rows(r.answer.rows, duckdb_rows(con, window, tmpl.format(window=""))), (mode, policy, qid, r.slide)
            checked += 1
        got.clear()
    e.sched.run_until_idle()
    run_accepted(answered, history, policy)
    sharing_consistent(e, checked, mode, policy)
    assert alone > checked // 2, "most answers checked against the query alone too"
    if policy == "lws":  # (ws never aborts; ttu reads the sub-window to expire next last, ttu-rescan rescans)
        assert e.sched.sharing.stats()["aborts"] > 0, "slides aborted shared executions, which ran again"
    windows = e.sched.sharing.windows
    if mode != "hybrid-lp":  # (late-pending runs merge due runs: their windows may move further than they hold)
        assert windows.slid > 0 and windows.slid_contributions > 0, "readers' windows moved by what entered and left"


def test_a_reader_whose_windows_moving_would_not_pay_combines_anew_and_keeps_none():
    """Many lengths with keys against the window's rows: combining anew is cheaper (MOVE_COST,
    MOVE_FIXED), so the reader's windows are combined anew and not kept; an ungrouped reader's
    window of 30 contributions: it moves."""
    plan, by_version = contributions_of("k, SUM(v), COUNT(*)", 60, 1)
    b, strings = plan.bound, plan.strings
    versions = list(range(40, 10, -1))
    many_lengths = list(range(1, 31))
    windows = CombinedWindows()
    for latest in (40, 41, 42):
        versions = list(range(latest, latest - 30, -1))
        got = windows.prefixes("r", b, versions, [by_version[v] for v in versions], many_lengths, strings)
        assert all(equal(g, combine_contributions(b, [by_version[v] for v in versions[:n]], strings))
                   for n, g in zip(many_lengths, got))
    assert windows.slid == 0 and len(windows) == 0, "30 lengths of a few keys over 30 small sub-windows: anew"
    plan, by_version = contributions_of("SUM(v), COUNT(*)", 60, 1)
    for latest in (40, 41, 42):
        versions = list(range(latest, latest - 30, -1))
        got = windows.prefixes("one length", plan.bound, versions, [by_version[v] for v in versions], [30], strings)
        assert equal(got[0], combine_contributions(plan.bound, [by_version[v] for v in versions], strings))
    assert windows.slid == 2, "one length of 30 contributions: moved by a sub-window each way"
    windows._check()


def test_the_cost_model_counts_a_moving_window_by_what_entered_and_left():
    """CostModel(slide=True): an invertible reader that last ran k intervals ago combines 2k
    intervals (at most its window's n - 1); a reader that is not invertible, or a model without
    `slide`, combines its window."""
    from windowstore.txn.sharing.cost import CostModel
    from windowstore.txn.sharing.rules import Member, Synopsis

    def member(inverts: bool) -> Member:
        return Member("q", "s", "k", Synopsis.BASIC, 50, 1, combines=True, inverts=inverts, reads=("r", inverts))
    sliding = CostModel(access=1.0, combine=1.0, memo=True, slide=True, cover=None)
    plain = CostModel(access=1.0, combine=1.0, memo=True, cover=None)
    for k, want in ((1, 2), (3, 6), (30, 49), (80, 49)):
        fresh = {("r", True): k}
        assert sliding.reads([type("O", (), {"leader": member(True), "length": 50})()], fresh) == min(k, 50) + want
        assert plain.reads([type("O", (), {"leader": member(True), "length": 50})()], fresh) == min(k, 50) + 49
        assert sliding.reads([type("O", (), {"leader": member(False), "length": 50})()], {("r", False): k}) \
            == min(k, 50) + 49
    assert sliding.reads([type("O", (), {"leader": member(True), "length": 50})()], None) == 50 + 49, "never ran"
