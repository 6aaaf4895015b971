"""Times at the edges of int64: every bound the store derives from an event time (a sub-window's
start and end, the window's, the next slide) is an exact int64 or the request is refused with
OUT_OF_RANGE naming the column and the limit, before anything is applied or logged. A state that
an older version let in (a log record or a snapshot this code refuses) stops its one stream at
recovery, and every response that lists streams still answers for the others."""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, strategies as st

from windowstore.server.convert import int64, stream_info_to_pb
from windowstore.store.errors import OutOfRange, Unrepresentable
from windowstore.store.exact import INT64_MAX, INT64_MIN
from windowstore.store.window import WindowSpec
from windowstore.txn import StreamFailed, commands
from windowstore.txn.commands import Append, CommitBatch, CreateStream, DropStream, Slide, StageRows
from windowstore.txn.engine import Engine, EngineConfig

COLUMNS = (("ts", "int64"), ("v", "int64"))
SHAPES = {
    "event-7ms": dict(clock="event", subwindow_ms=7),
    "event-1s-late": dict(clock="event", subwindow_ms=1000, allowed_lateness_ms=5000),
    "event-year": dict(clock="event", subwindow_ms=366 * 24 * 3_600_000),
    "count-processing": dict(clock="processing", subwindow_rows=2),
    "count-manual": dict(clock="manual", subwindow_rows=1),
    "manual-ms": dict(clock="manual", subwindow_ms=5),
    "processing-ms": dict(clock="processing", subwindow_ms=10),
}


def create(name: str, now: int, n: int = 3, **shape) -> CreateStream:
    return CreateStream(name, COLUMNS, "ts", WindowSpec(n, shape.get("subwindow_ms"), shape.get("subwindow_rows"), shape["clock"],
                                                    shape.get("allowed_lateness_ms", 0), (), 4), now)


def rows(ts: list[int]) -> pa.Table:
    return pa.table({"ts": pa.array(ts, pa.int64()), "v": pa.array([1] * len(ts), pa.int64())})


def slot_bounds(spec: WindowSpec, ts: int) -> tuple[int, int]:
    """An event-time sub-window's [start, end) for `ts`, computed directly (Python ints)."""
    t = spec.subwindow_ms
    return (ts // t) * t, (ts // t + 1) * t


@given(st.integers(1, 366 * 24 * 3_600_000))
def test_event_time_limits_are_the_outermost_times_whose_sub_window_fits_int64(t):
    spec = WindowSpec(2, t, clock="event")
    lo, hi = spec.event_time_limits()
    assert INT64_MIN <= slot_bounds(spec, lo)[0] and slot_bounds(spec, hi)[1] <= INT64_MAX
    # one past either limit, the sub-window's bound leaves int64 (or the time itself does)
    assert lo - 1 < INT64_MIN or slot_bounds(spec, lo - 1)[0] < INT64_MIN
    assert hi + 1 > INT64_MAX or slot_bounds(spec, hi + 1)[1] > INT64_MAX


def test_count_based_streams_refuse_the_largest_int64_since_their_end_is_one_past_it():
    spec = WindowSpec(2, subwindow_rows=1, clock="manual")
    assert spec.event_time_limits() == (INT64_MIN, INT64_MAX - 1)
    assert WindowSpec(2, 10, clock="processing").event_time_limits() == (INT64_MIN, INT64_MAX)


def _bounds_fit(engine: Engine) -> None:
    """Every bound of every stream is an int64, and its description and an answer encode."""
    for s in engine.sched.streams.values():
        w = s.window
        for sub in w.subs:
            if sub is not None:
                assert INT64_MIN <= sub.start_ms <= sub.end_ms <= INT64_MAX, (s.name, sub.start_ms, sub.end_ms)
        lo, hi = w.bounds(w.n)
        assert lo is None or INT64_MIN <= lo <= hi <= INT64_MAX
        nxt = w.next_due_ms()
        assert nxt is None or INT64_MIN <= nxt <= INT64_MAX
        info = stream_info_to_pb(s, engine.sched.failed.get(s.name))
        assert not info.HasField("stopped"), info.stopped


edge_times = st.one_of(st.integers(INT64_MIN, INT64_MIN + 20_000), st.integers(INT64_MAX - 20_000, INT64_MAX),
                       st.integers(INT64_MIN, INT64_MAX), st.integers(-1000, 1000))


@given(st.sampled_from(sorted(SHAPES)), st.lists(st.tuples(st.sampled_from(["append", "stage", "slide", "time"]),
                                                           st.lists(edge_times, min_size=1, max_size=4)),
                                                 max_size=12))
def test_a_time_at_the_edge_of_int64_is_either_refused_whole_or_bounded_exactly(shape, script):
    engine = Engine(EngineConfig(policy="ttu"))
    now = 1_000
    engine.apply(create("s", now, **SHAPES[shape]))
    spec = engine.stream("s").spec
    lo, hi = spec.event_time_limits()
    for i, (kind, ts) in enumerate(script):
        before = engine.digest()
        outside = min(ts) < lo or max(ts) > hi
        try:
            if kind == "append":
                engine.apply(Append("s", rows(ts), "w", i, now))
            elif kind == "stage":
                engine.apply(StageRows("s", "q", i, "a0", 0, rows(ts), now))
                before = engine.digest()  # the commit is a request of its own
                engine.apply(CommitBatch("s", "q", i, (("a0", len(ts)),), False, now))
            elif kind == "slide" and spec.clock == "manual" and not spec.count_based:
                engine.apply(Slide("s", now))
            elif kind == "time":
                now += 7
                engine.tick(now)
        except OutOfRange as e:
            assert outside, f"refused {ts} within {lo}..{hi}: {e}"
            assert e.field == "ts" and e.limit in (lo, hi) and str(e.limit) in str(e)
            assert engine.digest() == before, "a refused request changed nothing"
        except Exception as e:  # noqa: BLE001 - other refusals (e.g. too far ahead of the watermark)
            assert not isinstance(e, (AssertionError, OverflowError)), e
            assert engine.digest() == before, "a refused request changed nothing"
        else:
            assert kind not in ("append", "stage") or not outside, f"accepted {ts} outside {lo}..{hi}"
        engine.sched.run_until_idle()
        engine._check()
        _bounds_fit(engine)


def test_the_earliest_event_time_seals_into_a_sub_window_that_starts_within_int64():
    engine = Engine(EngineConfig(policy="ttu"))
    engine.apply(create("s", 0, n=10, clock="event", subwindow_ms=7))
    lo, _ = engine.stream("s").spec.event_time_limits()
    engine.apply(Append("s", rows([lo, lo + 1]), "", None, 0))
    engine.apply(Append("s", rows([lo + 7 * 5]), "", None, 0))  # the watermark passes two slots
    engine.sched.run_until_idle()
    w = engine.stream("s").window
    assert w.latest >= 0 and w.bounds(w.n)[0] == lo
    _bounds_fit(engine)


def test_an_answer_or_a_listing_never_carries_a_value_outside_int64():
    assert int64(INT64_MAX, "window_end_ms") == INT64_MAX
    with pytest.raises(Unrepresentable, match="window_end_ms 9223372036854775808"):
        int64(INT64_MAX + 1, "window_end_ms")


def poisoned_log() -> list:
    """A log an older version could write: a count-based stream given the largest int64, whose
    sub-window then ended at 2^63, beside a healthy stream."""
    return [create("good", 0, clock="manual", subwindow_ms=5), create("poison", 0, clock="manual", subwindow_rows=1),
            Append("good", rows([1, 2, 3]), "", None, 1), Slide("good", 2),
            Append("poison", rows([INT64_MAX]), "", None, 3),
            Append("poison", rows([5]), "", None, 4), Append("good", rows([4]), "", None, 5), Slide("good", 6)]


def test_a_log_record_this_code_refuses_stops_its_stream_at_recovery_and_only_it():
    engine = Engine(EngineConfig(policy="ttu"))
    for cmd in poisoned_log():
        engine.replay(commands.decode(commands.encode(cmd)))
        engine._check()
    assert "poison" in engine.sched.failed and "good" not in engine.sched.failed
    why = engine.sched.failed["poison"]
    assert "stopped at recovery" in why and "9223372036854775807" in why and "Append" in why
    with pytest.raises(StreamFailed, match="stopped at recovery"):
        engine.stream("poison")
    good = engine.stream("good")
    assert good.window.latest == 1 and sum(s.rows for s in good.window.youngest(3)) == 4
    info = stream_info_to_pb(engine.stream("poison", failed_ok=True), engine.sched.failed.get("poison"))
    assert info.stopped == why and info.spec.name == "poison"
    # dropping it is what is left to do, and it is logged as usual
    engine.apply(DropStream("poison", 10))
    assert "poison" not in engine.sched.streams and not engine.sched.failed
    _bounds_fit(engine)


def test_a_stream_whose_state_cannot_be_encoded_is_listed_as_stopped_with_why():
    engine = Engine(EngineConfig(policy="ttu"))
    engine.apply(create("s", 0, clock="manual", subwindow_ms=5))
    engine.apply(Append("s", rows([1]), "", None, 1))
    engine.apply(Slide("s", 2))
    stream = engine.stream("s")
    sub = stream.window.subs[0]
    object.__setattr__(sub, "end_ms", INT64_MAX + 1)  # what an older version's snapshot could hold
    assert stream.window.subs[0].end_ms == INT64_MAX + 1
    info = stream_info_to_pb(stream, None)
    assert info.spec.name == "s" and "window_end_ms 9223372036854775808" in info.stopped
    assert not info.HasField("window_end_ms") and not info.HasField("window_start_ms")
    assert stream.window.refused_state() == "sub-window 0 has the bound 9223372036854775808, outside int64"


# -- through a real server -----------------------------------------------------------------------

def test_the_server_refuses_an_event_time_past_the_limit_with_out_of_range_and_keeps_listing(tmp_path):
    from windowstore.clients import Client, OutOfRange as ClientOutOfRange
    from windowstore.server.process import ServerProcess

    with ServerProcess() as srv, Client(srv.target, timeout=30) as ws:
        ws.create_stream("c", {"ts": "int64", "v": "int64"}, subwindows=2, subwindow_rows=1, clock="manual")
        with pytest.raises(ClientOutOfRange, match=r"column 'ts' is beyond 9223372036854775806") as e:
            ws.append("c", {"ts": [1, INT64_MAX], "v": [1, 2]})
        assert e.value.code.name == "OUT_OF_RANGE"
        assert ws.append("c", {"ts": [INT64_MAX - 1], "v": [1]}).accepted == 1
        (info,) = ws.list_streams()
        assert info["window_end_ms"] == INT64_MAX and info["stopped"] is None
        assert ws.query("SELECT COUNT(*), MAX(ts) FROM c").rows == [(1, INT64_MAX - 1)]


def test_a_data_directory_whose_log_holds_a_refused_record_starts_with_that_stream_stopped(tmp_path):
    from windowstore.clients import Client, FailedPrecondition as ClientFailedPrecondition
    from windowstore.server.process import ServerProcess
    from windowstore.server.wal import WriteAheadLog

    srv = ServerProcess(data_dir=str(tmp_path))
    with Client(srv.target, timeout=30) as ws:
        ws.create_stream("good", {"ts": "int64", "v": "int64"}, subwindows=4, subwindow_ms=5, clock="manual")
        ws.create_stream("poison", {"ts": "int64", "v": "int64"}, subwindows=2, subwindow_rows=1, clock="manual")
        ws.append("good", {"ts": [1, 2, 3], "v": [1, 2, 3]})
        ws.slide("good")
    srv.proc.kill()
    srv.proc.wait()
    # what an older version accepted and logged: the largest int64 in a count-based stream
    wal = WriteAheadLog(str(tmp_path / "wal"), "always")
    for _ in wal.recover(0):
        pass
    wal.append(commands.encode(Append("poison", rows([INT64_MAX]), "", None, 10)))
    wal.flush()
    wal.close()
    for restart in range(2):  # the state is the same after every restart until it is dropped
        srv = ServerProcess(data_dir=str(tmp_path))
        try:
            with Client(srv.target, timeout=30) as ws:
                listed = {s["spec"]["name"]: s for s in ws.list_streams()}
                assert set(listed) == {"good", "poison"}
                assert listed["good"]["stopped"] is None
                assert "stopped at recovery" in listed["poison"]["stopped"]
                assert "9223372036854775807" in listed["poison"]["stopped"]
                assert ws.describe_stream("poison")["stopped"] == listed["poison"]["stopped"]
                assert ws.query("SELECT COUNT(*), SUM(v) FROM good").rows == [(3, 6)]
                with pytest.raises(ClientFailedPrecondition, match="stopped at recovery"):
                    ws.query("SELECT COUNT(*) FROM poison")
                with pytest.raises(ClientFailedPrecondition, match="stopped at recovery"):
                    ws.append("poison", {"ts": [1], "v": [1]})
                stats = {s["stream"]: s for s in ws.stats()["streams"]}
                assert "stopped at recovery" in stats["poison"]["stopped"]
                if restart:
                    ws.drop_stream("poison")
                    assert [s["spec"]["name"] for s in ws.list_streams()] == ["good"]
        finally:
            srv.stop()
    srv = ServerProcess(data_dir=str(tmp_path))
    try:
        with Client(srv.target, timeout=30) as ws:
            assert [s["spec"]["name"] for s in ws.list_streams()] == ["good"]
            assert ws.query("SELECT COUNT(*), SUM(v) FROM good").rows == [(3, 6)]
    finally:
        srv.stop()
