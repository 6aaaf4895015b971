"""The throwaway etcd the tests of coordination run against (conftest's `etcd` fixture)."""
from __future__ import annotations

from windowstore.server.coordination.etcd import Etcd


def test_the_fixture_runs_a_throwaway_etcd_on_loopback(etcd):
    assert etcd.url.startswith("http://127.0.0.1:")
    client = Etcd(etcd.url)
    client.put("/t/a", "1")
    assert client.get("/t/a").value == "1"
    assert client.get("/t/b") is None
