"""The store's errors out of Spark's: PySpark reports an error raised in a data source or a
foreachBatch function under its own error class, with the store's message some lines below;
`store_error` finds it and `store_errors()` raises it as the SDK would."""
from __future__ import annotations

import contextlib
import re

from .schema import SchemaMismatch


_RAISED = re.compile(r"^(?:windowstore\.clients\.(?:errors|spark\.\w+)\.(\w+)|(ValueError)): (.+)$")


def store_error(error: BaseException) -> Exception | None:
    """The windowstore error an exception from Spark carries, typed as the SDK raises it (NotFound,
    InvalidArgument, SchemaMismatch, ...), or None. PySpark formats an error raised in a data source
    or a foreachBatch function under its own error class, the store's message some lines below."""
    from .. import errors

    for line in reversed(str(error).splitlines()):
        m = _RAISED.match(line.strip())
        if m is None:
            continue
        name, builtin, message = m.groups()
        if builtin and "windowstore" not in message:
            continue  # someone else's ValueError
        cls = getattr(errors, name or "", None) or (SchemaMismatch if name == "SchemaMismatch" else ValueError)
        return cls(message)
    return None


@contextlib.contextmanager
def store_errors():
    """`with store_errors(): df.write.format("windowstore")...save()`: a failure the store caused is
    raised as the store's own error (its first line the store's message, Spark's error chained as its
    cause); any other error as Spark raised it."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 - re-raised as it is unless the store caused it
        found = store_error(e)
        if found is None:
            raise
        raise found from e
