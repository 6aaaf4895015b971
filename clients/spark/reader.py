"""The batch reader: one one-time query, pinned on the driver to one slide (AS OF SLIDE) so that
every task, retry and re-run reads the same window; a projection split into partitions by runs of
sub-windows; delivered as Arrow record batches. Filter pushdown is pushdown.py."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceReader, InputPartition

from .layout import _answer_batch, _Layout
from windowstore.store.partitions import partition_name

from .options import _READ_OPTIONS, _connection, connect, parse_options
from .partitioned import _node, cluster_nodes, newest_common_slide, partition_address, security_options

if TYPE_CHECKING:
    from windowstore.store.query import Query

_BATCH_ROWS = 65_536


@dataclass
class _PinnedQuery(InputPartition):
    """One task's query: the reader's query pinned to one slide (AS OF SLIDE), filters in WHERE; a
    projection's part reads a run of the pinned window's sub-windows (`slide`: the pinned slide)."""

    index: int
    text: str
    slide: int | None
    # on a cluster: the server that runs `text` (a partition's), or every server (a merged scatter-gather)
    node: str | list[str] | None = None


class _QueryReader(DataSourceReader):
    """`spark.read.format("windowstore").option("query", ...)`: the answer of one one-time query,
    pinned on the driver to the stream's latest slide (or option as_of_slide, or the query's own
    AS OF SLIDE) so that every task, every task retry and every re-run of the same plan reads the
    same window; delivered as Arrow record batches.

    A projection (SELECT columns, no aggregate) is split into up to `partitions` parts (default 8),
    each reading a contiguous run of the pinned window's sub-windows: the part ending at slide j of
    m sub-windows runs [RANGE m SUBWINDOWS] AS OF SLIDE j (still live whenever slide k is), so the
    parts' union is exactly slide k's rows. An aggregate is one partition: the store computes it
    (splitting it into per-sub-window partials for Spark to merge would move the store's work into
    Spark, not spread it).

    On a cluster (option target "host1:port,host2:port,..."), a partitioned stream is pinned to the
    newest slide every partition has sealed: a projection is one Spark partition per store
    partition, each reading `S.p{i}` AS OF that slide on its server; an aggregate is one Spark
    partition running the SDK's scatter-gather query AS OF it (clients/merge.py)."""

    def __init__(self, options: dict, layout: _Layout, schema=None):
        opts = parse_options(options, _READ_OPTIONS)
        self.target = _connection(opts)
        self.layout = layout
        self.spark_schema = schema
        self.as_of = opts.get("as_of_slide")
        self.max_parts = opts.get("partitions", 8)
        self.pushed: list = []   # store predicates ANDed into WHERE
        self.nodes = cluster_nodes(opts.get("target", ""))
        self.store_partitions = 0  # a partitioned stream's partition count, once pinned
        self.plain_node: str | None = None  # an ordinary stream's server on the cluster

    def pinned(self) -> tuple[str, int | None]:
        """(query text, slide): the whole query, as one partition runs it."""
        from windowstore.store.parser import to_text

        q, k = self._pinned_query()
        return to_text(q), k

    def _pinned_query(self):
        from dataclasses import replace

        q: Query = self.layout.query  # type: ignore[assignment]  # one stream's: the batch reader refuses joins
        k = q.as_of_slide if q.as_of_slide is not None else self.as_of
        if self.nodes:
            lay, latest = newest_common_slide(self.nodes, q.stream, security_options(self.target))
            self.store_partitions = lay.partitions
            self.plain_node = None if lay.partitions else self.nodes[lay.node]  # type: ignore[index]  # an ordinary stream: one node
            if k is None:
                k = latest if latest >= 0 else None
        elif k is None:
            with connect(self.target) as ws:
                latest = int(ws.describe_stream(q.stream)["latest_slide"])
            k = latest if latest >= 0 else None  # an empty window: nothing to pin yet
        if self.pushed:
            extra = tuple(self.pushed)
            q = replace(q, where=tuple(conj + extra for conj in q.where) if q.where else (extra,))
        return replace(q, as_of_slide=k), k

    def partitions(self):
        from dataclasses import replace

        from windowstore.store.parser import to_text
        from windowstore.store.query import Range

        q, k = self._pinned_query()
        if self.nodes:
            if self.store_partitions and self.layout.projection and k is not None:
                return [_PinnedQuery(p, to_text(replace(q, stream=partition_name(q.stream, p))), k,
                                     partition_address(self.nodes, q.stream, p)) for p in range(self.store_partitions)]
            if self.plain_node:
                return [_PinnedQuery(0, to_text(q), k, self.plain_node)]
            # the scatter-gather query takes the slide as as_of_slide (read() passes k)
            return [_PinnedQuery(0, to_text(replace(q, as_of_slide=None)), k, self.nodes)]
        if not self.layout.projection or k is None:
            return [_PinnedQuery(0, to_text(q), k)]
        lo = max(0, k - self.layout.n_q + 1)
        count = k - lo + 1
        parts = min(count, self.max_parts)
        out, start = [], lo
        for i in range(parts):  # contiguous runs of sub-windows, sizes differing by at most one
            size = count // parts + (i < count % parts)
            end = start + size - 1
            out.append(_PinnedQuery(i, to_text(replace(q, range=Range(size, "subwindows"), as_of_slide=end)), k))
            start = end + 1
        return out

    def read(self, partition: _PinnedQuery):  # type: ignore[override]  # Spark hands back partitions() ones
        if isinstance(partition.node, list):  # a partitioned stream's aggregate: scatter-gather, merged
            from ..partitioned import ClusterClient

            with ClusterClient(partition.node, **security_options(self.target)) as cc:
                a = cc.query(partition.text, as_of_slide=partition.slide)
        else:
            with connect(_node(partition.node, security_options(self.target)) if partition.node else self.target) as ws:
                a = ws.query(partition.text)
        if partition.slide is not None:
            a.slide = partition.slide  # the pinned slide (a projection's part reads a run of its window)
        batch = _answer_batch(a, self.layout.conversions, self.spark_schema)
        for start in range(0, max(batch.num_rows, 1), _BATCH_ROWS):  # Spark takes Arrow batches as they come
            yield batch.slice(start, _BATCH_ROWS)
