"""An Arrow payload's columns are refused exactly where Arrow's full validation refuses them
(payload.read_table checks a dictionary column's index bounds in one pass of its own), with the
column named."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from windowstore.server.payload import decompressed_size, read_table
from windowstore.store import InvalidInput
from windowstore.store.errors import ResourceLimit

LIMIT = 1 << 30
INDEX_TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint32()]


def ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def dictionary_column(indices: list[int | None], index_type: pa.DataType, strings: list[str]) -> pa.Array:
    """A dictionary array built without validation, as a faulty client could send it."""
    return pa.DictionaryArray.from_arrays(pa.array(indices, index_type), pa.array(strings, pa.string()), safe=False)


def arrow_refuses(column: pa.Array) -> bool:
    try:
        column.validate(full=True)
    except pa.ArrowInvalid:
        return True
    return False


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(INDEX_TYPES), st.integers(1, 5),
       st.lists(st.one_of(st.none(), st.integers(-130, 130)), min_size=1, max_size=40))
def test_a_dictionary_column_is_refused_exactly_when_arrows_full_validation_refuses_it(index_type, n_strings, raw):
    info = np.iinfo(index_type.to_pandas_dtype())
    indices = [None if i is None else int(np.clip(i, info.min, info.max)) for i in raw]
    column = dictionary_column(indices, index_type, [f"s{k}" for k in range(n_strings)])
    t = pa.table({"ts": pa.array(range(len(indices)), pa.int64()), "src": column})
    if arrow_refuses(column):
        with pytest.raises(InvalidInput, match=r"column 'src' of arrow_ipc is not valid") as e:
            read_table(ipc(t), LIMIT)
        assert e.value.column == "src"
    else:
        assert read_table(ipc(t), LIMIT).equals(t)


@pytest.mark.parametrize("bad", [3, 1000, 2 ** 31 - 1, -1, -(2 ** 31)])
def test_an_index_past_either_end_is_named(bad):
    t = pa.table({"ts": pa.array([1, 2, 3], pa.int64()),
                  "src": dictionary_column([0, bad, 2], pa.int32(), ["a", "b", "c"])})
    with pytest.raises(InvalidInput, match=rf"column 'src' of arrow_ipc is not valid: dictionary index {bad} is out of bounds"):
        read_table(ipc(t), LIMIT)


def test_invalid_utf8_in_a_dictionary_without_nulls_is_still_refused():
    offsets = np.array([0, 2, 5], dtype=np.int32).tobytes()
    strings = pa.Array.from_buffers(pa.string(), 2, [None, pa.py_buffer(offsets), pa.py_buffer(b"okab\xc4")])
    t = pa.table({"src": pa.DictionaryArray.from_arrays(pa.array([1, 0, 1], pa.int32()), strings)})
    with pytest.raises(InvalidInput, match=r"column 'src' .*Invalid UTF8"):
        read_table(ipc(t), LIMIT)


@pytest.mark.parametrize("codec", ["zstd", "lz4"])
def test_compressed_dictionary_and_record_batches_are_sized_before_decompressing(codec):
    """Both batch kinds are sized (the schema message, which has no body, is not parsed): a payload
    of a long string and zeros compresses to little, and a limit one byte under its dictionary
    batch's decompressed size, or under the two batches' together, refuses it."""
    t = pa.table({"ts": pa.array(np.zeros(100_000, np.int64)),
                  "src": pa.DictionaryArray.from_arrays(pa.array(np.zeros(100_000, np.int32)), pa.array(["x" * 200_000]))})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, t.schema, options=pa.ipc.IpcWriteOptions(compression=codec)) as w:
        w.write_table(t)
    data = sink.getvalue().to_pybytes()
    sizes = {m.type: decompressed_size(m) for m in pa.ipc.MessageReader.open_stream(pa.BufferReader(data))}
    assert sizes["schema"] == 0
    assert sizes["dictionary"] >= 200_000 and sizes["record batch"] >= 1_200_000
    assert len(data) < 10_000
    with pytest.raises(ResourceLimit):
        read_table(data, sizes["dictionary"] - 1)
    with pytest.raises(ResourceLimit):
        read_table(data, sizes["dictionary"] + sizes["record batch"] - 1)
    assert read_table(data, sizes["dictionary"] + sizes["record batch"]).equals(t)
