"""The engine: the one place where the store's state changes.

It owns the scheduler (streams, windows, queries), the idempotency tables and per-stream counters,
and the periodic query definitions with their ids. State changes only by applying commands
(commands.py); every command applied is also emitted (`drain()`), in the order applied, for the
write-ahead log. Replaying the emitted commands into an empty engine (`replay`) rebuilds the same
state bit for bit (`digest()`), which is what recovery does and what the tests check.

This module dispatches commands and holds what they change: streams, plans, slides and periodic
queries. Appends and staged batches with their idempotency tables are applied in ingest.py; the
state as one image (capture, restore, digest) is image.py; the refusals are errors.py.

No threads, sockets, files or wall clock: time is the `now_ms` each command carries, and `tick`
for the scheduler's reads. The server (server/driver/, on its event loop) moves commands in and results out.
"""
from __future__ import annotations

import base64
import collections
import re
from dataclasses import dataclass
from typing import Callable

from windowstore.store import InvalidInput, Schema, Stream, StoreError, plan_query
from windowstore.store import sketch_columns
from windowstore.store.hop import mentions_bounds
from windowstore.store.errors import ResourceLimit
from windowstore.store.join import DEFAULT_MAX_ROWS, plan_join
from windowstore.store.parser import parse_statement
from windowstore.store.query import JoinQuery

from . import ingest
from .answer_cache import AnswerCache
from .answers import AnswerLog, from_plain, many_from_plain, many_to_plain, to_plain
from .commands import (AbortBatch, Answered, Append, Command, CommitBatch, CompactStrings, CreateStream, DropStream,
                       AnsweredMany, Register, SealedSketches, Slide, StageRows, Unregister)
from .errors import AlreadyExists, FailedPrecondition, NotFound
from .history import History
from .image import capture as capture_image, digest as digest_state, restore as restore_image
from .ingest import AppendAck, CommitAck, SlideAck, StageAck, StreamBook
from .joins import JoinQueryPlan, first_with_slide, stream_names
from .scheduler import Result, Scheduler, StreamFailed, Task

__all__ = ["AlreadyExists", "AppendAck", "CommitAck", "Engine", "EngineConfig", "FailedPrecondition", "NotFound",
           "PeriodicDef", "SlideAck", "StageAck", "StreamBook"]


@dataclass
class EngineConfig:
    policy: str = "ttu"
    max_restarts: int = 16
    fallback_after: int = 2          # ttu(-rescan): aborts (re-scans) by slides before a query holds its windows (Outcomes._fall_back)
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
    max_pending_commits: int = 10_000  # per stream: batch commits held for a later sub-window (at_slide)
    # The server's CPU clock (seconds) for periodic temporal queries' paired measurements of eager
    # and lazy coalescing (store/temporal.MeasuredChoice); None: the cost model's choice alone.
    work_clock: Callable[[], float] | None = None
    # one-time answers kept while their window is unchanged (answer_cache.py): at most this many,
    # and about this many bytes of them; 0 entries: no cache
    answer_cache_entries: int = 0
    answer_cache_bytes: int = 16 << 20


@dataclass
class PeriodicDef:
    query_id: str
    text: str
    priority: int
    task: Task
    owner: str = ""
    sketches: bool = False  # registered with return_sketches: its answers carry their merged sketches
    key: str = ""  # the idempotency key it was registered with ("" none; unique among the live ones)


_QUERY_ID = re.compile(r"^P(\d+)$")


class Engine:
    def __init__(self, config: EngineConfig | None = None, history: History | None = None):
        self.config = config or EngineConfig()
        self.now_ms = 0.0
        self.sched = Scheduler(self.config.policy, lambda: self.now_ms, history, self.config.max_restarts,
                               self.config.fallback_after)
        if self.config.sharing != "none":  # (txn/sharing/runtime.py hooks into the scheduler)
            from .sharing.runtime import SharedTasks
            self.sched.sharing = SharedTasks(self.config.sharing)
        self.sched.on_cut = self._cut
        self.sched.on_slide = self._slid
        self.sched.on_answers = self._answered_many
        if self.config.answer_cache_entries > 0 and self.config.answer_cache_bytes > 0:
            self.sched.answer_cache = AnswerCache(self.config.answer_cache_entries, self.config.answer_cache_bytes)
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

    @property
    def replaying(self) -> bool:
        """Whether the command being applied comes from the log (replay): what was accepted once
        is applied again, past the limits that refuse a client's command."""
        return self._replaying

    def drain(self) -> list[Command]:
        """The commands applied since the last drain, in order (for the write-ahead log)."""
        out, self._out = self._out, []
        return out

    # -- commands --------------------------------------------------------------------------------
    def apply(self, cmd: Command):
        """Apply a client's command; raises with nothing applied when it is refused."""
        self.tick(cmd.now_ms)
        if isinstance(cmd, Append):
            return ingest.append(self, cmd)
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
            return ingest.stage(self, cmd)
        if isinstance(cmd, CommitBatch):
            return ingest.commit_batch(self, cmd)
        if isinstance(cmd, AbortBatch):
            return ingest.abort_batch(self, cmd)
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
        elif isinstance(cmd, AnsweredMany):  # a shared execution's answers: as their Answered records would
            self.tick(cmd.now_ms)
            for qid, result in many_from_plain(cmd.answers, cmd.members, cmd.common):
                if qid in self.periodic:
                    self.answers.add(qid, result)
                    self.sched.resume(qid, result)
            self._out.append(cmd)
        elif isinstance(cmd, SealedSketches):  # the KLL sketches as first sealed, over the rebuilt ones
            self.tick(cmd.now_ms)
            data = {k: base64.b64decode(v) for k, v in cmd.sketches.items()}
            self.stream(cmd.stream).window.adopt_sketches(cmd.slide, data)
            self._out.append(cmd)
        elif isinstance(cmd, Slide):
            self.tick(cmd.now_ms)
            stream = self.stream(cmd.stream)
            sub = self.sched.apply_slide(stream.name)
            self._note_slide_key(cmd.stream, cmd.writer_id, cmd.batch_id, sub.slide, sub.rows)
            self._out.append(cmd)
            ingest.apply_due(self, stream.name)
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
            if periodic and getattr(query.shape, "recurs", False):  # CUMULATE: every STEP (store/cumulative.py)
                has_slide = True
            # a one-time query answered per window (window_start, window_end) takes SLIDE: its hop
            if has_slide and not periodic and mentions_bounds(query, self.stream(query.stream).schema.types):
                has_slide = False
        if has_slide and not periodic:
            raise InvalidInput("a query with SLIDE is periodic: register it instead")
        if not has_slide and periodic:
            raise InvalidInput("a periodic query needs SLIDE (e.g. [RANGE 1 min SLIDE 10 s])")
        if streams is None:
            stream = self.stream(query.stream)
            if periodic:
                return plan_query(query, stream, periodic=True, work_clock=self.config.work_clock)
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

    def emit(self, cmd: Command) -> None:
        """Record a command as applied: drain() hands it to the write-ahead log (ingest.py's
        functions emit the commands they apply, as the engine's own methods do)."""
        self._out.append(cmd)

    def _create(self, cmd: CreateStream) -> Stream:
        if cmd.name in self.sched.streams:
            raise AlreadyExists(f"stream {cmd.name!r} already exists")
        if len(self.sched.streams) >= self.config.max_streams and not self._replaying:
            raise ResourceLimit(f"at most {self.config.max_streams} streams")
        stream = Stream(cmd.name, Schema.of(dict(cmd.columns), cmd.time_column), cmd.spec, created_ms=int(cmd.now_ms))
        self.sched.add_stream(stream)
        self.books[cmd.name] = StreamBook()
        self.emit(cmd)
        return stream

    def _drop(self, cmd: DropStream) -> list[str]:
        """Drops the stream and its periodic queries; returns their ids."""
        self.stream(cmd.name, failed_ok=True)
        for key in [k for k in self._plans if k[0] == cmd.name]:
            del self._plans[key]  # (they hold the dropped stream's window)
        for key in list(self.books[cmd.name].staged):
            ingest.discard(self, self.books[cmd.name], key)
        gone = [qid for qid, p in self.periodic.items() if cmd.name in stream_names(p.task.plan)]
        for qid in gone:
            del self.periodic[qid]
            self.answers.drop(qid)
        self.sched.drop_stream(cmd.name)
        book = self.books.pop(cmd.name)
        self.acks_kept -= sum(len(t) for tables in (book.acks, book.slide_acks) for t in tables.values())
        self.emit(cmd)
        return gone

    def _manual_slide(self, cmd: Slide) -> SlideAck:
        stream = self.stream(cmd.stream)
        book = self.books[cmd.stream]
        if cmd.writer_id and cmd.batch_id is not None:
            seen = book.slide_ack(cmd.writer_id, cmd.batch_id)
            if seen is not None:
                return SlideAck(seen.slide, seen.rows, True)
        if stream.spec.clock != "manual" or stream.spec.count_based:
            raise FailedPrecondition(
                f"stream {cmd.stream!r} slides on its {'row count' if stream.spec.count_based else stream.spec.clock} "
                "clock; Slide applies to clock='manual' streams")
        self._slide_key = (cmd.writer_id, cmd.batch_id)
        try:
            self.slide_now(cmd.stream)
        finally:
            self._slide_key = ("", None)
        sub = stream.window.subs[stream.window.latest % stream.window.n]  # a manual clock: the newest is it
        assert sub is not None, "a slide leaves its newest sub-window in place"
        return SlideAck(sub.slide, sub.rows, False)

    def slide_now(self, name: str) -> None:
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
                sched.settle_held(name)  # a query holding the window (serial, or fallen back) commits first
        self.stream(name)  # StreamFailed if the slide asked for could not be sealed

    def _cut(self, name: str, cut, cause: str) -> None:
        """The scheduler began a slide: record it as a command, here, where its rows were cut from
        the buffer (a seal in flight is installed later; replay cuts, seals and installs at once)."""
        writer_id, batch_id = self._slide_key if cause == "manual" else ("", None)
        self._note_slide_key(name, writer_id, batch_id, cut.slide, cut.rows)
        self.emit(Slide(name, self.now_ms, writer_id, batch_id))
        ingest.apply_due(self, name)  # commits held for the sub-window this slide opens

    def _slid(self, name: str, sub) -> None:
        """The scheduler installed a slide. If the string dictionary holds far more codes than the
        window does and no query is reading the stream, reclaim them (a write of the whole window,
        so only between queries; recorded too)."""
        if self.on_slide is not None:
            self.on_slide(name)
        stream = self.sched.streams[name]
        kept = sketch_columns.unrepeatable(stream.window.spec.sketches, sub.synopsis.sketches)
        if kept:  # what a replay of the slide's rows would not seal again bit for bit
            self.emit(SealedSketches(name, sub.slide, {k: base64.b64encode(v).decode() for k, v in kept.items()},
                                     self.now_ms))
        if stream.strings_need_compaction() and not any(t.begun and name in t.streams for t in self.sched.active):
            stream.compact_strings()
            self.emit(CompactStrings(name, self.now_ms))

    def _note_slide_key(self, name: str, writer_id: str, batch_id: int | None, slide: int, rows: int) -> None:
        if writer_id and batch_id is not None:
            ingest.remember(self, self.books[name].slide_acks, writer_id, batch_id, SlideAck(slide, rows, False))

    def _register(self, cmd: Register) -> PeriodicDef:
        if cmd.key:  # a retried RegisterQuery whose first attempt was applied: the same registration
            same = next((p for p in self.periodic.values() if p.key == cmd.key), None)
            if same is not None:
                if (same.text, same.owner, same.sketches) != (cmd.text, cmd.owner, cmd.sketches):
                    raise InvalidInput(f"request_key {cmd.key[:100]!r} is the key of periodic query "
                                       f"{same.query_id!r}, registered with another query or options")
                return same
        if len(self.periodic) >= self.config.max_periodic_queries and not self._replaying:
            raise ResourceLimit(f"at most {self.config.max_periodic_queries} periodic queries")
        query = parse_statement(cmd.text)
        if isinstance(query, JoinQuery):
            plan = self.plan(query, periodic=True)
            every = first_with_slide(plan.join.sources)
        else:
            plan = plan_query(query, self.stream(query.stream), periodic=True, keeps_sketches=cmd.sketches,
                              work_clock=self.config.work_clock)
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
        p = PeriodicDef(query_id, cmd.text, cmd.priority, task, cmd.owner, cmd.sketches, cmd.key)
        self.periodic[query_id] = p
        self.emit(Register(query_id, cmd.text, cmd.priority, cmd.now_ms, cmd.owner, cmd.sketches, cmd.key))
        return p

    def _answered(self, query_id: str, result: Result) -> None:
        """A periodic query answered: its answer log keeps it, durably (logged as Answered), and
        the shell hears of it."""
        if query_id in self.periodic:
            self.answers.add(query_id, result)
            self.emit(Answered(query_id, to_plain(result), self.now_ms))
        if self.on_answer is not None:
            self.on_answer(query_id, result)

    def _answered_many(self, told: list) -> None:
        """The answers of one shared execution (txn/sharing/runtime.py): each kept in its query's
        answer log as _answered does, and logged as one AnsweredMany record (each distinct answer
        once) instead of an Answered per member; then the shell hears of each. A task not
        registered through this engine hears as it would alone."""
        mine = []
        periodic = self.periodic
        for task, r in told:
            p = periodic.get(task.id)
            if p is None or p.task is not task:
                task.on_answer(r)
                continue
            mine.append((task.id, r))
        self.answers.add_many(mine)
        if len(mine) == 1:
            self.emit(Answered(mine[0][0], to_plain(mine[0][1]), self.now_ms))
        elif mine:
            answers, members, common = many_to_plain(mine)
            self.emit(AnsweredMany(answers, members, self.now_ms, common))
        if self.on_answer is not None:
            for qid, r in mine:
                self.on_answer(qid, r)

    def _unregister(self, cmd: Unregister) -> PeriodicDef:
        p = self.periodic.pop(cmd.query_id, None)
        if p is None:
            raise NotFound(f"periodic query {cmd.query_id!r} does not exist")
        self.answers.drop(cmd.query_id)
        self.sched.unregister(cmd.query_id)
        self.emit(cmd)
        return p

    def _task_failed(self, task: Task, error: Exception) -> None:
        if not task.active and self.periodic.pop(task.id, None) is not None:
            # failed for good (an internal error): its definition goes, durably
            self.answers.drop(task.id)
            self.emit(Unregister(task.id, self.now_ms))
        if self.on_error is not None:
            self.on_error(task.id, error)

    # -- snapshots ---------------------------------------------------------------------------------
    def capture(self) -> dict:
        """The durable state as plain data (image.capture); not while a slide is being sealed."""
        return capture_image(self)

    def restore(self, image: dict, subwindow: Callable) -> None:
        """Rebuild the state `capture` took into this empty engine (image.restore)."""
        restore_image(self, image, subwindow)

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
        for name, b in self.books.items():
            open_ = sched.streams[name].window.cut_through + 1
            assert all(p.at_slide > open_ for p in b.pending.values()), "a pending commit's sub-window is ahead"
            assert len(b.pending) <= self.config.max_pending_commits, "pending commits are bounded"
        assert all(len(t) <= self.config.idempotency_keep for t in kept), "each writer's table is bounded"
        for qid, p in self.periodic.items():
            assert p.task is sched.tasks[qid]
            plan = p.task.plan
            for s in (plan.streams if isinstance(plan, JoinQueryPlan) else [plan.stream]):
                assert s is sched.streams[s.name], "a periodic query reads live streams only"
            m = _QUERY_ID.match(qid)
            assert m is None or int(m.group(1)) < self.next_query
        keys = [p.key for p in self.periodic.values() if p.key]
        assert len(keys) == len(set(keys)), "an idempotency key names one live registration"
        self.answers.check(self.periodic)
        assert len(self._plans) <= 1024 and all(p.stream is sched.streams.get(n) for (n, _), p in self._plans.items()), \
            "cached plans are bounded and of live streams"
        sched._check()
        for stream in sched.streams.values():
            stream.window._check()
            _check_codes(stream)

    def digest(self) -> str:
        """A hash of the durable state: equal digests, equal stores (image.digest)."""
        return digest_state(self)



def _check_codes(stream: Stream) -> None:
    """Every string code a live sub-window holds is in the stream's dictionary."""
    w = stream.window
    live = w.youngest(w.n)
    codes = [sub.columns[c] for sub in live for c, t in stream.schema.columns if t == "string"]
    if codes and any(len(c) for c in codes):
        assert int(max(int(c.max()) for c in codes if len(c))) < len(stream.strings)
