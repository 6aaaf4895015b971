"""The cluster client's surface against the single-server client's: create_stream takes every
parameter Client.create_stream takes (same names, order, kinds and defaults) and passes them to
every partition; TLS and token options reach every node."""
from __future__ import annotations

import inspect

from windowstore.clients import AsyncClient, Client
from windowstore.clients.async_cluster import AsyncClusterClient
from windowstore.clients.partitioned import ClusterClient
from windowstore.v1 import windowstore_pb2 as pb

CLUSTER_ONLY = ["partitions", "partition_by", "origin_ms"]


def test_cluster_create_stream_takes_every_parameter_of_client_create_stream():
    single = inspect.signature(Client.create_stream).parameters
    cluster = inspect.signature(ClusterClient.create_stream).parameters
    assert list(cluster)[:len(single)] == list(single)
    for name, p in single.items():
        assert (cluster[name].kind, cluster[name].default) == (p.kind, p.default), name
    assert list(cluster)[len(single):] == CLUSTER_ONLY
    assert all(cluster[n].kind is inspect.Parameter.KEYWORD_ONLY for n in CLUSTER_ONLY)
    # the asyncio client's too (the cluster's asyncio client awaits the cluster client's)
    assert list(inspect.signature(AsyncClient.create_stream).parameters) == list(single)
    assert list(inspect.signature(ClusterClient.__init__).parameters)[:len(inspect.signature(Client.__init__).parameters)] \
        == ["self", "cluster", *list(inspect.signature(Client.__init__).parameters)[2:]]


def test_create_stream_passes_last_rows_and_sketches_to_every_partition():
    sent: list = []

    def fake_call(method, request, idempotent, timeout=None):
        sent.append((method, request))
        return pb.CreateStreamResponse(stream=pb.StreamInfo(spec=request.spec))

    with ClusterClient(["127.0.0.1:1", "127.0.0.1:2"]) as cc:
        for n in cc.nodes:
            n.call = fake_call
        cc.create_stream("s", {"ts": "int64", "k": "string", "v": "int64"}, subwindows=4, subwindow_ms=1000,
                         clock="manual", last_rows=5, last_rows_by=["k"], last_rows_keys=100,
                         sketches={"v": "kll"}, partitions=3, partition_by=["k"])
        plain_sent = len(sent)
        cc.create_stream("o", {"ts": "int64", "k": "string", "v": "int64"}, 4, 1000, None, "manual", (), 0, "ts", 16,
                         False, 7, ["k"], 10)
    specs = sorted((r.spec for m, r in sent[:plain_sent] if m == "CreateStream"), key=lambda s: s.name)
    assert [s.name for s in specs] == ["s.p0", "s.p1", "s.p2"]
    for s in specs:
        assert (s.last_rows, list(s.last_rows_by), s.last_rows_keys) == (5, ["k"], 100)
        assert [(k.column, k.kind) for k in s.sketches] == [("v", "kll")]
        assert s.partition.count == 3 and list(s.partition.key) == ["k"]
    (m, r), = sent[plain_sent:]
    assert m == "CreateStream" and r.spec.name == "o" and (r.spec.last_rows, r.spec.last_rows_keys) == (7, 10)


def test_the_asyncio_cluster_client_takes_the_security_options():
    assert list(inspect.signature(AsyncClusterClient.__init__).parameters)[1:] == \
        ["cluster", *list(inspect.signature(AsyncClient.__init__).parameters)[2:]]
