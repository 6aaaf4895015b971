"""Snapshots: the engine's captured state (Engine.capture) on disk, written atomically.

    snapshots/<lsn>/state.json        streams, window counters, idempotency tables, periodic
                                      queries and their answer logs, each sealed sub-window's declared
                                      sketches (base64: restored as built, store/sketch_columns.py),
                                      and a CRC-32C of every file below
                                      (format 2; format 1, still read, kept zlib's CRC-32)
    snapshots/<lsn>/s<i>/sw-<slide>.arrow   a sealed sub-window (Arrow IPC; its metadata in the schema)
    snapshots/<lsn>/s<i>/strings.arrow      the string dictionary (code = row number)
    snapshots/<lsn>/s<i>/buffer.arrow       the open buffer, one record batch per appended chunk
    snapshots/<lsn>/s<i>/slot-<n>.arrow     event time: an open sub-window's rows
    snapshots/<lsn>/s<i>/staged-<n>.arrow   rows one task attempt staged for an uncommitted batch

A snapshot is written into `<lsn>.tmp/`, every file fsynced, then renamed to `<lsn>/` and the
directory fsynced: a crash leaves either the old snapshot or the new one, never half of one.
Sealed sub-windows are immutable, so a sub-window already in the previous snapshot is hard-linked,
not written again. `<lsn>` is the last log record the snapshot reflects.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import zlib
from typing import Callable

import numpy as np
import pyarrow as pa

from windowstore.store import sketch_columns
from windowstore.store.schema import valid_key
from windowstore.store.window import Window
from windowstore.txn.answers import to_plain

from .wal import write_all, crc32c, drop_cached, fsync_dir


FORMAT = 2  # 2: files checked by CRC-32C ("crc32c"); 1: by zlib's CRC-32 ("crc32")


class SnapshotCorrupt(Exception):
    pass


class _FileSink:
    """Where Arrow's IPC writer puts a snapshot file: each buffer it hands over goes to the file as it
    is (pyarrow passes a column's body buffers without copying them), its checksum taken on the way;
    the small metadata pieces are gathered into one write.

    Serializing a sub-window into memory first, then writing it, made two fresh copies of every
    sealed sub-window, and on this VM a fresh page costs ~10x the copy that fills it
    (wal.drop_cached); writing the parts where they are halved the kernel time per Append
    (docs/bench-history.md)."""

    closed = False
    _SMALL = 1 << 16

    def __init__(self, fd: int):
        self.fd = fd
        self.crc = 0
        self.size = 0
        self._small = bytearray()

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        self.crc = crc32c(view, self.crc)
        self.size += len(view)
        if len(view) < self._SMALL:
            self._small += view
        else:
            self.flush()
            write_all(self.fd, view)
        return len(view)

    def flush(self) -> None:
        if self._small:
            write_all(self.fd, bytes(self._small))
            self._small.clear()

    def close(self) -> None:
        self.flush()


def _batch(columns: dict[str, np.ndarray]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({c: pa.array(a) for c, a in columns.items()})


def _batches(chunks: list[dict[str, np.ndarray]]) -> list[pa.RecordBatch]:
    """Buffered chunks as record batches of one schema (one IPC stream): a validity mask ("?c")
    that only some chunks hold is written all true for the others, and dropped again on reading
    (a buffer keeps a mask only where a null is)."""
    masks = sorted({c for ch in chunks for c in ch if c.startswith("?")})
    out = []
    for ch in chunks:
        rows = len(next(iter(ch.values())))
        full = {c: ch[c] if c in ch else np.ones(rows, dtype=bool) for c in masks}
        out.append(_batch({**{c: a for c, a in ch.items() if not c.startswith("?")}, **full}))
    return out


class SnapshotWriter:
    """Writes snapshots; remembers where each sub-window went so the next one links it."""

    def __init__(self, directory: str):
        self.dir = directory
        os.makedirs(directory, exist_ok=True)
        self._files: dict[int, tuple[object, str, int, int]] = {}  # id(sub) -> (sub, path, crc, size), newest snapshot
        self.held_bytes = 0  # the newest snapshot's size, its hard-linked files included

    def write(self, image: dict, lsn: int) -> str:
        final = os.path.join(self.dir, f"{lsn:020d}")
        tmp = final + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        crcs: dict[str, int] = {}
        sizes: dict[str, int] = {}
        files: dict[int, tuple[object, str, int, int]] = {}

        def put(rel: str, batches: list[pa.RecordBatch] | bytes, schema: pa.Schema | None = None) -> None:
            """Write one file (an Arrow IPC stream of `batches`, or bytes), fsync it and note its checksum."""
            fd = os.open(os.path.join(tmp, rel), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                sink = _FileSink(fd)
                if isinstance(batches, bytes):
                    sink.write(batches)
                else:
                    with pa.ipc.new_stream(pa.PythonFile(sink, mode="w"), schema) as w:
                        for b in batches:
                            w.write_batch(b)
                sink.flush()
                os.fsync(fd)
                drop_cached(fd)  # read again only at start-up (wal.drop_cached)
            finally:
                os.close(fd)
            crcs[rel], sizes[rel] = sink.crc, sink.size

        state = {"format": FORMAT, "lsn": lsn, "now_ms": image["now_ms"], "next_query": image["next_query"],
                 "periodic": image["periodic"], "streams": [],
                 "answers": {qid: [to_plain(r) for r in log] for qid, log in image.get("answers", {}).items()}}
        for i, st in enumerate(image["streams"]):
            d = f"s{i}"
            os.makedirs(os.path.join(tmp, d))
            values, n = st["strings"]
            put(f"{d}/strings.arrow", [pa.RecordBatch.from_pydict({"s": pa.array(values[:n], pa.string())})],
                pa.schema([("s", pa.string())]))
            subs = []
            for sub in st["subs"]:
                rel = f"{d}/sw-{sub.slide}.arrow"
                meta = {"slide": sub.slide, "start_ms": sub.start_ms, "end_ms": sub.end_ms, "rows": sub.rows,
                        "sealed_at_ms": sub.sealed_at_ms, "prefix_before": sub.synopsis.prefix_before,
                        "prefix_after": sub.synopsis.prefix_after, "file": rel}
                if sub.synopsis.sketches:  # as sealed: a KLL sketch is not rebuilt bit for bit (sketch_columns)
                    meta["sketches"] = {k: base64.b64encode(v).decode() for k, v in
                                        sketch_columns.to_bytes(sub.synopsis.sketches).items()}
                old = self._files.get(id(sub))
                if old is not None and old[0] is sub and os.path.exists(old[1]):
                    os.link(old[1], os.path.join(tmp, rel))  # immutable: the previous snapshot's file will do
                    crcs[rel], sizes[rel] = old[2], old[3]
                else:
                    b = _batch(sub.columns)
                    put(rel, [b], b.schema)
                files[id(sub)] = (sub, os.path.join(final, rel), crcs[rel], sizes[rel])
                subs.append(meta)
            chunks = _batches(st["buffer"])
            if chunks:
                put(f"{d}/buffer.arrow", chunks, chunks[0].schema)
            slots = {}
            for slot, cs in st["slots"].items():
                batches = _batches(cs)
                if batches:
                    put(f"{d}/slot-{slot}.arrow", batches, batches[0].schema)
                    slots[str(slot)] = f"{d}/slot-{slot}.arrow"
            staged = []
            for n, (writer, batch_id, attempt, staged_chunks) in enumerate(st["staged"]):
                rels = {}
                for c, t in staged_chunks.items():  # one file per staged chunk: their Arrow types may differ
                    rels[str(c)] = f"{d}/staged-{n}-{c}.arrow"
                    put(rels[str(c)], t.to_batches(), t.schema)
                staged.append([writer, batch_id, attempt, rels])
            state["streams"].append({
                "name": st["name"], "columns": st["columns"], "time_column": st["time_column"], "spec": st["spec"],
                "created_ms": st["created_ms"], "strings": f"{d}/strings.arrow", "window": st["window"], "subs": subs,
                "buffer": f"{d}/buffer.arrow" if chunks else None, "slots": slots, "book": _plain_book(st["book"]),
                "staged": staged, "high_water": st["high_water"],
                # written only when set: a store without them writes the state it wrote before they existed
                **{k: st[k] for k in ("pending", "split_batches") if st.get(k)}})
        state["crc32c"] = crcs
        put("state.json", json.dumps(state, separators=(",", ":")).encode())
        for d in (os.path.join(tmp, f"s{i}") for i in range(len(image["streams"]))):
            fsync_dir(d)
        fsync_dir(tmp)
        os.rename(tmp, final)
        fsync_dir(self.dir)
        self._files = files
        self.held_bytes = sum(sizes.values())
        return final

    def adopt(self, path: str, state: dict, restored: list[tuple[object, str]]) -> None:
        """After a restart from the snapshot at `path` (`state` as read() returned it): the restored
        sub-windows (each with its file there) are what the next snapshot links instead of writing
        again, and its size is what the next one waits for (Durability.log). Without it the first
        snapshot after a restart wrote every sealed sub-window again. Files of the previous format
        are left to be rewritten (their checksum is not the one this format records)."""
        if state["format"] != FORMAT:
            return
        sums = state["crc32c"]
        sizes = {rel: os.path.getsize(os.path.join(path, rel)) for rel in sums}
        self._files = {id(sub): (sub, os.path.join(path, rel), sums[rel], sizes[rel]) for sub, rel in restored}
        self.held_bytes = sum(sizes.values())

    def prune(self, keep_lsn: int) -> None:
        """Delete snapshots older than the one at keep_lsn, and leftovers of interrupted writes."""
        for name in os.listdir(self.dir):
            path = os.path.join(self.dir, name)
            if name.endswith(".tmp") or (name.isdigit() and int(name) < keep_lsn):
                shutil.rmtree(path, ignore_errors=True)


def _plain_book(book: dict) -> dict:
    """Acknowledgements (dataclasses, as captured) as JSON lists of their fields."""
    def plain(table: dict) -> dict:
        return {writer: [(b, list(ack.__dict__.values())) for b, ack in entries] for writer, entries in table.items()}
    return {**book, "acks": plain(book["acks"]), "slide_acks": plain(book["slide_acks"])}


def latest(directory: str) -> str | None:
    """The newest complete snapshot directory, or None."""
    if not os.path.isdir(directory):
        return None
    done = sorted(n for n in os.listdir(directory) if n.isdigit())
    return os.path.join(directory, done[-1]) if done else None


def read(path: str) -> tuple[dict, int, Callable]:
    """(image for Engine.restore, lsn, the sub-window loader Engine.restore takes)."""
    def load(rel: str) -> bytes:
        full = os.path.join(path, rel)
        try:
            with open(full, "rb") as f:
                data = f.read()
        except OSError as e:
            raise SnapshotCorrupt(f"{full}: {e}") from None
        if rel != "state.json" and checksum(data) != sums.get(rel):
            raise SnapshotCorrupt(f"{full}: checksum mismatch")
        return data

    def batches(rel: str) -> list[dict[str, np.ndarray]]:
        with pa.ipc.open_stream(pa.BufferReader(load(rel))) as r:
            return [{name: a for name, col in zip(b.schema.names, b.columns)
                     for a in [col.to_numpy(zero_copy_only=False)] if not (name.startswith("?") and a.all())}
                    for b in r]

    state = {}
    try:
        state = json.loads(load("state.json"))
    except ValueError as e:
        raise SnapshotCorrupt(f"{path}/state.json: {e}") from None
    if state.get("format") not in (1, FORMAT):
        raise SnapshotCorrupt(f"{path}/state.json: snapshot format {state.get('format')} is not one this version reads")
    sums, checksum = (state["crc32c"], crc32c) if state["format"] == FORMAT else (state["crc32"], zlib.crc32)
    for st in state["streams"]:
        with pa.ipc.open_stream(pa.BufferReader(load(st["strings"]))) as r:
            table = r.read_all()
        st["strings"] = table.column("s").to_pylist() if table.num_rows else []
        st["buffer"] = batches(st["buffer"]) if st["buffer"] else []
        st["slots"] = {int(k): batches(v) for k, v in st["slots"].items()}
        staged = []
        for writer, batch_id, attempt, rels in st["staged"]:
            chunks = {}
            for c, rel in rels.items():
                with pa.ipc.open_stream(pa.BufferReader(load(rel))) as r:
                    chunks[int(c)] = r.read_all()
            staged.append([writer, batch_id, attempt, chunks])
        st["staged"] = staged

    def subwindow(window: Window, meta: dict):
        cols = batches(meta["file"])[0]
        # the columns and their validity masks ("?c", bool: kept where a sub-window has a null)
        keep = [*window.schema.names, *(valid_key(c) for c in window.schema.names if valid_key(c) in cols)]
        cols = {c: np.ascontiguousarray(cols[c]) for c in keep}
        sketches = None
        if window.spec.sketches and "sketches" in meta:
            sketches = sketch_columns.from_bytes(window.spec.sketches, window.schema.types,
                                                 {k: base64.b64decode(v) for k, v in meta["sketches"].items()})
        sub = window.seal(meta["slide"], meta["start_ms"], meta["end_ms"], cols, meta["rows"], meta["sealed_at_ms"],
                          meta["prefix_before"], sketches)
        # a snapshot from before nulls has no running COUNT(c) ("#c"): the rebuilt one adds them
        if {k: v for k, v in sub.synopsis.prefix_after.items() if k in meta["prefix_after"]} != meta["prefix_after"]:
            raise SnapshotCorrupt(f"{path}/{meta['file']}: contents do not match the running synopsis")
        return sub
    return state, state["lsn"], subwindow
