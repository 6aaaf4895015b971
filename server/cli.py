"""The `windowstore` command's parser, `serve`, and the commands that need no server
(check-history, simulate, demo). The client commands (create-stream, append, query, sql, ...) are
in cli_client.py."""
from __future__ import annotations

import argparse
import os
import json
import sys


def _serve(args) -> int:

    from .app import serve
    from .config import ServerConfig

    from .oplog import configure

    configure(args.log_format, args.verbose)
    cfg = ServerConfig(host=args.host, port=args.port, policy=args.policy, sharing=args.sharing,
                       max_message_mb=args.max_message_mb,
                       max_decompressed_mb=args.max_decompressed_mb,
                       idempotency_keep=args.idempotency_keep, idempotency_keep_total=args.idempotency_keep_total,
                       max_rows_per_batch=args.max_rows_per_batch, max_concurrent_queries=args.max_concurrent_queries,
                       max_periodic_queries=args.max_periodic_queries, max_subscribers=args.max_subscribers,
                       max_streams=args.max_streams, max_restarts=args.max_restarts, fallback_after=args.fallback_after,
                       history_path=args.history,
                       max_join_rows=args.max_join_rows,
                       history_keep=args.history_keep, workers=args.workers, offload_ms=args.offload_ms,
                       seal_offload_rows=args.seal_offload_rows, read_during_seal=not args.wait_for_seals,
                       answer_cache_entries=args.answer_cache_entries, answer_cache_mb=args.answer_cache_mb,
                       grace_s=args.grace_s,
                       data_dir=args.data_dir, in_memory=args.in_memory, fsync=args.fsync,
                       tls_cert=args.tls_cert, tls_key=args.tls_key, tls_client_ca=args.tls_client_ca,
                       tokens=args.tokens, insecure=args.insecure, metrics_port=args.metrics_port,
                       http_port=args.http_port, slow_query_ms=args.slow_query_ms,
                       client_error_log_limit=args.client_error_log_limit,
                       max_buffered_rows=args.max_buffered_rows, max_staged_mb=args.max_staged_mb,
                       append_order_wait_s=args.append_order_wait_s, background_nice=args.background_nice,
                       max_pending=args.max_pending, max_requests_per_client=args.max_requests_per_client,
                       snapshot_every_bytes=int(args.snapshot_every_mb * (1 << 20)), snapshot_every_s=args.snapshot_every_s,
                       cluster=args.cluster, node=args.node, etcd=args.etcd, etcd_prefix=args.etcd_prefix,
                       lease_ttl_s=args.lease_ttl_s, peer_addresses=tuple(args.peer_address or ()),
                       advertise_address=args.advertise_address or "")
    return serve(cfg)


def _peer_address(text: str) -> tuple[int, str]:
    node, sep, address = text.partition("=")
    if not sep or not node.strip().isdigit() or not _host_port(address):
        raise argparse.ArgumentTypeError(f"expected NODE=HOST:PORT (node 0 or more), got {text[:80]!r}")
    return int(node), address


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number, 0 or more, got {text[:80]!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text[:80]!r}")
    return value


def _host_port(address: str) -> bool:
    host, colon, port = address.rpartition(":")
    return bool(colon and host and port.isdigit())


def _advertise_address(text: str) -> str:
    if not _host_port(text):
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text[:80]!r}")
    return text


def _demo(args) -> int:
    from .demo import run

    return run(duration_s=args.duration_s, rate=args.rows_per_second)


def _check_history(args) -> int:
    from windowstore.txn import check, read_jsonl

    try:
        with open(args.file, encoding="utf-8") as f:
            report = check(read_jsonl(f))
    except (OSError, ValueError) as e:
        print(f"check-history: {e}", file=sys.stderr)
        return 2
    bad = report.violations(args.expect) if args.expect else []
    out = {"summary": report.summary(), "errors": report.errors[:20],
           "violations": [{"stream": v.stream, "txn": v.txn, "level": v.level, "versions": v.versions,
                           "latest_at_commit": v.latest_at_commit, "window_len": v.window_len,
                           **({"streams": v.parts} if v.parts else {})} for v in bad[:20]]}
    print(json.dumps(out, indent=1))
    return 1 if bad or report.errors else 0


def _simulate(args) -> int:
    from windowstore.txn import POLICIES
    from windowstore.txn.simulator import calibrate, run_many

    if args.calibrate:
        print(json.dumps(calibrate()))
        return 0
    out = run_many(args.policy or list(POLICIES), history_dir=args.history_dir,
                   subwindows=args.subwindows, subwindow_ms=args.subwindow_ms, periodic=args.periodic,
                   onetime_rate=args.onetime_rate, duration_s=args.duration_s, seed=args.seed,
                   rows_per_ms=args.rows_per_ms, row_cost_us=args.row_cost_us,
                   read_fixed_us=args.read_fixed_us, seal_row_us=args.seal_row_us, access=args.access)
    if args.json:
        print(json.dumps(out))
    else:
        cols = ["policy", "committed", "abort_pct", "staleness_ms_mean", "onetime_response_ms_mean",
                "inter_exec_ms_mean", "throughput_qps", "max_slide_delay_ms"]
        print("  ".join(f"{c:>24}" for c in cols))
        for r in out["results"]:
            print("  ".join(f"{str(r[c]):>24}" for c in cols))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from importlib.metadata import version  # the installed package's, from its metadata
    ap = argparse.ArgumentParser(prog="windowstore", description="A transactional sliding-window store.")
    ap.add_argument("--version", action="version", version=f"windowstore {version('windowstore')}")
    sub = ap.add_subparsers(dest="command", required=True)

    from windowstore.txn import POLICIES
    from .wal import Fsync
    sv = sub.add_parser("serve", help="run the gRPC server", description="Run the windowstore gRPC server. "
                        "SIGTERM or SIGINT shut it down gracefully: in-flight queries finish, subscribers are told.")
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1, loopback only)")
    sv.add_argument("--port", type=int, default=50051, help="port (default 50051; 0 picks a free one)")
    sv.add_argument("--policy", choices=POLICIES, default="ttu",
                    help="concurrency control: serial, ws, lws, ttu (default; latest-window serializable, fewest aborts) "
                         "or ttu-rescan")
    from windowstore.txn.sharing import SharingMode
    sv.add_argument("--sharing", choices=[m.value for m in SharingMode], default="conservative",
                    help="shared execution of periodic queries (thesis 8.3-8.4; docs/sharing.md): none, aggressive, "
                         "conservative (default: the least CPU measured, bench/sharing_bench.py), hybrid, "
                         "hybrid-late or hybrid-lp")
    sv.add_argument("--max-message-mb", type=int, default=64, help="largest request in MiB (default 64)")
    sv.add_argument("--idempotency-keep", type=int, default=100_000,
                    help="acknowledged batch ids remembered per writer, to recognise replays (default 100000)")
    sv.add_argument("--idempotency-keep-total", type=int, default=1_000_000,
                    help="... and in all; beyond it the largest writers' oldest are forgotten (default 1000000)")
    sv.add_argument("--max-decompressed-mb", type=int, default=512,
                    help="largest Arrow payload once decompressed, in MiB, checked before decompressing (default 512)")
    sv.add_argument("--max-rows-per-batch", type=int, default=1_000_000, help="rows per Append (default 1000000)")
    sv.add_argument("--max-concurrent-queries", type=int, default=256, help="one-time queries in flight (default 256)")
    sv.add_argument("--max-periodic-queries", type=int, default=1000, help="registered periodic queries (default 1000)")
    sv.add_argument("--max-subscribers", type=int, default=256, help="Subscribe streams open at once (default 256)")
    sv.add_argument("--max-streams", type=int, default=1000, help="streams (default 1000)")
    sv.add_argument("--max-join-rows", type=int, default=2_000_000,
                    help="rows a join's result (or any intermediate result) may have; a join that needs more is "
                         "refused with RESOURCE_EXHAUSTED (default 2000000)")
    sv.add_argument("--max-restarts", type=int, default=16,
                    help="restarts of an aborted query before it fails with ABORTED (default 16)")
    sv.add_argument("--fallback-after", type=int, default=2,
                    help="under ttu (ttu-rescan), aborts (merges re-scanned away) after which a query's attempt holds "
                         "its windows, their slides waiting for its commit, so that it answers (default 2; "
                         "docs/concepts.md#policies)")
    sv.add_argument("--history", metavar="FILE", help="also write the scheduler history to FILE (JSON lines)")
    sv.add_argument("--answer-cache-entries", type=_non_negative_int, default=1024,
                    help="one-time answers kept while their window is unchanged: the same query asked again "
                         "before the next slide is answered from it (0: no cache; default 1024)")
    sv.add_argument("--answer-cache-mb", type=_positive_float, default=16.0,
                    help="at most about this many MiB of kept answers (default 16)")
    sv.add_argument("--history-keep", type=int, default=200_000, help="history records kept in memory (a probe's reads are one record; default 200000)")
    sv.add_argument("--workers", type=int, default=4,
                    help="threads that decode large Arrow payloads off the gRPC event loop (default 4)")
    sv.add_argument("--offload-ms", type=float, default=0.25,
                    help="a window scan's read of a sub-window or final merge that took at least this many ms on "
                         "earlier runs of the same query runs on a query thread (one per lane: periodic, one-time), while the event loop goes on "
                         "with slides and other calls; 0: every one; negative: none, all on the event loop "
                         "(default 0.25)")
    sv.add_argument("--seal-offload-rows", type=int, default=100_000,
                    help="a slide of at least this many rows is sealed (concatenated, its synopses built) on the "
                         "seal thread while the event loop goes on serving; queries of its stream that arrive "
                         "meanwhile read the sub-windows installed (default 100000; with --offload-ms negative, "
                         "every seal runs on the event loop)")
    sv.add_argument("--wait-for-seals", action="store_true",
                    help="a query of a stream whose slide is being sealed on the seal thread waits for its "
                         "install (fresher by that sub-window, slower under ingest) instead of reading the "
                         "sub-windows installed")
    sv.add_argument("--grace-s", type=float, default=5.0, help="shutdown grace period in seconds (default 5)")
    sv.add_argument("--data-dir", default=os.environ.get("WINDOWSTORE_DATA_DIR", "windowstore-data"),
                    help="write-ahead log and snapshots (default ./windowstore-data, or $WINDOWSTORE_DATA_DIR)")
    sv.add_argument("--in-memory", action="store_true",
                    help="keep nothing on disk: every stream is lost on restart (tests, benchmarks)")
    sv.add_argument("--fsync", choices=[f.value for f in Fsync], default=Fsync.ALWAYS.value,
                    help="always (default): a write is acknowledged once it is on disk; interval: fsync about once "
                         "a second (up to ~1 s of acknowledged writes at risk on a machine crash); off: the OS decides")
    sv.add_argument("--snapshot-every-mb", type=float, default=256.0,
                    help="take a snapshot after this much log (default 256 MiB), or once the log since the "
                         "last snapshot is as large as that snapshot, whichever is more")
    sv.add_argument("--snapshot-every-s", type=float, default=300.0,
                    help="... or after this many seconds with anything logged (default 300)")
    sv.add_argument("--tls-cert", help="PEM certificate chain: serve TLS (with --tls-key)")
    sv.add_argument("--tls-key", help="PEM private key of --tls-cert")
    sv.add_argument("--tls-client-ca", help="PEM CA certificates: require client certificates signed by them (mutual TLS)")
    sv.add_argument("--tokens", help="JSON file of bearer-token hashes and per-stream grants (see README, Security); "
                                     "re-read when it changes")
    sv.add_argument("--insecure", action="store_true",
                    help="allow listening off loopback without TLS and --tokens (protected mode refuses it otherwise)")
    sv.add_argument("--max-buffered-rows", type=int, default=20_000_000,
                    help="rows one stream may hold waiting for a slide (default 20000000)")
    sv.add_argument("--background-nice", type=int, default=0,
                    help="run the seal, decode and periodic-query threads this many nice steps below the event loop's "
                         "thread, so one-time queries are served first on a busy machine (Linux; default 0: the same)")
    sv.add_argument("--append-order-wait-s", type=float, default=10.0,
                    help="a pipelined Append waits this long for the same writer's batch it follows (after_batch_id) "
                         "before it is refused, ABORTED (default 10)")
    sv.add_argument("--max-staged-mb", type=int, default=1024,
                    help="MiB of rows staged by uncommitted batches, all streams (default 1024)")
    sv.add_argument("--max-pending", type=int, default=2000,
                    help="requests waiting for the engine (queries in flight, writes not yet durable) before new ones get RESOURCE_EXHAUSTED (default 2000)")
    sv.add_argument("--max-requests-per-client", type=int, default=64,
                    help="requests in progress per client (token principal, or connection) (default 64)")
    sv.add_argument("--metrics-port", type=int, help="serve Prometheus metrics at http://HOST:PORT/metrics, with "
                                                      "/healthz and /readyz (0: a free port)")
    sv.add_argument("--http-port", type=int, help="serve the live status page at http://HOST:PORT/ (streams, windows, "
                                                   "periodic queries, staleness and aborts), with /metrics, /healthz "
                                                   "and /readyz (0: a free port; off by default)")
    sv.add_argument("--log-format", choices=("text", "json"), default="text",
                    help="operator log lines on stderr: text (default) or one JSON object per line; one line per "
                         "stream created or dropped, periodic query registered, unregistered or stopped, client "
                         "error, slow query and recovery step")
    sv.add_argument("--slow-query-ms", type=float, default=1000.0,
                    help="log a one-time query answered slower than this, measured at the edge (default 1000)")
    sv.add_argument("--client-error-log-limit", type=_non_negative_int, default=10,
                    help="log at most this many refused calls (client_error) per method and status code in 10 s; "
                         "the rest are counted in one client_error_suppressed line (default 10; 0: log every one)")
    sv.add_argument("--cluster", metavar="FILE",
                    help="a cluster file (TOML: nodes = [\"host:port\", ...]): this server accepts only the "
                         "partitions of partitioned streams that the file places on it (docs/partitions.md)")
    sv.add_argument("--node", type=int, help="this server's index in --cluster's nodes (0 first), or its id with --etcd")
    sv.add_argument("--etcd", metavar="URL",
                    help="an etcd endpoint (http://127.0.0.1:2379), the alternative to --cluster: the partition map, "
                         "leaders, epochs and in-sync sets live there, and this node takes part in its partitions' "
                         "elections (docs/cluster.md)")
    sv.add_argument("--etcd-prefix", default="/windowstore/", help="the cluster's keys in etcd (default /windowstore/)")
    sv.add_argument("--lease-ttl-s", type=int, default=3,
                    help="the leader lease in seconds: a leader that cannot renew it for this long loses its "
                         "partitions to an in-sync replica (default 3)")
    sv.add_argument("--peer-address", metavar="NODE=HOST:PORT", type=_peer_address, action="append",
                    help="fetch from replica node NODE at HOST:PORT instead of the address the cluster file or etcd "
                         "gives it (a proxy in between; repeat per node)")
    sv.add_argument("--advertise-address", metavar="HOST:PORT", type=_advertise_address,
                    help="with --etcd: the address registered for this node, where clients and (without "
                         "--peer-address) replicas reach it (default: where it listens; a proxy in between)")
    sv.add_argument("-v", "--verbose", action="store_true", help="also log the libraries' INFO lines")
    sv.set_defaults(func=_serve)

    from .cli_client import add_commands
    add_commands(sub)
    from .cli_cluster import add_commands as add_cluster_commands
    add_cluster_commands(sub)
    from windowstore.txn.kinds import Level
    ch = sub.add_parser("check-history", help="classify every committed query of a history as LWS, WS only or torn")
    ch.add_argument("file", help="a history: JSON lines as recorded with --history")
    ch.add_argument("--expect", choices=[Level.LWS.value, Level.WS.value], help="exit 1 if any committed query is below this level")
    ch.set_defaults(func=_check_history)

    from windowstore.txn.simulator import DEFAULT_READ_FIXED_US, DEFAULT_ROW_COST_US, DEFAULT_SEAL_ROW_US, Access
    sim = sub.add_parser("simulate", help="run the schedulers in virtual time on the thesis's workload (section 7.5)",
                         description="Runs the real scheduler and store in virtual time with a cost model on the "
                                     "workload of thesis section 7.5.1 and prints, per policy, aborts, staleness, "
                                     "response and inter-execution times, throughput and slide delay.")
    sim.add_argument("--policy", action="append", choices=POLICIES,
                     help="a policy to run (repeatable; default: all five)")
    sim.add_argument("--subwindows", type=int, default=20, help="n, sub-windows per window (default 20)")
    sim.add_argument("--subwindow-ms", type=int, default=1000, help="t, sub-window length in ms (default 1000)")
    sim.add_argument("--periodic", type=int, default=40, help="periodic queries, re-executed continually (default 40)")
    sim.add_argument("--onetime-rate", type=float, default=0.0, help="one-time queries per second, Poisson (default 0)")
    sim.add_argument("--duration-s", type=float, default=None, help="virtual seconds to run (default: one window length)")
    sim.add_argument("--seed", type=int, default=0, help="random seed; same seed, same output (default 0)")
    sim.add_argument("--history-dir", help="write each policy's history to DIR/<policy>.jsonl")
    sim.add_argument("--json", action="store_true", help="print {\"results\": [...]} as JSON")
    sim.add_argument("--rows-per-ms", type=float, default=1.0, help="mean packets per ms (default 1, as the thesis)")
    sim.add_argument("--row-cost-us", type=float, default=DEFAULT_ROW_COST_US,
                     help=f"virtual cost of scanning one row, us (default {DEFAULT_ROW_COST_US}, calibrated here)")
    sim.add_argument("--read-fixed-us", type=float, default=DEFAULT_READ_FIXED_US,
                     help=f"fixed virtual cost of one sub-window read, us (default {DEFAULT_READ_FIXED_US})")
    sim.add_argument("--seal-row-us", type=float, default=DEFAULT_SEAL_ROW_US,
                     help=f"virtual cost of sealing one row in a slide, us (default {DEFAULT_SEAL_ROW_US})")
    sim.add_argument("--access", choices=[a.value for a in Access], default=Access.THESIS.value,
                     help="how queries read the window: 'thesis' (default), as in the thesis, every query reads "
                          "its sub-windows one at a time, each read costed per row, so slides meet running "
                          "queries; 'store', the path this store's planner picks (the workload's GROUP BYs are "
                          "probes of running per-key totals: one atomic read, costed --read-fixed-us, never "
                          "interrupted by a slide). With --row-cost-us 8 'thesis' is the thesis's regime")
    sim.add_argument("--calibrate", action="store_true", help="measure this machine's costs and print them")
    sim.set_defaults(func=_simulate)

    dm = sub.add_parser("demo", help="server + Spark feeder + periodic and one-time queries, live, for about a minute")
    dm.add_argument("--duration-s", type=float, default=60.0, help="how long to show answers (default 60)")
    dm.add_argument("--rows-per-second", type=int, default=20_000, help="packets per second fed by Spark (default 20000)")
    dm.set_defaults(func=_demo)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
