"""Queries with expressions on a partitioned stream (clients/expr_merge.py), on two servers: the
partitions compute the groups' partial aggregates (WHERE, GROUP BY keys and the expressions inside
aggregates pushed down), the client merges them and evaluates the select items, HAVING, ORDER BY
and LIMIT; each answer equals DuckDB's over the union of the partitions' rows of the reported slide.
What has no exact merge is refused by name."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from cluster_fixtures import duck, seal_batches

from windowstore.clients import Client, InvalidArgument

pytestmark = pytest.mark.slow  # servers in subprocesses

SCHEMA = {"ts": "int64", "src": "string", "port": "int64", "bytes": "int64", "lat": "float64"}
N = 3

QUERIES = [
    "SELECT SUM(bytes) / COUNT(*) AS mean, SUM(bytes) * 8 AS bits, MAX(lat) - MIN(lat) AS spread FROM e",
    "SELECT src, SUM(bytes * 2) AS b2, COUNT(*) FILTER (WHERE port = 80) AS web, AVG(bytes) AS mean FROM e "
    "WHERE port != 22 GROUP BY src HAVING SUM(bytes) > 100 ORDER BY b2 DESC, src LIMIT 5",
    "SELECT port % 7 AS bucket, MAX(bytes) - MIN(bytes) AS span, COUNT(bytes) FROM e GROUP BY port % 7 ORDER BY 1",
    "SELECT upper(src) AS host, COUNT(*) AS n FROM e GROUP BY upper(src) ORDER BY n DESC, host LIMIT 3",
    "SELECT SUM(bytes) FILTER (WHERE lat > 50) / SUM(bytes) AS share FROM e WHERE src IS NOT NULL",
]


def batch(rng, n: int, ts0: int) -> dict:
    src = [None if i % 23 == 0 else f"h{i}" for i in rng.integers(0, 40, n)]
    return {"ts": list(range(ts0, ts0 + n)), "src": src, "port": rng.choice([22, 80, 443, 8080, 53], n).tolist(),
            "bytes": [None if i % 31 == 0 else int(v) for i, v in enumerate(rng.integers(0, 1500, n))],
            "lat": rng.normal(50, 10, n).tolist()}


def same(got: list[tuple], want: list[tuple]) -> None:
    assert len(got) == len(want), (got, want)
    for g, w in zip(got, want):
        assert len(g) == len(w), (g, w)
        for x, y in zip(g, w):
            if isinstance(x, float) or isinstance(y, float):
                assert x == pytest.approx(float(y), rel=1e-9), (g, w)
            else:
                assert x == y, (g, w)


def test_expressions_over_partial_aggregates_equal_duckdb_over_the_union(two_servers):
    rng = np.random.default_rng(7)
    with Client(two_servers, timeout=60) as ws:
        ws.create_stream("e", SCHEMA, subwindows=N, subwindow_ms=1000, clock="manual", partitions=3,
                         partition_by=["src"])
        sealed = seal_batches(ws, "e", [batch(rng, 400, b * 400) for b in range(4)])
        for q in QUERIES:
            a = ws.query(q)
            w = pa.concat_tables([sealed[j] for j in range(a.slide - N + 1, a.slide + 1)])
            sql = q.replace("ORDER BY b2 DESC, src", "ORDER BY b2 DESC, src NULLS LAST")
            same(a.rows, duck(w, sql, "e"))
            assert a.slide == 3 and len(a.partition_queries) == 3
        # AS OF an older slide, of 2 sub-windows
        a = ws.query("SELECT SUM(bytes) * 8 AS bits FROM e [RANGE 2 SUBWINDOWS]", as_of_slide=2)
        same(a.rows, duck(pa.concat_tables([sealed[1], sealed[2]]), "SELECT SUM(bytes) * 8 AS bits FROM e", "e"))
        assert a.columns == ["bits"]
        for q, what in (("SELECT COUNT(DISTINCT port) + 1 FROM e", "COUNT\\(DISTINCT"),
                        ("SELECT QUANTILE(bytes * 2, 0.5) FROM e", "QUANTILE"),
                        ("SELECT bytes * 8 FROM e", "no aggregate")):
            with pytest.raises(InvalidArgument, match=what):
                ws.query(q)
        ws.drop_stream("e")
