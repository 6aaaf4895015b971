"""What a joint execution answers: one answer per output (runtime.SharedPlan, joins.SharedJoinPlan)."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class SharedAnswer:
    """A joint execution's answer: one per output, in its plan's order."""

    answers: list
    access: str = "shared"
    exact: bool = True
    guaranteed: bool | None = None
