"""The answer cache: a one-time query asked again of an unchanged window is answered from its last
answer (issue 33: dashboards poll the same queries many times between two slides).

Between two changes of a stream's committed window (a slide's install, adopted sketches, renumbered
strings, a snapshot put back: `Window.version`, bumped in the one place each happens) the same plan
reads the same sealed sub-windows and so computes the same answer. An entry keeps that answer with
the window version it reflects and the versions of the sub-windows it read; a lookup hits only when
the plan is the same object (the engine's plan for that stream and query) and the window's version
is the entry's. The scheduler answers a hit as a read-only transaction at the latest committed
window, only where it would have started the query then (Scheduler.run_now), and records it as a
probe is recorded (a begin, the window's reads in one operation, a commit), so the isolation
checker judges it like any other query. Per-call fields (the transaction id, answered_ms,
staleness, response time) are the call's, never kept.

Bounded by entries and by an estimate of their bytes, least recently used first out. An answer
carrying sketches (approximate aggregates, return_sketches) is not kept: its size is not known
cheaply. A plan's answer is kept from its second execution on (`admits`): a query asked once, or
whose text differs on every call (a new plan each time), costs a lookup and a remembered sight,
not an entry.

Beside its entries the cache keeps the requests known to ask for them (`note_request`): a key the
shell chose (a request's bytes, which decode to the same query every time) to the entry, so that a
repeated request finds its entry without being parsed or planned (Scheduler.answer_known). A key
goes with its entry (replaced, evicted, its stream dropped) and counts in the cache's bytes; an
entry keeps at most REQUESTS_PER_ENTRY of them.
"""
from __future__ import annotations

import collections
import sys
import weakref
from dataclasses import dataclass, field
from typing import Any, Hashable

from windowstore.store import Answer, Plan

# what one entry costs besides its answer's rows: the entry, its key and the OrderedDict's link
ENTRY_OVERHEAD = 400
# plans remembered as asked once (admits), at most
SEEN = 4096
# requests noted per entry (note_request), at most: the same query asked with other priorities or
# spellings; and what one costs besides its key's bytes (the key object, the dict's and list's slots)
REQUESTS_PER_ENTRY = 4
REQUEST_OVERHEAD = 200


@dataclass(eq=False, slots=True)
class CachedAnswer:
    """One query's answer as of one committed state of its window, and what a hit records."""

    plan: Plan                   # the plan it answers (held: the key is its id)
    version: int                 # Window.version when it was computed
    answer: Answer
    slide: int                   # newest slide reflected
    window_start_ms: int | None
    window_end_ms: int | None
    sealed_at_ms: float | None   # the newest sub-window's seal time (staleness is the call's)
    reads: range                 # the versions read (the history's reads of a hit)
    nbytes: int
    # the shell's encoding of the answer's per-query part (e.g. its serialized message), set by
    # the shell on first use and kept with the entry; the core never reads it
    encoded: Any = field(default=None, repr=False)
    requests: list = field(default_factory=list, repr=False)  # the keys noted for it (note_request)
    request_bytes: int = 0  # what they cost (counted in the cache's bytes beside nbytes)

    @property
    def answers_now(self) -> bool:
        """Whether the entry is the answer now: its window's version unchanged since it was kept."""
        return self.version == self.plan.stream.window.version

    @property
    def size(self) -> int:
        """What the entry costs the cache's bytes bound: its answer and its requests."""
        return self.nbytes + self.request_bytes


# an upper estimate of one row's tuple and of one number's object (an int128 sum's int included)
ROW_BYTES, VALUE_BYTES = 72, 48


def answer_bytes(answer: Answer) -> int:
    """An estimate of an answer's memory: its rows' tuples and values, and its labels. Counted
    from the row and column counts, and the lengths of its strings (every call that misses pays
    it: a constant for a numeric answer)."""
    rows, columns = answer.rows, answer.columns
    n = ENTRY_OVERHEAD + 64 * len(columns) + len(rows) * (ROW_BYTES + VALUE_BYTES * len(columns))
    types = answer.types
    if types is None or len(types) != len(columns):  # (not typed: every value's own size)
        size = sys.getsizeof
        return n + sum(size(v) for row in rows for v in row)
    for i, t in enumerate(types):
        if t == "string":
            n += sum(len(row[i]) for row in rows if row[i] is not None)
    if answer.bounds:
        n += 200 * len(answer.bounds)
    return n


class AnswerCache:
    """Answers of one-time single-stream queries by plan, valid while their window's version is
    theirs. Pure: the scheduler puts and gets; nothing here reads a clock."""

    def __init__(self, max_entries: int, max_bytes: int):
        if max_entries <= 0 or max_bytes <= 0:
            raise ValueError("an answer cache holds at least one entry and one byte (0 turns it off: none)")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: collections.OrderedDict[int, CachedAnswer] = collections.OrderedDict()
        # plans computed once (admits), by id, held weakly: a sight keeps no plan alive, and a new
        # plan given a freed plan's id is not taken for it
        self._seen: collections.OrderedDict[int, weakref.ref] = collections.OrderedDict()
        # request keys (note_request) -> the entry they ask for
        self._requests: dict[Hashable, CachedAnswer] = {}
        self.nbytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, plan: Plan) -> CachedAnswer | None:
        """The entry answering `plan` now (its window unchanged since), or None (a miss)."""
        entry = self._entries.get(id(plan))
        if entry is not None and entry.plan is plan and entry.answers_now:
            self.hit(entry)
            return entry
        self.misses += 1
        return None

    def hit(self, entry: CachedAnswer) -> None:
        """`entry` answers a call: counted, and now the most recently used."""
        self._entries.move_to_end(id(entry.plan))
        self.hits += 1

    def note_request(self, key: Hashable, entry: CachedAnswer, size: int) -> bool:
        """Remember that the request `key` (of `size` bytes) asks for what `entry` answers: while the
        entry is kept, known(key) finds it. False (nothing kept) when the entry is no longer kept,
        the key is known already, the entry has its REQUESTS_PER_ENTRY or the bytes bound would be
        passed."""
        if (self._entries.get(id(entry.plan)) is not entry or key in self._requests
                or len(entry.requests) >= REQUESTS_PER_ENTRY):
            return False
        n = REQUEST_OVERHEAD + size
        if self.nbytes + n > self.max_bytes:
            return False
        entry.requests.append(key)
        entry.request_bytes += n
        self.nbytes += n
        self._requests[key] = entry
        return True

    def known(self, key: Hashable) -> CachedAnswer | None:
        """The entry a noted request asks for (whether it still answers now is the scheduler's to
        say: Scheduler.answer_known)."""
        return self._requests.get(key)

    def _forget(self, entry: CachedAnswer) -> None:
        """An entry that goes takes its requests with it."""
        for key in entry.requests:
            del self._requests[key]

    def admits(self, plan: Plan) -> bool:
        """Whether a computed answer of `plan` is to be kept: only once the plan has been computed
        before (the first time, it is remembered, among the SEEN most recent; an entry evicted
        meanwhile is earned again so)."""
        key = id(plan)
        if key in self._entries:
            return True
        seen = self._seen
        sight = seen.get(key)
        if sight is not None and sight() is plan:
            del seen[key]  # (its entry holds it from now on)
            return True
        seen[key] = weakref.ref(plan)
        if len(seen) > SEEN:
            seen.popitem(last=False)  # the oldest sight (O(1), where a dict's first key is found by a scan)
        return False

    def put(self, entry: CachedAnswer) -> bool:
        """Keep an entry (replacing the plan's older one); False when it alone exceeds the bound."""
        key = id(entry.plan)
        old = self._entries.pop(key, None)
        if old is not None:
            self.nbytes -= old.size
            self._forget(old)
        entry.requests, entry.request_bytes = [], 0  # (an entry put again is asked for anew)
        if entry.nbytes > self.max_bytes:
            return False
        self._entries[key] = entry
        self.nbytes += entry.nbytes
        while len(self._entries) > self.max_entries or self.nbytes > self.max_bytes:
            _, gone = self._entries.popitem(last=False)
            self.nbytes -= gone.size
            self._forget(gone)
            self.evictions += 1
        return True

    def entries(self) -> list[CachedAnswer]:
        """The entries, least recently used first."""
        return list(self._entries.values())

    def drop_stream(self, name: str) -> None:
        """A dropped stream's entries go (they hold its plans, and so its window)."""
        for key in [k for k, e in self._entries.items() if e.plan.stream.name == name]:
            gone = self._entries.pop(key)
            self.nbytes -= gone.size
            self._forget(gone)

    def plans(self) -> list[Plan]:
        """Every plan the cache holds (its entries')."""
        return [e.plan for e in self._entries.values()]

    def known_requests(self) -> int:
        """Requests noted (note_request) of the entries kept."""
        return len(self._requests)

    def sights(self) -> int:
        """Plans remembered as computed once."""
        return len(self._seen)

    def stats(self) -> dict:
        return {"hits": self.hits, "misses": self.misses, "entries": len(self._entries), "bytes": self.nbytes,
                "evictions": self.evictions, "requests": self.known_requests()}

    def _check(self) -> None:
        assert len(self._entries) <= self.max_entries and 0 <= self.nbytes <= self.max_bytes, \
            (len(self._entries), self.nbytes)
        assert self.nbytes == sum(e.size for e in self._entries.values()), "bytes: the entries' sum"
        for key, e in self._entries.items():
            assert key == id(e.plan), "keyed by its plan"
            assert e.version <= e.plan.stream.window.version, "a version its window had"
            assert e.reads.step == 1 and (not e.reads or e.reads[-1] == e.slide), "reads end at the slide reflected"
            assert len(e.requests) <= REQUESTS_PER_ENTRY and all(self._requests[k] is e for k in e.requests), \
                "an entry's requests are known, as asking for it"
            assert e.request_bytes >= REQUEST_OVERHEAD * len(e.requests)
        assert len(self._requests) == sum(len(e.requests) for e in self._entries.values()), \
            "every known request is an entry's"
        assert len(self._seen) <= SEEN, "sights are bounded"
        assert all(s() is None or id(s()) == k for k, s in self._seen.items()), "a sight, by its plan's id"
        assert min(self.hits, self.misses, self.evictions) >= 0
