"""Stream-wide string dictionary: strings are stored as int32 codes that are stable across
sub-windows, so per-key synopses of different sub-windows merge by code without re-hashing.

Codes of strings no live sub-window or buffer holds any more are reclaimed by compaction
(Window.compact_strings): the live codes keep their relative order and are renumbered 0..k-1, so
sorted per-key synopses stay sorted. Compaction replaces `values` with a new list (a snapshot
being written keeps the old one) and bumps `generation` (caches indexed by code start over)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def warm_up() -> None:
    """Arrow initialises its compute kernels on first use (~0.4 s here): do it before serving,
    not inside the first Append while slides are due."""
    pc.dictionary_encode(pa.array(["warm", "up"]))
    pc.index_in(pa.array(["warm", "up"]), value_set=pa.array(["up"]))


def _take(mapping: np.ndarray, indices: pa.Array) -> np.ndarray:
    """mapping[indices] (np.take: about twice as fast as fancy indexing with int32 indices)."""
    indices = indices.to_numpy(zero_copy_only=False)
    return np.take(mapping, indices) if len(indices) else np.empty(0, dtype=np.int32)


@dataclass(frozen=True, eq=False)
class DictionarySnapshot:
    """A stream's strings as they were when taken (position = code), readable on any thread: the
    codes of strings it holds stay theirs while the dictionary only grows (`StringDictionary.holds`).
    `epoch` names the dictionary and its numbering (a compaction or a restore makes a new one)."""

    epoch: object
    size: int
    values: pa.Array

    def codes(self, array: pa.Array | pa.ChunkedArray) -> np.ndarray | None:
        """The int32 codes of a checked string column (no nulls) when the snapshot holds every one
        of its strings, else None (the engine interns the new ones: StringDictionary.encode). The
        same codes encode() gives, since it never renumbers a string it holds."""
        if not self.size:
            return None
        if isinstance(array, pa.ChunkedArray):
            if array.num_chunks != 1:
                return None
            array = array.chunk(0)
        if pa.types.is_dictionary(array.type):
            if not pa.types.is_string(array.type.value_type):
                return None
            found = pc.index_in(array.dictionary, value_set=self.values)
            return None if found.null_count else _take(found.to_numpy(zero_copy_only=False), array.indices)
        if not pa.types.is_string(array.type):
            return None
        found = pc.index_in(array, value_set=self.values)
        return None if found.null_count else found.to_numpy(zero_copy_only=False)


NO_STRINGS = DictionarySnapshot(None, 0, pa.array([], pa.string()))  # holds nothing: codes() is None
# A snapshot is an Arrow array of the stream's strings, built (or copied with the strings added
# since) on the loop: up to this many strings it is taken (building 16,384 took ~0.4 ms, adding 100
# to them ~10 us), beyond it only while that array is built already, else it holds nothing and the
# engine maps the strings on the loop as it does without one.
SNAPSHOT_STRINGS = 1 << 14


class StringDictionary:
    def __init__(self) -> None:
        self._code: dict[str, int] = {}
        self.values: list[str] = []
        self.generation = 0
        self._epoch = object()  # replaced when the codes are renumbered (load, compact)
        self._arrow: pa.Array | None = None  # `values` as an Arrow array (built when needed)
        self._arrow_parts: list[pa.Array] = []  # the strings added since, as Arrow arrays

    def __len__(self) -> int:
        return len(self.values)

    def encode(self, array: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """Codes (int32) for a pyarrow string array (no nulls); new strings get new codes, in the
        order of their first row.

        A dictionary-encoded array (as the SDK sends) only has its small dictionary mapped. A plain
        array is looked up against the stream's strings in one Arrow pass (pc.index_in) while the
        dictionary is no larger than the batch; only rows holding strings the stream has not seen
        are dictionary-encoded and interned."""
        if isinstance(array, pa.ChunkedArray):
            if array.num_chunks == 1:
                array = array.chunk(0)
            elif pa.types.is_dictionary(array.type):
                parts = [self.encode(chunk) for chunk in array.chunks]
                return np.concatenate(parts) if parts else np.empty(0, dtype=np.int32)
        if pa.types.is_dictionary(array.type):
            return _take(self._map(array.dictionary), array.indices)
        if isinstance(array, pa.Array) and pa.types.is_string(array.type) and 0 < len(self.values) <= len(array):
            found = pc.index_in(array, value_set=self._as_arrow())
            if not found.null_count:
                return found.to_numpy(zero_copy_only=False)
            missing = found.is_null()
            new = pc.dictionary_encode(array.filter(missing))
            codes = found.fill_null(0).to_numpy(zero_copy_only=False).copy()
            codes[np.asarray(missing, dtype=bool)] = _take(self._map(new.dictionary), new.indices)
            return codes
        encoded = pc.dictionary_encode(array)
        if isinstance(encoded, pa.ChunkedArray):
            encoded = encoded.combine_chunks()
        return _take(self._map(encoded.dictionary), encoded.indices)

    def _map(self, local: pa.Array) -> np.ndarray:
        """The codes of an Arrow array's strings, interning the new ones in order.

        While the stream's strings are at most twice as many as `local`'s, they are looked up in one
        Arrow pass (pc.index_in hashes the stream's strings, ~40 ns each): a 624-string batch
        dictionary against 1,000 stream strings maps in ~28 us instead of ~57 us through Python
        strings. Only the strings not found then go through Python."""
        if 0 < len(self.values) <= 2 * len(local):
            found = pc.index_in(local, value_set=self._as_arrow())
            if not found.null_count:
                return found.to_numpy(zero_copy_only=False).astype(np.int32, copy=False)
            missing = np.flatnonzero(np.asarray(found.is_null(), dtype=bool))
            codes = found.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int32)
            codes[missing] = self._map_slow(local.take(pa.array(missing)))
            return codes
        return self._map_slow(local)

    def _map_slow(self, local: pa.Array) -> np.ndarray:
        strings = local.to_pylist()
        codes = list(map(self._code.get, strings))
        if None in codes:
            added = len(self.values)
            for i, c in enumerate(codes):
                if c is None:
                    codes[i] = self._intern(strings[i])
            if self._arrow is not None or self._arrow_parts:
                self._arrow_parts.append(pa.array(self.values[added:], pa.string()))
        return np.array(codes, dtype=np.int32)

    def snapshot(self) -> DictionarySnapshot:
        """The strings as they are now, for DictionarySnapshot.codes on another thread (NO_STRINGS
        when there are more than SNAPSHOT_STRINGS and their Arrow form would be built afresh)."""
        if len(self.values) > SNAPSHOT_STRINGS and (self._arrow is None or self._arrow_parts):
            return NO_STRINGS
        return DictionarySnapshot(self._epoch, len(self.values), self._as_arrow())

    def holds(self, snapshot: DictionarySnapshot) -> bool:
        """Whether the codes `snapshot` gives are still these strings' codes here."""
        return snapshot.epoch is self._epoch and snapshot.size <= len(self.values)

    def _as_arrow(self) -> pa.Array:
        """`values` as an Arrow string array (position = code)."""
        if self._arrow is None:
            self._arrow, self._arrow_parts = pa.array(self.values, pa.string()), []
        elif self._arrow_parts:
            self._arrow = pa.concat_arrays([self._arrow, *self._arrow_parts])
            self._arrow_parts = []
        return self._arrow

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
        self._arrow, self._arrow_parts = None, []
        self._epoch = object()

    def lookup(self, s: str) -> int:
        """The code of `s`, or -1 when the stream has never seen it (matches nothing)."""
        return self._code.get(s, -1)

    def decode(self, codes: np.ndarray) -> list[str]:
        values = self.values
        return [values[c] for c in codes.tolist()]
