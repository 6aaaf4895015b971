"""Evaluation of a join of several streams' windows (join_binder.BoundJoin), thesis chapter 5.

Input: per joined source, the sealed sub-windows a read-only transaction read (SubWindow objects,
immutable once sealed) and, per source, its stream's string dictionary. Output: the same
planner.Answer the single-stream queries give (access="join").

One job per module:

- order.py: the join order heuristic and its cost formulas (5.3);
- index.py: a sub-window as a join source sees it, probe indexes, intermediate results;
- band.py: band conditions (W-join window constraints) in a join step;
- plan.py: JoinPlan, the kept join result and its incremental maintenance, eager or lazy (5.2);
- by_key.py: aggregates of a two-way equi-join from per-key partial aggregates (one-time queries);
- synopsis.py: aggregates kept as pre-aggregated intervals, the basic-interval-join synopsis (8.3.2);
- finish.py: from joined rows to the answer, as the single-stream planner answers;
- shared.py: one join synopsis shared by periodic joins of one condition (8.3.2, SS3/CS5);
- run.py: conveniences planning against Stream objects (tests, tools).

NULLs follow SQL as the single-stream path does (planner.py, functions.py), so a join answer equals
what one stream would answer over the joined rows. A NULL in a column an ON condition reads (an
equality key or a band column) makes that condition unknown, so the row joins nothing: it is left
out when its sub-window is prepared, before any index is built (the placeholder under the validity
mask never reaches a key). WHERE is unknown on a NULL and drops the row (Comparison.mask with the
validity), also when checked on joined rows.
"""
from .band import band_mask as _band_mask
from .band import shifted as _shifted
from .finish import typed_rows
from .order import FAST_FACTOR, OrderInputs, choose_order, initial_order, order_cost, probe_sequence
from .plan import DEFAULT_MAX_ROWS, JoinPlan, JoinStats
from .run import plan_join, run_join, window_inputs
from .shared import SharedJoin, condition_key

__all__ = ["DEFAULT_MAX_ROWS", "FAST_FACTOR", "JoinPlan", "JoinStats", "OrderInputs", "SharedJoin", "choose_order",
           "condition_key", "initial_order", "order_cost", "plan_join", "probe_sequence", "run_join", "typed_rows",
           "window_inputs", "_band_mask", "_shifted"]
