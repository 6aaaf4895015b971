"""Arrow IPC payloads from the network: sized before anything is decompressed, then fully
validated before any use.

An Arrow IPC stream may compress its buffers (LZ4 frame or ZSTD, per message). Each compressed
buffer starts with its uncompressed length as an int64, so the decompressed size of a payload is
known from the message metadata alone: a 66 KB request cannot make the server allocate 2 GB. The
metadata is a FlatBuffer; this module reads only the few fields it needs (Message.fbs:
Message.header, RecordBatch.buffers, RecordBatch.compression, DictionaryBatch.data), with every
read bounds-checked, so a malformed payload is refused here, never half-read.
"""
from __future__ import annotations

import struct

import pyarrow as pa

from windowstore.store import InvalidInput
from windowstore.store.errors import ResourceLimit

_DICTIONARY_BATCH, _RECORD_BATCH = 2, 3  # Message.header_type values (MessageHeader union)


class _FlatBuffer:
    """Bounds-checked reads of a FlatBuffer (tables, vectors of structs, scalars)."""

    def __init__(self, data: bytes):
        self.data = data

    def _read(self, fmt: str, pos: int):
        if pos < 0 or pos + struct.calcsize(fmt) > len(self.data):
            raise InvalidInput("arrow_ipc is not a valid Arrow IPC stream: message metadata out of bounds")
        return struct.unpack_from(fmt, self.data, pos)[0]

    def root(self) -> int:
        return self._read("<I", 0)

    def field(self, table: int, index: int) -> int | None:
        """Position of field `index` of the table at `table`, or None when absent."""
        vtable = table - self._read("<i", table)
        size = self._read("<H", vtable)
        if 4 + 2 * index >= size:
            return None
        off = self._read("<H", vtable + 4 + 2 * index)
        return table + off if off else None

    def table(self, table: int, index: int) -> int | None:
        pos = self.field(table, index)
        return None if pos is None else pos + self._read("<I", pos)

    def ubyte(self, table: int, index: int) -> int:
        pos = self.field(table, index)
        return 0 if pos is None else self._read("<B", pos)

    def structs(self, table: int, index: int, fmt: str) -> list[tuple]:
        pos = self.table(table, index)  # a vector is reached like a table: through a uoffset
        if pos is None:
            return []
        n, width = self._read("<I", pos), struct.calcsize(fmt)
        if pos + 4 + n * width > len(self.data):
            raise InvalidInput("arrow_ipc is not a valid Arrow IPC stream: message metadata out of bounds")
        return list(struct.iter_unpack(fmt, self.data[pos + 4:pos + 4 + n * width]))


def decompressed_size(message: pa.ipc.Message) -> int:
    """Bytes the message's body takes once its buffers are decompressed (its size if none is)."""
    body = message.body
    body_size = body.size if body is not None else 0
    if message.type == "schema":  # no body to decompress: its metadata is not copied out and read
        return body_size
    fb = _FlatBuffer(message.metadata.to_pybytes())
    msg = fb.root()
    kind = fb.ubyte(msg, 1)
    if kind not in (_DICTIONARY_BATCH, _RECORD_BATCH):
        return body_size
    batch = fb.table(msg, 2)
    if batch is not None and kind == _DICTIONARY_BATCH:
        batch = fb.table(batch, 1)
    if batch is None or fb.field(batch, 3) is None:  # no BodyCompression: the body is as sent
        return body_size
    total = 0
    for offset, length in fb.structs(batch, 2, "<qq"):
        if length == 0:
            continue
        if offset < 0 or length < 8 or offset + length > body_size:
            raise InvalidInput("arrow_ipc is not a valid Arrow IPC stream: a compressed buffer lies outside the body")
        (uncompressed,) = struct.unpack_from("<q", body, offset)
        if uncompressed < -1:
            raise InvalidInput("arrow_ipc is not a valid Arrow IPC stream: a negative uncompressed length")
        total += length - 8 if uncompressed == -1 else uncompressed  # -1: this buffer was left uncompressed
    return total


def read_table(ipc: bytes | memoryview, max_decompressed: int) -> pa.Table:
    """The payload as a validated Table; InvalidInput when malformed, ResourceLimit when it would
    decompress to more than `max_decompressed` bytes (checked before decompressing anything)."""
    try:
        total = 0
        for message in pa.ipc.MessageReader.open_stream(pa.BufferReader(ipc)):
            total += decompressed_size(message)
            if total > max_decompressed:
                raise ResourceLimit(f"arrow_ipc would decompress to more than {max_decompressed >> 20} MiB "
                                    f"(limit --max-decompressed-mb); send smaller batches")
        with pa.ipc.open_stream(pa.BufferReader(ipc)) as reader:
            table = reader.read_all()
        table.validate()
    except (pa.ArrowException, OSError, IndexError) as e:  # ArrowException: ArrowInvalid, ArrowKeyError, ...
        raise InvalidInput(f"arrow_ipc is not a valid Arrow IPC stream: {str(e)[:200]}") from None
    names = []
    for i, field in enumerate(table.schema):
        try:
            names.append(field.name)
        except UnicodeDecodeError:
            raise InvalidInput(f"arrow_ipc: the name of column {i} (counting from 0) is not valid UTF-8") from None
    # Bytes from the network: every offset, index and UTF-8 string is checked before any use,
    # column by column so that the error names the column
    for name, column in zip(names, table.columns):
        try:
            _validate_column(column)
        except pa.ArrowException as e:
            raise InvalidInput(f"column {name[:100]!r} of arrow_ipc is not valid: {str(e)[:200]}",
                               column=name[:100]) from None
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise InvalidInput(f"column {dup[:100]!r} appears twice", column=dup[:100])
    return table


def _validate_column(column: pa.ChunkedArray) -> None:
    """Arrow's full validation of a column (ArrowInvalid when any offset, index or string is wrong).

    A dictionary column whose indices have no validity bitmap (as writers send them when no index
    is null) has its dictionary validated fully and its indices' bounds checked by one pass (a
    maximum): Arrow's full validation checks each index on its own, ~4x the instructions, the
    largest share of a 10^4-row Append's validation. With a bitmap, Arrow's full validation runs."""
    if not pa.types.is_dictionary(column.type):
        column.validate(full=True)
        return
    for chunk in column.chunks:
        chunk.validate()  # buffers' sizes first: the bounds pass reads the indices
        if chunk.indices.buffers()[0] is not None:
            chunk.validate(full=True)
            continue
        chunk.dictionary.validate(full=True)
        indices = chunk.indices.to_numpy()  # no validity bitmap: zero-copy
        unsigned = indices.view(f"u{indices.itemsize}")  # a negative index reads as one past any dictionary
        if len(indices) and unsigned.max() >= len(chunk.dictionary):
            bad = indices[unsigned >= len(chunk.dictionary)][0]
            raise pa.ArrowInvalid(f"dictionary index {bad} is out of bounds [0, {len(chunk.dictionary)})")
