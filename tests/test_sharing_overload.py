"""The hybrid schedulers under overload (txn/sharing/schedulers.py, Hybrid.watch_overload): while a
member of a group is late, the group's sub-groups run at their own periods, as Conservative's do;
the group returns to the cost model's shortened periods once none of its members has been late for
its longest SLIDE. Driven step by step, time as updates (or a given slide), never a wall clock."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from windowstore.txn.sharing import CostModel, Groups, Member, SharingMode, Synopsis, make_scheduler
from windowstore.txn.sharing.schedulers import Conservative, Hybrid

# the worked example of 8.4.3 (tests/test_sharing.py): the hybrid runs G12 (SLIDE 3) every 2 minutes
EXAMPLE = {"Q1": (10, 2), "Q2": (5, 2), "Q3": (6, 2), "Q4": (15, 3), "Q5": (12, 3), "Q6": (20, 5), "Q7": (30, 5)}
COMPARISONS = CostModel(access=0, combine=1, probe=1, post=0)
HYBRIDS = [SharingMode.HYBRID, SharingMode.HYBRID_LATE, SharingMode.HYBRID_LP]


def example_groups() -> Groups:
    g = Groups()
    for q, (w, p) in EXAMPLE.items():
        g.add(Member(q, "s", ("max", w), Synopsis.BASIC, w, p))
    return g


def periods(sched) -> list[tuple[int, list[str]]]:
    return sorted((t.period, sorted(t.member_ids)) for t in sched.tasks)


SHORTENED = [(2, ["Q1", "Q2", "Q3", "Q4", "Q5"]), (5, ["Q6", "Q7"])]
OWN = [(2, ["Q1", "Q2", "Q3"]), (3, ["Q4", "Q5"]), (5, ["Q6", "Q7"])]


def drain(sched) -> list:
    """Every execution due now (time to spare): what a server that keeps up runs at a slide."""
    got = []
    while (ex := sched.pick()) is not None:
        sched.done(ex)
        sched._check()
        got.append(ex)
    return got


@pytest.mark.parametrize("mode", HYBRIDS)
def test_a_late_member_puts_its_group_at_its_own_periods_until_it_keeps_up_for_its_longest_slide(mode):
    sched = make_scheduler(mode, example_groups(), COMPARISONS)
    assert periods(sched) == SHORTENED
    drain(sched)
    sched.update()
    sched.since["Q6"] = 6  # SLIDE 5: late by one (an execution that took long)
    assert sched.watch_overload() is True
    sched._check()
    assert periods(sched) == OWN and sched.overloads == 1
    late_seen = sched.clock
    answered = {ex2 for ex in drain(sched) for ex2 in ex.members}
    assert "Q6" in answered
    # kept up from here: the group stays at its own periods for its longest SLIDE (5 updates), and
    # then until the switch makes no task overdue (G12, SLIDE 3, run every 2: answered 2 or fewer
    # updates ago)
    back = None
    for _ in range(12):
        sched.update()
        if periods(sched) == SHORTENED:
            back = sched.clock
            assert all(sched.d(t) >= 0 for t in sched.tasks), "no task overdue by the return alone"
            break
        assert sched.clock - late_seen < 5 or sched.since["Q4"] > 2, "hysteresis, then in step"
        drain(sched)
    assert back is not None and 5 <= back - late_seen <= 10 and sched.overloads == 1
    sched._check()


def test_a_late_member_seen_again_restarts_the_wait():
    sched = make_scheduler(SharingMode.HYBRID, example_groups(), COMPARISONS)
    drain(sched)
    sched.since["Q1"] = 3
    sched.watch_overload()
    for _ in range(3):
        sched.update()
        drain(sched)
    sched.since["Q4"] = 4  # late again before the group kept up for 5 updates
    sched.watch_overload()
    seen = sched.clock
    drain(sched)
    while periods(sched) == OWN:
        sched.update()
        drain(sched)
    assert sched.clock - seen >= 5 and sched.overloads == 1


def test_a_member_being_answered_is_not_late():
    """Its execution is under way (the server: a joint execution in flight that started on time,
    longer than a slide): the lateness of its answer is that execution's, not the slides since."""
    sched = make_scheduler(SharingMode.HYBRID, example_groups(), COMPARISONS)
    drain(sched)
    sched.since["Q1"] = 3
    assert sched.watch_overload(answering={"Q1"}) is False and periods(sched) == SHORTENED
    assert sched.watch_overload() is True and periods(sched) == OWN


def test_the_slides_given_are_the_clock():
    """The server gives its streams' latest slides: the wait is counted in those, not in calls."""
    sched = make_scheduler(SharingMode.HYBRID, example_groups(), COMPARISONS)
    drain(sched)
    sched.since["Q1"] = 3
    sched.watch_overload(lambda stream: 100)
    drain(sched)
    for _ in range(10):  # calls at the same slide (executions ending) do not count
        assert sched.watch_overload(lambda stream: 104) is False
    assert periods(sched) == OWN
    assert sched.watch_overload(lambda stream: 105) is True
    assert periods(sched) == SHORTENED


def test_the_return_waits_for_the_phases_at_most_another_longest_slide():
    sched = make_scheduler(SharingMode.HYBRID, example_groups(), COMPARISONS)
    drain(sched)
    sched.since["Q1"] = 3
    sched.watch_overload(lambda stream: 100)
    drain(sched)
    sched.since.update(Q4=3, Q5=3)  # on time at its SLIDE 3, but past the 2 it would run at: not in step
    assert sched.watch_overload(lambda stream: 105) is False and periods(sched) == OWN
    assert sched.watch_overload(lambda stream: 109) is False
    assert sched.watch_overload(lambda stream: 110) is True and periods(sched) == SHORTENED
    sched._check()


def test_a_group_whose_periods_are_its_own_does_not_form_its_tasks_again():
    g = Groups()
    for q, (w, p) in {"A": (4, 2), "B": (6, 2)}.items():  # one sub-group: nothing to shorten
        g.add(Member(q, "s", ("max", w), Synopsis.BASIC, w, p))
    sched = make_scheduler(SharingMode.HYBRID, g, COMPARISONS)
    tasks = sched.tasks
    sched.since["A"] = 5
    assert sched.watch_overload() is False and sched.tasks is tasks and sched.overloads == 0


def test_switching_drops_no_member_and_keeps_each_one_s_updates_since_its_answer():
    sched = make_scheduler(SharingMode.HYBRID, example_groups(), COMPARISONS)
    drain(sched)
    since = {"Q1": 3, "Q2": 3, "Q3": 3, "Q4": 1, "Q5": 1, "Q6": 4, "Q7": 4}
    sched.since.update(since)
    sched.watch_overload()
    assert sched.since == since
    ex = sched.pick()
    # only the late sub-group is due at its own period: G12 (SLIDE 3, 1 update since) is not run early
    assert sorted(ex.members) == ["Q1", "Q2", "Q3"] and ex.late == {"Q1": 1, "Q2": 1, "Q3": 1}


# -- against Conservative, random groups and states ----------------------------------------------
def groups_strategy():
    one = st.tuples(st.integers(0, 3), st.integers(1, 12), st.integers(1, 6))
    return st.lists(one, min_size=2, max_size=12)


def build(specs) -> Groups:
    g = Groups()
    for i, (shape, n, p) in enumerate(specs):
        g.add(Member(f"m{i}", "s", ("basic", shape, n), Synopsis.BASIC, n, p))
    return g


@settings(max_examples=80, deadline=None)
@given(specs=groups_strategy(), mode=st.sampled_from(HYBRIDS), data=st.data())
def test_a_late_group_is_scheduled_as_conservative_would(specs, mode, data):
    """In a group with a late member, the hybrid's tasks are Conservative's; the plain hybrid
    picks exactly Conservative's executions from the same state, and its late variants answer at
    least the members Conservative would (they join more late or pending tasks to them)."""
    g = build(specs)
    hybrid = make_scheduler(mode, g, CostModel())
    cons = Conservative(g, CostModel())
    since = {m: data.draw(st.integers(0, 2 * g.members[m].period + 2), label=m) for m in sorted(g.members)}
    late = {mid for mid, s in since.items() if s > g.members[mid].period}
    hybrid.since.update(since)
    cons.since.update(since)
    hybrid.watch_overload()
    hybrid._check()
    late_groups = {gid for gid, outs in g.groups.items() for o in outs if late & set(o.members)}
    assert set(hybrid.late_at) == late_groups
    mine = {t.gid: [] for t in hybrid.tasks}
    for t in hybrid.tasks:
        mine[t.gid].append((t.period, sorted(t.member_ids)))
    theirs = {t.gid: [] for t in cons.tasks}
    for t in cons.tasks:
        theirs[t.gid].append((t.period, sorted(t.member_ids)))
    for gid in late_groups:
        assert sorted(mine[gid]) == sorted(theirs[gid])
    picked_h = [ex for ex in hybrid.pick_all() if ex.gid in late_groups]
    picked_c = [ex for ex in cons.pick_all() if ex.gid in late_groups]
    if mode == SharingMode.HYBRID:
        assert sorted((ex.gid, sorted(ex.members)) for ex in picked_h) == sorted((ex.gid, sorted(ex.members)) for ex in picked_c)
    else:
        assert {m for ex in picked_c for m in ex.members} <= {m for ex in picked_h for m in ex.members}


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
                if ex.gid in sched.late_at:  # (a CS8 repeat, a longer SLIDE than its output's, may be)
                    assert ex.early[mid] == 0 or g.output_of(mid).period < p, "no run early while its group is late"
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
