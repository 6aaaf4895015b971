"""The concurrency-control policies of thesis chapter 7, one class each, and the registry the
scheduler picks one from once, keyed by PolicyName (the wire spellings). A new policy (shared
periodic execution, say) is another Policy subclass; nothing here touches the scheduler."""
from __future__ import annotations

from ..kinds import PolicyName
from .base import Policy
from .lws import Lws
from .serial import Serial
from .ttu import Ttu, TtuRescan, time_to_update
from .ws import Ws

__all__ = ["POLICY_CLASSES", "Lws", "Policy", "Serial", "Ttu", "TtuRescan", "Ws", "make_policy", "time_to_update"]


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
