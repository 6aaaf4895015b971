"""The structured form of a query; the text form (parser.py) compiles to it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

AGG_FUNCS = ("count", "sum", "avg", "min", "max", "count_distinct", "quantile")
OPS = ("=", "!=", "<", "<=", ">", ">=", "in", "not in")


@dataclass(frozen=True)
class Predicate:
    column: str
    op: str
    value: object  # a scalar, or a tuple for IN / NOT IN


@dataclass(frozen=True)
class Aggregate:
    func: str
    column: str | None = None  # None only for COUNT(*)
    q: float | None = None     # QUANTILE's fraction
    alias: str | None = None

    @property
    def label(self) -> str:
        if self.alias:
            return self.alias
        if self.func == "count" and self.column is None:
            return "count(*)"
        if self.func == "count_distinct":
            return f"count(distinct {self.column})"
        if self.func == "quantile":
            return f"quantile({self.column}, {self.q:g})"
        return f"{self.func}({self.column})"


@dataclass(frozen=True)
class KeyColumn:
    column: str
    alias: str | None = None

    @property
    def label(self) -> str:
        return self.alias or self.column


SelectItem = Union[KeyColumn, Aggregate]


@dataclass(frozen=True)
class Range:
    """A window length: `value` in `unit` ('ms', 'subwindows' or 'rows')."""

    value: int
    unit: str


@dataclass(frozen=True)
class OrderBy:
    item: int          # 0-based index into the select list
    descending: bool = False


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

    @property
    def labels(self) -> list[str]:
        return [a.label for a in (self.outer or self.items)]
