"""Network partitions on 127.0.0.1 without network namespaces: a fault-injecting TCP proxy per
pair of processes, whose links the harness cuts and heals (tests/chaos.py, tests/test_partitions.py).

Each `Network.link(src, dst, port)` listens on a free loopback port and forwards every connection
made there to `dst`'s `port`; `src` is configured to reach `dst` through it (a server's
`--peer-address NODE=...` for the replication traffic it sends to NODE, and its `--etcd` URL for
etcd). The bytes of a connection made by `src` flow src -> dst one way and dst -> src the other,
so a cut is a set of directions between named endpoints, whichever side opened the connection:

- `Fault.BLACKHOLE`: bytes in a cut direction are not read from the sender's socket until the
  cut heals (the sender's buffers fill, its reads time out), as a route that silently loses
  packets looks to TCP, which retransmits them once the route is back: nothing is corrupted, and
  a connection attempt across the cut hangs. A cut may be one way only (a -> b lost, b -> a kept).
- `Fault.RESET`: every connection across the cut is reset (RST) and new ones are closed as soon
  as they are accepted, as a rejecting firewall looks. Always both ways.

Runs an asyncio loop on a thread of its own; the methods are called from any thread. Only
127.0.0.1 is listened on or connected to.
"""
from __future__ import annotations

import asyncio
import enum
import socket
import struct
import threading
from dataclasses import dataclass, field
from typing import Hashable

HOST = "127.0.0.1"


class Fault(enum.Enum):
    BLACKHOLE = "blackhole"
    RESET = "reset"


@dataclass(eq=False)
class _Conn:
    src: Hashable
    dst: Hashable
    writers: list[asyncio.StreamWriter] = field(default_factory=list)


class Network:
    def __init__(self):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="netfault", daemon=True)
        self._thread.start()
        self._blocked: dict[tuple[Hashable, Hashable], Fault] = {}  # (from, to) -> how its bytes are lost
        self._changed = self._call(self._make_condition())
        self._conns: set[_Conn] = set()
        self._servers: list[asyncio.AbstractServer] = []
        self.links: dict[tuple[Hashable, Hashable], int] = {}  # (src, dst) -> the proxy's port
        self.resets = 0  # connections reset by cuts

    async def _make_condition(self) -> asyncio.Condition:
        return asyncio.Condition()

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)

    # -- the harness's side -------------------------------------------------------------------------
    def link(self, src: Hashable, dst: Hashable, port: int) -> int:
        """A proxy for the connections `src` makes to `dst` (listening on `port`): its own port."""
        proxy_port = self._call(self._listen(src, dst, port))
        self.links[(src, dst)] = proxy_port
        return proxy_port

    def address(self, src: Hashable, dst: Hashable) -> str:
        return f"{HOST}:{self.links[(src, dst)]}"

    def cut(self, a: Hashable, b: Hashable, fault: Fault = Fault.BLACKHOLE, one_way: bool = False) -> None:
        """Lose the bytes from `a` to `b`, and from `b` to `a` unless `one_way` (BLACKHOLE only)."""
        if one_way and fault is not Fault.BLACKHOLE:
            raise ValueError("a one-way cut is a blackhole: a reset ends the connection both ways")
        dirs = [(a, b)] if one_way else [(a, b), (b, a)]
        self._call(self._set(dirs, fault))

    def isolate(self, a: Hashable, others, fault: Fault = Fault.BLACKHOLE) -> None:
        """Cut `a` from each of `others`, both ways."""
        self._call(self._set([d for b in others for d in ((a, b), (b, a))], fault))

    def heal(self) -> None:
        """Every cut healed: held bytes flow again."""
        self._call(self._heal())

    def cut_now(self) -> dict[tuple[Hashable, Hashable], Fault]:
        return dict(self._blocked)

    def close(self) -> None:
        async def shut():
            for s in self._servers:
                s.close()
            for c in list(self._conns):
                for w in c.writers:
                    w.transport.abort()
            for t in asyncio.all_tasks():
                if t is not asyncio.current_task():
                    t.cancel()
        try:
            self._call(shut())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()

    # -- on the loop ----------------------------------------------------------------------------------
    async def _listen(self, src, dst, port: int) -> int:
        async def accepted(reader, writer):
            await self._serve(src, dst, port, reader, writer)
        server = await asyncio.start_server(accepted, HOST, 0)
        self._servers.append(server)
        return server.sockets[0].getsockname()[1]

    def _reset_between(self, src, dst) -> bool:
        return self._blocked.get((src, dst)) is Fault.RESET or self._blocked.get((dst, src)) is Fault.RESET

    async def _set(self, dirs, fault: Fault) -> None:
        async with self._changed:
            for d in dirs:
                self._blocked[d] = fault
            self._changed.notify_all()
        if fault is Fault.RESET:
            for c in list(self._conns):
                if self._reset_between(c.src, c.dst):
                    self._abort(c)

    async def _heal(self) -> None:
        async with self._changed:
            self._blocked.clear()
            self._changed.notify_all()

    async def _open(self, frm, to) -> None:
        """Until bytes may flow from `frm` to `to`."""
        if (frm, to) in self._blocked:
            async with self._changed:
                await self._changed.wait_for(lambda: (frm, to) not in self._blocked)

    def _abort(self, c: _Conn) -> None:
        self._conns.discard(c)
        for w in c.writers:
            sock = w.get_extra_info("socket")
            if sock is not None:
                try:  # SO_LINGER 0: the close sends RST
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                except OSError:
                    pass
            w.transport.abort()
        self.resets += 1

    async def _serve(self, src, dst, port: int, reader, writer) -> None:
        c = _Conn(src, dst, [writer])
        self._conns.add(c)
        if self._reset_between(src, dst):
            self._abort(c)
            return
        try:
            await self._open(src, dst)  # (a SYN across a blackhole is lost: the attempt hangs)
            await self._open(dst, src)
            if c not in self._conns:
                return
            up_reader, up_writer = await asyncio.open_connection(HOST, port)
        except OSError:
            self._abort(c)
            return
        c.writers.append(up_writer)
        if c not in self._conns:  # reset while connecting
            self._abort(c)
            return
        await asyncio.gather(self._pump(c, reader, up_writer, src, dst), self._pump(c, up_reader, writer, dst, src))
        self._conns.discard(c)
        for w in c.writers:
            w.close()

    async def _pump(self, c: _Conn, reader, writer, frm, to) -> None:
        try:
            while True:
                await self._open(frm, to)
                data = await reader.read(1 << 16)
                if not data:
                    break
                await self._open(frm, to)  # (read just as the cut began: held until it heals)
                if c not in self._conns:
                    return
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            if c in self._conns:
                try:
                    writer.write_eof() if writer.can_write_eof() else writer.close()
                except (ConnectionError, OSError, RuntimeError):
                    writer.close()
