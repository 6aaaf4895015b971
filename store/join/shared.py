"""One join synopsis shared by periodic joins over the same sources and condition (thesis 8.3.2,
SS3 and CS5).

The thesis's generalized BIJ synopsis labels each interval of join results by when the results
expire, and keeps g extra values in its oldest intervals so that a (n1 s, n2 s)-join of other
window lengths than the synopsis's can be answered by leaving out the results flagged as coming
from the oldest part of one window. The store's join state already labels every result row with
the combination of sub-windows it was joined from (plan.py: a (version, row) tag per source), which
is finer than an expiration time: the rows of a (n1, n2)-join are exactly those whose version of
source 1 is among its n1 youngest sub-windows read and whose version of source 2 is among its n2
youngest, for any n1, n2 up to the synopsis's lengths (the join of a subset of sub-windows is the
kept rows that use only that subset, since every condition reads one combination's rows). So one
kept result at the group's longest RANGE per source answers every member (SS3 for any lengths,
not only b - g <= n <= b), and all the members run together in one execution (CS5): the new
sub-windows are joined once, and each member filters the tags and finishes its own select list
(finish.Finisher, as it would alone).

Answers equal the member's query run alone: the same joined rows, the same Finisher. The kept rows
count against the same row bound as a member alone; as the group keeps its longest windows, a
member whose own join fits may be refused with the group (errors.ResourceLimit)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..dictionary import StringDictionary
from ..join_binder import BoundJoin
from ..planner import Answer
from ..query import JoinQuery
from ..subwindow import SubWindow
from .plan import DEFAULT_MAX_ROWS, JoinPlan


def condition_key(q: JoinQuery) -> tuple:
    """What periodic joins must have in common to share one join synopsis: the streams joined in
    FROM order with their aliases (the names the conditions use), the ON conditions, WHERE and
    WITHIN; not RANGE, SLIDE, nor what they select, group, order or limit."""
    return (tuple((s.stream, s.alias, s.on) for s in q.sources), q.where, q.within)


class SharedJoin:
    """The kept join result of a group of periodic joins (one condition) and the answers of its
    members. `plan` keeps result rows (JoinPlan keep_rows=True) whatever the members' aggregates."""

    def __init__(self, bound: BoundJoin, strings: Sequence[StringDictionary], max_rows: int = DEFAULT_MAX_ROWS):
        self.plan = JoinPlan(bound, strings, max_rows=max_rows, cache=True, keep_rows=True)
        self.key = condition_key(bound.query)
        self.executions = 0   # joint executions answered
        self.answered = 0     # member answers given

    def answers(self, inputs: Sequence[Sequence[SubWindow]], members: Sequence[JoinPlan]) -> list[Answer]:
        """Each member's answer over its own youngest n_q sub-windows per source. `inputs`: per
        source (FROM order), the sub-windows read, youngest first, at least as many as any member
        reads of that source."""
        for m in members:
            if condition_key(m.query) != self.key:
                raise ValueError("a shared join synopsis answers only joins of its own condition")
        self.plan.refresh(inputs)
        ver, row = self.plan.kept()
        out = []
        for m in members:
            keep = None
            for p, src in enumerate(m.sources):
                subs = inputs[p]
                if src.n_q < len(subs):  # SS3: only the rows of its own (shorter) window of source p
                    hit = np.isin(ver[p], np.array([s.slide for s in subs[:src.n_q]], dtype=np.int64))
                    keep = hit if keep is None else (keep & hit)
            if keep is None:
                out.append(self.plan.answer_rows(m, ver, row))
            else:
                out.append(self.plan.answer_rows(m, ver[:, keep], row[:, keep]))
        self.executions += 1
        self.answered += len(members)
        return out

    def _check(self) -> None:
        assert self.answered >= self.executions >= 0
        assert not self.plan.synopsis, "a shared join synopsis keeps rows: its members' aggregates differ"
