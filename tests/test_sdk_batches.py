"""The SDK's Arrow IPC payloads (clients/batches.py), kept as the pieces Arrow's writer gives (the
columns' buffers not copied) and joined once: byte for byte the stream Arrow's own writer makes of
the same table (string columns dictionary-encoded), and read back they hold the table's rows."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings, strategies as st

from windowstore.clients.batches import ipc_pieces, to_ipc

ROWS = st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.none() | st.floats(allow_nan=False),
                          st.none() | st.text(max_size=6)), max_size=200)


def _table(rows: list[tuple], chunks: int, string_as: str) -> pa.Table:
    strings = pa.array([r[2] for r in rows], pa.large_string() if string_as == "large" else pa.string())
    if string_as == "dictionary":
        strings = strings.dictionary_encode()
    table = pa.table({"ts": pa.array([r[0] for r in rows], pa.int64()), "lat": pa.array([r[1] for r in rows], pa.float64()),
                      "src": strings})
    if chunks > 1 and len(rows) > 1:  # several record batches, each string chunk with its own dictionary
        cut = len(rows) // 2
        table = pa.concat_tables([table.slice(0, cut).combine_chunks(), table.slice(cut).combine_chunks()])
    return table


def _arrow_s_own_stream(table: pa.Table) -> bytes:
    """The reference: Arrow's writer into a growing buffer, strings encoded as the SDK encodes them."""
    for i, field in enumerate(table.schema):
        if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
            table = table.set_column(i, field.name, pc.dictionary_encode(table.column(i)))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


@settings(max_examples=150)
@given(ROWS, st.integers(1, 2), st.sampled_from(["plain", "large", "dictionary"]), st.integers(0, 50))
def test_the_payload_is_arrow_s_own_stream_and_holds_the_rows(rows, chunks, string_as, offset):
    table = _table(rows, chunks, string_as).slice(min(offset, len(rows)))  # a slice: buffers with an offset
    pieces = ipc_pieces(table)
    pieces._check()
    payload = to_ipc(table)
    assert pieces.size == len(payload)
    assert payload == _arrow_s_own_stream(table)
    back = pa.ipc.open_stream(payload).read_all()
    back.validate(full=True)
    assert back.num_rows == table.num_rows
    assert back.column("ts").to_pylist() == table.column("ts").to_pylist()
    assert back.column("lat").to_pylist() == table.column("lat").to_pylist()
    assert back.column("src").to_pylist() == table.column("src").to_pylist()
    assert pa.types.is_dictionary(back.schema.field("src").type)
