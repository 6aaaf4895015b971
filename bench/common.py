"""Timing helpers shared by the benchmarks: best-of and percentiles of wall-clock samples."""
from __future__ import annotations

import statistics
import time
from typing import Callable

import numpy as np


def timeit(fn: Callable[[], object], repeat: int = 5, number: int = 1) -> float:
    """Median seconds per call over `repeat` rounds of `number` calls."""
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t0) / number)
    return statistics.median(samples)


def packets(rows: int, keys: int = 1000, seed: int = 0, t0: int = 0, zipf: bool = True) -> dict[str, np.ndarray]:
    """Synthetic IP packets: Zipf-skewed (or uniform) source addresses, 40-1500 byte sizes."""
    rng = np.random.default_rng(seed)
    names = np.array([f"10.0.{i // 256}.{i % 256}" for i in range(keys)], dtype=object)
    idx = np.minimum(rng.zipf(1.3, rows) - 1, keys - 1) if zipf else rng.integers(0, keys, rows)
    src = names[idx]
    return {
        "ts": t0 + np.sort(rng.integers(0, 1000, rows)).astype(np.int64),
        "src": src,
        "bytes": rng.integers(40, 1500, rows).astype(np.int64),
        "lat": rng.random(rows) * 100.0,
    }


SCHEMA = {"ts": "int64", "src": "string", "bytes": "int64", "lat": "float64"}


def fmt_rate(x: float) -> str:
    return f"{x / 1e6:.2f} M/s" if x >= 1e6 else f"{x / 1e3:.1f} k/s"


def fmt_time(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    return f"{s * 1e3:.2f} ms"
