"""Edge cases of the store core."""
from __future__ import annotations

from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, strategies as st

from windowstore.store import (InvalidInput, QueryError, QuerySyntaxError, Schema, Stream, WindowSpec, bind, parse_query,
                               plan_query, run_plan)
from windowstore.store.window import IntervalSynopsis, COUNT_KEY
from windowstore.store.synopsis import Synopsis, ColumnSummary

SCHEMA = {"ts": "int64", "src": "string", "bytes": "int64"}


def q(stream, text, access=None):
    return run_plan(plan_query(parse_query(text), stream, access)).rows


def rows(ts, src=None, b=None):
    n = len(ts)
    return {"ts": ts, "src": src or ["a"] * n, "bytes": b or [1] * n}


# -- schemas and batches ---------------------------------------------------------------------------
@pytest.mark.parametrize("schema, msg", [
    ({}, "at least one column"),
    ({"ts": "int64", "x": "decimal"}, "unknown type"),
    ({"x": "int64"}, "no event-time column 'ts'"),
    ({"ts": "float64"}, "must be int64"),
    ({"ts": "int64", "bad name": "int64"}, "identifier"),
])
def test_bad_schemas_name_the_problem(schema, msg):
    with pytest.raises(InvalidInput, match=msg):
        Stream("s", schema, WindowSpec(subwindows=2, subwindow_ms=10), 0)


@pytest.mark.parametrize("batch, column, msg", [
    ({"ts": [1], "src": ["a"]}, "bytes", "missing column"),
    ({"ts": [1], "src": ["a"], "bytes": [1], "extra": [1]}, "extra", "unknown column"),
    ({"ts": [1, 2], "src": ["a"], "bytes": [1, 2]}, "src", "rows"),
    ({"ts": [1], "src": ["a"], "bytes": [1.5]}, "bytes", "must be int64"),
    ({"ts": [1], "src": ["a"], "bytes": [True]}, "bytes", "boolean"),  # (a null in src is accepted: test_types.py)
    ({"ts": [1], "src": [3], "bytes": [1]}, "src", "strings"),
    ({"ts": [None], "src": ["a"], "bytes": [1]}, "ts", "null"),
    ({"ts": [True], "src": ["a"], "bytes": [1]}, "ts", "boolean"),
])
def test_bad_batches_are_refused_whole_and_name_the_column(batch, column, msg):
    s = Stream("s", SCHEMA, WindowSpec(subwindows=2, subwindow_ms=10), 0)
    s.append(rows([1], ["keep"], [5]))
    with pytest.raises(InvalidInput, match=msg) as err:
        s.append(batch)
    assert err.value.column == column
    assert s.window.buffered_rows == 1
    assert s.strings.values == ["keep"]  # nothing half-applied, not even the dictionary


def test_arrow_and_numpy_batches_are_accepted():
    s = Stream("s", SCHEMA, WindowSpec(subwindows=2, subwindow_ms=10), 0)
    s.append(pa.table({"ts": pa.array([1, 2], pa.int64()), "src": ["x", "y"], "bytes": pa.array([3, 4], pa.int32())}))
    s.append({"ts": np.array([3]), "src": np.array(["x"]), "bytes": np.array([5], dtype=np.uint8)})
    with pytest.raises(InvalidInput, match="may not be null"):
        s.append(pa.table({"ts": pa.array([None], pa.int64()), "src": ["x"], "bytes": [1]}))
    s.append(pa.table({"ts": [1], "src": pa.array([None], pa.string()), "bytes": [1]}))  # a null: its own group
    s.window.slide(10)
    assert q(s, "SELECT src, SUM(bytes) FROM s GROUP BY src") == [("x", 8), ("y", 4), (None, 1)]


# -- windows ---------------------------------------------------------------------------------------
def test_processing_time_boundaries_and_empty_subwindows():
    s = Stream("s", SCHEMA, WindowSpec(subwindows=3, subwindow_ms=100), created_ms=1000)
    assert s.window.due(1099) == 0
    assert s.window.due(1100) == 1      # a row at exactly the boundary belongs to the next one
    s.append(rows([1050]))
    s.window.slide(1100)
    assert s.window.due(1350) == 2      # two more due, even with no input: they are empty
    s.window.slide(1200)
    s.window.slide(1300)
    assert [w.rows for w in s.window.youngest(3)] == [0, 0, 1]
    assert s.window.youngest(3)[-1].start_ms == 1000 and s.window.youngest(3)[0].end_ms == 1300
    assert q(s, "SELECT COUNT(*), SUM(bytes), MIN(bytes), AVG(bytes) FROM s [RANGE 200 ms]") == [(0, None, None, None)]
    assert q(s, "SELECT COUNT(*), SUM(bytes), MIN(bytes) FROM s") == [(1, 1, 1)]
    s.window.slide(1400)  # the first sub-window is overwritten: position 0 again
    assert s.window.youngest(3)[0].position == 0 and q(s, "SELECT COUNT(*) FROM s") == [(0,)]


def test_window_not_yet_full_reads_what_exists():
    s = Stream("s", SCHEMA, WindowSpec(subwindows=5, subwindow_ms=10), 0)
    assert q(s, "SELECT COUNT(*), MAX(bytes) FROM s") == [(0, None)]
    assert q(s, "SELECT src, COUNT(*) FROM s GROUP BY src") == []
    s.append(rows([1, 2], b=[4, 6]))
    s.window.slide(10)
    assert q(s, "SELECT COUNT(*), SUM(bytes), MEDIAN(bytes) FROM s") == [(2, 10, 4)]
    assert s.window.bounds(5) == (0, 10)


def test_ttu_order_matches_the_thesis():
    s = Stream("s", SCHEMA, WindowSpec(subwindows=5, subwindow_ms=10), 0)
    for t in range(5):
        s.window.slide((t + 1) * 10)
    # after T0..T4 sub-window 0 is next to be overwritten (TTU 1) and 4 is youngest (TTU 5)
    assert [s.window.ttu(p) for p in range(5)] == [1, 2, 3, 4, 5]
    s.window.slide(60)
    assert [s.window.ttu(p) for p in range(5)] == [5, 1, 2, 3, 4]


def test_count_based_window_splits_batches_into_subwindows():
    s = Stream("s", SCHEMA, WindowSpec(subwindows=2, subwindow_rows=3), 0)
    s.append(rows(list(range(7)), b=list(range(7))))
    assert s.window.due(0) == 2
    s.window.slide(0)
    s.window.slide(0)
    assert s.window.due(0) == 0 and s.window.buffered_rows == 1
    assert [(w.rows, w.min_ts, w.max_ts) for w in s.window.youngest(2)] == [(3, 3, 5), (3, 0, 2)]
    assert q(s, "SELECT SUM(bytes) FROM s [RANGE 3 ROWS]") == [(12,)]
    with pytest.raises(InvalidInput, match="multiple"):
        q(s, "SELECT SUM(bytes) FROM s [RANGE 4 ROWS]")
    with pytest.raises(InvalidInput, match="count-based"):
        q(s, "SELECT SUM(bytes) FROM s [RANGE 1 s]")


def test_window_bounds_span_what_a_query_reads():
    # count-based sub-windows span the event times they were given, in any order: the window's
    # bounds are their min and max, not the oldest's start and the youngest's end
    s = Stream("s", SCHEMA, WindowSpec(subwindows=3, subwindow_rows=2), 0)
    assert s.window.bounds(3) == (None, None)
    s.append(rows([50, 60, 10, 20, 30, 90]))
    for _ in range(3):
        s.window.slide(0)
    assert [(w.start_ms, w.end_ms) for w in s.window.youngest(3)] == [(30, 91), (10, 21), (50, 61)]
    assert s.window.bounds(3) == (10, 91) and s.window.bounds(2) == (10, 91) and s.window.bounds(1) == (30, 91)
    # time-based: consecutive slots, also once the circular array has wrapped
    t = Stream("t", SCHEMA, WindowSpec(subwindows=3, subwindow_ms=10), 0)
    for i in range(5):
        t.window.slide(10 * (i + 1))
        for n_q in (1, 2, 3):
            subs = t.window.youngest(n_q)
            assert t.window.bounds(n_q) == (min(w.start_ms for w in subs), max(w.end_ms for w in subs))
        assert t.window.bounds(4) == t.window.bounds(3)  # never beyond what the window holds


def test_event_time_watermark_and_late_rows():
    s = Stream("s", SCHEMA, WindowSpec(subwindows=3, subwindow_ms=100, clock="event", allowed_lateness_ms=50), 0)
    assert s.append(rows([1000, 1099, 1100])).accepted == 3
    assert s.window.due(0) == 0           # watermark 1050: sub-window [1000,1100) not complete
    s.append(rows([1160]))
    assert s.window.due(0) == 1           # watermark 1110
    sub = s.window.slide(0)
    assert (sub.start_ms, sub.end_ms, sub.rows) == (1000, 1100, 2)
    res = s.append(rows([1099, 1000, 1150]))  # two rows for the sealed sub-window
    assert (res.accepted, res.late) == (1, 2) and s.window.late_rows == 2
    s.append(rows([1460]))                # watermark 1410: [1100,1200), [1200,1300), [1300,1400) due
    assert s.window.due(0) == 3
    for _ in range(3):
        s.window.slide(0)
    assert [w.rows for w in s.window.youngest(3)] == [0, 0, 3]
    with pytest.raises(InvalidInput, match="ahead of the watermark"):
        s.append(rows([10**9]))


def test_rows_before_the_first_sub_window_within_the_lateness_are_kept():
    """An event-time stream without an origin starts at its first rows' sub-window; until one is
    sealed, an earlier row within the allowed lateness opens an earlier sub-window rather than
    being counted late (it would be accepted had it come first). Once a sub-window is sealed,
    or past the watermark, a row before the stream's sub-windows is late as ever."""
    s = Stream("s", SCHEMA, WindowSpec(subwindows=4, subwindow_ms=100, clock="event", allowed_lateness_ms=150), 0)
    assert s.append(rows([1040])).accepted == 1
    res = s.append(rows([950, 890, 780]))   # watermark 890: 950 and 890 in time (their sub-windows open), 780 not
    assert (res.accepted, res.late) == (2, 1) and s.window.late_rows == 1
    s.append(rows([1160]))                   # watermark 1010: [800, 900) and [900, 1000) complete
    subs = [s.window.slide(0) for _ in range(s.window.due(0))]
    assert [(w.start_ms, w.end_ms, w.rows) for w in subs] == [(800, 900, 1), (900, 1000, 1)]
    res = s.append(rows([700]))              # before the sealed sub-windows: late
    assert (res.accepted, res.late) == (0, 1)
    origin = Stream("o", SCHEMA, WindowSpec(subwindows=4, subwindow_ms=100, clock="event", allowed_lateness_ms=150,
                                            origin_ms=1000), 0)
    res = origin.append(rows([1040, 950]))   # an origin is where the stream starts: earlier rows are late
    assert (res.accepted, res.late) == (1, 1)


def test_bad_window_specs():
    for spec, msg in [
        (WindowSpec(subwindows=0, subwindow_ms=10), "subwindows"),
        (WindowSpec(subwindows=2), "exactly one"),
        (WindowSpec(subwindows=2, subwindow_ms=10, clock="wall"), "clock"),
        (WindowSpec(subwindows=2, subwindow_ms=10, group_by=("nope",)), "unknown column"),
        (WindowSpec(subwindows=2, subwindow_ms=10, allowed_lateness_ms=5), "only to clock='event'"),
    ]:
        with pytest.raises(InvalidInput, match=msg):
            Stream("s", SCHEMA, spec, 0)


def test_manual_window_slides_only_when_asked():
    s = Stream("s", SCHEMA, WindowSpec(subwindows=2, subwindow_ms=1, clock="manual"), 0)
    s.append(rows([5]))
    assert s.window.due(10**9) == 0
    sub = s.window.slide(42)
    assert (sub.start_ms, sub.end_ms, sub.rows) == (0, 42, 1)


# -- window-level synopses -------------------------------------------------------------------------
@given(st.lists(st.one_of(st.none(), st.integers(-100, 100)), min_size=1, max_size=80), st.integers(1, 33))
def test_interval_synopsis_equals_brute_force(values, n):
    syn = IntervalSynopsis(n)
    for j, v in enumerate(values):
        cs = ColumnSummary(0 if v is None else 1, v or 0, v, v)
        syn.add(j, Synopsis(0, {"x": cs}, {}))
        for n_q in range(1, n + 1):
            lo = max(0, j - n_q + 1)
            live = [x for x in values[lo:j + 1] if x is not None]
            assert syn.probe("x", lo, j) == ((min(live), max(live)) if live else (None, None))
    assert len(syn.blocks) <= 2 * n + 2 * (n.bit_length() + 1)


def test_running_synopsis_handles_every_window_length():
    s = Stream("s", SCHEMA, WindowSpec(subwindows=4, subwindow_ms=10), 0)
    sizes = [3, 0, 5, 2, 7, 1]
    for j, k in enumerate(sizes):
        s.append(rows([j * 10] * k, b=[j] * k))
        s.window.slide((j + 1) * 10)
        for n_q in range(1, 5):
            live = sizes[max(0, j - n_q + 1): j + 1]
            assert s.window.running_total(COUNT_KEY, n_q) == sum(live)


# -- the query language ----------------------------------------------------------------------------
@pytest.mark.parametrize("text, pos, token", [
    ("SELECT COUNT(*) FORM s", 16, "FORM"),
    ("SELECT FROM s", 7, "FROM"),
    ("SELECT COUNT(*) FROM s WHERE x = ", 33, "end of query"),
    ("SELECT COUNT(*) FROM s [RANGE 10 parsecs]", 33, "parsecs"),
    ("SELECT COUNT(*) FROM s WHERE x # 1", 31, "#"),
    ("SELECT COUNT(*) FROM s LIMIT 3 extra", 31, "extra"),
    ("SELECT COUNT(*) FROM s WHERE " + "(" * 40 + "x = 1" + ")" * 40, 61, "("),
    ("SELECT COUNT(*) FROM s WHERE x = " + "9" * 401, 33, "9" * 401),
    ("SELECT SUM(t) FROM (SELECT SUM(t) AS t FROM (SELECT k, SUM(x) AS t FROM s GROUP BY k))", 44, "("),  # one level of sub-query
])
def test_syntax_errors_name_position_and_token(text, pos, token):
    with pytest.raises(QuerySyntaxError) as err:
        parse_query(text)
    assert (err.value.position, err.value.token) == (pos, token), str(err.value)
    assert f"position {pos}" in str(err.value)


@pytest.mark.parametrize("text, pos, token, msg", [
    ("SELECT QUANTILE(x, 1.5) FROM s", 7, "QUANTILE", "between 0 and 1"),
    ("SELECT x, COUNT(*) FROM s GROUP BY k", 7, "x", "must be aggregated"),
    ("SELECT COUNT(*) FROM s ORDER BY 3", 32, "3", "not a select item"),
    ("SELECT COUNT(*) FROM s WHERE nope = 1", 29, "nope", "unknown column 'nope'"),
    ("SELECT SUM(k) FROM s", 7, "SUM", "numeric"),
    ("SELECT COUNT(*) FROM s WHERE x = 'a'", 29, "x", "cannot compare"),
    ("SELECT COUNT(*) FROM s WHERE k IN ('a', 2)", 29, "k", "cannot compare"),
    ("SELECT COUNT(*) FROM s [RANGE 1500 ms]", 30, "1500", "not a multiple"),
    ("SELECT COUNT(*) FROM s [RANGE 5 SUBWINDOWS]", 30, "5", "window holds 4"),
    ("SELECT f, COUNT(*) FROM s GROUP BY f", 35, "f", "string or int64"),
    ("SELECT k, COUNT(*) FROM s GROUP BY k ORDER BY x", 46, "x", "GROUP BY column or a select item"),
    ("SELECT k, COUNT(*) FROM s GROUP BY k ORDER BY zz", 46, "zz", "names no select item"),
    ("SELECT SUM(x) AS a, MAX(x) AS a FROM s ORDER BY a", 48, "a", "ambiguous"),
    ("SELECT MEDIAN(k) FROM (SELECT k, SUM(x) AS t FROM s GROUP BY k)", 7, "MEDIAN", "numeric"),
    ("SELECT MAX(zz) FROM (SELECT k, SUM(x) AS t FROM s GROUP BY k)", 7, "MAX", "not a column of the sub-query"),
    ("SELECT MAX(t) FROM (SELECT SUM(x) AS t FROM s)", 7, "MAX", "must use GROUP BY"),
    ("SELECT k FROM s GROUP BY k", 0, "SELECT", "at least one aggregate"),
])
def test_semantic_errors_name_position_and_token(text, pos, token, msg):
    s = Stream("s", {"ts": "int64", "k": "string", "x": "int64", "f": "float64"}, WindowSpec(subwindows=4, subwindow_ms=1000), 0)
    with pytest.raises(QueryError, match=msg) as err:
        plan_query(parse_query(text), s)
    assert (err.value.position, err.value.token) == (pos, token), str(err.value)
    assert f"position {pos}" in str(err.value)


def test_the_design_examples_parse():
    a = parse_query("select src, sum(bytes) from packets [RANGE 60 s SLIDE 10 s] where proto = 'tcp' and bytes > 100 "
                    "group by src order by 2 desc limit 10")
    assert (a.range.value, a.slide.value, a.limit, a.order_by[0].descending) == (60_000, 10_000, 10, True)
    b = parse_query("SELECT COUNT(*), AVG(bytes), MAX(bytes), COUNT(DISTINCT dst) FROM packets [RANGE 5 SUBWINDOWS]")
    assert [x.func for x in b.items] == ["count", "avg", "max", "count_distinct"]
    c = parse_query("SELECT QUANTILE(total, 0.9) FROM (SELECT src, SUM(bytes) AS total FROM packets [RANGE 1 min] GROUP BY src)")
    assert c.outer[0].q == Decimal("0.9") and c.group_by == "src" and c.range.value == 60_000
    d = parse_query("SELECT COUNT(*) FROM p WHERE (a = 'it''s' OR b IN (1, 2)) AND c NOT IN ('x')")
    assert len(d.where) == 2 and d.where[0][0].value == "it's"


def test_semantic_errors_are_invalid_input():
    s = Stream("s", {"ts": "int64", "src": "string", "bytes": "int64", "f": "float64"}, WindowSpec(subwindows=4, subwindow_ms=1000), 0)
    for text, msg in [
        ("SELECT SUM(nope) FROM s", "unknown column 'nope'"),
        ("SELECT SUM(src) FROM s", "numeric"),
        ("SELECT COUNT(*) FROM s WHERE bytes = 'x'", "cannot compare"),
        ("SELECT COUNT(*) FROM s [RANGE 5 s]", "window holds 4"),
        ("SELECT COUNT(*) FROM s [RANGE 1500 ms]", "not a multiple"),
        ("SELECT f, COUNT(*) FROM s GROUP BY f", "string or int64"),
    ]:
        with pytest.raises(InvalidInput, match=msg):
            plan_query(parse_query(text), s)


def test_quantile_is_exact_and_discrete():
    s = Stream("s", {"ts": "int64", "v": "int64"}, WindowSpec(subwindows=1, subwindow_ms=10), 0)
    s.append({"ts": [0] * 10, "v": list(range(1, 11))})
    s.window.slide(10)
    got = q(s, "SELECT QUANTILE(v, 0), QUANTILE(v, 0.7), QUANTILE(v, 0.71), MEDIAN(v), QUANTILE(v, 1) FROM s")
    assert got == [(1, 7, 8, 5, 10)]


def test_answer_types_follow_the_schema():
    schema = Schema.of({"ts": "int64", "src": "string", "bytes": "int64", "lat": "float64"})
    spec = WindowSpec(subwindows=4, subwindow_ms=1000)
    q = parse_query("SELECT src, SUM(bytes), AVG(bytes), MAX(lat), COUNT(DISTINCT src), MEDIAN(bytes), MIN(src) "
                    "FROM s GROUP BY src")
    assert bind(q, schema, spec).types == ["string", "int128", "float64", "float64", "int64", "int64", "string"]
    q = parse_query("SELECT QUANTILE(t, 0.5), COUNT(*), AVG(t), MIN(src) FROM (SELECT src, SUM(lat) AS t FROM s GROUP BY src)")
    assert bind(q, schema, spec).types == ["float64", "int64", "float64", "string"]
    q = parse_query("SELECT SUM(t), MAX(t) FROM (SELECT src, SUM(bytes) AS t FROM s GROUP BY src)")
    assert bind(q, schema, spec).types == ["int128", "int128"]


def test_dictionary_encoded_string_columns_are_accepted():
    s = Stream("s", SCHEMA, WindowSpec(subwindows=2, subwindow_ms=10, group_by=("src",)), 0)
    chunked = pa.chunked_array([pa.array(["x", "y", "x"]).dictionary_encode(), pa.array(["z", "x"]).dictionary_encode()])
    s.append(pa.table({"ts": [1, 2, 3, 4, 5], "src": chunked, "bytes": [1, 2, 3, 4, 5]}))
    s.append(pa.table({"ts": [6], "src": pa.array(["y"]).dictionary_encode(), "bytes": [6]}))
    with pytest.raises(InvalidInput, match="must be string"):
        s.append(pa.table({"ts": [1], "src": pa.array([1]).dictionary_encode(), "bytes": [1]}))
    s.window.slide(10)
    assert q(s, "SELECT src, SUM(bytes), COUNT(*) FROM s GROUP BY src") == [("x", 9, 3), ("y", 8, 2), ("z", 4, 1)]


@pytest.mark.parametrize("values", [[1.0, float("nan")], [float("nan")], [None, float("nan"), 2.0]])
def test_an_arrow_nan_anywhere_in_a_float_column_is_refused(values):
    schema = Schema.of({"ts": "int64", "lat": "float64"}, "ts")
    batch = pa.table({"ts": pa.array(range(len(values)), pa.int64()), "lat": pa.array(values, pa.float64())})
    with pytest.raises(InvalidInput, match="NaN"):
        schema.check(batch)


def test_a_numpy_nan_is_a_null_and_infinities_are_values():
    schema = Schema.of({"ts": "int64", "lat": "float64"}, "ts")
    cols, rows = schema.check({"ts": np.arange(3), "lat": np.array([float("inf"), float("nan"), float("-inf")])})
    assert rows == 3 and cols["?lat"].tolist() == [True, False, True]
    assert cols["lat"][[0, 2]].tolist() == [float("inf"), float("-inf")]
    cols, rows = schema.check(pa.table({"ts": [0, 1], "lat": pa.array([float("-inf"), float("inf")])}))
    assert rows == 2 and "?lat" not in cols and cols["lat"].tolist() == [float("-inf"), float("inf")]


def test_a_query_hashes_once_and_as_equal_queries_do():
    import pickle

    text = "SELECT src, SUM(bytes) FROM s [RANGE 2 SUBWINDOWS] WHERE bytes > 3 OR src = 'a' GROUP BY src"
    a, b = parse_query(text), parse_query(" " + text)  # equal, though parsed at other positions
    assert a == b and hash(a) == hash(b) and {a: 1}[b] == 1
    assert a.__dict__["_hash"] == hash(a)  # kept: the plan cache and cost table hash it per call
    c = pickle.loads(pickle.dumps(a))       # another process hashes strings differently: not carried
    assert "_hash" not in c.__dict__ and c == a and hash(c) == hash(a)
    assert parse_query(text.replace("> 3", "> 4")) != a


def test_access_paths_and_clocks_are_enums_with_the_wire_spellings():
    """A plan's access path and a window's clock are StrEnum members whose values are the wire's
    spellings (the protobuf enums' names, lower-cased, are the independent oracle); a plain string
    from the log or a client becomes the member; an answer names its path as a plain string (answers
    are logged state); the forced-path error still quotes plain names."""
    from windowstore.store.kinds import AccessPath, Clock
    from windowstore.v1 import windowstore_pb2 as pb

    wire = {n.removeprefix("ACCESS_PATH_").lower() for n in pb.AccessPath.keys()} - {"unspecified"}
    assert {p.value for p in AccessPath} == wire
    assert {c.value for c in Clock} == {n.removeprefix("CLOCK_").lower() for n in pb.Clock.keys()} - {"unspecified"}
    s = Stream("s", {**SCHEMA, "f": "float64"}, WindowSpec(subwindows=2, subwindow_ms=10, clock="manual",
                                                           group_by=("src",)), 0)
    assert s.spec.clock is Clock.MANUAL and s.spec == WindowSpec(subwindows=2, subwindow_ms=10, clock=Clock.MANUAL,
                                                                  group_by=("src",))
    assert WindowSpec(subwindows=2, subwindow_ms=10).clock is Clock.PROCESSING
    for text, path in [("SELECT COUNT(*) FROM s", AccessPath.PROBE), ("SELECT src, SUM(f) FROM s GROUP BY src",
                                                                       AccessPath.SYNOPSIS),
                       ("SELECT COUNT(*) FROM s WHERE bytes > 1", AccessPath.WINDOW)]:
        plan = plan_query(parse_query(text), s)
        answer = run_plan(plan)
        assert plan.access is path and answer.access == path.value and type(answer.access) is str
        assert plan.explain()["access"] == path.value
    with pytest.raises(InvalidInput) as e:
        plan_query(parse_query("SELECT COUNT(*) FROM s WHERE bytes > 1"), s, "synopsis")
    assert str(e.value) == "access path 'synopsis' cannot answer this query (best: 'window')"
    with pytest.raises(InvalidInput, match="clock must be one of processing, event, manual, got 'wall'"):
        WindowSpec(subwindows=2, subwindow_ms=10, clock="wall").validate(Schema(SCHEMA))
