"""Differential tester of window joins (store/join/) against DuckDB, in the style of
tests/differential.py (whose SQL helpers and answer comparison it reuses).

Each case is generated from (seed, index) alone: 2-4 sources over 1-4 streams (a stream may be joined
with itself), each stream with its own schema, sub-window length (500, 1000 or 2000 ms), number of
sub-windows and number of slides (so the sub-windows read are of different ages per stream), a random
history sealed by manual slides in event-time order across streams, and one join query (about 8% of
them deliberately invalid). The query is evaluated at 1-3 checkpoints of the history with one plan
that keeps its state between them, in one of three modes:

- lazy:    the plan is only evaluated at the checkpoints (new sub-windows joined then, as groups);
- eager:   plan.refresh() after every slide of a joined stream, evaluation at the checkpoints;
- nocache: JoinPlan(cache=False): every evaluation from scratch.

About half the cases are typed (drawn from a generator of their own, so the others are the cases of
before): every column but ts may hold NULLs (per column, a probability from 0 to 1), and streams get
boolean, timestamp, date and decimal(p,s) columns (tests/differential.py's value generators and
literals; the decimal type is the stream's own, so decimal keys of different scales meet, and int64
keys meet decimal ones). Those columns appear in equalities, WHERE (with IS [NOT] NULL), GROUP BY,
aggregates (AVG of a decimal a DOUBLE, as DuckDB's AVG)
and projections.

Some cases compact a stream's string dictionary mid-history (live sub-windows are swapped for
renumbered copies: the plan must notice), and some run with a tiny row limit, where the contract is:
ResourceLimit is raised whenever the join's true result exceeds the limit, never when the product of
the inputs' sizes fits, and any answer given is right (also at later checkpoints of the same plan).

At each checkpoint the rows every source reads (its stream's youngest min(n_Q, slides) sub-windows)
are loaded into DuckDB, one table per source, and the query is translated to SQL by this file:
equalities as `=`, bands as exact HUGEINT differences, filters exactly as tests/differential.py
translates them, aggregates likewise. The store is driven only through its public API (Stream,
WindowSpec, parse_statement, to_text, plan_join, JoinPlan, window_inputs).

    python tests/join_differential.py --cases 5000 --seed 1
    python tests/join_differential.py --seed 1 --case 42       # one case, printed in full

The contract (beyond tests/differential.py's, which holds for the aggregates):
- the join is the inner join of the sources' windows under every equality (values equal; strings by
  value across the streams' dictionaries; -0.0 = 0.0) and every band (low <= x - y <= high, exactly);
  WITHIN w = |ts_i - ts_j| <= w for every pair; WHERE filters the joined rows;
- a grouped answer is ordered by key unless ORDER BY; ORDER BY ties are broken by the key;
- a projection (no aggregate) keeps duplicate rows; it is ordered by its ORDER BY columns, then by
  every selected column ascending; an un-aliased item is named as written ("a.src");
- NULL as SQL: a NULL in an ON column joins nothing, a filter on NULL is unknown (the row is dropped),
  aggregates skip NULLs, GROUP BY has one NULL group, NULL sorts last both ways; timestamps answer as
  microseconds and dates as days since the epoch, decimals as Decimals of their result type's scale.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field, replace
from random import Random
from typing import Optional

sys.path.insert(0, os.path.dirname(__file__))

import differential as D  # noqa: E402  (the single-stream harness: SQL helpers, comparison)

NAMES = ["S0", "S1", "S2", "net.flows"]
ALIASES = ["a", "b", "c", "d", "p", "q1", "f"]
OUT_ALIASES = ["t", "total", "cnt", "m", "v", "hi", "lo", "q9"]
COLUMN_KINDS = {"k": "string", "s": "string", "g": "int64", "n": "int64", "x": "int64", "y": "float64"}
# Typed cases (about half, drawn from their own generator so that the others are the cases of before):
# NULLs in every column but ts, and boolean, timestamp, date and decimal(p,s) columns (a stream's own
# precision and scale: decimal keys of different scales join by value, as int64 with decimal does).
TYPED_KINDS = {"ok": "boolean", "at": "timestamp", "day": "date", "amt": "decimal"}
EVERY_TYPE = ("int64", "float64", "string", "boolean", "timestamp", "date", "decimal")
KEYISH = {"g", "n", "k", "s", "ok", "at", "day", "amt"}  # low-cardinality columns: equalities find partners


# --------------------------------------------------------------------------------------------------
# The harness's query AST
# --------------------------------------------------------------------------------------------------
@dataclass
class Ref:
    src: int                 # source index
    col: str
    text: str = ""           # as written in the query


@dataclass
class Agg:
    func: str                # count*, count, count_distinct, sum, avg, min, max, quantile, median
    ref: Optional[Ref] = None
    q: Optional[str] = None
    alias: Optional[str] = None


@dataclass
class Key:
    ref: Ref
    alias: Optional[str] = None


@dataclass
class Cmp:
    ref: Ref
    op: str
    lit: tuple


@dataclass
class InList:
    ref: Ref
    negate: bool
    lits: list


@dataclass
class IsNull:
    ref: Ref
    negate: bool             # IS NOT NULL


@dataclass
class BoolOp:
    op: str
    parts: list
    parens: bool = False


@dataclass
class Eq:
    left: Ref
    right: Ref


@dataclass
class BandC:
    col: Ref
    base: Ref
    low: Optional[int]
    high: Optional[int]
    form: str = "between"    # between | ge | gt | le | lt | eq


@dataclass
class OrderKey:
    ref: str                 # ordinal, output name, or column text
    direction: str
    agg: Optional[Agg] = None
    col: Optional[Ref] = None  # projection: ORDER BY a column (selected or not)


@dataclass
class SourceSpec:
    stream: int              # index into Case.streams
    alias: Optional[str]
    range_text: Optional[tuple]  # (value text, unit text) or None
    m: Optional[int]         # sub-windows read (None = whole window)
    on: list = field(default_factory=list)
    alias_after: bool = False  # write the alias after the window spec

    def name(self, case: "Case") -> str:
        return self.alias if self.alias is not None else case.streams[self.stream].name


@dataclass
class JQuery:
    sources: list
    items: list
    where: object = None
    within: Optional[int] = None     # ms
    within_text: Optional[tuple] = None
    group_by: Optional[Ref] = None
    order_by: list = field(default_factory=list)
    limit: Optional[int] = None
    outer: Optional[list] = None
    projection: bool = False
    invalid: Optional[str] = None
    tokens: tuple = ()


@dataclass
class StreamSpec:
    name: str
    schema: list             # [(name, type)] with ts first
    profiles: dict
    t: int                   # sub-window ms
    n: int                   # sub-windows
    slides: list             # rows per slide
    splits: list
    nulls: dict = field(default_factory=dict)  # typed cases: column -> probability of a NULL

    @property
    def types(self) -> dict:
        return dict(self.schema)


@dataclass
class Case:
    seed: int
    index: int
    streams: list
    events: list             # ("slide", stream index, slide number) | ("compact", stream index)
    checkpoints: list        # event counts after which the query is evaluated
    mode: str                # lazy | eager | nocache
    max_rows: int
    query: JQuery
    style: D.Style

    def text(self) -> str:
        return render_query(self, self.query, self.style)

    def visible(self, src: SourceSpec, upto: int) -> list:
        """Rows source `src` reads after the first `upto` events."""
        st = self.streams[src.stream]
        k = sum(1 for e in self.events[:upto] if e[0] == "slide" and e[1] == src.stream)
        take = min(st.n if src.m is None else src.m, st.n, k)
        return [r for rows in st.slides[k - take:k] for r in rows]


# --------------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------------
def render_agg(a: Agg, st: D.Style) -> str:
    f = a.func
    if f == "count*":
        body = st.k("count") + "(*)"
    elif f == "count_distinct":
        body = f"{st.k('count')}({st.k('distinct')} {a.ref.text})"
    elif f == "quantile":
        body = f"{st.k('quantile')}({a.ref.text}{st.comma}{a.q})"
    else:
        body = f"{st.k(f)}({a.ref.text})"
    return body + (f" {st.k('as')} {a.alias}" if a.alias else "")


def render_item(it, st: D.Style) -> str:
    if isinstance(it, Key):
        return it.ref.text + (f" {st.k('as')} {it.alias}" if it.alias else "")
    return render_agg(it, st)


def render_cond(c, st: D.Style) -> str:
    if isinstance(c, Cmp):
        return f"{c.ref.text}{st.op_space}{c.op}{st.op_space}{D.render_lit(c.lit)}"
    if isinstance(c, InList):
        neg = st.k("not") + " " if c.negate else ""
        return f"{c.ref.text} {neg}{st.k('in')} (" + st.comma.join(D.render_lit(x) for x in c.lits) + ")"
    if isinstance(c, IsNull):
        return f"{c.ref.text} {st.k('is')} " + (st.k("not") + " " if c.negate else "") + st.k("null")
    body = f" {st.k(c.op)} ".join(render_cond(p, st) for p in c.parts)
    return f"({body})" if c.parens else body


def offset_text(base: Ref, off: int, rng_style: int) -> str:
    if off == 0 and rng_style % 3 == 0:
        return base.text
    if off % 1000 == 0 and off and rng_style % 3 == 1:
        return f"{base.text} {'-' if off < 0 else '+'} {abs(off) // 1000} s"
    if off < 0 and rng_style % 3 == 2:
        return f"{base.text} {off}"  # a negative number token right after the column
    return f"{base.text} {'-' if off < 0 else '+'} {abs(off)}"


def render_join_cond(c, st: D.Style, salt: int) -> str:
    if isinstance(c, Eq):
        return f"{c.left.text}{st.op_space}={st.op_space}{c.right.text}"
    if c.form == "between":
        return (f"{c.col.text} {st.k('between')} {offset_text(c.base, c.low, salt)} {st.k('and')} "
                f"{offset_text(c.base, c.high, salt + 1)}")
    op, off = {"ge": (">=", c.low), "gt": (">", None if c.low is None else c.low - 1), "le": ("<=", c.high),
               "lt": ("<", None if c.high is None else c.high + 1), "eq": ("=", c.low)}[c.form]
    return f"{c.col.text} {op} {offset_text(c.base, off, salt if c.form != 'eq' else 1)}"


def render_query(case: Case, q: JQuery, st: D.Style) -> str:
    parts = [f"{st.k('select')} " + st.comma.join(render_item(it, st) for it in q.items), st.k("from")]
    for i, s in enumerate(q.sources):
        text = ("" if i == 0 else (st.k("inner") + " " if (case.index + i) % 4 == 0 else "") + st.k("join") + " ")
        text += case.streams[s.stream].name
        alias = ""
        if s.alias is not None:
            alias = (f" {st.k('as')} " if (case.index + i) % 3 == 0 else " ") + s.alias
        window = ""
        if s.range_text is not None:
            window = f"{st.range_space}[{st.k('range')} {s.range_text[0]} {s.range_text[1]}]"
        text += (window + alias) if s.alias_after else (alias + window)
        if s.on:
            text += f" {st.k('on')} " + f" {st.k('and')} ".join(
                render_join_cond(c, st, case.index + i + j) for j, c in enumerate(s.on))
        parts.append(text)
    if q.within_text is not None:
        parts.append(f"{st.k('within')} {q.within_text[0]} {q.within_text[1]}")
    if q.where is not None:
        parts.append(f"{st.k('where')} " + render_cond(q.where, st))
    if q.group_by is not None:
        parts.append(f"{st.k('group')} {st.k('by')} {q.group_by.text}")
    if q.order_by:
        parts.append(f"{st.k('order')} {st.k('by')} " + st.comma.join(
            (render_agg(o.agg, st) if o.agg else o.ref) + (" " + st.k(o.direction) if o.direction else "")
            for o in q.order_by))
    if q.limit is not None:
        parts.append(f"{st.k('limit')} {q.limit}")
    inner = " ".join(parts)
    if q.outer is None:
        return inner + (";" if st.semicolon else "")
    return (f"{st.k('select')} " + st.comma.join(D.render_agg(a, st) for a in q.outer)
            + f" {st.k('from')} ({inner})" + (";" if st.semicolon else ""))


# --------------------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------------------
def gen_value(rng: Random, kind: str, profile: str, pools: dict, col: str, slide: int, t: int):
    if col == "ts":
        if profile == "time":
            return slide * t + rng.randint(0, t - 1)
        if profile == "grid":  # on a 250 ms grid: differences hit band bounds exactly
            return slide * t + 250 * rng.randint(0, t // 250 - 1)
        return D.gen_int(rng, "wide", slide)
    if kind == "string":
        return rng.choice(pools[col])
    if kind == "float64":
        return D.gen_float(rng, profile)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind in ("timestamp", "date"):
        if profile == "key":
            return (D.US_2026 if kind == "timestamp" else D.DAY_2026) + rng.randint(0, 3)
        return D.gen_temporal(rng, kind)
    if kind.startswith("decimal("):
        if profile == "key":  # a few values every scale can hold, some only the larger scales
            return rng.choice(decimal_keys(kind))
        return D.gen_decimal(rng, kind)
    if profile == "key":
        return rng.randint(-1, 4)
    return D.gen_int(rng, profile, slide)


def decimal_keys(typ: str) -> list:
    from decimal import Decimal
    p, sc = D.decimal_of(typ)
    keys = [Decimal(x) for x in ("0", "1", "-2", "0.5", "2.25", "3")]
    return [v for v in keys if -v.as_tuple().exponent <= sc and abs(v) < 10 ** (p - sc)]


def gen_streams(rng: Random, count: int, wide_ts: bool, trng: Optional[Random] = None) -> list:
    """`trng` (typed cases only): draws the typed columns and the NULLs."""
    shared = rng.sample(D.STRING_POOL, rng.randint(2, 7))
    pools = {"k": shared, "s": rng.sample(shared, rng.randint(max(1, len(shared) - 2), len(shared)))}
    horizon = rng.randint(2, 12) * 1000
    grid = rng.choice(["time", "grid"])
    streams = []
    for i in range(count):
        cols = ["ts"] + rng.sample(["k", "g", "n", "x", "y", "s"], rng.randint(2, 4))
        if "k" not in cols and "g" not in cols:
            cols.append(rng.choice(["k", "g"]))
        rest = cols[1:]
        rng.shuffle(rest)
        schema = [("ts", "int64")] + [(c, COLUMN_KINDS[c]) for c in rest]
        profiles = {"ts": "wide" if wide_ts else grid}
        for c in rest:
            kind = COLUMN_KINDS[c]
            profiles[c] = ("key" if c in ("g", "n") else rng.choice(["small", "small", "wide", "overflow"])) \
                if kind == "int64" else rng.choice(["exact", "exact", "wild"]) if kind == "float64" else "strings"
        nulls = {}
        if trng is not None:
            for c in trng.sample(sorted(TYPED_KINDS), trng.randint(1, 4)):
                kind = TYPED_KINDS[c]
                typ = "decimal(%d,%d)" % trng.choice(D.DECIMAL_TYPES) if kind == "decimal" else kind
                schema.insert(trng.randint(1, len(schema)), (c, typ))
                profiles[c] = "key" if kind == "boolean" or trng.random() < 0.75 else "wide"
            nulls = {c: trng.choice([0, 0, 0.1, 0.3, 0.7, 1.0]) for c, _ in schema[1:]}
        t = rng.choice([500, 1000, 1000, 2000])
        n = rng.randint(1, 5)
        k = max(0, horizon // t + rng.choice([-2, -1, 0, 0, 0, 1]))  # its own number of slides: different ages
        slides, splits = [], []
        per_sub = rng.choice([3, 4, 6]) if count <= 3 else rng.choice([3, 4, 5])
        for j in range(k):
            r = rng.random()
            m = 0 if r < 0.07 else rng.randint(1, per_sub) if r < 0.9 else rng.randint(per_sub, 3 * per_sub)
            rows = [tuple(None if nulls.get(c) and trng.random() < nulls[c] else
                          gen_value(rng, typ, profiles[c], pools, c, j, t) for c, typ in schema)
                    for _ in range(m)]
            slides.append(rows)
            parts, left = [], m
            while left:
                c = rng.randint(1, left)
                parts.append(c)
                left -= c
            splits.append(parts)
        streams.append(StreamSpec(NAMES[i], schema, profiles, t, n, slides, splits, nulls))
    return streams


class QueryGen:
    def __init__(self, rng: Random, case_streams: list, sources: list, case_index: int, typed: bool = False):
        self.rng, self.streams, self.sources, self.case_index = rng, case_streams, sources, case_index
        self.typed = typed  # every type in filters, keys, aggregates and projections; IS [NOT] NULL
        self._literals: dict = {}

    def literal(self, src: int, col: str) -> tuple:
        """A literal for a typed column, drawn next to its data as tests/differential.py draws them."""
        st = self.streams[self.sources[src].stream]
        gen = self._literals.get(st.name)
        if gen is None:
            gen = self._literals[st.name] = D.QueryGen(self.rng, st.schema, st.profiles, {}, st.n, st.slides, (), True)
        return gen.literal(col)

    def every(self, *types: str) -> tuple:
        """`types`, or every type in a typed case."""
        return EVERY_TYPE if self.typed else types

    def types(self, src: int) -> dict:
        return self.streams[self.sources[src].stream].types

    def profiles(self, src: int) -> dict:
        return self.streams[self.sources[src].stream].profiles

    def name(self, src: int) -> str:
        s = self.sources[src]
        return s.alias if s.alias is not None else self.streams[s.stream].name

    def ref(self, src: int, col: str, qualify: Optional[bool] = None) -> Ref:
        owners = [i for i in range(len(self.sources)) if col in self.types(i)]
        qualify = qualify if qualify is not None else (len(owners) > 1 or self.rng.random() < 0.7)
        text = f"{self.name(src)}.{col}" if qualify else col
        return Ref(src, col, text)

    def cols(self, src: int, *types: str) -> list:
        return [c for c, t in self.types(src).items() if t in types or ("decimal" in types and t.startswith("decimal("))]

    def any_ref(self, *types: str) -> Ref:
        choices = [(i, c) for i in range(len(self.sources)) for c in self.cols(i, *types)]
        i, c = self.rng.choice(choices)
        return self.ref(i, c)

    # -- join conditions: every source j >= 1 joined to an earlier one (a connected graph)
    def conditions(self, within: bool) -> None:
        rng = self.rng
        for j in range(1, len(self.sources)):
            conds = []
            if within and rng.random() < 0.4:
                self.sources[j].on = []
                continue
            for _ in range(rng.choice([1] * 17 + [2] * 3 + [3])):
                i = rng.randrange(j)
                c = self.condition(i, j)
                if c is not None:
                    conds.append(c)
            if not conds:
                conds.append(self.band(rng.randrange(j), j))
            if rng.random() < 0.2:  # a second band to an earlier source: all but one filter the joined rows
                bands = [c for c in conds if isinstance(c, BandC) and c.low is not None and c.high is not None]
                if bands and rng.random() < 0.7:  # the same columns, overlapping bounds
                    b = rng.choice(bands)
                    lo, hi = b.low + 250 * rng.randint(-2, 2), b.high + 250 * rng.randint(-2, 2)
                    conds.append(BandC(b.col, b.base, lo, hi) if lo <= hi else BandC(b.col, b.base, lo, None, "ge"))
                else:
                    conds.append(self.band(rng.randrange(j), j))
            self.sources[j].on = conds

    def condition(self, i: int, j: int):
        rng = self.rng
        if rng.random() < 0.45:
            return self.band(i, j)
        ti, tj = self.types(i), self.types(j)
        pairs = [(a, b) for a in ti for b in tj if key_kind(ti[a]) == key_kind(tj[b]) and a != "ts" and b != "ts"
                 and (a == b or {a, b} <= {"g", "n", "k", "s", "amt"})]
        keys = [(a, b) for a, b in pairs if a in KEYISH and b in KEYISH]
        if keys and rng.random() < 0.97:  # mostly low-cardinality keys: joins that find partners
            pairs = keys
        if not pairs:
            return self.band(i, j)
        a, b = rng.choice(pairs)
        left, right = self.ref(j, b), self.ref(i, a)
        return Eq(left, right) if rng.random() < 0.5 else Eq(right, left)

    def band(self, i: int, j: int) -> BandC:
        rng = self.rng
        ci, cj = "ts", "ts"
        if rng.random() < 0.15:
            ints_i = [c for c in self.cols(i, "int64") if self.profiles(i)[c] in ("key", "small")] or ["ts"]
            ints_j = [c for c in self.cols(j, "int64") if self.profiles(j)[c] in ("key", "small")] or ["ts"]
            ci, cj = rng.choice(ints_i), rng.choice(ints_j)
        col, base = (self.ref(j, cj), self.ref(i, ci)) if rng.random() < 0.6 else (self.ref(i, ci), self.ref(j, cj))
        # widths of about a sub-window or more, centred near 0 (the streams' clocks are aligned);
        # multiples of 250 ms, so that "grid" timestamps hit the bounds exactly
        w = rng.choice([0, 1]) if rng.random() < 0.08 else 250 * rng.randint(2, 16) + rng.choice([0, 0, 0, -1, 1])
        lo = 250 * rng.randint(-(w // 500) - 3, 2)
        hi = lo + w
        if rng.random() < 0.04:
            hi = lo - 1  # empty band
        if (col.col == "ts") != (base.col == "ts"):  # ts against a small column: a one-sided band
            lo, hi = (-10**19 // 2, None) if rng.random() < 0.5 else (None, 10**18)
            return BandC(col, base, lo, hi, "ge" if hi is None else "le")
        if col.col != "ts":
            lo, hi = rng.choice([(0, 0), (-1, 1), (-2, 0), (-1, 3), (-10**19 // 2, 10**18)])
        form = rng.choice(["between"] * 6 + ["ge", "gt", "le", "lt", "eq"])
        if form in ("ge", "gt"):
            hi = None
        elif form in ("le", "lt"):
            lo = None
        elif form == "eq":
            hi = lo
        return BandC(col, base, lo, hi, form)

    # -- WHERE
    def cond(self, atoms: int):
        rng = self.rng
        if atoms == 1:
            return self.atom()
        left = rng.randint(1, atoms - 1)
        op = rng.choice(["and", "or"])
        parts = [self.cond(left), self.cond(atoms - left)]
        for p in parts:
            if isinstance(p, BoolOp) and (op == "and" and p.op == "or" or rng.random() < 0.3):
                p.parens = True
        return BoolOp(op, parts)

    def atom(self):
        rng = self.rng
        r = self.any_ref(*self.every("int64", "float64", "string"))
        typ = self.types(r.src)[r.col]
        if self.typed and rng.random() < 0.2:
            return IsNull(r, rng.random() < 0.5)
        if typ not in ("int64", "float64", "string"):
            if rng.random() < 0.2:
                return InList(r, rng.random() < 0.3, [self.literal(r.src, r.col) for _ in range(rng.randint(1, 3))])
            return Cmp(r, rng.choice(["=", "!=", "<", "<=", ">", ">="]), self.literal(r.src, r.col))
        data = [row[[c for c, _ in self.streams[self.sources[r.src].stream].schema].index(r.col)]
                for rows in self.streams[self.sources[r.src].stream].slides for row in rows]
        data = [v for v in data if v is not None]
        if typ == "string":
            lit = ("str", rng.choice(data) if data and rng.random() < 0.6 else rng.choice(D.STRING_POOL))
        elif typ == "int64":
            lit = ("num", str(rng.choice(data)) if data and rng.random() < 0.6 else rng.choice(D.INT_LITERALS))
        else:
            lit = ("num", repr(rng.choice(data)) if data and rng.random() < 0.6 else rng.choice(D.FLOAT_LITERALS))
        if rng.random() < 0.2:
            return InList(r, rng.random() < 0.3, [lit] + ([("str", "zz")] if typ == "string" else [("num", "3")]))
        return Cmp(r, rng.choice(["=", "!=", "<", "<=", ">", ">="]), lit)

    # -- select list
    def agg(self) -> Agg:
        rng = self.rng
        f = rng.choice(["count*", "count", "count_distinct", "sum", "sum", "avg", "min", "max", "quantile", "median"])
        if f == "count*":
            return Agg(f)
        ref = self.any_ref(*(("int64", "float64", "decimal") if self.typed else ("int64", "float64"))) \
            if f in ("sum", "avg", "quantile", "median") else self.any_ref(*self.every("int64", "float64", "string"))
        return Agg(f, ref, rng.choice(D.QUANTILE_FRACTIONS) if f == "quantile" else None)

    def exact_key(self, a: Agg) -> bool:
        if a.func in ("count*", "count", "count_distinct", "min", "max", "quantile", "median"):
            return True
        t, p = self.types(a.ref.src)[a.ref.col], self.profiles(a.ref.src)[a.ref.col]
        if t.startswith("decimal("):
            return a.func == "sum" or p in ("key", "small")  # exact sums; AVG a double, as of int64
        if a.func == "sum":
            return t == "int64" or p == "exact"
        return (t == "int64" and p in ("key", "small")) or (t == "float64" and p == "exact")

    def aggregate_query(self, q: JQuery, nested: bool) -> None:
        rng = self.rng
        items = [self.agg() for _ in range(rng.choice([1, 1, 2, 2, 3, 4]))]
        grouped = nested or rng.random() < 0.55
        if grouped:
            q.group_by = self.any_ref(*(("int64", "string", "boolean", "timestamp", "date", "decimal")
                                        if self.typed else ("int64", "string")))
            if rng.random() < 0.8:
                key_ref = Ref(q.group_by.src, q.group_by.col, q.group_by.text if rng.random() < 0.7
                              else self.ref(q.group_by.src, q.group_by.col, True).text)
                items.insert(0 if rng.random() < 0.7 else rng.randint(0, len(items)),
                             Key(key_ref, rng.choice(OUT_ALIASES) if rng.random() < 0.25 else None))
        taken = {it.alias for it in items if isinstance(it, Key) and it.alias}
        for it in items:
            if isinstance(it, Agg) and rng.random() < (0.85 if nested else 0.3):
                it.alias = rng.choice([a for a in OUT_ALIASES if a not in taken])
                taken.add(it.alias)
        q.items = items
        if grouped and rng.random() < 0.55:
            refs = [str(i + 1) for i in range(len(items))] + [out_name(it) for it in items if out_name(it)]
            for _ in range(rng.choice([1, 1, 2])):
                direction = rng.choice(["", "asc", "desc", "desc"])
                if rng.random() < 0.15:
                    a = self.agg()
                    a = Agg(a.func, a.ref, a.q)
                    if self.exact_key(a):
                        q.order_by.append(OrderKey(render_agg(a, D.Style()), direction, a))
                    continue
                if rng.random() < 0.2:
                    q.order_by.append(OrderKey(q.group_by.text, direction))
                    continue
                ref = rng.choice(refs)
                target = resolve_item(ref, items)
                if target is not None and isinstance(items[target], Agg) and not self.exact_key(items[target]):
                    continue
                q.order_by.append(OrderKey(ref, direction))
        if grouped and rng.random() < 0.35:
            q.limit = rng.choice([0, 1, 1, 2, 3, 5])
        elif not grouped and rng.random() < 0.05:
            q.limit = rng.choice([0, 1])

    def projection_query(self, q: JQuery) -> None:
        rng = self.rng
        q.projection = True
        items = []
        for _ in range(rng.choice([1, 2, 2, 3, 4])):
            items.append(Key(self.any_ref(*self.every("int64", "float64", "string"))))
        taken = set()
        for it in items:
            if rng.random() < 0.25:
                it.alias = rng.choice([a for a in OUT_ALIASES if a not in taken])
                taken.add(it.alias)
        names = [out_name(it) for it in items]
        q.items = items
        for _ in range(rng.choice([0, 1, 1, 2])):
            direction = rng.choice(["", "asc", "desc"])
            r = rng.random()
            if r < 0.35:
                q.order_by.append(OrderKey(str(rng.randint(1, len(items))), direction))
            elif r < 0.6 and any(it.alias for it in items):
                q.order_by.append(OrderKey(rng.choice([it.alias for it in items if it.alias]), direction))
            else:
                col = self.any_ref(*self.every("int64", "float64", "string"))
                if col.text in names and names.count(col.text) > 1:
                    continue
                q.order_by.append(OrderKey(col.text, direction, col=col))
        if rng.random() < 0.7:
            q.limit = rng.choice([0, 1, 3, 5, 10, 20])


def key_kind(typ: str) -> str:
    """Equality classes of types: exact numbers (int64, decimal(p,s)) compare across types and scales."""
    return "exact" if typ == "int64" or typ.startswith("decimal(") else typ


def out_name(it) -> Optional[str]:
    if it.alias:
        return it.alias
    return it.ref.text if isinstance(it, Key) else None


def resolve_item(ref: str, items: list) -> Optional[int]:
    if ref.isdigit():
        return int(ref) - 1
    for i, it in enumerate(items):
        if out_name(it) == ref:
            return i
    return None


def gen_case(seed: int, index: int) -> Case:
    rng = Random(f"windowstore-join-differential:{seed}:{index}")
    n_sources = rng.choice([2, 2, 2, 3, 3, 4])
    n_streams = n_sources if rng.random() < 0.85 else max(1, n_sources - 1)
    trng = Random(f"windowstore-join-differential-typed:{seed}:{index}")
    typed = trng.random() < 0.5
    streams = gen_streams(rng, n_streams, wide_ts=rng.random() < 0.08, trng=trng if typed else None)
    # which stream each source reads: every stream at least once; a self-join repeats one
    which = list(range(n_streams)) + [rng.randrange(n_streams) for _ in range(n_sources - n_streams)]
    rng.shuffle(which)
    sources = []
    aliased = rng.random() < 0.75 or len(set(which)) < len(which)
    free = list(ALIASES)
    rng.shuffle(free)
    for i, s in enumerate(which):
        alias = free.pop() if aliased or rng.random() < 0.3 else None
        st = streams[s]
        m, text = None, None
        if rng.random() < 0.5:
            m = rng.randint(1, st.n)
            choices = [(str(m), "SUBWINDOWS"), (str(m * st.t), "ms")]
            if (m * st.t) % 1000 == 0:
                choices.append((str(m * st.t // 1000), "s"))
            text = rng.choice(choices)
        sources.append(SourceSpec(s, alias, text, m, alias_after=rng.random() < 0.2))
    # the events: slides of every stream in the order their sub-windows end, compactions now and then
    slides = sorted(((j + 1) * st.t, i, j) for i, st in enumerate(streams) for j in range(len(st.slides)))
    events = []
    for _, i, j in slides:
        events.append(("slide", i, j))
        if rng.random() < 0.04:
            events.append(("compact", rng.randrange(len(streams))))
    checkpoints = sorted(set(rng.sample(range(len(events) + 1), min(rng.choice([0, 1, 2]), len(events) + 1))
                             + [len(events)]))
    mode = rng.choice(["lazy", "lazy", "eager", "eager", "nocache"])
    max_rows = rng.choice([2_000_000] * 9 + [rng.choice([0, 1, 5, 40])])
    qg = QueryGen(rng, streams, sources, index, typed)
    q = JQuery(sources, [])
    if rng.random() < 0.12:
        w = rng.choice([0, 500, 1000, 2000, 3000])
        q.within = w
        q.within_text = rng.choice([(str(w), "ms")] + ([(str(w // 1000), "s")] if w % 1000 == 0 else []))
    qg.conditions(q.within is not None)
    r = rng.random()
    if r < 0.25:
        qg.projection_query(q)
    elif r < 0.3:
        qg.aggregate_query(q, nested=True)
        gen_outer(rng, qg, q)
    else:
        qg.aggregate_query(q, nested=False)
    if rng.random() < 0.4:
        q.where = qg.cond(rng.choice([1, 1, 2, 2, 3]))
    if rng.random() < 0.08:
        q = make_invalid(rng, qg, q, streams)
    style = D.Style(kw=rng.choice(["upper", "upper", "lower", "title"]), comma=rng.choice([", ", ",", " , "]),
                    op_space=rng.choice([" ", "", " "]), range_space=rng.choice([" ", ""]),
                    semicolon=rng.random() < 0.05)
    return Case(seed, index, streams, events, checkpoints, mode, max_rows, q, style)


def gen_outer(rng: Random, qg: QueryGen, q: JQuery) -> None:
    names = [(out_name(it), it) for it in q.items if out_name(it)]
    itype = {}
    for nm, it in names:
        if isinstance(it, Key):
            itype[nm] = qg.types(it.ref.src)[it.ref.col]
        else:
            itype[nm] = item_type(it, qg.types(it.ref.src) if it.ref else {})
    outer = []
    for _ in range(rng.choice([1, 1, 2])):
        f = rng.choice(["count*", "count", "sum", "avg", "min", "max", "quantile", "median"])
        # numeric outer aggregates of numbers (AVG of a decimal: Spark's rounding, see test_join.py)
        pool = [nm for nm, _ in names if f in ("count", "min", "max") or itype[nm] in ("int64", "float64")
                or (itype[nm].startswith("decimal(") and f != "avg")]
        if f == "count*" or not pool:
            outer.append(D.Agg("count*"))
            continue
        outer.append(D.Agg(f, rng.choice(pool), rng.choice(D.QUANTILE_FRACTIONS) if f == "quantile" else None))
    q.outer = outer
    q.itypes = itype


def make_invalid(rng: Random, qg: QueryGen, q: JQuery, streams: list) -> JQuery:
    kinds = ["unknown alias", "unknown column", "key types", "cross product", "band on a string",
             "ON refers to a later source", "RANGE too long", "not grouped"]
    shared = [c for c in COLUMN_KINDS if sum(c in qg.types(i) for i in range(len(q.sources))) > 1]
    if shared:
        kinds.append("ambiguous column")
    if len(q.sources) == 4:
        kinds.append("five streams")
    if len(set(s.alias for s in q.sources if s.alias)) > 1:
        kinds.append("alias twice")
    kind = rng.choice(kinds)
    q.invalid = kind
    if kind == "unknown alias":
        bad = Ref(0, "k", "zz.k")
        q.items = q.items + [Agg("count", bad)] if not q.projection else q.items + [Key(bad)]
        q.tokens = ("zz.k", "zz")
    elif kind == "unknown column":
        bad = Ref(0, "nope", f"{qg.name(0)}.nope")
        q.where = Cmp(bad, "=", ("num", "1"))
        q.tokens = (bad.text, "nope")
    elif kind == "ambiguous column":
        col = rng.choice(shared)
        q.where = Cmp(Ref(0, col, col), "=", ("str", "a") if COLUMN_KINDS[col] == "string" else ("num", "1"))
        q.tokens = (col,)
    elif kind == "key types":
        j = rng.randrange(1, len(q.sources))
        i = rng.randrange(j)
        ti, tj = qg.types(i), qg.types(j)
        pairs = [(a, b) for a in ti for b in tj if key_kind(ti[a]) != key_kind(tj[b])]
        if not pairs:  # one schema joined with itself, say
            q.invalid = None
            return q
        a, b = rng.choice(pairs)
        left, right = qg.ref(j, b, True), qg.ref(i, a, True)
        q.sources[j].on = q.sources[j].on + [Eq(left, right)]
        q.tokens = (left.text, right.text)
    elif kind == "cross product":
        j = rng.randrange(1, len(q.sources))
        for s in q.sources:
            s.on = [c for c in s.on if j not in _cond_sources(c)]
        q.within = q.within_text = None
        q.tokens = ("JOIN", "INNER")
    elif kind == "band on a string":
        j = rng.randrange(1, len(q.sources))
        i = rng.randrange(j)
        strs = [(qq, c) for qq in (i, j) for c in qg.cols(qq, "string")]
        if not strs:
            q.invalid = None
            return q
        src, c = rng.choice(strs)
        col = qg.ref(src, c, True)
        base = qg.ref(j if src == i else i, "ts", True)
        q.sources[j].on = q.sources[j].on + [BandC(col, base, 0, 10)]
        q.tokens = (col.text, c)
    elif kind == "ON refers to a later source":
        late = len(q.sources) - 1
        if late < 2:
            q.invalid = None
            return q
        j = rng.randrange(1, late)
        bad = qg.ref(late, "ts", True)
        q.sources[j].on = q.sources[j].on + [BandC(bad, qg.ref(0, "ts", True), 0, 1)]
        q.tokens = (bad.text, qg.name(late))
    elif kind == "RANGE too long":
        s = rng.choice(q.sources)
        st = streams[s.stream]
        s.range_text, s.m = (str(st.n + 1), "SUBWINDOWS"), None
        q.tokens = (str(st.n + 1), "SUBWINDOWS")
    elif kind == "not grouped":
        col = qg.any_ref("int64", "string")
        q.items = [Key(col), Agg("count*")]
        q.group_by, q.order_by, q.outer, q.projection = None, [], None, False
        q.tokens = (col.text,)
    elif kind == "five streams":
        s = SourceSpec(q.sources[0].stream, "zfive", None, None, [BandC(Ref(4, "ts", "zfive.ts"),
                                                                      qg.ref(0, "ts", True), 0, 0)])
        q.sources = q.sources + [s]
        q.tokens = ("JOIN", "INNER")
    elif kind == "alias twice":
        named = [s for s in q.sources if s.alias]
        named[-1].alias = named[0].alias
        q.tokens = ("JOIN", "INNER", named[0].alias)
    return q


def _cond_sources(c) -> set:
    if isinstance(c, Eq):
        return {c.left.src, c.right.src}
    return {c.col.src, c.base.src}


# --------------------------------------------------------------------------------------------------
# Reference: DuckDB
# --------------------------------------------------------------------------------------------------
def col_name(r: Ref) -> str:
    """DuckDB's name of a source's column: q<source>.<column>, one name across all sources (so that
    tests/differential.py's SQL of a comparison, which quotes a bare column name, applies unchanged)."""
    return f"q{r.src}.{r.col}"


def col_sql(r: Ref) -> str:
    return D.qi(col_name(r))


def cond_sql(c, types) -> str:
    if isinstance(c, Cmp):
        return D.sql_cmp(col_name(c.ref), types(c.ref), c.op, c.lit)
    if isinstance(c, InList):
        body = "(" + " OR ".join(D.sql_cmp(col_name(c.ref), types(c.ref), "=", lit) for lit in c.lits) + ")"
        return f"(NOT {body})" if c.negate else body
    if isinstance(c, IsNull):
        return f"({col_sql(c.ref)} IS {'NOT ' if c.negate else ''}NULL)"
    return "(" + f" {c.op.upper()} ".join(cond_sql(p, types) for p in c.parts) + ")"


def band_sql(c: BandC) -> str:
    diff = f"(CAST({col_sql(c.col)} AS HUGEINT) - CAST({col_sql(c.base)} AS HUGEINT))"
    out = []
    if c.low is not None:
        out.append(f"{diff} >= CAST('{c.low}' AS HUGEINT)")
    if c.high is not None:
        out.append(f"{diff} <= CAST('{c.high}' AS HUGEINT)")
    return "(" + " AND ".join(out) + ")"


def agg_sql(a: Agg, types):
    f = a.func
    if f == "count*":
        return "count(*)", None
    c = col_sql(a.ref)
    typ = types(a.ref)
    if f == "count":
        return f"count({c})", None
    if f == "count_distinct":
        return f"count(DISTINCT {c})", None
    if f in ("min", "max"):
        return D.as_int(f"{f}({c})", typ), None
    if f in ("quantile", "median"):
        return D.quantile_sql(c, a.q if f == "quantile" else "0.5"), None
    if typ.startswith("decimal("):
        if f == "sum":
            return f"sum({c})", None  # DECIMAL(38, s): exact
        return f"avg({c})", f"1e-12 * abs(avg({c}))"  # AVG: a DOUBLE, as DuckDB's
    if f == "sum":
        if typ == "int64":
            return f"sum({c})", None
        return f"fsum({c})", f"(count({c}) + 3) * {D.EPS_SQL} * fsum(abs({c})) + 1e-300"
    if typ == "int64":
        return f"avg({c})", f"1e-12 * abs(avg({c}))"
    value = f"(fsum({c}) / NULLIF(count({c}), 0))"
    return value, (f"(count({c}) + 3) * {D.EPS_SQL} * fsum(abs({c})) / NULLIF(count({c}), 0)"
                   f" + 2 * {D.EPS_SQL} * abs({value}) + 1e-300")


def sort_sql(expr: str, typ: str) -> str:
    return f"({expr} + CAST(0 AS DOUBLE))" if typ == "float64" else expr


def item_type(a: Agg, types: dict) -> str:
    """The type of an aggregate's answer (as the store types it; int64 stands for int128)."""
    if a.func in ("count*", "count", "count_distinct"):
        return "int64"
    typ = types[a.ref.col]
    dec = D.decimal_of(typ)
    if a.func == "avg":
        return "float64"  # of a decimal too (DuckDB's type)
    if a.func == "sum" and dec:
        return f"decimal(38,{dec[1]})"
    return typ


def translate(case: Case):
    q = case.query

    def types(r: Ref) -> str:
        return case.streams[q.sources[r.src].stream].types[r.col]

    joins = []
    for s in q.sources:
        for c in s.on:
            joins.append(f"({col_sql(c.left)} = {col_sql(c.right)})" if isinstance(c, Eq) else band_sql(c))
    if q.within is not None:
        for j in range(1, len(q.sources)):
            for i in range(j):
                joins.append(f"(abs(CAST({col_sql(Ref(j, 'ts'))} AS HUGEINT) - CAST({col_sql(Ref(i, 'ts'))} AS HUGEINT))"
                             f" <= {q.within})")
    conds = joins + ([cond_sql(q.where, types)] if q.where is not None else [])
    frm = " FROM " + ", ".join(f"src{i} AS q{i}" for i in range(len(q.sources)))
    where = (" WHERE " + " AND ".join(conds)) if conds else ""
    cols, tols, specs = [], [], []
    if q.projection:
        for i, it in enumerate(q.items):
            cols.append(f"{D.as_int(col_sql(it.ref), types(it.ref))} AS {D.qi(f'__c{i}')}")
            specs.append(D.OutSpec(types(it.ref), f"projection {types(it.ref)}", out_name(it)))
        order = []
        for o in q.order_by:
            if o.col is not None:
                ref = o.col
            else:
                idx = resolve_item(o.ref, q.items)
                ref = q.items[idx].ref
            order.append(sort_sql(col_sql(ref), types(ref)) + (" DESC" if o.direction == "desc" else " ASC")
                         + " NULLS LAST")
        order += [sort_sql(col_sql(it.ref), types(it.ref)) + " ASC NULLS LAST" for it in q.items]
        sql = "SELECT " + ", ".join(cols) + frm + where + " ORDER BY " + ", ".join(order)
        if q.limit is not None:
            sql += f" LIMIT {q.limit}"
        return sql, specs
    grouped = q.group_by is not None
    for i, it in enumerate(q.items):
        if isinstance(it, Key):
            value, tol, typ = D.as_int(col_sql(it.ref), types(it.ref)), None, types(it.ref)
            desc = f"key({typ})"
        else:
            value, tol = agg_sql(it, types)
            typ = item_type(it, {it.ref.col: types(it.ref)} if it.ref else {})
            desc = ("COUNT(*)" if it.func == "count*" else f"{it.func.upper()}({types(it.ref)})") + \
                (" grouped" if grouped else "")
        cols.append(f"{value} AS {D.qi(f'__c{i}')}")
        spec = D.OutSpec(typ, desc, out_name(it))
        if tol:
            spec.tol = len(q.items) + len(tols)
            tols.append(f"{tol} AS {D.qi(f'__t{i}')}")
        specs.append(spec)
    select_list = cols + tols + ([f"{col_sql(q.group_by)} AS \"__key\""] if grouped else [])
    sql = "SELECT " + ", ".join(select_list) + frm + where
    if grouped:
        sql += f" GROUP BY {col_sql(q.group_by)}"
    order = []
    for o in q.order_by:
        if o.agg is not None:
            expr = agg_sql(o.agg, types)[0]
        elif o.ref == q.group_by.text and resolve_item(o.ref, q.items) is None:
            expr = '"__key"'
        else:
            expr = D.qi(f"__c{resolve_item(o.ref, q.items)}")
        order.append(expr + (" DESC" if o.direction == "desc" else " ASC") + " NULLS LAST")
    if grouped:
        order.append('"__key" ASC NULLS LAST')
    if order:
        sql += " ORDER BY " + ", ".join(order)
    if q.limit is not None:
        sql += f" LIMIT {q.limit}"
    if q.outer is None:
        return sql, specs
    inner = {}
    for i, (it, spec) in enumerate(zip(q.items, specs)):
        name = out_name(it)
        if name:
            inner[name] = (D.qi(f"__c{i}"), spec.type, D.qi(f"__t{i}") if spec.tol is not None else None)
    ocols, otols, ospecs = [], [], []
    for i, a in enumerate(q.outer):
        value, tol = D.agg_over_inner(a, inner)
        typ = D.agg_type(a, lambda nm: inner[nm][1])
        spec = D.OutSpec(typ, "outer " + a.func.upper(), a.alias)
        if tol:
            spec.tol = len(q.outer) + len(otols)
            otols.append(f"{tol} AS {D.qi(f'__t{i}')}")
        ocols.append(f"{value} AS {D.qi(f'__c{i}')}")
        ospecs.append(spec)
    return f'WITH "__inner" AS ({sql}) SELECT ' + ", ".join(ocols + otols) + ' FROM "__inner"', ospecs


def load_sources(case: Case, con, upto: int) -> None:
    """One table per source, typed as tests/differential.py types a stream's rows (timestamp[us], date32,
    decimal128(p, s), NULLs), its columns named q<source>.<column>."""
    from types import SimpleNamespace

    for i, s in enumerate(case.query.sources):
        st = case.streams[s.stream]
        table = D.arrow_columns(SimpleNamespace(schema=st.schema), case.visible(s, upto))
        con.register(f"src{i}", table.rename_columns([f"q{i}.{c}" for c, _ in st.schema]))


def reference(case: Case, con, upto: int) -> D.Expected:
    load_sources(case, con, upto)
    sql, specs = translate(case)
    result = con.execute(sql).fetchall()
    width = len(specs)
    rows, tols = [], []
    for r in result:
        rows.append(tuple(r[:width]))
        tols.append(tuple(r[sp.tol] if sp.tol is not None else None for sp in specs))
    return D.Expected(sql, specs, rows, tols)


def join_size(case: Case, con, upto: int) -> int:
    """The number of joined rows (after the join conditions and WHERE), from DuckDB."""
    q = case.query
    load_sources(case, con, upto)
    sql = translate(replace(case, query=replace(q, projection=True, items=[Key(Ref(0, "ts", ""))], order_by=[],
                                                 limit=None, outer=None, group_by=None)))[0]
    sql = "SELECT count(*) FROM (" + sql.split(" ORDER BY ")[0] + ")"
    return con.execute(sql).fetchall()[0][0]


# --------------------------------------------------------------------------------------------------
# Running a case
# --------------------------------------------------------------------------------------------------
@dataclass
class Failure:
    case: Case
    where: str
    kind: str
    detail: str
    expected: object = None
    got: object = None
    sql: str = ""


def _columns(st: StreamSpec, rows: list) -> dict:
    return {c: [r[k] for r in rows] for k, (c, _) in enumerate(st.schema)}


def run_case(case: Case, con) -> list:
    from windowstore.store import InvalidInput, Stream, WindowSpec
    from windowstore.store.errors import ResourceLimit
    from windowstore.store.join import JoinPlan, plan_join, window_inputs
    from windowstore.store.parser import parse_statement, to_text

    text = case.text()
    streams = {}
    for st in case.streams:
        streams[st.name] = Stream(st.name, dict(st.schema), WindowSpec(subwindows=st.n, subwindow_ms=st.t, clock="manual"),
                                  created_ms=0)
    q = case.query
    if q.invalid:
        err = None
        try:
            plan = plan_join(parse_statement(text), streams)
        except Exception as e:
            err = e
        f = D.check_error(_as_single(case), "bind", err, (InvalidInput,), text)
        return [Failure(case, f.path, f.kind, f.detail)] if f else []
    try:
        parsed = parse_statement(text)
        again = parse_statement(to_text(parsed))
    except Exception as e:
        return [Failure(case, "parse", f"refused valid query: {type(e).__name__}", str(e))]
    if again != parsed:
        return [Failure(case, "parse", "to_text round trip", f"{to_text(parsed)!r}")]
    try:
        plan = plan_join(parsed, streams, max_rows=case.max_rows, cache=case.mode != "nocache")
    except Exception as e:
        return [Failure(case, "bind", f"refused valid query: {type(e).__name__}", str(e))]
    failures = []
    joined = {st.name for st in case.streams}
    done = 0
    for cp in case.checkpoints:
        while done < cp:
            ev = case.events[done]
            st = case.streams[ev[1]]
            stream = streams[st.name]
            if ev[0] == "slide":
                j = ev[2]
                start = 0
                for size in st.splits[j]:
                    stream.append(_columns(st, st.slides[j][start:start + size]))
                    start += size
                stream.window.slide((j + 1) * st.t)
                if case.mode == "eager" and st.name in joined:
                    try:
                        plan.refresh(window_inputs(plan, streams))
                    except ResourceLimit:
                        pass  # the bound is judged at the next checkpoint, against the true join size
                    except Exception as e:
                        return failures + [Failure(case, f"refresh@{done}", f"crash: {type(e).__name__}", repr(e))]
            else:
                stream.compact_strings()
            done += 1
        where = f"checkpoint@{cp}"
        exp = reference(case, con, cp)
        try:
            ans = plan.evaluate(window_inputs(plan, streams))
        except ResourceLimit as e:
            size = join_size(case, con, cp)
            product = 1
            for s in q.sources:
                product *= len(case.visible(s, cp))
            if product <= case.max_rows:
                failures.append(Failure(case, where, "ResourceLimit though the inputs' product fits",
                                        f"{e} (product {product}, limit {case.max_rows}, join {size})", exp.rows,
                                        None, exp.sql))
            continue
        except Exception as e:
            failures.append(Failure(case, where, f"crash in evaluate: {type(e).__name__}", repr(e), exp.rows, None,
                                    exp.sql))
            continue
        if case.max_rows < 2_000_000:
            size = join_size(case, con, cp)
            if size > case.max_rows:
                failures.append(Failure(case, where, "no ResourceLimit though the join exceeds the limit",
                                        f"{size} rows, limit {case.max_rows}", exp.rows, ans.rows, exp.sql))
                continue
        diff = D.compare(exp, list(ans.columns), list(ans.rows))
        if diff:
            failures.append(Failure(case, where, diff[0], diff[1], exp.rows, [tuple(r) for r in ans.rows], exp.sql))
        if ans.access != "join" or ans.types != plan.types:
            failures.append(Failure(case, where, "answer metadata", f"{ans.access} {ans.types}"))
    if not failures and case.max_rows >= 2_000_000:
        fresh = JoinPlan(plan.bound, plan.strings, cache=False)
        ans = fresh.evaluate(window_inputs(fresh, streams))
        exp = reference(case, con, len(case.events))
        diff = D.compare(exp, list(ans.columns), list(ans.rows))
        if diff:
            failures.append(Failure(case, "fresh plan", diff[0], diff[1], exp.rows, list(ans.rows), exp.sql))
    return failures


def _as_single(case: Case):
    """What differential.check_error reads of a case: .query.invalid and .query.tokens."""
    return D.Case(case.seed, case.index, [], {}, 1, (), [], [], [], D.Query(None, invalid=case.query.invalid,
                                                                           tokens=case.query.tokens), D.Style())


# --------------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------------
def format_case(case: Case) -> str:
    lines = [f"seed={case.seed} case={case.index}   rerun: python tests/join_differential.py --seed {case.seed} "
             f"--case {case.index}", f"mode={case.mode} max_rows={case.max_rows} checkpoints={case.checkpoints}"]
    for st in case.streams:
        lines.append(f"stream {st.name}: schema {dict(st.schema)} profiles {st.profiles} subwindows={st.n} "
                     f"subwindow_ms={st.t} slides={len(st.slides)}")
        for j, rows in enumerate(st.slides):
            if rows:
                lines.append(f"  slide {j}: {rows!r}")
    lines.append(f"events: {case.events}")
    lines.append(f"query: {case.text()}")
    if case.query.invalid:
        lines.append(f"invalid on purpose: {case.query.invalid}; the error should name one of {case.query.tokens}")
    return "\n".join(lines)


def format_failure(f: Failure) -> str:
    out = [format_case(f.case), f"FAILED [{f.where}] {f.kind}: {f.detail}"]
    if f.sql:
        out.append(f"duckdb: {f.sql}")
    if f.expected is not None or f.got is not None:
        out.append(f"expected: {f.expected!r}")
        out.append(f"got:      {f.got!r}")
    return "\n".join(out)


@dataclass
class Report:
    cases: int = 0
    failed_cases: int = 0
    invalid: int = 0
    failures: list = field(default_factory=list)
    seconds: float = 0.0
    modes: dict = field(default_factory=dict)
    limited: int = 0

    def summary(self) -> str:
        return (f"{self.cases - self.failed_cases} passed, {self.failed_cases} failed ({self.invalid} invalid on "
                f"purpose, {self.limited} with a small row limit; modes {self.modes})")

    def text(self, show: int = 3) -> str:
        parts = []
        kinds: dict = {}
        for f in self.failures:
            kinds.setdefault(f.kind, []).append(f)
        for kind, fs in sorted(kinds.items(), key=lambda kv: -len(kv[1]))[:show]:
            parts.append(f"== {len(fs)} x {kind} ==")
            parts.append(format_failure(min(fs, key=lambda f: len(format_case(f.case)))))
        parts.append(f"{self.cases} cases in {self.seconds:.1f} s")
        parts.append(self.summary())
        return "\n".join(parts)


def gen_case_stub(seed: int, index: int) -> Case:
    return Case(seed, index, [], [], [], "-", 0, JQuery([], []), D.Style())


def run(cases: int, seed: int, start: int = 0, progress: bool = False, con=None) -> Report:
    con = con or D.duckdb_connection()
    report = Report()
    t0 = time.monotonic()
    for index in range(start, start + cases):
        try:
            case = gen_case(seed, index)
        except Exception as e:  # a harness bug: reported, not fatal
            report.cases += 1
            report.failed_cases += 1
            report.failures.append(Failure(gen_case_stub(seed, index), "-", f"generator error: {type(e).__name__}",
                                           repr(e)))
            continue
        try:
            failures = run_case(case, con)
        except Exception as e:
            failures = [Failure(case, "-", f"harness error: {type(e).__name__}", repr(e))]
        report.cases += 1
        report.invalid += bool(case.query.invalid)
        report.limited += case.max_rows < 2_000_000
        report.modes[case.mode] = report.modes.get(case.mode, 0) + 1
        if failures:
            report.failed_cases += 1
            report.failures.extend(failures)
        if progress and report.cases % 1000 == 0:
            print(f"  {report.cases} cases, {report.failed_cases} failed, {time.monotonic() - t0:.0f} s", file=sys.stderr)
    report.seconds = time.monotonic() - t0
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--case", type=int, help="run only this case and print it in full")
    ap.add_argument("--show", type=int, default=3)
    args = ap.parse_args(argv)
    con = D.duckdb_connection()
    if args.case is not None:
        case = gen_case(args.seed, args.case)
        print(format_case(case))
        failures = run_case(case, con)
        for f in failures:
            print(format_failure(f))
        print("FAILED" if failures else "passed")
        return 1 if failures else 0
    report = run(args.cases, args.seed, args.start, progress=True, con=con)
    print(report.text(show=args.show))
    return 1 if report.failed_cases else 0


if __name__ == "__main__":
    sys.exit(main())
