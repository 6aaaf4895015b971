"""SERIAL: a begun query locks its windows and runs to commit (the scheduler honours `locks`). A
policy: it reads a query's state and windows only."""
from __future__ import annotations

from ..kinds import PolicyName, Reaction
from .ttu import Ttu


class Serial(Ttu):
    """A begun query runs to commit: slides of its windows (every stream a join reads) wait, nothing
    pre-empts it. It reads in time-to-update order (no slide meets it, so the order is immaterial)."""

    name = PolicyName.SERIAL
    locks = True
    holds = False
    falls_back = False  # (every query holds its windows)

    def on_slide(self, plan) -> Reaction:
        return Reaction.KEEP
