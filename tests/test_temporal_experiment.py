"""bench/temporal_experiment.py's judgement of the paper's claim (seed 000, issue 34): per cell the
measured choice's paired median over the better strategy against the A/A floor, and why a cell is
over it: a decision (the worse strategy, itself over the floor, run most of the life), the choice's
copy (one strategy run most of the life, yet dearer than the forced plan's executions) or its
switching. Synthetic cells with known times: the causes are the ones built in."""
from __future__ import annotations

import pytest

from bench import temporal_experiment as te
from windowstore.store.coalesce import EAGER, LAZY

N = 40


def _cell(cp: float, eager: float, lazy: float, measured: list[float], ran: list[str], aa: float = 1.0) -> dict:
    """A cell of N executions: forced eager and lazy at constant times (each execution's load the
    same for every plan: a factor 1 + i / N), the A/A copy at `aa` times eager, the measured choice
    at `measured[i]` running `ran[i]`."""
    load = [1 + i / N for i in range(N)]
    times = {EAGER: [eager * x for x in load], LAZY: [lazy * x for x in load],
             te.MEASURED: [m * x for m, x in zip(measured, load)], te.AA: [aa * eager * x for x in load]}
    return {"cp": cp, "oop": 0.0, "chosen": EAGER, "times": times, "measured_ran": ran,
            "ratios": [e / lz for e, lz in zip(times[EAGER], times[LAZY])],
            "measured_plan": [{"final": ran[-1]}], "aa_ratio": te._median_ci([aa] * N), "aa_total": aa - 1}


@pytest.mark.parametrize("ran_better, gap, floor, expected", [
    (0.9, 0.10, 0.03, "copy"), (0.75, 0.0, 0.03, "copy"), (0.1, 0.10, 0.03, "decision"),
    (0.1, 0.02, 0.03, "copy"), (0.5, 0.10, 0.03, "switching"), (0.3, 0.10, 0.03, "switching")])
def test_a_cell_over_the_floor_is_put_down_to_its_cause(ran_better, gap, floor, expected):
    """Most of the life on the worse, itself over the floor: the decision; on one strategy within
    the floor of the better (right, or wrong by less than the floor): the copy's excess; between a
    quarter and three quarters: switching."""
    assert te.cause(ran_better, gap, floor) == expected


def test_the_claim_names_each_cell_over_the_floor_with_its_cause():
    """Four cells, eager 10 % cheaper in each, the A/A copy 1 % over eager (the floor): a choice
    that ran eager at eager's times (within the floor); one that ran eager at 5 % over them (its
    copy); one that ran lazy (the decision); one that ran each half the life (switching)."""
    half = [EAGER] * (N // 2) + [LAZY] * (N // 2)
    cells = [_cell(0.0, 1.0, 1.1, [1.0] * N, [EAGER] * N, aa=1.01),
             _cell(0.1, 1.0, 1.1, [1.05] * N, [EAGER] * N),
             _cell(0.2, 1.0, 1.1, [1.1] * N, [LAZY] * N),
             _cell(0.3, 1.0, 1.1, [1.0] * (N // 2) + [1.1] * (N // 2), half)]
    cl = te.claim(cells)
    assert cl["aa_floor"] == pytest.approx(0.01)
    assert cl[te.MEASURED]["over_floor"] == 3
    assert cl[te.MEASURED]["causes"] == {"copy": [(0.1, 0.0)], "switching": [(0.3, 0.0)], "decision": [(0.2, 0.0)]}
    assert "copy 1 [(0.1, 0.0)], switching 1 [(0.3, 0.0)], decision 1 [(0.2, 0.0)]" in te.claim_text(cl)
