"""A node's etcd lease, kept alive by a thread: the leader keys it holds live exactly as long.

The thread renews the lease every quarter of its TTL. `lost` is set when etcd answers that the
lease has expired (the node was paused, or cut off from etcd, for longer than the TTL), or when
etcd has been unreachable for a whole TTL (then the lease has expired there, or will before this
node can renew it). A lost lease is never renewed: the coordinator grants a new one. `valid_until` is the latest instant
(time.monotonic) at which etcd may still hold the lease: the TTL from when the last renewal that
succeeded was sent, so a leader can stop acknowledging writes before etcd can elect another.
"""
from __future__ import annotations

import logging
import threading
import time

from .etcd import Etcd, EtcdError

log = logging.getLogger("windowstore.coordination")


class LeaseKeeper:
    def __init__(self, etcd: Etcd, ttl_s: int, on_lost=None):
        self.etcd = etcd
        asked = time.monotonic()
        self.id, self.ttl_s = etcd.grant(ttl_s)
        self.renewed_at = asked  # when the newest renewal (or the grant) that etcd answered was sent
        self.lost = threading.Event()
        self.on_lost = on_lost
        self._stop = threading.Event()
        self._paused = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"windowstore-lease-{self.id:x}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        last_ok = time.monotonic()
        interval = max(self.ttl_s / 4.0, 0.1)
        while not self._stop.wait(interval):
            if self._paused.is_set():
                continue
            asked = time.monotonic()
            try:
                ttl = self.etcd.keepalive(self.id)
            except EtcdError as e:
                if time.monotonic() - last_ok < self.ttl_s:
                    continue
                log.warning("lease %x: etcd unreachable for %d s (%s): taken as lost", self.id, self.ttl_s, e)
                ttl = 0
            if ttl <= 0:
                log.warning("lease %x expired", self.id)
                self.lost.set()
                if self.on_lost is not None:
                    self.on_lost()
                return
            last_ok = time.monotonic()
            self.renewed_at = asked

    def valid_until(self) -> float:
        """The time.monotonic() before which etcd cannot have expired the lease (0 once lost)."""
        return 0.0 if self.lost.is_set() else self.renewed_at + self.ttl_s

    def pause(self) -> None:
        """Stop renewing (as a stopped process would), until resume(); for tests."""
        self._paused.set()

    def resume(self) -> None:
        self._paused.clear()

    def close(self, revoke: bool = True) -> None:
        """Stop renewing; with `revoke`, end the lease now so its keys go at once."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(10)
        if revoke and not self.lost.is_set():
            try:
                self.etcd.revoke(self.id)
            except EtcdError as e:
                log.warning("lease %x: not revoked (%s): it expires by itself", self.id, e)
