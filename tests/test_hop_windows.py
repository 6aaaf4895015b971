"""Hopping and tumbling windows with window_start / window_end as columns (store/hop.py), against
two independent oracles: Definition 10 of seed 003 (the window sequence operator) evaluated directly
in Python over the raw rows, and DuckDB over the raw rows with the window bounds each answer reports."""
from __future__ import annotations

import random

import duckdb
import pytest

from windowstore.store import QueryError, Stream, WindowSpec, parse_query, plan_query, run_plan

SCHEMA = {"ts": "int64", "src": "string", "b": "int64"}


def event_stream(n: int, t: int, rows: list[tuple], slides: int, rng: random.Random) -> Stream:
    """An event-time stream of n sub-windows of t ms, given `rows` out of order (in shuffled
    batches, the first holding the earliest row so that it fixes the base slot), then slid."""
    s = Stream("s", SCHEMA, WindowSpec(subwindows=n, subwindow_ms=t, clock="event"), 0)
    first = min(range(len(rows)), key=lambda i: rows[i][0])
    rest = rows[:first] + rows[first + 1:]
    first = rows[first]
    rng.shuffle(rest)
    batches = [[first] + rest[: len(rest) // 2], rest[len(rest) // 2:]]
    for batch in batches:
        if batch:
            s.append({"ts": [r[0] for r in batch], "src": [r[1] for r in batch], "b": [r[2] for r in batch]})
    for _ in range(slides):
        s.window.slide(0)
    return s


def definition_10(rows, retained: tuple[int, int], length: int, every: int):
    """Seed 003 Definition 10 for the temporal WSD alpha(j) = j*every, beta(j) = alpha(j) + length
    (rate `every`, epoch-aligned): per window j whose scope lies in the retained [lo, hi), the rows
    with alpha(j) <= ts < beta(j). Returns {(alpha, beta): rows}."""
    lo, hi = retained
    out = {}
    j = -(-lo // every)
    while j * every + length <= hi:
        a, b = j * every, j * every + length
        out[(a, b)] = [r for r in rows if a <= r[0] < b]
        j += 1
    return out


def gamma(t: int, length: int, every: int) -> int:
    """Definition 9's delaying function for that WSD: the newest window computable at time t."""
    return (t - length) // every


def expected_rows(windows, keyed: bool, pred=lambda r: True):
    """COUNT(*), SUM(b), MIN(b), MAX(b), COUNT(b) per window (and src), as the query below selects."""
    out = []
    for (a, b), rows in sorted(windows.items()):
        rows = [r for r in rows if pred(r)]
        groups = {}
        for r in rows:
            groups.setdefault(r[1] if keyed else None, []).append(r)
        for key in sorted(groups, key=lambda k: (k is None, k)):
            vals = [r[2] for r in groups[key] if r[2] is not None]
            agg = (len(groups[key]), sum(vals) if vals else None, min(vals, default=None), max(vals, default=None),
                   len(vals))
            out.append((a, b, *((key,) if keyed else ()), *agg))
    return out


def random_case(rng: random.Random):
    n, t = rng.randint(2, 8), rng.choice([1, 7, 100, 1000])
    base = rng.randint(0, 5)
    slides = rng.randint(1, 2 * n + 2)
    rows = [(base * t, "a", 1)]
    for _ in range(rng.randint(0, 40)):
        ts = rng.randrange(base * t, (base + slides) * t)
        rows.append((ts, rng.choice(["a", "b", "c"]), rng.choice([None, rng.randint(-5, 100)])))
    length, every = rng.randint(1, n) * t, rng.randint(1, n) * t
    return n, t, base, slides, rows, length, every


@pytest.mark.parametrize("seed", range(60))
def test_hop_windows_match_definition_10_and_duckdb(seed):
    rng = random.Random(seed)
    n, t, base, slides, rows, length, every = random_case(rng)
    s = event_stream(n, t, rows, slides, rng)
    hi = (base + slides) * t
    retained = (max(base, base + slides - n) * t, hi)
    keyed = rng.random() < 0.5
    where = rng.choice(["", "WHERE b > 20", "WHERE src <> 'b'"])
    pred = {"": lambda r: True, "WHERE b > 20": lambda r: r[2] is not None and r[2] > 20,
            "WHERE src <> 'b'": lambda r: r[1] != "b"}[where]
    keys = ", src" if keyed else ""
    text = (f"SELECT window_start, window_end{keys}, COUNT(*), SUM(b), MIN(b), MAX(b), COUNT(b) "
            f"FROM s [RANGE {length} ms SLIDE {every} ms] {where} GROUP BY window_start{keys}")
    windows = definition_10(rows, retained, length, every)
    expected = expected_rows(windows, keyed, pred)
    for access in (None, "window"):
        got = run_plan(plan_query(parse_query(text), s, access=access)).rows
        assert got == expected, (text, access)

    # DuckDB over the raw rows, with the bounds each answer row reports
    con = duckdb.connect()
    con.execute("CREATE TABLE r (ts BIGINT, src VARCHAR, b BIGINT)")
    con.executemany("INSERT INTO r VALUES (?, ?, ?)", rows)
    cond = where.replace("WHERE", "AND")
    for row in got:
        ws, we = row[0], row[1]
        if keyed:
            ref = con.execute(f"SELECT count(*), sum(b), min(b), max(b), count(b) FROM r WHERE ts >= ? AND ts < ? "
                              f"AND src = ? {cond}", [ws, we, row[2]]).fetchone()
            assert tuple(row[3:]) == tuple(ref)
        else:
            ref = con.execute(f"SELECT count(*), sum(b), min(b), max(b), count(b) FROM r WHERE ts >= ? AND ts < ? "
                              f"{cond}", [ws, we]).fetchone()
            assert tuple(row[2:]) == tuple(ref)
    got_windows = {(r[0], r[1]) for r in got}
    nonempty = {w for w, rs in windows.items() if any(pred(r) for r in rs)}
    assert got_windows == nonempty  # a window with no row (after WHERE) has no group

    # periodic: the newest window, gamma's (Definition 9) when the read reaches it
    periodic = run_plan(plan_query(parse_query(text), s, periodic=True)).rows
    j = gamma(hi, length, every)
    newest = (j * every, j * every + length)
    if length // t + every // t - 1 <= n and newest in windows:
        assert periodic == [r for r in expected if (r[0], r[1]) == newest]
    else:
        last = max(windows, default=None)
        assert periodic == [r for r in expected if (r[0], r[1]) == last]


def test_seed_003_example_3_range_3s_slide_2s():
    """Example 3: windows of 3 s every 2 s; at t = 5.5 s (sub-windows sealed through 5 s) gamma = 1,
    and the window computed is F_1 = [2 s, 5 s)."""
    rng = random.Random(3)
    rows = [(ms, "a", i) for i, ms in enumerate(range(0, 6000, 500))]  # s_0 .. s_11, one every 0.5 s
    s = event_stream(10, 1000, rows, 5, rng)                           # slots 0..4 sealed: [0, 5 s)
    assert gamma(5500, 3000, 2000) == 1
    q = parse_query("SELECT window_start, window_end, COUNT(*), MIN(b), MAX(b) FROM s [RANGE 3 s SLIDE 2 s] "
                    "GROUP BY window_start")
    assert run_plan(plan_query(q, s, periodic=True)).rows == [(2000, 5000, 6, 4, 9)]
    assert run_plan(plan_query(q, s)).rows == [(0, 3000, 6, 0, 5), (2000, 5000, 6, 4, 9)]


def test_natural_transposing_windows_do_not_depend_on_when_they_are_asked():
    """Seed 003 Corollary 2 (the sliding-window case of Example 7's transposing): the same
    [RANGE r SLIDE s] asked after different numbers of slides answers the windows it shares
    identically, as the windows are aligned to multiples of s, not to the asking."""
    rng = random.Random(7)
    rows = [(rng.randrange(0, 20_000), rng.choice("xy"), rng.randint(0, 9)) for _ in range(200)] + [(0, "x", 0)]
    q = parse_query("SELECT window_start, window_end, src, COUNT(*), SUM(b) FROM s [RANGE 4 s SLIDE 2 s] "
                    "GROUP BY window_start, src")
    answers = [set(run_plan(plan_query(q, event_stream(20, 1000, rows, k, rng))).rows) for k in (9, 12, 13, 20)]
    for a in answers:
        for b in answers:
            common = {(r[0], r[1]) for r in a} & {(r[0], r[1]) for r in b}
            assert {r for r in a if (r[0], r[1]) in common} == {r for r in b if (r[0], r[1]) in common}


def test_tumbling_and_shared_partials_on_count_based_and_manual_streams():
    """Manual and count-based streams align windows by slide number; bounds are the covered
    sub-windows' bounds."""
    s = Stream("s", SCHEMA, WindowSpec(subwindows=6, subwindow_rows=2), 0)
    s.append({"ts": [10, 11, 12, 13, 14, 15, 16, 17], "src": list("abababab"), "b": [1, 2, 3, 4, 5, 6, 7, 8]})
    for _ in range(4):
        s.window.slide(0)
    q = parse_query("SELECT window_start, window_end, SUM(b) FROM s [RANGE 4 ROWS SLIDE 4 ROWS] GROUP BY window_end")
    assert run_plan(plan_query(q, s)).rows == [(10, 14, 10), (14, 18, 26)]


@pytest.mark.parametrize("text,message", [
    ("SELECT window_start, COUNT(*) FROM s [RANGE 2 s SLIDE 1 s]", "needs GROUP BY window_start"),
    ("SELECT window_start, COUNT(*) FROM s [RANGE 2 s] GROUP BY window_start", "needs a window with SLIDE"),
    ("SELECT window_start, COUNT(*) FROM s [RANGE 2 s SLIDE 1 s] GROUP BY window_start ORDER BY 2",
     "ORDER BY is not supported with window_start"),
    ("SELECT window_start, COUNT(*) FROM s [RANGE 1500 ms SLIDE 1 s] GROUP BY window_start",
     r"RANGE 1500 ms is not a multiple of the sub-window length 1000 ms \(nearest exact: 1000 ms or 2000 ms\)"),
    ("SELECT window_start, COUNT(*) FROM s [RANGE 2 s SLIDE 2500 ms] GROUP BY window_start",
     r"SLIDE 2500 ms is not a multiple .* \(nearest exact: 2000 ms or 3000 ms\)"),
    ("SELECT COUNT(*) FROM s [RANGE 3500 ms]", r"\(nearest exact: 3000 ms\)"),  # 4000 ms > the window
    ("SELECT window_start, COUNT(*) FROM s [RANGE 2 s SLIDE 1 s] WHERE window_start > 0 GROUP BY window_start",
     "unknown column 'window_start'"),
])
def test_refusals_name_the_reason(text, message):
    # processing time: an edge inside a sub-window cannot be placed (event time answers them: test_slicing.py)
    s = Stream("s", SCHEMA, WindowSpec(subwindows=3, subwindow_ms=1000, clock="processing"), 0)
    with pytest.raises(QueryError, match=message):
        plan_query(parse_query(text), s)


def test_a_stream_column_named_window_start_is_an_ordinary_column():
    s = Stream("s", {"ts": "int64", "window_start": "int64"}, WindowSpec(subwindows=3, subwindow_ms=1000), 0)
    s.append({"ts": [1, 2], "window_start": [5, 5]})
    s.window.slide(0)
    a = run_plan(plan_query(parse_query("SELECT window_start, COUNT(*) FROM s GROUP BY window_start"), s))
    assert a.rows == [(5, 2)]


def test_one_time_and_periodic_through_the_server():
    """Through gRPC: a one-time query with SLIDE answers every window, a registered one the newest
    at each execution, and the refusals are INVALID_ARGUMENT naming the reason."""
    from conftest import wait_for
    from windowstore.clients import Client, InvalidArgument
    from windowstore.server.process import ServerProcess

    with ServerProcess() as server, Client(server.target, timeout=30) as ws:
        ws.create_stream("h", schema=SCHEMA, subwindows=8, subwindow_ms=1000, clock="manual")
        q = ws.register("SELECT window_start, window_end, src, COUNT(*) FROM h [RANGE 3 s SLIDE 2 s] "
                        "GROUP BY window_start, src")
        sizes = []
        for k in range(6):
            size = k + 1
            sizes.append(size)
            ws.append("h", {"ts": [k] * size, "src": ["a" if i % 2 else "b" for i in range(size)], "b": [k] * size})
            ws.slide("h")
        per_slide = [sum(sizes[i] for i in range(j, j + 3)) for j in (0, 2)]  # windows of slides 0-2, 2-4
        a = ws.query("SELECT window_start, window_end, COUNT(*) FROM h [RANGE 3 s SLIDE 2 s] GROUP BY window_start")
        assert [r[2] for r in a.rows] == per_slide
        assert a.columns == ["window_start", "window_end", "count(*)"]
        bounds = [(r[0], r[1]) for r in a.rows]
        # the newest window (slides 2-4) is answered by the execution due at slide 5, or by one due
        # at slide 3 that ran late, after slide 4 (back-to-back slides), which then reads it already
        answers = wait_for(lambda: (lambda got: got if got and {(r[0], r[1]) for r in got[-1].rows} == {bounds[-1]}
                                    else None)(ws.read_answers(q.id)[0]),
                           "the periodic query's answer of the newest window", timeout=120)  # (a bound on a hang)
        assert answers[-1].slide in (4, 5), [a.slide for a in answers]
        assert [a.slide for a in answers] == sorted({a.slide for a in answers}), "each slide at most once, in order"
        newest = answers[-1].rows
        assert {(r[0], r[1]) for r in newest} == {bounds[-1]}
        assert sum(r[3] for r in newest) == per_slide[-1]
        for bad, why in [("SELECT window_start, COUNT(*) FROM h [RANGE 3 s] GROUP BY window_start", "SLIDE"),
                         ("SELECT COUNT(*) FROM h [RANGE 3 s SLIDE 1 s]", "register it instead"),
                         ("SELECT COUNT(*) FROM h [RANGE 2500 ms]", "nearest exact: 2000 ms or 3000 ms")]:
            with pytest.raises(InvalidArgument, match=why):
                ws.query(bad)
        ws.unregister(q.id)


def test_a_length_not_a_whole_number_of_sub_windows_names_the_structured_field():
    """Never rounded: the structured form's refusal names the field and the nearest exact lengths
    (on a processing-time stream; event time answers such windows exactly, test_slicing.py)."""
    from windowstore.server.convert import query_from_pb, query_to_pb

    s = Stream("s", SCHEMA, WindowSpec(subwindows=3, subwindow_ms=1000, clock="processing"), 0)
    for text, field, nearest in [
            ("SELECT window_start, COUNT(*) FROM s [RANGE 1700 ms SLIDE 1 s] GROUP BY window_start", "range",
             "1000 ms or 2000 ms"),
            ("SELECT window_start, COUNT(*) FROM s [RANGE 2 s SLIDE 999 ms] GROUP BY window_start", "slide",
             "1000 ms"),
            ("SELECT COUNT(*) FROM s [RANGE 3001 ms]", "range", "3000 ms")]:
        with pytest.raises(QueryError) as e:
            plan_query(query_from_pb(query_to_pb(parse_query(text))), s)
        assert e.value.field == field and f"(nearest exact: {nearest})" in str(e.value)


@pytest.mark.parametrize("mode", ["conservative", "hybrid-lp"])
def test_hop_queries_beside_shared_ones_answer_as_with_sharing_off(mode):
    """Registered hop queries (and plain ones of the same RANGE and SLIDE, which sharing groups)
    give the same answers for every slide with shared execution on as with it off; a hop query
    runs alone and says why."""
    from windowstore.store import WindowSpec as Spec
    from windowstore.txn.commands import Append, CreateStream, Register, Slide
    from windowstore.txn.engine import Engine, EngineConfig

    texts = ["SELECT src, window_start, SUM(b) FROM s [RANGE 2 SUBWINDOWS SLIDE 1 SUBWINDOWS] GROUP BY window_start, src",
             "SELECT window_end, COUNT(*) FROM s [RANGE 3 SUBWINDOWS SLIDE 1 SUBWINDOWS] GROUP BY window_end",
             "SELECT src, SUM(b) FROM s [RANGE 2 SUBWINDOWS SLIDE 1 SUBWINDOWS] GROUP BY src",
             "SELECT COUNT(*) FROM s [RANGE 3 SUBWINDOWS SLIDE 1 SUBWINDOWS]"]

    def answers(sharing: str) -> dict:
        e = Engine(EngineConfig(policy="ttu", sharing=sharing))
        e.apply(CreateStream("s", SCHEMA, "ts", Spec(6, 10, None, "manual", 0, (), 4), 0))
        got: dict = {}
        e.on_answer = lambda qid, r: got.setdefault((qid, r.slide), r.answer.rows)
        for i, text in enumerate(texts):
            e.apply(Register(f"Q{i}", text, 0, 0))
        rng = random.Random(7)
        for ts in range(1, 13):
            e.apply(Append("s", {"ts": [ts] * 3, "src": [rng.choice("ab") for _ in range(3)],
                                 "b": [rng.randint(-3, 9) for _ in range(3)]}, "", None, ts))
            e.apply(Slide("s", ts))
            e.sched.run_until_idle()
        if sharing != "none":
            other = texts[0].replace("RANGE 2", "RANGE 4")  # not an exact duplicate of Q0
            why = e.sched.sharing.explain(e.plan(parse_query(other), periodic=True), 1)
            assert "runs alone: windows with their bounds" in why, why
        return got

    alone, shared = answers("none"), answers(mode)
    assert any(rows for (qid, _), rows in alone.items() if qid == "Q0"), "the hop query answered with rows"
    assert {k: v for k, v in shared.items() if k in alone} == {k: alone[k] for k in shared if k in alone}
    assert {k for k in alone if k[0] in ("Q0", "Q1")} <= set(shared)
