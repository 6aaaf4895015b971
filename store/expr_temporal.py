"""Arithmetic on timestamp and date values in expressions (expr.py), with DuckDB's semantics:
timestamp +/- INTERVAL and INTERVAL + timestamp are timestamps, date +/- INTERVAL is a timestamp
(the date's midnight, UTC, moved by the interval), date - date is the BIGINT number of days; a
date meets a timestamp (in a comparison, BETWEEN, IN, CASE, COALESCE, NULLIF) as the timestamp of
its midnight, UTC (DuckDB's implicit cast), in both grammars: `unify` is the one place a comparison
of the two is brought to one unit.

Storage: a timestamp is int64 microseconds since the epoch, a date int32-range days, an INTERVAL
constant milliseconds (expr.Lit of type 'interval'); results beyond int64 microseconds are an
error naming the expression, never a wrapped value. timestamp - timestamp is an INTERVAL, which an
answer cannot carry: it is refused by name.
"""
from __future__ import annotations

import datetime
from fractions import Fraction
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from .errors import QueryError

_US_PER_MS = 1000
_US_PER_DAY = 86_400_000_000
TEMPORAL = ("timestamp", "date")
_EPOCH = datetime.datetime(1970, 1, 1)


class TimestampLiteral(int):
    """A TIMESTAMP '...' constant of the first grammar: its microseconds since the epoch, an int that
    keeps its type, so that a date column compares with it as DuckDB does (the date cast to its
    midnight), never as days against microseconds."""

    kind = "timestamp"

    def __repr__(self) -> str:
        return f"TIMESTAMP '{iso_text('timestamp', int(self))}'"


class DateLiteral(int):
    """A DATE '...' constant of the first grammar: its days since the epoch (see TimestampLiteral)."""

    kind = "date"

    def __repr__(self) -> str:
        return f"DATE '{iso_text('date', int(self))}'"


def typed_literal(kind: str, value: int) -> int:
    return TimestampLiteral(value) if kind == "timestamp" else DateLiteral(value)


def iso_text(kind: str, value: int) -> str:
    """The ISO text of a timestamp (microseconds) or a date (days), as TIMESTAMP '...' / DATE '...' read it."""
    if kind == "date":
        return (_EPOCH.date() + datetime.timedelta(days=value)).isoformat()
    return (_EPOCH + datetime.timedelta(microseconds=value)).isoformat(sep=" ")


def in_text_range(kind: str, value: int) -> bool:
    """Whether a timestamp (microseconds) or date (days) has an ISO text (the years 1 to 9999)."""
    lo, hi = datetime.datetime.min - _EPOCH, datetime.datetime.max - _EPOCH
    if kind == "date":
        return lo.days <= value <= hi.days
    return lo // datetime.timedelta(microseconds=1) <= value <= hi // datetime.timedelta(microseconds=1)


def literal_in(column_type: str, v, event_time: bool = False):
    """A first-grammar constant `v` in the units of a column of `column_type` (an exact int or
    Fraction), when `v` is a TIMESTAMP or DATE constant: a date column's days are compared as their
    midnights, so a timestamp constant is divided into days exactly (DuckDB casts the date up; the
    order is the same); a timestamp column takes a date constant as its midnight; the event-time
    column (`event_time`: int64 milliseconds since the epoch) takes it as its milliseconds, exactly
    (a Fraction where a timestamp has a part of a millisecond), as DuckDB compares epoch_ms(ts).
    None when `v` is no temporal constant; raises ValueError when the column cannot be compared
    with one (DuckDB refuses a number against a timestamp or a date)."""
    kind = getattr(v, "kind", None) if isinstance(v, int) and not isinstance(v, bool) else None
    if kind is None:
        return None
    if event_time and column_type == "int64":
        return Fraction(int(v), _US_PER_MS) if kind == "timestamp" else int(v) * (_US_PER_DAY // _US_PER_MS)
    if column_type not in TEMPORAL:
        raise ValueError(f"{kind.upper()} constants compare with timestamp and date columns only")
    if column_type == kind:
        return int(v)
    return Fraction(int(v), _US_PER_DAY) if column_type == "date" else int(v) * _US_PER_DAY


def unify(types: list[str]) -> str | None:
    """The type values of `types` (null left out) meet at when all are temporal: timestamp when any
    is, else date; None when some is not temporal."""
    real = [t for t in types if t != "null"]
    if not real or any(t not in TEMPORAL for t in real):
        return None
    return "timestamp" if "timestamp" in real else "date"


def coerce(a: pa.Array, src: str, dst: str, e) -> pa.Array:
    """A date array (days) as timestamps (microseconds of its midnights) when `dst` is timestamp;
    any other array as it is. A date beyond the timestamp range is an error naming `e`."""
    if src != "date" or dst != "timestamp":
        return a
    try:
        return pc.multiply_checked(a.cast(pa.int64()), _US_PER_DAY)
    except (pa.ArrowInvalid, OverflowError) as err:
        from .expr import sql
        raise QueryError(f"a date beyond the timestamp range in {sql(e)}", e.loc) from err


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
    if e.op == "-" and lt in TEMPORAL and rt in TEMPORAL:  # (date - date is handled above)
        _fail(f"{lt} - {rt} is an INTERVAL, which an answer cannot carry", e,
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


def from_epoch_ms(a: pa.Array, e) -> pa.Array:
    """epoch_ms(x): milliseconds since the epoch as a timestamp (microseconds), exactly; a value
    beyond the timestamp range is an error naming `e`, never a wrapped one."""
    try:
        return pc.multiply_checked(a.cast(pa.int64()), _US_PER_MS)
    except (pa.ArrowInvalid, OverflowError) as err:
        from .expr import sql
        raise QueryError(f"timestamp out of range in {sql(e)}", e.loc) from err


_KEEPS_VALUE = ("min", "max", "quantile", "median")  # aggregates whose answer is one of the values


def _event_ms(x, time_column: str) -> bool:
    """Whether `x` is the event-time column, or an aggregate that answers one of its values."""
    from .expr import Agg, Col
    if isinstance(x, Col):
        return x.name == time_column
    return isinstance(x, Agg) and x.name in _KEEPS_VALUE and x.filter is None and len(x.args) == 1 and \
        isinstance(x.args[0], Col) and x.args[0].name == time_column


def event_time_as_timestamp(e, time_column: str, type_of: Callable):
    """`e` with the stream's event-time column (int64 milliseconds since the epoch), where it meets a
    timestamp or a date (a comparison, BETWEEN, IN, a simple CASE, CASE and COALESCE results,
    NULLIF), read as the TIMESTAMP it is: epoch_ms(ts), as DuckDB types epoch_ms(ts); so `ts >
    TIMESTAMP '2026-01-01 00:00:00'` compares instants, exactly (milliseconds times 1000 are
    microseconds), never milliseconds with microseconds. MIN / MAX / QUANTILE / MEDIAN of it are
    read so too. Any other expression of it against a timestamp or date (`ts + 5`) is refused by
    name: its unit is not known. `type_of` types a node (raising QueryError when it cannot)."""
    from dataclasses import replace

    from .expr import Between, Case, Cmp, Func, InList, IsDistinct, _fail, map_children, sql

    def typ(x) -> str | None:
        try:
            return type_of(x)
        except QueryError:
            return None  # (the binder reports it where it types the query)

    def meet(parts: list) -> list:
        types = [typ(x) for x in parts]
        if not any(t in TEMPORAL for t in types):
            return parts
        out = []
        for x, t in zip(parts, types):
            if _event_ms(x, time_column):
                x = Func("epoch_ms", (x,), loc=x.loc)
            elif t is not None and t not in TEMPORAL and any(_event_ms(n, time_column) for n in x.walk()):
                _fail(f"{sql(x)} is computed from the event-time column {time_column!r}, a time in milliseconds, "
                      "and meets a timestamp or date here: in which unit?", x,
                      hint=f"compare {time_column} itself (it meets a TIMESTAMP as one), or write epoch_ms(...) "
                      "around a value in milliseconds")
            out.append(x)
        return out

    def visit(x):
        x = map_children(x, visit)
        if isinstance(x, (Cmp, IsDistinct)):
            left, right = meet([x.left, x.right])
            return replace(x, left=left, right=right)
        if isinstance(x, Between):
            arg, low, high = meet([x.arg, x.low, x.high])
            return replace(x, arg=arg, low=low, high=high)
        if isinstance(x, InList):
            arg, *values = meet([x.arg, *x.values])
            return replace(x, arg=arg, values=tuple(values))
        if isinstance(x, Func) and x.name in ("coalesce", "nullif"):
            return replace(x, args=tuple(meet(list(x.args))))
        if isinstance(x, Case):
            whens = list(x.whens)
            if x.operand is not None:
                operand, *conds = meet([x.operand] + [w for w, _ in whens])
                x = replace(x, operand=operand)
                whens = [(c, r) for c, (_, r) in zip(conds, whens)]
            results = meet([r for _, r in whens] + ([x.default] if x.default is not None else []))
            whens = [(w, r) for (w, _), r in zip(whens, results)]
            return replace(x, whens=tuple(whens), default=results[-1] if x.default is not None else None)
        return x

    return visit(e)
