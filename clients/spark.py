"""Spark integration (needs the `spark` extra).

- `WindowStoreWriter(target, stream, writer_id=..., slide_per_batch=False)`: a `foreachBatch`
  callable. Executors send their partitions as Arrow (nothing is collected to the driver but one
  small acknowledgement per partition); each append carries the idempotency key
  (writer id + partition, batch id), so a micro-batch that Spark replays is acknowledged as a
  duplicate and changes nothing. With slide_per_batch=True (streams with clock="manual") the
  driver then seals one sub-window per micro-batch, also idempotently.
- `WindowStoreDataSource`, registered as "windowstore" (Spark 4 Python Data Source API):
  streaming writer (`df.writeStream.format("windowstore").option("target", ...)
  .option("stream", ...)`) with the same exactly-once appends, slides on commit when asked; and a
  batch reader running one one-time query
  (`spark.read.format("windowstore").option("target", ...).option("query", ...).load()`) whose
  DataFrame holds the answer rows plus its metadata as columns `_slide`, `_window_start_ms`,
  `_window_end_ms`, `_staleness_ms`, `_response_ms`, `_restarts`, `_policy`.
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import (DataSource, DataSourceReader, DataSourceStreamArrowWriter, InputPartition,
                                    WriterCommitMessage)

from windowstore.store import Schema, WindowSpec, bind, parse_query

from .client import Client

ACK_SCHEMA = "partition INT, accepted LONG, late LONG, duplicate BOOLEAN"
META_COLUMNS = [("_slide", "LONG"), ("_window_start_ms", "LONG"), ("_window_end_ms", "LONG"),
                ("_staleness_ms", "DOUBLE"), ("_response_ms", "DOUBLE"), ("_restarts", "INT"), ("_policy", "STRING")]
# int128: exact integer sums (SUM over int64 never wraps), as DuckDB exports its HUGEINT to Arrow.
_SPARK_TYPES = {"int64": "LONG", "float64": "DOUBLE", "string": "STRING", "int128": "DECIMAL(38,0)"}
BATCH_ID_PROPERTY = "streaming.sql.batchId"  # set by Spark on every task of a micro-batch


def _partition_id() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


def send_partition(target: str, stream: str, writer_id: str, batch_id: int, batches: Iterator[pa.RecordBatch],
                   max_rows: int = 200_000) -> tuple[int, int, int, bool]:
    """Append one partition's record batches; (partition, accepted, late, all duplicate).

    The partition is cut into chunks of at most max_rows rows; chunk c of partition p carries
    writer id "<writer_id>/p<p>/c<c>" and the micro-batch id: the same key on every replay."""
    pid = _partition_id()
    accepted = late = 0
    duplicate = True
    chunk, pending, rows = 0, [], 0
    with Client(target) as ws:
        def flush():
            nonlocal chunk, pending, rows, accepted, late, duplicate
            if not pending:
                return
            ack = ws.append(stream, pa.Table.from_batches(pending), writer_id=f"{writer_id}/p{pid}/c{chunk}",
                            batch_id=batch_id)
            accepted += ack.accepted
            late += ack.late
            duplicate &= ack.duplicate
            chunk, pending, rows = chunk + 1, [], 0
        for rb in batches:
            if rb.num_rows == 0:
                continue
            pending.append(rb)
            rows += rb.num_rows
            if rows >= max_rows:
                flush()
        flush()
    return pid, accepted, late, duplicate if chunk else False


class WindowStoreWriter:
    """A foreachBatch callable: `df.writeStream.foreachBatch(WindowStoreWriter(target, stream))`."""

    def __init__(self, target: str, stream: str, writer_id: str = "spark", slide_per_batch: bool = False,
                 max_rows_per_append: int = 200_000):
        self.target = target
        self.stream = stream
        self.writer_id = writer_id
        self.slide_per_batch = slide_per_batch
        self.max_rows = max_rows_per_append
        self.last: dict | None = None   # the last micro-batch's totals, for monitoring and tests

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        target, stream, writer_id, max_rows = self.target, self.stream, self.writer_id, self.max_rows

        def send(batches):
            pid, accepted, late, dup = send_partition(target, stream, writer_id, batch_id, batches, max_rows)
            yield pa.RecordBatch.from_pydict({"partition": [pid], "accepted": [accepted], "late": [late],
                                              "duplicate": [dup]}, schema=_ACK_ARROW)
        acks = batch_df.mapInArrow(send, ACK_SCHEMA).collect()
        slide = None
        if self.slide_per_batch:
            with Client(target) as ws:
                slide = ws.slide(stream, writer_id=f"{writer_id}/slide", batch_id=batch_id)
        self.last = {"batch_id": batch_id, "accepted": sum(a.accepted for a in acks), "late": sum(a.late for a in acks),
                     "duplicate_partitions": sum(bool(a.duplicate) for a in acks), "partitions": len(acks), "slide": slide}


_ACK_ARROW = pa.schema([("partition", pa.int32()), ("accepted", pa.int64()), ("late", pa.int64()),
                        ("duplicate", pa.bool_())])


# -- the "windowstore" data source ---------------------------------------------------------------
@dataclass
class AppendCommit(WriterCommitMessage):
    partition: int
    accepted: int
    late: int
    duplicate: bool


class _StreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: dict):
        self.target = options.get("target", "127.0.0.1:50051")
        self.stream = options["stream"]
        self.writer_id = options.get("writer_id", "spark-sink")
        self.slide_per_batch = options.get("slide_per_batch", "false").lower() == "true"
        self.max_rows = int(options.get("max_rows_per_append", 200_000))

    def write(self, iterator: Iterator[pa.RecordBatch]) -> AppendCommit:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        batch_id = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None
        if batch_id is None:
            raise RuntimeError("windowstore sink: no micro-batch id on this task (use it from writeStream)")
        pid, accepted, late, dup = send_partition(self.target, self.stream, self.writer_id, int(batch_id),
                                                  iterator, self.max_rows)
        return AppendCommit(pid, accepted, late, dup)

    def commit(self, messages, batchId: int) -> None:
        # Appends are already durable in the store and idempotent per (partition, batch id);
        # the commit seals the micro-batch's sub-window when asked.
        if self.slide_per_batch:
            with Client(self.target) as ws:
                ws.slide(self.stream, writer_id=f"{self.writer_id}/slide", batch_id=batchId)

    def abort(self, messages, batchId: int) -> None:
        # Nothing to undo: Spark retries this batch id, and partitions that did arrive are
        # acknowledged as duplicates then, so every row still lands exactly once.
        return None


class _QueryReader(DataSourceReader):
    def __init__(self, options: dict, columns: list[str], decimal_columns: list[int]):
        self.target = options.get("target", "127.0.0.1:50051")
        self.query = options["query"]
        self.columns = columns
        self.decimal_columns = decimal_columns

    def partitions(self):
        return [InputPartition(0)]

    def read(self, partition):
        with Client(self.target) as ws:
            a = ws.query(self.query)
        meta = (a.slide, a.window_start_ms, a.window_end_ms, a.staleness_ms, a.response_ms, a.restarts, a.policy)
        for row in a.rows:
            if self.decimal_columns:
                row = list(row)
                for i in self.decimal_columns:
                    row[i] = None if row[i] is None else Decimal(row[i])
            yield tuple(row) + meta


class WindowStoreDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "windowstore"

    def schema(self) -> str:
        """For reads: the answer's columns, typed from the stream's schema, then the metadata."""
        text = self.options.get("query")
        if not text:
            return "value STRING"  # writes take the DataFrame's own schema
        query = parse_query(text)
        with Client(self.options.get("target", "127.0.0.1:50051")) as ws:
            spec = ws.describe_stream(query.stream)["spec"]
        bound = bind(query, *_schema_and_window(spec))
        cols = [f"`{label}` {_SPARK_TYPES[t]}" for label, t in zip(bound.columns, bound.types)]
        return ", ".join(cols + [f"{n} {t}" for n, t in META_COLUMNS])

    def reader(self, schema):
        from pyspark.sql.types import DecimalType

        if "query" not in self.options:
            raise ValueError("the windowstore reader needs option('query', 'SELECT ...')")
        return _QueryReader(dict(self.options), [f.name for f in schema.fields],
                            [i for i, f in enumerate(schema.fields) if isinstance(f.dataType, DecimalType)])

    def streamWriter(self, schema, overwrite: bool):
        if "stream" not in self.options:
            raise ValueError("the windowstore sink needs option('stream', NAME)")
        return _StreamWriter(dict(self.options))


def _schema_and_window(spec: dict) -> tuple[Schema, WindowSpec]:
    """A stream's schema and window from DescribeStream, to bind a query on the Spark driver."""
    columns = {c["name"]: c["type"].replace("COLUMN_TYPE_", "").lower() for c in spec["columns"]}
    window = WindowSpec(subwindows=spec["subwindows"], subwindow_ms=spec["subwindow_ms"] or None,
                        subwindow_rows=spec["subwindow_rows"] or None,
                        clock=spec["clock"].replace("CLOCK_", "").lower().replace("unspecified", "processing"),
                        allowed_lateness_ms=spec["allowed_lateness_ms"], group_by=tuple(spec["group_by"]),
                        topk=spec["topk"] or 16)
    return Schema.of(columns, spec["time_column"] or "ts"), window


def register(spark: SparkSession) -> None:
    """Make `format("windowstore")` available in this session."""
    spark.dataSource.register(WindowStoreDataSource)


def local_session(app: str, cores: int = 2, **conf: str) -> SparkSession:
    """A local SparkSession whose Python workers run this interpreter (so they import windowstore),
    UI off, with the windowstore data source registered."""
    import os
    import sys

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(f"local[{cores}]").appName(app).config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", str(cores))
               .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true"))
    for k, v in conf.items():
        builder = builder.config(k.replace("__", "."), v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
