"""The gRPC edge: how every windowstore RPC is received and answered, in one place.

For each method of the service (from its descriptor, so none is forgotten):
- the request bytes are decoded here, and a body that is not a valid message is INVALID_ARGUMENT
  naming the message type (grpc's own decoder would answer INTERNAL); a Query's handler gets its
  bytes (Received) and decodes them itself, unless it can answer from the bytes alone;
- with a tokens file, the caller is authenticated before any work (UNAUTHENTICATED), and its
  principal is kept in a context variable for the handler's permission checks;
- errors become their status code (the table below); anything unexpected is INTERNAL and logged;
- with metrics on, each call is counted and timed by method and status code.

Handlers are coroutines on the server's event loop, where the engine runs too (driver/): a
call that waits (a write until durable, a long query, an open Subscribe) holds no thread, so open
Subscribe streams cost memory, not handler threads.
"""
from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import time
from typing import Any

import grpc

from windowstore.clients.errors import LEADER_METADATA  # (the wire's name, shared with the SDK)
from windowstore.store import InvalidInput, QuerySyntaxError, StoreError
from windowstore.store.errors import OutOfRange, ResourceLimit, Unrepresentable
from windowstore.txn import QueryFailed, QueryWithdrawn, RestartLimitExceeded, StreamFailed
from windowstore.v1 import windowstore_pb2 as pb

from .append_order import OutOfOrder
from .convert import parse_append
from .driver import AlreadyExists, DeadlineExceeded, FailedPrecondition, NotFound, ShuttingDown, Unavailable
from . import oplog
from .security import ANONYMOUS, AccessPolicy

log = logging.getLogger("windowstore.service")
SERVICE = pb.DESCRIPTOR.services_by_name["WindowStoreService"]


class PermissionDenied(StoreError):
    pass


class Unauthenticated(StoreError):
    pass


_CODES = [
    (QuerySyntaxError, grpc.StatusCode.INVALID_ARGUMENT),
    (OutOfRange, grpc.StatusCode.OUT_OF_RANGE),          # a value past what int64 bounds can carry
    (Unrepresentable, grpc.StatusCode.OUT_OF_RANGE),     # a stream's state the wire cannot carry
    (InvalidInput, grpc.StatusCode.INVALID_ARGUMENT),
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (AlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (ResourceLimit, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (FailedPrecondition, grpc.StatusCode.FAILED_PRECONDITION),
    (StreamFailed, grpc.StatusCode.FAILED_PRECONDITION),  # a stream whose seal raised: drop it or restart
    (RestartLimitExceeded, grpc.StatusCode.ABORTED),
    (OutOfOrder, grpc.StatusCode.ABORTED),                # a pipelined Append whose predecessor was not applied
    (QueryFailed, grpc.StatusCode.INTERNAL),
    (QueryWithdrawn, grpc.StatusCode.CANCELLED),
    (ShuttingDown, grpc.StatusCode.UNAVAILABLE),
    (Unavailable, grpc.StatusCode.UNAVAILABLE),
    (PermissionDenied, grpc.StatusCode.PERMISSION_DENIED),
    (Unauthenticated, grpc.StatusCode.UNAUTHENTICATED),
    (DeadlineExceeded, grpc.StatusCode.DEADLINE_EXCEEDED),
    (TimeoutError, grpc.StatusCode.DEADLINE_EXCEEDED),  # the caller's deadline passed while it waited
]

UNAUTHENTICATED = "a valid bearer token is required (metadata 'authorization: Bearer <token>')"
_principal: contextvars.ContextVar[str] = contextvars.ContextVar("windowstore_principal", default=ANONYMOUS)


def status(e: BaseException) -> grpc.StatusCode:
    for cls, code in _CODES:
        if isinstance(e, cls):
            return code
    return grpc.StatusCode.INTERNAL


def message(e: BaseException, limit: int = 1000) -> str:
    """An error's message, cut so that a huge name or number quoted in it cannot blow gRPC's
    metadata limit."""
    text = str(e) or type(e).__name__
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def principal() -> str:
    """The authenticated caller of the RPC being handled (ANONYMOUS without a tokens file)."""
    return _principal.get()


class _Undecodable:
    """What the decoder hands the handler for bytes that are not a valid request message."""

    def __init__(self, error: str):
        self.error = error


def _decoder(cls, fast=None):
    """The request's message; `fast(data)`, when given, is tried first (None: not its case)."""
    name = cls.DESCRIPTOR.full_name

    def decode(data: bytes):
        if fast is not None:
            request = fast(data)
            if request is not None:
                return request
        try:
            return cls.FromString(data)
        except Exception as e:  # noqa: BLE001 - DecodeError, invalid UTF-8, ...: the client's bytes are bad
            return _Undecodable(f"the request is not a valid {name} message: {message(e, 200)}")
    return decode


# An Append's Arrow payload is read where it arrived instead of copied twice (convert.WireAppend)
_FAST = {"Append": parse_append}
# Methods whose handler gets the request's bytes (Received) and decodes them only if it must: a
# Query asked before may be answered from its bytes alone (service.py, the answer cache)
_RECEIVED = {"Query"}


class Received:
    """A request's bytes, as they arrived; `message()` decodes them (INVALID_ARGUMENT naming the
    message type when they are not a valid one, as for every other method)."""

    __slots__ = ("data", "_decode")

    def __init__(self, data: bytes, decode):
        self.data, self._decode = data, decode

    def message(self):
        return _decoded(self._decode(self.data))


def _decoded(request):
    """The decoder's request, or INVALID_ARGUMENT with its error when the bytes were not one."""
    if isinstance(request, _Undecodable):
        raise InvalidInput(request.error)
    return request


def _encode(msg) -> bytes:
    """A reply's bytes; a handler's reply that is bytes already (serialized by the handler) goes as it is."""
    return msg if msg.__class__ is bytes else msg.SerializeToString()


class _Call:
    """Per method: authentication, status mapping and metrics around the handler."""

    def __init__(self, name: str, policy: AccessPolicy | None, metrics, streaming: bool,
                 client_errors: oplog.Limited):
        self.name, self.policy, self.metrics, self.client_errors = name, policy, metrics, client_errors
        self.kind = "server_stream" if streaming else "unary"
        # the method's series, looked up once (a labels() lookup cost more than the count itself):
        # its handling time, and its count by status code as codes occur
        self._handling = None if metrics is None else metrics.handling.labels(self.kind, SERVICE.full_name, name)
        self._handled: dict[grpc.StatusCode, Any] = {}

    def begin(self, request, context) -> None:
        _decoded(request)
        if self.policy is not None:
            who = self.policy.principal(context.invocation_metadata())
            if who is None:
                raise Unauthenticated(UNAUTHENTICATED)
            _principal.set(who)

    async def fail(self, e: Exception, context) -> grpc.StatusCode:
        code = status(e)
        if code == grpc.StatusCode.INTERNAL:
            log.error("%s failed", self.name, exc_info=e)
        else:
            if self.client_errors.allows(self.name, code.name):  # (the line's fields built only when it is written)
                oplog.event("client_error", method=self.name, code=code.name, message=message(e, 300),
                            client=principal(), peer=context.peer())
        leader = getattr(e, "leader", "")  # a replica's refusal naming the leader (replication/manager.NotLeader)
        await context.abort(code, message(e), ((LEADER_METADATA, leader),) if isinstance(leader, str) and leader else ())

    def end(self, started: float, code: grpc.StatusCode) -> None:
        handling = self._handling
        if handling is not None:  # (metrics on)
            handled = self._handled.get(code)
            if handled is None:
                handled = self._handled[code] = self.metrics.handled.labels(self.kind, SERVICE.full_name, self.name,
                                                                             code.name)
            handled.inc()
            handling.observe(time.perf_counter() - started)


def _unary(call: _Call, handler):
    # Each call is counted before its status goes out (aio's abort sends it at once), so a client
    # that has its answer finds the call in a scrape.
    async def behavior(request, context):
        started = time.perf_counter()
        try:
            call.begin(request, context)
            response = await handler(request, context)
        except asyncio.CancelledError:
            call.end(started, grpc.StatusCode.CANCELLED)
            raise
        except grpc.aio.AbortError:  # a handler that aborted by itself has sent its status
            raise
        except Exception as e:  # noqa: BLE001 - every error gets a status, never grpc's INTERNAL
            call.end(started, status(e))
            await call.fail(e, context)
        else:
            call.end(started, grpc.StatusCode.OK)
            return response
    return behavior


def _streaming(call: _Call, handler):
    async def behavior(request, context):
        started = time.perf_counter()
        try:
            call.begin(request, context)
            async for response in handler(request, context):
                yield response
        except asyncio.CancelledError:
            call.end(started, grpc.StatusCode.CANCELLED)
            raise
        except grpc.aio.AbortError:  # a handler that aborted by itself has sent its status
            raise
        except Exception as e:  # noqa: BLE001
            call.end(started, status(e))
            await call.fail(e, context)
        else:
            call.end(started, grpc.StatusCode.OK)
    return behavior


def handlers(service, policy: AccessPolicy | None, metrics=None, client_error_log_limit: int = 0) -> grpc.GenericRpcHandler:
    """The service's methods as one generic handler for a grpc.aio server. A refused call is logged
    as `client_error`, at most `client_error_log_limit` times per method and status code in 10 s
    (0: every one; oplog.Limited)."""
    client_errors = oplog.Limited("client_error", ("method", "code"), client_error_log_limit)
    table = {}
    for method in SERVICE.methods:
        request_cls = getattr(pb, method.input_type.name)
        decoder = _decoder(request_cls, _FAST.get(method.name))
        if method.name in _RECEIVED:
            decoder = functools.partial(Received, decode=decoder)
        call = _Call(method.name, policy, metrics, method.server_streaming, client_errors)
        handler = getattr(service, method.name)
        if method.server_streaming:
            table[method.name] = grpc.unary_stream_rpc_method_handler(
                _streaming(call, handler), request_deserializer=decoder, response_serializer=_encode)
        else:
            table[method.name] = grpc.unary_unary_rpc_method_handler(
                _unary(call, handler), request_deserializer=decoder, response_serializer=_encode)
    return grpc.method_handlers_generic_handler(SERVICE.full_name, table)
