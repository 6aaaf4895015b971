"""Cumulative windows (issue 31): landmark windows `[RANGE UNBOUNDED]` (optionally `SLIDE s`) and
Flink's CUMULATE, written `[CUMULATE STEP s SIZE p]`.

Landmark (seed 003's unbounded accumulative window [0, i, 1n], Property 3): the window from the
stream's start (the start of its first sub-window) to the end of a sealed sub-window. Its rows are
long gone from the retained window, so the stream keeps a running synopsis (`Running`): the
per-column COUNT, SUM, MIN and MAX, the null counts and the per-key synopses of its declared
group_by columns, merged from each sealed sub-window's synopsis when the sub-window is installed
(store/window.py). Each installed sub-window carries the running synopsis through it (the field
`running`), so a query that took a window snapshot reads the state of its slide (LWS/TTU as for
any read). A query reads it through the aggregate functions' synopsis readers (functions.py
read_synopsis / read_key_synopsis: their partials, merged by their own finish), so what a landmark
answers is what the synopsis path answers: COUNT, SUM, AVG, MIN, MAX of numeric columns, COUNT
DISTINCT of a declared int64 or boolean group_by column, GROUP BY one such column (COUNT, SUM,
AVG). Per-key state of string columns is not kept: its keys would keep every string ever seen
alive in the stream's dictionary, which compaction must be able to shrink.
Anything that needs rows (WHERE, projections, QUANTILE and other holistic aggregates, more than one
GROUP BY column) is refused by name at binding: a landmark window keeps no rows.

Durability: a snapshot keeps the running synopsis before the oldest retained sub-window (counters
"landmark", once a sub-window has been evicted); restoring merges the retained sub-windows onto it again, in slide order, so the state
(float sums included: the same additions in the same order) is the one sealing built. A log replay
seals the same sub-windows in the same order, so it rebuilds the same state.

CUMULATE STEP s SIZE p: windows [k p, k p + j s) for j = 1 .. p / s, i.e. a window that grows by s
and resets every p (Flink's CUMULATE). s and p must be whole numbers of sub-windows and s must
divide p. The store answers the newest completed window (end = the newest multiple of s at most the
newest sealed sub-window's end) from the retained sub-windows' partials, merged with the functions'
own merges (as hop.py does), so any query that a time window answers is answered (WHERE included:
selection commutes with temporal windows, seed 003 Property 2). The window must fit the retained
window: (p + s) / t - 1 <= n sub-windows; a longer period is refused, naming SIZE (a running
synopsis per reset period is not kept).

A registered CUMULATE query, or a landmark with SLIDE on time slots (windows ending at multiples of
SLIDE), is due when a slide completes one of its windows (`Cumulative.due_line`, the rule of
hop and sliced windows: slicing.slides_until_due), not every s/t slides from its registration,
which would answer each window up to s/t - 1 slides after it completed unless registered in
phase. A landmark on a manual or count-based stream ends at the newest sealed sub-window: it runs
every SLIDE slides from its registration, as a plain periodic query.

Window bounds are Python ints computed from int64 sub-window bounds: exact at the int64 edges.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from .aggregates import Partial
from .errors import Loc, ResourceLimit
from .exact import INT64_MAX
from .kinds import Clock
from .query import Aggregate, KeyColumn, Query, Range
from .slicing import Shape
from .subwindow import SubWindow
from .synopsis import ColumnSummary, KeySummary, Synopsis, TopKList

if TYPE_CHECKING:
    from .binder import BoundQuery
    from .window import Window

class CumulativeKind(StrEnum):
    """The two cumulative window kinds: from the stream's start (landmark), or growing by STEP and
    reset every SIZE (CUMULATE)."""

    LANDMARK = "landmark"
    CUMULATE = "cumulate"


LANDMARK, CUMULATE = CumulativeKind.LANDMARK, CumulativeKind.CUMULATE
# Keys a running per-key synopsis may hold (per group_by column). Past it the column's per-key
# synopsis is dropped from the running state for good (`Running.dropped`), and a landmark query
# that needs it is refused with RESOURCE_EXHAUSTED naming this limit: the state of a stream's
# landmark stays bounded whatever its key columns hold, as the kept last rows of partitioned
# windows are (last_rows_keys).
MAX_LANDMARK_KEYS = 100_000
_NO_TOPK = TopKList(np.empty(0, dtype=np.int32), np.empty(0, dtype=np.int64), 0)
_SAFE = 2**61  # int64 per-key sums below this in magnitude add without wrapping


# -- the running synopsis --------------------------------------------------------------------------------
class Running:
    """The synopsis of every row sealed from the stream's start through one slide: `start_ms` the
    first sub-window's start (None before any), `synopsis` a Synopsis of them all (rows, column
    summaries, null counts, per-key synopses without top-k lists). Immutable in what it stands for,
    but lazy: a state made by `add` holds the previous state and the sub-window until its synopsis
    is first asked for, then merges (and keeps the result, dropping both). The window asks for the
    state before its oldest sub-window at each eviction (one merge per slide), so a chain is never
    longer than the window, and a stream no landmark query reads holds one merged state, not one
    per sub-window. A per-key synopsis that passes MAX_LANDMARK_KEYS keys is dropped as the merge
    makes it, and its column stays in `dropped` in every later state."""

    __slots__ = ("start_ms", "_synopsis", "_prev", "_sub", "skip", "_dropped")

    def __init__(self, start_ms: int | None, synopsis: Synopsis | None, prev: "Running | None" = None,
                 sub: SubWindow | None = None, skip: frozenset = frozenset(), dropped: frozenset = frozenset()):
        self.start_ms, self._synopsis, self._prev, self._sub = start_ms, synopsis, prev, sub
        self.skip = skip  # columns whose per-key synopses are not kept (string columns: see _check_landmark)
        self._dropped = dropped  # (a lazy state's is set when it is merged, before its synopsis)
        self._check()

    def _check(self) -> None:
        assert (self._synopsis is None) == (self._sub is not None and self._prev is not None), \
            "a state is merged, or lazy with the state before it and its sub-window"
        assert self._synopsis is None or not (set(self._synopsis.by_key) & (self.skip | self._dropped)), \
            "no per-key synopsis of a skipped or dropped column is kept"

    @property
    def dropped(self) -> frozenset:
        """The group_by columns whose per-key synopses passed MAX_LANDMARK_KEYS (merged now if lazy)."""
        self.synopsis
        return self._dropped

    @classmethod
    def empty(cls, skip: frozenset = frozenset()) -> "Running":
        return cls(None, Synopsis(0, {}, {}), skip=skip)

    def add(self, sub: SubWindow) -> "Running":
        """This state with sub-window `sub` (the next slide) merged in (when first read)."""
        return Running(sub.start_ms if self.start_ms is None else self.start_ms, None, self, sub, self.skip,
                       self._dropped)

    @property
    def materialized(self) -> bool:
        return self._synopsis is not None

    @property
    def synopsis(self) -> Synopsis:
        """The merged synopsis (merged now if not yet: from the nearest merged state before, forward;
        another thread doing the same writes the same values)."""
        got = self._synopsis
        if got is not None:
            return got
        chain = []
        node = self
        while True:
            syn = node._synopsis
            if syn is not None:
                break
            sub, prev = node._sub, node._prev  # (cleared after _synopsis is set: sub first, then prev)
            if sub is None or prev is None:
                syn = node._synopsis
                assert syn is not None
                break
            chain.append((node, sub))
            node = prev
        dropped = node._dropped
        for n, sub in reversed(chain):
            syn = _merged(syn, sub.synopsis, self.skip | dropped)
            over = {g for g, ks in syn.by_key.items() if len(ks.keys) > MAX_LANDMARK_KEYS}
            if over:  # dropped for good: bounded state (the column's landmark queries are refused)
                dropped = dropped | over
                syn = replace(syn, by_key={g: ks for g, ks in syn.by_key.items() if g not in over})
            n._dropped = dropped
            n._synopsis = syn
            n._prev = None
            n._sub = None
        assert self._synopsis is not None
        return self._synopsis

    # -- string codes (the dictionary's compaction) -------------------------------------------------
    def codes(self, strings: set[str]) -> list[np.ndarray]:
        """The string codes a merged state holds (a lazy one's are its sub-window's and its merged
        predecessor's)."""
        if self._synopsis is None:
            return []
        return [ks.keys[ks.keys >= 0] for g, ks in self._synopsis.by_key.items() if g in strings]

    def remapped(self, remap: np.ndarray, strings: set[str]) -> "Running":
        by_key = {}
        for g, ks in self.synopsis.by_key.items():
            if g in strings and len(ks.keys):
                keys = np.where(ks.keys < 0, ks.keys, remap[np.maximum(ks.keys, 0)]).astype(ks.keys.dtype)
                order = np.argsort(keys, kind="stable")  # (order-preserving on live codes: sorted already)
                ks = KeySummary(_frozen(keys[order]), _frozen(ks.counts[order]),
                                {c: _frozen(v[order]) for c, v in ks.sums.items()}, _NO_TOPK,
                                {c: _frozen(v[order]) for c, v in ks.valid.items()})
            by_key[g] = ks
        return Running(self.start_ms, replace(self.synopsis, by_key=by_key), skip=self.skip, dropped=self.dropped)

    # -- snapshots ------------------------------------------------------------------------------------
    def to_plain(self) -> dict:
        s = self.synopsis
        return {"start_ms": self.start_ms, "rows": s.rows, "nulls": dict(s.nulls), "dropped": sorted(self._dropped),
                "columns": {c: [cs.count, cs.sum, cs.min, cs.max] for c, cs in s.columns.items()},
                "by_key": {g: {"keys": _plain(ks.keys), "counts": _plain(ks.counts),
                               "sums": {c: _plain(v) for c, v in ks.sums.items()},
                               "valid": {c: _plain(v) for c, v in ks.valid.items()}}
                           for g, ks in s.by_key.items()}}

    @classmethod
    def from_plain(cls, plain: dict, skip: frozenset = frozenset()) -> "Running":
        columns = {c: ColumnSummary(*v) for c, v in plain["columns"].items()}
        by_key = {g: KeySummary(_array(k["keys"]), _array(k["counts"]), {c: _array(v) for c, v in k["sums"].items()},
                                _NO_TOPK, {c: _array(v) for c, v in k["valid"].items()})
                  for g, k in plain["by_key"].items()}
        return cls(plain["start_ms"], Synopsis(int(plain["rows"]), columns, by_key,
                                               nulls={c: int(v) for c, v in plain["nulls"].items()}),
                   skip=frozenset(skip), dropped=frozenset(plain.get("dropped", ())))


def _merged(a: Synopsis, b: Synopsis, skip: frozenset) -> Synopsis:
    """The synopsis of the rows of both (without the per-key synopses of the columns `skip`)."""
    columns = dict(a.columns)
    for c, cs in b.columns.items():
        columns[c] = _merge_column(columns.get(c), cs)
    nulls = dict(a.nulls)
    for c, k in b.nulls.items():
        nulls[c] = nulls.get(c, 0) + k
    by_key = dict(a.by_key)
    for g, ks in b.by_key.items():
        if g not in skip:
            by_key[g] = _merge_keys(by_key.get(g), ks)
    return Synopsis(a.rows + b.rows, columns, by_key, nulls=nulls)


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _plain(a: np.ndarray) -> list:
    return [str(a.dtype), [int(x) if isinstance(x, int) else x for x in a.tolist()]]


def _array(p: list) -> np.ndarray:
    return _frozen(np.asarray(p[1], dtype=np.dtype(p[0])) if p[0] != "object" else _objects(p[1]))


def _objects(values: list) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _merge_column(a: ColumnSummary | None, b: ColumnSummary) -> ColumnSummary:
    if a is None or not a.count:
        return b
    if not b.count:
        return a
    return ColumnSummary(a.count + b.count, a.sum + b.sum, min(a.min, b.min), max(a.max, b.max))  # type: ignore[type-var]  # counted: both set


def _add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b elementwise, exact: int64 while no sum can wrap, else Python ints; floats as floats."""
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        return a.astype(np.float64) + b.astype(np.float64)
    if a.dtype.kind in "iu" and b.dtype.kind in "iu" and len(a):
        if float(np.abs(a.astype(np.float64)).max()) + float(np.abs(b.astype(np.float64)).max()) < _SAFE:
            return a.astype(np.int64) + b.astype(np.int64)
    out = np.empty(len(a), dtype=object)
    out[:] = [int(x) + int(y) for x, y in zip(a.tolist(), b.tolist())]
    return out


def _spread(values: np.ndarray, at: np.ndarray, size: int) -> np.ndarray:
    """`values` placed at positions `at` of an array of `size` zeros of their kind."""
    out = np.zeros(size, dtype=values.dtype) if values.dtype != object else _objects([0] * size)
    out[at] = values
    return out


def _merge_keys(a: KeySummary | None, b: KeySummary) -> KeySummary:
    if a is None or not len(a.keys):
        return KeySummary(b.keys, b.counts, dict(b.sums), _NO_TOPK, dict(b.valid))
    if not len(b.keys):
        return a
    keys = np.union1d(a.keys, b.keys) if a.keys.dtype != object else np.asarray(sorted(set(a.keys) | set(b.keys)),
                                                                                 dtype=object)
    ia, ib = np.searchsorted(keys, a.keys), np.searchsorted(keys, b.keys)
    n = len(keys)

    def merged(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return _frozen(_add(_spread(x, ia, n), _spread(y, ib, n)))
    sums = {c: merged(a.sums[c], b.sums[c]) for c in b.sums}
    valid = {c: merged(a.valid.get(c, a.counts), b.valid.get(c, b.counts)) for c in b.valid}
    return KeySummary(_frozen(keys.astype(a.keys.dtype) if keys.dtype != object else keys),
                      merged(a.counts, b.counts), sums, _NO_TOPK, valid)


def rebuild(base: "Running", subs: list[SubWindow]) -> None:
    """Attach to each of `subs` (slide order) the running synopsis through it, from `base` (the state
    before the first of them)."""
    state = base
    for sub in subs:
        state = state.add(sub)
        object.__setattr__(sub, "running", state)


# -- syntax ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CumulativeShape:
    """A landmark (`kind` LANDMARK) or CUMULATE window: the step and the size (reset period) in ms."""

    kind: CumulativeKind
    step_ms: int = 0
    size_ms: int = 0
    loc: Loc | None = None

    def __eq__(self, other: object) -> bool:  # locations are not part of the query
        return (isinstance(other, CumulativeShape)
                and (self.kind, self.step_ms, self.size_ms) == (other.kind, other.step_ms, other.size_ms))

    def __hash__(self) -> int:
        return hash((self.kind, self.step_ms, self.size_ms))

    @property
    def recurs(self) -> bool:
        """Whether the window clause itself says how often a registered query runs (CUMULATE: every
        STEP; a landmark needs SLIDE)."""
        return self.kind == CUMULATE

    def text(self) -> str:
        if self.kind == LANDMARK:
            return "RANGE UNBOUNDED"
        return f"CUMULATE STEP {self.step_ms} ms SIZE {self.size_ms} ms"


def starts_cumulative(p) -> bool:
    """Is the window clause after `[` a cumulative one (parser.Parser `p`)?"""
    return p.tok.word == "cumulate" or (p.tok.word == "range" and p.toks[p.i + 1].word == "unbounded")


def parse_cumulative(p):
    """After `[`: RANGE UNBOUNDED [SLIDE s] or CUMULATE STEP s SIZE p, and `]`: (shape, slide)."""
    tok = p.tok
    slide = None
    if p.accept("cumulate"):
        lengths = []
        for word in ("step", "size"):
            p.expect(word)
            ltok = p.tok
            value = p.integer(f"a {word.upper()} length", limit=INT64_MAX)
            from .lexer import _UNITS
            unit = _UNITS.get(p.tok.word, ("", 1))
            if unit[0] != "ms":
                p.fail(f"{word.upper()} must be a time length (ms, s, min or h)")
            p.i += 1
            ms = value * unit[1]
            if value == 0:
                p.fail(f"{word.upper()} must be positive", ltok)
            if ms > INT64_MAX:
                p.fail(f"{word.upper()} is {ms} ms, beyond int64 ({INT64_MAX} ms)", ltok)
            length = Range(ms, "ms", loc=ltok.loc)
            lengths.append(length.value)
        shape = CumulativeShape(CUMULATE, lengths[0], lengths[1], loc=tok.loc)
    else:
        p.expect("range")
        p.expect("unbounded")
        shape = CumulativeShape(LANDMARK, loc=tok.loc)
        if p.accept("slide"):
            slide = p.amount()
    p.expect("]")
    return shape, slide


# -- answering -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cumulative:
    """How a bound query over a cumulative window is answered (plays hop.Hop's part for the
    planner): the query over the window (`inner`), per output item where its value comes from
    ('start', 'end' or the inner answer's column), and for a landmark the synopsis reader of the
    inner query (`synopsis_read`)."""

    shape: CumulativeShape
    inner: "BoundQuery"
    picks: tuple[Any, ...]
    hidden_rows: bool
    limit: int | None
    every_ms: int | None                   # landmark ends at multiples of this (time-slot streams), else None
    synopsis_read: Callable[[SubWindow], Any] | None = None
    keyed: tuple[str, ...] = ()            # landmark: the columns whose running per-key synopses it reads

    def reader(self, inner_read: Callable[[SubWindow], Any], slot_ms: int | None) -> Callable[[SubWindow], Any]:
        if self.shape.kind == LANDMARK:  # the running synopsis through the sub-window (no rows read)
            return lambda sub: (sub.start_ms, sub.end_ms, sub.slide, getattr(sub, "running", None), sub)
        return lambda sub: (sub.start_ms, sub.end_ms, sub.slide, inner_read(sub), sub)

    def alone_reason(self) -> str:
        """Why a periodic query of this window runs alone under --sharing (txn/sharing/rules.py): a
        landmark reads no rows and no sub-window partials, only the running synopsis."""
        due = "; due when a slide completes one of its windows" if self.aligned else ""
        if self.shape.kind == LANDMARK:
            return ("runs alone: a landmark window (RANGE UNBOUNDED) reads the stream's running synopsis, one read "
                    "per execution, not the sub-windows a shared scan reads" + due)
        return ("runs alone: a CUMULATE window merges the partials of the sub-windows since its last reset, "
                "answered per window with its bounds" + due)

    @property
    def aligned(self) -> bool:
        """Whether its windows end at multiples of a step in time (CUMULATE's STEP, a landmark's
        SLIDE on time slots), so that a periodic query is due when a slide completes one
        (hop.due_by_windows). A landmark on a manual or count-based stream answers through the
        newest sealed sub-window, every SLIDE slides from its registration, as a plain query."""
        return self.shape.kind == CUMULATE or self.every_ms is not None

    def due_line(self, window: "Window") -> tuple[Shape, int, int]:
        """The line slicing.slides_until_due counts on (as hop.Hop.due_line): ms, each slide one
        time slot of t. Each window ends at a multiple of the step s (CUMULATE's [k p, k p + j s),
        the landmark's [stream start, k s)): it is complete when the sub-window [k s - t, k s) is
        sealed (seed 003 Definition 9: computable then), and answered once that sub-window is the
        stream's, even when its step began before the stream's first sub-window (the window holds
        every row the stream has since the reset or start; `window`). So the windows on the line
        are those sub-windows, Shape(t, s) on the line measured from s - t ms (they start at its
        multiples of s), and slides_until_due's rule (windows from the stream's first sub-window
        on) is this one. Shape(s, s) would pass over the first end when the stream starts inside
        a step, as over a hop window that straddles the stream's start."""
        t = window.spec.subwindow_ms
        s = self.shape.step_ms if self.shape.kind == CUMULATE else self.every_ms
        assert t is not None and s is not None, "aligned windows on time slots (bind_cumulative)"
        return Shape(t, s), t, window.sealed(window.latest).end_ms - (s - t)

    def describe(self, reads: int) -> dict:
        if self.shape.kind == LANDMARK:
            how = "the running synopsis since the stream's start, kept with each sub-window (one read)"
        else:
            how = (f"the partials of the sub-windows since the last reset (every {self.shape.size_ms} ms), merged, "
                   f"up to the newest multiple of {self.shape.step_ms} ms")
        return {"how": how, "group_by": list(self.inner.group_keys)}

    def window(self, partial: Partial) -> tuple[int, int, list] | None:
        """(start, end, contributions) of the window answered, or None when none can be."""
        reads = sorted(partial.contributions.values(), key=lambda c: c[2])
        if not reads:
            return None
        if self.shape.kind == LANDMARK:
            pick = reads[-1]
            if self.every_ms is not None:  # windows end at multiples of SLIDE
                ends = [c for c in reads if c[1] % self.every_ms == 0]
                if not ends:
                    return None
                pick = ends[-1]
            state = pick[3]
            if state is None or state.start_ms is None:
                return None
            return state.start_ms, pick[1], [state, pick[4]]
        s, p = self.shape.step_ms, self.shape.size_ms
        end = reads[-1][1] // s * s
        start = (end - 1) // p * p
        inside = [c for c in reads if start <= c[0] and c[1] <= end]
        if not inside:
            return None
        oldest = reads[0]
        if oldest[0] > start and oldest[2] != 0:  # rows since the reset were evicted before the read
            return None
        return start, end, inside

    def bounds(self, partial: Partial) -> tuple[int, int] | None:
        """[start, end) of the window answered (what the answer reports), or None when none is."""
        got = self.window(partial)
        return None if got is None else (got[0], got[1])

    def finish(self, inner_finish: Callable[[Partial], Any], partial: Partial) -> list[tuple]:
        got = self.window(partial)
        if got is None:
            return []
        start, end, parts = got
        part = Partial()
        if self.shape.kind == LANDMARK:
            state, newest = parts
            lost = [c for c in self.keyed if c in state.dropped]
            if lost:
                raise ResourceLimit(f"the running per-key synopsis of {lost[0]} passed {MAX_LANDMARK_KEYS} keys "
                                    f"(MAX_LANDMARK_KEYS) and is no longer kept: a RANGE UNBOUNDED window cannot "
                                    f"answer per key of {lost[0]}; COUNT, SUM, AVG, MIN and MAX over all rows still "
                                    "answer", limit=MAX_LANDMARK_KEYS)
            syn = state.synopsis
            sub = replace(newest, start_ms=start, end_ms=end, rows=syn.rows, synopsis=syn,
                          columns={c: a[:0] for c, a in newest.columns.items()})
            assert self.synopsis_read is not None
            part.add(0, self.synopsis_read(sub))
        else:
            for c in parts:
                part.add(c[2], c[3])
        rows = []
        for r in inner_finish(part).rows:
            if self.hidden_rows and r[-1] == 0:
                continue
            rows.append(tuple(start if k == "start" else end if k == "end" else r[k] for k in self.picks))
        return rows if self.limit is None else rows[: self.limit]


# -- binding ---------------------------------------------------------------------------------------------
def bind_cumulative(binder, q: Query, periodic: bool) -> "BoundQuery":
    """Bind a query over a landmark or CUMULATE window (binder._Binder `binder`)."""
    from .binder import _Binder
    from .hop import BOUNDS, window_items
    from .kinds import AccessPath
    from .planner.read import reader

    spec = binder.spec
    shape: CumulativeShape = q.shape
    fail = binder.fail
    word = "RANGE UNBOUNDED" if shape.kind == LANDMARK else "CUMULATE"
    for what, bad, loc in (("a sub-query", q.outer, q.outer[0].loc if q.outer else None),
                           ("APPROXIMATE", q.approximate, q.loc),
                           ("AS OF SLIDE", q.as_of_slide is not None, q.as_of_loc),
                           ("ORDER BY", q.order_by, q.order_by[0].loc if q.order_by else None),
                           ("SELECT DISTINCT", q.distinct, q.loc)):
        if bad:
            fail(f"{what} is not supported with a {word} window", loc)
    t, n = spec.slot_ms, spec.subwindows
    slots = spec.subwindow_ms is not None and spec.clock in (Clock.PROCESSING, Clock.EVENT)
    # the query per window: the bounds taken out of SELECT and GROUP BY
    keys = [c for c in q.group_columns if not (c in BOUNDS and c not in binder.types)]
    more_locs = q.group_by_more_locs or (None,) * len(q.group_by_more)
    key_locs = [loc for c, loc in zip(q.group_columns, (q.group_by_loc, *more_locs)) if c in keys]
    items: list[Any] = []
    picks: list[Any] = []
    for it in q.items:
        if isinstance(it, KeyColumn) and it.column in BOUNDS and it.column not in binder.types:
            picks.append("start" if it.column == "window_start" else "end")
        else:
            picks.append(len(items))
            items.append(it)
    hidden = bool(keys) and not any(isinstance(it, Aggregate) for it in items)
    if hidden:
        items.append(Aggregate("count", alias="__window_rows__"))
    inner_q = replace(q, items=tuple(items), group_by=keys[0] if keys else None,
                      group_by_loc=key_locs[0] if keys else None, group_by_more=tuple(keys[1:]),
                      group_by_more_locs=tuple(key_locs[1:]) if keys else None, order_by=(), limit=None,
                      range=None, slide=None, shape=None)
    inner = _Binder(inner_q, binder.schema, spec).bind()
    out_items = window_items(q, inner, picks)
    if shape.kind == LANDMARK:
        _check_landmark(binder, inner, inner_q)
        every = binder.length(q.slide, "SLIDE") if q.slide is not None else None
        every_ms = every * t if every is not None and slots else None
        keyed = tuple(dict.fromkeys([*([inner.group_by] if inner.group_by is not None else []),
                                     *(a.column for a in inner.aggs if a.fn.name == "count_distinct" and a.column)]))
        hop = Cumulative(shape, inner, tuple(picks), hidden, q.limit, every_ms,
                         reader(inner, AccessPath.SYNOPSIS, None), keyed)
        n_q = min(n, every) if every is not None else 1
        return replace(inner, query=q, n_q=n_q, every=every, items=out_items, order=[], limit=q.limit,
                       hop=hop, projection=[])  # type: ignore[arg-type]  # duck-types hop.Hop
    if not slots:
        fail(f"CUMULATE needs a time-based stream on processing or event time (its sub-windows are time slots); "
             f"this one is {spec.clock}{' and count-based' if spec.subwindow_rows is not None else ''}", shape.loc)
    s, p = shape.step_ms, shape.size_ms
    for name, v in (("STEP", s), ("SIZE", p)):
        if v % t:
            fail(f"{name} {v} ms is not a multiple of the sub-window length {t} ms: CUMULATE windows are runs of whole "
                 "sub-windows", shape.loc)
    if p % s:
        fail(f"SIZE {p} ms is not a multiple of STEP {s} ms", shape.loc)
    reads = (p + s) // t - 1
    if reads > n:
        fail(f"SIZE {p} ms with STEP {s} ms needs the {reads} youngest sub-windows but the window holds {n} of {t} ms "
             "(no running synopsis is kept per reset period)", shape.loc)
    hop = Cumulative(shape, inner, tuple(picks), hidden, q.limit, None)
    return replace(inner, query=q, n_q=reads if periodic else n, every=s // t, items=out_items, order=[],
                   limit=q.limit, hop=hop)  # type: ignore[arg-type]  # duck-types hop.Hop


def _check_landmark(binder, inner: "BoundQuery", q: Query) -> None:
    """Refuse, by name, what the running synopsis cannot answer."""
    fail = binder.fail
    if q.where:
        fail("WHERE is not supported with a RANGE UNBOUNDED window: it keeps a running synopsis of every row, "
             "not the rows (GROUP BY a declared group_by column selects per key)", q.loc)
    if inner.projection:
        fail("a RANGE UNBOUNDED window keeps no rows: select aggregates", q.loc)
    if len(inner.group_keys) > 1:
        fail("a RANGE UNBOUNDED window groups by one column at most", q.group_by_loc)
    declared = set(binder.spec.group_by)
    strings = {c for c, t in binder.types.items() if t == "string"}
    if inner.group_by in strings:
        fail(f"GROUP BY {inner.group_by} over a RANGE UNBOUNDED window: running per-key synopses are kept for int64 "
             "and boolean columns only (string keys would keep every string ever seen in the stream's dictionary)",
             q.group_by_loc, inner.group_by)
    for a in inner.aggs:
        if a.fn.name == "count_distinct" and a.column in strings:
            fail(f"COUNT(DISTINCT {a.column}) over a RANGE UNBOUNDED window: its keys are not kept for string columns "
                 "(they would keep every string ever seen in the stream's dictionary)", q.loc, a.column)
    if inner.group_by is not None and inner.group_by not in declared:
        fail(f"GROUP BY {inner.group_by} over a RANGE UNBOUNDED window needs a stream that keeps per-key synopses of "
             f"{inner.group_by} (group_by)", q.group_by_loc, inner.group_by)
    for a in inner.aggs:
        ok = a.fn.key_synopsis_ok(a) if inner.group_by is not None else a.fn.synopsis_ok(a, declared)
        if not ok:
            label = a.fn.name.upper() + (f"({a.column})" if a.column else "(*)")
            loc = next((it.loc for it in q.items if isinstance(it, Aggregate) and it.func == a.fn.name
                        and it.column == a.column), q.loc)
            fail(f"{label} is not kept by the running synopsis of a RANGE UNBOUNDED window (it keeps COUNT, SUM, "
                 "MIN/MAX and AVG of numeric columns and per-key COUNT/SUM/AVG: holistic aggregates need the rows)",
                 loc)
