"""Clients of windowstore: the Python SDK (sync and asyncio). The Spark integration lives in
`windowstore.clients.spark` (needs the `spark` extra)."""
from .answer import Answer
from .client import AppendResult, AsyncClient, Client, PeriodicQuery
from .errors import (Aborted, AlreadyExists, Cancelled, DeadlineExceeded, FailedPrecondition, InvalidArgument,
                     NotFound, ResourceExhausted, Unavailable, WindowStoreError)

__all__ = ["Aborted", "AlreadyExists", "Answer", "AppendResult", "AsyncClient", "Cancelled", "Client",
           "DeadlineExceeded", "FailedPrecondition", "InvalidArgument", "NotFound", "PeriodicQuery",
           "ResourceExhausted", "Unavailable", "WindowStoreError"]
