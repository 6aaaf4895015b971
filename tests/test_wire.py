"""An Append's bytes read without protobuf (convert.parse_append): whenever it answers, it answers
what protobuf's parse does; it answers for every well-formed request with an Arrow payload and no
other field; it never raises, whatever the bytes."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from windowstore.server.convert import parse_append
from windowstore.v1 import windowstore_pb2 as pb

INT64 = st.integers(-(2**63), 2**63 - 1)


def same(w, m: pb.AppendRequest) -> bool:
    return (w.stream, w.writer_id, w.HasField("batch_id"), w.batch_id if w.HasField("batch_id") else None,
            w.HasField("after_batch_id"), w.after_batch_id if w.HasField("after_batch_id") else None,
            bytes(w.arrow_ipc), m.WhichOneof("batch")) == (
        m.stream, m.writer_id, m.HasField("batch_id"), m.batch_id if m.HasField("batch_id") else None,
        m.HasField("after_batch_id"), m.after_batch_id if m.HasField("after_batch_id") else None, m.arrow_ipc,
        "arrow_ipc")


@pytest.mark.slow
@given(st.text(max_size=20), st.binary(max_size=300), st.text(max_size=20), st.none() | INT64, st.none() | INT64)
def test_every_request_with_an_arrow_payload_is_read_as_protobuf_reads_it(stream, payload, writer, batch_id, after):
    m = pb.AppendRequest(stream=stream, arrow_ipc=payload, writer_id=writer)
    if batch_id is not None:
        m.batch_id = batch_id
    if after is not None:
        m.after_batch_id = after
    w = parse_append(m.SerializeToString())
    assert w is not None and same(w, m)


@given(st.binary(max_size=200))
def test_any_bytes_are_read_as_protobuf_reads_them_or_left_to_it(data):
    w = parse_append(data)
    if w is not None:
        assert same(w, pb.AppendRequest.FromString(data))


@given(st.text(max_size=10), st.binary(max_size=50), st.none() | INT64, st.data())
def test_damaged_requests_are_read_as_protobuf_reads_them_or_left_to_it(stream, payload, batch_id, data):
    m = pb.AppendRequest(stream=stream, arrow_ipc=payload, writer_id="w")
    if batch_id is not None:
        m.batch_id = batch_id
        m.after_batch_id = batch_id // 2
    raw = bytearray(m.SerializeToString())
    for _ in range(data.draw(st.integers(1, 3))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    raw = bytes(raw[:data.draw(st.integers(0, len(raw)))])
    w = parse_append(raw)
    if w is not None:
        assert same(w, pb.AppendRequest.FromString(raw))


def test_other_shapes_are_left_to_protobuf():
    columnar = pb.AppendRequest(stream="s", columnar=pb.ColumnarBatch())
    assert parse_append(columnar.SerializeToString()) is None
    twice = pb.AppendRequest(stream="a", arrow_ipc=b"x").SerializeToString() + pb.AppendRequest(stream="b").SerializeToString()
    assert parse_append(twice) is None and pb.AppendRequest.FromString(twice).stream == "b"  # the last one wins
    assert parse_append(b"\x0a\x02\xff\xfe" + pb.AppendRequest(arrow_ipc=b"x").SerializeToString()) is None  # not UTF-8
    assert parse_append(pb.AppendRequest(stream="s").SerializeToString()) is None  # no batch


@given(st.text(max_size=20), st.text(max_size=20), st.none() | INT64, st.none() | INT64,
       st.lists(st.tuples(st.integers(-5, 5), st.none() | st.text(max_size=5)), max_size=300))
def test_the_sdk_s_serialized_append_is_the_message_it_used_to_build(stream, writer, batch_id, after, rows):
    """The SDK writes an Arrow Append's bytes itself (batches.arrow_wire): protobuf reads them as
    the message the SDK used to build and serialize, and so does the server's reader."""
    import pyarrow as pa

    from windowstore.clients.batches import build, to_arrow, to_ipc
    from windowstore.clients.client import append_request

    table = pa.table({"ts": pa.array([r[0] for r in rows], pa.int64()), "s": pa.array([r[1] for r in rows], pa.string())})
    wire = append_request(stream, table, writer, batch_id, None, after_batch_id=after)
    assert isinstance(wire, bytes)
    built = build(pb.AppendRequest, stream=stream, writer_id=writer, batch_id=batch_id, after_batch_id=after)
    built.arrow_ipc = to_ipc(to_arrow(table))
    assert pb.AppendRequest.FromString(wire) == built
    w = parse_append(wire)
    assert w is not None and same(w, built)


@given(st.text(max_size=20), st.text(max_size=20), INT64, st.text(max_size=10), INT64,
       st.lists(st.integers(-5, 5), max_size=50))
def test_the_sdk_s_serialized_stage_rows_is_the_message_it_used_to_build(stream, writer, batch_id, attempt, chunk, ts):
    import pyarrow as pa

    from windowstore.clients.batches import build, to_arrow, to_ipc
    from windowstore.clients.client import stage_request

    table = pa.table({"ts": pa.array(ts, pa.int64())})
    built = build(pb.StageRowsRequest, stream=stream, writer_id=writer, batch_id=batch_id, attempt=attempt, chunk=chunk,
                  arrow_ipc=to_ipc(to_arrow(table)))
    assert pb.StageRowsRequest.FromString(stage_request(stream, table, writer, batch_id, attempt, chunk)) == built
