"""Security against a real server: TLS (and mutual TLS), bearer tokens, per-stream permissions,
periodic queries owned by their principal, a reloadable tokens file, protected mode."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import wait_for
from pki import make_pki
from windowstore.clients import Client, NotFound, WindowStoreError
from windowstore.clients.errors import PermissionDenied, Unauthenticated, Unavailable
from windowstore.server.process import ServerProcess
from windowstore.server.security import token_hash

SCHEMA = {"ts": "int64", "k": "string", "v": "int64"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def _tokens(path, grants, tokens):
    path.write_text(json.dumps({"tokens": {token_hash(t): p for t, p in tokens.items()}, "grants": grants}))


@pytest.fixture(scope="module")
def secured(pki, tmp_path_factory):
    tokens = tmp_path_factory.mktemp("auth") / "tokens.json"
    _tokens(tokens, {"admin": {"*": ["admin"]}, "writer": {"sensors*": ["write", "read"]},
                     "reader": {"sensors*": ["read"]}, "other": {"sensors*": ["read"]}},
            {"t-admin": "admin", "t-writer": "writer", "t-reader": "reader", "t-other": "other"})
    srv = ServerProcess("--tls-cert", pki["server"], "--tls-key", pki["server_key"], "--tokens", str(tokens))
    yield srv, pki, tokens
    srv.stop()


def client(srv, pki, token=None, **kw):
    return Client(srv.target, ca=pki["ca"], token=token, timeout=10, retries=0, **kw)


@pytest.mark.slow
def test_tokens_and_permissions(secured):
    srv, pki, _ = secured
    with client(srv, pki, "t-admin") as admin:
        admin.create_stream("sensors1", SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual")
        admin.create_stream("secret", SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual")
    with client(srv, pki) as nobody, pytest.raises(Unauthenticated, match="bearer token"):
        nobody.list_streams()
    with client(srv, pki, "t-wrong") as wrong, pytest.raises(Unauthenticated):
        wrong.query("SELECT COUNT(*) FROM sensors1")
    with client(srv, pki, "t-writer") as w:
        w.append("sensors1", {"ts": [1, 2], "k": ["a", "b"], "v": [1, 2]})
        w.slide("sensors1")
        with pytest.raises(PermissionDenied, match="'writer' may not admin stream 'sensors2'"):
            w.create_stream("sensors2", SCHEMA, subwindows=4, subwindow_ms=1000)
        with pytest.raises(PermissionDenied, match="may not write stream 'secret'"):
            w.append("secret", {"ts": [1], "k": ["x"], "v": [1]})
    with client(srv, pki, "t-reader") as r:
        assert r.query("SELECT COUNT(*), SUM(v) FROM sensors1").rows == [(2, 3)]
        assert [s["spec"]["name"] for s in r.list_streams()] == ["sensors1"]  # only what it may read
        with pytest.raises(PermissionDenied, match="may not read stream 'secret'"):
            r.query("SELECT COUNT(*) FROM secret")
        with pytest.raises(PermissionDenied, match="may not write"):
            r.slide("sensors1")
        with pytest.raises(PermissionDenied, match="may not write"):  # refused before its fields are judged
            r.append("sensors1", {"ts": [3], "k": ["c"], "v": [3]}, batch_id=7)  # (no writer_id: malformed)
        q = r.register("SELECT COUNT(*) FROM sensors1 [SLIDE 1 SUBWINDOWS]")
    with client(srv, pki, "t-other") as o, pytest.raises(PermissionDenied, match="belongs to 'reader'"):
        o.unregister(q.id)  # periodic queries belong to their principal
    with client(srv, pki, "t-admin") as admin:
        admin.unregister(q.id)  # ... or to an admin of the stream
        with pytest.raises(NotFound):
            admin.unregister(q.id)


def test_a_streams_history_hides_the_names_of_joined_streams_the_reader_may_not_read(secured):
    srv, pki, _ = secured
    with client(srv, pki, "t-admin") as admin:
        for name in ("sensors_h", "hidden_h"):
            admin.create_stream(name, SCHEMA, subwindows=4, subwindow_ms=1000, clock="manual")
            admin.append(name, {"ts": [1], "k": ["a"], "v": [1]})
            admin.slide(name)
        admin.query("SELECT COUNT(*) FROM sensors_h a JOIN hidden_h b ON a.k = b.k")
        admin.query("SELECT COUNT(*) FROM sensors_h AS OF SLIDE 0")
        seen_by_admin = [e for e in admin.history("sensors_h") if e["op"] == "b"]
    with client(srv, pki, "t-reader") as r:
        seen_by_reader = [e for e in r.history("sensors_h") if e["op"] == "b"]
    assert [e.get("streams") for e in seen_by_admin] == [["sensors_h", "hidden_h"], None]
    assert [e.get("streams") for e in seen_by_reader] == [["sensors_h", "?"], None]
    assert [e.get("as_of") for e in seen_by_reader] == [None, 0]  # a pinned read's begin carries its slide


@pytest.mark.slow
def test_mutual_tls_needs_a_client_certificate(pki, tmp_path):
    srv = ServerProcess("--tls-cert", pki["server"], "--tls-key", pki["server_key"], "--tls-client-ca", pki["ca"])
    try:
        with Client(srv.target, ca=pki["ca"], cert=pki["client"], key=pki["client_key"], timeout=10) as ok:
            ok.create_stream("m", SCHEMA, subwindows=2, subwindow_ms=1000)
            assert ok.query("SELECT COUNT(*) FROM m").rows == [(0,)]
        with Client(srv.target, ca=pki["ca"], timeout=5, retries=0) as anon, pytest.raises(WindowStoreError):
            anon.list_streams()
        with Client(srv.target, timeout=5, retries=0) as plain, pytest.raises(Unavailable):
            plain.list_streams()  # plaintext to a TLS port
    finally:
        srv.stop()


@pytest.mark.slow
def test_the_tokens_file_is_reloaded(pki, tmp_path):
    tokens = tmp_path / "tokens.json"
    _tokens(tokens, {"a": {"*": ["admin"]}}, {"old": "a"})
    srv = ServerProcess("--tokens", str(tokens))
    try:
        with Client(srv.target, token="old", timeout=10) as c:
            c.create_stream("r", SCHEMA, subwindows=2, subwindow_ms=1000)
        loaded = tokens.stat().st_mtime_ns
        _tokens(tokens, {"a": {"*": ["admin"]}}, {"new": "a"})  # rotate: "old" revoked
        os.utime(tokens, ns=(loaded + 10**9, loaded + 10**9))  # a changed mtime, however coarse the file system's

        def new_token_accepted() -> bool:
            try:
                with Client(srv.target, token="new", timeout=5, retries=0) as c:
                    c.describe_stream("r")
                return True
            except Unauthenticated:
                return False
        wait_for(new_token_accepted, "the server to reload the tokens file")  # it looks at most once a second
        with Client(srv.target, token="old", timeout=5, retries=0) as c, pytest.raises(Unauthenticated):
            c.describe_stream("r")
    finally:
        srv.stop()


@pytest.mark.slow
def test_protected_mode_refuses_an_open_address_without_tls_and_tokens(tmp_path):
    out = subprocess.run([sys.executable, "-m", "windowstore.server.cli", "serve", "--in-memory", "--host", "0.0.0.0",
                          "--port", "0"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "refusing to listen on 0.0.0.0 without TLS" in out.stderr and "--insecure" in out.stderr
