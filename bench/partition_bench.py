"""Partitioned streams on this host: ingest and probe-query throughput with 1, 2 and 4 partitions
on 1 and 2 `windowstore serve` processes (127.0.0.1, in memory), and the scatter-gather overhead of
a probe query on P partitions against P = 1 on the same servers, as ratios measured in one run.

Workload: a manual-clock stream of packets (ts, src, bytes, lat), partitioned by src, window of
WINDOW sub-windows; ROWS rows appended in batches of BATCH rows by CLIENTS threads sharing one
ClusterClient (one Append per partition per batch, in parallel), a slide after each SLIDE_EVERY
batches; then QUERIES probe queries `SELECT SUM(bytes)` (scatter-gather AS OF the newest slide all
partitions sealed) from one thread (the probe's latency), and QUERIES more from CLIENTS threads at
once (query throughput). Every probe answer is checked against the sum of the rows the slide's
window holds. The scatter-gather overhead is a probe's latency on P partitions over its latency on
P = 1 with the same server processes. Window memory: the servers' resident memory (VmRSS) after the
ingest less that after creating the stream, per row the window holds (columns, synopses and the
process's own growth). The CPU the servers and this client used during the ingest, in cores
(CPU seconds over wall seconds), says what bounds ingest when they share the cores; the rows per
server CPU second is the capacity model's figure per core. The client runs in this process on the same 2 cores as the servers, so the
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


def _rss(procs) -> int:
    """The servers' resident memory, bytes (Linux /proc)."""
    total = 0
    for p in procs:
        with open(f"/proc/{p.proc.pid}/status") as f:
            total += next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
    return total


def _cpu_s(procs) -> float:
    """The servers' CPU time so far (user + system, all threads), seconds (Linux /proc)."""
    return sum(p.cpu_seconds() for p in procs)


def _run(servers: int, partitions: int, rows: int, batch: int, queries: int, clients: int) -> dict:
    procs = [ServerProcess() for _ in range(servers)]
    try:
        with ClusterClient([p.target for p in procs]) as cc:
            cc.create_stream("pb", SCHEMA, subwindows=WINDOW, subwindow_ms=1000, clock="manual",
                             partitions=partitions, partition_by=["src"])
            rss0 = _rss(procs)
            batches = [pa.table(packets(batch, keys=1000, seed=i % 8)) for i in range(rows // batch)]
            sums = [int(pa.compute.sum(b.column("bytes")).as_py()) for b in batches]
            nbytes = batches[0].nbytes / batch
            nxt, lock = iter(range(len(batches))), threading.Lock()
            sealed: list[int] = []  # batches sealed by each slide, in order
            counts: list[int] = []  # rows sealed by each slide

            def ingest():
                while True:
                    with lock:
                        i = next(nxt, None)
                    if i is None:
                        return
                    cc.append("pb", batches[i], writer_id="bench", batch_id=i)

            t0, server_cpu0, client_cpu0 = time.perf_counter(), _cpu_s(procs), time.process_time()
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
                counts.append(len(group) * batch)
            ingest_s = time.perf_counter() - t0
            server_cpu_s, client_cpu_s = _cpu_s(procs) - server_cpu0, time.process_time() - client_cpu0
            window_bytes = _rss(procs) - rss0
            window_rows = sum(counts[-WINDOW:])
            expect = sum(sealed[-WINDOW:])
            t0 = time.perf_counter()
            for _ in range(queries):
                a = cc.query("SELECT SUM(bytes) FROM pb")
                if a.rows != [(expect,)]:
                    raise AssertionError(f"P={partitions}: probe answered {a.rows}, the window holds {expect}")
            query_s = time.perf_counter() - t0
            left = iter(range(queries))

            def probe():
                while True:
                    with lock:
                        i = next(left, None)
                    if i is None:
                        return
                    a = cc.query("SELECT SUM(bytes) FROM pb")
                    if a.rows != [(expect,)]:
                        raise AssertionError(f"P={partitions}: probe answered {a.rows}, the window holds {expect}")

            t0 = time.perf_counter()
            threads = [threading.Thread(target=probe) for _ in range(clients)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            concurrent_s = time.perf_counter() - t0
    finally:
        for p in procs:
            p.stop()
    return {"servers": servers, "partitions": partitions, "ingest_rows_per_s": len(batches) * batch / ingest_s,
            "probe_queries_per_s": queries / query_s, "probe_ms": 1000 * query_s / queries,
            "concurrent_queries_per_s": queries / concurrent_s, "arrow_bytes_per_row": nbytes,
            "window_rows": window_rows,
            "ingest_server_cores": server_cpu_s / ingest_s, "ingest_client_cores": client_cpu_s / ingest_s,
            "rows_per_server_cpu_s": len(batches) * batch / server_cpu_s, "resident_bytes_per_window_row": window_bytes / window_rows}


def measure(rows: int, batch: int, queries: int, clients: int) -> list[dict]:
    """Every configuration's figures, with ingest as a ratio to 1 server, P = 1 and a probe's
    latency as a ratio to P = 1 on the same number of servers (the scatter-gather overhead)."""
    results = [_run(s, p, rows, batch, queries, clients) for s in (1, 2) for p in (1, 2, 4)]
    one = next(r for r in results if r["servers"] == 1 and r["partitions"] == 1)
    for r in results:
        base = next(b for b in results if b["servers"] == r["servers"] and b["partitions"] == 1)
        r["ingest_vs_1x1"] = r["ingest_rows_per_s"] / one["ingest_rows_per_s"]
        r["probe_overhead_vs_p1"] = r["probe_ms"] / base["probe_ms"]
    return results


def run() -> list[dict]:
    """`make bench`'s section: the same measurement, smaller (200,000 rows, 100 probes)."""
    out = []
    for r in measure(200_000, 10_000, 100, 2):
        tag = f"{r['servers']} server{'s' if r['servers'] > 1 else ''}, P={r['partitions']}"
        out += [{"name": f"partition ingest ({tag})", "value": r["ingest_rows_per_s"],
                 "shown": f"{r['ingest_rows_per_s']:,.0f} rows/s ({r['ingest_vs_1x1']:.2f}x 1 server P=1)", "target": ""},
                {"name": f"partition probe ({tag})", "value": r["probe_ms"],
                 "shown": f"{r['probe_ms']:.2f} ms ({r['probe_overhead_vs_p1']:.2f}x P=1), "
                          f"{r['concurrent_queries_per_s']:,.0f} queries/s", "target": ""}]
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=800_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    results = measure(args.rows, args.batch, args.queries, args.clients)
    print(f"{'servers':>7} {'P':>2} {'ingest rows/s':>14} {'x 1 server P=1':>15} {'probe ms':>9} "
          f"{'probe ms / P=1':>15} {'queries/s':>10} {'RSS B/row':>10} {'server cores':>13} {'client cores':>13} "
          f"{'rows/server CPU s':>18}")
    for r in results:
        print(f"{r['servers']:>7} {r['partitions']:>2} {r['ingest_rows_per_s']:>14,.0f} {r['ingest_vs_1x1']:>15.2f} "
              f"{r['probe_ms']:>9.2f} {r['probe_overhead_vs_p1']:>15.2f} {r['concurrent_queries_per_s']:>10,.0f} "
              f"{r['resident_bytes_per_window_row']:>10,.0f} {r['ingest_server_cores']:>13.2f} "
              f"{r['ingest_client_cores']:>13.2f} {r['rows_per_server_cpu_s']:>18,.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
