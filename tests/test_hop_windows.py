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


@pytest.mark.slow
def test_one_time_and_periodic_through_the_server():
    """Through gRPC: a one-time query with SLIDE answers every window, a registered one the newest
    at each execution, one registered out of phase with SLIDE answers each window at the slide
    that completes it, and the refusals are INVALID_ARGUMENT naming the reason."""
    from conftest import wait_for
    from windowstore.clients import Client, InvalidArgument
    from windowstore.server.process import ServerProcess

    text = "SELECT window_start, window_end, src, COUNT(*) FROM h [RANGE 3 s SLIDE 2 s] GROUP BY window_start, src"
    with ServerProcess() as server, Client(server.target, timeout=30) as ws:
        ws.create_stream("h", schema=SCHEMA, subwindows=8, subwindow_ms=1000, clock="manual")
        q = ws.register(text)
        sizes = []
        late = None
        for k in range(8):  # windows start at slides 0, 2, 4 and complete at slides 2, 4, 6
            size = k + 1
            sizes.append(size)
            ws.append("h", {"ts": [k] * size, "src": ["a" if i % 2 else "b" for i in range(size)], "b": [k] * size})
            ws.slide("h")
            if k == 3:  # out of phase: the window of slides 0-2 completed one slide ago, the next completes at 4
                late = ws.register(text)
            if k in (3, 4, 6):  # its answer of the newest window comes before the next slide is sent
                wait_for(lambda: any(a.slide == k for a in ws.read_answers(late.id)[0]),
                         f"the out-of-phase query's answer at slide {k}", timeout=30)  # (a bound on a hang)
        per_slide = [sum(sizes[i] for i in range(j, j + 3)) for j in (0, 2, 4)]  # windows of slides 0-2, 2-4, 4-6
        a = ws.query("SELECT window_start, window_end, COUNT(*) FROM h [RANGE 3 s SLIDE 2 s] GROUP BY window_start")
        assert [r[2] for r in a.rows] == per_slide
        assert a.columns == ["window_start", "window_end", "count(*)"]
        bounds = [(r[0], r[1]) for r in a.rows]
        # the newest window (slides 4-6) is answered by the execution due at slide 6, or late, after
        # slide 7 (back-to-back slides), which then reads it already
        answers = wait_for(lambda: (lambda got: got if got and {(r[0], r[1]) for r in got[-1].rows} == {bounds[-1]}
                                    else None)(ws.read_answers(q.id)[0]),
                           "the periodic query's answer of the newest window", timeout=120)  # (a bound on a hang)
        assert answers[-1].slide in (6, 7), [a.slide for a in answers]
        assert [a.slide for a in answers] == sorted({a.slide for a in answers}), "each slide at most once, in order"
        newest = answers[-1].rows
        assert {(r[0], r[1]) for r in newest} == {bounds[-1]}
        assert sum(r[3] for r in newest) == per_slide[-1]
        assert (answers[-1].window_start_ms, answers[-1].window_end_ms) == bounds[-1], "the window it answers"
        # out of phase: the newest window at once (slide 3), then each at its completing slide
        got = ws.read_answers(late.id)[0]
        assert [x.slide for x in got] == [3, 4, 6], [x.slide for x in got]
        assert [(x.window_start_ms, x.window_end_ms) for x in got] == bounds
        assert [{(r[0], r[1]) for r in x.rows} for x in got] == [{b} for b in bounds]
        assert [sum(r[3] for r in x.rows) for x in got] == per_slide
        for bad, why in [("SELECT window_start, COUNT(*) FROM h [RANGE 3 s] GROUP BY window_start", "SLIDE"),
                         ("SELECT COUNT(*) FROM h [RANGE 3 s SLIDE 1 s]", "register it instead"),
                         ("SELECT COUNT(*) FROM h [RANGE 2500 ms]", "nearest exact: 2000 ms or 3000 ms")]:
            with pytest.raises(InvalidArgument, match=why):
                ws.query(bad)
        ws.unregister(q.id)
        ws.unregister(late.id)


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


# -- when a periodic HOP/TUMBLE query answers (issue 31) ---------------------------------------------
# Windows start at multiples of SLIDE by sub-window index: the time slot on processing- and
# event-time streams, the slide number on manual ones. The oracle below is brute force over those
# indexes: at each scheduler run, the newest window lying in the stream's sub-windows that the
# query reads; it answers when that window is newer than the one at the slide its last answer
# reflected (the first execution, at registration, answers at once). The rows are checked against
# DuckDB over the raw rows within the bounds each answer reports.

T = 10  # sub-window length (ms) on every clock below


def _hop_engine(clock: str, n: int, base: int, sharing: str):
    """An engine with stream s of n sub-windows of T ms on `clock`, whose first sub-window is
    index `base` (its time slot [base T, base T + T); on a manual stream the index is the slide
    number, 0, and the sub-window's bounds are [base T, base T + T) too)."""
    from windowstore.store import WindowSpec as Spec
    from windowstore.txn.commands import CreateStream
    from windowstore.txn.engine import Engine, EngineConfig

    e = Engine(EngineConfig(policy="ttu", sharing=sharing))
    e.apply(CreateStream("s", tuple(SCHEMA.items()), "ts", Spec(n, T, None, clock, 0, (), 4), base * T))
    return e


def _feed(e, clock: str, slot: int, rows: list[tuple]) -> None:
    """Append the rows of time slot `slot` (their ts in it) and slide past it, applying the slide
    (the engine's clock is then the slot's end) without running a query."""
    from windowstore.txn.commands import Append, Slide

    end = (slot + 1) * T
    cols = {"ts": [r[0] for r in rows], "src": [r[1] for r in rows], "b": [r[2] for r in rows]}
    hint = {"event_time_ms": end} if clock == "event" else {}
    e.apply(Append("s", cols, "", None, slot * T, **hint))
    if clock == "manual":
        e.apply(Slide("s", end))
    else:
        e.tick(end)
        while e.sched.stream_due_to_slide() is not None:
            e.sched.step()


def _newest_window(latest_index: int, first_index: int, n_q: int, length: int, every: int):
    """Brute force: the newest window [p, p + length) of indexes, p a multiple of `every`, that
    lies within the sub-windows a periodic execution reads at a slide whose sub-window has index
    `latest_index` (the n_q youngest, none before `first_index`); None if there is none. Also the
    newest such window ignoring what is read (the one whose completion counts)."""
    read = [i for i in range(latest_index - n_q + 1, latest_index + 1) if i >= first_index]
    inside = [p for p in range(min(read, default=0), latest_index + 1)
              if p % every == 0 and read and p >= read[0] and p + length - 1 <= latest_index]
    done = [p for p in range(first_index, latest_index + 1) if p % every == 0 and p + length - 1 <= latest_index]
    return (inside[-1] if inside else None), (done[-1] if done else None)


def run_due_case(clock: str, n: int, base: int, text: str, register_after: int, runs: list[bool], newest, due_at,
                 sharing: str = "none", keyed: bool = True, seed: int = 0) -> list[tuple]:
    """Feed 1 + register_after slots of random rows (ts, src, b), register the query `text`, then
    one slot per entry of `runs`, running the scheduler after it where the entry is True (else the
    slide is applied and the query held back). The oracle: `newest(slide)` is (the window
    [lo, hi) in ms a periodic execution at that slide answers, or None when none lies within what
    it reads; a key, ordered, of the newest completed window, or None), `due_at(key)` the slide
    that completes the window after it (after none: the first). An answer is expected at the first
    run and whenever the newest completed window is newer than at the last answer; each is checked
    against DuckDB over the raw rows within the bounds it reports (COUNT(*), SUM(b), per src where
    `keyed`). Returns the answers [(slide, window_start_ms, window_end_ms)], (slide, None, None)
    for one with no window."""
    from windowstore.txn.commands import Register

    rng = random.Random(seed)
    e = _hop_engine(clock, n, base, sharing)
    got: list = []
    e.on_answer = lambda qid, res: got.append(res)
    raw: list[tuple] = []

    def feed(slide: int) -> None:
        slot = base + slide
        rows = [(slot * T + rng.randrange(T), rng.choice("ab"), rng.randint(-5, 9)) for _ in range(rng.randint(1, 4))]
        raw.extend(rows)
        _feed(e, clock, slot, rows)

    for j in range(register_after + 1):
        feed(j)
    e.apply(Register("Q", text, 0, e.now_ms))
    expected: list = []
    last_done = None

    lates: list = []  # per answer after the first: slides past the completion it was due at

    def run(slide: int) -> None:
        nonlocal last_done
        e.sched.run_until_idle()
        answered, done = newest(slide)
        if not expected or (done is not None and (last_done is None or done > last_done)):
            if expected:
                lates.append(slide - due_at(last_done))
            expected.append((slide, answered))
            last_done = done

    run(register_after)
    for k, go in enumerate(runs):
        slide = register_after + 1 + k
        feed(slide)
        if go:
            run(slide)
    run(register_after + len(runs))  # what was held back runs at last

    con = duckdb.connect()
    con.execute("CREATE TABLE r (ts BIGINT, src VARCHAR, b BIGINT)")
    con.executemany("INSERT INTO r VALUES (?, ?, ?)", raw)
    assert [r.slide for r in got] == [slide for slide, _ in expected], (text, clock, runs)
    assert [r.late_slides for r in got[1:]] == lates and e.sched.tasks["Q"].late == sum(x > 0 for x in lates)
    out = []
    for res, (slide, window) in zip(got, expected):
        if window is None:
            assert res.answer.rows == [], "no window lies within what it read: no rows"
            out.append((slide, None, None))
            continue
        lo, hi = window
        assert (res.window_start_ms, res.window_end_ms) == (lo, hi), "the answer reports the window answered"
        assert res.staleness_ms == 0, "answered at the clock time of the newest slide reflected"
        group = ", src" if keyed else ""
        ref = con.execute(f"SELECT ?, ?{group}, count(*), sum(b) FROM r WHERE ts >= ? AND ts < ? "
                          f"{'GROUP BY src ORDER BY src' if keyed else ''}", [lo, hi, lo, hi]).fetchall()
        assert [tuple(x) for x in res.answer.rows] == [tuple(x) for x in ref], (lo, hi)
        out.append((slide, lo, hi))
    return out


def _run_hop_case(clock: str, n: int, base: int, length: int, every: int, register_after: int,
                  runs: list[bool], sharing: str = "none", keyed: bool = True, seed: int = 0, empty: bool = False):
    """run_due_case for a HOP query of `length` every `every` sub-windows, against the brute-force
    oracle above; returns the answers [(slide, window_start_ms, window_end_ms)] (with `empty`, also
    those with no window as (slide, None, None))."""
    keys = ", src" if keyed else ""
    text = (f"SELECT window_start, window_end{keys}, COUNT(*), SUM(b) FROM s "
            f"[RANGE {length} SUBWINDOWS SLIDE {every} SUBWINDOWS] GROUP BY window_start{keys}")
    first_index = 0 if clock == "manual" else base   # the index of slide 0's sub-window
    n_q = min(n, length + every - 1)

    def bounds(p):  # a window's [start, end) in ms: its sub-windows' bounds
        s0 = p - first_index + base
        return s0 * T, (s0 + length) * T

    def newest(slide: int):
        answered, done = _newest_window(first_index + slide, first_index, n_q, length, every)
        return (None if answered is None else bounds(answered)), done

    def due_at(last_done):
        nxt = last_done + every if last_done is not None else -(-first_index // every) * every
        return nxt + length - 1 - first_index

    out = run_due_case(clock, n, base, text, register_after, runs, newest, due_at, sharing, keyed, seed)
    return [x for x in out if empty or x[1] is not None]


@pytest.mark.parametrize("sharing", ["none", "conservative"])
@pytest.mark.parametrize("clock", ["manual", "processing", "event"])
@pytest.mark.parametrize("length,every", [(3, 2), (2, 2), (4, 3)], ids=["hop", "tumble", "hop-4-3"])
def test_a_periodic_hop_registered_out_of_phase_answers_each_window_at_the_slide_that_completes_it(
        clock, length, every, sharing):
    """Registered one slide after a window completed (out of phase with SLIDE), the query answers
    the newest window at once, then each window at the slide that completes it (its end is the
    end of the newest sub-window reflected: no slide late), exactly once and in order."""
    base = 3  # slot 3: windows start at slots 0, 2, 4 (every 2) or 0, 3, 6 (every 3)
    got = _run_hop_case(clock, 8, base, length, every, register_after=3, runs=[True] * 12,
                        sharing=sharing)
    end_of_slide = {s: (base + s + 1) * T for s in range(20)}
    assert len(got) >= 5
    for slide, lo, hi in got[1:]:
        assert hi == end_of_slide[slide], "answered at the slide that completed it"
    starts = [lo for _, lo, _ in got]
    assert all(b - a == every * T for a, b in zip(starts, starts[1:])), "every window once, in order"


@pytest.mark.parametrize("sharing", ["none", "conservative"])
@pytest.mark.parametrize("clock", ["manual", "processing", "event"])
def test_an_execution_held_back_past_a_completion_answers_the_newest_window_and_keeps_the_phase(clock, sharing):
    """Several slides applied before the scheduler runs: the execution then answers the newest
    completed window (the older one is passed over), and the next answer still comes at the next
    completion, not SLIDE slides after the late one."""
    got = _run_hop_case(clock, 8, 3, 3, 2, register_after=2, runs=HELD_RUNS, sharing=sharing)
    assert_held_back_then_in_phase(got, 3)


HELD_RUNS = [True, False, False, True, True, True, True, False, True, True, True, True]  # (registered after slide 2)


def assert_held_back_then_in_phase(got: list[tuple], base: int) -> None:
    """The answers [(slide, lo, hi)] of a query registered after slide 2 and run by HELD_RUNS on a
    stream whose first sub-window is slot `base`: answered late only after a hold, then at each
    window's completing slide again."""
    held = [(s, lo, hi) for s, lo, hi in got if hi != (base + s + 1) * T]
    assert held, "an execution answered after a hold"
    for s, lo, hi in held:  # slide s is HELD_RUNS[s - 3] (registered after slide 2)
        assert s >= 4 and not HELD_RUNS[s - 4], ("late only after a hold", s, got)
    after = [(s, lo, hi) for s, lo, hi in got if s > held[-1][0]]
    assert after and all(hi == (base + s + 1) * T for s, lo, hi in after), "back in phase after the hold"


@pytest.mark.parametrize("clock", ["manual", "event"])
def test_a_query_registered_before_any_whole_window_answers_nothing_until_one_completes(clock):
    """Registered after the first slide: its first execution, at once, answers no rows; the next
    comes at the slide that completes the first whole window. On the event-time stream (first
    sub-window slot 3) the window of slots 2-4 starts before the stream and is never answered: no
    execution at slot 4, which completes it."""
    got = _run_hop_case(clock, 8, 3, 3, 2, register_after=0, runs=[True] * 5, empty=True)
    if clock == "manual":  # windows of slide numbers 0-2, 2-4; sub-window k is [(3 + k) T, (4 + k) T)
        assert got == [(0, None, None), (2, 30, 60), (4, 50, 80)]
    else:  # windows of slots 4-6, 6-8: slides 1-3, 3-5
        assert got == [(0, None, None), (3, 40, 70), (5, 60, 90)]


@pytest.mark.parametrize("seed", range(40))
def test_random_hop_schedules_match_the_brute_force_due_rule(seed):
    rng = random.Random(seed)
    length, every = rng.randint(1, 4), rng.randint(1, 4)
    n = rng.randint(max(length, every), length + every + 1)
    clock = rng.choice(["manual", "processing", "event"])
    runs = [rng.random() < 0.7 for _ in range(rng.randint(4, 16))]
    _run_hop_case(clock, n, rng.randint(0, 7), length, every, rng.randint(-1, n + 1), runs,
                  sharing=rng.choice(["none", "conservative"]), keyed=rng.random() < 0.5, seed=seed)


def test_two_identical_hop_queries_under_sharing_answer_as_each_alone():
    """Under shared execution two registrations of one HOP query were taken for exact duplicates
    of one group, whose joint finish cannot merge per-window partials (the execution failed and
    both queries were stopped); each runs alone, due by its own windows, with the same answers."""
    from windowstore.txn.commands import Register

    e = _hop_engine("manual", 8, 0, "conservative")
    text = ("SELECT window_start, window_end, src, COUNT(*) FROM s [RANGE 3 SUBWINDOWS SLIDE 2 SUBWINDOWS] "
            "GROUP BY window_start, src")
    got: dict = {}
    e.on_answer = lambda qid, res: got.setdefault(qid, []).append((res.slide, res.answer.rows))
    errors: list = []
    e.on_error = lambda qid, err: errors.append((qid, err))
    e.apply(Register("A", text, 0, e.now_ms))
    for k in range(8):
        _feed(e, "manual", k, [(k * T + 1, "ab"[k % 2], k)])
        if k == 3:
            e.apply(Register("B", text, 0, e.now_ms))
        e.sched.run_until_idle()
    assert errors == []
    assert [s for s, _ in got["A"]] == [0, 2, 4, 6] and [s for s, _ in got["B"]] == [3, 4, 6]
    assert got["A"][-2:] == got["B"][-2:] and got["B"][-1][1], "the same windows, answered alike"
