"""A batch's content digest: a 64-bit hash of the multiset of its rows, independent of row order
(the sum of per-row hashes), so a batch replayed in another order or another partitioning has the
same digest and a batch with other rows almost surely has another. Deterministic across processes
(no Python hash randomisation): idempotency keys compare a replay's content with the original.
Its values are part of the durable state (snapshots keep acknowledged batches' digests, the log's
Append records carry them): a change that alters a value must be versioned."""
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
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser of x, a new array."""
    out = np.array(x, dtype=np.uint64)
    _mix_into(out, np.empty_like(out))
    return out


def _mix_into(x: np.ndarray, tmp: np.ndarray) -> None:
    """splitmix64's finaliser, vectorised, in place (uint64 arithmetic wraps); `tmp` a scratch array
    of x's length: no new array per step (a keyed Append's digest is 18 such passes per column)."""
    np.right_shift(x, _S30, out=tmp)
    np.bitwise_xor(x, tmp, out=x)
    np.multiply(x, _M1, out=x)
    np.right_shift(x, _S27, out=tmp)
    np.bitwise_xor(x, tmp, out=x)
    np.multiply(x, _M2, out=x)
    np.right_shift(x, _S31, out=tmp)
    np.bitwise_xor(x, tmp, out=x)


def _string_hashes(values) -> np.ndarray:
    """Per row, its string's word: crc32 | adler32 << 32 of its UTF-8, computed once per distinct
    string (the dictionary's entries, read as their bytes)."""
    arr = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values, pa.string())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    enc = arr if pa.types.is_dictionary(arr.type) else pc.dictionary_encode(arr)
    d = enc.dictionary
    raw = d.cast(pa.large_binary() if pa.types.is_large_string(d.type) else pa.binary()).to_pylist()
    words = np.fromiter((zlib.crc32(b) | (zlib.adler32(b) << 32) for b in raw), dtype=np.uint64, count=len(d))
    idx = enc.indices.to_numpy(zero_copy_only=False)
    return words[idx] if len(idx) else np.empty(0, dtype=np.uint64)


def batch_digest(columns: dict, types: Sequence[tuple[str, str]], rows: int) -> int:
    """Digest of schema-checked columns (Schema.check's output: NumPy numbers, pyarrow strings)."""
    with np.errstate(over="ignore"):
        h, w, tmp = np.zeros(rows, dtype=np.uint64), np.empty(rows, dtype=np.uint64), np.empty(rows, dtype=np.uint64)
        for i, (name, typ) in enumerate(types):
            col = columns[name]
            if typ == "string":
                v = _string_hashes(col)
            elif typ == "float64":  # -0.0 + 0.0 is 0.0
                v = np.add(np.asarray(col, dtype=np.float64), 0.0, out=w.view(np.float64)).view(np.uint64)
            else:
                v = np.asarray(col, dtype=np.int64).view(np.uint64)
            valid = columns.get("?" + name)  # a null differs from its placeholder value
            if valid is not None:
                v = np.where(valid, v, _mix(v ^ _NULL))
            np.add(v, _GOLDEN * np.uint64(i + 1), out=w)  # h = mix(h ^ mix(v + golden * (i + 1))), in place
            _mix_into(w, tmp)
            np.bitwise_xor(h, w, out=h)
            _mix_into(h, tmp)
        return int(h.sum(dtype=np.uint64))
