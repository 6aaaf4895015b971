"""Large NumPy steps that hold the GIL, in slices.

A seal runs on a thread of its own beside the event loop's (server/driver/job_threads.py), and both want the
GIL. np.bincount and np.add.at hold it for as long as they run (1.3-1.6 ms per million rows
here), so the loop's thread waited that long in the middle of a call. Here they run in slices
of SLICE_ROWS rows, and the loop's thread gets the GIL between two of them. A slice of 2^16 rows
holds the GIL ~0.1 ms, under the 0.25 ms switch interval (config.switch_interval_ms) that bounds
how long any Python code holds it while the loop waits: a probe's p99 beside a sliding stream is
lower with these slices than with larger ones, and a seal takes a few % longer. Copies are left
whole: NumPy gives the GIL back while it copies.

The other way round, np.concatenate gives the GIL back and takes it again around every part, and
each take waits for the thread holding it. Copying the chunks holding the GIL instead made seals
faster beside a busy loop but the logging server, whose log and snapshot threads want the GIL too,
ingest less, so the chunks are still concatenated by np.concatenate (the measurements are in
docs/bench-history.md, "Measurements behind design choices").

Results are those of the whole call: integer sums in any slicing; float sums add the slices'
partial sums in row order (deterministic for the same rows and slice, which is all a sub-window's
synopses need: a sealed sub-window is sealed from the same rows again on replay; a float sum may
differ in its last bits from one sealed by a version with another slice).
"""
from __future__ import annotations

import numpy as np

SLICE_ROWS = 1 << 16


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
    return out  # type: ignore[return-value]  # n > step: the loop ran


def add_at(out: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
    """np.add.at(out, index, values), slice by slice (integer sums are the same in any order)."""
    n = len(index)
    if n <= SLICE_ROWS:
        np.add.at(out, index, values)
        return
    for i in range(0, n, SLICE_ROWS):
        np.add.at(out, index[i:i + SLICE_ROWS], values[i:i + SLICE_ROWS])
