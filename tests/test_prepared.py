"""An Append prepared away from the engine (store/prepared.py) is stored as the same Append
applied without it: the same stored columns, string codes, dictionary and synopses, whatever
the stream's dictionary did between the snapshot the codes came from and the apply (new strings
interned by other Appends, a compaction), and the same refusals."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import event, given, settings, strategies as st

from windowstore.store import InvalidInput, Stream, WindowSpec
from windowstore.store.dictionary import NO_STRINGS, SNAPSHOT_STRINGS
from windowstore.store.errors import OutOfRange
from windowstore.store.exact import INT64_MAX, INT64_MIN
from windowstore.txn.commands import Append, CreateStream
from windowstore.txn.engine import Engine

SCHEMA = {"ts": "int64", "k": "string", "v": "int64", "f": "float64"}
KEYS = ["a", "b", "c", "d", "e", "f", "", "ü"]


def _stream(clock: str = "manual") -> Stream:
    return Stream("s", SCHEMA, WindowSpec(subwindows=2, subwindow_ms=1000, clock=clock, group_by=("k",)), 0)


def _table(rows: list[tuple], dictionary: bool) -> pa.Table:
    """Rows (ts, k or None, v or None, f) as the SDK sends them: `k` dictionary-encoded or plain."""
    k = pa.array([r[1] for r in rows], pa.string())
    return pa.table({"ts": pa.array([r[0] for r in rows], pa.int64()), "k": k.dictionary_encode() if dictionary else k,
                     "v": pa.array([r[2] for r in rows], pa.int64()), "f": pa.array([r[3] for r in rows], pa.float64())})


def _sealed(s: Stream):
    w = s.window
    return w.seal_cut(w.cut(0))


def _same_sealed(a, b) -> None:
    """Two sealed sub-windows hold the same columns (codes included) and synopses."""
    assert sorted(a.columns) == sorted(b.columns)
    for c, x in a.columns.items():
        assert x.dtype == b.columns[c].dtype and x.tolist() == b.columns[c].tolist(), c
    assert a.synopsis.columns == b.synopsis.columns and a.synopsis.nulls == b.synopsis.nulls
    ka, kb = a.synopsis.by_key["k"], b.synopsis.by_key["k"]
    assert ka.keys.tolist() == kb.keys.tolist() and ka.counts.tolist() == kb.counts.tolist()
    assert {c: x.tolist() for c, x in ka.sums.items()} == {c: x.tolist() for c, x in kb.sums.items()}
    assert {c: x.tolist() for c, x in ka.valid.items()} == {c: x.tolist() for c, x in kb.valid.items()}


row = st.tuples(st.integers(0, 999), st.sampled_from(KEYS),
                st.one_of(st.none(), st.integers(INT64_MIN, INT64_MAX), st.integers(-100, 100)),
                st.integers(-1000, 1000).map(lambda x: x / 8))
rows = st.lists(row, min_size=1, max_size=30)


@settings(max_examples=150, deadline=None)
@given(before=st.lists(rows, max_size=3), between=st.lists(rows, max_size=2), batch=rows,
       dictionary=st.booleans(), compact=st.booleans(), null_keys=st.booleans(),
       seen=st.one_of(st.none(), st.permutations(KEYS)))
def test_a_prepared_append_is_stored_as_the_same_append_unprepared(before, between, batch, dictionary, compact,
                                                                    null_keys, seen):
    if seen is not None:  # every key interned before the snapshot, in some order
        before = [[(0, k, 0, 0.0) for k in seen], *before]
    if null_keys:  # every third key NULL (stored as "" with its validity)
        batch = [(t, None if i % 3 == 0 else k, v, f) for i, (t, k, v, f) in enumerate(batch)]
    plain, prepped = _stream(), _stream()
    for s in (plain, prepped):
        for b in before:
            s.append(_table(b, dictionary=True))
    prepared = prepped.preparer().prepare(_table(batch, dictionary))  # the snapshot of `before`'s strings
    assert prepared is not None and prepared.rows == len(batch)
    for s in (plain, prepped):
        for b in between:
            s.append(_table(b, dictionary=False))
        if compact:
            s.compact_strings()
    took = "k" in prepared.codes and prepped.strings.holds(prepared.strings)
    event(f"codes taken: {took}, dictionary-encoded: {dictionary}")
    assert plain.append(_table(batch, dictionary)) == prepped.append_checked(prepared.checked, prepared.rows, prepared)
    assert prepped.strings.values == plain.strings.values
    _same_sealed(_sealed(plain), _sealed(prepped))


def test_codes_come_from_the_snapshot_while_it_holds_and_the_new_strings_are_interned_on_apply():
    s = _stream()
    s.append(_table([(1, "a", 1, 0.0), (2, "b", 2, 0.0)], dictionary=True))
    known = s.preparer().prepare(_table([(3, "b", 3, 0.0), (4, "a", 4, 0.0)], dictionary=True))
    assert known.codes["k"].tolist() == [1, 0] and known.bounds == (3, 4)
    novel = s.preparer().prepare(_table([(5, "c", 5, 0.0), (6, "a", 6, 0.0)], dictionary=False))
    assert "k" not in novel.codes  # "c" is not in the snapshot: the engine interns it
    s.append_checked(novel.checked, novel.rows, novel)
    s.append_checked(known.checked, known.rows, known)
    assert s.strings.values == ["a", "b", "c"]
    stale = s.preparer().prepare(_table([(7, "c", 7, 0.0)], dictionary=True))
    assert stale.codes["k"].tolist() == [2]
    s.compact_strings()  # every code is live: the same numbering, but a compaction may renumber
    assert not s.strings.holds(stale.strings)
    s.append_checked(stale.checked, stale.rows, stale)
    assert s.strings.values == ["a", "b", "c"]
    assert _sealed(s).columns["k"].tolist() == [0, 1, 2, 0, 1, 0, 2]


def test_a_prepared_batch_is_refused_as_the_same_batch_unprepared():
    s = _stream("event")
    s.append(_table([(10_000, "a", 1, 0.0)], dictionary=True))
    far = _table([(10_000 + 1000 * 1000, "a", 1, 0.0)], dictionary=True)  # beyond the watermark's horizon
    prepared = s.preparer().prepare(far)
    with pytest.raises(InvalidInput, match="ahead of the watermark") as unprepared:
        s.append(far)
    with pytest.raises(InvalidInput, match="ahead of the watermark") as got:
        s.append_checked(prepared.checked, prepared.rows, prepared)
    assert str(got.value) == str(unprepared.value)
    counted = Stream("c", SCHEMA, WindowSpec(subwindows=2, subwindow_rows=10, clock="manual"), 0)
    huge = _table([(INT64_MAX, "a", 1, 0.0)], dictionary=False)  # a count-based sub-window ends one past it
    p = counted.preparer().prepare(huge)
    with pytest.raises(OutOfRange, match="beyond"):
        counted.append_checked(p.checked, p.rows, p)
    assert counted.window.buffered_rows == 0
    assert s.preparer().prepare(pa.table({"ts": [1], "k": ["a"]})) is None  # refused: the engine says why


def _engine() -> Engine:
    e = Engine()
    e.apply(CreateStream("s", SCHEMA, "ts", WindowSpec(2, 1000, None, "manual", group_by=("k",)), 0.0))
    return e


def test_the_engine_takes_a_preparation_only_under_the_streams_schema_and_logs_the_rows_alone():
    rows = [(1, "a", 1, 0.5), (2, "b", None, 1.0)]
    plain, prepped = _engine(), _engine()
    table = _table(rows, dictionary=True)
    prepared = prepped.stream("s").preparer().prepare(table)
    logged: list = []
    prepped.emit = logged.append
    plain.apply(Append("s", table, "", None, 1.0))
    prepped.apply(Append("s", table, "", None, 1.0, prepared=prepared))
    assert plain.digest() == prepped.digest()
    assert [c.prepared for c in logged] == [None] and logged[0].batch is table
    # a stream dropped and created again with another schema: the preparation is not taken
    other = Engine()
    other.apply(CreateStream("s", {**SCHEMA, "v": "float64"}, "ts", WindowSpec(2, 1000, None, "manual"), 0.0))
    other.apply(Append("s", table, "", None, 1.0, prepared=prepared))
    assert other.stream("s").window.buffered_rows == 2
    assert np.asarray(_sealed(other.stream("s")).columns["v"]).dtype == np.float64


# -- on a real server: payloads over 1 MiB are decoded and prepared on its worker threads --------------
@pytest.mark.slow
def test_large_appends_prepared_off_the_loop_answer_as_brute_force():
    from windowstore.clients import Client
    from windowstore.clients.errors import InvalidArgument
    from windowstore.server.process import ServerProcess

    rng = np.random.default_rng(26)
    n = 70_000  # over 1 MiB as Arrow: decoded and prepared on a worker thread
    sent: list[tuple[int, str, int]] = []

    def second(k: int, keys: list[str], rows: int, dictionary: bool) -> pa.Table:
        ts = k * 1000 + rng.integers(0, 1000, rows)
        src = [keys[i] for i in rng.integers(0, len(keys), rows)]
        v = rng.integers(1, 1500, rows)
        sent.extend(zip(ts.tolist(), src, v.tolist()))
        col = pa.array(src, pa.string())
        return pa.table({"ts": pa.array(ts, pa.int64()), "src": col.dictionary_encode() if dictionary else col,
                         "bytes": pa.array(v, pa.int64())})

    with ServerProcess() as srv, Client(srv.target) as ws:
        ws.create_stream("p", {"ts": "int64", "src": "string", "bytes": "int64"}, 100, 1000, clock="event",
                         group_by=["src"])
        ws.append("p", second(0, ["a", "b", "c"], 50, True))  # small: on the loop, interns a, b, c
        ws.append("p", second(1, ["c", "b", "a"], n, True))  # every string known: codes from the snapshot
        ws.append("p", second(2, ["d", "a", "e", "b"], n, False), writer_id="w", batch_id=1)  # d, e new; keyed
        ws.append("p", second(3, ["e", "d", "c"], n, True))
        with pytest.raises(InvalidArgument, match="bytes"):
            big = second(4, ["a"], n, True)
            ws.append("p", big.set_column(2, "bytes", pa.array(rng.random(n))))  # float64 where int64 is declared
        del sent[-n:]
        end = 5 * 1000
        ws.append("p", pa.table({"ts": pa.array([end], pa.int64()), "src": ["z"], "bytes": pa.array([0], pa.int64())}))
        got = ws.query("SELECT src, COUNT(*), SUM(bytes) FROM p GROUP BY src ORDER BY src", min_slide=4,
                       min_slide_wait_ms=30_000)
        assert (got.window_start_ms, got.window_end_ms) == (0, end)
    want: dict[str, list[int]] = {}
    for _, src, v in sent:
        w = want.setdefault(src, [0, 0])
        w[0] += 1
        w[1] += v
    assert [tuple(r) for r in got.rows] == [(k, c, s) for k, (c, s) in sorted(want.items())]


def test_a_large_dictionary_is_snapshot_only_while_its_arrow_form_is_built_already():
    s = Stream("s", SCHEMA, WindowSpec(subwindows=2, subwindow_ms=1000, clock="manual"), 0)
    keys = [f"k{i}" for i in range(SNAPSHOT_STRINGS + 1)]
    s.append(_table([(0, k, 0, 0.0) for k in keys], dictionary=False))
    assert s.preparer().strings is NO_STRINGS  # more strings than a snapshot builds on the loop
    assert s.preparer(strings=False).strings is NO_STRINGS
    s.append(_table([(1, k, 0, 0.0) for k in keys], dictionary=False))  # as many rows: index_in builds the Arrow form
    snap = s.preparer().strings
    assert snap.size == len(keys) and s.strings.holds(snap)
    prepared = s.preparer().prepare(_table([(2, "k7", 1, 0.0), (3, "new", 2, 0.0)], dictionary=True))
    assert "k" not in prepared.codes
    s.append_checked(prepared.checked, prepared.rows, prepared)
    assert s.strings.values[-1] == "new" and s.preparer().strings is NO_STRINGS  # added since: not built again
