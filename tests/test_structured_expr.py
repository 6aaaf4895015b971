"""The structured (protobuf) form of queries with expressions and of the APPROXIMATE threshold
query: built with the SDK's helpers (clients/expressions.py) independently of the query text, it
must bind to the same query the text parses to, print back to text that parses to that query, and
give the answers the text gives, which DuckDB (the oracle) gives too. Then its errors (named by field
path) and a round trip through a real server."""
from __future__ import annotations

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from windowstore.clients import expressions as E
from windowstore.clients.expressions import X, col, lit
from windowstore.server import convert
from windowstore.store import InvalidInput, QueryError, plan_query, run_plan
from windowstore.store.parser import parse_statement, to_text
from windowstore.v1 import windowstore_pb2 as pb

from conftest import examples
from test_sql_expr import SCHEMA, _duck, _rows_equal, _sorted, _stream, _stream_batches

Node = tuple[str, str, X]  # (windowstore text, DuckDB text, the SDK's structured expression)


def _int(v: int) -> Node:
    return (str(v) if v >= 0 else f"({v})", f"CAST({v} AS BIGINT)", lit(v))


def _digits(v: int) -> Node:
    """round()'s precision: a plain integer constant in both texts (DuckDB takes an INTEGER there)."""
    return (f"({v})", f"({v})", lit(v))


def _float(v: float) -> Node:
    text = repr(v) if "e" in repr(v) else f"{v!r}e0"  # a DOUBLE constant (`1.5` is a DECIMAL, as in DuckDB)
    return (text if v >= 0 else f"({text})", f"CAST({v!r} AS DOUBLE)", lit(v))


def _str(v: str) -> Node:
    q = "'" + v.replace("'", "''") + "'"
    return (q, q, lit(v))


def _bool(v: bool) -> Node:
    return ("TRUE" if v else "FALSE",) * 2 + (lit(v),)  # type: ignore[return-value]


def _column(name: str) -> Node:
    return (name, name, col(name))


def _fmt(fmt: str, build, *parts: Node) -> Node:
    return (fmt.format(*[p[0] for p in parts]), fmt.format(*[p[1] for p in parts]), build(*[p[2] for p in parts]))


_CMP = {"=": X.__eq__, "!=": X.__ne__, "<": X.__lt__, "<=": X.__le__, ">": X.__gt__, ">=": X.__ge__}


@st.composite
def nodes(draw, t: str, depth: int = 3) -> Node:
    """A random expression of type t (int, float, str, bool) in its three forms."""
    leaf = depth <= 0 or draw(st.integers(0, 3)) == 0
    sub = (lambda typ, d=depth - 1: draw(nodes(typ, d)))
    if t == "int":
        if leaf:
            return draw(st.one_of(st.sampled_from(["bytes", "port", "rid"]).map(_column),
                                  st.integers(-20, 20).map(_int)))
        a, b = sub("int"), sub("int")
        k = draw(st.integers(0, 9))
        if k <= 2:
            o = "+-*"[k]
            return _fmt("({} " + o + " {})", lambda x, y: E.op(o, x, y), a, b)
        if k == 3:
            return _fmt("({} % {})", lambda x, y: x % y, a, _int(draw(st.integers(1, 9))))
        if k == 4:
            return _fmt("abs({})", lambda x: E.func("abs", x), a)
        if k == 5:
            return _fmt("length({})", lambda x: E.func("length", x), sub("str"))
        if k == 6:
            return _fmt("CASE WHEN {} THEN {} ELSE {} END", lambda c, x, y: E.case((c, x), else_=y), sub("bool"), a, b)
        if k == 7:
            return _fmt("COALESCE({}, {})", lambda x, y: E.func("coalesce", x, y), a, b)
        if k == 8:
            return _fmt("NULLIF({}, {})", lambda x, y: E.func("nullif", x, y), a, b)
        return _fmt("round({}, {})", lambda x, y: E.func("round", x, y), a, _digits(draw(st.integers(-2, 1))))
    if t == "float":
        if leaf:
            return draw(st.one_of(st.just(_column("f")),
                                  st.floats(-50, 50, allow_nan=False).map(lambda v: _float(round(v, 2)))))
        k = draw(st.integers(0, 7))
        a = sub("float")
        if k <= 1:
            o = "+-"[k]
            return _fmt("({} " + o + " {})", lambda x, y: E.op(o, x, y), a, sub(draw(st.sampled_from(["int", "float"]))))
        if k == 2:
            return _fmt("({} / {})", lambda x, y: x / y, sub("int"), sub("int"))
        if k == 3:
            return _fmt("({} * {})", lambda x, y: x * y, a, sub("float"))
        if k == 4:
            name = draw(st.sampled_from(["floor", "ceil", "round", "abs"]))
            return _fmt(name + "({})", lambda x: E.func(name, x), a)
        if k == 5:
            return _fmt("round({}, {})", lambda x, y: E.func("round", x, y), a, _digits(draw(st.integers(-1, 2))))
        if k == 6:
            return _fmt("CAST({} AS DOUBLE)", lambda x: x.cast("DOUBLE"), sub("int"))
        return _fmt("CASE WHEN {} THEN {} END", lambda c, x: E.case((c, x)), sub("bool"), a)
    if t == "str":
        if leaf:
            return draw(st.one_of(st.just(_column("src")), st.sampled_from(["a", "xY", "", "%"]).map(_str)))
        a = sub("str")
        k = draw(st.integers(0, 5))
        if k == 0:
            name = draw(st.sampled_from(["lower", "upper"]))
            return _fmt(name + "({})", lambda x: E.func(name, x), a)
        if k == 1:
            i = _int(draw(st.integers(-3, 4)))
            if draw(st.booleans()):
                return _fmt("substr({}, {})", lambda x, y: E.func("substr", x, y), a, i)
            return _fmt("substr({}, {}, {})", lambda x, y, z: E.func("substr", x, y, z), a, i,
                        _int(draw(st.integers(-2, 3))))
        if k == 2:
            return _fmt("concat({}, {})", lambda x, y: E.func("concat", x, y), a,
                        sub(draw(st.sampled_from(["str", "int"]))))
        if k == 3:
            return _fmt("CAST({} AS VARCHAR)", lambda x: E.cast(x, "VARCHAR"), sub("int"))
        if k == 4:
            return _fmt("COALESCE({}, {})", lambda x, y: E.func("coalesce", x, y), a, sub("str"))
        return _fmt("CASE {} WHEN 'a' THEN {} ELSE {} END", lambda x, y, z: E.case(("a", y), else_=z, operand=x),
                    a, sub("str"), a)
    if leaf:
        return draw(st.one_of(st.just(_column("ok")), st.booleans().map(_bool)))
    k = draw(st.integers(0, 9))
    if k <= 1:
        typ = draw(st.sampled_from(["int", "float", "str"]))
        o = draw(st.sampled_from(sorted(_CMP)))
        return _fmt("({} " + o + " {})", _CMP[o], sub(typ), sub(typ))
    if k == 2:
        o = draw(st.sampled_from(["AND", "OR"]))
        return _fmt("({} " + o + " {})", (lambda x, y: x & y) if o == "AND" else (lambda x, y: x | y),
                    sub("bool"), sub("bool"))
    if k == 3:
        return _fmt("(NOT {})", lambda x: ~x, sub("bool"))
    neg = draw(st.booleans())
    if k == 4:
        return _fmt("({} IS " + ("NOT " if neg else "") + "NULL)", X.is_not_null if neg else X.is_null, sub("int"))
    if k == 5:
        return _fmt("({} IS " + ("NOT " if neg else "") + "DISTINCT FROM {})",
                    X.is_not_distinct_from if neg else X.is_distinct_from, sub("int"), sub("int"))
    if k == 6:
        return _fmt("({} " + ("NOT " if neg else "") + "BETWEEN {} AND {})", X.not_between if neg else X.between,
                    sub("int"), sub("int"), sub("int"))
    if k == 7:
        pat = _str(draw(st.sampled_from(["a%", "%b", "_", "%", "a_", "%x%", ""])))
        return _fmt("({} " + ("NOT " if neg else "") + "LIKE {})", X.not_like if neg else X.like, sub("str"), pat)
    if k == 8:
        return _fmt("({} " + ("NOT " if neg else "") + "IN ({}, {}))", X.not_in if neg else X.isin,
                    sub("int"), sub("int"), sub("int"))
    return _fmt("({} = {})", X.__eq__, sub("bool"), sub("bool"))


_FIXTURES: dict[int, tuple] = {}


def _fixture(seed: int):
    if seed not in _FIXTURES:
        s, rows = _stream(seed, per=25)
        _FIXTURES[seed] = (s, _duck(rows))
    return _FIXTURES[seed]


def _answer(query, s):
    try:
        return run_plan(plan_query(query, s)).rows
    except InvalidInput as err:
        return err


def _same_query_three_ways(text: str, duck_text: str, structured: pb.StructuredQuery, seed: int, ordered: bool):
    """The structured form binds to the text's query, prints back to it, and answers as the text and
    DuckDB do (or is refused where both are)."""
    s, con = _fixture(seed)
    wire = pb.StructuredQuery.FromString(structured.SerializeToString())
    from_pb = convert.query_from_pb(wire)
    parsed = parse_statement(text)
    if parsed.expr is not None:  # (text the first grammar takes parses to its own, plainer query)
        assert from_pb == parsed, f"{text}\n{to_text(from_pb)}"
    assert parse_statement(to_text(from_pb)) == parsed, f"{text}\n{to_text(from_pb)}"
    assert convert.query_from_pb(convert.query_to_pb(from_pb)) == from_pb
    got, want = _answer(from_pb, s), _answer(parsed, s)
    try:
        exp = [tuple(r) for r in con.execute(duck_text).fetchall()]
    except duckdb.Error:
        exp = None
    if isinstance(want, InvalidInput):
        assert isinstance(got, InvalidInput) and exp is None, (text, got, exp)
        assert "field " in str(got) or from_pb == parsed, str(got)  # located by its field path
        return
    assert not isinstance(got, InvalidInput), (text, got)
    assert exp is not None, f"{text}: answered but DuckDB refuses"
    if not ordered:
        got, want, exp = _sorted(got), _sorted(want), _sorted(exp)
    assert _rows_equal(got, want) and _rows_equal(got, exp), f"{text}\n got {got[:6]}\nwant {exp[:6]}"


SETTINGS = settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.sampled_from(["int", "float", "str", "bool"]).flatmap(lambda t: nodes(t)), st.integers(0, 2))
def test_random_expressions_structured_equal_text_and_duckdb(e, seed):
    text, duck, x = e
    q = E.expr_query("s", [col("rid"), x.alias("v")], order_by=[col("rid")])
    _same_query_three_ways(f"SELECT rid, {text} AS v FROM s ORDER BY rid",
                           f"SELECT rid, {duck} AS v FROM s ORDER BY rid", q, seed, True)


@SETTINGS
@given(nodes("bool"), st.sampled_from(["int", "str", "bool"]).flatmap(lambda t: nodes(t, 2)), nodes("int", 2),
       st.integers(0, 2), st.booleans())
def test_random_grouped_expressions_structured_equal_text_and_duckdb(where, key, arg, seed, desc):
    fmt = ("SELECT {k} AS g, COUNT(*) AS n, SUM({a}) AS total, MIN({a}) FILTER (WHERE {w}) AS lo "
           "FROM s WHERE {w} OR bytes > 2500 GROUP BY 1 HAVING COUNT(*) > 1 ORDER BY n" + (" DESC" if desc else ""))
    text = fmt.format(k=key[0], a=arg[0], w=where[0])
    duck = fmt.format(k=key[1], a=arg[1], w=where[1])
    n = col("n")
    q = E.expr_query("s", [key[2].alias("g"), E.count().alias("n"), E.sum_(arg[2]).alias("total"),
                           E.min_(arg[2], filter=where[2]).alias("lo")],
                     where=where[2] | (col("bytes") > 2500), group_by=[lit(1)], having=E.count() > 1,
                     order_by=[n.desc() if desc else n])
    _same_query_three_ways(text, duck, q, seed, False)


# -- hand-written: the dashboard's queries, built with the SDK ------------------------------------------
bytes_, src, port = col("bytes"), col("src"), col("port")
DASHBOARD = [
    ("SELECT src, SUM(bytes) * 8 / 60 AS bps FROM s GROUP BY src ORDER BY src",
     E.expr_query("s", [src, (E.sum_(bytes_) * 8 / 60).alias("bps")], group_by=[src], order_by=[src])),
    ("SELECT SUM(bytes) / COUNT(*) AS mean FROM s", E.expr_query("s", [(E.sum_(bytes_) / E.count()).alias("mean")])),
    ("SELECT COUNT(*) FROM s WHERE bytes * 8 > 1e4", E.expr_query("s", [E.count()], where=bytes_ * 8 > 1e4)),
    ("SELECT src, port, SUM(bytes) FROM s GROUP BY src, port HAVING COUNT(*) > 1 ORDER BY 3 DESC, src, port",
     E.expr_query("s", [src, port, E.sum_(bytes_)], group_by=[src, port], having=E.count() > 1,
                  order_by=[lit(3).desc(), src, port])),
    ("SELECT COUNT(DISTINCT src, port), QUANTILE(bytes, 0.9) AS q, MEDIAN(f) FROM s",
     E.expr_query("s", [E.count(src, port, distinct=True), E.quantile(bytes_, 0.9).alias("q"),
                        E.agg("median", col("f"))])),
    ("SELECT DISTINCT port % 2 AS parity FROM s ORDER BY parity LIMIT 1",
     E.expr_query("s", [(port % 2).alias("parity")], order_by=[col("parity")], limit=1, distinct=True)),
    ("SELECT time_bucket(INTERVAL '20 s', ts) AS b, COUNT(*) FROM s [RANGE 30 s] WHERE ts > NOW() - INTERVAL '1 min' "
     "GROUP BY 1 ORDER BY b",
     E.expr_query("s", [E.func("time_bucket", E.interval(seconds=20), col("ts")).alias("b"), E.count()],
                  where=col("ts") > E.now() - E.interval(minutes=1), group_by=[lit(1)], order_by=[col("b")],
                  range=30_000)),
    ("SELECT n FROM (SELECT src, COUNT(*) AS n FROM s GROUP BY src) WHERE n > 2 ORDER BY n DESC",
     E.expr_query(E.expr_query("s", [src, E.count().alias("n")], group_by=[src]), [col("n")],
                  where=col("n") > 2, order_by=[col("n").desc()])),
    ("SELECT src, SUM(bytes) FROM s AS OF SLIDE 4 GROUP BY src ORDER BY src",
     E.expr_query("s", [src, E.sum_(bytes_)], group_by=[src], order_by=[src], as_of_slide=4)),
]


@pytest.mark.parametrize("text, structured", DASHBOARD, ids=[t for t, _ in DASHBOARD])
def test_the_dashboard_queries_built_with_the_sdk_are_the_texts_queries(text, structured):
    s, _ = _stream(3)
    from_pb = convert.query_from_pb(pb.StructuredQuery.FromString(structured.SerializeToString()))
    parsed = parse_statement(text)
    if parsed.expr is not None:
        assert from_pb == parsed, to_text(from_pb)
    assert parse_statement(to_text(from_pb)) == parsed
    got, want = run_plan(plan_query(from_pb, s)), run_plan(plan_query(parsed, s))
    assert _rows_equal(got.rows, want.rows) and got.columns == want.columns, (got.rows, want.rows)
    assert got.access == want.access  # the same plan: a synopsis answers the structured form too


def test_the_structured_form_takes_the_synopsis_path_when_the_text_does():
    s, _ = _stream(2)
    q = E.expr_query("s", [E.func("upper", src), E.sum_(bytes_) / E.count()], group_by=[src])
    assert run_plan(plan_query(convert.query_from_pb(q), s)).access in ("probe", "synopsis")
    q = E.expr_query("s", [E.count()], where=bytes_ * 8 > 100)
    assert run_plan(plan_query(convert.query_from_pb(q), s)).access == "window"


# -- errors name the field path ------------------------------------------------------------------------
def _bad(q: pb.StructuredQuery) -> QueryError:
    s, _ = _stream(0, slides=1)
    with pytest.raises(QueryError) as err:
        plan_query(convert.query_from_pb(pb.StructuredQuery.FromString(q.SerializeToString())), s)
    return err.value


@pytest.mark.parametrize("structured, field, reason", [
    (E.expr_query("s", [E.func("foo", bytes_)]), "select_exprs[0].expr.call.name", "unknown function 'foo'"),
    (E.expr_query("s", [bytes_], where=src + 1 > 2), "where_expr.op.args[0].op.args[0].column",
     "arithmetic (+) needs numbers"),
    (E.expr_query("s", [E.func("lower", port)]), "select_exprs[0].expr.call.args[0].column", "lower() needs a string"),
    (E.expr_query("s", [E.count()], where=E.sum_(bytes_) > 1), "where_expr.op.args[0].aggregate",
     "an aggregate is not allowed in WHERE"),
    (E.expr_query("s", [src, bytes_ + 1, E.count()], group_by=[src]), "select_exprs[1].expr.op.args[0].column",
     "column 'bytes' must be aggregated"),
    (E.expr_query("s", [E.sum_(E.count())]), "select_exprs[0].expr.aggregate.args[0].aggregate",
     "an aggregate inside an aggregate"),
    (E.expr_query("s", [col("nope") * 2]), "select_exprs[0].expr.op.args[0].column", "unknown column 'nope'"),
    (E.expr_query("s", [bytes_], where=bytes_), "where_expr.column", "WHERE needs a condition"),
    (E.expr_query("s", [E.op("between", bytes_, 1)]), "select_exprs[0].expr.op.args", "'between' takes 3 operands"),
    (E.expr_query("s", [E.op("^", bytes_, 1)]), "select_exprs[0].expr.op.op", "unknown operator '^'"),
    (E.expr_query("s", [E.cast(bytes_, "DATE")]), "select_exprs[0].expr.cast.type", "CAST to 'DATE' is not supported"),
    (E.expr_query("s", [E.agg("approx_quantile", bytes_, q=0.5)]), "select_exprs[0].expr.aggregate.function",
     "APPROX_QUANTILE cannot be combined with expressions yet"),
    (E.expr_query("s", [E.quantile(bytes_, 1.5)]), "select_exprs[0].expr.aggregate.q",
     "a quantile fraction is between 0 and 1"),
    (E.expr_query("s", [E.quantile(bytes_, float("nan"))]), "select_exprs[0].expr.aggregate.q",
     "a quantile fraction is between 0 and 1"),
    (E.expr_query("s", [E.agg("sum", bytes_, distinct=True)]), "select_exprs[0].expr.aggregate.distinct",
     "SUM(DISTINCT ...) is not supported"),
    (E.expr_query("s", [X(pb.Expr())]), "select_exprs[0].expr", "an expression needs column"),
    (E.expr_query("s", [lit(2**63)]), "select_exprs[0].expr.literal", "an integer constant is out of the range"),
    (E.expr_query("s", [E.func("time_bucket", lit("1 min"), col("ts"))]),
     "select_exprs[0].expr.call.args[0].literal", "time_bucket() needs a positive INTERVAL"),
])
def test_errors_name_the_field_path(structured, field, reason):
    e = _bad(structured)
    assert e.reason.startswith(reason), str(e)
    assert e.field == field, str(e)
    assert f"(field {field})" in str(e)


def test_plain_fields_and_expression_fields_do_not_mix():
    q = E.expr_query("s", [E.count()])
    q.items.add(key_column="src")
    with pytest.raises(QueryError, match=r"items cannot be combined with select_exprs .*\(field items\)"):
        convert.query_from_pb(q)
    q = pb.StructuredQuery(stream="s", where_expr=(bytes_ > 1).pb)
    with pytest.raises(QueryError, match=r"needs select_exprs \(field select_exprs\)"):
        convert.query_from_pb(q)
    q = E.expr_query("s", [E.count()])
    q.sources.add(stream="t")
    with pytest.raises(QueryError, match=r"a join with expressions is not supported \(field sources\)"):
        convert.query_from_pb(q)
    inner = E.expr_query("s", [E.count().alias("n")])
    q = E.expr_query(inner, [col("n")])
    q.stream = "s"
    with pytest.raises(QueryError, match=r"names its stream in from_query \(field stream\)"):
        convert.query_from_pb(q)
    deep = E.expr_query(E.expr_query(inner, [col("n")]), [col("n")])
    with pytest.raises(QueryError, match=r"only one level of sub-query .*\(field from_query.from_query\)"):
        convert.query_from_pb(deep)
    x = bytes_
    for _ in range(40):
        x = x + 1
    with pytest.raises(QueryError, match=r"nest more than 32 deep \(field select_exprs\[0\].expr(.op.args\[0\]){33}\)"):
        convert.query_from_pb(E.expr_query("s", [x]))


# -- the APPROXIMATE threshold query in the structured form --------------------------------------------
@pytest.mark.parametrize("text, structured", [
    ("SELECT src, COUNT(*) FROM s GROUP BY src HAVING COUNT(*) > 0.05 * TOTAL APPROXIMATE",
     E.threshold_query("s", "src", fraction=0.05)),
    ("SELECT src, SUM(bytes) FROM s GROUP BY src HAVING SUM(bytes) > 1000 APPROXIMATE",
     E.threshold_query("s", "src", weight="bytes", above=1000)),
    ("SELECT src, SUM(bytes) FROM s [RANGE 20 s] WHERE src IN ('a', 'B') GROUP BY src "
     "HAVING SUM(bytes) > 0.1 * TOTAL APPROXIMATE",
     E.threshold_query("s", "src", weight="bytes", fraction=0.1, range=20_000,
                       where=[pb.Predicate(column="src", op="in", values=[pb.Value(string_value="a"),
                                                                          pb.Value(string_value="B")])])),
])
def test_the_threshold_query_has_a_structured_form(text, structured):
    s, _ = _stream(5)
    parsed = parse_statement(text)
    from_pb = convert.query_from_pb(pb.StructuredQuery.FromString(structured.SerializeToString()))
    assert from_pb == parsed
    assert parse_statement(to_text(from_pb)) == parsed
    assert convert.query_from_pb(convert.query_to_pb(parsed)) == parsed
    got, want = run_plan(plan_query(from_pb, s)), run_plan(plan_query(parsed, s))
    assert got.rows == want.rows and got.bounds == want.bounds


def test_of_total_takes_one_comparison_value():
    q = E.threshold_query("s", "src", fraction=0.05)
    q.having.test.values.add(float64_value=0.1)
    with pytest.raises(QueryError, match=r"of_total takes a comparison with one value .*having.test.of_total"):
        convert.query_from_pb(q)


# -- through a real server and the SDK -----------------------------------------------------------------
def test_structured_expressions_through_the_server_and_the_sdk():
    from windowstore.clients import Client, InvalidArgument
    from windowstore.server.process import ServerProcess
    _, rows = _stream(4)
    con = _duck(rows)
    with ServerProcess() as srv, Client(srv.target, timeout=30) as ws:
        ws.create_stream("s", schema=SCHEMA, subwindows=3, subwindow_ms=10_000, clock="manual",
                         group_by=["src", "port"])
        for batch in _stream_batches(4):
            if batch:
                ws.append("s", {c: [r[c] for r in batch] for c in SCHEMA})
            ws.slide("s")
        text = ("SELECT CASE WHEN port < 1024 THEN 'system' ELSE 'user' END AS kind, COUNT(*) AS n, "
                "SUM(bytes) * 8 AS bits FROM s GROUP BY 1 ORDER BY 1")
        q = E.expr_query("s", [E.case((port < 1024, "system"), else_="user").alias("kind"), E.count().alias("n"),
                               (E.sum_(bytes_) * 8).alias("bits")], group_by=[lit(1)], order_by=[lit(1)])
        answer, by_text = ws.query(q), ws.query(text)
        exp = [tuple(r) for r in con.execute(text).fetchall()]
        assert [tuple(r) for r in answer.rows] == [tuple(r) for r in by_text.rows]
        assert _rows_equal([tuple(r) for r in answer.rows], exp), (answer.rows, exp)
        assert ws.explain(E.expr_query("s", [src, E.sum_(bytes_) / E.count()], group_by=[src]))["access"] in (
            "probe", "synopsis")
        pinned = ws.query(E.expr_query("s", [E.sum_(bytes_) / E.count()]), as_of_slide=4)
        assert pinned.rows[0][0] is not None
        with pytest.raises(InvalidArgument, match=r"unknown column 'nope' .*\(field select_exprs\[0\].expr.column\)"):
            ws.query(E.expr_query("s", [col("nope")]))
        with pytest.raises(InvalidArgument, match=r"\(field select_exprs\[0\].expr.op.op\)"):
            ws.query(E.expr_query("s", [E.op("**", bytes_, 2)]))


# -- arbitrary Expr messages: an answer or a refusal naming the input, never another error ------------
_values = st.one_of(
    st.just(pb.Value()), st.integers(-(2**63), 2**63 - 1).map(lambda v: pb.Value(int64_value=v)),
    st.floats(allow_nan=True).map(lambda v: pb.Value(float64_value=v)),
    st.text(max_size=4).map(lambda v: pb.Value(string_value=v)), st.booleans().map(lambda v: pb.Value(bool_value=v)),
    st.sampled_from(["1.5", "-0", "1e3", "x", "", "99999999999999999999"]).map(lambda v: pb.Value(decimal_value=v)),
    st.tuples(st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**64 - 1)).map(
        lambda hl: pb.Value(int128_value=pb.Int128(high=hl[0], low=hl[1]))))
_names = st.sampled_from(["bytes", "port", "src", "f", "ok", "ts", "nope", "", "BYTES"])


def _exprs(depth: int = 3):
    leaf = st.one_of(_names.map(lambda n: pb.Expr(column=n)), _values.map(lambda v: pb.Expr(literal=v)),
                     st.integers(-(2**63), 2**63 - 1).map(lambda v: pb.Expr(interval_ms=v)), st.just(pb.Expr()))
    if depth <= 0:
        return leaf
    sub = st.deferred(lambda: _exprs(depth - 1))
    args = st.lists(sub, max_size=4)
    return st.one_of(
        leaf,
        st.builds(lambda o, a: pb.Expr(op=pb.ExprOp(op=o, args=a)),
                  st.sampled_from(["+", "-", "*", "/", "%", "=", "<>", "<", "and", "or", "not", "is null", "like",
                                   "not between", "in", "is distinct from", "^", ""]), args),
        st.builds(lambda n, a: pb.Expr(call=pb.ExprCall(name=n, args=a)),
                  st.sampled_from(["lower", "substr", "round", "coalesce", "time_bucket", "date_trunc", "now", "sum",
                                   "approx_quantile", "zzz", ""]), args),
        st.builds(lambda o, w, d: pb.Expr(case=pb.ExprCase(operand=o, whens=w, default=d)), st.one_of(st.none(), sub),
                  st.lists(st.builds(lambda a, b: pb.ExprWhen(when=a, then=b), sub, sub), max_size=2),
                  st.one_of(st.none(), sub)),
        st.builds(lambda a, t: pb.Expr(cast=pb.ExprCast(arg=a, type=t)), sub,
                  st.sampled_from(["BIGINT", "double", "VARCHAR", "boolean", "date", ""])),
        st.builds(lambda f, a, dist, filt, q: pb.Expr(aggregate=pb.ExprAggregate(function=f, args=a, distinct=dist,
                                                                                 filter=filt, q=q)),
                  st.sampled_from(["count", "sum", "avg", "min", "max", "quantile", "median", "stddev", ""]),
                  st.lists(sub, max_size=2), st.booleans(), st.one_of(st.none(), sub),
                  st.floats(allow_nan=True)),
    )


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_exprs(), min_size=1, max_size=3), st.one_of(st.none(), _exprs()), st.lists(_exprs(2), max_size=2),
       st.one_of(st.none(), _exprs()), st.lists(st.tuples(_exprs(2), st.booleans()), max_size=2), st.booleans())
def test_arbitrary_expr_messages_are_answered_or_refused_by_name(select, where, group_by, having, order, distinct):
    q = pb.StructuredQuery(stream="s", select_exprs=[pb.ExprItem(expr=e) for e in select], distinct=distinct,
                           group_by_exprs=group_by, order_by_exprs=[pb.ExprOrder(expr=e, descending=d) for e, d in order])
    if where is not None:
        q.where_expr.CopyFrom(where)
    if having is not None:
        q.having_expr.CopyFrom(having)
    s, _ = _fixture(0)
    try:
        query = convert.query_from_pb(pb.StructuredQuery.FromString(q.SerializeToString()))
        run_plan(plan_query(query, s))
    except InvalidInput as err:  # a refusal (the server's INVALID_ARGUMENT)
        assert str(err)
