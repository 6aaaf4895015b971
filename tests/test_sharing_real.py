"""The real-server run of the thesis's 8.5 experiment (bench/sharing_real.py), at a tiny scale: its
figures are those of the answers it received. Its lateness, counted from the answers' slides, is the
server's own `late_slides` provenance for every answer; its throughput counts the answers delivered
in the measured span; its latency is the mean of the server's late_slides per query, averaged over
the queries; the answers it measured equal the same queries run alone AS OF their slides."""
from __future__ import annotations

import pytest

from bench.sharing_real import KEYS, Ingest, check, drive, figures, lateness, panels
from windowstore.clients import Client
from windowstore.server.process import ServerProcess


@pytest.mark.slow
@pytest.mark.parametrize("ingest", list(Ingest))
def test_the_real_runs_figures_are_those_of_the_answers_it_received(ingest):
    """Under either ingest: the driver's own calls, or a writer process with a thread per stream."""
    items = panels(1, streams=len(KEYS) if ingest is Ingest.WRITER else 1)
    # one query per group: 8 queries, WINDOW 20..100 and SLIDE 1..WINDOW/2 sub-windows
    with ServerProcess("--sharing", "conservative") as s:
        cpu_start = s.cpu_seconds()
        run = drive(s.target, items, rate=1500, subwindow_ms=50, warmup_s=0.5, seconds=2.5, register_s=30,
                    cpu=s.cpu_seconds, ingest=ingest)
        cpu_end = s.cpu_seconds()
        with Client(s.target, timeout=60) as ws:
            checked = check(ws, run, count=20)
    assert len(run.panels) == len(items) == len(KEYS)
    f = figures(run)

    late_seen, per_query, delivered = 0, [], 0
    for qid, p in run.panels.items():
        got = sorted(run.answers[qid], key=lambda a: a.slide)
        assert lateness(got, p.period) == [b.late_slides for b in got[1:]], qid  # the server's provenance agrees
        inside = [a for a in got[1:] if run.t0_ms <= a.answered_ms <= run.t1_ms]
        delivered += len(inside) + (bool(got) and run.t0_ms <= got[0].answered_ms <= run.t1_ms)
        late_seen += sum(a.late_slides > 0 for a in inside)
        if inside:
            per_query.append(sum(a.late_slides for a in inside) / len(inside))
        assert all(a.slide <= run.slide1 for a in got)
    assert f["answers"] == delivered > 0
    assert f["throughput"] == pytest.approx(delivered / f["seconds"], rel=0.01)
    assert f["latency"] == pytest.approx(sum(per_query) / len(per_query), abs=1e-3)
    assert f["late_answers"] == late_seen
    assert f["slides"] == run.slide1 - run.slide0 > 0
    assert checked > 0  # answers of the measured span equal their queries run alone AS OF their slides
    assert f["onetime"] == len(run.onetime_server_ms) >= 1
    # the server's CPU over the measured span: some, and within the whole run's
    assert 0 < f["server_cpu_s"] <= cpu_end - cpu_start
    assert f["answers_per_cpu_s"] == pytest.approx(delivered / run.server_cpu_s, rel=0.01)
