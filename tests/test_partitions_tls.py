"""TLS and bearer tokens on a cluster target: 2 servers on 127.0.0.1, each with a server certificate
and a tokens file; the cluster client (blocking and asyncio) and Spark's writers and readers pass
the same TLS/token options to every node. Answers are checked against DuckDB over the rows
written; a client without the CA or the token is refused by every node."""
from __future__ import annotations

import asyncio
import json

import duckdb
import pyarrow as pa
import pytest

from cluster_fixtures import servers
from pki import make_pki
from windowstore.clients import AsyncClient, Client
from windowstore.clients.errors import Unauthenticated, Unavailable
from windowstore.server.process import ServerProcess
from windowstore.server.security import token_hash
from windowstore.store.partitions import StaticCluster, partition_name

SCHEMA = {"ts": "int64", "src": "string", "bytes": "int64"}
P = 3


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory):
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    tokens = tmp_path_factory.mktemp("auth") / "tokens.json"
    tokens.write_text(json.dumps({"tokens": {token_hash("t-admin"): "admin"}, "grants": {"admin": {"*": ["admin"]}}}))
    with servers(2, lambda i: ServerProcess("--tls-cert", pki["server"], "--tls-key", pki["server_key"],
                                            "--tokens", str(tokens))) as targets:
        yield targets, pki


def batch(b: int, n: int = 120) -> dict:
    return {"ts": [b * 1000 + i for i in range(n)], "src": [f"h{(i * 7 + b) % 13}" for i in range(n)],
            "bytes": [(i * 31 + b) % 101 for i in range(n)]}


def duck(sql: str, tables: list[dict]) -> list[tuple]:
    con = duckdb.connect()
    con.register("t", pa.concat_tables([pa.table(t) for t in tables]))
    return [tuple(r) for r in con.execute(sql).fetchall()]


@pytest.mark.slow
def test_the_cluster_clients_pass_tls_and_token_to_every_node(tls_cluster):
    nodes, pki = tls_cluster
    with Client(nodes, ca=pki["ca"], token="t-admin", timeout=30) as ws:
        ws.create_stream("sec", SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual", partitions=P,
                         partition_by=["src"])
        view = StaticCluster(tuple(nodes))
        assert {view.owner("sec", p) for p in range(P)} == {0, 1}  # both servers hold partitions
        ws.append("sec", batch(0), writer_id="w", batch_id=0)
        ws.append("sec", batch(1), writer_id="w", batch_id=1)
        ws.slide("sec")
        a = ws.query("SELECT src, COUNT(*), SUM(bytes) FROM sec GROUP BY src ORDER BY src")
        assert a.slide == 0
        assert a.rows == duck("SELECT src, COUNT(*), SUM(bytes) FROM t GROUP BY src ORDER BY src",
                              [batch(0), batch(1)])

    async def run():
        async with AsyncClient(nodes, ca=pki["ca"], token="t-admin", timeout=30) as aws:
            return await aws.query("SELECT COUNT(*), MAX(bytes) FROM sec")
    got = asyncio.run(run())
    assert got.rows == duck("SELECT COUNT(*), MAX(bytes) FROM t", [batch(0), batch(1)])

    with Client(nodes, ca=pki["ca"], timeout=10, retries=0) as anonymous, \
            pytest.raises(Unauthenticated, match="bearer token"):
        anonymous.query("SELECT COUNT(*) FROM sec")
    with Client(nodes, token="t-admin", timeout=5, retries=0) as plaintext, pytest.raises(Unavailable):
        plaintext.query("SELECT COUNT(*) FROM sec")  # a plaintext client cannot reach a TLS node


@pytest.mark.spark
@pytest.mark.long  # make test-long; the SDK's TLS cluster test above stays in make test
def test_spark_writes_and_reads_a_partitioned_stream_over_tls_with_a_token(tls_cluster):
    pytest.importorskip("pyspark")
    from windowstore.clients.spark import WindowStoreWriter, local_session

    nodes, pki = tls_cluster
    security = {"ca": pki["ca"], "token": "t-admin"}
    with Client(nodes, timeout=30, **security) as ws:
        ws.create_stream("sp", SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual", partitions=P,
                         partition_by=["src"])
    spark = local_session("windowstore-partition-tls", cores=2)
    try:
        writer = WindowStoreWriter(nodes, "sp", writer_id="tls-job", slide_per_batch=True, **security)
        b0 = batch(0)
        writer(spark.createDataFrame(pa.table(b0).to_pandas()).repartition(2), 0)
        assert (writer.last["accepted"], writer.last["latest_slide"]) == (len(b0["ts"]), 0)
        options = {"target": ",".join(nodes), "tls_ca": pki["ca"], "token": "t-admin"}
        # the data source's batch writer, then both readers' forms: a projection per partition, an aggregate merged
        (spark.createDataFrame(pa.table(batch(1)).to_pandas()).write.format("windowstore")
         .options(**options, stream="sp", writer_id="tls-batch", batch_id="1").mode("append").save())
        with Client(nodes, timeout=30, **security) as ws:
            ws.slide("sp")
        rows = (spark.read.format("windowstore").options(**options, query="SELECT ts, src, bytes FROM sp").load()
                .collect())
        assert sorted((r.ts, r.src, r.bytes) for r in rows) == \
            duck("SELECT ts, src, bytes FROM t ORDER BY ts", [b0, batch(1)])
        agg = (spark.read.format("windowstore")
               .options(**options, query="SELECT src, SUM(bytes) FROM sp GROUP BY src").load().collect())
        assert sorted((r[0], r[1]) for r in agg) == \
            duck("SELECT src, SUM(bytes) FROM t GROUP BY src ORDER BY src", [b0, batch(1)])
        # without the token every node refuses the read
        with pytest.raises(Exception, match="(?i)unauthenticated|bearer token"):
            spark.read.format("windowstore").options(target=",".join(nodes), tls_ca=pki["ca"],
                                                     query="SELECT COUNT(*) FROM sp").load().collect()
    finally:
        spark.stop()
    # every row once on its partition
    view = StaticCluster(tuple(nodes))
    total = 0
    for p in range(P):
        with Client(view.addresses[view.owner("sp", p)], timeout=30, **security) as ws:
            total += ws.query(f'SELECT COUNT(*) FROM "{partition_name("sp", p)}"').rows[0][0]
    assert total == len(b0["ts"]) + len(batch(1)["ts"])
