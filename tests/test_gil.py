"""store/gil.py: large NumPy steps in slices give the results of the whole call, and no NumPy call
that holds the GIL sees more than a slice."""
from __future__ import annotations

import types

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, strategies as st

from windowstore.store import Stream, WindowSpec, gil
from windowstore.store.exact import INT64_MAX, INT64_MIN, grouped_sum

int64s = st.one_of(st.integers(INT64_MIN, INT64_MAX), st.integers(-100, 100))


@pytest.fixture
def small_slices(monkeypatch):
    monkeypatch.setattr(gil, "SLICE_ROWS", 3)


@pytest.fixture
def calls(monkeypatch):
    """The rows each np.bincount / np.add.at call of store/gil.py is given."""
    seen = []

    def bincount(bins, weights=None, minlength=0):
        seen.append(("bincount", len(bins), minlength))
        return np.bincount(bins, weights=weights, minlength=minlength)

    def at(out, index, values):
        seen.append(("add.at", len(index), len(out)))
        np.add.at(out, index, values)

    monkeypatch.setattr(gil, "np", types.SimpleNamespace(bincount=bincount, add=types.SimpleNamespace(at=at)))
    return seen


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(-1000, 1000)), max_size=40))
def test_bincount_counts_and_sums_as_one_call(pairs):
    gil_rows, gil.SLICE_ROWS = gil.SLICE_ROWS, 3
    try:
        bins = np.array([g for g, _ in pairs], dtype=np.intp)
        weights = np.array([w / 2 for _, w in pairs], dtype=np.float64)  # halves: float sums exact
        counts, sums = gil.bincount(bins, 7), gil.bincount(bins, 7, weights)
    finally:
        gil.SLICE_ROWS = gil_rows
    assert counts.tolist() == np.bincount(bins, minlength=7).tolist()
    assert sums.tolist() == np.bincount(bins, weights=weights, minlength=7).tolist()


@given(st.lists(st.tuples(st.integers(0, 4), int64s), max_size=60))
def test_grouped_sums_taken_in_slices_are_exact(pairs):
    gil_rows, gil.SLICE_ROWS = gil.SLICE_ROWS, 3
    try:
        inverse = np.array([g for g, _ in pairs], dtype=np.int64)
        values = np.array([v for _, v in pairs], dtype=np.int64)
        got = grouped_sum(inverse, values, 5).tolist()
    finally:
        gil.SLICE_ROWS = gil_rows
    assert got == [sum(v for g, v in pairs if g == k) for k in range(5)]


def test_no_call_sees_more_than_a_slice_unless_the_groups_are_more(small_slices, calls):
    bins = np.arange(20, dtype=np.intp) % 2
    assert gil.bincount(bins, 2).tolist() == [10, 10]
    out = np.zeros(2, dtype=np.int64)
    gil.add_at(out, bins, np.ones(20, dtype=np.int64))
    assert out.tolist() == [10, 10]
    assert len(calls) == 14 and all(n <= 3 for _, n, _ in calls)
    calls.clear()
    # 10 groups: a slice holds 10 rows, so there is not one output array per 3 rows
    assert gil.bincount(np.arange(20, dtype=np.intp) % 10, 10).tolist() == [2] * 10
    assert [n for _, n, _ in calls] == [10, 10]


def _sealed(rows: int, seed: int):
    rng = np.random.default_rng(seed)
    s = Stream("s", {"ts": "int64", "k": "string", "v": "int64", "f": "float64"},
               WindowSpec(subwindows=2, subwindow_ms=1000, clock="manual", group_by=("k",)), 0)
    for _ in range(3):
        nulls = rng.random(rows) < 0.2
        s.append(pa.table({"ts": pa.array(rng.integers(0, 1000, rows)),
                           "k": pa.array([f"key{i}" for i in rng.integers(0, 7, rows)]),
                           "v": pa.array(rng.integers(-10**12, 10**12, rows), mask=nulls),
                           "f": pa.array(rng.integers(-8, 8, rows) / 4.0, mask=nulls[::-1].copy())}))
    w = s.window
    return w.seal_cut(w.cut(0))


@pytest.mark.parametrize("seed", [1, 2])
def test_a_seal_in_slices_builds_the_same_sub_window(seed, monkeypatch):
    whole = _sealed(50, seed)
    monkeypatch.setattr(gil, "SLICE_ROWS", 7)
    sliced = _sealed(50, seed)
    assert sliced.synopsis.columns == whole.synopsis.columns and sliced.synopsis.nulls == whole.synopsis.nulls
    for c in whole.columns:
        assert sliced.columns[c].tolist() == whole.columns[c].tolist()
    a, b = whole.synopsis.by_key["k"], sliced.synopsis.by_key["k"]
    assert b.keys.tolist() == a.keys.tolist() and b.counts.tolist() == a.counts.tolist()
    assert {c: x.tolist() for c, x in b.sums.items()} == {c: x.tolist() for c, x in a.sums.items()}
    assert {c: x.tolist() for c, x in b.valid.items()} == {c: x.tolist() for c, x in a.valid.items()}
