"""Shared execution on a real server (`serve --sharing`): the answers of a group's members carry
their provenance (the group, and how early an answer came when it ran with the group before its
own SLIDE), each equals the same query run alone AS OF its slide, `stats` counts what sharing did
and `explain` says which group a periodic query would join, or why it runs alone."""
from __future__ import annotations

import re
import urllib.request

import pytest

from conftest import wait_for
from windowstore.clients import Client
from windowstore.server.process import ServerProcess

SCHEMA = {"ts": "int64", "src": "string", "bytes": "int64"}


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--sharing", "aggressive", "--metrics-port", "0") as s:
        yield s


def test_a_group_answers_early_says_so_and_equals_each_query_alone(server):
    with Client(server.target, timeout=30) as ws:
        ws.create_stream("g", schema=SCHEMA, subwindows=6, subwindow_ms=1000, clock="manual", group_by=["src"])
        short = ws.register("SELECT SUM(bytes) FROM g [RANGE 4 SUBWINDOWS SLIDE 1 SUBWINDOWS] WHERE bytes > 1")
        long = ws.register("SELECT src, COUNT(*) FROM g [RANGE 2 SUBWINDOWS SLIDE 3 SUBWINDOWS] WHERE bytes > 1 "
                           "GROUP BY src")
        alone = ws.explain("SELECT MAX(bytes) FROM g [RANGE 2 SUBWINDOWS SLIDE 1 SUBWINDOWS] WHERE bytes < 9")
        assert "joins group" in alone["sharing"] and "CS2" in alone["sharing"], alone["sharing"]
        dup = ws.explain("SELECT SUM(bytes) FROM g [RANGE 4 SUBWINDOWS SLIDE 5 SUBWINDOWS] WHERE bytes > 1")
        assert f"CS8, reuses the output of {short.id!r}" in dup["sharing"], dup["sharing"]
        got = {short.id: [], long.id: []}
        texts = {short.id: "SELECT SUM(bytes) FROM g [RANGE 4 SUBWINDOWS] AS OF SLIDE {k} WHERE bytes > 1",
                 long.id: "SELECT src, COUNT(*) FROM g [RANGE 2 SUBWINDOWS] AS OF SLIDE {k} WHERE bytes > 1 GROUP BY src"}
        for i in range(8):
            ws.append("g", {"ts": [i * 1000, i * 1000 + 1], "src": ["a", "b" if i % 2 else "a"], "bytes": [i, 2 * i]})
            ws.slide("g")
            wait_for(lambda: all(q["last_slide"] >= i for q in ws.list_queries("g")), f"the answers to slide {i}")
            for qid, seen in got.items():  # each new answer against the query alone, while its slide is held
                for a in ws.read_answers(qid, after_slide=seen[-1].slide if seen else -1)[0]:
                    again = ws.query(texts[qid].format(k=a.slide))
                    assert sorted(a.rows) == sorted(again.rows), (qid, a.slide)
                    seen.append(a)
        answers = got[long.id]
        assert len(answers) >= 7  # aggressive: the group runs at its shortest SLIDE
        assert all(a.group for a in answers)
        assert [a.early_slides for a in answers[1:]] and all(a.early_slides == 2 for a in answers[1:])
        assert all(a.early_slides == 0 for a in got[short.id])
        s = ws.stats()["sharing"]
        assert s["mode"] == "aggressive" and s["groups"] == 1 and s["members_per_group"] == [2]
        assert s["executions_saved"] == s["answers"] - s["executions"] > 0 and s["early_runs"] > 0
        url = re.search(r"metrics on (http://[^\s;)]+)", server.banner).group(1)
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        m = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
             if line.startswith("windowstore_sharing")}
        assert m["windowstore_sharing_groups"] == 1 and m["windowstore_sharing_group_members_max"] == 2
        assert m["windowstore_sharing_executions_saved_total"] == s["executions_saved"]
        assert m["windowstore_sharing_early_runs_total"] == s["early_runs"]


def test_a_query_covered_by_others_scans_no_rows_explain_and_stats_say_so(server):
    """Predicate covers (txn/sharing/covers.py): `bytes IS NOT NULL` is `bytes < 10` plus
    `bytes >= 10`: explain names the cover, its answers equal it run alone, stats and Prometheus
    count the executions it saved."""
    with Client(server.target, timeout=30) as ws:
        ws.create_stream("c", schema=SCHEMA, subwindows=6, subwindow_ms=1000, clock="manual", group_by=["src"])
        text = "SELECT SUM(bytes), COUNT(*) FROM c [RANGE {n} SUBWINDOWS SLIDE 1 SUBWINDOWS] WHERE {w}"
        pieces = [ws.register(text.format(n=3, w=w)) for w in ("bytes < 10", "bytes >= 10")]
        covered = text.format(n=2, w="bytes IS NOT NULL")
        why = ws.explain(covered)["sharing"]
        assert "CS6 disjoint cover: this query = " in why and "scans no rows of its own" in why, why
        q = ws.register(covered)
        for i in range(4):
            ws.append("c", {"ts": [i * 1000, i * 1000 + 1], "src": ["a", "b"], "bytes": [i * 5, i * 7]})
            ws.slide("c")
            wait_for(lambda: all(x["last_slide"] >= i for x in ws.list_queries("c")), f"the answers to slide {i}")
        answers = ws.read_answers(q.id, after_slide=-1)[0]
        assert answers and all(a.group for a in answers)
        for a in answers:
            alone = ws.query(f"SELECT SUM(bytes), COUNT(*) FROM c [RANGE 2 SUBWINDOWS] AS OF SLIDE {a.slide} "
                             "WHERE bytes IS NOT NULL")
            assert a.rows == alone.rows, a.slide
        s = ws.stats()["sharing"]
        assert s["cover_executions_saved"] > 0 and s["cover_reads_saved"] >= s["cover_executions_saved"]
        url = re.search(r"metrics on (http://[^\s;)]+)", server.banner).group(1)
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        assert f"windowstore_sharing_cover_executions_saved_total {float(s['cover_executions_saved'])}" in text
        for x in [q, *pieces]:
            ws.unregister(x.id)


POLICY_OF = {"none": "lws", "aggressive": "ttu", "conservative": "ttu-rescan", "hybrid": "lws", "hybrid-late": "ttu",
             "hybrid-lp": "ttu-rescan"}


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(POLICY_OF))
def test_random_dashboards_on_a_server_answer_as_each_query_alone(mode):
    """A random dashboard (tests/test_sharing_engine.py's) registered on a real server: every
    answer each query receives for slide k equals the query run alone AS OF SLIDE k, checked while
    slide k is still held."""
    import random

    from test_sharing_engine import dashboard

    rng = random.Random(list(POLICY_OF).index(mode))  # a fixed seed per mode (str hashes vary by process)
    with ServerProcess("--sharing", mode, "--policy", POLICY_OF[mode]) as srv, Client(srv.target, timeout=30) as ws:
        ws.create_stream("p", schema={"ts": "int64", "k": "string", "v": "int64", "f": "float64"}, subwindows=8,
                         subwindow_ms=10, clock="manual", group_by=["k"])
        board = dashboard(rng, 10)
        ids = {ws.register(text).id: tmpl for text, tmpl in board}
        seen = dict.fromkeys(ids, -1)
        checked = 0
        for i in range(14):
            n = rng.randint(1, 4)
            ws.append("p", {"ts": [i * 10] * n, "k": [rng.choice("abcd") for _ in range(n)],
                            "v": [rng.randint(-5, 20) for _ in range(n)], "f": [rng.random() for _ in range(n)]})
            ws.slide("p")
            wait_for(lambda: all(q["last_slide"] >= i - q["every_slides"] + 1 for q in ws.list_queries("p")),
                     f"every query answered within its SLIDE of slide {i}")
            for qid, tmpl in ids.items():
                for a in ws.read_answers(qid, after_slide=seen[qid])[0]:
                    alone = ws.query(tmpl.format(k=a.slide))
                    assert a.rows == alone.rows, (mode, qid, a.slide, tmpl)
                    seen[qid] = a.slide
                    checked += 1
        assert checked >= 10 and all(s >= 0 for s in seen.values()), seen
        assert ws.stats()["sharing"]["mode"] == mode
