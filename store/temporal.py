"""Temporal coalescing queries (seed 000, issue 34): the syntax nodes of the temporal functions,
their binding, and the evaluation of a query over a window's coalesced intervals, eagerly or lazily.

A reading of column `v` stands for the half-open interval `[ts, te)` of its group (the GROUP BY
columns), `te` the `ts` of the group's next reading in the window, `ts` itself for the group's
last one (store/coalesce.py, section 2.3). `VALID(v)` is the interval of a maximal run of
value-equivalent adjacent readings (NULL is equivalent to NULL). Only the window's rows count: a
run whose first readings have left the window starts at its first reading still in it (partial
expiry); a row that arrives late lands in the sub-window it was appended to and splits or joins
the runs around it when the window is coalesced. Readings of one group are ordered by ts, ties
by window order (slide, then append order).

    SELECT sensor, MAX(DURATION(VALID(temp))) FROM readings [RANGE 24 h SLIDE 1 h] GROUP BY sensor
    SELECT sensor, temp, START(VALID(temp)), END(VALID(temp)) FROM readings GROUP BY sensor
    SELECT COUNT(*) FROM readings WHERE VALID(temp) OVERLAPS PERIOD(0, 3600000)

Functions: VALID(col) and PERIOD(start, end) (a literal interval) and INTERSECT(i, j) are
intervals; DURATION(i), START(i) and END(i) their numbers (NULL for an empty INTERSECT);
i OVERLAPS j, i CONTAINS j, i BEFORE j, i AFTER j and DURATION(i) <op> n are tests on the
intervals in WHERE (ANDed with the row conditions, which select readings before coalescing).
The aggregates COUNT, SUM, MIN, MAX and AVG take DURATION/START/END(i); COUNT(*) and
COUNT(VALID(col)) count intervals.

Two strategies give the same answers (tests/test_temporal.py checks both against DuckDB):
- eager: each sealed sub-window's rows are coalesced once, per group, into runs with the vector
  of their readings' timestamps (Algorithm 2's state), kept with the sub-window while it lives;
  a window's runs are its sub-windows' runs merged at their boundaries, or split and re-merged
  where a late row's sub-window interleaves with its neighbours (mergeTuples / splitTuple);
- lazy: the window's rows are coalesced at every execution (Algorithm 1, then one pass).
The plan picks one per query with section 6.2's cost model (coalesce.choose_plan), from what
eager's work would be on the two newest sealed sub-windows (how many runs, how many readings a
late row makes it re-merge); `explain` says which.
Eager state is derived from sealed sub-windows only, so recovery (log replay, snapshots), which
restores the sub-windows, restores it: it is rebuilt on the first read after a restart.
"""
from __future__ import annotations

import functools
import math
import threading
import weakref
from bisect import bisect_right
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Union

from .coalesce import DCQ, EAGER, LAZY, OpCosts, Strategy, Weights, Workload, choose_plan, normalizers
from .errors import Loc
from .query import Aggregate, KeyColumn, Predicate, Query

if TYPE_CHECKING:
    from .binder import BoundQuery
    from .subwindow import SubWindow

# Function words: a name followed by `(`; none is a keyword, so columns may still be called so.
INTERVAL_FUNCS = ("valid", "period", "intersect")
SCALAR_FUNCS = ("duration", "start", "end")
CALLS = INTERVAL_FUNCS + SCALAR_FUNCS
TESTS = ("overlaps", "contains", "before", "after")
INTERVAL_AGGS = ("count", "sum", "min", "max", "avg")


def _loc():
    return field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Valid:
    """VALID(column): the coalesced interval of the column's value."""
    column: str
    loc: Loc | None = _loc()

    def __str__(self) -> str:
        return f"valid({self.column})"


@dataclass(frozen=True)
class Period:
    """PERIOD(start, end): the literal interval [start, end) (event time, ms)."""
    start: int
    end: int
    loc: Loc | None = _loc()

    def __str__(self) -> str:
        return f"period({self.start}, {self.end})"


@dataclass(frozen=True)
class Intersect:
    """INTERSECT(a, b): the common part of two intervals, NULL when they do not overlap."""
    left: "IntervalExpr"
    right: "IntervalExpr"
    loc: Loc | None = _loc()

    def __str__(self) -> str:
        return f"intersect({self.left}, {self.right})"


IntervalExpr = Union[Valid, Period, Intersect]


@dataclass(frozen=True)
class Scalar:
    """DURATION(i), START(i) or END(i): a number of an interval (int64, NULL for NULL)."""
    func: str
    arg: IntervalExpr
    loc: Loc | None = _loc()

    def __str__(self) -> str:
        return f"{self.func}({self.arg})"


@dataclass(frozen=True)
class TemporalItem:
    """A select item DURATION/START/END(i): one value per coalesced interval."""
    expr: Scalar
    alias: str | None = None
    loc: Loc | None = _loc()

    @property
    def label(self) -> str:
        return self.alias or str(self.expr)


@dataclass(frozen=True)
class TemporalTest:
    """A WHERE test on the coalesced intervals: `left op right` with op one of TESTS (intervals
    on both sides), or `DURATION(i) <op> n` (left a Scalar, right an int)."""
    left: Any
    op: str
    right: Any
    loc: Loc | None = _loc()

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


def text(node) -> str:
    """A temporal node as query text (query_text.to_text): upper-case function names."""
    from .query_text import quote_name
    if isinstance(node, Valid):
        return f"VALID({quote_name(node.column)})"
    if isinstance(node, Period):
        return f"PERIOD({node.start}, {node.end})"
    if isinstance(node, Intersect):
        return f"INTERSECT({text(node.left)}, {text(node.right)})"
    if isinstance(node, Scalar):
        return f"{node.func.upper()}({text(node.arg)})"
    if isinstance(node, TemporalTest):
        op = node.op.upper() if node.op in TESTS else node.op
        return f"{text(node.left)} {op} {text(node.right) if not isinstance(node.right, int) else node.right}"
    raise TypeError(f"not a temporal node: {node!r}")


def is_node(x) -> bool:
    return isinstance(x, (Valid, Period, Intersect, Scalar, TemporalTest, TemporalItem))


# -- parsing (called by parser._Parser where a temporal function may start) ---------------------------
def starts_call(p) -> bool:
    """Is the parser at a temporal function call (`VALID(`, `DURATION(`, ...)?"""
    return p.is_call() and p.tok.word in CALLS


def parse_interval(p) -> IntervalExpr:
    tok = p.tok
    word = tok.word
    if not starts_call(p) or word not in INTERVAL_FUNCS:
        p.fail("expected an interval: VALID(column), PERIOD(start, end) or INTERSECT(i, j)")
    p.i += 2
    node: IntervalExpr
    if word == "valid":
        node = Valid(p.column("a column"), loc=tok.loc)
    elif word == "period":
        start = _signed(p, "the start of a PERIOD")
        p.expect(",")
        end = _signed(p, "the end of a PERIOD")
        if end < start:
            p.fail("a PERIOD ends before it starts", tok)
        node = Period(start, end, loc=tok.loc)
    else:
        left = parse_interval(p)
        p.expect(",")
        node = Intersect(left, parse_interval(p), loc=tok.loc)
    p.expect(")")
    return node


def _signed(p, what: str) -> int:
    tok = p.tok
    if tok.kind != "number" or not tok.text.lstrip("-").isdigit() or len(tok.text) > 20:
        p.fail(f"expected {what} (an integer, ms)")
    value = int(tok.text)
    if not -(2**63) <= value < 2**63:
        p.fail(f"{what} is beyond int64")
    p.i += 1
    return value


def parse_scalar(p) -> Scalar:
    tok = p.tok
    if not (starts_call(p) and tok.word in SCALAR_FUNCS):
        p.fail("expected DURATION(i), START(i) or END(i)")
    p.i += 2
    node = Scalar(tok.word, parse_interval(p), loc=tok.loc)
    p.expect(")")
    return node


def parse_argument(p) -> Scalar | IntervalExpr:
    """An aggregate's argument that is temporal: DURATION/START/END(i), or an interval (COUNT)."""
    return parse_scalar(p) if p.tok.word in SCALAR_FUNCS else parse_interval(p)


def parse_item(p) -> TemporalItem:
    tok = p.tok
    if tok.word in INTERVAL_FUNCS:
        p.fail(f"{tok.text.upper()}(...) is an interval: select START(...), END(...) or DURATION(...) of it")
    return TemporalItem(parse_scalar(p), loc=tok.loc)


def parse_test(p) -> TemporalTest:
    """`i OVERLAPS|CONTAINS|BEFORE|AFTER j`, or `DURATION(i) <op> n`."""
    tok = p.tok
    if tok.word in SCALAR_FUNCS:
        left = parse_scalar(p)
        op_tok = p.tok
        if op_tok.kind != "op":
            p.fail("expected a comparison (=, !=, <, <=, >, >=) after " + left.func.upper() + "(...)")
        p.i += 1
        return TemporalTest(left, "!=" if op_tok.text == "<>" else op_tok.text, _signed(p, "a number"), loc=tok.loc)
    interval = parse_interval(p)
    op = p.tok.word
    if op not in TESTS:
        p.fail("expected OVERLAPS, CONTAINS, BEFORE or AFTER after an interval")
    p.i += 1
    return TemporalTest(interval, op, parse_interval(p), loc=tok.loc)


# -- binding ------------------------------------------------------------------------------------------
def mentions_temporal(q: Query) -> bool:
    """Does the query use a temporal function (select list, aggregate argument or WHERE)?"""
    for it in q.items:
        if isinstance(it, TemporalItem) or (isinstance(it, Aggregate) and is_node(it.column)):
            return True
    return any(isinstance(p, TemporalTest) for conj in q.where for p in conj)


@dataclass(frozen=True)
class _Out:
    """One output column: a GROUP BY key or the coalesced column (kind 'key', index into the
    interval's key tuple; 'value'), a Scalar per interval ('scalar'), or an aggregate ('agg')."""
    kind: str
    label: str
    type: str
    ref: Any = None
    func: str | None = None


@dataclass
class Temporal:
    """A bound temporal query: what the plan reads (the inner projection's columns, in order
    `keys + [ts, value]`), the tests on intervals, and the output."""
    keys: list[str]
    value: str
    time_column: str
    tests: list[TemporalTest]
    outs: list[_Out]
    aggregated: bool
    order: list[tuple[int, bool]]
    limit: int | None

    @property
    def dcq_key(self) -> tuple:
        """What an eager run list depends on besides the sub-window: groups, value and the rows
        WHERE selects (the inner query's WHERE, part of the caller's key)."""
        return (tuple(self.keys), self.value)


def bind_temporal(binder, q: Query, periodic: bool) -> "BoundQuery":
    """Bind a query using temporal functions (binder._Binder `binder`)."""
    from .binder import OutputItem, _Binder

    fail = binder.fail
    schema = binder.schema
    for what, bad, loc in (("HAVING", q.having is not None, q.having.loc if q.having is not None else None),
                           ("a sub-query", bool(q.outer), q.outer[0].loc if q.outer else None),
                           ("APPROXIMATE", q.approximate, q.loc), ("SELECT DISTINCT", q.distinct, q.loc)):
        if bad:
            fail(f"{what} is not supported with temporal functions", loc)
    keys = []
    more_locs = q.group_by_more_locs or (None,) * len(q.group_by_more)
    for column, loc in zip(q.group_columns, (q.group_by_loc, *more_locs)):
        binder.column_type(column, loc)
        if column not in keys:
            keys.append(column)
    valids: list[Valid] = []

    def walk(node) -> None:
        if isinstance(node, Valid):
            valids.append(node)
        elif isinstance(node, Intersect):
            walk(node.left)
            walk(node.right)
        elif isinstance(node, (Scalar, TemporalItem)):
            walk(node.arg if isinstance(node, Scalar) else node.expr)
        elif isinstance(node, TemporalTest):
            walk(node.left)
            walk(node.right)

    tests: list[TemporalTest] = []
    row_where: list[tuple] = []
    if q.where:
        temporal_in = [any(isinstance(p, TemporalTest) for p in conj) for conj in q.where]
        if any(temporal_in) and len(q.where) > 1:
            first = next(p for conj in q.where for p in conj if isinstance(p, TemporalTest))
            fail("a test on intervals (OVERLAPS, CONTAINS, BEFORE, AFTER, DURATION) cannot be under OR",
                 first.loc)
        for conj in q.where:
            row_where.append(tuple(p for p in conj if isinstance(p, Predicate)))
            tests.extend(p for p in conj if isinstance(p, TemporalTest))
        row_where = [c for c in row_where if c] if len(q.where) == 1 else row_where
    for t in tests:
        walk(t)
    for it in q.items:
        if isinstance(it, TemporalItem):
            walk(it)
        elif isinstance(it, Aggregate) and is_node(it.column):
            walk(it.column)
    if not valids:
        fail("a temporal query needs VALID(column): the column whose value is coalesced", q.loc)
    value = valids[0].column
    for v in valids:
        binder.column_type(v.column, v.loc)
        if v.column != value:
            fail(f"one query coalesces one column: VALID({value}) and VALID({v.column})", v.loc, v.column)
    if value in keys:
        fail(f"VALID({value}) of a GROUP BY column: its value never changes within a group", valids[0].loc, value)
    aggregated = any(isinstance(it, Aggregate) for it in q.items)
    outs: list[_Out] = []
    for it in q.items:
        if isinstance(it, KeyColumn):
            if it.column in keys:
                outs.append(_Out("key", it.label, binder.column_type(it.column, it.loc), keys.index(it.column)))
            elif it.column == value and not aggregated:
                outs.append(_Out("value", it.label, binder.column_type(it.column, it.loc)))
            else:
                what = "a GROUP BY column" + ("" if aggregated else f" or {value!r}")
                binder.column_type(it.column, it.loc)
                fail(f"column {it.column!r} must be {what} in a temporal query", it.loc, it.column)
        elif isinstance(it, TemporalItem):
            if aggregated:
                fail(f"{it.expr} needs an aggregate (one value per interval, the query one row per group)",
                     it.loc)
            outs.append(_Out("scalar", it.label, "int64", it.expr))
        else:
            arg = it.column
            if it.func not in INTERVAL_AGGS:
                fail(f"{it.func.upper()} is not available over intervals (COUNT, SUM, MIN, MAX, AVG are)", it.loc)
            if arg is None:
                if it.func != "count":
                    fail(f"{it.func.upper()}(*) is not a function", it.loc)
                outs.append(_Out("agg", it.label, "int64", None, "count"))
                continue
            if not is_node(arg):
                fail(f"{it.func.upper()}({arg}) in a temporal query: aggregate DURATION, START or END of an "
                     "interval, or COUNT(*)", it.loc, arg)
            if not isinstance(arg, Scalar) and it.func != "count":
                fail(f"{it.func.upper()} of an interval: take DURATION, START or END of it", it.loc)
            typ = "float64" if it.func == "avg" else "int128" if it.func == "sum" else "int64"
            outs.append(_Out("agg", it.label, typ, arg, it.func))
    order = []
    for o in q.order_by:
        if o.expr is not None:
            hits = [i for i, it in enumerate(q.items) if isinstance(it, Aggregate) and it.same_expression(o.expr)]
            if not hits:
                fail("ORDER BY an aggregate of a temporal query: select it", o.loc)
            order.append((hits[0], o.descending))
        elif o.name is not None:
            hits = [i for i, out in enumerate(outs) if out.label == o.name]
            if not hits:
                fail(f"ORDER BY {o.name!r} names no select item", o.loc)
            order.append((hits[0], o.descending))
        else:
            if o.item is None or not 0 <= o.item < len(outs):
                fail(f"ORDER BY {(o.item or 0) + 1} is not a select item (1..{len(outs)})", o.loc)
            assert o.item is not None
            order.append((o.item, o.descending))
    columns = [*keys, schema.time_column, value]
    inner_q = replace(q, items=tuple(KeyColumn(c) for c in columns), where=tuple(row_where), group_by=None,
                      group_by_loc=None, group_by_more=(), group_by_more_locs=None, order_by=(), limit=None)
    inner = _Binder(inner_q, schema, binder.spec, periodic).bind()
    spec = Temporal(keys, value, schema.time_column, tests, outs, aggregated, order, q.limit)
    items = [OutputItem(o.label, o.type, None) for o in outs]
    return replace(inner, query=q, items=items, limit=q.limit, temporal=spec)


# -- coalescing -----------------------------------------------------------------------------------------
# A run: [value, stamps] with stamps the sorted timestamps of its readings (stamps[0] is t_s, the
# paper's vector v the rest). A group's runs are in ts order, adjacent runs of different values.
Runs = dict  # group key tuple -> list of [value, list[int]]


def coalesce_rows(rows) -> Runs:
    """Runs per group from (key tuple, ts, value) rows in window order (one pass after a stable
    sort by ts: ties keep window order)."""
    by_group: dict[tuple, list] = {}
    for key, ts, value in rows:
        by_group.setdefault(key, []).append((ts, value))
    out: Runs = {}
    for key, readings in by_group.items():
        readings.sort(key=lambda r: r[0])
        runs: list = []
        for ts, value in readings:
            if runs and runs[-1][0] == value:
                runs[-1][1].append(ts)
            else:
                runs.append([value, [ts]])
        out[key] = runs
    return out


def merge_runs(parts: list[Runs]) -> Runs:
    """A window's runs from its sub-windows' runs (in slide order). Where a group's next part
    starts no earlier than the runs so far end, the two lists are joined at the boundary
    (mergeTuples when the values are equal); where a late row's part interleaves, the run it
    falls in is split at the part's first reading (splitTuple: the readings up to it stay) and the
    readings after that point are re-merged with the part in ts order; the earlier runs stay as
    they are."""
    return _merge(parts)[0]


def _merge(parts: list[Runs]) -> tuple[Runs, int]:
    """merge_runs, and how many readings it re-merged (the cost model's split count)."""
    out: Runs = {}
    remerged = 0
    for part in parts:
        for key, runs in part.items():
            have = out.get(key)
            if have is None:
                out[key] = [[v, list(s)] for v, s in runs]
            elif runs[0][1][0] >= have[-1][1][-1]:
                first = 0
                if have[-1][0] == runs[0][0]:
                    have[-1][1].extend(runs[0][1])
                    first = 1
                have.extend([v, list(s)] for v, s in runs[first:])
            else:  # split the run the part starts in; re-merge what follows with the part
                start = runs[0][1][0]
                j = len(have)
                while j and have[j - 1][1][-1] > start:  # from the end: late rows are recent
                    j -= 1
                cut = bisect_right(have[j][1], start)  # its readings up to `start` stay (ties: window order)
                readings = ([(ts, have[j][0]) for ts in have[j][1][cut:]] + [(ts, v) for v, s in have[j + 1:] for ts in s]
                            + [(ts, v) for v, s in runs for ts in s])
                if cut:
                    del have[j][1][cut:]
                    j += 1
                remerged += len(readings)
                merged = coalesce_rows([(key, ts, v) for ts, v in readings])[key]
                if j and have[j - 1][0] == merged[0][0]:
                    have[j - 1][1].extend(merged.pop(0)[1])
                del have[j:]
                have.extend(merged)
    return out, remerged


def intervals(runs: Runs) -> list[tuple[tuple, Any, int, int, int]]:
    """(key, value, ts, te, readings) per coalesced interval, by key then ts: te is the next run's
    first reading, the last run's own last reading."""
    out = []
    for key in sorted(runs, key=_key_order):
        rs = runs[key]
        for i, (value, stamps) in enumerate(rs):
            te = rs[i + 1][1][0] if i + 1 < len(rs) else stamps[-1]
            out.append((key, value, stamps[0], te, len(stamps)))
    return out


def _key_order(key: tuple) -> tuple:
    return tuple((v is None, v if v is not None else 0) for v in key)


# -- temporal functions on (ts, te) pairs, None for NULL ---------------------------------------------
def interval_of(node, ts: int, te: int):
    if isinstance(node, Valid):
        return (ts, te)
    if isinstance(node, Period):
        return (node.start, node.end)
    a, b = interval_of(node.left, ts, te), interval_of(node.right, ts, te)
    if a is None or b is None:
        return None
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, hi) if lo < hi else None


def scalar_of(node: Scalar, ts: int, te: int):
    i = interval_of(node.arg, ts, te)
    if i is None:
        return None
    return i[1] - i[0] if node.func == "duration" else i[0] if node.func == "start" else i[1]


def test_holds(t: TemporalTest, ts: int, te: int) -> bool:
    if isinstance(t.left, Scalar):
        v = scalar_of(t.left, ts, te)
        if v is None:
            return False
        r = t.right
        return {"=": v == r, "!=": v != r, "<": v < r, "<=": v <= r, ">": v > r, ">=": v >= r}[t.op]
    a, b = interval_of(t.left, ts, te), interval_of(t.right, ts, te)
    if a is None or b is None:
        return False
    if t.op == "overlaps":
        return a[0] < b[1] and b[0] < a[1]
    if t.op == "contains":
        return a[0] <= b[0] and b[1] <= a[1]
    if t.op == "before":
        return a[1] <= b[0]
    return b[1] <= a[0]  # after


def answer_rows(spec: Temporal, runs: Runs) -> list[tuple]:
    """The answer's rows from the window's runs."""
    ivs = [iv for iv in intervals(runs) if all(test_holds(t, iv[2], iv[3]) for t in spec.tests)]
    if not spec.aggregated:
        rows = [tuple(key[o.ref] if o.kind == "key" else value if o.kind == "value" else scalar_of(o.ref, ts, te)
                      for o in spec.outs) for key, value, ts, te, _ in ivs]
    else:
        groups: dict[tuple, list] = {}
        for iv in ivs:
            groups.setdefault(iv[0] if spec.keys else (), []).append(iv)
        if not spec.keys:
            groups.setdefault((), [])
        rows = []
        for key in sorted(groups, key=_key_order):
            members = groups[key]
            row = []
            for o in spec.outs:
                if o.kind == "key":
                    row.append(key[o.ref])
                    continue
                if o.ref is None:
                    row.append(len(members))
                    continue
                vals = [(scalar_of(o.ref, ts, te) if isinstance(o.ref, Scalar) else
                         interval_of(o.ref, ts, te)) for _, _, ts, te, _ in members]
                vals = [v for v in vals if v is not None]
                if o.func == "count":
                    row.append(len(vals))
                elif not vals:
                    row.append(None)
                elif o.func == "sum":
                    row.append(sum(vals))
                elif o.func == "min":
                    row.append(min(vals))
                elif o.func == "max":
                    row.append(max(vals))
                else:
                    row.append(sum(vals) / len(vals))
            rows.append(tuple(row))
    for i, desc in reversed(spec.order):  # stable: the last key first; NULLs last both ways
        present = [r for r in rows if r[i] is not None]
        present.sort(key=lambda r: r[i], reverse=desc)
        rows = present + [r for r in rows if r[i] is None]
    return rows if spec.limit is None else rows[: spec.limit]


# -- the plan's side: strategy, reads, finish ---------------------------------------------------------------
_EAGER_RUNS: "weakref.WeakKeyDictionary[SubWindow, dict]" = weakref.WeakKeyDictionary()
_EAGER_LOCK = threading.Lock()

# Per-operation costs (µs) of the store's two paths, fitted by least squares to section 7's grid as
# this store runs it (`python -m bench.temporal_fit --history`: every committed run of `make
# coalesce-choice`, 726 cells; docs/coalesce.md, round 22): lazy's on the lazy plan's per-execution
# medians, eager's on each cell's paired eager / lazy ratio times the fitted lazy, no cost of an
# operation below zero. Eager read = an execution's work per run of its sub-windows (merging and
# answering); the fit puts building the runs in it too (insert / merge, per row that starts / joins
# a run, come out 0: one sub-window's runs are built per execution, in proportion to the runs read);
# split = re-merging one reading where a part interleaves; `STORE_STAMP` the share of a read per
# further timestamp (0 in every calibration). Lazy read = per window row, coalesce = its change per
# share of repeated values (`choose`'s lazy_cp). Nothing happens at expiry in either (the runs go
# with their sub-window). `set_costs` replaces them (`bench.temporal_experiment` without
# --shipped-costs measures them on its machine first, as the paper set its own; under load those
# move by more than the gaps decided, and its corner cells span less of eager's coalescing share).
STORE_EAGER = OpCosts(read=2.311, insert=0.0, delete=0.0, detach=0.0, merge=0.0, split=0.380, coalesce=0.0)
STORE_LAZY = OpCosts(read=2.495, insert=0.0, delete=0.0, detach=0.0, merge=0.0, split=0.0, coalesce=-1.963)
STORE_STAMP = 0.0
# The fit's error: the root mean square, over the grid's cells, of log(eager / lazy) predicted less
# measured (the paired median) where the fit had not seen the cell: fitted on half the cells and
# judged on the other half 0.064, on the other runs 0.056 to 0.075 (this largest is FIT_ERROR). Not
# better than "no gap" everywhere (0.058): the model tells little here, where eager and lazy are
# within some 15 % of each other; a cell's spread between runs is 0.019. The model is sure where its
# predicted |log(eager / lazy)| is beyond SURE_Z times this (1.16 times apart).
FIT_ERROR = 0.075
SURE_Z = 2.0


def set_costs(eager: OpCosts, lazy: OpCosts, stamp: float) -> None:
    """Use these per-operation costs for the plans made from now on."""
    global STORE_EAGER, STORE_LAZY, STORE_STAMP
    STORE_EAGER, STORE_LAZY, STORE_STAMP = eager, lazy, stamp


def rates(rows: list[tuple[tuple, int, Any]]) -> tuple[float, float]:
    """(cp, oop) of rows in arrival order: the share of readings equal to their group's previous
    one in ts order, and the share arriving after a reading with a larger ts."""
    if len(rows) < 2:
        return 0.0, 0.0
    late, top = 0, None
    for _, ts, _ in rows:
        if top is not None and ts < top:
            late += 1
        top = ts if top is None else max(top, ts)
    same = total = 0
    for runs in coalesce_rows(rows).values():
        for _, stamps in runs:
            same += len(stamps) - 1
            total += len(stamps)
    return same / total, late / len(rows)


def eager_rates(parts: list[Runs]) -> tuple[float, float]:
    """(cp, splits) as eager meets them, from consecutive sub-windows' runs (oldest first): the
    share of readings merged into a run of their own sub-window (1 - runs / readings; below the
    data's cp where runs are cut at sub-window boundaries), and the readings re-merged at a
    boundary per reading of the later sub-windows (a late row re-merges its group's part and the
    readings after it, so this grows faster than the share of late rows; it may exceed 1)."""
    readings = sum(len(st) for p in parts for rs in p.values() for _, st in rs)
    if not readings:
        return 0.0, 0.0
    runs = sum(len(rs) for p in parts for rs in p.values())
    later = sum(len(st) for p in parts[1:] for rs in p.values() for _, st in rs)
    return 1 - runs / readings, (_merge(parts)[1] / later if later else 0.0)


def choose(cp: float, splits: float, window_rows: int, reads_per_row: float, boundaries: float = 1.0,
           lazy_cp: float | None = None):
    """Section 6.2's choice for one DCQ: (strategy, coalesce.Plan). The objective is CPU time over
    the life of a window's rows: each row is coalesced into its sub-window's runs once (eager's
    update), and read `reads_per_row` times (a periodic query's executions that see it; 1 for a
    one-time query), each read a scan. `cp` is eager_rates' (the share of readings that join a
    run in their sub-window), `splits` its re-merged readings per reading, paid at the share
    `boundaries` of the window's rows that follow a sub-window boundary ((n - 1) / n for n
    sub-windows) on every read, so its split cost is scaled by the reads. Equation 5's scan reads
    a coalesced tuple's bytes: r = 1 and m = STORE_STAMP per further timestamp (merging copies the
    vector). The memory weight is 0: the store keeps the window's rows for every query whatever
    the strategy, and the weights undo the per-item normalisation (section 7.5 allows weights to
    compensate), so that the weighted sum is time in µs. `lazy_cp` (rates' cp, the data's share of
    repeated values; `cp` when None) is the share equation 6 coalesces: a lazy execution coalesces
    the window's rows, whose runs are not cut at sub-window boundaries (section 7's grid reaches 0.9
    of it where eager's share within a sub-window reaches 0.38)."""
    w = max(window_rows, 1)
    lazy = STORE_LAZY
    if lazy_cp is not None and cp > 0:  # equation 6 reads the DCQ's cp: scale its coalesce cost to lazy's share
        lazy = replace(lazy, coalesce=lazy.coalesce * lazy_cp / cp)
    elif lazy_cp is not None:  # no eager share to scale: read lazy's change per repeated value as a read
        lazy = replace(lazy, read=lazy.read + lazy.coalesce * lazy_cp)
    wl = Workload(w=w, k=w, r_lazy=1.0, m=STORE_STAMP, ops=lazy)
    per_row = splits * boundaries  # re-merged readings per window row, per read
    oop = min(per_row, 1.0)
    split = STORE_EAGER.split * reads_per_row * max(per_row, 1.0)
    # A re-merge is paid whatever the reading's value, so it is on coalescing arrivals too: C_merge
    # grows with oop (as section 7.2 observes of the paper's own C_merge).
    ops = replace(STORE_EAGER, split=split, merge=STORE_EAGER.merge + oop * split)
    q = DCQ("q", cp, oop, r_eager=1.0, ops=ops)
    norm = normalizers([q], wl)
    plan = choose_plan([q], wl, Weights(0.0, norm.update, reads_per_row * norm.scan))
    return plan.choice["q"], plan


def shift_interval(logs: list[float], confidence: float) -> tuple[float, float | None, float | None]:
    """(estimate, low, high) of a shift from paired log ratios: the Hodges-Lehmann estimate (the
    median of the Walsh averages, (x_i + x_j) / 2 for i <= j) and its distribution-free interval at
    `confidence` from the signed-rank statistic (the Walsh averages w[k] and w[m-1-k] of m, for the
    largest k with P(W < k + 1) at most half the rest under no shift); low and high are None while
    there are too few pairs for that confidence (fewer than 5 at 90 %). Where the sign test's
    interval (the median's) uses only the signs, this uses their ranks too: on section 7's grid its
    rounds end sooner and err less (docs/coalesce.md, round 25); a single wild pair (a full
    collection) is in n of the n(n + 1) / 2 Walsh averages and moves the estimate little."""
    n = len(logs)
    if not n:
        return 0.0, None, None
    w = sorted((logs[i] + logs[j]) / 2 for i in range(n) for j in range(i, n))
    m = len(w)
    mid = w[m // 2] if m % 2 else (w[m // 2 - 1] + w[m // 2]) / 2
    counts = _signed_rank_counts(n)
    tail, k, below, total = (1 - confidence) / 2, -1, 0.0, 2.0 ** n
    while k + 1 < m and below + counts[k + 1] / total <= tail:
        below += counts[k + 1] / total
        k += 1
    return (mid, w[k], w[m - 1 - k]) if k >= 0 else (mid, None, None)


@functools.lru_cache(maxsize=64)
def _signed_rank_counts(n: int) -> tuple[int, ...]:
    """How many of the 2**n sign patterns of ranks 1..n give each rank sum W = 0 .. n(n+1)/2."""
    counts = [1]
    for r in range(1, n + 1):
        more = [0] * (len(counts) + r)
        for total, c in enumerate(counts):
            more[total] += c
            more[total + r] += c
        counts = more
    return tuple(counts)


class MeasuredChoice:
    """Eager or lazy for one periodic query from paired measurements of both on its own data,
    starting from the cost model's choice (seed 000, section 6.2 gives the start; issue 34 the
    reason): the model's costs are calibrated on other data under another load, and where the two
    strategies are within some ten per cent of each other (most of section 7's grid in this store)
    its choice is a coin toss; the query's own executions are not. Pure: the caller times the
    executions `timing` asks for and passes the seconds in (`observe`); `next_strategy` says which
    strategy the next one runs.

    The evidence is paired: log(eager / lazy) of two executions next to each other, so that both
    see the same load (on a shared machine an execution's CPU time moves by a third over seconds,
    more than the gaps decided here, so samples of the two taken at different moments cannot tell
    a 5-10 % gap; docs/coalesce.md measures it). A *round* runs pairs of the two strategies, each
    pair in the other order than the one before (choice-other, other-choice, choice-other, ...:
    each strategy follows the other as often as itself, so that the garbage and cold caches one
    leaves to the next weigh on half the pairs, not all), and is a sequential test of log(other / choice)
    against log(1 - `margin`): it ends as soon as the estimate's `confidence` interval
    (shift_interval's, the signed-rank test's; from `trials` pairs on) lies on one side, or after
    `max_trials` pairs, when the estimate's side decides (a gap within the noise costs little
    either way). Pairs are the cheap way to measure: an eager execution after a lazy one builds one sub-window's runs more than in steady
    state, one after a lazy spell builds the whole window's.

    After a round the choice runs, and one execution of the other strategy (a probe) follows
    `first_gap` executions later, the gap doubling up to `max_gap` while the choice holds and back
    to `first_gap` when it changes. A probe pairs with the median of the choice's `keep` executions
    just before it (five: each of them is timed, and a timed execution costs some per cent more than
    an untimed one, the forced plan's; nine gave the pair a spread 5 % narrower for four more timed
    executions a probe, and three opened rounds where a sure model was right; docs/coalesce.md,
    round 25) and joins the evidence (its latest `max_trials` pairs). The choice switches at a
    probe when the evidence's interval lies wholly beyond the margin on the other's side; a probe
    that favours the other by more than `margin` and lies beyond the evidence's outer tenth (the
    data may have drifted), or after which the evidence's median favours the other, opens a new
    round, whose pairs replace the evidence. With a `budget` (a share of the choice's time) a
    probe's gap is also at least the probe's cost over the budget: the other's excess (the
    evidence's median) plus the builds its last probe cost beyond a steady execution (`observe`'s
    `overhead`: an eager probe after a lazy spell builds the whole window's runs), capped at
    `max_gap`. Only the executions `timing` asks for are timed (rounds, each probe, the `keep`
    before it and the one after it); the caller reports the others with `skip`.

    Where the cost model is sure (`sure`: its predicted log(other / choice), beyond its fitted error
    by SURE_Z; issue 34: the model decides where it is sure, the choice measures where it is not)
    there is no first round, and until a round runs a probe opens one only when it contradicts the
    model by far: it finds the other cheaper by as much as the model said it was dearer (`sure`),
    or the evidence's median does; a single probe's spread (about 10 % here) would otherwise open a
    round at most probes where the gap is a few times the margin."""

    OUTER = 0.1  # a probe beyond this share of the evidence on the other's side opens a round

    def __init__(self, start: str, trials: int = 5, first_gap: int = 8, max_gap: int = 64, keep: int = 5,
                 margin: float = 0.01, budget: float = 0.0, max_trials: int = 24, confidence: float = 0.9,
                 sure: float = 0.0):
        if start not in (EAGER, LAZY):
            raise ValueError(f"start must be '{EAGER}' or '{LAZY}'")
        if not (0 <= trials <= max_trials and 1 <= max_trials and 1 <= keep and 1 <= first_gap <= max_gap and 0 <= margin < 1
                and 0 <= budget < 1 and 0.5 <= confidence < 1 and sure >= 0 and not (sure and trials)):
            raise ValueError("need 0 <= trials <= max_trials, 1 <= max_trials, 1 <= keep, 1 <= first_gap <= max_gap, 0 <= margin < 1, "
                             "0 <= budget < 1, 0.5 <= confidence < 1, sure >= 0, and no trials where sure")
        self.strategy = Strategy(start)  # the choice
        self.model_choice = self.strategy
        self.trials, self.first_gap, self.max_gap, self.keep, self.margin = trials, first_gap, max_gap, keep, margin
        self.budget = budget  # 0: gaps by doubling alone
        self.max_trials, self.confidence = max_trials, confidence
        self.sure = sure  # the sure model's log(other / choice); 0 where it is not sure
        self.samples: dict[str, list[float]] = {EAGER: [], LAZY: []}  # latest seconds per strategy, oldest first
        self.pairs: list[float] = []  # the evidence: log(eager / lazy) per pair, oldest first
        self.executions = 0
        self.probes = 0  # executions of the strategy not chosen, outside rounds
        self.switches = 0
        self.rounds = 1 if trials else 0
        self.overhead: dict[str, float] = {EAGER: 0.0, LAZY: 0.0}  # the latest probe's builds beyond a steady one
        self._gap = first_gap
        self._round: list[float] | None = [] if trials else None  # a round's pairs; None when settled
        self._half: str | None = None  # the strategy of a round's execution still unpaired
        self._half_s = 0.0
        self._after: str | None = None  # the strategy probed in the execution before (its cost follows)
        # The execution (0-based) that runs the other strategy; None in a round.
        self._next_probe: int | None = None if trials else first_gap
        self._check()

    def _other(self, strategy: str) -> Strategy:
        return LAZY if strategy == EAGER else EAGER

    def measuring(self) -> bool:
        """In a round (alternating the two strategies)?"""
        return self._round is not None

    def next_strategy(self) -> str:
        """The strategy the next execution should run."""
        if self._round is not None:
            if self._half is not None:
                return self._other(self._half)
            return self.strategy if len(self._round) % 2 == 0 else self._other(self.strategy)
        if self._next_probe is not None and self.executions >= self._next_probe:
            return self._other(self.strategy)
        return self.strategy

    def timing(self) -> bool:
        """Does the next execution need timing? In rounds, in a probe, in the `keep` executions of
        the choice before it (what the probe pairs with) and in the one after it (the builds a probe
        leaves to it); the others run untimed (`skip`), so that a settled choice pays for no clock
        (a clock read per execution is a measurable share of a cheap one)."""
        return self.untimed_ahead() == 0

    def untimed_ahead(self) -> int:
        """How many executions of the choice from the next one on need no timing (0: the next does)."""
        if self._round is not None or self._after is not None or self._next_probe is None:
            return 0
        return max(self._next_probe - self.keep - self.executions, 0)

    def skip(self, executions: int = 1) -> None:
        """`executions` executions of the choice, not timed (at most `untimed_ahead`), reported at once:
        a settled choice does no bookkeeping per execution."""
        if not 1 <= executions <= self.untimed_ahead():
            raise ValueError("these executions include one the choice needs timed")
        self.executions += executions

    def observe(self, strategy: str, seconds: float, overhead: float = 0.0) -> None:
        """One execution of `strategy`, which took `seconds` (CPU) in steady state, and `overhead`
        seconds more for builds a steady execution would not have done (after a change of strategy)."""
        if strategy not in (EAGER, LAZY):
            raise ValueError(f"strategy must be '{EAGER}' or '{LAZY}'")
        if seconds < 0 or overhead < 0:
            raise ValueError("seconds and overhead must not be negative")
        self.executions += 1
        if self._after is not None:  # the execution after a probe: its builds are the probe's cost too
            self.overhead[self._after] += overhead
            self._after = None
        self.samples[strategy] = (self.samples[strategy] + [seconds])[-self.keep:]
        if self._round is not None:
            if self._half is None:
                self._half, self._half_s = strategy, seconds
            else:
                self._round.append(self._ratio(strategy, seconds, self._half_s))
                self._half = None
                self._end_round()
        elif strategy != self.strategy:
            self._probe(strategy, seconds, overhead)
        self._check()

    def _ratio(self, strategy: str, seconds: float, others: float) -> float:
        """log(eager / lazy) of `strategy`'s seconds against the other's."""
        e, lz = (seconds, others) if strategy == EAGER else (others, seconds)
        return math.log(max(e, 1e-12) / max(lz, 1e-12))

    def _toward(self, ratios: list[float]) -> tuple[float, float | None, float | None]:
        """The estimate and interval of log(other / choice) from log(eager / lazy) ratios."""
        mid, low, high = shift_interval(ratios, self.confidence)
        if self.strategy == LAZY:
            return mid, low, high
        return -mid, (None if high is None else -high), (None if low is None else -low)

    def _probe(self, other: str, seconds: float, overhead: float) -> None:
        """A probe of `other`, paired with the median of the choice's executions just before it."""
        self.probes += 1
        self.overhead[other] = overhead
        self._after = other
        x = self._ratio(other, seconds, self.median(self.strategy))
        evidence = sorted(-r if self.strategy == EAGER else r for r in self.pairs)  # log(other / choice)
        self.pairs = (self.pairs + [x])[-self.max_trials:]
        mid, _, high = self._toward(self.pairs)
        cut = math.log(1 - self.margin)
        if high is not None and high < cut:
            self._change(Strategy(other))  # the evidence, this probe included, is sure the other is cheaper
            return
        d = -x if self.strategy == EAGER else x
        if self.sure and self.rounds == 0:  # resting on a sure model: only a contradiction by far
            opens = d < -self.sure or mid < -self.sure
        else:
            opens = (bool(evidence) and d < min(cut, evidence[int(self.OUTER * len(evidence))])) or mid < cut
        if opens:  # the data may have drifted, or the evidence turned: decide again
            self._round, self._half = [], None
            self.rounds += 1
            self._next_probe = None
            return
        self._schedule(reset=False)

    def _end_round(self) -> None:
        """The round's sequential test on log(other / choice): it ends when its interval lies below
        log(1 - margin) (switch) or above it (keep), from `trials` pairs on, or at `max_trials`
        pairs by the estimate's side of it."""
        assert self._round is not None
        mid, low, high = self._toward(self._round)
        cut = math.log(1 - self.margin)
        decided = None
        if len(self._round) >= self.trials and low is not None and high is not None:
            decided = True if high < cut else False if low > cut else None
        if decided is None and len(self._round) >= self.max_trials:
            decided = mid < cut
        if decided is None:
            return
        self.pairs, self._round = self._round[-self.max_trials:], None
        if decided:
            self._change(self._other(self.strategy))
        else:
            self._schedule(reset=self.probes == 0 and self.rounds == 1)

    def _change(self, to: Strategy) -> None:
        self.strategy = to
        self.switches += 1
        self._schedule(reset=True)

    def _schedule(self, reset: bool) -> None:
        gap = self.first_gap if reset else self._gap * 2
        self._gap = min(max(gap, self.budget_gap()), self.max_gap)
        self._next_probe = self.executions + self._gap

    def budget_gap(self) -> int:
        """The fewest executions between probes for which a probe, costing the other strategy's
        excess over the choice (the evidence's median ratio) plus the builds its last probe cost, is
        at most `budget` of the choice's time (1 without a budget)."""
        chosen = self.median(self.strategy)
        if not self.budget or chosen <= 0:
            return 1
        mid = shift_interval(self.pairs, self.confidence)[0] if self.pairs else 0.0
        other_over_chosen = math.exp(mid if self.strategy == LAZY else -mid)
        cost = max(other_over_chosen - 1, 0.0) * chosen + self.overhead[self._other(self.strategy)]
        return max(math.ceil(cost / (chosen * self.budget)), 1)

    def ratio(self) -> float:
        """The evidence's estimate of eager's time over lazy's (shift_interval's; 1.0 before any pair)."""
        return math.exp(shift_interval(self.pairs, self.confidence)[0]) if self.pairs else 1.0

    def median(self, strategy: str) -> float:
        """The median seconds of the strategy's latest executions (0.0 before any)."""
        r = sorted(self.samples[strategy])
        n = len(r)
        if not n:
            return 0.0
        return r[n // 2] if n % 2 else (r[n // 2 - 1] + r[n // 2]) / 2

    def _check(self) -> None:
        assert self.strategy in (EAGER, LAZY), f"strategy {self.strategy!r} is neither eager nor lazy"
        assert all(len(v) <= self.keep for v in self.samples.values()), "more samples kept than asked for"
        assert len(self.pairs) <= self.max_trials, "more pairs of evidence kept than asked for"
        assert self.probes <= self.executions, "more probes than executions"
        assert self.first_gap <= self._gap <= self.max_gap, "the gap between probes left its range"
        assert (self._next_probe is None) == self.measuring(), "a probe is scheduled exactly when no round runs"
        assert self._round is None or len(self._round) < self.max_trials, "a round ran past max_trials pairs"
        assert self._half is None or self._round is not None, "an unpaired execution outside a round"
        assert self.sure >= 0, "the sure model's predicted gap is negative"


# MeasuredChoice's first round where the cost model is unsure: at least TRIALS pairs (the
# signed-rank test's 90 % interval needs five), at most MAX_TRIALS (24 pairs tell a 5 % gap from none with a
# single execution's spread of about 10 %, measured on section 7's grid). Where the model is sure
# (its predicted log(eager / lazy) beyond SURE_Z x FIT_ERROR), no round (SURE_TRIALS: each
# execution of the dearer strategy costs the difference), the probes alone check it, spaced by
# their cost (BUDGET) (issue 34: the model decides where it is sure, the choice measures where it is not).
TRIALS = 5
MAX_TRIALS = 24
SURE_TRIALS = 0
# A probe that finds the other strategy a third cheaper contradicts any sure model (MeasuredChoice's
# `sure` is at most this), however far the model put the two apart.
MAX_SURE = math.log(1.5)
# After the first round, probes cost at most BUDGET of the choice's time (MeasuredChoice's budget:
# the other's excess and the builds a probe leaves), with gaps up to MAX_GAP executions: a strategy
# twice as dear as the choice is probed every 100.
BUDGET = 0.01
MAX_GAP = 128


class EagerCoalescing:
    """Eager coalescing (Algorithm 2's state): each sealed sub-window's rows coalesced once per DCQ
    into runs, kept with the sub-window while it lives (built on its first read); an execution
    merges the window's runs (merge_runs). A read is a look-up once the runs are built."""

    def __init__(self, key: tuple, decoded: Callable[[Any], list]):
        self.key = key  # the DCQ and the rows WHERE selects: what a sub-window's runs depend on
        self.decoded = decoded

    def read(self, sub) -> tuple:
        runs = self.kept(sub)
        return (EAGER, self.build(sub) if runs is None else runs)

    def kept(self, sub) -> Runs | None:
        """The sub-window's runs if built (reads run on the loop and on the query threads)."""
        with _EAGER_LOCK:
            by_key = _EAGER_RUNS.get(sub)
            return None if by_key is None else by_key.get(self.key)

    def build(self, sub) -> Runs:
        """Build and keep the sub-window's runs (a race builds them twice, alike)."""
        runs = coalesce_rows(self.decoded(sub))
        with _EAGER_LOCK:
            _EAGER_RUNS.setdefault(sub, {})[self.key] = runs
        return runs


class LazyCoalescing:
    """Lazy coalescing (Algorithm 1): a read takes the sub-window's rows; an execution coalesces
    the window's rows (TemporalPlan.finish)."""

    def __init__(self, read_rows: Callable[[Any], Any]):
        self.read_rows = read_rows

    def read(self, sub) -> tuple:
        return (LAZY, self.read_rows(sub))


class TemporalPlan:
    """How a Plan reads and finishes a temporal query (planner/plan.py delegates to it). Its
    strategy is the cost model's choice, or, once `measure_with` gives it a clock (a periodic
    query in the server), MeasuredChoice's from the query's own executions. An execution the
    choice does not need timed is the chosen strategy's own (EagerCoalescing, LazyCoalescing):
    the same reads and finish as a forced plan's, and a count of such executions reported to the
    choice when the next timed one is due."""

    def __init__(self, bound: "BoundQuery", stream, project: Callable[[list], list[tuple]], inner_read):
        self.spec: Temporal = bound.temporal  # type: ignore[assignment]  # set: a temporal query
        self.project = project  # a projection partial's contributions -> decoded rows
        self.inner_read = inner_read
        self.where_key = repr(tuple(tuple(p for p in conj if isinstance(p, Predicate)) for conj in bound.query.where))
        self.stream = stream
        self.n_q = bound.n_q
        self.every = bound.every  # a periodic query's SLIDE in sub-windows
        self.model: Any = None
        self.cp = self.oop = self.eager_cp = self.splits = 0.0
        self._strategies: dict[str, EagerCoalescing | LazyCoalescing] = {
            EAGER: EagerCoalescing((self.spec.dcq_key, self.where_key), self.decoded), LAZY: LazyCoalescing(inner_read)}
        self.measured: MeasuredChoice | None = None
        self.clock: Callable[[], float] | None = None
        self.timed = False  # is this execution timed (measured, and MeasuredChoice.timing())
        self._untimed = 0  # executions of the choice run untimed since the choice last heard (measured)
        self._due = 0  # how many it may run so before the choice needs to hear (MeasuredChoice.untimed_ahead)
        self._set(self._choose())
        # This execution's reads and eager builds (seconds, rows), timed when measuring.
        self._spent = _Spent()
        self._build_s_per_row: float | None = None  # the latest measured cost of building runs
        self._spent_lock = threading.Lock()  # reads may run on several threads

    def _set(self, strategy: str) -> None:
        """Run `strategy` from the next read on: its own read when untimed."""
        self.strategy = Strategy(strategy)
        self._run = self._strategies[self.strategy]
        self._read = self._timed_read if self.timed else self._run.read

    def _choose(self) -> str:
        w = self.stream.window
        subs = w.youngest(self.n_q) if w.latest >= 0 else []
        rows = sum(s.rows for s in subs)
        decoded = [self.decoded(sub) for sub in reversed(subs[:2])]  # the two newest, arrival order
        self.cp, self.oop = rates([r for d in decoded for r in d])
        self.eager_cp, self.splits = eager_rates([coalesce_rows(d) for d in decoded])
        reads = self.n_q / self.every if self.every else 1.0
        boundaries = (len(subs) - 1) / len(subs) if subs else 0.0
        strategy, self.model = choose(self.eager_cp, self.splits, rows, reads, boundaries, lazy_cp=self.cp)
        return strategy

    def use(self, strategy: str) -> None:
        """Force a strategy (tests and experiments compare them); no measured choice after it."""
        if strategy not in (EAGER, LAZY):
            raise ValueError(f"strategy must be '{EAGER}' or '{LAZY}'")
        self.measured = None
        self.timed = False
        self._untimed = self._due = 0
        self._set(strategy)

    def measure_with(self, clock: Callable[[], float], choice: "MeasuredChoice | None" = None) -> None:
        """From now on choose from the query's executions (MeasuredChoice, starting from the model's
        choice), timed with `clock`, the caller's CPU clock in seconds (the core reads none). Where
        the model is sure (`model_gap` beyond SURE_Z x FIT_ERROR) no round checks it, only probes;
        elsewhere a round of TRIALS to MAX_TRIALS pairs."""
        self.clock = clock
        if choice is None:
            gap = abs(self.model_gap())
            sure = gap > SURE_Z * FIT_ERROR
            choice = MeasuredChoice(self.strategy, trials=SURE_TRIALS if sure else TRIALS,
                                    max_gap=MAX_GAP, budget=BUDGET,
                                    max_trials=MAX_TRIALS, sure=min(gap, MAX_SURE) if sure else 0.0)
        self.measured = choice
        self._untimed = 0
        self._next()

    def _next(self) -> None:
        """Take the choice's strategy and timing for the next execution."""
        m = self.measured
        assert m is not None
        self._due = m.untimed_ahead()
        self.timed = self._due == 0
        self._set(m.next_strategy())

    def model_gap(self) -> float:
        """The cost model's log(eager / lazy) estimate; where one estimate is not positive (the fitted
        costs extrapolated far beyond the grid they were fitted on), as far as the other: sure."""
        e, lz = self.model.all_eager, self.model.all_lazy
        if e > 0 and lz > 0:
            return math.log(e / lz)
        return math.inf if e > lz else -math.inf

    def decoded(self, sub) -> list[tuple[tuple, int, Any]]:
        """(key tuple, ts, value) of one sub-window's selected rows, in append order."""
        k = len(self.spec.keys)
        return [(tuple(r[:k]), r[k], r[k + 1]) for r in self.project([self.inner_read(sub)])]

    def read(self, sub) -> Any:
        return self._read(sub)

    def _timed_read(self, sub) -> Any:
        """A read when measuring: a lazy read timed, an eager one's build timed (its look-up is not)."""
        clock = self.clock
        assert clock is not None
        if self.strategy == EAGER:
            eager = self._strategies[EAGER]
            assert isinstance(eager, EagerCoalescing)
            runs = eager.kept(sub)
            build_s = 0.0
            if runs is None:
                t0 = clock()
                runs = eager.build(sub)
                build_s = clock() - t0
            with self._spent_lock:
                self._spent.rows += sub.rows
                if build_s:
                    self._spent.build_s += build_s
                    self._spent.build_rows += sub.rows
            return (EAGER, runs)
        t0 = clock()
        got = self._run.read(sub)
        took = clock() - t0
        with self._spent_lock:
            self._spent.read_s += took
            self._spent.rows += sub.rows
        return got

    def _lazy_runs(self, parts: list) -> Runs:
        k = len(self.spec.keys)
        return coalesce_rows([(tuple(r[:k]), r[k], r[k + 1]) for r in self.project(parts)])

    def _window_runs(self, contributions: list) -> tuple[Runs, set]:
        """The window's runs from the reads' contributions, and their strategies."""
        kinds = {c[0] for c in contributions}
        if kinds == {EAGER}:
            return merge_runs([c[1] for c in contributions]), kinds
        if EAGER in kinds:  # (a strategy changed mid-query: re-read nothing, merge both)
            return merge_runs([c[1] if c[0] == EAGER else self._lazy_runs([c[1]]) for c in contributions]), kinds
        return self._lazy_runs([c[1] for c in contributions]), kinds

    def finish(self, contributions: list) -> list[tuple]:
        if self.timed:
            return self._timed_finish(contributions)
        rows = answer_rows(self.spec, self._window_runs(contributions)[0])
        m = self.measured
        if m is not None:  # an untimed execution of the choice: counted, told to the choice when it needs to know
            self._untimed += 1
            if self._untimed == self._due:
                m.skip(self._untimed)
                self._untimed = 0
                self._next()
        return rows

    def _timed_finish(self, contributions: list) -> list[tuple]:
        clock = self.clock
        assert clock is not None
        t0 = clock()
        runs, kinds = self._window_runs(contributions)
        rows = answer_rows(self.spec, runs)
        took = clock() - t0
        if len(kinds) == 1:
            self._measured(kinds.pop(), took)
        return rows

    def _measured(self, strategy: str, finish_s: float) -> None:
        """Report one execution to MeasuredChoice and take its next strategy. An eager execution
        is charged its steady-state build, the rows of `every` new sub-windows at the latest
        measured cost per row, rather than the builds it happened to do (after a lazy spell the
        whole window's); what it built beyond that is reported as overhead, the cost of the
        change of strategy that a probe's budget counts."""
        m = self.measured
        assert m is not None
        with self._spent_lock:
            spent, self._spent = self._spent, _Spent()
        seconds = spent.read_s + finish_s
        overhead = 0.0
        if strategy == EAGER:
            if spent.build_rows:
                self._build_s_per_row = spent.build_s / spent.build_rows
            new = spent.rows * min((self.every or self.n_q) / max(self.n_q, 1), 1.0)
            steady = (self._build_s_per_row or 0.0) * new
            seconds += steady
            overhead = max(spent.build_s - steady, 0.0)
        m.observe(strategy, max(seconds, 0.0), overhead)
        self._next()

    def _check(self) -> None:
        assert self._run is self._strategies[self.strategy], "the running strategy is not the one chosen"
        assert self._read == (self._timed_read if self.timed else self._run.read), "an untimed read not the strategy's own"
        assert self.measured is not None or not self.timed and self._untimed == self._due == 0, "timing without a choice"
        assert self._untimed < self._due or self._untimed == 0, "more untimed executions than the choice allows"
        assert self.timed == (self.measured is not None and self._due == 0), "timed exactly when the choice needs it"

    def explain(self) -> str:
        m = self.model
        model = (f"section 6.2 cost model: cp {self.cp:.2f}, oop {self.oop:.2f} from the two newest sub-windows, "
                 f"{self.splits:.2f} readings re-merged per reading at a boundary; estimated eager "
                 f"{m.all_eager:,.0f} us, lazy {m.all_lazy:,.0f} us")
        c = self.measured
        if c is None:
            return f"coalesced {self.strategy} ({model})"
        if not c.pairs:
            sure = "; sure beyond its fitted error: no round, probes only" if c.sure else ""
            return (f"coalesced {c.strategy}, the cost model's choice until executions of both strategies measure "
                    f"them ({model}{sure})")
        again = ", measuring both again" if c.measuring() else ""
        return (f"coalesced {c.strategy}, measured over this query's executions{again}: eager / lazy "
                f"{c.ratio():.3f} (the Hodges-Lehmann estimate of {len(c.pairs)} pairs; latest medians eager "
                f"{c.median(EAGER) * 1e6:,.0f} us, lazy {c.median(LAZY) * 1e6:,.0f} us; the {model}, chose "
                f"{c.model_choice})")


@dataclass
class _Spent:
    """What one execution's reads spent, when measuring: the rows read, seconds of lazy reads, and
    eager builds (seconds, rows; an eager read is otherwise a look-up, not timed)."""
    rows: int = 0
    read_s: float = 0.0
    build_s: float = 0.0
    build_rows: int = 0
