"""A batch's content digest (store/digest.py) and where it is computed: it equals a row-at-a-time
reference over random batches (nulls, strings, -0.0, NaN given as a null) in whatever form the
rows arrive (Python lists, Arrow with plain or dictionary-encoded strings: the wire's); it keeps
the values earlier rounds remembered (snapshots hold them); and the digest an Append carries (the
server's, computed where it decoded the batch) is the one the engine logs and compares a replay
with, live and after replaying the log, with the digest or without it (an older log)."""
from __future__ import annotations

import math
import random
import struct
import zlib

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from conftest import examples
from windowstore.store import Schema, WindowSpec
from windowstore.store.digest import batch_digest
from windowstore.txn import commands
from windowstore.txn.commands import Append, CreateStream
from windowstore.txn.engine import Engine, FailedPrecondition
from windowstore.txn.ingest import content_digest

COLUMNS = (("ts", "int64"), ("k", "string"), ("v", "int64"), ("f", "float64"), ("b", "boolean"))
SCHEMA = Schema(COLUMNS, "ts")
PLACEHOLDER = {"string": "", "int64": 0, "float64": 0.0, "boolean": False}

# -- the reference: the module's definition, one row at a time on Python integers ----------------------
_MASK = (1 << 64) - 1


def _mix(x: int) -> int:
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def _word(typ: str, value) -> int:
    if typ == "string":
        b = value.encode()
        return zlib.crc32(b) | (zlib.adler32(b) << 32)
    if typ == "float64":
        return struct.unpack("<Q", struct.pack("<d", value + 0.0))[0]
    return int(value) & _MASK


def reference_digest(rows: list[tuple], columns=COLUMNS) -> int:
    """Sum over rows of h, h folded over the columns: h = mix(h ^ mix(word + golden * (i + 1))),
    a null's word mix(placeholder's word ^ NULL)."""
    total = 0
    for row in rows:
        h = 0
        for i, ((_, typ), value) in enumerate(zip(columns, row)):
            null = value is None or (isinstance(value, float) and math.isnan(value))
            w = _word(typ, PLACEHOLDER[typ] if null else value)
            if null:
                w = _mix(w ^ 0xD6E8FEB86659FD93)
            h = _mix(h ^ _mix((w + 0x9E3779B97F4A7C15 * (i + 1)) & _MASK))
        total = (total + h) & _MASK
    return total


def as_lists(rows: list[tuple]) -> dict:
    return {name: [r[i] for r in rows] for i, (name, _) in enumerate(COLUMNS)}


def as_arrow(rows: list[tuple], dictionary: bool) -> pa.Table:
    cols = as_lists(rows)
    k = pa.array(cols["k"], pa.string())
    return pa.table({"ts": pa.array(cols["ts"], pa.int64()), "k": k.dictionary_encode() if dictionary else k,
                     "v": pa.array(cols["v"], pa.int64()),
                     "f": pa.array([None if x is not None and math.isnan(x) else x for x in cols["f"]], pa.float64()),
                     "b": pa.array(cols["b"], pa.bool_())})


def digest_of(batch) -> int:
    checked, n = SCHEMA.check(batch)
    return batch_digest(checked, COLUMNS, n)


texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6)
floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.0]))
rows_st = st.lists(st.tuples(st.integers(-2**63, 2**63 - 1), st.one_of(st.none(), texts),
                             st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)), st.one_of(st.none(), floats),
                             st.one_of(st.none(), st.booleans())), max_size=40)


@settings(max_examples=examples(200), deadline=None)
@given(rows_st, st.randoms(use_true_random=False))
def test_the_digest_equals_the_row_at_a_time_reference_in_every_form_and_order(rows, rnd):
    expected = reference_digest(rows)
    assert digest_of(as_lists(rows)) == expected
    assert digest_of(as_arrow(rows, dictionary=False)) == expected
    assert digest_of(as_arrow(rows, dictionary=True)) == expected  # the SDK's wire form
    shuffled = rows[:]
    rnd.shuffle(shuffled)
    assert content_digest(SCHEMA, as_arrow(shuffled, dictionary=True)) == expected  # what the server carries


def test_zero_and_minus_zero_are_one_value_and_a_nan_is_a_null():
    assert digest_of(as_lists([(1, "a", 1, -0.0, True)])) == digest_of(as_lists([(1, "a", 1, 0.0, True)]))
    assert digest_of(as_lists([(1, "a", 1, float("nan"), True)])) == digest_of(as_lists([(1, "a", 1, None, True)]))
    assert digest_of(as_lists([(1, "a", 1, None, True)])) != digest_of(as_lists([(1, "a", 1, 0.0, True)]))


def test_a_batch_the_schema_refuses_has_no_carried_digest():
    assert content_digest(SCHEMA, pa.table({"ts": [1], "k": ["a"]})) is None  # missing columns: the engine says which


# Values the digest had before it mixed in place (computed by the earlier code, commit 88f2afe):
# snapshots and logs hold acknowledged batches' digests, so these must never change without a version.
PINNED = [
    ([(1, "a", 1, 0.5, True), (2, "b", 2, -0.0, False), (3, "a", 3, 1.0, None)], 4096935179329335269),
    ([(5, None, None, None, None), (6, "é", -1, float("inf"), True)], 7096819716996849039),
    ([(i, f"10.0.{i % 7}.{i % 5}", i * 37 - 500, i / 3, i % 2 == 0) for i in range(1000)], 10717303944675062762),
]


@pytest.mark.parametrize("rows,value", PINNED)
def test_the_digest_keeps_the_values_earlier_rounds_remembered(rows, value):
    assert digest_of(as_lists(rows)) == value
    assert reference_digest(rows) == value


# -- the digest an Append carries, logged and replayed ---------------------------------------------------
def _engine() -> Engine:
    e = Engine()
    e.apply(CreateStream("s", COLUMNS, "ts", WindowSpec(3, 10, None, "manual", 0, ("k",), 4), 0))
    return e


def _rows(seed: int, n: int = 50) -> list[tuple]:
    r = random.Random(seed)
    return [(r.randrange(0, 30), r.choice(["a", "b", "é", None]), r.randrange(-9, 9), r.choice([0.5, -0.0, None]),
             r.choice([True, False, None])) for _ in range(n)]


def _replays_recognised(e: Engine, rows: list[tuple], batch_id: int) -> None:
    """The batch again, rows in another order: a duplicate; one row changed: refused."""
    assert e.apply(Append("s", as_arrow(rows[::-1], dictionary=True), "w", batch_id, 9)).duplicate
    changed = rows[:-1] + [(rows[-1][0], "zz", 0, 1.0, True)]
    with pytest.raises(FailedPrecondition, match="other rows"):
        e.apply(Append("s", as_arrow(changed, dictionary=False), "w", batch_id, 9))


def test_the_carried_digest_is_logged_and_a_replayed_log_recognises_replays_with_it_or_without():
    live = _engine()
    batches = {b: _rows(b) for b in range(4)}
    for b, rows in batches.items():
        table = as_arrow(rows, dictionary=b % 2 == 0)
        carried = content_digest(SCHEMA, table) if b < 2 else None  # the server's, or none (the engine's own)
        live.apply(Append("s", table, "w", b, 1, None, None, carried, COLUMNS if carried is not None else None))
    log = [commands.decode(commands.encode(c)) for c in live.drain()]
    appends = [c for c in log if isinstance(c, Append)]
    assert [c.digest for c in appends] == [reference_digest(batches[b]) for b in range(4)]  # logged, both ways
    for b in range(4):
        _replays_recognised(live, batches[b], b)
    old = [Append(c.stream, c.batch, c.writer_id, c.batch_id, c.now_ms) if isinstance(c, Append) else c for c in log]
    assert all(b"digest" not in commands.encode(c) for c in old)  # an older log's records, as they were written
    for records in (log, old):
        again = Engine()
        for c in records:
            again.replay(c)
        assert again.digest() == _engine_after(log).digest()
        for b in range(4):
            _replays_recognised(again, batches[b], b)


def _engine_after(log) -> Engine:
    e = Engine()
    for c in log:
        e.replay(c)
    return e


def test_a_digest_carried_under_another_schema_is_not_taken():
    """The server digests under the schema it read before the batch was decoded; a stream dropped
    and created again with other types meanwhile: the engine digests the batch itself."""
    e = _engine()
    rows = _rows(7)
    other = (("ts", "int64"), ("k", "string"), ("v", "float64"), ("f", "float64"), ("b", "boolean"))
    ack = e.apply(Append("s", as_arrow(rows, dictionary=True), "w", 1, 1, None, None, 12345, other))
    assert ack.digest == reference_digest(rows)
    logged = [c for c in e.drain() if isinstance(c, Append)]
    assert logged[0].digest == reference_digest(rows)
    _replays_recognised(e, rows, 1)
