"""The thesis's experiment of 8.5 on the sharing core alone (a simulation of its own; the
transaction simulator txn/simulator.py is another matter): 8 groups of periodic queries sharing a
basic interval synopsis each (CS2), 5/10/20/30 queries per group, WINDOW uniform in 20..100
intervals, SLIDE uniform in 1..WINDOW/2. Time is counted in synopsis updates; the system can spend
`capacity` cost units (CostModel) between two updates; an execution that does not fit waits (its
cost is carried into the next interval), so under overload periods stretch and nothing is dropped.
Measured per scheduler: throughput, queries re-executed (answers) per update, and latency, the
average updates beyond SLIDE between a query's answers (0 when on time or early), as figures
8.7-8.10 plot them. A higher data rate is modelled as costlier intervals (`rate`)."""
from __future__ import annotations

import random
from dataclasses import dataclass

from .cost import CostModel
from .groups import Groups
from .modes import SharingMode
from .rules import Member, Synopsis
from .schedulers import make_scheduler

# The thesis's six techniques (table 8.1); late sharing and late-pending sharing with hybrid.
MODES = [SharingMode.NONE, SharingMode.AGGRESSIVE, SharingMode.CONSERVATIVE, SharingMode.HYBRID,
         SharingMode.HYBRID_LATE, SharingMode.HYBRID_LP]


@dataclass
class Outcome:
    mode: str
    queries: int
    rate: float
    throughput: float   # answers per update
    latency: float      # average updates beyond SLIDE per answer
    executions: float   # executions per update


def workload(per_group: int, seed: int, groups: int = 8) -> Groups:
    rng = random.Random(seed)
    g = Groups()
    for i in range(groups):
        for j in range(per_group):
            w = rng.randint(20, 100)
            g.add(Member(f"g{i}q{j}", "s", (i, j), Synopsis.BASIC, w, rng.randint(1, w // 2), None))
    # CS2 groups by stream and synopsis: one stream per group of the thesis (its own synopsis)
    out = Groups()
    for m in g.members.values():
        out.add(Member(m.id, f"s{m.key[0]}", m.key, m.synopsis, m.length, m.period))  # type: ignore[index]  # this workload's keys: (group, query)
    return out


def run(mode: SharingMode, per_group: int, rate: float = 1.0, capacity: float = 4000.0, updates: int = 600,
        seed: int = 1) -> Outcome:
    g = workload(per_group, seed)
    # the store's execution model: a group's scan reads each interval once, each query then
    # combines its own intervals and post-processes its answer (a top-k or quantile over counters)
    model = CostModel(access=rate, combine=0.0, probe=1, post=10.0 * rate, finish=rate)
    sched = make_scheduler(mode, g, model)
    answers = executions = 0
    extra = 0
    debt = 0.0
    for _ in range(updates):
        sched.update()
        budget = capacity - debt
        debt = 0.0
        while budget > 0 and (ex := sched.pick()) is not None:
            budget -= ex.cost
            answers += len(ex.members)
            executions += 1
            extra += sum(ex.late.values())
            sched.done(ex)
        debt = max(0.0, -budget)
    return Outcome(mode.value, len(g.members), rate, answers / updates, extra / max(answers, 1), executions / updates)


def grid(per_groups=(5, 10, 20, 30), rates=(1.0, 2.0), **kw) -> list[Outcome]:
    return [run(m, k, r, **kw) for r in rates for k in per_groups for m in MODES]
