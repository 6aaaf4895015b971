"""Per-sub-window synopses, built once when a sub-window is sealed (thesis 2.3.4, 6.2).

- Basic interval: COUNT, SUM, MIN, MAX of every numeric column (integer sums exact: exact.py).
- Per-key: for each declared group-by column, the keys present and their COUNT and SUM of every
  numeric column (exact; int64 arrays, or Python ints where a sum exceeds int64), plus a bounded
  top-k list by COUNT (Algorithm 6's per-sub-window summary).
- Running: prefix COUNT and integer SUMs since the stream began, before and after this sub-window,
  so any window length is answered from its two end sub-windows (see Window.running_total).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from . import gil
from .exact import exact_sum, grouped_sum

_POOLED_BYTES = 1 << 20
_large_from_arrow = True  # see reuse_freed_malloc_memory


def pooled_empty(n: int, dtype) -> np.ndarray:
    """An uninitialised 1-d array; one of 1 MiB or more lives in Arrow's memory pool (mimalloc or
    jemalloc), which reuses freed memory: NumPy's malloc maps fresh pages for every array above
    glibc's mmap threshold (32 MiB at most), and their page faults cost 5-10x the copy that fills
    them (a sealed column of a 5 M-row sub-window: ~40 ms instead of ~5 ms). In a process whose
    malloc keeps freed memory (the server's, server/allocator.py) malloc is used instead."""
    dtype = np.dtype(dtype)
    if n * dtype.itemsize < _POOLED_BYTES or not _large_from_arrow:
        return np.empty(n, dtype=dtype)
    return np.frombuffer(pa.allocate_buffer(n * dtype.itemsize), dtype=dtype)


def reuse_freed_malloc_memory() -> None:
    """The process's malloc now keeps what is freed: large arrays come from it, not from Arrow's
    pool. A sealed sub-window's columns then reuse the memory its buffered chunks (NumPy arrays,
    from malloc) just gave back, and Arrow's pool, which returns its large blocks to the kernel,
    no longer faults in fresh pages for them: a seal while the window fills then costs what it costs
    once the window is full (docs/bench-history.md)."""
    global _large_from_arrow
    _large_from_arrow = False


def aligned(a: np.ndarray) -> np.ndarray:
    """`a`, or a copy of it in aligned memory where its address is not a multiple of its item size.
    A column decoded from a request's Arrow IPC bytes is a view into them at the payload's offset
    in the message, often unaligned; NumPy's indexed loop (np.add.at, the per-key sums) takes a slow
    path on unaligned values, about 70x slower: in the server a 10^5-row seal spent most of its CPU
    there (docs/performance.md, Round 25). The copy gives the GIL back while it runs."""
    if a.flags.aligned:
        return a
    out = pooled_empty(len(a), a.dtype)
    np.copyto(out, a)
    return out


def concat(parts: list[np.ndarray]) -> np.ndarray:
    """np.concatenate of 1-d arrays, into pooled memory (see pooled_empty); one part is returned as it is."""
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts, out=pooled_empty(sum(len(p) for p in parts), np.result_type(*parts)))


@dataclass(frozen=True)
class ColumnSummary:
    count: int
    sum: int | float
    min: int | float | None
    max: int | float | None


@dataclass(frozen=True)
class KeySummary:
    """Keys of one group-by column in one sub-window, sorted, with aligned aggregates."""

    keys: np.ndarray
    counts: np.ndarray
    sums: dict[str, np.ndarray]
    topk: "TopKList"
    valid: dict[str, np.ndarray] = field(default_factory=dict)  # per key, COUNT(c) of each numeric column

    @property
    def nbytes(self) -> int:
        """Memory its arrays hold (object arrays: their pointers only)."""
        arrays = (self.keys, self.counts, self.topk.keys, self.topk.counts, *self.sums.values(), *self.valid.values())
        return sum(a.nbytes for a in arrays)


@dataclass(frozen=True)
class TopKList:
    """The k most frequent keys of a sub-window and the k-th count (delta_i of 6.2.1).

    `delta` is an upper bound on the count of any key absent from the list; it is 0 when the list
    holds every key of the sub-window.
    """

    keys: np.ndarray
    counts: np.ndarray
    delta: int


@dataclass(frozen=True)
class Synopsis:
    rows: int
    columns: dict[str, ColumnSummary]
    by_key: dict[str, KeySummary]
    # running synopsis: prefix aggregates since the stream began, before/after this sub-window
    prefix_before: dict[str, int] = field(default_factory=dict)
    prefix_after: dict[str, int] = field(default_factory=dict)
    nulls: dict[str, int] = field(default_factory=dict)  # null count of each column that has a null
    sketches: dict = field(default_factory=dict)  # the declared sketches (sketch_columns.py), by sketch_key

    @property
    def nbytes(self) -> int:
        """Memory its key synopses hold (the per-column summaries are a few scalars)."""
        return sum(k.nbytes for k in self.by_key.values())


# The group key of null rows (GROUP BY puts every null in one group, sorted after every value):
# -1 in string codes (int32), 2 in booleans (int8), and for int64 keys, where every value is a
# key, NULL_KEY in an object array of Python ints (only where a null is present).
NULL_KEY = 2**63


def keys_with_nulls(keys: np.ndarray, valid: np.ndarray | None) -> np.ndarray:
    if valid is None:
        return keys
    if keys.dtype == np.int32:
        out = keys.copy()
        out[~valid] = -1
    elif keys.dtype == np.int8:
        out = keys.copy()
        out[~valid] = 2
    else:
        out = keys.astype(object)
        out[~valid] = NULL_KEY
    return out


def validity(columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """column -> validity mask, for the columns holding a null (see schema.valid_key)."""
    return {c[1:]: m for c, m in columns.items() if c.startswith("?")}


def summarize_column(values: np.ndarray) -> ColumnSummary:
    n = len(values)
    if n == 0:
        return ColumnSummary(0, 0 if values.dtype.kind in "iu" else 0.0, None, None)
    lo, hi = values.min().item(), values.max().item()
    return ColumnSummary(n, exact_sum(values, lo, hi), lo, hi)


def _dense_range(keys: np.ndarray) -> tuple[int, int] | None:
    """(min, max) of integer keys when their range is narrow enough to count them (counting
    sort by bincount beats np.unique's sort), else None."""
    if not len(keys) or keys.dtype.kind not in "iu":
        return None
    lo, hi = int(keys.min()), int(keys.max())
    return (lo, hi) if hi - lo <= 4 * len(keys) + 1024 else None


def group_keys(keys: np.ndarray, dense: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(sorted unique keys, index of each row's key in them).

    Dictionary codes are small dense ints: counting sort by bincount beats np.unique's sort.
    """
    span = _dense_range(keys) if dense else None
    if span is not None:
        lo = span[0]
        bins = keys - lo if lo else keys
        present = np.bincount(bins)
        uniq = np.flatnonzero(present)
        remap = np.empty(len(present), dtype=np.int64)
        remap[uniq] = np.arange(len(uniq))
        return (uniq + lo).astype(keys.dtype, copy=False), remap.take(bins)  # (take: half the cost of [bins])
    uniq, inverse = np.unique(keys, return_inverse=True)
    return uniq, inverse.reshape(-1)


class _Groups:
    """One grouping of a sub-window's rows, for per-key synopses: sorted unique keys and each
    row's bin. Narrow integer keys (dictionary codes) are binned by value (bin = key - min) and the
    present bins selected, so no per-row index into the unique keys is built; other keys through
    np.unique. Per-key results are the same either way (each key's rows are summed in row order)."""

    def __init__(self, keys: np.ndarray, dense: bool):
        span = _dense_range(keys) if dense else None
        if span is not None:
            lo, hi = span
            self.bins = pooled_empty(len(keys), np.intp)
            np.copyto(self.bins, keys)
            if lo:
                self.bins -= lo
            present = gil.bincount(self.bins, hi - lo + 1)
            self.select: np.ndarray | None = np.flatnonzero(present)
            self.uniq = (self.select + lo).astype(keys.dtype, copy=False)
            self.size = len(present)
            self.counts = present[self.select].astype(np.int64, copy=False)
        else:
            self.uniq, inverse = np.unique(keys, return_inverse=True)
            self.bins = inverse.reshape(-1)
            self.select = None
            self.size = len(self.uniq)
            self.counts = np.bincount(self.bins, minlength=self.size).astype(np.int64, copy=False)

    def _pick(self, per_bin: np.ndarray) -> np.ndarray:
        return per_bin if self.select is None else per_bin[self.select]

    def count(self, mask: np.ndarray) -> np.ndarray:
        """Per-key counts of the rows where mask holds."""
        return self._pick(gil.bincount(self.bins[mask], self.size)).astype(np.int64, copy=False)

    def sum(self, values: np.ndarray, summary: ColumnSummary, mask: np.ndarray | None = None) -> np.ndarray:
        """Per-key sums of `values` (exact for integers, see grouped_sum); `summary` describes the
        summed values (their min and max)."""
        bins = self.bins if mask is None else self.bins[mask]
        values = values if mask is None else values[mask]
        lo, hi = (summary.min, summary.max) if values.dtype.kind in "iu" and summary.count else (None, None)
        return self._pick(grouped_sum(bins, values, self.size, lo, hi))  # type: ignore[arg-type]  # integer values: int bounds


def top_k(keys: np.ndarray, counts: np.ndarray, k: int) -> TopKList:
    if len(keys) <= k:
        order = np.argsort(-counts, kind="stable")
        return TopKList(keys[order], counts[order], 0)
    part = np.argpartition(-counts, k - 1)[:k]
    order = part[np.argsort(-counts[part], kind="stable")]
    return TopKList(keys[order], counts[order], int(counts[order[-1]]))


def build_synopsis(columns: dict[str, np.ndarray], rows: int, numeric: list[str],
                   group_by: tuple[str, ...], topk: int, string_columns: set[str]) -> Synopsis:
    valid = validity(columns)
    col_summaries = {c: summarize_column(columns[c] if c not in valid else columns[c][valid[c]]) for c in numeric}
    by_key: dict[str, KeySummary] = {}
    for g in group_by:
        groups = _Groups(keys_with_nulls(columns[g], valid.get(g)), dense=True)
        uniq, counts = groups.uniq, groups.counts
        sums, nonnull = {}, {}
        for c in numeric:
            m = valid.get(c)
            if m is None:
                sums[c], nonnull[c] = groups.sum(columns[c], col_summaries[c]), counts
            else:
                nonnull[c] = groups.count(m)
                sums[c] = groups.sum(columns[c], col_summaries[c], m)
        for arr in (uniq, counts, *sums.values(), *nonnull.values()):
            arr.flags.writeable = False
        by_key[g] = KeySummary(uniq, counts, sums, top_k(uniq, counts, topk), nonnull)
    nulls = {c: int(len(m) - int(m.sum())) for c, m in valid.items()}
    return Synopsis(rows, col_summaries, by_key, nulls=nulls)


@dataclass
class TopKEstimate:
    """Algorithm 6 over per-sub-window top-k lists: bounds per reported key.

    `lower` is the count seen on the lists (a true lower bound); `upper` adds the delta of every
    list the key is missing from. `guaranteed` is true when the k reported keys are provably the
    true top k (each lower bound >= every other key's upper bound).
    """

    keys: list
    lower: list[int]
    upper: list[int]
    delta: int
    guaranteed: bool


def merge_topk_lists(lists: list[TopKList], k: int) -> TopKEstimate:
    delta = sum(t.delta for t in lists)
    if not lists:
        return TopKEstimate([], [], [], 0, True)
    keys = np.concatenate([t.keys for t in lists])
    counts = np.concatenate([t.counts for t in lists])
    missing_delta = np.concatenate([np.full(len(t.keys), t.delta, dtype=np.int64) for t in lists])
    uniq, inverse = np.unique(keys, return_inverse=True)
    lower = np.bincount(inverse, weights=counts, minlength=len(uniq)).astype(np.int64)
    seen_delta = np.bincount(inverse, weights=missing_delta, minlength=len(uniq)).astype(np.int64)
    upper = lower + (delta - seen_delta)
    order = np.lexsort((uniq, -lower))
    top, rest = order[:k], order[k:]
    others_upper = max([delta] + ([int(upper[rest].max())] if len(rest) else []))
    guaranteed = bool(len(top) == 0 or (int(lower[top].min()) >= others_upper and (len(top) == k or delta == 0)))
    return TopKEstimate(uniq[top].tolist(), lower[top].tolist(), upper[top].tolist(), delta, guaranteed)
