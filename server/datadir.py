"""Ownership of a data directory: one process at a time.

Two servers on one directory each write log segments and snapshots there, and each deletes what
its own snapshot supersedes, the other's acknowledged writes included. So a process takes an
exclusive `flock` on DIR/LOCK (as RocksDB's LOCK and PostgreSQL's postmaster.pid) before it reads
or writes anything else in the directory, writes its pid there for the message another gets, and
holds it until it closes the directory or exits; the kernel releases it when the process dies, so
a restart after kill -9 takes it again. The file itself stays: deleting it would let a process
that opened the old file and one that creates a new one both hold "the" lock.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading

LOCK_NAME = "LOCK"


class DataDirInUse(OSError):
    """Another process holds the directory's lock."""

    def __init__(self, directory: str, pid: int | None):
        self.directory, self.pid = directory, pid
        holder = f"pid {pid}" if pid is not None else "pid unknown"
        super().__init__(errno.EWOULDBLOCK, f"data directory {directory} is in use by another process ({holder})")


class DataDirLock:
    """A held lock on a data directory; `created` is the top directory made to take it (None if
    the directory existed), for a start-up that fails to remove again."""

    def __init__(self, directory: str, fd: int, created: str | None):
        self._fd: int | None
        self.dir, self._fd, self.created = directory, fd, created

    @classmethod
    def acquire(cls, directory: str) -> "DataDirLock":
        """Create the directory if need be and lock it; DataDirInUse if another process holds it
        (then nothing in it has changed)."""
        path = os.path.abspath(directory)
        created = None
        top = path
        while not os.path.lexists(top):
            created, top = top, os.path.dirname(top)
        os.makedirs(path, exist_ok=True)
        fd = os.open(os.path.join(path, LOCK_NAME), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            raise DataDirInUse(path, pid) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, created)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Unlock (idempotent); the pid is cleared first, the file stays (see the module)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass
        os.close(fd)  # closing the only descriptor releases the flock


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    except OSError:
        return None


# A lock start-up took before building the server, for the Durability the server's driver then
# opens on the same directory (a second descriptor in this process would be refused like any other).
_handed: dict[str, DataDirLock] = {}
_handed_mutex = threading.Lock()


@contextlib.contextmanager
def handed_over(lock: DataDirLock):
    """Within the block, `claim(lock.dir)` returns `lock` (once) instead of taking a new one."""
    with _handed_mutex:
        _handed[lock.dir] = lock
    try:
        yield
    finally:
        with _handed_mutex:
            if _handed.get(lock.dir) is lock:
                del _handed[lock.dir]


def claim(directory: str) -> DataDirLock:
    """The lock of `directory`: the one handed over for it, else a new one (DataDirInUse if held)."""
    path = os.path.abspath(directory)
    with _handed_mutex:
        lock = _handed.pop(path, None)
    return lock if lock is not None else DataDirLock.acquire(path)
