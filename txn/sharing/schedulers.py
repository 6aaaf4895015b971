"""The local schedulers of thesis 8.4, one class each behind one interface (LocalScheduler):
update() is an update notification (every synopsis of the stream updated once: a slide), pick()
says which tasks to execute now, jointly, and done() records that they ran. A task is what is
scheduled as one: a query (NONE), a group G_i (AGGRESSIVE), a sub-group G_ij (CONSERVATIVE) or
sub-groups merged by the cost model (HYBRID*). d(T) is the thesis's time-until-deadline: the
task's period minus the updates since its members last answered (a CS8 repeat: its own SLIDE
minus the updates since it last answered; it is answered when due, not at every execution of its
output); a task is due at d <= 0, and late at d < 0. Nothing is dropped: a late task stays in the
queue, the most overdue first."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable, Hashable

from .cost import CostModel, PeriodChoice, Phasing, choose_periods, signature
from .groups import Groups, Output
from .modes import SharingMode


@dataclass(eq=False)
class Task:
    gid: Hashable
    period: int
    outputs: list[Output]
    member_ids: list[str] = field(default_factory=list)  # (tasks are formed again when members change)
    # per member, the updates it may go without an answer: the task's period, or a CS8 repeat's
    # own (a longer SLIDE than its output's: it reuses the output's executions when it is due)
    owed: list[tuple[str, int]] = field(default_factory=list)
    repeats: dict[str, int] = field(default_factory=dict)  # the CS8 repeats' periods

    def __post_init__(self):
        self.member_ids = [m for o in self.outputs for m in o.members]
        for o in self.outputs:
            shortest = o.period
            for mid, m in o.members.items():
                if m.period > shortest:
                    self.repeats[mid] = m.period
        self.owed = [(mid, self.repeats.get(mid, self.period)) for mid in self.member_ids]


@dataclass
class Execution:
    """Tasks of one group executed jointly now: the outputs computed (each by one execution of
    the group's shared scan or probe), per member how many updates early or late it is answered,
    and the cost of the joint execution in the cost model."""

    gid: Hashable
    tasks: list[Task]
    outputs: list[Output]
    early: dict[str, int] = field(default_factory=dict)
    late: dict[str, int] = field(default_factory=dict)
    model: CostModel | None = None  # what `cost` is costed by (none: costs nothing)

    @property
    def cost(self) -> float:
        """The cost model's cost of this joint execution: costed when asked (the experiment's
        budget, the tests), not for every execution the server starts."""
        return 0.0 if self.model is None else self.model.joint(self.outputs)

    @property
    def members(self) -> list[str]:
        return list(self.early)

    @property
    def saved(self) -> int:
        """Executions saved: queries answered beyond the one execution."""
        return len(self.early) - 1


class LocalScheduler:
    """Algorithm 9 over the tasks `_tasks()` forms; subclasses say what a task is and which
    due tasks of a group run together (`_joinable`)."""

    mode: SharingMode = SharingMode.NONE

    def __init__(self, groups: Groups, model: CostModel | None = None):
        self.groups = groups
        self.model = model or CostModel()
        self.since: dict[str, int] = {}  # per member: updates since it last answered
        self.tasks: list[Task] = []
        self.sync()

    # -- the interface -------------------------------------------------------------------------
    def sync(self) -> None:
        """The groups changed (queries registered or gone): form the tasks again. A new query is
        due at once, not late: as if it last answered one period of its task ago."""
        self.tasks = self._tasks()
        since = {}
        for t in self.tasks:
            for mid, owed in t.owed:  # (a CS8 repeat: its own period ago, so it is due at once too)
                since[mid] = self.since.get(mid, owed)
        self.since = since

    def update(self) -> None:
        for mid in self.since:
            self.since[mid] += 1

    def d(self, task: Task) -> int:
        """The updates until the first of its members' deadlines: the task's period after the
        member that answered longest ago, or a CS8 repeat's own SLIDE after its last answer (it
        is answered when due, not at every execution of its output: see pick_all)."""
        since = self.since
        return min(owed - since[m] for m, owed in task.owed)

    def pick(self, exclude=frozenset(), early: bool = False) -> Execution | None:
        """The tasks to execute now, jointly, or None when none is due (with `early`, none can
        run early: see pick_all); a task with a member in `exclude` (being answered already) waits."""
        got = self.pick_all(exclude, 1, early)
        return got[0] if got else None

    def pick_all(self, exclude=frozenset(), most: int | None = None, early: bool = False) -> list[Execution]:
        """pick() again and again (at most `most` times), each time excluding the members of the
        executions picked before, until none is due: what the scheduler starts at once. Each
        task's d is computed once (picking changes no other task's: tasks share no member), not
        once per execution picked: a scan of every member per slide, not per execution.

        `early`: when no task is due, the tasks with the lowest d run now, before it reaches zero
        (Algorithm 9 executes the task with the lowest d whenever the queue is not empty: "in
        underload, some tasks may be executed before their d(T_i)-values reach zero", 8.4.2), for
        a caller with time to spare; only a task with an update since each of its members last
        answered (another run would repeat an answer). Their answers say how early (Execution.early)."""
        ds = sorted((self.d(t), i, t) for i, t in enumerate(self.tasks)
                    if not exclude or not any(m in exclude for m in t.member_ids))
        floor = 0
        if early and ds and ds[0][0] > 0:
            ds = [x for x in ds if self._updated(x[2])]
            floor = ds[0][0] if ds else 0
        taken: set = set()
        out: list[Execution] = []
        for v, i, first in ds:
            if v > floor or (most is not None and len(out) >= most):
                break
            if i in taken:
                continue
            chosen = [(j, t) for dt, j, t in ds
                      if j not in taken and (t is first or (t.gid == first.gid and self._joinable(dt, v)))]
            taken.update(j for j, _ in chosen)
            outputs = [o for _, t in chosen for o in t.outputs]
            ex = Execution(first.gid, [t for _, t in chosen], outputs, model=self.model)
            ahead, late, since = ex.early, ex.late, self.since
            for _, t in chosen:
                # a CS8 repeat (a longer SLIDE than its output's) is answered by this execution
                # only when it would be due before its task runs again: not early at every one
                repeats, period = t.repeats, t.period
                for o in t.outputs:
                    for mid, m in o.members.items():
                        s = since[mid]
                        if s == 0:  # answered since the last update (an early run, before a new member
                            continue  # made its task due): not again from the same state
                        gap = m.period - s
                        if gap >= period and mid in repeats:
                            continue
                        ahead[mid] = gap if gap > 0 else 0
                        late[mid] = -gap if gap < 0 else 0
            out.append(ex)
        return out

    def _updated(self, task: Task) -> bool:
        """A synopsis update since each member of the task last answered (an early run answers
        none of them twice from the same state)."""
        return all(self.since[m] > 0 for m in task.member_ids)

    def done(self, ex: Execution) -> None:
        for mid in ex.early:
            if mid in self.since:
                self.since[mid] = 0

    def refine(self, slides: Callable[[str], int] | None = None) -> bool:
        """A bounded step of work left over from a change of the groups (Hybrid: its choices of
        periods); True when the tasks were formed again. Nothing here."""
        return False

    def watch_overload(self, slides: Callable[[str], int] | None = None, answering=frozenset()) -> bool:
        """Look at which groups have a member past its own SLIDE (Hybrid: such a group runs at the
        periods chosen for drifting phases until it keeps up again); True when the tasks were
        formed again. Nothing here."""
        return False

    def choosing(self, gid=None) -> bool:
        """Whether a group's choice of periods is still being made (Hybrid). None here."""
        return False

    def pending_choices(self) -> int:
        """How many groups' choices of periods are still being made (Hybrid). None here."""
        return 0

    # -- what subclasses decide ----------------------------------------------------------------
    def _tasks(self) -> list[Task]:
        return [Task(("query", mid), m.period, [Output(("query", mid), {mid: m})])
                for mid, m in self.groups.members.items()]

    def _joinable(self, d: int, v: int) -> bool:
        return False

    def _check(self) -> None:
        assert set(self.since) == set(self.groups.members), "a deadline per member"
        assert all(s >= 0 for s in self.since.values())
        ids = [m for t in self.tasks for m in t.member_ids]
        assert sorted(ids) == sorted(self.groups.members), "every member in exactly one task"
        for t in self.tasks:
            assert t.outputs and all(t.period <= o.period for o in t.outputs), "a task never runs less often than asked"
            assert [m for m, _ in t.owed] == t.member_ids and all(owed >= t.period for _, owed in t.owed), \
                "each member owes an answer no sooner than its task runs"
            assert all(t.repeats[m] == owed for m, owed in t.owed if m in t.repeats)


class NoSharing(LocalScheduler):
    """Every query its own task (no rule applied): what the store did before sharing."""


class Aggressive(LocalScheduler):
    """A group is one task, at the shortest period of its queries (8.4.3)."""

    mode = SharingMode.AGGRESSIVE

    def _tasks(self) -> list[Task]:
        return [Task(gid, min(o.period for o in outs), list(outs)) for gid, outs in self.groups.groups.items()]


class Conservative(LocalScheduler):
    """Algorithm 10: a task per sub-group G_ij; the due tasks of the group with the lowest d run
    together with the chosen one."""

    mode = SharingMode.CONSERVATIVE

    def _periods(self, gid, subgroups: dict[int, list[Output]]) -> dict[int, int]:
        return {p: p for p in subgroups}

    def _tasks(self) -> list[Task]:
        tasks = []
        for gid in self.groups.groups:
            subgroups = self.groups.subgroups(gid)
            target = self._periods(gid, subgroups)
            by: dict[int, list[Output]] = {}
            for p, outs in subgroups.items():
                by.setdefault(target[p], []).extend(outs)
            tasks += [Task(gid, p, outs) for p, outs in sorted(by.items())]
        return tasks

    def _joinable(self, d: int, v: int) -> bool:
        return d == v


class Hybrid(Conservative):
    """8.4.4: the cost model shortens some sub-groups' periods to a shorter sub-group's, and
    those always run together; then Algorithm 10.

    `budget` None: a group's choice of periods is made when its sub-groups change (at once,
    choose_periods). A budget (slides simulated, cost.STEP_SLIDES in the server): the choice is
    made off the registration path, in bounded steps (refine, one per call): a group whose
    choice is being computed runs as Conservative does (each sub-group at its own SLIDE, its
    answers right from the first slide: 8.4.1's SLIDE semantics hold under any choice of
    periods), its choice applied when made, and started again if the group changes meanwhile.
    The choices share one memo of schedule costs (8.4.4: "memorizing"). Given the streams' slides
    (refine), a choice takes its first step only once its group's stream has slid after the change
    that started it: a burst of registrations (each starts the group's choice again) then costs no
    steps thrown away.

    Overload (watch_overload): the choice is costed with each sub-group held at its phase
    (Phasing.HELD), the schedule Algorithm 10 runs while every task is on time. While a member of
    a group is late (more updates since its last answer than its own SLIDE) that schedule is not
    what runs: a late task's d is reset to its period when it is done (8.4.2), so sub-groups run
    apart drift and meet only by chance (Phasing.DRIFTING), and only a shortened period, always
    run with its anchor, stays in step. So a late group runs at the periods chosen for drifting
    phases (the store's model without its memo and covers, which DRIFTING does not cost; chosen
    at once, memoised per sub-groups). The group returns to its held choice once none of its
    members has been late for its longest SLIDE (hysteresis: a group at the edge of its capacity
    does not switch at every slide) and, within another longest SLIDE, once no task is overdue by
    the return alone. Nothing is dropped by switching: the members' updates since their last
    answers are kept, and a task is formed for each of them."""

    mode = SharingMode.HYBRID

    def __init__(self, groups: Groups, model: CostModel | None = None, budget: int | None = None):
        self.budget = budget
        self.chosen: dict = {}    # per group: (its sub-groups' signature, the choice made for them)
        self.choosing_now: dict = {}  # per group: (signature, PeriodChoice) being made (with a budget)
        self.seen_at: dict = {}   # per group being chosen for: its stream's slide when refine first saw the choice
        self.costs: dict = {}     # the choices' memo of schedule costs (PeriodChoice)
        self.late_at: dict = {}   # per group running at its drifting choice (overload): the slide it was last seen late
        self.chosen_late: dict = {}  # per group: (its sub-groups' signature, the choice for drifting phases)
        self.late_costs: dict = {}   # those choices' memo of schedule costs
        self.late_model = dataclasses.replace(model or CostModel(), memo=False, cover=None, slide=False,
                                              phasing=Phasing.DRIFTING)
        self.own: dict = {}       # per group: [(member, its SLIDE, its output's SLIDE)], and the longest SLIDE
        self.clock = 0            # updates seen (update()): the slides when watch_overload is given none
        self.overloads = 0        # times a late group switched to its drifting choice (the tests)
        super().__init__(groups, model)

    @staticmethod
    def _signature(subgroups: dict[int, list[Output]]) -> tuple:
        # the choice depends only on the periods and the outputs' lengths, paths and readers (their
        # predicate covers): kept per group while those stay (registrations elsewhere re-form the
        # tasks without re-costing)
        return tuple((p, signature(outs)) for p, outs in sorted(subgroups.items()))

    def _periods(self, gid, subgroups):
        chosen = self._chosen(gid, subgroups)  # (a late group's held choice goes on being made)
        return self._chosen_late(gid, subgroups) if gid in self.late_at else chosen

    def _chosen_late(self, gid, subgroups) -> dict[int, int]:
        """The group's periods chosen for drifting phases (overload), made at once: closed-form
        costs, no slides simulated."""
        sig = self._signature(subgroups)
        made = self.chosen_late.get(gid)
        if made is None or made[0] != sig:
            made = self.chosen_late[gid] = (sig, choose_periods(subgroups, self.late_model, None, self.late_costs))
        return made[1]

    def _held(self, gid) -> dict[int, int]:
        """The periods the group runs at while it keeps up: its choice, or its own while being made."""
        made = self.chosen.get(gid)
        return made[1] if made is not None else {p: p for p in self.groups.subgroups(gid)}

    def _chosen(self, gid, subgroups) -> dict[int, int]:
        """The group's chosen periods (Conservative's while the choice is being made)."""
        sig = self._signature(subgroups)
        made = self.chosen.get(gid)
        if made is not None and made[0] == sig:
            return made[1]
        self.chosen.pop(gid, None)
        if self.budget is None:
            target = choose_periods(subgroups, self.model, self._phases(subgroups), self.costs)
            self.chosen[gid] = (sig, target)
            return target
        going = self.choosing_now.get(gid)
        if going is None or going[0] != sig:  # (started again: the group changed meanwhile)
            choice = PeriodChoice(subgroups, self.model, self._phases(subgroups), self.costs)
            if choice.result is not None:  # nothing to choose (one sub-group)
                self.choosing_now.pop(gid, None)
                self.seen_at.pop(gid, None)
                self.chosen[gid] = (sig, choice.result)
                return choice.result
            self.choosing_now[gid] = (sig, choice)
            self.seen_at.pop(gid, None)
        return {p: p for p in subgroups}  # Conservative's, until the choice is made

    def refine(self, slides: Callable[[str], int] | None = None) -> bool:
        """One bounded step of the choices being made: at most `budget` slides simulated in all
        (a schedule longer than that alone); the choices made are applied (the tasks formed
        again). True when one was. `slides(stream)`: its latest slide; with it, a choice steps only
        once its group's stream slid after this saw the choice first (_settled)."""
        if not self.choosing_now or self.budget is None:
            return False
        left, made = self.budget, False
        for gid, (sig, choice) in list(self.choosing_now.items()):
            if left <= 0:
                break
            if slides is not None and not self._settled(gid, slides):
                continue
            left -= choice.step(left, alone=left == self.budget)
            if choice.result is not None:
                del self.choosing_now[gid]
                self.seen_at.pop(gid, None)
                self.chosen[gid] = (sig, choice.result)
                made = True
        if made:
            self.sync()
        return made

    def update(self) -> None:
        super().update()
        self.clock += 1
        self.watch_overload()

    def watch_overload(self, slides: Callable[[str], int] | None = None, answering=frozenset()) -> bool:
        """Switch the groups that fell late to their drifting choice, and those that kept up for
        their longest SLIDE back to their held one (the class docstring); the tasks are formed
        again when the two choices of a group that switches differ. A member in `answering` (an
        execution for it under way) is not late: its answer's lateness is its execution's. The
        return waits until it makes no task overdue at once, each member having gone no longer
        without an answer than its held period (a task overdue by the switch alone would run
        before the tasks really late), but no longer than another longest SLIDE (sub-groups
        whose phases never meet so). `slides(stream)`: its latest slide (the server); without
        it, the updates seen. A scan of every member, as pick_all's is."""
        since, late_at, changed = self.since, self.late_at, False
        for gid, (owed, calm) in self.own.items():
            now = self.clock if slides is None else slides(self.groups.groups[gid][0].leader.stream)
            if any(since[m] > p for m, p, _ in owed if m not in answering):
                if gid not in late_at and self._differs(gid):
                    changed = True
                    self.overloads += 1
                late_at[gid] = now
            elif gid in late_at and now - late_at[gid] >= calm:
                if not self._differs(gid):
                    del late_at[gid]
                elif now - late_at[gid] >= 2 * calm or self._in_step(gid, owed):
                    del late_at[gid]
                    changed = True
        if changed:
            self.sync()
        return changed

    def _differs(self, gid) -> bool:
        """Whether the group's drifting choice runs some sub-group at another period than its held one."""
        return self._chosen_late(gid, self.groups.subgroups(gid)) != self._held(gid)

    def _in_step(self, gid, owed) -> bool:
        """Whether every member but a CS8 repeat has answered within its held period."""
        target, since = self._held(gid), self.since
        return all(since[m] <= target[op] for m, p, op in owed if p == op)

    def _settled(self, gid, slides: Callable[[str], int]) -> bool:
        """Whether group `gid` has gone a slide of its stream unchanged since its choice was seen
        (the first call for a choice notes the slide and says no). Registrations come in bursts
        (a dashboard's panels), each starting the group's choice again: steps taken between them
        would be thrown away; a slide is the server's unit of time, as data."""
        now = slides(self.groups.groups[gid][0].leader.stream)
        seen = self.seen_at.setdefault(gid, now)
        return now > seen

    def choosing(self, gid=None) -> bool:
        """Whether group `gid`'s choice of periods (any group's: None) is still being made."""
        return bool(self.choosing_now) if gid is None else gid in self.choosing_now

    def pending_choices(self) -> int:
        return len(self.choosing_now)

    def _phases(self, subgroups: dict[int, list[Output]]) -> dict[int, int]:
        """Per sub-group, the updates until it is next due at its own period: the schedule the
        choice is costed over starts from the sub-groups' real phases, not from all due together
        (a query registered later is due at once, when it registers: 8.4.4 costs the schedule
        over the LCM of the periods, and two periods meet in it only as their phases let them)."""
        since = self.since
        return {p: max(0, min(p - since.get(m, p) for o in outs for m in o.members)) for p, outs in subgroups.items()}

    def _tasks(self) -> list[Task]:
        tasks = super()._tasks()
        self.own = {gid: ([(mid, m.period, o.period) for o in outs for mid, m in o.members.items()],
                          max(m.period for o in outs for m in o.members.values()))
                    for gid, outs in self.groups.groups.items()}
        for kept in (self.chosen, self.choosing_now, self.seen_at, self.late_at, self.chosen_late):
            for gid in [g for g in kept if g not in self.groups.groups]:
                del kept[gid]  # a group that is gone
        return tasks

    def _check(self) -> None:
        super()._check()
        assert set(self.chosen) <= set(self.groups.groups) and set(self.choosing_now) <= set(self.groups.groups)
        assert not set(self.chosen) & set(self.choosing_now), "a group's choice is made or being made"
        assert set(self.seen_at) <= set(self.choosing_now), "a slide noted for a choice being made only"
        assert set(self.own) == set(self.groups.groups) and set(self.late_at) <= set(self.groups.groups)
        for gid, (owed, calm) in self.own.items():
            assert sorted(owed) == sorted((mid, m.period, o.period) for o in self.groups.groups[gid]
                                          for mid, m in o.members.items())
            assert calm == max(p for _, p, _ in owed)
        assert set(self.chosen_late) <= set(self.groups.groups)
        for t in self.tasks:
            if t.gid in self.late_at:
                target = self.chosen_late[t.gid][1]
                assert all(target[o.period] == t.period for o in t.outputs), "a late group runs at its drifting choice"
        assert self.budget is not None or not self.choosing_now, "without a budget, choices are made at once"
        for gid, (sig, choice) in self.choosing_now.items():
            assert choice.result is None and sig == self._signature(self.groups.subgroups(gid))
            choice._check()


class HybridLate(Hybrid):
    """Late sharing (8.4.5): under overload (lowest d < 0) every late task of the group joins."""

    mode = SharingMode.HYBRID_LATE

    def _joinable(self, d: int, v: int) -> bool:
        return d < 0 if v < 0 else d == v


class HybridLatePending(Hybrid):
    """Algorithm 11, late-pending sharing: under overload the late and the pending (d = 0) tasks
    of the group join."""

    mode = SharingMode.HYBRID_LP

    def _joinable(self, d: int, v: int) -> bool:
        return d <= 0 if v < 0 else d == v


SCHEDULERS: dict[SharingMode, type[LocalScheduler]] = {c.mode: c for c in (NoSharing, Aggressive, Conservative, Hybrid, HybridLate, HybridLatePending)}


def make_scheduler(mode: "SharingMode | str", groups: Groups, model: CostModel | None = None,
                   budget: int | None = None) -> LocalScheduler:
    """A scheduler of `mode`; `budget`: a hybrid's choices of periods are made in steps of at
    most that many simulated slides (Hybrid.refine), not at once (the others choose nothing)."""
    cls = SCHEDULERS[SharingMode(mode)]
    if issubclass(cls, Hybrid):
        return cls(groups, model, budget)
    return cls(groups, model)
