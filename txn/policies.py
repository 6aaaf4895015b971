"""The concurrency-control policies of thesis chapter 7, one class each: the hooks Algorithms 7 and 8
need (which sub-window a query reads next, what a slide does to a begun query, whether a query
holds its windows or waits for a slide). They read a query's state and its windows; they never
record history, count, or change the scheduler's queues: the scheduler core does that."""
from __future__ import annotations

from typing import ClassVar

from windowstore.store import SubWindow

from .kinds import PolicyName, Reaction


class Policy:
    """Latest-window serializability, reading oldest first (the base of the others)."""

    name: ClassVar[PolicyName]
    # A begun query holds its windows: their slides wait for its commit, nothing pre-empts it, and it
    # begins only on windows no slide is being sealed into (serial).
    locks: ClassVar[bool] = False
    # A window scan may wait for its window's next slide rather than read the sub-window that slide
    # overwrites last (Scheduler._hold): only where that sub-window is read last (time-to-update).
    holds: ClassVar[bool] = False

    # -- single-stream queries -------------------------------------------------------------------
    def begin(self, txn) -> None:
        """A single-stream attempt begins (not a probe): take what it needs at this moment."""

    def readable(self, txn) -> range | list[int]:
        """The versions the begun attempt reads, as of now (the read set is a subset of them)."""
        return versions(txn.plan)

    def all_read(self, txn) -> bool:
        """next_read(txn) is None, counted: the read set holds only readable versions (a slide
        aborts, or removes, one that has left the window), so it is complete once as large."""
        return len(txn.read) >= len(self.readable(txn))

    def next_read(self, txn) -> SubWindow | None:
        """The sub-window txn reads next, or None when the attempt has read everything."""
        window = txn.plan.stream.window
        vs = versions(txn.plan)
        if txn.plan.as_of is not None:
            # slide k's sub-windows, oldest (the next to be overwritten) first, under every policy
            for v in vs:
                if v not in txn.read:
                    return window.subs[v % window.n]
            return None
        vs = self.order(vs)
        latest = window.latest
        # Reads follow this order and the read set only grows while the window does not slide:
        # go on from the last position found, not from the start (O(n_Q) per query, not O(n_Q^2))
        cursor = txn.cursor
        read = txn.read
        for i in range(cursor[1] if cursor is not None and cursor[0] == latest else 0, len(vs)):
            v = vs[i]
            if v not in read:
                txn.cursor = (latest, i)
                return window.subs[v % window.n]
        txn.cursor = (latest, len(vs))
        return None

    def order(self, vs: range) -> range:
        """The window's versions (ascending) in the order this policy reads them."""
        return vs

    # -- joins -----------------------------------------------------------------------------------
    def begin_join(self, txn) -> None:
        """A join attempt begins: take what it needs at this moment."""

    def next_join_read(self, txn) -> tuple[str, SubWindow] | None:
        """(stream, sub-window) the join reads next: stream by stream (FROM order), oldest first."""
        plan = txn.plan
        for s in plan.streams:
            w, got = s.window, txn.reads[s.name]
            for v in range(max(0, w.latest - plan.n_q[s.name] + 1), w.latest + 1):
                if v not in got:
                    return s.name, w.subs[v % w.n]
        return None

    # -- slides ----------------------------------------------------------------------------------
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
    """Algorithm 8: reads the unread sub-window with the highest time-to-update (the youngest)
    first, so the one due to expire next is read last; aborts only when unavoidable."""

    name = PolicyName.TTU
    holds = True

    def order(self, vs: range) -> range:
        return vs[::-1]

    def next_join_read(self, txn) -> tuple[str, SubWindow] | None:
        """Across all joined streams, the unread sub-window with the highest time-to-update; within
        a stream that is its youngest unread one."""
        plan = txn.plan
        best = None
        for s in plan.streams:
            w, got, n_q = s.window, txn.reads[s.name], plan.n_q[s.name]
            for v in range(w.latest, max(0, w.latest - n_q + 1) - 1, -1):
                if v not in got:
                    key = time_to_update(w, v, n_q)
                    if best is None or key > best[0]:
                        best = (key, s.name, w.subs[v % w.n])
                    break
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
    """Window serializability: a query reads the window as of its begin (it keeps the sub-window
    objects, which never change; a join: every joined stream's youngest sub-windows at that one
    moment); slides never meet it, so it never aborts."""

    name = PolicyName.WS

    def begin(self, txn) -> None:
        plan = txn.plan
        window = plan.stream.window
        txn.snapshot = window.youngest(plan.n_q) if plan.as_of is None else window.as_of(plan.as_of, plan.n_q)

    def readable(self, txn) -> list[int]:
        return [sub.slide for sub in txn.snapshot]

    def next_read(self, txn) -> SubWindow | None:
        for sub in txn.snapshot:
            if sub.slide not in txn.read:
                return sub
        return None

    def begin_join(self, txn) -> None:
        plan = txn.plan  # every joined window as of this one moment
        txn.snapshot = [(s.name, sub) for s in plan.streams for sub in reversed(s.window.youngest(plan.n_q[s.name]))]

    def next_join_read(self, txn) -> tuple[str, SubWindow] | None:
        for name, sub in txn.snapshot:
            if sub.slide not in txn.reads[name]:
                return name, sub
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


def versions(plan) -> range:
    """The versions a single-stream query's attempt reads, ascending (not under ws, which reads its
    snapshot): the pinned slide's (AS OF SLIDE k), or the n_Q youngest."""
    if plan.as_of is not None:
        return pinned_versions(plan)
    latest = plan.stream.window.latest
    return range(max(0, latest - plan.n_q + 1), latest + 1)


def pinned_versions(plan) -> range:
    """AS OF SLIDE k: exactly slide k's n_Q sub-windows (from 0 while the window filled)."""
    return range(max(0, plan.as_of - plan.n_q + 1), plan.as_of + 1)


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
