"""Band conditions (the W-join window constraint of seed 001: low <= a.t - b.t <= high) in a join
step: the interval each intermediate row allows, which sub-windows can meet it (a band prunes whole
sub-windows whose event times cannot fall within it, and probes a sub-window only with the
intermediate rows whose band interval overlaps it), the probe ranks, and the exact int64 arithmetic
behind them. Pure functions; the join state is plan.JoinPlan's.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..exact import INT64_MAX, INT64_MIN
from ..join_binder import BoundBand
from .index import Inter, Prepared


def band_interval(inter: Inter, q: int, b: BoundBand) -> dict:
    """Per intermediate row, the interval [L, H] the column of source q must fall in (exact: a
    bound beyond int64 is flagged), and, when both bounds are finite, the rows sorted by L."""
    if b.column.source == q:  # low <= x - d <= high  =>  d + low <= x <= d + high
        d = inter.attrs[(b.base.source, b.base.column)]
        low, high = b.low, b.high
    else:                      # low <= c - x <= high  =>  c - high <= x <= c - low
        d = inter.attrs[(b.column.source, b.column.column)]
        low = None if b.high is None else -b.high
        high = None if b.low is None else -b.low
    out: dict[str, Any] = {"L": None, "H": None, "sorted": None}
    if low is not None:
        out["L"] = shifted(d, low)
    if high is not None:
        out["H"] = shifted(d, high)
    if low is not None and high is not None and not out["L"][1].any() and not out["H"][1].any():
        order = np.argsort(out["L"][0], kind="stable")
        out["sorted"] = (order, out["L"][0][order], high - low)
    return out

def candidate_rows(interval: dict | None, x: Prepared, band_col: str | None) -> np.ndarray | None:
    """The intermediate rows whose band interval can meet sub-window x (None: all rows)."""
    if interval is None or interval["sorted"] is None or x.n == 0:
        return None
    order, ls, width = interval["sorted"]
    if width < 0:
        return order[:0]
    tmin, tmax = x.value_range(band_col)  # type: ignore[arg-type]  # an interval has a band column
    lo_bound = max(INT64_MIN, tmin - width)
    a = np.searchsorted(ls, lo_bound, side="left")
    z = np.searchsorted(ls, tmax, side="right")
    return order[a:z]

def band_ranks(interval: dict, tu: np.ndarray, rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi) ranks in tu (the sub-window's sorted distinct band values) per probing row."""
    n = len(tu)

    def pick(bound, side, flagged_hi, flagged_lo):
        if bound is None:
            return None
        vals, flag = bound
        if rows is not None:
            vals, flag = vals[rows], flag[rows]
        r = np.searchsorted(tu, vals, side=side)
        if flag.any():
            r = np.where(flag > 0, flagged_hi, np.where(flag < 0, flagged_lo, r))
        return r

    m = None
    lo = pick(interval["L"], "left", n, 0)
    hi = pick(interval["H"], "right", n, 0)
    if lo is None or hi is None:
        m = len(lo if lo is not None else hi)
    if lo is None:
        lo = np.zeros(m, dtype=np.int64)
    if hi is None:
        hi = np.full(m, n, dtype=np.int64)
    return lo, hi



def shifted(v: np.ndarray, off: int) -> tuple[np.ndarray, np.ndarray]:
    """v + off exactly: (the sum where it fits int64, flag +1 where it is above int64, -1 below)."""
    if off >= 0:
        out_of_range = v > INT64_MAX - off
        flag = out_of_range.astype(np.int8)
    else:
        out_of_range = v < INT64_MIN - off
        flag = -out_of_range.astype(np.int8)
    safe = np.where(out_of_range, 0, v) if out_of_range.any() else v
    return safe + np.int64(off), flag


def band_mask(c: np.ndarray, d: np.ndarray, low: int | None, high: int | None) -> np.ndarray:
    """low <= c - d <= high exactly over int64 (the difference may leave int64)."""
    with np.errstate(over="ignore"):
        diff = c - d
    over = ((c ^ d) & (c ^ diff)) < 0  # wrapped: the true difference has c's sign, beyond int64
    ok = np.ones(len(c), dtype=bool)
    if low is not None:
        ok &= np.where(over, c >= 0, diff >= low)
    if high is not None:
        ok &= np.where(over, c < 0, diff <= high)
    return ok

