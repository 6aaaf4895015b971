"""The registered periodic queries of the store as the sharing rules arrange them: outputs (one
execution per distinct normalised query, subscribed by exact duplicates and, by CS8, by the same
query with a longer SLIDE), groups G_i of outputs that can execute together (rules.group_key), and
sub-groups G_ij of a group by equal SLIDE. Stateful, updated as queries come and go; `_check()`
states its invariants."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable

from .rules import Member, cs3, group_key, reason, rule_of


@dataclass(eq=False)
class Output:
    """One execution's worth of a query: its subscribers are the members with its key; it runs at
    the shortest of their periods (the others reuse it, CS8)."""

    key: Hashable
    members: dict[str, Member] = field(default_factory=dict)  # in registration order; the first leads

    @property
    def leader(self) -> Member:
        return next(iter(self.members.values()))

    @property
    def period(self) -> int:
        return min(m.period for m in self.members.values())

    @property
    def length(self) -> int:
        return self.leader.length

    @property
    def group(self) -> tuple | None:
        return group_key(self.leader)


class Groups:
    """Members, their outputs, the groups G_i (key: rules.group_key; None-keyed outputs run alone,
    each its own group) and their sub-groups by period."""

    def __init__(self):
        self.members: dict[str, Member] = {}
        self.outputs: dict[Hashable, Output] = {}
        self.groups: dict[tuple, list[Output]] = {}  # group id -> outputs (a lone output: its own id)

    # -- changes -------------------------------------------------------------------------------
    def add(self, m: Member) -> Output:
        if m.id in self.members:
            raise ValueError(f"periodic query {m.id!r} is already grouped")
        self.members[m.id] = m
        out = self.outputs.get(m.key)
        if out is None:
            out = self.outputs[m.key] = Output(m.key)
            out.members[m.id] = m
            self.groups.setdefault(self._gid(out), []).append(out)
        else:
            if m.length != out.length or m.synopsis != out.leader.synopsis:
                raise ValueError(f"{m.id!r}: same query key as {out.leader.id!r} but a different length or path")
            out.members[m.id] = m
        return out

    def remove(self, member_id: str) -> Member:
        m = self.members.pop(member_id)
        out = self.outputs[m.key]
        gid = self._gid(out)
        del out.members[member_id]
        if not out.members:
            del self.outputs[m.key]
            group = self.groups[gid]
            group.remove(out)
            if not group:
                del self.groups[gid]
        return m

    @staticmethod
    def _gid(out: Output) -> tuple:
        g = out.group
        return g if g is not None else ("alone", out.key)

    # -- reading -------------------------------------------------------------------------------
    def group_id(self, member_id: str) -> tuple:
        return self._gid(self.outputs[self.members[member_id].key])

    def output_of(self, member_id: str) -> Output:
        return self.outputs[self.members[member_id].key]

    def subgroups(self, gid: tuple) -> dict[int, list[Output]]:
        """G_ij: the group's outputs by equal period, shortest first."""
        out: dict[int, list[Output]] = {}
        for o in self.groups[gid]:
            out.setdefault(o.period, []).append(o)
        return dict(sorted(out.items()))

    def explain(self, member_id: str) -> dict:
        """Which group a query joined and why, or why it runs alone."""
        m = self.members[member_id]
        out = self.outputs[m.key]
        gid = self._gid(out)
        group = self.groups[gid]
        lead = out.leader
        if lead.id != m.id and lead.period == m.period:
            how = f"exact duplicate of {lead.id!r}: one execution, both subscribed"
        elif out.period < m.period:
            short = min(out.members.values(), key=lambda x: x.period)
            how = (f"CS8: the same query as {short.id!r} with a longer SLIDE: reuses its output (computed every "
                   f"{out.period} slides) when its own SLIDE is due")
        else:
            how = ""
        members = [x for o in group for x in o.members.values()]
        avg = cs3([o.leader for o in group])
        return {
            "group": None if out.group is None else "/".join(str(p) for p in gid if p is not None),
            "rule": rule_of(out.group),
            "why": reason(m, out.group),
            "output": how,
            "members": len(members),
            "outputs": len(group),
            "subgroups": {p: len(v) for p, v in self.subgroups(gid).items()},
            "cs3": avg,
        }

    def _check(self) -> None:
        seen = set()
        for key, out in self.outputs.items():
            assert out.members and out.key == key, key
            assert all(m.key == key and self.members[m.id] is m for m in out.members.values()), key
            assert len({(m.length, m.synopsis) for m in out.members.values()}) == 1, key
            seen |= set(out.members)
        assert seen == set(self.members), "every member has exactly one output"
        in_groups = [o for g in self.groups.values() for o in g]
        assert len(in_groups) == len(self.outputs) and {id(o) for o in in_groups} == {id(o) for o in self.outputs.values()}
        for gid, g in self.groups.items():
            assert g and all(self._gid(o) == gid for o in g), gid
            if gid[1] == "CS1":
                assert len({o.length for o in g}) == 1, "CS1: equal lengths"
