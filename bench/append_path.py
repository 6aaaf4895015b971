"""The server's own CPU per Append call, without gRPC's transport: the Append method as rpc.py
serves it (the request's wire parse, the status wrapper, WindowStoreService.Append, the reply's
encoding) called on the driver's event loop, in this process, one call after another: the twin of
bench/query_path.py for the ingest path.

The peer bench's stream and rows (bench/peer_bench.py: event time, 60 one-second sub-windows,
GROUP BY src over 1,000 keys, 30 s of allowed lateness; one second of event time per PARTS
Appends, each request built by the SDK's append_request as a writer sends it), with the server's
C allocator policy (server/allocator.py). Prints the loop
thread's CPU per Append and per row (time.thread_time); `--profile` prints cProfile's top
functions instead (its own cost inflates every figure: read it as shares). For instruction counts,
run it under callgrind twice with different `--appends` and take the difference (the set-up and
the first Appends' warm-up cancel out):

    PYTHONHASHSEED=0 valgrind --tool=callgrind --separate-threads=yes \\
        .venv/bin/python -m bench.append_path --parts 10 --appends 40
"""
from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import time

from windowstore.clients.client import append_request
from windowstore.server import allocator, rpc
from windowstore.server.config import ServerConfig
from windowstore.server.driver import Driver
from windowstore.server.service import WindowStoreService
from windowstore.store import WindowSpec
from windowstore.store.kinds import Clock
from windowstore.txn.commands import CreateStream
from windowstore.v1 import windowstore_pb2 as pb

from .peer_bench import KEYS, SCHEMA, WINDOW_S, Batches
from .query_path import _Context, _Details

LATENESS_S = 30


def append_method(driver: Driver):
    """The Append method as the server runs it on `driver` (its request decoder, the handler behind
    the status wrapper, its response encoder) and a context to call it with."""
    method = rpc.handlers(WindowStoreService(driver), None).service(_Details(f"/{rpc.SERVICE.full_name}/Append"))
    return method.request_deserializer, method.unary_unary, method.response_serializer, _Context()


def requests(parts: int, appends: int) -> list[bytes]:
    """The first `appends` requests of one writer sending seconds in order, each second in `parts`."""
    batches = Batches()
    out: list[bytes] = []
    second = 0
    while len(out) < appends:
        out += [append_request("peer", t, "", None, None) for t in batches.split(second, parts)]  # type: ignore[misc]
        second += 1
    return out[:appends]


def measure(parts: int, appends: int, warmup: int, profile: bool = False, sort: str = "tottime") -> dict:
    driver = Driver(ServerConfig(in_memory=True))
    driver.start()
    try:
        spec = WindowSpec(subwindows=WINDOW_S, subwindow_ms=1000, clock=Clock.EVENT, group_by=("src",),
                          allowed_lateness_ms=LATENESS_S * 1000)
        driver.command(CreateStream("peer", tuple(SCHEMA.items()), "ts", spec, 0.0)).result(30)
        data = requests(parts, warmup + appends)
        decode, behave, encode, context = append_method(driver)
        reply_of = pb.AppendResponse.FromString  # the reply is checked: no row late, no duplicate

        async def call(d: bytes) -> int:
            reply = reply_of(encode(await behave(decode(d), context)))
            if reply.late_rows or reply.duplicate:
                raise RuntimeError(f"unexpected reply: {reply}")
            return reply.accepted_rows

        async def main() -> dict:
            for d in data[:warmup]:
                await call(d)
            prof = cProfile.Profile() if profile else None
            if prof is not None:
                prof.enable()
            t0 = time.thread_time()
            accepted = 0
            for d in data[warmup:]:
                accepted += await call(d)
            cpu = time.thread_time() - t0
            if prof is not None:
                prof.disable()
                pstats.Stats(prof).sort_stats(sort).print_stats(40)
            return {"appends": appends, "rows": accepted, "loop_cpu_us_per_append": cpu / appends * 1e6,
                    "loop_cpu_ns_per_row": cpu / accepted * 1e9}
        return asyncio.run_coroutine_threadsafe(main(), driver.loop).result(600)  # type: ignore[arg-type]  # started
    finally:
        driver.stop(5)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="the Append method's CPU per call, in process (printed as JSON)")
    ap.add_argument("--parts", type=int, default=10, help="Appends per second of event time (1: 10^5 rows each)")
    ap.add_argument("--appends", type=int, default=200, help="Appends measured")
    ap.add_argument("--warmup", type=int, default=20, help="Appends before the measured ones")
    ap.add_argument("--profile", action="store_true", help="print cProfile's top functions of the measured Appends")
    ap.add_argument("--sort", default="tottime", help="cProfile's sort key")
    args = ap.parse_args(argv)
    allocator.keep_freed_memory()  # as the server's process does (server/app.py), before other threads allocate
    print(json.dumps({"parts": args.parts, "keys": KEYS,
                      **measure(args.parts, args.appends, args.warmup, args.profile, args.sort)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
