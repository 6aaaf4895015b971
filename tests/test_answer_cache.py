"""The answer cache (txn/answer_cache.py): a one-time query asked again of an unchanged window is
answered from its last answer. Its answers are those of the same query with the cache off on the
same state and DuckDB's over the window's rows, through appends, processing- and event-time slides,
late rows, a stream dropped and created again, under every policy; the history with its hits
passes the isolation checker, which rejects a hit recorded at a stale window; it stays within its
bounds."""
from __future__ import annotations

import dataclasses

import duckdb
import pyarrow as pa
import pytest
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from conftest import examples
from windowstore.store import InvalidInput, Stream, WindowSpec, parse_query, plan_query
from windowstore.txn import POLICIES, History, Scheduler, check
from windowstore.txn.answer_cache import AnswerCache, CachedAnswer, answer_bytes
from windowstore.txn.commands import Append, CreateStream, DropStream
from windowstore.txn.engine import Engine, EngineConfig, FailedPrecondition
from windowstore.txn.history import Op
from windowstore.txn.scheduler import ONETIME

COLUMNS = (("ts", "int64"), ("k", "string"), ("v", "int64"))
N = 4
# (windowstore text, DuckDB SQL over table t, sub-windows read): the kinds of query
QUERIES = [
    ("SELECT SUM(v), COUNT(*) FROM {s} [RANGE 3 SUBWINDOWS]", "SELECT SUM(v), COUNT(*) FROM t", 3),  # probe
    ("SELECT k, SUM(v) FROM {s} [RANGE 3 SUBWINDOWS] GROUP BY k ORDER BY 2 DESC, 1 LIMIT 2",
     "SELECT k, SUM(v) FROM t GROUP BY k ORDER BY 2 DESC, 1 LIMIT 2", 3),  # GROUP BY top-k
    ("SELECT COUNT(*) FROM {s} [RANGE 4 SUBWINDOWS] WHERE v > 5", "SELECT COUNT(*) FROM t WHERE v > 5", 4),
    ("SELECT MEDIAN(v) FROM {s} [RANGE 4 SUBWINDOWS]", "SELECT quantile_disc(v, 0.5) FROM t", 4),
]
PINNED = ("SELECT SUM(v), COUNT(*) FROM {s} [RANGE 2 SUBWINDOWS] AS OF SLIDE {k}", "SELECT SUM(v), COUNT(*) FROM t", 2)


def create(name: str, event: bool, now: float) -> CreateStream:
    spec = (WindowSpec(N, 100, None, "event", 50, ("k",), 4) if event else
            WindowSpec(N, 100, None, "processing", 0, ("k",), 4))
    return CreateStream(name, COLUMNS, "ts", spec, now)


def table(rows: list[tuple[int, str, int]]) -> pa.Table:
    return pa.table({"ts": pa.array([r[0] for r in rows], pa.int64()), "k": pa.array([r[1] for r in rows], pa.string()),
                     "v": pa.array([r[2] for r in rows], pa.int64())})


def window_rows(stream: Stream, versions: range) -> list[tuple]:
    """The rows of these slides' sub-windows, decoded (the store's columns; DuckDB aggregates)."""
    out = []
    for v in versions:
        sub = stream.window.sealed(v)
        ts, k, val = sub.columns["ts"], sub.columns["k"], sub.columns["v"]
        out += [(int(ts[i]), stream.strings.values[int(k[i])], int(val[i])) for i in range(sub.rows)]
    return out


def duckdb_answer(sql: str, rows: list[tuple]) -> list[tuple]:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (ts BIGINT, k VARCHAR, v BIGINT)")
    if rows:
        con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    return [tuple(r) for r in con.execute(sql).fetchall()]


class CachedAgainstUncached(RuleBasedStateMachine):
    """Two engines fed the same commands, one with the answer cache and one without; every query is
    asked of both (twice in a row of the cached one, the second a hit when the first was kept)."""

    @initialize(policy=st.sampled_from(POLICIES))
    def start(self, policy):
        self.now = 1000.0
        self.history = History()
        self.cached = Engine(EngineConfig(policy=policy, answer_cache_entries=6, answer_cache_bytes=1 << 20), self.history)
        self.plain = Engine(EngineConfig(policy=policy))
        self.policy = policy
        self.generation = 0
        for e in (self.cached, self.plain):
            e.apply(create("p", False, self.now))
            e.apply(create("e", True, self.now))
        self.max_event = 0
        # the checker knows one stream per name: each generation of a stream is judged apart
        self.generations = {"p": [0], "e": [0]}

    def both(self, cmd) -> None:
        outcome = []
        for e in (self.cached, self.plain):
            try:
                e.apply(cmd)
                outcome.append(None)
            except (InvalidInput, FailedPrecondition) as err:
                outcome.append(type(err))
        assert outcome[0] == outcome[1]

    def settle(self) -> None:
        for e in (self.cached, self.plain):
            e.tick(self.now)
            e.sched.run_until_idle()
            e.drain()

    @rule(rows=st.lists(st.tuples(st.integers(0, 400), st.sampled_from("abcde"), st.integers(-3, 20)), max_size=8))
    def append_processing(self, rows):
        self.both(Append("p", table(rows), "", None, self.now))

    @rule(offsets=st.lists(st.tuples(st.integers(-70, 150), st.sampled_from("abcde"), st.integers(-3, 20)), max_size=8))
    def append_event(self, offsets):
        """Event times around the newest seen: some late within the lateness (50 ms), some beyond."""
        rows = [(max(0, self.max_event + d), k, v) for d, k, v in offsets]
        self.both(Append("e", table(rows), "", None, self.now))
        self.max_event = max([self.max_event, *(r[0] for r in rows)])

    @rule(ms=st.integers(0, 250))
    def time_passes(self, ms):
        """Processing time goes on; due slides (processing time, event-time watermarks) are applied."""
        self.now += ms
        self.settle()

    @rule(event=st.booleans())
    def drop_and_create_again(self, event):
        name = "e" if event else "p"
        self.both(DropStream(name, self.now))
        self.generations[name].append(self.history.seq)
        self.both(create(name, event, self.now))
        if event:
            self.max_event = 0

    @rule(i=st.integers(0, len(QUERIES) - 1), event=st.booleans())
    def query(self, i, event):
        text, sql, n_q = QUERIES[i]
        self.ask(text.format(s="e" if event else "p"), sql, n_q, None)

    @rule(event=st.booleans(), back=st.integers(0, 2))
    def query_pinned(self, event, back):
        name = "e" if event else "p"
        self.settle()  # (due slides first: the slide asked for must still be in the window)
        latest = self.cached.sched.streams[name].window.latest
        if latest - back < 0:
            return
        text, sql, n_q = PINNED
        self.ask(text.format(s=name, k=latest - back), sql, n_q, latest - back)

    def ask(self, text: str, sql: str, n_q: int, as_of: int | None) -> None:
        self.settle()  # nothing due: run_now starts the query (the server's path)
        query = parse_query(text)
        # a request noted on an earlier hit (the server's raw bytes; the text here) is answered
        # without a plan wherever its entry still answers: then it must be the plain engine's answer
        known = self.cached.sched.answer_known(text)
        answers = []
        for e in (self.cached, self.plain):
            if e is self.cached and known is not None:
                answers.append(known)
                continue
            txn = e.run_now(e.plan(query))
            assert txn is not None and txn.done, "run_now starts a query when nothing is due"
            assert txn.result is not None, txn.error
            answers.append(txn.result)
            e._check()
        cache = self.cached.sched.answer_cache
        for _ in range(2):  # a plan's first execution is not kept (AnswerCache.admits): the third is a hit
            hits = cache.hits
            again = self.cached.run_now(self.cached.plan(query))
            assert again is not None and again.done and again.result is not None
            self.cached._check()
        kept = cache.hits == hits + 1
        if not kept:  # only an answer too large for the cache is not kept
            assert answer_bytes(answers[0].answer) > cache.max_bytes
        self.cached._check()
        first, plain = answers
        for got in (first, again.result):
            assert got.answer.rows == plain.answer.rows, (text, got.answer.rows, plain.answer.rows)
            assert (got.slide, got.window_start_ms, got.window_end_ms) == (plain.slide, plain.window_start_ms,
                                                                           plain.window_end_ms)
        assert again.result.txn != first.txn and again.result.answered_ms == self.now and again.result.restarts == 0
        if kept:  # the request noted, it is known from now on while the entry answers
            cache.note_request(text, again.result.cached, len(text))
            fast = self.cached.sched.answer_known(text)
            assert fast is not None and fast.cached is again.result.cached and fast.txn != again.result.txn
            self.cached._check()
        stream = self.cached.sched.streams[query.stream]
        top = stream.window.latest if as_of is None else as_of
        assert first.slide == top
        want = duckdb_answer(sql, window_rows(stream, range(max(0, top - n_q + 1), top + 1)))
        assert [tuple(r) for r in first.answer.rows] == want, (text, first.answer.rows, want)

    @invariant()
    def consistent(self):
        if hasattr(self, "cached"):
            self.cached._check()
            self.plain._check()

    def teardown(self):
        if not hasattr(self, "cached"):
            return
        events = self.history.events
        for name, starts in self.generations.items():
            for start, end in zip(starts, [*starts[1:], self.history.seq]):
                report = check(e for e in events if e["stream"] == name and start <= e["seq"] < end)
                assert report.errors == []
                assert report.violations("ws" if self.policy == "ws" else "lws") == []


CachedAgainstUncached.TestCase.settings = settings(max_examples=examples(40), stateful_step_count=30, deadline=None)
test_cached_answers_equal_uncached_and_duckdb = CachedAgainstUncached.TestCase


# -- the history of a hit --------------------------------------------------------------------------------

def manual_world(policy: str = "ttu", entries: int = 8, nbytes: int = 1 << 20):
    history = History()
    now = [0]
    sched = Scheduler(policy, clock=lambda: now[0], history=history)
    sched.answer_cache = AnswerCache(entries, nbytes)
    stream = Stream("s", {"ts": "int64", "k": "string", "v": "int64"}, WindowSpec(N, 1, clock="manual"), 0)
    sched.add_stream(stream)

    def slide(rows=3):
        stream.append({"ts": [now[0]] * rows, "k": ["a"] * rows, "v": list(range(rows))})
        sched.request_slide("s")
        assert sched.step() == "slide"
        now[0] += 1
    return sched, stream, history, slide


@pytest.mark.parametrize("policy", POLICIES)
def test_a_hit_is_recorded_as_a_read_of_the_current_window_and_the_checker_passes(policy):
    sched, stream, history, slide = manual_world(policy)
    for _ in range(N + 2):
        slide()
    for text in ("SELECT SUM(v) FROM s [RANGE 3 SUBWINDOWS]", "SELECT COUNT(*) FROM s [RANGE 3 SUBWINDOWS] WHERE v > 0"):
        plan = plan_query(parse_query(text), stream)
        sched.run_now(plan)  # a plan's first execution is not kept (AnswerCache.admits)
        first = sched.run_now(plan)
        hit = sched.run_now(plan)
        assert sched.answer_cache.hits >= 1 and hit.result.answer.rows == first.result.answer.rows
        events = [e for e in history.events if e["txn"] == hit.id]
        assert [e["op"] for e in events] == [Op.BEGIN, Op.READ, Op.READ, Op.READ, Op.COMMIT]
        latest = stream.window.latest
        assert sorted(e["version"] for e in events if e["op"] == Op.READ) == [latest - 2, latest - 1, latest]
        assert all(e["subwindow"] == e["version"] % N for e in events if e["op"] == Op.READ)
        slide()
        hits = sched.answer_cache.hits
        missed = sched.run_now(plan)  # the window moved: computed again, over the new window
        assert sched.answer_cache.hits == hits
        assert sorted(e["version"] for e in history.events if e["txn"] == missed.id and e["op"] == Op.READ) == \
            [latest - 1, latest, latest + 1]
        sched._check()
    report = check(history.events)
    assert report.errors == [] and report.violations("ws" if policy == "ws" else "lws") == []


def test_the_checker_rejects_a_hit_recorded_at_a_stale_window():
    """A hit answered from an entry of an older window state (what a missed version bump would
    give): its reads are the older window's, and the checker finds it not latest-window serializable."""
    sched, stream, history, slide = manual_world()
    for _ in range(N + 1):
        slide()
    plan = plan_query(parse_query("SELECT SUM(v) FROM s [RANGE 3 SUBWINDOWS]"), stream)
    sched.run_now(plan)
    sched.run_now(plan)
    (entry,) = sched.answer_cache.entries()
    slide()
    assert check(history.events).violations("lws") == []
    stale = dataclasses.replace(entry, version=stream.window.version)  # a bump missed: still "valid"
    sched.answer_cache.put(stale)
    hit = sched.run_now(plan)
    assert hit.result.slide == entry.slide == stream.window.latest - 1
    bad = check(history.events).violations("lws")
    assert [v.txn for v in bad] == [hit.id] and bad[0].reflects == entry.slide


def test_a_pinned_hit_is_judged_against_its_slide():
    sched, stream, history, slide = manual_world()
    for _ in range(N):
        slide()
    plan = plan_query(parse_query("SELECT SUM(v) FROM s [RANGE 2 SUBWINDOWS] AS OF SLIDE 2"), stream)
    first, kept, hit = sched.run_now(plan), sched.run_now(plan), sched.run_now(plan)
    assert sched.answer_cache.hits == 1 and hit.result.answer.rows == first.result.answer.rows == kept.result.answer.rows
    slide()  # slide 2's window is still live, but the window's version moved: a miss, computed again
    again = sched.run_now(plan)
    assert sched.answer_cache.hits == 1 and again.result.answer.rows == first.result.answer.rows
    report = check(history.events)
    assert report.errors == [] and report.count("as_of") == 4


def test_every_change_of_the_committed_window_moves_its_version():
    """What a query can see changes only with Window.version: a slide's install, adopted sketches,
    renumbered strings; and the window's _check fails where a change went unstamped."""
    sched, stream, history, slide = manual_world()
    w = stream.window
    seen = [w.version]
    for _ in range(N + 1):
        slide()
        assert w.version > seen[-1]
        seen.append(w.version)
    w.remap_strings(stream.strings.compact(w.live_codes()))
    assert w.version > seen[-1]
    w._check()
    sub = w.sealed(w.latest)
    w.subs[sub.position] = dataclasses.replace(sub)  # a change that forgot its bump
    with pytest.raises(AssertionError, match="bumps its version"):
        w._check()


def test_the_cache_is_bounded_by_entries_and_bytes_least_recently_used_out():
    sched, stream, history, slide = manual_world(entries=3, nbytes=1 << 20)
    for _ in range(N):
        slide()
    plans = [plan_query(parse_query(f"SELECT SUM(v) FROM s [RANGE {k} SUBWINDOWS]"), stream) for k in range(1, 5)]
    for p in plans:
        sched.run_now(p)  # (a plan's first execution is not kept: AnswerCache.admits)
        sched.run_now(p)
    cache = sched.answer_cache
    assert len(cache) == 3 and cache.evictions == 1
    assert [e.plan for e in cache.entries()] == plans[1:]  # the first asked went first
    sched.run_now(plans[1])  # a hit: now the most recently used
    assert [e.plan for e in cache.entries()] == [plans[2], plans[3], plans[1]]
    cache._check()
    small = AnswerCache(100, 2 * answer_bytes(cache.entries()[0].answer) + 1)
    for e in cache.entries():
        small.put(e)
    assert len(small) == 2 and small.nbytes <= small.max_bytes
    small._check()
    huge = dataclasses.replace(cache.entries()[0], nbytes=small.max_bytes + 1)
    assert not small.put(huge) and len(small) == 2
    with pytest.raises(ValueError):
        AnswerCache(0, 100)


def test_a_dropped_stream_leaves_no_entries():
    sched, stream, history, slide = manual_world()
    slide()
    plan = plan_query(parse_query("SELECT SUM(v) FROM s [RANGE 2 SUBWINDOWS]"), stream)
    sched.run_now(plan)
    sched.run_now(plan)
    assert len(sched.answer_cache) == 1 and sched.answer_cache.plans() == [plan]
    sched.drop_stream("s")
    assert len(sched.answer_cache) == 0 and sched.answer_cache.plans() == []
    sched._check()


def test_an_entry_keeps_what_a_hit_records():
    sched, stream, history, slide = manual_world()
    for _ in range(2):
        slide()
    plan = plan_query(parse_query("SELECT SUM(v) FROM s [RANGE 3 SUBWINDOWS]"), stream)
    once = sched.run_now(plan)
    assert sched.answer_cache.entries() == [] and once.result.cached is None  # its first execution: not kept
    first = sched.run_now(plan)
    (entry,) = sched.answer_cache.entries()
    assert isinstance(entry, CachedAnswer) and entry.reads == range(0, 2) and entry.slide == first.result.slide == 1
    assert entry.version == stream.window.version and entry.answer is first.result.answer


def test_a_hit_encodes_to_the_same_message_as_the_answer_computed():
    """The server encodes a hit from the entry's serialized per-query part and the call's own fields
    (convert.cached_answer_to_pb): the same message answer_to_pb builds, for each kind of answer."""
    from windowstore.server import convert
    from windowstore.v1 import windowstore_pb2 as pb

    sched, stream, history, slide = manual_world()
    for i in range(N):
        stream.append({"ts": [i, i], "k": ["é", None], "v": [None, -2**63]})
        slide()
    texts = ["SELECT SUM(v), COUNT(*) FROM s [RANGE 3 SUBWINDOWS]", "SELECT MIN(v), MAX(k) FROM s [RANGE 2 SUBWINDOWS]",
             "SELECT k, COUNT(*), AVG(v) FROM s [RANGE 4 SUBWINDOWS] GROUP BY k ORDER BY 2 DESC",
             "SELECT COUNT(*) FROM s [RANGE 4 SUBWINDOWS] WHERE v > 0", "SELECT SUM(v) FROM s [RANGE 2 SUBWINDOWS] AS OF SLIDE 1"]
    for text in texts:
        plan = plan_query(parse_query(text), stream)
        sched.run_now(plan)
        sched.run_now(plan)
        for _ in range(2):  # the entry's first hit encodes its part, the second reuses it
            hit = sched.run_now(plan).result
            assert hit.cached is not None
            want = convert.answer_to_pb(hit, "s", "Q9", pb.QueryResponse().answer)
            got = convert.cached_answer_to_pb(hit, "s", "Q9", pb.QueryResponse().answer)
            assert got == want and got.cached and got.query_id == "Q9", text
            assert hit.cached.encoded is not None
            # the whole reply as bytes (the entry's and the call's messages, concatenated) parses to it
            want.response_ms = 0.25
            reply = pb.QueryResponse.FromString(convert.cached_reply(hit, "s", "Q9", 0.25))
            assert reply == pb.QueryResponse(answer=want), text
            assert reply.SerializeToString(deterministic=True) == \
                pb.QueryResponse(answer=want).SerializeToString(deterministic=True)


def test_a_cached_reply_written_as_bytes_parses_to_the_message_built():
    """convert.cached_reply concatenates the entry's serialized reply and the call's own fields: for
    every case of them (a long query id, no staleness, zeros) its bytes parse to the message
    cached_answer_to_pb builds."""
    from windowstore.server import convert
    from windowstore.v1 import windowstore_pb2 as pb

    sched, stream, history, slide = manual_world()
    for _ in range(N):
        slide()
    hit = kept_hit(sched, plan_query(parse_query("SELECT SUM(v), COUNT(*) FROM s [RANGE 3 SUBWINDOWS]"), stream))
    result = sched.run_now(hit.plan).result
    cases = [("Q1", 1.5e12, 3.25, 0.125), ("Q" * 300, 0.0, None, 0.0), ("", -1.0, 0.0, 1e9), ("Q2é", 2.0, -0.5, 7.0)]
    for query_id, answered_ms, staleness_ms, response_ms in cases:
        r = dataclasses.replace(result, answered_ms=answered_ms, staleness_ms=staleness_ms)
        want = pb.QueryResponse()
        convert.cached_answer_to_pb(r, "s", query_id, want.answer)
        want.answer.response_ms = response_ms
        got = pb.QueryResponse.FromString(convert.cached_reply(r, "s", query_id, response_ms))
        assert got == want, (query_id[:5], answered_ms, staleness_ms, response_ms)
        assert got.answer.HasField("staleness_ms") == (staleness_ms is not None)


def test_a_query_asked_once_leaves_no_entry_and_the_sights_are_bounded():
    """A plan is kept from its second execution on: queries that differ on every call (a new plan
    each) cost a lookup and a remembered sight, at most SEEN of them."""
    from windowstore.txn.answer_cache import SEEN

    sched, stream, history, slide = manual_world()
    slide()
    plans = []  # (kept alive here: a new plan given a freed one's id would count as seen)
    for k in range(SEEN + 10):
        plans.append(plan_query(parse_query(f"SELECT SUM(v) AS x{k} FROM s [RANGE 2 SUBWINDOWS]"), stream))
        txn = sched.run_now(plans[-1])
        assert txn.result.cached is None
    cache = sched.answer_cache
    assert len(cache) == 0 and cache.sights() == SEEN and cache.misses == SEEN + 10
    cache._check()
    plans.clear()
    for k in range(2 * SEEN):  # plans freed at once: a new one given a freed one's id is not taken for it
        sched.run_now(plan_query(parse_query(f"SELECT COUNT(*) AS y{k} FROM s [RANGE 2 SUBWINDOWS]"), stream))
    assert len(cache) == 0 and cache.hits == 0
    cache._check()


# -- requests known by their identity (Scheduler.answer_known) ---------------------------------------------

def kept_hit(sched, plan):
    """Run a plan until a call is a hit (its first execution is not kept); that call's entry."""
    sched.run_now(plan)
    sched.run_now(plan)
    hit = sched.run_now(plan)
    assert hit.result.cached is not None
    return hit.result.cached


@pytest.mark.parametrize("policy", POLICIES)
def test_a_known_request_is_answered_from_its_entry_only_while_it_answers(policy):
    sched, stream, history, slide = manual_world(policy)
    for _ in range(N + 2):
        slide()
    plan = plan_query(parse_query("SELECT SUM(v) FROM s [RANGE 3 SUBWINDOWS]"), stream)
    entry = kept_hit(sched, plan)
    assert sched.answer_known(b"req") is None  # not noted: unknown
    assert sched.answer_cache.note_request(b"req", entry, 3)
    hits, committed, in_stream = sched.answer_cache.hits, sched.by_class[ONETIME].committed, sched.by_stream["s"].committed
    fast = sched.answer_known(b"req")
    assert fast.cached is entry and fast.answered_ms == sched.clock() and fast.restarts == 0
    assert fast.answer.rows == entry.answer.rows and fast.slide == stream.window.latest
    assert sched.answer_cache.hits == hits + 1 and sched.by_class[ONETIME].committed == committed + 1
    assert sched.by_stream["s"].committed == in_stream + 1
    assert sched.active == [] and sched.running is None
    events = [e for e in history.events if e["txn"] == fast.txn]
    assert [e["op"] for e in events] == [Op.BEGIN, Op.READ, Op.READ, Op.READ, Op.COMMIT]
    sched._check()

    sched.request_slide("s")  # a slide is due: the query would not begin now
    assert sched.answer_known(b"req") is None
    assert sched.step() == "slide"
    assert sched.answer_known(b"req") is None  # the window moved: its entry no longer answers
    sched.run_now(plan)  # computed over the new window and kept: the old entry and its request go
    assert sched.answer_cache.known(b"req") is None
    sched._check()
    report = check(history.events)
    assert report.errors == [] and report.violations("ws" if policy == "ws" else "lws") == []


def test_a_known_request_waits_for_a_processing_time_slide_due_on_the_clock():
    now = [0.0]
    history = History()
    sched = Scheduler("lws", clock=lambda: now[0], history=history)
    sched.answer_cache = AnswerCache(8, 1 << 20)
    stream = Stream("s", {"ts": "int64", "k": "string", "v": "int64"}, WindowSpec(N, 100, clock="processing"), 0)
    sched.add_stream(stream)
    for i in range(3):
        stream.append({"ts": [0], "k": ["a"], "v": [i]})
        now[0] += 100
        sched.run_until_idle()
    plan = plan_query(parse_query("SELECT SUM(v) FROM s [RANGE 2 SUBWINDOWS]"), stream)
    assert sched.answer_cache.note_request("q", kept_hit(sched, plan), 1)
    assert sched.answer_known("q") is not None
    stream.append({"ts": [0], "k": ["a"], "v": [7]})
    assert sched.answer_known("q") is not None  # in the open sub-window: the window is unchanged
    now[0] += 100  # the next slide falls due on the (injected) clock
    assert sched.answer_known("q") is None
    sched.run_until_idle()
    assert sched.answer_known("q") is None and stream.window.latest == 3
    txn = sched.run_now(plan)
    assert txn.result.answer.rows == [(2 + 7,)] and sched.answer_cache.known("q") is None
    assert check(history.events).violations("lws") == []


def test_a_known_request_is_not_answered_while_another_query_runs_or_a_seal_is_awaited():
    sched, stream, history, slide = manual_world("serial")
    for _ in range(N):
        slide()
    plan = plan_query(parse_query("SELECT SUM(v) FROM s [RANGE 2 SUBWINDOWS]"), stream)
    assert sched.answer_cache.note_request("q", kept_hit(sched, plan), 1)
    scan = sched.submit(plan_query(parse_query("SELECT COUNT(*) FROM s [RANGE 4 SUBWINDOWS] WHERE v > 0"), stream))
    assert sched.answer_known("q") is None  # another query is active: step() would choose among them
    sched.run_until_idle()
    assert scan.done and sched.answer_known("q") is not None


def test_known_requests_go_with_their_entry_and_count_in_its_bytes():
    from windowstore.txn.answer_cache import REQUEST_OVERHEAD, REQUESTS_PER_ENTRY

    sched, stream, history, slide = manual_world(entries=2)
    for _ in range(N):
        slide()
    cache = sched.answer_cache
    plans = [plan_query(parse_query(f"SELECT SUM(v) FROM s [RANGE {k} SUBWINDOWS]"), stream) for k in (1, 2, 3)]
    first = kept_hit(sched, plans[0])
    before = cache.nbytes
    keys = [f"r{i}" for i in range(REQUESTS_PER_ENTRY + 1)]
    assert [cache.note_request(k, first, 10) for k in keys] == [True] * REQUESTS_PER_ENTRY + [False]
    assert not cache.note_request(keys[0], first, 10)  # known already
    assert cache.nbytes == before + REQUESTS_PER_ENTRY * (REQUEST_OVERHEAD + 10) and cache.known_requests() == 4
    cache._check()
    kept_hit(sched, plans[1])
    kept_hit(sched, plans[2])  # the first entry is evicted (two entries at most): its requests go
    assert all(cache.known(k) is None for k in keys) and cache.known_requests() == 0
    assert not cache.note_request("late", first, 1)  # an entry no longer kept takes none
    cache._check()
    second = cache.entries()[-1]
    assert cache.note_request("x", second, 1)
    copy = dataclasses.replace(second)  # (its list of requests is the original's)
    tight = AnswerCache(8, second.nbytes + REQUEST_OVERHEAD)
    tight.put(copy)  # an entry put is asked for anew: none of its requests yet
    assert copy.requests == [] and second.requests == ["x"] and tight.note_request("y", copy, 0)
    assert not tight.note_request("z", copy, 1)  # past the bytes bound
    tight._check()
    cache._check()
    sched.drop_stream("s")  # the dropped stream's entries go with their requests
    assert cache.known("x") is None and len(cache) == 0
    sched._check()
