"""Timestamp and date arithmetic in expressions (store/expr_temporal.py) against DuckDB as the
oracle: timestamp +/- INTERVAL, INTERVAL + timestamp, date +/- INTERVAL (a timestamp), date - date
(days), in select items, WHERE, GROUP BY and aggregates, over random rows with NULLs; DuckDB's
timestamps and dates are compared as the microseconds and days the store's columns hold; dates meet
timestamps (comparisons, BETWEEN, IN, CASE, COALESCE, NULLIF) as their midnights, in both grammars.
Then the refusals (timestamp - timestamp, other operators, a temporal constant against a number),
named by position."""
from __future__ import annotations

import datetime
from random import Random

import duckdb
import pytest
from hypothesis import given, settings, strategies as st

from windowstore.store import QueryError, Stream, WindowSpec, parse_query, plan_query, run_plan

from conftest import examples

SCHEMA = {"ts": "int64", "rid": "int64", "t": "timestamp", "d": "date", "d2": "date", "k": "string"}
_EPOCH = datetime.datetime(1970, 1, 1)


def _fixture(seed: int):
    rng = Random(seed)
    s = Stream("s", SCHEMA, WindowSpec(subwindows=3, subwindow_ms=1000, clock="manual"), 0)
    rows = []
    for slide in range(4):
        batch = []
        for _ in range(rng.randrange(0, 25)):
            def maybe(v):
                return None if rng.random() < 0.15 else v
            batch.append({"ts": slide * 1000 + rng.randrange(1000), "rid": sum(map(len, rows)) + len(batch),
                          "t": maybe(rng.randrange(-10**15, 4 * 10**15)), "d": maybe(rng.randrange(-30000, 40000)),
                          "d2": maybe(rng.randrange(-30000, 40000)), "k": rng.choice(["a", "b", None])})
        if batch:
            s.append({c: [r[c] for r in batch] for c in SCHEMA})
        s.window.slide((slide + 1) * 1000)
        rows.append(batch)
    kept = [r for b in rows[-3:] for r in b]
    con = duckdb.connect()
    con.execute("CREATE TABLE s (ts BIGINT, rid BIGINT, t TIMESTAMP, d DATE, d2 DATE, k VARCHAR)")
    if kept:
        con.executemany("INSERT INTO s VALUES (?, ?, make_timestamp(?::BIGINT), ?::INTEGER::DATE, ?::INTEGER::DATE, ?)"
                        .replace("?::INTEGER::DATE", "(DATE '1970-01-01' + ?::INTEGER)"),
                        [(r["ts"], r["rid"], r["t"], r["d"], r["d2"], r["k"]) for r in kept])
    return s, con, kept


def _plain(v):
    """A DuckDB value as the store holds it: a timestamp as microseconds, a date as days."""
    if isinstance(v, datetime.datetime):
        d = v - _EPOCH
        return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds
    if isinstance(v, datetime.date):
        return (v - _EPOCH.date()).days
    return v


_FIX: dict = {}


def _check(text: str, duck: str, seed: int) -> None:
    if seed not in _FIX:
        _FIX[seed] = _fixture(seed)
    s, con, _ = _FIX[seed]
    exp = [tuple(_plain(v) for v in r) for r in con.execute(duck).fetchall()]
    for access in (None, "window"):
        got = run_plan(plan_query(parse_query(text), s, access)).rows
        assert got == exp, f"{text} [{access}]\n got {got[:5]}\nwant {exp[:5]}"


def test_the_fixture_loads_the_same_rows_into_duckdb():
    s, con, kept = _fixture(0)
    assert len(kept) > 10
    exp = [(r["rid"], r["t"], r["d"]) for r in sorted(kept, key=lambda r: r["rid"])]
    assert [tuple(_plain(v) for v in r) for r in con.execute("SELECT rid, t, d FROM s ORDER BY rid").fetchall()] == exp


_UNITS = [("ms", "milliseconds", 1), ("s", "seconds", 1000), ("min", "minutes", 60_000), ("h", "hours", 3_600_000),
          ("day", "days", 86_400_000)]
intervals = st.tuples(st.integers(0, 5000), st.sampled_from(_UNITS)).map(
    lambda x: (f"INTERVAL '{x[0]} {x[1][0]}'", f"INTERVAL '{x[0]} {x[1][1]}'"))


@st.composite
def temporal(draw):
    """(store text, DuckDB text) of a timestamp-valued expression."""
    iv = draw(intervals)
    base = draw(st.sampled_from(["t", "d"]))
    k = draw(st.integers(0, 2))
    if k == 0:
        return f"({base} + {iv[0]})", f"({base} + {iv[1]})"
    if k == 1:
        return f"({base} - {iv[0]})", f"({base} - {iv[1]})"
    return f"({iv[0]} + {base})", f"({iv[1]} + {base})"


@settings(max_examples=examples(60), deadline=None)
@given(temporal(), temporal(), st.integers(0, 2))
def test_timestamp_and_date_arithmetic_match_duckdb(a, b, seed):
    _check(f"SELECT rid, {a[0]}, {b[0]}, d - d2 FROM s ORDER BY rid",
           f"SELECT rid, {a[1]}, {b[1]}, d - d2 FROM s ORDER BY rid", seed)
    _check(f"SELECT COUNT(*) FROM s WHERE {a[0]} > {b[0]}", f"SELECT COUNT(*) FROM s WHERE {a[1]} > {b[1]}", seed)
    _check(f"SELECT k, MIN({a[0]}), MAX({a[0]}), COUNT({b[0]}) FROM s GROUP BY k ORDER BY k",
           f"SELECT k, MIN({a[1]}), MAX({a[1]}), COUNT({b[1]}) FROM s GROUP BY k ORDER BY k NULLS LAST", seed)


def test_a_moved_timestamp_compares_with_a_timestamp_constant_and_groups():
    _check("SELECT COUNT(*) FROM s WHERE t + INTERVAL '1 day' > TIMESTAMP '2001-09-09 01:46:40'",
           "SELECT COUNT(*) FROM s WHERE t + INTERVAL '1 day' > TIMESTAMP '2001-09-09 01:46:40'", 1)
    _check("SELECT d + INTERVAL '12 h' AS noon, COUNT(*) FROM s WHERE d IS NOT NULL GROUP BY 1 ORDER BY 1 LIMIT 5",
           "SELECT d + INTERVAL '12 hours' AS noon, COUNT(*) FROM s WHERE d IS NOT NULL GROUP BY 1 ORDER BY 1 LIMIT 5",
           2)


@pytest.mark.parametrize("text, pos, reason", [
    ("SELECT t - t FROM s", 9, "timestamp - timestamp is an INTERVAL, which an answer cannot carry"),
    ("SELECT t * 2 FROM s", 7, "arithmetic (*) on a timestamp takes + or - an INTERVAL constant"),
    ("SELECT d + 1 FROM s", 7, "arithmetic (+) on a date takes + or - an INTERVAL constant"),
    ("SELECT COALESCE(d, t, 5) FROM s", 7, "COALESCE mixes date, timestamp and number values"),
    ("SELECT COUNT(*) FROM s WHERE rid >= TIMESTAMP '2024-01-02 00:00:00'", 29,
     "column 'rid' is int64; cannot compare it with TIMESTAMP '2024-01-02 00:00:00'"),
    ("SELECT COUNT(*) FROM s WHERE k IN (DATE '2024-01-02')", 29, "column 'k' is string; cannot compare it with DATE"),
    ("SELECT t + INTERVAL '4611686018427387904 ms' FROM s", 9, "timestamp out of range"),
])
def test_what_is_refused_is_named_with_its_position(text, pos, reason):
    s, _, _ = _fixture(0)
    with pytest.raises(QueryError) as err:
        run_plan(plan_query(parse_query(text), s))
    assert err.value.reason.startswith(reason) and err.value.position == pos, str(err.value)


# -- DATE against TIMESTAMP: the date is cast to the timestamp of its midnight (DuckDB's rule) -------------
def _iso_ts(us: int) -> str:
    return (_EPOCH + datetime.timedelta(microseconds=us)).isoformat(sep=" ")


def _iso_date(days: int) -> str:
    return (_EPOCH.date() + datetime.timedelta(days=days)).isoformat()


# timestamp constants at, around and between midnights of the fixture's date range (a date equals only
# its own midnight), and date constants in it
ts_constants = st.tuples(st.integers(-30000, 40000), st.sampled_from([0, 1, -1, 43_200_000_000, 86_399_999_999])).map(
    lambda x: f"TIMESTAMP '{_iso_ts(x[0] * 86_400_000_000 + x[1])}'")
date_constants = st.integers(-30000, 40000).map(lambda d: f"DATE '{_iso_date(d)}'")
temporal_operands = st.one_of(
    st.sampled_from(["t", "d", "d2", "(d + INTERVAL '12 h')", "(t - INTERVAL '1 day')", "(INTERVAL '1 ms' + d2)"]),
    ts_constants, date_constants)


def _duck_text(text: str) -> str:
    return text.replace("INTERVAL '12 h'", "INTERVAL '12 hours'")


@settings(max_examples=examples(60), deadline=None)
@given(temporal_operands, temporal_operands, temporal_operands, st.sampled_from(["=", "!=", "<", "<=", ">", ">="]),
       st.integers(0, 2))
def test_dates_and_timestamps_compare_as_duckdb_casts_them(a, b, c, op, seed):
    """Every comparison form mixing DATE and TIMESTAMP operands (columns, constants, a moved date),
    in select items and WHERE, and CASE / COALESCE / NULLIF results of both types."""
    items = [f"{a} {op} {b}", f"{a} BETWEEN {b} AND {c}", f"{a} NOT IN ({b}, {c})", f"{a} IS DISTINCT FROM {b}",
             f"CASE WHEN rid % 2 = 0 THEN {a} ELSE {b} END", f"COALESCE({a}, {b}, {c})", f"NULLIF({a}, {b})",
             f"CASE {a} WHEN {b} THEN 1 WHEN {c} THEN 2 ELSE 3 END"]
    text = f"SELECT rid, {', '.join(items)} FROM s ORDER BY rid"
    _check(text, _duck_text(text), seed)
    text = f"SELECT COUNT(*), MIN(COALESCE({a}, {b})) FROM s WHERE {a} {op} {b} OR {b} BETWEEN {a} AND {c}"
    _check(text, _duck_text(text), seed)


@settings(max_examples=examples(60), deadline=None)
@given(st.sampled_from(["t", "d"]), st.one_of(ts_constants, date_constants), st.one_of(ts_constants, date_constants),
       st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), st.integers(0, 2))
def test_a_column_compares_with_a_constant_of_the_other_temporal_type_in_the_first_grammar(col, x, y, op, seed):
    """The first grammar's WHERE (col op literal, IN) and HAVING over a grouped column, where the
    synopsis and window paths read the literal in the column's own units."""
    _check(f"SELECT COUNT(*) FROM s WHERE {col} {op} {x}", f"SELECT COUNT(*) FROM s WHERE {col} {op} {x}", seed)
    _check(f"SELECT COUNT(*) FROM s WHERE {col} IN ({x}, {y})", f"SELECT COUNT(*) FROM s WHERE {col} IN ({x}, {y})",
           seed)
    _check(f"SELECT {col}, COUNT(*) FROM s GROUP BY {col} HAVING {col} {op} {x} ORDER BY {col}",
           f"SELECT {col}, COUNT(*) FROM s GROUP BY {col} HAVING {col} {op} {x} ORDER BY {col}", seed)


def test_the_known_case_a_date_from_a_timestamp_constant():
    """The issue's example: `d >= TIMESTAMP '2024-01-02 00:00:00'` compared days with microseconds."""
    for text in ("SELECT COUNT(*) FROM s WHERE d >= TIMESTAMP '2024-01-02 00:00:00'",
                 "SELECT COUNT(*) FROM s WHERE TIMESTAMP '2024-01-02 00:00:00' <= d",
                 "SELECT COUNT(*) FROM s WHERE t >= DATE '2024-01-02'",
                 "SELECT COUNT(*) FROM s WHERE d = TIMESTAMP '2024-01-02 12:00:00'",
                 "SELECT COUNT(*) FROM s WHERE d < t"):
        _check(text, text, 3)


@pytest.mark.parametrize("text", [
    "SELECT COUNT(*) FROM s WHERE d >= TIMESTAMP '2024-01-02 12:00:00' AND t < DATE '2030-01-01'",
    "SELECT d, COUNT(*) FROM s GROUP BY d HAVING d IN (TIMESTAMP '1970-01-02 00:00:00', DATE '1999-12-31')",
    "SELECT rid, COALESCE(d, TIMESTAMP '2024-01-02 00:00:00.000001') FROM s WHERE d < t OR t IS NULL ORDER BY rid",
    "SELECT COUNT(*) FROM s WHERE d = TIMESTAMP '2024-01-02 00:00:00' OR d IN (TIMESTAMP '1999-12-31 00:00:00', "
    "DATE '2001-01-01')",
    "SELECT COUNT(*), MAX(t) FROM s WHERE ts > TIMESTAMP '1970-01-01 00:00:02.0005' AND t >= DATE '1980-01-01'",
    "SELECT k, COUNT(*) FROM s GROUP BY k HAVING MAX(ts) < TIMESTAMP '1970-01-01 00:00:03' AND MIN(d) > DATE '1940-01-01'",
])
def test_temporal_constants_keep_their_type_through_the_text_and_the_structured_form(text):
    """to_text writes TIMESTAMP / DATE constants back as such (not as the integers a column of the
    other type would misread), and the structured form carries them as timestamp_us / date_days: an
    expression's Expr and the first grammar's Value alike (text -> pb -> text is the text, and the
    answers are equal, and DuckDB's)."""
    from windowstore.server import convert
    from windowstore.store.parser import parse_statement, to_text
    s, con, _ = _fixture(4)
    q = parse_statement(text)
    again = parse_statement(to_text(q))
    assert "TIMESTAMP '" in to_text(q) and again == q
    want = run_plan(plan_query(q, s)).rows
    assert run_plan(plan_query(again, s)).rows == want
    pb = convert.query_to_pb(q)
    wire = convert.query_from_pb(pb)
    assert wire == q and to_text(wire) == to_text(q) and run_plan(plan_query(wire, s)).rows == want
    if q.expr is None:  # the first grammar: the constants travel as pb.Value's timestamp_us / date_days
        kinds = {v.WhichOneof("kind") for c in pb.where for p in c.predicates for v in p.values}
        kinds |= {v.WhichOneof("kind") for v in _having_values(pb.having)}
        assert "timestamp_us" in kinds and "int64_value" not in kinds, kinds
    assert want == [tuple(_plain(v) for v in r) for r in con.execute(_as_epoch_ms(text)).fetchall()]


def _having_values(h) -> list:
    which = h.WhichOneof("condition")
    if which == "test":
        return list(h.test.values)
    if which in ("all_of", "any_of"):
        return [v for part in getattr(h, which).parts for v in _having_values(part)]
    return _having_values(h.negate) if which == "negate" else []


@settings(max_examples=examples(40), deadline=None)
@given(temporal_operands, st.sampled_from(["NOW()", "INTERVAL '1 h'", "(NOW() - INTERVAL '1 min')", "(ts + INTERVAL '1 s')"]),
       st.sampled_from(["{a} < {m}", "{m} = {a}", "{a} BETWEEN {m} AND {a}", "{a} IN ({m})", "COALESCE({a}, {m})",
                        "CASE WHEN rid > 0 THEN {m} ELSE {a} END", "NULLIF({m}, {a})"]))
def test_a_timestamp_or_date_against_a_time_in_milliseconds_is_refused(a, m, form):
    """NOW() and INTERVAL constants are event-time milliseconds: a timestamp (microseconds) or a date
    (days) meeting one in a comparison or a conditional would be misread, and is refused by name."""
    s, _, _ = _fixture(0)
    with pytest.raises(QueryError) as err:
        run_plan(plan_query(parse_query(f"SELECT {form.format(a=a, m=m)} FROM s"), s))
    assert "a time in milliseconds" in err.value.reason and err.value.position is not None, str(err.value)


@pytest.mark.parametrize("text", ["SELECT d - t FROM s", "SELECT t - d FROM s", "SELECT t - TIMESTAMP '2024-01-01' FROM s"])
def test_a_difference_of_a_timestamp_and_a_date_is_refused_as_an_interval(text):
    s, _, _ = _fixture(0)
    with pytest.raises(QueryError, match="is an INTERVAL, which an answer cannot carry"):
        run_plan(plan_query(parse_query(text), s))


# -- the event-time column against a TIMESTAMP or DATE: read as the TIMESTAMP it is (epoch_ms(ts)) ---------
# instants around the fixture's event times (0 to 4 s after the epoch), some with a part of a millisecond
event_constants = st.one_of(
    st.integers(-2_000_000, 5_000_000).map(lambda us: f"TIMESTAMP '{_iso_ts(us)}'"),
    st.integers(-2_000, 5_000).map(lambda ms: f"TIMESTAMP '{_iso_ts(ms * 1000)}'"),
    st.integers(-2, 2).map(lambda d: f"DATE '{_iso_date(d)}'"))


def _as_epoch_ms(text: str) -> str:
    """The DuckDB text: the event-time column as the TIMESTAMP epoch_ms(ts) (a BIGINT would be refused)
    where the store reads it so, in comparisons; selected, grouped and ordered by as the BIGINT it is."""
    import re
    out = re.sub(r"(?<!epoch_ms\()\bts\b", "epoch_ms(ts)", text)
    out = re.sub(r"(SELECT |GROUP BY |ORDER BY )epoch_ms\(ts\)(?=,|$| HAVING| ORDER)", r"\1ts", out)
    return _duck_text(out)


@settings(max_examples=examples(60), deadline=None)
@given(st.one_of(event_constants, st.sampled_from(["t", "d"])), event_constants,
       st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), st.integers(0, 2))
def test_the_event_time_column_compares_with_timestamps_and_dates_as_duckdb_compares_epoch_ms(x, y, op, seed):
    """ts (int64 milliseconds since the epoch) meets a TIMESTAMP or DATE constant or column as the
    instant it is, in both grammars and every comparison form, exactly (a constant with a part of a
    millisecond too), checked against DuckDB with the column as epoch_ms(ts)."""
    items = [f"ts {op} {x}", f"ts BETWEEN {x} AND {y}", f"ts NOT IN ({x}, {y})", f"{x} IS DISTINCT FROM ts",
             f"COALESCE({x}, ts)", f"CASE WHEN rid % 2 = 0 THEN ts ELSE {x} END", f"NULLIF(ts, {y})",
             f"CASE ts WHEN {x} THEN 1 WHEN {y} THEN 2 ELSE 3 END"]
    text = f"SELECT rid, {', '.join(items)} FROM s ORDER BY rid"
    _check(text, _as_epoch_ms(text), seed)
    for text in (f"SELECT COUNT(*) FROM s WHERE ts {op} {y}", f"SELECT COUNT(*) FROM s WHERE ts IN ({y}, {y})",
                 f"SELECT ts, COUNT(*) FROM s GROUP BY ts HAVING ts {op} {y} ORDER BY ts",
                 f"SELECT k, COUNT(*) FROM s GROUP BY k HAVING MAX(ts) {op} {y} ORDER BY k",
                 f"SELECT COUNT(*) FROM s WHERE ts {op} {x} OR ts BETWEEN {y} AND {x}",
                 f"SELECT k, MIN(ts) {op} {y} AS early FROM s GROUP BY k ORDER BY k"):
        duck = _as_epoch_ms(text).replace("ORDER BY k", "ORDER BY k NULLS LAST")
        _check(text, duck, seed)


def test_the_known_case_the_event_time_column_against_a_timestamp_constant():
    """The issue's example: `ts > TIMESTAMP '...'` compared milliseconds with microseconds (the
    expression grammar) or was refused (the first grammar); both now compare instants, as DuckDB
    compares epoch_ms(ts)."""
    for text in ("SELECT COUNT(*) FROM s WHERE ts > TIMESTAMP '1970-01-01 00:00:02'",
                 "SELECT COUNT(*) FROM s WHERE ts >= TIMESTAMP '1970-01-01 00:00:02.5004' AND rid >= 0",
                 "SELECT COUNT(*) FROM s WHERE ts < DATE '1970-01-02'",
                 "SELECT ts > TIMESTAMP '1970-01-01 00:00:02' AS late, COUNT(*) FROM s GROUP BY 1 ORDER BY 1",
                 "SELECT epoch_ms(ts) AS at, COUNT(*) FROM s GROUP BY 1 ORDER BY 1 LIMIT 3"):
        _check(text, _as_epoch_ms(text), 1)


@pytest.mark.parametrize("text, pos, reason", [
    ("SELECT COUNT(*) FROM s WHERE ts + 0 > TIMESTAMP '1970-01-01 00:00:02'", 32,
     "(ts + 0) is computed from the event-time column 'ts', a time in milliseconds"),
    ("SELECT rid > TIMESTAMP '1970-01-01 00:00:02' FROM s", 7,
     "a comparison of rid (BIGINT) with TIMESTAMP '1970-01-01 00:00:02' (TIMESTAMP)"),
    ("SELECT COALESCE(DATE '1970-01-02', rid * 2) FROM s", 39, "COALESCE of (rid * 2) (BIGINT) with DATE '1970-01-02'"),
])
def test_another_integer_against_a_timestamp_or_date_is_refused_naming_both_types(text, pos, reason):
    """Only the event-time column is known to hold milliseconds since the epoch: any other integer
    (an expression of it, another column) meeting a TIMESTAMP or DATE is refused, as DuckDB refuses
    BIGINT against TIMESTAMP, naming both types and the position."""
    s, con, _ = _fixture(0)
    with pytest.raises(QueryError) as err:
        run_plan(plan_query(parse_query(text), s))
    assert err.value.reason.startswith(reason) and err.value.position == pos, str(err.value)
    with pytest.raises(duckdb.Error):
        con.execute(text).fetchall()


def test_a_temporal_value_beyond_the_years_1_to_9999_is_refused_naming_its_field():
    from windowstore.server import convert
    from windowstore.v1 import windowstore_pb2 as pb

    q = pb.StructuredQuery(stream="s", items=[pb.SelectItem(aggregate=pb.Aggregate(func=pb.AGGREGATE_FUNCTION_COUNT))])
    q.where.add().predicates.add(column="t", op=">", values=[pb.Value(timestamp_us=2**62)])
    with pytest.raises(QueryError) as err:
        convert.query_from_pb(q)
    assert err.value.loc.field == "where[0].predicates[0].values[0]" and "timestamp_us" in err.value.reason
