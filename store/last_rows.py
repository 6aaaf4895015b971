"""The last rows of each key of a stream, kept beyond its time window (seed 003 Definition 11,
`[PARTITION BY a, ... ROWS n]`): LastRows, an immutable table of the last `n` rows (event time,
then arrival) of every key of the columns `by`, and KeyBook, the keys a stream has accepted, against
its limit.

A stream created with last_rows_by and last_rows keeps one History: each slide's sub-window is
merged into its state when the slide is installed (store/window.py), so a log replay rebuilds it
slide by slide; a snapshot keeps the newest state as plain data (to_plain). Every live sub-window
refers to the one History, which gives the state as of its slide (`at`): the newest state, less the
rows that came after, plus the rows the later slides displaced (kept while those slides are live),
so one state is held, not one per sub-window, and a query that took older sub-windows (a window
snapshot) still reads the state of their slide. Keys are never forgotten: the number of keys is bounded by last_rows_keys, and an
append that would bring a new key past it is refused (ResourceLimit: RESOURCE_EXHAUSTED) before
anything is applied. Storage values are the window's (string codes, decimals as integers).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import ResourceLimit, StoreError


def _keys(columns: dict[str, np.ndarray], by: tuple[str, ...]) -> np.ndarray:
    from .planner.decode import composite_keys
    return composite_keys([(columns[c], columns.get("?" + c)) for c in by])


class LastRows:
    """The last `n` rows of each key of `by`, sorted by key, then event time, then arrival; `slides`:
    the slide each row came in."""

    __slots__ = ("by", "n", "time_column", "columns", "rows", "slides")

    def __init__(self, by: tuple[str, ...], n: int, time_column: str, columns: dict[str, np.ndarray], rows: int,
                 slides: np.ndarray | None = None):
        self.by, self.n, self.time_column = by, n, time_column
        self.columns, self.rows = columns, rows
        self.slides = slides if slides is not None else np.zeros(rows, dtype=np.int64)
        for a in (*columns.values(), self.slides):
            a.flags.writeable = False

    def add(self, slide: int, columns: dict[str, np.ndarray], rows: int) -> tuple["LastRows", "LastRows"]:
        """(this state with slide `slide`'s rows (later arrivals than every row kept) merged in, the
        rows of this state it displaced)."""
        if not rows:
            return self, self.take(np.empty(0, dtype=np.int64))
        cols = _concat([(self.columns, self.rows), (columns, rows)])
        slides = np.concatenate([self.slides, np.full(rows, slide, dtype=np.int64)])
        sel = _last(cols, slides, self.by, self.time_column, self.n)
        kept = np.zeros(self.rows + rows, dtype=bool)
        kept[sel] = True
        gone = np.flatnonzero(~kept[: self.rows])
        return LastRows(self.by, self.n, self.time_column, _pick(cols, sel), len(sel), slides[sel]), self.take(gone)

    def take(self, index: np.ndarray) -> "LastRows":
        return LastRows(self.by, self.n, self.time_column, _pick(self.columns, index), len(index), self.slides[index])

    def last(self, n: int) -> tuple[dict[str, np.ndarray], int]:
        """The last n (<= self.n) rows of each key, as columns."""
        if n >= self.n or not self.rows:
            return self.columns, self.rows
        sel = _last(self.columns, self.slides, self.by, self.time_column, n)
        return _pick(self.columns, sel), len(sel)

    def codes(self, strings: set[str]) -> list[np.ndarray]:
        return [a for c, a in self.columns.items() if c in strings]

    def remapped(self, remap: np.ndarray, strings: set[str]) -> "LastRows":
        cols = {c: (remap[a] if len(a) else a) if c in strings else a for c, a in self.columns.items()}
        return LastRows(self.by, self.n, self.time_column, cols, self.rows, self.slides)

    def to_plain(self) -> dict:
        return {"rows": self.rows, "slides": self.slides.tolist(),
                "columns": {c: [str(a.dtype), a.tolist()] for c, a in self.columns.items()}}

    @classmethod
    def from_plain(cls, by: tuple[str, ...], n: int, time_column: str, plain: dict) -> "LastRows":
        cols = {c: np.asarray(values, dtype=np.dtype(dtype)) for c, (dtype, values) in plain["columns"].items()}
        return cls(by, n, time_column, cols, int(plain["rows"]), np.asarray(plain["slides"], dtype=np.int64))


class StateGone(StoreError):
    """The state as of a slide long gone was asked for (a query held an old sub-window that long)."""


class History:
    """The last rows per key as of every live slide (see the module docstring). `snap` is replaced,
    never changed, so a reader on another thread sees one consistent (slide, state, undo): `undo`,
    newest first, holds per slide the rows its installation displaced."""

    __slots__ = ("snap",)

    def __init__(self, state: LastRows, slide: int = -1):
        self.snap: tuple[int, LastRows, tuple] = (slide, state, ())

    @property
    def state(self) -> LastRows:
        return self.snap[1]

    def install(self, slide: int, columns: dict[str, np.ndarray], rows: int, live: int) -> None:
        """Merge slide `slide`'s rows in; keep the displaced rows of the `live` newest slides."""
        _, state, undo = self.snap
        new, gone = state.add(slide, columns, rows)
        # S(j) of the oldest live slide j needs the displaced rows of the live - 1 slides after it
        self.snap = (slide, new, ((slide, gone), *undo)[: live - 1])

    def at(self, slide: int) -> LastRows:
        """The state as of `slide` (a live slide, or one whose successors are still live)."""
        latest, state, undo = self.snap
        if slide >= latest:
            return state
        later = [gone for s, gone in undo if s > slide]
        if len(later) < latest - slide:
            raise StateGone(f"the rows kept per key as of slide {slide} are gone ({latest - slide} slides ago): "
                            "ask again")
        # oldest displaced first: among rows of one key, time and slide, that is their arrival order
        parts = [p.take(np.flatnonzero(p.slides <= slide)) for p in (*reversed(later), state)]
        cols = _concat([(p.columns, p.rows) for p in parts])
        slides = np.concatenate([p.slides for p in parts])
        sel = _last(cols, slides, state.by, state.time_column, state.n)  # (all of them, in the state's order)
        return LastRows(state.by, state.n, state.time_column, _pick(cols, sel), len(sel), slides[sel])

    def codes(self, strings: set[str]) -> list[np.ndarray]:
        _, state, undo = self.snap
        return [a for p in (state, *(g for _, g in undo)) for a in p.codes(strings)]

    def remap(self, remap: np.ndarray, strings: set[str]) -> None:
        latest, state, undo = self.snap
        self.snap = (latest, state.remapped(remap, strings), tuple((s, g.remapped(remap, strings)) for s, g in undo))


def _concat(parts: list[tuple[dict[str, np.ndarray], int]]) -> dict[str, np.ndarray]:
    names = [c for c in parts[0][0] if not c.startswith("?")]
    out = {c: np.concatenate([p[c] for p, _ in parts]) for c in names}
    for c in names:
        if any("?" + c in p for p, _ in parts):
            out["?" + c] = np.concatenate([p.get("?" + c, np.ones(n, dtype=bool)) for p, n in parts])
    return out


def _last(cols: dict[str, np.ndarray], slides: np.ndarray, by: tuple[str, ...], time_column: str,
          n: int) -> np.ndarray:
    """The positions of the last n rows of each key, sorted by key, event time, then arrival (the
    slide, then the position)."""
    rows = len(slides)
    if not rows:
        return np.empty(0, dtype=np.int64)
    _, key = np.unique(_keys(cols, by), return_inverse=True)
    order = np.lexsort((slides, cols[time_column], key))  # stable: then by position
    k = key[order]
    past = np.searchsorted(k, k, side="right")  # one past each row's key's last row
    return order[past - np.arange(rows) <= n]


def _pick(cols: dict[str, np.ndarray], index: np.ndarray) -> dict[str, np.ndarray]:
    out = {c: a[index] for c, a in cols.items()}
    for c in [c for c in out if c.startswith("?")]:
        if out[c].all():
            del out[c]
    return out


class KeyBook:
    """The keys (as Python values) of every row a stream with last rows accepted, and their limit."""

    __slots__ = ("by", "limit", "keys")

    def __init__(self, by: tuple[str, ...], limit: int, keys: set | None = None):
        self.by, self.limit = by, limit
        self.keys: set = keys or set()

    @staticmethod
    def batch_keys(checked: dict[str, Any], by: tuple[str, ...], rows: int) -> set:
        """The keys of a checked batch (Schema.check: strings as pyarrow arrays, others NumPy with
        validity masks under "?c"), None for NULL."""
        columns = []
        for c in by:
            values = checked[c]
            values = values.to_pylist() if hasattr(values, "to_pylist") else values.tolist()
            valid = checked.get("?" + c)
            if valid is not None:
                values = [v if ok else None for v, ok in zip(values, valid.tolist())]
            columns.append(values)
        return set(zip(*columns)) if columns else set()

    def check(self, keys: set) -> set:
        """The new keys among `keys`; raises ResourceLimit naming the limit when they would pass it."""
        new = keys - self.keys
        if len(self.keys) + len(new) > self.limit:
            raise ResourceLimit(f"this stream keeps the last rows of at most {self.limit} keys (last_rows_keys) "
                                f"of {', '.join(self.by)}; it holds {len(self.keys)} and the batch brings {len(new)} "
                                f"new ones", limit=self.limit, needed=len(self.keys) + len(new))
        return new

    def to_plain(self) -> list:
        return sorted((list(k) for k in self.keys), key=repr)
