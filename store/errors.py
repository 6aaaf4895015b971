"""One error type for bad input, so every layer above can map it to INVALID_ARGUMENT."""


class StoreError(Exception):
    """Base of every error the store core raises on purpose."""


class InvalidInput(StoreError, ValueError):
    """A schema, batch or query the store refuses; nothing was applied.

    `column` names the offending column when there is one.
    """

    def __init__(self, message: str, column: str | None = None):
        super().__init__(message)
        self.column = column


class QuerySyntaxError(InvalidInput):
    """Query text that does not parse; `position` is a 0-based character offset."""

    def __init__(self, message: str, position: int, token: str):
        super().__init__(f"{message} at position {position} (near {token!r})")
        self.position = position
        self.token = token
