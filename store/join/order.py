"""The join order heuristic of thesis 5.3: which source a join starts from and in which order new
sub-windows probe the others. Pure functions of the cost model's inputs (OrderInputs); owns no
join state and reads no sub-window (plan.JoinPlan._order measures the inputs).

The global order is the thesis's heuristic: join the pairs in descending order of selectivity (the
smallest estimated binary join first, then the source giving the smallest intermediate result, under
containment of value sets and uniformity), then also try moving fast streams (arrival rate at least
FAST_FACTOR times the slowest) up the order but not to the top, and keep the order the
per-unit-time cost formulas of 5.3.1 (`order_cost`) find cheapest. Rates and sizes come from the
sub-windows read (rows after the filters pushed down, event-time span), distinct values from the
join keys. New sub-windows of source i probe the others in the global order with i moved first
(Table 5.2), each next source being the first in the global order that a condition connects to
those joined so far.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Sequence

FAST_FACTOR = 5.0


@dataclass
class OrderInputs:
    """What the cost model knows of each source i: rate[i] (tuples per ms, lambda_i), size[i]
    (tuples in its window, lambda_i * T_i), distinct[i][c] (distinct values of join class c, v_i),
    band_sel[(i, j)] (the fraction of pairs a band between i and j keeps) and adjacency (which sources
    a condition connects)."""

    rate: list[float]
    size: list[float]
    distinct: list[dict[int, float]]
    band_sel: dict[tuple[int, int], float] = field(default_factory=dict)
    adjacency: list[set[int]] | None = None

    def __post_init__(self):
        if self.adjacency is None:  # one common join attribute, as in the thesis
            n = len(self.rate)
            self.adjacency = [set(range(n)) - {i} for i in range(n)]


def probe_sequence(first: int, order: Sequence[int], adjacency: list[set[int]]) -> list[int]:
    """The order in which a new tuple (group) of `first` probes the other sources: the global
    order without `first` (Table 5.2), each next source being the first one a condition connects
    to the sources joined so far (no cross products)."""
    seq, joined = [first], {first}
    rest = [s for s in order if s != first]
    while rest:
        nxt = next((s for s in rest if adjacency[s] & joined), rest[0])
        seq.append(nxt)
        joined.add(nxt)
        rest.remove(nxt)
    return seq


def _step(size: float, v_cur: dict[int, float], joined: set[int], j: int, m: OrderInputs) -> float:
    """Joins the intermediate (size tuples, v_cur distinct values per class) with source j: the new
    size (containment of value sets: divide by the larger distinct count, keep the smaller); v_cur
    is updated in place."""
    sel = 1.0
    for c, v in m.distinct[j].items():
        if c in v_cur:
            sel /= max(v_cur[c], v, 1.0)
            v_cur[c] = min(v_cur[c], v)
        else:
            v_cur[c] = v
    for q in joined:
        sel *= m.band_sel.get((min(q, j), max(q, j)), 1.0)
    return size * m.size[j] * sel


def order_cost(order: Sequence[int], m: OrderInputs) -> float:
    """The per-unit-time cost of a global join order (5.3.1): the sum over sources i of X_i =
    lambda_i times the tuples scanned when one new i-tuple probes the others (nested loops: every
    tuple reaching a level scans the next window)."""
    total = 0.0
    for i in range(len(order)):
        seq = probe_sequence(order[i], order, m.adjacency)  # type: ignore[arg-type]  # set by __post_init__
        size, v_cur, joined, cost = 1.0, dict(m.distinct[seq[0]]), {seq[0]}, 0.0
        for j in seq[1:]:
            cost += size * m.size[j]
            size = _step(size, v_cur, joined, j, m)
            joined.add(j)
        total += m.rate[order[i]] * cost
    return total


def initial_order(m: OrderInputs) -> list[int]:
    """Descending selectivity: the pair with the smallest estimated join first (FROM order within
    the pair: the cost does not depend on it), then each time the connected source that gives the
    smallest intermediate result."""
    n = len(m.rate)
    if n == 1:
        return [0]
    best = None
    for i, j in itertools.combinations(range(n), 2):
        if j not in m.adjacency[i]:  # type: ignore[index]  # set by __post_init__
            continue
        v = dict(m.distinct[i])
        phi = _step(m.size[i], v, {i}, j, m)
        if best is None or phi < best[0]:
            best = (phi, i, j)
    if best is None:  # nothing connected (the binder refuses this): FROM order
        return list(range(n))
    size, i, j = best
    order, v_cur = [i, j], dict(m.distinct[i])
    _step(m.size[i], v_cur, {i}, j, m)
    while len(order) < n:
        cands = []
        for s in range(n):
            if s in order or not (m.adjacency[s] & set(order)):  # type: ignore[index]  # set by __post_init__
                continue
            v = dict(v_cur)
            cands.append((_step(size, v, set(order), s, m), s, v))
        if not cands:
            cands = [(float("inf"), s, dict(v_cur)) for s in range(n) if s not in order]
        size, s, v_cur = min(cands, key=lambda c: (c[0], c[1]))
        order.append(s)
    return order


def choose_order(m: OrderInputs) -> tuple[list[int], float, int]:
    """The augmented heuristic of 5.3.2: (order, its cost, orders costed). Starts from
    initial_order; fast streams (rate >= FAST_FACTOR x the slowest) are also tried at every
    earlier position but the top; about n^f orders for f fast streams."""
    start = initial_order(m)
    positive = [r for r in m.rate if r > 0]
    slowest = min(positive) if positive else 0.0
    fast = [s for s in start if slowest > 0 and m.rate[s] >= FAST_FACTOR * slowest]
    cands = [start]
    for f in fast:
        more = []
        for o in cands:
            at = o.index(f)
            for pos in range(1, at):
                moved = [s for s in o if s != f]
                moved.insert(pos, f)
                more.append(moved)
        cands += [o for o in more if o not in cands]
    costed = [(order_cost(o, m), k, o) for k, o in enumerate(cands)]
    cost, _, order = min(costed)
    return order, cost, len(cands)

