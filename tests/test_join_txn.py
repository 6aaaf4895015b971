"""Join queries as read-only transactions over several windows (issue 14, phase 2): the scheduler under
every policy with concurrent slides on every joined stream, checked by the isolation checker from the
history alone (LWS for serial, lws, ttu, ttu-rescan; WS for ws), answers equal to a brute-force join
over exactly the sub-windows read (and, for the LWS policies, over the windows as they stand at
commit); periodic joins (SLIDE semantics, eager refresh), ResourceLimit, dropping a joined stream,
the engine's Register/replay of join texts, and hand-written histories the checker must refuse."""
from __future__ import annotations

import itertools
import random
from collections import defaultdict

import pytest
from hypothesis import given, settings, target
from hypothesis import strategies as st

from conftest import examples
from reference import same
from windowstore.store import Stream, WindowSpec, parse_query, plan_query
from windowstore.store.errors import ResourceLimit
from windowstore.store.join import plan_join
from windowstore.store.parser import parse_statement
from windowstore.txn import POLICIES, History, QueryWithdrawn, Scheduler, check
from windowstore.txn.commands import Append, CreateStream, DropStream, Register, Slide, Unregister
from windowstore.txn.engine import Engine, EngineConfig, NotFound
from windowstore.txn.joins import JoinQueryPlan

SCHEMA = {"ts": "int64", "key": "string", "v": "int64"}
N_SUB = {"s0": 4, "s1": 3, "s2": 5}


# -- the oracle: a nested-loop join over plain rows ------------------------------------------------------
def rows_of(stream: Stream, subs) -> list[dict]:
    out = []
    for sub in subs:
        keys = stream.strings.decode(sub.columns["key"])
        for i in range(sub.rows):
            out.append({"ts": int(sub.columns["ts"][i]), "key": keys[i], "v": int(sub.columns["v"][i])})
    return out


def _sum(values):
    return sum(values) if values else None


# Each template: the text (ranges filled in), the (stream, alias) of each source, the join predicate
# and the answer over the joined tuples (brute force).
TEMPLATES = [
    ("SELECT COUNT(*), SUM(a.v), SUM(b.v) FROM s0 a [RANGE {r0} SUBWINDOWS{p0}] JOIN s1 b [RANGE {r1} SUBWINDOWS{p1}] "
     "ON a.key = b.key",
     [("s0", "a"), ("s1", "b")],
     lambda a, b: a["key"] == b["key"],
     lambda js: [(len(js), _sum([a["v"] for a, b in js]), _sum([b["v"] for a, b in js]))]),
    ("SELECT a.key, COUNT(*), MAX(b.v) FROM s0 a [RANGE {r0} SUBWINDOWS{p0}] JOIN s1 b [RANGE {r1} SUBWINDOWS{p1}] "
     "ON a.key = b.key AND b.ts BETWEEN a.ts - 2 AND a.ts + 2 GROUP BY a.key",
     [("s0", "a"), ("s1", "b")],
     lambda a, b: a["key"] == b["key"] and -2 <= b["ts"] - a["ts"] <= 2,
     lambda js: sorted((k, len(g), max(b["v"] for _, b in g))
                       for k, g in _groups(js, lambda a, b: a["key"]).items())),
    ("SELECT COUNT(*), SUM(y.v) FROM s0 x [RANGE {r0} SUBWINDOWS{p0}] JOIN s0 y [RANGE {r1} SUBWINDOWS{p1}] "
     "ON x.key = y.key WHERE x.v > 2",
     [("s0", "x"), ("s0", "y")],
     lambda x, y: x["key"] == y["key"] and x["v"] > 2,
     lambda js: [(len(js), _sum([y["v"] for x, y in js]))]),
    ("SELECT COUNT(*), SUM(c.v), MIN(a.v) FROM s0 a [RANGE {r0} SUBWINDOWS{p0}] JOIN s1 b [RANGE {r1} SUBWINDOWS{p1}] "
     "ON a.key = b.key JOIN s2 c [RANGE {r2} SUBWINDOWS{p2}] ON c.key = b.key AND c.ts >= b.ts",
     [("s0", "a"), ("s1", "b"), ("s2", "c")],
     lambda a, b, c: a["key"] == b["key"] == c["key"] and c["ts"] >= b["ts"],
     lambda js: [(len(js), _sum([t[2]["v"] for t in js]), min((t[0]["v"] for t in js), default=None))]),
]


def _groups(js, key):
    out = defaultdict(list)
    for t in js:
        out[key(*t)].append(t)
    return out


def brute(template: int, per_source_rows: list[list[dict]]):
    _, _, pred, answer = TEMPLATES[template]
    js = [t for t in itertools.product(*per_source_rows) if pred(*t)]
    return answer(js)


def text_of(template: int, ranges: list[int], slide_at: int | None = None, every: int = 1) -> str:
    text, sources, _, _ = TEMPLATES[template]
    fill = {}
    for i in range(3):
        fill[f"r{i}"] = ranges[i] if i < len(ranges) else 1
        fill[f"p{i}"] = f" SLIDE {every} SUBWINDOWS" if slide_at == i else ""
    return text.format(**fill)


def ranges_for(template: int, sizes: list[int]) -> list[int]:
    _, sources, _, _ = TEMPLATES[template]
    return [max(1, min(sizes[i % len(sizes)], N_SUB[s])) for i, (s, _) in enumerate(sources)]


def reference_from_windows(template: int, streams: dict, ranges: list[int]):
    """The answer over the windows as they stand now (each source: its stream's youngest n_Q)."""
    _, sources, _, _ = TEMPLATES[template]
    rows = [rows_of(streams[s], streams[s].window.youngest(r)) for (s, _), r in zip(sources, ranges)]
    return brute(template, rows)


def reference_from_versions(template: int, streams: dict, ranges: list[int], parts: dict, seen: dict):
    """The answer over exactly the versions the checker says the transaction read."""
    _, sources, _, _ = TEMPLATES[template]
    rows = []
    for (s, _), r in zip(sources, ranges):
        versions = sorted(parts[s]["versions"], reverse=True)[:r]
        rows.append(rows_of(streams[s], [seen[(s, v)] for v in versions]))
    return brute(template, rows)


# -- a scheduler over three manual-clock streams ---------------------------------------------------------
def make_streams():
    return {name: Stream(name, SCHEMA, WindowSpec(subwindows=n, subwindow_ms=1, clock="manual"), 0)
            for name, n in N_SUB.items()}


def join_plan(text: str, streams: dict, cache: bool = False, max_rows: int = 2_000_000) -> JoinQueryPlan:
    return JoinQueryPlan(plan_join(parse_statement(text), streams, max_rows=max_rows, cache=cache), streams)


NAMES = list(N_SUB)
actions_st = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(0, 2), st.integers(1, 4)),
    st.tuples(st.just("slide"), st.integers(0, 2), st.integers(1, 3)),   # bursts: several slides at once
    st.tuples(st.just("query"), st.integers(0, len(TEMPLATES) - 1), st.lists(st.integers(1, 5), min_size=3,
                                                                              max_size=3), st.integers(0, 2)),
    st.tuples(st.just("periodic"), st.integers(0, len(TEMPLATES) - 1), st.lists(st.integers(1, 5), min_size=3,
                                                                                 max_size=3), st.integers(0, 2),
              st.integers(1, 2)),
    st.tuples(st.just("step"), st.integers(1, 8)),
), min_size=1, max_size=60)
_FILL = [("append", 0, 4), ("append", 1, 4), ("append", 2, 4), ("slide", 0, 3), ("slide", 1, 3), ("slide", 2, 3),
         ("append", 0, 3), ("append", 1, 3), ("append", 2, 3), ("slide", 0, 2), ("slide", 1, 1), ("slide", 2, 2)]
scripts = st.builds(lambda fill, rest: (_FILL if fill else []) + rest, st.integers(0, 3).map(bool), actions_st)


def run(policy: str, script, max_restarts: int = 1000):
    now = [0]
    history = History()
    sched = Scheduler(policy, clock=lambda: now[0], history=history, max_restarts=max_restarts)
    streams = make_streams()
    for s in streams.values():
        sched.add_stream(s)
    seen: dict[tuple[str, int], object] = {}
    results = []   # (template, ranges, Result, reference at commit)
    counter = [0]

    def remember():
        for s in streams.values():
            for sub in s.window.youngest(s.window.n):
                seen.setdefault((s.name, sub.slide), sub)

    def step():
        now[0] += 1
        sched.step()
        remember()

    for act in script:
        kind = act[0]
        if kind == "append":
            s = streams[NAMES[act[1]]]
            c = counter[0]
            counter[0] += act[2]
            s.append({"ts": [now[0] + (c + i) % 3 for i in range(act[2])],
                      "key": [f"k{(c * 7 + i) % 3}" for i in range(act[2])],
                      "v": [(c + i) % 7 for i in range(act[2])]})
        elif kind == "slide":
            for _ in range(act[2]):
                sched.request_slide(NAMES[act[1]])
        elif kind == "query":
            template, sizes, priority = act[1], act[2], act[3]
            ranges = ranges_for(template, sizes)
            plan = join_plan(text_of(template, ranges), streams)

            def done(t, template=template, ranges=ranges):
                if t.result is not None:
                    results.append((template, ranges, t.result, reference_from_windows(template, streams, ranges)))
            sched.submit(plan, priority=priority, on_done=done)
        elif kind == "periodic":
            template, sizes, slide_at, every = act[1], act[2], act[3], act[4]
            ranges = ranges_for(template, sizes)
            slide_at = slide_at % len(ranges)
            plan = join_plan(text_of(template, ranges, slide_at, every), streams, cache=True)

            def answered(r, template=template, ranges=ranges):
                results.append((template, ranges, r, reference_from_windows(template, streams, ranges)))
            sched.register(plan, every=every, on_answer=answered)
        else:
            for _ in range(act[1]):
                step()
    guard = 0
    while sched.step() is not None and guard < 100_000:
        now[0] += 1
        guard += 1
        remember()
    return sched, history, results, seen, streams


def check_run(script) -> dict:
    """Run `script` under every policy and check isolation and answers; the totals per policy."""
    totals = {}
    for policy in POLICIES:
        sched, history, results, seen, streams = run(policy, script)
        report = check(history.events)
        assert report.errors == [], (policy, report.errors)
        expect = "ws" if policy == "ws" else "lws"
        assert report.violations(expect) == [], (policy, report.violations(expect))
        verdicts = {v.txn: v for v in report.verdicts}
        assert len(verdicts) == len(results), policy
        for template, ranges, r, at_commit in results:
            v = verdicts[r.txn]
            assert v.parts is not None and set(v.parts) == {s for s, _ in TEMPLATES[template][1]}
            for sw in r.sources:  # the answer's per-stream provenance is what it read
                assert sw.slide == (max(v.parts[sw.stream]["versions"]) if v.parts[sw.stream]["versions"] else -1)
            claimed = reference_from_versions(template, streams, ranges, v.parts, seen)
            assert same(r.answer.rows, claimed), (policy, template, r.answer.rows, claimed)
            if policy != "ws":  # latest-window serializable: the windows as they stood at commit
                assert same(r.answer.rows, at_commit), (policy, template, r.answer.rows, at_commit)
        if policy == "ttu-rescan":
            assert sched.totals()["aborts"] == 0
        totals[policy] = {**sched.totals(), "answers": len(results)}
    return totals


@pytest.mark.slow
@settings(max_examples=examples(40), deadline=None)
@given(scripts)
def test_join_histories_are_isolated_and_answers_match(script):
    totals = check_run(script)
    target(float(totals["lws"]["aborts"]), label="lws aborts")
    target(float(totals["ttu-rescan"]["removals"]), label="rescan removals")


def busy_script(seed: int) -> list:
    """Joins interleaved operation by operation with slides of every joined stream (bursts too)."""
    rng = random.Random(seed)
    script = list(_FILL)
    for _ in range(rng.randint(3, 6)):
        template = rng.randrange(len(TEMPLATES))
        sizes = [rng.randint(1, 5) for _ in range(3)]
        if rng.random() < 0.3:
            script.append(("periodic", template, sizes, rng.randrange(3), rng.randint(1, 2)))
        else:
            script.append(("query", template, sizes, rng.randrange(3)))
        for _ in range(rng.randint(2, 10)):
            r = rng.random()
            if r < 0.35:
                script.append(("append", rng.randrange(3), rng.randint(1, 4)))
            elif r < 0.7:
                burst = rng.choice([1, 1, 1, 2, 3])
                # a step applies one due slide; the steps after the burst read
                script += [("slide", rng.randrange(3), burst), ("step", burst + rng.randint(0, 2))]
            else:
                script.append(("step", rng.randint(1, 3)))
    return script


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(60))
def test_join_histories_with_slides_between_every_read(seed):
    totals = check_run(busy_script(seed))
    assert totals["ttu"]["answers"] > 0


# -- deterministic cases -----------------------------------------------------------------------------------
def setup(policy, fill=True, **kw):
    now = [0]
    h = History()
    sched = Scheduler(policy, clock=lambda: now[0], history=h, **kw)
    streams = make_streams()
    for s in streams.values():
        sched.add_stream(s)
    if fill:
        for j in range(5):
            for name in NAMES:
                slide(sched, streams[name], j)
    return sched, streams, h, now


def slide(sched, s, value, request_only=False):
    s.append({"ts": [value, value + 1], "key": ["k0", "k1"], "v": [value, value + 1]})
    sched.request_slide(s.name)
    if not request_only:
        assert sched.step() == "slide"


TWO = "SELECT COUNT(*), SUM(a.v), SUM(b.v) FROM s0 a JOIN s1 b ON a.key = b.key"


def expected(streams, text=TWO):
    return JoinQueryPlan(plan_join(parse_statement(text), streams, cache=False), streams).evaluate(
        {s.name: {sub.slide: sub for sub in s.window.youngest(s.window.n)} for s in streams.values()}).rows


def ops(h, txn):
    return [(e["op"], e["stream"], e["version"]) for e in h.events if e["txn"] == txn]


def test_lws_join_aborts_when_a_slide_of_the_other_stream_expires_a_read_subwindow():
    sched, streams, h, now = setup("lws")
    txn = sched.submit(join_plan(TWO, streams))
    for _ in range(5):                        # reads s0's 4 sub-windows, then s1's oldest
        sched.step()
    assert [o for o in ops(h, txn.id) if o[0] == "r"][-1] == ("r", "s1", 2)
    slide(sched, streams["s1"], 50)           # expires s1's version 2: read already
    sched.run_until_idle()
    assert txn.result.restarts == 1 and sched.totals()["aborts"] == 1
    assert txn.result.answer.rows == expected(streams)
    assert [(o[0], o[1]) for o in ops(h, txn.id) if o[0] in "bac"][:4] == [("b", "s0"), ("b", "s1"), ("a", "s0"),
                                                                          ("a", "s1")]
    report = check(h.events)
    assert report.violations("lws") == [] and report.aborts == 1 and report.errors == []


def test_ttu_join_reads_the_subwindow_due_to_expire_first_last_across_streams():
    """Processing-time streams: s1's sub-windows are 3x longer, so s0's oldest expires first and is read
    last; a slide of s0 that expires an unread sub-window costs nothing."""
    now = [0]
    h = History()
    sched = Scheduler("ttu", clock=lambda: now[0], history=h)
    fast = Stream("fast", SCHEMA, WindowSpec(subwindows=3, subwindow_ms=10), 0)
    slow = Stream("slow", SCHEMA, WindowSpec(subwindows=3, subwindow_ms=30), 0)
    for s in (fast, slow):
        sched.add_stream(s)
    while now[0] < 90:
        now[0] += 10
        for s in (fast, slow):
            s.append({"ts": [now[0]], "key": ["k"], "v": [now[0]]})
        sched.run_until_idle()
    assert (fast.window.latest, slow.window.latest) == (8, 2)
    q = "SELECT COUNT(*) FROM fast a JOIN slow b ON a.key = b.key"
    txn = sched.submit(join_plan(q, {"fast": fast, "slow": slow}))
    sched.step()
    sched.step()
    sched.step()
    reads = [(o[1], o[2]) for o in ops(h, txn.id) if o[0] == "r"]
    # time to update: fast 8 -> 120, 7 -> 110, 6 -> 100; slow 2 -> 180, 1 -> 150, 0 -> 120
    assert reads == [("slow", 2), ("slow", 1), ("fast", 8)]
    sched.run_until_idle()
    reads = [(o[1], o[2]) for o in ops(h, txn.id) if o[0] == "r"]
    assert reads[-1] == ("fast", 6) and txn.result.restarts == 0
    assert txn.result.answer.rows == [(27,)]  # 3 fast rows x 9 slow rows, one key
    assert check(h.events).count("lws") == 1


def test_ttu_rescan_join_removes_the_expired_reference_instead_of_aborting():
    sched, streams, h, now = setup("ttu-rescan")
    txn = sched.submit(join_plan(TWO, streams))
    while len([o for o in ops(h, txn.id) if o[0] == "r"]) < 6:
        sched.step()
    for name in NAMES[:2]:                    # two slides of each stream overtake the query
        slide(sched, streams[name], 60, request_only=True)
        slide(sched, streams[name], 61, request_only=True)
    sched.run_until_idle()
    assert txn.result.restarts == 0 and sched.totals()["aborts"] == 0 and sched.totals()["removals"] >= 1
    assert [o for o in ops(h, txn.id) if o[0] == "u"]
    assert txn.result.answer.rows == expected(streams)
    assert check(h.events).violations("lws") == []


def test_serial_join_locks_every_joined_stream():
    sched, streams, h, now = setup("serial")
    txn = sched.submit(join_plan(TWO, streams))
    sched.step()
    slide(sched, streams["s1"], 70, request_only=True)
    slide(sched, streams["s2"], 70, request_only=True)
    assert sched.step() == "slide"            # s2 is not joined: it slides
    while not txn.done:
        assert sched.step() == "read"         # s1's slide waits for the join's commit
    assert streams["s1"].window.latest == 4
    assert sched.step() == "slide" and streams["s1"].window.latest == 5
    assert check(h.events).violations("lws") == []


def test_ws_join_snapshot_covers_every_stream_at_begin():
    sched, streams, h, now = setup("ws")
    before = expected(streams)
    txn = sched.submit(join_plan(TWO, streams))
    sched.step()
    for name in NAMES:
        slide(sched, streams[name], 80)
    sched.run_until_idle()
    assert txn.result.answer.rows == before and txn.result.restarts == 0
    [v] = check(h.events).verdicts
    assert v.level == "ws" and v.parts["s0"]["reflects"] == 4 and v.parts["s1"]["reflects"] == 4


def test_self_join_reads_its_stream_once():
    sched, streams, h, now = setup("ttu")
    q = "SELECT COUNT(*) FROM s0 x [RANGE 2 SUBWINDOWS] JOIN s0 y ON x.key = y.key"
    txn = sched.submit(join_plan(q, streams))
    sched.run_until_idle()
    evs = ops(h, txn.id)
    assert [o for o in evs if o[0] == "b"] == [("b", "s0", None)]
    assert sorted(o[2] for o in evs if o[0] == "r") == [1, 2, 3, 4]  # the larger RANGE, once
    assert txn.result.answer.rows == [(16,)]  # x: 4 rows (2 per key), each meeting the 4 y rows of its key
    b = [e for e in h.events if e["txn"] == txn.id and e["op"] == "b"][0]
    assert b["streams"] == ["s0"] and b["window_len"] == 4


def test_periodic_join_slide_counts_the_slides_of_the_stream_that_has_it():
    sched, streams, h, now = setup("ttu")
    answers = []
    q = ("SELECT COUNT(*), SUM(a.v), SUM(b.v) FROM s0 a [RANGE 4 SUBWINDOWS SLIDE 2 SUBWINDOWS] "
         "JOIN s1 b ON a.key = b.key")
    task = sched.register(join_plan(q, streams, cache=True), every=2, on_answer=answers.append)
    sched.run_until_idle()
    assert len(answers) == 1 and answers[0].answer.rows == expected(streams)
    for value in (90, 91, 92):                # s1 slides: no SLIDE on b, so no re-execution
        slide(sched, streams["s1"], value)
        sched.run_until_idle()
    assert len(answers) == 1
    slide(sched, streams["s0"], 93)
    sched.run_until_idle()
    assert len(answers) == 1                  # one slide of s0: not yet
    slide(sched, streams["s0"], 94)
    # SLIDE 2: lazy (thesis 5.2.2): nothing is joined between executions; the execution joins the
    # new sub-windows and reuses the kept result of the unexpired ones
    assert not sched._refresh and sched.step() != "refresh"
    sched.run_until_idle()
    assert len(answers) == 2 and answers[1].answer.rows == expected(streams)
    assert [sw.slide for sw in answers[1].sources] == [6, 7]
    assert answers[1].slide == 6 and task.reflected == {"s0": 6, "s1": 7}
    # lazy: two evaluations in all (one per execution, none per slide); what expired was dropped
    assert not task.plan.eager and task.plan.join.stats.evaluations == 2
    assert task.plan.join.stats.rows_expired > 0
    assert check(h.events).violations("lws") == []


def test_periodic_join_with_slide_on_both_sources_is_due_on_either():
    sched, streams, h, now = setup("lws")
    answers = []
    q = ("SELECT COUNT(*) FROM s0 a [RANGE 2 SUBWINDOWS SLIDE 1 SUBWINDOWS] JOIN s1 b [RANGE 2 SUBWINDOWS "
         "SLIDE 1 SUBWINDOWS] ON a.key = b.key")
    sched.register(join_plan(q, streams, cache=True), every=1, on_answer=answers.append)
    sched.run_until_idle()
    slide(sched, streams["s0"], 100)
    assert sched.step() == "refresh"          # SLIDE 1: eager, the kept join result follows each slide
    sched.run_until_idle()
    slide(sched, streams["s1"], 100)
    sched.run_until_idle()
    assert len(answers) == 3
    assert [tuple(sw.slide for sw in a.sources) for a in answers] == [(4, 4), (5, 4), (5, 5)]


def test_one_time_join_beyond_the_row_limit_is_refused():
    sched, streams, h, now = setup("ttu")
    txn = sched.submit(join_plan(TWO, streams, max_rows=3))
    sched.run_until_idle()
    assert isinstance(txn.error, ResourceLimit) and txn.result is None
    assert "more than 3 rows" in str(txn.error)
    report = check(h.events)
    assert report.verdicts == [] and report.aborts == 1 and report.errors == []


def test_periodic_join_beyond_the_row_limit_stays_registered_and_reports():
    sched, streams, h, now = setup("ttu")
    errors, answers = [], []
    q = "SELECT COUNT(*) FROM s0 a [RANGE 1 SUBWINDOWS SLIDE 1 SUBWINDOWS] JOIN s1 b ON a.key = b.key"
    task = sched.register(join_plan(q, streams, cache=True, max_rows=5), every=1, on_answer=answers.append,
                          on_error=lambda t, e: errors.append(e))
    sched.run_until_idle()
    assert len(errors) == 1 and isinstance(errors[0], ResourceLimit) and task.id in sched.tasks
    slide(sched, streams["s0"], 5)  # still too large (2 x 6 rows): skipped again, still registered
    sched.run_until_idle()
    assert len(errors) == 2 and task.id in sched.tasks and answers == []


def test_dropping_a_joined_stream_withdraws_its_joins():
    sched, streams, h, now = setup("ttu")
    txn = sched.submit(join_plan(TWO, streams))
    sched.step()
    task = sched.register(join_plan(TWO.replace("FROM s0 a", "FROM s0 a [SLIDE 1 SUBWINDOWS]"), streams,
                                    cache=True), every=1)
    other = sched.register(join_plan(TWO.replace("s1", "s2").replace("FROM s0 a", "FROM s0 a [SLIDE 1 SUBWINDOWS]"),
                                     streams, cache=True), every=1)
    sched.drop_stream("s1")
    assert isinstance(txn.error, QueryWithdrawn)
    assert task.id not in sched.tasks and not task.active and other.id in sched.tasks
    sched.run_until_idle()
    assert check(h.events).errors == []


# -- the engine: Register of join texts, replay, drop ------------------------------------------------------
def engine_with_streams(policy="ttu"):
    eng = Engine(EngineConfig(policy=policy), History())
    for name, n in N_SUB.items():
        eng.apply(CreateStream(name, tuple(SCHEMA.items()), "ts", WindowSpec(subwindows=n, subwindow_ms=1, clock="manual"), 0.0))
    return eng


def feed(eng, rounds, start=0):
    import pyarrow as pa
    for j in range(start, start + rounds):
        for name in NAMES:
            eng.apply(Append(name, pa.table({"ts": [j, j + 1], "key": [f"k{j % 2}", "k1"], "v": [j, 2 * j]}), "", None,
                             float(j)))
            eng.apply(Slide(name, float(j)))


def test_engine_registers_a_periodic_join_and_replays_it():
    eng = engine_with_streams()
    answers = []
    eng.on_answer = lambda qid, r: answers.append((qid, r))
    feed(eng, 3)
    q = ("SELECT a.key, COUNT(*), SUM(b.v) FROM s0 a [RANGE 2 SUBWINDOWS SLIDE 1 SUBWINDOWS] JOIN s1 b "
         "ON a.key = b.key AND b.ts BETWEEN a.ts - 1 AND a.ts + 1 GROUP BY a.key")
    p = eng.apply(Register("", q, 0, 3.0, "alice"))
    assert p.task.every == 1 and isinstance(p.task.plan, JoinQueryPlan)
    feed(eng, 4, start=3)
    while eng.step() is not None:
        pass
    eng._check()
    assert answers and answers[-1][1].answer.rows == expected(eng.sched.streams, q)
    log = eng.drain()
    again = Engine(EngineConfig(policy="ttu"))
    for cmd in log:
        again.replay(cmd)
    assert again.digest() == eng.digest() and list(again.periodic) == [p.query_id]
    again._check()
    gone = again.apply(DropStream("s1", 10.0))
    assert gone == [p.query_id] and again.periodic == {}
    again._check()


def test_a_periodic_two_way_equi_join_aggregate_is_recomputed_per_key_and_a_band_join_keeps_state():
    eng = engine_with_streams()
    answers = []
    eng.on_answer = lambda qid, r: answers.append((qid, r))
    feed(eng, 3)
    equi = ("SELECT a.key, COUNT(*), SUM(b.v) FROM s0 a [RANGE 2 SUBWINDOWS SLIDE 1 SUBWINDOWS] JOIN s1 b "
            "ON a.key = b.key GROUP BY a.key")
    band = equi.replace("ON a.key = b.key", "ON a.key = b.key AND b.ts BETWEEN a.ts - 1 AND a.ts + 1")
    pe, pb = (eng.apply(Register("", q, 0, 3.0)) for q in (equi, band))
    assert pe.task.plan.join.by_key and not pe.task.plan.join.cache and not pe.task.plan.eager
    assert not pb.task.plan.join.by_key and pb.task.plan.join.cache
    for start in (3, 7):
        feed(eng, 4, start=start)
        while eng.step() is not None:
            pass
        eng._check()
        for p, q in ((pe, equi), (pb, band)):
            mine = [r for qid, r in answers if qid == p.query_id]
            assert mine and mine[-1].answer.rows == expected(eng.sched.streams, q)


def test_engine_refuses_bad_join_registrations():
    eng = engine_with_streams()
    with pytest.raises(Exception, match="needs SLIDE"):
        eng.apply(Register("", TWO, 0, 0.0))
    with pytest.raises(NotFound):
        eng.apply(Register("", TWO.replace("s1 b", "nope b").replace("FROM s0 a", "FROM s0 a [SLIDE 1 SUBWINDOWS]"),
                           0, 0.0))
    with pytest.raises(Exception, match="register it instead"):
        eng.plan(parse_statement(TWO.replace("FROM s0 a", "FROM s0 a [SLIDE 1 SUBWINDOWS]")))
    assert eng.periodic == {}
    p = eng.apply(Register("P9", TWO.replace("FROM s0 a", "FROM s0 a [SLIDE 1 SUBWINDOWS]"), 0, 0.0))
    assert p.query_id == "P9" and eng.next_query == 10
    eng.apply(Unregister("P9", 0.0))
    assert eng.periodic == {} and eng.sched.tasks == {}


# -- the checker on hand-written multi-stream histories ----------------------------------------------------
def ev(seq, stream, op, txn, version=None, window_len=None, streams=None):
    out = {"seq": seq, "stream": stream, "op": op, "txn": txn, "subwindow": None if version is None else version % 2,
           "version": version, "window_len": window_len, "t": seq}
    if streams is not None:
        out["streams"] = streams
    return out


def _slides(seq, stream, versions):
    out = []
    for v in versions:
        out += [ev(seq, stream, "w", f"T{v}", v), ev(seq + 1, stream, "c", f"T{v}")]
        seq += 2
    return out, seq


def test_checker_join_levels():
    base, seq = _slides(0, "a", [0, 1])
    more, seq = _slides(seq, "b", [0, 1])
    h = base + more
    j = ["a", "b"]
    h += [ev(seq, "a", "b", "Q1", window_len=2, streams=j), ev(seq + 1, "b", "b", "Q1", window_len=2, streams=j),
          ev(seq + 2, "a", "r", "Q1", 0), ev(seq + 3, "a", "r", "Q1", 1), ev(seq + 4, "b", "r", "Q1", 0),
          ev(seq + 5, "b", "r", "Q1", 1), ev(seq + 6, "a", "c", "Q1"), ev(seq + 7, "b", "c", "Q1")]
    [v] = check(h).verdicts
    assert v.level == "lws" and v.stream == "a,b" and v.parts["b"]["versions"] == [0, 1]

    # b slid before the commit: b's part is only WS, but both windows were current at one moment
    w, _ = _slides(seq + 6, "b", [2])
    h2 = h[:-2] + w + [ev(seq + 9, "a", "c", "Q1"), ev(seq + 10, "b", "c", "Q1")]
    [v] = check(h2).verdicts
    assert v.level == "ws" and v.parts["a"]["level"] == "lws" and v.parts["b"]["level"] == "ws"

    # a's window {0, 1} and b's window {1, 2} were never current at the same moment: a slid to 2 before
    # b slid to 2
    h3, seq = _slides(0, "a", [0, 1])
    w, seq = _slides(seq, "b", [0, 1])
    h3 += w
    w, seq = _slides(seq, "a", [2])
    h3 += w
    w, seq = _slides(seq, "b", [2])
    h3 += w
    h3 += [ev(seq, "a", "b", "Q2", window_len=2, streams=j), ev(seq + 1, "b", "b", "Q2", window_len=2, streams=j),
           ev(seq + 2, "a", "r", "Q2", 0), ev(seq + 3, "a", "r", "Q2", 1), ev(seq + 4, "b", "r", "Q2", 1),
           ev(seq + 5, "b", "r", "Q2", 2), ev(seq + 6, "a", "c", "Q2"), ev(seq + 7, "b", "c", "Q2")]
    [v] = check(h3).verdicts
    assert v.parts["a"]["level"] == "ws" and v.parts["b"]["level"] == "lws" and v.level == "torn"
    assert check(h3).violations("ws") == [v]

    # a torn part makes the join torn; an abort counts once for all its streams
    h4 = [e for e in h if not (e["txn"] == "Q1" and e["op"] == "r" and e["stream"] == "a" and e["version"] == 0)]
    [v] = check(h4).verdicts
    assert v.parts["a"]["level"] == "torn" and v.level == "torn" and v.reflects is None
    h5 = h[:-2] + [ev(seq + 6, "a", "a", "Q1"), ev(seq + 7, "b", "a", "Q1")]
    r = check(h5)
    assert r.aborts == 1 and r.verdicts == [] and r.errors == []


def test_check_history_cli_classifies_joins(tmp_path, capsys):
    import json

    from windowstore.server.cli import main
    sched, streams, h, now = setup("lws")
    txn = sched.submit(join_plan(TWO, streams))
    for _ in range(5):                        # up to s1's oldest sub-window, which the slide expires
        sched.step()
    slide(sched, streams["s1"], 50)
    sched.run_until_idle()
    good = tmp_path / "good.jsonl"
    good.write_text("".join(json.dumps(e) + "\n" for e in h.events))
    assert main(["check-history", str(good), "--expect", "lws"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["lws"] == 1 and out["summary"]["aborts"] == 1 and txn.result.restarts == 1
    # drop one of the join's reads of s1: torn, and the violation lists each stream's part
    events = list(h.events)
    last_r = max(i for i, e in enumerate(events) if e["txn"] == txn.id and e["op"] == "r" and e["stream"] == "s1")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(e) + "\n" for i, e in enumerate(events) if i != last_r))
    assert main(["check-history", str(bad), "--expect", "ws"]) == 1
    out = json.loads(capsys.readouterr().out)
    [v] = out["violations"]
    assert v["stream"] == "s0,s1" and v["level"] == "torn" and v["streams"]["s1"]["level"] == "torn"


@pytest.mark.parametrize("policy", POLICIES)
def test_a_single_stream_query_reads_as_a_join_of_one_source(policy):
    """One read path: a scan of s0 and a self-join of s0 (one source: the stream is read once) meet
    the same slides with the same reads, in the same order, and the same aborts, removals and
    commit, under every policy."""
    seen = []
    for text in ("SELECT SUM(v) FROM s0", "SELECT COUNT(*) FROM s0 a JOIN s0 b ON a.key = b.key"):
        sched, streams, h, now = setup(policy)
        s0 = streams["s0"]
        plan = join_plan(text, streams) if "JOIN" in text else plan_query(parse_query(text), s0, access="window")
        txn = sched.submit(plan)
        sched.step()
        for value in (50, 60):            # a slide after each of its first reads
            slide(sched, s0, value, request_only=True)
            sched.step()
            sched.step()
        sched.run_until_idle()
        assert txn.done and txn.error is None
        seen.append([(e["op"], e["version"]) for e in h.events if e["txn"] == txn.id])
        assert check(h.events).violations("ws" if policy == "ws" else "lws") == []
    assert seen[0] == seen[1]
    assert [op for op, _ in seen[0] if op == "r"] and seen[0][-1] == ("c", None)
