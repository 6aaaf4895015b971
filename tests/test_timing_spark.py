"""The Spark batch reader exposes a timing-correlation join's answer (issue 34, seed 002): the pairs
and their probability, equal to the rational oracle's over the windows the answer reflects."""
from __future__ import annotations

import pytest

pyspark = pytest.importorskip("pyspark")

from test_timing_join import reference  # noqa: E402
from windowstore.clients import Client  # noqa: E402
from windowstore.clients.spark import local_session  # noqa: E402
from windowstore.server.process import ServerProcess  # noqa: E402

pytestmark = pytest.mark.spark
SCHEMA = {"ts": "int64", "id": "int64", "lo": "int64", "hi": "int64"}
TEXT = ("SELECT a.id, b.id, PROB() AS p FROM sa a JOIN sb b "
        "ON PROB(INTERVAL(a.lo, a.hi) + 100 ms >= INTERVAL(b.lo, b.hi)) >= 0.9")


def test_the_batch_reader_reads_a_timing_join_with_its_probabilities():
    import random

    rng = random.Random(4)
    held = {"sa": [], "sb": []}
    with ServerProcess() as srv, Client(srv.target) as ws:
        for name in held:
            ws.create_stream(name, SCHEMA, subwindows=3, subwindow_ms=1000, clock="manual")
        for j in range(4):
            for name in held:
                batch = []
                for i in range(30):
                    hi = j * 1000 + rng.randrange(1000)
                    batch.append({"ts": hi, "id": j * 100 + i, "lo": hi - rng.randrange(0, 150), "hi": hi})
                ws.append(name, {c: [r[c] for r in batch] for c in SCHEMA})
                ws.slide(name)
                held[name].append(batch)
        spark = local_session("windowstore-timing-tests", cores=2)
        try:
            df = spark.read.format("windowstore").option("target", srv.target).option("query", TEXT).load()
            assert df.columns[:3] == ["a.id", "b.id", "p"]
            got = df.collect()
        finally:
            spark.stop()
    window = {name: [r for b in held[name][-3:] for r in b] for name in held}
    want = reference("deadline", 100, "0.9", window["sa"], window["sb"])
    assert want and {(r["a.id"], r["b.id"]) for r in got} == set(want) and len(got) == len(want)
    assert all(abs(r["p"] - float(want[(r["a.id"], r["b.id"])])) <= 1e-9 for r in got)
    assert {r["_slide"] for r in got} == {3}
