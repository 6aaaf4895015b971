"""The driver's own refusals: the server is shutting down, a deadline passed before a request ran,
the log cannot be written. The engine's refusals (NotFound, ...) are the engine's (txn.engine);
rpc.py maps both to gRPC statuses. Nothing here has state."""
from __future__ import annotations

from windowstore.store import StoreError

__all__ = ["DeadlineExceeded", "ShuttingDown", "Unavailable"]


class ShuttingDown(StoreError):
    pass


class DeadlineExceeded(StoreError):
    pass


class Unavailable(StoreError):
    """Writes are refused: the log cannot be written (disk full, I/O error)."""
