"""Differential tester: windowstore's query core (and, with --server, a real server through the SDK)
against DuckDB as an independent reference engine.

Each *case* is generated from (seed, index) alone: a random schema, a random history of appends and
manual slides on a window of n sub-windows, and one query text (about 5% of them deliberately invalid).
The rows the query can see are known from the history (see "Window" below); they are loaded into
DuckDB and the query is translated to SQL by this file's own translator. Nothing here imports the
store's aggregate, planner or parser code to compute an expected answer: the store is only driven
through its public API (Stream, WindowSpec, parse_query, plan_query, run_plan, InvalidInput).

    python tests/differential.py --cases 2000 --seed 1            # core: default, window, synopsis paths
    python tests/differential.py --cases 150 --seed 1 --server    # a real server through the SDK
    python tests/differential.py --seed 1 --case 42               # re-run one case, print everything

The contract encoded here (the semantics the query core must implement)
-----------------------------------------------------------------------
Window. With n sub-windows, after k slides the window holds the rows appended before slides
max(0, k-n) .. k-1; rows appended after the last slide sit in the open buffer and are not visible.
`[RANGE m SUBWINDOWS]` (= `[RANGE m*1000 ms]` = `[RANGE m s]` with 1 s sub-windows, m <= n) reads
the youngest min(m, k) sub-windows; without RANGE, the whole window.

1. SUM over int64 is exact and never wraps: a Python int, possibly beyond int64 (DuckDB HUGEINT).
   AVG over int64 = exact sum / count as a float (compared with relative tolerance 1e-12).
   SUM/AVG over float64 are compared with |got - exp| <= (N+1) * 2**-52 * sum(|x|) (+1e-300), N the
   number of values, since summation order may differ. (This file uses N+3: the reference is
   DuckDB's Kahan `fsum`, itself within ~1 * 2**-52 * sum(|x|) of the exact sum; measured.)
2. Empty input: COUNT and COUNT(DISTINCT) give 0; SUM, AVG, MIN, MAX, QUANTILE give NULL (None). A
   query without GROUP BY returns exactly one row (even over an empty window) unless LIMIT 0, which
   returns none.
3. QUANTILE(col, q) is discrete: the value at 1-based rank max(1, ceil(q*N)) of the sorted values,
   q being the exact decimal written in the query (so `0.10000000000000000001` is not 0.1).
   MEDIAN(col) = QUANTILE(col, 0.5). Numeric columns only.
4. int64 column vs numeric literal: exact mathematical comparison (`x = 9007199254740993.0` matches
   only 9007199254740993; `x < 0.5` means x <= 0; `x < 99999999999999999999` is true for all rows).
   float64 column vs literal: the literal is rounded to the nearest float64 first, then compared.
   Strings compare by Unicode code point (= DuckDB's byte-wise UTF-8 order). A string column vs a
   number, or a numeric column vs a string, is an error (InvalidInput).
5. GROUP BY one or several int64 or string columns (typed cases: boolean, temporal and decimal ones
   too): one row per group; without ORDER BY rows come sorted by the keys ascending (in GROUP BY
   order); with ORDER BY, ties are broken by the group keys ascending. An ORDER BY name resolves
   against the output names first (aliases, then un-aliased labels such as a key column's name), then
   against the GROUP BY columns (which need not be selected). -0.0 == 0.0 (ties broken by key).
   HAVING keeps the groups whose condition is TRUE (NULL is unknown: NOT keeps it unknown); its
   names are a GROUP BY column first, else an output name. SELECT DISTINCT cols = GROUP BY cols.
6. MIN/MAX work on strings too (code point order) and return the string.
7. One level of sub-query: the inner rows (after its ORDER BY/LIMIT), then the outer aggregates over
   them (COUNT(*), COUNT, SUM, AVG, MIN, MAX, QUANTILE/MEDIAN; MIN/MAX also over a string column;
   numeric-only aggregates over a string column are an error). Outer SUM over an int SUM is exact.
8. Types and nulls ("typed" cases, half of them): boolean columns (MIN/MAX/COUNT/COUNT DISTINCT,
   GROUP BY, `= TRUE`, IN (TRUE, FALSE)); NULLs in every column but ts. Aggregates skip NULLs
   (COUNT(col) counts non-NULLs, SUM/AVG/MIN/MAX/QUANTILE of none are NULL, COUNT DISTINCT ignores
   NULL); a comparison or IN with NULL is unknown (the row is dropped); IS [NOT] NULL; GROUP BY puts
   NULLs in one group; NULL sorts last both ascending and descending (DuckDB's NULLS LAST).
Errors: every refused query raises InvalidInput whose message says "position" and names the
offending token.

Choices this file makes where the contract is silent (see also the report of the first run):
- COUNT(DISTINCT) of a float column counts -0.0 and 0.0 as one value (they are equal).
- ORDER BY keys are only generated on outputs every correct implementation computes exactly (keys,
  COUNT, MIN, MAX, QUANTILE, int SUM, float SUM/AVG over "exact" columns whose sums never round,
  int AVG over small ints): ties within rounding error have no defined order.
- Float literals compared with float columns stay within the float64 range (no `1e400`).
- Outputs named by an alias must carry that alias as the column name; an un-aliased key column
  carries the column's name. Labels of un-aliased aggregates are not checked.
- A non-grouped query occasionally carries ORDER BY (by ordinal or alias): accepted, no effect.

Comparison: rows in order (every generated query's order is defined); ints must be exactly equal and
of type int (not float, not numpy); strings exactly equal; floats within the tolerances above, exact
for MIN/MAX/QUANTILE (with -0.0 == 0.0); None == None. Each valid query runs through the default plan,
the forced raw-row plan (access="window") and, unless refused, access="synopsis"; any exception other
than InvalidInput there is a failure, and so is InvalidInput from the default or window plan.
"""
from __future__ import annotations

import argparse
import math
import re
import sys
import time
from dataclasses import dataclass, field, replace
from fractions import Fraction
from random import Random
from typing import Any, Callable, Optional, Union

# --------------------------------------------------------------------------------------------------
# Value pools
# --------------------------------------------------------------------------------------------------
M = -(2**63)
I64_MAX = 2**63 - 1
EPS = 2.0**-52
EPS_SQL = repr(EPS)  # '2.220446049250313e-16', round-trips exactly

INT_SPECIAL = [M, M + 1, I64_MAX, I64_MAX - 1, 2**62, -(2**62), 2**62 + 1, 2**53, 2**53 + 1,
               -(2**53) - 1, 0, 1, -1, 7, -10, 2**31, -(2**31) - 1]
# Values that make sums leave int64 in either direction, or leave it mid-way and come back.
INT_OVERFLOW = [2**62, 2**62, 2**62 + 1, -(2**62), -10, M, M, I64_MAX, 0, 1]
FLOAT_SPECIAL = [0.0, -0.0, 0.1, -0.1, 0.2, 0.3, 0.5, 1.5, -2.5, 1.0, 1e-300, -1e-300, 1e300, -1e300,
                 1e16, -1e16, 2.0**53, 3.141592653589793, 1e-5, 123456.789]
STRING_POOL = ["", "a", "A", "b", "B", "ab", "abc", "Ab", "é", "e\u0301", "e", "ß", "ss", "SS",
               "日本", "日", "本日", "z", "Z", "😀", "😀a", "\U00010348", "\uffff", "it's", "'", " ",
               "a b", "zz", "\u00ff", "\u0100"]

INT_COLS = ["x", "a", "n", "id"]
FLOAT_COLS = ["y", "f", "price"]
STRING_COLS = ["k", "s", "name"]
ALIASES = ["t", "total", "cnt", "m", "v", "hi", "lo", "q9"]
UNKNOWN_NAMES = ["nope", "missing_col", "zq"]

INT_LITERALS = ["0", "-1", "5", "9007199254740993", "9007199254740992", "9223372036854775807",
                "-9223372036854775808", "9223372036854775808", "-9223372036854775809",
                "99999999999999999999", "-99999999999999999999", "4611686018427387904",
                "0.5", "-0.5", "9007199254740993.0", "9007199254740992.5", "1e3", "2.5e1", "1E2",
                "-0.0", ".5", "5.", "3.0", "-7.0", "9223372036854775807.5", "-9223372036854775808.5",
                "9223372036854775807.0", "1e19", "1e30", "-1e30", "1e-5", "0.10000000000000000001",
                "-0.99999999999999999999", "1e400", "-1e400"]
FLOAT_LITERALS = ["0", "-0.0", "0.0", "0.1", "0.30000000000000004", "0.3", "1e-300", "-1e300",
                  "1e300", "9007199254740993", ".5", "-2.5", "1e16", "99999999999999999999", "5.", "1E2"]
QUANTILE_FRACTIONS = ["0", "0.5", "0.25", "0.75", "0.9", "0.1", "1", "1.0", ".5", "5e-1", "0.99",
                      "0.10000000000000000001", "0.33333333333333333333", "0.3333333333333333",
                      "0.6666666666666667", "0.01"]


# --------------------------------------------------------------------------------------------------
# The harness's own query AST (rendered to text for the store, translated to SQL for DuckDB)
# --------------------------------------------------------------------------------------------------
@dataclass
class Agg:
    func: str                 # count*, count, count_distinct, sum, avg, min, max, quantile, median
    col: Optional[str] = None
    q: Optional[str] = None   # QUANTILE's fraction exactly as written
    alias: Optional[str] = None


@dataclass
class Key:
    col: str
    alias: Optional[str] = None


Item = Union[Agg, Key]


@dataclass
class Cmp:
    col: str
    op: str                   # as written: = != <> < <= > >=
    lit: tuple                # ("num", text), ("str", value) or ("bool", "TRUE"/"false"/..)


@dataclass
class InList:
    col: str
    negate: bool
    lits: list


@dataclass
class IsNull:
    col: str
    negate: bool              # IS NOT NULL


@dataclass
class BoolOp:
    op: str                   # "and" / "or"
    parts: list
    parens: bool = False


Cond = Union[Cmp, InList, IsNull, BoolOp]


@dataclass
class HCmp:
    """A HAVING test `[NOT] operand op literal`: operand an Agg (written as its call) or a name (a
    GROUP BY column, or an output name that is no column name: unambiguous in every engine)."""
    operand: Any
    op: str
    lit: tuple
    negate: bool = False


@dataclass
class RangeSpec:
    value: str                # as written
    unit: str                 # as written
    m: Optional[int]          # sub-windows read; None when the RANGE is invalid


@dataclass
class OrderKey:
    ref: str                  # an ordinal ("2") or a name
    direction: str            # "", "asc", "desc"
    agg: Optional[Agg] = None  # ORDER BY an aggregate expression (selected or not); ref unused


@dataclass
class Select:
    items: list
    range: Optional[RangeSpec] = None
    where: Optional[Cond] = None
    group_by: Optional[str] = None
    order_by: list = field(default_factory=list)
    limit: Optional[int] = None
    group_more: list = field(default_factory=list)  # GROUP BY's columns after the first
    having: Any = None                               # HCmp, or BoolOp of them
    distinct: bool = False                           # SELECT DISTINCT (items: Keys only; no group_by)

    @property
    def keys(self) -> list:
        if self.distinct:
            return list(dict.fromkeys(it.col for it in self.items))
        return [] if self.group_by is None else [self.group_by, *self.group_more]


@dataclass
class Query:
    select: Select                        # the only select, or the inner one of a sub-query
    outer: Optional[list] = None          # aggregates over the inner select's output names
    sub_alias: Optional[str] = None
    invalid: Optional[str] = None         # kind of deliberate error, None for a valid query
    tokens: tuple = ()                    # acceptable "offending token" names for the error


@dataclass
class Style:
    """How the text is written: keyword case, separators. Drawn once per case."""
    kw: str = "upper"       # upper | lower | title
    comma: str = ", "
    op_space: str = " "
    range_space: str = " "
    semicolon: bool = False

    def k(self, word: str) -> str:
        return word.upper() if self.kw == "upper" else word.lower() if self.kw == "lower" else word.title()


@dataclass
class Case:
    seed: int
    index: int
    schema: list              # [(name, type)], "ts" first
    profiles: dict            # column -> value profile
    n: int                    # sub-windows
    declared: tuple           # WindowSpec.group_by
    slides: list              # rows (tuples in schema order) appended before each slide
    splits: list              # per slide: chunk sizes of its appends
    buffer: list              # rows appended after the last slide (never visible)
    query: Query
    style: Style
    nulls: dict = field(default_factory=dict)  # typed cases: column -> probability of a NULL

    @property
    def types(self) -> dict:
        return dict(self.schema)

    def text(self, stream: str = "S") -> str:
        return render_query(self.query, self.style, stream)

    def visible(self, m: Optional[int]) -> list:
        """Rows the query reads: the youngest min(m, k) of the window's sub-windows."""
        k = len(self.slides)
        take = min(self.n if m is None else m, self.n, k)
        return [r for rows in self.slides[k - take:] for r in rows]


# --------------------------------------------------------------------------------------------------
# Rendering to query text
# --------------------------------------------------------------------------------------------------
def render_lit(lit: tuple) -> str:
    kind, v = lit
    if kind in ("timestamp", "date"):
        return f"{kind.upper()} '{v}'"
    return v if kind in ("num", "bool") else "'" + v.replace("'", "''") + "'"


def render_agg(a: Agg, st: Style) -> str:
    f = a.func
    if f == "count*":
        body = st.k("count") + "(*)"
    elif f == "count_distinct":
        body = f"{st.k('count')}({st.k('distinct')} {a.col})"
    elif f == "quantile":
        body = f"{st.k('quantile')}({a.col}{st.comma}{a.q})"
    else:
        body = f"{st.k(f)}({a.col})"
    return body + (f" {st.k('as')} {a.alias}" if a.alias else "")


def render_item(it: Item, st: Style) -> str:
    if isinstance(it, Key):
        return it.col + (f" {st.k('as')} {it.alias}" if it.alias else "")
    return render_agg(it, st)


def render_cond(c: Cond, st: Style) -> str:
    if isinstance(c, Cmp):
        return f"{c.col}{st.op_space}{c.op}{st.op_space}{render_lit(c.lit)}"
    if isinstance(c, InList):
        neg = st.k("not") + " " if c.negate else ""
        return f"{c.col} {neg}{st.k('in')} (" + st.comma.join(render_lit(x) for x in c.lits) + ")"
    if isinstance(c, IsNull):
        return f"{c.col} {st.k('is')} " + (st.k("not") + " " if c.negate else "") + st.k("null")
    body = f" {st.k(c.op)} ".join(render_cond(p, st) for p in c.parts)
    return f"({body})" if c.parens else body


def render_having(c, st: Style) -> str:
    if isinstance(c, HCmp):
        operand = render_agg(replace(c.operand, alias=None), st) if isinstance(c.operand, Agg) else c.operand
        body = f"{operand}{st.op_space}{c.op}{st.op_space}{render_lit(c.lit)}"
        return f"{st.k('not')} ({body})" if c.negate else body
    body = f" {st.k(c.op)} ".join(render_having(p, st) for p in c.parts)
    return f"({body})" if c.parens else body


def render_select(s: Select, st: Style, stream: str) -> str:
    out = f"{st.k('select')} " + (f"{st.k('distinct')} " if s.distinct else "")
    out += st.comma.join(render_item(it, st) for it in s.items)
    out += f" {st.k('from')} {stream}"
    if s.range is not None:
        out += f"{st.range_space}[{st.k('range')} {s.range.value} {s.range.unit}]"
    if s.where is not None:
        out += f" {st.k('where')} " + render_cond(s.where, st)
    if s.group_by is not None and not s.distinct:
        out += f" {st.k('group')} {st.k('by')} " + st.comma.join(s.keys)
    if s.having is not None:
        out += f" {st.k('having')} " + render_having(s.having, st)
    if s.order_by:
        out += f" {st.k('order')} {st.k('by')} " + st.comma.join(
            (render_agg(o.agg, st) if o.agg else o.ref) + (" " + st.k(o.direction) if o.direction else "")
            for o in s.order_by)
    if s.limit is not None:
        out += f" {st.k('limit')} {s.limit}"
    return out


def render_query(q: Query, st: Style, stream: str) -> str:
    inner = render_select(q.select, st, stream)
    if q.outer is None:
        text = inner
    else:
        text = (f"{st.k('select')} " + st.comma.join(render_agg(a, st) for a in q.outer)
                + f" {st.k('from')} ({inner})" + (f" {st.k('as')} {q.sub_alias}" if q.sub_alias else ""))
    return text + (";" if st.semicolon else "")


# --------------------------------------------------------------------------------------------------
# Semantics helpers shared by the generator and the reference (the harness's own, from the contract)
# --------------------------------------------------------------------------------------------------
def output_name(it: Item) -> Optional[str]:
    """The name an item can be referred to by (alias, or a bare key column's name)."""
    if it.alias:
        return it.alias
    return it.col if isinstance(it, Key) else None


def resolve_order(ref, items: list, group_by):
    """Rule 5: ('item', i), ('key', j) (the j-th GROUP BY column), ('agg', Agg) or None (unknown).
    Ordinals are 1-based. `ref` is the ORDER BY text, or an OrderKey (which may carry an aggregate
    expression); `group_by` the GROUP BY column, or the list of them."""
    if isinstance(ref, OrderKey):
        if ref.agg is not None:
            return ("agg", ref.agg)
        ref = ref.ref
    if ref.isdigit():
        i = int(ref)
        return ("item", i - 1) if 1 <= i <= len(items) else None
    for i, it in enumerate(items):
        if output_name(it) == ref:
            return ("item", i)
    keys = list(group_by) if isinstance(group_by, (list, tuple)) else [] if group_by is None else [group_by]
    if ref in keys:
        return ("key", keys.index(ref))
    return None


def agg_type(a: Agg, col_type: Callable[[str], str]) -> str:
    """Result type ('int64', 'float64', 'string') of an aggregate."""
    if a.func in ("count*", "count", "count_distinct"):
        return "int64"
    if a.func == "avg":
        return "timestamp" if col_type(a.col) in ("timestamp", "date") else "float64"
    if a.func == "sum" and decimal_of(col_type(a.col)):
        return "decimal(38,%d)" % decimal_of(col_type(a.col))[1]
    return col_type(a.col)


def exact_sort_key(it: Item, types: dict, profiles: dict) -> bool:
    """Whether every correct implementation computes this output bit-exactly (safe to ORDER BY)."""
    if isinstance(it, Key) or it.func in ("count*", "count", "count_distinct", "min", "max", "quantile", "median"):
        return True
    t, p = types[it.col], profiles[it.col]
    if it.func == "sum":
        return t == "int64" or p == "exact"
    if it.func == "avg":
        return (t == "int64" and p == "small") or (t == "float64" and p == "exact") or t in ("timestamp", "date")
    return False


# --------------------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------------------
def gen_int(rng: Random, profile: str, slide: int) -> int:
    if profile == "small":
        return rng.randint(-3, 8)
    if profile == "overflow":
        return rng.choice(INT_OVERFLOW)
    if profile == "time":
        return slide * 1000 + rng.randint(0, 999)
    r = rng.random()  # wide
    if r < 0.45:
        return rng.choice(INT_SPECIAL)
    if r < 0.75:
        return rng.randint(-20, 20)
    return rng.randint(M, I64_MAX)


def gen_float(rng: Random, profile: str) -> float:
    if profile == "exact":  # multiples of 1/4 with small magnitude: every sum is exact
        return -0.0 if rng.random() < 0.05 else rng.randint(-40, 40) / 4
    r = rng.random()
    if r < 0.5:
        return rng.choice(FLOAT_SPECIAL)
    if r < 0.7:
        return round(rng.uniform(-10, 10), 2)
    return rng.uniform(1, 9.99) * rng.choice([-1, 1]) * 10.0 ** rng.randint(-299, 299)


def decimal_text(v: Fraction, digits: int) -> str:
    """`v` (a multiple of 10**-digits, or more coarse) written exactly with `digits` decimals."""
    scaled = v * 10**digits
    assert scaled.denominator == 1
    n = int(scaled)
    whole, frac = divmod(abs(n), 10**digits)
    frac_text = f"{frac:0{digits}d}"
    return ("-" if n < 0 else "") + f"{whole}.{frac_text}"


BOOL_COLS = ["ok", "flag"]
TEMPORAL_COLS = [("at", "timestamp"), ("day", "date")]
TS_MIN, TS_MAX = -62_135_596_800_000_000, 253_402_300_799_999_999  # years 1..9999, in us
DAY_MIN, DAY_MAX = -719_162, 2_932_896
US_2026, DAY_2026 = 1_767_225_600_000_000, 20_454
TS_SPECIAL = [0, -1, 1, US_2026, US_2026 + 1, US_2026 - 1, TS_MIN, TS_MAX, 86_400_000_000, -86_400_000_000]
DAY_SPECIAL = [0, -1, 1, DAY_2026, DAY_MIN, DAY_MAX, 365]
DECIMAL_TYPES = [(12, 2), (18, 0), (18, 6), (5, 5), (3, 1)]


def decimal_of(typ: str):
    """(precision, scale) of "decimal(p,s)", None for other types."""
    return tuple(map(int, typ[8:-1].split(","))) if typ.startswith("decimal(") else None


def is_numeric(typ: str) -> bool:
    return typ in ("int64", "float64") or typ.startswith("decimal(")


def gen_decimal(rng: Random, typ: str):
    from decimal import Decimal
    p, sc = decimal_of(typ)
    top = 10**p - 1
    r = rng.random()
    n = rng.choice([0, 1, -1, top, -top, 5, 10**sc]) if r < 0.3 else rng.randint(-30, 30) if r < 0.6 else rng.randint(-top, top)
    n = max(-top, min(top, n))
    return Decimal(n).scaleb(-sc)


def iso(typ: str, v: int) -> str:
    import datetime as dt
    if typ == "date":
        return (dt.date(1970, 1, 1) + dt.timedelta(days=v)).isoformat()
    return (dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=v)).isoformat(sep=" ")


def gen_temporal(rng: Random, typ: str) -> int:
    r = rng.random()
    special, lo, hi, near = ((TS_SPECIAL, TS_MIN, TS_MAX, US_2026) if typ == "timestamp" else
                             (DAY_SPECIAL, DAY_MIN, DAY_MAX, DAY_2026))
    if r < 0.4:
        return rng.choice(special)
    if r < 0.7:
        return near + rng.randint(-5, 5)
    return rng.randint(lo, hi)


def gen_schema(rng: Random, typed: bool = False):
    schema = [("ts", "int64")]
    profiles = {"ts": rng.choice(["time", "time", "small", "wide"])}
    pools = {}
    for name in rng.sample(INT_COLS, rng.randint(1, 3)):
        schema.append((name, "int64"))
        profiles[name] = rng.choice(["small", "small", "wide", "overflow"])
    for name in rng.sample(FLOAT_COLS, rng.choice([0, 1, 1, 2])):
        schema.append((name, "float64"))
        profiles[name] = rng.choice(["exact", "wild"])
    for name in rng.sample(STRING_COLS, rng.randint(1, 2)):
        schema.append((name, "string"))
        profiles[name] = "strings"
        pools[name] = rng.sample(STRING_POOL, rng.randint(1, 7))
    if typed:  # booleans too
        for name in rng.sample(BOOL_COLS, rng.randint(0, 2)):
            schema.append((name, "boolean"))
            profiles[name] = "bool"
        for name, typ in TEMPORAL_COLS:  # timestamps (us) and dates (days)
            if rng.random() < 0.5:
                schema.append((name, typ))
                profiles[name] = typ
        if rng.random() < 0.5:  # an exact decimal
            schema.append(("amt", "decimal(%d,%d)" % rng.choice(DECIMAL_TYPES)))
            profiles["amt"] = "exact"
    head, rest = schema[:1], schema[1:]
    rng.shuffle(rest)
    return head + rest, profiles, pools


def gen_row(rng: Random, schema, profiles, pools, slide: int, nulls: Optional[dict] = None) -> tuple:
    out = []
    for name, typ in schema:
        if nulls and nulls.get(name) and rng.random() < nulls[name]:
            out.append(None)
        elif typ == "int64":
            out.append(gen_int(rng, profiles[name], slide))
        elif typ == "float64":
            out.append(gen_float(rng, profiles[name]))
        elif typ == "boolean":
            out.append(rng.random() < 0.5)
        elif typ in ("timestamp", "date"):
            out.append(gen_temporal(rng, typ))
        elif typ.startswith("decimal("):
            out.append(gen_decimal(rng, typ))
        else:
            out.append(rng.choice(pools[name]))
    return tuple(out)


def gen_history(rng: Random, schema, profiles, pools, n: int, nulls: Optional[dict] = None):
    r = rng.random()  # no slide yet / window not full yet / full / wrapped several times
    k = 0 if r < 0.04 else rng.randint(1, n) if r < 0.35 else rng.randint(n, n + 2) if r < 0.6 else rng.randint(n, 4 * n + 2)
    slides, splits = [], []
    for j in range(k):
        r = rng.random()  # some empty sub-windows, mostly small ones, some larger
        count = 0 if r < 0.15 else rng.randint(1, 5) if r < 0.7 else rng.randint(6, 30)
        rows = [gen_row(rng, schema, profiles, pools, j, nulls) for _ in range(count)]
        slides.append(rows)
        parts = []
        left = count
        while left:  # appends of random sizes, sealed together by the slide
            c = rng.randint(1, left)
            parts.append(c)
            left -= c
        splits.append(parts)
    buffer = [gen_row(rng, schema, profiles, pools, k, nulls) for _ in range(rng.randint(1, 4))] if rng.random() < 0.3 else []
    return slides, splits, buffer


class QueryGen:
    def __init__(self, rng: Random, schema, profiles, pools, n: int, slides, declared: tuple, typed: bool = False):
        self.rng, self.schema, self.profiles, self.pools, self.n = rng, schema, profiles, pools, n
        self.declared = declared
        self.typed = typed  # booleans, NULLs and IS [NOT] NULL (cases of the original kind draw exactly as before)
        self.keyable = ("int64", "string", "boolean", "timestamp", "date", "decimal") if typed else ("int64", "string")
        self.types = dict(schema)
        self.data = {name: [r[i] for rows in slides for r in rows if r[i] is not None] for i, (name, _) in enumerate(schema)}

    def cols(self, *types: str) -> list:
        return [c for c, t in self.schema if t in types or ("decimal" in types and t.startswith("decimal("))]

    # -- select items
    def agg(self) -> Agg:
        rng = self.rng
        f = rng.choice(["count*", "count", "count_distinct", "sum", "sum", "avg", "min", "max", "quantile", "median"])
        if f == "count*":
            return Agg(f)
        numeric = self.cols("int64", "float64", "decimal") if self.typed else self.cols("int64", "float64")
        if f in ("avg", "quantile", "median") and self.typed and rng.random() < 0.3:
            numeric += self.cols("timestamp", "date")  # AVG: the mean instant; QUANTILE: one of the values
        col = rng.choice(numeric if f in ("sum", "avg", "quantile", "median") else [c for c, _ in self.schema])
        q = rng.choice(QUANTILE_FRACTIONS) if f == "quantile" else None
        return Agg(f, col, q)

    def select(self, nested: bool = False) -> Select:
        rng = self.rng
        grouped = nested or rng.random() < 0.55
        items: list = [self.agg() for _ in range(rng.choice([1, 1, 2, 2, 3, 4]))]
        group_by = None
        if grouped:
            declared = [c for c in self.cols(*self.keyable) if c in self.declared]
            group_by = rng.choice(declared if declared and rng.random() < 0.6 else self.cols(*self.keyable))
            if rng.random() < 0.8:
                key = Key(group_by, rng.choice(ALIASES) if rng.random() < 0.25 else None)
                items.insert(0 if rng.random() < 0.7 else rng.randint(0, len(items)), key)
        more = []
        if grouped and rng.random() < 0.3:  # GROUP BY several columns, each selected or not
            others = [c for c in self.cols(*self.keyable) if c != group_by]
            more = rng.sample(others, min(len(others), rng.choice([1, 1, 2, 3])))
            for c in more:
                if rng.random() < 0.7:
                    taken = {output_name(it) for it in items}  # output names stay unique
                    alias = rng.choice([a for a in ALIASES if a not in taken]) if rng.random() < 0.2 else None
                    if alias is None and c in taken:
                        continue
                    items.insert(rng.randint(0, len(items)), Key(c, alias))
        self.assign_aliases(items, group_by, nested)
        s = Select(items, group_by=group_by, group_more=more)
        if rng.random() < 0.5:
            m = rng.randint(1, self.n)
            value, unit = rng.choice([(str(m), rng.choice(["SUBWINDOWS", "subwindows", "SUBWINDOW"] if m == 1 else ["SUBWINDOWS", "subwindows"])),
                                      (str(m * 1000), rng.choice(["ms", "MS"])), (str(m), rng.choice(["s", "S"]))])
            s.range = RangeSpec(value, unit, m)
        if rng.random() < 0.4:
            s.where = self.cond(rng.choice([1, 1, 2, 2, 3, 4]))
        if grouped and rng.random() < (0.4 if nested else 0.55):
            s.order_by = self.order_by(items, s.keys)
        elif not grouped and rng.random() < 0.03:
            s.order_by = [OrderKey("1", rng.choice(["", "asc", "desc"]))]
        if grouped and rng.random() < (0.4 if nested else 0.35):
            s.limit = rng.choice([0, 1, 1, 2, 3, 5])
        elif not grouped and rng.random() < 0.08:
            s.limit = rng.choice([0, 0, 1, 3])
        if grouped and rng.random() < 0.25:
            s.having = self.having(rng.choice([1, 1, 2, 3]), items, s.keys)
        return s

    def distinct(self) -> Select:
        """SELECT DISTINCT of one to three key columns, with WHERE, ORDER BY and LIMIT sometimes."""
        rng = self.rng
        cols = rng.sample(self.cols(*self.keyable), min(len(self.cols(*self.keyable)), rng.choice([1, 1, 2, 3])))
        s = Select([Key(c) for c in cols], distinct=True)
        if rng.random() < 0.3:
            s.where = self.cond(rng.choice([1, 2]))
        if rng.random() < 0.5:
            s.order_by = self.order_by(s.items, s.keys, aggregates=False)  # (DISTINCT orders by its columns)
        if rng.random() < 0.3:
            s.limit = rng.choice([0, 1, 2, 5])
        return s

    def assign_aliases(self, items: list, group_by: Optional[str], nested: bool) -> None:
        """Aliases drawn from plain names and the schema's column names (shadowing them is legal);
        output names stay unique. A sub-query's aggregates need names for the outer query."""
        rng = self.rng
        taken = {output_name(it) for it in items if output_name(it)}
        for it in items:
            if isinstance(it, Key) or it.alias:
                continue
            if rng.random() < (0.85 if nested else 0.3):
                pool = ALIASES + [c for c, _ in self.schema]
                choices = [a for a in pool if a not in taken]
                it.alias = rng.choice(choices)
                taken.add(it.alias)

    def order_by(self, items: list, keys: list, aggregates: bool = True) -> list:
        rng = self.rng
        refs = [str(i + 1) for i in range(len(items))] + [output_name(it) for it in items if output_name(it)] + [keys[0]] * 2
        refs += keys[1:]
        out = []
        for _ in range(rng.choice([1, 1, 2])):
            direction = rng.choice(["", "asc", "desc", "desc"])
            if aggregates and rng.random() < 0.15:  # an aggregate expression: one of the selected ones or another
                selected = [it for it in items if isinstance(it, Agg)]
                a = rng.choice(selected) if selected and rng.random() < 0.5 else self.agg()
                a = Agg(a.func, a.col, a.q)
                if exact_sort_key(a, self.types, self.profiles):
                    out.append(OrderKey(render_agg(a, Style()), direction, a))
                continue
            ref = rng.choice(refs)
            target = resolve_order(ref, items, keys)
            if target[0] == "item" and not exact_sort_key(items[target[1]], self.types, self.profiles):
                continue
            out.append(OrderKey(ref, direction))
        return out

    # -- HAVING: over values every correct engine computes exactly (counts, integer SUM/MIN/MAX, keys)
    def having(self, atoms: int, items: list, keys: list):
        rng = self.rng
        if atoms == 1:
            return self.having_atom(items, keys)
        left = rng.randint(1, atoms - 1)
        op = rng.choice(["and", "or"])
        parts = [self.having(left, items, keys), self.having(atoms - left, items, keys)]
        for p in parts:
            if isinstance(p, BoolOp) and (op == "and" and p.op == "or" or rng.random() < 0.3):
                p.parens = True
        return BoolOp(op, parts)

    def having_atom(self, items: list, keys: list) -> HCmp:
        rng = self.rng
        ints = self.cols("int64")
        column_names = {c for c, _ in self.schema}

        def exact(a: Agg) -> bool:
            return a.func in ("count*", "count", "count_distinct") or (
                a.func in ("sum", "min", "max") and self.types.get(a.col) == "int64")

        choices = []
        for it in items:
            if isinstance(it, Agg) and exact(it):
                choices.append(it.alias if it.alias and it.alias not in column_names else Agg(it.func, it.col))
        choices += [k for k in keys if self.types[k] in ("int64", "string")]
        choices.append(Agg("count*"))
        if ints:
            choices.append(Agg(rng.choice(["sum", "min", "max"]), rng.choice(ints)))
        operand = rng.choice(choices)
        if isinstance(operand, Agg):
            kind = "int"
        elif operand in keys:
            kind = "string" if self.types[operand] == "string" else "int"
        else:
            kind = "int"  # an alias of an exact aggregate
        if kind == "string":
            pool = self.data[operand] or ["a"]
            lit = ("str", rng.choice(pool))
        else:
            col = operand.col if isinstance(operand, Agg) and operand.col else operand if operand in keys else None
            pool = self.data.get(col) if col in ints and self.data.get(col) else None
            v = rng.choice(pool) if pool and rng.random() < 0.6 else rng.randint(-2, 12)
            lit = ("num", str(v))
        return HCmp(operand, rng.choice(["=", "!=", "<>", "<", "<=", ">", ">="]), lit, rng.random() < 0.2)

    # -- WHERE
    def cond(self, atoms: int) -> Cond:
        rng = self.rng
        if atoms == 1:
            return self.atom()
        left = rng.randint(1, atoms - 1)
        op = rng.choice(["and", "or"])
        parts = [self.cond(left), self.cond(atoms - left)]
        for p in parts:  # AND binds tighter than OR: an OR under an AND needs parentheses
            if isinstance(p, BoolOp) and (op == "and" and p.op == "or"):
                p.parens = True
            elif isinstance(p, BoolOp) and rng.random() < 0.3:
                p.parens = True
        return BoolOp(op, parts)

    def atom(self) -> Cond:
        rng = self.rng
        col = rng.choice([c for c, _ in self.schema])
        if self.typed and rng.random() < 0.2:
            return IsNull(col, rng.random() < 0.5)
        if rng.random() < 0.25:
            lits = [self.literal(col) for _ in range(rng.randint(1, 4))]
            return InList(col, rng.random() < 0.35, lits)
        ops = ["=", "!=", "<>", "<", "<=", ">", ">="]
        return Cmp(col, rng.choice(ops), self.literal(col))

    def literal(self, col: str) -> tuple:
        rng, typ, data = self.rng, self.types[col], self.data[col]
        r = rng.random()
        if typ == "boolean":
            return ("bool", rng.choice(["TRUE", "FALSE", "true", "False"]))
        if typ.startswith("decimal("):  # exact decimals next to the data, with up to scale + 1 places
            from decimal import Decimal
            p, sc = decimal_of(typ)
            v = rng.choice(data) if data and r < 0.6 else gen_decimal(rng, typ)
            v += rng.choice([0, 0, Decimal(1).scaleb(-sc), Decimal(5).scaleb(-sc - 1), -Decimal(1).scaleb(-sc)])
            return ("num", format(v, "f"))
        if typ in ("timestamp", "date"):  # TIMESTAMP '...' / DATE '...': parsed by each engine
            v = rng.choice(data) + rng.choice([0, 0, 1, -1]) if data and r < 0.6 else gen_temporal(rng, typ)
            lo, hi = (TS_MIN, TS_MAX) if typ == "timestamp" else (DAY_MIN, DAY_MAX)
            return (typ, iso(typ, min(max(v, lo), hi)))
        if typ == "string":
            if data and r < 0.5:
                return ("str", rng.choice(data))
            return ("str", rng.choice(STRING_POOL + ["zzz", "m"]))
        if typ == "int64":
            if data and r < 0.3:
                return ("num", str(rng.choice(data)))
            if data and r < 0.6:  # next to a data value: exactness matters at 2**53, 2**63 and in between
                offset = rng.choice([0, Fraction(1, 2), -Fraction(1, 2), Fraction(1, 10**20), -Fraction(1, 10**20)])
                digits = 20 if offset and offset.denominator > 2 else rng.choice([1, 1, 20])
                return ("num", decimal_text(Fraction(rng.choice(data)) + offset, digits))
            return ("num", rng.choice(INT_LITERALS))
        if data and r < 0.45:
            v = rng.choice(data)
            form = rng.random()
            if form < 0.5:
                return ("num", repr(v))
            if form < 0.7 and v.is_integer() and abs(v) < 1e20:
                return ("num", str(int(v)))  # an integer literal against a float column
            # extra digits far below half an ulp: the literal rounds to v (rule 4), though not equal to it
            mant, _, exp = repr(v).partition("e")
            mant = mant if "." in mant else mant + "."
            return ("num", mant + "0" * 25 + "1" + ("e" + exp if exp else ""))
        return ("num", rng.choice(FLOAT_LITERALS))

    # -- whole queries
    def query(self) -> Query:
        rng = self.rng
        if rng.random() < 0.15:
            return self.subquery()
        if rng.random() < 0.06:
            return Query(self.distinct())
        return Query(self.select())

    def subquery(self) -> Query:
        rng = self.rng
        inner = self.select(nested=True)
        names = [(output_name(it), it) for it in inner.items if output_name(it)]
        itype = {nm: (self.types[it.col] if isinstance(it, Key) else agg_type(it, self.types.get)) for nm, it in names}
        outer = []
        for _ in range(rng.choice([1, 1, 2, 3])):
            f = rng.choice(["count*", "count", "sum", "sum", "avg", "min", "max", "quantile", "median"])
            if f == "count*" or not names:
                outer.append(Agg("count*"))
                continue
            numeric = [nm for nm, _ in names if itype[nm] not in ("string", "boolean", "timestamp", "date")]
            if f == "avg":
                numeric = [nm for nm in numeric if not itype[nm].startswith("decimal(")]
            pool = numeric if f in ("sum", "avg", "quantile", "median") else [nm for nm, _ in names]
            if not pool:
                outer.append(Agg("count*"))
                continue
            outer.append(Agg(f, rng.choice(pool), rng.choice(QUANTILE_FRACTIONS) if f == "quantile" else None))
        taken: set = set()
        for a in outer:
            if rng.random() < 0.3:
                a.alias = rng.choice([x for x in ALIASES if x not in taken])
                taken.add(a.alias)
        return Query(inner, outer, rng.choice([None, None, "sub", "g"]))

    # -- deliberately invalid queries: a valid one with one mistake; tokens the error should name
    def invalid(self) -> Query:
        rng = self.rng
        kinds = ["unknown column", "numeric aggregate of a string", "RANGE too long", "RANGE not a multiple",
                 "ORDER BY unknown name", "string literal vs numeric column", "number vs string column",
                 "outer numeric aggregate of a string"]
        if self.cols("float64"):
            kinds.append("GROUP BY a float column")
        kind = rng.choice(kinds)
        q = self.query() if kind != "outer numeric aggregate of a string" else self.subquery()
        if q.select.distinct:  # the deliberate errors are made in a GROUP BY or plain select
            q = Query(self.select())
        s = q.select
        if kind == "unknown column":
            name = rng.choice(UNKNOWN_NAMES)
            aggs = [it for it in s.items if isinstance(it, Agg) and it.func != "count*"]
            if aggs and rng.random() < 0.6:
                rng.choice(aggs).col = name
            else:
                s.where = Cmp(name, "=", ("num", "1"))
            return replace(q, invalid=kind, tokens=(name,))
        if kind == "numeric aggregate of a string":
            f = rng.choice(["sum", "avg", "quantile", "median"])
            col = rng.choice(self.cols("string"))
            s.items.append(Agg(f, col, "0.5" if f == "quantile" else None))
            return replace(q, invalid=kind, tokens=(col, f))
        if kind == "GROUP BY a float column":
            col = rng.choice(self.cols("float64"))
            s.items = [Key(col) if isinstance(it, Key) else it for it in s.items]
            s.group_by, s.order_by, q.outer, s.having = col, [], None, None
            if s.group_more and rng.random() < 0.5:  # the float column among several
                s.group_by, s.group_more = s.group_more[0], [col] + s.group_more[1:]
                s.items = [it for it in s.items if not isinstance(it, Key) or it.col in s.keys]
            else:
                s.group_more = []
            return replace(q, invalid=kind, tokens=(col,))
        if kind == "RANGE too long":
            s.range = rng.choice([RangeSpec(str(self.n + 1), "SUBWINDOWS", None),
                                  RangeSpec(str((self.n + rng.randint(1, 3)) * 1000), "ms", None),
                                  RangeSpec("1", "min", None), RangeSpec("1", "h", None)])
            return replace(q, invalid=kind, tokens=(s.range.value, s.range.unit))
        if kind == "RANGE not a multiple":
            s.range = RangeSpec(rng.choice(["1500", "500", "999", "2001"]), "ms", None)
            return replace(q, invalid=kind, tokens=(s.range.value,))
        if kind == "ORDER BY unknown name":
            # a column that is aggregated but is neither an output name nor the GROUP BY column
            names = {output_name(it) for it in s.items} | set(s.keys)
            cands = [it.col for it in s.items if isinstance(it, Agg) and it.col and it.col not in names]
            name = rng.choice(cands) if cands and rng.random() < 0.6 else rng.choice(UNKNOWN_NAMES)
            s.order_by = [OrderKey(name, rng.choice(["", "desc"]))]
            return replace(q, invalid=kind, tokens=(name,))
        if kind == "string literal vs numeric column":
            col = rng.choice(self.cols("int64", "float64"))
            lit = ("str", rng.choice(["abc", "42", "zzz"]))
            atom = Cmp(col, rng.choice(["=", "<", ">="]), lit) if rng.random() < 0.6 else InList(col, False, [("num", "1"), lit])
            s.where = atom if s.where is None else BoolOp("and", [atom, replace(s.where, parens=True) if isinstance(s.where, BoolOp) else s.where])
            return replace(q, invalid=kind, tokens=(col, lit[1]))
        if kind == "number vs string column":
            col = rng.choice(self.cols("string"))
            lit = ("num", rng.choice(["4242", "-17", "2.5"]))
            atom = Cmp(col, rng.choice(["=", "<", ">"]), lit)
            s.where = atom if s.where is None else BoolOp("or", [s.where, atom])
            return replace(q, invalid=kind, tokens=(col, lit[1]))
        # outer numeric aggregate over a string output of the sub-query
        strings = [output_name(it) for it in s.items if isinstance(it, Key) and self.types[it.col] == "string" and output_name(it)]
        strings += [output_name(it) for it in s.items if isinstance(it, Agg) and it.func in ("min", "max")
                    and self.types[it.col] == "string" and output_name(it)]
        if not strings:
            col = rng.choice(self.cols("string"))
            s.group_by, s.group_more, s.having = col, [], None
            s.items = [Key(col)] + [it for it in s.items if isinstance(it, Agg)]
            s.order_by = []
            strings = [col]
        name = rng.choice(strings)
        f = rng.choice(["median", "quantile", "sum", "avg"])
        q.outer = [Agg("count*")] if rng.random() < 0.5 else []
        q.outer.append(Agg(f, name, "0.5" if f == "quantile" else None))
        return replace(q, invalid=kind, tokens=(name, f))


def gen_case(seed: int, index: int) -> Case:
    rng = Random(f"windowstore-differential:{seed}:{index}")
    # Half the cases are "typed": boolean columns, NULLs in every column but ts, IS [NOT] NULL. The
    # choice comes from its own generator, so the other half are exactly the cases of before.
    trng = Random(f"windowstore-differential-typed:{seed}:{index}")
    typed = trng.random() < 0.5
    schema, profiles, pools = gen_schema(rng, typed)
    nulls = {c: trng.choice([0, 0.1, 0.3, 0.7, 1.0]) for c, _ in schema[1:]} if typed else {}
    n = rng.choice([1, 2, 3, 3, 4, 5, 6])
    keyable = [c for c, t in schema if t != "float64"]
    declared = tuple(c for c in keyable if rng.random() < 0.4)
    slides, splits, buffer = gen_history(rng, schema, profiles, pools, n, nulls)
    qg = QueryGen(rng, schema, profiles, pools, n, slides, declared, typed)
    query = qg.invalid() if rng.random() < 0.05 else qg.query()
    style = Style(kw=rng.choice(["upper", "upper", "lower", "title"]), comma=rng.choice([", ", ",", " , "]),
                  op_space=rng.choice([" ", "", " "]), range_space=rng.choice([" ", ""]),
                  semicolon=rng.random() < 0.05)
    return Case(seed, index, schema, profiles, n, declared, slides, splits, buffer, query, style, nulls)


# --------------------------------------------------------------------------------------------------
# Reference: translation to DuckDB SQL
# --------------------------------------------------------------------------------------------------
def qi(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def int_literal_decimal(text: str) -> str:
    """An exact DECIMAL(38,18) literal L' such that for every int64 x, `x op L'` == `x op L` (L the
    literal's exact value). DuckDB would silently round a literal with more than 18 decimals, and
    DECIMAL(38,18) holds |L| < 10**20; from |L| >= 10**19 on the comparison only depends on the sign
    (10**19 > 2**63), and a non-integer L compares with integers like floor(L) + 1/2."""
    value = Fraction(text)
    if abs(value) >= 10**19:
        value = Fraction(10**19 if value > 0 else -(10**19))
    elif (10**18 * value).denominator != 1:
        value = math.floor(value) + Fraction(1, 2)
    scaled = int(value * 10**18)  # exact now
    sign = "-" if scaled < 0 else ""
    whole, frac = divmod(abs(scaled), 10**18)
    return f"{sign}{whole}.{frac:018d}"


def sql_cmp(col: str, typ: str, op: str, lit: tuple) -> str:
    op = "<>" if op == "!=" else op
    if typ == "boolean":
        assert lit[0] == "bool"
        return f"({qi(col)} {op} {lit[1].upper()})"
    if typ in ("timestamp", "date"):
        assert lit[0] == typ
        return f"({qi(col)} {op} {typ.upper()} '{lit[1]}')"
    if typ.startswith("decimal("):  # exact: DuckDB compares decimals exactly (literals have <= 7 places)
        return f"({qi(col)} {op} CAST('{lit[1]}' AS DECIMAL(38,18)))"
    if typ == "string":
        assert lit[0] == "str"
        return f"({qi(col)} {op} {sql_str(lit[1])})"
    assert lit[0] == "num"
    if typ == "int64":  # exact: both sides as DECIMAL(38,18) (int64 needs 19 integer digits)
        return f"(CAST({qi(col)} AS DECIMAL(38,18)) {op} CAST('{int_literal_decimal(lit[1])}' AS DECIMAL(38,18)))"
    return f"({qi(col)} {op} CAST('{lit[1]}' AS DOUBLE))"  # rounded to the nearest double, then compared


def sql_cond(c: Cond, types: dict) -> str:
    if isinstance(c, Cmp):
        return sql_cmp(c.col, types[c.col], c.op, c.lit)
    if isinstance(c, InList):
        body = "(" + " OR ".join(sql_cmp(c.col, types[c.col], "=", lit) for lit in c.lits) + ")"
        return f"(NOT {body})" if c.negate else body
    if isinstance(c, IsNull):
        return f"({qi(c.col)} IS {'NOT ' if c.negate else ''}NULL)"
    return "(" + f" {c.op.upper()} ".join(sql_cond(p, types) for p in c.parts) + ")"


def sql_having(c, s: Select, types: dict) -> str:
    """A HAVING condition over the table's groups: names resolved by the contract (a GROUP BY
    column, else an output name), aggregates written out."""
    if isinstance(c, BoolOp):
        return "(" + f" {c.op.upper()} ".join(sql_having(p, s, types) for p in c.parts) + ")"
    operand = c.operand
    if isinstance(operand, str) and operand not in s.keys:
        operand = next(replace(it, alias=None) for it in s.items if output_name(it) == operand)
    if isinstance(operand, Agg):
        expr, typ = agg_over_table(operand, types)[0], "int64"
    else:
        expr, typ = qi(operand), types[operand]
    op = "<>" if c.op == "!=" else c.op
    if typ == "string":
        body = f"({expr} {op} {sql_str(c.lit[1])})"
    else:  # exact: an integer (a count, an integer SUM/MIN/MAX or an int64 key) against an integer literal
        body = f"(CAST({expr} AS HUGEINT) {op} CAST('{c.lit[1]}' AS HUGEINT))"
    return f"(NOT {body})" if c.negate else body


def quantile_sql(col_sql: str, q_text: str) -> str:
    """Discrete quantile at 1-based rank max(1, ceil(q*N)), q = a/b exactly (integer arithmetic)."""
    q = Fraction(q_text)
    a, b = q.numerator, q.denominator
    rank = (f"greatest(1, (CAST({a} AS HUGEINT) * count({col_sql}) + CAST({b - 1} AS HUGEINT))"
            f" // CAST({b} AS HUGEINT))")
    return f"list_sort(list({col_sql}) FILTER (WHERE {col_sql} IS NOT NULL))[CAST({rank} AS BIGINT)]"


@dataclass
class OutSpec:
    type: str                     # int64 | float64 | string
    desc: str                     # for failure kinds, e.g. "SUM(int64) grouped"
    name: Optional[str] = None    # the column name the answer must carry, when defined
    tol: Optional[int] = None     # index of the hidden tolerance column


def as_int(expr: str, typ: str) -> str:
    """A timestamp as microseconds since the epoch, a date as days: what the store answers."""
    if typ == "timestamp":
        return f"epoch_us({expr})"
    if typ == "date":
        return f"CAST(({expr}) - DATE '1970-01-01' AS BIGINT)"
    return expr


def agg_over_table(a: Agg, types: dict):
    """(value SQL, tolerance SQL or None) of an aggregate over the table t."""
    f, c = a.func, qi(a.col) if a.col else None
    typ = types.get(a.col)
    if f == "count*":
        return "count(*)", None
    if f == "count":
        return f"count({c})", None
    if f == "count_distinct":
        return f"count(DISTINCT {c})", None  # DuckDB: -0.0 and 0.0 are one value (checked)
    if f in ("min", "max"):
        return as_int(f"{f}({c})", typ), None
    if f == "sum" and typ.startswith("decimal("):
        return f"sum({c})", None  # DECIMAL(38, s): exact
    if f in ("quantile", "median"):
        return as_int(quantile_sql(c, a.q if f == "quantile" else "0.5"), typ), None
    if f == "avg" and typ in ("timestamp", "date"):  # the microsecond the exact mean instant falls in
        us = f"epoch_us({c})" if typ == "timestamp" else f"(CAST({c} - DATE '1970-01-01' AS HUGEINT) * 86400000000)"
        total, n = f"sum(CAST({us} AS HUGEINT))", f"count({c})"
        return f"CAST((({total}) - ((({total}) % {n}) + {n}) % {n}) // NULLIF({n}, 0) AS BIGINT)", None
    if f == "sum":
        if typ == "int64":
            return f"sum({c})", None  # HUGEINT: exact
        return f"fsum({c})", f"(count({c}) + 3) * {EPS_SQL} * fsum(abs({c})) + 1e-300"
    if f == "avg":
        if typ == "int64" or typ.startswith("decimal("):  # the double nearest the exact mean (DuckDB: a DOUBLE)
            return f"avg({c})", f"1e-12 * abs(avg({c}))"
        value = f"(fsum({c}) / NULLIF(count({c}), 0))"
        return value, (f"(count({c}) + 3) * {EPS_SQL} * fsum(abs({c})) / NULLIF(count({c}), 0)"
                       f" + 2 * {EPS_SQL} * abs({value}) + 1e-300")
    raise AssertionError(f)


def agg_over_inner(a: Agg, inner: dict):
    """(value SQL, tolerance SQL or None) of an outer aggregate over the CTE "__inner"; `inner` maps
    an inner output name to (column SQL, type, tolerance column SQL or None)."""
    f = a.func
    if f == "count*":
        return "count(*)", None
    c, typ, tol = inner[a.col]
    if f == "count":
        return f"count({c})", None
    if f in ("min", "max", "quantile", "median"):
        value = f"{f}({c})" if f in ("min", "max") else quantile_sql(c, a.q if f == "quantile" else "0.5")
        # an order statistic moves by at most the largest error of its inputs
        return value, (f"coalesce(max({tol}), 0)" if tol else None)
    if f == "sum":
        if typ == "int64" or typ.startswith("decimal("):
            return f"sum({c})", None
        own = f"(count({c}) + 3) * {EPS_SQL} * fsum(abs({c})) + 1e-300"  # this sum's rounding
        return f"fsum({c})", (f"coalesce(sum({tol}), 0) + {own}" if tol else own)  # + its inputs' errors
    if f == "avg":
        if typ == "int64" or typ.startswith("decimal("):
            return f"avg({c})", f"1e-12 * abs(avg({c}))"
        value = f"(fsum({c}) / NULLIF(count({c}), 0))"
        err = f"(coalesce(sum({tol}), 0) + " if tol else "("
        return value, (err + f"(count({c}) + 3) * {EPS_SQL} * fsum(abs({c}))) / NULLIF(count({c}), 0)"
                       f" + 2 * {EPS_SQL} * abs({value}) + 1e-300")
    raise AssertionError(f)


def describe(it: Item, types: dict, grouped: bool) -> str:
    if isinstance(it, Key):
        return f"key({types[it.col]})"
    name = {"count*": "COUNT(*)", "count_distinct": f"COUNT(DISTINCT {types.get(it.col)})"}.get(it.func)
    name = name or f"{it.func.upper()}({types[it.col]})"
    return name + (" grouped" if grouped else "")


def translate_select(s: Select, types: dict, profiles: dict):
    """SQL of one select over t, its visible output specs, and its hidden tolerance columns.

    Output columns are "__c0".., tolerance columns "__t0"..; a grouped select also carries the group
    key as "__key" so that ties are broken by it (rule 5)."""
    grouped = bool(s.keys)  # GROUP BY, or SELECT DISTINCT (the GROUP BY of its columns)
    cols, tols, specs = [], [], []
    for i, it in enumerate(s.items):
        if isinstance(it, Key):
            value, tol, typ = as_int(qi(it.col), types[it.col]), None, types[it.col]
        else:
            value, tol = agg_over_table(it, types)
            typ = agg_type(it, types.get)
        cols.append(f"{value} AS {qi(f'__c{i}')}")
        spec = OutSpec(typ, describe(it, types, grouped), output_name(it))
        if tol:
            spec.tol = len(s.items) + len(tols)
            tols.append(f"{tol} AS {qi(f'__t{i}')}")
        specs.append(spec)
    key_names = [qi("__key" if j == 0 else f"__key{j}") for j in range(len(s.keys))]
    select_list = cols + tols + [f"{qi(c)} AS {name}" for c, name in zip(s.keys, key_names)]
    sql = "SELECT " + ", ".join(select_list) + " FROM t"
    if s.where is not None:
        sql += " WHERE " + sql_cond(s.where, types)
    if grouped:
        sql += " GROUP BY " + ", ".join(qi(c) for c in s.keys)
    if s.having is not None:
        sql += " HAVING " + sql_having(s.having, s, types)
    order = []
    for o in s.order_by:
        target = resolve_order(o, s.items, s.keys)
        assert target is not None, f"generator produced an unresolvable ORDER BY {o.ref!r}"
        if target[0] == "agg":
            expr = agg_over_table(target[1], types)[0]
        else:
            expr = key_names[target[1]] if target[0] == "key" else qi(f"__c{target[1]}")
        order.append(expr + (" DESC" if o.direction == "desc" else " ASC") + " NULLS LAST")
    # no ORDER BY: by the keys in GROUP BY order; with ORDER BY: ties broken by them
    order += [f"{name} ASC NULLS LAST" for name in key_names]
    if order:
        sql += " ORDER BY " + ", ".join(order)
    if s.limit is not None:
        sql += f" LIMIT {s.limit}"
    return sql, specs


def translate(q: Query, types: dict, profiles: dict):
    """SQL for the whole query and the specs of its visible columns (hidden ones follow them)."""
    inner_sql, inner_specs = translate_select(q.select, types, profiles)
    if q.outer is None:
        return inner_sql, inner_specs
    inner = {}
    for i, (it, spec) in enumerate(zip(q.select.items, inner_specs)):
        name = output_name(it)
        if name:
            inner[name] = (qi(f"__c{i}"), spec.type, qi(f"__t{i}") if spec.tol is not None else None)
    cols, tols, specs = [], [], []
    itypes = {name: t for name, (_, t, _) in inner.items()}
    inner_desc = {output_name(it): spec.desc for it, spec in zip(q.select.items, inner_specs) if output_name(it)}
    for i, a in enumerate(q.outer):
        value, tol = agg_over_inner(a, inner)
        typ = agg_type(a, itypes.get)
        desc = "outer " + ("COUNT(*)" if a.func == "count*" else f"{a.func.upper()}({inner_desc[a.col]})")
        spec = OutSpec(typ, desc, a.alias)
        if tol:
            spec.tol = len(q.outer) + len(tols)
            tols.append(f"{tol} AS {qi(f'__t{i}')}")
        cols.append(f"{value} AS {qi(f'__c{i}')}")
        specs.append(spec)
    sql = f'WITH "__inner" AS ({inner_sql}) SELECT ' + ", ".join(cols + tols) + ' FROM "__inner"'
    return sql, specs


@dataclass
class Expected:
    sql: str
    specs: list
    rows: list          # visible values
    tols: list          # per row, per column: tolerance (float) or None (exact)


_PY_TYPES = {"int64": int, "float64": float, "string": str, "boolean": bool, "timestamp": int, "date": int}


def py_type(typ: str):
    if typ.startswith("decimal("):
        from decimal import Decimal
        return Decimal
    return _PY_TYPES[typ]


def reference(case: Case, con) -> Expected:

    q = case.query
    rows = case.visible(q.select.range.m if q.select.range else None)
    table = arrow_columns(case, rows)
    con.register("t", table)
    sql, specs = translate(q, case.types, case.profiles)
    result = con.execute(sql).fetchall()
    con.unregister("t")
    width = len(specs)
    out_rows, out_tols = [], []
    for r in result:
        values = tuple(r[:width])
        for v, spec in zip(values, specs):  # the translation itself must produce the contract's types
            if v is not None and type(v) is not py_type(spec.type):
                raise AssertionError(f"harness bug: DuckDB returned {type(v).__name__} for {spec.desc}: {sql}")
        out_rows.append(values)
        out_tols.append(tuple(r[spec.tol] if spec.tol is not None else None for spec in specs))
    return Expected(sql, specs, out_rows, out_tols)


# --------------------------------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------------------------------
def same_value(exp, got, spec: OutSpec, tol) -> Optional[str]:
    """None when `got` is an acceptable answer for expected `exp`, else what is wrong."""
    if exp is None:
        return None if got is None else "value (expected NULL)"
    if got is None:
        return "value (got NULL)"
    want = py_type(spec.type)
    if type(got) is not want:
        return f"type ({type(got).__name__} instead of {want.__name__})"
    if spec.type != "float64":
        return None if got == exp else "value"
    if math.isnan(got):
        return "value (NaN)"
    if tol is None:
        return None if got == exp else "value"  # -0.0 == 0.0
    return None if abs(got - exp) <= tol else "value (beyond tolerance)"


def compare(exp: Expected, columns: list, rows: list) -> Optional[tuple]:
    """(kind, detail) of the first difference, or None."""
    rows = [tuple(r) for r in rows]
    if len(rows) != len(exp.rows):
        return "row count", f"{len(rows)} rows instead of {len(exp.rows)}"
    if rows and len(rows[0]) != len(exp.specs) or len(columns) != len(exp.specs):
        return "column count", f"{len(columns)} columns instead of {len(exp.specs)}"
    for i, spec in enumerate(exp.specs):
        if spec.name is not None and columns[i] != spec.name:
            return "column name", f"column {i + 1} is named {columns[i]!r}, expected {spec.name!r}"
    for ri, (er, gr, tr) in enumerate(zip(exp.rows, rows, exp.tols)):
        for ci, spec in enumerate(exp.specs):
            if len(gr) != len(er):
                return "column count", f"row {ri + 1} has {len(gr)} values"
            bad = same_value(er[ci], gr[ci], spec, tr[ci])
            if bad:
                if bad.startswith("value") and len(rows) > 1:
                    if _is_permutation(exp, rows):
                        return "row order", f"same rows, different order (first at row {ri + 1})"
                    ci = _culprit_column(exp, rows, ci)  # blame a column whose values differ, not its order
                    spec = exp.specs[ci]
                return f"wrong {bad.split(' (')[0]}: {spec.desc}", f"row {ri + 1} column {ci + 1}: {bad}"
    return None


def _culprit_column(exp: Expected, rows: list, first: int) -> int:
    """The first column whose values differ from the expected ones as a multiset (`first` if none)."""
    for ci, spec in enumerate(exp.specs):
        left = list(range(len(rows)))
        for er, tr in zip(exp.rows, exp.tols):
            j = next((j for j in left if same_value(er[ci], rows[j][ci], spec, tr[ci]) is None), None)
            if j is None:
                return ci
            left.remove(j)
    return first


def _is_permutation(exp: Expected, rows: list) -> bool:
    left = list(range(len(rows)))
    for er, tr in zip(exp.rows, exp.tols):
        for j in left:
            if all(same_value(e, g, s, t) is None for e, g, s, t in zip(er, rows[j], exp.specs, tr)):
                left.remove(j)
                break
        else:
            return False
    return True


# --------------------------------------------------------------------------------------------------
# Running a case
# --------------------------------------------------------------------------------------------------
@dataclass
class Failure:
    case: Case
    path: str          # default | window | synopsis | server | -
    kind: str
    detail: str
    expected: Any = None
    got: Any = None
    sql: str = ""


def columns_of(case: Case, rows: list) -> dict:
    return {name: [r[i] for r in rows] for i, (name, _) in enumerate(case.schema)}


def arrow_columns(case: Case, rows: list):
    """The rows as an Arrow table of the schema's types (timestamp[us], date32 for temporal ones)."""
    import pyarrow as pa

    arrow_types = {"int64": pa.int64(), "float64": pa.float64(), "string": pa.string(), "boolean": pa.bool_()}
    arrow_types.update({t: pa.decimal128(*decimal_of(t)) for _, t in case.schema if t.startswith("decimal(")})
    temporal = {"timestamp": (pa.int64(), pa.timestamp("us")), "date": (pa.int32(), pa.date32())}
    return pa.table({name: pa.array([r[i] for r in rows], temporal[typ][0]).cast(temporal[typ][1]) if typ in temporal
                     else pa.array([r[i] for r in rows], arrow_types[typ]) for i, (name, typ) in enumerate(case.schema)})


def _chunks(case: Case, j: int):
    rows, start = case.slides[j], 0
    for size in case.splits[j]:
        yield rows[start:start + size]
        start += size


def build_stream(case: Case):
    from windowstore.store import Stream, WindowSpec

    spec = WindowSpec(subwindows=case.n, subwindow_ms=1000, clock="manual", group_by=case.declared)
    s = Stream("S", dict(case.schema), spec, created_ms=0)
    temporal = any(t in ("timestamp", "date") for _, t in case.schema)
    for j in range(len(case.slides)):
        for chunk in _chunks(case, j):
            # temporal columns as Arrow timestamps and dates (the conversion to us / days is tested too)
            s.append(arrow_columns(case, chunk) if temporal else columns_of(case, chunk))
        s.window.slide((j + 1) * 1000)
    if case.buffer:
        s.append(columns_of(case, case.buffer))
    return s


_MSG_NORMALIZE = [(re.compile(r"'[^']*'|\"[^\"]*\""), "'…'"), (re.compile(r"\d+"), "N")]


def _normalize(msg: str) -> str:
    for pat, rep in _MSG_NORMALIZE:
        msg = pat.sub(rep, msg)
    return msg[:90]


def check_error(case: Case, path: str, err: Optional[BaseException], invalid_types: tuple, text: str) -> Optional[Failure]:
    """An invalid query must raise InvalidInput (InvalidArgument through the SDK) saying
    "position" and naming one of the offending tokens."""
    q = case.query
    if err is None:
        return Failure(case, path, f"accepted invalid query ({q.invalid})", "no error raised")
    if not isinstance(err, invalid_types):
        return Failure(case, path, f"wrong exception for invalid query ({q.invalid}): {type(err).__name__}", repr(err))
    msg = str(err)
    if "position" not in msg.lower():
        return Failure(case, path, f"error without position ({q.invalid})", msg)
    rest = re.sub(r"position\s+\d+", "", msg, flags=re.I)
    if not any(re.search(r"(?<![\w])" + re.escape(tok) + r"(?![\w])", rest, re.I) for tok in q.tokens):
        return Failure(case, path, f"error without the token ({q.invalid})", f"{msg} (tokens: {q.tokens})")
    return None


def run_core_case(case: Case, con) -> list:
    from windowstore.store import InvalidInput, parse_query, plan_query, run_plan

    text = case.text()
    try:
        stream = build_stream(case)
    except Exception as e:  # the generated data is always valid
        return [Failure(case, "-", f"append/slide crash: {type(e).__name__}", repr(e))]
    if case.query.invalid:
        err = None
        try:
            plan = plan_query(parse_query(text), stream)
            run_plan(plan)
        except Exception as e:
            err = e
        f = check_error(case, "default", err, (InvalidInput,), text)
        return [f] if f else []
    exp = reference(case, con)
    failures = []
    for path in ("default", "window", "synopsis"):
        try:
            plan = plan_query(parse_query(text), stream, access=None if path == "default" else path)
        except InvalidInput as e:
            if path != "synopsis":
                failures.append(Failure(case, path, f"refused valid query: {_normalize(str(e))}", str(e), exp.rows, None, exp.sql))
            continue
        except Exception as e:
            failures.append(Failure(case, path, f"crash in plan_query: {type(e).__name__}", repr(e), exp.rows, None, exp.sql))
            continue
        try:
            ans = run_plan(plan)
        except Exception as e:
            failures.append(Failure(case, path, f"crash in run_plan: {type(e).__name__}", repr(e), exp.rows, None, exp.sql))
            continue
        diff = compare(exp, list(ans.columns), list(ans.rows))
        if diff:
            failures.append(Failure(case, path, diff[0], diff[1], exp.rows, [tuple(r) for r in ans.rows], exp.sql))
    return _merge_paths(failures)


def _merge_paths(failures: list) -> list:
    """One failure per kind; the paths that showed it joined (e.g. "default,window")."""
    by_kind: dict = {}
    for f in failures:
        if f.kind in by_kind:
            by_kind[f.kind].path += "," + f.path
        else:
            by_kind[f.kind] = f
    return list(by_kind.values())


def run_server_case(case: Case, ws, con) -> list:
    from windowstore.clients import InvalidArgument, WindowStoreError

    # every other case: a stream name that is not a plain identifier, double-quoted in the query
    sep = "-" if case.index % 2 else "_"
    name = sep.join(["d" + str(abs(case.seed)), str(case.index), str(time.monotonic_ns() % 10**9)])
    text = case.text(f'"{name}"' if sep == "-" else name)
    try:
        ws.create_stream(name, schema=dict(case.schema), subwindows=case.n, subwindow_ms=1000, clock="manual",
                         group_by=list(case.declared))
        for j in range(len(case.slides)):
            for chunk in _chunks(case, j):
                ws.append(name, columns_of(case, chunk))
            ws.slide(name)
        if case.buffer:
            ws.append(name, columns_of(case, case.buffer))
    except Exception as e:
        return [Failure(case, "server", f"append/slide failed: {type(e).__name__}", repr(e))]
    try:
        if case.query.invalid:
            err = None
            try:
                ws.query(text)
            except Exception as e:
                err = e
            f = check_error(case, "server", err, (InvalidArgument,), text)
            return [f] if f else []
        exp = reference(case, con)
        try:
            ans = ws.query(text)
        except WindowStoreError as e:
            kind = "refused valid query" if isinstance(e, InvalidArgument) else f"server error {type(e).__name__}"
            return [Failure(case, "server", f"{kind}: {_normalize(str(e))}", str(e), exp.rows, None, exp.sql)]
        failures = []
        diff = compare(exp, list(ans.columns), list(ans.rows))
        if diff:
            failures.append(Failure(case, "server", diff[0], diff[1], exp.rows, [tuple(r) for r in ans.rows], exp.sql))
        if ans.slide != len(case.slides) - 1:
            failures.append(Failure(case, "server", "answer.slide", f"slide {ans.slide}, expected {len(case.slides) - 1}"))
        return failures
    finally:
        try:
            ws.drop_stream(name)
        except Exception:
            pass


# --------------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------------
def case_size(case: Case) -> tuple:
    return (sum(len(r) for r in case.slides), len(case.text()))


def shrink(case: Case, kind: str, con, budget: int = 150) -> Case:
    """Drop rows one at a time (slides stay) while the case still fails with the same kind."""
    def fails(c: Case) -> bool:
        try:
            return any(f.kind == kind for f in run_core_case(c, con))
        except Exception:
            return False

    runs = 0
    for j in range(len(case.slides)):
        i = 0
        while i < len(case.slides[j]) and runs < budget:
            slides = [list(r) for r in case.slides]
            del slides[j][i]
            splits = [list(s) for s in case.splits]
            splits[j] = [len(slides[j])] if slides[j] else []
            cand = replace(case, slides=slides, splits=splits)
            runs += 1
            if fails(cand):
                case = cand
            else:
                i += 1
    if case.buffer and runs < budget:
        cand = replace(case, buffer=[])
        if fails(cand):
            case = cand
    return case


def format_case(case: Case, server: bool = False) -> str:
    k, n = len(case.slides), case.n
    lines = [f"seed={case.seed} case={case.index}   rerun: python tests/differential.py --seed {case.seed} --case {case.index}"
             + (" --server" if server else ""),
             f"schema: {dict(case.schema)}  profiles: {case.profiles}",
             f"subwindows={n} subwindow_ms=1000 clock=manual group_by={case.declared}  slides={k}"
             f" (window holds slides {max(0, k - n)}..{k - 1})"]
    j = 0
    while j < k:
        mark = "" if j >= k - n else "   (evicted)"
        if not case.slides[j]:  # a run of empty sub-windows on one line
            end = j
            while end + 1 < k and not case.slides[end + 1] and (end + 1 >= k - n) == (j >= k - n):
                end += 1
            lines.append(f"  slide {j}: []{mark}" if end == j else f"  slides {j}..{end}: [] each{mark}")
            j = end + 1
            continue
        rows = case.slides[j]
        lines.append(f"  slide {j}: {rows!r}{mark}" + (f"  appends {case.splits[j]}" if len(case.splits[j]) > 1 else ""))
        j += 1
    if case.buffer:
        lines.append(f"  open buffer (not visible): {case.buffer!r}")
    lines.append(f"query: {case.text()}")
    if case.query.invalid:
        lines.append(f"invalid on purpose: {case.query.invalid}; the error should name one of {case.query.tokens}")
    return "\n".join(lines)


def format_failure(f: Failure, server: bool = False) -> str:
    out = [format_case(f.case, server), f"FAILED [{f.path}] {f.kind}: {f.detail}"]
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
    failures: list = field(default_factory=list)   # every Failure
    seconds: float = 0.0

    @property
    def passed(self) -> int:
        return self.cases - self.failed_cases

    def summary(self) -> str:
        return f"{self.passed} passed, {self.failed_cases} failed"

    def kinds(self) -> dict:
        """kind -> (count, smallest example)."""
        out: dict = {}
        for f in self.failures:
            count, ex = out.get(f.kind, (0, None))
            if ex is None or case_size(f.case) < case_size(ex.case):
                ex = f
            out[f.kind] = (count + 1, ex)
        return out

    def text(self, show: int = 3, server: bool = False, con=None, shrink_examples: bool = True) -> str:
        parts = []
        if self.failures:
            parts.append(f"== first {min(show, len(self.failures))} failing cases ==")
            seen = []
            for f in self.failures:
                if len(seen) >= show:
                    break
                if f.case.index not in seen:
                    seen.append(f.case.index)
                    parts.append(format_failure(f, server) + "\n")
            parts.append("== failure kinds (count, smallest example) ==")
            for kind, (count, ex) in sorted(self.kinds().items(), key=lambda kv: -kv[1][0]):
                parts.append(f"-- {count:5d} x {kind}   [{ex.path}]")
                if shrink_examples and con is not None and not server:
                    small = shrink(ex.case, kind, con)
                    again = [g for g in run_core_case(small, con) if g.kind == kind]
                    ex = again[0] if again else ex
                parts.append(_indent(format_failure(ex, server)))
        parts.append(f"{self.cases} cases in {self.seconds:.1f} s")
        parts.append(self.summary())
        return "\n".join(parts)


def _indent(s: str) -> str:
    return "\n".join("    " + line for line in s.splitlines())


def duckdb_connection():
    import duckdb

    return duckdb.connect(":memory:")


def run(cases: int, seed: int, server: bool = False, start: int = 0, progress: bool = False,
        con=None, target: Optional[str] = None) -> Report:
    """Run cases start..start+cases-1 of `seed`. With server=True, through a real server (started
    here unless `target` is given) and the SDK."""
    con = con or duckdb_connection()
    report = Report()
    t0 = time.monotonic()

    def one(index: int, runner) -> None:
        case = gen_case(seed, index)
        try:
            failures = runner(case)
        except AssertionError:
            raise
        except Exception as e:
            failures = [Failure(case, "-", f"harness/setup error: {type(e).__name__}", repr(e))]
        report.cases += 1
        if failures:
            report.failed_cases += 1
            report.failures.extend(failures)
        if progress and report.cases % 5000 == 0:
            print(f"  {report.cases} cases, {report.failed_cases} failed, {time.monotonic() - t0:.0f} s", file=sys.stderr)

    if server:
        from windowstore.clients import Client
        from windowstore.server.process import ServerProcess

        def with_target(tgt: str) -> None:
            with Client(tgt, timeout=30) as ws:
                for index in range(start, start + cases):
                    one(index, lambda c: run_server_case(c, ws, con))

        if target:
            with_target(target)
        else:
            with ServerProcess() as srv:
                with_target(srv.target)
    else:
        for index in range(start, start + cases):
            one(index, lambda c: run_core_case(c, con))
    report.seconds = time.monotonic() - t0
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0, help="first case index (default 0)")
    ap.add_argument("--case", type=int, help="run only this case index and print it in full")
    ap.add_argument("--server", action="store_true", help="through a real server and the SDK")
    ap.add_argument("--target", help="use this running server instead of starting one (with --server)")
    ap.add_argument("--show", type=int, default=3, help="failing cases printed in full (default 3)")
    ap.add_argument("--no-shrink", action="store_true", help="do not shrink the per-kind examples")
    args = ap.parse_args(argv)
    con = duckdb_connection()
    if args.case is not None:
        case = gen_case(args.seed, args.case)
        print(format_case(case, args.server))
        if not case.query.invalid:
            exp = reference(case, con)
            print(f"duckdb: {exp.sql}\nexpected: {exp.rows!r}")
        report = run(1, args.seed, server=args.server, start=args.case, con=con, target=args.target)
        for f in report.failures:
            print(f"FAILED [{f.path}] {f.kind}: {f.detail}\n  got: {f.got!r}")
        print(report.summary())
        return 1 if report.failed_cases else 0
    report = run(args.cases, args.seed, server=args.server, start=args.start, progress=True, con=con, target=args.target)
    print(report.text(show=args.show, server=args.server, con=con, shrink_examples=not args.no_shrink))
    return 1 if report.failed_cases else 0


if __name__ == "__main__":
    sys.exit(main())
