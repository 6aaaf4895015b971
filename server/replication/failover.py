"""Automatic failover: the etcd coordinator's decisions (server/coordination/) carried out by the
replication manager, so a dead leader is replaced without an operator (docs/cluster.md).

- `CoordinatedReplication` is the Replication of a server started with `--etcd` and a data
  directory. A stream's replicas are its partition's replicas in etcd's map; it is led by the node
  etcd elected, at the epoch of that election (not by the creating node at epoch 1); on disk, a
  role is only a hint until etcd confirms it (a restarted leader refuses writes until then).
- The leader keeps the in-sync set in etcd: a follower that leaves the set still counts for the
  high watermark until etcd holds the smaller set (so every node etcd may elect holds every write
  acknowledged with acks=all); a follower that joins is written to etcd after it counts.
- The leader acknowledges a write only while the etcd lease it was elected on is certainly current
  (its last renewal was sent less than the TTL ago): before etcd can let another replica win, the
  old leader has stopped acknowledging (UNAVAILABLE), even if it is paused and never hears of it.
- `ReplicationRoles` is the `Roles` the coordinator drives from its own thread: each decision is
  handed to the event loop (address -> node index through the cluster's node list).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Sequence

from windowstore.store.errors import InvalidInput
from windowstore.store.partitions import partition_name
from windowstore.txn.errors import FailedPrecondition

from ..driver.errors import Unavailable
from ..driver.loop_util import post, settle
from .manager import FOLLOWER, LEADER, Partition, Replication

log = logging.getLogger("windowstore.replication")


class _Addresses(Sequence):
    """The cluster's node addresses as etcd holds them now (node i's at index i)."""

    def __init__(self, view):
        self.view = view

    def __len__(self) -> int:
        return len(self.view.addresses)

    def __getitem__(self, i):
        return self.view.addresses[i]


def split_partition(name: str) -> tuple[str, int] | None:
    """("S", i) for the partition stream `S.p{i}`, else None."""
    stream, sep, index = name.rpartition(".p")
    if not sep or not stream or not index.isdigit() or partition_name(stream, int(index)) != name:
        return None
    return stream, int(index)


class CoordinatedReplication(Replication):
    coordinated = True

    def __init__(self, driver, data_dir: str, node: int, view, fsync: str = "always", lag_s: float = 10.0,
                 peers: dict[int, str] | None = None):
        super().__init__(driver, data_dir, node, _Addresses(view), fsync,  # type: ignore[arg-type]  # a live list
                         peers=peers)
        self.view = view
        self.lag_s = lag_s
        self.coordinator = None  # the node's Coordinator, once serving
        self.elected: dict[str, tuple[int, int]] = {}     # stream -> (epoch, lease) won before it was created here
        self.lead_lease: dict[str, int] = {}              # stream -> the lease its leadership was won on
        self.published: dict[str, tuple[int, frozenset[int]]] = {}  # stream -> (epoch, in-sync set etcd holds)
        self._publishing: set[str] = set()

    # -- start-up -------------------------------------------------------------------------------------
    def start(self) -> None:
        """Roles on disk are hints: a replica that led before the restart refuses writes until etcd
        elects it again (at a newer epoch); followers fetch from their last leader meanwhile."""
        super().start()
        for p in self.parts.values():
            if p.role == LEADER:
                p.failure = f"restarted at epoch {p.epoch}: waiting for etcd to elect a leader"

    # -- the map --------------------------------------------------------------------------------------
    def _map_replicas(self, stream: str) -> list[int]:
        where = split_partition(stream)
        if where is None:
            return []
        return list(self.view.partition(*where).replicas)

    def replicas_for(self, name: str, spec, replication: int) -> list[int]:
        """The replicas of a stream created here with `replication` (> 1): its partition's in etcd's
        map, this node (etcd's elected leader) first."""
        where = split_partition(name)
        placed = self._map_replicas(name)
        if where is None or not placed:
            raise FailedPrecondition(
                f"stream {name[:100]!r} has no replicas in etcd's map: create it as a partitioned stream "
                f"(partitions=1 for one) after `windowstore cluster place STREAM --replication {replication}`")
        if len(placed) != replication:
            raise InvalidInput(f"replication {replication}: etcd's map gives {name[:100]!r} {len(placed)} replicas")
        if name not in self.elected and not (name in self.parts and self.parts[name].role == LEADER
                                             and not self.parts[name].failure):
            lead = self.view.partition(*where).leader
            who = f"node {lead.node} leads it" if lead is not None else "it has no leader yet"
            raise FailedPrecondition(f"stream {name[:100]!r}: this node {self.node} is not its elected leader ({who})")
        return [self.node] + [n for n in placed if n != self.node]

    def create_leader(self, stream: str, replicas: list[int], acks: str) -> None:
        """This node, elected in etcd, leads the new stream at the epoch of its election; every
        replica in etcd's in-sync set starts in sync."""
        p = self.parts.get(stream)
        if (p is not None and p.role == LEADER and not p.failure and p.log.end == 0
                and stream not in self.engine.sched.streams):  # elected while following a stream not created yet
            p.replicas, p.acks = list(replicas), acks
            self._save(p)
        else:
            epoch, lease = self.elected.pop(stream, (1, 0))
            super().create_leader(stream, replicas, acks)
            p = self.parts[stream]
            p.epoch = epoch
            self._save(p)
            self.lead_lease[stream] = lease
        where = split_partition(stream)
        in_sync = self.view.partition(*where).in_sync if where is not None else None
        self.published[stream] = (p.epoch, frozenset(in_sync if in_sync is not None else replicas) | {self.node})
        self._lead(p, fresh=True)

    # -- roles from the coordinator (on the loop) -----------------------------------------------------
    def lead_elected(self, stream: str, epoch: int, lease: int) -> None:
        p = self.parts.get(stream)
        if p is None:
            if len(self._map_replicas(stream)) > 1:
                self.elected[stream] = (epoch, lease)
            return
        if p.role == LEADER and p.epoch == epoch and not p.failure:
            self.lead_lease[stream] = lease
            return
        self.lead_lease[stream] = lease
        # etcd's in-sync set (the campaign wrote it) is the set from the start, before the high
        # watermark is computed: a follower that does not catch up within lag_s leaves it (and
        # etcd's) as usual
        in_etcd = self._in_sync_after(stream, epoch)
        self.published[stream] = (epoch, frozenset(in_etcd))
        self.become_leader(stream, epoch, in_sync=in_etcd)

    def _in_sync_after(self, stream: str, epoch: int) -> set[int]:
        """The in-sync set etcd holds once this node has won `epoch`: as the view has it if it has
        seen the campaign, else as the campaign wrote it (election.campaign's rule, from the state
        the campaign read), so a leader that left is not waited for."""
        where = split_partition(stream)
        if where is None:
            return {self.node}
        state = self.view.partition(*where)
        if state.epoch >= epoch or state.leader is not None and state.leader.epoch >= epoch:
            base = set(state.in_sync if state.in_sync is not None else state.replicas)
        else:
            base = set(state.in_sync if state.in_sync is not None else state.replicas)
            if state.last_leader is not None and state.last_leader != self.node:
                base.discard(state.last_leader)
        return base | {self.node}

    def follow_elected(self, stream: str, leader: int, epoch: int) -> None:
        p = self.parts.get(stream)
        replicas = self._map_replicas(stream)
        if p is None and len(replicas) < 2:
            return  # not a replicated partition
        if p is not None and p.role == FOLLOWER and p.epoch == epoch and p.leader == leader and not p.failure:
            return
        self.elected.pop(stream, None)
        self.lead_lease.pop(stream, None)
        self.published.pop(stream, None)
        self.become_follower(stream, leader, epoch, replicas, p.acks if p is not None else "all")
        self.parts[stream].failure = None  # (a restarted leader's refusal: it follows now)

    def leader_address(self, p: Partition) -> str:
        """The leader etcd names (a replica that stopped leading knows no successor of its own)."""
        where = split_partition(p.stream)
        lead = self.view.leader(*where) if where is not None else None
        if lead is not None and lead.node != self.node and 0 <= lead.node < len(self.addresses):
            return self.addresses[lead.node]
        return super().leader_address(p)

    # -- the lease --------------------------------------------------------------------------------------
    def _lease_refusal(self, p: Partition) -> str | None:
        coordinator = self.coordinator
        if coordinator is None:
            return f"node {self.node} is not coordinated through etcd yet"
        lease = coordinator.lease
        if self.lead_lease.get(p.stream) != lease.id:
            return f"node {self.node} was elected leader of {p.stream!r} on a lease it no longer holds"
        margin = min(0.25, lease.ttl_s / 10)
        if time.monotonic() >= lease.valid_until() - margin:
            return (f"node {self.node} cannot renew its etcd lease (TTL {lease.ttl_s} s): another replica may be "
                    f"elected leader of {p.stream!r}; retry on the leader etcd names")
        return None

    def check_write(self, stream: str) -> None:
        super().check_write(stream)
        p = self.parts.get(stream)
        if p is not None and p.role == LEADER:
            why = self._lease_refusal(p)
            if why is not None:
                raise Unavailable(why)

    def committed(self, stream: str):
        """As Replication's (which refuses a write admitted at an epoch this replica no longer leads
        at), and acknowledged only while the lease this replica was elected on is current."""
        p = self.parts.get(stream)
        if p is None:
            return super().committed(stream)
        fut = super().committed(stream)
        if fut is None:
            why = self._lease_refusal(p)
            if why is not None:
                raise Unavailable(why)
            return None
        out = self.driver.loop.create_future()

        def done(f) -> None:
            if f.cancelled():
                out.cancel()
                return
            if f.exception() is not None:
                settle(out, error=f.exception())
                return
            why = self._lease_refusal(p)
            if p.role != LEADER or p.epoch != epoch:
                why = f"node {self.node} stopped leading {stream!r} at epoch {epoch}; retry on the leader etcd names"
            settle(out, error=Unavailable(why)) if why is not None else settle(out, None)
        epoch = p.epoch
        fut.add_done_callback(done)
        return out

    # -- the in-sync set in etcd ------------------------------------------------------------------------
    def _update_hw(self, p: Partition) -> None:
        """As Replication's, counting also the followers etcd still lists as in sync."""
        published = self.published.get(p.stream) if p.role == LEADER and self.coordinator is not None else None
        counted = set(p.isr) | (set(published[1]) if published is not None and published[0] == p.epoch else set())
        held = [p.synced] + [p.followers[n].acked for n in counted if n in p.followers]
        p.hw = max(p.hw, min(held))
        self._release(p)
        if (published is not None and published != (p.epoch, frozenset(p.isr))
                and p.stream not in self._publishing and not p.failure):
            self._publish(p)

    def _publish(self, p: Partition) -> None:
        where = split_partition(p.stream)
        if where is None:
            return
        epoch, nodes = p.epoch, frozenset(p.isr | {self.node})
        self._publishing.add(p.stream)
        coordinator = self.coordinator
        assert coordinator is not None, "in-sync sets are published once the coordinator is attached"

        def write() -> None:
            try:
                ok = coordinator.set_in_sync(where[0], where[1], sorted(nodes))
                error = None
            except Exception as e:  # noqa: BLE001 - etcd unreachable: tried again at the next check
                ok, error = False, e
            post(self.driver.loop, self._published_in_etcd, p, epoch, nodes, ok, error)
        threading.Thread(target=write, name=f"windowstore-isr-{p.stream}", daemon=True).start()

    def _published_in_etcd(self, p: Partition, epoch: int, nodes: frozenset[int], ok: bool, error) -> None:
        self._publishing.discard(p.stream)
        if p.role != LEADER or p.epoch != epoch:
            return
        if ok:
            self.published[p.stream] = (epoch, nodes)
            log.info("stream %s: in-sync set %s written to etcd (epoch %d)", p.stream, sorted(nodes), epoch)
        elif error is None:
            # etcd's leader key no longer names this node at this epoch: it was replaced
            p.failure = f"etcd no longer names node {self.node} leader of {p.stream!r} at epoch {epoch}"
            self._fail_waiters(p, p.failure)
            return
        else:
            log.warning("stream %s: in-sync set not written to etcd: %s", p.stream, error)
            return
        self._update_hw(p)


class ReplicationRoles:
    """The coordinator's `Roles`: each decision runs on the server's loop (see the module docstring)."""

    def __init__(self, repl: CoordinatedReplication):
        self.repl = repl

    def _post(self, fn, *args) -> None:
        def run():
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 - one partition's failure must not stop the others
                log.exception("partition %s: %s failed", args[0], fn.__name__)
        post(self.repl.driver.loop, run)

    def become_leader(self, partition: str, epoch: int) -> None:
        coordinator = self.repl.coordinator
        lease = coordinator.lease.id if coordinator is not None else 0  # (the lease it has just won on)
        self._post(self.repl.lead_elected, partition, epoch, lease)

    def become_follower(self, partition: str, leader: str, epoch: int) -> None:
        addresses = self.repl.view.addresses
        if leader not in addresses:
            log.warning("partition %s: leader %r is not a registered node", partition, leader)
            return
        node = addresses.index(leader)
        if node == self.repl.node:
            return
        self._post(self.repl.follow_elected, partition, node, epoch)
