"""Checks the shared-execution tests (test_sharing_engine.py, test_sharing_covers.py,
test_sharing_joins.py) make on every run: the history checker accepts the history, and the
sharing counters and invariants hold after a run."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from windowstore.store import parse_query, plan_query
from windowstore.txn.checker import check
from windowstore.txn.commands import Append, Slide


def history_accepted(history, policy: str) -> None:
    """No error, no violation of the policy's criterion (WS under ws, LWS otherwise), and verdicts."""
    report = check(history.events)
    assert report.errors == [], report.errors[:3]
    assert report.violations("ws" if policy == "ws" else "lws") == [], report.violations("lws")[:3]
    assert report.verdicts


def run_accepted(answered: dict, history, policy: str) -> None:
    """Nothing registered went unanswered (answers per query), and history_accepted."""
    assert all(n > 0 for n in answered.values()), answered
    history_accepted(history, policy)


def sharing_consistent(e, checked: int, mode: str, policy: str) -> None:
    """Answers were checked; with sharing on, executions saved add up, ttu-rescan never aborted
    a periodic execution, and the sharing state's invariants hold."""
    assert checked > 0
    sharing = e.sched.sharing
    if mode == "none":
        assert sharing is None
        return
    s = sharing.stats()
    assert s["executions_saved"] == s["answers"] - s["executions"] >= 0
    if policy == "ttu-rescan":
        assert e.sched.by_class["periodic"].aborts == 0 and s["aborts"] == 0
    sharing._check()


def alone_and_window(e, r, tmpl: str, length: int, kept: dict, empty: pa.Table, context) -> pa.Table:
    """A shared answer `r` of `tmpl` ({window} open) over `length` sub-windows of stream p equals
    the same query run alone AS OF SLIDE its slide (one query, its own transaction); returns the
    window's rows (`kept`: each slide's rows; `empty`: a table of no rows) for an outside check."""
    alone = e.sched.submit(plan_query(parse_query(
        tmpl.format(window=f"[RANGE {length} SUBWINDOWS] AS OF SLIDE {r.slide}")), e.stream("p")))
    e.sched.run_until_idle()
    assert alone.result is not None, alone.error
    assert r.answer.rows == alone.result.answer.rows, context
    return window_rows(r, length, kept, empty)


def window_rows(r, length: int, kept: dict, empty: pa.Table) -> pa.Table:
    """The rows of the window of `length` sub-windows the answer `r` is for (`kept`: each slide's rows)."""
    return pa.concat_tables([empty] + [kept[s] for s in range(r.slide - length + 1, r.slide + 1) if s in kept])


def equal(a, b) -> bool:
    """Two contributions alike: the same nesting, arrays of equal dtype and values."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype and a.tolist() == b.tolist()
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    return a == b and type(a) is type(b)


def slide_and_step(e, rows: pa.Table, ts: int, kept: dict, steps: int, idle: bool) -> None:
    """`rows` appended to stream p at `ts` and slid (kept by slide), then `steps` scheduler steps
    (a slide may come while an execution runs) and, if `idle`, until idle; the engine's invariants."""
    e.apply(Append("p", rows, "", None, ts))
    e.apply(Slide("p", ts))
    kept[e.stream("p").window.latest] = rows
    for _ in range(steps):
        e.sched.step()
    if idle:
        e.sched.run_until_idle()
    e._check()


def delivered(got: list, answered: dict, templates: dict):
    """The answers delivered (not the SLIDE -1 ones), counted per query: (qid, answer, template, length)."""
    for qid, r in got:
        if r.slide < 0:
            continue
        answered[qid] += 1
        yield (qid, r, *templates[qid])
