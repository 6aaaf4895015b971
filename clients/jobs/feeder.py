"""Spark feeder: turns Spark's rate source into a synthetic IP-packet stream written to windowstore.

Source and destination addresses are Zipf-skewed (P(k) ~ 1/k over --addresses addresses, as the
traffic of thesis chapter 6); packet sizes skew small; protocol and port follow a fixed mix.
Every micro-batch goes through WindowStoreWriter: Arrow from the executors, exactly once per
batch id.

    python -m windowstore.clients.jobs.feeder --target 127.0.0.1:50051 --stream packets --create
"""
from __future__ import annotations

import argparse
import math
import time

PACKET_SCHEMA = {"ts": "int64", "src": "string", "dst": "string", "protocol": "string", "port": "int64",
                 "bytes": "int64"}


def packets_from_rate(df, addresses: int):
    from pyspark.sql import functions as F

    def address(seed: int):
        k = F.floor(F.exp(F.rand(seed) * F.lit(math.log(addresses)))).cast("long") - 1   # Zipf(1): P(k) ~ 1/k
        return F.concat(F.lit("10."), (k / 65536).cast("int"), F.lit("."), ((k / 256) % 256).cast("int"), F.lit("."),
                        (k % 256).cast("int"))
    r = F.rand(7)
    return df.select(
        (F.unix_millis(F.col("timestamp"))).alias("ts"),
        address(1).alias("src"),
        address(2).alias("dst"),
        F.when(r < 0.8, "tcp").when(r < 0.95, "udp").otherwise("icmp").alias("protocol"),
        F.element_at(F.array(*[F.lit(p) for p in (80, 443, 53, 22, 8080, 3306)]),
                     (F.floor(F.pow(F.rand(3), 2) * 6) + 1).cast("int")).cast("long").alias("port"),
        (F.lit(40) + F.floor(F.pow(F.rand(4), 3) * 1460)).cast("long").alias("bytes"),
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="127.0.0.1:50051", help="windowstore server (default 127.0.0.1:50051)")
    ap.add_argument("--stream", default="packets", help="stream to write (default packets)")
    ap.add_argument("--rows-per-second", type=int, default=20_000, help="packets per second (default 20000)")
    ap.add_argument("--addresses", type=int, default=1000, help="distinct addresses (default 1000)")
    ap.add_argument("--trigger-ms", type=int, default=500, help="micro-batch interval in ms (default 500)")
    ap.add_argument("--duration-s", type=float, default=60.0, help="stop after this many seconds (default 60)")
    ap.add_argument("--writer-id", default=None,
                    help="name the writer (default: the streaming query's id, kept in its checkpoint, so a restart "
                         "from the checkpoint replays as a no-op and a new checkpoint is a new writer)")
    ap.add_argument("--create", action="store_true", help="create the stream if it does not exist")
    ap.add_argument("--subwindows", type=int, default=60, help="with --create: sub-windows (default 60)")
    ap.add_argument("--subwindow-ms", type=int, default=1000, help="with --create: sub-window length (default 1000)")
    ap.add_argument("--checkpoint", help="checkpoint directory (default: a temporary one)")
    args = ap.parse_args(argv)

    from windowstore.clients import AlreadyExists, Client
    from windowstore.clients.spark import WindowStoreWriter, local_session

    if args.create:
        with Client(args.target) as ws:
            try:
                ws.create_stream(args.stream, PACKET_SCHEMA, subwindows=args.subwindows, subwindow_ms=args.subwindow_ms,
                                 group_by=["src", "dst", "protocol"])
            except AlreadyExists:
                pass
    spark = local_session("windowstore-feeder")
    rate = (spark.readStream.format("rate").option("rowsPerSecond", args.rows_per_second)
            .option("numPartitions", 2).load())
    writer = WindowStoreWriter(args.target, args.stream, writer_id=args.writer_id)
    stream = packets_from_rate(rate, args.addresses).writeStream.foreachBatch(writer) \
        .trigger(processingTime=f"{args.trigger_ms} milliseconds")
    if args.checkpoint:
        stream = stream.option("checkpointLocation", args.checkpoint)
    query = stream.start()
    print(f"feeding {args.stream} at {args.target}: {args.rows_per_second} packets/s", flush=True)
    deadline = time.monotonic() + args.duration_s
    try:
        while time.monotonic() < deadline and query.isActive:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        query.stop()
        spark.stop()
    if query.exception() is not None:
        print(f"feeder failed: {query.exception()}", flush=True)
        return 1
    print("feeder stopped", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
