"""Per-sub-window sketches from Apache DataSketches, for the approximate aggregates to come.

One class per kind: KLL for APPROX_QUANTILE, HLL and CPC for APPROX_COUNT_DISTINCT, frequent
items for APPROX_TOP_K. Each is built from one sub-window's column (a NumPy array), merged over
the sub-windows a query reads, serialized to bytes for snapshots, and answers with the error
bound the library states for it. Not wired into sealing or queries yet.

A merge is not bit-identical across merge orders for any kind (KLL compacts with random bits, the
frequent-items sketch purges its smallest counters when its map fills, the HLL and CPC unions keep
order-dependent estimator state), but every order's answer holds the same stated bound.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Sequence

import datasketches as ds
import numpy as np

from .errors import InvalidInput


def _values(column: np.ndarray, name: str) -> np.ndarray:
    column = np.asarray(column)
    if column.ndim != 1:
        raise InvalidInput(f"{name}: a sketch is built from a 1-d column")
    return column


class KllQuantiles:
    """APPROX_QUANTILE: a KLL sketch of doubles (NaN is skipped, as a null)."""

    def __init__(self, sketch: "ds.kll_doubles_sketch"):
        self.sketch = sketch

    @classmethod
    def build(cls, column: np.ndarray, k: int = 200) -> "KllQuantiles":
        v = _values(column, "column").astype(np.float64)
        s = ds.kll_doubles_sketch(k)
        v = v[~np.isnan(v)]
        if len(v):
            s.update(v)
        return cls(s)

    @classmethod
    def merged(cls, parts: Sequence["KllQuantiles"], k: int = 200) -> "KllQuantiles":
        s = ds.kll_doubles_sketch(k)
        for p in parts:
            s.merge(p.sketch)
        return cls(s)

    def to_bytes(self) -> bytes:
        return self.sketch.serialize()

    def weighted_items(self) -> tuple[np.ndarray, np.ndarray]:
        """The items the sketch retains and their weights (float64, int64), read once: a sealed
        sub-window's sketch does not change, and a query pools them (store/approx.py)."""
        cached = getattr(self, "_items", None)
        if cached is None:
            pairs = list(self.sketch)
            items, weights = zip(*pairs) if pairs else ((), ())
            cached = (np.array(items, dtype=np.float64), np.array(weights, dtype=np.int64))
            self._items = cached
        return cached

    @classmethod
    def from_bytes(cls, data: bytes) -> "KllQuantiles":
        return cls(ds.kll_doubles_sketch.deserialize(data))

    @property
    def n(self) -> int:
        return self.sketch.n

    def quantile(self, q: float) -> tuple[float, float]:
        """The value at normalized rank q and the rank error: the value's true rank lies within
        q +- error with 99% confidence (the library's normalized rank error)."""
        if not 0 <= q <= 1:
            raise InvalidInput(f"quantile must be in [0, 1], got {q!r}")
        if self.sketch.is_empty():
            raise InvalidInput("quantile of an empty sketch")
        return self.sketch.get_quantile(q), self.sketch.normalized_rank_error(False)


CONFIDENCE_STD = {1: 0.6827, 2: 0.9545, 3: 0.9973}


@dataclass(frozen=True)
class DistinctEstimate:
    """An estimate of a distinct count; the true count lies in [lower, upper] with `confidence`."""

    estimate: float
    lower: float
    upper: float
    confidence: float


def _update_each(sketch, column: np.ndarray) -> None:
    v = _values(column, "column")
    if v.dtype.kind == "f":
        v = v[~np.isnan(v)]
    for x in v.tolist():
        sketch.update(x)


class _DistinctSketch(ABC):
    """APPROX_COUNT_DISTINCT over one DataSketches distinct-count family: a subclass names the
    library's sketch, union and serialisation; building, merging and the estimate are shared."""

    DEFAULT_LG_K = 12

    def __init__(self, sketch):
        self.sketch = sketch

    @staticmethod
    @abstractmethod
    def _new(lg_k: int):
        """An empty sketch of the library's family."""

    @staticmethod
    @abstractmethod
    def _union(lg_k: int):
        """An empty union of the family."""

    @staticmethod
    @abstractmethod
    def _result(union):
        """The sketch a union holds."""

    @classmethod
    def build(cls, column: np.ndarray, lg_k: int | None = None):
        s = cls._new(lg_k or cls.DEFAULT_LG_K)
        _update_each(s, column)
        return cls(s)

    @classmethod
    def merged(cls, parts: Sequence["_DistinctSketch"], lg_k: int | None = None):
        u = cls._union(lg_k or cls.DEFAULT_LG_K)
        for p in parts:
            u.update(p.sketch)
        return cls(cls._result(u))

    def estimate(self, num_std: int = 2) -> DistinctEstimate:
        if num_std not in CONFIDENCE_STD:
            raise InvalidInput(f"num_std must be 1, 2 or 3, got {num_std!r}")
        s = self.sketch
        return DistinctEstimate(s.get_estimate(), s.get_lower_bound(num_std), s.get_upper_bound(num_std),
                                CONFIDENCE_STD[num_std])


class HllDistinct(_DistinctSketch):
    """APPROX_COUNT_DISTINCT with an HLL sketch (HLL_8 registers)."""

    DEFAULT_LG_K = 12

    @staticmethod
    def _new(lg_k):
        return ds.hll_sketch(lg_k, ds.HLL_8)

    @staticmethod
    def _union(lg_k):
        return ds.hll_union(lg_k)

    @staticmethod
    def _result(union):
        return union.get_result(ds.HLL_8)

    def to_bytes(self) -> bytes:
        return self.sketch.serialize_compact()

    @classmethod
    def from_bytes(cls, data: bytes) -> "HllDistinct":
        return cls(ds.hll_sketch.deserialize(data))


class CpcDistinct(_DistinctSketch):
    """APPROX_COUNT_DISTINCT with a CPC sketch (smaller serialized than HLL for the same error)."""

    DEFAULT_LG_K = 11

    @staticmethod
    def _new(lg_k):
        return ds.cpc_sketch(lg_k)

    @staticmethod
    def _union(lg_k):
        return ds.cpc_union(lg_k)

    @staticmethod
    def _result(union):
        return union.get_result()

    def to_bytes(self) -> bytes:
        return self.sketch.serialize()

    @classmethod
    def from_bytes(cls, data: bytes) -> "CpcDistinct":
        return cls(ds.cpc_sketch.deserialize(data))


class FrequentItemsSketch:
    """APPROX_TOP_K: the library's frequent-items sketch over int64 keys, optionally weighted.

    Its bounds are deterministic: every key's true weight lies in [lower_bound, upper_bound].
    """

    SERDE = ds.PyLongsSerDe()

    def __init__(self, sketch: "ds.frequent_items_sketch", lg_max_map_size: int):
        self.sketch, self.lg_max_map_size = sketch, lg_max_map_size

    @classmethod
    def build(cls, keys: np.ndarray, weights: np.ndarray | None = None,
              lg_max_map_size: int = 10) -> "FrequentItemsSketch":
        k = _values(keys, "keys")
        if k.dtype.kind not in "iu":
            raise InvalidInput("keys: the frequent-items sketch takes integer keys (dictionary codes)")
        if weights is None:
            keys_, counts = np.unique(k, return_counts=True)
        else:
            w = _values(weights, "weights")
            if w.shape != k.shape or w.dtype.kind not in "iu" or (len(w) and w.min() < 0):
                raise InvalidInput("weights: non-negative integers, one per key")
            keys_, inv = np.unique(k, return_inverse=True)
            counts = np.zeros(len(keys_), dtype=np.int64)
            np.add.at(counts, inv, w.astype(np.int64))
        s = ds.frequent_items_sketch(lg_max_map_size)
        for key, c in zip(keys_.tolist(), counts.tolist()):
            if c:
                s.update(key, c)
        return cls(s, lg_max_map_size)

    @classmethod
    def merged(cls, parts: Sequence["FrequentItemsSketch"], lg_max_map_size: int = 10) -> "FrequentItemsSketch":
        s = ds.frequent_items_sketch(lg_max_map_size)
        for p in parts:
            s.merge(p.sketch)
        return cls(s, lg_max_map_size)

    def to_bytes(self) -> bytes:
        return self.sketch.serialize(self.SERDE)

    @classmethod
    def from_bytes(cls, data: bytes, lg_max_map_size: int = 10) -> "FrequentItemsSketch":
        return cls(ds.frequent_items_sketch.deserialize(data, cls.SERDE), lg_max_map_size)

    @property
    def total_weight(self) -> int:
        return self.sketch.total_weight

    def bounds(self, key: int) -> tuple[int, int, int]:
        """(estimate, lower, upper) of a key's weight; the true weight lies in [lower, upper]."""
        s = self.sketch
        return s.get_estimate(key), s.get_lower_bound(key), s.get_upper_bound(key)

    def top(self, no_false_positives: bool = True) -> list[tuple[int, int, int, int]]:
        """(key, estimate, lower, upper) of the frequent keys, heaviest first: with no false
        positives, each key's lower bound exceeds the sketch's maximum error."""
        err = ds.NO_FALSE_POSITIVES if no_false_positives else ds.NO_FALSE_NEGATIVES
        return [tuple(t) for t in self.sketch.get_frequent_items(err)]
