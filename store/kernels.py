"""Per-group array kernels of the aggregate functions (functions.py): extremes per group (numbers,
and strings by their decoded order), exact integer products, per-group sums with NULL where a group
had no value, distinct (key, value) pairs. Vectorised NumPy over one contribution's arrays; they
know nothing of windows, sub-windows or queries."""
from __future__ import annotations

import numpy as np

from .exact import INT64_MAX, max_abs
from .synopsis import NULL_KEY, group_keys


def weighted(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """values * counts elementwise, exactly for integers (object array of Python ints where a product
    may leave int64), float64 for floats."""
    if values.dtype.kind == "f":
        return values * counts
    if not len(values):
        return values.astype(np.int64)
    if max_abs(values.min(), values.max()) * int(counts.max()) <= INT64_MAX:
        return values.astype(np.int64) * counts
    return values.astype(object) * counts.astype(object)


def null_where_empty(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per-group sums, None where a group had no value (only nulls)."""
    empty = counts == 0
    if not empty.any():
        return sums
    out = sums.astype(object)
    out[empty] = None
    return out


def without_null_key(keys: np.ndarray) -> np.ndarray:
    """A synopsis' distinct keys without the null group's key (synopsis.keys_with_nulls)."""
    if keys.dtype == np.int32:
        return keys[keys >= 0] if len(keys) and keys[0] < 0 else keys
    if keys.dtype == np.int8:
        return keys[keys != 2]
    if keys.dtype.kind == "O":
        return keys[keys != NULL_KEY]
    return keys


def concat_sums(parts: list[np.ndarray]) -> np.ndarray:
    """Concatenate per-key integer sums, some of which may be object arrays of Python ints."""
    if any(p.dtype.kind == "O" for p in parts):
        return np.concatenate([p.astype(object) for p in parts])
    return np.concatenate(parts)


def grouped_extreme(maximum: bool, inverse: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    if values.dtype.kind == "f":
        out = np.full(groups, -np.inf if maximum else np.inf)
    else:
        info = np.iinfo(values.dtype)
        out = np.full(groups, info.min if maximum else info.max, dtype=values.dtype)
    (np.maximum if maximum else np.minimum).at(out, inverse, values)
    return out


def string_group_extreme(inverse, groups, codes, strings, maximum) -> np.ndarray:
    """Per group, the code of its smallest (largest) string. Codes are not ordered like their
    strings, so the distinct codes present are ranked by their decoded values first."""
    uniq, local = group_keys(codes)
    decoded = strings.decode(uniq)
    order = sorted(range(len(uniq)), key=decoded.__getitem__)
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[order] = np.arange(len(uniq))
    if not len(uniq):
        return np.full(groups, -1, dtype=np.int64)
    best = grouped_extreme(maximum, inverse, rank[local], groups)
    found = np.bincount(inverse, minlength=groups) > 0
    out = uniq[order][np.where(found, best, 0)].astype(np.int64)
    out[~found] = -1  # a group without a value (only nulls)
    return out


def unique_pairs(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if len(keys) == 0:
        return keys, values
    order = np.lexsort((values, keys))
    k, v = keys[order], values[order]
    keep = np.ones(len(k), dtype=bool)
    keep[1:] = (k[1:] != k[:-1]) | (v[1:] != v[:-1])
    return k[keep], v[keep]


_RUN_BLOCK = 64  # run_extremes: values per block


def _blocks(values: np.ndarray, op, identity) -> tuple[np.ndarray, np.ndarray]:
    """Per block of _RUN_BLOCK values (the last padded with the identity) the running extreme from
    its start and from its end, flat."""
    b = _RUN_BLOCK
    blocks = -(-len(values) // b)
    padded = np.full(blocks * b, identity, dtype=values.dtype)
    padded[:len(values)] = values
    grid = padded.reshape(blocks, b)
    from_start = op.accumulate(grid, axis=1).ravel()                   # max(values[block start .. x])
    from_end = op.accumulate(grid[:, ::-1], axis=1)[:, ::-1].ravel()   # max(values[x .. block end])
    return from_start, from_end


def _fill_levels(op, table: np.ndarray, blocks: int, changed: int) -> None:
    """The sparse table over `blocks` blocks' extremes, in place (row k: of the 2**k consecutive
    blocks from each block), from its row 0 (complete) and the rows above as they were for blocks
    before `changed`: each row's entries that cover a block from `changed` on are made again."""
    width = 1
    for k in range(1, blocks.bit_length()):
        start, stop = max(0, changed - 2 * width + 1), blocks - 2 * width + 1
        if stop > start:
            table[k, start:stop] = op(table[k - 1, start:stop], table[k - 1, start + width:stop + width])
        width *= 2


def _block_extremes(values: np.ndarray, maximum: bool) -> tuple:
    """run_extremes' structure of an integer array: per block of _RUN_BLOCK values the running
    extreme from its start and from its end (2n values), and a sparse table over the blocks'
    extremes (row k: of 2**k consecutive blocks; O(n / B log(n / B))); with the reduction."""
    assert values.dtype.kind in "iu", "run extremes of integers only"
    op = np.maximum if maximum else np.minimum
    info = np.iinfo(values.dtype)
    from_start, from_end = _blocks(values, op, info.min if maximum else info.max)  # (padded with the identity)
    blocks = len(from_end) // _RUN_BLOCK
    table = np.empty((max(1, blocks.bit_length()), blocks), dtype=values.dtype)
    table[0] = from_end[::_RUN_BLOCK]
    _fill_levels(op, table, blocks, 0)
    return op, from_start, from_end, table


def run_extremes(values: np.ndarray, maximum: bool):
    """The max (or min) of every non-empty run values[i:j] of an integer array, as a function of
    (i, j) giving a Python int, on _block_extremes' structure made once: a run is then the suffix
    of its first block, the prefix of its last and the whole blocks between (two table lookups),
    or one direct reduction when it lies within one block. A reduction picks one of the values, so
    the result is the run's own max/min exactly."""
    op, from_start, from_end, levels = _block_extremes(values, maximum)
    pick = max if maximum else min
    b = _RUN_BLOCK
    reduce = op.reduce

    def run(i: int, j: int) -> int:
        first, last = i // b, (j - 1) // b
        if first == last:
            return reduce(values[i:j]).item()
        out = pick(from_end[i], from_start[j - 1])
        if last - first > 1:
            k = (last - first - 1).bit_length() - 1
            out = pick(out, levels[k][first + 1], levels[k][last - (1 << k)])
        return out.item()
    return run


class RangeExtremes:
    """The max (or min) of values[i[x]:j[x]] (each non-empty) for arrays of runs i, j of an integer
    array at once, on _block_extremes' structure: a run across blocks is the suffix of its first
    block, the prefix of its last and the whole blocks between (two lookups in the sparse table,
    one row per run), vectorised over the runs; one within a block is reduced directly. A
    reduction picks one of the values, so each result is its run's own max/min exactly. `extend`
    appends values: the blocks from the last partial one on and the table entries covering them
    are made again in place, the rest kept (room doubled as it fills), so a structure over a
    sliding sequence is kept across slides (store/slicing_shared.py)."""

    __slots__ = ("op", "identity", "n", "values", "from_start", "from_end", "table", "log2")

    def __init__(self, values: np.ndarray, maximum: bool):
        self.op, self.from_start, self.from_end, self.table = _block_extremes(values, maximum)
        info = np.iinfo(values.dtype)
        self.identity = info.min if maximum else info.max
        self.n = len(values)
        self.values = values
        self.log2 = _floor_log2(self.table.shape[1])  # (a run's row of the table, by the blocks it spans)

    def extend(self, values: np.ndarray) -> bool:
        """Append `values` (False, changing nothing, for another dtype: then make it again)."""
        if values.dtype != self.values.dtype:
            return False
        if not len(values):
            return True
        b, n = _RUN_BLOCK, self.n
        first = n // b  # the first block that changes (the partial last one, if any)
        m = n + len(values)
        self.values = _room(self.values, n, m)
        self.values[n:m] = values
        start, end = _blocks(self.values[first * b:m], self.op, self.identity)
        self.from_start, self.from_end = _room(self.from_start, first * b, first * b + len(start)), \
            _room(self.from_end, first * b, first * b + len(end))
        self.from_start[first * b:first * b + len(start)] = start
        self.from_end[first * b:first * b + len(end)] = end
        blocks = -(-m // b)
        rows, width = self.table.shape
        if blocks > width or blocks.bit_length() > rows:  # room for twice the blocks, and their rows
            grown = np.empty(((2 * blocks).bit_length(), 2 * blocks), dtype=self.table.dtype)
            grown[:rows, :first] = self.table[:, :first]
            self.table = grown
            self.log2 = _floor_log2(grown.shape[1])
        self.table[0, first:blocks] = end[::b]
        _fill_levels(self.op, self.table, blocks, first)
        self.n = m
        return True

    def __call__(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        assert (j > i).all() and (j <= self.n).all(), "non-empty runs of the values"
        op, b = self.op, _RUN_BLOCK
        first, last = i // b, (j - 1) // b
        out = op(self.from_end[i], self.from_start[j - 1])  # (right where the run spans blocks)
        between = last - first - 1
        across = between > 0
        table = self.table
        if across.all():  # the whole blocks between: two entries of row k = floor(log2(between))
            k = self.log2[between]
            out = op(out, op(table[k, first + 1], table[k, last - (1 << k)]))
        elif across.any():  # (the same where a run spans blocks, the others' entries unused)
            k = self.log2[np.maximum(between, 0)]
            whole = op(table[k, np.where(across, first + 1, 0)], table[k, np.where(across, last - (1 << k), 0)])
            out = np.where(across, op(out, whole), out)
        for x in np.flatnonzero(first == last).tolist():  # within one block: at most _RUN_BLOCK values
            out[x] = op.reduce(self.values[i[x]:j[x]])
        return out


def _floor_log2(size: int) -> np.ndarray:
    """floor(log2(x)) for x in 0 .. size - 1 (0 for x = 0), as indexes."""
    out = np.zeros(max(size, 1), dtype=np.intp)
    out[1:] = np.frexp(np.arange(1, len(out)))[1] - 1  # (exact below 2**53)
    return out


def distinct_sorted(values: np.ndarray) -> np.ndarray:
    """The distinct values of a numeric array, ascending: one sort and a comparison of neighbours
    (np.unique hashes integers in NumPy 2, several times slower on arrays of a few hundred)."""
    out = np.sort(values)
    if len(out) > 1:
        out = out[np.concatenate(([True], out[1:] != out[:-1]))]
    return out


def _room(a: np.ndarray, keep: int, need: int) -> np.ndarray:
    """`a`, or a copy of its first `keep` entries with room for twice `need`, where it is shorter."""
    if need <= len(a) and a.flags.writeable and a.base is None:
        return a
    grown = np.empty(2 * need if need > len(a) else need, dtype=a.dtype)
    grown[:keep] = a[:keep]
    return grown


def range_extremes(values: np.ndarray, maximum: bool) -> RangeExtremes:
    """The max (or min) of values[i[x]:j[x]] for arrays of runs i, j at once (RangeExtremes)."""
    return RangeExtremes(values, maximum)
