"""The outer query of `SELECT agg(x) FROM (SELECT ... GROUP BY ...)`: its aggregates over the inner
query's finished rows. It sees only those rows; it must not read the window or merge partials."""
from __future__ import annotations


def outer_row(outer, rows: list[tuple]) -> tuple:
    """The one row of the outer query: per (aggregate, inner item) its value over the inner rows
    (item None: over the rows themselves, as COUNT(*) counts them)."""
    out = []
    for a, item in outer:
        values = rows if item is None else [r[item] for r in rows]
        out.append(a.fn.over(a, values))
    return tuple(out)
