"""Sketches per sub-window after a restart (issue 32: "kept in snapshots and the log's replay"): a
replay of the write-ahead log seals every sub-window again from its rows; HLL, CPC and frequent
items come out the same bytes, a KLL sketch (random compaction, no seed in the library) would not,
so the log keeps its bytes (SealedSketches) and the replay puts them back. Checked on the engine's
own replay of the encoded log, as recovery runs it."""
from __future__ import annotations

from random import Random

import pyarrow as pa

from windowstore.store import WindowSpec, parse_query, plan_query, sketch_columns
from windowstore.txn import commands
from windowstore.txn.commands import Append, CreateStream, SealedSketches, Slide
from windowstore.txn.engine import Engine

SKETCHES = {"v": ("kll", 16), "k": ("hll", 8), "n": ("frequent", 4), "w": ("kll", 200)}


def _live() -> tuple[Engine, list]:
    rng = Random(7)
    live = Engine()
    live.apply(CreateStream("s", (("ts", "int64"), ("v", "float64"), ("k", "string"), ("n", "int64"), ("w", "int64")),
                            "ts", WindowSpec(subwindows=3, subwindow_ms=1000, clock="manual", sketches=SKETCHES), 0.0))
    for i in range(5):
        rows = 3000
        live.apply(Append("s", pa.table({"ts": [i * 1000 + j % 1000 for j in range(rows)],
                                         "v": [rng.gauss(0, 1) for _ in range(rows)],
                                         "k": [f"k{rng.randrange(500)}" for _ in range(rows)],
                                         "n": [rng.randrange(40) for _ in range(rows)],
                                         "w": [rng.randrange(10**6) for _ in range(rows)]}), "", None, float(i)))
        live.apply(Slide("s", float(i) + 0.5))
    return live, [commands.decode(commands.encode(c)) for c in live.drain()]


def _sealed(engine: Engine) -> dict[int, dict[str, bytes]]:
    window = engine.stream("s").window
    return {sub.slide: sketch_columns.to_bytes(sub.synopsis.sketches) for sub in window.youngest(window.n)}


def _replayed(log: list) -> Engine:
    again = Engine()
    for cmd in log:
        again.replay(cmd)
    return again


def test_a_replay_of_the_log_seals_every_sketch_bit_for_bit_as_before():
    live, log = _live()
    assert sum(isinstance(c, SealedSketches) for c in log) == 5  # one per slide: the KLL sketches of v and w
    before = _sealed(live)
    again = _replayed(log)
    assert _sealed(again) == before
    for text in ("SELECT APPROX_QUANTILE(v, 0.5), APPROX_QUANTILE(w, 0.9) FROM s", "SELECT APPROX_COUNT_DISTINCT(k) FROM s",
                 "SELECT APPROX_TOP_K(n, 3) FROM s"):
        answers = []
        for e in (live, again):
            txn = e.sched.submit(plan_query(parse_query(text), e.stream("s")))
            e.sched.run_until_idle()
            answers.append((txn.result.answer.rows, txn.result.answer.bounds))
        assert answers[0] == answers[1], text
    # a restarted server logs what it recovered from: the records come out again as they were
    assert [commands.encode(c) for c in again.drain()] == [commands.encode(c) for c in log]


def test_without_the_logged_bytes_only_the_kll_sketches_would_differ():
    """What the SealedSketches records are for: a replay without them rebuilds HLL and frequent
    items identically, and KLL (random compaction) differently."""
    live, log = _live()
    before = _sealed(live)
    bare = _sealed(_replayed([c for c in log if not isinstance(c, SealedSketches)]))
    for slide, sketches in before.items():
        for key in ("k:hll", "n:frequent"):
            assert bare[slide][key] == sketches[key]
    assert any(bare[slide]["v:kll"] != sketches["v:kll"] for slide, sketches in before.items())


def test_a_record_for_a_slide_no_longer_live_changes_nothing():
    live, log = _live()
    before = _sealed(live)
    old = next(c for c in log if isinstance(c, SealedSketches))  # slide 0: evicted by slide 3
    again = _replayed(log + [SealedSketches("s", old.slide, {"v:kll": old.sketches["v:kll"]}, 10.0)])
    assert old.slide not in before and _sealed(again) == before
