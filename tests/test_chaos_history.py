"""The chaos run's client history (tests/client_history.py) and the isolation checker it goes through
(txn/checker.py, independent of the history's recording): a history the clients could have seen
passes; histories torn on purpose are caught. No servers: the histories are written here."""
from __future__ import annotations

from client_history import ClientHistory
from windowstore.txn.kinds import Level

N, RANGE = 4096, 3


def history_of(slides: int) -> tuple[ClientHistory, dict[int, int]]:
    """`slides` slides at t = 10, 20, ...; slide s sealed batches 10 s + 1 .. 10 s + 10."""
    h = ClientHistory("c", N, RANGE)
    sealed_by = {}
    for s in range(slides):
        h.slide(10.0 * (s + 1), s)
        sealed_by.update({b: s for b in range(10 * s + 1, 10 * s + 11)})
    return h, sealed_by


def levels(report) -> dict:
    return {v.txn: v.level for v in report.verdicts}


def batches_of(*slides: int) -> list[int]:
    return [b for s in slides for b in range(10 * s + 1, 10 * s + 11)]


def test_queries_of_the_current_and_of_an_older_window_pass_as_lws_and_ws():
    h, sealed_by = history_of(5)
    h.query(45.0, 46.0, batches_of(1, 2, 3))      # after slide 3, before slide 4: the current window
    h.query(55.0, 56.0, batches_of(1, 2, 3))      # after slide 4: an older window, whole
    h.query(5.0, 15.0, batches_of(0))             # while the first slide was sent: it may reflect it
    report = h.check(sealed_by)
    assert report.errors == []
    assert levels(report) == {"q0": Level.LWS, "q1": Level.WS, "q2": Level.LWS}
    assert report.violations(Level.WS) == []


def test_rows_of_two_window_states_are_torn():
    h, sealed_by = history_of(5)
    h.query(55.0, 56.0, batches_of(2, 4) + batches_of(3)[:3])  # slide 3 only in part: still slides 2..4
    h.query(55.0, 56.0, batches_of(1, 2, 4))                   # slide 3 missing: not one window state
    report = h.check(sealed_by)
    assert levels(report) == {"q0": Level.LWS, "q1": Level.TORN}


def test_a_slide_made_again_with_other_rows_is_caught():
    h, sealed_by = history_of(3)
    h.slide(35.0, 2)  # slide 2 acknowledged again (a new leader made it again): an error of the history
    report = h.check(sealed_by)
    assert any("slide 2 applied, expected 3" in e for e in report.errors), report.errors


def test_rows_of_no_acknowledged_slide_are_torn():
    h, sealed_by = history_of(4)
    lost = max(sealed_by) - 5   # a batch within the writer's acknowledged range that no slide sealed
    del sealed_by[lost]
    h.query(45.0, 46.0, batches_of(1, 2, 3))
    report = h.check(sealed_by)
    assert levels(report) == {"q0": Level.TORN}


def test_a_slide_reflected_before_it_was_sent_is_torn():
    h, sealed_by = history_of(4)
    h.query(31.0, 32.0, batches_of(1, 2, 3))  # slide 3 was first sent at t = 40
    report = h.check(sealed_by)
    assert levels(report) == {"q0": Level.TORN}


def test_a_query_of_batches_past_the_last_acknowledged_slide_is_not_judged():
    h, sealed_by = history_of(3)
    h.query(35.0, 36.0, batches_of(1, 2, 3))  # slide 3 made, the writer stopped before its acknowledgement
    assert h.check(sealed_by).verdicts == []
