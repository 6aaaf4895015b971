"""The engine's refusals of a command or query, each a StoreError the server maps to one gRPC
status (NOT_FOUND, ALREADY_EXISTS, FAILED_PRECONDITION)."""
from __future__ import annotations

from windowstore.store import StoreError


class NotFound(StoreError):
    pass


class AlreadyExists(StoreError):
    pass


class FailedPrecondition(StoreError):
    pass
