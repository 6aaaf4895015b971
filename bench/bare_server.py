"""A gRPC server that receives a call's bytes and answers an empty reply: the transport's floor
for ingest ("a bare RPC carrying the same bytes"). Same runtime as the windowstore server
(grpc.aio, one event loop, the same message limits), no windowstore work.

    python -m bench.bare_server   # prints "serving on 127.0.0.1:PORT", stops on SIGTERM
"""
from __future__ import annotations

import asyncio
import signal

import grpc

APPEND = "/windowstore.v1.WindowStoreService/Append"


async def _serve() -> None:
    async def receive(request: bytes, context) -> bytes:
        return b""  # an empty AppendResponse

    handler = grpc.method_handlers_generic_handler("windowstore.v1.WindowStoreService", {
        "Append": grpc.unary_unary_rpc_method_handler(receive)})  # no (de)serializers: raw bytes
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", 64 * 1024 * 1024)])
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"serving on 127.0.0.1:{port}", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await server.stop(0)


if __name__ == "__main__":
    asyncio.run(_serve())
