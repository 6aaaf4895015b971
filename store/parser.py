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
OFFSET, UNION/INTERSECT/EXCEPT, WINDOW, QUALIFY, FETCH. `to_text` (query_text.py) writes a structured
query back as text.

Tokens and the vocabulary are lexer.py's, a join's FROM clause join_syntax.py's. This module is
syntax only: it builds query.Query with the position of every part; names, types,
ORDER BY resolution and window lengths are checked by the binder (binder.py), which is shared with
the structured (protobuf) form.
"""
from __future__ import annotations

import datetime
import re
from dataclasses import replace
from decimal import Decimal
from typing import Any, NoReturn

from .errors import Loc, QuerySyntaxError
from .functions import SQL_NAMES
from .join_syntax import JoinClauses
from .timing_syntax import PROB_COLUMN, TimingClauses
from .lexer import (_AGGS, _ARITHMETIC, _NOT_SUPPORTED, _UNITS, JOIN_WORDS, KEYWORDS, MAX_CONJUNCTIONS,
                    MAX_DEPTH, MAX_NUMBER_LENGTH, MAX_OFFSET, _Tok, _tokenize)
from .query import Aggregate, HavingTest, JoinQuery, KeyColumn, Logical, OfTotal, OrderBy, Predicate, Query, Range
from .query_text import literal_text, quote_name, to_text
from . import temporal
from .expr_temporal import typed_literal
from .cumulative import parse_cumulative, starts_cumulative
from .window_shapes import SHAPE_WORDS, parse_shape

# The vocabulary (lexer.py) and the text form (query_text.py), importable from here as well.
__all__ = ["JOIN_WORDS", "KEYWORDS", "MAX_CONJUNCTIONS", "MAX_DEPTH", "MAX_NUMBER_LENGTH", "MAX_OFFSET",
           "literal_text", "parse_query", "parse_statement", "quote_name", "temporal_literal", "to_text"]


class _Parser(JoinClauses, TimingClauses):
    def __init__(self, text: str):
        self.toks = _tokenize(text)
        self.i = 0
        self.depth = 0

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def fail(self, message: str, tok: _Tok | None = None, hint: str | None = None) -> NoReturn:
        tok = tok or self.tok
        raise QuerySyntaxError(message, tok.pos, tok.text or "end of query", hint)

    def is_call(self) -> bool:
        """Is the current token a name followed by `(`: a function call?"""
        nxt = self.toks[self.i + 1] if self.tok.kind != "eof" else self.tok
        return self.tok.kind == "ident" and nxt.kind == "punct" and nxt.text == "("

    def unknown_function(self) -> NoReturn:
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
    def query(self, nested: bool = False) -> Query | JoinQuery:
        select = self.tok
        self.expect("select")
        select_i = self.i - 1
        distinct = self.accept("distinct")
        items = [self.select_item()]
        while self.accept(","):
            items.append(self.select_item())
        self.expect("from")
        inner = None
        rng = slide = shape = None
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
                if self.tok.word in SHAPE_WORDS:  # SESSION, ROWS, PARTITION BY (window_shapes.py)
                    shape, slide = parse_shape(self)
                elif starts_cumulative(self):  # RANGE UNBOUNDED, CUMULATE (cumulative.py)
                    shape, slide = parse_cumulative(self)
                else:
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
                     group_by_more_locs=more_locs, having=having, distinct=distinct, shape=shape)

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
        operand: Aggregate | str
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
        if self.tok.text == "*" and self.toks[self.i + 1].word == "total":  # a fraction of the window's total
            self.i += 2
            value = OfTotal(value)
        self.no_expression("each side of a HAVING condition")
        return HavingTest(operand, "!=" if op_tok.text == "<>" else op_tok.text, value, loc=tok.loc)

    def group_key(self) -> str:
        if self.is_call():
            self.unknown_function()
        column = self.column("a group-by column")
        self.no_expression("a GROUP BY key")
        return column


    def select_item(self):
        tok = self.tok
        word = tok.word
        nxt = self.toks[self.i + 1] if tok.kind != "eof" else tok
        if word == "case" and nxt.kind == "ident" and nxt.word not in ("from", "as"):
            self.fail("CASE is not supported")
        if (tok.kind == "punct" and tok.text == "(") or word in ("true", "false", "null"):
            self.fail("expressions are not supported", hint="a select item is a column or an aggregate of one")
        item: Aggregate | KeyColumn | temporal.TemporalItem
        if word in _AGGS and self.toks[self.i + 1].text == "(":
            self.i += 2
            item = self.aggregate(word, tok)
            self.expect(")")
        elif temporal.starts_call(self):  # DURATION(VALID(col)), ... (temporal.py)
            item = temporal.parse_item(self)
        elif word == "prob" and nxt.text == "(" and self.toks[self.i + 2].text == ")":
            self.i += 3  # PROB(): a timing join's pair probability (timing_syntax.py)
            item = KeyColumn(PROB_COLUMN, loc=tok.loc)
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
            if temporal.starts_call(self):
                return Aggregate("count", temporal.parse_argument(self), loc=loc)  # type: ignore[arg-type]  # an interval (temporal.py)
            return Aggregate("count", self.column("a column or *"), loc=loc)
        if temporal.starts_call(self):  # an aggregate over intervals: MAX(DURATION(VALID(col)))
            return Aggregate(word, temporal.parse_argument(self), loc=loc)  # type: ignore[arg-type]  # (temporal.py)
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
        if word in ("approx_quantile", "approx_top_k"):  # (column, a number: the fraction, or k)
            self.expect(",")
            qtok = self.tok
            if qtok.kind != "number" or len(qtok.text) > MAX_NUMBER_LENGTH:
                self.fail("expected a quantile fraction between 0 and 1" if word == "approx_quantile"
                          else "expected k, the number of values to list")
            self.i += 1
            return Aggregate(word, col, Decimal(qtok.text), loc=loc)
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
        ref: dict[str, Any]  # the one OrderBy field the key sets
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
        if temporal.starts_call(self):  # a test on coalesced intervals (temporal.py)
            return ((temporal.parse_test(self),),)
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
            value = temporal_literal(tok.word, text_tok.text[1:-1], lambda m: self.fail(m, text_tok))
            return typed_literal(tok.word, value)  # keeps its type: a date column meets it as DuckDB does
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
    try:
        return _Parser(text).query()
    except QuerySyntaxError as first:
        # the grammar with expressions (expr_syntax.py) takes what this one refuses; when it refuses
        # too, this one's error stands where it names the problem, else the one that got further
        from .expr_syntax import parse_select
        try:
            return parse_select(text)
        except QuerySyntaxError as second:
            if first.reason.startswith(("expressions are not supported", "CASE is not supported")):
                raise second from None  # (what the grammar with expressions says about them)
            generic = first.reason.startswith(("unknown function", "expected", "unexpected token"))
            if not generic or (first.position or 0) > (second.position or 0):
                raise first from None
            raise second from None


def parse_query(text: str) -> Query:
    """The structured form of single-stream query text; raises QuerySyntaxError naming position and
    token. Names and types are not checked here: see binder.bind.

    A join is refused here (at its first JOIN), so that callers that plan one stream's query never
    receive a JoinQuery; parse_statement takes both."""
    q = parse_statement(text)
    if isinstance(q, JoinQuery):
        at = q.sources[1].loc or q.loc or Loc()
        raise QuerySyntaxError("a join of several streams where a single-stream query is expected",
                               at.position if at.position is not None else 0, at.token or "JOIN")
    return q
