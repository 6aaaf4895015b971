"""Partitioned streams on real servers (3 `windowstore serve` processes on 127.0.0.1, one cluster
file): placement by the map, aligned slides, scatter-gather answers against DuckDB over the union
of the partitions' rows of the reported slide, a killed server's partitions named in UNAVAILABLE
(or listed as missing in a partial answer), and appends exactly once across a retried batch."""
from __future__ import annotations

import random
import signal
from fractions import Fraction
from math import ceil

import pyarrow as pa
import pytest

from cluster_fixtures import Cluster, duck, seal_batches, window
from conftest import wait_for, wait_until
from windowstore.clients import Client, FailedPrecondition, InvalidArgument, NotFound, Unavailable
from windowstore.clients.partitioned import ClusterClient
from windowstore.store.partitions import StaticCluster, partition_name, partition_of_rows

pytestmark = pytest.mark.slow  # servers in subprocesses

SCHEMA = {"ts": "int64", "src": "string", "dst": "int64", "v": "int64"}
N = 3  # sub-windows per window


def rows(rng: random.Random, n: int, start: int) -> dict:
    src = [rng.choice(["a", "b", "c", "d", "e", "f", "g", None]) for _ in range(n)]
    return {"ts": list(range(start, start + n)), "src": src,
            "dst": [rng.choice([1, 2, 3, None]) for _ in range(n)],
            "v": [rng.choice([None, *range(-50, 500)]) for _ in range(n)]}


def fill(ws, rng, stream: str, slides: int, per: int = 60, batch0: int = 0) -> dict[int, pa.Table]:
    """Append `per` rows then slide, `slides` times; then `per` rows left unsealed. The rows by the
    slide that sealed them."""
    sealed = seal_batches(ws, stream, [rows(rng, per, b * per) for b in range(slides)], batch0)
    ws.append(stream, rows(rng, per, slides * per), writer_id="w", batch_id=batch0 + slides)
    return sealed


def quantile(values, q: str):
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    return values[max(1, ceil(Fraction(q) * len(values))) - 1]


def same(got: list[tuple], want: list[tuple]) -> None:
    assert len(got) == len(want), (got, want)
    for g, w in zip(got, want):
        assert len(g) == len(w)
        for x, y in zip(g, w):
            if isinstance(x, float) or isinstance(y, float):
                assert x == pytest.approx(float(y), rel=1e-12), (g, w)
            else:
                assert x == y, (g, w)


def check_queries(ws, sealed: dict[int, pa.Table], k: int, stream: str = "s", **kw) -> None:
    """Every query shape's merged answer against DuckDB over the rows of slide k's window."""
    w = window(sealed, k, N)
    a = ws.query(f"SELECT COUNT(*), COUNT(v), SUM(v), AVG(v), MIN(v), MAX(v) FROM {stream}", **kw)
    assert a.slide == k
    same(a.rows, duck(w, "SELECT COUNT(*), COUNT(v), SUM(v), AVG(v), MIN(v), MAX(v) FROM w"))
    # grouped by the partition key: pushed down, ORDER BY ... LIMIT merged (ties broken by the key)
    a = ws.query(f"SELECT src, COUNT(*), SUM(v) FROM {stream} GROUP BY src ORDER BY 3 DESC LIMIT 3", **kw)
    same(a.rows, duck(w, "SELECT src, COUNT(*), SUM(v) FROM w GROUP BY src "
                         "ORDER BY 3 DESC NULLS LAST, src NULLS LAST LIMIT 3"))
    assert a.columns == ["src", "count(*)", "sum(v)"]
    a = ws.query(f"SELECT src, MAX(v) AS m FROM {stream} GROUP BY src HAVING SUM(v) > 2000 "
                 f"ORDER BY MIN(v), src", **kw)
    same(a.rows, duck(w, "SELECT src, MAX(v) FROM w GROUP BY src HAVING SUM(v) > 2000 "
                         "ORDER BY MIN(v) NULLS LAST, src NULLS LAST"))
    # grouped by another column: partial form, merged by key, no LIMIT pushdown
    a = ws.query(f"SELECT dst, SUM(v), AVG(v), COUNT(*) FROM {stream} GROUP BY dst ORDER BY 2 DESC LIMIT 2", **kw)
    same(a.rows, duck(w, "SELECT dst, SUM(v), AVG(v), COUNT(*) FROM w GROUP BY dst "
                         "ORDER BY 2 DESC NULLS LAST, dst NULLS LAST LIMIT 2"))
    a = ws.query(f"SELECT dst, QUANTILE(v, 0.5), COUNT(DISTINCT src), MIN(v) FROM {stream} WHERE v > 10 "
                 f"GROUP BY dst ORDER BY dst", **kw)
    want = duck(w, "SELECT dst, list(v), COUNT(DISTINCT src), MIN(v) FROM w WHERE v > 10 GROUP BY dst "
                   "ORDER BY dst NULLS LAST")
    same(a.rows, [(d, quantile(vs, "0.5"), c, m) for d, vs, c, m in want])
    a = ws.query(f"SELECT QUANTILE(v, 0.9), COUNT(*) FROM {stream} [RANGE 2 SUBWINDOWS]", **kw)
    recent = window(sealed, k, 2)
    assert a.rows == [(quantile(recent.column("v").to_pylist(), "0.9"), recent.num_rows)]
    a = ws.query(f"SELECT DISTINCT dst FROM {stream} ORDER BY dst", **kw)
    same(a.rows, duck(w, "SELECT DISTINCT dst FROM w ORDER BY dst NULLS LAST"))


def test_partitions_are_placed_by_the_map_and_describe_the_layout(cluster):
    with Client(cluster.addresses, timeout=60) as ws:
        assert isinstance(ws, ClusterClient)
        made = ws.create_stream("s", SCHEMA, subwindows=N, subwindow_ms=1000, clock="manual", partitions=5,
                                partition_by=["src"])
        assert [p["spec"]["name"] for p in made["streams"]] == [partition_name("s", i) for i in range(5)]
        placed = StaticCluster(tuple(cluster.addresses))
        for node, address in enumerate(cluster.addresses):
            with Client(address) as one:
                names = sorted(x["spec"]["name"] for x in one.list_streams())
                assert names == sorted(partition_name("s", i) for i in range(5) if placed.owner("s", i) == node)
                for x in one.list_streams():  # each partition says what it is
                    part = x["spec"]["partition"]
                    assert (part["stream"], part["count"], part["key"]) == ("s", 5, ["src"])
                    assert x["spec"]["name"] == partition_name("s", part["index"])
        # a second client discovers the layout from the servers
        with Client(cluster.addresses) as other:
            assert other.layout("s").partitions == 5 and other.layout("s").partition_by == ("src",)
            assert [p["spec"]["name"] for p in other.describe_stream("s")["streams"]] == \
                [partition_name("s", i) for i in range(5)]
        # a server refuses a partition the map places elsewhere
        wrong = (placed.owner("t", 0) + 1) % 3
        from windowstore.clients.client import create_request
        from windowstore.v1 import windowstore_pb2 as pb

        req = create_request("t.p0", SCHEMA, N, 1000, None, "manual", (), 0, "ts", 16)
        req.spec.partition.CopyFrom(pb.PartitionSpec(stream="t", index=0, count=2, key=["src"]))
        with Client(cluster.addresses[wrong]) as one, pytest.raises(FailedPrecondition,
                                                                    match=f"belongs on node {placed.owner('t', 0)}"):
            one.call("CreateStream", req, False)
        req.spec.name = "t-0"
        with Client(cluster.addresses[placed.owner("t", 0)]) as one, pytest.raises(InvalidArgument,
                                                                                   match="is named 't.p0'"):
            one.call("CreateStream", req, False)
        # an ordinary stream lives on its partition 0's node
        ws.create_stream("plain", SCHEMA, subwindows=N, subwindow_ms=1000, clock="manual")
        assert ws.layout("plain").node == placed.owner("plain", 0)
        # a partition gone from its server: named, not a crash; dropping the stream skips it
        with Client(cluster.addresses[placed.owner("s", 3)]) as one:
            one.drop_stream(partition_name("s", 3))
        with pytest.raises(NotFound, match="partition 3 of stream 's'"):
            ws.query("SELECT COUNT(*) FROM s")
        ws.drop_stream("s")
        for address in cluster.addresses:
            with Client(address) as one:
                assert [x["spec"]["name"] for x in one.list_streams()] in ([], ["plain"])


def test_scatter_gather_answers_equal_duckdb_over_the_union(cluster):
    rng = random.Random(7)
    with Client(cluster.addresses, timeout=60) as ws:
        ws.create_stream("s", SCHEMA, subwindows=N, subwindow_ms=1000, clock="manual", partitions=4,
                         partition_by=["src"])
        with pytest.raises(FailedPrecondition, match="has not sealed a slide yet"):
            ws.query("SELECT COUNT(*) FROM s")
        sealed = fill(ws, rng, "s", slides=5)
        assert sorted(sealed) == [0, 1, 2, 3, 4]
        check_queries(ws, sealed, 4)
        a = ws.query("SELECT dst, SUM(v), COUNT(*) FROM s [RANGE 2 SUBWINDOWS] GROUP BY dst ORDER BY dst",
                     as_of_slide=3)  # an older slide, still in the window for this range
        assert a.slide == 3
        same(a.rows, duck(window(sealed, 3, 2), "SELECT dst, SUM(v), COUNT(*) FROM w GROUP BY dst "
                                                "ORDER BY dst NULLS LAST"))
        # each partition holds exactly its rows
        for p in range(4):
            got = ws.nodes[ws.cluster.owner("s", p)].query(
                f"SELECT COUNT(*) FROM {partition_name('s', p)} AS OF SLIDE 4").rows[0][0]
            mine = window(sealed, 4, N)
            assert got == int((partition_of_rows(mine, ["src"], 4) == p).sum())
        with pytest.raises(InvalidArgument, match="HAVING on a partitioned stream needs GROUP BY"):
            ws.query("SELECT dst, SUM(v) FROM s GROUP BY dst HAVING SUM(v) > 1")


def test_a_query_reads_the_common_slide_again_when_a_partition_slid_past_it(cluster, monkeypatch):
    """The newest common slide is read first, then each partition is asked AS OF it: a partition
    that slid so far meanwhile that the slide left its window fails that read, and the client
    reads the common slide again (here the first reading is made stale on purpose: slide 0,
    which has left the 3-sub-window windows by slide 5)."""
    rng = random.Random(3)
    with Client(cluster.addresses, timeout=60) as ws:
        ws.create_stream("s", SCHEMA, subwindows=N, subwindow_ms=1000, clock="manual", partitions=3,
                         partition_by=["src"])
        sealed = fill(ws, rng, "s", slides=6)
        real = Client.describe_stream
        stale = {"left": 3}  # the first reading of every partition's newest slide says 0

        def describe(self, name):
            out = real(self, name)
            if stale["left"] > 0 and "." in name:
                stale["left"] -= 1
                out = {**out, "latest_slide": 0}
            return out

        monkeypatch.setattr(Client, "describe_stream", describe)
        with pytest.raises(FailedPrecondition):  # pinned by the caller: no second reading
            ws.query("SELECT COUNT(*) FROM s", as_of_slide=0)
        a = ws.query("SELECT COUNT(*), SUM(v) FROM s")
        assert stale["left"] == 0 and a.slide == 5
        same(a.rows, duck(window(sealed, 5, N), "SELECT COUNT(*), SUM(v) FROM w"))


def test_processing_time_partitions_slide_at_the_same_boundaries(cluster):
    with Client(cluster.addresses, timeout=60) as ws:
        # a long window (60 s of 100-ms sub-windows): slide 3 is still held when a loaded machine reads it
        ws.create_stream("p", SCHEMA, subwindows=600, subwindow_ms=100, partitions=3, partition_by=["src"])
        ws.append("p", rows(random.Random(1), 200, 0))
        wait_for(lambda: min(x["latest_slide"] for x in ws.describe_stream("p")["streams"]) >= 3,
                 "every partition to seal slide 3")
        bounds = set()
        for p in range(3):
            a = ws.nodes[ws.cluster.owner("p", p)].query(f"SELECT COUNT(*) FROM {partition_name('p', 0 + p)} "
                                                         f"AS OF SLIDE 3")
            assert a.slide == 3
            bounds.add((a.window_start_ms, a.window_end_ms))
        assert len(bounds) == 1, bounds  # slide 3 is the same window on every partition
        a = ws.query("SELECT COUNT(*) FROM p")
        assert a.slide >= 3 and (a.window_end_ms - a.window_start_ms) % 100 == 0


def test_event_time_partitions_slide_together_even_where_keys_are_idle(cluster):
    """Event time over 3 partitions from one origin. The last batches' rows all have one key (so
    one partition); the others hear only the writer's event time and slide with it: every
    partition seals the same slides over the same event time, and the scatter-gather answer
    equals DuckDB over every row whose event time lies in the window the answer reports."""
    rng = random.Random(5)
    with Client(cluster.addresses, timeout=60) as ws:
        ws.create_stream("e", SCHEMA, subwindows=N, subwindow_ms=100, clock="event", allowed_lateness_ms=20,
                         partitions=3, partition_by=["src"], origin_ms=0)
        sent = []
        for b in range(8):
            keys = ["a"] if b >= 6 else ["a", "b", "c", "d", "e", "f", None]
            batch = {"ts": sorted(rng.randrange(b * 100, b * 100 + 100) for _ in range(50)),
                     "src": [rng.choice(keys) for _ in range(50)],
                     "dst": [rng.choice([1, 2, None]) for _ in range(50)],
                     "v": [rng.randrange(-50, 500) for _ in range(50)]}
            batch["ts"][rng.randrange(50)] -= 15  # out of order, within the allowed lateness
            ws.append("e", batch, writer_id="w", batch_id=b)
            sent.append(pa.table(batch))
        # the watermark (799 - 20) completes sub-windows [0, 100) ... [600, 700): slide 6 everywhere
        wait_for(lambda: [x["latest_slide"] for x in ws.describe_stream("e")["streams"]] == [6, 6, 6],
                 "every partition to seal slide 6")
        bounds = {ws.nodes[ws.cluster.owner("e", p)].query(f"SELECT COUNT(*) FROM {partition_name('e', p)} "
                                                           "AS OF SLIDE 6").window_start_ms for p in range(3)}
        assert bounds == {400}
        every = pa.concat_tables(sent)
        a = ws.query("SELECT src, COUNT(*), SUM(v), MAX(ts) FROM e GROUP BY src ORDER BY src")
        assert (a.slide, a.window_start_ms, a.window_end_ms) == (6, 400, 700)
        same(a.rows, duck(every, "SELECT src, COUNT(*), SUM(v), MAX(ts) FROM w WHERE ts >= 400 AND ts < 700 "
                                 "GROUP BY src ORDER BY src NULLS LAST"))


def test_a_killed_server_is_named_and_partial_answers_list_the_missing_partitions(cluster):
    rng = random.Random(3)
    with Client(cluster.addresses, timeout=60, retries=1) as ws:
        ws.create_stream("s", SCHEMA, subwindows=N, subwindow_ms=1000, clock="manual", partitions=3,
                         partition_by=["src"])
        sealed = fill(ws, rng, "s", slides=3)
        victim = ws.cluster.owner("s", 1)
        cluster.servers[victim].stop(signal.SIGKILL)
        cluster.servers[victim] = None
        lost = [p for p in range(3) if ws.cluster.owner("s", p) == victim]
        with pytest.raises(Unavailable) as e:
            ws.query("SELECT COUNT(*), SUM(v) FROM s")
        for p in lost:
            assert f"partition {p} of stream 's'" in e.value.message
            assert cluster.addresses[victim] in e.value.message
        a = ws.query("SELECT COUNT(*), SUM(v) FROM s", partial=True)
        assert a.missing_partitions == lost and a.slide == 2
        w = window(sealed, 2, N)
        keep = pa.array([p not in lost for p in partition_of_rows(w, ["src"], 3)])
        assert a.rows == duck(w.filter(keep), "SELECT COUNT(*), SUM(v) FROM w")
        a = ws.query("SELECT dst, COUNT(*) FROM s GROUP BY dst ORDER BY dst", partial=True)
        assert a.missing_partitions == lost
        assert a.rows == duck(w.filter(keep), "SELECT dst, COUNT(*) FROM w GROUP BY dst ORDER BY dst NULLS LAST")


def test_appends_are_applied_once_per_partition_across_a_retried_batch(tmp_path):
    c = Cluster(tmp_path, durable=True)
    try:
        with Client(c.addresses, timeout=60, retries=1) as ws:
            ws.create_stream("s", SCHEMA, subwindows=N, subwindow_ms=1000, clock="manual", partitions=3,
                             partition_by=["src"])
            batch = rows(random.Random(5), 300, 0)
            victim = ws.cluster.owner("s", 2)
            c.servers[victim].stop(signal.SIGKILL)
            with pytest.raises(Unavailable, match="partition 2 of stream 's'"):
                ws.append("s", batch, writer_id="w", batch_id=1)
            c.servers[victim] = c.start(victim)  # recovers its partitions from its log

            def retry():  # as a writer would: again, until every partition has acknowledged the batch
                try:
                    return ws.append("s", batch, writer_id="w", batch_id=1)
                except Unavailable:
                    return None
            ack = wait_for(retry, "the restarted server to take the retried batch", timeout=60)
            split = partition_of_rows(pa.table(batch), ["src"], 3)
            on_victim = sum(int((split == p).sum()) for p in range(3) if ws.cluster.owner("s", p) == victim)
            assert ack.accepted == 300 and not ack.duplicate
            again = ws.append("s", batch, writer_id="w", batch_id=1)  # once more: a duplicate everywhere
            assert again.duplicate and again.accepted == 300
            assert on_victim > 0
            ws.slide("s")
            a = ws.query("SELECT COUNT(*), SUM(v) FROM s")
            assert a.rows == duck(pa.table(batch), "SELECT COUNT(*), SUM(v) FROM w")
    finally:
        c.stop()


def test_a_periodic_query_is_registered_on_every_partition_and_merged_per_slide(cluster):
    import threading

    rng = random.Random(11)
    with Client(cluster.addresses, timeout=60) as ws:
        ws.create_stream("s", SCHEMA, subwindows=N, subwindow_ms=1000, clock="manual", partitions=3,
                         partition_by=["src"])
        q_text = ("SELECT dst, SUM(v), COUNT(*) FROM s [RANGE 3 SUBWINDOWS SLIDE 1 SUBWINDOWS] GROUP BY dst "
                  "ORDER BY 2 DESC LIMIT 2")
        q = ws.register(q_text)
        assert len(ws.list_queries()) == 3  # one per partition
        got: list = []
        sub = ws.subscribe(q.id)
        reader = threading.Thread(target=lambda: got.extend(sub), daemon=True)
        reader.start()
        wait_for(lambda: all(x["subscribers"] == 1 for x in ws.list_queries()), "every partition's subscription")
        sealed = seal_batches(ws, "s", [rows(rng, 50, b * 50) for b in range(5)], after_slide=lambda k: wait_for(
            lambda: any(a.slide == k for a in got), f"the merged answer of slide {k}"))
        wait_for(lambda: any(a.slide == 4 for a in got), "the merged answer of slide 4")
        # another client (a Spark streaming reader, a dashboard) reads the same answers by slide
        with Client(cluster.addresses, timeout=60) as other:
            with pytest.raises(InvalidArgument, match="names 2 partitions' queries"):
                other.attach("s/P1,P2", "SELECT SUM(v) FROM s [RANGE 3 SUBWINDOWS SLIDE 1 SUBWINDOWS]")
            other.attach(q.id, q_text)
            page, newest, oldest = other.read_answers(q.id, after_slide=1, through_slide=3)
            assert [a.slide for a in page] == [2, 3] and newest == 4 and oldest <= 0  # all kept: none dropped yet
            assert [(a.slide, a.rows) for a in page] == [(a.slide, a.rows) for a in got if a.slide in (2, 3)]
        ws.unregister(q.id)
        reader.join(30)
        assert not reader.is_alive()  # the subscription ended with the query
        assert [a.slide for a in got] == sorted({a.slide for a in got})  # one answer per slide, in order
        assert [a.slide for a in got] == [0, 1, 2, 3, 4]
        for a in got:
            assert a.query_id == q.id and a.stream == "s"
            same(a.rows, duck(window(sealed, a.slide, N), "SELECT dst, SUM(v), COUNT(*) FROM w GROUP BY dst "
                                                       "ORDER BY 2 DESC NULLS LAST, dst NULLS LAST LIMIT 2"))
        assert ws.list_queries() == []


def test_the_async_client_on_a_cluster(cluster):
    """AsyncClient([addresses]): the cluster client's calls awaited, and a subscription merged
    per slide that ends when the caller stops iterating (its partitions' streams cancelled)."""
    import asyncio

    from windowstore.clients import AsyncClient

    rng = random.Random(13)

    async def main():
        async with AsyncClient(cluster.addresses, timeout=60) as ws:
            await ws.create_stream("s", SCHEMA, subwindows=N, subwindow_ms=1000, clock="manual", partitions=3,
                                   partition_by=["src"])
            q = await ws.register("SELECT COUNT(*), SUM(v) FROM s [RANGE 2 SUBWINDOWS SLIDE 1 SUBWINDOWS]")
            sealed, got = {}, []
            answers = ws.subscribe(q.id)

            async def collect():
                async for x in answers:
                    got.append(x)
            reader = asyncio.create_task(collect())

            async def subscribed():
                return all(x["subscribers"] == 1 for x in await ws.list_queries())
            await wait_until(subscribed, "every partition's subscription")
            for b in range(3):
                batch = rows(rng, 40, b * 40)
                await ws.append("s", batch, writer_id="w", batch_id=b)
                sealed[await ws.slide("s")] = pa.table(batch)

                async def answered(b=b):
                    return any(x.slide == b for x in got)
                await wait_until(answered, f"the merged answer of slide {b}")
            reader.cancel()  # the caller stops iterating: the partitions' streams end
            await asyncio.gather(reader, return_exceptions=True)
            await answers.aclose()

            async def unsubscribed():
                return all(x["subscribers"] == 0 for x in await ws.list_queries())
            await wait_until(unsubscribed, "the partitions' subscriptions to end")
            a = await ws.query("SELECT COUNT(*), SUM(v) FROM s")
            queries = await ws.list_queries()
            await ws.unregister(q.id)
            return sealed, got, a, queries, await ws.list_queries()

    sealed, got, a, queries, after = asyncio.run(main())
    assert a.slide == 2 and a.rows == duck(window(sealed, 2, N), "SELECT COUNT(*), SUM(v) FROM w")
    assert [x.slide for x in got if x.slide >= 0] == [0, 1, 2]
    for x in got:
        if x.slide >= 0:
            assert x.rows == duck(window(sealed, x.slide, 2), "SELECT COUNT(*), SUM(v) FROM w"), x.slide
    assert len(queries) == 3 and after == []


def test_the_cli_creates_a_partitioned_stream(cluster):
    import json
    import os
    import subprocess
    import sys

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "windowstore.server.cli", *args], capture_output=True, text=True,
                              timeout=120, env={**os.environ, "WINDOWSTORE_TARGET": ",".join(cluster.addresses)})

    out = cli("create-stream", "c", "--schema", "ts:int64,src:string,v:int64", "--subwindows", "4",
              "--subwindow-ms", "1000", "--clock", "manual", "--partitions", "4", "--partition-by", "src", "-o", "json")
    assert out.returncode == 0, out.stderr
    assert [r["stream"] for r in json.loads(out.stdout)] == [partition_name("c", p) for p in range(4)]
    with Client(cluster.addresses) as ws:
        assert ws.layout("c").partitions == 4 and ws.layout("c").partition_by == ("src",)
    bad = cli("create-stream", "d", "--schema", "ts:int64,x:float64", "--subwindows", "4", "--subwindow-ms", "1000",
              "--partitions", "2", "--partition-by", "x")
    assert bad.returncode == 1 and bad.stderr.startswith("error (INVALID_ARGUMENT)") and "'x'" in bad.stderr


@pytest.mark.long  # ~1-1.5 min of server restarts; make test keeps the single-kill test above
def test_rows_are_exactly_once_across_random_kills_and_restarts_of_single_servers(tmp_path):
    """The bounded run of tests/partition_kills.py (`make partition-kills` runs a long one): kill -9
    at random moments (before a batch, while it is in flight, after its acknowledgement), restarts,
    a writer retrying with its keys; every row once on its partition and in the merged window."""
    from partition_kills import run

    counts = run(tmp_path, kills=6, seed=3, log=lambda line: None)
    assert counts["kills"] == 6 and counts["restarts"] == 6 and counts["batches"] > 6
