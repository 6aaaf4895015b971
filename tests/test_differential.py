"""The query core against DuckDB (tests/differential.py), plus one named regression test per known
wrong answer, each with its exact expected answer (through the core API; 1 and 6 also through a
real server and the SDK)."""
from __future__ import annotations

import re

import pytest

import differential
from windowstore.clients import Client, InvalidArgument
from windowstore.server.process import ServerProcess
from windowstore.store import InvalidInput, Stream, WindowSpec, parse_query, plan_query, run_plan

M = -(2**63)
SCHEMA = {"ts": "int64", "k": "string", "x": "int64", "y": "float64"}


# -- bounded differential runs ---------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, pytest.param(2, marks=pytest.mark.long), pytest.param(3, marks=pytest.mark.long)])  # more seeds: make test-long
def test_core_agrees_with_duckdb(seed):
    """1,700 generated cases per seed: default, window and synopsis plans against DuckDB."""
    con = differential.duckdb_connection()
    report = differential.run(1700, seed, con=con)
    assert report.failed_cases == 0, "\n" + report.text(show=3, con=con)


@pytest.mark.slow
def test_server_agrees_with_duckdb():
    """150 generated cases through a real server and the SDK."""
    con = differential.duckdb_connection()
    report = differential.run(150, 11, server=True, con=con)
    assert report.failed_cases == 0, "\n" + report.text(show=3, server=True)


# -- helpers for the regression tests ---------------------------------------------------------------
def make_stream(subwindows: int = 4, group_by=("k",)) -> Stream:
    spec = WindowSpec(subwindows=subwindows, subwindow_ms=1000, clock="manual", group_by=tuple(group_by))
    return Stream("S", SCHEMA, spec, created_ms=0)


def feed(stream: Stream, *subwindows: list) -> None:
    """Append each list of rows (dicts; missing columns default) and slide after each."""
    for j, rows in enumerate(subwindows):
        full = [{"ts": j * 1000 + i, "k": "a", "x": 0, "y": 0.0, **r} for i, r in enumerate(rows)]
        if full:
            stream.append({c: [r[c] for r in full] for c in SCHEMA})
        stream.window.slide((j + 1) * 1000)


def answers(stream: Stream, text: str) -> dict:
    """Rows per access path: the default plan, the raw-row plan, and the synopsis plan if accepted."""
    out = {"default": run_plan(plan_query(parse_query(text), stream)).rows,
           "window": run_plan(plan_query(parse_query(text), stream, access="window")).rows}
    try:
        out["synopsis"] = run_plan(plan_query(parse_query(text), stream, access="synopsis")).rows
    except InvalidInput:
        pass
    return out


def typed(rows) -> list:
    """Rows with each value's type, so that 2**63 (int) never equals 9.223372036854776e18 (float)."""
    return [tuple((type(v).__name__, v) for v in r) for r in rows]


def check(stream: Stream, text: str, expected: list) -> None:
    for path, rows in answers(stream, text).items():
        assert typed([tuple(r) for r in rows]) == typed(expected), f"{path}: {text}"


# -- 1. integer sums never wrap -------------------------------------------------------------------
def test_sum_of_two_2_62_is_2_63_exactly():
    s = make_stream()
    feed(s, [{"x": 2**62}, {"x": 2**62}])
    check(s, "SELECT SUM(x) FROM S", [(9223372036854775808,)])
    check(s, "SELECT AVG(x) FROM S", [(4.611686018427388e18,)])


def test_avg_of_two_int64_min():
    s = make_stream()
    feed(s, [{"x": M}, {"x": M}])
    check(s, "SELECT AVG(x) FROM S", [(-9.223372036854776e18,)])


def test_sum_overflowing_midway_across_subwindows_ends_in_range():
    s = make_stream()
    feed(s, [{"x": 2**62}, {"x": 2**62}], [{"x": -10}])
    check(s, "SELECT SUM(x) FROM S", [(9223372036854775798,)])
    check(s, "SELECT k, SUM(x) FROM S GROUP BY k", [("a", 9223372036854775798)])


# -- 2. grouped sums with INT64_MIN -----------------------------------------------------------------
def test_group_sum_with_int64_min():
    s = make_stream()
    feed(s, [{"x": M}, {"x": 1}, {"x": 7}])
    check(s, "SELECT k, SUM(x) FROM S GROUP BY k", [("a", M + 8)])


# -- 3. ORDER BY ... DESC LIMIT with INT64_MIN among the groups -----------------------------------
def test_order_by_min_desc_limit_2_with_int64_min_returns_two_rows():
    s = make_stream()
    feed(s, [{"k": f"g{i}", "x": v} for i, v in enumerate([M, 1, 2, 3, 4, 5, 6, 7, 8])])
    check(s, "SELECT k, MIN(x) FROM S GROUP BY k ORDER BY 2 DESC LIMIT 2", [("g8", 8), ("g7", 7)])


# -- 4. ORDER BY a name: output names first, then the GROUP BY column -----------------------------------
def test_order_by_alias_that_shadows_a_column():
    s = make_stream()
    # SUM(x) order: a, c, b; MAX(ts) order: b, c, a; key order: a, b, c
    feed(s, [{"k": "a", "x": 100, "ts": 1}, {"k": "b", "x": 1, "ts": 3}, {"k": "c", "x": 50, "ts": 2}])
    check(s, "SELECT k, SUM(x), MAX(ts) AS x FROM S GROUP BY k ORDER BY x DESC",
          [("b", 1, 3), ("c", 50, 2), ("a", 100, 1)])


def test_order_by_key_name_after_the_aggregates():
    s = make_stream()
    feed(s, [{"k": "a"}, {"k": "a"}, {"k": "a"}, {"k": "b"}, {"k": "c"}, {"k": "c"}])
    check(s, "SELECT COUNT(k), k FROM S GROUP BY k ORDER BY k DESC", [(2, "c"), (1, "b"), (3, "a")])


# -- 5. LIMIT 0 without GROUP BY ----------------------------------------------------------------
def test_limit_0_without_group_by_returns_no_rows():
    s = make_stream()
    check(s, "SELECT COUNT(*) FROM S LIMIT 0", [])
    feed(s, [{"x": 1}, {"x": 2}])
    check(s, "SELECT COUNT(*) FROM S LIMIT 0", [])
    check(s, "SELECT COUNT(*) FROM S", [(2,)])


# -- 6. exact comparisons between int64 and numeric literals ------------------------------------
def test_int64_compares_exactly_with_decimal_and_in_literals():
    s = make_stream()
    feed(s, [{"x": 9007199254740992}, {"x": 9007199254740993}])
    check(s, "SELECT COUNT(*) FROM S WHERE x IN (9007199254740993, 0.5)", [(1,)])
    check(s, "SELECT COUNT(*) FROM S WHERE x = 9007199254740993.0", [(1,)])


# -- 7. sub-query: MIN over the string key; quantiles need numbers --------------------------------------
def test_subquery_min_of_string_key():
    s = make_stream()
    feed(s, [{"k": "b", "x": 1}, {"k": "é", "x": 2}, {"k": "B", "x": 3}, {"k": "a", "x": 4}])
    check(s, "SELECT MIN(k) FROM (SELECT k, SUM(x) AS t FROM S GROUP BY k)", [("B",)])
    with pytest.raises(InvalidInput):
        plan_query(parse_query("SELECT MEDIAN(k) FROM (SELECT k, SUM(x) AS t FROM S GROUP BY k)"), s)


def test_subquery_min_of_string_key_on_an_empty_window():
    s = make_stream()
    check(s, "SELECT MIN(k) FROM (SELECT k, SUM(x) AS t FROM S GROUP BY k)", [(None,)])
    with pytest.raises(InvalidInput):
        plan_query(parse_query("SELECT MEDIAN(k) FROM (SELECT k, SUM(x) AS t FROM S GROUP BY k)"), s)


# -- 8. errors name the position and the token ----------------------------------------------------
@pytest.mark.parametrize("text, construct, token", [
    ("SELECT SUM(nope) FROM S", "SUM(nope)", "nope"),                              # unknown column
    ("SELECT COUNT(*) FROM S WHERE x = 'abc'", "x = 'abc'", "abc"),                # type mismatch
    ("SELECT COUNT(*) FROM S WHERE k = 4242", "k = 4242", "4242"),                 # type mismatch
    ("SELECT SUM(k) FROM S", "SUM(k)", "k"),                                       # SUM of a string
    ("SELECT COUNT(*) FROM S [RANGE 1500 ms]", "1500 ms", "1500"),                 # not a multiple
    ("SELECT COUNT(*) FROM S [RANGE 5 SUBWINDOWS]", "5 SUBWINDOWS", "5"),          # too long (n = 4)
    ("SELECT y, COUNT(*) FROM S GROUP BY y", "GROUP BY y", "y"),                   # GROUP BY a float
    ("SELECT k, SUM(x) FROM S GROUP BY k ORDER BY zz", "zz", "zz"),                # unknown ORDER BY
], ids=["unknown-column", "string-vs-int", "number-vs-string", "sum-of-string", "range-not-multiple",
        "range-too-long", "group-by-float", "order-by-unknown"])
def test_errors_name_position_and_token(text, construct, token):
    s = make_stream()
    with pytest.raises(InvalidInput) as info:
        plan_query(parse_query(text), s)
    msg = str(info.value)
    m = re.search(r"position\s+(\d+)", msg)
    assert m, f"no position in {msg!r}"
    start = text.index(construct)
    # the position points into the offending construct (0-based; 1-based accepted too)
    assert start <= int(m.group(1)) <= start + len(construct), msg
    rest = msg[:m.start()] + msg[m.end():]
    assert re.search(r"(?<!\w)" + re.escape(token) + r"(?!\w)", rest), f"token {token!r} not named in {msg!r}"


# -- 9. MIN/MAX over strings by code point -----------------------------------------------------------
def test_min_max_of_strings_by_code_point():
    s = make_stream()
    # code points: 'B' < 'a' < 'z' < 'é' (U+00E9) < '日本' < '😀' (astral); '' is the smallest
    feed(s, [{"k": "z", "x": 1}, {"k": "é", "x": 1}, {"k": "😀", "x": 2}],
         [{"k": "日本", "x": 2}, {"k": "B", "x": 1}, {"k": "a", "x": 2}, {"k": "", "x": 3}])
    check(s, "SELECT MIN(k), MAX(k) FROM S", [("", "😀")])
    check(s, "SELECT x, MIN(k), MAX(k) FROM S GROUP BY x", [(1, "B", "é"), (2, "a", "😀"), (3, "", "")])
    check(s, "SELECT MIN(k), MAX(k) FROM S [RANGE 1 SUBWINDOWS] WHERE k > 'B'", [("a", "日本")])


# -- 1 and 6 through a real server and the SDK ----------------------------------------------------------
@pytest.fixture(scope="module")
def ws():
    with ServerProcess() as srv, Client(srv.target, timeout=30) as c:
        yield c


def _server_stream(ws, name: str, *subwindows: list) -> None:
    ws.create_stream(name, schema=SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual", group_by=["k"])
    for j, rows in enumerate(subwindows):
        full = [{"ts": j * 1000 + i, "k": "a", "x": 0, "y": 0.0, **r} for i, r in enumerate(rows)]
        ws.append(name, {c: [r[c] for r in full] for c in SCHEMA})
        ws.slide(name)


@pytest.mark.slow
def test_server_sum_beyond_int64_arrives_as_exact_python_int(ws):
    _server_stream(ws, "reg_sum_2_63", [{"x": 2**62}, {"x": 2**62}])
    a = ws.query("SELECT SUM(x), AVG(x) FROM reg_sum_2_63")
    assert typed(a.rows) == typed([(9223372036854775808, 4.611686018427388e18)])
    a = ws.query("SELECT k, SUM(x) FROM reg_sum_2_63 GROUP BY k")
    assert typed(a.rows) == typed([("a", 9223372036854775808)])
    _server_stream(ws, "reg_sum_midway", [{"x": 2**62}, {"x": 2**62}], [{"x": -10}])
    a = ws.query("SELECT SUM(x) FROM reg_sum_midway")
    assert typed(a.rows) == typed([(9223372036854775798,)])
    _server_stream(ws, "reg_avg_min", [{"x": M}, {"x": M}])
    a = ws.query("SELECT AVG(x), SUM(x) FROM reg_avg_min")
    assert typed(a.rows) == typed([(-9.223372036854776e18, -18446744073709551616)])


def test_server_int64_compares_exactly_with_decimal_and_in_literals(ws):
    _server_stream(ws, "reg_exact_cmp", [{"x": 9007199254740992}, {"x": 9007199254740993}])
    assert typed(ws.query("SELECT COUNT(*) FROM reg_exact_cmp WHERE x IN (9007199254740993, 0.5)").rows) == typed([(1,)])
    assert typed(ws.query("SELECT COUNT(*) FROM reg_exact_cmp WHERE x = 9007199254740993.0").rows) == typed([(1,)])
    with pytest.raises(InvalidArgument):
        ws.query("SELECT COUNT(*) FROM reg_exact_cmp WHERE x = 'abc'")
