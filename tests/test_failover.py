"""Automatic failover of a replicated partition (server/replication/failover.py): three durable
`windowstore serve --etcd` processes and etcd on 127.0.0.1, a stream with replication=3 and
acks=all, a writer appending numbered batches through the cluster client; the leader is killed
with SIGKILL. A follower must be elected and take the writes, the writer's retries (same writer id
and batch id) must leave every acknowledged row exactly once, the window's answer must equal DuckDB
over the acknowledged rows, and the old leader, started again on its data directory, must rejoin
as a follower of the new epoch and hold the same window. Waits are for conditions, with deadlines."""
from __future__ import annotations

import contextlib
import signal
import time

import duckdb
import pytest

from chaos import Writer, rows_of
from conftest import wait_for
from windowstore.clients import Client
from windowstore.clients.errors import Unavailable
from windowstore.clients.partitioned import ClusterClient
from windowstore.server.coordination.election import place
from windowstore.server.coordination.keys import Keys
from windowstore.server.coordination.view import EtcdClusterView
from windowstore.server.process import ServerProcess

pytestmark = pytest.mark.slow  # servers in subprocesses

TTL = 2
SCHEMA = {"ts": "int64", "k": "string", "v": "int64"}


def test_a_killed_leader_is_replaced_and_rejoins_as_follower(etcd, tmp_path):
    args = ("--etcd", etcd.url, "--lease-ttl-s", str(TTL))
    servers = [ServerProcess(*args, "--node", str(i), data_dir=str(tmp_path / f"n{i}")) for i in range(3)]
    writer = None
    try:
        with EtcdClusterView(etcd.url) as view:
            assert view.wait(lambda v: len(v.live()) == 3, 30), "the three servers registered"
            assert place(view.etcd, Keys(), "s", [[0, 1, 2]])
            first = view.wait(lambda v: v.leader("s", 0), 30)
            assert (first.node, first.epoch) == (0, 1), "the preferred replica leads first"
            ws = ClusterClient(view, timeout=5)
            ws.create_stream("s", SCHEMA, subwindows=1000, subwindow_ms=1000, clock="manual", partitions=1, partition_by=["k"],
                             replication=3, acks="all")
            writer = Writer(ws, "s", slide_every=0)
            writer.start()
            assert writer.wait_acked(20, 60), f"20 acknowledged batches ({writer.error})"

            killed_at = time.monotonic()
            acked_before = len(writer.acked)
            servers[0].proc.send_signal(signal.SIGKILL)
            servers[0].proc.wait(30)
            new = view.wait(lambda v: (lambda lead: lead if lead is not None and lead.node != 0 else None)(v.leader("s", 0)),
                            10 * TTL)
            assert new is not None, "a follower was elected"
            assert new.epoch == 2
            assert writer.wait_acked(acked_before + 20, 60), f"20 batches on the new leader ({writer.error})"
            writable_after = next(t for t in writer.at[acked_before:]) - killed_at
            print(f"writes acknowledged again {writable_after:.2f} s after SIGKILL of the leader (TTL {TTL} s)")

            port = int(servers[0].target.rsplit(":", 1)[1])
            servers[0] = ServerProcess(*args, "--node", "0", data_dir=str(tmp_path / "n0"), port=port)
            with Client(servers[0].target) as old:
                def following():
                    try:
                        s = old.replica_status("s.p0")
                    except Unavailable:  # (still starting)
                        return None
                    return s if s["role"].endswith("FOLLOWER") and s["epoch"] == new.epoch else None
                status = wait_for(following, "the old leader to follow epoch 2", timeout=60)
                assert status["leader"] == new.node

            writer.halt.set()
            writer.join(60)
            assert not writer.is_alive() and writer.error is None, writer.error
            acked = writer.acked
            assert acked == list(range(1, len(acked) + 1))
            slide = ws.slide("s")
            got = ws.query("SELECT k, COUNT(*), SUM(v) FROM s GROUP BY k")
            assert got.slide == slide
            expected = rows_of(acked)  # noqa: F841  # read by DuckDB (a replacement scan of the local name)
            want = duckdb.sql("SELECT k, COUNT(*), SUM(v) FROM expected GROUP BY k").fetchall()
            assert sorted(got.rows) == sorted(want), "every acknowledged row once, nothing else"
            assert len(got.rows) == len(acked)

            with Client(servers[0].target) as old:  # the rejoined replica holds the same window
                mirror = old.query("SELECT k, COUNT(*), SUM(v) FROM \"s.p0\" GROUP BY k", read_from="follower",
                                   min_slide=slide, min_slide_wait_ms=30000)
                assert sorted(mirror.rows) == sorted(want)
            ws.close()
    finally:
        if writer is not None:
            writer.halt.set()
        for s in servers:
            if s.proc.poll() is None:
                s.stop()


def in_process(etcd_url: str, tmp_path, node: int):
    """An in-process durable server, node `node` of the cluster in etcd (TTL), its data under tmp_path."""
    from windowstore.server.app import WindowStoreServer
    from windowstore.server.config import ServerConfig

    return WindowStoreServer(ServerConfig(port=0, data_dir=str(tmp_path / f"n{node}"), etcd=etcd_url, node=node,
                                          lease_ttl_s=TTL)).start()


def log_unreplicated(servers, partition: str) -> dict:
    """Node 1 stops fetching `partition` from node 0 (which never drops it from the in-sync set);
    then batch 1 (the row returned) is appended to node 0: logged there, and not acknowledged
    (DEADLINE_EXCEEDED) since node 1 does not hold it."""
    from windowstore.clients.errors import DeadlineExceeded

    servers[0].driver.replication.lag_s = 3600.0
    part = servers[1].driver.replication.parts[partition]
    part.fetcher.stop()
    part.fetcher.join(30)
    row = {"ts": [1], "k": ["b1"], "v": [1]}
    with Client(servers[0].address, timeout=1, retries=0) as c:
        with pytest.raises(DeadlineExceeded):
            c.append(partition, row, writer_id="w", batch_id=1)
    return row


@contextlib.contextmanager
def two_replicas(etcd_url: str, tmp_path, stream: str):
    """Two in-process servers on etcd, `stream` placed on nodes [0, 1], led by node 0 and created
    through the cluster client (one partition, replication=2, acks=all): yields (servers, view)."""
    servers = [in_process(etcd_url, tmp_path, i) for i in range(2)]
    try:
        with EtcdClusterView(etcd_url) as view:
            assert view.wait(lambda v: len(v.live()) == 2, 30)
            assert place(view.etcd, Keys(), stream, [[0, 1]])
            assert view.wait(lambda v: v.leader(stream, 0), 30).node == 0
            with ClusterClient(view, timeout=10) as ws:
                ws.create_stream(stream, SCHEMA, subwindows=100, subwindow_ms=1000, clock="manual", partitions=1,
                                 partition_by=["k"], replication=2, acks="all")
            yield servers, view
    finally:
        for s in servers:
            s.stop()


def test_a_leader_that_cannot_renew_its_lease_refuses_writes_then_follows(etcd, tmp_path):
    """In-process servers (so the test can stop one's lease renewals, as a pause or a cut from etcd
    would): once the leader's lease may have expired (its last renewal was sent a TTL ago) it
    refuses writes with UNAVAILABLE, whether or not etcd has elected anyone yet; the follower is
    elected at epoch 2 and takes the writes; the old leader, renewing again, follows it and refuses
    writes with FAILED_PRECONDITION naming it. Writes acknowledged before are all there once."""
    from windowstore.clients.errors import FailedPrecondition

    with two_replicas(etcd.url, tmp_path, "f") as (servers, view):
        with ClusterClient(view, timeout=5) as ws:
            for i in range(1, 6):
                ws.append("f", {"ts": [i], "k": [f"b{i}"], "v": [i]}, writer_id="w", batch_id=i)
        leader = servers[0]
        leader.coordinator.pause_keepalive()
        lease = leader.coordinator.lease
        wait_for(lambda: time.monotonic() >= lease.valid_until(), "the leader's lease to be past its TTL",
                 timeout=30)
        with Client(leader.address, timeout=5, retries=0) as c:
            try:
                c.append("f.p0", {"ts": [6], "k": ["b6"], "v": [6]}, writer_id="w", batch_id=6)
                pytest.fail("the leader acknowledged a write after its lease's TTL had passed")
            except Unavailable as e:
                assert "lease" in e.message
            except FailedPrecondition:  # (this thread was late: node 1 already leads, and node 0 follows it)
                assert view.leader("f", 0).node == 1
            new = view.wait(lambda v: (lambda lead: lead if lead is not None and lead.node == 1 else None)(v.leader("f", 0)),
                            15 * TTL)
            assert new is not None and new.epoch >= 2
            leader.coordinator.resume_keepalive()
            with ClusterClient(view, timeout=5) as ws:
                ws.append("f", {"ts": [6], "k": ["b6"], "v": [6]}, writer_id="w", batch_id=6)

            def refused_naming_node_1():
                try:
                    c.append("f.p0", {"ts": [7], "k": ["b7"], "v": [7]}, writer_id="w", batch_id=7)
                except FailedPrecondition as e:
                    return "leader is node 1" in e.message
                except Unavailable:
                    return False
                pytest.fail("the old leader acknowledged a write after it was replaced")
            wait_for(refused_naming_node_1, "the old leader to follow node 1", timeout=60)
        with ClusterClient(view, timeout=5) as ws:
            slide = ws.slide("f")
            got = ws.query("SELECT COUNT(*), SUM(v) FROM f")
            assert got.slide == slide and got.rows == [(6, 21)]


def test_a_retried_batch_is_acknowledged_only_once_the_replicas_hold_it(etcd, tmp_path):
    """A retry of a batch the leader has logged but its in-sync follower does not hold yet is a
    duplicate, and must wait for the follower like the first attempt: acknowledging it at once
    would let the batch be lost when that follower is elected. In-process servers: the follower's
    fetching is stopped, and the leader never drops it from the in-sync set."""
    from windowstore.clients.errors import DeadlineExceeded

    with two_replicas(etcd.url, tmp_path, "d") as (servers, view):
        follower = servers[1].driver.replication
        part = follower.parts["d.p0"]
        row = log_unreplicated(servers, "d.p0")
        with Client(servers[0].address, timeout=1, retries=0) as c:
            with pytest.raises(DeadlineExceeded):  # the duplicate waits for the follower too
                c.append("d.p0", row, writer_id="w", batch_id=1)
        servers[1].loop.call_soon_threadsafe(follower.become_follower, "d.p0", 0, part.epoch)
        with Client(servers[0].address, timeout=30) as c:
            assert c.append("d.p0", row, writer_id="w", batch_id=1).duplicate
        assert follower.parts["d.p0"].log.end >= servers[0].driver.replication.parts["d.p0"].log.end - 0


def test_a_leader_restarted_and_elected_again_waits_for_its_followers(etcd, tmp_path):
    """The leader logs a batch its follower does not fetch (unacknowledged), both servers stop, and
    the leader alone comes back and is elected again (epoch 2, etcd's in-sync set still both). A
    retry of that batch must wait for the follower: the restarted leader's high watermark is its
    checkpoint, not its log's end (which would acknowledge the retry at once, a batch that only
    this replica holds). Once the follower is back and fetches, the retry is acknowledged."""
    from windowstore.clients.errors import DeadlineExceeded

    with two_replicas(etcd.url, tmp_path, "h") as (servers, view):
        row = log_unreplicated(servers, "h.p0")
        servers[1].stop()
        servers[0].stop()
        servers[0] = in_process(etcd.url, tmp_path, 0)
        servers[0].driver.replication.lag_s = 3600.0  # (node 1, down, stays in the in-sync set)
        elected = view.wait(lambda v: (lambda lead: lead if lead is not None and lead.epoch >= 2 else None)(
            v.leader("h", 0)), 30)
        assert elected is not None and elected.node == 0
        assert set(view.partition("h", 0).in_sync) == {0, 1}
        with Client(servers[0].address, timeout=5, retries=0) as c:
            status = wait_for(lambda: (lambda s: s if s["epoch"] >= 2 else None)(c.replica_status("h.p0")),
                              "node 0 to lead at epoch 2")
            assert status["high_watermark"] < status["end_offset"]
            with pytest.raises(DeadlineExceeded):  # the retry waits for node 1
                c.append("h.p0", row, writer_id="w", batch_id=1)
        servers[1] = in_process(etcd.url, tmp_path, 1)
        with Client(servers[0].address, timeout=60, retries=0) as c:
            assert c.append("h.p0", row, writer_id="w", batch_id=1).duplicate
        with ClusterClient(view, timeout=10) as ws:
            slide = ws.slide("h")
            got = ws.query("SELECT COUNT(*), SUM(v) FROM h")
            assert got.slide == slide and got.rows == [(1, 1)]
