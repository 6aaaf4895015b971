"""A streaming source for the freshness benchmark: Spark's rate source, to the millisecond.

Spark's built-in `rate` source offers rows a whole second at a time (its offset is in seconds), so
every row waits on average half a second before any micro-batch can read it; that wait would be
added to every Spark-fed figure. Here the offset is the wall-clock millisecond at which the driver
asked for it: a micro-batch reads exactly the rows that occurred up to that moment. Row i occurred at
i * 1000 / rowsPerSecond ms after the epoch (`ts`, int64 ms), `v` = i; `timestamp_millis(ts)` gives
Spark's TIMESTAMP.

    spark.dataSource.register(MsRateSource)
    spark.readStream.format("ms_rate").option("rowsPerSecond", 5000).option("numPartitions", 2).load()
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition


@dataclass
class _Ids(InputPartition):
    first: int  # ids first..last-1
    last: int
    rate: int


class _MsRateReader(DataSourceStreamReader):
    def __init__(self, options: dict):
        self.rate = int(options.get("rowsPerSecond", 1000))
        self.parts = int(options.get("numPartitions", 2))

    def initialOffset(self) -> dict:
        return {"ms": int(time.time() * 1000)}

    def latestOffset(self, start: dict = None, limit=None) -> dict:
        return {"ms": int(time.time() * 1000)}

    def partitions(self, start: dict, end: dict):
        first, last = start["ms"] * self.rate // 1000, end["ms"] * self.rate // 1000
        step = -(-(last - first) // self.parts) if last > first else 0
        return [_Ids(a, min(a + step, last), self.rate) for a in range(first, last, step)] if step else []

    def read(self, partition: _Ids):
        ids = pa.array(range(partition.first, partition.last), pa.int64())
        ts = pa.compute.divide(pa.compute.multiply(ids, 1000), partition.rate)
        yield pa.RecordBatch.from_arrays([ts, ids], names=["ts", "v"])

    def commit(self, end: dict) -> None:
        return None


class MsRateSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "ms_rate"

    def schema(self) -> str:
        return "ts LONG, v LONG"

    def streamReader(self, schema):
        return _MsRateReader(self.options)
