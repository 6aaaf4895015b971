"""Conversions between the proto API and the core's types (pure functions)."""
from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa

from windowstore.store import InvalidInput, Loc, QueryError
from windowstore.store.errors import Unrepresentable
from windowstore.store.exact import INT64_MAX, INT64_MIN
from windowstore.store.functions import FUNCTIONS
from windowstore.store.kinds import Clock
from windowstore.store.parser import MAX_NUMBER_LENGTH
from windowstore.store.planner import Answer as CoreAnswer
from windowstore.store.schema import decimal_type
from windowstore.store.query import (OPS, Aggregate, Band, Equal, HavingTest, JoinQuery, KeyColumn, Logical, OrderBy,
                                     Predicate, Query, Range, Source)
from windowstore.store.window import WindowSpec
from windowstore.txn import Result
from windowstore.v1 import windowstore_pb2 as pb

from .payload import read_table

TYPE_TO_PB = {"int64": pb.COLUMN_TYPE_INT64, "float64": pb.COLUMN_TYPE_FLOAT64, "string": pb.COLUMN_TYPE_STRING,
              "boolean": pb.COLUMN_TYPE_BOOLEAN, "timestamp": pb.COLUMN_TYPE_TIMESTAMP, "date": pb.COLUMN_TYPE_DATE}
PB_TO_TYPE = {v: k for k, v in TYPE_TO_PB.items()}  # column types of a schema
ANSWER_TYPE_TO_PB = {**TYPE_TO_PB, "int128": pb.COLUMN_TYPE_INT128}
CLOCK_TO_PB = {Clock.PROCESSING: pb.CLOCK_PROCESSING, Clock.EVENT: pb.CLOCK_EVENT, Clock.MANUAL: pb.CLOCK_MANUAL}
PB_TO_CLOCK = {v: k for k, v in CLOCK_TO_PB.items()} | {pb.CLOCK_UNSPECIFIED: Clock.PROCESSING}
ACCESS_TO_PB = {"probe": pb.ACCESS_PATH_PROBE, "synopsis": pb.ACCESS_PATH_SYNOPSIS, "window": pb.ACCESS_PATH_WINDOW,
                "join": pb.ACCESS_PATH_JOIN}
# An aggregate travels as its AggregateFunction value where the enum has one (AGGREGATE_FUNCTION_ + its
# registered name in upper case), else by name in Aggregate.function_name: the registry
# (store/functions.py FUNCTIONS) is the list of functions, the enum only an older spelling of some.
_FUNC_PREFIX = "AGGREGATE_FUNCTION_"
PB_TO_FUNC = {v.number: v.name[len(_FUNC_PREFIX):].lower() for v in pb.AggregateFunction.DESCRIPTOR.values if v.number}
FUNC_TO_PB = {name: number for number, name in PB_TO_FUNC.items()}
UNIT_TO_PB = {"ms": pb.LENGTH_UNIT_MS, "subwindows": pb.LENGTH_UNIT_SUBWINDOWS, "rows": pb.LENGTH_UNIT_ROWS}
PB_TO_UNIT = {v: k for k, v in UNIT_TO_PB.items()}


# -- streams ---------------------------------------------------------------------------------------
def spec_from_pb(spec: pb.StreamSpec) -> tuple[str, dict[str, str], str, WindowSpec]:
    if not spec.name:
        raise InvalidInput("stream name is required")
    columns = {}
    for c in spec.columns:
        if c.type not in PB_TO_TYPE and c.type != pb.COLUMN_TYPE_DECIMAL:
            raise InvalidInput(f"column {c.name!r} needs a type", column=c.name)
        if c.name in columns:
            raise InvalidInput(f"column {c.name!r} is declared twice", column=c.name)
        columns[c.name] = (f"decimal({c.precision},{c.scale})" if c.type == pb.COLUMN_TYPE_DECIMAL
                           else PB_TO_TYPE[c.type])
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
        partition_of=spec.partition.stream,
        partition=int(spec.partition.index),
        partitions=int(spec.partition.count),
        partition_by=tuple(spec.partition.key),
        origin_ms=spec.origin_ms if spec.HasField("origin_ms") else None,
    )
    return spec.name, columns, spec.time_column or "ts", window


def column_to_pb(name: str, typ: str) -> pb.Column:
    dec = decimal_type(typ)
    if dec:
        return pb.Column(name=name, type=pb.COLUMN_TYPE_DECIMAL, precision=dec[0], scale=dec[1])
    return pb.Column(name=name, type=TYPE_TO_PB[typ])


def answer_type_to_pb(typ: str) -> int:
    return pb.COLUMN_TYPE_DECIMAL if typ.startswith("decimal(") else ANSWER_TYPE_TO_PB[typ]


def spec_to_pb(name: str, schema, window: WindowSpec) -> pb.StreamSpec:
    return pb.StreamSpec(
        name=name, columns=[column_to_pb(n, t) for n, t in schema.columns],
        time_column=schema.time_column, subwindows=window.subwindows, subwindow_ms=window.subwindow_ms or 0,
        subwindow_rows=window.subwindow_rows or 0, clock=CLOCK_TO_PB[window.clock],
        allowed_lateness_ms=window.allowed_lateness_ms, group_by=list(window.group_by), topk=window.topk,
        partition=pb.PartitionSpec(stream=window.partition_of, index=window.partition, count=window.partitions,
                                   key=list(window.partition_by)) if window.partitions else None,
        origin_ms=window.origin_ms)


def int64(value: int, field: str) -> int:
    """`value` for an int64 field of a response, or Unrepresentable naming the field: a value of
    the server's state the wire cannot carry is reported for the one stream or answer it belongs
    to, never as an INTERNAL for a whole call (a listing answers for the other streams)."""
    if INT64_MIN <= value <= INT64_MAX:
        return value
    raise Unrepresentable(f"{field} {value} cannot be carried as an int64 ({INT64_MIN} to {INT64_MAX})", field)


def stream_info_to_pb(stream, stopped: str | None) -> pb.StreamInfo:
    """A stream's description for ListStreams and DescribeStream. A value that does not fit its
    field marks the stream as stopped, with why, instead of failing the call."""
    w = stream.window
    info = pb.StreamInfo(spec=spec_to_pb(stream.name, stream.schema, stream.spec))
    try:
        info.latest_slide = int64(w.latest, "latest_slide")
        info.buffered_rows = w.buffered_rows
        info.window_rows = sum(x.rows for x in w.youngest(w.n))
        info.created_ms = int64(stream.created_ms, "created_ms")
        lo, hi = w.bounds(w.n)
        if lo is not None:
            info.window_start_ms, info.window_end_ms = int64(lo, "window_start_ms"), int64(hi, "window_end_ms")
        nxt = w.next_due_ms()
        if nxt is not None:
            info.next_slide_ms = int64(nxt, "next_slide_ms")
    except Unrepresentable as e:
        info = pb.StreamInfo(spec=info.spec)
        stopped = f"{stopped}; " if stopped else ""
        stopped += f"its state cannot be reported: {e}"
    if stopped:
        info.stopped = stopped
    return info


# -- batches ---------------------------------------------------------------------------------------
_ARROW_TYPES = {"int64_values": pa.int64(), "float64_values": pa.float64(), "string_values": pa.string(),
                "bool_values": pa.bool_()}


class WireAppend:
    """An AppendRequest with an Arrow payload, read from the received bytes by `parse_append`:
    `arrow_ipc` is a view into them, not a copy (protobuf's parse copies the payload into the
    message, and reading the field copies it out again: for a 3.6 MB request 183 us of a warm
    process, and twice the payload's size of fresh memory). The fields and methods the Append
    handler reads of a request, with protobuf's meaning."""

    __slots__ = ("stream", "writer_id", "batch_id", "arrow_ipc")

    def __init__(self, stream: str, writer_id: str, batch_id: int | None, arrow_ipc: memoryview):
        self.stream, self.writer_id, self.batch_id, self.arrow_ipc = stream, writer_id, batch_id, arrow_ipc

    def HasField(self, name: str) -> bool:  # noqa: N802 - protobuf's name
        if name == "batch_id":
            return self.batch_id is not None
        if name == "arrow_ipc":
            return True
        raise ValueError(f"AppendRequest has no optional field {name!r}")

    def WhichOneof(self, name: str) -> str:  # noqa: N802
        assert name == "batch"
        return "arrow_ipc"


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A base-128 varint at pos: (value, next position); ValueError when cut off or too long."""
    value = shift = 0
    while shift < 70:
        b = data[pos]  # IndexError when cut off
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
    raise ValueError("varint too long")


def parse_append(data: bytes) -> WireAppend | None:
    """An AppendRequest's bytes as a WireAppend when they hold an Arrow payload and no field but
    stream (1), arrow_ipc (2), writer_id (4) and batch_id (5), each once and well formed; None
    otherwise (a columnar batch, unknown or repeated fields, bad UTF-8, anything malformed), to
    be parsed by protobuf, which then decides and words the error."""
    fields: dict[int, Any] = {}  # field number -> (start, end) of a bytes field, or the int64
    n = len(data)
    pos = 0
    try:
        while pos < n:
            key, pos = _varint(data, pos)
            number, wire = key >> 3, key & 7
            if number in fields:
                return None
            if wire == 2 and number in (1, 2, 4):
                size, pos = _varint(data, pos)
                end = pos + size
                if end > n:
                    return None
                fields[number] = (pos, end)
                pos = end
            elif wire == 0 and number == 5:
                value, pos = _varint(data, pos)
                if value >= 1 << 64:
                    return None
                fields[5] = value - (1 << 64) if value >= 1 << 63 else value  # int64: two's complement
            else:
                return None
        if 2 not in fields:
            return None
        stream = writer = ""
        if 1 in fields:
            stream = data[slice(*fields[1])].decode("utf-8")
        if 4 in fields:
            writer = data[slice(*fields[4])].decode("utf-8")
    except (IndexError, ValueError):  # UnicodeDecodeError is a ValueError
        return None
    return WireAppend(stream, writer, fields.get(5), memoryview(data)[slice(*fields[2])])


def batch_decoder(req: pb.AppendRequest | WireAppend, max_decompressed: int = 1 << 30):
    """(decode, size): a call that returns the batch as a pyarrow Table and the Arrow IPC bytes it
    came in (kept for the log; None for a columnar batch), to make where the caller chooses, and
    the payload's size in bytes to choose by. decode() raises InvalidInput on malformed input,
    ResourceLimit when an Arrow payload would decompress to more than `max_decompressed`
    bytes. The Arrow payload is read once (a WireAppend's is a view; a message's field copies it
    out on each access) and sized by its length (ByteSize() would serialize the whole message
    again to count it)."""
    if req.WhichOneof("batch") == "arrow_ipc":
        ipc = req.arrow_ipc
        return (lambda: (read_table(ipc, max_decompressed), ipc)), len(ipc)
    return (lambda: (_columnar_batch(req), None)), req.ByteSize()  # type: ignore[arg-type, union-attr]  # a WireAppend is always Arrow


def _columnar_batch(req: pb.AppendRequest) -> pa.Table:
    """A columnar batch (one protobuf value per cell) as a Table; InvalidInput when malformed."""
    kind = req.WhichOneof("batch")
    if kind == "columnar":
        out = {}
        for col in req.columnar.columns:
            which = col.WhichOneof("values")
            if which is None:
                raise InvalidInput(f"column {col.name!r} has no values", column=col.name)
            if col.name in out:
                raise InvalidInput(f"column {col.name!r} appears twice", column=col.name)
            values = getattr(col, which).values
            if len(col.is_null):  # nulls: a validity mask over the values (placeholders where null)
                if len(col.is_null) != len(values):
                    raise InvalidInput(f"column {col.name!r} has {len(col.is_null)} is_null flags for {len(values)} values",
                                       column=col.name)
                out[col.name] = pa.array(values, type=_ARROW_TYPES[which], mask=np.asarray(col.is_null, dtype=bool))
            else:
                out[col.name] = pa.array(values, type=_ARROW_TYPES[which])
        lengths = {len(v) for v in out.values()}
        if len(lengths) > 1:
            raise InvalidInput(f"columns have different lengths ({', '.join(str(n) for n in sorted(lengths))})")
        return pa.table(out) if out else pa.table({})
    raise InvalidInput("append needs a batch: arrow_ipc or columnar")


# -- queries (syntax only: the binder checks names, types and lengths) -----------------------------------
_NUMBER = re.compile(r"-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_INT128_MIN, _INT128_MAX = -(2**127), 2**127 - 1


def value_from_pb(v: pb.Value, where: str = "value"):
    kind = v.WhichOneof("kind")
    if kind is None:
        raise QueryError("a comparison value is null", Loc(field=where))
    if kind == "int128_value":
        return v.int128_value.high * 2**64 + v.int128_value.low
    if kind == "decimal_value":
        text = v.decimal_value
        if len(text) > MAX_NUMBER_LENGTH or not _NUMBER.fullmatch(text):
            raise QueryError(f"decimal_value {text[:40]!r} is not a decimal number", Loc(field=where))
        return Decimal(text) if any(ch in text for ch in ".eE") else int(text)
    return getattr(v, kind)


def value_to_pb(x) -> pb.Value:
    """An answer value or a query literal; integers beyond int64 travel exactly; NULL: no field set."""
    v = pb.Value()
    _set_value(v, x)
    return v


def _set_value(v: pb.Value, x) -> None:
    """value_to_pb into an existing (empty) Value."""
    if x is None:
        return
    if isinstance(x, bool):
        v.bool_value = x
    elif isinstance(x, str):
        v.string_value = x
    elif isinstance(x, float):
        v.float64_value = x
    elif isinstance(x, int):
        if INT64_MIN <= x <= INT64_MAX:
            v.int64_value = x
        elif _INT128_MIN <= x <= _INT128_MAX:
            v.int128_value.high, v.int128_value.low = x >> 64, x & (2**64 - 1)
        else:
            v.decimal_value = str(x)
    elif isinstance(x, Decimal):
        v.decimal_value = str(x)
    else:
        v.float64_value = float(x)


def _length(w: pb.WindowLength, where: str) -> Range | None:
    if w.value == 0 and w.unit == pb.LENGTH_UNIT_UNSPECIFIED:
        return None
    if w.unit not in PB_TO_UNIT or w.value == 0:
        raise QueryError("a window length needs a positive value and a unit", Loc(field=where))
    return Range(int(w.value), PB_TO_UNIT[w.unit], loc=Loc(field=where))


def _aggregate(a: pb.Aggregate, where: str) -> Aggregate:
    if a.function_name:
        func = a.function_name
        if func not in FUNCTIONS:
            raise QueryError(f"unknown aggregate function {func!r}", Loc(field=f"{where}.function_name"))
        if a.func and PB_TO_FUNC.get(a.func) != func:
            raise QueryError(f"func and function_name name different aggregates ({func!r})",
                             Loc(field=f"{where}.function_name"))
    elif a.func not in PB_TO_FUNC:
        raise QueryError("an aggregate needs a function", Loc(field=f"{where}.func"))
    else:
        func = PB_TO_FUNC[a.func]
    if not a.column and func != "count":
        raise QueryError(f"{func.upper()} needs a column", Loc(field=f"{where}.column"))
    # q travels as a double; its shortest decimal is the fraction meant (0.1 means 0.1)
    return Aggregate(func, a.column or None, Decimal(repr(a.q)) if func == "quantile" else None, a.alias or None,
                     loc=Loc(field=f"{where}.column" if a.column else where))


def _aggregate_to_pb(a: Aggregate) -> pb.Aggregate:
    number = FUNC_TO_PB.get(a.func)
    return pb.Aggregate(func=number or pb.AGGREGATE_FUNCTION_UNSPECIFIED, function_name="" if number else a.func,
                        column=a.column or "", q=float(a.q or 0), alias=a.alias or "")


def query_from_pb(q: pb.StructuredQuery) -> Query | JoinQuery:
    """The structured query as query.Query (or query.JoinQuery when it has sources), each part
    located by its field path."""
    if len(q.sources):
        return join_from_pb(q)
    if not q.stream:
        raise QueryError("a query needs a stream", Loc(field="stream"))
    items, conjunctions, order = _select_from_pb(q)
    group_by, group_by_loc, more, more_locs = _group_by_from_pb(q)
    return Query(q.stream, tuple(items), tuple(conjunctions), group_by, tuple(order),
                 int(q.limit) if q.HasField("limit") else None, _length(q.range, "range"), _length(q.slide, "slide"),
                 tuple(_aggregate(a, f"outer[{i}]") for i, a in enumerate(q.outer)), q.approximate,
                 loc=Loc(field="items"), stream_loc=Loc(field="stream"), group_by_loc=group_by_loc,
                 as_of_slide=int(q.as_of_slide) if q.HasField("as_of_slide") else None,
                 as_of_loc=Loc(field="as_of_slide"), group_by_more=more, group_by_more_locs=more_locs,
                 having=_having_from_pb(q.having, "having") if q.HasField("having") else None, distinct=q.distinct)


_MAX_HAVING_DEPTH = 32


def _having_from_pb(c: pb.HavingCondition, where: str, depth: int = 0):
    """A HAVING condition (query.HavingTest / query.Logical), each part located by its field path."""
    if depth > _MAX_HAVING_DEPTH:
        raise QueryError(f"a HAVING condition nests more than {_MAX_HAVING_DEPTH} deep", Loc(field=where))
    kind = c.WhichOneof("condition")
    if kind in ("all_of", "any_of"):
        parts = getattr(c, kind).parts
        if len(parts) < 2:
            raise QueryError(f"{kind} needs two or more parts", Loc(field=f"{where}.{kind}.parts"))
        return Logical("and" if kind == "all_of" else "or",
                       tuple(_having_from_pb(p, f"{where}.{kind}.parts[{i}]", depth + 1) for i, p in enumerate(parts)),
                       loc=Loc(field=f"{where}.{kind}"))
    if kind == "negate":
        return Logical("not", (_having_from_pb(c.negate, f"{where}.negate", depth + 1),), loc=Loc(field=f"{where}.negate"))
    if kind != "test":
        raise QueryError("a HAVING condition needs test, all_of, any_of or negate", Loc(field=where))
    t, at = c.test, f"{where}.test"
    which = t.WhichOneof("operand")
    operand: Aggregate | str
    if which == "aggregate":
        operand, loc = _aggregate(t.aggregate, f"{at}.aggregate"), Loc(field=f"{at}.aggregate")
    elif which == "name" and t.name:
        operand, loc = t.name, Loc(field=f"{at}.name")
    else:
        raise QueryError("a HAVING test needs an aggregate or a name", Loc(field=f"{at}.operand"))
    op = "!=" if t.op.strip().lower() == "<>" else " ".join(t.op.lower().split())
    if op not in OPS:
        raise QueryError(f"unknown comparison {t.op[:20]!r} (one of {', '.join(OPS)})", Loc(field=f"{at}.op"))
    values = [value_from_pb(v, f"{at}.values[{i}]") for i, v in enumerate(t.values)]
    if op in ("in", "not in"):
        if not values:
            raise QueryError(f"{op.upper()} needs at least one value", Loc(field=f"{at}.values"))
        return HavingTest(operand, op, tuple(values), loc=loc)
    if op in ("is null", "is not null"):
        if values:
            raise QueryError(f"{op.upper()} takes no value", Loc(field=f"{at}.values"))
        return HavingTest(operand, op, None, loc=loc)
    if len(values) != 1:
        raise QueryError(f"{op} needs exactly one value", Loc(field=f"{at}.values"))
    return HavingTest(operand, op, values[0], loc=loc)


def _having_to_pb(c) -> pb.HavingCondition:
    if isinstance(c, Logical):
        if c.op == "not":
            return pb.HavingCondition(negate=_having_to_pb(c.parts[0]))
        parts = pb.HavingConditions(parts=[_having_to_pb(p) for p in c.parts])
        return pb.HavingCondition(**{"all_of" if c.op == "and" else "any_of": parts})
    values = c.value if c.op in ("in", "not in") else () if c.op in ("is null", "is not null") else (c.value,)
    test = pb.HavingTest(op=c.op, values=[value_to_pb(v) for v in values])
    if isinstance(c.operand, Aggregate):
        test.aggregate.CopyFrom(_aggregate_to_pb(c.operand))
    else:
        test.name = c.operand
    return pb.HavingCondition(test=test)


def _group_by_from_pb(q: pb.StructuredQuery) -> tuple[str | None, Loc, tuple[str, ...], tuple[Loc, ...]]:
    """(first GROUP BY column or None, its location, the further columns, their locations) from
    group_by (one column) or group_by_columns (several)."""
    columns = list(q.group_by_columns)
    if not columns:
        return q.group_by or None, Loc(field="group_by"), (), ()
    if q.group_by:
        raise QueryError("set group_by (one column) or group_by_columns, not both", Loc(field="group_by_columns"))
    for i, c in enumerate(columns):
        if not c:
            raise QueryError("a GROUP BY column needs a name", Loc(field=f"group_by_columns[{i}]"))
    locs = tuple(Loc(field=f"group_by_columns[{i}]") for i in range(len(columns)))
    return columns[0], locs[0], tuple(columns[1:]), locs[1:]


def join_from_pb(q: pb.StructuredQuery) -> JoinQuery:
    """A structured join: sources in FROM order with their ON conditions; the select list, filters,
    grouping and ordering as for one stream, with columns named "alias.col"."""
    if q.distinct or q.HasField("having"):
        name = "distinct" if q.distinct else "having"
        raise QueryError(f"{'SELECT DISTINCT' if q.distinct else 'HAVING'} is not available for joins", Loc(field=name))
    for name in ("stream", "approximate"):
        if getattr(q, name):
            raise QueryError(f"a join names its streams in sources, not in {name}", Loc(field=name))
    if q.HasField("as_of_slide"):
        raise QueryError("AS OF SLIDE is not available for joins", Loc(field="as_of_slide"))
    for name in ("range", "slide"):
        if _length(getattr(q, name), name) is not None:
            raise QueryError(f"a join's {name.upper()} is per source (sources[i].{name})", Loc(field=name))
    sources = []
    for i, src in enumerate(q.sources):
        where = f"sources[{i}]"
        if not src.stream:
            raise QueryError("a join source needs a stream", Loc(field=f"{where}.stream"))
        on: list[Equal | Band] = []
        for ci, c in enumerate(src.on):
            at = f"{where}.on[{ci}]"
            kind = c.WhichOneof("condition")
            if kind == "equal":
                on.append(Equal(c.equal.left, c.equal.right, loc=Loc(field=f"{at}.equal.left"),
                                right_loc=Loc(field=f"{at}.equal.right")))
            elif kind == "band":
                b = c.band
                on.append(Band(b.column, b.base, b.low if b.HasField("low") else None,
                               b.high if b.HasField("high") else None, loc=Loc(field=f"{at}.band.column"),
                               base_loc=Loc(field=f"{at}.band.base")))
            else:
                raise QueryError("a join condition needs equal or band", Loc(field=at))
        if i == 0 and on:
            raise QueryError("the first source has no ON clause: put its conditions on a later source",
                             Loc(field=f"{where}.on"))
        sources.append(Source(src.stream, src.alias or None, _length(src.range, f"{where}.range"),
                              _length(src.slide, f"{where}.slide"), tuple(on), loc=Loc(field=where),
                              stream_loc=Loc(field=f"{where}.stream")))
    items, conjunctions, order = _select_from_pb(q)
    group_by, group_by_loc, more, _ = _group_by_from_pb(q)
    if more:
        raise QueryError("a join's GROUP BY takes one column", Loc(field="group_by_columns[1]"))
    within = None
    if q.HasField("within"):  # WITHIN 0 ms is a length too (simultaneous events)
        if q.within.unit not in PB_TO_UNIT:
            raise QueryError("within needs a unit (LENGTH_UNIT_MS)", Loc(field="within"))
        within = Range(int(q.within.value), PB_TO_UNIT[q.within.unit], loc=Loc(field="within"))
    return JoinQuery(tuple(sources), tuple(items), tuple(conjunctions), within,
                     group_by, tuple(order), int(q.limit) if q.HasField("limit") else None,
                     tuple(_aggregate(a, f"outer[{i}]") for i, a in enumerate(q.outer)),
                     loc=Loc(field="items"), group_by_loc=group_by_loc)


def _select_from_pb(q: pb.StructuredQuery) -> tuple[list, list, list]:
    """The select items, WHERE (OR of ANDs) and ORDER BY of a structured query."""
    items: list[KeyColumn | Aggregate] = []
    for i, it in enumerate(q.items):
        kind = it.WhichOneof("item")
        where = f"items[{i}]"
        if kind == "key_column":
            items.append(KeyColumn(it.key_column, it.alias or None, loc=Loc(field=f"{where}.key_column")))
        elif kind == "aggregate":
            agg = _aggregate(it.aggregate, f"{where}.aggregate")
            items.append(replace(agg, alias=it.alias or agg.alias))
        else:
            raise QueryError("a select item needs a key column or an aggregate", Loc(field=where))
    conjunctions = []
    for ci, conj in enumerate(q.where):
        preds = []
        for pi, p in enumerate(conj.predicates):
            where = f"where[{ci}].predicates[{pi}]"
            op = "!=" if p.op.strip().lower() == "<>" else " ".join(p.op.lower().split())
            if op not in OPS:
                raise QueryError(f"unknown comparison {p.op[:20]!r} (one of {', '.join(OPS)})", Loc(field=f"{where}.op"))
            values = [value_from_pb(v, f"{where}.values[{vi}]") for vi, v in enumerate(p.values)]
            loc = Loc(field=f"{where}.column")
            if op in ("in", "not in"):
                if not values:
                    raise QueryError(f"{op.upper()} needs at least one value", Loc(field=f"{where}.values"))
                preds.append(Predicate(p.column, op, tuple(values), loc=loc))
            elif op in ("is null", "is not null"):
                if values:
                    raise QueryError(f"{op.upper()} takes no value", Loc(field=f"{where}.values"))
                preds.append(Predicate(p.column, op, None, loc=loc))
            else:
                if len(values) != 1:
                    raise QueryError(f"{op} needs exactly one value", Loc(field=f"{where}.values"))
                preds.append(Predicate(p.column, op, values[0], loc=loc))
        if preds:
            conjunctions.append(tuple(preds))
    order = []
    for i, o in enumerate(q.order_by):
        loc = Loc(field=f"order_by[{i}]")
        if o.name:
            order.append(OrderBy(descending=o.descending, name=o.name, loc=loc))
        elif o.HasField("aggregate"):
            order.append(OrderBy(descending=o.descending, expr=_aggregate(o.aggregate, f"order_by[{i}].aggregate"),
                                 loc=loc))
        else:
            order.append(OrderBy(int(o.item), o.descending, loc=loc))
    return items, conjunctions, order


def _window_length(r: Range) -> pb.WindowLength:
    return pb.WindowLength(value=r.value, unit=UNIT_TO_PB[r.unit])


def query_to_pb(q: Query | JoinQuery) -> pb.StructuredQuery:
    """The structured form of a query (query_from_pb(query_to_pb(q)) == q)."""
    if isinstance(q, JoinQuery):
        out = pb.StructuredQuery(group_by=q.group_by or "", outer=[_aggregate_to_pb(a) for a in q.outer])
        for src in q.sources:
            ps = out.sources.add(stream=src.stream, alias=src.alias or "")
            if src.range is not None:
                ps.range.CopyFrom(_window_length(src.range))
            if src.slide is not None:
                ps.slide.CopyFrom(_window_length(src.slide))
            for c in src.on:
                if isinstance(c, Equal):
                    ps.on.add(equal=pb.JoinEqual(left=c.left, right=c.right))
                else:
                    band = pb.JoinBand(column=c.column, base=c.base)
                    if c.low is not None:
                        band.low = c.low
                    if c.high is not None:
                        band.high = c.high
                    ps.on.add(band=band)
        if q.within is not None:
            out.within.CopyFrom(_window_length(q.within))
    else:
        out = pb.StructuredQuery(stream=q.stream, approximate=q.approximate, outer=[_aggregate_to_pb(a) for a in q.outer])
        if q.group_by_more:  # several columns; one stays in the field every client knows
            out.group_by_columns.extend(q.group_columns)
        else:
            out.group_by = q.group_by or ""
        if q.as_of_slide is not None:
            out.as_of_slide = q.as_of_slide
        out.distinct = q.distinct
        if q.having is not None:
            out.having.CopyFrom(_having_to_pb(q.having))
    for it in q.items:
        if isinstance(it, KeyColumn):
            out.items.append(pb.SelectItem(key_column=it.column, alias=it.alias or ""))
        else:
            out.items.append(pb.SelectItem(aggregate=_aggregate_to_pb(it)))
    for conj in q.where:
        out.where.append(pb.Conjunction(predicates=[
            pb.Predicate(column=p.column, op=p.op, values=[value_to_pb(v) for v in
                                                           (p.value if p.op in ("in", "not in") else  # type: ignore[attr-defined]  # IN's value: a tuple
                                                            () if p.op in ("is null", "is not null") else (p.value,))])
            for p in conj]))
    for o in q.order_by:
        if o.name is not None:
            out.order_by.append(pb.OrderBy(name=o.name, descending=o.descending))
        elif o.expr is not None:
            out.order_by.append(pb.OrderBy(aggregate=_aggregate_to_pb(o.expr), descending=o.descending))
        else:
            out.order_by.append(pb.OrderBy(item=o.item, descending=o.descending))
    if q.limit is not None:
        out.limit = q.limit
    for name in ("range", "slide") if isinstance(q, Query) else ():
        r = getattr(q, name)
        if r is not None:
            getattr(out, name).CopyFrom(_window_length(r))
    return out


@lru_cache(maxsize=1024)
def _column_types(types: tuple[str, ...]) -> tuple[list[int], list[int], list[int]]:
    """An answer's column types, precisions and scales as the Answer message carries them (the
    same few tuples come back with every answer of a query)."""
    decimals = [decimal_type(t) or (0, 0) for t in types]
    return [answer_type_to_pb(t) for t in types], [d[0] for d in decimals], [d[1] for d in decimals]


def answer_to_pb(result: Result, stream: str, query_id: str, out: pb.Answer | None = None) -> pb.Answer:
    """The answer as a message; filled into `out` (e.g. a reply's own Answer field) when given,
    which costs half of building an Answer and copying it in. Its response_ms is the caller's to
    set: it is measured at the edge (service.py, Driver.response_ms), not by the engine."""
    a: CoreAnswer = result.answer
    if out is None:
        out = pb.Answer()
    types, precisions, scales = _column_types(tuple(a.types or ()))
    out.columns.extend(a.columns)
    out.column_types.extend(types)
    out.column_precisions.extend(precisions)
    out.column_scales.extend(scales)
    rows = out.rows
    for row in a.rows:
        values = rows.add().values
        for x in row:
            _set_value(values.add(), x)
    out.slide = int64(result.slide, "slide")
    out.restarts = result.restarts
    out.policy = result.policy
    out.access = ACCESS_TO_PB[a.access]
    out.exact = a.exact
    out.query_id = query_id
    out.execution = result.execution
    out.late_slides = result.late_slides
    if result.early_slides or result.group:  # a shared execution (txn/sharing/)
        out.early_slides = result.early_slides
        out.group = result.group
    out.answered_ms = result.answered_ms
    out.stream = stream
    if result.window_start_ms is not None:
        out.window_start_ms = int64(result.window_start_ms, "window_start_ms")
        out.window_end_ms = int64(result.window_end_ms, "window_end_ms")  # type: ignore[arg-type]  # set with window_start_ms
    if result.staleness_ms is not None:
        out.staleness_ms = result.staleness_ms
    if a.guaranteed is not None:
        out.guaranteed = a.guaranteed
    if result.inter_exec_ms is not None:
        out.inter_exec_ms = result.inter_exec_ms
    for sw in result.sources or ():
        w = out.sources.add(stream=sw.stream, slide=int64(sw.slide, "sources.slide"))
        if sw.window_start_ms is not None:
            w.window_start_ms = int64(sw.window_start_ms, "sources.window_start_ms")
        if sw.window_end_ms is not None:
            w.window_end_ms = int64(sw.window_end_ms, "sources.window_end_ms")
    return out
