"""One place per aggregate (issue 28): a function registered in one class, through
functions.register, works everywhere a built-in one does, without editing the parser, the protobuf
conversion or the join code: the query text (keyword, round trip, the unknown-function hint), the
protobuf form (convert round trip, and a real server on 127.0.0.1 through the SDK, one-time and
periodic), a window (single stream, grouped too), two-stream joins on each of the join's aggregate
paths (per-key partials, the 8.3.2 join synopsis, joined rows), each checked against a brute-force
computation over the rows. The registration is undone after each test."""
from __future__ import annotations

import random

import numpy as np
import pytest

from conftest import wait_for
from windowstore.clients import Client, InvalidArgument, aggregate
from windowstore.server import convert
from windowstore.server.app import WindowStoreServer
from windowstore.server.config import ServerConfig
from windowstore.store import Stream, WindowSpec
from windowstore.store.errors import QueryError, QuerySyntaxError
from windowstore.store.exact import grouped_count, grouped_sum
from windowstore.store.functions import FUNCTIONS, SQL_NAMES, AggregateFunction, register, unregister
from windowstore.store.join import plan_join, run_join, window_inputs
from windowstore.store.parser import parse_statement, to_text
from windowstore.store.planner import plan_query, run_plan
from windowstore.v1 import windowstore_pb2 as pb


class SumSquares(AggregateFunction):
    """SUM_SQUARES(x): the exact sum of x * x over the non-null values (NULL over none). Its partial
    is (sum of squares, values counted); partials merge by adding both."""

    name = "sum_squares"
    inputs = frozenset({"int64"})

    def result_type(self, input_type):
        return "int128"

    def from_rows(self, b, values, rows, strings):
        return (sum(v * v for v in values.tolist()), len(values))

    def finish(self, b, parts, strings):
        return sum(p[0] for p in parts) if sum(p[1] for p in parts) else None

    def from_group_rows(self, b, inverse, groups, values, keys, strings):
        return (grouped_sum(inverse, values.astype(object) ** 2, groups),
                np.bincount(inverse, minlength=groups).astype(np.int64))

    def finish_groups(self, b, inverse, groups, parts, uniq, strings):
        sums = grouped_sum(inverse, np.concatenate([p[0].astype(object) for p in parts]), groups).astype(object)
        counts = grouped_count(inverse, np.concatenate([p[1] for p in parts]), groups)
        sums[counts == 0] = None
        return sums

    def over(self, b, values):
        values = [v for v in values if v is not None]
        return sum(v * v for v in values) if values else None

    # the join paths: a row standing for w joined rows contributes w * x * x
    def join_by_key_ok(self, b):
        return True

    def weighted_rows(self, b, values, valid, weights):
        counted = weights if valid is None else np.where(valid, weights, 0)
        return (values.astype(object) ** 2 * counted.astype(object), counted)

    def join_synopsis_ok(self, b):
        return True


@pytest.fixture
def sum_squares():
    fn = register(SumSquares())
    try:
        yield fn
    finally:
        if "sum_squares" in FUNCTIONS:
            unregister("sum_squares")
    assert "sum_squares" not in FUNCTIONS and "sum_squares" not in SQL_NAMES


def sq(values) -> int | None:
    values = [v for v in values if v is not None]
    return sum(v * v for v in values) if values else None


def test_registration_is_refused_twice_and_undone(sum_squares):
    with pytest.raises(ValueError, match="registered already"):
        register(SumSquares())
    unregister("sum_squares")
    with pytest.raises(QuerySyntaxError, match="unknown function 'SUM_SQUARES'"):
        parse_statement("SELECT SUM_SQUARES(v) FROM s")
    register(SumSquares())  # the fixture undoes it


def test_the_query_text_knows_the_function_and_its_hint_names_it(sum_squares):
    q = parse_statement("SELECT k, sum_squares(v) AS s2 FROM s [RANGE 2 SUBWINDOWS] GROUP BY k")
    assert q.items[1].func == "sum_squares" and q.items[1].column == "v" and q.items[1].alias == "s2"
    assert "SUM_SQUARES(v)" in to_text(q)
    assert parse_statement(to_text(q)) == q
    with pytest.raises(QuerySyntaxError) as e:
        parse_statement("SELECT CUBES(v) FROM s")
    assert "SUM_SQUARES" in str(e.value) and "MEDIAN" in str(e.value)


def test_the_protobuf_form_carries_it_by_name_and_built_ins_by_enum(sum_squares):
    q = parse_statement("SELECT SUM_SQUARES(v), SUM(v) FROM s [RANGE 2 SUBWINDOWS]")
    msg = convert.query_to_pb(q)
    assert msg.items[0].aggregate.function_name == "sum_squares"
    assert msg.items[0].aggregate.func == pb.AGGREGATE_FUNCTION_UNSPECIFIED
    assert msg.items[1].aggregate.func == pb.AGGREGATE_FUNCTION_SUM and msg.items[1].aggregate.function_name == ""
    back = convert.query_from_pb(pb.StructuredQuery.FromString(msg.SerializeToString()))
    assert back == q
    assert aggregate("sum_squares", "v") == msg.items[0].aggregate  # the SDK builds the same message
    assert aggregate("sum", "v") == msg.items[1].aggregate
    bad = pb.StructuredQuery(stream="s", items=[pb.SelectItem(aggregate=aggregate("cubes", "v"))])
    with pytest.raises(QueryError) as e:
        convert.query_from_pb(bad)
    assert e.value.loc.field.endswith("aggregate.function_name")
    mixed = pb.StructuredQuery(stream="s", items=[pb.SelectItem(aggregate=pb.Aggregate(
        func=pb.AGGREGATE_FUNCTION_SUM, function_name="sum_squares", column="v"))])
    with pytest.raises(QueryError, match="different aggregates"):
        convert.query_from_pb(mixed)


SCHEMA = {"ts": "int64", "k": "string", "v": "int64"}


def fill(rng, s: Stream, log: list[list[dict]], slides: int, per: int = 12) -> None:
    for t in range(slides):
        rows = [{"ts": t, "k": f"k{rng.randrange(3)}", "v": rng.choice([None, rng.randrange(-9, 10),
                                                                         rng.randrange(-2**40, 2**40)])}
                for _ in range(per)]
        s.append({c: [r[c] for r in rows] for c in SCHEMA})
        s.window.slide(t)
        log.append(rows)


def test_a_window_answers_it_like_brute_force(sum_squares):
    rng = random.Random(3)
    s = Stream("s", SCHEMA, WindowSpec(subwindows=4, subwindow_ms=1, clock="manual"), 0)
    log: list[list[dict]] = []
    fill(rng, s, log, 6)
    window = [r for sub in log[-3:] for r in sub]
    a = run_plan(plan_query(parse_statement("SELECT SUM_SQUARES(v), COUNT(v) FROM s [RANGE 3 SUBWINDOWS]"), s))
    assert a.rows == [(sq(r["v"] for r in window), sum(r["v"] is not None for r in window))]
    assert a.types[0] == "int128"
    g = run_plan(plan_query(parse_statement("SELECT k, SUM_SQUARES(v) FROM s [RANGE 3 SUBWINDOWS] GROUP BY k"), s))
    keys = sorted({r["k"] for r in window})
    assert g.rows == [(k, sq(r["v"] for r in window if r["k"] == k)) for k in keys]


def join_reference(left: list[dict], right: list[dict], band: bool) -> tuple:
    pairs = [(a, b) for a in left for b in right
             if a["k"] == b["k"] and (not band or abs(a["ts"] - b["ts"]) <= 1)]
    return (len(pairs), sq(a["v"] for a, _ in pairs), sq(b["v"] for _, b in pairs))


@pytest.mark.parametrize("band", [False, True])
def test_two_stream_joins_answer_it_like_brute_force_on_every_path(sum_squares, band):
    rng = random.Random(5 + band)
    ss = {n: Stream(n, SCHEMA, WindowSpec(subwindows=4, subwindow_ms=1, clock="manual"), 0) for n in ("a", "b")}
    logs: dict[str, list] = {"a": [], "b": []}
    on = "a.k = b.k" + (" AND b.ts BETWEEN a.ts - 1 AND a.ts + 1" if band else "")
    text = (f"SELECT COUNT(*), SUM_SQUARES(a.v), SUM_SQUARES(b.v) FROM a [RANGE 3 SUBWINDOWS] "
            f"JOIN b [RANGE 2 SUBWINDOWS] ON {on}")
    q = parse_statement(text)
    periodic = plan_join(q, ss, cache=True)
    assert periodic.synopsis  # the registered class says the 8.3.2 synopsis answers it
    grouped = plan_join(parse_statement(text.replace("SELECT ", "SELECT a.k, ") + " GROUP BY a.k"), ss, cache=True)
    assert not grouped.synopsis  # kept joined rows, finished by the class's from_group_rows / finish_groups
    for t in range(6):
        for n in ("a", "b"):
            rows = [{"ts": t, "k": f"k{rng.randrange(3)}", "v": rng.choice([None, rng.randrange(-9, 10),
                                                                             rng.randrange(-2**40, 2**40)])}
                    for _ in range(rng.randrange(0, 8))]
            ss[n].append({c: [r[c] for r in rows] for c in SCHEMA})
            ss[n].window.slide(t)
            logs[n].append(rows)
        left = [r for sub in logs["a"][-3:] for r in sub]
        right = [r for sub in logs["b"][-2:] for r in sub]
        want = [join_reference(left, right, band)]
        assert periodic.evaluate(window_inputs(periodic, ss)).rows == want  # kept between slides
        keys = sorted({a["k"] for a in left} & {b["k"] for b in right})
        want_grouped = [(k, *join_reference([a for a in left if a["k"] == k], right, band)) for k in keys]
        assert grouped.evaluate(window_inputs(grouped, ss)).rows == [r for r in want_grouped if r[1]]
        one_time = plan_join(q, ss, cache=False)
        assert one_time.by_key_ok is not band  # per-key partials for the equi-join
        assert run_join(one_time, ss).rows == want
        assert one_time.stats.by_key == (0 if band else 1)


def test_a_real_server_answers_it_through_the_sdk_one_time_and_periodic(sum_squares):
    srv = WindowStoreServer(ServerConfig(host="127.0.0.1", port=0, in_memory=True)).start()
    try:
        with Client(srv.address, timeout=30) as ws:
            ws.create_stream("s", SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual")
            text = "SELECT SUM_SQUARES(v), COUNT(*) FROM s [RANGE 2 SUBWINDOWS SLIDE 1 SUBWINDOWS]"
            q = ws.register(text)
            rng = random.Random(7)
            log: list[list[dict]] = []
            for slide in range(4):
                rows = [{"ts": slide, "k": "k", "v": rng.choice([None, rng.randrange(-99, 100), 2**40])}
                        for _ in range(5)]
                ws.append("s", {c: [r[c] for r in rows] for c in SCHEMA})
                assert ws.slide("s") == slide
                log.append(rows)
                wait_for(lambda: ws.read_answers(q.id)[1] >= slide, f"the periodic answer for slide {slide}")
            kept, newest, _ = ws.read_answers(q.id)
            assert newest == 3 and kept
            for a in kept:
                window = [r for sub in log[max(0, a.slide - 1): a.slide + 1] for r in sub]
                assert a.rows == [(sq(r["v"] for r in window), len(window))]
            window = [r for sub in log[-2:] for r in sub]
            structured = pb.StructuredQuery(stream="s", items=[pb.SelectItem(aggregate=aggregate("sum_squares", "v"))],
                                            range=pb.WindowLength(value=2, unit=pb.LENGTH_UNIT_SUBWINDOWS))
            assert ws.query(structured).rows == [(sq(r["v"] for r in window),)]
            assert ws.query("SELECT SUM_SQUARES(v) FROM s [RANGE 2 SUBWINDOWS]").rows == [(sq(r["v"] for r in window),)]
            with pytest.raises(InvalidArgument, match="function_name"):
                ws.query(pb.StructuredQuery(stream="s", items=[pb.SelectItem(aggregate=aggregate("cubes", "v"))]))
            ws.unregister(q.id)
    finally:
        srv.stop(5)
