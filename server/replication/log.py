"""A partition's replica log: every command of one replicated stream, in order, numbered by offset
(1, 2, ...) the same on every replica, each stamped with the epoch of the leader that wrote it.

On disk it is a write-ahead log of its own (`DIR/replicas/<stream>/`, wal.py's segments, framing
and checksums) whose record payload is `u64 epoch (little-endian) | the command's encoding`
(txn/commands.py): the existing command log, plus the epoch. The offset is the record's lsn.

The epochs seen, as (epoch, first offset) in order, answer Kafka's leader-epoch question (KIP-101):
where did a follower's last epoch end on this log? A follower truncates its log there before it
fetches. Records of the newest few megabytes are kept in memory for followers that are caught up;
an older offset is read from the segments.
"""
from __future__ import annotations

import collections
import os
import struct
import threading
from dataclasses import dataclass
from typing import Iterator

from .. import wal as walmod
from ..wal import WriteAheadLog

_EPOCH = struct.Struct("<Q")
TAIL_BYTES = 32 << 20


@dataclass(frozen=True)
class Record:
    offset: int
    epoch: int
    command: bytes   # commands.encode(cmd)

    def payload(self) -> bytes:
        return _EPOCH.pack(self.epoch) + self.command

    @classmethod
    def of(cls, offset: int, payload: bytes | memoryview) -> "Record":
        return cls(offset, _EPOCH.unpack_from(payload, 0)[0], bytes(payload[_EPOCH.size:]))


class ReplicaLog:
    """One partition's log. Appends and truncation come from one thread at a time (the leader's
    event loop, or the follower's fetch thread); reads of the tail may come from the loop."""

    def __init__(self, directory: str, fsync: str = "always"):
        self.directory = directory
        self.wal = WriteAheadLog(directory, fsync)
        self.epochs: list[tuple[int, int]] = []  # (epoch, first offset), epochs increasing
        self.end = 0                              # the last offset held
        self._tail: collections.deque[Record] = collections.deque()
        self._tail_bytes = 0
        self._lock = threading.Lock()

    def recover(self) -> Iterator[Record]:
        """Every record on disk, in order (the caller replays them); then the log appends after them."""
        for lsn, payload in self.wal.recover(0):
            rec = Record.of(lsn, payload)
            self._note(rec)
            yield rec

    @property
    def last_epoch(self) -> int:
        return self.epochs[-1][0] if self.epochs else 0

    def _note(self, rec: Record) -> None:
        if not self.epochs or self.epochs[-1][0] != rec.epoch:
            if self.epochs and rec.epoch < self.epochs[-1][0]:
                raise ValueError(f"offset {rec.offset}: epoch {rec.epoch} after epoch {self.epochs[-1][0]}")
            self.epochs.append((rec.epoch, rec.offset))
        self.end = rec.offset
        with self._lock:
            self._tail.append(rec)
            self._tail_bytes += len(rec.command)
            while self._tail_bytes > TAIL_BYTES and len(self._tail) > 1:
                self._tail_bytes -= len(self._tail.popleft().command)

    def append(self, epoch: int, command: bytes) -> Record:
        """Number a record (written by the next write()); returns it."""
        rec = Record(self.wal.next_lsn, epoch, command)
        lsn = self.wal.append(rec.payload())
        assert lsn == rec.offset
        self._note(rec)
        return rec

    def end_of_epoch(self, epoch: int) -> int:
        """The last offset this log holds of epochs <= `epoch` (KIP-101's OffsetForLeaderEpoch): a
        follower whose last record is of `epoch` keeps its records through here."""
        for e, first in self.epochs:
            if e > epoch:
                return first - 1
        return self.end

    def truncate_after(self, offset: int) -> int:
        """Drop every record after `offset`; returns how many went."""
        if offset >= self.end:
            return 0
        gone = self.wal.truncate_after(offset)
        self.end = offset
        self.epochs = [(e, first) for e, first in self.epochs if first <= offset]
        with self._lock:
            while self._tail and self._tail[-1].offset > offset:
                self._tail_bytes -= len(self._tail.pop().command)
        return gone

    def read(self, after: int, max_bytes: int = 4 << 20) -> list[Record]:
        """Records after offset `after`, up to about max_bytes (at least one, if any)."""
        out: list[Record] = []
        size = 0
        with self._lock:
            tail_start = self._tail[0].offset if self._tail else self.end + 1
            if after + 1 >= tail_start:
                for rec in list(self._tail)[after + 1 - tail_start:]:
                    if out and size + len(rec.command) > max_bytes:
                        break
                    out.append(rec)
                    size += len(rec.command)
                return out
        for rec in self.read_disk(after):
            if (out and size + len(rec.command) > max_bytes) or rec.offset > self.end:
                break
            out.append(rec)
            size += len(rec.command)
        return out

    def read_disk(self, after: int, through: int | None = None) -> Iterator[Record]:
        """Records after `after` (through `through`) from the segments: those written so far."""
        for lsn, payload in walmod.records_after(self.directory, after):
            if through is not None and lsn > through:
                return
            yield Record.of(lsn, payload)

    def close(self) -> None:
        self.wal.close()

    def remove(self) -> None:
        """Close and delete the log (its partition left this server)."""
        self.close()
        for seg in walmod.segments(self.directory):
            os.remove(seg.path)
