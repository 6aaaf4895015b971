"""Large NumPy steps in slices, so none holds the GIL for long.

A seal runs on a thread of its own beside the event loop's (server/driver.py), and both want the
GIL. np.bincount and np.add.at hold it for as long as they run (over a 10 M-row sub-window, 4-9 ms
each here), so the loop's thread waited that long in the middle of a call: here they run in
slices of SLICE_ROWS rows (~0.3-0.5 ms each), and the loop's thread gets the GIL between two of
them (the switch interval, config.switch_interval_ms, bounds the wait at a slice boundary). The
other way round, a call that gives the GIL back and takes it again many times waits for the loop
each time: concat_into copies many small parts without letting go of it.

Results are those of the whole call: copies and integer sums in any slicing; float sums add the
slices' partial sums in row order (deterministic for the same rows, which is all a sub-window's
synopses need: a sealed sub-window is sealed from the same rows again on replay).
"""
from __future__ import annotations

import numpy as np

SLICE_ROWS = 1 << 18


def concat_into(out: np.ndarray, parts) -> np.ndarray:
    """np.concatenate(parts, out=out), holding the GIL in short stretches instead of giving it back
    for each part: np.concatenate releases and takes the GIL again around every part's copy, and
    each take waits for the thread holding it (up to a switch interval), so beside a busy event
    loop 1,000 parts of 10^4 rows took 73 ms instead of 9. Parts of out's dtype, contiguous, are
    copied as bytes (a memcpy that keeps the GIL, a slice of a large part at a time); others as
    NumPy assigns them."""
    dst = memoryview(out).cast("B") if out.flags.c_contiguous else None
    width = out.dtype.itemsize
    step = SLICE_ROWS * width
    pos = 0
    for p in parts:
        n = len(p)
        if dst is not None and p.dtype == out.dtype and p.flags.c_contiguous:
            src = memoryview(p).cast("B")
            at = pos * width
            for i in range(0, len(src), step):
                chunk = src[i:i + step]
                dst[at + i:at + i + len(chunk)] = chunk
        else:
            out[pos:pos + n] = p
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
