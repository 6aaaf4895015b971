"""WHERE's and HAVING's compiled forms: Comparison (`column op literal`, evaluated as one NumPy
operation, exactly: see its docstring) and GroupFilter (a HAVING condition over finished groups,
SQL's three-valued logic), with the exact-rational helpers the binder uses to build them. The binder
checks names and types and builds these; this module must not check a query."""
from __future__ import annotations

import math
import operator
from fractions import Fraction

import numpy as np

from .exact import INT64_MAX, INT64_MIN

COMPARE = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
           ">=": operator.ge}
_HUGE = Fraction(10**400)


class Comparison:
    """`column op literal`, normalised at bind time so that evaluating it is one NumPy operation
    with the column's own dtype and exact:

    - int64 column: the literal is taken as the exact rational it writes (an int, a decimal, or a
      double's exact value) and the comparison is rewritten over integers (x < 2.5 is x <= 2;
      x = 2.5 is false; a bound beyond int64 makes it always true or false), as in PostgreSQL and
      DuckDB, never through float64;
    - float64 column: the literal is rounded to the nearest float64 first, as SQL engines do;
    - string column: by Unicode code point; equality and IN compare dictionary codes, an order
      comparison is evaluated once per distinct string of the stream and cached.
    """

    __slots__ = ("column", "kind", "op", "value", "_table", "_generation")

    def __init__(self, column: str, kind: str, op: str, value):
        self.column, self.kind, self.op, self.value = column, kind, op, value
        self._table: np.ndarray | None = None
        self._generation = -1

    def mask(self, col: np.ndarray, strings, valid: np.ndarray | None = None) -> np.ndarray:
        """The rows where the comparison is true; a null (valid False) is never equal, less or
        greater than anything: unknown, so the row is dropped. IS [NOT] NULL test `valid`.
        Always a new array (planner/read.py's where_mask ANDs the next predicates into it)."""
        op = self.op
        if op == "is null":
            return np.zeros(len(col), dtype=bool) if valid is None else ~valid
        if op == "is not null":
            return np.ones(len(col), dtype=bool) if valid is None else valid.copy()
        m = self._mask(col, strings)
        return m if valid is None else (m & valid)

    def _mask(self, col: np.ndarray, strings) -> np.ndarray:
        op, value = self.op, self.value
        if op == "true":
            return np.ones(len(col), dtype=bool)
        if op == "false":
            return np.zeros(len(col), dtype=bool)
        if self.kind == "string":
            if op in ("=", "!="):
                hit = col == strings.lookup(value)
                return hit if op == "=" else ~hit
            if op in ("in", "not in"):
                hit = np.isin(col, [strings.lookup(v) for v in value])
                return hit if op == "in" else ~hit
            table = self._string_table(strings)
            return table[col] if len(col) else np.zeros(0, dtype=bool)
        if op in ("in", "not in"):
            hit = np.isin(col, value)
            return hit if op == "in" else ~hit
        return COMPARE[op](col, value)

    def _string_table(self, strings) -> np.ndarray:
        """The comparison's result for every code of the stream's dictionary, extended as it grows."""
        if self._generation != strings.generation:  # codes were renumbered: start over
            self._table, self._generation = None, strings.generation
        table, n = self._table, len(strings)
        if table is None or len(table) < n:
            done = 0 if table is None else len(table)
            fn, value = COMPARE[self.op], self.value
            more = np.fromiter((fn(s, value) for s in strings.values[done:n]), dtype=bool, count=n - done)
            self._table = table = more if table is None else np.concatenate([table, more])
        return table


def exact_value(v) -> Fraction:
    """A numeric literal as an exact rational; magnitudes beyond 1e400 (or below 1e-400) are
    clamped, which changes no comparison with an int64 or a float64."""
    if isinstance(v, (int, Fraction)):
        return Fraction(v)
    if isinstance(v, float):
        return (_HUGE if v > 0 else -_HUGE) if math.isinf(v) else Fraction(v)
    if v.is_zero():
        return Fraction(0)
    sign = -1 if v.is_signed() else 1
    if v.adjusted() > 400:
        return sign * _HUGE
    if v.adjusted() < -400:
        return Fraction(sign, 10**400)
    return Fraction(v)


def int_comparison(column: str, op: str, v: Fraction) -> Comparison:
    """`x op v` over int64 x, rewritten over integers."""
    if op in ("=", "!="):
        hit = v.denominator == 1 and INT64_MIN <= v <= INT64_MAX
        if not hit:
            return Comparison(column, "int64", "false" if op == "=" else "true", None)
        return Comparison(column, "int64", op, int(v))
    if op in ("<", ">="):      # x < v  <=>  x < ceil(v);  x >= v  <=>  x >= ceil(v)
        bound = math.ceil(v)
    else:                      # x <= v <=> x <= floor(v); x > v   <=>  x > floor(v)
        bound = math.floor(v)
    if bound > INT64_MAX or bound < INT64_MIN:
        above = bound > INT64_MAX
        always = above if op in ("<", "<=") else not above
        return Comparison(column, "int64", "true" if always else "false", None)
    return Comparison(column, "int64", op, bound)


def float_value(v) -> float:
    if isinstance(v, int):
        try:
            return float(v)
        except OverflowError:
            return math.inf if v > 0 else -math.inf
    return float(v)


class GroupFilter:
    """A bound HAVING condition: "and" / "or" / "not" of `parts`, or a "test" of one group value
    (`ref`: ("agg", i) or ("key", j)) with SQL's three-valued logic: a group is kept when it is True."""

    __slots__ = ("op", "parts", "ref", "test")

    def __init__(self, op: str, parts: list, ref: tuple | None = None, test=None):
        self.op, self.parts, self.ref, self.test = op, parts, ref, test

    def refs(self) -> list[tuple]:
        return [self.ref] if self.op == "test" else [r for p in self.parts for r in p.refs()]  # type: ignore[list-item]  # a test has its ref

    def keep(self, n: int, column) -> list[bool]:
        """Which of n groups to keep; `column(ref)` gives a ref's values, one per group."""
        return [v is True for v in self._values(n, column)]

    def _values(self, n: int, column) -> list:
        if self.op == "test":
            return [self.test(v) for v in column(self.ref)]
        parts = [p._values(n, column) for p in self.parts]
        if self.op == "not":
            return [None if v is None else not v for v in parts[0]]
        out = []
        for vs in zip(*parts):
            if self.op == "and":
                out.append(False if False in vs else None if None in vs else True)
            else:
                out.append(True if True in vs else None if None in vs else False)
        return out
