"""Session, count-based and partitioned windows (issue 31): `[SESSION GAP g]`, `[ROWS n]` and
`[PARTITION BY a, ... ROWS n]`, each with an optional `SLIDE s` that makes the query periodic.

These windows are not runs of whole sub-windows, so they are cut from the rows a query reads, as
seed 003's window sequence operator (Definition 10) defines them:

- SESSION GAP g (event-time streams): per key (the GROUP BY columns), rows ordered by event time;
  a row at least g after the previous row of its key starts a new session. A session is the
  window [first, last + g): its rows' event times and the gap that closed it. Sessions are cut
  from every row the stream retains, so a late row (within the allowed lateness, sealed into its
  sub-window) extends a session, bridges two into one, or makes a new one in a gap. Only sessions
  lying entirely within the retained window are answered: closed (last + g <= the window's end,
  so no row still to come can join it) and not cut off at the start (first - g + 1 >= the
  window's start, so no evicted row could have belonged to it; while slide 0 is in the window
  nothing was evicted, and an event-time stream keeps no row before it). One row per session and key, in
  (window_start, key) order, with window_start and window_end as columns. A periodic query answers
  the same at each execution: every session the window holds whole, so an execution that comes
  late (the scheduler catching up) misses none, and a session's row is the same in every answer
  from its closing until it leaves the window (sealed sub-windows never change).
- ROWS n: the last n rows of the retained window in the positional order of seed 003 (event time,
  then arrival), all of them while fewer are retained; any query over them.
- PARTITION BY a, ... ROWS n: the last n rows of each key (Definition 11), from the per-key state
  the stream keeps beyond its time window (store/last_rows.py): the stream must be created with
  last_rows_by = (a, ...) and last_rows >= n.

WHERE selects among a window's rows: windows are formed first, then WHERE filters inside them (a
session or a last-n set is the same whatever WHERE says; seed 003 Example 6 is why this matters for
positional windows).

The query over a window's rows is an ordinary bound query (`inner`); this module builds one sealed
sub-window of the rows (plus a session number column for sessions) and lets the planner read and
finish it, so every aggregate, HAVING, ORDER BY and LIMIT behave as for any query. `Shaped` plays
the part hop.Hop plays for the planner (reader, finish, inner).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from .aggregates import Partial
from .errors import Loc
from .exact import INT64_MAX
from .hop import BOUNDS, WINDOW_START
from .kinds import Clock
from .query import Aggregate, KeyColumn, Query, Range
from .subwindow import SubWindow

if TYPE_CHECKING:
    from .binder import BoundQuery
    from .window_spec import WindowSpec

SESSION, ROWS, PARTITION = "session", "rows", "partition"
_SESSION_COLUMN = "__session__"
_ROWS_COUNT = "__window_rows__"  # a hidden COUNT(*) when a session query selects no aggregate


@dataclass(frozen=True)
class WindowShape:
    """The window clause of a session, count-based or partitioned window: `kind`, the session gap
    in ms, the row count, the partition columns."""

    kind: str
    gap_ms: int = 0
    rows: int = 0
    partition_by: tuple[str, ...] = ()
    loc: Loc | None = None

    def __eq__(self, other: object) -> bool:  # locations are not part of the query
        return (isinstance(other, WindowShape) and (self.kind, self.gap_ms, self.rows, self.partition_by)
                == (other.kind, other.gap_ms, other.rows, other.partition_by))

    def __hash__(self) -> int:
        return hash((self.kind, self.gap_ms, self.rows, self.partition_by))


# -- syntax --------------------------------------------------------------------------------------------
SHAPE_WORDS = ("session", "rows", "partition")


def parse_shape(p) -> tuple[WindowShape, Range | None]:
    """After `[`, at SESSION, ROWS or PARTITION (parser.Parser `p`): the shape, its SLIDE, and `]`."""
    tok = p.tok
    if p.accept("session"):
        p.expect("gap")
        gtok = p.tok
        value = p.integer("a session gap", limit=INT64_MAX)
        unit = p.tok.word
        from .lexer import _UNITS
        if unit not in _UNITS or _UNITS[unit][0] != "ms":
            p.fail("expected a time unit for the session gap (ms, s, min or h)")
        p.i += 1
        ms = value * _UNITS[unit][1]
        if value == 0:
            p.fail("a session gap must be positive", gtok)
        if ms > INT64_MAX:
            p.fail(f"SESSION GAP is {ms} ms, beyond int64 ({INT64_MAX} ms)", gtok)
        shape = WindowShape(SESSION, gap_ms=ms, loc=tok.loc)
    else:
        by: list[str] = []
        if p.accept("partition"):
            p.expect("by")
            by.append(p.column("a partition column"))
            while p.accept(","):
                by.append(p.column("a partition column"))
        p.expect("rows")
        ntok = p.tok
        n = p.integer("a row count", limit=INT64_MAX)
        if n == 0:
            p.fail("a row count must be positive", ntok)
        shape = WindowShape(PARTITION if by else ROWS, rows=n, partition_by=tuple(by), loc=tok.loc)
    slide = p.amount() if p.accept("slide") else None
    p.expect("]")
    return shape, slide


def shape_text(shape: WindowShape, quote_name: Callable[[str], str]) -> str:
    """The window clause's text (query_text.to_text)."""
    if hasattr(shape, "text"):  # RANGE UNBOUNDED, CUMULATE (cumulative.py)
        return shape.text()
    if shape.kind == SESSION:
        return f"SESSION GAP {shape.gap_ms} ms"
    by = f"PARTITION BY {', '.join(quote_name(c) for c in shape.partition_by)} " if shape.partition_by else ""
    return f"{by}ROWS {shape.rows}"


# -- binding -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Shaped:
    """How a bound query over a session, count-based or partitioned window is answered: the query
    over the window's rows (`inner`), and per output item where its value comes from ('start', 'end'
    or the inner answer's column)."""

    shape: WindowShape
    inner: "BoundQuery"
    picks: tuple[Any, ...]
    hidden_rows: bool       # the inner answer has a hidden COUNT(*) column before the session column
    limit: int | None
    time_column: str

    def reader(self, inner_read: Callable[[SubWindow], Any], slot_ms: int | None) -> Callable[[SubWindow], Any]:
        """A sub-window's share: the sub-window itself (its rows are cut into windows at finish) and
        the inner plan's read, which finish applies to the window's rows."""
        if self.shape.kind == PARTITION:  # the rows kept per key as of the sub-window's slide (last_rows.py)
            return lambda sub: (sub, inner_read, sub.last_rows.at(sub.slide) if sub.last_rows is not None else None)
        return lambda sub: (sub, inner_read, None)

    def alone_reason(self) -> str:
        """Why a periodic query of this window runs alone under --sharing (txn/sharing/rules.py)."""
        return f"runs alone: {self.shape.kind} windows are cut from the rows at each execution"

    def describe(self, reads: int) -> dict:
        """What `windowstore explain` says of such a query (planner.Plan.explain)."""
        if self.shape.kind == SESSION:
            how = (f"a scan of the rows of the {reads} sub-windows, one per read, cut at finish into sessions "
                   f"per key (gap {self.shape.gap_ms} ms)")
            keys = self.inner.group_keys[:-1]
        elif self.shape.kind == ROWS:
            how = f"a scan of the rows of the {reads} sub-windows, one per read; the last {self.shape.rows} rows"
            keys = self.inner.group_keys
        else:
            how = (f"one read of the youngest sub-window: the last {self.shape.rows} rows of each key of "
                   f"{', '.join(self.shape.partition_by)} kept as of its slide (last_rows)")
            keys = self.inner.group_keys
        return {"how": how, "group_by": list(keys)}

    def finish(self, inner_finish: Callable[[Partial], Any], partial: Partial) -> list[tuple]:
        contributions = partial.ordered()  # slide order: the arrival order of the rows
        if not contributions:
            return []
        subs = [c[0] for c in contributions]
        inner_read = contributions[0][1]
        if self.shape.kind == SESSION:
            return self._sessions(subs, inner_read, inner_finish)
        if self.shape.kind == PARTITION:  # the per-key state the youngest sub-window carries
            state = contributions[-1][2]
            if state is None:  # (a stream that keeps no rows per key is refused at binding)
                return []
            cols, n = state.last(self.shape.rows)
            return self._answer(inner_read, inner_finish, cols, n, subs[-1])
        cols, n = _columns(subs)
        ts = cols[self.time_column]
        if n > self.shape.rows:  # the last n in (event time, arrival): a stable sort keeps arrival order
            keep = np.sort(np.argsort(ts, kind="stable")[n - self.shape.rows:])
            cols = {c: a[keep] for c, a in cols.items()}
            n = self.shape.rows
        return self._answer(inner_read, inner_finish, cols, n, subs[-1])

    def _answer(self, inner_read, inner_finish, cols: dict, n: int, newest: SubWindow) -> list[tuple]:
        part = Partial()
        part.add(0, inner_read(_sub(cols, n, newest, self.time_column)))
        return [tuple(r) for r in inner_finish(part).rows]

    def _sessions(self, subs: list[SubWindow], inner_read, inner_finish) -> list[tuple]:
        gap = self.shape.gap_ms
        window_start, window_end = subs[0].start_ms, subs[-1].end_ms
        cols, n = _columns(subs)
        if not n:
            return []
        ts = cols[self.time_column]
        keys = self.inner.group_keys[:-1]
        if keys:
            from .planner.decode import composite_keys
            key = composite_keys([(cols[c], cols.get("?" + c)) for c in keys])
            _, key_id = np.unique(key, return_inverse=True)
        else:
            key_id = np.zeros(n, dtype=np.int64)
        order = np.lexsort((ts, key_id))  # by key, then event time (stable: then arrival)
        t, k = ts[order], key_id[order]
        new = np.ones(n, dtype=bool)
        if n > 1:  # the distance to the previous row of the key, exactly: uint64 holds any int64 difference
            step = t[1:].view(np.uint64) - t[:-1].view(np.uint64)
            new[1:] = (k[1:] != k[:-1]) | (step >= np.uint64(gap))
        number = np.cumsum(new) - 1  # session number of each row, in (key, time) order
        firsts = np.flatnonzero(new)
        lasts = np.append(firsts[1:] - 1, n - 1)
        starts = [int(v) for v in t[firsts]]
        ends = [int(v) + gap for v in t[lasts]]  # Python ints: last + gap may pass int64
        whole = subs[0].slide == 0  # nothing evicted yet: no row before the window was ever kept
        answered = [(whole or s - gap + 1 >= window_start) and e <= window_end for s, e in zip(starts, ends)]
        if not any(answered):
            return []
        session = np.empty(n, dtype=np.int64)
        session[order] = number
        keep = np.asarray(answered)[session]
        cols = {c: a[keep] for c, a in cols.items()}
        cols[_SESSION_COLUMN] = session[keep]
        rows = self._answer(inner_read, inner_finish, cols, int(keep.sum()), subs[-1])
        out = []
        for r in rows:
            s = r[-1]
            out.append((starts[s], s, tuple(starts[s] if p == "start" else ends[s] if p == "end" else r[p]
                                            for p in self.picks)))
        out.sort(key=lambda x: (x[0], x[1]))
        rows = [r for _, _, r in out]
        return rows if self.limit is None else rows[: self.limit]


def _columns(subs: list[SubWindow]) -> tuple[dict[str, np.ndarray], int]:
    """The rows of `subs`, in order, as one set of columns (validity masks where any has one)."""
    names = [c for c in subs[0].columns if not c.startswith("?")]
    out = {c: np.concatenate([s.columns[c] for s in subs]) for c in names}
    for c in names:
        if any("?" + c in s.columns for s in subs):
            out["?" + c] = np.concatenate([s.columns.get("?" + c, np.ones(s.rows, dtype=bool)) for s in subs])
    return out, sum(s.rows for s in subs)


def _sub(cols: dict[str, np.ndarray], n: int, newest: SubWindow, time_column: str) -> SubWindow:
    """A sealed sub-window of a window's rows, for the inner plan's read (no synopsis: it scans)."""
    ts = cols[time_column]
    return SubWindow(newest.slide, newest.position, newest.start_ms, newest.end_ms,
                     int(ts.min()) if n else None, int(ts.max()) if n else None, n, cols,
                     None, newest.sealed_at_ms)  # type: ignore[arg-type]  # a scan reads no synopsis


def bind_shape(binder, q: Query, periodic: bool) -> "BoundQuery":
    """Bind a query over a session, count-based or partitioned window (binder._Binder `binder`)."""
    from .binder import OutputItem, _Binder
    from .schema import Schema

    spec: WindowSpec = binder.spec
    shape: WindowShape = q.shape
    fail = binder.fail
    word = {SESSION: "SESSION", ROWS: "ROWS", PARTITION: "PARTITION BY"}[shape.kind]
    for what, bad, loc in (("RANGE", q.range is not None, q.range.loc if q.range else None),
                           ("a sub-query", q.outer, q.outer[0].loc if q.outer else None),
                           ("APPROXIMATE", q.approximate, q.loc),
                           ("AS OF SLIDE", q.as_of_slide is not None, q.as_of_loc)):
        if bad:
            fail(f"{what} is not supported with a {word} window", loc)
    every = binder.length(q.slide, "SLIDE") if q.slide is not None else None
    names = [it.column for it in q.items if isinstance(it, KeyColumn)] + list(q.group_columns)
    bounds = [c for c in names if c in BOUNDS and c not in binder.types]
    if shape.kind != SESSION:
        if bounds:
            fail(f"{bounds[0]} is a column of SESSION windows only (the answer reports the bounds of the rows "
                 f"read)", q.loc)
        if shape.kind == PARTITION:
            _check_partition(binder, shape)
        inner = _Binder(replace(q, shape=None, slide=None), binder.schema, spec).bind()
        # one read of the youngest sub-window (the per-key state it carries) or of the whole window
        n_q = 1 if shape.kind == PARTITION else spec.subwindows
        shaped = Shaped(shape, inner, tuple(range(len(inner.items))), False, None, binder.schema.time_column)
        return replace(inner, query=q, n_q=n_q, every=every, hop=shaped,  # type: ignore[arg-type]  # duck-types hop.Hop
                       projection=inner.projection or [binder.schema.time_column])
    if spec.clock != Clock.EVENT or spec.subwindow_ms is None:  # (event time: subwindow_ms is set)
        fail("SESSION windows need an event-time stream (clock 'event'): sessions are cut on event times, and "
             "only an event-time window bounds the event times it retains", shape.loc)
    window_ms = spec.subwindows * spec.slot_ms
    if 2 * shape.gap_ms - 1 > window_ms:
        fail(f"SESSION GAP {shape.gap_ms} ms can never be answered: a session and the gap on either side "
             f"(2 * gap - 1 ms) must fit in the stream's window of {window_ms} ms", shape.loc)
    if q.order_by:
        fail("ORDER BY is not supported with a SESSION window (rows come by window_start, then by key)",
             q.order_by[0].loc)
    if q.distinct:
        fail("SELECT DISTINCT is not supported with a SESSION window", q.loc)
    if _SESSION_COLUMN in binder.types:
        fail(f"a stream with a column named {_SESSION_COLUMN} cannot take SESSION windows", q.loc)
    keys = [c for c in q.group_columns if c not in BOUNDS]
    locs = [q.group_by_loc, *(q.group_by_more_locs or (None,) * len(q.group_by_more))]
    key_locs = [loc for c, loc in zip(q.group_columns, locs) if c not in BOUNDS]
    items: list[KeyColumn | Aggregate] = []
    picks: list[Any] = []
    for it in q.items:
        if isinstance(it, KeyColumn) and it.column in BOUNDS and it.column not in binder.types:
            picks.append("start" if it.column == WINDOW_START else "end")
        else:
            picks.append(len(items))
            items.append(it)
    hidden = not any(isinstance(it, Aggregate) for it in items)
    if hidden:
        items.append(Aggregate("count", alias=_ROWS_COUNT))
    items.append(KeyColumn(_SESSION_COLUMN))
    group = [*keys, _SESSION_COLUMN]
    inner_q = replace(q, items=tuple(items), group_by=group[0], group_by_loc=(key_locs or [None])[0],
                      group_by_more=tuple(group[1:]), group_by_more_locs=None,
                      order_by=(), limit=None, range=None, slide=None, shape=None)
    extended = Schema.of({**binder.types, _SESSION_COLUMN: "int64"}, binder.schema.time_column)
    inner = _Binder(inner_q, extended, spec).bind()
    out_items = [OutputItem(it.label, "int64", None, -1) if isinstance(k, str) else inner.items[k]
                 for it, k in zip(q.items, picks)]
    shaped = Shaped(shape, inner, tuple(picks), hidden, q.limit, binder.schema.time_column)
    return replace(inner, query=q, n_q=spec.subwindows, every=every, items=out_items, order=[], limit=q.limit,
                   hop=shaped, projection=[binder.schema.time_column])  # type: ignore[arg-type]  # duck-types hop.Hop


def _check_partition(binder, shape: WindowShape) -> None:
    spec = binder.spec
    for c in shape.partition_by:
        binder.column_type(c, shape.loc)
    if len(set(shape.partition_by)) != len(shape.partition_by):
        binder.fail("PARTITION BY names a column twice", shape.loc)
    if not spec.last_rows:
        binder.fail("PARTITION BY ... ROWS needs a stream created to keep its last rows per key (last_rows and "
                    "last_rows_by)", shape.loc)
    if set(shape.partition_by) != set(spec.last_rows_by):
        binder.fail(f"PARTITION BY {', '.join(shape.partition_by)}: this stream keeps its last rows per "
                    f"{', '.join(spec.last_rows_by)} (last_rows_by)", shape.loc)
    if shape.rows > spec.last_rows:
        binder.fail(f"PARTITION BY ... ROWS {shape.rows}: this stream keeps the last {spec.last_rows} rows of "
                    f"each key (last_rows)", shape.loc)

