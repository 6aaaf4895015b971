"""Per sub-window preparation and probe indexes: what one source's sub-window looks like to a join
(Prepared: the rows its pushed-down filters keep, its join keys, its probe indexes), the sorted
index a hash-join step probes (Index), an intermediate result (Inter), all of a source's sub-windows
as one probe target (Combined) and a block of kept result rows (Chunk). Data structures only: which
rows are selected and how steps are chained is plan.JoinPlan's; nothing here aggregates.

Each join step is a hash join per pair (intermediate result, sub-window of the next source): the
sub-window's rows are indexed once on the step's equality keys and band column (sorted composite
keys, cached with the sub-window), the intermediate rows probe it with searchsorted and the matching
ranges are expanded with repeat/arange: no Python loop per row.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..schema import VALID
from ..subwindow import SubWindow

DTYPES = {"string": np.int32, "float64": np.float64, "boolean": np.int8}  # storage dtype; the others: int64


class Index:
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
        self.tu: np.ndarray | None  # the band's distinct values (None: no band)
        if band is not None:
            self.tu, rank = np.unique(band, return_inverse=True)
            comp = acc * (len(self.tu) + 1) + rank.reshape(-1)
        else:
            self.tu, comp = None, acc
        self.order = np.argsort(comp, kind="stable")
        self.comp = comp[self.order]
        self._bounds: np.ndarray | None = None

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
                comb = np.where(valid & hit, acc * len(u) + d, 0)  # type: ignore[operator]  # set at i == 0
                pos = np.searchsorted(uf, comb)
                ok = valid & hit & (pos < len(uf))  # type: ignore[operator]  # set at i == 0
                ok[ok] = uf[pos[ok]] == comb[ok]
                acc, valid = pos.astype(np.int64), ok
        if acc is None:
            return np.zeros(0, dtype=np.int64)
        return np.where(valid, acc, -1)  # type: ignore[arg-type]  # set with acc


class Prepared:
    """A sub-window as one source of a join sees it: the rows its pushed-down filters keep, their
    join keys per equality class (strings as the plan's shared ids), band columns, and probe indexes
    built on demand. Built once per sub-window object (they are immutable once sealed)."""

    __slots__ = ("sub", "sel", "n", "keys", "indexes", "distinct", "ranges")

    def __init__(self, sub: SubWindow, sel: np.ndarray, keys: dict[int, np.ndarray]):
        self.sub, self.sel, self.n, self.keys = sub, sel, len(sel), keys
        self.indexes: dict[tuple, Index] = {}
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
            return values  # type: ignore[return-value]  # a column of the sub-window
        return values[rows]  # type: ignore[index]  # a column of the sub-window

    def index(self, classes: tuple[int, ...], band: str | None) -> Index:
        sig = (classes, band)
        ix = self.indexes.get(sig)
        if ix is None:
            ix = Index([self.keys[c] for c in classes], self.column(band) if band else None, self.n)
            self.indexes[sig] = ix
        return ix

    def uniq(self, c: int) -> np.ndarray:
        u = self.distinct.get(c)
        if u is None:
            u = self.distinct[c] = np.unique(self.keys[c])
        return u


class Inter:
    """An intermediate join result: per joined source the (version, row) of each result row, the
    join key per equality class, and the columns later steps and filters need."""

    __slots__ = ("ver", "row", "keys", "attrs", "n")

    def __init__(self, n: int):
        self.n = n
        self.ver: dict[int, np.ndarray] = {}
        self.row: dict[int, np.ndarray] = {}
        self.keys: dict[int, np.ndarray] = {}
        self.attrs: dict[tuple[int, str], np.ndarray] = {}

    def take(self, idx: np.ndarray) -> "Inter":
        out = Inter(len(idx))
        for d_in, d_out in ((self.ver, out.ver), (self.row, out.row), (self.keys, out.keys), (self.attrs, out.attrs)):
            for k, a in d_in.items():
                d_out[k] = a[idx]  # type: ignore[index]  # each pair's keys are of one type
        return out

    def filter(self, mask: np.ndarray) -> "Inter":
        return self if mask.all() else self.take(np.flatnonzero(mask))


class Combined:
    """All incorporated sub-windows of one source as one probe target: their selected rows concatenated
    (version and row of each), join keys and needed columns, and one index on the step's classes."""

    __slots__ = ("subs", "ver", "row", "keys", "attrs", "index")

    def __init__(self, xs: list[Prepared], classes: tuple[int, ...], class_cols: dict, attr_cols: set[str]):
        self.subs = [x.sub for x in xs]
        self.ver = np.concatenate([np.full(x.n, x.sub.slide, dtype=np.int64) for x in xs])
        self.row = np.concatenate([x.sel for x in xs])
        self.keys = {c: np.concatenate([x.keys[c] for x in xs]) for c in class_cols}
        self.attrs = {col: np.concatenate([x.column(col) for x in xs]) for col in attr_cols}
        self.index = Index([self.keys[c] for c in classes], None, len(self.ver))


@dataclass
class Chunk:
    """Result rows computed together: ver[i] and row[i] say which row of which sub-window of source
    i each joined row took."""

    ver: np.ndarray  # int64 [k, n]
    row: np.ndarray  # int64 [k, n]

    @property
    def n(self) -> int:
        return self.ver.shape[1]

