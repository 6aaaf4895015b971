"""The hybrid's choice of periods off the registration path (thesis 8.4.4; cost.PeriodChoice,
schedulers.Hybrid with a budget): made in bounded steps, it reaches the choice made at once for
the same group, however the steps fall and however often the group changes meanwhile; no step
simulates more slides than its budget (counted from the schedules costed, as
test_sharing.py counts a whole choice's); in the engine, a registration costs no schedule and the
group runs at its own SLIDEs (conservative) until the choice is made, and explain says so."""
from __future__ import annotations

import random

import pyarrow as pa
from hypothesis import given, settings, strategies as st

from windowstore.store import WindowSpec, parse_query
from windowstore.txn.commands import Append, CreateStream, Register, Slide
from windowstore.txn.engine import Engine, EngineConfig
from windowstore.txn.sharing import CostModel, Groups, Member, Phasing, SharingMode, Synopsis, choose_periods, \
    make_scheduler
from windowstore.txn.sharing import cost

MODELS = [
    CostModel(access=1.0, combine=0.0, probe=1, post=1.0, finish=1.0, cover=None, memo=True),  # the store's, less covers
    CostModel(access=0, combine=1, post=0),  # 8.4.3's comparisons
    CostModel(access=1.0, combine=0.0, post=10.0, finish=1.0, cover=None, phasing=Phasing.DRIFTING),  # 8.5's
]


def group_strategy():
    one = st.tuples(st.integers(1, 24), st.integers(1, 40), st.sampled_from(["r", "r", "t"]), st.booleans())
    return st.lists(one, min_size=1, max_size=16)


def members(specs) -> list[Member]:
    return [Member(f"m{i}", "s", ("q", i), Synopsis.BASIC, length, period, reads, combines=combines)
            for i, (period, length, reads, combines) in enumerate(specs)]


def one_group(specs) -> dict:
    g = Groups()
    for m in members(specs):
        g.add(m)
    (gid,) = g.groups
    return g.subgroups(gid)


def counting(monkeypatch) -> list[int]:
    """Each schedule costed: the slides it simulates, from its periods (the LCM up to its cap,
    two horizons with memo), counted apart from the code under test."""
    seen: list[int] = []
    plain = cost.schedule_cost

    def counted(tasks, model, phases=None, cap=cost.HORIZON_CAP):
        held = model.phasing is Phasing.HELD
        seen.append((2 if model.memo else 1) * min(cost.lcm([p for p, _ in tasks]), cap) if held else 0)
        return plain(tasks, model, phases, cap)
    monkeypatch.setattr(cost, "schedule_cost", counted)
    return seen


@settings(max_examples=40, deadline=None)
@given(specs=group_strategy(), model=st.sampled_from(MODELS), budget=st.integers(1, 3000),
       phased=st.booleans(), seed=st.integers(0, 10**6))
def test_a_choice_made_in_steps_is_the_choice_made_at_once(specs, model, budget, phased, seed):
    subgroups = one_group(specs)
    rng = random.Random(seed)
    phases = {p: rng.randrange(p) for p in subgroups} if phased and model.phasing is Phasing.HELD else None
    at_once = choose_periods(subgroups, model, phases)
    choice = cost.PeriodChoice(subgroups, model, phases)
    for _ in range(100_000):
        if choice.result is not None:
            break
        choice.step(budget)
    assert choice.result == at_once
    assert set(at_once) == set(subgroups) and all(at_once[q] == q <= p for p, q in at_once.items())
    # a second choice of the same group from the first's memo simulates nothing
    again = cost.PeriodChoice(subgroups, model, phases, choice.memo)
    assert again.step(1) == 0 and again.result == at_once


def test_no_step_simulates_more_than_its_budget(monkeypatch):
    """40 sub-groups (the greedy, short horizons) and 2 (every choice, two horizons of up to 720
    slides each: one schedule beyond the budget is a step of its own)."""
    seen = counting(monkeypatch)
    model = MODELS[0]
    for periods in (range(2, 42), (23, 29)):
        g = Groups()
        for i, p in enumerate(periods):
            g.add(Member(f"Q{i}", "s", ("max", i), Synopsis.BASIC, 40 + i % 7, p, reads="r"))
        (gid,) = g.groups
        subgroups = g.subgroups(gid)
        choice = cost.PeriodChoice(subgroups, model)
        steps = []
        while choice.result is None:
            n = len(seen)
            said = choice.step(cost.STEP_SLIDES)
            steps.append(seen[n:])
            assert said == sum(seen[n:])
            assert sum(seen[n:]) <= cost.STEP_SLIDES or len(seen[n:]) == 1, seen[n:]
            assert seen[n:], "each step costs a schedule"
        assert choice.result == choose_periods(subgroups, model)
        assert len(steps) > 1, "the choice took more than one step"
        assert sum(map(sum, steps)) <= cost.CHOICE_SLIDES + len(periods) * cost.NEAREST * 2 * cost.MIN_HORIZON


@settings(max_examples=30, deadline=None)
@given(specs=group_strategy(), extra=group_strategy(), model=st.sampled_from(MODELS[:2]),
       ops=st.lists(st.sampled_from(["add", "remove", "refine", "refine"]), max_size=30),
       mode=st.sampled_from([SharingMode.HYBRID, SharingMode.HYBRID_LP]))
def test_a_hybrid_with_a_budget_ends_where_the_hybrid_at_once_does(specs, extra, model, ops, mode):
    """Members come and go while choices are made in steps (each change starts the group's choice
    again; the memo is kept); meanwhile the group runs conservatively, each sub-group at its own
    period; once no choice is left, its tasks are those of a hybrid choosing at once."""
    g = Groups()
    for m in members(specs):
        g.add(m)
    waiting = [Member(f"x{i}", "s", ("x", i), Synopsis.BASIC, length, period, reads, combines=combines)
               for i, (period, length, reads, combines) in enumerate(extra)]
    sched = make_scheduler(mode, g, model, budget=200)
    for op in ops:
        if op == "add" and waiting:
            g.add(waiting.pop())
            sched.sync()
        elif op == "remove" and len(g.members) > 1:
            g.remove(sorted(g.members)[0])
            sched.sync()
        else:
            sched.refine()
        for t in sched.tasks:
            if sched.choosing(t.gid):
                assert all(o.period == t.period for o in t.outputs), "conservative while the choice is made"
        sched._check()
    for _ in range(10_000):
        if not sched.choosing():
            break
        sched.refine()
        sched._check()
    assert not sched.choosing()
    at_once = make_scheduler(mode, g, model)
    assert sorted((t.period, sorted(t.member_ids)) for t in sched.tasks) == \
        sorted((t.period, sorted(t.member_ids)) for t in at_once.tasks)


COLUMNS = (("ts", "int64"), ("k", "string"), ("v", "int64"))


def hybrid_engine(seed: int) -> Engine:
    """A `ws` engine sharing under `hybrid`, a stream of 39 slides of a few rows each."""
    e = Engine(EngineConfig(policy="ws", sharing="hybrid"))
    e.apply(CreateStream("p", COLUMNS, "ts", WindowSpec(64, 10, None, "manual", 0, ("k",), 4), 0))
    rng = random.Random(seed)
    for ts in range(1, 40):
        e.apply(Append("p", pa.table({"ts": [ts] * 3, "k": [rng.choice("ab") for _ in range(3)],
                                      "v": [rng.randint(0, 9) for _ in range(3)]}), "", None, ts))
        e.apply(Slide("p", ts))
    e.sched.run_until_idle()
    return e


def dashboard(e: Engine):
    """Registers twelve MAX panels of one CS2 group (ten distinct SLIDEs), one at a time; yields after each."""
    for i, period in enumerate([1, 2, 3, 4, 5, 6, 7, 9, 11, 13, 3, 7]):
        e.apply(Register(f"Q{i}", f"SELECT MAX(v) FROM p [RANGE {20 + i} SUBWINDOWS SLIDE {period} SUBWINDOWS] WHERE v > 2", 0, 39))
        yield i


def test_in_the_engine_a_registration_costs_no_schedule_and_the_choice_follows_the_slides(monkeypatch):
    seen = counting(monkeypatch)
    e = hybrid_engine(3)
    sharing = e.sched.sharing
    for _ in dashboard(e):
        assert not seen, "a registration costs no schedule"
    assert sharing.local.choosing()
    plan = e.plan(parse_query("SELECT MAX(v) FROM p [RANGE 50 SUBWINDOWS SLIDE 2 SUBWINDOWS] WHERE v > 2"), periodic=True)
    assert "being computed" in sharing.explain(plan, 2)
    assert sharing.stats()["tasks"] == 10, "each SLIDE its own task meanwhile (conservative)"
    assert sharing.stats()["choices_pending"] == 1, "the stats say a group's choice is being made"
    ts = 39
    slides = 0
    while sharing.local.choosing():  # each scheduler step (the server's unit of work) costs at most STEP_SLIDES
        ts += 1
        n = len(seen)
        e.apply(Slide("p", ts))
        assert not seen[n:], "a slide command costs no schedule (the scheduler's steps do)"
        while True:
            n = len(seen)
            if e.sched.step() is None:
                break
            assert sum(seen[n:]) <= cost.STEP_SLIDES or len(seen[n:]) == 1, seen[n:]
        slides += 1
        assert slides < 200
    assert slides > 1 and seen
    assert "being computed" not in sharing.explain(plan, 2)
    assert sharing.stats()["choices_pending"] == 0
    e._check()


def test_a_burst_of_registrations_takes_no_choice_steps_until_the_stream_slides(monkeypatch):
    """Each registration changes the group and starts its choice of periods again: steps taken
    between two registrations of a burst would be thrown away. The scheduler runs to idle after
    each one, as the server does, and costs no schedule; the first slide after the burst starts
    the choice, which is then the one made at once for the same group."""
    seen = counting(monkeypatch)
    e = hybrid_engine(5)
    sharing = e.sched.sharing
    for i in dashboard(e):
        e.sched.run_until_idle()  # the new query's first execution, and every spawn after it
        assert not seen, "no schedule costed while the burst goes on"
        assert sharing.local.choosing() == (i > 0), "(one SLIDE: nothing to choose)"
    ts = 39
    while sharing.local.choosing():
        ts += 1
        e.apply(Slide("p", ts))
        e.sched.run_until_idle()
        assert seen, "the first slide after the burst starts the choice"
        assert ts < 240
    e._check()
    at_once = make_scheduler("hybrid", sharing.groups, sharing.local.model)
    assert sorted((t.period, sorted(t.member_ids)) for t in sharing.local.tasks) == \
        sorted((t.period, sorted(t.member_ids)) for t in at_once.tasks)
