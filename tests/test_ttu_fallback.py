"""Liveness under ttu (Outcomes._fall_back): a periodic execution that takes longer than the slides
leave it (its final merge outlives a slide, or its reads run slower than the slides) was aborted by
every slide and, after the restart limit, failed: a shared group's joint execution (many queries'
work in one) never answered. Now a query aborted `fallback_after` times runs its next attempt
holding its windows (their slides wait for its commit) and answers, latest-window serializable.

The engine runs on time as data: offloaded reads and merges are jobs that finish a fixed number of
milliseconds after they are issued, slides come every `slide_ms` (a manual stream's Slide
commands, or a processing-time stream's clock), nothing sleeps. Each answer is checked against the
same query planned alone and read over exactly slide k's sub-windows, as sealed (no scheduler, no
sharing), and the history checker judges the whole history."""
from __future__ import annotations

import dataclasses
import math
import random

import pyarrow as pa
import pytest
from conftest import examples
from hypothesis import given, settings, strategies as st

from windowstore.store import WindowSpec, parse_query, plan_query
from windowstore.store.aggregates import Partial
from windowstore.txn import RestartLimitExceeded, check
from windowstore.txn.answers import from_plain, to_plain
from windowstore.txn.commands import Append, CreateStream, Register, Slide
from windowstore.txn.engine import Engine, EngineConfig
from windowstore.txn.history import History
from windowstore.txn.kinds import JobKind, Level
from windowstore.v1 import windowstore_pb2 as pb
from windowstore.clients.answer import Answer
from windowstore.server.convert import answer_to_pb

N = 8  # sub-windows in the stream's window
COLUMNS = (("ts", "int64"), ("k", "string"), ("v", "int64"))
# window scans (QUANTILE reads every row), so reads and merges are jobs
QUERY = "SELECT QUANTILE(v, 0.5), COUNT(*), SUM(v) FROM p [{window}]"


def rows(rng: random.Random, ts: int) -> pa.Table:
    n = rng.randint(1, 4)
    return pa.table({"ts": pa.array([ts] * n, pa.int64()), "k": pa.array([rng.choice("abc") for _ in range(n)]),
                     "v": pa.array([rng.randint(-3, 9) for _ in range(n)], pa.int64())})


class Run:
    """An engine whose window-scan reads take `read_ms` and final merges `merge_ms` (jobs handed
    back when the clock reaches their end), and whose stream slides every `slide_ms`."""

    def __init__(self, mode: str, clock: str, shapes: list[tuple[int, int]], read_ms: float, merge_ms: float,
                 slide_ms: int, fallback_after: int = 2, seed: int = 0, policy: str = "ttu"):
        self.rng = random.Random(seed)
        self.history = History(None, keep=10_000_000)
        self.e = e = Engine(EngineConfig(policy=policy, sharing=mode, fallback_after=fallback_after), self.history)
        self.clock, self.slide_ms = clock, slide_ms
        sub_ms = slide_ms if clock == "processing" else 10
        e.apply(CreateStream("p", COLUMNS, "ts", WindowSpec(N, sub_ms, None, clock, 0, ("k",), 4), 0))
        self.jobs: list[tuple[float, int, object]] = []  # (due, issue order, job)
        self.sealed: dict[int, object] = {}  # every sub-window installed, by slide
        self.issued = 0

        def offload(job) -> None:
            self.issued += 1
            self.jobs.append((e.now_ms + (merge_ms if job.kind == JobKind.FINISH else read_ms), self.issued, job))
        e.sched.offload, e.sched.offload_ms = offload, 0  # every window-scan read and merge is a job
        self.now = 0.0
        self.next_slide = float(slide_ms)
        self.ts = 0
        for _ in range(N):  # a full window first
            self.advance(self.next_slide)
        self.answers: list[tuple[str, object]] = []
        self.errors: list[tuple[str, Exception]] = []
        e.on_answer = lambda qid, r: self.answers.append((qid, r))
        e.on_error = lambda qid, err: self.errors.append((qid, err))
        self.texts = {}
        for i, (length, every) in enumerate(shapes):
            qid = f"Q{i}"
            self.texts[qid] = QUERY.format(window=f"RANGE {length} SUBWINDOWS SLIDE {every} SUBWINDOWS")
            e.apply(Register(qid, self.texts[qid], 0, self.now))
        self.registered_at = self.latest()

    def latest(self) -> int:
        return self.e.stream("p").window.latest

    def advance(self, until: float) -> None:
        """Run the engine up to clock time `until`: at each event (a job's end, a slide) the jobs
        due are handed back, the slide applied, then every operation possible run."""
        e = self.e
        while True:
            e.sched.run_until_idle()
            e._check()
            w = e.stream("p").window
            for v in range(max(0, w.latest - N + 1), w.latest + 1):
                self.sealed.setdefault(v, w.subs[v % N])
            t = min([self.next_slide] + [due for due, _, _ in self.jobs])
            if t > until:
                return
            self.now = t
            e.tick(t)
            for item in sorted(x for x in self.jobs if x[0] <= t):
                self.jobs.remove(item)
                e.complete(item[2], item[2].run())
            if t >= self.next_slide:
                self.ts += 1
                e.apply(Append("p", rows(self.rng, self.ts), "", None, t))
                if self.clock == "manual":
                    e.apply(Slide("p", t))
                self.next_slide += self.slide_ms

    def slides(self, n: int) -> None:
        self.advance(self.now + n * self.slide_ms)

    def check_answers(self) -> None:
        """Each answer is the query's own answer over exactly the sub-windows of its slide k (the
        query planned alone, read sub-window by sub-window), and the history checker finds every
        committed query latest-window serializable."""
        for qid, r in self.answers:
            text = self.texts[qid]
            length = int(text.split("RANGE ")[1].split()[0])
            alone = plan_query(parse_query(text.split(" SLIDE")[0] + "]"), self.e.stream("p"), access="window")
            partial = Partial()
            for v in range(max(0, r.slide - length + 1), r.slide + 1):
                partial.add(v, alone.read(self.sealed[v]))
            assert r.answer.rows == alone.finish(partial).rows, (qid, r.slide, r.fallback)
        report = check(self.history.events)
        assert report.errors == [], report.errors[:3]
        assert report.violations(Level.LWS) == [], report.violations(Level.LWS)[:3]
        assert report.count(Level.LWS) == len(report.verdicts) >= len({r.txn for _, r in self.answers})

    def gaps(self) -> dict[str, int]:
        """Per query, the most slides between two of its answers (from its registration to the
        first, and from its last to the end of the run too)."""
        out = {}
        for qid in self.texts:
            marks = [self.registered_at] + [r.slide for q, r in self.answers if q == qid] + [self.latest()]
            out[qid] = max(b - a for a, b in zip(marks, marks[1:]))
        return out


def bound(shapes: list[tuple[int, int]], read_ms: float, merge_ms: float, slide_ms: int, fallback_after: int) -> int:
    """The most slides between two answers of a query: its SLIDE, then a turn of every query
    (mode none: EDF among them) each of at most `fallback_after` aborted attempts and one that
    holds its window, an attempt at most RANGE reads and a merge long."""
    attempt = max(n for n, _ in shapes) * read_ms + merge_ms
    turn = math.ceil(len(shapes) * (fallback_after + 1) * attempt / slide_ms) + 1
    return max(every for _, every in shapes) + turn + 1


SHAPES = [(8, 1), (7, 2), (6, 1), (8, 3)]


@pytest.mark.parametrize("policy", ["ttu", "ttu-rescan"])
@pytest.mark.parametrize("clock", ["manual", "processing"])
@pytest.mark.parametrize("mode", ["aggressive", "none"])
def test_an_execution_whose_merge_outlives_a_slide_answers_under_ttu(mode, clock, policy):
    """The final merge takes 2.5 slides. Without the fallback, under ttu every attempt is aborted
    and the executions fail at the restart limit; under ttu-rescan each slide re-scans the
    execution and orphans its merge, for ever: no answer in 40 slides either way. With it, every
    query answers, the answers that came after aborts (re-scans) say so, and everything is LWS;
    ttu-rescan still never aborts (its attempt goes on holding the window once re-scans orphaned
    its merge twice)."""
    never = Run(mode, clock, SHAPES, read_ms=1, merge_ms=250, slide_ms=100, fallback_after=10**6, policy=policy)
    never.slides(40)
    periodic = never.e.sched.by_class["periodic"]
    assert never.answers == [] and periodic.fallbacks == 0
    if policy == "ttu":
        assert never.errors and all(isinstance(err, RestartLimitExceeded) for _, err in never.errors)
        assert periodic.failed > 0
    else:
        assert never.errors == [] and periodic.aborts == 0 and periodic.removals > 0

    run = Run(mode, clock, SHAPES, read_ms=1, merge_ms=250, slide_ms=100, policy=policy)
    run.slides(40)
    assert run.errors == []
    assert {qid for qid, _ in run.answers} == set(run.texts)
    # (every attempt's first merge meets a slide: each answer came from an attempt that fell back)
    assert all(r.fallback and r.restarts == (2 if policy == "ttu" else 0) for _, r in run.answers)
    periodic = run.e.sched.by_class["periodic"]
    assert periodic.fallbacks == periodic.committed + len(run.e.sched.holding) > 0 and periodic.failed == 0
    if policy == "ttu-rescan":
        assert periodic.aborts == 0
    if mode == "aggressive":
        s = run.e.sched.sharing.stats()
        assert s["groups"] == 1 and 0 < s["fallbacks"] == s["executions"] and s["failures"] == 0
    run.check_answers()
    assert max(run.gaps().values()) <= bound(SHAPES, 1, 250, 100, 2), run.gaps()


@pytest.mark.parametrize("mode", ["aggressive", "none"])
def test_reads_slower_than_the_slides_answer_under_ttu(mode):
    """Each read takes 1.5 slides: every attempt meets more slides than it has sub-windows left
    unread, and aborts; the attempt that holds its window reads it whole and answers."""
    never = Run(mode, "processing", SHAPES[:2], read_ms=150, merge_ms=1, slide_ms=100, fallback_after=10**6)
    never.slides(60)
    assert never.answers == []
    run = Run(mode, "processing", SHAPES[:2], read_ms=150, merge_ms=1, slide_ms=100)
    run.slides(60)
    assert {qid for qid, _ in run.answers} == set(run.texts) and run.errors == []
    assert any(r.fallback for _, r in run.answers)
    run.check_answers()


def test_a_query_that_falls_back_delays_its_streams_slides_only_while_it_runs():
    """Slides wait for the attempt holding the window, then all of them are applied: none is
    lost, and the next attempt after the fallback is an ordinary one again."""
    run = Run("none", "processing", [(8, 1)], read_ms=1, merge_ms=250, slide_ms=100)
    run.slides(30)
    sched = run.e.sched
    assert sched.by_stream["p"].slides == run.latest() + 1 == N + 30  # every slide due was applied
    assert not sched.holding or all(t.begun for t in sched.holding)
    assert max(sched.slide_delays["p"]) <= 250 + 100  # at most the held attempt's merge (and a slide period)
    assert [r.fallback for _, r in run.answers] == [True] * len(run.answers)


def test_a_held_window_has_no_slide_due_until_its_query_commits():
    """While an attempt holds the window, its due slides are neither applied nor reported as
    the next due (the server's slide timer would wake at once, again and again); a manual Slide
    runs the held attempt's job here and slides after its commit."""
    run = Run("none", "processing", [(8, 1)], read_ms=1, merge_ms=250, slide_ms=100)
    sched = run.e.sched
    while not (sched.holding and sched.holding[0].begun and sched.holding[0].job is not None):
        run.advance(min([run.next_slide] + [due for due, _, _ in run.jobs]))
    run.e.tick(run.now + 1000)  # ten slides due
    assert sched.stream_due_to_slide() is None and sched.next_due() == (math.inf, None)
    assert sched.step() is None  # (it waits for its merge)

    manual = Run("none", "manual", [(8, 1)], read_ms=1, merge_ms=250, slide_ms=100)
    sched = manual.e.sched
    while not (sched.holding and sched.holding[0].begun and sched.holding[0].job is not None):
        manual.advance(min([manual.next_slide] + [due for due, _, _ in manual.jobs]))
    held, latest = sched.holding[0], manual.latest()
    manual.e.apply(Slide("p", manual.now))  # its merge is still in flight (the test's job list)
    assert held.done and held.result.fallback and held.result.slide == latest and manual.latest() == latest + 1


def test_a_manual_slide_under_serial_runs_the_locked_querys_job_and_slides_after_its_commit():
    """The same holding as serial's lock: a manual Slide while the running query waits for its
    merge (a job) spun for ever in Engine.slide_now; now the merge runs in the call, the query
    commits, then the slide."""
    run = Run("none", "manual", [(8, 1)], read_ms=1, merge_ms=250, slide_ms=100, policy="serial")
    sched = run.e.sched
    while not any(t.begun and t.job is not None and t.job.kind == JobKind.FINISH for t in sched.active):
        run.advance(min([run.next_slide] + [due for due, _, _ in run.jobs]))
    txn, latest = sched.running, run.latest()
    run.e.apply(Slide("p", run.now))
    assert txn.done and txn.result.slide == latest and run.latest() == latest + 1
    assert not txn.result.fallback and sched.by_class["periodic"].fallbacks == 0


def test_fallbacks_are_counted_for_the_wire_and_the_answer_log():
    """The sharing statistics' fallbacks fit GetStats' SharingStats (field 126), and an answer's
    fallback survives the answer log's plain form."""
    run = Run("aggressive", "manual", SHAPES, read_ms=1, merge_ms=250, slide_ms=100)
    run.slides(20)
    s = run.e.sched.sharing.stats()
    assert pb.SharingStats(**s).fallbacks == s["fallbacks"] == sum(run.e.sched.sharing.fallbacks_by_group.values()) > 0
    assert sum(run.e.sched.sharing.fallbacks_by_query.values()) == sum(r.fallback for _, r in run.answers) > 0
    qid, r = run.answers[-1]
    assert from_plain(to_plain(r)).fallback and not from_plain(to_plain(dataclasses.replace(r, fallback=False))).fallback
    # ... and the wire: the SDK's Answer says so, and GetStats' per-class and per-stream counts
    assert Answer.from_pb(answer_to_pb(r, "p", qid)).fallback
    assert not Answer.from_pb(answer_to_pb(dataclasses.replace(r, fallback=False), "p", qid)).fallback
    periodic = run.e.sched.by_class["periodic"].as_dict()
    assert pb.ClassStats(**{k: v for k, v in periodic.items() if k != "slides"}).fallbacks == periodic["fallbacks"] > 0
    assert pb.StreamStats(fallbacks=run.e.sched.by_stream["p"].fallbacks).fallbacks > 0


def test_lws_keeps_its_restart_limit():
    """Algorithm 7 is the thesis's baseline: no fallback, its queries fail at the restart limit."""
    run = Run("none", "manual", [(8, 1)], read_ms=1, merge_ms=250, slide_ms=100, policy="lws")
    run.slides(40)
    assert run.answers == [] and run.errors and run.e.sched.by_class["periodic"].fallbacks == 0


# Random slide periods, read and merge costs and dashboards: under ttu every query answers within
# a bound on the slides between two of its answers (bound()), and the history is LWS.
@settings(max_examples=examples(25), deadline=None)
@given(mode=st.sampled_from(["aggressive", "conservative", "none"]), clock=st.sampled_from(["manual", "processing"]),
       shapes=st.lists(st.tuples(st.integers(1, N), st.integers(1, 3)), min_size=1, max_size=3),
       read_ms=st.integers(0, 120), merge_ms=st.integers(0, 300), slide_ms=st.integers(50, 150),
       fallback_after=st.integers(1, 2), seed=st.integers(0, 3))
def test_long_executions_under_ttu_always_answer_within_a_bound(mode, clock, shapes, read_ms, merge_ms, slide_ms,
                                                                 fallback_after, seed):
    limit = bound(shapes, read_ms, merge_ms, slide_ms, fallback_after)
    run = Run(mode, clock, shapes, read_ms, merge_ms, slide_ms, fallback_after, seed)
    run.slides(limit + 2)  # (a query never answered has a gap of all of them)
    assert run.errors == []
    gaps = run.gaps()
    assert max(gaps.values()) <= limit, (gaps, limit)
    run.check_answers()


def test_on_the_server_a_manual_slide_waits_for_the_holding_query_instead_of_running_its_job(monkeypatch):
    """Under serial the running query holds its window until its commit (as a query fallen back
    under ttu does). A manual Slide that comes meanwhile waits on the loop (Driver.until_unheld)
    while the query's job goes on on the query thread, then slides: the job runs once, on its
    thread, not a second time inline in the Slide's call (which held the loop for the job's time
    and made every other call wait)."""
    import asyncio

    from conftest import hold_final_merges, wait_for
    from windowstore.server.config import ServerConfig
    from windowstore.server.driver import Driver

    entered, release, runs = hold_final_merges(monkeypatch)  # runs: the threads the query's final merge ran on

    driver = Driver(ServerConfig(in_memory=True, policy="serial", offload_ms=0))
    driver.start()
    try:
        driver.command(CreateStream("p", COLUMNS, "ts", WindowSpec(4, 1000, None, "manual", 0, ("k",), 4), 0)).result(10)
        for ts in range(3):
            driver.command(Append("p", rows(random.Random(ts), ts), "", None, 0)).result(10)
            driver.command(Slide("p", 0)).result(10)
        txn, _ = driver.run(lambda: driver.submit(parse_query("SELECT QUANTILE(v, 0.5), COUNT(*) FROM p"), 0))
        assert entered.wait(10), "the query's merge did not start on the query thread"
        latest = driver.run(lambda: driver.stream("p").window.latest)
        waiting = asyncio.run_coroutine_threadsafe(driver.until_unheld("p"), driver.loop)
        assert driver.run(lambda: driver.sched.held("p") and not txn.done)  # (the coroutine awaits by now)
        assert not waiting.done(), "the slide waits while the query holds the window"
        release.set()
        waiting.result(10)
        assert driver.run(lambda: txn.done and not driver.sched.held("p"))
        driver.command(Slide("p", 0)).result(10)
        wait_for(lambda: driver.run(lambda: driver.stream("p").window.latest) == latest + 1, "the slide")
        assert txn.result.slide == latest and not txn.result.fallback
        assert [name.startswith("windowstore-query") for name in runs] == [True], runs
    finally:
        release.set()
        driver.stop(5)
