"""Queries with expressions (issue 32) against DuckDB as the oracle: the rows the window holds are
loaded into DuckDB, the same query runs there, and the answers must be equal (floats within a
relative 1e-9). Hand-written dashboard queries first, then Hypothesis-generated expression trees
over random columns; then the paths (synopsis vs rows) and the errors."""
from __future__ import annotations

import math
from random import Random

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from windowstore.store import InvalidInput, QuerySyntaxError, Stream, WindowSpec, parse_query, plan_query, run_plan
from windowstore.store.parser import parse_statement, to_text

from conftest import examples, wait_for

SCHEMA = {"ts": "int64", "rid": "int64", "src": "string", "port": "int64", "bytes": "int64", "f": "float64",
          "ok": "boolean"}
SUB_MS = 10_000  # 10 s sub-windows


def _stream(seed: int, slides: int = 5, subwindows: int = 3, per: int = 40) -> tuple[Stream, list[dict]]:
    """A stream after `slides` manual slides of random rows (NULLs in src, port, f, ok), and the rows
    its window holds: the oracle's input."""
    rng = Random(seed)
    s = Stream("s", SCHEMA, WindowSpec(subwindows=subwindows, subwindow_ms=SUB_MS, clock="manual",
                                       group_by=("src", "port")), 0)
    batches, rid = [], 0
    for slide in range(slides):
        batch = []
        for _ in range(rng.randrange(0, per)):
            def maybe(v):
                return None if rng.random() < 0.1 else v
            batch.append({"ts": slide * SUB_MS + rng.randrange(SUB_MS), "rid": rid,
                          "src": maybe(rng.choice(["a", "B", "Cd", "", "ab%", "éx"])),
                          "port": maybe(rng.choice([22, 80, 443, 8080, 0, -3])),
                          "bytes": rng.randrange(-50, 5000), "f": maybe(round(rng.uniform(-100, 100), 2)),
                          "ok": maybe(rng.random() < 0.5)})
            rid += 1
        if batch:
            s.append({c: [r[c] for r in batch] for c in SCHEMA})
        s.window.slide((slide + 1) * SUB_MS)
        batches.append(batch)
    return s, [r for b in batches[-subwindows:] for r in b]


def _duck(rows: list[dict]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("CREATE TABLE s (ts BIGINT, rid BIGINT, src VARCHAR, port BIGINT, bytes BIGINT, f DOUBLE, ok BOOLEAN)")
    if rows:
        con.executemany("INSERT INTO s VALUES (?, ?, ?, ?, ?, ?, ?)", [tuple(r[c] for c in SCHEMA) for r in rows])
    return con


def _same(got, exp) -> bool:
    if exp is None or got is None:
        return got is None and exp is None
    if isinstance(exp, float) or isinstance(got, float):
        if isinstance(got, bool) or isinstance(exp, bool):
            return False
        g, e = float(got), float(exp)
        if math.isnan(e) or math.isnan(g):
            return math.isnan(e) and math.isnan(g)
        return g == e or math.isclose(g, e, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(exp, bool) or isinstance(got, bool):
        return type(got) is type(exp) and got == exp
    return got == exp


def _rows_equal(got: list[tuple], exp: list[tuple]) -> bool:
    return len(got) == len(exp) and all(len(g) == len(e) and all(_same(a, b) for a, b in zip(g, e))
                                        for g, e in zip(got, exp))


def _sorted(rows: list[tuple]) -> list[tuple]:
    return sorted(rows, key=lambda r: tuple((v is None, str(type(v)), v if v is not None else 0) for v in r))


def _run(s: Stream, text: str, access=None):
    return run_plan(plan_query(parse_query(text), s, access))


def _check(s, con, text: str, duck_text: str | None = None, ordered: bool = True) -> None:
    exp = [tuple(r) for r in con.execute(duck_text or text).fetchall()]
    for access in (None, "window"):
        got = _run(s, text, access).rows
        if not ordered:
            got, exp = _sorted(got), _sorted(exp)
        assert _rows_equal(got, exp), f"{text} [{access}]\n got {got[:8]}\nwant {exp[:8]}"
    q = parse_statement(text)
    assert parse_statement(to_text(q)) == q, to_text(q)


# -- the dashboard's queries ---------------------------------------------------------------------------
DASHBOARD = [
    ("SELECT src, SUM(bytes) * 8 / 60 AS bps FROM s GROUP BY src ORDER BY src", None),
    ("SELECT SUM(bytes) / COUNT(*) AS mean FROM s", None),
    ("SELECT COUNT(*) FROM s WHERE bytes * 8 > 1e4", "SELECT COUNT(*) FROM s WHERE bytes * 8 > 1e4::DOUBLE"),
    ("SELECT CASE WHEN port < 1024 THEN 'system' ELSE 'user' END AS kind, COUNT(*) AS n, SUM(bytes) FROM s "
     "GROUP BY 1 ORDER BY kind", None),
    ("SELECT src, port, SUM(bytes) FROM s GROUP BY src, port HAVING COUNT(*) > 1 ORDER BY 3 DESC, src, port", None),
    ("SELECT upper(src) AS u, COUNT(*) FROM s GROUP BY src ORDER BY src", None),
    ("SELECT concat(lower(src), '') AS l, COUNT(*) AS n FROM s GROUP BY lower(src) ORDER BY l, n", None),
    ("SELECT src, SUM(bytes * 8) AS bits, SUM(bytes) FILTER (WHERE port = 443) AS tls, AVG(f), MIN(f), MAX(bytes) "
     "FROM s GROUP BY src ORDER BY src", None),
    ("SELECT COUNT(DISTINCT src), COUNT(DISTINCT port), COUNT(f), COUNT(*) FROM s", None),
    ("SELECT COALESCE(src, '?') AS s2, NULLIF(port, 0) AS p, COUNT(*) FROM s GROUP BY 1, 2 ORDER BY 1, 2", None),
    ("SELECT src, SUM(bytes) / COUNT(*) AS mean FROM s WHERE port IS NOT DISTINCT FROM 80 OR src LIKE 'a%' "
     "GROUP BY src HAVING SUM(bytes) > 0 ORDER BY mean DESC, src", None),
    ("SELECT rid, bytes % 7, -bytes, abs(port - 100), round(f), round(f, 1), floor(f), ceil(f), "
     "length(src), substr(src, 2), substr(src, 1, 1), concat(src, '-', port) FROM s ORDER BY rid", None),
    ("SELECT rid, CAST(f AS BIGINT), CAST(port AS VARCHAR), CAST(bytes AS DOUBLE) / 3, port BETWEEN 20 AND 100, "
     "port NOT IN (22, 80), ok AND port > 0, NOT ok, src IS NULL FROM s ORDER BY rid", None),
    ("SELECT DISTINCT port % 2 AS parity FROM s ORDER BY parity", None),
    ("SELECT src, MEDIAN(bytes) AS m, QUANTILE(bytes, 0.9) AS q FROM s GROUP BY src ORDER BY src",
     "SELECT src, quantile_disc(bytes, 0.5) AS m, quantile_disc(bytes, 0.9) AS q FROM s GROUP BY src ORDER BY src"),
]


@pytest.mark.parametrize("text, duck_text", DASHBOARD)
@pytest.mark.parametrize("seed", range(3))
def test_dashboard_queries_match_duckdb(text, duck_text, seed):
    s, rows = _stream(seed)
    _check(s, _duck(rows), text, duck_text)


def test_count_distinct_of_several_columns_counts_tuples_without_nulls():
    s, rows = _stream(7)
    duck = ("SELECT src, COUNT(DISTINCT CASE WHEN port IS NOT NULL AND ok IS NOT NULL THEN row(port, ok) END) "
            "FROM s GROUP BY src ORDER BY src")
    _check(s, _duck(rows), "SELECT src, COUNT(DISTINCT port, ok) FROM s GROUP BY src ORDER BY src", duck)
    exp = len({(r["port"], r["ok"]) for r in rows if r["port"] is not None and r["ok"] is not None})
    assert _run(s, "SELECT COUNT(DISTINCT port, ok) FROM s").rows == [(exp,)]


def test_time_bucket_and_date_trunc_group_a_one_time_query():
    s, rows = _stream(3, slides=6, subwindows=4, per=60)
    con = _duck(rows)
    _check(s, con, "SELECT time_bucket(INTERVAL '5 s', ts) AS b, COUNT(*), SUM(bytes) FROM s GROUP BY b ORDER BY b",
           "SELECT ts - ts % 5000 AS b, COUNT(*), SUM(bytes) FROM s GROUP BY b ORDER BY b")
    _check(s, con, "SELECT date_trunc('second', ts) AS b, MAX(bytes) FROM s GROUP BY 1 ORDER BY 1 DESC LIMIT 4",
           "SELECT ts - ts % 1000 AS b, MAX(bytes) FROM s GROUP BY 1 ORDER BY 1 DESC LIMIT 4")
    # a negative event time floors down, as DuckDB's time_bucket does
    neg = Stream("n", {"ts": "int64", "x": "int64"}, WindowSpec(subwindows=2, subwindow_ms=1000, clock="manual"), -2000)
    neg.append({"ts": [-1500, -1, 0, 999], "x": [1, 2, 3, 4]})
    neg.window.slide(1000)
    got = _run(neg, "SELECT time_bucket(INTERVAL '1 s', ts) AS b, SUM(x) FROM n GROUP BY b ORDER BY b").rows
    assert got == [(-2000, 1), (-1000, 2), (0, 7)]


def test_now_is_the_read_time_of_the_window_not_a_clock():
    """NOW() is the end of the youngest sub-window read: the same window answers the same, and the
    answer moves only when the window slides."""
    s, rows = _stream(5, slides=5)
    now = 5 * SUB_MS  # the end of the fifth sub-window
    con = _duck(rows)
    _check(s, con, "SELECT COUNT(*), SUM(bytes) FROM s WHERE ts >= NOW() - INTERVAL '10 s'",
           f"SELECT COUNT(*), SUM(bytes) FROM s WHERE ts >= {now} - 10000")
    _check(s, con, "SELECT src, COUNT(*) FROM s WHERE ts > NOW() - INTERVAL '15 s' GROUP BY src ORDER BY src",
           f"SELECT src, COUNT(*) FROM s WHERE ts > {now} - 15000 GROUP BY src ORDER BY src")
    _check(s, con, "SELECT NOW() - MAX(ts) AS lag FROM s", f"SELECT {now} - MAX(ts) AS lag FROM s")
    s.window.slide(6 * SUB_MS)  # an empty sub-window: NOW() moves on, the last 10 s hold nothing
    assert _run(s, "SELECT COUNT(*) FROM s WHERE ts >= NOW() - INTERVAL '10 s'").rows == [(0,)]


def test_an_outer_where_over_a_sub_query():
    s, rows = _stream(11)
    con = _duck(rows)
    _check(s, con, "SELECT COUNT(*), MAX(total) FROM (SELECT src, SUM(bytes) AS total FROM s GROUP BY src) "
                   "WHERE total > 1000")
    _check(s, con, "SELECT src, total * 2 FROM (SELECT src, SUM(bytes) AS total, COUNT(*) AS n FROM s GROUP BY src) t "
                   "WHERE n > 2 AND src IS NOT NULL ORDER BY total DESC LIMIT 2")
    _check(s, con, "SELECT port % 2 AS p, SUM(n) FROM (SELECT port, COUNT(*) AS n FROM s WHERE bytes > 100 "
                   "GROUP BY port) GROUP BY 1 ORDER BY 1")


def test_null_is_distinct_from_null_over_no_rows():
    """NULL IS [NOT] DISTINCT FROM NULL where no row passes the filter: an empty answer, as DuckDB's
    (its constant column was an untyped empty array, which Arrow cannot negate)."""
    s, rows = _stream(12)
    con = _duck(rows)
    _check(s, con, "SELECT NULL IS DISTINCT FROM NULL FROM s WHERE NULL")
    _check(s, con, "SELECT NULL IS NOT DISTINCT FROM NULL, rid FROM s WHERE bytes < 0 ORDER BY rid")
    _check(s, con, "SELECT NULL IS DISTINCT FROM NULL, rid FROM s ORDER BY rid")


def test_integer_arithmetic_is_exact_or_an_error_never_wrapped():
    s = Stream("w", {"ts": "int64", "x": "int64"}, WindowSpec(subwindows=1, subwindow_ms=1000, clock="manual"), 0)
    s.append({"ts": [0, 1], "x": [2**62, 2**62]})
    s.window.slide(1000)
    for text in ("SELECT x * 2 FROM w", "SELECT x + x FROM w", "SELECT -x - x - x FROM w", "SELECT x % 0 FROM w"):
        with pytest.raises(InvalidInput) as err:
            _run(s, text)
        assert "position" in str(err.value), str(err.value)
    # a SUM beyond BIGINT is exact when selected, and refused (never wrapped) when computed with
    assert _run(s, "SELECT SUM(x), COUNT(*) + 1 FROM w").rows == [(2**63, 3)]
    with pytest.raises(InvalidInput, match="beyond BIGINT"):
        _run(s, "SELECT SUM(x) + 1 FROM w", "window")


# -- random expression trees against DuckDB ------------------------------------------------------------
def _lit(t: str, v) -> tuple[str, str]:
    if t == "int":
        return (str(v), f"CAST({v} AS BIGINT)") if v >= 0 else (f"({v})", f"CAST({v} AS BIGINT)")
    if t == "float":  # written as a DOUBLE constant (`1.5` is a DECIMAL, as in DuckDB: test_expr_decimal.py)
        text = repr(v) if "e" in repr(v) else f"{v!r}e0"
        return (text, f"CAST({v!r} AS DOUBLE)") if v >= 0 else (f"({text})", f"CAST({v!r} AS DOUBLE)")
    if t == "str":
        q = "'" + v.replace("'", "''") + "'"
        return q, q
    return ("TRUE" if v else "FALSE",) * 2


def _both(fmt: str, *parts: tuple[str, str]) -> tuple[str, str]:
    return fmt.format(*[p[0] for p in parts]), fmt.format(*[p[1] for p in parts])


@st.composite
def exprs(draw, t: str, depth: int = 3):
    """(windowstore text, DuckDB text) of a random expression of type t: int, float, str or bool."""
    leaf = depth <= 0 or draw(st.integers(0, 3)) == 0
    if t == "int":
        if leaf:
            return draw(st.one_of(st.sampled_from([("bytes", "bytes"), ("port", "port"), ("rid", "rid")]),
                                  st.integers(-20, 20).map(lambda v: _lit("int", v))))
        a, b = draw(exprs("int", depth - 1)), draw(exprs("int", depth - 1))
        k = draw(st.integers(0, 9))
        if k <= 2:
            return _both("({} " + "+-*"[k] + " {})", a, b)
        if k == 3:
            return _both("({} % {})", a, draw(st.integers(1, 9).map(lambda v: _lit("int", v))))
        if k == 4:
            return _both("abs({})", a)
        if k == 5:
            return _both("length({})", draw(exprs("str", depth - 1)))
        if k == 6:
            return _both("CASE WHEN {} THEN {} ELSE {} END", draw(exprs("bool", depth - 1)), a, b)
        if k == 7:
            return _both("COALESCE({}, {})", a, b)
        if k == 8:
            return _both("NULLIF({}, {})", a, b)
        return _both("round({}, {})", a, draw(st.integers(-2, 1).map(lambda v: (f"({v})",) * 2)))
    if t == "float":
        if leaf:
            return draw(st.one_of(st.just(("f", "f")), st.floats(-50, 50, allow_nan=False).map(
                lambda v: _lit("float", round(v, 2)))))
        k = draw(st.integers(0, 7))
        a = draw(exprs("float", depth - 1))
        if k <= 1:
            return _both("({} " + "+-"[k] + " {})", a, draw(exprs(draw(st.sampled_from(["int", "float"])), depth - 1)))
        if k == 2:
            return _both("({} / {})", draw(exprs("int", depth - 1)), draw(exprs("int", depth - 1)))
        if k == 3:
            return _both("({} * {})", a, draw(exprs("float", depth - 1)))
        if k == 4:
            return _both(draw(st.sampled_from(["floor({})", "ceil({})", "round({})", "abs({})"])), a)
        if k == 5:
            return _both("round({}, {})", a, draw(st.integers(-1, 2).map(lambda v: (f"({v})",) * 2)))
        if k == 6:
            return _both("CAST({} AS DOUBLE)", draw(exprs("int", depth - 1)))
        return _both("CASE WHEN {} THEN {} END", draw(exprs("bool", depth - 1)), a)
    if t == "str":
        if leaf:
            return draw(st.one_of(st.just(("src", "src")), st.sampled_from(["a", "xY", "", "%"]).map(
                lambda v: _lit("str", v))))
        a = draw(exprs("str", depth - 1))
        k = draw(st.integers(0, 5))
        if k == 0:
            return _both(draw(st.sampled_from(["lower({})", "upper({})"])), a)
        if k == 1:
            i = draw(st.integers(-3, 4).map(lambda v: _lit("int", v)))
            if draw(st.booleans()):
                return _both("substr({}, {})", a, i)
            return _both("substr({}, {}, {})", a, i, draw(st.integers(-2, 3).map(lambda v: _lit("int", v))))
        if k == 2:
            return _both("concat({}, {})", a, draw(exprs(draw(st.sampled_from(["str", "int"])), depth - 1)))
        if k == 3:
            return _both("CAST({} AS VARCHAR)", draw(exprs("int", depth - 1)))
        if k == 4:
            return _both("COALESCE({}, {})", a, draw(exprs("str", depth - 1)))
        return _both("CASE {} WHEN 'a' THEN {} ELSE {} END", a, draw(exprs("str", depth - 1)), a)
    # bool
    if leaf:
        return draw(st.one_of(st.just(("ok", "ok")), st.booleans().map(lambda v: _lit("bool", v))))
    k = draw(st.integers(0, 9))
    if k <= 1:
        typ = draw(st.sampled_from(["int", "float", "str"]))
        op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
        return _both("({} " + op + " {})", draw(exprs(typ, depth - 1)), draw(exprs(typ, depth - 1)))
    if k == 2:
        return _both("({} " + draw(st.sampled_from(["AND", "OR"])) + " {})", draw(exprs("bool", depth - 1)),
                     draw(exprs("bool", depth - 1)))
    if k == 3:
        return _both("(NOT {})", draw(exprs("bool", depth - 1)))
    if k == 4:
        return _both("({} IS " + draw(st.sampled_from(["", "NOT "])) + "NULL)", draw(exprs("int", depth - 1)))
    if k == 5:
        return _both("({} IS " + draw(st.sampled_from(["", "NOT "])) + "DISTINCT FROM {})",
                     draw(exprs("int", depth - 1)), draw(exprs("int", depth - 1)))
    if k == 6:
        return _both("({} " + draw(st.sampled_from(["", "NOT "])) + "BETWEEN {} AND {})",
                     *[draw(exprs("int", depth - 1)) for _ in range(3)])
    if k == 7:
        pat = draw(st.sampled_from(["a%", "%b", "_", "%", "a_", "%x%", ""]))
        return _both("({} " + draw(st.sampled_from(["", "NOT "])) + "LIKE {})", draw(exprs("str", depth - 1)),
                     _lit("str", pat))
    if k == 8:
        return _both("({} " + draw(st.sampled_from(["", "NOT "])) + "IN ({}, {}))",
                     *[draw(exprs("int", depth - 1)) for _ in range(3)])
    return _both("({} = {})", draw(exprs("bool", depth - 1)), draw(exprs("bool", depth - 1)))


_STREAMS: dict[int, tuple] = {}


def _fixture(seed: int):
    if seed not in _STREAMS:
        s, rows = _stream(seed, per=25)
        _STREAMS[seed] = (s, _duck(rows))
    return _STREAMS[seed]


def _compare(text: str, duck_text: str, seed: int, ordered: bool) -> None:
    s, con = _fixture(seed)
    try:
        exp = [tuple(r) for r in con.execute(duck_text).fetchall()]
    except duckdb.Error:
        exp = None  # DuckDB refuses (an overflow, a % 0): windowstore must refuse too, by position
    for access in (None, "window"):
        try:
            got = _run(s, text, access).rows
        except InvalidInput as err:
            assert exp is None, f"{text}: refused ({err}) but DuckDB answers {exp[:5]}"
            assert "position" in str(err), str(err)
            continue
        assert exp is not None, f"{text}: answered {got[:5]} but DuckDB refuses"
        g, e = (got, exp) if ordered else (_sorted(got), _sorted(exp))
        assert _rows_equal(g, e), f"{text} [{access}]\n got {g[:6]}\nwant {e[:6]}\n{duck_text}"


SETTINGS = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.sampled_from(["int", "float", "str", "bool"]).flatmap(lambda t: exprs(t)), st.integers(0, 2))
def test_random_expressions_over_rows_match_duckdb(e, seed):
    text, duck = e
    _compare(f"SELECT rid, {text} AS v FROM s ORDER BY rid", f"SELECT rid, {duck} AS v FROM s ORDER BY rid", seed, True)


@SETTINGS
@given(exprs("bool"), st.sampled_from(["int", "str", "bool"]).flatmap(lambda t: exprs(t, 2)), exprs("int", 2),
       st.integers(0, 2))
def test_random_grouped_expressions_match_duckdb(where, key, arg, seed):
    text = (f"SELECT {key[0]} AS g, COUNT(*) AS n, SUM({arg[0]}) AS total, MIN({arg[0]}) FILTER (WHERE {where[0]}) AS lo "
            f"FROM s WHERE {where[0]} OR bytes > 2500 GROUP BY 1 HAVING COUNT(*) > 1")
    duck = (f"SELECT {key[1]} AS g, COUNT(*) AS n, SUM({arg[1]}) AS total, MIN({arg[1]}) FILTER (WHERE {where[1]}) AS lo "
            f"FROM s WHERE {where[1]} OR bytes > 2500 GROUP BY 1 HAVING COUNT(*) > 1")
    _compare(text, duck, seed, False)


# -- which path answers --------------------------------------------------------------------------------
@pytest.mark.parametrize("text, path", [
    ("SELECT src, SUM(bytes) * 8 / 60 AS bps FROM s GROUP BY src", "probe"),
    ("SELECT upper(src), COUNT(*), SUM(bytes) - COUNT(*) FROM s GROUP BY src", "probe"),
    ("SELECT upper(src), SUM(bytes) / COUNT(*) FROM s AS OF SLIDE 4 GROUP BY src ORDER BY 2 DESC", "synopsis"),
    ("SELECT port * 2, COUNT(*) FROM s [RANGE 20 s] GROUP BY port HAVING COUNT(*) > 1", "synopsis"),
    ("SELECT SUM(bytes) / COUNT(*) FROM s", "probe"),
    ("SELECT src, COUNT(*) FROM s GROUP BY src HAVING SUM(bytes) / COUNT(*) > 100", "probe"),
    ("SELECT MAX(bytes) - MIN(bytes) AS spread, COUNT(DISTINCT src) FROM s [RANGE 20 s]", "synopsis"),
    ("SELECT COUNT(*) FROM s WHERE bytes * 8 > 100", "window"),
    ("SELECT SUM(bytes * 8) FROM s", "window"),
    ("SELECT lower(src), COUNT(*) FROM s GROUP BY lower(src)", "window"),
    ("SELECT SUM(bytes) FILTER (WHERE port = 22) FROM s", "window"),
])
def test_the_answer_says_which_path_took_the_query(text, path):
    """Expressions over the grouped column or over aggregates of synopsis-backed columns keep the
    synopsis (or probe) path; the answer and the plan's explain() say which path answered, and the
    rows path answers the same."""
    s, rows = _stream(2)
    plan = plan_query(parse_query(text), s)
    answer = run_plan(plan)
    assert answer.access == path and plan.explain()["access"] == path
    if path == "window":  # no synopsis answers it: forcing one is refused
        with pytest.raises(InvalidInput, match="cannot answer"):
            plan_query(parse_query(text), s, "synopsis")
    else:
        forced = run_plan(plan_query(parse_query(text), s, "synopsis"))
        assert forced.access == "synopsis" and _rows_equal(_sorted(forced.rows), _sorted(answer.rows))
    window = run_plan(plan_query(parse_query(text), s, "window"))
    assert window.access == "window"
    assert _rows_equal(_sorted(answer.rows), _sorted(window.rows)), (answer.rows, window.rows)


# -- errors --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, pos, token, reason", [
    ("SELECT foo(bytes) FROM s", 7, "foo", "unknown function 'foo'"),
    ("SELECT bytes + 1 FROM s WHERE stddev(bytes) > 1", 30, "stddev", "unknown function 'stddev'"),
    ("SELECT bytes FROM s WHERE src + 1 > 2", 26, "src", "arithmetic (+) needs numbers"),
    ("SELECT src ^ 2 FROM s", 11, "^", "unexpected character"),
    ("SELECT lower(port) FROM s", 13, "port", "lower() needs a string"),
    ("SELECT COUNT(*) FROM s WHERE SUM(bytes) > 1", 29, "SUM", "an aggregate is not allowed in WHERE"),
    ("SELECT src, bytes + 1, COUNT(*) FROM s GROUP BY src", 12, "bytes", "column 'bytes' must be aggregated"),
    ("SELECT SUM(COUNT(*)) FROM s", 11, "COUNT", "an aggregate inside an aggregate"),
    ("SELECT nope * 2 FROM s", 7, "nope", "unknown column 'nope'"),
    ("SELECT bytes FROM s WHERE bytes", 26, "bytes", "WHERE needs a condition"),
    ("SELECT CASE WHEN port THEN 1 END FROM s", 17, "port", "CASE WHEN needs a condition"),
    ("SELECT time_bucket('1 min', ts) FROM s", 19, "'1 min'", "time_bucket() needs a positive INTERVAL"),
])
def test_errors_name_what_is_unsupported_and_where(text, pos, token, reason):
    s, _ = _stream(0, slides=1)
    with pytest.raises(InvalidInput) as err:
        plan_query(parse_statement(text), s)
    e = err.value
    assert e.reason.startswith(reason), str(e)
    assert (e.position, e.token) == (pos, token), str(e)
    assert "expected FROM" not in str(e)
    if isinstance(e, QuerySyntaxError):
        assert str(e).startswith(f"{reason}")


# -- through a real server and the SDK (the text form) -------------------------------------------------
def test_expressions_through_the_server_and_the_sdk():
    from windowstore.clients import Client, InvalidArgument
    from windowstore.server.process import ServerProcess
    s, rows = _stream(4)
    con = _duck(rows)
    with ServerProcess() as srv, Client(srv.target, timeout=30) as ws:
        ws.create_stream("s", schema=SCHEMA, subwindows=3, subwindow_ms=SUB_MS, clock="manual", group_by=["src", "port"])
        rng_rows = _stream_batches(4)
        for batch in rng_rows:
            if batch:
                ws.append("s", {c: [r[c] for r in batch] for c in SCHEMA})
            ws.slide("s")
        for text in ("SELECT src, SUM(bytes) * 8 / 60 AS bps FROM s GROUP BY src ORDER BY src",
                     "SELECT CASE WHEN port < 1024 THEN 'system' ELSE 'user' END AS kind, COUNT(*) FROM s "
                     "GROUP BY 1 ORDER BY 1"):
            answer = ws.query(text)
            exp = [tuple(r) for r in con.execute(text).fetchall()]
            assert _rows_equal([tuple(r) for r in answer.rows], exp), (text, answer.rows, exp)
        assert ws.explain("SELECT src, SUM(bytes) / COUNT(*) FROM s GROUP BY src")["access"] in ("probe", "synopsis")
        assert ws.explain("SELECT COUNT(*) FROM s WHERE bytes * 8 > 100")["access"] == "window"
        # AS OF SLIDE through the SDK re-writes the text (to_text of a query with expressions)
        pinned = ws.query("SELECT SUM(bytes) / COUNT(*) FROM s", as_of_slide=4)
        assert pinned.rows[0][0] is not None
        # a periodic query with expressions: registered (logged as text), answered at the next slide
        p = ws.register("SELECT src, SUM(bytes) * 8 AS bits FROM s [RANGE 20 s SLIDE 10 s] GROUP BY src")
        ws.append("s", {c: [v] for c, v in zip(SCHEMA, (50_001, 999, "a", 22, 7, 1.0, True))})
        ws.slide("s")
        answers = wait_for(lambda: ws.read_answers(p.id)[0], "the periodic query's first answer")
        newest = [r for r in con.execute("SELECT * FROM s").fetchall() if r[0] >= 40_000] + \
            [(50_001, 999, "a", 22, 7, 1.0, True)]
        exp = sorted({r[2] for r in newest}, key=lambda v: (v is None, v or ""))
        assert [r[0] for r in answers[-1].rows] == exp
        assert dict((r[0], r[1]) for r in answers[-1].rows)["a"] == 8 * sum(r[4] for r in newest if r[2] == "a")
        ws.unregister(p.id)
        with pytest.raises(InvalidArgument, match="unknown function 'foo' at position 7"):
            ws.query("SELECT foo(bytes) FROM s")
        with pytest.raises(InvalidArgument, match="integer overflow"):
            ws.query("SELECT bytes * 9223372036854775807 FROM s")


def _stream_batches(seed: int) -> list[list[dict]]:
    """The batches _stream(seed) appends, one per slide (for a server)."""
    rng = Random(seed)
    out, rid = [], 0
    for slide in range(5):
        batch = []
        for _ in range(rng.randrange(0, 40)):
            def maybe(v):
                return None if rng.random() < 0.1 else v
            batch.append({"ts": slide * SUB_MS + rng.randrange(SUB_MS), "rid": rid,
                          "src": maybe(rng.choice(["a", "B", "Cd", "", "ab%", "éx"])),
                          "port": maybe(rng.choice([22, 80, 443, 8080, 0, -3])),
                          "bytes": rng.randrange(-50, 5000), "f": maybe(round(rng.uniform(-100, 100), 2)),
                          "ok": maybe(rng.random() < 0.5)})
            rid += 1
        out.append(batch)
    return out


def test_a_partitioned_stream_merges_expressions_by_their_partial_aggregates_or_refuses_them():
    """One-time and periodic queries alike (clients/partitioned.py _merge_plan): expressions are
    merged from their groups' partial aggregates, never as the first grammar's columns; what has no
    exact partial form is refused by name."""
    from windowstore.clients import InvalidArgument
    from windowstore.clients.expr_merge import ExprMergePlan
    from windowstore.clients.merge import MergePlan
    from windowstore.clients.partitioned import Layout, _merge_plan
    lay = Layout("s", 2, ("src",), types={"ts": "int64", "src": "string", "bytes": "int64"})
    assert isinstance(_merge_plan(parse_statement("SELECT src, SUM(bytes) FROM s GROUP BY src"), lay), MergePlan)
    assert isinstance(_merge_plan(parse_statement("SELECT src, SUM(bytes) * 8 FROM s GROUP BY src"), lay), ExprMergePlan)
    with pytest.raises(InvalidArgument, match=r"COUNT\(DISTINCT \.\.\.\) in a query with expressions"):
        _merge_plan(parse_statement("SELECT COUNT(DISTINCT src) * 8 FROM s"), lay)


def test_a_registry_aggregate_this_grammar_does_not_compute_is_named(monkeypatch):
    """An aggregate of the function registry (functions.register) that expressions cannot take yet
    is refused by name, not as an unknown function."""
    from windowstore.store import functions
    monkeypatch.setitem(functions.SQL_NAMES, "approx_thing", "approx_thing")
    with pytest.raises(QuerySyntaxError) as err:
        parse_statement("SELECT approx_thing(bytes) * 2 FROM s")
    assert (err.value.reason, err.value.position) == ("APPROX_THING cannot be combined with expressions yet", 7)


def test_a_string_column_of_nulls_only_reads_as_nulls():
    s = Stream("z", {"ts": "int64", "k": "string"}, WindowSpec(subwindows=2, subwindow_ms=1000, clock="manual"), 0)
    s.append({"ts": [1, 2], "k": [None, None]})
    s.window.slide(1000)
    for access in (None, "window"):
        assert _run(s, "SELECT COALESCE(k, 'none') AS k2, COUNT(*) FROM z GROUP BY 1", access).rows == [("none", 2)]


def test_a_query_with_expressions_has_a_structured_form():
    """(tests/test_structured_expr.py covers the structured form itself)"""
    from windowstore.server.convert import query_from_pb, query_to_pb
    q = parse_statement("SELECT SUM(bytes) * 8 FROM s")
    assert len(query_to_pb(q).select_exprs) == 1 and query_from_pb(query_to_pb(q)) == q
    assert query_to_pb(parse_statement("SELECT SUM(bytes) FROM s")).stream == "s"


def test_a_null_condition_passes_no_row_as_duckdb():
    """`WHERE NULL`, `FILTER (WHERE NULL)` and `HAVING NULL`: a condition of type null (no column
    type to take) filters out every row, as in DuckDB (it raised an Arrow error before)."""
    s, rows = _stream(0, per=25)
    con = _duck(rows)
    for q in ["SELECT bytes + 1 FROM s WHERE NULL", "SELECT COUNT(*), SUM(bytes) FROM s WHERE NULL",
              "SELECT SUM(bytes) FILTER (WHERE NULL), COUNT(*) FROM s",
              "SELECT src, COUNT(*) FROM s GROUP BY src HAVING NULL",
              "SELECT COUNT(*) FROM s WHERE NULL OR bytes > 100"]:
        got = run_plan(plan_query(parse_query(q), s)).rows
        assert got == [tuple(r) for r in con.execute(q).fetchall()], q
