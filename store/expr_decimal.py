"""DECIMAL values in expressions (expr.py), with DuckDB's types and exact arithmetic: the type rules
of its decimal binder (issue 32), computed on Arrow's decimal128 kernels where their result fits
38 digits and on exact Python Decimals where it does not. Owns no state; expr.py and expr_query.py
call it for every node with a decimal operand.

Types, as DuckDB gives them:
- a constant with a decimal point and no exponent (`1.50`) is DECIMAL(digits, digits after the
  point), DOUBLE beyond 38 digits; `1e3` is a DOUBLE;
- an integer meets a decimal as DECIMAL(10,0) (a constant within int32) or DECIMAL(19,0) (BIGINT);
- `a + b`, `a - b`: scale max(s1, s2), width max(p1 - s1, p2 - s2) + scale + 1; `a * b`: scale
  s1 + s2, width p1 + p2, but 18 when both have at most 18 digits and the scale is below 18 (DuckDB
  multiplies those in an int64 and refuses a product beyond 18 digits); `a % b`: scale max(s1, s2),
  width max(p1 - s1, p2 - s2) + scale; widths
  capped at 38, and a value beyond its width is an error, never a wrapped or rounded value; `/` and
  any DOUBLE operand give a DOUBLE;
- a comparison, CASE, COALESCE or NULLIF meets at scale max(s), width max(p - s) + scale;
- SUM is DECIMAL(38, s), AVG a DOUBLE, MIN / MAX / QUANTILE the argument's type; abs keeps it,
  floor / ceil give DECIMAL(p, 0), round(x, d) DECIMAL(p, min(d, s));
- CAST to DECIMAL(p, s) rounds half away from zero (from a DOUBLE: its exact binary value), CAST of
  a decimal to BIGINT rounds half away from zero, to VARCHAR writes every place of its scale.
"""
from __future__ import annotations

import decimal
from decimal import Decimal
from fractions import Fraction
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import QueryError
from .schema import decimal_type

MAX_WIDTH = 38
_CTX = decimal.Context(prec=100, rounding=decimal.ROUND_HALF_UP)  # exact for every 38-digit operation


def is_decimal(t: str) -> bool:
    return t.startswith("decimal(")


def name(p: int, s: int) -> str:
    return f"decimal({p},{s})"


def width_scale(t: str, node=None) -> tuple[int, int]:
    """(width, scale) of a decimal type, or of an integer type as it meets a decimal."""
    ps = decimal_type(t)
    if ps is not None:
        return ps
    if t == "int128":
        return (MAX_WIDTH, 0)
    return (_int_width(node), 0)


def _int_width(node) -> int:
    """10 for an integer DuckDB types INTEGER (a constant within int32, and what arithmetic, abs,
    round, CASE and COALESCE make of such constants alone), 19 for a BIGINT."""
    from .expr import Arith, Case, Func, Lit, Neg
    if isinstance(node, Lit):
        return 10 if isinstance(node.value, int) and -(2**31) <= node.value < 2**31 else 19
    if isinstance(node, Neg):
        return _int_width(node.arg)
    if isinstance(node, Arith) and node.op != "/":
        return max(_int_width(node.left), _int_width(node.right))
    if isinstance(node, Func) and node.name in ("abs", "round"):
        return _int_width(node.args[0])
    if isinstance(node, Func) and node.name in ("coalesce", "nullif"):
        return max(_int_width(a) for a in node.args)
    if isinstance(node, Case):
        return max([_int_width(r) for _, r in node.whens] + ([_int_width(node.default)] if node.default else []))
    return 19


def arrow(t: str) -> pa.DataType:
    p, s = width_scale(t)
    return pa.decimal128(p, s)


def literal_type(text: str) -> str | None:
    """The type of a number written `text` (no sign): DECIMAL(p, s) for a point without exponent
    and at most 38 digits, else None (a DOUBLE, or an integer)."""
    if "." not in text or any(ch in text for ch in "eE"):
        return None
    whole, _, frac = text.lstrip("+-").partition(".")
    p = len(whole) + len(frac)
    if p > MAX_WIDTH:
        return None
    return name(max(p, 1), len(frac))


def involved(*types: str) -> bool:
    return any(is_decimal(t) for t in types)


def arith_type(op: str, lt: str, rt: str, left, right) -> str:
    """The type of `left op right` when an operand is a decimal (the other an integer, a decimal, a
    DOUBLE or NULL)."""
    if "float64" in (lt, rt) or op == "/":
        return "float64"
    (p1, s1), (p2, s2) = (_ws(lt, left), _ws(rt, right))
    if op == "*":  # DuckDB's binder: operands of up to 18 digits whose product has a scale below 18
        p, s = p1 + p2, s1 + s2  # multiply in an int64, so in 18 digits; any other product in p1 + p2
        return name(18 if p > 18 and max(p1, p2) <= 18 and s < 18 else min(MAX_WIDTH, p), s)
    s = max(s1, s2)
    extra = 1 if op in "+-" else 0
    return name(min(MAX_WIDTH, max(p1 - s1, p2 - s2) + s + extra), s)


def _ws(t: str, node) -> tuple[int, int]:
    return (1, 0) if t == "null" else width_scale(t, node)


def common(types: list[str], nodes: list, result: bool = False) -> str:
    """The type decimals meet with integers and each other (DOUBLE with a DOUBLE). Beyond 38 digits,
    the result of a CASE or COALESCE keeps the integer digits and gives up scale, as DuckDB does
    (its values rounded half away from zero); a comparison keeps the scale (a value beyond the
    width is then an error)."""
    if "float64" in types:
        return "float64"
    ws = [width_scale(t, n) for t, n in zip(types, nodes) if t != "null"]
    s = max(w[1] for w in ws)
    digits = max(p - sc for p, sc in ws)
    if result and digits + s > MAX_WIDTH:
        s = max(0, MAX_WIDTH - digits)
    return name(min(MAX_WIDTH, digits + s), s)


def check_scale(typ: str, e) -> None:
    if width_scale(typ)[1] > MAX_WIDTH:
        from .expr import sql
        raise QueryError(f"{sql(e)} needs a scale above 38 to be exact", e.loc,
                         hint="CAST an operand to DOUBLE or to a DECIMAL of a smaller scale")


# -- evaluation ------------------------------------------------------------------------------------------
def to_decimal(a: pa.Array, src: str, dst: str, e) -> pa.Array:
    """An integer, decimal or NULL array as the decimal type `dst`, exactly (an error when a value
    does not fit its width)."""
    target = arrow(dst)
    if a.type == target:
        return a
    if pa.types.is_null(a.type):
        return pa.nulls(len(a), target)
    try:
        if pa.types.is_integer(a.type):  # (Arrow casts an int64 to a decimal of 19 digits or more only)
            a = a.cast(pa.decimal128(19, 0))
        return a.cast(target)  # a safe cast: a value beyond the width raises
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return _from_python([_fit(v, dst, e) for v in a.to_pylist()], dst)


def from_storage(values: np.ndarray, valid: np.ndarray | None, typ: str) -> pa.Array:
    """A stored decimal(p,s) column (int64 value * 10**s) as Arrow decimal128(p, s), exactly: each
    value sign-extended into the 16 bytes of a decimal128."""
    v = np.asarray(values, dtype=np.int64)
    words = np.empty((len(v), 2), dtype=np.int64)
    words[:, 0] = v
    words[:, 1] = v >> 63
    validity = None if valid is None else pa.array(np.asarray(valid, dtype=bool)).buffers()[1]
    return pa.Array.from_buffers(arrow(typ), len(v), [validity, pa.py_buffer(words.tobytes())],
                                 null_count=-1 if valid is not None else 0)


def _from_python(values: list, typ: str) -> pa.Array:
    return pa.array(values, type=arrow(typ))


def _fit(v, typ: str, e) -> Decimal | None:
    """`v` (an int, a Decimal, a float or a str) as a value of the decimal `typ`, rounded half away
    from zero to its scale; an error naming `e` when it does not fit the width."""
    if v is None:
        return None
    p, s = width_scale(typ)
    d = v if isinstance(v, Decimal) else Decimal(v) if not isinstance(v, str) else _parse(v, e)
    if not d.is_finite():
        _overflow(e, typ, v)
    q = d.quantize(Decimal(1).scaleb(-s), context=_CTX)
    if q.adjusted() >= p - s and q != 0:
        _overflow(e, typ, v)
    return q


def _parse(text: str, e) -> Decimal:
    try:
        return Decimal(text.strip())
    except decimal.InvalidOperation:
        from .expr import sql
        raise QueryError(f"{sql(e)}: {text[:40]!r} is not a DECIMAL", e.loc) from None


def _overflow(e, typ: str, v) -> None:
    from .expr import sql
    raise QueryError(f"{sql(e)}: {str(v)[:40]} does not fit {typ.upper()}", e.loc)


def arith(e, left: pa.Array, right: pa.Array, lt: str, rt: str, typ: str) -> pa.Array:
    """`left op right` of decimal type `typ` (operands of types lt, rt): Arrow's kernels where
    their result width is at most 38, exact Python Decimals otherwise; `%` by zero is an error."""
    check_scale(typ, e)
    op = e.op
    (p1, s1), (p2, s2) = _ws(lt, e.left), _ws(rt, e.right)
    if "null" in (lt, rt):
        return pa.nulls(len(left), arrow(typ))
    a, b = to_decimal(left, lt, name(p1, s1), e), to_decimal(right, rt, name(p2, s2), e)
    arrow_width = p1 + p2 + 1 if op == "*" else max(p1 - s1, p2 - s2) + max(s1, s2) + 1
    if op in "+-*" and arrow_width <= MAX_WIDTH:
        fn = {"+": pc.add, "-": pc.subtract, "*": pc.multiply}[op]
        try:
            return fn(a, b).cast(arrow(typ))  # a safe cast: a value beyond the width raises
        except pa.ArrowInvalid:
            from .expr import sql
            raise QueryError(f"overflow in {sql(e)}: a value does not fit {typ.upper()}", e.loc) from None
    fn2: Callable[[Decimal, Decimal], Decimal] = {
        "+": lambda x, y: _CTX.add(x, y), "-": lambda x, y: _CTX.subtract(x, y),
        "*": lambda x, y: _CTX.multiply(x, y), "%": lambda x, y: _mod(x, y, e)}[op]
    out = [None if x is None or y is None else _fit(fn2(x, y), typ, e) for x, y in zip(a.to_pylist(), b.to_pylist())]
    return _from_python(out, typ)


def _mod(x: Decimal, y: Decimal, e) -> Decimal:
    if y == 0:
        from .expr import sql
        raise QueryError(f"division by zero in {sql(e)}", e.loc)
    return _CTX.remainder(x, y)  # the sign of the dividend, as DuckDB's %


def negate(a: pa.Array) -> pa.Array:
    return pc.negate(a)  # a decimal's negation always fits its width


def cast(a: pa.Array, src: str, dst: str, e) -> pa.Array:
    """CAST between a decimal and BIGINT, DOUBLE, VARCHAR or another DECIMAL, as DuckDB does."""
    if is_decimal(dst):
        if src in ("int64", "int128") or is_decimal(src) and width_scale(dst)[1] >= width_scale(src)[1]:
            try:
                return a.cast(arrow(dst))  # exact (a safe cast: an overflow raises)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                pass
        values = a.to_pylist()
        if src == "float64":
            values = [None if v is None else _float_exact(v, e) for v in values]
        return _from_python([_fit(v, dst, e) for v in values], dst)
    if dst == "float64":
        return pa.array([None if v is None else float(v) for v in a.to_pylist()], type=pa.float64())
    if dst == "int64":
        out = [None if v is None else int(v.quantize(Decimal(1), context=_CTX)) for v in a.to_pylist()]
        if any(v is not None and not -(2**63) <= v < 2**63 for v in out):
            from .expr import sql
            raise QueryError(f"{sql(e)}: a value is out of the range of BIGINT", e.loc)
        return pa.array(out, type=pa.int64())
    if dst == "string":
        return a.cast(pa.string())
    from .expr import sql
    raise QueryError(f"{sql(e)}: a DECIMAL cannot be cast to {dst.upper()}", e.loc)


def _float_exact(v: float, e) -> Decimal:
    if v != v or v in (float("inf"), float("-inf")):
        from .expr import sql
        raise QueryError(f"{sql(e)}: {v!r} is not a DECIMAL", e.loc)
    return Decimal(v)  # the double's exact value


def rounded(a: pa.Array, typ: str, how: str, digits: int, e) -> pa.Array:
    """floor / ceil (to DECIMAL(p, 0)) or round(x, digits) (to DECIMAL(p, min(digits, s)), half away
    from zero) of a decimal array of type `typ`."""
    p, s = width_scale(typ)
    scale = 0 if how != "round" else max(0, min(digits, s))
    mode = {"floor": decimal.ROUND_FLOOR, "ceil": decimal.ROUND_CEILING, "round": decimal.ROUND_HALF_UP}[how]
    step = Decimal(1).scaleb(-scale)
    out = [None if v is None else v.quantize(step, rounding=mode, context=_CTX) for v in a.to_pylist()]
    return _from_python(out, name(p, scale))


def result_type(fn: str, typ: str, digits: int | None = None) -> str:
    p, s = width_scale(typ)
    if fn in ("floor", "ceil", "ceiling"):
        return name(p, 0)
    if fn == "round":
        return name(p, max(0, min(digits or 0, s)))
    return typ


def add(x: Decimal, y: Decimal) -> Decimal:
    """x + y exactly (Python's default context keeps 28 digits: a sum of DECIMAL(38, s) values would
    round); SUM's combine, here and in the clients' merges of partitions' partial sums."""
    return _CTX.add(x, y)


def sums(values: list, g: np.ndarray, n: int, typ: str, e) -> list:
    """SUM of a decimal per group, exactly, as DECIMAL(38, s): an error when beyond 38 digits."""
    out: list = [None] * n
    for k, v in zip(g.tolist(), values):
        out[k] = v if out[k] is None else add(out[k], v)
    _, s = width_scale(typ)
    return [None if v is None else _fit(v, name(MAX_WIDTH, s), e) for v in out]


def scaled_ints(a: pa.Array) -> np.ndarray | None:
    """The values of a decimal128 array of at most 18 digits as int64 value * 10**s (its storage's
    low words, exactly), None for a wider one. Nulls read as arbitrary values: callers skip them."""
    if a.type.precision > 18:
        return None
    words = np.frombuffer(a.buffers()[1], dtype=np.int64)
    return words[2 * a.offset:2 * (a.offset + len(a)):2]


def to_double(a: pa.Array) -> pa.Array:
    """A decimal array as the doubles nearest its values (as DuckDB converts them): value * 10**s
    divided by 10**s in IEEE arithmetic, correctly rounded while both are exact doubles (at most 15
    digits), else each value's own conversion."""
    s = a.type.scale
    ints = scaled_ints(a) if a.type.precision <= 15 else None
    if ints is None:
        return pa.array([None if v is None else float(v) for v in a.to_pylist()], type=pa.float64())
    valid = None if a.null_count == 0 else np.asarray(a.is_valid().to_numpy(zero_copy_only=False))
    out = ints.astype(np.float64) / 10.0 ** s if s >= 0 else ints.astype(np.float64) * 10.0 ** -s
    return pa.array(out, mask=None if valid is None else ~valid)


def from_scaled(values: list, typ: str, e) -> list:
    """SUMs as integers value * 10**s, as the Decimals of DECIMAL(38, s): an error beyond 38 digits."""
    _, s = width_scale(typ)
    return [None if v is None else _fit(Decimal(v).scaleb(-s), name(MAX_WIDTH, s), e) for v in values]


def mean(total: Decimal | int, count: int, scale: int = 0) -> float:
    """AVG of a decimal: the DOUBLE nearest the exact mean of a sum `total` (a Decimal, or an integer
    value * 10**scale) over `count` values, as DuckDB types it, on every path (window scan,
    synopses, joins, and the clients' merges of partitions)."""
    return float(Fraction(total) / (count * 10**scale))
