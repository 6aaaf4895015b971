"""Structured queries with expressions between the proto API (StructuredQuery.select_exprs and the
Expr message tree) and the core's query.Query carrying an expr_query.Select: the same tree the
query text's parser (store/expr_syntax.py) builds, so that one binder checks both forms. Each node
is located by its field path (`select_exprs[0].expr.op.args[1]`), which errors name.

Syntax only, as convert_query.py: names, types and aggregate placement are the binder's.
"""
from __future__ import annotations

from decimal import Decimal

from windowstore.store import Loc, QueryError
from windowstore.store.expr import (AGGREGATES, CAST_TYPES, CONCAT_OPERATOR, SCALAR_FUNCTIONS, Agg, Arith, Between, Case, Cast, Cmp,
                                    Col, Expr, Func, InList, IsDistinct, IsNull, Like, Lit, Logic, Neg, Not, Now, Star)
from windowstore.store.expr_query import OrderKey, Select, SelectExpr
from windowstore.store.expr_decimal import MAX_WIDTH, literal_type
from windowstore.store.expr_temporal import in_text_range
from windowstore.store.functions import SQL_NAMES
from windowstore.store.query import Query
from windowstore.v1 import windowstore_pb2 as pb

# Nesting of Expr messages accepted, as the text's parentheses (each level is two messages deep, and
# protobuf decodes messages at most 100 deep)
MAX_EXPR_DEPTH = 32
_MAX_INTERVAL_MS = 2**62
_ARITH = ("+", "-", "*", "/", "%")
_CMP = ("=", "!=", "<", "<=", ">", ">=")
_NULLS_FROM_PB = {pb.NULL_ORDER_FIRST: True, pb.NULL_ORDER_LAST: False}  # (unspecified: None)
_NULLS_TO_PB = {None: pb.NULL_ORDER_UNSPECIFIED, True: pb.NULL_ORDER_FIRST, False: pb.NULL_ORDER_LAST}
_EXPR_FIELDS = ("where_expr", "group_by_exprs", "having_expr", "order_by_exprs", "from_query")
# the fields of the first grammar's structured form that a query with expressions leaves unset
_PLAIN_FIELDS = ("items", "where", "group_by", "group_by_columns", "having", "order_by", "outer", "approximate")


def has_expressions(q: pb.StructuredQuery) -> bool:
    """Whether the structured query uses the expression fields (select_exprs and the rest)."""
    return len(q.select_exprs) > 0 or any(_is_set(q, name) for name in _EXPR_FIELDS)


def _is_set(q: pb.StructuredQuery, name: str) -> bool:
    value = getattr(q, name)
    if name in ("where_expr", "having_expr", "from_query", "having"):
        return q.HasField(name)
    if isinstance(value, (str, bool)):
        return bool(value)
    return len(value) > 0


# -- proto -> query ---------------------------------------------------------------------------------
def query_from_pb(q: pb.StructuredQuery, where: str = "") -> Query:
    """The Query (with its expr_query.Select) of a structured query with expressions."""
    at = (lambda name: f"{where}.{name}" if where else name)
    if len(q.sources):
        raise QueryError("a join with expressions is not supported", Loc(field=at("sources")),
                         hint="a join takes items, where, group_by and order_by")
    for name in _PLAIN_FIELDS:
        if _is_set(q, name):
            raise QueryError(f"{name} cannot be combined with select_exprs (a query with expressions)",
                             Loc(field=at(name)), hint="write every part of the query as expressions")
    if not len(q.select_exprs):
        raise QueryError("a query with expressions needs select_exprs", Loc(field=at("select_exprs")))
    for name, what in (("window_shape", "session, ROWS or PARTITION BY"), ("landmark", "landmark"),
                       ("cumulate", "CUMULATE")):
        if q.HasField(name):
            raise QueryError(f"a query with expressions takes no {what} window", Loc(field=at(name)),
                             hint="use items, where and group_by with it")
    items = tuple(_item(it, at(f"select_exprs[{i}]")) for i, it in enumerate(q.select_exprs))
    filt = expr_from_pb(q.where_expr, at("where_expr")) if q.HasField("where_expr") else None
    group_by = tuple(expr_from_pb(g, at(f"group_by_exprs[{i}]")) for i, g in enumerate(q.group_by_exprs))
    having = expr_from_pb(q.having_expr, at("having_expr")) if q.HasField("having_expr") else None
    order = tuple(OrderKey(expr_from_pb(o.expr, at(f"order_by_exprs[{i}].expr")), o.descending,
                           loc=Loc(field=at(f"order_by_exprs[{i}]")), nulls_first=_NULLS_FROM_PB.get(o.nulls))
                  for i, o in enumerate(q.order_by_exprs))
    limit = int(q.limit) if q.HasField("limit") else None
    inner_q = None
    if q.HasField("from_query"):
        if where:
            raise QueryError("only one level of sub-query is supported", Loc(field=at("from_query")))
        for name in ("stream", "range", "slide", "as_of_slide"):
            if name in ("range", "slide") and not getattr(q, name).ByteSize() or \
                    name == "stream" and not q.stream or name == "as_of_slide" and not q.HasField(name):
                continue
            raise QueryError(f"a query over a sub-query names its {name} in from_query",
                             Loc(field=at(name)))
        inner_q = query_from_pb(q.from_query, at("from_query"))
    sel = Select(items, filt, group_by, having, order, limit, q.distinct,
                 inner=inner_q.expr if inner_q is not None else None)  # type: ignore[arg-type]  # a Select
    loc = Loc(field=at("select_exprs"))
    selected: tuple = items  # (a query with expressions holds its SelectExprs as items)
    if inner_q is not None:
        return Query(inner_q.stream, selected, range=inner_q.range, slide=inner_q.slide, loc=loc,
                     stream_loc=inner_q.stream_loc, as_of_slide=inner_q.as_of_slide, as_of_loc=inner_q.as_of_loc,
                     expr=sel)
    if not q.stream:
        raise QueryError("a query needs a stream", Loc(field=at("stream")))
    from .convert_query import _length
    return Query(q.stream, selected, range=_length(q.range, at("range")), slide=_length(q.slide, at("slide")), loc=loc,
                 stream_loc=Loc(field=at("stream")),
                 as_of_slide=int(q.as_of_slide) if q.HasField("as_of_slide") else None,
                 as_of_loc=Loc(field=at("as_of_slide")), expr=sel)


def _item(it: pb.ExprItem, where: str) -> SelectExpr:
    if not it.HasField("expr"):
        raise QueryError("a select item needs an expression", Loc(field=f"{where}.expr"))
    if it.expr.WhichOneof("node") == "column" and it.expr.column == "*":  # SELECT *: every input column
        if it.alias:
            raise QueryError("* takes no alias", Loc(field=f"{where}.alias"))
        return SelectExpr(Star(loc=Loc(field=f"{where}.expr.column")), loc=Loc(field=where))
    return SelectExpr(expr_from_pb(it.expr, f"{where}.expr"), it.alias or None, loc=Loc(field=where))


def expr_from_pb(e: pb.Expr, where: str, depth: int = 0) -> Expr:
    """The expression tree (store/expr.py) of an Expr message, each node located by its field path."""
    if depth > MAX_EXPR_DEPTH:
        raise QueryError(f"expressions nest more than {MAX_EXPR_DEPTH} deep", Loc(field=where))
    kind = e.WhichOneof("node")
    if kind is None:
        raise QueryError("an expression needs column, literal, interval_ms, timestamp_us, date_days, op, call, case, "
                         "cast or aggregate",
                         Loc(field=where))
    at = f"{where}.{kind}"
    loc = Loc(field=at)
    sub = (lambda x, path: expr_from_pb(x, f"{at}.{path}", depth + 1))
    if kind == "column":
        if not e.column:
            raise QueryError("a column needs a name", loc)
        return Col(e.column, loc=loc)
    if kind == "literal":
        return _literal(e.literal, loc)
    if kind == "interval_ms":
        if not 0 <= e.interval_ms <= _MAX_INTERVAL_MS:
            raise QueryError("an interval is between 0 and 2**62 ms", loc)
        return Lit(int(e.interval_ms), "interval", loc=loc)
    if kind in ("timestamp_us", "date_days"):
        typ = "timestamp" if kind == "timestamp_us" else "date"
        value = getattr(e, kind)
        if not in_text_range(typ, value):
            raise QueryError(f"a {typ.upper()} constant is between the years 1 and 9999", loc)
        return Lit(int(value), typ, loc=loc)
    if kind == "op":
        return _op(e.op, at, depth)
    if kind == "call":
        name = e.call.name.lower()
        args = tuple(sub(a, f"args[{i}]") for i, a in enumerate(e.call.args))
        if name == "now":
            if args:
                raise QueryError("now() takes no arguments", Loc(field=f"{at}.args"))
            return Now(loc=loc)
        if name in AGGREGATES:
            raise QueryError(f"{name.upper()} is an aggregate: write it as aggregate, not call", Loc(field=f"{at}.name"))
        if name in SQL_NAMES:
            raise QueryError(f"{name.upper()} cannot be combined with expressions yet", Loc(field=f"{at}.name"),
                             hint="use items with an aggregate over a column")
        if name not in SCALAR_FUNCTIONS:
            known = ", ".join(f.upper() for f in sorted(set(SCALAR_FUNCTIONS) | {"now"}))
            raise QueryError(f"unknown function {e.call.name[:40]!r}", Loc(field=f"{at}.name"),
                             hint=f"the functions are {known}")
        lo, hi = SCALAR_FUNCTIONS[name]
        if not lo <= len(args) <= hi:
            want = str(lo) if lo == hi else f"{lo} to {hi}"
            raise QueryError(f"{name}() takes {want} arguments, not {len(args)}", Loc(field=f"{at}.args"))
        return Func(name, args, loc=loc)
    if kind == "case":
        c = e.case
        if not len(c.whens):
            raise QueryError("CASE needs a WHEN", Loc(field=f"{at}.whens"))
        whens = []
        for i, w in enumerate(c.whens):
            for part in ("when", "then"):
                if not w.HasField(part):
                    raise QueryError(f"a WHEN needs {part}", Loc(field=f"{at}.whens[{i}].{part}"))
            whens.append((sub(w.when, f"whens[{i}].when"), sub(w.then, f"whens[{i}].then")))
        operand = sub(c.operand, "operand") if c.HasField("operand") else None
        default = sub(getattr(c, "default"), "default") if c.HasField("default") else None
        return Case(operand, tuple(whens), default, loc=loc)
    if kind == "cast":
        target = CAST_TYPES.get(e.cast.type.strip().lower(), "") or _decimal_cast(e.cast.type)
        if not target:
            raise QueryError(f"CAST to {e.cast.type[:40] or 'nothing'!r} is not supported", Loc(field=f"{at}.type"),
                             hint="the types are BIGINT, DOUBLE, VARCHAR, BOOLEAN and DECIMAL(p, s)")
        if not e.cast.HasField("arg"):
            raise QueryError("CAST needs an argument", Loc(field=f"{at}.arg"))
        return Cast(sub(e.cast.arg, "arg"), target, loc=loc)
    assert kind == "aggregate", kind
    return _aggregate(e.aggregate, at, depth)


def _decimal_cast(text: str) -> str:
    """"DECIMAL(p, s)" (or NUMERIC) as the type "decimal(p,s)"; "" when it is none or out of range."""
    import re
    m = re.fullmatch(r"\s*(?:decimal|numeric)\s*\(\s*(\d{1,2})\s*(?:,\s*(\d{1,2})\s*)?\)\s*", text.lower())
    if m is None:
        return ""
    p, s = int(m.group(1)), int(m.group(2) or 0)
    return f"decimal({p},{s})" if 1 <= p <= MAX_WIDTH and s <= p else ""


def _literal(v: pb.Value, loc: Loc) -> Lit:
    kind = v.WhichOneof("kind")
    if kind is None:
        return Lit(None, "null", loc=loc)
    if kind == "bool_value":
        return Lit(v.bool_value, "boolean", loc=loc)
    if kind == "string_value":
        return Lit(v.string_value, "string", loc=loc)
    if kind == "float64_value":
        return Lit(v.float64_value, "float64", loc=loc)
    from .convert_query import value_from_pb
    x = value_from_pb(v, loc.field or "literal")
    kind = getattr(x, "kind", None)
    if kind is not None:  # Value.timestamp_us / date_days: as Expr.timestamp_us / date_days
        return Lit(int(x), kind, loc=loc)
    if isinstance(x, Decimal):  # as the text's 1.5: a DECIMAL constant of its digits (1e3: a DOUBLE)
        dec = literal_type(format(x, "f")) if x.is_finite() and x.as_tuple().exponent <= 0 else None  # type: ignore[operator]
        return Lit(x, dec, loc=loc) if dec is not None else Lit(float(x), "float64", loc=loc)
    if not -(2**63) <= x <= 2**63 - 1:
        raise QueryError("an integer constant is out of the range of BIGINT", loc)
    return Lit(int(x), "int64", loc=loc)


def _op(o: pb.ExprOp, at: str, depth: int) -> Expr:
    op = " ".join(o.op.lower().split())
    op = "!=" if op == "<>" else op
    loc = Loc(field=at)
    args = [expr_from_pb(a, f"{at}.args[{i}]", depth + 1) for i, a in enumerate(o.args)]

    def arity(lo: int, hi: int | None = None) -> None:
        if len(args) < lo or (hi is not None and len(args) > hi):
            want = f"{lo}" if hi == lo else f"{lo} or more" if hi is None else f"{lo} to {hi}"
            raise QueryError(f"{op!r} takes {want} operands, not {len(args)}", Loc(field=f"{at}.args"))

    if op == "-" and len(args) == 1:
        a = args[0]
        if isinstance(a, Lit) and a.type in ("int64", "float64") and a.value is not None:
            return Lit(-a.value, a.type, loc=loc)  # as the text's -5: a negative constant
        return Neg(a, loc=loc)
    if op in _ARITH:
        arity(2, 2)
        return Arith(op, args[0], args[1], loc=loc)
    if op in _CMP:
        arity(2, 2)
        return Cmp(op, args[0], args[1], loc=loc)
    if op in ("and", "or"):
        arity(2)
        return Logic(op, tuple(args), loc=loc)
    if op == "not":
        arity(1, 1)
        return Not(args[0], loc=loc)
    if op in ("is null", "is not null"):
        arity(1, 1)
        return IsNull(args[0], op == "is not null", loc=loc)
    if op in ("is distinct from", "is not distinct from"):
        arity(2, 2)
        return IsDistinct(args[0], args[1], op == "is not distinct from", loc=loc)
    if op in ("like", "not like"):
        arity(2, 2)
        return Like(args[0], args[1], op == "not like", loc=loc)
    if op in ("between", "not between"):
        arity(3, 3)
        return Between(args[0], args[1], args[2], op == "not between", loc=loc)
    if op in ("in", "not in"):
        arity(2)
        return InList(args[0], tuple(args[1:]), op == "not in", loc=loc)
    if op == CONCAT_OPERATOR:
        arity(2)
        return Func(CONCAT_OPERATOR, tuple(args), loc=loc)
    raise QueryError(f"unknown operator {o.op[:20]!r}", Loc(field=f"{at}.op"),
                     hint="the operators are + - * / %, ||, = != < <= > >=, AND, OR, NOT, IS [NOT] NULL, "
                          "IS [NOT] DISTINCT FROM, [NOT] LIKE, [NOT] BETWEEN, [NOT] IN")


def _aggregate(a: pb.ExprAggregate, at: str, depth: int) -> Agg:
    name = a.function.lower()
    loc = Loc(field=at)
    if name not in AGGREGATES:
        if name in SQL_NAMES:
            raise QueryError(f"{name.upper()} cannot be combined with expressions yet", Loc(field=f"{at}.function"),
                             hint="use items with an aggregate over a column")
        raise QueryError(f"unknown aggregate {a.function[:40]!r}", Loc(field=f"{at}.function"),
                         hint="the aggregates are " + ", ".join(f.upper() for f in AGGREGATES))
    args = tuple(expr_from_pb(x, f"{at}.args[{i}]", depth + 1) for i, x in enumerate(a.args))
    if a.distinct and name != "count":
        raise QueryError(f"{name.upper()}(DISTINCT ...) is not supported", Loc(field=f"{at}.distinct"),
                         hint="COUNT(DISTINCT ...) is")
    if not args and not (name == "count" and not a.distinct):
        raise QueryError(f"{name.upper()} needs an argument", Loc(field=f"{at}.args"))
    if len(args) > 1 and not (name == "count" and a.distinct):
        raise QueryError(f"{name.upper()} takes one argument", Loc(field=f"{at}.args[1]"))
    q = None
    if name == "quantile":
        if not 0 <= a.q <= 1:  # (NaN too)
            raise QueryError("a quantile fraction is between 0 and 1", Loc(field=f"{at}.q"))
        q = Decimal(repr(a.q))  # the double's shortest decimal is the fraction meant (0.1 means 0.1)
        if not 0 <= q <= 1:
            raise QueryError("a quantile fraction is between 0 and 1", Loc(field=f"{at}.q"))
    elif a.q:
        raise QueryError(f"{name.upper()} takes no fraction", Loc(field=f"{at}.q"))
    if name == "median":
        name, q = "quantile", Decimal("0.5")
    filt = expr_from_pb(a.filter, f"{at}.filter", depth + 1) if a.HasField("filter") else None
    return Agg(name, args, a.distinct, filt, q, loc=loc)


# -- query -> proto ---------------------------------------------------------------------------------
def query_to_pb(q: Query) -> pb.StructuredQuery:
    """The structured form of a query with expressions (query_from_pb(query_to_pb(q)) == q)."""
    sel: Select = q.expr  # type: ignore[assignment]
    outer = _select_to_pb(sel)
    inner = _select_to_pb(sel.inner) if sel.inner is not None else None
    target = inner if inner is not None else outer
    from .convert_query import _window_length
    target.stream = q.stream
    if q.range is not None:
        target.range.CopyFrom(_window_length(q.range))
    if q.slide is not None:
        target.slide.CopyFrom(_window_length(q.slide))
    if q.as_of_slide is not None:
        target.as_of_slide = q.as_of_slide
    if inner is not None:
        outer.from_query.CopyFrom(inner)
    return outer


def _select_to_pb(s: Select) -> pb.StructuredQuery:
    out = pb.StructuredQuery(distinct=s.distinct)
    for it in s.items:
        out.select_exprs.add(expr=expr_to_pb(it.expr), alias=it.alias or "")
    if s.where is not None:
        out.where_expr.CopyFrom(expr_to_pb(s.where))
    out.group_by_exprs.extend(expr_to_pb(g) for g in s.group_by)
    if s.having is not None:
        out.having_expr.CopyFrom(expr_to_pb(s.having))
    for o in s.order_by:
        out.order_by_exprs.add(expr=expr_to_pb(o.expr), descending=o.descending, nulls=_NULLS_TO_PB[o.nulls_first])
    if s.limit is not None:
        out.limit = s.limit
    return out


def expr_to_pb(e: Expr) -> pb.Expr:
    """The Expr message of an expression tree (expr_from_pb inverts it)."""
    from .convert_query import value_to_pb
    if isinstance(e, Col):
        return pb.Expr(column=e.name)
    if isinstance(e, Star):
        return pb.Expr(column="*")
    if isinstance(e, Lit):
        if e.type == "interval":
            return pb.Expr(interval_ms=e.value)
        if e.type == "timestamp":
            return pb.Expr(timestamp_us=e.value)
        if e.type == "date":
            return pb.Expr(date_days=e.value)
        return pb.Expr(literal=value_to_pb(e.value))
    if isinstance(e, Now):
        return pb.Expr(call=pb.ExprCall(name="now"))
    if isinstance(e, Neg):
        return _op_pb("-", e.arg)
    if isinstance(e, (Arith, Cmp)):
        return _op_pb(e.op, e.left, e.right)
    if isinstance(e, Logic):
        return _op_pb(e.op, *e.parts)
    if isinstance(e, Not):
        return _op_pb("not", e.arg)
    if isinstance(e, IsNull):
        return _op_pb("is not null" if e.negate else "is null", e.arg)
    if isinstance(e, IsDistinct):
        return _op_pb("is not distinct from" if e.negate else "is distinct from", e.left, e.right)
    if isinstance(e, Like):
        return _op_pb("not like" if e.negate else "like", e.arg, e.pattern)
    if isinstance(e, Between):
        return _op_pb("not between" if e.negate else "between", e.arg, e.low, e.high)
    if isinstance(e, InList):
        return _op_pb("not in" if e.negate else "in", e.arg, *e.values)
    if isinstance(e, Case):
        c = pb.ExprCase(whens=[pb.ExprWhen(when=expr_to_pb(w), then=expr_to_pb(r)) for w, r in e.whens])
        if e.operand is not None:
            c.operand.CopyFrom(expr_to_pb(e.operand))
        if e.default is not None:
            getattr(c, "default").CopyFrom(expr_to_pb(e.default))
        return pb.Expr(case=c)
    if isinstance(e, Cast):
        from windowstore.store.expr import _SQL_TYPE
        return pb.Expr(cast=pb.ExprCast(arg=expr_to_pb(e.arg), type=_SQL_TYPE.get(e.type) or e.type.upper()))
    if isinstance(e, Func) and e.name == CONCAT_OPERATOR:
        return _op_pb(CONCAT_OPERATOR, *e.args)
    if isinstance(e, Func):
        return pb.Expr(call=pb.ExprCall(name=e.name, args=[expr_to_pb(a) for a in e.args]))
    if isinstance(e, Agg):
        a = pb.ExprAggregate(function=e.name, args=[expr_to_pb(x) for x in e.args], distinct=e.distinct,
                             q=float(e.q) if e.q is not None else 0.0)
        if e.filter is not None:
            a.filter.CopyFrom(expr_to_pb(e.filter))
        return pb.Expr(aggregate=a)
    raise QueryError(f"{type(e).__name__} has no structured form: send the query as text", e.loc)


def _op_pb(op: str, *args: Expr) -> pb.Expr:
    return pb.Expr(op=pb.ExprOp(op=op, args=[expr_to_pb(a) for a in args]))
