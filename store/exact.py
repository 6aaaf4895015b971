"""Exact integer arithmetic over int64 columns.

A SUM over int64 never wraps: like DuckDB's HUGEINT, the exact value is kept even when it does not
fit in 64 bits. NumPy's int64 sums wrap silently, so every integer sum here first bounds its result
(the largest magnitude times the number of terms, in Python ints, so INT64_MIN's magnitude is not
negative) and takes the cheapest path that is still exact:

- bound < 2**63: int64 accumulation cannot wrap (whole-column sums: ndarray.sum; per-key sums:
  np.add.at, an indexed loop in NumPy >= 1.25, faster than a float64 bincount);
- otherwise: each value is split into a signed high and an unsigned low 32-bit half, both halves
  are summed in int64 (exact for fewer than 2**31 terms) and recombined as Python ints.

Per-key results are int64 arrays when every value fits, object arrays of Python ints otherwise.
"""
from __future__ import annotations

import numpy as np

from . import gil

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
_FLOAT_EXACT = 2**53
_LOW_MASK = 0xFFFFFFFF


def max_abs(lo: int, hi: int) -> int:
    """The largest magnitude of values in [lo, hi], as a Python int (|INT64_MIN| included)."""
    return max(-int(lo), int(hi))


def exact_sum(values: np.ndarray, lo: int | None = None, hi: int | None = None) -> int | float:
    """The sum of a 1-d array: exact Python int for integers, float64 for floats.

    `lo`/`hi` (the array's min and max) may be passed when the caller already has them."""
    kind = values.dtype.kind
    if kind == "f":
        return float(values.sum())
    if kind == "O":
        return sum(values.tolist())
    n = len(values)
    if n == 0:
        return 0
    if lo is None:
        lo, hi = int(values.min()), int(values.max())
    if max_abs(lo, hi) * n <= INT64_MAX:  # type: ignore[arg-type]  # lo and hi are given together
        return int(values.sum())
    high = values >> 32                    # arithmetic shift: floor(x / 2**32), in [-2**31, 2**31)
    low = values & _LOW_MASK               # x - high * 2**32, in [0, 2**32)
    return int(high.sum()) * (1 << 32) + int(low.sum())


def run_sums(values: np.ndarray):
    """exact_sum of every run values[i:j] of an int64 array, as a function of (i, j): prefix sums
    made once (O(n)), each run then two lookups. The same bound chooses the path as exact_sum: int64
    prefix sums while no prefix can wrap, else prefix sums of the high and low 32-bit halves
    (each exact in int64 for fewer than 2**31 terms), recombined as Python ints."""
    assert values.dtype.kind == "i", "run sums are exact for integers only"
    n = len(values)
    if n == 0:
        return lambda i, j: 0
    lo, hi = int(values.min()), int(values.max())
    if max_abs(lo, hi) * n <= INT64_MAX:
        p = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(values, out=p[1:])
        return lambda i, j: int(p[j]) - int(p[i])
    high, low = np.zeros(n + 1, dtype=np.int64), np.zeros(n + 1, dtype=np.int64)
    np.cumsum(values >> 32, out=high[1:])
    np.cumsum(values & _LOW_MASK, out=low[1:])
    return lambda i, j: (int(high[j]) - int(high[i])) * (1 << 32) + int(low[j]) - int(low[i])


class RangeSums:
    """exact_sum of values[i[x]:j[x]] for arrays of runs i, j of an int64 array at once, each run
    two lookups in run_sums' prefix sums (int64 while no prefix can wrap, else of the 32-bit
    halves, recombined as Python ints in an object array); `extend` appends values, extending the
    int64 prefix sums in place (room doubled as it fills), so that a structure over a sliding
    sequence of values is kept across slides, not made again (store/slicing_shared.py)."""

    __slots__ = ("n", "bound", "p", "high", "low")

    def __init__(self, values: np.ndarray):
        assert values.dtype.kind == "i", "run sums are exact for integers only"
        n = self.n = len(values)
        self.bound = 0 if n == 0 else max_abs(int(values.min()), int(values.max()))
        self.high = self.low = None
        if self.bound * n <= INT64_MAX:
            self.p = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(values, out=self.p[1:])
        else:
            high, low = np.zeros(n + 1, dtype=np.int64), np.zeros(n + 1, dtype=np.int64)
            np.cumsum(values >> 32, out=high[1:])
            np.cumsum(values & _LOW_MASK, out=low[1:])
            self.high, self.low = high, low

    def extend(self, values: np.ndarray) -> bool:
        """Append `values` (runs may then end past the old ones); False, changing nothing, where
        the int64 prefix sums could wrap (over the halves): then make it again over all values."""
        m = len(values)
        if self.high is not None or values.dtype.kind != "i":
            return False
        if not m:
            return True
        bound = max(self.bound, max_abs(int(np.minimum.reduce(values)), int(np.maximum.reduce(values))))
        if bound * (self.n + m) > INT64_MAX:
            return False
        n = self.n
        if n + m + 1 > len(self.p):
            grown = np.zeros(2 * (n + m + 1), dtype=np.int64)
            grown[:n + 1] = self.p[:n + 1]
            self.p = grown
        tail = self.p[n + 1:n + m + 1]
        np.cumsum(values, out=tail)
        tail += self.p[n]
        self.n, self.bound = n + m, bound
        return True

    def __call__(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        if self.high is None:
            return self.p[j] - self.p[i]
        high, low = self.high, self.low
        assert low is not None  # (made with high)
        return narrow((high[j] - high[i]).astype(object) * (1 << 32) + (low[j] - low[i]).astype(object))


def range_sums(values: np.ndarray) -> RangeSums:
    """exact_sum of values[i[x]:j[x]] for arrays of runs i, j of an int64 array at once (RangeSums)."""
    return RangeSums(values)


def grouped_sum(inverse: np.ndarray, values: np.ndarray, groups: int, lo: int | None = None,
                hi: int | None = None) -> np.ndarray:
    """Per-group sums; `inverse` maps each value to its group in 0..groups-1. Floats stay float64;
    integer sums are exact (int64 array when every sum fits, object array of Python ints if not).

    `lo`/`hi` (the values' min and max) may be passed when the caller already has them. Integers
    whose sums are bounded by INT64_MAX are accumulated in int64 by np.add.at (NumPy >= 1.25 runs
    it as one indexed loop: faster than a float64 bincount, and exact at any magnitude); beyond
    that, the signed high and unsigned low 32-bit halves are summed and recombined as Python ints."""
    kind = values.dtype.kind
    if kind == "f":
        return gil.bincount(inverse, groups, values)
    if kind == "O":
        out = np.zeros(groups, dtype=object)
        np.add.at(out, inverse, values)
        return narrow(out)
    n = len(values)
    if n == 0:
        return np.zeros(groups, dtype=np.int64)
    if lo is None or hi is None:
        lo, hi = int(values.min()), int(values.max())
    if max_abs(lo, hi) * n <= INT64_MAX:  # every partial sum fits: int64 cannot wrap
        out = np.zeros(groups, dtype=np.int64)
        gil.add_at(out, inverse, values if values.dtype == np.int64 else values.astype(np.int64))
        return out
    high = grouped_sum(inverse, values >> 32, groups)
    low = grouped_sum(inverse, values & _LOW_MASK, groups)
    return narrow(high.astype(object) * (1 << 32) + low.astype(object))


def grouped_count(inverse: np.ndarray, counts: np.ndarray, groups: int) -> np.ndarray:
    """Per-group totals of row counts (int64): their sum is a number of rows, so int64 cannot wrap
    and grouped_sum's bound (a min and a max over the counts) is not needed."""
    out = np.zeros(groups, dtype=np.int64)
    gil.add_at(out, inverse, counts if counts.dtype == np.int64 else counts.astype(np.int64))
    return out


def narrow(values: np.ndarray) -> np.ndarray:
    """An object array of Python ints as int64 when every value fits (the common case)."""
    if values.dtype.kind != "O":
        return values
    if len(values) == 0 or all(INT64_MIN <= v <= INT64_MAX for v in values.tolist()):
        return values.astype(np.int64)
    return values


def ratio(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """sums / counts as float64, correctly rounded even where a sum is beyond 2**53."""
    if sums.dtype.kind == "f":
        return sums / counts
    if sums.dtype.kind == "i" and (len(sums) == 0 or max_abs(sums.min(), sums.max()) <= _FLOAT_EXACT):
        return sums.astype(np.float64) / counts
    return np.array([int(s) / int(c) for s, c in zip(sums.tolist(), counts.tolist())], dtype=np.float64)
