"""Hopping and tumbling windows with their bounds as columns (issue 31, first slice).

`window_start` and `window_end`, in SELECT and GROUP BY over `[RANGE r SLIDE s]`, make a query
answer per window, as Flink's HOP and TUMBLE table functions do: windows of r every s, each the r/t
consecutive sub-windows (t the sub-window length) that start at a sub-window whose index is a
multiple of s/t. The index is the sub-window's time slot (start // t: windows start at multiples
of s since the epoch) on processing- and event-time streams, and its slide number on manual and
count-based ones, whose sub-windows' bounds are not slots. Only windows that lie entirely within
the stream's retained window are answered; a window in which no row passes WHERE has no group.

A one-time query answers every such window, in start order; a periodic one (registered) the
newest one among the r/t + s/t - 1 youngest sub-windows it reads, and it is due when a slide
completes a window (slicing.slides_until_due, the rule of windows that cut sub-windows too), not
every s/t slides counted from its registration: those would answer each window up to s/t - 1
slides after it completed unless registered in phase, and a late execution would shift the phase.

Each sub-window is read once (its partial: synopses or rows, as for any query); a window merges
the partials of the sub-windows it covers with the aggregate functions' own merges (functions.py),
so overlapping windows share their sub-windows' partials. This module binds such a query (as the
same query without the bound columns, ORDER BY and LIMIT, answered per window) and finishes it;
reading and merging are the planner's.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable

from .aggregates import Partial
from .cumulative import Cumulative
from .kinds import Clock
from .query import Aggregate, KeyColumn, Query
from .slicing import Shape, SlicedHop

if TYPE_CHECKING:
    from .binder import BoundQuery
    from .subwindow import SubWindow
    from .window import Window, WindowSpec

WINDOW_START, WINDOW_END = "window_start", "window_end"
BOUNDS = (WINDOW_START, WINDOW_END)
_ROWS = "__window_rows__"  # a hidden COUNT(*) of a window without other keys: no row, no group


def mentions_bounds(q: Query, columns) -> bool:
    """Does the query name window_start or window_end (not columns of the stream) in SELECT or
    GROUP BY?"""
    names = [it.column for it in q.items if isinstance(it, KeyColumn)] + list(q.group_columns)
    return any(n in BOUNDS and n not in columns for n in names)


@dataclass(frozen=True)
class Hop:
    """How a bound query answers per window: `length` and `every` in sub-windows, the query per
    window (`inner`: bound, without bounds, ORDER BY and LIMIT), and per output item where its value
    comes from ('start', 'end' or the inner answer's column)."""

    length: int
    every: int
    newest_only: bool
    slots: bool               # index sub-windows by time slot (else by slide number)
    inner: "BoundQuery"
    picks: tuple[Any, ...]
    hidden_rows: bool         # the inner answer's last column is the hidden row count
    limit: int | None

    def reader(self, inner_read: Callable[["SubWindow"], Any], slot_ms: int | None) -> Callable[["SubWindow"], Any]:
        """A sub-window's partial, with its index and bounds."""
        if self.slots and slot_ms is not None:
            t = slot_ms
            return lambda sub: (sub.start_ms // t, sub.start_ms, sub.end_ms, inner_read(sub))
        return lambda sub: (sub.slide, sub.start_ms, sub.end_ms, inner_read(sub))

    def alone_reason(self) -> str:
        """Why a periodic query of this window runs alone under --sharing (txn/sharing/rules.py)."""
        return ("runs alone: windows with their bounds as columns (window_start, window_end) are not shared yet; "
                "due when a slide completes one of its windows")

    def due_line(self, window: "Window") -> tuple[Shape, int, int]:
        """The line slicing.slides_until_due counts on, where windows start at multiples of SLIDE:
        ms on time slots (each slide one slot of t), else slide numbers (each slide one); and the
        end of the newest sealed sub-window on it."""
        t = window.spec.subwindow_ms
        if self.slots and t is not None:
            return Shape(self.length * t, self.every * t), t, window.sealed(window.latest).end_ms
        return Shape(self.length, self.every), 1, window.latest + 1

    def windows(self, indexes: list[int]) -> list[int]:
        """The first indexes of the windows lying entirely within `indexes` (consecutive)."""
        if not indexes:
            return []
        first, last = indexes[0], indexes[-1]
        start = -(-first // self.every) * self.every
        out = list(range(start, last - self.length + 2, self.every))
        return out[-1:] if self.newest_only else out

    def bounds(self, partial: Partial) -> tuple[int, int] | None:
        """[start, end) of the one window a periodic answer is over (what it reports instead of
        the sub-windows it read), or None: a one-time answer, or no window lies within the read."""
        if not self.newest_only:
            return None
        by_index = {c[0]: c for c in partial.contributions.values()}
        got = self.windows(sorted(by_index))
        return (by_index[got[0]][1], by_index[got[0] + self.length - 1][2]) if got else None

    def finish(self, inner_finish: Callable[[Partial], Any], partial: Partial) -> list[tuple]:
        """The answer rows: per window (start order), its inner answer's rows with the bounds."""
        by_index = {c[0]: (v, c) for v, c in partial.contributions.items()}
        rows: list[tuple] = []
        for p in self.windows(sorted(by_index)):
            part = Partial()
            for i in range(p, p + self.length):
                v, c = by_index[i]
                part.add(v, c[3])
            start, end = by_index[p][1][1], by_index[p + self.length - 1][1][2]
            for r in inner_finish(part).rows:
                if self.hidden_rows and r[-1] == 0:
                    continue
                rows.append(tuple(start if k == "start" else end if k == "end" else r[k] for k in self.picks))
        return rows if self.limit is None else rows[: self.limit]


def due_by_windows(task) -> "Hop | SlicedHop | Cumulative | None":
    """The window sequence a periodic task is due by (slicing.slides_until_due: when a slide
    completes one of its windows), if its plan answers per window so: HOP/TUMBLE, windows that cut
    sub-windows, CUMULATE and landmarks whose windows end at multiples of SLIDE
    (Cumulative.aligned); txn/schedule/edf.py asks."""
    hop = getattr(getattr(task.plan, "bound", None), "hop", None)
    if isinstance(hop, Cumulative):
        return hop if hop.aligned else None
    return hop if isinstance(hop, (Hop, SlicedHop)) else None


def bind_hop(binder, q: Query, periodic: bool) -> "BoundQuery":
    """Bind a query naming window_start / window_end (binder._Binder `binder`)."""
    spec: WindowSpec = binder.spec
    fail = binder.fail
    grouped = [c for c in q.group_columns if c in BOUNDS]
    if not grouped:
        named = next(c for c in q.items if isinstance(c, KeyColumn) and c.column in BOUNDS)
        fail(f"{named.column} needs GROUP BY {named.column} (a query answered per window groups by its bounds)",
             named.loc, named.column)
    where = q.group_by_loc
    if q.slide is None:
        fail(f"GROUP BY {grouped[0]} needs a window with SLIDE: [RANGE r SLIDE s] (tumbling: s = r)", where)
    for what, bad, loc in (("ORDER BY", q.order_by, q.order_by[0].loc if q.order_by else None),
                           ("a sub-query", q.outer, q.outer[0].loc if q.outer else None),
                           ("APPROXIMATE", q.approximate, q.loc), ("SELECT DISTINCT", q.distinct, q.loc),
                           ("AS OF SLIDE", q.as_of_slide is not None, q.as_of_loc)):
        if bad:
            fail(f"{what} is not supported with {grouped[0]} (rows come by window, then by key)", loc)
    length = binder.length(q.range, "RANGE") if q.range is not None else spec.subwindows
    every = binder.length(q.slide, "SLIDE")
    inner, picks, hidden = bind_per_window(binder, q, spec)
    if inner.projection:  # (cannot happen: grouped by the bounds)
        fail("a query answered per window needs GROUP BY", q.loc)
    out_items = window_items(q, inner, picks)
    n_q = min(spec.subwindows, length + every - 1) if periodic else spec.subwindows
    slots = spec.subwindow_ms is not None and spec.clock in (Clock.PROCESSING, Clock.EVENT)
    hop = Hop(length, every, periodic, slots, inner, tuple(picks), hidden, q.limit)
    return replace(inner, query=q, n_q=n_q, every=every, items=out_items, order=[], limit=q.limit, hop=hop)


def bind_per_window(binder, q: Query, spec) -> tuple["BoundQuery", list[Any], bool]:
    """The query each window's rows answer (the bounds taken out of SELECT and GROUP BY; a row
    count added when nothing else tells a window's groups apart), bound: (inner, picks, hidden).
    picks: per SELECT item, "start"/"end" for a bound or the inner item's index; hidden: the row
    count is not an output. Hop windows and sliced ones (slicing.py) alike."""
    from .binder import _Binder

    keys = [c for c in q.group_columns if c not in BOUNDS]
    more_locs = q.group_by_more_locs or (None,) * len(q.group_by_more)
    key_locs = [loc for c, loc in zip(q.group_columns, (q.group_by_loc, *more_locs)) if c not in BOUNDS]
    items: list[KeyColumn | Aggregate] = []
    picks: list[Any] = []
    for it in q.items:
        if isinstance(it, KeyColumn) and it.column in BOUNDS:
            picks.append("start" if it.column == WINDOW_START else "end")
        else:
            picks.append(len(items))
            items.append(it)
    hidden = not keys or not any(isinstance(it, Aggregate) for it in items)
    if hidden:  # a window's row count: no row, no group (and an aggregate for the binder)
        items.append(Aggregate("count", alias=_ROWS))
    inner_q = replace(q, items=tuple(items), group_by=keys[0] if keys else None,
                      group_by_loc=key_locs[0] if keys else None, group_by_more=tuple(keys[1:]),
                      group_by_more_locs=tuple(key_locs[1:]) if keys else None,
                      order_by=(), limit=None, range=None, slide=None)
    return _Binder(inner_q, binder.schema, spec).bind(), picks, hidden


def window_items(q: Query, inner: "BoundQuery", picks: list[Any]) -> list:
    """The output columns of a per-window query: the bounds as int64, the rest the inner query's."""
    from .binder import OutputItem

    return [OutputItem(it.label, "int64", None, -1) if isinstance(k, str) else inner.items[k]
            for it, k in zip(q.items, picks)]
