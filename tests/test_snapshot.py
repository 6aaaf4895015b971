"""Snapshots: an engine restored from a snapshot written to disk and read back is the engine that
was captured (same digest), and goes on exactly like it."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from test_engine import actions, run_live
from windowstore.server import snapshot
from windowstore.txn import commands
from windowstore.txn.engine import Engine


@settings(max_examples=40, deadline=None)
@given(st.lists(actions, max_size=30), st.lists(actions, max_size=15))
def test_a_snapshot_restores_the_captured_state(tmp_path_factory, before, after):
    live = Engine()
    run_live(live, [("create", 0, 0, 3), ("create", 1, 2, 2), ("create", 2, 3, 2)] + before)
    image = live.capture()
    writer = snapshot.SnapshotWriter(str(tmp_path_factory.mktemp("snap")))
    path = writer.write(image, lsn=42)
    # a second snapshot links the unchanged sub-windows of the first
    run_live(live, [])
    path2 = writer.write(live.capture(), lsn=43)
    writer.prune(43)
    restored = Engine()
    state, lsn, subwindow = snapshot.read(path2)
    restored.restore(state, subwindow)
    assert lsn == 43 and restored.digest() == live.digest()
    restored._check()
    # and both go on alike: the rest of the log applied to each gives the same state
    log = run_live(live, after)
    for cmd in log:
        restored.replay(commands.decode(commands.encode(cmd)))
    assert restored.digest() == live.digest()
    assert path != path2
