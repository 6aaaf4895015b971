"""AS OF SLIDE k: a one-time query pinned to the window as it stood right after slide k (the Spark
batch reader's partitions and task retries all read the same slide through it). The parser and the
structured form, the binder's refusals, the scheduler's pinned read under every policy (slides
during it never change its answer; an expired or future slide is refused, naming what it can answer)
and the isolation checker's verdict on it."""
from __future__ import annotations

import sqlite3

import pytest

from windowstore.server.convert import query_from_pb, query_to_pb
from windowstore.store import InvalidInput, Stream, WindowSpec, parse_query, plan_query
from windowstore.store.parser import parse_statement, to_text
from windowstore.store.planner import run_plan
from windowstore.txn import POLICIES, History, Scheduler, check
from windowstore.txn.engine import FailedPrecondition


def test_text_and_structured_forms():
    text = "SELECT src, SUM(v) FROM s [RANGE 2 SUBWINDOWS] AS OF SLIDE 42 WHERE v > 1 GROUP BY src"
    q = parse_query(text)
    assert q.as_of_slide == 42 and q.range.value == 2
    assert parse_statement(to_text(q)) == q and query_from_pb(query_to_pb(q)) == q
    assert parse_query("SELECT COUNT(*) FROM s").as_of_slide is None
    assert query_to_pb(parse_query("SELECT COUNT(*) FROM s")).HasField("as_of_slide") is False
    inner = parse_query("SELECT MEDIAN(t) FROM (SELECT src, SUM(v) AS t FROM s AS OF SLIDE 3 GROUP BY src)")
    assert inner.as_of_slide == 3 and parse_statement(to_text(inner)) == inner
    with pytest.raises(InvalidInput, match="expected SLIDE"):
        parse_query("SELECT COUNT(*) FROM s AS OF 3")
    with pytest.raises(InvalidInput, match="expected a slide number"):
        parse_query("SELECT COUNT(*) FROM s AS OF SLIDE -1")
    with pytest.raises(InvalidInput, match="AS OF SLIDE is not available for joins"):
        parse_statement("SELECT COUNT(*) FROM s AS OF SLIDE 3 JOIN t ON s.a = t.a")
    join = query_to_pb(parse_statement("SELECT COUNT(*) FROM s JOIN t ON s.a = t.a"))
    join.as_of_slide = 3
    with pytest.raises(InvalidInput, match="AS OF SLIDE is not available for joins \\(field as_of_slide\\)"):
        query_from_pb(join)


def stream(n=4):
    return Stream("s", {"ts": "int64", "src": "string", "v": "int64"},
                  WindowSpec(subwindows=n, subwindow_ms=1, clock="manual", group_by=("src",)), 0)


def test_binder_refuses_as_of_with_slide():
    with pytest.raises(InvalidInput, match="periodic query \\(SLIDE\\) cannot take it"):
        plan_query(parse_query("SELECT COUNT(*) FROM s [RANGE 1 SUBWINDOWS SLIDE 1 SUBWINDOWS] AS OF SLIDE 1"), stream())


ROWS = {j: [(j * 10 + i, f"h{(i + j) % 3}", (i * 7 + j) % 11) for i in range(5)] for j in range(12)}


def fill(sched, s, slides):
    for j in slides:
        s.append({"ts": [r[0] for r in ROWS[j]], "src": [r[1] for r in ROWS[j]], "v": [r[2] for r in ROWS[j]]})
        sched.request_slide("s")
        assert sched.step() == "slide"


def reference(k: int, n_q: int, where: str = "") -> list[tuple]:
    """SQLite over the rows appended with slides k - n_q + 1 .. k (an independent engine)."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (slide INT, ts INT, src TEXT, v INT)")
    db.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", [(j, *r) for j, rows in ROWS.items() for r in rows])
    return db.execute(f"SELECT src, SUM(v), COUNT(*) FROM t WHERE slide BETWEEN ? AND ? {where} "
                      "GROUP BY src ORDER BY src", (max(0, k - n_q + 1), k)).fetchall()


TEXT = "SELECT src, SUM(v), COUNT(*) FROM s [RANGE 2 SUBWINDOWS] AS OF SLIDE {k} GROUP BY src"


@pytest.mark.parametrize("policy", POLICIES)
def test_a_pinned_read_answers_slide_k_while_slides_go_on(policy):
    now = [0]
    h = History()
    s = stream()
    sched = Scheduler(policy, clock=lambda: now[0], history=h)
    sched.add_stream(s)
    fill(sched, s, range(6))                       # slides 0..5: the window holds 2..5
    for access in ("window", "synopsis"):
        txn = sched.submit(plan_query(parse_query(TEXT.format(k=4)), s, access=access))
        assert sched.step() == "read"              # reads slide 3 (the older one) first
        s.append({"ts": [99], "src": ["h0"], "v": [1000]})
        sched.request_slide("s")                   # slide 6 overwrites slide 2: not one of slide 4's
        sched.run_until_idle()
        assert txn.error is None and txn.result.restarts == 0
        assert txn.result.slide == 4 and txn.result.answer.rows == reference(4, 2)
        ROWS[6 if access == "window" else 7] = [(99, "h0", 1000)]
    report = check(h.events)
    assert report.errors == [] and report.violations("lws") == []
    assert [v.level for v in report.verdicts] == ["as_of", "as_of"] and report.summary()["as_of"] == 2
    assert all(v.reflects == 4 and v.versions == [3, 4] for v in report.verdicts)
    assert [e.get("as_of") for e in h.events if e["op"] == "b"] == [4, 4]


def test_two_reads_of_one_slide_are_identical_and_equal_the_latest_read_then():
    now = [0]
    s = stream()
    sched = Scheduler("ttu", clock=lambda: now[0])
    sched.add_stream(s)
    fill(sched, s, range(4))
    current = sched.submit(plan_query(parse_query(TEXT.format(k=3).replace(" AS OF SLIDE 3", "")), s))
    first = sched.submit(plan_query(parse_query(TEXT.format(k=3)), s))
    sched.run_until_idle()
    fill(sched, s, [4])
    again = sched.submit(plan_query(parse_query(TEXT.format(k=3)), s))
    sched.run_until_idle()
    assert first.result.answer.rows == again.result.answer.rows == current.result.answer.rows == reference(3, 2)
    assert run_plan(plan_query(parse_query(TEXT.format(k=3)), s)).rows == reference(3, 2)


def test_an_expired_or_future_slide_is_refused_naming_the_slides_it_can_answer():
    h = History()
    s = stream()
    sched = Scheduler("ttu", clock=lambda: 0, history=h)
    sched.add_stream(s)
    fill(sched, s, range(6))  # window: slides 2..5; RANGE 2 answers slides 3..5, the whole window slide 5
    for k, why in ((2, "slide 2's sub-windows have left the window \\(it holds slides 2 to 5\\)"),
                   (6, "slide 6 has not happened yet \\(the latest slide is 5\\)")):
        txn = sched.submit(plan_query(parse_query(TEXT.format(k=k)), s))
        sched.run_until_idle()
        assert isinstance(txn.error, FailedPrecondition)
        with pytest.raises(FailedPrecondition, match=f"AS OF SLIDE {k} on stream 's': {why}; it can answer "
                                                     "AS OF SLIDE 3 to 5 for this RANGE \\(2 sub-windows\\)"):
            raise txn.error
    assert not [e for e in h.events if e["op"] in "bca" and e["txn"].startswith("Q")]  # never began


def test_a_slide_overwriting_an_unread_sub_window_of_slide_k_ends_the_read():
    h = History()
    s = stream()
    sched = Scheduler("ttu", clock=lambda: 0, history=h)
    sched.add_stream(s)
    fill(sched, s, range(6))
    txn = sched.submit(plan_query(parse_query(TEXT.format(k=3)), s, access="window"))
    assert sched.step() == "read"          # read slide 2 (the oldest)
    fill(sched, s, [6, 7])                 # slide 7 overwrites slide 3, unread
    sched.run_until_idle()
    assert isinstance(txn.error, FailedPrecondition) and "left the window while the query read them" in str(txn.error)
    report = check(h.events)
    assert report.errors == [] and report.aborts == 1 and report.verdicts == []


def test_the_checker_finds_a_pinned_read_that_read_another_window():
    h = History()
    h.record("s", "w", "T0", 0, 0, 0)
    h.record("s", "c", "T0", 0)
    h.record("s", "w", "T1", 0, 1, 1)
    h.record("s", "c", "T1", 0)
    h.record("s", "b", "Q1", 0, window_len=1, as_of=0)
    h.record("s", "r", "Q1", 0, 1, 1)      # read slide 1's sub-window, pinned to slide 0
    h.record("s", "c", "Q1", 0)
    report = check(h.events)
    assert [v.level for v in report.verdicts] == ["torn"] and len(report.violations("ws")) == 1


# -- plain projections (SELECT columns, no aggregate): the rows of the window ---------------------------
def test_a_projection_returns_the_rows_of_slide_k_with_nulls_and_filters_as_sqlite_does():
    s = Stream("s", {"ts": "int64", "src": "string", "v": "int64", "ok": "boolean", "p": "decimal(6,2)"},
               WindowSpec(subwindows=4, subwindow_ms=1, clock="manual"), 0)
    sched = Scheduler("ttu", clock=lambda: 0, history=(h := History()))
    sched.add_stream(s)
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (slide INT, ts INT, src TEXT, v INT, ok INT, p TEXT)")
    for j in range(6):
        batch = [(j * 10 + i, None if i == 3 else f"h{i % 3}", None if i == 1 else i * j, None if i == 2 else i % 2 == 0,
                  None if i == 4 else f"{i}.{j}5") for i in range(5)]
        s.append({c: [r[n] for r in batch] for n, c in enumerate(("ts", "src", "v", "ok", "p"))})
        db.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)", [(j, *r) for r in batch])
        sched.request_slide("s")
        sched.step()
    from decimal import Decimal

    def ref(lo, hi, where=""):
        return [(ts, src, v, None if ok is None else bool(ok), None if p is None else Decimal(p))
                for ts, src, v, ok, p in db.execute(
                    f"SELECT ts, src, v, ok, p FROM t WHERE slide BETWEEN ? AND ? {where} ORDER BY slide, ts", (lo, hi))]

    for text, lo, hi, where in [
            ("SELECT ts, src, v, ok, p FROM s", 2, 5, ""),
            ("SELECT ts, src, v, ok, p FROM s [RANGE 2 SUBWINDOWS] AS OF SLIDE 4 WHERE v > 2 OR src IS NULL", 3, 4,
             "AND (v > 2 OR src IS NULL)"),
            ("SELECT ts, src, v, ok, p FROM s [RANGE 1 SUBWINDOWS] AS OF SLIDE 2 WHERE src IN ('h0', 'h2')", 2, 2,
             "AND src IN ('h0', 'h2')")]:
        txn = sched.submit(plan_query(parse_query(text), s))
        sched.run_until_idle()
        assert txn.result.answer.rows == ref(lo, hi, where), text
        assert txn.result.answer.types == ["int64", "string", "int64", "boolean", "decimal(6,2)"]
    # ORDER BY selected columns (NULLs last both ways, ties in window order) and LIMIT
    for text, sql in [
            ("SELECT ts, src, v FROM s ORDER BY v DESC LIMIT 7", "ORDER BY v DESC NULLS LAST, slide, ts LIMIT 7"),
            ("SELECT src AS h, v, ts FROM s WHERE v < 9 ORDER BY h, 2 DESC", "AND v < 9 ORDER BY src NULLS LAST, v DESC NULLS LAST, slide, ts"),
            ("SELECT ts, v, src FROM s [RANGE 2 SUBWINDOWS] AS OF SLIDE 5 ORDER BY src DESC, v LIMIT 4",
             "AND slide >= 4 ORDER BY src DESC NULLS LAST, v NULLS LAST, slide, ts LIMIT 4"),
            ("SELECT ts, ok FROM s LIMIT 3", "ORDER BY slide, ts LIMIT 3")]:
        txn = sched.submit(plan_query(parse_query(text), s))
        sched.run_until_idle()
        cols = [c.split(" AS ")[0] for c in text[len("SELECT "):text.index(" FROM")].split(", ")]
        want = db.execute(f"SELECT {', '.join(cols)} FROM t WHERE slide BETWEEN 2 AND 5 {sql}").fetchall()
        want = [tuple(None if x is None else bool(x) if c == "ok" else x for c, x in zip(cols, r)) for r in want]
        assert txn.result.answer.rows == want, text
    report = check(h.events)
    assert report.errors == [] and report.violations("lws") == [] and len(report.verdicts) == 7
    for text, msg in [("SELECT ts FROM s ORDER BY COUNT(*)", "cannot ORDER BY an aggregate"),
                      ("SELECT ts FROM s ORDER BY v", "orders by its selected columns"),
                      ("SELECT ts FROM s ORDER BY 2", "not a select item")]:
        with pytest.raises(InvalidInput, match=msg):
            plan_query(parse_query(text), s)
    with pytest.raises(InvalidInput, match="must be aggregated or be the GROUP BY column"):
        plan_query(parse_query("SELECT ts, COUNT(*) FROM s"), s)


@pytest.mark.slow
def test_the_sdk_pins_text_and_structured_queries_and_the_server_refuses_with_failed_precondition():
    from windowstore.clients import Client
    from windowstore.clients import FailedPrecondition as ClientFailedPrecondition
    from windowstore.server.process import ServerProcess

    with ServerProcess() as srv, Client(srv.target) as c:
        c.create_stream("x", {"ts": "int64", "v": "int64"}, subwindows=3, subwindow_ms=1000, clock="manual")
        for j in range(5):
            c.append("x", {"ts": [j], "v": [j + 1]})
            c.slide("x")
        text = "SELECT SUM(v), COUNT(*) FROM x [RANGE 2 SUBWINDOWS]"
        a = c.query(text, as_of_slide=3)
        assert (a.rows, a.slide) == ([(3 + 4, 2)], 3)
        assert c.query(text + " AS OF SLIDE 4").rows == [(4 + 5, 2)] == c.query(text).rows
        structured = query_to_pb(parse_query(text))
        assert c.query(structured, as_of_slide=3).rows == [(3 + 4, 2)] and not structured.HasField("as_of_slide")
        with pytest.raises(ClientFailedPrecondition, match="AS OF SLIDE 2 on stream 'x': slide 2's sub-windows have "
                                                           "left the window \\(it holds slides 2 to 4\\); it can answer "
                                                           "AS OF SLIDE 3 to 4"):
            c.query(text, as_of_slide=2)
        with pytest.raises(ClientFailedPrecondition, match="slide 5 has not happened yet"):
            c.query(text, as_of_slide=5)


@pytest.mark.parametrize("policy", POLICIES)
def test_pinned_reads_interleaved_with_slides_answer_their_slide_or_are_refused(policy):
    """Random interleavings (seeded): every pinned read that commits equals SQLite over its slide's
    rows, every other one is refused with FAILED_PRECONDITION, and the checker accepts the history."""
    import random

    rnd = random.Random(7)
    h = History()
    s = stream(n=5)
    sched = Scheduler(policy, clock=lambda: 0, history=h)
    sched.add_stream(s)
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (slide INT, ts INT, src TEXT, v INT)")
    slides, txns = 0, []
    for _ in range(300):
        op = rnd.random()
        if op < 0.3:
            batch = [(slides * 100 + i, f"h{rnd.randrange(3)}", rnd.randrange(50)) for i in range(rnd.randrange(4))]
            if batch:
                s.append({"ts": [r[0] for r in batch], "src": [r[1] for r in batch], "v": [r[2] for r in batch]})
            db.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", [(slides, *r) for r in batch])
            sched.request_slide("s")
            while sched.step() != "slide":  # applied now, between the reads of running queries (serial:
                pass                        # after the running query)
            slides += 1
        elif op < 0.5 and slides:
            n_q, k = rnd.randrange(1, 6), rnd.randrange(max(0, slides - 7), slides + 1)
            text = f"SELECT src, SUM(v), COUNT(*) FROM s [RANGE {n_q} SUBWINDOWS] AS OF SLIDE {k} GROUP BY src"
            txns.append((sched.submit(plan_query(parse_query(text), s)), k, n_q))
        else:
            sched.step()
    sched.run_until_idle()
    answered = 0
    for txn, k, n_q in txns:
        if txn.error is not None:
            assert isinstance(txn.error, FailedPrecondition), txn.error
            continue
        answered += 1
        expected = db.execute("SELECT src, SUM(v), COUNT(*) FROM t WHERE slide BETWEEN ? AND ? GROUP BY src "
                              "ORDER BY src", (max(0, k - n_q + 1), k)).fetchall()
        assert txn.result.answer.rows == expected and txn.result.slide == k
    assert answered >= len(txns) // 3 and answered < len(txns)  # both outcomes happened
    report = check(h.events)
    assert report.errors == [] and report.violations("lws") == [] and report.summary()["as_of"] == answered
