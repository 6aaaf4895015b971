"""Assembles the gRPC server: the service, health checking, reflection, limits, shutdown.

The server is grpc.aio on an event loop of its own thread, and the engine runs on that same loop
(driver/): every call is a coroutine that runs its read or write on the engine inline, and a call
that waits (a query of several operations, a write being made durable, an open Subscribe) awaits
a future and holds no thread. Other threads: the log's syncer, the snapshot writer, the decoders
of large Arrow payloads (--workers), the HTTP servers (http.py: metrics, health, the status page)
and the health watcher.
"""
from __future__ import annotations

import asyncio
import errno
import gc
import logging
import os
import shutil
import signal
import socket
import ssl
import sys
import threading
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from windowstore.store.dictionary import warm_up
from windowstore.v1 import windowstore_pb2 as pb

from . import allocator, datadir, rpc
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


def _read(path: str | None, flag: str) -> bytes | None:
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ConfigError(f"{flag} {path}: cannot read it: {e.strerror or e}") from None


def _ssl_detail(e: ssl.SSLError) -> str:
    return e.reason.lower().replace("_", " ") if e.reason else str(e)


def server_credentials(config: ServerConfig) -> grpc.ServerCredentials | None:
    """Read and check the certificate, key and client CA now (grpc would take any bytes and fail
    each handshake later); ConfigError naming the flag."""
    if not config.tls_cert:
        return None
    cert, key = _read(config.tls_cert, "--tls-cert"), _read(config.tls_key, "--tls-key")
    ca = _read(config.tls_client_ca, "--tls-client-ca")
    for flag, path, pem in (("--tls-cert", config.tls_cert, cert), ("--tls-client-ca", config.tls_client_ca, ca)):
        if pem is None:
            continue
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_verify_locations(cadata=pem.decode("ascii"))
        except (ssl.SSLError, ValueError, UnicodeDecodeError) as e:
            detail = _ssl_detail(e) if isinstance(e, ssl.SSLError) else "not ASCII"
            raise ConfigError(f"{flag} {path}: not a PEM certificate ({detail})") from None
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(config.tls_cert, config.tls_key, password=lambda: b"")
    except ssl.SSLError as e:
        raise ConfigError(f"--tls-key {config.tls_key}: not an unencrypted PEM private key of the --tls-cert "
                          f"certificate ({_ssl_detail(e)})") from None
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca,
                                       require_client_auth=bool(config.tls_client_ca))


def check_data_dir(path: str) -> None:
    """--data-dir is a directory this process can use, or one it can create; ConfigError if not.
    Nothing is created here."""
    if os.path.lexists(path):
        if not os.path.isdir(path):
            raise ConfigError(f"--data-dir {path}: not a directory")
        if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
            raise ConfigError(f"--data-dir {path}: permission denied (it must be readable and writable)")
        return
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise ConfigError(f"--data-dir {path}: cannot create it: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"--data-dir {path}: cannot create it: permission denied in {parent}")


def _why_not_bound(host: str, port: int) -> str | None:
    """Why an address cannot be listened on, found by binding plain sockets to what the host
    resolves to (with SO_REUSEADDR, as grpc and the metrics server do); None if one of them can be
    bound now (grpc listens on every address it can). ConfigError if the host does not resolve."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise ConfigError(f"--host {host}: cannot resolve it: {e.strerror}") from None
    reasons = []
    for family, kind, proto, _, address in infos:
        try:
            with socket.socket(family, kind, proto) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(address)
            return None
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                reasons.append(f"address {host}:{port} is already in use")
            elif e.errno == errno.EADDRNOTAVAIL:
                reasons.append(f"{host} is not an address of this machine")
            elif e.errno == errno.EACCES:
                reasons.append(f"permission denied to listen on {host}:{port}")
            else:
                reasons.append(f"cannot listen on {host}:{port}: {e.strerror}")
    return reasons[0] if reasons else None


def check_protected(config: ServerConfig) -> None:
    """Protected mode: off loopback, serve only with TLS and tokens, unless --insecure."""
    if is_loopback(config.host) or config.insecure:
        return
    missing = [what for what, ok in (("TLS (--tls-cert, --tls-key)", config.tls_cert and config.tls_key),
                                     ("authentication (--tokens)", config.tokens)) if not ok]
    if missing:
        raise ConfigError(f"refusing to listen on {config.host} without {' and '.join(missing)}: anyone who can "
                          "reach it could read, write and drop every stream. Add them, or pass --insecure.")


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())


def load_cluster(config: ServerConfig):
    """The cluster file (--cluster) and this server's node in it (--node), or None without one;
    with --etcd, the cluster as etcd holds it (coordination/view.py)."""
    if config.etcd is not None:
        return load_etcd_cluster(config)
    if config.cluster is None and config.node is None:
        return None
    if config.cluster is None or config.node is None:
        raise ConfigError("--cluster and --node go together (the file, and this server's index in it)")
    from windowstore.store.partitions import StaticCluster

    try:
        cluster = StaticCluster.load(config.cluster)
    except ValueError as e:
        raise ConfigError(f"--cluster {e}") from None
    if not 0 <= config.node < len(cluster.nodes):
        raise ConfigError(f"--node {config.node}: the cluster file lists nodes 0 to {len(cluster.nodes) - 1}")
    return cluster


def load_etcd_cluster(config: ServerConfig):
    """--etcd URL with --node I: the cluster view read from etcd (its map, leaders and epochs)."""
    assert config.etcd is not None, "called with --etcd only"
    if config.cluster is not None:
        raise ConfigError("--etcd and --cluster are alternatives: the cluster is in etcd or in a file")
    if config.node is None or config.node < 0:
        raise ConfigError("--etcd needs --node (this server's id in the cluster, 0 or more)")
    if config.lease_ttl_s < 1:
        raise ConfigError(f"--lease-ttl-s {config.lease_ttl_s}: at least 1 (etcd leases are whole seconds)")
    from .coordination.etcd import Etcd, EtcdError
    from .coordination.view import EtcdClusterView

    try:
        return EtcdClusterView(Etcd(config.etcd), config.etcd_prefix)
    except (ValueError, EtcdError) as e:
        raise ConfigError(f"--etcd {config.etcd}: {e}") from None


class WindowStoreServer:
    """A running server; `port` is the bound port (useful with port=0)."""

    def __init__(self, config: ServerConfig):
        """Start-up in an order that leaves nothing behind when it fails: check the settings and
        read the files they name, bind the gRPC and metrics ports, then take the data directory's
        lock (creating it) and open it. Each failure is a ConfigError naming the flag (for a data
        directory another process holds, with that process's pid)."""
        check_protected(config)
        if bool(config.tls_cert) != bool(config.tls_key):
            raise ConfigError("TLS needs both --tls-cert and --tls-key")
        if config.tls_client_ca and not config.tls_cert:
            raise ConfigError("--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key")
        for flag, port in (("--port", config.port), ("--metrics-port", config.metrics_port),
                           ("--http-port", config.http_port)):
            if port is not None and not 0 <= port <= 65535:
                raise ConfigError(f"{flag} {port}: not a port number (0 to 65535)")
        self.config = config
        creds = server_credentials(config)
        try:
            policy = AccessPolicy(config.tokens) if config.tokens else None
        except ValueError as e:
            raise ConfigError(f"--tokens: {e}") from None
        if not config.in_memory:
            check_data_dir(config.data_dir)
        self.cluster = load_cluster(config)
        self.coordinator: Any = None  # with --etcd, the node's Coordinator once serving
        self.metrics: Metrics | None = None
        self.metrics_port: int | None = None
        self.http_port: int | None = None
        self._endpoints: list[Endpoints] = []
        self.grpc: Any = None  # the grpc.aio server, once bound
        self._stopped = threading.Event()
        self.loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(target=self.loop.run_forever, name="windowstore-grpc", daemon=True)
        self._loop_thread.start()
        lock = None
        try:
            self.port = self._on_loop(self._bind(creds))
            self._serve_http()
            if not config.in_memory:
                try:
                    lock = datadir.DataDirLock.acquire(config.data_dir)
                except OSError as e:
                    raise ConfigError(f"--data-dir {config.data_dir}: {e.strerror or e}") from None
                with datadir.handed_over(lock):
                    self.driver = Driver(config)
            else:
                self.driver = Driver(config)
            if config.cluster is not None and not config.in_memory:  # (static roles: a cluster file, not --etcd)
                from .replication import Replication
                self.driver.replication = Replication(self.driver, config.data_dir, config.node or 0,
                                                      self.cluster.addresses, config.fsync,
                                                      peers=dict(config.peer_addresses))
                self.driver.group_commit.replication = self.driver.replication
            elif config.etcd is not None and not config.in_memory:  # roles from etcd's elections
                from .replication.failover import CoordinatedReplication
                self.driver.replication = CoordinatedReplication(self.driver, config.data_dir, config.node or 0,
                                                                 self.cluster, config.fsync,
                                                                 lag_s=max(2.0, 2.0 * config.lease_ttl_s),
                                                                 peers=dict(config.peer_addresses))
                self.driver.group_commit.replication = self.driver.replication
            for endpoints in self._endpoints:
                endpoints.attach(self.driver)
            self._on_loop(self._add_service(policy))
        except BaseException as e:
            if config.etcd is not None and self.cluster is not None:
                self.cluster.close()
            self._abandon(lock)
            if isinstance(e, OSError) and config.history_path and e.filename == config.history_path:
                raise ConfigError(f"--history {config.history_path}: {e.strerror}") from None
            raise

    def _serve_http(self) -> None:
        """Bind --metrics-port (metrics and health) and --http-port (those and the status page)."""
        config = self.config
        if config.metrics_port is None and config.http_port is None:
            return
        self.metrics = Metrics()
        health = Health(self.live, self.ready)
        for flag, port, status in (("--metrics-port", config.metrics_port, False), ("--http-port", config.http_port, True)):
            if port is None:
                continue
            endpoints = Endpoints(self.metrics.registry, health, status)
            try:
                bound = endpoints.serve(config.host, port)
            except OSError as e:
                why = _why_not_bound(config.host, port) or e.strerror or str(e)
                raise ConfigError(f"{flag} {port}: {why}") from None
            self._endpoints.append(endpoints)
            if status:
                self.http_port = bound
            else:
                self.metrics_port = bound

    def _abandon(self, lock: datadir.DataDirLock | None) -> None:
        """A start-up that failed: unbind, and remove a data directory it created."""
        for endpoints in self._endpoints:
            endpoints.close()
        if self.grpc is not None:
            self._on_loop(self.grpc.stop(None), 10)
        self._close_loop()
        if lock is not None:
            if lock.created is not None:
                shutil.rmtree(lock.created, ignore_errors=True)
            lock.release()

    def _on_loop(self, coro, timeout: float | None = None):
        """Run a coroutine on the server's loop from another thread and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _bind(self, creds: grpc.ServerCredentials | None) -> int:
        config = self.config
        limit = config.max_message_mb * 1024 * 1024
        self.grpc = grpc.aio.server(options=[("grpc.max_receive_message_length", limit),
                                             ("grpc.max_send_message_length", limit), ("grpc.so_reuseport", 0)])
        address = f"{config.host}:{config.port}"
        # grpc logs its own lines on stderr when a bind fails: look first (a port taken between
        # this and grpc's bind still gets the message below, after grpc's)
        why = _why_not_bound(config.host, config.port)
        if why is not None:
            raise ConfigError(f"--port {config.port}: {why}")
        try:
            port = self.grpc.add_secure_port(address, creds) if creds else self.grpc.add_insecure_port(address)
        except RuntimeError:  # grpc's "Failed to bind to address": find out why
            port = 0
        if port == 0:
            why = _why_not_bound(config.host, config.port) or f"cannot listen on {address}"
            raise ConfigError(f"--port {config.port}: {why}")
        return port

    async def _add_service(self, policy: AccessPolicy | None) -> None:
        if self.metrics is not None:
            self.metrics.bind(self.driver)
            self.driver.prometheus = self.metrics  # type: ignore[assignment]  # Driver declares it None until then
            sched = self.driver.sched

            def slid(name: str) -> None:
                if sched.last_slide_delay is not None:
                    self.metrics.slide_delay.labels(name).observe(sched.last_slide_delay / 1000.0)  # type: ignore[union-attr]  # set: only bound when there are metrics
                if sched.last_seal_ms is not None:
                    self.metrics.seal.labels(name).observe(sched.last_seal_ms / 1000.0)  # type: ignore[union-attr]  # set: only bound when there are metrics
            self.driver.engine.on_slide = slid
        self.service = WindowStoreService(self.driver, policy, self.cluster)
        self.grpc.add_generic_rpc_handlers((rpc.handlers(self.service, policy, self.metrics, self.config.client_error_log_limit),))
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.grpc)
        reflection.enable_server_reflection((SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), self.grpc)

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
        self.driver.start(self.loop)
        threading.Thread(target=self._serving_after_recovery, name="windowstore-recovery", daemon=True).start()
        if wait_recovery:
            self.driver.recovered.wait()
        if self.config.etcd is not None:
            self._coordinate()
        log.info("windowstore listening on %s (policy %s)", self.address, self.config.policy)
        return self

    def _coordinate(self) -> None:
        """Register this node in etcd under its address and take part in its partitions' elections."""
        from .coordination.coordinator import Coordinator
        from .coordination.metrics import CoordinationCollector

        assert self.config.node is not None, "--etcd needs --node (checked at start-up)"
        repl = self.driver.replication
        roles = None
        if getattr(repl, "coordinated", False):  # the coordinator's decisions go to the replicas (failover.py)
            from .replication.failover import ReplicationRoles
            assert repl is not None
            roles = ReplicationRoles(repl)
        self.coordinator = Coordinator(self.cluster.etcd, self.config.node, self.config.advertise_address or self.address,
                                       roles=roles,
                                       ttl_s=self.config.lease_ttl_s, prefix=self.config.etcd_prefix, view=self.cluster)
        if roles is not None:
            assert repl is not None
            repl.coordinator = self.coordinator
        self.coordinator.start()
        if self.metrics is not None:
            self.metrics.registry.register(CoordinationCollector(self.coordinator))

    def live(self) -> tuple[bool, str]:
        """(alive, why not): the engine has made progress within stuck_after_s whenever work waited."""
        driver = getattr(self, "driver", None)
        if driver is None:
            return False, "starting"
        stuck = driver.stuck_for()
        if stuck >= self.config.stuck_after_s:
            return False, f"the engine has made no progress for {stuck:.0f} s"
        return True, ""

    def ready(self) -> tuple[bool, str]:
        """(ready, why not): recovered, serving, no stream stopped, alive."""
        driver = getattr(self, "driver", None)
        if self._stopped.is_set():
            return False, "shutting down"
        if driver is None or not driver.recovered.is_set():
            return False, "starting: recovering the data directory"
        error = getattr(driver, "recovery_error", None)
        if error is not None:
            return False, f"recovery failed: {error}"
        failed = dict(driver.sched.failed)
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
        if self.coordinator is not None:
            self.coordinator.stop()  # the lease ends now: another replica leads without waiting for its TTL
        elif self.config.etcd is not None and self.cluster is not None:
            self.cluster.close()
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
            if self.driver.recovery_error is not None and self.driver.durability is not None:
                self.driver.durability.lock.release()  # recovery failed: the driver never closes the log

    def wait(self) -> None:
        self._stopped.wait()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def serve(config: ServerConfig) -> int:
    """Run a server until SIGTERM or SIGINT; 0 after a clean stop. A server that cannot start
    prints one line on stderr naming the cause (and the flag) and returns 2."""
    allocator.keep_freed_memory()
    try:
        server = WindowStoreServer(config).start()
    except (ConfigError, OSError, ValueError) as e:
        print(f"windowstore serve: {_one_line(e)}", file=sys.stderr, flush=True)
        return 2
    error = getattr(server.driver, "recovery_error", None)
    if error is not None:
        print(f"windowstore serve: --data-dir {config.data_dir}: cannot recover: {_one_line(error)}",
              file=sys.stderr, flush=True)
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
