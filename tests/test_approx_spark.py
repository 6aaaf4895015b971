"""The Spark batch reader answers the sketch aggregates and carries their error bounds (column
`_bounds`, JSON per row) as the SDK gives them."""
from __future__ import annotations

import json

import pytest

from windowstore.clients import Client
from windowstore.clients.spark import local_session
from windowstore.server.process import ServerProcess

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark():
    s = local_session("windowstore-approx-tests", cores=2)
    yield s
    s.stop()


def test_the_batch_reader_returns_sketch_answers_with_their_bounds(spark):
    with ServerProcess() as server, Client(server.target) as ws:
        ws.create_stream("a", {"ts": "int64", "src": "string", "bytes": "int64"}, subwindows=3, subwindow_ms=1000,
                         clock="manual", sketches={"bytes": "kll", "src": ["hll", ("frequent", 6)]})
        for b in range(3):
            ws.append("a", {"ts": list(range(100)), "src": [f"h{(i * 7 + b) % 30}" for i in range(100)],
                            "bytes": [(i * 13 + b) % 997 for i in range(100)]})
            ws.slide("a")
        for text in ["SELECT APPROX_QUANTILE(bytes, 0.5), APPROX_COUNT_DISTINCT(src), COUNT(*) FROM a",
                     "SELECT APPROX_TOP_K(src, 3) FROM a"]:
            expected = ws.query(text)
            got = spark.read.format("windowstore").option("target", server.target).option("query", text).load().collect()
            assert [tuple(r)[:len(expected.columns)] for r in got] == expected.rows
            for r, row in enumerate(got):
                cells = [{k: v for k, v in vars(b).items() if v is not None and k not in ("row", "column")}
                         | {"column": expected.columns[b.column]} for b in expected.bounds if b.row == r]
                assert json.loads(row["_bounds"]) == cells
        exact = spark.read.format("windowstore").option("target", server.target) \
            .option("query", "SELECT COUNT(*) FROM a").load().collect()
        assert exact[0]["_bounds"] is None
