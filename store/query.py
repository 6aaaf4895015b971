"""The structured form of a query, before binding: what the text parser and the protobuf
conversion produce (syntax only), and what the binder (binder.py) checks against a stream.

Every node may carry a `loc` (position and token in the text, or a field path in the structured
form) so that the binder's errors say where the problem is. Locations never take part in equality:
the same query written as text or sent as protobuf compares equal.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from decimal import Decimal
from typing import Any, Union

from .errors import Loc

OPS = ("=", "!=", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null")

# A literal: int (any size), Decimal (an exact decimal literal such as 0.5 or 1e3), float (a
# double from the structured form), bool (TRUE / FALSE: boolean columns only) or str; IN / NOT IN
# take a tuple of them; IS NULL / IS NOT NULL none (value None).
Literal = Union[int, Decimal, float, str]


def _loc():
    return field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Predicate:
    column: str
    op: str
    value: object  # a Literal, or a tuple of them for IN / NOT IN
    loc: Loc | None = _loc()


@dataclass(frozen=True)
class Aggregate:
    func: str
    column: str | None = None  # None only for COUNT(*)
    q: Decimal | float | None = None  # (APPROX_)QUANTILE's fraction: the decimal written (a float: its shortest
    # decimal); APPROX_TOP_K's k
    alias: str | None = None
    loc: Loc | None = _loc()

    @property
    def label(self) -> str:
        if self.alias:
            return self.alias
        return self.default_label

    @property
    def default_label(self) -> str:
        if self.func == "count" and self.column is None:
            return "count(*)"
        if self.func == "count_distinct":
            return f"count(distinct {self.column})"
        if self.func in ("quantile", "approx_quantile", "approx_top_k"):
            return f"{self.func}({self.column}, {self.q:g})"
        return f"{self.func}({self.column})"

    def same_expression(self, other: "Aggregate") -> bool:
        return (self.func, self.column, self.q) == (other.func, other.column, other.q)


@dataclass(frozen=True)
class KeyColumn:
    column: str
    alias: str | None = None
    loc: Loc | None = _loc()

    @property
    def label(self) -> str:
        return self.alias or self.column


SelectItem = Union[KeyColumn, Aggregate]


@dataclass(frozen=True)
class OfTotal:
    """`fraction * TOTAL` as a HAVING value: that fraction of the window's total of the aggregate
    (APPROXIMATE threshold queries only, store/frequent_query.py)."""

    fraction: int | Decimal


@dataclass(frozen=True)
class HavingTest:
    """`operand op value` in HAVING: the operand is an aggregate, or a name (a GROUP BY column first,
    else an output name); op and value as in Predicate."""

    operand: Union[Aggregate, str]
    op: str
    value: object
    loc: Loc | None = _loc()


@dataclass(frozen=True)
class Logical:
    """AND / OR of two or more HAVING conditions, or NOT of one (`parts`), as written (not flattened
    across parentheses)."""

    op: str  # "and", "or" or "not"
    parts: tuple
    loc: Loc | None = _loc()


HavingCondition = Union[HavingTest, Logical]


@dataclass(frozen=True)
class Range:
    """A window length: `value` in `unit` ('ms', 'subwindows' or 'rows')."""

    value: int
    unit: str
    loc: Loc | None = _loc()


@dataclass(frozen=True)
class OrderBy:
    """One ORDER BY key: a select item by 0-based index, by output name, or by an aggregate
    expression; the binder resolves names and expressions to an index."""

    item: int | None = None
    descending: bool = False
    name: str | None = None
    expr: Aggregate | None = None
    loc: Loc | None = _loc()


@dataclass(frozen=True)
class Query:
    stream: str
    items: tuple[SelectItem, ...]
    where: tuple[tuple[Predicate, ...], ...] = ()  # OR of ANDs; empty = no filter
    group_by: str | None = None
    order_by: tuple[OrderBy, ...] = ()
    limit: int | None = None
    range: Range | None = None   # None = the whole window
    slide: Range | None = None   # periodic queries only
    outer: tuple[Aggregate, ...] = field(default=())  # aggregates over the per-group rows
    approximate: bool = False    # TOP k from per-sub-window top-k lists (thesis 6.2)
    loc: Loc | None = _loc()
    stream_loc: Loc | None = _loc()
    group_by_loc: Loc | None = _loc()
    # AS OF SLIDE k: read the window as it stood right after slide k (its RANGE's sub-windows up to
    # slide k), not the current one; one-time queries only
    as_of_slide: int | None = None
    as_of_loc: Loc | None = _loc()
    # GROUP BY a, b, ...: the columns after the first (group_by); empty for one column or none
    group_by_more: tuple[str, ...] = ()
    group_by_more_locs: tuple[Loc, ...] | None = _loc()
    having: HavingCondition | None = None  # a filter on the groups (after GROUP BY, before ORDER BY)
    distinct: bool = False  # SELECT DISTINCT cols: GROUP BY the selected columns, without aggregates
    shape: Any = None  # a session, count-based or partitioned window (window_shapes.WindowShape)
    # a query with expressions (expr_query.Select; items are then its SelectExprs): the fields above
    # that it does not use stay at their defaults
    expr: object | None = None

    @property
    def labels(self) -> list[str]:
        return [a.label for a in (self.outer or self.items)]

    @property
    def group_columns(self) -> tuple[str, ...]:
        """Every GROUP BY column in the order written; () without GROUP BY."""
        return () if self.group_by is None else (self.group_by, *self.group_by_more)

    def __hash__(self) -> int:
        # A query keys the plan cache on every call and the cost table on every read of a window
        # scan; the generated hash walks every nested item each time (~1 us): hash it once.
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(tuple(getattr(self, f.name) for f in fields(self) if f.compare))
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}  # string hashes differ per process


# -- joins of several streams' windows (issue 14) -------------------------------------------------------
# Column names in a join query are written as the text has them: "col" (unqualified: the binder finds the
# one source that has it) or "qualifier.col" (qualifier = a source's alias or stream name). Column names
# never contain a dot (Schema.of), so the qualifier is everything before the last dot, even when a stream
# name has dots itself ("net.packets.src"). Aggregates, key columns, predicates and ORDER BY keep their
# single-stream node types; only the FROM clause and the join conditions are new.
MAX_JOIN_STREAMS = 4


def split_column(name: str) -> tuple[str | None, str]:
    """("qualifier", "column") of a join query's column name; (None, name) when unqualified."""
    qualifier, dot, column = name.rpartition(".")
    return (qualifier, column) if dot else (None, name)


@dataclass(frozen=True)
class Equal:
    """`left = right`: an equi-join condition between columns of two sources (thesis chapter 5's
    join attribute `a`; several of them make a composite key)."""

    left: str
    right: str
    loc: Loc | None = _loc()
    right_loc: Loc | None = _loc()


@dataclass(frozen=True)
class Band:
    """`low <= column - base <= high` over int64 columns of two sources, exactly (no overflow);
    either bound may be open (None). Written `column BETWEEN base + low AND base + high`, or with one
    bound `column >= base + low` / `column <= base + high`. On event-time columns this is the window
    constraint of the W-join (seed 001): joined tuples lie within a window of each other."""

    column: str
    base: str
    low: int | None = None
    high: int | None = None
    loc: Loc | None = _loc()
    base_loc: Loc | None = _loc()


JoinCondition = Union[Equal, Band]


@dataclass(frozen=True)
class Source:
    """One joined stream: its name, alias, window length (RANGE) and re-execution period (SLIDE),
    and the conditions of the ON clause of its JOIN (empty for the first source)."""

    stream: str
    alias: str | None = None
    range: Range | None = None   # None = the stream's whole window
    slide: Range | None = None   # periodic queries only
    on: tuple[JoinCondition, ...] = ()
    loc: Loc | None = _loc()         # the JOIN keyword (the stream name for the first source)
    stream_loc: Loc | None = _loc()

    @property
    def name(self) -> str:
        """The name that qualifies its columns: the alias, else the stream name."""
        return self.alias if self.alias is not None else self.stream


@dataclass(frozen=True)
class JoinQuery:
    """An inner equi/band join of 2..MAX_JOIN_STREAMS streams' windows, then the single-stream query
    shapes over the joined rows: aggregates (optionally GROUP BY one column of any source, ORDER BY,
    LIMIT, one level of outer aggregates), or a plain projection of joined rows (no aggregate).

    `within` is the uniform window constraint of seed 001 (every pair of joined tuples within that
    many ms of event time of each other); the binder turns it into one Band per pair of sources."""

    sources: tuple[Source, ...]
    items: tuple[SelectItem, ...]
    where: tuple[tuple[Predicate, ...], ...] = ()
    within: Range | None = None
    group_by: str | None = None
    order_by: tuple[OrderBy, ...] = ()
    limit: int | None = None
    outer: tuple[Aggregate, ...] = field(default=())
    loc: Loc | None = _loc()
    group_by_loc: Loc | None = _loc()

    @property
    def labels(self) -> list[str]:
        return [a.label for a in (self.outer or self.items)]

    @property
    def streams(self) -> list[str]:
        """The joined streams' names, in FROM order (a self-join names a stream twice)."""
        return [s.stream for s in self.sources]
