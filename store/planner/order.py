"""ORDER BY and LIMIT of finished answers: the stable, NULLs-last row order shared by single-stream
queries and joins, and the pre-selection of top-k candidate groups before they are decoded. It
orders values it is given; it must not read sub-windows, merge partials or decode storage."""
from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

from ..binder import KeyRef


def sorted_positions(n: int, keys: list[tuple]) -> list[int]:
    """0..n-1 ordered by each (column, descending[, nulls_first]) of `keys`, the first deciding
    first. Python's sort is stable (also with reverse=True), so ties keep their order; NULL sorts
    last either way (DuckDB's default) unless the key says NULLS FIRST."""
    order = list(range(n))
    for key in reversed(keys):
        col, descending = key[0], key[1]
        nulls_first = len(key) > 2 and key[2]
        order.sort(key=_nulls_placed(col, descending, nulls_first), reverse=descending)
    return order


def group_rows(key_values: list, agg_cols: list[list], order: Sequence[tuple[int | KeyRef | None, bool]],
               limit: int | None, items, more_keys: Sequence[list] = ()) -> list[tuple]:
    """A grouped answer's rows: ordered by the ORDER BY items (`order`: an aggregate's index, None
    for the key, KeyRef(i) for the i-th of several keys), then by the keys in GROUP BY order; LIMIT;
    one value per select item (`items[i].agg`: its aggregate, or None for the key `items[i].key`).
    `more_keys`: the columns of the second and later keys. Shared by single-stream queries and joins."""
    keys = [key_values, *more_keys]

    def column(agg):
        if agg is None:
            return key_values
        return keys[agg.index] if isinstance(agg, KeyRef) else agg_cols[agg]

    positions = sorted_positions(len(key_values), [(column(agg), d) for agg, d in order] + [(k, False) for k in keys])
    if limit is not None:
        positions = positions[:limit]
    by_item = [keys[it.key] if it.agg is None else agg_cols[it.agg] for it in items]
    if len(positions) > 1:  # reorder each column at C speed (itemgetter), then zip into rows
        pick = operator.itemgetter(*positions)
        return list(zip(*[pick(col) for col in by_item]))
    return [tuple(col[r] for col in by_item) for r in positions]


def _nulls_placed(col: list, descending: bool, nulls_first: bool = False):
    """A sort key putting None after every value (or before, `nulls_first`), for a sort ascending
    (reverse=False) or descending."""
    if not any(v is None for v in col):
        return col.__getitem__
    if descending != nulls_first:  # (a reversed sort puts the False-keyed entries last)
        return lambda i: (col[i] is not None, 0 if col[i] is None else col[i])
    return lambda i: (col[i] is None, 0 if col[i] is None else col[i])


def limit_rows(rows: list[tuple], limit: int | None) -> list[tuple]:
    """The first `limit` rows (all of them without LIMIT)."""
    return rows if limit is None else rows[:limit]


def top_candidates(b, keys: np.ndarray, results: list[np.ndarray]):
    """With ORDER BY an aggregate and LIMIT k, only keys whose value ties or beats the k-th
    best can make the answer: keep those before decoding and sorting."""
    if not b.order or b.limit is None or len(keys) <= 4 * b.limit or b.limit == 0 or b.having is not None:
        return keys, results
    agg, descending = b.order[0]
    if not isinstance(agg, int) or results[agg].dtype.kind not in "if":
        return keys, results
    col = results[agg]
    if descending:
        pos = len(col) - b.limit
        keep = col >= np.partition(col, pos)[pos]
    else:
        keep = col <= np.partition(col, b.limit - 1)[b.limit - 1]
    return keys[keep], [r[keep] for r in results]
