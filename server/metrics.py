"""Prometheus metrics (`serve --metrics-port N`), with the standard client library.

- gRPC: `grpc_server_handled_total` and `grpc_server_handling_seconds` by method and status code
  (the names and labels of the usual gRPC server interceptors; recorded by rpc.py).
- Answers: staleness and response-time histograms per stream and query class; slide delay.
- The store, read from the driver at scrape time: rows accepted / late / duplicate batches, slides,
  staged and discarded rows, committed / aborted / restarted / failed / errored queries by policy and
  class, subscriber drops, memory held per stream, the log and snapshots.
"""
from __future__ import annotations


from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from windowstore.txn.kinds import QueryKind

_LATENCY = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_STALENESS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.handled = Counter("grpc_server_handled_total", "RPCs completed on the server, by status code",
                               ["grpc_type", "grpc_service", "grpc_method", "grpc_code"], registry=r)
        self.handling = Histogram("grpc_server_handling_seconds", "Time to handle an RPC on the server",
                                  ["grpc_type", "grpc_service", "grpc_method"], buckets=_LATENCY, registry=r)
        self.staleness = Histogram("windowstore_answer_staleness_seconds",
                                   "Answer time minus the commit time of the newest slide it reflects",
                                   ["stream", "query_class"], buckets=_STALENESS, registry=r)
        self.response = Histogram("windowstore_query_response_seconds",
                                  "One-time: the call's arrival at the server to its answer ready to send; "
                                  "periodic: an execution's start to its answer ready for subscribers",
                                  ["stream", "query_class"], buckets=_LATENCY, registry=r)
        self.slide_delay = Histogram("windowstore_slide_delay_seconds",
                                     "How late a processing-time slide began (its rows cut) after it fell due",
                                     ["stream"], buckets=_LATENCY, registry=r)
        self.seal = Histogram("windowstore_seal_seconds",
                              "Sealing a slide's sub-window (concatenating its rows, building its synopses), "
                              "on the seal thread or the event loop",
                              ["stream"], buckets=_LATENCY, registry=r)

        # (stream, query class) -> its staleness and response series: a labels() lookup cost more
        # than the observation itself on every answer. As many as the histograms' own children.
        self._answer_series: dict[tuple[str, str], list] = {}

    def bind(self, driver) -> None:
        self.registry.register(_StoreCollector(driver))

    def observe_answer(self, stream: str, query_class: str, result, response_ms: float) -> None:
        """`response_ms`: measured at the edge (Driver.note_answer), not the engine's own figure."""
        series = self._answer_series.get((stream, query_class))
        if series is None:
            series = self._answer_series[(stream, query_class)] = [None, self.response.labels(stream, query_class)]
        if result.staleness_ms is not None:
            if series[0] is None:  # (a staleness series exists once an answer had one, as before)
                series[0] = self.staleness.labels(stream, query_class)
            series[0].observe(result.staleness_ms / 1000.0)
        series[1].observe(response_ms / 1000.0)


class _StoreCollector:
    """Reads the store's counters on the engine's event loop at scrape time (one consistent view)."""

    def __init__(self, driver):
        self.driver = driver

    def collect(self):
        try:
            s = self.driver.call(self.driver.metrics_snapshot).result(5)
        except Exception:  # noqa: BLE001 - a scrape during shutdown gets nothing, not an error page
            return
        per_stream = {
            "windowstore_rows_accepted": ("rows appended (not late)", "accepted_rows"),
            "windowstore_rows_late": ("rows for sub-windows already sealed: counted, not stored", "late_rows"),
            "windowstore_batches_duplicate": ("replayed batches recognised and ignored", "duplicate_batches"),
            "windowstore_slides": ("slides applied", "slides"),
            "windowstore_rows_discarded": ("staged rows never published (failed attempts, aborts)", "discarded_rows"),
            "windowstore_batches_split": ("batches published in different slides on a partitioned stream's partitions "
                                          "(the committer's fallback, docs/partitions.md)", "split_batches"),
            "windowstore_batches_seconds_like": ("Appends whose event times look like seconds, not milliseconds",
                                                 "seconds_like_batches"),
        }
        for name, (doc, key) in per_stream.items():
            c = CounterMetricFamily(name, doc, labels=["stream"])
            for st in s["streams"]:
                c.add_metric([st["stream"]], st[key])
            yield c
        for name, doc, key in (("windowstore_stream_bytes", "memory held by the window's columns, key synopses, buffers and running per-key totals", "bytes"),
                               ("windowstore_rows_staged", "rows staged by uncommitted batches", "staged_rows"),
                               ("windowstore_strings", "entries of the stream's string dictionary", "strings")):
            g = GaugeMetricFamily(name, doc, labels=["stream"])
            for st in s["streams"]:
                g.add_metric([st["stream"]], st[key])
            yield g
        g = GaugeMetricFamily("windowstore_stream_stopped", "1 when the stream stopped because a seal raised "
                              "(its writes and queries are refused until it is dropped)", labels=["stream"])
        for st in s["streams"]:
            g.add_metric([st["stream"]], 1.0 if st["stopped"] else 0.0)
        yield g
        for key, doc in (("committed", "queries committed"), ("aborts", "query attempts aborted by slides"),
                         ("restarts", "query restarts after an abort"),
                         ("fallbacks", "queries that held their windows' slides after aborts, to answer (ttu)"),
                         ("failed", "queries failed (restart limit)"),
                         ("errors", "queries failed by an internal error"), ("removals", "contributions removed")):
            c = CounterMetricFamily(f"windowstore_queries_{key}", doc, labels=["policy", "query_class"])
            for cls in QueryKind:
                c.add_metric([s["policy"], cls], s[cls][key])
            yield c
        yield CounterMetricFamily("windowstore_subscriber_drops", "answers dropped for slow subscribers",
                                  value=s["subscriber_drops"])
        yield CounterMetricFamily("windowstore_requests_shed", "requests refused for load (RESOURCE_EXHAUSTED)",
                                  value=s["shed"])
        o = s["offload"]
        yield CounterMetricFamily("windowstore_query_jobs", "window-scan reads and final merges run on the query threads",
                                  value=o["jobs"])
        yield CounterMetricFamily("windowstore_query_jobs_discarded",
                                  "results of query-thread jobs thrown away (a slide or a cancel overtook them)",
                                  value=o["discarded"])
        yield CounterMetricFamily("windowstore_query_holds",
                                  "queries that waited for a due slide rather than read what it overwrites",
                                  value=o["holds"])
        yield CounterMetricFamily("windowstore_query_reads_recalled",
                                  "window-scan reads taken from a sealed sub-window's memo instead of scanning its rows",
                                  value=o["recalled"])
        ac = s["answer_cache"]  # one-time answers kept while their window is unchanged (txn/answer_cache.py)
        yield CounterMetricFamily("windowstore_answer_cache_hits", "one-time queries answered from the answer cache",
                                  value=ac["hits"])
        yield CounterMetricFamily("windowstore_answer_cache_misses",
                                  "one-time queries looked up in the answer cache and computed", value=ac["misses"])
        yield CounterMetricFamily("windowstore_answer_cache_evictions",
                                  "answers pushed out of the answer cache by its bounds", value=ac["evictions"])
        yield GaugeMetricFamily("windowstore_answer_cache_entries", "answers kept in the answer cache",
                                value=ac["entries"])
        yield GaugeMetricFamily("windowstore_answer_cache_bytes", "estimated size of the answers kept in the answer cache",
                                value=ac["bytes"])
        yield GaugeMetricFamily("windowstore_answer_cache_requests",
                                "requests known by their bytes beside the answer cache's entries", value=ac["requests"])
        sh = s["sharing"]  # shared execution of periodic queries (txn/sharing/)
        if sh["mode"] != "none":
            yield GaugeMetricFamily("windowstore_sharing_groups", "groups of periodic queries executed together",
                                    value=sh["groups"])
            yield GaugeMetricFamily("windowstore_sharing_group_members_max", "members of the largest group",
                                    value=max(sh["members_per_group"], default=0))
            yield GaugeMetricFamily("windowstore_sharing_join_groups", "groups of periodic joins sharing one join "
                                    "synopsis", value=sh["join_groups"])
            yield GaugeMetricFamily("windowstore_sharing_fallen_back", "periodic queries running alone since their "
                                    "shared execution failed", value=sh["fallen_back"])
            yield GaugeMetricFamily("windowstore_sharing_choices_pending", "groups running conservatively while "
                                    "the hybrid's choice of their periods is made", value=sh["choices_pending"])
            for key, doc in (("executions", "shared executions committed"),
                             ("answers", "answers delivered by shared executions"),
                             ("executions_saved", "executions saved: answers beyond one per shared execution"),
                             ("early_runs", "answers earlier than their query's SLIDE (run with a group)"),
                             ("late_runs", "answers later than their query's SLIDE"),
                             ("aborts", "aborts of shared executions"),
                             ("fallbacks", "shared executions that held their window's slides after aborts (ttu)"),
                             ("cover_executions_saved", "queries answered from a predicate cover, scanning nothing"),
                             ("cover_reads_saved", "sub-window scans predicate covers saved"),
                             ("join_answers", "periodic join answers from a shared join synopsis (SS3/CS5)"),
                             ("slice_executions", "shared executions of windows that cut sub-windows (slices groups)"),
                             ("slice_answers", "answers delivered by shared executions of slices groups")):
                yield CounterMetricFamily(f"windowstore_sharing_{key}", doc, value=sh[key])
        if s.get("replica_lag"):  # replicated streams (server/replication/)
            g = GaugeMetricFamily("windowstore_replica_lag_records", "records the slowest replica of the stream lags: "
                                  "on its leader, its followers' acknowledged offsets behind the log's end; on a "
                                  "follower, its applied offset behind the high watermark", labels=["stream"])
            for name, lag in sorted(s["replica_lag"].items()):
                g.add_metric([name], lag)
            yield g
        d = s["durability"]
        if d.get("enabled"):
            yield CounterMetricFamily("windowstore_log_bytes", "write-ahead log bytes written", value=d["log_bytes"])
            yield CounterMetricFamily("windowstore_snapshots", "snapshots completed", value=d["snapshots"])
            yield GaugeMetricFamily("windowstore_snapshot_pause_seconds_max",
                                    "longest driver pause to capture a snapshot", value=d["max_snapshot_pause_ms"] / 1000)
            yield GaugeMetricFamily("windowstore_writes_refused", "1 when the log failed and writes are refused",
                                    value=1.0 if d["write_failure"] else 0.0)
