"""Running per-key totals (store/key_running.py): a GROUP BY answered from them equals the raw-row
window scan after every slide, with null keys and values, magnitudes that could wrap int64,
dictionary compaction, too many keys, and a window restored from its sub-windows."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

from windowstore.store import Stream, WindowSpec, parse_query, plan_query, run_plan
from windowstore.store import key_running
from windowstore.store.window import Window

SCHEMA = {"ts": "int64", "t": "string", "k": "string", "x": "int64", "f": "float64"}
QUERIES = [
    "SELECT k, COUNT(*), COUNT(x), SUM(x), AVG(x) FROM s [RANGE {n} SUBWINDOWS] GROUP BY k ORDER BY 1",
    "SELECT k, SUM(x) FROM s [RANGE {n} SUBWINDOWS] GROUP BY k ORDER BY 2 DESC, 1 LIMIT 2",
    "SELECT k, COUNT(f), COUNT(*) FROM s [RANGE {n} SUBWINDOWS] GROUP BY k ORDER BY 1",
]
BIG = 2**62


def stream(n: int) -> Stream:
    return Stream("s", SCHEMA, WindowSpec(subwindows=n, subwindow_ms=1, clock="manual", group_by=("k",)), 0)


def assert_probe_is_the_scan(s: Stream) -> None:
    w = s.window
    for keys in w.running_keys.values():
        keys._check(w.latest, w.subs)
        # totals kept for the window: any range of it is answered from them
        assert keys.kept(w.latest) == all(w.key_totals(keys.column, n_q) is not None for n_q in range(1, w.n + 1))
    for n_q in range(1, w.n + 1):
        for text in QUERIES:
            q = parse_query(text.format(n=n_q))
            probe = plan_query(q, s)
            assert probe.access == "probe"
            scan = run_plan(plan_query(q, s, access="window")).rows
            assert run_plan(probe).rows == scan, (text, n_q)
            assert run_plan(plan_query(q, s, access="synopsis")).rows == scan, (text, n_q)


_WORDS = ["a", "b", "c", "d", "e", "f", "g"]
_rows = st.lists(st.tuples(st.sampled_from(_WORDS[:4] + [None]),
                           st.one_of(st.none(), st.integers(-9, 9), st.sampled_from([BIG, -BIG, 2**63 - 1])),
                           st.floats(-10, 10, allow_nan=False, width=32),
                           st.sampled_from(_WORDS)), max_size=8)  # t: codes k meets after larger ones


@pytest.mark.slow
@given(st.integers(1, 5), st.lists(st.tuples(_rows, st.booleans()), min_size=1, max_size=16))
def test_a_running_grouped_answer_is_the_window_scans(n, steps):
    s = stream(n)
    for j, (rows, compact) in enumerate(steps):
        if rows:
            s.append({"ts": [j] * len(rows), "t": [r[3] for r in rows], "k": [r[0] for r in rows],
                      "x": [r[1] for r in rows], "f": [r[2] for r in rows]})
        s.window.slide(0)
        if compact:
            s.compact_strings()
        assert_probe_is_the_scan(s)


def test_totals_are_kept_while_they_fit_and_come_back_once_a_big_value_has_left():
    s = stream(3)

    def slide(x):
        s.append({"ts": [0, 0], "t": ["", ""], "k": ["a", "b"], "x": [x, 1], "f": [0.0, 1.0]})
        s.window.slide(0)
        assert_probe_is_the_scan(s)
        return s.window.key_totals("k", 3)
    assert slide(5) is not None and slide(6) is not None  # small values: answered from the totals
    assert slide(BIG) is None  # they could wrap: the key synopses are merged instead
    assert slide(1) is None and slide(2) is None
    ks = slide(3)  # the big value has left the window: totals again
    assert ks is not None and ks.keys.tolist() == [s.strings.lookup("a"), s.strings.lookup("b")]
    assert ks.sums["x"].tolist() == [1 + 2 + 3, 3] and ks.counts.tolist() == [3, 3]


def test_too_many_keys_keep_no_totals(monkeypatch):
    monkeypatch.setattr(key_running, "MAX_CELLS", 4 * 20 * 3)  # (n + 1) x keys x totals: 20 keys
    s = stream(3)
    for j in range(5):
        words = [f"w{i}" for i in range(4 if j != 2 else 40)]
        s.append({"ts": [0] * len(words), "t": words, "k": words, "x": list(range(len(words))), "f": [0.0] * len(words)})
        s.window.slide(0)
        assert_probe_is_the_scan(s)
        assert (s.window.key_totals("k", 3) is None) == (j >= 2)  # 40 codes from slide 2 on


def test_a_restored_window_has_the_same_totals():
    s = stream(4)
    for j in range(7):
        s.append({"ts": [j, j], "t": ["z", "a"], "k": ["a", None], "x": [j, None], "f": [0.5, 1.5]})
        s.window.slide(0)
    w = s.window
    again = Window(w.schema, w.spec, 0)
    c = w.counters()
    again.restore([sub for sub in w.subs if sub is not None], c["latest"], c["prefix"], c["last_seal_ms"], c["base_slot"],
                  c["max_event_ms"], c["late_rows"], [], {})
    again._check()
    for n_q in range(1, 5):
        a, b = w.key_totals("k", n_q), again.key_totals("k", n_q)
        assert a is not None and b is not None
        assert a.keys.tolist() == b.keys.tolist() and a.counts.tolist() == b.counts.tolist()
        assert all(np.array_equal(a.sums[c], b.sums[c]) for c in a.sums)
        assert all(np.array_equal(a.valid[c], b.valid[c]) for c in a.valid)


def test_compacting_the_dictionary_keeps_the_null_group_apart():
    """The null group's key (-1) is not a dictionary code: compaction leaves it as it is (it had
    been renumbered through the map's last entry, merging the null group into another key)."""
    s = stream(2)
    s.append({"ts": [0, 0, 0], "t": ["", "", ""], "k": [None, "a", "b"], "x": [1, 2, 4], "f": [0.0, 0.0, 0.0]})
    s.window.slide(0)
    s.append({"ts": [0], "t": [""], "k": ["b"], "x": [8], "f": [0.0]})
    s.window.slide(0)
    s.append({"ts": [0], "t": [""], "k": ["c"], "x": [16], "f": [0.0]})
    s.window.slide(0)  # "b" of slide 0 left; "a" is no longer live: compaction renumbers
    assert s.compact_strings() >= 1
    want = [("b", 8), ("c", 16)]
    q = parse_query("SELECT k, SUM(x) FROM s GROUP BY k ORDER BY 1")
    for access in ("probe", "synopsis", "window"):
        assert run_plan(plan_query(q, s, access=access)).rows == want
    s = stream(2)
    s.append({"ts": [0, 0, 0], "t": ["", "", ""], "k": [None, None, "a"], "x": [1, 2, 4], "f": [0.0, 0.0, 0.0]})
    s.window.slide(0)
    s.compact_strings()
    for access in ("probe", "synopsis", "window"):
        assert run_plan(plan_query(q, s, access=access)).rows == [("a", 4), (None, 3)]
    top = parse_query("SELECT k, COUNT(*) FROM s GROUP BY k ORDER BY 2 DESC LIMIT 2 APPROXIMATE")
    assert run_plan(plan_query(top, s)).rows == [(None, 2), ("a", 1)]


@pytest.mark.slow
def test_keys_that_change_every_sub_window_keep_no_totals_and_slots_of_gone_keys_are_reclaimed():
    """Fresh keys in every sub-window: running totals would hold n times the key synopses' entries
    (more than KEEP_RATIO), so none are kept. Keys that stay are kept; slots of keys that left the
    window are given back at a rebuild once they are half of them."""
    s = stream(8)
    for j in range(12):
        words = [f"j{j}-{i}" for i in range(300)]
        s.append({"ts": [0] * 300, "t": [""] * 300, "k": words, "x": [1] * 300, "f": [0.0] * 300})
        s.window.slide(0)
        assert (s.window.key_totals("k", 8) is None) == (j >= 4), j
    assert_probe_is_the_scan(s)
    s = stream(4)
    for j in range(40):
        words = ["stay"] + [f"j{j // 8}-{i}" for i in range(700)]  # a new key set every 8 slides
        s.append({"ts": [0] * 701, "t": [""] * 701, "k": words, "x": [1] * 701, "f": [0.0] * 701})
        s.window.slide(0)
        assert_probe_is_the_scan(s)
    keys = s.window.running_keys["k"]
    assert s.window.key_totals("k", 4) is not None and len(keys.codes) < 3 * 701


def test_a_code_met_after_larger_ones_is_answered_in_code_order():
    s = stream(3)
    s.append({"ts": [0, 0], "t": ["m", "b"], "k": ["z", "z"], "x": [1, 2], "f": [0.0, 0.0]})  # codes: m, b, z
    s.window.slide(0)
    s.append({"ts": [0, 0], "t": ["", ""], "k": ["b", "m"], "x": [4, 8], "f": [0.0, 0.0]})  # k meets m, b after z
    s.window.slide(0)
    keys = s.window.running_keys["k"]
    assert not keys.ordered
    ks = s.window.key_totals("k", 3)
    assert ks.keys.tolist() == sorted(ks.keys.tolist())
    assert_probe_is_the_scan(s)
