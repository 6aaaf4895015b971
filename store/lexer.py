"""The query text's tokens and the grammar's vocabulary: the token pattern, keywords, units, the
aggregate function names, the words of a join's FROM clause, what SQL is refused by name, and the
size limits of one query. It turns text into tokens; it must not build any part of a query
(parser.py does)."""
from __future__ import annotations

import re

from .errors import Loc, QuerySyntaxError
from .functions import SQL_NAMES

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<number>-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
  | (?P<string>'(?:[^']|'')*')
  | (?P<qident>"(?:[^"]|"")+")
  | (?P<ident>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<op><=|>=|!=|<>|=|<|>)
  | (?P<concat>\|\|)
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
            out.append(_Tok(kind, m.group(), pos))  # type: ignore[arg-type]  # every alternative is a named group
        pos = m.end()
    out.append(_Tok("eof", "", len(text)))
    return out
