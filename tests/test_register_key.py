"""A RegisterQuery's idempotency key (RegisterQueryRequest.request_key, Register.key): the same key
again, while its registration lives, is that registration, not a second one; so a client may send
a registration again after UNAVAILABLE (the SDK does) without leaving a spare query answering
nobody. Engine-level: no second task, nothing logged for the repeat, the key kept by the log's
encoding and a snapshot."""
from __future__ import annotations

import pytest

from windowstore.store import InvalidInput
from windowstore.store.window import WindowSpec
from windowstore.txn import commands
from windowstore.txn.commands import CreateStream, Register, Unregister
from windowstore.txn.engine import Engine

TEXT = "SELECT COUNT(*) FROM s [RANGE 2 SUBWINDOWS SLIDE 1 SUBWINDOWS]"


def engine() -> Engine:
    e = Engine()
    e.apply(CreateStream("s", (("ts", "int64"), ("v", "int64")), "ts", WindowSpec(subwindows=3, subwindow_ms=1000,
                                                                                clock="manual"), 0.0))
    e.drain()
    return e


def test_the_same_key_again_is_the_same_registration_and_logs_nothing():
    e = engine()
    first = e.apply(Register("", TEXT, 0, 1.0, "alice", key="k1"))
    logged = e.drain()
    assert [type(c) for c in logged] == [Register] and logged[0].key == "k1"
    again = e.apply(Register("", TEXT, 0, 2.0, "alice", key="k1"))
    assert again is first and e.drain() == []
    assert list(e.periodic) == [first.query_id] and len(e.sched.tasks) == 1
    other = e.apply(Register("", TEXT, 0, 3.0, "alice", key="k2"))       # another key: another query
    unkeyed = e.apply(Register("", TEXT, 0, 3.0, "alice"))                # no key: as before
    assert len({first.query_id, other.query_id, unkeyed.query_id}) == 3
    e._check()


def test_a_key_with_another_query_or_owner_is_refused_naming_the_field():
    e = engine()
    p = e.apply(Register("", TEXT, 0, 1.0, "alice", key="k1"))
    for cmd in (Register("", TEXT.replace("COUNT(*)", "SUM(v)"), 0, 1.0, "alice", key="k1"),
                Register("", TEXT, 0, 1.0, "bob", key="k1"),
                Register("", TEXT, 0, 1.0, "alice", sketches=True, key="k1")):
        with pytest.raises(InvalidInput, match=f"request_key 'k1' is the key of periodic query '{p.query_id}'"):
            e.apply(cmd)
    assert list(e.periodic) == [p.query_id]
    e._check()


def test_after_unregistering_the_key_registers_anew():
    e = engine()
    p = e.apply(Register("", TEXT, 0, 1.0, key="k1"))
    e.apply(Unregister(p.query_id, 2.0))
    q = e.apply(Register("", TEXT, 0, 3.0, key="k1"))
    assert q.query_id != p.query_id and list(e.periodic) == [q.query_id]
    e._check()


def test_the_key_survives_the_log_encoding_and_a_snapshot(tmp_path):
    from windowstore.server import snapshot

    keyed = Register("P1", TEXT, 3, 5.0, "alice", key="k1")
    assert commands.decode(commands.encode(keyed)) == keyed
    plain = Register("P2", TEXT, 3, 5.0, "alice")
    assert b'"key"' not in commands.encode(plain)  # a registration without a key: its record as before
    assert commands.decode(commands.encode(plain)) == plain

    e = engine()
    p1 = e.apply(Register("", TEXT, 0, 1.0, "alice", key="k1"))
    p2 = e.apply(Register("", TEXT, 0, 1.0, "alice", sketches=True, key="k2"))
    p3 = e.apply(Register("", TEXT, 0, 1.0, "alice"))
    path = snapshot.SnapshotWriter(str(tmp_path)).write(e.capture(), lsn=4)
    restored = Engine()
    state, _, subwindow = snapshot.read(path)
    restored.restore(state, subwindow)
    assert restored.digest() == e.digest()
    assert [(p.key, p.sketches) for p in restored.periodic.values()] == [("k1", False), ("k2", True), ("", False)]
    assert restored.apply(Register("", TEXT, 0, 9.0, "alice", key="k1")).query_id == p1.query_id
    assert restored.apply(Register("", TEXT, 0, 9.0, "alice", sketches=True, key="k2")).query_id == p2.query_id
    assert p3.query_id in restored.periodic
    restored._check()
