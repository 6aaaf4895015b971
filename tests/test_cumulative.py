"""Cumulative windows (store/cumulative.py): landmark windows `[RANGE UNBOUNDED]` kept as a
running synopsis in the stream's state, and `[CUMULATE STEP s SIZE p]`, against two oracles over
the raw rows: seed 003's window sequence operator evaluated directly in Python (every row since the
landmark or the last reset, up to the end the answer reports) and DuckDB over the same rows with
the bounds each answer reports. Rows arrive out of order within the allowed lateness, so none is
dropped and an event-time window holds exactly the rows inside its bounds."""
from __future__ import annotations

import random

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import examples

from windowstore.store import QueryError, Stream, WindowSpec, parse_query, plan_query, run_plan

SCHEMA = {"ts": "int64", "k": "string", "v": "int64", "x": "float64", "g": "int64"}
G = {"a": 1, "b": 2, "c": 3, "z": 26, None: None}  # g: k's number (per-key running synopses are kept for int64 keys)


def by_g(rows: list[tuple]) -> list[tuple]:
    """DuckDB's rows grouped by k, keyed by g instead, in g order (NULL last)."""
    return sorted(((G[r[0]], *r[1:]) for r in rows), key=lambda r: (r[0] is None, r[0] or 0))


def feed(s: Stream, rows: list[tuple], batch: int, rng: random.Random) -> None:
    i = 0
    while i < len(rows):
        n = rng.randint(1, batch)
        part = rows[i:i + n]
        i += n
        s.append({"ts": [r[0] for r in part], "k": [r[1] for r in part], "v": [r[2] for r in part],
                  "x": [r[3] for r in part], "g": [G[r[1]] for r in part]})
        while s.window.due(0):
            s.window.slide(0)


def disordered(rng: random.Random, count: int, lateness: int) -> list[tuple]:
    rows, newest = [], 0
    for _ in range(count):
        newest += rng.choice([0, 1, 5, 40, 300, 900])
        ts = max(0, newest - rng.randint(0, lateness))
        rows.append((ts, rng.choice(["a", "b", "c", None]), rng.choice([None, rng.randint(-5, 50)]),
                     rng.choice([None, rng.random() * 10 - 5])))
    return rows


def ask(s: Stream, text: str) -> list[tuple]:
    return run_plan(plan_query(parse_query(text), s)).rows


# -- the oracles ---------------------------------------------------------------------------------------
def definition(rows, lo: int, hi: int, key=lambda r: True):
    """(COUNT(*), SUM(v), MIN(v), MAX(v)) over the rows with lo <= ts < hi passing `key`."""
    rs = [r for r in rows if lo <= r[0] < hi and key(r)]
    vs = [r[2] for r in rs if r[2] is not None]
    return len(rs), sum(vs) if vs else None, min(vs, default=None), max(vs, default=None)


def duckdb_rows(rows, sql: str, lo: int, hi: int) -> list[tuple]:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (ts BIGINT, k VARCHAR, v BIGINT, x DOUBLE)")
    if rows:
        con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", rows)
    return [tuple(r) for r in con.execute(sql.format(lo=lo, hi=hi)).fetchall()]


# -- landmark windows --------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(6))
def test_landmark_matches_definition_10_and_duckdb(seed):
    """Long after the first rows left the retained window, [RANGE UNBOUNDED] answers over every row
    since the stream's start, from the running synopsis; grouped per declared key too."""
    rng = random.Random(seed)
    rows = disordered(rng, 400, 1500)
    s = Stream("s", SCHEMA, WindowSpec(subwindows=3, subwindow_ms=1000, clock="event", allowed_lateness_ms=2000,
                                       group_by=("g",)), 0)
    feed(s, rows, 7, rng)
    assert s.window.latest > 10  # most rows were evicted long ago
    got = ask(s, "SELECT window_start, window_end, COUNT(*), SUM(v), MIN(v), MAX(v), COUNT(v) "
                 "FROM s [RANGE UNBOUNDED]")
    assert len(got) == 1
    lo, hi = got[0][:2]
    assert lo == 0 and hi == s.window.sealed(s.window.latest).end_ms
    assert got[0][2:6] == definition(rows, lo, hi)
    assert [got[0][2:]] == duckdb_rows(rows, "SELECT COUNT(*), SUM(v), MIN(v), MAX(v), COUNT(v) FROM t "
                                             "WHERE ts >= {lo} AND ts < {hi}", lo, hi)
    x = ask(s, "SELECT SUM(x), AVG(v) FROM s [RANGE UNBOUNDED]")[0]
    want = duckdb_rows(rows, "SELECT SUM(x), AVG(v) FROM t WHERE ts >= {lo} AND ts < {hi}", lo, hi)[0]
    assert x[0] == pytest.approx(want[0]) and float(x[1]) == pytest.approx(want[1])
    grouped = ask(s, "SELECT g, window_start, window_end, COUNT(*), SUM(v) FROM s [RANGE UNBOUNDED] GROUP BY g")
    want = by_g(duckdb_rows(rows, "SELECT k, {lo}, {hi}, COUNT(*), SUM(v) FROM t WHERE ts >= {lo} AND ts < {hi} "
                                  "GROUP BY k", lo, hi))
    assert grouped == want
    # seed 003 Property 3: selection commutes with the landmark window (sigma_k S)[inf] = sigma_k(S[inf])
    for key in ("a", "b", None):
        mine = [r for r in grouped if r[0] == G[key]]
        alone = definition(rows, lo, hi, lambda r: r[1] == key)
        assert [r[3:] for r in mine] == ([alone[:2]] if alone[0] else [])


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.sampled_from(["a", "b", None]), st.integers(-3, 3)), max_size=60),
       st.integers(1, 5), st.integers(1, 6))
def test_landmark_property_against_the_definition(events, subwindows, every):
    """Any rows (disorder bounded by the lateness), any window: the landmark answer and, with SLIDE,
    the window ending at the newest multiple of SLIDE, as Definition 10 over every row before it."""
    rows, newest = [], 0
    for ts, k, v in events:
        newest = max(newest, ts)
        rows.append((max(ts, newest - 10), k, v, None))
    rows = [(0, "a", 0, None)] + rows + [(45, "z", 0, None)]
    s = Stream("s", SCHEMA, WindowSpec(subwindows=subwindows, subwindow_ms=5, clock="event", allowed_lateness_ms=10,
                                       group_by=("g",)), 0)
    feed(s, rows, 4, random.Random(2))
    got = ask(s, "SELECT window_start, window_end, COUNT(*), SUM(v), MIN(v), MAX(v) FROM s [RANGE UNBOUNDED]")
    end = s.window.sealed(s.window.latest).end_ms
    assert got == [(0, end, *definition(rows, 0, end))]
    if every <= subwindows:
        plan = plan_query(parse_query(f"SELECT window_end, COUNT(*), SUM(v) FROM s [RANGE UNBOUNDED SLIDE {5 * every} ms]"),
                          s, periodic=True)
        got = run_plan(plan).rows
        hi = end // (5 * every) * (5 * every)
        oldest = s.window.sealed(max(0, s.window.latest - min(every, subwindows) + 1)).start_ms
        if hi > oldest:
            assert got == [(hi, *definition(rows, 0, hi)[:2])]
        else:
            assert got == []


def test_landmark_on_processing_time_counts_every_row_sealed():
    """A processing-time stream (the clock injected): the landmark holds every row appended before
    the newest slide, long after the window has moved on."""
    s = Stream("s", SCHEMA, WindowSpec(subwindows=2, subwindow_ms=100, group_by=("g",)), 0)
    total = []
    for j in range(12):
        part = [(j, "a" if i % 2 else "b", i, 0.5) for i in range(j)]
        s.append({"ts": [r[0] for r in part], "k": [r[1] for r in part], "v": [r[2] for r in part],
                  "x": [r[3] for r in part], "g": [G[r[1]] for r in part]})
        total += part
        s.window.slide(100 * (j + 1))
    got = ask(s, "SELECT window_start, window_end, COUNT(*), SUM(v), MAX(v), SUM(x) FROM s [RANGE UNBOUNDED]")
    assert got == [(0, 1200, len(total), sum(r[2] for r in total), max(r[2] for r in total), 0.5 * len(total))]
    assert ask(s, "SELECT COUNT(DISTINCT g) FROM s [RANGE UNBOUNDED]") == [(2,)]


def test_string_keys_are_not_kept_so_compaction_still_frees_them():
    """A landmark keeps no per-key state of a string column (it would keep every string ever seen in
    the dictionary): GROUP BY and COUNT(DISTINCT) of one are refused by name, and the strings that
    left the window are freed by compaction as before."""
    s = Stream("s", SCHEMA, WindowSpec(subwindows=2, subwindow_ms=100, group_by=("k",)), 0)
    for j, key in enumerate(["old", "mid", "new", "new", "new"]):
        s.append({"ts": [j], "k": [key], "v": [j], "x": [0.0], "g": [j]})
        s.window.slide(100 * (j + 1))
    for text in ("SELECT k, COUNT(*) FROM s [RANGE UNBOUNDED] GROUP BY k", "SELECT COUNT(DISTINCT k) FROM s [RANGE UNBOUNDED]"):
        with pytest.raises(QueryError, match="kept for (int64 and boolean columns only|string columns)"):
            plan_query(parse_query(text), s)
    assert ask(s, "SELECT COUNT(*), SUM(v) FROM s [RANGE UNBOUNDED]") == [(5, 10)]
    assert s.compact_strings() == 2  # "old" and "mid"
    assert ask(s, "SELECT COUNT(*), SUM(v) FROM s [RANGE UNBOUNDED]") == [(5, 10)]


# -- CUMULATE ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(6))
def test_cumulate_matches_definition_10_and_duckdb(seed):
    """[CUMULATE STEP s SIZE p]: the newest window [k p, k p + j s) completed by the sealed
    sub-windows, WHERE and GROUP BY included (selection commutes with temporal windows)."""
    rng = random.Random(seed)
    rows = disordered(rng, 300, 1500)
    s = Stream("s", SCHEMA, WindowSpec(subwindows=8, subwindow_ms=500, clock="event", allowed_lateness_ms=2000), 0)
    step, size = rng.choice([(500, 2000), (1000, 3000), (1000, 1000), (1500, 3000)])
    checked = 0
    for cut in range(60, 301, 60):
        feed(s, rows[cut - 60:cut], 5, rng)
        got = ask(s, f"SELECT window_start, window_end, k, COUNT(*), SUM(v) FROM s [CUMULATE STEP {step} ms SIZE "
                     f"{size} ms] WHERE v > 0 GROUP BY k")
        if s.window.latest < 0:
            continue
        end = s.window.sealed(s.window.latest).end_ms // step * step
        start = (end - 1) // size * size
        want = duckdb_rows(rows, "SELECT {lo}, {hi}, k, COUNT(*), SUM(v) FROM t WHERE ts >= {lo} AND ts < {hi} "
                                 "AND v > 0 GROUP BY k ORDER BY k NULLS LAST", start, end)
        assert got == want, (start, end)
        assert all(start % size == 0 and 0 < end - start <= size for start, end, *_ in got)
        checked += bool(got)
    assert checked >= 3


def test_cumulate_windows_grow_by_step_and_reset_every_size():
    """Registered, a CUMULATE query runs every STEP and answers windows that grow from each reset."""
    from windowstore.txn.commands import Append, CreateStream, Register
    from windowstore.txn.engine import Engine, EngineConfig

    e = Engine(EngineConfig(policy="ttu"))
    e.apply(CreateStream("s", tuple(SCHEMA.items()), "ts", WindowSpec(6, 1000, None, "event", 0, (), 4), 0))
    got: list = []
    e.on_answer = lambda qid, r: got.append(r.answer.rows)
    e.apply(Register("C", "SELECT window_start, window_end, COUNT(*), SUM(v) FROM s [CUMULATE STEP 1 s SIZE 4 s]", 0, 0))
    rows = []
    for t in range(0, 20_000, 250):
        rows.append((t, "a", t // 1000, 0.0))
        e.apply(Append("s", {"ts": [t], "k": ["a"], "v": [t // 1000], "x": [0.0], "g": [1]}, "", None, t))
        e.tick(t)
        e.sched.run_until_idle()
    windows = [r[0][:2] for r in got if r]
    assert len(windows) >= 12
    for a, b in windows:
        assert a % 4000 == 0 and b - a in (1000, 2000, 3000, 4000)
    for rs in got:
        for a, b, n, total in rs:
            assert (n, total) == definition(rows, a, b)[:2]
    assert {b - a for a, b in windows} == {1000, 2000, 3000, 4000}


# -- durability -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("snapshots", [False, True])
def test_a_restarted_server_answers_as_before(tmp_path, snapshots):
    """Kill -9 and restart on the same data directory: the running synopsis comes back from the
    log's replay (or a snapshot and the log after it) and the landmark answers as before, then
    goes on as DuckDB over every row says."""
    import os

    from conftest import wait_for
    from windowstore.clients import Client
    from windowstore.server.process import ServerProcess

    args = ("--snapshot-every-mb", "0.001") if snapshots else ()
    rng = random.Random(5)
    rows: list = []
    query = "SELECT g, window_start, window_end, COUNT(*), SUM(v), AVG(v), SUM(x) FROM p [RANGE UNBOUNDED] GROUP BY g"
    flat = "SELECT window_start, window_end, COUNT(*), SUM(v), MIN(v), MAX(v), SUM(x) FROM p [RANGE UNBOUNDED]"

    def feed_server(ws, count):
        for _ in range(count):
            part = [(len(rows) + i, rng.choice("abc"), rng.randint(-9, 9), rng.random()) for i in range(3)]
            rows.extend(part)
            ws.append("p", {"ts": [r[0] for r in part], "k": [r[1] for r in part], "v": [r[2] for r in part],
                            "x": [r[3] for r in part], "g": [G[r[1]] for r in part]})
            ws.slide("p")

    def want(lo, hi):
        return duckdb_rows(rows, "SELECT {lo}, {hi}, COUNT(*), SUM(v), MIN(v), MAX(v), SUM(x) FROM t", lo, hi)

    srv = ServerProcess(*args, data_dir=str(tmp_path))
    try:
        with Client(srv.target, timeout=30) as ws:
            ws.create_stream("p", schema=SCHEMA, subwindows=2, subwindow_ms=1000, clock="manual", group_by=["g"])
            feed_server(ws, 30)
            before, flat_before = ws.query(query).rows, ws.query(flat).rows
            lo, hi = flat_before[0][:2]
            assert [r[:6] for r in flat_before] == [r[:6] for r in want(lo, hi)]
            assert flat_before[0][6] == pytest.approx(want(lo, hi)[0][6])
        if snapshots:
            wait_for(lambda: any(s.isdigit() for s in os.listdir(tmp_path / "snapshots")), "a snapshot")
    finally:
        srv.proc.kill()
        srv.proc.wait()
    for _ in range(2):  # after kill -9 (log replay or snapshot + log), then after a clean stop (snapshot)
        srv = ServerProcess(data_dir=str(tmp_path))
        try:
            with Client(srv.target, timeout=30) as ws:
                assert ws.query(query).rows == before  # float sums too: the same additions in the same order
                assert ws.query(flat).rows == flat_before
        finally:
            srv.stop()
    srv = ServerProcess(data_dir=str(tmp_path))
    try:
        with Client(srv.target, timeout=30) as ws:
            feed_server(ws, 4)
            got = ws.query(flat).rows
            assert [r[:6] for r in got] == [r[:6] for r in want(*got[0][:2])]
    finally:
        srv.stop()


# -- refusals, int64 edges, text ------------------------------------------------------------------------------
@pytest.mark.parametrize("text, message", [
    ("SELECT COUNT(*) FROM s [RANGE UNBOUNDED] WHERE v > 0", "WHERE is not supported"),
    ("SELECT QUANTILE(v, 0.5) FROM s [RANGE UNBOUNDED]", "holistic"),
    ("SELECT v, COUNT(*) FROM s [RANGE UNBOUNDED] GROUP BY v", "per-key synopses of v"),
    ("SELECT k, COUNT(*) FROM s [RANGE UNBOUNDED] GROUP BY k", "int64 and boolean columns only"),
    ("SELECT ts, v FROM s [RANGE UNBOUNDED]", "keeps no rows"),
    ("SELECT g, MIN(v) FROM s [RANGE UNBOUNDED] GROUP BY g", r"MIN\(v\) is not kept .* position 10"),
    ("SELECT COUNT(*) FROM s [RANGE UNBOUNDED] AS OF SLIDE 1", "AS OF SLIDE is not supported"),
    ("SELECT COUNT(*) FROM s [RANGE UNBOUNDED SLIDE 1500 ms]", "SLIDE"),
    ("SELECT COUNT(*) FROM s [CUMULATE STEP 1 s SIZE 1 h]", "no running synopsis is kept per reset period"),
    ("SELECT COUNT(*) FROM s [CUMULATE STEP 1500 ms SIZE 3 s]", "STEP 1500 ms is not a multiple"),
    ("SELECT COUNT(*) FROM s [CUMULATE STEP 2 s SIZE 3 s]", "SIZE 3000 ms is not a multiple of STEP"),
    ("SELECT COUNT(*) FROM s [CUMULATE STEP 9223372036854775807 s SIZE 1 s]", "STEP is .* beyond int64"),
    ("SELECT COUNT(*) FROM s [CUMULATE STEP 1 s SIZE 9223372036854775808 ms]", "too large"),
    ("SELECT COUNT(*) FROM s [CUMULATE STEP 1 SUBWINDOWS SIZE 2 s]", "STEP must be a time length"),
    ("SELECT COUNT(*) FROM s [CUMULATE SIZE 2 s]", "STEP"),
    ("SELECT COUNT(*) FROM s [CUMULATE STEP 0 s SIZE 2 s]", "STEP must be positive"),
])
def test_refusals_name_the_field(text, message):
    s = Stream("s", SCHEMA, WindowSpec(subwindows=5, subwindow_ms=1000, clock="event", group_by=("k", "g")), 0)
    with pytest.raises(QueryError, match=message):
        plan_query(parse_query(text), s)


def test_cumulate_needs_time_slots():
    s = Stream("s", SCHEMA, WindowSpec(subwindows=5, subwindow_ms=1000, clock="manual"), 0)
    with pytest.raises(QueryError, match="CUMULATE needs a time-based stream"):
        plan_query(parse_query("SELECT COUNT(*) FROM s [CUMULATE STEP 1 s SIZE 2 s]"), s)


def test_landmark_bounds_at_the_top_of_int64_are_exact():
    t = 1000
    spec = WindowSpec(subwindows=2, subwindow_ms=t, clock="event")
    lo, hi = spec.event_time_limits()
    s = Stream("s", SCHEMA, spec, 0)
    start = hi + 1 - 3 * t  # the last three slots end at the largest bound int64 holds
    assert start % t == 0
    ts = [start, start + 1500, start + 2999]
    s.append({"ts": ts, "k": ["a"] * 3, "v": [1, 2, 3], "x": [0.0] * 3, "g": [1] * 3})
    for _ in range(3):
        s.window.slide(0)
    got = ask(s, "SELECT window_start, window_end, COUNT(*), SUM(v) FROM s [RANGE UNBOUNDED]")
    assert got == [(start, start + 3 * t, 3, 6)] and start + 3 * t == hi + 1
    got = ask(s, "SELECT window_start, window_end, COUNT(*) FROM s [CUMULATE STEP 1 s SIZE 2 s]")
    end = start + 3 * t
    assert got == [((end - 1) // 2000 * 2000, end, sum(1 for x in ts if (end - 1) // 2000 * 2000 <= x < end))]


def test_the_query_text_and_the_structured_form_round_trip():
    from windowstore.server.convert import query_from_pb, query_to_pb
    from windowstore.store import to_text

    for text in ["SELECT window_start, COUNT(*) FROM s [RANGE UNBOUNDED SLIDE 1 h]",
                 "SELECT k, SUM(v) FROM s [RANGE UNBOUNDED] GROUP BY k",
                 "SELECT window_end, COUNT(*) FROM s [CUMULATE STEP 1 h SIZE 24 h] WHERE v > 3"]:
        q = parse_query(text)
        assert parse_query(to_text(q)) == q
        assert query_from_pb(query_to_pb(q)) == q  # (tests/test_structured_cumulative.py: the same answers)


# -- random shapes (the fuzzer, tests/slicing_fuzz.py, runs thousands) ---------------------------------------
def check_cumulative_case(seed: int) -> None:
    """One random landmark or CUMULATE shape over a random event-time stream (sub-window length,
    count, lateness, out-of-order rows), queried after each of a few batches, against Definition 10
    in Python and DuckDB over the rows with the bounds each answer reports."""
    rng = random.Random(seed)
    t = rng.choice([1, 3, 7, 10, 100, 250])
    n = rng.randint(1, 8)
    lateness = rng.choice([0, t, 3 * t])
    s = Stream("s", SCHEMA, WindowSpec(subwindows=n, subwindow_ms=t, clock="event", allowed_lateness_ms=lateness,
                                       group_by=("g",)), 0)
    if rng.random() < 0.5:
        kind = "landmark"
        every = rng.choice([None, *range(1, n + 1)])
        grouped = rng.random() < 0.5
        window = "[RANGE UNBOUNDED]" if every is None else f"[RANGE UNBOUNDED SLIDE {every * t} ms]"
        text = (f"SELECT {'g, ' if grouped else ''}window_start, window_end, COUNT(*), SUM(v) FROM s {window}"
                + (" GROUP BY g" if grouped else ""))
        where = "TRUE"
    else:
        kind = "cumulate"
        step = t * rng.randint(1, max(1, n // 2))
        size = step * rng.randint(1, max(1, (n * t + t) // step - 1))
        while (size + step) // t - 1 > n:
            size -= step
        if size < step:
            return
        grouped = rng.random() < 0.5
        where = rng.choice(["TRUE", "v > 0", "v IS NULL", "k = 'a'"])
        window = f"[CUMULATE STEP {step} ms SIZE {size} ms]"
        text = (f"SELECT {'g, ' if grouped else ''}window_start, window_end, COUNT(*), SUM(v) FROM s {window}"
                + (f" WHERE {where}" if where != "TRUE" else "") + (" GROUP BY g" if grouped else ""))
    rows: list = []
    newest = 0
    for _ in range(rng.randint(1, 6)):
        batch = []
        for _ in range(rng.randint(0, 30)):
            # steps of up to 2 sub-windows only when the window has 2 or more: a chunk of 5 rows then
            # stays within the 10 x n sub-windows ahead of the watermark that an append may reach
            newest += rng.choice([0, 1, t // 2, t] + ([2 * t] if n > 1 else []))
            ts = max(0, newest - rng.randint(0, lateness))
            batch.append((ts, rng.choice(["a", "b", None]), rng.choice([None, rng.randint(-5, 9)]), None))
        rows += batch
        feed(s, batch, 5, rng)
        periodic = kind == "landmark" and every is not None
        plan = plan_query(parse_query(text), s, periodic=periodic)
        got = run_plan(plan).rows
        if s.window.latest < 0:
            assert got == [], (text, got)
            continue
        bounds = {(r[1], r[2]) if grouped else (r[0], r[1]) for r in got}
        assert len(bounds) <= 1, (text, got)
        if not got:
            continue
        lo, hi = bounds.pop()
        end = s.window.sealed(s.window.latest).end_ms
        if kind == "landmark":
            assert lo == s.window._base_slot * t, (text, lo)  # the first sub-window's start (earlier rows: late)
            assert hi <= end and (every is None and hi == end or every is not None and hi % (every * t) == 0)
        else:
            assert hi == end // step * step and lo == (hi - 1) // size * size, (text, lo, hi, end)
        py_where = {"TRUE": lambda r: True, "v > 0": lambda r: r[2] is not None and r[2] > 0,
                    "v IS NULL": lambda r: r[2] is None, "k = 'a'": lambda r: r[1] == "a"}[where]
        if grouped:
            want = []
            for key in sorted({r[1] for r in rows if lo <= r[0] < hi and py_where(r)}, key=lambda k: (k is None, k or "")):
                c = definition(rows, lo, hi, lambda r: r[1] == key and py_where(r))
                want.append((G[key], lo, hi, c[0], c[1]))
            sql = "SELECT k, {lo}, {hi}, COUNT(*), SUM(v) FROM t WHERE ts >= {lo} AND ts < {hi} AND " + where + " GROUP BY k"
        else:
            c = definition(rows, lo, hi, py_where)
            want = [(lo, hi, c[0], c[1])]
            sql = "SELECT {lo}, {hi}, COUNT(*), SUM(v) FROM t WHERE ts >= {lo} AND ts < {hi} AND " + where
        assert got == want, (text, got, want)
        assert got == (by_g(duckdb_rows(rows, sql, lo, hi)) if grouped else duckdb_rows(rows, sql, lo, hi)), (text, got)


@pytest.mark.parametrize("seed", range(40))
def test_random_shapes_match_the_oracles(seed):
    check_cumulative_case(seed)


def test_landmark_groups_of_an_int64_column_with_nulls():
    """int64 group keys (NULL's group is an object-array key) merge across sub-windows exactly."""
    from collections import Counter

    s = Stream("s", {"ts": "int64", "g": "int64", "v": "int64"}, WindowSpec(subwindows=2, subwindow_ms=100,
                                                                             group_by=("g",)), 0)
    seen: list = []
    for j, keys in enumerate([[1, 2], [None, 2], [3, None], [1, 1], [None], [2**62, -2**62]]):
        s.append({"ts": [j] * len(keys), "g": keys, "v": [2**61] * len(keys)})
        seen += keys
        s.window.slide(100 * (j + 1))
    got = ask(s, "SELECT g, COUNT(*), SUM(v) FROM s [RANGE UNBOUNDED] GROUP BY g")
    counts = Counter(seen)
    want = sorted(((k, c, c * 2**61) for k, c in counts.items()), key=lambda r: (r[0] is None, r[0] or 0))
    assert got == want


@pytest.mark.parametrize("text, reason", [
    ("SELECT COUNT(*), SUM(v) FROM s [RANGE UNBOUNDED SLIDE 1 s]", "reads the stream's running synopsis"),
    ("SELECT COUNT(*) FROM s [CUMULATE STEP 1 s SIZE 2 s]", "merges the partials of the sub-windows since its last"),
    ("SELECT window_start, COUNT(*) FROM s [RANGE 1500 ms SLIDE 500 ms] GROUP BY window_start",
     "share the slice partials kept per sub-window"),
    ("SELECT COUNT(*) FROM s [ROWS 5 SLIDE 1 s]", "rows windows are cut from the rows"),
])
def test_sharing_says_what_each_window_reads(text, reason):
    """txn/sharing/rules.py labels a periodic landmark, CUMULATE or sliced query by what it reads (a
    landmark reads no rows: it was labelled as cut from them)."""
    from windowstore.txn.commands import CreateStream
    from windowstore.txn.engine import Engine, EngineConfig

    eng = Engine(EngineConfig(policy="ttu", sharing="conservative"))
    eng.apply(CreateStream("s", tuple(SCHEMA.items()), "ts", WindowSpec(subwindows=10, subwindow_ms=1000,
                                                                         clock="event"), 0))
    why = eng.sched.sharing.explain(eng.plan(parse_query(text), periodic=True), 1)
    assert reason in why and "runs alone" in why, why
    if "UNBOUNDED" in text:
        assert "rows" not in why, why


def test_the_running_per_key_state_is_bounded_and_refused_by_name_past_its_limit(monkeypatch):
    """A landmark's per-key synopsis of a group_by column holds at most MAX_LANDMARK_KEYS keys: past
    it the column's per-key state is dropped for good (so memory stays bounded), a landmark GROUP BY
    or COUNT(DISTINCT) of it is refused with ResourceLimit (RESOURCE_EXHAUSTED) naming the limit,
    and the whole-stream aggregates still answer as Definition 10 says; a snapshot keeps the drop."""
    from windowstore.store import cumulative
    from windowstore.store.errors import ResourceLimit

    monkeypatch.setattr(cumulative, "MAX_LANDMARK_KEYS", 4)
    s = Stream("s", SCHEMA, WindowSpec(subwindows=2, subwindow_ms=1000, clock="event", group_by=("g",)), 0)
    rows = []

    def add(second: int, keys: list[int]) -> None:
        batch = [(second * 1000 + i, "a", key, None) for i, key in enumerate(keys)]
        rows.extend(batch)
        s.append({"ts": [r[0] for r in batch], "k": [r[1] for r in batch], "v": [r[2] for r in batch],
                  "x": [r[3] for r in batch], "g": [r[2] for r in batch]})
        while s.window.due(0):
            s.window.slide(0)

    grouped = "SELECT g, COUNT(*) FROM s [RANGE UNBOUNDED] GROUP BY g"
    for second, keys in enumerate([[1, 2], [2, 3], [3, 4], [4]]):  # four keys: within the limit
        add(second, keys)
    assert ask(s, grouped) == [(1, 1), (2, 2), (3, 2), (4, 1)]
    for second, keys in enumerate([[5], [1], [6, 7], [1]], start=4):  # a fifth key, and more
        add(second, keys)
    end = s.window.sealed(s.window.latest).end_ms
    for text in (grouped, "SELECT COUNT(DISTINCT g) FROM s [RANGE UNBOUNDED]"):
        with pytest.raises(ResourceLimit, match=r"per-key synopsis of g passed 4 keys \(MAX_LANDMARK_KEYS\)") as err:
            ask(s, text)
        assert err.value.limit == 4
    c = definition(rows, 0, end)
    assert ask(s, "SELECT COUNT(*), SUM(v), MIN(v), MAX(v) FROM s [RANGE UNBOUNDED]") == [c]
    state = s.window.sealed(s.window.latest).running
    assert state.dropped == {"g"} and "g" not in state.synopsis.by_key
    assert s.window.running_base.dropped == {"g"}  # the state kept across evictions, not just the newest
    restored = cumulative.Running.from_plain(s.window.running_base.to_plain())
    assert restored.dropped == {"g"} and restored.add(s.window.sealed(s.window.latest)).dropped == {"g"}


def test_a_landmark_past_its_key_limit_fails_with_the_limit_not_an_internal_error(monkeypatch):
    """Through the scheduler the refusal stays a ResourceLimit (the server's RESOURCE_EXHAUSTED),
    not a QueryFailed (INTERNAL)."""
    from windowstore.store import cumulative
    from windowstore.store.errors import ResourceLimit
    from windowstore.txn import Scheduler

    monkeypatch.setattr(cumulative, "MAX_LANDMARK_KEYS", 2)
    s = Stream("s", SCHEMA, WindowSpec(subwindows=2, subwindow_ms=1000, clock="event", group_by=("g",)), 0)
    sched = Scheduler("ttu", clock=lambda: 0)
    sched.add_stream(s)
    s.append({"ts": [0, 1, 2, 1000], "k": ["a"] * 4, "v": [1, 2, 3, 4], "x": [0.0] * 4, "g": [1, 2, 3, 1]})
    while s.window.due(0):
        s.window.slide(0)
    txn = sched.run_now(plan_query(parse_query("SELECT g, COUNT(*) FROM s [RANGE UNBOUNDED] GROUP BY g"), s))
    assert txn is not None and txn.done
    assert isinstance(txn.error, ResourceLimit) and "MAX_LANDMARK_KEYS" in str(txn.error), txn.error


@pytest.mark.parametrize("text", ["SELECT window_start, window_end, COUNT(*) FROM s [RANGE UNBOUNDED]",
                                  "SELECT window_start, window_end, COUNT(*) FROM s [CUMULATE STEP 1 s SIZE 3 s]"])
def test_an_answer_reports_the_bounds_of_the_window_it_is_over(text):
    """A landmark or CUMULATE answer's window_start_ms/window_end_ms are its window's, as its
    window_start/window_end columns (checked against Definition 10 above) say, not the bounds of the
    sub-windows it read (the landmark reads one: the newest)."""
    from windowstore.txn import Scheduler

    s = Stream("s", SCHEMA, WindowSpec(subwindows=4, subwindow_ms=1000, clock="event"), 0)
    sched = Scheduler("ttu", clock=lambda: 0)
    sched.add_stream(s)
    for second in range(9):
        s.append({"ts": [second * 1000 + 5], "k": ["a"], "v": [second], "x": [0.0], "g": [1]})
        while s.window.due(0):
            s.window.slide(0)
    txn = sched.run_now(plan_query(parse_query(text), s))
    assert txn is not None and txn.done and txn.error is None
    (start, end, count), = txn.result.answer.rows
    assert (txn.result.window_start_ms, txn.result.window_end_ms) == (start, end)
    assert end == s.window.sealed(s.window.latest).end_ms == 8000
    assert (start, count) == ((0, 8) if "UNBOUNDED" in text else (6000, 2))
