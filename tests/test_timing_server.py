"""Timing-correlation joins (issue 34, seed 002) end to end against a real server process on
loopback, through the SDK: a one-time join and a periodic one (every answer, with its provenance,
equal to the rational oracle's pairs over the windows it says it read), the history checked for
latest-window serializability, explain naming the rule that picks the paper's algorithm, a bad
condition refused as INVALID_ARGUMENT with its position, and the periodic join's state across
kill -9 (WAL replay over a snapshot) giving the same answers."""
from __future__ import annotations

import itertools
import random
import threading

import pytest

from conftest import wait_for
from test_timing_join import reference
from windowstore.clients import Client, InvalidArgument
from windowstore.server import snapshot
from windowstore.server.process import ServerProcess
from windowstore.txn import check

SCHEMA = {"ts": "int64", "id": "int64", "lo": "int64", "hi": "int64"}
_names = itertools.count()
D, CT = 150, "0.7"


def text(a: str, b: str, slide: str = "") -> str:
    return (f"SELECT x.id, y.id, PROB() FROM {a} x [RANGE 3 SUBWINDOWS{slide}] JOIN {b} y [RANGE 3 SUBWINDOWS] "
            f"ON PROB(ABS(INTERVAL(x.lo, x.hi) - INTERVAL(y.lo, y.hi)) <= {D} ms) >= {CT}")


class Log:
    """What the test sealed into each stream, per slide (the oracle's copy of the windows)."""

    def __init__(self, ws, seed: int):
        self.ws, self.rng = ws, random.Random(seed)
        self.subs: dict[str, list[list[dict]]] = {}
        self.ids = itertools.count()

    def create(self, prefix: str) -> str:
        name = f"{prefix}{next(_names)}"
        self.ws.create_stream(name, SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual")
        self.subs[name] = []
        return name

    def seal(self, name: str, count: int) -> None:
        j = len(self.subs[name])
        rows = []
        for _ in range(count):
            hi = j * 1000 + self.rng.randrange(-200, 1200)
            rows.append({"ts": j * 1000, "id": next(self.ids), "lo": hi - self.rng.randrange(0, 200), "hi": hi})
        self.ws.append(name, {c: [r[c] for r in rows] for c in SCHEMA})
        assert self.ws.slide(name) == j
        self.subs[name].append(rows)

    def window(self, name: str, slide: int) -> list[dict]:
        return [r for sub in self.subs[name][max(0, slide - 2): slide + 1] for r in sub]

    def expected(self, answer, a: str, b: str) -> dict:
        slides = {s.stream: s.slide for s in answer.sources}
        return reference("mutual", D, CT, self.window(a, slides[a]), self.window(b, slides[b]))


def matches(answer, want: dict) -> bool:
    got = {(r[0], r[1]): r[2] for r in answer.rows}
    return (len(got) == len(answer.rows) and set(got) == set(want)
            and all(abs(p - float(want[k])) <= 1e-9 for k, p in got.items()))


def two_streams(ws, seed: int):
    log = Log(ws, seed)
    a, b = log.create("TA"), log.create("TB")
    for _ in range(5):
        for name in (a, b):
            log.seal(name, 40)
    return log, a, b


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--history-keep", "1000000") as s:
        yield s


@pytest.fixture
def ws(server):
    with Client(server.target, timeout=30) as c:
        yield c


def test_one_time_timing_join_equals_the_oracle_and_explains_its_algorithm(ws):
    log, a, b = two_streams(ws, 1)
    ans = ws.query(text(a, b))
    assert ans.access == "join" and ans.columns == ["x.id", "y.id", "prob()"]
    assert ans.types == ["int64", "int64", "float64"]
    assert [(s.stream, s.slide) for s in ans.sources] == [(a, 4), (b, 4)]
    want = log.expected(ans, a, b)
    assert want and matches(ans, want)
    how = ws.explain(text(a, b))["how"]
    assert how.startswith("each source stream's window")
    assert "PROB(ABS(INTERVAL(x.lo, x.hi) - INTERVAL(y.lo, y.hi)) <= 150 ms) >= 0.7" in how
    assert "SSort up to 16384 pairs" in how and "look-up table when ct >= 0.5" in how
    with pytest.raises(InvalidArgument, match="position"):
        ws.query(text(a, b).replace(">= 0.7", ">= 1.7"))
    with pytest.raises(InvalidArgument, match="belong to one source"):
        ws.query(text(a, b).replace("INTERVAL(x.lo, x.hi)", "INTERVAL(x.lo, y.hi)"))


def test_periodic_timing_join_answers_equal_the_oracle_and_commit_serializably(ws):
    log, a, b = two_streams(ws, 2)
    q = ws.register(text(a, b, " SLIDE 1 SUBWINDOWS"))
    errors = []

    def feed():
        try:
            wait_for(lambda: any(x["query_id"] == q.id and x["subscribers"] >= 1 for x in ws.list_queries()),
                     "the subscription to be open")
            for _ in range(3):
                for name in (b, a):  # a slide of b, then of a (which makes the query due)
                    log.seal(name, 40)
                slide = len(log.subs[a]) - 1
                wait_for(lambda: ws.read_answers(q.id)[1] >= slide, f"the answer for slide {slide}")
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=feed)
    got = []
    with Client(ws.target, timeout=30) as sub:
        answers = sub.subscribe(q.id, timeout=20)
        t.start()
        for ans in answers:
            got.append(ans)
            if {s.stream: s.slide for s in ans.sources}[a] >= 7:
                break
    t.join()
    assert not errors, errors
    assert len(got) >= 2 and all(matches(x, log.expected(x, a, b)) for x in got)
    events = [e for e in ws.history(limit=1_000_000) if e["stream"] in (a, b)]
    report = check(events)
    assert report.errors == [] and report.violations("lws") == []
    ws.unregister(q.id)


@pytest.mark.parametrize("snapshot_mb", ["0.001", "1000"])  # a snapshot and the log's tail; the log alone
def test_a_periodic_timing_join_survives_kill_9(tmp_path, snapshot_mb):
    srv = ServerProcess("--snapshot-every-mb", snapshot_mb, data_dir=str(tmp_path))
    try:
        with Client(srv.target, timeout=30) as ws:
            log, a, b = two_streams(ws, 3)
            q = ws.register(text(a, b, " SLIDE 1 SUBWINDOWS"))
            before = ws.query(text(a, b))
            assert matches(before, log.expected(before, a, b)) and before.rows
    finally:
        srv.proc.kill()
        srv.proc.wait()
    snapshots = [p for p in tmp_path.rglob("snapshots") if p.is_dir()]
    assert any(snapshot.latest(str(p)) for p in snapshots) == (snapshot_mb == "0.001")
    srv = ServerProcess(data_dir=str(tmp_path))
    try:
        with Client(srv.target, timeout=30) as ws:
            log.ws = ws
            again = ws.query(text(a, b))
            assert again.rows == before.rows and [s.slide for s in again.sources] == [4, 4]
            [listed] = ws.list_queries()
            assert listed["query_id"] == q.id
            answers = ws.subscribe(q.id, timeout=20)
            errors = []

            def feed():
                try:
                    wait_for(lambda: any(x["subscribers"] >= 1 for x in ws.list_queries()), "the subscription")
                    log.seal(a, 40)
                except BaseException as e:  # noqa: BLE001
                    errors.append(e)
            t = threading.Thread(target=feed)
            t.start()
            first = next(iter(answers))
            t.join()
            assert not errors, errors
            assert [s.slide for s in first.sources] == [5, 4]
            assert matches(first, log.expected(first, a, b))
    finally:
        srv.stop()
