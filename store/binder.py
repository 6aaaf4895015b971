"""The binder: every semantic rule of a query, in one place, for the text and the structured form.

The parser (text) and the protobuf conversion (structured) only do syntax; both produce a
query.Query whose parts carry their location. `bind` checks it against a stream's schema and
window and returns a BoundQuery the planner executes:

- names: select items, WHERE, GROUP BY and the sub-query's columns must exist; a plain column in the
  select list must be a GROUP BY column;
- types: each aggregate function (functions.py) says which column types it takes and what it
  returns; GROUP BY takes one or more columns of any type but float64 (a column named twice counts
  once); literals compare exactly (see predicates.Comparison);
- ORDER BY: an ordinal, an output name (aliases and labels first, as SQL resolves them), a GROUP BY
  column, or an aggregate expression (computed even when it is not selected);
- HAVING: operands are aggregates (a hidden one is computed when not selected), GROUP BY columns,
  else output names; literals are checked against the operand's type and compare exactly
  (predicates.GroupFilter, SQL's three-valued logic);
- SELECT DISTINCT: bound as the GROUP BY of its columns (no aggregate, no GROUP BY, no HAVING);
- RANGE and SLIDE: in the window's unit, a multiple of a sub-window, at most the window;
- the sub-query: its outer aggregates take the inner query's output columns and their types;
- APPROXIMATE top k: only where per-sub-window top-k lists answer it (thesis 6.2).

Every error is a QueryError naming the position and token (text) or the field (structured form).

Joins of several streams' windows (query.JoinQuery) are bound by join_binder.bind_join, which
resolves names across the joined streams and reuses these rules (aggregates, literals, window
lengths, the outer sub-query) through this class.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, NoReturn

import numpy as np

from .errors import Loc, QueryError
from .exact import INT64_MAX, INT64_MIN
from . import approx, frequent_query
from .functions import FUNCTIONS, AggregateFunction
from .cumulative import CumulativeShape, bind_cumulative
from .hop import Hop, bind_hop, mentions_bounds
from .kinds import Clock
from .slicing import SlicedHop, bind_sliced, unaligned
from .temporal import Temporal, bind_temporal, mentions_temporal
from .expr_temporal import literal_in
from .predicates import COMPARE, Comparison, GroupFilter, exact_value, float_value, int_comparison
from .query import OPS, Aggregate, HavingTest, JoinQuery, KeyColumn, Logical, Query, Range
from .schema import Schema, decimal_type, type_kind
from .window import WindowSpec


@dataclass(frozen=True, eq=False)
class BoundAggregate:
    fn: AggregateFunction
    column: str | None
    input_type: str | None
    q: Decimal | None     # QUANTILE's fraction, exactly
    label: str
    type: str            # result type: int64, int128, float64 or string
    sketch: tuple[str, int] | None = None  # (kind, size) of the declared sketch answering it (approx.py)


@dataclass(frozen=True)
class OutputItem:
    label: str
    type: str
    agg: int | None      # index into BoundQuery.aggs; None: a GROUP BY key
    key: int = 0         # which GROUP BY key (index into BoundQuery.group_keys) when agg is None


@dataclass(frozen=True)
class KeyRef:
    """An ORDER BY on the i-th GROUP BY key of several (one key is ordered by as None)."""

    index: int


class AnswerColumns:
    """The answer's column labels and types, a part of BoundQuery and BoundJoin: the outer
    query's aggregates over a sub-query's rows where there is one, else the select list's items."""

    if TYPE_CHECKING:  # the bound query's fields it reads
        items: list[OutputItem]
        outer: list[tuple[BoundAggregate, int | None]]

    @property
    def columns(self) -> list[str]:
        return [a.label for a, _ in self.outer] if self.outer else [it.label for it in self.items]

    @property
    def types(self) -> list[str]:
        return [a.type for a, _ in self.outer] if self.outer else [it.type for it in self.items]


@dataclass
class BoundQuery(AnswerColumns):
    query: Query
    n_q: int                              # sub-windows read
    every: int | None                     # SLIDE in sub-windows (periodic queries)
    group_by: str | None
    group_type: str | None
    items: list[OutputItem]
    aggs: list[BoundAggregate]            # the select list's aggregates, then hidden ORDER BY ones
    where: tuple[tuple["Comparison", ...], ...]
    order: list[tuple[int | KeyRef | None, bool]]  # (agg index, None for the only key, or KeyRef; descending)
    limit: int | None
    outer: list[tuple[BoundAggregate, int | None]] = field(default_factory=list)  # (agg, item index)
    approximate: bool = False
    projection: list[str] = field(default_factory=list)  # a plain projection: the column of each item
    projection_order: list[tuple[int, bool]] = field(default_factory=list)  # a projection's ORDER BY: (item, desc)
    group_keys: list[str] = field(default_factory=list)   # every GROUP BY column (group_by is the first)
    group_types: list[str] = field(default_factory=list)  # their types
    having: "GroupFilter | None" = None                   # HAVING
    hop: "Hop | SlicedHop | None" = None  # answered per window, with its bounds as columns (hop.py, slicing.py)
    temporal: "Temporal | None" = None  # over coalesced intervals (temporal.py)
    approximate_spec: "frequent_query.Approximate | None" = None  # APPROXIMATE: what it asks


def bind(query: Query, schema: Schema, spec: WindowSpec, periodic: bool = False) -> BoundQuery:
    """`periodic`: bound for registration (a query answered per window then answers the newest)."""
    if isinstance(query, JoinQuery):  # one stream's schema cannot bind a join: refuse it, do not crash
        raise QueryError("a join of several streams where a single-stream query is expected", query.loc)
    return _Binder(query, schema, spec, periodic).bind()


def _nearest(value: int, unit: int, n: int, word: str) -> str:
    """The exact lengths nearest a length that is not a whole number of sub-windows (never rounded
    to silently: the query is refused and told them)."""
    lo, hi = value // unit * unit, (value // unit + 1) * unit
    exact = [x for x in (lo, hi) if unit <= x <= n * unit]
    return f" (nearest exact: {' or '.join(f'{x} {word}' for x in exact)})" if exact else ""


_TINY_Q = Decimal("1e-30")  # beyond every int64 and float64: stands for any larger magnitude


# -- the binder ----------------------------------------------------------------------------------------
class _Binder:
    def __init__(self, query: Query, schema: Schema, spec: WindowSpec, periodic: bool = False):
        self.q, self.schema, self.spec = query, schema, spec
        self.periodic = periodic
        self.types = schema.types
        self.distinct = False  # binding SELECT DISTINCT as its GROUP BY (bind_distinct)

    def fail(self, message: str, loc: Loc | None, column: str | None = None) -> NoReturn:
        raise QueryError(message, loc or self.q.loc, column)

    def column_type(self, column: str | None, loc: Loc | None) -> str:
        typ = self.types.get(column)  # type: ignore[arg-type]  # None (no column) is not found
        if typ is None:
            self.fail(f"unknown column {column!r} (the stream has {', '.join(self.schema.names)})", loc, column)
        return typ

    def bind(self) -> BoundQuery:
        q = self.q
        if isinstance(q.shape, CumulativeShape):  # RANGE UNBOUNDED, CUMULATE (cumulative.py)
            return bind_cumulative(self, q, self.periodic)
        if q.shape is not None:  # SESSION, ROWS, PARTITION BY windows (window_shapes.py)
            from .window_shapes import bind_shape
            return bind_shape(self, q, self.periodic)
        if unaligned(q, self.spec) and self.spec.clock == Clock.EVENT:  # windows cut sub-windows (slicing.py)
            return bind_sliced(self, q, self.periodic, mentions_bounds(q, self.types))
        if mentions_bounds(q, self.types):
            return bind_hop(self, q, self.periodic)
        if mentions_temporal(q):  # temporal functions over coalesced intervals
            return bind_temporal(self, q, self.periodic)
        if q.distinct:
            return self.bind_distinct()
        group_keys, group_types = [], []
        more_locs = q.group_by_more_locs or (None,) * len(q.group_by_more)
        for column, loc in zip(q.group_columns, (q.group_by_loc, *more_locs)):
            typ = self.column_type(column, loc)
            if typ == "float64":
                self.fail(f"GROUP BY column {column!r} must be string or int64, not float64", loc, column)
            if column not in group_keys:
                group_keys.append(column)
                group_types.append(typ)
        group_type = group_types[0] if group_types else None
        items, aggs = [], []
        if q.group_by is None and not q.outer and all(isinstance(it, KeyColumn) for it in q.items):
            return self.bind_projection()
        for it in q.items:
            if isinstance(it, KeyColumn):
                typ = self.column_type(it.column, it.loc)
                if it.column not in group_keys:
                    which = "a GROUP BY column" if len(group_keys) > 1 else "the GROUP BY column"
                    self.fail(f"column {it.column!r} must be aggregated or be {which}", it.loc, it.column)
                items.append(OutputItem(it.label, typ, None, group_keys.index(it.column)))
            else:
                aggs.append(self.aggregate(it, lambda c, loc: self.column_type(c, loc)))
                items.append(OutputItem(it.label, aggs[-1].type, len(aggs) - 1))
        if not aggs:
            if not self.distinct:
                self.fail("select at least one aggregate", q.loc)
            aggs.append(self.aggregate(Aggregate("count"), None))  # hidden: the paths drop keys of no row alike
        where = tuple(tuple(self.predicate(p) for p in conj) for conj in q.where)
        order = [self.order_item(o, items, aggs, group_keys) for o in q.order_by]
        having = self.having(q.having, items, aggs, group_keys, group_types) \
            if q.having is not None and not q.approximate else None  # (APPROXIMATE: frequent_query.bind)
        n_q = self.length(q.range, "RANGE") if q.range is not None else self.spec.subwindows
        every = self.length(q.slide, "SLIDE") if q.slide is not None else None
        self.check_as_of(every)
        bound = BoundQuery(q, n_q, every, q.group_by, group_type, items, aggs, where, order, q.limit,
                           group_keys=group_keys, group_types=group_types, having=having)
        if q.outer:
            bound.outer = self.outer(items)
        if q.approximate:
            self.check_approximate(bound)
            bound.approximate = True
        approx.check_query(q, bound, self.fail)
        return bound

    def bind_distinct(self) -> BoundQuery:
        """SELECT DISTINCT cols: the query grouped by its selected columns (in the order selected),
        with no aggregate; ORDER BY and LIMIT as for any grouped query."""
        q = self.q
        for it in q.items:
            if isinstance(it, Aggregate):
                self.fail("SELECT DISTINCT with an aggregate is not supported", it.loc)
        if q.group_by is not None:
            self.fail("SELECT DISTINCT with GROUP BY is not supported", q.group_by_loc)
        if q.having is not None:
            self.fail("SELECT DISTINCT with HAVING is not supported", q.having.loc)
        for o in q.order_by:
            if o.expr is not None:
                self.fail("SELECT DISTINCT orders by its selected columns, not by an aggregate", o.loc)
        for it in q.items:
            if self.column_type(it.column, it.loc) == "float64":
                self.fail(f"SELECT DISTINCT of float64 column {it.column!r} is not supported", it.loc, it.column)
        grouped = replace(q, distinct=False, group_by=q.items[0].column, group_by_loc=q.items[0].loc,
                          group_by_more=tuple(it.column for it in q.items[1:]),  # type: ignore[misc]  # DISTINCT selects columns (checked above)
                          group_by_more_locs=tuple(it.loc for it in q.items[1:]))  # type: ignore[misc]  # the locs of those columns
        binder = _Binder(grouped, self.schema, self.spec)
        binder.distinct = True
        bound = binder.bind()
        bound.query = q
        return bound

    def bind_projection(self) -> BoundQuery:
        """SELECT col, ... without aggregates: the window's rows themselves (the selected columns), in
        slide order, then in the order they were appended; ORDER BY selected columns (by name or
        ordinal; NULLs last both ways, ties in that order) and LIMIT as for any query."""
        q = self.q
        if q.approximate:
            self.fail("APPROXIMATE needs an aggregate", q.loc)
        if q.having is not None:
            self.fail("HAVING needs an aggregate or GROUP BY", q.having.loc)
        items = [OutputItem(it.label, self.column_type(it.column, it.loc), None) for it in q.items]
        where = tuple(tuple(self.predicate(p) for p in conj) for conj in q.where)
        n_q = self.length(q.range, "RANGE") if q.range is not None else self.spec.subwindows
        every = self.length(q.slide, "SLIDE") if q.slide is not None else None
        self.check_as_of(every)
        order = [self.projection_order_item(o, items) for o in q.order_by]
        return BoundQuery(q, n_q, every, None, None, items, [], where, [], q.limit,
                          projection=[it.column for it in q.items], projection_order=order)  # type: ignore[misc]  # a projection selects columns

    def projection_order_item(self, o, items: list[OutputItem]) -> tuple[int, bool]:
        if o.expr is not None:
            self.fail("a projection (a SELECT without aggregates) cannot ORDER BY an aggregate", o.loc)
        if o.name is not None:
            hits = [i for i, it in enumerate(items) if it.label == o.name]
            if not hits:  # a selected column under an alias is found by its column name too
                hits = [i for i, it in enumerate(self.q.items) if it.column == o.name]
            if not hits:
                if o.name in self.types:
                    self.fail(f"ORDER BY {o.name!r}: a projection orders by its selected columns", o.loc, o.name)
                self.fail(f"ORDER BY {o.name!r} names no select item or column", o.loc)
            if len({self.q.items[i].column for i in hits}) > 1:
                self.fail(f"ORDER BY {o.name!r} is ambiguous: {len(hits)} select items are named so", o.loc)
            return hits[0], o.descending
        if o.item is None or not 0 <= o.item < len(items):
            n = "?" if o.item is None else o.item + 1
            self.fail(f"ORDER BY {n} is not a select item (1..{len(items)})", o.loc)
        return o.item, o.descending

    def check_as_of(self, every: int | None) -> None:
        q = self.q
        if q.as_of_slide is not None:
            if every is not None:
                self.fail("AS OF SLIDE reads one past window: a periodic query (SLIDE) cannot take it", q.as_of_loc)
            if q.as_of_slide < 0:
                self.fail(f"AS OF SLIDE must name a slide (0, 1, 2, ...), got {q.as_of_slide}", q.as_of_loc)

    def aggregate(self, a: Aggregate, column_type) -> BoundAggregate:
        fn = FUNCTIONS.get(a.func)
        if fn is None:
            self.fail(f"unknown aggregate function {a.func!r}", a.loc)
        text = "COUNT(DISTINCT)" if a.func == "count_distinct" else a.func.upper()
        if a.column is None:
            if a.func != "count":
                self.fail(f"{text} needs a column", a.loc)
            typ = None
        else:
            typ = column_type(a.column, a.loc)
            if type_kind(typ) not in fn.inputs:
                kinds = "a numeric" if "string" not in fn.inputs else "an"
                self.fail(f"{text} needs {kinds} column; {a.column!r} is {typ}", a.loc, a.column)
        q = None
        if a.func == "quantile":
            q = a.q if a.q is None or isinstance(a.q, Decimal) else Decimal(repr(float(a.q)))
            if q is None or not q.is_finite() or not 0 <= q <= 1:
                self.fail(f"quantile fraction must be between 0 and 1, got {str(a.q)[:40]}", a.loc)
            if 0 < q < _TINY_Q:
                q = _TINY_Q  # the same rank (1) for any window of fewer than 10^30 values; no huge exact powers
        if approx.is_sketch(fn):  # answered from the column's declared sketch
            if not hasattr(self, "spec"):  # a join's binder (join_binder.py): no one stream's sketches
                self.fail(f"{a.func.upper()} is answered from one stream's sketches: a join cannot take it", a.loc)
            q = approx.parameter(a.func, a.q, self.fail, a.loc)
            sketch = approx.declared_sketch(fn, a.column, self.spec, self.fail, a.loc) if column_type is not None \
                and a.column in self.types and self.types[a.column] == typ else None
            return BoundAggregate(fn, a.column, typ, q, a.label, fn.result_type(typ), sketch)
        return BoundAggregate(fn, a.column, typ, q, a.label, fn.result_type(typ))

    def predicate(self, p) -> Comparison:
        typ = self.column_type(p.column, p.loc)
        if p.op not in OPS:
            self.fail(f"unknown comparison {p.op!r}", p.loc)
        if p.op in ("is null", "is not null"):
            if p.value is not None:
                self.fail(f"{p.op.upper()} takes no value", p.loc, p.column)
            return Comparison(p.column, typ, p.op, None)
        if typ == "boolean":
            listed = p.op in ("in", "not in")
            values = p.value if listed else (p.value,)
            if listed and (not isinstance(values, tuple) or not values):
                self.fail(f"{p.op.upper()} needs a list of values", p.loc)
            if not all(isinstance(v, bool) for v in values):
                bad = next(v for v in values if not isinstance(v, bool))
                self.fail(f"column {p.column!r} is boolean; cannot compare it with {bad!r} (use TRUE or FALSE)",
                          p.loc, p.column)
            if listed:
                return Comparison(p.column, typ, p.op, np.array(sorted({int(v) for v in values}), dtype=np.int8))
            return Comparison(p.column, typ, p.op, int(p.value))
        listed = p.op in ("in", "not in")
        values = p.value if listed else (p.value,)
        if listed and (not isinstance(values, tuple) or not values):
            self.fail(f"{p.op.upper()} needs a list of values", p.loc)
        values = self.temporal_literals(values, typ, p.column, p.loc, self.is_event_time(p.column))
        for v in values:
            numeric = isinstance(v, (int, float, Decimal, Fraction)) and not isinstance(v, bool)
            if isinstance(v, bool):
                self.fail(f"column {p.column!r} is {typ}; cannot compare it with {str(v).upper()}", p.loc, p.column)
            if (typ == "string" and not isinstance(v, str)) or (typ != "string" and not numeric):
                self.fail(f"column {p.column!r} is {typ}; cannot compare it with {v!r}", p.loc, p.column)
            if isinstance(v, float) and math.isnan(v) or isinstance(v, Decimal) and not v.is_finite():
                self.fail(f"{v!r} is not a comparable value", p.loc, p.column)
        if typ == "string":
            return Comparison(p.column, typ, p.op, tuple(values) if listed else values[0])
        if typ == "float64":
            if listed:
                return Comparison(p.column, typ, p.op, np.array([float_value(v) for v in values], dtype=np.float64))
            return Comparison(p.column, typ, p.op, float_value(values[0]))
        mult = 10 ** (decimal_type(typ) or (0, 0))[1]  # a decimal(p,s) column holds value * 10**s
        if listed:
            exact = (exact_value(v) * mult for v in values)
            members = sorted({int(v) for v in exact if v.denominator == 1 and INT64_MIN <= v <= INT64_MAX})
            if not members:
                return Comparison(p.column, typ, "false" if p.op == "in" else "true", None)
            return Comparison(p.column, typ, p.op, np.array(members, dtype=np.int64))
        return int_comparison(p.column, p.op, exact_value(values[0]) * mult)

    def temporal_literals(self, values: tuple, typ: str, column: str, loc, event_time: bool = False) -> tuple:
        """The TIMESTAMP / DATE constants among `values` in the units of a `typ` column (exact ints or
        Fractions: expr_temporal.literal_in; `event_time`: the column is the event-time column), the
        others as they are."""
        out = []
        for v in values:
            try:
                u = literal_in(typ, v, event_time)
            except ValueError as err:
                self.fail(f"column {column!r} is {typ}; cannot compare it with {v!r}: {err}", loc, column)
            out.append(v if u is None else u)
        return tuple(out)

    def is_event_time(self, column: str | None) -> bool:
        """Whether `column` names the stream's event-time column (int64 ms since the epoch)."""
        return column == self.schema.time_column

    def order_item(self, o, items: list[OutputItem], aggs: list[BoundAggregate],
                   group_keys: Sequence[str] = ()) -> tuple[int | KeyRef | None, bool]:
        q = self.q
        if o.expr is not None:
            target = o.expr
            for it in q.items:
                if isinstance(it, Aggregate) and it.same_expression(target):
                    return items[q.items.index(it)].agg, o.descending
            aggs.append(self.aggregate(target, lambda c, loc: self.column_type(c, loc)))  # hidden: sort only
            return len(aggs) - 1, o.descending
        if o.name is not None:
            hits = [i for i, it in enumerate(items) if it.label == o.name]
            if len(hits) > 1:
                self.fail(f"ORDER BY {o.name!r} is ambiguous: {len(hits)} select items are named so", o.loc)
            if hits:
                return self._order_ref(items[hits[0]], group_keys), o.descending
            if o.name in group_keys:
                return self._order_ref(OutputItem(o.name, "", None, group_keys.index(o.name)), group_keys), o.descending
            if o.name in self.types:
                which = "a GROUP BY column" if len(group_keys) > 1 else "the GROUP BY column"
                self.fail(f"ORDER BY {o.name!r}: the column must be {which} or a select item", o.loc, o.name)
            self.fail(f"ORDER BY {o.name!r} names no select item or column", o.loc)
        if o.item is None or not 0 <= o.item < len(items):
            n = "?" if o.item is None else o.item + 1
            self.fail(f"ORDER BY {n} is not a select item (1..{len(items)})", o.loc)
        return self._order_ref(items[o.item], group_keys), o.descending

    @staticmethod
    def _order_ref(item: OutputItem, group_keys) -> int | KeyRef | None:
        """An ORDER BY item's reference: its aggregate, None for the only GROUP BY key, or KeyRef."""
        if item.agg is not None or len(group_keys) <= 1:
            return item.agg
        return KeyRef(item.key)

    def having(self, c, items: list[OutputItem], aggs: list[BoundAggregate], group_keys: list[str],
               group_types: list[str]) -> "GroupFilter":
        """HAVING's condition over a group's values: an operand is an aggregate (a selected one, or a
        hidden one computed for the filter), a GROUP BY column, or else an output name."""
        q = self.q
        if isinstance(c, Logical):
            if c.op not in ("and", "or", "not") or not c.parts or (c.op == "not") != (len(c.parts) == 1):
                self.fail(f"unknown HAVING connective {c.op!r}", c.loc)
            return GroupFilter(c.op, [self.having(p, items, aggs, group_keys, group_types) for p in c.parts])
        if not isinstance(c, HavingTest):
            self.fail("a HAVING condition is a comparison, AND, OR or NOT", q.loc)
        if c.op not in OPS:
            self.fail(f"unknown comparison {c.op!r}", c.loc)
        if isinstance(c.operand, Aggregate):
            ref = None
            for i, it in enumerate(q.items):
                if isinstance(it, Aggregate) and it.same_expression(c.operand):
                    ref = ("agg", items[i].agg)
                    break
            if ref is None:
                aggs.append(self.aggregate(c.operand, lambda col, loc: self.column_type(col, loc)))  # hidden
                ref = ("agg", len(aggs) - 1)
            name, typ = c.operand.label, aggs[ref[1]].type  # type: ignore[index]  # a select item that is an aggregate
        else:  # a GROUP BY column first (as DuckDB resolves it), then an output name
            name = c.operand
            hits = [i for i, it in enumerate(items) if it.label == name]
            if name in group_keys:
                ref, typ = ("key", group_keys.index(name)), group_types[group_keys.index(name)]
            elif len(hits) > 1:
                self.fail(f"HAVING {name!r} is ambiguous: {len(hits)} select items are named so", c.loc)
            elif hits:
                item = items[hits[0]]
                ref = ("agg", item.agg) if item.agg is not None else ("key", item.key)
                typ = item.type
            elif name in self.types:
                self.fail(f"HAVING {name!r}: the column must be a GROUP BY column, or be aggregated", c.loc, name)
            else:
                self.fail(f"HAVING {name!r} names no select item or column", c.loc)
        event_time = self.is_event_time(name) if ref[0] == "key" else isinstance(c.operand, Aggregate) and \
            c.operand.func in ("min", "max", "quantile") and self.is_event_time(c.operand.column)  # one of its values
        return GroupFilter("test", [], ref, self.having_test(c, name, typ, event_time))

    def having_test(self, c: HavingTest, name: str, typ: str, event_time: bool = False):
        """`value op literal` on one group's value (a Python value; decimals as their scaled
        integers, as the planner holds them): True, False, or None (unknown: NULL)."""
        op = c.op
        if op in ("is null", "is not null"):
            if c.value is not None:
                self.fail(f"{op.upper()} takes no value", c.loc)
            return (lambda v: v is None) if op == "is null" else (lambda v: v is not None)
        listed = op in ("in", "not in")
        values: tuple = c.value if listed else (c.value,)  # type: ignore[assignment]  # IN: a tuple (checked next)
        if listed and (not isinstance(values, tuple) or not values):
            self.fail(f"{op.upper()} needs a list of values", c.loc)
        kind = type_kind(typ)
        values = self.temporal_literals(values, typ, name, c.loc, event_time)
        for v in values:
            numeric = isinstance(v, (int, float, Decimal, Fraction)) and not isinstance(v, bool)
            ok = (isinstance(v, bool) if kind == "boolean" else isinstance(v, str) if kind == "string" else numeric)
            if not ok:
                self.fail(f"{name!r} is {typ}; cannot compare it with {v!r}", c.loc)
            if isinstance(v, float) and math.isnan(v) or isinstance(v, Decimal) and not v.is_finite():
                self.fail(f"{v!r} is not a comparable value", c.loc)
        if kind in ("boolean", "string"):
            exact, literals = (lambda v: v), list(values)
        elif kind == "float64":
            exact, literals = float, [float_value(v) for v in values]
        else:  # integers, int128, temporal and decimal storage: exact rationals
            scale = 10 ** (decimal_type(typ) or (0, 0))[1]
            exact, literals = (lambda v: Fraction(v, scale) if not isinstance(v, float) else Fraction(v)), \
                [exact_value(v) for v in values]
        if listed:
            member = set(literals)
            return (lambda v: None if v is None else (exact(v) in member) == (op == "in"))
        compare, bound = COMPARE[op], literals[0]
        return lambda v: None if v is None else compare(exact(v), bound)

    def length(self, r: Range, what: str) -> int:
        spec = self.spec
        if r.unit == "subwindows":
            n = r.value
        elif r.unit == "ms":
            if spec.subwindow_ms is None:
                self.fail(f"{what} in time units needs a time-based window; this one is count-based "
                          "(use ROWS or SUBWINDOWS)", r.loc)
            if r.value % spec.subwindow_ms:
                self.fail(f"{what} {r.value} ms is not a multiple of the sub-window length {spec.subwindow_ms} ms"
                          + _nearest(r.value, spec.subwindow_ms, spec.subwindows, "ms")
                          + " (windows that cut sub-windows are answered exactly on event-time streams only)", r.loc)
            n = r.value // spec.subwindow_ms
        elif r.unit == "rows":
            if spec.subwindow_rows is None:
                self.fail(f"{what} in ROWS needs a count-based window; this one is time-based", r.loc)
            if r.value % spec.subwindow_rows:
                self.fail(f"{what} {r.value} rows is not a multiple of the sub-window size {spec.subwindow_rows} rows"
                          + _nearest(r.value, spec.subwindow_rows, spec.subwindows, "rows"), r.loc)
            n = r.value // spec.subwindow_rows
        else:
            self.fail(f"unknown {what} unit {r.unit!r}", r.loc)
        if n < 1:
            self.fail(f"{what} must be positive", r.loc)
        if n > spec.subwindows:
            self.fail(f"{what} covers {n} sub-windows but the window holds {spec.subwindows}", r.loc)
        return n

    def outer(self, items: list[OutputItem]) -> list[tuple[BoundAggregate, int | None]]:
        q = self.q
        if q.group_by is None:
            self.fail("a sub-query in FROM must use GROUP BY", q.outer[0].loc)
        labels = [it.label for it in items]

        def inner_type(column: str, loc: Loc | None) -> str:
            if labels.count(column) > 1:
                self.fail(f"{column!r} names {labels.count(column)} columns of the sub-query", loc, column)
            if column not in labels:
                self.fail(f"{column!r} is not a column of the sub-query ({', '.join(labels)})", loc, column)
            return items[labels.index(column)].type

        out = []
        for a in q.outer:
            b = self.aggregate(a, inner_type)
            out.append((b, labels.index(a.column) if a.column is not None else None))
        return out

    def check_approximate(self, b: BoundQuery) -> None:
        b.approximate_spec = frequent_query.bind(self, b)
