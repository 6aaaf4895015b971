"""What the scheduler counts (Counters) and which counter an abort's cause goes to
(ABORT_COUNTERS). Plain tallies: the core increments them, nothing here reads a query or a window."""
from __future__ import annotations

from dataclasses import dataclass

from ..kinds import AbortCause


@dataclass
class Counters:
    """Outcomes of queries and slides, per query class and per stream (GetStats, metrics)."""

    committed: int = 0
    aborts: int = 0
    restarts: int = 0
    fallbacks: int = 0  # queries that went on holding their windows after aborts (Outcomes._fall_back)
    failed: int = 0
    removals: int = 0
    errors: int = 0
    slides: int = 0

    def _check(self) -> None:
        assert all(v >= 0 for v in self.__dict__.values()), self.__dict__

    def as_dict(self) -> dict:
        return dict(self.__dict__)


# An abort's cause -> the Counters field it counts in (a conflict's restart counts in `restarts` too;
# a withdrawn query is not counted).
ABORT_COUNTERS = {AbortCause.CONFLICT: "aborts", AbortCause.RESTART_LIMIT: "failed",
                   AbortCause.REFUSED: "failed", AbortCause.ERROR: "errors", AbortCause.WITHDRAWN: None}


def total(by_class: dict, by_stream: dict) -> dict:
    """The counters of every class summed; slides summed over the streams."""
    out = Counters()
    for c in by_class.values():
        for k, v in c.as_dict().items():
            setattr(out, k, getattr(out, k) + v)
    out.slides = sum(c.slides for c in by_stream.values())
    return out.as_dict()
