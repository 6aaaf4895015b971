"""Spark benchmarks: rows/s from Spark into the store; answer freshness of the store versus a
Spark-only pipeline computing the same sliding aggregate, in one run.

Freshness = age of the newest input row reflected in an answer at the moment a reader gets it.
Both pipelines read Spark's rate source (same rate); readers poll every 50 ms. For reference, the
same rate is also written straight from Python with the SDK (no Spark micro-batch in between):
- store: foreachBatch -> windowstore (10 x 1 s sub-windows, and 100 x 100 ms), reader asks
  SELECT MAX(ts), COUNT(*) over the whole 10 s window;
- Spark only: groupBy(window(timestamp, "10 seconds", "1 second")) -> memory sink, update mode,
  trigger as fast as possible; reader asks the memory table for the newest max(ts).
"""
from __future__ import annotations

import threading
import time

import numpy as np
import pyarrow as pa

from windowstore.clients import Client
from windowstore.server.process import ServerProcess

from .common import fmt_rate


def _ingest(spark, target: str) -> float:
    from pyspark.sql import functions as F

    from windowstore.clients.spark import WindowStoreWriter

    with Client(target) as ws:
        ws.create_stream("sb", {"ts": "int64", "src": "string", "bytes": "int64"}, subwindows=10, subwindow_ms=1000,
                         group_by=["src"])
    rows = 2_000_000
    df = (spark.range(rows, numPartitions=2)
          .select((F.col("id") % 1000 + 1_700_000_000_000).alias("ts"),
                  F.concat(F.lit("10.0."), (F.col("id") % 997).cast("string")).alias("src"),
                  (F.col("id") % 1460 + 40).alias("bytes"))).cache()
    df.count()  # materialise, so the measurement is the transfer into the store
    writer = WindowStoreWriter(target, "sb", writer_id="bench")
    writer(df, 0)  # warm the executors' Python workers
    best = 0.0
    for b in (1, 2, 3):
        t0 = time.perf_counter()
        writer(df, b)
        best = max(best, rows / (time.perf_counter() - t0))
    df.unpersist()
    return best


def _freshness(spark, target: str, seconds: float, rate: int) -> dict[str, list[float]]:
    from pyspark.sql import functions as F

    from windowstore.clients.spark import stage_partition

    with Client(target) as ws:
        for name, n, t in (("f1s", 10, 1000), ("f100", 100, 100), ("d1s", 10, 1000), ("d100", 100, 100)):
            ws.create_stream(name, {"ts": "int64", "v": "int64"}, subwindows=n, subwindow_ms=t)
    stop_direct = threading.Event()

    def direct():
        # reference: the same rate written straight from Python (no Spark micro-batch in between)
        with Client(target) as c:
            v = 0
            while not stop_direct.is_set():
                k = max(1, rate // 100)
                batch = {"ts": np.full(k, int(time.time() * 1000), dtype=np.int64), "v": np.arange(v, v + k)}
                v += k
                c.append("d1s", batch)
                c.append("d100", batch)
                time.sleep(0.01)
    feeder = threading.Thread(target=direct)

    def rate_df():
        return (spark.readStream.format("rate").option("rowsPerSecond", rate).option("numPartitions", 2).load()
                .select(F.unix_millis("timestamp").alias("ts"), F.col("value").alias("v"), "timestamp"))

    def both(df, batch_id):
        # one Spark job per micro-batch, like the Spark-only pipeline: each partition goes to both streams
        def send(batches):
            batches = list(batches)
            acks = [stage_partition(target, stream, stream, batch_id, iter(batches)) for stream in ("f1s", "f100")]
            yield pa.RecordBatch.from_pydict({"attempt": [acks[0][1]], "n": [acks[0][2]]})
        acks = df.select("ts", "v").mapInArrow(send, "attempt STRING, n LONG").collect()
        with Client(target) as c:  # the same commit as WindowStoreWriter: exactly the attempts that succeeded
            for stream in ("f1s", "f100"):
                c.commit_batch(stream, stream, batch_id, {a.attempt: a.n for a in acks})
    store_q = rate_df().writeStream.foreachBatch(both).trigger(processingTime="0 seconds").start()
    spark_q = (rate_df().groupBy(F.window("timestamp", "10 seconds", "1 second"))
               .agg(F.max("ts").alias("max_ts"), F.count("*").alias("n"))
               .writeStream.format("memory").queryName("spark_only").outputMode("update")
               .trigger(processingTime="0 seconds").start())
    feeder.start()
    ages: dict[str, list[float]] = {"store 1 s sub-windows": [], "store 100 ms sub-windows": [], "spark only": [],
                                    "store 1 s sub-windows, SDK-fed": [], "store 100 ms sub-windows, SDK-fed": []}
    stop = time.monotonic() + seconds + 15
    warm = time.monotonic() + 15  # JVM, first micro-batches, windows filling
    with Client(target) as ws:
        while time.monotonic() < stop:
            time.sleep(0.05)
            measuring = time.monotonic() > warm
            for name, stream in (("store 1 s sub-windows", "f1s"), ("store 100 ms sub-windows", "f100"),
                                 ("store 1 s sub-windows, SDK-fed", "d1s"), ("store 100 ms sub-windows, SDK-fed", "d100")):
                a = ws.query(f"SELECT MAX(ts) FROM {stream}")
                now = time.time() * 1000
                if measuring and a.rows[0][0] is not None:
                    ages[name].append(now - a.rows[0][0])
            got = spark.sql("SELECT max(max_ts) FROM spark_only").collect()[0][0]
            now = time.time() * 1000
            if measuring and got is not None:
                ages["spark only"].append(now - got)
    store_q.stop()
    spark_q.stop()
    stop_direct.set()
    feeder.join()
    return ages


def run() -> list[dict]:
    from windowstore.clients.spark import local_session

    out = []
    spark = local_session("windowstore-bench", cores=2, spark__sql__shuffle__partitions="2")
    try:
        with ServerProcess() as srv:
            rate = _ingest(spark, srv.target)
            out.append({"name": "Spark -> store: 2M rows via WindowStoreWriter (foreachBatch, Arrow from 2 executors)",
                        "value": rate, "shown": fmt_rate(rate), "target": ">= 1 M rows/s"})
        with ServerProcess() as srv:
            ages = _freshness(spark, srv.target, seconds=30, rate=5000)
        spark_p50 = float(np.percentile(ages["spark only"], 50)) if ages["spark only"] else float("nan")
        for name, xs in ages.items():
            p50, p99 = (float(np.percentile(xs, 50)), float(np.percentile(xs, 99))) if xs else (float("nan"),) * 2
            ratio = f", {spark_p50 / p50:.1f}x fresher than Spark" if name != "spark only" and xs else ""
            target = ""
            if name == "store 1 s sub-windows":
                target = "p50 <= Spark's / 2"
            elif name == "store 100 ms sub-windows":
                target = ">= 10x fresher than Spark"
            out.append({"name": f"freshness (age of newest row in the answer), 10 s window sliding 1 s: {name}",
                        "value": [p50, p99], "shown": f"p50 {p50:.0f} ms, p99 {p99:.0f} ms{ratio}", "target": target})
    finally:
        spark.stop()
    return out
