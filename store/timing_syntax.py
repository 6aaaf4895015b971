"""Timing conditions in a join's ON clause (issue 34, seed 002): the query value (`Timing`) and its
grammar, a mixin of the parser beside join_syntax.JoinClauses. Rows of each side carry an uncertain
time, uniform over two of their columns `[lo, hi]`; a condition holds for a pair when the
probability of its predicate is at least a confidence threshold:

    PROB(ABS(INTERVAL(a.lo, a.hi) - INTERVAL(b.lo, b.hi)) <= 5 s) >= 0.8   -- mutual |I1 - I2| <= d
    PROB(INTERVAL(a.lo, a.hi) + 5 s >= INTERVAL(b.lo, b.hi)) >= 0.8        -- deadline I1 + d >= I2
    PROB(INTERVAL(a.lo, a.hi) + 5 s <= INTERVAL(b.lo, b.hi)) >= 0.8        -- delay    I1 + d <= I2

`d` is an integer number of ms or a length with a unit (ms, s, min, h), as a band's offset; the
deadline and delay forms take `- d` too. In the select list of such a join, `PROB()` is the pair's
probability (a float64 column). It must not evaluate anything: store/timing.py and store/join/
timing.py do.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from .errors import Loc
from .join_syntax import _ParserPrimitives
from .lexer import _UNITS, MAX_NUMBER_LENGTH, MAX_OFFSET

# The column name PROB() stands for in a select list: no real column has parentheses in its name.
PROB_COLUMN = "prob()"


@dataclass(frozen=True)
class Timing:
    """`PROB(predicate on I1 = INTERVAL(left) and I2 = INTERVAL(right)) >= ct`. kind is mutual,
    deadline or delay; d in ms; ct as written (a decimal in (0, 1])."""

    kind: str
    left: tuple[str, str]    # (lo column, hi column) of I1
    right: tuple[str, str]   # of I2
    d: int
    ct: Decimal
    loc: Loc | None = field(default=None, compare=False, repr=False)
    left_loc: Loc | None = field(default=None, compare=False, repr=False)
    right_loc: Loc | None = field(default=None, compare=False, repr=False)
    ct_loc: Loc | None = field(default=None, compare=False, repr=False)


class TimingClauses(_ParserPrimitives):
    """The grammar of a timing condition; uses the parser's primitives (see join_syntax)."""

    def is_timing(self) -> bool:
        nxt = self.toks[self.i + 1] if self.tok.kind != "eof" else self.tok
        return self.tok.word == "prob" and nxt.kind == "punct" and nxt.text == "("

    def timing_condition(self) -> Timing:
        tok = self.tok
        self.expect("prob")
        self.expect("(")
        if self.accept("abs"):
            self.expect("(")
            left, left_loc = self.interval()
            if not self.accept("-"):
                self.fail("expected '-' between the two INTERVALs of ABS(I1 - I2)")
            right, right_loc = self.interval()
            self.expect(")")
            if not self.accept("<="):
                self.fail("expected <= after ABS(I1 - I2) (a mutual deadline |I1 - I2| <= d)")
            d = self.timing_amount(signed=False)
            kind = "mutual"
        else:
            left, left_loc = self.interval()
            d = self.timing_amount(signed=True)
            op = self.tok
            if op.kind != "op" or op.text not in (">=", "<="):
                self.fail("expected >= (a deadline I1 + d >= I2) or <= (a delay I1 + d <= I2)")
            self.i += 1
            right, right_loc = self.interval()
            kind = "deadline" if op.text == ">=" else "delay"
        self.expect(")")
        if not self.accept(">="):
            self.fail("expected >= and a confidence threshold after PROB(...)")
        ct_tok = self.tok
        ct = None
        if ct_tok.kind == "number" and len(ct_tok.text) <= MAX_NUMBER_LENGTH:
            try:
                ct = Decimal(ct_tok.text)
            except InvalidOperation:
                ct = None
        if ct is None or not (0 < ct <= 1):
            self.fail("a confidence threshold is a number in (0, 1]")
        self.i += 1
        return Timing(kind, left, right, d, ct, loc=tok.loc, left_loc=left_loc, right_loc=right_loc,
                      ct_loc=ct_tok.loc)

    def interval(self) -> tuple[tuple[str, str], Loc]:
        tok = self.tok
        if tok.word != "interval":
            self.fail("expected INTERVAL(lo, hi): the columns bounding a row's uncertain time")
        self.i += 1
        self.expect("(")
        lo = self.column("the column of the earliest time")
        self.expect(",")
        hi = self.column("the column of the latest time")
        self.expect(")")
        return (lo, hi), tok.loc

    def timing_amount(self, signed: bool) -> int:
        """`[+|-] n [unit]` in ms (`+` required when signed, unless the number carries its `-`)."""
        tok = self.tok
        sign = 1
        if signed:
            if tok.kind == "punct" and tok.text in ("+", "-"):
                sign = -1 if tok.text == "-" else 1
                self.i += 1
            elif not (tok.kind == "number" and tok.text.startswith("-")):
                self.fail("expected + d (a deadline or delay of d ms, or with a unit: ms, s, min, h)")
        tok = self.tok
        if tok.kind != "number" or not re.fullmatch(r"-?\d+", tok.text) or len(tok.text) > 25:
            self.fail("expected a time length (an integer number of ms, or with a unit: ms, s, min, h)")
        if not signed and tok.text.startswith("-"):
            self.fail("a mutual deadline |I1 - I2| <= d needs d >= 0")
        self.i += 1
        value = sign * int(tok.text)
        unit = _UNITS.get(self.tok.word)
        if unit is not None:
            if unit[0] != "ms":
                self.fail("a timing condition's length is in ms, s, min or h")
            self.i += 1
            value *= unit[1]
        if abs(value) >= MAX_OFFSET:
            self.fail("a timing condition's length is too large", tok)
        return value
