"""Durability: the write-ahead log and snapshots under one data directory, and recovery.

    DIR/LOCK                   held (flock) by the one process that has the directory open (datadir.py)
    DIR/wal/<lsn>.wal          the log segments (wal.py)
    DIR/snapshots/<lsn>/       the newest complete snapshot (snapshot.py): the state through <lsn>

Every command the engine applied is appended to the log once per event-loop iteration (group
commit; the engine runs on the server's event loop, driver/). Under `--fsync always` a thread of
its own (the syncer) frames, writes and fdatasyncs each iteration's records and acknowledges them
only then, so the loop goes on while the disk works, and one sync covers every iteration written
meanwhile; under `interval` and `off` the loop writes them. A query may therefore reflect a write
whose sync is still in flight: that write has not been acknowledged, and a machine crash at that
moment loses it. Snapshots are taken
by log size and by time: the loop captures the state (references to immutable sub-windows,
copies of the small rest) and a background thread writes it; once it is complete, the log
segments and the snapshot it supersedes are deleted, so disk use follows the live windows, not
the history. Recovery restores the newest snapshot, then replays the log records after it.
"""
from __future__ import annotations

import logging
import os
import threading
import time

from windowstore.txn import commands
from windowstore.txn.engine import Engine

from . import datadir, snapshot
from .wal import Fsync, WriteAheadLog

log = logging.getLogger("windowstore.durability")


class Durability:
    def __init__(self, data_dir: str, fsync: str = "always", snapshot_every_bytes: int = 256 << 20,
                 snapshot_every_s: float = 300.0):
        self.dir = os.path.abspath(data_dir)
        # first of all: another process's log and snapshots are not ours to read, prune or delete
        self.lock = datadir.claim(self.dir)  # DataDirInUse (an OSError) if another process has it
        try:
            self.wal = WriteAheadLog(os.path.join(self.dir, "wal"), fsync)
            self.snapshots = snapshot.SnapshotWriter(os.path.join(self.dir, "snapshots"))
        except BaseException:
            self.lock.release()
            raise
        self.snapshot_every_bytes = snapshot_every_bytes
        self.snapshot_every_s = snapshot_every_s
        self._thread: threading.Thread | None = None
        self._bytes_at_snapshot = 0
        self._time_at_snapshot = time.monotonic()
        self.snapshots_taken = 0
        self.snapshot_lsn = 0           # the newest complete snapshot's
        self.last_capture_ms = 0.0      # loop pause to capture the state for the last snapshot
        self.max_capture_ms = 0.0
        self.snapshot_error: str | None = None
        self._syncer = Syncer(self.wal) if fsync == Fsync.ALWAYS else None
        # A snapshot waits while a slide is being sealed, but not for ever: with several streams
        # ingesting, one may always be in flight. Once one has waited this long the driver seals
        # those in flight on the loop (snapshot_overdue) so that it can be taken.
        self.snapshot_wait_s = 2.0
        self._due_since: float | None = None

    # -- recovery --------------------------------------------------------------------------------
    def recover(self, engine: Engine, replay=None) -> dict:
        """Bring the (empty) engine to the last durable state; returns what was done. `replay(cmd)`:
        whether to replay a record of the log (default all; replication's filter, recovery.py)."""
        path = snapshot.latest(self.snapshots.dir)
        lsn = 0
        if path is not None:
            image, lsn, subwindow = snapshot.read(path)
            restored = []

            def load(window, meta):
                sub = subwindow(window, meta)
                restored.append((sub, meta["file"]))
                return sub
            engine.restore(image, load)
            self.snapshots.adopt(path, image, restored)
        self.snapshot_lsn = lsn
        self.snapshots.prune(lsn)
        replayed = 0
        for _, payload in self.wal.recover(lsn):
            cmd = commands.decode(payload)
            if replay is not None and not replay(cmd):
                continue
            engine.replay(cmd)
            replayed += 1
        engine.drain()
        rows = sum(sub.rows for s in engine.sched.streams.values() for sub in s.window.youngest(s.window.n))
        return {"snapshot_lsn": lsn, "replayed": replayed, "next_lsn": self.wal.next_lsn,
                "streams": len(engine.sched.streams), "rows": rows}

    # -- logging ---------------------------------------------------------------------------------
    def log(self, cmds: list, engine: Engine, on_durable) -> None:
        """Append the commands and write them; `on_durable(error)` is called once they (and every
        command before them) are as durable as the fsync policy says: under `always` by the syncer
        thread after its fdatasync, otherwise now. Maybe start a snapshot. Raises OSError
        (WalFailed) when the log cannot be written."""
        for cmd in cmds:
            self.wal.append(*commands.encode_parts(cmd))
        if self._syncer is not None:
            self._syncer.write(self.wal.take(), on_durable)
        else:
            self.wal.flush()
            on_durable(None)
        # Log since the last snapshot, against the larger of the setting and that snapshot's size (as
        # Redis rewrites its append-only file once it has doubled): a snapshot of a large window
        # every 256 MB of log wrote the open buffer and each sealed sub-window again and again (at
        # 9 M rows/s, one per second: 17% of the ingest rate), while replay is bounded all the same,
        # by no more log than the state it adds to. A snapshot waits while a slide is being sealed
        # (its Slide is logged, its sub-window not yet in the state): the next flush takes it.
        if not self._snapshot_due():
            return
        if engine.sealing:
            if self._due_since is None:
                self._due_since = time.monotonic()
            return
        self.snapshot(engine, wait=False)

    def _snapshot_due(self) -> bool:
        written = self.wal.bytes_written - self._bytes_at_snapshot
        return bool(written) and (written >= max(self.snapshot_every_bytes, self.snapshots.held_bytes)
                                  or time.monotonic() - self._time_at_snapshot >= self.snapshot_every_s)

    def snapshot_overdue(self) -> bool:
        """A snapshot has waited snapshot_wait_s for the seals in flight (see __init__)."""
        return self._due_since is not None and time.monotonic() - self._due_since >= self.snapshot_wait_s

    def snapshot(self, engine: Engine, wait: bool) -> bool:
        """Capture the state now and write it (in the background unless `wait`). False when a
        snapshot is still being written."""
        if self._thread is not None and self._thread.is_alive():
            if not wait:
                return False
            self._thread.join()
        t0 = time.perf_counter()
        self._due_since = None
        lsn = self.wal.next_lsn - 1
        if lsn == self.snapshot_lsn:
            return True  # the newest snapshot holds this very state (every change is a logged command)
        image = engine.capture()
        self.wal.start_new_segment()
        self.last_capture_ms = (time.perf_counter() - t0) * 1000
        self.max_capture_ms = max(self.max_capture_ms, self.last_capture_ms)
        self._bytes_at_snapshot = self.wal.bytes_written
        self._time_at_snapshot = time.monotonic()
        self._thread = threading.Thread(target=self._write, args=(image, lsn), name="windowstore-snapshot",
                                        daemon=True)
        self._thread.start()
        if wait:
            self._thread.join()
        return True

    def _write(self, image: dict, lsn: int) -> None:
        try:
            self.snapshots.write(image, lsn)
            self.snapshot_lsn = lsn
            self.wal.delete_through(lsn)
            self.snapshots.prune(lsn)
            self.snapshots_taken += 1
            self.snapshot_error = None
        except OSError as e:  # the log still holds everything: try again at the next one
            self.snapshot_error = str(e)
            log.error("snapshot at lsn %d failed (the log keeps everything): %s", lsn, e)

    def close(self, engine: Engine | None) -> None:
        """A clean shutdown: a final snapshot (quick restart) unless writes had failed or a stream
        stopped with a slide it could not seal (the log keeps it, and replay seals it again). The
        directory's lock is released last."""
        if self._syncer is not None:
            self._syncer.stop()
        try:
            snapshot = engine is not None and not self.wal.failed
            if snapshot:
                self.wal.flush()
                self.wal.sync()
                snapshot = not engine.sealing  # type: ignore[union-attr]  # snapshot: there is an engine
            if snapshot:
                self.snapshot(engine, wait=True)  # type: ignore[arg-type]  # snapshot: there is an engine
                self.wal.roll()  # an empty new segment: the covered ones are deleted whole
                self.wal.delete_through(self.wal.next_lsn - 1)
            elif self._thread is not None:
                self._thread.join()
        finally:
            try:
                self.wal.close()
            finally:
                self.lock.release()


class Syncer:
    """Group commit off the event loop: takes each iteration's records, frames and writes them, then
    fdatasyncs once for every iteration written meanwhile and tells each (in order) that it is durable,
    or that the log failed. The loop only numbers records; checksums, writes and syncs happen
    here. What waits here is bounded by what the loop may hold: writes not yet durable (--max-pending) and
    one iteration per sync."""

    def __init__(self, wal: WriteAheadLog):
        self.wal = wal
        self._waiting: list = []
        self._cv = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="windowstore-syncer", daemon=True)
        self._thread.start()

    def write(self, records: list, callback) -> None:
        """Write `records` (from wal.take(), in lsn order) after those handed over before, then
        call `callback(error)` once they are on disk (error None)."""
        with self._cv:
            self._waiting.append((records, callback))
            self._cv.notify()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._waiting and not self._stopping:
                    self._cv.wait()
                if not self._waiting:
                    return
                batch, self._waiting = self._waiting, []
            error = None
            try:
                for records, _ in batch:
                    self.wal.write(records)
                self.wal.sync()  # one sync for every turn of the batch
            except OSError as e:
                error = str(e)
            for _, callback in batch:
                try:
                    callback(error)
                except Exception:  # noqa: BLE001 - one caller's failure must not stop the others' acks
                    log.exception("acknowledging a durable write failed")

    def stop(self) -> None:
        """Sync and acknowledge what is waiting, then end the thread."""
        with self._cv:
            self._stopping = True
            self._cv.notify()
        self._thread.join()
