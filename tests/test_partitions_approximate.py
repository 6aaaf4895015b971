"""APPROXIMATE on a partitioned stream (clients/approx_merge.py), on two servers: top k and
threshold from the partitions' top-k lists, grouped by the partition key (each key in one
partition) and by another declared column (a key's count spread over the partitions, bounded as
the thesis bounds it over sub-windows). Checked against DuckDB's exact counts over the union of the
partitions' rows of the reported slide: every key's true count within its bounds, no reported key
under the threshold, and a guaranteed answer exactly the true top k / the keys over the threshold."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from cluster_fixtures import duck, seal_batches

from windowstore.clients import Client, InvalidArgument

pytestmark = pytest.mark.slow  # servers in subprocesses

SCHEMA = {"ts": "int64", "src": "string", "port": "int64", "bytes": "int64"}
N = 3


def batch(rng, n: int, ts0: int) -> dict:
    return {"ts": list(range(ts0, ts0 + n)), "src": [f"h{v % 60}" for v in rng.zipf(1.4, n)],
            "port": (rng.zipf(1.3, n) % 50).tolist(), "bytes": rng.integers(0, 1000, n).tolist()}


def truth(w: pa.Table, key: str, weight: str | None) -> dict:
    a = f"SUM({weight})" if weight else "COUNT(*)"
    return dict(duck(w, f"SELECT {key}, {a} FROM w GROUP BY {key}"))


def check(a, counts: dict, k: int | None = None, threshold: int | None = None) -> None:
    assert not a.exact and len(a.bounds) == len(a.rows)
    lowers = [row[1] for row in a.rows]
    assert lowers == sorted(lowers, reverse=True)
    for (key, lo), b in zip(a.rows, a.bounds):
        assert b.sketch == "top-k lists" and b.lower == lo <= counts[key] <= b.upper, (key, lo, counts[key], b)
        assert b.delta is not None
        if threshold is not None:
            assert counts[key] > threshold  # no false positives
    if threshold is not None and a.guaranteed:
        assert {row[0] for row in a.rows} == {key for key, c in counts.items() if c > threshold}
    if k is not None:
        assert len(a.rows) <= k
        if a.guaranteed:  # the listed keys are a true top k (ties at the k-th count aside)
            kth = sorted(counts.values(), reverse=True)[min(k, len(counts)) - 1]
            assert all(counts[key] >= kth for key, _ in a.rows) and len(a.rows) == min(k, len(counts))


def test_approximate_top_k_and_threshold_merge_across_partitions(two_servers):
    rng = np.random.default_rng(11)
    with Client(two_servers, timeout=60) as ws:
        ws.create_stream("a", SCHEMA, subwindows=N, subwindow_ms=1000, clock="manual", group_by=["src", "port"],
                         topk=5, partitions=3, partition_by=["src"])
        sealed = seal_batches(ws, "a", [batch(rng, 1500, b * 1500) for b in range(4)])
        k = 3
        w = pa.concat_tables([sealed[j] for j in range(k - N + 1, k + 1)])
        guaranteed = []
        for key in ("src", "port"):
            for weight in (None, "bytes"):
                agg = f"SUM({weight})" if weight else "COUNT(*)"
                counts = truth(w, key, weight)
                top = ws.query(f"SELECT {key}, {agg} FROM a GROUP BY {key} ORDER BY {agg} DESC LIMIT 3 APPROXIMATE")
                assert top.slide == k and top.rows
                check(top, counts, k=3)
                t = int(sum(counts.values()) * 0.05)
                over = ws.query(f"SELECT {key}, {agg} FROM a GROUP BY {key} HAVING {agg} > {t} APPROXIMATE")
                check(over, counts, threshold=t)
                assert over.rows  # a Zipf head is over 5%
                guaranteed += [top.guaranteed, over.guaranteed]
        assert any(guaranteed)  # some answers are provably exact here, so the guaranteed checks ran
        # a WHERE on the partition key: pushed down, bounds the partitions'
        counts = truth(w.filter(pa.compute.is_in(w.column("src"), pa.array(["h1", "h2", "h3"]))), "src", None)
        a = ws.query("SELECT src, COUNT(*) FROM a WHERE src IN ('h1', 'h2', 'h3') GROUP BY src "
                     "ORDER BY COUNT(*) DESC LIMIT 2 APPROXIMATE")
        check(a, counts, k=2)
        with pytest.raises(InvalidArgument, match="WHERE .*partition key"):
            ws.query("SELECT port, COUNT(*) FROM a WHERE port = 1 GROUP BY port ORDER BY COUNT(*) DESC LIMIT 2 "
                     "APPROXIMATE")
        with pytest.raises(InvalidArgument, match="TOTAL"):
            ws.query("SELECT src, COUNT(*) FROM a GROUP BY src HAVING COUNT(*) > 0.1 * TOTAL APPROXIMATE")
        ws.drop_stream("a")
