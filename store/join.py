"""Evaluation of a join of several streams' windows (join_binder.BoundJoin), thesis chapter 5.

Input: per joined source, the sealed sub-windows a read-only transaction read (SubWindow objects,
immutable once sealed) and, per source, its stream's string dictionary. Output: the same
planner.Answer the single-stream queries give (access="join").

Sub-windows as the unit of incremental work
-------------------------------------------
A window is a set of sub-windows, so its join is the union, over every combination of one
sub-window per source, of the join of that combination. A JoinPlan keeps the join result computed
so far (`J(C_1..C_k)` for the sets C_i of sub-windows it has incorporated), each result row tagged
with the (version, row) it took from every source, and brings it to the sets L_i a transaction read:

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

Each join step is a hash join per pair (intermediate result, sub-window of the next source): the
sub-window's rows are indexed once on the step's equality keys and band column (sorted composite
keys, cached with the sub-window), the intermediate rows probe it with searchsorted and the matching
ranges are expanded with repeat/arange: no Python loop per row. A band condition (the W-join window
constraint of seed 001) prunes whole sub-windows whose event times cannot fall within the band, and
probes a sub-window only with the intermediate rows whose band interval overlaps it.

Join order (5.3). The global order is the thesis's heuristic: join the pairs in descending order of
selectivity (the smallest estimated binary join first, then the source giving the smallest
intermediate result, under containment of value sets and uniformity), then also try moving fast
streams (arrival rate at least FAST_FACTOR times the slowest) up the order but not to the top, and
keep the order the per-unit-time cost formulas of 5.3.1 (`order_cost`) find cheapest. Rates and
sizes come from the sub-windows read (rows after the filters pushed down, event-time span), distinct
values from the join keys. New sub-windows of source i probe the others in the global order with i
moved first (Table 5.2), each next source being the first in the global order that a condition
connects to those joined so far.

Strings are dictionary-encoded per stream, so string join keys are translated to ids shared by the
plan (each distinct string once per dictionary: a Python loop only over strings not seen before).

Aggregates per join key (one-time two-way equi-joins). The size of an equi-join is the sum over key
values v of |A_v| x |B_v| (the cardinality behind 5.3's selectivity estimates); COUNT, SUM, AVG, MIN and
MAX over it need only per-key partial aggregates of one side and a pass over the other side's rows,
never the joined rows: a row of A with key v stands for |B_v| joined rows (COUNT(*) adds |B_v|, SUM(a.x)
adds x |B_v|, SUM(b.y) adds sum_y(B_v), MIN/MAX take the extremes of the rows whose key both sides
have). JoinPlan._aggregate_by_key answers so when nothing needs joined rows (no band, no filter across
sources, no projection, no holistic aggregate; GROUP BY one column of either side) and nothing is kept
between evaluations (cache=False: one-time queries; periodic ones keep their incremental state or the
8.3.2 synopsis). Cost: linear in the windows' rows, not in the join's size; answers equal the other
paths' (integer sums exact), and the row bound still applies to the join's size, counted exactly.

NULLs and types. Joins follow SQL as the single-stream path does (planner.py, functions.py), so a join
answer equals what one stream would answer over the joined rows. A NULL in a column an ON condition
reads (an equality key or a band column) makes that condition unknown, so the row joins nothing: it
is left out when its sub-window is prepared, before any index is built (the placeholder under the
validity mask never reaches a key). WHERE is unknown on a NULL and drops the row (Comparison.mask with
the validity), also when checked on joined rows. The finisher gives every aggregate only the non-null
values of its column, puts NULL keys in one group and sorts NULL last both ways; projections carry
NULL through as None. Boolean, timestamp, date and decimal columns keep their storage dtype (int8,
int64 microseconds / days, int64 value * 10**s) as keys, group keys and values; result types and
decimal results come from functions.py and planner.py. Exact numbers of different types or scales
(int64, decimal(p,s)) join by value: keys are rescaled to the class's largest scale (exactly; a key
that would leave int64 equals nothing).

Bound. Every intermediate and the kept result are limited to `max_rows` rows; a join that needs
more raises errors.ResourceLimit before allocating them, leaving the plan's state consistent.

Aggregates over a join kept between evaluations (thesis 8.3.2, the basic-interval-join synopsis). A
plan that keeps its state (cache=True: periodic queries) and answers COUNT(*), COUNT(col), and SUM,
AVG, MIN, MAX of int64 and decimal columns, MIN and MAX of timestamps and dates (all integers: exact;
nulls left out per interval) without GROUP BY keeps no result rows at all: new result rows are
pre-aggregated into intervals labelled by when they expire, and an answer merges the live intervals.
A label is the combination of sub-windows (one per source) the rows were joined from: all rows under
one label expire together, at the first slide that expires one of those sub-windows, so expiration
drops whole intervals and never subtracts (the thesis labels intervals by expiration time; with
streams on different clocks, manual or event time, no expiration time is known in advance, so the
combination itself is the label). Evaluation costs O(labels), not O(result rows), the kept state is
O(labels) (at most the product of the sources' sub-window counts), and the answers are exactly the
recomputed ones (integer sums are exact; AVG divides the exact sum once). The row bound is the same
as without the synopsis (the rows the intervals summarise), so a join is refused or answered alike
whether it is one-time or periodic.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from .binder import Comparison
from .dictionary import StringDictionary
from .errors import InvalidInput, ResourceLimit
from .exact import INT64_MAX, INT64_MIN, exact_sum, grouped_sum, max_abs
from .functions import _grouped_extreme, _string_group_extreme, decimal_avg

from .schema import VALID, decimal_type
from .schema import valid_key as _valid_key  # a column's validity mask in a sub-window (where it holds a null)
from .join_binder import BoundBand, BoundJoin, ColumnRef, bind_join, exact_number, scale_of
from .planner import Answer, _decimal, decode_keys, group_rows
from .query import JoinQuery
from .subwindow import SubWindow
from .synopsis import group_keys, keys_with_nulls

DEFAULT_MAX_ROWS = 2_000_000
FAST_FACTOR = 5.0


# -- the join order heuristic (thesis 5.3) ---------------------------------------------------------------
@dataclass
class OrderInputs:
    """What the cost model knows of each source i: rate[i] (tuples per ms, lambda_i), size[i]
    (tuples in its window, lambda_i * T_i), distinct[i][c] (distinct values of join class c, v_i),
    band_sel[(i, j)] (the fraction of pairs a band between i and j keeps) and adjacency (which sources
    a condition connects)."""

    rate: list[float]
    size: list[float]
    distinct: list[dict[int, float]]
    band_sel: dict[tuple[int, int], float] = field(default_factory=dict)
    adjacency: list[set[int]] | None = None

    def __post_init__(self):
        if self.adjacency is None:  # one common join attribute, as in the thesis
            n = len(self.rate)
            self.adjacency = [set(range(n)) - {i} for i in range(n)]


def probe_sequence(first: int, order: Sequence[int], adjacency: list[set[int]]) -> list[int]:
    """The order in which a new tuple (group) of `first` probes the other sources: the global
    order without `first` (Table 5.2), each next source being the first one a condition connects
    to the sources joined so far (no cross products)."""
    seq, joined = [first], {first}
    rest = [s for s in order if s != first]
    while rest:
        nxt = next((s for s in rest if adjacency[s] & joined), rest[0])
        seq.append(nxt)
        joined.add(nxt)
        rest.remove(nxt)
    return seq


def _step(size: float, v_cur: dict[int, float], joined: set[int], j: int, m: OrderInputs) -> float:
    """Joins the intermediate (size tuples, v_cur distinct values per class) with source j: the new
    size (containment of value sets: divide by the larger distinct count, keep the smaller); v_cur
    is updated in place."""
    sel = 1.0
    for c, v in m.distinct[j].items():
        if c in v_cur:
            sel /= max(v_cur[c], v, 1.0)
            v_cur[c] = min(v_cur[c], v)
        else:
            v_cur[c] = v
    for q in joined:
        sel *= m.band_sel.get((min(q, j), max(q, j)), 1.0)
    return size * m.size[j] * sel


def order_cost(order: Sequence[int], m: OrderInputs) -> float:
    """The per-unit-time cost of a global join order (5.3.1): the sum over sources i of X_i =
    lambda_i times the tuples scanned when one new i-tuple probes the others (nested loops: every
    tuple reaching a level scans the next window)."""
    total = 0.0
    for i in range(len(order)):
        seq = probe_sequence(order[i], order, m.adjacency)
        size, v_cur, joined, cost = 1.0, dict(m.distinct[seq[0]]), {seq[0]}, 0.0
        for j in seq[1:]:
            cost += size * m.size[j]
            size = _step(size, v_cur, joined, j, m)
            joined.add(j)
        total += m.rate[order[i]] * cost
    return total


def initial_order(m: OrderInputs) -> list[int]:
    """Descending selectivity: the pair with the smallest estimated join first (FROM order within
    the pair: the cost does not depend on it), then each time the connected source that gives the
    smallest intermediate result."""
    n = len(m.rate)
    if n == 1:
        return [0]
    best = None
    for i, j in itertools.combinations(range(n), 2):
        if j not in m.adjacency[i]:
            continue
        v = dict(m.distinct[i])
        phi = _step(m.size[i], v, {i}, j, m)
        if best is None or phi < best[0]:
            best = (phi, i, j)
    if best is None:  # nothing connected (the binder refuses this): FROM order
        return list(range(n))
    size, i, j = best
    order, v_cur = [i, j], dict(m.distinct[i])
    _step(m.size[i], v_cur, {i}, j, m)
    while len(order) < n:
        cands = []
        for s in range(n):
            if s in order or not (m.adjacency[s] & set(order)):
                continue
            v = dict(v_cur)
            cands.append((_step(size, v, set(order), s, m), s, v))
        if not cands:
            cands = [(float("inf"), s, dict(v_cur)) for s in range(n) if s not in order]
        size, s, v_cur = min(cands, key=lambda c: (c[0], c[1]))
        order.append(s)
    return order


def choose_order(m: OrderInputs) -> tuple[list[int], float, int]:
    """The augmented heuristic of 5.3.2: (order, its cost, orders costed). Starts from
    initial_order; fast streams (rate >= FAST_FACTOR x the slowest) are also tried at every
    earlier position but the top; about n^f orders for f fast streams."""
    start = initial_order(m)
    positive = [r for r in m.rate if r > 0]
    slowest = min(positive) if positive else 0.0
    fast = [s for s in start if slowest > 0 and m.rate[s] >= FAST_FACTOR * slowest]
    cands = [start]
    for f in fast:
        more = []
        for o in cands:
            at = o.index(f)
            for pos in range(1, at):
                moved = [s for s in o if s != f]
                moved.insert(pos, f)
                more.append(moved)
        cands += [o for o in more if o not in cands]
    costed = [(order_cost(o, m), k, o) for k, o in enumerate(cands)]
    cost, _, order = min(costed)
    return order, cost, len(cands)


# -- per sub-window preparation ----------------------------------------------------------------------------
class _Index:
    """One sub-window's selected rows sorted for a probe signature (equality classes, band column):
    per class the sorted distinct keys, the folds that combine several classes into one dense id, the
    sorted distinct band values, and the rows sorted by (key id, band rank)."""

    __slots__ = ("uniqs", "folds", "tu", "order", "comp", "_bounds")

    def __init__(self, keys: list[np.ndarray], band: np.ndarray | None, n: int):
        self.uniqs, self.folds = [], []
        acc = np.zeros(n, dtype=np.int64)
        for i, k in enumerate(keys):
            u, d = np.unique(k, return_inverse=True)
            self.uniqs.append(u)
            d = d.reshape(-1).astype(np.int64)
            if i == 0:
                acc = d
            else:
                uf, acc = np.unique(acc * len(u) + d, return_inverse=True)
                acc = acc.reshape(-1).astype(np.int64)
                self.folds.append(uf)
        if band is not None:
            self.tu, rank = np.unique(band, return_inverse=True)
            comp = acc * (len(self.tu) + 1) + rank.reshape(-1)
        else:
            self.tu, comp = None, acc
        self.order = np.argsort(comp, kind="stable")
        self.comp = comp[self.order]
        self._bounds = None

    def key_ranges(self, kid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Without a band: [start, end) in `order` of the rows with each key id (kid >= 0)."""
        if self._bounds is None:
            keys = len(self.folds[-1]) if self.folds else (len(self.uniqs[0]) if self.uniqs else 1)
            self._bounds = np.searchsorted(self.comp, np.arange(keys + 1, dtype=np.int64), side="left")
        return self._bounds[kid], self._bounds[kid + 1]

    def key_ids(self, probe_keys: list[np.ndarray]) -> np.ndarray:
        """The dense key id of each probing row, -1 where this sub-window has no such key."""
        acc = None
        valid = None
        for i, k in enumerate(probe_keys):
            u = self.uniqs[i]
            d = np.searchsorted(u, k)
            hit = d < len(u)
            hit[hit] = u[d[hit]] == k[hit]
            if i == 0:
                acc, valid = d.astype(np.int64), hit
            else:
                uf = self.folds[i - 1]
                comb = np.where(valid & hit, acc * len(u) + d, 0)
                pos = np.searchsorted(uf, comb)
                ok = valid & hit & (pos < len(uf))
                ok[ok] = uf[pos[ok]] == comb[ok]
                acc, valid = pos.astype(np.int64), ok
        if acc is None:
            return np.zeros(0, dtype=np.int64)
        return np.where(valid, acc, -1)


class _Prepared:
    """A sub-window as one source of a join sees it: the rows its pushed-down filters keep, their
    join keys per equality class (strings as the plan's shared ids), band columns, and probe indexes
    built on demand. Built once per sub-window object (they are immutable once sealed)."""

    __slots__ = ("sub", "sel", "n", "keys", "indexes", "distinct", "ranges")

    def __init__(self, sub: SubWindow, sel: np.ndarray, keys: dict[int, np.ndarray]):
        self.sub, self.sel, self.n, self.keys = sub, sel, len(sel), keys
        self.indexes: dict[tuple, _Index] = {}
        self.distinct: dict[int, np.ndarray] = {}
        self.ranges: dict[str, tuple[int, int]] = {}

    def value_range(self, name: str) -> tuple[int, int]:
        """(min, max) of an int64 column over the selected rows (n > 0)."""
        r = self.ranges.get(name)
        if r is None:
            values = self.column(name)
            r = self.ranges[name] = (int(values.min()), int(values.max()))
        return r

    def column(self, name: str, pos: np.ndarray | None = None) -> np.ndarray:
        """A column's values at the selected rows (`pos`: of those); a validity mask's name
        (valid_key) gives all True where the sub-window has no null in that column."""
        rows = self.sel if pos is None else self.sel[pos]
        values = self.sub.columns.get(name)
        if values is None and name.startswith(VALID):
            return np.ones(len(rows), dtype=bool)
        if pos is None and self.n == self.sub.rows:  # every row selected: the sealed column itself (read only)
            return values
        return values[rows]

    def index(self, classes: tuple[int, ...], band: str | None) -> _Index:
        sig = (classes, band)
        ix = self.indexes.get(sig)
        if ix is None:
            ix = _Index([self.keys[c] for c in classes], self.column(band) if band else None, self.n)
            self.indexes[sig] = ix
        return ix

    def uniq(self, c: int) -> np.ndarray:
        u = self.distinct.get(c)
        if u is None:
            u = self.distinct[c] = np.unique(self.keys[c])
        return u


class _Inter:
    """An intermediate join result: per joined source the (version, row) of each result row, the
    join key per equality class, and the columns later steps and filters need."""

    __slots__ = ("ver", "row", "keys", "attrs", "n")

    def __init__(self, n: int):
        self.n = n
        self.ver: dict[int, np.ndarray] = {}
        self.row: dict[int, np.ndarray] = {}
        self.keys: dict[int, np.ndarray] = {}
        self.attrs: dict[tuple[int, str], np.ndarray] = {}

    def take(self, idx: np.ndarray) -> "_Inter":
        out = _Inter(len(idx))
        for d_in, d_out in ((self.ver, out.ver), (self.row, out.row), (self.keys, out.keys), (self.attrs, out.attrs)):
            for k, a in d_in.items():
                d_out[k] = a[idx]
        return out

    def filter(self, mask: np.ndarray) -> "_Inter":
        return self if mask.all() else self.take(np.flatnonzero(mask))


class _Combined:
    """All incorporated sub-windows of one source as one probe target: their selected rows concatenated
    (version and row of each), join keys and needed columns, and one index on the step's classes."""

    __slots__ = ("subs", "ver", "row", "keys", "attrs", "index")

    def __init__(self, xs: list[_Prepared], classes: tuple[int, ...], class_cols: dict, attr_cols: set[str]):
        self.subs = [x.sub for x in xs]
        self.ver = np.concatenate([np.full(x.n, x.sub.slide, dtype=np.int64) for x in xs])
        self.row = np.concatenate([x.sel for x in xs])
        self.keys = {c: np.concatenate([x.keys[c] for x in xs]) for c in class_cols}
        self.attrs = {col: np.concatenate([x.column(col) for x in xs]) for col in attr_cols}
        self.index = _Index([self.keys[c] for c in classes], None, len(self.ver))


@dataclass
class _Chunk:
    """Result rows computed together: ver[i] and row[i] say which row of which sub-window of source
    i each joined row took."""

    ver: np.ndarray  # int64 [k, n]
    row: np.ndarray  # int64 [k, n]

    @property
    def n(self) -> int:
        return self.ver.shape[1]


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


# -- the plan --------------------------------------------------------------------------------------------
class JoinPlan:
    """A bound join query and its evaluation state. `strings[i]` is the string dictionary of the
    stream of source i (FROM order)."""

    def __init__(self, bound: BoundJoin, strings: Sequence[StringDictionary], max_rows: int = DEFAULT_MAX_ROWS,
                 cache: bool = True):
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
        self.stats = JoinStats()
        self._classes()
        self._filters()
        self.synopsis = cache and _synopsis_answers(bound)
        self.by_key_ok = _by_key_answers(bound, self.residual)  # per-key partial aggregates can answer it
        self.by_key = not cache and self.by_key_ok
        self._gid: dict[str, int] = {}
        self._tables: dict[int, tuple[StringDictionary, int, np.ndarray]] = {}
        self.clear()

    @property
    def sources(self):
        return self.bound.sources

    def clear(self) -> None:
        """Forget every incorporated sub-window and result row."""
        self._prepared: list[dict[int, _Prepared]] = [{} for _ in range(self.k)]
        self._incorporated: list[set[int]] = [set() for _ in range(self.k)]
        self._chunks: list[_Chunk] = []
        self._combined: dict[tuple, _Combined] = {}
        if getattr(self, "synopsis", False):
            self._intervals = _Intervals(self.k, self.bound)

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
            a, b = (e.left.source, e.left.column), (e.right.source, e.right.column)
            types[a], types[b] = e.left.type, e.right.type
            parent[root(a)] = root(b)
        roots = sorted({root(x) for x in parent})
        self.class_type = [types[r] for r in roots]
        cid = {r: i for i, r in enumerate(roots)}
        # Exact numbers of different types or scales (int64, decimal(p,s)) in one class compare by value:
        # every member's key is its value at the class's largest scale, value * 10**(S - s). A value
        # whose rescaled magnitude leaves int64 equals no value of the class (all of which are int64 at
        # scale S), so its row joins nothing (_prepare drops it).
        top = {}
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
        # the columns of each source an ON condition reads: a NULL there makes the condition unknown
        self.cond_cols: list[list[str]] = [sorted(self.band_cols[p] | {n for ns in self.class_cols[p].values()
                                                                         for n in ns}) for p in range(self.k)]

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
        self.attr_cols: list[set[str]] = [set(c) for c in self.band_cols]
        if self.residual:
            for conj in where:
                for r, _ in conj:
                    self.attr_cols[r.source] |= {r.column, _valid_key(r.column)}

    # -- preparing sub-windows ------------------------------------------------------------------------
    def _prepare(self, p: int, sub: SubWindow) -> _Prepared:
        prep = self._prepared[p].get(sub.slide)
        if prep is not None and prep.sub is sub:
            return prep
        cols = sub.columns
        mask = None
        if self.pushdown[p] is not None:  # a comparison with a NULL is unknown: the row is dropped
            strings = self.strings[p]
            for conj in self.pushdown[p]:
                m = np.ones(sub.rows, dtype=bool)
                for ref, cmp in conj:
                    m &= cmp.mask(cols[ref.column], strings, cols.get(_valid_key(ref.column)))
                mask = m if mask is None else (mask | m)
        for name in self.cond_cols[p]:  # NULL = anything and a band on NULL are unknown: the row joins nothing
            valid = cols.get(_valid_key(name))
            if valid is not None:
                mask = valid.copy() if mask is None else (mask & valid)
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
        prep = _Prepared(sub, sel.astype(np.int64, copy=False), keys)
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
        preps = [[self._prepare(p, sub) for sub in subs] for p, subs in enumerate(inputs)]
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
                    kept.append(_Chunk(ch.ver[:, keep], ch.row[:, keep]))
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

    def _incorporate(self, p: int, group: list[_Prepared], order: list[int]) -> None:
        others = [q for q in range(self.k) if q != p]
        # With no (selected) row in some other source, the new sub-windows join with nothing.
        if all(any(self._prepared[q][v].n for v in self._incorporated[q]) for q in others):
            self.stats.groups += 1
            inter = self._start(p, group)
            for q in probe_sequence(p, order, self.adjacency)[1:]:
                if inter.n == 0:
                    break
                inter = self._join_step(inter, q)
            if inter.n and self.residual:
                inter = inter.filter(self._residual_mask(inter))
            if inter.n and self.synopsis:
                self._intervals.add(inter, self._gather, self.max_rows, self._too_many)
                self.stats.rows_computed += inter.n
            elif inter.n:
                total = sum(ch.n for ch in self._chunks) + inter.n
                if total > self.max_rows:
                    self._too_many(total, "the join result")
                self._chunks.append(_Chunk(np.stack([inter.ver[q] for q in range(self.k)]),
                                           np.stack([inter.row[q] for q in range(self.k)])))
                self.stats.rows_computed += inter.n
        for pr in group:
            self._incorporated[p].add(pr.sub.slide)

    def _too_many(self, needed: int, what: str):
        names = ", ".join(s.name for s in self.bound.sources)
        raise ResourceLimit(f"{what} of {names} needs more than {self.max_rows} rows (at least {needed}): narrow "
                            "the RANGEs, add join conditions or filters, or raise the join row limit",
                            limit=self.max_rows, needed=needed)

    def _start(self, p: int, group: list[_Prepared]) -> _Inter:
        inter = _Inter(sum(pr.n for pr in group))
        inter.ver[p] = np.concatenate([np.full(pr.n, pr.sub.slide, dtype=np.int64) for pr in group])
        inter.row[p] = np.concatenate([pr.sel for pr in group])
        for c in self.class_cols[p]:
            inter.keys[c] = np.concatenate([pr.keys[c] for pr in group])
        for col in self.attr_cols[p]:
            inter.attrs[(p, col)] = np.concatenate([pr.column(col) for pr in group])
        return inter

    def _join_step(self, inter: _Inter, q: int) -> _Inter:
        """inter joined with every incorporated sub-window of source q (one hash join per pair)."""
        joined = set(inter.ver)
        classes = tuple(sorted(c for c in self.class_cols[q] if c in inter.keys))
        bands = [b for b in self.bound.bands if (b.column.source == q and b.base.source in joined)
                 or (b.base.source == q and b.column.source in joined)]
        primary = None
        if bands:  # the narrowest two-sided band sorts the probe; the others filter afterwards
            primary = min(bands, key=lambda b: (b.low is None or b.high is None,
                                                (b.high - b.low) if b.low is not None and b.high is not None else 0))
        interval = self._interval(inter, q, primary) if primary is not None else None
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
        pieces: list[tuple[_Prepared, np.ndarray, np.ndarray]] = []
        total = 0
        for v in versions:
            x = self._prepared[q][v]
            rows = self._candidate_rows(interval, x, band_col)
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
                width = len(ix.tu) + 1
                lo, hi = self._ranks(interval, ix.tu, rows)
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
                self._too_many(total, "an intermediate join result")
            left = np.repeat(np.arange(len(counts)) if rows is None else rows, counts)
            offs = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(found)
            pieces.append((x, left, ix.order[offs]))
        if not pieces:
            return _Inter(0)
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
                out = out.filter(_band_mask(out.attrs[(b.column.source, b.column.column)],
                                            out.attrs[(b.base.source, b.base.column)], b.low, b.high))
        return out

    def _join_combined(self, inter: _Inter, q: int, classes: tuple[int, ...], probe_keys: list[np.ndarray],
                       xs: list[_Prepared]) -> _Inter:
        """inter joined with all of source q's incorporated sub-windows `xs` through one index."""
        sig = (q, classes)
        comb = self._combined.get(sig)
        if comb is None or comb.subs != [x.sub for x in xs]:
            comb = self._combined[sig] = _Combined(xs, classes, self.class_cols[q], self.attr_cols[q])
        self.stats.pairs_probed += len(xs)
        self.stats.rows_probed += inter.n
        kid = comb.index.key_ids(probe_keys)
        ok = kid >= 0
        starts, ends = comb.index.key_ranges(np.where(ok, kid, 0))
        counts = np.where(ok, ends - starts, 0)
        found = int(counts.sum())
        if found > self.max_rows:
            self._too_many(found, "an intermediate join result")
        if not found:
            return _Inter(0)
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

    # -- bands --------------------------------------------------------------------------------------------
    def _interval(self, inter: _Inter, q: int, b: BoundBand) -> dict:
        """Per intermediate row, the interval [L, H] the column of source q must fall in (exact: a
        bound beyond int64 is flagged), and, when both bounds are finite, the rows sorted by L."""
        if b.column.source == q:  # low <= x - d <= high  =>  d + low <= x <= d + high
            d = inter.attrs[(b.base.source, b.base.column)]
            low, high = b.low, b.high
        else:                      # low <= c - x <= high  =>  c - high <= x <= c - low
            d = inter.attrs[(b.column.source, b.column.column)]
            low = None if b.high is None else -b.high
            high = None if b.low is None else -b.low
        out = {"L": None, "H": None, "sorted": None}
        if low is not None:
            out["L"] = _shifted(d, low)
        if high is not None:
            out["H"] = _shifted(d, high)
        if low is not None and high is not None and not out["L"][1].any() and not out["H"][1].any():
            order = np.argsort(out["L"][0], kind="stable")
            out["sorted"] = (order, out["L"][0][order], high - low)
        return out

    def _candidate_rows(self, interval: dict | None, x: _Prepared, band_col: str | None) -> np.ndarray | None:
        """The intermediate rows whose band interval can meet sub-window x (None: all rows)."""
        if interval is None or interval["sorted"] is None or x.n == 0:
            return None
        order, ls, width = interval["sorted"]
        if width < 0:
            return order[:0]
        tmin, tmax = x.value_range(band_col)
        lo_bound = max(INT64_MIN, tmin - width)
        a = np.searchsorted(ls, lo_bound, side="left")
        z = np.searchsorted(ls, tmax, side="right")
        return order[a:z]

    def _ranks(self, interval: dict, tu: np.ndarray, rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """[lo, hi) ranks in tu (the sub-window's sorted distinct band values) per probing row."""
        n = len(tu)

        def pick(bound, side, flagged_hi, flagged_lo):
            if bound is None:
                return None
            vals, flag = bound
            if rows is not None:
                vals, flag = vals[rows], flag[rows]
            r = np.searchsorted(tu, vals, side=side)
            if flag.any():
                r = np.where(flag > 0, flagged_hi, np.where(flag < 0, flagged_lo, r))
            return r

        m = None
        lo = pick(interval["L"], "left", n, 0)
        hi = pick(interval["H"], "right", n, 0)
        if lo is None or hi is None:
            m = len(lo if lo is not None else hi)
        if lo is None:
            lo = np.zeros(m, dtype=np.int64)
        if hi is None:
            hi = np.full(m, n, dtype=np.int64)
        return lo, hi

    def _residual_mask(self, inter: _Inter) -> np.ndarray:
        out = None
        for conj in self.bound.where:
            m = np.ones(inter.n, dtype=bool)
            for ref, cmp in conj:
                m &= cmp.mask(inter.attrs[(ref.source, ref.column)], self.strings[ref.source],
                              inter.attrs[(ref.source, _valid_key(ref.column))])
            out = m if out is None else (out | m)
        return out

    # -- answering -----------------------------------------------------------------------------------------
    def evaluate(self, inputs: Sequence[Sequence[SubWindow]]) -> Answer:
        """The answer over `inputs` (per source, FROM order: the sub-windows the transaction read)."""
        try:
            if self.by_key:
                return self._aggregate_by_key(inputs)
            self.refresh(inputs)
            self.stats.evaluations += 1
            if self.synopsis:
                return Answer(self.labels, typed_rows(self._intervals.answer(), self.types), "join", types=self.types)
            chunks = self._chunks
            if chunks:
                ver = np.concatenate([ch.ver for ch in chunks], axis=1)
                row = np.concatenate([ch.row for ch in chunks], axis=1)
            else:
                ver = row = np.zeros((self.k, 0), dtype=np.int64)
            return _Finisher(self, ver, row).answer()
        finally:
            if not self.cache:
                self.clear()

    def _aggregate_by_key(self, inputs: Sequence[Sequence[SubWindow]]) -> Answer:
        """Aggregates of a two-way equi-join computed per join key, never forming the joined rows
        (one-time queries; see _by_key_answers for which). One side, the "key side", is aggregated per
        join key: its rows per key and, per aggregate reading it, its per-key count of values, exact sum
        and extreme. Every row of the other side, the "row side" (the GROUP BY column's source, else the
        smaller), joins the rows of its key: it stands for cnt(k) joined rows. So, per group, COUNT(*) =
        sum of cnt(k); SUM(row.x) = sum of x * cnt(k); SUM(key.y) = sum of sum_y(k); COUNT likewise; MIN
        and MAX over the values of rows whose key the other side has; AVG = SUM / COUNT. The sums are
        exact (integers: exact.py; a product leaving int64 is taken as a Python int), the answer is
        finished by functions.py as for joined rows. Cost: linear in the windows (keys are dense ids:
        a table lookup, or a sort of the distinct keys), not in the join's result (thesis 5.1's
        cardinality argument: per key value, the join pairs every row of one side with every row of
        the other). The row bound is still the join's size (its count is known exactly), so a join is
        refused or answered alike by this path and the others."""
        if len(inputs) != self.k:
            raise InvalidInput(f"a join of {self.k} sources needs {self.k} lists of sub-windows")
        b = self.bound
        self.stats.evaluations += 1
        self.stats.by_key += 1
        preps = [[pr for pr in (self._prepare(p, sub) for sub in subs) if pr.n] for p, subs in enumerate(inputs)]
        sizes = [sum(pr.n for pr in xs) for xs in preps]
        r = b.group_by.source if b.group_by is not None else (0 if sizes[0] <= sizes[1] else 1)
        o = 1 - r
        classes = sorted(self.class_cols[r])

        def keys(p):
            return [_concat_rows([x.keys[c] for x in preps[p]], np.int64) for c in classes]

        kr, ko, span = _dense_keys(keys(r), keys(o))
        cnt_o = np.bincount(ko, minlength=span).astype(np.int64)
        per_row = cnt_o[kr] if len(kr) else np.zeros(0, np.int64)
        hit = per_row > 0
        keep = None if hit.all() else hit  # the row side's rows whose key the key side has
        if keep is not None:
            kr, per_row = kr[keep], per_row[keep]

        def row_side(ref):  # (values, validity or None) of the row side's joining rows
            values, valid = _side_column(preps[r], ref)
            if keep is not None:
                values, valid = values[keep], (None if valid is None else valid[keep])
            return values, (None if valid is None or valid.all() else valid)

        total = int(per_row.sum())
        if total > self.max_rows:
            self._too_many(total, "the join result")
        self.stats.rows_computed += total
        if b.group_by is not None:
            gkeys = keys_with_nulls(*row_side(b.group_by))
            uniq, inverse = group_keys(gkeys, dense=gkeys.dtype.kind in "iu")  # a narrow range: counted, no sort
        else:
            uniq, inverse = np.zeros(1, dtype=np.int64), np.zeros(len(kr), dtype=np.int64)
        g = len(uniq)
        key_side: dict[ColumnRef, tuple] = {}
        results = []
        for a, ref in zip(b.aggs, b.agg_refs):
            name = a.fn.name
            if ref is None:  # COUNT(*)
                part = per_row
            elif ref.source == r:
                values, valid = row_side(ref)
                counted = per_row if valid is None else np.where(valid, per_row, 0)
                if name == "count":
                    part = counted
                elif name in ("sum", "avg"):
                    part = (_times(values if valid is None else np.where(valid, values, 0), per_row), counted)
                else:
                    part = (values, np.ones(len(values), dtype=bool) if valid is None else valid)
            else:
                what = "sum" if name == "avg" else name
                stats = key_side.get((ref, what))
                if stats is None:
                    stats = key_side[(ref, what)] = self._key_stats(ref, what, preps[o], ko, span, cnt_o)
                nonnull, per_key = stats
                counted = nonnull[kr]
                if name == "count":
                    part = counted
                elif name in ("sum", "avg"):
                    part = (per_key[kr], counted)
                else:
                    part = (per_key[kr], counted > 0)
            s = self.strings[ref.source if ref is not None else 0]
            if b.group_by is None and (ref is None or ref.type != "string"):
                part = _collapse(name, part)  # one group: reduce the rows first (cheaper)
                inv = np.zeros(len(part if name == "count" else part[0]), dtype=np.int64)
            else:
                inv = inverse
            results.append(a.fn.finish_groups(a, inv, g, [part], uniq, s))
        if b.group_by is None:
            values = [res.tolist()[0] for res in results]
            rows = [tuple(values[it.agg] for it in b.items)]
            rows = rows if b.limit is None else rows[: b.limit]
        else:
            rows = _group_rows(b, uniq, results, self.strings[b.group_by.source])
            if b.outer:
                rows = [tuple(a.fn.over(a, rows if item is None else [r[item] for r in rows]) for a, item in b.outer)]
        return Answer(self.labels, typed_rows(rows, self.types), "join", types=self.types)

    def _key_stats(self, ref: ColumnRef, what: str, xs: list[_Prepared], key: np.ndarray, span: int,
                   cnt: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Per dense join key of the key side: (values counted, nulls left out; for "sum" the exact
        sums, for "min"/"max" the extreme value (strings: the dictionary code of the extreme string))."""
        values, valid = _side_column(xs, ref)
        if valid is not None and not valid.all():
            values, key = values[valid], key[valid]
            nonnull = np.bincount(key, minlength=span).astype(np.int64)
        else:
            nonnull = cnt
        if what == "sum":
            return nonnull, grouped_sum(key, values, span)
        if what in ("min", "max"):
            if ref.type == "string":
                return nonnull, _string_group_extreme(key, span, values, self.strings[ref.source], what == "max")
            return nonnull, _grouped_extreme(what == "max", key, values, span)
        return nonnull, None

    def _gather(self, ref: ColumnRef, ver: np.ndarray, row: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Values of `ref` for rows (version, row) of its source's prepared sub-windows (also those
        being incorporated), and their validity (None: no null among those sub-windows)."""
        prepared = self._prepared[ref.source]
        vkey = _valid_key(ref.column)
        if len(ver) == 0:
            return np.empty(0, dtype=_DTYPES.get(ref.type, np.int64)), None
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
        where NULL: see _gather for the validity)."""
        return self._gather(ref, ver, row)[0]


def _shifted(v: np.ndarray, off: int) -> tuple[np.ndarray, np.ndarray]:
    """v + off exactly: (the sum where it fits int64, flag +1 where it is above int64, -1 below)."""
    if off >= 0:
        out_of_range = v > INT64_MAX - off
        flag = out_of_range.astype(np.int8)
    else:
        out_of_range = v < INT64_MIN - off
        flag = -out_of_range.astype(np.int8)
    safe = np.where(out_of_range, 0, v) if out_of_range.any() else v
    return safe + np.int64(off), flag


def _band_mask(c: np.ndarray, d: np.ndarray, low: int | None, high: int | None) -> np.ndarray:
    """low <= c - d <= high exactly over int64 (the difference may leave int64)."""
    with np.errstate(over="ignore"):
        diff = c - d
    over = ((c ^ d) & (c ^ diff)) < 0  # wrapped: the true difference has c's sign, beyond int64
    ok = np.ones(len(c), dtype=bool)
    if low is not None:
        ok &= np.where(over, c >= 0, diff >= low)
    if high is not None:
        ok &= np.where(over, c < 0, diff <= high)
    return ok


# -- aggregates over a two-way equi-join without joined rows -----------------------------------------------------
_BY_KEY_FUNCS = ("count", "sum", "avg", "min", "max")


def _by_key_answers(b: BoundJoin, residual: bool) -> bool:
    """Can per-key partial aggregates answer this query (JoinPlan._aggregate_by_key)? Two sources
    joined by equalities only (a band pairs rows, not key values), WHERE pushed down whole to one
    source at a time (no OR across sources), COUNT, SUM, AVG, MIN and MAX (distributive and algebraic
    aggregates: per-key partial results combine; the holistic QUANTILE and COUNT(DISTINCT) need the
    rows), at most one GROUP BY column (of either source). Projections need the joined rows too."""
    return (len(b.sources) == 2 and bool(b.equalities) and not b.bands and not residual and not b.projection
            and bool(b.aggs) and all(a.fn.name in _BY_KEY_FUNCS for a in b.aggs))


def _dense_keys(ka: list[np.ndarray], kb: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, int]:
    """One int64 id per row of each side for a (composite) equality key, in 0..span-1 with span at most
    about 4 x the rows, equal exactly where every class's values are equal: integer keys of a narrow
    range are their offsets (no sort); others are ranked among the distinct values of both sides."""
    na, nb = len(ka[0]), len(kb[0])
    room = 4 * (na + nb) + 1024
    if len(ka) == 1 and ka[0].dtype.kind in "iu" and na and nb:
        a, b = ka[0], kb[0]
        lo = min(int(a.min()), int(b.min()))
        hi = max(int(a.max()), int(b.max()))
        if hi - lo <= room:
            return a.astype(np.int64, copy=False) - lo, b.astype(np.int64, copy=False) - lo, hi - lo + 1
    ida = np.zeros(na, dtype=np.int64)
    idb = np.zeros(nb, dtype=np.int64)
    span = 1
    for a, b in zip(ka, kb):
        u = np.unique(np.concatenate([a, b]))
        if span * max(len(u), 1) >= 2**62:  # renumber what is combined so far first
            both, inv = np.unique(np.concatenate([ida, idb]), return_inverse=True)
            inv = inv.reshape(-1)
            ida, idb, span = inv[:na], inv[na:], len(both)
        ida = ida * len(u) + np.searchsorted(u, a)
        idb = idb * len(u) + np.searchsorted(u, b)
        span *= max(len(u), 1)
    if span > room:
        both, inv = np.unique(np.concatenate([ida, idb]), return_inverse=True)
        inv = inv.reshape(-1).astype(np.int64)
        ida, idb, span = inv[:na], inv[na:], len(both)
    return ida, idb, span


def _concat_rows(parts: list[np.ndarray], dtype) -> np.ndarray:
    if not parts:
        return np.zeros(0, dtype=dtype)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _side_column(xs: list[_Prepared], ref: ColumnRef) -> tuple[np.ndarray, np.ndarray | None]:
    """A column's values over the selected rows of the sub-windows `xs`, in order, and their validity
    (None: no null among them)."""
    values = _concat_rows([x.column(ref.column) for x in xs], _DTYPES.get(ref.type, np.int64))
    vkey = _valid_key(ref.column)
    if not any(vkey in x.sub.columns for x in xs):
        return values, None
    return values, _concat_rows([x.column(vkey) for x in xs], bool)


def _collapse(name: str, part):
    """A per-row contribution (functions.py's from_group_rows form) reduced to one entry: COUNT's
    counts, SUM's and AVG's (exact sum, values counted), MIN's and MAX's (extreme, present)."""
    if name == "count":
        return np.array([int(part.sum())], dtype=np.int64)
    if name in ("sum", "avg"):
        total = exact_sum(part[0]) if len(part[0]) else 0
        out = np.array([total], dtype=part[0].dtype if part[0].dtype.kind == "f" else
                       np.int64 if INT64_MIN <= total <= INT64_MAX else object)
        return out, np.array([int(part[1].sum())], dtype=np.int64)
    values, present = part
    if not present.all():
        values = values[present]
    if not len(values):
        return values[:0].copy(), np.zeros(0, dtype=bool)
    ext = values.max() if name == "max" else values.min()
    return np.array([ext], dtype=values.dtype), np.ones(1, dtype=bool)


def _times(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """values * counts elementwise, exactly for integers (object array of Python ints where a product
    may leave int64), float64 for floats."""
    if values.dtype.kind == "f":
        return values * counts
    if not len(values):
        return values.astype(np.int64)
    if max_abs(values.min(), values.max()) * int(counts.max()) <= INT64_MAX:
        return values.astype(np.int64) * counts
    return values.astype(object) * counts.astype(object)


# -- the basic-interval-join synopsis (thesis 8.3.2) ----------------------------------------------------------
_SYNOPSIS_FUNCS = ("count", "sum", "avg", "min", "max")


def _synopsis_answers(b: BoundJoin) -> bool:
    """Can intervals of pre-aggregated join results answer this query exactly? COUNT of any column;
    SUM, AVG, MIN, MAX of int64 and decimal columns (integers: exact sums); MIN, MAX of timestamps and
    dates (integers too). NULLs are left out per interval (values counted), so an interval of only
    NULLs contributes nothing. Float sums (they depend on the order of addition), string extremes
    (decoding) and boolean extremes are recomputed from the kept result rows instead."""
    if b.projection or b.group_by is not None or b.outer or not b.aggs:
        return False
    for a in b.aggs:
        name = a.fn.name
        if name not in _SYNOPSIS_FUNCS:
            return False
        if name == "count":
            continue
        exact = a.input_type is not None and exact_number(a.input_type)
        if not exact and not (name in ("min", "max") and a.input_type in ("timestamp", "date")):
            return False
    return True


class _Intervals:
    """Join results pre-aggregated per label (the combination of sub-windows they were joined from, so
    every row of an interval expires at the same slide): labels[i] is the version of each source, counts[i]
    the rows under it, and per aggregate a tuple of per-label arrays: COUNT(col) (values counted); SUM and
    AVG (exact sum, values counted); MIN and MAX (extreme, values counted). Values counted leave out
    nulls (a sub-window's validity mask, when it has one)."""

    def __init__(self, k: int, bound: BoundJoin):
        self.k, self.bound = k, bound
        self.labels = np.zeros((0, k), dtype=np.int64)
        self.counts = np.zeros(0, dtype=np.int64)
        self.parts: list[tuple | None] = []
        for a, ref in zip(bound.aggs, bound.agg_refs):
            empty = np.zeros(0, dtype=np.int64)
            self.parts.append(None if ref is None else (empty,) if a.fn.name == "count" else (empty, empty))

    @property
    def rows(self) -> int:
        return int(self.counts.sum())

    def add(self, inter: _Inter, gather, max_rows: int, too_many) -> None:
        """Pre-aggregate new result rows (each has at least one newly incorporated sub-window, so its
        label is new)."""
        total = self.rows + inter.n  # the same bound as for kept rows: a periodic join is refused as a one-time one
        if total > max_rows:
            too_many(total, "the join result")
        labels, inverse = _labels([inter.ver[q] for q in range(self.k)])
        g = len(labels)
        counts = np.bincount(inverse, minlength=g).astype(np.int64)
        parts = []
        for a, ref, old in zip(self.bound.aggs, self.bound.agg_refs, self.parts):
            if old is None:
                parts.append(None)
                continue
            values, valid = gather(ref, inter.ver[ref.source], inter.row[ref.source])
            inv, counted = inverse, counts
            if valid is not None:
                inv, values = inverse[valid], values[valid]
                counted = np.bincount(inv, minlength=g).astype(np.int64)
            name = a.fn.name
            if name == "count":
                parts.append((counted,))
            elif name in ("sum", "avg"):
                parts.append((grouped_sum(inv, values, g), counted))
            else:
                parts.append((_grouped_extreme(name == "max", inv, values, g), counted))
        self.labels = np.concatenate([self.labels, labels])
        self.counts = np.concatenate([self.counts, counts])
        self.parts = [None if old is None else tuple(_concat_values(o, n) for o, n in zip(old, new))
                      for old, new in zip(self.parts, parts)]

    def expire(self, p: int, gone: np.ndarray) -> int:
        """Drop the intervals holding an expired sub-window of source p; the rows they summarised."""
        hit = np.isin(self.labels[:, p], gone)
        if not hit.any():
            return 0
        dropped = int(self.counts[hit].sum())
        keep = ~hit
        self.labels, self.counts = self.labels[keep], self.counts[keep]
        self.parts = [None if part is None else tuple(x[keep] for x in part) for part in self.parts]
        return dropped

    def answer(self) -> list[tuple]:
        b = self.bound
        values = []
        for a, part in zip(b.aggs, self.parts):
            name = a.fn.name
            if part is None:  # COUNT(*)
                values.append(int(self.counts.sum()))
                continue
            counted = part[-1]
            n = int(counted.sum())
            if name == "count":
                values.append(n)
            elif not n:
                values.append(None)
            elif name in ("sum", "avg"):
                sums = part[0]
                total = sum(sums.tolist()) if sums.dtype.kind == "O" else exact_sum(sums)
                if name == "sum":
                    values.append(total)
                else:  # AVG(decimal): scale s+4, half away from zero, as functions.Avg
                    values.append(decimal_avg(total, n) if decimal_type(a.input_type) else total / n)
            else:
                ext = part[0][counted > 0]
                values.append((ext.max() if name == "max" else ext.min()).item())
        rows = [tuple(values[it.agg] for it in b.items)]
        return rows if b.limit is None else rows[: b.limit]


def _labels(vers: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct version combinations (rows of a [labels, k] array) and each row's label."""
    los = [int(v.min()) for v in vers]
    spans = [int(v.max()) - lo + 1 for v, lo in zip(vers, los)]
    radix = 1
    for s in spans:
        radix *= s
    if radix < 2**62:  # one int64 code per combination: a 1-d unique (much faster than a row-wise one)
        code = np.zeros(len(vers[0]), dtype=np.int64)
        for v, lo, span in zip(vers, los, spans):
            code = code * span + (v - lo)
        if radix <= 4 * len(code) + 1024:  # few combinations possible: count them, no sort
            present = np.bincount(code, minlength=radix) > 0
            uniq = np.flatnonzero(present)
            dense = np.cumsum(present) - 1
            inverse = dense[code]
        else:
            uniq, inverse = np.unique(code, return_inverse=True)
        out = np.empty((len(uniq), len(vers)), dtype=np.int64)
        rest = uniq
        for q in range(len(vers) - 1, -1, -1):
            out[:, q] = rest % spans[q] + los[q]
            rest = rest // spans[q]
        return out, inverse.reshape(-1)
    labels, inverse = np.unique(np.stack(vers, axis=1), axis=0, return_inverse=True)
    return labels, inverse.reshape(-1)


def _concat_values(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    if old.dtype.kind == "O" or new.dtype.kind == "O":
        return np.concatenate([old.astype(object), new.astype(object)])
    return np.concatenate([old, new])


# -- from joined rows to the answer ------------------------------------------------------------------------
_DTYPES = {"string": np.int32, "float64": np.float64, "boolean": np.int8}  # storage dtype; the others: int64


def typed_rows(rows: list[tuple], types: Sequence[str]) -> list[tuple]:
    """Answer rows with decimal columns (computed on value * 10**s integers, as planner.Plan does) as
    Decimals of their type's scale; NULLs stay None."""
    scales = {i: decimal_type(t)[1] for i, t in enumerate(types) if decimal_type(t)}
    if not scales:
        return rows
    return [tuple(_decimal(v, scales[i]) if i in scales else v for i, v in enumerate(r)) for r in rows]


def _group_rows(b: BoundJoin, uniq: np.ndarray, results: list[np.ndarray], strings: StringDictionary) -> list[tuple]:
    """The grouped answer's rows: keys decoded (NULL as None), ordered as planner.Plan orders them."""
    return group_rows(decode_keys(uniq, b.group_by.type, strings), [r.tolist() for r in results], b.order, b.limit,
                      b.items)


class _Finisher:
    """Aggregates, groups, orders and limits the joined rows with the aggregate functions of
    functions.py (each reading its own source's dictionary), exactly as planner.Plan does for one
    stream: every function gets only the non-null values of its column (COUNT(col) counts them,
    COUNT(*) rows, an aggregate of no value is NULL), GROUP BY puts the NULLs in one group
    (synopsis.keys_with_nulls), NULL sorts last both ways, and decimal results become Decimals of
    their result type's scale (functions.py's result types)."""

    def __init__(self, plan: JoinPlan, ver: np.ndarray, row: np.ndarray):
        self.plan, self.b = plan, plan.bound
        self.ver, self.row = ver, row
        self.n = ver.shape[1]
        self._cols: dict[ColumnRef, tuple[np.ndarray, np.ndarray | None]] = {}

    def col(self, ref: ColumnRef) -> tuple[np.ndarray, np.ndarray | None]:
        """(values, validity or None when no row of them is NULL)."""
        out = self._cols.get(ref)
        if out is None:
            values, valid = self.plan._gather(ref, self.ver[ref.source], self.row[ref.source])
            if valid is not None and valid.all():
                valid = None
            out = self._cols[ref] = (values, valid)
        return out

    def nonnull(self, ref: ColumnRef | None) -> np.ndarray | None:
        if ref is None:
            return None
        values, valid = self.col(ref)
        return values if valid is None else values[valid]

    def strings(self, ref: ColumnRef | None) -> StringDictionary:
        return self.plan.strings[ref.source if ref is not None else 0]

    def answer(self) -> Answer:
        b = self.b
        if b.projection:
            rows = self.projection()
        elif b.group_by is None:
            values = []
            for a, ref in zip(b.aggs, b.agg_refs):
                s = self.strings(ref)
                values.append(a.fn.finish(a, [a.fn.from_rows(a, self.nonnull(ref), self.n, s)], s))
            rows = [tuple(values[it.agg] for it in b.items)]
            rows = rows if b.limit is None else rows[: b.limit]
        else:
            rows = self.groups()
            if b.outer:
                rows = [tuple(a.fn.over(a, rows if item is None else [r[item] for r in rows]) for a, item in b.outer)]
        return Answer(self.plan.labels, typed_rows(rows, self.plan.types), "join", types=self.plan.types)

    def groups(self) -> list[tuple]:
        b = self.b
        keys, kvalid = self.col(b.group_by)
        keys = keys_with_nulls(keys, kvalid)
        uniq, inverse = group_keys(keys, dense=b.group_by.type == "string")
        g = len(uniq)
        results = []
        for a, ref in zip(b.aggs, b.agg_refs):
            s = self.strings(ref)
            if ref is None:
                part = a.fn.from_group_rows(a, inverse, g, None, keys, s)
            else:
                values, valid = self.col(ref)
                if valid is None:
                    part = a.fn.from_group_rows(a, inverse, g, values, keys, s)
                else:
                    part = a.fn.from_group_rows(a, inverse[valid], g, values[valid], keys[valid], s)
            results.append(a.fn.finish_groups(a, np.arange(g), g, [part], uniq, s))
        return _group_rows(b, uniq, results, self.strings(b.group_by))

    def projection(self) -> list[tuple]:
        """The joined rows' selected columns (NULL as None), ordered by the ORDER BY columns, then by
        every selected column ascending (a total order on what is visible; NULL last both ways),
        then LIMIT."""
        b = self.b
        keys = [(r, d) for r, d in b.sort] + [(r, False) for r in b.item_refs]
        if self.n and keys:
            order = np.lexsort([self._rank(r, d) for r, d in reversed(keys)])
        else:
            order = np.arange(self.n)
        if b.limit is not None:
            order = order[: b.limit]
        out = []
        for ref in b.item_refs:
            values, valid = self.col(ref)
            picked = values[order]
            if ref.type == "string":
                vals = self.strings(ref).decode(picked)
            elif ref.type == "boolean":
                vals = [bool(v) for v in picked.tolist()]
            else:
                vals = picked.tolist()
            if valid is not None:
                vals = [v if ok else None for v, ok in zip(vals, valid[order].tolist())]
            out.append(vals)
        return list(zip(*out)) if out else [() for _ in order]

    def _rank(self, ref: ColumnRef, descending: bool) -> np.ndarray:
        """Sort keys of a column's values in the order the answer sorts them, ascending or
        descending (strings by code point, -0.0 equal to 0.0), NULLs after every value."""
        values, valid = self.col(ref)
        uniq, inverse = np.unique(values, return_inverse=True)
        inverse = inverse.reshape(-1).astype(np.int64)
        u = len(uniq)
        if ref.type == "string":
            decoded = self.strings(ref).decode(uniq)
            order = sorted(range(u), key=decoded.__getitem__)
            rank = np.empty(u, dtype=np.int64)
            rank[order] = np.arange(u)
            inverse = rank[inverse]
        if descending:
            inverse = u - 1 - inverse
        if valid is not None:
            inverse = np.where(valid, inverse, u)
        return inverse


# -- conveniences (tests, tools): plan against Stream objects, evaluate against their current windows -----
def plan_join(query: JoinQuery, streams: Mapping, max_rows: int = DEFAULT_MAX_ROWS, cache: bool = True) -> JoinPlan:
    """Bind `query` against `streams` (stream name -> store.Stream) and plan it."""
    catalog = {name: (s.schema, s.spec) for name, s in streams.items()}
    bound = bind_join(query, catalog)
    return JoinPlan(bound, [streams[s.stream].strings for s in bound.sources], max_rows=max_rows, cache=cache)


def window_inputs(plan: JoinPlan, streams: Mapping) -> list[list[SubWindow]]:
    """What a transaction reads now: per source, the n_Q youngest sub-windows of its stream."""
    return [streams[s.stream].window.youngest(s.n_q) for s in plan.bound.sources]


def run_join(plan: JoinPlan, streams: Mapping) -> Answer:
    """Evaluate against the streams' current windows in one go (no concurrency: tests, tools)."""
    return plan.evaluate(window_inputs(plan, streams))
