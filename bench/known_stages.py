"""A known request's path (a Query answered from its request's bytes: docs/performance.md), stage
by stage, for instruction counts: each stage called CALLS times between two readings of
time.thread_time, so that `valgrind --tool=callgrind --dump-before=time_thread_time` writes one
dump per stage (the stages in the order printed, each dump after its gap). Stream `p` and the probe
as bench/query_path.py has them; the answer cache on, the probe's request noted (known) before the
stages.

    PYTHONHASHSEED=0 valgrind --tool=callgrind --dump-before=time_thread_time \\
        .venv/bin/python -m bench.known_stages
    python -m bench.known_stages --summary 'callgrind.out.PID'   # instructions per call, per stage
"""
from __future__ import annotations

import argparse
import asyncio
import glob
import json
import time

from windowstore.server import convert
from windowstore.server.config import ServerConfig
from windowstore.server.driver import Driver
from windowstore.v1 import windowstore_pb2 as pb

from .floor_bench import PROBE
from .query_path import fill, query_method

CALLS = 200


def stages(calls: int = CALLS) -> list[tuple[str, float]]:
    """(stage, loop-thread CPU us per call) in the order run; the probe known by its bytes."""
    driver = Driver(ServerConfig(in_memory=True, answer_cache_entries=1024))
    driver.start()
    try:
        fill(driver)
        decode, behave, encode, context = query_method(driver)
        data = pb.QueryRequest(text=PROBE).SerializeToString()

        async def main() -> list[tuple[str, float]]:
            for _ in range(5):  # computed, kept, a hit noted: known from here on
                encode(await behave(decode(data), context))
            sched = driver.engine.sched
            result = driver.answer_known(data)
            assert result is not None, "the probe is not known"

            async def call():
                encode(await behave(decode(data), context))

            canned = encode(await behave(decode(data), context))

            async def canned_reply():
                return canned

            plain = [
                ("the whole call (decode, handler, encode)", None),
                ("Driver.known_stream", lambda: driver.known_stream(data)),
                ("Driver.answer_known", lambda: driver.answer_known(data)),
                ("Scheduler.answer_known", lambda: sched.answer_known(data)),
                ("convert.cached_reply", lambda: convert.cached_reply(result, "p", result.txn, 0.5)),
                ("Driver.note_answer", lambda: driver.note_answer("p", result, 0.5)),
                ("an empty loop", lambda: None),
            ]
            out = []
            for name, fn in plain:
                for _ in range(50):  # warm
                    if fn is None:
                        await call()
                    else:
                        fn()
                t0 = time.thread_time()
                if fn is None:
                    for _ in range(calls):
                        await call()
                else:
                    for _ in range(calls):
                        fn()
                out.append((name, (time.thread_time() - t0) / calls * 1e6))
            t0 = time.thread_time()
            for _ in range(calls):
                await canned_reply()
            out.append(("a canned reply's coroutine", (time.thread_time() - t0) / calls * 1e6))
            return out
        return asyncio.run_coroutine_threadsafe(main(), driver.loop).result(600)  # type: ignore[arg-type]  # started
    finally:
        driver.stop(5)


def summary(pattern: str, names: list[str], calls: int = CALLS) -> dict:
    """Instructions per call of each stage from callgrind's dumps (their `part:` numbers: part 1
    is the set-up's, then each stage's calls and the gap after them, as stages() brackets them)."""
    parts = {}
    for f in glob.glob(pattern):
        part = None
        with open(f, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("part:"):
                    part = int(line.split()[1])
                elif line.startswith(("summary:", "totals:")):
                    parts[part] = int(line.split()[1])
                    break
    return {n: round(parts[2 + 2 * i] / calls) for i, n in enumerate(names) if 2 + 2 * i in parts}


STAGES = ["the whole call (decode, handler, encode)", "Driver.known_stream", "Driver.answer_known",
          "Scheduler.answer_known", "convert.cached_reply", "Driver.note_answer", "an empty loop",
          "a canned reply's coroutine"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="a known request's stages, for callgrind")
    ap.add_argument("--summary", metavar="GLOB", help="print instructions per call from these callgrind dumps")
    ap.add_argument("--calls", type=int, default=CALLS)
    args = ap.parse_args(argv)
    if args.summary:
        print(json.dumps(summary(args.summary, STAGES, args.calls), indent=1))
        return 0
    print(json.dumps(stages(args.calls), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
