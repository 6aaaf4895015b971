"""The C allocator's policy in the server process: memory freed is kept for the next allocation,
not handed back to the kernel.

A sealed sub-window's columns are large (a 1 s sub-window at 8 M rows/s holds ~220 MB). glibc
serves an allocation above its mmap threshold (at most 32 MB) with a fresh mapping and unmaps it
when freed, so every seal faulted in new pages that the kernel zeroed first, while the sub-window
that slid out a moment before had just handed back as much; received payloads (a few MB each)
went the same way. With freed memory kept, a seal reuses what the sub-window that left held.
Measured on 2026-11-27: perf on the server (3 writers of 10^5-row batches, --fsync always, window
full) found zeroing faulted pages at 31% of its CPU; the store's own ingest of 5 M-row sub-windows
(5 rounds of 55 M rows) took 8k page faults instead of 286k and 0.5-2.4 s of kernel time instead
of 4.5-5.7 s; over gRPC the server's page faults per 10^5-row Append went 54-165 -> 11-14, its
throughput within that bench's noise (the writer processes there used as much CPU as the server).

One arena for every thread: glibc gives a thread that allocates while another does an arena of
its own, whose heaps are at most 64 MB each, so a large block there is mapped afresh every time
and the kept memory of the main arena is not reused. Seals run on a thread of their own
(server/driver.py): measured on 2026-11-27, a 10 M-row seal on that thread took 3,200 page faults
and 500-1,100 ms; in one arena, 1-9 faults and 116-133 ms, as on the main thread (106-109 ms).

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
