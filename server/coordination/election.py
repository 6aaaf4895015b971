"""The writes that change who leads: placing a stream's partitions, a campaign for a partition's
leadership, and the leader's in-sync set. Each is one etcd transaction, so two nodes racing for
the same partition cannot both win, and a node that lost leadership cannot overwrite what the new
leader wrote.

- `place`: the map of a stream (its partitions' replicas), written only if the stream has none.
- `campaign`: wins if the partition has no leader key (`create_revision == 0`) and its epoch and
  in-sync keys are as the campaigner read them; then, atomically, the leader key (on the
  campaigner's lease), the epoch + 1, and the in-sync set (the old one, less the leader that left,
  plus the winner) are written.
- `set_in_sync`: written only while the leader key holds exactly this leader's value (its node
  and epoch), so a deposed leader's write fails.
"""
from __future__ import annotations

from .etcd import Etcd, created_never, modified_at, put, value_is
from .keys import Keys, encode
from .view import PartitionState


def placement(stream_start: int, nodes: list[int], partitions: int, replication: int) -> list[list[int]]:
    """Replicas of each partition: partition i on `replication` consecutive nodes of `nodes`
    from position (stream_start + i), the first one preferred as leader."""
    n = len(nodes)
    return [[nodes[(stream_start + i + r) % n] for r in range(replication)] for i in range(partitions)]


def place(etcd: Etcd, keys: Keys, stream: str, replicas: list[list[int]]) -> bool:
    """Write `stream`'s map unless it already has one; whether this call wrote it."""
    value = encode({"partitions": len(replicas), "replicas": replicas})
    ok, _ = etcd.txn([created_never(keys.map(stream))], [put(keys.map(stream), value)])
    return ok


def leader_value(node: int, epoch: int) -> str:
    return encode({"epoch": epoch, "node": node})


def campaign(etcd: Etcd, keys: Keys, state: PartitionState, epoch_rev: int, isr_rev: int,
             node: int, lease: int) -> int | None:
    """Try to lead `state`'s partition from `node` on `lease`; the new epoch if won, else None.
    `epoch_rev` and `isr_rev` are the mod revisions of the epoch and in-sync keys the caller's
    `state` was read from (0 where absent)."""
    s, p = state.stream, state.partition
    epoch = state.epoch + 1
    base = list(state.in_sync) if state.in_sync is not None else list(state.replicas)
    gone = state.last_leader if state.last_leader is not None and state.last_leader != node else None
    in_sync = [n for n in base if n != gone]
    if node not in in_sync:
        in_sync.append(node)
    ok, _ = etcd.txn(
        [created_never(keys.leader(s, p)), modified_at(keys.epoch(s, p), epoch_rev), modified_at(keys.isr(s, p), isr_rev)],
        [put(keys.leader(s, p), leader_value(node, epoch), lease),
         put(keys.epoch(s, p), encode({"epoch": epoch, "leader": node})),
         put(keys.isr(s, p), encode({"epoch": epoch, "nodes": in_sync}))])
    return epoch if ok else None


def set_in_sync(etcd: Etcd, keys: Keys, stream: str, partition: int, node: int, epoch: int,
                nodes: list[int]) -> bool:
    """The leader (`node` at `epoch`) records the partition's in-sync replicas (itself included);
    False, writing nothing, if it is no longer that leader."""
    if node not in nodes:
        nodes = [node, *nodes]
    ok, _ = etcd.txn([value_is(keys.leader(stream, partition), leader_value(node, epoch))],
                     [put(keys.isr(stream, partition), encode({"epoch": epoch, "nodes": list(nodes)}))])
    return ok
