"""bench/temporal_fit.py, the least-squares fit of section 6.2's cost model (seed 000) to the grid's
runs (issue 34): its design columns are temporal.choose's own estimates (the model is linear in its
per-operation costs), and the fit recovers known costs from estimates made with them."""
from __future__ import annotations

import math
import random

import pytest

from bench import temporal_fit
from windowstore.store import temporal
from windowstore.store.coalesce import OpCosts


def _cell(rng: random.Random, run: str = "r") -> dict:
    return {"run": run, "grid": (round(rng.random(), 1), round(rng.random(), 1)), "cp": rng.uniform(0, 0.9),
            "oop": rng.random(), "eager_cp": rng.uniform(0, 0.4), "splits": rng.uniform(0, 0.3), "w": 1000,
            "reads": 10.0, "boundaries": 0.9}


def _estimates(cell: dict, eager: OpCosts, lazy: OpCosts) -> tuple[float, float]:
    """temporal.choose's estimates per execution, with these costs."""
    saved = temporal.STORE_EAGER, temporal.STORE_LAZY, temporal.STORE_STAMP
    try:
        temporal.set_costs(eager, lazy, 0.0)
        _, plan = temporal.choose(cell["eager_cp"], cell["splits"], cell["w"], cell["reads"], cell["boundaries"],
                                  lazy_cp=cell["cp"])
    finally:
        temporal.set_costs(*saved)
    return plan.all_eager / cell["reads"], plan.all_lazy / cell["reads"]


@pytest.mark.parametrize("seed", range(5))
def test_the_columns_give_choose_s_estimates_for_any_costs(seed):
    rng = random.Random(seed)
    cell = _cell(rng)
    eager = OpCosts(read=rng.uniform(0.5, 5), insert=rng.uniform(0, 3), delete=0.0, detach=0.0, merge=rng.uniform(0, 3),
                    split=rng.uniform(0, 3), coalesce=0.0)
    lazy = OpCosts(read=rng.uniform(1, 5), insert=0.0, delete=0.0, detach=0.0, merge=0.0, split=0.0,
                   coalesce=-rng.uniform(0, 1))
    ecol, lcol = temporal_fit.columns(cell, lazy_cp=True)
    e, lz = _estimates(cell, eager, lazy)
    assert sum(c * getattr(eager, k) for c, k in zip(ecol, temporal_fit.EAGER_COSTS)) == pytest.approx(e, rel=1e-9)
    assert sum(c * getattr(lazy, k) for c, k in zip(lcol, temporal_fit.LAZY_COSTS)) == pytest.approx(lz, rel=1e-9)


def test_the_fit_recovers_the_costs_that_made_the_times():
    """Cells whose lazy times and paired ratios are choose's estimates with known costs (eager's
    insert equal to its merge, as the fit ties them): the fit gives those costs back."""
    rng = random.Random(7)
    eager = OpCosts(read=2.0, insert=1.2, delete=0.0, detach=0.0, merge=1.2, split=0.7, coalesce=0.0)
    lazy = OpCosts(read=2.5, insert=0.0, delete=0.0, detach=0.0, merge=0.0, split=0.0, coalesce=-1.5)
    cells = []
    for _ in range(40):
        c = _cell(rng)
        e, lz = _estimates(c, eager, lazy)
        cells.append({**c, "lazy_us": lz, "log_ratio": math.log(e / lz)})
    got = temporal_fit.fit(cells)
    for k in temporal_fit.EAGER_COSTS:
        assert got["eager"][k] == pytest.approx(getattr(eager, k), abs=1e-6), k
    for k in temporal_fit.LAZY_COSTS:
        assert got["lazy"][k] == pytest.approx(getattr(lazy, k), abs=1e-6), k
    assert temporal_fit.predict(got, cells[0]) == pytest.approx(cells[0]["log_ratio"], abs=1e-9)


def test_the_physical_fit_keeps_every_operation_s_cost_at_or_above_zero():
    """Ratios no non-negative costs can give (eager cheaper the more its runs): the unconstrained
    fit goes negative, the physical one stops at zero, and lazy's cost per row stays >= 0."""
    rng = random.Random(3)
    cells = []
    for _ in range(30):
        c = _cell(rng)
        cells.append({**c, "lazy_us": 2000.0 * (1 - 0.5 * c["cp"]), "log_ratio": 0.3 * c["eager_cp"] - 0.2 - c["splits"]})
    free, physical = temporal_fit.fit(cells, physical=False), temporal_fit.fit(cells)
    assert min(free["eager"].values()) < 0
    assert min(physical["eager"].values()) >= 0
    assert physical["lazy"]["read"] >= 0 and physical["lazy"]["read"] + physical["lazy"]["coalesce"] >= -1e-9


def test_a_replay_counts_the_cells_where_the_plan_is_the_dearer():
    cells = [{"log_ratio": x} for x in (-0.10, -0.02, 0.01, 0.05)]  # eager, eager, lazy, lazy cheaper
    got = temporal_fit.replay(lambda c: -1.0, cells)  # eager everywhere
    assert got == {"better": 2, "over_floor": 1, "worst": pytest.approx(math.exp(0.05))}
    assert temporal_fit.replay(lambda c: c["log_ratio"], cells)["better"] == 4


def test_choose_scans_lazy_at_the_data_s_share_of_repeated_values():
    """Equation 6 with lazy_cp: a lazy execution reads every window row at `read` and changes by
    `coalesce` per share of repeated values in the data, whatever eager's share within a sub-window."""
    for eager_cp, lazy_cp in ((0.2, 0.8), (0.0, 0.5), (0.3, 0.0)):
        _, plan = temporal.choose(eager_cp, 0.1, 1000, 10.0, 0.9, lazy_cp=lazy_cp)
        want = 10.0 * 1000 * (temporal.STORE_LAZY.read + temporal.STORE_LAZY.coalesce * lazy_cp)
        assert plan.all_lazy == pytest.approx(want, rel=1e-9)
    _, plan = temporal.choose(0.2, 0.1, 1000, 10.0, 0.9)  # no lazy_cp: eager's share, as before
    assert plan.all_lazy == pytest.approx(10.0 * 1000 * (temporal.STORE_LAZY.read + temporal.STORE_LAZY.coalesce * 0.2))
