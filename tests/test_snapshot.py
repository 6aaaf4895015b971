"""Snapshots: an engine restored from a snapshot written to disk and read back is the engine that
was captured (same digest), and goes on exactly like it."""
from __future__ import annotations

import json
import os
import zlib

import pytest
from hypothesis import given, settings, strategies as st

from conftest import examples
from test_engine import actions, run_live
from windowstore.server import snapshot
from windowstore.txn import commands
from windowstore.txn.engine import Engine


@pytest.mark.slow
@settings(max_examples=examples(40), deadline=None)
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


def _rewrite_state(path: str, change) -> None:
    state_path = os.path.join(path, "state.json")
    state = json.loads(open(state_path, "rb").read())
    change(state)
    open(state_path, "w").write(json.dumps(state))


@settings(max_examples=examples(10), deadline=None)
@given(st.lists(actions, min_size=5, max_size=30))
def test_a_snapshot_of_the_previous_format_is_read_and_damage_is_found(tmp_path_factory, script):
    live = Engine()
    run_live(live, [("create", 0, 0, 3), ("create", 1, 2, 2)] + script + [("create", 0, 0, 3)])  # a stream at the end
    path = snapshot.SnapshotWriter(str(tmp_path_factory.mktemp("snap"))).write(live.capture(), lsn=7)

    def as_format_1(state):  # zlib's CRC-32 of every file, under "crc32"
        sums = state.pop("crc32c")
        assert sums and all(zlib.crc32(open(os.path.join(path, rel), "rb").read()) != c for rel, c in sums.items())
        state["format"], state["crc32"] = 1, {rel: zlib.crc32(open(os.path.join(path, rel), "rb").read()) for rel in sums}
    _rewrite_state(path, as_format_1)
    restored = Engine()
    state, lsn, subwindow = snapshot.read(path)
    restored.restore(state, subwindow)
    assert lsn == 7 and restored.digest() == live.digest()

    rel = next(iter(json.loads(open(os.path.join(path, "state.json"), "rb").read())["crc32"]))
    with open(os.path.join(path, rel), "r+b") as f:  # one flipped bit in a file
        f.seek(os.path.getsize(os.path.join(path, rel)) // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 1]))
    with pytest.raises(snapshot.SnapshotCorrupt, match="checksum mismatch"):
        snapshot.read(path)
    _rewrite_state(path, lambda s: s.update(format=snapshot.FORMAT + 1))
    with pytest.raises(snapshot.SnapshotCorrupt, match="not one this version reads"):
        snapshot.read(path)


def test_after_a_restart_the_next_snapshot_links_the_restored_sub_windows(tmp_path):
    from test_engine import create

    from windowstore.server.durability import Durability

    def sub_window_files(directory) -> dict[str, int]:
        return {os.path.relpath(os.path.join(d, f), directory): os.stat(os.path.join(d, f)).st_ino
                for d, _, fs in os.walk(directory) for f in fs if f.startswith("sw-")}

    live = Engine()
    rows = [(1, "a", 5, 1.0), (2, "b", 7, 2.5), (3, None, None, None)]
    log = run_live(live, [("create", 0, 0, 3)] + [("append", 0, rows, "", 0), ("slide", 0, "", 0)] * 4)
    first = Durability(str(tmp_path), "off")
    first.log(log, live, lambda error: None)
    assert first.snapshot(live, wait=True)
    first.close(None)
    old = sub_window_files(snapshot.latest(first.snapshots.dir))
    assert len(old) == 3  # the window's three sealed sub-windows

    second = Durability(str(tmp_path), "off")
    restored = Engine()
    second.recover(restored)
    assert restored.digest() == live.digest()
    assert second.snapshots.held_bytes > 0  # the next snapshot waits for as much log as this one holds
    restored.apply(create("other", 2000, clock="manual", subwindow_ms=100))
    second.log(restored.drain(), restored, lambda error: None)
    assert second.snapshot(restored, wait=True)
    second.close(None)
    new = sub_window_files(snapshot.latest(second.snapshots.dir))
    assert new == old  # the same files, linked (same inodes), not written again
    state, _, subwindow = snapshot.read(snapshot.latest(second.snapshots.dir))
    again = Engine()
    again.restore(state, subwindow)
    assert again.digest() == restored.digest()
