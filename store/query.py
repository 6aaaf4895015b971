"""The structured form of a query, before binding: what the text parser and the protobuf
conversion produce (syntax only), and what the binder (binder.py) checks against a stream.

Every node may carry a `loc` (position and token in the text, or a field path in the structured
form) so that the binder's errors say where the problem is. Locations never take part in equality:
the same query written as text or sent as protobuf compares equal.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Union

from .errors import Loc

AGG_FUNCS = ("count", "sum", "avg", "min", "max", "count_distinct", "quantile")
OPS = ("=", "!=", "<", "<=", ">", ">=", "in", "not in")

# A literal: int (any size), Decimal (an exact decimal literal such as 0.5 or 1e3), float (a
# double from the structured form) or str; IN / NOT IN take a tuple of them.
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
    q: Decimal | float | None = None  # QUANTILE's fraction: the decimal written (a float: its shortest decimal)
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
        if self.func == "quantile":
            return f"quantile({self.column}, {self.q:g})"
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

    @property
    def labels(self) -> list[str]:
        return [a.label for a in (self.outer or self.items)]
