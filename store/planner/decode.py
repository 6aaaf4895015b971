"""Answer values from their storage form: dictionary codes as strings, boolean and NULL keys, decimals
computed on value * 10**s integers, and the composite keys of a GROUP BY of several columns (both
ways: this module encodes them too, since their layout is its contract). Pure functions of arrays;
it must not read sub-windows, merge partials or order rows."""
from __future__ import annotations

from decimal import Decimal, localcontext

import numpy as np

from ..synopsis import NULL_KEY


def _decimal(n: int | None, scale: int) -> Decimal | None:
    """The integer n * 10**-scale as a Decimal with exactly `scale` places (None stays NULL)."""
    if n is None:
        return None
    with localcontext() as ctx:
        ctx.prec = 80
        return Decimal(int(n)).scaleb(-scale).quantize(Decimal(1).scaleb(-scale))


def decimal_rows(rows: list[tuple], scales: dict[int, int]) -> list[tuple]:
    """Rows with their decimal columns (column index -> scale) as Decimals."""
    return [tuple(_decimal(v, scales[i]) if i in scales else v for i, v in enumerate(r)) for r in rows]


def decimal_columns(columns: list[list], scales: dict[int, int]) -> list[list]:
    """decimal_rows by column: the decimal columns (column index -> scale) as Decimals."""
    return [[_decimal(v, scales[i]) for v in c] if i in scales else c for i, c in enumerate(columns)]


def decode_values(values: np.ndarray, typ: str, strings) -> list:
    """A projected column's stored values as answer values (strings decoded, booleans as bool)."""
    if typ == "string":
        return strings.decode(values) if len(values) else []
    if typ == "boolean":
        return [bool(v) for v in values.tolist()]
    return values.tolist()


def decode_keys(keys: np.ndarray, typ: str | None, strings) -> list:
    """Group keys as answer values, the null group's key (synopsis.keys_with_nulls) as None."""
    if typ == "string":
        codes = keys.astype(np.int64, copy=False)
        if len(codes) and codes.min() < 0:
            return [None if c < 0 else v for c, v in zip(codes.tolist(), strings.decode(np.maximum(codes, 0)))]
        return strings.decode(codes)
    if typ == "boolean":
        return [None if k == 2 else bool(k) for k in keys.tolist()]
    return [None if k == NULL_KEY else k for k in keys.tolist()]


# -- GROUP BY several columns -------------------------------------------------------------------------
# One sub-window's composite keys are one fixed-width byte string per row, so that every step that
# works on a single key column (np.unique, searchsorted, the functions' per-key merges) works on
# them unchanged. Per column: a byte 1 (a value) or 2 (NULL), then the value as an int64 (dictionary
# code, boolean, integer, temporal or decimal storage) with its sign bit flipped, in ten 7-bit groups,
# most significant first, each with its high bit set. No byte is ever 0 (NumPy's fixed-width bytes
# treat trailing zeros as padding), and equal keys are equal strings.
_GROUPS = 10
_KEY_WIDTH = 1 + _GROUPS
def composite_keys(columns: list[tuple[np.ndarray, np.ndarray | None]]) -> np.ndarray:
    """One byte string per row of the key columns [(values, validity or None)], as described above."""
    n = len(columns[0][0])
    out = np.empty((n, _KEY_WIDTH * len(columns)), dtype=np.uint8)
    for j, (values, valid) in enumerate(columns):
        u = values.astype(np.int64, copy=False).view(np.uint64) ^ np.uint64(1 << 63)
        base = j * _KEY_WIDTH
        if valid is None:
            out[:, base] = 1
        else:
            u = np.where(valid, u, np.uint64(0))
            out[:, base] = np.where(valid, 1, 2)
        for g in range(_GROUPS):
            shift = np.uint64(7 * (_GROUPS - 1 - g))
            out[:, base + 1 + g] = ((u >> shift) & np.uint64(0x7F)).astype(np.uint8) | 0x80
    return out.view(f"S{out.shape[1]}").reshape(n)


def decode_composite_keys(keys: np.ndarray, types: list[str], strings) -> list[list]:
    """The key columns' answer values (None for NULL) of composite keys, one list per column."""
    width = _KEY_WIDTH * len(types)
    if keys.dtype.kind != "S" or not len(keys):
        return [[] for _ in types]
    raw = np.frombuffer(keys.tobytes(), dtype=np.uint8).reshape(len(keys), width)
    out = []
    for j, typ in enumerate(types):
        base = j * _KEY_WIDTH
        u = np.zeros(len(keys), dtype=np.uint64)
        for g in range(_GROUPS):
            u = (u << np.uint64(7)) | (raw[:, base + 1 + g] & 0x7F).astype(np.uint64)
        values = (u ^ np.uint64(1 << 63)).view(np.int64)
        null = raw[:, base] == 2
        if typ == "string":
            decoded = strings.decode(np.where(null, 0, values)) if (~null).any() else [None] * len(keys)
        elif typ == "boolean":
            decoded = [bool(v) for v in values.tolist()]
        else:
            decoded = values.tolist()
        out.append([None if z else v for z, v in zip(null.tolist(), decoded)])
    return out
