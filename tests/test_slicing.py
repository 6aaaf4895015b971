"""Windows whose RANGE or SLIDE cut sub-windows (store/slicing.py), against two independent
oracles: Definition 10 of seed 003 (temporal bounds alpha(k) = k s, beta(k) = k s + r) evaluated
directly in Python over the rows the stream accepted, and DuckDB over those rows with the window
bounds each answer reports. Rows arrive out of order within the allowed lateness, with slides in
between, and some too late (refused by the stream, so by neither oracle either)."""
from __future__ import annotations

import random

import duckdb
import pytest
from hypothesis import given, settings, strategies as st

from conftest import examples

from windowstore.store import QueryError, Stream, WindowSpec, parse_query, plan_query, run_plan
from windowstore.store.exact import INT64_MAX, INT64_MIN
from windowstore.store.slicing import RunStore, Shape, kept_slices

SCHEMA = {"ts": "int64", "src": "string", "b": "int64"}


class Fed:
    """An event-time stream fed in batches, out of order within its allowed lateness (and a few
    rows beyond it), sliding whenever slides are due; `accepted` are the rows it kept, found
    without asking the store: a row is late when its slot is one already cut."""

    def __init__(self, n: int, t: int, lateness: int, group_by=()):
        self.t = t
        self.s = Stream("s", SCHEMA, WindowSpec(subwindows=n, subwindow_ms=t, clock="event",
                                                allowed_lateness_ms=lateness, group_by=group_by), 0)
        self.accepted: list[tuple] = []
        self.base: int | None = None

    def feed(self, batch: list[tuple]) -> None:
        if not batch:
            return
        w = self.s.window
        if self.base is None:
            self.base = min(r[0] for r in batch) // self.t
        first_open = (self.base + w.cut_through + 1) * self.t
        self.accepted += [r for r in batch if r[0] >= first_open]
        self.s.append({"ts": [r[0] for r in batch], "src": [r[1] for r in batch], "b": [r[2] for r in batch]})
        for _ in range(w.due(0)):
            w.slide(0)

    def retained(self, n_q: int | None = None) -> tuple[int, int]:
        return self.s.window.bounds(n_q or self.s.spec.subwindows)


def feed_random(rng: random.Random, fed: Fed, start: int, span: int, count: int, lateness: int) -> None:
    """`count` rows over [start, start + span), each batch's times jittered back by up to the
    lateness (one row in ten by up to twice it: late rows)."""
    ts = sorted(rng.randrange(start, start + span) for _ in range(count))
    rows = []
    for x in ts:
        back = rng.randint(0, 2 * lateness if rng.random() < 0.1 else lateness)
        rows.append((max(start, x - back), rng.choice(["a", "b", "c", None]), rng.choice([None, rng.randint(-50, 99)])))
    i = 0
    while i < len(rows):
        k = rng.randint(1, 12)
        batch = rows[i:i + k]
        rng.shuffle(batch)
        fed.feed(batch)
        i += k


def definition_10(rows, lo: int, hi: int, r: int, s: int) -> dict:
    """Seed 003 Definition 10, temporal bounds alpha(k) = k s, beta(k) = k s + r: per window whose
    scope lies in the retained [lo, hi), the rows with alpha(k) <= ts < beta(k)."""
    out = {}
    k = -(-lo // s)
    while k * s + r <= hi:
        out[(k * s, k * s + r)] = [x for x in rows if k * s <= x[0] < k * s + r]
        k += 1
    return out


def median(vals):
    """The exact discrete quantile 0.5: the smallest v with at least ceil(N / 2) values <= v."""
    vals = sorted(vals)
    return vals[(len(vals) + 1) // 2 - 1] if vals else None


def expected(windows, keyed: bool, pred) -> list[tuple]:
    out = []
    for (a, b), rows in sorted(windows.items()):
        groups: dict = {}
        for x in rows:
            if pred(x):
                groups.setdefault(x[1] if keyed else 0, []).append(x)
        for key in sorted(groups, key=lambda k: (k is None, k)):
            vals = [x[2] for x in groups[key] if x[2] is not None]
            agg = (len(groups[key]), sum(vals) if vals else None, min(vals, default=None), max(vals, default=None),
                   len(vals), median(vals))
            out.append((a, b, *((key,) if keyed else ()), *agg))
    return out


WHERE = {"": lambda x: True, "WHERE b > 20": lambda x: x[2] is not None and x[2] > 20,
         "WHERE src <> 'b'": lambda x: x[1] is not None and x[1] != "b"}


def random_case(rng: random.Random):
    n, t = rng.randint(3, 9), rng.choice([7, 100, 700, 1000, 7000])
    lateness = rng.choice([0, t // 2, 2 * t])
    while True:
        r, s = rng.randint(1, (n - 1) * t), rng.randint(max(1, t // 20), 3 * t)
        if r % t or s % t:
            return n, t, lateness, r, s


def check_case(seed: int, periodic_too: bool = True) -> None:
    rng = random.Random(seed)
    n, t, lateness, r, s = random_case(rng)
    fed = Fed(n, t, lateness, group_by=("src",) if rng.random() < 0.5 else ())
    start = rng.randint(-5, 5) * t + rng.randint(0, t - 1)
    feed_random(rng, fed, start, rng.randint(1, 3 * n) * t, rng.randint(0, 60), lateness)
    check_shape(fed, r, s, rng.random() < 0.5, rng.choice(list(WHERE)), periodic_too, seed)


def check_shape(fed: Fed, r: int, s: int, keyed: bool, where: str, periodic_too: bool, label,
                store: bool = False) -> None:
    """[RANGE r SLIDE s] over the fed stream, one-time on the best path and on rows, against
    Definition 10 and DuckDB; periodic, the newest window within the sub-windows it reads. `store`:
    without MEDIAN, so that an ungrouped query reads its slices from the aggregate store
    (slicing.RunStore) rather than from their rows."""
    lo, hi = fed.retained()
    if lo is None:
        return
    keys = ", src" if keyed else ""
    median_sql = "" if store else ", MEDIAN(b)"
    text = (f"SELECT window_start, window_end{keys}, COUNT(*), SUM(b), MIN(b), MAX(b), COUNT(b){median_sql} "
            f"FROM s [RANGE {r} ms SLIDE {s} ms] {where} GROUP BY window_start{keys}")
    windows = definition_10(fed.accepted, lo, hi, r, s)
    want = expected(windows, keyed, WHERE[where])
    if store:
        want = [x[:-1] for x in want]
        assert RunStore.for_query(plan_query(parse_query(text), fed.s).bound.hop.inner) == (not keyed)
    for access in (None, "window"):
        got = run_plan(plan_query(parse_query(text), fed.s, access=access)).rows
        assert got == want, (label, text, access)
    # DuckDB over the accepted rows, with the bounds each answer row reports
    con = duckdb.connect()
    con.execute("CREATE TABLE r (ts BIGINT, src VARCHAR, b BIGINT)")
    if fed.accepted:
        con.executemany("INSERT INTO r VALUES (?, ?, ?)", fed.accepted)
    cond = where.replace("WHERE", "AND")
    for row in got:
        key = "AND src IS NOT DISTINCT FROM ?" if keyed else ""
        median_duckdb = "" if store else ", quantile_disc(b, 0.5)"
        ref = con.execute(f"SELECT count(*), sum(b), min(b), max(b), count(b){median_duckdb} FROM r "
                          f"WHERE ts >= ? AND ts < ? {key} {cond}", [row[0], row[1], *([row[2]] if keyed else [])]).fetchone()
        assert tuple(row[3 if keyed else 2:]) == tuple(ref), (label, text, row)
    assert {(x[0], x[1]) for x in got} == {w for w, rows in windows.items() if any(WHERE[where](x) for x in rows)}
    if not periodic_too:
        return
    # periodic: the newest window within the sub-windows it reads
    plan = plan_query(parse_query(text), fed.s, periodic=True)
    qlo, qhi = fed.retained(plan.n_q)
    ks = Shape(r, s).indexes(qlo, qhi)
    newest = [(ks[-1] * s, ks[-1] * s + r)] if len(ks) else []
    assert run_plan(plan).rows == [x for x in want if (x[0], x[1]) in newest], (label, text)


@pytest.mark.parametrize("seed", range(80))
def test_cut_windows_match_definition_10_and_duckdb(seed):
    check_case(seed)


def check_store_case(seed: int) -> None:
    """One random ungrouped COUNT/SUM/MIN/MAX shape whose parts of sub-windows are read from their
    RunStore from the first part on (not after SCANS_BEFORE_STORE scans), against Definition 10 and
    DuckDB; fails if an edge fell inside a sub-window and no store was made."""
    from windowstore.store import slicing

    made: list = []
    before, init = slicing.SCANS_BEFORE_STORE, slicing.RunStore.__init__
    slicing.SCANS_BEFORE_STORE, slicing.RunStore.__init__ = 0, _counted(init, made)  # type: ignore[method-assign]
    try:
        rng = random.Random(seed)
        n, t, lateness, r, s = random_case(rng)
        fed = Fed(n, t, lateness)
        start = rng.randint(-5, 5) * t + rng.randint(0, t - 1)
        feed_random(rng, fed, start, rng.randint(1, 3 * n) * t, rng.randint(0, 300), lateness)
        check_shape(fed, r, s, False, rng.choice(list(WHERE)), True, seed, store=True)
    finally:
        slicing.SCANS_BEFORE_STORE, slicing.RunStore.__init__ = before, init  # type: ignore[method-assign]
    lo, hi = fed.retained()
    inside = lo is not None and any(c % t for c in Shape(r, s).cuts(lo, hi))  # an edge inside a sub-window
    assert made or not inside, (seed, "no slice came from a store")


@pytest.mark.parametrize("seed", range(40))
def test_slices_read_from_the_aggregate_store_match_definition_10_and_duckdb(seed):
    """COUNT, SUM, MIN and MAX read each slice of a sub-window from its RunStore (prefix sums,
    block extremes) instead of its rows: the same answers as Definition 10 and DuckDB."""
    check_store_case(seed)


def _counted(init, made: list):
    def counting(self, *args):
        made.append(1)
        init(self, *args)
    return counting


@pytest.mark.parametrize("values", ["extremes", "small"])
def test_a_run_store_reads_what_a_scan_of_the_slice_reads(values):
    """Every run [lo, hi) of a sub-window (nulls, WHERE, int64 values whose sums pass int64: the
    split prefix sums) read from its RunStore equals the rows reader's partial of that slice."""
    from windowstore.store.planner.plan import Plan
    from windowstore.store.kinds import AccessPath
    from windowstore.store.slicing import part_of

    rng = random.Random(7)
    fed = Fed(3, 1000, 1000)
    top = INT64_MAX if values == "extremes" else 1000

    def value():  # distinct values (every block's extreme differs), the int64 limits, nulls
        return rng.choice([None, INT64_MAX, INT64_MIN] if values == "extremes" else [None]) if rng.random() < 0.1 \
            else rng.randint(-top, top)
    rows = [(rng.randrange(0, 1000), rng.choice(["a", "b", None]), value()) for _ in range(400)]
    fed.feed(rows[:200])
    fed.feed(rows[200:] + [(3500, "z", 0)])  # the watermark passes the first slot
    sub = fed.s.window.sealed(0)
    for where in ("", "WHERE src <> 'b'", "WHERE b > 0"):
        q = parse_query(f"SELECT window_start, COUNT(*), SUM(b), MIN(b), MAX(b), COUNT(b), AVG(b) FROM s "
                        f"[RANGE 1500 ms SLIDE 300 ms] {where} GROUP BY window_start")
        inner = plan_query(q, fed.s).bound.hop.inner
        assert RunStore.for_query(inner)
        store, scan = RunStore(sub, inner, fed.s.strings, "ts", {}), Plan(inner, fed.s, AccessPath.WINDOW)
        assert store.ok
        for _ in range(200):
            lo = rng.randrange(-10, 1010)
            hi = rng.randrange(lo, 1020)
            assert store.read(lo, hi) == scan.read(part_of(sub, lo, hi, "ts")), (where, lo, hi)


@st.composite
def shapes_and_batches(draw):
    """A stream shape, a window shape cutting its sub-windows, and batches of rows (times as
    offsets from a start), in the order appended: hypothesis shrinks each part."""
    n, t = draw(st.integers(3, 8)), draw(st.sampled_from([7, 100, 700, 1000]))
    lateness = draw(st.sampled_from([0, t // 2, 2 * t]))
    r = draw(st.integers(1, (n - 1) * t))
    s = draw(st.integers(max(1, t // 20), 3 * t).filter(lambda x: r % t or x % t))
    start = draw(st.integers(-3 * t, 3 * t))
    row = st.tuples(st.integers(0, 4 * n * t), st.sampled_from(["a", "b", None]), st.one_of(st.none(), st.integers(-50, 99)))
    batches = draw(st.lists(st.lists(row, min_size=1, max_size=8), max_size=10))
    return n, t, lateness, r, s, start, batches, draw(st.booleans()), draw(st.sampled_from(list(WHERE)))


@settings(max_examples=examples(60), deadline=None)
@given(shapes_and_batches())
def test_random_shapes_hypothesis(case):
    n, t, lateness, r, s, start, batches, keyed, where = case
    fed = Fed(n, t, lateness, group_by=("src",) if keyed else ())
    for batch in batches:
        fed.feed([(start + x[0], x[1], x[2]) for x in batch])
    check_shape(fed, r, s, keyed, where, True, case)


def test_plain_periodic_query_answers_the_newest_window_with_its_order_and_limit():
    """Without window_start the registered [RANGE r SLIDE s] answers the newest window W_k,
    k = gamma(end) (Definition 9), as the plain query over its rows: a projection with ORDER BY
    and LIMIT included."""
    rng = random.Random(5)
    fed = Fed(30, 7000, 3000)
    feed_random(rng, fed, 0, 200_000, 400, 3000)
    lo, hi = fed.retained()
    k = Shape(90_000, 20_000).completed(hi)
    rows = [x for x in fed.accepted if k * 20_000 <= x[0] < k * 20_000 + 90_000]
    q = "SELECT ts, b FROM s [RANGE 90 s SLIDE 20 s] WHERE b IS NOT NULL ORDER BY b DESC, ts LIMIT 5"
    try:
        plan = plan_query(parse_query(q), fed.s, periodic=True)
    except QueryError:  # (IS NOT NULL may not be in this grammar)
        q = "SELECT ts, b FROM s [RANGE 90 s SLIDE 20 s] WHERE b > -1000 ORDER BY b DESC, ts LIMIT 5"
        plan = plan_query(parse_query(q), fed.s, periodic=True)
    want = sorted(((x[0], x[2]) for x in rows if x[2] is not None), key=lambda v: (-v[1], v[0]))[:5]
    assert run_plan(plan).rows == want
    grouped = plan_query(parse_query("SELECT src, COUNT(*) FROM s [RANGE 90 s SLIDE 20 s] GROUP BY src ORDER BY 2 DESC, 1"),
                         fed.s, periodic=True)
    counts: dict = {}
    for x in rows:
        counts[x[1]] = counts.get(x[1], 0) + 1
    assert run_plan(grouped).rows == sorted(counts.items(), key=lambda kv: (-kv[1], kv[0] is None, kv[0]))


def test_seed_003_example_3_on_sub_windows_the_windows_cut():
    """Example 3 (RANGE 3 s SLIDE 2 s), on 700 ms sub-windows: at t = 5.5 s, gamma = 1 and the
    newest window is F_1 = [2 s, 5 s), rows s_4 .. s_9 (one every 0.5 s), however the stream is cut."""
    fed = Fed(10, 700, 0)
    fed.feed([(ms, "a", i) for i, ms in enumerate(range(0, 6000, 500))])
    fed.feed([(5600, "a", 99)])  # the watermark passes 5.6 s: sub-windows through [4.9 s, 5.6 s) sealed
    assert fed.retained()[1] == 5600 and Shape(3000, 2000).completed(5500) == 1
    q = parse_query("SELECT window_start, window_end, COUNT(*), MIN(b), MAX(b) FROM s [RANGE 3 s SLIDE 2 s] "
                    "GROUP BY window_start")
    assert run_plan(plan_query(q, fed.s, periodic=True)).rows == [(2000, 5000, 6, 4, 9)]
    assert run_plan(plan_query(q, fed.s)).rows == [(0, 3000, 6, 0, 5), (2000, 5000, 6, 4, 9)]  # F_0 and F_1


def test_transposed_windows_share_slices():
    """Seed 003 Corollary 2 (Example 7's transposing for sliding windows): the same [RANGE r SLIDE s]
    planned after different numbers of slides (K an integer: windows at multiples of s) answers the
    windows both see identically, from the same slice partials: the second plan computes none."""
    rng = random.Random(7)
    fed = Fed(40, 7000, 0)
    feed_random(rng, fed, 0, 150_000, 300, 0)
    text = "SELECT window_start, src, COUNT(*), SUM(b) FROM s [RANGE 45 s SLIDE 10 s] GROUP BY window_start, src"
    first = set(run_plan(plan_query(parse_query(text), fed.s)).rows)
    feed_random(rng, fed, 150_000, 60_000, 100, 0)
    subs = fed.s.window.youngest(40)
    old = {id(sub) for sub in subs if kept_slices(sub)}
    before = {id(sub): kept_slices(sub) for sub in subs}
    second = set(run_plan(plan_query(parse_query(text), fed.s)).rows)
    assert old and all(kept_slices(sub) == before[id(sub)] for sub in subs if id(sub) in old)
    common = {w[0] for w in first} & {w[0] for w in second}
    assert len(common) > 3
    assert {x for x in first if x[0] in common} == {x for x in second if x[0] in common}
    # different shapes read the same whole sub-windows: one of [RANGE 100 s SLIDE 25 s] that no edge
    # of it or of [RANGE 50 s SLIDE 50 s] cuts is read once for both
    a_text = "SELECT window_start, src, COUNT(*), SUM(b) FROM s [RANGE 100 s SLIDE 25 s] GROUP BY window_start, src"
    b_text = "SELECT window_start, src, COUNT(*), SUM(b) FROM s [RANGE 50 s SLIDE 50 s] GROUP BY window_start, src"
    run_plan(plan_query(parse_query(a_text), fed.s))
    uncut = [sub for sub in subs if not Shape(100_000, 25_000).cuts(sub.start_ms, sub.end_ms)
             and not Shape(50_000, 50_000).cuts(sub.start_ms, sub.end_ms)]
    kept = [kept_slices(sub) for sub in uncut]
    got = run_plan(plan_query(parse_query(b_text), fed.s)).rows
    assert uncut and [kept_slices(sub) for sub in uncut] == kept and got


def test_selection_commutes_with_cut_temporal_windows():
    """Seed 003 Property 2 (the temporal side of Example 6): sigma_c(S[w]) = (sigma_c S)[w] for a
    temporal window sequence, here one whose edges cut sub-windows: WHERE over the stream's windows
    answers as the same windows over a stream given only the rows that pass."""
    rng = random.Random(6)
    full, only = Fed(20, 700, 500), Fed(20, 700, 500)
    rows = sorted((rng.randrange(0, 20_000), rng.choice("ab"), rng.randint(-20, 20)) for _ in range(400))
    rows[0] = (0, "a", 1)  # both streams start at slot 0
    for i in range(0, len(rows), 7):
        part = rows[i:i + 7]
        full.feed(part)
        only.feed([x for x in part if x[2] > 0 or x[0] == 0])
    q = "SELECT window_start, window_end, COUNT(*), SUM(b) FROM s [RANGE 2300 ms SLIDE 900 ms] {} GROUP BY window_start"
    a = run_plan(plan_query(parse_query(q.format("WHERE b > 0")), full.s)).rows
    b = run_plan(plan_query(parse_query(q.format("WHERE b > 0")), only.s)).rows
    c = run_plan(plan_query(parse_query(q.format("")), only.s)).rows
    common = {x[0] for x in a} & {x[0] for x in c}  # (the two streams' watermarks may differ at the end)
    assert len(common) > 5
    assert [x for x in a if x[0] in common] == [x for x in b if x[0] in common] == [x for x in c if x[0] in common]


@pytest.mark.parametrize("edge", ["max", "min"])
def test_bounds_at_the_edges_of_int64_are_exact(edge):
    """Windows, slices and cuts near INT64_MAX and INT64_MIN: computed in integers, never wrapped
    or rounded (the answer's bounds are the oracle's to the millisecond)."""
    t, n = 7000, 6
    spec = WindowSpec(subwindows=n, subwindow_ms=t, clock="event")
    lo_ok, hi_ok = spec.event_time_limits()
    top = hi_ok - 3 if edge == "max" else lo_ok + 9 * t
    start = top - 8 * t
    rows = [(start + i * 997, "a", i) for i in range((top - start) // 997)]
    fed = Fed(n, t, 0)
    for x in rows:
        fed.feed([x])
    lo, hi = fed.retained()
    r, s = 13_001, 2_999
    text = f"SELECT window_start, window_end, COUNT(*), SUM(b) FROM s [RANGE {r} ms SLIDE {s} ms] GROUP BY window_start"
    got = run_plan(plan_query(parse_query(text), fed.s)).rows
    want = [(a, b, len(v), sum(x[2] for x in v)) for (a, b), v in sorted(definition_10(fed.accepted, lo, hi, r, s).items()) if v]
    assert got == want and got
    assert all(INT64_MIN <= x[0] < x[1] <= INT64_MAX for x in got)


@pytest.mark.parametrize("spec,text,message,field", [
    (dict(clock="processing"), "SELECT window_start, COUNT(*) FROM s [RANGE 1500 ms SLIDE 1 s] GROUP BY window_start",
     r"RANGE 1500 ms is not a multiple .* \(nearest exact: 1000 ms or 2000 ms\).*event-time streams only", "range"),
    (dict(clock="manual"), "SELECT COUNT(*) FROM s [RANGE 2 s SLIDE 2500 ms]",
     r"SLIDE 2500 ms is not a multiple .*event-time streams only", "slide"),
    (dict(clock="event"), "SELECT window_start, COUNT(*) FROM s [RANGE 2 s SLIDE 1 ms] GROUP BY window_start",
     r"SLIDE 1 ms would cut each 1000 ms sub-window into more than 1000 slices; the shortest SLIDE on this stream is 2 ms",
     "slide"),
    (dict(clock="event"), "SELECT window_start, COUNT(*) FROM s [RANGE 2500 ms SLIDE 1 s] GROUP BY window_start",
     r"RANGE 2500 ms spans up to 4 sub-windows of 1000 ms but the window holds 3", "range"),
    (dict(clock="event"), "SELECT COUNT(*) FROM s [RANGE 1500 ms]", r"give SLIDE", "range"),
    (dict(clock="event", subwindows=100_000), "SELECT window_start, COUNT(*) FROM s [RANGE 1500 ms SLIDE 900 ms] "
     "GROUP BY window_start", r"would answer up to 111111 windows .* at most 100000 .* SLIDE of at least 1000 ms",
     "slide"),
    (dict(clock="event"), "SELECT COUNT(*) FROM s [RANGE 1500 ms SLIDE 1 s]", r"periodic: register it", "slide"),
    (dict(clock="event"), "SELECT window_start, COUNT(*) FROM s [RANGE 1500 ms SLIDE 1 s] GROUP BY window_start ORDER BY 2",
     "ORDER BY is not supported", None),
])
def test_what_cannot_be_exact_is_refused_naming_the_field(spec, text, message, field):
    from windowstore.server.convert import query_from_pb, query_to_pb

    s = Stream("s", SCHEMA, WindowSpec(**{"subwindows": 3, "subwindow_ms": 1000, **spec}), 0)
    with pytest.raises(QueryError, match=message):
        plan_query(parse_query(text), s)
    with pytest.raises(QueryError) as e:
        plan_query(query_from_pb(query_to_pb(parse_query(text))), s)
    if field is not None:
        assert e.value.field == field, e.value.field


@pytest.mark.parametrize("clock", ["processing", "manual"])
def test_an_edge_inside_a_processing_time_sub_window_has_no_exact_answer(clock):
    """Why unaligned RANGE/SLIDE stay refused on processing-time and manual streams: two streams fed
    the same rows in the same order, at different arrival times inside one sub-window (the clock
    injected), hold equal sub-windows, yet the window [0, 500 ms) of arrival time holds a row in one
    and none in the other. No function of the stored state answers both, so the store refuses
    (naming the field) rather than round; windows whose edges fall on sub-window boundaries are
    answered (hop.py)."""
    spec = WindowSpec(subwindows=3, subwindow_ms=1000, clock=clock)
    streams = []
    for arrivals in ((100, 900), (600, 700)):
        s = Stream("s", SCHEMA, spec, 0)
        for ts, now in zip((1, 2), arrivals):
            s.append({"ts": [ts], "src": ["a"], "b": [ts]})
            assert not s.window.due(now)  # (both arrive within the first sub-window)
        s.window.slide(1000)
        streams.append(s)
    a, b = (s.window.sealed(0) for s in streams)
    assert (a.start_ms, a.end_ms, a.rows) == (b.start_ms, b.end_ms, b.rows) == (0, 1000, 2)
    assert all((a.columns[c] == b.columns[c]).all() for c in SCHEMA)
    # by arrival time: [0, 500) holds the first row in one stream, nothing in the other
    assert [t for t, now in zip((1, 2), (100, 900)) if now < 500] != [t for t, now in zip((1, 2), (600, 700)) if now < 500]
    for s in streams:
        with pytest.raises(QueryError, match=r"RANGE 500 ms is not a multiple .*event-time streams only\) at position 44"):
            plan_query(parse_query("SELECT window_start, COUNT(*) FROM s [RANGE 500 ms SLIDE 1 s] GROUP BY window_start"), s)
        got = run_plan(plan_query(parse_query("SELECT window_start, window_end, COUNT(*) FROM s [RANGE 1 s SLIDE 1 s] "
                                              "GROUP BY window_start"), s)).rows
        assert got == [(0, 1000, 2)]


@pytest.mark.parametrize("sharing", ["none", "conservative"])
def test_periodic_executions_answer_each_window_once_under_lws(sharing):
    """Registered on the engine (TTU), a sliced query executes when a slide completes a window
    (the slides between two windows of SLIDE 20 s on 7 s sub-windows vary: 2 or 3), so with the
    scheduler kept idle every window is answered exactly once, in order, each as Definition 10 says;
    the history passes the checker (LWS). With shared execution on, such a query is due by the
    same rule, and runs with the due ones of its inner query (test_slicing_shared.py)."""
    from windowstore.txn.checker import check
    from windowstore.txn.commands import Append, CreateStream, Register
    from windowstore.txn.engine import Engine, EngineConfig
    from windowstore.txn.history import History

    history = History()
    e = Engine(EngineConfig(policy="ttu", sharing=sharing), history=history)
    e.apply(CreateStream("s", SCHEMA, "ts", WindowSpec(20, 7000, None, "event", 2000, (), 4), 0))
    got: list = []
    e.on_answer = lambda qid, res: got.append((qid, res.slide, res.answer.rows))
    e.apply(Register("P1", "SELECT window_start, window_end, COUNT(*), SUM(b) FROM s [RANGE 90 s SLIDE 20 s] "
                           "GROUP BY window_start", 0, 0))
    e.apply(Register("P2", "SELECT COUNT(*), SUM(b) FROM s [RANGE 90 s SLIDE 20 s]", 0, 0))
    rng = random.Random(11)
    accepted = []
    first_open = None
    for step in range(150):
        base = step * 2000
        batch = [(base + rng.randint(0, 1999) - rng.randint(0, 2000), rng.choice("ab"), rng.randint(0, 9))
                 for _ in range(rng.randint(0, 5))]
        batch = [x for x in batch if x[0] >= 0]
        if batch:
            w = e.streams["s"].window if hasattr(e, "streams") else e.sched.streams["s"].window
            if first_open is None:
                first_open = min(x[0] for x in batch) // 7000 * 7000
            else:
                first_open = (w._base_slot + w.cut_through + 1) * 7000
            accepted += [x for x in batch if x[0] >= first_open]
            e.apply(Append("s", {"ts": [x[0] for x in batch], "src": [x[1] for x in batch], "b": [x[2] for x in batch]},
                           "", None, base))
        e.tick(base)
        e.sched.run_until_idle()
    mine = [(slide, rows) for qid, slide, rows in got if qid == "P1"]
    windows = [row[:2] for _, rows in mine for row in rows]
    assert len(windows) == len(set(windows)) > 10, windows
    starts = [w[0] for w in windows]
    assert starts == sorted(starts) and all(b - a == 20_000 for a, b in zip(starts, starts[1:]))
    for a, b in windows:
        v = [x for x in accepted if a <= x[0] < b]
        assert (a, b, len(v), sum(x[2] for x in v)) in [tuple(r) for _, rows in mine for r in rows]
    plain = [rows for qid, _, rows in got if qid == "P2"]
    assert len(plain) == len(mine)
    for (_, rows), p in zip(mine, plain):
        assert [tuple(r[2:]) for r in rows] == [tuple(x) for x in p] or (not rows and p in ([(0, None)], []))
    report = check(history.events)
    assert report.errors == [] and report.violations("lws") == [], (report.errors, report.violations("lws"))
    assert e.sched.tasks["P1"].late == 0 and e.sched.tasks["P1"].executions >= len(mine)


def test_one_time_and_periodic_through_the_server():
    """Through gRPC on an event-time stream of 7 s sub-windows: a one-time [RANGE 90 s SLIDE 20 s]
    query with window_start answers every retained window, as DuckDB over the rows sent (none
    late: sent in order); a registered one answers the newest window; the same shape on a
    processing-time stream is INVALID_ARGUMENT naming RANGE."""
    from conftest import wait_for
    from windowstore.clients import Client, InvalidArgument
    from windowstore.server.process import ServerProcess

    rng = random.Random(3)
    rows = sorted((rng.randrange(0, 300_000), rng.choice("ab"), rng.randint(0, 99)) for _ in range(600))
    with ServerProcess() as server, Client(server.target, timeout=30) as ws:
        ws.create_stream("e", schema=SCHEMA, subwindows=30, subwindow_ms=7000, clock="event")
        ws.create_stream("p", schema=SCHEMA, subwindows=30, subwindow_ms=7000, clock="processing")
        q = ws.register("SELECT window_start, window_end, COUNT(*), SUM(b) FROM e [RANGE 90 s SLIDE 20 s] "
                        "GROUP BY window_start")
        for i in range(0, len(rows), 50):
            part = rows[i:i + 50]
            ws.append("e", {"ts": [x[0] for x in part], "src": [x[1] for x in part], "b": [x[2] for x in part]})
        ws.append("e", {"ts": [310_000], "src": ["a"], "b": [0]})  # the watermark passes 308 s: slots through 43 sealed
        text = "SELECT window_start, window_end, COUNT(*), SUM(b) FROM e [RANGE 90 s SLIDE 20 s] GROUP BY window_start"
        a = wait_for(lambda: (lambda got: got if got.rows and got.rows[-1][1] == 290_000 else None)(ws.query(text)),
                     "the window ending at 290 s")
        con = duckdb.connect()
        con.execute("CREATE TABLE r (ts BIGINT, src VARCHAR, b BIGINT)")
        con.executemany("INSERT INTO r VALUES (?, ?, ?)", rows)
        assert a.rows[0][0] >= 308_000 - 30 * 7000
        for ws_, we, count, total in a.rows:
            assert we - ws_ == 90_000 and ws_ % 20_000 == 0
            assert (count, total) == tuple(con.execute("SELECT count(*), sum(b) FROM r WHERE ts >= ? AND ts < ?",
                                                       [ws_, we]).fetchone())
        answers = wait_for(lambda: (lambda got: got if got and got[-1].rows and got[-1].rows[-1][1] == 290_000 else None)(
            ws.read_answers(q.id)[0]), "the periodic answer for the window ending at 290 s")
        assert answers[-1].rows == [a.rows[-1]]
        with pytest.raises(InvalidArgument, match="event-time streams only"):
            ws.query("SELECT window_start, COUNT(*) FROM p [RANGE 90 s SLIDE 20 s] GROUP BY window_start")
        ws.unregister(q.id)


def test_kept_partials_are_bounded_per_sub_window(monkeypatch):
    """Partials are a cache: past MAX_KEPT entries a sub-window's are dropped and recomputed, with
    the same answers (many distinct one-time shapes cannot grow memory without bound)."""
    from windowstore.store import slicing

    rng = random.Random(9)
    fed = Fed(10, 700, 0)
    feed_random(rng, fed, 0, 7000, 200, 0)
    monkeypatch.setattr(slicing, "MAX_KEPT", 6)
    texts = [f"SELECT window_start, COUNT(*), SUM(b) FROM s [RANGE {r} ms SLIDE {sl} ms] GROUP BY window_start"
             for r, sl in [(1000, 300), (1500, 450), (2100, 650), (1000, 300)]]
    first = [run_plan(plan_query(parse_query(x), fed.s)).rows for x in texts]
    assert max(kept_slices(sub) for sub in fed.s.window.youngest(10)) <= 6 + 8
    lo, hi = fed.retained()
    for x, got in zip(texts, first):
        r, sl = (int(v) for v in x.split("RANGE ")[1].replace(" ms SLIDE", "").split(" ms]")[0].split())
        want = [(a, len(v), sum(y[2] for y in v if y[2] is not None) if any(y[2] is not None for y in v) else None)
                for (a, _), v in sorted(definition_10(fed.accepted, lo, hi, r, sl).items()) if v]
        assert got == want
