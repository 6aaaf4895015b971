"""Store-core benchmarks: seal throughput, synopsis and probe scans, top-k, window scans."""
from __future__ import annotations

import pyarrow as pa

from windowstore.store import Stream, WindowSpec, parse_query, plan_query, run_plan

from .common import SCHEMA, fmt_rate, fmt_time, packets, timeit


def filled(n: int, rows: int, keys: int = 1000, zipf: bool = True) -> Stream:
    s = Stream("p", SCHEMA, WindowSpec(subwindows=n, subwindow_ms=1000, group_by=("src",)), created_ms=0)
    batch = pa.table(packets(rows, keys, zipf=zipf))
    for j in range(n):
        s.append(batch)
        s.window.slide((j + 1) * 1000)
    return s


def run() -> list[dict]:
    out = []
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
    s.window._buffer.take(s.schema.names)

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
    plan = plan_query(q, st)
    assert plan.access == "synopsis"
    t = timeit(lambda: run_plan(plan), repeat=7, number=5)
    keys = min(len(sub.synopsis.by_key["src"].keys) for sub in st.window.youngest(100))
    out.append({"name": f"TOP-10 by SUM over 100 sub-windows (>= {keys} keys each)", "value": t, "shown": fmt_time(t),
                "target": "<= 5 ms"})

    st = filled(4, 100_000)
    for text in ("SELECT SUM(bytes) FROM p [RANGE 1 SUBWINDOWS] WHERE lat > 50",
                 "SELECT src, SUM(bytes), MAX(lat) FROM p [RANGE 1 SUBWINDOWS] WHERE bytes > 100 GROUP BY src",
                 "SELECT QUANTILE(lat, 0.99) FROM p [RANGE 1 SUBWINDOWS]"):
        plan = plan_query(parse_query(text), st, access="window")
        t = timeit(lambda plan=plan: run_plan(plan), repeat=5)
        out.append({"name": f"window scan, 10^5 rows: {text.split(' FROM')[0][7:]}" + (" WHERE ..." if "WHERE" in text else ""),
                    "value": t, "shown": fmt_time(t), "target": ""})
    return out
