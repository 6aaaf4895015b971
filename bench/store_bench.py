"""Store-core benchmarks: ingest (append + seal), seal throughput, synopsis and probe scans, top-k,
window scans.

`python -m bench.store_bench --against REV` times the ingest rows of this checkout and of the store
core at git revision REV in the same process, interleaved (before/after ratios on a shared machine).
"""
from __future__ import annotations

import importlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from windowstore.store import Stream, WindowSpec, parse_query, plan_query, run_plan

from .common import SCHEMA, fmt_rate, fmt_time, packets, timeit


def filled(n: int, rows: int, keys: int = 1000, zipf: bool = True) -> Stream:
    s = Stream("p", SCHEMA, WindowSpec(subwindows=n, subwindow_ms=1000, group_by=("src",)), created_ms=0)
    batch = pa.table(packets(rows, keys, zipf=zipf))
    for j in range(n):
        s.append(batch)
        s.window.slide((j + 1) * 1000)
    return s


INGEST_ROWS = 2_000_000  # rows per timed round, at least; and at least SUBWINDOWS + 2 sub-windows (the
SUBWINDOWS = 10           # window fills and old sub-windows are freed: memory reuse is part of the cost)
SLIDE_EVERY = 10          # batches per sub-window


def ingest_batches(rows: int, count: int = 10, dictionary: bool = False) -> list[pa.Table]:
    """`count` distinct batches (seeds) of `rows` packets; `dictionary`: src dictionary-encoded, as the SDK sends."""
    out = []
    for seed in range(count):
        t = pa.table(packets(rows, seed=seed))
        if dictionary:
            t = t.set_column(1, "src", pc.dictionary_encode(t.column("src")))
        out.append(t)
    return out


def ingest_round(store, batches: list[pa.Table], slide_every: int = SLIDE_EVERY) -> tuple[float, int]:
    """(seconds, rows) to ingest into a fresh stream (window of SUBWINDOWS sub-windows, group-by src)
    through Stream.append, sealing a sub-window every `slide_every` batches, as the server's driver does."""
    s = store.Stream("p", SCHEMA, store.WindowSpec(subwindows=SUBWINDOWS, subwindow_ms=1000, group_by=("src",)),
                     created_ms=0)
    for b in batches[:2]:  # warm-up: the dictionary holds most keys, kernels are initialised
        s.append(b)
    s.window.slide(1000)
    n = batches[0].num_rows
    k = max(SUBWINDOWS + 2, -(-INGEST_ROWS // (n * slide_every))) * slide_every
    now = 1000
    t0 = time.perf_counter()
    for i in range(k):
        s.append(batches[i % len(batches)])
        if (i + 1) % slide_every == 0:
            now += 1000
            s.window.slide(now)
    return time.perf_counter() - t0, k * n


# (batch rows, dictionary-encoded, batches per sub-window, name, target)
INGEST_CASES = [
    (100_000, False, SLIDE_EVERY, "core append + seal, 10^5-row batches (plain strings; a slide every 10 batches, "
                                  "10 sub-windows, group-by src)", ">= 10 M rows/s"),
    (10_000, False, SLIDE_EVERY, "core append + seal, 10^4-row batches (the same)", ">= 3 M rows/s"),
    (100_000, True, SLIDE_EVERY, "core append + seal, 10^5-row batches, src dictionary-encoded (as the SDK sends)", ""),
    (100_000, True, 50, "core append + seal, 10^5-row dictionary-encoded batches, 5 M-row sub-windows "
                        "(the server's 1 s sub-windows at ~5 M rows/s)", ""),
]


def ingest_rows(store, repeat: int = 5) -> list[dict]:
    out = []
    for rows, dictionary, every, name, target in INGEST_CASES:
        batches = ingest_batches(rows, dictionary=dictionary)
        rate = max(n / t for t, n in (ingest_round(store, batches, every) for _ in range(repeat)))
        out.append({"name": name, "value": rate, "shown": fmt_rate(rate), "target": target})
    return out


def run() -> list[dict]:
    from windowstore import store
    out = ingest_rows(store)
    rows = 100_000
    batch = pa.table(packets(rows))
    s = Stream("p", SCHEMA, WindowSpec(subwindows=4, subwindow_ms=1000, group_by=("src",)), created_ms=0)
    s.append(batch)
    s.window.slide(1000)

    # seal alone: the buffer holds already validated and encoded columns
    cols, n = s.schema.validate(batch, s.strings)

    def seal_only():
        s.window.append(cols, n)
        s.window.slide(s.window.last_seal_ms + 1000)
    t = timeit(seal_only, repeat=7)
    out.append({"name": "seal 100k rows (4 columns, group-by src): build sub-window + synopses", "value": rows / t,
                "shown": fmt_rate(rows / t), "target": ">= 5 M rows/s"})
    t = timeit(lambda: s.append(batch), repeat=7)
    out.append({"name": "append 100k-row Arrow batch into the buffer (validate + dictionary-encode)", "value": rows / t,
                "shown": fmt_rate(rows / t), "target": ""})
    s.window._buffer.detach()

    for n in (10, 100, 1000):
        st = filled(n, 200)
        for agg in ("SUM(bytes)", "COUNT(*)", "MAX(bytes)"):
            q = parse_query(f"SELECT {agg} FROM p")
            plan = plan_query(q, st, access="synopsis")
            t = timeit(lambda plan=plan: run_plan(plan), repeat=7, number=20)
            out.append({"name": f"synopsis scan {agg} over {n} sub-windows", "value": t, "shown": fmt_time(t),
                        "target": "<= 100 µs at 100" if n == 100 else ""})
        q = parse_query("SELECT COUNT(*), SUM(bytes), MAX(bytes) FROM p")
        plan = plan_query(q, st)
        t = timeit(lambda plan=plan: run_plan(plan), repeat=7, number=50)
        out.append({"name": f"probe (running + interval synopses) COUNT, SUM, MAX over {n} sub-windows", "value": t,
                    "shown": fmt_time(t), "target": ""})

    st = filled(100, 20_000, keys=1000, zipf=False)
    q = parse_query("SELECT src, SUM(bytes) FROM p GROUP BY src ORDER BY 2 DESC LIMIT 10")
    plan = plan_query(q, st, access="synopsis")
    t = timeit(lambda: run_plan(plan), repeat=7, number=5)
    keys = min(len(sub.synopsis.by_key["src"].keys) for sub in st.window.youngest(100))
    out.append({"name": f"TOP-10 by SUM over 100 sub-windows (>= {keys} keys each), merging the key synopses",
                "value": t, "shown": fmt_time(t), "target": "<= 5 ms"})
    plan = plan_query(q, st)
    assert plan.access == "probe"  # the running per-key totals
    t = timeit(lambda: run_plan(plan), repeat=7, number=50)
    out.append({"name": "the same from the running per-key totals (the planner's choice)", "value": t,
                "shown": fmt_time(t), "target": ""})

    st = filled(4, 100_000)
    for text in ("SELECT SUM(bytes) FROM p [RANGE 1 SUBWINDOWS] WHERE lat > 50",
                 "SELECT src, SUM(bytes), MAX(lat) FROM p [RANGE 1 SUBWINDOWS] WHERE bytes > 100 GROUP BY src",
                 "SELECT QUANTILE(lat, 0.99) FROM p [RANGE 1 SUBWINDOWS]"):
        plan = plan_query(parse_query(text), st, access="window")
        t = timeit(lambda plan=plan: run_plan(plan), repeat=5)
        out.append({"name": f"window scan, 10^5 rows: {text.split(' FROM')[0][7:]}" + (" WHERE ..." if "WHERE" in text else ""),
                    "value": t, "shown": fmt_time(t), "target": ""})
    return out


def _store_at(rev: str):
    """The store core of git revision `rev` as its own package (store/ uses relative imports only)."""
    root = Path(tempfile.mkdtemp(prefix="store-at-"))
    pkg = root / f"store_{rev[:12].replace('/', '_')}"
    pkg.mkdir()
    repo = Path(__file__).resolve().parent.parent
    files = subprocess.run(["git", "ls-tree", "--name-only", rev, "store/"], cwd=repo, check=True,
                           capture_output=True, text=True).stdout.split()
    for f in files:
        data = subprocess.run(["git", "show", f"{rev}:{f}"], cwd=repo, check=True, capture_output=True).stdout
        (pkg / Path(f).name).write_bytes(data)
    sys.path.insert(0, str(root))
    return importlib.import_module(pkg.name)


def main(argv=None) -> int:
    import argparse

    from windowstore import store
    ap = argparse.ArgumentParser(description="ingest rows: this checkout against a git revision, same process")
    ap.add_argument("--against", required=True, help="git revision of the baseline store core")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    base = _store_at(args.against)
    for rows, dictionary, every, name, _ in INGEST_CASES:
        batches = ingest_batches(rows, dictionary=dictionary)
        before, after = [], []
        for _ in range(args.rounds):  # interleaved, so both see the same machine load
            t, n = ingest_round(base, batches, every)
            before.append(n / t)
            t, n = ingest_round(store, batches, every)
            after.append(n / t)
        b, a = max(before), max(after)
        print(f"{name}: before {fmt_rate(b)}, after {fmt_rate(a)}, ratio {a / b:.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
