"""Exact integer arithmetic, exact literal comparisons, the query round trip, and internal errors."""
from __future__ import annotations

import math
from dataclasses import replace
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, strategies as st

from windowstore.server import convert
from windowstore.store import (Aggregate, KeyColumn, OrderBy, Predicate, Query, QueryError, Range, Schema, Stream,
                               WindowSpec, bind, parse_query, plan_query, to_text)
from windowstore.store.exact import INT64_MAX, INT64_MIN, exact_sum, grouped_sum, ratio
from windowstore.txn import QueryFailed, Scheduler
from windowstore.v1 import windowstore_pb2 as pb

EXTREMES = [INT64_MIN, INT64_MIN + 1, -(2**62), -(2**53) - 1, -1, 0, 1, 2**53 + 1, 2**62, INT64_MAX - 1, INT64_MAX]
int64s = st.one_of(st.sampled_from(EXTREMES), st.integers(INT64_MIN, INT64_MAX), st.integers(-100, 100))


# -- exact sums --------------------------------------------------------------------------------------
@given(st.lists(int64s, max_size=60))
def test_integer_sums_never_wrap(values):
    a = np.array(values, dtype=np.int64)
    got = exact_sum(a)
    assert got == sum(values) and type(got) is int


@given(st.lists(st.tuples(st.integers(0, 4), int64s), max_size=60))
def test_grouped_integer_sums_are_exact(pairs):
    groups = 5
    inverse = np.array([g for g, _ in pairs], dtype=np.int64)
    values = np.array([v for _, v in pairs], dtype=np.int64)
    got = grouped_sum(inverse, values, groups).tolist()
    want = [sum(v for g, v in pairs if g == k) for k in range(groups)]
    assert got == want
    counts = np.bincount(inverse, minlength=groups)
    nonzero = counts > 0
    means = ratio(grouped_sum(inverse, values, groups)[nonzero], counts[nonzero]).tolist()
    assert means == [w / c for w, c in zip(np.array(want, dtype=object)[nonzero], counts[nonzero].tolist())]


def test_int64_min_group_sum_takes_the_exact_path():
    # np.abs(INT64_MIN) is negative: a bound computed that way chose the float path (issue 9, case 2)
    got = grouped_sum(np.zeros(3, dtype=np.int64), np.array([INT64_MIN, 1, 7], dtype=np.int64), 1)
    assert got.tolist() == [INT64_MIN + 8] and got.dtype == np.int64


# -- exact comparisons with literals ------------------------------------------------------------------
literals = st.one_of(
    st.sampled_from(EXTREMES), st.integers(-(2**70), 2**70),
    st.decimals(allow_nan=False, allow_infinity=False, places=3, min_value=-(10**20), max_value=10**20),
    st.sampled_from([Decimal("9007199254740993.0"), Decimal("0.5"), Decimal("-0.5"), Decimal("1e999"),
                     Decimal("-1e999"), Decimal("1e-999"), Decimal("-1e-999"), Decimal("9223372036854775807.5")]),
    st.floats(allow_nan=False), st.sampled_from([math.inf, -math.inf, 2.0**63, -(2.0**63)]))
OPS = ["=", "!=", "<", "<=", ">", ">="]


def _as_fraction(v):
    if isinstance(v, float) and math.isinf(v):
        return None
    return Fraction(v)


def _truth(x, op, v) -> bool:
    """The mathematical comparison of an integer with a literal (infinities by sign)."""
    f = _as_fraction(v)
    if f is None:
        return {"=": False, "!=": True, "<": v > 0, "<=": v > 0, ">": v < 0, ">=": v < 0}[op]
    return {"=": x == f, "!=": x != f, "<": x < f, "<=": x <= f, ">": x > f, ">=": x >= f}[op]


@given(st.lists(int64s, min_size=1, max_size=20), st.sampled_from(OPS), literals)
def test_int64_comparisons_with_literals_are_exact(values, op, literal):
    stream = Stream("s", {"ts": "int64", "x": "int64"}, WindowSpec(subwindows=1, subwindow_ms=1000, clock="manual"), 0)
    q = Query("s", (Aggregate("count"),), where=((Predicate("x", op, literal),),))
    cmp = bind(q, stream.schema, stream.spec).where[0][0]
    got = cmp.mask(np.array(values, dtype=np.int64), stream.strings).tolist()
    assert got == [_truth(x, op, literal) for x in values]


@given(st.lists(int64s, min_size=1, max_size=20), st.lists(literals, min_size=1, max_size=4), st.booleans())
def test_int64_in_lists_are_exact(values, members, negate):
    stream = Stream("s", {"ts": "int64", "x": "int64"}, WindowSpec(subwindows=1, subwindow_ms=1000, clock="manual"), 0)
    op = "not in" if negate else "in"
    q = Query("s", (Aggregate("count"),), where=((Predicate("x", op, tuple(members)),),))
    cmp = bind(q, stream.schema, stream.spec).where[0][0]
    got = cmp.mask(np.array(values, dtype=np.int64), stream.strings).tolist()
    want = [any(_truth(x, "=", m) for m in members) != negate for x in values]
    assert got == want


@given(st.lists(st.floats(allow_nan=False), min_size=1, max_size=20), st.sampled_from(OPS), literals)
def test_float64_comparisons_round_the_literal_first(values, op, literal):
    stream = Stream("s", {"ts": "int64", "y": "float64"}, WindowSpec(subwindows=1, subwindow_ms=1000, clock="manual"), 0)
    q = Query("s", (Aggregate("count"),), where=((Predicate("y", op, literal),),))
    cmp = bind(q, stream.schema, stream.spec).where[0][0]
    try:
        r = float(literal)
    except OverflowError:
        r = math.inf if literal > 0 else -math.inf
    ops = {"=": float.__eq__, "!=": float.__ne__, "<": float.__lt__, "<=": float.__le__, ">": float.__gt__,
           ">=": float.__ge__}
    assert cmp.mask(np.array(values), stream.strings).tolist() == [ops[op](y, r) for y in values]


# -- text -> structured -> protobuf -> structured ------------------------------------------------------
names = st.sampled_from(["ts", "src", "bytes", "k", "x_1", "Lat", "dst"])
text_literals = st.one_of(
    st.integers(-(10**30), 10**30), st.decimals(allow_nan=False, allow_infinity=False, places=4),
    st.sampled_from([Decimal("1E+3"), Decimal("-0.5"), Decimal("9007199254740993.0"), Decimal("1e-400")]),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=8))


@st.composite
def aggregates(draw, columns=names):
    func = draw(st.sampled_from(["count", "count*", "sum", "avg", "min", "max", "count_distinct", "quantile"]))
    alias = draw(st.one_of(st.none(), st.sampled_from(["a", "total", "n2"])))
    if func == "count*":
        return Aggregate("count", alias=alias)
    q = draw(st.sampled_from([Decimal(x) for x in ("0", "0.5", "0.90", "1", "1E-5", "0.333")])) if func == "quantile" else None
    return Aggregate(func, draw(columns), q, alias)


@st.composite
def structured_queries(draw):
    group = draw(st.one_of(st.none(), names))
    items = ([KeyColumn(group, draw(st.one_of(st.none(), st.just("g"))))] if group else []) + draw(
        st.lists(aggregates(), min_size=1, max_size=3))
    where = tuple(tuple(draw(st.lists(st.one_of(
        st.builds(Predicate, names, st.sampled_from(OPS), text_literals),
        st.builds(lambda c, op, vs: Predicate(c, op, tuple(vs)), names, st.sampled_from(["in", "not in"]),
                  st.lists(text_literals, min_size=1, max_size=3))), min_size=1, max_size=3)))
                  for _ in range(draw(st.integers(0, 3))))
    order = tuple(draw(st.lists(st.one_of(
        st.builds(lambda i, d: OrderBy(i, d), st.integers(0, 5), st.booleans()),
        st.builds(lambda n, d: OrderBy(descending=d, name=n), st.sampled_from(["a", "total", "src"]), st.booleans()),
        st.builds(lambda a, d: OrderBy(descending=d, expr=replace(a, alias=None)), aggregates(), st.booleans())),
        max_size=2)))
    lengths = st.one_of(st.none(), st.builds(Range, st.integers(1, 2**32 - 1), st.sampled_from(["ms", "subwindows", "rows"])))
    outer = ()
    if group and draw(st.booleans()):
        outer = tuple(draw(st.lists(aggregates(st.sampled_from(["a", "total", "g"])), min_size=1, max_size=2)))
    return Query(draw(st.sampled_from(["packets", "s.x-1", "_p"])), tuple(items), where, group, order,
                 draw(st.one_of(st.none(), st.integers(0, 2**32 - 1))), draw(lengths), draw(lengths), outer,
                 draw(st.booleans()))


@pytest.mark.slow
@given(structured_queries())
def test_text_structured_protobuf_round_trip(q):
    text = to_text(q)
    parsed = parse_query(text)
    assert parsed == q, text
    wire = pb.StructuredQuery.FromString(convert.query_to_pb(parsed).SerializeToString())
    assert convert.query_from_pb(wire) == parsed, text


def test_structured_errors_name_the_field():
    schema, spec = Schema.of({"ts": "int64", "k": "string", "x": "int64"}), WindowSpec(subwindows=4, subwindow_ms=1000)
    msg = pb.StructuredQuery(stream="s", items=[pb.SelectItem(aggregate=pb.Aggregate(
        func=pb.AGGREGATE_FUNCTION_SUM, column="k"))])
    with pytest.raises(QueryError, match=r"numeric column; 'k' is string \(field items\[0\]\.aggregate\.column\)"):
        bind(convert.query_from_pb(msg), schema, spec)
    msg = pb.StructuredQuery(stream="s", items=[pb.SelectItem(aggregate=pb.Aggregate(func=pb.AGGREGATE_FUNCTION_COUNT))],
                             outer=[pb.Aggregate(func=pb.AGGREGATE_FUNCTION_MAX, column="count(*)")])
    with pytest.raises(QueryError, match=r"must use GROUP BY \(field outer\[0\]\.column\)"):
        bind(convert.query_from_pb(msg), schema, spec)
    msg = pb.StructuredQuery(stream="s", group_by="k", items=[
        pb.SelectItem(key_column="k"), pb.SelectItem(aggregate=pb.Aggregate(func=pb.AGGREGATE_FUNCTION_COUNT))],
        outer=[pb.Aggregate(func=pb.AGGREGATE_FUNCTION_MAX, column="nope")])
    with pytest.raises(QueryError, match=r"'nope' is not a column of the sub-query .* \(field outer\[0\]\.column\)"):
        bind(convert.query_from_pb(msg), schema, spec)
    msg = pb.StructuredQuery(stream="s", items=[pb.SelectItem(aggregate=pb.Aggregate(func=pb.AGGREGATE_FUNCTION_COUNT))],
                             where=[pb.Conjunction(predicates=[pb.Predicate(column="x", op="=", values=[
                                 pb.Value(decimal_value="1e")])])])
    with pytest.raises(QueryError, match=r"not a decimal number \(field where\[0\]\.predicates\[0\]\.values\[0\]\)"):
        convert.query_from_pb(msg)


def test_wide_integers_travel_exactly():
    for x in [0, INT64_MAX, INT64_MIN, INT64_MAX + 1, INT64_MIN - 1, 2**95 + 12345, -(2**100), 2**127 - 1, -(2**127)]:
        v = convert.value_to_pb(x)
        assert v.WhichOneof("kind") == ("int64_value" if INT64_MIN <= x <= INT64_MAX else "int128_value")
        assert convert.value_from_pb(pb.Value.FromString(v.SerializeToString())) == x
    assert convert.value_from_pb(convert.value_to_pb(2**200)) == 2**200
    assert convert.value_from_pb(convert.value_to_pb(Decimal("9007199254740993.0"))) == Decimal("9007199254740993.0")


answer_values = st.one_of(
    st.none(), st.booleans(), int64s, st.integers(-(2**130), 2**130), st.floats(), st.text(),
    st.decimals(allow_nan=False, allow_infinity=False),
    st.sampled_from([np.int64(7), np.float64(0.5), np.int32(-3), np.bool_(True)]))


@given(st.lists(answer_values, max_size=8))
def test_an_answer_row_encodes_each_value_as_value_to_pb_does(row):
    """answer_to_pb appends a row's values with add_value: the same bytes as value_to_pb's Value."""
    got = pb.Row()
    for x in row:
        convert.add_value(got.values, x)
    want = pb.Row(values=[convert.value_to_pb(x) for x in row])
    assert got.SerializeToString(deterministic=True) == want.SerializeToString(deterministic=True)
    assert [v.WhichOneof("kind") for v in got.values] == [v.WhichOneof("kind") for v in want.values]


# -- an internal error fails one query, is counted, and the scheduler goes on -------------------------
def test_an_internal_error_fails_the_query_not_the_scheduler():
    clock = [0.0]
    stream = Stream("s", {"ts": "int64", "v": "int64"}, WindowSpec(subwindows=2, subwindow_ms=10, clock="manual"), 0)
    stream.append({"ts": [1, 2], "v": [3, 4]})
    stream.window.slide(1)
    sched = Scheduler("ttu", lambda: clock[0])
    sched.add_stream(stream)
    broken = plan_query(parse_query("SELECT v, COUNT(*) FROM s GROUP BY v"), stream, access="window")

    def explode(sub):
        raise ZeroDivisionError("boom")
    broken.read = explode
    bad = sched.submit(broken)
    good = sched.submit(plan_query(parse_query("SELECT SUM(v) FROM s"), stream, access="window"))
    sched.run_until_idle()
    assert isinstance(bad.error, QueryFailed) and "ZeroDivisionError: boom" in str(bad.error)
    assert good.result.answer.rows == [(7,)]
    assert sched.by_class["onetime"].errors == 1 and sched.by_class["onetime"].committed == 1

    errors = []
    task = sched.register(broken, every=1, on_error=lambda t, e: errors.append(e))
    stream.window.slide(2)
    sched.run_until_idle()
    stream.window.slide(3)
    sched.run_until_idle()
    assert len(errors) == 1 and not task.active and task.id not in sched.tasks  # failed once, then stopped
