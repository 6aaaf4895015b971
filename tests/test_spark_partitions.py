"""Spark writes to a partitioned stream on 2 real servers (127.0.0.1) and a local SparkSession:
rows routed by the SDK's hash, every row exactly once after a batch whose commit failed on one
partition and was retried, no scatter-gather query seeing that batch on some partitions only, and
answers equal DuckDB over the rows written."""
from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

pyspark = pytest.importorskip("pyspark")


from windowstore.clients import Client, Unavailable  # noqa: E402
from windowstore.clients import client as client_module  # noqa: E402
from windowstore.clients.partitioned import ClusterClient  # noqa: E402
from windowstore.clients.spark import WindowStoreWriter, local_session  # noqa: E402
from windowstore.store.partitions import StaticCluster, partition_name, partition_of_rows  # noqa: E402

pytestmark = pytest.mark.spark
SCHEMA = {"ts": "int64", "src": "string", "bytes": "int64"}
DDL = "ts LONG, src STRING, bytes LONG"
P = 4
CLUSTER_NODES = 2  # the `cluster` fixture (conftest.py): servers in its cluster


@pytest.fixture(scope="module")
def spark():
    s = local_session("windowstore-partition-tests", cores=2, max_failures=3,
                      spark__sql__execution__arrow__maxRecordsPerBatch="16")
    yield s
    s.stop()


def rows(batch: int, n: int) -> list[dict]:
    return [{"ts": batch * 1_000_000 + i, "src": None if i % 17 == 0 else f"h{(i * 7 + batch) % 11}",
             "bytes": (i * 13 + batch) % 97} for i in range(n)]


def duck(sql: str, data: list[dict]) -> list[tuple]:
    t = pa.Table.from_pylist(data, schema=pa.schema([("ts", pa.int64()), ("src", pa.string()), ("bytes", pa.int64())]))
    con = duckdb.connect()
    con.register("pf", t)
    return [tuple(r) for r in con.execute(sql).fetchall()]


def per_partition(data: list[dict]) -> dict[int, int]:
    t = pa.Table.from_pylist(data)
    parts = partition_of_rows(t, ["src"], P)
    return {p: int((parts == p).sum()) for p in range(P)}


def check_rows_per_partition(addresses: list[str], stream: str, written: list[dict]) -> None:
    """Every row written is once on its partition's server: each partition's count is the source's."""
    view, want = StaticCluster(tuple(addresses)), per_partition(written)
    for p in range(P):
        with Client(view.addresses[view.owner(stream, p)]) as ws:
            assert ws.query(f'SELECT COUNT(*) FROM "{partition_name(stream, p)}"').rows == [(want[p],)], p


def fail_first_commit(monkeypatch, stream: str, p: int) -> None:
    """The first commit on partition p of `stream` fails (UNAVAILABLE) before reaching its server."""
    real = client_module.Client.commit_batch
    failed = []

    def flaky(self, name, *args, **kwargs):
        if name == partition_name(stream, p) and not failed:
            failed.append(name)
            raise Unavailable(f"injected: partition {p}'s server did not answer the commit")
        return real(self, name, *args, **kwargs)
    monkeypatch.setattr(client_module.Client, "commit_batch", flaky)


def test_foreach_batch_writer_routes_by_partition_and_commits_exactly_once(spark, cluster, monkeypatch):
    with ClusterClient(cluster.addresses) as cc:
        cc.create_stream("pf", SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual",
                         partitions=P, partition_by=["src"])
        writer = WindowStoreWriter(cluster.addresses, "pf", writer_id="job1", slide_per_batch=True)
        b0, b1 = rows(0, 300), rows(1, 240)
        writer(spark.createDataFrame(b0, DDL).repartition(3), 0)
        assert (writer.last["accepted"], writer.last["duplicate"], writer.last["latest_slide"]) == (300, False, 0)
        assert writer.last["by_partition"] == per_partition(b0)

        # batch 1's commit fails on partition 1 after the others committed theirs
        fail_first_commit(monkeypatch, "pf", 1)
        with pytest.raises(Unavailable, match="partition 1"):
            writer(spark.createDataFrame(b1, DDL).repartition(2), 1)
        # no scatter-gather read sees batch 1 on the partitions that committed it: they sealed
        # slide 1 with it, partition 1 did not, so the newest slide all have sealed is 0
        a = cc.query("SELECT COUNT(*), SUM(bytes) FROM pf")
        assert (a.slide, a.rows) == (0, duck("SELECT COUNT(*), SUM(bytes) FROM pf", b0))

        # Spark replays batch 1, split otherwise: partition 1 commits, the others acknowledge a duplicate
        writer(spark.createDataFrame(b1, DDL).repartition(5), 1)
        assert writer.last["latest_slide"] == 1
        assert writer.last["duplicate_partitions"] == [0, 2, 3]
        assert writer.last["by_partition"][1] == per_partition(b1)[1]
        writer(spark.createDataFrame(b1, DDL), 1)  # a replay of a committed batch is a no-op
        assert writer.last["duplicate"] is True

        # every row once on its partition's server, and answers equal DuckDB over the rows
        check_rows_per_partition(cluster.addresses, "pf", b0 + b1)
        both = b0 + b1
        for sql in ("SELECT COUNT(*), SUM(bytes), MIN(bytes), MAX(bytes) FROM pf",
                    "SELECT src, COUNT(*), SUM(bytes) FROM pf GROUP BY src ORDER BY src"):
            a = cc.query(sql)
            assert a.slide == 1
            assert a.rows == duck(sql + (" NULLS LAST" if "ORDER" in sql else ""), both), sql


def test_stage_on_driver_on_a_cluster_splits_the_batch_and_commits_each_row_once(spark, cluster, monkeypatch):
    """stage_on_driver=True on a cluster target: the driver splits the Arrow batch by the partition
    key and stages each share once, committed on every partition as the executor path commits;
    a batch whose commit failed on one partition and was replayed lands once everywhere."""
    with ClusterClient(cluster.addresses) as cc:
        cc.create_stream("pd", SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual",
                         partitions=P, partition_by=["src"])
        writer = WindowStoreWriter(cluster.addresses, "pd", writer_id="job-driver", slide_per_batch=True,
                                   stage_on_driver=True)
        b0, b1 = rows(2, 310), rows(3, 170)
        writer(spark.createDataFrame(b0, DDL).repartition(3), 0)
        assert (writer.last["accepted"], writer.last["duplicate"], writer.last["latest_slide"]) == (310, False, 0)
        assert writer.last["by_partition"] == per_partition(b0)

        fail_first_commit(monkeypatch, "pd", 2)
        with pytest.raises(Unavailable, match="partition 2"):
            writer(spark.createDataFrame(b1, DDL), 1)
        writer(spark.createDataFrame(b1, DDL).repartition(4), 1)  # the replay: staged again, committed once
        assert writer.last["duplicate_partitions"] == [0, 1, 3]
        assert writer.last["by_partition"][2] == per_partition(b1)[2]
        writer(spark.createDataFrame(b1, DDL), 1)  # a replay of a committed batch is a no-op
        assert writer.last["duplicate"] is True

        check_rows_per_partition(cluster.addresses, "pd", b0 + b1)
        sql = "SELECT COUNT(*), SUM(bytes), MIN(ts), MAX(ts) FROM pd"
        a = cc.query(sql)
        assert a.slide == 1 and a.rows == duck(sql.replace("pd", "pf"), b0 + b1)


def test_batch_reader_reads_each_partition_pinned_to_the_common_slide(spark, cluster):
    with ClusterClient(cluster.addresses) as cc:
        cc.create_stream("pr", SCHEMA, subwindows=3, subwindow_ms=1000, clock="manual",
                         partitions=P, partition_by=["src"])
        data = {b: rows(b, 120) for b in range(4)}
        for b in range(4):
            cc.append("pr", pa.Table.from_pylist(data[b]), writer_id="w", batch_id=b)
            cc.slide("pr")
        cc.append("pr", pa.Table.from_pylist(rows(9, 200)), writer_id="w", batch_id=9)  # not sealed: not read
        window = data[1] + data[2] + data[3]  # slide 3's window: the batches sealed by slides 1..3
        view = StaticCluster(tuple(cluster.addresses))
        assert len({view.owner("pr", p) for p in range(P)}) == 2  # the partitions are on both servers
        target = ",".join(cluster.addresses)

        def read(query: str):
            return spark.read.format("windowstore").option("target", target).option("query", query).load()

        df = read("SELECT ts, src, bytes FROM pr")
        assert df.rdd.getNumPartitions() == P
        got = sorted((r.ts, r.src, r.bytes) for r in df.collect())
        assert got == sorted(duck("SELECT ts, src, bytes FROM pf", window))
        assert {r._slide for r in df.select("_slide").collect()} == {3}
        agg = read("SELECT src, COUNT(*), SUM(bytes) FROM pr GROUP BY src ORDER BY src").collect()
        assert [(r[0], r[1], r[2]) for r in agg] == duck(
            "SELECT src, COUNT(*), SUM(bytes) FROM pf GROUP BY src ORDER BY src NULLS LAST", window)
        assert {r._slide for r in agg} == {3}


def test_streaming_reader_merges_a_partitioned_periodic_query_per_slide(spark, cluster, tmp_path):
    """The streaming reader on a cluster target: the periodic query registered on every partition,
    each slide's answers merged into one, each slide delivered once across a restart from the
    checkpoint, and every answer equal to DuckDB over the rows of that slide's window."""
    from conftest import wait_for
    from test_spark import _read_stream_to_parquet

    target = ",".join(cluster.addresses)
    text = "SELECT src, SUM(bytes) AS total, COUNT(*) AS n FROM ps [RANGE 2 SUBWINDOWS SLIDE 1 SUBWINDOWS] GROUP BY src"
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    sealed: dict[int, list[dict]] = {}
    with ClusterClient(cluster.addresses) as cc:
        cc.create_stream("ps", SCHEMA, subwindows=3, subwindow_ms=1000, clock="manual", partitions=P,
                         partition_by=["src"])

        def feed(batches):
            for b in batches:
                cc.append("ps", pa.Table.from_pylist(rows(b, 60)), writer_id="w", batch_id=b)
                sealed[cc.slide("ps")] = rows(b, 60)
            last = max(sealed)
            wait_for(lambda: all(q["last_slide"] == last for q in cc.list_queries("")),
                     f"every partition's query to answer slide {last}")

        _read_stream_to_parquet(spark, target, text, ckpt, out)  # registers it on every partition
        assert len(cc.list_queries("")) == P
        feed(range(3))
        _read_stream_to_parquet(spark, target, text, ckpt, out)
        feed(range(3, 5))
        _read_stream_to_parquet(spark, target, text, ckpt, out)  # from the checkpoint: only what is new
    got = spark.read.parquet(str(out)).collect()
    by_slide: dict[int, list[tuple]] = {}
    for r in got:
        by_slide.setdefault(r["_slide"], []).append((r["src"], r["total"], r["n"]))
    assert sorted(by_slide) == [0, 1, 2, 3, 4]
    for k, answer in by_slide.items():
        window = sealed[k] + sealed.get(k - 1, [])
        assert sorted(answer, key=repr) == sorted(duck("SELECT src, SUM(bytes), COUNT(*) FROM pf GROUP BY src",
                                                       window), key=repr), k


def test_streaming_reader_merges_periodic_expressions_and_sketches_per_slide(spark, cluster, tmp_path):
    """The streaming reader on a cluster target with a periodic query with expressions and one with
    sketch aggregates: each slide's partition answers merged with the one-time merge, every answer
    checked against DuckDB over the rows of that slide's window (exactly; within the stated bound)."""
    from cluster_fixtures import periodic_answered
    from conftest import wait_for
    from test_spark import _read_stream_to_parquet

    target = ",".join(cluster.addresses)
    every = "[RANGE 2 SUBWINDOWS SLIDE 1 SUBWINDOWS]"
    texts = {"expr": f"SELECT src, SUM(bytes) * 2 AS b2, COUNT(*) FILTER (WHERE bytes > 40) AS big FROM pq {every} "
                     "GROUP BY src",
             "sketch": f"SELECT APPROX_COUNT_DISTINCT(src) AS d, COUNT(*) AS n FROM pq {every}"}
    sealed: dict[int, list[dict]] = {}
    with ClusterClient(cluster.addresses) as cc:
        cc.create_stream("pq", SCHEMA, subwindows=3, subwindow_ms=1000, clock="manual", partitions=P,
                         partition_by=["src"], sketches={"src": ("hll", 10)})
        for name, text in texts.items():  # registers each on every partition
            _read_stream_to_parquet(spark, target, text, tmp_path / f"ckpt-{name}", tmp_path / name)
        for b in range(3):
            cc.append("pq", pa.Table.from_pylist(rows(b, 80)), writer_id="w", batch_id=b)
            k = cc.slide("pq")
            sealed[k] = rows(b, 80)
            wait_for(periodic_answered(cc, k), f"every partition's answer of slide {k}")
        for name, text in texts.items():
            _read_stream_to_parquet(spark, target, text, tmp_path / f"ckpt-{name}", tmp_path / name)
    expr: dict[int, list[tuple]] = {}
    for r in spark.read.parquet(str(tmp_path / "expr")).collect():
        expr.setdefault(r["_slide"], []).append((r["src"], r["b2"], r["big"]))
    assert sorted(expr) == [0, 1, 2]
    for k, answer in expr.items():
        want = duck("SELECT src, SUM(bytes) * 2, COUNT(*) FILTER (WHERE bytes > 40) FROM pf GROUP BY src",
                    sealed[k] + sealed.get(k - 1, []))
        assert sorted(answer, key=repr) == sorted(want, key=repr), k
    got = {r["_slide"]: r for r in spark.read.parquet(str(tmp_path / "sketch")).collect()}
    assert sorted(got) == [0, 1, 2]
    for k, r in got.items():
        (distinct, n), = duck("SELECT COUNT(DISTINCT src), COUNT(*) FROM pf", sealed[k] + sealed.get(k - 1, []))
        assert r["n"] == n and abs(r["d"] - distinct) <= max(1, 0.1 * distinct)  # HLL lg_k 10 at 2 sigma: ~6.5%


def test_data_source_writers_on_a_cluster_batch_once_and_event_time_sink_slides_every_partition(spark, cluster,
                                                                                               tmp_path):
    """`df.write.format("windowstore")` and `df.writeStream.format("windowstore")` with a cluster
    target: rows routed by the partition key and committed on every partition exactly once (a
    re-run of the same job is a no-op). The sink feeds an event-time stream whose last batches
    have one key only: the partitions without rows still slide (the commit carries the batch's
    newest event time), and the answer equals DuckDB over the rows in the window it reports."""
    target = ",".join(cluster.addresses)
    with ClusterClient(cluster.addresses) as cc:
        cc.create_stream("dw", SCHEMA, subwindows=3, subwindow_ms=1000, clock="manual", partitions=P,
                         partition_by=["src"])
        data = rows(1, 150)
        opts = {"target": target, "stream": "dw", "writer_id": "nightly", "batch_id": "7", "slide_per_batch": "true"}
        df = spark.createDataFrame(data, DDL).repartition(3)
        df.write.format("windowstore").options(**opts).mode("append").save()
        df.write.format("windowstore").options(**opts).mode("append").save()  # the same job again: a no-op
        assert [s["latest_slide"] for s in cc.describe_stream("dw")["streams"]] == [0] * P
        for p, n in per_partition(data).items():
            assert cc.nodes[cc.cluster.owner("dw", p)].query(
                f"SELECT COUNT(*) FROM {partition_name('dw', p)}").rows == [(n,)]
        assert cc.query("SELECT src, SUM(bytes) FROM dw GROUP BY src ORDER BY src").rows == \
            duck("SELECT src, SUM(bytes) FROM pf GROUP BY src ORDER BY src NULLS LAST", data)
        # create_if_missing on a cluster target: a partitioned stream from the DataFrame and the options
        made = {**opts, "stream": "made", "create_if_missing": "true", "subwindows": "3", "subwindow_ms": "1000",
                "clock": "manual", "partitions": "3", "partition_by": "src"}
        df.write.format("windowstore").options(**made).mode("append").save()
        lay = cc.layout("made", refresh=True)
        assert (lay.partitions, lay.partition_by) == (3, ("src",))
        assert cc.describe_stream("made")["streams"][0]["spec"]["columns"][1]["name"] == "src"
        assert [s["latest_slide"] for s in cc.describe_stream("made")["streams"]] == [0] * 3
        assert cc.query("SELECT src, COUNT(*), SUM(bytes) FROM made GROUP BY src ORDER BY src").rows == \
            duck("SELECT src, COUNT(*), SUM(bytes) FROM pf GROUP BY src ORDER BY src NULLS LAST", data)
        with pytest.raises(Exception, match="partition_by and origin_ms need option partitions"):
            unsized = {k: v for k, v in made.items() if k != "partitions"}
            df.write.format("windowstore").options(**{**unsized, "stream": "other"}).mode("append").save()

        cc.create_stream("ev", SCHEMA, subwindows=3, subwindow_ms=100, clock="event", partitions=P,
                         partition_by=["src"], origin_ms=0)
        src_dir, sent = tmp_path / "in", []
        for b in range(6):
            batch = [{"ts": b * 100 + i, "src": "h1" if b >= 4 else f"h{i % 11}", "bytes": i} for i in range(100)]
            spark.createDataFrame(batch, DDL).coalesce(1).write.parquet(str(src_dir / f"b{b}"))
            sent += batch
        stream_df = spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1) \
            .option("recursiveFileLookup", "true").parquet(str(src_dir))
        q = (stream_df.writeStream.format("windowstore").option("target", target).option("stream", "ev")
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
        q.awaitTermination(180)
        assert q.exception() is None, q.exception()
        # the newest event time, 599, completes [0, 100) ... [400, 500) on every partition: slide 4
        from conftest import wait_for
        wait_for(lambda: [s["latest_slide"] for s in cc.describe_stream("ev")["streams"]] == [4] * P,
                 "every partition to seal slide 4")
        a = cc.query("SELECT src, COUNT(*), SUM(bytes) FROM ev GROUP BY src ORDER BY src")
        assert (a.slide, a.window_start_ms, a.window_end_ms) == (4, 200, 500)
        assert a.rows == duck("SELECT src, COUNT(*), SUM(bytes) FROM pf WHERE ts >= 200 AND ts < 500 GROUP BY src "
                              "ORDER BY src NULLS LAST", sent)
