"""store/gc_pause.py: the collector is off inside a pause, nested or from two threads, and comes
back as it was; a lazy timing join's block runs inside one."""
from __future__ import annotations

import gc
import threading

from windowstore.store import gc_pause
from windowstore.store import timing as T


def test_pauses_nest_and_restore_the_collector_as_it_was():
    assert gc.isenabled()
    with gc_pause.paused():
        assert not gc.isenabled()
        with gc_pause.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still holds
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_pause.paused():
            pass
        assert not gc.isenabled()  # it was off: a pause does not switch it on
    finally:
        gc.enable()


def test_overlapping_pauses_from_two_threads_leave_the_collector_on():
    inside, release = threading.Event(), threading.Event()

    def hold():
        with gc_pause.paused():
            inside.set()
            release.wait(30)

    t = threading.Thread(target=hold)
    t.start()
    assert inside.wait(30)
    with gc_pause.paused():
        pass
    assert not gc.isenabled()  # the other thread's pause is still open
    release.set()
    t.join(30)
    assert gc.isenabled()


def test_a_lazy_block_runs_with_the_collector_paused():
    seen = []

    class Probe(T.LazyCorrelator):
        def _block(self, side, bases, tgt, out):
            seen.append(gc.isenabled())
            super()._block(side, bases, tgt, out)

    c = Probe(T.mutual(500, 0.8), 20, 200, block=2, interval=None)
    c.insert("left", T.Row(1, 0, 100), 100)
    out = c.insert("right", T.Row(2, 10, 110), 110)
    assert [m.key() for m in out] == [(1, 2)] and seen == [False, False] and gc.isenabled()
