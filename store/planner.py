"""Compiles a Query against a stream into a Plan and picks its access path.

Access paths, best first:
- probe: one atomic read of the window-level synopses (running prefix COUNT/integer SUM, interval
  MIN/MAX), whatever the window length. Exact. No filter, no GROUP BY.
- synopsis: a scan of the per-sub-window basic interval synopses (per-column COUNT/SUM/MIN/MAX,
  per-key COUNT/SUM of declared group-by columns, top-k lists). Exact, except APPROXIMATE top k.
- window: a scan of the raw rows of each sub-window, with filters. Exact.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from .aggregates import Partial, finish_groups, finish_scalar, group_part, scalar_over, scalar_part
from .errors import InvalidInput
from .query import Aggregate, KeyColumn, Predicate, Query
from .stream import Stream
from .subwindow import SubWindow
from .synopsis import group_keys, merge_topk_lists
from .window import COUNT_KEY

_SYNOPSIS_SCALAR = {"count", "sum", "avg", "min", "max"}
_SYNOPSIS_GROUP = {"count", "sum", "avg"}


@dataclass
class Answer:
    columns: list[str]
    rows: list[tuple]
    access: str
    exact: bool = True
    guaranteed: bool | None = None  # APPROXIMATE top k: provably the true top k


@dataclass
class Plan:
    query: Query
    stream: Stream
    n_q: int
    access: str
    aggs: list[Aggregate]
    labels: list[str]
    supports_remove: bool = True
    _string_cols: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        # Resolved once: a read is on the hot path of every query (one per sub-window).
        if self.access == "window":
            self.read = self._read_rows
        elif self.query.approximate:
            g = self.query.group_by
            self.read = lambda sub: sub.synopsis.by_key[g].topk
        elif self.query.group_by is None:
            getters = [_scalar_getter(a) for a in self.aggs]
            if len(getters) == 1:
                self.read = getters[0]  # a single aggregate's contribution is not wrapped
            else:
                self.read = lambda sub: tuple(get(sub) for get in getters)
        else:
            self.read = self._read_key_synopsis

    # -- reading: one sub-window at a time -----------------------------------------------------
    def read(self, sub: SubWindow) -> Any:  # replaced per instance in __post_init__
        raise AssertionError("unreachable")

    def _read_rows(self, sub: SubWindow) -> Any:
        cols = sub.columns
        mask = self._mask(cols, sub.rows) if self.query.where else None
        sel = (lambda c: cols[c][mask]) if mask is not None else (lambda c: cols[c])
        rows = int(mask.sum()) if mask is not None else sub.rows
        g = self.query.group_by
        if g is None:
            return tuple(scalar_part(a, sel(a.column) if a.column else None, rows) for a in self.aggs)
        keys = sel(g)
        uniq, inverse = group_keys(keys, dense=g in self._string_cols)
        return (uniq, tuple(group_part(a, inverse, len(uniq), sel(a.column) if a.column else None, keys) for a in self.aggs))

    def _read_key_synopsis(self, sub: SubWindow) -> Any:
        ks = sub.synopsis.by_key[self.query.group_by]
        parts = []
        for a in self.aggs:
            if a.func == "count":
                parts.append(ks.counts)
            elif a.func == "sum":
                parts.append(ks.sums[a.column])
            else:
                parts.append((ks.sums[a.column], ks.counts))
        return (ks.keys, tuple(parts))

    def _mask(self, cols: Mapping[str, np.ndarray], rows: int) -> np.ndarray:
        out = None
        for conj in self.query.where:
            m = np.ones(rows, dtype=bool)
            for p in conj:
                m &= self._predicate(p, cols[p.column])
            out = m if out is None else (out | m)
        return out

    def _predicate(self, p: Predicate, col: np.ndarray) -> np.ndarray:
        if p.column in self._string_cols:
            strings = self.stream.strings
            if p.op in ("=", "!="):
                hit = col == strings.lookup(p.value)
                return hit if p.op == "=" else ~hit
            if p.op in ("in", "not in"):
                hit = np.isin(col, [strings.lookup(v) for v in p.value])
                return hit if p.op == "in" else ~hit
            table = np.fromiter((_compare(s, p.op, p.value) for s in strings.values), dtype=bool, count=len(strings))
            return table[col] if len(col) else np.zeros(0, dtype=bool)
        if p.op in ("in", "not in"):
            hit = np.isin(col, np.array(p.value))
            return hit if p.op == "in" else ~hit
        return _compare(col, p.op, p.value)

    # -- finishing -----------------------------------------------------------------------------
    def finish(self, partial: Partial) -> Answer:
        q = self.query
        contributions = partial.ordered()
        if q.approximate:
            est = merge_topk_lists(contributions, q.limit)
            rows = [(self._decode_key(k), lo) for k, lo in zip(est.keys, est.lower)]
            return Answer(self.labels, rows, self.access, exact=False, guaranteed=est.guaranteed)
        if q.group_by is None:
            if self.access == "synopsis" and len(self.aggs) == 1:
                return Answer(self.labels, [(finish_scalar(self.aggs[0], contributions),)], self.access)
            row = tuple(finish_scalar(a, [c[i] for c in contributions]) for i, a in enumerate(self.aggs))
            return Answer(self.labels, [row], self.access)
        keys, results = finish_groups(self.aggs, contributions, dense=q.group_by in self._string_cols)
        keys, results = self._top_candidates(keys, results)
        rows = self._group_rows(keys, results)
        if q.outer:
            return Answer(self.labels, [self._outer_row(rows)], self.access)
        return Answer(self.labels, rows, self.access)

    def _top_candidates(self, keys: np.ndarray, results: list[np.ndarray]):
        """With ORDER BY an aggregate and LIMIT k, only keys whose value ties or beats the k-th
        best can make the answer: keep those before decoding and sorting."""
        q = self.query
        if not q.order_by or q.limit is None or len(keys) <= 4 * q.limit or q.outer:
            return keys, results
        item = q.items[q.order_by[0].item]
        if not isinstance(item, Aggregate):
            return keys, results
        col = results[self.aggs.index(item)]
        k = q.limit - 1
        if q.order_by[0].descending:
            keep = col >= -np.partition(-col, k)[k]
        else:
            keep = col <= np.partition(col, k)[k]
        return keys[keep], [r[keep] for r in results]

    def _group_rows(self, keys: np.ndarray, results: list[np.ndarray]) -> list[tuple]:
        q = self.query
        key_values = self._decode_keys(keys)
        agg_cols = [r.tolist() for r in results]
        by_item = []
        ai = 0
        for it in q.items:
            if isinstance(it, KeyColumn):
                by_item.append(key_values)
            else:
                by_item.append(agg_cols[ai])
                ai += 1
        rows = list(zip(*by_item)) if by_item and len(keys) else []
        order = list(range(len(rows)))
        order.sort(key=lambda r: key_values[r])  # deterministic: ties broken by key
        for ob in reversed(q.order_by):
            col = by_item[ob.item]
            order.sort(key=lambda r: col[r], reverse=ob.descending)
        if q.limit is not None:
            order = order[: q.limit]
        return [rows[r] for r in order]

    def _outer_row(self, rows: list[tuple]) -> tuple:
        labels = [it.label for it in self.query.items]
        out = []
        for a in self.query.outer:
            col = labels.index(a.column) if a.column else 0
            values = np.array([r[col] for r in rows]) if rows else np.empty(0)
            out.append(scalar_over(a, values))
        return tuple(out)

    def _decode_keys(self, keys: np.ndarray) -> list:
        if self.query.group_by in self._string_cols:
            return self.stream.strings.decode(keys)
        return keys.tolist()

    def _decode_key(self, key):
        return self.stream.strings.values[key] if self.query.group_by in self._string_cols else key

    # -- the probe path ----------------------------------------------------------------------------
    def probe(self) -> Answer:
        """Answer from the window-level synopses in one atomic read of the current state."""
        w = self.stream.window
        row = []
        count = w.running_total(COUNT_KEY, self.n_q)
        for a in self.aggs:
            if a.func == "count":
                row.append(count)
            elif a.func in ("sum", "avg"):
                s = w.running_total(a.column, self.n_q)
                row.append(None if count == 0 else (s if a.func == "sum" else s / count))
            else:
                lo, hi = w.interval_minmax(a.column, self.n_q)
                row.append(lo if a.func == "min" else hi)
        return Answer(self.labels, [tuple(row)], "probe")


def _scalar_getter(a: Aggregate):
    """Reads one aggregate's contribution off a sub-window's basic interval synopsis."""
    f, c = a.func, a.column
    if f == "count_distinct":
        return lambda sub: sub.synopsis.by_key[c].keys
    if f == "count":
        return lambda sub: sub.rows
    if f in ("sum", "avg"):
        def get(sub):
            cs = sub.synopsis.columns[c]
            return (cs.sum, cs.count)
        return get
    if f == "min":
        return lambda sub: sub.synopsis.columns[c].min
    return lambda sub: sub.synopsis.columns[c].max


def _compare(a, op: str, b):
    if op == "=":
        return a == b
    if op == "!=":
        return a != b
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    if op == ">=":
        return a >= b
    raise AssertionError(op)


def answer_types(query: Query, types: Mapping[str, str]) -> list[str]:
    """The type ('int64', 'float64', 'string') of each answer column, from the query and schema."""
    def agg_type(a: Aggregate, column_type) -> str:
        if a.func in ("count", "count_distinct"):
            return "int64"
        if a.func == "avg":
            return "float64"
        return column_type(a.column)

    inner = {}
    for it in query.items:
        inner[it.label] = types[it.column] if isinstance(it, KeyColumn) else agg_type(it, lambda c: types[c])
    if query.outer:
        return [agg_type(a, lambda c: inner[c]) for a in query.outer]
    return [inner[it.label] for it in query.items]


def window_length(query: Query, stream: Stream) -> int:
    """n_Q: how many of the youngest sub-windows the query reads."""
    spec = stream.spec
    r = query.range
    if r is None:
        return spec.subwindows
    return _subwindows(r, spec, "RANGE")


def slide_length(query: Query, stream: Stream) -> int | None:
    """m: a periodic query re-executes every m slides."""
    if query.slide is None:
        return None
    return _subwindows(query.slide, stream.spec, "SLIDE")


def _subwindows(r, spec, what: str) -> int:
    if r.unit == "subwindows":
        n = r.value
    elif r.unit == "ms":
        if spec.subwindow_ms is None:
            raise InvalidInput(f"{what} in time units needs a time-based window; this one is count-based (use ROWS or SUBWINDOWS)")
        if r.value % spec.subwindow_ms:
            raise InvalidInput(f"{what} {r.value} ms is not a multiple of the sub-window length {spec.subwindow_ms} ms")
        n = r.value // spec.subwindow_ms
    else:
        if spec.subwindow_rows is None:
            raise InvalidInput(f"{what} in ROWS needs a count-based window; this one is time-based")
        if r.value % spec.subwindow_rows:
            raise InvalidInput(f"{what} {r.value} rows is not a multiple of the sub-window size {spec.subwindow_rows} rows")
        n = r.value // spec.subwindow_rows
    if n > spec.subwindows:
        raise InvalidInput(f"{what} covers {n} sub-windows but the window holds {spec.subwindows}")
    return n


def plan_query(query: Query, stream: Stream, access: str | None = None) -> Plan:
    """Validate `query` against `stream` and choose the cheapest exact access path.

    `access` forces a path ('window' always works; 'synopsis' and 'probe' only where they answer
    the query): tests compare paths, operators diagnose."""
    schema = stream.schema
    types = schema.types
    strings = {c for c, t in schema.columns if t == "string"}
    aggs = [it for it in query.items if isinstance(it, Aggregate)]
    for it in query.items:
        schema.type_of(it.column) if isinstance(it, KeyColumn) or it.column else None
    if query.group_by is not None:
        schema.type_of(query.group_by)
        if types[query.group_by] == "float64":
            raise InvalidInput(f"GROUP BY column {query.group_by!r} must be string or int64", column=query.group_by)
    for a in aggs:
        if a.func in ("sum", "avg", "min", "max", "quantile") and types[a.column] == "string":
            raise InvalidInput(f"{a.func.upper()} needs a numeric column; {a.column!r} is a string", column=a.column)
    for conj in query.where:
        for p in conj:
            typ = schema.type_of(p.column)
            values = p.value if p.op in ("in", "not in") else (p.value,)
            for v in values:
                if (typ == "string") != isinstance(v, str):
                    raise InvalidInput(f"column {p.column!r} is {typ}; cannot compare it with {v!r}", column=p.column)
    n_q = window_length(query, stream)
    slide_length(query, stream)
    best = _choose_access(query, aggs, stream)
    if access is None or access == best:
        access = best
    elif access == "synopsis" and best == "probe" and all(a.func in _SYNOPSIS_SCALAR for a in aggs):
        pass
    elif access != "window" or query.approximate:
        raise InvalidInput(f"access path {access!r} cannot answer this query (best: {best!r})")
    labels = query.labels
    return Plan(query, stream, n_q, access, aggs, labels, True, strings)


def _choose_access(query: Query, aggs: list[Aggregate], stream: Stream) -> str:
    declared = set(stream.spec.group_by)
    int_cols = {c for c, t in stream.schema.columns if t == "int64"}
    if query.approximate:
        ok = (query.group_by in declared and len(aggs) == 1 and aggs[0].func == "count"
              and query.order_by and query.order_by[0].descending and query.limit and not query.where)
        if not ok:
            raise InvalidInput("APPROXIMATE needs GROUP BY a declared group-by column, one COUNT, ORDER BY it DESC and LIMIT, no WHERE")
        return "synopsis"
    if query.where:
        return "window"
    if query.group_by is None:
        if all(a.func == "count" or (a.func in ("sum", "avg") and a.column in int_cols) or a.func in ("min", "max") for a in aggs):
            return "probe"
        if all(a.func in _SYNOPSIS_SCALAR or (a.func == "count_distinct" and a.column in declared) for a in aggs):
            return "synopsis"
        return "window"
    if query.group_by in declared and all(a.func in _SYNOPSIS_GROUP for a in aggs):
        return "synopsis"
    return "window"


def run_plan(plan: Plan) -> Answer:
    """Execute a plan against the current window in one go (no concurrency: tests, tools)."""
    if plan.access == "probe":
        return plan.probe()
    partial = Partial()
    for sub in plan.stream.window.youngest(plan.n_q):
        partial.add(sub.slide, plan.read(sub))
    return plan.finish(partial)
