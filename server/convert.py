"""Conversions between the proto API and the core's types (pure functions): the wire's spellings
of column types, clocks and access paths, stream specs and infos, int64 fields of responses, and
answers. Append requests are convert_append.py's, structured queries and values convert_query.py's;
every name of theirs imports from here too.
"""
from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from windowstore.store import InvalidInput
from windowstore.store.errors import Unrepresentable
from windowstore.store.exact import INT64_MAX, INT64_MIN
from windowstore.store.kinds import Clock
from windowstore.store.planner import Answer as CoreAnswer
from windowstore.store.schema import decimal_type
from windowstore.store.window import WindowSpec
from windowstore.txn import Result
from windowstore.v1 import windowstore_pb2 as pb

from .convert_append import WireAppend, batch_decoder, parse_append
from .convert_query import (FUNC_TO_PB, PB_TO_FUNC, PB_TO_UNIT, UNIT_TO_PB, add_value, join_from_pb, query_from_pb,
                            query_to_pb, value_from_pb, value_to_pb)

__all__ = ["ACCESS_TO_PB", "ANSWER_TYPE_TO_PB", "CLOCK_TO_PB", "FUNC_TO_PB", "PB_TO_CLOCK", "PB_TO_FUNC", "PB_TO_TYPE",
           "PB_TO_UNIT", "TYPE_TO_PB", "UNIT_TO_PB", "WireAppend", "add_value", "answer_to_pb", "answer_type_to_pb", "batch_decoder",
           "column_to_pb", "int64", "join_from_pb", "parse_append", "query_from_pb", "query_to_pb", "spec_from_pb",
           "spec_to_pb", "stream_info_to_pb", "value_from_pb", "value_to_pb"]

TYPE_TO_PB = {"int64": pb.COLUMN_TYPE_INT64, "float64": pb.COLUMN_TYPE_FLOAT64, "string": pb.COLUMN_TYPE_STRING,
              "boolean": pb.COLUMN_TYPE_BOOLEAN, "timestamp": pb.COLUMN_TYPE_TIMESTAMP, "date": pb.COLUMN_TYPE_DATE}
PB_TO_TYPE = {v: k for k, v in TYPE_TO_PB.items()}  # column types of a schema
ANSWER_TYPE_TO_PB = {**TYPE_TO_PB, "int128": pb.COLUMN_TYPE_INT128}
CLOCK_TO_PB = {Clock.PROCESSING: pb.CLOCK_PROCESSING, Clock.EVENT: pb.CLOCK_EVENT, Clock.MANUAL: pb.CLOCK_MANUAL}
PB_TO_CLOCK = {v: k for k, v in CLOCK_TO_PB.items()} | {pb.CLOCK_UNSPECIFIED: Clock.PROCESSING}
ACCESS_TO_PB = {"probe": pb.ACCESS_PATH_PROBE, "synopsis": pb.ACCESS_PATH_SYNOPSIS, "window": pb.ACCESS_PATH_WINDOW,
                "join": pb.ACCESS_PATH_JOIN}


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
        last_rows=int(spec.last_rows), last_rows_by=tuple(spec.last_rows_by), last_rows_keys=int(spec.last_rows_keys),
        sketches=tuple((s.column, s.kind, int(s.size) or None) for s in spec.sketches),
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
        origin_ms=window.origin_ms, last_rows=window.last_rows, last_rows_by=list(window.last_rows_by),
        last_rows_keys=window.last_rows_keys,
        sketches=[pb.SketchSpec(column=c, kind=k, size=n) for c, k, n in window.sketches])


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


@lru_cache(maxsize=1024)
def _column_types(types: tuple[str, ...]) -> tuple[list[int], list[int], list[int]]:
    """An answer's column types, precisions and scales as the Answer message carries them (the
    same few tuples come back with every answer of a query)."""
    decimals = [decimal_type(t) or (0, 0) for t in types]
    return [answer_type_to_pb(t) for t in types], [d[0] for d in decimals], [d[1] for d in decimals]


class EncodedAnswer(NamedTuple):
    """A cached answer's per-query part, serialized on the entry's first hit and kept with it
    (CachedAnswer.encoded): every field but the call's own (query_id, answered_ms, staleness_ms,
    response_ms)."""

    answer: bytes    # an Answer message
    response: bytes  # a QueryResponse holding it, `cached` set


def _encoded(result: Result, stream: str) -> EncodedAnswer:
    entry = result.cached
    enc = entry.encoded  # type: ignore[union-attr]  # a cached answer's
    if enc is None:
        a = answer_to_pb(result, stream, "")
        for name in ("answered_ms", "staleness_ms", "cached"):
            a.ClearField(name)
        answer = a.SerializeToString()
        a.cached = True
        enc = entry.encoded = EncodedAnswer(answer, pb.QueryResponse(answer=a).SerializeToString())  # type: ignore[union-attr]
    return enc


def cached_answer_to_pb(result: Result, stream: str, query_id: str, out: pb.Answer) -> pb.Answer:
    """An answer from the answer cache (Result.cached): its per-query fields as the entry's
    serialized message (merged in one parse, a fraction of building them value by value), then
    this call's own fields."""
    out.MergeFromString(_encoded(result, stream).answer)
    _call_fields(result, query_id, out)
    out.cached = True
    return out


def _call_fields(result: Result, query_id: str, out: pb.Answer) -> None:
    """A cached answer's fields of this call (those EncodedAnswer leaves out), but response_ms."""
    out.query_id = query_id
    out.answered_ms = result.answered_ms
    if result.staleness_ms is not None:
        out.staleness_ms = result.staleness_ms


def cached_reply(result: Result, stream: str, query_id: str, response_ms: float) -> bytes:
    """A Query's whole reply for an answer from the answer cache, serialized: the entry's
    QueryResponse and, after it, one holding this call's own fields. A parser merges concatenated
    messages (an embedded message field by field, the later scalar winning), so it reads the
    message cached_answer_to_pb builds, with response_ms set; no message is built for the
    per-query part."""
    own = pb.QueryResponse()
    _call_fields(result, query_id, own.answer)
    own.answer.response_ms = response_ms
    return _encoded(result, stream).response + own.SerializeToString()


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
            add_value(values, x)
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
    if result.fallback:
        out.fallback = True
    if result.cached is not None:
        out.cached = True
    out.answered_ms = result.answered_ms
    out.stream = stream
    if result.window_start_ms is not None:
        out.window_start_ms = int64(result.window_start_ms, "window_start_ms")
        out.window_end_ms = int64(result.window_end_ms, "window_end_ms")  # type: ignore[arg-type]  # set with window_start_ms
    if result.staleness_ms is not None:
        out.staleness_ms = result.staleness_ms
    if a.guaranteed is not None:
        out.guaranteed = a.guaranteed
    for row, column, b in a.bounds or ():
        out.bounds.add(row=row, column=column, sketch=b.sketch, confidence=b.confidence,
                       **{k: getattr(b, k) for k in ("rank_error", "estimate", "lower", "upper", "delta")
                          if getattr(b, k) is not None})
    if result.inter_exec_ms is not None:
        out.inter_exec_ms = result.inter_exec_ms
    for sw in result.sources or ():
        w = out.sources.add(stream=sw.stream, slide=int64(sw.slide, "sources.slide"))
        if sw.window_start_ms is not None:
            w.window_start_ms = int64(sw.window_start_ms, "sources.window_start_ms")
        if sw.window_end_ms is not None:
            w.window_end_ms = int64(sw.window_end_ms, "sources.window_end_ms")
    return out
