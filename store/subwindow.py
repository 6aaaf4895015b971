"""A sealed sub-window: immutable columns plus synopses. A slide swaps one of these into the
circular array; a query that must see an older state keeps its reference, nothing is copied."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .memo import ReadMemo
from .synopsis import Synopsis


@dataclass(frozen=True, eq=False)
class SubWindow:
    slide: int          # the slide (write transaction) that produced it: its version
    position: int       # slide mod n: its slot in the circular array
    start_ms: int       # nominal bounds, in the window's clock domain, [start, end)
    end_ms: int
    min_ts: int | None  # observed event-time bounds of its rows
    max_ts: int | None
    rows: int
    columns: dict[str, np.ndarray]
    synopsis: Synopsis
    sealed_at_ms: int   # clock time of the slide's commit
    # the last rows per key as of this slide while it is the youngest (store/last_rows.py), else None
    last_rows: Any = field(default=None, compare=False, repr=False)
    # the running synopsis from the stream's start through this slide (store/cumulative.py)
    running: Any = field(default=None, compare=False, repr=False)
    # window-scan reads of it by query (memo.py); a copy made with replace() starts empty
    memo: ReadMemo = field(default_factory=ReadMemo, init=False, compare=False, repr=False)

    def __repr__(self) -> str:
        return f"SubWindow(slide={self.slide}, position={self.position}, rows={self.rows})"
