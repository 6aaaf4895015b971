"""The sketch aggregates end to end: declared through the SDK and the CLI, carried by the proto
(StreamSpec.sketches, Answer.bounds), answered with their bounds, refused with INVALID_ARGUMENT
naming the column; and the same answers after a kill -9 and restart."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import wait_for
from windowstore.clients import Client, InvalidArgument
from windowstore.server.process import ServerProcess

SCHEMA = {"ts": "int64", "src": "string", "bytes": "int64", "port": "int64"}
SKETCHES = {"bytes": ("kll", 64), "src": ("hll", 10), "port": "frequent"}
QUERIES = ["SELECT APPROX_QUANTILE(bytes, 0.5), APPROX_COUNT_DISTINCT(src), COUNT(*) FROM s",
           "SELECT APPROX_TOP_K(port, 3) FROM s", "SELECT APPROX_COUNT_DISTINCT(src) FROM s [RANGE 1 SUBWINDOWS]"]


def fill(ws, rows: int = 50) -> None:
    ws.create_stream("s", SCHEMA, subwindows=3, subwindow_ms=1000, clock="manual", sketches=SKETCHES)
    rng = np.random.default_rng(3)
    for b in range(4):
        ws.append("s", {"ts": list(range(b * 1000, b * 1000 + rows)), "src": [f"h{i}" for i in rng.integers(0, 40, rows)],
                        "bytes": rng.integers(0, 10_000, rows).tolist(), "port": (rng.zipf(1.5, rows) % 100).tolist()})
        ws.slide("s")


def answers(ws):
    return [(a.rows, a.bounds, a.exact) for a in (ws.query(q) for q in QUERIES)]


@pytest.fixture(scope="module")
def server():
    with ServerProcess() as s:
        yield s


def test_sketches_are_declared_described_and_answered_with_their_bounds(server):
    with Client(server.target, timeout=30) as ws:
        fill(ws)
        spec = ws.describe_stream("s")["spec"]
        assert [(s["column"], s["kind"], s["size"]) for s in spec["sketches"]] == \
            [("bytes", "kll", 64), ("port", "frequent", 10), ("src", "hll", 10)]
        a = ws.query(QUERIES[0])
        assert not a.exact and len(a.rows) == 1 and a.rows[0][2] == 150
        q, d = a.bounds
        assert (q.row, q.column, q.sketch, q.confidence) == (0, 0, "kll", 0.99) and 0 < q.rank_error < 0.1
        assert (d.row, d.column, d.sketch) == (0, 1, "hll") and d.lower <= a.rows[0][1] <= d.upper + 1
        top = ws.query(QUERIES[1])
        assert len(top.rows) == len(top.bounds) <= 3 and all(b.lower <= b.estimate <= b.upper for b in top.bounds)
        # exist_ok compares the definition as the server describes it
        ws.create_stream("s", SCHEMA, subwindows=3, subwindow_ms=1000, clock="manual", sketches=SKETCHES,
                         exist_ok=True)
        ws.drop_stream("s")


def test_bad_declarations_and_undeclared_sketches_are_invalid_argument_naming_the_column(server):
    with Client(server.target, timeout=30) as ws:
        with pytest.raises(InvalidArgument, match="'src'"):
            ws.create_stream("bad", SCHEMA, subwindows=3, subwindow_ms=1000, sketches={"src": "kll"})
        with pytest.raises(InvalidArgument, match="unknown sketch kind"):
            ws.create_stream("bad", SCHEMA, subwindows=3, subwindow_ms=1000, sketches={"src": "theta"})
        ws.create_stream("plain", SCHEMA, subwindows=3, subwindow_ms=1000, clock="manual")
        with pytest.raises(InvalidArgument, match="column 'bytes'.*sketches=") as e:
            ws.query("SELECT APPROX_QUANTILE(bytes, 0.5) FROM plain")
        assert "--sketch bytes=kll" in str(e.value)
        ws.drop_stream("plain")


def test_the_cli_declares_sketches_and_prints_the_bounds(server):
    def cli(*args):
        out = subprocess.run([sys.executable, "-m", "windowstore.server.cli", *args, "--target", server.target],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return out.stdout

    cli("create-stream", "c", "--schema", "ts:int64,src:string,bytes:int64,port:int64", "--subwindows", "2",
        "--subwindow-ms", "1000", "--clock", "manual", "--sketch", "bytes=kll:100", "--sketch", "src=cpc")
    with Client(server.target, timeout=30) as ws:
        ws.append("c", {"ts": [1, 2, 3], "src": ["a", "b", "a"], "bytes": [5, 7, 9], "port": [1, 1, 2]})
        ws.slide("c")
    text = cli("query", "SELECT APPROX_QUANTILE(bytes, 0.5), APPROX_COUNT_DISTINCT(src) FROM c")
    assert "true rank within +-" in text and "true distinct count in [" in text
    got = json.loads(cli("query", "SELECT APPROX_COUNT_DISTINCT(src) FROM c", "--output", "json"))
    assert got["rows"] == [[2]] and got["bounds"][0]["sketch"] == "cpc" and got["bounds"][0]["lower"] <= 2


@pytest.mark.slow
@pytest.mark.parametrize("snapshots", [False, True])
def test_the_same_answers_after_kill_9_and_restart(tmp_path, snapshots):
    """Sub-windows of 50 rows: KLL (k = 64) keeps them without compacting, so its replay from the
    log is exact too (larger sub-windows: see test_approx's replay test). A periodic query's
    logged answers keep their bounds."""
    args = ("--snapshot-every-mb", "0.001") if snapshots else ()
    srv = ServerProcess(*args, data_dir=str(tmp_path))
    with Client(srv.target, timeout=30) as ws:
        fill(ws)
        periodic = ws.register("SELECT APPROX_COUNT_DISTINCT(src), APPROX_QUANTILE(bytes, 0.9) FROM s "
                               "[RANGE 2 SUBWINDOWS SLIDE 1 SUBWINDOWS]")
        ws.append("s", {"ts": [9000], "src": ["x"], "bytes": [1], "port": [1]})
        ws.slide("s")
        kept = wait_for(lambda: ws.read_answers(periodic.id)[0], "a periodic answer")
        assert all(len(a.bounds) == 2 and a.bounds[0].sketch == "hll" for a in kept)
        before = answers(ws)
    srv.proc.kill()
    srv.proc.wait()
    srv = ServerProcess(data_dir=str(tmp_path))
    try:
        with Client(srv.target, timeout=30) as ws:
            assert answers(ws) == before
            after = ws.read_answers(periodic.id)[0]
            assert [(a.slide, a.rows, a.bounds) for a in after] == [(a.slide, a.rows, a.bounds) for a in kept]
    finally:
        srv.stop()


@pytest.mark.slow
def test_compacted_kll_sketches_answer_the_same_after_kill_9_and_replay(tmp_path):
    """Sub-windows of 5,000 rows: KLL (k = 64) compacts with the library's random bits. No snapshot
    is taken, so the restart seals every sub-window again from the log; the log kept each sealed
    KLL sketch's bytes (SealedSketches) and the replay puts them back: every quantile the same."""
    queries = [f"SELECT APPROX_QUANTILE(bytes, {q}) FROM s" for q in (0.1, 0.25, 0.5, 0.75, 0.9)]
    srv = ServerProcess(data_dir=str(tmp_path))
    with Client(srv.target, timeout=30) as ws:
        fill(ws, rows=5000)
        before = [(a.rows, a.bounds) for a in (ws.query(q) for q in queries)]
    srv.proc.kill()
    srv.proc.wait()
    srv = ServerProcess(data_dir=str(tmp_path))
    try:
        with Client(srv.target, timeout=30) as ws:
            assert [(a.rows, a.bounds) for a in (ws.query(q) for q in queries)] == before
    finally:
        srv.stop()
