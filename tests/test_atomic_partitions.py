"""A batch committed on every partition of a partitioned stream is visible from the same slide on
each (clients/atomic_commit.py), on 2 `windowstore serve` processes on 127.0.0.1: on a
processing-time clock with a committer delayed between the partitions until the first one's open
sub-window changed (a hook in the client), after a refusal (re-targeted), and past the point
where that is possible (a split batch: counted, still exactly once); on an event-time clock
through the common slide and the event-time hint."""
from __future__ import annotations

import pyarrow as pa
import pytest

from conftest import wait_for
from windowstore.clients import Client
from windowstore.clients import atomic_commit
from windowstore.clients.spark.partitioned import commit_all
from windowstore.store.partitions import partition_name, split_rows

pytestmark = pytest.mark.slow  # servers in subprocesses

SCHEMA = {"ts": "int64", "src": "string", "dst": "int64", "v": "int64"}
P = 2
CLUSTER_NODES = 2  # the `cluster` fixture (conftest.py): servers in its cluster


def node(ws: Client, stream: str, p: int):
    return ws.nodes[ws.cluster.owner(stream, p)]


def latest(ws: Client, stream: str, p: int) -> int:
    return int(node(ws, stream, p).describe_stream(partition_name(stream, p))["latest_slide"])


def stage_batch(ws: Client, stream: str, batch_id: int, ts0: int = 0) -> dict[int, int]:
    """Stage one batch's rows (both partitions get some) as attempt "t0"; {partition: rows}."""
    table = pa.table({"ts": list(range(ts0, ts0 + 40)), "src": [f"k{i % 8}" for i in range(40)],
                      "dst": [1] * 40, "v": [batch_id] * 40})
    parts = split_rows(table, ["src"], P)
    assert sorted(parts) == list(range(P)), "every partition gets rows"
    for p, t in parts.items():
        node(ws, stream, p).stage(partition_name(stream, p), t, "job", batch_id, "t0")
    return {p: t.num_rows for p, t in parts.items()}


def part_stats(ws: Client, stream: str, p: int) -> dict:
    (st,) = node(ws, stream, p).stats(partition_name(stream, p))["streams"]
    return st


def rows_at(ws: Client, stream: str, p: int, k: int, batch_id: int) -> int:
    """Rows of the batch (v = its id) in partition p's window as of slide k."""
    a = node(ws, stream, p).query(f"SELECT COUNT(*) FROM {partition_name(stream, p)} WHERE v = {batch_id}",
                                  as_of_slide=k)
    assert a.slide == k
    return a.rows[0][0]


def check_same_slides(ws: Client, stream: str, batch_id: int, counts: dict[int, int], first: int) -> int:
    """Wait until every partition sealed the batch in, then, for every slide from `first` on that
    all partitions have sealed, the batch is in every partition's window or in none; and in the
    end it is there exactly once. Returns the slide it is visible from."""
    wait_for(lambda: all(rows_at(ws, stream, p, latest(ws, stream, p), batch_id) == counts[p] for p in range(P)),
             "the batch on every partition")
    last = min(latest(ws, stream, p) for p in range(P))
    seen = {}
    for k in range(max(first, 0), last + 1):
        got = [rows_at(ws, stream, p, k, batch_id) for p in range(P)]
        assert all(g in (0, counts[p]) for p, g in enumerate(got)), (k, got)  # all of a partition's rows or none
        assert (got[0] > 0) == (got[1] > 0), f"slide {k}: the batch is on partitions {got} only"
        seen[k] = got[0] > 0
    assert seen[last], "the batch is in the window"
    return min(k for k, v in seen.items() if v)


def create(ws: Client, stream: str, **kw) -> None:
    # long windows of short sub-windows: every slide asked about below is still held
    ws.create_stream(stream, SCHEMA, subwindows=2000, subwindow_ms=kw.pop("subwindow_ms", 150), partitions=P,
                     partition_by=["src"], **kw)


def test_a_committer_delayed_past_a_boundary_publishes_the_batch_from_one_slide_on_every_partition(cluster):
    """The committer commits on partition 0, then waits until partition 0's open sub-window
    changed (it crossed a boundary) before committing on partition 1. Without a target slide the
    batch lands in sub-window k on partition 0 and k + 1 on partition 1."""
    with Client(cluster.addresses, timeout=60) as ws:
        create(ws, "a")
        wait_for(lambda: min(latest(ws, "a", p) for p in range(P)) >= 1, "the first slides")
        counts = stage_batch(ws, "a", 5)
        first = min(latest(ws, "a", p) for p in range(P))
        before = {}

        def delayed(p: int) -> None:
            if p == 0:
                before[0] = latest(ws, "a", 0)
                wait_for(lambda: latest(ws, "a", 0) > before[0], "partition 0 to slide")
        # lead=1: the target is two boundaries ahead, so a delay of one boundary (plus the polls and
        # calls of a loaded machine, which can exceed a 150-ms sub-window) still reaches partition 1
        # before the target opens there
        done = commit_all(cluster.addresses, "a", "job", 5, [(p, "t0", n) for p, n in counts.items()],
                          after_each=delayed, lead=1)
        assert before, "the committer was delayed"
        assert done["split"] is False and done["at_slide"] is not None
        assert done["by_partition"] == counts and not done["duplicate"]
        visible = check_same_slides(ws, "a", 5, counts, first)
        assert visible == done["at_slide"]
        # again (a retried commit): a duplicate on every partition, the rows once
        again = commit_all(cluster.addresses, "a", "job", 5, [(p, "t0", n) for p, n in counts.items()])
        assert again["duplicate"] and again["at_slide"] == visible
        assert all(rows_at(ws, "a", p, latest(ws, "a", p), 5) == counts[p] for p in range(P))
        assert all(part_stats(ws, "a", p)["split_batches"] == 0 for p in range(P))
        assert all(part_stats(ws, "a", p)["pending_commits"] == 0 for p in range(P))


def test_a_stale_target_is_refused_everywhere_and_retargeted(cluster, monkeypatch):
    """The committer's view of the open sub-windows is two boundaries old when it commits: every
    partition refuses the target with nothing committed, and the committer re-targets them all."""
    with Client(cluster.addresses, timeout=60) as ws:
        create(ws, "r")
        counts = stage_batch(ws, "r", 1)
        first = min(latest(ws, "r", p) for p in range(P))
        real, calls = atomic_commit.open_slides, []

        def stale(cc, lay):
            got = real(cc, lay)
            if not calls:  # the first look, then a delay until every partition slid twice past it
                wait_for(lambda: min(latest(ws, "r", p) for p in range(P)) >= max(got.values()) + 1,
                         "two boundaries")
            calls.append(got)
            return got
        monkeypatch.setattr(atomic_commit, "open_slides", stale)
        done = commit_all(cluster.addresses, "r", "job", 1, [(p, "t0", n) for p, n in counts.items()])
        assert len(calls) == 2 and done["split"] is False and done["at_slide"] > max(calls[0].values()) + 1
        assert check_same_slides(ws, "r", 1, counts, first) == done["at_slide"]


def test_a_committer_delayed_past_the_target_splits_the_batch_and_counts_it(cluster):
    """Delayed until partition 0 published the batch and partition 1 is past its slide: partition 1
    publishes it at once, counted as a split batch; exactly once on each partition all the same."""
    with Client(cluster.addresses, timeout=60) as ws:
        create(ws, "s")
        counts = stage_batch(ws, "s", 3)

        def delayed(p: int) -> None:
            if p == 0:
                s = latest(ws, "s", 0)
                wait_for(lambda: min(latest(ws, "s", q) for q in range(P)) >= s + 3, "three boundaries")
        done = commit_all(cluster.addresses, "s", "job", 3, [(p, "t0", n) for p, n in counts.items()],
                          after_each=delayed)
        assert done["split"] is True and done["at_slide"] is None
        wait_for(lambda: all(rows_at(ws, "s", p, latest(ws, "s", p), 3) == counts[p] for p in range(P)),
                 "the batch on every partition")
        assert [part_stats(ws, "s", p)["split_batches"] for p in range(P)] == [0, 1]
        again = commit_all(cluster.addresses, "s", "job", 3, [(p, "t0", n) for p, n in counts.items()])
        assert again["duplicate"]
        assert all(rows_at(ws, "s", p, latest(ws, "s", p), 3) == counts[p] for p in range(P))


def test_on_event_time_the_common_slide_and_the_hint_keep_a_delayed_batch_atomic(cluster):
    """Event time: while the commit has reached partition 0 only, partition 0 slides on the batch's
    event-time hint but partition 1 does not, so the scatter-gather query's common slide is one
    without the batch; every slide both partitions sealed has it on both or on neither."""
    with Client(cluster.addresses, timeout=60) as ws:
        create(ws, "e", subwindow_ms=100, clock="event", origin_ms=0)
        counts0 = stage_batch(ws, "e", 0, ts0=0)  # event times 0 .. 39: sub-window 0
        commit_all(cluster.addresses, "e", "job", 0, [(p, "t0", n) for p, n in counts0.items()], event_time_ms=150)
        assert [latest(ws, "e", p) for p in range(P)] == [0, 0]
        counts = stage_batch(ws, "e", 1, ts0=160)  # event times 160 .. 199: sub-window 1
        between = []

        def delayed(p: int) -> None:
            if p == 0:
                wait_for(lambda: latest(ws, "e", 0) == 3, "partition 0 to seal past the batch")
                a = ws.query("SELECT COUNT(*) FROM e WHERE v = 1")
                between.append((a.slide, a.rows[0][0]))
        done = commit_all(cluster.addresses, "e", "job", 1, [(p, "t0", n) for p, n in counts.items()],
                          event_time_ms=450, after_each=delayed)
        assert done["at_slide"] is None and not done["split"]  # event time: not targeted
        assert between == [(0, 0)]  # the common slide then: without the batch anywhere
        assert check_same_slides(ws, "e", 1, counts, 0) == 1
        a = ws.query("SELECT COUNT(*) FROM e WHERE v = 1")
        assert a.slide == 3 and a.rows[0][0] == sum(counts.values())
