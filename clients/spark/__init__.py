"""Spark integration (needs the `spark` extra).

- `WindowStoreWriter(target, stream, slide_per_batch=False)`: a `foreachBatch` callable.
  Executors stage their partitions as Arrow per task attempt; the driver commits exactly the
  successful attempts, named by the streaming query's id (from its checkpoint) and the micro-batch
  id: every micro-batch lands once, all at once; a replay is a no-op, a replay with other rows is
  refused (FAILED_PRECONDITION). With slide_per_batch=True (clock="manual") the commit also seals
  one sub-window per micro-batch.
- `WindowStoreDataSource`, registered as "windowstore" (Spark 4 Python Data Source API):
  streaming writer (`df.writeStream.format("windowstore").option("target", ...)
  .option("stream", ...)`) with the same staging and commit; batch writer (`df.write.format(...)`,
  exactly once per job, or per `writer_id` + `batch_id` when given); options are checked (an
  unknown one is an error listing the valid ones); and a batch reader running one one-time query
  (`spark.read.format("windowstore").option("target", ...).option("query", ...).load()`) whose
  DataFrame holds the answer rows plus its metadata as columns `_slide`, `_window_start_ms`,
  `_window_end_ms`, `_staleness_ms`, `_response_ms`, `_restarts`, `_policy`, and `_bounds` (the
  row's approximate cells' error bounds as JSON, docs/approximate.md; null for exact rows).
- Every writer compares the DataFrame's schema with the stream's when the write starts
  (check_write_schema: missing, extra and mistyped columns named); a Spark timestamp feeds the
  event-time column as milliseconds (timestamps_to_ms).
- The batch reader pins one slide on the driver and runs the query AS OF SLIDE it in every
  partition (a projection: one run of sub-windows per partition), returns Arrow record batches,
  and with filter_pushdown puts Spark's filters on key / projected columns into WHERE.

The modules, one job each: `source` (the data source, `register`, `local_session`), `writers`
(the writers' driver side: schema check, commit, abort), `staging` (the executors' side: a task's
identity, its rows staged), `reader` (the pinned batch reader), `pushdown` (its filters into
WHERE), `stream_reader` (a periodic query's answers as a stream), `layout` (a read query bound on
the driver: answer columns, types, conversions), `schema` (a DataFrame's schema against a
stream's), `options` (checked options, the connection) and `errors` (the store's errors out of
Spark's). This package re-exports their public names.
"""
from .errors import store_error, store_errors
from .layout import META_COLUMNS
from .options import connect, parse_options
from .schema import SchemaMismatch, check_write_schema, describe, describe_or_create, store_schema
from .source import WindowStoreDataSource, local_session, register
from .staging import BATCH_ID_PROPERTY, QUERY_ID_PROPERTY, stage_partition, stage_rows, timestamps_to_ms, writer_identity
from .writers import ACK_SCHEMA, StagedCommit, WindowStoreWriter

__all__ = ["ACK_SCHEMA", "BATCH_ID_PROPERTY", "META_COLUMNS", "QUERY_ID_PROPERTY", "SchemaMismatch", "StagedCommit",
           "WindowStoreDataSource", "WindowStoreWriter", "check_write_schema", "connect", "describe",
           "describe_or_create", "local_session", "parse_options", "register", "stage_partition", "stage_rows",
           "store_error", "store_errors", "store_schema", "timestamps_to_ms", "writer_identity"]
