"""An Append's rows made ready for its stream before the engine takes them: the part of appending
that depends only on the rows, the schema and the stream's strings as they were (Schema.check,
the event times' bounds, the string codes), computed where the payload is decoded (the server's
decode thread for a large one) so that the engine's apply on the event loop is the state change
alone: what an Append costs the loop is what a query under ingest waits behind.

The engine takes a prepared batch only if it was checked under the stream's schema (a stream
dropped and created again meanwhile is checked afresh) and takes its codes only while the
dictionary still holds the snapshot they came from (StringDictionary.holds); strings the snapshot
lacked are interned on the loop as before. The log records the rows, not the preparation, so a
replay and a replica apply the same command the same way."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .dictionary import DictionarySnapshot
from .errors import InvalidInput
from .schema import Schema


@dataclass(frozen=True, eq=False)
class PreparedBatch:
    """Schema.check's (checked, rows) of a batch, its event times' (min, max) (None: no rows), and
    the codes of each string column whose every value `strings` held."""

    schema: Schema
    checked: dict[str, Any]
    rows: int
    bounds: tuple[int, int] | None
    strings: DictionarySnapshot
    codes: dict[str, np.ndarray]


@dataclass(frozen=True, eq=False)
class Preparer:
    """What preparing a stream's batch reads, taken on the engine's thread: immutable, so
    prepare() runs on any thread."""

    schema: Schema
    strings: DictionarySnapshot

    def prepare(self, batch: Any) -> PreparedBatch | None:
        """The batch prepared, or None when the schema refuses it (the engine then checks it
        again and says why)."""
        try:
            checked, rows = self.schema.check(batch)
        except InvalidInput:
            return None
        ts = checked[self.schema.time_column]
        bounds = (int(ts.min()), int(ts.max())) if rows else None
        codes = {}
        for name, typ in self.schema.columns:
            if typ == "string" and (got := self.strings.codes(checked[name])) is not None:
                codes[name] = got
        return PreparedBatch(self.schema, checked, rows, bounds, self.strings, codes)
