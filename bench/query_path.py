"""The server's own CPU per query call, without gRPC's transport: the Query method as rpc.py serves it
(request decode, the status wrapper, WindowStoreService.Query, the response's encoding) called on
the driver's event loop, in this process, one call after another. Its figure is the Python share of
a call that bench/floor_bench.py measures end to end against the bare gRPC health check (issue 13's
floor ratios; docs/performance.md, Round 20): what is left of a call's cost is gRPC's.

Stream `p` as floor_bench fills it (100 one-second sub-windows of 1,000 packets, manual clock),
the same three queries. CPU time of the loop thread per call (time.thread_time), the median of
ROUNDS rounds of CALLS calls each, after a warm-up; `--stages` times the path's stages one at a
time instead (the minimum of ROUNDS rounds each); `--profile KIND` prints cProfile's top functions
of one kind (cProfile's own cost inflates every figure: read it as shares). `--evict BYTES` times
each call alone after writing BYTES of other memory: on a server, gRPC's work between two calls
leaves the caches holding its own code and data, and a call costs 1.6-2.8 times its warm figure
(docs/performance.md, Round 22); `--callers N` runs N concurrent callers on the loop.

    .venv/bin/python -m bench.query_path [--stages] [--evict 4000000] [--callers 16]
"""
from __future__ import annotations

import argparse
import asyncio
import cProfile
import itertools
import json
import pstats
import statistics
import time

import numpy as np
import pyarrow as pa

from windowstore.server import rpc
from windowstore.server.config import ServerConfig
from windowstore.server.driver import Driver
from windowstore.server.service import WindowStoreService
from windowstore.store import WindowSpec
from windowstore.store.kinds import Clock
from windowstore.txn.commands import Append, CreateStream, Slide
from windowstore.v1 import windowstore_pb2 as pb

from .common import SCHEMA, packets
from .floor_bench import QUERIES, variants

CALLS = 2000
ROUNDS = 5
WARMUP = 300


class _Details:
    """A call's method, as gRPC asks a generic handler for it."""

    def __init__(self, method: str):
        self.method = method
        self.invocation_metadata = ()


class _Context:
    """What the handlers ask of a grpc.aio context on a successful call."""

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"

    def invocation_metadata(self):
        return ()


def fill(driver: Driver) -> None:
    spec = WindowSpec(subwindows=100, subwindow_ms=1000, clock=Clock.MANUAL, group_by=("src",))
    driver.command(CreateStream("p", tuple(SCHEMA.items()), "ts", spec, 0.0)).result(30)
    batch = pa.table(packets(1000))
    for _ in range(100):
        driver.command(Append("p", batch, "", None, 0.0)).result(30)
        driver.command(Slide("p", 0.0)).result(30)


def query_method(driver: Driver):
    """The Query method as the server runs it on `driver` (its request decoder, the handler behind
    the status wrapper, its response encoder) and a context to call it with."""
    method = rpc.handlers(WindowStoreService(driver), None).service(_Details(f"/{rpc.SERVICE.full_name}/Query"))
    return method.request_deserializer, method.unary_unary, method.response_serializer, _Context()


def measure(kinds=None, profile: str | None = None, sort: str = "tottime", callers: int = 1,
            evict: int | None = None, cache_entries: int | None = None, vary: int = 1, calls_n: int = CALLS,
            rounds: int = ROUNDS, warmup: int = WARMUP) -> dict:
    """CPU per call of each kind: one call after another; with `callers` > 1, that many concurrent
    tasks; with `evict` (bytes, 0 for none), each call timed alone after that much memory was
    written, so that the caches hold other data (0: the same timing without it). `cache_entries`:
    the answer cache's size (0: off; None: the server's default); `vary`: the calls cycle through
    that many variants of each query (floor_bench.variants)."""
    config = ServerConfig(in_memory=True)
    if cache_entries is not None:
        config.answer_cache_entries = cache_entries
    driver = Driver(config)
    driver.start()
    try:
        fill(driver)
        decode, behave, encode, context = query_method(driver)
        texts = {k: t for k, t, _ in QUERIES if kinds is None or k in kinds}

        sent = itertools.count()  # variants go on from call to call, round to round: none repeats early

        async def one_after_another(data: list[bytes], n: int) -> float:
            t0 = time.thread_time()
            for _ in range(n):
                encode(await behave(decode(data[next(sent) % len(data)]), context))
            return (time.thread_time() - t0) / n

        async def concurrently(data: list[bytes], n: int) -> float:
            """`callers` tasks on the loop, each calling in turn, as grpc.aio runs concurrent calls."""
            async def caller(k: int) -> None:
                for _ in range(k):
                    encode(await behave(decode(data[next(sent) % len(data)]), context))
            t0 = time.thread_time()
            await asyncio.gather(*(caller(n // callers) for _ in range(callers)))
            return (time.thread_time() - t0) / (n // callers * callers)

        async def cold_calls(data: list[bytes], n: int) -> float:
            """Each call timed alone after `evict` bytes were written (outside the timing): what a
            call costs when the caches hold other work's data, as between calls on a server."""
            spent = 0.0
            for _ in range(n):
                if scratch is not None:
                    scratch[::64] += 1  # a cache line each
                t0 = time.thread_time()
                encode(await behave(decode(data[next(sent) % len(data)]), context))
                spent += time.thread_time() - t0
            return spent / n

        calls = cold_calls if evict is not None else concurrently if callers > 1 else one_after_another
        scratch = np.zeros(evict, dtype=np.uint8) if evict else None

        async def main() -> dict:
            out = {}
            for key, text in texts.items():
                data = [pb.QueryRequest(text=t).SerializeToString() for t in variants(text, vary)]
                answer = pb.QueryResponse.FromString(encode(await behave(decode(data[0]), context))).answer
                if not answer.rows:
                    raise RuntimeError(f"{key}: no answer rows")
                await calls(data, warmup)
                if profile == key:
                    prof = cProfile.Profile()
                    prof.enable()
                    await calls(data, calls_n)
                    prof.disable()
                    pstats.Stats(prof).sort_stats(sort).print_stats(45)
                    continue
                per_call = [await calls(data, calls_n) for _ in range(rounds)]
                out[key] = {"text": text, "cpu_us_per_call": statistics.median(per_call) * 1e6,
                            "rounds_us": [x * 1e6 for x in per_call]}
            return out
        return asyncio.run_coroutine_threadsafe(main(), driver.loop).result(600)  # type: ignore[arg-type]  # started
    finally:
        driver.stop(5)


def _cpu_us(fn, n: int = 3000) -> float:
    """Loop-thread CPU per call of fn, the minimum of ROUNDS rounds of n calls."""
    best = float("inf")
    for _ in range(ROUNDS):
        t0 = time.thread_time()
        for _ in range(n):
            fn()
        best = min(best, (time.thread_time() - t0) / n)
    return best * 1e6


def stages(kinds=None) -> dict:
    """Each stage of a query call timed alone (us, loop-thread CPU): the cached parse and plan,
    the transaction from submit to commit (its read included), the answer's encoding, the reply's
    serialisation, the request's decoding, the metrics; and how many of the transaction's calls
    were not answered in their call (they waited for the query thread or a step)."""
    from windowstore.server import convert
    from windowstore.server.service import _parse

    driver = Driver(ServerConfig(in_memory=True))
    driver.start()
    try:
        fill(driver)

        async def main() -> dict:
            out = {}
            for key, text in ((k, t) for k, t, _ in QUERIES if kinds is None or k in kinds):
                query = _parse(text)
                waited = [0]

                async def submit():
                    txn, done = driver.submit(query, 0)
                    if done is not None:
                        waited[0] += 1
                        await done
                    return txn

                best = float("inf")
                for _ in range(ROUNDS):
                    t0 = time.thread_time()
                    for _ in range(3000):
                        await submit()
                    best = min(best, (time.thread_time() - t0) / 3000)
                txn = await submit()
                response = pb.QueryResponse()
                convert.answer_to_pb(txn.result, "p", txn.id, response.answer)
                data = pb.QueryRequest(text=text).SerializeToString()
                out[key] = {
                    "parse (cached)": _cpu_us(lambda: _parse(text)),
                    "plan (cached)": _cpu_us(lambda: driver.engine.plan(query)),
                    "transaction, submit to commit": best * 1e6,
                    "not answered in their call": f"{waited[0]} of {ROUNDS * 3000 + 1}",
                    "answer_to_pb": _cpu_us(lambda: convert.answer_to_pb(txn.result, "p", txn.id,
                                                                          pb.QueryResponse().answer)),
                    "serialise the reply": _cpu_us(response.SerializeToString),
                    "decode the request": _cpu_us(lambda: pb.QueryRequest.FromString(data)),
                    "metrics (note_answer)": _cpu_us(lambda: driver.note_answer("p", txn.result, 0.5)),
                }
            return out
        return asyncio.run_coroutine_threadsafe(main(), driver.loop).result(600)  # type: ignore[arg-type]  # started
    finally:
        driver.stop(5)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="the Query method's CPU per call, in process (printed as JSON)")
    ap.add_argument("--kinds", default="", help="comma-separated: probe, group, filter (default: all)")
    ap.add_argument("--profile", default=None, help="print cProfile's top functions of this kind instead")
    ap.add_argument("--stages", action="store_true", help="time each stage of a call alone instead")
    ap.add_argument("--callers", type=int, default=1, help="concurrent callers (tasks on the loop)")
    ap.add_argument("--evict", type=int, default=None, metavar="BYTES",
                    help="time each call alone after writing BYTES of other memory (0: timed alone, no writing)")
    ap.add_argument("--answer-cache-entries", type=int, default=None,
                    help="the server's answer cache size (0: off; default: the server's default)")
    ap.add_argument("--vary", type=int, default=1,
                    help="each call cycles through this many variants of its query (aliases: other queries)")
    ap.add_argument("--calls", type=int, default=CALLS, help=f"calls per round (default {CALLS})")
    ap.add_argument("--rounds", type=int, default=ROUNDS, help=f"rounds (default {ROUNDS})")
    ap.add_argument("--warmup", type=int, default=WARMUP, help=f"calls before the rounds (default {WARMUP})")
    args = ap.parse_args(argv)
    kinds = set(args.kinds.split(",")) if args.kinds else None
    print(json.dumps(stages(kinds) if args.stages else measure(kinds, args.profile, callers=args.callers, evict=args.evict,
                                                                   cache_entries=args.answer_cache_entries, vary=args.vary,
                                                                   calls_n=args.calls, rounds=args.rounds, warmup=args.warmup), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
