"""Types and nulls (issue 11, phase 1): boolean columns and SQL NULLs in every column but the event
time, each rule on its own in the core, then end to end through a real server and the SDK
(protobuf both ways, Arrow and the columnar form, answers, to_arrow/to_pandas, restart from the
write-ahead log and from a snapshot)."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from windowstore.clients import Client, InvalidArgument
from windowstore.server.process import ServerProcess
from windowstore.store import InvalidInput, Stream, WindowSpec, parse_query, plan_query
from windowstore.store.parser import to_text
from windowstore.store.planner import run_plan

SCHEMA = {"ts": "int64", "g": "string", "k": "int64", "x": "int64", "f": "float64", "b": "boolean"}
ROWS = [  # ts, g, k, x, f, b
    (1, "a", 1, 5, 1.5, True),
    (2, None, None, None, None, None),
    (3, "a", 1, None, 2.5, False),
    (4, None, 2, 7, None, True),
    (5, "b", None, -3, -1.0, None),
]


def stream(rows=ROWS, n=3, group_by=("g", "k", "b")) -> Stream:
    s = Stream("s", SCHEMA, WindowSpec(subwindows=n, subwindow_ms=10, clock="manual", group_by=group_by), 0)
    for i, r in enumerate(rows):  # one sub-window per two rows: masks in some sub-windows, not others
        s.append({c: [v] for c, v in zip(SCHEMA, r)})
        if i % 2:
            s.window.slide(10 * (i + 1))
    s.window.slide(100)
    return s


def answer(s: Stream, text: str, paths=("window", "synopsis", "probe")) -> list:
    """The rows of every access path that can answer the query: they must agree."""
    q = parse_query(text)
    got = {}
    for path in paths:
        try:
            plan = plan_query(q, s, access=path)
        except InvalidInput:
            continue
        got[path] = run_plan(plan).rows
    assert "window" in got
    for path, rows in got.items():
        assert rows == got["window"], (path, rows, got["window"])
    return got["window"]


# -- aggregates skip nulls --------------------------------------------------------------------------
def test_count_star_counts_rows_count_col_counts_values():
    s = stream()
    assert answer(s, "SELECT COUNT(*), COUNT(g), COUNT(k), COUNT(x), COUNT(f), COUNT(b) FROM s") == [(5, 3, 3, 3, 3, 3)]


def test_sum_avg_min_max_quantile_skip_nulls():
    s = stream()
    assert answer(s, "SELECT SUM(x), AVG(x), MIN(x), MAX(x), QUANTILE(x, 0.5), SUM(f), AVG(f), MIN(g), MAX(g) FROM s") == \
        [(9, 3.0, -3, 7, 5, 3.0, 1.0, "a", "b")]
    assert answer(s, "SELECT MIN(b), MAX(b), COUNT(DISTINCT b), COUNT(DISTINCT g), COUNT(DISTINCT k) FROM s") == \
        [(False, True, 2, 2, 2)]


def test_aggregates_of_only_nulls_are_null_and_counts_zero():
    rows = [(1, None, None, None, None, None), (2, None, None, None, None, None)]
    s = stream(rows)
    assert answer(s, "SELECT COUNT(*), COUNT(x), SUM(x), AVG(x), MIN(x), MAX(f), SUM(f), QUANTILE(f, 0.5), "
                     "MIN(g), MAX(b), COUNT(DISTINCT g) FROM s") == [(2, 0, None, None, None, None, None, None, None, None, 0)]


def test_group_by_puts_nulls_in_one_group_sorted_last():
    s = stream()
    assert answer(s, "SELECT g, COUNT(*), COUNT(x), SUM(x), MIN(b) FROM s GROUP BY g") == \
        [("a", 2, 1, 5, False), ("b", 1, 1, -3, None), (None, 2, 1, 7, True)]
    assert answer(s, "SELECT k, COUNT(*), SUM(x), AVG(f) FROM s GROUP BY k") == \
        [(1, 2, 5, 2.0), (2, 1, 7, None), (None, 2, -3, -1.0)]
    assert answer(s, "SELECT b, COUNT(*), SUM(x) FROM s GROUP BY b") == \
        [(False, 1, None), (True, 2, 12), (None, 2, -3)]
    # descending too: NULL last (as DuckDB's default NULLS LAST)
    assert answer(s, "SELECT g, COUNT(*) FROM s GROUP BY g ORDER BY g DESC") == [("b", 1), ("a", 2), (None, 2)]
    assert answer(s, "SELECT k, SUM(x) FROM s GROUP BY k ORDER BY SUM(x) DESC") == [(2, 7), (1, 5), (None, -3)]
    assert answer(s, "SELECT b, SUM(x) FROM s GROUP BY b ORDER BY 2") == [(None, -3), (True, 12), (False, None)]


def test_group_by_an_int64_key_with_null_beside_the_extreme_values():
    rows = [(1, "a", -2**63, 1, 0.0, True), (2, "a", None, 2, 0.0, True), (3, "a", 2**63 - 1, 3, 0.0, True)]
    s = stream(rows)
    assert answer(s, "SELECT k, SUM(x) FROM s GROUP BY k") == [(-2**63, 1), (2**63 - 1, 3), (None, 2)]
    assert answer(s, "SELECT COUNT(DISTINCT k) FROM s") == [(2,)]


def test_outer_aggregates_skip_null_inner_values():
    s = stream()
    assert answer(s, "SELECT COUNT(*), COUNT(k), MIN(k), SUM(t) FROM (SELECT k, SUM(x) AS t FROM s GROUP BY k)") == \
        [(3, 2, 1, 9)]


# -- predicates ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("where, count", [
    ("x > 0", 2), ("x <= 0", 1), ("x != 5", 2), ("x NOT IN (5)", 2), ("x IN (5, 7)", 2),
    ("x < 1e400", 3), ("x > -1e400", 3),   # always true for a value, still unknown for NULL
    ("g = 'a'", 2), ("g != 'a'", 1), ("g NOT IN ('a')", 1), ("g < 'z'", 3),
    ("f >= 0", 2), ("b = TRUE", 2), ("b = FALSE", 1), ("b != TRUE", 1), ("b IN (TRUE, FALSE)", 3),
    ("b NOT IN (TRUE)", 1), ("b < TRUE", 1),
    ("x IS NULL", 2), ("x IS NOT NULL", 3), ("g IS NULL", 2), ("b is not null", 3), ("ts IS NULL", 0),
    ("x IS NULL OR x > 6", 3), ("g IS NULL AND k IS NULL", 1), ("x > 0 OR g = 'b'", 3),
])
def test_a_comparison_with_null_is_unknown_and_drops_the_row(where, count):
    assert answer(stream(), f"SELECT COUNT(*) FROM s WHERE {where}") == [(count,)]


def test_null_predicates_and_boolean_literals_round_trip_as_text():
    for text in ["SELECT COUNT(*) FROM s WHERE x IS NULL OR b = TRUE", "SELECT COUNT(*) FROM s WHERE b IN (FALSE) AND g IS NOT NULL"]:
        q = parse_query(text)
        assert parse_query(to_text(q)) == q


@pytest.mark.parametrize("text, msg", [
    ("SELECT COUNT(*) FROM s WHERE b = 1", "boolean"),
    ("SELECT COUNT(*) FROM s WHERE b = 'x'", "boolean"),
    ("SELECT COUNT(*) FROM s WHERE x = TRUE", "TRUE"),
    ("SELECT COUNT(*) FROM s WHERE g IN ('a', FALSE)", "FALSE"),
    ("SELECT SUM(b) FROM s", "numeric"),
    ("SELECT AVG(b) FROM s", "numeric"),
    ("SELECT QUANTILE(b, 0.5) FROM s", "numeric"),
    ("SELECT COUNT(*) FROM s WHERE x IS 5", "NULL"),
])
def test_boolean_and_null_misuse_is_refused(text, msg):
    with pytest.raises(InvalidInput, match=msg):
        plan_query(parse_query(text), stream())


# -- input --------------------------------------------------------------------------------------------
def test_nulls_arrive_as_arrow_validity_none_and_nan():
    s = Stream("s", SCHEMA, WindowSpec(subwindows=2, subwindow_ms=10, clock="manual"), 0)
    s.append(pa.table({"ts": pa.array([1, 2], pa.int64()), "g": pa.array(["a", None]).dictionary_encode(),
                       "k": pa.array([None, 3], pa.int32()), "x": pa.array([1, None], pa.int64()),
                       "f": pa.array([None, 2.0]), "b": pa.array([None, False])}))
    s.append({"ts": np.array([3, 4]), "g": ["c", None], "k": [None, 4], "x": np.array([1, 2]),
              "f": np.array([np.nan, 1.0]), "b": [True, None]})
    s.append(pd.DataFrame({"ts": [5], "g": [None], "k": [pd.NA], "x": [None], "f": [math.nan], "b": [None]}).astype(
        {"k": "Int64", "x": "Int64", "b": "boolean"}).pipe(pa.Table.from_pandas, preserve_index=False))
    # a dictionary whose entry is null: that value is NULL
    s.append(pa.table({"ts": pa.array([6], pa.int64()),
                       "g": pa.DictionaryArray.from_arrays(pa.array([0], pa.int32()), pa.array([None], pa.string())),
                       "k": [1], "x": [1], "f": [1.0], "b": [True]}))
    s.window.slide(10)
    assert answer(s, "SELECT COUNT(*), COUNT(g), COUNT(k), COUNT(x), COUNT(f), COUNT(b) FROM s") == [(6, 2, 3, 4, 3, 3)]


@pytest.mark.parametrize("batch, msg", [
    ({"ts": [None], "g": ["a"], "k": [1], "x": [1], "f": [1.0], "b": [True]}, "may not be null"),
    ({"ts": pa.array([None], pa.int64()), "g": ["a"], "k": [1], "x": [1], "f": [1.0], "b": [True]}, "may not be null"),
    ({"ts": [1], "g": ["a"], "k": [1], "x": [1], "f": [1.0], "b": [1]}, "boolean"),
    ({"ts": [1], "g": ["a"], "k": [1], "x": [True], "f": [1.0], "b": [True]}, "boolean"),
    ({"ts": [1], "g": ["a"], "k": [1], "x": [1], "f": pa.array([math.nan]), "b": [True]}, "NaN"),
    ({"ts": [1], "g": ["a"], "k": [1], "x": [1], "f": [1.0], "b": pa.array([1], pa.int8())}, "boolean"),
])
def test_bad_typed_batches_are_refused_whole(batch, msg):
    s = stream()
    before = s.window.buffered_rows
    with pytest.raises(InvalidInput, match=msg):
        s.append(batch)
    assert s.window.buffered_rows == before


def test_a_null_and_its_placeholder_are_different_batches():
    from windowstore.store.digest import batch_digest

    s = stream()
    a, n = s.schema.check({"ts": [1], "g": [""], "k": [0], "x": [0], "f": [0.0], "b": [False]})
    b, _ = s.schema.check({"ts": [1], "g": [None], "k": [None], "x": [None], "f": [None], "b": [None]})
    for col in ("g", "k", "x", "f", "b"):
        one = {**a, col: b[col], "?" + col: b["?" + col]}
        assert batch_digest(one, s.schema.columns, n) != batch_digest(a, s.schema.columns, n), col


# -- end to end: server, SDK, log and snapshot ---------------------------------------------------------
TYPED_QUERIES = [
    "SELECT COUNT(*), COUNT(x), SUM(x), AVG(f), MIN(b), MAX(b), COUNT(DISTINCT g) FROM {s}",
    "SELECT g, COUNT(*), COUNT(x), SUM(x), MAX(b) FROM {s} GROUP BY g",
    "SELECT b, COUNT(*), SUM(x) FROM {s} GROUP BY b",
    "SELECT k, COUNT(f) FROM {s} WHERE x IS NULL OR b = TRUE GROUP BY k",
]


def _fill(ws: Client, name: str) -> None:
    ws.create_stream(name, schema=SCHEMA, subwindows=3, subwindow_ms=1000, clock="manual", group_by=["g", "b"])
    ws.append(name, {c: [r[i] for r in ROWS[:2]] for i, c in enumerate(SCHEMA)})  # lists with None
    # pandas: NaN and None are NULL; an integer column with a missing value needs pandas' nullable Int64
    # (a plain one turns into floats, which an int64 column refuses)
    ws.append(name, pd.DataFrame({c: [r[i] for r in ROWS[2:4]] for i, c in enumerate(SCHEMA)}).astype(
        {"k": "Int64", "x": "Int64", "b": "boolean"}))
    ws.slide(name)
    ws.append(name, pa.table({"ts": pa.array([5], pa.int64()), "g": ["b"], "k": pa.array([None], pa.int64()),
                              "x": [-3], "f": [-1.0], "b": pa.array([None], pa.bool_())}))
    ws.append(name, {"ts": [6], "g": [None], "k": [9], "x": [None], "f": [None], "b": [False]},
              columnar_types=SCHEMA)  # the plain protobuf form: is_null
    ws.slide(name)


def _answers(ws: Client, name: str) -> list:
    return [(a.rows, a.types) for a in (ws.query(q.format(s=name)) for q in TYPED_QUERIES)]


@pytest.mark.slow
def test_types_and_nulls_through_the_server_and_the_sdk(tmp_path):
    srv = ServerProcess("--snapshot-every-mb", "1000", data_dir=str(tmp_path))
    try:
        with Client(srv.target, timeout=30) as ws:
            _fill(ws, "t")
            info = ws.describe_stream("t")
            assert [c["type"] for c in info["spec"]["columns"]] == ["COLUMN_TYPE_INT64", "COLUMN_TYPE_STRING",
                                                                     "COLUMN_TYPE_INT64", "COLUMN_TYPE_INT64",
                                                                     "COLUMN_TYPE_FLOAT64", "COLUMN_TYPE_BOOLEAN"]
            a = ws.query("SELECT COUNT(*), COUNT(x), SUM(x), AVG(f), MIN(b), MAX(b), COUNT(DISTINCT g) FROM t")
            assert a.rows == [(6, 3, 9, 1.0, False, True, 2)]
            assert a.types == ["int64", "int64", "int128", "float64", "boolean", "boolean", "int64"]
            g = ws.query("SELECT g, COUNT(*), SUM(x), MAX(b) FROM t GROUP BY g")
            assert g.rows == [("a", 2, 5, True), ("b", 1, -3, None), (None, 3, 7, True)]
            t = g.to_arrow()
            assert t.schema.field("max(b)").type == pa.bool_() and t.column("g").to_pylist() == ["a", "b", None]
            assert t.column("sum(x)").null_count == 0
            df = g.to_pandas()
            assert str(df["max(b)"].dtype) == "boolean" and df["max(b)"].isna().tolist() == [False, True, False]
            empty = ws.query("SELECT SUM(x), MIN(b) FROM t WHERE x IS NULL AND b IS NULL")
            assert empty.rows == [(None, None)]
            assert ws.query("SELECT COUNT(*) FROM t WHERE b = FALSE").rows == [(2,)]
            with pytest.raises(InvalidArgument, match="may not be null"):
                ws.append("t", {"ts": [None], "g": ["a"], "k": [1], "x": [1], "f": [1.0], "b": [True]})
            with pytest.raises(InvalidArgument, match="boolean"):
                ws.query("SELECT SUM(b) FROM t")
            before = _answers(ws, "t")
        srv.stop(timeout=30)  # a clean stop: a snapshot (validity masks in its sub-window files)
        srv = ServerProcess(data_dir=str(tmp_path))
        with Client(srv.target, timeout=30) as ws:
            assert _answers(ws, "t") == before
            _fill(ws, "u")  # and from the log alone (kill -9: no snapshot of stream u)
            before_u = _answers(ws, "u")
        srv.stop(sig=9)
        srv = ServerProcess(data_dir=str(tmp_path))
        with Client(srv.target, timeout=30) as ws:
            assert _answers(ws, "t") == before and _answers(ws, "u") == before_u
    finally:
        srv.stop()


# -- timestamp and date ----------------------------------------------------------------------------------
TSCHEMA = {"ts": "int64", "at": "timestamp", "day": "date", "x": "int64"}
US_2026 = 1_767_225_600_000_000  # 2026-01-01 00:00:00 UTC in microseconds
DAY_2026 = 20_454


def temporal_stream() -> Stream:
    import datetime as dt

    s = Stream("s", TSCHEMA, WindowSpec(subwindows=2, subwindow_ms=10, clock="manual", group_by=("day",)), 0)
    s.append({"ts": [1, 2, 3], "at": [dt.datetime(2026, 1, 1, 0, 0, 0, 5), None, dt.datetime(1969, 12, 31, 23, 59, 59)],
              "day": [dt.date(2026, 1, 1), dt.date(1969, 12, 31), None], "x": [1, 2, 3]})
    s.append(pa.table({"ts": pa.array([4], pa.int64()),
                       "at": pa.array([1_767_225_600_000], pa.timestamp("ms", tz="Europe/Paris")),  # an instant
                       "day": pa.array([86_400_000 * DAY_2026], pa.date64()), "x": [4]}))
    s.append(pa.Table.from_pandas(pd.DataFrame({"ts": [5], "at": pd.to_datetime(["2026-01-01 00:00:00.000001"]),
                                                "day": pd.to_datetime([None]), "x": [5]}), preserve_index=False))
    s.append({"ts": [6], "at": np.array([US_2026 + 7]), "day": np.array([0]), "x": [6]})  # integers: us / days
    s.window.slide(10)
    return s


def test_timestamps_are_microseconds_and_dates_days_since_the_epoch():
    s = temporal_stream()
    assert answer(s, "SELECT MIN(at), MAX(at), COUNT(at), MIN(day), MAX(day), COUNT(day), COUNT(DISTINCT day) FROM s") == \
        [(-1_000_000, US_2026 + 7, 5, -1, DAY_2026, 4, 3)]
    a = run_plan(plan_query(parse_query("SELECT day, MIN(at) FROM s GROUP BY day"), s))
    assert a.types == ["date", "timestamp"]
    assert a.rows == [(-1, None), (0, US_2026 + 7), (DAY_2026, US_2026), (None, -1_000_000)]


@pytest.mark.parametrize("where, count", [
    ("at >= TIMESTAMP '2026-01-01 00:00:00'", 4), ("at > TIMESTAMP '2026-01-01T00:00:00.000005'", 1),
    (f"at = {US_2026 + 5}", 1), ("at < TIMESTAMP '2026-01-01 01:00:00+01:00'", 1),
    ("day = DATE '2026-01-01'", 2), ("day < DATE '1970-01-01'", 1), ("day IS NULL", 2), ("at IS NULL", 1),
])
def test_timestamp_and_date_literals_compare_exactly(where, count):
    assert answer(temporal_stream(), f"SELECT COUNT(*) FROM s WHERE {where}") == [(count,)]


@pytest.mark.parametrize("batch, msg", [
    ({"at": [1.5]}, "must be timestamp"),
    ({"at": pa.array([1001], pa.timestamp("ns"))}, "nanoseconds"),
    ({"day": pa.array([1], pa.date64())}, "whole day"),
    ({"day": pa.array([1], pa.timestamp("us"))}, "midnight"),
    ({"at": ["2026-01-01"]}, "must be timestamp"),
    ({"at": pa.array([2**62], pa.timestamp("s"))}, "range"),
])
def test_inexact_or_wrong_temporal_values_are_refused(batch, msg):
    s = temporal_stream()
    with pytest.raises(InvalidInput, match=msg):
        s.append({"ts": [1], "at": [0], "day": [0], "x": [0], **batch})


@pytest.mark.parametrize("text, msg", [
    ("SELECT SUM(at) FROM s", "numeric"), ("SELECT SUM(day) FROM s", "numeric"),
    ("SELECT COUNT(*) FROM s WHERE at > TIMESTAMP 'noon'", "ISO"), ("SELECT COUNT(*) FROM s WHERE day = 'x'", "date"),
])
def test_temporal_misuse_is_refused(text, msg):
    with pytest.raises(InvalidInput, match=msg):
        plan_query(parse_query(text), temporal_stream())


def _temporal_random_stream(seed: int) -> tuple[Stream, list[tuple]]:
    """A stream of random timestamps (either side of the epoch, sub-second parts) and dates with
    NULLs over a few sub-windows, and the rows it holds."""
    rng = np.random.default_rng(seed)
    s = Stream("s", TSCHEMA, WindowSpec(subwindows=3, subwindow_ms=10, clock="manual", group_by=("x",)), 0)
    rows = []
    for sub in range(3):
        n = int(rng.integers(0, 6))
        at = [None if rng.random() < 0.25 else int(rng.integers(-3 * 10**15, 3 * 10**15)) for _ in range(n)]
        day = [None if rng.random() < 0.25 else int(rng.integers(-30_000, 30_000)) for _ in range(n)]
        x = [int(v) for v in rng.integers(0, 3, n)]
        ts = [10 * sub + i for i in range(n)]
        if n:
            s.append({"ts": ts, "at": pa.array(at, pa.timestamp("us", tz="UTC")), "day": pa.array(day, pa.date32()), "x": x})
        rows += list(zip(ts, at, day, x))
        s.window.slide(10 * (sub + 1))
    return s, rows


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12))
def test_avg_and_quantile_over_timestamps_and_dates_match_duckdb(seed):
    """AVG of a timestamp or date is the mean instant (a timestamp: the microsecond the mean falls
    in) and QUANTILE one of the values. DuckDB computes the exact sums and the sorted values; the
    store's rules are written out in SQL: floor division for the mean, rank max(1, ceil(q*N))."""
    import duckdb

    s, rows = _temporal_random_stream(seed)
    con = duckdb.connect()
    con.execute('CREATE TABLE s (ts BIGINT, "at" TIMESTAMP, day DATE, x BIGINT)')  # AT is a keyword
    con.executemany("INSERT INTO s VALUES (?, make_timestamp(?), ? , ?)",
                    [(ts, at, None if d is None else f"{np.datetime64(d, 'D')}", x) for ts, at, d, x in rows])

    def rank(col, q):
        return (f"list_sort(list({col}) FILTER (WHERE {col} IS NOT NULL))"
                f"[greatest(1, ceil({q} * count({col})))::BIGINT]")
    def mean(us):  # floor(sum / count), exactly, over HUGEINT sums
        total, n = f"sum({us})::HUGEINT", f"count({us})"
        return f"(({total}) - ((({total}) % {n}) + {n}) % {n}) // {n}"
    at = '"at"'
    at_us, day_us = f"epoch_us({at})", "(day - DATE '1970-01-01') * 86400000000::HUGEINT"
    sql = (f"{mean(at_us)}, {mean(day_us)}, epoch_us({rank(at, 0.5)}), epoch_us({rank(at, 0.9)}), "
           f"{rank('day', 0.25)} - DATE '1970-01-01'")
    ours = "AVG(at), AVG(day), QUANTILE(at, 0.5), QUANTILE(at, 0.9), QUANTILE(day, 0.25)"
    assert answer(s, f"SELECT {ours} FROM s") == [tuple(con.execute(f"SELECT {sql} FROM s").fetchone())]
    want = con.execute(f"SELECT x, {sql} FROM s GROUP BY x ORDER BY x").fetchall()
    assert answer(s, f"SELECT x, {ours} FROM s GROUP BY x ORDER BY x") == [tuple(r) for r in want]
    a = run_plan(plan_query(parse_query(f"SELECT {ours} FROM s"), s))
    assert a.types == ["timestamp", "timestamp", "timestamp", "timestamp", "date"]
    outer = "SELECT AVG(m), QUANTILE(m, 0.5) FROM (SELECT x, MIN(at) AS m FROM s GROUP BY x)"
    want = con.execute(f"SELECT {mean('epoch_us(m)')}, epoch_us({rank('m', 0.5)}) FROM "
                       '(SELECT x, min("at") AS m FROM s GROUP BY x)').fetchone()
    assert answer(s, outer) == [tuple(want)]


def test_a_timestamp_event_time_column_is_refused():
    with pytest.raises(InvalidInput, match="int64"):
        Stream("s", {"ts": "timestamp"}, WindowSpec(subwindows=2, subwindow_ms=10), 0)


@pytest.mark.slow
def test_timestamps_and_dates_through_the_server(tmp_path):
    import datetime as dt

    with ServerProcess() as srv, Client(srv.target, timeout=30) as ws:
        ws.create_stream("t", schema=TSCHEMA, subwindows=2, subwindow_ms=1000, clock="manual")
        ws.append("t", {"ts": [1, 2], "at": [dt.datetime(2026, 1, 1), None], "day": [dt.date(2026, 1, 1), None], "x": [1, 2]})
        ws.append("t", pd.DataFrame({"ts": [3], "at": pd.to_datetime(["2026-01-01 00:00:01"]),
                                     "day": pd.to_datetime(["1969-12-31"]), "x": [3]}))
        ws.append("t", {"ts": [4], "at": [US_2026], "day": [5], "x": [4]}, columnar_types=TSCHEMA)
        ws.slide("t")
        a = ws.query("SELECT MIN(at), MAX(at), MIN(day), MAX(day), COUNT(at) FROM t")
        assert a.types == ["timestamp", "timestamp", "date", "date", "int64"]
        assert a.rows == [(US_2026, US_2026 + 1_000_000, -1, DAY_2026, 3)]
        t = a.to_arrow()
        assert t.schema.field("min(at)").type == pa.timestamp("us", tz="UTC")
        assert t.column("max(day)").to_pylist() == [dt.date(2026, 1, 1)]
        assert t.column("max(at)").to_pylist()[0] == dt.datetime(2026, 1, 1, 0, 0, 1, tzinfo=dt.timezone.utc)
        g = ws.query("SELECT day, COUNT(*) FROM t WHERE at IS NOT NULL OR day IS NULL GROUP BY day")
        assert g.rows == [(-1, 1), (5, 1), (DAY_2026, 1), (None, 1)]
        df = g.to_pandas()
        assert str(df["day"].dtype).startswith("datetime64") and df["day"].isna().tolist() == [False, False, False, True]


# -- decimal(p, s) -------------------------------------------------------------------------------------
def decimal_stream() -> Stream:
    from decimal import Decimal as D

    s = Stream("s", {"ts": "int64", "p": "decimal(12,2)", "q": "decimal(18,0)", "g": "string"},
               WindowSpec(subwindows=2, subwindow_ms=10, clock="manual", group_by=("g", "p")), 0)
    s.append({"ts": [1, 2, 3], "p": [D("1.50"), None, "2.25"], "q": [10**17, 10**17, None], "g": ["a", "b", "a"]})
    s.window.slide(10)
    s.append(pa.table({"ts": pa.array([4], pa.int64()), "p": pa.array([D("-0.1")], pa.decimal128(5, 1)),
                       "q": pa.array([D(9)], pa.decimal128(20, 3)), "g": ["b"]}))
    s.window.slide(20)
    return s


def test_decimal_sum_avg_min_max_are_exact_and_typed():
    """SUM is DECIMAL(38, s) and exact; AVG is a DOUBLE (as DuckDB types AVG of a DECIMAL: checked
    against it), the double nearest the exact mean, on the synopsis, probe and window paths alike."""
    from decimal import Decimal as D

    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE s (p DECIMAL(12,2), q DECIMAL(18,0), g VARCHAR)")
    con.execute("INSERT INTO s VALUES (1.50, 100000000000000000, 'a'), (NULL, 100000000000000000, 'b'), "
                "(2.25, NULL, 'a'), (-0.1, 9, 'b')")
    s = decimal_stream()
    duck = con.execute("SELECT typeof(AVG(p)), AVG(p), AVG(q) FROM s").fetchone()
    assert duck[0] == "DOUBLE"
    for access in (None, "window"):
        a = run_plan(plan_query(parse_query("SELECT SUM(p), AVG(p), MIN(p), MAX(p), COUNT(p), SUM(q), AVG(q) FROM s"), s,
                                access))
        (row,) = a.rows
        assert row[:1] + row[2:6] == (D("3.65"), D("-0.10"), D("2.25"), 3, D("200000000000000009"))
        # the doubles nearest the exact means; DuckDB divides a double sum, so its last bit may differ
        assert (row[1], row[6]) == (float(Fraction(365, 300)), float(Fraction(200000000000000009, 3)))
        assert math.isclose(row[1], duck[1], rel_tol=1e-15) and math.isclose(row[6], duck[2], rel_tol=1e-15)
        assert a.types == ["decimal(38,2)", "float64", "decimal(12,2)", "decimal(12,2)", "int64", "decimal(38,0)", "float64"]
    a = run_plan(plan_query(parse_query("SELECT SUM(p), AVG(p), MIN(p), QUANTILE(p, 0.5), SUM(q) FROM s"), s))
    assert a.types == ["decimal(38,2)", "float64", "decimal(12,2)", "decimal(12,2)", "decimal(38,0)"]
    assert a.rows == [(D("3.65"), float(Fraction(365, 300)), D("-0.10"), D("1.50"), D("200000000000000009"))]
    assert str(a.rows[0][0]) == "3.65"  # the stated scale
    assert answer(s, "SELECT g, SUM(p), AVG(p), MAX(q) FROM s GROUP BY g") == \
        [("a", D("3.75"), 1.875, D(10**17)), ("b", D("-0.10"), -0.1, D(10**17))] == \
        [(g, t, avg, D(int(m))) for g, t, avg, m in
         con.execute("SELECT g, SUM(p), AVG(p), MAX(q) FROM s GROUP BY g ORDER BY g").fetchall()]
    assert answer(s, "SELECT p, COUNT(*) FROM s GROUP BY p") == [(D("-0.10"), 1), (D("1.50"), 1), (D("2.25"), 1), (None, 1)]
    assert answer(s, "SELECT SUM(t), AVG(t) FROM (SELECT g, SUM(p) AS t FROM s GROUP BY g)") == \
        con.execute("SELECT SUM(t), AVG(t) FROM (SELECT g, SUM(p) AS t FROM s GROUP BY g)").fetchall()
    assert answer(s, "SELECT AVG(p) FROM s WHERE p IS NULL") == [(None,)]


@pytest.mark.parametrize("where, count", [("p > 1.5", 1), ("p >= 1.5", 2), ("p = 1.505", 0), ("p < 0", 1),
                                          ("p IN (2.25, -0.1, 1.505)", 2), ("q > 99999999999999999.5", 2)])
def test_decimal_comparisons_are_exact(where, count):
    assert answer(decimal_stream(), f"SELECT COUNT(*) FROM s WHERE {where}") == [(count,)]


@pytest.mark.parametrize("value, msg", [(1.5, "not an exact decimal"), ("1.505", "decimal places"),
                                        ("12345678901", "digits"), ("abc", "not a decimal")])
def test_inexact_decimals_are_refused_never_rounded(value, msg):
    with pytest.raises(InvalidInput, match=msg):
        decimal_stream().append({"ts": [1], "p": [value], "q": [1], "g": ["a"]})


def test_decimal_precision_beyond_18_is_refused():
    with pytest.raises(InvalidInput, match="precision 19 is not supported"):
        Stream("s", {"ts": "int64", "p": "decimal(19,2)"}, WindowSpec(subwindows=2, subwindow_ms=10), 0)
    with pytest.raises(InvalidInput, match="scale 3 exceeds"):
        Stream("s", {"ts": "int64", "p": "decimal(2,3)"}, WindowSpec(subwindows=2, subwindow_ms=10), 0)


@pytest.mark.slow
def test_the_issue_schema_through_the_server(tmp_path):
    import datetime as dt
    from decimal import Decimal as D

    schema = {"ts": "int64", "ok": "boolean", "at": "timestamp", "day": "date", "price": "decimal(12,2)"}
    srv = ServerProcess(data_dir=str(tmp_path))
    try:
        with Client(srv.target, timeout=30) as ws:
            ws.create_stream("t", schema=schema, subwindows=2, subwindow_ms=1000, clock="manual")
            cols = ws.describe_stream("t")["spec"]["columns"]
            assert cols[-1]["type"] == "COLUMN_TYPE_DECIMAL" and (cols[-1]["precision"], cols[-1]["scale"]) == (12, 2)
            ws.append("t", {"ts": [1, 2], "ok": [True, None], "at": [dt.datetime(2026, 1, 1), None],
                            "day": [dt.date(2026, 1, 1), None], "price": [D("9.99"), None]})
            ws.append("t", pd.DataFrame({"ts": [3], "ok": [False], "at": pd.to_datetime(["2026-01-01"]),
                                         "day": pd.to_datetime(["2026-01-02"]), "price": [D("0.01")]}))
            ws.append("t", {"ts": [4], "ok": [None], "at": [None], "day": [None], "price": [D("-5")]},
                      columnar_types=schema)
            ws.slide("t")
            a = ws.query("SELECT SUM(price), AVG(price), MAX(price), COUNT(price), MIN(ok), MAX(day) FROM t")
            assert a.types == ["decimal(38,2)", "float64", "decimal(12,2)", "int64", "boolean", "date"]
            assert a.rows == [(D("5.00"), 5 / 3, D("9.99"), 3, False, DAY_2026 + 1)]  # AVG: a DOUBLE, as DuckDB
            assert str(a.rows[0][0]) == "5.00"
            t = a.to_arrow()
            assert t.schema.field("sum(price)").type == pa.decimal128(38, 2)
            assert t.schema.field("max(price)").type == pa.decimal128(12, 2)
            assert ws.query("SELECT COUNT(*) FROM t WHERE price > 0.01").rows == [(1,)]
            with pytest.raises(InvalidArgument, match="decimal places"):
                ws.append("t", {"ts": [5], "ok": [True], "at": [0], "day": [0], "price": [D("0.001")]})
            with pytest.raises(InvalidArgument, match="not supported"):
                ws.create_stream("u", schema={"ts": "int64", "p": "decimal(20,2)"}, subwindows=2, subwindow_ms=1000)
            before = a.rows
        srv.stop(sig=9)  # the log replays decimals, nulls and types
        srv = ServerProcess(data_dir=str(tmp_path))
        with Client(srv.target, timeout=30) as ws:
            assert ws.query("SELECT SUM(price), AVG(price), MAX(price), COUNT(price), MIN(ok), MAX(day) FROM t").rows == before
    finally:
        srv.stop()
