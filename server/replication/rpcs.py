"""The replication RPCs of WindowStoreService (ReplicaFetch, ReplicaAck, SetReplicaRole,
GetReplicaStatus) and its checks on client requests to replicated streams: kept here so that the
service module only calls them. Handlers run on the server's event loop."""
from __future__ import annotations

import asyncio
from typing import Any, Callable

from windowstore.store.errors import InvalidInput
from windowstore.txn.errors import FailedPrecondition
from windowstore.v1 import windowstore_pb2 as pb

from ..driver.errors import Unavailable
from .manager import ACKS, Replication

DEFAULT_MIN_SLIDE_WAIT_MS = 5000


class ReplicationRpcs:
    """Mixed into WindowStoreService (which provides driver, cluster, config, _allow, _run)."""

    driver: Any
    config: Any
    _allow: Callable[..., str]
    _run: Callable[..., Any]

    def _replication(self) -> Replication:
        repl = self.driver.replication
        if repl is None:
            raise FailedPrecondition("this server keeps no replicas: replication needs `serve --cluster FILE --node I` "
                                     "or `serve --etcd URL --node I`, and a data directory")
        return repl

    # -- hooks on client requests ---------------------------------------------------------------------
    def _replicas_for(self, name: str, spec, replication: int, acks: str) -> tuple[list[int], str] | None:
        """The replica nodes (leader first) and acks of a stream created with `replication`, or None
        for an unreplicated one. Refuses a replication or acks it cannot give, naming the field."""
        if acks and acks not in ACKS:
            raise InvalidInput(f"acks must be one of {', '.join(ACKS)}, got {acks[:40]!r}")
        if replication <= 1:
            if acks == "all":
                raise InvalidInput("acks='all' needs replication > 1")
            return None
        repl = self._replication()
        if getattr(repl, "coordinated", False):  # --etcd: etcd's map and election (failover.py)
            return repl.replicas_for(name, spec, replication), acks or "all"  # type: ignore[attr-defined]
        from .placement import replicas
        nodes = replicas(self.config.cluster, name, spec, replication)
        if nodes[0] != repl.node:
            raise FailedPrecondition(f"stream {name[:100]!r}: its leader is node {nodes[0]} ({repl.addresses[nodes[0]]}) "
                                     f"by the cluster file, not this node {repl.node}")
        return nodes, acks or "all"

    async def _create_replicated(self, name: str, nodes: list[int], acks: str, create) -> None:
        """Become the stream's leader, tell each follower to follow it, then create it (with acks=all,
        acknowledged once the followers hold the CreateStream). A follower that could not be told
        leaves the in-sync set at once; the call then fails UNAVAILABLE naming it, the stream created."""
        repl = self._replication()
        await self._run(lambda: repl.create_leader(name, nodes, acks), None)
        # with --etcd the followers follow etcd's elected leader by themselves
        failed = [] if getattr(repl, "coordinated", False) else await tell_followers(repl, name, nodes, acks)
        if failed:
            await self._run(lambda: repl.out_of_sync(name, [n for n, _ in failed]), None)
        try:
            await create()
        except BaseException:
            repl.forget(name)
            raise
        if failed:
            raise Unavailable(f"stream {name[:100]!r} was created on its leader, but these followers could not be "
                              f"told to follow it: {'; '.join(why for _, why in failed)}")

    def _check_replica_write(self, cmd) -> None:
        repl = self.driver.replication
        if repl is not None and repl.parts:
            from .manager import stream_of
            name = stream_of(cmd)
            if name is not None:
                repl.check_write(name)

    async def _replica_committed(self, cmd) -> None:
        repl = self.driver.replication
        if repl is not None and repl.parts:
            from .manager import stream_of
            name = stream_of(cmd)
            fut = repl.committed(name) if name is not None else None
            if fut is not None:
                await fut

    async def _replica_read(self, request, streams: list[str]) -> None:
        """read_from and min_slide of a query: a follower answers only when asked to, once it has
        applied slide min_slide (waiting for it up to min_slide_wait_ms)."""
        repl = self.driver.replication
        if request.read_from not in ("", "leader", "follower"):
            raise InvalidInput(f"read_from must be 'leader' or 'follower', got {request.read_from[:40]!r}")
        if repl is not None:
            for name in streams:
                repl.check_read(name, request.read_from)
        if not request.HasField("min_slide"):
            return
        if len(streams) != 1:
            raise InvalidInput("min_slide applies to a query of one stream")
        wait_ms = request.min_slide_wait_ms or DEFAULT_MIN_SLIDE_WAIT_MS
        if repl is None:
            from .manager import _latest_slide
            latest = await self._run(lambda: _latest_slide(self.driver.engine, streams[0]), None)
            if latest < request.min_slide:
                raise Unavailable(f"slide {request.min_slide} of stream {streams[0][:100]!r} is not applied here "
                                  f"(newest: {latest})")
            return
        fut = await self._run(lambda: repl.wait_slide(streams[0], request.min_slide), None)
        if fut is None:
            return
        try:
            await asyncio.wait_for(fut, wait_ms / 1000.0)
        except asyncio.TimeoutError:
            from .manager import _latest_slide
            latest = _latest_slide(self.driver.engine, streams[0])
            raise Unavailable(f"slide {request.min_slide} of stream {streams[0][:100]!r} was not applied on this "
                              f"replica within {wait_ms} ms (newest applied: slide {latest})") from None

    def _periodic_on_leader(self, streams: list[str]) -> None:
        """A periodic query on a replicated stream is registered on its leader only (a follower
        refuses, naming the leader). The registration goes to this server's own log, not to the
        stream's replica log: the leader's answers are its own, and after a failover the client
        that registered it registers it again on the new leader (clients/follow.py), which is
        simpler than replaying registrations, query ids and answer logs on every follower."""
        repl = self.driver.replication
        if repl is not None:
            for name in streams:
                repl.check_write(name)

    def _moved_query(self, query_id: str) -> None:
        """A periodic query this replica unregistered when it stopped leading its stream:
        FAILED_PRECONDITION naming the leader (where its client registers it again), not NOT_FOUND."""
        repl = self.driver.replication
        if repl is not None:
            repl.moved_query(query_id)

    # -- the RPCs -------------------------------------------------------------------------------------
    async def ReplicaFetch(self, request, context):
        self._allow(context, "admin", request.stream)
        repl = self._replication()
        if not self.driver.ready:
            await self.driver.until_ready()
        async for batch in repl.fetch(request):
            yield batch

    async def ReplicaAck(self, request, context):
        self._allow(context, "admin", request.stream)
        repl = self._replication()
        hw = await self._run(lambda: repl.ack(request.stream, request.node, request.epoch, request.offset), context)
        return pb.ReplicaAckResponse(high_watermark=hw)

    async def SetReplicaRole(self, request, context):
        self._allow(context, "admin", request.stream)
        repl = self._replication()
        if request.epoch < 1:
            raise InvalidInput("epoch must be at least 1")
        if request.role == pb.REPLICA_ROLE_LEADER:
            await self._run(lambda: repl.become_leader(request.stream, request.epoch), context)
        elif request.role == pb.REPLICA_ROLE_FOLLOWER:
            for n in request.replicas:
                if n >= len(repl.addresses):
                    raise InvalidInput(f"replica node {n} is not in the cluster (nodes 0 to {len(repl.addresses) - 1})")
            if request.acks and request.acks not in ACKS:
                raise InvalidInput(f"acks must be one of {', '.join(ACKS)}")
            await self._run(lambda: repl.become_follower(request.stream, request.leader, request.epoch,
                                                         list(request.replicas), request.acks or "all"), context)
        else:
            raise InvalidInput("role must be REPLICA_ROLE_LEADER or REPLICA_ROLE_FOLLOWER")
        return await self._run(lambda: repl.status(request.stream), context)

    async def GetReplicaStatus(self, request, context):
        self._allow(context, "read", request.stream)
        repl = self._replication()
        return await self._run(lambda: repl.status(request.stream), context)


async def tell_followers(repl: Replication, name: str, nodes: list[int], acks: str) -> list[tuple[int, str]]:
    """SetReplicaRole(follower of this node, epoch 1) on each follower; returns those that could not
    be told, with why (they can be told by hand later)."""
    import grpc

    failed = []
    for n in nodes[1:]:
        async with grpc.aio.insecure_channel(repl.peer_address(n)) as ch:
            call = ch.unary_unary("/windowstore.v1.WindowStoreService/SetReplicaRole",
                                  request_serializer=pb.SetReplicaRoleRequest.SerializeToString,
                                  response_deserializer=pb.ReplicaStatus.FromString)
            try:
                await call(pb.SetReplicaRoleRequest(stream=name, role=pb.REPLICA_ROLE_FOLLOWER, epoch=1,
                                                    leader=repl.node, replicas=nodes, acks=acks), timeout=10)
            except grpc.aio.AioRpcError as e:
                failed.append((n, f"node {n} ({repl.addresses[n]}): {e.code().name} {e.details()}"))
    return failed
