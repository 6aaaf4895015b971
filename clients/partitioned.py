"""The SDK over a cluster: `Client(["host1:port", "host2:port", ...])` (docs/partitions.md).

A partitioned stream S of P partitions is P ordinary streams S.p0 ... S.p{P-1}, placed on the
cluster's servers by the partition map (store/partitions.py). This client
- creates the P partitions, each on its owner, with the partition metadata in its spec;
- splits an append's rows by the hash of the partition key and sends each partition its rows, in
  parallel, with the caller's writer id and batch id (so a retried batch is applied once per
  partition);
- broadcasts manual slides (with an idempotency key, so a retry does not slide twice);
- answers a query by scatter-gather: every partition AS OF the newest slide all of them have
  sealed, in partial form, merged here (merge.py).
A stream that is not partitioned lives on the owner of its partition 0 and is used as through a
single-address client.
"""
from __future__ import annotations

import itertools
import queue
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Iterable, Iterator, Mapping, Sequence

import grpc
import pyarrow.compute as pc

from windowstore.store.kinds import Clock
from windowstore.store.parser import to_text
from windowstore.store.partitions import ClusterView, StaticCluster, partition_name, split_rows
from windowstore.v1 import windowstore_pb2 as pb

from .answer import Answer
from .batches import build, to_arrow
from .errors import (AlreadyExists, FailedPrecondition, InvalidArgument, NotFound, Unavailable,
                     WindowStoreError, from_rpc_error)
from .follow import Resubscribing, etcd_view, follow


@dataclass(frozen=True)
class Layout:
    """Where a stream lives: `partitions` 0 for an ordinary stream (on node `node`), else its
    partition count and key."""

    name: str
    partitions: int
    partition_by: tuple[str, ...]
    node: int | None = None
    types: dict | None = None  # column -> int64, string, float64, ... (as the stream declares them)
    event_time: str | None = None  # clock='event': the time column, whose newest value every partition hears
    time_column: str = "ts"  # the event-time column (int64 ms since the epoch), whatever the clock


def _error_like(e: WindowStoreError, message: str) -> WindowStoreError:
    """An error of the same type (and status) as `e`, with `message`."""
    out = type(e)(message)
    out.code = e.code
    return out


# A query pinned to the newest common slide k fails on a partition that has meanwhile slid so far
# that k's window has left it (processing time, under load): read k again, this many times.
_SLID_PAST_RETRIES = 2


class ClusterClient:
    """The blocking client over several servers (see the module docstring); the methods of Client,
    plus `partitions=` and `partition_by=` on create_stream and `partial=` on query."""

    def __init__(self, cluster: Sequence[str] | ClusterView, timeout: float | None = 60.0, retries: int = 3,
                 channel=None, tls: bool = False, ca=None, cert=None, key=None, token: str | None = None,
                 etcd=None, follow_leader: bool = False, failover_s: float = 30.0, writer_id: str | None = None):
        from .client import Client

        if etcd is not None:  # the map and leaders etcd holds, rather than a static list (the Spark option etcd)
            cluster = etcd_view(etcd)
        if not isinstance(cluster, (list, tuple)) and not hasattr(cluster, "owner"):
            raise InvalidArgument("a cluster is a list of server addresses or a ClusterView")
        if channel is not None:
            raise InvalidArgument("channel= is for a single server; a cluster client opens one per server")
        self.cluster: ClusterView = StaticCluster(tuple(cluster)) if isinstance(cluster, (list, tuple)) else cluster  # type: ignore[assignment]  # checked above
        self.timeout = timeout
        # (follow_leader: each node's client follows a refusal naming the leader, on a static cluster)
        self.nodes = [Client(a, timeout=timeout, retries=retries, tls=tls, ca=ca, cert=cert, key=key, token=token,
                             follow_leader=follow_leader, failover_s=failover_s)
                      for a in self.cluster.addresses]
        self._pool = ThreadPoolExecutor(max_workers=max(4, 2 * len(self.nodes)), thread_name_prefix="windowstore-sdk")
        self._layouts: dict[str, Layout] = {}
        # manual slides are broadcast with this writer id and growing batch ids: a retried broadcast
        # slides each partition once
        self._slide_writer = writer_id or f"sdk-slide-{uuid.uuid4().hex}"
        self._slide_batches = itertools.count(1)
        self._periodic: dict[str, tuple] = {}  # a partitioned stream's periodic query: (layout, plan, {partition: id})
        self._texts: dict[str, tuple] = {}  # ... and ({partition: its text}, priority, sketches), to register it again
        self.failover_s = failover_s  # over etcd: how long a call follows a partition's leader changes

    @property
    def target(self) -> list[str]:
        return self.cluster.addresses

    def close(self) -> None:
        for n in self.nodes:
            n.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> "ClusterClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- placement --------------------------------------------------------------------------------
    def _owner(self, stream: str, partition: int):
        node = self.cluster.owner(stream, partition)
        return node, self.nodes[node]

    def _where(self, layout: Layout, partition: int) -> str:
        node = self.cluster.owner(layout.name, partition)
        return (f"partition {partition} of stream {layout.name!r} (stream {partition_name(layout.name, partition)!r} "
                f"on node {node}, {self.cluster.addresses[node]})")

    def _each(self, layout: Layout, fn, partitions: Iterable[int] | None = None, sure: bool = True) -> dict[int, Any]:
        """fn(partition, node client) for each partition in parallel: {partition: result or the
        WindowStoreError it raised}. `sure`: fn may be retried after an error that leaves unknown
        whether it took effect (reads, writes with an idempotency key); see _on_leader."""
        parts = range(layout.partitions) if partitions is None else partitions
        futures = {p: self._pool.submit(self._on_leader, layout.name, p, fn, sure) for p in parts}
        out = {}
        for p, f in futures.items():
            try:
                out[p] = f.result()
            except WindowStoreError as e:
                out[p] = e
        return out

    def _on_leader(self, stream: str, p: int, fn, sure: bool = True):
        """fn(p, the client of partition p's leader), following the leader etcd names over a cluster
        in etcd (an EtcdClusterView) for up to `failover_s`: follow.Following's rule (with `sure`
        False only after refusals, which applied nothing)."""
        return follow(self.cluster, stream, p, sure, self.failover_s, lambda: fn(p, self._owner(stream, p)[1]))

    def on_partitions(self, layout: Layout, fn, partitions: Iterable[int] | None = None,
                      sure: bool = True) -> dict[int, Any]:
        """As _each, raising the first partition's error (with its partition named)."""
        out = self._each(layout, fn, partitions, sure)
        for p, r in out.items():
            if isinstance(r, WindowStoreError):
                raise _error_like(r, f"{self._where(layout, p)}: {r.message}") from r
        return out

    def layout(self, stream: str, refresh: bool = False) -> Layout:
        """Where `stream` lives, read from the servers (every server is asked, in parallel; any one
        holding a partition describes the whole layout) and kept until the stream is dropped here."""
        if not refresh and stream in self._layouts:
            return self._layouts[stream]
        futures = [self._pool.submit(n.list_streams) for n in self.nodes]
        found, down = None, []
        for i, f in enumerate(futures):
            try:
                infos = f.result()
            except Unavailable as e:
                down.append(f"node {i} ({self.cluster.addresses[i]}): {e.message}")
                continue
            for info in infos:
                spec = info["spec"]
                part = spec.get("partition")
                if part is not None and part["count"] and part["stream"] == stream:
                    types = {c["name"]: c["type"].removeprefix("COLUMN_TYPE_").lower() for c in spec["columns"]}
                    event = spec.get("clock") == "CLOCK_EVENT"
                    found = Layout(stream, part["count"], tuple(part["key"]), types=types,
                                   event_time=(spec.get("time_column") or "ts") if event else None,
                                   time_column=spec.get("time_column") or "ts")
                elif spec["name"] == stream and not (part and part["count"]):
                    found = Layout(stream, 0, (), node=i)
        if found is None:
            if down:
                raise Unavailable(f"stream {stream!r} is on no server that answered; unreachable: {'; '.join(down)}")
            raise NotFound(f"stream {stream!r} not found on any server of the cluster")
        self._layouts[stream] = found
        return found

    def _plain(self, stream: str):
        """The client of the node holding ordinary stream `stream` (or None when partitioned)."""
        lay = self.layout(stream)
        return None if lay.partitions else self.nodes[lay.node]  # type: ignore[index]  # an ordinary stream has its node

    # -- streams ----------------------------------------------------------------------------------
    def create_stream(self, name: str, schema: dict[str, str], subwindows: int, subwindow_ms: int | None = None,
                      subwindow_rows: int | None = None, clock: str = "processing", group_by: Iterable[str] = (),
                      allowed_lateness_ms: int = 0, time_column: str = "ts", topk: int = 16,
                      exist_ok: bool = False, last_rows: int = 0, last_rows_by: Iterable[str] = (),
                      last_rows_keys: int = 0, sketches: Mapping | None = None, replication: int = 1,
                      acks: str = "", *, partitions: int | None = None, partition_by: Iterable[str] = (),
                      origin_ms: int | None = None) -> dict:
        """Create a stream: Client.create_stream's parameters (each passed to every partition),
        then the cluster's. With `partitions=P` and `partition_by=[columns]`: P partitions, each on
        its server (in parallel); returns {"name", "partitions", "partition_by", "streams": each
        partition's description}. If some partitions could not be created, call again with
        `exist_ok=True` to create the rest.

        The partitions' sub-windows start at one instant, `origin_ms` (default: now), so slide k
        is the same window on each: with clock='event', rows older than the origin's sub-window
        are late, so give the event time the stream starts at when it is not now."""
        from .client import _dict, create_request

        partition_by = tuple(partition_by)
        if partitions is None:
            if partition_by:
                raise InvalidArgument("partition_by needs partitions")
            node = self._owner(name, 0)[1]
            out = node.create_stream(name, schema, subwindows, subwindow_ms, subwindow_rows, clock, group_by,
                                     allowed_lateness_ms, time_column, topk, exist_ok, last_rows, last_rows_by,
                                     last_rows_keys, sketches=sketches, replication=replication, acks=acks)
            self._layouts.pop(name, None)
            return out
        if not isinstance(partitions, int) or partitions < 1:
            raise InvalidArgument(f"partitions must be a positive integer, got {partitions!r}")
        if not partition_by:
            raise InvalidArgument("a partitioned stream needs partition_by, the columns whose hash places a row")
        timed = clock in (Clock.PROCESSING, Clock.EVENT) and not subwindow_rows
        if origin_ms is not None and not timed:
            raise InvalidArgument("origin_ms applies to time sub-windows with clock='processing' or 'event'")
        origin = (int(time.time() * 1000) if origin_ms is None else origin_ms) if timed else None
        layout = Layout(name, partitions, partition_by, types=dict(schema),
                        event_time=time_column if clock == Clock.EVENT else None, time_column=time_column)

        def create(p: int, node) -> dict:
            req = create_request(partition_name(name, p), schema, subwindows, subwindow_ms, subwindow_rows, clock,
                                 group_by, allowed_lateness_ms, time_column, topk, last_rows, last_rows_by,
                                 last_rows_keys, sketches=sketches)
            req.spec.partition.CopyFrom(pb.PartitionSpec(stream=name, index=p, count=partitions, key=partition_by))
            req.replication, req.acks = replication, acks  # (docs/replication.md)
            if origin is not None:
                req.spec.origin_ms = origin
            try:
                return _dict(node.call("CreateStream", req, False).stream)
            except AlreadyExists:
                if not exist_ok:
                    raise
                got = node.call("DescribeStream", build(pb.DescribeStreamRequest, name=req.spec.name), True).stream
                there = pb.StreamSpec()
                there.CopyFrom(got.spec)
                there.ClearField("origin_ms")
                req.spec.ClearField("origin_ms")
                if there != req.spec:
                    raise AlreadyExists(f"stream {req.spec.name!r} exists with another definition") from None
                return _dict(got)

        streams = self.on_partitions(layout, create)
        self._layouts[name] = layout
        return {"name": name, "partitions": partitions, "partition_by": list(partition_by),
                "streams": [streams[p] for p in range(partitions)]}

    def drop_stream(self, name: str) -> None:
        """Drop a stream (every partition of a partitioned one; those already gone are skipped)."""
        lay = self.layout(name, refresh=True)
        self._layouts.pop(name, None)
        if not lay.partitions:
            self.nodes[lay.node].drop_stream(name)  # type: ignore[index]  # an ordinary stream has its node
            return
        out = self._each(lay, lambda p, n: n.drop_stream(partition_name(name, p)))
        for p, r in out.items():
            if isinstance(r, WindowStoreError) and not isinstance(r, NotFound):
                raise _error_like(r, f"{self._where(lay, p)}: {r.message}") from r

    def list_streams(self) -> list[dict]:
        """Every server's streams (partitions as the streams they are on their servers)."""
        return [s for f in [self._pool.submit(n.list_streams) for n in self.nodes] for s in f.result()]

    def describe_stream(self, name: str) -> dict:
        """An ordinary stream's description; for a partitioned one {"name", "partitions",
        "partition_by", "streams": each partition's description}."""
        node = self._plain(name)
        if node is not None:
            return node.describe_stream(name)
        lay = self.layout(name)
        streams = self.on_partitions(lay, lambda p, n: n.describe_stream(partition_name(name, p)))
        return {"name": name, "partitions": lay.partitions, "partition_by": list(lay.partition_by),
                "streams": [streams[p] for p in range(lay.partitions)]}

    # -- writes -----------------------------------------------------------------------------------
    def append(self, stream: str, columns: Any, writer_id: str = "", batch_id: int | None = None,
               columnar_types: dict[str, str] | None = None):
        """Append a batch. To a partitioned stream: its rows split by partition (key hash), one
        Append per partition that gets rows, in parallel, each with this writer_id and batch_id:
        retrying a batch after an error applies it once on every partition (the partitions that
        had it acknowledge a duplicate). The result sums the partitions' (duplicate: all were)."""
        from .client import AppendResult

        node = self._plain(stream)
        if node is not None:
            return node.append(stream, columns, writer_id, batch_id, columnar_types)
        if columnar_types is not None:
            raise InvalidArgument("columnar_types: a partitioned stream's rows are sent as Arrow")
        lay = self.layout(stream)
        table = to_arrow(columns)
        parts = split_rows(table, lay.partition_by, lay.partitions)
        hint = None
        if lay.event_time is not None and table.num_rows:
            # event time: every partition hears the batch's newest event time, rows or not, so a
            # partition whose keys are idle advances its watermark and slides with the others
            hint = pc.max(table.column(lay.event_time)).as_py()
            empty = table.slice(0, 0)
            parts = {p: parts.get(p, empty) for p in range(lay.partitions)}
        acks = self.on_partitions(lay, lambda p, n: n.append(partition_name(stream, p), parts[p], writer_id, batch_id,
                                                          event_time_ms=hint),
                                  sorted(parts), sure=bool(writer_id) and batch_id is not None)
        if not acks:
            return AppendResult(0, 0, False, -1)
        return AppendResult(sum(a.accepted for a in acks.values()), sum(a.late for a in acks.values()),
                            all(a.duplicate for a in acks.values()), min(a.latest_slide for a in acks.values()))

    def slide(self, stream: str, writer_id: str = "", batch_id: int | None = None) -> int:
        """Seal the open sub-window now (clock='manual'); on a partitioned stream on every
        partition, in parallel, with an idempotency key (this client's own when none is given), so
        slide k is the same slide everywhere. FailedPrecondition if the partitions disagree."""
        node = self._plain(stream)
        if node is not None:
            return node.slide(stream, writer_id, batch_id)
        if not writer_id or batch_id is None:
            writer_id, batch_id = self._slide_writer, next(self._slide_batches)
        lay = self.layout(stream)
        slides = self.on_partitions(lay, lambda p, n: n.slide(partition_name(stream, p), writer_id, batch_id))
        if len(set(slides.values())) != 1:
            raise FailedPrecondition(f"the partitions of stream {stream!r} made different slides: "
                                     + ", ".join(f"partition {p}: {s}" for p, s in sorted(slides.items())))
        return slides[0]

    # -- queries ----------------------------------------------------------------------------------
    def query(self, query: str, priority: int = 0, timeout: float | None = None,
              as_of_slide: int | None = None, partial: bool = False) -> Answer:
        """Run a one-time query. On a partitioned stream: every partition AS OF the same slide (the
        newest all of them have sealed, or `as_of_slide`), merged (merge.py) into one answer whose
        slide and window are that slide's, staleness the slowest partition's. A partition that
        cannot answer: Unavailable naming it; with `partial=True` the answer leaves it out and
        lists it in `missing_partitions`."""
        from windowstore.store.parser import parse_statement
        from windowstore.store.query import JoinQuery

        if not isinstance(query, str):
            raise InvalidArgument("a query on a cluster is SQL text")
        parsed = parse_statement(query)
        if isinstance(parsed, JoinQuery):
            nodes = {id(self._plain(s) or self): self._plain(s) for s in parsed.streams}
            if len(nodes) != 1 or None in nodes.values():
                raise InvalidArgument("a join on a cluster reads ordinary streams on one server")
            return next(iter(nodes.values())).query(query, priority, timeout, as_of_slide)
        node = self._plain(parsed.stream)
        if node is not None:
            return node.query(query, priority, timeout, as_of_slide)
        lay = self.layout(parsed.stream)
        plan = _merge_plan(parsed, lay)
        pinned = as_of_slide is not None
        for attempt in range(1 if pinned else _SLID_PAST_RETRIES + 1):
            missing: list[int] = []
            if not pinned:
                as_of_slide, missing = self._common_slide(lay, partial)
            k = as_of_slide

            def run(p: int, n) -> Answer:
                text = plan.partition_text(partition_name(lay.name, p), k)
                if getattr(plan, "wants_sketches", False):
                    return _with_sketches(n, text, priority, timeout)
                return n.query(text, priority, timeout)

            answers = self._each(lay, run, [p for p in range(lay.partitions) if p not in missing])
            missing += self._unavailable(lay, answers, partial)
            failed = {p: a for p, a in answers.items() if isinstance(a, WindowStoreError) and p not in missing}
            if failed and not pinned and attempt < _SLID_PAST_RETRIES and all(
                    isinstance(a, FailedPrecondition) for a in failed.values()):
                continue  # a partition slid past k while the others were asked: the newest common slide again
            for p, a in failed.items():
                raise _error_like(a, f"{self._where(lay, p)}: {a.message}") from a
            break
        got = [a for p, a in sorted(answers.items()) if p not in missing]
        if not got:
            raise Unavailable(f"no partition of stream {lay.name!r} answered")
        out = plan.merge(got)
        out.stream = lay.name
        out.missing_partitions = sorted(missing)
        out.partition_queries = {p: a.query_id for p, a in sorted(answers.items()) if p not in missing}
        return out

    def _common_slide(self, lay: Layout, partial: bool) -> tuple[int, list[int]]:
        """(k, the partitions left out): k is the newest slide every partition that answered has
        sealed; unreachable partitions are left out only with `partial`."""
        latest = self._each(lay, lambda p, n: n.describe_stream(partition_name(lay.name, p))["latest_slide"])
        missing = self._unavailable(lay, latest, partial)
        for p, r in latest.items():
            if isinstance(r, WindowStoreError) and p not in missing:
                raise _error_like(r, f"{self._where(lay, p)}: {r.message}") from r
        alive = [s for p, s in latest.items() if p not in missing]
        if not alive:
            raise Unavailable(f"no partition of stream {lay.name!r} answered")
        k = min(alive)
        if k < 0:
            raise FailedPrecondition(f"a partition of stream {lay.name!r} has not sealed a slide yet: no window "
                                     f"all partitions share (slides: {dict(sorted(latest.items()))})")
        return k, missing

    def _unavailable(self, lay: Layout, results: dict[int, Any], partial: bool) -> list[int]:
        """The partitions whose result is Unavailable: raised (naming them) unless `partial`."""
        down = [p for p, r in sorted(results.items()) if isinstance(r, Unavailable)]
        if down and not partial:
            raise Unavailable("; ".join(f"{self._where(lay, p)} is unavailable: {results[p].message}"
                                        for p in down)) from results[down[0]]
        return down

    # -- periodic queries ---------------------------------------------------------------------------
    def register(self, query: str, priority: int = 0):
        """Register a periodic query. On a partitioned stream: on every partition, each in the form
        a one-time query runs there (partial aggregates, expressions' partial groups, sketch
        aggregates with their sketches, APPROXIMATE's top-k lists); `subscribe` and `read_answers`
        merge their answers per slide with the one-time merge (_merge_plan). The merge plan is kept
        by this client: subscribe to the returned id through the same client (or `attach`)."""
        from windowstore.store.parser import parse_statement
        from windowstore.store.query import JoinQuery

        from .client import PeriodicQuery

        parsed = parse_statement(query) if isinstance(query, str) else None
        if parsed is None:
            raise InvalidArgument("a query on a cluster is SQL text")
        stream = parsed.streams[0] if isinstance(parsed, JoinQuery) else parsed.stream
        node = self._plain(stream)
        if node is not None or isinstance(parsed, JoinQuery):
            if node is None:
                raise InvalidArgument("a join on a cluster reads ordinary streams on one server")
            return node.register(query, priority)
        if parsed.slide is None:
            raise InvalidArgument("a periodic query needs SLIDE")
        lay = self.layout(stream)
        plan = _merge_plan(replace(parsed, slide=None), lay)
        texts, sketches = _partition_forms(plan, parsed, lay)
        out = self._each(lay, lambda p, n: n.register(texts[p], priority, return_sketches=sketches))
        failed = [p for p, r in out.items() if isinstance(r, WindowStoreError)]
        if failed:  # leave nothing half-registered
            for p, r in out.items():
                if p not in failed:
                    self._owner(stream, p)[1].unregister(r.id)
            r = out[failed[0]]
            raise _error_like(r, f"{self._where(lay, failed[0])}: {r.message}") from r
        qid = f"{stream}/" + ",".join(out[p].id for p in range(lay.partitions))
        self._periodic[qid] = (lay, plan, {p: out[p].id for p in range(lay.partitions)})
        self._texts[qid] = (texts, priority, sketches)
        return PeriodicQuery(qid, out[0].every_slides)

    def attach(self, query_id: str, query: str) -> None:
        """Make a periodic query on a partitioned stream that another client registered (its id,
        `stream/id0,id1,...`, and the text it was registered with) readable through this one:
        `subscribe` and `read_answers` merge its partitions' answers as they would here."""
        from windowstore.store.parser import parse_statement

        if query_id in self._periodic:
            return
        stream, _, ids = query_id.partition("/")
        parsed = parse_statement(query)
        if not ids or getattr(parsed, "stream", None) != stream or parsed.slide is None:  # type: ignore[union-attr]  # a Query's
            raise InvalidArgument(f"query_id {query_id!r} is not a periodic query on a partitioned stream registered "
                                  f"with this text (expected '{getattr(parsed, 'stream', '?')}/<one id per partition>')")
        lay = self.layout(stream)
        each = ids.split(",")
        if len(each) != lay.partitions:
            raise InvalidArgument(f"query_id {query_id!r} names {len(each)} partitions' queries; stream {stream!r} "
                                  f"has {lay.partitions} partitions")
        plan = _merge_plan(replace(parsed, slide=None), lay)  # type: ignore[arg-type]  # a Query
        self._periodic[query_id] = (lay, plan, dict(enumerate(each)))
        texts, sketches = _partition_forms(plan, parsed, lay)
        self._texts[query_id] = (texts, 0, sketches)

    def read_answers(self, query_id: str, after_slide: int = -1, through_slide: int | None = None,
                     limit: int = 1000) -> tuple[list[Answer], int, int]:
        """A periodic query's kept answers reflecting slides in (after_slide, through_slide], as
        Client.read_answers. On a partitioned stream (registered or attached here): one merged
        answer per slide every partition has answered for (a slide one partition passed over is
        passed over); the newest slide is the oldest of the partitions' newest, the oldest kept
        the newest of their oldest, so both hold on every partition."""
        if query_id not in self._periodic:
            return self._node_of_query(query_id).read_answers(query_id, after_slide, through_slide, limit)
        lay, plan, ids = self._periodic[query_id]
        got = self._each(lay, lambda p, n: n.read_answers(ids[p], after_slide, through_slide, limit))
        for p, r in got.items():
            if isinstance(r, WindowStoreError):
                raise _error_like(r, f"{self._where(lay, p)}: {r.message}") from r
        by_slide: dict[int, dict[int, Answer]] = {}
        for p, (answers, _, _) in got.items():
            for a in answers:
                by_slide.setdefault(a.slide, {})[p] = a
        merged = []
        for k in sorted(by_slide):
            parts = by_slide[k]
            if len(parts) == lay.partitions:
                out = plan.merge([parts[q] for q in sorted(parts)])
                out.stream, out.query_id = lay.name, query_id
                out.execution = max(x.execution for x in parts.values())
                merged.append(out)
        newest = min(r[1] for r in got.values())
        oldest = max(r[2] for r in got.values())
        return merged[:limit], newest, oldest

    def unregister(self, query_id: str) -> None:
        if query_id not in self._periodic:
            return self._node_of_query(query_id).unregister(query_id)
        lay, _, ids = self._periodic.pop(query_id)
        self._texts.pop(query_id, None)
        out = self._each(lay, lambda p, n: n.unregister(ids[p]))
        for p, r in out.items():
            if isinstance(r, WindowStoreError) and not isinstance(r, NotFound):
                raise _error_like(r, f"{self._where(lay, p)}: {r.message}") from r

    def list_queries(self, stream: str = "") -> list[dict]:
        """Every server's periodic queries (a partitioned stream's: one per partition)."""
        return [q for f in [self._pool.submit(n.list_queries, stream) for n in self.nodes] for q in f.result()]

    def _node_of_query(self, query_id: str):
        for n, qs in zip(self.nodes, [self._pool.submit(n.list_queries) for n in self.nodes]):
            if any(q["query_id"] == query_id for q in qs.result()):
                return n
        raise NotFound(f"periodic query {query_id!r} not found on any server of the cluster")

    def subscribe(self, query_id: str, timeout: float | None = None, after_slide: int | None = None) -> Iterator[Answer]:
        """Answers of a periodic query as they are produced (after the kept ones for slides after
        `after_slide`, when set: Client.subscription). On a partitioned stream: one merged
        answer per slide once every partition has answered for it (a slide some partition did not
        answer for is passed over when a later one completes); ends when it is unregistered."""
        sub = self.subscription(query_id, timeout, after_slide)
        try:
            yield from sub
        finally:
            sub.cancel()

    def subscription(self, query_id: str, timeout: float | None = None,
                     after_slide: int | None = None) -> "Subscription":
        """A periodic query's subscription, started: an iterator of answers (merged per slide on a
        partitioned stream, registered or attached here) that cancel() ends from any thread;
        `after_slide` as Client.subscription's."""
        if query_id not in self._periodic:
            node = self._node_of_query(query_id)
            return Subscription({0: node.subscription(query_id, timeout, after_slide)}, lambda got: got[0],
                                lambda p: f"periodic query {query_id!r} on {node.target}")
        lay, plan, ids = self._periodic[query_id]

        def merge(got: list[Answer]) -> Answer:
            out = plan.merge(got)
            out.stream, out.query_id = lay.name, query_id
            out.execution = max(x.execution for x in got)
            return out

        calls = {p: self._partition_subscription(query_id, p, timeout, after_slide) for p in ids}
        return Subscription(calls, merge, lambda p: self._where(lay, p))

    def _partition_subscription(self, query_id: str, p: int, timeout: float | None, after_slide: int | None):
        """Partition p's Subscribe call; over etcd one that follows the partition's leader: after a
        failover it registers the partition's query again on the new leader (follow.Resubscribing,
        docs/failover.md) and reads its answers there."""
        lay, _, ids = self._periodic[query_id]
        at, client = self._owner(lay.name, p)
        call = client.subscription(ids[p], timeout, after_slide)
        if not hasattr(self.cluster, "wait") or self.failover_s <= 0:
            return call
        texts, priority, sketches = self._texts[query_id]
        on = [at]  # the node the partition's subscription is on

        def resume(_error, last: int):
            key = uuid.uuid4().hex  # one for every attempt of this re-registration: it registers once
            node, again = self._on_leader(lay.name, p, lambda p, n: (n, n.register(texts[p], priority, key=key,
                                                                                   return_sketches=sketches)))
            ids[p] = again.id
            on[0] = self.nodes.index(node)
            return node.subscription(again.id, timeout, after_slide=last)

        def moved():
            lead = getattr(self.cluster, "partition")(lay.name, p).leader  # (an EtcdClusterView: it has `wait`)
            return None if lead is None or lead.node == on[0] else f"node {lead.node} leads it, not node {on[0]}"
        return Resubscribing(call, resume, moved)

    def explain(self, query: str) -> dict:
        from .client import query_stream

        node = self._plain(query_stream(query))
        if node is None:
            raise InvalidArgument("explain on a partitioned stream: explain the query on one of its partitions")
        return node.explain(query)

    def stats(self, stream: str = "") -> list[dict]:
        """Every server's statistics, node 0 first."""
        return [f.result() for f in [self._pool.submit(n.stats, stream) for n in self.nodes]]


class Subscription:
    """One Subscribe stream per partition (or one, for an ordinary stream), merged per slide: an
    answer once every stream has answered for its slide. A thread per stream reads it into a
    bounded inbox (a consumer that stops reading holds the streams back, and their servers drop
    the oldest answers, counted, rather than this process growing). cancel() ends it from any
    thread; iterating ends when every stream has ended."""

    INBOX = 256  # answers waiting to be merged, over all streams

    def __init__(self, calls: dict, merge, where):
        self._calls, self._merge, self._where = calls, merge, where
        self._inbox: queue.Queue = queue.Queue(maxsize=self.INBOX)
        self._closed = threading.Event()
        for p, c in calls.items():
            threading.Thread(target=self._pump, args=(p, c), daemon=True, name=f"windowstore-sub-{p}").start()
        self._answers = self._merged()

    def __iter__(self) -> Iterator[Answer]:
        return self._answers

    def cancel(self) -> None:
        for c in self._calls.values():
            c.cancel()

    def _put(self, item) -> None:
        while not self._closed.is_set():  # once the merge has ended, nobody takes it
            try:
                self._inbox.put(item, timeout=0.2)
                return
            except queue.Full:
                continue

    def _pump(self, p: int, call) -> None:
        try:
            for a in call:
                self._put((p, Answer.from_pb(a)))
            self._put((p, None))
        except grpc.RpcError as e:
            self._put((p, None if e.code() == grpc.StatusCode.CANCELLED and call.cancelled() else from_rpc_error(e)))
        except WindowStoreError as e:  # a failover the subscription could not follow (follow.Resubscribing)
            self._put((p, e))

    def _merged(self) -> Iterator[Answer]:
        n = len(self._calls)
        pending: dict[int, dict[int, Answer]] = {}
        ended: set[int] = set()
        last = None
        try:
            while len(ended) < n:
                p, a = self._inbox.get()
                if a is None:
                    ended.add(p)
                    continue
                if isinstance(a, WindowStoreError):
                    raise _error_like(a, f"{self._where(p)}: {a.message}") from a
                if last is not None and a.slide <= last:
                    continue
                got = pending.setdefault(a.slide, {})
                got[p] = a
                if len(got) == n:
                    for k in [k for k in pending if k <= a.slide]:
                        del pending[k]
                    last = a.slide
                    yield self._merge([got[q] for q in sorted(got)])
        finally:
            self._closed.set()
            self.cancel()


def _merge_plan(parsed, lay: Layout):
    """How query `parsed` (one-time, or a periodic one without its SLIDE) runs on the partitions of
    `lay` and how their answers merge: one plan for a one-time query's answers and for a periodic
    query's answers of each slide. InvalidArgument names what does not merge exactly."""
    from .approx_merge import plan_approx_merge
    from .expr_merge import plan_expr_merge
    from .merge import plan_merge
    from .sketch_merge import has_sketch, plan_sketch_merge

    if parsed.expr is not None:  # expressions: partial aggregates per partition, the rest after the merge
        return plan_expr_merge(parsed, lay.types or {}, lay.time_column)
    if has_sketch(parsed):  # the partitions' sketches (return_sketches), merged by the sketch library
        return plan_sketch_merge(parsed, lay.types or {})
    if parsed.approximate:  # top-k lists: the thesis's bounds over the partitions' answers
        return plan_approx_merge(parsed, lay.partition_by)
    return plan_merge(parsed, lay.partition_by, lay.types)


def _partition_forms(plan, parsed, lay: Layout) -> tuple[dict[int, str], bool]:
    """A periodic query's text on each partition (the one-time merge's partition form, with its
    SLIDE) and whether its answers carry their sketches: what register sends, and sends again on a
    partition's new leader after a failover."""
    texts = {p: to_text(replace(plan.query, stream=partition_name(lay.name, p), slide=parsed.slide))
             for p in range(lay.partitions)}
    return texts, getattr(plan, "wants_sketches", False)  # each partition's answers carry its sketches


def _with_sketches(node, text: str, priority: int, timeout: float | None) -> Answer:
    """A partition's answer with its merged sketches (QueryRequest.return_sketches, Answer.sketches)
    for sketch_merge.py."""
    from .client import query_request

    req = query_request(text, priority)
    req.return_sketches = True
    return Answer.from_pb(node.call("Query", req, True, timeout).answer)

