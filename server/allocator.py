"""The C allocator's policy in the server process: memory freed is kept for the next allocation,
not handed back to the kernel.

A sealed sub-window's columns are large (a 1 s sub-window at 8 M rows/s holds ~220 MB). glibc
serves an allocation above its mmap threshold (at most 32 MB) with a fresh mapping and unmaps it
when freed, so every seal faulted in new pages that the kernel zeroed first, while the sub-window
that slid out a moment before had just handed back as much; received payloads (a few MB each)
went the same way. With freed memory kept, a seal reuses what the sub-window that left held.
Zeroing faulted pages was a large share of the server's CPU before; the page faults per Append fell
by an order of magnitude with this (docs/bench-history.md).

One arena for every thread: glibc gives a thread that allocates while another does an arena of
its own, whose heaps are at most 64 MB each, so a large block there is mapped afresh every time
and the kept memory of the main arena is not reused. Seals run on a thread of their own
(server/driver/job_threads.py): in an arena of its own a large seal faulted in all its pages and took several
times as long as on the main thread; in one arena it takes as long.

The price: the process's resident size follows the largest its windows have been, not what they
hold now (memory a dropped stream freed is reused by the others, not returned). An operator who
sets the allocator through the environment (GLIBC_TUNABLES, MALLOC_MMAP_MAX_, MALLOC_TRIM_THRESHOLD_,
MALLOC_ARENA_MAX) keeps that setting. Elsewhere than glibc nothing changes."""
from __future__ import annotations

import ctypes
import os

from windowstore.store import synopsis

M_TRIM_THRESHOLD = -1   # glibc's mallopt parameters (malloc.h)
M_MMAP_MAX = -4
M_ARENA_MAX = -8
OPERATOR_SETTINGS = ("GLIBC_TUNABLES", "MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_ARENA_MAX")


def keep_freed_memory() -> bool:
    """Serve every allocation from one heap (no mmap per large block, one arena for all threads)
    and never trim it; returns whether the policy is now in force. Call it before other threads
    allocate (an arena a thread already has stays its own)."""
    if any(k in os.environ for k in OPERATOR_SETTINGS):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    if not (mallopt(M_MMAP_MAX, 0) and mallopt(M_TRIM_THRESHOLD, 2 ** 31 - 1) and mallopt(M_ARENA_MAX, 1)):
        return False
    synopsis.reuse_freed_malloc_memory()
    return True
