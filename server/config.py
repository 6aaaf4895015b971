"""Server settings. Every limit here answers RESOURCE_EXHAUSTED when crossed."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 50051
    policy: str = "ttu"
    sharing: str = "none"              # shared execution of periodic queries (txn/sharing/; docs/sharing.md)
    max_message_mb: int = 64           # gRPC receive limit per message
    max_decompressed_mb: int = 512     # an Arrow payload's size once decompressed (checked before)
    max_rows_per_batch: int = 1_000_000
    max_concurrent_queries: int = 256  # one-time queries in flight
    max_periodic_queries: int = 1_000
    max_subscribers: int = 256
    max_streams: int = 1_000
    max_join_rows: int = 2_000_000     # rows of a join's result (and of each intermediate one)
    max_restarts: int = 16
    fallback_after: int = 2            # ttu: aborts before a query's attempt holds its windows (txn Outcomes._fall_back)
    history_path: str | None = None    # also write the history as JSON lines
    history_keep: int = 200_000        # history records kept in memory for StreamHistory (a probe's reads are one)
    workers: int = 4                   # threads that decode large Arrow payloads off the gRPC event loop
    offload_ms: float = 0.25           # window-scan reads and final merges this slow (measured) run on a query thread (Job.lane); < 0: none
    seal_offload_rows: int = 100_000   # a slide of this many rows or more is sealed on the seal thread (offload_ms < 0: none)
    read_during_seal: bool = True      # a query of a stream being sealed reads the sub-windows installed; False: it waits for the install
    answer_cache_entries: int = 1024   # one-time answers kept while their window is unchanged (txn/answer_cache.py); 0: none
    answer_cache_mb: float = 16.0      # ... and at most about this many MiB of them
    subscriber_buffer: int = 256       # answers queued per subscriber before the oldest are dropped
    subscriber_buffer_mb: int = 16     # ... or this many MiB of them
    answer_log_keep: int = 1_000       # answers kept per periodic query for ReadAnswers
    idempotency_keep: int = 100_000    # acknowledgements remembered per writer
    idempotency_keep_total: int = 1_000_000  # ... and in all (~200 bytes each; the largest tables give way)
    max_buffered_rows: int = 20_000_000  # rows one stream may hold waiting for a slide
    append_order_wait_s: float = 10.0  # a pipelined Append (after_batch_id) waits this long for the batch it follows
    max_staged_mb: int = 1024          # rows staged by uncommitted batches (StageRows), all streams
    max_pending: int = 2_000           # requests waiting for the engine (queries in flight, writes not yet durable) before new ones are shed
    max_requests_per_client: int = 64  # requests in progress per client (principal, or connection)
    stuck_after_s: float = 10.0        # health says NOT_SERVING when the engine makes no progress this long
    grace_s: float = 5.0               # shutdown: time for in-flight work
    background_nice: int = 0           # the seal, decode and periodic query threads run this many nice steps below the loop thread (Linux)
    switch_interval_ms: float = 0.25   # CPython GIL switch interval for the server process (a query thread hands the loop back this soon)
    tls_cert: str | None = None        # PEM: serve TLS with this certificate chain ...
    tls_key: str | None = None         # ... and private key
    tls_client_ca: str | None = None   # PEM: require client certificates signed by these (mutual TLS)
    tokens: str | None = None          # JSON tokens file (security.py): bearer tokens, per-stream grants
    insecure: bool = False             # allow listening off loopback without TLS and tokens
    metrics_port: int | None = None    # serve Prometheus metrics over HTTP on this port (0: any free one)
    slow_query_ms: float = 1000.0      # a one-time query answered slower than this is logged (slow_query)
    client_error_log_limit: int = 10   # client_error lines per method and status code in 10 s (0: every one); the rest counted
    http_port: int | None = None       # serve the status page (and metrics, health) on this port (0: any free one)
    data_dir: str = "windowstore-data"  # the write-ahead log and snapshots
    in_memory: bool = False            # no data directory: nothing survives a restart
    fsync: str = "always"              # always | interval (at most ~1 s at risk) | off
    snapshot_every_bytes: int = 256 << 20  # snapshot after this much log (or the last snapshot's size, if more)
    snapshot_every_s: float = 300.0    # ... or this long with anything logged
    cluster: str | None = None         # a cluster file (store/partitions.py StaticCluster): partitions this node owns
    node: int | None = None            # this server's index in the cluster file's nodes
    etcd: str | None = None            # an etcd endpoint (http://host:port): the cluster's map and leaders (coordination/)
    etcd_prefix: str = "/windowstore/"  # the cluster's keys in etcd
    lease_ttl_s: int = 3               # the leader lease: a leader silent this long loses its partitions
    peer_addresses: tuple[tuple[int, str], ...] = ()  # (node, host:port): reach that replica here instead of its registered address
    advertise_address: str = ""        # host:port registered in etcd for clients and replicas (default: where it listens)
