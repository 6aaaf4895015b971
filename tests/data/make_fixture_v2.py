"""Writes the v2 data directory for tests/test_log_format.py: python tests/data/make_fixture_v2.py DIR

v1's commands (make_fixture.py) and, before and after the snapshot, slides of a stream with sketch
columns (KLL, HLL, frequent items), so the log holds every kind of command, SealedSketches (kind
11, a sealed KLL sketch's bytes) too. It writes the answers of queries over the recovered state
to DIR/expected.json, as this code answered them: the test recovers a copy both ways and compares.
Never run this to overwrite tests/data/logs/v2 (see logs/README.md)."""
from __future__ import annotations

import dataclasses
import json
import os
import sys
from random import Random

import pyarrow as pa

import make_fixture
from windowstore.store import WindowSpec, parse_query
from windowstore.txn.commands import Append, CreateStream, Slide

SKETCH_COLUMNS = (("ts", "int64"), ("v", "float64"), ("k", "string"), ("n", "int64"))
SKETCHES = {"v": ("kll", 16), "k": ("hll", 8), "n": ("frequent", 4)}
QUERIES = ["SELECT APPROX_QUANTILE(v, 0.5), APPROX_QUANTILE(v, 0.9) FROM sk",
           "SELECT APPROX_COUNT_DISTINCT(k) FROM sk", "SELECT APPROX_TOP_K(n, 3) FROM sk",
           "SELECT COUNT(*), SUM(n), MIN(v), MAX(v) FROM sk",
           "SELECT k, COUNT(*) FROM proc GROUP BY k"]


def sketch_stream(w: make_fixture.Writer, now: float, part: int) -> None:
    """The sketch stream: created before the snapshot, three slides of 500 seeded rows in each part."""
    rng = Random(part)
    if part == 0:
        w(CreateStream("sk", SKETCH_COLUMNS, "ts", WindowSpec(4, 1000, clock="manual", sketches=SKETCHES), now))
    for i in range(3):
        t = (part * 3 + i) * 1000
        w(Append("sk", pa.table({"ts": pa.array([t + j for j in range(500)], pa.int64()),
                                 "v": pa.array([rng.gauss(0, 1) for _ in range(500)], pa.float64()),
                                 "k": pa.array([f"k{rng.randrange(300)}" for _ in range(500)], pa.string()),
                                 "n": pa.array([min(int(rng.paretovariate(1.0)), 99) for _ in range(500)],
                                               pa.int64())}),  # skewed: a few heavy values
                 "", None, now))
        w(Slide("sk", now))


def plain(x):
    """An answer's rows or bounds as JSON values (an ErrorBound as its fields, a Decimal as its text)."""
    return json.loads(json.dumps(x, default=lambda o: dataclasses.asdict(o) if dataclasses.is_dataclass(o) else str(o)))


def answers(engine) -> dict:
    out = {}
    for text in QUERIES:
        txn = engine.sched.submit(engine.plan(parse_query(text)))
        engine.sched.run_until_idle()
        a = txn.result.answer
        out[text] = {"rows": plain(a.rows), "bounds": plain(a.bounds)}
    return out


def main(directory: str) -> None:
    if os.path.exists(directory):
        sys.exit(f"{directory} exists: a checked-in format version is never written again")
    engine = make_fixture.write(directory, extra=sketch_stream)
    engine._check()
    with open(os.path.join(directory, "expected.json"), "w") as f:
        json.dump({"digest": engine.digest(), "answers": answers(engine)}, f, indent=1, sort_keys=True)
    print("digest", engine.digest())


if __name__ == "__main__":
    main(sys.argv[1])
