"""APPROXIMATE queries over the per-sub-window top-k lists (store/frequent_query.py, thesis 6.2):
the threshold form (HAVING A > t, or > f * TOTAL) against a brute-force count over the same rows
never reports a false positive, every reported key's bounds contain its true value, every key over
the threshold by more than delta is reported; the top-k form with SUM weights and WHERE on the
grouped column gives bounds that contain the truth."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from conftest import examples
from windowstore.store import parse_query
from windowstore.store.errors import QueryError
from windowstore.store.parser import to_text
from windowstore.store.planner.plan import plan_query, run_plan
from windowstore.store.stream import Stream
from windowstore.store.window import WindowSpec

SCHEMA = {"ts": "int64", "src": "string", "port": "int64", "bytes": "int64"}


def _stream(n: int, topk: int) -> Stream:
    return Stream("s", SCHEMA, WindowSpec(subwindows=n, subwindow_ms=1000, clock="manual", group_by=("src", "port"),
                                          topk=topk), created_ms=0)


def _fill(s: Stream, rng: np.random.Generator, slides: int, rows: int, keys: int) -> list[dict]:
    batches = []
    for j in range(slides):
        m = int(rng.integers(0, rows + 1))
        ranks = rng.zipf(1.3, m) % keys
        batch = {"ts": [j * 1000] * m, "src": [f"h{r}" for r in ranks], "port": (ranks * 7 % 1000).tolist(),
                 "bytes": rng.integers(0, 1500, m).tolist()}
        s.append(batch)
        s.window.slide((j + 1) * 1000)
        batches.append(batch)
    return batches[-s.spec.subwindows:]


def _truth(batches: list[dict], key: str, weight: str | None, keep=lambda k: True) -> Counter:
    out: Counter = Counter()
    for b in batches:
        for i, k in enumerate(b[key]):
            if keep(k):
                out[k] += 1 if weight is None else b[weight][i]
    return out


def _ask(s: Stream, text: str):
    return run_plan(plan_query(parse_query(text), s))


@settings(max_examples=examples(80), deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 5), st.integers(1, 12), st.sampled_from([None, "bytes"]),
       st.sampled_from(["fraction", "absolute"]), st.booleans())
def test_threshold_queries_report_no_false_positive_and_bounds_contain_the_truth(seed, n, topk, weight, how, where):
    rng = np.random.default_rng(seed)
    s = _stream(n, topk)
    batches = _fill(s, rng, int(rng.integers(1, 2 * n + 1)), 300, int(rng.integers(2, 200)))
    agg = "COUNT(*)" if weight is None else f"SUM({weight})"
    cut = f"h{int(rng.integers(0, 20))}"
    keep = (lambda k: k >= cut) if where else (lambda k: True)
    truth = _truth(batches, "src", weight, keep)
    total = sum(truth.values())
    if how == "fraction":
        f = float(rng.choice([0.001, 0.01, 0.05, 0.2]))
        threshold, clause = f * total, f"{f} * TOTAL"
    else:
        threshold = int(rng.integers(0, max(1, total // 4) + 1))
        clause = str(threshold)
    text = (f"SELECT src, {agg} FROM s {'WHERE src >= ' + repr(cut) if where else ''} GROUP BY src "
            f"HAVING {agg} > {clause} APPROXIMATE")
    a = _ask(s, text)
    assert not a.exact and a.columns == ["src", agg.lower()]
    reported = [r[0] for r in a.rows]
    assert len(set(reported)) == len(reported)
    delta = a.bounds[0][2].delta if a.bounds else None
    for (key, lower), (row, column, b) in zip(a.rows, a.bounds):
        assert truth[key] > threshold, "a false positive"
        assert b.lower == lower and b.lower <= truth[key] <= b.upper and b.delta == delta
    assert [r[1] for r in a.rows] == sorted((r[1] for r in a.rows), reverse=True)
    if a.bounds:  # every key over threshold + delta is reported
        missed = [k for k, v in truth.items() if v > threshold + delta and k not in reported]
        assert not missed
    if a.guaranteed:  # complete: exactly the keys over the threshold
        assert set(reported) == {k for k, v in truth.items() if v > threshold}


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 5), st.integers(1, 12), st.sampled_from([None, "bytes"]),
       st.integers(1, 6))
def test_top_k_with_sum_weights_and_where_on_the_grouped_column_bounds_the_truth(seed, n, topk, weight, k):
    rng = np.random.default_rng(seed)
    s = _stream(n, topk)
    batches = _fill(s, rng, int(rng.integers(1, 2 * n + 1)), 300, int(rng.integers(2, 100)))
    agg = "COUNT(*)" if weight is None else f"SUM({weight})"
    cut = int(rng.integers(0, 500))
    a = _ask(s, f"SELECT port, {agg} FROM s WHERE port < {cut} GROUP BY port ORDER BY {agg} DESC LIMIT {k} APPROXIMATE")
    truth = _truth(batches, "port", weight, lambda p: p < cut)
    assert len(a.rows) <= k
    for (key, lower), (_, _, b) in zip(a.rows, a.bounds):
        assert key < cut and b.lower == lower <= truth[key] <= b.upper
    if a.guaranteed:
        top = sorted(truth.values(), reverse=True)[:k]
        assert sorted((truth[r[0]] for r in a.rows), reverse=True) == top[:len(a.rows)]


def test_the_threshold_form_round_trips_through_the_query_text():
    text = "SELECT src, SUM(bytes) FROM s [RANGE 2000 ms] GROUP BY src HAVING SUM(bytes) > 0.01 * TOTAL APPROXIMATE"
    assert parse_query(to_text(parse_query(text))) == parse_query(text)
    assert "0.01 * TOTAL" in to_text(parse_query(text))


@pytest.mark.parametrize("text, message", [
    ("SELECT src, SUM(bytes) FROM s GROUP BY src HAVING SUM(bytes) > 0.01 * TOTAL", "cannot compare"),
    ("SELECT src, COUNT(*) FROM s WHERE bytes > 3 GROUP BY src HAVING COUNT(*) > 5 APPROXIMATE", "grouped column"),
    ("SELECT src, COUNT(*) FROM s GROUP BY src HAVING COUNT(*) > 2 * TOTAL APPROXIMATE", "between 0 and 1"),
    ("SELECT src, COUNT(*) FROM s GROUP BY src HAVING COUNT(*) < 5 APPROXIMATE", "one test"),
    ("SELECT src, COUNT(*) FROM s GROUP BY src HAVING COUNT(*) > 5 ORDER BY 2 DESC LIMIT 3 APPROXIMATE", "no ORDER BY"),
    ("SELECT bytes, COUNT(*) FROM s GROUP BY bytes HAVING COUNT(*) > 5 APPROXIMATE", "declared group-by"),
])
def test_shapes_the_lists_cannot_answer_are_refused(text, message):
    with pytest.raises(QueryError, match=message):
        plan_query(parse_query(text), _stream(2, 4))


@settings(max_examples=examples(80), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 12), st.integers(1, 6)), min_size=1, max_size=6),
       st.integers(1, 4), st.sampled_from([None, "bytes"]), st.sampled_from(["fraction", "absolute"]),
       st.integers(0, 2**32 - 1))
def test_threshold_bounds_hold_when_where_purges_whole_lists(parts, topk, weight, how, seed):
    """Sub-windows whose top-k lists hold only keys WHERE rejects (lists purged empty) still bound
    the kept keys missing from them by their delta: each part has heavy rejected keys `a...` (which
    fill its list when they outnumber topk) and light kept keys `k...`; an upper bound below a
    key's true value, a false positive, or a guaranteed answer that misses a key over the threshold
    fails."""
    rng = np.random.default_rng(seed)
    s = _stream(len(parts), topk)
    batches = []
    for j, (heavy_rows, light_keys, light_rows) in enumerate(parts):
        src = [f"a{int(i)}" for i in rng.integers(0, topk + 1, heavy_rows)]
        src += [f"k{int(i)}" for i in rng.integers(0, light_keys + 1, light_rows * light_keys)]
        batch = {"ts": [j * 1000] * len(src), "src": src, "port": [0] * len(src),
                 "bytes": [int(b) for b in rng.integers(0, 50, len(src))]}
        if src:
            s.append(batch)
        s.window.slide((j + 1) * 1000)
        batches.append(batch)
    agg = "COUNT(*)" if weight is None else f"SUM({weight})"
    truth = _truth(batches, "src", weight, lambda k: k >= "k")
    total = sum(truth.values())
    if how == "fraction":
        f = float(rng.choice([0.01, 0.05, 0.1, 0.3]))
        threshold, clause = f * total, f"{f} * TOTAL"
    else:
        threshold = int(rng.integers(0, max(1, total // 3) + 1))
        clause = str(threshold)
    a = _ask(s, f"SELECT src, {agg} FROM s WHERE src >= 'k' GROUP BY src HAVING {agg} > {clause} APPROXIMATE")
    reported = {r[0] for r in a.rows}
    for (key, lower), (_, _, b) in zip(a.rows, a.bounds):
        assert key.startswith("k") and truth[key] > threshold, "a false positive"
        assert b.lower == lower <= truth[key] <= b.upper, (key, truth[key], b)
    if a.guaranteed:
        assert reported == {k for k, v in truth.items() if v > threshold}


@settings(max_examples=examples(80), deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from("abcdef"), st.integers(1, 30), max_size=6), min_size=1, max_size=6),
       st.integers(1, 3), st.sets(st.sampled_from("abcdef")), st.integers(0, 60))
def test_algorithm_6_bounds_every_key_when_lists_are_purged_empty(counts, k, rejected, threshold):
    """frequent_items over per-part top-k lists from which a filter removed its rejected keys (so
    that some lists are purged to no key, their delta kept): every kept key's [lower, upper] holds
    its true total, and a complete answer is exactly the kept keys over the threshold."""
    from windowstore.store.frequent import frequent_items
    lists = []
    for part in counts:
        ranked = sorted(part.items(), key=lambda kv: (-kv[1], kv[0]))
        top = ranked[:k]
        delta = top[-1][1] if len(ranked) > k else 0
        top = [(key, v) for key, v in top if key not in rejected]
        lists.append((np.array([key for key, _ in top], dtype=object), np.array([v for _, v in top], dtype=np.int64),
                      delta))
    truth: Counter = Counter()
    for part in counts:
        truth.update({key: v for key, v in part.items() if key not in rejected})
    got = frequent_items(lists, threshold=threshold)
    listed = {it.key: it for it in got.items}
    for key, it in listed.items():
        assert truth[key] > threshold and it.lower <= truth[key] <= it.upper
    missing_bound = got.delta  # a kept key in no list has at most the summed deltas
    for key, v in truth.items():
        if key not in listed and all(key not in lst[0].tolist() for lst in lists):
            assert v <= missing_bound
    if got.complete:
        assert set(listed) == {key for key, v in truth.items() if v > threshold}
