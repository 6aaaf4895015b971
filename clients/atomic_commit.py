"""One batch committed on every partition of a partitioned stream so that it becomes visible from
the same slide on each (docs/partitions.md, "What is atomic").

Partitions slide independently at aligned boundaries, so a commit that reaches partition A before
boundary k and partition B after it would land in different sub-windows. The committer therefore
names the sub-window: it reads each partition's open sub-window and targets, on a processing-time
clock, the one after the newest (`at_slide` s = max + 1 + lead: a whole sub-window of time for
the commit to reach every partition before s opens), on a manual clock the newest (s = max +
lead: slides come only from Slide calls, and a partition that a broadcast slide has not reached
yet holds the batch until it does); then it commits on every partition with it. A partition whose open
sub-window is before s holds the commit pending and publishes it with the slide that opens s; one
at s publishes it now; one past s refuses it with nothing committed. After a refusal, while no
partition has published the batch, every partition is re-targeted to a later s'; once one has,
the others are re-targeted to its slide, and when that is past on some partition too, the rest
is published at once and counted as a split batch (`split`): the batch is still exactly once on
every partition, but some slides see it on some partitions only.

Streams that do not slide by time or by Slide calls (event time: the common slide and the
event-time hint keep it atomic there; rows) and commits that slide (`slide_per_batch`) commit on
every partition at once, as before.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from windowstore.store.partitions import partition_name

from .client import CommitResult
from .errors import FailedPrecondition
from .partitioned import ClusterClient, Layout

MAX_ROUNDS = 4


@dataclass(frozen=True)
class Refused:
    """A partition's refusal of the target: its open sub-window is past it (nothing committed)."""

    message: str


def _refused(e: object) -> bool:
    """A partition refused the target because its open sub-window is past it (nothing committed)."""
    return isinstance(e, FailedPrecondition) and "open_slide=" in str(e)


def targets_slides(spec: dict) -> bool:
    """Whether a partition's slides are numbered by its clock or by Slide calls (not by event time
    or rows): commits can then name their sub-window."""
    clock = str(spec.get("clock", "")).removeprefix("CLOCK_").lower()
    return clock in ("processing", "manual") and not spec.get("subwindow_rows")


def open_slides(cc: ClusterClient, lay: Layout) -> dict[int, int]:
    """Each partition's open sub-window (its newest slide + 1)."""
    return cc.on_partitions(lay, lambda p, n: int(n.describe_stream(partition_name(lay.name, p))["latest_slide"]) + 1)


def commit_on_partitions(cc: ClusterClient, lay: Layout, writer: str, batch_id: int,
                         attempts: dict[int, dict[str, int]], *, slide: bool = False,
                         event_time_ms: int | None = None, lead: int = 0,
                         after_each: Callable[[int], None] | None = None) -> dict:
    """Commit batch (writer, batch_id) on every partition of `lay` with its attempts
    ({partition: {attempt: rows}}). Returns {"results": {partition: CommitResult} (the last call's
    on each), "at_slide": the slide the batch is visible from on every partition (None: not
    targeted, or split), "split": bool, "rounds": commit rounds}.

    `lead` targets that many sub-windows further ahead (more time for the commit to reach every
    partition before the target opens). `after_each(p)`, when given, is called after partition p's
    commit and the partitions are committed one after the other (tests delay the committer there);
    otherwise in parallel."""
    stream = lay.name

    def commit(p, n, at_slide=None, split=False) -> CommitResult:
        return n.commit_batch(partition_name(stream, p), writer, batch_id, attempts.get(p, {}), slide=slide,
                              event_time_ms=event_time_ms, at_slide=at_slide, split=split)

    def each(fn, parts, refusals: bool = True) -> dict[int, CommitResult | Refused]:
        """fn on each partition (in parallel, or in order with after_each): {partition: its
        CommitResult or the refusal of its target}; any other error is raised, naming the partition."""
        def call(p, n):
            try:
                return fn(p, n)
            except FailedPrecondition as e:
                if refusals and _refused(e):
                    return Refused(str(e))
                raise
        if after_each is None:
            return cc.on_partitions(lay, call, parts)
        out = {}
        for p in parts:
            out.update(cc.on_partitions(lay, call, [p]))
            after_each(p)
        return out

    spec = cc.on_partitions(lay, lambda p, n: n.describe_stream(partition_name(stream, p))["spec"], [0])[0]
    if slide or not targets_slides(spec):
        done = each(lambda p, n: commit(p, n), range(lay.partitions), refusals=False)
        return {"results": done, "at_slide": None, "split": False, "rounds": 1}

    parts = list(range(lay.partitions))
    results: dict[int, CommitResult] = {}
    applied: dict[int, int] = {}   # partition -> the slide its batch is visible from (-1: not known)
    pending: dict[int, int] = {}   # partition -> the slide it holds the batch for
    ahead = 1 if str(spec.get("clock", "")).removeprefix("CLOCK_").lower() == "processing" else 0
    target = max(open_slides(cc, lay).values()) + ahead + lead
    rounds = 0
    while rounds < MAX_ROUNDS:
        rounds += 1
        out = each(lambda p, n: commit(p, n, target), [p for p in parts if p not in applied])
        refused = []
        for p, r in out.items():
            if not isinstance(r, CommitResult):
                refused.append(p)
                pending.pop(p, None)
                continue
            results[p] = r
            if r.pending:
                pending[p] = r.visible_from_slide
            else:
                applied[p] = r.visible_from_slide
                pending.pop(p, None)
        seen = set(applied.values())
        if not refused and (not applied or seen == {target}) and all(v == target for v in pending.values()):
            return {"results": results, "at_slide": target, "split": False, "rounds": rounds}
        if applied:
            if len(seen) == 1 and -1 not in seen and seen != {target} and rounds < MAX_ROUNDS:
                target = seen.pop()  # the rest into the slide the batch is visible from already
                continue
            break
        target = max(open_slides(cc, lay).values()) + ahead + lead  # nothing published: all to a later one
    # split: the partitions that do not hold it for the slide it is visible from publish it now
    keep = set(applied.values())
    rest = [p for p in parts if p not in applied and not (len(keep) == 1 and pending.get(p) in keep)]
    for p, r in each(lambda p, n: commit(p, n, None, True), rest, refusals=False).items():
        assert isinstance(r, CommitResult), "errors are raised"
        results[p] = r
    return {"results": results, "at_slide": None, "split": True, "rounds": rounds}
