"""Stream schemas and batch validation: a batch becomes NumPy columns or raises InvalidInput,
never half-applied."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa

from .dictionary import StringDictionary
from .errors import InvalidInput

TYPES = ("int64", "float64", "string")
MAX_COLUMNS = 1_000
NUMERIC = ("int64", "float64")
_NAME_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


@dataclass(frozen=True)
class Schema:
    """Column name -> type; `time_column` is the int64 event time in ms."""

    columns: tuple[tuple[str, str], ...]
    time_column: str = "ts"

    @classmethod
    def of(cls, columns: Mapping[str, str], time_column: str = "ts") -> "Schema":
        if not isinstance(columns, Mapping) or not columns:
            raise InvalidInput("schema must map at least one column name to a type")
        if len(columns) > MAX_COLUMNS:
            raise InvalidInput(f"a schema has at most {MAX_COLUMNS} columns, got {len(columns)}")
        items = []
        for name, typ in columns.items():
            if not isinstance(name, str) or not name or len(name) > 128 or not set(name) <= _NAME_OK or name[0].isdigit():
                raise InvalidInput(f"column name {str(name)[:100]!r} must be an identifier of at most 128 characters",
                                   column=str(name)[:100])
            typ = str(typ).lower()
            if typ not in TYPES:
                raise InvalidInput(f"column {name!r} has unknown type {typ!r} (expected one of {', '.join(TYPES)})", column=name)
            items.append((name, typ))
        names = [n for n, _ in items]
        if time_column not in names:
            raise InvalidInput(f"schema has no event-time column {time_column!r}", column=time_column)
        if dict(items)[time_column] != "int64":
            raise InvalidInput(f"event-time column {time_column!r} must be int64 (ms)", column=time_column)
        return cls(tuple(items), time_column)

    @cached_property
    def types(self) -> dict[str, str]:
        return dict(self.columns)

    @cached_property
    def names(self) -> list[str]:
        return [n for n, _ in self.columns]

    def numeric_columns(self) -> list[str]:
        return [n for n, t in self.columns if t in NUMERIC and n != self.time_column]

    def type_of(self, column: str) -> str:
        typ = self.types.get(column)
        if typ is None:
            raise InvalidInput(f"unknown column {column!r}", column=column)
        return typ

    def to_dict(self) -> dict[str, str]:
        return dict(self.columns)

    def validate(self, batch: Any, strings: StringDictionary) -> tuple[dict[str, np.ndarray], int]:
        """Columns of `batch` as NumPy arrays (strings as dictionary codes) and the row count."""
        checked, rows = self.check(batch)
        return self.encode(checked, strings), rows

    def check(self, batch: Any) -> tuple[dict[str, Any], int]:
        """The batch's columns checked against the schema, changing nothing: numeric columns as
        NumPy arrays, strings still as pyarrow arrays (see encode).

        Accepts a mapping of column -> sequence/NumPy array, or a pyarrow Table/RecordBatch.
        """
        if isinstance(batch, (pa.Table, pa.RecordBatch)):
            source = {name: batch.column(name) for name in batch.schema.names}
        elif isinstance(batch, Mapping):
            source = dict(batch)
        else:
            raise InvalidInput(f"a batch must be a mapping of columns or a pyarrow table, not {type(batch).__name__}")
        types = self.types
        unknown = [c for c in source if c not in types]
        if unknown:
            raise InvalidInput(f"unknown column {unknown[0]!r}", column=str(unknown[0]))
        missing = [c for c in types if c not in source]
        if missing:
            raise InvalidInput(f"missing column {missing[0]!r}", column=missing[0])
        checked: dict[str, Any] = {}
        length = None
        for name, typ in self.columns:
            col = _check_column(name, typ, source[name])
            n = len(col)
            if length is None:
                length = n
            elif n != length:
                raise InvalidInput(f"column {name!r} has {n} rows, expected {length} like the columns before it", column=name)
            checked[name] = col
        return checked, int(length or 0)

    def encode(self, checked: dict[str, Any], strings: StringDictionary) -> dict[str, np.ndarray]:
        """Checked columns with strings interned as dictionary codes: the only step that changes
        the dictionary, taken once nothing else can refuse the batch."""
        return {name: strings.encode(checked[name]) if typ == "string" else checked[name] for name, typ in self.columns}


def _check_column(name: str, typ: str, values: Any) -> Any:
    """A NumPy array for numeric columns, a null-free pyarrow string array for strings."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        if values.null_count:
            raise InvalidInput(f"column {name!r} has null values", column=name)
        if pa.types.is_dictionary(values.type):
            chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
            if any(c.dictionary.null_count for c in chunks):
                raise InvalidInput(f"column {name!r} has a null in its dictionary", column=name)
        if typ == "string":
            t = values.type.value_type if pa.types.is_dictionary(values.type) else values.type
            if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
                raise InvalidInput(f"column {name!r} must be string, got {values.type}", column=name)
            return values
        values = values.to_numpy() if isinstance(values, pa.ChunkedArray) else values.to_numpy(zero_copy_only=False)
    if typ == "string":
        if isinstance(values, np.ndarray) and values.dtype.kind not in "OUT":
            raise InvalidInput(f"column {name!r} must be string, got {values.dtype}", column=name)
        try:
            arr = pa.array(values if not isinstance(values, np.ndarray) else values.tolist(), type=pa.string())
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
            raise InvalidInput(f"column {name!r} must hold strings", column=name) from None
        if arr.null_count:
            raise InvalidInput(f"column {name!r} has null values", column=name)
        return arr
    arr = values if isinstance(values, np.ndarray) else _as_array(name, values)
    if arr.ndim != 1:
        raise InvalidInput(f"column {name!r} must be one-dimensional", column=name)
    kind = arr.dtype.kind
    if typ == "int64":
        if kind == "u" and len(arr) and int(arr.max()) > 2**63 - 1:
            raise InvalidInput(f"column {name!r} holds {int(arr.max())}, beyond int64", column=name)
        if kind in "iu":
            return arr.astype(np.int64, copy=False)
        raise InvalidInput(f"column {name!r} must be int64, got {_describe(arr)}", column=name)
    if kind in "iuf":
        out = arr.astype(np.float64, copy=False)
        if np.isnan(out).any():
            raise InvalidInput(f"column {name!r} has null (NaN) values", column=name)
        return out
    raise InvalidInput(f"column {name!r} must be float64, got {_describe(arr)}", column=name)


def _as_array(name: str, values: Any) -> np.ndarray:
    try:
        values = list(values)
    except TypeError:
        raise InvalidInput(f"column {name!r} must be a sequence", column=name) from None
    if any(v is None for v in values):
        raise InvalidInput(f"column {name!r} has null values", column=name)
    if any(isinstance(v, bool) for v in values):
        raise InvalidInput(f"column {name!r} holds booleans", column=name)
    try:
        return np.asarray(values) if values else np.empty(0, dtype=np.int64)
    except (ValueError, OverflowError):
        raise InvalidInput(f"column {name!r} holds values of mixed or unsupported types", column=name) from None


def _describe(arr: np.ndarray) -> str:
    return {"O": "objects", "U": "strings", "S": "bytes", "b": "booleans", "f": "floats"}.get(arr.dtype.kind, str(arr.dtype))
