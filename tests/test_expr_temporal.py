"""Timestamp and date arithmetic in expressions (store/expr_temporal.py) against DuckDB as the
oracle: timestamp +/- INTERVAL, INTERVAL + timestamp, date +/- INTERVAL (a timestamp), date - date
(days), in select items, WHERE, GROUP BY and aggregates, over random rows with NULLs; DuckDB's
timestamps and dates are compared as the microseconds and days the store's columns hold. Then the
refusals (timestamp - timestamp, other operators, date against timestamp), named by position."""
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
    ("SELECT COUNT(*) FROM s WHERE d < t", 31, "a comparison mixes date and timestamp values"),
    ("SELECT COUNT(*) FROM s WHERE d - INTERVAL '1 h' < d2", 48, "a comparison mixes date and timestamp values"),
    ("SELECT t + INTERVAL '4611686018427387904 ms' FROM s", 9, "timestamp out of range"),
])
def test_what_is_refused_is_named_with_its_position(text, pos, reason):
    s, _, _ = _fixture(0)
    with pytest.raises(QueryError) as err:
        run_plan(plan_query(parse_query(text), s))
    assert err.value.reason.startswith(reason) and err.value.position == pos, str(err.value)
