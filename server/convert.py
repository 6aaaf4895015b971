"""Conversions between the proto API and the core's types (pure functions)."""
from __future__ import annotations

import math

import pyarrow as pa

from windowstore.store import InvalidInput
from windowstore.store.planner import Answer as CoreAnswer
from windowstore.store.query import Aggregate, KeyColumn, OrderBy, Predicate, Query, Range
from windowstore.store.window import WindowSpec
from windowstore.txn import Result
from windowstore.v1 import windowstore_pb2 as pb

TYPE_TO_PB = {"int64": pb.COLUMN_TYPE_INT64, "float64": pb.COLUMN_TYPE_FLOAT64, "string": pb.COLUMN_TYPE_STRING}
PB_TO_TYPE = {v: k for k, v in TYPE_TO_PB.items()}
CLOCK_TO_PB = {"processing": pb.CLOCK_PROCESSING, "event": pb.CLOCK_EVENT, "manual": pb.CLOCK_MANUAL}
PB_TO_CLOCK = {v: k for k, v in CLOCK_TO_PB.items()} | {pb.CLOCK_UNSPECIFIED: "processing"}
ACCESS_TO_PB = {"probe": pb.ACCESS_PATH_PROBE, "synopsis": pb.ACCESS_PATH_SYNOPSIS, "window": pb.ACCESS_PATH_WINDOW}
FUNC_TO_PB = {"count": pb.AGGREGATE_FUNCTION_COUNT, "sum": pb.AGGREGATE_FUNCTION_SUM, "avg": pb.AGGREGATE_FUNCTION_AVG,
              "min": pb.AGGREGATE_FUNCTION_MIN, "max": pb.AGGREGATE_FUNCTION_MAX,
              "count_distinct": pb.AGGREGATE_FUNCTION_COUNT_DISTINCT, "quantile": pb.AGGREGATE_FUNCTION_QUANTILE}
PB_TO_FUNC = {v: k for k, v in FUNC_TO_PB.items()}
UNIT_TO_PB = {"ms": pb.LENGTH_UNIT_MS, "subwindows": pb.LENGTH_UNIT_SUBWINDOWS, "rows": pb.LENGTH_UNIT_ROWS}
PB_TO_UNIT = {v: k for k, v in UNIT_TO_PB.items()}


# -- streams ---------------------------------------------------------------------------------------
def spec_from_pb(spec: pb.StreamSpec) -> tuple[str, dict[str, str], str, WindowSpec]:
    if not spec.name:
        raise InvalidInput("stream name is required")
    columns = {}
    for c in spec.columns:
        if c.type not in PB_TO_TYPE:
            raise InvalidInput(f"column {c.name!r} needs a type", column=c.name)
        if c.name in columns:
            raise InvalidInput(f"column {c.name!r} is declared twice", column=c.name)
        columns[c.name] = PB_TO_TYPE[c.type]
    if spec.clock not in PB_TO_CLOCK:
        raise InvalidInput(f"unknown clock {spec.clock}")
    window = WindowSpec(
        subwindows=int(spec.subwindows),
        subwindow_ms=int(spec.subwindow_ms) or None,
        subwindow_rows=int(spec.subwindow_rows) or None,
        clock=PB_TO_CLOCK[spec.clock],
        allowed_lateness_ms=int(spec.allowed_lateness_ms),
        group_by=tuple(spec.group_by),
        topk=int(spec.topk) or 16,
    )
    return spec.name, columns, spec.time_column or "ts", window


def spec_to_pb(name: str, schema, window: WindowSpec) -> pb.StreamSpec:
    return pb.StreamSpec(
        name=name, columns=[pb.Column(name=n, type=TYPE_TO_PB[t]) for n, t in schema.columns],
        time_column=schema.time_column, subwindows=window.subwindows, subwindow_ms=window.subwindow_ms or 0,
        subwindow_rows=window.subwindow_rows or 0, clock=CLOCK_TO_PB[window.clock],
        allowed_lateness_ms=window.allowed_lateness_ms, group_by=list(window.group_by), topk=window.topk)


# -- batches ---------------------------------------------------------------------------------------
def batch_from_pb(req: pb.AppendRequest):
    """A pyarrow Table or a dict of lists; raises InvalidInput on malformed input."""
    kind = req.WhichOneof("batch")
    if kind == "arrow_ipc":
        try:
            with pa.ipc.open_stream(pa.BufferReader(req.arrow_ipc)) as reader:
                return reader.read_all()
        except (pa.ArrowInvalid, pa.ArrowTypeError, OSError) as e:
            raise InvalidInput(f"arrow_ipc is not a readable Arrow IPC stream: {e}") from None
    if kind == "columnar":
        out = {}
        for col in req.columnar.columns:
            which = col.WhichOneof("values")
            if which is None:
                raise InvalidInput(f"column {col.name!r} has no values", column=col.name)
            if col.name in out:
                raise InvalidInput(f"column {col.name!r} appears twice", column=col.name)
            out[col.name] = list(getattr(col, which).values)
        return out
    raise InvalidInput("append needs a batch: arrow_ipc or columnar")


# -- queries ---------------------------------------------------------------------------------------
def value_from_pb(v: pb.Value):
    kind = v.WhichOneof("kind")
    if kind is None:
        raise InvalidInput("a comparison value is null")
    return getattr(v, kind)


def value_to_pb(x) -> pb.Value:
    if x is None:
        return pb.Value()
    if isinstance(x, str):
        return pb.Value(string_value=x)
    if isinstance(x, float):
        return pb.Value(float64_value=x)
    if isinstance(x, int):
        return pb.Value(int64_value=x)
    return pb.Value(float64_value=float(x))


def _length(w: pb.WindowLength) -> Range | None:
    if w.value == 0 and w.unit == pb.LENGTH_UNIT_UNSPECIFIED:
        return None
    if w.unit not in PB_TO_UNIT or w.value == 0:
        raise InvalidInput("a window length needs a positive value and a unit")
    return Range(int(w.value), PB_TO_UNIT[w.unit])


def _aggregate(a: pb.Aggregate) -> Aggregate:
    if a.func not in PB_TO_FUNC:
        raise InvalidInput("an aggregate needs a function")
    func = PB_TO_FUNC[a.func]
    if func != "count" and not a.column:
        raise InvalidInput(f"{func.upper()} needs a column")
    if func == "quantile" and not (0.0 <= a.q <= 1.0 and math.isfinite(a.q)):
        raise InvalidInput("quantile fraction must be between 0 and 1")
    return Aggregate(func, a.column or None, a.q if func == "quantile" else None, a.alias or None)


def query_from_pb(q: pb.StructuredQuery) -> Query:
    if not q.stream:
        raise InvalidInput("a query needs a stream")
    items = []
    for it in q.items:
        kind = it.WhichOneof("item")
        if kind == "key_column":
            items.append(KeyColumn(it.key_column, it.alias or None))
        elif kind == "aggregate":
            items.append(_aggregate(it.aggregate))
        else:
            raise InvalidInput("a select item needs a key column or an aggregate")
    if not any(isinstance(i, Aggregate) for i in items):
        raise InvalidInput("select at least one aggregate")
    for i in items:
        if isinstance(i, KeyColumn) and i.column != q.group_by:
            raise InvalidInput(f"column {i.column!r} must be aggregated or be the GROUP BY column", column=i.column)
    where = []
    for conj in q.where:
        preds = []
        for p in conj.predicates:
            op = p.op.lower()
            if op not in ("=", "!=", "<", "<=", ">", ">=", "in", "not in"):
                raise InvalidInput(f"unknown comparison {p.op!r}")
            values = [value_from_pb(v) for v in p.values]
            if op in ("in", "not in"):
                if not values:
                    raise InvalidInput(f"{op.upper()} needs at least one value")
                preds.append(Predicate(p.column, op, tuple(values)))
            else:
                if len(values) != 1:
                    raise InvalidInput(f"{op} needs exactly one value")
                preds.append(Predicate(p.column, op, values[0]))
        if preds:
            where.append(tuple(preds))
    order = []
    for o in q.order_by:
        if o.item >= len(items):
            raise InvalidInput(f"ORDER BY item {o.item} is not a select item")
        order.append(OrderBy(int(o.item), o.descending))
    return Query(q.stream, tuple(items), tuple(where), q.group_by or None, tuple(order),
                 int(q.limit) if q.HasField("limit") else None, _length(q.range), _length(q.slide),
                 tuple(_aggregate(a) for a in q.outer), q.approximate)


def answer_to_pb(result: Result, stream: str, query_id: str) -> pb.Answer:
    a: CoreAnswer = result.answer
    out = pb.Answer(
        columns=a.columns, rows=[pb.Row(values=[value_to_pb(x) for x in row]) for row in a.rows],
        slide=result.slide, response_ms=result.response_ms, restarts=result.restarts, policy=result.policy,
        access=ACCESS_TO_PB[a.access], exact=a.exact, query_id=query_id, execution=result.execution,
        late_slides=result.late_slides, answered_ms=result.answered_ms, stream=stream)
    if result.window_start_ms is not None:
        out.window_start_ms = result.window_start_ms
        out.window_end_ms = result.window_end_ms
    if result.staleness_ms is not None:
        out.staleness_ms = result.staleness_ms
    if a.guaranteed is not None:
        out.guaranteed = a.guaranteed
    if result.inter_exec_ms is not None:
        out.inter_exec_ms = result.inter_exec_ms
    return out
