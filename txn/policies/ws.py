"""WS: a query reads a snapshot of its windows taken at begin and never aborts. A policy: it sets
its query's snapshots and reads their state and windows only."""
from __future__ import annotations

from windowstore.store import SubWindow

from ..kinds import PolicyName, Reaction
from .base import Policy


class Ws(Policy):
    """Window serializability: a query reads the window as of its begin, youngest first (it keeps
    the sub-window objects, which never change; a join: every joined stream's youngest sub-windows
    at that one moment); slides never meet it, so it never aborts."""

    name = PolicyName.WS

    def begin(self, txn) -> None:
        for src in txn.sources:
            w = src.window
            src.snapshot = w.youngest(src.n_q) if src.as_of is None else w.as_of(src.as_of, src.n_q)

    def readable(self, src) -> list[int]:
        return [sub.slide for sub in src.snapshot]

    def expected(self, src) -> int:
        return len(src.snapshot)

    def next_of(self, src) -> SubWindow | None:
        for sub in src.snapshot:
            if sub.slide not in src.read:
                return sub
        return None

    def on_slide(self, plan) -> Reaction:
        return Reaction.KEEP
