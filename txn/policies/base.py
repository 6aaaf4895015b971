"""The Policy base class: the hooks of thesis Algorithms 7 and 8 (which sub-window a query reads
next, what a slide does to a begun query, whether a query locks its windows or may wait for a
slide), with latest-window serializability reading oldest first as their default. A policy reads a
query's sources and their windows; it never records history, counts, or touches the scheduler."""
from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Sequence

from windowstore.store import SubWindow

from ..kinds import PolicyName, Reaction

if TYPE_CHECKING:
    from ..query import Source


class Policy:
    """Latest-window serializability, reading oldest first (the base of the others). A query's
    state is per source (scheduler.Source: one for a single-stream query, one per joined stream)."""

    name: ClassVar[PolicyName]
    # A begun query holds its windows: their slides wait for its commit, nothing pre-empts it, and it
    # begins only on windows no slide is being sealed into (serial).
    locks: ClassVar[bool] = False
    # A window scan may wait for its window's next slide rather than read the sub-window that slide
    # overwrites last (Scheduler._hold): only where that sub-window is read last (time-to-update).
    holds: ClassVar[bool] = False
    # A query aborted (or its merge re-scanned) Scheduler.fallback_after times runs on holding its
    # windows, as `locks` does for every query (Outcomes._fall_back): liveness where the policy
    # aborts only the attempts that outlive what the slides leave them (time-to-update)
    falls_back: ClassVar[bool] = False

    def begin(self, txn) -> None:
        """An attempt begins (not a probe: it reads in one step): take what it needs now."""

    def readable(self, src) -> Sequence[int]:
        """The versions of src the begun attempt reads, as of now (its read set is a subset)."""
        return src.versions()

    def expected(self, src) -> int:
        """How many sub-windows of src the attempt reads (all_read counts against it)."""
        return len(src.versions())

    def all_read(self, txn) -> bool:
        """next_read(txn) is None, counted: a read set holds only readable versions (a slide aborts,
        or removes, one that has left the window), so a source is read once it holds as many."""
        for src in txn.sources:
            if len(src.read) < self.expected(src):
                return False
        return True

    def next_read(self, txn) -> tuple[Source, SubWindow] | None:
        """(source, sub-window) the attempt reads next, or None when it has read everything: source
        by source (a join's FROM order), each in this policy's order."""
        for src in txn.sources:
            sub = self.next_of(src)
            if sub is not None:
                return src, sub
        return None

    def next_of(self, src) -> SubWindow | None:
        """src's unread sub-window that comes first in this policy's order."""
        window = src.window
        vs = src.versions()
        if src.as_of is not None:
            # slide k's sub-windows, oldest (the next to be overwritten) first, under every policy
            for v in vs:
                if v not in src.read:
                    return window.subs[v % window.n]
            return None
        vs = self.order(vs)
        latest = window.latest
        # Reads follow this order and the read set only grows while the window does not slide:
        # go on from the last position found, not from the start (O(n_Q) per query, not O(n_Q^2))
        cursor = src.cursor
        read = src.read
        for i in range(cursor[1] if cursor is not None and cursor[0] == latest else 0, len(vs)):
            v = vs[i]
            if v not in read:
                src.cursor = (latest, i)
                return window.subs[v % window.n]
        src.cursor = (latest, len(vs))
        return None

    def order(self, vs: range) -> range:
        """A window's versions (ascending) in the order this policy reads them."""
        return vs

    def on_slide(self, plan) -> Reaction:
        """What a slide that expires a sub-window a begun query read does to it."""
        return Reaction.ABORT

    def _check(self) -> None:
        """Policies hold no state of their own."""
