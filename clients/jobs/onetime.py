"""A Spark batch job issuing one-time queries through the windowstore data source: each answer
becomes a DataFrame (answer columns plus _slide, _window_start_ms, _window_end_ms, _staleness_ms,
_response_ms, _restarts, _policy) and is shown, or appended to Parquet.

    python -m windowstore.clients.jobs.onetime --query "SELECT COUNT(*), AVG(bytes) FROM packets"
"""
from __future__ import annotations

import argparse


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="127.0.0.1:50051")
    ap.add_argument("--query", action="append", required=True, help="a one-time query (repeatable)")
    ap.add_argument("--path", help="append the answers to Parquet here instead of showing them")
    args = ap.parse_args(argv)

    from windowstore.clients.spark import local_session

    spark = local_session("windowstore-onetime")
    try:
        for text in args.query:
            df = spark.read.format("windowstore").option("target", args.target).option("query", text).load()
            if args.path:
                df.write.mode("append").parquet(args.path)
            else:
                print(text)
                df.show(truncate=False)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
