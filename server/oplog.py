"""Operator logging: one structured line per event an operator acts on (a stream created or
dropped, a periodic query registered, unregistered or stopped, a client error, a slow query, a
recovery step, a stream stopped), as text or as one JSON object per line (`serve --log-format`).

It owns the `windowstore.ops` logger and its formatters; callers pass an event name and fields, and
never format the line themselves. It reads no other module's state (Limited keeps its own counts)."""
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


class Limited:
    """One event name logged at most `limit` times per key in each `every_s` seconds of `clock`
    (limit 0: every time). Beyond the limit an event is counted, not logged; the key's first event
    after its window logs `<name>_suppressed` with the key's fields, the count and the seconds it
    covers, then opens a new window. A client retrying a refused call every few milliseconds would
    otherwise write a line per retry: on the event loop, into a pipe or a journal that may not keep
    up. The keys come from closed sets (a method and a status code), so the table is bounded; every
    refused call is still counted in the metrics."""

    def __init__(self, name: str, key_fields: tuple[str, ...], limit: int, every_s: float = 10.0,
                 clock=time.monotonic):
        if limit < 0 or every_s <= 0:
            raise ValueError(f"a log limit needs limit >= 0 and every_s > 0, got {limit} and {every_s}")
        self.name, self.key_fields, self.limit, self.every_s, self.clock = name, key_fields, limit, every_s, clock
        self._windows: dict[tuple, list] = {}  # key -> [window start, events logged, events suppressed]

    def event(self, level: int = logging.INFO, **fields) -> None:
        if self.allows(*(fields[k] for k in self.key_fields), level=level):
            event(self.name, level, **fields)

    def allows(self, *key, level: int = logging.INFO) -> bool:
        """Whether the next event of `key` (its key fields' values, in order) is to be logged; an
        event over the limit is counted instead. A caller whose fields cost something to build asks
        this first and builds them only when it is."""
        if not self.limit:
            return True
        now = self.clock()
        window = self._windows.get(key)
        if window is None or now - window[0] >= self.every_s:
            if window is not None and window[2]:
                event(f"{self.name}_suppressed", level, **dict(zip(self.key_fields, key)), suppressed=window[2],
                      seconds=round(now - window[0], 1))
            window = self._windows[key] = [now, 0, 0]
        if window[1] < self.limit:
            window[1] += 1
            return True
        window[2] += 1
        return False

    def suppressed(self) -> int:
        """Events counted and not logged, in the keys' current windows."""
        return sum(w[2] for w in self._windows.values())

    def _check(self) -> None:
        for key, (start, logged, suppressed) in self._windows.items():
            assert len(key) == len(self.key_fields), key
            assert 0 < logged <= self.limit and suppressed >= 0, (key, logged, suppressed)
            assert suppressed == 0 or logged == self.limit, (key, logged, suppressed)
            assert start <= self.clock(), (key, start)


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
