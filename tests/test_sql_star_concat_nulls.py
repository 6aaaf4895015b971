"""`SELECT *`, the `||` operator and `NULLS FIRST/LAST`: SQL a dashboard user writes without
thinking (issue 32), answered as DuckDB answers it — in the text, in the structured form
(query_from_pb(query_to_pb(q)) == q, the same answer) and through the SDK's expression builder."""
from __future__ import annotations

from random import Random

import duckdb
import pytest

from windowstore.clients import expressions as X
from windowstore.server.convert import query_from_pb, query_to_pb
from windowstore.store import QueryError, Stream, WindowSpec, parse_query, plan_query, run_plan
from windowstore.store.parser import parse_statement, to_text

SCHEMA = {"ts": "int64", "src": "string", "dst": "string", "port": "int64", "bytes": "int64"}


def _fixture(seed: int):
    rng = Random(seed)
    s = Stream("s", SCHEMA, WindowSpec(subwindows=3, subwindow_ms=1000, clock="manual"), 0)
    rows = []
    for slide in range(3):
        batch = [{"ts": slide * 1000 + rng.randrange(1000),
                  "src": rng.choice(["a", "b", "c", None]), "dst": rng.choice(["x", "y", None]),
                  "port": rng.choice([22, 80, 443, None]), "bytes": rng.choice([None, rng.randrange(40, 1500)])}
                 for _ in range(rng.randrange(1, 15))]
        s.append({c: [r[c] for r in batch] for c in SCHEMA})
        s.window.slide((slide + 1) * 1000)
        rows += batch
    con = duckdb.connect()
    con.execute("CREATE TABLE s (ts BIGINT, src VARCHAR, dst VARCHAR, port BIGINT, bytes BIGINT)")
    con.executemany("INSERT INTO s VALUES (?, ?, ?, ?, ?)", [tuple(r[c] for c in SCHEMA) for r in rows])
    return s, con


QUERIES = [
    "SELECT * FROM s ORDER BY ts",
    "SELECT *, bytes * 8 AS bits FROM s WHERE port = 443 ORDER BY ts DESC LIMIT 3",
    "SELECT DISTINCT * FROM (SELECT src, dst FROM s) ORDER BY src, dst",
    "SELECT * FROM (SELECT src, SUM(bytes) AS total FROM s GROUP BY src) WHERE total > 1000 ORDER BY total DESC",
    "SELECT ts, src || '->' || dst AS link FROM s ORDER BY ts",
    "SELECT src || ':' || port + 1 AS k, COUNT(*) AS n FROM s GROUP BY k ORDER BY k",
    "SELECT ts FROM s WHERE src || dst = 'ax' ORDER BY ts",
    "SELECT ts, concat(src, dst) AS c, src || dst AS sd FROM s ORDER BY ts",
    "SELECT ts, bytes FROM s ORDER BY bytes NULLS FIRST, ts",
    "SELECT ts, bytes FROM s ORDER BY bytes DESC NULLS FIRST, ts",
    "SELECT ts, bytes FROM s ORDER BY bytes DESC NULLS LAST, ts",
    "SELECT ts, bytes FROM s ORDER BY bytes ASC NULLS LAST, ts DESC",
    "SELECT src, SUM(bytes) AS b FROM s GROUP BY src ORDER BY b DESC NULLS FIRST, src NULLS FIRST",
    "SELECT DISTINCT src FROM s ORDER BY src NULLS FIRST",
]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("text", QUERIES)
def test_answers_equal_duckdb_in_text_and_structured_form(text, seed):
    s, con = _fixture(seed)
    r = con.execute(text)
    want, columns = [tuple(x) for x in r.fetchall()], [d[0] for d in r.description]
    q = parse_query(text)
    assert parse_statement(to_text(q)) == q, to_text(q)
    structured = query_from_pb(query_to_pb(q))
    assert structured == q
    for form in (q, structured):
        got = run_plan(plan_query(form, s))
        assert [tuple(x) for x in got.rows] == want, f"{text}\n got {got.rows}\nwant {want}"
        assert list(got.columns) == columns


def test_star_with_an_aggregate_or_a_group_is_refused_by_column():
    s, _ = _fixture(0)
    for text, column in [("SELECT * FROM s GROUP BY src", "ts"), ("SELECT COUNT(*), * FROM s", "ts")]:
        with pytest.raises(QueryError, match=f"column '{column}' must be aggregated"):
            run_plan(plan_query(parse_query(text), s))


def test_the_sdk_builds_star_concat_and_nulls_first():
    s, con = _fixture(1)
    msg = X.expr_query("s", [X.star(), X.op("||", X.col("src"), X.col("dst")).alias("link")],
                       order_by=[X.col("bytes").desc(nulls_first=True), X.col("ts").asc()])
    got = run_plan(plan_query(query_from_pb(msg), s))
    want = con.execute("SELECT *, src || dst AS link FROM s ORDER BY bytes DESC NULLS FIRST, ts").fetchall()
    assert [tuple(r) for r in got.rows] == [tuple(r) for r in want]
    assert list(got.columns) == list(SCHEMA) + ["link"]
