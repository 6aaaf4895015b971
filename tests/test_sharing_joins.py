"""Periodic joins sharing one join synopsis (thesis 8.3.2, SS3/CS5; txn/sharing/joins.py,
store/join/shared.py). Random sets of periodic joins over two streams, registered with sharing on,
under every scheduler and policy, with slides of both streams interleaved with executions: every
answer a member receives for slide k equals the same join run alone over the sub-windows of slide k
(its RANGE per stream up to the slide its provenance names: what AS OF SLIDE k would read; joins
have no AS OF, so the one-time join plan, which keeps nothing and answers aggregates from per-key
partials, is run over them) and DuckDB over those sub-windows' rows; the history checker accepts
the history; nothing registered goes unanswered; the joins of one condition form one group."""
from __future__ import annotations

import random

import duckdb
import pyarrow as pa
import pytest

from windowstore.store import WindowSpec
from windowstore.store.join import plan_join
from windowstore.store.parser import parse_statement
from windowstore.txn.commands import Append, CreateStream, Register, Slide, Unregister
from windowstore.txn.engine import Engine, EngineConfig
from windowstore.txn.history import History
from windowstore.txn.sharing import SharingMode
from reference import same
from sharing_checks import run_accepted, sharing_consistent

COLUMNS = (("ts", "int64"), ("k", "string"), ("v", "int64"))
N = {"a": 6, "b": 5}  # sub-windows in each stream's window

# (store text with {ra} {rb} {sa} {sb} {where}, DuckDB SQL over tables A, B with {where})
SELECTS = [
    ("SELECT COUNT(*), SUM(x.v), SUM(y.v) FROM {src} {where}",
     "SELECT COUNT(*), SUM(x.v), SUM(y.v) FROM {src} {where}"),
    ("SELECT MIN(x.v), MAX(y.v), AVG(y.v) FROM {src} {where}",
     "SELECT MIN(x.v), MAX(y.v), AVG(y.v) FROM {src} {where}"),
    ("SELECT x.k, COUNT(*), MAX(y.v) FROM {src} {where} GROUP BY x.k",
     "SELECT x.k, COUNT(*), MAX(y.v) FROM {src} {where} GROUP BY x.k ORDER BY x.k"),
    ("SELECT x.k, SUM(y.v) AS t FROM {src} {where} GROUP BY x.k ORDER BY t DESC LIMIT 2",
     "SELECT x.k, SUM(y.v) AS t FROM {src} {where} GROUP BY x.k ORDER BY t DESC, x.k LIMIT 2"),
    ("SELECT COUNT(DISTINCT y.v) FROM {src} {where}",
     "SELECT COUNT(DISTINCT y.v) FROM {src} {where}"),
]
WHERES = ["", "WHERE x.v > 3"]


def board(rng: random.Random, n: int) -> list[dict]:
    out = []
    for _ in range(n):
        store, sql = rng.choice(SELECTS)
        where = rng.choice(WHERES)
        ra, rb = rng.randint(1, N["a"]), rng.randint(1, N["b"])
        sa = rng.randint(1, 3)
        sb = f" SLIDE {rng.randint(1, 3)} SUBWINDOWS" if rng.random() < 0.1 else ""  # due on b too: runs alone
        src = (f"a x [RANGE {ra} SUBWINDOWS SLIDE {sa} SUBWINDOWS] JOIN b y [RANGE {rb} SUBWINDOWS{sb}] "
               f"ON x.k = y.k")
        alone = f"a x [RANGE {ra} SUBWINDOWS] JOIN b y [RANGE {rb} SUBWINDOWS] ON x.k = y.k"
        out.append({"text": store.format(src=src, where=where), "alone": store.format(src=alone, where=where),
                    "sql": sql.format(src="A x JOIN B y ON x.k = y.k", where=where), "n": {"a": ra, "b": rb}})
        if rng.random() < 0.2:  # an exact duplicate, or the same with a longer SLIDE (CS8)
            out.append(dict(out[-1], text=out[-1]["text"].replace(f"SLIDE {sa} ", f"SLIDE {sa + rng.randint(0, 1)} ")))
    return out


def rows(rng: random.Random, ts: int, n: int) -> pa.Table:
    return pa.table({"ts": pa.array([ts] * n, pa.int64()),
                     "k": pa.array([rng.choice("abc") for _ in range(n)], pa.string()),
                     "v": pa.array([rng.randint(-2, 9) for _ in range(n)], pa.int64())})


def window_of(e: Engine, name: str, newest: int, n: int):
    """The sub-windows of `name`'s window after slide `newest` (its n youngest), or None if one has
    left the window since."""
    w = e.stream(name).window
    out = []
    for v in range(newest, max(newest - n, -1), -1):
        sub = w.subs[v % w.n]
        if sub is None or sub.slide != v:
            return None
        out.append(sub)
    return out


def decoded(e: Engine, name: str, subs) -> pa.Table:
    strings = e.stream(name).strings
    ts, ks, vs = [], [], []
    for sub in subs:
        ts += sub.columns["ts"].tolist()
        ks += list(strings.decode(sub.columns["k"]))
        vs += sub.columns["v"].tolist()
    return pa.table({"ts": pa.array(ts, pa.int64()), "k": pa.array(ks, pa.string()), "v": pa.array(vs, pa.int64())})


def run(mode: str, policy: str, seed: int, slides: int = 20):
    rng = random.Random(seed)
    history = History(None, keep=10_000_000)
    e = Engine(EngineConfig(policy=policy, sharing=mode), history)
    for name in N:
        e.apply(CreateStream(name, COLUMNS, "ts", WindowSpec(N[name], 10, None, "manual", 0, ("k",), 4), 0))
    got: list = []
    e.on_answer = lambda qid, r: got.append((qid, r))
    queries = {f"J{i}": q for i, q in enumerate(board(rng, rng.randint(3, 9)))}
    for qid, q in queries.items():
        e.apply(Register(qid, q["text"], 0, 0))
    answered = dict.fromkeys(queries, 0)
    checked = 0
    con = duckdb.connect()
    ts = 0
    for j in range(slides):
        for name in N:
            for _ in range(rng.randint(0, 2)):
                ts += 1
                e.apply(Append(name, rows(rng, ts, rng.randint(0, 4)), "", None, ts))
                if rng.random() < 0.5:  # slides interleave with executions: conflicts, aborts, restarts
                    e.sched.step()
            if name == "a" or rng.random() < 0.7:
                e.apply(Slide(name, ts))
            for _ in range(rng.randint(0, 4)):
                e.sched.step()
        if j == slides // 2:  # one goes, mid-run
            gone = rng.choice(sorted(queries))
            e.apply(Unregister(gone, ts))
            del queries[gone], answered[gone]
        if j == slides // 3:  # others come, beside partners that have answered already
            for i, q in enumerate(board(rng, rng.randint(1, 3))):
                e.apply(Register(f"L{i}", q["text"], 0, ts))
                queries[f"L{i}"], answered[f"L{i}"] = q, 0
        e.sched.run_until_idle()
        e._check()
        for qid, r in got:
            if qid not in queries:
                continue
            answered[qid] += 1
            q = queries[qid]
            newest = {s.stream: s.slide for s in r.sources}
            subs = {name: ([] if newest[name] < 0 else window_of(e, name, newest[name], q["n"][name]))
                    for name in N}
            if any(v is None for v in subs.values()):
                continue  # a sub-window it read has left the window since: no reference now
            streams = {name: e.stream(name) for name in N}
            alone = plan_join(parse_statement(q["alone"]), streams, cache=False)
            want = alone.evaluate([subs["a"], subs["b"]]).rows
            assert r.answer.rows == want, (mode, policy, qid, r.slide, q["text"], r.group)
            con.register("A", decoded(e, "a", subs["a"]))
            con.register("B", decoded(e, "b", subs["b"]))
            duck = [tuple(x) for x in con.execute(q["sql"]).fetchall()]
            assert same(r.answer.rows, duck), (mode, policy, qid, q["sql"], r.answer.rows, duck)
            checked += 1
        got.clear()
    run_accepted(answered, history, policy)  # nothing registered goes unanswered; the history checker passes
    return e, checked


@pytest.mark.parametrize("policy", ["lws", "ttu", "ttu-rescan", "ws"])
@pytest.mark.parametrize("mode", [m.value for m in SharingMode])
@pytest.mark.parametrize("seed", range(2))
def test_shared_join_answers_equal_the_join_alone_and_duckdb(mode, policy, seed):
    e, checked = run(mode, policy, seed)
    sharing_consistent(e, checked, mode, policy)
    if mode != "none":
        assert e.sched.sharing.stats()["join_answers"] > 0


def test_joins_of_one_condition_share_one_synopsis_and_explain_says_so():
    """Four joins of one condition at different RANGEs (SS3) and aggregates, SLIDE 1: one group,
    one execution per slide answering all four (CS5); a fifth with another WHERE is a group of its
    own; one due on b's slides too runs alone, and explain says why for each."""
    e = Engine(EngineConfig(policy="ttu", sharing="hybrid"))
    for name in N:
        e.apply(CreateStream(name, COLUMNS, "ts", WindowSpec(N[name], 10, None, "manual", 0, ("k",), 4), 0))
    src = "a x [RANGE {} SUBWINDOWS SLIDE 1 SUBWINDOWS] JOIN b y [RANGE {} SUBWINDOWS{}] ON x.k = y.k"
    texts = {"Q0": f"SELECT COUNT(*) FROM {src.format(2, 3, '')}",
             "Q1": f"SELECT SUM(x.v), MAX(y.v) FROM {src.format(5, 1, '')}",
             "Q2": f"SELECT x.k, COUNT(*) FROM {src.format(3, 5, '')} GROUP BY x.k",
             "Q3": f"SELECT COUNT(*) FROM {src.format(6, 5, '')}",
             "W": f"SELECT COUNT(*) FROM {src.format(2, 3, '')} WHERE y.v > 1",
             "B": f"SELECT COUNT(*) FROM {src.format(2, 3, ' SLIDE 1 SUBWINDOWS')}"}
    for qid, text in texts.items():
        e.apply(Register(qid, text, 0, 0))
    sharing = e.sched.sharing
    g = {qid: sharing.groups.group_id(qid) for qid in texts}
    assert g["Q0"] == g["Q1"] == g["Q2"] == g["Q3"] and g["Q0"][1] == "CS5"
    assert g["W"] != g["Q0"] and g["W"][1] == "CS5"
    assert g["B"][0] == "alone"
    assert "SS3/CS5" in sharing.groups.explain("Q1")["why"]
    assert "first stream" in sharing.groups.explain("B")["why"]
    plan = e.plan(parse_statement(f"SELECT MIN(y.v) FROM {src.format(4, 2, '')}"), periodic=True)
    said = sharing.explain(plan, 1)
    assert "joins group" in said and "SS3/CS5" in said and "Q0" in said
    rng = random.Random(5)
    got: list = []
    e.on_answer = lambda qid, r: got.append(qid)
    for ts in range(1, 9):
        for name in N:
            e.apply(Append(name, rows(rng, ts, 5), "", None, ts))
            e.apply(Slide(name, ts))
        e.sched.run_until_idle()
        e._check()
    s = sharing.stats()
    assert s["join_groups"] == 1  # W alone in its group, B alone
    assert s["join_answers"] == s["answers"] == 4 * s["executions"] and s["executions"] == 8
    assert all(got.count(q) == 8 for q in texts), {q: got.count(q) for q in texts}
    (synopsis,) = sharing.join_synopses.values()
    assert synopsis.executions == 8 and synopsis.answered == 32
    e.apply(Unregister("Q0", 9))
    e.apply(Unregister("Q1", 9))
    e.apply(Unregister("Q2", 9))
    assert len(sharing.join_synopses) == 1  # Q3 is left: its group (and synopsis) with it
    e.apply(Unregister("Q3", 9))
    assert not sharing.join_synopses
    sharing._check()
