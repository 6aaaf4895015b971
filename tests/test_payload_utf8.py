"""Arrow payloads from the network with bytes that are not UTF-8 where Arrow says a string is: in a
plain or dictionary string column's values, a column's name, a nested field's name. Each is
refused as INVALID_ARGUMENT naming the column (or its position, when the name itself is the bad
part), never an INTERNAL, and nothing is stored."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from windowstore.server.payload import read_table
from windowstore.store import InvalidInput

LIMIT = 1 << 30


def ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def not_utf8(typ=pa.string()) -> pa.Array:
    """["ok", b"ab\\xc4"] as an Arrow string array, built from raw buffers."""
    offsets = np.array([0, 2, 5], dtype=np.int64 if typ == pa.large_string() else np.int32).tobytes()
    return pa.Array.from_buffers(typ, 2, [None, pa.py_buffer(offsets), pa.py_buffer(b"okab\xc4")])


@pytest.mark.parametrize("make", [lambda: not_utf8(), lambda: not_utf8(pa.large_string()),
                                  lambda: not_utf8().dictionary_encode(),
                                  lambda: pa.DictionaryArray.from_arrays(pa.array([1, 0], pa.int8()), not_utf8())],
                         ids=["plain", "large", "dictionary", "dictionary-int8"])
def test_invalid_utf8_in_a_string_column_names_the_column(make):
    t = pa.table({"ts": pa.array([1, 2], pa.int64()), "src": make()})
    with pytest.raises(InvalidInput, match=r"column 'src' .*Invalid UTF8") as e:
        read_table(ipc(t), LIMIT)
    assert e.value.column == "src"


def test_a_column_name_that_is_not_utf8_is_invalid_input_naming_its_position():
    t = pa.table({"ts": pa.array([1, 2], pa.int64()), "QQQ": pa.array([1, 2], pa.int64())})
    data = ipc(t).replace(b"QQQ", b"Q\xc4z")
    with pytest.raises(InvalidInput, match=r"the name of column 1 \(counting from 0\) is not valid UTF-8"):
        read_table(data, LIMIT)


def test_valid_strings_pass_unchanged():
    t = pa.table({"ts": pa.array([1, 2], pa.int64()), "src": pa.array(["é", "🙂"]).dictionary_encode()})
    assert read_table(ipc(t), LIMIT).equals(t)


def test_over_a_real_server_the_status_is_invalid_argument_and_nothing_is_stored():
    import grpc

    from windowstore.clients import Client
    from windowstore.server.process import ServerProcess
    from windowstore.v1 import windowstore_pb2 as pb, windowstore_pb2_grpc as pb_grpc

    with ServerProcess() as srv, Client(srv.target, timeout=30) as ws:
        ws.create_stream("u", {"ts": "int64", "src": "string"}, subwindows=2, subwindow_ms=5, clock="manual")
        stub = pb_grpc.WindowStoreServiceStub(grpc.insecure_channel(srv.target))
        bad_name = ipc(pa.table({"ts": pa.array([1], pa.int64()), "sQQ": pa.array(["a"])})).replace(b"sQQ", b"s\xc4z")
        bad_value = ipc(pa.table({"ts": pa.array([1, 2], pa.int64()), "src": not_utf8().dictionary_encode()}))
        nested = pa.array([{"QQQ": 1}], pa.struct([("QQQ", pa.int64())]))
        bad_nested = ipc(pa.table({"ts": pa.array([1], pa.int64()), "src": nested})).replace(b"QQQ", b"Q\xc4z")
        for data, says in [(bad_name, "column 1 (counting from 0)"), (bad_value, "column 'src'"),
                           (bad_nested, "column 'src' must be string")]:
            with pytest.raises(grpc.RpcError) as e:
                stub.Append(pb.AppendRequest(stream="u", arrow_ipc=data), timeout=30)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and says in e.value.details()
        assert ws.describe_stream("u")["buffered_rows"] == 0
