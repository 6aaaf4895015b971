"""The engine: commands in, the same state out. Random command sequences are applied the way the
server applies them (with scheduler steps and queries in between); the commands the engine
emitted, encoded and decoded as the write-ahead log stores them, are replayed into a fresh engine,
which must reach the same state bit for bit. Invariants are checked after every step."""
from __future__ import annotations

import contextlib

import pyarrow as pa
import pytest
from hypothesis import event, given, settings, strategies as st

from conftest import examples
from windowstore.store import InvalidInput, WindowSpec, parse_query, plan_query
from windowstore.store.errors import ResourceLimit
from windowstore.txn import StreamFailed, commands
from windowstore.txn.query import QueryFailed
from windowstore.txn.answers import from_plain, to_plain
from windowstore.txn.commands import (AbortBatch, Answered, Append, CommitBatch, CreateStream, DropStream, Register, Slide,
                                      StageRows, Unregister)
from windowstore.txn.engine import AlreadyExists, Engine, EngineConfig, FailedPrecondition, NotFound

COLUMNS = (("ts", "int64"), ("k", "string"), ("v", "int64"), ("f", "float64"), ("b", "boolean"))
CLOCKS = [dict(clock="manual", subwindow_ms=100), dict(clock="processing", subwindow_ms=100),
          dict(clock="event", subwindow_ms=100, allowed_lateness_ms=50), dict(clock="manual", subwindow_rows=3),
          dict(clock="processing", subwindow_rows=4)]


def create(name, now, n=3, group_by=("k",), **clock):
    return CreateStream(name, COLUMNS, "ts", WindowSpec(n, clock.get("subwindow_ms"), clock.get("subwindow_rows"), clock["clock"],
                                                    clock.get("allowed_lateness_ms", 0), group_by, 4), now)


def batch(rows):
    return pa.table({"ts": pa.array([r[0] for r in rows], pa.int64()), "k": pa.array([r[1] for r in rows], pa.string()),
                     "v": pa.array([r[2] for r in rows], pa.int64()), "f": pa.array([r[3] for r in rows], pa.float64()),
                     "b": pa.array([r[4] if len(r) > 4 else None for r in rows], pa.bool_())})


# nulls (None) in every column but the event time: validity masks travel through the log and snapshots
rows = st.lists(st.tuples(st.integers(0, 3000), st.sampled_from(["a", "b", "", "é", "z", None]),
                          st.one_of(st.integers(-2**63, 2**63 - 1), st.none()), st.one_of(st.floats(-1e6, 1e6), st.none()),
                          st.sampled_from([True, False, None])), max_size=6)
append_action = st.tuples(st.just("append"), st.integers(0, 2), rows, st.sampled_from(["", "w1", "w2"]), st.integers(0, 3))
time_action = st.tuples(st.just("time"), st.integers(0, 450))
steps_action = st.tuples(st.just("steps"), st.integers(1, 12))
slide_action = st.tuples(st.just("slide"), st.integers(0, 2), st.sampled_from(["", "w1"]), st.integers(0, 3))
query_action = st.tuples(st.just("query"), st.integers(0, 2))
register_action = st.tuples(st.just("register"), st.integers(0, 2))
actions = st.one_of(
    st.tuples(st.just("create"), st.integers(0, 2), st.integers(0, len(CLOCKS) - 1), st.integers(1, 4)),
    append_action,
    slide_action,
    time_action,
    steps_action,
    query_action,
    register_action,
    st.tuples(st.just("unregister"), st.integers(0, 3)),
    st.tuples(st.just("drop"), st.integers(0, 2)),
    st.tuples(st.just("stage"), st.integers(0, 2), rows, st.sampled_from(["q1", "q2"]), st.integers(0, 3),
              st.sampled_from(["a0", "a1"]), st.integers(0, 2)),
    st.tuples(st.just("commit"), st.integers(0, 2), st.sampled_from(["q1", "q2"]), st.integers(0, 3),
              st.sampled_from([(), ("a0",), ("a1",), ("a0", "a1")]), st.booleans(), st.booleans()),
    st.tuples(st.just("abort"), st.integers(0, 2), st.sampled_from(["q1", "q2"]), st.integers(0, 3)),
)


def run_live(engine: Engine, script, seal_elsewhere: bool = False) -> list:
    """Apply the script; with seal_elsewhere every slide's seal is a job (Scheduler.seal_offload),
    handed back by a ("sealed", i) action, in any order with everything else."""
    now = 1000.0
    log = []
    seals = []
    if seal_elsewhere:
        engine.sched.seal_offload, engine.sched.seal_offload_rows = seals.append, 0
    for act in script:
        kind = act[0]
        try:
            if kind == "sealed":
                if seals:  # a job's result, computed "elsewhere", or its failure (sealed again inline)
                    job = seals.pop(act[1] % len(seals))
                    engine.complete(job, None, RuntimeError("the seal failed")) if act[2] else _hand_back(engine, job)
            elif kind == "break":  # the stream's seals raise from now on (a defect met its rows)
                stream = engine.sched.streams.get(f"s{act[1]}")
                if stream is not None:
                    stream.window.seal_cut = _broken_seal
            elif kind == "create":
                engine.apply(create(f"s{act[1]}", now, n=act[3], **CLOCKS[act[2]]))
            elif kind == "append":
                engine.apply(Append(f"s{act[1]}", batch(act[2]), act[3], act[4] if act[3] else None, now))
            elif kind == "slide":
                engine.apply(Slide(f"s{act[1]}", now, act[2], act[3] if act[2] else None))
            elif kind == "time":
                now += act[1]
                engine.tick(now)
            elif kind == "steps":
                for _ in range(act[1]):
                    engine.step()
                    engine._check()
            elif kind == "query":
                s = engine.stream(f"s{act[1]}")
                # through the engine's plan cache: the stream may have been dropped and created again
                engine.sched.submit(engine.plan(parse_query(f"SELECT k, COUNT(*), SUM(v), COUNT(b) FROM {s.name} GROUP BY k")))
            elif kind == "register":
                engine.apply(Register("", f"SELECT SUM(v), MAX(k) FROM s{act[1]} [SLIDE 1 SUBWINDOWS]", 0, now))
            elif kind == "unregister":
                engine.apply(Unregister(f"P{act[1]}", now))
            elif kind == "drop":
                engine.apply(DropStream(f"s{act[1]}", now))
            elif kind == "stage":
                engine.apply(StageRows(f"s{act[1]}", act[3], act[4], act[5], act[6], batch(act[2]), now))
            elif kind == "commit":
                name, writer, batch_id, attempts, slide, honest = f"s{act[1]}", act[2], act[3], act[4], act[5], act[6]
                staged = engine.books[name].staged.get((writer, batch_id), {}) if name in engine.books else {}
                counts = tuple((a, sum(t.num_rows for t in staged.get(a, {}).values()) + (0 if honest else 1))
                               for a in attempts)
                engine.apply(CommitBatch(name, writer, batch_id, counts, slide, now))
            elif kind == "abort":
                engine.apply(AbortBatch(f"s{act[1]}", act[2], act[3], now))
        except (InvalidInput, NotFound, AlreadyExists, FailedPrecondition, ResourceLimit, StreamFailed):
            pass
        engine._check()
        log.extend(commands.decode(commands.encode(c)) for c in engine.drain())
    engine.sched.run_until_idle()
    while seals:
        _hand_back(engine, seals.pop(0))
        engine.sched.run_until_idle()
    log.extend(commands.decode(commands.encode(c)) for c in engine.drain())
    engine._check()
    return log


def _broken_seal(cut):
    raise RuntimeError("a defect met these rows")


def _hand_back(engine: Engine, job) -> None:
    """A seal job run "elsewhere" and its result (or its exception) handed back."""
    try:
        value, error = job.run(), None
    except RuntimeError as e:
        value, error = None, e
    engine.complete(job, value, error)


def replay_log(log) -> Engine:
    """A fresh engine that replayed `log`, its invariants checked after every command."""
    engine = Engine(EngineConfig(policy="ttu"))
    for cmd in log:
        engine.replay(cmd)
        engine._check()
    return engine


@contextlib.contextmanager
def frequent_compaction():
    """Compact the string dictionary at nearly every slide, also with queries in flight."""
    import windowstore.store.stream as stream_module
    saved, stream_module.COMPACT_MIN = stream_module.COMPACT_MIN, 1
    try:
        yield
    finally:
        stream_module.COMPACT_MIN = saved


@pytest.mark.slow
@settings(max_examples=examples(80), deadline=None)
@given(st.lists(actions, max_size=40))
def test_replaying_the_log_rebuilds_the_same_state(script):
    live = Engine(EngineConfig(policy="ttu"))
    log = run_live(live, [("create", 0, 0, 3), ("create", 1, 2, 2)] + script)
    again = replay_log(log)
    assert again.digest() == live.digest()
    assert set(again.periodic) == set(live.periodic) and again.next_query == live.next_query
    # and the replay emits exactly the log again: a restarted server logs what it recovered from
    assert [commands.encode(c) for c in again.drain()] == [commands.encode(c) for c in log]


def test_replay_answers_queries_like_the_original():
    live = Engine()
    run_live(live, [])
    live.apply(create("p", 0, n=2, clock="manual", subwindow_ms=10))
    live.apply(Append("p", batch([(1, "a", 2**62, 0.5), (2, "a", 2**62, 1.5)]), "w", 1, 5))
    live.apply(Slide("p", 6))
    live.apply(Append("p", batch([(3, "b", -10, 2.0)]), "w", 2, 7))
    live.apply(Slide("p", 8, "w", 9))
    log = live.drain()
    again = Engine()
    for cmd in log:
        again.replay(commands.decode(commands.encode(cmd)))
    for e in (live, again):
        q = plan_query(parse_query("SELECT k, SUM(v) FROM p GROUP BY k"), e.stream("p"))
        txn = e.sched.submit(q)
        e.sched.run_until_idle()
        assert txn.result.answer.rows == [("a", 2**63), ("b", -10)]
    # the idempotency tables came back: a replayed batch or slide is still recognised
    assert again.apply(Append("p", batch([(3, "b", -10, 2.0)]), "w", 2, 10)).duplicate
    assert again.apply(Slide("p", 11, "w", 9)).duplicate
    assert again.digest() == live.digest()


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # inf + -inf is NaN, on purpose
def test_answer_logs_come_back_from_the_log_and_through_plain_json():
    """A periodic query's answers are state: replaying the log (its Answered commands) gives back
    the same bounded log, and the plain form a snapshot stores (JSON) gives back every value (NULLs,
    int128 sums, -0.0, NaN, decimals) and every piece of metadata; the log goes with its query.
    (A snapshot restored by a real server: test_durability.)"""
    import json
    import math
    from decimal import Decimal

    live = Engine(EngineConfig(answer_log_keep=3))
    live.apply(create("p", 0, n=2, clock="manual", subwindow_ms=10))
    live.apply(Register("P1", "SELECT k, COUNT(*), SUM(v), MIN(f), SUM(f) FROM p [SLIDE 1 SUBWINDOWS] GROUP BY k", 0, 1))
    live.apply(Register("P2", "SELECT COUNT(*) FROM p [SLIDE 1 SUBWINDOWS]", 0, 1))
    for i in range(5):
        inf = float("inf")
        live.apply(Append("p", batch([(i, "a", 2**62, -0.0), (i, None, None, inf), (i, None, 1, -inf)]), "", None, 2 + i))
        live.apply(Slide("p", 3 + i))
        live.sched.run_until_idle()
        live._check()
    log = [commands.decode(commands.encode(c)) for c in live.drain()]
    assert sum(isinstance(c, Answered) for c in log) == 10
    kept, newest, oldest = live.answers.read("P1", -1, None, 100)
    assert [r.slide for r in kept] == [2, 3, 4] and (newest, oldest) == (4, 2)  # bounded: the newest 3
    a, b = kept[-1].answer.rows
    assert a == ("a", 2, 2**63, -0.0, -0.0) and math.copysign(1, a[3]) < 0
    assert b[:4] == (None, 4, 2, -math.inf) and math.isnan(b[4])  # inf + -inf
    replayed = Engine(EngineConfig(answer_log_keep=3))
    for cmd in log:
        replayed.replay(cmd)
        replayed._check()
    assert replayed.digest() == live.digest()
    replayed.drain()
    replayed.sched.run_until_idle()  # the queries go on after their last logged answers: no slide answered twice
    assert not any(isinstance(c, Answered) for c in replayed.drain())
    for qid in ("P1", "P2"):
        want = live.answers.read(qid, -1, None, 100)[0]
        got = replayed.answers.read(qid, -1, None, 100)[0]
        assert [json.dumps(to_plain(r)) for r in got] == [json.dumps(to_plain(r)) for r in want]
        through_json = [from_plain(json.loads(json.dumps(to_plain(r)))) for r in want]
        assert [json.dumps(to_plain(r)) for r in through_json] == [json.dumps(to_plain(r)) for r in want]
    r = kept[0]
    r.answer.types[1] = "decimal(38,2)"  # decimals travel as their text
    r.answer.rows[0] = (r.answer.rows[0][0], Decimal("-12.50"), *r.answer.rows[0][2:])
    back = from_plain(json.loads(json.dumps(to_plain(r))))
    assert back.answer.rows[0][1] == Decimal("-12.50") and str(back.answer.rows[0][1]) == "-12.50"
    live.apply(Unregister("P1", 20))
    live.apply(DropStream("p", 21))
    assert live.answers.queries() == []
    live._check()


def test_an_answer_log_is_bounded_by_size_and_replay_drops_the_same_answers():
    from windowstore.txn.answers import answer_size

    live = Engine(EngineConfig(answer_log_keep=100, answer_log_bytes=3000))
    live.apply(create("p", 0, n=2, clock="manual", subwindow_ms=10))
    live.apply(Register("P1", "SELECT k, COUNT(*) FROM p [SLIDE 1 SUBWINDOWS] GROUP BY k", 0, 1))
    for i in range(12):  # more distinct keys each slide: answers grow
        live.apply(Append("p", batch([(i, f"key-{i}-{j}", j, 0.0) for j in range(3 * i + 1)]), "", None, 2 + i))
        live.apply(Slide("p", 3 + i))
        live.sched.run_until_idle()
        live._check()
    kept = live.answers.read("P1", -2, None, 1000)[0]
    assert kept[-1].slide == 11 and len(kept) < 12  # the oldest went first
    assert sum(answer_size(r) for r in kept) <= 3000 or len(kept) == 1
    replayed = Engine(EngineConfig(answer_log_keep=100, answer_log_bytes=3000))
    for cmd in [commands.decode(commands.encode(c)) for c in live.drain()]:
        replayed.replay(cmd)
    assert [r.slide for r in replayed.answers.read("P1", -2, None, 1000)[0]] == [r.slide for r in kept]
    assert replayed.digest() == live.digest()
    replayed._check()


def test_commands_round_trip_through_their_encoding():
    cmds = [create("s", 1.5, clock="event", subwindow_ms=10, allowed_lateness_ms=5),
            Append("s", batch([(1, "x'\"é", -2**63, -0.0)]), "w/p0", 3, 2.0), Append("s", batch([]), "", None, 2.5),
            Slide("s", 3.0), Slide("s", 3.5, "w", 7), Register("P7", "SELECT COUNT(*) FROM \"s\" [SLIDE 1 SUBWINDOWS]", 2, 4.0),
            Unregister("P7", 5.0), DropStream("s", 6.0),
            Answered("P7", {"columns": ["n"], "rows": [[1, None, "1.50", -0.0, 2**70]], "slide": 3}, 7.0)]
    for c in cmds:
        back = commands.decode(commands.encode(c))
        assert type(back) is type(c)
        if isinstance(c, Append):
            assert back.batch.equals(c.batch) and (back.stream, back.writer_id, back.batch_id, back.now_ms) == (
                c.stream, c.writer_id, c.batch_id, c.now_ms)
        else:
            assert back == c
    with pytest.raises(ValueError):
        commands.decode(b"\x09\x00\x00\x00\x00\x00")


@pytest.mark.slow
def test_string_codes_of_expired_sub_windows_are_reclaimed():
    """10^5 distinct strings pass through a 3-sub-window window: the dictionary stays bounded by
    what the window holds, answers stay right, and replay reaches the same state."""
    e = Engine()
    e.apply(create("s", 0, n=3, clock="manual", subwindow_ms=10))
    sizes = []
    for j in range(50):
        keys = [f"key-{j}-{i}" for i in range(2000)]
        e.apply(Append("s", batch([(j, k, i, 0.0) for i, k in enumerate(keys)]), "", None, j))
        e.apply(Slide("s", j))
        sizes.append(len(e.stream("s").strings))
        e._check()
    assert max(sizes) <= 4096 + 2 * 3 * 2000 + 2000  # bounded by the window, not by the 100,000 seen
    plan = plan_query(parse_query("SELECT MIN(k), MAX(k), COUNT(DISTINCT k) FROM s WHERE k >= 'key-48'"), e.stream("s"))
    txn = e.sched.submit(plan)
    e.sched.run_until_idle()
    assert txn.result.answer.rows == [("key-48-0", "key-49-999", 4000)]
    log = e.drain()
    assert any(isinstance(c, commands.CompactStrings) for c in log)
    again = Engine()
    for c in log:
        again.replay(commands.decode(commands.encode(c)))
    assert again.digest() == e.digest()


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(actions, max_size=40))
def test_replay_with_frequent_string_compaction(script):
    with frequent_compaction():
        live = Engine(EngineConfig(policy="ttu"))
        log = run_live(live, [("create", 0, 0, 3), ("create", 1, 2, 2)] + script)
        assert replay_log(log).digest() == live.digest()


# seals handed back ("sealed", which one in flight, whether it failed), among what happens meanwhile
sealed_action = st.tuples(st.just("sealed"), st.integers(0, 3), st.booleans())
seal_actions = st.sampled_from([append_action, append_action, time_action, steps_action, sealed_action,
                                sealed_action, slide_action, query_action, register_action, actions]).flatmap(lambda a: a)


@pytest.mark.slow
@settings(max_examples=examples(80), deadline=None)
@given(st.lists(seal_actions, max_size=50))
def test_seals_off_the_engine_thread_log_what_replay_rebuilds(script):
    """Every slide's seal is a job handed back later (appends, queries, other streams' slides,
    manual slides and string compaction in between; a failed job is sealed again inline): the log
    replayed at once rebuilds the same state."""
    with frequent_compaction():
        live = Engine(EngineConfig(policy="ttu"))
        # the script starts with a seal in flight on the processing-time stream s2
        start = [("create", 0, 0, 3), ("create", 1, 2, 2), ("create", 2, 1, 2),
                 ("append", 2, [(5, "a", 1, 0.5, True), (6, None, None, None, None)], "", 0), ("time", 250), ("steps", 1)]
        log = run_live(live, start + script, seal_elsewhere=True)
        assert live.sched.seals_offloaded or not any(isinstance(c, Slide) for c in log)
        assert replay_log(log).digest() == live.digest()


@pytest.mark.slow
@settings(max_examples=examples(80), deadline=None)
@given(st.lists(st.one_of(seal_actions, st.tuples(st.just("break"), st.integers(0, 2))), max_size=50),
       st.booleans())
def test_streams_stopped_by_a_seal_that_raised_then_dropped_leave_what_replay_rebuilds(script, elsewhere):
    """Seals of some streams raise (inline, or on the seal thread and again inline): those streams
    stop, refuse what comes for them, and the invariants hold throughout (run_live checks them
    after every action). Dropped, they leave the state that replaying the log rebuilds, where
    their seals, no longer broken, succeed."""
    with frequent_compaction():
        live = Engine(EngineConfig(policy="ttu"))
        start = [("create", 0, 0, 3), ("create", 1, 2, 2), ("create", 2, 1, 2)]
        log = run_live(live, start + script, seal_elsewhere=elsewhere)
        stopped = list(live.sched.failed)
        event(f"streams stopped: {len(stopped)}")
        for name in stopped:
            assert name in live.sched.streams and name not in live.sched.sealing
            with pytest.raises(StreamFailed):
                live.apply(Append(name, batch([(1, "a", 1, 0.5)]), "", None, 5000))
            live.apply(DropStream(name, 5000))
        live._check()
        log.extend(commands.decode(commands.encode(c)) for c in live.drain())
        assert not live.sealing
        assert replay_log(log).digest() == live.digest()


def test_an_idempotency_key_names_one_batch():
    e = Engine()
    e.apply(create("s", 0, clock="manual", subwindow_ms=10))
    rows = [(1, "a", 1, 0.5), (2, "b", 2, -0.0), (3, "a", 3, 1.0)]
    assert not e.apply(Append("s", batch(rows), "w", 7, 1)).duplicate
    # the same rows in another order (a Spark task retry, another partitioning) are a replay
    assert e.apply(Append("s", batch(list(reversed(rows))), "w", 7, 2)).duplicate
    # other rows under the same key are refused, never acknowledged
    for other in ([rows[0], rows[1]], rows + [(4, "c", 4, 0.0)], [(1, "a", 1, 0.5), (2, "b", 2, 0.1), (3, "a", 3, 1.0)]):
        with pytest.raises(FailedPrecondition, match="already appended with other rows"):
            e.apply(Append("s", batch(other), "w", 7, 3))
    assert e.books["s"].accepted_rows == 3


def test_idempotency_tables_are_bounded_per_writer_and_in_all_and_replay_evicts_the_same():
    config = EngineConfig(idempotency_keep=5, idempotency_keep_total=12)
    e = Engine(config)
    e.apply(create("s", 0, clock="manual", subwindow_ms=10))
    e.apply(create("t", 0, clock="manual", subwindow_ms=10))
    log = []
    for i in range(60):  # 6 writers over 2 streams, appends and slides keyed by the same writers
        stream, writer = "st"[i % 2], f"w{i % 6}"
        if i % 7 == 6:
            e.apply(Slide(stream, 1, writer, i))
        else:
            e.apply(Append(stream, batch([(i, "a", i, 0.0)]), writer, i, 1))
        log += [commands.decode(commands.encode(c)) for c in e.drain()]
        e._check()  # bounded per writer (5) and in all (12), and accounted
    assert 0 < e.acks_kept <= 12
    # the newest batch of a writer is still recognised; the oldest were forgotten and apply again
    assert e.apply(Append("t", batch([(59, "a", 59, 0.0)]), "w5", 59, 1)).duplicate
    assert not e.apply(Append("t", batch([(1, "a", 1, 0.0)]), "w1", 1, 1)).duplicate
    log += [commands.decode(commands.encode(c)) for c in e.drain()]
    replayed = Engine(config)
    for cmd in log:
        replayed.replay(cmd)
    replayed._check()
    assert replayed.digest() == e.digest() and replayed.acks_kept == e.acks_kept
    e.apply(DropStream("s", 2))
    e._check()


def _rows_of(e, name="s"):
    plan = plan_query(parse_query(f"SELECT v, COUNT(*) FROM {name} GROUP BY v"), e.stream(name))
    txn = e.sched.submit(plan)
    e.sched.run_until_idle()
    return dict(txn.result.answer.rows)


def test_staged_micro_batches_land_exactly_once():
    e = Engine()
    e.apply(create("s", 0, clock="manual", subwindow_ms=10))
    rows = [(i, "k", i, 0.0) for i in range(6)]
    # partition 0: a failed attempt a0 staged half its rows, the retry a1 staged all of them in
    # another order, in two chunks; partition 1 staged nothing (an empty partition)
    e.apply(StageRows("s", "q1", 0, "p0-a0", 0, batch(rows[:2]), 1))
    e.apply(StageRows("s", "q1", 0, "p0-a1", 0, batch(rows[3:][::-1]), 1))
    assert e.apply(StageRows("s", "q1", 0, "p0-a1", 1, batch(rows[:3]), 1)).rows == 6
    assert e.apply(StageRows("s", "q1", 0, "p0-a1", 1, batch(rows[:3]), 1)).rows == 6  # a retried chunk
    e.apply(Slide("s", 2))
    assert _rows_of(e) == {}  # staged rows are invisible
    with pytest.raises(FailedPrecondition, match="cannot be committed"):
        e.apply(CommitBatch("s", "q1", 0, (("p0-a1", 7),), False, 3))  # the count must match
    ack = e.apply(CommitBatch("s", "q1", 0, (("p0-a1", 6), ("p1-a0", 0)), True, 3))
    assert (ack.accepted, ack.duplicate) == (6, False)
    assert _rows_of(e) == {i: 1 for i in range(6)}  # committed with its slide: all rows, once
    assert e.books["s"].staged == {} and e.staged_bytes == 0  # the failed attempt is gone
    # Spark restarts from its checkpoint and re-runs batch 0 with another partitioning: a no-op
    e.apply(StageRows("s", "q1", 0, "p0-a7", 0, batch(rows[:4]), 4))
    assert e.apply(StageRows("s", "q1", 0, "p2-a8", 0, batch(rows[4:]), 4)).committed
    assert e.apply(CommitBatch("s", "q1", 0, (("p0-a7", 4), ("p2-a8", 2)), True, 5)).duplicate
    # ... unless the replay carries other rows: refused, never acknowledged
    e.apply(StageRows("s", "q1", 0, "p0-a9", 0, batch(rows[:5]), 6))
    with pytest.raises(FailedPrecondition, match="other rows"):
        e.apply(CommitBatch("s", "q1", 0, (("p0-a9", 5),), False, 6))
    # a batch older than the newest committed one is a replay too
    e.apply(CommitBatch("s", "q1", 5, (), False, 7))
    assert e.apply(CommitBatch("s", "q1", 3, (), False, 8)).duplicate
    # another query (a new checkpoint) with the same batch ids lands
    e.apply(StageRows("s", "q2", 0, "p0-a0", 0, batch([(9, "k", 100, 0.0)]), 9))
    assert not e.apply(CommitBatch("s", "q2", 0, (("p0-a0", 1),), True, 9)).duplicate
    # abort discards
    e.apply(StageRows("s", "q2", 1, "p0-a0", 0, batch([(9, "k", 200, 0.0)]), 10))
    assert e.apply(AbortBatch("s", "q2", 1, 10)) == 1
    e.apply(Slide("s", 11))
    assert _rows_of(e) == {**{i: 1 for i in range(6)}, 100: 1}
    e._check()
    log = e.drain()
    again = Engine()
    for c in log:
        again.replay(commands.decode(commands.encode(c)))
    assert again.digest() == e.digest()


def test_an_open_buffer_is_bounded_and_replay_never_refuses():
    e = Engine(EngineConfig(max_buffered_rows=5))
    e.apply(create("s", 0, clock="manual", subwindow_ms=10))
    e.apply(Append("s", batch([(i, "a", i, 0.0) for i in range(4)]), "", None, 1))
    with pytest.raises(ResourceLimit, match="rows waiting for a slide .*; slide it or append less"):
        e.apply(Append("s", batch([(i, "a", i, 0.0) for i in range(2)]), "", None, 2))
    # a stream that slides on its own clock: the writer is told to back off, not to slide
    e.apply(create("t", 0, clock="processing", subwindow_ms=10))
    e.apply(Append("t", batch([(i, "a", i, 0.0) for i in range(5)]), "", None, 1))
    with pytest.raises(ResourceLimit, match="has not caught up with the rows arriving: retry after a backoff"):
        e.apply(Append("t", batch([(0, "a", 0, 0.0)]), "", None, 1))
    e.apply(Slide("s", 3))
    e.apply(Append("s", batch([(i, "a", i, 0.0) for i in range(5)]), "", None, 4))
    log = e.drain()
    strict = Engine(EngineConfig(max_buffered_rows=1))  # a lower limit on restart: the log still replays
    for c in log:
        strict.replay(c)
    assert strict.digest() == e.digest()


def test_a_one_time_plan_is_reused_until_its_stream_is_dropped():
    e = Engine()
    e.apply(create("p", 0, clock="manual", subwindow_ms=10))
    q = parse_query("SELECT k, SUM(v) FROM p GROUP BY k")
    first = e.plan(q)
    assert e.plan(parse_query("SELECT k, SUM(v) FROM p GROUP BY k")) is first  # the same query text: the same plan
    assert e.plan(q, periodic=False) is first and e.plan(parse_query("SELECT COUNT(*) FROM p")) is not first
    e.apply(DropStream("p", 1))
    e._check()
    e.apply(create("p", 2, clock="manual", subwindow_ms=10))
    again = e.plan(q)
    assert again is not first and again.stream is e.stream("p")
    e._check()


def test_a_stream_whose_seal_raises_refuses_its_commands_and_queries_until_dropped():
    """Fail-stop per stream (Scheduler._seal_failed): the manual Slide that could not be sealed
    answers with why, and so does every later command or query of the stream; the engine counts
    as sealing (no snapshot of a state its log does not describe) until the stream is dropped;
    the other streams go on."""
    e = Engine()
    for name in ("s", "t"):
        e.apply(create(name, 0, clock="manual", subwindow_ms=100))
        e.apply(Append(name, batch([(1, "a", 1, 1.0)]), "", None, 0))

    def seal_cut(cut):
        raise RuntimeError("a defect")
    e.stream("s").window.seal_cut = seal_cut
    with pytest.raises(StreamFailed, match=r"sealing its slide 0 failed \(RuntimeError: a defect\); drop the stream"):
        e.apply(Slide("s", 0, "w", 7))
    for cmd in (Append("s", batch([(2, "b", 2, 2.0)]), "", None, 0), Slide("s", 0), Slide("s", 0, "w", 7)):
        with pytest.raises(StreamFailed):
            e.apply(cmd)
    with pytest.raises(StreamFailed):
        e.plan(parse_query("SELECT COUNT(*) FROM s"))
    assert e.sealing
    e._check()
    e.apply(Append("t", batch([(2, "b", 2, 2.0)]), "", None, 0))
    assert e.apply(Slide("t", 0)).rows == 2
    e.apply(DropStream("s", 0))
    assert not e.sealing
    e._check()
    # the Slide that could not be sealed is logged (its rows were cut): replay seals it again
    assert [(c.stream, c.writer_id, c.batch_id) for c in e.drain() if isinstance(c, Slide)] == [("s", "w", 7), ("t", "", None)]


def test_bad_data_a_query_cannot_answer_fails_it_as_bad_input_not_as_an_internal_error():
    """APPROXIMATE top-k by SUM needs non-negative per-key sums: over a sub-window whose key `a`
    sums to -5 the query is refused naming the column (INVALID_ARGUMENT), not failed as INTERNAL."""
    e = Engine()
    e.apply(create("p", 0, n=2, clock="manual", subwindow_ms=10))
    e.apply(Append("p", batch([(1, "a", -7, 0.5), (2, "a", 2, 1.5), (3, "b", 4, 1.0)]), "w", 1, 5))
    e.apply(Slide("p", 6))
    plan = e.plan(parse_query("SELECT k, SUM(v) FROM p GROUP BY k ORDER BY SUM(v) DESC LIMIT 1 APPROXIMATE"))
    txn = e.sched.submit(plan)
    e.sched.run_until_idle()
    assert txn.result is None
    assert isinstance(txn.error, InvalidInput) and not isinstance(txn.error, QueryFailed), repr(txn.error)
    assert "'v' has a negative per-key sum" in str(txn.error) and txn.error.column == "v"
    # the exact form answers the same data
    exact = e.sched.submit(e.plan(parse_query("SELECT k, SUM(v) FROM p GROUP BY k ORDER BY SUM(v) DESC LIMIT 1")))
    e.sched.run_until_idle()
    assert exact.result.answer.rows == [("b", 4)]
