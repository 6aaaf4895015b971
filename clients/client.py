"""The Python SDK: `Client` (blocking) and `AsyncClient` (asyncio), one request builder for both.

    from windowstore.clients import Client
    with Client("127.0.0.1:50051") as ws:
        ws.create_stream("packets", schema={"ts": "int64", "src": "string", "bytes": "int64"},
                         subwindows=60, subwindow_ms=1000, group_by=["src"])
        ws.append("packets", {"ts": [...], "src": [...], "bytes": [...]}, writer_id="w1", batch_id=7)
        a = ws.query("SELECT src, SUM(bytes) FROM packets GROUP BY src ORDER BY 2 DESC LIMIT 10")
"""
from __future__ import annotations

import asyncio
import itertools
import os
import queue
import re
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, AsyncIterator, Iterable, Iterator, Mapping

import grpc

from windowstore.store.sketch_columns import KINDS as SKETCH_KINDS
from windowstore.v1 import windowstore_pb2 as pb
from windowstore.v1 import windowstore_pb2_grpc as pb_grpc

from .answer import Answer
from .batches import arrow_wire, build, to_arrow, to_columnar
from .errors import AlreadyExists, InvalidArgument, Unavailable, WindowStoreError, from_rpc_error
from .follow import RESUMABLE, Leaders, Resubscribing
from .pipeline import AppendWindow

DEFAULT_TARGET = "127.0.0.1:50051"


def default_target() -> str:
    """$WINDOWSTORE_TARGET, else 127.0.0.1:50051: where a client connects when given no target."""
    return os.environ.get("WINDOWSTORE_TARGET") or DEFAULT_TARGET
_TYPES = {"int64": pb.COLUMN_TYPE_INT64, "float64": pb.COLUMN_TYPE_FLOAT64, "string": pb.COLUMN_TYPE_STRING,
          "boolean": pb.COLUMN_TYPE_BOOLEAN, "timestamp": pb.COLUMN_TYPE_TIMESTAMP, "date": pb.COLUMN_TYPE_DATE}
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")  # decimal(precision, scale)
_CLOCKS = {"processing": pb.CLOCK_PROCESSING, "event": pb.CLOCK_EVENT, "manual": pb.CLOCK_MANUAL}
_OPTIONS = [("grpc.max_receive_message_length", 256 * 1024 * 1024),
            ("grpc.max_send_message_length", 256 * 1024 * 1024)]


@dataclass
class AppendResult:
    accepted: int
    late: int
    duplicate: bool
    latest_slide: int


@dataclass
class StageResult:
    staged_rows: int
    committed: bool


@dataclass
class CommitResult:
    accepted: int
    late: int
    duplicate: bool
    latest_slide: int
    pending: bool = False        # held for the slide that opens at_slide
    visible_from_slide: int = -1  # the first slide whose window holds the rows (-1: not known)


@dataclass
class PeriodicQuery:
    id: str
    every_slides: int


def _dict(msg) -> dict:
    """A message as plain Python: ints stay ints (protobuf's JSON mapping would make int64 strings),
    enums become their names, unset optional fields None."""
    out: dict[str, Any] = {}
    for field in msg.DESCRIPTOR.fields:
        value = getattr(msg, field.name)
        repeated = field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED
        if repeated:
            out[field.name] = [_value(field, v) for v in value]
        elif field.has_presence and not msg.HasField(field.name):
            out[field.name] = None
        else:
            out[field.name] = _value(field, value)
    return out


def _value(field, value):
    if field.message_type is not None:
        return _dict(value)
    if field.enum_type is not None:
        return field.enum_type.values_by_number[value].name
    return value


# -- requests (shared by both clients) ---------------------------------------------------------------
def create_request(name: str, schema: dict[str, str], subwindows: int, subwindow_ms: int | None,
                   subwindow_rows: int | None, clock: str, group_by: Iterable[str], allowed_lateness_ms: int,
                   time_column: str, topk: int, last_rows: int = 0, last_rows_by: Iterable[str] = (),
                   last_rows_keys: int = 0, sketches: Mapping | None = None) -> pb.CreateStreamRequest:
    bad = [t for t in schema.values() if t not in _TYPES and not _DECIMAL.fullmatch(str(t).lower().replace(" ", ""))]
    if bad:
        raise InvalidArgument(f"column types are int64, float64, string, boolean, timestamp, date or decimal(p,s); "
                              f"got unknown type {bad[0]!r}")
    if clock not in _CLOCKS:
        raise InvalidArgument(f"clock is one of {', '.join(_CLOCKS)}; got {clock!r}")
    columns = [build(pb.Column, name=k, type=_TYPES[v]) if v in _TYPES else
               build(pb.Column, name=k, type=pb.COLUMN_TYPE_DECIMAL,
                     **dict(zip(("precision", "scale"), map(int, _DECIMAL.fullmatch(str(v).lower().replace(" ", "")).groups()))))  # type: ignore[union-attr]  # a decimal type (checked above)
               for k, v in schema.items()]
    spec = build(pb.StreamSpec, name=name, columns=columns, time_column=time_column, subwindows=subwindows,
                 subwindow_ms=subwindow_ms or 0, subwindow_rows=subwindow_rows or 0, clock=_CLOCKS[clock],
                 allowed_lateness_ms=allowed_lateness_ms, group_by=list(group_by), topk=topk, last_rows=last_rows,
                 last_rows_by=list(last_rows_by), last_rows_keys=last_rows_keys, sketches=sketch_specs(sketches))
    return pb.CreateStreamRequest(spec=spec)


def _each_sketch(sketches: Mapping) -> Iterator[tuple[str, Any]]:
    for column, how in sketches.items():
        for one in (how if isinstance(how, list) else [how]):
            yield column, one


def sketch_specs(sketches: Mapping | None) -> list:
    """`sketches` as the proto's SketchSpecs: column -> kind, column -> (kind, size) (size 0 or
    absent: the kind's default; the server checks kinds, sizes and columns), or column -> a list of
    those (one sketch per family), in the order the server describes them (so exist_ok compares
    like with like)."""
    out = []
    for column, how in _each_sketch(sketches or {}):
        kind, size = (how, 0) if isinstance(how, str) else (tuple(how) + (0,))[:2]
        if not isinstance(kind, str) or isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise InvalidArgument(f"sketches: column {column!r} takes a kind or (kind, size), got {how!r}")
        kind = kind.lower()
        out.append(build(pb.SketchSpec, column=column, kind=kind, size=size or SKETCH_KINDS.get(kind, (0, 0))[1]))
    return sorted(out, key=lambda s: (s.column, s.kind))


def _explained(resp: pb.ExplainResponse) -> dict:
    out = _dict(resp)
    out["access"] = out["access"].removeprefix("ACCESS_PATH_").lower()
    return out


def _existing(wanted: pb.StreamSpec, described: pb.DescribeStreamResponse) -> dict:
    """create_stream(exist_ok=True): the stream there, if it was created as asked."""
    got = described.stream.spec
    if got != wanted:
        a, b = _dict(wanted), _dict(got)
        diff = "; ".join(f"{k} {b[k]!r}, not {a[k]!r}" for k in a if a[k] != b[k])
        raise AlreadyExists(f"stream {wanted.name!r} exists with another definition: {diff}")
    return _dict(described.stream)


def append_request(stream: str, columns: Any, writer_id: str, batch_id: int | None,
                   columnar_types: dict[str, str] | None, event_time_ms: int | None = None,
                   after_batch_id: int | None = None) -> pb.AppendRequest | bytes:
    """The Append request: already serialized when it carries Arrow (arrow_wire), a message for
    the plain protobuf form. `after_batch_id`: the same writer's batch it follows (pipelining)."""
    req = build(pb.AppendRequest, stream=stream, writer_id=writer_id, batch_id=batch_id, event_time_ms=event_time_ms,
                after_batch_id=after_batch_id)
    if columnar_types is None:
        return arrow_wire(req, to_arrow(columns))
    req.columnar.CopyFrom(to_columnar(columns, columnar_types))
    return req


_END = object()


def windowed_requests(stream: str, batches: Iterable[Any], writer_id: str, first_batch_id: int | None,
                      in_flight: int, retries: int) -> tuple[AppendWindow, Any]:
    """append_all with `in_flight` > 1 (Client's and AsyncClient's): its window, and the function
    that builds batch k's request from the next of `batches` (None once they are all taken),
    naming the batch it follows."""
    if first_batch_id is None or not writer_id:
        raise InvalidArgument(f"append_all with in_flight={in_flight} needs a writer_id and a first_batch_id: the "
                              "idempotency keys keep each batch exactly once when unacknowledged ones are sent again")
    win = AppendWindow(first_batch_id, in_flight, retries)
    todo = iter(batches)

    def request(batch_id: int):
        columns = next(todo, _END)
        return None if columns is _END else append_request(stream, columns, writer_id, batch_id, None,
                                                           after_batch_id=win.after(batch_id))
    return win, request


def _acked(r) -> "AppendResult":
    return AppendResult(r.accepted_rows, r.late_rows, r.duplicate, r.latest_slide)


def _ended(win: AppendWindow, batch_id: int, call) -> None:
    """A pipelined Append's call ended (a grpc future or an asyncio one): its answer to the window."""
    try:
        win.acked(batch_id, _acked(call.result()))
    except grpc.RpcError as e:
        win.failed(batch_id, from_rpc_error(e))


def serialized(req) -> bytes:
    """A request as bytes: as it is when the SDK serialized it already (arrow_wire)."""
    return req if isinstance(req, bytes) else req.SerializeToString()


_SERVICE = pb.DESCRIPTOR.services_by_name["WindowStoreService"].full_name


def _serialized_calls(stub, channel) -> None:
    """The stub's Append and StageRows take requests serialized already (or messages)."""
    for method, response in (("Append", pb.AppendResponse), ("StageRows", pb.StageRowsResponse)):
        setattr(stub, method, channel.unary_unary(f"/{_SERVICE}/{method}",
                                                  request_serializer=serialized,
                                                  response_deserializer=response.FromString))


def stage_request(stream: str, columns: Any, writer_id: str, batch_id: int, attempt: str,
                  chunk: int) -> bytes:
    """A StageRows request, serialized (arrow_wire)."""
    return arrow_wire(build(pb.StageRowsRequest, stream=stream, writer_id=writer_id, batch_id=batch_id,
                            attempt=attempt, chunk=chunk), to_arrow(columns))


def commit_request(stream: str, writer_id: str, batch_id: int, attempts: dict[str, int], slide: bool,
                   event_time_ms: int | None = None, at_slide: int | None = None, split: bool = False):
    return build(pb.CommitBatchRequest, stream=stream, writer_id=writer_id, batch_id=batch_id, slide=slide,
                 attempts=[build(pb.AttemptRows, attempt=a, rows=n) for a, n in attempts.items()],
                 event_time_ms=event_time_ms, at_slide=at_slide, split=split)


def commit_result(r) -> CommitResult:
    return CommitResult(r.accepted_rows, r.late_rows, r.duplicate, r.latest_slide, r.pending, r.visible_from_slide)


def aggregate(function: str, column: str | None = None, *, q: float | None = None,
              alias: str | None = None) -> pb.Aggregate:
    """An aggregate of a structured query by the function's name (any the server has registered,
    e.g. "sum", "count_distinct", or one added with windowstore.store.functions.register): the
    AggregateFunction value where the proto has one, so older servers read it, else by name."""
    enum_name = "AGGREGATE_FUNCTION_" + function.upper()
    known = enum_name in pb.AggregateFunction.keys()
    number = pb.AggregateFunction.Value(enum_name) if known else pb.AGGREGATE_FUNCTION_UNSPECIFIED
    return pb.Aggregate(func=number, function_name="" if known else function, column=column or "",
                        q=q or 0.0, alias=alias or "")


def query_request(query: str | pb.StructuredQuery, priority: int, as_of_slide: int | None = None) -> pb.QueryRequest:
    if as_of_slide is not None:
        query = pinned(query, as_of_slide)
    if isinstance(query, pb.StructuredQuery):
        return build(pb.QueryRequest, structured=query, priority=priority)
    return build(pb.QueryRequest, text=query, priority=priority)


def replica_query(req: pb.QueryRequest, read_from: str, min_slide: int | None, min_slide_wait_ms: int) -> pb.QueryRequest:
    """A query request's replica options (docs/replication.md)."""
    req.read_from = read_from
    if min_slide is not None:
        req.min_slide = min_slide
    req.min_slide_wait_ms = min_slide_wait_ms
    return req


_ROLES = {"leader": pb.REPLICA_ROLE_LEADER, "follower": pb.REPLICA_ROLE_FOLLOWER}


def role_request(stream: str, role: str, epoch: int, leader: int, replicas: Iterable[int],
                 acks: str) -> pb.SetReplicaRoleRequest:
    if role not in _ROLES:
        raise InvalidArgument(f"role is 'leader' or 'follower'; got {role!r}")
    return pb.SetReplicaRoleRequest(stream=stream, role=_ROLES[role], epoch=epoch, leader=leader,
                                    replicas=list(replicas), acks=acks)


def pinned(query: str | pb.StructuredQuery, slide: int) -> str | pb.StructuredQuery:
    """The query AS OF SLIDE `slide` (replacing any AS OF it has): text stays text (re-written from
    its parse), a structured query gets as_of_slide set on a copy."""
    if isinstance(query, pb.StructuredQuery):
        out = pb.StructuredQuery()
        out.CopyFrom(query)
        out.as_of_slide = slide
        return out
    from dataclasses import replace

    from windowstore.store.parser import parse_query, to_text

    return to_text(replace(parse_query(query), as_of_slide=slide))


def query_stream(query: str | pb.StructuredQuery) -> str:
    """The stream a query reads (a join's first)."""
    if isinstance(query, pb.StructuredQuery):
        return query.stream
    from windowstore.store.parser import parse_statement
    from windowstore.store.query import JoinQuery

    q = parse_statement(query)
    return q.streams[0] if isinstance(q, JoinQuery) else q.stream


def register_request(query: str | pb.StructuredQuery, priority: int, return_sketches: bool = False,
                     key: str | None = None) -> pb.RegisterQueryRequest:
    """A RegisterQuery request with its idempotency key (None: a new one), so that it may be sent
    again after UNAVAILABLE without registering the query twice."""
    key = key or uuid.uuid4().hex
    if isinstance(query, pb.StructuredQuery):
        return build(pb.RegisterQueryRequest, structured=query, priority=priority, return_sketches=return_sketches,
                     request_key=key)
    return build(pb.RegisterQueryRequest, text=query, priority=priority, return_sketches=return_sketches,
                 request_key=key)


def history_events(resp: pb.StreamHistoryResponse) -> list[dict]:
    out = []
    for e in resp.events:
        out.append({"seq": e.seq, "stream": e.stream, "op": e.op, "txn": e.txn,
                    "subwindow": e.subwindow if e.HasField("subwindow") else None,
                    "version": e.version if e.HasField("version") else None,
                    "window_len": e.window_len if e.HasField("window_len") else None, "t": e.t,
                    **({"streams": list(e.streams)} if e.streams else {}),
                    **({"as_of": e.as_of} if e.HasField("as_of") else {})})
    return out


def _pem(x: str | bytes | None) -> bytes | None:
    """PEM bytes from bytes, PEM text, or a file path."""
    if x is None or isinstance(x, bytes):
        return x
    if x.lstrip().startswith("-----BEGIN"):
        return x.encode()
    with open(x, "rb") as f:
        return f.read()


def _security(tls: bool, ca, cert, key, token: str | None):
    """(channel credentials or None for plaintext, call metadata)."""
    creds = None
    if tls or ca or cert or key:
        if bool(cert) != bool(key):
            raise InvalidArgument("a client certificate needs its key (cert= and key=)")
        creds = grpc.ssl_channel_credentials(root_certificates=_pem(ca), private_key=_pem(key),
                                             certificate_chain=_pem(cert))
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    return creds, metadata


class Client:
    """Blocking client. Idempotent calls (reads, and appends with a batch_id) retry on UNAVAILABLE.

    TLS: `tls=True` (system roots) or `ca=` (PEM text, bytes or a file path); mutual TLS adds
    `cert=` and `key=`. `token=` sends `authorization: Bearer <token>` with every call.

    Given a list of addresses (or a ClusterView) instead of one, it is a client of the cluster
    they form (partitioned.ClusterClient; docs/partitions.md).

    Replicated streams (docs/failover.md): with `etcd=` (its URL, or an EtcdClusterView) each call
    naming a stream goes to the stream's leader as etcd names it, and follows it across a failover
    for up to `failover_s` (follow.Following: a refused call is made again on the leader; an
    append or slide after an UNAVAILABLE only with its writer_id and batch_id, which keep it
    exactly once); a periodic query registered through this client is registered again on the new
    leader and its subscription goes on there. `follow_leader=True` without etcd follows only the
    leader a refusing replica names."""

    def __new__(cls, target=None, *args, **kwargs):
        if cls is Client and (isinstance(target, (list, tuple)) or hasattr(target, "owner")):
            from .partitioned import ClusterClient

            return ClusterClient(target, *args, **kwargs)
        return super().__new__(cls)

    def __init__(self, target: str | None = None, timeout: float | None = 60.0, retries: int = 3,
                 channel: grpc.Channel | None = None, tls: bool = False, ca=None, cert=None, key=None,
                 token: str | None = None, etcd=None, follow_leader: bool = False, failover_s: float = 30.0):
        self.target = target = target or default_target()
        self.timeout = timeout
        self.retries = retries
        creds, self._metadata = _security(tls, ca, cert, key, token)
        self._creds = creds
        self._channel = channel or (grpc.secure_channel(target, creds, options=_OPTIONS) if creds
                                    else grpc.insecure_channel(target, options=_OPTIONS))
        self._stub = pb_grpc.WindowStoreServiceStub(self._channel)
        _serialized_calls(self._stub, self._channel)
        self._leaders = Leaders(etcd, follow_leader, failover_s, target)
        self._others: dict[str, tuple] = {}  # address -> (channel, stub) of the leaders followed
        self._others_lock = threading.Lock()  # (a ClusterClient and Spark call one client from several threads)

    def close(self) -> None:
        self._channel.close()
        for channel, _ in self._others.values():
            channel.close()

    def _stub_at(self, address: str):
        if address == self.target:
            return self._stub
        with self._others_lock:
            if address not in self._others:
                channel = (grpc.secure_channel(address, self._creds, options=_OPTIONS) if self._creds
                           else grpc.insecure_channel(address, options=_OPTIONS))
                stub = pb_grpc.WindowStoreServiceStub(channel)
                _serialized_calls(stub, channel)
                self._others[address] = (channel, stub)
            return self._others[address][1]

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def call(self, method: str, request, idempotent: bool, timeout: float | None = None, stream: str | None = None):
        """One unary RPC by its method name, with this client's timeout (or `timeout`) and
        credentials; an `idempotent` one is retried while the server is unavailable. Raises the
        SDK's exception for the status (errors.py). Every method here calls through it, and a
        ClusterClient (partitioned.py) calls its nodes so. `stream`: the replicated stream the
        call is for, whose leader it follows (with etcd= or follow_leader=; Leaders)."""
        if stream is None or not self._leaders.on:
            return self._call_at(self._stub, method, request, idempotent, timeout)
        f = self._leaders.following(stream, idempotent)
        while True:
            address = f.address(self._leaders.last(stream))
            try:
                out = self._call_at(self._stub_at(address), method, request, idempotent, timeout)
            except WindowStoreError as e:
                if not f.again(e):
                    raise
                f.wait()
                continue
            self._leaders.found(stream, address)
            return out

    def _call_at(self, stub, method: str, request, idempotent: bool, timeout: float | None):
        fn = getattr(stub, method)
        attempt = 0
        while True:
            try:
                return fn(request, timeout=timeout if timeout is not None else self.timeout, metadata=self._metadata)
            except grpc.RpcError as e:
                err = from_rpc_error(e)
                if isinstance(err, Unavailable) and idempotent and attempt < self.retries:
                    time.sleep(0.1 * 2 ** attempt)
                    attempt += 1
                    continue
                raise err from None

    # streams
    def create_stream(self, name: str, schema: dict[str, str], subwindows: int, subwindow_ms: int | None = None,
                      subwindow_rows: int | None = None, clock: str = "processing", group_by: Iterable[str] = (),
                      allowed_lateness_ms: int = 0, time_column: str = "ts", topk: int = 16,
                      exist_ok: bool = False, last_rows: int = 0, last_rows_by: Iterable[str] = (),
                      last_rows_keys: int = 0, sketches: Mapping | None = None, replication: int = 1,
                      acks: str = "") -> dict:
        """Create a stream and return its description. With `exist_ok`, a stream of that name
        created with the same schema and window is returned as it is (one created differently is
        still AlreadyExists, saying how it differs). `last_rows` rows of each key of `last_rows_by`
        are kept beyond the window for `[PARTITION BY ... ROWS n]`, for at most `last_rows_keys` keys.
        `sketches`: column -> kind or (kind, size), kinds "kll", "hll", "cpc", "frequent"
        (docs/approximate.md). `replication` > 1 keeps that many replicas on the cluster's servers
        (sent to its leader), `acks` "leader" or "all" (docs/replication.md)."""
        req = create_request(name, schema, subwindows, subwindow_ms, subwindow_rows, clock, group_by,
                             allowed_lateness_ms, time_column, topk, last_rows, last_rows_by, last_rows_keys,
                             sketches)
        req.replication, req.acks = replication, acks
        try:
            return _dict(self.call("CreateStream", req, False).stream)
        except AlreadyExists:
            if not exist_ok:
                raise
            return _existing(req.spec, self.call("DescribeStream", build(pb.DescribeStreamRequest, name=name), True))

    def drop_stream(self, name: str) -> None:
        self.call("DropStream", build(pb.DropStreamRequest, name=name), False)

    def list_streams(self) -> list[dict]:
        return [_dict(s) for s in self.call("ListStreams", pb.ListStreamsRequest(), True).streams]

    def describe_stream(self, name: str) -> dict:
        return _dict(self.call("DescribeStream", build(pb.DescribeStreamRequest, name=name), True, stream=name).stream)

    def append(self, stream: str, columns: Any, writer_id: str = "", batch_id: int | None = None,
               columnar_types: dict[str, str] | None = None, event_time_ms: int | None = None) -> AppendResult:
        """Send a batch (dict of lists/NumPy arrays, pandas or pyarrow). With writer_id and batch_id
        a replay is acknowledged as a duplicate and changes nothing. `columnar_types` sends the
        plain protobuf form instead of Arrow. `event_time_ms` (clock='event'): the writer's event
        time has reached it, rows or not; the watermark moves as if a row of that time had come."""
        req = append_request(stream, columns, writer_id, batch_id, columnar_types, event_time_ms)
        r = self.call("Append", req, idempotent=batch_id is not None and bool(writer_id), stream=stream)
        return _acked(r)

    def append_all(self, stream: str, batches: Iterable[Any], writer_id: str = "",
                   first_batch_id: int | None = None, in_flight: int = 1) -> list[AppendResult]:
        """Send batches one Append each, in order, as a loop of append() would: batch k with
        batch_id `first_batch_id + k` when given (with writer_id, a replay is acknowledged as a
        duplicate). The server applies them in this order. While a call is in flight the next
        batch's request (Arrow conversion, dictionary encoding, IPC) is built on a helper thread, so
        the writer's serialisation overlaps the transfer and the server's work. The first error is
        raised: the batches before it were appended, those after it were not.

        `in_flight` > 1 (with writer_id and first_batch_id) keeps up to that many Appends in flight:
        each names the batch it follows, so the server still applies them in order, and after an
        UNAVAILABLE (or ABORTED: a batch came before the one it follows) every unacknowledged batch
        is sent again, oldest first, up to `retries` times at the same batch; the idempotency keys
        make each batch count once (docs/sdk.md). Following leaders (etcd=, follow_leader=), one
        call is in flight."""
        if in_flight > 1 and not self._leaders.on:
            return self._append_window(*windowed_requests(stream, batches, writer_id, first_batch_id, in_flight,
                                                          self.retries))
        ids = itertools.count(first_batch_id) if first_batch_id is not None else itertools.repeat(None)
        todo = zip(batches, ids)
        idempotent = first_batch_id is not None and bool(writer_id)
        out: list[AppendResult] = []
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="windowstore-append") as builder:
            def build_next():
                job = next(todo, None)
                return None if job is None else builder.submit(append_request, stream, job[0], writer_id, job[1], None)
            pending = build_next()
            while pending is not None:
                req = pending.result()
                pending = build_next()
                try:
                    r = self.call("Append", req, idempotent=idempotent, stream=stream)
                except BaseException:
                    if pending is not None:
                        pending.cancel()
                    raise
                out.append(_acked(r))
        return out

    def _append_window(self, win: AppendWindow, request) -> list[AppendResult]:
        """append_all's calls with several in flight (grpc futures), the next new request built
        ahead on a helper thread; the window decides what goes and what is sent again."""
        ended: queue.SimpleQueue = queue.SimpleQueue()  # (batch id, call) as calls end
        calls: dict[int, Any] = {}
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="windowstore-append") as builder:
            pending = builder.submit(request, win.next_new)
            try:
                while not win.finished():
                    while win.room():
                        batch_id = win.resend()
                        if batch_id is None:
                            batch_id = win.take(pending)  # (waits for it to be built)
                            if batch_id is None:
                                break
                            pending = builder.submit(request, win.next_new)
                        call = self._stub.Append.future(win.sending(batch_id), timeout=self.timeout,
                                                        metadata=self._metadata)
                        calls[batch_id] = call
                        call.add_done_callback(lambda c, b=batch_id: ended.put((b, c)))
                    if win.flying:
                        batch_id, call = ended.get()
                        _ended(win, batch_id, calls.pop(batch_id))
                    elif win.failures:
                        time.sleep(0.1 * 2 ** (win.settle() - 1))
            finally:
                pending.cancel()
                for call in calls.values():
                    call.cancel()
        return win.outcome()

    def slide(self, stream: str, writer_id: str = "", batch_id: int | None = None) -> int:
        """Seal the open sub-window now (clock='manual'). With writer_id and batch_id, a replayed
        call does not slide again and returns the slide it made the first time."""
        req = build(pb.SlideRequest, stream=stream, writer_id=writer_id, batch_id=batch_id)
        return self.call("Slide", req, idempotent=batch_id is not None and bool(writer_id), stream=stream).slide

    def read_answers(self, query_id: str, after_slide: int = -1, through_slide: int | None = None,
                     limit: int = 1000, stream: str | None = None) -> tuple[list[Answer], int, int]:
        """A periodic query's kept answers reflecting slides in (after_slide, through_slide]:
        (answers, the newest answer's slide, the oldest kept answer's slide). Following leaders,
        `stream` (the query's) reads a query this client did not register on that stream's leader
        (a Spark streaming reader's, registered by an earlier driver)."""
        if stream is not None and self._leaders.on and self._leaders.again(query_id) is None:
            req = build(pb.ReadAnswersRequest, query_id=query_id, after_slide=after_slide, limit=limit,
                        through_slide=through_slide)
            r = self.call("ReadAnswers", req, True, stream=stream)
        else:
            address, query_id = self._leaders.at(query_id)
            req = build(pb.ReadAnswersRequest, query_id=query_id, after_slide=after_slide, limit=limit,
                        through_slide=through_slide)
            r = self._call_at(self._stub_at(address), "ReadAnswers", req, True, None)
        return [Answer.from_pb(a) for a in r.answers], r.latest_slide, r.first_slide

    # exactly-once batches
    def stage(self, stream: str, columns: Any, writer_id: str, batch_id: int, attempt: str,
              chunk: int = 0) -> StageResult:
        """Stage rows of one attempt of batch (writer_id, batch_id): invisible until commit_batch.
        An attempt sends its rows as chunks 0, 1, ...; sending a chunk again replaces it."""
        r = self.call("StageRows", stage_request(stream, columns, writer_id, batch_id, attempt, chunk), True,
                      stream=stream)
        return StageResult(r.staged_rows, r.committed)

    def commit_batch(self, stream: str, writer_id: str, batch_id: int, attempts: dict[str, int],
                     slide: bool = False, event_time_ms: int | None = None, at_slide: int | None = None,
                     split: bool = False) -> CommitResult:
        """Publish exactly the rows the given attempts staged ({attempt: rows}), at once; again: a no-op.
        `event_time_ms` as append's: the writers' event time has reached it (clock='event').
        `at_slide`: into that sub-window (pending until it opens; see CommitBatchRequest.at_slide)."""
        r = self.call("CommitBatch", commit_request(stream, writer_id, batch_id, attempts, slide, event_time_ms,
                                                    at_slide, split), True, stream=stream)
        return commit_result(r)

    def abort_batch(self, stream: str, writer_id: str, batch_id: int) -> int:
        return self.call("AbortBatch", build(pb.AbortBatchRequest, stream=stream, writer_id=writer_id, batch_id=batch_id),
                         True, stream=stream).discarded_rows

    # queries
    def query(self, query: str | pb.StructuredQuery, priority: int = 0, timeout: float | None = None,
              as_of_slide: int | None = None, read_from: str = "", min_slide: int | None = None,
              min_slide_wait_ms: int = 0) -> Answer:
        """Run a one-time query; `as_of_slide`: over the window as it stood right after that slide
        (AS OF SLIDE; FailedPrecondition once it has left the window, naming the slides it can answer).
        `read_from="follower"` lets a follower replica answer from the slides it has applied
        (Answer.slide); `min_slide`: only once that slide is applied there (waiting up to
        `min_slide_wait_ms`, then Unavailable naming the slide)."""
        req = replica_query(query_request(query, priority, as_of_slide), read_from, min_slide, min_slide_wait_ms)
        stream = query_stream(query) if self._leaders.on and read_from != "follower" else None
        return Answer.from_pb(self.call("Query", req, True, timeout, stream).answer)

    def set_replica_role(self, stream: str, role: str, epoch: int, leader: int = 0, replicas: Iterable[int] = (),
                         acks: str = "") -> dict:
        """Make this server the "leader" or a "follower" (of node `leader`) of a replicated stream at
        `epoch` (docs/replication.md); returns its replica status."""
        return _dict(self.call("SetReplicaRole", role_request(stream, role, epoch, leader, replicas, acks), False))

    def replica_status(self, stream: str) -> dict:
        """Where this server's replica of `stream` stands: role, epoch, offsets, in-sync set, lag."""
        return _dict(self.call("GetReplicaStatus", build(pb.GetReplicaStatusRequest, stream=stream), True))

    def explain(self, query: str | pb.StructuredQuery) -> dict:
        """How the query would run, without running it: its access path and what that reads
        (`how`), the sub-windows its window covers and the reads it takes, per aggregate where its
        value comes from, its period in slides (0: one-time) and whether it shares its execution."""
        return _explained(self.call("Explain", query_request(query, 0), True))

    def register(self, query: str | pb.StructuredQuery, priority: int = 0,
                 return_sketches: bool = False, key: str | None = None) -> PeriodicQuery:
        """Register a periodic query; `return_sketches`: each answer carries its sketch aggregates'
        merged sketches (Answer.sketches), as a partitioned stream's client merges them. Following
        leaders (etcd=): on its stream's leader, and kept here to be registered again on the next
        leader after a failover (subscription()). `key`: the request's idempotency key (None: a
        new one): the call is retried while the server is unavailable, and the same key again
        gives the query it registered while that is still registered there."""
        req = register_request(query, priority, return_sketches, key)
        stream = query_stream(query) if self._leaders.on else None
        r = self.call("RegisterQuery", req, True, stream=stream)
        self._leaders.registered(r.query_id, req, stream)
        return PeriodicQuery(r.query_id, r.every_slides)

    def unregister(self, query_id: str) -> None:
        address, current = self._leaders.at(query_id)
        self._call_at(self._stub_at(address), "UnregisterQuery", build(pb.UnregisterQueryRequest, query_id=current), False, None)
        self._leaders.periodic.pop(query_id, None)

    def list_queries(self, stream: str = "") -> list[dict]:
        """The periodic queries registered (on `stream`'s leader when following leaders)."""
        req = build(pb.ListQueriesRequest, stream=stream)
        return [_dict(q) for q in self.call("ListQueries", req, True, stream=stream or None).queries]

    def subscription(self, query_id: str, timeout: float | None = None, after_slide: int | None = None):
        """The Subscribe RPC's call, started: an iterator of pb.Answer messages that cancel()
        ends (subscribe() reads one; a ClusterClient reads one per partition). `after_slide`
        set: first the answers the server keeps for later slides (-1: all it keeps, such as the
        registration's first answer), then the live ones. A query registered through this client
        while following leaders: a follow.Resubscribing, which registers it again on the new
        leader after a failover and goes on there from the kept answers after the last slide it
        passed on (slides increasing, a gap in them where no registration answered)."""
        def open_call(after: int | None):
            address, current = self._leaders.at(query_id)
            return self._stub_at(address).Subscribe(build(pb.SubscribeRequest, query_id=current, after_slide=after), timeout=timeout,
                                                    metadata=self._metadata)
        again = self._leaders.again(query_id)
        if again is None:
            return open_call(after_slide)

        def resume(_error, last: int):
            r = self.call("RegisterQuery", again[0], True, stream=again[1])  # (its key: a retry registers it once)
            self._leaders.moved(query_id, r.query_id)
            return open_call(last)
        return Resubscribing(open_call(after_slide), resume, lambda: self._leaders.elsewhere(query_id))

    def subscribe(self, query_id: str, timeout: float | None = None, after_slide: int | None = None) -> Iterator[Answer]:
        """Answers of a periodic query as they are produced (after the kept ones for slides after
        `after_slide`, when set: see subscription()); ends when it is unregistered."""
        call = self.subscription(query_id, timeout, after_slide)
        try:
            for a in call:
                out = Answer.from_pb(a)
                out.query_id = query_id  # (after a failover the server's id is the new registration's)
                yield out
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.CANCELLED and call.cancelled():
                return
            raise from_rpc_error(e) from None
        finally:
            call.cancel()

    def stats(self, stream: str = "") -> dict:
        return _dict(self.call("GetStats", build(pb.GetStatsRequest, stream=stream), True))

    def history(self, stream: str = "", since_seq: int = 0, limit: int = 10_000) -> list[dict]:
        req = build(pb.StreamHistoryRequest, stream=stream, since_seq=since_seq, limit=limit)
        return history_events(self.call("StreamHistory", req, True))


class AsyncClient:
    """asyncio client over grpc.aio; the same methods as Client, awaited. With a list of
    addresses (or a ClusterView): the cluster client, awaited (async_cluster.py)."""

    def __new__(cls, target=None, *args, **kwargs):
        if cls is AsyncClient and (isinstance(target, (list, tuple)) or hasattr(target, "owner")):
            from .async_cluster import AsyncClusterClient

            return AsyncClusterClient(target, *args, **kwargs)
        return super().__new__(cls)

    def __init__(self, target: str | None = None, timeout: float | None = 60.0, retries: int = 3,
                 tls: bool = False, ca=None, cert=None, key=None, token: str | None = None, etcd=None,
                 follow_leader: bool = False, failover_s: float = 30.0):
        self.target = target = target or default_target()
        self.timeout = timeout
        self.retries = retries
        creds, self._metadata = _security(tls, ca, cert, key, token)
        self._creds = creds
        self._channel = (grpc.aio.secure_channel(target, creds, options=_OPTIONS) if creds
                         else grpc.aio.insecure_channel(target, options=_OPTIONS))
        self._stub = pb_grpc.WindowStoreServiceStub(self._channel)
        _serialized_calls(self._stub, self._channel)
        self._leaders = Leaders(etcd, follow_leader, failover_s, target)  # as Client's (docs/failover.md)
        self._others: dict[str, tuple] = {}

    async def close(self) -> None:
        await self._channel.close()
        for channel, _ in self._others.values():
            await channel.close()

    def _stub_at(self, address: str):
        if address == self.target:
            return self._stub
        if address not in self._others:
            channel = (grpc.aio.secure_channel(address, self._creds, options=_OPTIONS) if self._creds
                       else grpc.aio.insecure_channel(address, options=_OPTIONS))
            stub = pb_grpc.WindowStoreServiceStub(channel)
            _serialized_calls(stub, channel)
            self._others[address] = (channel, stub)
        return self._others[address][1]

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def call(self, method: str, request, idempotent: bool, timeout: float | None = None,
                   stream: str | None = None):
        """As Client.call, awaited (a wait for etcd's next leader runs on a worker thread)."""
        if stream is None or not self._leaders.on:
            return await self._call_at(self._stub, method, request, idempotent, timeout)
        f = self._leaders.following(stream, idempotent)
        while True:
            address = f.address(self._leaders.last(stream))
            try:
                out = await self._call_at(self._stub_at(address), method, request, idempotent, timeout)
            except WindowStoreError as e:
                if not f.again(e):
                    raise
                await asyncio.to_thread(f.wait)
                continue
            self._leaders.found(stream, address)
            return out

    async def _call_at(self, stub, method: str, request, idempotent: bool, timeout: float | None):
        fn = getattr(stub, method)
        attempt = 0
        while True:
            try:
                return await fn(request, timeout=timeout if timeout is not None else self.timeout,
                                metadata=self._metadata)
            except grpc.RpcError as e:
                err = from_rpc_error(e)
                if isinstance(err, Unavailable) and idempotent and attempt < self.retries:
                    await asyncio.sleep(0.1 * 2 ** attempt)
                    attempt += 1
                    continue
                raise err from None

    async def create_stream(self, name: str, schema: dict[str, str], subwindows: int, subwindow_ms: int | None = None,
                            subwindow_rows: int | None = None, clock: str = "processing", group_by: Iterable[str] = (),
                            allowed_lateness_ms: int = 0, time_column: str = "ts", topk: int = 16,
                            exist_ok: bool = False, last_rows: int = 0, last_rows_by: Iterable[str] = (),
                            last_rows_keys: int = 0, sketches: Mapping | None = None, replication: int = 1,
                            acks: str = "") -> dict:
        """As Client.create_stream."""
        req = create_request(name, schema, subwindows, subwindow_ms, subwindow_rows, clock, group_by,
                             allowed_lateness_ms, time_column, topk, last_rows, last_rows_by, last_rows_keys,
                             sketches)
        req.replication, req.acks = replication, acks
        try:
            return _dict((await self.call("CreateStream", req, False)).stream)
        except AlreadyExists:
            if not exist_ok:
                raise
            return _existing(req.spec, await self.call("DescribeStream", build(pb.DescribeStreamRequest, name=name),
                                                        True))

    async def drop_stream(self, name: str) -> None:
        await self.call("DropStream", build(pb.DropStreamRequest, name=name), False)

    async def list_streams(self) -> list[dict]:
        return [_dict(s) for s in (await self.call("ListStreams", pb.ListStreamsRequest(), True)).streams]

    async def describe_stream(self, name: str) -> dict:
        return _dict((await self.call("DescribeStream", build(pb.DescribeStreamRequest, name=name), True,
                                      stream=name)).stream)

    async def append(self, stream: str, columns: Any, writer_id: str = "", batch_id: int | None = None,
                     columnar_types: dict[str, str] | None = None, event_time_ms: int | None = None) -> AppendResult:
        req = append_request(stream, columns, writer_id, batch_id, columnar_types, event_time_ms)
        r = await self.call("Append", req, idempotent=batch_id is not None and bool(writer_id), stream=stream)
        return _acked(r)

    async def append_all(self, stream: str, batches: Iterable[Any], writer_id: str = "",
                         first_batch_id: int | None = None, in_flight: int = 1) -> list[AppendResult]:
        """As Client.append_all, awaited: `in_flight` > 1 keeps that many Appends in flight, each
        naming the batch it follows; the next new request is built on a worker thread meanwhile."""
        if in_flight == 1 or self._leaders.on:
            ids = itertools.count(first_batch_id) if first_batch_id is not None else itertools.repeat(None)
            return [await self.append(stream, columns, writer_id, batch_id) for columns, batch_id in zip(batches, ids)]
        win, request = windowed_requests(stream, batches, writer_id, first_batch_id, in_flight, self.retries)
        calls: dict[asyncio.Future, int] = {}
        pending = asyncio.ensure_future(asyncio.to_thread(request, win.next_new))
        try:
            while not win.finished():
                while win.room():
                    batch_id = win.resend()
                    if batch_id is None:
                        await asyncio.wait({pending})
                        batch_id = win.take(pending)
                        if batch_id is None:
                            break
                        pending = asyncio.ensure_future(asyncio.to_thread(request, win.next_new))
                    call = self._stub.Append(win.sending(batch_id), timeout=self.timeout, metadata=self._metadata)
                    calls[asyncio.ensure_future(call)] = batch_id
                if win.flying:
                    done, _ = await asyncio.wait(calls, return_when=asyncio.FIRST_COMPLETED)
                    for call in done:
                        _ended(win, calls.pop(call), call)
                elif win.failures:
                    await asyncio.sleep(0.1 * 2 ** (win.settle() - 1))
        finally:
            pending.cancel()
            for call in calls:
                call.cancel()
        return win.outcome()

    async def slide(self, stream: str, writer_id: str = "", batch_id: int | None = None) -> int:
        req = build(pb.SlideRequest, stream=stream, writer_id=writer_id, batch_id=batch_id)
        return (await self.call("Slide", req, idempotent=batch_id is not None and bool(writer_id), stream=stream)).slide

    async def stage(self, stream: str, columns: Any, writer_id: str, batch_id: int, attempt: str,
                    chunk: int = 0) -> StageResult:
        r = await self.call("StageRows", stage_request(stream, columns, writer_id, batch_id, attempt, chunk), True,
                            stream=stream)
        return StageResult(r.staged_rows, r.committed)

    async def commit_batch(self, stream: str, writer_id: str, batch_id: int, attempts: dict[str, int],
                           slide: bool = False, event_time_ms: int | None = None, at_slide: int | None = None,
                           split: bool = False) -> CommitResult:
        r = await self.call("CommitBatch", commit_request(stream, writer_id, batch_id, attempts, slide, event_time_ms,
                                                          at_slide, split), True, stream=stream)
        return commit_result(r)

    async def abort_batch(self, stream: str, writer_id: str, batch_id: int) -> int:
        return (await self.call("AbortBatch", build(pb.AbortBatchRequest, stream=stream, writer_id=writer_id,
                                                                    batch_id=batch_id), True, stream=stream)).discarded_rows

    async def query(self, query: str | pb.StructuredQuery, priority: int = 0, timeout: float | None = None,
                    as_of_slide: int | None = None, read_from: str = "", min_slide: int | None = None,
                    min_slide_wait_ms: int = 0) -> Answer:
        req = replica_query(query_request(query, priority, as_of_slide), read_from, min_slide, min_slide_wait_ms)
        stream = query_stream(query) if self._leaders.on and read_from != "follower" else None
        return Answer.from_pb((await self.call("Query", req, True, timeout, stream)).answer)

    async def explain(self, query: str | pb.StructuredQuery) -> dict:
        """As Client.explain."""
        return _explained(await self.call("Explain", query_request(query, 0), True))

    async def register(self, query: str | pb.StructuredQuery, priority: int = 0,
                       return_sketches: bool = False, key: str | None = None) -> PeriodicQuery:
        """As Client.register."""
        req = register_request(query, priority, return_sketches, key)
        stream = query_stream(query) if self._leaders.on else None
        r = await self.call("RegisterQuery", req, True, stream=stream)
        self._leaders.registered(r.query_id, req, stream)
        return PeriodicQuery(r.query_id, r.every_slides)

    async def unregister(self, query_id: str) -> None:
        address, current = self._leaders.at(query_id)
        await self._call_at(self._stub_at(address), "UnregisterQuery", build(pb.UnregisterQueryRequest, query_id=current),
                            False, None)
        self._leaders.periodic.pop(query_id, None)

    async def list_queries(self, stream: str = "") -> list[dict]:
        return [_dict(q) for q in (await self.call("ListQueries", build(pb.ListQueriesRequest, stream=stream), True)).queries]

    async def subscribe(self, query_id: str, timeout: float | None = None,
                        after_slide: int | None = None) -> AsyncIterator[Answer]:
        """As Client.subscribe: a query registered here while following leaders is registered
        again on the new leader after a failover (as follow.Resubscribing: from the kept answers
        after the last slide passed on, slides increasing, each at most once, a gap in them where
        no registration answered)."""
        last = -1 if after_slide is None else after_slide
        after = after_slide
        while True:
            address, current = self._leaders.at(query_id)
            call = self._stub_at(address).Subscribe(build(pb.SubscribeRequest, query_id=current, after_slide=after), timeout=timeout,
                                                    metadata=self._metadata)
            try:
                async for a in _until_stalled(call, lambda: self._leaders.elsewhere(query_id)):
                    if a.slide <= last:
                        continue
                    last = a.slide
                    out = Answer.from_pb(a)
                    out.query_id = query_id
                    yield out
                return
            except (grpc.RpcError, Unavailable) as e:
                err = from_rpc_error(e) if isinstance(e, grpc.RpcError) else e
                again = self._leaders.again(query_id)
                if again is None or not isinstance(err, RESUMABLE):
                    raise err from None
            finally:
                call.cancel()
            r = await self.call("RegisterQuery", again[0], True, stream=again[1])
            self._leaders.moved(query_id, r.query_id)
            after = last  # (its first answer may come before this Subscribe: kept, sent first)

    async def stats(self, stream: str = "") -> dict:
        return _dict(await self.call("GetStats", build(pb.GetStatsRequest, stream=stream), True))

    async def history(self, stream: str = "", since_seq: int = 0, limit: int = 10_000) -> list[dict]:
        req = build(pb.StreamHistoryRequest, stream=stream, since_seq=since_seq, limit=limit)
        return history_events(await self.call("StreamHistory", req, True))


async def _until_stalled(call, moved, grace_s: float = 1.0, poll_s: float = 0.1):
    """The answers of an asyncio Subscribe call, until `moved()` (etcd names another leader than
    the server of the call: why, else None) has held for `grace_s` with no answer meanwhile; then
    Unavailable, as follow.Resubscribing does for the blocking clients (a paused leader neither
    answers nor ends the call)."""
    answers = call.__aiter__()
    heard = since = asyncio.get_running_loop().time()
    while True:
        nxt = asyncio.ensure_future(answers.__anext__())
        while not nxt.done():
            await asyncio.wait({nxt}, timeout=poll_s)
            if nxt.done():
                break
            now = asyncio.get_running_loop().time()
            why = moved()
            if why is None:
                since = now
            elif now - max(since, heard) >= grace_s:
                nxt.cancel()
                raise Unavailable(f"no answer and etcd names another leader: {why}")
        try:
            a = nxt.result()
        except StopAsyncIteration:
            return
        heard = asyncio.get_running_loop().time()
        yield a


__all__ = ["AppendResult", "AsyncClient", "Client", "PeriodicQuery", "WindowStoreError"]
