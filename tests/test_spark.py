"""Spark integration on a real local SparkSession (local[2], UI off), against a real server."""
from __future__ import annotations

import json
import os
import time
from decimal import Decimal
from decimal import Decimal as D

import pyarrow as pa
import pytest

pyspark = pytest.importorskip("pyspark")

from pyspark.sql import functions as F  # noqa: E402

from windowstore.clients import Client, FailedPrecondition  # noqa: E402
from windowstore.clients.spark import WindowStoreWriter, local_session  # noqa: E402
from windowstore.server.process import ServerProcess  # noqa: E402
from conftest import wait_for  # noqa: E402

pytestmark = pytest.mark.spark
SCHEMA = {"ts": "int64", "src": "string", "bytes": "int64"}
DDL = "ts LONG, src STRING, bytes LONG"


@pytest.fixture(scope="module")
def spark():
    # local[2,3]: a failed task is retried, as on a cluster; small Arrow batches so a task streams
    # its rows to the store in several chunks
    s = local_session("windowstore-tests", cores=2, max_failures=3,
                      spark__sql__execution__arrow__maxRecordsPerBatch="8")
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
    return [{"ts": batch * 1_000_000 + i, "src": f"h{(i * 7 + batch) % 5}", "bytes": (i * 13 + batch) % 97} for i in range(n)]


def test_foreach_batch_writer_sends_each_batch_exactly_once(spark, ws, server):
    ws.create_stream("fb", SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual", group_by=["src"])
    df = spark.createDataFrame(rows(0, 300), DDL).repartition(3)
    writer = WindowStoreWriter(server.target, "fb", writer_id="job1", slide_per_batch=True)
    writer(df, 0)
    assert (writer.last["accepted"], writer.last["duplicate"], writer.last["latest_slide"]) == (300, False, 0)
    writer(df.repartition(5), 0)  # Spark replays micro-batch 0 after a failure, partitioned otherwise
    assert (writer.last["duplicate"], writer.last["latest_slide"]) == (True, 0)
    assert int(ws.describe_stream("fb")["latest_slide"]) == 0
    assert ws.query("SELECT COUNT(*), SUM(bytes) FROM fb").rows == [(300, sum(r["bytes"] for r in rows(0, 300)))]
    with pytest.raises(FailedPrecondition, match="other rows"):  # a replay with other rows is refused
        writer(df.limit(299), 0)
    assert ws.query("SELECT COUNT(*) FROM fb").rows == [(300,)]


def _run_file_stream(spark, src_dir, ckpt, target, stream, slide=True, partitions=None, transform=None,
                     expect_failure=False, max_rows=4):
    df = spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).json(str(src_dir))
    if partitions:
        df = df.repartition(partitions)
    if transform:
        df = transform(df)
    q = (df.writeStream.format("windowstore").option("target", target).option("stream", stream)
         .option("slide_per_batch", str(slide).lower()).option("max_rows_per_append", str(max_rows))
         .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
    q.awaitTermination(180)
    if not expect_failure:
        assert q.exception() is None, q.exception()
    return q


def _files(src, batches, n=50):
    src.mkdir(exist_ok=True)
    t0 = time.time() - 100
    for b in batches:
        f = src / f"part{b}.json"
        f.write_text("\n".join(json.dumps(r) for r in rows(b, n)))
        os.utime(f, (t0 + b, t0 + b))  # the file source takes files in modification-time order


def _forget_commit(ckpt, batch):
    """What a crash between the store's commit and Spark's own commit log leaves."""
    (ckpt / "commits" / str(batch)).unlink()
    (ckpt / "commits" / f".{batch}.crc").unlink(missing_ok=True)


def _counts(ws, stream):
    """Rows per (ts): every row of rows() has a distinct ts."""
    return dict(ws.query(f"SELECT ts, COUNT(*) FROM {stream} GROUP BY ts").rows)


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
    _forget_commit(ckpt, 2)
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


def test_reader_takes_a_query_with_expressions(spark, ws, server):
    """A query with expressions (issue 32) reads as the SDK answers it, its columns typed from the
    expressions; Spark computes the same from the same rows."""
    ws.create_stream("rx", SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual", group_by=["src"])
    for b in range(3):
        ws.append("rx", {k: [r[k] for r in rows(b)] for k in SCHEMA})
        ws.slide("rx")
    text = ("SELECT upper(src) AS u, SUM(bytes) * 8 AS bits, SUM(bytes) / COUNT(*) AS mean, "
            "CASE WHEN MAX(bytes) > 90 THEN 'big' ELSE 'small' END AS kind FROM rx GROUP BY src ORDER BY u")
    df = spark.read.format("windowstore").option("target", server.target).option("query", text).load()
    assert df.columns[:4] == ["u", "bits", "mean", "kind"]
    got = [tuple(r)[:4] for r in df.collect()]
    assert got == [tuple(r) for r in ws.query(text).rows]
    src = spark.createDataFrame([r for b in range(3) for r in rows(b)])
    want = (src.groupBy("src").agg((F.sum("bytes") * 8).alias("bits"), (F.sum("bytes") / F.count("*")).alias("mean"),
                                   F.when(F.max("bytes") > 90, "big").otherwise("small").alias("kind"))
            .select(F.upper("src").alias("u"), "bits", "mean", "kind").orderBy("u").collect())
    assert got == [(r["u"], r["bits"], r["mean"], r["kind"]) for r in want]


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


# -- exactly once across restarts, retries and other partitionings -----------------------------------
def test_a_new_checkpoint_is_a_new_query_and_its_rows_land(spark, ws, server, tmp_path):
    ws.create_stream("nc", SCHEMA, subwindows=20, subwindow_ms=1000, clock="manual")
    src = tmp_path / "in"
    _files(src, range(2))
    _run_file_stream(spark, src, tmp_path / "ckpt1", server.target, "nc")
    _run_file_stream(spark, src, tmp_path / "ckpt2", server.target, "nc")  # the same job, started afresh
    assert set(_counts(ws, "nc").values()) == {2}  # each query delivered every row once
    _run_file_stream(spark, src, tmp_path / "ckpt2", server.target, "nc")  # a restart from its checkpoint
    assert set(_counts(ws, "nc").values()) == {2} and len(_counts(ws, "nc")) == 100


def test_a_replay_with_another_partitioning_lands_once(spark, ws, server, tmp_path):
    ws.create_stream("rp", SCHEMA, subwindows=20, subwindow_ms=1000, clock="manual")
    src, ckpt = tmp_path / "in", tmp_path / "ckpt"
    _files(src, range(3))
    _run_file_stream(spark, src, ckpt, server.target, "rp", partitions=2)
    _forget_commit(ckpt, 2)
    _run_file_stream(spark, src, ckpt, server.target, "rp", partitions=3)
    counts = _counts(ws, "rp")
    assert len(counts) == 150 and set(counts.values()) == {1}
    assert int(ws.describe_stream("rp")["latest_slide"]) == 2
    assert int(ws.stats("rp")["streams"][0]["duplicate_batches"]) >= 1


def _fail_first_attempt_late(target, stream, batch_rows):
    """A transform: partition 0's first attempt passes 1,600 rows on (more than Spark buffers on the
    way to the sink), waits until the sink has staged some of them, then dies. The server counts
    staged rows per stream: beyond what the other partition can hold (the batch's rows less those
    this attempt passed on), some are this attempt's."""
    def transform(df):
        def flaky(batches):
            from pyspark import TaskContext

            ctx = TaskContext.get()
            passed = 0
            for i, b in enumerate(batches):
                yield b
                passed += b.num_rows
                if ctx.partitionId() == 0 and ctx.attemptNumber() == 0 and i >= 200:
                    with Client(target) as c:   # (the test's wait_for is not importable on an executor)
                        deadline = time.monotonic() + 60
                        while (int(c.stats(stream)["streams"][0]["staged_rows"]) <= batch_rows - passed
                               and time.monotonic() < deadline):
                            time.sleep(0.05)
                    raise RuntimeError("the task dies after the sink staged rows")
        return df.mapInArrow(flaky, df.schema)
    return transform


def test_a_task_that_fails_after_staging_is_retried_and_lands_once(spark, ws, server, tmp_path):
    ws.create_stream("tf", SCHEMA, subwindows=20, subwindow_ms=1000, clock="manual")
    src = tmp_path / "in"
    _files(src, range(2), n=4000)
    _run_file_stream(spark, src, tmp_path / "ckpt", server.target, "tf", partitions=2,
                     transform=_fail_first_attempt_late(server.target, "tf", 4000), max_rows=500)
    counts = _counts(ws, "tf")
    assert len(counts) == 8000 and set(counts.values()) == {1}
    st = ws.stats("tf")["streams"][0]
    assert int(st["discarded_rows"]) > 0 and int(st["staged_rows"]) == 0  # the dead attempt's rows never landed


def test_rows_staged_by_a_zombie_attempt_never_land(spark, ws, server, tmp_path):
    """A speculative or zombie task attempt of a batch stages rows: only the attempts Spark commits land."""
    ws.create_stream("zb", SCHEMA, subwindows=20, subwindow_ms=1000, clock="manual")
    src, ckpt = tmp_path / "in", tmp_path / "ckpt"
    _files(src, range(2))
    q = _run_file_stream(spark, src, ckpt, server.target, "zb")
    writer = f"spark-query:{q.id}"
    zombie = {"ts": [10**9], "src": ["zombie"], "bytes": [1]}
    ws.stage("zb", zombie, writer, 2, "p0-t999999")   # for the next micro-batch, before it runs
    _files(src, [2])
    _run_file_stream(spark, src, ckpt, server.target, "zb")  # restarted from its checkpoint: batch 2
    counts = _counts(ws, "zb")
    assert len(counts) == 150 and set(counts.values()) == {1} and 10**9 not in counts


def test_a_server_restart_between_batches_loses_and_repeats_nothing(spark, tmp_path):
    data, src, ckpt = tmp_path / "data", tmp_path / "in", tmp_path / "ckpt"
    srv = ServerProcess(data_dir=str(data))
    with Client(srv.target) as c:
        c.create_stream("sr", SCHEMA, subwindows=20, subwindow_ms=1000, clock="manual")
    _files(src, range(2))
    _run_file_stream(spark, src, ckpt, srv.target, "sr")
    srv.proc.kill()
    srv.proc.wait()
    srv = ServerProcess(data_dir=str(data))  # kill -9, started again (on another port)
    try:
        _files(src, [2, 3])
        _forget_commit(ckpt, 1)  # and Spark replays its last batch too
        _run_file_stream(spark, src, ckpt, srv.target, "sr")
        with Client(srv.target) as c:
            counts = _counts(c, "sr")
            assert len(counts) == 200 and set(counts.values()) == {1}
            assert int(c.describe_stream("sr")["latest_slide"]) == 3
    finally:
        srv.stop()


def test_batch_writer_and_strict_options(spark, ws, server):
    ws.create_stream("bw", SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual")
    df = spark.createDataFrame(rows(0, 40), DDL).repartition(3)
    opts = {"target": server.target, "stream": "bw", "writer_id": "nightly", "batch_id": "7", "slide_per_batch": "true"}
    df.write.format("windowstore").options(**opts).mode("append").save()
    df.write.format("windowstore").options(**opts).mode("append").save()  # the same job again: a no-op
    assert ws.query("SELECT COUNT(*) FROM bw").rows == [(40,)]
    with pytest.raises(Exception, match="unknown windowstore option 'slide_per_bach'.*valid options"):
        df.write.format("windowstore").options(target=server.target, stream="bw", slide_per_bach="true") \
            .mode("append").save()
    with pytest.raises(Exception, match="slide_per_batch' must be true or false"):
        df.write.format("windowstore").options(target=server.target, stream="bw", slide_per_batch="yes") \
            .mode("append").save()


def _read_stream_to_parquet(spark, target, text, ckpt, out):
    """Run the streaming reader of `text` once (availableNow) into parquet files at `out`."""
    df = spark.readStream.format("windowstore").option("target", target).option("query", text).load()
    q = (df.writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ckpt))
         .trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()


def test_streaming_reader_delivers_periodic_answers_once_across_restarts(spark, ws, server, tmp_path):
    ws.create_stream("sr2", SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual", group_by=["src"])
    text = "SELECT src, SUM(bytes) AS total FROM sr2 [RANGE 2 SUBWINDOWS SLIDE 1 SUBWINDOWS] GROUP BY src"
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"

    def run():
        _read_stream_to_parquet(spark, server.target, text, ckpt, out)

    def feed(batches):
        for b in batches:
            ws.append("sr2", {k: [r[k] for r in rows(b, 20)] for k in SCHEMA})
            ws.slide("sr2")
        def caught_up():
            qs = ws.list_queries("sr2")
            return qs and qs[0]["last_slide"] == int(ws.describe_stream("sr2")["latest_slide"])
        wait_for(caught_up, "the periodic query to answer the last slide", timeout=20)

    run()  # registers the periodic query (its id goes into the checkpoint with the offset)
    assert len(ws.list_queries("sr2")) == 1  # once, although Spark asks for the initial offset more than once
    feed(range(3))
    run()
    feed(range(3, 5))
    run()  # restarted from the checkpoint: only the answers after what it delivered
    got = spark.read.parquet(str(out))
    slides = sorted(r["_slide"] for r in got.select("_slide").distinct().collect())
    assert slides == [0, 1, 2, 3, 4]
    per_slide = got.groupBy("_slide").count().collect()
    assert all(r["count"] == 5 for r in per_slide)  # 5 sources per answer, each answer once
    last = {r["src"]: r["total"] for r in got.where(F.col("_slide") == 4).collect()}
    expected = dict(ws.query("SELECT src, SUM(bytes) FROM sr2 [RANGE 2 SUBWINDOWS] GROUP BY src").rows)
    assert last == expected


def test_streaming_reader_delivers_a_periodic_join_and_the_batch_reader_reads_one_once(spark, ws, server, tmp_path):
    """A periodic join read as a stream: one answer per slide of the stream that has SLIDE, each equal
    to SQLite's join of the rows in both windows at that slide."""
    import sqlite3

    for name in ("ja", "jb"):
        ws.create_stream(name, {"ts": "int64", "k": "string", "v": "int64"}, subwindows=4, subwindow_ms=1000,
                         clock="manual")
    text = ("SELECT a.k, COUNT(*) AS n, SUM(b.v) AS total FROM ja a [RANGE 2 SUBWINDOWS SLIDE 1 SUBWINDOWS] "
            "JOIN jb b [RANGE 2 SUBWINDOWS] ON a.k = b.k GROUP BY a.k")
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"

    def run():
        _read_stream_to_parquet(spark, server.target, text, ckpt, out)

    held = {"ja": [], "jb": []}  # per slide, the rows each stream sealed
    run()  # registers the periodic join
    for i in range(4):
        for name, n in (("jb", 3), ("ja", 2)):  # b slides first: a's slide then answers over both
            batch = [(i * 10 + j, f"k{(i + j) % 3}", i * 100 + j) for j in range(n)]
            ws.append(name, {"ts": [r[0] for r in batch], "k": [r[1] for r in batch], "v": [r[2] for r in batch]})
            ws.slide(name)
            held[name].append(batch)
    wait_for(lambda: any(q["last_slide"] == 3 for q in ws.list_queries("ja")), "the periodic join's answer of slide 3",
             timeout=20)
    run()
    got = spark.read.parquet(str(out)).collect()
    assert got and list(got[0].asDict())[:3] == ["a.k", "n", "total"]
    assert sorted({r["_slide"] for r in got}) == [0, 1, 2, 3]
    for slide in range(4):
        db = sqlite3.connect(":memory:")
        for name in held:
            db.execute(f"CREATE TABLE {name} (ts INTEGER, k TEXT, v INTEGER)")
            db.executemany(f"INSERT INTO {name} VALUES (?, ?, ?)",
                           [r for b in held[name][max(0, slide - 1):slide + 1] for r in b])
        want = db.execute("SELECT a.k, COUNT(*), SUM(b.v) FROM ja a JOIN jb b ON a.k = b.k GROUP BY a.k").fetchall()
        assert sorted((r[0], r["n"], int(r["total"])) for r in got if r["_slide"] == slide) == sorted(want)
    # the batch reader runs a one-time join once, on the driver: the answer at slide 3
    batch = spark.read.format("windowstore").option("target", server.target).option(
        "query", text.replace(" SLIDE 1 SUBWINDOWS", "")).load().collect()
    assert {r["_slide"] for r in batch} == {3}
    assert sorted((r["a.k"], r["n"], int(r["total"])) for r in batch) == sorted(
        (r["a.k"], r["n"], int(r["total"])) for r in got if r["_slide"] == 3)


def test_booleans_timestamps_dates_decimals_and_nulls_both_ways(spark, ws, server):
    # issue 11: Spark's BooleanType, TimestampType, DateType and DecimalType(12,2), with nulls, land
    # through the batch writer and come back through the reader typed so
    import datetime as dt
    from decimal import Decimal as D

    from pyspark.sql.types import (BooleanType, DateType, DecimalType, LongType, StructField, StructType,
                                   TimestampType)

    ws.create_stream("ty", {"ts": "int64", "ok": "boolean", "at": "timestamp", "day": "date", "price": "decimal(12,2)"},
                     subwindows=2, subwindow_ms=1000, clock="manual")
    utc = dt.timezone.utc
    data = [(1, True, dt.datetime(2026, 1, 1, 12, 0, 0, 5, tzinfo=utc), dt.date(2026, 1, 1), D("9.99")),
            (2, None, None, None, None),
            (3, False, dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=utc), dt.date(1969, 12, 31), D("-0.01"))]
    schema = StructType([StructField("ts", LongType()), StructField("ok", BooleanType()), StructField("at", TimestampType()),
                         StructField("day", DateType()), StructField("price", DecimalType(12, 2))])
    df = spark.createDataFrame(data, schema).repartition(2)
    df.write.format("windowstore").options(target=server.target, stream="ty", writer_id="types", batch_id="1",
                                           slide_per_batch="true").mode("append").save()
    text = ("SELECT COUNT(*) AS n, COUNT(ok) AS k, MIN(ok) AS lo, MAX(at) AS hi, MIN(day) AS first, SUM(price) AS total "
            "FROM ty")
    expected = ws.query(text)
    assert expected.rows == [(3, 2, False, 1_767_268_800_000_005, -1, D("9.98"))]
    got = spark.read.format("windowstore").option("target", server.target).option("query", text).load()
    fields = {f.name: f.dataType for f in got.schema.fields}
    assert (fields["lo"], fields["hi"], fields["first"], fields["total"]) == \
        (BooleanType(), TimestampType(), DateType(), DecimalType(38, 2))
    row = got.collect()[0]
    assert (row["n"], row["k"], row["lo"], row["first"], row["total"]) == (3, 2, False, dt.date(1969, 12, 31), D("9.98"))
    assert row["hi"].astimezone(utc) == dt.datetime(2026, 1, 1, 12, 0, 0, 5, tzinfo=utc)


# -- typed columns and NULLs through the streaming writers and reader (issue 11) --------------------------
def _typed():
    import datetime as dt
    from decimal import Decimal as D

    from pyspark.sql.types import (BooleanType, DateType, DecimalType, LongType, StringType, StructField, StructType,
                                   TimestampType)

    utc = dt.timezone.utc
    schema = StructType([StructField("ts", LongType()), StructField("ok", BooleanType()),
                         StructField("at", TimestampType()), StructField("day", DateType()),
                         StructField("price", DecimalType(12, 2)), StructField("src", StringType())])

    def batch(b: int) -> list[tuple]:
        return [(b * 10 + 1, True, dt.datetime(2026, 1, 1, 12, 0, b, 5, tzinfo=utc), dt.date(2026, 1, 1 + b),
                 D("9.99") + b, "a"),
                (b * 10 + 2, None, None, None, None, None),
                (b * 10 + 3, False, dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=utc), dt.date(1969, 12, 31),
                 D("-0.01"), "b" if b % 2 else "a")]
    return schema, batch


TYPED = {"ts": "int64", "ok": "boolean", "at": "timestamp", "day": "date", "price": "decimal(12,2)", "src": "string"}
TYPED_AGGS = "COUNT(*) AS n, COUNT(ok) AS k, MIN(ok) AS lo, MAX(at) AS hi, MIN(day) AS first, SUM(price) AS total"


def _spark_typed_aggs(df):
    """The same aggregates computed by Spark itself (the independent reference)."""
    return df.groupBy("src").agg(F.count("*").alias("n"), F.count("ok").alias("k"), F.min("ok").alias("lo"),
                                 F.max("at").alias("hi"), F.min("day").alias("first"), F.sum("price").alias("total"))


def _rows_by_src(rows) -> dict:
    return {r["src"]: tuple(r[c] for c in ("n", "k", "lo", "hi", "first", "total")) for r in rows}


def test_streaming_writers_and_reader_carry_typed_columns_and_nulls(spark, ws, server, tmp_path):
    schema, batch = _typed()
    ws.create_stream("tys", TYPED, subwindows=8, subwindow_ms=1000, clock="manual", group_by=["src"])
    text = f"SELECT src, {TYPED_AGGS} FROM tys [RANGE 2 SUBWINDOWS SLIDE 1 SUBWINDOWS] GROUP BY src"
    ckpt_r, out = tmp_path / "ckpt_r", tmp_path / "out"

    def read_answers():
        df = spark.readStream.format("windowstore").option("target", server.target).option("query", text).load()
        q = (df.writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ckpt_r))
             .trigger(availableNow=True).start())
        q.awaitTermination(120)
        assert q.exception() is None, q.exception()

    read_answers()  # registers the periodic query
    # batches 0 and 1 through the data source sink, batch 2 through the foreachBatch writer
    src = tmp_path / "in"
    for b in range(2):
        spark.createDataFrame(batch(b), schema).coalesce(1).write.parquet(str(src / f"b{b}"))
    df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).option("recursiveFileLookup", "true") \
        .parquet(str(src))
    q = (df.writeStream.format("windowstore").option("target", server.target).option("stream", "tys")
         .option("slide_per_batch", "true").option("checkpointLocation", str(tmp_path / "ckpt_w"))
         .trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    fb = WindowStoreWriter(server.target, "tys", writer_id="typed-fb", slide_per_batch=True)
    fb(spark.createDataFrame(batch(2), schema).repartition(2), 2)
    assert fb.last["accepted"] == 3 and int(ws.describe_stream("tys")["latest_slide"]) == 2
    # every value landed as written (NULLs included)
    stored = dict((r[0], r[1:]) for r in ws.query(
        "SELECT ts, MIN(ok), MIN(at), MIN(day), MIN(price), MIN(src) FROM tys GROUP BY ts").rows)
    assert stored[12] == (None, None, None, None, None)
    assert stored[21] == (True, 1_767_268_802_000_005, 20_456, Decimal("11.99"), "a")
    assert stored[13] == (False, -1_000_000, -1, Decimal("-0.01"), "b")
    wait_for(lambda: ws.list_queries("tys") and ws.list_queries("tys")[0]["last_slide"] == 2,
             "the periodic query to answer the last slide", timeout=20)
    read_answers()
    got = spark.read.parquet(str(out))
    fields = {f.name: f.dataType for f in got.schema.fields}
    assert [fields[c] for c in ("lo", "hi", "first", "total")] == \
        [f.dataType for f in schema.fields[1:4]] + [pyspark.sql.types.DecimalType(38, 2)]
    assert sorted(r["_slide"] for r in got.select("_slide").distinct().collect()) == [0, 1, 2]
    for k in (0, 1, 2):  # each answer equals Spark's own aggregates over the last 2 batches
        reference = spark.createDataFrame([r for b in range(max(0, k - 1), k + 1) for r in batch(b)], schema)
        assert _rows_by_src(got.where(F.col("_slide") == k).collect()) == \
            _rows_by_src(_spark_typed_aggs(reference).collect())


def test_a_schema_mismatch_is_reported_when_the_write_starts_naming_the_columns(spark, ws, server, tmp_path):
    ws.create_stream("mm", {"ts": "int64", "src": "string", "bytes": "int64", "price": "decimal(6,2)"},
                     subwindows=4, subwindow_ms=1000, clock="manual")
    df = spark.createDataFrame([(1, 2, "x", 3.5)], "ts LONG, src LONG, extra STRING, price DOUBLE")
    expected = (r"does not fit windowstore stream 'mm': missing columns: bytes; extra columns: extra \(string\); "
                r"mistyped columns: src is bigint, the stream's is string; price is double, the stream's is "
                r"decimal\(6,2\)\. The stream's columns: ts int64 \(event time, ms\), src string, bytes int64, "
                r"price decimal\(6,2\)")
    with pytest.raises(Exception, match=expected):  # the batch writer: before any task runs
        df.write.format("windowstore").options(target=server.target, stream="mm", writer_id="m", batch_id="1") \
            .mode("append").save()
    with pytest.raises(ValueError, match=expected):  # foreachBatch: on its first batch, before staging
        WindowStoreWriter(server.target, "mm", writer_id="m")(df, 0)
    src = tmp_path / "in"  # the streaming sink: the query stops at its start with the same message
    df.coalesce(1).write.parquet(str(src))
    q = (spark.readStream.schema(df.schema).parquet(str(src)).writeStream.format("windowstore")
         .option("target", server.target).option("stream", "mm").option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    with pytest.raises(Exception, match="Failed to initialize Python data source writer(.|\n)*" + expected):
        q.awaitTermination(120)
    assert ws.stats("mm")["streams"][0]["staged_rows"] in (0, "0")  # no task staged anything
    # a decimal(6,2) takes narrower decimals and small integers; a wider scale is refused
    ok = spark.createDataFrame([(1, "x", 3, D("1.5"))], "ts INT, src STRING, bytes INT, price DECIMAL(5,1)")
    ok.write.format("windowstore").options(target=server.target, stream="mm", writer_id="m", batch_id="2", slide_per_batch="true") \
        .mode("append").save()
    assert ws.query("SELECT SUM(price), SUM(bytes) FROM mm").rows == [(D("1.50"), 3)]
    with pytest.raises(Exception, match="price is decimal\\(6,3\\), the stream's is decimal\\(6,2\\)"):
        spark.createDataFrame([(1, "x", 3, D("1.5"))], "ts LONG, src STRING, bytes LONG, price DECIMAL(6,3)") \
            .write.format("windowstore").options(target=server.target, stream="mm", writer_id="m", batch_id="3") \
            .mode("append").save()


def test_a_spark_timestamp_feeds_the_event_time_column_in_milliseconds_and_comes_back(spark, ws, server, tmp_path):
    import datetime as dt

    from pyspark.sql.types import DecimalType, LongType, StructField, StructType, TimestampType

    ws.create_stream("et", {"ts": "int64", "bytes": "int64"}, subwindows=4, subwindow_ms=1000, clock="manual",
                     group_by=["ts"])
    utc = dt.timezone.utc
    at = [dt.datetime(2026, 1, 1, 12, 0, 0, 1_999, tzinfo=utc),       # 1.999 ms: floor to 1 ms
          dt.datetime(2026, 1, 1, 12, 0, 0, 1_000, tzinfo=utc),       # exactly 1 ms
          dt.datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=utc),  # -1 us: floor to -1 ms, not 0
          dt.datetime(1970, 1, 1, 0, 0, 0, 0, tzinfo=utc)]
    schema = StructType([StructField("ts", TimestampType()), StructField("bytes", LongType())])
    df = spark.createDataFrame([(t, i + 1) for i, t in enumerate(at)], schema).repartition(2)
    df.write.format("windowstore").options(target=server.target, stream="et", writer_id="et", batch_id="1", slide_per_batch="true") \
        .mode("append").save()
    # the streaming sink converts the same way
    src = tmp_path / "in"
    spark.createDataFrame([(at[0], 10)], schema).coalesce(1).write.parquet(str(src))
    q = (spark.readStream.schema(schema).parquet(str(src)).writeStream.format("windowstore")
         .option("target", server.target).option("stream", "et").option("slide_per_batch", "true")
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    base = 1_767_268_800_000
    text = "SELECT ts, SUM(bytes) AS total, MIN(ts) AS first, COUNT(*) AS n FROM et GROUP BY ts ORDER BY ts"
    assert ws.query(text).rows == [(-1, 3, -1, 1), (0, 4, 0, 1), (base + 1, 13, base + 1, 3)]
    got = spark.read.format("windowstore").option("target", server.target).option("query", text) \
        .option("event_time_as_timestamp", "true").load()
    fields = {f.name: f.dataType for f in got.schema.fields}
    assert (fields["ts"], fields["first"], fields["total"]) == (TimestampType(), TimestampType(), DecimalType(38, 0))
    rows = got.collect()
    assert [(r["ts"].astimezone(utc), r["total"]) for r in rows] == \
        [(dt.datetime(1969, 12, 31, 23, 59, 59, 999_000, tzinfo=utc), 3), (dt.datetime(1970, 1, 1, tzinfo=utc), 4),
         (dt.datetime(2026, 1, 1, 12, 0, 0, 1_000, tzinfo=utc), 13)]
    assert all(r["first"] == r["ts"] for r in rows)
    plain = spark.read.format("windowstore").option("target", server.target).option("query", text).load()
    assert [r["ts"] for r in plain.collect()] == [-1, 0, base + 1]  # without the option: int64 ms


# -- the batch reader: one pinned slide, Arrow batches, filters pushed into WHERE --------------------------
PIN_TEXT = "SELECT src, SUM(bytes) AS total, COUNT(*) AS n, MAX(ts) AS last FROM pin [RANGE 3 SUBWINDOWS] GROUP BY src"


def _sqlite(appended: dict, lo: int, hi: int, where: str = "") -> list[tuple]:
    """The independent reference: SQLite over the rows appended with slides lo..hi."""
    import sqlite3

    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (slide INT, ts INT, src TEXT, bytes INT)")
    db.executemany("INSERT INTO t VALUES (?, ?, ?, ?)",
                   [(j, r["ts"], r["src"], r["bytes"]) for j, rs in appended.items() for r in rs])
    return db.execute(f"SELECT src, SUM(bytes), COUNT(*), MAX(ts) FROM t WHERE slide BETWEEN ? AND ? {where} "
                      "GROUP BY src ORDER BY src", (lo, hi)).fetchall()


def test_batch_reader_pins_one_slide_pushes_filters_and_refuses_an_expired_slide(spark, ws, server):
    from pyspark.sql.datasource import EqualTo, GreaterThan, In

    from windowstore.clients.spark.layout import _answer_layout
    from windowstore.clients.spark.pushdown import _PushdownReader

    ws.create_stream("pin", SCHEMA, subwindows=6, subwindow_ms=1000, clock="manual", group_by=["src"])
    appended = {}

    def feed(j):
        appended[j] = rows(j, 30)
        ws.append("pin", {k: [r[k] for r in appended[j]] for k in SCHEMA})
        ws.slide("pin")

    for j in range(5):
        feed(j)
    opts = {"target": server.target, "query": PIN_TEXT}
    df = spark.read.format("windowstore").options(**opts).load()
    first = sorted(tuple(r)[:4] + (r["_slide"],) for r in df.collect())
    assert {r[4] for r in first} == {4}
    assert [r[:4] for r in first] == _sqlite(appended, 2, 4) == \
        sorted(ws.query(PIN_TEXT.replace("GROUP BY", "AS OF SLIDE 4 GROUP BY")).rows)
    feed(5)  # the window moves on: the same DataFrame's next action still reads slide 4
    again = sorted(tuple(r)[:4] + (r["_slide"],) for r in df.collect())
    assert again == first
    fresh = spark.read.format("windowstore").options(**opts).load()  # a new read pins the new slide
    assert {r["_slide"] for r in fresh.collect()} == {5}
    # filters on the GROUP BY key go into WHERE (and answer as SQLite does); others stay with Spark
    filtered = spark.read.format("windowstore").options(**opts, filter_pushdown="true").load() \
        .where(F.col("src").isin("h1", "h3") & (F.col("total") > 10))
    plan = filtered._jdf.queryExecution().optimizedPlan().toString()
    assert "total" in plan and "h1" not in plan  # Spark keeps total > 10; src IN went to the store
    got = filtered.collect()
    assert sorted(tuple(r)[:4] for r in got) == [r for r in _sqlite(appended, 3, 5, "AND src IN ('h1', 'h3')")
                                                 if r[1] > 10]
    reader = _PushdownReader(opts, _answer_layout(opts), fresh.schema)
    kept = list(reader.pushFilters([In(("src",), ("h1", "h3")), GreaterThan(("total",), 10),
                                    EqualTo(("_slide",), 5)]))
    assert kept == [GreaterThan(("total",), 10), EqualTo(("_slide",), 5)]
    [part] = reader.partitions()
    assert part.slide == 5 and part.text.endswith("[RANGE 3 SUBWINDOWS] AS OF SLIDE 5 WHERE (src IN ('h1', 'h3')) "
                                                  "GROUP BY src")
    batch = next(reader.read(part))  # Arrow record batches of the reader's schema
    assert isinstance(batch, pa.RecordBatch) and batch.num_rows == 2 and batch.schema.names == fresh.columns
    # a slide that has left the window is refused, naming the slides the store can answer
    for j in range(6, 9):
        feed(j)
    with pytest.raises(Exception, match="AS OF SLIDE 4 on stream 'pin': slide 4's sub-windows have left the window "
                                        "\\(it holds slides 3 to 8\\); it can answer AS OF SLIDE 5 to 8"):
        df.collect()
    pinned = spark.read.format("windowstore").options(**opts, as_of_slide="6").load()
    assert sorted(tuple(r)[:4] for r in pinned.collect()) == _sqlite(appended, 4, 6)


def test_batch_reader_splits_a_projection_over_partitions_of_one_slide_and_retries_read_it_again(spark, ws, server):
    ws.create_stream("proj", SCHEMA, subwindows=6, subwindow_ms=1000, clock="manual")
    appended = {}

    def feed(j):
        appended[j] = rows(j, 30)
        ws.append("proj", {k: [r[k] for r in appended[j]] for k in SCHEMA})
        ws.slide("proj")

    for j in range(7):  # slides 0..6; RANGE 5 reads 2..6
        feed(j)
    text = "SELECT ts, src, bytes FROM proj [RANGE 5 SUBWINDOWS]"
    df = spark.read.format("windowstore").options(target=server.target, query=text, partitions="3").load()
    assert df.rdd.getNumPartitions() == 3
    per_part = df.rdd.mapPartitions(lambda it: [sorted(r["_slide"] for r in it)]).collect()
    assert all(p and set(p) == {6} for p in per_part)  # every partition read slide 6's window
    reference = sorted((r["ts"], r["src"], r["bytes"]) for j in range(2, 7) for r in appended[j])
    got = sorted(tuple(r)[:3] for r in df.collect())
    assert got == reference == sorted(ws.query(text + " AS OF SLIDE 6").rows)
    # filters go into every partition's WHERE: Spark keeps none of them; the rows equal SQLite's
    filtered = spark.read.format("windowstore").options(target=server.target, query=text, partitions="3",
                                                        filter_pushdown="true", as_of_slide="6").load() \
        .where((F.col("bytes") > 50) & F.col("src").isin("h0", "h2"))
    assert filtered.rdd.getNumPartitions() == 3
    assert "bytes" not in filtered._jdf.queryExecution().optimizedPlan().toString().split("RelationV2")[0]
    assert sorted((r["ts"], r["src"], r["bytes"]) for r in filtered.collect()) == \
        [r for r in reference if r[2] > 50 and r[1] in ("h0", "h2")]
    # a task that dies after reading (and after the window moved on) is retried: it reads slide 6 again
    target = server.target

    def die_once_after_a_slide(batches):
        from pyspark import TaskContext

        from windowstore.clients import Client

        ctx = TaskContext.get()
        out = list(batches)
        if ctx.partitionId() == 0 and ctx.attemptNumber() == 0:
            with Client(target) as c:
                c.append("proj", {"ts": [10**9], "src": ["late"], "bytes": [1]})
                c.slide("proj")
            raise RuntimeError("the task dies after its read; the window has moved on")
        yield from out

    again = df.mapInArrow(die_once_after_a_slide, df.schema).collect()
    assert sorted(tuple(r)[:3] for r in again) == reference and {r["_slide"] for r in again} == {6}
    assert int(ws.describe_stream("proj")["latest_slide"]) == 7


def test_pushed_filters_on_timestamps_dates_decimals_and_event_time_answer_as_spark_does(spark, ws, server):
    import datetime as dt

    ws.create_stream("pt", {"ts": "int64", "at": "timestamp", "day": "date", "price": "decimal(8,2)", "src": "string"},
                     subwindows=3, subwindow_ms=1000, clock="manual")
    n = 40
    ws.append("pt", {"ts": [i * 500 for i in range(n)], "at": [None if i % 7 == 0 else i * 250_000 for i in range(n)],
                     "day": [i % 5 for i in range(n)], "price": [Decimal(i) / 4 for i in range(n)],
                     "src": [None if i % 6 == 0 else f"h{i % 4}" for i in range(n)]})
    ws.slide("pt")
    utc = dt.timezone.utc
    opts = {"target": server.target, "query": "SELECT ts, at, day, price, src FROM pt", "event_time_as_timestamp": "true"}
    conditions = [F.col("ts") >= F.lit(dt.datetime(1970, 1, 1, 0, 0, 7, tzinfo=utc)),
                  F.col("at") < F.lit(dt.datetime(1970, 1, 1, 0, 0, 3, 500_000, tzinfo=utc)),
                  F.col("day").isin(dt.date(1970, 1, 2), dt.date(1970, 1, 4)),
                  F.col("price") > Decimal("4.5"), F.col("src").isNull() | (F.col("src") != "h1"),
                  ~F.col("src").isin("h2", "h3"), F.col("at").isNotNull()]
    for cond in conditions:
        pushed = spark.read.format("windowstore").options(**opts, filter_pushdown="true").load().where(cond)
        by_spark = spark.read.format("windowstore").options(**opts).load().where(cond)
        assert sorted((tuple(r)[:5] for r in pushed.collect()), key=repr) == \
            sorted((tuple(r)[:5] for r in by_spark.collect()), key=repr)
        plan = pushed._jdf.queryExecution().optimizedPlan().toString()
        assert "Filter" not in plan or "OR" in plan.upper(), (cond, plan)  # an OR of two columns stays with Spark


def test_a_writer_staging_on_the_driver_is_exactly_once_across_replays_and_restarts(spark, ws, server, tmp_path):
    """WindowStoreWriter(stage_on_driver=True): the micro-batch comes to the driver as Arrow and is
    staged there, in chunks, under an attempt of its own; a replay is a no-op, a restart from the
    checkpoint delivers the rest once, a new checkpoint is a new query."""
    ws.create_stream("drv", SCHEMA, subwindows=20, subwindow_ms=1000, clock="manual")
    writer = WindowStoreWriter(server.target, "drv", writer_id="drv-direct", stage_on_driver=True, slide_per_batch=True,
                               max_rows_per_append=7)
    df = spark.createDataFrame(rows(90, 30), DDL).repartition(3)
    writer(df, 0)
    assert (writer.last["accepted"], writer.last["duplicate"]) == (30, False)
    writer(df.repartition(2), 0)  # replayed, partitioned otherwise
    assert writer.last["duplicate"] and ws.query("SELECT COUNT(*) FROM drv").rows == [(30,)]

    src, ckpt = tmp_path / "in", tmp_path / "ckpt"
    _files(src, range(3))

    def run(checkpoint):
        q = (spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).json(str(src)).writeStream
             .foreachBatch(WindowStoreWriter(server.target, "drv", stage_on_driver=True, slide_per_batch=True,
                                             max_rows_per_append=7))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
        q.awaitTermination(180)
        assert q.exception() is None, q.exception()
    run(ckpt)
    _forget_commit(ckpt, 2)  # Spark replays micro-batch 2
    _files(src, [3])
    run(ckpt)
    counts = _counts(ws, "drv")
    assert len(counts) == 30 + 4 * 50 and set(counts.values()) == {1}
    run(tmp_path / "ckpt2")  # a new checkpoint: a new query, whose rows land too
    assert sorted(set(_counts(ws, "drv").values())) == [1, 2] and sum(_counts(ws, "drv").values()) == 30 + 2 * 200


def test_the_sink_creates_a_missing_stream_from_the_dataframe_when_asked(spark, ws, server):
    df = spark.createDataFrame(rows(0, 30), DDL)
    opts = {"target": server.target, "stream": "made", "slide_per_batch": "true"}
    with pytest.raises(Exception, match="does not exist"):
        df.write.format("windowstore").options(**opts).mode("append").save()
    made = {**opts, "create_if_missing": "true", "subwindows": "4", "subwindow_ms": "1000", "clock": "manual",
            "group_by": "src"}
    df.write.format("windowstore").options(**made).mode("append").save()
    df.write.format("windowstore").options(**made, writer_id="second", batch_id="1").mode("append").save()
    spec = ws.describe_stream("made")["spec"]
    assert [c["name"] for c in spec["columns"]] == [f.name for f in df.schema.fields]
    assert spec["subwindows"] == 4 and spec["group_by"] == ["src"] and spec["clock"] == "CLOCK_MANUAL"
    assert ws.query("SELECT COUNT(*) FROM made [RANGE 2 SUBWINDOWS]").rows == [(60,)]


def test_the_store_s_error_comes_out_of_spark_typed_with_its_message_first(spark, server):
    from windowstore.clients import NotFound
    from windowstore.clients.spark import SchemaMismatch, store_errors

    df = spark.createDataFrame(rows(0, 3), DDL)
    with pytest.raises(NotFound) as e:
        with store_errors():
            df.write.format("windowstore").options(target=server.target, stream="no_such_stream").mode("append").save()
    assert str(e.value).splitlines()[0] == "stream 'no_such_stream' does not exist"
    assert "PYTHON_DATA_SOURCE" in str(e.value.__cause__)  # Spark's own error, chained
    with Client(server.target) as ws:
        ws.create_stream("mism", {"ts": "int64", "src": "string"}, subwindows=2, subwindow_ms=1000, clock="manual")
    with pytest.raises(SchemaMismatch, match="^the DataFrame does not fit windowstore stream 'mism'"):
        with store_errors():
            df.write.format("windowstore").options(target=server.target, stream="mism").mode("append").save()
    with pytest.raises(ValueError, match="^unknown windowstore option 'strem'"):
        with store_errors():
            df.write.format("windowstore").options(target=server.target, strem="x").mode("append").save()


def test_store_error_finds_each_error_under_the_name_python_prints_for_it():
    from windowstore.clients import InvalidArgument, NotFound
    from windowstore.clients.spark import SchemaMismatch, store_error

    for cls in (SchemaMismatch, NotFound, InvalidArgument):
        shown = f"{cls.__module__}.{cls.__qualname__}"  # the traceback's last line, as a Python worker prints it
        found = store_error(RuntimeError(f"[PYTHON_DATA_SOURCE_ERROR] failed\nTraceback ...\n{shown}: it went wrong\n"))
        assert type(found) is cls and str(found) == "it went wrong", (shown, found)
    assert store_error(RuntimeError("ValueError: not ours")) is None
