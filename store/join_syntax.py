"""The FROM clause of a join (parser.py's grammar, issue 14): the look-ahead that tells a join from a
single-stream query, its sources with their aliases and windows, its ON conditions (equi-joins and
bands, with offsets in ms or a unit). A mixin of the parser: it uses the parser's token primitives
(accept, expect, ident, column, fail) and its window clause (window_spec, amount, clauses); it must
not parse select lists, WHERE or HAVING itself."""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, NoReturn, Protocol

from .lexer import _JOIN_START, _UNITS, JOIN_WORDS, KEYWORDS, MAX_OFFSET, _Tok
from .query import Band, Equal, JoinQuery, Range, Source


class _ParserPrimitives(Protocol):
    """What the mixin uses of the parser (parser._Parser has them all)."""
    toks: list[_Tok]
    i: int

    @property
    def tok(self) -> _Tok: ...
    def fail(self, message: str, tok: _Tok | None = None, hint: str | None = None) -> NoReturn: ...
    def accept(self, word: str) -> bool: ...
    def expect(self, word: str) -> None: ...
    def ident(self, what: str) -> str: ...
    def column(self, what: str) -> str: ...
    def window_spec(self) -> tuple[Range | None, Range | None]: ...
    def amount(self, zero: bool = False) -> Range: ...
    def clauses(self, nested: bool, join: bool = False) -> tuple[Any, ...]: ...
    def is_timing(self) -> bool: ...
    def timing_condition(self) -> Any: ...


class JoinClauses(_ParserPrimitives):
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
        if self.is_timing():  # PROB(...) >= ct: a timing condition (timing_syntax.py)
            return (self.timing_condition(),)
        tok = self.tok
        col = self.column("a column")
        low: int | None  # a band's bounds: None where it is open
        high: int | None
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
