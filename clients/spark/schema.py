"""Schemas on both sides of a write or a read: a DataFrame's (a Spark StructType) checked against a
stream's when a write starts (SchemaMismatch names every missing, extra and mistyped column), a
stream created from a DataFrame's schema (option create_if_missing), and a stream's schema and
window from DescribeStream, to bind a read query on the driver as the server binds it."""
from __future__ import annotations

from windowstore.store import Schema, WindowSpec

from .options import connect


class SchemaMismatch(ValueError):
    """A DataFrame whose columns do not fit the stream it is written to (raised when the write starts)."""


_INTEGRAL = {"ByteType": 3, "ShortType": 5, "IntegerType": 10, "LongType": 19}  # decimal digits they may need
_ACCEPTS = {"int64": set(_INTEGRAL), "float64": {"DoubleType", "FloatType", *_INTEGRAL},
            "string": {"StringType", "CharType", "VarcharType"}, "boolean": {"BooleanType"},
            "timestamp": {"TimestampType", "TimestampNTZType"}, "date": {"DateType"}}


def _stream_types(spec: dict) -> dict[str, str]:
    return {c["name"]: (f"decimal({c['precision']},{c['scale']})" if c["type"] == "COLUMN_TYPE_DECIMAL" else
                        c["type"].replace("COLUMN_TYPE_", "").lower()) for c in spec["columns"]}


def _fits(store: str, spark_type, event_time: bool) -> bool:
    name = type(spark_type).__name__
    if event_time:  # int64 milliseconds, or a Spark timestamp converted to them
        return name in _INTEGRAL or name in ("TimestampType", "TimestampNTZType")
    if store.startswith("decimal("):
        p, s = map(int, store[8:-1].split(","))
        if name == "DecimalType":  # every value of the Spark type fits exactly
            return spark_type.scale <= s and spark_type.precision - spark_type.scale <= p - s
        return name in _INTEGRAL and _INTEGRAL[name] <= p - s
    return name in _ACCEPTS.get(store, ())


def check_write_schema(schema, spec: dict) -> str | None:
    """Compare a DataFrame's schema (a Spark StructType) with the stream's (DescribeStream's spec);
    raise SchemaMismatch naming every missing, extra and mistyped column and the stream's schema.
    Returns the event-time column when it comes as a Spark timestamp (to convert to milliseconds)."""
    types, time_column = _stream_types(spec), spec["time_column"] or "ts"
    given = {f.name: f.dataType for f in schema.fields}
    missing = [c for c in types if c not in given]
    extra = [f"{c} ({given[c].simpleString()})" for c in given if c not in types]
    mistyped = [f"{c} is {given[c].simpleString()}, the stream's is "
                f"{'int64 milliseconds (event time)' if c == time_column else types[c]}"
                for c in types if c in given and not _fits(types[c], given[c], c == time_column)]
    if missing or extra or mistyped:
        problems = ([f"missing columns: {', '.join(missing)}"] if missing else []) + \
                   ([f"extra columns: {', '.join(extra)}"] if extra else []) + \
                   ([f"mistyped columns: {'; '.join(mistyped)}"] if mistyped else [])
        layout = ", ".join(f"{c} {t}{' (event time, ms)' if c == time_column else ''}" for c, t in types.items())
        raise SchemaMismatch(f"the DataFrame does not fit windowstore stream {spec['name']!r}: {'; '.join(problems)}. "
                             f"The stream's columns: {layout}")
    return time_column if type(given[time_column]).__name__ in ("TimestampType", "TimestampNTZType") else None


def describe(target, stream: str) -> dict:
    with connect(target) as ws:
        return ws.describe_stream(stream)["spec"]


_STORE_TYPE = {"LongType": "int64", "IntegerType": "int64", "ShortType": "int64", "ByteType": "int64",
               "DoubleType": "float64", "FloatType": "float64", "StringType": "string", "CharType": "string",
               "VarcharType": "string", "BooleanType": "boolean", "TimestampType": "timestamp",
               "TimestampNTZType": "timestamp", "DateType": "date"}


def store_schema(schema, time_column: str) -> dict[str, str]:
    """The stream schema a DataFrame's (Spark StructType) columns make: the event-time column int64
    milliseconds (a Spark timestamp is converted when written), each other column its store type;
    SchemaMismatch naming a column no store type holds."""
    out, bad = {}, []
    for f in schema.fields:
        name = type(f.dataType).__name__
        if f.name == time_column:
            ok = name in _INTEGRAL or name in ("TimestampType", "TimestampNTZType")
            typ = "int64"
        elif name == "DecimalType":
            ok, typ = f.dataType.precision <= 18, f"decimal({f.dataType.precision},{f.dataType.scale})"
        else:
            typ = _STORE_TYPE.get(name)  # type: ignore[assignment]  # None: not ok, never stored
            ok = typ is not None
        if ok:
            out[f.name] = typ
        else:
            bad.append(f"{f.name} ({f.dataType.simpleString()})")
    if time_column not in out and not bad:
        bad.append(f"no event-time column {time_column!r}")
    if bad:
        raise SchemaMismatch(f"cannot create a stream for this DataFrame: {', '.join(bad)} "
                             "(event time: a long of ms or a timestamp; decimals: at most 18 digits)")
    return out


def describe_or_create(target, stream: str, schema, opts: dict) -> dict:
    """The stream's spec; with option create_if_missing, a stream that does not exist is created
    first, its schema from the DataFrame's and its window from the options."""
    from ..errors import NotFound

    try:
        return describe(target, stream)
    except NotFound:
        if not opts.get("create_if_missing"):
            raise
    with connect(target) as ws:
        ws.create_stream(stream, **creation(schema, opts))  # exist_ok: another writer may have created it
        return ws.describe_stream(stream)["spec"]


def creation(schema, opts: dict) -> dict:
    """create_stream's arguments for option create_if_missing: the columns from the DataFrame's
    schema, the window from the options (on a cluster target also `partitions`, `partition_by` and
    `origin_ms`, for a partitioned stream)."""
    if "subwindows" not in opts or ("subwindow_ms" in opts) == ("subwindow_rows" in opts):
        raise ValueError("create_if_missing needs option subwindows and one of subwindow_ms or subwindow_rows")
    time_column = opts.get("time_column", "ts")
    return dict(schema=store_schema(schema, time_column), subwindows=opts["subwindows"],
                subwindow_ms=opts.get("subwindow_ms"), subwindow_rows=opts.get("subwindow_rows"),
                clock=opts.get("clock", "processing"), group_by=column_list(opts.get("group_by", "")),
                allowed_lateness_ms=opts.get("allowed_lateness_ms", 0), time_column=time_column, exist_ok=True)


def column_list(option: str) -> list[str]:
    """A comma-separated option's names."""
    return [g.strip() for g in option.split(",") if g.strip()]


def _schema_and_window(spec: dict) -> tuple[Schema, WindowSpec]:
    """A stream's schema and window from DescribeStream, to bind a query on the Spark driver."""
    columns = {c["name"]: (f"decimal({c['precision']},{c['scale']})" if c["type"] == "COLUMN_TYPE_DECIMAL" else
                           c["type"].replace("COLUMN_TYPE_", "").lower()) for c in spec["columns"]}
    window = WindowSpec(subwindows=spec["subwindows"], subwindow_ms=spec["subwindow_ms"] or None,
                        subwindow_rows=spec["subwindow_rows"] or None,
                        clock=spec["clock"].replace("CLOCK_", "").lower().replace("unspecified", "processing"),
                        allowed_lateness_ms=spec["allowed_lateness_ms"], group_by=tuple(spec["group_by"]),
                        topk=spec["topk"] or 16,
                        sketches=tuple((s["column"], s["kind"], s["size"]) for s in spec.get("sketches", ())))
    return Schema.of(columns, spec["time_column"] or "ts"), window
