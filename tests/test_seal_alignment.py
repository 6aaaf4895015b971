"""A sealed sub-window's columns are aligned to their type, whatever the rows came in.

Columns decoded from a request's Arrow IPC bytes are views into those bytes, at whatever offset
the payload sits in the message: often not a multiple of 8. NumPy's indexed loops (np.add.at, the
per-key sums of a seal and of a scan) take a slow path on unaligned values. Window.seal copies an
unaligned column once; the synopses are those of the same rows aligned."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings, strategies as st

from windowstore.server.payload import read_table
from windowstore.store import Stream, WindowSpec
from windowstore.store.exact import INT64_MAX, INT64_MIN

SCHEMA = {"ts": "int64", "k": "string", "v": "int64", "f": "float64"}


def _unaligned(a: np.ndarray) -> np.ndarray:
    """A copy of `a` one byte past an aligned address."""
    raw = np.zeros(a.nbytes + 1, dtype=np.uint8)
    out = raw[1:].view(a.dtype)
    out[:] = a
    assert not out.flags.aligned or a.dtype.itemsize == 1
    return out


def _stream() -> Stream:
    return Stream("s", SCHEMA, WindowSpec(subwindows=2, subwindow_ms=1000, clock="manual", group_by=("k",)), 0)


def _sealed(batches: list[dict], shift: bool):
    s = _stream()
    for b in batches:
        cols = {c: (_unaligned(a) if shift and c != "k" else a) for c, a in b.items()}
        s.append(cols)
    w = s.window
    return w.seal_cut(w.cut(0))


rows = st.lists(st.tuples(st.integers(0, 999), st.sampled_from(["a", "b", "c", "d"]),
                          st.one_of(st.integers(INT64_MIN, INT64_MAX), st.integers(-100, 100)),
                          st.integers(-1000, 1000).map(lambda x: x / 8)), min_size=1, max_size=40)


@settings(max_examples=60)
@given(st.lists(rows, min_size=1, max_size=3))
def test_a_sub_window_sealed_from_unaligned_columns_is_aligned_and_the_same(parts):
    batches = [{"ts": np.array([r[0] for r in p], dtype=np.int64), "k": np.array([r[1] for r in p], dtype=object),
                "v": np.array([r[2] for r in p], dtype=np.int64), "f": np.array([r[3] for r in p])} for p in parts]
    plain, shifted = _sealed(batches, shift=False), _sealed(batches, shift=True)
    for c, a in shifted.columns.items():
        assert a.flags.aligned and not a.flags.writeable, c
        assert a.dtype == plain.columns[c].dtype and a.tolist() == plain.columns[c].tolist()
    assert shifted.synopsis.columns == plain.synopsis.columns and shifted.synopsis.nulls == plain.synopsis.nulls
    a, b = plain.synopsis.by_key["k"], shifted.synopsis.by_key["k"]
    assert b.keys.tolist() == a.keys.tolist() and b.counts.tolist() == a.counts.tolist()
    assert {c: x.tolist() for c, x in b.sums.items()} == {c: x.tolist() for c, x in a.sums.items()}
    assert {c: x.tolist() for c, x in b.valid.items()} == {c: x.tolist() for c, x in a.valid.items()}
    assert plain.synopsis.prefix_after == shifted.synopsis.prefix_after


def test_columns_decoded_from_a_request_at_an_odd_offset_are_sealed_aligned():
    table = pa.table({"ts": pa.array(np.arange(1000, dtype=np.int64)), "k": pa.array(["x", "y"] * 500),
                      "v": pa.array(np.arange(1000, dtype=np.int64) * 3, mask=np.arange(1000) % 7 == 0),
                      "f": pa.array(np.linspace(0.0, 1.0, 1000))})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    ipc = memoryview(b"\x00" + sink.getvalue().to_pybytes())[1:]  # the payload one byte into the message
    s = _stream()
    checked, n = s.schema.check(read_table(ipc, 1 << 30))
    assert not checked["ts"].flags.aligned, "the decoded column is a view into the payload"
    s.append_checked(checked, n)
    w = s.window
    sub = w.seal_cut(w.cut(0))
    assert all(a.flags.aligned for a in sub.columns.values())
    assert sub.columns["ts"].tolist() == list(range(1000))
    assert sub.synopsis.columns["v"].sum == sum(3 * i for i in range(1000) if i % 7)
    assert sub.synopsis.by_key["k"].sums["ts"].tolist() == [sum(range(0, 1000, 2)), sum(range(1, 1000, 2))]
