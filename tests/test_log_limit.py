"""oplog.Limited: an operator event logged at most `limit` times per key in each window of a clock
given as data; the rest counted and reported once the key's next window opens. Checked against a
brute-force replay of the same events, and on a real server refusing a client's calls in a loop."""
from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from windowstore.clients import Client, NotFound
from windowstore.server import oplog
from windowstore.server.process import ServerProcess


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def logged(caplog):
    caplog.set_level(logging.INFO, logger="windowstore.ops")
    return lambda: [(r.event, dict(r.fields)) for r in caplog.records if r.name == "windowstore.ops"]


def test_a_burst_beyond_the_limit_is_counted_and_reported_once_the_window_ends(logged):
    clock = Clock()
    lim = oplog.Limited("client_error", ("method", "code"), limit=2, every_s=10.0, clock=clock)
    for t in (0.0, 1.0, 2.0, 3.0):
        clock.now = t
        lim.event(method="Append", code="NOT_FOUND", n=t)
    lim.event(method="Query", code="NOT_FOUND", n=9)  # another key: a window of its own
    lim._check()
    assert lim.suppressed() == 2
    clock.now = 10.5
    lim.event(method="Append", code="NOT_FOUND", n=10.5)
    lim._check()
    assert logged() == [
        ("client_error", {"method": "Append", "code": "NOT_FOUND", "n": 0.0}),
        ("client_error", {"method": "Append", "code": "NOT_FOUND", "n": 1.0}),
        ("client_error", {"method": "Query", "code": "NOT_FOUND", "n": 9}),
        ("client_error_suppressed", {"method": "Append", "code": "NOT_FOUND", "suppressed": 2, "seconds": 10.5}),
        ("client_error", {"method": "Append", "code": "NOT_FOUND", "n": 10.5}),
    ]
    assert lim.suppressed() == 0


def test_limit_zero_logs_every_event_and_bad_limits_are_refused(logged):
    lim = oplog.Limited("client_error", ("method",), limit=0, clock=Clock())
    for i in range(50):
        lim.event(method="Append", i=i)
    assert [f["i"] for _, f in logged()] == list(range(50))
    with pytest.raises(ValueError, match="limit >= 0"):
        oplog.Limited("x", ("k",), limit=-1)
    with pytest.raises(ValueError, match="every_s > 0"):
        oplog.Limited("x", ("k",), limit=1, every_s=0)


@settings(max_examples=200, deadline=None)
@given(limit=st.integers(1, 4), every=st.sampled_from([1.0, 2.5, 10.0]),
       steps=st.lists(st.tuples(st.sampled_from([0.0, 0.1, 0.9, 1.0, 2.6, 11.0]), st.sampled_from("abc")),
                      max_size=60))
def test_against_a_replay_of_fixed_windows_per_key(limit, every, steps):
    records = []

    class Sink(logging.Handler):
        def emit(self, record):
            records.append((record.event, dict(record.fields)))
    sink = Sink()
    oplog.log.addHandler(sink)
    old_level = oplog.log.level
    oplog.log.setLevel(logging.INFO)
    try:
        clock = Clock()
        lim = oplog.Limited("e", ("k",), limit=limit, every_s=every, clock=clock)
        for dt, k in steps:
            clock.now += dt
            lim.event(k=k, t=clock.now)
            lim._check()
    finally:
        oplog.log.removeHandler(sink)
        oplog.log.setLevel(old_level)
    # the oracle: per key, a window opens at an event at least `every` after the window's start;
    # the first `limit` events of a window are logged, the others counted into the next window's
    # first line
    want, windows, t = [], {}, 0.0
    for dt, k in steps:
        t += dt
        w = windows.get(k)
        if w is None or t - w["start"] >= every:
            if w is not None and w["over"]:
                want.append(("e_suppressed", {"k": k, "suppressed": w["over"], "seconds": round(t - w["start"], 1)}))
            w = windows[k] = {"start": t, "n": 0, "over": 0}
        if w["n"] < limit:
            w["n"] += 1
            want.append(("e", {"k": k, "t": t}))
        else:
            w["over"] += 1
    assert records == want
    # nothing lost: every event is a line, in a suppressed count, or counted in an open window
    reported = sum(f["suppressed"] for e, f in records if e == "e_suppressed")
    assert sum(1 for e, _ in records if e == "e") + reported + lim.suppressed() == len(steps)


@pytest.mark.slow
def test_a_server_refusing_a_retrying_client_logs_the_limit_and_answers():
    with ServerProcess("--log-format", "json", "--client-error-log-limit", "3") as srv:
        with Client(srv.target, timeout=30.0, retries=0) as c:
            for _ in range(40):
                with pytest.raises(NotFound):
                    c.query("SELECT COUNT(*) FROM nope")
            assert c.list_streams() == []
        code, _, err = srv.stop()
    assert code == 0
    refused = [ln for ln in err.splitlines() if '"client_error"' in ln and "nope" in ln]
    assert len(refused) == 3, err[-2000:]
