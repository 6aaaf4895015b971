"""Assembles the gRPC server: the service, health checking, reflection, limits, shutdown.

The server is grpc.aio on an event loop of its own thread, and the engine runs on that same loop
(driver.py): every call is a coroutine that runs its read or write on the engine inline, and a call
that waits (a query of several operations, a write being made durable, an open Subscribe) awaits
a future and holds no thread. Other threads: the log's syncer, the snapshot writer, the decoders
of large Arrow payloads (--workers), the HTTP servers (http.py: metrics, health, the status page)
and the health watcher.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
import threading

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from windowstore.store.dictionary import warm_up
from windowstore.v1 import windowstore_pb2 as pb

from . import allocator, rpc
from .config import ServerConfig
from .driver import Driver
from .http import Endpoints, Health
from .metrics import Metrics
from .security import AccessPolicy, is_loopback
from .service import WindowStoreService

log = logging.getLogger("windowstore.server")
SERVICE_NAME = pb.DESCRIPTOR.services_by_name["WindowStoreService"].full_name


class ConfigError(ValueError):
    """Settings the server refuses to start with."""


def _read(path: str | None) -> bytes | None:
    if path is None:
        return None
    with open(path, "rb") as f:
        return f.read()


def check_protected(config: ServerConfig) -> None:
    """Protected mode: off loopback, serve only with TLS and tokens, unless --insecure."""
    if is_loopback(config.host) or config.insecure:
        return
    missing = [what for what, ok in (("TLS (--tls-cert, --tls-key)", config.tls_cert and config.tls_key),
                                     ("authentication (--tokens)", config.tokens)) if not ok]
    if missing:
        raise ConfigError(f"refusing to listen on {config.host} without {' and '.join(missing)}: anyone who can "
                          "reach it could read, write and drop every stream. Add them, or pass --insecure.")


class WindowStoreServer:
    """A running server; `port` is the bound port (useful with port=0)."""

    def __init__(self, config: ServerConfig):
        check_protected(config)
        if bool(config.tls_cert) != bool(config.tls_key):
            raise ConfigError("TLS needs both --tls-cert and --tls-key")
        if config.tls_client_ca and not config.tls_cert:
            raise ConfigError("--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key")
        self.config = config
        policy = AccessPolicy(config.tokens) if config.tokens else None
        self.driver = Driver(config)
        self.metrics = None
        self.metrics_port = self.http_port = None
        self._endpoints: list[Endpoints] = []
        if config.metrics_port is not None or config.http_port is not None:
            self.metrics = Metrics()
            self.metrics.bind(self.driver)
            self.driver.prometheus = self.metrics
            sched = self.driver.sched

            def slid(name: str) -> None:
                if sched.last_slide_delay is not None:
                    self.metrics.slide_delay.labels(name).observe(sched.last_slide_delay / 1000.0)
                if sched.last_seal_ms is not None:
                    self.metrics.seal.labels(name).observe(sched.last_seal_ms / 1000.0)
            self.driver.engine.on_slide = slid
        self.service = WindowStoreService(self.driver, policy)
        self._stopped = threading.Event()
        self.loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(target=self.loop.run_forever, name="windowstore-grpc", daemon=True)
        self._loop_thread.start()
        try:
            self.port = self._on_loop(self._build(policy))
        except BaseException:
            self._close_loop()
            raise

    def _on_loop(self, coro, timeout: float | None = None):
        """Run a coroutine on the server's loop from another thread and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _build(self, policy: AccessPolicy | None) -> int:
        config = self.config
        limit = config.max_message_mb * 1024 * 1024
        self.grpc = grpc.aio.server(options=[("grpc.max_receive_message_length", limit),
                                             ("grpc.max_send_message_length", limit), ("grpc.so_reuseport", 0)])
        self.grpc.add_generic_rpc_handlers((rpc.handlers(self.service, policy, self.metrics),))
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.grpc)
        reflection.enable_server_reflection((SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), self.grpc)
        address = f"{config.host}:{config.port}"
        if config.tls_cert:
            creds = grpc.ssl_server_credentials([(_read(config.tls_key), _read(config.tls_cert))],
                                                root_certificates=_read(config.tls_client_ca),
                                                require_client_auth=bool(config.tls_client_ca))
            port = self.grpc.add_secure_port(address, creds)
        else:
            port = self.grpc.add_insecure_port(address)
        if port == 0:
            raise OSError(f"cannot listen on {config.host}:{config.port}")
        return port

    def _set_health(self, status) -> None:
        async def set_all():
            for name in ("", SERVICE_NAME):
                await self.health.set(name, status)
        self._on_loop(set_all(), 10)

    def _close_loop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._loop_thread.join(5)

    @property
    def address(self) -> str:
        return f"{self.config.host}:{self.port}"

    def start(self, wait_recovery: bool = True) -> "WindowStoreServer":
        """Serve; health says NOT_SERVING until the driver has recovered the data directory.

        Sets the process's GIL switch interval (config.switch_interval_ms): the loop thread shares
        the GIL with the query, seal, log and decoding threads, and, in a process that embeds the
        server, with the caller's own. CPython's default 5 ms would show up as a 5 ms p99 when they
        hand back; 0.25 ms gave slide delay p99 0.5-1.4 ms instead of 1.0-2.1 ms with 0.5 ms under
        100 window scans, with no throughput change measured. With the default, a client thread
        beside a busy loop waited seconds for a call of a few round trips
        (tests/test_engine_on_loop.py's long query failed about one run in four)."""
        sys.setswitchinterval(self.config.switch_interval_ms / 1000.0)
        warm_up()
        self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        self._on_loop(self.grpc.start(), 30)
        health = Health(self.live, self.ready)
        for port, status in ((self.config.metrics_port, False), (self.config.http_port, True)):
            if port is not None:
                endpoints = Endpoints(self.driver, self.metrics.registry, health, status)
                bound = endpoints.serve(self.config.host, port)
                self._endpoints.append(endpoints)
                if status:
                    self.http_port = bound
                else:
                    self.metrics_port = bound
        self.driver.start(self.loop)
        threading.Thread(target=self._serving_after_recovery, name="windowstore-recovery", daemon=True).start()
        if wait_recovery:
            self.driver.recovered.wait()
        log.info("windowstore listening on %s (policy %s)", self.address, self.config.policy)
        return self

    def live(self) -> tuple[bool, str]:
        """(alive, why not): the engine has made progress within stuck_after_s whenever work waited."""
        stuck = self.driver.stuck_for()
        if stuck >= self.config.stuck_after_s:
            return False, f"the engine has made no progress for {stuck:.0f} s"
        return True, ""

    def ready(self) -> tuple[bool, str]:
        """(ready, why not): recovered, serving, no stream stopped, alive."""
        if self._stopped.is_set():
            return False, "shutting down"
        if not self.driver.recovered.is_set():
            return False, "recovering the data directory"
        error = getattr(self.driver, "recovery_error", None)
        if error is not None:
            return False, f"recovery failed: {error}"
        failed = dict(self.driver.sched.failed)
        if failed:
            return False, "; ".join(failed.values())
        return self.live()

    def _serving_after_recovery(self) -> None:
        """SERVING once recovered; then NOT_SERVING whenever the engine is stuck (work waits and
        no scheduler operation has completed for stuck_after_s) or a stream has stopped because
        its seal raised (until it is dropped), SERVING again when it moves."""
        self.driver.recovered.wait()
        if getattr(self.driver, "recovery_error", None) is not None:
            log.critical("not serving: %s", self.driver.recovery_error)
            self._stopped.set()
            return
        serving = None
        while not self._stopped.is_set():
            failed = dict(self.driver.sched.failed)
            ok = not failed and self.driver.stuck_for() < self.config.stuck_after_s
            if ok != serving:
                if failed:
                    log.error("health NOT_SERVING: %s", "; ".join(failed.values()))
                elif not ok:
                    log.error("the driver has made no progress for %.0f s: health NOT_SERVING", self.driver.stuck_for())
                status = health_pb2.HealthCheckResponse.SERVING if ok else health_pb2.HealthCheckResponse.NOT_SERVING
                try:
                    self._set_health(status)
                except RuntimeError:  # the loop stopped: the server is going away
                    return
                except TimeoutError:  # the loop is too busy to take it now: try again next round
                    continue
                serving = ok
            self._stopped.wait(0.5)

    def stop(self, grace_s: float | None = None) -> None:
        """Graceful: refuse new RPCs, let in-flight ones finish, tell subscribers, stop."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        for endpoints in self._endpoints:
            endpoints.close()
        grace = self.config.grace_s if grace_s is None else grace_s
        self._on_loop(self.health.enter_graceful_shutdown(), 10)
        done = asyncio.run_coroutine_threadsafe(self.grpc.stop(grace), self.loop)
        self.driver.stop(grace)  # subscribers are told (UNAVAILABLE) while the server drains
        try:
            done.result(grace + 5)
        finally:
            self._close_loop()
            self.service.close()

    def wait(self) -> None:
        self._stopped.wait()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def serve(config: ServerConfig) -> int:
    allocator.keep_freed_memory()
    try:
        server = WindowStoreServer(config).start()
    except (ConfigError, OSError, ValueError) as e:
        print(f"windowstore: cannot start: {e}", file=sys.stderr, flush=True)
        return 2
    error = getattr(server.driver, "recovery_error", None)
    if error is not None:
        print(f"windowstore: cannot start: {error}", file=sys.stderr, flush=True)
        server.stop(0)
        return 2
    where = "in memory" if config.in_memory else f"data in {os.path.abspath(config.data_dir)}, fsync {config.fsync}"
    where += ("; TLS" + (" (mutual)" if config.tls_client_ca else "") if config.tls_cert else "; plaintext")
    where += "; tokens" if config.tokens else "; no authentication"
    if server.http_port is not None:
        where += f"; status page on http://{config.host}:{server.http_port}/"
    if server.metrics_port is not None:  # last: scripts read the metrics URL to the end of the line
        where += f"; metrics on http://{config.host}:{server.metrics_port}/metrics"
    # What start-up made (modules, functions, types: most of the objects the collector tracks)
    # lives as long as the process: keep it out of every collection, so a full one (which would
    # hold the event loop for tens of ms scanning it) only walks what serving made.
    gc.freeze()
    print(f"windowstore serving on {server.address} (policy {config.policy}; {where})", flush=True)

    def on_signal(signum, frame):
        log.info("signal %s: shutting down", signum)
        threading.Thread(target=server.stop, name="windowstore-shutdown").start()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.wait()
    server.driver.finished.wait(config.grace_s + 6)
    print("windowstore stopped", flush=True)
    return 0
