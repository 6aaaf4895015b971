"""WindowStoreService: maps RPCs onto the driver. Handlers are coroutines on the server's event
loop (rpc.py receives the call, authenticates it and maps errors to status codes): they parse and
convert (pure work), then run their read or write on the engine right there (driver/: the engine
runs on the same loop). What waits (a write until it is durable, a query of several scheduler
operations, an open Subscribe) awaits a future and holds no thread."""
from __future__ import annotations

import asyncio
import logging
import functools
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from windowstore.store import InvalidInput, to_text
from windowstore.store.parser import parse_statement
from windowstore.store.query import JoinQuery
from windowstore.txn import Result
from windowstore.txn.ingest import content_digest
from windowstore.txn.joins import stream_names
from windowstore.v1 import windowstore_pb2 as pb

from windowstore.txn.commands import (AbortBatch, Append, CommitBatch, CreateStream, DropStream, Register, Slide,
                                      StageRows, Unregister)

from . import convert, oplog
from .append_order import AppendOrder
from .convert_sketches import sketches_to_pb
from .driver.job_threads import lower_priority
from .driver import CLOSED, Driver, FailedPrecondition, NotFound, ResourceLimit, ShuttingDown
from .replication.rpcs import ReplicationRpcs
from .rpc import PermissionDenied, principal
from .security import AccessPolicy

# Arrow payloads above this size are decoded and validated on a worker thread, so the event loop
# keeps answering other calls meanwhile. Below it the hand-off costs more than it frees (a 10^4-row
# batch decodes in about 0.1 ms on the loop; with a lower threshold writers of such batches ingested
# less: docs/bench-history.md). A keyed batch's content digest is computed there too: a 10^4-row
# batch's 0.4 ms did not pay for the hand-off either (docs/performance.md, Round 19).
_OFF_LOOP_BYTES = 1 << 20
# Parsed queries are immutable values: the same text (a dashboard's, a load generator's) is parsed
# once. Only short texts are kept, so the cache's memory is bounded (4,096 x 4 KiB at most).
_CACHED_TEXT = 4096
_parse_cached = functools.lru_cache(maxsize=4096)(parse_statement)
MAX_REQUEST_KEY = 200  # characters of a RegisterQuery's idempotency key


def _parse(text: str):
    """A query text: one stream's query, or a join of several streams' windows."""
    return _parse_cached(text) if len(text) <= _CACHED_TEXT else parse_statement(text)


def _streams(query) -> list[str]:
    """The streams a parsed query reads (a join: each once, FROM order)."""
    if isinstance(query, JoinQuery):
        return list(dict.fromkeys(query.streams))
    return [query.stream]


def _info(driver: Driver, name: str) -> pb.StreamInfo:
    return convert.stream_info_to_pb(driver.stream(name), driver.stopped(name))


def looks_like_seconds(column, now_ms: float) -> bool:
    """Event times that are seconds since the epoch, given where milliseconds are expected: every
    one is far (over a day) from the server's clock, and within a day of it once multiplied by 1000."""
    import pyarrow.compute as pc

    if len(column) == 0 or not (column.type.id == pa.int64().id):
        return False
    day = 86_400_000
    first = column[0].as_py()
    if first is not None and not (now_ms - day <= first * 1000 <= now_ms + day and first < now_ms - day):
        return False  # one time that is not seconds settles it: no pass over the column (every Append asks)
    lo, hi = pc.min_max(column).values()
    lo, hi = lo.as_py(), hi.as_py()
    return lo is not None and now_ms - day <= lo * 1000 and hi * 1000 <= now_ms + day and hi < now_ms - day


def _decoded(decode, preparer, keyed: bool, prepare: bool):
    """(batch, ipc, digest, prepared): an Append's rows, prepared for their stream when `prepare`
    (store/prepared.py: the schema check, the event times' bounds and string codes, which the
    engine would otherwise compute on the event loop), and a keyed one's content digest
    (txn/ingest.py's content_digest), in one step where the caller runs it (a worker thread for a
    large payload). `preparer`: the stream's (None: the engine computes all of it)."""
    batch, ipc = decode()
    if preparer is None:
        return batch, ipc, None, None
    prepared = preparer.prepare(batch) if prepare else None
    return batch, ipc, content_digest(preparer.schema, batch, prepared) if keyed else None, prepared


def _short(name: str, limit: int = 100) -> str:
    return name if len(name) <= limit else name[:limit] + "..."


class WindowStoreService(ReplicationRpcs):
    def __init__(self, driver: Driver, policy: AccessPolicy | None = None, cluster=None):
        self.driver = driver
        self.cluster = cluster  # a StaticCluster (--cluster, --node config.node) or None
        self.config = driver.config
        self.policy = policy
        self._per_client: dict[str, int] = {}  # touched only on the event loop: no lock
        self.order = AppendOrder(self.config.append_order_wait_s)  # a writer's pipelined Appends
        self._decoders = ThreadPoolExecutor(max_workers=max(1, self.config.workers),
                                            thread_name_prefix="windowstore-decode",
                                            initializer=lower_priority(self.config.background_nice))

    def close(self) -> None:
        self._decoders.shutdown(wait=False, cancel_futures=True)

    def _admit(self, context) -> str:
        """Per-client admission: at most max_requests_per_client in progress (waiting) each."""
        who = context.peer() if self.policy is None else principal()
        n = self._per_client.get(who, 0)
        if n >= self.config.max_requests_per_client:
            self.driver.note_shed()
            raise ResourceLimit(f"{n} requests of this client are in progress (limit "
                                f"{self.config.max_requests_per_client}); retry with backoff")
        self._per_client[who] = n + 1
        return who

    def _done(self, who: str) -> None:
        n = self._per_client.get(who, 1) - 1
        if n:
            self._per_client[who] = n
        else:
            self._per_client.pop(who, None)

    # -- who may do what (the caller was authenticated by rpc.py) ----------------------------------
    def _allow(self, context, action: str, stream: str) -> str:
        """The caller's principal, if it may `action` the stream; else PERMISSION_DENIED."""
        p = principal()
        if self.policy is not None and not self.policy.allowed(p, action, stream):
            raise PermissionDenied(f"{_short(p)!r} may not {action} stream {_short(stream)!r}")
        return p

    def _may(self, action: str, stream: str) -> bool:
        return self.policy is None or self.policy.allowed(principal(), action, stream)

    async def _run(self, fn, context):
        """A read, run now on the engine (after any due slide)."""
        d = self.driver
        if not d.ready:
            await d.until_ready()
        return d.read(fn)

    async def _write(self, cmd, context, on_applied=None):
        """Apply a command now; returns once it is durable (or raises: nothing was applied when
        the command was refused; DEADLINE_EXCEEDED when the deadline passed before it was durable).
        `on_applied(result)` runs once it is applied, before it is durable."""
        d = self.driver
        if not d.ready:
            await d.until_ready()
        who = self._admit(context)
        try:
            self._check_replica_write(cmd)
            result, durable = d.write(cmd)
            if on_applied is not None:
                on_applied(result)
            if durable is not None:
                # no timer of ours for the caller's deadline: gRPC cancels this handler when it
                # passes (the caller gets DEADLINE_EXCEEDED); asyncio.wait_for cost ~12 us a call
                await durable
                await self._replica_committed(cmd)
            return result
        finally:
            self._done(who)

    # -- streams -------------------------------------------------------------------------------
    async def CreateStream(self, request, context):
        name, columns, time_column, spec = convert.spec_from_pb(request.spec)
        self._allow(context, "admin", name)
        if spec.partitions:
            self._check_placement(name, spec)
        create = CreateStream(name, tuple(columns.items()), time_column, spec, 0.0)
        replicated = self._replicas_for(name, spec, request.replication, request.acks)
        if replicated is None:
            await self._write(create, context)
        else:
            await self._create_replicated(name, *replicated, lambda: self._write(create, context))
        oplog.event("stream_created", stream=name, clock=spec.clock, subwindows=spec.subwindows,
                    subwindow_ms=spec.subwindow_ms, subwindow_rows=spec.subwindow_rows, client=principal())
        return pb.CreateStreamResponse(stream=await self._run(lambda: _info(self.driver, name), context))

    def _check_placement(self, name: str, spec) -> None:
        """A partition is named for its stream and index, and, with a cluster file, lives on the
        node the file places it on."""
        from windowstore.store.partitions import partition_name

        if 0 <= spec.partition < spec.partitions and name != partition_name(spec.partition_of, spec.partition):
            raise InvalidInput(f"partition {spec.partition} of stream {_short(spec.partition_of)!r} is named "
                               f"{partition_name(_short(spec.partition_of), spec.partition)!r}, not {_short(name)!r}")
        if self.cluster is not None and 0 <= spec.partition < spec.partitions:
            owner = self.cluster.owner(spec.partition_of, spec.partition)
            if owner != self.config.node:
                raise FailedPrecondition(
                    f"partition {spec.partition} of stream {_short(spec.partition_of)!r} belongs on node {owner} "
                    f"({self.cluster.nodes[owner]}) by the cluster file, not on this node {self.config.node}")

    async def DropStream(self, request, context):
        self._allow(context, "admin", request.name)
        gone = await self._write(DropStream(request.name, 0.0), context)
        await self._run(lambda: self.driver.close_periodic(gone, f"stream {request.name!r} was dropped"), context)
        self.driver.seconds_like.pop(request.name, None)
        oplog.event("stream_dropped", stream=request.name, periodic_queries_ended=len(gone), client=principal())
        return pb.DropStreamResponse()

    async def ListStreams(self, request, context):
        d = self.driver
        infos = await self._run(lambda: [_info(d, n) for n in sorted(d.sched.streams)], context)
        return pb.ListStreamsResponse(streams=[i for i in infos if self._may("read", i.spec.name)])

    async def DescribeStream(self, request, context):
        self._allow(context, "read", request.name)
        return pb.DescribeStreamResponse(stream=await self._run(lambda: _info(self.driver, request.name), context))

    async def _batch(self, request, context, keyed: bool = False, prepare: bool = False):
        """(batch, ipc, digest, prepared, schema): an Append's or StageRows' rows, once the caller
        may write the stream and they fit; with `keyed` their content digest under the stream's
        `schema` (None when the schema refuses them: the engine says why); with `prepare`, a large
        payload's rows prepared for the stream (store/prepared.py). A large payload is decoded,
        prepared and digested on a worker thread: the event loop goes on serving other calls."""
        self._allow(context, "write", request.stream)
        limit = self.config.max_decompressed_mb << 20
        decode, size = convert.batch_decoder(request, limit)
        off_loop = size > _OFF_LOOP_BYTES
        prepare = prepare and off_loop  # (on the loop the engine's own pass costs what preparing would)
        preparer = self._preparer(request.stream, prepare) if keyed or prepare else None
        work = functools.partial(_decoded, decode, preparer, keyed, prepare)
        if off_loop:
            got = await asyncio.get_running_loop().run_in_executor(self._decoders, work)
        else:
            got = work()
        batch, ipc, digest, prepared = got
        if batch.num_rows > self.config.max_rows_per_batch:
            raise ResourceLimit(f"batch of {batch.num_rows} rows exceeds the limit of {self.config.max_rows_per_batch}")
        return batch, ipc, digest, prepared, None if preparer is None else preparer.schema

    async def Append(self, request, context):
        self._allow(context, "write", request.stream)  # before any field is judged: a caller who may
        # not write learns nothing of the stream from which of its fields are refused
        batch_id = request.batch_id if request.HasField("batch_id") else None
        if batch_id is not None and not request.writer_id:
            raise InvalidInput("batch_id needs a writer_id (together they are the idempotency key)")
        after = request.after_batch_id if request.HasField("after_batch_id") else None
        if after is not None and batch_id is None:
            raise InvalidInput("AppendRequest.after_batch_id needs a writer_id and a batch_id (the batch it follows "
                               "is the same writer's)")
        if batch_id is None:
            return await self._append(request, None, None, context)
        key = (request.stream, request.writer_id, batch_id)
        self.order.arrived(key)
        applied = []
        try:
            return await self._append(request, batch_id, after, context, lambda _: applied.append(True))
        finally:
            self.order.settled(key, bool(applied))

    async def _append(self, request, batch_id, after, context, on_applied=None):
        """An Append's rows applied, after the writer's batch `after` when it names one (append_order.py)."""
        batch, ipc, digest, prepared, schema = await self._batch(request, context, batch_id is not None, True)
        if after is not None:
            stream, writer = request.stream, request.writer_id
            await self.order.after((stream, writer, after), lambda: self.driver.appended(stream, writer, after))
        event_time_ms = request.event_time_ms if request.HasField("event_time_ms") else None
        columns = schema.columns if schema is not None and digest is not None else None  # what the digest is of
        ack = await self._write(Append(request.stream, batch, request.writer_id, batch_id, 0.0, ipc, event_time_ms,
                                       digest, columns, prepared), context, on_applied)
        if not ack.duplicate:
            self._check_units(request.stream, batch)
        return pb.AppendResponse(accepted_rows=ack.accepted, late_rows=ack.late, duplicate=ack.duplicate,
                                 latest_slide=ack.latest_slide)

    def _preparer(self, stream: str, strings: bool):
        """What prepares the stream's batch and digests a keyed one off the loop (store/prepared.py;
        `strings`: with a snapshot of its dictionary, for a batch to be prepared), or None (no such
        stream: the engine refuses the Append; the engine still recovering: it computes all of it
        itself)."""
        if not self.driver.ready:
            return None
        try:
            return self.driver.stream(stream).preparer(strings)
        except NotFound:
            return None

    def _check_units(self, stream: str, batch) -> None:
        """Count (and warn once per stream of) a batch whose event times look like seconds."""
        try:
            column = batch.column(self.driver.stream(stream).schema.time_column)
        except (KeyError, NotFound):  # dropped meanwhile
            return
        if looks_like_seconds(column, time.time() * 1000.0) and self.driver.note_seconds_like(stream) == 1:
            oplog.event("event_times_look_like_seconds", logging.WARNING, stream=stream,
                        hint="event times are milliseconds since the epoch: multiply seconds by 1000")

    async def Slide(self, request, context):
        self._allow(context, "write", request.stream)
        batch_id = request.batch_id if request.HasField("batch_id") else None
        if batch_id is not None and not request.writer_id:
            raise InvalidInput("batch_id needs a writer_id (together they are the idempotency key)")
        if self.driver.ready:
            await self.driver.until_unheld(request.stream)  # a holding query commits first, the loop free meanwhile
        ack = await self._write(Slide(request.stream, 0.0, request.writer_id, batch_id), context)
        return pb.SlideResponse(slide=ack.slide, rows=ack.rows, duplicate=ack.duplicate)

    async def StageRows(self, request, context):
        batch, ipc, *_ = await self._batch(request, context)
        ack = await self._write(StageRows(request.stream, request.writer_id, request.batch_id, request.attempt,
                                          request.chunk, batch, 0.0, ipc), context)
        return pb.StageRowsResponse(staged_rows=ack.rows, committed=ack.committed)

    async def CommitBatch(self, request, context):
        self._allow(context, "write", request.stream)
        attempts = tuple((a.attempt, a.rows) for a in request.attempts)
        if len({a for a, _ in attempts}) != len(attempts):
            raise InvalidInput("an attempt is listed twice")
        event_time_ms = request.event_time_ms if request.HasField("event_time_ms") else None
        at_slide = request.at_slide if request.HasField("at_slide") else None
        if request.slide and self.driver.ready:
            await self.driver.until_unheld(request.stream)  # as a Slide: a holding query commits first
        ack = await self._write(CommitBatch(request.stream, request.writer_id, request.batch_id, attempts,
                                            request.slide, 0.0, event_time_ms, at_slide, request.split), context)
        return pb.CommitBatchResponse(accepted_rows=ack.accepted, late_rows=ack.late, duplicate=ack.duplicate,
                                      latest_slide=ack.latest_slide, pending=ack.pending,
                                      visible_from_slide=ack.visible_from)

    async def AbortBatch(self, request, context):
        self._allow(context, "write", request.stream)
        rows = await self._write(AbortBatch(request.stream, request.writer_id, request.batch_id, 0.0), context)
        return pb.AbortBatchResponse(discarded_rows=rows)

    # -- queries -------------------------------------------------------------------------------
    @staticmethod
    def _query(request):
        kind = request.WhichOneof("query")
        if kind == "text":
            return _parse(request.text), request.text
        if kind == "structured":
            query = convert.query_from_pb(request.structured)
            return query, to_text(query)
        raise InvalidInput("a query needs text or a structured form")

    def _allow_all(self, context, action: str, streams: list[str]) -> str:
        """A join needs the permission on every stream it reads."""
        for name in streams:
            who = self._allow(context, action, name)
        return who

    async def Query(self, received, context):
        arrived = time.perf_counter_ns()  # the answer's response_ms: from here to the reply ready to send
        reply = self._answer_known(received.data, arrived)
        if reply is not None:
            return reply
        request = received.message()
        query, _ = self._query(request)
        streams = _streams(query)
        self._allow_all(context, "read", streams)
        d = self.driver
        if not d.ready:
            await d.until_ready()
        replica_read = bool(request.read_from or request.HasField("min_slide")
                            or d.replication is not None)
        if replica_read:
            await self._replica_read(request, streams)
        who = self._admit(context)
        txn = None
        try:
            txn, done = d.submit(query, request.priority)
            if done is not None:
                result: Result = await done  # (the caller's deadline: see _write)
            elif txn.error is not None:  # answered (or failed) in the call
                raise txn.error
            else:
                result = txn.result
        except asyncio.CancelledError:
            # the client cancelled or its deadline passed (gRPC cancels the handler): take the
            # query off the scheduler
            if txn is not None and not txn.done:
                d.cancel(txn)
            raise
        finally:
            self._done(who)
        response = pb.QueryResponse()
        if result.cached is not None:  # the answer cache's entry keeps its serialized per-query part
            convert.cached_answer_to_pb(result, streams[0], txn.id, response.answer)
            if not (replica_read or request.return_sketches):
                d.note_request(received.data, result)  # its next call: _answer_known
        else:
            convert.answer_to_pb(result, streams[0], txn.id, response.answer)
        if request.return_sketches:  # a partitioned stream's client merges them (docs/partitions.md)
            sketches_to_pb(result.answer, response.answer)
        response_ms = (time.perf_counter_ns() - arrived) / 1e6
        response.answer.response_ms = response_ms
        d.note_answer(streams[0], result, response_ms)
        if response_ms > self.config.slow_query_ms:
            self._slow_query(response_ms, streams, result, request)
        return response

    def _slow_query(self, response_ms: float, streams: list[str], result: Result, request) -> None:
        oplog.event("slow_query", response_ms=round(response_ms, 3), slow_query_ms=self.config.slow_query_ms,
                    streams=streams, restarts=result.restarts, access=convert.ACCESS_TO_PB[result.answer.access],
                    query=(request.text or "(structured)")[:500], client=principal())

    def _answer_known(self, data: bytes, arrived: int) -> bytes | None:
        """A request asked before with the same bytes, whose answer came from the answer cache then
        (Driver.note_request): answered from that entry without decoding, parsing or planning it,
        where the engine would answer it so (Driver.answer_known: the same transaction, recorded
        and counted), after the same permission check; its reply serialized here
        (convert.cached_reply). None: answer it the usual way. Only requests without read_from,
        min_slide and return_sketches are noted. The admission limits on waiting work (per client,
        pending, queries in flight) are not asked: the call waits for nothing, it ends here."""
        d = self.driver
        stream = d.known_stream(data)
        if stream is None:
            return None
        if self.policy is not None:
            self._allow(None, "read", stream)
        result = d.answer_known(data)
        if result is None:
            return None
        response_ms = (time.perf_counter_ns() - arrived) / 1e6
        reply = convert.cached_reply(result, stream, result.txn, response_ms)
        d.note_answer(stream, result, response_ms)
        if response_ms > self.config.slow_query_ms:
            self._slow_query(response_ms, [stream], result, pb.QueryRequest.FromString(data))
        return reply

    async def Explain(self, request, context):
        query, _ = self._query(request)
        self._allow_all(context, "read", _streams(query))
        e = await self._run(lambda: self.driver.explain(query), context)
        return pb.ExplainResponse(
            access=convert.ACCESS_TO_PB[e["access"]], how=e["how"], streams=e["streams"], subwindows=e["subwindows"],
            reads=e["reads"], group_by=e["group_by"], every_slides=e["every_slides"], sharing=e["sharing"],
            aggregates=[pb.AggregateSource(label=a, function=f, source=s) for a, f, s in e["aggregates"]])

    async def RegisterQuery(self, request, context):
        query, text = self._query(request)
        owner = self._allow_all(context, "read", _streams(query))
        self._periodic_on_leader(_streams(query))
        key = request.request_key
        if len(key) > MAX_REQUEST_KEY:
            raise InvalidInput(f"request_key is {len(key)} characters long: at most {MAX_REQUEST_KEY}")
        p = await self._write(Register("", text, request.priority, 0.0, owner, request.return_sketches, key), context)
        oplog.event("query_registered", query_id=p.task.id, every_slides=p.task.every, query=text[:500],
                    client=principal())
        return pb.RegisterQueryResponse(query_id=p.task.id, every_slides=p.task.every)

    async def UnregisterQuery(self, request, context):
        await self._check_owner(context, request.query_id)
        await self._write(Unregister(request.query_id, 0.0), context)
        await self._run(lambda: self.driver.close_periodic([request.query_id], "the periodic query was unregistered"), context)
        oplog.event("query_unregistered", query_id=request.query_id, client=principal())
        return pb.UnregisterQueryResponse()

    async def _check_owner(self, context, query_id: str) -> None:
        """Only its owner, or an admin of its stream (a join: of one of its streams, who could drop
        that stream and the join with it), may end a periodic query."""
        if self.policy is None:
            return
        p = principal()

        def owner_and_streams():
            q = self._periodic(query_id)
            return q.owner, stream_names(q.task.plan)
        owner, streams = await self._run(owner_and_streams, context)
        if p != owner and not any(self.policy.allowed(p, "admin", s) for s in streams):
            raise PermissionDenied(f"{_short(p)!r} may not unregister periodic query {query_id!r}: it belongs to "
                                   f"{_short(owner)!r} (or needs admin on stream {_short(streams[0])!r})")

    async def _streams_of_query(self, query_id: str, context) -> list[str]:
        return await self._run(lambda: stream_names(self._periodic(query_id).task.plan), context)

    def _periodic(self, query_id: str):
        """The registered periodic query (loop thread); NotFound, or NotLeader for one a step-down
        of its stream's replica unregistered here."""
        q = self.driver.engine.periodic.get(query_id)
        if q is None:
            self._moved_query(query_id)
            raise NotFound(f"periodic query {_short(query_id)!r} does not exist")
        return q

    async def ListQueries(self, request, context):
        def listing():
            out = []
            for qid, p in self.driver.engine.periodic.items():
                names = stream_names(p.task.plan)
                if request.stream and request.stream not in names:
                    continue
                subs = self.driver.subscribers.get(qid)
                out.append(pb.PeriodicQueryInfo(
                    query_id=qid, stream=names[0], text=p.text, every_slides=p.task.every, executions=p.task.executions,
                    late=p.task.late, last_slide=p.task.last_reflected if p.task.last_reflected is not None else -1,
                    subscribers=len(subs.queues) if subs else 0, streams=names))
            return out
        infos = await self._run(listing, context)
        return pb.ListQueriesResponse(queries=[i for i in infos if all(self._may("read", s) for s in i.streams)])

    async def Subscribe(self, request, context):
        """Answers of a periodic query as they are published. An open subscription is a coroutine
        waiting on its bounded queue: it holds no thread."""
        self._allow_all(context, "read", await self._streams_of_query(request.query_id, context))
        after = request.after_slide if request.HasField("after_slide") else None
        q, stream_name = await self._run(lambda: self.driver.subscribe(request.query_id, after), context)
        try:
            while True:
                item = await q.next()
                if isinstance(item, Result):
                    if after is not None:  # kept answers first: a slide already sent is not sent again
                        if item.slide <= after:
                            continue
                        after = item.slide
                    a = convert.answer_to_pb(item, stream_name, request.query_id)
                    sketches_to_pb(item.answer, a)  # registered with return_sketches: a partition's (else none)
                    a.response_ms = self.driver.response_ms(request.query_id, item)
                    yield a
                    continue
                marker, text = item
                if marker is CLOSED:
                    if "shutting down" in text:
                        raise ShuttingDown(text)
                    return  # unregistered or dropped: the stream ends
                raise marker  # the query failed: its error, mapped to a status by rpc.py
        finally:
            self.driver.unsubscribe(request.query_id, q)

    async def ReadAnswers(self, request, context):
        self._allow_all(context, "read", await self._streams_of_query(request.query_id, context))
        through = request.through_slide if request.HasField("through_slide") else None
        answers, latest, first, stream = await self._run(lambda: self.driver.read_answers(
            request.query_id, request.after_slide, through, request.limit or 1000), context)
        response = pb.ReadAnswersResponse(latest_slide=latest, first_slide=first)
        for r in answers:
            a = convert.answer_to_pb(r, stream, request.query_id, response.answers.add())
            sketches_to_pb(r.answer, a)  # registered with return_sketches: a partition's (else none)
            a.response_ms = self.driver.response_ms(request.query_id, r)
        return response

    # -- introspection -------------------------------------------------------------------------
    async def GetStats(self, request, context):
        if request.stream:
            self._allow(context, "read", request.stream)
        s = await self._run(lambda: self.driver.stats(request.stream or None), context)
        s["streams"] = [x for x in s["streams"] if self._may("read", x["stream"])]
        return pb.GetStatsResponse(
            policy=s["policy"],
            streams=[pb.StreamStats(
                stream=x["stream"], slides=x["slides"], queries=x["queries"], aborts=x["aborts"],
                restarts=x["restarts"], failed=x["failed"], errors=x["errors"], catch_up_slides=x["catch_up_slides"],
                staged_rows=x["staged_rows"], discarded_rows=x["discarded_rows"],
                late_rows=x["late_rows"],
                duplicate_batches=x["duplicate_batches"], accepted_rows=x["accepted_rows"],
                staleness_ms=pb.Percentiles(**x["staleness_ms"]), response_ms=pb.Percentiles(**x["response_ms"]),
                slide_delay_ms=pb.Percentiles(**x["slide_delay_ms"]),
                seal_ms=pb.Percentiles(**x["seal_ms"]), stopped=x["stopped"],
                seconds_like_batches=x["seconds_like_batches"], split_batches=x["split_batches"],
                pending_commits=x["pending_commits"], fallbacks=x["fallbacks"]) for x in s["streams"]],
            durability=pb.DurabilityStats(**s["durability"]),
            onetime=pb.ClassStats(**{k: v for k, v in s["onetime"].items() if k != "slides"}),
            periodic=pb.ClassStats(**{k: v for k, v in s["periodic"].items() if k != "slides"}),
            sharing=pb.SharingStats(**s["sharing"]), answer_cache=pb.AnswerCacheStats(**s["answer_cache"]))

    async def StreamHistory(self, request, context):
        self._allow(context, "read", request.stream) if request.stream else self._allow(context, "admin", "*")
        limit = request.limit or 10_000

        def read():
            if request.stream:
                self.driver.stream(request.stream)
            return self.driver.history.since(request.since_seq, request.stream or None, limit), self.driver.history.seq
        events, seq = await self._run(read, context)
        out = []
        for e in events:
            # a join's begin names every stream it reads: those the caller may not read stay hidden
            streams = [n if self._may("read", n) else "?" for n in e.get("streams") or ()]
            ev = pb.HistoryEvent(seq=e["seq"], stream=e["stream"], op=e["op"], txn=e["txn"], t=e["t"],
                                 streams=streams)
            for k in ("subwindow", "version", "window_len", "as_of"):
                if e.get(k) is not None:
                    setattr(ev, k, e[k])
            out.append(ev)
        # where to continue: after the last event returned, or (nothing new) where the caller is
        next_seq = events[-1]["seq"] + 1 if events else min(request.since_seq, seq)
        return pb.StreamHistoryResponse(events=out, next_seq=next_seq)
