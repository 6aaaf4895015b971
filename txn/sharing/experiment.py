"""The thesis's experiment of 8.5 on the sharing core alone (a simulation of its own; the
transaction simulator txn/simulator.py is another matter): 8 groups of periodic queries sharing a
basic interval synopsis each (CS2), 5/10/20/30 queries per group, WINDOW uniform in 20..100
intervals, SLIDE uniform in 1..WINDOW/2. Time is counted in synopsis updates; the system can spend
`capacity` cost units (CostModel) between two updates; an execution that does not fit waits (its
cost is carried into the next interval), so under overload periods stretch and nothing is dropped.
Measured per scheduler: throughput, queries re-executed (answers) per update, and latency, per
query the average updates beyond SLIDE between its answers (0 when on time or early), averaged
over the queries (8.5.1: "the average latency per query"), as figures 8.7-8.10 plot them. A higher
data rate is modelled as costlier intervals (`rate`: 8.5.1 doubles the distinct values of every
field at 3,000 tuples/s, so every interval's counters and every answer's sort double).

Where it follows the thesis rather than the store (docs/sharing.md says why):
- the queries are top-k lists and quantiles over one group's per-key bandwidth counters (8.5.1),
  which add up interval by interval: a joint execution scans the longest window once, combining
  as it goes, and each query post-processes the counters at its own length (8.4.3: "queries over
  shorter windows are computed first"; 8.4.4: "computed along the way"), so every member
  `combines`;
- the baseline No-S is "Algorithm 9 with tasks corresponding to sub-groups G_ij ... does not
  execute two matching sub-groups together" (8.5.1): the conservative scheduler over groups split
  by SLIDE, not the store's `none` (a task per query);
- the queries are registered before the first update and, new, are due at once
  (LocalScheduler.sync): they are served before that update, so no first answer counts as late;
- `CAPACITY` is calibrated from what 8.5.2 says of the load at 1,500 tuples/s (the thesis gives no
  costs): No-S and CS "cause system overload easily", "even for a small number of queries";
- the budget left in an update when nothing is due runs the tasks with the lowest d early
  (`early`, Algorithm 9: "in underload, some tasks may be executed before their d(T_i)-values
  reach zero"), as the figures' schedulers do (grid);
- the hybrid costs its choices with drifting phases (Phasing.DRIFTING): the runs are in overload
  (8.5.2), where a late task's d is reset to its period when it is done (8.4.2), so separately
  run sub-groups meet only by chance."""
from __future__ import annotations

import random
from dataclasses import dataclass

from .cost import CostModel, Phasing
from .groups import Groups
from .modes import SharingMode
from .rules import Member, Synopsis
from .schedulers import make_scheduler

# The thesis's six techniques (table 8.1); late sharing and late-pending sharing with hybrid.
MODES = [SharingMode.NONE, SharingMode.AGGRESSIVE, SharingMode.CONSERVATIVE, SharingMode.HYBRID,
         SharingMode.HYBRID_LATE, SharingMode.HYBRID_LP]

# Cost units between two synopsis updates at rate 1: with it No-S and CS are overloaded (latency
# above 0) at 40 queries, as 8.5.2 reports at 1,500 tuples/s.
CAPACITY = 600.0


@dataclass
class Outcome:
    mode: str
    queries: int
    rate: float
    throughput: float   # answers per update
    latency: float      # per query, the average updates beyond SLIDE per answer; averaged over queries
    executions: float   # executions per update


def workload(per_group: int, seed: int, groups: int = 8, by_slide: bool = False) -> Groups:
    """The queries of 8.5.1, one stream (basic interval synopsis) per group; `by_slide`: a stream
    per sub-group of equal SLIDE instead, so that no two sub-groups ever run together (No-S)."""
    rng = random.Random(seed)
    g = Groups()
    for i in range(groups):
        for j in range(per_group):
            w = rng.randint(20, 100)
            p = rng.randint(1, w // 2)
            stream = f"s{i}/{p}" if by_slide else f"s{i}"
            g.add(Member(f"g{i}q{j}", stream, (i, j), Synopsis.BASIC, w, p, None, combines=True))
    return g


def cost_model(rate: float, phasing: Phasing = Phasing.DRIFTING) -> CostModel:
    """The counters' execution model (8.4.4: intervals accessed and combined, plus post-processing):
    a group's scan reads each interval once and combines it into the running counters (`finish`
    per interval combined, once per execution: every member combines), and each query
    post-processes the counters at its length (a top-k or quantile: a sort, `post`, 10 combines'
    worth: sorting D counters against adding two intervals' D, log2 D for the ~1,000 keys of 8.5.1).
    The post-processing decides much of the hybrid's gain (docs/sharing.md)."""
    return CostModel(access=rate, combine=0.0, probe=1, post=10.0 * rate, finish=rate, cover=None, phasing=phasing)


def run(mode: SharingMode, per_group: int, rate: float = 1.0, capacity: float = CAPACITY, updates: int = 600,
        seed: int = 1, early: bool = False, phasing: Phasing = Phasing.DRIFTING) -> Outcome:
    """One scheduler over `updates` synopsis updates. `early`: the budget left when nothing is due
    runs the tasks with the lowest d early (Algorithm 9's loop; LocalScheduler.pick_all); without
    it, each update runs only what is due."""
    nos = mode is SharingMode.NONE
    g = workload(per_group, seed, by_slide=nos)
    sched = make_scheduler(SharingMode.CONSERVATIVE if nos else mode, g, cost_model(rate, phasing))
    answers = executions = 0
    late: dict[str, int] = {}
    count: dict[str, int] = {}
    debt = 0.0
    for step in range(updates):
        if step:
            sched.update()
        budget = capacity - debt
        while budget > 0 and (ex := sched.pick(early=early)) is not None:
            budget -= ex.cost
            answers += len(ex.members)
            executions += 1
            for mid, n in ex.late.items():
                late[mid] = late.get(mid, 0) + n
                count[mid] = count.get(mid, 0) + 1
            sched.done(ex)
        debt = max(0.0, -budget)
    latency = sum(late[m] / count[m] for m in count) / max(len(count), 1)
    return Outcome(mode.value, len(g.members), rate, answers / updates, latency, executions / updates)


def grid(per_groups=(5, 10, 20, 30), rates=(1.0, 2.0), early: bool = True, **kw) -> list[Outcome]:
    """Figures 8.7-8.10: every technique at every size and rate; `early` as in the thesis's
    schedulers (Algorithm 9's loop runs the lowest d whenever the queue is not empty)."""
    return [run(m, k, r, early=early, **kw) for r in rates for k in per_groups for m in MODES]
