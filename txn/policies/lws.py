"""LWS (Algorithm 7): the base policy's order and reaction under its own name. A policy: it reads
a query's state and windows only."""
from __future__ import annotations

from ..kinds import PolicyName
from .base import Policy


class Lws(Policy):
    """Algorithm 7: reads oldest first (a join: stream by stream, FROM order); a slide that expires
    a sub-window the attempt read (the (j + n - n_Q) mod n rule, which is the overwritten one when
    n_Q = n) aborts it, whichever joined stream slid."""

    name = PolicyName.LWS
