"""The relative cost model of hybrid scheduling (thesis 8.4.4): a schedule's cost is the synopsis
work of its executions (intervals accessed, and combining their values) plus post-processing per
query answered; synopsis maintenance is the same under every schedule and is left out. From it,
choose_periods decides which sub-groups of a group shorten their period to run with another.

Predicate covers (8.3.3, SS4/CS6/CS7; covers.py) are counted: in a joint execution, a reader whose
rows are a cover of other readers' of the same execution reads nothing (its contribution per
sub-window is combined from theirs), so running a covered query together with its pieces is
cheaper than running it alone, and the hybrid scheduler sees it. Joins (CS5) keep one synopsis
whose maintenance (joining new sub-windows) is the same under every schedule: their executions
cost what each member finishes, so no period is shortened for them."""
from __future__ import annotations

import collections
import enum
import math
from dataclasses import dataclass
from typing import Iterable, Sequence

from .covers import Derivation, derive_cached
from .rules import Synopsis

HORIZON_CAP = 720     # slides simulated at most; beyond it a schedule's cost is estimated over a prefix
CHOICE_SLIDES = 5_000   # slides simulated at most by one choice of periods (in steps of STEP_SLIDES in
                        # the server: PeriodChoice): a choice with many sub-groups costs its schedules over shorter prefixes
MIN_HORIZON = 24      # ... but never over fewer slides than this
EXHAUSTIVE = 5        # sub-groups up to which every choice of periods is costed; greedy beyond
NEAREST = 3           # greedy: a sub-group may join one of the nearest shorter anchors
GREEDY_STEPS = 4      # greedy: moves the budget is planned for
STEP_SLIDES = 500     # slides one step of an incremental choice (PeriodChoice.step) simulates at most
                      # (one schedule longer than that, up to 2 * HORIZON_CAP, is a step of its own)


class Phasing(enum.Enum):
    """Which schedule of separately run tasks a choice of periods is costed over (8.4.4: the cost
    per unit time over the LCM of the periods). HELD: each task keeps its phase (its next due,
    0: all due now), exact over the LCM: 8.4.3's worked example, and what Algorithm 10 runs while
    every task is on time. DRIFTING: the tasks' phases are independent and uniform, the expected
    cost per slide: what Algorithm 10 runs under overload, where a late task's d is reset to its
    period when it is done (8.4.2: "Even if T_i is re-executed late, d(T_i) is set to n_i"), so
    separately run tasks meet only by chance, and only a shortened (merged) period stays in step.
    For pairwise coprime periods (the worked example's 2, 3, 5) both are the same."""

    HELD = "held"
    DRIFTING = "drifting"


@dataclass(frozen=True)
class CostModel:
    """Costs of one execution: `access` per interval read, `combine` per two intervals' values
    combined (n - 1 for n intervals), `probe` intervals read by a probe of the window-level
    synopses, `post` per query answered, `finish` per interval whose value is merged outside the
    scan: a query whose contributions do not combine (quantiles, COUNT DISTINCT, float sums)
    merges its own intervals' values; those that combine (Member.combines) are answered along the
    shared scan, by one running combine to the longest of them; `cover` per piece per interval
    whose value a predicate cover derives instead of reading it (None: covers not counted).
    `memo`: a reader's intervals read by an earlier execution are not read again (the store keeps
    sealed sub-windows' contributions in their memos, store/memo.py): an execution reads only those sealed
    since the reader last ran (schedule_cost tracks it). The thesis's worked example counts
    comparisons only: CostModel(access=0, combine=1, post=0). `phasing`: see Phasing (DRIFTING
    is costed for models without `memo` and `cover`, whose cost depends on more than the tasks due).
    `slide` (with `memo`): a reader whose contributions are invertible (Member.inverts) moves its
    combined window by the intervals that entered and left since it last ran (txn/sharing/
    combined.py): its combining is counted over those (two per fresh interval, at most its window)
    rather than over its window."""

    access: float = 1.0
    combine: float = 1.0
    probe: int = 1
    post: float = 0.0
    finish: float = 0.0
    cover: float | None = 0.0
    memo: bool = False
    phasing: Phasing = Phasing.HELD
    slide: bool = False

    def __post_init__(self):
        if self.phasing is Phasing.DRIFTING and (self.memo or self.cover is not None):
            raise ValueError("Phasing.DRIFTING costs models without memo and cover (cover=None)")

    def scan(self, n: int) -> float:
        """Scanning n intervals youngest to oldest and combining them."""
        return self.access * n + self.combine * max(n - 1, 0)

    def joint(self, outputs: Iterable, fresh: dict | None = None) -> float:
        """One joint execution of outputs of one group: a CS2 group scans once, to its longest
        window; a CS1 group probes once; a lone output pays its own scan."""
        outputs = list(outputs)
        if not outputs:
            return 0.0
        return self.joint_of(outputs[0].leader.synopsis, self.parts(outputs), self.leads(outputs), fresh)

    def joint_of(self, synopsis: Synopsis, parts: tuple[float, dict, int], lead: dict,
                 fresh: dict | None = None) -> float:
        """joint() from the execution's parts and readers' leaders (merge_parts of its tasks')."""
        each, reaches, along = parts
        if synopsis == Synopsis.JOIN:
            return each
        if synopsis == Synopsis.PROBE:
            return each + self.access * self.probe
        return each + self._scans(reaches, lead, fresh) + self.finish * max(along - 1, 0)

    def parts(self, outputs: list) -> tuple[float, dict, int]:
        """A joint execution's cost in the parts that add up over its outputs (post-processing,
        each non-combining query's own merge, a join member's finish), and those that are a
        maximum over them: per reader the window it scans to (Member.reads), and the longest
        window of the queries answered along the scan (Member.combines)."""
        syn = outputs[0].leader.synopsis
        if syn == Synopsis.JOIN:  # one kept join result; each member finishes the rows of its RANGEs
            return self.post * len(outputs) + self.finish * sum(o.length for o in outputs), {}, 0
        if syn == Synopsis.PROBE:
            return self.post * len(outputs), {}, 0
        reaches: dict = {}
        for o in outputs:
            k = o.leader.reads
            reaches[k] = max(reaches.get(k, 0), o.length)
        along = max((o.length for o in outputs if o.leader.combines), default=0)
        own = sum(o.length - 1 for o in outputs if not o.leader.combines)
        return self.post * len(outputs) + self.finish * own, reaches, along

    def reads(self, outputs: list, fresh: dict | None = None) -> float:
        """The scans of a CS2 joint execution: each reader (the outputs with equal Member.reads;
        None: the group's one synopsis) scans its longest window once, youngest to oldest; a reader
        a predicate cover derives from other readers of the same execution (SS4/CS6/CS7) reads
        nothing and costs `cover` per piece per interval, its pieces reading as far as it needs
        (as runtime.SharedPlan does). `fresh`: per reader key, the intervals sealed since it last
        ran, all it reads (memo; a key not in it: never ran, it reads its whole window)."""
        return self._scans(self.parts(outputs)[1], self.leads(outputs), fresh)

    @staticmethod
    def leads(outputs: Iterable) -> dict:
        """Per reader key, its first output's leader, in the order the readers first appear."""
        lead: dict = {}
        for o in outputs:
            lead.setdefault(o.leader.reads, o.leader)
        return lead

    def _scans(self, reach: dict, lead: dict, fresh: dict | None) -> float:
        """With `fresh` (memo), a reader reads the intervals sealed since it last ran (`access`
        each) but combines every interval of its window (`combine`): the store keeps each sealed
        sub-window's contribution, not their combination (runtime.SharedPlan.finish)."""
        full = list(reach.values())
        n = [min(r, fresh[k]) if fresh is not None and k in fresh else r for k, r in reach.items()]
        # intervals combined per reader: its window, or what entered and left it (`slide`)
        moved = [getattr(lead.get(k), "inverts", False) and self.slide and fresh is not None for k in reach]
        derived = covers_among(list(lead.values())) if self.cover is not None else []
        for d in derived:
            for i in d.plus + d.minus:
                n[i] = max(n[i], n[d.target])
                full[i] = max(full[i], full[d.target])
        targets = {d.target for d in derived}
        work = sum(self.access * k + self.combine * (min(2 * k, full[i] - 1) if moved[i] else max(full[i] - 1, 0))
                   for i, k in enumerate(n) if i not in targets)
        return work + sum((self.cover or 0.0) * n[d.target] * len(d.plus + d.minus) for d in derived)

    def alone(self, output) -> float:
        return self.joint([output])


def covers_among(leaders: list) -> list[Derivation]:
    """The predicate covers among the readers (their leading members, one per read key) of a
    joint execution: covers.derive on their bound queries (none when one has no bound query)."""
    if len(leaders) < 2 or any(m.bound is None for m in leaders):
        return []
    return derive_cached(("cost", *(m.reads for m in leaders)), [m.bound for m in leaders],
                         [m.combines for m in leaders])


# The store's executions: a reader reads each sub-window once (its contribution kept in the
# sub-window's memo), and at each execution combines every sub-window of its window youngest to
# oldest; queries that combine are answered along the scan, the others merge their own; a
# contribution a cover derives combines its pieces' (a few partials) instead of reading the
# sub-window's rows. The ratios are measured (bench/sharing_cost.py, docs/sharing.md "Round 21"):
# joint executions of the 8.5 workload's groups (top-10 lists and quantiles over per-key byte sums,
# 30 queries a group, 100 to 29,000 keys), medians over its 8 groups at both of 8.5's rates:
# - access 1: a reader's read of a fresh sub-window (its per-key counters), about 190-330 us;
# - combine 0.7: per sub-window of the window, the scan's step over it and combining its
#   counters into the running ones, about 170-200 us;
# - post 1: per answer, its post-processing (the top-10 or the quantile) and its delivery (the
#   Result, the answer log, the AnsweredMany record, publishing), about 230-280 us;
# - finish 0.7: as combine (no 8.5 query merges outside the scan, so it is not measured apart);
# - cover 0.1: a derived contribution combines a few partials, not a sub-window's rows (not measured).
# Not `slide`: an invertible reader's windows move only where that costs less than combining them
# anew (combined.MOVE_COST), and for the 8.5 groups it does not (each execution makes one combined
# window per member length, about 25 of them, each as large as the keys: docs/sharing.md "Round 22").
STORE = CostModel(access=1.0, combine=0.7, probe=1, post=1.0, finish=0.7, cover=0.1, memo=True)


def lcm(values: Iterable[int]) -> int:
    return math.lcm(*values) if values else 1


def merge_parts(parts: Iterable[tuple[float, dict, int]]) -> tuple[float, dict, int]:
    """CostModel.parts of outputs put together from the parts of their pieces (in order): sums
    add, per-reader reaches and the longest window along the scan are maxima."""
    each, along = 0.0, 0
    reaches: dict = {}
    for e, r, a in parts:
        each += e
        for k, n in r.items():
            reaches[k] = max(reaches.get(k, 0), n)
        along = max(along, a)
    return each, reaches, along


def schedule_cost(tasks: Sequence[tuple[int, Sequence]], model: CostModel,
                  phases: Sequence[int] | None = None, cap: int = HORIZON_CAP) -> float:
    """Cost per slide of running tasks (period, outputs) of one group, each at its period, the
    tasks due at the same slide jointly (Algorithm 10). Phasing.HELD: task i is due at the slides
    t with t = phases[i] (mod its period) (its next due; none: all due now), exact over the LCM of
    the periods (up to `cap` slides, a prefix beyond). Phasing.DRIFTING: expected over
    independent uniform phases (drifting_cost)."""
    if not tasks:
        return 0.0
    if model.phasing is Phasing.DRIFTING:
        return drifting_cost(tasks, model)
    phase = [f % p for (p, _), f in zip(tasks, phases or [0] * len(tasks))]
    horizon = min(lcm([p for p, _ in tasks]), cap)
    # A periodic schedule repeats its joint executions: each distinct one is costed once (a
    # hybrid choice costs many schedules of a group at each registration, all on the event loop).
    # With memo, an execution's cost depends on its tasks and, per reader, on the intervals sealed
    # since it last ran, up to the longest window any task reads with it (CostModel.reads takes
    # the smaller of the two).
    # A periodic schedule repeats its joint executions: each distinct one is costed once, from
    # its tasks' parts (a hybrid choice costs many schedules of a group at each registration, on
    # the event loop). With memo, an execution's cost depends on its tasks and, per reader, on the
    # intervals sealed since it last ran, up to the longest window any task reads with it
    # (CostModel.reads takes the smaller of the two). Readers (Member.reads, costly to hash) are
    # numbered once.
    synopsis = tasks[0][1][0].leader.synopsis
    keys: list = []
    number: dict = {}
    parts: list[tuple[float, dict, int]] = []  # per task, its reaches by reader number
    leads: list[dict] = []
    for _, outs in tasks:
        each, reaches, along = model.parts(list(outs))
        lead = model.leads(outs)
        for k in lead:
            if k not in number:
                number[k] = len(keys)
                keys.append(k)
        parts.append((each, {number[k]: n for k, n in reaches.items()}, along))
        leads.append({number[k]: m for k, m in lead.items()})
    readers = [tuple(lead) for lead in leads]
    longest = [0] * len(keys)
    for _, reaches, _ in parts:
        for j, n in reaches.items():
            longest[j] = max(longest[j], n)
    costed: dict = {}
    span = 2 * horizon if model.memo else horizon
    slots: list[list[int]] = [[] for _ in range(span)]
    for i, ((p, _), f) in enumerate(zip(tasks, phase)):
        for t in range(f, span, p):
            slots[t].append(i)

    def due(t: int) -> tuple[int, ...]:
        return tuple(slots[t])

    def joint(now: tuple[int, ...], t: int = 0, ran: list | None = None) -> float:
        if ran is None:
            key: tuple = now
        else:
            key = (now, tuple(None if ran[j] is None else min(t - ran[j], longest[j]) for i in now for j in readers[i]))
        cost = costed.get(key)
        if cost is None:
            fresh = None if ran is None else {keys[j]: t - at for j, at in enumerate(ran) if at is not None}
            lead: dict = {}
            for i in now:
                for j, m in leads[i].items():
                    lead.setdefault(j, m)
            each, reaches, along = merge_parts(parts[i] for i in now)
            cost = costed[key] = model.joint_of(synopsis, (each, {keys[j]: n for j, n in reaches.items()}, along),
                                                {keys[j]: m for j, m in lead.items()}, fresh)
        return cost

    if model.memo:  # what each reader reads depends on when it last ran: the second period, in steady state
        ran: list = [None] * len(keys)
        total = 0.0
        for t in range(2 * horizon):
            now = due(t)
            if not now:
                continue
            cost = joint(now, t, ran)
            if t >= horizon:
                total += cost
            for i in now:
                for j in readers[i]:
                    ran[j] = t
        return total / horizon
    return sum(joint(now) for t in range(horizon) if (now := due(t))) / horizon


def drifting_cost(tasks: Sequence[tuple[int, Sequence]], model: CostModel) -> float:
    """The expected cost per slide of tasks (period, outputs) whose phases are independent and
    uniform (Phasing.DRIFTING): at a slide, task i is due with probability 1/p_i, independently of
    the others, and those due run jointly. A joint execution's cost is a sum over its outputs
    plus maxima over them (CostModel.parts): the sum's expectation adds up, and a maximum's is
    each task's value times the chance that it is due and no task with a larger value is."""
    chance = [1 / p for p, _ in tasks]
    parts = [model.parts(list(outs)) for _, outs in tasks]
    total = sum(q * each for q, (each, _, _) in zip(chance, parts))
    syn = tasks[0][1][0].leader.synopsis
    if syn == Synopsis.JOIN:
        return total
    if syn == Synopsis.PROBE:
        return total + (1 - math.prod(1 - q for q in chance)) * model.access * model.probe

    def largest(values: list[int], cost) -> float:
        expect, none_larger = 0.0, 1.0
        for v, q in sorted(zip(values, chance), key=lambda vq: -vq[0]):
            expect += none_larger * q * cost(v)
            none_larger *= 1 - q
        return expect

    readers = {k for _, reaches, _ in parts for k in reaches}
    for k in readers:
        total += largest([reaches.get(k, 0) for _, reaches, _ in parts], model.scan)
    return total + largest([along for _, _, along in parts], lambda n: model.finish * max(n - 1, 0))


def _tasks(subgroups: dict[int, list], target: dict[int, int]) -> list[tuple[int, list]]:
    by: dict[int, list] = {}
    for p, outs in subgroups.items():
        by.setdefault(target[p], []).extend(outs)
    return sorted(by.items())


def _cap(model: CostModel, evaluations: int) -> int:
    """The horizon each of `evaluations` schedule costs may simulate within CHOICE_SLIDES (a
    model with memo simulates two horizons)."""
    per = 2 if model.memo else 1
    return max(MIN_HORIZON, min(HORIZON_CAP, CHOICE_SLIDES // (per * max(evaluations, 1))))


def _choices(periods: list[int]):
    """Every assignment of each period to itself (an anchor) or to a shorter anchor: the
    shortest is always an anchor. The assignment with no change comes first."""
    def go(i: int, target: dict[int, int]):
        if i == len(periods):
            yield dict(target)
            return
        p = periods[i]
        anchors = [q for q in periods[:i] if target[q] == q]
        for t in [p] + (anchors if i else []):
            target[p] = t
            yield from go(i + 1, target)
        del target[p]
    yield from go(0, {})


def choose_periods(subgroups: dict[int, list], model: CostModel, phases: dict[int, int] | None = None,
                   memo: dict | None = None) -> dict[int, int]:
    """Hybrid scheduling: for a group's sub-groups (period -> outputs), the period each runs at,
    either its own or a shorter sub-group's (then they always run together), the cheapest per
    slide by schedule_cost; `phases`: per sub-group, the slides until it is next due (none: all
    due now; Phasing.HELD only). Every choice is costed up to EXHAUSTIVE sub-groups; beyond, one
    sub-group moves at a time while that lowers the cost, up to a budget. Ties keep the longer
    periods. Under Phasing.HELD the work is bounded (about CHOICE_SLIDES slides simulated, whatever
    the number of sub-groups): with many of them each schedule is costed over a shorter prefix of
    its LCM, and the greedy stops when the budget is spent. All at once: PeriodChoice makes the
    same choice a bounded number of simulated slides at a time; `memo` as there."""
    choice = PeriodChoice(subgroups, model, phases, memo)
    choice.step(None)
    return choice.result  # type: ignore[return-value]  # made: no bound


def _search(subgroups: dict[int, list], model: CostModel, phases: dict[int, int] | None):
    """choose_periods' search as a generator: it yields each choice it needs costed, (target,
    cap), is sent that choice's schedule_cost, and returns the choice it made."""
    periods = sorted(subgroups)
    if len(periods) <= 1:
        return {p: p for p in periods}
    if len(periods) <= EXHAUSTIVE:
        choices = list(_choices(periods))
        cap = _cap(model, len(choices))
        best, best_cost = None, math.inf
        for target in choices:
            c = yield target, cap
            if c < best_cost - 1e-9:
                best, best_cost = target, c
        return best  # some choice has a finite cost
    trials = (len(periods) - 1) * NEAREST  # at most, per step
    cap = _cap(model, trials * GREEDY_STEPS)
    target = {p: p for p in periods}
    cost = yield target, cap
    # a drifting cost is closed-form (no slides simulated): its greedy runs to the end; a held
    # one stops once about CHOICE_SLIDES slides were simulated (its best choice so far)
    held = model.phasing is Phasing.HELD
    spent = 0
    while not held or spent < CHOICE_SLIDES:
        spent += trials * cap * (2 if model.memo else 1)
        move = None
        followed = {target[r] for r in periods if target[r] != r}
        for p in periods[1:]:
            if p in followed or target[p] != p:
                continue  # only an anchor nobody follows joins a shorter anchor
            for q in [a for a in periods if a < p and target[a] == a][-NEAREST:]:
                trial = target | {p: q}
                c = yield trial, cap
                if c < cost - 1e-9 and (move is None or c < move[0]):
                    move = (c, trial)
        if move is None:
            return target
        cost, target = move
    return target


def simulated(tasks: Sequence[tuple[int, Sequence]], model: CostModel, cap: int) -> int:
    """The slides schedule_cost simulates to cost `tasks` (Phasing.HELD: the LCM of the periods
    up to `cap`, twice with memo; DRIFTING: none, the cost is closed-form)."""
    if model.phasing is Phasing.DRIFTING:
        return 0
    return (2 if model.memo else 1) * min(lcm([p for p, _ in tasks]), cap)


MEMO_COSTS = 20_000  # schedule costs a PeriodChoice memo keeps (all dropped when more are made)


def signature(outputs: Iterable) -> frozenset:
    """What a sub-group's outputs contribute to a schedule's cost (CostModel.parts, covers_among):
    their lengths, paths, readers and whether they combine, with multiplicity."""
    return frozenset(collections.Counter((o.length, o.leader.synopsis, o.leader.reads, o.leader.combines)
                                         for o in outputs).items())


class PeriodChoice:
    """choose_periods made a bounded number of simulated slides at a time (step), off the
    registration path: 8.4.4 says hybrid scheduling "is more expensive to maintain. As the query
    workload changes, the cost of separate and merged execution of various sub-groups must be
    recomputed", and that an efficient schedule "may be computed using dynamic programming and
    memorizing". The search (the same as choose_periods', _search) is resumed where a step
    stopped; each schedule's cost is kept in `memo` (shared by the choices of one scheduler,
    keyed by the choice's sub-groups, their periods, phases and signature, and the horizon), so a
    sub-group set costed before (a group that changed back, a choice restarted) is not simulated
    again. `phases` are taken when the choice starts."""

    def __init__(self, subgroups: dict[int, list], model: CostModel, phases: dict[int, int] | None = None,
                 memo: dict | None = None):
        self.subgroups = subgroups
        self.model = model
        self.phases = phases
        self.memo = {} if memo is None else memo
        self.sig = {p: signature(outs) for p, outs in subgroups.items()}
        self.simulated = 0     # slides simulated in all
        self.steps = 0         # steps taken
        self.costed = 0        # schedules costed (simulated or from the memo)
        self.result: dict[int, int] | None = None
        self._search = _search(subgroups, model, phases)
        self._asked: tuple[dict[int, int], int] | None = None
        self._ask(None)

    def _ask(self, cost: float | None) -> None:
        try:
            self._asked = next(self._search) if cost is None else self._search.send(cost)
        except StopIteration as made:
            self._asked, self.result = None, made.value

    def step(self, budget: int | None, alone: bool = True) -> int:
        """Cost the schedules the search asks for until the choice is made or the next one would
        take the slides simulated in this step beyond `budget` (None: no bound); with `alone`, a
        schedule that simulates more than `budget` by itself is costed as a step of its own (else
        the step stops before it). Returns the slides simulated."""
        spent = 0
        while self.result is None:
            target, cap = self._asked  # type: ignore[misc]  # asked while not made
            key = (self.model, cap, tuple((p, target[p], None if self.phases is None else self.phases[p], self.sig[p])
                                          for p in sorted(target)))
            cost = self.memo.get(key)
            if cost is None:
                tasks = _tasks(self.subgroups, target)
                slides = simulated(tasks, self.model, cap)
                if budget is not None and (spent or not alone) and spent + slides > budget:
                    break
                cost = schedule_cost(tasks, self.model,
                                     None if self.phases is None else [self.phases[p] for p, _ in tasks], cap)
                spent += slides
                if len(self.memo) >= MEMO_COSTS:
                    self.memo.clear()
                self.memo[key] = cost
            self.costed += 1
            self._ask(cost)
            if budget is not None and spent >= budget:
                break
        self.steps += 1
        self.simulated += spent
        self._check()
        return spent

    def _check(self) -> None:
        assert (self.result is None) == (self._asked is not None), "a choice is made or a schedule is asked for"
        assert self.simulated >= 0 and self.costed >= 0 and len(self.memo) <= MEMO_COSTS
        if self.result is not None:
            assert set(self.result) == set(self.subgroups)
            assert all(q <= p and self.result[q] == q for p, q in self.result.items()), \
                "each period its own or a shorter anchor's"
