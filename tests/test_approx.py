"""APPROX_QUANTILE, APPROX_COUNT_DISTINCT and APPROX_TOP_K answered from the sketches a stream
declares (store/approx.py, store/sketch_columns.py): the true value, computed by DuckDB over the
window's rows, lies within each answer's stated bound in at least the stated fraction of random
cases; merging the sub-windows' sketches does not depend on their order; a column without a
declared sketch is refused naming it and saying how to declare one."""
from __future__ import annotations

from decimal import Decimal
from types import SimpleNamespace

import duckdb
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from conftest import examples
from windowstore.store import parse_query
from windowstore.store.functions import FUNCTIONS as FUNCTIONS_BY_NAME
from windowstore.store.errors import InvalidInput, QueryError
from windowstore.store.planner.plan import plan_query, run_plan
from windowstore.store.sketch_columns import FrequentSketch, build_one
from windowstore.store.stream import Stream
from windowstore.store.window import WindowSpec

SCHEMA = {"ts": "int64", "bytes": "int64", "lat": "float64", "src": "string", "port": "int64"}
CASES = 1000


def _stream(sketches: dict, n: int = 4) -> Stream:
    return Stream("s", SCHEMA, WindowSpec(subwindows=n, subwindow_ms=1000, clock="manual", sketches=sketches),
                  created_ms=0)


def _fill(s: Stream, rng: np.random.Generator, slides: int, rows: int) -> dict[str, np.ndarray]:
    """Append random rows and slide `slides` times; the window's rows (those of the youngest n)."""
    kept = []
    for j in range(slides):
        m = int(rng.integers(0, rows + 1))
        spread = int(rng.integers(1, 4 * rows + 2))
        batch = {"ts": np.full(m, j * 1000, dtype=np.int64),
                 "bytes": rng.zipf(1.3, m).astype(np.int64) % 1_000_000 if j % 2 else rng.integers(0, spread, m),
                 "lat": rng.normal(50, 20, m),
                 "src": [f"h{i}" for i in rng.integers(0, spread, m)],
                 "port": rng.zipf(1.6, m).astype(np.int64) % 5000}
        s.append(batch)
        s.window.slide((j + 1) * 1000)
        kept.append(batch)
    kept = kept[-s.spec.subwindows:]
    return {c: np.concatenate([np.asarray(b[c]) for b in kept]) if kept else np.empty(0) for c in SCHEMA}


def _ask(s: Stream, text: str):
    return run_plan(plan_query(parse_query(text), s))


@pytest.mark.slow
@pytest.mark.long  # 1,000 cases: make test-long
def test_the_truth_lies_within_the_stated_bound_in_the_stated_fraction_of_random_cases():
    rng = np.random.default_rng(20261127)
    con = duckdb.connect()
    held = {"kll": 0, "hll": 0, "cpc": 0}
    tried = {"kll": 0, "hll": 0, "cpc": 0}
    stated = {}
    cases = 0
    for case in range(CASES):
        k = int(rng.choice([32, 100, 200]))
        lg = int(rng.integers(6, 13))
        distinct = "hll" if case % 2 else "cpc"
        s = _stream({"bytes": ("kll", k), "src": (distinct, lg), "port": ("frequent", 6)}, n=int(rng.integers(1, 5)))
        rows = _fill(s, rng, int(rng.integers(1, 7)), int(rng.choice([50, 2000, 8000])))
        if not len(rows["bytes"]):
            continue
        cases += 1
        q = float(rng.choice([0.01, 0.1, 0.25, 0.5, 0.9, 0.99, float(round(rng.random(), 3))]))
        a = _ask(s, f"SELECT APPROX_QUANTILE(bytes, {q}), APPROX_COUNT_DISTINCT(src) FROM s")
        assert not a.exact and [(r, c) for r, c, _ in a.bounds] == [(0, 0), (0, 1)]
        (value, estimate), = a.rows
        qb, db = a.bounds[0][2], a.bounds[1][2]
        con.register("w", {"bytes": rows["bytes"], "src": np.asarray(rows["src"], dtype=object)})
        below, at_most, n, truth = con.execute(
            "SELECT count(*) FILTER (WHERE bytes < ?), count(*) FILTER (WHERE bytes <= ?), count(*), "
            "count(DISTINCT src) FROM w", [value, value]).fetchone()
        # the value's true rank range [below/n, at_most/n] meets q +- rank_error
        held["kll"] += below / n <= q + qb.rank_error and at_most / n >= q - qb.rank_error
        held[distinct] += db.lower <= truth <= db.upper
        tried["kll"] += 1
        tried[distinct] += 1
        assert db.lower <= estimate <= db.upper + 1
        stated.update(kll=qb.confidence, **{distinct: db.confidence})
        # APPROX_TOP_K: every listed value's true count lies in its bounds (always: confidence 1)
        top = _ask(s, "SELECT APPROX_TOP_K(port, 5) FROM s")
        true_counts = dict(con.execute("SELECT port, count(*) FROM (SELECT unnest(?) AS port) GROUP BY port",
                                       [rows["port"].tolist()]).fetchall())
        for (key,), (_, _, b) in zip(top.rows, top.bounds):
            assert b.confidence == 1 and b.lower <= true_counts[key] <= b.upper
    print(f"cases {cases}: within the bound {held} of {tried}, stated {stated}")
    assert cases > 0.9 * CASES and tried["kll"] == cases
    for kind, hits in held.items():  # (hll and cpc take the odd and even cases)
        assert hits >= stated[kind] * tried[kind], (kind, hits, tried[kind], stated[kind])


def test_the_stated_bounds_are_the_librarys_and_the_plan_says_sketches():
    s = _stream({"bytes": ("kll", 200), "src": ("hll", 12)})
    _fill(s, np.random.default_rng(1), 3, 3000)
    plan = plan_query(parse_query("SELECT APPROX_QUANTILE(bytes, 0.5), COUNT(*) FROM s"), s)
    assert [a[2] for a in plan.explain()["aggregates"]] == ["sketches", "synopses"]
    a = _ask(s, "SELECT APPROX_QUANTILE(bytes, 0.5), APPROX_COUNT_DISTINCT(src) FROM s")
    import datasketches as ds
    assert a.bounds[0][2].rank_error == ds.kll_doubles_sketch(200).normalized_rank_error(False)
    assert a.bounds[0][2].confidence == 0.99 and a.bounds[1][2].confidence == 0.9545
    assert a.types == ["int64", "int64"] and isinstance(a.rows[0][0], int)


parts_strategy = st.lists(st.lists(st.integers(-50, 3000), max_size=600), min_size=1, max_size=6)


@settings(max_examples=examples(60), deadline=None)
@given(parts_strategy, st.randoms(use_true_random=False), st.sampled_from(["kll", "hll", "cpc", "frequent"]),
       st.floats(0, 1))
def test_merging_does_not_depend_on_the_order_of_the_sub_windows(parts, rand, kind, q):
    """The finish of the same sketches in any order gives the same answer and bounds."""
    size = {"kll": 16, "hll": 8, "cpc": 8, "frequent": 3}[kind]
    sketches = [build_one(kind, size, np.asarray(p, dtype=np.int64), "int64", None) for p in parts]
    shuffled = sketches[:]
    rand.shuffle(shuffled)
    fn = FUNCTIONS_BY_NAME[{"kll": "approx_quantile", "hll": "approx_count_distinct", "cpc": "approx_count_distinct",
                            "frequent": "approx_top_k"}[kind]]

    B = SimpleNamespace(sketch=(kind, size), input_type="int64", q=Decimal(repr(q)) if kind == "kll" else Decimal(3))
    assert fn.finish(B, sketches, None) == fn.finish(B, shuffled, None)
    if kind == "frequent":  # and the bounds hold for every listed value
        truth = np.unique(np.concatenate([np.asarray(p, dtype=np.int64) for p in parts]), return_counts=True)
        counts = dict(zip(truth[0].tolist(), truth[1].tolist()))
        for key, b in fn.finish(B, shuffled, None).value:
            assert b.lower <= counts[key] <= b.upper


def test_a_column_without_a_declared_sketch_is_refused_naming_it_and_how_to_declare_one():
    s = _stream({"bytes": ("hll", 10)})
    with pytest.raises(QueryError) as e:
        plan_query(parse_query("SELECT APPROX_QUANTILE(bytes, 0.5) FROM s"), s)
    assert e.value.column == "bytes" and "kll" in str(e.value) and "sketches=" in str(e.value) and "--sketch" in str(e.value)
    with pytest.raises(QueryError, match="'lat'") as e:
        plan_query(parse_query("SELECT APPROX_COUNT_DISTINCT(lat) FROM s"), s)
    assert e.value.column == "lat"
    for text, what in [("SELECT APPROX_COUNT_DISTINCT(bytes) FROM s WHERE port = 1", "WHERE"),
                       ("SELECT src, APPROX_COUNT_DISTINCT(bytes) FROM s GROUP BY src", "GROUP BY"),
                       ("SELECT APPROX_QUANTILE(bytes, 1.5) FROM s", "between 0 and 1")]:
        with pytest.raises(QueryError, match=what):
            plan_query(parse_query(text), s)


@pytest.mark.parametrize("sketches, message", [
    ({"nope": "kll"}, "unknown column 'nope'"),
    ({"src": "kll"}, "kll sketch takes a column of type"),
    ({"bytes": ("kll", 3)}, "from 8 to 65535"),
    ({"bytes": "theta"}, "unknown sketch kind"),
    ({"ts": "hll"}, "event-time column"),
])
def test_bad_sketch_declarations_are_refused_naming_the_column(sketches, message):
    with pytest.raises(InvalidInput, match=message):
        _stream(sketches)


def test_a_column_takes_one_sketch_of_each_family():
    assert _stream({"src": ["hll", ("frequent", 5)]}).spec.sketches == (("src", "frequent", 5), ("src", "hll", 12))
    with pytest.raises(InvalidInput, match="two APPROX_COUNT_DISTINCT sketches"):
        _stream({"src": ["hll", "cpc"]})


def test_string_sketches_take_text_not_codes_and_survive_string_compaction():
    s = _stream({"src": ("frequent", 4)}, n=2)
    s.append({"ts": [0] * 4, "bytes": [1] * 4, "lat": [0.0] * 4, "src": ["a", "b", "b", "c"], "port": [1] * 4})
    s.window.slide(1000)
    s.append({"ts": [1000] * 3, "bytes": [1] * 3, "lat": [0.0] * 3, "src": ["b", "z", "z"], "port": [1] * 3})
    s.window.slide(2000)
    before = _ask(s, "SELECT APPROX_TOP_K(src, 2) FROM s")
    assert before.rows == [("b",), ("z",)] and [b.lower for _, _, b in before.bounds] == [3, 2]
    s.window.remap_strings(s.strings.compact(s.window.live_codes()))
    assert _ask(s, "SELECT APPROX_TOP_K(src, 2) FROM s").rows == before.rows
    assert isinstance(FrequentSketch.from_bytes(s.window.youngest(1)[0].synopsis.sketches["src:frequent"].to_bytes(),
                                                "string", 4), FrequentSketch)


def test_an_empty_window_answers_null_with_its_bound():
    s = _stream({"bytes": "kll", "src": "cpc", "port": "frequent"})
    a = _ask(s, "SELECT APPROX_QUANTILE(bytes, 0.5), APPROX_COUNT_DISTINCT(src), COUNT(*) FROM s")
    assert a.rows == [(None, 0, 0)]
    assert _ask(s, "SELECT APPROX_TOP_K(port, 3) FROM s").rows == []


def _engine_with_sketches(seed: int):
    """An engine whose stream declares every kind of sketch, filled with sub-windows large enough
    that KLL compacts (with random bits), and the log it wrote."""
    import pyarrow as pa
    from windowstore.txn.commands import Append, CreateStream, Slide
    from windowstore.txn.engine import Engine

    spec = WindowSpec(subwindows=3, subwindow_ms=1000, clock="manual",
                      sketches={"bytes": ("kll", 32), "src": ("hll", 8), "lat": ("cpc", 8), "port": ("frequent", 4)})
    log = [CreateStream("s", tuple(SCHEMA.items()), "ts", spec, 0.0)]
    rng = np.random.default_rng(seed)
    for j in range(4):
        m = 5000
        batch = pa.table({"ts": np.full(m, j * 1000, dtype=np.int64), "bytes": rng.integers(0, 10**6, m),
                          "lat": rng.normal(50, 20, m), "src": [f"h{i}" for i in rng.integers(0, 4000, m)],
                          "port": rng.zipf(1.4, m).astype(np.int64) % 3000})
        log += [Append("s", batch, "", None, float(j * 1000)), Slide("s", float(j * 1000 + 999))]
    engine = Engine()
    for cmd in log:
        engine.apply(cmd)
    engine.sched.run_until_idle()
    return engine, engine.drain()  # the log it wrote (with the sealed KLL sketches' records)


SKETCH_QUERIES = ["SELECT APPROX_QUANTILE(bytes, 0.5), APPROX_QUANTILE(bytes, 0.9), APPROX_COUNT_DISTINCT(src), "
                  "APPROX_COUNT_DISTINCT(lat) FROM s", "SELECT APPROX_TOP_K(port, 4) FROM s"]


def _answers(engine):
    stream = engine.sched.streams["s"]
    return [(a.rows, a.bounds) for a in (_ask(stream, q) for q in SKETCH_QUERIES)]


def test_a_snapshot_round_trip_gives_the_same_answers(tmp_path):
    from windowstore.server import snapshot
    from windowstore.txn.engine import Engine

    live, _ = _engine_with_sketches(7)
    path = snapshot.SnapshotWriter(str(tmp_path)).write(live.capture(), lsn=9)
    restored = Engine()
    state, lsn, subwindow = snapshot.read(path)
    restored.restore(state, subwindow)
    assert lsn == 9 and restored.digest() == live.digest()
    assert _answers(restored) == _answers(live)
    for old, new in zip(live.sched.streams["s"].window.youngest(3), restored.sched.streams["s"].window.youngest(3)):
        for key in ("bytes:kll", "src:hll", "lat:cpc"):
            assert old.synopsis.sketches[key].to_bytes() == new.synopsis.sketches[key].to_bytes()
        # (the frequent-items sketch serializes its map in another order once restored)
        assert old.synopsis.sketches["port:frequent"].contents() == new.synopsis.sketches["port:frequent"].contents()


def test_the_logs_replay_rebuilds_hll_cpc_and_frequent_items_identically_and_restores_kll_as_logged():
    """Replay re-seals every sub-window from its rows: the hash-based and counting sketches come
    back bit for bit; KLL compacts with the library's random bits (which it does not let a caller
    seed), so the log keeps its sealed bytes (SealedSketches) and the replay puts them back: bit
    for bit too, and its answer within the stated rank error (tests/test_sketch_replay.py)."""
    from windowstore.txn import commands
    from windowstore.txn.engine import Engine

    live, log = _engine_with_sketches(8)
    replayed = Engine()
    for cmd in log:
        replayed.replay(commands.decode(commands.encode(cmd)))
    replayed.sched.run_until_idle()
    assert replayed.digest() == live.digest()
    for old, new in zip(live.sched.streams["s"].window.youngest(3), replayed.sched.streams["s"].window.youngest(3)):
        for key in ("src:hll", "lat:cpc", "port:frequent", "bytes:kll"):
            assert old.synopsis.sketches[key].to_bytes() == new.synopsis.sketches[key].to_bytes()
    (before, after) = (_answers(live), _answers(replayed))
    assert before[0][0][0][2:] == after[0][0][0][2:] and before[1] == after[1]
    rows = np.concatenate([s.columns["bytes"] for s in replayed.sched.streams["s"].window.youngest(3)])
    for i, q in enumerate((0.5, 0.9)):
        v, err = after[0][0][0][i], after[0][1][i][2].rank_error
        assert (rows < v).mean() <= q + err and (rows <= v).mean() >= q - err


def test_a_partitioned_stream_refuses_the_sketch_aggregates_clearly():
    """Their partitions' answers carry no sketch to merge yet: refused, never a wrong answer."""
    from windowstore.clients import InvalidArgument
    from windowstore.clients.merge import plan_merge

    for text in ["SELECT APPROX_QUANTILE(bytes, 0.5) FROM s", "SELECT APPROX_TOP_K(src, 3) FROM s",
                 "SELECT src, COUNT(*) FROM s GROUP BY src HAVING COUNT(*) > 0.1 * TOTAL APPROXIMATE"]:
        with pytest.raises(InvalidArgument, match="partitioned stream is not supported yet"):
            plan_merge(parse_query(text), ("src",), SCHEMA)


def test_a_join_refuses_the_sketch_aggregates_naming_them():
    from windowstore.store.join import plan_join
    from windowstore.store.parser import parse_statement

    s, t = _stream({"bytes": "kll"}), Stream("t", SCHEMA, WindowSpec(subwindows=2, subwindow_ms=1000), created_ms=0)
    with pytest.raises(QueryError, match="APPROX_QUANTILE is answered from one stream's sketches"):
        plan_join(parse_statement("SELECT APPROX_QUANTILE(s.bytes, 0.5) FROM s JOIN t ON s.src = t.src"),
                  {"s": s, "t": t})


def test_top_k_bounds_hold_when_a_part_was_purged_empty():
    """A sub-window whose sketch purged every item (more distinct values than its map holds) still
    counts in the bounds: 0 is seen once in each of two sub-windows, so its upper bound is >= 2
    (the library's merge alone drops the purged part's error and says 1)."""
    parts = [[0], [0, 1, -1, 2, -2, 3, -3]]
    sketches = [build_one("frequent", 3, np.asarray(p, dtype=np.int64), "int64", None) for p in parts]
    B = SimpleNamespace(sketch=("frequent", 3), input_type="int64", q=Decimal(3))
    got = FUNCTIONS_BY_NAME["approx_top_k"].finish(B, sketches, None).value
    for key, bound in got:
        assert bound.lower <= {0: 2, 1: 1, -1: 1, 2: 1, -2: 1, 3: 1, -3: 1}[key] <= bound.upper
    assert got == []  # 0's lower bound (1) is not above the error (1): no value is provably frequent
