"""Filter pushdown for the batch reader: Spark's filters on a pushable output column (a GROUP BY
key, a projected column) become WHERE predicates when the store's semantics for them equal
Spark's and the binder accepts them; every other filter stays with Spark."""
from __future__ import annotations

import datetime
from decimal import Decimal

from windowstore.store import bind

from .layout import _EPOCH, _Layout
from .reader import _QueryReader
from .schema import _schema_and_window


class _PushdownReader(_QueryReader):
    def pushFilters(self, filters):
        """Filters on the GROUP BY key's output column become WHERE predicates (the store's semantics
        for them equal Spark's: exact numbers, strings by code point, NULL unknown); the rest stay
        with Spark."""
        for f in filters:
            p = _to_predicate(f, self.layout)
            if p is None:
                yield f
            else:
                self.pushed.append(p)


_FILTER_OPS = {"EqualTo": "=", "GreaterThan": ">", "GreaterThanOrEqual": ">=", "LessThan": "<",
               "LessThanOrEqual": "<="}


def _literal(v, kind: str):
    """A Spark filter's literal as the store's, or None when it has no exact equivalent."""
    import math

    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:  # Spark hands TimestampType literals over as local naive datetimes
            v = v.astimezone(datetime.timezone.utc)
        us = (v - _EPOCH) // datetime.timedelta(microseconds=1)
        if kind == "event_time":
            return us // 1000 if us % 1000 == 0 else None  # a sub-ms bound has no exact ms equivalent
        return us if kind == "timestamp" else None
    if isinstance(v, datetime.date):
        return (v - _EPOCH.date()).days if kind == "date" else None
    if kind in ("timestamp", "date", "event_time"):
        return None
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, (bool, int, float, str, Decimal)):
        return v
    return None


def _to_predicate(f, layout: _Layout):
    """The store Predicate of a Spark filter on a pushable column, or None."""
    from windowstore.store.errors import QueryError
    from windowstore.store.query import Predicate

    name = type(f).__name__
    negate = name == "Not"
    if negate:
        f = f.child
        name = type(f).__name__
        if name not in ("EqualTo", "In"):
            return None
    attribute = getattr(f, "attribute", None)
    if attribute is None or len(attribute) != 1 or attribute[0] not in layout.pushable:
        return None
    column, kind = layout.pushable[attribute[0]]
    if name in ("IsNull", "IsNotNull"):
        p = Predicate(column, "is null" if name == "IsNull" else "is not null", None)
    elif name == "In":
        values = tuple(_literal(v, kind) for v in f.value)
        if not values or any(v is None for v in values):
            return None
        p = Predicate(column, "not in" if negate else "in", values)
    elif name in _FILTER_OPS:
        value = _literal(f.value, kind)
        if value is None:
            return None
        op = _FILTER_OPS[name]
        p = Predicate(column, "!=" if negate else op, value)
    else:
        return None
    from dataclasses import replace

    try:  # the binder's word on it (types, literal ranges): what it refuses stays with Spark
        bind(replace(layout.query, where=((p,),), as_of_slide=None), *_schema_and_window(layout.spec))  # type: ignore[arg-type]  # one stream's
    except QueryError:
        return None
    return p
