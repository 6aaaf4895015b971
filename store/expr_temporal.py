"""Arithmetic on timestamp and date values in expressions (expr.py), with DuckDB's semantics:
timestamp +/- INTERVAL and INTERVAL + timestamp are timestamps, date +/- INTERVAL is a timestamp
(the date's midnight, UTC, moved by the interval), date - date is the BIGINT number of days.

Storage: a timestamp is int64 microseconds since the epoch, a date int32-range days, an INTERVAL
constant milliseconds (expr.Lit of type 'interval'); results beyond int64 microseconds are an
error naming the expression, never a wrapped value. timestamp - timestamp is an INTERVAL, which an
answer cannot carry: it is refused by name.
"""
from __future__ import annotations

from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from .errors import QueryError

_US_PER_MS = 1000
_US_PER_DAY = 86_400_000_000
TEMPORAL = ("timestamp", "date")


def _is_interval(x) -> bool:
    from .expr import Lit
    return isinstance(x, Lit) and x.type == "interval"


def infer_arith(e, lt: str, rt: str) -> str:
    """The type of `e` (an Arith) when an operand is a timestamp or a date (lt, rt its operands' types)."""
    from .expr import _fail
    if e.op in ("+", "-") and lt in TEMPORAL and _is_interval(e.right):
        return "timestamp"
    if e.op == "+" and rt in TEMPORAL and _is_interval(e.left):
        return "timestamp"
    if e.op == "-" and lt == rt == "date":
        return "int64"
    if e.op == "-" and lt == rt == "timestamp":
        _fail("timestamp - timestamp is an INTERVAL, which an answer cannot carry", e,
              hint="compare the timestamps, or move one by an INTERVAL constant")
    side, typ = (e.left, lt) if lt in TEMPORAL else (e.right, rt)
    _fail(f"arithmetic ({e.op}) on a {typ} takes + or - an INTERVAL constant (or date - date)", side)


def evaluate_arith(e, left: pa.Array, right: pa.Array, types: Callable) -> pa.Array:
    """`e` (an Arith typed timestamp) over its operands' arrays: microseconds since the epoch."""

    def micros(x, a: pa.Array) -> pa.Array:
        typ = "interval" if _is_interval(x) else types(x)
        a = a.cast(pa.int64())
        factor = {"interval": _US_PER_MS, "date": _US_PER_DAY}.get(typ)
        return a if factor is None else pc.multiply_checked(a, factor)

    try:
        lv, rv = micros(e.left, left), micros(e.right, right)
        return pc.add_checked(lv, rv) if e.op == "+" else pc.subtract_checked(lv, rv)
    except (pa.ArrowInvalid, OverflowError) as err:
        from .expr import sql
        raise QueryError(f"timestamp out of range in {sql(e)}", e.loc) from err
