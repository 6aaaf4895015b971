"""An event-time Append places each row in the sub-window of its event time, whether the batch
falls in one sub-window (buffered as it is) or spans several (grouped by slot), and counts the
rows of sub-windows already sealed as late. The oracle: the rows appended, bucketed by
ts // subwindow_ms in plain Python, against each sealed sub-window's COUNT and SUM."""
from __future__ import annotations

import random

from windowstore.store import Stream, WindowSpec, parse_query, plan_query, run_plan

SCHEMA = {"ts": "int64", "src": "string", "bytes": "int64"}
MS = 100


def test_rows_land_in_the_sub_window_of_their_event_time_one_slot_or_many():
    rng = random.Random(7)
    s = Stream("s", SCHEMA, WindowSpec(subwindows=50, subwindow_ms=MS, clock="event"), 0)
    want: dict[int, list[int]] = {}
    sealed_through = 9  # slots up to this one are sealed (their rows are late); the first batch's slot (10) is the base
    late = 0
    slot = 10
    for i in range(40):
        shape = i % 3
        if shape == 0:    # one slot: the usual batch
            ts = [slot * MS + rng.randrange(MS) for _ in range(rng.randrange(1, 20))]
        elif shape == 1:  # two or three slots
            ts = [(slot + rng.randrange(3)) * MS + rng.randrange(MS) for _ in range(rng.randrange(2, 20))]
        else:             # some rows of sealed slots among the rows of open ones
            ts = [(slot + rng.randrange(-3, 2)) * MS + rng.randrange(MS) for _ in range(rng.randrange(2, 20))]
        b = [rng.randrange(1, 1000) for _ in ts]
        res = s.append({"ts": ts, "src": ["a"] * len(ts), "bytes": b})
        n_late = sum(t // MS <= sealed_through for t in ts)
        assert (res.accepted, res.late) == (len(ts) - n_late, n_late)
        late += n_late
        for t, v in zip(ts, b):
            if t // MS > sealed_through:
                want.setdefault(t // MS, []).append(v)
        while s.window.due(0):
            sub = s.window.slide(0)
            sealed_through = sub.start_ms // MS
        slot += rng.randrange(0, 2)
    assert s.window.late_rows == late
    got = {}
    for sub in s.window.youngest(s.window.latest + 1):
        got[sub.start_ms // MS] = (sub.rows, int(sub.columns["bytes"].sum()))
    assert got, "some sub-windows were sealed"
    for k, (n, total) in got.items():
        assert (n, total) == (len(want.get(k, [])), sum(want.get(k, []))), k
    answer = run_plan(plan_query(parse_query(f"SELECT COUNT(*), SUM(bytes) FROM s [RANGE {len(got)} SUBWINDOWS]"),
                                 s, "window")).rows
    sealed = [v for k in got for v in want.get(k, [])]
    assert answer == [(len(sealed), sum(sealed))]


def test_an_append_given_its_checked_bounds_places_rows_as_one_checked_inside():
    """Stream's path (check_append's (min, max) handed to append: one pass each over the times)
    and Window.append checking by itself leave twin windows in the same state, late rows included."""
    import numpy as np

    rng = random.Random(11)
    spec = WindowSpec(subwindows=50, subwindow_ms=MS, clock="event")
    a, b = Stream("a", SCHEMA, spec, 0), Stream("b", SCHEMA, spec, 0)
    slot = 10
    for i in range(60):
        ts = np.array([(slot + rng.randrange(-3, 3)) * MS + rng.randrange(MS) for _ in range(rng.randrange(1, 20))],
                      dtype=np.int64)
        cols = {"ts": ts, "src": np.zeros(len(ts), dtype=np.int32), "bytes": np.arange(len(ts), dtype=np.int64)}
        got_a = a.window.append(dict(cols), len(ts), checked=True, bounds=a.window.check_append(ts))
        got_b = b.window.append(dict(cols), len(ts))
        assert got_a == got_b
        if i % 4 == 3:
            slot += 1
            while a.window.due(0):
                a.window.slide(0)
            while b.window.due(0):
                b.window.slide(0)
        assert (a.window.latest, a.window.buffered_rows, a.window.late_rows) == \
            (b.window.latest, b.window.buffered_rows, b.window.late_rows)
    assert a.window.late_rows > 0  # some batches had rows of sealed sub-windows
    assert [(s.rows, s.start_ms) for s in a.window.youngest(a.window.n)] == \
        [(s.rows, s.start_ms) for s in b.window.youngest(b.window.n)]
