"""A stream: a name, a schema, its string dictionary and its window."""
from __future__ import annotations

import re
from typing import Any, Mapping

from .dictionary import NO_STRINGS, StringDictionary
from .errors import InvalidInput
from .prepared import PreparedBatch, Preparer
from .schema import Schema
from .window import AppendResult, Window, WindowSpec

COMPACT_MIN = 4096  # dictionaries this small are never compacted
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,127}$")


class Stream:
    def __init__(self, name: str, schema: Schema | Mapping[str, str], spec: WindowSpec,
                 created_ms: int, time_column: str = "ts"):
        if not isinstance(name, str) or not _NAME.match(name):
            raise InvalidInput(f"stream name {name!r} must start with a letter or _ and use letters, digits, _ . - (at most 128)")
        self.name = name
        self.schema = schema if isinstance(schema, Schema) else Schema.of(schema, time_column)
        self.spec = spec
        self.strings = StringDictionary()
        self.window = Window(self.schema, spec, created_ms)
        self.window.dictionary = self.strings
        self.created_ms = created_ms
        self._live_strings = 0

    def strings_need_compaction(self) -> bool:
        """Has the dictionary grown well past what the window can still hold? (cheap test first)"""
        n = len(self.strings)
        if n <= max(COMPACT_MIN, 2 * self._live_strings):
            return False
        self._live_strings = len(self.window.live_codes())
        return n > COMPACT_MIN + 2 * self._live_strings

    def compact_strings(self) -> int:
        """Reclaim codes no live sub-window or buffer holds; returns how many were freed."""
        live = self.window.live_codes()
        before = len(self.strings)
        self.window.remap_strings(self.strings.compact(live))
        self._live_strings = len(live)
        return before - len(live)

    def preparer(self, strings: bool = True) -> Preparer:
        """What prepares a batch for this stream on another thread (store/prepared.py); without
        `strings` its string columns are left to the engine (no snapshot of the dictionary taken)."""
        return Preparer(self.schema, self.strings.snapshot() if strings else NO_STRINGS)

    def append(self, batch: Any) -> AppendResult:
        """Validate and buffer a batch; raises InvalidInput with nothing applied (not even a
        string interned)."""
        return self.append_checked(*self.schema.check(batch))

    def append_checked(self, checked: dict, rows: int, prepared: PreparedBatch | None = None) -> AppendResult:
        """Buffer columns that passed Schema.check; raises InvalidInput with nothing applied.
        `prepared`: these columns' preparation (store/prepared.py), its bounds and codes taken
        instead of computed here (its codes only while the dictionary holds their snapshot)."""
        known = prepared.bounds if prepared is not None else None
        bounds = self.window.check_append(checked[self.schema.time_column], known) if rows else None
        new_keys = self.window.check_keys(checked, rows)  # partitioned windows: the key limit
        codes = prepared.codes if prepared is not None and self.strings.holds(prepared.strings) else None
        result = self.window.append(self.schema.encode(checked, self.strings, codes), rows, checked=True, bounds=bounds)
        if new_keys:
            self.window.key_book.keys |= new_keys  # type: ignore[union-attr]  # set when keys are kept
        return result
