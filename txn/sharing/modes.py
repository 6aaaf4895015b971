"""The sharing schedulers one can choose (`--sharing`), as an enum whose values are the CLI spellings."""
from __future__ import annotations

import enum


class SharingMode(enum.StrEnum):
    """Thesis 8.4 and table 8.1: NONE runs every periodic query on its own (no rule applied);
    AGGRESSIVE runs a whole group at its shortest period; CONSERVATIVE (Algorithm 10) runs the
    sub-groups of a group together when they are due together; HYBRID (8.4.4) first lets the cost
    model shorten some sub-groups' periods; HYBRID_LATE also joins the whole late set of a group,
    HYBRID_LP (Algorithm 11) the late and the pending set."""

    NONE = "none"
    AGGRESSIVE = "aggressive"
    CONSERVATIVE = "conservative"
    HYBRID = "hybrid"
    HYBRID_LATE = "hybrid-late"
    HYBRID_LP = "hybrid-lp"
