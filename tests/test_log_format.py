"""The log format is stable: the command tags are fixed numbers, and a data directory written by
an earlier version (tests/data/logs/, see its README) recovers to the state it held, checked
against values written down here (v1: worked out from tests/data/make_fixture.py's commands) or
recorded beside it as it was written (v2: expected.json, from tests/data/make_fixture_v2.py)."""
from __future__ import annotations

import shutil
import typing
from decimal import Decimal as D
from pathlib import Path

import pyarrow as pa
import pytest

from windowstore.server.durability import Durability
from windowstore.server.wal import read
from windowstore.store import WindowSpec, parse_query
from windowstore.txn import commands
from windowstore.txn.commands import Append, Kind, Slide
from windowstore.txn.engine import Engine

DATA = Path(__file__).parent / "data"
V1, V2 = DATA / "logs" / "v1", DATA / "logs" / "v2"

# The kind byte of each command: what every data directory on disk holds. Never edit a number here.
TAGS = {"CreateStream": 0, "DropStream": 1, "Append": 2, "Slide": 3, "Register": 4, "Unregister": 5,
        "CompactStrings": 6, "StageRows": 7, "CommitBatch": 8, "AbortBatch": 9, "Answered": 10,
        "SealedSketches": 11, "AnsweredMany": 12}
V1_LAST_KIND = 10  # v1 was written when Answered (10) was the newest kind
V2_LAST_KIND = 11  # v2 (make_fixture_v2.py) when SealedSketches (11) was; AnsweredMany (12) is newer:
# tests/test_shared_delivery.py and tests/test_durability.py write and replay it


def test_command_tags_are_fixed():
    assert {cls.__name__: int(kind) for kind, cls in commands.CLASS_OF.items()} == TAGS
    assert {commands.KIND_OF[cls] for cls in typing.get_args(commands.Command)} == set(Kind)  # every command has one
    for cls in typing.get_args(commands.Command):  # (and the class's kind is the one encoded)
        assert commands.KIND_OF[cls] == TAGS[cls.__name__]


def kinds_in(source: Path) -> tuple[dict, int]:
    """The kind bytes of each command class in a log, and its last lsn; every record must encode
    again, with today's code, to the bytes it was written as."""
    seen: dict = {}
    for lsn, payload in read(str(source / "wal")):
        cmd = commands.decode(payload)
        seen.setdefault(type(cmd).__name__, set()).add(payload[1])
        assert payload[0] == commands.FORMAT == 1
        assert commands.encode(cmd) == payload  # and today's code writes each record as it was written
    return seen, lsn


def test_the_v1_log_holds_every_kind_of_its_time_under_its_tag_and_encodes_again_to_the_same_bytes():
    seen, lsn = kinds_in(V1)
    assert seen == {name: {tag} for name, tag in TAGS.items() if tag <= V1_LAST_KIND}
    assert lsn == 82


def test_the_v2_log_holds_every_kind_under_its_tag_and_encodes_again_to_the_same_bytes():
    seen, lsn = kinds_in(V2)
    assert seen == {name: {tag} for name, tag in TAGS.items() if tag <= V2_LAST_KIND}  # SealedSketches (11) too
    assert lsn > 82


def recover(tmp_path: Path, snapshot: bool, source: Path = V1) -> tuple[Engine, dict]:
    """An engine recovered from a copy of `source` (the copy: recovery may truncate or delete files)."""
    directory = tmp_path / (source.name + ("-with-snapshot" if snapshot else "-log-only"))
    shutil.copytree(source, directory)
    if not snapshot:
        shutil.rmtree(directory / "snapshots")
    engine = Engine()
    durability = Durability(str(directory), fsync="off")
    info = durability.recover(engine)
    durability.close(None)
    engine._check()
    return engine, info


def query(engine: Engine, text: str) -> list[tuple]:
    txn = engine.sched.submit(engine.plan(parse_query(text)))
    engine.sched.run_until_idle()
    assert txn.error is None, txn.error
    return txn.result.answer.rows


SPECS = {  # name: (subwindows, subwindow_ms, subwindow_rows, clock, allowed_lateness_ms, group_by, topk)
    "proc": (3, 1000, None, "processing", 0, ("k",), 4),
    "evt": (4, 100, None, "event", 50, ("k", "v"), 16),
    "man": (2, 1000, None, "manual", 0, (), 16),
    "cnt": (2, None, 3, "manual", 0, (), 16),
    "dict1": (1, 10, None, "manual", 0, (), 16),
    "dict2": (1, 10, None, "manual", 0, (), 16),
}
COLUMNS = [("ts", "int64"), ("k", "string"), ("v", "int64"), ("p", "decimal(12,2)"), ("f", "float64"), ("b", "boolean")]
WINDOWS = {  # name: (latest slide, rows of the live sub-windows youngest first, buffered, late, accepted, strings)
    "proc": (3, [0, 1, 2], 0, 0, 7, 4),
    "evt": (4, [1, 0, 1, 2], 3, 1, 9, 5),
    "man": (5, [1, 0], 0, 0, 11, 3),
    "cnt": (2, [3, 3], 0, 0, 9, 9),
    "dict1": (2, [100], 0, 0, 4300, 100),  # compacted: only the live sub-window's 100 strings are left
    "dict2": (2, [100], 0, 0, 4300, 100),
}
P1 = "SELECT k, COUNT(*), SUM(v), SUM(p) FROM proc [RANGE 2 SUBWINDOWS SLIDE 1 SUBWINDOWS] GROUP BY k"
P2 = ("SELECT COUNT(*), SUM(a.v), MAX(b.p) FROM proc a [RANGE 2 SUBWINDOWS SLIDE 1 SUBWINDOWS] "
      "JOIN man b [RANGE 2 SUBWINDOWS] ON a.k = b.k")
ANSWERS = {
    "P1": [(0, [("a", 1, 1, D("1.25")), ("b", 1, None, None), ("é", 1, -2**62, D("9999999999.99")), (None, 1, 3, D("-0.01"))]),
           (1, [("", 1, 20, D("0.20")), ("a", 2, 11, D("1.35")), ("b", 1, None, None),
                ("é", 1, -2**62, D("9999999999.99")), (None, 1, 3, D("-0.01"))]),
           (3, [("b", 1, 30, D("0.30"))])],
    "P2": [(0, [(6, 3, D("2.50"))]), (1, [(9, 33, D("2.50"))]), (3, [(1, 30, D("20.00"))])],
}


@pytest.mark.parametrize("snapshot", [True, False], ids=["snapshot-and-log", "log-only"])
def test_a_v1_data_directory_recovers_its_state(tmp_path, snapshot):
    engine, info = recover(tmp_path, snapshot)
    assert (info["snapshot_lsn"], info["replayed"], info["next_lsn"]) == ((47, 35, 83) if snapshot else (0, 82, 83))
    assert engine.now_ms == 5000.0 and engine.next_query == 5
    streams = engine.sched.streams
    assert set(streams) == set(SPECS)
    for name, s in streams.items():
        spec = s.spec
        assert (spec.subwindows, spec.subwindow_ms, spec.subwindow_rows, spec.clock, spec.allowed_lateness_ms,
                spec.group_by, spec.topk) == SPECS[name], name
        assert list(s.schema.columns) == (COLUMNS if not name.startswith("dict") else COLUMNS[:2])
        w = s.window
        assert (w.latest, [sub.rows for sub in w.youngest(w.n)], w.buffered_rows, w.late_rows,
                engine.books[name].accepted_rows, len(s.strings)) == WINDOWS[name], name
    # periodic queries, and the answers kept for their readers
    assert [(p.query_id, p.text, p.priority, p.owner) for p in engine.periodic.values()] == \
        [("P1", P1, 0, "alice"), ("P2", P2, 1, "")]
    for qid, expected in ANSWERS.items():
        got = engine.answers.read(qid, -1, None, 100)[0]
        assert [(r.slide, r.answer.rows) for r in got] == expected, qid
    # one-time queries over the windows: nulls, strings, decimals, an event-time window with a late row
    assert query(engine, "SELECT k, COUNT(*), COUNT(v), SUM(v), SUM(p), MIN(f), COUNT(b) FROM proc GROUP BY k") == [
        ("", 1, 1, 20, D("0.20"), 2.0, 1), ("a", 1, 1, 10, D("0.10"), 1.0, 1), ("b", 1, 1, 30, D("0.30"), 3.0, 1)]
    assert query(engine, "SELECT COUNT(*), COUNT(k), SUM(v), SUM(p), COUNT(f), MIN(ts), MAX(ts) FROM evt") == [
        (4, 3, 18, D("15.00"), 3, 120, 400)]
    assert query(engine, "SELECT MIN(k), MAX(k), COUNT(*) FROM dict2") == [("s04200", "s04299", 100)]
    # the Spark batches: 20 is still staged; 11 is the newest committed (a replay of it changes nothing)
    book = engine.books["man"]
    assert {k: sorted(v) for k, v in book.staged.items()} == {("spark", 20): ["a0"]}
    assert book.high_water == {"spark": 11}
    # the idempotency tables: an append and a slide sent again are recognised as replays
    again = pa.table({"ts": pa.array([20, 21], pa.int64()), "k": ["a", "b"], "v": pa.array([2, 102], pa.int64()),
                      "p": pa.array([D("2.50"), None], pa.decimal128(12, 2)), "f": pa.array([None, 2.0], pa.float64()),
                      "b": [True, False]})
    assert engine.apply(Append("man", again, "w", 2, 6000.0)).duplicate
    ack = engine.apply(Slide("man", 6000.0, "slider", 2))
    assert ack.duplicate and ack.slide == 1
    assert engine.stream("man").window.latest == 5


def test_both_ways_of_recovering_v1_reach_the_same_state(tmp_path):
    assert recover(tmp_path, True)[0].digest() == recover(tmp_path, False)[0].digest()


def test_a_create_stream_logged_without_a_later_spec_field_reads_as_its_default():
    """CreateStream's header holds the spec's fields flat: one missing (a log older than the field)
    takes WindowSpec's default."""
    import json
    import struct

    cmd = commands.CreateStream("s", (("ts", "int64"),), "ts", WindowSpec(2, 10, clock="manual", topk=3), 1.0)
    data = commands.encode(cmd)
    version, kind, n = struct.unpack_from("<BBI", data)
    header = json.loads(data[6:6 + n])
    assert list(header) == ["name", "columns", "time_column", "subwindows", "subwindow_ms", "subwindow_rows", "clock",
                            "allowed_lateness_ms", "group_by", "topk", "now_ms"]
    assert commands.decode(data) == cmd
    del header["topk"]
    head = json.dumps(header).encode()
    old = commands.decode(struct.pack("<BBI", version, kind, len(head)) + head)
    assert old.spec.topk == 16 and old.spec.clock == "manual" and old.name == "s"


@pytest.mark.parametrize("snapshot", [True, False], ids=["snapshot-and-log", "log-only"])
def test_a_v2_data_directory_recovers_the_answers_it_recorded(tmp_path, snapshot):
    """v2 (tests/data/make_fixture_v2.py) recorded, as it was written, the answers of sketch queries
    (KLL quantiles with their rank error, HLL distinct counts and frequent items with their bounds)
    and exact ones over a stream whose sealed KLL sketches the log keeps (SealedSketches): a
    recovery from the snapshot and the records after it, and from the log alone, answers the same,
    bit for bit."""
    import json
    import sys

    sys.path.insert(0, str(DATA))
    import make_fixture_v2

    expected = json.loads((V2 / "expected.json").read_text())
    engine, info = recover(tmp_path, snapshot, V2)
    assert info["snapshot_lsn"] > 0 if snapshot else info["snapshot_lsn"] == 0
    assert {c: (kind, size) for c, kind, size in engine.stream("sk").spec.sketches} == make_fixture_v2.SKETCHES
    got = make_fixture_v2.answers(engine)
    assert set(got) == set(expected["answers"]) == set(make_fixture_v2.QUERIES)
    for text, want in expected["answers"].items():
        assert got[text] == want, text
    assert any(want["bounds"] for want in expected["answers"].values())  # (sketch answers, with their bounds)


def test_both_ways_of_recovering_v2_reach_the_same_state(tmp_path):
    assert recover(tmp_path, True, V2)[0].digest() == recover(tmp_path, False, V2)[0].digest()
