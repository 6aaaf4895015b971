"""Client-side batch conversion: dicts of lists or NumPy arrays, pandas or pyarrow -> Arrow IPC."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pyarrow as pa

from windowstore.v1 import windowstore_pb2 as pb

from .errors import InvalidArgument


# What protobuf, pyarrow and NumPy raise for a value that does not fit its field or column: the SDK
# turns these into InvalidArgument, so callers see one typed error for bad input.
BAD_VALUE = (ValueError, TypeError, OverflowError, UnicodeError, pa.ArrowException)


def to_arrow(batch: Any) -> pa.Table:
    try:
        return _to_arrow(batch)
    except InvalidArgument:
        raise
    except BAD_VALUE as e:
        raise InvalidArgument(f"cannot turn the batch into columns: {str(e)[:300]}") from None


def _to_arrow(batch: Any) -> pa.Table:
    if isinstance(batch, pa.Table):
        return batch
    if isinstance(batch, pa.RecordBatch):
        return pa.Table.from_batches([batch])
    if type(batch).__module__.startswith("pandas"):
        return pa.Table.from_pandas(batch, preserve_index=False)
    if isinstance(batch, Mapping):
        cols = {}
        for name, values in batch.items():
            if isinstance(values, np.ndarray) and values.dtype.kind in "OU":
                values = values.tolist()
            # None is NULL, and NaN too (as pyarrow takes pandas data: from_pandas)
            cols[name] = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values, from_pandas=True)
        return pa.table(cols)
    raise InvalidArgument(f"a batch is a dict of columns, a pandas DataFrame or a pyarrow Table, not {type(batch).__name__}")


def to_ipc(table: pa.Table) -> bytes:
    """Arrow IPC stream bytes; string columns go dictionary-encoded (smaller on the wire, and the
    server then maps only the distinct values)."""
    return b"".join(ipc_pieces(table).pieces)


def ipc_pieces(table: pa.Table) -> "IpcPieces":
    """to_ipc's stream as the pieces Arrow's writer gave, the columns' buffers not copied."""
    try:
        return _to_ipc(table)
    except BAD_VALUE as e:
        raise InvalidArgument(f"cannot encode the batch as Arrow IPC: {str(e)[:300]}") from None


class IpcPieces:
    """A write-only file that keeps what Arrow's IPC writer writes into it: the messages' metadata
    as bytes and the columns' buffers as Arrow buffers over the batch's own memory, so that the
    one copy of the payload is the request's join (arrow_wire); written into a buffer first, every
    column is copied once more (docs/performance.md, Round 24)."""

    closed = False  # (pa.PythonFile asks)

    def __init__(self) -> None:
        self.pieces: list[bytes | pa.Buffer] = []
        self.size = 0

    def write(self, data: bytes | pa.Buffer) -> int:
        self.pieces.append(data)
        self.size += len(data)
        return len(data)

    def flush(self) -> None:
        pass

    def _check(self) -> None:
        assert self.size == sum(len(p) for p in self.pieces), "size counts every piece kept"
        assert all(isinstance(p, (bytes, pa.Buffer)) for p in self.pieces), "pieces are bytes or Arrow buffers"


# chosen once: new_stream without options reads two environment variables on every call
_IPC_OPTIONS = pa.ipc.IpcWriteOptions()


def _to_ipc(table: pa.Table) -> IpcPieces:
    import pyarrow.compute as pc

    for i, field in enumerate(table.schema):
        if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
            table = table.set_column(i, field.name, pc.dictionary_encode(table.column(i)))
    out = IpcPieces()
    with pa.ipc.new_stream(pa.PythonFile(out, mode="w"), table.schema, options=_IPC_OPTIONS) as writer:
        writer.write_table(table)
    return out


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def arrow_wire(head, table: pa.Table) -> bytes:
    """A request carrying `table` as Arrow IPC (an AppendRequest or a StageRowsRequest), serialized:
    `head`'s fields, then its arrow_ipc field written around the IPC stream's pieces in one join.
    Building the message instead (the IPC bytes copied out of Arrow, into the message and out
    again when serialized) made three fresh copies of every batch, and the writer's CPU per batch
    several times what it is now (docs/bench-history.md)."""
    ipc = ipc_pieces(table)
    tag = _varint(head.DESCRIPTOR.fields_by_name["arrow_ipc"].number << 3 | 2)  # length-delimited
    return b"".join((head.SerializeToString(), tag, _varint(ipc.size), *ipc.pieces))


def to_columnar(batch: Mapping[str, Any], types: Mapping[str, str]) -> pb.ColumnarBatch:
    """The plain protobuf form, for callers that want to avoid Arrow (slower)."""
    out = pb.ColumnarBatch()
    for name, values in batch.items():
        values = values.tolist() if isinstance(values, np.ndarray) else list(values)
        kind = types.get(name)
        try:
            col = out.columns.add(name=name)
            nulls = [v is None or (isinstance(v, float) and v != v) for v in values]
            if any(nulls):  # NULL: a placeholder value and is_null set
                col.is_null.extend(nulls)
                fill = {"string": "", "float64": 0.0, "boolean": False}.get(kind, 0)  # type: ignore[arg-type]  # an unknown type: 0
                values = [fill if n else v for v, n in zip(values, nulls)]
            if kind == "string":
                col.string_values.values.extend(values)
            elif kind and kind.lower().startswith("decimal"):  # exact: as decimal text
                col.string_values.values.extend("0" if n else str(v) for v, n in zip(values, nulls))
            elif kind == "float64":
                col.float64_values.values.extend(values)
            elif kind == "boolean":
                col.bool_values.values.extend(values)
            else:
                col.int64_values.values.extend(values)
        except BAD_VALUE as e:
            raise InvalidArgument(f"column {str(name)[:100]!r} ({kind or 'int64'}): {str(e)[:300]}") from None
    return out


def build(cls, **fields):
    """A request message; a value protobuf refuses (out of range, wrong type, a str that is not
    valid Unicode) is InvalidArgument naming the field, not a bare ValueError from protobuf."""
    try:
        return cls(**fields)
    except BAD_VALUE as e:
        for name, value in fields.items():
            try:
                cls(**{name: value})
            except BAD_VALUE as e1:
                shown = repr(value)
                shown = shown if len(shown) <= 60 else shown[:60] + "..."
                raise InvalidArgument(f"{cls.DESCRIPTOR.name}.{name} = {shown}: {str(e1)[:200]}") from None
        raise InvalidArgument(f"{cls.DESCRIPTOR.name}: {str(e)[:300]}") from None
