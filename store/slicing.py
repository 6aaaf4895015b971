"""General stream slicing (issue 31): time windows of any RANGE and SLIDE over an event-time
stream's sub-windows, answered exactly.

A window sequence [RANGE r SLIDE s] is, as Definition 10 of seed 003 with temporal bounds,
windows W_k = [k s, k s + r) for integer k (they start at multiples of s since the epoch, as the
aligned windows of hop.py do). When r and s are whole sub-windows hop.py answers them; otherwise a
window's edges fall inside sub-windows, and the store cuts slices where windows start and end, as
Scotty's general stream slicing does: a sub-window is one slice when no edge falls inside it, else
the slices between consecutive edges. A window is then the union of the slices between its
start and its end, and its answer merges their partials with the aggregate functions' own merges
(functions.py, through the inner plan's finish), so overlapping windows share the partials of
the slices they have in common.

Only event-time streams are answered this way: there a row's own time places it in its
sub-window, so the rows with start <= t < end are exactly the window's. On processing-time,
manual and count-based streams a sub-window is what arrived between two slides, so an edge inside
one cannot be placed exactly: such a query is refused, naming RANGE or SLIDE (binder).

A slice that is a whole sub-window is read on the plan's own path (synopses where they answer);
a slice of part of one is read from the rows whose time lies in it. Slice partials are kept per
sealed sub-window (weakly: they go with it) and shared by every plan of the same inner query,
whatever its RANGE and SLIDE: a whole sub-window is read once for all of them, and a slice once
for every window sequence that cuts it at the same edges.

A one-time query answers every window lying entirely within the sub-windows it read, in start
order; a periodic one the newest such window, and it is due when a slide completes a window
(`slides_until_due`): with s not a whole number of sub-windows the slides between two windows
vary (seed 003's aperiodic Definition 12 in effect), so SLIDE cannot be a fixed count of slides.
"""
from __future__ import annotations

import bisect
import threading
import weakref
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Hashable

import numpy as np

from .aggregates import Partial
from .kinds import Clock
from .query import KeyColumn, Query

if TYPE_CHECKING:
    from .binder import BoundQuery
    from .cumulative import Cumulative
    from .hop import Hop
    from .subwindow import SubWindow
    from .window import Window, WindowSpec

# At most this many window edges inside one sub-window (2 t / s for SLIDE s < sub-window t): a
# finer SLIDE is refused, naming it, rather than cut into ever more slices.
MAX_CUTS_PER_SUBWINDOW = 1_000
MAX_WINDOWS = 100_000  # windows a one-time query may answer (the aligned ones answer at most one per sub-window)
MAX_KEPT = 20_000  # slice partials and reads kept per sub-window, at most (then recomputed)
# Parts of a sub-window read by a scan of their rows before its RunStore is made: making one costs
# about as much as a few scans (4-5 on the slicing bench's 20,000-row sub-windows), so a sub-window
# that few window sequences cut never pays for it, and one that many cut pays a bounded multiple of
# the best of the two (the ski-rental argument). 8: with 4, ten windows ran 0.8x of scans alone.
SCANS_BEFORE_STORE = 8


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Shape:
    """One window sequence: W_k = [k slide, k slide + range), in ms (Python ints: exact at any
    int64 bound)."""

    range_ms: int
    slide_ms: int

    def cuts(self, lo: int, hi: int) -> list[int]:
        """The window edges strictly inside (lo, hi), ascending: starts k s and ends k s + r."""
        s, r = self.slide_ms, self.range_ms
        starts = range((lo // s + 1) * s, hi, s)
        ends = range(((lo - r) // s + 1) * s + r, hi, s)
        if not len(ends):
            return list(starts)
        if not len(starts):
            return list(ends)
        return sorted(set(starts) | set(ends))

    def indexes(self, lo: int, hi: int) -> range:
        """The windows k lying entirely within [lo, hi): k s >= lo and k s + r <= hi."""
        return range(_cdiv(lo, self.slide_ms), (hi - self.range_ms) // self.slide_ms + 1)

    def completed(self, end: int) -> int:
        """The newest window k whose end k s + r is at most `end`."""
        return (end - self.range_ms) // self.slide_ms


# -- slice partials, kept per sealed sub-window and shared by every plan ---------------------------
_kept: "weakref.WeakKeyDictionary[SubWindow, dict]" = weakref.WeakKeyDictionary()
_lock = threading.Lock()  # reads may run on worker threads (offloaded query work)
_interned: "weakref.WeakValueDictionary[Hashable, _Key]" = weakref.WeakValueDictionary()  # while a plan holds it


def _order(sub: "SubWindow", time_column: str, kept: dict) -> tuple[np.ndarray | None, np.ndarray]:
    """The sub-window's rows in time order (positions, or None when they already are; times),
    once per sub-window."""
    got = kept.get(("order", time_column))
    if got is None:
        ts = sub.columns[time_column]
        if len(ts) < 2 or bool((ts[1:] >= ts[:-1]).all()):
            got = (None, ts)
        else:
            order = np.argsort(ts, kind="stable")
            got = (order, ts[order])
        kept[("order", time_column)] = got
    return got


def part_of(sub: "SubWindow", lo: int, hi: int, time_column: str, kept: dict | None = None) -> "SubWindow":
    """The rows of `sub` whose time lies in [lo, hi), as a sub-window of their own (row order kept;
    its synopses are the whole sub-window's, so it is read from its rows only)."""
    order, ts = _order(sub, time_column, {} if kept is None else kept)
    i, j = np.searchsorted(ts, [lo, hi], side="left").tolist()
    if i == 0 and j == sub.rows:
        cols = sub.columns
    elif order is None:  # rows in time order: the part is a range of them (views, no copy)
        cols = {c: a[i:j] for c, a in sub.columns.items()}
    else:
        picked = np.sort(order[i:j])
        cols = {c: a[picked] for c, a in sub.columns.items()}
    return replace(sub, columns=cols, rows=j - i, start_ms=lo, end_ms=hi, min_ts=None, max_ts=None)


def kept_for(sub: "SubWindow") -> dict:
    """The partials kept for `sub` (created empty on first use; emptied past MAX_KEPT entries, so
    many distinct one-time queries cannot grow it without bound: it is a cache, recomputed)."""
    kept = _kept.get(sub)
    if kept is None or len(kept) > MAX_KEPT:
        with _lock:
            kept = _kept.get(sub)
            if kept is None or len(kept) > MAX_KEPT:
                kept = _kept[sub] = {}
    return kept


class RunStore:
    """Scotty's aggregate store for one sealed sub-window and one inner query: its rows in time
    order, and per aggregate a reader of the contribution of any run of them (functions.py `runs`:
    prefix sums, a sparse table of block extremes), so that a slice [lo, hi) of the sub-window is
    two binary searches and O(1) lookups per aggregate instead of a scan of its rows. Made once per
    sub-window (kept with it) and shared by every window sequence of the inner query, whatever its
    cuts. Only for ungrouped queries whose aggregates all have run readers (`for_query`)."""

    __slots__ = ("ts", "ok", "inputs", "_readers")

    def __init__(self, sub: "SubWindow", inner: "BoundQuery", strings, time_column: str, kept: dict):
        from .planner.read import where_mask

        order, self.ts = _order(sub, time_column, kept)
        cols = sub.columns
        in_time = (lambda a: a) if order is None else (lambda a: a[order])
        mask = where_mask(inner, strings, cols, sub.rows) if inner.where else None
        self.inputs: list[tuple[Any, np.ndarray | None, np.ndarray | None]] = []  # per aggregate: (it, counted, values)
        for a in inner.aggs:
            keep = mask
            if a.column and "?" + a.column in cols:  # (from_rows takes the non-null values only)
                valid = cols["?" + a.column]
                keep = valid if keep is None else keep & valid
            keep = None if keep is None else in_time(keep)
            values = None
            if a.column:
                values = in_time(cols[a.column])
                values = values if keep is None else values[keep]
            counted = None if keep is None else np.concatenate(([0], np.cumsum(keep)))  # rows -> values
            self.inputs.append((a, counted, values))
        # every aggregate has a run reader for its storage (else the slices are read from rows): asked
        # of an empty array, the readers themselves made at the first read (the columns need none)
        self.ok = all(a.fn.runs(a, None if values is None else values[:0]) is not None for a, _, values in self.inputs)
        self._readers: list[tuple[np.ndarray | None, Callable[[int, int], Any]]] | None = None

    @staticmethod
    def for_query(inner: "BoundQuery") -> bool:
        """Whether the inner query's slices can be read from a RunStore: no GROUP BY, projection,
        APPROXIMATE or coalescing, and every aggregate has a run reader for its column's type."""
        if inner.group_by is not None or inner.projection or inner.approximate or inner.temporal is not None:
            return False
        for a in inner.aggs:
            if a.fn.runs(a, _stored(a.input_type) if a.column else None) is None:
                return False
        return True

    def read(self, lo: int, hi: int) -> tuple:
        """The inner query's partial of the rows with lo <= time < hi (from_rows' form)."""
        assert self.ok, "read only a store with a reader per aggregate"
        if self._readers is None:
            self._readers = [(counted, a.fn.runs(a, values)) for a, counted, values in self.inputs]
        ts = self.ts
        i, j = int(ts.searchsorted(lo)), int(ts.searchsorted(hi))
        return tuple(run(i, j) if counted is None else run(int(counted[i]), int(counted[j]))
                     for counted, run in self._readers)


    def columns(self, edges: "list[int] | np.ndarray") -> list | None:
        """Per aggregate, the combine_columns of the inner query's partials of the slices between
        consecutive `edges` (ascending), in one vectorised pass (functions.py `run_columns`), or
        None where an aggregate reads its runs one by one."""
        rows = self.ts.searchsorted(np.asarray(edges, dtype=self.ts.dtype))
        out = []
        for a, counted, values in self.inputs:
            got = a.fn.run_columns(a, values, rows if counted is None else counted[rows])
            if got is None:
                return None
            out.append(got)
        return out


def _stored(typ: str | None) -> np.ndarray:
    """An empty array of the dtype a column of type `typ` is stored in (object: strings, int128)."""
    kind = {"boolean": np.int8, "float64": np.float64, "int64": np.int64, "timestamp": np.int64, "date": np.int64}
    if typ is not None and typ.startswith("decimal("):
        return np.empty(0, dtype=np.int64)
    return np.empty(0, dtype=kind.get(typ or "", object))


def slices_of(sub: "SubWindow", cuts: list[int], key: Hashable, whole: Callable, rows: Callable,
              time_column: str, runs: Callable[["SubWindow", dict], RunStore] | None = None) -> list[tuple[int, int, Any]]:
    """The sub-window's slices between `cuts` (edges inside it), each (start, end, partial): the
    whole sub-window read by `whole`, a part of it by `rows`, or from the sub-window's RunStore
    (made by `runs` once, kept) where the query has one. Partials are kept per sub-window under
    `key` (the inner query and its path) and reused by any plan asking for the same slice."""
    kept = kept_for(sub)
    edges = [sub.start_ms, *cuts, sub.end_ms]
    out = []
    store: RunStore | None = None
    for lo, hi in zip(edges, edges[1:]):
        k = (key, lo, hi)
        got = kept.get(k)
        if got is None:
            if runs is not None and store is None and (lo, hi) != (sub.start_ms, sub.end_ms):
                store = kept.get(("runs", key))
                scans = kept.get(("scans", key), 0)
                if store is None and scans >= SCANS_BEFORE_STORE:
                    store = kept[("runs", key)] = runs(sub, kept)
                kept[("scans", key)] = scans + 1
            if lo == sub.start_ms and hi == sub.end_ms:
                got = whole(sub)
            elif store is not None and store.ok:
                got = store.read(lo, hi)
            else:
                got = rows(part_of(sub, lo, hi, time_column, kept))
            kept[k] = got
        out.append((lo, hi, got))
    return out


def kept_slices(sub: "SubWindow") -> int:
    """How many slice partials are kept for `sub` (tests, benchmarks)."""
    kept = _kept.get(sub)
    return 0 if kept is None else sum(1 for k in kept if k[0] not in ("order", "read", "runs", "scans"))


class _Key:
    """A plan's slice key (its inner query and access path) with its hash made once, one object per
    distinct key (`of`): every read looks its slices up by it, and hashing and comparing query
    dataclasses each time cost more than the lookups."""

    __slots__ = ("key", "hash", "__weakref__")

    def __init__(self, key: Hashable):
        self.key, self.hash = key, hash(key)

    @classmethod
    def of(cls, key: Hashable) -> "_Key":
        with _lock:
            got = _interned.get(key)
            if got is None:
                got = _interned[key] = cls(key)
            return got

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return self is other or isinstance(other, _Key) and self.hash == other.hash and self.key == other.key


@dataclass(frozen=True)
class SliceReader:
    """A plan's reader of a sub-window's slices between given cuts (SlicedHop.slice_reader): `key`
    names its inner query and access path (plans with equal keys read interchangeable slices),
    `read(sub, cuts)` gives slices_of's (start, end, partial) list, `columns(sub, cuts)` the
    slices' partials per aggregate as combine_columns from the sub-window's RunStore in one pass
    (None where the query has no RunStore or an aggregate no run_columns)."""

    key: "_Key"
    read: Callable[["SubWindow", list[int]], list[tuple[int, int, Any]]]
    columns: Callable[["SubWindow", "list[int] | np.ndarray"], list | None]


# -- a query answered per window over slices -------------------------------------------------------
@dataclass(frozen=True)
class SlicedHop:
    """How a bound query answers per window when its RANGE or SLIDE is not a whole number of
    sub-windows: the window sequence, the query per window (`inner`), and per output item where
    its value comes from ('start', 'end' or the inner answer's column). `picks` is None for a query
    that does not show the bounds (a periodic [RANGE r SLIDE s] query without window_start: its
    answer is the newest window's inner answer, ORDER BY and LIMIT included)."""

    shape: Shape
    newest_only: bool
    inner: "BoundQuery"
    picks: tuple[Any, ...] | None
    hidden_rows: bool
    limit: int | None
    time_column: str
    slot_ms: int
    sliced: bool = True

    @property
    def key(self) -> Hashable:
        """What makes two plans' slice partials interchangeable: the inner query (window aside)."""
        return replace(self.inner.query, range=None, slide=None)

    def alone_reason(self) -> str:
        """Why the rules' groups (txn/sharing/rules.py) do not take a periodic query of this window:
        under --sharing it joins a slices group instead (txn/sharing/slices.py)."""
        return ("not in the rules' groups: windows that cut sub-windows are due when a slide completes one of their "
                "windows, and run with the due windows of the same inner query in a slices group")

    def slice_reader(self, whole: Callable[["SubWindow"], Any], rows: Callable[["SubWindow"], Any],
                     access: Any, strings=None) -> "SliceReader":
        """The reader of a sub-window's slices between any cuts (slices_of) for this plan's inner
        query and access path: this window sequence's reads use it, and so does a shared execution
        of several window sequences of the same inner query (slicing_shared.py), at all their cuts."""
        key, tc, inner = _Key.of((self.key, str(access))), self.time_column, self.inner
        runs = (lambda sub, kept: RunStore(sub, inner, strings, tc, kept)) if RunStore.for_query(inner) else None

        def columns(sub: "SubWindow", cuts: "list[int] | np.ndarray") -> list | None:
            if runs is None:
                return None
            kept = kept_for(sub)
            store = kept.get(("runs", key))
            if store is None:
                store = kept[("runs", key)] = runs(sub, kept)
            if not store.ok:
                return None
            edges = np.empty(len(cuts) + 2, dtype=np.int64)  # (edges of a sub-window: within int64)
            edges[0], edges[1:-1], edges[-1] = sub.start_ms, cuts, sub.end_ms
            return store.columns(edges)
        return SliceReader(key, lambda sub, cuts: slices_of(sub, cuts, key, whole, rows, tc, runs), columns)

    def sliced_reader(self, slices: "SliceReader") -> Callable[["SubWindow"], Any]:
        """A sub-window's read: its bounds and its slices' partials (parts of sub-windows from the
        sub-window's RunStore where the inner query has one, else from their rows)."""
        shape = self.shape
        mine = ("read", slices.key, shape)

        def read(sub: "SubWindow") -> tuple:
            kept = kept_for(sub)
            got = kept.get(mine)  # this shape's read of the sub-window, made once
            if got is None:
                got = kept[mine] = (sub.slide, sub.start_ms, sub.end_ms,
                                    slices.read(sub, shape.cuts(sub.start_ms, sub.end_ms)))
            return got
        return read

    def due_line(self, window: "Window") -> tuple[Shape, int, int]:
        """The line slides_until_due counts on: ms, each slide one event-time slot, and the end of
        the newest sealed sub-window."""
        return self.shape, self.slot_ms, window.sealed(window.latest).end_ms

    def windows(self, reads: list) -> tuple[list[int], list[tuple[int, int, Any]]]:
        """The windows lying entirely within the sub-windows read (consecutive in time) and the
        slices they are made of, in time order."""
        reads = sorted(reads, key=lambda c: c[1])
        if not reads:
            return [], []
        for a, b in zip(reads, reads[1:]):
            assert a[2] == b[1], "the sub-windows read are consecutive"
        ks = list(self.shape.indexes(reads[0][1], reads[-1][2]))
        slices = [s for c in reads for s in c[3]]
        return (ks[-1:] if self.newest_only else ks), slices

    def answers(self, inner_finish: Callable[[Partial], Any], partial: Partial) -> list[tuple[int, int, Any]]:
        """Per window answered (start order): its bounds and its inner answer."""
        ks, slices = self.windows(list(partial.contributions.values()))
        starts = [s[0] for s in slices]
        s, r = self.shape.slide_ms, self.shape.range_ms
        answers = []
        for k in ks:
            lo, hi = k * s, k * s + r
            i, j = bisect.bisect_left(starts, lo), bisect.bisect_left(starts, hi)
            assert starts[i] == lo and (j == len(slices) or starts[j] == hi) and slices[j - 1][1] == hi
            part = Partial()
            for x in range(i, j):
                part.add(x, slices[x][2])
            answers.append((lo, hi, inner_finish(part)))
        return answers

    def finish(self, inner_finish: Callable[[Partial], Any], partial: Partial) -> list[tuple]:
        """The answer rows: per window (start order), its inner answer's rows with the bounds."""
        return self.rows(self.answers(inner_finish, partial))

    def window_columns(self, los: list[int], his: list[int], columns: list[list],
                       keep: list[bool] | None) -> tuple[list[list], list[bool] | None]:
        """`rows` of many windows at once whose inner answers have at most one row each (ungrouped
        inner queries), by column: `columns` per inner item its values over the windows and `keep`
        which windows have an inner row (None: all); gives per output item its column over the
        windows and which windows have an answer row (None: all; not a hidden empty window, nor
        LIMIT 0)."""
        assert self.picks is not None and len(los) == len(his) and all(len(c) == len(los) for c in columns)
        if self.limit == 0:
            keep = [False] * len(los)
        elif self.hidden_rows and 0 in columns[-1]:  # (the hidden last item counts the window's rows: an empty one shows none)
            keep = [c != 0 for c in columns[-1]] if keep is None else [k and c != 0 for k, c in zip(keep, columns[-1])]
        return [los if p == "start" else his if p == "end" else columns[p] for p in self.picks], keep

    def rows(self, answers: list[tuple[int, int, Any]]) -> list[tuple]:
        """The answer rows of windows' inner answers (start order, `answers`' form): each window's
        rows with its bounds where the query shows them, LIMIT applied."""
        assert self.picks is not None
        rows: list[tuple] = []
        for lo, hi, ans in answers:
            for row in ans.rows:
                if self.hidden_rows and row[-1] == 0:
                    continue
                rows.append(tuple(lo if p == "start" else hi if p == "end" else row[p] for p in self.picks))
        return rows if self.limit is None else rows[: self.limit]


def slides_until_due(hop: "SlicedHop | Hop | Cumulative", window: "Window", last_reflected: int | None) -> int:
    """Slides until a periodic query answered per window is due: 0 (or less) once a slide after
    the one its last answer reflected has completed a window [k s, k s + r) that starts at or after
    the stream's first sub-window (seed 003 Definition 9: the newest window computable then). So
    each window is answered at the slide that completes it, and an execution held back answers the
    newest and leaves the next due at the next completion (no phase kept from its registration).
    Every kind of window sequence (hop.Hop, SlicedHop, cumulative.Cumulative) says where its
    windows lie on the line its slides advance (`due_line`): consecutive sub-windows of `unit`
    each, so slide j ends at the latest's end less (latest - j) units. Never answered: due at once
    (the newest window)."""
    if last_reflected is None:
        return 0
    if window.latest < 0:  # answered before the first slide: due again once one completes a window
        return 1
    shape, unit, latest_end = hop.due_line(window)
    first = latest_end - (window.latest + 1) * unit  # where slide 0's sub-window starts
    reflected_end = latest_end - (window.latest - last_reflected) * unit
    nxt = max(shape.completed(reflected_end) + 1, _cdiv(first, shape.slide_ms))
    needed_end = nxt * shape.slide_ms + shape.range_ms
    return _cdiv(needed_end - latest_end, unit)


def sliced_task(task) -> SlicedHop | None:
    """The sliced hop of a periodic task's plan, if it has one (txn/sharing/runtime.py puts such tasks in slices groups)."""
    hop = getattr(getattr(task.plan, "bound", None), "hop", None)
    return hop if isinstance(hop, SlicedHop) else None


# -- binding -----------------------------------------------------------------------------------------
def unaligned(q: Query, spec: "WindowSpec") -> bool:
    """Is RANGE or SLIDE a time length that is not a whole number of sub-windows?"""
    t = spec.subwindow_ms
    return t is not None and any(x is not None and x.unit == "ms" and x.value % t
                                 for x in (q.range, q.slide))


def bind_sliced(binder, q: Query, periodic: bool, bounds: bool) -> "BoundQuery":
    """Bind a query whose RANGE or SLIDE is not a whole number of sub-windows (binder._Binder
    `binder`); `bounds`: it names window_start or window_end."""
    from .binder import _Binder
    from .hop import BOUNDS, WINDOW_START, bind_per_window, window_items

    spec: WindowSpec = binder.spec
    fail = binder.fail
    rng, sld = q.range, q.slide
    bad = rng if rng is not None and rng.value % spec.slot_ms else sld
    assert bad is not None  # (unaligned: one of them cuts sub-windows)
    what = "RANGE" if bad is rng else "SLIDE"
    if spec.clock != Clock.EVENT:
        fail(f"{what} {bad.value} ms is not a multiple of the sub-window length {spec.slot_ms} ms: windows that cut "
             "sub-windows are answered exactly on event-time streams only (there a row's time places it; on a "
             f"{spec.clock} stream a sub-window is what arrived between two slides)", bad.loc)
    for name, x in (("RANGE", q.range), ("SLIDE", q.slide)):
        if x is not None and x.unit != "ms":
            fail(f"{name} in {x.unit} with a {what} in time units: give both in time units", x.loc)
        if x is not None and x.value < 1:
            fail(f"{name} must be positive", x.loc)
    t, n = spec.slot_ms, spec.subwindows
    r = rng.value if rng is not None else n * t
    if rng is not None and _cdiv(r, t) + 1 > n:
        fail(f"RANGE {r} ms spans up to {_cdiv(r, t) + 1} sub-windows of {t} ms but the window holds {n}", rng.loc)
    if sld is None:
        if not bounds:
            fail(f"RANGE {r} ms is not a multiple of the sub-window length {t} ms: give SLIDE (windows [k s, k s + r) "
                 "are cut exactly) or a whole number of sub-windows", bad.loc)
        fail(f"GROUP BY {WINDOW_START} needs a window with SLIDE: [RANGE r SLIDE s] (tumbling: s = r)", q.group_by_loc)
    assert sld is not None
    s = sld.value
    if 2 * t > MAX_CUTS_PER_SUBWINDOW * s:
        fail(f"SLIDE {s} ms would cut each {t} ms sub-window into more than {MAX_CUTS_PER_SUBWINDOW} slices; "
             f"the shortest SLIDE on this stream is {_cdiv(2 * t, MAX_CUTS_PER_SUBWINDOW)} ms", sld.loc)
    for what2, bad2, loc in (("APPROXIMATE", q.approximate, q.loc), ("AS OF SLIDE", q.as_of_slide is not None, q.as_of_loc)):
        if bad2:
            fail(f"{what2} is not supported with a RANGE or SLIDE that cuts sub-windows", loc)
    if bounds and not periodic and n * t // s > MAX_WINDOWS:
        fail(f"SLIDE {s} ms would answer up to {n * t // s} windows of a window of {n} sub-windows of {t} ms, at most "
             f"{MAX_WINDOWS} (register the query for the newest window, or give a SLIDE of at least "
             f"{_cdiv(n * t, MAX_WINDOWS)} ms)", sld.loc)
    shape = Shape(r, s)
    n_q = min(n, _cdiv(r + s, t) + 1) if periodic else n
    every = _cdiv(s, t)  # the most slides between two windows (a late execution is one past it)
    tc = binder.schema.time_column
    if not bounds:
        if not periodic:
            fail(f"a query with SLIDE is periodic: register it (or GROUP BY {WINDOW_START} for every window)", sld.loc)
        inner_q = replace(q, range=None, slide=None)
        inner = _Binder(inner_q, binder.schema, spec).bind()
        hop = SlicedHop(shape, True, inner, None, False, None, tc, t)
        return replace(inner, query=q, n_q=n_q, every=every, hop=hop)
    grouped = [c for c in q.group_columns if c in BOUNDS]
    if not grouped:
        named = next(c for c in q.items if isinstance(c, KeyColumn) and c.column in BOUNDS)
        fail(f"{named.column} needs GROUP BY {named.column} (a query answered per window groups by its bounds)",
             named.loc, named.column)
    for what3, bad3, loc in (("ORDER BY", q.order_by, q.order_by[0].loc if q.order_by else None),
                             ("a sub-query", q.outer, q.outer[0].loc if q.outer else None),
                             ("SELECT DISTINCT", q.distinct, q.loc)):
        if bad3:
            fail(f"{what3} is not supported with {grouped[0]} (rows come by window, then by key)", loc)
    inner, picks, hidden = bind_per_window(binder, q, spec)
    out_items = window_items(q, inner, picks)
    hop = SlicedHop(shape, periodic, inner, tuple(picks), hidden, q.limit, tc, t)
    return replace(inner, query=q, n_q=n_q, every=every, items=out_items, order=[], limit=q.limit, hop=hop)
