"""Predicate covers (thesis 8.3.3: SS4, CS6, CS7) among the readers of a joint execution: queries
that are the same but for their WHERE, each WHERE over one column (ranges, =, !=, IN-lists, IS
[NOT] NULL, AND/OR of those), share their sub-windows' scans when one's rows are made of
the others'. A reader so derived reads no rows: its contribution for a sub-window is computed from
its pieces' contributions for that sub-window.

- SS4/CS6, disjoint cover: pairwise disjoint pieces whose union is the target; their contributions
  combine (merge.combine_contributions, as sub-windows do): COUNT, exact SUM and AVG, MIN, MAX,
  per key too;
- CS6 for MIN/MAX, any cover: overlapping pieces, when every aggregate is MIN or MAX;
- CS7, supercover minus a disjoint cover of the rest: target = S minus the pieces, where every
  aggregate is invertible (COUNT, exact SUM and AVG) and there is no GROUP BY (a group left with
  no row must vanish, which a difference of sums cannot tell).

A row whose column is null satisfies no comparison, only IS NULL or no WHERE at all. A cover that
holds only when the column has no null (`port < 1024` and `port >= 1024` for no WHERE) is used for
the sub-windows where the column has none; elsewhere the target reads its rows.

The sets are unions of intervals between cuts: a cut sits just below (side 0) or just above
(side 1) a value; over integers a cut above v is the cut below v + 1, so that adjacent integer
ranges meet. Pure: no store state; the runtime applies a Derivation per sub-window."""
from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

import numpy as np

from windowstore.store.planner.merge import uncombine

LOW, HIGH = (-1, 0, 0), (1, 0, 0)  # the cuts below and above every value
MAX_PIECES = 10  # candidates searched for an exact cover (2**10 subsets at most)
IDEMPOTENT = {"min", "max"}
INVERTIBLE = {"count", "sum", "avg"}


@dataclass(frozen=True)
class PredSet:
    """The rows a WHERE keeps, as the set of its column's values (`cuts`: sorted disjoint
    intervals (a, b) of cuts) and whether it keeps the rows where the column is null."""

    cuts: tuple
    null: bool

    def union(self, o: "PredSet", integer: bool) -> "PredSet":
        return PredSet(_normal(list(self.cuts) + list(o.cuts), integer), self.null or o.null)

    def intersect(self, o: "PredSet", integer: bool) -> "PredSet":
        out = []
        for a, b in self.cuts:
            for c, d in o.cuts:
                lo, hi = max(a, c), min(b, d)
                if lo < hi:
                    out.append((lo, hi))
        return PredSet(_normal(out, integer), self.null and o.null)

    def minus(self, o: "PredSet", integer: bool) -> "PredSet":
        return self.intersect(o.complement(integer), integer)

    def complement(self, integer: bool) -> "PredSet":
        out, at = [], LOW
        for a, b in self.cuts:
            if at < a:
                out.append((at, a))
            at = b
        if at < HIGH:
            out.append((at, HIGH))
        return PredSet(_normal(out, integer), not self.null)

    def empty(self) -> bool:
        return not self.cuts and not self.null

    def contains(self, v, integer: bool) -> bool:
        """Whether the set holds value v (None: a null)."""
        if v is None:
            return self.null
        lo, hi = _cut(v, 0, integer), _cut(v, 1, integer)
        return any(a <= lo and hi <= b for a, b in self.cuts)

    def values_only(self) -> "PredSet":
        return PredSet(self.cuts, False)


def _cut(v, side: int, integer: bool) -> tuple:
    if integer and side == 1:
        return (0, int(v) + 1, 0)
    return (0, int(v) if integer else v, side)


def _normal(intervals: list, integer: bool) -> tuple:
    """Sorted, non-empty, merged where they overlap or meet."""
    out: list = []
    for a, b in sorted(i for i in intervals if i[0] < i[1]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return tuple(out)


ALL_VALUES = ((LOW, HIGH),)


def _points(values, integer: bool) -> list:
    return [(_cut(v, 0, integer), _cut(v, 1, integer)) for v in values]


def comparison_set(p, integer: bool) -> PredSet | None:
    """The set of one bound Comparison (predicates.py), or None for a form this does not know."""
    op, v = p.op, p.value
    if op == "is null":
        return PredSet((), True)
    if op in ("is not null", "true"):
        return PredSet(ALL_VALUES, False)
    if op == "false":
        return PredSet((), False)
    if op in ("in", "not in"):
        values = [x.item() if isinstance(x, np.generic) else x for x in (v.tolist() if isinstance(v, np.ndarray) else v)]
        s = PredSet(_normal(_points(values, integer), integer), False)
        return s if op == "in" else PredSet(s.complement(integer).cuts, False)
    if isinstance(v, np.generic):
        v = v.item()
    if op == "=":
        return PredSet(((_cut(v, 0, integer), _cut(v, 1, integer)),), False)
    if op == "!=":
        return PredSet(_normal([(LOW, _cut(v, 0, integer)), (_cut(v, 1, integer), HIGH)], integer), False)
    bounds = {"<": (LOW, _cut(v, 0, integer)), "<=": (LOW, _cut(v, 1, integer)),
              ">": (_cut(v, 1, integer), HIGH), ">=": (_cut(v, 0, integer), HIGH)}
    if op not in bounds:
        return None
    return PredSet(_normal([bounds[op]], integer), False)


def where_set(where) -> tuple[str | None, PredSet, bool] | None:
    """A bound WHERE (binder: an OR of ANDs of Comparisons) as (column, set, integer domain);
    column None for no WHERE (every row). None when it is not over one column or not understood."""
    if not where:
        return None, PredSet(ALL_VALUES, True), True
    columns = {p.column for conj in where for p in conj}
    if len(columns) != 1:
        return None
    kinds = {p.kind for conj in where for p in conj}
    integer = not (kinds & {"string", "float64"})
    out = PredSet((), False)
    for conj in where:
        s = PredSet(ALL_VALUES, True)
        for p in conj:
            c = comparison_set(p, integer)
            if c is None:
                return None
            s = s.intersect(c, integer)
        out = out.union(s, integer)
    return columns.pop(), out, integer


@dataclass(frozen=True)
class Derivation:
    """Reader `target`'s contribution per sub-window from other readers': the sum (or any-cover
    combine) of `plus`, minus those of `minus` (CS7: `plus` is the one supercover); `rule` names
    it; `no_nulls` is the column that must have no null in the sub-window for it to hold (else the
    target reads its rows)."""

    target: int
    plus: tuple[int, ...]
    minus: tuple[int, ...]
    rule: str
    no_nulls: str | None = None

    def describe(self, names) -> str:
        parts = " + ".join(names[i] for i in self.plus)
        if self.minus:
            parts += " - " + " - ".join(names[i] for i in self.minus)
        cond = f" (where {self.no_nulls!r} has no null)" if self.no_nulls else ""
        return f"{self.rule}: {names[self.target]} = {parts}{cond}"


@dataclass
class _Reader:
    index: int
    family: object
    column: str | None
    set: PredSet
    integer: bool
    aggs: frozenset
    grouped: bool


def _reader(index: int, bound, combine_ok: bool) -> _Reader | None:
    if not combine_ok or bound is None or getattr(bound.query, "expr", None) is not None or bound.projection or bound.approximate or bound.hop is not None or bound.temporal is not None:
        return None
    got = where_set(bound.where)
    if got is None:
        return None
    column, s, integer = got
    family = dataclasses.replace(bound.query, range=None, slide=None, limit=None, where=())
    return _Reader(index, family, column, s, integer, frozenset(a.fn.name for a in bound.aggs),
                   bound.group_by is not None)


def derive(bounds: list, combine_ok: list[bool]) -> list[Derivation]:
    """Which readers (their bound queries, in order) are derived from which others. Greedy: the
    readers whose sets hold the most others' come first; a reader used as a piece is read, never
    derived; a piece is always a read reader (no chains)."""
    readers = [_reader(i, b, ok) for i, (b, ok) in enumerate(zip(bounds, combine_ok))]
    families: dict = {}
    for r in readers:
        if r is not None:
            families.setdefault(r.family, []).append(r)
    out: list[Derivation] = []
    for fam in families.values():
        if len(fam) < 2:
            continue
        derived: set[int] = set()
        used: set[int] = set()

        def holds(a: _Reader, b: _Reader) -> bool:
            col = a.column or b.column
            if a.column and b.column and a.column != b.column:
                return False
            integer = (a if a.column else b).integer
            return b.set.minus(a.set, integer).empty() if col else a is b
        order = sorted(fam, key=lambda r: -sum(holds(r, o) for o in fam if o is not r))
        for x in order:
            if x.index in used:
                continue
            base = [r for r in fam if r is not x and r.index not in derived]
            d = _cover(x, base)
            if d is not None:
                out.append(d)
                derived.add(x.index)
                used |= set(d.plus) | set(d.minus)
    return sorted(out, key=lambda d: d.target)


_DERIVED: dict = {}  # readers' keys -> their derivations (joint executions and the cost model ask again and again)


def derive_cached(key: tuple, bounds: list, combine_ok: list[bool]) -> list[Derivation]:
    """derive(bounds, combine_ok), remembered by `key`: what identifies the readers in order
    (their read keys and what their WHERE sets depend on, the column types: the stream's schema)."""
    got = _DERIVED.get(key)
    if got is None:
        if len(_DERIVED) > 1024:
            _DERIVED.clear()
        got = _DERIVED[key] = derive(bounds, combine_ok) if len(bounds) > 1 else []
    return got


def _cover(x: _Reader, base: list[_Reader]) -> Derivation | None:
    columns = [x.column] if x.column else sorted({r.column for r in base if r.column})
    for col in columns:
        pool = [r for r in base if r.column in (col, None)]
        if not pool:
            continue
        integer = next(r.integer for r in [x] + pool if r.column == col)
        for no_nulls in (False, True):  # exactly, else when the column has no null in the sub-window
            def s(r: _Reader) -> PredSet:
                return r.set.values_only() if no_nulls else r.set
            target = s(x)
            if target.empty():
                continue
            inside = [r for r in pool if not s(r).empty() and s(r).minus(target, integer).empty()]
            found = _exact_cover(target, inside, s, integer)
            if found is not None:
                return Derivation(x.index, tuple(r.index for r in found), (), "CS6 disjoint cover",
                                  col if no_nulls else None)
            if x.aggs <= IDEMPOTENT:
                union = PredSet((), False)
                for r in inside:
                    union = union.union(s(r), integer)
                if inside and union == target:
                    return Derivation(x.index, tuple(r.index for r in inside), (), "CS6 cover (MIN/MAX)",
                                      col if no_nulls else None)
            if x.aggs <= INVERTIBLE and not x.grouped:
                for sup in pool:
                    rest = s(sup).minus(target, integer)
                    if sup.set == x.set or not target.minus(s(sup), integer).empty() or rest.empty():
                        continue
                    parts = [r for r in pool if r is not sup and not s(r).empty()
                             and s(r).minus(rest, integer).empty()]
                    found = _exact_cover(rest, parts, s, integer)
                    if found is not None:
                        return Derivation(x.index, (sup.index,), tuple(r.index for r in found),
                                          "CS7 supercover minus a cover", col if no_nulls else None)
    return None


def _exact_cover(target: PredSet, pieces: list[_Reader], s, integer: bool) -> list[_Reader] | None:
    """Pairwise disjoint pieces (each inside target) whose union is target, fewest first."""
    pieces = pieces[:MAX_PIECES]
    for k in range(1, len(pieces) + 1):
        for combo in itertools.combinations(pieces, k):
            union, ok = PredSet((), False), True
            for r in combo:
                if not union.intersect(s(r), integer).empty():
                    ok = False
                    break
                union = union.union(s(r), integer)
            if ok and union == target:
                return list(combo)
    return None


def subtract(bound, total, parts: list):
    """An ungrouped contribution minus others' (CS7; COUNT, SUM and AVG over integers: each
    aggregate's inverse, merge.uncombine)."""
    return uncombine(bound, total, parts, None)
