"""Plans a bound query (binder.py) against a stream and picks its access path.

Access paths, best first:
- probe: one atomic read of the window-level synopses (running prefix COUNT/integer SUM, interval
  MIN/MAX), whatever the window length; with GROUP BY a declared string column, of its running
  per-key COUNT/integer SUM (key_running.py). Exact. No filter.
- synopsis: a scan of the per-sub-window basic interval synopses (per-column COUNT/SUM/MIN/MAX,
  per-key COUNT/SUM of declared group-by columns, top-k lists). Exact, except APPROXIMATE top k.
- window: a scan of the raw rows of each sub-window, with filters. Exact. GROUP BY several columns
  always takes this path: the synopses are kept per single column.

Which path answers which aggregate is each function's own statement (functions.py). HAVING filters
the finished groups, so it takes whatever path its aggregates (selected or hidden) allow.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from decimal import Decimal, localcontext
from typing import Any

import numpy as np

from .aggregates import Partial
from .binder import BoundQuery, KeyRef, bind
from .errors import InvalidInput
from .query import Query
from .schema import decimal_type
from .stream import Stream
from .subwindow import SubWindow
from .synopsis import NULL_KEY, group_keys, keys_with_nulls, merge_topk_lists
from .window import COUNT_KEY


@dataclass
class Answer:
    columns: list[str]
    rows: list[tuple]
    access: str
    exact: bool = True
    guaranteed: bool | None = None  # APPROXIMATE top k: provably the true top k
    types: list[str] | None = None  # int64, int128, float64 or string per column


class Plan:
    def __init__(self, bound: BoundQuery, stream: Stream, access: str):
        self.bound = bound
        self.query: Query = bound.query
        self.stream = stream
        self.strings = stream.strings
        self.n_q = bound.n_q
        self.access = access
        self.aggs = bound.aggs
        self.labels = bound.columns
        self.types = bound.types
        self.supports_remove = all(b.fn.removable for b in bound.aggs)
        self.as_of: int | None = bound.query.as_of_slide  # AS OF SLIDE k: a pinned read (see the scheduler)
        self._string_key = bound.group_type == "string"
        self._scales = [(i, decimal_type(t)[1]) for i, t in enumerate(self.types) if t.startswith("decimal(")]
        self._key_columns = tuple(dict.fromkeys(a.column for a in self.aggs if a.column))  # (running per-key totals)
        # Resolved once: a read is on the hot path of every query (one per sub-window).
        if bound.projection:
            self.read = self._read_projection
        elif access == "window":
            self.read = self._read_rows
        elif bound.approximate:
            g = bound.group_by
            self.read = lambda sub: sub.synopsis.by_key[g].topk
        elif bound.group_by is None:
            getters = [b.fn.read_synopsis(b) for b in bound.aggs]
            self.read = lambda sub: tuple(get(sub) for get in getters)
        else:
            self.read = self._read_key_synopsis

    # -- reading: one sub-window at a time -----------------------------------------------------
    def read(self, sub: SubWindow) -> Any:  # replaced per instance in __init__
        raise AssertionError("unreachable")

    def _read_rows(self, sub: SubWindow) -> Any:
        b = self.bound
        cols = sub.columns
        mask = self._mask(cols, sub.rows) if b.where else None
        sel = (lambda c: cols[c][mask]) if mask is not None else (lambda c: cols[c])
        rows = int(np.count_nonzero(mask)) if mask is not None else sub.rows
        strings = self.strings

        def valid(c):  # the selected rows' validity of c, or None when they hold no null
            m = cols.get("?" + c)
            if m is None:
                return None
            m = m[mask] if mask is not None else m
            return None if m.all() else m

        if b.group_by is None:
            out = []
            for a in self.aggs:
                values = None
                if a.column:
                    values, m = sel(a.column), valid(a.column)
                    values = values if m is None else values[m]
                out.append(a.fn.from_rows(a, values, rows, strings))
            return tuple(out)
        if len(b.group_keys) > 1:
            keys = composite_keys([(sel(c), valid(c)) for c in b.group_keys])
        else:
            keys = keys_with_nulls(sel(b.group_by), valid(b.group_by))
        uniq, inverse = group_keys(keys, dense=self._string_key and len(b.group_keys) == 1)
        parts = []
        for a in self.aggs:
            if not a.column:
                parts.append(a.fn.from_group_rows(a, inverse, len(uniq), None, keys, strings))
                continue
            values, m = sel(a.column), valid(a.column)
            if m is None:
                parts.append(a.fn.from_group_rows(a, inverse, len(uniq), values, keys, strings))
            else:
                parts.append(a.fn.from_group_rows(a, inverse[m], len(uniq), values[m], keys[m], strings))
        return (uniq, tuple(parts))

    def _read_projection(self, sub: SubWindow) -> Any:
        """A projection's share of one sub-window: its selected rows' columns, with their validity."""
        cols = sub.columns
        mask = self._mask(cols, sub.rows) if self.bound.where else None
        out = []
        for c in dict.fromkeys(self.bound.projection):
            values, valid = cols[c], cols.get("?" + c)
            if mask is not None:
                values, valid = values[mask], (None if valid is None else valid[mask])
            out.append((c, values, valid))
        return out

    def _projection_rows(self, contributions: list) -> list[tuple]:
        b = self.bound
        by_column = {}
        for i, c in enumerate(dict.fromkeys(b.projection)):
            typ = self.stream.schema.types[c]
            values = [v for part in contributions for v in self._decode(part[i][1], typ)]
            valid = [part[i][2] for part in contributions]
            if any(m is not None for m in valid):
                flags = [ok for part, m in zip(contributions, valid)
                         for ok in (m.tolist() if m is not None else [True] * len(part[i][1]))]
                values = [v if ok else None for v, ok in zip(values, flags)]
            by_column[c] = values
        return list(zip(*(by_column[c] for c in b.projection)))

    def _decode(self, values: np.ndarray, typ: str) -> list:
        if typ == "string":
            return self.strings.decode(values) if len(values) else []
        if typ == "boolean":
            return [bool(v) for v in values.tolist()]
        return values.tolist()

    def _read_key_synopsis(self, sub: SubWindow) -> Any:
        ks = sub.synopsis.by_key[self.bound.group_by]
        return ks.keys, tuple([a.fn.read_key_synopsis(a, ks) for a in self.aggs])

    def _mask(self, cols, rows: int) -> np.ndarray:
        out = None
        for conj in self.bound.where:
            m = None
            for p in conj:  # each predicate's mask is a new array: the next ones are ANDed into the first
                pm = p.mask(cols[p.column], self.strings, cols.get("?" + p.column))
                m = pm if m is None else np.logical_and(m, pm, out=m)
            m = np.ones(rows, dtype=bool) if m is None else m
            out = m if out is None else (out | m)
        return out

    # -- finishing -----------------------------------------------------------------------------
    def finish(self, partial: Partial) -> Answer:
        b = self.bound
        contributions = partial.ordered()
        if b.projection:
            rows = self._projection_rows(contributions)
            if b.projection_order:  # ties keep window order
                rows = [rows[i] for i in sorted_positions(len(rows), [([r[item] for r in rows], descending)
                                                                      for item, descending in b.projection_order])]
            return self._answer(rows if b.limit is None else rows[:b.limit])
        if b.approximate:
            return self._approximate(contributions)
        if b.group_by is None:
            values = [a.fn.finish(a, [c[i] for c in contributions], self.strings) for i, a in enumerate(self.aggs)]
            return self._answer(self._limit(self._having_one(values)))
        return self._groups_answer(contributions)

    def _having_one(self, values: list) -> list[tuple]:
        """The one row of a query without GROUP BY, unless HAVING drops it."""
        b = self.bound
        if b.having is not None and not b.having.keep(1, lambda ref: [values[ref[1]]])[0]:
            return []
        return [tuple(values[it.agg] for it in b.items)]

    def _groups_answer(self, contributions: list) -> Answer:
        keys, results = self._finish_groups(contributions)
        keys, results = self._top_candidates(keys, results)
        rows = self._group_rows(keys, results)
        if self.bound.outer:
            rows = [self._outer_row(rows)]
        return self._answer(rows)

    def _answer(self, rows: list[tuple], **kw) -> Answer:
        scales = self._scales
        if scales:  # decimal results are computed on value * 10**s integers: as Decimals now
            rows = [tuple(_decimal(r[i], dict(scales)[i]) if i in dict(scales) else v for i, v in enumerate(r))
                    for r in rows]
        return Answer(self.labels, rows, self.access, types=self.types, **kw)

    def _limit(self, rows: list[tuple]) -> list[tuple]:
        limit = self.bound.limit
        return rows if limit is None else rows[:limit]

    def _finish_groups(self, contributions: list) -> tuple[np.ndarray, list[np.ndarray]]:
        if not contributions:
            return np.empty(0, dtype=np.int64), [np.empty(0) for _ in self.aggs]
        if len(contributions) == 1:  # its keys are sorted and unique: nothing to merge
            keys, parts = contributions[0]
            return keys, [a.fn.finish_unique(a, parts[i], keys, self.strings) for i, a in enumerate(self.aggs)]
        uniq, inverse = group_keys(np.concatenate([c[0] for c in contributions]),
                                   dense=self._string_key and len(self.bound.group_keys) == 1)
        g = len(uniq)
        return uniq, [a.fn.finish_groups(a, inverse, g, [c[1][i] for c in contributions], uniq, self.strings)
                      for i, a in enumerate(self.aggs)]

    def _top_candidates(self, keys: np.ndarray, results: list[np.ndarray]):
        """With ORDER BY an aggregate and LIMIT k, only keys whose value ties or beats the k-th
        best can make the answer: keep those before decoding and sorting."""
        b = self.bound
        if not b.order or b.limit is None or len(keys) <= 4 * b.limit or b.limit == 0 or b.having is not None:
            return keys, results
        agg, descending = b.order[0]
        if not isinstance(agg, int) or results[agg].dtype.kind not in "if":
            return keys, results
        col = results[agg]
        if descending:
            pos = len(col) - b.limit
            keep = col >= np.partition(col, pos)[pos]
        else:
            keep = col <= np.partition(col, b.limit - 1)[b.limit - 1]
        return keys[keep], [r[keep] for r in results]

    def _group_rows(self, keys: np.ndarray, results: list[np.ndarray]) -> list[tuple]:
        b = self.bound
        if len(b.group_keys) > 1:
            columns = decode_composite_keys(keys, b.group_types, self.strings)
        else:
            columns = [decode_keys(keys, b.group_type, self.strings)]
        values = [r.tolist() for r in results]
        if b.having is not None:  # HAVING: only the groups whose condition is true
            keep = b.having.keep(len(columns[0]), lambda ref: values[ref[1]] if ref[0] == "agg" else columns[ref[1]])
            columns = [[v for v, k in zip(col, keep) if k] for col in columns]
            values = [[v for v, k in zip(col, keep) if k] for col in values]
        return group_rows(columns[0], values, b.order, b.limit, b.items, columns[1:])

    def _outer_row(self, rows: list[tuple]) -> tuple:
        out = []
        for a, item in self.bound.outer:
            values = rows if item is None else [r[item] for r in rows]
            out.append(a.fn.over(a, values))
        return tuple(out)

    def _approximate(self, contributions: list) -> Answer:
        b = self.bound
        est = merge_topk_lists(contributions, b.limit)
        keys = decode_keys(np.asarray(est.keys, dtype=object if any(k == NULL_KEY for k in est.keys) else None),
                           b.group_type, self.strings)
        rows = [tuple(k if it.agg is None else lo for it in b.items) for k, lo in zip(keys, est.lower)]
        return self._answer(rows, exact=False, guaranteed=est.guaranteed)

    # -- the probe path ----------------------------------------------------------------------------
    def explain(self) -> dict:
        """What this plan reads, for `windowstore explain`: its access path and why, the
        sub-windows its window covers, how many reads the scheduler makes, and per aggregate where
        its value comes from."""
        if self.access == "probe" and self.probes_now():
            reads, how = 1, ("one read of the window-level synopses of the current state: running totals "
                             "(COUNT, integer SUM), dyadic MIN/MAX blocks, running per-key totals")
        elif self.access in ("probe", "synopsis"):
            reads, how = self.n_q, ("the per-sub-window synopses (counts, sums, minima and maxima, per key and "
                                    "top-k lists), one sub-window per read, merged")
        else:
            why = ("WHERE" if self.bound.where else "a projection" if self.bound.projection else
                   "several GROUP BY columns" if len(self.bound.group_keys) > 1 else
                   "an aggregate no synopsis answers")
            reads, how = self.n_q, f"a scan of the rows of each sub-window, one per read ({why} needs the rows)"
        if self.access == "window":
            source = "rows"
        elif self.bound.approximate:
            source = "top-k lists"
        else:
            source = "per-key synopses" if self.bound.group_by is not None else "synopses"
        return {"access": self.access, "how": how, "streams": [self.stream.name], "subwindows": self.n_q,
                "reads": reads, "group_by": list(self.bound.group_keys),
                "aggregates": [(b.label, b.fn.name, source) for b in self.aggs]}

    def probes_now(self) -> bool:
        """Whether probe() answers from window-level synopses now. A GROUP BY's running per-key
        totals may not be kept (key_running.py): it is then read sub-window by sub-window, as a
        synopsis scan (its `read`), so that a long merge does not become one atomic operation."""
        g = self.bound.group_by
        return g is None or self.stream.window.running_keys[g].kept(self.stream.window.latest)

    def probe(self) -> Answer:
        """Answer from the window-level synopses in one atomic read of the current state."""
        w = self.stream.window
        if self.bound.group_by is not None:  # (only while probes_now(): otherwise it is scanned)
            ks = w.key_totals(self.bound.group_by, self.n_q, self._key_columns)
            return self._groups_answer([(ks.keys, tuple([a.fn.read_key_synopsis(a, ks) for a in self.aggs]))])
        count = w.running_total(COUNT_KEY, self.n_q)
        values = [a.fn.probe(a, w, self.n_q, count) for a in self.aggs]
        return self._answer(self._limit(self._having_one(values)))


def _decimal(n: int | None, scale: int) -> Decimal | None:
    """The integer n * 10**-scale as a Decimal with exactly `scale` places (None stays NULL)."""
    if n is None:
        return None
    with localcontext() as ctx:
        ctx.prec = 80
        return Decimal(int(n)).scaleb(-scale).quantize(Decimal(1).scaleb(-scale))


def decode_keys(keys: np.ndarray, typ: str | None, strings) -> list:
    """Group keys as answer values, the null group's key (synopsis.keys_with_nulls) as None."""
    if typ == "string":
        codes = keys.astype(np.int64, copy=False)
        if len(codes) and codes.min() < 0:
            return [None if c < 0 else v for c, v in zip(codes.tolist(), strings.decode(np.maximum(codes, 0)))]
        return strings.decode(codes)
    if typ == "boolean":
        return [None if k == 2 else bool(k) for k in keys.tolist()]
    return [None if k == NULL_KEY else k for k in keys.tolist()]


# -- GROUP BY several columns -------------------------------------------------------------------------
# One sub-window's composite keys are one fixed-width byte string per row, so that every step that
# works on a single key column (np.unique, searchsorted, the functions' per-key merges) works on
# them unchanged. Per column: a byte 1 (a value) or 2 (NULL), then the value as an int64 (dictionary
# code, boolean, integer, temporal or decimal storage) with its sign bit flipped, in ten 7-bit groups,
# most significant first, each with its high bit set. No byte is ever 0 (NumPy's fixed-width bytes
# treat trailing zeros as padding), and equal keys are equal strings.
_GROUPS = 10
_KEY_WIDTH = 1 + _GROUPS


def composite_keys(columns: list[tuple[np.ndarray, np.ndarray | None]]) -> np.ndarray:
    """One byte string per row of the key columns [(values, validity or None)], as described above."""
    n = len(columns[0][0])
    out = np.empty((n, _KEY_WIDTH * len(columns)), dtype=np.uint8)
    for j, (values, valid) in enumerate(columns):
        u = values.astype(np.int64, copy=False).view(np.uint64) ^ np.uint64(1 << 63)
        base = j * _KEY_WIDTH
        if valid is None:
            out[:, base] = 1
        else:
            u = np.where(valid, u, np.uint64(0))
            out[:, base] = np.where(valid, 1, 2)
        for g in range(_GROUPS):
            shift = np.uint64(7 * (_GROUPS - 1 - g))
            out[:, base + 1 + g] = ((u >> shift) & np.uint64(0x7F)).astype(np.uint8) | 0x80
    return out.view(f"S{out.shape[1]}").reshape(n)


def decode_composite_keys(keys: np.ndarray, types: list[str], strings) -> list[list]:
    """The key columns' answer values (None for NULL) of composite keys, one list per column."""
    width = _KEY_WIDTH * len(types)
    if keys.dtype.kind != "S" or not len(keys):
        return [[] for _ in types]
    raw = np.frombuffer(keys.tobytes(), dtype=np.uint8).reshape(len(keys), width)
    out = []
    for j, typ in enumerate(types):
        base = j * _KEY_WIDTH
        u = np.zeros(len(keys), dtype=np.uint64)
        for g in range(_GROUPS):
            u = (u << np.uint64(7)) | (raw[:, base + 1 + g] & 0x7F).astype(np.uint64)
        values = (u ^ np.uint64(1 << 63)).view(np.int64)
        null = raw[:, base] == 2
        if typ == "string":
            decoded = strings.decode(np.where(null, 0, values)) if (~null).any() else [None] * len(keys)
        elif typ == "boolean":
            decoded = [bool(v) for v in values.tolist()]
        else:
            decoded = values.tolist()
        out.append([None if z else v for z, v in zip(null.tolist(), decoded)])
    return out


def sorted_positions(n: int, keys: list[tuple[list, bool]]) -> list[int]:
    """0..n-1 ordered by each (column, descending) of `keys`, the first deciding first. Python's sort
    is stable (also with reverse=True), so ties keep their order; NULL sorts last either way."""
    order = list(range(n))
    for col, descending in reversed(keys):
        order.sort(key=_nulls_last(col, descending), reverse=descending)
    return order


def group_rows(key_values: list, agg_cols: list[list], order: list[tuple[int | KeyRef | None, bool]],
               limit: int | None, items, more_keys: list[list] = ()) -> list[tuple]:
    """A grouped answer's rows: ordered by the ORDER BY items (`order`: an aggregate's index, None
    for the key, KeyRef(i) for the i-th of several keys), then by the keys in GROUP BY order; LIMIT;
    one value per select item (`items[i].agg`: its aggregate, or None for the key `items[i].key`).
    `more_keys`: the columns of the second and later keys. Shared by single-stream queries and joins."""
    keys = [key_values, *more_keys]

    def column(agg):
        if agg is None:
            return key_values
        return keys[agg.index] if isinstance(agg, KeyRef) else agg_cols[agg]

    positions = sorted_positions(len(key_values), [(column(agg), d) for agg, d in order] + [(k, False) for k in keys])
    if limit is not None:
        positions = positions[:limit]
    by_item = [keys[it.key] if it.agg is None else agg_cols[it.agg] for it in items]
    if len(positions) > 1:  # reorder each column at C speed (itemgetter), then zip into rows
        pick = operator.itemgetter(*positions)
        return list(zip(*[pick(col) for col in by_item]))
    return [tuple(col[r] for col in by_item) for r in positions]


def _nulls_last(col: list, descending: bool):
    """A sort key putting None after every value, ascending (reverse=False) or descending."""
    if not any(v is None for v in col):
        return col.__getitem__
    if descending:
        return lambda i: (col[i] is not None, 0 if col[i] is None else col[i])
    return lambda i: (col[i] is None, 0 if col[i] is None else col[i])


def plan_query(query: Query, stream: Stream, access: str | None = None) -> Plan:
    """Bind `query` to `stream` and choose the cheapest exact access path.

    `access` forces a path ('window' always works; 'synopsis' and 'probe' only where they answer
    the query): tests compare paths, operators diagnose."""
    bound = bind(query, stream.schema, stream.spec)
    best = _choose_access(bound, stream)
    if access is None or access == best:
        access = best
    elif access == "synopsis" and best == "probe" and _synopsis_answers(bound, stream):
        pass
    elif access != "window" or bound.approximate:
        raise InvalidInput(f"access path {access!r} cannot answer this query (best: {best!r})")
    return Plan(bound, stream, access)


def _synopsis_answers(b: BoundQuery, stream: Stream) -> bool:
    declared = set(stream.spec.group_by)
    if len(b.group_keys) > 1:
        return False
    if b.group_by is None:
        return all(a.fn.synopsis_ok(a, declared) for a in b.aggs)
    return b.group_by in declared and all(a.fn.key_synopsis_ok(a) for a in b.aggs)


def _choose_access(b: BoundQuery, stream: Stream) -> str:
    if b.approximate:
        return "synopsis"
    if b.where or b.projection or len(b.group_keys) > 1:
        return "window"
    # a probe reads the window-level synopses of the current state only: AS OF SLIDE scans
    if b.query.as_of_slide is None:
        if b.group_by is None and all(a.fn.probe_ok(a.input_type) for a in b.aggs):
            return "probe"
        if b.group_by in stream.window.running_keys and all(a.fn.key_running_ok(a) for a in b.aggs):
            return "probe"  # running per-key totals (key_running.py)
    return "synopsis" if _synopsis_answers(b, stream) else "window"


def run_plan(plan: Plan) -> Answer:
    """Execute a plan against the current window in one go (no concurrency: tests, tools)."""
    if plan.access == "probe" and plan.probes_now():  # (as the scheduler runs it)
        return plan.probe()
    partial = Partial()
    w = plan.stream.window
    subs = w.youngest(plan.n_q) if plan.as_of is None else w.as_of(plan.as_of, plan.n_q)
    for sub in subs:
        partial.add(sub.slide, plan.read(sub))
    return plan.finish(partial)
