"""DECIMAL values in expressions (store/expr_decimal.py) against DuckDB as the oracle: decimal columns
and constants (`1.50` is a DECIMAL(3,2), as in DuckDB) in arithmetic, comparisons, CASE / COALESCE,
CAST, abs / round / floor / ceil and SUM / AVG / MIN / MAX / QUANTILE, over random rows with NULLs.
The answers must be equal (decimals exactly, doubles within a relative 1e-12) and so must their
types (DECIMAL(p,s) widths and scales as DuckDB's binder gives them); a query DuckDB refuses (an
overflow, a scale beyond 38, a division by zero) must be refused too, never answered."""
from __future__ import annotations

import math
from decimal import Decimal
from random import Random

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from windowstore.store import QueryError, Stream, WindowSpec, parse_query, plan_query, run_plan
from windowstore.store.parser import parse_statement, to_text

from conftest import examples

SCHEMA = {"ts": "int64", "rid": "int64", "b": "int64", "p": "decimal(12,2)", "q": "decimal(18,6)", "f": "float64",
          "k": "string"}
_DUCK_TYPES = "ts BIGINT, rid BIGINT, b BIGINT, p DECIMAL(12,2), q DECIMAL(18,6), f DOUBLE, k VARCHAR"


def _fixture(seed: int):
    rng = Random(seed)
    s = Stream("s", SCHEMA, WindowSpec(subwindows=3, subwindow_ms=1000, clock="manual"), 0)
    kept: list[dict] = []
    for slide in range(4):
        batch = []
        for _ in range(rng.randrange(0, 20)):
            def maybe(v):
                return None if rng.random() < 0.15 else v
            batch.append({"ts": slide * 1000 + rng.randrange(1000), "rid": slide * 100 + len(batch),
                          "b": maybe(rng.choice([0, 1, -3, 7, 10**9, -(10**12), rng.randrange(-1000, 1000)])),
                          # (a product of two stored values mostly within 18 digits, DuckDB's limit)
                          "p": maybe(Decimal(rng.randrange(-10**9 + 1, 10**9)).scaleb(-2) if rng.random() < 0.5
                                     else Decimal(rng.randrange(-999, 999)).scaleb(-2)),
                          "q": maybe(Decimal(rng.randrange(-10**9 + 1, 10**9)).scaleb(-6) if rng.random() < 0.3
                                     else Decimal(rng.randrange(-10**7, 10**7)).scaleb(-6)),
                          "f": maybe(rng.choice([0.5, -1.25, 3.0, rng.uniform(-100, 100)])),
                          "k": rng.choice(["a", "b", None])})
        if batch:
            s.append({c: [r[c] for r in batch] for c in SCHEMA})
        s.window.slide((slide + 1) * 1000)
        kept = (kept + batch) if slide >= 1 else batch
    kept = [r for r in kept if r["ts"] >= 1000]
    con = duckdb.connect()
    con.execute(f"CREATE TABLE s ({_DUCK_TYPES})")
    if kept:
        con.executemany("INSERT INTO s VALUES (?, ?, ?, ?, ?, ?, ?)", [tuple(r[c] for c in SCHEMA) for r in kept])
    return s, con


_FIX: dict = {}


def _duck_type(t: str) -> str:
    t = t.lower()
    return {"double": "float64", "bigint": "int64", "hugeint": "int128", "boolean": "boolean",
            "varchar": "string", "integer": "int64"}.get(t, t.replace(" ", ""))


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        if math.isnan(float(a)) or math.isnan(float(b)):
            return math.isnan(float(a)) and math.isnan(float(b))
        return isinstance(a, float) and isinstance(b, float) and math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-300)
    return type(a) is type(b) and a == b and (not isinstance(a, Decimal) or a.as_tuple().exponent == b.as_tuple().exponent)


def _check(text: str, seed: int, duck: str | None = None) -> None:
    if seed not in _FIX:
        _FIX[seed] = _fixture(seed)
    s, con = _FIX[seed]
    try:
        r = con.execute(duck or text)
        exp, exp_types = [tuple(x) for x in r.fetchall()], [_duck_type(str(d[1])) for d in r.description]
    except duckdb.Error:  # DuckDB refuses (an overflow, a scale beyond 38, a division by zero): so must the store
        with pytest.raises(QueryError):
            run_plan(plan_query(parse_query(text), s))
        return
    for access in (None, "window"):
        got = run_plan(plan_query(parse_query(text), s, access))
        types = ["int64" if t == "int128" else t for t in got.types]
        assert exp_types is None or types == ["int64" if t == "int128" else t for t in exp_types], \
            f"{text}: {types} != {exp_types}"
        assert len(got.rows) == len(exp) and all(len(g) == len(e) and all(_same(a, b) for a, b in zip(g, e))
                                                 for g, e in zip(got.rows, exp)), \
            f"{text} [{access}]\n got {got.rows[:5]}\nwant {exp[:5]}"
    q = parse_statement(text)
    assert parse_statement(to_text(q)) == q, to_text(q)


# -- random decimal expressions ---------------------------------------------------------------------------
# (with a fractional part: a constant without one is an INTEGER in DuckDB, drawn by `leaves` below)
decimal_constants = st.tuples(st.integers(-10**8, 10**8), st.integers(1, 6)).map(
    lambda x: format(Decimal(x[0]).scaleb(-x[1]), "f"))
nonzero_constants = st.tuples(st.integers(1, 10**6), st.integers(0, 4), st.booleans()).map(
    lambda x: ("-" if x[2] else "") + format(Decimal(x[0]).scaleb(-x[1]), "f"))
# bare integer constants are INTEGER in DuckDB, whose products overflow at 2^31 where the store
# widens (exactly, as BIGINT): small ones (four multiplied stay below 2^31) and larger ones as BIGINT
leaves = st.one_of(st.sampled_from(["p", "q", "b", "p", "q"]), decimal_constants,
                   st.integers(-100, 100).map(str), st.integers(-10**6, 10**6).map(lambda n: f"CAST({n} AS BIGINT)"))


def _paren(x: str) -> str:
    return f"({x})"


@st.composite
def decimal_exprs(draw, depth: int = 2):
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return _paren(draw(leaves))
    a = draw(decimal_exprs(depth - 1))
    form = draw(st.integers(0, 8))
    if form <= 2:
        return _paren(f"{a} {draw(st.sampled_from(['+', '-', '*']))} {draw(decimal_exprs(depth - 1))}")
    if form == 3:
        return _paren(f"{a} {draw(st.sampled_from(['/', '%']))} {draw(nonzero_constants)}")
    if form == 4:
        return f"abs({a})" if draw(st.booleans()) else _paren(f"- {a}")
    if form == 5:
        return f"{draw(st.sampled_from(['floor', 'ceil']))}({a})"
    if form == 6:
        return f"round({a}, {draw(st.integers(0, 4))})"
    if form == 7:
        return f"CAST({a} AS DECIMAL({draw(st.integers(10, 38))}, {draw(st.integers(0, 8))}))"
    return f"COALESCE({a}, {draw(decimal_exprs(depth - 1))})"


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(decimal_exprs(), decimal_exprs(), st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), st.integers(0, 2))
def test_decimal_expressions_match_duckdb_in_value_and_type(a, b, op, seed):
    _check(f"SELECT rid, {a}, {b}, {a} {op} {b}, CASE WHEN {a} > {b} THEN {a} ELSE {b} END FROM s ORDER BY rid", seed)
    _check(f"SELECT COUNT(*), SUM({a}), MIN({b}), MAX({a}), AVG({b}) FROM s WHERE {a} {op} {b} OR {b} BETWEEN {a} AND 1.5",
           seed)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(decimal_exprs(depth=1), st.sampled_from(["BIGINT", "DOUBLE", "VARCHAR", "DECIMAL(6, 1)", "DECIMAL(38, 10)"]),
       st.integers(0, 2))
def test_casts_of_decimals_match_duckdb(a, to, seed):
    _check(f"SELECT rid, CAST({a} AS {to}) FROM s ORDER BY rid", seed)


def test_a_product_of_18_digit_decimals_at_scale_18_is_typed_and_answered_as_duckdb():
    """q * q * q of DECIMAL(18,6) values: (q * q) is DECIMAL(18,12), an int64 product as DuckDB's;
    times q the scale is 18, so DuckDB (and the store) multiply in DECIMAL(36,18), not in 18 digits
    (this was refused here, "does not fit DECIMAL(18,18)", where DuckDB answers)."""
    if 0 not in _FIX:
        _FIX[0] = _fixture(0)
    s, con = _FIX[0]
    assert con.execute("SELECT typeof((q) * ((q) * (q))), typeof((q) * (q)), typeof(p * p) FROM s LIMIT 1").fetchall() \
        == [("DECIMAL(36,18)", "DECIMAL(18,12)", "DECIMAL(18,4)")]
    got = run_plan(plan_query(parse_query("SELECT rid, (q) * ((q) * (q)) FROM s ORDER BY rid"), s))
    assert got.types == ["int64", "decimal(36,18)"]
    assert any(v is not None and abs(v) >= 1 for _, v in got.rows)  # values beyond 18 digits at scale 18
    _check("SELECT rid, (q) * ((q) * (q)) FROM s ORDER BY rid", 0)
    _check("SELECT rid, (p) = ((q) * ((q) * (q))), q * q * q * 2 FROM s ORDER BY rid", 0)
    _check("SELECT SUM(q * q * q), MAX(q * (q * q)) FROM s", 0)


@pytest.mark.parametrize("text", [
    "SELECT CAST(30000000 AS DECIMAL(12,2)) * CAST(30000000 AS DECIMAL(12,2)) FROM s",
    "SELECT CAST(9000000 AS DECIMAL(12,2)) * CAST(10000000 AS DECIMAL(12,2)) FROM s",
    "SELECT CAST(1 AS DECIMAL(18,6)) * CAST(2 AS DECIMAL(18,11)) FROM s",
])
def test_an_int64_product_beyond_18_digits_is_refused_as_duckdb_refuses_it(text):
    """DuckDB's int64 products (DECIMAL(18, s) with s below 18) refuse a value of 19 digits or more
    (10^18 at the scale: 3000000000 * 3000000000), and answer below it: so does the store."""
    _check(text, 1)


@pytest.mark.parametrize("text", [
    "SELECT rid, COALESCE(p, CAST(p AS DECIMAL(10, 4))) FROM s ORDER BY rid",
    "SELECT rid, COALESCE(NULL, p, CAST(q AS DECIMAL(3, 1)), 2) FROM s ORDER BY rid",
    "SELECT rid, CASE WHEN abs(p) < 100 THEN CAST(p AS DECIMAL(4, 2)) ELSE p END FROM s ORDER BY rid",
    "SELECT rid, CASE WHEN p IS NULL THEN 0 WHEN abs(p) < 100 THEN CAST(p AS DECIMAL(4, 2)) END FROM s ORDER BY rid",
    "SELECT rid, CASE WHEN abs(p) >= 100 THEN 1.5 ELSE CAST(p AS DECIMAL(4, 2)) END FROM s ORDER BY rid",
    "SELECT rid, CASE k WHEN 'a' THEN CAST(b AS DECIMAL(4, 0)) ELSE 0 END FROM s WHERE abs(b) < 1000 OR k IS DISTINCT FROM 'a' ORDER BY rid",
])
def test_case_and_coalesce_evaluate_a_branch_only_on_the_rows_it_answers(text):
    """A CAST that does not fit on rows a branch does not answer is no error (DuckDB evaluates a
    CASE branch or a COALESCE argument only where it is chosen): each query answers, as DuckDB
    does, although evaluating every branch on every row would refuse it."""
    if 0 not in _FIX:
        _FIX[0] = _fixture(0)
    s, con = _FIX[0]
    for cast in ("CAST(p AS DECIMAL(4, 2))", "CAST(p AS DECIMAL(10, 4))", "CAST(q AS DECIMAL(3, 1))",
                 "CAST(b AS DECIMAL(4, 0))"):  # on every row, each cast is refused, by both
        with pytest.raises(duckdb.Error):
            con.execute(f"SELECT {cast} FROM s").fetchall()
        with pytest.raises(QueryError, match="does not fit"):
            run_plan(plan_query(parse_query(f"SELECT {cast} FROM s"), s))
    assert con.execute(text).fetchall()  # DuckDB answers the query: so must the store, equally
    _check(text, 0)


def test_a_bigint_beyond_2_53_casts_to_the_nearest_double():
    """DuckDB rounds a BIGINT past 2^53 to the nearest double (Arrow's safe cast refused it)."""
    _check("SELECT rid, CAST(b * 9008 AS DOUBLE), b * 9008 * 1.5e0 FROM s ORDER BY rid", 0)


@pytest.mark.parametrize("column", ["p", "q"])
@pytest.mark.parametrize("seed", range(3))
def test_aggregates_of_a_decimal_column_match_duckdb_on_every_path(column, seed):
    """SUM is DECIMAL(38, s), MIN / MAX / QUANTILE the column's type, grouped or not, on the synopsis
    path (a column's aggregate under expressions) as on the window path (DuckDB's quantile_disc); AVG
    is a DOUBLE, in an expression and alone (test_types.py), as DuckDB types it."""
    _check(f"SELECT k, SUM({column}), MIN({column}), MAX({column}), SUM({column}) * 2, MAX({column}) - MIN({column}) "
           f"FROM s GROUP BY k ORDER BY k", seed, None)
    _check(f"SELECT AVG({column}) * 1, AVG({column} + 0), COUNT(DISTINCT {column}), QUANTILE({column}, 0.5) FROM s", seed,
           f"SELECT AVG({column}) * 1, AVG({column} + 0), COUNT(DISTINCT {column}), quantile_disc({column}, 0.5) FROM s")
    _check(f"SELECT AVG({column}) FROM s", seed)  # the first grammar's AVG(col) alone: DuckDB's DOUBLE too
    _check(f"SELECT k, AVG({column}), AVG({column}) / 2 FROM s GROUP BY k ORDER BY k", seed)


@pytest.mark.parametrize("text", [
    "SELECT 0.1 + 0.2 = 0.3, 1.5 IN (1.50, 2), 1.5 IS DISTINCT FROM 1.50, 0.001 * 3 FROM s",
    "SELECT CAST(99999999999999999999999999999999999999 AS DECIMAL(38,0)) + 1 FROM s",
    "SELECT CAST(1 AS DECIMAL(38,37)) * CAST(1 AS DECIMAL(38,37)) FROM s",
    "SELECT p % 0 FROM s",
    "SELECT CAST(b AS DECIMAL(3,1)) FROM s",
])
def test_exact_decimal_constants_and_the_errors_duckdb_gives(text):
    _check(text.replace("ORDER BY", "ORDER BY"), 1)
