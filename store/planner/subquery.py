"""The outer query of `SELECT agg(x) FROM (SELECT ... GROUP BY ...)`: its aggregates over the inner
query's finished rows (or, outer_columns, its finished aggregate columns). It sees only those; it
must not read the window or merge partials."""
from __future__ import annotations


def outer_row(outer, rows: list[tuple]) -> tuple:
    """The one row of the outer query: per (aggregate, inner item) its value over the inner rows
    (item None: over the rows themselves, as COUNT(*) counts them)."""
    out = []
    for a, item in outer:
        values = rows if item is None else [r[item] for r in rows]
        out.append(a.fn.over(a, values))
    return tuple(out)


def outer_columns(b, results: list) -> tuple | None:
    """outer_row's row from the inner query's aggregate columns (`results`, one array per
    aggregate over all its groups) when every outer aggregate is over an aggregate column and
    takes it as an array (fn.over_column), and the inner rows are all the groups (no HAVING, no
    LIMIT): the keys are then neither decoded nor sorted, nor the rows made (thesis 8.4.4's
    post-processing of a quantile over per-key counters; docs/sharing.md). None otherwise."""
    if b.having is not None or b.limit is not None:
        return None
    out = []
    for a, item in b.outer:
        agg = None if item is None else b.items[item].agg
        if agg is None:
            return None
        value = a.fn.over_column(a, results[agg])
        if value is NotImplemented:
            return None
        out.append(value)
    return tuple(out)
