"""Partitioned streams: the row hash and the partition map (store/partitions.py) against a plain
reimplementation of their documented definition, and the partition metadata a stream keeps."""
from __future__ import annotations

import hashlib
from decimal import Decimal
from types import SimpleNamespace

import pyarrow as pa
import pytest

from windowstore.store import InvalidInput
from windowstore.store.partitions import StaticCluster, key_hash, partition_name, partition_of_rows, split_rows
from windowstore.store.schema import Schema
from windowstore.store.window import WindowSpec

M = 2**64


def ref_mix(x: int) -> int:
    """SplitMix64's finalizer, written from its definition with Python ints."""
    z = (x + 0x9E3779B97F4A7C15) % M
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % M
    return z ^ (z >> 31)


def ref_word(v) -> int:
    if v is None:
        return 0
    if isinstance(v, str):
        return int.from_bytes(hashlib.blake2b(v.encode(), digest_size=8).digest(), "little")
    return v % M


def ref_partition(values: tuple, partitions: int) -> int:
    h = 0
    for v in values:
        h = ref_mix(h ^ ref_word(v))
    return h % partitions


def test_row_partitions_follow_the_documented_hash():
    src = ["a", "b", None, "ünï", "a", "", "zz" * 40] * 3
    port = [1, -1, 7, None, 2**63 - 1, -(2**63), 0] * 3
    table = pa.table({"src": pa.array(src, pa.string()), "port": pa.array(port, pa.int64())})
    for partitions in (1, 2, 3, 7):
        got = partition_of_rows(table, ["src", "port"], partitions).tolist()
        assert got == [ref_partition((s, p), partitions) for s, p in zip(src, port)]
        got = partition_of_rows(table, ["port"], partitions).tolist()
        assert got == [ref_partition((p,), partitions) for p in port]


def test_hash_is_the_same_for_a_dictionary_or_chunked_column():
    values = ["x", "y", None, "x", "w"]
    plain = key_hash([pa.array(values)])
    assert key_hash([pa.array(values).dictionary_encode()]).tolist() == plain.tolist()
    assert key_hash([pa.chunked_array([values[:2], values[2:]])]).tolist() == plain.tolist()


def test_split_keeps_every_row_once_in_order():
    table = pa.table({"k": [f"k{i % 13}" for i in range(200)], "v": list(range(200))})
    parts = split_rows(table, ["k"], 3)
    seen = sorted(v for t in parts.values() for v in t.column("v").to_pylist())
    assert seen == list(range(200))
    for p, t in parts.items():
        vs = t.column("v").to_pylist()
        assert vs == sorted(vs)
        assert all(ref_partition((k,), 3) == p for k in t.column("k").to_pylist())


def test_split_refuses_a_float_key_or_a_missing_column():
    with pytest.raises(InvalidInput, match="'x' must be int64 or string"):
        split_rows(pa.table({"x": [1.5]}), ["x"], 2)
    with pytest.raises(InvalidInput, match="no column 'k'"):
        split_rows(pa.table({"x": [1]}), ["k"], 2)


def test_static_cluster_places_consecutive_partitions_on_consecutive_nodes(tmp_path):
    path = tmp_path / "cluster.toml"
    path.write_text('nodes = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]\n')
    c = StaticCluster.load(str(path))
    assert c.addresses == ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]
    for stream in ("packets", "a", "b.c"):
        start = ref_mix(ref_word(stream)) % 3
        assert [c.owner(stream, i) for i in range(5)] == [(start + i) % 3 for i in range(5)]
    assert len({c.owner(f"s{i}", 0) for i in range(30)}) == 3  # streams start on different nodes
    assert partition_name("packets", 2) == "packets.p2"


@pytest.mark.parametrize("text, message", [("nodes = []", "at least one"), ("nodes = [1]", "list of server"),
                                           ("nodes = [\"a\", \"a\"]", "twice"), ("nodes = [", "cluster file")])
def test_bad_cluster_files_are_refused(tmp_path, text, message):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(InvalidInput, match=message):
        StaticCluster.load(str(path))


SCHEMA = Schema.of({"ts": "int64", "src": "string", "x": "float64", "v": "int64"})


@pytest.mark.parametrize("fields, message", [
    (dict(partitions=2, partition=2, partition_of="s", partition_by=("src",)), "partition must be between 0 and 1"),
    (dict(partitions=2, partition=0, partition_by=("src",)), "needs partition_of"),
    (dict(partitions=2, partition_of="s"), "needs partition_by"),
    (dict(partitions=2, partition_of="s", partition_by=("nope",)), "unknown column 'nope'"),
    (dict(partitions=2, partition_of="s", partition_by=("x",)), "'x' must be int64 or string"),
    (dict(partitions=2, partition_of="s", partition_by=("src",), clock="event"), "event-time partition needs origin_ms"),
    (dict(partitions=2, partition_of="s", partition_by=("src",), subwindow_ms=None, subwindow_rows=10),
     "count-based partitions would not slide together"),
    (dict(partitions=0, partition_of="s"), "need partitions"),
    (dict(partitions=5000, partition_of="s", partition_by=("src",)), "between 1 and 1024"),
    (dict(origin_ms=5, clock="manual"), "only to time sub-windows with clock='processing' or 'event'"),
])
def test_partition_metadata_is_validated(fields, message):
    with pytest.raises(InvalidInput, match=message):
        WindowSpec(**{"subwindows": 4, "subwindow_ms": 1000, **fields}).validate(SCHEMA)


def test_origin_aligns_processing_time_slots():
    from windowstore.store.stream import Stream

    spec = WindowSpec(subwindows=4, subwindow_ms=1000, partitions=2, partition_of="s", partition_by=("src",),
                      origin_ms=10_500)
    spec.validate(SCHEMA)
    early = Stream("s.p0", SCHEMA, spec, created_ms=10_900)
    late = Stream("s.p1", SCHEMA, WindowSpec(**{**spec.__dict__, "partition": 1}), created_ms=12_100)
    # both count sub-windows from the slot of 10_500: the same slide is due on both at any instant
    for now in (12_000, 13_999, 14_000, 20_000):
        assert early.window.due(now) == late.window.due(now)
    assert early.window.next_due_ms() == late.window.next_due_ms()


def test_event_time_partitions_start_at_the_origin_and_advance_on_a_writers_event_time():
    """Two event-time partitions from one origin: one gets rows, the other only the writer's event
    time; both make the same slides over the same event time, and a hint is checked like a row."""
    from windowstore.store.errors import OutOfRange
    from dataclasses import replace

    from windowstore.txn.commands import Append, CommitBatch, CreateStream, decode, encode
    from windowstore.txn.engine import Engine

    e = Engine()
    for p in (0, 1):
        spec = WindowSpec(subwindows=3, subwindow_ms=10, clock="event", partitions=2, partition=p, partition_of="s",
                          partition_by=("src",), origin_ms=1_000)
        e.apply(CreateStream(f"s.p{p}", tuple(SCHEMA.columns), "ts", spec, 0.0))
    batch = pa.table({"ts": pa.array([995, 1_003, 1_027], pa.int64()), "src": ["a", "a", "a"],
                      "x": pa.array([1.0, 2.0, 3.0]), "v": pa.array([1, 2, 3], pa.int64())})
    ack = e.apply(Append("s.p0", batch, "w", 1, 0.0, event_time_ms=1_027))
    assert (ack.accepted, ack.late) == (2, 1)  # 995 is before the origin's sub-window [1000, 1010)
    back = decode(encode(Append("s.p1", batch.slice(0, 0), "w", 1, 0.0, event_time_ms=1_027)))
    assert back.event_time_ms == 1_027 and back.batch.num_rows == 0
    e.apply(back)
    e.sched.run_until_idle()
    windows = [e.stream(f"s.p{p}").window for p in (0, 1)]
    assert [w.latest for w in windows] == [1, 1]  # [1000, 1010) and [1010, 1020) sealed on both
    assert [(w.sealed(1).start_ms, w.sealed(1).end_ms) for w in windows] == [(1_010, 1_020)] * 2
    with pytest.raises(OutOfRange, match="event_time_ms") as err:
        e.apply(Append("s.p1", batch.slice(0, 0), "", None, 0.0, event_time_ms=2**63 - 1))
    assert err.value.field == "event_time_ms"
    # a micro-batch commit carries the writers' event time too (Spark's writers on a cluster)
    commit = CommitBatch("s.p1", "spark", 4, (), False, 0.0, event_time_ms=1_041)
    assert decode(encode(commit)) == commit
    assert "event_time_ms" not in encode(replace(commit, event_time_ms=None)).decode("latin-1")  # as before: unset
    e.apply(commit)
    e.sched.run_until_idle()
    assert [w.latest for w in windows] == [1, 3]  # through [1030, 1040) on the partition told 1_041
    e.apply(CreateStream("t", tuple(SCHEMA.columns), "ts", WindowSpec(subwindows=3, subwindow_ms=10), 0.0))
    with pytest.raises(InvalidInput, match="event_time_ms applies only to a stream with clock='event'"):
        e.apply(Append("t", batch, "", None, 0.0, event_time_ms=5))
    e._check()


def test_serve_checks_its_cluster_flags(tmp_path):
    from windowstore.server.app import ConfigError, load_cluster
    from windowstore.server.config import ServerConfig

    path = tmp_path / "cluster.toml"
    path.write_text('nodes = ["127.0.0.1:1", "127.0.0.1:2"]\n')
    assert load_cluster(ServerConfig()) is None
    assert load_cluster(ServerConfig(cluster=str(path), node=1)).nodes == ("127.0.0.1:1", "127.0.0.1:2")
    with pytest.raises(ConfigError, match="--cluster and --node go together"):
        load_cluster(ServerConfig(node=1))
    with pytest.raises(ConfigError, match="--node 2: the cluster file lists nodes 0 to 1"):
        load_cluster(ServerConfig(cluster=str(path), node=2))
    with pytest.raises(ConfigError, match="--cluster cluster file .*nope.toml"):
        load_cluster(ServerConfig(cluster=str(tmp_path / "nope.toml"), node=0))


def test_partition_metadata_survives_the_log_and_a_snapshot(tmp_path):
    from windowstore.server import snapshot
    from windowstore.txn import commands
    from windowstore.txn.commands import CreateStream
    from windowstore.txn.engine import Engine

    spec = WindowSpec(subwindows=4, subwindow_ms=1000, partition_of="s", partition=1, partitions=3,
                      partition_by=("src", "v"), origin_ms=123_456)
    cmd = CreateStream("s.p1", tuple(SCHEMA.columns), "ts", spec, 0.0)
    back = commands.decode(commands.encode(cmd))
    assert back.spec == spec and back.spec.partition_by == ("src", "v")
    live = Engine()
    live.apply(back)
    path = snapshot.SnapshotWriter(str(tmp_path)).write(live.capture(), lsn=1)
    state, _, subwindow = snapshot.read(path)
    restored = Engine()
    restored.restore(state, subwindow)
    assert restored.sched.streams["s.p1"].spec == spec


# -- merging the partitions' answers (clients/merge.py), against the store over the union -----------------
MERGED = [
    "SELECT COUNT(*), COUNT(v), SUM(v), AVG(v), MIN(v), MAX(v), SUM(x), AVG(x), SUM(d), AVG(d), MAX(d) FROM {s}",
    "SELECT dst, AVG(d), MIN(d) FROM {s} GROUP BY dst ORDER BY AVG(d) DESC",
    "SELECT src, COUNT(*), SUM(v), AVG(x) FROM {s} GROUP BY src ORDER BY 2 DESC LIMIT 3",
    "SELECT src, MAX(v) AS m FROM {s} GROUP BY src HAVING SUM(v) > 300 ORDER BY MIN(v), m DESC",
    "SELECT dst, src, SUM(v) FROM {s} GROUP BY dst, src ORDER BY SUM(v) DESC LIMIT 4",
    "SELECT dst, SUM(v), AVG(v), MIN(x) FROM {s} WHERE v > 3 GROUP BY dst ORDER BY 2 DESC LIMIT 2",
    "SELECT dst, QUANTILE(v, 0.5), QUANTILE(v, 0.9), COUNT(DISTINCT src) FROM {s} GROUP BY dst",
    "SELECT src, QUANTILE(x, 0.9), COUNT(DISTINCT dst), AVG(v) FROM {s} GROUP BY src ORDER BY 2 LIMIT 2",
    "SELECT QUANTILE(v, 0.25), COUNT(DISTINCT dst) FROM {s} [RANGE 2 SUBWINDOWS]",
    "SELECT SUM(v) FROM {s} GROUP BY dst ORDER BY dst DESC",
    "SELECT DISTINCT dst FROM {s} ORDER BY dst",
    "SELECT DISTINCT src, dst FROM {s}",
    "SELECT dst, COUNT(*) FROM {s} WHERE v > 1000 GROUP BY dst",
]


def _answer(a, slide: int):
    from windowstore.clients.answer import Answer

    return Answer(columns=a.columns, rows=a.rows, slide=slide, window_start_ms=None, window_end_ms=None,
                  staleness_ms=None, response_ms=0.0, restarts=0, policy="ttu", access=a.access, exact=a.exact,
                  guaranteed=a.guaranteed, query_id="", execution=0, late_slides=0, inter_exec_ms=None,
                  answered_ms=0.0, stream="", types=list(a.types))


@pytest.mark.parametrize("seed", range(4))
def test_merged_answers_equal_the_store_over_the_union(seed):
    import random

    from windowstore.clients.merge import plan_merge
    from windowstore.store import parse_query, plan_query
    from windowstore.store.planner import run_plan
    from windowstore.store.stream import Stream

    rng = random.Random(seed)
    P = 3
    schema = {"ts": "int64", "src": "string", "dst": "int64", "v": "int64", "x": "float64", "d": "decimal(10,2)"}

    def make(name, **part):
        return Stream(name, schema, WindowSpec(subwindows=3, subwindow_ms=1, clock="manual", **part), 0)

    union = make("u")
    parts = [make(partition_name("s", p), partition_of="s", partition=p, partitions=P, partition_by=("src",))
             for p in range(P)]
    for j in range(5):
        n = rng.randrange(0, 40)
        batch = pa.table({"ts": pa.array(range(n), pa.int64()),
                          "src": pa.array([rng.choice(["a", "b", "c", "d", None]) for _ in range(n)], pa.string()),
                          "dst": pa.array([rng.choice([1, 2, None]) for _ in range(n)], pa.int64()),
                          "v": pa.array([rng.choice([None, *range(-5, 60)]) for _ in range(n)], pa.int64()),
                          "x": pa.array([rng.choice([None, 0.5, 1.25, -3.0, 7.75]) for _ in range(n)], pa.float64()),
                          "d": pa.array([rng.choice([None, Decimal("0.01"), Decimal("-2.50"), Decimal("1234.57")])
                                         for _ in range(n)], pa.decimal128(10, 2))})
        union.append(batch)
        for p, rows in split_rows(batch, ["src"], P).items():
            parts[p].append(rows)
        for s in (union, *parts):
            s.window.slide(j)
    k = 4
    for text in MERGED:
        q = parse_query(text.format(s="s"))
        plan = plan_merge(q, ("src",), schema)
        got = plan.merge([_answer(run_plan(plan_query(parse_query(plan.partition_text(s.name, k)), s)), k)
                          for s in parts])
        want = run_plan(plan_query(parse_query(text.format(s="u")), union))
        assert got.columns == want.columns, text
        assert got.types == want.types, text
        if "ORDER BY" not in text:
            got.rows, want.rows = sorted(got.rows, key=repr), sorted(want.rows, key=repr)
        assert len(got.rows) == len(want.rows), text
        for g, w in zip(got.rows, want.rows):
            assert len(g) == len(w)
            for a, b in zip(g, w):  # float sums add in another order: equal to the last bits
                assert a == (pytest.approx(b, rel=1e-12) if isinstance(b, float) else b), (text, g, w)


def test_what_does_not_merge_exactly_is_refused_by_name():
    from windowstore.clients import InvalidArgument
    from windowstore.clients.merge import plan_merge
    from windowstore.store import parse_query

    types = {"ts": "int64", "src": "string", "dst": "int64", "x": "float64"}
    for text, message in [
        ("SELECT QUANTILE(x, 0.5) FROM s", "quantile\\(x, 0.5\\) of float64 column 'x'"),
        ("SELECT dst, SUM(x) FROM s GROUP BY dst HAVING SUM(x) > 1", "HAVING on a partitioned stream"),
        ("SELECT src, COUNT(*) FROM s GROUP BY src APPROXIMATE", "APPROXIMATE"),
        ("SELECT MAX(n) FROM (SELECT dst, COUNT(*) AS n FROM s GROUP BY dst)", "outer aggregates"),
        ("SELECT COUNT(*) FROM s [RANGE 10 ROWS]", "RANGE in ROWS"),
    ]:
        with pytest.raises(InvalidArgument, match=message):
            plan_merge(parse_query(text), ("src",), types)


def test_a_list_of_addresses_makes_a_cluster_client():
    from windowstore.clients import AsyncClient, Client
    from windowstore.clients.partitioned import ClusterClient

    with Client(["127.0.0.1:1", "127.0.0.1:2"]) as c:  # channels connect lazily: no server needed
        assert isinstance(c, ClusterClient) and c.target == ["127.0.0.1:1", "127.0.0.1:2"]
    with Client(StaticCluster(("127.0.0.1:3",))) as c:
        assert isinstance(c, ClusterClient) and c.cluster.owner("s", 5) == 0
    with Client("127.0.0.1:1") as c:
        assert type(c) is Client
    from windowstore.clients.async_cluster import AsyncClusterClient

    c = AsyncClient(["127.0.0.1:1", "127.0.0.1:2"])  # the cluster client, awaited
    assert isinstance(c, AsyncClusterClient) and c.cluster_client.target == ["127.0.0.1:1", "127.0.0.1:2"]
    with pytest.raises(AttributeError):
        c.stage  # noqa: B018 - not a cluster client's call
    c.cluster_client.close()


@pytest.mark.parametrize("text", ["SELECT SUM(d) FROM s", "SELECT SUM(d) AS t, SUM(d) * 1 AS u FROM s"])
def test_partial_decimal_sums_merge_exactly_past_28_digits(text):
    """The partitions' SUMs of a DECIMAL are DECIMAL(38, s): their merge (clients/merge.py, and
    expr_merge.py for a query with expressions) adds them exactly, never in Python's default 28-digit
    context, checked against DuckDB's DECIMAL(38, 2) sum of the same partials."""
    import duckdb

    from windowstore.clients.expr_merge import plan_expr_merge
    from windowstore.clients.merge import plan_merge
    from windowstore.store import parse_query

    partials = [Decimal("123456789012345678901234567.89"), Decimal("876543210987654321098765432.19"),
                Decimal("-0.07"), Decimal("99999999999999999999999999.99")]
    want = duckdb.connect().execute("SELECT SUM(x) FROM (VALUES " + ", ".join(
        f"(CAST('{p}' AS DECIMAL(38,2)))" for p in partials) + ") v(x)").fetchone()[0]
    assert len(want.as_tuple().digits) > 28
    q = parse_query(text)
    types = {"ts": "int64", "src": "string", "d": "decimal(18,2)"}
    plan = plan_merge(q, ("src",), types) if q.expr is None else plan_expr_merge(q, types)
    answers = [_answer(SimpleNamespace(columns=["__p0"], rows=[(p,)], types=["decimal(38,2)"], access="window",
                                       exact=True, guaranteed=None), 4) for p in partials]
    got = plan.merge(answers)
    assert got.rows[0][0] == want and str(got.rows[0][0]) == str(want), (got.rows, want)
    assert all(v == want for v in got.rows[0])


def test_the_event_time_column_meets_a_timestamp_in_a_merged_query_with_expressions():
    """The client binds a query with expressions on a partitioned stream as a server does: the
    event-time column meets a TIMESTAMP as the instant it holds (its merge equals the store's answer
    over the union of the partitions' rows)."""
    import random

    from windowstore.clients.expr_merge import plan_expr_merge
    from windowstore.store import parse_query, plan_query
    from windowstore.store.planner import run_plan
    from windowstore.store.stream import Stream

    rng = random.Random(5)
    P, schema = 2, {"ts": "int64", "src": "string", "v": "int64"}
    union = Stream("u", schema, WindowSpec(subwindows=3, subwindow_ms=1000, clock="manual"), 0)
    parts = [Stream(partition_name("s", p), schema, WindowSpec(subwindows=3, subwindow_ms=1000, clock="manual",
                                                               partition_of="s", partition=p, partitions=P,
                                                               partition_by=("src",)), 0) for p in range(P)]
    batch = pa.table({"ts": pa.array([rng.randrange(3000) for _ in range(60)], pa.int64()),
                      "src": pa.array([rng.choice("abc") for _ in range(60)], pa.string()),
                      "v": pa.array([rng.randrange(100) for _ in range(60)], pa.int64())})
    union.append(batch)
    for p, rows in split_rows(batch, ["src"], P).items():
        parts[p].append(rows)
    for s in (union, *parts):
        s.window.slide(3000)
    text = ("SELECT ts >= TIMESTAMP '1970-01-01 00:00:01.5' AS late, COUNT(*) AS n, SUM(v) FROM {s} "
            "WHERE ts < DATE '1970-01-02' GROUP BY 1 HAVING MAX(ts) > TIMESTAMP '1970-01-01 00:00:00' ORDER BY 1")
    plan = plan_expr_merge(parse_query(text.format(s="s")), schema, "ts")
    got = plan.merge([_answer(run_plan(plan_query(parse_query(plan.partition_text(s.name, 0)), s)), 0) for s in parts])
    want = run_plan(plan_query(parse_query(text.format(s="u")), union))
    assert got.rows == want.rows and [r[0] for r in want.rows] == [False, True], (got.rows, want.rows)
