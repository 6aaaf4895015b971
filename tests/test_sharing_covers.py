"""Predicate covers in shared execution (txn/sharing/covers.py, thesis 8.3.3: SS4, CS6, CS7).

- the sets: a WHERE's set (where_set) holds exactly the values (and nulls) the store's own
  Comparison masks keep, over a small domain, for random WHEREs (the oracle: predicates.py);
- every derivation derive() makes is a true identity of sets over that domain (a disjoint cover,
  a cover for MIN/MAX, a supercover minus a disjoint cover);
- the differential test: random dashboards of the same aggregates under random filters over one
  column, registered with sharing on, under every scheduler and policy; every answer a member
  receives for slide k equals the same query run alone AS OF SLIDE k and DuckDB over the rows of
  that window; the history checker accepts the history; covers were used and counted.
"""
from __future__ import annotations

import random

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import examples

from windowstore.store import WindowSpec, parse_query, plan_query
from windowstore.store.predicates import Comparison
from windowstore.txn.commands import Append, CreateStream, Register, Slide
from windowstore.txn.engine import Engine, EngineConfig
from windowstore.txn.history import History
from windowstore.txn.sharing import SharingMode
from windowstore.txn.sharing.covers import INVERTIBLE, derive, where_set
from sharing_checks import history_accepted

DOMAIN = list(range(-4, 14))
OPS = ["=", "!=", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null"]


def comparison(op: str, values: list) -> Comparison:
    if op in ("in", "not in"):
        return Comparison("v", "int64", op, np.array(sorted(set(values)), dtype=np.int64))
    return Comparison("v", "int64", op, None if "null" in op else values[0])


predicates = st.builds(comparison, st.sampled_from(OPS), st.lists(st.integers(-3, 12), min_size=1, max_size=4))
wheres = st.lists(st.lists(predicates, min_size=1, max_size=3).map(tuple), min_size=0, max_size=3).map(tuple)


def kept(where) -> frozenset:
    """The oracle: the values (None: null) the store's masks keep, over DOMAIN."""
    col = np.array([0 if x is None else x for x in DOMAIN + [None]], dtype=np.int64)
    valid = np.array([x is not None for x in DOMAIN + [None]])
    if not where:
        return frozenset(DOMAIN + [None])
    out = np.zeros(len(col), dtype=bool)
    for conj in where:
        m = np.ones(len(col), dtype=bool)
        for p in conj:
            m &= p.mask(col, None, valid)
        out |= m
    return frozenset(x for x, k in zip(DOMAIN + [None], out) if k)


def members(s) -> frozenset:
    return frozenset(x for x in DOMAIN if s.contains(x, True)) | ({None} if s.null else frozenset())


@settings(deadline=None, max_examples=examples(100))
@given(wheres)
def test_a_where_set_holds_what_the_masks_keep(where):
    got = where_set(where)
    assert got is not None
    column, s, integer = got
    assert integer and column in (None, "v")
    assert members(s) == kept(where)


FLOATS = [-2.5, -1.0, -0.0, 0.5, 1.0, 2.0, 2.5, 7.25, float("inf")]


def float_comparison(op: str, values: list) -> Comparison:
    if op in ("in", "not in"):
        return Comparison("f", "float64", op, np.array(sorted(set(values)), dtype=np.float64))
    return Comparison("f", "float64", op, None if "null" in op else values[0])


float_wheres = st.lists(st.lists(st.builds(float_comparison, st.sampled_from(OPS),
                                           st.lists(st.sampled_from(FLOATS + [0.0, 1.5]), min_size=1, max_size=3)),
                                 min_size=1, max_size=3).map(tuple), min_size=1, max_size=3).map(tuple)


@settings(deadline=None, max_examples=examples(100))
@given(float_wheres)
def test_a_float_where_set_holds_what_the_masks_keep(where):
    """Over float64 the sets are not integer ranges: v < 1.0 and v > 1.0 leave 1.0 out, -0.0 is 0.0."""
    column, s, integer = where_set(where)
    assert column == "f" and not integer
    col = np.array(FLOATS + [0.0], dtype=np.float64)
    valid = np.array([True] * len(FLOATS) + [False])
    out = np.zeros(len(col), dtype=bool)
    for conj in where:
        m = np.ones(len(col), dtype=bool)
        for p in conj:
            m &= p.mask(col, None, valid)
        out |= m
    assert [s.contains(x, False) for x in FLOATS] + [s.null] == out.tolist()


class _Fn:
    def __init__(self, name):
        self.name = name


class _Agg:
    def __init__(self, name):
        self.fn = _Fn(name)


class _Bound:
    """What derive() reads of a bound query."""

    def __init__(self, where, aggs, grouped=False):
        from windowstore.store.query import Query
        self.where, self.aggs = where, [_Agg(a) for a in aggs]
        self.group_by = "k" if grouped else None
        self.projection, self.approximate, self.hop, self.temporal = [], False, None, None
        self.query = Query(stream="p", items=(), where=())


@settings(deadline=None, max_examples=examples(200))
@given(st.lists(wheres, min_size=2, max_size=6), st.sampled_from([("count",), ("sum", "count"), ("min", "max"),
                                                                  ("avg",), ("max",)]), st.booleans())
def test_every_derivation_is_an_identity_of_sets(family, aggs, grouped):
    bounds = [_Bound(w, aggs, grouped) for w in family]
    sets = [kept(w) for w in family]
    done = derive(bounds, [True] * len(bounds))
    targets = [d.target for d in done]
    assert len(set(targets)) == len(targets)
    pieces = {i for d in done for i in d.plus + d.minus}
    assert not pieces & set(targets), "a piece is read, never derived"
    for d in done:
        def values(i):  # under no_nulls the null rows are left out of every set
            return sets[i] - {None} if d.no_nulls else sets[i]
        target = values(d.target)
        plus = [values(i) for i in d.plus]
        if d.minus:
            assert set(aggs) <= INVERTIBLE and not grouped and len(plus) == 1
            minus = [values(i) for i in d.minus]
            assert sum(len(m) for m in minus) == len(frozenset().union(*minus)), "disjoint"
            assert all(m <= plus[0] for m in minus) and plus[0] - frozenset().union(*minus) == target
        else:
            assert frozenset().union(*plus) == target
            if sum(len(p) for p in plus) != len(target):
                assert set(aggs) <= {"min", "max"}, "overlapping pieces only for MIN/MAX"


def test_the_brief_example_is_a_disjoint_cover_and_its_complement_a_subtraction():
    lo = ((Comparison("port", "int64", "<", 1024),),)
    hi = ((Comparison("port", "int64", ">=", 1024),),)
    d = derive([_Bound(lo, ["count"]), _Bound(hi, ["count"]), _Bound((), ["count"])], [True] * 3)
    assert [(x.target, x.plus, x.minus, x.no_nulls) for x in d] == [(2, (0, 1), (), "port")]
    d = derive([_Bound(lo, ["count"]), _Bound((), ["count"])], [True] * 2)
    assert d == []  # all minus (port < 1024) is port >= 1024 OR port IS NULL: nothing registered
    mid = ((Comparison("port", "int64", ">=", 80), Comparison("port", "int64", "<", 1024)),)
    low = ((Comparison("port", "int64", "<", 80),),)
    d = derive([_Bound(lo, ["sum"]), _Bound(low, ["sum"]), _Bound(mid, ["sum"])], [True] * 3)
    assert [(x.target, x.plus, x.minus) for x in d] == [(0, (1, 2), ())]
    d = derive([_Bound(lo, ["max"], True), _Bound(low, ["max"], True), _Bound(mid, ["max"], True)], [True] * 3)
    assert [(x.target, x.plus) for x in d] == [(0, (1, 2))]
    # port < 1024 is a piece of IS NOT NULL's cover, so read: then one of the others is it minus the
    # other (CS7) for SUM, but not for MAX, nor per key
    sets = [((Comparison("port", "int64", "is not null", None),),), lo, hi, low, mid]
    d = derive([_Bound(w, ["sum"]) for w in sets], [True] * 5)
    assert [(x.target, x.plus, x.minus, x.rule) for x in d] == [(0, (1, 2), (), "CS6 disjoint cover"),
                                                               (3, (1,), (4,), "CS7 supercover minus a cover")]
    assert [x.target for x in derive([_Bound(w, ["max"]) for w in sets], [True] * 5)] == [0]
    assert [x.target for x in derive([_Bound(w, ["sum"], True) for w in sets], [True] * 5)] == [0]
    assert derive([_Bound(w, ["sum"]) for w in sets], [False] * 5) == []  # contributions that do not combine


# -- the differential test through the engine ---------------------------------------------------
COLUMNS = (("ts", "int64"), ("k", "string"), ("v", "int64"), ("g", "string"))
N = 6
V_FILTERS = ["", "WHERE v < 5", "WHERE v >= 5", "WHERE v < 0", "WHERE v >= 0 AND v < 5", "WHERE v IN (1, 2, 3)",
             "WHERE v NOT IN (1, 2, 3)", "WHERE v = 4", "WHERE v <> 4", "WHERE v IS NULL", "WHERE v IS NOT NULL",
             "WHERE v > 10 OR v < 2", "WHERE v >= 2 AND v <= 10", "WHERE v >= 0", "WHERE v < 0 OR v >= 5"]
K_FILTERS = ["", "WHERE k = 'a'", "WHERE k <> 'a'", "WHERE k IN ('a', 'b')", "WHERE k < 'c'", "WHERE k >= 'c'",
             "WHERE k NOT IN ('a', 'b')"]
SELECTS = [("COUNT(*)", ""), ("SUM(v), COUNT(*)", ""), ("AVG(v), COUNT(v)", ""), ("MIN(v), MAX(v)", ""),
           ("g, COUNT(*)", "GROUP BY g"), ("g, SUM(v), MAX(v)", "GROUP BY g"), ("g, k, MIN(v)", "GROUP BY g, k")]


def ranges(rng: random.Random) -> list[str]:
    """Filters made of consecutive pieces of v's values cut at a few points (many covers), with
    the null rows and every row."""
    cuts = sorted(rng.sample(range(-2, 12), rng.randint(1, 4)))
    bounds = [None, *cuts, None]
    out = ["", "WHERE v IS NULL", "WHERE v IS NOT NULL"]
    for i in range(len(bounds) - 1):
        for j in range(i + 1, len(bounds)):
            lo, hi = bounds[i], bounds[j]
            parts = ([f"v >= {lo}"] if lo is not None else []) + ([f"v < {hi}"] if hi is not None else [])
            out.append("WHERE " + " AND ".join(parts) if parts else "WHERE v IS NOT NULL")
    return sorted(set(out))


def dashboard(rng: random.Random) -> list[tuple[str, str, str]]:
    """(registered text, AS OF template, DuckDB SQL over table t): one or two selects, each under
    several filters over one column."""
    out = []
    for _ in range(rng.randint(1, 2)):
        select, group = rng.choice(SELECTS)
        pool = rng.choice([V_FILTERS, K_FILTERS, ranges(rng)])
        for where in rng.sample(pool, rng.randint(2, min(7, len(pool)))):
            length = rng.randint(1, N)
            slide = rng.randint(1, max(1, length // 2))
            order = f"ORDER BY {group[9:]}" if group else ""
            tmpl = f"SELECT {select} FROM p {{window}} {where} {group}"
            text = tmpl.format(window=f"[RANGE {length} SUBWINDOWS SLIDE {slide} SUBWINDOWS]")
            asof = tmpl.replace("{window}", f"[RANGE {length} SUBWINDOWS] AS OF SLIDE {{k}}")
            sql = (f"SELECT {select} FROM t {where.replace('<>', '!=')} {group} {order}", length)
            out.append((text, asof, sql))
    return out


def rows(rng: random.Random, ts: int, n: int, nulls: bool) -> list[tuple]:
    return [(ts, rng.choice("abcd"), None if nulls and rng.random() < 0.2 else rng.randint(-3, 12), rng.choice("xy"))
            for _ in range(n)]


def table(rs: list[tuple]) -> pa.Table:
    cols = list(zip(*rs)) if rs else [[], [], [], []]
    return pa.table({"ts": pa.array(cols[0], pa.int64()), "k": pa.array(cols[1], pa.string()),
                     "v": pa.array(cols[2], pa.int64()), "g": pa.array(cols[3], pa.string())})


def same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and abs(a - b) <= 1e-9 * max(1.0, abs(b))
    return a == b


def fixed(select: str, wheres: list[str], rng: random.Random) -> list[tuple[str, str, tuple]]:
    """A dashboard of one ungrouped select under the given filters, at random lengths."""
    out = []
    for where in wheres:
        length = rng.randint(1, N)
        tmpl = f"SELECT {select} FROM p {{window}} {where}"
        out.append((tmpl.format(window=f"[RANGE {length} SUBWINDOWS SLIDE 1 SUBWINDOWS]"),
                    tmpl.replace("{window}", f"[RANGE {length} SUBWINDOWS] AS OF SLIDE {{k}}"),
                    (f"SELECT {select} FROM t {where}", length)))
    return out


def run(mode: str, policy: str, seed: int, slides: int = 14, board: list | None = None):
    rng = random.Random(seed)
    history = History(None, keep=10_000_000)
    e = Engine(EngineConfig(policy=policy, sharing=mode), history)
    e.apply(CreateStream("p", COLUMNS, "ts", WindowSpec(N, 10, None, "manual", 0, ("k",), 4), 0))
    got: list = []
    e.on_answer = lambda qid, r: got.append((qid, r))
    board = board or dashboard(rng)
    for i, (text, _, _) in enumerate(board):
        e.apply(Register(f"Q{i}", text, 0, 0))
    nulls = rng.random() < 0.5
    closed: list[list[tuple]] = []  # the rows of the sub-window each slide closed
    pending: list[tuple] = []
    con = duckdb.connect()
    checked = ts = 0
    for _ in range(slides):
        for _ in range(rng.randint(0, 3)):
            ts += 1
            batch = rows(rng, ts, rng.randint(0, 5), nulls)
            pending += batch
            e.apply(Append("p", table(batch), "", None, ts))
            if rng.random() < 0.5:  # slides interleave with executions: conflicts, aborts, restarts
                e.sched.step()
        e.apply(Slide("p", ts))
        closed.append(pending)
        pending = []
        for _ in range(rng.randint(0, 4)):
            e.sched.step()
        e.sched.run_until_idle()
        e._check()
        for qid, r in got:
            if r.slide < 0:  # answered before the first slide: an empty window
                continue
            _, asof, (sql, length) = board[int(qid[1:])]
            alone = plan_query(parse_query(asof.format(k=r.slide)), e.stream("p"))
            txn = e.sched.submit(alone)
            e.sched.run_until_idle()
            assert txn.result is not None, (qid, txn.error)
            assert r.answer.rows == txn.result.answer.rows, (mode, policy, qid, r.slide, asof)
            window = [row for sub in closed[max(0, r.slide - length + 1): r.slide + 1] for row in sub]
            con.register("t", table(window))
            expected = con.execute(sql).fetchall()
            assert len(expected) == len(r.answer.rows), (qid, sql, expected, r.answer.rows)
            for a, b in zip(r.answer.rows, expected):
                assert all(same(x, y) for x, y in zip(a, b)), (qid, r.slide, sql, a, b)
            checked += 1
        got.clear()
    history_accepted(history, policy)
    return e, checked


@pytest.mark.parametrize("policy", ["lws", "ttu", "ttu-rescan", "ws"])
@pytest.mark.parametrize("mode", [m.value for m in SharingMode])
def test_answers_under_covers_equal_the_query_alone_and_duckdb(mode, policy):
    saved = 0
    for seed in range(3):
        e, checked = run(mode, policy, seed)
        assert checked > 0
        if mode != "none":
            s = e.sched.sharing.stats()
            saved += s["cover_executions_saved"]
            assert s["cover_reads_saved"] >= s["cover_executions_saved"]
            if policy == "ttu-rescan":
                assert e.sched.by_class["periodic"].aborts == 0 and s["aborts"] == 0
            e.sched.sharing._check()
    if mode != "none":
        assert saved > 0, "some dashboard used a cover"


@pytest.mark.parametrize("policy", ["lws", "ttu-rescan", "ws"])
@pytest.mark.parametrize("mode", ["conservative", "hybrid-lp"])
def test_a_supercover_minus_a_cover_answers_as_the_query_alone(mode, policy, monkeypatch):
    """CS7 (rare in random dashboards: a supercover is usually derived itself): v < 5 is a piece
    of IS NOT NULL's cover, so read; v < 0 is then v < 5 minus (v >= 0 AND v < 5)."""
    from windowstore.txn.sharing import runtime
    rules: list = []
    real = runtime.SharedPlan._derive
    monkeypatch.setattr(runtime.SharedPlan, "_derive", lambda self, d, sub, vals: rules.append(d.rule)
                        or real(self, d, sub, vals))
    wheres = ["WHERE v IS NOT NULL", "WHERE v < 5", "WHERE v >= 5", "WHERE v < 0", "WHERE v >= 0 AND v < 5"]
    for seed in range(2):
        board = fixed("SUM(v), COUNT(*), AVG(v)", wheres, random.Random(seed))
        e, checked = run(mode, policy, seed, board=board)
        assert checked > 0
    assert "CS7 supercover minus a cover" in rules and "CS6 disjoint cover" in rules
