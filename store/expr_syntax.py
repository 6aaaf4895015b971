"""The query text with expressions (issue 32): a single-stream SELECT whose select items, WHERE,
GROUP BY, HAVING and ORDER BY are expressions (expr.py), aggregates of expressions with FILTER
(WHERE ...), COUNT(DISTINCT a, b), NOW(), INTERVAL and time_bucket/date_trunc, and an outer query
with its own WHERE, GROUP BY, ORDER BY and LIMIT over a sub-query.

parser.parse_statement tries the first grammar (parser.py) first and comes here only when that one
refuses the text, so every query it took keeps its structured form and its plan. This module is
syntax only: it builds a query.Query whose `expr` is an expr_query.Select; names and types are
checked by expr_query.bind_select. Errors name what is not supported and its position.
"""
from __future__ import annotations

from decimal import Decimal

from .errors import QuerySyntaxError
from .functions import SQL_NAMES
from .expr import (AGGREGATES, CAST_TYPES, CONCAT_OPERATOR, SCALAR_FUNCTIONS, Agg, Arith, Between, Case, Cast, Cmp, Col, Expr,
                   Func, InList, IsDistinct, IsNull, Like, Lit, Logic, Neg, Not, Now, Star)
from .expr_decimal import MAX_WIDTH, literal_type
from .lexer import _NOT_SUPPORTED, _UNITS, MAX_DEPTH, MAX_NUMBER_LENGTH
from .parser import _Parser, temporal_literal
from .query import Query
from .expr_query import OrderKey, Select, SelectExpr

# Words that end an expression or start a clause: never taken as a column name or an alias.
_RESERVED = {"select", "from", "where", "group", "by", "order", "limit", "asc", "desc", "and", "or", "not",
             "in", "as", "distinct", "having", "is", "between", "like", "case", "when", "then", "else", "end",
             "null", "true", "false", "filter", "cast", "interval", "on", "join", "offset", "union",
             "intersect", "except", "window", "qualify", "fetch", "approximate", "ilike", "similar"}
_INTERVAL_UNITS = {**{k: v[1] for k, v in _UNITS.items() if v[0] == "ms"}, "day": 86_400_000, "days": 86_400_000,
                   "millisecond": 1, "milliseconds": 1, "mins": 60_000}


class ExprParser(_Parser):
    def fail(self, message, tok=None, hint=None):
        tok = tok or self.tok
        raise QuerySyntaxError(message, tok.pos, tok.text or "end of query", hint)

    # -- the query ---------------------------------------------------------------------------
    def statement(self) -> Query:
        q = self.select_query(nested=False)
        self.accept(";")
        if self.tok.kind != "eof":
            self.not_supported()
            self.fail("unexpected token")
        return q

    def select_query(self, nested: bool) -> Query:
        select = self.tok
        self.expect("select")
        distinct = self.accept("distinct")
        items = [self.select_item()]
        while self.accept(","):
            items.append(self.select_item())
        self.expect("from")
        stream_tok = self.tok
        inner_q = None
        rng = slide = as_of = None
        as_of_tok = None
        if self.accept("("):
            if nested:
                self.fail("only one level of sub-query is supported", stream_tok)
            inner_q = self.select_query(nested=True)
            self.expect(")")
            if self.accept("as"):
                self.ident("an alias for the sub-query")
            elif self.tok.kind in ("ident", "qident") and self.tok.word not in _RESERVED:
                self.ident("an alias for the sub-query")
            stream = inner_q.stream
        else:
            stream = self.ident("a stream name")
            if self.accept("["):
                rng, slide = self.window_spec()
            as_of, as_of_tok = self.as_of()
            if self.tok.word in ("join", "inner", "left", "right", "full", "cross", "natural") or self.tok.text == ",":
                self.fail("a join with expressions is not supported",
                          hint="a join takes the first grammar's columns, aggregates and conditions")
        where = self.expression() if self.accept("where") else None
        group_by: list[Expr] = []
        if self.tok.word == "group":
            self.i += 1
            self.expect("by")
            group_by.append(self.expression())
            while self.accept(","):
                group_by.append(self.expression())
        having = None
        if self.tok.word == "having":
            self.i += 1
            having = self.expression()
        order = []
        if self.accept("order"):
            self.expect("by")
            order.append(self.order_key())
            while self.accept(","):
                order.append(self.order_key())
        limit = self.integer("a LIMIT") if self.accept("limit") else None
        self.not_supported()
        sel = Select(tuple(items), where, tuple(group_by), having, tuple(order), limit, distinct,
                     inner=inner_q.expr if inner_q is not None else None)  # type: ignore[arg-type]  # a Select
        selected: tuple = tuple(items)  # (a query with expressions holds its SelectExprs as items)
        if inner_q is not None:
            return Query(inner_q.stream, selected, range=inner_q.range, slide=inner_q.slide, loc=select.loc,
                         stream_loc=inner_q.stream_loc, as_of_slide=inner_q.as_of_slide,
                         as_of_loc=inner_q.as_of_loc, expr=sel)
        return Query(stream, selected, range=rng, slide=slide, loc=select.loc, stream_loc=stream_tok.loc,
                     as_of_slide=as_of, as_of_loc=as_of_tok.loc if as_of is not None else None, expr=sel)  # type: ignore[union-attr]

    def select_item(self) -> SelectExpr:
        tok = self.tok
        if tok.kind == "punct" and tok.text == "*":  # every input column (expanded by the binder)
            self.i += 1
            return SelectExpr(Star(loc=tok.loc), None, text=None, loc=tok.loc)
        e = self.expression()
        alias = None
        if self.accept("as"):  # (AS is not optional: `COUNT(*) FORM s` reads as a misspelt FROM)
            alias = self.ident("an alias")
        return SelectExpr(e, alias, text=None, loc=tok.loc)

    def order_key(self) -> OrderKey:
        tok = self.tok
        e = self.expression()
        desc = False
        if self.accept("desc"):
            desc = True
        else:
            self.accept("asc")
        nulls_first = None
        if self.tok.word == "nulls":
            self.i += 1
            if self.tok.word not in ("first", "last"):
                self.fail("expected FIRST or LAST after NULLS")
            nulls_first = self.tok.word == "first"
            self.i += 1
        return OrderKey(e, desc, loc=tok.loc, nulls_first=nulls_first)

    # -- expressions, loosest binding first ------------------------------------------------------
    def expression(self) -> Expr:
        if self.depth >= MAX_DEPTH:
            self.fail(f"expressions nest more than {MAX_DEPTH} deep")
        self.depth += 1
        try:
            return self.disjunction()
        finally:
            self.depth -= 1

    def disjunction(self) -> Expr:
        tok = self.tok
        parts = [self.conjunction()]
        while self.accept("or"):
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else Logic("or", tuple(parts), loc=tok.loc)

    def conjunction(self) -> Expr:
        tok = self.tok
        parts = [self.negation()]
        while self.accept("and"):
            parts.append(self.negation())
        return parts[0] if len(parts) == 1 else Logic("and", tuple(parts), loc=tok.loc)

    def negation(self) -> Expr:
        tok = self.tok
        if self.accept("not"):
            if self.depth >= MAX_DEPTH:
                self.fail(f"expressions nest more than {MAX_DEPTH} deep")
            self.depth += 1
            try:
                return Not(self.negation(), loc=tok.loc)
            finally:
                self.depth -= 1
        return self.predicate()

    def predicate(self) -> Expr:
        tok = self.tok
        left = self.concatenation()
        t = self.tok
        if t.kind == "op":
            self.i += 1
            op = "!=" if t.text == "<>" else t.text
            return Cmp(op, left, self.concatenation(), loc=t.loc)
        if t.word == "is":
            self.i += 1
            negate = self.accept("not")
            if self.accept("null"):
                return IsNull(left, negate, loc=t.loc)
            if self.accept("distinct"):
                self.expect("from")
                return IsDistinct(left, self.additive(), negate, loc=t.loc)
            self.fail("expected NULL or DISTINCT FROM after IS" + (" NOT" if negate else ""))
        negate = False
        if t.word == "not" and self.toks[self.i + 1].word in ("between", "like", "in", "ilike", "similar"):
            self.i += 1
            negate = True
        w = self.tok.word
        if w == "between":
            self.i += 1
            low = self.additive()
            self.expect("and")
            return Between(left, low, self.additive(), negate, loc=tok.loc)
        if w == "like":
            self.i += 1
            return Like(left, self.additive(), negate, loc=tok.loc)
        if w in ("ilike", "similar"):
            self.fail(f"{w.upper()} is not supported", hint="use LIKE (with lower() for a case-blind match)")
        if w == "in":
            self.i += 1
            self.expect("(")
            if self.tok.word == "select":
                self.fail("IN (SELECT ...) is not supported")
            values = [self.additive()]
            while self.accept(","):
                values.append(self.additive())
            self.expect(")")
            return InList(left, tuple(values), negate, loc=tok.loc)
        return left

    def concatenation(self) -> Expr:
        """`a || b || c`: binds looser than + and -, tighter than comparisons (PostgreSQL's and
        DuckDB's precedence), one node for the whole chain."""
        first = self.tok
        parts = [self.additive()]
        while self.tok.kind == "concat":
            self.i += 1
            parts.append(self.additive())
        return parts[0] if len(parts) == 1 else Func(CONCAT_OPERATOR, tuple(parts), loc=first.loc)

    def additive(self) -> Expr:
        left = self.multiplicative()
        while True:
            t = self.tok
            if t.kind == "punct" and t.text in "+-":
                self.i += 1
                left = Arith(t.text, left, self.multiplicative(), loc=t.loc)
            elif t.kind == "number" and t.text.startswith("-"):  # `a -1`: the lexer's signed number
                right = self.number_literal(t, t.text[1:])
                self.i += 1
                left = Arith("-", left, self.postfix_multiplicative(right), loc=t.loc)
            else:
                return left

    def postfix_multiplicative(self, left: Expr) -> Expr:
        while self.tok.kind == "punct" and self.tok.text in ("*", "/", "%"):
            t = self.tok
            self.i += 1
            left = Arith(t.text, left, self.unary(), loc=t.loc)
        return left

    def multiplicative(self) -> Expr:
        return self.postfix_multiplicative(self.unary())

    def unary(self) -> Expr:
        t = self.tok
        if t.kind == "punct" and t.text in "+-":
            self.i += 1
            if self.depth >= MAX_DEPTH:
                self.fail(f"expressions nest more than {MAX_DEPTH} deep")
            self.depth += 1
            try:
                arg = self.unary()
            finally:
                self.depth -= 1
            if t.text == "+":
                return arg
            if isinstance(arg, Lit) and (arg.type in ("int64", "float64") or arg.type.startswith("decimal(")) \
                    and arg.value is not None:
                return Lit(-arg.value, arg.type, loc=t.loc)
            return Neg(arg, loc=t.loc)
        return self.primary()

    def number_literal(self, tok, text: str) -> Lit:
        if len(text) > MAX_NUMBER_LENGTH:
            self.fail(f"a number has more than {MAX_NUMBER_LENGTH} characters", tok)
        dec = literal_type(text)
        if dec is not None:  # 1.50: DECIMAL(3,2), as DuckDB types it
            return Lit(Decimal(text), dec, loc=tok.loc)
        if any(ch in text for ch in ".eE"):
            return Lit(float(Decimal(text)), "float64", loc=tok.loc)
        value = int(text)
        if value > 2**63 - 1 and not (value == 2**63 and tok.text.startswith("-")):
            self.fail("an integer constant is out of the range of BIGINT", tok)
        return Lit(value, "int64", loc=tok.loc)

    def primary(self) -> Expr:  # type: ignore[return]  # every branch returns or fails
        t = self.tok
        w = t.word
        if t.kind == "number":
            self.i += 1
            lit = self.number_literal(t, t.text)
            if lit.value == 2**63:
                self.fail("an integer constant is out of the range of BIGINT", t)
            return lit
        if t.kind == "string":
            self.i += 1
            return Lit(t.text[1:-1].replace("''", "'"), "string", loc=t.loc)
        if t.kind == "punct" and t.text == "(":
            self.i += 1
            if self.tok.word == "select":
                self.fail("a sub-query in an expression is not supported", hint="a sub-query goes in FROM")
            e = self.expression()
            self.expect(")")
            return e
        if t.kind == "punct" and t.text == "*":
            self.fail("expected an expression", hint="* stands only in COUNT(*)")
        if w in ("true", "false"):
            self.i += 1
            return Lit(w == "true", "boolean", loc=t.loc)
        if w == "null":
            self.i += 1
            return Lit(None, "null", loc=t.loc)
        if w in ("timestamp", "date") and self.toks[self.i + 1].kind == "string":
            text_tok = self.toks[self.i + 1]
            self.i += 2
            value = temporal_literal(w, text_tok.text[1:-1], lambda m: self.fail(m, text_tok))
            return Lit(int(value), w, loc=t.loc)
        if w == "interval":
            return self.interval_literal()
        if w == "case":
            return self.case()
        if w == "cast" and self.is_call():
            self.i += 2
            arg = self.expression()
            self.expect("as")
            ty = self.tok
            target = CAST_TYPES.get(ty.word, "")
            if ty.word in ("decimal", "numeric"):
                target = self.decimal_type()
            elif not target:
                self.fail(f"CAST to {ty.text or 'nothing'} is not supported",
                          hint="the types are BIGINT, DOUBLE, VARCHAR, BOOLEAN and DECIMAL(p, s)")
            else:
                self.i += 1
            self.expect(")")
            return Cast(arg, target, loc=t.loc)
        if self.is_call():
            return self.call()
        if t.kind in ("ident", "qident"):
            if t.kind == "ident" and w in _RESERVED:
                word = _NOT_SUPPORTED.get(w)
                if word is not None:
                    self.fail(f"{word} is not supported")
                self.fail("expected an expression")
            return Col(self.column("a column"), loc=t.loc)
        self.fail("expected an expression")

    def decimal_type(self) -> str:
        """DECIMAL [(width [, scale])] (DuckDB's default: DECIMAL(18,3)) as the type "decimal(p,s)"."""
        tok = self.tok
        self.i += 1
        p, sc = 18, 3
        if self.accept("("):
            p, sc = self.integer("a DECIMAL width"), 0
            if self.accept(","):
                sc = self.integer("a DECIMAL scale")
            self.expect(")")
        if not 1 <= p <= MAX_WIDTH or sc > p:
            self.fail(f"DECIMAL({p},{sc}) is not a type: a width from 1 to {MAX_WIDTH} and a scale up to the width",
                      tok)
        return f"decimal({p},{sc})"

    def interval_literal(self) -> Lit:
        t = self.tok
        self.i += 1
        tok = self.tok
        if tok.kind == "string":
            parts = tok.text[1:-1].split()
            self.i += 1
            if len(parts) == 1 and self.tok.word in _INTERVAL_UNITS:
                parts.append(self.tok.word)
                self.i += 1
        elif tok.kind == "number":
            parts = [tok.text]
            self.i += 1
            parts.append(self.tok.word)
            self.i += 1
        else:
            self.fail("expected an interval such as INTERVAL '1 min'")
        if len(parts) != 2 or not parts[0].isdigit() or parts[1].lower() not in _INTERVAL_UNITS:
            self.fail("expected an interval such as INTERVAL '1 min' (units: ms, s, min, h, day)", tok)
        ms = int(parts[0]) * _INTERVAL_UNITS[parts[1].lower()]
        if ms > 2**62:
            self.fail("the interval is too long", tok)
        return Lit(ms, "interval", loc=t.loc)

    def case(self) -> Case:
        t = self.tok
        self.i += 1
        operand = None if self.tok.word == "when" else self.expression()
        whens = []
        while self.accept("when"):
            w = self.expression()
            self.expect("then")
            whens.append((w, self.expression()))
        if not whens:
            self.fail("expected WHEN")
        default = self.expression() if self.accept("else") else None
        self.expect("end")
        return Case(operand, tuple(whens), default, loc=t.loc)

    def call(self) -> Expr:
        t = self.tok
        name = t.word if t.kind == "ident" else ""
        self.i += 2  # name (
        if name in AGGREGATES:
            return self.aggregate_call(name, t)
        if name == "now":
            self.expect(")")
            return Now(loc=t.loc)
        if name in SQL_NAMES:  # an aggregate of the function registry that this grammar does not compute
            self.fail(f"{t.text.upper()} cannot be combined with expressions yet", t,
                      hint="write it as the first grammar has it: over a column, without arithmetic around it")
        if name not in SCALAR_FUNCTIONS:
            known = [f.upper() for f in sorted(set(SCALAR_FUNCTIONS) | set(AGGREGATES) | set(SQL_NAMES) | {"now"})]
            self.fail(f"unknown function {t.text!r}", t, hint="the functions are " + ", ".join(known)
                      + " (COUNT(*) and COUNT(DISTINCT ...) too)")
        args = [] if self.tok.text == ")" else [self.expression()]
        while self.accept(","):
            args.append(self.expression())
        self.expect(")")
        lo, hi = SCALAR_FUNCTIONS[name]
        if not lo <= len(args) <= hi:
            want = str(lo) if lo == hi else f"{lo} to {hi}"
            self.fail(f"{name}() takes {want} arguments, not {len(args)}", t)
        return Func(name, tuple(args), loc=t.loc)

    def aggregate_call(self, name: str, t) -> Agg:
        if self.tok.word == "distinct" and name != "count":
            self.fail(f"{name.upper()}(DISTINCT ...) is not supported", hint="COUNT(DISTINCT ...) is")
        distinct = self.accept("distinct")
        q = None
        if name == "count" and not distinct and self.accept("*"):
            args: tuple = ()
        else:
            if self.tok.text == ")":
                self.fail(f"{name.upper()} needs an argument")
            first = self.expression()
            items = [first]
            if name == "quantile":
                self.expect(",")
                qtok = self.tok
                if qtok.kind != "number" or len(qtok.text) > MAX_NUMBER_LENGTH:
                    self.fail("expected a quantile fraction between 0 and 1")
                self.i += 1
                q = Decimal(qtok.text)
                if not 0 <= q <= 1:
                    self.fail("a quantile fraction is between 0 and 1", qtok)
            else:
                while self.accept(","):
                    if not (name == "count" and distinct):
                        self.fail(f"{name.upper()} takes one argument", self.toks[self.i - 1])
                    items.append(self.expression())
            args = tuple(items)
        self.expect(")")
        if name == "median":
            name, q = "quantile", Decimal("0.5")
        filt = None
        if self.tok.word == "filter":
            self.i += 1
            self.expect("(")
            self.expect("where")
            filt = self.expression()
            self.expect(")")
        if self.tok.word == "over":
            self.fail("window functions (OVER) are not supported")
        return Agg(name, args, distinct, filt, q, loc=t.loc)


def parse_select(text: str) -> Query:
    """The structured form of a single-stream query with expressions (see the module docstring)."""
    return ExprParser(text).statement()
