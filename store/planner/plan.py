"""A plan: a bound query (binder.py) on one stream with its access path, and the steps that turn
sub-window partials into an Answer (merge, HAVING, ORDER BY/LIMIT, decoding, the outer query),
each delegated to its module in this package. Also the probe path's one atomic read, `explain`,
and run_plan for callers without a scheduler. It owns the order of those steps, not their work."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, cast

import numpy as np

from .. import frequent_query
from ..aggregates import Partial
from ..approx import estimates_out, is_sketch, merged_sketch, sketch_cells
from ..binder import BoundQuery, bind
from ..cumulative import Cumulative
from ..functions import Probes, ReadsKeySynopsis
from ..hop import Hop
from ..kinds import AccessPath
from ..memo import contribution_key, large
from ..query import Query
from ..schema import decimal_type
from ..slicing import SlicedHop, SliceReader
from ..stream import Stream
from ..subwindow import SubWindow
from ..synopsis import NULL_KEY
from ..window import COUNT_KEY
from .access import resolve_access
from .decode import decimal_columns, decimal_rows, decode_composite_keys, decode_keys, decode_values
from .merge import finish_groups, finish_values
from .order import group_rows, limit_rows, sorted_positions, top_candidates
from .read import reader
from .subquery import outer_columns, outer_row
from ..temporal import TemporalPlan


@dataclass(slots=True)
class Answer:
    """A query's answer: its columns, rows, the access path that read it and what is known of its
    exactness. Slots, not a __dict__: a shared execution makes one per due window and slide (a
    thousand concurrent windows: some hundreds a slide, docs/windows.md Benchmark), so its making
    and freeing are on the hot path of the sliced windows' sustained rate (issue 31)."""

    columns: list[str]
    rows: list[tuple]
    access: str
    exact: bool = True
    guaranteed: bool | None = None  # APPROXIMATE top k: provably the true top k
    types: list[str] | None = None  # int64, int128, float64 or string per column
    # sketch aggregates (store/approx.py): one bound per approximate cell, as (row, column, ErrorBound)
    bounds: list | None = None
    # sketch aggregates: (column, Estimate) whose sketches a partition returns on request (approx.merged_sketch);
    # a periodic query's (Plan.keeps_sketches): (column, (kind, size, bytes, dropped error)), serialized
    sketches: list | None = field(default=None, compare=False, repr=False)
    # a landmark or CUMULATE answer: the bounds [start, end) of the one window it is over, which the
    # answer reports (Result.window_start_ms/_end_ms) instead of the sub-windows it read
    window: tuple[int, int] | None = field(default=None, compare=False)


class Plan:
    def __init__(self, bound: BoundQuery, stream: Stream, access: AccessPath):
        self.bound = bound
        self.query: Query = bound.query
        self.stream = stream
        self.strings = stream.strings
        self.n_q = bound.n_q
        self.access = access
        self.aggs = bound.aggs
        self.labels = bound.columns
        self.types = bound.types
        self.supports_remove = all(b.fn.removable for b in bound.aggs)
        self.as_of: int | None = bound.query.as_of_slide  # AS OF SLIDE k: a pinned read (see the scheduler)
        self._scales = {i: decimal_type(t)[1] for i, t in enumerate(self.types) if t.startswith("decimal(")}  # type: ignore[index]  # a decimal type
        self._key_columns = tuple(dict.fromkeys(a.column for a in self.aggs if a.column))  # (running per-key totals)
        self._sketched = any(is_sketch(a.fn) for a in self.aggs)
        # A periodic query registered with return_sketches (a partition's, docs/partitions.md): its
        # answers carry each sketch aggregate's merged sketch, serialized (answer logs pin none).
        self.keeps_sketches = False
        # Resolved once: a read is on the hot path of every query (one per sub-window).
        self.read = reader(bound, access, self.strings, stream.spec.topk)  # type: ignore[method-assign,assignment]  # shadows the method
        self._inner: Plan | None = None
        self._window_form: tuple | None = None  # (window_form, made once)
        self.slices: SliceReader | None = None  # windows that cut sub-windows: the reader of any slices
        if bound.hop is not None:  # per window (hop.py): the inner plan finishes each window's partials
            self._inner = Plan(bound.hop.inner, stream, access)
            if isinstance(bound.hop, SlicedHop):  # windows that cut sub-windows (slicing.py): parts read from rows
                rows = self._inner if access == AccessPath.WINDOW else Plan(bound.hop.inner, stream, AccessPath.WINDOW)
                self.slices = bound.hop.slice_reader(self._inner.read, rows.read, access, self.strings)
                self.read = bound.hop.sliced_reader(self.slices)  # type: ignore[method-assign,assignment]  # shadows the method
            else:
                self.read = bound.hop.reader(self._inner.read, stream.spec.subwindow_ms)  # type: ignore[method-assign,assignment]  # shadows the method
        self._temporal: TemporalPlan | None = None
        if bound.temporal is not None:  # over coalesced intervals (temporal.py): eager or lazy, chosen here
            self._temporal = TemporalPlan(bound, stream, self._projection_rows, self.read)
            self.read = self._temporal.read  # type: ignore[method-assign]  # shadows the method
        self.memo_key = self._memo_key()

    def _memo_key(self) -> tuple | None:
        """What keys this plan's reads in a sub-window's memo (memo.py), or None when a lone run
        does not keep them: only a window scan's, without GROUP BY, projection or window shape
        (their contributions grow with the rows or are not one sub-window's), of aggregates whose
        contribution is bounded. The key is memo.contribution_key (the query but for RANGE, SLIDE,
        LIMIT, AS OF): the same query reads the same contribution from the same sealed rows at any
        length; its text binds to one stream, whose sub-windows hold the memo."""
        b = self.bound
        if self.access != AccessPath.WINDOW or b.hop is not None or b.temporal is not None or large(self):
            return None
        return contribution_key(self)

    # -- reading: one sub-window at a time (read.py) ---------------------------------------------
    def read(self, sub: SubWindow) -> Any:  # replaced per instance in __init__
        raise AssertionError("unreachable")

    # -- finishing -----------------------------------------------------------------------------
    def finish(self, partial: Partial) -> Answer:
        b = self.bound
        if b.hop is not None:
            inner = self._inner
            assert inner is not None
            if isinstance(b.hop, SlicedHop):
                return self.finish_windows(b.hop.answers(inner.finish, partial))
            window = b.hop.bounds(partial) if isinstance(b.hop, (Cumulative, Hop)) else None
            return Answer(self.labels, b.hop.finish(inner.finish, partial), str(self.access), types=self.types,
                          window=window)
        contributions = partial.ordered()
        if self._temporal is not None:
            return self._answer(self._temporal.finish(contributions))
        if b.projection:
            rows = self._projection_rows(contributions)
            if b.projection_order:  # ties keep window order
                rows = [rows[i] for i in sorted_positions(len(rows), [([r[item] for r in rows], descending)
                                                                      for item, descending in b.projection_order])]
            return self._answer(limit_rows(rows, b.limit))
        if b.approximate:
            return self._approximate(contributions)
        if b.group_by is None:
            values = finish_values(b, contributions, self.strings)
            return self._answer(limit_rows(self._having_one(values), b.limit))
        return self._groups_answer(contributions)

    def finish_inner(self, partial: Partial) -> Answer:
        """A query answered per window (hop.py, slicing.py): one window's inner answer from its
        partial (a shared execution of several window sequences finishes each window with it)."""
        assert self._inner is not None, "a plan answered per window"
        return self._inner.finish(partial)

    def finish_inner_values(self, values: list) -> Answer:
        """One window's inner answer from its aggregates' values (an ungrouped inner query whose
        windows' contributions a shared execution combined and lowered at once): HAVING, LIMIT
        and the answer's form, as finish does after finish_values."""
        inner = self._inner
        assert inner is not None and inner.bound.group_by is None, "an ungrouped query answered per window"
        return inner._answer(limit_rows(inner._having_one(values), inner.bound.limit))

    def inner_columns(self, values: list[list]) -> tuple[list[list], list[bool] | None]:
        """Many windows' inner answers at once from their aggregates' values (`values`: per
        aggregate one value per window, as finish_inner_values takes one window's), by column:
        per inner item its values over the windows (decimals as Decimals), and which windows' answers
        have their row (None: all; HAVING over all windows in one evaluation, LIMIT 0 none). Row w
        of the columns is what finish_inner_values' answer holds for window w (a shared execution's
        columnar answers, store/slicing_shared.py, build its members' answers from them only when
        they are read, all of one answer form at once)."""
        inner = self._inner
        assert inner is not None and inner.bound.group_by is None and not inner._sketched, \
            "an ungrouped query answered per window, without sketches"
        b = inner.bound
        n = len(values[0]) if values else 0
        columns = [values[it.agg] for it in b.items]  # type: ignore[index]  # no GROUP BY: aggregates only
        if inner._scales:
            columns = decimal_columns(columns, inner._scales)
        if b.limit == 0:
            return columns, [False] * n
        if b.having is not None:
            return columns, b.having.keep(n, lambda ref: values[ref[1]])
        return columns, None

    @property
    def window_form(self) -> tuple:
        """What a sliced query's one-window answers depend on besides the window (window_answers):
        plans of equal forms answer equal windows equally."""
        got = self._window_form
        if got is None:
            hop, inner = self.bound.hop, self._inner
            assert isinstance(hop, SlicedHop) and inner is not None
            if hop.picks is None:
                got = (None, tuple(inner.labels), tuple(inner.types), str(inner.access))
            else:
                got = (hop.picks, hop.hidden_rows, hop.limit, tuple(self.labels), tuple(self.types), str(self.access))
            self._window_form = got
        return got

    def window_answers(self, los: list[int], his: list[int], columns: list[list], keep: list[bool] | None) -> list[Answer]:
        """A sliced query's answers over windows [los[w], his[w]) from their inner answers by column
        (inner_columns'), all at once: what finish_windows gives for each window's inner answer
        (also for the plans of an equal window_form). The rows are made by column (one zip), then
        one Answer per window, which each member is owed when its answer is delivered."""
        hop, inner = self.bound.hop, self._inner
        assert isinstance(hop, SlicedHop) and inner is not None
        if hop.picks is None:
            labels, access, types = inner.labels, str(inner.access), inner.types
        else:
            labels, access, types = self.labels, str(self.access), self.types
            columns, keep = hop.window_columns(los, his, columns, keep)
        rows = zip(*columns) if columns else [()] * len(los)
        # (positional: columns, rows, access, exact, guaranteed, types; a third cheaper than by keyword, per Answer)
        if keep is None:
            return [Answer(labels, [row], access, True, None, types) for row in rows]
        return [Answer(labels, [row] if k else [], access, True, None, types) for row, k in zip(rows, keep)]

    def finish_windows(self, answers: list[tuple[int, int, Any]]) -> Answer:
        """A sliced query's answer from its windows' (start, end, inner answer), start order: the
        rows of every window with their bounds, or without the bounds the newest window's answer
        (its inner answer on no rows before a window lies within the sub-windows read)."""
        hop, inner = self.bound.hop, self._inner
        assert isinstance(hop, SlicedHop) and inner is not None
        if hop.picks is None:
            return answers[-1][2] if answers else inner._answer([])
        return Answer(self.labels, hop.rows(answers), str(self.access), types=self.types)

    def _projection_rows(self, contributions: list) -> list[tuple]:
        b = self.bound
        by_column = {}
        for i, c in enumerate(dict.fromkeys(b.projection)):
            typ = self.stream.schema.types[c]
            values = [v for part in contributions for v in decode_values(part[i][1], typ, self.strings)]
            valid = [part[i][2] for part in contributions]
            if any(m is not None for m in valid):
                flags = [ok for part, m in zip(contributions, valid)
                         for ok in (m.tolist() if m is not None else [True] * len(part[i][1]))]
                values = [v if ok else None for v, ok in zip(values, flags)]
            by_column[c] = values
        return list(zip(*(by_column[c] for c in b.projection)))

    def _having_one(self, values: list) -> list[tuple]:
        """The one row of a query without GROUP BY, unless HAVING drops it."""
        b = self.bound
        if b.having is not None and not b.having.keep(1, lambda ref: [values[ref[1]]])[0]:
            return []
        return [tuple(values[it.agg] for it in b.items)]  # type: ignore[index]  # no GROUP BY: aggregates only

    def _groups_answer(self, contributions: list) -> Answer:
        keys, results = finish_groups(self.bound, contributions, self.strings)
        if self.bound.outer:
            row = outer_columns(self.bound, results)
            if row is not None:
                return self._answer([row])
        keys, results = top_candidates(self.bound, keys, results)
        rows = self._group_rows(keys, results)
        if self.bound.outer:
            rows = [outer_row(self.bound.outer, rows)]
        return self._answer(rows)

    def _answer(self, rows: list[tuple], **kw) -> Answer:
        if self._sketched and rows:
            if self.bound.every is None:  # one-time: a periodic query's kept answers pin no sketches
                kw["sketches"] = sketch_cells(rows)
            elif self.keeps_sketches:  # serialized now: the answer log keeps bytes, not sub-windows' sketches
                kw["sketches"] = [(c, merged_sketch(e)) for c, e in sketch_cells(rows)]
            rows, kw["bounds"] = estimates_out(rows)
            kw["exact"] = False
        if self._scales:  # decimal results are computed on value * 10**s integers: as Decimals now
            rows = decimal_rows(rows, self._scales)
        # the path's plain spelling: an answer is state (answer logs), compared and digested as logged
        return Answer(self.labels, rows, str(self.access), types=self.types, **kw)

    def _group_rows(self, keys: np.ndarray, results: list[np.ndarray]) -> list[tuple]:
        b = self.bound
        if len(b.group_keys) > 1:
            columns = decode_composite_keys(keys, b.group_types, self.strings)
        else:
            columns = [decode_keys(keys, b.group_type, self.strings)]
        values = [r.tolist() for r in results]
        if b.having is not None:  # HAVING: only the groups whose condition is true
            keep = b.having.keep(len(columns[0]), lambda ref: values[ref[1]] if ref[0] == "agg" else columns[ref[1]])
            columns = [[v for v, k in zip(col, keep) if k] for col in columns]
            values = [[v for v, k in zip(col, keep) if k] for col in values]
        return group_rows(columns[0], values, b.order, b.limit, b.items, columns[1:])

    def _approximate(self, contributions: list) -> Answer:
        b = self.bound
        rows, fields = frequent_query.answer(b, contributions, lambda keys: decode_keys(
            np.asarray(keys, dtype=object if any(k == NULL_KEY for k in keys) else None), b.group_type, self.strings))
        return self._answer(rows, **fields)

    # -- the probe path ----------------------------------------------------------------------------
    def explain(self) -> dict:
        """What this plan reads, for `windowstore explain`: its access path and why, the
        sub-windows its window covers, how many reads the scheduler makes, and per aggregate where
        its value comes from."""
        if self.access == AccessPath.PROBE and self.probes_now():
            reads, how = 1, ("one read of the window-level synopses of the current state: running totals "
                             "(COUNT, integer SUM), dyadic MIN/MAX blocks, running per-key totals")
        elif self.access in (AccessPath.PROBE, AccessPath.SYNOPSIS):
            reads, how = self.n_q, ("the per-sub-window synopses (counts, sums, minima and maxima, per key and "
                                    "top-k lists), one sub-window per read, merged")
        else:
            why = ("coalescing" if self._temporal is not None else "WHERE" if self.bound.where else "a projection" if self.bound.projection else
                   "several GROUP BY columns" if len(self.bound.group_keys) > 1 else
                   "an aggregate no synopsis answers")
            reads, how = self.n_q, f"a scan of the rows of each sub-window, one per read ({why} needs the rows)"
            if self._temporal is not None:
                how += "; " + self._temporal.explain()
        if self.access == AccessPath.WINDOW:
            source = "rows"
        elif self.bound.approximate:
            source = "top-k lists"
        else:
            source = "per-key synopses" if self.bound.group_by is not None else "synopses"
        out = {"access": self.access, "how": how, "streams": [self.stream.name], "subwindows": self.n_q,
               "reads": reads, "group_by": list(self.bound.group_keys),
               "aggregates": [(b.label, b.fn.name, "sketches" if is_sketch(b.fn) and source != "rows" else source)
                              for b in self.aggs]}
        describe = getattr(self.bound.hop, "describe", None)  # session, ROWS, PARTITION BY (window_shapes.py)
        return {**out, **describe(self.n_q)} if describe is not None else out

    def probes_now(self) -> bool:
        """Whether probe() answers from window-level synopses now. A GROUP BY's running per-key
        totals may not be kept (key_running.py): it is then read sub-window by sub-window, as a
        synopsis scan (its `read`), so that a long merge does not become one atomic operation."""
        g = self.bound.group_by
        return g is None or self.stream.window.running_keys[g].kept(self.stream.window.latest)

    def probe(self) -> Answer:
        """Answer from the window-level synopses in one atomic read of the current state."""
        w = self.stream.window
        if self.bound.group_by is not None:  # (only while probes_now(): otherwise it is scanned)
            ks = w.key_totals(self.bound.group_by, self.n_q, self._key_columns)
            return self._groups_answer([(ks.keys,  # type: ignore[union-attr]  # kept while probes_now()
                                         tuple([cast(ReadsKeySynopsis, a.fn).read_key_synopsis(a, ks) for a in self.aggs]))])
        count = w.running_total(COUNT_KEY, self.n_q)
        values = [cast(Probes, a.fn).probe(a, w, self.n_q, count) for a in self.aggs]
        return self._answer(limit_rows(self._having_one(values), self.bound.limit))


def plan_query(query: Query, stream: Stream, access: str | None = None, periodic: bool = False,
               keeps_sketches: bool = False, work_clock: Callable[[], float] | None = None) -> Plan:
    """Bind `query` to `stream` and choose the cheapest exact access path.

    `access` forces a path ('window' always works; 'synopsis' and 'probe' only where they answer
    the query): tests compare paths, operators diagnose. `periodic`: planned for registration;
    `keeps_sketches`: its answers carry their merged sketches (RegisterQueryRequest.return_sketches).
    `work_clock` (CPU seconds; periodic plans): a temporal query then chooses eager or lazy from
    paired executions of both (temporal.MeasuredChoice) rather than from the cost model alone."""
    if query.expr is not None:  # a query with expressions (expr_query.py)
        from ..expr_query import ExprPlan
        return ExprPlan(query, stream, access, periodic)  # type: ignore[return-value]  # a Plan's interface
    bound = bind(query, stream.schema, stream.spec, periodic)
    plan = Plan(bound, stream, resolve_access(bound, stream, access))
    plan.keeps_sketches = keeps_sketches
    if work_clock is not None and periodic and plan._temporal is not None:
        plan._temporal.measure_with(work_clock)
    return plan


def run_plan(plan: Plan) -> Answer:
    """Execute a plan against the current window in one go (no concurrency: tests, tools)."""
    if plan.access == AccessPath.PROBE and plan.probes_now():  # (as the scheduler runs it)
        return plan.probe()
    partial = Partial()
    w = plan.stream.window
    subs = w.youngest(plan.n_q) if plan.as_of is None else w.as_of(plan.as_of, plan.n_q)
    for sub in subs:
        partial.add(sub.slide, plan.read(sub))
    return plan.finish(partial)
