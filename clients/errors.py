"""gRPC errors as typed exceptions that keep the status code and the server's message."""
from __future__ import annotations

import grpc


# trailing metadata of a refusal by a replica that does not lead the stream: the leader's address
LEADER_METADATA = "windowstore-leader"


class WindowStoreError(Exception):
    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, code: grpc.StatusCode | None = None, leader: str = ""):
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.leader = leader  # a replica's refusal: the address of the stream's leader, when it knows it


class InvalidArgument(WindowStoreError, ValueError):
    """Raised by the server, and by the SDK itself for input it can check before sending."""
    code = grpc.StatusCode.INVALID_ARGUMENT


class OutOfRange(InvalidArgument):
    """A value beyond what the store represents exactly (e.g. an event time whose sub-window bounds
    would leave int64); the message names the field and the limit. An InvalidArgument too."""
    code = grpc.StatusCode.OUT_OF_RANGE


class NotFound(WindowStoreError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(WindowStoreError):
    code = grpc.StatusCode.ALREADY_EXISTS


class ResourceExhausted(WindowStoreError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(WindowStoreError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class Aborted(WindowStoreError):
    code = grpc.StatusCode.ABORTED


class Unavailable(WindowStoreError):
    code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceeded(WindowStoreError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class Cancelled(WindowStoreError):
    code = grpc.StatusCode.CANCELLED


class PermissionDenied(WindowStoreError):
    code = grpc.StatusCode.PERMISSION_DENIED


class Unauthenticated(WindowStoreError):
    code = grpc.StatusCode.UNAUTHENTICATED


class Internal(WindowStoreError):
    code = grpc.StatusCode.INTERNAL


_BY_CODE = {cls.code: cls for cls in (InvalidArgument, OutOfRange, NotFound, AlreadyExists, ResourceExhausted,
                                      FailedPrecondition, Aborted, Unavailable, DeadlineExceeded, Cancelled,
                                      PermissionDenied, Unauthenticated, Internal)}


def from_rpc_error(e: grpc.RpcError) -> WindowStoreError:
    code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
    details = e.details() if hasattr(e, "details") else str(e)
    cls = _BY_CODE.get(code, WindowStoreError)
    return cls(details or code.name, code, _leader_of(e))


def _leader_of(e: grpc.RpcError) -> str:
    """The leader a replica's refusal names (LEADER_METADATA), else ""."""
    try:
        trailing = e.trailing_metadata() if hasattr(e, "trailing_metadata") else None
    except Exception:  # noqa: BLE001 - a call that never reached a server has none
        return ""
    for key, value in trailing or ():
        if key == LEADER_METADATA:
            return value if isinstance(value, str) else value.decode()
    return ""
