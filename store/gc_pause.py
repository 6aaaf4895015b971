"""Pausing the cyclic garbage collector around a burst of allocations that stay alive.

A lazy timing join (store/timing.py) builds a whole block's matches before it returns them: some
hundred thousand small objects alive at once, none in a reference cycle. Each 700 allocations
start a collection of the youngest generation, which finds them all alive and promotes them; the
older generations follow, and full collections walk the growing heap: a fifth to a quarter of the
lazy path's CPU time at 1,600 tuples/s went to the collector (gc.callbacks), against none for
Eager, whose matches leave with each row. Inside `paused()` the collector does not run; nested and
concurrent pauses (threads) keep it off until the last one ends, and it is switched back on only
if it was on when the first began.
"""
from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def paused() -> Iterator[None]:
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
