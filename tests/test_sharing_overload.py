"""The hybrid schedulers under overload (txn/sharing/schedulers.py, Hybrid.watch_overload): while a
member of a group is late, the group runs at the periods chosen for drifting phases (Phasing.DRIFTING:
sub-groups run apart meet only by chance); it returns to the choice for held phases once none of its
members has been late for its longest SLIDE. Driven step by step, time as updates (or a given
slide), never a wall clock."""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings, strategies as st

from windowstore.txn.sharing import CostModel, Groups, Member, Phasing, SharingMode, Synopsis, choose_periods, make_scheduler
from windowstore.txn.sharing.schedulers import Hybrid

# SLIDEs 2, 4 and 5 (Q2 a CS8 repeat of Q3's output at 5); longest SLIDE 5
EXAMPLE = {"Q0": (19, 2), "Q1": (14, 5), "Q2": (13, 5), "Q3": (13, 4)}
MODEL = CostModel(access=1, combine=0.7, post=1.0, finish=0.7)
HYBRIDS = [SharingMode.HYBRID, SharingMode.HYBRID_LATE, SharingMode.HYBRID_LP]


def example_groups() -> Groups:
    g = Groups()
    for q, (w, p) in EXAMPLE.items():
        g.add(Member(q, "s", ("max", w), Synopsis.BASIC, w, p, combines=True))
    return g


def periods(sched) -> list[tuple[int, list[str]]]:
    return sorted((t.period, sorted(t.member_ids)) for t in sched.tasks)


HELD = [(2, ["Q0"]), (4, ["Q1", "Q2", "Q3"])]       # SLIDE 5 runs with SLIDE 4: they meet every 20 slides
LATE = [(2, ["Q0", "Q1", "Q2", "Q3"])]               # drifting, 4 and 5 meet 2's only by chance: all at 2


def test_the_example_s_two_choices_differ():
    g = example_groups()
    (gid,) = g.groups
    late = dataclasses.replace(MODEL, cover=None, phasing=Phasing.DRIFTING)
    assert choose_periods(g.subgroups(gid), MODEL) == {2: 2, 4: 4, 5: 4}
    assert choose_periods(g.subgroups(gid), late) == {2: 2, 4: 2, 5: 2}


def drain(sched) -> list:
    """Every execution due now (time to spare): what a server that keeps up runs at a slide."""
    got = []
    while (ex := sched.pick()) is not None:
        sched.done(ex)
        sched._check()
        got.append(ex)
    return got


@pytest.mark.parametrize("mode", HYBRIDS)
def test_a_late_member_puts_its_group_at_its_drifting_choice_until_it_keeps_up_for_its_longest_slide(mode):
    sched = make_scheduler(mode, example_groups(), MODEL)
    assert periods(sched) == HELD
    drain(sched)
    sched.update()
    sched.since["Q0"] = 3  # SLIDE 2: late by one (an execution that took long)
    assert sched.watch_overload() is True
    sched._check()
    assert periods(sched) == LATE and sched.overloads == 1
    late_seen = sched.clock
    assert "Q0" in {m for ex in drain(sched) for m in ex.members}
    # kept up from here: the group stays at its drifting choice for its longest SLIDE (5 updates),
    # then until the return makes no task overdue (each member answered within its held period)
    back = None
    for _ in range(12):
        sched.update()
        if periods(sched) == HELD:
            back = sched.clock
            assert all(sched.d(t) >= 0 for t in sched.tasks), "no task overdue by the return alone"
            break
        drain(sched)
    assert back is not None and 5 <= back - late_seen <= 10 and sched.overloads == 1
    sched._check()


def test_a_late_member_seen_again_restarts_the_wait():
    sched = make_scheduler(SharingMode.HYBRID, example_groups(), MODEL)
    drain(sched)
    sched.since["Q0"] = 3
    sched.watch_overload()
    for _ in range(3):
        sched.update()
        drain(sched)
    sched.since["Q1"] = 6  # late again before the group kept up for 5 updates
    sched.watch_overload()
    seen = sched.clock
    drain(sched)
    while periods(sched) == LATE:
        sched.update()
        drain(sched)
    assert sched.clock - seen >= 5 and sched.overloads == 1


def test_a_member_being_answered_is_not_late():
    """Its execution is under way (the server: a joint execution in flight that started on time,
    longer than a slide): the lateness of its answer is that execution's, not the slides since."""
    sched = make_scheduler(SharingMode.HYBRID, example_groups(), MODEL)
    drain(sched)
    sched.since["Q0"] = 3
    assert sched.watch_overload(answering={"Q0"}) is False and periods(sched) == HELD
    assert sched.watch_overload() is True and periods(sched) == LATE


def _late_at_slide_100():
    """The example group, its member Q0 seen late at its stream's slide 100, then run until nothing is due."""
    sched = make_scheduler(SharingMode.HYBRID, example_groups(), MODEL)
    drain(sched)
    sched.since["Q0"] = 3
    sched.watch_overload(lambda stream: 100)
    drain(sched)
    return sched


def test_the_slides_given_are_the_clock():
    """The server gives its streams' latest slides: the wait is counted in those, not in calls."""
    sched = _late_at_slide_100()
    for _ in range(10):  # calls at the same slide (executions ending) do not count
        assert sched.watch_overload(lambda stream: 104) is False
    assert periods(sched) == LATE
    assert sched.watch_overload(lambda stream: 105) is True
    assert periods(sched) == HELD


def test_the_return_waits_for_the_phases_at_most_another_longest_slide():
    sched = _late_at_slide_100()
    sched.since["Q1"] = 5  # on time at its SLIDE 5, but past the 4 it runs at when held: not in step
    assert sched.watch_overload(lambda stream: 105) is False and periods(sched) == LATE
    assert sched.watch_overload(lambda stream: 109) is False
    assert sched.watch_overload(lambda stream: 110) is True and periods(sched) == HELD
    sched._check()


def test_a_group_whose_two_choices_agree_does_not_form_its_tasks_again():
    g = Groups()
    for q, (w, p) in {"A": (4, 2), "B": (6, 2)}.items():  # one sub-group: nothing to choose
        g.add(Member(q, "s", ("max", w), Synopsis.BASIC, w, p))
    sched = make_scheduler(SharingMode.HYBRID, g, MODEL)
    tasks = sched.tasks
    sched.since["A"] = 5
    assert sched.watch_overload() is False and sched.tasks is tasks and sched.overloads == 0


def test_switching_drops_no_member_and_keeps_each_one_s_updates_since_its_answer():
    sched = make_scheduler(SharingMode.HYBRID, example_groups(), MODEL)
    drain(sched)
    since = {"Q0": 3, "Q1": 1, "Q2": 1, "Q3": 1}
    sched.since.update(since)
    sched.watch_overload()
    assert sched.since == since
    ex = sched.pick()
    # one task now, due by Q0: every member answered, Q0 late by one, the others early
    assert sorted(ex.members) == ["Q0", "Q1", "Q3"] and ex.late == {"Q0": 1, "Q1": 0, "Q3": 0}
    assert ex.early == {"Q0": 0, "Q1": 4, "Q3": 3}  # (Q2, a CS8 repeat at 5, is not due before its task runs again)


# -- random groups and states ---------------------------------------------------------------------
def groups_strategy():
    one = st.tuples(st.integers(0, 3), st.integers(1, 12), st.integers(1, 6))
    return st.lists(one, min_size=2, max_size=12)


def build(specs) -> Groups:
    g = Groups()
    for i, (shape, n, p) in enumerate(specs):
        g.add(Member(f"m{i}", "s", ("basic", shape, n), Synopsis.BASIC, n, p))
    return g


def tasks_of(g: Groups, gid, target: dict[int, int]) -> list[tuple[int, list[str]]]:
    """A group's tasks when its sub-group of SLIDE p runs at target[p]: one per period run at."""
    by: dict[int, list[str]] = {}
    for p, outs in g.subgroups(gid).items():
        by.setdefault(target[p], []).extend(m for o in outs for m in o.members)
    return sorted((p, sorted(ms)) for p, ms in by.items())


@settings(max_examples=80, deadline=None)
@given(specs=groups_strategy(), mode=st.sampled_from(HYBRIDS), data=st.data())
def test_a_late_group_runs_at_its_drifting_choice_and_the_others_at_their_held_one(specs, mode, data):
    g = build(specs)
    model = CostModel()
    hybrid = make_scheduler(mode, g, model)
    since = {m: data.draw(st.integers(0, 2 * g.members[m].period + 2), label=m) for m in sorted(g.members)}
    late = {mid for mid, s in since.items() if s > g.members[mid].period}
    hybrid.since.update(since)
    hybrid.watch_overload()
    hybrid._check()
    assert hybrid.since == since
    drifting = dataclasses.replace(model, cover=None, phasing=Phasing.DRIFTING)
    for gid in g.groups:
        mine = sorted((t.period, sorted(t.member_ids)) for t in hybrid.tasks if t.gid == gid)
        is_late = any(late & set(o.members) for o in g.groups[gid])
        assert (gid in hybrid.late_at) == is_late
        chosen = choose_periods(g.subgroups(gid), drifting if is_late else model)
        assert mine == tasks_of(g, gid, chosen)


@settings(max_examples=40, deadline=None)
@given(specs=groups_strategy(), mode=st.sampled_from(HYBRIDS),
       budgets=st.lists(st.integers(0, 3), min_size=5, max_size=60))
def test_under_a_short_budget_nothing_is_dropped_and_the_counters_stay_right(specs, mode, budgets):
    """Each update gets a budget of executions (0: a slide the server had no time for); the
    hybrid switches as it falls late and keeps up; every answer's early and late counts are
    those of an oracle that notes when each member answered, and with time to spare every
    member is answered within its SLIDE again."""
    g = build(specs)
    sched = make_scheduler(mode, g, CostModel())
    assert isinstance(sched, Hybrid)
    last = {m: -sched.since[m] for m in g.members}
    now = 0

    def run(budget):
        for _ in range(budget):
            ex = sched.pick()
            if ex is None:
                return
            for mid in ex.members:
                p, gap = g.members[mid].period, now - last[mid]
                assert ex.early[mid] == max(0, p - gap) and ex.late[mid] == max(0, gap - p)
                last[mid] = now
            sched.done(ex)
            sched._check()

    for budget in budgets:
        now += 1
        sched.update()
        sched._check()
        run(budget)
    run(10_000)
    for mid, m in g.members.items():
        assert now - last[mid] < m.period, (mid, now, last[mid], m.period)
    for _ in range(2 * max(m.period for m in g.members.values()) + 1):  # keeping up: back to the chosen periods
        now += 1
        sched.update()
        run(10_000)
    assert not sched.late_at
