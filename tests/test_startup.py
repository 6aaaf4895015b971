"""Start-up: one process owns a data directory (its LOCK), and a server that cannot start says why
in one line on stderr, naming the flag, exits 2 and leaves nothing behind (no data directory)."""
from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys

import pytest

from windowstore.clients import Client
from windowstore.server.app import ConfigError, WindowStoreServer
from windowstore.server.config import ServerConfig
from windowstore.server.datadir import DataDirInUse
from windowstore.server.durability import Durability
from windowstore.server.process import ServerProcess

pytestmark = pytest.mark.slow  # servers in subprocesses, or long property runs: make test-fast skips them

SCHEMA = {"ts": "int64", "v": "int64"}
CLI_TIMEOUT_S = 120  # a safety net only: each run must end by itself, long before


def tree(directory) -> dict[str, str]:
    """Every file under `directory` with a digest of its bytes (what a refused server must not change)."""
    out = {}
    for d, _, files in os.walk(directory):
        for f in files:
            path = os.path.join(d, f)
            with open(path, "rb") as fh:
                out[os.path.relpath(path, directory)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def serve(*args: str) -> subprocess.CompletedProcess:
    """`windowstore serve ARGS` through the real CLI; it must exit by itself."""
    try:
        return subprocess.run([sys.executable, "-m", "windowstore.server.cli", "serve", *args],
                              capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:  # the safety net was hit: start-up hung instead of failing
        raise AssertionError(f"windowstore serve {' '.join(args)} did not exit within {CLI_TIMEOUT_S} s") from e


def fill(ws: Client, first: int, n: int) -> None:
    ws.append("s", {"ts": list(range(first, first + n)), "v": list(range(first, first + n))})


def count(ws: Client) -> tuple:
    """COUNT and SUM of v over the window and the open buffer (a manual slide seals it)."""
    ws.slide("s")
    return tuple(ws.query("SELECT COUNT(*), SUM(v) FROM s").rows[0])


# -- the data directory's lock ---------------------------------------------------------------------
def test_a_second_durability_on_a_directory_is_refused_until_the_first_closes(tmp_path):
    first = Durability(str(tmp_path), "off")
    before = tree(tmp_path)
    assert open(tmp_path / "LOCK").read().strip() == str(os.getpid())
    with pytest.raises(DataDirInUse) as refused:
        Durability(str(tmp_path), "off")
    assert refused.value.pid == os.getpid() and refused.value.directory == str(tmp_path)
    assert f"pid {os.getpid()}" in str(refused.value) and str(tmp_path) in str(refused.value)
    assert tree(tmp_path) == before
    first.close(None)
    again = Durability(str(tmp_path), "off")  # released on close: taken again
    again.close(None)


def test_a_second_server_on_a_directory_is_refused_while_the_first_runs(tmp_path):
    data = tmp_path / "data"
    first = WindowStoreServer(ServerConfig(port=0, data_dir=str(data))).start()
    try:
        with Client(first.address, timeout=30) as ws:
            ws.create_stream("s", SCHEMA, subwindows=100, subwindow_ms=1000, clock="manual")
            fill(ws, 0, 10)
            before = tree(data)
            with pytest.raises(ConfigError) as refused:
                WindowStoreServer(ServerConfig(port=0, data_dir=str(data)))
            assert f"--data-dir {data}" in str(refused.value) and f"pid {os.getpid()}" in str(refused.value)
            assert tree(data) == before
            fill(ws, 10, 5)  # the first goes on serving
            assert count(ws) == (15, sum(range(15)))
    finally:
        first.stop()
    second = WindowStoreServer(ServerConfig(port=0, data_dir=str(data))).start()  # the lock was released
    try:
        with Client(second.address, timeout=30) as ws:
            assert count(ws) == (15, sum(range(15)))
    finally:
        second.stop()


def test_the_cli_refuses_a_second_server_and_a_restart_after_kill_9_takes_the_directory(tmp_path):
    data = tmp_path / "data"
    srv = ServerProcess(data_dir=str(data))  # --fsync always
    try:
        with Client(srv.target, timeout=30) as ws:
            ws.create_stream("s", SCHEMA, subwindows=100, subwindow_ms=1000, clock="manual")
            fill(ws, 0, 20)
            before = tree(data)
            out = serve("--port", "0", "--data-dir", str(data))
            assert out.returncode == 2, out
            assert out.stderr.splitlines() == [
                f"windowstore serve: --data-dir {data}: data directory {data} is in use by another process "
                f"(pid {srv.proc.pid})"], out.stderr
            assert out.stdout == ""
            assert tree(data) == before  # nothing read into, written or deleted
            fill(ws, 20, 30)  # acknowledged (on disk) after the refusal
    finally:
        srv.proc.kill()
        srv.proc.wait(30)
    srv = ServerProcess(data_dir=str(data))  # the kernel released the dead server's lock
    try:
        with Client(srv.target, timeout=30) as ws:
            assert count(ws) == (50, sum(range(50)))
        assert open(data / "LOCK").read().strip() == str(srv.proc.pid)
    finally:
        code, _, err = srv.stop()
    assert code == 0, err


# -- start-up errors ---------------------------------------------------------------------------------
@pytest.fixture
def busy_port():
    """A port something else listens on (127.0.0.1)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def refused(out: subprocess.CompletedProcess, line: str, data) -> None:
    assert out.returncode == 2, out
    assert out.stderr.splitlines() == [f"windowstore serve: {line}"], out.stderr
    assert out.stdout == ""
    assert not os.path.lexists(data), sorted(os.listdir(data))


def test_a_port_in_use_is_one_line_and_creates_nothing(tmp_path, busy_port):
    data = tmp_path / "data"
    out = serve("--port", str(busy_port), "--data-dir", str(data))
    refused(out, f"--port {busy_port}: address 127.0.0.1:{busy_port} is already in use", data)


@pytest.mark.parametrize("flag", ["--metrics-port", "--http-port"])
def test_an_http_port_in_use_is_one_line_and_creates_nothing(tmp_path, busy_port, flag):
    data = tmp_path / "data"
    out = serve("--port", "0", flag, str(busy_port), "--data-dir", str(data))
    refused(out, f"{flag} {busy_port}: address 127.0.0.1:{busy_port} is already in use", data)


@pytest.mark.parametrize("flag", ["--port", "--metrics-port", "--http-port"])
def test_a_port_out_of_range_is_one_line_and_creates_nothing(tmp_path, flag):
    data = tmp_path / "data"
    out = serve("--port", "0", flag, "70000", "--data-dir", str(data))
    refused(out, f"{flag} 70000: not a port number (0 to 65535)", data)


def test_a_data_dir_that_is_a_file_is_refused(tmp_path):
    path = tmp_path / "file"
    path.write_text("not a directory")
    out = serve("--port", "0", "--data-dir", str(path))
    assert out.returncode == 2 and out.stderr.splitlines() == [
        f"windowstore serve: --data-dir {path}: not a directory"], out
    assert path.read_text() == "not a directory"
    out = serve("--port", "0", "--data-dir", str(path / "data"))
    assert out.returncode == 2 and out.stderr.splitlines() == [
        f"windowstore serve: --data-dir {path / 'data'}: cannot create it: {path} is not a directory"], out
    assert path.read_text() == "not a directory"


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write any directory (and the interpreter may live "
                                             "where no other user can run it)")
def test_an_unusable_data_dir_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        out = serve("--port", "0", "--data-dir", str(locked))
        assert out.returncode == 2 and out.stderr.splitlines() == [
            f"windowstore serve: --data-dir {locked}: permission denied (it must be readable and writable)"], out
        data = locked / "data"
        refused(serve("--port", "0", "--data-dir", str(data)),
                f"--data-dir {data}: cannot create it: permission denied in {locked}", data)
        assert os.listdir(locked) == []
    finally:
        locked.chmod(0o755)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    from pki import make_pki

    return make_pki(tmp_path_factory.mktemp("pki"))


def _garbage(tmp_path, name="garbage.pem"):
    path = tmp_path / name
    path.write_text("-----BEGIN NOTHING-----\nnot base64 at all\n-----END NOTHING-----\n")
    return str(path)


@pytest.mark.parametrize("case", ["cert missing", "cert garbage", "key missing", "key garbage", "key of another",
                                  "client ca garbage"])
def test_a_bad_tls_file_is_one_line_naming_the_flag(tmp_path, pki, case):
    data = tmp_path / "data"
    missing = str(tmp_path / "missing.pem")
    cert, key, extra = pki["server"], pki["server_key"], []
    if case == "cert missing":
        cert, line = missing, f"--tls-cert {missing}: cannot read it: No such file or directory"
    elif case == "cert garbage":
        cert = _garbage(tmp_path)
        line = f"--tls-cert {cert}: not a PEM certificate ("
    elif case == "key missing":
        key, line = missing, f"--tls-key {missing}: cannot read it: No such file or directory"
    elif case == "key garbage":
        key = _garbage(tmp_path)
        line = f"--tls-key {key}: not an unencrypted PEM private key of the --tls-cert certificate ("
    elif case == "key of another":
        key = pki["client_key"]
        line = f"--tls-key {key}: not an unencrypted PEM private key of the --tls-cert certificate ("
    else:
        ca = _garbage(tmp_path)
        extra, line = ["--tls-client-ca", ca], f"--tls-client-ca {ca}: not a PEM certificate ("
    out = serve("--port", "0", "--data-dir", str(data), "--tls-cert", cert, "--tls-key", key, *extra)
    assert out.returncode == 2, out
    [got] = out.stderr.splitlines()
    assert got.startswith(f"windowstore serve: {line}"), got
    assert not os.path.lexists(data)


@pytest.mark.parametrize("case", ["missing", "not json", "bad action"])
def test_a_bad_tokens_file_is_one_line_naming_the_flag(tmp_path, case):
    data = tmp_path / "data"
    tokens = tmp_path / "tokens.json"
    if case == "not json":
        tokens.write_text("{not json")
    elif case == "bad action":
        tokens.write_text(json.dumps({"tokens": {}, "grants": {"alice": {"*": ["fly"]}}}))
    out = serve("--port", "0", "--data-dir", str(data), "--tokens", str(tokens))
    assert out.returncode == 2, out
    [got] = out.stderr.splitlines()
    assert got.startswith(f"windowstore serve: --tokens: tokens file {tokens}: "), got
    assert {"missing": "No such file", "not json": "Expecting property name",
            "bad action": "unknown action 'fly' for 'alice'"}[case] in got, got
    assert not os.path.lexists(data)
