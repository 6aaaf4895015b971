"""Append requests off the wire: an Arrow AppendRequest read from its received bytes without
protobuf's copies (WireAppend, parse_append), and the decoder of a request's batch, Arrow or
columnar, into a pyarrow Table (batch_decoder). Pure functions; it must not apply a batch (the
driver and the engine do).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from windowstore.store import InvalidInput
from windowstore.v1 import windowstore_pb2 as pb

from .payload import read_table


# -- batches ---------------------------------------------------------------------------------------
_ARROW_TYPES = {"int64_values": pa.int64(), "float64_values": pa.float64(), "string_values": pa.string(),
                "bool_values": pa.bool_()}


class WireAppend:
    """An AppendRequest with an Arrow payload, read from the received bytes by `parse_append`:
    `arrow_ipc` is a view into them, not a copy (protobuf's parse copies the payload into the
    message, and reading the field copies it out again: for a 3.6 MB request 183 us of a warm
    process, and twice the payload's size of fresh memory). The fields and methods the Append
    handler reads of a request, with protobuf's meaning."""

    __slots__ = ("stream", "writer_id", "batch_id", "arrow_ipc", "event_time_ms", "after_batch_id")

    def __init__(self, stream: str, writer_id: str, batch_id: int | None, arrow_ipc: memoryview,
                 event_time_ms: int | None = None, after_batch_id: int | None = None):
        self.stream, self.writer_id, self.batch_id, self.arrow_ipc = stream, writer_id, batch_id, arrow_ipc
        self.event_time_ms, self.after_batch_id = event_time_ms, after_batch_id

    def HasField(self, name: str) -> bool:  # noqa: N802 - protobuf's name
        if name == "batch_id":
            return self.batch_id is not None
        if name == "event_time_ms":
            return self.event_time_ms is not None
        if name == "after_batch_id":
            return self.after_batch_id is not None
        if name == "arrow_ipc":
            return True
        raise ValueError(f"AppendRequest has no optional field {name!r}")

    def WhichOneof(self, name: str) -> str:  # noqa: N802
        assert name == "batch"
        return "arrow_ipc"


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A base-128 varint at pos: (value, next position); ValueError when cut off or too long."""
    value = shift = 0
    while shift < 70:
        b = data[pos]  # IndexError when cut off
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
    raise ValueError("varint too long")


def parse_append(data: bytes) -> WireAppend | None:
    """An AppendRequest's bytes as a WireAppend when they hold an Arrow payload and no field but
    stream (1), arrow_ipc (2), writer_id (4), batch_id (5), event_time_ms (6) and after_batch_id (20), each once
    and well formed; None
    otherwise (a columnar batch, unknown or repeated fields, bad UTF-8, anything malformed), to
    be parsed by protobuf, which then decides and words the error."""
    fields: dict[int, Any] = {}  # field number -> (start, end) of a bytes field, or the int64
    n = len(data)
    pos = 0
    try:
        while pos < n:
            key, pos = _varint(data, pos)
            number, wire = key >> 3, key & 7
            if number in fields:
                return None
            if wire == 2 and number in (1, 2, 4):
                size, pos = _varint(data, pos)
                end = pos + size
                if end > n:
                    return None
                fields[number] = (pos, end)
                pos = end
            elif wire == 0 and number in (5, 6, 20):
                value, pos = _varint(data, pos)
                if value >= 1 << 64:
                    return None
                fields[number] = value - (1 << 64) if value >= 1 << 63 else value  # int64: two's complement
            else:
                return None
        if 2 not in fields:
            return None
        stream = writer = ""
        if 1 in fields:
            stream = data[slice(*fields[1])].decode("utf-8")
        if 4 in fields:
            writer = data[slice(*fields[4])].decode("utf-8")
    except (IndexError, ValueError):  # UnicodeDecodeError is a ValueError
        return None
    return WireAppend(stream, writer, fields.get(5), memoryview(data)[slice(*fields[2])], fields.get(6),
                      fields.get(20))


def batch_decoder(req: pb.AppendRequest | WireAppend, max_decompressed: int = 1 << 30):
    """(decode, size): a call that returns the batch as a pyarrow Table and the Arrow IPC bytes it
    came in (kept for the log; None for a columnar batch), to make where the caller chooses, and
    the payload's size in bytes to choose by. decode() raises InvalidInput on malformed input,
    ResourceLimit when an Arrow payload would decompress to more than `max_decompressed`
    bytes. The Arrow payload is read once (a WireAppend's is a view; a message's field copies it
    out on each access) and sized by its length (ByteSize() would serialize the whole message
    again to count it)."""
    if req.WhichOneof("batch") == "arrow_ipc":
        ipc = req.arrow_ipc
        return (lambda: (read_table(ipc, max_decompressed), ipc)), len(ipc)
    return (lambda: (_columnar_batch(req), None)), req.ByteSize()  # type: ignore[arg-type, union-attr]  # a WireAppend is always Arrow


def _columnar_batch(req: pb.AppendRequest) -> pa.Table:
    """A columnar batch (one protobuf value per cell) as a Table; InvalidInput when malformed."""
    kind = req.WhichOneof("batch")
    if kind == "columnar":
        out = {}
        for col in req.columnar.columns:
            which = col.WhichOneof("values")
            if which is None:
                raise InvalidInput(f"column {col.name!r} has no values", column=col.name)
            if col.name in out:
                raise InvalidInput(f"column {col.name!r} appears twice", column=col.name)
            values = getattr(col, which).values
            if len(col.is_null):  # nulls: a validity mask over the values (placeholders where null)
                if len(col.is_null) != len(values):
                    raise InvalidInput(f"column {col.name!r} has {len(col.is_null)} is_null flags for {len(values)} values",
                                       column=col.name)
                out[col.name] = pa.array(values, type=_ARROW_TYPES[which], mask=np.asarray(col.is_null, dtype=bool))
            else:
                out[col.name] = pa.array(values, type=_ARROW_TYPES[which])
        lengths = {len(v) for v in out.values()}
        if len(lengths) > 1:
            raise InvalidInput(f"columns have different lengths ({', '.join(str(n) for n in sorted(lengths))})")
        return pa.table(out) if out else pa.table({})
    raise InvalidInput("append needs a batch: arrow_ipc or columnar")

