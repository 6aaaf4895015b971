"""Queries with expressions (issue 32): their structured form (Select, carried in query.Query.expr),
their binding against a stream, and their plan.

A Select is compiled into three steps over Arrow columns: WHERE (a row filter), grouping (the GROUP BY
key expressions and the aggregates, each of an expression, with FILTER and DISTINCT), and the output
step (select items, HAVING, ORDER BY, DISTINCT, LIMIT), whose expressions name the groups' keys and
aggregates as the columns `#k<i>` and `#a<j>`. Two paths feed the output step:

- synopsis (or probe): when there is no WHERE, every GROUP BY key is a column and every aggregate is
  one the first grammar has over one column (COUNT(*), COUNT/SUM/AVG/MIN/MAX/QUANTILE(col),
  COUNT(DISTINCT col)), the grouping is a plain query.Query planned as any other (so its synopses
  answer it) and only the output step is computed here: `SUM(bytes) * 8 / 60`, `upper(src)` of a
  grouped column, HAVING over expressions of aggregates;
- window: otherwise each sub-window's rows are decoded into Arrow columns (WHERE applied there when
  it does not use NOW()), and the grouping runs over all of them when the plan finishes.

NOW() is the query's read time as data: the end (end_ms) of the youngest sub-window the query reads,
in the window's clock domain, never a clock read here. A sub-query is an inner Select whose answer
rows are the outer Select's input columns.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import InvalidInput, Loc, QueryError
from .expr import (TEMPORAL, arrow_type, Agg, Batch, Col, Expr, Lit, Now, Star, evaluate, has_aggregate, infer, map_children,
                   sql)
from .kinds import AccessPath


def _loc():
    return field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class SelectExpr:
    """A select item: an expression and its alias."""

    expr: Expr
    alias: str | None = None
    text: str | None = field(default=None, compare=False, repr=False)
    loc: Loc | None = _loc()

    @property
    def label(self) -> str:
        if self.alias:
            return self.alias
        e = self.expr
        if isinstance(e, Col):
            return e.name
        if isinstance(e, Agg) and e.filter is None and not e.distinct and all(isinstance(a, Col) for a in e.args):
            if e.name == "count" and not e.args:
                return "count(*)"
            if e.name == "quantile":
                return f"quantile({e.args[0].name}, {e.q:g})"  # type: ignore[attr-defined]
            return f"{e.name}({e.args[0].name})"  # type: ignore[attr-defined]
        return sql(e)


@dataclass(frozen=True)
class OrderKey:
    expr: Expr  # an expression, an output name (Col) or an ordinal (an int Lit)
    descending: bool = False
    loc: Loc | None = _loc()
    nulls_first: bool | None = None  # NULLS FIRST (True) / LAST (False) as written; None: last, as in DuckDB


@dataclass(frozen=True)
class Select:
    items: tuple[SelectExpr, ...]
    where: Expr | None = None
    group_by: tuple[Expr, ...] = ()
    having: Expr | None = None
    order_by: tuple[OrderKey, ...] = ()
    limit: int | None = None
    distinct: bool = False
    inner: "Select | None" = None  # FROM (sub-query): its answer rows are this query's input


# -- binding -------------------------------------------------------------------------------------------
def _expand_star(sel: Select, column_types: dict[str, str]) -> Select:
    """`SELECT *` (and `SELECT *, x`): each `*` item as the input's columns, in their order."""
    if not any(isinstance(it.expr, Star) for it in sel.items):
        return sel
    items: list[SelectExpr] = []
    for it in sel.items:
        if isinstance(it.expr, Star):
            items += [SelectExpr(Col(name, loc=it.loc), loc=it.loc) for name in column_types]
        else:
            items.append(it)
    return replace(sel, items=tuple(items))


class Compiled:
    """A Select bound against its input columns' types (see the module docstring)."""

    def __init__(self, sel: Select, column_types: dict[str, str], where_loc: Loc | None = None,
                 time_column: str | None = None):
        sel = _expand_star(sel, column_types)
        labels = [it.label for it in sel.items]  # as written (before the event-time column is read as a timestamp)
        self.input_types = column_types
        self._types: dict[Expr, str] = {}
        if time_column is not None and column_types.get(time_column) == "int64":
            sel = _event_time_as_timestamp(sel, time_column, lambda x: infer(x, self._input_type))
        self.sel = sel
        items = [it.expr for it in sel.items]
        keys = [self._group_key(g, items) for g in sel.group_by]
        self.keys: list[Expr] = list(dict.fromkeys(keys))
        self.grouped = bool(self.keys) or sel.having is not None or any(has_aggregate(e) for e in items)
        self.aggs: list[Agg] = []
        self.where = sel.where
        if self.where is not None:
            if has_aggregate(self.where):
                agg = next(n for n in self.where.walk() if isinstance(n, Agg))
                raise QueryError("an aggregate is not allowed in WHERE", agg.loc, hint="filter groups with HAVING")
            self._boolean(self.where, "WHERE")
        for k in self.keys:
            if has_aggregate(k):
                raise QueryError("an aggregate is not allowed in GROUP BY", k.loc)
            self.type(k)
        if self.grouped:
            self.items = [self._rewrite(e) for e in items]
            self.having = self._rewrite(sel.having) if sel.having is not None else None
        else:
            for e in items:
                self.type(e)
            self.items, self.having = items, None
        if self.having is not None:
            self._boolean(self.having, "HAVING")
        self.order: list[tuple[Expr, bool, bool]] = []
        for o in sel.order_by:
            self.order.append((self._order_expr(o, items, labels), o.descending, bool(o.nulls_first)))
        if sel.distinct and sel.order_by:
            for (e, _, _), o in zip(self.order, sel.order_by):
                if e not in self.items:
                    raise QueryError("with SELECT DISTINCT, ORDER BY takes selected expressions only", o.loc)
        self.labels = labels
        self.types = [_answer_type(self.type(e)) for e in self.items]
        self.columns = sorted({n.name for e in self._all_input_exprs() for n in e.walk() if isinstance(n, Col)})
        every = [it.expr for it in sel.items] + list(sel.group_by) + [o.expr for o in sel.order_by] + \
            [e for e in (sel.where, sel.having) if e is not None]
        self.uses_now = any(isinstance(n, Now) for e in every for n in e.walk())

    def _all_input_exprs(self) -> list[Expr]:
        out = list(self.keys) + list(self.aggs)
        out += [] if self.where is None else [self.where]
        if not self.grouped:
            out += self.items + [e for e, _, _ in self.order]
        return out

    def _input_type(self, c: Col) -> str:
        typ = self.input_types.get(c.name)
        if typ is None:
            raise QueryError(f"unknown column {c.name!r}", c.loc)
        return typ

    # types, with the grouped columns (#k, #a) and the input's
    def column_type(self, c: Col) -> str:
        if c.name.startswith("#k"):
            return self.type(self.keys[int(c.name[2:])])
        if c.name.startswith("#a"):
            return self.type(self.aggs[int(c.name[2:])])
        typ = self.input_types.get(c.name)
        if typ is None:
            raise QueryError(f"unknown column {c.name!r} (the input has {', '.join(self.input_types)})", c.loc,
                             column=c.name)
        return typ

    def type(self, e: Expr) -> str:
        t = self._types.get(e)
        if t is None:
            t = self._types[e] = infer(e, self.column_type)
        return t

    def _boolean(self, e: Expr, what: str) -> None:
        if self.type(e) not in ("boolean", "null"):
            raise QueryError(f"{what} needs a condition; this is {self.type(e)}", e.loc)

    def _group_key(self, g: Expr, items: list[Expr]) -> Expr:
        """A GROUP BY key: an expression, an ordinal of the select list, or an output name."""
        if isinstance(g, Lit) and g.type == "int64" and not isinstance(g.value, bool):
            if not 1 <= g.value <= len(items):
                raise QueryError(f"GROUP BY {g.value} is not a select item (1..{len(items)})", g.loc)
            e = items[g.value - 1]
            if has_aggregate(e):
                raise QueryError(f"GROUP BY {g.value} names an aggregate", g.loc)
            return e
        if isinstance(g, Col) and g.name not in self.input_types:
            hits = [it.expr for it in self.sel.items if it.alias == g.name]
            if len(hits) == 1 and not has_aggregate(hits[0]):
                return hits[0]
        return g

    def _rewrite(self, e: Expr) -> Expr:
        """An output-step expression: keys and aggregates as the columns #k<i> and #a<j>."""
        if e in self.keys:
            return Col(f"#k{self.keys.index(e)}", loc=e.loc)
        if isinstance(e, Agg):
            for a in e.args + (() if e.filter is None else (e.filter,)):
                if has_aggregate(a):
                    raise QueryError("an aggregate inside an aggregate is not supported", a.loc)
            self.type(e)
            if e not in self.aggs:
                self.aggs.append(e)
            return Col(f"#a{self.aggs.index(e)}", loc=e.loc)
        if isinstance(e, Col):
            self.column_type(e)  # an unknown name first
            which = "a GROUP BY key" if self.keys else "grouped (there is no GROUP BY)"
            raise QueryError(f"column {e.name!r} must be aggregated or be {which}", e.loc, column=e.name)
        out = map_children(e, self._rewrite)
        self.type(out)
        return out

    def _order_expr(self, o: OrderKey, items: list[Expr], labels: list[str]) -> Expr:
        e = o.expr
        if isinstance(e, Lit) and e.type == "int64" and not isinstance(e.value, bool):
            if not 1 <= e.value <= len(items):
                raise QueryError(f"ORDER BY {e.value} is not a select item (1..{len(items)})", o.loc)
            return self.items[e.value - 1]
        if isinstance(e, Col):
            hits = [i for i, lab in enumerate(labels) if lab == e.name]
            if len(hits) > 1 and len({self.items[i] for i in hits}) > 1:
                raise QueryError(f"ORDER BY {e.name!r} is ambiguous: {len(hits)} select items are named so", o.loc)
            if hits:
                return self.items[hits[0]]
        if self.grouped:
            return self._rewrite(e)
        self.type(e)
        return e


def _event_time_as_timestamp(sel: Select, time_column: str, type_of) -> Select:
    """`sel` with the event-time column read as a TIMESTAMP where it meets a timestamp or a date
    (expr_temporal.event_time_as_timestamp), in every clause."""
    from dataclasses import replace

    from .expr_temporal import event_time_as_timestamp

    def f(e: Expr) -> Expr:
        return event_time_as_timestamp(e, time_column, type_of)

    return replace(sel, items=tuple(replace(it, expr=f(it.expr)) for it in sel.items),
                   where=None if sel.where is None else f(sel.where), group_by=tuple(f(g) for g in sel.group_by),
                   having=None if sel.having is None else f(sel.having),
                   order_by=tuple(replace(o, expr=f(o.expr)) for o in sel.order_by))


def _answer_type(t: str) -> str:
    return "int64" if t == "null" else t


# -- running a compiled Select over Arrow columns ----------------------------------------------------
def _mask(condition: pa.Array) -> pa.Array:
    """A condition's values as a filter: NULL does not pass (also a condition of type null, `WHERE NULL`)."""
    if pa.types.is_null(condition.type):
        condition = condition.cast(pa.bool_())
    return pc.fill_null(condition, False)


def _filter(columns: dict[str, pa.Array], mask: pa.Array) -> dict[str, pa.Array]:
    m = _mask(mask)
    return {k: pc.filter(v, m) for k, v in columns.items()}


def run(c: Compiled, columns: dict[str, pa.Array], rows: int, now: int | None,
        grouped_input: tuple[dict[str, pa.Array | None], dict[str, list], int] | None = None) -> list[tuple]:
    """The answer rows of `c` over the input columns (all rows of the window, or the inner query's).
    `grouped_input`: the groups already computed elsewhere (the synopsis path): (#k/#a Arrow columns,
    their Python values, number of groups)."""
    types = c.type
    if grouped_input is not None:
        gcols, raw, n = grouped_input
    else:
        if c.where is not None:
            mask = evaluate(c.where, Batch(columns, rows, now), types)
            columns = _filter(columns, mask)
            rows = int(pc.sum(_mask(mask).cast(pa.int64())).as_py() or 0)
        if not c.grouped:
            return _output(c, columns, {}, rows, now, keyed=False)
        gcols, raw, n = group(c, columns, rows, now)
    return _output(c, gcols, raw, n, now, keyed=True)


def _output(c: Compiled, columns: dict[str, Any], raw: dict[str, list], n: int, now: int | None,
            keyed: bool) -> list[tuple]:
    """The output step: HAVING, the select items, DISTINCT, ORDER BY (ties, and no ORDER BY, by the
    group keys ascending; NULLs last) and LIMIT, over `n` input rows (groups when `keyed`)."""
    batch = Batch(columns, n, now)

    def values(e: Expr) -> list:
        if isinstance(e, Col) and e.name in raw:
            return raw[e.name]
        for n in e.walk():
            if isinstance(n, Col) and n.name.startswith("#a") and columns.get(n.name) is None:
                raise QueryError(f"{sql(c.aggs[int(n.name[2:])])} is beyond BIGINT: it can be selected but not "
                                 "computed with", n.loc)
        try:
            return evaluate(e, batch, c.type).to_pylist()
        except QueryError as err:  # name the keys and aggregates as written, not as the columns #k/#a
            raise QueryError(_written(c, err.reason), err.loc) from None

    keep = list(range(n))
    if c.having is not None:
        flags = values(c.having)
        keep = [i for i in keep if flags[i] is True]
    sort_cols = [(values(e), d, f) for e, d, f in c.order]
    if keyed:
        sort_cols += [(values(Col(f"#k{j}")), False, False) for j in range(len(c.keys))]
    cols = [values(e) for e in c.items]
    out = [tuple(col[i] for col in cols) for i in keep]
    okeys = [([col[i] for i in keep], d, f) for col, d, f in sort_cols]
    if c.sel.distinct:
        seen: set = set()
        firsts = []
        for i, r in enumerate(out):
            k = tuple(_norm(v) for v in r)
            if k not in seen:
                seen.add(k)
                firsts.append(i)
        out = [out[i] for i in firsts]
        okeys = [([col[i] for i in firsts], d, f) for col, d, f in okeys]
        if not c.order:  # SELECT DISTINCT without ORDER BY: by the selected columns
            okeys = [([r[j] for r in out], False, False) for j in range(len(c.items))]
    if okeys:
        from .planner.order import sorted_positions
        out = [out[i] for i in sorted_positions(len(out), okeys)]
    if c.sel.limit is not None:
        out = out[:c.sel.limit]
    return out


def _written(c: Compiled, text: str) -> str:
    """`text` with the output step's columns (#k<i>, #a<j>) as the expressions they stand for."""
    import re

    def back(m: re.Match) -> str:
        i = int(m.group(2))
        return sql(c.keys[i] if m.group(1) == "k" else c.aggs[i])
    return re.sub(r'"#([ka])(\d+)"', back, text)


def _norm(v):
    return 0.0 if isinstance(v, float) and v == 0 else v


def _decode(values: np.ndarray, valid: np.ndarray | None, typ: str, strings) -> pa.Array:
    """A stored column as Arrow: strings decoded from their dictionary codes, booleans as booleans."""
    mask = None if valid is None else ~valid
    if typ == "string":
        codes = values.astype(np.int64, copy=False)
        if valid is not None:
            if not valid.any():  # (no string at all: the dictionary may be empty)
                return pa.nulls(len(codes), pa.string())
            codes = np.where(valid, codes, codes[valid][0])
        if not len(codes):
            return pa.array([], type=pa.string())
        uniq, inverse = np.unique(codes, return_inverse=True)
        out = pa.array(strings.decode(uniq), type=pa.string()).take(pa.array(inverse))
        return out if mask is None else pc.if_else(pa.array(valid), out, pa.nulls(len(out), pa.string()))
    if typ == "boolean":
        return pa.array(values.astype(bool), mask=mask)
    if typ == "float64":
        return pa.array(values.astype(np.float64, copy=False), mask=mask)
    if typ.startswith("decimal("):  # value * 10**s: as decimal128(p, s), exactly
        from .expr_decimal import from_storage
        return from_storage(values, valid, typ)
    return pa.array(values.astype(np.int64, copy=False), mask=mask)


# -- grouping ------------------------------------------------------------------------------------------
def group(c: Compiled, columns: dict[str, pa.Array], rows: int, now: int | None):
    """The groups of the input rows: per key and aggregate an output-step column (#k<i>, #a<j>)."""
    batch = Batch(columns, rows, now)
    key_arrays = [evaluate(k, batch, c.type) for k in c.keys]
    if key_arrays:
        codes = []
        for a in key_arrays:
            if pa.types.is_floating(a.type):
                a = pc.add(a, 0.0)  # -0.0 and 0.0 are one group
            enc = pc.dictionary_encode(a, null_encoding="encode")
            codes.append(np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64))
        stacked = np.stack(codes, axis=1) if len(codes) > 1 else codes[0].reshape(-1, 1)
        if rows:
            _, first, gid = np.unique(stacked, axis=0, return_index=True, return_inverse=True)
            gid = gid.reshape(-1)
        else:
            first, gid = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        n = len(first)
        gcols: dict[str, pa.Array | None] = {f"#k{i}": a.take(pa.array(first, type=pa.int64()))
                                             for i, a in enumerate(key_arrays)}
    else:  # aggregates without GROUP BY: one group, even over no rows
        n, gid = 1, np.zeros(rows, dtype=np.int64)
        gcols = {}
    raw: dict[str, list] = {}
    for j, a in enumerate(c.aggs):
        values = aggregate(c, a, batch, gid, n)
        typ = c.type(a)
        try:
            gcols[f"#a{j}"] = pa.array(values, type=arrow_type(typ))
        except (pa.ArrowInvalid, OverflowError):
            gcols[f"#a{j}"] = None  # a SUM beyond int64: selected as is (raw), not computed with
        raw[f"#a{j}"] = values
    return gcols, raw, n


def aggregate(c: Compiled, a: Agg, batch: Batch, gid: np.ndarray, n: int) -> list:
    """One aggregate's value per group (Python values; None for NULL)."""
    take = np.ones(len(gid), dtype=bool)
    if a.filter is not None:
        f = evaluate(a.filter, batch, c.type)
        take &= np.asarray(_mask(f).to_numpy(zero_copy_only=False), dtype=bool)
    if a.name == "count" and not a.args:
        return np.bincount(gid[take], minlength=n).astype(np.int64).tolist()
    args = [evaluate(x, batch, c.type) for x in a.args]
    for x in args:
        take &= np.asarray(x.is_valid().to_numpy(zero_copy_only=False), dtype=bool) if x.null_count else True
    g = gid[take]
    if a.name == "count" and not a.distinct:
        return np.bincount(g, minlength=n).astype(np.int64).tolist()
    idx = np.nonzero(take)[0]
    picked = [x.take(pa.array(idx, type=pa.int64())) for x in args]
    if a.distinct:  # COUNT(DISTINCT a, b, ...): the distinct tuples of values none of which is NULL
        sets: list[set] = [set() for _ in range(n)]
        for k, tup in zip(g.tolist(), zip(*[[_norm(v) for v in p.to_pylist()] for p in picked])):
            sets[k].add(tup)
        return [len(s) for s in sets]
    x = picked[0]
    typ = c.type(a.args[0])
    count = np.bincount(g, minlength=n)
    if a.name in ("sum", "avg") and typ.startswith("decimal("):  # exact, as Decimals (expr_decimal.py)
        from . import expr_decimal
        ints = expr_decimal.scaled_ints(x)  # up to 18 digits: summed as integers, exactly
        sums_d = expr_decimal.sums(x.to_pylist(), g, n, typ, a) if ints is None else \
            expr_decimal.from_scaled([s if k else None for s, k in zip(_int_sums(ints, g, n), count.tolist())], typ, a)
        if a.name == "sum":
            return sums_d
        return [expr_decimal.mean(v, k) if k else None for v, k in zip(sums_d, count.tolist())]
    if a.name in ("sum", "avg"):
        if typ in ("int64", "null") or typ in TEMPORAL:
            v = np.asarray(x.to_numpy(zero_copy_only=False), dtype=np.int64) if len(x) else np.empty(0, np.int64)
            sums = _int_sums(v, g, n)
            if a.name == "sum":
                return [s if k else None for s, k in zip(sums, count.tolist())]
            return [float(Fraction(s, k)) if k else None for s, k in zip(sums, count.tolist())]
        v = np.asarray(x.to_numpy(zero_copy_only=False), dtype=np.float64)
        sums_f = [math.fsum(part) for part in _split(v, g, n)]
        if a.name == "sum":
            return [s if k else None for s, k in zip(sums_f, count.tolist())]
        return [s / k if k else None for s, k in zip(sums_f, count.tolist())]
    per = _split_list(x.to_pylist(), g, n)
    if a.name in ("min", "max"):
        pick = min if a.name == "min" else max
        return [pick(p, key=_order_key) if p else None for p in per]
    if a.name == "quantile":
        out: list[Any] = []
        for p in per:
            if not p:
                out.append(None)
                continue
            p.sort(key=_order_key)
            rank = max(1, math.ceil(Decimal(a.q) * len(p)))  # type: ignore[arg-type]
            out.append(p[rank - 1])
        return out
    raise AssertionError(a.name)


def _int_sums(v: np.ndarray, g: np.ndarray, n: int) -> list[int]:
    """Per group, the exact sum of int64 values (32-bit halves summed apart: no wrap below 2**31 rows)."""
    lo = np.zeros(n, dtype=np.int64)
    hi = np.zeros(n, dtype=np.int64)
    np.add.at(lo, g, v & np.int64(0xFFFFFFFF))
    np.add.at(hi, g, v >> np.int64(32))
    return [(int(h) << 32) + int(l_) for h, l_ in zip(hi.tolist(), lo.tolist())]


def _order_key(v):
    return (1, 0.0) if isinstance(v, float) and math.isnan(v) else (0, v)


def _split(v: np.ndarray, g: np.ndarray, n: int) -> list[np.ndarray]:
    order = np.argsort(g, kind="stable")
    bounds = np.searchsorted(g[order], np.arange(n + 1))
    sv = v[order]
    return [sv[bounds[i]:bounds[i + 1]] for i in range(n)]


def _split_list(values: list, g: np.ndarray, n: int) -> list[list]:
    out: list[list] = [[] for _ in range(n)]
    for k, v in zip(g.tolist(), values):
        out[k].append(v)
    return out


# -- the synopsis path: the grouping as a first-grammar query -----------------------------------------
_FIRST_GRAMMAR = {"count", "sum", "avg", "min", "max", "quantile"}


def lowered(c: Compiled, query, schema_types: dict[str, str]):
    """The grouping of `c` as a plain query.Query (keys and aggregates as its select items), or None
    when it has no such form (WHERE, a key or an aggregate argument that is not a column, FILTER,
    COUNT(DISTINCT) of several columns, a float64 key, or no grouping at all)."""
    from .query import Aggregate, KeyColumn, Query
    sel = c.sel
    if sel.inner is not None or sel.where is not None or not c.grouped or c.uses_now:
        return None
    for k in c.keys:
        if not isinstance(k, Col) or schema_types.get(k.name) in (None, "float64"):
            return None
    aggs = []
    for a in c.aggs:
        if a.filter is not None or a.name not in _FIRST_GRAMMAR or not all(isinstance(x, Col) for x in a.args):
            return None
        if a.distinct:
            if a.name != "count" or len(a.args) != 1:
                return None
            aggs.append(Aggregate("count_distinct", a.args[0].name))  # type: ignore[attr-defined]
        elif not a.args:
            aggs.append(Aggregate("count"))
        else:
            aggs.append(Aggregate(a.name, a.args[0].name, a.q))  # type: ignore[attr-defined]
    if not aggs:
        aggs.append(Aggregate("count"))  # the first grammar needs one; its column is not used
    names = [k.name for k in c.keys]  # type: ignore[attr-defined]
    if len(set(names)) != len(names):
        return None
    items = tuple(KeyColumn(n) for n in names) + tuple(aggs)
    return Query(query.stream, items, group_by=names[0] if names else None, group_by_more=tuple(names[1:]),
                 range=query.range, slide=query.slide, as_of_slide=query.as_of_slide, loc=query.loc,
                 stream_loc=query.stream_loc, as_of_loc=query.as_of_loc)


# -- the plan ------------------------------------------------------------------------------------------
def compile_query(query, schema, spec, periodic: bool = False):
    """Bind a query.Query with expressions: (the compiled outer Select, the compiled inner one or
    None, SUB-WINDOWS read, SLIDE in sub-windows)."""
    from .binder import _Binder
    b = _Binder(query, schema, spec, periodic)
    n_q = b.length(query.range, "RANGE") if query.range is not None else spec.subwindows
    every = b.length(query.slide, "SLIDE") if query.slide is not None else None
    b.check_as_of(every)
    sel: Select = query.expr
    types = dict(schema.types)
    inner = None
    if sel.inner is not None:
        inner = Compiled(sel.inner, types, time_column=schema.time_column)
        labels = inner.labels
        for lab in labels:
            if labels.count(lab) > 1:
                raise QueryError(f"the sub-query has {labels.count(lab)} columns named {lab!r}", query.loc)
        types = dict(zip(labels, inner.types))
    return Compiled(sel, types, time_column=schema.time_column if inner is None else None), inner, n_q, every


class ExprPlan:
    """A planned query with expressions: the scheduler's view is that of store Plan (read one
    sub-window, finish the partials, probe)."""

    def __init__(self, query, stream, access: str | None = None, periodic: bool = False):
        from .binder import BoundQuery
        from .planner.plan import plan_query
        self.query = query
        self.stream = stream
        self.strings = stream.strings
        self.compiled, self.inner, self.n_q, every = compile_query(query, stream.schema, stream.spec, periodic)
        self.labels, self.types = self.compiled.labels, self.compiled.types
        self.as_of = query.as_of_slide
        base = lowered(self.compiled, query, stream.schema.types) if access != AccessPath.WINDOW else None
        self.base: Any = None
        self._columns: list[str] = []
        self._pushdown = False
        self._source: Compiled = self.compiled
        if base is not None:
            try:
                self.base = plan_query(base, stream, access=access, periodic=periodic)
            except InvalidInput:
                if access is not None:
                    raise
                self.base = None
        else:
            if access not in (None, AccessPath.WINDOW):
                raise InvalidInput(f"access path {str(access)!r} cannot answer this query (best: 'window')")
            self.base = None
        if self.base is not None:
            self.bound = self.base.bound
            self.access = self.base.access
            self.aggs = self.base.aggs
            self.supports_remove = self.base.supports_remove
            self.read = self.base.read  # type: ignore[method-assign]
            self.memo_key = self.base.memo_key  # its reads are the base plan's (store/memo.py)
        else:
            self.bound = BoundQuery(query, self.n_q, every, None, None, [], [], (), [], None)
            self.access = AccessPath.WINDOW
            self.aggs = []
            self.supports_remove = True
            self.memo_key = None  # Arrow columns per sub-window: not kept (store/memo.py)
            first = self.inner or self.compiled
            self._columns = first.columns
            self._pushdown = first.where is not None and not first.uses_now
            self._source = first

    # -- reading -------------------------------------------------------------------------------------
    def read(self, sub) -> Any:  # replaced by the base plan's on the synopsis path
        types = self.stream.schema.types
        cols = {c: _decode(sub.columns[c], sub.columns.get("?" + c), types[c], self.strings) for c in self._columns}
        rows = sub.rows
        if self._pushdown:
            mask = evaluate(self._source.where, Batch(cols, rows, None), self._source.type)  # type: ignore[arg-type]  # pushed down: a WHERE
            cols = _filter(cols, mask)
            rows = int(pc.sum(_mask(mask).cast(pa.int64())).as_py() or 0)
        return sub.end_ms, rows, cols

    # -- finishing -----------------------------------------------------------------------------------
    def finish(self, partial):
        from .planner.plan import Answer
        if self.base is not None:
            answer = self.base.finish(partial)
            return Answer(self.labels, self._from_base(answer), answer.access, types=self.types)
        parts = partial.ordered()
        now = max((p[0] for p in parts), default=None)
        rows = sum(p[1] for p in parts)
        columns = {c: (pa.concat_arrays([p[2][c] for p in parts]) if parts else
                       pa.array([], type=arrow_type(_storage(self.stream.schema.types[c])))) for c in self._columns}
        source = self._source
        if self._pushdown:  # WHERE already applied per sub-window
            source = _without_where(source)
        if self.inner is not None:
            inner_rows = run(source, columns, rows, now)
            columns = {lab: _arrow_column([r[i] for r in inner_rows], t, lab)
                       for i, (lab, t) in enumerate(zip(self.inner.labels, self.inner.types))}
            out = run(self.compiled, columns, len(inner_rows), now)
        else:
            out = run(source, columns, rows, now)
        return Answer(self.labels, out, str(self.access), types=self.types)

    def _from_base(self, answer) -> list[tuple]:
        c = self.compiled
        n = len(answer.rows)
        k = len(c.keys)
        gcols: dict[str, pa.Array | None] = {}
        raw: dict[str, list] = {}
        for j in range(k + len(c.aggs)):
            name = f"#k{j}" if j < k else f"#a{j - k}"
            values = [r[j] for r in answer.rows]
            raw[name] = values
            typ = c.type(c.keys[j] if j < k else c.aggs[j - k])
            try:
                gcols[name] = pa.array(values, type=arrow_type(_storage(typ)))
            except (pa.ArrowInvalid, OverflowError):
                gcols[name] = None
        return run(c, {}, 0, None, grouped_input=(gcols, raw, n))

    def probes_now(self) -> bool:
        return self.base is not None and self.base.probes_now()

    def probe(self):
        from .planner.plan import Answer
        answer = self.base.probe()  # only where probes_now(): a base plan
        return Answer(self.labels, self._from_base(answer), answer.access, types=self.types)

    def explain(self) -> dict:
        if self.base is not None:
            out = self.base.explain()
            out["expressions"] = ("computed over the finished groups: the grouping is a plain query answered "
                                  f"on the {self.access} path")
        else:
            out = {"access": self.access, "how": "a scan of the rows of each sub-window, one per read (expressions "
                   "over the rows need the rows)", "streams": [self.stream.name], "subwindows": self.n_q,
                   "reads": self.n_q, "group_by": [sql(k) for k in self.compiled.keys],
                   "aggregates": [(sql(a), a.name, "rows") for a in self.compiled.aggs]}
            out["expressions"] = "computed over the rows of each sub-window"
        return out


def _storage(t: str) -> str:
    return "int64" if t in TEMPORAL or t == "int128" else t


def _without_where(c: Compiled) -> Compiled:
    import copy
    out = copy.copy(c)
    out.where = None
    return out


def _arrow_column(values: list, typ: str, label: str) -> pa.Array:
    try:
        return pa.array(values, type=arrow_type(_storage(typ)))
    except (pa.ArrowInvalid, OverflowError):
        raise InvalidInput(f"the sub-query's column {label!r} holds a value beyond BIGINT") from None


_NULLS_TEXT = {None: "", True: " NULLS FIRST", False: " NULLS LAST"}


def select_text(query) -> str:
    """The text of a query with expressions (parses back to an equal query)."""
    from .query_text import quote_name
    sel: Select = query.expr

    def one(s: Select, source: str) -> str:
        items = ", ".join(sql(it.expr) + (f" AS {quote_name(it.alias)}" if it.alias else "") for it in s.items)
        out = f"SELECT {'DISTINCT ' if s.distinct else ''}{items} FROM {source}"
        if s.where is not None:
            out += f" WHERE {sql(s.where)}"
        if s.group_by:
            out += " GROUP BY " + ", ".join(sql(g) for g in s.group_by)
        if s.having is not None:
            out += f" HAVING {sql(s.having)}"
        if s.order_by:
            out += " ORDER BY " + ", ".join(sql(o.expr) + (" DESC" if o.descending else "") +
                                            _NULLS_TEXT[o.nulls_first]
                                            for o in s.order_by)
        if s.limit is not None:
            out += f" LIMIT {s.limit}"
        return out

    from .query_text import _length_text
    window = ([f"RANGE {_length_text(query.range)}"] if query.range is not None else []) + \
        ([f"SLIDE {_length_text(query.slide)}"] if query.slide is not None else [])
    source = quote_name(query.stream) + (f" [{' '.join(window)}]" if window else "")
    if query.as_of_slide is not None:
        source += f" AS OF SLIDE {query.as_of_slide}"
    if sel.inner is not None:
        return one(sel, f"({one(sel.inner, source)})")
    return one(sel, source)
