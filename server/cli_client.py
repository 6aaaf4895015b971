"""The client commands of `windowstore`, named as the SDK names its calls: create-stream,
drop-stream, list-streams, describe, append, slide, query, explain, register, unregister,
list-queries, subscribe, answers, stats, and the interactive `sql` shell (cli_sql.py). Each is a thin use of the
SDK (windowstore.clients) printed by cli_output.py with `--output table|csv|json`; cli.py builds the
parser and owns `serve` and the offline commands.

Every command's --timeout is a deadline for the whole command: each call and retry gets what is
left of it. The server is --target, else $WINDOWSTORE_TARGET, else 127.0.0.1:50051; the token is
--token, else $WINDOWSTORE_TOKEN."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Iterator

from . import cli_output as out

FORMATS = ("csv", "parquet", "jsonl", "arrow")
APPEND_BATCH_ROWS = 100_000
_ARROW_TYPES = {"COLUMN_TYPE_INT64": "int64", "COLUMN_TYPE_FLOAT64": "float64", "COLUMN_TYPE_STRING": "string",
                "COLUMN_TYPE_BOOLEAN": "boolean", "COLUMN_TYPE_TIMESTAMP": "timestamp", "COLUMN_TYPE_DATE": "date",
                "COLUMN_TYPE_DECIMAL": "decimal"}


def client(args):
    from windowstore.clients import Client

    class DeadlineClient(Client):
        """Its `timeout` is what is left of one deadline, set when it is given: each call, and each
        retry of one, gets the rest of the command's --timeout, not a fresh one."""

        @property
        def timeout(self) -> float | None:
            return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

        @timeout.setter
        def timeout(self, seconds: float | None) -> None:
            self._deadline = None if seconds is None else time.monotonic() + seconds

    return DeadlineClient(args.target, timeout=args.timeout, tls=args.tls, ca=args.tls_ca, cert=args.tls_cert,
                          key=args.tls_key, token=args.token or os.environ.get("WINDOWSTORE_TOKEN"))


def with_errors(fn):
    """A command's errors as one line on stderr (`error (CODE): message`) and exit status 1."""
    def run(args) -> int:
        import pyarrow as pa

        from windowstore.clients import WindowStoreError

        try:
            return fn(args)
        except WindowStoreError as e:
            print(f"error ({e.code.name}): {e.message}", file=sys.stderr)
            return 1
        except (OSError, ValueError, pa.ArrowException) as e:  # a file to append that cannot be read or parsed
            print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130
    return run


# -- streams -------------------------------------------------------------------------------------

def parse_schema(text: str) -> dict[str, str]:
    """`ts:int64,src:string,bytes:decimal(10,2)` -> {name: type} (commas inside parentheses kept)."""
    items, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        depth += (ch == "(") - (ch == ")")
        cur += ch
    items.append(cur)
    schema = {}
    for item in items:
        name, sep, typ = item.strip().partition(":")
        if not sep or not name.strip() or not typ.strip():
            raise ValueError(f"--schema: {item.strip()!r} is not name:type (e.g. ts:int64,src:string)")
        schema[name.strip()] = typ.strip()
    return schema


def _stream_row(info: dict) -> dict:
    spec = info["spec"]
    size = f"{spec['subwindow_ms']} ms" if spec.get("subwindow_ms") else f"{spec['subwindow_rows']} rows"
    return {"stream": spec["name"], "clock": spec["clock"].removeprefix("CLOCK_").lower(),
            "subwindows": spec["subwindows"], "subwindow": size, "latest_slide": info["latest_slide"],
            "window_start_ms": info["window_start_ms"], "window_end_ms": info["window_end_ms"],
            "window_rows": info["window_rows"], "buffered_rows": info["buffered_rows"],
            "state": f"stopped: {info['stopped']}" if info.get("stopped") else "running"}


def parse_sketches(specs: list[str]) -> dict:
    """--sketch COLUMN=KIND[:SIZE] flags as the SDK's sketches mapping."""
    out: dict = {}
    for spec in specs:
        column, eq, how = spec.partition("=")
        kind, colon, size = how.partition(":")
        if not eq or not column or not kind or (colon and not size.isdigit()):
            raise SystemExit(f"--sketch takes COLUMN=KIND[:SIZE] (e.g. bytes=kll:200), got {spec!r}")
        out.setdefault(column, []).append((kind, int(size) if colon else 0))  # (the server refuses two of a family)
    return out


@with_errors
def create_stream(args) -> int:
    schema = parse_schema(args.schema)
    partitioned = {}
    if args.partitions is not None or args.partition_by:
        partitioned = {"partitions": args.partitions,
                       "partition_by": [c for c in (args.partition_by or "").split(",") if c],
                       "origin_ms": args.origin_ms}
    if args.last_rows:  # partitioned windows, [PARTITION BY a ROWS n] (docs/windows-session.md)
        partitioned.update(last_rows=args.last_rows, last_rows_keys=args.last_rows_keys,
                           last_rows_by=[c for c in (args.last_rows_by or "").split(",") if c])
    with cluster_client(args) if "partitions" in partitioned or "," in (args.target or "") else client(args) as ws:
        info = ws.create_stream(args.name, schema, subwindows=args.subwindows, subwindow_ms=args.subwindow_ms,
                                subwindow_rows=args.subwindow_rows, clock=args.clock,
                                group_by=[g for g in (args.group_by or "").split(",") if g],
                                allowed_lateness_ms=args.allowed_lateness_ms, time_column=args.time_column,
                                topk=args.topk, exist_ok=args.exist_ok, **partitioned,
                                **({"sketches": parse_sketches(args.sketch)} if args.sketch else {}),
                                **({"replication": args.replication, "acks": args.acks or ""}
                                   if args.replication is not None or args.acks else {}))
    out.records([_stream_row(i) for i in info["streams"]] if "streams" in info else [_stream_row(info)],
                args.output, utc=args.utc)
    return 0


def _replica_row(st: dict) -> dict:
    return {"stream": st["stream"], "role": st["role"].removeprefix("REPLICA_ROLE_").lower(), "epoch": st["epoch"],
            "leader": st["leader"], "replicas": ",".join(map(str, st["replicas"])), "acks": st["acks"],
            "end_offset": st["end_offset"], "high_watermark": st["high_watermark"],
            "applied_offset": st["applied_offset"], "applied_slide": st["applied_slide"],
            "in_sync": ",".join(map(str, st["in_sync"])), "lag_records": st["lag_records"]}


@with_errors
def replica_role(args) -> int:
    """Make the server of --target the leader or a follower of a replicated stream (by hand: static roles)."""
    with client(args) as ws:
        st = ws.set_replica_role(args.stream, args.role, args.epoch, leader=args.leader or 0,
                                 replicas=[int(n) for n in (args.replicas or "").split(",") if n.strip()])
    out.records([_replica_row(st)], args.output, utc=args.utc)
    return 0


@with_errors
def replica_status(args) -> int:
    with client(args) as ws:
        st = ws.replica_status(args.stream)
    out.records([_replica_row(st)], args.output, utc=args.utc)
    return 0


def cluster_client(args):
    """The SDK's cluster client over --target's comma-separated addresses (docs/partitions.md); each
    call gets --timeout."""
    from windowstore.clients.partitioned import ClusterClient
    from windowstore.clients.client import default_target

    targets = [t.strip() for t in (args.target or default_target()).split(",") if t.strip()]
    return ClusterClient(targets, timeout=args.timeout, tls=args.tls, ca=args.tls_ca, cert=args.tls_cert,
                         key=args.tls_key, token=args.token or os.environ.get("WINDOWSTORE_TOKEN"))


@with_errors
def drop_stream(args) -> int:
    from windowstore.clients import NotFound

    with client(args) as ws:
        try:
            ws.drop_stream(args.name)
        except NotFound:
            if not args.missing_ok:
                raise
            print(f"stream {args.name!r} did not exist", file=sys.stderr)
            return 0
    print(f"dropped {args.name}", file=sys.stderr)
    return 0


@with_errors
def list_streams(args) -> int:
    with client(args) as ws:
        rows = [_stream_row(i) for i in ws.list_streams()]
    out.records(rows, args.output, utc=args.utc)
    return 0


@with_errors
def describe(args) -> int:
    with client(args) as ws:
        info = ws.describe_stream(args.name)
    if args.output == "json":
        print(json.dumps(info, indent=1))
        return 0
    spec = info["spec"]
    out.records([_stream_row(info)], args.output, utc=args.utc)
    if args.output == "table":
        print()
        cols = [{"column": c["name"], "type": _type_text(c),
                 "": "event time" if c["name"] == spec["time_column"] else
                 ("group by" if c["name"] in spec["group_by"] else "")} for c in spec["columns"]]
        out.records(cols, "table")
    return 0


def _type_text(c: dict) -> str:
    t = _ARROW_TYPES.get(c["type"], c["type"])
    return f"decimal({c['precision']},{c['scale']})" if t == "decimal" else t


# -- append --------------------------------------------------------------------------------------

def _arrow_schema(info: dict):
    import pyarrow as pa

    types = {"int64": pa.int64(), "float64": pa.float64(), "string": pa.string(), "boolean": pa.bool_(),
             "timestamp": pa.timestamp("us", tz="UTC"), "date": pa.date32()}
    fields = []
    for c in info["spec"]["columns"]:
        t = _type_text(c)
        fields.append(pa.field(c["name"], pa.decimal128(c["precision"], c["scale"]) if t.startswith("decimal")
                               else types[t]))
    return pa.schema(fields)


def read_batches(path: str, fmt: str | None, schema, batch_rows: int) -> Iterator:
    """The file's rows as Arrow record batches of at most `batch_rows`, cast to the stream's schema
    (CSV is parsed straight into it). `-` is standard input."""
    import pyarrow as pa

    fmt = fmt or _format_of(path)
    source = sys.stdin.buffer if path == "-" else path
    if fmt == "csv":
        import pyarrow.csv as pacsv

        reader = pacsv.open_csv(source, convert_options=pacsv.ConvertOptions(
            column_types={f.name: f.type for f in schema}), read_options=pacsv.ReadOptions(block_size=1 << 22))
        batches = iter(reader)
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        batches = pq.ParquetFile(source).iter_batches(batch_size=batch_rows)
    elif fmt == "jsonl":
        import pyarrow.json as pajson

        batches = iter(pajson.read_json(source).to_batches(max_chunksize=batch_rows))
    elif fmt == "arrow":
        data = source.read() if path == "-" else open(path, "rb").read()  # type: ignore[union-attr]  # "-": source is stdin
        try:
            reader = pa.ipc.open_file(pa.BufferReader(data))
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
        except pa.ArrowInvalid:
            batches = iter(pa.ipc.open_stream(pa.BufferReader(data)))
    else:
        raise ValueError(f"--format must be one of {', '.join(FORMATS)}")
    for batch in batches:
        t = pa.Table.from_batches([batch])
        missing = [n for n in schema.names if n not in t.column_names]
        if missing:
            raise ValueError(f"{path}: no column {missing[0]!r} (the stream has {', '.join(schema.names)})")
        t = t.select(schema.names).cast(schema)
        for start in range(0, len(t), batch_rows):
            yield t.slice(start, batch_rows)


def _format_of(path: str) -> str:
    for ext, fmt in ((".csv", "csv"), (".parquet", "parquet"), (".pq", "parquet"), (".jsonl", "jsonl"),
                     (".ndjson", "jsonl"), (".json", "jsonl"), (".arrow", "arrow"), (".feather", "arrow"),
                     (".ipc", "arrow")):
        if path.lower().endswith(ext):
            return fmt
    raise ValueError(f"cannot tell the format of {path!r} from its name: give --format ({', '.join(FORMATS)})")


class Progress:
    """Rows sent so far on stderr, rewritten in place, when stderr is a terminal (or --progress)."""

    def __init__(self, total_bytes: int | None, show: bool):
        self.total, self.show, self.t0 = total_bytes, show, time.monotonic()

    def update(self, rows: int, accepted: int, late: int, done_bytes: int | None = None) -> None:
        if not self.show:
            return
        rate = rows / max(1e-9, time.monotonic() - self.t0)
        pct = f"{100 * done_bytes / self.total:5.1f}%  " if self.total and done_bytes is not None else ""
        print(f"\r{pct}{rows:,} rows sent, {accepted:,} accepted, {late:,} late ({rate:,.0f} rows/s)",
              end="", file=sys.stderr, flush=True)

    def end(self) -> None:
        if self.show:
            print(file=sys.stderr)


@with_errors
def append(args) -> int:
    with client(args) as ws:
        schema = _arrow_schema(ws.describe_stream(args.stream))
        size = None if args.file == "-" else os.path.getsize(args.file)
        progress = Progress(size, args.progress or sys.stderr.isatty())
        rows = accepted = late = duplicates = 0
        batch_id = args.first_batch_id
        for table in read_batches(args.file, args.format, schema, args.batch_rows):
            r = ws.append(args.stream, table, writer_id=args.writer_id or "",
                          batch_id=batch_id if args.writer_id else None)
            rows += len(table)
            accepted, late, duplicates = accepted + r.accepted, late + r.late, duplicates + r.duplicate
            batch_id += 1
            progress.update(rows, accepted, late)
        progress.end()
    result = {"stream": args.stream, "rows": rows, "accepted": accepted, "late": late,
              "duplicate_batches": duplicates, "batches": batch_id - args.first_batch_id}
    if args.writer_id:
        result["next_batch_id"] = batch_id
    out.records([result], args.output)
    return 0


@with_errors
def slide(args) -> int:
    with client(args) as ws:
        k = ws.slide(args.stream)
    out.records([{"stream": args.stream, "slide": k}], args.output)
    return 0


# -- queries -------------------------------------------------------------------------------------

@with_errors
def query(args) -> int:
    with client(args) as ws:
        a = ws.query(args.query, priority=args.priority, read_from=args.read_from or "", min_slide=args.min_slide)
    out.answer(a, "json" if args.json else args.output, utc=args.utc)
    return 0


@with_errors
def explain(args) -> int:
    """How a query would run: its access path, what it reads, its aggregates' sources, its sharing."""
    with client(args) as ws:
        e = ws.explain(args.query)
    if args.output == "json":
        print(json.dumps(e, indent=1))
        return 0
    if args.output == "table":
        print(f"access path: {e['access']} on {', '.join(e['streams'])}\n  {e['how']}")
        print(f"window: {e['subwindows']} sub-windows; reads per execution: {e['reads']}"
              + (f"; GROUP BY {', '.join(e['group_by'])}" if e["group_by"] else ""))
        print(f"period: {'every ' + str(e['every_slides']) + ' slides' if e['every_slides'] else 'one-time'}; "
              f"sharing: {e['sharing']}")
        if e["aggregates"]:
            print()
    out.records(e["aggregates"], args.output, columns=["label", "function", "source"])
    return 0


@with_errors
def register(args) -> int:
    with client(args) as ws:
        q = ws.register(args.query, priority=args.priority, key=args.key)
    if args.output == "table":
        print(f"{q.id} (every {q.every_slides} slides)")
    else:
        out.records([{"query_id": q.id, "every_slides": q.every_slides}], args.output)
    return 0


@with_errors
def unregister(args) -> int:
    with client(args) as ws:
        ws.unregister(args.query_id)
    print(f"unregistered {args.query_id}", file=sys.stderr)
    return 0


@with_errors
def list_queries(args) -> int:
    with client(args) as ws:
        items = ws.list_queries(args.stream or "")
    out.records(items, args.output, utc=args.utc)
    return 0


@with_errors
def answers(args) -> int:
    """A periodic query's kept answers, oldest first (what a reader that was away catches up on)."""
    with client(args) as ws:
        got, newest, oldest = ws.read_answers(args.query_id, after_slide=args.after_slide, limit=args.limit)
    if args.output == "json":
        for a in got:
            out.answer(a, "json")
        return 0
    if args.output == "table":
        print(f"-- {len(got)} answers of {args.query_id} kept for slides {oldest}..{newest}")
    for a in got:
        out.answer(a, args.output, utc=args.utc, header=f"-- answer {a.execution}, slide {a.slide}")
    return 0


@with_errors
def subscribe(args) -> int:
    """Until --count answers, the query's end, or --timeout: then 0 if any answer came, else 1."""
    from windowstore.clients import DeadlineExceeded

    with client(args) as ws:
        n = 0
        try:
            for a in ws.subscribe(args.query_id, timeout=ws.timeout, after_slide=args.after_slide):
                out.answer(a, args.output, utc=args.utc, header=f"-- answer {a.execution} of {a.query_id}")
                sys.stdout.flush()
                n += 1
                if args.count and n >= args.count:
                    break
        except DeadlineExceeded:
            if args.timeout is None:
                raise
            if not n:
                print(f"error (DEADLINE_EXCEEDED): no answer within --timeout {args.timeout:g} s", file=sys.stderr)
                return 1
            print(f"-- subscription ended: --timeout {args.timeout:g} s reached after {n} answers", file=sys.stderr)
    return 0


@with_errors
def stats(args) -> int:
    with client(args) as ws:
        s = ws.stats(args.stream or "")
    if args.output == "json":
        print(json.dumps(s, indent=1))
        return 0
    rows = [{"stream": st["stream"], "slides": st["slides"], "accepted_rows": st["accepted_rows"],
             "late_rows": st["late_rows"], "queries": st["queries"], "aborts": st["aborts"],
             "restarts": st["restarts"], "fallbacks": st.get("fallbacks", 0), "staleness_p50_ms": st["staleness_ms"]["p50"],
             "staleness_p99_ms": st["staleness_ms"]["p99"], "response_p50_ms": st["response_ms"]["p50"],
             "response_p99_ms": st["response_ms"]["p99"], "stopped": st.get("stopped") or ""} for st in s["streams"]]
    if args.output == "table":
        print(f"policy {s['policy']}")
    out.records(rows, args.output)
    ac = s.get("answer_cache") or {}
    if args.output == "table" and ac.get("max_entries"):
        print(f"answer cache: {ac.get('hits', 0)} hits, {ac.get('misses', 0)} misses, {ac.get('entries', 0)} entries "
              f"({ac.get('bytes', 0)} bytes; at most {ac['max_entries']} entries, {ac.get('max_bytes', 0)} bytes), "
              f"{ac.get('evictions', 0)} evictions, {ac.get('requests', 0)} requests known by their bytes")
    sh = s.get("sharing") or {}
    if args.output == "table" and sh.get("mode"):
        print(f"sharing {sh['mode']}: {sh['groups']} groups (members {sh['members_per_group'] or '-'}), "
              f"{sh['executions']} shared executions answered {sh['answers']} ({sh['executions_saved']} saved), "
              f"early {sh['early_runs']}, late {sh['late_runs']}, aborts {sh['aborts']}, "
              f"fallbacks {sh.get('fallbacks', 0)}, "
              f"covers saved {sh.get('cover_executions_saved', 0)} executions ({sh.get('cover_reads_saved', 0)} reads), "
              f"{sh.get('join_groups', 0)} join groups answered {sh.get('join_answers', 0)} joins, "
              f"{sh.get('slice_groups', 0)} slices groups answered {sh.get('slice_answers', 0)} windows in "
              f"{sh.get('slice_executions', 0)} executions"
              + (f"; {sh['fallen_back']} running alone since their shared execution failed" if sh.get("fallen_back") else "")
              + (f"; {sh['choices_pending']} groups' choices of periods being made" if sh.get("choices_pending") else ""))
    return 0


# -- the parser ----------------------------------------------------------------------------------

def client_args(p: argparse.ArgumentParser, timeout: float | None = 60.0,
                timeout_help: str = "deadline in seconds for the whole command, retries included (default 60)",
                output: bool = True) -> None:
    p.add_argument("--target", default=None,
                   help="server address (default: $WINDOWSTORE_TARGET, else 127.0.0.1:50051)")
    p.add_argument("--timeout", type=float, default=timeout, help=timeout_help)
    p.add_argument("--tls", action="store_true", help="connect with TLS (system roots unless --tls-ca)")
    p.add_argument("--tls-ca", help="PEM CA certificates to verify the server with (implies --tls)")
    p.add_argument("--tls-cert", help="PEM client certificate (mutual TLS, with --tls-key)")
    p.add_argument("--tls-key", help="PEM private key of --tls-cert")
    p.add_argument("--token", help="bearer token (default: $WINDOWSTORE_TOKEN)")
    if output:
        p.add_argument("--output", "-o", choices=out.OUTPUTS, default="table",
                       help="table (default; times readable), csv or json (values as they are, for scripts)")
        p.add_argument("--utc", action="store_true", help="show times in UTC (default: local time, with its offset)")


def add_commands(sub) -> None:
    cs = sub.add_parser("create-stream", help="create a stream",
                        description="Create a stream: a sliding window of --subwindows sub-windows of "
                                    "--subwindow-ms (or --subwindow-rows) each.")
    cs.add_argument("name")
    cs.add_argument("--schema", required=True, help="columns as name:type,... (types: int64, float64, string, "
                                                    "boolean, timestamp, date, decimal(p,s)); e.g. "
                                                    "ts:int64,src:string,bytes:int64")
    cs.add_argument("--subwindows", type=int, required=True, help="n: sub-windows in the window")
    size = cs.add_mutually_exclusive_group(required=True)
    size.add_argument("--subwindow-ms", type=int, help="sub-window length in ms (time-based)")
    size.add_argument("--subwindow-rows", type=int, help="rows per sub-window (count-based)")
    cs.add_argument("--clock", choices=("processing", "event", "manual"), default="processing",
                    help="when slides happen: on the server's clock (default), as event time passes, or on request")
    cs.add_argument("--group-by", help="columns to keep per-key synopses for, comma-separated")
    cs.add_argument("--allowed-lateness-ms", type=int, default=0, help="event clock: how late a row may be (default 0)")
    cs.add_argument("--time-column", default="ts", help="the int64 event-time column in ms (default ts)")
    cs.add_argument("--topk", type=int, default=16, help="per-key top-k list length per sub-window (default 16)")
    cs.add_argument("--last-rows", type=int, default=0,
                    help="keep this many last rows of each key of --last-rows-by beyond the window "
                         "([PARTITION BY ... ROWS n] queries)")
    cs.add_argument("--last-rows-by", help="the key columns of --last-rows, comma-separated")
    cs.add_argument("--last-rows-keys", type=int, default=0,
                    help="the most keys whose last rows are kept (default 100000); past it appends are refused")
    cs.add_argument("--sketch", action="append", metavar="COLUMN=KIND[:SIZE]",
                    help="a sketch of a column for APPROX_QUANTILE (kll), APPROX_COUNT_DISTINCT (hll, cpc) or "
                         "APPROX_TOP_K (frequent), e.g. --sketch bytes=kll:200 --sketch src=hll:12; repeatable")
    cs.add_argument("--exist-ok", action="store_true",
                    help="a stream of that name created with the same definition is not an error")
    cs.add_argument("--partitions", type=int,
                    help="spread the stream over this many partitions on the servers of --target (comma-separated "
                         "addresses, node 0 first, as in the cluster file), split by --partition-by")
    cs.add_argument("--partition-by", help="the columns whose hash places a row in a partition, comma-separated")
    cs.add_argument("--origin-ms", type=int,
                    help="partitioned stream: the instant (ms) every partition's first sub-window starts at "
                         "(default now; with --clock event, rows before it are late)")
    cs.add_argument("--replication", type=int, help="replicas of the stream (or of each partition) on the servers "
                                                    "of the cluster file, leader first (docs/replication.md)")
    cs.add_argument("--acks", choices=("leader", "all"),
                    help="acknowledge a write once in the leader's log, or in every in-sync replica's log "
                         "(default: all with --replication > 1)")
    client_args(cs)
    cs.set_defaults(func=create_stream)

    rr = sub.add_parser("replica-role", help="make the server of --target the leader or a follower of a replicated "
                                             "stream at an epoch (docs/replication.md)")
    rr.add_argument("stream")
    rr.add_argument("role", choices=("leader", "follower"))
    rr.add_argument("--epoch", type=int, required=True, help="newer than the replica's (a promotion: the old + 1)")
    rr.add_argument("--leader", type=int, help="follower: the leader's node index in the cluster file")
    rr.add_argument("--replicas", help="follower, on a server that holds no replica of the stream yet: its replica "
                                       "nodes, leader first, comma-separated")
    client_args(rr)
    rr.set_defaults(func=replica_role)

    rs = sub.add_parser("replica-status", help="where the --target server's replica of a stream stands")
    rs.add_argument("stream")
    client_args(rs)
    rs.set_defaults(func=replica_status)

    ds = sub.add_parser("drop-stream", help="drop a stream, its rows and its periodic queries")
    ds.add_argument("name")
    ds.add_argument("--missing-ok", action="store_true", help="a stream that does not exist is not an error")
    client_args(ds, output=False)
    ds.set_defaults(func=drop_stream)

    ls = sub.add_parser("list-streams", help="list the streams with their windows")
    client_args(ls)
    ls.set_defaults(func=list_streams)

    de = sub.add_parser("describe", help="a stream's window, columns and state")
    de.add_argument("name")
    client_args(de)
    de.set_defaults(func=describe)

    ap = sub.add_parser("append", help="append rows from a CSV, Parquet, JSON-lines or Arrow file (or stdin)",
                        description="Append a file's rows in batches, cast to the stream's schema; prints the rows "
                                    "accepted and late. Rows become visible to queries at the slide that seals their "
                                    "sub-window.")
    ap.add_argument("stream")
    ap.add_argument("file", help="the file, or - for standard input (then give --format)")
    ap.add_argument("--format", choices=FORMATS, help="default: from the file's extension")
    ap.add_argument("--batch-rows", type=int, default=APPEND_BATCH_ROWS,
                    help=f"rows per Append (default {APPEND_BATCH_ROWS})")
    ap.add_argument("--writer-id", help="idempotency: with it, batches are numbered from --first-batch-id, and "
                                        "appending the same file again with the same numbers adds nothing twice")
    ap.add_argument("--first-batch-id", type=int, default=0, help="the first batch's id (default 0)")
    ap.add_argument("--progress", action="store_true", help="show progress even when stderr is not a terminal")
    client_args(ap)
    ap.set_defaults(func=append)

    sl = sub.add_parser("slide", help="slide a manual-clock stream now; prints the new slide number")
    sl.add_argument("stream")
    client_args(sl)
    sl.set_defaults(func=slide)

    q = sub.add_parser("query", help="run a one-time query and print its answer")
    q.add_argument("query", help="query text, e.g. \"SELECT COUNT(*) FROM packets\"")
    q.add_argument("--priority", type=int, default=0)
    q.add_argument("--read-from", choices=("leader", "follower"),
                   help="follower: a follower replica of a replicated stream may answer (docs/replication.md)")
    q.add_argument("--min-slide", type=int, help="answer only once this slide is applied on the replica asked")
    q.add_argument("--json", action="store_true", help="the same as --output json")
    client_args(q)
    q.set_defaults(func=query)

    ex = sub.add_parser("explain", help="how a query would run, without running it (access path, reads, sharing)")
    ex.add_argument("query", help="query text, one-time or periodic")
    client_args(ex)
    ex.set_defaults(func=explain)

    rg = sub.add_parser("register", help="register a periodic query (needs SLIDE) and print its id")
    rg.add_argument("query", help="e.g. \"SELECT src, SUM(bytes) FROM packets [RANGE 1 min SLIDE 10 s] GROUP BY src\"")
    rg.add_argument("--priority", type=int, default=0)
    rg.add_argument("--key", default=None, help="an idempotency key: run again with the same key, the command prints "
                                                "the query it registered (while registered) instead of registering another")
    client_args(rg)
    rg.set_defaults(func=register)

    ur = sub.add_parser("unregister", help="stop a periodic query")
    ur.add_argument("query_id")
    client_args(ur, output=False)
    ur.set_defaults(func=unregister)

    lq = sub.add_parser("list-queries", help="list the registered periodic queries")
    lq.add_argument("--stream", help="only those reading this stream")
    client_args(lq)
    lq.set_defaults(func=list_queries)

    an = sub.add_parser("answers", help="read a periodic query's kept answers")
    an.add_argument("query_id")
    an.add_argument("--after-slide", type=int, default=-1, help="only answers reflecting a later slide")
    an.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
    client_args(an)
    an.set_defaults(func=answers)

    sb = sub.add_parser("subscribe", help="print a periodic query's answers as they arrive, with staleness")
    sb.add_argument("query_id")
    sb.add_argument("--count", type=int, default=0, help="stop after this many answers (default: never)")
    sb.add_argument("--after-slide", type=int, default=None,
                    help="first the kept answers reflecting a later slide (-1: all kept, such as the registration's "
                         "first answer), then the live ones (default: only answers from now on)")
    client_args(sb, timeout=None, timeout_help=(
        "deadline in seconds for the whole subscription: it ends then, exit status 0 if any answer "
        "arrived, 1 if none did (default: none, until --count answers, the query is unregistered, or Ctrl-C)"))
    sb.set_defaults(func=subscribe)

    stt = sub.add_parser("stats", help="print per-stream statistics")
    stt.add_argument("stream", nargs="?", help="one stream (default: all)")
    client_args(stt)
    stt.set_defaults(func=stats)

    from .cli_sql import add_command
    add_command(sub, client_args)
