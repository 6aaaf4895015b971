"""The writers, driver side: the foreachBatch callable (WindowStoreWriter), the data source's
streaming sink and batch writer. Each checks the DataFrame's schema when the write starts, has
its tasks stage their partitions (staging.py), and commits exactly the successful attempts of a
batch, once (a replay is a no-op, a replay with other rows refused), or aborts them."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from ..partitioned import Layout
from .options import _WRITE_OPTIONS, _connection, connect, parse_options
from windowstore.store.partitions import partition_name

from .partitioned import (PART_ACK_SCHEMA, cluster_layout, cluster_nodes, commit_all, create_on_cluster,
                          describe_partition, security_options, stage_shares, stage_split)
from .schema import check_write_schema, describe, describe_or_create
from .staging import BATCH_ID_PROPERTY, QUERY_ID_PROPERTY, _task, stage_partition, stage_rows, writer_identity


class WindowStoreWriter:
    """A foreachBatch callable: `df.writeStream.foreachBatch(WindowStoreWriter(target, stream))`.

    Each micro-batch lands exactly once, atomically: executors stage their partitions' rows per
    task attempt (Arrow; nothing but a small acknowledgement goes to the driver), and the driver
    commits exactly the attempts Spark reports as successful, named by the streaming query's id
    and the batch id. A replay of the batch (after a failure or a restart from the checkpoint) is
    a no-op; one with other rows is refused. `writer_id` names the writer instead of the query id
    (needed only outside streaming queries). With slide_per_batch=True (clock="manual") the
    commit also seals one sub-window, atomically with the rows.

    stage_on_driver=True is for small, latency-bound micro-batches (thousands of rows): the batch
    comes to the driver as Arrow (`toArrow()`, one Spark job without a Python worker per task or
    an acknowledgement collect), which stages it as one attempt of its own and commits it: still
    exactly once (a replay stages under a new attempt and its commit is a no-op; what a failed
    call staged is never committed). In the freshness benchmark (5,000 rows/s, local[2]) the
    foreachBatch call took ~85-100 ms instead of ~150-175 ms. Every row passes through the driver:
    keep the default for large micro-batches.

    `target` a list of addresses (a cluster, node 0 first) writes to a partitioned stream: each
    task splits its rows by the stream's partition key with the SDK's hash and stages them on
    their partitions' servers; the batch commits on every partition under the same writer id and
    batch id (clients/spark/partitioned.py, docs/partitions.md). With stage_on_driver=True the
    driver splits the Arrow batch itself and stages each partition's share as one attempt, then
    commits as the executor path does (atomic_commit.py)."""

    def __init__(self, target: str | list[str], stream: str, writer_id: str | None = None, slide_per_batch: bool = False,
                 max_rows_per_append: int = 200_000, stage_on_driver: bool = False, **security):
        # security: tls, ca, cert, key, token (as Client takes them), for the executors too
        self.nodes = list(target) if isinstance(target, (list, tuple)) else None
        self.security = {k: v for k, v in security.items() if v}  # every node's, on a cluster target
        self.target: str | dict
        if self.nodes is not None:  # a cluster's node 0 until the first batch finds the node of an ordinary stream
            self.target = {"target": self.nodes[0], **self.security} if self.security else self.nodes[0]
        else:
            self.target = {"target": target, **security} if security else str(target)
        self._layout: Layout | None = None  # a cluster target's stream layout, read on the first batch
        self.stream = stream
        self.writer_id = writer_id
        self.slide_per_batch = slide_per_batch
        self.max_rows = max_rows_per_append
        self.stage_on_driver = stage_on_driver
        self.last: dict | None = None   # the last micro-batch's totals, for monitoring and tests
        self._checked: tuple | None = None  # (the schema checked, its event-time column to convert)

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        if self.nodes is not None:
            if self._layout is None:
                self._layout = cluster_layout(self.nodes, self.stream, self.security)
            if self._layout.partitions:
                return self._write_partitioned(batch_df, batch_id)
            assert self._layout.node is not None, "an ordinary stream lives on one node"
            node = self.nodes[self._layout.node]  # an ordinary stream on one node of the cluster
            self.target = {"target": node, **self.security} if self.security else node
        target, stream, writer_id, max_rows = self.target, self.stream, self.writer_id, self.max_rows
        if self._checked is None or self._checked[0] != batch_df.schema:  # the first batch (or a new schema)
            self._checked = (batch_df.schema, check_write_schema(batch_df.schema, describe(target, stream)))
        time_to_ms = self._checked[1]

        def stage(batches):
            writer, attempt, rows, _ = stage_partition(target, stream, writer_id, batch_id, batches, max_rows,
                                                       time_to_ms)
            yield pa.RecordBatch.from_pydict({"writer": [writer], "attempt": [attempt], "rows": [rows]},
                                              schema=_ACK_ARROW)
        if self.stage_on_driver:
            writer, attempt = self._driver_writer(batch_df), f"driver-{uuid.uuid4().hex}"
            rows = stage_rows(target, stream, writer, batch_id, attempt, iter(batch_df.toArrow().to_batches()),
                              max_rows, time_to_ms)
            attempts, parts = ({attempt: rows} if rows else {}), 1
        else:
            acks = batch_df.mapInArrow(stage, ACK_SCHEMA).collect()
            # no partitions at all: nothing to publish, but the batch may still slide
            writer = acks[0].writer if acks else self._driver_writer(batch_df)
            attempts, parts = {a.attempt: a.rows for a in acks}, len(acks)
        with connect(target) as ws:
            ack = ws.commit_batch(stream, writer, batch_id, attempts, slide=self.slide_per_batch)
        self.last = {"batch_id": batch_id, "writer": writer, "accepted": ack.accepted, "late": ack.late,
                     "duplicate": ack.duplicate, "partitions": parts, "latest_slide": ack.latest_slide}

    def _write_partitioned(self, batch_df: DataFrame, batch_id: int) -> None:
        nodes, stream, writer_id, max_rows, lay = self.nodes, self.stream, self.writer_id, self.max_rows, self._layout
        security = self.security
        assert nodes is not None and lay is not None, "a cluster target's layout is read first"
        if self._checked is None or self._checked[0] != batch_df.schema:
            spec = describe_partition(nodes, stream, lay, security=security)
            self._checked = (batch_df.schema, check_write_schema(batch_df.schema, spec))
        time_to_ms = self._checked[1]

        def stage(batches):
            yield from stage_split(nodes, stream, lay.partitions, lay.partition_by, writer_id, batch_id, batches,
                                   max_rows, time_to_ms, lay.event_time, security)
        if self.stage_on_driver:  # the driver splits the Arrow batch and stages each share as one attempt
            writer = self._driver_writer(batch_df)
            acks: list = [SimpleNamespace(**r) for r in stage_shares(
                nodes, stream, lay.partitions, lay.partition_by, writer, batch_id, f"driver-{uuid.uuid4().hex}",
                iter(batch_df.toArrow().to_batches()), max_rows, time_to_ms, lay.event_time, security).to_pylist()]
        else:
            acks = batch_df.mapInArrow(stage, PART_ACK_SCHEMA).collect()
            writer = acks[0].writer if acks else self._driver_writer(batch_df)
        newest = [a.max_event_ms for a in acks if a.max_event_ms is not None]
        done = commit_all(nodes, stream, writer, batch_id, [(a.partition, a.attempt, a.rows) for a in acks],
                          slide=self.slide_per_batch, event_time_ms=max(newest) if newest else None, security=security)
        self.last = {"batch_id": batch_id, "writer": writer, "accepted": done["accepted"], "late": done["late"],
                     "duplicate": done["duplicate"], "partitions": len({a.partition for a in acks}),
                     "latest_slide": done["latest_slide"], "by_partition": done["by_partition"],
                     "duplicate_partitions": done["duplicate_partitions"], "at_slide": done["at_slide"],
                     "split": done["split"]}

    def _driver_writer(self, batch_df: DataFrame) -> str:
        """The writer identity as a task would name it: writer_id, or the streaming query's id."""
        query_id = batch_df.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
        return writer_identity(self.writer_id, {QUERY_ID_PROPERTY: query_id})



ACK_SCHEMA = "writer STRING, attempt STRING, rows LONG"
_ACK_ARROW = pa.schema([("writer", pa.string()), ("attempt", pa.string()), ("rows", pa.int64())])


# -- the data source's writers: df.writeStream.format("windowstore") and df.write.format("windowstore") ----------
@dataclass
class StagedCommit(WriterCommitMessage):
    writer: str
    attempt: str
    rows: int


@dataclass
class PartitionsStaged(WriterCommitMessage):
    """A task's rows staged on a partitioned stream: [(partition, attempt, rows, newest event time)]."""
    writer: str
    staged: list


class _OnCluster:
    """A data source writer's target when it is a cluster ("host1:port,host2:port"): a partitioned
    stream's tasks split their rows by partition and stage each share on its partition's server;
    the driver commits the batch on every partition (partitioned.py). An ordinary stream on one of
    the servers is written as on one server."""

    def __init__(self, nodes: list[str], stream: str, opts: dict, schema=None):
        self.nodes, self.stream = nodes, stream
        self.security = security_options(_connection(opts))  # TLS and token: every node's
        if opts.get("create_if_missing") and schema is not None:
            create_on_cluster(nodes, stream, schema, opts, self.security)
        self.layout = cluster_layout(nodes, stream, self.security)

    def address(self) -> str | None:
        """An ordinary stream's server (None for a partitioned stream)."""
        return None if self.layout.partitions else self.nodes[self.layout.node]  # type: ignore[index]  # set then

    def spec(self) -> dict:
        return describe_partition(self.nodes, self.stream, self.layout, security=self.security)

    def stage(self, writer_id: str | None, batch_id: int, batches, max_rows: int, time_to_ms) -> PartitionsStaged:
        lay = self.layout
        acks = [rb.to_pylist() for rb in stage_split(self.nodes, self.stream, lay.partitions, lay.partition_by,
                                                     writer_id, batch_id, batches, max_rows, time_to_ms,
                                                     lay.event_time, self.security)]
        rows = [r for batch in acks for r in batch]
        writer = rows[0]["writer"] if rows else writer_identity(writer_id, _task()[2])
        return PartitionsStaged(writer, [(r["partition"], r["attempt"], r["rows"], r["max_event_ms"]) for r in rows])

    def commit(self, messages, batch_id: int, slide: bool) -> None:
        messages = [m for m in messages if m is not None]
        if not messages:
            return  # no task ran: nothing was staged, nothing to publish
        newest = [t for m in messages for *_, t in m.staged if t is not None]
        commit_all(self.nodes, self.stream, messages[0].writer, batch_id, [(p, a, n) for m in messages for p, a, n, _ in m.staged],
                   slide=slide, event_time_ms=max(newest) if newest else None, security=self.security)

    def abort(self, messages, batch_id: int) -> None:
        from ..partitioned import ClusterClient

        writers = {m.writer for m in messages if m is not None}
        with ClusterClient(self.nodes, **self.security) as cc:
            for writer in writers:
                cc.on_partitions(self.layout, lambda p, n: n.abort_batch(partition_name(self.stream, p), writer,
                                                                          batch_id))


def _cluster_target(opts: dict, schema=None) -> _OnCluster | None:
    nodes = cluster_nodes(opts.get("target", ""))
    if nodes is None:
        return None
    on = _OnCluster(nodes, opts["stream"], opts, schema)
    address = on.address()
    if address is not None:  # an ordinary stream on one server of the cluster
        opts["target"] = address
        return None
    return on


class _StreamWriter(DataSourceStreamArrowWriter):
    """Streaming sink: tasks stage per attempt; commit publishes the micro-batch atomically."""

    def __init__(self, options: dict, schema=None):
        opts = parse_options(options, _WRITE_OPTIONS)
        if "stream" not in opts:
            raise ValueError("the windowstore sink needs option('stream', NAME)")
        self.cluster = _cluster_target(opts, schema)
        self.target = _connection(opts)
        self.stream = opts["stream"]
        self.writer_id = opts.get("writer_id")
        self.slide_per_batch = opts.get("slide_per_batch", False)
        self.max_rows = opts.get("max_rows_per_append", 200_000)
        # checked on the driver when the query starts, not in a task later
        self.time_to_ms = None if schema is None else check_write_schema(
            schema, self.cluster.spec() if self.cluster else describe_or_create(self.target, self.stream, schema, opts))

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedCommit | PartitionsStaged:
        if self.cluster is not None:
            props = _task()[2]
            if props.get(BATCH_ID_PROPERTY) is None:
                raise RuntimeError("windowstore sink: no micro-batch id on this task (use it from writeStream)")
            return self.cluster.stage(self.writer_id, int(props[BATCH_ID_PROPERTY]), iterator, self.max_rows,
                                      self.time_to_ms)
        writer, attempt, rows, _ = stage_partition(self.target, self.stream, self.writer_id, None, iterator,
                                                   self.max_rows, self.time_to_ms)
        return StagedCommit(writer, attempt, rows)

    def commit(self, messages, batchId: int) -> None:
        if self.cluster is not None:
            return self.cluster.commit(messages, batchId, self.slide_per_batch)
        messages = [m for m in messages if m is not None]
        if not messages:
            return  # no task ran: nothing was staged, nothing to publish
        with connect(self.target) as ws:
            ws.commit_batch(self.stream, messages[0].writer, batchId, {m.attempt: m.rows for m in messages},
                            slide=self.slide_per_batch)

    def abort(self, messages, batchId: int) -> None:
        if self.cluster is not None:
            return self.cluster.abort(messages, batchId)
        writers = {m.writer for m in messages if m is not None}
        with connect(self.target) as ws:
            for writer in writers:
                ws.abort_batch(self.stream, writer, batchId)


class _BatchWriter(DataSourceArrowWriter):
    """`df.write.format("windowstore")`: one batch, exactly once per job (the same staging)."""

    def __init__(self, options: dict, schema=None):
        opts = parse_options(options, _WRITE_OPTIONS)
        if "stream" not in opts:
            raise ValueError("the windowstore writer needs option('stream', NAME)")
        self.cluster = _cluster_target(opts, schema)
        self.target = _connection(opts)
        self.stream = opts["stream"]
        self.time_to_ms = None if schema is None else check_write_schema(
            schema, self.cluster.spec() if self.cluster else describe_or_create(self.target, self.stream, schema, opts))
        # give writer_id and batch_id to make a re-run of the same job a no-op
        self.writer_id = opts.get("writer_id") or f"spark-write:{uuid.uuid4()}"
        self.batch_id = opts.get("batch_id", 0)
        self.slide = opts.get("slide_per_batch", False)
        self.max_rows = opts.get("max_rows_per_append", 200_000)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedCommit | PartitionsStaged:
        if self.cluster is not None:
            return self.cluster.stage(self.writer_id, self.batch_id, iterator, self.max_rows, self.time_to_ms)
        writer, attempt, rows, _ = stage_partition(self.target, self.stream, self.writer_id, self.batch_id, iterator,
                                                   self.max_rows, self.time_to_ms)
        return StagedCommit(writer, attempt, rows)

    def commit(self, messages) -> None:
        if self.cluster is not None:
            return self.cluster.commit([m or PartitionsStaged(self.writer_id, []) for m in messages], self.batch_id,
                                       self.slide)
        with connect(self.target) as ws:
            ws.commit_batch(self.stream, self.writer_id, self.batch_id,
                            {m.attempt: m.rows for m in messages if m is not None}, slide=self.slide)

    def abort(self, messages) -> None:
        if self.cluster is not None:
            return self.cluster.abort([PartitionsStaged(self.writer_id, [])], self.batch_id)
        with connect(self.target) as ws:
            ws.abort_batch(self.stream, self.writer_id, self.batch_id)
