"""Conveniences for tests and tools: plan a join against Stream objects and evaluate it against
their current windows (no concurrency; the engine reads through transactions instead)."""
from __future__ import annotations

from typing import Mapping

from ..join_binder import bind_join
from ..planner import Answer
from ..query import JoinQuery
from ..subwindow import SubWindow
from .plan import DEFAULT_MAX_ROWS, JoinPlan


def plan_join(query: JoinQuery, streams: Mapping, max_rows: int = DEFAULT_MAX_ROWS, cache: bool = True) -> JoinPlan:
    """Bind `query` against `streams` (stream name -> store.Stream) and plan it."""
    catalog = {name: (s.schema, s.spec) for name, s in streams.items()}
    bound = bind_join(query, catalog)
    return JoinPlan(bound, [streams[s.stream].strings for s in bound.sources], max_rows=max_rows, cache=cache)


def window_inputs(plan: JoinPlan, streams: Mapping) -> list[list[SubWindow]]:
    """What a transaction reads now: per source, the n_Q youngest sub-windows of its stream."""
    return [streams[s.stream].window.youngest(s.n_q) for s in plan.bound.sources]


def run_join(plan: JoinPlan, streams: Mapping) -> Answer:
    """Evaluate against the streams' current windows in one go (no concurrency: tests, tools)."""
    return plan.evaluate(window_inputs(plan, streams))
