"""Session, ROWS and PARTITION BY windows in the structured form (StructuredQuery.window_shape): the
structured query built with the SDK binds to the query its text parses to and answers as the text
does over the same stream (whose answers tests/test_window_shapes.py and
tests/test_partitioned_windows.py check against their oracles); errors name the field path."""
from __future__ import annotations

import random

import pytest

from windowstore.clients import aggregate, expressions as E
from windowstore.server import convert
from windowstore.store import InvalidInput, QueryError, Stream, WindowSpec, parse_query, plan_query, run_plan, to_text
from windowstore.v1 import windowstore_pb2 as pb

SCHEMA = {"ts": "int64", "k": "string", "v": "int64"}


def _stream(seed: int) -> Stream:
    rng = random.Random(seed)
    s = Stream("s", SCHEMA, WindowSpec(subwindows=6, subwindow_ms=100, clock="event", allowed_lateness_ms=200,
                                       last_rows=3, last_rows_by=("k",)), 0)
    newest = 0
    for _ in range(40):
        newest += rng.choice([0, 5, 40, 90, 300])
        part = [(max(0, newest - rng.randint(0, 150)), rng.choice(["a", "b", "c", None]), rng.randint(-5, 50))
                for _ in range(rng.randint(1, 4))]
        s.append({"ts": [r[0] for r in part], "k": [r[1] for r in part], "v": [r[2] for r in part]})
        while s.window.due(0):
            s.window.slide(0)
    return s


def _pb(window: pb.SessionRowsWindow, items, group_by: str = "", slide_ms: int = 0) -> pb.StructuredQuery:
    q = pb.StructuredQuery(stream="s", items=items, group_by=group_by, window_shape=window)
    if slide_ms:
        q.slide.CopyFrom(pb.WindowLength(value=slide_ms, unit=pb.LENGTH_UNIT_MS))
    return pb.StructuredQuery.FromString(q.SerializeToString())


key, count, total = (pb.SelectItem(key_column="k"), pb.SelectItem(aggregate=aggregate("count")),
                     pb.SelectItem(aggregate=aggregate("sum", "v")))
start, end = pb.SelectItem(key_column="window_start"), pb.SelectItem(key_column="window_end")
CASES = [
    ("SELECT k, window_start, window_end, COUNT(*), SUM(v) FROM s [SESSION GAP 120 ms] GROUP BY k",
     _pb(E.session_window(120), [key, start, end, count, total], "k")),
    ("SELECT k, window_start, COUNT(*) FROM s [SESSION GAP 30 ms SLIDE 100 ms] GROUP BY k",
     _pb(E.session_window(30), [key, start, count], "k", slide_ms=100)),
    ("SELECT COUNT(*), SUM(v) FROM s [ROWS 7]", _pb(E.rows_window(7), [count, total])),
    ("SELECT k, COUNT(*), SUM(v) FROM s [ROWS 5] GROUP BY k", _pb(E.rows_window(5), [key, count, total], "k")),
    ("SELECT k, COUNT(*), SUM(v) FROM s [PARTITION BY k ROWS 2] GROUP BY k",
     _pb(E.rows_window(2, ["k"]), [key, count, total], "k")),
]


@pytest.mark.parametrize("text, structured", CASES, ids=[t for t, _ in CASES])
@pytest.mark.parametrize("seed", range(3))
def test_the_structured_window_is_the_texts_window(text, structured, seed):
    parsed = parse_query(text)
    from_pb = convert.query_from_pb(structured)
    assert from_pb == parsed and from_pb.shape is not None
    assert parse_query(to_text(from_pb)) == parsed
    assert convert.query_from_pb(convert.query_to_pb(parsed)) == parsed
    if parsed.slide is not None:
        return  # periodic: answered by the scheduler (the server test below registers one)
    s = _stream(seed)
    got, want = run_plan(plan_query(from_pb, s)), run_plan(plan_query(parsed, s))
    assert got.rows == want.rows and got.columns == want.columns and got.access == want.access
    assert got.rows or seed, "a case with no rows checks nothing"


@pytest.mark.parametrize("window, field, reason", [
    (pb.SessionRowsWindow(), "window_shape", "a window shape needs session_gap_ms or rows"),
    (pb.SessionRowsWindow(session_gap_ms=0), "window_shape.session_gap_ms", "a session gap must be positive"),
    (pb.SessionRowsWindow(rows=0), "window_shape.rows", "a row count must be positive"),
    (pb.SessionRowsWindow(rows=2**63), "window_shape.rows", "rows is beyond int64"),
    (pb.SessionRowsWindow(session_gap_ms=5, partition_by=["k"]), "window_shape.partition_by",
     "partition_by goes with rows"),
    (pb.SessionRowsWindow(rows=2, partition_by=["k", ""]), "window_shape.partition_by[1]",
     "a partition column needs a name"),
])
def test_a_bad_window_shape_is_refused_naming_its_field(window, field, reason):
    with pytest.raises(QueryError) as err:
        convert.query_from_pb(_pb(window, [count]))
    assert err.value.reason.startswith(reason) and err.value.field == field, str(err.value)


def test_a_window_shape_goes_with_one_stream_without_range_or_expressions():
    q = _pb(E.rows_window(3), [count])
    q.range.CopyFrom(pb.WindowLength(value=100, unit=pb.LENGTH_UNIT_MS))
    with pytest.raises(QueryError, match=r"set range or window_shape, not both \(field range\)"):
        convert.query_from_pb(q)
    j = pb.StructuredQuery(items=[count], sources=[pb.JoinSource(stream="s"), pb.JoinSource(stream="t")],
                           window_shape=E.rows_window(3))
    with pytest.raises(QueryError, match=r"not available for joins \(field window_shape\)"):
        convert.query_from_pb(j)
    x = E.expr_query("s", [E.count()])
    x.window_shape.CopyFrom(E.session_window(10))
    with pytest.raises(QueryError, match=r"takes no session, ROWS or PARTITION BY window \(field window_shape\)"):
        convert.query_from_pb(x)
    # the binder's refusals reach the structured form too, by the same reason
    s = Stream("p", SCHEMA, WindowSpec(subwindows=3, subwindow_ms=100), 0)
    with pytest.raises(InvalidInput, match="event-time stream"):
        plan_query(convert.query_from_pb(pb.StructuredQuery(stream="p", items=[count],
                                                            window_shape=E.session_window(10))), s)


@pytest.mark.slow
def test_structured_windows_through_the_server():
    from conftest import wait_for
    from windowstore.clients import Client
    from windowstore.server.process import ServerProcess

    with ServerProcess() as server, Client(server.target, timeout=30) as ws:
        ws.create_stream("s", schema=SCHEMA, subwindows=10, subwindow_ms=100, clock="event", last_rows=2,
                         last_rows_by=["k"])
        periodic = ws.register(_pb(E.rows_window(3), [count, total], slide_ms=200))
        rows = [(10 * i, "a" if i % 3 else "b", i) for i in range(0, 150, 7)]
        ws.append("s", {"ts": [r[0] for r in rows], "k": [r[1] for r in rows], "v": [r[2] for r in rows]})
        ws.append("s", {"ts": [5000], "k": ["z"], "v": [0]})  # the watermark passes every row above
        for text, structured in CASES:
            if "SLIDE" in text:
                continue
            a, b = ws.query(structured), ws.query(text)
            assert a.rows == b.rows and a.slide == b.slide, text
        assert wait_for(lambda: ws.read_answers(periodic.id)[0], "the structured ROWS query's answers")
        ws.unregister(periodic.id)
