"""The batch reader of a one-time join (window joins, timing-correlation joins included): a join
reads several streams' windows and cannot be pinned to one slide with AS OF SLIDE, so the driver
runs it once when Spark plans the read and hands the answer to the one partition; every task
retry of that plan then delivers the same rows, with the answer's provenance (the first source's
slide and window bounds) in the metadata columns. Nothing is pushed down; the answer is bounded by
the server's --max-join-rows."""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceReader, InputPartition

from .layout import _answer_batch, _Layout
from .options import _READ_OPTIONS, _connection, connect, parse_options

_BATCH_ROWS = 65_536


@dataclass
class _JoinAnswer(InputPartition):
    """The answer the driver got (an Answer: plain values, picklable)."""

    index: int
    answer: object


class _JoinReader(DataSourceReader):
    def __init__(self, options: dict, layout: _Layout, schema=None):
        self.target = _connection(parse_options(options, _READ_OPTIONS))
        self.layout = layout
        self.spark_schema = schema

    def partitions(self):
        from windowstore.store.parser import to_text

        with connect(self.target) as ws:
            return [_JoinAnswer(0, ws.query(to_text(self.layout.query)))]

    def read(self, partition: _JoinAnswer):  # type: ignore[override]  # Spark hands back partitions() ones
        batch = _answer_batch(partition.answer, self.layout.conversions, self.spark_schema)
        for start in range(0, max(batch.num_rows, 1), _BATCH_ROWS):
            yield batch.slice(start, _BATCH_ROWS)
