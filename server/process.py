"""Runs a real `windowstore serve` process on a free loopback port: tests, benchmarks, the load test
and the demo use it."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys


class ServerProcess:
    """`windowstore serve` on a free port. Without `data_dir` (and no --data-dir in args) it runs
    --in-memory; with one, it is durable there and can be killed and started again on it."""

    def __init__(self, *args: str, data_dir: str | None = None, port: int = 0):
        if data_dir is not None:
            args = ("--data-dir", data_dir, *args)
        elif "--data-dir" not in args:
            args = ("--in-memory", *args)
        self.args = args
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "windowstore.server.cli", "serve", "--port", str(port), *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        line = self.proc.stdout.readline()  # type: ignore[union-attr]  # stdout=PIPE
        self.banner = line
        m = re.search(r"serving on (\S+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"server did not start: {line!r} {self.proc.stderr.read()}")  # type: ignore[union-attr]  # stderr=PIPE
        self.target = m.group(1)

    def stop(self, sig=signal.SIGTERM, timeout: float = 20.0) -> tuple[int, str, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        return self.proc.returncode, out, err

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
