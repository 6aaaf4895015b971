"""Scalar expressions of the query text (issue 32): typed node classes, their types, their SQL
text, and their vectorised evaluation over Arrow columns, with DuckDB's semantics.

A node is a frozen dataclass (hashable, compared by structure; `loc` never takes part), so the
same expression written twice is recognised as one (a GROUP BY key reused in the select list).
`infer` gives a node's type and refuses what cannot be typed with a QueryError naming its position;
`evaluate` computes it over a batch of rows (pyarrow.compute where it fits, NumPy elsewhere).

Types: int64, float64, string, boolean, timestamp, date, and null (an untyped NULL). Temporal values
are held as their int64 storage (timestamp: microseconds, date: days; the event-time column is an
int64 of milliseconds); a date meets a timestamp as its midnight (expr_temporal.py).

Semantics (DuckDB's): + - * on integers are exact and an overflow is an error, never a wrapped
value; `/` is a float64 division (IEEE: x / 0 is inf or NaN); `%` keeps the dividend's sign, and an
integer % 0 is an error; floor() and ceil() return float64;
comparisons and AND/OR/NOT follow three-valued logic; round() rounds half away from zero;
CAST(float AS BIGINT) rounds to the nearest integer, ties to even; concat() skips NULLs.
Aggregate calls (Agg) are nodes too; expr_query.py computes them per group and replaces them by
columns before evaluation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Callable, NoReturn

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import Loc, QueryError

NUMERIC = ("int64", "float64", "int128")  # int128: a SUM of integers (computed with as int64)
TEMPORAL = ("timestamp", "date")  # their int64 storage: comparable with integers, no arithmetic
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _loc():
    return field(default=None, compare=False, repr=False)


class Expr:
    """Base of every node."""

    loc: Loc | None

    def children(self) -> tuple["Expr", ...]:
        return ()

    def walk(self):
        yield self
        for c in self.children():
            yield from c.walk()


@dataclass(frozen=True)
class Col(Expr):
    name: str
    loc: Loc | None = _loc()


@dataclass(frozen=True)
class Lit(Expr):
    """A constant: int (exact), float, str, bool or None; `type` its SQL type ('interval' for an
    INTERVAL, held in milliseconds)."""

    value: Any
    type: str
    loc: Loc | None = _loc()


@dataclass(frozen=True)
class Star(Expr):
    """`*` as a select item: every column of the input (the stream's, in schema order, or the
    sub-query's), expanded when the query is bound (expr_query.Compiled)."""

    loc: Loc | None = _loc()


@dataclass(frozen=True)
class Now(Expr):
    """NOW(): the query's read time, a datum of the window (see expr_query.py), not a clock read."""

    loc: Loc | None = _loc()


@dataclass(frozen=True)
class Neg(Expr):
    arg: Expr
    loc: Loc | None = _loc()

    def children(self):
        return (self.arg,)


@dataclass(frozen=True)
class Arith(Expr):
    op: str  # + - * / %
    left: Expr
    right: Expr
    loc: Loc | None = _loc()

    def children(self):
        return (self.left, self.right)


@dataclass(frozen=True)
class Cmp(Expr):
    op: str  # = != < <= > >=
    left: Expr
    right: Expr
    loc: Loc | None = _loc()

    def children(self):
        return (self.left, self.right)


@dataclass(frozen=True)
class Logic(Expr):
    op: str  # and, or
    parts: tuple[Expr, ...]
    loc: Loc | None = _loc()

    def children(self):
        return self.parts


@dataclass(frozen=True)
class Not(Expr):
    arg: Expr
    loc: Loc | None = _loc()

    def children(self):
        return (self.arg,)


@dataclass(frozen=True)
class IsNull(Expr):
    arg: Expr
    negate: bool = False
    loc: Loc | None = _loc()

    def children(self):
        return (self.arg,)


@dataclass(frozen=True)
class IsDistinct(Expr):
    """`left IS [NOT] DISTINCT FROM right`: equality with NULL a value like any other."""

    left: Expr
    right: Expr
    negate: bool = False  # IS NOT DISTINCT FROM
    loc: Loc | None = _loc()

    def children(self):
        return (self.left, self.right)


@dataclass(frozen=True)
class Between(Expr):
    arg: Expr
    low: Expr
    high: Expr
    negate: bool = False
    loc: Loc | None = _loc()

    def children(self):
        return (self.arg, self.low, self.high)


@dataclass(frozen=True)
class Like(Expr):
    arg: Expr
    pattern: Expr
    negate: bool = False
    loc: Loc | None = _loc()

    def children(self):
        return (self.arg, self.pattern)


@dataclass(frozen=True)
class InList(Expr):
    arg: Expr
    values: tuple[Expr, ...]
    negate: bool = False
    loc: Loc | None = _loc()

    def children(self):
        return (self.arg, *self.values)


@dataclass(frozen=True)
class Case(Expr):
    """CASE [operand] WHEN w THEN r ... [ELSE e] END (`operand` None: each w is a condition)."""

    operand: Expr | None
    whens: tuple[tuple[Expr, Expr], ...]
    default: Expr | None = None
    loc: Loc | None = _loc()

    def children(self):
        out = [] if self.operand is None else [self.operand]
        for w, r in self.whens:
            out += [w, r]
        return tuple(out) + (() if self.default is None else (self.default,))


@dataclass(frozen=True)
class Cast(Expr):
    arg: Expr
    type: str  # int64, float64, string, boolean
    loc: Loc | None = _loc()

    def children(self):
        return (self.arg,)


@dataclass(frozen=True)
class Func(Expr):
    """A scalar function call: one of SCALAR_FUNCTIONS."""

    name: str
    args: tuple[Expr, ...]
    loc: Loc | None = _loc()

    def children(self):
        return self.args


@dataclass(frozen=True)
class Agg(Expr):
    """An aggregate call: COUNT(*) (no args), COUNT/SUM/AVG/MIN/MAX/QUANTILE/MEDIAN of an
    expression, COUNT(DISTINCT e1, e2, ...), each optionally FILTER (WHERE cond)."""

    name: str  # count, sum, avg, min, max, quantile
    args: tuple[Expr, ...]
    distinct: bool = False
    filter: Expr | None = None
    q: Decimal | None = None  # QUANTILE's fraction
    loc: Loc | None = _loc()

    def children(self):
        return self.args + (() if self.filter is None else (self.filter,))


# -- names -------------------------------------------------------------------------------------------
SCALAR_FUNCTIONS = {  # name -> (min args, max args)
    "lower": (1, 1), "upper": (1, 1), "length": (1, 1), "substr": (2, 3), "substring": (2, 3),
    "concat": (1, 64), "abs": (1, 1), "round": (1, 2), "floor": (1, 1), "ceil": (1, 1), "ceiling": (1, 1),
    "coalesce": (1, 64), "nullif": (2, 2), "time_bucket": (2, 2), "date_trunc": (2, 2), "epoch_ms": (1, 1),
}
CONCAT_OPERATOR = "||"  # `a || b` (a Func of this name): NULL when either is NULL, where concat() skips NULLs
AGGREGATES = ("count", "sum", "avg", "min", "max", "quantile", "median")
CAST_TYPES = {"bigint": "int64", "int": "int64", "integer": "int64", "int64": "int64", "smallint": "int64",
              "double": "float64", "float": "float64", "real": "float64", "float64": "float64",
              "varchar": "string", "text": "string", "string": "string", "boolean": "boolean", "bool": "boolean"}
_SQL_TYPE = {"int64": "BIGINT", "float64": "DOUBLE", "string": "VARCHAR", "boolean": "BOOLEAN"}
TRUNC_UNITS = {"millisecond": 1, "milliseconds": 1, "second": 1000, "seconds": 1000, "minute": 60_000,
               "minutes": 60_000, "hour": 3_600_000, "hours": 3_600_000, "day": 86_400_000, "days": 86_400_000}


def has_aggregate(e: Expr) -> bool:
    return any(isinstance(n, Agg) for n in e.walk())


# -- types ---------------------------------------------------------------------------------------------
def _fail(message: str, e: Expr, hint: str | None = None) -> NoReturn:
    raise QueryError(message, e.loc, hint=hint)


def _number(t: str) -> bool:
    return t in NUMERIC or t.startswith("decimal(")


def common_type(types: list[str], e: Expr, what: str, nodes: list[Expr] | None = None, result: bool = False) -> str:
    """The type values of `types` share (int64 and float64 meet at float64; decimals with integers
    at a decimal, with float64 at float64 (expr_decimal.common; `nodes` give the integer constants'
    widths); null goes with all; a date and a timestamp meet at timestamp, the date taken as its
    midnight: expr_temporal.unify)."""
    from .expr_temporal import unify
    temporal = unify(types)
    if temporal is not None:
        return temporal
    if "timestamp" in types and "date" in types:  # and a number: in which unit? refused, never misread
        _fail(f"{what} mixes date, timestamp and number values", e)
    real = ["int64" if t in TEMPORAL else t for t in types if t != "null"]
    if not real:
        return "null"
    if all(_number(t) for t in real):
        if any(t.startswith("decimal(") for t in real):
            from . import expr_decimal
            return expr_decimal.common(types, nodes or [None] * len(types), result)
        return "float64" if "float64" in real else "int64"
    if len(set(real)) == 1:
        return real[0]
    _fail(f"{what} mixes {' and '.join(sorted(set(real)))} values", e)


def _in_ms(x: Expr, t: Callable[[Expr], str]) -> bool:
    """Whether `x` is a time in milliseconds of the window's clock (NOW(), an INTERVAL constant, or
    their sums and differences with integers), typed int64."""
    if isinstance(x, Now) or (isinstance(x, Lit) and x.type == "interval"):
        return True
    return isinstance(x, (Arith, Neg)) and t(x) == "int64" and any(_in_ms(c, t) for c in x.children())


def _unify(parts: list[Expr], e: Expr, what: str, t: Callable[[Expr], str], result: bool = False) -> str:
    """common_type of `parts`, refusing a timestamp or date against a time in milliseconds (NOW(),
    INTERVAL): microseconds or days against milliseconds would be misread, and DuckDB refuses a
    timestamp against an INTERVAL."""
    types = [t(x) for x in parts]
    if any(ty in TEMPORAL for ty in types):
        for x in parts:
            if _in_ms(x, t):
                _fail(f"{what} mixes a timestamp or date with {sql(x)}, a time in milliseconds", x,
                      hint="NOW() and INTERVAL constants are event-time milliseconds; move the timestamp by an "
                      "INTERVAL (t + INTERVAL '1 h') or compare the event-time column")
        for c, ct in zip(parts, types):  # a TIMESTAMP or DATE constant against a number: in which unit?
            if isinstance(c, Lit) and ct in TEMPORAL:
                for x, xt in zip(parts, types):
                    if _number(xt):
                        _fail(f"{what} of {sql(x)} ({_SQL_TYPE.get(xt, xt.upper())}) with {sql(c)} ({ct.upper()}): a "
                              f"{ct.upper()} constant compares with timestamp and date values only", x,
                              hint="the event-time column meets it as a TIMESTAMP; an integer holding milliseconds "
                              "since the epoch does as epoch_ms(x)")
    return common_type(types, e, what, parts, result)


def infer(e: Expr, column_type: Callable[[Col], str]) -> str:
    """The type of `e` (aggregates included); `column_type` types a column (raising for unknown)."""
    t = lambda x: infer(x, column_type)  # noqa: E731
    if isinstance(e, Col):
        return column_type(e)
    if isinstance(e, Lit):
        return "int64" if e.type == "interval" else e.type
    if isinstance(e, Now):
        return "int64"
    if isinstance(e, Neg):
        a = t(e.arg)
        if not _number(a) and a != "null":
            _fail(f"cannot negate a {a} value", e)
        return "int64" if a == "null" else a
    if isinstance(e, Arith):
        lt, rt = t(e.left), t(e.right)
        if lt in TEMPORAL or rt in TEMPORAL:  # timestamp +/- INTERVAL, date - date (expr_temporal.py)
            from .expr_temporal import infer_arith
            return infer_arith(e, lt, rt)
        for side, typ in ((e.left, lt), (e.right, rt)):
            if not _number(typ) and typ != "null":
                _fail(f"arithmetic ({e.op}) needs numbers; this operand is {typ}", side)
        from . import expr_decimal
        if expr_decimal.involved(lt, rt):
            out = expr_decimal.arith_type(e.op, lt, rt, e.left, e.right)
            expr_decimal.check_scale(out, e)
            return out
        if e.op == "/":
            return "float64"
        return "float64" if "float64" in (lt, rt) else "int64"
    if isinstance(e, (Cmp, IsDistinct)):
        _unify([e.left, e.right], e, "a comparison", t)
        return "boolean"
    if isinstance(e, Between):
        _unify([e.arg, e.low, e.high], e, "BETWEEN", t)
        return "boolean"
    if isinstance(e, InList):
        _unify([e.arg, *e.values], e, "IN", t)
        return "boolean"
    if isinstance(e, Like):
        for x in (e.arg, e.pattern):
            if t(x) not in ("string", "null"):
                _fail(f"LIKE needs strings; this operand is {t(x)}", x)
        return "boolean"
    if isinstance(e, (Logic, Not)):
        for x in e.children():
            if t(x) not in ("boolean", "null"):
                _fail(f"{'NOT' if isinstance(e, Not) else e.op.upper()} needs a condition; this operand is {t(x)}", x)
        return "boolean"
    if isinstance(e, IsNull):
        t(e.arg)
        return "boolean"
    if isinstance(e, Case):
        if e.operand is not None:
            _unify([e.operand] + [w for w, _ in e.whens], e, "CASE", t)
        else:
            for w, _ in e.whens:
                if t(w) not in ("boolean", "null"):
                    _fail(f"CASE WHEN needs a condition; this one is {t(w)}", w)
        results = [r for _, r in e.whens] + ([e.default] if e.default is not None else [])
        return _unify(results, e, "CASE", t, result=True)
    if isinstance(e, Cast):
        src = t(e.arg)
        if src == "string" and e.type == "boolean":
            _fail("CAST of a string to BOOLEAN is not supported", e)
        return e.type
    if isinstance(e, Func):
        return _func_type(e, [t(a) for a in e.args], t)
    if isinstance(e, Agg):
        types = [t(a) for a in e.args]
        if e.filter is not None and t(e.filter) not in ("boolean", "null"):
            _fail("FILTER (WHERE ...) needs a condition", e.filter)
        if e.name == "count":
            return "int64"
        (a,) = types
        if e.name in ("sum", "avg", "quantile") and not _number(a) and a != "null":
            _fail(f"{e.name.upper()} needs a number; its argument is {a}", e)
        if e.name == "sum" and a.startswith("decimal("):
            from .expr_decimal import MAX_WIDTH, name, width_scale
            return name(MAX_WIDTH, width_scale(a)[1])
        if e.name == "sum":
            return "int128" if a in ("int64", "null") else "float64"
        if e.name == "avg":
            return "float64"
        return a
    raise AssertionError(f"unknown node {e!r}")


def _func_type(e: Func, types: list[str], t: Callable[[Expr], str]) -> str:
    n = e.name

    def need(i: int, kinds: tuple[str, ...], what: str) -> None:
        if types[i] not in kinds + ("null",) and not (kinds == NUMERIC and types[i].startswith("decimal(")):
            _fail(f"{n}() needs {what} as argument {i + 1}; it is {types[i]}", e.args[i])

    if n in ("lower", "upper", "length"):
        need(0, ("string",), "a string")
        return "int64" if n == "length" else "string"
    if n in ("substr", "substring"):
        need(0, ("string",), "a string")
        for i in range(1, len(types)):
            need(i, ("int64",), "an integer")
        return "string"
    if n in ("concat", CONCAT_OPERATOR):
        for i in range(len(types)):
            need(i, ("string", "int64", "boolean"), "a string or an integer")
        return "string"
    if n == "abs":
        need(0, NUMERIC, "a number")
        return "int64" if types[0] == "null" else types[0]
    if n in ("floor", "ceil", "ceiling"):
        need(0, NUMERIC, "a number")
        if types[0].startswith("decimal("):
            from .expr_decimal import result_type
            return result_type(n, types[0])
        return "float64"
    if n == "round":
        need(0, NUMERIC, "a number")
        if len(types) == 2:
            need(1, ("int64",), "an integer")
            if not isinstance(e.args[1], Lit):
                _fail("round()'s number of digits must be a constant", e.args[1])
        if types[0].startswith("decimal("):
            from .expr_decimal import result_type
            digits = e.args[1].value if len(e.args) == 2 else 0  # type: ignore[attr-defined]  # a constant
            if digits is None or digits < 0:
                _fail("round() of a DECIMAL takes 0 or more digits", e.args[1])
            return result_type(n, types[0], digits)
        return "int64" if types[0] == "null" else types[0]
    if n == "coalesce":
        return _unify(list(e.args), e, "COALESCE", t, result=True)
    if n == "nullif":
        _unify(list(e.args), e, "NULLIF", t)
        return types[0] if types[0] != "null" else types[1]
    if n == "epoch_ms":  # milliseconds since the epoch as a TIMESTAMP (DuckDB's epoch_ms(BIGINT))
        need(0, ("int64",), "milliseconds since the epoch (an integer)")
        return "timestamp"
    if n == "time_bucket":
        if not (isinstance(e.args[0], Lit) and e.args[0].type == "interval" and e.args[0].value > 0):
            _fail("time_bucket() needs a positive INTERVAL constant as its first argument", e.args[0])
        need(1, ("int64",), "the event-time column (milliseconds)")
        return "int64"
    if n == "date_trunc":
        unit = e.args[0]
        if not (isinstance(unit, Lit) and unit.type == "string" and str(unit.value).lower() in TRUNC_UNITS):
            _fail("date_trunc() needs a unit ('second', 'minute', 'hour' or 'day') as its first argument", unit)
        need(1, ("int64",), "the event-time column (milliseconds)")
        return "int64"
    raise AssertionError(n)


# -- SQL text ------------------------------------------------------------------------------------------
def _quote(name: str) -> str:
    from .query_text import quote_name
    return quote_name(name)


def sql(e: Expr) -> str:
    """The text of `e` (fully parenthesised, so that it parses back to the same tree)."""
    if isinstance(e, Col):
        return _quote(e.name)
    if isinstance(e, Lit):
        v = e.value
        if e.type == "interval":
            return f"INTERVAL '{v} ms'"
        if v is None:
            return "NULL"
        if isinstance(v, bool):
            return "TRUE" if v else "FALSE"
        if isinstance(v, str):
            return "'" + v.replace("'", "''") + "'"
        if e.type in TEMPORAL:
            from .expr_temporal import iso_text
            return f"{e.type.upper()} '{iso_text(e.type, v)}'"
        if isinstance(v, Decimal):
            return format(v, "f")
        if isinstance(v, float):
            if math.isinf(v) or math.isnan(v):
                return f"CAST('{v}' AS DOUBLE)"
            text = repr(v)  # with an exponent: a DOUBLE constant (`1.5` would read as a DECIMAL)
            return text if any(ch in text for ch in "eE") else text + "e0"
        return str(v)
    if isinstance(e, Now):
        return "NOW()"
    if isinstance(e, Neg):
        return f"(- {sql(e.arg)})"
    if isinstance(e, (Arith, Cmp)):
        return f"({sql(e.left)} {e.op} {sql(e.right)})"
    if isinstance(e, Logic):
        return "(" + f" {e.op.upper()} ".join(sql(p) for p in e.parts) + ")"
    if isinstance(e, Not):
        return f"(NOT {sql(e.arg)})"
    if isinstance(e, IsNull):
        return f"({sql(e.arg)} IS {'NOT ' if e.negate else ''}NULL)"
    if isinstance(e, IsDistinct):
        return f"({sql(e.left)} IS {'NOT ' if e.negate else ''}DISTINCT FROM {sql(e.right)})"
    if isinstance(e, Between):
        return f"({sql(e.arg)} {'NOT ' if e.negate else ''}BETWEEN {sql(e.low)} AND {sql(e.high)})"
    if isinstance(e, Like):
        return f"({sql(e.arg)} {'NOT ' if e.negate else ''}LIKE {sql(e.pattern)})"
    if isinstance(e, InList):
        return f"({sql(e.arg)} {'NOT ' if e.negate else ''}IN ({', '.join(sql(v) for v in e.values)}))"
    if isinstance(e, Case):
        out = "CASE" + ("" if e.operand is None else " " + sql(e.operand))
        out += "".join(f" WHEN {sql(w)} THEN {sql(r)}" for w, r in e.whens)
        return out + ("" if e.default is None else f" ELSE {sql(e.default)}") + " END"
    if isinstance(e, Cast):
        return f"CAST({sql(e.arg)} AS {_SQL_TYPE.get(e.type) or e.type.upper()})"
    if isinstance(e, Func) and e.name == CONCAT_OPERATOR:
        return "(" + " || ".join(sql(a) for a in e.args) + ")"
    if isinstance(e, Star):
        return "*"
    if isinstance(e, Func):
        return f"{e.name}({', '.join(sql(a) for a in e.args)})"
    if isinstance(e, Agg):
        if e.name == "count" and not e.args:
            inner = "*"
        elif e.name == "quantile":
            inner = f"{sql(e.args[0])}, {e.q}"
        else:
            inner = ("DISTINCT " if e.distinct else "") + ", ".join(sql(a) for a in e.args)
        text = f"{e.name.upper()}({inner})"
        return text + (f" FILTER (WHERE {sql(e.filter)})" if e.filter is not None else "")
    raise AssertionError(e)


# -- evaluation ----------------------------------------------------------------------------------------
_ARROW = {"int64": pa.int64(), "float64": pa.float64(), "string": pa.string(), "boolean": pa.bool_(),
          "null": pa.null(), "int128": pa.int64(), "timestamp": pa.int64(), "date": pa.int64()}


def arrow_type(typ: str) -> pa.DataType:
    """The Arrow type an expression value of type `typ` is computed as (a decimal: decimal128(p, s))."""
    if typ.startswith("decimal("):
        from .expr_decimal import arrow
        return arrow(typ)
    return _ARROW[typ]


class Batch:
    """The columns an expression reads (name -> Arrow array of `rows` values) and NOW()."""

    def __init__(self, columns: dict[str, pa.Array], rows: int, now: int | None = None,
                 types: dict[str, str] | None = None):
        self.columns, self.rows, self.now, self.types = columns, rows, now, types or {}


def _arr(x, n: int, typ: str | None = None) -> pa.Array:
    if isinstance(x, pa.ChunkedArray):
        x = x.combine_chunks()
    if isinstance(x, pa.Array):
        return x
    return pa.array([x.as_py()] * n if n else [], type=x.type if typ is None else arrow_type(typ))


def _np(a: pa.Array, dtype) -> tuple[np.ndarray, np.ndarray]:
    """(values with nulls as 0, validity) of an Arrow array."""
    if a.type == pa.null():
        return np.zeros(len(a), dtype=dtype), np.zeros(len(a), dtype=bool)
    valid = np.ones(len(a), dtype=bool) if a.null_count == 0 else np.asarray(a.is_valid().to_numpy(zero_copy_only=False))
    fill = False if pa.types.is_boolean(a.type) else "" if pa.types.is_string(a.type) else 0
    filled = a.fill_null(fill) if a.null_count else a
    if a.type != pa.null() and pa.types.is_integer(a.type) and dtype == np.float64:
        filled = filled.cast(pa.float64())
    return np.asarray(filled.to_numpy(zero_copy_only=False)).astype(dtype, copy=False), valid


def _from_np(values: np.ndarray, valid: np.ndarray) -> pa.Array:
    return pa.array(values, mask=~valid) if not valid.all() else pa.array(values)


def _as(a: pa.Array, typ: str) -> pa.Array:
    if typ in ("null",) or a.type == arrow_type(typ):
        return a
    if pa.types.is_decimal(a.type) and typ == "float64":  # the nearest double (Arrow's cast is not always)
        from .expr_decimal import to_double
        return to_double(a)
    if typ == "float64" and pa.types.is_integer(a.type):
        return a.cast(pa.float64(), safe=False)  # the nearest double, as DuckDB's cast (past 2^53 too)
    return a.cast(arrow_type(typ))


def _to(a: pa.Array, src: str, dst: str, e: Expr) -> pa.Array:
    """A value of type `src` as one of the common type `dst` (a date as a timestamp: its midnight; an
    integer or a decimal as a decimal, exactly)."""
    if dst.startswith("decimal("):
        from .expr_decimal import to_decimal
        return to_decimal(a, src, dst, e)
    from .expr_temporal import coerce
    return _as(coerce(a, src, dst, e), dst)


def evaluate(e: Expr, batch: Batch, types: Callable[[Expr], str]) -> pa.Array:
    """`e` over the batch's rows, as an Arrow array of batch.rows values (types from `types`)."""
    n = batch.rows
    ev = lambda x: evaluate(x, batch, types)  # noqa: E731
    typ = types(e)
    if isinstance(e, Col):
        return batch.columns[e.name]
    if isinstance(e, Lit):
        if e.value is None:
            return pa.nulls(n, arrow_type(typ))
        if typ.startswith("decimal("):  # (not n Python Decimals)
            return pa.repeat(pa.scalar(e.value, type=arrow_type(typ)), n)
        return pa.array([e.value] * n, type=arrow_type(typ))
    if isinstance(e, Now):
        return pa.array([batch.now] * n, type=pa.int64())
    if isinstance(e, Neg):
        a = _as(ev(e.arg), typ)
        return _checked(lambda: pc.negate_checked(a), e) if not typ.startswith("decimal(") else pc.negate(a)
    if isinstance(e, Arith) and typ == "timestamp":
        from .expr_temporal import evaluate_arith
        return evaluate_arith(e, ev(e.left), ev(e.right), types)
    if isinstance(e, Arith) and typ.startswith("decimal("):
        from . import expr_decimal
        return expr_decimal.arith(e, ev(e.left), ev(e.right), types(e.left), types(e.right), typ)
    if isinstance(e, Arith):
        return _arith(e, _as(ev(e.left), "float64" if typ == "float64" else types(e.left)),
                      _as(ev(e.right), "float64" if typ == "float64" else types(e.right)), typ)
    if isinstance(e, Cmp):
        common = _unify([e.left, e.right], e, "a comparison", types)
        left, right = _to(ev(e.left), types(e.left), common, e), _to(ev(e.right), types(e.right), common, e)
        return _cmp(e.op, left, right)
    if isinstance(e, IsDistinct):
        common = _unify([e.left, e.right], e, "a comparison", types)
        left, right = _to(ev(e.left), types(e.left), common, e), _to(ev(e.right), types(e.right), common, e)
        same = pc.or_(pc.and_(pc.is_null(left), pc.is_null(right)),
                      pc.fill_null(pc.equal(left, right), False)) if common != "null" else pa.array([True] * n, pa.bool_())
        return same if e.negate else pc.invert(same)
    if isinstance(e, Between):
        common = _unify([e.arg, e.low, e.high], e, "BETWEEN", types)
        a, lo, hi = (_to(ev(x), types(x), common, e) for x in (e.arg, e.low, e.high))
        out = pc.and_kleene(_cmp(">=", a, lo), _cmp("<=", a, hi))
        return pc.invert(out) if e.negate else out
    if isinstance(e, InList):
        common = _unify([e.arg, *e.values], e, "IN", types)
        a = _to(ev(e.arg), types(e.arg), common, e)
        out = None
        for v in e.values:  # x IN (a, b) = x = a OR x = b (three-valued)
            m = _cmp("=", a, _to(ev(v), types(v), common, e))
            out = m if out is None else pc.or_kleene(out, m)
        return pc.invert(out) if e.negate else out
    if isinstance(e, Like):
        a, p = ev(e.arg), ev(e.pattern)
        if isinstance(e.pattern, Lit) and e.pattern.value is not None:
            out = pc.match_like(_as(a, "string"), pattern=str(e.pattern.value))
        else:
            out = pa.array([None if s is None or q is None else _like(s, q) for s, q in
                            zip(_as(a, "string").to_pylist(), _as(p, "string").to_pylist())], type=pa.bool_())
        return pc.invert(out) if e.negate else out
    if isinstance(e, Logic):
        out = _as(ev(e.parts[0]), "boolean")
        for p in e.parts[1:]:
            b = _as(ev(p), "boolean")
            out = pc.and_kleene(out, b) if e.op == "and" else pc.or_kleene(out, b)
        return out
    if isinstance(e, Not):
        return pc.invert(_as(ev(e.arg), "boolean"))
    if isinstance(e, IsNull):
        a = ev(e.arg)
        return pc.is_valid(a) if e.negate else pc.is_null(a)
    if isinstance(e, Case):
        return _case(e, batch, types, typ)
    if isinstance(e, Cast):
        return _cast(_as(ev(e.arg), types(e.arg)), types(e.arg), e.type, e)
    if isinstance(e, Func) and e.name == "coalesce":
        return _coalesce(e, batch, types, typ)
    if isinstance(e, Func):
        return _func(e, [ev(a) for a in e.args], [types(a) for a in e.args], typ, n, types)
    raise QueryError(f"{sql(e)} cannot be computed here (an aggregate outside a grouped query?)", e.loc)


def _checked(fn, e: Expr):
    try:
        return fn()
    except (pa.ArrowInvalid, OverflowError) as err:
        raise QueryError(f"integer overflow in {sql(e)}", e.loc) from err


def _arith(e: Arith, left: pa.Array, right: pa.Array, typ: str) -> pa.Array:
    op = e.op
    if typ == "null":
        return pa.nulls(len(left), pa.int64())
    if op in "+-*":
        fn = {"+": pc.add_checked, "-": pc.subtract_checked, "*": pc.multiply_checked}[op]
        if typ == "float64":
            fn = {"+": pc.add, "-": pc.subtract, "*": pc.multiply}[op]  # IEEE: inf, not an error
        return _checked(lambda: fn(left, right), e)
    dtype = np.float64 if op == "/" or typ == "float64" else np.int64
    lv, lok = _np(left, dtype)
    rv, rok = _np(right, dtype)
    ok = lok & rok
    with np.errstate(all="ignore"):
        if op == "/":  # IEEE: x / 0 is inf or NaN
            out = lv / rv
        elif dtype == np.int64:  # %: the sign of the dividend (C's fmod); an integer % 0 is an error
            if (ok & (rv == 0)).any():
                raise QueryError(f"division by zero in {sql(e)}", e.loc)
            safe = np.where(ok & (rv != 0) & (rv != -1), rv, 1)
            out = np.where(rv == -1, 0, np.fmod(lv, safe))
        else:
            out = np.fmod(lv, rv)
    return _from_np(out, ok)


def _cmp(op: str, a: pa.Array, b: pa.Array) -> pa.Array:
    if a.type == pa.null() or b.type == pa.null():
        return pa.nulls(len(a), pa.bool_())
    fn = {"=": pc.equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater,
          ">=": pc.greater_equal}[op]
    if pa.types.is_floating(a.type):  # -0.0 = 0.0, and NaN equals itself and sorts above all (DuckDB)
        return _float_cmp(op, a, b)
    return fn(a, b)


def _float_cmp(op: str, a: pa.Array, b: pa.Array) -> pa.Array:
    av, aok = _np(a, np.float64)
    bv, bok = _np(b, np.float64)
    an, bn = np.isnan(av), np.isnan(bv)
    with np.errstate(invalid="ignore"):
        lt = np.where(an | bn, ~an & bn, av < bv)
        eq = np.where(an | bn, an & bn, av == bv)
    out = {"=": eq, "!=": ~eq, "<": lt, "<=": lt | eq, ">": ~(lt | eq), ">=": ~lt}[op]
    return _from_np(out, aok & bok)


def _like(s: str, p: str) -> bool:
    import re
    rx = "".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in p)
    return re.fullmatch(rx, s, flags=re.S) is not None


def _rows_of(batch: Batch, rows: np.ndarray, e: Expr) -> Batch:
    """The batch cut to `rows` (indices), with only the columns `e` reads."""
    if len(rows) == batch.rows:
        return batch
    names = {c.name for c in e.walk() if isinstance(c, Col)}
    index = pa.array(rows, type=pa.int64())
    return Batch({k: batch.columns[k].take(index) for k in names}, len(rows), batch.now, batch.types)


def _on_rows(e: Expr, batch: Batch, rows: np.ndarray, types, typ: str, at: Expr) -> pa.Array:
    """`e` evaluated over the given rows only, as `typ`: CASE and COALESCE evaluate a branch only
    where it is chosen, as DuckDB does, so an error a branch would raise on rows it does not
    answer (a CAST that does not fit, an overflow, a division by zero) is not raised."""
    return _to(evaluate(e, _rows_of(batch, rows, e), types), types(e), typ, at)


def _assemble(n: int, parts: list[tuple[np.ndarray, pa.Array]], typ: str) -> pa.Array:
    """n values from the pieces evaluated on disjoint rows (NULL on rows no piece covers)."""
    if len(parts) == 1 and len(parts[0][0]) == n:
        return parts[0][1]
    covered = np.zeros(n, dtype=bool)
    for rows, _ in parts:
        covered[rows] = True
    rest = np.flatnonzero(~covered)
    order = np.concatenate([rows for rows, _ in parts] + [rest]).astype(np.int64)
    values = pa.concat_arrays([a for _, a in parts] + [pa.nulls(len(rest), arrow_type(typ))])
    where = np.empty(n, dtype=np.int64)
    where[order] = np.arange(n, dtype=np.int64)
    return values.take(pa.array(where))


def _case(e: Case, batch: Batch, types, typ: str) -> pa.Array:
    n = batch.rows
    if e.operand is not None:
        common = _unify([e.operand] + [w for w, _ in e.whens], e, "CASE", types)
        subject = _to(evaluate(e.operand, batch, types), types(e.operand), common, e)
    undecided = np.arange(n, dtype=np.int64)  # rows no earlier WHEN has taken
    parts: list[tuple[np.ndarray, pa.Array]] = []
    for w, r in e.whens:
        if len(undecided) == 0:
            break
        if e.operand is not None:
            cond = _cmp("=", subject.take(pa.array(undecided)) if len(undecided) < n else subject,
                        _on_rows(w, batch, undecided, types, common, e))
        else:
            cond = _as(evaluate(w, _rows_of(batch, undecided, w), types), "boolean")
        c, ok = _np(cond, bool)
        taken = c & ok
        if taken.any():
            rows = undecided[taken]
            parts.append((rows, _on_rows(r, batch, rows, types, typ, e)))
            undecided = undecided[~taken]
    if len(undecided) and e.default is not None:
        parts.append((undecided, _on_rows(e.default, batch, undecided, types, typ, e)))
    return _assemble(n, parts, typ) if parts else pa.nulls(n, arrow_type(typ))


def _coalesce(e: Func, batch: Batch, types, typ: str) -> pa.Array:
    """The first non-NULL argument per row; an argument is evaluated only on the rows every earlier
    one left NULL (DuckDB's order of evaluation)."""
    n = batch.rows
    if typ == "null":
        return pa.nulls(n)
    pending = np.arange(n, dtype=np.int64)  # rows every earlier argument left NULL
    parts: list[tuple[np.ndarray, pa.Array]] = []
    for a in e.args:
        if len(pending) == 0:
            break
        value = _on_rows(a, batch, pending, types, typ, e)
        ok = np.asarray(value.is_valid().to_numpy(zero_copy_only=False)) if value.null_count else \
            np.ones(len(value), dtype=bool)
        if ok.all():
            parts.append((pending, value))
            pending = pending[:0]
        elif ok.any():
            parts.append((pending[ok], value.filter(pa.array(ok))))
            pending = pending[~ok]
    return _assemble(n, parts, typ) if parts else pa.nulls(n, arrow_type(typ))


def _cast(a: pa.Array, src: str, dst: str, e: Expr) -> pa.Array:
    if src == dst or src == "null":
        return _as(a, dst) if src == "null" else a
    if src.startswith("decimal(") or dst.startswith("decimal("):
        from . import expr_decimal
        return expr_decimal.cast(a, src, dst, e)
    if dst == "int64" and src == "float64":
        v, ok = _np(a, np.float64)
        if (ok & ~np.isfinite(v)).any() or (ok & ((v >= 2.0**63) | (v < -(2.0**63)))).any():
            raise QueryError(f"{sql(e)}: a value is out of the range of BIGINT", e.loc)
        return _from_np(np.rint(np.where(ok, v, 0)).astype(np.int64), ok)
    if dst == "float64" and src == "int64":
        return _as(a, dst)
    if dst == "string" and src == "float64":
        return pa.array([None if x is None else _float_text(x) for x in a.to_pylist()], type=pa.string())
    if dst == "string" and src == "boolean":
        return pa.array([None if x is None else ("true" if x else "false") for x in a.to_pylist()], type=pa.string())
    if src == "string" and dst in NUMERIC:
        out: list[Any] = []
        for x in a.to_pylist():
            if x is None:
                out.append(None)
                continue
            try:
                out.append(int(x.strip()) if dst == "int64" else float(x.strip()))
            except ValueError:
                raise QueryError(f"{sql(e)}: {x[:40]!r} is not a {_SQL_TYPE[dst]}", e.loc) from None
            if dst == "int64" and not INT64_MIN <= out[-1] <= INT64_MAX:
                raise QueryError(f"{sql(e)}: {x[:40]!r} is out of the range of BIGINT", e.loc)
        return pa.array(out, type=arrow_type(dst))
    try:
        return a.cast(arrow_type(dst))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
        raise QueryError(f"{sql(e)} cannot be computed: {err}", e.loc) from None


def _float_text(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(x)


def _round_half_away(v: np.ndarray) -> np.ndarray:
    r = np.trunc(v)
    frac = v - r
    return r + np.where(np.abs(frac) >= 0.5, np.sign(v), 0.0)


def _substr(s: str, start: int, length: int | None) -> str:
    """DuckDB's substring(s, start[, length]), in characters: start is 1-based (negative: from the
    end; 0: one before the first), length counts forward (negative: backward from start); the
    positions outside the string are dropped."""
    size = len(s)
    begin = start - 1 if start > 0 else size + start if start < 0 else -1
    if length is None:
        lo, hi = begin, size
    elif length >= 0:
        lo, hi = begin, begin + length
    else:
        lo, hi = begin + length, begin
    lo, hi = max(lo, 0), min(hi, size)
    return s[lo:hi] if lo < hi else ""


def _func(e: Func, args: list[pa.Array], types: list[str], typ: str, n: int, type_of: Callable[[Expr], str]) -> pa.Array:
    name = e.name
    if name == "lower":
        return pc.utf8_lower(_as(args[0], "string"))
    if name == "upper":
        return pc.utf8_upper(_as(args[0], "string"))
    if name == "length":
        return pc.utf8_length(_as(args[0], "string")).cast(pa.int64())
    if name in ("substr", "substring"):
        cols = [a.to_pylist() for a in args]
        subs: list[str | None] = []
        for row in zip(*cols):
            if any(v is None for v in row):
                subs.append(None)
            else:
                subs.append(_substr(row[0], row[1], row[2] if len(row) > 2 else None))
        return pa.array(subs, type=pa.string())
    if name in ("concat", CONCAT_OPERATOR):
        parts = [_as(a, "string") if t != "boolean" else _cast(a, "boolean", "string", e) for a, t in zip(args, types)]
        if name == CONCAT_OPERATOR:
            return pc.binary_join_element_wise(*parts, "", null_handling="emit_null")
        return pc.binary_join_element_wise(*parts, "", null_handling="replace", null_replacement="")
    if name == "abs":
        return _checked(lambda: pc.abs_checked(_as(args[0], typ)), e)
    if name in ("floor", "ceil", "ceiling", "round") and typ.startswith("decimal("):
        from .expr_decimal import rounded
        digits = e.args[1].value if len(e.args) == 2 else 0  # type: ignore[attr-defined]  # a constant (infer)
        return rounded(args[0], types[0], "ceil" if name == "ceiling" else name, digits, e)
    if name in ("floor", "ceil", "ceiling"):
        a = _as(args[0], "float64")
        return pc.floor(a) if name == "floor" else pc.ceil(a)
    if name == "round":
        a = _as(args[0], typ)
        digits = 0
        if len(e.args) == 2:
            digits = e.args[1].value if isinstance(e.args[1], Lit) else 0  # a constant (infer)
            if digits is None:
                return pa.nulls(n, arrow_type(typ))
        if typ == "int64":
            if digits >= 0:
                return a
            v, ok = _np(a, np.int64)
            m = 10 ** min(-digits, 19)
            ints = [None if not k else int(_round_int(int(x), m)) for x, k in zip(v.tolist(), ok.tolist())]
            return _checked(lambda: pa.array(ints, type=pa.int64()), e)
        v, ok = _np(a, np.float64)
        with np.errstate(all="ignore"):
            if digits == 0:
                out = _round_half_away(v)
            else:  # the double's exact decimal value, rounded half away from zero (as DuckDB does)
                step = Decimal(1).scaleb(-digits)
                out = np.array([x if not math.isfinite(x) or not k else
                                float(Decimal(x).quantize(step, rounding=ROUND_HALF_UP))
                                for x, k in zip(v.tolist(), ok.tolist())], dtype=np.float64)
        return _from_np(out, ok)
    if name == "nullif":
        common = _unify(list(e.args), e, "NULLIF", type_of)
        a, b = _to(args[0], types[0], common, e), _to(args[1], types[1], common, e)
        if common == "null":
            return pa.nulls(n)
        same = pc.fill_null(_cmp("=", a, b), False)  # compared as the common type, answered as the first's
        first = _as(args[0], typ)
        return pc.if_else(same, pa.nulls(n, first.type), first)
    if name == "epoch_ms":
        from .expr_temporal import from_epoch_ms
        return from_epoch_ms(_as(args[0], "int64"), e)
    if name in ("time_bucket", "date_trunc"):
        width = e.args[0].value if name == "time_bucket" else TRUNC_UNITS[str(e.args[0].value).lower()]  # type: ignore[attr-defined]
        v, ok = _np(_as(args[1], "int64"), np.int64)
        return _from_np(v - np.mod(v, width), ok)  # floor to a multiple of the width (NumPy's mod floors)
    raise AssertionError(name)


def _round_int(x: int, m: int) -> int:
    q, r = divmod(abs(x), m)
    q += 1 if 2 * r >= m else 0
    return (q * m) * (1 if x >= 0 else -1)


def map_children(e: Expr, f: Callable[[Expr], Expr]) -> Expr:
    """`e` with `f` applied to each direct child (the node itself kept when nothing changes)."""
    from dataclasses import replace
    if isinstance(e, (Col, Lit, Now, Star)):
        return e
    if isinstance(e, (Neg, Not, IsNull, Cast)):
        return replace(e, arg=f(e.arg))
    if isinstance(e, (Arith, Cmp, IsDistinct)):
        return replace(e, left=f(e.left), right=f(e.right))
    if isinstance(e, Logic):
        return replace(e, parts=tuple(f(p) for p in e.parts))
    if isinstance(e, Between):
        return replace(e, arg=f(e.arg), low=f(e.low), high=f(e.high))
    if isinstance(e, Like):
        return replace(e, arg=f(e.arg), pattern=f(e.pattern))
    if isinstance(e, InList):
        return replace(e, arg=f(e.arg), values=tuple(f(v) for v in e.values))
    if isinstance(e, Case):
        return replace(e, operand=None if e.operand is None else f(e.operand),
                       whens=tuple((f(w), f(r)) for w, r in e.whens),
                       default=None if e.default is None else f(e.default))
    if isinstance(e, Func):
        return replace(e, args=tuple(f(a) for a in e.args))
    if isinstance(e, Agg):
        return replace(e, args=tuple(f(a) for a in e.args), filter=None if e.filter is None else f(e.filter))
    raise AssertionError(e)
