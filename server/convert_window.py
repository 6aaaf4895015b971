"""The window shapes of structured queries and the core's, both ways: session, count-based and
partitioned windows (StructuredQuery.window_shape, a SessionRowsWindow: window_shapes.WindowShape),
landmark and CUMULATE windows (StructuredQuery.landmark and .cumulate: cumulative.CumulativeShape).
Syntax only, as the query text's window clause (store/window_shapes.parse_shape,
store/cumulative.parse_cumulative): the binder checks the rest.
"""
from __future__ import annotations

from windowstore.store import Loc, QueryError
from windowstore.store.cumulative import CUMULATE, LANDMARK, CumulativeShape
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


def cumulative_from_pb(q: pb.StructuredQuery) -> CumulativeShape | None:
    """The landmark or CUMULATE window of a structured query (landmark, cumulate), or None; the
    checks and messages of the text's clause (cumulative.parse_cumulative), located by field."""
    landmark, cumulate = q.HasField("landmark"), q.HasField("cumulate")
    if landmark and cumulate:
        raise QueryError("set landmark or cumulate, not both", Loc(field="cumulate"))
    if landmark:
        return CumulativeShape(LANDMARK, loc=Loc(field="landmark"))
    if not cumulate:
        return None
    lengths = []
    for word in ("step", "size"):
        value = getattr(q.cumulate, f"{word}_ms")
        at = Loc(field=f"cumulate.{word}_ms")
        if value == 0:
            raise QueryError(f"{word.upper()} must be positive", at)
        if value > INT64_MAX:
            raise QueryError(f"{word.upper()} is {value} ms, beyond int64 ({INT64_MAX} ms)", at)
        lengths.append(int(value))
    return CumulativeShape(CUMULATE, lengths[0], lengths[1], loc=Loc(field="cumulate"))


def cumulative_to_pb(shape: CumulativeShape, out: pb.StructuredQuery) -> None:
    """Set `out`'s landmark or cumulate field to `shape`."""
    if shape.kind == LANDMARK:
        out.landmark.SetInParent()
    else:
        out.cumulate.CopyFrom(pb.CumulateWindow(step_ms=shape.step_ms, size_ms=shape.size_ms))
