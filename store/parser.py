"""The CQL-style query text (docs/query-language.md), parsed into query.Query (one stream) or query.JoinQuery
(a join of several streams' windows, issue 14).

    SELECT src, SUM(bytes) FROM packets [RANGE 60 s SLIDE 10 s] WHERE proto = 'tcp'
      GROUP BY src ORDER BY 2 DESC LIMIT 10
    SELECT QUANTILE(total, 0.9) FROM (SELECT src, SUM(bytes) AS total FROM packets GROUP BY src)
    SELECT a.src, COUNT(*), SUM(b.bytes) FROM packets a [RANGE 30 s] JOIN flows b [RANGE 30 s]
      ON a.src = b.src AND b.ts BETWEEN a.ts AND a.ts + 2000 WHERE a.port = 22
      GROUP BY a.src ORDER BY 2 DESC LIMIT 10

GROUP BY takes one or more columns (`GROUP BY src, dst`; a join's takes one); ORDER BY names any
of them, a select item, an ordinal or an aggregate. HAVING (single-stream queries) keeps the groups
whose condition is true: tests `operand op literal`, `operand [NOT] IN (...)`, `operand IS [NOT]
NULL`, the operand an aggregate (selected or not) or a name (a GROUP BY column, else an output
name), combined with AND, OR, NOT and parentheses; without GROUP BY it keeps or drops the one row.
`SELECT DISTINCT a, b` (columns only) is the GROUP BY of the selected columns.

    SELECT src, dst, COUNT(*) AS n FROM packets GROUP BY src, dst HAVING n > 1000 AND NOT src = 'x'
    SELECT DISTINCT src, dst FROM packets [RANGE 60 s] ORDER BY dst

A join's FROM clause: `stream [[AS] alias] [window] [[AS] alias]`, then up to three more
`[INNER] JOIN stream ... [ON condition AND ...]`, then optionally `WITHIN <length>` (every pair of
joined tuples within that much event time of each other: the uniform W-join of seed 001). A join
condition is `x = y` (equi-join), `x BETWEEN y [+|- n] AND y [+|- m]` or `x <op> y [+|- n]` with
<op> one of = < <= > >= (a band over int64 columns; n in ms, or with a unit: `y + 2 s`). Columns are
`alias.col`, `stream.col` or, when only one source has it, `col`. JOIN, ON and WITHIN are keywords
only where a join can be: they stay usable as names in single-stream queries, as before.

Keywords are case-insensitive; strings use single quotes ('' escapes one); a name that is not a
plain identifier (a stream called "s-1", a column called "order") goes in double quotes. Errors
name the 0-based position and the offending token. SQL this grammar does not take is refused by
name where it is written: a function other than the aggregates (`unknown function 'foo'`, with the
list of known ones), arithmetic on a column or aggregate (`expressions are not supported`), CASE,
OFFSET, UNION/INTERSECT/EXCEPT, WINDOW, QUALIFY, FETCH. `to_text` writes a structured query back as
text.

This module is syntax only: it builds query.Query with the position of every part; names, types,
ORDER BY resolution and window lengths are checked by the binder (binder.py), which is shared with
the structured (protobuf) form.
"""
from __future__ import annotations

import datetime
import re
from dataclasses import replace
from decimal import Decimal

from .errors import Loc, QueryError, QuerySyntaxError
from .functions import SQL_NAMES
from .query import (Aggregate, Band, Equal, HavingTest, JoinQuery, KeyColumn, Logical, OrderBy, Predicate, Query,
                    Range, SelectItem, Source)

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<number>-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
  | (?P<string>'(?:[^']|'')*')
  | (?P<qident>"(?:[^"]|"")+")
  | (?P<ident>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<op><=|>=|!=|<>|=|<|>)
  | (?P<punct>[(),\[\]*;.+\-/%])
""", re.VERBOSE)

_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
KEYWORDS = {"select", "from", "where", "group", "by", "order", "limit", "asc", "desc", "and",
            "or", "not", "in", "as", "range", "slide", "distinct", "approximate"}
_UNITS = {"ms": ("ms", 1), "s": ("ms", 1000), "sec": ("ms", 1000), "second": ("ms", 1000),
          "seconds": ("ms", 1000), "min": ("ms", 60_000), "minute": ("ms", 60_000),
          "minutes": ("ms", 60_000), "h": ("ms", 3_600_000), "hour": ("ms", 3_600_000),
          "hours": ("ms", 3_600_000), "subwindow": ("subwindows", 1),
          "subwindows": ("subwindows", 1), "row": ("rows", 1), "rows": ("rows", 1)}
_AGGS = SQL_NAMES  # the aggregates' words, from the function registry (functions.register adds to it)
# Words with a meaning only in a join's FROM clause (never taken as an alias; quoted by to_text there).
JOIN_WORDS = {"join", "inner", "on", "within", "between", "left", "right", "full", "outer", "cross", "natural",
              "using"}
_JOIN_START = {"join", "inner", "left", "right", "full", "cross", "natural"}
# SQL a user may write that this grammar does not take (yet): named in the error, never "expected FROM".
_NOT_SUPPORTED = {"offset": "OFFSET", "union": "UNION", "intersect": "INTERSECT",
                  "except": "EXCEPT", "window": "WINDOW", "qualify": "QUALIFY", "fetch": "FETCH"}
_ARITHMETIC = {"+", "-", "*", "/", "%"}
MAX_OFFSET = 2**64  # band offsets beyond this are refused as syntax (the binder wants int64 anyway)
MAX_CONJUNCTIONS = 64
MAX_DEPTH = 32            # nested parentheses in WHERE
MAX_NUMBER_LENGTH = 400   # characters of one numeric literal


class _Tok:
    __slots__ = ("kind", "text", "pos")

    def __init__(self, kind: str, text: str, pos: int):
        self.kind, self.text, self.pos = kind, text, pos

    @property
    def word(self) -> str:
        return self.text.lower() if self.kind == "ident" else ""

    @property
    def loc(self) -> Loc:
        return Loc(self.pos, self.text or "end of query")


def _tokenize(text: str) -> list[_Tok]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise QuerySyntaxError("unexpected character", pos, text[pos])
        kind = m.lastgroup
        if kind != "ws":
            out.append(_Tok(kind, m.group(), pos))
        pos = m.end()
    out.append(_Tok("eof", "", len(text)))
    return out


class _Parser:
    def __init__(self, text: str):
        self.toks = _tokenize(text)
        self.i = 0
        self.depth = 0

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def fail(self, message: str, tok: _Tok | None = None, hint: str | None = None):
        tok = tok or self.tok
        raise QuerySyntaxError(message, tok.pos, tok.text or "end of query", hint)

    def is_call(self) -> bool:
        """Is the current token a name followed by `(`: a function call?"""
        nxt = self.toks[self.i + 1] if self.tok.kind != "eof" else self.tok
        return self.tok.kind == "ident" and nxt.kind == "punct" and nxt.text == "("

    def unknown_function(self):
        """Refuse a call of a function this grammar does not have, naming the ones it has."""
        tok = self.tok
        names = [f.upper() for f in SQL_NAMES]
        self.fail(f"unknown function {tok.text!r}", tok,
                  hint="the functions are " + ", ".join(names[:-1])
                  + f" and {names[-1]} (COUNT(*) and COUNT(DISTINCT col) too)")

    def no_expression(self, what: str) -> None:
        """After an operand: refuse arithmetic on it by name, not as an unexpected token."""
        tok = self.tok
        if (tok.kind == "punct" and tok.text in _ARITHMETIC) or (tok.kind == "number" and tok.text[0] == "-"):
            self.fail("expressions are not supported", hint=f"{what} is a column or an aggregate of one")

    def not_supported(self) -> None:
        """Refuse a clause this grammar does not take (yet) by name."""
        word = _NOT_SUPPORTED.get(self.tok.word)
        if word is not None:
            self.fail(f"{word} is not supported")

    def accept(self, word: str) -> bool:
        if self.tok.word == word or (self.tok.kind in ("punct", "op") and self.tok.text == word):
            self.i += 1
            return True
        return False

    def expect(self, word: str) -> None:
        if not self.accept(word):
            self.fail(f"expected {word.upper() if word.isalpha() else repr(word)}")

    def ident(self, what: str) -> str:
        """A name: a plain identifier that is not a keyword, or any text in double quotes."""
        tok = self.tok
        if tok.kind == "qident":
            self.i += 1
            return tok.text[1:-1].replace('""', '"')
        if tok.kind != "ident" or tok.word in KEYWORDS:
            self.fail(f"expected {what}")
        self.i += 1
        return tok.text

    def column(self, what: str) -> str:
        """A column name: `col`, or qualified `q.col` (one token when both are plain; `"q".col`,
        `q."col"` and `"q"."col"` for names that need quotes). Returned as written, "q.col"; the
        join binder splits it at the last dot (column names have none)."""
        first = self.tok
        name = self.ident(what)
        if first.kind == "ident" and name.endswith(".") and self.tok.kind == "qident":
            return name + self.ident(what)  # q."col": the plain qualifier's token ends with the dot
        if first.kind == "qident" and self.tok.text == "." and self.tok.kind == "punct":
            self.i += 1
            return name + "." + self.ident(what)
        return name

    def integer(self, what: str, limit: int = 2**32 - 1) -> int:
        tok = self.tok
        if tok.kind != "number" or not re.fullmatch(r"\d+", tok.text):
            self.fail(f"expected {what} (a non-negative integer)")
        if len(tok.text) > 20 or int(tok.text) > limit:
            self.fail(f"{what} is too large (at most {limit})")
        self.i += 1
        return int(tok.text)

    # -- grammar -----------------------------------------------------------------------------
    def query(self, nested: bool = False) -> Query:
        select = self.tok
        self.expect("select")
        select_i = self.i - 1
        distinct = self.accept("distinct")
        items = [self.select_item()]
        while self.accept(","):
            items.append(self.select_item())
        self.expect("from")
        inner = None
        rng = slide = None
        stream_tok = self.tok
        if self.accept("("):
            if nested:
                self.fail("only one level of sub-query is supported", stream_tok)
            inner = self.query(nested=True)
            self.expect(")")
            if self.accept("as"):
                self.ident("an alias for the sub-query")
        elif self._is_join():
            if distinct:
                self.fail("SELECT DISTINCT is not available for joins", self.toks[select_i + 1])
            return self.join_query(select, items, nested)
        else:
            stream = self.ident("a stream name")
            if self.accept("["):
                rng, slide = self.window_spec()
            as_of, as_of_tok = self.as_of()
        clause_tok = self.tok
        where, (group_by, more, more_locs, having), group_by_loc, order, limit, approximate = self.clauses(nested)
        if inner is not None:
            # The outer query aggregates the sub-query's rows; the structured form has no place for
            # anything else, so this is syntax.
            if where or group_by or having or order or limit is not None or approximate:
                self.fail("the outer query takes only aggregates over the sub-query's columns", clause_tok)
            if inner.outer:
                self.fail("only one level of sub-query is supported", stream_tok)
            for it in items:
                if not isinstance(it, Aggregate):
                    raise QuerySyntaxError(f"outer select item {it.label!r} must be an aggregate",
                                           it.loc.position, it.loc.token)
            if distinct:
                self.fail("the outer query takes only aggregates over the sub-query's columns", select)
            return replace(inner, outer=tuple(items), loc=select.loc)
        return Query(stream, tuple(items), where, group_by, tuple(order), limit, rng, slide, (), approximate,
                     loc=select.loc, stream_loc=stream_tok.loc, group_by_loc=group_by_loc, as_of_slide=as_of,
                     as_of_loc=as_of_tok.loc if as_of is not None else None, group_by_more=more,
                     group_by_more_locs=more_locs, having=having, distinct=distinct)

    def as_of(self) -> tuple[int | None, _Tok]:
        """`AS OF SLIDE k` after the stream and its window: the window as of slide k."""
        tok = self.tok
        if not (tok.word == "as" and self.toks[self.i + 1].word == "of"):
            return None, tok
        self.i += 2
        self.expect("slide")
        k = self.integer("a slide number", limit=2**63 - 1)
        if self.tok.word == "join":
            self.fail("AS OF SLIDE is not available for joins")
        return k, tok

    def clauses(self, nested: bool, join: bool = False):
        """WHERE, GROUP BY, ORDER BY, LIMIT and APPROXIMATE, then the end of the (outermost) query."""
        where = self.condition() if self.accept("where") else ()
        group_by = group_by_loc = None
        more, more_locs = [], []
        if self.tok.word == "group":
            self.i += 1
            self.expect("by")
            group_by_loc = self.tok.loc
            group_by = self.group_key()
            while self.accept(","):
                if join:
                    self.fail("a join's GROUP BY takes one column", self.toks[self.i - 1])
                more_locs.append(self.tok.loc)
                more.append(self.group_key())
        having = None
        if self.tok.word == "having":
            if join:
                self.fail("HAVING is not available for joins")
            self.i += 1
            having = self.having_condition()
        order = []
        if self.accept("order"):
            self.expect("by")
            order.append(self.order_item())
            while self.accept(","):
                order.append(self.order_item())
        limit = self.integer("a LIMIT") if self.accept("limit") else None
        approximate_tok = self.tok
        approximate = self.accept("approximate")
        if approximate and join:
            self.fail("APPROXIMATE top k is not available for joins", approximate_tok)
        self.not_supported()
        if not nested:
            self.accept(";")
            if self.tok.kind != "eof":
                self.fail("unexpected token")
        return where, (group_by, tuple(more), tuple(more_locs), having), group_by_loc, tuple(order), limit, approximate

    # HAVING: OR of AND of [NOT] (condition) or `operand op value`, kept as written (see query.Logical)
    def having_condition(self):
        tok = self.tok
        parts = [self.having_conjunction()]
        while self.accept("or"):
            parts.append(self.having_conjunction())
        return parts[0] if len(parts) == 1 else Logical("or", tuple(parts), loc=tok.loc)

    def having_conjunction(self):
        tok = self.tok
        parts = [self.having_factor()]
        while self.accept("and"):
            parts.append(self.having_factor())
        return parts[0] if len(parts) == 1 else Logical("and", tuple(parts), loc=tok.loc)

    def having_factor(self):
        tok = self.tok
        if self.depth >= MAX_DEPTH:
            self.fail(f"conditions nest more than {MAX_DEPTH} deep")
        if self.accept("not"):
            self.depth += 1
            inner = self.having_factor()
            self.depth -= 1
            return Logical("not", (inner,), loc=tok.loc)
        if tok.kind == "punct" and tok.text == "(":
            self.i += 1
            self.depth += 1
            inner = self.having_condition()
            self.expect(")")
            self.depth -= 1
            return inner
        if tok.word in _AGGS and self.toks[self.i + 1].text == "(":
            self.i += 2
            operand = self.aggregate(tok.word, tok)
            self.expect(")")
        elif self.is_call():
            self.unknown_function()
        else:
            operand = self.column("an aggregate, a GROUP BY column or an output name")
        self.no_expression("each side of a HAVING condition")
        if self.tok.word == "is":
            self.i += 1
            negate = self.accept("not")
            if self.tok.word != "null":
                self.fail("expected NULL after IS" + (" NOT" if negate else ""))
            self.i += 1
            return HavingTest(operand, "is not null" if negate else "is null", None, loc=tok.loc)
        if self.tok.word in ("in", "not"):
            negate = self.accept("not")
            self.expect("in")
            self.expect("(")
            values = [self.literal()]
            while self.accept(","):
                values.append(self.literal())
            self.expect(")")
            return HavingTest(operand, "not in" if negate else "in", tuple(values), loc=tok.loc)
        op_tok = self.tok
        if op_tok.kind != "op":
            self.fail("expected a comparison (=, !=, <, <=, >, >=, IN, IS [NOT] NULL)")
        self.i += 1
        value = self.literal()
        self.no_expression("each side of a HAVING condition")
        return HavingTest(operand, "!=" if op_tok.text == "<>" else op_tok.text, value, loc=tok.loc)

    def group_key(self) -> str:
        if self.is_call():
            self.unknown_function()
        column = self.column("a group-by column")
        self.no_expression("a GROUP BY key")
        return column

    # -- joins -----------------------------------------------------------------------------------
    def _is_join(self) -> bool:
        """Does a JOIN follow the stream at the current token (`stream [[AS] alias] [window]
        [[AS] alias]`)? Looks ahead only, never fails: other FROM clauses parse exactly as before."""
        toks, i = self.toks, self.i

        def name(i: int) -> int:
            return i + 1 if toks[i].kind == "qident" or (toks[i].kind == "ident" and toks[i].word not in KEYWORDS) else i

        def alias(i: int) -> int:
            if toks[i].word == "as":
                return name(i + 1)
            if toks[i].kind == "qident" or (toks[i].kind == "ident" and toks[i].word not in KEYWORDS | JOIN_WORDS):
                return i + 1
            return i

        j = name(i)
        if j == i:
            return False
        j = alias(j)
        if toks[j].text == "[":
            while toks[j].kind != "eof" and toks[j].text != "]":
                j += 1
            j = alias(j + 1) if toks[j].kind != "eof" else j
        return toks[j].word in _JOIN_START

    def join_query(self, select: _Tok, items: list, nested: bool) -> JoinQuery:
        sources = [self.source(self.tok)]
        while True:
            join_tok = self.tok
            if join_tok.word in ("left", "right", "full", "cross", "natural"):
                self.fail("only inner joins are supported: JOIN or INNER JOIN")
            if self.accept("inner"):
                self.expect("join")
            elif not self.accept("join"):
                break
            src = self.source(join_tok)
            if self.accept("on"):
                src = replace(src, on=self.join_conditions())
            sources.append(src)
        within = self.amount(zero=True) if self.accept("within") else None
        where, (group_by, _, _, _), group_by_loc, order, limit, _ = self.clauses(nested, join=True)
        return JoinQuery(tuple(sources), tuple(items), where, within, group_by, order, limit,
                         loc=select.loc, group_by_loc=group_by_loc)

    def source(self, loc_tok: _Tok) -> Source:
        stream_tok = self.tok
        if stream_tok.word in JOIN_WORDS:  # `JOIN ON ...`: a stream called "on" needs quotes here
            self.fail("expected a stream name")
        stream = self.ident("a stream name")
        alias = self.alias()
        rng = slide = None
        if self.accept("["):
            rng, slide = self.window_spec()
            if alias is None:
                alias = self.alias()
        return Source(stream, alias, rng, slide, loc=loc_tok.loc, stream_loc=stream_tok.loc)

    def alias(self) -> str | None:
        if self.accept("as"):
            return self.ident("an alias")
        tok = self.tok
        if tok.kind == "qident" or (tok.kind == "ident" and tok.word not in KEYWORDS | JOIN_WORDS):
            return self.ident("an alias")
        return None

    def join_conditions(self) -> tuple:
        conds = list(self.join_condition())
        while self.accept("and"):
            conds.extend(self.join_condition())
        return tuple(conds)

    def join_condition(self) -> tuple:
        tok = self.tok
        col = self.column("a column")
        if self.accept("between"):
            base, low, base_tok, _ = self.band_bound()
            self.expect("and")
            base2, high, base2_tok, _ = self.band_bound()
            if base2 == base:
                return (Band(col, base, low, high, loc=tok.loc, base_loc=base_tok.loc),)
            return (Band(col, base, low, None, loc=tok.loc, base_loc=base_tok.loc),
                    Band(col, base2, None, high, loc=tok.loc, base_loc=base2_tok.loc))
        op_tok = self.tok
        if op_tok.kind != "op" or op_tok.text in ("!=", "<>"):
            self.fail("expected =, <, <=, >, >= or BETWEEN (a join condition compares two sources' columns)")
        self.i += 1
        base, offset, base_tok, written = self.band_bound()
        op = op_tok.text
        if op == "=":
            if not written:
                return (Equal(col, base, loc=tok.loc, right_loc=base_tok.loc),)
            return (Band(col, base, offset, offset, loc=tok.loc, base_loc=base_tok.loc),)
        low = {">=": offset, ">": offset + 1}.get(op)
        high = {"<=": offset, "<": offset - 1}.get(op)
        return (Band(col, base, low, high, loc=tok.loc, base_loc=base_tok.loc),)

    def band_bound(self) -> tuple[str, int, _Tok, bool]:
        """`column [+|- n [unit]]`: (column, offset in ms, the column's token, offset written?)."""
        base_tok = self.tok
        base = self.column("a column")
        tok = self.tok
        sign = 1
        if tok.kind == "punct" and tok.text in "+-":
            sign = -1 if tok.text == "-" else 1
            self.i += 1
        elif not (tok.kind == "number" and tok.text.startswith("-")):
            return base, 0, base_tok, False
        tok = self.tok
        if tok.kind != "number" or not re.fullmatch(r"-?\d+", tok.text) or len(tok.text) > 25:
            self.fail("expected an offset (an integer number of ms, or with a unit: ms, s, min, h)")
        self.i += 1
        value = sign * int(tok.text)
        unit = _UNITS.get(self.tok.word)
        if unit is not None:
            if unit[0] != "ms":
                self.fail("a band offset is in ms, s, min or h")
            self.i += 1
            value *= unit[1]
        if abs(value) >= MAX_OFFSET:
            self.fail("a band offset is too large", tok)
        return base, value, base_tok, True

    def select_item(self):
        tok = self.tok
        word = tok.word
        nxt = self.toks[self.i + 1] if tok.kind != "eof" else tok
        if word == "case" and nxt.kind == "ident" and nxt.word not in ("from", "as"):
            self.fail("CASE is not supported")
        if tok.kind == "punct" and tok.text == "(":
            self.fail("expressions are not supported", hint="a select item is a column or an aggregate of one")
        if word in _AGGS and self.toks[self.i + 1].text == "(":
            self.i += 2
            item = self.aggregate(word, tok)
            self.expect(")")
        elif self.is_call():
            self.unknown_function()
        else:
            item = KeyColumn(self.column("a column or aggregate"), loc=tok.loc)
        self.no_expression("a select item")
        if self.accept("as"):
            item = replace(item, alias=self.ident("an alias"))
        return item

    def aggregate(self, word: str, tok: _Tok) -> Aggregate:
        loc = tok.loc
        if word == "count":
            if self.accept("*"):
                return Aggregate("count", loc=loc)
            if self.accept("distinct"):
                return Aggregate("count_distinct", self.column("a column"), loc=loc)
            return Aggregate("count", self.column("a column or *"), loc=loc)
        col = self.column("a column")
        if word == "median":
            return Aggregate("quantile", col, Decimal("0.5"), loc=loc)
        if word == "quantile":
            self.expect(",")
            qtok = self.tok
            if qtok.kind != "number" or len(qtok.text) > MAX_NUMBER_LENGTH:
                self.fail("expected a quantile fraction between 0 and 1")
            self.i += 1
            return Aggregate("quantile", col, Decimal(qtok.text), loc=loc)
        return Aggregate(word, col, loc=loc)

    def window_spec(self) -> tuple[Range | None, Range | None]:
        rng = slide = None
        if self.accept("range"):
            rng = self.amount()
        if self.accept("slide"):
            slide = self.amount()
        if rng is None and slide is None:
            self.fail("expected RANGE or SLIDE")
        self.expect("]")
        return rng, slide

    def amount(self, zero: bool = False) -> Range:
        """A length with its unit; `zero`: 0 is a length too (WITHIN 0 ms: simultaneous events)."""
        tok = self.tok
        value = self.integer("a window length")
        utok = self.tok
        unit = _UNITS.get(utok.word)
        if unit is None:
            self.fail("expected a unit (ms, s, min, h, SUBWINDOWS or ROWS)")
        self.i += 1
        if value == 0 and not zero:
            self.fail("a window length must be positive", tok)
        return Range(value * unit[1], unit[0], loc=tok.loc)

    def order_item(self) -> OrderBy:
        tok = self.tok
        if tok.kind == "number":
            ref = dict(item=self.integer("an ordinal") - 1)
        elif tok.word in _AGGS and self.toks[self.i + 1].text == "(":
            self.i += 2
            ref = dict(expr=self.aggregate(tok.word, tok))
            self.expect(")")
        elif self.is_call():
            self.unknown_function()
        else:
            ref = dict(name=self.column("an ordinal, an output name or an aggregate"))
        self.no_expression("an ORDER BY key")
        desc = False
        if self.accept("desc"):
            desc = True
        else:
            self.accept("asc")
        return OrderBy(descending=desc, loc=tok.loc, **ref)

    # conditions, flattened to OR-of-ANDs (disjunctive normal form)
    def condition(self) -> tuple[tuple[Predicate, ...], ...]:
        start = self.tok
        dnf = self.conjunction()
        while self.accept("or"):
            dnf = dnf + self.conjunction()
            if len(dnf) > MAX_CONJUNCTIONS:
                self.fail(f"condition expands to more than {MAX_CONJUNCTIONS} alternatives", start)
        return dnf

    def conjunction(self):
        dnf = self.atom()
        while self.accept("and"):
            right = self.atom()
            if len(dnf) * len(right) > MAX_CONJUNCTIONS:
                self.fail(f"condition expands to more than {MAX_CONJUNCTIONS} alternatives")
            dnf = tuple(a + b for a in dnf for b in right)
        return dnf

    def atom(self):
        if self.tok.text == "(":
            if self.depth >= MAX_DEPTH:
                self.fail(f"conditions nest more than {MAX_DEPTH} parentheses deep")
            self.i += 1
            self.depth += 1
            dnf = self.condition()
            self.expect(")")
            self.depth -= 1
            return dnf
        tok = self.tok
        if self.is_call():
            self.unknown_function()
        col = self.column("a column")
        self.no_expression("each side of a condition")
        if self.tok.kind == "ident" and self.tok.word == "is":
            self.i += 1
            negate = self.accept("not")
            if not (self.tok.kind == "ident" and self.tok.word == "null"):
                self.fail("expected NULL after IS" + (" NOT" if negate else ""))
            self.i += 1
            return ((Predicate(col, "is not null" if negate else "is null", None, loc=tok.loc),),)
        if self.tok.word in ("in", "not"):
            negate = self.accept("not")
            self.expect("in")
            self.expect("(")
            values = [self.literal()]
            while self.accept(","):
                values.append(self.literal())
            self.expect(")")
            return ((Predicate(col, "not in" if negate else "in", tuple(values), loc=tok.loc),),)
        op_tok = self.tok
        if op_tok.kind != "op":
            self.fail("expected a comparison (=, !=, <, <=, >, >=, IN, IS [NOT] NULL)")
        self.i += 1
        op = "!=" if op_tok.text == "<>" else op_tok.text
        value = self.literal()
        self.no_expression("each side of a condition")
        return ((Predicate(col, op, value, loc=tok.loc),),)

    def literal(self):
        """A string, an integer (exact, any size), a decimal number (exact: Decimal) or TRUE/FALSE."""
        tok = self.tok
        if tok.kind == "ident" and tok.word in ("true", "false"):
            self.i += 1
            return tok.word == "true"
        if tok.kind == "ident" and tok.word in ("timestamp", "date") and self.toks[self.i + 1].kind == "string":
            text_tok = self.toks[self.i + 1]
            self.i += 2
            return temporal_literal(tok.word, text_tok.text[1:-1], lambda m: self.fail(m, text_tok))
        if tok.kind == "string":
            self.i += 1
            return tok.text[1:-1].replace("''", "'")
        if tok.kind == "number":
            if len(tok.text) > MAX_NUMBER_LENGTH:
                self.fail(f"a number has more than {MAX_NUMBER_LENGTH} characters")
            self.i += 1
            if any(ch in tok.text for ch in ".eE"):
                return Decimal(tok.text)
            return int(tok.text)
        self.fail("expected a number, a 'string', TRUE or FALSE")


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def temporal_literal(kind: str, text: str, fail) -> int:
    """TIMESTAMP 'YYYY-MM-DD[ HH:MM:SS[.ffffff]][+HH:MM]' as microseconds since the epoch (no zone:
    UTC), DATE 'YYYY-MM-DD' as days since the epoch: the integers such columns hold (to_text writes
    them back as integers)."""
    try:
        if kind == "date":
            return (datetime.date.fromisoformat(text.strip()) - _EPOCH.date()).days
        t = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        fail(f"{kind.upper()} {text[:40]!r} is not an ISO {kind}")
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.timezone.utc)
    d = t - _EPOCH
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


def parse_statement(text: str) -> Query | JoinQuery:
    """The structured form of query text, a single-stream Query or a JoinQuery; raises
    QuerySyntaxError naming position and token. Names and types are not checked here: see
    binder.bind and join_binder.bind_join."""
    if not isinstance(text, str) or not text.strip():
        raise QuerySyntaxError("empty query", 0, "")
    return _Parser(text).query()


def parse_query(text: str) -> Query:
    """The structured form of single-stream query text; raises QuerySyntaxError naming position and
    token. Names and types are not checked here: see binder.bind.

    A join is refused here (at its first JOIN), so that callers that plan one stream's query never
    receive a JoinQuery; parse_statement takes both."""
    q = parse_statement(text)
    if isinstance(q, JoinQuery):
        at = q.sources[1].loc or q.loc
        raise QuerySyntaxError("a join of several streams where a single-stream query is expected",
                               at.position if at.position is not None else 0, at.token or "JOIN")
    return q


# -- the text form of a structured query --------------------------------------------------------------
def to_text(q: Query | JoinQuery) -> str:
    """The query text that parses back to `q` (parse_statement(to_text(q)) == q)."""
    if isinstance(q, JoinQuery):
        return _join_text(q)
    inner = _select_text(q, q.items, with_order=True)
    if not q.outer:
        return inner
    return f"SELECT {', '.join(_item_text(a) for a in q.outer)} FROM ({inner})"


def _select_text(q: Query, items, with_order: bool) -> str:
    parts = [f"SELECT {'DISTINCT ' if q.distinct else ''}{', '.join(_item_text(it) for it in items)} FROM "
             f"{quote_name(q.stream)}"]
    window = []
    if q.range is not None:
        window.append(f"RANGE {_length_text(q.range)}")
    if q.slide is not None:
        window.append(f"SLIDE {_length_text(q.slide)}")
    if window:
        parts.append(f"[{' '.join(window)}]")
    if q.as_of_slide is not None:
        parts.append(f"AS OF SLIDE {q.as_of_slide}")
    if q.where:
        parts.append("WHERE " + " OR ".join(
            "(" + " AND ".join(_predicate_text(p) for p in conj) + ")" for conj in q.where))
    if q.group_by is not None:
        parts.append(f"GROUP BY {', '.join(quote_name(c) for c in q.group_columns)}")
    if q.having is not None:
        parts.append("HAVING " + _having_text(q.having))
    if with_order and q.order_by:
        parts.append("ORDER BY " + ", ".join(_order_text(o) for o in q.order_by))
    if q.limit is not None:
        parts.append(f"LIMIT {q.limit}")
    if q.approximate:
        parts.append("APPROXIMATE")
    return " ".join(parts)


def _join_text(q: JoinQuery) -> str:
    parts = [f"SELECT {', '.join(_item_text(it) for it in q.items)} FROM"]
    for i, src in enumerate(q.sources):
        parts.append(("JOIN " if i else "") + _join_name(src.stream))
        if src.alias is not None:
            parts.append(_join_name(src.alias))
        window = []
        if src.range is not None:
            window.append(f"RANGE {_length_text(src.range)}")
        if src.slide is not None:
            window.append(f"SLIDE {_length_text(src.slide)}")
        if window:
            parts.append(f"[{' '.join(window)}]")
        if src.on:
            parts.append("ON " + " AND ".join(_condition_text(c) for c in src.on))
    if q.within is not None:
        parts.append(f"WITHIN {_length_text(q.within)}")
    if q.where:
        parts.append("WHERE " + " OR ".join(
            "(" + " AND ".join(_predicate_text(p) for p in conj) + ")" for conj in q.where))
    if q.group_by is not None:
        parts.append(f"GROUP BY {quote_name(q.group_by)}")
    if q.order_by:
        parts.append("ORDER BY " + ", ".join(_order_text(o) for o in q.order_by))
    if q.limit is not None:
        parts.append(f"LIMIT {q.limit}")
    inner = " ".join(parts)
    if not q.outer:
        return inner
    return f"SELECT {', '.join(_item_text(a) for a in q.outer)} FROM ({inner})"


def _join_name(name: str) -> str:
    """A stream name or alias in a join's FROM clause: also quoted when it is a join keyword."""
    return '"' + name.replace('"', '""') + '"' if name.lower() in JOIN_WORDS else quote_name(name)


def _condition_text(c) -> str:
    if isinstance(c, Equal):
        return f"{quote_name(c.left)} = {quote_name(c.right)}"
    col = quote_name(c.column)
    if c.low is not None and c.high is not None:
        return f"{col} BETWEEN {_offset_text(c.base, c.low)} AND {_offset_text(c.base, c.high)}"
    if c.low is not None:
        return f"{col} >= {_offset_text(c.base, c.low)}"
    if c.high is not None:
        return f"{col} <= {_offset_text(c.base, c.high)}"
    raise QueryError("a band condition needs a lower or an upper bound", c.loc)


def _offset_text(base: str, offset: int) -> str:
    if offset == 0:
        return quote_name(base)
    return f"{quote_name(base)} {'-' if offset < 0 else '+'} {abs(offset)}"


def _item_text(it: SelectItem) -> str:
    text = quote_name(it.column) if isinstance(it, KeyColumn) else _agg_text(it)
    return f"{text} AS {quote_name(it.alias)}" if it.alias else text


def _agg_text(a: Aggregate) -> str:
    if a.func == "count" and a.column is None:
        return "COUNT(*)"
    if a.func == "count_distinct":
        return f"COUNT(DISTINCT {quote_name(a.column)})"
    if a.func == "quantile":
        return f"QUANTILE({quote_name(a.column)}, {a.q if isinstance(a.q, Decimal) else repr(a.q)})"
    return f"{a.func.upper()}({quote_name(a.column)})"


def _order_text(o: OrderBy) -> str:
    ref = quote_name(o.name) if o.name is not None else _agg_text(o.expr) if o.expr is not None else str(o.item + 1)
    return f"{ref} DESC" if o.descending else ref


def _having_text(c) -> str:
    if isinstance(c, Logical):
        if c.op == "not":
            return f"NOT ({_having_text(c.parts[0])})"
        return "(" + f" {c.op.upper()} ".join(_having_text(p) for p in c.parts) + ")"
    operand = _agg_text(c.operand) if isinstance(c.operand, Aggregate) else quote_name(c.operand)
    return _predicate_text(Predicate(operand, c.op, c.value), quote=False)


def _length_text(r: Range) -> str:
    return f"{r.value} {'ms' if r.unit == 'ms' else r.unit.upper()}"


def _predicate_text(p: Predicate, quote: bool = True) -> str:
    column = quote_name(p.column) if quote else p.column
    if p.op in ("is null", "is not null"):
        return f"{column} {p.op.upper()}"
    if p.op in ("in", "not in"):
        return f"{column} {p.op.upper()} ({', '.join(literal_text(v) for v in p.value)})"
    return f"{column} {p.op} {literal_text(p.value)}"


def quote_name(name: str) -> str:
    """A name as query text: bare when it is a plain identifier, else in double quotes."""
    if _PLAIN_NAME.fullmatch(name) and name.lower() not in KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


def literal_text(v) -> str:
    """A literal as query text, exactly (a float is written as its exact decimal value)."""
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, float):
        if v != v:
            raise QueryError("NaN is not a comparable value")
        if v in (float("inf"), float("-inf")):
            return "1e999" if v > 0 else "-1e999"  # beyond every double: compares as infinity does
        return str(int(v)) if v.is_integer() else format(Decimal(v), "f")
    return str(v)
