"""The CQL-style query text of DESIGN.md, parsed into query.Query.

    SELECT src, SUM(bytes) FROM packets [RANGE 60 s SLIDE 10 s] WHERE proto = 'tcp'
      GROUP BY src ORDER BY 2 DESC LIMIT 10
    SELECT QUANTILE(total, 0.9) FROM (SELECT src, SUM(bytes) AS total FROM packets GROUP BY src)

Keywords are case-insensitive; strings use single quotes ('' escapes one). Errors name the
0-based position and the offending token.
"""
from __future__ import annotations

import re
from dataclasses import replace

from .errors import QuerySyntaxError
from .query import Aggregate, KeyColumn, OrderBy, Predicate, Query, Range

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<number>-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
  | (?P<string>'(?:[^']|'')*')
  | (?P<ident>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<op><=|>=|!=|<>|=|<|>)
  | (?P<punct>[(),\[\]*;])
""", re.VERBOSE)

KEYWORDS = {"select", "from", "where", "group", "by", "order", "limit", "asc", "desc", "and",
            "or", "not", "in", "as", "range", "slide", "distinct", "approximate"}
_UNITS = {"ms": ("ms", 1), "s": ("ms", 1000), "sec": ("ms", 1000), "second": ("ms", 1000),
          "seconds": ("ms", 1000), "min": ("ms", 60_000), "minute": ("ms", 60_000),
          "minutes": ("ms", 60_000), "h": ("ms", 3_600_000), "hour": ("ms", 3_600_000),
          "hours": ("ms", 3_600_000), "subwindow": ("subwindows", 1),
          "subwindows": ("subwindows", 1), "row": ("rows", 1), "rows": ("rows", 1)}
_AGGS = {"count", "sum", "avg", "min", "max", "quantile", "median"}
MAX_CONJUNCTIONS = 64


class _Tok:
    __slots__ = ("kind", "text", "pos")

    def __init__(self, kind: str, text: str, pos: int):
        self.kind, self.text, self.pos = kind, text, pos

    @property
    def word(self) -> str:
        return self.text.lower() if self.kind == "ident" else ""


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
        tok = self.tok
        if tok.kind != "ident" or tok.word in KEYWORDS:
            self.fail(f"expected {what}")
        self.i += 1
        return tok.text

    def integer(self, what: str) -> int:
        tok = self.tok
        if tok.kind != "number" or not re.fullmatch(r"\d+", tok.text):
            self.fail(f"expected {what} (a non-negative integer)")
        self.i += 1
        return int(tok.text)

    # -- grammar -----------------------------------------------------------------------------
    def query(self, nested: bool = False) -> Query:
        self.expect("select")
        first = self.tok
        item_toks = [self.tok]
        items = [self.select_item()]
        while self.accept(","):
            item_toks.append(self.tok)
            items.append(self.select_item())
        self.expect("from")
        inner = None
        rng = slide = None
        if self.accept("("):
            inner = self.query(nested=True)
            self.expect(")")
            if self.accept("as"):
                self.ident("an alias for the sub-query")
            stream = inner.stream
        else:
            stream = self.ident("a stream name")
            if self.accept("["):
                rng, slide = self.window_spec()
        where = self.condition() if self.accept("where") else ()
        group_by = None
        if self.tok.word == "group":
            self.i += 1
            self.expect("by")
            group_by = self.ident("a group-by column")
        order_tok = self.tok
        order_specs = []
        if self.accept("order"):
            self.expect("by")
            order_specs.append(self.order_item())
            while self.accept(","):
                order_specs.append(self.order_item())
        limit = self.integer("a LIMIT") if self.accept("limit") else None
        approximate = self.accept("approximate")
        if not nested:
            self.accept(";")
            if self.tok.kind != "eof":
                self.fail("unexpected token")
        order = tuple(self.resolve_order(items, spec) for spec in order_specs)
        if inner is not None:
            return self.outer_query(inner, items, where, group_by, order, limit, order_tok)
        q = Query(stream, tuple(items), where, group_by, order, limit, rng, slide, (), approximate)
        self.check_items(q, item_toks, first)
        return q

    def outer_query(self, inner, items, where, group_by, order, limit, tok) -> Query:
        if inner.group_by is None:
            self.fail("a sub-query in FROM must use GROUP BY", tok)
        if where or group_by or order or limit is not None:
            self.fail("the outer query takes only aggregates over the sub-query's columns", tok)
        inner_labels = {it.label for it in inner.items}
        for it in items:
            if not isinstance(it, Aggregate):
                self.fail(f"outer select item {it.label!r} must be an aggregate", tok)
            if it.column is not None and it.column not in inner_labels:
                self.fail(f"{it.column!r} is not a column of the sub-query", tok)
        return replace(inner, outer=tuple(items))

    def check_items(self, q: Query, item_toks: list[_Tok], first: _Tok) -> None:
        for it, tok in zip(q.items, item_toks):
            if isinstance(it, KeyColumn) and it.column != q.group_by:
                self.fail(f"column {it.column!r} must be aggregated or be the GROUP BY column", tok)
        if not any(isinstance(it, Aggregate) for it in q.items):
            self.fail("select at least one aggregate", first)
        if q.approximate and not q.group_by:
            self.fail("APPROXIMATE applies to TOP k over GROUP BY", first)

    def select_item(self):
        tok = self.tok
        word = tok.word
        if word in _AGGS and self.toks[self.i + 1].text == "(":
            self.i += 2
            agg = self.aggregate(word, tok)
            self.expect(")")
        else:
            agg = KeyColumn(self.ident("a column or aggregate"))
        if self.accept("as"):
            agg = replace(agg, alias=self.ident("an alias"))
        return agg

    def aggregate(self, word: str, tok: _Tok) -> Aggregate:
        if word == "count":
            if self.accept("*"):
                return Aggregate("count")
            if self.accept("distinct"):
                return Aggregate("count_distinct", self.ident("a column"))
            return Aggregate("count", self.ident("a column or *"))
        col = self.ident("a column")
        if word == "median":
            return Aggregate("quantile", col, 0.5)
        if word == "quantile":
            self.expect(",")
            qtok = self.tok
            if qtok.kind != "number":
                self.fail("expected a quantile fraction between 0 and 1")
            q = float(qtok.text)
            if not 0.0 <= q <= 1.0:
                self.fail("quantile fraction must be between 0 and 1", qtok)
            self.i += 1
            return Aggregate("quantile", col, q)
        return Aggregate(word, col)

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
        return Range(value * unit[1], unit[0])

    def order_item(self):
        tok = self.tok
        if tok.kind == "number":
            ref = self.integer("an ordinal")
        else:
            ref = self.ident("an ordinal or alias")
        desc = False
        if self.accept("desc"):
            desc = True
        else:
            self.accept("asc")
        return ref, desc, tok

    def resolve_order(self, items, spec) -> OrderBy:
        ref, desc, tok = spec
        if isinstance(ref, int):
            if not 1 <= ref <= len(items):
                self.fail(f"ORDER BY {ref} is not a select item (1..{len(items)})", tok)
            return OrderBy(ref - 1, desc)
        for i, it in enumerate(items):
            if ref in (it.label, getattr(it, "column", None)):
                return OrderBy(i, desc)
        self.fail(f"ORDER BY {ref!r} names no select item", tok)

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
            dnf = tuple(a + b for a in dnf for b in right)
            if len(dnf) > MAX_CONJUNCTIONS:
                self.fail(f"condition expands to more than {MAX_CONJUNCTIONS} alternatives")
        return dnf

    def atom(self):
        if self.accept("("):
            dnf = self.condition()
            self.expect(")")
            return dnf
        col = self.ident("a column")
        if self.tok.word in ("in", "not"):
            negate = self.accept("not")
            self.expect("in")
            self.expect("(")
            values = [self.literal()]
            while self.accept(","):
                values.append(self.literal())
            self.expect(")")
            return ((Predicate(col, "not in" if negate else "in", tuple(values)),),)
        tok = self.tok
        if tok.kind != "op":
            self.fail("expected a comparison (=, !=, <, <=, >, >=, IN)")
        self.i += 1
        op = "!=" if tok.text == "<>" else tok.text
        return ((Predicate(col, op, self.literal()),),)

    def literal(self):
        tok = self.tok
        self.i += 1
        if tok.kind == "string":
            return tok.text[1:-1].replace("''", "'")
        if tok.kind == "number":
            return float(tok.text) if any(ch in tok.text for ch in ".eE") else int(tok.text)
        self.i -= 1
        self.fail("expected a number or a 'string'")


def parse_query(text: str) -> Query:
    if not isinstance(text, str) or not text.strip():
        raise QuerySyntaxError("empty query", 0, "")
    return _Parser(text).query()
