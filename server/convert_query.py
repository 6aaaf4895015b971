"""Structured queries between the proto API and the core's query.Query and query.JoinQuery
(syntax only: the binder checks names, types and lengths), with the spellings of aggregate
functions and length units on the wire, and the Value conversions queries and answers share.
Pure functions; it must not bind or plan a query (store/ does).
"""
from __future__ import annotations

import re
from dataclasses import replace
from decimal import Decimal

from windowstore.store import InvalidInput, Loc, QueryError
from windowstore.store.cumulative import CumulativeShape
from windowstore.store.exact import INT64_MAX, INT64_MIN
from windowstore.store.expr_temporal import DateLiteral, TimestampLiteral, in_text_range, typed_literal
from windowstore.store.functions import FUNCTIONS
from windowstore.store.parser import MAX_NUMBER_LENGTH
from windowstore.store.query import (OPS, Aggregate, Band, Equal, HavingTest, JoinQuery, KeyColumn, Logical, OfTotal,
                                     OrderBy, Predicate, Query, Range, Source)
from windowstore.v1 import windowstore_pb2 as pb

from . import convert_expr, convert_window

# An aggregate travels as its AggregateFunction value where the enum has one (AGGREGATE_FUNCTION_ + its
# registered name in upper case), else by name in Aggregate.function_name: the registry
# (store/functions.py FUNCTIONS) is the list of functions, the enum only an older spelling of some.
_FUNC_PREFIX = "AGGREGATE_FUNCTION_"
PB_TO_FUNC = {v.number: v.name[len(_FUNC_PREFIX):].lower() for v in pb.AggregateFunction.DESCRIPTOR.values if v.number}
FUNC_TO_PB = {name: number for number, name in PB_TO_FUNC.items()}
UNIT_TO_PB = {"ms": pb.LENGTH_UNIT_MS, "subwindows": pb.LENGTH_UNIT_SUBWINDOWS, "rows": pb.LENGTH_UNIT_ROWS}
PB_TO_UNIT = {v: k for k, v in UNIT_TO_PB.items()}


# -- queries (syntax only: the binder checks names, types and lengths) -----------------------------------
_NUMBER = re.compile(r"-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_INT128_MIN, _INT128_MAX = -(2**127), 2**127 - 1


_TEMPORAL_KINDS = {"timestamp_us": "timestamp", "date_days": "date"}  # pb.Value kind -> the constant's SQL type
_KIND_OF = {typ: kind for kind, typ in _TEMPORAL_KINDS.items()}


def value_from_pb(v: pb.Value, where: str = "value"):
    kind = v.WhichOneof("kind")
    if kind is None:
        raise QueryError("a comparison value is null", Loc(field=where))
    if kind == "int128_value":
        return v.int128_value.high * 2**64 + v.int128_value.low
    if kind == "decimal_value":
        text = v.decimal_value
        if len(text) > MAX_NUMBER_LENGTH or not _NUMBER.fullmatch(text):
            raise QueryError(f"decimal_value {text[:40]!r} is not a decimal number", Loc(field=where))
        return Decimal(text) if any(ch in text for ch in ".eE") else int(text)
    if kind in _TEMPORAL_KINDS:  # a TIMESTAMP or DATE constant keeps its type (the column meets it as DuckDB does)
        value = getattr(v, kind)
        if not in_text_range(_TEMPORAL_KINDS[kind], value):
            raise QueryError(f"{kind} {value} is beyond the years 1 to 9999", Loc(field=where))
        return typed_literal(_TEMPORAL_KINDS[kind], value)
    return getattr(v, kind)


def value_to_pb(x) -> pb.Value:
    """An answer value or a query literal; integers beyond int64 travel exactly; NULL: no field set."""
    v = pb.Value()
    set_value(v, x)
    return v


def add_value(values, x) -> None:
    """value_to_pb appended to a repeated Value field. An answer's common values (an int64, a
    float, a string, NULL) are set as the Value is added, in one call: an answer encodes a value
    per cell, and adding an empty Value then setting its field cost a third more (docs/performance.md,
    where a query's time goes). Any other value as set_value sets it."""
    t = type(x)
    if t is int and INT64_MIN <= x <= INT64_MAX:
        values.add(int64_value=x)
    elif t is float:
        values.add(float64_value=x)
    elif t is str:
        values.add(string_value=x)
    elif x is None:
        values.add()
    else:
        set_value(values.add(), x)


def set_value(v: pb.Value, x) -> None:
    """value_to_pb into an existing (empty) Value."""
    if x is None:
        return
    if isinstance(x, bool):
        v.bool_value = x
    elif isinstance(x, (TimestampLiteral, DateLiteral)):  # a query constant: its type travels with it
        setattr(v, _KIND_OF[x.kind], int(x))
    elif isinstance(x, str):
        v.string_value = x
    elif isinstance(x, float):
        v.float64_value = x
    elif isinstance(x, int):
        if INT64_MIN <= x <= INT64_MAX:
            v.int64_value = x
        elif _INT128_MIN <= x <= _INT128_MAX:
            v.int128_value.high, v.int128_value.low = x >> 64, x & (2**64 - 1)
        else:
            v.decimal_value = str(x)
    elif isinstance(x, Decimal):
        v.decimal_value = str(x)
    else:
        v.float64_value = float(x)


def _length(w: pb.WindowLength, where: str) -> Range | None:
    if w.value == 0 and w.unit == pb.LENGTH_UNIT_UNSPECIFIED:
        return None
    if w.unit not in PB_TO_UNIT or w.value == 0:
        raise QueryError("a window length needs a positive value and a unit", Loc(field=where))
    return Range(int(w.value), PB_TO_UNIT[w.unit], loc=Loc(field=where))


_WITH_Q = ("quantile", "approx_quantile", "approx_top_k")  # q: the fraction, or APPROX_TOP_K's k


def _aggregate(a: pb.Aggregate, where: str) -> Aggregate:
    if a.function_name:
        func = a.function_name
        if func not in FUNCTIONS:
            raise QueryError(f"unknown aggregate function {func!r}", Loc(field=f"{where}.function_name"))
        if a.func and PB_TO_FUNC.get(a.func) != func:
            raise QueryError(f"func and function_name name different aggregates ({func!r})",
                             Loc(field=f"{where}.function_name"))
    elif a.func not in PB_TO_FUNC:
        raise QueryError("an aggregate needs a function", Loc(field=f"{where}.func"))
    else:
        func = PB_TO_FUNC[a.func]
    if not a.column and func != "count":
        raise QueryError(f"{func.upper()} needs a column", Loc(field=f"{where}.column"))
    # q travels as a double; its shortest decimal is the fraction meant (0.1 means 0.1)
    return Aggregate(func, a.column or None, Decimal(repr(a.q)) if func in _WITH_Q else None, a.alias or None,
                     loc=Loc(field=f"{where}.column" if a.column else where))


def _aggregate_to_pb(a: Aggregate) -> pb.Aggregate:
    number = FUNC_TO_PB.get(a.func)
    return pb.Aggregate(func=number or pb.AGGREGATE_FUNCTION_UNSPECIFIED, function_name="" if number else a.func,
                        column=a.column or "", q=float(a.q or 0), alias=a.alias or "")


def query_from_pb(q: pb.StructuredQuery) -> Query | JoinQuery:
    """The structured query as query.Query (or query.JoinQuery when it has sources), each part
    located by its field path."""
    if convert_expr.has_expressions(q):  # select_exprs and the rest: a query with expressions
        return convert_expr.query_from_pb(q)
    if len(q.sources):
        return join_from_pb(q)
    if not q.stream:
        raise QueryError("a query needs a stream", Loc(field="stream"))
    items, conjunctions, order = _select_from_pb(q)
    group_by, group_by_loc, more, more_locs = _group_by_from_pb(q)
    return Query(q.stream, tuple(items), tuple(conjunctions), group_by, tuple(order),
                 int(q.limit) if q.HasField("limit") else None, _length(q.range, "range"), _length(q.slide, "slide"),
                 tuple(_aggregate(a, f"outer[{i}]") for i, a in enumerate(q.outer)), q.approximate,
                 loc=Loc(field="items"), stream_loc=Loc(field="stream"), group_by_loc=group_by_loc,
                 as_of_slide=int(q.as_of_slide) if q.HasField("as_of_slide") else None,
                 as_of_loc=Loc(field="as_of_slide"), group_by_more=more, group_by_more_locs=more_locs,
                 having=_having_from_pb(q.having, "having") if q.HasField("having") else None, distinct=q.distinct,
                 shape=_shape_from_pb(q))


def _shape_from_pb(q: pb.StructuredQuery):
    """The session, ROWS or PARTITION BY window (window_shapes.WindowShape), or the landmark or
    CUMULATE window (cumulative.CumulativeShape), of a query, or None."""
    shapes = [name for name in ("window_shape", "landmark", "cumulate") if q.HasField(name)]
    if not shapes:
        return None
    if _length(q.range, "range") is not None:
        raise QueryError(f"set range or {shapes[0]}, not both", Loc(field="range"))
    if len(shapes) > 1:
        raise QueryError(f"set {shapes[0]} or {shapes[1]}, not both", Loc(field=shapes[1]))
    if shapes[0] != "window_shape":
        return convert_window.cumulative_from_pb(q)
    return convert_window.shape_from_pb(q.window_shape)


_MAX_HAVING_DEPTH = 32


def _having_from_pb(c: pb.HavingCondition, where: str, depth: int = 0):
    """A HAVING condition (query.HavingTest / query.Logical), each part located by its field path."""
    if depth > _MAX_HAVING_DEPTH:
        raise QueryError(f"a HAVING condition nests more than {_MAX_HAVING_DEPTH} deep", Loc(field=where))
    kind = c.WhichOneof("condition")
    if kind in ("all_of", "any_of"):
        parts = getattr(c, kind).parts
        if len(parts) < 2:
            raise QueryError(f"{kind} needs two or more parts", Loc(field=f"{where}.{kind}.parts"))
        return Logical("and" if kind == "all_of" else "or",
                       tuple(_having_from_pb(p, f"{where}.{kind}.parts[{i}]", depth + 1) for i, p in enumerate(parts)),
                       loc=Loc(field=f"{where}.{kind}"))
    if kind == "negate":
        return Logical("not", (_having_from_pb(c.negate, f"{where}.negate", depth + 1),), loc=Loc(field=f"{where}.negate"))
    if kind != "test":
        raise QueryError("a HAVING condition needs test, all_of, any_of or negate", Loc(field=where))
    t, at = c.test, f"{where}.test"
    which = t.WhichOneof("operand")
    operand: Aggregate | str
    if which == "aggregate":
        operand, loc = _aggregate(t.aggregate, f"{at}.aggregate"), Loc(field=f"{at}.aggregate")
    elif which == "name" and t.name:
        operand, loc = t.name, Loc(field=f"{at}.name")
    else:
        raise QueryError("a HAVING test needs an aggregate or a name", Loc(field=f"{at}.operand"))
    op = "!=" if t.op.strip().lower() == "<>" else " ".join(t.op.lower().split())
    if op not in OPS:
        raise QueryError(f"unknown comparison {t.op[:20]!r} (one of {', '.join(OPS)})", Loc(field=f"{at}.op"))
    values = [value_from_pb(v, f"{at}.values[{i}]") for i, v in enumerate(t.values)]
    if t.of_total:  # APPROXIMATE threshold: A > fraction * TOTAL
        if op in ("in", "not in", "is null", "is not null") or len(values) != 1:
            raise QueryError("of_total takes a comparison with one value (the fraction)", Loc(field=f"{at}.of_total"))
        return HavingTest(operand, op, OfTotal(values[0]), loc=loc)
    if op in ("in", "not in"):
        if not values:
            raise QueryError(f"{op.upper()} needs at least one value", Loc(field=f"{at}.values"))
        return HavingTest(operand, op, tuple(values), loc=loc)
    if op in ("is null", "is not null"):
        if values:
            raise QueryError(f"{op.upper()} takes no value", Loc(field=f"{at}.values"))
        return HavingTest(operand, op, None, loc=loc)
    if len(values) != 1:
        raise QueryError(f"{op} needs exactly one value", Loc(field=f"{at}.values"))
    return HavingTest(operand, op, values[0], loc=loc)


def _having_to_pb(c) -> pb.HavingCondition:
    if isinstance(c, Logical):
        if c.op == "not":
            return pb.HavingCondition(negate=_having_to_pb(c.parts[0]))
        parts = pb.HavingConditions(parts=[_having_to_pb(p) for p in c.parts])
        return pb.HavingCondition(**{"all_of" if c.op == "and" else "any_of": parts})
    values = c.value if c.op in ("in", "not in") else () if c.op in ("is null", "is not null") else (c.value,)
    of_total = isinstance(c.value, OfTotal)
    if of_total:
        values = (c.value.fraction,)
    test = pb.HavingTest(op=c.op, values=[value_to_pb(v) for v in values], of_total=of_total)
    if isinstance(c.operand, Aggregate):
        test.aggregate.CopyFrom(_aggregate_to_pb(c.operand))
    else:
        test.name = c.operand
    return pb.HavingCondition(test=test)


def _group_by_from_pb(q: pb.StructuredQuery) -> tuple[str | None, Loc, tuple[str, ...], tuple[Loc, ...]]:
    """(first GROUP BY column or None, its location, the further columns, their locations) from
    group_by (one column) or group_by_columns (several)."""
    columns = list(q.group_by_columns)
    if not columns:
        return q.group_by or None, Loc(field="group_by"), (), ()
    if q.group_by:
        raise QueryError("set group_by (one column) or group_by_columns, not both", Loc(field="group_by_columns"))
    for i, c in enumerate(columns):
        if not c:
            raise QueryError("a GROUP BY column needs a name", Loc(field=f"group_by_columns[{i}]"))
    locs = tuple(Loc(field=f"group_by_columns[{i}]") for i in range(len(columns)))
    return columns[0], locs[0], tuple(columns[1:]), locs[1:]


def join_from_pb(q: pb.StructuredQuery) -> JoinQuery:
    """A structured join: sources in FROM order with their ON conditions; the select list, filters,
    grouping and ordering as for one stream, with columns named "alias.col"."""
    if q.distinct or q.HasField("having"):
        name = "distinct" if q.distinct else "having"
        raise QueryError(f"{'SELECT DISTINCT' if q.distinct else 'HAVING'} is not available for joins", Loc(field=name))
    for name in ("stream", "approximate"):
        if getattr(q, name):
            raise QueryError(f"a join names its streams in sources, not in {name}", Loc(field=name))
    if q.HasField("as_of_slide"):
        raise QueryError("AS OF SLIDE is not available for joins", Loc(field="as_of_slide"))
    for name in ("window_shape", "landmark", "cumulate"):
        if q.HasField(name):
            raise QueryError("a session, ROWS, PARTITION BY, landmark or CUMULATE window is not available for joins",
                             Loc(field=name))
    for name in ("range", "slide"):
        if _length(getattr(q, name), name) is not None:
            raise QueryError(f"a join's {name.upper()} is per source (sources[i].{name})", Loc(field=name))
    sources = []
    for i, src in enumerate(q.sources):
        where = f"sources[{i}]"
        if not src.stream:
            raise QueryError("a join source needs a stream", Loc(field=f"{where}.stream"))
        on: list[Equal | Band] = []
        for ci, c in enumerate(src.on):
            at = f"{where}.on[{ci}]"
            kind = c.WhichOneof("condition")
            if kind == "equal":
                on.append(Equal(c.equal.left, c.equal.right, loc=Loc(field=f"{at}.equal.left"),
                                right_loc=Loc(field=f"{at}.equal.right")))
            elif kind == "band":
                b = c.band
                on.append(Band(b.column, b.base, b.low if b.HasField("low") else None,
                               b.high if b.HasField("high") else None, loc=Loc(field=f"{at}.band.column"),
                               base_loc=Loc(field=f"{at}.band.base")))
            else:
                raise QueryError("a join condition needs equal or band", Loc(field=at))
        if i == 0 and on:
            raise QueryError("the first source has no ON clause: put its conditions on a later source",
                             Loc(field=f"{where}.on"))
        sources.append(Source(src.stream, src.alias or None, _length(src.range, f"{where}.range"),
                              _length(src.slide, f"{where}.slide"), tuple(on), loc=Loc(field=where),
                              stream_loc=Loc(field=f"{where}.stream")))
    items, conjunctions, order = _select_from_pb(q)
    group_by, group_by_loc, more, _ = _group_by_from_pb(q)
    if more:
        raise QueryError("a join's GROUP BY takes one column", Loc(field="group_by_columns[1]"))
    within = None
    if q.HasField("within"):  # WITHIN 0 ms is a length too (simultaneous events)
        if q.within.unit not in PB_TO_UNIT:
            raise QueryError("within needs a unit (LENGTH_UNIT_MS)", Loc(field="within"))
        within = Range(int(q.within.value), PB_TO_UNIT[q.within.unit], loc=Loc(field="within"))
    return JoinQuery(tuple(sources), tuple(items), tuple(conjunctions), within,
                     group_by, tuple(order), int(q.limit) if q.HasField("limit") else None,
                     tuple(_aggregate(a, f"outer[{i}]") for i, a in enumerate(q.outer)),
                     loc=Loc(field="items"), group_by_loc=group_by_loc)


def _select_from_pb(q: pb.StructuredQuery) -> tuple[list, list, list]:
    """The select items, WHERE (OR of ANDs) and ORDER BY of a structured query."""
    items: list[KeyColumn | Aggregate] = []
    for i, it in enumerate(q.items):
        kind = it.WhichOneof("item")
        where = f"items[{i}]"
        if kind == "key_column":
            items.append(KeyColumn(it.key_column, it.alias or None, loc=Loc(field=f"{where}.key_column")))
        elif kind == "aggregate":
            agg = _aggregate(it.aggregate, f"{where}.aggregate")
            items.append(replace(agg, alias=it.alias or agg.alias))
        else:
            raise QueryError("a select item needs a key column or an aggregate", Loc(field=where))
    conjunctions = []
    for ci, conj in enumerate(q.where):
        preds = []
        for pi, p in enumerate(conj.predicates):
            where = f"where[{ci}].predicates[{pi}]"
            op = "!=" if p.op.strip().lower() == "<>" else " ".join(p.op.lower().split())
            if op not in OPS:
                raise QueryError(f"unknown comparison {p.op[:20]!r} (one of {', '.join(OPS)})", Loc(field=f"{where}.op"))
            values = [value_from_pb(v, f"{where}.values[{vi}]") for vi, v in enumerate(p.values)]
            loc = Loc(field=f"{where}.column")
            if op in ("in", "not in"):
                if not values:
                    raise QueryError(f"{op.upper()} needs at least one value", Loc(field=f"{where}.values"))
                preds.append(Predicate(p.column, op, tuple(values), loc=loc))
            elif op in ("is null", "is not null"):
                if values:
                    raise QueryError(f"{op.upper()} takes no value", Loc(field=f"{where}.values"))
                preds.append(Predicate(p.column, op, None, loc=loc))
            else:
                if len(values) != 1:
                    raise QueryError(f"{op} needs exactly one value", Loc(field=f"{where}.values"))
                preds.append(Predicate(p.column, op, values[0], loc=loc))
        if preds:
            conjunctions.append(tuple(preds))
    order = []
    for i, o in enumerate(q.order_by):
        loc = Loc(field=f"order_by[{i}]")
        if o.name:
            order.append(OrderBy(descending=o.descending, name=o.name, loc=loc))
        elif o.HasField("aggregate"):
            order.append(OrderBy(descending=o.descending, expr=_aggregate(o.aggregate, f"order_by[{i}].aggregate"),
                                 loc=loc))
        else:
            order.append(OrderBy(int(o.item), o.descending, loc=loc))
    return items, conjunctions, order


def _window_length(r: Range) -> pb.WindowLength:
    return pb.WindowLength(value=r.value, unit=UNIT_TO_PB[r.unit])


def query_to_pb(q: Query | JoinQuery) -> pb.StructuredQuery:
    """The structured form of a query (query_from_pb(query_to_pb(q)) == q)."""
    if getattr(q, "shape", None) is not None and (isinstance(q, JoinQuery) or q.expr is not None):
        raise InvalidInput("a SESSION, ROWS, PARTITION BY, landmark or CUMULATE window goes with a single-stream "
                           "query without expressions")
    if isinstance(q, JoinQuery):
        out = pb.StructuredQuery(group_by=q.group_by or "", outer=[_aggregate_to_pb(a) for a in q.outer])
        for src in q.sources:
            ps = out.sources.add(stream=src.stream, alias=src.alias or "")
            if src.range is not None:
                ps.range.CopyFrom(_window_length(src.range))
            if src.slide is not None:
                ps.slide.CopyFrom(_window_length(src.slide))
            for c in src.on:
                if isinstance(c, Equal):
                    ps.on.add(equal=pb.JoinEqual(left=c.left, right=c.right))
                elif not isinstance(c, Band):  # a timing condition (PROB(...) >= ct): text only
                    raise QueryError("a timing condition has no structured form: send the query as text", c.loc)
                else:
                    band = pb.JoinBand(column=c.column, base=c.base)
                    if c.low is not None:
                        band.low = c.low
                    if c.high is not None:
                        band.high = c.high
                    ps.on.add(band=band)
        if q.within is not None:
            out.within.CopyFrom(_window_length(q.within))
    else:
        if q.expr is not None:  # (expr_query.py) select_exprs and the Expr tree
            return convert_expr.query_to_pb(q)
        out = pb.StructuredQuery(stream=q.stream, approximate=q.approximate, outer=[_aggregate_to_pb(a) for a in q.outer])
        if q.group_by_more:  # several columns; one stays in the field every client knows
            out.group_by_columns.extend(q.group_columns)
        else:
            out.group_by = q.group_by or ""
        if q.as_of_slide is not None:
            out.as_of_slide = q.as_of_slide
        out.distinct = q.distinct
        if q.having is not None:
            out.having.CopyFrom(_having_to_pb(q.having))
        if isinstance(q.shape, CumulativeShape):
            convert_window.cumulative_to_pb(q.shape, out)
        elif q.shape is not None:
            out.window_shape.CopyFrom(convert_window.shape_to_pb(q.shape))
    for it in q.items:
        if isinstance(it, KeyColumn):
            out.items.append(pb.SelectItem(key_column=it.column, alias=it.alias or ""))
        else:
            out.items.append(pb.SelectItem(aggregate=_aggregate_to_pb(it)))
    for conj in q.where:
        out.where.append(pb.Conjunction(predicates=[
            pb.Predicate(column=p.column, op=p.op, values=[value_to_pb(v) for v in
                                                           (p.value if p.op in ("in", "not in") else  # type: ignore[attr-defined]  # IN's value: a tuple
                                                            () if p.op in ("is null", "is not null") else (p.value,))])
            for p in conj]))
    for o in q.order_by:
        if o.name is not None:
            out.order_by.append(pb.OrderBy(name=o.name, descending=o.descending))
        elif o.expr is not None:
            out.order_by.append(pb.OrderBy(aggregate=_aggregate_to_pb(o.expr), descending=o.descending))
        else:
            out.order_by.append(pb.OrderBy(item=o.item, descending=o.descending))
    if q.limit is not None:
        out.limit = q.limit
    for name in ("range", "slide") if isinstance(q, Query) else ():
        r = getattr(q, name)
        if r is not None:
            getattr(out, name).CopyFrom(_window_length(r))
    return out

