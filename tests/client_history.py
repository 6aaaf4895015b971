"""The clients' side of a chaos run as a history in the project's format (txn/history.py), judged by
its isolation checker (txn/checker.py): what each client did and saw, not what a server says.

Owns the operations the harness's clients record (thread-safe); touches no server. Callers:
tests/chaos.py (the writer's slides, the reader's window queries) and tests/test_chaos_history.py.

- A slide is a write `w` of slide `version` (the number its acknowledgement carried) into sub-window
  `version mod subwindows`, placed at the moment it was first sent: the slide took effect between
  that moment and its acknowledgement, so a query answered after the send may reflect it.
- A query is `b` when sent, then one `r` per slide its answer reflects and `c` when answered. The
  slides it reflects are derived from the answer's rows, not from the slide number it reports:
  each row names a batch (its `ts`), and each acknowledged batch was sealed by a known slide. A
  row of a batch no acknowledged slide sealed is a read of no slide the writer made (`UNKNOWN`).

Every query must then be WS or LWS (thesis 7.3.2, Definitions 7.1 and 7.2): the slides it
reflects are exactly a window of `window_len` consecutive slides, ending no later than the newest
slide sent before it was answered. Rows of two window states, of a slide lost and made again with
other rows, or of a batch no acknowledged slide sealed make a query torn; a slide number
acknowledged twice is an error of the history. (A stale window, e.g. a deposed leader's, is WS:
counted apart, since a slide sent but not yet acknowledged may or may not be reflected.)
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

from windowstore.txn.checker import Report, check
from windowstore.txn.history import History, Op

UNKNOWN = -1  # the version a row of no acknowledged slide is read as (no slide writes it)


@dataclass
class _Slide:
    sent: float
    version: int


@dataclass
class _Query:
    txn: str
    sent: float
    answered: float
    batches: list[int]


class ClientHistory:
    def __init__(self, stream: str, subwindows: int, window_len: int):
        self.stream, self.subwindows, self.window_len = stream, subwindows, window_len
        self._lock = threading.Lock()
        self._slides: list[_Slide] = []
        self._queries: list[_Query] = []

    def slide(self, sent: float, version: int) -> None:
        """A slide first sent at `sent` (time.monotonic()) was acknowledged as slide `version`."""
        with self._lock:
            self._slides.append(_Slide(sent, version))

    def query(self, sent: float, answered: float, batches) -> None:
        """A query of the youngest `window_len` sub-windows, sent at `sent`, answered at `answered`
        with rows of these batches (their ts)."""
        with self._lock:
            self._queries.append(_Query(f"q{len(self._queries)}", sent, answered, sorted(set(batches))))

    def events(self, sealed_by: dict[int, int]) -> list[dict]:
        """The history: `sealed_by` maps each acknowledged batch to the slide that sealed it (the
        writer's). A query that reflects a batch past the last one so sealed (its slide was made,
        but the writer stopped before hearing it acknowledged) is left out, not judged, as the
        answers check does."""
        last = max(sealed_by, default=0)
        with self._lock:
            slides, queries = list(self._slides), list(self._queries)
        timeline: list[tuple[float, int, object]] = [(s.sent, 0, s) for s in slides]
        for q in queries:
            versions = {sealed_by.get(b, UNKNOWN) for b in q.batches}
            if max(q.batches, default=0) > last:
                continue
            timeline.append((q.sent, 1, ("b", q)))
            timeline.append((q.answered, 2, ("c", q, versions)))
        timeline.sort(key=lambda item: (item[0], item[1]))
        h = History(keep=None)
        for t, _, item in timeline:
            if isinstance(item, _Slide):
                h.record(self.stream, Op.WRITE, f"slide{item.version}", t, item.version % self.subwindows,
                         item.version)
                h.record(self.stream, Op.COMMIT, f"slide{item.version}", t)
            elif item[0] == "b":
                h.record(self.stream, Op.BEGIN, item[1].txn, t, window_len=self.window_len)
            else:
                q, versions = item[1], item[2]
                for v in sorted(versions):
                    h.record(self.stream, Op.READ, q.txn, t, v % self.subwindows if v >= 0 else None, v)
                h.record(self.stream, Op.COMMIT, q.txn, t)
        return h.events

    def check(self, sealed_by: dict[int, int]) -> Report:
        return check(self.events(sealed_by))

    @property
    def queries(self) -> int:
        with self._lock:
            return len(self._queries)
