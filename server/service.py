"""WindowStoreService: maps RPCs onto the driver. Handlers parse and convert (pure work, in the
handler thread), hand the driver closures, and map errors to gRPC status codes."""
from __future__ import annotations

import functools
import logging
import queue
import threading
from concurrent.futures import Future, TimeoutError as FutureTimeout

import grpc

from windowstore.store import InvalidInput, QuerySyntaxError, StoreError, parse_query, to_text
from windowstore.txn import QueryFailed, QueryWithdrawn, RestartLimitExceeded, Result
from windowstore.v1 import windowstore_pb2 as pb
from windowstore.v1 import windowstore_pb2_grpc as pb_grpc

from windowstore.txn.commands import (AbortBatch, Append, CommitBatch, CreateStream, DropStream, Register, Slide,
                                      StageRows, Unregister)

from . import convert
from .driver import (CLOSED, AlreadyExists, DeadlineExceeded, Driver, FailedPrecondition, NotFound,
                     ResourceExhausted, ShuttingDown, Unavailable)
from .security import ANONYMOUS, AccessPolicy


class PermissionDenied(StoreError):
    pass


class Unauthenticated(StoreError):
    pass

log = logging.getLogger("windowstore.service")

_CODES = [
    (QuerySyntaxError, grpc.StatusCode.INVALID_ARGUMENT),
    (InvalidInput, grpc.StatusCode.INVALID_ARGUMENT),
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (AlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (ResourceExhausted, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (FailedPrecondition, grpc.StatusCode.FAILED_PRECONDITION),
    (RestartLimitExceeded, grpc.StatusCode.ABORTED),
    (QueryFailed, grpc.StatusCode.INTERNAL),
    (QueryWithdrawn, grpc.StatusCode.CANCELLED),
    (ShuttingDown, grpc.StatusCode.UNAVAILABLE),
    (Unavailable, grpc.StatusCode.UNAVAILABLE),
    (PermissionDenied, grpc.StatusCode.PERMISSION_DENIED),
    (Unauthenticated, grpc.StatusCode.UNAUTHENTICATED),
    (DeadlineExceeded, grpc.StatusCode.DEADLINE_EXCEEDED),
    (TimeoutError, grpc.StatusCode.DEADLINE_EXCEEDED),  # a driver future outlived the caller's deadline
]


def _status(e: Exception) -> grpc.StatusCode:
    for cls, code in _CODES:
        if isinstance(e, cls):
            return code
    return grpc.StatusCode.INTERNAL


def rpc(method):
    """Every handler: known errors become their status code; anything else INTERNAL, logged."""
    @functools.wraps(method)
    def wrapper(self, request, context):
        try:
            return method(self, request, context)
        except Exception as e:  # noqa: BLE001
            code = _status(e)
            if code == grpc.StatusCode.INTERNAL:
                log.exception("%s failed", method.__name__)
            context.abort(code, _message(e))
    return wrapper


def _message(e: Exception, limit: int = 1000) -> str:
    """An error's message, cut so that a huge name or number quoted in it cannot blow gRPC's
    metadata limit."""
    text = str(e) or type(e).__name__
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def _remaining(context) -> float | None:
    """Seconds left before the client's deadline; None when it set none (gRPC reports a huge value)."""
    left = context.time_remaining()
    return None if left is None or left > 10**6 else max(0.0, left)


def _info(driver: Driver, name: str) -> pb.StreamInfo:
    s = driver.stream(name)
    w = s.window
    info = pb.StreamInfo(spec=convert.spec_to_pb(s.name, s.schema, s.spec), latest_slide=w.latest,
                         buffered_rows=w.buffered_rows, window_rows=sum(x.rows for x in w.youngest(w.n)),
                         created_ms=s.created_ms)
    lo, hi = w.bounds(w.n)
    if lo is not None:
        info.window_start_ms, info.window_end_ms = lo, hi
    nxt = w.next_due_ms()
    if nxt is not None:
        info.next_slide_ms = nxt
    return info


def _short(name: str, limit: int = 100) -> str:
    return name if len(name) <= limit else name[:limit] + "..."


class WindowStoreService(pb_grpc.WindowStoreServiceServicer):
    def __init__(self, driver: Driver, policy: AccessPolicy | None = None):
        self.driver = driver
        self.config = driver.config
        self.policy = policy
        self._per_client: dict[str, int] = {}
        self._lock = threading.Lock()

    def _admit(self, context) -> str:
        """Per-client admission: at most max_requests_per_client in progress each."""
        who = context.peer() if self.policy is None else (self.policy.principal(context.invocation_metadata()) or "")
        with self._lock:
            n = self._per_client.get(who, 0)
            if n >= self.config.max_requests_per_client:
                self.driver.note_shed()
                raise ResourceExhausted(f"{n} requests of this client are in progress (limit "
                                        f"{self.config.max_requests_per_client}); retry with backoff")
            self._per_client[who] = n + 1
        return who

    def _done(self, who: str) -> None:
        with self._lock:
            n = self._per_client.get(who, 1) - 1
            if n:
                self._per_client[who] = n
            else:
                self._per_client.pop(who, None)

    # -- who may do what ---------------------------------------------------------------------------
    def _principal(self, context) -> str:
        if self.policy is None:
            return ANONYMOUS
        p = self.policy.principal(context.invocation_metadata())
        if p is None:
            raise Unauthenticated("a valid bearer token is required (metadata 'authorization: Bearer <token>')")
        return p

    def _allow(self, context, action: str, stream: str) -> str:
        """The caller's principal, if it may `action` the stream; else PERMISSION_DENIED."""
        p = self._principal(context)
        if self.policy is not None and not self.policy.allowed(p, action, stream):
            raise PermissionDenied(f"{_short(p)!r} may not {action} stream {_short(stream)!r}")
        return p

    def _may(self, context, action: str, stream: str) -> bool:
        return self.policy is None or self.policy.allowed(self._principal(context), action, stream)

    def _run(self, fn, context):
        return self._wait(lambda left: self.driver.call(fn, left), context)

    def _write(self, cmd, context):
        """Apply a command; returns once it is durable (or raises). Not applied at all if the
        caller's deadline passes while it waits for the driver."""
        return self._wait(lambda left: self.driver.command(cmd, left), context)

    def _wait(self, submit, context):
        left = _remaining(context)
        who = self._admit(context)
        try:
            return submit(left).result(left)
        finally:
            self._done(who)

    # -- streams -------------------------------------------------------------------------------
    @rpc
    def CreateStream(self, request, context):
        name, columns, time_column, spec = convert.spec_from_pb(request.spec)
        self._allow(context, "admin", name)
        self._write(CreateStream(name, tuple(columns.items()), time_column, spec.subwindows, spec.subwindow_ms,
                                 spec.subwindow_rows, spec.clock, spec.allowed_lateness_ms, spec.group_by, spec.topk, 0.0),
                    context)
        return pb.CreateStreamResponse(stream=self._run(lambda: _info(self.driver, name), context))

    @rpc
    def DropStream(self, request, context):
        self._allow(context, "admin", request.name)
        gone = self._write(DropStream(request.name, 0.0), context)
        self._run(lambda: self.driver.close_periodic(gone, f"stream {request.name!r} was dropped"), context)
        return pb.DropStreamResponse()

    @rpc
    def ListStreams(self, request, context):
        d = self.driver
        self._principal(context)
        infos = self._run(lambda: [_info(d, n) for n in sorted(d.sched.streams)], context)
        return pb.ListStreamsResponse(streams=[i for i in infos if self._may(context, "read", i.spec.name)])

    @rpc
    def DescribeStream(self, request, context):
        self._allow(context, "read", request.name)
        return pb.DescribeStreamResponse(stream=self._run(lambda: _info(self.driver, request.name), context))

    def _batch(self, request, context):
        """An Append's or StageRows' rows, once the caller may write the stream and they fit."""
        self._allow(context, "write", request.stream)
        batch, ipc = convert.batch_from_pb(request)
        if batch.num_rows > self.config.max_rows_per_batch:
            raise ResourceExhausted(f"batch of {batch.num_rows} rows exceeds the limit of {self.config.max_rows_per_batch}")
        return batch, ipc

    @rpc
    def Append(self, request, context):
        batch, ipc = self._batch(request, context)
        batch_id = request.batch_id if request.HasField("batch_id") else None
        if batch_id is not None and not request.writer_id:
            raise InvalidInput("batch_id needs a writer_id (together they are the idempotency key)")
        ack = self._write(Append(request.stream, batch, request.writer_id, batch_id, 0.0, ipc), context)
        return pb.AppendResponse(accepted_rows=ack.accepted, late_rows=ack.late, duplicate=ack.duplicate,
                                 latest_slide=ack.latest_slide)

    @rpc
    def Slide(self, request, context):
        self._allow(context, "write", request.stream)
        batch_id = request.batch_id if request.HasField("batch_id") else None
        if batch_id is not None and not request.writer_id:
            raise InvalidInput("batch_id needs a writer_id (together they are the idempotency key)")
        ack = self._write(Slide(request.stream, 0.0, request.writer_id, batch_id), context)
        return pb.SlideResponse(slide=ack.slide, rows=ack.rows, duplicate=ack.duplicate)

    @rpc
    def StageRows(self, request, context):
        batch, ipc = self._batch(request, context)
        ack = self._write(StageRows(request.stream, request.writer_id, request.batch_id, request.attempt, request.chunk,
                                    batch, 0.0, ipc), context)
        return pb.StageRowsResponse(staged_rows=ack.rows, committed=ack.committed)

    @rpc
    def CommitBatch(self, request, context):
        self._allow(context, "write", request.stream)
        attempts = tuple((a.attempt, a.rows) for a in request.attempts)
        if len({a for a, _ in attempts}) != len(attempts):
            raise InvalidInput("an attempt is listed twice")
        ack = self._write(CommitBatch(request.stream, request.writer_id, request.batch_id, attempts, request.slide, 0.0),
                          context)
        return pb.CommitBatchResponse(accepted_rows=ack.accepted, late_rows=ack.late, duplicate=ack.duplicate,
                                      latest_slide=ack.latest_slide)

    @rpc
    def AbortBatch(self, request, context):
        self._allow(context, "write", request.stream)
        rows = self._write(AbortBatch(request.stream, request.writer_id, request.batch_id, 0.0), context)
        return pb.AbortBatchResponse(discarded_rows=rows)

    # -- queries -------------------------------------------------------------------------------
    @staticmethod
    def _query(request):
        kind = request.WhichOneof("query")
        if kind == "text":
            return parse_query(request.text), request.text
        if kind == "structured":
            query = convert.query_from_pb(request.structured)
            return query, to_text(query)
        raise InvalidInput("a query needs text or a structured form")

    @rpc
    def Query(self, request, context):
        query, _ = self._query(request)
        self._allow(context, "read", query.stream)
        done: Future = Future()
        txn = self._run(lambda: self.driver.submit(query, request.priority, done), context)

        def withdraw():  # client cancelled or its deadline passed: take the query off the scheduler
            if not done.done():
                self.driver.call(lambda: self.driver.cancel(txn))
        context.add_callback(withdraw)
        try:
            result: Result = done.result(_remaining(context))
        except FutureTimeout:
            withdraw()
            raise DeadlineExceeded("deadline exceeded; the query was withdrawn") from None
        return pb.QueryResponse(answer=convert.answer_to_pb(result, query.stream, txn.id))

    @rpc
    def RegisterQuery(self, request, context):
        query, text = self._query(request)
        owner = self._allow(context, "read", query.stream)
        p = self._write(Register("", text, request.priority, 0.0, owner), context)
        return pb.RegisterQueryResponse(query_id=p.task.id, every_slides=p.task.every)

    @rpc
    def UnregisterQuery(self, request, context):
        self._check_owner(context, request.query_id)
        self._write(Unregister(request.query_id, 0.0), context)
        self._run(lambda: self.driver.close_periodic([request.query_id], "the periodic query was unregistered"), context)
        return pb.UnregisterQueryResponse()

    def _check_owner(self, context, query_id: str) -> None:
        """Only its owner, or an admin of its stream, may end a periodic query."""
        if self.policy is None:
            return
        p = self._principal(context)

        def owner_and_stream():
            q = self.driver.engine.periodic.get(query_id)
            if q is None:
                raise NotFound(f"periodic query {_short(query_id)!r} does not exist")
            return q.owner, q.task.plan.stream.name
        owner, stream = self._run(owner_and_stream, context)
        if p != owner and not self.policy.allowed(p, "admin", stream):
            raise PermissionDenied(f"{_short(p)!r} may not unregister periodic query {query_id!r}: it belongs to "
                                   f"{_short(owner)!r} (or needs admin on stream {_short(stream)!r})")

    def _stream_of_query(self, query_id: str, context) -> str:
        def stream():
            q = self.driver.engine.periodic.get(query_id)
            if q is None:
                raise NotFound(f"periodic query {_short(query_id)!r} does not exist")
            return q.task.plan.stream.name
        return self._run(stream, context)

    @rpc
    def ListQueries(self, request, context):
        def listing():
            out = []
            for qid, p in self.driver.engine.periodic.items():
                name = p.task.plan.stream.name
                if request.stream and name != request.stream or not self._may(context, "read", name):
                    continue
                subs = self.driver.subscribers.get(qid)
                out.append(pb.PeriodicQueryInfo(
                    query_id=qid, stream=name, text=p.text, every_slides=p.task.every, executions=p.task.executions,
                    late=p.task.late, last_slide=p.task.last_reflected if p.task.last_reflected is not None else -1,
                    subscribers=len(subs.queues) if subs else 0))
            return out
        return pb.ListQueriesResponse(queries=self._run(listing, context))

    def Subscribe(self, request, context):
        try:
            self._allow(context, "read", self._stream_of_query(request.query_id, context))
            q, stream_name = self._run(lambda: self.driver.subscribe(request.query_id), context)
        except Exception as e:  # noqa: BLE001
            context.abort(_status(e), _message(e))
        try:
            while context.is_active():
                try:
                    item = q.get(timeout=0.25)
                except queue.Empty:
                    continue
                if isinstance(item, Result):
                    yield convert.answer_to_pb(item, stream_name, request.query_id)
                    continue
                marker, message = item
                if marker is CLOSED:
                    if "shutting down" in message:
                        context.abort(grpc.StatusCode.UNAVAILABLE, message)
                    return  # unregistered or dropped: the stream ends
                context.abort(_status(marker), message[:1000])
        finally:
            self.driver.call(lambda: self.driver.unsubscribe(request.query_id, q))

    @rpc
    def ReadAnswers(self, request, context):
        self._allow(context, "read", self._stream_of_query(request.query_id, context))
        through = request.through_slide if request.HasField("through_slide") else None
        answers, latest, first, stream = self._run(lambda: self.driver.read_answers(
            request.query_id, request.after_slide, through, request.limit or 1000), context)
        return pb.ReadAnswersResponse(answers=[convert.answer_to_pb(r, stream, request.query_id) for r in answers],
                                      latest_slide=latest, first_slide=first)

    # -- introspection -------------------------------------------------------------------------
    @rpc
    def GetStats(self, request, context):
        if request.stream:
            self._allow(context, "read", request.stream)
        else:
            self._principal(context)
        s = self._run(lambda: self.driver.stats(request.stream or None), context)
        s["streams"] = [x for x in s["streams"] if self._may(context, "read", x["stream"])]
        return pb.GetStatsResponse(
            policy=s["policy"],
            streams=[pb.StreamStats(
                stream=x["stream"], slides=x["slides"], queries=x["queries"], aborts=x["aborts"],
                restarts=x["restarts"], failed=x["failed"], errors=x["errors"], catch_up_slides=x["catch_up_slides"],
                staged_rows=x["staged_rows"], discarded_rows=x["discarded_rows"],
                late_rows=x["late_rows"],
                duplicate_batches=x["duplicate_batches"], accepted_rows=x["accepted_rows"],
                staleness_ms=pb.Percentiles(**x["staleness_ms"]), response_ms=pb.Percentiles(**x["response_ms"]),
                slide_delay_ms=pb.Percentiles(**x["slide_delay_ms"])) for x in s["streams"]],
            durability=pb.DurabilityStats(**s["durability"]),
            onetime=pb.ClassStats(**{k: v for k, v in s["onetime"].items() if k != "slides"}),
            periodic=pb.ClassStats(**{k: v for k, v in s["periodic"].items() if k != "slides"}))

    @rpc
    def StreamHistory(self, request, context):
        self._allow(context, "read", request.stream) if request.stream else self._allow(context, "admin", "*")
        limit = request.limit or 10_000

        def read():
            if request.stream:
                self.driver.stream(request.stream)
            return self.driver.history.since(request.since_seq, request.stream or None, limit), self.driver.history.seq
        events, seq = self._run(read, context)
        out = []
        for e in events:
            ev = pb.HistoryEvent(seq=e["seq"], stream=e["stream"], op=e["op"], txn=e["txn"], t=e["t"])
            for k in ("subwindow", "version", "window_len"):
                if e[k] is not None:
                    setattr(ev, k, e[k])
            out.append(ev)
        # where to continue: after the last event returned, or (nothing new) where the caller is
        next_seq = events[-1]["seq"] + 1 if events else min(request.since_seq, seq)
        return pb.StreamHistoryResponse(events=out, next_seq=next_seq)
