"""The closed sets of the transaction side, as enums: policies, query and job kinds, slide and abort
causes, what one scheduler operation did, the history checker's verdicts. Each is a StrEnum whose
values are the spellings the wire, the CLI flags, the history and the counters already use, so a
member compares, hashes and serialises as that string. This module holds names only; it must not
import the scheduler."""
from __future__ import annotations

import enum


class PolicyName(enum.StrEnum):
    """The concurrency-control policies of thesis chapter 7 (txn/policies/ implements them)."""

    SERIAL = "serial"
    WS = "ws"
    LWS = "lws"
    TTU = "ttu"
    TTU_RESCAN = "ttu-rescan"


class QueryKind(enum.StrEnum):
    """One-time queries pre-empt periodic executions (Result and the per-class counters)."""

    ONETIME = "onetime"
    PERIODIC = "periodic"


class JobKind(enum.StrEnum):
    """An offloaded window-scan computation: one sub-window's read, or the final merge."""

    READ = "read"
    FINISH = "finish"


class SlideCause(enum.StrEnum):
    """Why a slide is applied: it fell due on its stream's clock, or a client asked for it."""

    DUE = "due"
    MANUAL = "manual"


class AbortCause(enum.StrEnum):
    """Why a query attempt ends with an abort record (or, not begun, ends without one)."""

    CONFLICT = "conflict"          # a slide expired a sub-window it read: it restarts
    RESTART_LIMIT = "restart-limit"  # ... once too often: it fails (RestartLimitExceeded)
    REFUSED = "refused"            # the store refused to answer it (row limit, AS OF expired)
    ERROR = "error"                # its execution raised (QueryFailed, StreamFailed)
    WITHDRAWN = "withdrawn"        # cancelled, its stream dropped, its task unregistered


class Step(enum.StrEnum):
    """What Scheduler.step() (None when idle) and Scheduler.complete() did."""

    SLIDE = "slide"
    READ = "read"
    PROBE = "probe"
    HOLD = "hold"
    REFRESH = "refresh"
    ERROR = "error"
    COMMIT = "commit"
    DISCARDED = "discarded"



class Reaction(enum.StrEnum):
    """What a policy does to a begun query when a slide expires a sub-window it read."""

    KEEP = "keep"      # nothing: it reads a snapshot, or holds the window (serial)
    ABORT = "abort"    # the attempt aborts and restarts
    RESCAN = "rescan"  # the expired version's contribution is removed; it goes on


class Level(enum.StrEnum):
    """The history checker's verdict on a committed query (checker.py, thesis 7.3.2)."""

    LWS = "lws"      # it read exactly the window as of its commit (Definition 7.2)
    WS = "ws"        # ... as of some earlier moment only (Definition 7.1)
    AS_OF = "as_of"  # AS OF SLIDE k: exactly the window as of slide k
    TORN = "torn"    # anything else
