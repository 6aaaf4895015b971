"""The sliding window: a circular array of n sealed sub-windows, the open buffer, sealing, and
the window-level synopses (running and interval) maintained at each slide.

Sub-window j (the j-th slide, its version) lives at position j mod n. Clocks:
- processing: sub-window j covers clock time [(b + j) t, (b + j + 1) t), b = creation slot;
  every appended row goes to the open sub-window; slides are due on schedule even with no input.
- event: sub-window j covers event time [(b + j) t, (b + j + 1) t), b = slot of the first row;
  slides are due when the watermark (max event time - allowed lateness) passes their end; rows for
  a sub-window already sealed are late: counted and reported, not stored.
- manual: a slide happens only when asked.
- count-based (subwindow_rows=N): a slide is due whenever N rows are buffered.

The window's shape and its validation are WindowSpec's (window_spec.py), the MIN/MAX blocks
IntervalSynopsis's (interval.py); the window owns its sub-windows, buffers and running totals.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .errors import InvalidInput, OutOfRange
from .exact import INT64_MAX, INT64_MIN
from .interval import IntervalSynopsis
from .schema import Schema, valid_key
from .subwindow import SubWindow
from .cumulative import Running, rebuild
from .key_running import RunningKeys
from .last_rows import History, KeyBook, LastRows
from .kinds import Clock
from .synopsis import KeySummary, aligned, build_synopsis, concat
from . import sketch_columns
from .window_spec import CLOCKS, MAX_MS, MAX_SUBWINDOWS, WindowSpec

# The window's shape (window_spec.py) and its interval synopsis (interval.py) import from here too.
__all__ = ["CLOCKS", "COUNT_KEY", "MAX_MS", "MAX_SUBWINDOWS", "AppendResult", "Cut", "IntervalSynopsis", "Window",
           "WindowSpec", "count_key", "merge_chunks"]

COUNT_KEY = "__count__"


def count_key(column: str) -> str:
    """The running synopsis' key of COUNT(column): its non-null values."""
    return "#" + column


@dataclass(frozen=True)
class AppendResult:
    accepted: int
    late: int


@dataclass
class _Buffer:
    chunks: list[dict[str, np.ndarray]] = field(default_factory=list)
    rows: int = 0

    def add(self, columns: dict[str, np.ndarray], rows: int) -> None:
        if rows:
            self.chunks.append(_without_full_masks(columns))
            self.rows += rows

    def detach(self, rows: int | None = None) -> tuple[tuple[dict[str, np.ndarray], ...], int]:
        """Remove and return the first `rows` rows (all when None) as the chunks that hold them,
        not concatenated: a chunk across the boundary is split into two views."""
        total = self.rows
        if rows is None or rows >= total:
            out, self.chunks, self.rows = tuple(self.chunks), [], 0
            return out, total
        head, left = [], rows
        while left:
            chunk = self.chunks[0]
            n = len(next(iter(chunk.values())))
            if n <= left:
                head.append(self.chunks.pop(0))
                left -= n
            else:
                head.append(_without_full_masks({c: a[:left] for c, a in chunk.items()}))
                self.chunks[0] = _without_full_masks({c: a[left:] for c, a in chunk.items()})
                left = 0
        self.rows = total - rows
        return tuple(head), rows


def merge_chunks(chunks, names: list[str]) -> dict[str, np.ndarray]:
    """Buffered chunks as one set of columns (validity masks where any chunk has a null in a
    column; chunks without one are all valid there)."""
    if not chunks:
        return {}
    merged = {c: concat([ch[c] for ch in chunks]) for c in names}
    for c in names:
        vk = valid_key(c)
        if any(vk in ch for ch in chunks):
            merged[vk] = concat([ch[vk] if vk in ch else np.ones(len(ch[c]), dtype=bool) for ch in chunks])
    return merged


@dataclass(frozen=True)
class Cut:
    """Write transaction T_j begun: slide j's rows, detached from the open buffer. From here on
    appends go to slide j + 1 (so the Slide command's place in the log is the cut, and replaying
    the log cuts the same rows). Sealing them (Window.seal_cut) reads only this and the window's
    immutable schema and spec, so it may run on another thread while the window is read and
    appended to; Window.install then makes sub-window j visible. Until then the window is as
    of slide j - 1."""

    slide: int
    start_ms: int | None      # None: count-based, bounded by the event times it holds
    end_ms: int | None
    chunks: tuple
    rows: int
    now_ms: int
    prefix_before: dict
    after_ms: int             # count-based without rows: where the previous sub-window ended


def _without_full_masks(columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Columns without the validity masks that hold no null: a mask is kept only where a null is
    (buffers, sub-windows and snapshots all keep to this, so equal data is equal state)."""
    if not any(c.startswith("?") for c in columns):
        return columns
    return {c: a for c, a in columns.items() if not (c.startswith("?") and a.all())}


class Window:
    def __init__(self, schema: Schema, spec: WindowSpec, created_ms: int):
        spec.validate(schema)
        self.schema = schema
        self.spec = spec
        self.n = spec.subwindows
        self.subs: list[SubWindow | None] = [None] * self.n
        self.latest = -1  # newest slide applied (installed); -1 before the first
        # The committed state's version: bumped by every change a query can see (a sub-window
        # placed, sketches adopted, strings renumbered, a snapshot's state put back), so equal
        # versions of one window mean equal answers (txn/answer_cache.py). _check holds it to that:
        # what it last stamped is what the window holds.
        self.version = 0
        self._stamp: tuple = ()
        self.cutting: Cut | None = None  # the slide begun and being sealed, if any
        self.created_ms = created_ms
        self.last_seal_ms = created_ms
        self._names = schema.names
        self._numeric = schema.numeric_columns() + [schema.time_column]
        self._int_columns = [c for c in self._numeric if schema.types[c] == "int64" or schema.types[c].startswith("decimal(")]
        self._strings = {c for c, t in schema.columns if t == "string"}
        self.dictionary: Any = None  # the stream's StringDictionary (Stream sets it): string sketches take text
        # running COUNT(*), COUNT(c) (non-null values: key "#c") and integer SUMs
        self._prefix = {COUNT_KEY: 0, **{c: 0 for c in self._int_columns}, **{count_key(c): 0 for c in self._names}}
        self.interval = IntervalSynopsis(self.n)
        self.running_keys = {g: RunningKeys(g, self.n, self._numeric, self._int_columns)
                             for g in spec.group_by if schema.types[g] == "string"}
        t = spec.subwindow_ms
        origin = created_ms if spec.origin_ms is None else spec.origin_ms
        # processing time, and event time given an origin (a partitioned stream's partitions all
        # start at the same sub-window, so slide k is the same window on each): the first sub-window
        starts = spec.clock == Clock.PROCESSING or (spec.clock == Clock.EVENT and spec.origin_ms is not None)
        self._base_slot: int | None = origin // t if (t and starts) else None
        self._buffer = _Buffer()
        self._slots: dict[int, _Buffer] = {}   # event time: open sub-windows by slot
        self.max_event_ms: int | None = None
        self.late_rows = 0
        # partitioned windows: the last rows per key as of `latest`, and the keys accepted (last_rows.py)
        self.last_rows: History | None = None
        self.key_book: KeyBook | None = None
        if spec.last_rows:
            self.last_rows = History(LastRows(spec.last_rows_by, spec.last_rows, schema.time_column,
                                              self.empty_columns(), 0))
            self.key_book = KeyBook(spec.last_rows_by, spec.keys_limit)
        # landmark windows: the running synopsis before the oldest live sub-window (cumulative.py)
        self.running_base = Running.empty(frozenset(self._strings))

    # -- reading -----------------------------------------------------------------------------
    def youngest(self, n_q: int) -> list[SubWindow]:
        """The n_q youngest sealed sub-windows, youngest first (fewer while the window fills)."""
        subs, n = self.subs, self.n
        # slides latest - n_q + 1 .. latest are live, so sealed: none of these is None
        return [subs[v % n] for v in range(self.latest, max(self.latest - n_q, -1), -1)]  # type: ignore[misc]

    def answerable(self, n_q: int) -> tuple[int, int] | None:
        """The slides k whose window of n_q sub-windows (slides k - n_q + 1 .. k, from 0 while the
        window filled) is still entirely live: (first, last), or None when there is none."""
        if self.latest < 0:
            return None
        oldest = max(0, self.latest - self.n + 1)
        first = 0 if oldest == 0 else oldest + n_q - 1
        return (first, self.latest) if first <= self.latest else None

    def as_of(self, k: int, n_q: int) -> list[SubWindow]:
        """Slide k's window of n_q sub-windows (AS OF SLIDE k), youngest first; the caller checks
        answerable() first."""
        subs, n = self.subs, self.n
        return [subs[v % n] for v in range(k, max(k - n_q, -1), -1)]  # type: ignore[misc]  # live slides: sealed

    def sealed(self, slide: int) -> SubWindow:
        """The sub-window of live slide `slide` (the caller knows it is live)."""
        sub = self.subs[slide % self.n]
        assert sub is not None, f"slide {slide} is not sealed"
        return sub

    def version_at(self, position: int) -> int | None:
        sub = self.subs[position]
        return None if sub is None else sub.slide

    def ttu(self, position: int) -> int:
        """Slides still to be applied until `position` is overwritten (n for the youngest)."""
        return (position - (self.latest + 1)) % self.n + 1

    @property
    def cut_through(self) -> int:
        """The newest slide begun: latest, or latest + 1 while `cutting` is being sealed."""
        return self.latest + (self.cutting is not None)

    @property
    def buffered_rows(self) -> int:
        """Rows waiting for a slide: in open buffers, and cut for the slide being sealed."""
        cut = self.cutting.rows if self.cutting is not None else 0
        return self._buffer.rows + sum(b.rows for b in self._slots.values()) + cut

    def bounds(self, n_q: int) -> tuple[int | None, int | None]:
        """[start, end) of the n_q youngest sealed sub-windows, (None, None) before the first seal.
        Time-based sub-windows are consecutive slots, so these are the oldest's start and the
        youngest's end, found without walking the window (a probe asks on every call); a
        count-based sub-window spans the event times it was given, in any order."""
        if self.latest < 0:
            return None, None
        if self.spec.count_based:
            subs = self.youngest(n_q)
            return min(s.start_ms for s in subs), max(s.end_ms for s in subs)
        oldest = max(self.latest - min(n_q, self.n) + 1, 0)
        return self.sealed(oldest).start_ms, self.sealed(self.latest).end_ms

    def refused_state(self) -> str | None:
        """Why this window holds what the current code would have refused (a state restored from
        an older version's snapshot), or None: a sealed sub-window's bound outside int64, or a
        buffered event time outside the spec's event_time_limits()."""
        for sub in self.subs:
            if sub is not None:
                for bound in (sub.start_ms, sub.end_ms):
                    if not INT64_MIN <= bound <= INT64_MAX:
                        return f"sub-window {sub.slide} has the bound {bound}, outside int64"
        lo, hi = self.spec.event_time_limits()
        tc = self.schema.time_column
        for buf in [self._buffer, *self._slots.values()]:
            for chunk in buf.chunks:
                ts = chunk[tc]
                if len(ts) and (int(ts.min()) < lo or int(ts.max()) > hi):
                    return f"a buffered event time is outside {lo}..{hi}, the times its sub-windows can bound in int64"
        return None

    # -- writing -----------------------------------------------------------------------------
    def append(self, columns: dict[str, np.ndarray], rows: int, checked: bool = False,
               bounds: tuple[int, int] | None = None) -> AppendResult:
        """Buffer validated columns (see Schema.validate). Never seals: see due() and slide().
        `checked`: the caller ran check_append on these times already (Stream does, before it
        interns the batch's strings), so it is not run twice; `bounds`: what that check returned
        (the times' min and max), so they are not computed again."""
        if rows == 0:
            return AppendResult(0, 0)
        ts = columns[self.schema.time_column]
        if self.spec.clock == Clock.EVENT:
            return self._append_event(columns, rows, ts, checked, bounds)
        self._note_event_time(ts)
        self._buffer.add(columns, rows)
        return AppendResult(rows, 0)

    def check_append(self, ts: np.ndarray, bounds: tuple[int, int] | None = None) -> tuple[int, int] | None:
        """Raise InvalidInput if append() would refuse rows with these event times; changes nothing.
        On an event-time window it returns the times' (min, max), for append(bounds=): one pass
        each over the times per Append, not one per check (None otherwise, and for no rows).
        `bounds`: the times' (min, max) when the caller has them (a prepared batch's)."""
        if not len(ts):
            return None
        if self.spec.clock != Clock.EVENT:
            self.spec.check_event_times(ts, self.schema.time_column, bounds)
            return None
        if bounds is None:
            bounds = int(ts.min()), int(ts.max())
        self.spec.check_event_times(ts, self.schema.time_column, bounds)
        t = self.spec.slot_ms
        base = self._base_slot if self._base_slot is not None else bounds[0] // t
        horizon = max(base + self.cut_through + 1, self._watermark_slot()) + 10 * self.n
        if bounds[1] // t > horizon:
            raise InvalidInput(
                f"event time {bounds[1]} is more than {10 * self.n} sub-windows ahead of the watermark",
                column=self.schema.time_column)
        return bounds

    def check_event_time(self, ms: int) -> None:
        """Raise InvalidInput naming `event_time_ms` if reach_event_time(ms) would be refused."""
        if self.spec.clock != Clock.EVENT:
            raise InvalidInput("event_time_ms applies only to a stream with clock='event'", column="event_time_ms")
        try:
            self.check_append(np.array([ms], dtype=np.int64))
        except OutOfRange as e:
            raise OutOfRange(f"event_time_ms: {e}", field="event_time_ms", limit=e.limit) from e
        except InvalidInput as e:
            raise InvalidInput(f"event_time_ms: {e}", column="event_time_ms") from e

    def reach_event_time(self, ms: int) -> None:
        """The writer's event time has reached `ms` (checked by check_event_time): the watermark
        moves as if a row of that time had come, and the slides it completes fall due. With no
        first sub-window yet (no origin, no row) it waits for the rows that fix one."""
        if self._base_slot is not None:
            self._note_event_time(np.array([ms], dtype=np.int64))

    def _append_event(self, columns, rows, ts, checked: bool, bounds: tuple[int, int] | None) -> AppendResult:
        """Rows into the buffers of their sub-windows' slots. The usual batch (one second of event
        time, none late) costs a min and a max over its times: the per-row slots are computed only
        when some row is late or the batch spans slots (then grouped as before)."""
        if not checked:
            bounds = self.check_append(ts)
        t = self.spec.slot_ms  # an event-time window is time-based
        lo, hi = bounds if bounds is not None else (int(ts.min()), int(ts.max()))
        if self._base_slot is None:
            self._base_slot = lo // t
        elif self.cut_through < 0 and self.spec.origin_ms is None and lo // t < self._base_slot:
            # nothing cut yet and no origin: the stream starts at its first rows' sub-window, and an
            # earlier row whose sub-window the watermark has not passed (within the lateness) opens
            # an earlier one, as if it had come first, rather than being counted late
            self._note_event_time(ts)  # (the watermark with this batch's rows)
            self._base_slot = min(self._base_slot, max(lo // t, self._watermark_slot()))
        next_slot = self._base_slot + self.cut_through + 1
        late = 0
        slots = None
        if lo // t < next_slot:
            slots = ts // t
            keep = slots >= next_slot
            late = rows - int(keep.sum())
            self.late_rows += late
            if late == rows:
                return AppendResult(0, late)
            columns = {c: a[keep] for c, a in columns.items()}
            slots = slots[keep]
            lo = int(columns[self.schema.time_column].min())
        self.max_event_ms = hi if self.max_event_ms is None else max(self.max_event_ms, hi)
        first, last = lo // t, hi // t
        if first == last:  # the usual batch: one slot's rows, no grouping (np.unique sorts)
            self._slots.setdefault(first, _Buffer()).add(columns, rows - late)
            return AppendResult(rows - late, late)
        if slots is None:
            slots = ts // t
        for slot in np.unique(slots).tolist():
            sel = slots == slot
            part = {c: a[sel] for c, a in columns.items()} if not sel.all() else columns
            self._slots.setdefault(slot, _Buffer()).add(part, int(sel.sum()))
        return AppendResult(rows - late, late)

    def _note_event_time(self, ts: np.ndarray) -> None:
        if len(ts):
            m = int(ts.max())
            self.max_event_ms = m if self.max_event_ms is None else max(self.max_event_ms, m)

    def _watermark_slot(self) -> int:
        if self.max_event_ms is None:
            return -(2**62)
        return (self.max_event_ms - self.spec.allowed_lateness_ms) // self.spec.slot_ms

    def due(self, now_ms: int) -> int:
        """How many slides are due at clock time now_ms (0 for manual windows)."""
        spec = self.spec
        if spec.count_based:
            return self._buffer.rows // spec.subwindow_rows  # type: ignore[operator]  # count-based: subwindow_rows is set
        if spec.clock == Clock.PROCESSING:
            return max(0, now_ms // spec.slot_ms - self._base_slot - (self.cut_through + 1))  # type: ignore[operator]  # processing time: set at creation
        if spec.clock == Clock.EVENT:
            if self._base_slot is None:
                return 0
            # slot s is complete once the watermark reaches its end: watermark_slot > s
            return max(0, self._watermark_slot() - (self._base_slot + self.cut_through + 1))
        return 0

    @property
    def due_on_rows(self) -> bool:
        """Whether its slides fall due on the rows appended (count-based, event time), not on the
        clock alone (processing time) or only when asked for (manual)."""
        return self.spec.count_based or self.spec.clock == Clock.EVENT

    def next_due_ms(self) -> int | None:
        """Clock time of the next scheduled slide (processing time only)."""
        if self.spec.clock == Clock.PROCESSING and not self.spec.count_based:
            return (self._base_slot + self.cut_through + 2) * self.spec.slot_ms  # type: ignore[operator]  # processing time: set at creation
        return None

    def slide(self, now_ms: int) -> SubWindow:
        """Write transaction T_j at once: cut, seal, install."""
        sub = self.seal_cut(self.cut(now_ms))
        self.install(sub)
        return sub

    def cut(self, now_ms: int) -> Cut:
        """Begin T_j: detach the rows of the next sub-window (see Cut). One at a time: the next
        cut waits for this one's install (its running synopsis starts where this one ends)."""
        assert self.cutting is None, "a slide is being sealed"
        spec = self.spec
        j = self.latest + 1
        if spec.count_based:
            chunks, rows = self._buffer.detach(spec.subwindow_rows)
            start = end = None
        elif spec.clock == Clock.EVENT:
            slot = self._base_slot + j if self._base_slot is not None else now_ms // spec.slot_ms
            if self._base_slot is None:
                self._base_slot = slot
            buf = self._slots.pop(slot, None)
            chunks, rows = buf.detach() if buf else ((), 0)
            start, end = slot * spec.slot_ms, (slot + 1) * spec.slot_ms
        elif spec.clock == Clock.PROCESSING:
            chunks, rows = self._buffer.detach()
            slot = self._base_slot + j  # type: ignore[operator]  # processing time: set at creation
            start, end = slot * spec.slot_ms, (slot + 1) * spec.slot_ms
        else:
            chunks, rows = self._buffer.detach()
            start, end = self.last_seal_ms, max(now_ms, self.last_seal_ms)
        after = self.sealed(self.latest).end_ms if self.latest >= 0 else 0
        self.cutting = Cut(j, start, end, chunks, rows, now_ms, dict(self._prefix), after)
        self.last_seal_ms = now_ms
        return self.cutting

    def seal_cut(self, cut: Cut) -> SubWindow:
        """Slide j's sub-window from its cut. Reads nothing the window changes (any thread)."""
        cols = merge_chunks(cut.chunks, self._names) if cut.rows else self.empty_columns()
        start, end = cut.start_ms, cut.end_ms
        if start is None:  # count-based: bounds are the observed event times
            ts = cols[self.schema.time_column]
            start = int(ts.min()) if cut.rows else cut.after_ms
            end = int(ts.max()) + 1 if cut.rows else start
        return self.seal(cut.slide, start, end, cols, cut.rows, cut.now_ms, dict(cut.prefix_before))  # type: ignore[arg-type]  # bounds: both set or both None

    def install(self, sub: SubWindow) -> None:
        """Commit T_j: its sealed sub-window takes position j mod n."""
        assert self.cutting is not None and sub.slide == self.cutting.slide, "install the sub-window cut last"
        self._prefix = dict(sub.synopsis.prefix_after)
        if self.last_rows is not None:  # (sub is not placed yet: no query has it)
            self.last_rows.install(sub.slide, sub.columns, sub.rows, self.n)
            object.__setattr__(sub, "last_rows", self.last_rows)
        before = self.sealed(self.latest).running if self.latest >= 0 else self.running_base
        object.__setattr__(sub, "running", before.add(sub))  # (not placed yet: no query has it)
        evicted = self.subs[sub.position]
        if evicted is not None:
            self.running_base = evicted.running
            self.running_base.synopsis  # merged now (one merge per slide): the chain ends here
        self._place(sub)
        self._changed()
        self.cutting = None

    def check_keys(self, checked: dict, rows: int) -> set:
        """The keys of a checked batch new to a stream that keeps last rows per key; raises
        ResourceLimit, changing nothing, when they would pass its key limit."""
        if self.key_book is None or not rows:
            return set()
        return self.key_book.check(KeyBook.batch_keys(checked, self.spec.last_rows_by, rows))

    def restore_last_rows(self, plain: dict | None, keys: list | None) -> None:
        """Put back what counters() kept of the last rows per key (a snapshot)."""
        if self.last_rows is None or plain is None:
            return
        spec = self.spec
        state = LastRows.from_plain(spec.last_rows_by, spec.last_rows, self.schema.time_column, plain)
        self.last_rows.snap = (self.latest, state, ())
        for sub in self.subs:  # (restored, not yet read by any query)
            if sub is not None:
                object.__setattr__(sub, "last_rows", self.last_rows)
        assert self.key_book is not None
        self.key_book.keys = {tuple(k) for k in keys or ()}
        self._changed()

    def restore_landmark(self, plain: dict | None) -> None:
        """Put back the running synopsis a snapshot kept (before its oldest sub-window) and rebuild
        the live sub-windows' states on it, in slide order; without one (nothing evicted yet, or an
        older snapshot), from the oldest live sub-window."""
        skip = frozenset(self._strings)
        self.running_base = Running.from_plain(plain, skip) if plain is not None else Running.empty(skip)
        rebuild(self.running_base, sorted((s for s in self.subs if s is not None), key=lambda s: s.slide))
        self._changed()

    def empty_columns(self) -> dict[str, np.ndarray]:
        dtypes = {"int64": np.int64, "float64": np.float64, "boolean": np.int8, "string": np.int32,
                  "timestamp": np.int64, "date": np.int64}
        return {c: np.empty(0, dtype=dtypes.get(self.schema.types[c], np.int64)) for c in self._names}  # decimals: int64

    def seal(self, j: int, start: int, end: int, cols: dict[str, np.ndarray], rows: int, now_ms: int,
             prefix_before: dict[str, int], sketches: dict | None = None) -> SubWindow:
        """The immutable sub-window of slide j: columns frozen, synopses built (a snapshot restores
        sub-windows through here too, so they come back exactly as sealed; it passes the declared
        sketches as they were sealed, `sketches`). Its columns are aligned (synopsis.aligned)."""
        cols = {c: aligned(a) for c, a in _without_full_masks(cols).items()}
        for a in cols.values():
            a.flags.writeable = False
        syn = build_synopsis(cols, rows, self._numeric, self.spec.group_by, self.spec.topk, self._strings)
        if self.spec.sketches:
            syn = replace(syn, sketches=sketches if sketches is not None else
                          sketch_columns.build(self.spec.sketches, cols, self.schema.types, self.dictionary))
        after = dict(prefix_before)
        for c in self._names:  # a snapshot from before nulls: every value counted
            after.setdefault(count_key(c), after[COUNT_KEY])
        prefix_before = {**after, **prefix_before}
        after[COUNT_KEY] += rows
        for c in self._int_columns:
            after[c] += syn.columns[c].sum  # type: ignore[assignment]  # integer columns sum to int
        for c in self._names:
            after[count_key(c)] += rows - syn.nulls.get(c, 0)
        syn = replace(syn, prefix_before=prefix_before, prefix_after=after)
        ts = syn.columns[self.schema.time_column]  # its summary: the event times' min and max
        return SubWindow(j, j % self.n, start, end, ts.min if rows else None, ts.max if rows else None,  # type: ignore[arg-type]  # int64 times
                         rows, cols, syn, now_ms)

    def adopt_sketches(self, slide: int, data: dict[str, bytes]) -> bool:
        """Put back the sketches slide `slide` was sealed with (their bytes, by sketch_key) over the
        ones a replay rebuilt from its rows (sketch_columns.unrepeatable says which): False when that
        slide is no longer live."""
        sub = self.subs[slide % self.n]
        if sub is None or sub.slide != slide or not self.spec.sketches:
            return False
        kept = sketch_columns.from_bytes(self.spec.sketches, self.schema.types, data, partial=True)
        syn = replace(sub.synopsis, sketches={**sub.synopsis.sketches, **kept})
        self.subs[sub.position] = replace(sub, synopsis=syn)
        self._changed()
        return True

    def _place(self, sub: SubWindow) -> None:
        self.subs[sub.position] = sub
        self.latest = sub.slide
        self.interval.add(sub.slide, sub.synopsis)
        for keys in self.running_keys.values():
            keys.add(sub.slide, self.subs)

    def _changed(self) -> None:
        """The committed state changed: a new version, and what it is made of stamped (_check)."""
        self.version += 1
        self._stamp = (self.latest, tuple(self.subs), self.running_base, self.last_rows)

    def restore(self, subs: list[SubWindow], latest: int, prefix: dict[str, int], last_seal_ms: int,
                base_slot: int | None, max_event_ms: int | None, late_rows: int,
                buffer: list[dict[str, np.ndarray]], slots: dict[int, list[dict[str, np.ndarray]]]) -> None:
        """Put back the state a snapshot captured (sub-windows sealed through `seal`)."""
        for sub in sorted(subs, key=lambda s: s.slide):
            self._place(sub)
        self.latest = latest
        self._changed()  # (once for all the sub-windows placed: its stamp copies the whole ring)
        self._prefix = dict(prefix)
        for c in self._names:  # a snapshot from before nulls: every value counted
            self._prefix.setdefault(count_key(c), self._prefix[COUNT_KEY])
        self.last_seal_ms = last_seal_ms
        self._base_slot = base_slot
        self.max_event_ms = max_event_ms
        self.late_rows = late_rows
        for chunk in buffer:
            self._buffer.add(chunk, len(next(iter(chunk.values()))))
        for slot, chunks in slots.items():
            for chunk in chunks:
                self._slots.setdefault(slot, _Buffer()).add(chunk, len(next(iter(chunk.values()))))

    # -- string dictionary compaction ------------------------------------------------------------
    def live_codes(self) -> np.ndarray:
        """The string codes held by live sub-windows, buffers and a cut being sealed (sorted, unique)."""
        parts = [sub.columns[c] for sub in self.subs if sub is not None for c in self._strings]
        for chunks in [self._buffer.chunks, *(b.chunks for b in self._slots.values()),
                       self.cutting.chunks if self.cutting is not None else ()]:
            parts += [chunk[c] for chunk in chunks for c in self._strings]
        if self.last_rows is not None:
            parts += self.last_rows.codes(self._strings)
        parts += [a for sub in self.subs if sub is not None and sub.running is not None
                  for a in sub.running.codes(self._strings)] + self.running_base.codes(self._strings)
        parts = [p for p in parts if len(p)]
        return np.unique(np.concatenate(parts)).astype(np.int32) if parts else np.empty(0, dtype=np.int32)

    def remap_strings(self, remap: np.ndarray) -> None:
        """Renumber string codes (StringDictionary.compact's map, order-preserving on live codes):
        every live sub-window is replaced by a copy with renumbered string columns and per-key
        synopses (a write of the whole window: no query may be reading it, no slide being sealed)."""
        assert self.cutting is None, "a slide is being sealed"
        def codes(a: np.ndarray) -> np.ndarray:
            out = remap[a] if len(a) else a
            out.flags.writeable = False
            return out

        def key_codes(a: np.ndarray) -> np.ndarray:  # the null group's key (-1) stays -1
            out = np.where(a < 0, a, remap[a]).astype(a.dtype, copy=False) if len(a) else a
            out.flags.writeable = False
            return out

        for i, sub in enumerate(self.subs):
            if sub is None:
                continue
            cols = {c: codes(a) if c in self._strings else a for c, a in sub.columns.items()}
            by_key = {}
            for g, ks in sub.synopsis.by_key.items():
                if g in self._strings:
                    ks = replace(ks, keys=key_codes(ks.keys), topk=replace(ks.topk, keys=key_codes(ks.topk.keys)))
                by_key[g] = ks
            self.subs[i] = replace(sub, columns=cols, synopsis=replace(sub.synopsis, by_key=by_key))
        self.running_base = self.running_base.remapped(remap, self._strings)  # landmark windows (cumulative.py)
        rebuild(self.running_base, sorted((s for s in self.subs if s is not None), key=lambda s: s.slide))
        if self.last_rows is not None:  # (the sub-windows' copies above refer to it too)
            self.last_rows.remap(remap, self._strings)
        for buf in [self._buffer, *self._slots.values()]:
            buf.chunks = [{c: remap[a] if c in self._strings else a for c, a in chunk.items()} for chunk in buf.chunks]
        for keys in self.running_keys.values():
            keys.rebuild(self.latest, self.subs)
        self._changed()

    # -- window-level synopsis probes (one atomic read of the current state) ---------------------
    def running_total(self, key: str, n_q: int) -> int:
        """COUNT (key=COUNT_KEY) or an integer SUM over the n_q youngest, from two sub-windows."""
        if self.latest < 0:
            return 0
        lo = max(0, self.latest - n_q + 1)
        return self.sealed(self.latest).synopsis.prefix_after[key] - self.sealed(lo).synopsis.prefix_before[key]

    def key_totals(self, column: str, n_q: int, of: tuple[str, ...] | None = None) -> KeySummary | None:
        """COUNT(*), and COUNT(c) and integer SUM(c) of the numeric columns `of` (default: all),
        per key of group-by column `column` over the n_q youngest, from its running per-key
        totals (key_running.py); None when none are kept."""
        keys = self.running_keys.get(column)
        if keys is None or self.latest < 0:
            return None
        return keys.range(max(0, self.latest - n_q + 1), self.latest, keys.numeric if of is None else of)

    def interval_minmax(self, column: str, n_q: int) -> tuple:
        if self.latest < 0:
            return (None, None)
        return self.interval.probe(column, max(0, self.latest - n_q + 1), self.latest)

    # -- its state for snapshots and digests, and its invariants ---------------------------------
    def counters(self) -> dict:
        """The scalars a snapshot keeps besides the sub-windows and the open rows (restore() takes
        them back): latest, last_seal_ms, base_slot, max_event_ms, late_rows and the running totals."""
        out: dict[str, Any] = {"latest": self.latest, "last_seal_ms": self.last_seal_ms, "base_slot": self._base_slot,
                               "max_event_ms": self.max_event_ms, "late_rows": self.late_rows,
                               "prefix": dict(self._prefix)}
        if self.running_base.start_ms is not None:  # landmark windows, once a sub-window was evicted (cumulative.py)
            out["landmark"] = self.running_base.to_plain()
        if self.last_rows is not None and self.key_book is not None:  # partitioned windows (last_rows.py)
            out["last_rows"] = self.last_rows.state.to_plain()
            out["last_rows_keys"] = self.key_book.to_plain()
        return out

    def open_chunks(self) -> tuple[list[dict[str, np.ndarray]], dict[int, list[dict[str, np.ndarray]]]]:
        """The rows waiting for a slide, as the chunks appended (never changed: referenced, not
        copied): the open buffer's, and (event time) each open sub-window's by slot. Not a cut
        being sealed."""
        return list(self._buffer.chunks), {slot: list(b.chunks) for slot, b in self._slots.items()}

    def _check(self) -> None:
        """The window's invariants (the engine's _check and the property tests call it after every
        step)."""
        assert self.latest >= -1
        if self.version:
            latest, subs, base, last_rows = self._stamp
            assert latest == self.latest and all(a is b for a, b in zip(subs, self.subs, strict=True)) \
                and base is self.running_base and last_rows is self.last_rows, \
                "every change of the committed window bumps its version (_changed)"
        else:
            assert self.latest == -1 and not any(self.subs), "a window never changed holds nothing"
        for pos, sub in enumerate(self.subs):
            if sub is None:
                assert self.latest < self.n and pos > self.latest, "an empty position only before the window fills"
                continue
            assert sub.position == pos and sub.slide % self.n == pos
            assert self.latest - self.n < sub.slide <= self.latest, "every live sub-window is one of the n youngest"
            for col in sub.columns.values():
                assert len(col) == sub.rows and not col.flags.writeable
            sub.memo._check()
        live = self.youngest(self.n)
        for newer, older in zip(live, live[1:]):
            assert newer.synopsis.prefix_before == older.synopsis.prefix_after, "running synopsis is continuous"
        if live:
            assert live[0].synopsis.prefix_after == self._prefix
            assert self._prefix[COUNT_KEY] >= sum(s.rows for s in live)
        for buf in [self._buffer, *self._slots.values()]:
            assert buf.rows == sum(len(next(iter(chunk.values()))) for chunk in buf.chunks)
        if self._base_slot is not None and self.spec.clock == Clock.EVENT:
            assert all(slot > self._base_slot + self.latest for slot in self._slots), "open event-time slots are unsealed"
