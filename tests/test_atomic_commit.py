"""Commits held for a target sub-window (CommitBatch.at_slide, txn/ingest.py): a commit for a
sub-window ahead is pending and published by the slide that opens it, one for the open
sub-window now, one for a sub-window past is refused with nothing applied. Pending commits are
re-targeted, survive replay of the log and snapshots, keep batches exactly once, and are bounded."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from conftest import examples
from test_engine import batch, create, replay_log
from windowstore.store import InvalidInput
from windowstore.store.errors import ResourceLimit
from windowstore.txn import commands
from windowstore.txn.commands import AbortBatch, CommitBatch, Slide, StageRows
from windowstore.txn.engine import Engine, EngineConfig, FailedPrecondition

ROWS = [(1, "a", 1, 1.0), (2, "b", 2, 2.0), (3, "a", 3, 3.0)]


def engine_with(clock="processing", config=None, n=4) -> tuple[Engine, list]:
    e = Engine(config or EngineConfig())
    e.apply(create("s", 0.0, n=n, **dict(clock=clock, subwindow_ms=100)))
    log: list = []
    drain(e, log)
    return e, log


def drain(e: Engine, log: list) -> None:
    log.extend(commands.decode(commands.encode(c)) for c in e.drain())


def to(e: Engine, now: float, log: list) -> None:
    """Advance the clock and apply what falls due."""
    e.tick(now)
    while e.step() is not None:
        e._check()
    drain(e, log)


def window_rows(e: Engine) -> dict[int, int]:
    """Rows per sealed slide of s."""
    w = e.sched.streams["s"].window
    return {sub.slide: sub.rows for sub in w.subs if sub is not None}


def stage(e: Engine, batch_id: int, now: float, writer="q", attempt="a0", rows=ROWS) -> None:
    e.apply(StageRows("s", writer, batch_id, attempt, 0, batch(rows), now))


def test_a_commit_for_a_sub_window_ahead_is_published_by_the_slide_that_opens_it():
    e, log = engine_with()
    to(e, 150.0, log)  # slide 0 sealed: sub-window 1 is open
    assert e.sched.streams["s"].window.cut_through == 0
    stage(e, 7, 150.0)
    ack = e.apply(CommitBatch("s", "q", 7, (("a0", 3),), False, 150.0, at_slide=2))
    assert ack.pending and ack.visible_from == 2 and ack.accepted == 3
    assert e.books["s"].pending
    to(e, 250.0, log)  # slide 1 sealed: without the batch
    assert window_rows(e)[1] == 0 and not e.books["s"].pending
    to(e, 350.0, log)  # slide 2 sealed: with it
    assert window_rows(e)[2] == 3
    # the same commit again: a duplicate, naming the slide it is visible from
    again = e.apply(CommitBatch("s", "q", 7, (("a0", 3),), False, 350.0, at_slide=2))
    assert again.duplicate and again.visible_from == 2
    drain(e, log)
    assert replay_log(log).digest() == e.digest()


def test_a_commit_for_the_open_sub_window_is_published_now_and_one_for_a_past_one_is_refused():
    e, log = engine_with()
    to(e, 150.0, log)
    stage(e, 1, 150.0)
    ack = e.apply(CommitBatch("s", "q", 1, (("a0", 3),), False, 150.0, at_slide=1))
    assert not ack.pending and ack.accepted == 3 and ack.visible_from == 1
    stage(e, 2, 150.0)
    before = e.digest()
    with pytest.raises(FailedPrecondition, match=r"at_slide 0.*open_slide=1"):
        e.apply(CommitBatch("s", "q", 2, (("a0", 3),), False, 150.0, at_slide=0))
    assert e.digest() == before  # nothing committed


def test_a_pending_commit_is_retargeted_or_published_at_once_and_counted_as_split():
    e, log = engine_with()
    to(e, 150.0, log)
    stage(e, 1, 150.0)
    stage(e, 2, 150.0, rows=ROWS[:1])
    e.apply(CommitBatch("s", "q", 1, (("a0", 3),), False, 150.0, at_slide=2))
    e.apply(CommitBatch("s", "q", 2, (("a0", 1),), False, 150.0, at_slide=2))
    # re-targeted to slide 3 (by a replay of the commit: its attempts may differ, the first ones count)
    ack = e.apply(CommitBatch("s", "q", 1, (("other", 5),), False, 150.0, at_slide=3))
    assert ack.pending and ack.visible_from == 3
    # the committer's fallback for batch 2: published now, in the open sub-window 1
    ack = e.apply(CommitBatch("s", "q", 2, (), False, 150.0, at_slide=None, split=True))
    assert not ack.pending and ack.accepted == 1 and ack.visible_from == 1
    assert e.books["s"].split_batches == 1
    to(e, 250.0, log)
    to(e, 350.0, log)
    assert window_rows(e)[1] == 1 and window_rows(e)[2] == 0
    to(e, 450.0, log)
    assert window_rows(e)[3] == 3
    drain(e, log)
    again = replay_log(log)
    assert again.digest() == e.digest() and again.books["s"].split_batches == 1


def test_pending_commits_survive_replay_and_snapshots_and_abort_drops_them(tmp_path):
    from windowstore.server import snapshot

    e, log = engine_with()
    to(e, 150.0, log)
    stage(e, 1, 150.0)
    stage(e, 2, 150.0)
    e.apply(CommitBatch("s", "q", 1, (("a0", 3),), False, 150.0, at_slide=3))
    e.apply(CommitBatch("s", "q", 2, (("a0", 3),), False, 150.0, at_slide=3))
    e.apply(AbortBatch("s", "q", 2, 150.0))
    drain(e, log)
    # replay and a snapshot image both hold the pending commit
    replayed = replay_log(log)
    state, _, subwindow = snapshot.read(snapshot.SnapshotWriter(str(tmp_path)).write(e.capture(), lsn=1))
    from_image = Engine(EngineConfig())
    from_image.restore(state, subwindow)
    assert replayed.digest() == e.digest() == from_image.digest()
    for x in (e, replayed, from_image):
        x.tick(450.0)
        while x.step() is not None:
            pass
        assert window_rows(x)[3] == 3 and window_rows(x)[2] == 0 and not x.books["s"].pending
        x._check()
    assert replayed.digest() == e.digest() == from_image.digest()


def test_pending_commits_are_bounded_and_targets_are_checked():
    e, log = engine_with(config=EngineConfig(max_pending_commits=2))
    for b in range(3):
        stage(e, b, 0.0)
    e.apply(CommitBatch("s", "q", 0, (("a0", 3),), False, 0.0, at_slide=1))
    e.apply(CommitBatch("s", "q", 1, (("a0", 3),), False, 0.0, at_slide=1))
    with pytest.raises(ResourceLimit, match="pending"):
        e.apply(CommitBatch("s", "q", 2, (("a0", 3),), False, 0.0, at_slide=1))
    with pytest.raises(InvalidInput, match="at_slide"):
        e.apply(CommitBatch("s", "q", 2, (("a0", 3),), False, 0.0, at_slide=5000))
    with pytest.raises(InvalidInput, match="at_slide"):
        e.apply(CommitBatch("s", "q", 2, (("a0", 3),), True, 0.0, at_slide=1))
    ev = Engine(EngineConfig())
    ev.apply(create("s", 0.0, n=4, clock="event", subwindow_ms=100))
    with pytest.raises(InvalidInput, match="at_slide"):
        ev.apply(CommitBatch("s", "q", 0, (), False, 0.0, at_slide=1))


def test_manual_slides_publish_pending_commits_too():
    e, log = engine_with(clock="manual")
    stage(e, 1, 0.0)
    assert e.apply(CommitBatch("s", "q", 1, (("a0", 3),), False, 0.0, at_slide=1)).pending
    e.apply(Slide("s", 0.0))
    e.apply(Slide("s", 0.0))
    drain(e, log)
    assert window_rows(e) == {0: 0, 1: 3}
    assert replay_log(log).digest() == e.digest()


def test_a_log_without_targets_is_encoded_as_before():
    cmd = CommitBatch("s", "q", 1, (("a0", 3),), False, 0.0)
    assert b"at_slide" not in commands.encode(cmd) and b"split" not in commands.encode(cmd)
    assert commands.decode(commands.encode(CommitBatch("s", "q", 1, (), False, 0.0, None, 4, True))).at_slide == 4


targets = st.lists(st.one_of(
    st.tuples(st.just("stage"), st.integers(0, 4), st.sampled_from(["a0", "a1"])),
    st.tuples(st.just("commit"), st.integers(0, 4), st.one_of(st.none(), st.integers(-1, 3)), st.booleans()),
    st.tuples(st.just("abort"), st.integers(0, 4)),
    st.tuples(st.just("time"), st.integers(0, 250)),
), max_size=30)


@settings(max_examples=examples(60), deadline=None)
@given(targets)
def test_replay_rebuilds_pending_commits_and_every_batch_is_published_once(script):
    """Random stages, (re-)targeted commits, aborts and slides on a processing-time stream: the
    log replays to the same state, and each batch's rows are in the window exactly as its one
    publication put them."""
    e, log = engine_with(n=200)  # nothing leaves the window
    now = 0.0
    for act in script:
        try:
            if act[0] == "stage":
                stage(e, act[1], now, attempt=act[2], rows=[(1, "a", act[1], 1.0)])
            elif act[0] == "commit":
                staged = e.books["s"].staged.get(("q", act[1]), {})
                counts = tuple((a, sum(t.num_rows for t in cs.values())) for a, cs in sorted(staged.items()))
                at = None if act[2] is None else e.sched.streams["s"].window.cut_through + 1 + act[2]
                e.apply(CommitBatch("s", "q", act[1], counts, False, now, at_slide=at, split=act[3]))
            elif act[0] == "abort":
                e.apply(AbortBatch("s", "q", act[1], now))
            else:
                now += act[1]
                to(e, now, log)
        except (InvalidInput, FailedPrecondition, ResourceLimit):
            pass
        e._check()
        drain(e, log)
    assert replay_log(log).digest() == e.digest()
    to(e, now + 600.0, log)  # every pending commit's sub-window opened and sealed
    assert not e.books["s"].pending
    w = e.sched.streams["s"].window
    seen = [int(v) for sub in w.subs if sub is not None for v in sub.columns["v"]]
    acks = e.books["s"].acks.get("q", {})
    # each batch's rows (value v = its id) are in the window as often as its one commit published them
    for b in range(5):
        assert seen.count(b) == (acks[b].accepted if b in acks else 0)
    assert replay_log(log).digest() == e.digest()
