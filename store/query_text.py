"""The text form of a structured query: to_text writes a Query or JoinQuery as the query text that
parses back to it (parse_statement(to_text(q)) == q), quoting names and writing literals exactly.
It must not parse."""
from __future__ import annotations

from decimal import Decimal

from . import temporal
from .errors import QueryError
from .expr_temporal import DateLiteral, TimestampLiteral
from .lexer import _PLAIN_NAME, JOIN_WORDS, KEYWORDS
from .query import (Aggregate, Equal, JoinQuery, KeyColumn, Logical, OfTotal, OrderBy, Predicate, Query, Range,
                    SelectItem)
from .timing_syntax import PROB_COLUMN, Timing


def to_text(q: Query | JoinQuery) -> str:
    """The query text that parses back to `q` (parse_statement(to_text(q)) == q)."""
    if isinstance(q, JoinQuery):
        return _join_text(q)
    if q.expr is not None:
        from .expr_query import select_text
        return select_text(q)
    inner = _select_text(q, q.items, with_order=True)
    if not q.outer:
        return inner
    return f"SELECT {', '.join(_item_text(a) for a in q.outer)} FROM ({inner})"


def _select_text(q: Query, items, with_order: bool) -> str:
    parts = [f"SELECT {'DISTINCT ' if q.distinct else ''}{', '.join(_item_text(it) for it in items)} FROM "
             f"{quote_name(q.stream)}"]
    window = []
    if q.shape is not None:  # a session, count-based or partitioned window (window_shapes.py)
        from .window_shapes import shape_text
        window.append(shape_text(q.shape, quote_name))
    if q.range is not None:
        window.append(f"RANGE {_length_text(q.range)}")
    if q.slide is not None:
        window.append(f"SLIDE {_length_text(q.slide)}")
    if window:
        parts.append(f"[{' '.join(window)}]")
    if q.as_of_slide is not None:
        parts.append(f"AS OF SLIDE {q.as_of_slide}")
    if q.where:
        parts.append("WHERE " + " OR ".join(
            "(" + " AND ".join(_predicate_text(p) for p in conj) + ")" for conj in q.where))
    if q.group_by is not None:
        parts.append(f"GROUP BY {', '.join(quote_name(c) for c in q.group_columns)}")
    if q.having is not None:
        parts.append("HAVING " + _having_text(q.having))
    if with_order and q.order_by:
        parts.append("ORDER BY " + ", ".join(_order_text(o) for o in q.order_by))
    if q.limit is not None:
        parts.append(f"LIMIT {q.limit}")
    if q.approximate:
        parts.append("APPROXIMATE")
    return " ".join(parts)


def _join_text(q: JoinQuery) -> str:
    parts = [f"SELECT {', '.join(_item_text(it) for it in q.items)} FROM"]
    for i, src in enumerate(q.sources):
        parts.append(("JOIN " if i else "") + _join_name(src.stream))
        if src.alias is not None:
            parts.append(_join_name(src.alias))
        window = []
        if src.range is not None:
            window.append(f"RANGE {_length_text(src.range)}")
        if src.slide is not None:
            window.append(f"SLIDE {_length_text(src.slide)}")
        if window:
            parts.append(f"[{' '.join(window)}]")
        if src.on:
            parts.append("ON " + " AND ".join(_condition_text(c) for c in src.on))
    if q.within is not None:
        parts.append(f"WITHIN {_length_text(q.within)}")
    if q.where:
        parts.append("WHERE " + " OR ".join(
            "(" + " AND ".join(_predicate_text(p) for p in conj) + ")" for conj in q.where))
    if q.group_by is not None:
        parts.append(f"GROUP BY {quote_name(q.group_by)}")
    if q.order_by:
        parts.append("ORDER BY " + ", ".join(_order_text(o) for o in q.order_by))
    if q.limit is not None:
        parts.append(f"LIMIT {q.limit}")
    inner = " ".join(parts)
    if not q.outer:
        return inner
    return f"SELECT {', '.join(_item_text(a) for a in q.outer)} FROM ({inner})"


def _join_name(name: str) -> str:
    """A stream name or alias in a join's FROM clause: also quoted when it is a join keyword."""
    return '"' + name.replace('"', '""') + '"' if name.lower() in JOIN_WORDS else quote_name(name)


def _condition_text(c) -> str:
    if isinstance(c, Equal):
        return f"{quote_name(c.left)} = {quote_name(c.right)}"
    if isinstance(c, Timing):
        return _timing_text(c)
    col = quote_name(c.column)
    if c.low is not None and c.high is not None:
        return f"{col} BETWEEN {_offset_text(c.base, c.low)} AND {_offset_text(c.base, c.high)}"
    if c.low is not None:
        return f"{col} >= {_offset_text(c.base, c.low)}"
    if c.high is not None:
        return f"{col} <= {_offset_text(c.base, c.high)}"
    raise QueryError("a band condition needs a lower or an upper bound", c.loc)


def _timing_text(c: Timing) -> str:
    i1 = f"INTERVAL({quote_name(c.left[0])}, {quote_name(c.left[1])})"
    i2 = f"INTERVAL({quote_name(c.right[0])}, {quote_name(c.right[1])})"
    if c.kind == "mutual":
        pred = f"ABS({i1} - {i2}) <= {c.d} ms"
    else:
        pred = f"{i1} {'-' if c.d < 0 else '+'} {abs(c.d)} ms {'>=' if c.kind == 'deadline' else '<='} {i2}"
    return f"PROB({pred}) >= {c.ct}"


def _offset_text(base: str, offset: int) -> str:
    if offset == 0:
        return quote_name(base)
    return f"{quote_name(base)} {'-' if offset < 0 else '+'} {abs(offset)}"


def _item_text(it: SelectItem) -> str:
    if isinstance(it, temporal.TemporalItem):
        text = temporal.text(it.expr)
    elif isinstance(it, KeyColumn):
        text = "PROB()" if it.column == PROB_COLUMN else quote_name(it.column)
    else:
        text = _agg_text(it)
    return f"{text} AS {quote_name(it.alias)}" if it.alias else text


def _agg_text(a: Aggregate) -> str:
    if a.func == "count" and a.column is None:
        return "COUNT(*)"
    if temporal.is_node(a.column):  # over intervals: MAX(DURATION(VALID(col)))
        return f"{a.func.upper()}({temporal.text(a.column)})"
    col = quote_name(a.column)  # type: ignore[arg-type]  # None only for COUNT(*)
    if a.func == "count_distinct":
        return f"COUNT(DISTINCT {col})"
    if a.func in ("quantile", "approx_quantile", "approx_top_k"):
        return f"{a.func.upper()}({col}, {a.q if isinstance(a.q, Decimal) else repr(a.q)})"
    return f"{a.func.upper()}({col})"


def _order_text(o: OrderBy) -> str:
    ref = (quote_name(o.name) if o.name is not None else _agg_text(o.expr) if o.expr is not None
           else str(o.item + 1))  # type: ignore[operator]  # neither a name nor an aggregate: an ordinal
    return f"{ref} DESC" if o.descending else ref


def _having_text(c) -> str:
    if isinstance(c, Logical):
        if c.op == "not":
            return f"NOT ({_having_text(c.parts[0])})"
        return "(" + f" {c.op.upper()} ".join(_having_text(p) for p in c.parts) + ")"
    operand = _agg_text(c.operand) if isinstance(c.operand, Aggregate) else quote_name(c.operand)
    if isinstance(c.value, OfTotal):
        return f"{operand} {c.op} {literal_text(c.value.fraction)} * TOTAL"
    return _predicate_text(Predicate(operand, c.op, c.value), quote=False)


def _length_text(r: Range) -> str:
    return f"{r.value} {'ms' if r.unit == 'ms' else r.unit.upper()}"


def _predicate_text(p: Predicate, quote: bool = True) -> str:
    if temporal.is_node(p):  # a test on coalesced intervals
        return temporal.text(p)
    column = quote_name(p.column) if quote else p.column
    if p.op in ("is null", "is not null"):
        return f"{column} {p.op.upper()}"
    if p.op in ("in", "not in"):
        values: tuple = p.value  # type: ignore[assignment]  # IN's value: a tuple of literals
        return f"{column} {p.op.upper()} ({', '.join(literal_text(v) for v in values)})"
    return f"{column} {p.op} {literal_text(p.value)}"


def quote_name(name: str) -> str:
    """A name as query text: bare when it is a plain identifier, else in double quotes."""
    if _PLAIN_NAME.fullmatch(name) and name.lower() not in KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


def literal_text(v) -> str:
    """A literal as query text, exactly (a float is written as its exact decimal value)."""
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, (TimestampLiteral, DateLiteral)):
        return repr(v)  # TIMESTAMP '...' / DATE '...'

    if isinstance(v, float):
        if v != v:
            raise QueryError("NaN is not a comparable value")
        if v in (float("inf"), float("-inf")):
            return "1e999" if v > 0 else "-1e999"  # beyond every double: compares as infinity does
        return str(int(v)) if v.is_integer() else format(Decimal(v), "f")
    return str(v)
