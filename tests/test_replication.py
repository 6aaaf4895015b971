"""Replicated streams (docs/replication.md): the replica log's offsets, epochs and truncation
(KIP-101's end-of-epoch answer) against a list model; and on real servers (two `windowstore serve`
processes on 127.0.0.1, one cluster file, the SDK): ingest with acks=all, kill -9 of the leader,
the follower promoted by hand, the old leader back as a follower truncated to the new leader's log,
every acknowledged row there exactly once and each answer equal to DuckDB over the rows of the
slide it reports, on the leader and on the follower (read_from='follower', min_slide)."""
from __future__ import annotations

import random
import signal
import threading

import duckdb
import pyarrow as pa
import pytest

from conftest import wait_for, wait_until
from windowstore.clients import Client, FailedPrecondition, InvalidArgument, Unavailable
from windowstore.server.process import ServerProcess, free_ports
from windowstore.server.replication import Fenced, NotLeader
from windowstore.server.replication.log import ReplicaLog
from windowstore.txn import commands
from windowstore.txn.commands import Slide


# -- the replica log, against a list of (offset, epoch, command) ------------------------------------
def _cmd(i: int) -> bytes:
    return commands.encode(Slide(f"s{i % 3}", float(i)))


def test_replica_log_offsets_epochs_truncation_against_a_list(tmp_path):
    rng = random.Random(7)
    path = str(tmp_path / "r")
    log = ReplicaLog(path)
    model: list[tuple[int, bytes]] = []   # (epoch, command) at offset index + 1
    epoch = 1
    for step in range(300):
        action = rng.random()
        if action < 0.08:
            epoch += 1
        elif action < 0.14 and model:
            keep = rng.randrange(0, len(model) + 1)
            assert log.truncate_after(keep) == max(0, len(model) - keep)
            del model[keep:]
            epoch = max(epoch, model[-1][0] if model else 1)
        else:
            c = _cmd(step)
            rec = log.append(epoch, c)
            model.append((epoch, c))
            assert rec.offset == len(model)
            if rng.random() < 0.3:
                log.wal.flush()
        assert log.end == len(model)
        # the end of each epoch: the last offset of an epoch <= e
        for e in range(0, epoch + 2):
            # KIP-101 answers the offset before the first record of a later epoch, else the end
            later = [i + 1 for i, (ep, _) in enumerate(model) if ep > e]
            expected = later[0] - 1 if later else len(model)
            assert log.end_of_epoch(e) == expected, (step, e)
        after = rng.randrange(0, len(model) + 1)
        got = log.read(after, max_bytes=1 << 30)
        assert [(r.offset, r.epoch, r.command) for r in got] == [
            (i + 1, ep, c) for i, (ep, c) in enumerate(model) if i + 1 > after]
    log.close()
    again = ReplicaLog(path)
    assert [(r.offset, r.epoch, r.command) for r in again.recover()] == [
        (i + 1, ep, c) for i, (ep, c) in enumerate(model)]
    assert again.end == len(model) and again.last_epoch == (model[-1][0] if model else 0)
    again.close()


def test_replica_log_refuses_an_older_epoch_after_a_newer_one(tmp_path):
    log = ReplicaLog(str(tmp_path / "r"))
    log.append(3, _cmd(1))
    with pytest.raises(ValueError, match="epoch 2 after epoch 3"):
        log.append(2, _cmd(2))
    log.close()


# -- the leader's in-sync set and high watermark, the follower's fencing (no servers) ---------------
class _Driver:
    """What Replication needs of the driver: the engine, the loop, the group commit and the stepper."""

    def __init__(self, loop):
        from windowstore.txn.engine import Engine
        self.engine = Engine()
        self.loop = loop

        class _Dirty:
            def dirty(self):
                pass

            def slide_may_be_due(self):
                pass

            def kick(self):
                pass

            def flush(self):
                pass
        self.group_commit = self.stepper = _Dirty()
        self.ended: dict[str, str] = {}  # periodic query id -> how its subscriptions ended
        self.overloaded = False  # (Driver._admit: clients' writes shed, the server's own not)

    def write(self, cmd, own: bool = False):
        if self.overloaded and not own:
            from windowstore.store.errors import ResourceLimit
            raise ResourceLimit("the server is overloaded")
        return self.engine.apply(cmd), None

    def fail_periodic(self, query_ids, error) -> None:
        self.ended.update((q, f"failed: {error}") for q in query_ids)

    def close_periodic(self, query_ids, reason: str) -> None:
        self.ended.update((q, f"closed: {reason}") for q in query_ids)


def _run_until(loop, predicate, what: str, timeout: float = 30.0) -> None:
    """Run the loop (its posted callbacks) until predicate() holds; fail after `timeout` seconds."""
    loop.run_until_complete(wait_until(predicate, what, timeout=timeout, poll=0.005))


def test_isr_and_high_watermark_follow_acks_and_the_lag_bounds(tmp_path):
    import asyncio

    from windowstore.server.replication import Replication
    from windowstore.store.window import WindowSpec
    from windowstore.txn.commands import Append, CreateStream

    loop = asyncio.new_event_loop()
    now = [0.0]
    repl = Replication(_Driver(loop), str(tmp_path), node=0, addresses=["a:1", "b:2", "c:3"], clock=lambda: now[0])
    repl.lag_records, repl.lag_s = 5, 10.0
    eng = repl.engine
    repl.create_leader("s", [0, 1, 2], "all")
    p = repl.parts["s"]
    assert p.isr == {0, 1, 2}
    eng.apply(CreateStream("s", (("ts", "int64"), ("v", "int64")), "ts", WindowSpec(subwindows=4, subwindow_ms=1000,
                                                                                    clock="manual"), 0.0))
    for i in range(4):
        eng.apply(Append("s", pa.table({"ts": [i], "v": [i]}), "w", i, 1.0))
    assert repl.take(eng.drain()) == []   # the stream's commands go to its replica log, not the server's
    assert p.log.end == 5
    fut = loop.run_until_complete(_committed(repl, "s"))
    _run_until(loop, lambda: p.synced == 5, "the leader's own sync")
    assert p.hw == 0 and not fut.done()     # acks=all: the followers hold nothing yet
    repl.ack("s", 1, 1, 5)
    assert p.hw == 0 and not fut.done()     # node 2 is in sync and holds nothing
    repl.ack("s", 2, 1, 3)
    assert p.hw == 3 and not fut.done()
    now[0] = 11.0                           # node 2 has been behind for longer than lag_s
    repl._check_isr(p)
    assert p.isr == {0, 1} and p.hw == 5 and fut.done()
    with pytest.raises(Exception, match="past the leader's log end"):
        repl.ack("s", 2, 1, 6)
    repl.ack("s", 2, 1, 5)                  # caught up: back in the in-sync set
    assert p.isr == {0, 1, 2}
    for i in range(4, 4 + 7):               # 7 records: node 1 and 2 fall more than lag_records behind
        eng.apply(Append("s", pa.table({"ts": [i], "v": [i]}), "w", i, 12.0))
    repl.take(eng.drain())
    _run_until(loop, lambda: p.synced == 12, "the leader's own sync")
    repl.ack("s", 1, 1, 12)
    repl._check_isr(p)
    assert p.isr == {0, 1} and p.hw == 12
    assert repl.lag() == {"s": 7}
    # a follower at a newer epoch fences this leader: writes are refused from then on
    with pytest.raises(Fenced):
        repl.ack("s", 1, 2, 12)
    with pytest.raises(NotLeader, match="stopped leading"):
        repl.check_write("s")
    repl.close()
    loop.close()


async def _committed(repl, stream):
    return repl.committed(stream)


def test_follower_refuses_records_of_an_older_epoch_and_truncates(tmp_path):
    import asyncio

    from windowstore.server.replication.log import Record
    from windowstore.server.replication.manager import FOLLOWER, Fetcher, Partition
    from windowstore.v1 import windowstore_pb2 as pb

    loop = asyncio.new_event_loop()

    class _Repl:
        node = 1
        driver = _Driver(loop)

        def rebuild(self, p, through):
            rebuilt.append(through)
    rebuilt: list[int] = []
    log = ReplicaLog(str(tmp_path / "r"))
    for i in range(1, 4):
        log.append(1, _cmd(i))
    log.append(2, _cmd(4))
    p = Partition("s", log, FOLLOWER, 2, 0, [0, 1], "all")
    f = Fetcher(_Repl(), p)
    with pytest.raises(Fenced, match="epoch 1 refused"):   # a batch from a leader of an older epoch
        f._batch(None, pb.ReplicaRecords(epoch=1, first_offset=5, records=[Record(5, 1, _cmd(5)).payload()]), 2)
    with pytest.raises(Fenced, match="epoch 1 refused"):   # a record older than this log's last epoch
        f._batch(None, pb.ReplicaRecords(epoch=3, first_offset=5, records=[Record(5, 1, _cmd(5)).payload()]), 3)
    with pytest.raises(Fenced, match="epoch 4 refused"):   # a record newer than its leader's epoch
        f._batch(None, pb.ReplicaRecords(epoch=3, first_offset=5, records=[Record(5, 4, _cmd(5)).payload()]), 3)
    assert log.end == 4
    # the leader says this log's epoch 1 ended at offset 2 (KIP-101): 3 and 4 go, then its record 3 comes
    f._batch(None, pb.ReplicaRecords(epoch=3, truncate_to=2, first_offset=3), 3)
    assert log.end == 2 and log.epochs == [(1, 1)]
    loop.run_until_complete(asyncio.sleep(0))  # the posted rebuild runs
    assert rebuilt == [2]
    log.close()
    loop.close()


def _stream_commands(n: int) -> list:
    """CreateStream of stream `s` and n - 1 appends to it."""
    from windowstore.store.window import WindowSpec
    from windowstore.txn.commands import Append, CreateStream

    return [CreateStream("s", (("ts", "int64"), ("v", "int64")), "ts", WindowSpec(subwindows=4, subwindow_ms=1000,
                                                                                  clock="manual"), 0.0)] + [
        Append("s", pa.table({"ts": [i], "v": [i]}), "w", i, 1.0) for i in range(n - 1)]


def _leader_with_records(tmp_path, loop, n: int):
    """A leader of stream `s` (replicas 0, 1, 2; acks=all) whose log holds _stream_commands(n),
    synced on the leader."""
    from windowstore.server.replication import Replication

    repl = Replication(_Driver(loop), str(tmp_path), node=0, addresses=["127.0.0.1:1", "127.0.0.1:1", "127.0.0.1:1"])
    repl.create_leader("s", [0, 1, 2], "all")
    eng = repl.engine
    for cmd in _stream_commands(n):
        eng.apply(cmd)
    repl.take(eng.drain())
    p = repl.parts["s"]
    _run_until(loop, lambda: p.synced == n, "the leader's own sync")
    return repl, p


def test_a_restarted_replica_keeps_its_high_watermark_not_its_log_end(tmp_path):
    """The leader's log holds 5 records, every in-sync replica only 3: after a restart its high
    watermark is 3, so once the in-sync set is the three replicas again (an election in etcd gives
    it back) a write waiting for offset 5 is acknowledged only when both followers hold it."""
    import asyncio

    from windowstore.server.replication import Replication

    loop = asyncio.new_event_loop()
    repl, p = _leader_with_records(tmp_path, loop, 5)
    repl.ack("s", 1, 1, 5)
    repl.ack("s", 2, 1, 3)
    assert p.hw == 3
    repl.close()

    again = Replication(_Driver(loop), str(tmp_path), node=0, addresses=["127.0.0.1:1"] * 3)
    assert again.recover(again.engine) == {"s": 5}
    q = again.parts["s"]
    assert q.log.end == 5 and q.hw == 3
    q._check()
    again.become_follower("s", 1, 2)          # (then elected again, with every replica in sync)
    again.become_leader("s", 3, in_sync={1, 2})
    assert q.isr == {0, 1, 2}
    fut = loop.run_until_complete(_committed(again, "s"))
    assert fut is not None and not fut.done() and q.hw == 3
    q._check()
    again.ack("s", 1, 3, 5)
    assert not fut.done()
    again.ack("s", 2, 3, 5)
    assert fut.done() and q.hw == 5
    q._check()
    again.close()
    loop.close()


def test_a_follower_restarted_after_a_truncation_keeps_the_lower_high_watermark(tmp_path):
    """A follower's high watermark is the leader's, never past its own log; it is checkpointed, and a
    truncation below it lowers it."""
    import asyncio

    from windowstore.server.replication import Replication
    from windowstore.server.replication.log import Record
    from windowstore.server.replication.manager import Fetcher
    from windowstore.v1 import windowstore_pb2 as pb

    loop = asyncio.new_event_loop()
    repl = Replication(_Driver(loop), str(tmp_path), node=1, addresses=["127.0.0.1:1"] * 2)
    p = repl.become_follower("s", 0, 1, [0, 1])
    p.fetcher.stop()
    p.fetcher.join(10)
    f = Fetcher(repl, p)

    class _Stub:
        def ReplicaAck(self, request, timeout):
            return pb.ReplicaAckResponse(high_watermark=0)
    cmds = [commands.encode(c) for c in _stream_commands(4)]
    f._batch(_Stub(), pb.ReplicaRecords(epoch=1, first_offset=1, high_watermark=3,
                                        records=[Record(i + 1, 1, c).payload() for i, c in enumerate(cmds)]), 1)
    assert p.log.end == 4 and p.hw == 3
    f._batch(_Stub(), pb.ReplicaRecords(epoch=2, truncate_to=2, first_offset=3, high_watermark=2), 2)
    assert p.log.end == 2 and p.hw == 2
    loop.run_until_complete(asyncio.sleep(0))  # (the posted rebuild)
    p._check()
    repl.close()
    again = Replication(_Driver(loop), str(tmp_path), node=1, addresses=["127.0.0.1:1"] * 2)
    again.recover(again.engine)
    assert again.parts["s"].hw == 2
    again.close()
    loop.close()


def test_a_write_admitted_before_its_leader_stepped_down_is_not_acknowledged(tmp_path):
    """Static roles: a write admitted at epoch 1 whose leader then follows a newer epoch, or is
    fenced by a follower at one, before the group commit (which leaves it out of the replica log)
    fails UNAVAILABLE instead of being acknowledged by nobody's log."""
    import asyncio

    from windowstore.server.driver.errors import Unavailable as ServerUnavailable
    from windowstore.txn.commands import Append

    loop = asyncio.new_event_loop()

    async def write(repl, step_down):
        repl.check_write("s")                  # admitted at epoch 1
        step_down(repl)                        # ... before the group commit
        repl.engine.apply(Append("s", pa.table({"ts": [9], "v": [9]}), "w", 9, 1.0))
        assert repl.take(repl.engine.drain()) == []
        return repl.committed("s")

    def fenced(repl):                          # a follower fetches at epoch 2
        with pytest.raises(Fenced):
            repl.ack("s", 1, 2, 2)

    def follows(repl):                         # told to follow node 1 at epoch 2
        repl.become_follower("s", 1, 2)

    for i, step_down in enumerate((fenced, follows)):
        repl, p = _leader_with_records(tmp_path / str(i), loop, 2)
        for n in (1, 2):
            repl.ack("s", n, 1, 2)
        assert p.hw == 2
        with pytest.raises(ServerUnavailable, match="stopped leading"):
            loop.run_until_complete(write(repl, step_down))
        assert p.log.end == 2
        p._check()
        repl.close()
    loop.close()


# -- two servers ---------------------------------------------------------------------------------------
SCHEMA = {"ts": "int64", "k": "string", "v": "int64"}


class Pair:
    """Two durable servers, node 0 and node 1; stream `pk` listed with replicas [0, 1]."""

    def __init__(self, tmp_path):
        self.ports = free_ports(2)
        self.metrics_port = free_ports(1)[0]  # node 0's --metrics-port
        self.addresses = [f"127.0.0.1:{p}" for p in self.ports]
        self.file = tmp_path / "cluster.toml"
        self.file.write_text("nodes = [" + ", ".join(f'"{a}"' for a in self.addresses) + "]\n"
                             "[replicas]\npk = [0, 1]\n")
        self.dirs = [str(tmp_path / f"node{i}") for i in range(2)]
        self.servers: list[ServerProcess | None] = [self.start(0), self.start(1)]

    def start(self, i: int) -> ServerProcess:
        metrics = ("--metrics-port", str(self.metrics_port)) if i == 0 else ()
        return ServerProcess("--cluster", str(self.file), "--node", str(i), *metrics, port=self.ports[i],
                             data_dir=self.dirs[i])

    def lag_metric(self) -> float | None:
        """Node 0's windowstore_replica_lag_records for stream pk, from its /metrics."""
        import urllib.request
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10).read().decode()
        for line in text.splitlines():
            if line.startswith('windowstore_replica_lag_records{stream="pk"}'):
                return float(line.split()[-1])
        return None

    def client(self, i: int) -> Client:
        return Client(self.addresses[i], timeout=30, retries=0)

    def stop(self) -> None:
        for s in self.servers:
            if s is not None:
                s.stop()


@pytest.fixture
def pair(tmp_path):
    p = Pair(tmp_path)
    try:
        yield p
    finally:
        p.stop()


def _batch(rng: random.Random, b: int, n: int) -> pa.Table:
    return pa.table({"ts": pa.array(range(b * n, b * n + n), pa.int64()),
                     "k": pa.array([rng.choice("abcde") for _ in range(n)]),
                     "v": pa.array([rng.randrange(-100, 1000) for _ in range(n)], pa.int64())})


def _expected(batches: dict[int, tuple[pa.Table, int]], slide: int, window: int) -> list[tuple]:
    """DuckDB over the rows sealed by slides (slide - window, slide]: COUNT, SUM(v) per k."""
    tables = [t for t, s in batches.values() if slide - window < s <= slide]
    rows = pa.concat_tables(tables)  # noqa: F841 - DuckDB reads it by name
    return duckdb.sql("SELECT k, COUNT(*), SUM(v) FROM rows GROUP BY k ORDER BY k").fetchall()


QUERY = "SELECT k, COUNT(*), SUM(v) FROM pk GROUP BY k ORDER BY k"
WINDOW = 1000


def _answer_rows(answer) -> list[tuple]:
    return [tuple(r) for r in answer.rows]


@pytest.mark.slow
def test_acks_all_kill_leader_promote_follower_rejoin_truncated(pair):
    rng = random.Random(11)
    with pair.client(0) as ws:
        ws.create_stream("pk", SCHEMA, subwindows=WINDOW, subwindow_ms=1000, clock="manual", replication=2)
        status = ws.replica_status("pk")
        assert status["role"] == "REPLICA_ROLE_LEADER" and status["acks"] == "all" and status["replicas"] == [0, 1]
    with pair.client(1) as f:
        wait_for(lambda: f.replica_status("pk")["role"] == "REPLICA_ROLE_FOLLOWER", "node 1 follows pk")
        with pytest.raises(FailedPrecondition, match="follower replica of 'pk'.*node 0"):
            f.append("pk", _batch(rng, 0, 3), writer_id="x", batch_id=0)
        with pytest.raises(FailedPrecondition, match="read_from='follower'"):
            f.query(QUERY)

    batches: dict[int, tuple[pa.Table, int]] = {}   # acknowledged: batch id -> (rows, the slide that sealed them)
    leader = {"i": 0}
    total, per = 60, 200
    done = threading.Event()
    errors: list[str] = []

    def writer():
        clients = [pair.client(0), pair.client(1)]
        try:
            for b in range(total):
                t = _batch(rng, b, per)
                while True:
                    ws = clients[leader["i"]]
                    try:
                        ws.append("pk", t, writer_id="w", batch_id=b)
                        slide = ws.slide("pk", writer_id="w", batch_id=b)
                        break
                    except (Unavailable, FailedPrecondition) as e:
                        errors.append(str(e))
                        done.wait(0.05)  # backoff before the retry (same ids: exactly once)
                with acked:
                    batches[b] = (t, slide)
                    acked.notify_all()
        finally:
            for c in clients:
                c.close()
            with acked:
                done.set()
                acked.notify_all()

    acked = threading.Condition()  # notified at each acknowledged batch, and when the writer ends
    th = threading.Thread(target=writer)
    th.start()
    with acked:
        assert acked.wait_for(lambda: len(batches) >= 20 or done.is_set(), 60) and len(batches) >= 20, \
            f"20 batches acknowledged ({errors[-3:]})"
    pair.servers[0].proc.send_signal(signal.SIGKILL)
    pair.servers[0].proc.wait()
    acked_before_kill = dict(batches)
    with pair.client(1) as f:
        st = f.set_replica_role("pk", "leader", epoch=2)
        assert st["role"] == "REPLICA_ROLE_LEADER" and st["epoch"] == 2
    leader["i"] = 1
    th.join(120)
    assert not th.is_alive() and len(batches) == total, errors[-3:]

    with pair.client(1) as ws:
        a = ws.query(QUERY)
        assert _answer_rows(a) == _expected(batches, a.slide, WINDOW)
        assert sum(r[1] for r in a.rows) == total * per  # every acknowledged row, none twice
        for b, (t, s) in acked_before_kill.items():
            assert batches[b][1] == s  # what was acknowledged before the kill kept its slide
        # an old epoch is refused
        with pytest.raises(FailedPrecondition, match="epoch 1"):
            ws.set_replica_role("pk", "follower", epoch=1, leader=0)
        leader_end = ws.replica_status("pk")["end_offset"]

    # the old leader comes back (it still thinks it leads at epoch 1) and is made a follower
    pair.servers[0] = pair.start(0)
    with pair.client(0) as old:
        st = old.set_replica_role("pk", "follower", epoch=2, leader=1)
        assert st["epoch"] == 2
        wait_for(lambda: old.replica_status("pk")["applied_offset"] >= leader_end, "the old leader caught up")
        st = old.replica_status("pk")
        assert st["end_offset"] == leader_end and st["lag_records"] == 0
        a0 = old.query(QUERY, read_from="follower", min_slide=batches[total - 1][1])
        assert _answer_rows(a0) == _expected(batches, a0.slide, WINDOW)
        assert a0.slide == batches[total - 1][1]
        with pytest.raises(Unavailable, match=f"slide {a0.slide + 5} .*not applied"):
            old.query(QUERY, read_from="follower", min_slide=a0.slide + 5, min_slide_wait_ms=200)
        with pytest.raises(InvalidArgument, match="read_from"):
            old.query(QUERY, read_from="nearest")
    with pair.client(1) as ws:
        st = ws.replica_status("pk")
        wait_for(lambda: ws.replica_status("pk")["in_sync"] == [0, 1], "node 0 back in the in-sync set")
        assert ws.replica_status("pk")["followers"][0]["lag_records"] == 0
        # new writes reach the rejoined follower
        t = _batch(rng, total, per)
        ws.append("pk", t, writer_id="w", batch_id=total)
        batches[total] = (t, ws.slide("pk", writer_id="w", batch_id=total))
    with pair.client(0) as old:
        a0 = old.query(QUERY, read_from="follower", min_slide=batches[total][1], min_slide_wait_ms=30_000)
        assert a0.slide == batches[total][1]
        assert _answer_rows(a0) == _expected(batches, a0.slide, WINDOW)


@pytest.mark.slow
def test_a_follower_down_at_creation_is_named_then_catches_up_from_the_start(pair):
    rng = random.Random(5)
    pair.servers[1].stop()
    pair.servers[1] = None
    with pair.client(0) as ws:
        with pytest.raises(Unavailable, match=r"could not be told to follow it: node 1 \(127\.0\.0\.1:"):
            ws.create_stream("pk", SCHEMA, subwindows=WINDOW, subwindow_ms=1000, clock="manual", replication=2)
        st = ws.replica_status("pk")
        assert st["in_sync"] == [0] and st["role"] == "REPLICA_ROLE_LEADER"
        batches = {}
        for b in range(5):   # acks=all with the leader alone in sync
            t = _batch(rng, b, 50)
            ws.append("pk", t, writer_id="w", batch_id=b)
            batches[b] = (t, ws.slide("pk", writer_id="w", batch_id=b))
        end = ws.replica_status("pk")["end_offset"]
    assert pair.lag_metric() == end   # node 1 holds nothing of the leader's log
    pair.servers[1] = pair.start(1)
    with pair.client(1) as f:
        f.set_replica_role("pk", "follower", epoch=1, leader=0, replicas=[0, 1])
        wait_for(lambda: f.replica_status("pk")["applied_offset"] == end, "node 1 caught up from offset 1")
        a = f.query(QUERY, read_from="follower", min_slide=batches[4][1])
        assert a.slide == batches[4][1] and _answer_rows(a) == _expected(batches, a.slide, WINDOW)
    with pair.client(0) as ws:
        wait_for(lambda: ws.replica_status("pk")["in_sync"] == [0, 1], "node 1 in sync")
    assert pair.lag_metric() == 0


@pytest.mark.slow
def test_the_old_leader_loses_exactly_its_unacknowledged_suffix(pair):
    """A write the leader logged but no follower received (the follower down): never acknowledged
    under acks=all; after the leader's kill -9 and the follower's restart and promotion, the old
    leader rejoins, truncates it away, and holds the new leader's log exactly."""
    rng = random.Random(3)
    with pair.client(0) as ws:
        ws.create_stream("pk", SCHEMA, subwindows=WINDOW, subwindow_ms=1000, clock="manual", replication=2)
        batches = {}
        for b in range(3):
            t = _batch(rng, b, 40)
            ws.append("pk", t, writer_id="w", batch_id=b)
            batches[b] = (t, ws.slide("pk", writer_id="w", batch_id=b))
        end = ws.replica_status("pk")["end_offset"]
    with pair.client(1) as f:
        wait_for(lambda: f.replica_status("pk")["durable_offset"] == end, "node 1 holds everything")
    pair.servers[1].proc.send_signal(signal.SIGKILL)
    pair.servers[1].proc.wait()
    outcome: list = []

    def unacknowledged():
        with pair.client(0) as ws:
            try:
                ws.append("pk", _batch(rng, 99, 40), writer_id="w", batch_id=99)
                outcome.append("acknowledged")
            except Exception as e:  # noqa: BLE001 - the leader dies under it
                outcome.append(e)
    th = threading.Thread(target=unacknowledged)
    th.start()
    with pair.client(0) as ws:
        wait_for(lambda: ws.replica_status("pk")["durable_offset"] == end + 1, "batch 99 on the leader's disk")
    pair.servers[0].proc.send_signal(signal.SIGKILL)
    pair.servers[0].proc.wait()
    th.join(30)
    assert len(outcome) == 1 and outcome[0] != "acknowledged"
    pair.servers[1] = pair.start(1)
    with pair.client(1) as f:
        f.set_replica_role("pk", "leader", epoch=2)
        t = _batch(rng, 3, 40)
        f.append("pk", t, writer_id="w", batch_id=3)
        batches[3] = (t, f.slide("pk", writer_id="w", batch_id=3))
        new_end = f.replica_status("pk")["end_offset"]
    assert new_end == end + 2  # batch 3 and its slide, at the offsets batch 99 had on node 0
    pair.servers[0] = pair.start(0)
    with pair.client(0) as old:
        assert old.replica_status("pk")["end_offset"] == end + 1   # batch 99 is still in its log
        old.set_replica_role("pk", "follower", epoch=2, leader=1)
        wait_for(lambda: old.replica_status("pk")["applied_offset"] == new_end, "the old leader caught up")
        a = old.query(QUERY, read_from="follower", min_slide=batches[3][1])
        assert _answer_rows(a) == _expected(batches, a.slide, WINDOW)   # no row of batch 99
        assert sum(r[1] for r in a.rows) == 4 * 40
    assert "truncated 1 records after offset" in pair.servers[0].stop()[2]
    pair.servers[0] = None


def test_a_write_left_out_of_the_log_does_not_stay_in_the_engine_after_a_step_down(tmp_path):
    """A write admitted and applied by a leader that is fenced before the group commit is left out
    of its replica log (refused UNAVAILABLE, test above); when the replica follows, its engine holds
    the stream as its log has it, not the refused row: its state equals a fresh engine replaying
    the log."""
    import asyncio

    from windowstore.txn.commands import Append
    from windowstore.txn.engine import Engine

    loop = asyncio.new_event_loop()
    repl, p = _leader_with_records(tmp_path, loop, 3)
    repl.check_write("s")
    repl.engine.apply(Append("s", pa.table({"ts": [9], "v": [9]}), "w", 9, 1.0))  # admitted, applied ...
    with pytest.raises(Fenced):
        repl.ack("s", 1, 2, 3)                 # ... and a follower at epoch 2 fences this leader
    assert repl.take(repl.engine.drain()) == [] and p.log.end == 3
    fresh = Engine()
    for rec in p.log.read_disk(0, p.log.end):
        fresh.replay(commands.decode(rec.command))
    assert repl.engine.digest() != fresh.digest()  # the refused row is in the engine
    repl.become_follower("s", 1, 2)
    assert repl.engine.digest() == fresh.digest()
    p._check()
    repl.close()
    loop.close()


def test_a_replica_that_steps_down_unregisters_its_periodic_queries_and_names_the_leader(tmp_path):
    """A periodic query registered on the leader of `s` (in the server's own log, not the replica
    log) is unregistered when the replica follows: kept, it would answer on a follower nobody
    reads. Its id answers NotLeader naming the new leader until this replica leads `s` again."""
    import asyncio

    from windowstore.server.replication.manager import NotLeader
    from windowstore.txn.commands import Register

    loop = asyncio.new_event_loop()
    repl, p = _leader_with_records(tmp_path, loop, 2)
    eng = repl.engine
    q = eng.apply(Register("", "SELECT COUNT(*) FROM s [SLIDE 1 SUBWINDOWS]", 0, 1.0)).task.id
    other = eng.apply(Register("", "SELECT COUNT(*) FROM s [SLIDE 2 SUBWINDOWS]", 0, 1.0)).task.id
    repl.moved_query(q)                        # leading: nothing to say of it
    repl.driver.overloaded = True              # (an overloaded server sheds clients' writes, not these)
    repl.become_follower("s", 1, 2)
    assert q not in eng.periodic and other not in eng.periodic
    assert repl.driver.ended[q].startswith("closed: node 0 stopped leading 's'")
    with pytest.raises(NotLeader, match="unregistered here") as e:
        repl.moved_query(q)
    assert e.value.leader == "127.0.0.1:1"
    repl.moved_query("no-such-query")          # an id never registered: the caller's NOT_FOUND
    repl.become_leader("s", 3, in_sync={1, 2})
    repl.moved_query(q)                        # leading again: its clients registered it anew
    p._check()
    repl.close()
    loop.close()
