"""Sketches declared per stream and column (WindowSpec.sketches): their validation, their build
when a sub-window is sealed, and their bytes for snapshots.

A declaration is (column, kind, size): "kll" (KLL quantiles of an int64 or float64 column; size k,
default 200) for APPROX_QUANTILE, "hll" (HLL, size lg_k, default 12) or "cpc" (CPC, lg_k, default
11) for APPROX_COUNT_DISTINCT, "frequent" (the frequent-items sketch of an int64, string or boolean
column; size lg_max_map_size, default 10) for APPROX_TOP_K. A column has at most one sketch of
each family (quantiles, distinct count, frequent items).

Strings are sketched as their text, never as dictionary codes: codes are renumbered by compaction
and differ between the partitions of a stream, text does not. Nulls are skipped. The sketches of a
sub-window are built from its rows in row order, so HLL, CPC and frequent items are rebuilt
identically from the same rows (the log's replay); KLL compacts with random bits (the library
takes no seed), so a snapshot keeps every sketch's bytes and a restore takes them back as they
were, and the log keeps a KLL sketch's bytes once its slide is installed (txn SealedSketches:
`unrepeatable`), which a replay puts back over the one it rebuilt (Window.adopt_sketches).
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from .errors import InvalidInput
from .sketches import CpcDistinct, HllDistinct, KllQuantiles

# kind -> (family, default size, smallest, largest, column types it takes)
KINDS: dict[str, tuple[str, int, int, int, frozenset]] = {
    "kll": ("quantile", 200, 8, 65535, frozenset({"int64", "float64"})),
    "hll": ("distinct", 12, 4, 21, frozenset({"int64", "float64", "string", "boolean", "timestamp", "date"})),
    "cpc": ("distinct", 11, 4, 26, frozenset({"int64", "float64", "string", "boolean", "timestamp", "date"})),
    "frequent": ("frequent", 10, 3, 24, frozenset({"int64", "string", "boolean"})),
}
MERGE_LG_MAX = 26  # the largest map a query's merge of frequent-items sketches uses (2^26 slots)
FAMILY_FUNCTION = {"quantile": "APPROX_QUANTILE", "distinct": "APPROX_COUNT_DISTINCT", "frequent": "APPROX_TOP_K"}
FAMILY_KINDS = {"quantile": ("kll",), "distinct": ("hll", "cpc"), "frequent": ("frequent",)}


def normalize(sketches: Any) -> tuple[tuple[str, str, int], ...]:
    """Declarations as sorted (column, kind, size) tuples: from a mapping column -> kind, (kind,
    size) or a list of those, or from a sequence of (column, kind[, size]) (JSON's lists too); a size of 0 or
    None is the kind's default. Malformed input is left for validate() to name."""
    if not sketches:
        return ()
    items = [(c, one) for c, how in sketches.items() for one in (how if isinstance(how, list) else [how])] \
        if isinstance(sketches, Mapping) else sketches
    out = []
    for entry in items:
        if isinstance(sketches, Mapping):
            column, how = entry
            kind, size = (how, None) if isinstance(how, str) else (tuple(how) + (None,))[:2]
        else:
            entry = tuple(entry)
            column, kind, size = (entry + (None,))[:3] if len(entry) in (2, 3) else (entry, None, None)
        if isinstance(kind, str):
            kind = kind.lower()
        if kind in KINDS and not size:
            size = KINDS[kind][1]
        out.append((column, kind, size))
    try:
        return tuple(sorted(out, key=lambda e: (str(e[0]), str(e[1]))))
    except TypeError:
        return tuple(out)


def validate(sketches: tuple, types: Mapping[str, str], time_column: str) -> None:
    families: set[tuple[str, str]] = set()
    for entry in sketches:
        if not (isinstance(entry, tuple) and len(entry) == 3):
            raise InvalidInput(f"a sketch is declared as (column, kind, size), got {entry!r}")
        column, kind, size = entry
        if not isinstance(column, str) or column not in types:
            raise InvalidInput(f"sketches: unknown column {column!r}", column=str(column)[:100])
        if column == time_column:
            raise InvalidInput(f"sketches: the event-time column {column!r} takes no sketch", column=column)
        if kind not in KINDS:
            raise InvalidInput(f"sketches: column {column!r} has unknown sketch kind {kind!r} (one of "
                               f"{', '.join(KINDS)})", column=column)
        family, _, lo, hi, takes = KINDS[kind]
        if types[column] not in takes:
            raise InvalidInput(f"sketches: a {kind} sketch takes a column of type {' or '.join(sorted(takes))}; "
                               f"{column!r} is {types[column]}", column=column)
        if isinstance(size, bool) or not isinstance(size, int) or not lo <= size <= hi:
            raise InvalidInput(f"sketches: the size of column {column!r}'s {kind} sketch must be an integer from "
                               f"{lo} to {hi}, got {size!r}", column=column)
        if (column, family) in families:
            raise InvalidInput(f"sketches: column {column!r} has two {FAMILY_FUNCTION[family]} sketches", column=column)
        families.add((column, family))


def sketch_key(column: str, kind: str) -> str:
    """The key of a column's sketch in a synopsis (a column may have one per family)."""
    return f"{column}:{kind}"


def declared(sketches: tuple, column: str, family: str) -> tuple[str, int] | None:
    """(kind, size) of the sketch of `family` declared on `column`, or None."""
    for c, kind, size in sketches:
        if c == column and KINDS[kind][0] == family:
            return kind, size
    return None


def build_one(kind: str, size: int, values: np.ndarray, typ: str, strings) -> Any:
    """One sketch of a column's non-null stored values (strings: dictionary codes, decoded by
    `strings`; with `strings` None they are text already). The distinct-count sketches take each
    distinct value once, in sorted order, and the frequent-items sketch each value once with its
    count, in order of first appearance: what a sketch holds depends on the rows only, and only
    distinct values are hashed or decoded."""
    values = np.asarray(values)
    if kind == "kll":
        return KllQuantiles.build(values.astype(np.float64), size)
    if kind in ("hll", "cpc"):
        uniq = np.unique(values) if len(values) else values
        cls = HllDistinct if kind == "hll" else CpcDistinct
        return cls.build(_as_sketched(uniq, typ, strings), size)
    if not len(values):
        return FrequentSketch.build([], [], typ, size)
    uniq, first, counts = np.unique(values, return_index=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    return FrequentSketch.build(_as_sketched(uniq[order], typ, strings), counts[order].tolist(), typ, size)


def _as_sketched(values: np.ndarray, typ: str, strings) -> np.ndarray:
    """Stored values as the sketches take them: text for strings, Python ints for booleans."""
    if typ == "string" and strings is not None:
        out = np.empty(len(values), dtype=object)
        out[:] = strings.decode(values) if len(values) else []
        return out
    if typ == "boolean":
        return values.astype(np.int64)
    return values


def build(sketches: tuple, columns: dict[str, np.ndarray], types: Mapping[str, str], strings) -> dict[str, Any]:
    """Every declared sketch of one sub-window's columns, keyed by sketch_key."""
    out = {}
    for column, kind, size in sketches:
        valid = columns.get("?" + column)
        values = columns[column] if valid is None else columns[column][valid]
        out[sketch_key(column, kind)] = build_one(kind, size, values, types[column], strings)
    return out


def to_bytes(built: dict[str, Any]) -> dict[str, bytes]:
    return {k: s.to_bytes() for k, s in built.items()}


REBUILT_ALIKE = frozenset({"hll", "cpc", "frequent"})  # a rebuild from the same rows gives the same bytes


def unrepeatable(sketches: tuple, built: dict[str, Any]) -> dict[str, bytes]:
    """The bytes of the sketches among `built` that a rebuild from the same rows would not give
    again (KLL's), by sketch_key: what the log keeps of a sealed sub-window."""
    return {sketch_key(c, kind): built[sketch_key(c, kind)].to_bytes() for c, kind, _ in sketches
            if kind not in REBUILT_ALIKE and sketch_key(c, kind) in built}


def from_bytes(sketches: tuple, types: Mapping[str, str], data: Mapping[str, bytes],
               partial: bool = False) -> dict[str, Any]:
    """The declared sketches from their bytes (`partial`: those `data` holds)."""
    out: dict[str, Any] = {}
    for column, kind, size in sketches:
        key = sketch_key(column, kind)
        if partial and key not in data:
            continue
        raw = data[key]
        if kind == "kll":
            out[key] = KllQuantiles.from_bytes(raw)
        elif kind == "hll":
            out[key] = HllDistinct.from_bytes(raw)
        elif kind == "cpc":
            out[key] = CpcDistinct.from_bytes(raw)
        else:
            out[key] = FrequentSketch.from_bytes(raw, types[column], size)
    return out


class FrequentSketch:
    """APPROX_TOP_K's per-sub-window sketch: the library's frequent-items sketch over an int64
    (or boolean, as 0/1) column's values or a string column's text; each value's count is added
    once per sub-window (in order of first appearance), so a rebuild from the same rows is
    identical. Every key's true count lies in [lower_bound, upper_bound]."""

    def __init__(self, sketch, typ: str, lg_max_map_size: int):
        self.sketch, self.typ, self.lg_max_map_size = sketch, typ, lg_max_map_size

    @staticmethod
    def serde(typ: str):
        import datasketches as ds
        return ds.PyStringsSerDe() if typ == "string" else ds.PyLongsSerDe()

    @classmethod
    def build(cls, keys: Any, counts: list[int], typ: str, lg_max_map_size: int) -> "FrequentSketch":
        """The sketch of `keys` (text or ints) each seen `counts` times, updated in that order."""
        import datasketches as ds
        s = ds.frequent_items_sketch(lg_max_map_size)
        for key, c in zip(list(keys), counts):
            s.update(key if typ == "string" else int(key), int(c))
        return cls(s, typ, lg_max_map_size)

    @classmethod
    def merged(cls, parts: list["FrequentSketch"], typ: str, lg_max_map_size: int) -> "FrequentSketch":
        """The parts merged into a sketch whose map holds every item of every part (up to 2^26
        slots), so that nothing is purged while merging: the result then depends on the parts'
        contents only, not on the order of their items (the library's serialized form, and so a
        restored sketch, lists them in another order)."""
        import datasketches as ds
        lg = min(MERGE_LG_MAX, max(lg_max_map_size, max((p.lg_max_map_size for p in parts), default=0))
                 + math.ceil(math.log2(max(1, len(parts)))) + 1)
        s = ds.frequent_items_sketch(lg)
        for p in parts:
            s.merge(p.sketch)
        return cls(s, typ, lg)

    def contents(self) -> tuple:
        """What the sketch holds, independent of its map's order: (total weight, sorted (item,
        estimate, lower, upper) of every item it keeps)."""
        import datasketches as ds
        return self.total_weight, tuple(sorted(tuple(t) for t in self.sketch.get_frequent_items(ds.NO_FALSE_NEGATIVES, 0)))

    def to_bytes(self) -> bytes:
        return self.sketch.serialize(self.serde(self.typ))

    @classmethod
    def from_bytes(cls, data: bytes, typ: str, lg_max_map_size: int) -> "FrequentSketch":
        import datasketches as ds
        return cls(ds.frequent_items_sketch.deserialize(data, cls.serde(typ)), typ, lg_max_map_size)

    @property
    def total_weight(self) -> int:
        return self.sketch.total_weight

    def top(self, k: int) -> list[tuple[Any, int, int, int]]:
        """(key, estimate, lower, upper) of at most k keys, largest estimate first (ties by key):
        with no false positives, each listed key's lower bound exceeds the sketch's maximum error."""
        import datasketches as ds
        rows: list[Any] = [tuple(t) for t in self.sketch.get_frequent_items(ds.NO_FALSE_POSITIVES)]
        rows.sort(key=lambda r: (-r[1], r[0]))
        return rows[:k]
