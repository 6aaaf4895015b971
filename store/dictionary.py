"""Stream-wide string dictionary: strings are stored as int32 codes that are stable across
sub-windows, so per-key synopses of different sub-windows merge by code without re-hashing.

Codes of strings no live sub-window or buffer holds any more are reclaimed by compaction
(Window.compact_strings): the live codes keep their relative order and are renumbered 0..k-1, so
sorted per-key synopses stay sorted. Compaction replaces `values` with a new list (a snapshot
being written keeps the old one) and bumps `generation` (caches indexed by code start over)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def warm_up() -> None:
    """Arrow initialises its compute kernels on first use (~0.4 s here): do it before serving,
    not inside the first Append while slides are due."""
    pc.dictionary_encode(pa.array(["warm", "up"]))


class StringDictionary:
    def __init__(self) -> None:
        self._code: dict[str, int] = {}
        self.values: list[str] = []
        self.generation = 0

    def __len__(self) -> int:
        return len(self.values)

    def encode(self, array: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """Codes for a pyarrow string array (no nulls); new strings get new codes.

        A dictionary-encoded array (as the SDK sends) only has its small dictionary mapped."""
        if isinstance(array, pa.ChunkedArray):
            if array.num_chunks == 1:
                array = array.chunk(0)
            elif pa.types.is_dictionary(array.type):
                parts = [self.encode(chunk) for chunk in array.chunks]
                return np.concatenate(parts) if parts else np.empty(0, dtype=np.int32)
        encoded = array if pa.types.is_dictionary(array.type) else pc.dictionary_encode(array)
        if isinstance(encoded, pa.ChunkedArray):
            encoded = encoded.combine_chunks()
        local = encoded.dictionary.to_pylist()
        mapping = np.fromiter((self._intern(s) for s in local), dtype=np.int32, count=len(local))
        indices = encoded.indices.to_numpy(zero_copy_only=False)
        return mapping[indices] if len(indices) else np.empty(0, dtype=np.int32)

    def _intern(self, s: str) -> int:
        code = self._code.get(s)
        if code is None:
            code = len(self.values)
            self._code[s] = code
            self.values.append(s)
        return code

    def compact(self, live: np.ndarray) -> np.ndarray:
        """Keep only the codes in `live` (sorted, unique); returns old code -> new code (-1: gone)."""
        remap = np.full(len(self.values), -1, dtype=np.int32)
        remap[live] = np.arange(len(live), dtype=np.int32)
        self.load([self.values[c] for c in live.tolist()])
        self.generation += 1
        return remap

    def load(self, values: list[str]) -> None:
        """Restore the codes a snapshot captured: values[c] is the string of code c."""
        self.values = list(values)
        self._code = {s: c for c, s in enumerate(self.values)}

    def lookup(self, s: str) -> int:
        """The code of `s`, or -1 when the stream has never seen it (matches nothing)."""
        return self._code.get(s, -1)

    def decode(self, codes: np.ndarray) -> list[str]:
        values = self.values
        return [values[c] for c in codes.tolist()]
