"""Algorithm 6's threshold query (store/frequent.py) against a brute-force count of the raw rows."""
from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from windowstore.store.errors import InvalidInput
from windowstore.store.frequent import frequent_items, frequent_items_arrays, weighted_top_k
from windowstore.store.synopsis import TopKList, build_synopsis

pytestmark = pytest.mark.slow  # servers in subprocesses, or long property runs: make test-fast skips them

# A window: sub-windows of (key, bytes) rows; a few keys so that lists overlap and miss keys.
rows = st.tuples(st.integers(0, 9), st.integers(0, 1500))
windows = st.lists(st.lists(rows, min_size=1, max_size=30), min_size=1, max_size=12)


def synopses(window, k):
    """The key synopsis of each sub-window, as the store builds it at sealing."""
    out = []
    for sub in window:
        cols = {"key": np.array([r[0] for r in sub], dtype=np.int64),
                "bytes": np.array([r[1] for r in sub], dtype=np.int64)}
        out.append(build_synopsis(cols, len(sub), ["bytes"], ("key",), k, set()).by_key["key"])
    return out


def truth(window, weighted):
    c = Counter()
    for sub in window:
        for key, b in sub:
            c[key] += b if weighted else 1
    return c


def lists_of(window, k, weighted):
    summaries = synopses(window, k)
    return [weighted_top_k(s, "bytes", k) if weighted else s.topk for s in summaries]


def threshold_args(data, total, delta):
    mode = data.draw(st.sampled_from(["delta", "absolute", "fraction"]))
    if mode == "delta":
        return {}, delta
    if mode == "absolute":
        t = data.draw(st.integers(0, max(total, 0)))
        return {"threshold": t}, t
    f = data.draw(st.sampled_from([0.0, 0.01, 0.05, 0.1, 0.2, 0.5, 1.0]))
    return {"fraction": f, "total": total}, f * total


@settings(max_examples=300, deadline=None)
@given(window=windows, k=st.integers(1, 4), weighted=st.booleans(), data=st.data())
def test_no_false_positive_bounds_hold_and_far_items_found(window, k, weighted, data):
    true = truth(window, weighted)
    total = sum(true.values())
    lists = lists_of(window, k, weighted)
    delta = sum(t.delta for t in lists)
    kwargs, thr = threshold_args(data, total, delta)
    ans = frequent_items(lists, **kwargs)
    assert ans.delta == delta and ans.threshold == thr
    reported = set(ans.keys)
    assert len(reported) == len(ans.items)
    for item in ans.items:
        assert true[item.key] > thr, "false positive"
        assert item.lower <= true[item.key] <= item.upper
        assert item.lower > thr
    for key, value in true.items():
        if value > thr + delta:
            assert key in reported, f"key {key} = {value} > threshold {thr} + delta {delta} was missed"
    if ans.complete:
        assert reported == {key for key, value in true.items() if value > thr}
    lowers = [i.lower for i in ans.items]
    assert lowers == sorted(lowers, reverse=True)


@settings(max_examples=200, deadline=None)
@given(window=windows, k=st.integers(1, 4), weighted=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_merge_order_does_not_matter(window, k, weighted, seed):
    lists = lists_of(window, k, weighted)
    shuffled = list(lists)
    random.Random(seed).shuffle(shuffled)
    assert frequent_items(shuffled, threshold=0) == frequent_items(lists, threshold=0)
    assert frequent_items(shuffled) == frequent_items(lists)


@settings(max_examples=200, deadline=None)
@given(window=windows, k=st.integers(1, 4))
def test_tuples_and_stored_lists_agree(window, k):
    lists = lists_of(window, k, False)
    as_tuples = [(t.keys, t.counts, t.delta) for t in lists]
    assert frequent_items(as_tuples, threshold=1) == frequent_items(lists, threshold=1)


@settings(max_examples=200, deadline=None)
@given(window=st.lists(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 400).map(lambda q: q / 4)),
                                min_size=1, max_size=20), min_size=1, max_size=10),
       k=st.integers(1, 3))
def test_float_weights_quarter_units(window, k):
    """Float weights (quarters: every sum is exact in binary) keep the same guarantees."""
    true = truth(window, True)
    lists = []
    for sub in window:
        c = Counter()
        for key, w in sub:
            c[key] += w
        ranked = sorted(c.items(), key=lambda kv: -kv[1])
        top = ranked[:k]
        delta = top[-1][1] if len(ranked) > k else 0.0
        lists.append((np.array([kv[0] for kv in top]), np.array([kv[1] for kv in top], dtype=np.float64), delta))
    ans = frequent_items(lists, threshold=0.5)
    for item in ans.items:
        assert true[item.key] > 0.5 and item.lower <= true[item.key] <= item.upper
    for key, value in true.items():
        if value > 0.5 + ans.delta:
            assert key in ans.keys


def test_worked_example():
    # Three sub-windows, k = 2: a listed 5+4+0, b 3+0+6, c 0+3+2 (never below any delta).
    lists = [TopKList(np.array([1, 2]), np.array([5, 3]), 3),   # a=1, b=2
             TopKList(np.array([1, 3]), np.array([4, 3]), 3),   # c=3
             TopKList(np.array([2, 3]), np.array([6, 2]), 2)]
    ans = frequent_items(lists)  # threshold = delta = 8
    assert ans.delta == 8 and ans.threshold == 8
    assert [(i.key, i.lower, i.upper) for i in ans.items] == [(1, 9, 11), (2, 9, 12)]
    assert ans.complete  # c is at most 5 + 3 = 8 and a key on no list at most delta = 8
    ans = frequent_items(lists, threshold=7)
    assert ans.keys == [1, 2] and not ans.complete  # c may be 8 > 7
    ans = frequent_items(lists, threshold=9)
    assert ans.keys == [] and not ans.complete  # a and b may be above 9
    ans = frequent_items(lists, threshold=12)
    assert ans.keys == [] and ans.complete


def test_complete_when_lists_hold_every_key():
    lists = [TopKList(np.array([1, 2]), np.array([5, 1]), 0), TopKList(np.array([2]), np.array([7]), 0)]
    ans = frequent_items(lists, threshold=5)
    assert ans.delta == 0 and ans.complete
    assert [(i.key, i.lower, i.upper) for i in ans.items] == [(2, 8, 8)]


def test_empty_window():
    ans = frequent_items([])
    assert ans.items == [] and ans.delta == 0 and ans.complete
    ans = frequent_items([TopKList(np.empty(0, np.int64), np.empty(0, np.int64), 0)], threshold=0)
    assert ans.items == [] and ans.complete


@pytest.mark.parametrize("lists, kwargs, words", [
    ([(np.array([1]), np.array([-1]), 0)], {}, "negative"),
    ([(np.array([1, 2]), np.array([5, 1]), 3)], {}, "below its delta"),
    ([(np.array([1, 1]), np.array([5, 4]), 4)], {}, "twice"),
    ([(np.array([1]), np.array([5]), -1)], {}, "delta"),
    ([(np.array([1]), np.array([5]), 0)], {"threshold": 1, "fraction": 0.5, "total": 5}, "not both"),
    ([(np.array([1]), np.array([5]), 0)], {"fraction": 0.5}, "total"),
    ([(np.array([1]), np.array([5]), 0)], {"fraction": 1.5, "total": 5}, "fraction"),
    ([(np.array([1]), np.array([5]), 0)], {"threshold": float("nan")}, "threshold"),
    ([(np.array([1]), np.array([5]), 0)], {"threshold": -1}, "non-negative"),
    ([(np.array([1, 2]), np.array([5]), 0)], {}, "one length"),
])
def test_bad_input_is_invalid_input_naming_the_problem(lists, kwargs, words):
    with pytest.raises(InvalidInput, match=words):
        frequent_items(lists, **kwargs)


def test_arrays_form_needs_parallel_sequences():
    with pytest.raises(InvalidInput, match="one entry per list"):
        frequent_items_arrays([np.array([1])], [], [0])


def test_weighted_top_k_ranks_by_sum_and_refuses_negative_sums():
    cols = {"key": np.array([1, 1, 2, 3, 3, 3], dtype=np.int64),
            "bytes": np.array([100, 100, 900, 1, 1, 1], dtype=np.int64)}
    s = build_synopsis(cols, 6, ["bytes"], ("key",), 2, set()).by_key["key"]
    t = weighted_top_k(s, "bytes", 2)
    assert t.keys.tolist() == [2, 1] and t.counts.tolist() == [900, 200] and t.delta == 200
    assert weighted_top_k(s, "bytes", 3).delta == 0
    cols["bytes"] = np.array([1, 1, -5, 1, 1, 1], dtype=np.int64)
    s = build_synopsis(cols, 6, ["bytes"], ("key",), 2, set()).by_key["key"]
    with pytest.raises(InvalidInput, match="bytes"):
        weighted_top_k(s, "bytes", 2)
    with pytest.raises(InvalidInput, match="nope"):
        weighted_top_k(s, "nope", 2)
