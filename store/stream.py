"""A stream: a name, a schema, its string dictionary and its window."""
from __future__ import annotations

import re
from typing import Any, Mapping

from .dictionary import StringDictionary
from .errors import InvalidInput
from .schema import Schema
from .window import AppendResult, Window, WindowSpec

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
        self.created_ms = created_ms

    def append(self, batch: Any) -> AppendResult:
        """Validate and buffer a batch; raises InvalidInput with nothing applied (not even a
        string interned)."""
        checked, rows = self.schema.check(batch)
        if rows:
            self.window.check_append(checked[self.schema.time_column])
        return self.window.append(self.schema.encode(checked, self.strings), rows)
