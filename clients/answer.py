"""Answers as the SDK returns them."""
from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from windowstore.v1 import windowstore_pb2 as pb

_ACCESS = {pb.ACCESS_PATH_PROBE: "probe", pb.ACCESS_PATH_SYNOPSIS: "synopsis", pb.ACCESS_PATH_WINDOW: "window",
           pb.ACCESS_PATH_JOIN: "join"}
_TYPES = {pb.COLUMN_TYPE_INT64: "int64", pb.COLUMN_TYPE_FLOAT64: "float64", pb.COLUMN_TYPE_STRING: "string",
          pb.COLUMN_TYPE_INT128: "int128", pb.COLUMN_TYPE_BOOLEAN: "boolean", pb.COLUMN_TYPE_TIMESTAMP: "timestamp",
          pb.COLUMN_TYPE_DATE: "date"}
_INT64 = (-(2**63), 2**63 - 1)


def _value(v: pb.Value):
    """A cell as Python: None (NULL), bool, int (exact, also beyond 64 bits), float or str."""
    kind = v.WhichOneof("kind")
    if kind is None:
        return None
    if kind == "int128_value":
        return v.int128_value.high * 2**64 + v.int128_value.low
    if kind == "decimal_value":
        d = Decimal(v.decimal_value)
        return int(d) if d == d.to_integral_value() else d
    return getattr(v, kind)


def _decimal_value(v: pb.Value):
    """A DECIMAL cell: a Decimal with the column's scale (as the server wrote it), or None."""
    kind = v.WhichOneof("kind")
    if kind is None:
        return None
    return Decimal(v.decimal_value) if kind == "decimal_value" else Decimal(_value(v))


@dataclass(frozen=True)
class StreamWindow:
    """What a join answer reflects of one joined stream."""

    stream: str
    slide: int                     # newest slide of the stream read (-1: its window was empty)
    window_start_ms: int | None
    window_end_ms: int | None


@dataclass(frozen=True)
class Bound:
    """How far the approximate cell rows[row][column] may be from the truth (docs/approximate.md):
    APPROX_QUANTILE (sketch "kll"): its true normalized rank lies within q +- rank_error;
    APPROX_COUNT_DISTINCT ("hll", "cpc"): the true count lies in [lower, upper]; APPROX_TOP_K
    ("frequent"): the value's true count lies in [lower, upper], `estimate` its estimate; each with
    probability `confidence`. APPROXIMATE over the top-k lists ("top-k lists"): the key's true COUNT
    or SUM lies in [lower, upper] (always); `delta` as in the thesis's Algorithm 6."""

    row: int
    column: int
    sketch: str
    confidence: float
    rank_error: float | None = None
    estimate: float | None = None
    lower: float | None = None
    upper: float | None = None
    delta: float | None = None  # APPROXIMATE (sketch "top-k lists"): the most a key on no list can have


@dataclass
class Answer:
    columns: list[str]
    rows: list[tuple]
    slide: int                     # newest slide reflected (-1: empty window)
    window_start_ms: int | None
    window_end_ms: int | None
    staleness_ms: float | None
    response_ms: float             # server-side wall clock: the call's arrival to its answer (periodic: see the proto)
    restarts: int
    policy: str
    access: str
    exact: bool
    guaranteed: bool | None
    query_id: str
    execution: int
    late_slides: int
    inter_exec_ms: float | None
    answered_ms: float
    stream: str
    # per column: int64, int128, float64, string, boolean, timestamp (rows hold microseconds since the
    # epoch, UTC), date (rows hold days since the epoch) or decimal(p,s) (rows hold Decimals)
    types: list[str] = field(default_factory=list)
    # A join (access "join"): every joined stream's slide and window bounds, FROM order; `stream`,
    # `slide` and the window bounds above are its first source's stream's.
    sources: list[StreamWindow] = field(default_factory=list)
    # A periodic answer from a shared execution (docs/sharing.md): how many slides before its SLIDE
    # it came (it ran with its group), and the group; 0 and "" when it ran on its own.
    early_slides: int = 0
    group: str = ""
    # Under ttu: aborted by slides more than --fallback-after times, this execution held its
    # windows' slides until it committed (the answer is still of the window at its commit).
    fallback: bool = False
    # A one-time answer the server took from its answer cache: the window had not changed since the
    # same query computed it (the answer, slide and window bounds are what computing it gives).
    cached: bool = False
    # A partitioned stream's answer given with partial=True: the partitions it leaves out (they did
    # not answer); empty when every partition's rows are in it.
    missing_partitions: list[int] = field(default_factory=list)
    # A scatter-gather answer: each partition's query id on its server (its transaction in that
    # server's history), so the partition reads can be checked as one (txn.checker.check_partitioned).
    partition_queries: dict[int, str] = field(default_factory=dict)
    # Approximate cells (APPROX_QUANTILE, APPROX_COUNT_DISTINCT, APPROX_TOP_K): one Bound each.
    bounds: list[Bound] = field(default_factory=list)
    # A partition's answer asked for its sketches (QueryRequest / RegisterQueryRequest.return_sketches):
    # each sketch aggregate's merged sketch, as pb.MergedSketch, for the merge (sketch_merge.py).
    sketches: list = field(default_factory=list, repr=False)

    @classmethod
    def from_pb(cls, a: pb.Answer) -> "Answer":
        # (every call of the SDK's query goes through here: one pass, fields read once)
        column_types = a.column_types
        types = [_TYPES.get(t, "?") for t in column_types]
        if pb.COLUMN_TYPE_DECIMAL in column_types:
            precisions, scales = a.column_precisions, a.column_scales
            for i, t in enumerate(column_types):
                if t == pb.COLUMN_TYPE_DECIMAL:
                    p = precisions[i] if i < len(precisions) else 38
                    types[i] = f"decimal({p},{scales[i] if i < len(scales) else 0})"
            decimal = {i for i, t in enumerate(types) if t.startswith("decimal(")}
            rows = [tuple(_decimal_value(v) if i in decimal else _value(v) for i, v in enumerate(r.values))
                    for r in a.rows]
        else:
            rows = [tuple(map(_value, r.values)) for r in a.rows]
        has = a.HasField
        return cls(
            columns=list(a.columns), rows=rows, slide=a.slide,
            window_start_ms=a.window_start_ms if has("window_start_ms") else None,
            window_end_ms=a.window_end_ms if has("window_end_ms") else None,
            staleness_ms=a.staleness_ms if has("staleness_ms") else None,
            response_ms=a.response_ms, restarts=a.restarts, policy=a.policy, access=_ACCESS.get(a.access, "?"),
            exact=a.exact, guaranteed=a.guaranteed if has("guaranteed") else None, query_id=a.query_id,
            execution=a.execution, late_slides=a.late_slides,
            inter_exec_ms=a.inter_exec_ms if has("inter_exec_ms") else None,
            answered_ms=a.answered_ms, stream=a.stream, types=types,
            sources=[StreamWindow(s.stream, s.slide, s.window_start_ms if s.HasField("window_start_ms") else None,
                                  s.window_end_ms if s.HasField("window_end_ms") else None)
                     for s in a.sources],
            early_slides=a.early_slides, group=a.group, fallback=a.fallback, cached=a.cached,
            bounds=[Bound(b.row, b.column, b.sketch, b.confidence,
                          *(getattr(b, k) if b.HasField(k) else None for k in ("rank_error", "estimate", "lower", "upper", "delta")))
                    for b in a.bounds],
            sketches=list(a.sketches))

    def to_arrow(self):
        """A pyarrow Table typed from the answer's column types; exact integer sums (int128) as
        decimal128(38, 0), as DuckDB exports its HUGEINT; timestamp as timestamp[us, UTC], date as date32."""
        import pyarrow as pa

        arrow = {"int64": pa.int64(), "float64": pa.float64(), "string": pa.string(), "int128": pa.decimal128(38, 0),
                 "boolean": pa.bool_()}
        cols: list = list(zip(*self.rows)) if self.rows else [[] for _ in self.columns]
        types = self.types if len(self.types) == len(self.columns) else [None] * len(self.columns)
        temporal = {"timestamp": (pa.int64(), pa.timestamp("us", tz="UTC")), "date": (pa.int32(), pa.date32())}
        for t in types:
            if t and t.startswith("decimal("):  # decimal(p,s): Arrow decimal128 of that precision and scale
                arrow[t] = pa.decimal128(*map(int, t[8:-1].split(",")))
        return pa.table({name: pa.array(values, temporal[t][0]).cast(temporal[t][1]) if t in temporal else
                         pa.array([Decimal(v) if t == "int128" and v is not None else v for v in values], type=arrow.get(t))  # type: ignore[arg-type]  # no type known: inferred
                         for name, values, t in zip(self.columns, cols, types)})

    def to_pandas(self):
        """A DataFrame; an int128 column is int64 when every value fits, else Python ints (exact); a
        boolean column has pandas' nullable "boolean" dtype (NULL as pd.NA)."""
        import pandas as pd

        df = pd.DataFrame(self.rows, columns=self.columns)
        for name, t in zip(self.columns, self.types):
            if t == "int128":
                values = df[name].tolist()
                exact = all(v is None or _INT64[0] <= v <= _INT64[1] for v in values) and None not in values
                df[name] = pd.Series(values, dtype="int64" if exact else "object")
            elif t == "boolean":
                df[name] = pd.Series(df[name].tolist(), dtype="boolean")
            elif t in ("timestamp", "date"):  # datetime64[us, UTC] / datetime64 dates (NaT for NULL)
                df[name] = self.to_arrow().column(name).to_pandas(date_as_object=False)
        return df
