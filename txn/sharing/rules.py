"""The sharing rules of thesis 8.3 that apply to the store's periodic queries, as pure functions
of a Member (what the rules need to know of a registered query):

- exact duplicates: the same normalised query (same text but for spelling and positions) and the
  same SLIDE are one execution with several subscribers;
- CS8: the same query but for a longer SLIDE reuses the shorter one's output (answered by the
  execution that runs when its own SLIDE is due: schedulers.LocalScheduler.pick_all);
- SS1/CS1: queries answered by a probe of the window-level running or interval synopses share
  that synopsis at any length, and run together when their length is equal (and their GROUP BY);
- CS2: queries answered by a scan of the per-sub-window (basic interval) synopses, or of the
  sub-windows' rows, run together in one youngest-to-oldest scan that answers the shorter windows
  on the way: at most b intervals read for the whole group;
- SS2/CS3: AVG(x) is SUM(x) / COUNT(x): the values a member needs per interval (`needs`) say
  which aggregates a joint execution computes once for several members.

- SS4/CS6/CS7 (8.3.3): predicate covers. Queries the same but for a WHERE over one column are in
  the CS2 group of the sub-windows' rows anyway; within its joint execution (runtime.SharedPlan)
  covers.py answers a query whose rows are a disjoint cover of others' (any cover for MIN/MAX, a
  supercover minus a cover for COUNT/SUM/AVG) from their contributions, with no scan of its own.

- SS3/CS5 (8.3.2): periodic joins of the same streams and condition (ON, WHERE, WITHIN) share one
  join synopsis at the group's longest RANGE per source and run together, whatever their RANGEs
  (store/join/shared.py: every result row is labelled by the sub-windows it was joined from, the
  basic-interval form, so CS5 applies rather than CS4's equal lengths).

Each rule that forms groups is a class (Rule): which members it takes, their group key, and why
in words."""
from __future__ import annotations

from abc import ABC, abstractmethod

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any, Hashable

from windowstore.store.memo import contribution_key


class Synopsis(enum.StrEnum):
    """What a query's execution reads (the store's access paths, thesis 2.3.4's synopses)."""

    PROBE = "probe"        # running (COUNT/SUM) or interval (MIN/MAX) window-level synopses
    BASIC = "basic"        # per-sub-window synopses (basic intervals)
    ROWS = "rows"          # the sub-windows' rows (basic intervals of raw data, with filters)
    JOIN = "join"          # the kept result of a join, labelled by sub-windows (basic-interval join synopsis)
    ALONE = "alone"        # not shared (AS OF, and what the rules do not cover)


@dataclass(frozen=True)
class Member:
    """A registered periodic query as the rules see it: `key` is its normalised text without its
    SLIDE (equal keys: the same query), `length` its window in sub-windows (intervals), `period`
    its SLIDE in synopsis updates, `shape` what must also be equal to share a probe (GROUP BY),
    `needs` the per-interval values it reads (AVG(x) needs SUM(x) and COUNT(x)), `reads` what its
    scan reads of a sub-window (read_key: equal for the same query but for RANGE, SLIDE, LIMIT; None:
    the group's one synopsis, as in the thesis's examples) and `bound` its bound query (covers.py
    finds predicate covers among the readers of a joint execution from it)."""

    id: str
    stream: str
    key: Hashable
    synopsis: Synopsis
    length: int
    period: int
    shape: Hashable = None
    needs: frozenset = frozenset()
    alone_reason: str = ""
    combines: bool = False  # its sub-windows' contributions combine into one (a scan answers it on the way)
    inverts: bool = False   # ... and each has an inverse (its combined windows may move: combined.py)
    reads: Hashable = None
    bound: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if self.length < 1 or self.period < 1:
            raise ValueError(f"a periodic query needs a length and a SLIDE of at least 1 ({self.length}, {self.period})")


class Rule(ABC):
    """A rule forming groups G_i: `takes` the members it applies to, `key` their group (the rule's
    name second), `why` a member joined it."""

    name = ""

    @abstractmethod
    def takes(self, m: Member) -> bool: ...

    @abstractmethod
    def key(self, m: Member) -> tuple: ...

    @abstractmethod
    def why(self, m: Member, key: tuple) -> str: ...


class ProbeRule(Rule):
    """SS1/CS1: a probe of the window-level running or interval synopses; together at equal length."""

    name = "CS1"

    def takes(self, m: Member) -> bool:
        return m.synopsis == Synopsis.PROBE

    def key(self, m: Member) -> tuple:
        return (m.stream, self.name, m.length, m.shape)

    def why(self, m: Member, key: tuple) -> str:
        return (f"SS1/CS1: probes the window-level synopses of {m.stream!r}; runs with the queries of the same "
                f"length ({m.length} sub-windows)" + (f" and GROUP BY {m.shape}" if m.shape else ""))


class ScanRule(Rule):
    """CS2: one youngest-to-oldest scan of the basic intervals answers every length on the way."""

    name = "CS2"

    def takes(self, m: Member) -> bool:
        return m.synopsis in (Synopsis.BASIC, Synopsis.ROWS)

    def key(self, m: Member) -> tuple:
        return (m.stream, self.name, m.synopsis.value)

    def why(self, m: Member, key: tuple) -> str:
        what = "per-sub-window synopses" if key[2] == Synopsis.BASIC.value else "sub-windows' rows"
        return (f"CS2: scans the {what} of {m.stream!r}; one youngest-to-oldest scan answers every query of the "
                f"group, the shorter windows on the way")


class JoinRule(Rule):
    """SS3/CS5: joins of one condition share one join synopsis and run together at any RANGEs."""

    name = "CS5"

    def takes(self, m: Member) -> bool:
        return m.synopsis == Synopsis.JOIN

    def key(self, m: Member) -> tuple:
        return (m.stream, self.name, m.shape)

    def why(self, m: Member, key: tuple) -> str:
        return (f"SS3/CS5: joins {m.stream!r} on the same condition (ON, WHERE, WITHIN) as the group; one join "
                f"synopsis kept at the group's longest RANGE per source (result rows labelled by the sub-windows "
                f"they were joined from) answers every member over its own RANGEs, in one execution")


RULES: tuple[Rule, ...] = (ProbeRule(), ScanRule(), JoinRule())
_BY_NAME = {r.name: r for r in RULES}


def group_key(m: Member) -> tuple | None:
    """The group G_i a query (its output) belongs to, or None when it runs alone."""
    for rule in RULES:
        if rule.takes(m):
            return rule.key(m)
    return None


def rule_of(key: tuple | None) -> str:
    """The rule a group was formed by (explain)."""
    if key is None:
        return "alone"
    return key[1]


def reason(m: Member, key: tuple | None) -> str:
    """Why a query joined its group, or why it runs alone, in words (explain)."""
    if key is None:
        return m.alone_reason or "runs alone: no sharing rule applies to it"
    return _BY_NAME[key[1]].why(m, key)


def cs3(members) -> list[str]:
    """SS2/CS3: the columns whose AVG a joint execution of `members` derives from the SUM and
    COUNT it computes anyway for other members."""
    needs = set()
    for m in members:
        needs |= {n for n in m.needs if not n.startswith("avg(")}
    return sorted(n[4:-1] for m in members for n in m.needs
                  if n.startswith("avg(") and f"sum({n[4:-1]})" in needs and f"count({n[4:-1]})" in needs)


_NEEDS = {"avg": ("sum", "count")}


def needs_of(aggs) -> frozenset:
    """Per-interval values a query's aggregates read: AVG(x) needs SUM(x) and COUNT(x) (SS2)."""
    out = set()
    for func, column in aggs:
        out.add(f"{func}({column or '*'})")
        for base in _NEEDS.get(func, ()):
            out.add(f"{base}({column or '*'})")
    return frozenset(out)


def describe(plan, query_id: str, every: int) -> Member:
    """The Member of a planned periodic query (a store Plan or a join plan)."""
    from ..joins import JoinQueryPlan  # (the store's types stay out of the pure rules above)
    from windowstore.store.planner.merge import combines, inverts
    if isinstance(plan, JoinQueryPlan):
        return describe_join(plan, query_id, every)
    query = plan.query
    key: tuple = (plan.stream.name, dataclasses.replace(query, slide=None))
    if getattr(plan, "keeps_sketches", False):  # its answers carry sketches: not one output with those without
        key += ("sketches",)
    aggs = [(a.fn.name, a.column) for a in plan.aggs]
    synopsis = {"probe": Synopsis.PROBE, "synopsis": Synopsis.BASIC, "window": Synopsis.ROWS}.get(plan.access)
    if plan.bound.hop is not None:  # answered per window: its finish is not the shared scan's; the
        # window's class says what it reads (hop.py, slicing.py, window_shapes.py, cumulative.py)
        return Member(query_id, plan.stream.name, key, Synopsis.ALONE, max(plan.n_q, 1), max(every, 1),
                      alone_reason=plan.bound.hop.alone_reason())
    if plan.bound.temporal is not None:  # coalesced intervals: its reads and finish are temporal.py's
        return Member(query_id, plan.stream.name, key, Synopsis.ALONE, max(plan.n_q, 1), max(every, 1),
                      alone_reason="runs alone: temporal coalescing queries are not shared yet")
    if query.as_of_slide is not None or synopsis is None:
        return Member(query_id, plan.stream.name, key, Synopsis.ALONE, max(plan.n_q, 1), max(every, 1),
                      alone_reason="runs alone: a pinned read (AS OF SLIDE)")
    shape = tuple(plan.bound.group_keys) if synopsis == Synopsis.PROBE else None
    return Member(query_id, plan.stream.name, key, synopsis, max(plan.n_q, 1), max(every, 1), shape or None,
                  needs_of(aggs), combines=combines(plan.bound), inverts=inverts(plan.bound), reads=(plan.stream.schema, *read_key(plan)),
                  bound=plan.bound)


def read_key(plan) -> tuple:
    """What a plan's read of one sub-window depends on (plans with equal keys share one reader in a
    joint execution: CS2's same synopsis): the sub-windows' memo key, store/memo.py, so that a
    reader's kept contributions are found by its next execution and by the query run alone."""
    return contribution_key(plan)


def describe_join(plan, query_id: str, every: int) -> Member:
    """The Member of a periodic join: its key the query but for its first source's SLIDE (exact
    duplicates, CS8),
    its shape the condition (store/join/shared.py: condition_key), its length the longest RANGE
    of its sources. The local schedulers count a member's period in slides of one stream (its
    first source's), so a join due on another stream's slides runs alone, as do timing joins
    (PROB(): their access paths are chosen per plan)."""
    from windowstore.store.join import condition_key
    query = plan.query
    name = ",".join(plan.names)
    first = dataclasses.replace(query.sources[0], slide=None)  # the period; other sources' SLIDEs stay in the key
    key = ("join", tuple(plan.names), dataclasses.replace(query, sources=(first, *query.sources[1:])))
    length = max(max(plan.n_q.values()), 1)
    if plan.join.bound.timings:
        return Member(query_id, name, key, Synopsis.ALONE, length, max(every, 1),
                      alone_reason="runs alone: joins with timing conditions (PROB) are not shared")
    if set(plan.every) != {plan.names[0]}:
        return Member(query_id, name, key, Synopsis.ALONE, length, max(every, 1),
                      alone_reason=f"runs alone: a shared join is due on the slides of its first stream "
                                   f"({plan.names[0]!r}) only; this one has SLIDE on {sorted(plan.every)}")
    return Member(query_id, name, key, Synopsis.JOIN, length, max(every, 1), condition_key(query))
