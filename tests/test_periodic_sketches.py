"""A periodic query registered with return_sketches (a partition's, docs/partitions.md): its answers
carry each sketch aggregate's merged sketch, serialized when answered, and keep them in the answer
log through the command log's encoding and a snapshot; one registered without it is answered as
before (no sketches, its log records byte for byte as they were)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from windowstore.store.sketches import HllDistinct, KllQuantiles
from windowstore.store.window import WindowSpec
from windowstore.txn import commands
from windowstore.txn.answers import from_plain, to_plain
from windowstore.txn.commands import Append, CreateStream, Register, Slide
from windowstore.txn.engine import Engine

SCHEMA = {"ts": "int64", "bytes": "int64", "src": "string"}
TEXT = "SELECT APPROX_QUANTILE(bytes, 0.5), APPROX_COUNT_DISTINCT(src), COUNT(*) FROM s [RANGE 2 SUBWINDOWS SLIDE 1 SUBWINDOWS]"


def engine() -> Engine:
    spec = WindowSpec(subwindows=3, subwindow_ms=1000, clock="manual", sketches={"bytes": ("kll", 32), "src": ("hll", 8)})
    e = Engine()
    e.apply(CreateStream("s", tuple(SCHEMA.items()), "ts", spec, 0.0))
    e.apply(Register("P1", TEXT, 0, 0.0, "", sketches=True))
    e.apply(Register("P2", TEXT, 0, 0.0))
    rng = np.random.default_rng(35)
    for j in range(3):
        m = 3000
        e.apply(Append("s", pa.table({"ts": np.full(m, j * 1000, dtype=np.int64), "bytes": rng.integers(0, 10**6, m),
                                      "src": [f"h{i}" for i in rng.integers(0, 2000, m)]}), "", None, float(j * 1000)))
        e.apply(Slide("s", float(j * 1000 + 999)))
        e.sched.run_until_idle()
    return e


def test_only_the_query_registered_with_return_sketches_keeps_its_sketches_with_each_answer():
    e = engine()
    flagged, _, _ = e.answers.read("P1", -1, None, 10)
    plain, _, _ = e.answers.read("P2", -1, None, 10)
    assert [r.slide for r in flagged] == [r.slide for r in plain] == [0, 1, 2]
    for r, other in zip(flagged, plain):
        assert r.answer.rows[0][1:] == other.answer.rows[0][1:] and not other.answer.sketches  # (KLL: random bits)
        (c0, (kind0, size0, kll, _)), (c1, (kind1, size1, hll, _)) = r.answer.sketches
        assert (c0, kind0, size0, c1, kind1, size1) == (0, "kll", 32, 1, "hll", 8)
        # the serialized sketches are the window's: what they estimate is what the answer says
        assert round(HllDistinct.from_bytes(hll).estimate().estimate) == r.answer.rows[0][1]
        assert KllQuantiles.from_bytes(kll).n == r.answer.rows[0][2]


def test_the_flag_and_the_sketches_survive_the_log_encoding_and_a_snapshot(tmp_path):
    from windowstore.server import snapshot

    cmd = Register("P1", TEXT, 3, 5.0, "alice", sketches=True)
    assert commands.decode(commands.encode(cmd)) == cmd
    plain = Register("P2", TEXT, 3, 5.0, "alice")
    assert b"sketches" not in commands.encode(plain)  # an ordinary registration's record as before
    assert commands.decode(commands.encode(plain)) == plain

    e = engine()
    newest = e.answers.newest("P1")
    back = from_plain(to_plain(newest))
    assert back.answer.sketches == newest.answer.sketches and back.answer.rows == newest.answer.rows
    assert "sketches" not in to_plain(e.answers.newest("P2"))

    path = snapshot.SnapshotWriter(str(tmp_path)).write(e.capture(), lsn=4)
    restored = Engine()
    state, _, subwindow = snapshot.read(path)
    restored.restore(state, subwindow)
    assert restored.digest() == e.digest()
    assert restored.periodic["P1"].sketches and not restored.periodic["P2"].sketches
    assert restored.answers.newest("P1").answer.sketches == newest.answer.sketches
