"""Shared execution on a real server (`serve --sharing`): the answers of a group's members carry
their provenance (the group, and how early an answer came when it ran with the group before its
own SLIDE), each equals the same query run alone AS OF its slide, `stats` counts what sharing did
and `explain` says which group a periodic query would join, or why it runs alone."""
from __future__ import annotations

import pytest

from conftest import wait_for
from windowstore.clients import Client
from windowstore.server.process import ServerProcess

SCHEMA = {"ts": "int64", "src": "string", "bytes": "int64"}


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--sharing", "aggressive") as s:
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
