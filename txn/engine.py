"""The engine: the one place where the store's state changes.

It owns the scheduler (streams, windows, queries), the idempotency tables and per-stream counters,
and the periodic query definitions with their ids. State changes only by applying commands
(commands.py); every command applied is also emitted (`drain()`), in the order applied, for the
write-ahead log. Replaying the emitted commands into an empty engine (`replay`) rebuilds the same
state bit for bit (`digest()`), which is what recovery does and what the tests check.

No threads, sockets, files or wall clock: time is the `now_ms` each command carries, and `tick`
for the scheduler's reads. The server (server/driver.py, on its event loop) moves commands in and results out.
"""
from __future__ import annotations

import collections
import hashlib
import re
from dataclasses import dataclass, field
from typing import Callable

from windowstore.store import InvalidInput, Schema, Stream, StoreError, WindowSpec, plan_query
from windowstore.store.errors import ResourceLimit
from windowstore.store.join import DEFAULT_MAX_ROWS, plan_join
from windowstore.store.parser import parse_statement
from windowstore.store.query import JoinQuery
from windowstore.store.digest import batch_digest

from .answers import AnswerLog, from_plain, to_plain
from .commands import (AbortBatch, Answered, Append, Command, CommitBatch, CompactStrings, CreateStream, DropStream,
                       Register, Slide, StageRows, Unregister)
from .history import History
from .joins import JoinQueryPlan, first_with_slide, stream_names
from .scheduler import Result, Scheduler, StreamFailed, Task


class NotFound(StoreError):
    pass


class AlreadyExists(StoreError):
    pass


class FailedPrecondition(StoreError):
    pass


@dataclass
class EngineConfig:
    policy: str = "ttu"
    max_restarts: int = 16
    max_streams: int = 1_000
    max_periodic_queries: int = 1_000
    idempotency_keep: int = 100_000   # acknowledgements remembered per writer
    idempotency_keep_total: int = 1_000_000  # ... and in all (about 200 bytes each)
    max_staged_bytes: int = 1 << 30   # rows staged by uncommitted batches, all streams
    max_buffered_rows: int = 20_000_000  # rows waiting in one stream's open buffers for a slide
    max_join_rows: int = DEFAULT_MAX_ROWS  # rows of a join's result (and of each intermediate)
    answer_log_keep: int = 1_000     # answers kept per periodic query (answers.py)
    answer_log_bytes: int = 64 << 20  # and at most this many bytes of them (the newest always kept)
    sharing: str = "none"            # shared execution of periodic queries (txn/sharing/): a SharingMode


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


@dataclass
class StreamBook:
    """Per-stream state the scheduler does not keep."""

    accepted_rows: int = 0
    duplicate_batches: int = 0     # a metric: replays are not logged
    acks: dict[str, collections.OrderedDict] = field(default_factory=dict)        # writer -> batch -> AppendAck
    slide_acks: dict[str, collections.OrderedDict] = field(default_factory=dict)  # writer -> batch -> SlideAck
    # staged, uncommitted batches: (writer, batch) -> attempt -> chunk -> table; and per writer the newest
    # committed batch id (Spark's batch ids only grow: anything at or below it is a replay)
    staged: dict[tuple[str, int], dict[str, dict[int, object]]] = field(default_factory=dict)
    high_water: dict[str, int] = field(default_factory=dict)
    discarded_rows: int = 0        # a metric: staged rows that were never published


@dataclass
class PeriodicDef:
    query_id: str
    text: str
    priority: int
    task: Task
    owner: str = ""


_QUERY_ID = re.compile(r"^P(\d+)$")


class Engine:
    def __init__(self, config: EngineConfig | None = None, history: History | None = None):
        self.config = config or EngineConfig()
        self.now_ms = 0.0
        self.sched = Scheduler(self.config.policy, lambda: self.now_ms, history, self.config.max_restarts)
        if self.config.sharing != "none":  # (txn/sharing/runtime.py hooks into the scheduler)
            from .sharing.runtime import SharedTasks
            self.sched.sharing = SharedTasks(self.config.sharing)
        self.sched.on_cut = self._cut
        self.sched.on_slide = self._slid
        self.books: dict[str, StreamBook] = {}
        self.periodic: dict[str, PeriodicDef] = {}
        self.answers = AnswerLog(self.config.answer_log_keep, self.config.answer_log_bytes)
        self.next_query = 1
        self._out: list[Command] = []
        self._slide_key: tuple[str, int | None] = ("", None)
        self._replaying = False
        self.staged_bytes = 0
        self.acks_kept = 0   # entries of every book's acks and slide_acks tables
        # Listeners for the shell (subscribers): answers and failures of periodic queries.
        self.on_answer: Callable[[str, Result], None] | None = None
        self.on_error: Callable[[str, Exception], None] | None = None
        self.on_slide: Callable[[str], None] | None = None  # after each slide installed live
        # one-time single-stream plans by (stream, query): a plan holds nothing of an execution, and
        # binding costs ~12 us of a ~150 us probe call; valid while the stream is the same object
        self._plans: collections.OrderedDict = collections.OrderedDict()

    # -- time ------------------------------------------------------------------------------------
    def tick(self, now_ms: float) -> None:
        """Advance the engine's clock (never backwards). Slides that fall due are applied by
        step(), each one emitted as a Slide command."""
        if now_ms > self.now_ms:
            self.now_ms = now_ms

    def step(self) -> str | None:
        """One scheduler operation: a due slide, or one read of the query it picks."""
        return self.sched.step()

    def run_now(self, plan, priority: int = 0, on_done=None, go_on=None):
        """A one-time query run now if nothing else is due first (Scheduler.run_now), else None."""
        return self.sched.run_now(plan, priority, on_done, go_on)

    def complete(self, job, value=None, error: BaseException | None = None, ms: float | None = None) -> str:
        """An offloaded job's result, handed back (Scheduler.complete): the read it computed is
        added, or the final merge commits (a periodic answer is then logged as Answered)."""
        return self.sched.complete(job, value, error, ms)

    @property
    def sealing(self) -> bool:
        """Whether a slide is being sealed elsewhere (Scheduler.seal_offload), or could not be
        sealed (a failed stream): its Slide is applied and logged, its sub-window not installed,
        so the state is not one the log describes (a snapshot waits; the log keeps everything)."""
        return bool(self.sched.sealing) or bool(self.sched.failed)

    def settle(self) -> None:
        """Seal every slide in flight here and now (Scheduler.settle), e.g. for a snapshot that
        has waited for them long enough; what they apply is drained and logged as usual."""
        for name in list(self.sched.sealing):
            self.sched.settle(name)

    def drain(self) -> list[Command]:
        """The commands applied since the last drain, in order (for the write-ahead log)."""
        out, self._out = self._out, []
        return out

    # -- commands --------------------------------------------------------------------------------
    def apply(self, cmd: Command):
        """Apply a client's command; raises with nothing applied when it is refused."""
        self.tick(cmd.now_ms)
        if isinstance(cmd, Append):
            return self._append(cmd)
        if isinstance(cmd, Slide):
            return self._manual_slide(cmd)
        if isinstance(cmd, CreateStream):
            return self._create(cmd)
        if isinstance(cmd, DropStream):
            return self._drop(cmd)
        if isinstance(cmd, Register):
            return self._register(cmd)
        if isinstance(cmd, Unregister):
            return self._unregister(cmd)
        if isinstance(cmd, StageRows):
            return self._stage(cmd)
        if isinstance(cmd, CommitBatch):
            return self._commit_batch(cmd)
        if isinstance(cmd, AbortBatch):
            return self._abort_batch(cmd)
        raise TypeError(f"not a command: {cmd!r}")

    def replay(self, cmd: Command) -> None:
        """Apply a command from the log. A Slide is applied as recorded, whatever its cause.

        A record this code refuses (an older version accepted it: say an event time whose
        sub-window bound leaves int64) stops its stream, saying why, and recovery goes on: the
        server starts, and every other stream is whole. The record stays in the log (no snapshot
        is taken while a stream is stopped), so dropping the stream is the operator's decision."""
        try:
            self._replay(cmd)
        except StoreError as e:
            name = getattr(cmd, "stream", None) or getattr(cmd, "name", None)
            if isinstance(e, StreamFailed) and name in self.sched.failed:
                return  # a later record of a stream stopped at an earlier one
            if name not in self.sched.streams:
                raise
            self.sched.stop_stream(name, f"stream {name!r} stopped at recovery: its log holds a {type(cmd).__name__} "
                                         f"this server refuses ({str(e)[:300]}); drop the stream to go on", e)

    def _replay(self, cmd: Command) -> None:
        if isinstance(cmd, CompactStrings):
            self.tick(cmd.now_ms)
            self.stream(cmd.stream).compact_strings()
            self._out.append(cmd)
        elif isinstance(cmd, Answered):
            self.tick(cmd.now_ms)
            if cmd.query_id in self.periodic:
                result = from_plain(dict(cmd.answer))
                self.answers.add(cmd.query_id, result)
                self.sched.resume(cmd.query_id, result)
            self._out.append(cmd)
        elif isinstance(cmd, Slide):
            self.tick(cmd.now_ms)
            stream = self.stream(cmd.stream)
            sub = self.sched.apply_slide(stream.name)
            self._note_slide_key(cmd.stream, cmd.writer_id, cmd.batch_id, sub.slide, sub.rows)
            self._out.append(cmd)
        else:
            self._replaying = True
            try:
                self.apply(cmd)
            finally:
                self._replaying = False

    def stream(self, name: str, failed_ok: bool = False) -> Stream:
        """The stream `name`: NotFound if there is none, StreamFailed if it stopped (unless
        `failed_ok`: dropping it is what is left to do)."""
        s = self.sched.streams.get(name)
        if s is None:
            raise NotFound(f"stream {name!r} does not exist")
        why = self.sched.failed.get(name) if not failed_ok else None
        if why is not None:
            raise StreamFailed(f"{why}; drop the stream, or restart the server to seal that slide again from its log")
        return s

    def plan(self, query, periodic: bool = False):
        """Plan a parsed query (Query or JoinQuery) against the streams: a store Plan, or a
        JoinQueryPlan (a one-time join keeps nothing between executions; a periodic one keeps its
        join result and is maintained eagerly). Raises NotFound for a stream that does not exist,
        and InvalidInput when SLIDE is missing (periodic) or present (one-time)."""
        if isinstance(query, JoinQuery):
            has_slide = any(s.slide is not None for s in query.sources)
            streams = {name: self.stream(name) for name in query.streams}
        else:
            has_slide = query.slide is not None
            streams = None
        if has_slide and not periodic:
            raise InvalidInput("a query with SLIDE is periodic: register it instead")
        if not has_slide and periodic:
            raise InvalidInput("a periodic query needs SLIDE (e.g. [RANGE 1 min SLIDE 10 s])")
        if streams is None:
            stream = self.stream(query.stream)
            if periodic:
                return plan_query(query, stream)
            key = (query.stream, query)
            hit = self._plans.get(key)
            if hit is not None and hit.stream is stream:
                return hit
            plan = self._plans[key] = plan_query(query, stream)
            if len(self._plans) > 1024:
                self._plans.popitem(last=False)  # the plan made longest ago
            return plan
        join = plan_join(query, streams, self.config.max_join_rows, cache=periodic)
        if join.by_key_ok and periodic:
            # a two-way equi-join aggregate: recomputing it per join key at each execution (no joined
            # rows formed) costs less than keeping any state between executions (bench/join_bench.py:
            # 0.4 ms vs 15-21 ms per slide eager or lazy), so such a periodic join keeps nothing
            join = plan_join(query, streams, self.config.max_join_rows, cache=False)
        return JoinQueryPlan(join, streams)

    def _emit(self, cmd: Command) -> None:
        self._out.append(cmd)

    def _create(self, cmd: CreateStream) -> Stream:
        if cmd.name in self.sched.streams:
            raise AlreadyExists(f"stream {cmd.name!r} already exists")
        if len(self.sched.streams) >= self.config.max_streams and not self._replaying:
            raise ResourceLimit(f"at most {self.config.max_streams} streams")
        stream = Stream(cmd.name, Schema.of(dict(cmd.columns), cmd.time_column), cmd.spec, created_ms=int(cmd.now_ms))
        self.sched.add_stream(stream)
        self.books[cmd.name] = StreamBook()
        self._emit(cmd)
        return stream

    def _drop(self, cmd: DropStream) -> list[str]:
        """Drops the stream and its periodic queries; returns their ids."""
        self.stream(cmd.name, failed_ok=True)
        for key in [k for k in self._plans if k[0] == cmd.name]:
            del self._plans[key]  # (they hold the dropped stream's window)
        for key in list(self.books[cmd.name].staged):
            self._discard(self.books[cmd.name], key)
        gone = [qid for qid, p in self.periodic.items() if cmd.name in stream_names(p.task.plan)]
        for qid in gone:
            del self.periodic[qid]
            self.answers.drop(qid)
        self.sched.drop_stream(cmd.name)
        book = self.books.pop(cmd.name)
        self.acks_kept -= sum(len(t) for tables in (book.acks, book.slide_acks) for t in tables.values())
        self._emit(cmd)
        return gone

    def _append(self, cmd: Append) -> AppendAck:
        stream = self.stream(cmd.stream)
        book = self.books[cmd.stream]
        keyed = bool(cmd.writer_id) and cmd.batch_id is not None
        checked, rows = stream.schema.check(cmd.batch)  # raises InvalidInput with nothing applied
        digest = 0
        if keyed:
            digest = batch_digest(checked, stream.schema.columns, rows)
            seen = book.acks.get(cmd.writer_id, {}).get(cmd.batch_id)
            if seen is not None:
                if seen.digest != digest:
                    raise FailedPrecondition(
                        f"batch {cmd.batch_id} of writer {cmd.writer_id!r} was already appended with other rows "
                        f"({seen.accepted + seen.late} then, {rows} now): an idempotency key names one batch")
                book.duplicate_batches += 1
                return AppendAck(seen.accepted, seen.late, True, seen.latest_slide, digest)
        self._admit(stream, rows)
        result = stream.append_checked(checked, rows)  # raises InvalidInput with nothing applied
        book.accepted_rows += result.accepted
        ack = AppendAck(result.accepted, result.late, False, stream.window.cut_through, digest)
        if keyed:
            self._remember(book.acks, cmd.writer_id, cmd.batch_id, ack)
        self._emit(cmd)
        return ack

    # -- staged batches: exactly-once micro-batches -----------------------------------------------
    def _committed(self, book: StreamBook, writer_id: str, batch_id: int) -> AppendAck | bool:
        """The ack of an earlier commit of this batch, True if it is older than what is remembered
        but at or below the writer's high-water mark, or False."""
        seen = book.acks.get(writer_id, {}).get(batch_id)
        if seen is not None:
            return seen
        return batch_id <= book.high_water.get(writer_id, -1)

    def _stage(self, cmd: StageRows) -> StageAck:
        stream = self.stream(cmd.stream)
        book = self.books[cmd.stream]
        if not cmd.writer_id or not cmd.attempt:
            raise InvalidInput("staged rows need a writer_id, a batch_id and an attempt")
        # Rows of a batch that is committed already are staged all the same: its commit then
        # compares them with what was committed (a replay must carry the same rows).
        checked, rows = stream.schema.check(cmd.batch)  # refused now, not at commit; nothing is interned yet
        stream.spec.check_event_times(checked[stream.schema.time_column], stream.schema.time_column)
        size = cmd.batch.nbytes
        if self.staged_bytes + size > self.config.max_staged_bytes and not self._replaying:
            raise ResourceLimit(f"{self.staged_bytes} bytes are staged by uncommitted batches "
                                f"(limit {self.config.max_staged_bytes}): commit or abort them")
        chunks = book.staged.setdefault((cmd.writer_id, cmd.batch_id), {}).setdefault(cmd.attempt, {})
        old = chunks.get(cmd.chunk)
        chunks[cmd.chunk] = cmd.batch
        self.staged_bytes += size - (old.nbytes if old is not None else 0)
        self._emit(cmd)
        return StageAck(sum(t.num_rows for t in chunks.values()),
                        self._committed(book, cmd.writer_id, cmd.batch_id) is not False)

    def _commit_batch(self, cmd: CommitBatch) -> CommitAck:
        stream = self.stream(cmd.stream)
        book = self.books[cmd.stream]
        key = (cmd.writer_id, cmd.batch_id)
        if not cmd.writer_id:
            raise InvalidInput("a batch commit needs a writer_id and a batch_id")
        staged = book.staged.get(key, {})
        attempts = sorted(dict(cmd.attempts).items())
        complete = all(_staged_rows(staged, a) == rows for a, rows in attempts)
        seen = self._committed(book, cmd.writer_id, cmd.batch_id)
        if seen is not False:
            # a replay (Spark re-runs a batch after a restart): compare what it staged, if it did
            if isinstance(seen, AppendAck) and attempts and staged and complete:
                checked, rows = _checked_union(stream, _staged_tables(staged, attempts))
                if batch_digest(checked, stream.schema.columns, rows) != seen.digest:
                    raise FailedPrecondition(
                        f"batch {cmd.batch_id} of {cmd.writer_id!r} was already committed with other rows "
                        f"({seen.accepted + seen.late} then, {rows} now): a replay must carry the same rows")
            self._discard(book, key)
            self._emit(cmd)
            book.duplicate_batches += 1
            ack = seen if isinstance(seen, AppendAck) else AppendAck(0, 0, True, stream.window.cut_through)
            return CommitAck(ack.accepted, ack.late, True, stream.window.cut_through)
        if not complete:
            got = {a: _staged_rows(staged, a) for a, _ in attempts}
            raise FailedPrecondition(f"batch {cmd.batch_id}: the attempts' tasks reported {dict(attempts)} rows but "
                                     f"{got} are staged: it cannot be committed (abort and retry it)")
        checked, rows = _checked_union(stream, _staged_tables(staged, attempts))
        if cmd.slide and (stream.spec.clock != "manual" or stream.spec.count_based):
            raise FailedPrecondition(f"stream {cmd.stream!r} does not slide on request (clock={stream.spec.clock!r})")
        self._admit(stream, rows)
        result = stream.append_checked(checked, rows)  # raises InvalidInput with nothing applied
        book.accepted_rows += result.accepted
        ack = AppendAck(result.accepted, result.late, False, stream.window.cut_through,
                        batch_digest(checked, stream.schema.columns, rows))
        self._remember(book.acks, cmd.writer_id, cmd.batch_id, ack)
        book.high_water[cmd.writer_id] = max(cmd.batch_id, book.high_water.get(cmd.writer_id, -1))
        published = sum(_staged_rows(staged, a) for a, _ in attempts)
        for older in [k for k in book.staged if k[0] == cmd.writer_id and k[1] <= cmd.batch_id]:
            self._discard(book, older)  # this batch's other attempts, and batches that can never commit
        book.discarded_rows -= published  # those were published, not discarded
        self._emit(cmd)
        if cmd.slide and not self._replaying:  # in the log, the slide follows as its own command
            self._slide_now(cmd.stream)
        return CommitAck(result.accepted, result.late, False, stream.window.cut_through)

    def _abort_batch(self, cmd: AbortBatch) -> int:
        book = self.books[self.stream(cmd.stream).name]
        rows = self._discard(book, (cmd.writer_id, cmd.batch_id))
        if rows is not None:
            self._emit(cmd)
        return rows or 0

    def _discard(self, book: StreamBook, key: tuple[str, int]) -> int | None:
        attempts = book.staged.pop(key, None)
        if attempts is None:
            return None
        tables = [t for chunks in attempts.values() for t in chunks.values()]
        self.staged_bytes -= sum(t.nbytes for t in tables)
        rows = sum(t.num_rows for t in tables)
        book.discarded_rows += rows
        return rows

    def _admit(self, stream: Stream, rows: int) -> None:
        """Admission control (never in replay: what was accepted once is applied again)."""
        if not self._replaying and stream.window.buffered_rows + rows > self.config.max_buffered_rows:
            advice = ("slide it or append less" if stream.spec.clock == "manual" else
                      "the next slide has not caught up with the rows arriving: retry after a backoff")
            raise ResourceLimit(
                f"stream {stream.name!r} has {stream.window.buffered_rows} rows waiting for a slide (limit "
                f"{self.config.max_buffered_rows}); {advice}")

    def _manual_slide(self, cmd: Slide) -> SlideAck:
        stream = self.stream(cmd.stream)
        book = self.books[cmd.stream]
        if cmd.writer_id and cmd.batch_id is not None:
            seen = book.slide_acks.get(cmd.writer_id, {}).get(cmd.batch_id)
            if seen is not None:
                return SlideAck(seen.slide, seen.rows, True)
        if stream.spec.clock != "manual" or stream.spec.count_based:
            raise FailedPrecondition(
                f"stream {cmd.stream!r} slides on its {'row count' if stream.spec.count_based else stream.spec.clock} "
                "clock; Slide applies to clock='manual' streams")
        self._slide_key = (cmd.writer_id, cmd.batch_id)
        try:
            self._slide_now(cmd.stream)
        finally:
            self._slide_key = ("", None)
        sub = stream.window.subs[stream.window.latest % stream.window.n]  # a manual clock: the newest is it
        return SlideAck(sub.slide, sub.rows, False)

    def _slide_now(self, name: str) -> None:
        """Request a slide of `name` and apply it through its install, in this call (its answer
        names the sub-window): slides due run first, under serial after the running query. The
        slide asked for is sealed in place; one of this stream that fell due first and went to be
        sealed elsewhere is sealed here (settle) so that the one asked for can be cut."""
        sched = self.sched
        sched.settle(name)
        sched.request_slide(name, in_place=True)
        while sched.manual_requests.get(name, 0) > 0:
            if sched.step() is None or name in sched.sealing:
                sched.settle(name)
        self.stream(name)  # StreamFailed if the slide asked for could not be sealed

    def _cut(self, name: str, cut, cause: str) -> None:
        """The scheduler began a slide: record it as a command, here, where its rows were cut from
        the buffer (a seal in flight is installed later; replay cuts, seals and installs at once)."""
        writer_id, batch_id = self._slide_key if cause == "manual" else ("", None)
        self._note_slide_key(name, writer_id, batch_id, cut.slide, cut.rows)
        self._emit(Slide(name, self.now_ms, writer_id, batch_id))

    def _slid(self, name: str, sub) -> None:
        """The scheduler installed a slide. If the string dictionary holds far more codes than the
        window does and no query is reading the stream, reclaim them (a write of the whole window,
        so only between queries; recorded too)."""
        if self.on_slide is not None:
            self.on_slide(name)
        stream = self.sched.streams[name]
        if stream.strings_need_compaction() and not any(t.begun and name in t.streams for t in self.sched.active):
            stream.compact_strings()
            self._emit(CompactStrings(name, self.now_ms))

    def _note_slide_key(self, name: str, writer_id: str, batch_id: int | None, slide: int, rows: int) -> None:
        if writer_id and batch_id is not None:
            self._remember(self.books[name].slide_acks, writer_id, batch_id, SlideAck(slide, rows, False))

    # -- idempotency tables: bounded per writer and in all -----------------------------------------
    def _remember(self, tables: dict[str, collections.OrderedDict], writer: str, batch_id: int, ack) -> None:
        """Remember an acknowledgement for replays. A writer keeps its newest idempotency_keep; all
        tables together keep at most idempotency_keep_total, beyond which the largest tables lose
        their oldest entries (a replay of a forgotten batch is applied again: the price of a bound).
        Eviction depends only on the commands applied, so replaying the log evicts the same."""
        table = tables.setdefault(writer, collections.OrderedDict())
        if batch_id not in table:
            self.acks_kept += 1
        table[batch_id] = ack
        if len(table) > self.config.idempotency_keep:
            table.popitem(last=False)
            self.acks_kept -= 1
        if self.acks_kept > self.config.idempotency_keep_total:
            self._evict_acks()

    def _evict_acks(self) -> None:
        """Down to 90% of the total bound, taking from the largest table first (ties by name)."""
        target = self.config.idempotency_keep_total * 9 // 10
        while self.acks_kept > target:
            _, name, kind, writer = min((-len(t), name, kind, writer) for name, book in self.books.items()
                                        for kind, tables in (("acks", book.acks), ("slide_acks", book.slide_acks))
                                        for writer, t in tables.items())
            tables = getattr(self.books[name], kind)
            table = tables[writer]
            for _ in range(min(len(table), max(1, self.acks_kept - target, len(table) // 10))):
                table.popitem(last=False)
                self.acks_kept -= 1
            if not table:
                del tables[writer]

    def _register(self, cmd: Register) -> PeriodicDef:
        if len(self.periodic) >= self.config.max_periodic_queries and not self._replaying:
            raise ResourceLimit(f"at most {self.config.max_periodic_queries} periodic queries")
        query = parse_statement(cmd.text)
        if isinstance(query, JoinQuery):
            plan = self.plan(query, periodic=True)
            every = first_with_slide(plan.join.sources)
        else:
            plan = plan_query(query, self.stream(query.stream))
            every = plan.bound.every
        if every is None:
            raise InvalidInput("a periodic query needs SLIDE (e.g. [RANGE 1 min SLIDE 10 s])")
        query_id = cmd.query_id or f"P{self.next_query}"
        if query_id in self.periodic:
            raise AlreadyExists(f"periodic query {query_id!r} already exists")
        m = _QUERY_ID.match(query_id)
        if m:
            self.next_query = max(self.next_query, int(m.group(1)) + 1)
        task = self.sched.register(plan, every, cmd.priority, task_id=query_id,
                                   on_answer=lambda r: self._answered(query_id, r),
                                   on_error=self._task_failed)
        p = PeriodicDef(query_id, cmd.text, cmd.priority, task, cmd.owner)
        self.periodic[query_id] = p
        self._emit(Register(query_id, cmd.text, cmd.priority, cmd.now_ms, cmd.owner))
        return p

    def _answered(self, query_id: str, result: Result) -> None:
        """A periodic query answered: its answer log keeps it, durably (logged as Answered), and
        the shell hears of it."""
        if query_id in self.periodic:
            self.answers.add(query_id, result)
            self._emit(Answered(query_id, to_plain(result), self.now_ms))
        if self.on_answer is not None:
            self.on_answer(query_id, result)

    def _unregister(self, cmd: Unregister) -> PeriodicDef:
        p = self.periodic.pop(cmd.query_id, None)
        if p is None:
            raise NotFound(f"periodic query {cmd.query_id!r} does not exist")
        self.answers.drop(cmd.query_id)
        self.sched.unregister(cmd.query_id)
        self._emit(cmd)
        return p

    def _task_failed(self, task: Task, error: Exception) -> None:
        if not task.active and self.periodic.pop(task.id, None) is not None:
            # failed for good (an internal error): its definition goes, durably
            self.answers.drop(task.id)
            self._emit(Unregister(task.id, self.now_ms))
        if self.on_error is not None:
            self.on_error(task.id, error)

    # -- snapshots ---------------------------------------------------------------------------------
    def capture(self) -> dict:
        """The durable state as plain data, cheap to take on the engine's thread: sealed sub-windows
        and buffered chunks are immutable and referenced, not copied; the string dictionary only
        grows, so its list and current length are enough. A writer thread can persist it while the
        engine goes on. Not while a slide is being sealed (`sealing`)."""
        assert not self.sealing, "capture the state between seals (and with no stream failed)"
        streams = []
        for name, s in self.sched.streams.items():
            w = s.window
            buffer, slots = w.open_chunks()
            book = self.books[name]
            streams.append({
                "name": name, "columns": [list(c) for c in s.schema.columns], "time_column": s.schema.time_column,
                "spec": {**s.spec.__dict__, "group_by": list(s.spec.group_by)}, "created_ms": s.created_ms,
                "strings": (s.strings.values, len(s.strings)),
                "window": w.counters(),
                "subs": [sub for sub in w.subs if sub is not None],
                "buffer": buffer,
                "slots": slots,
                "staged": [[w, b, a, dict(cs)] for (w, b), ats in book.staged.items() for a, cs in ats.items()],
                "high_water": dict(book.high_water),
                # (batch, ack) pairs: copied at C speed here, made plain data by the snapshot writer
                "book": {"accepted_rows": book.accepted_rows,
                         "acks": {k: list(v.items()) for k, v in book.acks.items()},
                         "slide_acks": {k: list(v.items()) for k, v in book.slide_acks.items()}},
            })
        return {"now_ms": self.now_ms, "next_query": self.next_query, "streams": streams,
                "periodic": [[p.query_id, p.text, p.priority, p.owner] for p in self.periodic.values()],
                "answers": self.answers.capture()}

    def restore(self, image: dict, subwindow: Callable) -> None:
        """Rebuild the state `capture` took (read back from disk) into this empty engine.
        `subwindow(window, meta)` returns a sealed sub-window of the restored stream."""
        assert not self.sched.streams and not self.periodic, "restore into an empty engine"
        self.now_ms = image["now_ms"]
        for st in image["streams"]:
            spec = WindowSpec(**{**st["spec"], "group_by": tuple(st["spec"]["group_by"])})
            stream = Stream(st["name"], Schema.of(dict(map(tuple, st["columns"])), st["time_column"]), spec,
                            created_ms=st["created_ms"])
            stream.strings.load(st["strings"])
            w, ws = stream.window, st["window"]
            w.restore([subwindow(w, meta) for meta in st["subs"]], ws["latest"], ws["prefix"], ws["last_seal_ms"],
                      ws["base_slot"], ws["max_event_ms"], ws["late_rows"], st["buffer"],
                      {int(k): v for k, v in st["slots"].items()})
            self.sched.add_stream(stream)
            book = StreamBook(accepted_rows=st["book"]["accepted_rows"])
            for writer, entries in st["book"]["acks"].items():
                book.acks[writer] = collections.OrderedDict((b, _ack(AppendAck, a)) for b, a in entries)
            for writer, entries in st["book"]["slide_acks"].items():
                book.slide_acks[writer] = collections.OrderedDict((b, _ack(SlideAck, a)) for b, a in entries)
            book.high_water = {w: int(b) for w, b in st["high_water"].items()}
            for writer, batch_id, attempt, chunks in st["staged"]:
                book.staged.setdefault((writer, batch_id), {})[attempt] = {int(c): t for c, t in chunks.items()}
                self.staged_bytes += sum(t.nbytes for t in chunks.values())
            self.books[st["name"]] = book
            self.acks_kept += sum(len(t) for tables in (book.acks, book.slide_acks) for t in tables.values())
        for query_id, text, priority, owner in image["periodic"]:
            self._register(Register(query_id, text, priority, self.now_ms, owner))
        self.answers.restore(image.get("answers", {}))  # a snapshot from before answer logs has none
        for query_id in self.answers.queries():
            self.sched.resume(query_id, self.answers.newest(query_id))
        self.next_query = image["next_query"]
        for stream in self.sched.streams.values():
            why = stream.window.refused_state()
            if why is not None:
                self.sched.stop_stream(stream.name, f"stream {stream.name!r} stopped at recovery: its snapshot holds "
                                                    f"a state this server refuses ({why}); drop the stream to go on")
        self._out.clear()

    # -- invariants and identity -----------------------------------------------------------------
    def _check(self) -> None:
        """Invariants of the engine, its scheduler and every window (property tests call this
        after every step)."""
        sched = self.sched
        assert set(self.books) == set(sched.streams), "a book per stream"
        assert set(self.periodic) == set(sched.tasks), "a definition per periodic task"
        staged = [t for b in self.books.values() for ats in b.staged.values() for cs in ats.values() for t in cs.values()]
        assert self.staged_bytes == sum(t.nbytes for t in staged), "staged bytes are accounted"
        kept = [t for b in self.books.values() for tables in (b.acks, b.slide_acks) for t in tables.values()]
        assert self.acks_kept == sum(len(t) for t in kept), "idempotency entries are accounted"
        assert self.acks_kept <= self.config.idempotency_keep_total, "the idempotency tables are bounded"
        assert all(len(t) <= self.config.idempotency_keep for t in kept), "each writer's table is bounded"
        for qid, p in self.periodic.items():
            assert p.task is sched.tasks[qid]
            plan = p.task.plan
            for s in (plan.streams if isinstance(plan, JoinQueryPlan) else [plan.stream]):
                assert s is sched.streams[s.name], "a periodic query reads live streams only"
            m = _QUERY_ID.match(qid)
            assert m is None or int(m.group(1)) < self.next_query
        self.answers.check(self.periodic)
        assert len(self._plans) <= 1024 and all(p.stream is sched.streams.get(n) for (n, _), p in self._plans.items()), \
            "cached plans are bounded and of live streams"
        sched._check()
        for stream in sched.streams.values():
            stream.window._check()
            _check_codes(stream)

    def digest(self) -> str:
        """A hash of the durable state: equal digests, equal stores (between seals, as capture)."""
        assert not self.sched.sealing, "a digest of the state between seals"
        h = hashlib.sha256()

        def put(*parts) -> None:
            for part in parts:
                h.update(part if isinstance(part, bytes) else repr(part).encode())

        put(self.next_query, sorted((p.query_id, p.text, p.priority, p.owner) for p in self.periodic.values()))
        put(self.answers.digest_parts())
        for name in sorted(self.sched.streams):
            s = self.sched.streams[name]
            w = s.window
            counters = w.counters()
            put(name, s.schema, s.spec, s.created_ms, s.strings.values, *(counters[k] for k in (
                "latest", "last_seal_ms", "base_slot", "max_event_ms", "late_rows")), sorted(counters["prefix"].items()))
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
            book = self.books[name]
            put(book.accepted_rows, [(k, list(v.items())) for k, v in sorted(book.acks.items())],
                [(k, list(v.items())) for k, v in sorted(book.slide_acks.items())], sorted(book.high_water.items()))
            for key in sorted(book.staged):
                for attempt in sorted(book.staged[key]):
                    chunks = book.staged[key][attempt]
                    put(key, attempt, [(c, chunks[c].to_pylist()) for c in sorted(chunks)])
        return h.hexdigest()


def _ack(cls, value):
    """An acknowledgement as captured (the object) or as read back from a snapshot (its fields)."""
    return value if isinstance(value, cls) else cls(*value)


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


def _check_codes(stream: Stream) -> None:
    """Every string code a live sub-window holds is in the stream's dictionary."""
    w = stream.window
    live = w.youngest(w.n)
    codes = [sub.columns[c] for sub in live for c, t in stream.schema.columns if t == "string"]
    if codes and any(len(c) for c in codes):
        assert int(max(int(c.max()) for c in codes if len(c))) < len(stream.strings)
