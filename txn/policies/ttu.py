"""TTU and TTU with re-scans (Algorithm 8): reads in time-to-update order, the sub-window due to
expire soonest last; the re-scan variant removes an expired contribution instead of aborting. A
policy: it reads a query's state and windows only."""
from __future__ import annotations

from typing import TYPE_CHECKING

from windowstore.store import SubWindow

from ..kinds import PolicyName, Reaction
from .base import Policy

if TYPE_CHECKING:
    from ..query import Source


class Ttu(Policy):
    """Algorithm 8: reads the unread sub-window with the highest time-to-update first (across all
    joined streams; within a stream that is its youngest unread one), so the one due to expire
    next is read last; aborts only when unavoidable."""

    name = PolicyName.TTU
    holds = True
    falls_back = True

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
