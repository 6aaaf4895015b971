"""Network partitions (tests/netfault.py): the proxy's cuts on a loopback echo server (bytes held by
a blackhole arrive intact once it heals, a one-way cut loses one direction only, a reset ends the
connections and refuses new ones); and a short `make chaos` run of the partition kinds in turn
against three `windowstore serve --etcd` processes, checked as make chaos checks: no acknowledged
batch lost, none twice, every answer equal to DuckDB over its slide's rows, and the clients' history
passes the isolation checker."""
from __future__ import annotations

import socket
import threading

import pytest

import chaos
from conftest import wait_for
from netfault import Fault, Network


class Echo(threading.Thread):
    """A loopback server that sends back what it reads; `got` counts the bytes it has read."""

    def __init__(self):
        super().__init__(daemon=True)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.got = 0

    def run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn) -> None:
        with conn:
            while True:
                try:
                    data = conn.recv(1 << 16)
                except OSError:
                    return
                if not data:
                    return
                self.got += len(data)
                conn.sendall(data)


def _nothing_arrives(sock: socket.socket) -> bool:
    """True if nothing arrives on `sock` for a moment (bytes held by a cut never arrive before it
    heals, so this cannot be fooled by a slow machine, only made to pass by a broken proxy late)."""
    sock.settimeout(0.3)
    try:
        return sock.recv(16) == b"x-never"
    except socket.timeout:
        return True
    finally:
        sock.settimeout(10)


def test_blackhole_holds_bytes_until_healed_one_way_cuts_one_direction_and_reset_refuses():
    echo = Echo()
    echo.start()
    net = Network()
    try:
        port = net.link("c", "s", echo.port)
        a = socket.create_connection(("127.0.0.1", port), timeout=10)
        a.sendall(b"one")
        assert a.recv(16) == b"one"

        net.cut("c", "s", Fault.BLACKHOLE)           # both ways: held, then delivered intact
        a.sendall(b"two")
        assert _nothing_arrives(a) and echo.got == 3
        net.heal()
        assert a.recv(16) == b"two"

        net.cut("s", "c", Fault.BLACKHOLE, one_way=True)  # the answers are lost, the requests arrive
        a.sendall(b"three")
        wait_for(lambda: echo.got == 11, "the request to cross the one-way cut")
        assert _nothing_arrives(a)
        net.heal()
        assert a.recv(16) == b"three"

        net.cut("c", "s", Fault.RESET)               # connections reset, new ones refused
        with pytest.raises(OSError):
            a.sendall(b"four")
            if a.recv(16) == b"":
                raise ConnectionResetError("closed")
        b = None
        with pytest.raises(OSError):  # refused at the connect itself or at its first bytes
            b = socket.create_connection(("127.0.0.1", port), timeout=10)
            b.sendall(b"five")
            if b.recv(16) == b"":
                raise ConnectionResetError("closed")
        if b is not None:
            b.close()
        assert net.resets >= 2
        with pytest.raises(ValueError, match="one-way"):
            net.cut("c", "s", Fault.RESET, one_way=True)
        net.heal()
        c = socket.create_connection(("127.0.0.1", port), timeout=10)
        c.sendall(b"six")
        assert c.recv(16) == b"six"
        for s in (a, c):
            s.close()
    finally:
        net.close()
        echo.sock.close()


@pytest.mark.long  # a chaos run in miniature (TTL 1 s): make chaos runs the full ones
def test_partitions_lose_no_acknowledged_batch(etcd):
    """Each partition kind once, in turn, each longer than the lease TTL (so a cut leader loses its
    lease or its followers leave the in-sync set). The etcd fixture only fails the test early
    without an etcd binary: the run starts an etcd of its own, behind the proxies."""
    args = chaos.parse(["--faults", str(len(chaos.PARTITION_KINDS)), "--kinds", ",".join(chaos.PARTITION_KINDS),
                        "--in-order", "--seed", "36", "--ttl", "1", "--min-s", "2.5", "--max-s", "240",
                        "--recover-s", "60"])
    results = chaos.run(args)
    print(results)
    assert results["failure"] is None, results
    assert results["faults"] == len(chaos.PARTITION_KINDS), results
    assert sorted(results["outage_s"]) == sorted(chaos.PARTITION_KINDS)
    assert results["lost"] == 0 and results["twice"] == 0 and results["extra"] == 0, results
    assert results["answers_checked"] > 0 and results["wrong_answers"] == 0, results
    # the clients' history through the isolation checker (tests/client_history.py)
    assert results["history"]["committed"] > 0, results
    assert results["history_torn"] == 0 and results["history_errors"] == 0, results["history_examples"]
    assert results["epoch"] >= 2, "a cut leader was replaced at least once"
    assert chaos.passed(results)


@pytest.mark.parametrize("flag, bad", [("--peer-address", b) for b in ("1", "x=127.0.0.1:5", "1=127.0.0.1", "1=:5",
                                                                       "-1=127.0.0.1:5")]
                         + [("--advertise-address", b) for b in ("127.0.0.1", ":5", "127.0.0.1:x")])
def test_serve_refuses_an_address_it_cannot_read_naming_the_flag(flag, bad, capsys):
    from windowstore.server.cli import build_parser

    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["serve", flag, bad])
    assert e.value.code == 2
    assert flag in capsys.readouterr().err


def test_serve_takes_peer_addresses_by_node():
    from windowstore.server.cli import build_parser

    args = build_parser().parse_args(["serve", "--peer-address", "1=127.0.0.1:5", "--peer-address", "2=127.0.0.1:6"])
    assert args.peer_address == [(1, "127.0.0.1:5"), (2, "127.0.0.1:6")]


def test_serve_takes_an_advertise_address():
    from windowstore.server.cli import build_parser

    assert build_parser().parse_args(["serve", "--advertise-address", "127.0.0.1:7"]).advertise_address == "127.0.0.1:7"
