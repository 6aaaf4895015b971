"""Replicated partitions (docs/replication.md): a partition's commands shipped from its leader to
its followers in the command log's own encoding, each record stamped with the leader's epoch.

`log.py` owns a partition's replica log on disk, `manager.py` the roles (leader or follower, epoch),
the in-sync set, the high watermark and the follower's fetch loop."""
from .log import ReplicaLog, Record
from .manager import Replication, Fenced, NotLeader

__all__ = ["Fenced", "NotLeader", "Record", "ReplicaLog", "Replication"]
