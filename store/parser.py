"""The CQL-style query text of DESIGN.md, parsed into query.Query.

    SELECT src, SUM(bytes) FROM packets [RANGE 60 s SLIDE 10 s] WHERE proto = 'tcp'
      GROUP BY src ORDER BY 2 DESC LIMIT 10
    SELECT QUANTILE(total, 0.9) FROM (SELECT src, SUM(bytes) AS total FROM packets GROUP BY src)

Keywords are case-insensitive; strings use single quotes ('' escapes one); a name that is not a
plain identifier (a stream called "s-1", a column called "order") goes in double quotes. Errors
name the 0-based position and the offending token. `to_text` writes a structured query back as
text.

This module is syntax only: it builds query.Query with the position of every part; names, types,
ORDER BY resolution and window lengths are checked by the binder (binder.py), which is shared with
the structured (protobuf) form.
"""
from __future__ import annotations

import re
from dataclasses import replace
from decimal import Decimal

from .errors import Loc, QueryError, QuerySyntaxError
from .query import Aggregate, KeyColumn, OrderBy, Predicate, Query, Range, SelectItem

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<number>-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
  | (?P<string>'(?:[^']|'')*')
  | (?P<qident>"(?:[^"]|"")+")
  | (?P<ident>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<op><=|>=|!=|<>|=|<|>)
  | (?P<punct>[(),\[\]*;])
""", re.VERBOSE)

_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
KEYWORDS = {"select", "from", "where", "group", "by", "order", "limit", "asc", "desc", "and",
            "or", "not", "in", "as", "range", "slide", "distinct", "approximate"}
_UNITS = {"ms": ("ms", 1), "s": ("ms", 1000), "sec": ("ms", 1000), "second": ("ms", 1000),
          "seconds": ("ms", 1000), "min": ("ms", 60_000), "minute": ("ms", 60_000),
          "minutes": ("ms", 60_000), "h": ("ms", 3_600_000), "hour": ("ms", 3_600_000),
          "hours": ("ms", 3_600_000), "subwindow": ("subwindows", 1),
          "subwindows": ("subwindows", 1), "row": ("rows", 1), "rows": ("rows", 1)}
_AGGS = {"count", "sum", "avg", "min", "max", "quantile", "median"}
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

    def fail(self, message: str, tok: _Tok | None = None):
        tok = tok or self.tok
        raise QuerySyntaxError(message, tok.pos, tok.text or "end of query")

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
        else:
            stream = self.ident("a stream name")
            if self.accept("["):
                rng, slide = self.window_spec()
        clause_tok = self.tok
        where = self.condition() if self.accept("where") else ()
        group_by = group_by_loc = None
        if self.tok.word == "group":
            self.i += 1
            self.expect("by")
            group_by_loc = self.tok.loc
            group_by = self.ident("a group-by column")
        order = []
        if self.accept("order"):
            self.expect("by")
            order.append(self.order_item())
            while self.accept(","):
                order.append(self.order_item())
        limit = self.integer("a LIMIT") if self.accept("limit") else None
        approximate = self.accept("approximate")
        if not nested:
            self.accept(";")
            if self.tok.kind != "eof":
                self.fail("unexpected token")
        if inner is not None:
            # The outer query aggregates the sub-query's rows; the structured form has no place for
            # anything else, so this is syntax.
            if where or group_by or order or limit is not None or approximate:
                self.fail("the outer query takes only aggregates over the sub-query's columns", clause_tok)
            if inner.outer:
                self.fail("only one level of sub-query is supported", stream_tok)
            for it in items:
                if not isinstance(it, Aggregate):
                    raise QuerySyntaxError(f"outer select item {it.label!r} must be an aggregate",
                                           it.loc.position, it.loc.token)
            return replace(inner, outer=tuple(items), loc=select.loc)
        return Query(stream, tuple(items), where, group_by, tuple(order), limit, rng, slide, (), approximate,
                     loc=select.loc, stream_loc=stream_tok.loc, group_by_loc=group_by_loc)

    def select_item(self):
        tok = self.tok
        word = tok.word
        if word in _AGGS and self.toks[self.i + 1].text == "(":
            self.i += 2
            item = self.aggregate(word, tok)
            self.expect(")")
        else:
            item = KeyColumn(self.ident("a column or aggregate"), loc=tok.loc)
        if self.accept("as"):
            item = replace(item, alias=self.ident("an alias"))
        return item

    def aggregate(self, word: str, tok: _Tok) -> Aggregate:
        loc = tok.loc
        if word == "count":
            if self.accept("*"):
                return Aggregate("count", loc=loc)
            if self.accept("distinct"):
                return Aggregate("count_distinct", self.ident("a column"), loc=loc)
            return Aggregate("count", self.ident("a column or *"), loc=loc)
        col = self.ident("a column")
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

    def amount(self) -> Range:
        tok = self.tok
        value = self.integer("a window length")
        utok = self.tok
        unit = _UNITS.get(utok.word)
        if unit is None:
            self.fail("expected a unit (ms, s, min, h, SUBWINDOWS or ROWS)")
        self.i += 1
        if value == 0:
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
        else:
            ref = dict(name=self.ident("an ordinal, an output name or an aggregate"))
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
        col = self.ident("a column")
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
            self.fail("expected a comparison (=, !=, <, <=, >, >=, IN)")
        self.i += 1
        op = "!=" if op_tok.text == "<>" else op_tok.text
        return ((Predicate(col, op, self.literal(), loc=tok.loc),),)

    def literal(self):
        """A string, an integer (exact, any size) or a decimal number (exact: Decimal)."""
        tok = self.tok
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
        self.fail("expected a number or a 'string'")


def parse_query(text: str) -> Query:
    """The structured form of query text; raises QuerySyntaxError naming position and token.
    Names and types are not checked here: see binder.bind."""
    if not isinstance(text, str) or not text.strip():
        raise QuerySyntaxError("empty query", 0, "")
    return _Parser(text).query()


# -- the text form of a structured query --------------------------------------------------------------
def to_text(q: Query) -> str:
    """The query text that parses back to `q` (parse_query(to_text(q)) == q)."""
    inner = _select_text(q, q.items, with_order=True)
    if not q.outer:
        return inner
    return f"SELECT {', '.join(_item_text(a) for a in q.outer)} FROM ({inner})"


def _select_text(q: Query, items, with_order: bool) -> str:
    parts = [f"SELECT {', '.join(_item_text(it) for it in items)} FROM {quote_name(q.stream)}"]
    window = []
    if q.range is not None:
        window.append(f"RANGE {_length_text(q.range)}")
    if q.slide is not None:
        window.append(f"SLIDE {_length_text(q.slide)}")
    if window:
        parts.append(f"[{' '.join(window)}]")
    if q.where:
        parts.append("WHERE " + " OR ".join(
            "(" + " AND ".join(_predicate_text(p) for p in conj) + ")" for conj in q.where))
    if q.group_by is not None:
        parts.append(f"GROUP BY {quote_name(q.group_by)}")
    if with_order and q.order_by:
        parts.append("ORDER BY " + ", ".join(_order_text(o) for o in q.order_by))
    if q.limit is not None:
        parts.append(f"LIMIT {q.limit}")
    if q.approximate:
        parts.append("APPROXIMATE")
    return " ".join(parts)


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


def _length_text(r: Range) -> str:
    return f"{r.value} {'ms' if r.unit == 'ms' else r.unit.upper()}"


def _predicate_text(p: Predicate) -> str:
    if p.op in ("in", "not in"):
        return f"{quote_name(p.column)} {p.op.upper()} ({', '.join(literal_text(v) for v in p.value)})"
    return f"{quote_name(p.column)} {p.op} {literal_text(p.value)}"


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
        raise TypeError("booleans are not query literals")
    if isinstance(v, float):
        if v != v:
            raise QueryError("NaN is not a comparable value")
        if v in (float("inf"), float("-inf")):
            return "1e999" if v > 0 else "-1e999"  # beyond every double: compares as infinity does
        return str(int(v)) if v.is_integer() else format(Decimal(v), "f")
    return str(v)
