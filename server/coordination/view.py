"""EtcdClusterView: the partition map, leaders, epochs and in-sync sets as etcd holds them, kept
current by a watch; a ClusterView (store/partitions.py), so the SDK and Spark follow it unchanged.

One read of every key under the cluster's prefix, then a watch from the revision after it: the
view is always etcd's state at some revision (`revision`), changes are applied in etcd's order,
and a watch that breaks (etcd restarting, a compaction) is followed by a fresh read. Readers get a
consistent copy under a lock; `wait` blocks until a condition holds of the view (tests, the CLI).
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, TypeVar

import numpy as np

from windowstore.store.partitions import partition_name, splitmix64, string_word

from .etcd import CompactedError, Etcd, EtcdError, Event, KeyValue
from .keys import DEFAULT_PREFIX, Keys, decode, normalize_prefix

log = logging.getLogger("windowstore.coordination")
T = TypeVar("T")


@dataclass(frozen=True)
class Leader:
    node: int
    epoch: int
    lease: int
    value: str  # the key's exact value (an in-sync write by this leader compares against it)


@dataclass(frozen=True)
class PartitionState:
    """One partition as etcd holds it."""

    stream: str
    partition: int
    replicas: tuple[int, ...]       # from the map, the preferred leader first
    leader: Leader | None           # None while no node holds the partition's leadership
    epoch: int                      # the newest epoch (0: never led)
    last_leader: int | None         # the node that won the newest epoch
    in_sync: tuple[int, ...] | None  # None until the first election writes it

    @property
    def name(self) -> str:
        return partition_name(self.stream, self.partition)


class EtcdClusterView:
    """See the module docstring. `addresses[i]` is node i's registered address ("" for an id
    never registered); `owner(stream, p)` is the partition's leader, else its preferred replica in
    the map, else the static placement over the registered nodes (StaticCluster's rule)."""

    def __init__(self, etcd: Etcd | str, prefix: str = DEFAULT_PREFIX, watch: bool = True):
        self.etcd = etcd if isinstance(etcd, Etcd) else Etcd(etcd)
        self.keys = Keys(normalize_prefix(prefix))
        self._lock = threading.Condition()
        self._kvs: dict[str, KeyValue] = {}
        self.revision = 0
        self._listeners: list[Callable[[], None]] = []
        self._stop = threading.Event()
        self.error: str | None = None  # the last watch failure, until a read succeeds again
        self._load()
        self._thread: threading.Thread | None = None
        if watch:
            self._thread = threading.Thread(target=self._watch, name="windowstore-etcd-watch", daemon=True)
            self._thread.start()

    # -- keeping up -------------------------------------------------------------------------------
    def _load(self) -> None:
        revision, kvs = self.etcd.range_prefix(self.keys.prefix)
        with self._lock:
            self._kvs = {kv.key: kv for kv in kvs}
            self.revision = revision
            self.error = None
            self._lock.notify_all()
        self._tell()

    def _apply(self, revision: int, events: list[Event]) -> None:
        with self._lock:
            for e in events:
                if e.kind == "delete":
                    self._kvs.pop(e.kv.key, None)
                else:
                    self._kvs[e.kv.key] = e.kv
            self.revision = max(self.revision, revision)
            self._lock.notify_all()
        self._tell()

    def _tell(self) -> None:
        for fn in list(self._listeners):
            try:
                fn()
            except Exception:  # noqa: BLE001 - a listener's failure must not stop the watch
                log.exception("cluster view listener failed")

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                self.etcd.watch_prefix(self.keys.prefix, self.revision + 1, self._apply, self._stop)
            except CompactedError:
                self._reload()
            except EtcdError as e:
                with self._lock:
                    self.error = str(e)
                self._stop.wait(0.2)
                self._reload()

    def _reload(self) -> None:
        try:
            self._load()
        except EtcdError as e:
            with self._lock:
                self.error = str(e)

    def on_change(self, fn: Callable[[], None]) -> None:
        """Call fn() (on the watch thread) after each change the view applies."""
        self._listeners.append(fn)

    def refresh(self) -> None:
        """Read every key again now (a view made with watch=False)."""
        self._load()

    def wait(self, predicate: Callable[["EtcdClusterView"], T], timeout: float) -> T | None:
        """predicate(self) once it is truthy (re-checked after each change), or None after `timeout`."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                value = predicate(self)
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._lock.wait(left)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(10)
        self.etcd.close()

    def __enter__(self) -> "EtcdClusterView":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- reading ----------------------------------------------------------------------------------
    def _value(self, key: str) -> dict | None:
        kv = self._kvs.get(key)
        return decode(kv.value) if kv is not None else None

    def kv(self, key: str) -> KeyValue | None:
        with self._lock:
            return self._kvs.get(key)

    @property
    def addresses(self) -> list[str]:
        with self._lock:
            nodes = {}
            for key, kv in self._kvs.items():
                parsed = self.keys.parse(key)
                if parsed is not None and parsed[0] == "node":
                    nodes[parsed[1][0]] = kv.value
        return [nodes.get(i, "") for i in range(max(nodes) + 1)] if nodes else []

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(self.addresses)

    def live(self) -> set[int]:
        """The nodes whose lease is current (their `live/` key exists)."""
        with self._lock:
            return {p[1][0] for p in map(self.keys.parse, self._kvs) if p is not None and p[0] == "live"}

    def streams(self) -> dict[str, list[tuple[int, ...]]]:
        """The map: each placed stream's replicas per partition."""
        out = {}
        with self._lock:
            for key in self._kvs:
                parsed = self.keys.parse(key)
                if parsed is not None and parsed[0] == "map":
                    value = self._value(key) or {}
                    out[parsed[1][0]] = [tuple(int(n) for n in r) for r in value.get("replicas", [])]
        return out

    def partition(self, stream: str, partition: int) -> PartitionState:
        k = self.keys
        with self._lock:
            placed = (self._value(k.map(stream)) or {}).get("replicas", [])
            replicas = tuple(int(n) for n in placed[partition]) if 0 <= partition < len(placed) else ()
            leader_kv = self._kvs.get(k.leader(stream, partition))
            leader = None
            if leader_kv is not None:
                lv = decode(leader_kv.value) or {}
                if "node" in lv and "epoch" in lv:
                    leader = Leader(int(lv["node"]), int(lv["epoch"]), leader_kv.lease, leader_kv.value)
            ev = self._value(k.epoch(stream, partition)) or {}
            isr = self._value(k.isr(stream, partition))
        in_sync = tuple(int(n) for n in isr["nodes"]) if isr and isinstance(isr.get("nodes"), list) else None
        last = ev.get("leader")
        return PartitionState(stream, partition, replicas, leader, int(ev.get("epoch", 0)),
                              int(last) if last is not None else None, in_sync)

    def partitions(self) -> list[PartitionState]:
        """Every placed partition, by stream and index."""
        return [self.partition(s, p) for s, reps in sorted(self.streams().items()) for p in range(len(reps))]

    def leader(self, stream: str, partition: int) -> Leader | None:
        return self.partition(stream, partition).leader

    def owner(self, stream: str, partition: int) -> int:
        state = self.partition(stream, partition)
        if state.leader is not None:
            return state.leader.node
        if state.replicas:
            return state.replicas[0]
        n = len(self.addresses)
        if n == 0:
            raise LookupError(f"no server is registered in etcd under {self.keys.prefix}")
        start = int(splitmix64(np.array([string_word(stream)], dtype=np.uint64))[0] % np.uint64(n))
        return (start + partition) % n
