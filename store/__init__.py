"""The data half of windowstore's pure core: streams, sub-windows, synopses, aggregates, queries.

Nothing here reads a wall clock, opens a socket or starts a thread: time is passed in.
"""
from .errors import InvalidInput, Loc, QueryError, QuerySyntaxError, StoreError
from .schema import Schema
from .subwindow import SubWindow
from .window import AppendResult, Window, WindowSpec
from .stream import Stream
from .query import Aggregate, KeyColumn, OrderBy, Predicate, Query, Range
from .parser import parse_query, to_text
from .binder import BoundQuery, bind
from .planner import Answer, Plan, plan_query, run_plan

__all__ = [
    "Aggregate", "AppendResult", "Answer", "BoundQuery", "InvalidInput", "KeyColumn", "Loc", "OrderBy", "Plan",
    "Predicate", "Query", "QueryError", "QuerySyntaxError", "Range", "Schema", "StoreError", "Stream", "SubWindow",
    "Window", "WindowSpec", "bind", "parse_query", "plan_query", "run_plan", "to_text",
]
