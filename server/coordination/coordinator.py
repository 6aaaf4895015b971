"""The coordinator of one server: registers the node in etcd, holds its lease, and for every
partition the map gives it a replica of, decides its role and tells `Roles`.

One pass (`step`) over the node's partitions, run whenever the cluster view changes and every
quarter of the lease TTL:
- no leader key: if the node is in the partition's in-sync set (every replica before the first
  election, the preferred one first while it is live), it campaigns (election.py); winning makes
  it leader at the new epoch. A node outside the in-sync set never campaigns (no unclean election).
- the leader key is the node's own, on its current lease: it is leader at that epoch.
- another node leads at epoch e: the node follows it at e. A former leader that was paused or cut
  off sees the higher epoch when it comes back and steps down (become_follower).
A lost lease (lease.py) is replaced by a new one; leader keys on the old one are gone with it.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from .election import campaign, set_in_sync
from .etcd import Etcd, EtcdError
from .keys import DEFAULT_PREFIX, Keys, normalize_prefix
from .lease import LeaseKeeper
from .roles import Assignment, Role, RoleTable, Roles
from .view import EtcdClusterView

log = logging.getLogger("windowstore.coordination")


@dataclass
class Counters:
    """What the coordinator has done since it started (metrics.py exports them)."""

    campaigns: int = 0
    elections_won: int = 0
    step_downs: int = 0        # leader -> follower
    leases_lost: int = 0
    errors: int = 0            # passes that etcd failed
    won_at: dict[str, float] = field(default_factory=dict)  # partition -> time.monotonic() of its latest win


class Coordinator:
    def __init__(self, etcd: Etcd | str, node: int, address: str, roles: Roles | None = None,
                 ttl_s: int = 3, prefix: str = DEFAULT_PREFIX, view: EtcdClusterView | None = None):
        if node < 0:
            raise ValueError(f"node {node}: a node id is 0 or more")
        if ttl_s < 1:
            raise ValueError(f"lease TTL {ttl_s} s: at least 1 s")
        self.etcd = etcd if isinstance(etcd, Etcd) else Etcd(etcd)
        self.keys = Keys(normalize_prefix(prefix))
        self.node, self.address, self.ttl_s = node, address, ttl_s
        self.table = roles if isinstance(roles, RoleTable) else RoleTable(roles)
        self.counters = Counters()
        self.view = view or EtcdClusterView(self.etcd, self.keys.prefix)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._step_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.etcd.put(self.keys.node(node), address)
        self.lease = self._new_lease()

    def _new_lease(self) -> LeaseKeeper:
        lease = LeaseKeeper(self.etcd, self.ttl_s, on_lost=self._wake.set)
        self.etcd.put(self.keys.live(self.node), self.address, lease.id)
        return lease

    # -- running ----------------------------------------------------------------------------------
    def start(self) -> "Coordinator":
        self.view.on_change(self._wake.set)
        self._thread = threading.Thread(target=self._run, name="windowstore-coordinator", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        tick = max(self.ttl_s / 4.0, 0.1)
        while not self._stop.is_set():
            self._wake.clear()
            try:
                self.step()
            except EtcdError as e:
                self.counters.errors += 1
                log.warning("coordination pass failed: %s", e)
            except Exception:  # noqa: BLE001 - a bug in one pass must not end coordination
                self.counters.errors += 1
                log.exception("coordination pass failed")
            self._wake.wait(tick)

    def stop(self) -> None:
        """Stop deciding, and end the lease (leadership passes to another replica at once)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(10)
        self.lease.close(revoke=True)
        self.view.close()

    # -- one pass ---------------------------------------------------------------------------------
    def step(self) -> None:
        """Decide every partition of this node once (see the module docstring)."""
        with self._step_lock:
            if self.lease.lost.is_set():
                self.counters.leases_lost += 1
                self.lease.close(revoke=False)
                self.lease = self._new_lease()
            for stream, replicas in sorted(self.view.streams().items()):
                for p, nodes in enumerate(replicas):
                    if self.node in nodes:
                        self._decide(stream, p)

    def _decide(self, stream: str, p: int) -> None:
        state = self.view.partition(stream, p)
        leader = state.leader
        if leader is None:
            eligible = state.in_sync if state.in_sync is not None else state.replicas
            if self.node not in eligible:
                return
            if (state.in_sync is None and state.replicas and state.replicas[0] != self.node
                    and state.replicas[0] in self.view.live()):
                return  # the first election: the preferred replica goes first while it is up
            epoch_kv, isr_kv = self.view.kv(self.keys.epoch(stream, p)), self.view.kv(self.keys.isr(stream, p))
            self.counters.campaigns += 1
            try:
                won = campaign(self.etcd, self.keys, state, epoch_kv.mod_revision if epoch_kv else 0,
                               isr_kv.mod_revision if isr_kv else 0, self.node, self.lease.id)
            except EtcdError as e:
                if "lease not found" in str(e):  # expired while this node was not renewing it
                    self.lease.lost.set()
                    self._wake.set()
                raise
            if won is not None:
                self.counters.elections_won += 1
                self.counters.won_at[state.name] = time.monotonic()
                log.info("partition %s: elected at epoch %d", state.name, won)
                self._tell(state.name, Assignment(Role.LEADER, won, None))
            return
        if leader.node == self.node:
            if leader.lease == self.lease.id:
                self._tell(state.name, Assignment(Role.LEADER, leader.epoch, None))
            return  # a key of an earlier lease of this node: it expires with that lease
        addresses = self.view.addresses
        address = addresses[leader.node] if leader.node < len(addresses) else ""
        self._tell(state.name, Assignment(Role.FOLLOWER, leader.epoch, address))

    def _tell(self, name: str, want: Assignment) -> None:
        have = self.table.get(name)
        if have == want:
            return
        if want.role is Role.LEADER:
            self.table.become_leader(name, want.epoch)
        else:
            if have is not None and have.role is Role.LEADER:
                self.counters.step_downs += 1
                log.warning("partition %s: stepping down at epoch %d (a newer leader: %s)", name, want.epoch, want.leader)
            self.table.become_follower(name, want.leader or "", want.epoch)

    # -- for the replication layer ----------------------------------------------------------------
    def set_in_sync(self, stream: str, partition: int, nodes: list[int]) -> bool:
        """As the partition's leader, record its in-sync replicas; False if this node no longer
        leads it at the epoch it was told."""
        from windowstore.store.partitions import partition_name

        have = self.table.get(partition_name(stream, partition))
        if have is None or have.role is not Role.LEADER:
            return False
        return set_in_sync(self.etcd, self.keys, stream, partition, self.node, have.epoch, nodes)

    def pause_keepalive(self) -> None:
        """Stop renewing the lease, as a stopped process would (tests)."""
        self.lease.pause()

    def resume_keepalive(self) -> None:
        self.lease.resume()
