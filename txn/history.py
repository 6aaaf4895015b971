"""History recording: one JSON object per operation, in this format:

    {"seq", "stream", "op": "b"|"r"|"u"|"w"|"c"|"a", "txn", "subwindow", "version",
     "window_len", "t"}

b begins a query attempt (a restart begins again under the same txn), r reads sub-window
`subwindow` written by slide `version`, u removes the contribution of a version read earlier,
w is slide `version` writing sub-window `version mod n`, c commits, a aborts. Keys that do not
apply are null.

A join query (a read-only transaction over several streams' windows) has one b, one c (or a) per
joined stream, recorded together; each of its b records carries `window_len` of that stream and
one more key, `"streams"`: the names of every stream the transaction reads (the only key not in
every event). Its reads and removals name the stream of the sub-window.

A pinned read (`AS OF SLIDE k`) has `"as_of": k` in its b record: it must read exactly the window as
it stood after slide k (the checker judges it against slide k, not against its commit).
"""
from __future__ import annotations

import collections
import enum
import json
from typing import IO, Iterable, Iterator



class Op(enum.StrEnum):
    """A history event's op code; the values are the format's spellings (a member serialises as one)."""

    BEGIN = "b"
    READ = "r"
    REMOVE = "u"
    WRITE = "w"
    COMMIT = "c"
    ABORT = "a"


OPS = tuple(op.value for op in Op)
_SPELLING = {op: op.value for op in Op}  # (an enum's .value is a property, read on every record)
KEYS = ("seq", "stream", "op", "txn", "subwindow", "version", "window_len", "t")


class History:
    """Records events in memory (the newest `keep` records) and, when given, to a JSONL file.

    A probe's reads of its n_Q sub-windows (one atomic operation) are kept as one record and
    expanded into their r events only when read (`events`, `since`): the events are the same, a
    probe of 100 sub-windows no longer builds 100 of them on the query's path. An event with only
    the common keys is kept as a tuple of KEYS' values: cheaper to make than a dict, and one the
    garbage collector stops tracking (it holds only numbers, strings and None: the op as its plain
    spelling, an Op member is an object the collector tracks; a probe's reads as a plain tuple of
    _READS' fields, as a tuple subclass is never untracked), so the 100,000 kept do not lengthen
    every full collection, a pause of the event loop (tens of ms with them tracked)."""

    def __init__(self, path: str | None = None, keep: int | None = 100_000):
        self.seq = 0
        self._log: collections.deque = collections.deque(maxlen=keep)  # events, and _Reads records
        self._file: IO[str] | None = open(path, "w", encoding="utf-8") if path else None

    @property
    def events(self) -> list[dict]:
        """The events kept, oldest first."""
        return [ev for item in self._log for ev in _expand(item)]

    def record(self, stream: str, op: Op, txn: str, t: float, subwindow: int | None = None,
               version: int | None = None, window_len: int | None = None, streams: list[str] | None = None,
               as_of: int | None = None) -> None:
        if op.__class__ is not Op:  # (the scheduler passes members: Op(op) costs a call of the enum's metaclass)
            op = Op(op)
        ev: tuple | dict = (self.seq, stream, _SPELLING[op], txn, subwindow, version, window_len, t)  # KEYS
        if streams is not None or as_of is not None:
            ev = dict(zip(KEYS, ev))
            ev["op"] = op
            if streams is not None:
                ev["streams"] = list(streams)
            if as_of is not None:
                ev["as_of"] = as_of
        self.seq += 1
        self._log.append(ev)
        if self._file is not None:
            self._file.write("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in _expand(ev)))

    def record_reads(self, stream: str, txn: str, t: float, versions: range, n: int) -> None:
        """r events of one operation: these versions in this order, of a window of n sub-windows
        (version v is in sub-window v mod n)."""
        item = (self.seq, stream, txn, t, versions, n)  # _READS
        self.seq += len(versions)
        self._log.append(item)
        if self._file is not None:
            self._file.write("".join(json.dumps(ev, separators=(",", ":")) + "\n" for ev in _expand(item)))

    def record_read_only(self, stream: str, txn: str, t: float, window_len: int, versions: range, n: int,
                         as_of: int | None = None) -> None:
        """A read-only transaction of one operation, all at clock time t: its begin (window_len),
        its reads (as record_reads) and its commit, kept as one record (an answer recalled from
        the answer cache records so on every call); a pinned read (`as_of`, which its begin says)
        as the three records."""
        if as_of is not None:
            self.record(stream, Op.BEGIN, txn, t, window_len=window_len, as_of=as_of)
            if versions:
                self.record_reads(stream, txn, t, versions, n)
            self.record(stream, Op.COMMIT, txn, t)
            return
        item = (self.seq, stream, txn, t, window_len, versions, n)  # _READ_ONLY
        self.seq += len(versions) + 2
        self._log.append(item)
        if self._file is not None:
            self._file.write("".join(json.dumps(ev, separators=(",", ":")) + "\n" for ev in _expand(item)))

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def since(self, seq: int, stream: str | None = None, limit: int = 10_000) -> list[dict]:
        out = []
        for item in self._log:
            if _is_reads(item):
                end, of = item[0] + len(item[4]), item[1]
            elif _is_read_only(item):
                end, of = item[0] + len(item[5]) + 2, item[1]
            elif isinstance(item, tuple):
                end, of = item[0] + 1, item[1]
            else:
                end, of = item["seq"] + 1, item["stream"]
            if end <= seq or (stream is not None and of != stream):
                continue
            for ev in _expand(item):
                if ev["seq"] >= seq:
                    out.append(ev)
                    if len(out) >= limit:
                        return out
        return out


# A probe's reads of one operation: events seq .. seq + len(versions) - 1, kept as a plain tuple of
# these fields (distinguished from an event's tuple of KEYS by its length)
_READS = ("seq", "stream", "txn", "t", "versions", "n")


def _is_reads(item) -> bool:
    return type(item) is tuple and len(item) == len(_READS)


# A read-only transaction of one operation (record_read_only): its begin at seq, its reads, its
# commit at seq + len(versions) + 1, kept as a plain tuple of these fields
_READ_ONLY = ("seq", "stream", "txn", "t", "window_len", "versions", "n")


def _is_read_only(item) -> bool:
    return type(item) is tuple and len(item) == len(_READ_ONLY)


def _expand(item) -> Iterator[dict]:
    if _is_read_only(item):
        seq, stream, txn, t, window_len, versions, n = item
        yield {"seq": seq, "stream": stream, "op": Op.BEGIN, "txn": txn, "subwindow": None, "version": None,
               "window_len": window_len, "t": t}
        yield from _expand((seq + 1, stream, txn, t, versions, n))
        yield {"seq": seq + 1 + len(versions), "stream": stream, "op": Op.COMMIT, "txn": txn, "subwindow": None,
               "version": None, "window_len": None, "t": t}
        return
    if not _is_reads(item):
        if isinstance(item, tuple):
            ev = dict(zip(KEYS, item))
            ev["op"] = Op(ev["op"])
            yield ev
        else:
            yield item
        return
    seq, stream, txn, t, versions, n = item
    for i, version in enumerate(versions):
        yield {"seq": seq + i, "stream": stream, "op": Op.READ, "txn": txn, "subwindow": version % n,
               "version": version, "window_len": None, "t": t}


def read_jsonl(lines: Iterable[str]) -> Iterator[dict]:
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            ev = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"line {n}: not JSON ({e.msg})") from None
        if not isinstance(ev, dict) or ev.get("op") not in OPS:
            raise ValueError(f"line {n}: not a history event (needs op in {OPS})")
        yield ev
