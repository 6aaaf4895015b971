"""A join plan and its incremental maintenance (thesis chapter 5): JoinPlan keeps the join result of
the sub-windows it has incorporated and brings it to the sub-windows a transaction read, then hands
it to the answer's producer (finish.Finisher, or synopsis.Intervals, or by_key for one-time
aggregates). It owns the per-plan state (prepared sub-windows, kept result rows or intervals, the
shared string ids); it must not aggregate (functions.py and the modules above do) nor choose the
order itself (order.py).

Sub-windows as the unit of incremental work. A window is a set of sub-windows, so its join is the
union, over every combination of one sub-window per source, of the join of that combination. A
JoinPlan keeps the join result computed so far (`J(C_1..C_k)` for the sets C_i of sub-windows it
has incorporated), each result row tagged with the (version, row) it took from every source, and
brings it to the sets L_i a transaction read:

- expiration: rows that used a sub-window no longer read are dropped (a vectorised filter on the
  version tags); sub-windows are recognised by identity, so a sub-window re-sealed under the same
  version (a string-dictionary compaction renumbers codes and swaps every live sub-window) counts
  as expired and new;
- evaluation of new sub-windows: the new sub-windows N_i of source i, as one group, join with what
  the other sources hold now, one source after another; the sources are processed in turn, each
  group joined with the others' already-updated sets, so every combination is computed exactly once
  (Algorithm 4, "Lazy Multi-Way Join", with a group = a new sub-window instead of tuples sharing a
  join value). Combinations of unexpired sub-windows are never recomputed.

Eager vs lazy (5.2.1, 5.2.2). `refresh(inputs)` does both steps without answering: called after
every slide of a joined stream it is eager evaluation and eager expiration (the join result is
maintained as sub-windows arrive; a query then only filters and aggregates). `evaluate(inputs)`
refreshes and answers: with no refresh between executions it is lazy evaluation (all new
sub-windows are joined at re-execution time, as groups). Both give the same answer: the join of the
windows the transaction read, never results that expired between executions (no-restore semantics
is what latest-window serializability asks for). `cache=False` keeps nothing between evaluations
(one-time queries).

Strings are dictionary-encoded per stream, so string join keys are translated to ids shared by the
plan (each distinct string once per dictionary: a Python loop only over strings not seen before).
Exact numbers of different types or scales (int64, decimal(p,s)) join by value: keys are rescaled to
the class's largest scale (exactly; a key that would leave int64 equals nothing).

Bound. Every intermediate and the kept result are limited to `max_rows` rows; a join that needs
more raises errors.ResourceLimit before allocating them, leaving the plan's state consistent.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..binder import Comparison
from ..dictionary import StringDictionary
from ..errors import InvalidInput, ResourceLimit
from ..exact import INT64_MAX
from ..join_binder import BoundJoin, ColumnRef, exact_number, scale_of
from ..planner import Answer
from ..query import JoinQuery
from ..schema import valid_key as _valid_key  # a column's validity mask in a sub-window (where it holds a null)
from ..subwindow import SubWindow
from .band import band_interval, band_mask, band_ranks, candidate_rows
from .by_key import aggregate_by_key, by_key_answers
from .finish import Finisher, typed_rows
from .index import DTYPES, Chunk, Combined, Inter, Prepared
from .order import OrderInputs, choose_order, probe_sequence
from .synopsis import Intervals, synopsis_answers
from .timing import TimingTotals, choose, describe_rule, interval_ok, probabilities, satisfied_mask

DEFAULT_MAX_ROWS = 2_000_000


@dataclass
class JoinStats:
    evaluations: int = 0
    groups: int = 0          # groups of new sub-windows joined with the other sources
    pairs_probed: int = 0    # (intermediate, sub-window) hash-join probes
    pairs_pruned: int = 0    # sub-windows skipped: outside every band interval, or empty
    rows_probed: int = 0     # intermediate rows that probed a sub-window (a band keeps the others out)
    rows_computed: int = 0   # result rows produced by new sub-windows
    rows_reused: int = 0     # result rows an evaluation kept from earlier ones
    rows_expired: int = 0    # result rows dropped with an expired sub-window
    order: tuple = ()        # the global join order last chosen (source indices)
    order_cost: float = 0.0
    orders_costed: int = 0
    by_key: int = 0          # evaluations answered from per-key aggregates, without joined rows
    timing: TimingTotals | None = None  # timing conditions: the access paths chosen and their counters


# -- the plan --------------------------------------------------------------------------------------------
class JoinPlan:
    """A bound join query and its evaluation state. `strings[i]` is the string dictionary of the
    stream of source i (FROM order)."""

    def __init__(self, bound: BoundJoin, strings: Sequence[StringDictionary], max_rows: int = DEFAULT_MAX_ROWS,
                 cache: bool = True, keep_rows: bool = False):
        """`keep_rows`: keep the result rows even where the pre-aggregated intervals could answer
        (a join synopsis shared by queries with other aggregates: shared.py)."""
        if len(strings) != len(bound.sources):
            raise InvalidInput(f"a join of {len(bound.sources)} sources needs {len(bound.sources)} dictionaries")
        if not isinstance(max_rows, int) or max_rows < 0:
            raise InvalidInput("max_rows must be a non-negative integer")
        self.bound = bound
        self.query: JoinQuery = bound.query
        self.strings = list(strings)
        self.max_rows = max_rows
        self.cache = cache
        self.k = len(bound.sources)
        self.labels = bound.columns
        self.types = bound.types
        self.stats = JoinStats(timing=TimingTotals() if bound.timings else None)
        self.timing_algorithm: str | None = None  # force one access path for timing steps (tests, bench)
        self._rate: float | None = None
        self._classes()
        self._filters()
        self.synopsis = cache and not keep_rows and synopsis_answers(bound)
        self.by_key_ok = by_key_answers(bound, self.residual)  # per-key partial aggregates can answer it
        self.by_key = not cache and self.by_key_ok
        self._gid: dict[str, int] = {}
        self._tables: dict[int, tuple[StringDictionary, int, np.ndarray]] = {}
        self.clear()

    @property
    def sources(self):
        return self.bound.sources

    def clear(self) -> None:
        """Forget every incorporated sub-window and result row."""
        self._prepared: list[dict[int, Prepared]] = [{} for _ in range(self.k)]
        self._incorporated: list[set[int]] = [set() for _ in range(self.k)]
        self._chunks: list[Chunk] = []
        self._combined: dict[tuple, Combined] = {}
        if getattr(self, "synopsis", False):
            self._intervals = Intervals(self.k, self.bound, self.strings)

    # -- static analysis of the conditions ------------------------------------------------------------
    def _classes(self) -> None:
        """Equality classes: columns made equal by the equalities, transitively (a.k = b.k and
        b.k = c.k join a and c on k too)."""
        parent: dict[tuple[int, str], tuple[int, str]] = {}

        def root(x):
            parent.setdefault(x, x)
            while parent[x] != x:
                x = parent[x]
            return x

        types: dict[tuple[int, str], str] = {}
        for e in self.bound.equalities:
            left, right = (e.left.source, e.left.column), (e.right.source, e.right.column)
            types[left], types[right] = e.left.type, e.right.type
            parent[root(left)] = root(right)
        roots = sorted({root(x) for x in parent})
        self.class_type = [types[r] for r in roots]
        cid = {r: i for i, r in enumerate(roots)}
        # Exact numbers of different types or scales (int64, decimal(p,s)) in one class compare by value:
        # every member's key is its value at the class's largest scale, value * 10**(S - s). A value
        # whose rescaled magnitude leaves int64 equals no value of the class (all of which are int64 at
        # scale S), so its row joins nothing (prepare drops it).
        top: dict[tuple[int, str], int] = {}
        for x, t in types.items():
            if exact_number(t):
                r = root(x)
                top[r] = max(top.get(r, 0), scale_of(t))
        self.factor: dict[tuple[int, str], int] = {x: 10 ** (top[root(x)] - scale_of(t)) for x, t in types.items()
                                                   if exact_number(t) and top[root(x)] > scale_of(t)}
        # per source: class -> its columns in the class (two columns of one source: equal to each other)
        self.class_cols: list[dict[int, list[str]]] = [{} for _ in range(self.k)]
        for x in sorted(parent):
            self.class_cols[x[0]].setdefault(cid[root(x)], []).append(x[1])
        self.adjacency: list[set[int]] = [set() for _ in range(self.k)]
        for c in range(len(roots)):
            members = [p for p in range(self.k) if c in self.class_cols[p]]
            for p in members:
                self.adjacency[p] |= set(members) - {p}
        self.band_cols: list[set[str]] = [set() for _ in range(self.k)]
        for b in self.bound.bands:
            self.adjacency[b.column.source].add(b.base.source)
            self.adjacency[b.base.source].add(b.column.source)
            self.band_cols[b.column.source].add(b.column.column)
            self.band_cols[b.base.source].add(b.base.column)
        self.timing_cols: list[set[str]] = [set() for _ in range(self.k)]
        for tc in self.bound.timings:
            self.adjacency[tc.left].add(tc.right)
            self.adjacency[tc.right].add(tc.left)
            for src in (tc.left, tc.right):
                self.timing_cols[src] |= set(tc.columns(src))
        # the columns of each source an ON condition reads: a NULL there makes the condition unknown
        self.cond_cols: list[list[str]] = [sorted(self.band_cols[p] | self.timing_cols[p]
                                                  | {n for ns in self.class_cols[p].values() for n in ns})
                                           for p in range(self.k)]

    def _filters(self) -> None:
        """WHERE pushed down to each source (selection before join): for source p, the OR over the
        conjunctions of their atoms on p; exact unless some conjunction mixes sources, in which case the
        whole condition is checked again on the joined rows."""
        where = self.bound.where
        self.pushdown: list[list[list[tuple[ColumnRef, Comparison]]] | None] = []
        for p in range(self.k):
            conjs = [[(r, c) for r, c in conj if r.source == p] for conj in where]
            self.pushdown.append(conjs if conjs and all(conjs) else None)
        touched = {r.source for conj in where for r, _ in conj}
        self.residual = len(where) > 1 and len(touched) > 1
        self.attr_cols: list[set[str]] = [set(c) | t for c, t in zip(self.band_cols, self.timing_cols)]
        if self.residual:
            for conj in where:
                for r, _ in conj:
                    self.attr_cols[r.source] |= {r.column, _valid_key(r.column)}

    # -- preparing sub-windows ------------------------------------------------------------------------
    def prepare(self, p: int, sub: SubWindow) -> Prepared:
        prep = self._prepared[p].get(sub.slide)
        if prep is not None and prep.sub is sub:
            return prep
        cols = sub.columns
        mask = None
        if self.pushdown[p] is not None:  # a comparison with a NULL is unknown: the row is dropped
            strings = self.strings[p]
            for conj in self.pushdown[p]:  # type: ignore[union-attr]  # not None: checked above
                m = np.ones(sub.rows, dtype=bool)
                for ref, cmp in conj:
                    m &= cmp.mask(cols[ref.column], strings, cols.get(_valid_key(ref.column)))
                mask = m if mask is None else (mask | m)
        for name in self.cond_cols[p]:  # NULL = anything and a band on NULL are unknown: the row joins nothing
            valid = cols.get(_valid_key(name))
            if valid is not None:
                mask = valid.copy() if mask is None else (mask & valid)
        for t in self.bound.timings:  # an interval a timing condition cannot read joins nothing
            if p in (t.left, t.right):
                lo, hi = t.columns(p)
                ok = interval_ok(cols[lo], cols[hi])
                mask = ok if mask is None else (mask & ok)
        values: dict[int, np.ndarray] = {}
        for c, names in self.class_cols[p].items():
            first = None
            for name in names:
                v = cols[name]
                f = self.factor.get((p, name))
                if f is not None:  # rescaled to the class's scale; beyond int64 it equals nothing
                    fits = (v <= INT64_MAX // f) & (v >= -(INT64_MAX // f))
                    mask = fits if mask is None else (mask & fits)
                    v = np.where(fits, v, 0) * f
                if first is None:
                    first = values[c] = v
                else:  # two columns of this source in one class must be equal
                    m = first == v
                    mask = m if mask is None else (mask & m)
        if mask is None:  # every row kept: the keys are the columns themselves (read only)
            sel = np.arange(sub.rows, dtype=np.int64)
            keys = {c: self._key(p, c, values[c]) for c in self.class_cols[p]}
        else:
            sel = np.flatnonzero(mask)
            keys = {c: self._key(p, c, values[c][sel]) for c in self.class_cols[p]}
        prep = Prepared(sub, sel.astype(np.int64, copy=False), keys)
        self._prepared[p][sub.slide] = prep
        return prep

    def _key(self, p: int, c: int, values: np.ndarray) -> np.ndarray:
        typ = self.class_type[c]
        if typ == "string":
            return self._gids(p, values)
        if typ == "float64":
            return values + 0.0  # -0.0 and 0.0 are one key
        return values

    def _gids(self, p: int, codes: np.ndarray) -> np.ndarray:
        """Stream-local string codes -> ids shared by every source of the plan (by string value)."""
        d = self.strings[p]
        entry = self._tables.get(id(d))
        if entry is None or entry[0] is not d or entry[1] != d.generation:
            table = np.full(len(d), -1, dtype=np.int64)
        else:
            table = entry[2]
            if len(table) < len(d):
                table = np.concatenate([table, np.full(len(d) - len(table), -1, dtype=np.int64)])
        if len(codes):
            u = np.unique(codes)
            missing = u[table[u] < 0]
            gid, values = self._gid, d.values
            for code in missing.tolist():
                table[code] = gid.setdefault(values[code], len(gid))
        self._tables[id(d)] = (d, d.generation, table)
        return table[codes] if len(codes) else np.empty(0, dtype=np.int64)

    # -- bringing the state to the sub-windows read ----------------------------------------------------
    def refresh(self, inputs: Sequence[Sequence[SubWindow]]) -> None:
        """Make the kept join result the join of `inputs` (per source, the sub-windows read): drop
        rows of sub-windows no longer read, join the new ones. Eager maintenance calls this after
        every slide of a joined stream; evaluate() calls it first."""
        if len(inputs) != self.k:
            raise InvalidInput(f"a join of {self.k} sources needs {self.k} lists of sub-windows")
        inputs = [list(subs) for subs in inputs]
        for p, subs in enumerate(inputs):
            current = {sub.slide: sub for sub in subs}
            gone = [v for v in self._incorporated[p] if v not in current
                    or (v in self._prepared[p] and self._prepared[p][v].sub is not current[v])]
            gone += [v for v, prep in self._prepared[p].items() if v not in current and v not in gone]
            if gone:
                self._expire(p, gone)
        if len(self._gid) > 65_536 and len(self._gid) > 4 * sum(len(d) for d in {id(d): d for d in self.strings}.values()):
            # Shared ids of strings long gone from every dictionary: number the strings afresh. Only
            # the prepared keys depend on them (result rows hold row numbers), and every incorporated
            # sub-window is among the inputs now, so it is prepared again just below.
            self._gid, self._tables = {}, {}
            self._prepared = [{} for _ in range(self.k)]
        preps = [[self.prepare(p, sub) for sub in subs] for p, subs in enumerate(inputs)]
        new = [[pr for pr in preps[p] if pr.sub.slide not in self._incorporated[p]] for p in range(self.k)]
        self.stats.rows_reused += self._kept_rows()
        if not any(new):
            return
        order = self._order(inputs, preps)
        for p in reversed(order):  # the global first source last: the first computation starts from it
            if new[p]:
                self._incorporate(p, new[p], order)

    def _kept_rows(self) -> int:
        if self.synopsis:
            return self._intervals.rows
        return sum(ch.n for ch in self._chunks)

    def _expire(self, p: int, versions: list[int]) -> None:
        gone = np.array(sorted(set(versions)), dtype=np.int64)
        if self.synopsis:
            self.stats.rows_expired += self._intervals.expire(p, gone)
        kept = []
        for ch in self._chunks:
            hit = np.isin(ch.ver[p], gone)
            if hit.any():
                self.stats.rows_expired += int(hit.sum())
                keep = ~hit
                if keep.any():
                    kept.append(Chunk(ch.ver[:, keep], ch.row[:, keep]))
            else:
                kept.append(ch)
        self._chunks = kept
        for v in versions:
            self._incorporated[p].discard(v)
            self._prepared[p].pop(v, None)

    def _order(self, inputs, preps) -> list[int]:
        if self.k == 2:
            # Two sources: both orders cost the same (5.3.1: each source probes the other), and the
            # heuristic keeps FROM order; no need to count distinct values.
            self.stats.order, self.stats.order_cost, self.stats.orders_costed = (0, 1), 0.0, 1
            return [0, 1]
        size, rate, distinct, spans = [], [], [], []
        for p in range(self.k):
            n = float(sum(pr.n for pr in preps[p]))
            subs = inputs[p]
            span = max(1, max(s.end_ms for s in subs) - min(s.start_ms for s in subs)) if subs else 1
            size.append(n)
            spans.append(float(span))
            rate.append(n / span)
            dv = {}
            for c in self.class_cols[p]:
                parts = [pr.uniq(c) for pr in preps[p] if pr.n]
                dv[c] = float(len(np.unique(np.concatenate(parts)))) if parts else 0.0
            distinct.append(dv)
        band_sel: dict[tuple[int, int], float] = {}
        for b in self.bound.bands:
            i, j = sorted((b.column.source, b.base.source))
            span = max(spans[i], spans[j])
            if b.low is not None and b.high is not None:
                sel = min(1.0, max(0, b.high - b.low + 1) / span)
            else:
                sel = 0.5
            band_sel[(i, j)] = band_sel.get((i, j), 1.0) * sel
        m = OrderInputs(rate, size, distinct, band_sel, self.adjacency)
        order, cost, costed = choose_order(m)
        self.stats.order, self.stats.order_cost, self.stats.orders_costed = tuple(order), cost, costed
        return order

    def _incorporate(self, p: int, group: list[Prepared], order: list[int]) -> None:
        others = [q for q in range(self.k) if q != p]
        # With no (selected) row in some other source, the new sub-windows join with nothing.
        if all(any(self._prepared[q][v].n for v in self._incorporated[q]) for q in others):
            self.stats.groups += 1
            starts = [pr.sub.start_ms for pr in group if pr.sub.start_ms is not None]
            ends = [pr.sub.end_ms for pr in group if pr.sub.end_ms is not None]
            span = (max(ends) - min(starts)) if starts and ends else 0
            self._rate = sum(pr.n for pr in group) * 1000.0 / span if span > 0 else None
            inter = self._start(p, group)
            for q in probe_sequence(p, order, self.adjacency)[1:]:
                if inter.n == 0:
                    break
                inter = self._join_step(inter, q)
            if inter.n and self.residual:
                inter = inter.filter(self._residual_mask(inter))
            if inter.n and self.synopsis:
                self._intervals.add(inter, self.gather, self.max_rows, self.too_many)
                self.stats.rows_computed += inter.n
            elif inter.n:
                total = sum(ch.n for ch in self._chunks) + inter.n
                if total > self.max_rows:
                    self.too_many(total, "the join result")
                self._chunks.append(Chunk(np.stack([inter.ver[q] for q in range(self.k)]),
                                           np.stack([inter.row[q] for q in range(self.k)])))
                self.stats.rows_computed += inter.n
        for pr in group:
            self._incorporated[p].add(pr.sub.slide)

    def too_many(self, needed: int, what: str):
        names = ", ".join(s.name for s in self.bound.sources)
        raise ResourceLimit(f"{what} of {names} needs more than {self.max_rows} rows (at least {needed}): narrow "
                            "the RANGEs, add join conditions or filters, or raise the join row limit",
                            limit=self.max_rows, needed=needed)

    def _start(self, p: int, group: list[Prepared]) -> Inter:
        inter = Inter(sum(pr.n for pr in group))
        inter.ver[p] = np.concatenate([np.full(pr.n, pr.sub.slide, dtype=np.int64) for pr in group])
        inter.row[p] = np.concatenate([pr.sel for pr in group])
        for c in self.class_cols[p]:
            inter.keys[c] = np.concatenate([pr.keys[c] for pr in group])
        for col in self.attr_cols[p]:
            inter.attrs[(p, col)] = np.concatenate([pr.column(col) for pr in group])
        return inter

    def _join_step(self, inter: Inter, q: int, timing: bool = True) -> Inter:
        """inter joined with every incorporated sub-window of source q (one hash join per pair)."""
        joined = set(inter.ver)
        if timing and self.bound.timings:
            steps = [t for t in self.bound.timings if (t.left == q and t.right in joined)
                     or (t.right == q and t.left in joined)]
            if steps:
                return self._timing_step(inter, q, steps)
        classes = tuple(sorted(c for c in self.class_cols[q] if c in inter.keys))
        bands = [b for b in self.bound.bands if (b.column.source == q and b.base.source in joined)
                 or (b.base.source == q and b.column.source in joined)]
        primary = None
        if bands:  # the narrowest two-sided band sorts the probe; the others filter afterwards
            primary = min(bands, key=lambda b: (b.low is None or b.high is None,
                                                (b.high - b.low) if b.low is not None and b.high is not None else 0))
        interval = band_interval(inter, q, primary) if primary is not None else None
        probe_keys = [inter.keys[c] for c in classes]
        band_col = None if primary is None else (primary.column.column if primary.column.source == q
                                                 else primary.base.column)
        versions = sorted(self._incorporated[q])
        if primary is None and classes and inter.n >= 256 and len(versions) > 1:
            # probes with sorted keys search faster (each binary search starts where the last ended)
            inter = inter.take(np.argsort(inter.keys[classes[0]], kind="stable"))
            probe_keys = [inter.keys[c] for c in classes]
        if primary is None and classes:
            # An equi-join step: with many sub-windows and a large probe side, one probe of an index over
            # all of source q beats one probe per sub-window (the result is the same union of pairs).
            xs = [self._prepared[q][v] for v in versions if self._prepared[q][v].n]
            size = sum(x.n for x in xs)
            if len(xs) > 1 and inter.n * len(xs) > 2 * size:
                return self._join_combined(inter, q, classes, probe_keys, xs)
        pieces: list[tuple[Prepared, np.ndarray, np.ndarray]] = []
        total = 0
        for v in versions:
            x = self._prepared[q][v]
            rows = candidate_rows(interval, x, band_col)
            if x.n == 0 or (rows is not None and len(rows) == 0):
                self.stats.pairs_pruned += 1
                continue
            self.stats.pairs_probed += 1
            self.stats.rows_probed += inter.n if rows is None else len(rows)
            ix = x.index(classes, band_col)
            sub_keys = probe_keys if rows is None else [k[rows] for k in probe_keys]
            kid = ix.key_ids(sub_keys) if classes else np.zeros(inter.n if rows is None else len(rows), dtype=np.int64)
            width = 1
            if band_col is not None:
                width = len(ix.tu) + 1  # type: ignore[arg-type]  # an index on a band column has its values
                lo, hi = band_ranks(interval, ix.tu, rows)  # type: ignore[arg-type]  # a band column has its interval
            ok = kid >= 0
            if band_col is not None:
                base = np.where(ok, kid, 0) * width
                starts = np.searchsorted(ix.comp, base + lo, side="left")
                ends = np.searchsorted(ix.comp, base + hi, side="left")
                counts = np.where(ok & (hi > lo), ends - starts, 0)
            else:
                starts, ends = ix.key_ranges(np.where(ok, kid, 0))
                counts = np.where(ok, ends - starts, 0)
            found = int(counts.sum())
            if not found:
                continue
            total += found
            if total > self.max_rows:
                self.too_many(total, "an intermediate join result")
            left = np.repeat(np.arange(len(counts)) if rows is None else rows, counts)
            offs = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(found)
            pieces.append((x, left, ix.order[offs]))
        if not pieces:
            return Inter(0)
        left = np.concatenate([pc[1] for pc in pieces])
        out = inter.take(left)
        out.ver[q] = np.concatenate([np.full(len(pc[2]), pc[0].sub.slide, dtype=np.int64) for pc in pieces])
        out.row[q] = np.concatenate([pc[0].sel[pc[2]] for pc in pieces])
        for c in self.class_cols[q]:
            if c not in out.keys:
                out.keys[c] = np.concatenate([pc[0].keys[c][pc[2]] for pc in pieces])
        for col in self.attr_cols[q]:
            out.attrs[(q, col)] = np.concatenate([pc[0].column(col, pc[2]) for pc in pieces])
        for b in bands:
            if b is not primary:
                out = out.filter(band_mask(out.attrs[(b.column.source, b.column.column)],
                                            out.attrs[(b.base.source, b.base.column)], b.low, b.high))
        return out

    def _join_combined(self, inter: Inter, q: int, classes: tuple[int, ...], probe_keys: list[np.ndarray],
                       xs: list[Prepared]) -> Inter:
        """inter joined with all of source q's incorporated sub-windows `xs` through one index."""
        sig = (q, classes)
        comb = self._combined.get(sig)
        if comb is None or comb.subs != [x.sub for x in xs]:
            comb = self._combined[sig] = Combined(xs, classes, self.class_cols[q], self.attr_cols[q])
        self.stats.pairs_probed += len(xs)
        self.stats.rows_probed += inter.n
        kid = comb.index.key_ids(probe_keys)
        ok = kid >= 0
        starts, ends = comb.index.key_ranges(np.where(ok, kid, 0))
        counts = np.where(ok, ends - starts, 0)
        found = int(counts.sum())
        if found > self.max_rows:
            self.too_many(found, "an intermediate join result")
        if not found:
            return Inter(0)
        left = np.repeat(np.arange(len(counts)), counts)
        offs = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(found)
        pos = comb.index.order[offs]
        out = inter.take(left)
        out.ver[q] = comb.ver[pos]
        out.row[q] = comb.row[pos]
        for c, keys in comb.keys.items():
            if c not in out.keys:
                out.keys[c] = keys[pos]
        for col, values in comb.attrs.items():
            out.attrs[(q, col)] = values[pos]
        return out

    # -- timing conditions (store/join/timing.py) -----------------------------------------------------------
    def _timing_step(self, inter: Inter, q: int, steps: list) -> Inter:
        """A step with timing conditions: with an equality or band to q as well, the hash join then the
        conditions as filters; otherwise the first condition's access path (the paper's algorithms)
        joins inter with all of q's incorporated rows, the others filter."""
        joined = set(inter.ver)
        keyed = any(c in inter.keys for c in self.class_cols[q]) or any(
            (b.column.source == q and b.base.source in joined) or (b.base.source == q and b.column.source in joined)
            for b in self.bound.bands)
        if keyed:
            out, rest = self._join_step(inter, q, timing=False), steps
        else:
            out, rest = self._timing_access(inter, q, steps[0]), steps[1:]
        for t in rest:
            if out.n:
                out = out.filter(satisfied_mask(t.cond, out.attrs[(t.left, t.left_lo.column)],
                                                out.attrs[(t.left, t.left_hi.column)],
                                                out.attrs[(t.right, t.right_lo.column)],
                                                out.attrs[(t.right, t.right_hi.column)]))
        return out

    def _timing_access(self, inter: Inter, q: int, t) -> Inter:
        versions = sorted(self._incorporated[q])
        xs = [self._prepared[q][v] for v in versions if self._prepared[q][v].n]
        if not xs or inter.n == 0:
            return Inter(0)
        base = t.right if t.left == q else t.left
        blo, bhi = (inter.attrs[(base, c)] for c in t.columns(base))
        tcols = t.columns(q)
        tlo = np.concatenate([x.column(tcols[0]) for x in xs])
        thi = np.concatenate([x.column(tcols[1]) for x in xs])
        access, run = choose(inter.n, len(tlo), self._rate, t.cond.ct, self.timing_algorithm)
        bi, ti = access.join(t.cond, base == t.left, blo, bhi, tlo, thi, run, self.max_rows,
                             lambda n: self.too_many(n, "an intermediate join result"))
        self.stats.timing.add(run)  # type: ignore[union-attr]  # set when the query has timing conditions
        self.stats.pairs_probed += len(xs)
        self.stats.rows_probed += inter.n
        if not len(bi):
            return Inter(0)
        order = np.lexsort((ti, bi))  # a deterministic order: by base row, then target
        bi, ti = bi[order], ti[order]
        ver = np.concatenate([np.full(x.n, x.sub.slide, dtype=np.int64) for x in xs])
        row = np.concatenate([x.sel for x in xs])
        out = inter.take(bi)
        out.ver[q] = ver[ti]
        out.row[q] = row[ti]
        for c in self.class_cols[q]:
            if c not in out.keys:
                out.keys[c] = np.concatenate([x.keys[c] for x in xs])[ti]
        for col in self.attr_cols[q]:
            out.attrs[(q, col)] = np.concatenate([x.column(col) for x in xs])[ti]
        return out

    def timing_probabilities(self, ver: np.ndarray, row: np.ndarray) -> np.ndarray:
        """PROB() of result rows (ver, row: [k, n]): the one timing condition's probability."""
        t = self.bound.timings[0]
        cols = [self.gather(ref, ver[ref.source], row[ref.source])[0]
                for ref in (t.left_lo, t.left_hi, t.right_lo, t.right_hi)]
        return probabilities(t.cond, *cols)

    def explain_timing(self) -> dict:
        """For explain, when the query has timing conditions: `how` (a sentence to append: each
        condition and the rule choosing its access path per step) and `timing` (per condition, the
        last step's algorithm and why, and the counters so far)."""
        tot = self.stats.timing
        if tot is None:
            return {}
        rule = describe_rule(self.timing_algorithm)
        last = tot.last
        how = "".join(f"; {t.text} by interval timing correlation (Lee and Lee, Sensors 2010), {rule}" for t in self.bound.timings)
        return {"how": how, "timing": [
            {"condition": t.text, "algorithm": self.timing_algorithm or (last.algorithm if last else None),
             "why": "forced" if self.timing_algorithm else (last.reason if last else "no step has run yet"),
             "steps": dict(tot.by_algorithm), "evaluations": tot.evaluations, "probes": tot.probes,
             "lookup_hits": tot.hits, "invalidated": tot.invalidated} for t in self.bound.timings]}

    # -- bands --------------------------------------------------------------------------------------------
    def _residual_mask(self, inter: Inter) -> np.ndarray:
        out = None
        for conj in self.bound.where:
            m = np.ones(inter.n, dtype=bool)
            for ref, cmp in conj:
                m &= cmp.mask(inter.attrs[(ref.source, ref.column)], self.strings[ref.source],
                              inter.attrs[(ref.source, _valid_key(ref.column))])
            out = m if out is None else (out | m)
        return out  # type: ignore[return-value]  # called with a WHERE (self.residual)

    # -- answering -----------------------------------------------------------------------------------------
    def evaluate(self, inputs: Sequence[Sequence[SubWindow]]) -> Answer:
        """The answer over `inputs` (per source, FROM order: the sub-windows the transaction read)."""
        try:
            if self.by_key:
                return aggregate_by_key(self, inputs)
            self.refresh(inputs)
            self.stats.evaluations += 1
            if self.synopsis:
                return Answer(self.labels, typed_rows(self._intervals.answer(), self.types), "join", types=self.types)
            ver, row = self.kept()
            return Finisher(self, ver, row).answer()
        finally:
            if not self.cache:
                self.clear()

    def kept(self) -> tuple[np.ndarray, np.ndarray]:
        """The kept result rows' tags: (version, row) per source, [k, rows] each (a plan keeping rows)."""
        if self._chunks:
            return (np.concatenate([ch.ver for ch in self._chunks], axis=1),
                    np.concatenate([ch.row for ch in self._chunks], axis=1))
        return np.zeros((self.k, 0), dtype=np.int64), np.zeros((self.k, 0), dtype=np.int64)

    def answer_rows(self, of: "JoinPlan", ver: np.ndarray, row: np.ndarray) -> Answer:
        """`of`'s answer over result rows this plan keeps (tags from kept()): `of` has the same
        sources and conditions, its own select list (shared.py)."""
        return Finisher(of, ver, row, data=self).answer()

    def gather(self, ref: ColumnRef, ver: np.ndarray, row: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Values of `ref` for rows (version, row) of its source's prepared sub-windows (also those
        being incorporated), and their validity (None: no null among those sub-windows)."""
        prepared = self._prepared[ref.source]
        vkey = _valid_key(ref.column)
        if len(ver) == 0:
            return np.empty(0, dtype=DTYPES.get(ref.type, np.int64)), None
        lo, hi = int(ver.min()), int(ver.max())
        versions = sorted(v for v in prepared if lo <= v <= hi)
        subs = [prepared[v].sub for v in versions]
        has_nulls = any(vkey in sub.columns for sub in subs)
        if len(subs) == 1:
            cols = subs[0].columns
            return cols[ref.column][row], (cols[vkey][row] if has_nulls else None)
        offsets = np.cumsum([0] + [sub.rows for sub in subs[:-1]])
        if hi - lo < 4 * len(versions) + 64:  # versions are nearly contiguous: a lookup table
            table = np.zeros(hi - lo + 1, dtype=np.int64)
            table[np.array(versions, dtype=np.int64) - lo] = offsets
            at = table[ver - lo] + row
        else:
            at = offsets[np.searchsorted(np.array(versions, dtype=np.int64), ver)] + row
        values = np.concatenate([sub.columns[ref.column] for sub in subs])[at]
        if not has_nulls:
            return values, None
        valid = np.concatenate([sub.columns[vkey] if vkey in sub.columns else np.ones(sub.rows, dtype=bool)
                                for sub in subs])[at]
        return values, valid

    def column(self, ref: ColumnRef, ver: np.ndarray, row: np.ndarray) -> np.ndarray:
        """The values of `ref` for result rows taken from (version, row) of its source (placeholders
        where NULL: see gather for the validity)."""
        return self.gather(ref, ver, row)[0]

