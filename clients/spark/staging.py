"""Executor side of every writer: a Spark task's identity (its partition, attempt and the streaming
query's id), and its partition's rows staged in the store under that attempt, in chunks, with a
Spark timestamp event-time column sent as the store's milliseconds. Staged rows stay invisible
until the driver commits the batch (writers.py)."""
from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from .options import connect

BATCH_ID_PROPERTY = "streaming.sql.batchId"  # set by Spark on every task of a micro-batch
QUERY_ID_PROPERTY = "sql.streaming.queryId"  # the streaming query's id, kept in its checkpoint


def _task() -> tuple[int, str, dict]:
    """(partition, attempt name, local properties) of the running Spark task."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return 0, "local", {}
    props = {k: ctx.getLocalProperty(k) for k in (QUERY_ID_PROPERTY, BATCH_ID_PROPERTY)}
    return ctx.partitionId(), f"p{ctx.partitionId()}-t{ctx.taskAttemptId()}", props


def writer_identity(writer_id: str | None, props: dict) -> str:
    """The store's name for a Spark writer: the streaming query's id (a new checkpoint is a new
    query, a restart from the checkpoint the same one), unless the user names it."""
    if writer_id:
        return writer_id
    query_id = props.get(QUERY_ID_PROPERTY)
    if not query_id:
        raise RuntimeError("windowstore: no streaming query id on this task; give writer_id (and a batch id) "
                           "to write outside a streaming query")
    return f"spark-query:{query_id}"


def stage_partition(target: str | dict, stream: str, writer_id: str | None, batch_id: int | None,
                    batches: Iterator[pa.RecordBatch], max_rows: int = 200_000,
                    time_to_ms: str | None = None) -> tuple[str, str, int, int]:
    """Stage one partition's rows under this task attempt (invisible until the batch commits);
    returns (writer, attempt, rows, batch id). Rows go in chunks of at most max_rows; a chunk
    sent again (a retried RPC) replaces itself. `time_to_ms` names an event-time column that
    arrives as an Arrow timestamp: it is sent as int64 milliseconds (see timestamps_to_ms)."""
    _, attempt, props = _task()
    writer = writer_identity(writer_id, props)
    if batch_id is None:
        if props.get(BATCH_ID_PROPERTY) is None:
            raise RuntimeError("windowstore sink: no micro-batch id on this task (use it from writeStream)")
        batch_id = int(props[BATCH_ID_PROPERTY])
    staged = stage_rows(target, stream, writer, batch_id, attempt, batches, max_rows, time_to_ms)
    return writer, attempt, staged, batch_id


def stage_rows(target, stream: str, writer: str, batch_id: int, attempt: str, batches: Iterator[pa.RecordBatch],
               max_rows: int = 200_000, time_to_ms: str | None = None) -> int:
    """Stage record batches under (writer, batch id, attempt) in chunks of at most max_rows;
    returns the rows this attempt has staged."""
    pending: list[pa.RecordBatch]
    staged, chunk, pending, rows = 0, 0, [], 0
    with connect(target) as ws:
        def flush():
            nonlocal chunk, pending, rows, staged
            if pending:
                staged = ws.stage(stream, pa.Table.from_batches(pending), writer, batch_id, attempt, chunk).staged_rows
                chunk, pending, rows = chunk + 1, [], 0
        for rb in batches:
            if rb.num_rows:
                pending.append(timestamps_to_ms(rb, time_to_ms) if time_to_ms else rb)
                rows += rb.num_rows
                if rows >= max_rows:
                    flush()
        flush()
    return staged


def timestamps_to_ms(rb: pa.RecordBatch, column: str) -> pa.RecordBatch:
    """`column` (an Arrow timestamp: Spark's TimestampType, microseconds since the epoch UTC) as the
    store's event time, int64 milliseconds since the epoch, as the store converts one
    (store.schema.event_time_ms: floor(us / 1000), NULLs kept, to be refused)."""
    i = rb.schema.get_field_index(column)
    col = rb.column(i)
    if not pa.types.is_timestamp(col.type):
        return rb
    from windowstore.store.schema import event_time_ms

    return rb.set_column(i, pa.field(column, pa.int64()), event_time_ms(column, col))
