"""The server's work meter (server/driver/work_meter.py): it splits the collections run on the
calling thread into young and full ones, leaves another thread's out, and counts allocations (net of
those freed: gc's own count)."""
from __future__ import annotations

import gc
import threading

from windowstore.server.driver.work_meter import GcWorkMeter, work_meter
from windowstore.store.temporal import WorkMeter


def test_collections_on_this_thread_are_split_into_young_and_full():
    meter = work_meter()
    assert isinstance(meter, WorkMeter) and work_meter() is meter  # one per process
    before = meter.collected()
    n = meter.collections
    gc.collect(0)
    mid = meter.collected()
    assert meter.collections >= n + 1
    assert mid.young_s > before.young_s and mid.full_s == before.full_s
    gc.collect(2)
    after = meter.collected()
    assert after.full_s > mid.full_s


def test_a_collection_on_another_thread_is_not_this_thread_s():
    meter = work_meter()
    before = meter.collected()
    t = threading.Thread(target=lambda: (gc.collect(0), gc.collect(2)))
    t.start()
    t.join()
    after = meter.collected()
    assert (after.young_s, after.full_s) == (before.young_s, before.full_s)


def test_allocations_are_counted_across_collections():
    meter = GcWorkMeter()  # a meter of its own, hooked for this test only
    gc.callbacks.append(meter.on_gc)
    try:
        before = meter.collected().allocated
        kept = [[i] for i in range(5000)]  # 5,000 containers kept alive (thresholds cross several times)
        after = meter.collected().allocated
        assert after - before >= 0.9 * len(kept) and meter.collections >= 1  # net of a few freed meanwhile
    finally:
        gc.callbacks.remove(meter.on_gc)
