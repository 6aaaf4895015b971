"""Sketch aggregates on a partitioned stream (clients/sketch_merge.py): the partitions' merged
sketches (QueryRequest.return_sketches) merged by the client, each answer checked against DuckDB
over the union of the partitions' rows of the reported slide: the quantile's true rank within the
stated rank error, the true distinct count within the stated bounds, every listed value's true
count within its bounds; and what does not merge refused by name."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from cluster_fixtures import duck, seal_batches

from windowstore.clients import Client, InvalidArgument
from windowstore.clients.sketch_merge import _top_k
from windowstore.store.approx import Estimate, merged_sketch
from windowstore.store.sketch_columns import FrequentSketch, build_one
from windowstore.v1 import windowstore_pb2 as pb

SCHEMA = {"ts": "int64", "src": "string", "bytes": "int64", "port": "int64", "lat": "float64"}
SKETCHES = {"bytes": ("kll", 32), "src": ("hll", 10), "port": ("frequent", 4), "lat": ("kll", 64)}
N = 3  # sub-windows per window


def batch(rng, n: int, ts0: int) -> dict:
    return {"ts": list(range(ts0, ts0 + n)),
            "src": [f"10.0.{i // 250}.{i % 250}" for i in rng.integers(0, 3000, n)],
            "bytes": rng.pareto(1.2, n).astype(np.int64).tolist(),
            "port": np.where(rng.random(n) < 0.3, 443, np.where(rng.random(n) < 0.3, 80, rng.integers(0, 5000, n))).tolist(),
            "lat": rng.normal(50, 10, n).tolist()}


def rank_ok(values: np.ndarray, v, q: float, error: float) -> bool:
    """Whether some rank of `v` among `values` (ties: any position of v) lies within q +- error."""
    below = np.count_nonzero(values < v) / len(values)
    at_most = np.count_nonzero(values <= v) / len(values)
    return below - error <= q <= at_most + error


@pytest.mark.slow
def test_sketch_aggregates_merge_across_partitions_within_their_bounds(two_servers):
    rng = np.random.default_rng(20261128)
    with Client(two_servers, timeout=60) as ws:
        ws.create_stream("f", SCHEMA, subwindows=N, subwindow_ms=1000, clock="manual", partitions=3,
                         partition_by=["src"], sketches=SKETCHES)
        sealed = seal_batches(ws, "f", [batch(rng, 3000, b * 3000) for b in range(5)])
        a = ws.query("SELECT APPROX_QUANTILE(bytes, 0.5), APPROX_QUANTILE(lat, 0.9), APPROX_COUNT_DISTINCT(src), "
                     "COUNT(*), AVG(bytes), MAX(lat) FROM f")
        k = a.slide
        w = pa.concat_tables([sealed[j] for j in range(k - N + 1, k + 1)])
        assert not a.exact and a.columns[3:] == ["count(*)", "avg(bytes)", "max(lat)"]
        (count, avg, top_lat), = duck(w, "SELECT COUNT(*), AVG(bytes), MAX(lat) FROM w")
        assert a.rows[0][3] == count == 9000 and a.rows[0][4] == pytest.approx(avg, rel=1e-12)
        assert a.rows[0][5] == top_lat
        bounds = {b.column: b for b in a.bounds}
        assert sorted(bounds) == [0, 1, 2] and all(b.row == 0 for b in a.bounds)
        assert bounds[0].sketch == "kll" and bounds[0].confidence == 0.99 and 0 < bounds[0].rank_error < 0.1
        assert isinstance(a.rows[0][0], int)
        assert rank_ok(w.column("bytes").to_numpy(), a.rows[0][0], 0.5, bounds[0].rank_error)
        assert rank_ok(w.column("lat").to_numpy(), a.rows[0][1], 0.9, bounds[1].rank_error)
        (distinct,), = duck(w, "SELECT COUNT(DISTINCT src) FROM w")
        assert bounds[2].sketch == "hll" and bounds[2].lower <= distinct <= bounds[2].upper
        assert abs(a.rows[0][2] - distinct) <= bounds[2].upper - bounds[2].lower

        top = ws.query("SELECT APPROX_TOP_K(port, 3) FROM f", as_of_slide=k)
        counts = dict(duck(w, "SELECT port, COUNT(*) FROM w GROUP BY port"))
        assert top.slide == k and 1 <= len(top.rows) <= 3 and len(top.bounds) == len(top.rows)
        assert top.rows[0] == (443,)  # ~30% of the rows: provably above the error
        for (port,), b in zip(top.rows, top.bounds):
            assert b.sketch == "frequent" and b.lower <= counts[port] <= b.upper
            assert b.lower > b.upper - b.lower  # no false positives
        estimates = [b.estimate for b in top.bounds]
        assert estimates == sorted(estimates, reverse=True)

        # an older slide's 2 sub-windows, read AS OF it on every partition
        old = ws.query("SELECT APPROX_COUNT_DISTINCT(src), COUNT(*) FROM f [RANGE 2 SUBWINDOWS]", as_of_slide=k - 1)
        w1 = pa.concat_tables([sealed[k - 2], sealed[k - 1]])
        (distinct1, count1), = duck(w1, "SELECT COUNT(DISTINCT src), COUNT(*) FROM w")
        assert old.rows[0][1] == count1 and old.bounds[0].lower <= distinct1 <= old.bounds[0].upper

        with pytest.raises(InvalidArgument, match=r"quantile\(bytes, 0.5\).*COUNT, SUM, MIN, MAX and AVG"):
            ws.query("SELECT APPROX_COUNT_DISTINCT(src), QUANTILE(bytes, 0.5) FROM f")
        # periodic: registered on every partition, its answers with their sketches (test_partitions_periodic.py)
        q = ws.register("SELECT APPROX_COUNT_DISTINCT(src) FROM f [RANGE 3 SUBWINDOWS SLIDE 1 SUBWINDOWS]")
        assert sorted(x["stream"] for x in ws.list_queries()) == ["f.p0", "f.p1", "f.p2"]
        ws.unregister(q.id)
        with pytest.raises(InvalidArgument, match="WHERE"):  # refused as one server refuses it
            ws.query("SELECT APPROX_COUNT_DISTINCT(src) FROM f WHERE port = 80")
        ws.drop_stream("f")


def test_top_k_bounds_keep_the_error_of_a_part_purged_empty():
    """A frequent-items sketch whose map was purged empty still has an error: the partition's
    merged sketch drops it (the library's merge skips an empty sketch), so the partition reports
    it as dropped_error and the client adds it to every upper bound."""
    emptied = build_one("frequent", 3, np.arange(100, 142), "int64", None)  # 42 values once each: purged empty
    error = emptied.sketch.get_upper_bound(-1)  # an empty sketch's error: any key's upper bound
    assert emptied.sketch.is_empty() and emptied.total_weight == 42 and error > 0
    heavy = build_one("frequent", 3, np.array([7] * 30 + [8] * 3), "int64", None)
    part = Estimate([], None, parts=(emptied, heavy), declared=("frequent", 3, "int64"))
    kind, size, data, dropped = merged_sketch(part)
    assert (kind, size, dropped) == ("frequent", 3, error)
    merged = FrequentSketch.from_bytes(data, "int64", 3)
    assert merged.sketch.get_upper_bound(7) < 30 + dropped  # the library's bound alone misses the dropped part
    # a second partition holding value 120 (a value of the purged part) 5 times
    other = build_one("frequent", 3, np.array([120] * 5), "int64", None)
    sketches = [pb.MergedSketch(column=0, kind=kind, size=size, data=data, dropped_error=dropped),
                pb.MergedSketch(column=0, kind="frequent", size=3, data=other.to_bytes())]
    truth = {7: 30, 8: 3, 120: 6}
    got = _top_k(sketches, "int64", 10, 3)
    assert got and got[0][0] == 7
    for key, b in got:
        assert b.lower <= truth[key] <= b.upper
    # what the bounds would be without the dropped error: value 120's upper bound below its truth
    plain = FrequentSketch.from_bytes(data, "int64", 3).sketch.get_upper_bound(120) + other.sketch.get_upper_bound(120)
    assert plain < truth[120]
