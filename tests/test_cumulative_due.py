"""When a periodic CUMULATE or landmark query answers (issue 31): a registered
`[CUMULATE STEP s SIZE p]` or `[RANGE UNBOUNDED SLIDE s]` answers the newest window ending at a
multiple of s, so it is due when a slide completes such a window (slicing.slides_until_due, the
rule of HOP/TUMBLE windows, tests/test_hop_windows.py), not every s/t slides from its
registration. The oracle is brute force over time slots: at each scheduler run, the newest window
(every CUMULATE window [k p, k p + j s), or every landmark [stream start, k s), enumerated) whose
end is at most the end of the newest sealed sub-window and that holds a sub-window of the stream;
the query answers when that window is newer than the one at the slide its last answer reflected.
Answers are checked against DuckDB over the raw rows within the bounds each reports."""
from __future__ import annotations

import random

import pytest

from test_hop_windows import HELD_RUNS, T, _feed, _hop_engine, assert_held_back_then_in_phase, run_due_case

CUMULATE, LANDMARK = "cumulate", "landmark"


def _windows(kind: str, latest_end: int, base: int, step: int, size: int) -> list[tuple[int, int]]:
    """Every window [start, end) in slots (sub-windows of T ms) that ends at most at `latest_end`
    and holds a sub-window of the stream, whose first sub-window is slot `base`."""
    if kind == LANDMARK:
        return [(base, e) for e in range(step, latest_end + 1, step) if e > base]
    return [(k * size, k * size + j * step) for k in range(latest_end // size + 1)
            for j in range(1, size // step + 1) if base < k * size + j * step <= latest_end]


def _newest_window(kind: str, latest_end: int, base: int, n_q: int, step: int, size: int):
    """Brute force: (the newest window a periodic execution reading the n_q youngest sub-windows
    answers, or None when what it needs was not read; the newest window whatever was read, whose
    completion counts), at a slide whose sub-window ends at slot `latest_end`."""
    done = max(_windows(kind, latest_end, base, step, size), key=lambda w: w[1], default=None)
    if done is None:
        return None, None
    oldest_read = max(base, latest_end - n_q)
    needed = done[1] - 1 if kind == LANDMARK else max(done[0], base)  # the landmark reads its end's running state
    return (done if needed >= oldest_read else None), done


def _run_case(kind: str, clock: str, n: int, base: int, step: int, size: int, register_after: int,
              runs: list[bool], sharing: str = "none", keyed: bool = False, seed: int = 0):
    """test_hop_windows.run_due_case for a CUMULATE (`step`, `size` in sub-windows) or landmark
    (SLIDE `step`) query, against the brute-force oracle above: its answers [(slide,
    window_start_ms, window_end_ms)], (slide, None, None) for one with no window."""
    keys = ", src" if keyed else ""
    window = (f"[CUMULATE STEP {step * T} ms SIZE {size * T} ms]" if kind == CUMULATE
              else f"[RANGE UNBOUNDED SLIDE {step * T} ms]")
    text = (f"SELECT window_start, window_end{keys}, COUNT(*), SUM(b) FROM s {window}"
            + (" GROUP BY src" if keyed else ""))
    n_q = size + step - 1 if kind == CUMULATE else min(n, step)

    def newest(slide: int):
        answered, done = _newest_window(kind, base + slide + 1, base, n_q, step, size)
        return (None if answered is None else (answered[0] * T, answered[1] * T)), (None if done is None else done[1])

    def due_at(last_end):  # the slide whose sub-window ends where the next window does
        far = (base + 1 if last_end is None else last_end) + step  # (the next window ends by then)
        return min(w[1] for w in _windows(kind, far, base, step, size) if last_end is None or w[1] > last_end) - 1 - base

    return run_due_case(clock, n, base, text, register_after, runs, newest, due_at, sharing, keyed, seed)


@pytest.mark.parametrize("sharing", ["none", "conservative"])
@pytest.mark.parametrize("clock", ["processing", "event"])
@pytest.mark.parametrize("kind,step,size", [(CUMULATE, 2, 4), (CUMULATE, 3, 6), (CUMULATE, 2, 2), (LANDMARK, 2, 0),
                                            (LANDMARK, 3, 0)], ids=["cumulate-2-4", "cumulate-3-6", "cumulate-2-2",
                                                                    "landmark-2", "landmark-3"])
def test_a_periodic_cumulative_window_registered_out_of_phase_answers_each_window_at_the_slide_that_completes_it(
        kind, step, size, clock, sharing):
    """Registered one slide after a window completed (out of phase with STEP or SLIDE), the query
    answers the newest window at once, then each window at the slide that completes it (its end is
    the end of the newest sub-window reflected: no slide late), exactly once and in order, across
    the resets of a CUMULATE period."""
    base = 3  # first sub-window: slot 3; windows end at slots 4, 6, 8 (STEP 2) or 6, 9, 12 (STEP 3)
    after = {2: 1, 3: 3}[step]  # registered at the slide of slot 4 or 6 (one after a completion)
    got = _run_case(kind, clock, 8, base, step, size, register_after=after, runs=[True] * 12, sharing=sharing)
    assert len(got) >= 5
    for slide, lo, hi in got[1:]:
        assert hi == (base + slide + 1) * T, "answered at the slide that completed it"
    ends = [hi for _, _, hi in got]
    assert all(b - a == step * T for a, b in zip(ends, ends[1:])), "every window once, in order"
    if kind == CUMULATE:
        assert all(lo == (hi - 1) // (size * T) * size * T for _, lo, hi in got), "grows from the last reset"
        assert len({lo for _, lo, _ in got}) >= 3, "across resets of the period"
    else:
        assert {lo for _, lo, _ in got} == {base * T}, "from the stream's start"


@pytest.mark.parametrize("sharing", ["none", "conservative"])
@pytest.mark.parametrize("clock", ["processing", "event"])
@pytest.mark.parametrize("kind,size", [(CUMULATE, 4), (LANDMARK, 0)])
def test_an_execution_held_back_past_a_completion_answers_the_newest_window_and_keeps_the_phase(
        kind, size, clock, sharing):
    """Several slides applied before the scheduler runs: the execution then answers the newest
    completed window (the older one is passed over), and the next answer still comes at the next
    completion, not STEP slides after the late one."""
    got = _run_case(kind, clock, 8, 3, 2, size, register_after=2, runs=HELD_RUNS, sharing=sharing)
    assert_held_back_then_in_phase(got, 3)


@pytest.mark.parametrize("clock", ["processing", "event"])
@pytest.mark.parametrize("kind,size", [(CUMULATE, 4), (LANDMARK, 0)])
def test_a_window_holding_the_streams_first_sub_window_is_answered_when_it_completes(kind, size, clock):
    """Registered before the first slide, the query answers no rows at once, then the window that
    ends at the first multiple of STEP after the stream's start (slot 4, the stream starting at slot
    3) at the slide that seals it: unlike a hop window, a cumulative window reaching before the
    stream's start holds every row the stream has in it (CUMULATE [0, 40 ms), the landmark
    [30 ms, 40 ms))."""
    got = _run_case(kind, clock, 8, 3, 2, size, register_after=-1, runs=[True] * 6)
    if kind == CUMULATE:  # SIZE 4 slots: resets at slots 0 and 4
        assert got == [(-1, None, None), (0, 0, 40), (2, 40, 60), (4, 40, 80)]
    else:
        assert got == [(-1, None, None), (0, 30, 40), (2, 30, 60), (4, 30, 80)]


@pytest.mark.parametrize("seed", range(40))
def test_random_cumulative_schedules_match_the_brute_force_due_rule(seed):
    rng = random.Random(seed)
    kind = rng.choice([CUMULATE, LANDMARK])
    step = rng.randint(1, 4)
    size = step * rng.randint(1, 3) if kind == CUMULATE else 0
    n = rng.randint(max(step, size + step - 1), size + step + 2)
    runs = [rng.random() < 0.7 for _ in range(rng.randint(4, 16))]
    _run_case(kind, rng.choice(["processing", "event"]), n, rng.randint(0, 7), step, size, rng.randint(-1, n + 1),
              runs, sharing=rng.choice(["none", "conservative"]), keyed=kind == CUMULATE and rng.random() < 0.5,
              seed=seed)


def test_a_landmark_on_a_manual_stream_answers_the_newest_sub_window_every_slide_from_its_registration():
    """On a manual stream sub-windows are not time slots, so a landmark's windows do not end at
    multiples of SLIDE: it answers through the newest sealed sub-window, every SLIDE slides from its
    registration, as a plain periodic query does (not by window completions)."""
    from windowstore.txn.commands import Register

    e = _hop_engine("manual", 4, 0, "none")
    got: list = []
    e.on_answer = lambda qid, res: got.append(res)
    rows: list = []
    for k in range(9):
        batch = [(k * T + 1, "ab"[k % 2], k)]
        rows += batch
        _feed(e, "manual", k, batch)
        if k == 2:
            e.apply(Register("L", "SELECT window_start, window_end, COUNT(*), SUM(b) FROM s "
                                  "[RANGE UNBOUNDED SLIDE 2 SUBWINDOWS]", 0, e.now_ms))
        e.sched.run_until_idle()
    assert [r.slide for r in got] == [2, 4, 6, 8]
    for r in got:
        hi = (r.slide + 1) * T
        assert r.answer.rows == [(0, hi, r.slide + 1, sum(x[2] for x in rows if x[0] < hi))]
        assert (r.window_start_ms, r.window_end_ms) == (0, hi)


@pytest.mark.parametrize("text,why", [
    ("SELECT COUNT(*) FROM s [CUMULATE STEP 20 ms SIZE 40 ms]", "merges the partials of the sub-windows since its last"),
    ("SELECT COUNT(*) FROM s [RANGE UNBOUNDED SLIDE 20 ms]", "reads the stream's running synopsis")])
def test_under_sharing_a_cumulative_window_runs_alone_due_by_its_windows(text, why):
    """`explain` says it runs alone and is due when a slide completes one of its windows; the
    sharing runtime leaves the task to the scheduler's own due rule (not its groups' periods)."""
    from windowstore.store import parse_query
    from windowstore.txn.commands import Register

    e = _hop_engine("event", 8, 0, "conservative")
    plan = e.plan(parse_query(text), periodic=True)
    said = e.sched.sharing.explain(plan, 2)
    assert "runs alone" in said and why in said and "due when a slide completes one of its windows" in said, said
    e.apply(Register("C", text, 0, e.now_ms))
    assert "C" in e.sched.tasks and "C" not in e.sched.sharing.tasks


@pytest.mark.slow
def test_cumulate_through_the_server_answers_each_window_at_the_slide_that_completes_it():
    """Through gRPC (event time, 1-s sub-windows from ts 0: sub-window k = [k s, k s + 1 s), sealed
    by slide k when the next second's rows arrive): a CUMULATE query registered first answers [0,
    2), [0, 4), [4, 6), [4, 8) at slides 1, 3, 5, 7, the slides that complete them; one registered
    after slide 2 (out of phase with STEP) answers the newest complete window at once, then each at
    its completing slide. Counts and sums are those of the rows appended in each window's
    sub-windows; the answer's bounds are the window's."""
    from conftest import wait_for
    from windowstore.clients import Client
    from windowstore.server.process import ServerProcess

    text = "SELECT window_start, window_end, COUNT(*), SUM(b) FROM h [CUMULATE STEP 2 s SIZE 4 s]"
    sizes = [k + 1 for k in range(9)]  # second k holds k + 1 rows, each b = k

    def append(k: int) -> None:
        ws.append("h", {"ts": [k * 1000 + i for i in range(sizes[k])], "src": ["a"] * sizes[k], "b": [k] * sizes[k]})

    windows = [(0, 2), (0, 4), (4, 6), (4, 8)]  # in seconds
    expect = {w: (sum(sizes[w[0]:w[1]]), sum(k * sizes[k] for k in range(w[0], w[1]))) for w in windows}
    with ServerProcess() as server, Client(server.target, timeout=30) as ws:
        ws.create_stream("h", schema={"ts": "int64", "src": "string", "b": "int64"}, subwindows=8,
                         subwindow_ms=1000, clock="event")
        first = ws.register(text)
        late = None
        append(0)
        for k in range(8):
            append(k + 1)  # seals second k: slide k
            if k == 2:
                late = ws.register(text)
            waiting = [q for q, due in ((first, k % 2 == 1), (late, k == 2 or (k > 2 and k % 2 == 1))) if due]
            for q in waiting:  # each answer before the next slide, so none is passed over
                wait_for(lambda: any(a.slide == k for a in ws.read_answers(q.id)[0]),
                         f"{q.id}'s answer at slide {k}", timeout=30)  # (a bound on a hang)
        for q, slides, wins in ((first, [1, 3, 5, 7], windows), (late, [2, 3, 5, 7], [(0, 2)] + windows[1:])):
            got = ws.read_answers(q.id)[0]
            assert [a.slide for a in got] == slides, (q.id, [a.slide for a in got])
            assert [(a.window_start_ms, a.window_end_ms) for a in got] == [(s * 1000, e * 1000) for s, e in wins]
            assert [a.rows for a in got] == [[(s * 1000, e * 1000, *expect[(s, e)])] for s, e in wins]
            ws.unregister(q.id)
