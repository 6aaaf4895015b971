"""Operator logging: one structured line per event an operator acts on (a stream created or
dropped, a periodic query registered, unregistered or stopped, a client error, a slow query, a
recovery step, a stream stopped), as text or as one JSON object per line (`serve --log-format`).

It owns the `windowstore.ops` logger and its formatters; callers pass an event name and fields, and
never format the line themselves. It reads no state."""
from __future__ import annotations

import json
import logging
import sys
import time

log = logging.getLogger("windowstore.ops")
LOG_FORMATS = ("text", "json")


def event(name: str, level: int = logging.INFO, **fields) -> None:
    """One operator event: `name` and its fields (values as JSON can carry them)."""
    if log.isEnabledFor(level):
        log.log(level, name, extra={"event": name, "fields": fields})


class TextFormatter(logging.Formatter):
    """`2026-11-27T16:40:01.123Z INFO stream_created stream=packets clock=processing`; other loggers'
    records as `... LEVEL logger: message`."""

    def format(self, record: logging.LogRecord) -> str:
        t = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        fields = getattr(record, "fields", None)
        if fields is None:
            line = f"{t} {record.levelname} {record.name}: {record.getMessage()}"
        else:
            line = f"{t} {record.levelname} {record.event}" + "".join(f" {k}={_text(v)}" for k, v in fields.items())  # type: ignore[attr-defined]  # records with fields carry their event
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (epoch seconds), level, logger, event or message, fields."""

    def format(self, record: logging.LogRecord) -> str:
        out = {"time": round(record.created, 3), "level": record.levelname, "logger": record.name}
        fields = getattr(record, "fields", None)
        if fields is None:
            out["message"] = record.getMessage()
        else:
            out["event"] = record.event  # type: ignore[attr-defined]  # records with fields carry their event
            out.update(fields)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def _text(v) -> str:
    s = str(v)
    return json.dumps(s) if (not s or any(c.isspace() or c in '"=' for c in s)) else s


def configure(fmt: str = "text", verbose: bool = False, stream=None) -> None:
    """Operator events at INFO always; everything else at WARNING (INFO with `verbose`)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    log.setLevel(logging.INFO)
