"""A large Append's columns reach the engine aligned to their type.

The Arrow payload sits at whatever offset the request's fields put it, often not a multiple of 8,
and its columns decoded in place are views there: NumPy's reductions (the Append's event-time and
NaN checks on the loop) and indexed loops (the seal) take a buffered slow path over them. A payload
decoded off the loop (over 1 MiB) is read with its buffers copied to aligned memory there; one
decoded on the loop stays in place (the copy would cost the loop what the checks save)."""
from __future__ import annotations

import asyncio

import numpy as np
import pyarrow as pa
from hypothesis import given, settings, strategies as st

from windowstore.clients.client import append_request
from windowstore.server import rpc
from windowstore.server.config import ServerConfig
from windowstore.server.driver import Driver
from windowstore.server.payload import read_table
from windowstore.server.service import WindowStoreService
from windowstore.store import Stream, WindowSpec
from windowstore.store.kinds import Clock
from windowstore.txn.commands import CreateStream
from windowstore.v1 import windowstore_pb2 as pb

SCHEMA = {"ts": "int64", "k": "string", "v": "int64", "f": "float64"}


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _buffers_aligned(table: pa.Table) -> bool:
    """Every buffer of every column at a multiple of its item's width (8 for 64-bit values, 4 for
    int32 offsets and dictionary indices)."""
    for column in table.columns:
        for chunk in column.chunks:
            arrays = [chunk] + ([chunk.indices, chunk.dictionary] if pa.types.is_dictionary(chunk.type) else [])
            for a in arrays:
                t = a.type
                width = 4 if pa.types.is_string(t) else t.bit_width // 8 if not pa.types.is_dictionary(t) else 0
                bufs = a.buffers()
                if width > 1 and len(bufs) > 1 and bufs[1] is not None and bufs[1].address % width:
                    return False
    return True


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 300), shift=st.integers(1, 7), nulls=st.booleans(), dictionary=st.booleans())
def test_an_aligned_read_has_every_buffer_aligned_and_the_same_rows(rows, shift, nulls, dictionary):
    rng = np.random.default_rng(rows)
    keys = pa.array([f"key-{i % 13}" for i in range(rows)])
    table = pa.table({"ts": pa.array(np.arange(rows, dtype=np.int64)),
                      "k": keys.dictionary_encode() if dictionary else keys,
                      "v": pa.array(rng.integers(-10**12, 10**12, rows), mask=(np.arange(rows) % 5 == 0) if nulls else None),
                      "f": pa.array(rng.random(rows))})
    ipc = memoryview(b"\x00" * shift + _ipc(table))[shift:]  # the payload `shift` bytes into a message
    in_place = read_table(ipc, 1 << 30)
    aligned = read_table(ipc, 1 << 30, aligned=True)
    assert not _buffers_aligned(in_place), "the columns read in place are views at the payload's odd offset"
    assert _buffers_aligned(aligned)
    assert aligned.equals(table) and in_place.equals(table)


def _appended_columns(rows: int, monkeypatch) -> dict:
    """The columns the engine buffered of one Append of `rows` rows, sent as the SDK sends it and
    called through the server's Append method on the driver's loop."""
    seen: dict = {}
    buffer_checked = Stream.append_checked

    def spy(self, checked, n):
        seen.update(checked)
        return buffer_checked(self, checked, n)

    monkeypatch.setattr(Stream, "append_checked", spy)
    driver = Driver(ServerConfig(in_memory=True))
    driver.start()
    try:
        spec = WindowSpec(subwindows=4, subwindow_ms=1000, clock=Clock.MANUAL, group_by=("k",))
        driver.command(CreateStream("s", tuple(SCHEMA.items()), "ts", spec, 0.0)).result(30)
        rng = np.random.default_rng(0)
        batch = {"ts": np.arange(rows, dtype=np.int64) % 1000, "k": np.array([f"k{i % 50}" for i in range(rows)], dtype=object),
                 "v": rng.integers(0, 10**6, rows), "f": rng.random(rows)}
        data = append_request("s", batch, "", None, None)
        method = rpc.handlers(WindowStoreService(driver), None).service(_Details(f"/{rpc.SERVICE.full_name}/Append"))

        async def call():
            return pb.AppendResponse.FromString(method.response_serializer(
                await method.unary_unary(method.request_deserializer(data), _Context())))

        reply = asyncio.run_coroutine_threadsafe(call(), driver.loop).result(60)
        assert reply.accepted_rows == rows
        assert seen["ts"].tolist() == batch["ts"].tolist() and seen["f"].tolist() == batch["f"].tolist()
        return seen
    finally:
        driver.stop(5)


class _Details:
    def __init__(self, method: str):
        self.method = method
        self.invocation_metadata = ()


class _Context:
    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"

    def invocation_metadata(self):
        return ()


def test_a_payload_decoded_off_the_loop_reaches_the_engine_aligned(monkeypatch):
    columns = _appended_columns(60_000, monkeypatch)  # ~1.9 MB of Arrow: decoded off the loop
    assert all(columns[c].flags.aligned for c in ("ts", "v", "f"))


def test_a_small_payload_is_read_in_place(monkeypatch):
    columns = _appended_columns(1_000, monkeypatch)
    assert not all(columns[c].flags.aligned for c in ("ts", "v", "f")), "views into the request, no copy on the loop"
