"""Checks the shared-execution tests (test_sharing_engine.py, test_sharing_covers.py,
test_sharing_joins.py) make on every run: the history checker accepts the history, and the
sharing counters and invariants hold after a run."""
from __future__ import annotations

from windowstore.txn.checker import check


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
