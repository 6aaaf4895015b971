"""Window joins end to end against a real server process on loopback, through the SDK: one-time joins
(text and structured form) equal to a brute-force join of the windows their answer says it reflects,
periodic joins whose subscribed answers equal the recomputed join, the isolation checker over the
server's history, RESOURCE_EXHAUSTED beyond --max-join-rows, INVALID_ARGUMENT with a position,
PERMISSION_DENIED on any joined stream the caller may not read, a registered periodic join surviving
kill -9, and the W-join example of the README (an object moving past three gates)."""
from __future__ import annotations

import itertools
import json
import threading

import pytest

from conftest import wait_for
from pki import make_pki
from windowstore.clients import Client, InvalidArgument, ResourceExhausted
from windowstore.clients.errors import PermissionDenied
from windowstore.server import convert
from windowstore.server.process import ServerProcess
from windowstore.server.security import token_hash
from windowstore.store.parser import parse_statement
from windowstore.txn import check

SCHEMA = {"ts": "int64", "k": "string", "v": "int64"}
_names = itertools.count()


class Log:
    """What the test appended to each stream, per slide (the oracle's copy of the windows)."""

    def __init__(self, ws):
        self.ws = ws
        self.subs: dict[str, list[list[dict]]] = {}
        self.open: dict[str, list[dict]] = {}
        self.n: dict[str, int] = {}

    def create(self, prefix: str, subwindows: int) -> str:
        name = f"{prefix}{next(_names)}"
        self.ws.create_stream(name, SCHEMA, subwindows=subwindows, subwindow_ms=1000, clock="manual")
        self.subs[name], self.open[name], self.n[name] = [], [], subwindows
        return name

    def append(self, name: str, rows: list[dict]) -> None:
        self.ws.append(name, {c: [r[c] for r in rows] for c in SCHEMA})
        self.open[name] += rows

    def slide(self, name: str) -> None:
        assert self.ws.slide(name) == len(self.subs[name])
        self.subs[name].append(self.open[name])
        self.open[name] = []

    def window(self, name: str, slide: int, n_q: int) -> list[dict]:
        """The rows of the n_Q youngest sub-windows as of `slide`."""
        return [r for sub in self.subs[name][max(0, slide - n_q + 1): slide + 1] for r in sub]


def subscribed(ws, query_id: str):
    """A predicate: the server reports an open subscription to the query."""
    return lambda: any(x["query_id"] == query_id and x["subscribers"] >= 1 for x in ws.list_queries())


def rows(rng, count: int, keys: int = 4) -> list[dict]:
    return [{"ts": rng.randrange(0, 100), "k": f"k{rng.randrange(keys)}", "v": rng.randrange(-50, 1000)}
            for _ in range(count)]


def join_reference(left: list[dict], right: list[dict]) -> list[tuple]:
    """SELECT a.k, COUNT(*), SUM(b.v), MAX(a.v) ... ON a.k = b.k AND b.ts BETWEEN a.ts - 10 AND a.ts + 10
    GROUP BY a.k (ordered by key)."""
    groups: dict[str, list] = {}
    for a in left:
        for b in right:
            if a["k"] == b["k"] and -10 <= b["ts"] - a["ts"] <= 10:
                groups.setdefault(a["k"], []).append((a, b))
    return [(k, len(g), sum(b["v"] for _, b in g), max(a["v"] for a, _ in g)) for k, g in sorted(groups.items())]


def join_text(left: str, right: str, slide: str = "") -> str:
    return (f"SELECT a.k, COUNT(*), SUM(b.v), MAX(a.v) FROM {left} a [RANGE 2 SUBWINDOWS{slide}] "
            f"JOIN {right} b [RANGE 3 SUBWINDOWS] ON a.k = b.k AND b.ts BETWEEN a.ts - 10 AND a.ts + 10 GROUP BY a.k")


def expected(log: Log, answer, left: str, right: str) -> list[tuple]:
    slides = {s.stream: s.slide for s in answer.sources}
    return join_reference(log.window(left, slides[left], 2), log.window(right, slides[right], 3))


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--max-join-rows", "5000", "--history-keep", "1000000") as s:
        yield s


@pytest.fixture
def ws(server):
    with Client(server.target, timeout=30) as c:
        yield c


def two_streams(ws, seed: int = 1):
    import random
    rng = random.Random(seed)
    log = Log(ws)
    left, right = log.create("L", 4), log.create("R", 5)
    for _ in range(6):
        for name in (left, right):
            log.append(name, rows(rng, 12))
            log.slide(name)
    return log, left, right, rng


@pytest.mark.slow
def test_one_time_join_text_and_structured_equal_the_reference(ws):
    log, left, right, _ = two_streams(ws)
    text = join_text(left, right)
    a = ws.query(text)
    assert a.access == "join" and a.stream == left
    assert [(s.stream, s.slide) for s in a.sources] == [(left, 5), (right, 5)]
    assert a.slide == 5 and a.window_start_ms is not None
    assert a.rows == expected(log, a, left, right) and a.rows
    assert a.columns == ["a.k", "count(*)", "sum(b.v)", "max(a.v)"] and a.types == ["string", "int64", "int128", "int64"]
    structured = convert.query_to_pb(parse_statement(text))
    assert len(structured.sources) == 2 and structured.sources[1].on[1].band.high == 10
    assert ws.query(structured).rows == a.rows
    # a plain projection of joined rows, with a uniform WITHIN (the W-join clique constraint)
    p = ws.query(f"SELECT a.ts, b.ts, a.v FROM {left} a JOIN {right} b ON a.k = b.k WITHIN 0 ms "
                 f"ORDER BY a.v DESC, b.ts LIMIT 5")
    brute = sorted(((x["ts"], y["ts"], x["v"]) for x in log.window(left, 5, 4) for y in log.window(right, 5, 5)
                    if x["k"] == y["k"] and x["ts"] == y["ts"]), key=lambda t: (-t[2], t[1], t[0]))
    assert p.rows == brute[:5] and p.rows


def test_periodic_join_answers_equal_the_recomputed_join(ws):
    log, left, right, rng = two_streams(ws, seed=2)
    q = ws.register(join_text(left, right, " SLIDE 1 SUBWINDOWS"))
    assert q.every_slides == 1
    listed = {x["query_id"]: x for x in ws.list_queries(right)}
    assert listed[q.id]["streams"] == [left, right] and listed[q.id]["stream"] == left

    errors = []

    def feed():
        try:
            wait_for(subscribed(ws, q.id), "the subscription to be open")
            for _ in range(4):
                for name in (right, left):   # a slide of b, then of a (which makes it due)
                    log.append(name, rows(rng, 10))
                    log.slide(name)
                slide = len(log.subs[left]) - 1
                wait_for(lambda: ws.read_answers(q.id)[1] >= slide, f"the periodic join's answer for slide {slide}")
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
    t = threading.Thread(target=feed)
    got = []
    with Client(ws.target, timeout=30) as sub:
        answers = sub.subscribe(q.id, timeout=20)
        t.start()
        for a in answers:
            got.append(a)
            if {s.stream: s.slide for s in a.sources}[left] >= 9:
                break
    t.join()
    assert not errors, errors
    assert len(got) >= 2
    for a in got:
        assert a.access == "join" and a.query_id == q.id
        assert a.rows == expected(log, a, left, right)
    assert [s.slide for s in got[-1].sources] == [9, 9]
    kept, newest, _ = ws.read_answers(q.id)
    assert newest == 9 and all(x.rows == expected(log, x, left, right) for x in kept)
    # the history: every join committed latest-window serializable, checked per stream and as a whole
    events = [e for e in ws.history(limit=1_000_000) if e["stream"] in (left, right)]
    report = check(events)
    joins = [v for v in report.verdicts if v.parts]
    assert report.errors == [] and report.violations("lws") == [] and len(joins) >= len(got)
    ws.unregister(q.id)
    assert ws.list_queries(left) == []


def test_a_join_beyond_max_join_rows_is_resource_exhausted(ws):
    log = Log(ws)
    left, right = log.create("L", 2), log.create("R", 2)
    for name in (left, right):
        log.append(name, [{"ts": i, "k": "same", "v": i} for i in range(100)])
        log.slide(name)
    with pytest.raises(ResourceExhausted, match="more than 5000 rows"):
        ws.query(f"SELECT COUNT(*) FROM {left} a JOIN {right} b ON a.k = b.k")   # 10^4 joined rows
    assert ws.query(f"SELECT COUNT(*) FROM {left} a JOIN {right} b ON a.k = b.k AND b.ts BETWEEN a.ts AND a.ts + 9"
                    ).rows == [(955,)]                                              # narrower: answered


def test_a_bad_join_is_invalid_argument_with_its_position(ws):
    log, left, right, _ = two_streams(ws, seed=3)
    text = f"SELECT COUNT(*) FROM {left} a JOIN {right} b ON a.k = b.nope"
    with pytest.raises(InvalidArgument) as e:
        ws.query(text)
    at = text.index("b.nope")
    assert f"at position {at}" in str(e.value) and "unknown column 'nope'" in str(e.value)
    with pytest.raises(InvalidArgument, match="cross product"):
        ws.query(f"SELECT COUNT(*) FROM {left} a JOIN {right} b")
    with pytest.raises(InvalidArgument, match="position"):
        ws.query(f"SELECT COUNT(*) FROM {left} a JOIN {right} b ON a.k = b.k JOIN")
    with pytest.raises(InvalidArgument, match="register it instead"):
        ws.query(join_text(left, right, " SLIDE 1 SUBWINDOWS"))
    with pytest.raises(InvalidArgument, match="needs SLIDE"):
        ws.register(join_text(left, right))
    structured = convert.query_to_pb(parse_statement(text))
    with pytest.raises(InvalidArgument, match=r"field sources\[1\]\.on\[0\]\.equal\.right"):
        ws.query(structured)


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    tokens = tmp_path_factory.mktemp("auth") / "tokens.json"
    tokens.write_text(json.dumps({"tokens": {token_hash("t-admin"): "admin", token_hash("t-reader"): "reader"},
                                  "grants": {"admin": {"*": ["admin"]}, "reader": {"sensors*": ["read"]}}}))
    srv = ServerProcess("--tls-cert", pki["server"], "--tls-key", pki["server_key"], "--tokens", str(tokens))
    yield srv, pki
    srv.stop()


@pytest.mark.slow
def test_a_join_needs_read_permission_on_every_stream(secured):
    srv, pki = secured
    with Client(srv.target, ca=pki["ca"], token="t-admin", timeout=10, retries=0) as admin:
        for name in ("sensors1", "sensors2", "secret"):
            admin.create_stream(name, SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual")
            admin.append(name, {"ts": [1, 2], "k": ["a", "b"], "v": [1, 2]})
            admin.slide(name)
        q = admin.register("SELECT COUNT(*) FROM sensors1 a [SLIDE 1 SUBWINDOWS] JOIN secret b ON a.k = b.k")
    with Client(srv.target, ca=pki["ca"], token="t-reader", timeout=10, retries=0) as r:
        ok = "SELECT COUNT(*) FROM sensors1 a JOIN sensors2 b ON a.k = b.k"
        assert r.query(ok).rows == [(2,)]
        for text in ("SELECT COUNT(*) FROM sensors1 a JOIN secret b ON a.k = b.k",
                     "SELECT COUNT(*) FROM secret a JOIN sensors1 b ON a.k = b.k"):
            with pytest.raises(PermissionDenied, match="may not read stream 'secret'"):
                r.query(text)
        with pytest.raises(PermissionDenied, match="may not read stream 'secret'"):
            r.register("SELECT COUNT(*) FROM sensors1 a [SLIDE 1 SUBWINDOWS] JOIN secret b ON a.k = b.k")
        with pytest.raises(PermissionDenied, match="may not read stream 'secret'"):
            next(r.subscribe(q.id))
        assert [x["query_id"] for x in r.list_queries()] == []   # it reads a stream the reader may not


@pytest.mark.slow
def test_a_registered_periodic_join_survives_kill_9(tmp_path):
    # tiny snapshots: recovery restores a snapshot (periodic queries by their text) and replays the log
    srv = ServerProcess("--snapshot-every-mb", "0.001", data_dir=str(tmp_path))
    try:
        with Client(srv.target, timeout=30) as ws:
            log, left, right, rng = two_streams(ws, seed=4)
            q = ws.register(join_text(left, right, " SLIDE 1 SUBWINDOWS"))
            before = ws.query(join_text(left, right)).rows
    finally:
        srv.proc.kill()
        srv.proc.wait()
    srv = ServerProcess(data_dir=str(tmp_path))
    try:
        with Client(srv.target, timeout=30) as ws:
            log.ws = ws
            assert ws.query(join_text(left, right)).rows == before
            [listed] = ws.list_queries()
            assert listed["query_id"] == q.id and listed["streams"] == [left, right]
            answers = ws.subscribe(q.id, timeout=20)

            errors = []

            def feed():
                try:
                    wait_for(subscribed(ws, q.id), "the subscription to be open")
                    log.append(left, rows(rng, 10))
                    log.slide(left)
                except BaseException as e:  # noqa: BLE001
                    errors.append(e)
            t = threading.Thread(target=feed)
            t.start()
            first = next(iter(answers))
            t.join()
            assert not errors, errors
            assert first.query_id == q.id and [s.slide for s in first.sources] == [6, 5]
            assert first.rows == expected(log, first, left, right)
            # the stream's drop takes the join with it, durably
            ws.drop_stream(right)
            assert ws.list_queries() == []
    finally:
        srv.stop()
    srv = ServerProcess(data_dir=str(tmp_path))
    try:
        with Client(srv.target, timeout=30) as ws:
            assert ws.list_queries() == [] and [s["spec"]["name"] for s in ws.list_streams()] == [left]
    finally:
        srv.stop()


# -- the W-join example (README) ------------------------------------------------------------------------------
W_JOIN = """
SELECT a.obj, a.ts, b.ts, c.ts
FROM gate_a a [RANGE 1 min]
JOIN gate_b b [RANGE 1 min] ON b.obj = a.obj AND b.ts BETWEEN a.ts AND a.ts + 5000
JOIN gate_c c [RANGE 1 min] ON c.obj = b.obj AND c.ts BETWEEN b.ts AND b.ts + 5000
ORDER BY a.ts
"""


def test_w_join_tracks_an_object_moving_past_three_gates(ws):
    """Sightings of objects at three gates on the way A -> B -> C: the W-join keeps the paths on which
    each sighting comes within 5 s after the previous one (seed 001's path window join)."""
    for gate in ("gate_a", "gate_b", "gate_c"):
        try:
            ws.drop_stream(gate)
        except Exception:  # noqa: BLE001 - not there yet
            pass
        ws.create_stream(gate, {"ts": "int64", "obj": "string"}, subwindows=60, subwindow_ms=1000, clock="manual")
    sightings = {   # object -> (ts at A, at B, at C)
        "car-1": (1_000, 4_000, 8_500),     # within 5 s at each step: tracked
        "car-2": (2_000, 9_000, 10_000),    # A -> B took 7 s: not the same trip
        "car-3": (3_000, 5_000, 12_000),    # B -> C took 7 s
        "van-7": (6_000, 6_500, 7_000),     # tracked
    }
    for i, gate in enumerate(("gate_a", "gate_b", "gate_c")):
        ws.append(gate, {"ts": [t[i] for t in sightings.values()], "obj": list(sightings)})
        ws.slide(gate)
    a = ws.query(W_JOIN)
    assert a.rows == [("car-1", 1_000, 4_000, 8_500), ("van-7", 6_000, 6_500, 7_000)]
    assert a.columns == ["a.obj", "a.ts", "b.ts", "c.ts"]
    # the same as a periodic count, re-evaluated on every slide of gate_c
    count = W_JOIN.replace("SELECT a.obj, a.ts, b.ts, c.ts", "SELECT COUNT(*)").replace("ORDER BY a.ts", "")
    count = count.replace("gate_c c [RANGE 1 min]", "gate_c c [RANGE 1 min SLIDE 1 s]")
    q = ws.register(count)
    assert q.every_slides == 1
    ws.unregister(q.id)


# -- NULLs and typed columns on the wire ------------------------------------------------------------------
def test_join_answers_carry_nulls_and_typed_values_to_the_sdk(ws):
    """A join over boolean, timestamp, date and decimal columns holding NULLs answers over gRPC what
    DuckDB answers over the same rows: NULL as None, decimals as Decimals of their result type's scale,
    timestamps as microseconds, dates as days (the single-stream answers' wire form, unchanged)."""
    from test_join import ROWS_A, ROWS_B, TYPED_A, TYPED_B, duckdb_rows, same_rows

    names = {}
    for alias, schema, subs in (("a", TYPED_A, ROWS_A), ("b", TYPED_B, ROWS_B)):
        name = names[alias] = f"typed_{alias}{next(_names)}"
        ws.create_stream(name, schema, subwindows=4, subwindow_ms=1000, clock="manual")
        for sub in subs:
            ws.append(name, {c: [r[c] for r in sub] for c in schema})
            ws.slide(name)
    frm = f"FROM {names['a']} a JOIN {names['b']} b"
    p = ws.query(f"SELECT a.v, b.w, a.s, b.ok, a.d, b.at, a.day {frm} ON a.ok = b.ok ORDER BY b.w DESC")
    same_rows(p.rows, duckdb_rows(
        "SELECT a.v, b.w, a.s, b.ok, a.d, epoch_us(b.at), CAST(a.day - DATE '1970-01-01' AS BIGINT) FROM a JOIN b "
        "ON a.ok = b.ok ORDER BY b.w DESC NULLS LAST, 1 NULLS LAST, 2 NULLS LAST, 3 NULLS LAST, 4 NULLS LAST, "
        "5 NULLS LAST, 6 NULLS LAST, 7 NULLS LAST"))
    assert p.types == ["int64", "int64", "string", "boolean", "decimal(12,2)", "timestamp", "date"]
    assert any(v is None for r in p.rows for v in r)
    g = ws.query(f"SELECT a.d, COUNT(*), COUNT(b.w), SUM(b.e), AVG(a.d), MIN(b.at) {frm} ON a.k = b.k GROUP BY a.d")
    same_rows(g.rows, duckdb_rows(
        "SELECT a.d, count(*), count(b.w), sum(b.e), avg(a.d), epoch_us(min(b.at)) FROM a "
        "JOIN b ON a.k = b.k GROUP BY a.d ORDER BY 1 NULLS LAST"))
    assert g.types == ["decimal(12,2)", "int64", "int64", "decimal(38,0)", "float64", "timestamp"]  # AVG: DuckDB's DOUBLE
