"""Stream schemas and batch validation: a batch becomes NumPy columns or raises InvalidInput,
never half-applied."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import datetime
import re
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .dictionary import StringDictionary
from .errors import InvalidInput

TYPES = ("int64", "float64", "string", "boolean", "timestamp", "date")
# timestamp: microseconds since 1970-01-01 00:00:00 UTC, int64 (Spark's TimestampType); date: days
# since 1970-01-01, int64 (Spark's DateType). Both are stored, compared and answered as those
# integers (the column type says which); Arrow timestamps (any unit, exactly) and dates, Python
# datetimes and dates, NumPy datetime64 and plain integers (taken as us / days) are accepted.
TEMPORAL = ("timestamp", "date")
MAX_DECIMAL_PRECISION = 18  # decimal(p, s): a scaled int64 (value * 10**s), exact
_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)")


def decimal_type(typ: str) -> tuple[int, int] | None:
    """(precision, scale) of a "decimal(p,s)" type, None for any other type."""
    if not typ.startswith("decimal("):
        return None
    m = _DECIMAL.fullmatch(typ)
    return (int(m.group(1)), int(m.group(2))) if m else None


def type_kind(typ: str) -> str:
    """The type without its parameters: "decimal" for decimal(p,s), else the type."""
    return "decimal" if typ.startswith("decimal(") else typ


def _normal_type(name: str, typ: str) -> str:
    if typ in TYPES:
        return typ
    m = _DECIMAL.fullmatch(typ)
    if typ.startswith("decimal") and not m:
        raise InvalidInput(f"column {name!r} has unknown type {typ!r}: write a decimal type as decimal(precision, scale)",
                           column=name)
    if m:
        p, sc = int(m.group(1)), int(m.group(2))
        if not 1 <= p <= MAX_DECIMAL_PRECISION:
            raise InvalidInput(f"column {name!r}: decimal precision {p} is not supported (1 to {MAX_DECIMAL_PRECISION} "
                               "digits: a decimal is stored as a scaled int64)", column=name)
        if sc > p:
            raise InvalidInput(f"column {name!r}: decimal scale {sc} exceeds its precision {p}", column=name)
        return f"decimal({p},{sc})"
    raise InvalidInput(f"column {name!r} has unknown type {typ!r} (expected one of {', '.join(TYPES)} or "
                       "decimal(p,s))", column=name)
MAX_COLUMNS = 1_000
NUMERIC = ("int64", "float64")
VALID = "?"  # columns["?c"]: column c's validity (True = a value) where a batch or sub-window has a null


def valid_key(column: str) -> str:
    """The key of a column's validity mask in a columns dict (never a column name: not an identifier)."""
    return VALID + column
_NAME_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


@dataclass(frozen=True)
class Schema:
    """Column name -> type; `time_column` is the int64 event time in ms (never null).

    Every other column is nullable: a batch's nulls (Arrow validity bitmaps, None, NaN in NumPy or
    pandas floats) travel as a bool validity mask under valid_key(column), present only where the
    batch has a null; the value array holds a placeholder there (0, False or "")."""

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
            typ = _normal_type(name, str(typ).lower().replace(" ", ""))
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
        """Columns with per-sub-window COUNT/SUM/MIN/MAX synopses: int64, float64 and decimals (scaled ints)."""
        return [n for n, t in self.columns if (t in NUMERIC or t.startswith("decimal(")) and n != self.time_column]

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
            source = dict(zip(batch.schema.names, batch.columns))
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
            values = source[name]
            if name == self.time_column:
                values = event_time_ms(name, values)
            col, valid = _check_column(name, typ, values)
            if valid is not None and name == self.time_column:
                raise InvalidInput(f"event-time column {name!r} may not be null", column=name)
            n = len(col)
            if length is None:
                length = n
            elif n != length:
                raise InvalidInput(f"column {name!r} has {n} rows, expected {length} like the columns before it", column=name)
            checked[name] = col
            if valid is not None:
                checked[valid_key(name)] = valid
        return checked, int(length or 0)

    def encode(self, checked: dict[str, Any], strings: StringDictionary,
               codes: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """Checked columns with strings interned as dictionary codes: the only step that changes
        the dictionary, taken once nothing else can refuse the batch. `codes`: string columns'
        codes found already (store/prepared.py), valid in `strings` as it is."""
        known = codes or {}
        out = {name: (known[name] if name in known else strings.encode(checked[name])) if typ == "string"
               else checked[name] for name, typ in self.columns}
        for name, _ in self.columns:
            v = checked.get(valid_key(name))
            if v is not None:
                out[valid_key(name)] = v
        return out


def event_time_ms(name: str, values: Any) -> Any:
    """An event-time column given as times (Arrow timestamps of any unit, as pandas' datetime64 and
    Spark's TimestampType arrive; NumPy datetime64; Python datetimes) as int64 milliseconds since
    the epoch: floor(us / 1000), so a sub-millisecond part is dropped towards the past; NULLs stay
    NULL (and are refused). Integers are taken as milliseconds, as they are."""
    if isinstance(values, np.ndarray):
        if values.dtype.kind == "M":
            values = pa.array(values)
        elif values.dtype.kind == "O" and len(values) and isinstance(values[0], (datetime.datetime, datetime.date)):
            values = values.tolist()
    if isinstance(values, (list, tuple)) and values and isinstance(values[0], datetime.datetime):
        try:
            values = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
            raise InvalidInput(f"event-time column {name!r} must hold times or int64 ms", column=name) from None
    if isinstance(values, pa.ChunkedArray) and pa.types.is_timestamp(values.type):
        values = values.combine_chunks()
    if not (isinstance(values, pa.Array) and pa.types.is_timestamp(values.type)):
        return values
    try:
        us = values.cast(pa.timestamp("us", values.type.tz)).cast(pa.int64())
    except pa.ArrowInvalid:  # nanoseconds beyond the microsecond range
        raise InvalidInput(f"event-time column {name!r}: a time beyond the int64 microsecond range", column=name) from None
    ms = np.floor_divide(us.fill_null(0).to_numpy(zero_copy_only=False), 1000)
    return pa.array(ms, pa.int64(), mask=np.asarray(us.is_null()) if us.null_count else None)


def _check_column(name: str, typ: str, values: Any) -> tuple[Any, np.ndarray | None]:
    """(values, validity or None): a NumPy array for numeric and boolean columns (boolean as int8
    0/1), a pyarrow string array for strings; nulls replaced by a placeholder, `validity` False there."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
        if typ.startswith("decimal(") and not pa.types.is_null(values.type):
            return _check_decimal(name, typ, values.to_pylist())
        if pa.types.is_null(values.type):  # Arrow's null type: every value NULL, any column type
            n = len(values)
            if typ == "string":
                return pa.array([""] * n, pa.string()), np.zeros(n, dtype=bool)
            return np.zeros(n, dtype={"boolean": np.int8, "float64": np.float64}.get(typ, np.int64)), \
                np.zeros(n, dtype=bool)
        if typ in TEMPORAL:
            values = _temporal(name, typ, values)
        if pa.types.is_dictionary(values.type) and values.dictionary.null_count:
            values = values.dictionary_decode()  # a null dictionary entry: a null value
        valid = None
        if values.null_count:
            valid = np.asarray(values.is_valid(), dtype=bool)
            if pa.types.is_dictionary(values.type):
                values = values.dictionary_decode()
            fill = _placeholder(values.type)
            if fill is None:
                raise InvalidInput(f"column {name!r} must be {typ}, got {values.type}", column=name)
            values = values.fill_null(fill)
        if typ == "string":
            t = values.type.value_type if pa.types.is_dictionary(values.type) else values.type
            if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
                raise InvalidInput(f"column {name!r} must be string, got {values.type}", column=name)
            return values, valid
        if typ == "boolean" and not pa.types.is_boolean(values.type):
            raise InvalidInput(f"column {name!r} must be boolean, got {values.type}", column=name)
        if typ != "boolean" and pa.types.is_boolean(values.type):
            raise InvalidInput(f"column {name!r} must be {typ}, got booleans", column=name)
        arr = values.to_numpy(zero_copy_only=False)
        if arr.dtype.kind == "f" and _has_nan(arr):  # an Arrow NaN is a value, not a null
            raise InvalidInput(f"column {name!r} has NaN values (send a null instead)", column=name)
        return _check_numpy(name, typ, arr), valid
    if typ.startswith("decimal("):
        if isinstance(values, np.ndarray):
            values = values.tolist()
        try:
            values = list(values)
        except TypeError:
            raise InvalidInput(f"column {name!r} must be a sequence", column=name) from None
        return _check_decimal(name, typ, values)
    if typ in TEMPORAL and not (isinstance(values, np.ndarray) and values.dtype.kind in "iu"):
        try:  # datetimes, dates, datetime64, None: as Arrow takes them (then exactly to us / days)
            arr = pa.array(values.tolist() if isinstance(values, np.ndarray) and values.dtype.kind == "O" else values,
                           from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            raise InvalidInput(f"column {name!r} must hold {typ}s", column=name) from None
        return _check_column(name, typ, arr)
    if typ == "string":
        if isinstance(values, np.ndarray) and values.dtype.kind not in "OUT":
            raise InvalidInput(f"column {name!r} must be string, got {values.dtype}", column=name)
        try:
            arr = pa.array(values if not isinstance(values, np.ndarray) else values.tolist(), type=pa.string(),
                           from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
            raise InvalidInput(f"column {name!r} must hold strings", column=name) from None
        return _check_column(name, typ, arr) if arr.null_count else (arr, None)
    valid = None
    if isinstance(values, np.ndarray):
        arr = values
        if arr.dtype.kind == "O":
            arr, valid = _as_array(name, typ, arr.tolist())
    else:
        arr, valid = _as_array(name, typ, values)
    if arr.ndim != 1:
        raise InvalidInput(f"column {name!r} must be one-dimensional", column=name)
    if arr.dtype.kind == "f" and typ != "boolean" and _has_nan(arr):
        nan = np.isnan(arr)  # NumPy / pandas NaN: a null (as pyarrow's from_pandas takes it)
        valid = ~nan if valid is None else (valid & ~nan)
        arr = np.where(nan, 0.0, arr)
    return _check_numpy(name, typ, arr), valid


_US = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": None}


def _check_decimal(name: str, typ: str, values: list) -> tuple[np.ndarray, np.ndarray | None]:
    """Decimal values (Decimal, int, decimal text; Arrow decimals) as int64 value * 10**scale, exactly:
    a value with more fractional digits than the scale, or more digits than the precision, is
    refused (never rounded); floats are refused (not exact decimals)."""
    p, sc = decimal_type(typ)  # type: ignore[misc]  # typ is a decimal type
    limit = 10 ** p
    out = np.zeros(len(values), dtype=np.int64)
    valid = None
    for i, v in enumerate(values):
        if v is None or (isinstance(v, float) and v != v):
            if valid is None:
                valid = np.ones(len(values), dtype=bool)
            valid[i] = False
            continue
        if isinstance(v, (bool, np.bool_, float, np.floating)):
            raise InvalidInput(f"column {name!r} is {typ}: {v!r} is not an exact decimal (send Decimal, int or text)",
                               column=name)
        try:
            d = Decimal(int(v)) if isinstance(v, np.integer) else Decimal(v) if isinstance(v, (int, str, Decimal)) else None
        except ArithmeticError:
            d = None
        if d is None or not d.is_finite():
            raise InvalidInput(f"column {name!r} is {typ}: {str(v)[:40]!r} is not a decimal number", column=name)
        scaled = d.scaleb(sc)
        if scaled != scaled.to_integral_value():
            raise InvalidInput(f"column {name!r} is {typ}: {d} has more than {sc} decimal places", column=name)
        n = int(scaled)
        if not -limit < n < limit:
            raise InvalidInput(f"column {name!r} is {typ}: {d} has more than {p} digits", column=name)
        out[i] = n
    return out, valid


def _temporal(name: str, typ: str, values: pa.Array) -> pa.Array:
    """An Arrow timestamp (to us) or date (to days) column as int64, exactly; integers as they are."""
    t = values.type
    if pa.types.is_integer(t):
        return values
    if typ == "date" and pa.types.is_timestamp(t):  # pandas' datetime64 dates: midnights, exactly
        us = _temporal(name, "timestamp", values)
        day = 86_400_000_000
        if pc_any(pc.not_equal(pc.multiply(pc.divide(us, day), day), us)):
            raise InvalidInput(f"column {name!r}: a timestamp that is not a midnight (UTC) for a date", column=name)
        return pc.divide(us, day)
    if typ == "timestamp" and pa.types.is_timestamp(t):
        raw = values.cast(pa.int64())
        if t.unit == "ns":
            if pc_any(pc.not_equal(pc.multiply(pc.divide(raw, 1000), 1000), raw)):
                raise InvalidInput(f"column {name!r}: a timestamp with nanoseconds (the column holds microseconds)",
                                   column=name)
            return pc.divide(raw, 1000)
        try:
            return pc.multiply_checked(raw, _US[t.unit])
        except pa.ArrowInvalid:
            raise InvalidInput(f"column {name!r}: a timestamp beyond the int64 microsecond range", column=name) from None
    if typ == "date" and pa.types.is_date32(t):
        return values.cast(pa.int32()).cast(pa.int64())
    if typ == "date" and pa.types.is_date64(t):
        raw = values.cast(pa.int64())
        if pc_any(pc.not_equal(pc.multiply(pc.divide(raw, 86_400_000), 86_400_000), raw)):
            raise InvalidInput(f"column {name!r}: a date64 that is not a whole day", column=name)
        return pc.divide(raw, 86_400_000)
    raise InvalidInput(f"column {name!r} must be {typ}, got {t}", column=name)


def pc_any(mask: pa.Array) -> bool:
    return bool(pc.any(mask).as_py())


def _placeholder(t: pa.DataType):
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return ""
    if pa.types.is_boolean(t):
        return False
    if pa.types.is_floating(t):
        return 0.0
    if pa.types.is_integer(t):
        return 0
    return None


def _has_nan(arr: np.ndarray) -> bool:
    """Whether a float array holds a NaN: its minimum is NaN then (one reduction, no mask built)."""
    return len(arr) > 0 and bool(np.isnan(arr.min()))


def _check_numpy(name: str, typ: str, arr: np.ndarray) -> np.ndarray:
    """A float input has had its NaNs refused (Arrow) or made nulls (NumPy) by the caller."""
    if arr.ndim != 1:
        raise InvalidInput(f"column {name!r} must be one-dimensional", column=name)
    kind = arr.dtype.kind
    if typ == "boolean":
        if kind == "b":
            return arr.astype(np.int8)
        raise InvalidInput(f"column {name!r} must be boolean, got {_describe(arr)}", column=name)
    if kind == "b":
        raise InvalidInput(f"column {name!r} holds booleans", column=name)
    if typ == "int64" or typ in TEMPORAL:
        if kind == "u" and len(arr) and int(arr.max()) > 2**63 - 1:
            raise InvalidInput(f"column {name!r} holds {int(arr.max())}, beyond int64", column=name)
        if kind in "iu":
            return arr.astype(np.int64, copy=False)
        raise InvalidInput(f"column {name!r} must be {typ}, got {_describe(arr)}", column=name)
    if kind in "iuf":
        return arr.astype(np.float64, copy=False)
    raise InvalidInput(f"column {name!r} must be float64, got {_describe(arr)}", column=name)


def _as_array(name: str, typ: str, values: Any) -> tuple[np.ndarray, np.ndarray | None]:
    try:
        values = list(values)
    except TypeError:
        raise InvalidInput(f"column {name!r} must be a sequence", column=name) from None
    valid = None
    if any(v is None for v in values):
        valid = np.array([v is not None for v in values], dtype=bool)
        fill = False if typ == "boolean" else 0
        values = [fill if v is None else v for v in values]
    is_bool = [isinstance(v, (bool, np.bool_)) for v in values]
    if typ == "boolean":
        if not all(is_bool):
            raise InvalidInput(f"column {name!r} must hold booleans", column=name)
        return np.array(values, dtype=bool), valid
    if any(is_bool):
        raise InvalidInput(f"column {name!r} holds booleans", column=name)
    try:
        return (np.asarray(values) if values else np.empty(0, dtype=np.int64)), valid
    except (ValueError, OverflowError):
        raise InvalidInput(f"column {name!r} holds values of mixed or unsupported types", column=name) from None


def _describe(arr: np.ndarray) -> str:
    return {"O": "objects", "U": "strings", "S": "bytes", "b": "booleans", "f": "floats"}.get(arr.dtype.kind, str(arr.dtype))
