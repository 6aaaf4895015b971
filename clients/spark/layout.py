"""A read query bound on the Spark driver, as the server binds it: the answer's columns typed for
Spark (with the provenance columns META_COLUMNS), which values need converting (exact sums,
timestamps, dates, decimals, event time), which output columns a filter may be pushed on, and an
answer's rows converted, as Python rows (streaming reads) or as one Arrow batch (batch reads)."""
from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable, Mapping

import pyarrow as pa

from windowstore.store import bind, parse_query
from windowstore.store.join_binder import bind_join
from windowstore.store.parser import parse_statement
from windowstore.store.query import JoinQuery, Query

from .options import _READ_OPTIONS, _connection, connect, parse_options
from .partitioned import cluster_nodes, describe_on_cluster, security_options
from .schema import _schema_and_window

META_COLUMNS = [("_slide", "LONG"), ("_window_start_ms", "LONG"), ("_window_end_ms", "LONG"),
                ("_staleness_ms", "DOUBLE"), ("_response_ms", "DOUBLE"), ("_restarts", "INT"), ("_policy", "STRING"),
                ("_bounds", "STRING")]  # _bounds: the row's approximate cells' error bounds as JSON (else null)
# int128: exact integer sums (SUM over int64 never wraps), as DuckDB exports its HUGEINT to Arrow.
# boolean, timestamp (the store's microseconds since the epoch, UTC), date (days since the epoch) and
# decimal(p,s) answer columns are Spark's BOOLEAN, TIMESTAMP, DATE and DECIMAL(p,s).
_SPARK_TYPES = {"int64": "LONG", "float64": "DOUBLE", "string": "STRING", "int128": "DECIMAL(38,0)",
                "boolean": "BOOLEAN", "timestamp": "TIMESTAMP", "date": "DATE"}


def _spark_type(t: str) -> str:
    return f"DECIMAL{t[7:].upper()}" if t.startswith("decimal(") else _SPARK_TYPES[t]


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_CONVERT: dict[str, Callable[[Any], Any]] = {"decimal": Decimal, "timestamp": lambda us: _EPOCH + datetime.timedelta(microseconds=us),
            "event_time": lambda ms: _EPOCH + datetime.timedelta(milliseconds=ms),
            "date": lambda days: _EPOCH.date() + datetime.timedelta(days=days)}
_KINDS = {"timestamp": "timestamp", "date": "date", "int128": "decimal"}
_SAME_TYPE = ("min", "max", "quantile")  # aggregates whose result is one of the column's values


@dataclass
class _Layout:
    """A read query bound on the driver: its answer columns, their conversions, and what Spark may push."""

    query: Query | JoinQuery                # the parsed query
    spec: dict                              # the stream's spec (DescribeStream)
    columns: list[tuple[str, str]]          # (label, Spark type)
    conversions: list[tuple[int, str]]      # (index, kind) of the values to convert for Spark
    pushable: dict[str, tuple[str, str]]    # output label -> (stream column, literal kind) a filter may name
    n_q: int = 1                            # sub-windows the query reads
    projection: bool = False                # a plain projection without ORDER BY / LIMIT: split by sub-windows
    join: bool = False                      # a join of several streams (the streaming reader only)


def _answer_layout(options: Mapping[str, str]) -> _Layout:
    """The answer's columns [(label, Spark type)] typed from the stream's schema (the query bound on
    the driver as the server binds it), and (index, kind) of those whose values need converting.
    With event_time_as_timestamp, the event-time column's values (the GROUP BY key, MIN, MAX,
    QUANTILE / MEDIAN of it: int64 milliseconds) come as TIMESTAMP."""
    opts = parse_options(options, _READ_OPTIONS)
    if "query" not in opts:
        raise ValueError("the windowstore reader needs option('query', 'SELECT ...')")
    statement = parse_statement(opts["query"])
    if isinstance(statement, JoinQuery):
        return _join_layout(opts, statement)
    query = parse_query(opts["query"])
    nodes = cluster_nodes(opts.get("target", ""))
    if nodes:  # a cluster: bound against the stream's (a partitioned stream's partition 0's) spec
        spec = describe_on_cluster(nodes, query.stream, security_options(_connection(opts)))
    else:
        with connect(_connection(opts)) as ws:
            spec = ws.describe_stream(query.stream)["spec"]
    schema, window = _schema_and_window(spec)
    if query.expr is not None:  # a query with expressions (expr_query.py): its answer's columns, nothing pushed down
        from windowstore.store.expr_query import compile_query
        compiled, _, n_q, _ = compile_query(query, schema, window)
        cols, conversions = [], []
        for i, (label, t) in enumerate(zip(compiled.labels, compiled.types)):
            cols.append((label, _spark_type(t)))
            if _KINDS.get(t):
                conversions.append((i, _KINDS[t]))
        return _Layout(query, spec, cols, conversions, {}, n_q, False)
    bound = bind(query, schema, window)
    event_time = set()
    if opts.get("event_time_as_timestamp") and not bound.outer and bound.temporal is None:
        for i, it in enumerate(bound.items):
            key = bound.projection[i] if bound.projection else bound.group_keys[it.key] if bound.group_keys else None
            src = key if it.agg is None else (
                bound.aggs[it.agg].column if bound.aggs[it.agg].fn.name in _SAME_TYPE else None)
            if src == schema.time_column:
                event_time.add(i)
    cols, conversions = [], []
    for i, (label, t) in enumerate(zip(bound.columns, bound.types)):
        if i in event_time:
            cols.append((label, "TIMESTAMP"))
            conversions.append((i, "event_time"))
            continue
        cols.append((label, _spark_type(t)))
        kind = "decimal" if t.startswith("decimal(") else _KINDS.get(t)
        if kind:
            conversions.append((i, kind))
    if bound.temporal is not None:  # over coalesced intervals (store/temporal.py): one partition, since
        # runs cross sub-windows; only a GROUP BY key's filter selects whole groups of readings
        keys = bound.temporal.keys
        pushable_keys = {o.label: (keys[o.ref], schema.types[keys[o.ref]]) for o in bound.temporal.outs
                         if o.kind == "key" and bound.limit is None}
        return _Layout(query, spec, cols, conversions, pushable_keys, bound.n_q, False)
    # A filter on the GROUP BY key's output column selects the same groups as that filter on the rows
    # (not after LIMIT, nor on a sub-query's outer aggregates): those go into WHERE.
    # A projection's filters all go into WHERE.
    pushable: dict[str, tuple[str, str]] = {}
    if bound.limit is None and not bound.outer and not bound.approximate:
        for i, it in enumerate(bound.items):
            if it.agg is None:  # (GROUP BY several columns, SELECT DISTINCT: each key item its own column)
                column = bound.projection[i] if bound.projection else bound.group_keys[it.key]
                pushable.setdefault(it.label, (column, "event_time" if i in event_time else schema.types[column]))
    # a projection is split by sub-windows, unless ORDER BY or LIMIT needs all of its rows at once
    split = bool(bound.projection) and not bound.projection_order and bound.limit is None
    return _Layout(query, spec, cols, conversions, pushable, bound.n_q, split)


def _join_layout(opts: dict, query: JoinQuery) -> _Layout:
    """A join's answer columns, typed from every joined stream's schema (bound on the driver as the
    server binds it). Nothing is pushed down; the provenance columns describe the first source."""
    with connect(_connection(opts)) as ws:
        specs = {name: ws.describe_stream(name)["spec"] for name in query.streams}
    bound = bind_join(query, {name: _schema_and_window(spec) for name, spec in specs.items()})
    cols, conversions = [], []
    for i, (label, t) in enumerate(zip(bound.columns, bound.types)):
        cols.append((label, _spark_type(t)))
        kind = "decimal" if t.startswith("decimal(") else _KINDS.get(t)
        if kind:
            conversions.append((i, kind))
    return _Layout(query, specs[query.streams[0]], cols, conversions, {}, join=True)


def _answer_rows(a, converted: list[tuple[int, str]]):
    """An answer's rows as Spark rows: its columns (exact sums as Decimal, timestamps and dates as
    Python datetimes and dates), then its provenance."""
    meta = (a.slide, a.window_start_ms, a.window_end_ms, a.staleness_ms, a.response_ms, a.restarts, a.policy)
    bounds = _row_bounds(a)
    for r, row in enumerate(a.rows):
        if converted:
            row = list(row)
            for i, kind in converted:
                row[i] = None if row[i] is None else _CONVERT[kind](row[i])
        yield tuple(row) + meta + (bounds[r],)


def _row_bounds(a) -> list[str | None]:
    """Per answer row, the error bounds of its approximate cells (docs/approximate.md) as JSON: a
    list of {"column": label, "sketch", "confidence", and "rank_error" or "lower"/"upper"...}."""
    per_row: list[list[dict]] = [[] for _ in a.rows]
    for b in getattr(a, "bounds", None) or ():
        cell = {k: v for k, v in vars(b).items() if v is not None and k not in ("row", "column")}
        per_row[b.row].append({"column": a.columns[b.column], **cell})
    return [json.dumps(cells) if cells else None for cells in per_row]


def _answer_batch(a, conversions: list[tuple[int, str]], spark_schema) -> pa.RecordBatch:
    """An answer as one Arrow record batch of the reader's schema (Spark's Arrow form of it)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    target = to_arrow_schema(spark_schema, timezone="UTC")
    kinds = dict(conversions)
    n = len(a.rows)
    cols = list(zip(*a.rows)) if a.rows else [()] * len(a.columns)
    arrays = []
    for i, values in enumerate(cols):
        t = target.field(i).type
        kind = kinds.get(i)
        if kind == "timestamp":
            arrays.append(pa.array(values, pa.int64()).cast(t))
        elif kind == "event_time":
            arrays.append(pa.array([None if v is None else v * 1000 for v in values], pa.int64()).cast(t))
        elif kind == "date":
            arrays.append(pa.array(values, pa.int32()).cast(t))
        elif kind == "decimal":
            arrays.append(pa.array([None if v is None else Decimal(v) for v in values], t))
        else:
            arrays.append(pa.array(values, t))
    meta = (a.slide, a.window_start_ms, a.window_end_ms, a.staleness_ms, a.response_ms, a.restarts, a.policy)
    for j, value in enumerate(meta):
        arrays.append(pa.array([value] * n, target.field(len(cols) + j).type))
    arrays.append(pa.array(_row_bounds(a), target.field(len(cols) + len(meta)).type))
    return pa.RecordBatch.from_arrays(arrays, schema=target)
