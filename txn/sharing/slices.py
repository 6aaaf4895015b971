"""Shared execution of windows that cut sub-windows (issue 31; store/slicing_shared.py) inside the
transaction scheduler: registered periodic sliced queries of one stream, inner query and access
path form a slices group; the members due at once (a slide completed one of each one's windows,
slicing.slides_until_due) run as one read-only transaction under the stream's policy, like any
periodic execution (LWS/TTU: it reads the longest of their windows' sub-windows once, may be
aborted by a slide and restarts), and its answer is split per member. It owns the slices groups;
runtime.SharedTasks owns the tasks, when they run and what they are told."""
from __future__ import annotations

from typing import TYPE_CHECKING, Hashable

from windowstore.store.slicing_shared import SharedSlices

from .answer import SharedAnswer

if TYPE_CHECKING:
    from ..schedule.edf import Task


def slices_key(plan) -> Hashable:
    """The slices group of a sliced plan: its stream, and its inner query and access path (the
    plans whose slices are interchangeable, slicing.SliceReader.key)."""
    return (plan.stream.name, plan.slices.key)


class _Joint:
    """A slices group's registered plans and, once an execution asked, their joint execution."""

    __slots__ = ("plans", "shared")

    def __init__(self, plans: list):
        self.plans = plans
        self.shared: SharedSlices | None = None


def _group_execution(plans: list, joint: _Joint | None) -> tuple[SharedSlices, list[int]]:
    """The group's joint execution over all its registered members (`joint`, SlicesGroups'; made
    at the first execution after a change of members) holding every plan of `plans`, and their
    places in it: every execution of the group cuts the sub-windows at all members' edges, so a
    sealed sub-window is cut once whichever members are due, and the run readers are extended
    slide after slide (slicing_shared._Joined). Without it (or with plans it does not hold: a
    group changed since), one of `plans` alone."""
    if joint is not None:
        where = {id(p): m for m, p in enumerate(joint.plans)}
        members = [where.get(id(p)) for p in plans]
        if None not in members:
            if joint.shared is None:
                joint.shared = SharedSlices(joint.plans)
            return joint.shared, members  # type: ignore[return-value]  # no None: checked
    return SharedSlices(plans), list(range(len(plans)))


class SharedSlicedPlan:
    """The plans of due sliced members of one slices group as one read-only transaction: it reads
    the youngest n_q sub-windows (the longest of theirs), each cut once at all the group's window
    edges, and the finish answers each due member's newest window from them (SharedSlices.answer:
    every window's slices combined at once, the answers made when delivered)."""

    memo_key = None  # its reads are kept with the sub-windows (slicing.kept_for), not in their memos
    as_of = None

    def __init__(self, plans: list, joint: _Joint | None = None):
        self.plans = plans
        self.shared, self.members = _group_execution(plans, joint)
        self.stream = plans[0].stream
        self.strings = self.stream.strings
        self.n_q = max(p.n_q for p in plans)
        self.access = plans[0].access
        self.supports_remove = all(p.supports_remove for p in plans)
        self.query = ("shared slices", *(p.query for p in plans))  # the cost model's key
        self.aggs = [a for p in plans for a in p.aggs]

    def read(self, sub) -> tuple:
        return self.shared.read(sub)

    def finish(self, partial) -> SharedAnswer:
        reads = list(partial.contributions.values())
        ks, has = self.shared.newest_windows(reads)
        members = self.members
        due = [(m, k if ok else None) for m, k, ok in zip(members, ks[members].tolist(), has[members].tolist())]
        return SharedAnswer(self.shared.answer(reads, due))

    def probes_now(self) -> bool:
        return False


class SlicesGroups:
    """The registered sliced members by slices group (slices_key), in registration order."""

    def __init__(self):
        self.groups: dict[Hashable, dict[str, "Task"]] = {}  # key -> member id -> its task
        self.key_of: dict[str, Hashable] = {}
        self.joints: dict[Hashable, _Joint] = {}  # key -> its members' joint execution (_group_execution)

    def add(self, task: "Task") -> None:
        key = slices_key(task.plan)
        self.groups.setdefault(key, {})[task.id] = task
        self.key_of[task.id] = key
        self._changed(key)

    def remove(self, task_id: str) -> "Task | None":
        key = self.key_of.pop(task_id, None)
        if key is None:
            return None
        group = self.groups[key]
        task = group.pop(task_id)
        if not group:
            del self.groups[key]
        self._changed(key)
        return task

    def _changed(self, key: Hashable) -> None:
        """The group's members changed: its joint execution is made again at its next execution."""
        group = self.groups.get(key)
        if group:
            self.joints[key] = _Joint([t.plan for t in group.values()])
        else:
            self.joints.pop(key, None)

    def task(self, task_id: str) -> "Task | None":
        key = self.key_of.get(task_id)
        return None if key is None else self.groups[key][task_id]

    def peers(self, plan) -> list[str]:
        """The registered members a sliced plan would share its executions with."""
        return list(self.groups.get(slices_key(plan), {}))

    def _check(self) -> None:
        ids = [mid for g in self.groups.values() for mid in g]
        assert len(ids) == len(set(ids)) and set(ids) == set(self.key_of), "each member in one slices group"
        for key, g in self.groups.items():
            assert g and all(self.key_of[mid] == key for mid in g), key
        assert set(self.joints) == set(self.groups), "a joint execution per slices group"
