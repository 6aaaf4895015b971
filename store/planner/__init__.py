"""Plans a bound query (binder.py) against a stream and picks its access path: one module per job.

Access paths, best first:
- probe: one atomic read of the window-level synopses (running prefix COUNT/integer SUM, interval
  MIN/MAX), whatever the window length; with GROUP BY a declared string column, of its running
  per-key COUNT/integer SUM (key_running.py). Exact. No filter.
- synopsis: a scan of the per-sub-window basic interval synopses (per-column COUNT/SUM/MIN/MAX,
  per-key COUNT/SUM of declared group-by columns, top-k lists). Exact, except APPROXIMATE top k.
- window: a scan of the raw rows of each sub-window, with filters. Exact. GROUP BY several columns
  always takes this path: the synopses are kept per single column.

Which path answers which aggregate is each function's own statement (functions.py). HAVING filters
the finished groups, so it takes whatever path its aggregates (selected or hidden) allow.

Modules: access.py (choosing the path), read.py (reading one sub-window), merge.py (merging the
sub-windows' partials), order.py (ORDER BY and LIMIT, shared with joins), decode.py (answer values
from storage: strings, NULL keys, decimals, composite keys), subquery.py (the outer query of a
sub-query), plan.py (Plan: the steps in order, the probe path, run_plan).
"""
from .access import _choose_access, _synopsis_answers
from .decode import _decimal, composite_keys, decode_composite_keys, decode_keys
from .order import group_rows, sorted_positions
from .plan import Answer, Plan, plan_query, run_plan

__all__ = [
    "Answer", "Plan", "_choose_access", "_decimal", "_synopsis_answers", "composite_keys", "decode_composite_keys",
    "decode_keys", "group_rows", "plan_query", "run_plan", "sorted_positions",
]
