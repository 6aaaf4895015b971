"""The write-ahead log: commands framed in segment files, appended and synced in groups.

Layout: `DIR/<first lsn, 20 digits>.wal`, each starting with an 8-byte magic, then records:

    u32 length | u32 crc32c(lsn + payload) | u64 lsn | payload (an encoded command)

Segments written before the checksum became CRC-32C (magic `WSWAL01`, zlib's CRC-32) are still read.

LSNs are consecutive from 1. `append` buffers records into the open segment with one write;
`sync` makes them durable (fsync): once per event-loop iteration for every command the iteration
applied (group commit); writes are acknowledged only after it returned (`--fsync always`).

Recovery (`read`) checks every record. A damaged record with nothing valid after it in the last
segment is a torn tail (a crash in the middle of a write, never acknowledged): it is truncated with
a warning. Damage anywhere else stops start-up with an error naming the file and offset: nothing
acknowledged is dropped silently.

Any error while writing or syncing raises WalFailed; the caller must then stop acknowledging
writes (retrying an fsync after a failure is not safe: PostgreSQL's fsyncgate).
"""
from __future__ import annotations

import enum
import logging
import os
import struct
import threading
import time
import zlib
from dataclasses import dataclass
from typing import Callable, Iterator

import crc32c as _crc32c

log = logging.getLogger("windowstore.wal")

MAGIC = b"WSWAL02\n"      # records checked by CRC-32C
MAGIC_V1 = b"WSWAL01\n"   # records checked by zlib's CRC-32: read, never written
_REC = struct.Struct("<IIQ")


class Fsync(enum.StrEnum):
    """When the log reaches the disk (--fsync): before a write is acknowledged, about every
    interval_s, or when the OS decides."""

    ALWAYS = "always"
    INTERVAL = "interval"
    OFF = "off"


FSYNC_POLICIES = tuple(Fsync)
MAX_RECORD = 1 << 31


class WalFailed(OSError):
    """Writing or syncing the log failed; nothing after the last successful sync is durable."""


class WalCorrupt(Exception):
    """A damaged record that is not a torn tail: start-up stops."""


def crc32c(data, crc: int = 0) -> int:
    """CRC-32C of `data` (any buffer) continuing `crc`: the log's and the snapshots' checksum.

    With the CPU's CRC instruction it runs several times faster than zlib's CRC-32, and every
    Append is checked twice (its log record, then its sealed sub-window's snapshot file), so it
    shows in ingest under --fsync always (docs/bench-history.md). It releases the GIL for large
    buffers."""
    return _crc32c.crc32c(data, crc)


Checksum = Callable[..., int]
CHECKSUMS: dict[bytes, Checksum] = {MAGIC: crc32c, MAGIC_V1: zlib.crc32}  # a segment's magic -> its records' checksum


def _crc(lsn: int, parts, checksum: Checksum = crc32c) -> int:
    """The checksum of the lsn and the payload, the payload given as consecutive parts."""
    crc = checksum(struct.pack("<Q", lsn))
    for part in parts:
        crc = checksum(part, crc)
    return crc


def drop_cached(fd: int) -> None:
    """Let the kernel reuse the pages of a file written and synced: the log and snapshots are read
    again only at start-up. Without it each new log page is memory the process never touched, and on this VM
    (free page reporting) such a page costs ~10x the copy that fills it; measured with 3 writers of
    10^5-row batches and --fsync always: 4.4-4.8 -> 5.6-5.9 M rows/s, kernel time per Append 23-25
    -> 15-19 ms. Advice only: a file system that refuses it changes nothing."""
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except (OSError, AttributeError):  # (no posix_fadvise on this platform)
        pass


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class Segment:
    first_lsn: int
    path: str


def segments(directory: str) -> list[Segment]:
    out = []
    for name in os.listdir(directory):
        if name.endswith(".wal") and name[:-4].isdigit():
            out.append(Segment(int(name[:-4]), os.path.join(directory, name)))
    return sorted(out, key=lambda s: s.first_lsn)


def read(directory: str) -> Iterator[tuple[int, memoryview]]:
    """Every record, in order; truncates a torn tail, raises WalCorrupt on damage elsewhere and
    on a gap in the LSNs."""
    segs = segments(directory)
    expected = None
    for i, seg in enumerate(segs):
        last = i == len(segs) - 1
        with open(seg.path, "rb") as f:
            data = f.read()
        checksum = CHECKSUMS.get(bytes(data[:len(MAGIC)]))
        if checksum is None:
            if last and len(data) < len(MAGIC) and MAGIC.startswith(data):
                log.warning("%s: incomplete new segment (%d bytes): removed", seg.path, len(data))
                os.remove(seg.path)
                return
            raise WalCorrupt(f"{seg.path}: offset 0: not a windowstore log segment")
        view = memoryview(data)
        off = len(MAGIC)
        if expected is not None and seg.first_lsn != expected:
            raise WalCorrupt(f"{seg.path}: offset 0: starts at lsn {seg.first_lsn}, expected {expected}")
        expected = seg.first_lsn
        while off < len(data):
            problem = _check_record(view, off, expected, checksum)
            if problem is None:
                n, _, lsn = _REC.unpack_from(view, off)
                yield lsn, view[off + _REC.size: off + _REC.size + n]
                off += _REC.size + n
                expected += 1
                continue
            if last and not _valid_record_after(data, off, expected, checksum):
                log.warning("%s: torn tail at offset %d (%s): truncated %d bytes", seg.path, off, problem,
                            len(data) - off)
                with open(seg.path, "r+b") as f:
                    f.truncate(off)
                    f.flush()
                    os.fsync(f.fileno())
                return
            raise WalCorrupt(f"{seg.path}: offset {off}: damaged record (lsn {expected}: {problem})")


def records_after(directory: str, after: int) -> Iterator[tuple[int, memoryview]]:
    """The records after lsn `after` as the segments hold them now, unchecked (read back while the
    log is open, e.g. to ship them: recovery has checked them); stops at one still being written."""
    segs = segments(directory)
    start = 0
    for i, seg in enumerate(segs):
        if seg.first_lsn <= after + 1:
            start = i
    for seg in segs[start:]:
        with open(seg.path, "rb") as f:
            data = f.read()
        off, view = len(MAGIC), memoryview(data)
        while off + _REC.size <= len(data):
            n, _, lsn = _REC.unpack_from(view, off)
            if off + _REC.size + n > len(data):
                return
            if lsn > after:
                yield lsn, view[off + _REC.size: off + _REC.size + n]
            off += _REC.size + n


def _check_record(view: memoryview, off: int, expected: int, checksum: Checksum) -> str | None:
    if off + _REC.size > len(view):
        return "incomplete header"
    n, crc, lsn = _REC.unpack_from(view, off)
    if lsn != expected:
        return f"lsn {lsn}"
    if off + _REC.size + n > len(view):
        return "incomplete record"
    if _crc(lsn, (view[off + _REC.size: off + _REC.size + n],), checksum) != crc:
        return "checksum mismatch"
    return None


def _valid_record_after(data: bytes, off: int, lsn: int, checksum: Checksum) -> bool:
    """Is there a valid record with a later LSN after a damaged one? Then the damage is not a
    torn tail. LSNs are consecutive, so the next record carries lsn + 1."""
    needle = struct.pack("<Q", lsn + 1)
    pos = data.find(needle, off + 1)
    view = memoryview(data)
    while pos != -1:
        start = pos - 8
        if start > off and _check_record(view, start, lsn + 1, checksum) is None:
            return True
        pos = data.find(needle, pos + 1)
    return False


class WriteAheadLog:
    def __init__(self, directory: str, fsync: str = "always", segment_bytes: int = 64 << 20,
                 interval_s: float = 1.0):
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"fsync policy is one of {', '.join(FSYNC_POLICIES)}")
        os.makedirs(directory, exist_ok=True)
        self.directory = directory
        self.policy = Fsync(fsync)
        self.segment_bytes = segment_bytes
        self.interval_s = interval_s
        self.next_lsn = 1
        self.written_lsn = 0       # the last record handed to the OS (write)
        self.synced_lsn = 0        # the last record known to be on disk (fdatasync)
        self._fd_lock = threading.Lock()  # a sync on another thread vs rotating or closing the fd
        self._fd: int | None = None
        self._size = 0
        self._pending: list[tuple[int, tuple]] = []  # (lsn, payload parts) appended, not yet written
        self._last_sync = time.monotonic()
        self.failed: str | None = None
        self.bytes_written = 0
        self._new_segment = False   # the next flush starts a segment (after a snapshot)

    def recover(self, after_lsn: int = 0) -> Iterator[tuple[int, memoryview]]:
        """Records after `after_lsn` (what the snapshot covers), then positions the log after the
        last record on disk."""
        last = after_lsn
        segs = segments(self.directory)
        if segs and segs[0].first_lsn > after_lsn + 1:
            raise WalCorrupt(f"{segs[0].path}: offset 0: the log starts at lsn {segs[0].first_lsn} but the "
                             f"snapshot covers only through lsn {after_lsn}")
        for lsn, payload in read(self.directory):
            last = max(last, lsn)
            if lsn > after_lsn:
                yield lsn, payload
        self.next_lsn = last + 1
        self.synced_lsn = self.written_lsn = last
        # A segment holding no record (made by a clean shutdown's roll, or a crash right after a
        # rotation) would clash with the segment the next write opens: it goes.
        segs = segments(self.directory)
        if segs and segs[-1].first_lsn >= self.next_lsn:
            for seg in segs:
                if seg.first_lsn >= self.next_lsn:
                    os.remove(seg.path)
            fsync_dir(self.directory)

    # -- writing -----------------------------------------------------------------------------------
    def append(self, *parts: bytes) -> int:
        """Number one record, its payload the parts one after the other (framed and written by the
        next write, without joining them: a batch's bytes are written where they are); returns
        its lsn."""
        size = sum(len(p) for p in parts)
        if size >= MAX_RECORD:
            raise ValueError(f"a log record of {size} bytes is too large")
        lsn = self.next_lsn
        self.next_lsn += 1
        self._pending.append((lsn, parts))
        return lsn

    def take(self) -> list[tuple[int, tuple]]:
        """The records appended since the last take or write, to be written (elsewhere) in order."""
        records, self._pending = self._pending, []
        return records

    def flush(self) -> None:
        """Write the pending records (one write), then fsync as the policy says."""
        self.write()
        if self.policy == Fsync.ALWAYS or (self.policy == Fsync.INTERVAL and time.monotonic() - self._last_sync >= self.interval_s):
            self.sync()

    def write(self, records: list[tuple[int, tuple]] | None = None) -> int:
        """Frame (crc) and write records in one writev, without syncing: `records` from take(), or
        the pending ones. Framing happens here so that a writer thread, not the appender, pays for
        the checksum of large batches (crc32c releases the GIL for it). Returns the last lsn written."""
        self._raise_if_failed()
        if records is None:
            records = self.take()
        if records:
            first = records[0][0]
            parts = []
            for lsn, payload in records:
                parts.append(_REC.pack(sum(len(p) for p in payload), _crc(lsn, payload), lsn))
                parts.extend(payload)  # written as they are (writev): a batch's bytes are not copied again
            size = sum(len(p) for p in parts)
            try:
                if self._fd is None or self._size >= self.segment_bytes or self._new_segment:
                    self._rotate(first)
                    self._new_segment = False
                write_all(self._fd, parts)  # type: ignore[arg-type]  # _rotate() opened one
            except OSError as e:
                self._fail(f"writing the log failed: {e}")
            self._size += size
            self.bytes_written += size
            self.written_lsn = records[-1][0]
        return self.written_lsn

    def sync(self) -> int:
        """fdatasync what was written; returns the last lsn now on disk. Safe to call from another
        thread than the writer's (the group-commit syncer does): records written after it started
        are left for the next sync."""
        self._raise_if_failed()
        target = self.written_lsn
        if target > self.synced_lsn:
            with self._fd_lock:
                try:
                    if self._fd is not None:
                        os.fdatasync(self._fd)
                        drop_cached(self._fd)
                except OSError as e:
                    self._fail(f"fsync of the log failed: {e}")
            self.synced_lsn = max(self.synced_lsn, target)
        self._last_sync = time.monotonic()
        return self.synced_lsn

    @property
    def durable(self) -> bool:
        """Is every record appended so far on disk?"""
        return self.synced_lsn >= self.next_lsn - 1

    def roll(self) -> None:
        """Start the next segment now (a clean shutdown after its final snapshot)."""
        self.flush()
        try:
            self._rotate(self.next_lsn)
        except OSError as e:
            self._fail(f"starting a log segment failed: {e}")
        self._new_segment = False

    def start_new_segment(self) -> None:
        """Records from the next flush on go to a new segment, so the ones a snapshot covers can
        be deleted whole (no extra sync now: the next flush does it)."""
        self._new_segment = True

    def _rotate(self, first_lsn: int) -> None:
        if self._fd is not None:
            with self._fd_lock:  # the old segment is on disk before the log moves on from it
                os.fdatasync(self._fd)
                drop_cached(self._fd)
                os.close(self._fd)
                self._fd = None
        path = os.path.join(self.directory, f"{first_lsn:020d}.wal")
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        write_all(self._fd, MAGIC)
        os.fdatasync(self._fd)
        fsync_dir(self.directory)
        self._size = len(MAGIC)

    def delete_through(self, lsn: int) -> int:
        """Delete segments whose every record is <= lsn (a snapshot covers them); returns how many."""
        segs = segments(self.directory)
        gone = 0
        for seg, nxt in zip(segs, segs[1:]):
            if nxt.first_lsn <= lsn + 1:
                os.remove(seg.path)
                gone += 1
        if gone:
            fsync_dir(self.directory)
        return gone

    def truncate_after(self, lsn: int) -> int:
        """Remove every record after `lsn` from the disk (a replica's log truncated to its leader's:
        server/replication/); the next record is lsn + 1, in a new segment. Returns how many went."""
        self.flush()
        self.sync()
        with self._fd_lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
        gone = max(0, self.next_lsn - 1 - lsn)
        for seg in segments(self.directory):
            if seg.first_lsn > lsn:
                os.remove(seg.path)
                continue
            with open(seg.path, "rb") as f:
                data = f.read()
            off, view = len(MAGIC), memoryview(data)
            while off + _REC.size <= len(data):
                n, _, rec_lsn = _REC.unpack_from(view, off)
                if rec_lsn > lsn:
                    with open(seg.path, "r+b") as f:
                        f.truncate(off)
                        os.fsync(f.fileno())
                    break
                off += _REC.size + n
        fsync_dir(self.directory)
        self.next_lsn = lsn + 1
        self.written_lsn = self.synced_lsn = lsn
        self._new_segment = True
        return gone

    def close(self) -> None:
        if self._fd is not None:
            try:
                if not self.failed:
                    self.flush()
                    self.sync()
            finally:
                with self._fd_lock:
                    os.close(self._fd)
                    self._fd = None

    def _raise_if_failed(self) -> None:
        if self.failed:
            raise WalFailed(self.failed)

    def _fail(self, reason: str) -> None:
        self.failed = reason
        log.error("%s: the store stops acknowledging writes", reason)
        raise WalFailed(reason)


def write_all(fd: int, data: bytes | bytearray | memoryview | list[bytes]) -> None:
    """Write everything (os.writev for a list of buffers, 1024 at a time; partial writes go on)."""
    parts = [memoryview(data)] if isinstance(data, (bytes, bytearray, memoryview)) else [memoryview(p) for p in data]
    parts = [p for p in parts if len(p)]  # an empty buffer would make writev return 0 for ever
    i = 0
    while i < len(parts):
        n = os.writev(fd, parts[i:i + 1024])
        while n and i < len(parts):
            if n >= len(parts[i]):
                n -= len(parts[i])
                i += 1
            else:
                parts[i] = parts[i][n:]
                n = 0
