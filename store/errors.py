"""One error type for bad input, so every layer above can map it to INVALID_ARGUMENT."""
from __future__ import annotations

from dataclasses import dataclass


class StoreError(Exception):
    """Base of every error the store core raises on purpose."""


class InvalidInput(StoreError, ValueError):
    """A schema, batch or query the store refuses; nothing was applied.

    `column` names the offending column when there is one.
    """

    def __init__(self, message: str, column: str | None = None):
        super().__init__(message)
        self.column = column


class OutOfRange(InvalidInput):
    """A value outside what the store can represent exactly: an event time whose sub-window bounds
    would leave int64, a length beyond its limit. `field` names it, `limit` is the bound crossed.
    The server maps it to OUT_OF_RANGE; nothing was applied or logged."""

    def __init__(self, message: str, field: str, limit: int | None = None, column: str | None = None):
        super().__init__(message, column=column)
        self.field = field
        self.limit = limit


class Unrepresentable(StoreError):
    """A value of the server's state that the wire cannot carry (an int64 field out of range):
    reported for the one stream or answer it belongs to, never as an INTERNAL for a whole call."""

    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Loc:
    """Where a part of a query came from: a character position and token of the text form, or a
    field path of the structured form (`items[1].aggregate.column`). Errors name it."""

    position: int | None = None
    token: str | None = None
    field: str | None = None

    def describe(self) -> str:
        if self.position is not None:
            return f"at position {self.position} (near {self.token or 'end of query'!r})"
        if self.field:
            return f"(field {self.field})"
        return ""


class QueryError(InvalidInput):
    """A query the store refuses, with where in the query the problem is (`loc`); `hint`, when
    given, follows the location (what can be written instead)."""

    def __init__(self, message: str, loc: Loc | None = None, column: str | None = None, hint: str | None = None):
        where = loc.describe() if loc is not None else ""
        text = f"{message} {where}" if where else message
        super().__init__(f"{text}; {hint}" if hint else text, column=column)
        self.reason = message
        self.loc = loc
        self.position = loc.position if loc is not None else None
        self.token = loc.token if loc is not None else None
        self.field = loc.field if loc is not None else None


class QuerySyntaxError(QueryError):
    """Query text that does not parse; `position` is a 0-based character offset."""

    def __init__(self, message: str, position: int, token: str, hint: str | None = None):
        super().__init__(message, Loc(position, token), hint=hint)


class ResourceLimit(StoreError):
    """A request needs more of a bounded resource than it may use (a join's result rows, streams,
    periodic queries, staged bytes, rows waiting for a slide, requests, queries or subscriptions in
    flight, an Arrow payload's decompressed size), so it is refused rather than allowed to exhaust the
    server's memory; nothing was applied or answered. The server maps it to RESOURCE_EXHAUSTED (the
    SDK's ResourceExhausted). `limit` is the bound that was crossed, `needed` what the request wanted
    (at least), where known."""

    def __init__(self, message: str, limit: int | None = None, needed: int | None = None):
        super().__init__(message)
        self.limit = limit
        self.needed = needed
