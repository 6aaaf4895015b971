"""What a joint execution answers: one answer per output (runtime.SharedPlan, joins.SharedJoinPlan)."""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence


@dataclasses.dataclass
class SharedAnswer:
    """A joint execution's answer: one per output, in its plan's order."""

    answers: Sequence  # (a slices group's: store/slicing_shared.WindowAnswers, each made when read)
    access: str = "shared"
    exact: bool = True
    guaranteed: bool | None = None
