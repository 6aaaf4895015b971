"""Spark writes to a partitioned stream (docs/partitions.md): executors route rows to partitions
by the SDK's hash and stage each partition's share on its server; the driver commits the batch on
every partition under one writer id and batch id.

Routing needs no shuffle and no per-row UDF: each Spark task hashes its Arrow record batches with
`store.partitions.partition_of_rows` (vectorized, the same function the SDK uses) and stages the
rows of store partition p under `S.p{p}` on p's server, as attempt `<task attempt>` there. The
driver then commits, on every partition (also those that got no rows, so each one records the
batch), exactly the attempts Spark reports as successful. A replay of the batch (a retried
micro-batch, a restart from the checkpoint) stages again under new attempts; partitions that
committed it acknowledge a duplicate and discard them, the others commit them: exactly once on
every partition, whichever partitions a failed commit had reached.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from windowstore.store.partitions import StaticCluster, partition_name, split_rows

from ..atomic_commit import commit_on_partitions
from ..client import Client
from ..errors import NotFound
from ..partitioned import ClusterClient, Layout
from .staging import _task, stage_rows, timestamps_to_ms, writer_identity

PART_ACK_SCHEMA = "partition INT, writer STRING, attempt STRING, rows LONG, max_event_ms LONG"
_PART_ACK_ARROW = pa.schema([("partition", pa.int32()), ("writer", pa.string()), ("attempt", pa.string()),
                             ("rows", pa.int64()), ("max_event_ms", pa.int64())])


def security_options(connection: dict) -> dict:
    """The TLS and token arguments of a connection (options._connection: target, tls, ca, cert,
    key, token), those set only: what every node of a cluster target is connected with."""
    return {k: v for k, v in connection.items() if k != "target" and v}


def _node(address: str, security: dict | None):
    """A node's target for connect()/stage_rows: its address, with the security options if any."""
    return {"target": address, **security} if security else address


def cluster_layout(nodes: Sequence[str], stream: str, security: dict | None = None) -> Layout:
    """The stream's layout, read from the cluster's servers (ClusterClient.layout)."""
    with ClusterClient(list(nodes), **(security or {})) as cc:
        return cc.layout(stream)


def stage_split(nodes: Sequence[str], stream: str, partitions: int, partition_by: Sequence[str],
                writer_id: str | None, batch_id: int, batches: Iterator[pa.RecordBatch], max_rows: int = 200_000,
                time_to_ms: str | None = None, event_time: str | None = None,
                security: dict | None = None) -> Iterator[pa.RecordBatch]:
    """A Spark task's rows split by store partition and staged on each partition's server under
    this task attempt; yields one acknowledgement row per store partition that got rows, with the
    newest event time of its rows when the stream slides by `event_time` (the driver tells every
    partition the newest of all, so partitions whose keys are idle slide too)."""
    _, attempt, props = _task()
    yield stage_shares(nodes, stream, partitions, partition_by, writer_identity(writer_id, props), batch_id, attempt,
                       batches, max_rows, time_to_ms, event_time, security)


def stage_shares(nodes: Sequence[str], stream: str, partitions: int, partition_by: Sequence[str], writer: str,
                 batch_id: int, attempt: str, batches: Iterator[pa.RecordBatch], max_rows: int = 200_000,
                 time_to_ms: str | None = None, event_time: str | None = None,
                 security: dict | None = None) -> pa.RecordBatch:
    """Rows split by store partition and staged on each partition's server as `attempt` of batch
    (writer, batch_id): by a Spark task (stage_split) or by the driver (stage_on_driver=True). One
    acknowledgement row per store partition that got rows (PART_ACK_SCHEMA)."""
    cluster = StaticCluster(tuple(nodes))
    shares: dict[int, list[pa.RecordBatch]] = defaultdict(list)
    for rb in batches:
        if rb.num_rows:
            rb = timestamps_to_ms(rb, time_to_ms) if time_to_ms else rb
            for p, part in split_rows(pa.Table.from_batches([rb]), partition_by, partitions).items():
                shares[p].extend(part.to_batches())
    parts, writers, attempts, counts, newest = [], [], [], [], []
    for p in sorted(shares):
        addr = cluster.addresses[cluster.owner(stream, p)]
        staged = stage_rows(_node(addr, security), partition_name(stream, p), writer, batch_id, attempt, iter(shares[p]),
                            max_rows)
        parts.append(p)
        writers.append(writer)
        attempts.append(attempt)
        counts.append(staged)
        newest.append(pc.max(pa.Table.from_batches(shares[p]).column(event_time)).as_py() if event_time else None)
    return pa.RecordBatch.from_arrays([pa.array(parts, pa.int32()), pa.array(writers, pa.string()),
                                       pa.array(attempts, pa.string()), pa.array(counts, pa.int64()),
                                       pa.array(newest, pa.int64())],
                                      schema=_PART_ACK_ARROW)


def commit_all(nodes: Sequence[str], stream: str, writer: str, batch_id: int, acks, slide: bool = False,
               event_time_ms: int | None = None, lead: int = 0, after_each=None,
               security: dict | None = None) -> dict:
    """Commit batch (writer, batch_id) on every partition with exactly its acknowledged attempts
    ([(partition, attempt, rows)]), each told `event_time_ms` (the batch's newest event time, on an
    event-time stream), visible from the same slide on every partition (clients/atomic_commit.py);
    an error names the partition that raised it. Returns the sums: accepted, late, duplicate
    (every partition had it), latest_slide (the least), at_slide (the slide it is visible from
    everywhere, when targeted), split (published in different slides: the committer's fallback),
    and per partition: by_partition (accepted rows) and duplicate_partitions (those that had it)."""
    attempts: dict[int, dict[str, int]] = defaultdict(dict)
    for p, attempt, rows in acks:
        attempts[p][attempt] = rows
    with ClusterClient(list(nodes), **(security or {})) as cc:
        lay = cc.layout(stream)
        got = commit_on_partitions(cc, lay, writer, batch_id, attempts, slide=slide, event_time_ms=event_time_ms,
                                   lead=lead, after_each=after_each)
    done = got["results"]
    return {"accepted": sum(r.accepted for r in done.values()), "late": sum(r.late for r in done.values()),
            "duplicate": all(r.duplicate for r in done.values()),
            "latest_slide": min(r.latest_slide for r in done.values()),
            "at_slide": got["at_slide"], "split": got["split"],
            "by_partition": {p: r.accepted for p, r in sorted(done.items())},
            "duplicate_partitions": sorted(p for p, r in done.items() if r.duplicate)}


def create_on_cluster(nodes: Sequence[str], stream: str, schema, opts: dict,
                      security: dict | None = None) -> None:
    """Option create_if_missing on a cluster target: a stream on no server yet is created from the
    DataFrame's schema and the options (schema.creation): partitioned when option `partitions` is
    given (split by option `partition_by`, comma-separated; partitions start at `origin_ms`, default
    now), else an ordinary stream on the server the partition map names."""
    from .schema import column_list, creation

    try:
        cluster_layout(nodes, stream, security)
        return
    except NotFound:
        pass
    args = creation(schema, opts)
    if "partitions" in opts:
        args.update(partitions=opts["partitions"], partition_by=column_list(opts.get("partition_by", "")),
                    origin_ms=opts.get("origin_ms"))
    elif "partition_by" in opts or "origin_ms" in opts:
        raise ValueError("options partition_by and origin_ms need option partitions (the stream's partition count)")
    with ClusterClient(list(nodes), **(security or {})) as cc:
        cc.create_stream(stream, **args)


def describe_partition(nodes: Sequence[str], stream: str, layout: Layout, partition: int = 0,
                       security: dict | None = None) -> dict:
    """The spec of one partition (its schema is the stream's), from its server."""
    cluster = StaticCluster(tuple(nodes))
    with Client(cluster.addresses[cluster.owner(stream, partition)], **(security or {})) as ws:
        return ws.describe_stream(partition_name(stream, partition))["spec"]


# -- reads ----------------------------------------------------------------------------------------
def cluster_nodes(target: str) -> list[str] | None:
    """The addresses of a cluster target ("host1:port,host2:port"), or None for one server."""
    nodes = [a.strip() for a in target.split(",") if a.strip()]
    return nodes if len(nodes) > 1 or "," in target else None


def describe_on_cluster(nodes: Sequence[str], stream: str, security: dict | None = None) -> dict:
    """The spec a read binds against: an ordinary stream's, or a partitioned one's partition 0 (every
    partition has the stream's schema and window), named as the stream."""
    with ClusterClient(list(nodes), **(security or {})) as cc:
        lay = cc.layout(stream)
        if not lay.partitions:
            assert lay.node is not None, "an ordinary stream lives on one node"
            return cc.nodes[lay.node].describe_stream(stream)["spec"]
    return {**describe_partition(nodes, stream, lay, security=security), "name": stream}


def newest_common_slide(nodes: Sequence[str], stream: str, security: dict | None = None) -> tuple[Layout, int]:
    """(layout, k): k the newest slide every partition has sealed (-1: some partition none yet)."""
    with ClusterClient(list(nodes), **(security or {})) as cc:
        lay = cc.layout(stream)
        if not lay.partitions:
            assert lay.node is not None, "an ordinary stream lives on one node"
            return lay, int(cc.nodes[lay.node].describe_stream(stream)["latest_slide"])
        slides = cc.on_partitions(lay, lambda p, n: int(n.describe_stream(partition_name(stream, p))["latest_slide"]))
    return lay, min(slides.values())


def partition_address(nodes: Sequence[str], stream: str, partition: int) -> str:
    cluster = StaticCluster(tuple(nodes))
    return cluster.addresses[cluster.owner(stream, partition)]
