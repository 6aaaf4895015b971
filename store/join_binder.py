"""The binder of join queries (query.JoinQuery): the semantic rules of a join of several streams'
windows, on top of the single-stream binder (binder.py), whose rules for aggregates, literals,
comparisons, window lengths and the outer sub-query it reuses unchanged.

`bind_join(query, catalog)` checks a JoinQuery against the joined streams' schemas and window specs
and returns a BoundJoin that join/ evaluates:

- sources: 2..MAX_JOIN_STREAMS streams, each known; a stream joined twice needs an alias per
  occurrence (names qualify columns, so they must be unique); RANGE and SLIDE per source in that
  stream's own window unit (binder.length);
- names: `alias.col`, `stream.col` (the stream of exactly one source) or `col` when exactly one source
  has such a column; otherwise "unknown alias", "unknown column" or "ambiguous column" at its position;
- join conditions: an equality compares columns of two different sources of the same type (strings
  compare by value, across the streams' separate dictionaries; booleans, timestamps, dates as their
  values), or exact numbers of different types (int64 and decimal(p,s) of any scales: compared by
  value, exactly, as DuckDB compares them; float64 with another type is refused); a band
  compares int64 columns of two sources with offsets within int64; the ON clause of a JOIN refers only
  to the sources joined so far (SQL's scoping); WITHIN (a time length) is one band on the event-time
  columns of every pair of sources (the uniform clique W-join of seed 001);
- no cross products: the equalities and bands must connect every source to the others (thesis
  chapter 5 joins windows on a common attribute; a W-join on a window constraint);
- the select list: aggregates over any source's columns and at most one GROUP BY column of any
  source (then ORDER BY, LIMIT and the outer sub-query as for one stream), or a plain projection of
  joined rows (no aggregate: ORDER BY any column of any source, LIMIT).

NULLs (thesis 8.3.2 keeps answers exact; SQL semantics as for one stream): a NULL in an ON column makes
its condition unknown, so the row joins nothing; WHERE, aggregates, GROUP BY and ORDER BY treat NULLs
as single-stream queries do (join/ reads the validity masks).

Every error is a QueryError naming the position and token (text) or the field (structured form).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from .binder import AnswerColumns, BoundAggregate, Comparison, OutputItem, _Binder
from .errors import Loc, QueryError
from .exact import INT64_MAX
from .query import (
    MAX_JOIN_STREAMS,
    Aggregate,
    Band,
    Equal,
    JoinQuery,
    KeyColumn,
    Range,
    split_column,
)
from .schema import Schema, decimal_type
from .timing_binder import BoundTiming, bind_timing
from .timing_syntax import PROB_COLUMN, Timing
from .window import WindowSpec


@dataclass(frozen=True)
class ColumnRef:
    """A resolved column: source index (FROM order), column name in that stream, its type."""

    source: int
    column: str
    type: str
    name: str  # "source.column", for messages and labels


@dataclass
class BoundSource:
    index: int
    name: str            # alias, else stream name
    stream: str
    schema: Schema
    spec: WindowSpec
    n_q: int             # sub-windows read
    every: int | None    # SLIDE in this stream's sub-windows (periodic queries)


@dataclass(frozen=True)
class BoundEqual:
    left: ColumnRef
    right: ColumnRef


@dataclass(frozen=True)
class BoundBand:
    """low <= column - base <= high (a bound of None is open); int64 columns of two sources."""

    column: ColumnRef
    base: ColumnRef
    low: int | None
    high: int | None


@dataclass
class BoundJoin(AnswerColumns):
    query: JoinQuery
    sources: list[BoundSource]
    equalities: list[BoundEqual]
    bands: list[BoundBand]
    where: tuple[tuple[tuple[ColumnRef, Comparison], ...], ...]  # OR of ANDs of (column, comparison)
    group_by: ColumnRef | None
    items: list[OutputItem]                   # agg None: the GROUP BY key (aggregate queries)
    aggs: list[BoundAggregate]                # the select list's aggregates, then hidden ORDER BY ones
    agg_refs: list[ColumnRef | None]          # the column each aggregate reads (None: COUNT(*))
    order: list[tuple[int | None, bool]]      # aggregate queries: (agg index, or None for the key; descending)
    limit: int | None
    projection: bool = False                  # no aggregate: the joined rows themselves
    item_refs: list[ColumnRef] = field(default_factory=list)   # projection: the column of each item
    sort: list[tuple[ColumnRef, bool]] = field(default_factory=list)  # projection: ORDER BY columns
    outer: list[tuple[BoundAggregate, int | None]] = field(default_factory=list)
    timings: list[BoundTiming] = field(default_factory=list)  # PROB(...) >= ct conditions (timing_binder.py)

    @property
    def group_type(self) -> str | None:
        return self.group_by.type if self.group_by is not None else None

    def refs(self) -> set[ColumnRef]:
        """Every column the evaluation reads besides the join conditions' (outputs and filters)."""
        out = {r for r in self.agg_refs if r is not None} | {r for r in self.item_refs if r.source >= 0}
        out |= {r for r, _ in self.sort if r.source >= 0}
        out |= {ref for conj in self.where for ref, _ in conj}
        if self.group_by is not None:
            out.add(self.group_by)
        return out


Catalog = Mapping[str, tuple[Schema, WindowSpec]]


def exact_number(typ: str) -> bool:
    """int64 and decimal(p,s): exact numbers, equal by value across types and scales."""
    return typ == "int64" or decimal_type(typ) is not None


def scale_of(typ: str) -> int:
    """The decimal scale of an exact number type (int64: 0)."""
    dec = decimal_type(typ)
    return dec[1] if dec else 0


def bind_join(query: JoinQuery, catalog: Catalog) -> BoundJoin:
    """Check `query` against the joined streams (stream name -> (schema, window spec))."""
    return _JoinBinder(query, catalog).bind()


class _JoinBinder(_Binder):
    # not a Query: the single-stream parts it reuses read only the fields the two share
    q: JoinQuery  # type: ignore[assignment]

    def __init__(self, query: JoinQuery, catalog: Catalog):
        self.q = query
        self.catalog = catalog
        self.types = {}
        self.sources: list[BoundSource] = []
        self.timings: list[BoundTiming] = []

    # -- names ---------------------------------------------------------------------------------
    def resolve(self, name: str | None, loc: Loc | None, upto: int | None = None) -> ColumnRef:
        """The column `name` denotes; `upto` limits the sources visible (an ON clause)."""
        if name is None:
            self.fail("a column is missing", loc)
        visible = self.sources if upto is None else self.sources[: upto + 1]
        qualifier, column = split_column(name)
        if qualifier is None:
            hits = [s for s in visible if column in s.schema.types]
            if not hits:
                later = [s.name for s in self.sources[len(visible):] if column in s.schema.types]
                if later:
                    self.fail(f"column {column!r} belongs to {later[0]}, which is joined after this ON clause",
                              loc, column)
                self.fail(f"unknown column {column!r} (no joined stream has it)", loc, column)
            if len(hits) > 1:
                self.fail(f"column {column!r} is ambiguous: {' or '.join(f'{s.name}.{column}' for s in hits)}",
                          loc, column)
            src = hits[0]
        else:
            src = self.source_named(qualifier, loc)
            if src.index >= len(visible):
                self.fail(f"{qualifier!r} is joined after this ON clause", loc, name)
            if column not in src.schema.types:
                self.fail(f"unknown column {column!r} in {src.name} (stream {src.stream} has "
                          f"{', '.join(src.schema.names)})", loc, name)
        return ColumnRef(src.index, column, src.schema.types[column], f"{src.name}.{column}")

    def source_named(self, qualifier: str, loc: Loc | None) -> BoundSource:
        by_name = [s for s in self.sources if s.name == qualifier]
        if by_name:
            return by_name[0]
        by_stream = [s for s in self.sources if s.stream == qualifier]
        if len(by_stream) == 1:
            return by_stream[0]
        if by_stream:
            self.fail(f"stream {qualifier!r} is joined {len(by_stream)} times: qualify with its alias "
                      f"({', '.join(s.name for s in by_stream)})", loc, qualifier)
        self.fail(f"unknown alias or stream {qualifier!r} (the join reads {', '.join(s.name for s in self.sources)})",
                  loc, qualifier)

    def column_type(self, column: str | None, loc: Loc | None) -> str:
        """The single-stream binder's hook (aggregates, predicates): resolve across the sources."""
        return self.resolve(column, loc).type

    def is_event_time(self, column: str | None) -> bool:
        """Whether `column` names a joined stream's event-time column (a name that resolves to none: no)."""
        try:
            ref = self.resolve(column, None)
        except QueryError:
            return False
        return ref.column == self.sources[ref.source].schema.time_column

    # -- the query -----------------------------------------------------------------------------
    def bind(self) -> BoundJoin:  # type: ignore[override]  # a join's own entry point
        q = self.q
        if len(q.sources) < 2:
            self.fail("a join reads at least two streams", q.loc)
        if len(q.sources) > MAX_JOIN_STREAMS:
            self.fail(f"a join reads at most {MAX_JOIN_STREAMS} streams; this one joins {len(q.sources)}",
                      q.sources[MAX_JOIN_STREAMS].loc)
        self.bind_sources()
        equalities, bands = self.bind_conditions()
        self.check_connected(equalities, bands)
        where = tuple(tuple((self.resolve(p.column, p.loc), self.predicate(p)) for p in conj) for conj in q.where)
        group_by = None
        if q.group_by is not None:
            group_by = self.resolve(q.group_by, q.group_by_loc)
            if group_by.type == "float64":
                self.fail(f"GROUP BY column {q.group_by!r} must be string or int64, not float64", q.group_by_loc,
                          q.group_by)
        has_aggs = any(isinstance(it, Aggregate) for it in q.items)
        bound = BoundJoin(q, self.sources, equalities, bands, where, group_by, [], [], [], [], q.limit,
                          timings=self.timings)
        if has_aggs or group_by is not None or q.outer:
            self.bind_aggregates(bound)
        else:
            self.bind_projection(bound)
        return bound

    def bind_sources(self) -> None:
        seen: dict[str, int] = {}
        for i, src in enumerate(self.q.sources):
            entry = self.catalog.get(src.stream)
            if entry is None:
                self.fail(f"unknown stream {src.stream!r}", src.stream_loc or src.loc)
            name = src.name
            if name in seen:
                what = "stream" if src.alias is None else "alias"
                self.fail(f"{what} {name!r} names two sources of the join: give each an alias", src.loc)
            seen[name] = i
            schema, spec = entry
            one = _Binder(self.q, schema, spec)  # type: ignore[arg-type]  # window lengths in this stream's own unit (length() only)
            n_q = one.length(src.range, "RANGE") if src.range is not None else spec.subwindows
            every = one.length(src.slide, "SLIDE") if src.slide is not None else None
            self.sources.append(BoundSource(i, name, src.stream, schema, spec, n_q, every))

    def bind_conditions(self) -> tuple[list[BoundEqual], list[BoundBand]]:
        equalities, bands = [], []
        for k, src in enumerate(self.q.sources):
            for c in src.on:
                if isinstance(c, Equal):
                    left = self.resolve(c.left, c.loc, upto=k)
                    right = self.resolve(c.right, c.right_loc or c.loc, upto=k)
                    self.check_pair(left, right, c.loc)
                    if left.type != right.type and not (exact_number(left.type) and exact_number(right.type)):
                        self.fail(f"join keys {left.name} ({left.type}) and {right.name} ({right.type}) have "
                                  "different types (exact numbers, int64 and decimal, compare across types)",
                                  c.right_loc or c.loc, c.right)
                    equalities.append(BoundEqual(left, right))
                elif isinstance(c, Band):
                    column = self.resolve(c.column, c.loc, upto=k)
                    base = self.resolve(c.base, c.base_loc or c.loc, upto=k)
                    self.check_pair(column, base, c.loc)
                    for ref, loc in ((column, c.loc), (base, c.base_loc or c.loc)):
                        if ref.type != "int64":
                            self.fail(f"a band condition compares int64 columns (event time); {ref.name} is "
                                      f"{ref.type}", loc, ref.column)
                    if c.low is None and c.high is None:
                        self.fail("a band condition needs a lower or an upper bound", c.loc)
                    for off in (c.low, c.high):
                        if off is not None and (isinstance(off, bool) or not isinstance(off, int)
                                                or abs(off) > INT64_MAX):
                            self.fail(f"a band offset must be an integer within int64, got {str(off)[:40]}", c.loc)
                    bands.append(BoundBand(column, base, c.low, c.high))
                elif isinstance(c, Timing):
                    self.timings.append(bind_timing(self, c, k))
                else:
                    self.fail(f"unknown join condition {type(c).__name__}", self.q.sources[k].loc)
        within = self.q.within
        if within is not None:
            w = self.within_ms(within)
            for j in range(1, len(self.sources)):
                for i in range(j):
                    bands.append(BoundBand(self.time_ref(j), self.time_ref(i), -w, w))
        return equalities, bands

    def within_ms(self, r: Range) -> int:
        if r.unit != "ms":
            self.fail("WITHIN takes a length of event time (ms, s, min or h)", r.loc)
        if not isinstance(r.value, int) or not 0 <= r.value <= INT64_MAX:
            self.fail("WITHIN must be a non-negative length within int64 ms", r.loc)
        return r.value

    def time_ref(self, i: int) -> ColumnRef:
        s = self.sources[i]
        col = s.schema.time_column
        return ColumnRef(i, col, "int64", f"{s.name}.{col}")

    def check_pair(self, a: ColumnRef, b: ColumnRef, loc: Loc | None) -> None:
        if a.source == b.source:
            self.fail(f"a join condition compares columns of two sources; {a.name} and {b.name} are both of "
                      f"{self.sources[a.source].name} (filter one source in WHERE)", loc)

    def check_connected(self, equalities: list[BoundEqual], bands: list[BoundBand]) -> None:
        parent = list(range(len(self.sources)))

        def root(i: int) -> int:
            while parent[i] != i:
                i = parent[i]
            return i

        for a, b in [(e.left.source, e.right.source) for e in equalities] + [(b.column.source, b.base.source)
                                                                            for b in bands] + \
                [(t.left, t.right) for t in self.timings]:
            parent[root(a)] = root(b)
        for k in range(1, len(self.sources)):
            if root(k) != root(0):
                src = self.q.sources[k]
                self.fail(f"no equality, band or timing condition joins {self.sources[k].name} to the other streams: "
                          "a cross product is refused (add a condition to its ON clause, or WITHIN)", src.loc)

    # -- select list -----------------------------------------------------------------------------
    def bind_aggregates(self, b: BoundJoin) -> None:
        q = self.q
        for it in q.items:
            if isinstance(it, KeyColumn):
                if it.column == PROB_COLUMN:
                    self.fail("PROB() is a column of a projection of joined rows; it cannot be grouped or "
                              "aggregated", it.loc)
                ref = self.resolve(it.column, it.loc)
                if ref != b.group_by:
                    self.fail(f"column {it.column!r} must be aggregated or be the GROUP BY column", it.loc, it.column)
                b.items.append(OutputItem(it.label, ref.type, None))
            else:
                b.aggs.append(self.aggregate(it, self.column_type))
                b.agg_refs.append(self.resolve(it.column, it.loc) if it.column is not None else None)
                b.items.append(OutputItem(it.label, b.aggs[-1].type, len(b.aggs) - 1))
        if not b.aggs:
            self.fail("select at least one aggregate", q.loc)
        b.order = [self.order_aggregate(o, b) for o in q.order_by]
        if q.outer:
            b.outer = self.outer(b.items)

    def order_aggregate(self, o, b: BoundJoin) -> tuple[int | None, bool]:
        q = self.q
        if o.expr is not None:
            target = o.expr
            ref = self.resolve(target.column, target.loc) if target.column is not None else None
            for it, item in zip(q.items, b.items):
                if (isinstance(it, Aggregate) and (it.func, it.q) == (target.func, target.q)
                        and b.agg_refs[item.agg] == ref):  # type: ignore[index]  # an aggregate item
                    return item.agg, o.descending
            b.aggs.append(self.aggregate(target, self.column_type))  # hidden: sort only
            b.agg_refs.append(ref)
            return len(b.aggs) - 1, o.descending
        if o.name is not None:
            hits = [i for i, it in enumerate(b.items) if it.label == o.name]
            if len(hits) > 1:
                self.fail(f"ORDER BY {o.name!r} is ambiguous: {len(hits)} select items are named so", o.loc)
            if hits:
                return b.items[hits[0]].agg, o.descending
            ref = self.try_resolve(o.name)
            if ref is not None and ref == b.group_by:
                return None, o.descending
            if ref is not None:
                self.fail(f"ORDER BY {o.name!r}: the column must be the GROUP BY column or a select item", o.loc,
                          o.name)
            self.fail(f"ORDER BY {o.name!r} names no select item or column", o.loc)
        return b.items[self.ordinal(o, len(b.items))].agg, o.descending

    def bind_projection(self, b: BoundJoin) -> None:  # type: ignore[override]  # a join's own
        b.projection = True
        for it in self.q.items:
            ref = self.prob_ref(it.loc) if it.column == PROB_COLUMN else self.resolve(it.column, it.loc)
            b.item_refs.append(ref)
            b.items.append(OutputItem(it.label, ref.type, None))
        for o in self.q.order_by:
            if o.expr is not None:
                self.fail("ORDER BY an aggregate needs aggregates in the select list", o.loc)
            if o.name is not None:
                hits = [i for i, it in enumerate(b.items) if it.label == o.name]
                if len(hits) > 1:
                    self.fail(f"ORDER BY {o.name!r} is ambiguous: {len(hits)} select items are named so", o.loc)
                ref = b.item_refs[hits[0]] if hits else self.resolve(o.name, o.loc)
            else:
                ref = b.item_refs[self.ordinal(o, len(b.items))]
            b.sort.append((ref, o.descending))

    def prob_ref(self, loc: Loc | None) -> ColumnRef:
        """PROB(): the probability of the join's one timing condition, per joined row (source -1:
        computed from the pair's intervals, not read from a stream)."""
        if len(self.timings) != 1:
            self.fail("PROB() is the probability of a timing condition: the join needs exactly one "
                      f"PROB(...) >= ct in its ON clauses (it has {len(self.timings)})", loc)
        return ColumnRef(-1, PROB_COLUMN, "float64", "prob()")

    def ordinal(self, o, n: int) -> int:
        if o.item is None or not 0 <= o.item < n:
            shown = "?" if o.item is None else o.item + 1
            self.fail(f"ORDER BY {shown} is not a select item (1..{n})", o.loc)
        return o.item

    def try_resolve(self, name: str) -> ColumnRef | None:
        try:
            return self.resolve(name, None)
        except QueryError:
            return None
