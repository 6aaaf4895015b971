"""Partitioned streams: which partition a row belongs to, what each partition is called, and on
which server of a cluster it lives (docs/partitions.md).

A partitioned stream S of P partitions is P ordinary streams, `S.p0` ... `S.p{P-1}`, each on one
server with its own log, snapshots, scheduler and synopses. Everything here is a pure function of
its arguments, so every client and server computes the same layout:

- `partition_of_rows`: a row's partition is `key_hash(row's partition_by values) mod P`, with the
  hash defined over the values (not Python's `hash`, which changes per process), the same in every
  process and easy to reproduce elsewhere (Spark);
- `ClusterView`: the servers of a cluster and the owner of each partition. `StaticCluster` reads it
  from a file or a list of addresses; a coordination service can provide the same interface later,
  with clients unchanged.
"""
from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import InvalidInput

MAX_PARTITIONS = 1024
KEY_TYPES = ("int64", "string")  # partition_by column types (their hash is defined below)
_U64 = np.uint64


def partition_name(stream: str, partition: int) -> str:
    """The name of partition `partition` of stream `stream` on its server."""
    return f"{stream}.p{partition}"


def splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer over uint64 values (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = x + _U64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
        return z ^ (z >> _U64(31))


def string_word(s: str) -> int:
    """A string's 64-bit word: the first 8 bytes, little-endian, of BLAKE2b (digest size 8) of its UTF-8."""
    return int.from_bytes(hashlib.blake2b(s.encode("utf-8"), digest_size=8).digest(), "little")


def _words(column: pa.Array | pa.ChunkedArray, name: str) -> np.ndarray:
    """One uint64 word per value: an int64 as its two's complement, a string its string_word, NULL 0."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    t = column.type
    if pa.types.is_integer(t):
        filled = pc.fill_null(column.cast(pa.int64()), 0)
        return filled.to_numpy(zero_copy_only=False).astype(np.int64).view(_U64)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_dictionary(t):
        encoded = column if pa.types.is_dictionary(t) else pc.dictionary_encode(column)
        table = np.array([string_word(s) for s in encoded.dictionary.to_pylist()] + [0], dtype=_U64)
        idx = pc.fill_null(encoded.indices.cast(pa.int64()), len(encoded.dictionary))
        return table[idx.to_numpy(zero_copy_only=False)]
    raise InvalidInput(f"partition_by column {name!r} must be int64 or string, got {t}", column=name)


def key_hash(columns: Sequence[pa.Array | pa.ChunkedArray], names: Sequence[str] | None = None) -> np.ndarray:
    """The 64-bit key hash of every row: h = 0, then for each key column in partition_by order
    h = splitmix64(h XOR word(value))."""
    names = names or [f"#{i}" for i in range(len(columns))]
    n = len(columns[0]) if columns else 0
    h = np.zeros(n, dtype=_U64)
    for col, name in zip(columns, names):
        h = splitmix64(h ^ _words(col, name))
    return h


def partition_of_rows(table: pa.Table | pa.RecordBatch, partition_by: Sequence[str], partitions: int) -> np.ndarray:
    """Each row's partition, 0 .. partitions - 1: key_hash mod partitions."""
    missing = [c for c in partition_by if c not in table.schema.names]
    if missing:
        raise InvalidInput(f"the batch has no column {missing[0]!r} (a partition_by column)", column=missing[0])
    h = key_hash([table.column(c) for c in partition_by], partition_by)
    return (h % _U64(partitions)).astype(np.int64)


def split_rows(table: pa.Table, partition_by: Sequence[str], partitions: int) -> dict[int, pa.Table]:
    """The table's rows by partition (only partitions that get rows), each in the table's order."""
    parts = partition_of_rows(table, partition_by, partitions)
    order = np.argsort(parts, kind="stable")
    counts = np.bincount(parts, minlength=partitions)
    out, start = {}, 0
    for p in range(partitions):
        if counts[p]:
            out[p] = table.take(pa.array(order[start:start + counts[p]]))
        start += counts[p]
    return out


# -- the cluster ------------------------------------------------------------------------------------
class ClusterView(Protocol):
    """What clients and servers need of a cluster: its servers (node i's address) and the node that
    owns partition i of a stream. A static file provides it today; a coordination service may later."""

    @property
    def addresses(self) -> list[str]: ...

    def owner(self, stream: str, partition: int) -> int: ...


@dataclass(frozen=True)
class StaticCluster:
    """A fixed list of servers, node 0 first. Partition i of stream S lives on node
    (start(S) + i) mod N, start(S) = splitmix64(string_word(S)) mod N: consecutive partitions on
    consecutive nodes, streams starting at different nodes."""

    nodes: tuple[str, ...]

    def __post_init__(self):
        if not self.nodes:
            raise InvalidInput("a cluster needs at least one server address")
        if len(set(self.nodes)) != len(self.nodes):
            raise InvalidInput("a cluster lists a server address twice")

    @property
    def addresses(self) -> list[str]:
        return list(self.nodes)

    def owner(self, stream: str, partition: int) -> int:
        start = int(splitmix64(np.array([string_word(stream)], dtype=_U64))[0] % _U64(len(self.nodes)))
        return (start + partition) % len(self.nodes)

    @classmethod
    def load(cls, path: str) -> "StaticCluster":
        """From a TOML file: `nodes = ["host1:50051", "host2:50051", ...]` (node 0 first)."""
        try:
            with open(path, "rb") as f:
                doc = tomllib.load(f)
        except OSError as e:
            raise InvalidInput(f"cluster file {path!r}: {e.strerror}") from None
        except tomllib.TOMLDecodeError as e:
            raise InvalidInput(f"cluster file {path!r}: {e}") from None
        nodes = doc.get("nodes")
        if not isinstance(nodes, list) or not all(isinstance(n, str) and n for n in nodes):
            raise InvalidInput(f"cluster file {path!r}: `nodes` must be a list of server addresses")
        return cls(tuple(nodes))
