"""Periodic queries on a partitioned stream beyond plain aggregates, on two servers: queries with
expressions, sketch aggregates (each partition's periodic answers carry their sketches,
RegisterQueryRequest.return_sketches) and APPROXIMATE, registered on every partition and merged per
slide with the one-time merge. Every merged answer is checked against DuckDB over the union of the
partitions' rows of the slide it reports (exactly, or within the bounds it states); what still has
no exact merge is refused by name, leaving nothing registered."""
from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest
from cluster_fixtures import duck, periodic_answered, seal_batches, window
from conftest import wait_for, wait_until
from test_partitions_approximate import check as check_top_k
from test_partitions_approximate import truth
from test_partitions_expressions import same
from test_partitions_sketches import rank_ok

from windowstore.clients import AsyncClient, Client, InvalidArgument

pytestmark = pytest.mark.slow  # servers in subprocesses

N = 3  # sub-windows per window
EVERY = "[RANGE 3 SUBWINDOWS SLIDE 1 SUBWINDOWS]"
SLIDES = 4


def each_slide_answered(ws):
    """seal_batches' after_slide: wait until every partition's periodic queries answered slide k."""
    return lambda k: wait_for(periodic_answered(ws, k), f"every partition's answer of slide {k}")


def subscribed(ws, query_id: str) -> list:
    """The merged answers of a subscription, collected on a thread until the query ends."""
    got: list = []
    sub = ws.subscribe(query_id)
    threading.Thread(target=lambda: got.extend(sub), daemon=True).start()
    return got



# -- expressions --------------------------------------------------------------------------------
EXPR_SCHEMA = {"ts": "int64", "src": "string", "port": "int64", "bytes": "int64", "lat": "float64"}
EXPR_QUERIES = [
    # (periodic text, DuckDB text over w)
    (f"SELECT SUM(bytes) / COUNT(*) AS mean, MAX(lat) - MIN(lat) AS spread FROM e {EVERY}",
     "SELECT SUM(bytes) / COUNT(*) AS mean, MAX(lat) - MIN(lat) AS spread FROM w"),
    (f"SELECT src, SUM(bytes * 2) AS b2, COUNT(*) FILTER (WHERE port = 80) AS web FROM e {EVERY} "
     "WHERE port != 22 GROUP BY src HAVING SUM(bytes) > 100 ORDER BY b2 DESC, src LIMIT 4",
     "SELECT src, SUM(bytes * 2) AS b2, COUNT(*) FILTER (WHERE port = 80) AS web FROM w "
     "WHERE port != 22 GROUP BY src HAVING SUM(bytes) > 100 ORDER BY b2 DESC, src NULLS LAST LIMIT 4"),
    (f"SELECT port % 7 AS bucket, AVG(bytes) AS mean FROM e {EVERY} GROUP BY port % 7 ORDER BY 1",
     "SELECT port % 7 AS bucket, AVG(bytes) AS mean FROM w GROUP BY port % 7 ORDER BY 1"),
]


def expr_batch(rng, n: int, ts0: int) -> dict:
    return {"ts": list(range(ts0, ts0 + n)), "src": [None if i % 23 == 0 else f"h{i}" for i in rng.integers(0, 40, n)],
            "port": rng.choice([22, 80, 443, 8080, 53], n).tolist(),
            "bytes": [None if i % 31 == 0 else int(v) for i, v in enumerate(rng.integers(0, 1500, n))],
            "lat": rng.normal(50, 10, n).tolist()}


def test_periodic_queries_with_expressions_merge_per_slide_as_duckdb_answers(two_servers):
    rng = np.random.default_rng(35)
    with Client(two_servers, timeout=60) as ws:
        ws.create_stream("e", EXPR_SCHEMA, subwindows=N, subwindow_ms=1000, clock="manual", partitions=3,
                         partition_by=["src"])
        ids = [ws.register(text).id for text, _ in EXPR_QUERIES]
        got = subscribed(ws, ids[1])
        wait_for(lambda: sum(x["subscribers"] for x in ws.list_queries()) == 3, "every partition's subscription")
        sealed = seal_batches(ws, "e", [expr_batch(rng, 300, b * 300) for b in range(SLIDES)],
                              after_slide=each_slide_answered(ws))
        wait_for(lambda: any(a.slide == SLIDES - 1 for a in got), "the merged answer of the last slide")
        for qid, (_, sql) in zip(ids, EXPR_QUERIES):
            answers, newest, _ = ws.read_answers(qid)
            assert [a.slide for a in answers] == list(range(SLIDES)) and newest == SLIDES - 1
            for a in answers:
                assert a.query_id == qid and a.stream == "e"
                same(a.rows, duck(window(sealed, a.slide, N), sql))
        assert [a.slide for a in got] == list(range(SLIDES))
        for a in got:
            same(a.rows, duck(window(sealed, a.slide, N), EXPR_QUERIES[1][1]))
        assert got[-1].rows  # the HAVING keeps some groups: the comparison compared rows
        for qid in ids:
            ws.unregister(qid)
        assert ws.list_queries() == []
        ws.drop_stream("e")


# -- sketch aggregates --------------------------------------------------------------------------
SKETCH_SCHEMA = {"ts": "int64", "src": "string", "bytes": "int64", "port": "int64"}
SKETCHES = {"bytes": ("kll", 32), "src": ("hll", 10), "port": ("frequent", 4)}


def sketch_batch(rng, n: int, ts0: int) -> dict:
    return {"ts": list(range(ts0, ts0 + n)),
            "src": [f"10.0.{i // 250}.{i % 250}" for i in rng.integers(0, 3000, n)],
            "bytes": rng.pareto(1.2, n).astype(np.int64).tolist(),
            "port": np.where(rng.random(n) < 0.3, 443, rng.integers(0, 5000, n)).tolist()}


def check_sketches(a, w) -> None:
    """A merged periodic answer of `SKETCH_QUERY` within its bounds of DuckDB's over `w`."""
    (count, avg, distinct), = duck(w, "SELECT COUNT(*), AVG(bytes), COUNT(DISTINCT src) FROM w")
    assert not a.exact and a.rows[0][2] == count and a.rows[0][3] == pytest.approx(avg, rel=1e-12)
    bounds = {b.column: b for b in a.bounds}
    assert sorted(bounds) == [0, 1]
    assert rank_ok(w.column("bytes").to_numpy(), a.rows[0][0], 0.5, bounds[0].rank_error)
    assert bounds[1].sketch == "hll" and bounds[1].lower <= distinct <= bounds[1].upper


SKETCH_QUERY = f"SELECT APPROX_QUANTILE(bytes, 0.5), APPROX_COUNT_DISTINCT(src), COUNT(*), AVG(bytes) FROM f {EVERY}"
TOP_QUERY = f"SELECT APPROX_TOP_K(port, 3) FROM f {EVERY}"


def test_periodic_sketch_aggregates_merge_the_partitions_sketches_within_their_bounds(two_servers):
    rng = np.random.default_rng(3535)
    with Client(two_servers, timeout=60) as ws:
        ws.create_stream("f", SKETCH_SCHEMA, subwindows=N, subwindow_ms=1000, clock="manual", partitions=3,
                         partition_by=["src"], sketches=SKETCHES)
        q, top = ws.register(SKETCH_QUERY), ws.register(TOP_QUERY)
        got = subscribed(ws, q.id)
        wait_for(lambda: sum(x["subscribers"] for x in ws.list_queries()) == 3, "every partition's subscription")
        sealed = seal_batches(ws, "f", [sketch_batch(rng, 2000, b * 2000) for b in range(SLIDES)],
                              after_slide=each_slide_answered(ws))
        wait_for(lambda: any(a.slide == SLIDES - 1 for a in got), "the merged answer of the last slide")
        assert [a.slide for a in got] == list(range(SLIDES))
        for a in got:
            check_sketches(a, window(sealed, a.slide, N))
        kept, _, _ = ws.read_answers(q.id)
        assert [a.slide for a in kept] == list(range(SLIDES))
        for a in kept:
            check_sketches(a, window(sealed, a.slide, N))
        tops, _, _ = ws.read_answers(top.id)
        assert [a.slide for a in tops] == list(range(SLIDES))
        for a in tops:
            counts = dict(duck(window(sealed, a.slide, N), "SELECT port, COUNT(*) FROM w GROUP BY port"))
            assert a.rows[0] == (443,) and len(a.rows) == len(a.bounds) <= 3  # ~30% of the rows
            for (port,), b in zip(a.rows, a.bounds):
                assert b.sketch == "frequent" and b.lower <= counts[port] <= b.upper and b.lower > b.upper - b.lower
        # the one-time query AS OF a slide merges the same sketches the same way (HLL unions exactly)
        once = ws.query("SELECT APPROX_COUNT_DISTINCT(src), COUNT(*) FROM f", as_of_slide=SLIDES - 1)
        assert once.rows[0][0] == kept[-1].rows[0][1] and once.rows[0][1] == kept[-1].rows[0][2]
        for qid in (q.id, top.id):
            ws.unregister(qid)
        ws.drop_stream("f")


def test_the_async_client_subscribes_to_a_periodic_sketch_query_on_a_cluster(two_servers):
    rng = np.random.default_rng(353535)

    async def main():
        async with AsyncClient(two_servers, timeout=60) as ws:
            await ws.create_stream("g", SKETCH_SCHEMA, subwindows=N, subwindow_ms=1000, clock="manual", partitions=3,
                                   partition_by=["src"], sketches=SKETCHES)
            q = await ws.register(SKETCH_QUERY.replace(" f ", " g "))
            got: list = []
            answers = ws.subscribe(q.id)

            async def collect():
                async for x in answers:
                    got.append(x)
            reader = asyncio.create_task(collect())
            async def subscribed():
                return sum(x["subscribers"] for x in await ws.list_queries()) == 3
            await wait_until(subscribed, "every partition's subscription")
            sealed = {}
            for b in range(3):
                rows = sketch_batch(rng, 1500, b * 1500)
                await ws.append("g", rows, writer_id="w", batch_id=b)
                sealed[await ws.slide("g")] = rows
            await wait_until(lambda: any(x.slide == 2 for x in got), "the merged answer of slide 2")
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            await answers.aclose()
            await ws.unregister(q.id)
            await ws.drop_stream("g")
            return got, sealed

    import pyarrow as pa

    got, sealed = asyncio.run(main())
    assert [a.slide for a in got] == [0, 1, 2]
    tables = {k: pa.table(v) for k, v in sealed.items()}
    for a in got:
        check_sketches(a, window(tables, a.slide, N))


# -- APPROXIMATE ------------------------------------------------------------------------------------
APPROX_SCHEMA = {"ts": "int64", "src": "string", "port": "int64", "bytes": "int64"}


def approx_batch(rng, n: int, ts0: int) -> dict:
    return {"ts": list(range(ts0, ts0 + n)), "src": [f"h{v % 60}" for v in rng.zipf(1.4, n)],
            "port": (rng.zipf(1.3, n) % 50).tolist(), "bytes": rng.integers(0, 1000, n).tolist()}


def test_periodic_approximate_queries_merge_per_slide_within_the_thesis_bounds(two_servers):
    rng = np.random.default_rng(35353)
    with Client(two_servers, timeout=60) as ws:
        ws.create_stream("a", APPROX_SCHEMA, subwindows=N, subwindow_ms=1000, clock="manual",
                         group_by=["src", "port"], topk=5, partitions=3, partition_by=["src"])
        shapes = {}  # query id -> (key, weight, k, threshold)
        for key in ("src", "port"):  # by the partition key, and by another declared column
            for weight in (None, "bytes"):
                agg = f"SUM({weight})" if weight else "COUNT(*)"
                q = ws.register(f"SELECT {key}, {agg} FROM a {EVERY} GROUP BY {key} ORDER BY {agg} DESC LIMIT 3 "
                                "APPROXIMATE")
                shapes[q.id] = (key, weight, 3, None)
        over = ws.register(f"SELECT port, COUNT(*) FROM a {EVERY} GROUP BY port HAVING COUNT(*) > 300 APPROXIMATE")
        shapes[over.id] = ("port", None, None, 300)
        sealed = seal_batches(ws, "a", [approx_batch(rng, 1500, b * 1500) for b in range(SLIDES)],
                              after_slide=each_slide_answered(ws))
        wait_for(lambda: all(ws.read_answers(qid)[1] == SLIDES - 1 for qid in shapes), "every query's last answer")
        guaranteed = []
        for qid, (key, weight, k, threshold) in shapes.items():
            answers, _, _ = ws.read_answers(qid)
            assert [a.slide for a in answers] == list(range(SLIDES))
            for a in answers:
                assert a.rows
                check_top_k(a, truth(window(sealed, a.slide, N), key, weight), k=k, threshold=threshold)
                guaranteed.append(a.guaranteed)
            ws.unregister(qid)
        assert any(guaranteed)  # some answers are provably exact, so the guaranteed checks ran
        ws.drop_stream("a")


# -- what still does not merge ------------------------------------------------------------------------
@pytest.mark.parametrize("text, message", [
    (f"SELECT COUNT(DISTINCT src) + 1 AS n FROM r {EVERY}", r"COUNT\(DISTINCT \.\.\.\) in a query with expressions"),
    (f"SELECT MEDIAN(bytes) * 2 AS m FROM r {EVERY}", r"QUANTILE\(\.\.\.\) in a query with expressions"),
    (f"SELECT src, COUNT(*) FROM r {EVERY} GROUP BY src HAVING COUNT(*) > 0.1 * TOTAL APPROXIMATE", "TOTAL"),
    (f"SELECT port, COUNT(*) FROM r {EVERY} WHERE port = 1 GROUP BY port ORDER BY COUNT(*) DESC LIMIT 2 APPROXIMATE",
     "WHERE .*partition key"),
    (f"SELECT APPROX_COUNT_DISTINCT(src), QUANTILE(bytes, 0.5) FROM r {EVERY}", r"quantile\(bytes, 0.5\) beside"),
    (f"SELECT APPROX_TOP_K(port, 3) FROM r {EVERY} ORDER BY 1", "ORDER BY with a sketch aggregate"),
])
def test_a_periodic_query_without_an_exact_merge_is_refused_by_name_and_nothing_is_registered(two_servers, text,
                                                                                              message):
    with Client(two_servers, timeout=60) as ws:
        ws.create_stream("r", SKETCH_SCHEMA, subwindows=N, subwindow_ms=1000, clock="manual", partitions=3,
                         partition_by=["src"], group_by=["port"], sketches=SKETCHES, exist_ok=True)
        with pytest.raises(InvalidArgument, match=message):
            ws.register(text)
        assert ws.list_queries("r.p0") == ws.list_queries("r.p1") == ws.list_queries("r.p2") == []
