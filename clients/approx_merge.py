"""APPROXIMATE (top k or threshold from the per-sub-window top-k lists, thesis 6.2) on a partitioned
stream: the partitions' answers merged with the thesis's bounds (docs/partitions.md).

- GROUP BY the partition key: each key lives in one partition, so every partition runs the query
  itself; the reported keys are concatenated, ordered by their lower bound and limited, each with
  its partition's bounds. The threshold form's `guaranteed` holds when every partition's does; the
  top k's when every partition's does and the k-th lower bound is at least every unchosen reported
  key's upper bound (a partition that reported nothing under a WHERE may hide a key up to its lists'
  delta, unknown here: then not guaranteed).
- GROUP BY another declared column: a key's count is spread over the partitions, as over the
  sub-windows of one window. Every partition reports every key its lists hold (`HAVING A > 0`),
  with [lower, upper] and its lists' delta; merged, a key's lower bound is the sum of its
  partitions' lower bounds and its upper bound the sum of its partitions' upper bounds, taking a
  partition's delta where it did not report the key (Algorithm 6's bounds, over the partitions'
  lists at once); delta is the sum of the partitions'. Top k and threshold then pick as one server
  does (synopsis.merge_topk_lists, frequent.frequent_items). A WHERE is refused there: a partition
  that reports no key under it does not say its delta.

`f * TOTAL` is refused on a partitioned stream (each partition's TOTAL is its own).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from windowstore.store.query import Aggregate, HavingTest, KeyColumn, OfTotal, Query

from .answer import Answer, Bound
from .errors import InvalidArgument
from .merge import merged_answer


@dataclass
class ApproxMergePlan:
    query: Query                   # what each partition runs (its stream and AS OF set per call)
    labels: list[str]
    by_partition_key: bool
    key_at: int                    # the key's column in the answer rows (the other is the aggregate's)
    limit: int | None              # top k
    threshold: float | int | None  # HAVING A > threshold

    def partition_text(self, stream: str, slide: int) -> str:
        from windowstore.store.parser import to_text

        return to_text(replace(self.query, stream=stream, as_of_slide=slide))

    def merge(self, answers: list[Answer]) -> Answer:
        agg_at = 1 - self.key_at
        # per key: (lower, upper) summed over the partitions that reported it, and who did
        lower: dict = {}
        upper: dict = {}
        seen: dict = {}
        deltas = []
        for p, a in enumerate(answers):
            by_row = {b.row: b for b in a.bounds}
            deltas.append(next((b.delta for b in a.bounds if b.delta is not None), 0.0))
            for r, row in enumerate(a.rows):
                key, b = row[self.key_at], by_row[r]
                lower[key] = lower.get(key, 0) + row[agg_at]
                upper[key] = upper.get(key, 0) + b.upper
                seen.setdefault(key, set()).add(p)
        if self.by_partition_key:
            delta = max(deltas, default=0.0)  # an unreported key lives in one partition
        else:
            delta = float(sum(deltas))
            for key in upper:  # where a partition did not report a key, it has at most that partition's delta
                upper[key] += sum(d for p, d in enumerate(deltas) if p not in seen[key])
        order = sorted(lower, key=lambda k: (-lower[k], k is None, k))
        if self.threshold is not None:
            chosen = [k for k in order if lower[k] > self.threshold]
            rest = [k for k in order if not lower[k] > self.threshold]
            if self.by_partition_key:
                ok = all(a.guaranteed for a in answers)
            else:
                ok = delta <= self.threshold and all(upper[k] <= self.threshold for k in rest)
        else:
            chosen, rest = order[:self.limit], order[self.limit:]
            if self.by_partition_key:
                full = all(a.rows for a in answers) or not self.query.where
                ok = bool(all(a.guaranteed for a in answers) and full and
                          (not chosen or not rest or min(lower[k] for k in chosen) >= max(upper[k] for k in rest)))
            else:
                others = max([delta] + [upper[k] for k in rest])
                ok = bool(not chosen or (min(lower[k] for k in chosen) >= others and
                                         (len(chosen) == self.limit or delta == 0)))
        rows = [tuple(k if i == self.key_at else lower[k] for i in range(2)) for k in chosen]
        bounds = [Bound(r, agg_at, "top-k lists", 1.0, estimate=float(lower[k]), lower=float(lower[k]),
                        upper=float(upper[k]), delta=float(delta)) for r, k in enumerate(chosen)]
        return merged_answer(answers, self.labels, rows, answers[0].types, exact=False, guaranteed=ok, bounds=bounds)


def plan_approx_merge(q: Query, partition_by: tuple[str, ...]) -> ApproxMergePlan:
    """The plan of an APPROXIMATE query on a partitioned stream; InvalidArgument naming what does
    not merge (each partition checks the query's shape as one server does)."""
    aggs = [it for it in q.items if isinstance(it, Aggregate)]
    keys = [i for i, it in enumerate(q.items) if isinstance(it, KeyColumn)]
    if q.group_by is None or q.group_by_more or len(q.items) != 2 or len(aggs) != 1 or len(keys) != 1:
        raise InvalidArgument("APPROXIMATE on a partitioned stream selects the grouped column and one COUNT(*) or "
                              "SUM(column), grouped by that column")
    h = q.having
    threshold: Any = None
    if h is not None:
        if isinstance(h, HavingTest) and isinstance(h.value, OfTotal):
            raise InvalidArgument("APPROXIMATE's HAVING A > f * TOTAL on a partitioned stream is not supported: "
                                  "each partition's TOTAL is its own; give the threshold as a number")
        if not (isinstance(h, HavingTest) and h.op == ">"):
            raise InvalidArgument("APPROXIMATE's HAVING is one test: the aggregate > a number")
        threshold = h.value  # a number: each partition's binder checks it
    by_key = tuple(partition_by) == (q.group_by,)
    if by_key:
        partition = replace(q, as_of_slide=None)
    else:
        if q.where:
            raise InvalidArgument(f"APPROXIMATE with a WHERE on a partitioned stream needs GROUP BY its partition key "
                                  f"({', '.join(partition_by)})")
        partition = replace(q, order_by=(), limit=None, as_of_slide=None,
                            having=HavingTest(aggs[0], ">", 0))  # every key the partition's lists hold
    return ApproxMergePlan(query=partition, labels=list(q.labels), by_partition_key=by_key, key_at=keys[0],
                           limit=q.limit, threshold=threshold)
