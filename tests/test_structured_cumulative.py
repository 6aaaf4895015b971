"""Landmark and CUMULATE windows in the structured form (StructuredQuery.landmark and .cumulate):
the structured query converts to the query its text parses to, and over random event-time streams
(random sub-window lengths, counts, lateness, out-of-order rows) both answer the same rows, one-time
and registered. The answers themselves are checked against seed 003's Definition 10 and DuckDB in
tests/test_cumulative.py; errors name the field path."""
from __future__ import annotations

import random

import pytest

from windowstore.clients import aggregate, expressions as E
from windowstore.server import convert
from windowstore.store import InvalidInput, QueryError, Stream, WindowSpec, parse_query, plan_query, run_plan, to_text
from windowstore.v1 import windowstore_pb2 as pb

SCHEMA = {"ts": "int64", "k": "string", "v": "int64", "g": "int64"}
G = {"a": 1, "b": 2, None: None}

count, total = pb.SelectItem(aggregate=aggregate("count")), pb.SelectItem(aggregate=aggregate("sum", "v"))
start, end, gkey = (pb.SelectItem(key_column="window_start"), pb.SelectItem(key_column="window_end"),
                    pb.SelectItem(key_column="g"))


def _ms(value: int) -> pb.WindowLength:
    return pb.WindowLength(value=value, unit=pb.LENGTH_UNIT_MS)


def random_case(rng: random.Random, t: int, n: int) -> tuple[str, pb.StructuredQuery, bool]:
    """A random landmark or CUMULATE query on a stream of n sub-windows of t ms: its text, its
    structured form (built field by field, not converted from the text) and whether it is periodic."""
    grouped = rng.random() < 0.5
    items = ([gkey] if grouped else []) + rng.choice([[start, end], [end], [start], []]) + [count, total]
    names = {id(gkey): "g", id(start): "window_start", id(end): "window_end", id(count): "COUNT(*)",
             id(total): "SUM(v)"}
    select = ", ".join(names[id(it)] for it in items)
    q = pb.StructuredQuery(stream="s", items=items, group_by="g" if grouped else "")
    periodic = False
    if rng.random() < 0.5:
        q.landmark.SetInParent()
        every = rng.choice([None, *range(1, n + 1)])
        window = "[RANGE UNBOUNDED]" if every is None else f"[RANGE UNBOUNDED SLIDE {every * t} ms]"
        if every is not None:
            q.slide.CopyFrom(_ms(every * t))
            periodic = True
        where = ""
    else:
        step = t * rng.randint(1, max(1, n // 2))
        size = step * rng.randint(1, max(1, (n * t + t) // step - 1))
        while size > step and (size + step) // t - 1 > n:
            size -= step
        q.cumulate.CopyFrom(E.cumulate_window(step, size))
        window = f"[CUMULATE STEP {step} ms SIZE {size} ms]"
        where = rng.choice(["", "v > 0", "k = 'a'"])
        if where:
            column, op, value = where.split(" ")
            q.where.add(predicates=[pb.Predicate(column=column, op=op, values=[
                pb.Value(int64_value=int(value)) if column == "v" else pb.Value(string_value=value.strip("'"))])])
        periodic = rng.random() < 0.5
    text = (f"SELECT {select} FROM s {window}" + (f" WHERE {where}" if where else "")
            + (" GROUP BY g" if grouped else ""))
    return text, pb.StructuredQuery.FromString(q.SerializeToString()), periodic


def check_case(seed: int) -> bool:
    """One random case: the structured and the text forms answer the same after each batch; whether
    any of those answers had rows."""
    rng = random.Random(seed)
    t = rng.choice([1, 7, 100, 250])
    n = rng.randint(1, 6)
    lateness = rng.choice([0, t, 3 * t])
    s = Stream("s", SCHEMA, WindowSpec(subwindows=n, subwindow_ms=t, clock="event", allowed_lateness_ms=lateness,
                                       group_by=("g",)), 0)
    text, structured, periodic = random_case(rng, t, n)
    parsed = parse_query(text)
    from_pb = convert.query_from_pb(structured)
    assert from_pb == parsed, (text, from_pb)
    assert parse_query(to_text(from_pb)) == parsed
    assert convert.query_to_pb(parsed) == structured, text  # the same fields, both ways
    assert convert.query_from_pb(convert.query_to_pb(parsed)) == parsed
    newest, answered = 0, 0
    for _ in range(rng.randint(2, 6)):
        rows = []
        for _ in range(rng.randint(1, 30)):
            newest += rng.choice([0, 1, t // 2, t, 2 * t])
            rows.append((max(0, newest - rng.randint(0, lateness)), rng.choice(["a", "b", None]),
                         rng.choice([None, rng.randint(-5, 9)])))
        for i in range(0, len(rows), 2):  # a few rows at a time, sealing what the watermark passes
            part = rows[i:i + 2]
            s.append({"ts": [r[0] for r in part], "k": [r[1] for r in part], "v": [r[2] for r in part],
                      "g": [G[r[1]] for r in part]})
            while s.window.due(0):
                s.window.slide(0)
        got = run_plan(plan_query(from_pb, s, periodic=periodic))
        want = run_plan(plan_query(parsed, s, periodic=periodic))
        assert (got.rows, got.columns, got.types, got.access) == (want.rows, want.columns, want.types, want.access)
        answered += bool(got.rows)
    return answered > 0


def test_the_structured_landmark_and_cumulate_answer_as_the_text():
    answered = [check_case(seed) for seed in range(40)]
    assert sum(answered) >= 30, f"only {sum(answered)} of 40 random cases answered rows: they check little"


def test_cumulative_windows_round_trip_field_by_field():
    for text, fields in [
        ("SELECT window_start, COUNT(*) FROM s [RANGE UNBOUNDED SLIDE 1 h]",
         dict(landmark=pb.LandmarkWindow(), slide=_ms(3_600_000))),
        ("SELECT k, SUM(v) FROM s [RANGE UNBOUNDED] GROUP BY k", dict(landmark=pb.LandmarkWindow(), group_by="k")),
        ("SELECT window_end, COUNT(*) FROM s [CUMULATE STEP 1 h SIZE 24 h] WHERE v > 3",
         dict(cumulate=E.cumulate_window(3_600_000, 86_400_000))),
    ]:
        q = convert.query_to_pb(parse_query(text))
        for name, value in fields.items():
            assert getattr(q, name) == value, (text, name)
        assert convert.query_from_pb(q) == parse_query(text)


@pytest.mark.parametrize("fields, field, reason", [
    (dict(cumulate=pb.CumulateWindow(size_ms=10)), "cumulate.step_ms", "STEP must be positive"),
    (dict(cumulate=pb.CumulateWindow(step_ms=10)), "cumulate.size_ms", "SIZE must be positive"),
    (dict(cumulate=pb.CumulateWindow(step_ms=2**63, size_ms=2**63)), "cumulate.step_ms", "STEP is 9223372036854775808 ms, beyond int64"),
    (dict(landmark=pb.LandmarkWindow(), cumulate=pb.CumulateWindow(step_ms=1, size_ms=1)), "cumulate",
     "set landmark or cumulate, not both"),
    (dict(landmark=pb.LandmarkWindow(), window_shape=E.rows_window(3)), "landmark",
     "set window_shape or landmark, not both"),
    (dict(landmark=pb.LandmarkWindow(), range=_ms(100)), "range", "set range or landmark, not both"),
    (dict(cumulate=pb.CumulateWindow(step_ms=1, size_ms=1), range=_ms(100)), "range", "set range or cumulate, not both"),
])
def test_a_bad_cumulative_window_is_refused_naming_its_field(fields, field, reason):
    q = pb.StructuredQuery(stream="s", items=[count], **fields)
    with pytest.raises(QueryError) as err:
        convert.query_from_pb(q)
    assert err.value.reason.startswith(reason) and err.value.field == field, str(err.value)


def test_cumulative_windows_go_with_one_stream_without_expressions():
    j = pb.StructuredQuery(items=[count], sources=[pb.JoinSource(stream="s"), pb.JoinSource(stream="t")],
                           landmark=pb.LandmarkWindow())
    with pytest.raises(QueryError, match=r"not available for joins \(field landmark\)"):
        convert.query_from_pb(j)
    x = E.expr_query("s", [E.count()])
    x.cumulate.CopyFrom(E.cumulate_window(10, 20))
    with pytest.raises(QueryError, match=r"takes no CUMULATE window \(field cumulate\)"):
        convert.query_from_pb(x)
    # the binder's refusals reach the structured form too, by the same reason as the text's
    s = Stream("p", SCHEMA, WindowSpec(subwindows=3, subwindow_ms=100, clock="event"), 0)
    with pytest.raises(InvalidInput, match="STEP 150 ms is not a multiple of the sub-window length"):
        plan_query(convert.query_from_pb(pb.StructuredQuery(stream="p", items=[count],
                                                            cumulate=E.cumulate_window(150, 300))), s)


@pytest.mark.slow
def test_structured_cumulative_windows_through_the_server():
    from conftest import wait_for
    from windowstore.clients import Client
    from windowstore.server.process import ServerProcess

    with ServerProcess() as server, Client(server.target, timeout=30) as ws:
        ws.create_stream("s", schema=SCHEMA, subwindows=3, subwindow_ms=100, clock="event", group_by=["g"])
        periodic = ws.register(pb.StructuredQuery(stream="s", items=[start, end, count], landmark=pb.LandmarkWindow(),
                                                  slide=_ms(200)))
        cumulate = ws.register(pb.StructuredQuery(stream="s", items=[start, end, count],
                                                  cumulate=E.cumulate_window(100, 200)))  # every STEP
        rows = [(10 * i, "a" if i % 3 else "b", i) for i in range(0, 150, 7)]
        ws.append("s", {"ts": [r[0] for r in rows], "k": [r[1] for r in rows], "v": [r[2] for r in rows],
                        "g": [G[r[1]] for r in rows]})
        ws.append("s", {"ts": [2000], "k": ["a"], "v": [0], "g": [1]})  # the watermark passes every row above
        for text, structured in [
            ("SELECT g, window_start, window_end, COUNT(*), SUM(v) FROM s [RANGE UNBOUNDED] GROUP BY g",
             pb.StructuredQuery(stream="s", items=[gkey, start, end, count, total], group_by="g",
                                landmark=pb.LandmarkWindow())),
            ("SELECT window_start, window_end, COUNT(*) FROM s [CUMULATE STEP 100 ms SIZE 200 ms] WHERE v > 3",
             pb.StructuredQuery(stream="s", items=[start, end, count], cumulate=E.cumulate_window(100, 200),
                                where=[pb.Conjunction(predicates=[pb.Predicate(column="v", op=">",
                                                                               values=[pb.Value(int64_value=3)])])])),
        ]:
            a, b = ws.query(structured), ws.query(text)
            assert a.rows and a.rows == b.rows and a.slide == b.slide, text
        assert wait_for(lambda: ws.read_answers(periodic.id)[0], "the structured landmark query's answers")
        got = wait_for(lambda: [a for a in ws.read_answers(cumulate.id)[0] if a.rows],
                       "an answer with rows of the structured CUMULATE query")
        assert all(r[1] - r[0] in (100, 200) and r[1] % 100 == 0 for a in got for r in a.rows), got
        ws.unregister(periodic.id)
        ws.unregister(cumulate.id)
