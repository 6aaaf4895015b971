"""The engine's durable state as one image: `capture` takes it as plain data (a snapshot's
content, persisted by server/snapshot.py off the engine's thread), `restore` rebuilds an empty
engine from it, and `digest` hashes it (equal digests, equal stores: what recovery tests compare).

Part of the engine (txn/engine.py holds the Engine; its capture, restore and digest call these).
Reads the engine, its scheduler's streams and windows through their accessors; restore is the only
writer, into an engine that is still empty. Nothing here applies or logs a command.
"""
from __future__ import annotations

import collections
import hashlib
from typing import TYPE_CHECKING, Callable

from windowstore.store import Schema, Stream, WindowSpec

from .commands import Register
from .ingest import AppendAck, PendingCommit, SlideAck, StreamBook

if TYPE_CHECKING:
    from .engine import Engine


# Spec fields a snapshot holds only when set: a stream without partitioned windows is captured as
# before they existed; restore fills in the defaults.
_UNSET = {"last_rows": 0, "last_rows_by": (), "last_rows_keys": 0}
_KEEP = object()


def capture(engine: Engine) -> dict:
    """The durable state as plain data, cheap to take on the engine's thread: sealed sub-windows
    and buffered chunks are immutable and referenced, not copied; the string dictionary only
    grows, so its list and current length are enough. A writer thread can persist it while the
    engine goes on. Not while a slide is being sealed (`sealing`)."""
    assert not engine.sealing, "capture the state between seals (and with no stream failed)"
    streams = []
    for name, s in engine.sched.streams.items():
        w = s.window
        buffer, slots = w.open_chunks()
        book = engine.books[name]
        streams.append({
            "name": name, "columns": [list(c) for c in s.schema.columns], "time_column": s.schema.time_column,
            "spec": {k: v for k, v in {**s.spec.__dict__, "group_by": list(s.spec.group_by)}.items()
                     if _UNSET.get(k, _KEEP) != v},  # (partitioned windows' fields only when set)
            "created_ms": s.created_ms,
            "strings": (s.strings.values, len(s.strings)),
            "window": w.counters(),
            "subs": [sub for sub in w.subs if sub is not None],
            "buffer": buffer,
            "slots": slots,
            "staged": [[w, b, a, dict(cs)] for (w, b), ats in book.staged.items() for a, cs in ats.items()],
            "high_water": dict(book.high_water),
            "pending": [[w, b, [list(a) for a in p.attempts], p.at_slide, p.split] for (w, b), p in book.pending.items()],
            "split_batches": book.split_batches,
            # (batch, ack) pairs: copied at C speed here, made plain data by the snapshot writer
            "book": {"accepted_rows": book.accepted_rows,
                     "acks": {k: list(v.items()) for k, v in book.acks.items()},
                     "slide_acks": {k: list(v.items()) for k, v in book.slide_acks.items()}},
        })
    return {"now_ms": engine.now_ms, "next_query": engine.next_query, "streams": streams,
            "periodic": [_periodic_entry(p) for p in engine.periodic.values()],
            "answers": engine.answers.capture()}


def _periodic_entry(p) -> list:
    """A registration in a snapshot: [id, text, priority, owner], then return_sketches when set or a
    key follows, then the idempotency key when set (older snapshots have the first four or five)."""
    out = [p.query_id, p.text, p.priority, p.owner]
    if p.sketches or p.key:
        out.append(p.sketches)
    if p.key:
        out.append(p.key)
    return out


def restore(engine: Engine, image: dict, subwindow: Callable) -> None:
    """Rebuild the state `capture` took (read back from disk) into this empty engine.
    `subwindow(window, meta)` returns a sealed sub-window of the restored stream."""
    assert not engine.sched.streams and not engine.periodic, "restore into an empty engine"
    engine.now_ms = image["now_ms"]
    for st in image["streams"]:
        spec = WindowSpec(**{**st["spec"], "group_by": tuple(st["spec"]["group_by"])})
        stream = Stream(st["name"], Schema.of(dict(map(tuple, st["columns"])), st["time_column"]), spec,
                        created_ms=st["created_ms"])
        stream.strings.load(st["strings"])
        w, ws = stream.window, st["window"]
        w.restore([subwindow(w, meta) for meta in st["subs"]], ws["latest"], ws["prefix"], ws["last_seal_ms"],
                  ws["base_slot"], ws["max_event_ms"], ws["late_rows"], st["buffer"],
                  {int(k): v for k, v in st["slots"].items()})
        w.restore_last_rows(ws.get("last_rows"), ws.get("last_rows_keys"))  # partitioned windows
        w.restore_landmark(ws.get("landmark"))  # landmark windows' running synopsis (store/cumulative.py)
        engine.sched.add_stream(stream)
        book = StreamBook(accepted_rows=st["book"]["accepted_rows"])
        for writer, entries in st["book"]["acks"].items():
            book.acks[writer] = collections.OrderedDict((b, _ack(AppendAck, a)) for b, a in entries)
        for writer, entries in st["book"]["slide_acks"].items():
            book.slide_acks[writer] = collections.OrderedDict((b, _ack(SlideAck, a)) for b, a in entries)
        book.high_water = {w: int(b) for w, b in st["high_water"].items()}
        for writer, batch_id, attempts, at_slide, split in st.get("pending", []):  # (older images: none)
            book.pending[(writer, int(batch_id))] = PendingCommit(tuple((a, int(n)) for a, n in attempts), int(at_slide),
                                                                  bool(split))
        book.split_batches = int(st.get("split_batches", 0))
        for writer, batch_id, attempt, chunks in st["staged"]:
            book.staged.setdefault((writer, batch_id), {})[attempt] = {int(c): t for c, t in chunks.items()}
            engine.staged_bytes += sum(t.nbytes for t in chunks.values())
        engine.books[st["name"]] = book
        engine.acks_kept += sum(len(t) for tables in (book.acks, book.slide_acks) for t in tables.values())
    for query_id, text, priority, owner, *more in image["periodic"]:  # (_periodic_entry)
        sketches, key = (bool(more[0]) if more else False), (more[1] if len(more) > 1 else "")
        engine.apply(Register(query_id, text, priority, engine.now_ms, owner, sketches, key))
    engine.answers.restore(image.get("answers", {}))  # a snapshot from before answer logs has none
    for query_id in engine.answers.queries():
        engine.sched.resume(query_id, engine.answers.newest(query_id))
    engine.next_query = image["next_query"]
    for stream in engine.sched.streams.values():
        why = stream.window.refused_state()
        if why is not None:
            engine.sched.stop_stream(stream.name, f"stream {stream.name!r} stopped at recovery: its snapshot holds "
                                                f"a state this server refuses ({why}); drop the stream to go on")
    engine.drain()  # what restoring applied is in the snapshot, not for the log


def digest(engine: Engine) -> str:
    """A hash of the durable state: equal digests, equal stores (between seals, as capture)."""
    assert not engine.sched.sealing, "a digest of the state between seals"
    h = hashlib.sha256()

    def put(*parts) -> None:
        for part in parts:
            h.update(part if isinstance(part, bytes) else repr(part).encode())

    put(engine.next_query, sorted(tuple(_periodic_entry(p)) for p in engine.periodic.values()))
    put(engine.answers.digest_parts())
    for name in sorted(engine.sched.streams):
        s = engine.sched.streams[name]
        w = s.window
        counters = w.counters()
        put(name, s.schema, s.spec, s.created_ms, s.strings.values, *(counters[k] for k in (
            "latest", "last_seal_ms", "base_slot", "max_event_ms", "late_rows")), sorted(counters["prefix"].items()))
        if "last_rows" in counters:  # partitioned windows: the rows and keys kept beyond the window
            put(counters["last_rows"], counters["last_rows_keys"])
        buffer, slots = w.open_chunks()
        for chunk in buffer:
            put(*(chunk[c].tobytes() for c in sorted(chunk)))
        for slot in sorted(slots):
            for chunk in slots[slot]:
                put(slot, *(chunk[c].tobytes() for c in sorted(chunk)))
        for sub in w.subs:
            if sub is not None:
                put(sub.slide, sub.position, sub.start_ms, sub.end_ms, sub.rows, sub.sealed_at_ms,
                    sorted(sub.synopsis.prefix_after.items()), *(sub.columns[c].tobytes() for c in sorted(sub.columns)))
        book = engine.books[name]
        put(book.accepted_rows, [(k, list(v.items())) for k, v in sorted(book.acks.items())],
            [(k, list(v.items())) for k, v in sorted(book.slide_acks.items())], sorted(book.high_water.items()))
        for key in sorted(book.staged):
            for attempt in sorted(book.staged[key]):
                chunks = book.staged[key][attempt]
                put(key, attempt, [(c, chunks[c].to_pylist()) for c in sorted(chunks)])
        if book.pending:  # (only when there are: the digest of a store without any is as it was)
            put(list(book.pending.items()))
    return h.hexdigest()


def _ack(cls, value):
    """An acknowledgement as captured (the object) or as read back from a snapshot (its fields)."""
    return value if isinstance(value, cls) else cls(*value)
