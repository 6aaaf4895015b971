"""Shared execution inside the transaction scheduler: the registered periodic queries of the
store arranged by the rules (Groups) and scheduled by a LocalScheduler, each joint execution one
read-only transaction (a SharedPlan) under the stream's policy, like any periodic execution: it
begins, reads its sub-windows one operation at a time (the longest window of the group's members
it runs, youngest to oldest, once for all of them), may be aborted by a slide and restarts, and
commits; its answer is then split per member (each over its own RANGE, the n youngest of the
sub-windows read) and delivered as that member's answer, with how early (or late) it came.
A query with no partner (or a continual one, SLIDE 0) runs as before, on its own.

The scheduler calls add/remove when queries come and go, spawn instead of its own due-task loop,
deliver when a shared execution commits, and group_failed when one fails."""
from __future__ import annotations

import collections
import dataclasses
from typing import TYPE_CHECKING, Any

from windowstore.store import gc_pause
from windowstore.store.aggregates import Partial
from windowstore.store.memo import MISS, large
from windowstore.store.planner.merge import combine_contributions, combine_prefixes, combines, inverts
from windowstore.store.schema import VALID

from ..kinds import QueryKind
from ..query import RestartLimitExceeded, Result
from windowstore.store.hop import due_by_windows
from windowstore.store.slicing import SlicedHop, sliced_task

from ..schedule.edf import Task, task_due
from windowstore.store.errors import ResourceLimit
from windowstore.store.join import SharedJoin

from ..joins import JoinQueryPlan
from .answer import SharedAnswer
from .combined import CombinedWindows
from .cost import STEP_SLIDES, STORE, CostModel
from .covers import derive, derive_cached, subtract
from .groups import Groups
from .joins import SharedJoinPlan, member_reads
from .modes import SharingMode
from .rules import Synopsis, describe, group_key, read_key, reason
from .schedulers import Execution, make_scheduler
from .slices import SharedSlicedPlan, SlicesGroups

if TYPE_CHECKING:
    from ..query import QueryTxn
    from ..scheduler import Scheduler


KEPT_PLANS = 64  # SharedPlans kept for reuse (SharedTasks._plans); all dropped when more are made


class SharedPlan:
    """The plans of a joint execution's outputs (one stream) as one read-only transaction: it
    reads the youngest n_q sub-windows, n_q the longest of them, youngest to oldest under the
    policies that allow it. Plans that read the same thing from a sub-window (the same query but
    for RANGE, SLIDE and LIMIT: CS2's same synopsis) share one reader, and a sub-window's
    contribution is computed once per reader, for the readers whose members' windows hold it;
    the finish answers each member from its own n youngest (computing any contribution still
    missing, e.g. under ws, whose snapshot lags the window). A probe group (CS1: equal lengths)
    probes once per member plan, atomically."""

    memo_key = None  # its reads (one per reader) are kept per reader in the sub-windows' memos, not as one

    def __init__(self, plans: list, memo: bool = True, read_keys: list | None = None,
                 windows: CombinedWindows | None = None):
        """`read_keys`: the plans' rules.read_key, when the caller keeps them (computing one
        copies the query). `windows`: the readers' combined windows kept between executions
        (SharedTasks'; used with `memo`, whose contributions they hold)."""
        self.plans = plans
        self.memo = memo  # keep and reuse readers' contributions in the sub-windows' memos (store/memo.py)
        self.windows = windows if memo else None
        self.reused = 0  # contributions taken from a sub-window's memo (an earlier execution's, or a lone run's)
        self.stream = plans[0].stream
        self.strings = self.stream.strings
        self.n_q = max(p.n_q for p in plans)
        accesses = {p.access for p in plans}
        self.access = accesses.pop() if len(accesses) == 1 else "window"
        self.as_of = None
        self.supports_remove = all(p.supports_remove for p in plans)
        self.query = ("shared", *(p.query for p in plans))  # the cost model's key
        self.aggs = [a for p in plans for a in p.aggs]
        keys: dict = {}
        self.reader_of = [keys.setdefault(k, len(keys)) for k in (read_keys or map(read_key, plans))]
        self.readers: list[Any] = [None] * len(keys)  # per reader, the first plan that reads so
        self.reach = [0] * len(keys)  # per reader, the longest window of its plans
        for p, r in zip(plans, self.reader_of):
            self.readers[r] = self.readers[r] or p
            self.reach[r] = max(self.reach[r], p.n_q)
        # per reader, its plans' indexes, shortest window first, and whether their contributions combine
        self.members: list[list[int]] = [[] for _ in keys]
        for i in sorted(range(len(plans)), key=lambda i: plans[i].n_q):
            self.members[self.reader_of[i]].append(i)
        self.combines = [combines(p.bound) for p in self.readers]
        self.inverts = [inverts(p.bound) for p in self.readers]  # (their combined windows slide: combined.py)
        # per reader, whether its contribution's size grows with the rows (memo.py's bound on those)
        self.large = [large(p) for p in self.readers]
        # predicate covers (covers.py): readers whose contributions come from others' (no scan of their own)
        self.derived = derived_readers(self.readers, self.combines, (self.stream.schema, *keys))
        self.keys = list(keys)
        for d in self.derived:
            for i in d.plus + d.minus:  # a piece is read wherever its target is
                self.reach[i] = max(self.reach[i], self.reach[d.target])
        self._by_target = {d.target: d for d in self.derived}
        self.again()

    def again(self) -> None:
        """Before each joint execution that runs it: its counts are per execution. The rest of it
        (readers, members, covers) depends only on the plans, so SharedTasks keeps one per set of
        outputs while the groups do not change (building it was a pass over every member)."""
        self.reused = 0
        self.cover_reads_saved = 0  # sub-window scans a derived reader did not make
        self.cover_derived: set[int] = set()  # derived readers that derived a contribution (not all from memo)
        self.cover_fallbacks: set[int] = set()  # derived readers that read a sub-window of their own (its nulls)

    def _check(self) -> None:
        assert len(self.reader_of) == len(self.plans) and len(self.members) == len(self.readers) == len(self.reach)
        assert sorted(i for m in self.members for i in m) == list(range(len(self.plans))), "each plan under one reader"
        assert self.cover_derived <= set(self._by_target) and self.cover_fallbacks <= set(self._by_target)

    def read(self, sub) -> tuple:
        oldest = self.stream.window.latest - sub.slide  # 0: the youngest sub-window
        vals: list = [MISS] * len(self.readers)
        for r, n in enumerate(self.reach):
            if oldest < n and r not in self._by_target:
                vals[r] = self._contribution(r, sub, vals)
        for d in self.derived:
            if oldest < self.reach[d.target]:
                vals[d.target] = self._contribution(d.target, sub, vals)
        return sub, vals

    def _value(self, r: int, sub, vals: list):
        if vals[r] is MISS:  # (None is a contribution: MIN of no rows)
            vals[r] = self._contribution(r, sub, vals)
        return vals[r]

    def _contribution(self, r: int, sub, vals: list):
        """Reader r's contribution for `sub`: kept in the sub-window's memo (store/memo.py: by an
        earlier execution, or the query run alone), else read (or derived from its cover's
        pieces) now and kept there. A sealed sub-window never changes, so the contribution is the
        same at every execution: computed once, as the thesis's basic intervals hold values
        pre-aggregated once per interval (2.3.4, 8.3.1 CS2); a kept None (MIN of no rows) is a hit."""
        key = self.keys[r]
        got = sub.memo.get(key) if self.memo else MISS
        if got is not MISS:
            self.reused += 1
            return got
        d = self._by_target.get(r)
        got = self.readers[r].read(sub) if d is None else self._derive(d, sub, vals)
        if self.memo:
            sub.memo.put(key, got, self.large[r])
        return got

    def _derive(self, d, sub, vals: list):
        """Reader d.target's contribution for `sub` from its pieces' (a cover), or its own read
        where the cover needs a column without nulls and the sub-window has one."""
        if d.no_nulls is not None:
            valid = sub.columns.get(VALID + d.no_nulls)
            if valid is not None and not valid.all():
                self.cover_fallbacks.add(d.target)
                return self.readers[d.target].read(sub)
        bound = self.readers[d.target].bound
        plus = [self._value(i, sub, vals) for i in d.plus]
        got = plus[0] if len(plus) == 1 else combine_contributions(bound, plus, self.strings)
        if d.minus:
            got = subtract(bound, got, [self._value(i, sub, vals) for i in d.minus])
        self.cover_reads_saved += 1
        self.cover_derived.add(d.target)
        return got

    def finish(self, partial: Partial) -> SharedAnswer:
        """Each member's answer over its own n youngest sub-windows. A reader whose aggregates
        combine (merge.combines: COUNT, exact SUM/AVG, MIN, MAX, per key too) combines its
        contributions youngest to oldest once for all its plans' lengths (merge.combine_prefixes:
        the keys grouped once, each distinct length's prefix combined from them), and each plan
        finishes the one for its RANGE, not one merge per plan. Where they are invertible too
        (merge.inverts: COUNT, integer SUM and AVG), each length's combined window is the one kept
        from the reader's last execution, moved by the sub-windows that entered and left
        (combined.py): the intervals accessed, not the window (thesis 8.4.3). Other readers
        (quantiles, COUNT DISTINCT, float sums) share the sub-windows' contributions, and each
        plan merges its own."""
        c = partial.contributions
        newest_first = sorted(c, reverse=True)

        def values(r: int, upto: int, start: int = 0) -> list:
            out = []
            for v in newest_first[start:upto]:
                sub, vals = c[v]
                out.append(self._value(r, sub, vals))
            return out

        out: list = [None] * len(self.plans)
        for r, members in enumerate(self.members):
            lead = self.readers[r]
            if not self.combines[r]:
                for i in members:
                    mine = Partial()
                    for v, val in zip(newest_first, values(r, self.plans[i].n_q)):
                        mine.add(v, val)
                    out[i] = self.plans[i].finish(mine)
                continue
            ends = sorted({n for i in members if (n := min(self.plans[i].n_q, len(newest_first)))})
            if not ends:
                at: dict = {}
            elif self.windows is not None and self.inverts[r]:
                at = dict(zip(ends, self.windows.prefixes(self.keys[r], lead.bound, newest_first[:ends[-1]],
                                                          values(r, ends[-1]), ends, self.strings)))
            else:
                at = dict(zip(ends, combine_prefixes(lead.bound, values(r, ends[-1]), ends, self.strings)))
            for i in members:  # shortest window first
                n = min(self.plans[i].n_q, len(newest_first))
                mine = Partial()
                if n:
                    mine.add(newest_first[n - 1], at[n])
                out[i] = self.plans[i].finish(mine)
        return SharedAnswer(out)

    def probes_now(self) -> bool:
        return all(p.access == "probe" and p.probes_now() for p in self.plans)

    def probe(self) -> SharedAnswer:
        return SharedAnswer([p.probe() for p in self.plans])


def derived_readers(readers: list, combine_ok: list, key: tuple) -> list:
    """covers.derive for these readers, remembered by the stream's schema and their read keys in
    order (`key`: a WHERE's sets depend on its column's type)."""
    return derive_cached(key, [p.bound for p in readers], combine_ok)


@dataclasses.dataclass(eq=False)
class Joint:
    """What a shared execution in flight runs: the execution the local scheduler chose, its
    member tasks per output, and its group's id."""

    execution: Execution
    outputs: list[list[str]]   # per plan of the SharedPlan: the member ids it answers
    gid: Any
    txn: "QueryTxn | None" = None


class SharedTasks:
    """The sharing state of one scheduler (one per engine): the groups, the local scheduler, the
    member tasks and what sharing has done (stats)."""

    def __init__(self, mode: "SharingMode | str", model: CostModel | None = None):
        self.mode = SharingMode(mode)
        self.groups = Groups()
        # a hybrid's choice of periods is made off the registration path, STEP_SLIDES at a time (spawn)
        self.local = make_scheduler(self.mode, self.groups, model or STORE, STEP_SLIDES)
        self.tasks: dict[str, Task] = {}  # member id -> its scheduler task
        self.busy: dict[str, QueryTxn] = {}  # member id -> the shared execution answering it now
        self.executions = 0      # shared executions committed
        self.answers = 0         # answers they delivered
        self.early_runs = 0      # answers earlier than the member's SLIDE
        self.late_runs = 0       # answers later than the member's SLIDE
        self.aborts_by_group: collections.Counter = collections.Counter()
        self.aborts_by_query: collections.Counter = collections.Counter()
        # executions (and the answers of members) that held their window after aborts (Outcomes._fall_back)
        self.fallbacks_by_group: collections.Counter = collections.Counter()
        self.fallbacks_by_query: collections.Counter = collections.Counter()
        self.failures = 0
        self.cover_executions_saved = 0  # readers of committed executions answered from a cover, scanning nothing
        # (those whose every contribution came from earlier executions (sub-windows' memos) are not counted)
        self.cover_reads_saved = 0       # sub-window scans covers saved (aborted attempts too)
        self.contributions_reused = 0    # readers' contributions taken from sub-windows' memos (store/memo.py)
        self.windows = CombinedWindows()  # invertible readers' combined windows, kept between executions
        self.join_synopses: dict[Any, SharedJoin] = {}  # per join group (SS3/CS5): its one kept join result
        self.join_answers = 0            # answers of periodic joins from a shared join synopsis
        self.slices = SlicesGroups()     # windows that cut sub-windows, by slices group (slices.py)
        self.slice_executions = 0        # shared executions of slices groups committed
        self.slice_answers = 0           # answers they delivered
        self._eager: dict[str, bool] = {}  # per join member: whether its own plan is maintained eagerly alone
        self._read_keys: dict[str, tuple] = {}  # per member: its plan's rules.read_key (_read_key)
        # per (group, its outputs' leading members): the SharedPlan of its joint executions, kept
        # until a query comes or goes (a plan never changes while its task is registered)
        self._plans: dict[tuple, tuple[SharedPlan, QueryTxn]] = {}  # (and the execution that last ran it)
        self._seq = 0
        self._blocked = False
        self.fallen_back: dict[str, str] = {}  # members run alone since their joint execution failed: why

    # -- queries come and go -------------------------------------------------------------------
    def add(self, task: Task) -> None:
        if task.every < 1 or task.id in self.fallen_back:
            return  # continual (SLIDE 0), or its joint execution failed (group_failed): on its own
        if sliced_task(task) is not None:  # due when a slide completes a window: with its slices group's due ones
            self.slices.add(task)
            return
        if due_by_windows(task) is not None:  # HOP/TUMBLE, CUMULATE: runs alone (alone_reason), due when a slide
            return  # completes one of its windows, not by the local scheduler's periods: spawned as without sharing
        m = describe(task.plan, task.id, task.every)
        self.groups.add(m)
        self._plans.clear()
        self.tasks[task.id] = task
        if m.synopsis == Synopsis.JOIN:
            self._eager[task.id] = join_plan(task).eager
            self._join_group_changed(self.groups.group_id(task.id))
        self.local.sync()

    def unregistered(self, task_id: str) -> None:
        """The scheduler dropped the query: out of sharing, and forgotten if it had fallen back."""
        self.remove(task_id)
        self.fallen_back.pop(task_id, None)

    def remove(self, task_id: str) -> None:
        if self.slices.remove(task_id) is not None:
            self.busy.pop(task_id, None)  # a shared execution in flight goes on for the others
            return
        task = self.tasks.pop(task_id, None)
        if task is None:
            return
        gid = self.groups.group_id(task_id)
        self.groups.remove(task_id)
        self._plans.clear()
        self._read_keys.pop(task_id, None)
        self.busy.pop(task_id, None)  # a shared execution in flight goes on for the others
        if task_id in self._eager:
            join_plan(task).eager = self._eager.pop(task_id)
            self._join_group_changed(gid)
        self.local.sync()

    def _join_group_changed(self, gid) -> None:
        """A join group gained or lost a member: while it has partners, its members' own plans are
        not maintained after every slide (the group's synopsis is, at its executions); alone, a
        member is as it would be without sharing. A group gone drops its synopsis."""
        outputs = self.groups.groups.get(gid)
        if not outputs:
            self.join_synopses.pop(gid, None)
            return
        shared = len(outputs) > 1
        for o in outputs:
            for mid in o.members:
                join_plan(self.tasks[mid]).eager = self._eager[mid] and not shared

    def shared(self, task: Task) -> bool:
        return task.id in self.tasks

    # -- the scheduler's due-task loop ---------------------------------------------------------
    def spawn(self, sched: "Scheduler") -> None:
        for task in sched.tasks.values():  # those sharing does not hold: as before
            if task.id not in self.tasks and task.id not in self.slices.key_of and task_due(task, sched.failed):
                task.running = sched.submit(task.plan, QueryKind.PERIODIC, task.priority, task=task)
        # a step of the hybrid's choices of periods being made (bounded: cost.STEP_SLIDES slides
        # simulated), at each spawn (a slide, an execution's end), not in the registration's call;
        # a group's first once its stream slid after its change (Hybrid._settled)
        streams = sched.streams
        self.local.refine(lambda name: streams[name].window.latest if name in streams else 0)
        period = None
        for mid in [m for m, txn in self.busy.items() if txn.done]:
            del self.busy[mid]  # withdrawn without an answer or an error (its stream dropped)
        self._spawn_slices(sched)
        excluded = set(self.busy)
        since, failed = self.local.since, sched.failed
        for mid, task in self.tasks.items():
            stream = task.plan.stream
            if task.last_reflected is not None:
                since[mid] = stream.window.latest - task.last_reflected
            else:  # never answered: due at once (at its task's period), later with every slide since
                if period is None:  # (the local scheduler's: its task's, or a CS8 repeat's own)
                    period = {m: owed for t in self.local.tasks for m, owed in t.owed}
                since[mid] = period[mid] + stream.window.latest - next(iter(task.since.values()))  # type: ignore[union-attr]  # set at registration
            if task.running is not None or not task.active or (failed and stream.name in failed):
                excluded.add(mid)
        # a hybrid's group with a member late (not being answered) runs at its choice for drifting phases until it keeps up
        self.local.watch_overload(lambda name: streams[name].window.latest if name in streams else 0, excluded)
        # a due task held back by a member an earlier execution is answering: look again when an
        # execution ends. Those this spawn submits are not held back (their execution answers them):
        # judged before submitting, so an execution's delivery spawns again only when it may free a
        # due task, not after every joint execution (a pass over every member each time)
        busy = self.busy
        self._blocked = bool(busy) and any(self.local.d(t) <= 0 for t in self.local.tasks
                                           if any(m in busy for m in t.member_ids))
        for ex in self.local.pick_all(excluded):
            excluded.update(ex.early)  # (its members)
            self._submit(sched, ex)

    def _spawn_slices(self, sched: "Scheduler") -> None:
        """Each slices group's due members (a slide completed one of each one's windows) in one
        shared execution; a member due alone runs as before."""
        for key, group in self.slices.groups.items():
            due = [t for t in group.values() if t.id not in self.busy and task_due(t, sched.failed)]
            if len(due) == 1:
                due[0].running = sched.submit(due[0].plan, QueryKind.PERIODIC, due[0].priority, task=due[0])
            elif due:
                self._submit_slices(sched, key, due)

    def _submit_slices(self, sched: "Scheduler", key, members: list[Task]) -> None:
        self._seq += 1
        gid = (key[0], "SLICES")
        ex = Execution(gid, [], [], early={t.id: 0 for t in members})
        group = Task(f"G{self._seq}", SharedSlicedPlan([t.plan for t in members], self.slices.joints.get(key)),  # type: ignore[arg-type]  # the scheduler tells it by Task.shared
                     min(t.every for t in members), max(t.priority for t in members), on_error=self.group_failed)
        group.since = dict(members[0].since or {})
        reflected = [t.last_reflected for t in members]
        group.last_reflected = None if None in reflected else min(reflected)  # type: ignore[type-var]  # no None: checked
        group.shared = Joint(ex, [[t.id] for t in members], gid)
        txn = sched.submit(group.plan, QueryKind.PERIODIC, group.priority, task=group)
        group.running = group.shared.txn = txn
        for t in members:
            self.busy[t.id] = txn

    def _task(self, member_id: str) -> "Task | None":
        """A member's task, shared by the rules' groups or by a slices group."""
        task = self.tasks.get(member_id)
        return task if task is not None else self.slices.task(member_id)

    def _submit(self, sched: "Scheduler", ex: Execution) -> None:
        if len(ex.early) == 1:  # no partner (ex.early: its members): the query runs as before
            task = self.tasks[next(iter(ex.early))]
            task.running = sched.submit(task.plan, QueryKind.PERIODIC, task.priority, task=task)
            return
        outputs = [[mid for mid in o.members if mid in self.tasks] for o in ex.outputs]
        plans = [self.tasks[mids[0]].plan for mids in outputs]
        members = [self.tasks[mid] for mid in ex.early]  # those it answers (not a CS8 repeat it need not answer yet)
        self._seq += 1
        every = min(t.every for t in members)
        key = None
        if isinstance(plans[0], JoinQueryPlan):
            plan = self._join_plan(ex.gid, plans, every)
        else:
            key = (ex.gid, tuple(mids[0] for mids in outputs))
            plan = self._shared_plan(key, outputs, plans)
        group = Task(f"G{self._seq}", plan, every,  # type: ignore[arg-type]  # the scheduler tells it by Task.shared
                     max(t.priority for t in members), on_error=self.group_failed)
        group.since = dict(members[0].since or {})
        reflected = [t.last_reflected for t in members]
        group.last_reflected = None if None in reflected else min(reflected)  # type: ignore[type-var]  # no None: checked
        group.shared = Joint(ex, outputs, ex.gid)
        txn = sched.submit(group.plan, QueryKind.PERIODIC, group.priority, task=group)
        group.running = joint_txn = txn
        group.shared.txn = joint_txn
        if key is not None:
            self._plans[key] = (plan, txn)  # (a SharedPlan: key is set for those only)
        self.busy.update(dict.fromkeys(ex.early, txn))  # (its members)

    def _shared_plan(self, key: tuple, outputs: list[list[str]], plans: list) -> SharedPlan:
        """The SharedPlan of a joint execution of these outputs (`key`: the group and the
        outputs' leading members): the one kept for them, once the execution that ran it is done,
        made ready for another; else a new one (kept by _submit; at most KEPT_PLANS kept)."""
        kept = self._plans.get(key)
        if kept is not None and kept[1].done:
            kept[0].again()
            return kept[0]
        if len(self._plans) >= KEPT_PLANS:
            self._plans.clear()
        return SharedPlan(plans, read_keys=[self._read_key(mids[0]) for mids in outputs], windows=self.windows)

    def _read_key(self, member_id: str) -> tuple:
        """A member's rules.read_key, kept while it is registered (its plan does not change)."""
        key = self._read_keys.get(member_id)
        if key is None:
            key = self._read_keys[member_id] = read_key(self.tasks[member_id].plan)
        return key

    def _join_plan(self, gid, plans: list, every: int) -> SharedJoinPlan:
        """A joint execution of joins of group `gid` over the group's one synopsis (made at its
        first execution), kept at the longest RANGE per source of all the group's members."""
        lead = plans[0].join
        synopsis = self.join_synopses.get(gid)
        if synopsis is None:
            synopsis = self.join_synopses[gid] = SharedJoin(lead.bound, lead.strings, lead.max_rows)
        lengths = [0] * len(lead.sources)
        for o in self.groups.groups[gid]:
            for p, src in enumerate(join_plan(self.tasks[o.leader.id]).join.sources):
                lengths[p] = max(lengths[p], src.n_q)
        return SharedJoinPlan(plans, synopsis, lengths, every)

    # -- a shared execution ends ---------------------------------------------------------------
    def deliver(self, sched: "Scheduler", txn: "QueryTxn", result: "Result", now: float) -> None:
        """A shared execution committed: counted once, then each member answered from its part."""
        group: Task = txn.task  # type: ignore[assignment]  # a shared execution's task
        joint: Joint = group.shared  # type: ignore[assignment]  # set in _submit
        group.running = None
        # (a slices group's members are due by their windows, not the local scheduler's deadlines:
        # the scheduler looks again after each of its executions, as before)
        sched.finish_committed(txn, result, respawn=isinstance(group.plan, SharedSlicedPlan))
        self.executions += 1
        if result.restarts:
            self.aborts_by_group[str(joint.gid)] += result.restarts
        if result.fallback:
            self.fallbacks_by_group[str(joint.gid)] += 1
        if isinstance(group.plan, SharedJoinPlan):
            reads = txn.read_sets()

            def own(task: Task) -> dict:  # a join member: its provenance over its own RANGEs of what was read
                mine = join_plan(task)
                sources = mine.provenance(member_reads(mine, reads))
                task.reflected = {s.stream: s.slide for s in sources}
                self.join_answers += 1
                return {"slide": sources[0].slide, "window_start_ms": sources[0].window_start_ms,
                        "window_end_ms": sources[0].window_end_ms, "sources": sources}
            return self._answer_members(sched, txn, result, now, own)
        if isinstance(group.plan, SharedSlicedPlan):
            self.slice_executions += 1
            before = self.answers
            self._answer_members(sched, txn, result, now, self._windows(txn, result))
            self.slice_answers += self.answers - before
            return
        plan: SharedPlan = group.plan  # type: ignore[assignment]  # a shared execution's plan
        self.cover_executions_saved += len(plan.cover_derived - plan.cover_fallbacks)
        self.cover_reads_saved += plan.cover_reads_saved
        self.contributions_reused += plan.reused
        self._answer_members(sched, txn, result, now, self._windows(txn, result))

    @staticmethod
    def _windows(txn: "QueryTxn", result: "Result"):
        """Per member task, the bounds of its own n youngest sub-windows of those `txn` read
        (members of equal RANGE share one dict)."""
        read = txn.sources[0].read
        # the bounds of the n youngest sub-windows read, for every n: one pass, not one per member
        bounds: list[tuple] = []
        for v in sorted(read, reverse=True):
            s = read[v]
            bounds.append((s.start_ms, s.end_ms) if not bounds else
                          (min(bounds[-1][0], s.start_ms), max(bounds[-1][1], s.end_ms)))

        by_n: dict[int, dict] = {}  # by RANGE (n_q): members of equal RANGE share the bounds

        def window(task: Task) -> dict:  # the bounds of its own n youngest sub-windows read
            got = by_n.get(task.plan.n_q)
            if got is None:
                n = min(task.plan.n_q, len(bounds))
                start, end = bounds[n - 1] if n else (result.window_start_ms, result.window_end_ms)
                got = by_n[task.plan.n_q] = {"window_start_ms": start, "window_end_ms": end}
            return got
        return window

    def _answer_members(self, sched: "Scheduler", txn: "QueryTxn", result: "Result", now: float, own) -> None:
        """Each member still waiting for `txn` answered with its output's answer, the result's
        fields but `own(task)`'s (its window), how early or late it came and the group, then told.
        The collector is paused meanwhile (store/gc_pause.py): the members' results are a burst of
        objects that stay alive (in the answer logs), none in a cycle; collecting while they are
        made walks them again and again and pushes older generations to full collections."""
        with gc_pause.paused():
            self._answer_members_now(sched, txn, result, now, own)

    def _answer_members_now(self, sched: "Scheduler", txn: "QueryTxn", result: "Result", now: float, own) -> None:
        group: Task = txn.task  # type: ignore[assignment]  # a shared execution's task
        joint: Joint = group.shared  # type: ignore[assignment]  # set in _submit
        latest = group.plan.stream.window.latest
        label = group_label(joint.gid)
        sliced = isinstance(group.plan, SharedSlicedPlan)  # (its members run when due: their slides between windows vary)
        busy, slide, restarts = self.busy, result.slide, result.restarts
        tasks = self.tasks
        told: list = []  # (task, result) of the members answered that have a subscriber
        answered = early_runs = late_runs = 0
        for answer, mids in zip(result.answer.answers, joint.outputs):  # type: ignore[attr-defined]  # a SharedAnswer
            # the fields every member of this output has in common, made once; per member a copy
            # (not dataclasses.replace, which re-runs __init__) with its own window, lateness and earliness
            common = dict(vars(result), answer=answer, group=label)
            # members answered alike (the same lateness, earliness, window and execution count
            # and time of their last answer: an output's duplicates and CS8 repeats, as a rule)
            # share one Result, as they share its answer: results are not changed once delivered.
            # Looked up by those fields, not only against the previous member's: an output's
            # members of different SLIDEs alternate (a thousand members a slide on the dashboard
            # of docs/sharing.md's goal, a few distinct results per output)
            made: dict = {}  # (id of the window, *the fields) -> (the window, kept alive: its id stays its own; the Result)
            for mid in mids:
                if busy.get(mid) is not txn:
                    continue  # unregistered (or re-registered) while it ran
                del busy[mid]
                task = tasks.get(mid) or self._task(mid)
                assert task is not None, "a busy member is registered"
                reflected = task.last_reflected
                late = early = 0
                if reflected is not None:
                    if slide <= reflected:
                        continue  # it has answered this slide (run for a due partner): never twice
                    late = latest - reflected - task.every
                    late = late if late > 0 else 0
                    if not sliced:
                        early = task.every - (slide - reflected)
                        early = early if early > 0 else 0
                window = own(task)
                same = (id(window), late, early, task.last_answer_ms, task.executions)  # (task.answered sets the last two's)
                got = made.get(same)
                if got is None:
                    mine = common.copy()
                    mine["late_slides"], mine["early_slides"] = late, early
                    mine.update(window)
                    r = object.__new__(Result)
                    r.__dict__ = mine
                    made[same] = (window, r)
                else:
                    r = got[1]
                if late:
                    task.late += 1
                    late_runs += 1
                early_runs += early > 0
                task.answered(r, now)  # (r: the result with this member's answer; the same slide)
                answered += 1
                if restarts:
                    self.aborts_by_query[mid] += restarts
                if result.fallback:
                    self.fallbacks_by_query[mid] += 1
                if task.on_answer is not None and task.active:
                    told.append((task, r))
        self.answers += answered
        self.early_runs += early_runs
        self.late_runs += late_runs
        if self._blocked:
            sched.recheck_due_tasks()  # a due task waited for these members
        if sched.on_answers is not None:  # one delivery for the execution (the engine: one log record)
            if told:
                sched.on_answers(told)
            return
        for task, r in told:
            task.on_answer(r)  # (told: with an on_answer)

    def group_failed(self, group: Task, error: Exception) -> None:
        """A shared execution failed. Aborted too often by slides (RestartLimitExceeded), or a
        shared join refused past its bound: each member hears of it as it would of its own
        execution failing, and stays registered and shared. Any other failure is the joint
        execution's own (its members alone may well answer): they leave sharing and run alone
        from then on, unaware (`fallen_back`, with why), and a query that then fails alone fails
        as a lone query does. Kept shared and due, they would be started again at once and fail
        again, for ever: the engine never idle."""
        joint: Joint = group.shared  # type: ignore[assignment]  # set in _submit
        group.running = None
        self.failures += 1
        refused = isinstance(error, ResourceLimit) and isinstance(group.plan, SharedJoinPlan)
        if not refused and not isinstance(error, RestartLimitExceeded):
            for mids in joint.outputs:
                for mid in mids:
                    if self.busy.get(mid) is joint.txn:
                        self.remove(mid)  # (out of its group, its slices group, busy; the scheduler keeps it)
                        self.fallen_back[mid] = f"its shared execution failed: {error}"
            return
        for mids in joint.outputs:
            for mid in mids:
                if self.busy.get(mid) is not joint.txn:
                    continue
                del self.busy[mid]
                task = self._task(mid)
                if refused and task is not None:  # as a join alone: this execution is skipped, the next after its SLIDE
                    task.reflected = {s.name: s.window.latest for s in join_plan(task).streams}
                    task.last_reflected = task.plan.stream.window.latest
                if task is not None and task.active and task.on_error is not None:
                    task.on_error(task, error)

    # -- what operators see --------------------------------------------------------------------
    def explain(self, plan, every: int) -> str:
        """Which group a periodic query (planned, not registered) would join and why, or why it
        runs alone."""
        if every < 1:
            return "runs alone: SLIDE 0 re-executes continually, on its own"
        if isinstance(getattr(getattr(plan, "bound", None), "hop", None), SlicedHop):
            peers = self.slices.peers(plan)
            how = ("each execution is one read-only transaction for the members due at once: every sub-window "
                   "cut once at all their window edges, every due window's slices combined at once")
            if not peers:
                return (f"{self.mode.value}: runs alone for now: no registered window of the same query shares its "
                        f"executions (with one: {how}); alone, windows that cut sub-windows share the slice partials "
                        f"kept per sub-window")
            return (f"{self.mode.value}: joins the slices group of {len(peers)} window(s) of the same query on "
                    f"{plan.stream.name!r} ({', '.join(peers[:5])}{', ...' if len(peers) > 5 else ''}): {how}")
        m = describe(plan, "?", every)
        if self.groups.outputs.get(m.key) is not None:
            lead = self.groups.outputs[m.key].leader
            same = "an exact duplicate of" if lead.period == m.period else "by CS8, reuses the output of"
            return f"{self.mode.value}: {same} {lead.id!r} ({lead.period} slides)"
        key = group_key(m)
        if key is None:
            return f"{self.mode.value}: {reason(m, key)}"
        gid = key
        peers = [o.leader.id for o in self.groups.groups.get(gid, [])]
        if not peers:
            return f"{self.mode.value}: runs alone for now: no registered query shares with it ({reason(m, key)})"
        return (f"{self.mode.value}: joins group {group_label(gid)} with {len(peers)} output(s) "
                f"({', '.join(peers[:5])}{', ...' if len(peers) > 5 else ''}): {reason(m, key)}"
                + ("" if m.synopsis == Synopsis.JOIN else self._cover_text(plan, gid))
                + ("; the group's choice of periods (8.4.4) is being computed: its sub-groups run at their own "
                   "SLIDEs until it is made" if self.local.choosing(gid) else ""))

    def _cover_text(self, plan, gid) -> str:
        """The predicate cover (covers.py) a query joining group `gid` would be answered from
        whenever it runs with its pieces (in the same joint execution), if any."""
        named: dict = {}
        for o in self.groups.groups.get(gid, []):
            p = self.tasks[o.leader.id].plan
            named.setdefault(read_key(p), (o.leader.id, p))
        mine = read_key(plan)
        if mine in named:
            return ""
        names = [n for n, _ in named.values()] + ["this query"]
        readers = [p for _, p in named.values()] + [plan]
        for d in derive([p.bound for p in readers], [combines(p.bound) for p in readers]):
            if d.target == len(readers) - 1:
                return f"; {d.describe(names)}: scans no rows of its own when it runs with them"
        return ""

    def stats(self) -> dict:
        sizes = [sum(len(o.members) for o in outs) for outs in self.groups.groups.values()]
        return {
            "mode": self.mode.value,
            "groups": sum(1 for n in sizes if n > 1),
            "members_per_group": sorted((n for n in sizes if n > 1), reverse=True),
            "tasks": len(self.local.tasks),
            "executions": self.executions,
            "answers": self.answers,
            "executions_saved": self.answers - self.executions,
            "early_runs": self.early_runs,
            "late_runs": self.late_runs,
            "aborts": sum(self.aborts_by_group.values()),
            "fallbacks": sum(self.fallbacks_by_group.values()),
            "failures": self.failures,
            "cover_executions_saved": self.cover_executions_saved,
            "cover_reads_saved": self.cover_reads_saved,
            "join_groups": sum(1 for gid, outs in self.groups.groups.items()
                               if gid[1:2] == ("CS5",) and sum(len(o.members) for o in outs) > 1),
            "join_answers": self.join_answers,
            "contributions_reused": self.contributions_reused,
            "slice_groups": sum(1 for g in self.slices.groups.values() if len(g) > 1),
            "slice_executions": self.slice_executions,
            "slice_answers": self.slice_answers,
            "fallen_back": len(self.fallen_back),
            # groups running conservatively while the hybrid's choice of their periods is made (8.4.4)
            "choices_pending": self.local.pending_choices(),
        }

    def _check(self) -> None:
        self.groups._check()
        self.local._check()
        assert set(self.tasks) == set(self.groups.members), "a task per grouped member"
        assert set(self.busy) <= set(self.tasks) | set(self.slices.key_of)
        assert not set(self.tasks) & set(self.slices.key_of), "a member is in the rules' groups or a slices group"
        self.slices._check()
        assert all(not txn.done for txn in self.busy.values()), "busy members wait for a live execution"
        assert set(self.join_synopses) <= set(self.groups.groups), "a join synopsis per live join group"
        assert set(self._eager) <= set(self.tasks)
        assert set(self._read_keys) <= set(self.tasks), "read keys of registered members only"
        assert len(self._plans) <= KEPT_PLANS
        for (gid, leaders), (plan, _) in self._plans.items():
            assert all(m in self.tasks for m in leaders), "plans kept for registered members only (cleared as they go)"
            plan._check()
        assert not set(self.fallen_back) & (set(self.tasks) | set(self.slices.key_of)), "a fallen-back member runs alone"
        for synopsis in self.join_synopses.values():
            synopsis._check()
        self.windows._check()


def join_plan(task: Task) -> JoinQueryPlan:
    """A join member's plan (its Member's synopsis is JOIN)."""
    plan = task.plan
    assert isinstance(plan, JoinQueryPlan), task.id
    return plan


def group_label(gid) -> str:
    if gid is None:
        return ""
    parts = [str(p) for p in (gid if isinstance(gid, tuple) else (gid,)) if p is not None]
    return "/".join(parts)


__all__ = ["SharedAnswer", "SharedPlan", "SharedTasks", "Synopsis"]
