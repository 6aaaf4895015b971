"""Clients of windowstore: the Python SDK (sync and asyncio). The Spark integration lives in
`windowstore.clients.spark` (needs the `spark` extra)."""
from .answer import Answer
from .client import AppendResult, AsyncClient, Client, CommitResult, PeriodicQuery, StageResult, aggregate
from .errors import (Aborted, AlreadyExists, Cancelled, DeadlineExceeded, FailedPrecondition, Internal, InvalidArgument,
                     NotFound, OutOfRange, PermissionDenied, ResourceExhausted, Unauthenticated, Unavailable, WindowStoreError)

__all__ = ["Aborted", "AlreadyExists", "Answer", "AppendResult", "AsyncClient", "Cancelled", "Client", "CommitResult",
           "DeadlineExceeded", "FailedPrecondition", "Internal", "InvalidArgument", "NotFound", "OutOfRange", "PeriodicQuery",
           "PermissionDenied", "ResourceExhausted", "StageResult", "Unauthenticated", "Unavailable", "WindowStoreError",
           "aggregate"]
