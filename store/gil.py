"""Large NumPy steps that hold the GIL, in slices.

A seal runs on a thread of its own beside the event loop's (server/driver.py), and both want the
GIL. np.bincount and np.add.at hold it for as long as they run (1.3-1.6 ms per million rows
here), so the loop's thread waited that long in the middle of a call. Here they run in slices
of SLICE_ROWS rows, and the loop's thread gets the GIL between two of them. A slice of 2^16 rows
holds the GIL ~0.1 ms, under the 0.25 ms switch interval (config.switch_interval_ms) that bounds
how long any Python code holds it while the loop waits. Measured on 2026-11-27 (three interleaved
rounds, one writer of 10^4-row batches into a stream whose 1 s sub-windows slide, a probe query
beside it): p99 at 1 M rows/s 1.93-2.46 ms with 2^16-row slices against 2.41-2.68 ms with 2^18,
back to back 5.44-6.22 against 6.19-6.71 ms; a seal alone takes ~5% longer (10 M rows 113 vs 106
ms, 1 M rows 10.5 vs 10.0 ms, the minimum of eight). Copies are left whole: NumPy gives the GIL
back while it copies (beside np.copyto of 10 M rows the loop's thread waited at most 0.3 ms).

The other way round, np.concatenate gives the GIL back and takes it again around every part, and
each take waits for the thread holding it: beside a busy loop a seal's concatenation of 1,000
chunks took 73 ms instead of 9. Copying the chunks holding the GIL instead (a memcpy per part) made
seals 2-3x faster beside a busy loop and in-memory ingest ~8% faster, but the logging server,
whose log and snapshot threads want the GIL too, ingested 12-14% less (interleaved A/B rounds on
2026-11-27), so the chunks are still concatenated by np.concatenate.

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
    return out


def add_at(out: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
    """np.add.at(out, index, values), slice by slice (integer sums are the same in any order)."""
    n = len(index)
    if n <= SLICE_ROWS:
        np.add.at(out, index, values)
        return
    for i in range(0, n, SLICE_ROWS):
        np.add.at(out, index[i:i + SLICE_ROWS], values[i:i + SLICE_ROWS])
