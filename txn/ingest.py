"""Rows into the engine, each batch exactly once: appends (with an idempotency key, a replay is a
no-op and a replay with other rows is refused), staged micro-batches (stage per task attempt, then
commit or abort the batch), admission control, and the bounded idempotency tables that remember
what was acknowledged.

Part of the engine (txn/engine.py holds the Engine and dispatches commands here): these functions
act on the engine's per-stream books (StreamBook), staged-byte and acknowledgement counts, and emit
the commands they apply, as the engine's own methods. They do not slide, plan or run queries.
"""
from __future__ import annotations

import collections
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from windowstore.store import InvalidInput, Schema, Stream
from windowstore.store.digest import batch_digest
from windowstore.store.errors import ResourceLimit
from windowstore.store.kinds import Clock
from windowstore.store.prepared import PreparedBatch

from .commands import AbortBatch, Append, CommitBatch, StageRows
from .errors import FailedPrecondition

if TYPE_CHECKING:
    from .engine import Engine


@dataclass(frozen=True)
class AppendAck:
    accepted: int
    late: int
    duplicate: bool
    latest_slide: int
    digest: int = 0      # the batch's content (store/digest.py): a replay must carry the same rows


@dataclass(frozen=True)
class SlideAck:
    slide: int
    rows: int
    duplicate: bool


@dataclass(frozen=True)
class StageAck:
    rows: int            # staged by this attempt so far
    committed: bool      # the batch is in already: its commit will only compare the rows


@dataclass(frozen=True)
class CommitAck:
    accepted: int
    late: int
    duplicate: bool      # the batch was committed before: nothing changed
    latest_slide: int
    pending: bool = False  # held for the slide that opens its at_slide
    visible_from: int = -1  # the first slide whose window holds its rows (-1: not known)


@dataclass(frozen=True)
class PendingCommit:
    """A commit held for sub-window `at_slide`: its staged rows stay in StreamBook.staged."""

    attempts: tuple[tuple[str, int], ...]
    at_slide: int
    split: bool


@dataclass
class StreamBook:
    """Per-stream state the scheduler does not keep."""

    accepted_rows: int = 0
    duplicate_batches: int = 0     # a metric: replays are not logged
    acks: dict[str, collections.OrderedDict[int, Any]] = field(default_factory=dict)        # writer -> batch -> AppendAck
    slide_acks: dict[str, collections.OrderedDict[int, Any]] = field(default_factory=dict)  # writer -> batch -> SlideAck
    # staged, uncommitted batches: (writer, batch) -> attempt -> chunk -> table; and per writer the newest
    # committed batch id (Spark's batch ids only grow: anything at or below it is a replay)
    staged: dict[tuple[str, int], dict[str, dict[int, Any]]] = field(default_factory=dict)  # chunks: pyarrow Tables
    high_water: dict[str, int] = field(default_factory=dict)
    discarded_rows: int = 0        # a metric: staged rows that were never published
    # commits held for a later sub-window, in arrival order: (writer, batch) -> PendingCommit
    pending: dict[tuple[str, int], PendingCommit] = field(default_factory=dict)
    split_batches: int = 0         # a metric: batches published without one common target slide

    def append_ack(self, writer: str, batch_id: int) -> Any:
        """The remembered AppendAck of a writer's batch, or None."""
        acks = self.acks.get(writer)
        return None if acks is None else acks.get(batch_id)

    def slide_ack(self, writer: str, batch_id: int) -> Any:
        """The remembered SlideAck of a writer's slide, or None."""
        acks = self.slide_acks.get(writer)
        return None if acks is None else acks.get(batch_id)


def content_digest(schema: Schema, batch: Any, prepared: PreparedBatch | None = None) -> int | None:
    """A keyed batch's digest as append() takes it from the Append command (its `digest`), or
    None when the schema refuses the batch (append() then refuses it, saying why). Pure: the
    server calls it where it decodes the batch, off the event loop for a large one. `prepared`:
    the batch's preparation under `schema`, whose checked columns it reads rather than check again."""
    if prepared is not None and prepared.schema is schema:
        return batch_digest(prepared.checked, schema.columns, prepared.rows)
    try:
        checked, rows = schema.check(batch)
    except InvalidInput:
        return None
    return batch_digest(checked, schema.columns, rows)


def append(engine: Engine, cmd: Append) -> AppendAck:
    stream = engine.stream(cmd.stream)
    book = engine.books[cmd.stream]
    batch_id = cmd.batch_id if cmd.writer_id else None  # the idempotency key, if the append has one
    prepared = cmd.prepared if cmd.prepared is not None and cmd.prepared.schema is stream.schema else None
    if prepared is not None:
        checked, rows = prepared.checked, prepared.rows
    else:
        checked, rows = stream.schema.check(cmd.batch)  # raises InvalidInput with nothing applied
    if cmd.event_time_ms is not None:
        stream.window.check_event_time(cmd.event_time_ms)
    digest = 0
    if batch_id is not None:
        if cmd.digest is not None and cmd.digest_columns in (None, stream.schema.columns):
            digest = cmd.digest  # computed where the batch was decoded (or logged), under this schema
        else:
            digest = batch_digest(checked, stream.schema.columns, rows)
            cmd = replace(cmd, digest=digest, digest_columns=None)  # logged with it
        seen = book.append_ack(cmd.writer_id, batch_id)
        if seen is not None:
            if seen.digest != digest:
                raise FailedPrecondition(
                    f"batch {cmd.batch_id} of writer {cmd.writer_id!r} was already appended with other rows "
                    f"({seen.accepted + seen.late} then, {rows} now): an idempotency key names one batch")
            book.duplicate_batches += 1
            return AppendAck(seen.accepted, seen.late, True, seen.latest_slide, digest)
    _admit(engine, stream, rows)
    result = stream.append_checked(checked, rows, prepared)  # raises InvalidInput with nothing applied
    if cmd.event_time_ms is not None:
        stream.window.reach_event_time(cmd.event_time_ms)
    book.accepted_rows += result.accepted
    ack = AppendAck(result.accepted, result.late, False, stream.window.cut_through, digest)
    if batch_id is not None:
        remember(engine, book.acks, cmd.writer_id, batch_id, ack)
    engine.emit(cmd if cmd.prepared is None else replace(cmd, prepared=None))  # the log keeps the rows only
    return ack


# -- staged batches: exactly-once micro-batches -----------------------------------------------------
def _committed(engine: Engine, book: StreamBook, writer_id: str, batch_id: int) -> AppendAck | bool:
    """The ack of an earlier commit of this batch, True if it is older than what is remembered
    but at or below the writer's high-water mark, or False."""
    seen = book.append_ack(writer_id, batch_id)
    if seen is not None:
        return seen
    return batch_id <= book.high_water.get(writer_id, -1)


def stage(engine: Engine, cmd: StageRows) -> StageAck:
    stream = engine.stream(cmd.stream)
    book = engine.books[cmd.stream]
    if not cmd.writer_id or not cmd.attempt:
        raise InvalidInput("staged rows need a writer_id, a batch_id and an attempt")
    # Rows of a batch that is committed already are staged all the same: its commit then
    # compares them with what was committed (a replay must carry the same rows).
    checked, rows = stream.schema.check(cmd.batch)  # refused now, not at commit; nothing is interned yet
    stream.spec.check_event_times(checked[stream.schema.time_column], stream.schema.time_column)
    size = cmd.batch.nbytes
    if engine.staged_bytes + size > engine.config.max_staged_bytes and not engine.replaying:
        raise ResourceLimit(f"{engine.staged_bytes} bytes are staged by uncommitted batches "
                            f"(limit {engine.config.max_staged_bytes}): commit or abort them")
    chunks = book.staged.setdefault((cmd.writer_id, cmd.batch_id), {}).setdefault(cmd.attempt, {})
    old = chunks.get(cmd.chunk)
    chunks[cmd.chunk] = cmd.batch
    engine.staged_bytes += size - (old.nbytes if old is not None else 0)
    engine.emit(cmd)
    return StageAck(sum(t.num_rows for t in chunks.values()),
                    _committed(engine, book, cmd.writer_id, cmd.batch_id) is not False)


def commit_batch(engine: Engine, cmd: CommitBatch) -> CommitAck:
    stream = engine.stream(cmd.stream)
    book = engine.books[cmd.stream]
    key = (cmd.writer_id, cmd.batch_id)
    if not cmd.writer_id:
        raise InvalidInput("a batch commit needs a writer_id and a batch_id")
    if cmd.event_time_ms is not None:
        stream.window.check_event_time(cmd.event_time_ms)
    if cmd.at_slide is not None:
        _check_target(stream, cmd)
    pend = book.pending.get(key)
    if pend is not None:
        return _retarget(engine, stream, book, key, pend, cmd)
    staged = book.staged.get(key, {})
    attempts = sorted(dict(cmd.attempts).items())
    complete = all(_staged_rows(staged, a) == rows for a, rows in attempts)
    seen = _committed(engine, book, cmd.writer_id, cmd.batch_id)
    if seen is not False:
        # a replay (Spark re-runs a batch after a restart): compare what it staged, if it did
        if isinstance(seen, AppendAck) and attempts and staged and complete:
            checked, rows = _checked_union(stream, _staged_tables(staged, attempts))
            if batch_digest(checked, stream.schema.columns, rows) != seen.digest:
                raise FailedPrecondition(
                    f"batch {cmd.batch_id} of {cmd.writer_id!r} was already committed with other rows "
                    f"({seen.accepted + seen.late} then, {rows} now): a replay must carry the same rows")
        discard(engine, book, key)
        engine.emit(cmd)
        book.duplicate_batches += 1
        ack = seen if isinstance(seen, AppendAck) else AppendAck(0, 0, True, stream.window.cut_through)
        return CommitAck(ack.accepted, ack.late, True, stream.window.cut_through,
                         visible_from=ack.latest_slide + 1 if isinstance(seen, AppendAck) else -1)
    if not complete:
        got = {a: _staged_rows(staged, a) for a, _ in attempts}
        raise FailedPrecondition(f"batch {cmd.batch_id}: the attempts' tasks reported {dict(attempts)} rows but "
                                 f"{got} are staged: it cannot be committed (abort and retry it)")
    _check_not_past(stream, cmd)
    checked, rows = _checked_union(stream, _staged_tables(staged, attempts))
    if cmd.slide and (stream.spec.clock != "manual" or stream.spec.count_based):
        raise FailedPrecondition(f"stream {cmd.stream!r} does not slide on request (clock={stream.spec.clock!r})")
    _admit(engine, stream, rows)
    if cmd.at_slide is not None and cmd.at_slide > stream.window.cut_through + 1:
        if len(book.pending) >= engine.config.max_pending_commits and not engine.replaying:
            raise ResourceLimit(f"stream {cmd.stream!r} holds {len(book.pending)} commits pending for later "
                                f"sub-windows (limit {engine.config.max_pending_commits})")
        book.pending[key] = PendingCommit(tuple(attempts), cmd.at_slide, cmd.split)
        engine.emit(cmd)
        # the rows it will publish: a stream that can hold a commit (processing or manual clock) takes them all
        return CommitAck(rows, 0, False, stream.window.cut_through, True, cmd.at_slide)
    ack = _publish(engine, stream, book, key, tuple(attempts), cmd.split, cmd.event_time_ms, (checked, rows))
    engine.emit(cmd)
    if cmd.slide and not engine.replaying:  # in the log, the slide follows as its own command
        engine.slide_now(cmd.stream)
    return CommitAck(ack.accepted, ack.late, False, stream.window.cut_through, visible_from=ack.latest_slide + 1)


def _check_target(stream: Stream, cmd: CommitBatch) -> None:
    """A target sub-window must be the open one or one ahead (bounded), on a stream whose slides
    are numbered by its clock or its Slide calls, not by its rows' event times."""
    open_ = stream.window.cut_through + 1
    if stream.spec.clock == Clock.EVENT or stream.spec.count_based:
        raise InvalidInput(f"at_slide: stream {cmd.stream!r} slides by its {'row count' if stream.spec.count_based else 'event time'}; "
                           "a commit's rows cannot be held for a sub-window there")
    if cmd.slide:
        raise InvalidInput("at_slide: a commit that slides (slide=true) publishes into the open sub-window")
    if cmd.at_slide - open_ > 1_000:  # type: ignore[operator]
        raise InvalidInput(f"at_slide {cmd.at_slide} is more than 1000 sub-windows ahead of stream "
                           f"{cmd.stream!r}'s open sub-window {open_}")


def _check_not_past(stream: Stream, cmd: CommitBatch) -> None:
    """A commit not published yet cannot go into a sub-window already cut."""
    open_ = stream.window.cut_through + 1
    if cmd.at_slide is not None and cmd.at_slide < open_:
        raise FailedPrecondition(f"at_slide {cmd.at_slide}: stream {cmd.stream!r} has its sub-window {open_} open "
                                 f"already (open_slide={open_}); nothing was committed: commit it for a later one")


def _retarget(engine: Engine, stream: Stream, book: StreamBook, key: tuple[str, int], pend: PendingCommit,
              cmd: CommitBatch) -> CommitAck:
    """The commit of a batch that is pending: a new target (still ahead: held for it; the open
    sub-window: published now), or none (published now, as the committer's fallback)."""
    _check_not_past(stream, cmd)
    if cmd.slide:
        raise FailedPrecondition(f"batch {cmd.batch_id} of {cmd.writer_id!r} is pending for sub-window "
                                 f"{pend.at_slide}: it cannot slide")
    if cmd.at_slide is not None and cmd.at_slide > stream.window.cut_through + 1:
        book.pending[key] = PendingCommit(pend.attempts, cmd.at_slide, pend.split or cmd.split)
        engine.emit(cmd)
        return CommitAck(sum(n for _, n in pend.attempts), 0, False, stream.window.cut_through, True, cmd.at_slide)
    del book.pending[key]
    ack = _publish(engine, stream, book, key, pend.attempts, pend.split or cmd.split, None)
    engine.emit(cmd)
    return CommitAck(ack.accepted, ack.late, False, stream.window.cut_through, visible_from=ack.latest_slide + 1)


def apply_due(engine: Engine, name: str) -> None:
    """After a slide of `name` was cut: publish the pending commits for the sub-window it opened
    (a consequence of the Slide command, so replaying the log publishes them at the same point)."""
    book = engine.books.get(name)
    if book is None or not book.pending:
        return
    stream = engine.sched.streams[name]
    open_ = stream.window.cut_through + 1
    for key, pend in [(k, p) for k, p in book.pending.items() if p.at_slide <= open_]:
        del book.pending[key]
        _publish(engine, stream, book, key, pend.attempts, pend.split, None)


def _publish(engine: Engine, stream: Stream, book: StreamBook, key: tuple[str, int], attempts: tuple[tuple[str, int], ...],
             split: bool, event_time_ms: int | None, union: tuple[dict, int] | None = None) -> AppendAck:
    """Append a batch's staged rows to the open sub-window and remember it as committed."""
    writer_id, batch_id = key
    staged = book.staged.get(key, {})
    checked, rows = union if union is not None else _checked_union(stream, _staged_tables(staged, list(attempts)))
    result = stream.append_checked(checked, rows)  # raises InvalidInput with nothing applied
    if event_time_ms is not None:
        stream.window.reach_event_time(event_time_ms)
    book.accepted_rows += result.accepted
    ack = AppendAck(result.accepted, result.late, False, stream.window.cut_through,
                    batch_digest(checked, stream.schema.columns, rows))
    remember(engine, book.acks, writer_id, batch_id, ack)
    book.high_water[writer_id] = max(batch_id, book.high_water.get(writer_id, -1))
    published = sum(_staged_rows(staged, a) for a, _ in attempts)
    for older in [k for k in book.staged if k[0] == writer_id and k[1] <= batch_id
                  and (k == key or k not in book.pending)]:
        discard(engine, book, older)  # this batch's other attempts, and batches that can never commit
    book.discarded_rows -= published  # those were published, not discarded
    if split:
        book.split_batches += 1
    return ack


def abort_batch(engine: Engine, cmd: AbortBatch) -> int:
    book = engine.books[engine.stream(cmd.stream).name]
    held = book.pending.pop((cmd.writer_id, cmd.batch_id), None)
    rows = discard(engine, book, (cmd.writer_id, cmd.batch_id))
    if rows is not None or held is not None:
        engine.emit(cmd)
    return rows or 0


def discard(engine: Engine, book: StreamBook, key: tuple[str, int]) -> int | None:
    attempts = book.staged.pop(key, None)
    if attempts is None:
        return None
    tables = [t for chunks in attempts.values() for t in chunks.values()]
    engine.staged_bytes -= sum(t.nbytes for t in tables)
    rows = sum(t.num_rows for t in tables)
    book.discarded_rows += rows
    return rows


def _admit(engine: Engine, stream: Stream, rows: int) -> None:
    """Admission control (never in replay: what was accepted once is applied again)."""
    if not engine.replaying and stream.window.buffered_rows + rows > engine.config.max_buffered_rows:
        advice = ("slide it or append less" if stream.spec.clock == Clock.MANUAL else
                  "the next slide has not caught up with the rows arriving: retry after a backoff")
        raise ResourceLimit(
            f"stream {stream.name!r} has {stream.window.buffered_rows} rows waiting for a slide (limit "
            f"{engine.config.max_buffered_rows}); {advice}")


# -- idempotency tables: bounded per writer and in all ---------------------------------------------
def remember(engine: Engine, tables: dict[str, collections.OrderedDict[int, Any]], writer: str, batch_id: int, ack) -> None:
    """Remember an acknowledgement for replays. A writer keeps its newest idempotency_keep; all
    tables together keep at most idempotency_keep_total, beyond which the largest tables lose
    their oldest entries (a replay of a forgotten batch is applied again: the price of a bound).
    Eviction depends only on the commands applied, so replaying the log evicts the same."""
    table = tables.setdefault(writer, collections.OrderedDict())
    if batch_id not in table:
        engine.acks_kept += 1
    table[batch_id] = ack
    if len(table) > engine.config.idempotency_keep:
        table.popitem(last=False)
        engine.acks_kept -= 1
    if engine.acks_kept > engine.config.idempotency_keep_total:
        _evict_acks(engine)


def _evict_acks(engine: Engine) -> None:
    """Down to 90% of the total bound, taking from the largest table first (ties by name)."""
    target = engine.config.idempotency_keep_total * 9 // 10
    while engine.acks_kept > target:
        _, name, kind, writer = min((-len(t), name, kind, writer) for name, book in engine.books.items()
                                    for kind, tables in (("acks", book.acks), ("slide_acks", book.slide_acks))
                                    for writer, t in tables.items())
        tables = getattr(engine.books[name], kind)
        table = tables[writer]
        for _ in range(min(len(table), max(1, engine.acks_kept - target, len(table) // 10))):
            table.popitem(last=False)
            engine.acks_kept -= 1
        if not table:
            del tables[writer]


def _staged_rows(staged: dict, attempt: str) -> int:
    return sum(t.num_rows for t in staged.get(attempt, {}).values())


def _staged_tables(staged: dict, attempts: list[tuple[str, int]]) -> list:
    """The staged tables of these attempts, in attempt and chunk order (deterministic)."""
    return [staged[a][c] for a, _ in attempts if a in staged for c in sorted(staged[a])]


def _checked_union(stream: Stream, tables: list) -> tuple[dict, int]:
    """Schema-checked columns of several tables as one batch (their Arrow types may differ: a
    dictionary-encoded or a plain string column, int32 or int64)."""
    import numpy as np
    import pyarrow as pa

    from windowstore.store.schema import valid_key

    parts = [stream.schema.check(t) for t in tables]
    if not parts:
        return stream.schema.check({c: [] for c in stream.schema.names})
    if len(parts) == 1:
        return parts[0]
    out = {}
    for name, typ in stream.schema.columns:
        cols = [p[0][name] for p in parts]
        if typ == "string":
            cols = [(c.dictionary_decode() if pa.types.is_dictionary(c.type) else c) for c in
                    (c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in cols)]
            out[name] = pa.concat_arrays([c.cast(pa.string()) for c in cols])
        else:
            out[name] = np.concatenate(cols)
        vk = valid_key(name)
        if any(vk in p[0] for p in parts):  # a null in some table: its validity, the others all valid
            out[vk] = np.concatenate([p[0][vk] if vk in p[0] else np.ones(p[1], dtype=bool) for p in parts])
    return out, sum(p[1] for p in parts)
