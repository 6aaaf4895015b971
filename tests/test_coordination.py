"""Coordination through a real etcd on loopback (server/coordination/): the partition map and its
watch, elections by transaction, leases that expire when a leader stops renewing them, epochs that
fence a deposed leader, and no election of a replica outside the in-sync set.

Coordinators here run their passes when the test calls `step()` (no background loop), so each
decision happens at a known point; etcd itself is the oracle, read afresh with a plain range."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import threading

import pytest

from conftest import wait_for
from windowstore.server.coordination.coordinator import Coordinator
from windowstore.server.coordination.election import campaign, place, placement, set_in_sync
from windowstore.server.coordination.etcd import Etcd
from windowstore.server.coordination.keys import Keys, decode
from windowstore.server.coordination.roles import Assignment, Role
from windowstore.server.coordination.view import EtcdClusterView

KEYS = Keys()
TTL = 2  # seconds: etcd's leases are whole seconds


@pytest.fixture
def nodes(etcd):
    made: list[Coordinator] = []

    def make(n: int) -> list[Coordinator]:
        for i in range(len(made), len(made) + n):
            made.append(Coordinator(etcd.url, i, f"127.0.0.1:{7000 + i}", ttl_s=TTL))
        return made
    yield make
    for c in made:
        c.stop()


def placed(coordinators, stream: str, replicas: list[list[int]]) -> None:
    assert place(coordinators[0].etcd, KEYS, stream, replicas)
    for c in coordinators:  # each node's view has the map before it decides
        assert c.view.wait(lambda v: stream in v.streams(), 10), "the map reached every view"


def step(*coordinators: Coordinator) -> None:
    """Each coordinator's pass in turn, each once its view has caught up with etcd (so it sees what
    the passes before it wrote)."""
    for c in coordinators:
        revision = c.etcd.range_prefix(KEYS.prefix)[0]
        assert c.view.wait(lambda v: v.revision >= revision, 10), f"node {c.node}'s view caught up"
        c.step()


def test_the_fixture_runs_a_throwaway_etcd_on_loopback(etcd):
    assert etcd.url.startswith("http://127.0.0.1:")
    client = Etcd(etcd.url)
    client.put("/t/a", "1")
    assert client.get("/t/a").value == "1"
    assert client.get("/t/b") is None


def test_the_view_follows_the_map_and_the_leaders_through_its_watch(etcd):
    writer = Etcd(etcd.url)
    writer.put(KEYS.node(0), "127.0.0.1:7000")
    writer.put(KEYS.node(1), "127.0.0.1:7001")
    with EtcdClusterView(etcd.url) as view:
        assert view.addresses == ["127.0.0.1:7000", "127.0.0.1:7001"]
        assert view.streams() == {}
        assert place(writer, KEYS, "s", [[1, 0], [0, 1]])
        assert not place(writer, KEYS, "s", [[0, 1], [1, 0]]), "a stream is placed once"
        assert view.wait(lambda v: v.streams().get("s"), 10) == [(1, 0), (0, 1)]
        assert view.owner("s", 0) == 1 and view.owner("s", 1) == 0  # no leader yet: the preferred replica
        writer.put(KEYS.leader("s", 0), '{"epoch":4,"node":0}')
        assert view.wait(lambda v: v.leader("s", 0), 10).epoch == 4
        assert view.owner("s", 0) == 0
        writer.put(KEYS.node(2), "127.0.0.1:7002")
        assert view.wait(lambda v: len(v.addresses) == 3, 10)
        # a stream with no map is placed as StaticCluster places it over the registered nodes
        from windowstore.store.partitions import StaticCluster
        static = StaticCluster(tuple(view.addresses))
        assert [view.owner("t", p) for p in range(5)] == [static.owner("t", p) for p in range(5)]


def test_one_leader_per_partition_and_every_other_replica_follows_it(nodes):
    cs = nodes(3)
    placed(cs, "s", placement(0, [0, 1, 2], 3, 3))
    step(*cs, *cs)  # the second pass sees the first pass's winners
    for p in range(3):
        leader = etcd_value_from(cs[0], KEYS.leader("s", p))
        assert leader == {"epoch": 1, "node": p}, "the preferred replica (first in the map) won while all were up"
        name = f"s.p{p}"
        for c in cs:
            want = (Assignment(Role.LEADER, 1, None) if c.node == p
                    else Assignment(Role.FOLLOWER, 1, f"127.0.0.1:{7000 + p}"))
            assert c.table.get(name) == want
        assert decode(cs[0].etcd.get(KEYS.isr("s", p)).value) == {"epoch": 1, "nodes": [p, (p + 1) % 3, (p + 2) % 3]}
    assert sum(c.counters.elections_won for c in cs) == 3


def etcd_value_from(c: Coordinator, key: str) -> dict | None:
    kv = c.etcd.get(key)
    return decode(kv.value) if kv is not None else None


def test_racing_campaigns_elect_exactly_one(nodes):
    cs = nodes(4)
    placed(cs, "s", [[0, 1, 2, 3]])
    state = cs[0].view.partition("s", 0)
    barrier = threading.Barrier(len(cs))
    won: dict[int, int | None] = {}

    def run(c: Coordinator) -> None:
        barrier.wait()
        won[c.node] = campaign(c.etcd, KEYS, state, 0, 0, c.node, c.lease.id)
    threads = [threading.Thread(target=run, args=(c,)) for c in cs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    winners = [n for n, e in won.items() if e is not None]
    assert len(won) == 4 and len(winners) == 1 and won[winners[0]] == 1
    assert etcd_value_from(cs[0], KEYS.leader("s", 0)) == {"epoch": 1, "node": winners[0]}
    assert etcd_value_from(cs[0], KEYS.epoch("s", 0)) == {"epoch": 1, "leader": winners[0]}


def test_an_expired_lease_elects_an_in_sync_follower_and_the_old_leader_steps_down(nodes):
    a, b = nodes(2)
    placed([a, b], "s", [[0, 1]])
    step(a, b)
    assert a.table.get("s.p0") == Assignment(Role.LEADER, 1, None)
    assert b.table.get("s.p0") == Assignment(Role.FOLLOWER, 1, a.address)

    a.pause_keepalive()  # as a stopped leader process: its lease runs out in etcd
    assert b.view.wait(lambda v: v.leader("s", 0) is None, 4 * TTL + 10), "the leader key expired with the lease"
    step(b)
    assert b.table.get("s.p0") == Assignment(Role.LEADER, 2, None)
    assert etcd_value_from(b, KEYS.leader("s", 0)) == {"epoch": 2, "node": 1}
    assert etcd_value_from(b, KEYS.isr("s", 0)) == {"epoch": 2, "nodes": [1]}, "the leader that left is out of sync"
    assert a.table.get("s.p0") == Assignment(Role.LEADER, 1, None), "the old leader has not looked yet"

    # epoch fencing: the deposed leader can no longer write the in-sync set (its epoch is old) ...
    assert not set_in_sync(a.etcd, KEYS, "s", 0, 0, 1, [0, 1])
    assert etcd_value_from(b, KEYS.isr("s", 0)) == {"epoch": 2, "nodes": [1]}
    # ... and the new one can
    assert b.set_in_sync("s", 0, [1, 0])
    assert etcd_value_from(b, KEYS.isr("s", 0)) == {"epoch": 2, "nodes": [1, 0]}

    a.resume_keepalive()  # back: the next renewal finds the lease gone
    wait_for(lambda: a.lease.lost.is_set(), "the old leader to find its lease expired", timeout=4 * TTL + 10)
    step(a)
    assert a.table.get("s.p0") == Assignment(Role.FOLLOWER, 2, b.address)
    assert a.table.calls[-1] == ("follower", "s.p0", 2, b.address)
    assert a.counters.step_downs == 1 and a.counters.leases_lost == 1
    assert not a.set_in_sync("s", 0, [0, 1]), "a follower does not write the in-sync set"


def test_a_replica_outside_the_in_sync_set_is_never_elected(nodes):
    a, b = nodes(2)
    placed([a, b], "s", [[0, 1]])
    step(a, b)
    assert b.set_in_sync("s", 0, []) is False  # b follows: not its to write
    assert a.set_in_sync("s", 0, [0])           # the leader finds b out of sync
    a.pause_keepalive()
    assert b.view.wait(lambda v: v.leader("s", 0) is None, 4 * TTL + 10)
    before = b.counters.campaigns
    step(b)
    assert b.counters.campaigns == before, "no unclean election: b did not campaign"
    assert b.etcd.get(KEYS.leader("s", 0)) is None
    assert b.table.get("s.p0") == Assignment(Role.FOLLOWER, 1, a.address)


def test_a_stopped_coordinator_hands_its_partitions_over_at_once(nodes):
    a, b = nodes(2)
    placed([a, b], "s", [[0, 1]])
    step(a, b)
    a.stop()  # revokes the lease: the leader key goes now, not a TTL later
    assert b.view.wait(lambda v: v.leader("s", 0) is None, 10)
    step(b)
    assert b.table.get("s.p0") == Assignment(Role.LEADER, 2, None)


def test_cluster_status_and_place_on_the_command_line(nodes, etcd):
    cs = nodes(2)

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "windowstore.server.cli", "cluster", *args, "--etcd", etcd.url],
                              capture_output=True, text=True, timeout=60)
    out = cli("place", "s", "--partitions", "2", "--replication", "2")
    assert out.returncode == 0, out.stderr
    replicas = json.loads(out.stdout)["replicas"]
    assert sorted(map(sorted, replicas)) == [[0, 1], [0, 1]] and replicas[0][0] != replicas[1][0]
    again = cli("place", "s", "--partitions", "2")
    assert again.returncode == 1 and "already placed" in again.stderr
    too_many = cli("place", "t", "--partitions", "1", "--replication", "3")
    assert too_many.returncode == 2 and "--replication 3" in too_many.stderr
    step(*cs)
    status = cli("status", "--json")
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    assert doc["nodes"] == [{"node": 0, "address": "127.0.0.1:7000", "live": True},
                            {"node": 1, "address": "127.0.0.1:7001", "live": True}]
    for p, part in enumerate(doc["partitions"]):
        assert part["name"] == f"s.p{p}" and part["epoch"] == 1
        assert part["leader"] == replicas[p][0] and part["in_sync"] == replicas[p]
    table = cli("status")
    assert table.returncode == 0 and "s.p0" in table.stdout and "live" in table.stdout
    down = subprocess.run([sys.executable, "-m", "windowstore.server.cli", "cluster", "status", "--etcd",
                           "http://127.0.0.1:1"], capture_output=True, text=True, timeout=60)
    assert down.returncode == 2 and "127.0.0.1:1" in down.stderr


def test_serve_with_etcd_refuses_bad_settings_naming_the_flag(etcd):
    from windowstore.server.app import ConfigError, WindowStoreServer
    from windowstore.server.config import ServerConfig

    for config, says in ((ServerConfig(port=0, in_memory=True, etcd=etcd.url), "--etcd needs --node"),
                         (ServerConfig(port=0, in_memory=True, etcd=etcd.url, node=0, cluster="c.toml"),
                          "--etcd and --cluster are alternatives"),
                         (ServerConfig(port=0, in_memory=True, etcd=etcd.url, node=0, lease_ttl_s=0), "--lease-ttl-s 0"),
                         (ServerConfig(port=0, in_memory=True, etcd="ftp://127.0.0.1:1", node=0), "--etcd ftp://"),
                         (ServerConfig(port=0, in_memory=True, etcd="http://127.0.0.1:1", node=0), "--etcd http://127.0.0.1:1")):
        with pytest.raises(ConfigError, match=re.escape(says)):
            WindowStoreServer(config)


def test_a_server_with_etcd_registers_leads_its_partition_and_hands_it_over_on_stop(etcd):
    from windowstore.server.app import WindowStoreServer
    from windowstore.server.config import ServerConfig

    server = WindowStoreServer(ServerConfig(port=0, in_memory=True, etcd=etcd.url, node=3, lease_ttl_s=TTL)).start()
    with EtcdClusterView(etcd.url) as view:
        try:
            assert view.wait(lambda v: 3 in v.live(), 30)
            assert view.addresses[3] == server.address
            assert place(view.etcd, KEYS, "s", [[3]])
            leader = view.wait(lambda v: v.leader("s", 0), 30)
            assert leader is not None and (leader.node, leader.epoch) == (3, 1)
            wait_for(lambda: server.coordinator.table.get("s.p0") == Assignment(Role.LEADER, 1, None),
                     "the server to be told it leads")
        finally:
            server.stop()
        assert view.wait(lambda v: 3 not in v.live() and v.leader("s", 0) is None, 30), "the lease was revoked"
        assert view.addresses[3] == server.address, "the node's address stays registered"
