"""AsyncClient over a cluster: `AsyncClient(["host1:port", "host2:port"])` (or a ClusterView).

The cluster client (partitioned.py) already fans each call out to the servers in parallel on
threads of its own; its asyncio form runs each call on a worker thread and awaits it, so an event
loop is never blocked, and subscriptions hand their answers to the loop as they are merged.
"""
from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

from .answer import Answer
from .partitioned import ClusterClient

# ClusterClient's calls, awaited as they are (a subscription is below)
_CALLS = frozenset({"create_stream", "drop_stream", "list_streams", "describe_stream", "append", "slide", "query",
                    "explain", "register", "unregister", "list_queries", "read_answers", "attach", "stats",
                    "layout"})


class AsyncClusterClient:
    """The asyncio cluster client: ClusterClient's methods, awaited (see its docstrings)."""

    def __init__(self, cluster, timeout: float | None = 60.0, retries: int = 3, tls: bool = False, ca=None,
                 cert=None, key=None, token: str | None = None, etcd=None, follow_leader: bool = False,
                 failover_s: float = 30.0):
        self.cluster_client = ClusterClient(cluster, timeout, retries, tls=tls, ca=ca, cert=cert, key=key,
                                            token=token, etcd=etcd, follow_leader=follow_leader, failover_s=failover_s)

    def __getattr__(self, name: str) -> Any:
        if name not in _CALLS:
            raise AttributeError(name)
        fn = getattr(self.cluster_client, name)

        async def call(*args, **kwargs):
            return await asyncio.to_thread(fn, *args, **kwargs)
        call.__name__ = call.__qualname__ = name
        call.__doc__ = fn.__doc__
        return call

    async def subscribe(self, query_id: str, timeout: float | None = None,
                        after_slide: int | None = None) -> AsyncIterator[Answer]:
        """Answers of a periodic query as they are produced (merged per slide on a partitioned
        stream; after the kept ones for slides after `after_slide`, when set); ends when it is
        unregistered, or when the caller stops iterating."""
        sub = await asyncio.to_thread(self.cluster_client.subscription, query_id, timeout, after_slide)
        answers = iter(sub)
        done = object()
        try:
            while (a := await asyncio.to_thread(next, answers, done)) is not done:
                yield a  # type: ignore[misc]  # an Answer: `done` ends the loop
        finally:
            sub.cancel()

    async def close(self) -> None:
        await asyncio.to_thread(self.cluster_client.close)

    async def __aenter__(self) -> "AsyncClusterClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
