"""Large NumPy steps in slices, so none holds the GIL for long.

np.concatenate, np.copyto, np.bincount and np.add.at hold the GIL for as long as they run: over a
10 M-row sub-window, 4-9 ms each on this machine. A seal runs on a thread of its own beside the
event loop's (server/driver.py), and the loop's thread waited that long for the GIL in the middle
of a call. Here they run in slices of SLICE_ROWS rows (~0.3-0.5 ms each), so the loop's thread
gets the GIL between two of them (the switch interval, config.switch_interval_ms, bounds the
wait at a slice boundary).

Results are those of the whole call: copies and integer sums in any slicing; float sums add the
slices' partial sums in row order (deterministic for the same rows, which is all a sub-window's
synopses need: a sealed sub-window is sealed from the same rows again on replay).
"""
from __future__ import annotations

import numpy as np

SLICE_ROWS = 1 << 18


def copy_into(out: np.ndarray, parts, minus: int = 0) -> np.ndarray:
    """np.concatenate(parts, out=out) (less `minus`), a part at a time, a large part in slices."""
    pos = 0
    for p in parts:
        n = len(p)
        for i in range(0, n, SLICE_ROWS):
            m = min(SLICE_ROWS, n - i)
            dst = out[pos + i:pos + i + m]
            dst[...] = p[i:i + m] if m < n else p
            if minus:
                dst -= minus
        pos += n
    return out


def bincount(bins: np.ndarray, minlength: int, weights: np.ndarray | None = None) -> np.ndarray:
    """np.bincount(bins, weights, minlength) for bins < minlength. A slice holds at least
    `minlength` rows, so many groups do not cost an output array per few rows."""
    n = len(bins)
    step = max(SLICE_ROWS, minlength)
    if n <= step:
        return np.bincount(bins, weights=weights, minlength=minlength)
    out = None
    for i in range(0, n, step):
        part = np.bincount(bins[i:i + step], weights=None if weights is None else weights[i:i + step],
                           minlength=minlength)
        if out is None:
            out = part
        else:
            out += part
    return out


def add_at(out: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
    """np.add.at(out, index, values), slice by slice (integer sums are the same in any order)."""
    n = len(index)
    if n <= SLICE_ROWS:
        np.add.at(out, index, values)
        return
    for i in range(0, n, SLICE_ROWS):
        np.add.at(out, index[i:i + SLICE_ROWS], values[i:i + SLICE_ROWS])
