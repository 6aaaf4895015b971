#!/usr/bin/env python
"""A Spark streaming driver for tests/test_spark_driver_kill.py, run as its own process so the test
can kill -9 it: JSON files from SRC, one file per micro-batch, written by the foreachBatch writer
(WindowStoreWriter) to the partitioned stream STREAM on the cluster NODES, with a checkpoint.

    spark_kill_driver.py NODES STREAM SRC CHECKPOINT PROGRESS [--block-at B] [--available-now]

After each micro-batch it appends "done <batch id>" to PROGRESS. With --block-at B, the commit of
batch B stops after its first partition's commit: it appends "blocked B" to PROGRESS and waits
forever (the test kills the process there, between the partitions' commits). --available-now
processes every file left and exits 0; otherwise the query runs until killed.
"""
from __future__ import annotations

import argparse
import os
import threading

from windowstore.clients.spark import WindowStoreWriter, local_session
import windowstore.clients.spark.writers as writers

DDL = "ts LONG, src STRING, bytes LONG"


def note(path: str, line: str) -> None:
    with open(path, "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("nodes")
    ap.add_argument("stream")
    ap.add_argument("src")
    ap.add_argument("checkpoint")
    ap.add_argument("progress")
    ap.add_argument("--block-at", type=int, default=None)
    ap.add_argument("--available-now", action="store_true")
    args = ap.parse_args()

    commit_all = writers.commit_all

    def commit_then_maybe_block(nodes, stream, writer, batch_id, acks, **kw):
        if batch_id == args.block_at:
            def after_each(p: int) -> None:
                note(args.progress, f"blocked {batch_id}")
                threading.Event().wait()  # killed here
            kw["after_each"] = after_each
        return commit_all(nodes, stream, writer, batch_id, acks, **kw)
    writers.commit_all = commit_then_maybe_block  # the writer's committer, with the test's stop in it

    spark = local_session("windowstore-driver-kill", cores=2, max_failures=2)
    writer = WindowStoreWriter(args.nodes.split(","), args.stream)

    def each(df, batch_id: int) -> None:
        writer(df, batch_id)
        note(args.progress, f"done {batch_id}")

    df = spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).json(args.src)
    w = df.writeStream.foreachBatch(each).option("checkpointLocation", args.checkpoint)
    w = w.trigger(availableNow=True) if args.available_now else w.trigger(processingTime="100 milliseconds")
    q = w.start()
    q.awaitTermination()
    if q.exception() is not None:
        raise SystemExit(f"query failed: {q.exception()}")
    spark.stop()


if __name__ == "__main__":
    main()
