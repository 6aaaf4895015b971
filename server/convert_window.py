"""The session, count-based and partitioned windows of structured queries (StructuredQuery.window_shape,
a SessionRowsWindow) and the core's window_shapes.WindowShape, both ways. Syntax only, as the
query text's window clause (store/window_shapes.parse_shape): the binder checks the rest.
"""
from __future__ import annotations

from windowstore.store import Loc, QueryError
from windowstore.store.exact import INT64_MAX
from windowstore.store.window_shapes import PARTITION, ROWS, SESSION, WindowShape
from windowstore.v1 import windowstore_pb2 as pb


def shape_from_pb(w: pb.SessionRowsWindow, where: str = "window_shape") -> WindowShape:
    """The WindowShape of a SessionRowsWindow, located by its field path."""
    kind = w.WhichOneof("size")
    if kind is None:
        raise QueryError("a window shape needs session_gap_ms or rows", Loc(field=where))
    value = getattr(w, kind)
    at = Loc(field=f"{where}.{kind}")
    if value == 0:
        raise QueryError("a session gap must be positive" if kind == "session_gap_ms" else "a row count must be positive",
                         at)
    if value > INT64_MAX:
        raise QueryError(f"{kind} is beyond int64 ({INT64_MAX})", at)
    if kind == "session_gap_ms":
        if len(w.partition_by):
            raise QueryError("partition_by goes with rows, not with a session gap", Loc(field=f"{where}.partition_by"))
        return WindowShape(SESSION, gap_ms=int(value), loc=Loc(field=where))
    for i, c in enumerate(w.partition_by):
        if not c:
            raise QueryError("a partition column needs a name", Loc(field=f"{where}.partition_by[{i}]"))
    by = tuple(w.partition_by)
    return WindowShape(PARTITION if by else ROWS, rows=int(value), partition_by=by, loc=Loc(field=where))


def shape_to_pb(shape: WindowShape) -> pb.SessionRowsWindow:
    if shape.kind == SESSION:
        return pb.SessionRowsWindow(session_gap_ms=shape.gap_ms)
    return pb.SessionRowsWindow(rows=shape.rows, partition_by=list(shape.partition_by))
