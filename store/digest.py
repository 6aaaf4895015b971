"""A batch's content digest: a 64-bit hash of the multiset of its rows, independent of row order
(the sum of per-row hashes), so a batch replayed in another order or another partitioning has the
same digest and a batch with other rows almost surely has another. Deterministic across processes
(no Python hash randomisation): idempotency keys compare a replay's content with the original."""
from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_NULL = np.uint64(0xD6E8FEB86659FD93)  # mixed into a null's placeholder


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, vectorised (uint64 arithmetic wraps)."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def _string_hashes(values) -> np.ndarray:
    arr = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values, pa.string())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    enc = arr if pa.types.is_dictionary(arr.type) else pc.dictionary_encode(arr)
    words = np.fromiter((zlib.crc32(s.encode()) | (zlib.adler32(s.encode()) << 32) for s in enc.dictionary.to_pylist()),
                        dtype=np.uint64, count=len(enc.dictionary))
    idx = enc.indices.to_numpy(zero_copy_only=False)
    return words[idx] if len(idx) else np.empty(0, dtype=np.uint64)


def batch_digest(columns: dict, types: Sequence[tuple[str, str]], rows: int) -> int:
    """Digest of schema-checked columns (Schema.check's output: NumPy numbers, pyarrow strings)."""
    with np.errstate(over="ignore"):
        h = np.zeros(rows, dtype=np.uint64)
        for i, (name, typ) in enumerate(types):
            col = columns[name]
            if typ == "string":
                v = _string_hashes(col)
            elif typ == "float64":
                v = (np.asarray(col, dtype=np.float64) + 0.0).view(np.uint64)  # -0.0 + 0.0 is 0.0
            else:
                v = np.asarray(col, dtype=np.int64).view(np.uint64)
            valid = columns.get("?" + name)  # a null differs from its placeholder value
            if valid is not None:
                v = np.where(valid, v, _mix(v ^ _NULL))
            h = _mix(h ^ _mix(v + _GOLDEN * np.uint64(i + 1)))
        return int(h.sum(dtype=np.uint64))
