"""Temporal coalescing queries through the Spark batch reader (local[2], against a real server):
the answer equals the SDK's at the pinned slide and the DuckDB oracle; a listing of intervals is one
partition (runs cross sub-windows); a filter on a GROUP BY key goes into WHERE, others stay with Spark."""
from __future__ import annotations

import duckdb
import pytest

pyspark = pytest.importorskip("pyspark")

from pyspark.sql import functions as F  # noqa: E402

from test_temporal import oracle  # noqa: E402
from test_temporal_server import LISTED, LISTING, LONGEST, ONE_TIME, SCHEMA, batches, columns  # noqa: E402
from windowstore.clients import Client  # noqa: E402
from windowstore.clients.spark import local_session  # noqa: E402
from windowstore.server.process import ServerProcess  # noqa: E402

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark():
    s = local_session("windowstore-temporal-tests", cores=2, max_failures=3)
    yield s
    s.stop()


def test_batch_reader_answers_temporal_queries_as_the_sdk_and_the_oracle(spark):
    from windowstore.clients.spark.layout import _answer_layout
    from windowstore.clients.spark.pushdown import _PushdownReader

    con = duckdb.connect()
    with ServerProcess() as srv, Client(srv.target, timeout=30) as ws:
        ws.create_stream("readings", SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual")
        held = []
        for batch in batches(3):
            ws.append("readings", columns(batch))
            ws.slide("readings")
            held.append(batch)
        window = [r for b in held[-3:] for r in b]
        for text, sql in ((ONE_TIME, LONGEST), (LISTING, LISTED)):
            opts = {"target": srv.target, "query": text}
            df = spark.read.format("windowstore").options(**opts).load()
            got = [tuple(r)[:len(ws.query(text).columns)] for r in df.collect()]
            assert sorted(got) == sorted(oracle(con, window, sql)) == sorted(ws.query(text).rows)
            assert {r["_slide"] for r in df.collect()} == {len(held) - 1}
        opts = {"target": srv.target, "query": LISTING}
        reader = _PushdownReader(opts, _answer_layout(opts))
        assert len(reader.partitions()) == 1
        filtered = spark.read.format("windowstore").options(**opts, filter_pushdown="true").load() \
            .where((F.col("sensor") == "s1") & (F.col("temp") > 20))
        plan = filtered._jdf.queryExecution().optimizedPlan().toString()
        assert "temp" in plan and "s1" not in plan  # the key went to the store; temp > 20 stays with Spark
        want = [r for r in oracle(con, window, LISTED) if r[0] == "s1" and r[1] > 20]
        assert sorted(tuple(r)[:4] for r in filtered.collect()) == sorted(want)
