"""Registers periodic queries on windowstore and writes their answers to a sink: the console, or
Parquet files (one row per answer row, with the answer's metadata), appended by Spark.

    python -m windowstore.clients.jobs.periodic --query "SELECT src, SUM(bytes) FROM packets \\
        [RANGE 10 s SLIDE 1 s] GROUP BY src ORDER BY 2 DESC LIMIT 5" --sink parquet --path /tmp/answers
"""
from __future__ import annotations

import argparse
import queue
import threading
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="127.0.0.1:50051")
    ap.add_argument("--query", action="append", required=True, help="a periodic query with SLIDE (repeatable)")
    ap.add_argument("--sink", choices=["console", "parquet"], default="console")
    ap.add_argument("--path", help="parquet: output directory")
    ap.add_argument("--flush-s", type=float, default=5.0, help="parquet: write every this many seconds (default 5)")
    ap.add_argument("--duration-s", type=float, default=60.0, help="stop after this many seconds (default 60)")
    args = ap.parse_args(argv)
    if args.sink == "parquet" and not args.path:
        ap.error("--sink parquet needs --path")

    from windowstore.clients import Client

    answers: queue.Queue = queue.Queue()
    ws = Client(args.target)
    registered = [ws.register(q) for q in args.query]
    stop = threading.Event()

    def follow(q, text):
        try:
            for a in ws.subscribe(q.id):
                answers.put((text, a))
                if stop.is_set():
                    return
        except Exception as e:  # noqa: BLE001 - the stream ends when we unregister
            if not stop.is_set():
                print(f"subscription {q.id} ended: {e}", flush=True)
    threads = [threading.Thread(target=follow, args=(q, t), daemon=True) for q, t in zip(registered, args.query)]
    for t in threads:
        t.start()
    spark = None
    if args.sink == "parquet":
        from windowstore.clients.spark import local_session
        spark = local_session("windowstore-periodic")
    deadline = time.monotonic() + args.duration_s
    written = 0
    try:
        while time.monotonic() < deadline:
            time.sleep(min(args.flush_s, max(0.0, deadline - time.monotonic())))
            batch = []
            while not answers.empty():
                batch.append(answers.get())
            if args.sink == "console":
                for _, a in batch:
                    stale = "-" if a.staleness_ms is None else f"{a.staleness_ms:.1f} ms"
                    print(f"[{a.query_id} #{a.execution} slide {a.slide} staleness {stale}] {a.rows[:5]}", flush=True)
            elif batch:
                rows = [{"query_id": a.query_id, "query": text, "execution": a.execution, "slide": a.slide,
                         "staleness_ms": a.staleness_ms, "answered_ms": a.answered_ms, "row": i,
                         "values": [None if v is None else str(v) for v in r]}
                        for text, a in batch for i, r in enumerate(a.rows)]
                if rows:
                    spark.createDataFrame(rows).write.mode("append").parquet(args.path)  # type: ignore[union-attr]  # the parquet sink made a session
                    written += len(rows)
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        for q in registered:
            ws.unregister(q.id)
        ws.close()
        if spark is not None:
            spark.stop()
    if args.sink == "parquet":
        print(f"wrote {written} answer rows to {args.path}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
