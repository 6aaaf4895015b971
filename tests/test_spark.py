"""Spark integration on a real local SparkSession (local[2], UI off), against a real server."""
from __future__ import annotations

import json
import os
import shutil
import time

import pytest

pyspark = pytest.importorskip("pyspark")

from pyspark.sql import functions as F  # noqa: E402

from windowstore.clients import Client  # noqa: E402
from windowstore.clients.spark import WindowStoreWriter, local_session  # noqa: E402
from windowstore.server.process import ServerProcess  # noqa: E402

pytestmark = pytest.mark.spark
SCHEMA = {"ts": "int64", "src": "string", "bytes": "int64"}
DDL = "ts LONG, src STRING, bytes LONG"


@pytest.fixture(scope="module")
def spark():
    s = local_session("windowstore-tests", cores=2)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def server():
    with ServerProcess() as srv:
        yield srv


@pytest.fixture
def ws(server):
    with Client(server.target) as c:
        yield c


def rows(batch: int, n: int = 50) -> list[dict]:
    return [{"ts": batch * 1000 + i, "src": f"h{(i * 7 + batch) % 5}", "bytes": (i * 13 + batch) % 97} for i in range(n)]


def test_foreach_batch_writer_sends_each_batch_exactly_once(spark, ws, server):
    ws.create_stream("fb", SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual", group_by=["src"])
    df = spark.createDataFrame(rows(0, 300), DDL).repartition(3)
    writer = WindowStoreWriter(server.target, "fb", writer_id="job1", slide_per_batch=True)
    writer(df, 0)
    assert writer.last["accepted"] == 300 and writer.last["duplicate_partitions"] == 0 and writer.last["slide"] == 0
    writer(df, 0)  # Spark replays micro-batch 0 after a failure
    assert writer.last["duplicate_partitions"] == 3 and writer.last["slide"] == 0
    info = ws.describe_stream("fb")
    assert int(info["latest_slide"]) == 0
    assert ws.query("SELECT COUNT(*), SUM(bytes) FROM fb").rows == [(300, sum(r["bytes"] for r in rows(0, 300)))]


def _run_file_stream(spark, src_dir, ckpt, target, stream, slide=True):
    q = (spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).json(str(src_dir))
         .writeStream.format("windowstore").option("target", target).option("stream", stream)
         .option("writer_id", "sink1").option("slide_per_batch", str(slide).lower())
         .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()


def test_data_source_sink_is_exactly_once_across_a_forced_replay(spark, ws, server, tmp_path):
    ws.create_stream("sink", SCHEMA, subwindows=8, subwindow_ms=1000, clock="manual", group_by=["src"])
    src, ckpt = tmp_path / "in", tmp_path / "ckpt"
    src.mkdir()
    for b in range(3):
        (src / f"part{b}.json").write_text("\n".join(json.dumps(r) for r in rows(b)))
    _run_file_stream(spark, src, ckpt, server.target, "sink")
    assert int(ws.describe_stream("sink")["latest_slide"]) == 2       # one sub-window per micro-batch
    assert ws.query("SELECT COUNT(*) FROM sink").rows == [(150,)]
    # Force Spark to replay the last micro-batch: forget that it committed.
    (ckpt / "commits" / "2").unlink()
    shutil.rmtree(ckpt / "commits" / ".2.crc", ignore_errors=True)
    (ckpt / "commits" / ".2.crc").unlink(missing_ok=True)
    _run_file_stream(spark, src, ckpt, server.target, "sink")
    assert int(ws.describe_stream("sink")["latest_slide"]) == 2       # the replay did not slide again
    assert ws.query("SELECT COUNT(*) FROM sink").rows == [(150,)]     # nor append again
    dup = int(ws.stats("sink")["streams"][0]["duplicate_batches"])
    assert dup >= 1


def test_reader_returns_the_sdk_answer_with_metadata(spark, ws, server):
    ws.create_stream("rd", SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual", group_by=["src"])
    for b in range(3):
        ws.append("rd", {k: [r[k] for r in rows(b)] for k in SCHEMA})
        ws.slide("rd")
    text = "SELECT src, SUM(bytes) AS total, AVG(bytes), COUNT(*) FROM rd [RANGE 2 SUBWINDOWS] GROUP BY src ORDER BY 2 DESC"
    df = spark.read.format("windowstore").option("target", server.target).option("query", text).load()
    assert df.columns[:4] == ["src", "total", "avg(bytes)", "count(*)"] and "_staleness_ms" in df.columns
    got = df.collect()
    expected = ws.query(text)
    assert [tuple(r)[:4] for r in got] == expected.rows
    assert all(r["_slide"] == expected.slide == 2 and r["_policy"] == "ttu" for r in got)
    assert all(r["_window_end_ms"] >= r["_window_start_ms"] for r in got)


def test_store_answers_equal_spark_over_the_same_rows(spark, ws, server, tmp_path):
    ws.create_stream("det", SCHEMA, subwindows=3, subwindow_ms=1000, clock="manual", group_by=["src"])
    src, ckpt = tmp_path / "in", tmp_path / "ckpt"
    src.mkdir()
    files = []
    t0 = time.time() - 100
    for b in range(5):
        f = src / f"part{b}.json"
        f.write_text("\n".join(json.dumps(r) for r in rows(b, 40 + 10 * b)))
        os.utime(f, (t0 + b, t0 + b))  # the file source takes files in modification-time order
        files.append(str(f))
    _run_file_stream(spark, src, ckpt, server.target, "det")
    # the window holds the last 3 micro-batches; RANGE 2 the last 2
    for k in (2, 3):
        store = ws.query(f"SELECT src, SUM(bytes), COUNT(*), MAX(bytes) FROM det [RANGE {k} SUBWINDOWS] GROUP BY src")
        sp = (spark.read.schema(DDL).json(files[-k:]).groupBy("src")
              .agg(F.sum("bytes"), F.count("*"), F.max("bytes")).orderBy("src").collect())
        assert store.rows == [tuple(r) for r in sp]
