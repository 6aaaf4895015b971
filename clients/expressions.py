"""Building structured queries with expressions (StructuredQuery.select_exprs and the Expr tree)
from Python, without writing query text:

    from windowstore.clients.expressions import col, count, expr_query, sum_
    q = expr_query("s", [col("src"), (sum_(col("bytes")) * 8 / 60).alias("bps")],
                   where=col("port") < 1024, group_by=[col("src")], having=count() > 10,
                   order_by=[col("bps").desc()], limit=5)
    ws.query(q)

X wraps one pb.Expr; Python's operators build SQL's (+ - * / %, == != < <= > >=, & | ~ for AND,
OR, NOT), so `==` here builds a comparison rather than testing equality. Plain Python values
become literals. Also the APPROXIMATE threshold query (frequent items) in its structured form.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Any, Iterable

from windowstore.v1 import windowstore_pb2 as pb

_UNITS = {"ms": pb.LENGTH_UNIT_MS, "subwindows": pb.LENGTH_UNIT_SUBWINDOWS, "rows": pb.LENGTH_UNIT_ROWS}


_NULL_ORDER = {None: pb.NULL_ORDER_UNSPECIFIED, True: pb.NULL_ORDER_FIRST, False: pb.NULL_ORDER_LAST}


def _value(v: Any) -> pb.Value:
    """A constant as a pb.Value (NULL: no field set; integers beyond int64 exactly, as decimal text)."""
    if v is None:
        return pb.Value()
    if isinstance(v, bool):
        return pb.Value(bool_value=v)
    if isinstance(v, str):
        return pb.Value(string_value=v)
    if isinstance(v, float):
        return pb.Value(float64_value=v)
    if isinstance(v, int):
        return pb.Value(int64_value=v) if -(2**63) <= v < 2**63 else pb.Value(decimal_value=str(v))
    if isinstance(v, Decimal):
        return pb.Value(decimal_value=str(v))
    raise TypeError(f"a constant is an int, float, str, bool, Decimal or None, not {type(v).__name__}")


class X:
    """An expression of a structured query (its pb.Expr in `.pb`)."""

    __slots__ = ("pb",)
    __hash__ = None  # type: ignore[assignment]  # == builds a comparison

    def __init__(self, message: pb.Expr):
        self.pb = message

    # arithmetic
    def __add__(self, o): return op("+", self, o)
    def __radd__(self, o): return op("+", o, self)
    def __sub__(self, o): return op("-", self, o)
    def __rsub__(self, o): return op("-", o, self)
    def __mul__(self, o): return op("*", self, o)
    def __rmul__(self, o): return op("*", o, self)
    def __truediv__(self, o): return op("/", self, o)
    def __rtruediv__(self, o): return op("/", o, self)
    def __mod__(self, o): return op("%", self, o)
    def __rmod__(self, o): return op("%", o, self)
    def __neg__(self): return op("-", self)

    # comparisons and logic
    def __eq__(self, o): return op("=", self, o)
    def __ne__(self, o): return op("!=", self, o)
    def __lt__(self, o): return op("<", self, o)
    def __le__(self, o): return op("<=", self, o)
    def __gt__(self, o): return op(">", self, o)
    def __ge__(self, o): return op(">=", self, o)
    def __and__(self, o): return op("and", self, o)
    def __rand__(self, o): return op("and", o, self)
    def __or__(self, o): return op("or", self, o)
    def __ror__(self, o): return op("or", o, self)
    def __invert__(self): return op("not", self)

    def __bool__(self):
        raise TypeError("an expression has no truth value: use & | ~ for AND, OR, NOT")

    def is_null(self) -> "X": return op("is null", self)
    def is_not_null(self) -> "X": return op("is not null", self)
    def is_distinct_from(self, o) -> "X": return op("is distinct from", self, o)
    def is_not_distinct_from(self, o) -> "X": return op("is not distinct from", self, o)
    def between(self, low, high) -> "X": return op("between", self, low, high)
    def not_between(self, low, high) -> "X": return op("not between", self, low, high)
    def like(self, pattern) -> "X": return op("like", self, pattern)
    def not_like(self, pattern) -> "X": return op("not like", self, pattern)
    def isin(self, *values) -> "X": return op("in", self, *values)
    def not_in(self, *values) -> "X": return op("not in", self, *values)
    def cast(self, type_name: str) -> "X": return cast(self, type_name)

    def alias(self, name: str) -> pb.ExprItem:
        """A select item named `name` (AS name)."""
        return pb.ExprItem(expr=self.pb, alias=name)

    def asc(self, nulls_first: bool | None = None) -> pb.ExprOrder:
        """ORDER BY this ascending (NULLS FIRST if `nulls_first`, NULLS LAST if False; last by default)."""
        return pb.ExprOrder(expr=self.pb, nulls=_NULL_ORDER[nulls_first])

    def desc(self, nulls_first: bool | None = None) -> pb.ExprOrder:
        """ORDER BY this descending (NULLS FIRST if `nulls_first`, NULLS LAST if False; last by default)."""
        return pb.ExprOrder(expr=self.pb, descending=True, nulls=_NULL_ORDER[nulls_first])

    def __repr__(self) -> str:
        return f"X({self.pb})"


def _x(v: Any) -> X:
    return v if isinstance(v, X) else lit(v)


def col(name: str) -> X:
    """A column (or, in ORDER BY and an outer query, an output name)."""
    return X(pb.Expr(column=name))


def star() -> pb.ExprItem:
    """The select item `*`: every column of the input (the stream's, or the sub-query's)."""
    return pb.ExprItem(expr=pb.Expr(column="*"))


def lit(value: Any) -> X:
    """A constant: int, float, str, bool, Decimal or None (NULL)."""
    return X(pb.Expr(literal=_value(value)))


def interval(ms: int = 0, *, seconds: int = 0, minutes: int = 0, hours: int = 0, days: int = 0) -> X:
    """INTERVAL of the given length (held in milliseconds)."""
    return X(pb.Expr(interval_ms=ms + 1000 * (seconds + 60 * (minutes + 60 * (hours + 24 * days)))))


def op(name: str, *args: Any) -> X:
    """An operator by name (see ExprOp in the proto): "+", "=", "and", "between", "in", ..."""
    return X(pb.Expr(op=pb.ExprOp(op=name, args=[_x(a).pb for a in args])))


def func(name: str, *args: Any) -> X:
    """A scalar function call: lower, upper, length, substr, concat, abs, round, floor, ceil,
    coalesce, nullif, time_bucket, date_trunc."""
    return X(pb.Expr(call=pb.ExprCall(name=name, args=[_x(a).pb for a in args])))


def now() -> X:
    """NOW(): the end of the youngest sub-window the query reads."""
    return func("now")


def cast(arg: Any, type_name: str) -> X:
    """CAST(arg AS type_name): BIGINT, DOUBLE, VARCHAR or BOOLEAN."""
    return X(pb.Expr(cast=pb.ExprCast(arg=_x(arg).pb, type=type_name)))


def case(*whens: tuple[Any, Any], else_: Any = None, operand: Any = None) -> X:
    """CASE [operand] WHEN w THEN r ... [ELSE else_] END; whens as (w, r) pairs."""
    c = pb.ExprCase(whens=[pb.ExprWhen(when=_x(w).pb, then=_x(r).pb) for w, r in whens])
    if operand is not None:
        c.operand.CopyFrom(_x(operand).pb)
    if else_ is not None:
        getattr(c, "default").CopyFrom(_x(else_).pb)
    return X(pb.Expr(case=c))


def agg(function: str, *args: Any, distinct: bool = False, filter: Any = None, q: float | None = None) -> X:
    """An aggregate of expressions: count (no args: COUNT(*)), sum, avg, min, max, quantile (q),
    median; COUNT(DISTINCT a, b) with distinct=True; FILTER (WHERE filter)."""
    a = pb.ExprAggregate(function=function, args=[_x(x).pb for x in args], distinct=distinct, q=q or 0.0)
    if filter is not None:
        a.filter.CopyFrom(_x(filter).pb)
    return X(pb.Expr(aggregate=a))


def count(*args: Any, distinct: bool = False, filter: Any = None) -> X:
    return agg("count", *args, distinct=distinct, filter=filter)


def sum_(arg: Any, filter: Any = None) -> X:
    return agg("sum", arg, filter=filter)


def avg(arg: Any, filter: Any = None) -> X:
    return agg("avg", arg, filter=filter)


def min_(arg: Any, filter: Any = None) -> X:
    return agg("min", arg, filter=filter)


def max_(arg: Any, filter: Any = None) -> X:
    return agg("max", arg, filter=filter)


def quantile(arg: Any, q: float, filter: Any = None) -> X:
    return agg("quantile", arg, q=q, filter=filter)


def window_length(length: int | pb.WindowLength | None, unit: str = "ms") -> pb.WindowLength | None:
    if length is None or isinstance(length, pb.WindowLength):
        return length
    return pb.WindowLength(value=length, unit=_UNITS[unit])


def _item(it: X | pb.ExprItem) -> pb.ExprItem:
    return it if isinstance(it, pb.ExprItem) else pb.ExprItem(expr=_x(it).pb)


def _order(o: X | pb.ExprOrder | int) -> pb.ExprOrder:
    if isinstance(o, pb.ExprOrder):
        return o
    return pb.ExprOrder(expr=_x(o).pb)  # an int: a 1-based ordinal


def expr_query(stream: str | pb.StructuredQuery, select: Iterable[X | pb.ExprItem], *, where: X | None = None,
               group_by: Iterable[X | int] = (), having: X | None = None,
               order_by: Iterable[X | pb.ExprOrder | int] = (), limit: int | None = None, distinct: bool = False,
               range: int | pb.WindowLength | None = None, slide: int | pb.WindowLength | None = None,
               as_of_slide: int | None = None) -> pb.StructuredQuery:
    """A structured query with expressions. `stream` is a stream name, or a structured query with
    expressions whose answer rows this query reads (a sub-query in FROM; the window is then its).
    range and slide: milliseconds, or a pb.WindowLength."""
    out = pb.StructuredQuery(select_exprs=[_item(it) for it in select], distinct=distinct,
                             group_by_exprs=[_x(g).pb for g in group_by],
                             order_by_exprs=[_order(o) for o in order_by])
    if isinstance(stream, pb.StructuredQuery):
        out.from_query.CopyFrom(stream)
    else:
        out.stream = stream
    if where is not None:
        out.where_expr.CopyFrom(_x(where).pb)
    if having is not None:
        out.having_expr.CopyFrom(_x(having).pb)
    if limit is not None:
        out.limit = limit
    for name, length in (("range", range), ("slide", slide)):
        wl = window_length(length)
        if wl is not None:
            getattr(out, name).CopyFrom(wl)
    if as_of_slide is not None:
        out.as_of_slide = as_of_slide
    return out


def threshold_query(stream: str, group_by: str, *, weight: str | None = None, above: int | Decimal | None = None,
                    fraction: float | Decimal | None = None, where: Iterable[pb.Predicate] = (),
                    range: int | pb.WindowLength | None = None) -> pb.StructuredQuery:
    """The APPROXIMATE threshold query (frequent items, docs/frequent-items.md) in its structured
    form: every `group_by` key whose COUNT(*) (or SUM(weight)) exceeds `above`, or the `fraction`
    of the window's total (HAVING A > fraction * TOTAL)."""
    if (above is None) == (fraction is None):
        raise ValueError("give one of above (a number) or fraction (of the window's total)")
    a = pb.Aggregate(func=pb.AGGREGATE_FUNCTION_SUM if weight else pb.AGGREGATE_FUNCTION_COUNT, column=weight or "")
    value = _value(Decimal(str(fraction)) if fraction is not None and isinstance(fraction, float) else
                   fraction if fraction is not None else above)
    test = pb.HavingTest(aggregate=a, op=">", values=[value], of_total=fraction is not None)
    out = pb.StructuredQuery(stream=stream, items=[pb.SelectItem(key_column=group_by), pb.SelectItem(aggregate=a)],
                             group_by=group_by, having=pb.HavingCondition(test=test), approximate=True)
    preds = list(where)
    if preds:
        out.where.add(predicates=preds)
    wl = window_length(range)
    if wl is not None:
        out.range.CopyFrom(wl)
    return out


def session_window(gap_ms: int) -> pb.SessionRowsWindow:
    """[SESSION GAP gap_ms ms], for StructuredQuery.window_shape."""
    return pb.SessionRowsWindow(session_gap_ms=gap_ms)


def rows_window(n: int, partition_by: Iterable[str] = ()) -> pb.SessionRowsWindow:
    """[ROWS n], or [PARTITION BY a, ... ROWS n], for StructuredQuery.window_shape."""
    return pb.SessionRowsWindow(rows=n, partition_by=list(partition_by))


def cumulate_window(step_ms: int, size_ms: int) -> pb.CumulateWindow:
    """[CUMULATE STEP step_ms ms SIZE size_ms ms], for StructuredQuery.cumulate (a landmark window
    [RANGE UNBOUNDED] is StructuredQuery.landmark, set with landmark=pb.LandmarkWindow())."""
    return pb.CumulateWindow(step_ms=step_ms, size_ms=size_ms)
