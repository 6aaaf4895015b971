"""The streaming reader: a periodic query's answers as a Spark stream, its offset the query's id and
the newest slide delivered, so that a restart from the checkpoint resumes without gaps or repeats."""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from ..errors import NotFound
from ..client import query_stream
from .layout import _answer_rows
from .options import _READ_OPTIONS, _connection, connect, parse_options
from .partitioned import cluster_nodes


@dataclass
class _AnswerRange(InputPartition):
    query_id: str
    after_slide: int
    through_slide: int


class _AnswerStreamReader(DataSourceStreamReader):
    """`spark.readStream.format("windowstore").option("query", "... [RANGE ... SLIDE ...]")`: the
    answers of a periodic query as a stream. The offset is {query_id, slide}: the periodic query
    (registered when the streaming query first starts, kept in its checkpoint through the offset)
    and the newest slide whose answer was delivered, so a restart resumes after it, without gaps
    or repeats, as long as the server still keeps those answers (its bounded answer log).

    On a cluster target ("host1:port,host2:port") and a partitioned stream, the query is registered
    on every partition and each slide's answers are merged into one (ClusterClient.read_answers).

    With the option `etcd` (a replicated stream, docs/failover.md) every read goes to the stream's
    leader, and after a failover the query is registered again on the new leader (which does not
    know the old registration: the replica log does not carry it) and the offset moves to the new
    registration: slides go on increasing, the slides no registration answered are a gap in them."""

    def __init__(self, options: dict, decimal_columns: list[tuple[int, str]]):
        opts = parse_options(options, _READ_OPTIONS)
        self.target = _connection(opts)
        self.query = opts["query"]
        self.query_id = opts.get("query_id")
        self.decimal_columns = decimal_columns
        self.nodes = cluster_nodes(self.target["target"] or "")
        self.stream = query_stream(self.query) if self.target.get("etcd") and self.nodes is None else None

    def _connect(self, query_id: str | None = None):
        """A client of the target; on a cluster, one that merges `query_id`'s partitions' answers."""
        if self.nodes is None:
            return connect(self.target)
        from ..partitioned import ClusterClient

        ws = ClusterClient(self.nodes, **{k: v for k, v in self.target.items() if k != "target"})
        if query_id is not None and "/" in query_id:  # a partitioned stream's: stream/id0,id1,...
            ws.attach(query_id, self.query)
        return ws

    def initialOffset(self) -> dict:
        # Spark asks more than once at a first start: register once per reader
        if self.query_id is None:
            with self._connect() as ws:
                self.query_id = ws.register(self.query).id
        return {"query_id": self.query_id, "slide": -1}

    def _registered_here(self, ws, query_id: str) -> bool:
        """Whether the stream's leader holds `query_id` as this reader's query: ids are a server's
        own (P1, P2, ...), so a new leader may hold the same id for another query."""
        return any(q["query_id"] == query_id and q["text"] == self.query for q in ws.list_queries(self.stream))

    def _read_answers(self, ws, query_id: str, after: int, through: int | None = None, limit: int = 1000):
        if self.stream is None:
            return ws.read_answers(query_id, after, through, limit=limit)
        return ws.read_answers(query_id, after, through, limit=limit, stream=self.stream)

    def latestOffset(self, start: dict, limit=None) -> dict:
        with self._connect(start["query_id"]) as ws:
            try:
                if self.stream is not None and not self._registered_here(ws, start["query_id"]):
                    raise NotFound(start["query_id"])
                _, latest, _ = self._read_answers(ws, start["query_id"], start["slide"], limit=1)
            except NotFound:
                if self.stream is None:
                    raise
                # a failover: the leader etcd names has no such registration; register it there
                self.query_id = ws.register(self.query).id
                return {"query_id": self.query_id, "slide": start["slide"]}
        return {"query_id": start["query_id"], "slide": max(latest, start["slide"])}

    def partitions(self, start: dict, end: dict):
        if end["slide"] <= start["slide"]:
            return []
        return [_AnswerRange(end["query_id"], start["slide"], end["slide"])]

    def read(self, partition: _AnswerRange):  # type: ignore[override]  # Spark hands back partitions() ones
        after = partition.after_slide
        with self._connect(partition.query_id) as ws:
            while after < partition.through_slide:
                try:
                    answers, _, first = self._read_answers(ws, partition.query_id, after, partition.through_slide)
                except NotFound:
                    if self.stream is None:
                        raise
                    break  # its leader died with these answers: a gap (latestOffset registers it again)
                if not answers:
                    break
                for a in answers:
                    yield from _answer_rows(a, self.decimal_columns)
                after = answers[-1].slide

    def commit(self, end: dict) -> None:
        return None  # the server's log is bounded by count; nothing to release
