"""Partitioned streams on this host: ingest and probe-query throughput with 1, 2 and 4 partitions
on 1 and 2 `windowstore serve` processes (127.0.0.1, in memory), and the scatter-gather overhead of
a probe query on P partitions against P = 1 on the same servers, as ratios measured in one run.

Workload: a manual-clock stream of packets (ts, src, bytes, lat), partitioned by src, window of
WINDOW sub-windows; ROWS rows appended in batches of BATCH rows by CLIENTS threads sharing one
ClusterClient (one Append per partition per batch, in parallel), a slide after each SLIDE_EVERY
batches; then QUERIES probe queries `SELECT SUM(bytes)` (scatter-gather AS OF the newest slide all
partitions sealed) from one thread. Every probe answer is checked against the sum of the rows the
slide's window holds. The client runs in this process on the same 2 cores as the servers, so the
figures bound what the servers do from below; run the bench on an idle host for absolute numbers."""
from __future__ import annotations

import argparse
import json
import threading
import time

import pyarrow as pa

from windowstore.clients.partitioned import ClusterClient
from windowstore.server.process import ServerProcess

from .common import packets

SCHEMA = {"ts": "int64", "src": "string", "bytes": "int64", "lat": "float64"}
WINDOW = 8
SLIDE_EVERY = 4


def _run(servers: int, partitions: int, rows: int, batch: int, queries: int, clients: int) -> dict:
    procs = [ServerProcess() for _ in range(servers)]
    try:
        with ClusterClient([p.target for p in procs]) as cc:
            cc.create_stream("pb", SCHEMA, subwindows=WINDOW, subwindow_ms=1000, clock="manual",
                             partitions=partitions, partition_by=["src"])
            batches = [pa.table(packets(batch, keys=1000, seed=i % 8)) for i in range(rows // batch)]
            sums = [int(pa.compute.sum(b.column("bytes")).as_py()) for b in batches]
            nbytes = batches[0].nbytes / batch
            nxt, lock = iter(range(len(batches))), threading.Lock()
            sealed: list[int] = []  # batches sealed by each slide, in order

            def ingest():
                while True:
                    with lock:
                        i = next(nxt, None)
                    if i is None:
                        return
                    cc.append("pb", batches[i], writer_id="bench", batch_id=i)

            t0 = time.perf_counter()
            for start in range(0, len(batches), SLIDE_EVERY * clients):  # rounds: the rows, then a slide
                group = list(range(start, min(start + SLIDE_EVERY * clients, len(batches))))
                nxt = iter(group)
                threads = [threading.Thread(target=ingest) for _ in range(clients)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                cc.slide("pb")
                sealed.append(sum(sums[i] for i in group))
            ingest_s = time.perf_counter() - t0
            expect = sum(sealed[-WINDOW:])
            t0 = time.perf_counter()
            for _ in range(queries):
                a = cc.query("SELECT SUM(bytes) FROM pb")
                if a.rows != [(expect,)]:
                    raise AssertionError(f"P={partitions}: probe answered {a.rows}, the window holds {expect}")
            query_s = time.perf_counter() - t0
    finally:
        for p in procs:
            p.stop()
    return {"servers": servers, "partitions": partitions, "ingest_rows_per_s": len(batches) * batch / ingest_s,
            "probe_queries_per_s": queries / query_s, "probe_ms": 1000 * query_s / queries,
            "arrow_bytes_per_row": nbytes}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=800_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    results = [_run(s, p, args.rows, args.batch, args.queries, args.clients) for s in (1, 2) for p in (1, 2, 4)]
    one = next(r for r in results if r["servers"] == 1 and r["partitions"] == 1)
    print(f"{'servers':>7} {'P':>2} {'ingest rows/s':>14} {'x 1 server P=1':>15} {'probe q/s':>10} {'probe ms':>9} "
          f"{'probe ms / P=1':>15}")
    for r in results:
        r["ingest_vs_1x1"] = r["ingest_rows_per_s"] / one["ingest_rows_per_s"]
        r["probe_overhead_vs_p1"] = r["probe_ms"] / one["probe_ms"]
        print(f"{r['servers']:>7} {r['partitions']:>2} {r['ingest_rows_per_s']:>14,.0f} {r['ingest_vs_1x1']:>15.2f} "
              f"{r['probe_queries_per_s']:>10,.0f} {r['probe_ms']:>9.2f} {r['probe_overhead_vs_p1']:>15.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
