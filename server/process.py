"""Runs a real `windowstore serve` process on a free loopback port: tests, benchmarks, the load test
and the demo use it."""
from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import sys
import threading

# how much of each of the server's output pipes is kept for stop() to return (the last of it)
KEEP_BYTES = 8 << 20


class PipeTail:
    """A child's output pipe read to its end on a thread of its own, the last `keep_bytes` of it
    kept. A pipe nobody reads fills (64 KiB on Linux) and the child blocks in its next write: for a
    server, in its logging, and with it its event loop (with `--client-error-log-limit 0` every
    refused call is a line: a writer backing off a full stream fills a pipe in a few hundred)."""

    def __init__(self, pipe, name: str, keep_bytes: int = KEEP_BYTES):
        self.lines = 0  # lines read so far
        self._kept: collections.deque[str] = collections.deque()
        self._bytes = 0
        self._keep = keep_bytes
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, args=(pipe,), name=name, daemon=True)
        self._thread.start()

    def _read(self, pipe) -> None:
        try:
            for line in pipe:
                with self._lock:
                    self._kept.append(line)
                    self._bytes += len(line)
                    self.lines += 1
                    while self._bytes > self._keep and len(self._kept) > 1:
                        self._bytes -= len(self._kept.popleft())
        except (ValueError, OSError):  # the pipe closed under the reader
            pass

    def tail(self, n: int) -> list[str]:
        """The last `n` lines kept, without their line ends."""
        with self._lock:
            return [line.rstrip("\n") for line in list(self._kept)[-n:]] if n > 0 else []

    def text(self) -> str:
        with self._lock:
            return "".join(self._kept)

    def join(self, timeout: float) -> bool:
        """Wait until the pipe's end of file (the child and whatever inherited the pipe are gone);
        False if it did not come within `timeout` seconds."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _check(self) -> None:
        with self._lock:
            assert self._bytes == sum(len(line) for line in self._kept)
            assert self._bytes <= self._keep or len(self._kept) == 1
            assert self.lines >= len(self._kept)


class ServerProcess:
    """`windowstore serve` on a free port. Without `data_dir` (and no --data-dir in args) it runs
    --in-memory; with one, it is durable there and can be killed and started again on it."""

    # how the server is started (before --port and `args`): `windowstore serve`
    SERVE = ("-m", "windowstore.server.cli", "serve")

    def __init__(self, *args: str, data_dir: str | None = None, port: int = 0, serve: tuple[str, ...] = SERVE):
        """`serve`: another entry point that runs `windowstore serve` (an instrumented one: a
        benchmark's), given the same --port and arguments."""
        if data_dir is not None:
            args = ("--data-dir", data_dir, *args)
        elif "--data-dir" not in args:
            args = ("--in-memory", *args)
        self.args = args
        self.proc = subprocess.Popen(
            [sys.executable, *serve, "--port", str(port), *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        line = self.proc.stdout.readline()  # type: ignore[union-attr]  # stdout=PIPE
        self.banner = line
        m = re.search(r"serving on (\S+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"server did not start: {line!r} {self.proc.stderr.read()}")  # type: ignore[union-attr]  # stderr=PIPE
        self.target = m.group(1)
        # both pipes read from now on (stop() returns what they said; a full pipe would block the server)
        self.stdout = PipeTail(self.proc.stdout, f"server-{self.proc.pid}-stdout")
        self.stderr = PipeTail(self.proc.stderr, f"server-{self.proc.pid}-stderr")

    def stop(self, sig=signal.SIGTERM, timeout: float = 20.0) -> tuple[int, str, str]:
        """Signal the server, wait for it (killed after `timeout` s) and return its exit code and
        what it wrote to stdout and stderr (the banner line excepted; the last KEEP_BYTES of each)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.proc.returncode, *self.output()

    def output(self, timeout: float = 10.0) -> tuple[str, str]:
        """What the server wrote to stdout and stderr (the banner line excepted; the last KEEP_BYTES
        of each), once each pipe's end of file came (after `timeout` s each: what was read so far,
        as when a child of the server still holds the pipe open)."""
        for pipe in (self.stdout, self.stderr):
            pipe.join(timeout)
        return self.stdout.text(), self.stderr.text()

    def cpu_seconds(self) -> float:
        """The server's CPU time so far (user + system, all its threads), seconds."""
        return cpu_seconds(self.proc.pid)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def cpu_seconds(pid: int) -> float:
    """A process's CPU time so far (user + system, all threads), seconds (Linux: /proc/PID/stat's
    utime and stime, fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_ports(n: int) -> list[int]:
    """`n` loopback ports free now (bound together, then released): for a cluster file that lists
    its servers' addresses before they start."""
    import socket

    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()
