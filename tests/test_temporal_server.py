"""Temporal coalescing queries through a real server: the SDK's one-time and periodic queries
(with their slide and window bounds) and the CLI agree with the DuckDB gaps-and-islands oracle
over the window's rows, rows arriving late; explain names the strategy; a kill -9 and restart on
the same data directory (log replay, then a snapshot) gives the same answers."""
from __future__ import annotations

import random
import subprocess
import sys

import duckdb
import pytest

from conftest import wait_for
from test_temporal import oracle
from windowstore.clients import Client
from windowstore.server.process import ServerProcess

SCHEMA = {"ts": "int64", "sensor": "string", "temp": "int64"}
EXAMPLE_2 = "SELECT sensor, MAX(DURATION(VALID(temp))) FROM readings [RANGE 3 SUBWINDOWS SLIDE 1 SUBWINDOWS] GROUP BY sensor"
ONE_TIME = "SELECT sensor, MAX(DURATION(VALID(temp))) FROM readings [RANGE 3 SUBWINDOWS] GROUP BY sensor"
LONGEST = "SELECT g, MAX(te - ts) FROM iv GROUP BY g ORDER BY g"
LISTING = "SELECT sensor, temp, START(VALID(temp)), END(VALID(temp)) FROM readings [RANGE 3 SUBWINDOWS] GROUP BY sensor"
LISTED = "SELECT g, v, ts, te FROM iv ORDER BY g, ts"


def batches(seed: int, n: int = 6, per: int = 12, oop: float = 0.3) -> list[list[tuple]]:
    """Readings of three sensors, globally unique ts, a share appended one or two slides late."""
    rng = random.Random(seed)
    out: list[list[tuple]] = [[] for _ in range(n)]
    last = {}
    for i in range(n * per):
        s = f"s{rng.randrange(3)}"
        v = last.get(s, 20) if rng.random() < 0.6 else rng.randrange(18, 23)
        last[s] = v
        b = i // per
        if rng.random() < oop:
            b = min(n - 1, b + rng.randint(1, 2))
        out[b].append((i * 10, s, v))
    return out


def columns(batch):
    return {"ts": [r[0] for r in batch], "sensor": [r[1] for r in batch], "temp": [r[2] for r in batch]}


def test_sdk_cli_and_periodic_answers_match_the_oracle_on_every_slide():
    con = duckdb.connect()
    with ServerProcess() as srv, Client(srv.target, timeout=30) as ws:
        ws.create_stream("readings", SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual")
        periodic = ws.register(EXAMPLE_2)
        assert periodic.every_slides == 1
        held: list[list[tuple]] = []
        for k, batch in enumerate(batches(1)):
            ws.append("readings", columns(batch))
            ws.slide("readings")
            held.append(batch)
            window = [r for b in held[-3:] for r in b]
            a = ws.query(ONE_TIME)
            assert a.rows == oracle(con, window, LONGEST) and a.slide == k
            assert ws.query(LISTING).rows == oracle(con, window, LISTED)
            answers = wait_for(lambda: (got := ws.read_answers(periodic.id)[0]) and got[-1].slide == k and got,
                               f"the periodic answer of slide {k}")
            assert answers[-1].rows == a.rows
            assert (answers[-1].window_start_ms, answers[-1].window_end_ms) == (a.window_start_ms, a.window_end_ms)
        how = ws.explain(ONE_TIME)["how"]
        assert "coalesced eager" in how or "coalesced lazy" in how, how
        out = subprocess.run([sys.executable, "-m", "windowstore.server.cli", "query", "--target", srv.target, ONE_TIME],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        for sensor, longest in a.rows:
            assert sensor in out.stdout and str(longest) in out.stdout


@pytest.mark.slow
@pytest.mark.parametrize("snapshots", [False, True])
def test_answers_are_the_same_after_kill_9_and_restart(tmp_path, snapshots):
    args = ("--snapshot-every-mb", "0.001") if snapshots else ()
    srv = ServerProcess(*args, data_dir=str(tmp_path))
    try:
        with Client(srv.target, timeout=30) as ws:
            ws.create_stream("readings", SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual")
            periodic = ws.register(EXAMPLE_2)
            for k, batch in enumerate(batches(2)):
                ws.append("readings", columns(batch))
                ws.slide("readings")
                wait_for(lambda: ws.read_answers(periodic.id)[1] == k, f"the periodic answer of slide {k}")
            before = [ws.query(t).rows for t in (ONE_TIME, LISTING)]
            logged = [(a.slide, a.rows) for a in ws.read_answers(periodic.id)[0]]
    finally:
        srv.proc.kill()
        srv.proc.wait()
    srv = ServerProcess(data_dir=str(tmp_path))
    try:
        with Client(srv.target, timeout=30) as ws:
            assert [ws.query(t).rows for t in (ONE_TIME, LISTING)] == before
            assert [(a.slide, a.rows) for a in ws.read_answers(periodic.id)[0]] == logged
    finally:
        srv.stop()


def test_under_shared_execution_a_temporal_query_runs_alone_and_answers_the_same():
    con = duckdb.connect()
    with ServerProcess("--sharing", "aggressive") as srv, Client(srv.target, timeout=30) as ws:
        ws.create_stream("readings", SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual")
        other = ws.register("SELECT sensor, COUNT(*) FROM readings [RANGE 3 SUBWINDOWS SLIDE 1 SUBWINDOWS] "
                            "WHERE temp > 0 GROUP BY sensor")
        assert "runs alone: temporal coalescing" in ws.explain(EXAMPLE_2)["sharing"]
        periodic = ws.register(EXAMPLE_2)
        held: list[list[tuple]] = []
        for k, batch in enumerate(batches(4)):
            ws.append("readings", columns(batch))
            ws.slide("readings")
            held.append(batch)
            window = [r for b in held[-3:] for r in b]
            answers = wait_for(lambda: (got := ws.read_answers(periodic.id)[0]) and got[-1].slide == k and got,
                               f"the periodic answer of slide {k}")
            assert answers[-1].rows == oracle(con, window, LONGEST)
        assert ws.read_answers(other.id)[1] == k
