"""The closed sets of the store's core, as enums: a query's access path and a window's clock. Each
is a StrEnum whose values are the spellings the wire, the CLI, `explain` and the snapshots already
use, so a member compares, hashes and serialises as that string. This module holds names only; it
must not import the rest of the store."""
from __future__ import annotations

import enum


class AccessPath(enum.StrEnum):
    """How a plan reads its window (planner/access.py chooses; Answer.access reports it)."""

    PROBE = "probe"          # one read of the window-level synopses (running totals, MIN/MAX blocks)
    SYNOPSIS = "synopsis"    # the per-sub-window synopses, one sub-window per read
    WINDOW = "window"        # the rows of each sub-window, one sub-window per read
    JOIN = "join"            # a join of several streams' windows (store/join/)


class Clock(enum.StrEnum):
    """What makes a stream's slides due (window.py)."""

    PROCESSING = "processing"  # the server's clock: one slide per sub-window length
    EVENT = "event"            # the rows' event times, through the watermark
    MANUAL = "manual"          # only when a client asks
