"""What a node does with a partition once the coordinator has decided: lead it or follow a leader.

`Roles` is the interface the coordinator drives (the replication layer implements it: a leader
takes writes and ships its log, a follower applies the leader's log and refuses writes). The
coordinator calls it from its own thread, once per change, with the partition's stream name
(`S.p0`), the epoch, and for a follower the leader's address; an implementation that works on the
server's event loop hands the call over to the loop itself. `RoleTable` records the calls (the
server's default until replication is attached, and what tests and metrics read).
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

log = logging.getLogger("windowstore.coordination")


class Role(str, Enum):
    LEADER = "leader"
    FOLLOWER = "follower"


class Roles(Protocol):
    def become_leader(self, partition: str, epoch: int) -> None: ...

    def become_follower(self, partition: str, leader: str, epoch: int) -> None: ...


@dataclass(frozen=True)
class Assignment:
    role: Role
    epoch: int
    leader: str | None  # the leader's address, for a follower


class RoleTable:
    """Records each partition's newest role; forwards to `then` (another Roles), if given."""

    def __init__(self, then: Roles | None = None):
        self.then = then
        self._lock = threading.Lock()
        self._table: dict[str, Assignment] = {}
        self.calls: list[tuple[str, str, int, str | None]] = []  # (role, partition, epoch, leader), in order

    def become_leader(self, partition: str, epoch: int) -> None:
        log.info("partition %s: leader at epoch %d", partition, epoch)
        with self._lock:
            self._table[partition] = Assignment(Role.LEADER, epoch, None)
            self.calls.append((Role.LEADER.value, partition, epoch, None))
        if self.then is not None:
            self.then.become_leader(partition, epoch)

    def become_follower(self, partition: str, leader: str, epoch: int) -> None:
        log.info("partition %s: follower of %s at epoch %d", partition, leader, epoch)
        with self._lock:
            self._table[partition] = Assignment(Role.FOLLOWER, epoch, leader)
            self.calls.append((Role.FOLLOWER.value, partition, epoch, leader))
        if self.then is not None:
            self.then.become_follower(partition, leader, epoch)

    def get(self, partition: str) -> Assignment | None:
        with self._lock:
            return self._table.get(partition)

    def snapshot(self) -> dict[str, Assignment]:
        with self._lock:
            return dict(self._table)
