"""The "windowstore" data source (Spark 4's Python Data Source API): its schema, the reader or
writer each use gets, its registration in a session (`register`) and a local session with it
registered (`local_session`). It chooses; the readers and writers do the work."""
from __future__ import annotations

import logging

from pyspark.errors import PySparkRuntimeError
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource

from .join_reader import _JoinReader
from .layout import META_COLUMNS, _answer_layout
from .options import _READ_OPTIONS, parse_options
from .pushdown import _PushdownReader
from .reader import _QueryReader
from .stream_reader import _AnswerStreamReader
from .writers import _BatchWriter, _StreamWriter

log = logging.getLogger("windowstore.spark")


class WindowStoreDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "windowstore"

    def schema(self) -> str:
        """For reads: the answer's columns, typed from the stream's schema, then the metadata."""
        if not self.options.get("query"):
            return "value STRING"  # writes take the DataFrame's own schema
        cols = _answer_layout(self.options).columns
        return ", ".join([f"`{label}` {t}" for label, t in cols] + [f"{n} {t}" for n, t in META_COLUMNS])

    _pushdown = False  # see register(): Spark refuses a reader with pushFilters unless its conf allows it

    def reader(self, schema):
        opts = parse_options(self.options, _READ_OPTIONS)
        # Opt-in: Spark 4.x keeps the reader a pushdown planned on the loaded relation and reuses it for
        # that DataFrame's later plans, filtered or not (df.where(...).collect() then df.count()
        # counts the filtered rows); use a DataFrame read with filter_pushdown for one filter only.
        layout = _answer_layout(self.options)
        if layout.join:  # run once on the driver (join_reader.py); nothing to push down into it
            if opts.get("filter_pushdown", False) or opts.get("as_of_slide") is not None:
                raise ValueError("a join's batch read runs the join once on the driver: filter_pushdown and "
                                 "as_of_slide are for one stream's query")
            return _JoinReader(dict(self.options), layout, schema)
        cls = _QueryReader
        if opts.get("filter_pushdown", False):
            if not self._pushdown:
                raise ValueError("windowstore option filter_pushdown needs spark.sql.python.filterPushdown.enabled="
                                 "true in the session when windowstore.clients.spark.register(spark) runs")
            cls = _PushdownReader
        return cls(dict(self.options), layout, schema)

    def streamReader(self, schema):
        if parse_options(self.options, _READ_OPTIONS).get("as_of_slide") is not None:
            raise ValueError("as_of_slide is for the batch reader: a streaming read follows a periodic query's answers")
        return _AnswerStreamReader(dict(self.options), _answer_layout(self.options).conversions)

    def streamWriter(self, schema, overwrite: bool):
        return _StreamWriter(dict(self.options), schema)

    def writer(self, schema, overwrite: bool):
        return _BatchWriter(dict(self.options), schema)


class _WindowStoreDataSourceWithPushdown(WindowStoreDataSource):
    _pushdown = True


def register(spark: SparkSession) -> None:
    """Make `format("windowstore")` available in this session. The batch reader pushes filters
    into WHERE when the session allows Python data sources to (spark.sql.python.filterPushdown.enabled,
    read here, when registering: Spark refuses a reader that offers pushdown otherwise)."""
    enabled = str(spark.conf.get("spark.sql.python.filterPushdown.enabled", "false")).lower() == "true"
    spark.dataSource.register(_WindowStoreDataSourceWithPushdown if enabled else WindowStoreDataSource)


def local_session(app: str, cores: int = 2, max_failures: int = 1, **conf: str) -> SparkSession:
    """A local SparkSession whose Python workers run this interpreter (so they import windowstore),
    UI off, with the windowstore data source registered; max_failures > 1 lets Spark retry a failed
    task, as it does on a cluster."""
    import os
    import sys

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = f"local[{cores}]" if max_failures <= 1 else f"local[{cores},{max_failures}]"
    builder = (SparkSession.builder.master(master).appName(app).config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", str(cores))
               .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
               .config("spark.sql.python.filterPushdown.enabled", "true"))
    for k, v in conf.items():
        builder = builder.config(k.replace("__", "."), v)
    spark = get_or_create(builder)
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def get_or_create(builder, attempts: int = 2) -> SparkSession:
    """builder.getOrCreate(), started again when the JVM exited before it gave PySpark its gateway
    (JAVA_GATEWAY_EXITED: seen once on a loaded machine, passing on the next start); any other
    failure, or the last attempt's, is raised."""
    for attempt in range(1, attempts + 1):
        try:
            return builder.getOrCreate()
        except PySparkRuntimeError as e:
            if e.getCondition() != "JAVA_GATEWAY_EXITED" or attempt == attempts:
                raise
            log.warning("the Spark JVM exited before its gateway started (attempt %d of %d): starting it again",
                        attempt, attempts)
    raise AssertionError("unreachable")
