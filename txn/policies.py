"""The concurrency-control policies of thesis chapter 7, one class each: the hooks Algorithms 7 and 8
need (which sub-window a query reads next, what a slide does to a begun query, whether a query
holds its windows or waits for a slide). They read a query's state and its windows; they never
record history, count, or change the scheduler's queues: the scheduler core does that."""
from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Sequence

from windowstore.store import SubWindow

from .kinds import PolicyName, Reaction

if TYPE_CHECKING:
    from .scheduler import Source


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

    def begin(self, txn) -> None:
        """An attempt begins (not a probe: it reads in one step): take what it needs now."""

    def readable(self, src) -> Sequence[int]:
        """The versions of src the begun attempt reads, as of now (its read set is a subset)."""
        return src.versions()

    def expected(self, src) -> int:
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


class Lws(Policy):
    """Algorithm 7: reads oldest first (a join: stream by stream, FROM order); a slide that expires
    a sub-window the attempt read (the (j + n - n_Q) mod n rule, which is the overwritten one when
    n_Q = n) aborts it, whichever joined stream slid."""

    name = PolicyName.LWS


class Ttu(Policy):
    """Algorithm 8: reads the unread sub-window with the highest time-to-update first (across all
    joined streams; within a stream that is its youngest unread one), so the one due to expire
    next is read last; aborts only when unavoidable."""

    name = PolicyName.TTU
    holds = True

    def order(self, vs: range) -> range:
        return vs[::-1]

    def next_read(self, txn) -> tuple[Source, SubWindow] | None:
        sources = txn.sources
        if len(sources) == 1:  # one candidate: no time-to-update to compare
            src = sources[0]
            sub = self.next_of(src)
            return None if sub is None else (src, sub)
        best = None
        for src in sources:
            sub = self.next_of(src)
            if sub is not None:
                key = time_to_update(src.window, sub.slide, src.n_q)
                if best is None or key > best[0]:
                    best = (key, src, sub)
        return None if best is None else (best[1], best[2])


class TtuRescan(Ttu):
    """Algorithm 8 with re-scans: on a conflict the expired version's contribution is removed (the
    new sub-window is still unread) instead of aborting, where the query can remove one; a join
    drops the expired sub-window's reference (the join at commit never sees its rows), so a join
    never aborts."""

    name = PolicyName.TTU_RESCAN

    def on_slide(self, plan) -> Reaction:
        return Reaction.RESCAN if plan.supports_remove else Reaction.ABORT


class Serial(Ttu):
    """A begun query runs to commit: slides of its windows (every stream a join reads) wait, nothing
    pre-empts it. It reads in time-to-update order (no slide meets it, so the order is immaterial)."""

    name = PolicyName.SERIAL
    locks = True
    holds = False

    def on_slide(self, plan) -> Reaction:
        return Reaction.KEEP


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


POLICY_CLASSES: dict[PolicyName, type[Policy]] = {cls.name: cls for cls in (Serial, Ws, Lws, Ttu, TtuRescan)}


def make_policy(name: "str | Policy") -> Policy:
    """The policy called `name` (its wire spelling; a Policy instance is taken as it is, so a new
    policy plugs in as a class); ValueError names the choices."""
    if isinstance(name, Policy):
        return name
    try:
        return POLICY_CLASSES[PolicyName(name)]()
    except ValueError:
        choices = ", ".join(p.value for p in PolicyName)
        raise ValueError(f"unknown policy {name!r}: choose one of {choices}") from None


def time_to_update(window, v: int, n_q: int) -> tuple[float, int]:
    """When sub-window v leaves a window of the n_q youngest (at slide v + n_q): an estimate of that
    clock time, and the slides still to come. Processing-time windows slide on schedule; others
    (manual, event time, row counts) are extrapolated from the seal times of the live sub-windows,
    and a window without such a history counts as never sliding (read first)."""
    left = v + n_q - window.latest
    due = window.next_due_ms()
    if due is not None:
        return float(due + (left - 1) * window.spec.subwindow_ms), left
    latest, oldest = window.latest, max(0, window.latest - window.n + 1)
    if latest > oldest:
        newest_sub, oldest_sub = window.subs[latest % window.n], window.subs[oldest % window.n]
        period = (newest_sub.sealed_at_ms - oldest_sub.sealed_at_ms) / (latest - oldest)
        if period > 0:
            return float(window.last_seal_ms + left * period), left
    return float("inf"), left
