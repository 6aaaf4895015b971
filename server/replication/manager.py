"""Roles of this server's replicated streams, and the data path between a leader and its followers.

A replicated stream has a leader and followers on other nodes of the cluster, each with the
stream's replica log (log.py) and the stream in its engine rebuilt from that log alone: the
stream's commands are kept out of the server's own write-ahead log, and at start-up the stream is
replayed from its replica log (so the window and the log never disagree after a crash).

- **Leader.** The commands the engine applied to the stream (drained by the group commit, `take`)
  are appended to its log with the leader's epoch and synced on a thread of their own. Followers
  fetch them (`fetch`, a server stream) and report what they hold durably (`ack`). The in-sync
  set is the leader and the followers not lagging more than `lag_records` records or, while
  behind, `lag_s` seconds since they last caught up; the high watermark is the offset every in-sync
  replica holds. A write waits (`committed`) for the leader's log (acks=leader) or the high
  watermark (acks=all).
- **Follower.** A thread fetches from the leader, refuses records of an older epoch than its own
  (fencing), truncates its log where the leader's says its last epoch ended (KIP-101) and rebuilds
  the stream from what is left, appends and syncs what it gets, acknowledges it, and applies it to
  the engine through the same replay as recovery. Its own clock never slides the stream
  (Scheduler.passive): slides come as the leader's commands.

Roles are given from outside, `become_leader(stream, epoch)` and `become_follower(stream, leader,
epoch)`: by the leader when it creates the stream (static roles from the cluster file), by an
operator (`SetReplicaRole`) or a coordinator. Each is kept in `role.json` next to the log.
Runs on the server's event loop except the follower's fetch thread and the leader's log syncer.
"""
from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from windowstore.store.errors import InvalidInput, StoreError
from windowstore.txn import commands
from windowstore.txn.commands import Answered, AnsweredMany, CreateStream, DropStream, Register, Unregister
from windowstore.txn.errors import FailedPrecondition

from .. import oplog
from ..driver.errors import Unavailable
from ..driver.loop_util import post, settle
from ..durability import Syncer
from ..wal import fsync_dir
from .log import Record, ReplicaLog

log = logging.getLogger("windowstore.replication")

LEADER, FOLLOWER = "leader", "follower"
ACKS = ("leader", "all")
HW_FILE = "high_watermark"
MOVED_KEEP = 10_000  # ids of periodic queries a step-down unregistered, still answered NotLeader

# (stream, epoch) a write was admitted at, for the request (gRPC handler task) that admitted it
_ADMITTED: contextvars.ContextVar[tuple[str, int] | None] = contextvars.ContextVar("windowstore_admitted", default=None)


class NotLeader(FailedPrecondition):
    """This replica does not take writes (or reads without read_from=follower): FAILED_PRECONDITION.
    `leader` is the leader's address when this replica knows it: the status carries it as trailing
    metadata (rpc.py) for clients that follow the leader (clients/follow.py, docs/failover.md)."""

    def __init__(self, message: str, leader: str = ""):
        super().__init__(message)
        self.leader = leader


class Fenced(FailedPrecondition):
    """A record or request of an older epoch than the replica's: refused."""


def stream_of(cmd) -> str | None:
    if isinstance(cmd, (CreateStream, DropStream)):
        return cmd.name
    return getattr(cmd, "stream", None)


class RegistrationsOfReplicas:
    """Called with each command of the server's own log at recovery: False for the periodic
    queries of replicated streams (their Register, and the Answered and Unregister records of the
    ids so registered). Those streams are rebuilt from their replica logs after the server's log
    (which holds the registrations, rpcs.py), so a registration cannot be replayed, and it is not
    kept across a restart: the client registers the query again on the leader (docs/failover.md)."""

    def __init__(self, replicated: set[str]):
        self.replicated = replicated
        self.skipped: set[str] = set()

    def __call__(self, cmd) -> bool:
        if isinstance(cmd, Register):
            from windowstore.store.parser import parse_statement
            from windowstore.store.query import JoinQuery

            q = parse_statement(cmd.text)
            names = q.streams if isinstance(q, JoinQuery) else [q.stream]
            if self.replicated.intersection(names):
                self.skipped.add(cmd.query_id)
                return False
            self.skipped.discard(cmd.query_id)  # (an id used again after a restart)
            return True
        if isinstance(cmd, (Answered, Unregister)):
            return cmd.query_id not in self.skipped
        if isinstance(cmd, AnsweredMany):  # a shared execution's: replay skips the ids not registered
            return any(qid not in self.skipped for qid in cmd.query_ids())
        return True


class HeldAnswer:
    """A periodic answer of a leader with acks=all, published once every replicated stream it reads
    has its slide below the high watermark (`Replication.hold_answer`)."""

    def __init__(self, streams: set[str], publish: Callable[[], None]):
        self.waiting = set(streams)  # streams whose high watermark has not reached the answer's slide yet
        self.publish = publish

    def released(self, stream: str) -> None:
        self.waiting.discard(stream)
        if not self.waiting:
            self.publish()


@dataclass
class FollowerState:
    acked: int = 0            # durable on the follower through this offset
    target: int = 0           # the leader's end at the follower's previous ack
    caught_up_at: float = 0.0  # when it last held what the leader had at its previous ack


@dataclass
class Partition:
    stream: str
    log: ReplicaLog
    role: str
    epoch: int
    leader: int
    replicas: list[int]
    acks: str
    applied: int = 0          # the last offset applied to the engine
    synced: int = 0           # leader: the last offset durable in its own log
    hw: int = 0
    followers: dict[int, FollowerState] = field(default_factory=dict)
    isr: set[int] = field(default_factory=set)
    waiters: list = field(default_factory=list)       # (offset, needs, future)
    slide_waiters: list = field(default_factory=list)  # (slide, future)
    wake: asyncio.Event = field(default_factory=asyncio.Event)  # new records for the fetch streams
    syncer: Syncer | None = None
    fetcher: "Fetcher | None" = None
    failure: str | None = None
    hw_saved: int = -1        # the high watermark last written to HW_FILE
    diverged: bool = False    # the engine applied a command its log left out: rebuilt when it follows
    held: list = field(default_factory=list)  # leader, acks=all: (offset or None, HeldAnswer) not yet published

    def _check(self) -> None:
        """Offsets in order: no replica counts as acknowledged (hw) or applies what its log does not
        hold; a leading leader's durable offset is in its log, and it is in its own in-sync set."""
        end = self.log.end
        assert 0 <= self.hw <= end, f"{self.stream}: high watermark {self.hw} past the log's end {end}"
        assert 0 <= self.applied <= end, f"{self.stream}: applied offset {self.applied} past the log's end {end}"
        if self.role == LEADER and self.syncer is not None:  # (leading: not a role read from disk, not yet taken up)
            assert self.synced <= end, f"{self.stream}: durable offset {self.synced} past the log's end {end}"
            assert self.leader in self.isr, f"{self.stream}: the leader {self.leader} is not in its in-sync set {self.isr}"
        offsets = [offset for offset, _ in self.held if offset is not None]
        assert offsets == sorted(offsets), f"{self.stream}: held answers out of log order {offsets}"
        assert all(self.hw < o <= end for o in offsets), \
            f"{self.stream}: a held answer's offset in {offsets} is not in (high watermark {self.hw}, log end {end}]"


class Replication:
    def __init__(self, driver, data_dir: str, node: int, addresses: list[str], fsync: str = "always",
                 clock: Callable[[], float] = time.monotonic, peers: dict[int, str] | None = None):
        self.driver = driver
        self.engine = driver.engine
        self.dir = os.path.join(os.path.abspath(data_dir), "replicas")
        os.makedirs(self.dir, exist_ok=True)
        self.node = node
        self.addresses = addresses
        self.peers = dict(peers or {})  # node -> the address this server reaches it at (--peer-address)
        self.fsync = fsync
        self.clock = clock
        self.lag_records = 1_000_000
        self.lag_s = 10.0
        self.parts: dict[str, Partition] = {}
        self.moved: dict[str, str] = {}  # query id -> stream: unregistered at a step-down (_end_subscriptions)
        self._timer: asyncio.TimerHandle | None = None
        self._plain_slide_waiters: dict[str, list] = {}  # min_slide reads of streams not replicated

    # -- start-up (the recovery thread, before serving) ---------------------------------------------
    def held(self) -> set[str]:
        """The streams this server holds replicas of (by their role files), before recover()."""
        out = set()
        for name in os.listdir(self.dir):
            role_file = os.path.join(self.dir, name, "role.json")
            if os.path.exists(role_file):
                with open(role_file) as f:
                    out.add(json.load(f)["stream"])
        return out

    def server_log_filter(self) -> "RegistrationsOfReplicas":
        """What the server's own log replays before the replicated streams exist: see
        RegistrationsOfReplicas."""
        return RegistrationsOfReplicas(self.held())

    def recover(self, engine) -> dict:
        """Rebuild every replicated stream from its replica log (the copy a snapshot may hold is
        dropped first), and take up the roles on disk. Returns {stream: records replayed}."""
        out = {}
        for name in sorted(os.listdir(self.dir)):
            path = os.path.join(self.dir, name)
            role_file = os.path.join(path, "role.json")
            if not os.path.exists(role_file):
                continue
            with open(role_file) as f:
                role = json.load(f)
            rlog = ReplicaLog(path, self.fsync)
            stream = role["stream"]
            if stream in engine.sched.streams:
                engine.replay(DropStream(stream, engine.now_ms))
            n = 0
            for rec in rlog.recover():
                engine.replay(commands.decode(rec.command))
                n += 1
            engine.drain()
            hw = min(_read_hw(path), rlog.end)
            p = Partition(stream, rlog, role["role"], role["epoch"], role["leader"], role["replicas"], role["acks"],
                          applied=rlog.end, synced=rlog.end, hw=hw, hw_saved=hw)
            self.parts[stream] = p
            if p.role == FOLLOWER:
                engine.sched.passive.add(stream)
            out[stream] = n
        return out

    def start(self) -> None:
        """On the loop, serving: fetch threads of the followers, the in-sync check timer."""
        for p in self.parts.values():
            if p.role == LEADER:
                # every replica counts as in sync until it lags lag_s (as at creation): with this
                # replica alone in the set, its high watermark would jump to its log's end
                self._lead(p, fresh=True)
            else:
                self._follow(p)
        self._arm()

    def _arm(self) -> None:
        self._timer = self.driver.loop.call_later(min(1.0, self.lag_s / 4), self._tick)

    def _tick(self) -> None:
        for p in self.parts.values():
            if p.role == LEADER:
                self._check_isr(p)
            self._save_hw(p)
        self._arm()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for p in self.parts.values():
            if p.fetcher is not None:
                p.fetcher.stop()
            if p.syncer is not None:
                p.syncer.stop()
        for p in self.parts.values():
            if p.fetcher is not None:
                p.fetcher.join(5)
            try:
                self._save_hw(p)
                p.log.close()
            except OSError as e:
                log.error("closing the replica log of %s: %s", p.stream, e)

    # -- roles ---------------------------------------------------------------------------------------
    def _save(self, p: Partition) -> None:
        path = os.path.join(p.log.directory, "role.json")
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"stream": p.stream, "role": p.role, "epoch": p.epoch, "leader": p.leader,
                       "replicas": p.replicas, "acks": p.acks}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(p.log.directory)

    def _save_hw(self, p: Partition) -> None:
        """Checkpoint the high watermark (Kafka's replication-offset-checkpoint), so that a restarted
        replica does not take its log's end, which may hold records no acks=all write was
        acknowledged for, as acknowledged by every in-sync replica. Written now and then (each
        in-sync check, and at close), not synced: a checkpoint older than the high watermark only
        makes waiting writes wait for the followers again; a lost or torn one reads as 0."""
        if p.hw == p.hw_saved:
            return
        path = os.path.join(p.log.directory, HW_FILE)
        try:
            with open(path + ".tmp", "w") as f:
                f.write(str(p.hw))
            os.replace(path + ".tmp", path)
            p.hw_saved = p.hw
        except OSError as e:
            log.warning("stream %s: high watermark not checkpointed: %s", p.stream, e)

    def _new_partition(self, stream: str, role: str, epoch: int, leader: int, replicas: list[int],
                       acks: str) -> Partition:
        path = os.path.join(self.dir, _dirname(stream))
        p = Partition(stream, ReplicaLog(path, self.fsync), role, epoch, leader, list(replicas), acks)
        list(p.log.recover())  # (empty, or left by a stream of this name that was dropped: positions it)
        p.applied = p.synced = p.log.end
        p.hw = p.hw_saved = min(_read_hw(path), p.log.end)
        self.parts[stream] = p
        self._save(p)
        return p

    def create_leader(self, stream: str, replicas: list[int], acks: str) -> None:
        """Before the stream's CreateStream is applied: this node leads it at epoch 1, and every
        replica starts in sync (a write with acks=all waits for the followers to fetch it)."""
        if acks not in ACKS:
            raise InvalidInput(f"acks must be one of {', '.join(ACKS)}, got {acks!r}")
        if stream in self.engine.sched.streams or stream in self.parts:
            from windowstore.txn.engine import AlreadyExists
            raise AlreadyExists(f"stream {stream!r} already exists")
        p = self._new_partition(stream, LEADER, 1, self.node, replicas, acks)
        self._lead(p, fresh=True)

    def forget(self, stream: str) -> None:
        """The stream could not be created: its replica state goes."""
        p = self.parts.pop(stream, None)
        if p is not None:
            if p.syncer is not None:
                p.syncer.stop()
            p.log.remove()
            os.remove(os.path.join(p.log.directory, "role.json"))

    def _lead(self, p: Partition, fresh: bool, in_sync: set[int] | frozenset[int] = frozenset()) -> None:
        """Lead `p`: every replica in sync if `fresh`, else this one and those of `in_sync` (the set
        an election in etcd gives it, counted before the high watermark is computed: else it would
        jump to this log's end, and a retried write of a record the followers do not hold would be
        acknowledged at once)."""
        p.role, p.leader = LEADER, self.node
        p.syncer = p.syncer or Syncer(p.log.wal)
        now = self.clock()
        others = [n for n in p.replicas if n != self.node]
        p.followers = {n: FollowerState(caught_up_at=now) for n in others}
        p.isr = {self.node, *others} if fresh else {self.node} | {n for n in in_sync if n in p.followers}
        self.engine.sched.passive.discard(p.stream)
        self._update_hw(p)

    def become_leader(self, stream: str, epoch: int, in_sync: set[int] | frozenset[int] = frozenset()) -> Partition:
        """Take writes for `stream` from now on, at `epoch` (greater than this replica's), with the
        followers `in_sync` in the in-sync set (none: this replica alone, after a promotion by hand).
        What the follower had fetched is applied first; its records are kept (the others truncate
        to them)."""
        p = self._part(stream)
        if epoch <= p.epoch:
            raise Fenced(f"stream {stream!r}: epoch {epoch} is not newer than this replica's epoch {p.epoch}")
        if p.fetcher is not None:
            p.fetcher.stop()
            p.fetcher.join(10)
            p.fetcher = None
        self._apply_pending(p)
        # what that applied is drained now, while this replica still follows: it is in the log already
        self.driver.group_commit.flush()
        p.epoch = epoch
        p.synced = p.log.end
        p.failure = None
        self._lead(p, fresh=False, in_sync=in_sync)
        self._save(p)
        self.moved = {q: s for q, s in self.moved.items() if s != stream}  # (its clients registered them anew)
        oplog.event("replica_leader", stream=stream, epoch=epoch, end_offset=p.log.end)
        self.engine.sched.passive.discard(stream)
        self.driver.stepper.slide_may_be_due()
        self.driver.stepper.kick()
        return p

    def become_follower(self, stream: str, leader: int, epoch: int, replicas: list[int] | None = None,
                        acks: str = "all") -> Partition:
        """Follow node `leader` at `epoch`: stop taking writes (those waiting fail UNAVAILABLE),
        fetch from it, truncating first where it says."""
        if not 0 <= leader < len(self.addresses) or leader == self.node:
            raise InvalidInput(f"leader must be another node of the cluster (0 to {len(self.addresses) - 1}, "
                               f"not {self.node}), got {leader}")
        p = self.parts.get(stream)
        if p is None and stream in self.engine.sched.streams:
            from windowstore.txn.engine import AlreadyExists
            raise AlreadyExists(f"stream {stream!r} exists on this server and is not replicated")
        if p is None:
            if not replicas:
                raise InvalidInput(f"this server holds no replica of {stream!r}: give its replicas")
            p = self._new_partition(stream, FOLLOWER, epoch, leader, replicas, acks)
        else:
            if epoch < p.epoch or (epoch == p.epoch and (p.role == LEADER or leader != p.leader)):
                raise Fenced(f"stream {stream!r}: epoch {epoch} is older than this replica's epoch {p.epoch}"
                             if epoch < p.epoch else f"stream {stream!r}: epoch {epoch} already has leader {p.leader}")
            if p.fetcher is not None:
                p.fetcher.stop()
                p.fetcher.join(10)
                p.fetcher = None
            was_leader = p.role == LEADER
            if was_leader:
                # what the engine applied while this replica led goes to its log at the old epoch
                # first, where the new leader's truncation (KIP-101) finds it and rebuilds the stream
                self.driver.group_commit.flush()
            p.role, p.epoch, p.leader = FOLLOWER, epoch, leader
            if replicas:
                p.replicas = list(replicas)
            self._fail_waiters(p, f"node {self.node} is no longer the leader of {stream!r} (epoch {epoch}: node {leader})")
            p.held = []  # answers of slides the new leader may not have: never published (hold_answer)
            if was_leader:
                self._end_subscriptions(p)
            if was_leader and p.syncer is not None:
                p.syncer.stop()  # everything it had is written and synced
                p.syncer = None
            p.wake.set()
            self._save(p)
            if p.diverged:  # (a fenced leader's writes, left out of its log): the stream as its log has it
                self.rebuild(p, p.log.end)
                p.diverged = False
        oplog.event("replica_follower", stream=stream, epoch=epoch, leader=leader, end_offset=p.log.end)
        self._follow(p)
        return p

    def _end_subscriptions(self, p: Partition) -> None:
        """A replica that steps down ends the subscriptions of its periodic queries on the stream
        with NotLeader naming the new leader, and unregisters them: their registrations live in
        this server's own log, not in the stream's replica log, so they are not the new leader's;
        the client that registered them registers them again there (clients/follow.py). Kept,
        they would go on answering on a follower nobody reads, and beside their new registrations
        if this replica led again. Their ids answer NotLeader (`moved_query`) until it leads the
        stream again."""
        from windowstore.txn.joins import stream_names

        gone = [qid for qid, q in self.engine.periodic.items() if p.stream in stream_names(q.task.plan)]
        if not gone:
            return
        self.driver.fail_periodic(gone, NotLeader(self._elsewhere(p), self.leader_address(p)))
        for qid in gone:
            try:
                self.driver.write(Unregister(qid, 0.0), own=True)  # (to the server's own log, as the Register)
            except StoreError as e:  # shutting down, or the log failed: it stays registered, unread
                log.warning("stream %s: periodic query %s stays registered after the step-down: %s", p.stream, qid, e)
                continue
            self.driver.close_periodic([qid], f"node {self.node} stopped leading {p.stream!r}")
            self.moved[qid] = p.stream
        for qid in list(self.moved)[:max(0, len(self.moved) - MOVED_KEEP)]:
            del self.moved[qid]
        oplog.event("replica_queries_unregistered", stream=p.stream, queries=len(gone))

    def moved_query(self, query_id: str) -> None:
        """Raise NotLeader naming the stream's leader for a periodic query a step-down unregistered
        here (a Subscribe or ReadAnswers that comes after it); nothing for any other id."""
        stream = self.moved.get(query_id)
        p = self.parts.get(stream) if stream is not None else None
        if p is not None and p.role != LEADER:
            raise NotLeader(f"periodic query {query_id!r} was unregistered here: " + self._elsewhere(p),
                            self.leader_address(p))

    def _follow(self, p: Partition) -> None:
        self.engine.sched.passive.add(p.stream)
        p.fetcher = Fetcher(self, p)
        p.fetcher.start()

    def peer_address(self, node: int) -> str:
        """Where this server connects to replica `node`: its --peer-address (a proxy between the two,
        as the partition tests put there), else the address the cluster gives it."""
        return self.peers.get(node) or self.addresses[node]

    def _part(self, stream: str) -> Partition:
        p = self.parts.get(stream)
        if p is None:
            from windowstore.txn.engine import NotFound
            raise NotFound(f"this server holds no replica of stream {stream!r}")
        return p

    # -- client requests ------------------------------------------------------------------------------
    def check_write(self, stream: str) -> None:
        """Refuse a write this replica does not lead; note the epoch it was admitted at (for
        committed(), in the same request)."""
        p = self.parts.get(stream)
        if p is not None and (p.role != LEADER or p.failure):
            raise NotLeader(self._elsewhere(p), self.leader_address(p))
        if p is not None:
            _ADMITTED.set((stream, p.epoch))

    def check_read(self, stream: str, read_from: str) -> None:
        if read_from not in ("", "leader", "follower"):
            raise InvalidInput(f"read_from must be 'leader' or 'follower', got {read_from!r}")
        p = self.parts.get(stream)
        if p is not None and p.role != LEADER and read_from != "follower":
            raise NotLeader(self._elsewhere(p) + "; or read from this follower with read_from='follower'",
                            self.leader_address(p))

    def leader_address(self, p: Partition) -> str:
        """The address of the replica this one knows to lead `p` now ("" when it does not know)."""
        if p.failure or p.role == LEADER or not 0 <= p.leader < len(self.addresses):
            return ""
        return self.addresses[p.leader]

    def _elsewhere(self, p: Partition) -> str:
        if p.failure:
            return f"node {self.node} stopped leading {p.stream!r}: {p.failure}"
        addr = self.addresses[p.leader] if 0 <= p.leader < len(self.addresses) else "?"
        return (f"node {self.node} holds a follower replica of {p.stream!r} (epoch {p.epoch}); its leader is "
                f"node {p.leader} ({addr})")

    def committed(self, stream: str) -> asyncio.Future | None:
        """A future that resolves once every record of `stream` logged so far is acknowledged as its
        acks setting says; None when there is nothing to wait for. A write admitted while this replica
        led that finds it no longer leading at that epoch (a step-down, a fence, a newer epoch between
        admitting the write and the group commit, which then leaves the command out of the replica
        log) fails UNAVAILABLE: it may be in no replica's log, so it must not be acknowledged."""
        p = self.parts.get(stream)
        if p is None:
            return None
        admitted = _ADMITTED.get()
        if (p.role != LEADER or p.failure
                or (admitted is not None and admitted[0] == stream and admitted[1] != p.epoch)):
            raise Unavailable(f"node {self.node} stopped leading {stream!r} while the write was in flight (it may be "
                              "in no replica's log); retry on its leader")
        fut = self.driver.loop.create_future()
        p.waiters.append((p.log.end, fut))
        self._release(p)
        return fut if not fut.done() else None

    def hold_answer(self, query_id: str, publish: Callable[[], None]) -> bool:
        """Hold a periodic answer of a stream this replica leads with acks=all until the slide it
        reports is below the high watermark; True if held (`publish()` is called then), False if it
        may be published now. Without the hold a leader that dies after publishing and before its
        followers logged the slide leaves the subscriber with an answer no surviving replica agrees
        with: the new leader makes that slide again with other rows (issue 36, docs/failover.md).

        The answer is held, not the slide: the slide is applied at once (the thesis's LWS reads go
        on, thesis 7.3, and acks=leader streams and one-time reads are not slowed), and the answer
        waits for the offset the group commit gives the slide's command in the replica log. The
        slide was applied before its answer, so it is drained by the next group commit at the latest
        (`take` stamps the held answers with the log's end then); `_release` publishes them as the
        high watermark passes. A replica that stops leading drops what it held, and one whose
        leadership failed (fenced, its lease lost: its log takes nothing more) publishes nothing:
        those answers reflect a slide no other replica may have, and the client registers the
        query again on the new leader (clients/follow.py)."""
        from windowstore.txn.joins import stream_names

        q = self.engine.periodic.get(query_id)
        if q is None:
            return False
        mine = [p for name in stream_names(q.task.plan) if (p := self.parts.get(name)) is not None and p.role == LEADER]
        if any(p.failure for p in mine):
            return True  # a leader that stopped leading (fenced, its lease lost) logs no slide: nothing to publish
        parts = [p for p in mine if p.acks == "all"]
        if not parts:
            return False
        held = HeldAnswer({p.stream for p in parts}, publish)
        for p in parts:
            p.held.append((None, held))
        self.driver.group_commit.dirty()  # (the slide's command to the replica log: the offset to wait for)
        return True

    def _stamp_held(self, p: Partition) -> None:
        """In a group commit: the answers held since the last one wait for the log's end now (which
        holds every command applied before them, their slide's too)."""
        if p.held and p.held[-1][0] is None and p.role == LEADER and not p.failure:
            p.held = [(p.log.end if offset is None else offset, h) for offset, h in p.held]
            self._release(p)

    def wait_slide(self, stream: str, slide: int) -> asyncio.Future | None:
        """A future resolved once the stream's newest slide is >= `slide`; None if it is already."""
        if _latest_slide(self.engine, stream) >= slide:
            return None
        p = self.parts.get(stream)
        fut = self.driver.loop.create_future()
        if p is None:
            self._plain_slide_waiters.setdefault(stream, []).append((slide, fut))
        else:
            p.slide_waiters.append((slide, fut))
        return fut

    def _release(self, p: Partition) -> None:
        while p.held and p.held[0][0] is not None and p.held[0][0] <= p.hw:
            p.held.pop(0)[1].released(p.stream)
        keep = []
        for offset, fut in p.waiters:
            done_at = p.synced if p.acks == "leader" else p.hw
            if fut.done():
                continue
            if done_at >= offset:
                settle(fut, None)
            else:
                keep.append((offset, fut))
        p.waiters = keep

    def _fail_waiters(self, p: Partition, why: str) -> None:
        for _, fut in p.waiters:
            settle(fut, error=Unavailable(why))
        p.waiters = []

    def _slides(self, stream: str) -> None:
        p = self.parts.get(stream)
        waiters = p.slide_waiters if p is not None else self._plain_slide_waiters.get(stream, [])
        if not waiters:
            return
        latest = _latest_slide(self.engine, stream)
        keep = []
        for slide, fut in waiters:
            if fut.done():
                continue
            if latest >= slide:
                settle(fut, None)
            else:
                keep.append((slide, fut))
        waiters[:] = keep

    # -- leader: the log ------------------------------------------------------------------------------
    def take(self, cmds: list) -> list:
        """The commands of one group commit: those of replicated streams go to their replica logs
        (a leader's; a follower's are there already), the others are returned for the server's log."""
        if not self.parts:
            return cmds
        out, touched = [], {}
        slid = set()
        for cmd in cmds:
            name = stream_of(cmd)
            p = self.parts.get(name) if name is not None else None
            if p is None:
                out.append(cmd)
                if isinstance(cmd, commands.Slide):
                    slid.add(cmd.stream)
                continue
            if isinstance(cmd, commands.Slide):
                slid.add(cmd.stream)
            if p.role == LEADER and not p.failure:
                rec = p.log.append(p.epoch, commands.encode(cmd))
                p.applied = rec.offset
                touched[p.stream] = p
            elif p.role == LEADER:
                p.diverged = True  # a write admitted before the failure: in the engine, in no log
        for p in touched.values():
            self._sync(p)
            p.wake.set()
        for p in self.parts.values():
            self._stamp_held(p)
        for name in slid:
            self._slides(name)
        return out

    def _sync(self, p: Partition) -> None:
        end, epoch = p.log.end, p.epoch
        assert p.syncer is not None, "a leader has its log's syncer"

        def durable(error):
            post(self.driver.loop, self._synced, p, epoch, end, error)
        p.syncer.write(p.log.wal.take(), durable)

    def _synced(self, p: Partition, epoch: int, end: int, error) -> None:
        if error:
            p.failure = f"its replica log cannot be written: {error}"
            log.error("stream %s: %s", p.stream, p.failure)
            self._fail_waiters(p, p.failure)
            return
        if p.epoch == epoch and p.role == LEADER:
            p.synced = max(p.synced, end)
            self._update_hw(p)

    def _update_hw(self, p: Partition) -> None:
        held = [p.synced] + [p.followers[n].acked for n in p.isr if n in p.followers]
        p.hw = max(p.hw, min(held))
        self._release(p)

    def out_of_sync(self, stream: str, nodes: list[int]) -> None:
        """Take followers out of the in-sync set now (they could not be told to follow)."""
        p = self._part(stream)
        for n in nodes:
            if n in p.isr and n != self.node:
                p.isr.discard(n)
                oplog.event("replica_out_of_sync", logging.WARNING, stream=stream, node=n, lag_records=p.log.end,
                            epoch=p.epoch)
        self._update_hw(p)

    def _check_isr(self, p: Partition) -> None:
        now = self.clock()
        for n in list(p.isr):
            f = p.followers.get(n)
            if f is None:
                continue
            behind = p.log.end - f.acked
            if behind > self.lag_records or (behind > 0 and now - f.caught_up_at > self.lag_s):
                p.isr.discard(n)
                oplog.event("replica_out_of_sync", logging.WARNING, stream=p.stream, node=n, lag_records=behind,
                            epoch=p.epoch)
        self._update_hw(p)

    # -- leader: serving followers --------------------------------------------------------------------
    def _leader_of(self, stream: str, node: int, epoch: int) -> Partition:
        p = self._part(stream)
        if epoch > p.epoch:
            if p.role == LEADER:
                p.failure = f"a follower follows epoch {epoch}, newer than this leader's {p.epoch}: fenced"
                self._fail_waiters(p, p.failure)
            raise Fenced(f"stream {stream!r}: node {self.node} is at epoch {p.epoch}, the follower at {epoch}")
        if p.role != LEADER or p.failure:
            raise NotLeader(self._elsewhere(p))
        if epoch < p.epoch:
            raise Fenced(f"stream {stream!r}: the follower's epoch {epoch} is older than the leader's {p.epoch}")
        if node not in p.followers:
            raise InvalidInput(f"node {node} is not a replica of {stream!r} (replicas {p.replicas})")
        return p

    async def fetch(self, request):
        """The records a follower fetches: first where its log must be truncated to (the end of its
        last epoch in this log), then batches as they are appended, and an empty batch each second
        (the high watermark) while there is nothing new."""
        from windowstore.v1 import windowstore_pb2 as pb

        p = self._leader_of(request.stream, request.node, request.epoch)
        epoch = p.epoch
        keep = p.log.end_of_epoch(request.last_epoch) if request.end_offset else 0
        pos = min(request.end_offset, keep)
        f = p.followers[request.node]
        f.acked = pos  # what it holds that this log holds too
        yield pb.ReplicaRecords(epoch=epoch, truncate_to=pos, first_offset=pos + 1, high_watermark=p.hw)
        while True:
            if p.role != LEADER or p.epoch != epoch or p.failure:
                raise NotLeader(self._elsewhere(p))
            if pos < p.log.end:
                recs = p.log.read(pos)
                if recs and recs[0].offset != pos + 1:
                    raise Unavailable(f"stream {p.stream!r}: offset {pos + 1} is no longer in the leader's log")
                if recs:
                    pos = recs[-1].offset
                    yield pb.ReplicaRecords(epoch=epoch, first_offset=recs[0].offset,
                                            records=[r.payload() for r in recs], high_watermark=p.hw)
                    continue
            p.wake.clear()
            try:
                await asyncio.wait_for(p.wake.wait(), 1.0)
            except asyncio.TimeoutError:
                yield pb.ReplicaRecords(epoch=epoch, first_offset=pos + 1, high_watermark=p.hw)

    def ack(self, stream: str, node: int, epoch: int, offset: int) -> int:
        """A follower holds every record through `offset` durably: it may join the in-sync set (once
        it holds the high watermark), and the high watermark may move."""
        p = self._leader_of(stream, node, epoch)
        f = p.followers[node]
        if offset > p.log.end:
            raise InvalidInput(f"offset {offset} is past the leader's log end {p.log.end}")
        f.acked = max(f.acked, offset)
        now = self.clock()
        if f.acked >= p.log.end or f.acked >= f.target:
            f.caught_up_at = now
        f.target = p.log.end
        if node not in p.isr and f.acked >= p.hw and p.log.end - f.acked <= self.lag_records:
            p.isr.add(node)
            oplog.event("replica_in_sync", stream=stream, node=node, epoch=p.epoch, offset=f.acked)
        self._update_hw(p)
        return p.hw

    # -- follower: applying -----------------------------------------------------------------------------
    def apply_fetched(self, p: Partition, recs: list[Record]) -> None:
        """On the loop: replay fetched records (durable in the log) that were not applied yet."""
        if p.role == LEADER:
            return  # (a batch posted before this replica was made the leader: applied then)
        for rec in recs:
            if rec.offset != p.applied + 1:
                continue
            self.engine.replay(commands.decode(rec.command))
            p.applied = rec.offset
        self.driver.group_commit.dirty()
        self._slides(p.stream)

    def _apply_pending(self, p: Partition) -> None:
        if p.applied < p.log.end:
            self.apply_fetched(p, list(p.log.read_disk(p.applied, p.log.end)))

    def rebuild(self, p: Partition, through: int) -> None:
        """On the loop: the stream as of offset `through` (its log was truncated there)."""
        if p.stream in self.engine.sched.streams:
            self.engine.replay(DropStream(p.stream, self.engine.now_ms))
        p.applied = 0
        self.apply_fetched(p, list(p.log.read_disk(0, through)))
        oplog.event("replica_truncated", stream=p.stream, offset=through, epoch=p.epoch)

    # -- status ---------------------------------------------------------------------------------------
    def status(self, stream: str):
        from windowstore.v1 import windowstore_pb2 as pb

        p = self._part(stream)
        role = pb.REPLICA_ROLE_LEADER if p.role == LEADER else pb.REPLICA_ROLE_FOLLOWER
        out = pb.ReplicaStatus(stream=p.stream, role=role, epoch=p.epoch, leader=p.leader, replicas=p.replicas,
                               acks=p.acks, end_offset=p.log.end, high_watermark=p.hw, applied_offset=p.applied,
                               applied_slide=_latest_slide(self.engine, p.stream),
                               durable_offset=p.synced if p.role == LEADER else p.log.wal.synced_lsn)
        if p.role == LEADER:
            out.in_sync.extend(sorted(p.isr))
            for n, f in sorted(p.followers.items()):
                out.followers.add(node=n, acked_offset=f.acked, lag_records=max(0, p.log.end - f.acked),
                                  in_sync=n in p.isr)
        else:
            out.lag_records = max(0, p.hw - p.applied)
        return out

    def lag(self) -> dict[str, int]:
        """Records each replicated stream's slowest replica lags behind (leader: its followers' acks
        behind its log end; follower: its applied offset behind the high watermark it last heard)."""
        out = {}
        for name, p in self.parts.items():
            if p.role == LEADER:
                out[name] = max([p.log.end - f.acked for f in p.followers.values()] or [0])
            else:
                out[name] = max(0, p.hw - p.applied)
        return out


def _read_hw(directory: str) -> int:
    """The high watermark checkpointed in `directory` (0 if none, or unreadable)."""
    try:
        with open(os.path.join(directory, HW_FILE)) as f:
            return max(0, int(f.read().strip() or 0))
    except (OSError, ValueError):
        return 0


def _latest_slide(engine, stream: str) -> int:
    s = engine.sched.streams.get(stream)
    return -1 if s is None else int(s.window.latest)


def _dirname(stream: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else f"%{ord(c):02x}" for c in stream)


class Fetcher(threading.Thread):
    """A follower's fetch loop: one ReplicaFetch stream from the leader at a time, started again
    (after a pause) when it ends."""

    def __init__(self, repl: Replication, p: Partition):
        super().__init__(name=f"windowstore-fetch-{p.stream}", daemon=True)
        self.repl, self.p = repl, p
        self._halt = threading.Event()
        self._call: Any = None  # the ReplicaFetch call in progress
        self.error: str | None = None

    def stop(self) -> None:
        self._halt.set()
        call = self._call
        if call is not None:
            call.cancel()

    def run(self) -> None:
        import grpc

        from windowstore.v1 import windowstore_pb2 as pb
        from windowstore.v1 import windowstore_pb2_grpc as pbg

        p, repl = self.p, self.repl
        epoch, leader = p.epoch, p.leader
        with grpc.insecure_channel(repl.peer_address(leader), options=[("grpc.max_receive_message_length", -1)]) as ch:
            stub = pbg.WindowStoreServiceStub(ch)
            while not self._halt.is_set():
                try:
                    self._call = stub.ReplicaFetch(pb.ReplicaFetchRequest(
                        stream=p.stream, node=repl.node, epoch=epoch, end_offset=p.log.end, last_epoch=p.log.last_epoch))
                    for msg in self._call:
                        if self._halt.is_set():
                            return
                        self._batch(stub, msg, epoch)
                except grpc.RpcError as e:
                    if self._halt.is_set():
                        return
                    self.error = f"{e.code().name}: {e.details()}"
                except Fenced as e:
                    self.error = str(e)
                    log.error("stream %s: %s", p.stream, e)
                except Exception as e:  # noqa: BLE001 - the log could not be written, ...: say so, try again
                    self.error = str(e)
                    log.exception("stream %s: fetching from node %d failed", p.stream, leader)
                self._halt.wait(0.2)  # (before fetching again)

    def _batch(self, stub, msg, epoch: int) -> None:
        from windowstore.v1 import windowstore_pb2 as pb

        p, repl = self.p, self.repl
        if msg.epoch < epoch:
            raise Fenced(f"stream {p.stream!r}: records of epoch {msg.epoch} refused, this follower is at epoch {epoch}")
        if msg.HasField("truncate_to") and msg.truncate_to < p.log.end:
            gone = p.log.truncate_after(msg.truncate_to)
            p.hw = min(p.hw, msg.truncate_to)
            log.warning("stream %s: truncated %d records after offset %d (the leader's log)", p.stream, gone,
                        msg.truncate_to)
            post(repl.driver.loop, repl.rebuild, p, msg.truncate_to)
        recs = []
        for i, payload in enumerate(msg.records):
            rec = Record.of(msg.first_offset + i, payload)
            if rec.epoch > msg.epoch or rec.epoch < p.log.last_epoch:
                raise Fenced(f"stream {p.stream!r}: offset {rec.offset} of epoch {rec.epoch} refused (the leader is at "
                             f"{msg.epoch}, this log at {p.log.last_epoch})")
            if rec.offset != p.log.end + 1:
                raise Fenced(f"stream {p.stream!r}: offset {rec.offset} does not follow this log's end {p.log.end}")
            p.log.append(rec.epoch, rec.command)
            recs.append(rec)
        if recs:
            p.log.wal.flush()
            p.log.wal.sync()
        p.hw = max(p.hw, min(msg.high_watermark, p.log.end))
        if recs:
            stub.ReplicaAck(pb.ReplicaAckRequest(stream=p.stream, node=repl.node, epoch=epoch, offset=p.log.end),
                            timeout=10)
            post(repl.driver.loop, repl.apply_fetched, p, recs)
