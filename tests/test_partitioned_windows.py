"""Partitioned windows `[PARTITION BY a ROWS n]` (seed 003 Definition 11: the union over keys of
each key's last n rows), kept beyond the stream's time window (store/last_rows.py): against
Definition 11 evaluated in Python and DuckDB's ROW_NUMBER over every row ever appended; the key
limit (RESOURCE_EXHAUSTED naming it, nothing applied); string compaction; and a server restarted
from its log or from a snapshot answering as before."""
from __future__ import annotations

import os
import random

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import examples

from windowstore.store import InvalidInput, QueryError, Stream, WindowSpec, parse_query, plan_query, run_plan
from windowstore.store.errors import OutOfRange, ResourceLimit

SCHEMA = {"ts": "int64", "k": "string", "g": "int64", "v": "int64"}


def definition_11(rows, by: tuple[int, ...], n: int):
    """Per key of the columns at `by` (positions in (ts, k, g, v)), its last n rows in positional
    order (event time, then arrival)."""
    per: dict = {}
    for i, r in enumerate(rows):
        per.setdefault(tuple(r[j] for j in by), []).append((r[0], i, r))
    return [r for key in per for _, _, r in sorted(per[key])[-n:]]


def duckdb_last(rows, by: str, n: int):
    con = duckdb.connect()
    con.execute("CREATE TABLE r (ts BIGINT, k VARCHAR, g BIGINT, v BIGINT, arrival BIGINT)")
    if rows:
        con.executemany("INSERT INTO r VALUES (?, ?, ?, ?, ?)", [(*r, i) for i, r in enumerate(rows)])
    return con.execute(f"""
        SELECT ts, k, g, v FROM (
            SELECT *, ROW_NUMBER() OVER (PARTITION BY {by} ORDER BY ts DESC, arrival DESC) AS pos FROM r)
        WHERE pos <= {n}""").fetchall()


def make(clock: str, rng: random.Random, last_rows: int, by=("k",), keys: int = 0):
    t = 100
    spec = WindowSpec(subwindows=rng.randint(1, 4), subwindow_ms=t, clock=clock,
                      allowed_lateness_ms=3 * t if clock == "event" else 0,
                      last_rows=last_rows, last_rows_by=by, last_rows_keys=keys)
    return Stream("s", SCHEMA, spec, 0)


def run(s: Stream, rows, rng: random.Random, clock: str) -> None:
    """Append `rows` in batches with slides between them (due ones for event time)."""
    i, now = 0, 0
    while i < len(rows):
        n = rng.randint(1, 6)
        part = rows[i:i + n]
        i += n
        s.append({"ts": [r[0] for r in part], "k": [r[1] for r in part], "g": [r[2] for r in part],
                  "v": [r[3] for r in part]})
        if clock == "event":
            while s.window.due(0):
                s.window.slide(0)
        elif rng.random() < 0.6:
            now += 100
            s.window.slide(now if clock == "manual" else (s.window._base_slot + s.window.latest + 2) * 100)


def random_rows(rng: random.Random, count: int, clock: str):
    rows, newest = [], 0
    for _ in range(count):
        newest += rng.choice([0, 3, 40, 90])
        ts = max(0, newest - rng.randint(0, 250)) if clock == "event" else rng.randint(0, 5000)
        rows.append((ts, rng.choice(["a", "b", "c", "d", None]), rng.choice([1, 2, None]), rng.randint(-9, 99)))
    return rows


def answered_rows(s: Stream):
    """The rows the stream has sealed (a partitioned window's state counts sealed rows only)."""
    return sum(sub.rows for sub in s.window.subs if sub is not None)


@pytest.mark.parametrize("seed", range(25))
@pytest.mark.parametrize("clock", ["event", "processing", "manual"])
def test_last_rows_per_key_match_definition_11_and_duckdb(seed, clock):
    rng = random.Random(seed)
    n = rng.choice([1, 2, 3])
    by = rng.choice([("k",), ("k", "g")])
    s = make(clock, rng, n + rng.randint(0, 2), by)
    rows = random_rows(rng, rng.randint(1, 70), clock)
    run(s, rows, rng, clock)
    sealed = rows[:len(rows) - s.window.buffered_rows] if clock != "event" else None
    if clock == "event":  # sealed: the rows of slots the watermark passed (no row is late here)
        assert s.window.late_rows == 0
        end = s.window.sealed(s.window.latest).end_ms if s.window.latest >= 0 else None
        sealed = [r for r in rows if end is not None and r[0] < end]
    got = run_plan(plan_query(parse_query(f"SELECT ts, k, g, v FROM s [PARTITION BY {', '.join(by)} ROWS {n}]"), s))
    positions = tuple(("ts", "k", "g", "v").index(c) for c in by)
    want = definition_11(sealed, positions, n)
    assert sorted(got.rows, key=repr) == sorted(want, key=repr)
    assert sorted(duckdb_last(sealed, ", ".join(by), n), key=repr) == sorted(want, key=repr)
    agg = run_plan(plan_query(parse_query(f"SELECT k, COUNT(*), SUM(v) FROM s [PARTITION BY {', '.join(by)} ROWS {n}] "
                                          "WHERE v > 10 GROUP BY k ORDER BY k"), s)).rows
    groups: dict = {}
    for r in want:
        if r[3] > 10:
            groups.setdefault(r[1], []).append(r[3])
    assert agg == [(k, len(groups[k]), sum(groups[k])) for k in sorted(groups, key=lambda k: (k is None, k))]


def test_the_last_value_of_a_key_outlives_the_time_window():
    """Seed 003 Example 4's S[id / i, i, 1n]: the last value each sensor sent, however long ago."""
    s = Stream("s", SCHEMA, WindowSpec(subwindows=2, subwindow_ms=10, clock="manual", last_rows=1,
                                       last_rows_by=("k",)), 0)
    s.append({"ts": [1, 2], "k": ["quiet", "busy"], "g": [0, 0], "v": [7, 1]})
    for i in range(10):
        s.window.slide(i)
        s.append({"ts": [10 + i], "k": ["busy"], "g": [0], "v": [i]})
    s.window.slide(99)
    assert run_plan(plan_query(parse_query("SELECT COUNT(*) FROM s WHERE k = 'quiet'"), s)).rows == [(0,)]
    got = run_plan(plan_query(parse_query("SELECT k, v FROM s [PARTITION BY k ROWS 1] ORDER BY k"), s)).rows
    assert got == [("busy", 9), ("quiet", 7)]


def test_the_key_limit_refuses_new_keys_naming_it_and_applies_nothing():
    s = Stream("s", SCHEMA, WindowSpec(subwindows=2, subwindow_ms=10, clock="manual", last_rows=1,
                                       last_rows_by=("k",), last_rows_keys=3), 0)
    s.append({"ts": [1, 2, 3], "k": ["a", "b", None], "g": [0] * 3, "v": [1, 2, 3]})
    strings, buffered = len(s.strings), s.window.buffered_rows
    with pytest.raises(ResourceLimit, match=r"at most 3 keys \(last_rows_keys\)") as e:
        s.append({"ts": [4, 5], "k": ["a", "new"], "g": [0, 0], "v": [4, 5]})
    assert e.value.limit == 3 and e.value.needed == 4
    assert (len(s.strings), s.window.buffered_rows) == (strings, buffered)
    s.append({"ts": [6], "k": ["b"], "g": [0], "v": [6]})  # known keys still come in
    s.window.slide(10)
    assert run_plan(plan_query(parse_query("SELECT k, v FROM s [PARTITION BY k ROWS 1] ORDER BY k"), s)).rows == \
        [("a", 1), ("b", 6), (None, 3)]


def test_string_compaction_keeps_the_strings_of_the_kept_rows():
    s = Stream("s", SCHEMA, WindowSpec(subwindows=1, subwindow_ms=10, clock="manual", last_rows=1,
                                       last_rows_by=("g",)), 0)
    s.append({"ts": [1], "k": ["old"], "g": [1], "v": [1]})
    s.window.slide(1)
    for i in range(3):
        s.append({"ts": [2 + i], "k": [f"x{i}"], "g": [2], "v": [i]})
        s.window.slide(2 + i)
    before = run_plan(plan_query(parse_query("SELECT g, k FROM s [PARTITION BY g ROWS 1] ORDER BY g"), s)).rows
    assert before == [(1, "old"), (2, "x2")]
    assert s.compact_strings() == 2  # x0, x1: neither in the window nor kept
    assert run_plan(plan_query(parse_query("SELECT g, k FROM s [PARTITION BY g ROWS 1] ORDER BY g"), s)).rows == before


@pytest.mark.parametrize("kw, message", [
    (dict(last_rows=2), "together"),
    (dict(last_rows_by=("k",)), "together"),
    (dict(last_rows=1, last_rows_by=("nope",)), "unknown column"),
    (dict(last_rows=10_001, last_rows_by=("k",)), "last_rows must be between"),
    (dict(last_rows=1, last_rows_by=("k",), last_rows_keys=2**64 - 1), "last_rows_keys must be between"),
    (dict(last_rows=1000, last_rows_by=("k",), last_rows_keys=1_000_000), "more than the"),
])
def test_stream_refusals_name_the_field(kw, message):
    with pytest.raises(InvalidInput, match=message) as e:
        Stream("s", SCHEMA, WindowSpec(subwindows=2, subwindow_ms=10, **kw), 0)
    if isinstance(e.value, OutOfRange):
        assert e.value.field in ("last_rows", "last_rows_keys")


@pytest.mark.parametrize("text, message", [
    ("SELECT k FROM s [PARTITION BY g ROWS 1]", "keeps its last rows per k"),
    ("SELECT k FROM s [PARTITION BY k ROWS 3]", "keeps the last 2 rows"),
    ("SELECT k FROM s [PARTITION BY nope ROWS 1]", "unknown column"),
    ("SELECT window_start, COUNT(*) FROM s [PARTITION BY k ROWS 1]", "SESSION windows only"),
])
def test_query_refusals_name_the_reason(text, message):
    s = Stream("s", SCHEMA, WindowSpec(subwindows=2, subwindow_ms=10, last_rows=2, last_rows_by=("k",)), 0)
    with pytest.raises(QueryError, match=message):
        plan_query(parse_query(text), s)
    plain = Stream("s", SCHEMA, WindowSpec(subwindows=2, subwindow_ms=10), 0)
    with pytest.raises(QueryError, match="keep its last rows per key|unknown column|SESSION windows only"):
        plan_query(parse_query(text), plain)


@pytest.mark.slow
@pytest.mark.parametrize("snapshots", [False, True])
def test_a_restarted_server_answers_as_before(tmp_path, snapshots):
    """Kill -9 and restart on the same data directory: the kept rows come back from the log's
    replay (or a snapshot and the log after it), answers are the same, the state goes on from
    there, and the key limit still counts the keys accepted before the restart."""
    from conftest import wait_for
    from windowstore.clients import Client, ResourceExhausted
    from windowstore.server.process import ServerProcess

    args = ("--snapshot-every-mb", "0.001") if snapshots else ()
    rng = random.Random(3)
    rows: list = []
    query = "SELECT k, ts, v FROM p [PARTITION BY k ROWS 2]"

    def feed(ws, count):
        for _ in range(count):
            part = [(len(rows) + i, rng.choice("abcdefg"), 0, rng.randint(0, 9)) for i in range(3)]
            rows.extend(part)
            ws.append("p", {"ts": [r[0] for r in part], "k": [r[1] for r in part], "g": [0] * 3,
                            "v": [r[3] for r in part]})
            ws.slide("p")

    def want():
        return sorted((r[1], r[0], r[3]) for r in definition_11(rows, (1,), 2))

    srv = ServerProcess(*args, data_dir=str(tmp_path))
    try:
        with Client(srv.target, timeout=30) as ws:
            ws.create_stream("p", schema=SCHEMA, subwindows=2, subwindow_ms=1000, clock="manual", last_rows=2,
                             last_rows_by=["k"], last_rows_keys=7)
            feed(ws, 30)
            before = ws.query(query).rows
            assert sorted(before) == want()
        if snapshots:
            wait_for(lambda: any(s.isdigit() for s in os.listdir(tmp_path / "snapshots")), "a snapshot")
    finally:
        srv.proc.kill()
        srv.proc.wait()
    srv = ServerProcess(data_dir=str(tmp_path))
    try:
        with Client(srv.target, timeout=30) as ws:
            assert ws.query(query).rows == before
            feed(ws, 5)
            assert sorted(ws.query(query).rows) == want()
            with pytest.raises(ResourceExhausted, match="last_rows_keys"):
                ws.append("p", {"ts": [10**6], "k": ["h"], "g": [0], "v": [0]})
    finally:
        srv.stop()
    srv = ServerProcess(data_dir=str(tmp_path))  # after a clean stop: from its snapshot
    try:
        with Client(srv.target, timeout=30) as ws:
            assert sorted(ws.query(query).rows) == want()
    finally:
        srv.stop()


@pytest.mark.parametrize("seed", range(10))
def test_an_older_sub_window_still_gives_the_state_of_its_slide(seed):
    """A query that took its sub-windows earlier (the ws policy's snapshot) reads the rows kept per
    key as of their slide, rebuilt from the newest state and the rows later slides displaced; a
    slide whose successors are no longer live is refused by name, never answered wrongly."""
    from windowstore.store.last_rows import StateGone

    rng = random.Random(seed)
    s = make("manual", rng, rng.choice([1, 2]), rng.choice([("k",), ("k", "g")]))
    seen = {}
    for j in range(12):
        part = random_rows(rng, rng.randint(0, 6), "manual")
        if part:
            s.append({"ts": [r[0] for r in part], "k": [r[1] for r in part], "g": [r[2] for r in part],
                      "v": [r[3] for r in part]})
        sub = s.window.slide(j)
        state = sub.last_rows.at(sub.slide)
        seen[sub.slide] = (sub, sorted(zip(*(state.columns[c].tolist() for c in ("ts", "k", "v")))))
        for old, (old_sub, want) in seen.items():
            if old > s.window.latest - s.window.n:  # still live: its state as of then
                got = old_sub.last_rows.at(old)
                assert sorted(zip(*(got.columns[c].tolist() for c in ("ts", "k", "v"))))== want
            elif old < s.window.latest - s.window.n:
                with pytest.raises(StateGone, match=f"as of slide {old}"):
                    old_sub.last_rows.at(old)


@settings(max_examples=examples(50), deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 50), st.sampled_from(["a", "b", "c", None]),
                                   st.integers(-3, 3)), max_size=5), max_size=12),
       st.integers(1, 3), st.integers(1, 3))
def test_last_rows_property_against_the_definition(batches, n, subwindows):
    """Any batches, each followed by a slide, on a manual stream: Definition 11 over every row."""
    s = Stream("s", SCHEMA, WindowSpec(subwindows=subwindows, subwindow_ms=10, clock="manual", last_rows=3,
                                       last_rows_by=("k",)), 0)
    rows = []
    for j, batch in enumerate(batches):
        part = [(ts, k, 0, v) for ts, k, v in batch]
        rows += part
        if part:
            s.append({"ts": [r[0] for r in part], "k": [r[1] for r in part], "g": [0] * len(part),
                      "v": [r[3] for r in part]})
        s.window.slide(j)
    got = run_plan(plan_query(parse_query(f"SELECT ts, k, g, v FROM s [PARTITION BY k ROWS {n}]"), s)).rows
    assert sorted(got, key=repr) == sorted(definition_11(rows, (1,), n), key=repr)


@pytest.mark.parametrize("policy", ["ttu", "lws", "ws"])
def test_periodic_answers_per_slide_under_each_policy(policy):
    """Registered with SLIDE: each answer is Definition 11 over the rows of the slides up to the
    answer's slide, whatever the read policy (ws reads a snapshot taken at begin)."""
    from windowstore.txn.commands import Append, CreateStream, Register, Slide
    from windowstore.txn.engine import Engine, EngineConfig

    e = Engine(EngineConfig(policy=policy))
    e.apply(CreateStream("s", tuple(SCHEMA.items()), "ts", WindowSpec(3, 10, None, "manual", 0, (), 4, last_rows=2,
                                                                      last_rows_by=("k",)), 0))
    got: dict = {}
    e.on_answer = lambda qid, r: got.setdefault(r.slide, r.answer.rows)
    e.apply(Register("Q", "SELECT k, ts, v FROM s [PARTITION BY k ROWS 2 SLIDE 10 ms]", 0, 0))
    rng = random.Random(4)
    by_slide: list = []
    for j in range(15):
        part = [(100 * j + i, rng.choice("abcd"), 0, rng.randint(0, 9)) for i in range(rng.randint(0, 4))]
        if part:
            e.apply(Append("s", {"ts": [r[0] for r in part], "k": [r[1] for r in part], "g": [0] * len(part),
                                 "v": [r[3] for r in part]}, "", None, j))
        by_slide.append(part)
        e.apply(Slide("s", j))
        if j % 2:
            e.sched.run_until_idle()
    e.sched.run_until_idle()
    assert len(got) >= 7
    for slide, rows in got.items():
        upto = [r for part in by_slide[: slide + 1] for r in part]
        assert sorted(rows) == sorted((r[1], r[0], r[3]) for r in definition_11(upto, (1,), 2)), slide


def test_the_command_line_creates_a_stream_that_keeps_last_rows():
    import subprocess
    import sys

    from windowstore.clients import Client
    from windowstore.server.process import ServerProcess

    with ServerProcess() as server:
        r = subprocess.run([sys.executable, "-m", "windowstore.server.cli", "create-stream", "m", "--target",
                            server.target, "--schema", "ts:int64,meter:string,kwh:int64", "--subwindows", "2",
                            "--subwindow-ms", "1000", "--clock", "manual", "--last-rows", "2", "--last-rows-by",
                            "meter", "--last-rows-keys", "5"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        with Client(server.target, timeout=30) as ws:
            spec = ws.describe_stream("m")["spec"]
            assert (spec["last_rows"], spec["last_rows_by"], spec["last_rows_keys"]) == (2, ["meter"], 5)
