"""The simulated experiment of thesis 8.5 (txn/sharing/experiment.py): its workload follows 8.5.1,
and without overload every scheduler answers each query exactly when due, checked against counts
made by brute force from the queries' SLIDEs."""
import math

from windowstore.txn.sharing.experiment import cost_model, run, workload
from windowstore.txn.sharing.modes import SharingMode
from windowstore.txn.sharing.schedulers import make_scheduler

UPDATES = 60
UNLIMITED = 1e12


def test_workload_follows_8_5_1():
    g = workload(10, seed=3)
    assert len(g.members) == 80 and len(g.groups) == 8
    for m in g.members.values():
        assert 20 <= m.length <= 100 and 1 <= m.period <= m.length // 2
        assert m.combines  # per-key counters: added up along one scan (8.4.3, 8.4.4)
    split = workload(10, seed=3, by_slide=True)
    assert sorted((m.length, m.period) for m in split.members.values()) == \
        sorted((m.length, m.period) for m in g.members.values())
    for gid in split.groups:
        assert len(split.subgroups(gid)) == 1  # No-S: one SLIDE per group, so sub-groups never join
    assert len(split.groups) == sum(len(g.subgroups(gid)) for gid in g.groups)


def _due_answers(g) -> int:
    # a query registered at step 0 with SLIDE p is due at steps 0, p, 2p, ...
    return sum(math.ceil(UPDATES / m.period) for m in g.members.values())


def _steps_with_a_due(periods) -> int:
    return sum(1 for t in range(UPDATES) if any(t % p == 0 for p in periods))


def test_without_overload_no_s_and_conservative_answer_exactly_when_due():
    g = workload(5, seed=2)
    for mode in (SharingMode.NONE, SharingMode.CONSERVATIVE):
        o = run(mode, 5, capacity=UNLIMITED, updates=UPDATES, seed=2)
        assert o.latency == 0
        assert round(o.throughput * UPDATES) == _due_answers(g), mode
    # executions: No-S one per sub-group due; conservative one per group and step with any due
    no_s = run(SharingMode.NONE, 5, capacity=UNLIMITED, updates=UPDATES, seed=2)
    cons = run(SharingMode.CONSERVATIVE, 5, capacity=UNLIMITED, updates=UPDATES, seed=2)
    assert round(no_s.executions * UPDATES) == sum(math.ceil(UPDATES / p) for gid in g.groups for p in g.subgroups(gid))
    assert round(cons.executions * UPDATES) == sum(_steps_with_a_due(g.subgroups(gid)) for gid in g.groups)


def test_sharing_schedulers_answer_at_least_when_due_without_overload():
    g = workload(3, seed=2)
    for mode in (SharingMode.AGGRESSIVE, SharingMode.HYBRID, SharingMode.HYBRID_LP):
        o = run(mode, 3, capacity=UNLIMITED, updates=UPDATES, seed=2)
        assert o.latency == 0
        assert round(o.throughput * UPDATES) >= _due_answers(g), mode


def test_a_joint_execution_scans_the_longest_window_once():
    # 8.4.3/8.4.4: one youngest-to-oldest scan of the longest window answers the group, each query
    # then post-processes its counters; at step 0 every query of a group is due, so conservative
    # runs the whole group as one execution
    g = workload(5, seed=4)
    rate = 2.0
    sched = make_scheduler(SharingMode.CONSERVATIVE, g, cost_model(rate))
    for _ in g.groups:
        ex = sched.pick()
        members = [g.members[m] for m in ex.members]
        assert {g.group_id(m.id) for m in members} == {ex.gid} and len(members) == 5
        longest = max(m.length for m in members)
        assert ex.cost == rate * longest + rate * (longest - 1) + 10 * rate * len(members)
        sched.done(ex)
    assert sched.pick() is None


def test_overload_stretches_periods():
    light = run(SharingMode.CONSERVATIVE, 5, updates=UPDATES, capacity=UNLIMITED)
    heavy = run(SharingMode.CONSERVATIVE, 5, updates=UPDATES, capacity=100.0)
    assert light.latency == 0 < heavy.latency and heavy.throughput < light.throughput


def test_with_early_runs_and_time_to_spare_every_query_is_answered_at_every_update():
    # Algorithm 9 runs the lowest d whenever the queue is not empty: without overload every task
    # runs at every update (once: a second run would repeat its answers), none late
    g = workload(5, seed=2)
    for mode in (SharingMode.NONE, SharingMode.CONSERVATIVE, SharingMode.HYBRID):
        o = run(mode, 5, capacity=UNLIMITED, updates=UPDATES, seed=2, early=True)
        assert o.latency == 0
        assert round(o.throughput * UPDATES) == len(g.members) * UPDATES, mode
