"""A joint execution of periodic joins of one group (SS3/CS5, thesis 8.3.2) as one read-only
transaction: a JoinQueryPlan to the scheduler (it reads every joined stream's youngest
sub-windows, once for the group, and evaluates at commit, over exactly what it read), whose
evaluation brings the group's one join synopsis (store/join/shared.py) to what was read and
answers each member over its own RANGEs. The synopsis is kept between executions by
runtime.SharedTasks, at the longest RANGE per source of the group's members, so each execution
joins only the sub-windows new since the last."""
from __future__ import annotations

from typing import Mapping

from windowstore.store import SubWindow
from windowstore.store.join import SharedJoin

from ..joins import JoinQueryPlan
from .answer import SharedAnswer


class SharedJoinPlan(JoinQueryPlan):
    """The plans (JoinQueryPlan, one condition) of a joint execution. `lengths`: per source (FROM
    order) the sub-windows the synopsis keeps (the group's longest RANGE of that source); the
    transaction reads, per stream, the most any of its sources keeps. Due on the first stream's
    slides (rules.describe_join), every `every` of them."""

    def __init__(self, plans: list[JoinQueryPlan], synopsis: SharedJoin, lengths: list[int], every: int):
        lead = plans[0]
        self.plans = plans
        self.synopsis = synopsis
        self.lengths = list(lengths)
        self.join = synopsis.plan
        self.query = ("shared", *(p.query for p in plans))  # type: ignore[assignment]  # the cost model's key
        self.labels, self.types = lead.labels, lead.types
        self.names, self.streams, self.stream = lead.names, lead.streams, lead.stream
        self.n_q = {n: max(k for s, k in zip(lead.join.sources, self.lengths) if s.stream == n) for n in self.names}
        self.every = {lead.names[0]: every}
        self.eager = False  # evaluated at commit: one refresh for the group

    def inputs(self, reads: Mapping[str, Mapping[int, SubWindow]]) -> list[list[SubWindow]]:
        out = []
        for src, n in zip(self.join.sources, self.lengths):
            got = reads.get(src.stream, {})
            out.append([got[v] for v in sorted(got, reverse=True)[:n]])
        return out

    def evaluate(self, reads: Mapping[str, Mapping[int, SubWindow]]) -> SharedAnswer:  # type: ignore[override]  # one answer per member
        return SharedAnswer(self.synopsis.answers(self.inputs(reads), [p.join for p in self.plans]))


def member_reads(plan: JoinQueryPlan, reads: Mapping[str, Mapping[int, SubWindow]]) -> dict[str, dict[int, SubWindow]]:
    """What a member's own execution would have read of a joint execution's reads: per stream its
    youngest n_q (its provenance)."""
    out = {}
    for name, got in reads.items():
        if name in plan.n_q:
            keep = sorted(got, reverse=True)[: plan.n_q[name]]
            out[name] = {v: got[v] for v in keep}
    return out
