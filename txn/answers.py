"""The answer log: each periodic query's newest answers, kept as state.

A reader that follows a periodic query by its slide numbers (ReadAnswers; Spark's streaming reader
keeps the newest slide it delivered in its checkpoint) resumes after a restart of its own without
gaps or repeats as long as the server still holds the answers it has not read. For that to hold
across a restart of the server too, the answers are part of the durable state: the engine logs each
one as an `Answered` command (commands.py) and replay puts it back; snapshots carry the logs. A
query's log is bounded by count (`keep` answers) and by size (`keep_bytes`, estimated from the
rows), oldest dropped first, the newest always kept; it goes with the query. Sizes depend only on
the answers, so replay drops the same ones.

Answers are plain data here (`to_plain` / `from_plain`): JSON values, with a decimal as its text.
"""
from __future__ import annotations

import base64
import collections
import operator
from decimal import Decimal

from windowstore.store import Answer
from windowstore.store.approx import ErrorBound

from .joins import StreamWindow
from .scheduler import Result

_META = ("slide", "window_start_ms", "window_end_ms", "staleness_ms", "response_ms", "restarts", "policy", "txn",
         "answered_ms", "execution", "late_slides", "inter_exec_ms")


def answer_size(result: Result) -> int:
    """An answer's estimated size in memory (bytes): what the log's byte bound counts."""
    rows = result.answer.rows
    sketches = sum(len(s[2]) for _, s in result.answer.sketches or () if isinstance(s, tuple))  # (serialized)
    return 256 + sketches + sum(16 * len(r) + sum(len(v) for v in r if isinstance(v, str)) for r in rows)


class AnswerLog:
    def __init__(self, keep: int, keep_bytes: int = 64 << 20):
        self.keep, self.keep_bytes = keep, keep_bytes
        # per query its answers, oldest first, and beside them their sizes (plain ints: no tuple
        # per answer for the collector to walk, thousands of answers per slide when shared)
        self._logs: dict[str, collections.deque] = {}
        self._sizes: dict[str, collections.deque] = {}
        self._bytes: dict[str, int] = {}
        self._last: tuple = (None, 0)  # the last answer sized: a shared execution's members add the same one in turn

    def add(self, query_id: str, result: Result) -> None:
        self.add_many([(query_id, result)])

    def add_many(self, pairs: list[tuple[str, Result]]) -> None:
        """add() for each (query_id, result) in turn: a shared execution's members at once."""
        logs, sizes_of, totals = self._logs, self._sizes, self._bytes
        keep, keep_bytes = self.keep, self.keep_bytes
        last, size = self._last
        for query_id, result in pairs:
            log = logs.get(query_id)
            if log is None:
                log = logs[query_id] = collections.deque()
                sizes_of[query_id] = collections.deque()
            sizes = sizes_of[query_id]
            if last is not result.answer:
                last, size = result.answer, answer_size(result)
            log.append(result)
            sizes.append(size)
            total = totals.get(query_id, 0) + size
            while len(log) > 1 and (len(log) > keep or total > keep_bytes):
                log.popleft()
                total -= sizes.popleft()
            totals[query_id] = total
        self._last = (last, size)

    def drop(self, query_id: str) -> None:
        self._logs.pop(query_id, None)
        self._sizes.pop(query_id, None)
        self._bytes.pop(query_id, None)

    def read(self, query_id: str, after_slide: int, through_slide: int | None, limit: int):
        """(answers reflecting a slide in (after, through], oldest first, at most `limit`; the
        newest kept answer's slide; the oldest kept answer's slide), -1 for none."""
        log = self._logs.get(query_id, ())
        out = [r for r in log if r.slide > after_slide and (through_slide is None or r.slide <= through_slide)]
        return out[:limit], (log[-1].slide if log else -1), (log[0].slide if log else -1)

    def newest(self, query_id: str) -> Result:
        return self._logs[query_id][-1]

    def queries(self) -> list[str]:
        return list(self._logs)

    def capture(self) -> dict[str, list[Result]]:
        """The logs as lists of (immutable) results: cheap; a snapshot writer makes them plain."""
        return {qid: list(log) for qid, log in self._logs.items()}

    def restore(self, image: dict[str, list]) -> None:
        for qid, results in image.items():
            for r in results:
                self.add(qid, r if isinstance(r, Result) else from_plain(r))

    def check(self, periodic) -> None:
        assert set(self._logs) <= set(periodic), "an answer log per live periodic query only"
        assert set(self._sizes) == set(self._logs) == set(self._bytes), "sizes and a total per log"
        for qid, log in self._logs.items():
            results = list(log)
            assert all(a.slide < b.slide for a, b in zip(results, results[1:])), "one answer per slide, in slide order"
            assert len(self._sizes[qid]) == len(log), "a size per answer"
            assert self._bytes[qid] == sum(self._sizes[qid]), "its size is accounted"
            assert len(log) <= self.keep and (len(log) == 1 or self._bytes[qid] <= self.keep_bytes), "a log is bounded"

    def digest_parts(self) -> list:
        return [(qid, [to_plain(r) for r in self._logs[qid]]) for qid in sorted(self._logs)]


def to_plain(r: Result) -> dict:
    """A result as plain data (an Answered record's `answer`): its answer's, then its own fields."""
    out = plain_answer(r.answer)
    out.update(plain_meta(r))
    return out


def plain_answer(a: Answer) -> dict:
    """The answer's part of to_plain: what the members of one shared output have in common."""
    decimal = [i for i, t in enumerate(a.types or ()) if t.startswith("decimal(")]
    rows = [list(row) for row in a.rows]
    for row in rows:
        for i in decimal:
            if row[i] is not None:
                row[i] = str(row[i])
    out = {"columns": list(a.columns), "rows": rows, "access": a.access, "exact": a.exact,
           "guaranteed": a.guaranteed, "types": None if a.types is None else list(a.types)}
    if a.bounds:  # sketch aggregates (store/approx.py); absent otherwise, so other logs are unchanged
        out["bounds"] = [[row, column, vars(b)] for row, column, b in a.bounds]
    if a.sketches and isinstance(a.sketches[0][1], tuple):  # a periodic query's, registered with return_sketches
        out["sketches"] = [[c, kind, size, base64.b64encode(data).decode(), dropped]
                           for c, (kind, size, data, dropped) in a.sketches]
    return out


def plain_meta(r: Result) -> dict:
    """The result's own fields of to_plain (its slide, window, timings, provenance)."""
    out = {k: getattr(r, k) for k in _META}
    if r.early_slides or r.group:  # a shared execution's provenance (txn/sharing/)
        out["early_slides"], out["group"] = r.early_slides, r.group
    if r.fallback:  # held its windows after aborts (Outcomes._fall_back); absent: false
        out["fallback"] = True
    if r.sources is not None:
        out["sources"] = [[s.stream, s.slide, s.window_start_ms, s.window_end_ms] for s in r.sources]
    return out


# A columnar AnsweredMany record's per-member columns (commands.AnsweredMany): the query, the index
# of its answer, then the fields a shared execution's members do not share (their own window,
# execution number and timing); the others are the record's `common` fields.
MEMBER_COLUMNS = ("query_id", "answer", "window_start_ms", "window_end_ms", "execution", "late_slides",
                  "early_slides", "inter_exec_ms")


def many_to_plain(results: list[tuple[str, Result]]) -> tuple[list, "list | dict", "dict | None"]:
    """(answers, members, common) of an AnsweredMany record for (query_id, result) pairs: each
    distinct answer (by identity: a shared output's members hold the same one) made plain once.
    Results of one execution (the same slide and transaction, no join provenance) are written
    columnar: their shared fields once (`common`), per member only its own (MEMBER_COLUMNS);
    otherwise per member [query_id, index, plain_meta] (common None), the record's first form."""
    index: dict[int, int] = {}
    answers: list = []
    first = results[0][1]
    own = operator.attrgetter(*MEMBER_COLUMNS[2:])
    rows: list = []  # per member (index of its answer, *its own fields), made once per distinct Result
    row_of: dict[int, tuple] = {}  # by the Result's id (members answered alike share a Result; all alive in `results`)
    columnar = True
    for _, r in results:
        row = row_of.get(id(r))
        if row is None:
            i = index.get(id(r.answer))
            if i is None:
                i = index[id(r.answer)] = len(answers)
                answers.append(plain_answer(r.answer))
            columnar = columnar and r.sources is None and r.slide == first.slide and r.txn == first.txn
            row = row_of[id(r)] = (i, *own(r))
        rows.append(row)
    if not columnar:
        return answers, [[qid, row[0], plain_meta(r)] for (qid, r), row in zip(results, rows)], None
    members = dict(zip(MEMBER_COLUMNS, ([qid for qid, _ in results], *map(list, zip(*rows)))))
    common = plain_meta(first)
    for c in MEMBER_COLUMNS[2:]:
        common.pop(c, None)
    common.setdefault("group", first.group)
    return answers, members, common


def many_from_plain(answers: list, members: "list | dict", common: "dict | None" = None) -> list[tuple[str, Result]]:
    """The (query_id, result) pairs of an AnsweredMany record, in order; members of one answer
    share its rows, as they did when delivered."""
    if common is not None:  # columnar (many_to_plain): per member its own fields over the common ones
        cols = [members[c] for c in MEMBER_COLUMNS]  # type: ignore[call-overload]  # columnar: a dict
        members = [[qid, i, {**common, **dict(zip(MEMBER_COLUMNS[2:], own))}] for qid, i, *own in zip(*cols)]
    made: dict[int, Result] = {}
    out = []
    for qid, i, meta in members:
        first = made.get(i)
        if first is None:
            r = made[i] = from_plain({**answers[i], **meta})
        else:
            r = from_plain({**answers[i], "rows": [], **meta})
            r.answer = first.answer
        out.append((qid, r))
    return out


def from_plain(d: dict) -> Result:
    types = d["types"]
    decimal = [i for i, t in enumerate(types or ()) if t.startswith("decimal(")]
    rows = []
    for row in d["rows"]:
        for i in decimal:
            if row[i] is not None:
                row[i] = Decimal(row[i])
        rows.append(tuple(row))
    answer = Answer(list(d["columns"]), rows, d["access"], d["exact"], d["guaranteed"], types)
    if d.get("bounds"):
        answer.bounds = [(row, column, ErrorBound(**b)) for row, column, b in d["bounds"]]
    if d.get("sketches"):
        answer.sketches = [(c, (kind, size, base64.b64decode(data), dropped)) for c, kind, size, data, dropped
                           in d["sketches"]]
    sources = [StreamWindow(*s) for s in d["sources"]] if d.get("sources") is not None else None
    return Result(answer, sources=sources, early_slides=d.get("early_slides", 0), group=d.get("group", ""),
                  fallback=d.get("fallback", False), **{k: d[k] for k in _META})
