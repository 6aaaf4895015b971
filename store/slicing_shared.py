"""Scotty's shared execution of many window sequences (issue 31; seed 003 Definition 10 with
temporal bounds, section 6.1.1): periodic queries of one inner query over one event-time stream
whose windows cut sub-windows (slicing.SlicedHop), answered together in one read of the
sub-windows. It owns the slices cut at all its members' edges (kept with each sealed sub-window,
slicing.kept_for), the run readers over the slices its answers read (kept across answers) and
its answers' columns; which windows are due is its caller's (txn/sharing/, the benchmark), and
each window's answer is what its member plan alone answers.

Per sealed sub-window it cuts slices once at the union of its members' window edges inside it
(Scotty's general stream slicing: a slice ends wherever any window starts or ends) and keeps
their partials and, per aggregate, their `combine_columns` (functions.py). Its answers join
those over the sub-windows read (_Joined: the new sub-windows' slices appended, the oldest
dropped) into per aggregate one `combine_runs` reader (prefix sums for COUNT and exact SUM/AVG, a
sparse table of block extremes for MIN/MAX: the aggregate's own combine in range form), extended
slide after slide rather than rebuilt; each due window is then two binary searches and one lookup
per aggregate, lowered by the aggregate's finish_unique for all windows at once, and its Answer
made only when read (WindowAnswers), as the member's plan finishes one window's values, the
windows of one answer form at once and by column (Plan.inner_columns, Plan.window_answers).
Equal aggregates (a hidden row count beside COUNT(*)) are read and combined once. Inner queries
whose contributions do not combine that way (GROUP BY, holistic aggregates, float sums) merge each
window's slices through the inner finish, as one window alone does: still one read of each slice
for all members."""
from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import numpy as np

from .aggregates import Partial
from .exact import INT64_MAX
from .functions import CombinesRuns
from .kernels import distinct_sorted
from .planner.merge import combines
from .slicing import SCANS_BEFORE_STORE, Shape, SlicedHop, kept_for

if TYPE_CHECKING:
    from .planner.plan import Answer, Plan
    from .subwindow import SubWindow

# Fewer due windows than this merge their slices one window at a time (as a window alone does)
# where the slices' partials are at hand: building the run readers over every slice read costs
# more than a few windows' merges.
FEW = 4
_SAFE = INT64_MAX // 4  # cuts are computed in int64 arrays while every bound and length is below this


class _Tag:
    """The key of a shared execution's cut reads among a sub-window's kept entries, its hash made
    once: hashing a thousand shapes at every read costs more than the read."""

    __slots__ = ("key", "hash")

    def __init__(self, key: tuple):
        self.key, self.hash = key, hash(key)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return self is other or isinstance(other, _Tag) and self.hash == other.hash and self.key == other.key


class _Joined:
    """The slices read by a shared execution's successive answers, joined: their starts, with the
    aggregates' combine_runs readers over their combine_columns, all kept across answers. An answer
    reading newer sub-windows appends their slices and drops the oldest sub-windows beyond the most
    any answer read (an execution reads its due members' youngest n_q, which varies); the starts
    live in a buffer with room to grow (compacted when full), and the readers are extended with
    the new reads' columns (functions.Runs.extend) and read at an offset, so neither the starts
    nor the prefix sums and block tables are made again per slide. The columns themselves are
    not copied into buffers: the readers are made again from the reads' own columns (kept with
    each read) when the starts are compacted, a reader cannot extend (an int64 prefix that could
    wrap, another dtype), or an answer reads sub-windows that do not continue the joined ones."""

    def __init__(self):
        self.reads: list = []   # the reads joined, consecutive, in time order
        self.sizes: list[int] = []  # slices per read
        self.lo = self.hi = 0   # the joined reads' slices: buffer positions [lo, hi)
        self.starts = np.empty(0, dtype=np.int64)  # the slices' starts, flat (positions [lo, hi))
        self.shape: tuple = ()  # columns per aggregate
        self.longest = 0        # the most sub-windows an answer read
        self.made: list | None = None  # the aggregates' readers over buffer positions [origin, made_hi)
        self.origin = self.made_hi = 0

    def runs(self, reads: list, aggs: list) -> tuple[np.ndarray, list, int]:
        """The starts of `reads`' slices (consecutive, time order, not empty), per aggregate its
        combine_runs over their columns, and the readers' position of the first of those slices."""
        self.longest = max(self.longest, len(reads))
        first = self._place(reads)
        if first is None:
            self._reset(reads)
            first = 0
        new = reads[len(self.reads) - first:]
        self._append(new)
        if self.made is not None and self.made_hi < self.hi:  # the new reads' slices appended to every reader
            tail = self._columns_of(new)
            if all(run.extend(tuple(tail[at:at + width])) for run, at, width in self._columns(self.made)):
                self.made_hi = self.hi
            else:
                self.made = None
        drop = min(first, max(0, len(self.reads) - self.longest))  # (never what this answer reads)
        self.lo += sum(self.sizes[:drop])
        self.reads, self.sizes, first = self.reads[drop:], self.sizes[drop:], first - drop
        if self.made is None:  # (over the reads' own columns, joined: copies, never the reads' arrays)
            joined = [np.concatenate(column) for column in zip(*(self._flat(c) for c in self.reads))]
            self.made = [cast(CombinesRuns, a.fn).combine_runs(a, tuple(joined[at:at + width]))
                         for a, at, width in self._columns(aggs)]
            self.origin, self.made_hi = self.lo, self.hi
        self._check()
        start = self.lo + sum(self.sizes[:first])
        end = start + sum(self.sizes[first:first + len(reads)])
        return self.starts[start:end], self.made, start - self.origin

    def _place(self, reads: list) -> int | None:
        """Where `reads` start among the joined reads, if they are a run of them (possibly going on
        past the newest): else None."""
        ids = [id(r) for r in self.reads]  # (by identity: a read compared by value would compare its arrays)
        first = ids.index(id(reads[0])) if id(reads[0]) in ids else None
        if first is None or ids[first:first + len(reads)] != [id(r) for r in reads[:len(ids) - first]]:
            return None
        return first

    def _columns(self, items: list) -> list[tuple]:
        """Per aggregate (or its reader) in `items`: it, where its columns start among a read's
        flat columns (_flat, after its starts) and how many it has."""
        out, at = [], 0
        for x, width in zip(items, self.shape):
            out.append((x, at, width))
            at += width
        return out

    def _columns_of(self, reads: list) -> list[np.ndarray]:
        """The reads' columns of every aggregate, flat, each over all of them in time order (one
        read: its own arrays, which the readers' extend copies from, never keeps)."""
        if len(reads) == 1:
            return self._flat(reads[0])
        return [np.concatenate(column) for column in zip(*(self._flat(c) for c in reads))]

    def _append(self, new: list) -> None:
        """Join `new` reads (continuing the joined ones) after the newest."""
        if not new:
            return
        if any(c[3].dtype != self.starts.dtype for c in new):
            new = self.reads + new  # (starts of another dtype: every read joined again, in a common one)
            self._reset(new)
        n = sum(len(c[3]) for c in new)
        if self.hi + n > len(self.starts):  # compact, with room for twice what is kept and new
            grown = np.empty(max(1024, 2 * (self.hi - self.lo + n)), dtype=self.starts.dtype)
            grown[:self.hi - self.lo] = self.starts[self.lo:self.hi]
            self.starts, self.hi, self.lo = grown, self.hi - self.lo, 0
            self.made = None  # (the readers' positions moved)
        np.concatenate([c[3] for c in new], out=self.starts[self.hi:self.hi + n])
        self.hi += n
        self.reads += new
        self.sizes += [len(c[3]) for c in new]

    def _reset(self, reads: list) -> None:
        """Nothing joined; a starts buffer of the reads' starts' common dtype."""
        self.shape = tuple(len(c) for c in reads[0][5])
        self.starts = np.empty(0, dtype=np.result_type(*(c[3] for c in reads)))
        self.reads, self.sizes, self.lo, self.hi = [], [], 0, 0
        self.made = None

    @staticmethod
    def _flat(read: tuple) -> list[np.ndarray]:
        """A read's columns of every aggregate (combine_columns), flat."""
        return [c for columns in read[5] for c in columns]

    def _check(self) -> None:
        assert 0 <= self.lo <= self.hi <= len(self.starts), "the reads' slices in the buffer"
        assert sum(self.sizes) == self.hi - self.lo and len(self.sizes) == len(self.reads), "each read's slices once"
        assert all(len(c[5]) == len(self.shape) for c in self.reads[:1]), "every aggregate's columns"
        assert self.made is None or self.origin <= self.lo <= self.hi == self.made_hi, "the readers cover the reads"
        assert [c[1] for c in self.reads[1:]] == [c[2] for c in self.reads[:-1]], "consecutive sub-windows"


class SharedSlices:
    """The joint execution of `plans` (periodic sliced plans of one stream, inner query and access
    path: equal `Plan.slices.key`): `read` a sub-window (its slices at every member's cuts), then
    `answer` the due windows from the sub-windows read."""

    def __init__(self, plans: list["Plan"]):
        assert plans, "a shared execution of at least one plan"
        lead = plans[0]
        assert lead.slices is not None, "plans of windows that cut sub-windows"
        key = lead.slices.key
        for p in plans:
            assert p.slices is not None and p.slices.key == key and p.stream is lead.stream, \
                "one inner query, access path and stream"
        self.plans = plans
        self.stream = lead.stream
        self.hops: list[SlicedHop] = [p.bound.hop for p in plans]  # type: ignore[misc]  # sliced plans
        self.n_q = max(p.n_q for p in plans)
        self.shapes: tuple[Shape, ...] = tuple(sorted({h.shape for h in self.hops},
                                                      key=lambda s: (s.range_ms, s.slide_ms)))
        self._ranges = np.array([s.range_ms for s in self.shapes], dtype=np.int64)
        self._slides = np.array([s.slide_ms for s in self.shapes], dtype=np.int64)
        self._safe = all(s.range_ms < _SAFE and s.slide_ms < _SAFE for s in self.shapes)
        self._member_ranges = np.array([h.shape.range_ms for h in self.hops], dtype=np.int64 if self._safe else object)
        self._member_slides = np.array([h.shape.slide_ms for h in self.hops], dtype=np.int64 if self._safe else object)
        # every shape's two edge sequences (starts k s, ends k s + r) as one: period s, offset 0 or r
        self._periods = np.concatenate((self._slides, self._slides))
        self._shortest = int(self._slides.min())  # the shortest SLIDE: a sub-window no longer has at most one edge of each
        self._offsets = np.concatenate((np.zeros(len(self.shapes), dtype=np.int64), self._ranges))
        # the members' answer forms (Plan.window_form): the Answers of one form are made at once
        forms: dict[tuple, int] = {}
        self._form_of = np.array([forms.setdefault(p.window_form, len(forms)) for p in plans], dtype=np.intp)
        self._form_plans = [plans[m] for m in np.unique(self._form_of, return_index=True)[1].tolist()]
        self._reader = lead.slices
        self._tag = _Tag(("shared", key, self.shapes))
        inner = self.hops[0].inner
        self._inner = inner
        # equal aggregates (a hidden COUNT(*) beside COUNT(*)) read, joined and combined once: per
        # aggregate the place of the first equal one among the distinct ones
        distinct: dict[tuple, int] = {}
        self._at = [distinct.setdefault((a.fn, a.column, a.input_type, a.q, a.sketch), len(distinct)) for a in inner.aggs]
        self._first = [self._at.index(d) for d in range(len(distinct))]  # per distinct aggregate, its first place
        self._distinct = [inner.aggs[x] for x in self._first]
        self._by_runs = combines(inner) and inner.group_by is None
        self.strings = self.stream.strings
        self._joined = _Joined()
        self._answering = threading.Lock()  # answers on worker threads, one at a time through _joined
        # the reads of the sub-windows its executions read lately, by the sub-window's id (checked
        # against the read's weak reference): the sub-windows already read answer from here, not
        # each from its kept entries (a weak dictionary's lookup, then the tag's)
        self._recent: dict[int, tuple] = {}

    # -- reading: one sub-window at a time ----------------------------------------------------
    def cuts(self, lo: int, hi: int) -> list[int]:
        """Every member's window edges strictly inside (lo, hi), ascending, once each: vectorised
        over the distinct shapes in int64 where no bound is near its limits, else in Python ints."""
        if not (self._safe and -_SAFE < lo < hi < _SAFE):
            return sorted(set().union(*(s.cuts(lo, hi) for s in self.shapes)))
        return self._cut_array(lo, hi).tolist()

    def _cut_array(self, lo: int, hi: int) -> np.ndarray:
        """cuts' in int64 (every bound and length below _SAFE): per edge sequence its first edge
        above lo, and where a sequence has more than one below hi (a SLIDE shorter than hi - lo)
        the others after it."""
        s, o = self._periods, self._offsets
        first = ((lo - o) // s + 1) * s + o
        if hi - lo <= self._shortest:  # (every SLIDE at least hi - lo: at most one edge each, the first)
            return distinct_sorted(first[first < hi])
        n = (hi - 1 - first) // s + 1  # how many lie below hi (negative: none)
        if n.max(initial=0) <= 1:  # (every SLIDE at least hi - lo: at most one edge each)
            return distinct_sorted(first[n > 0])
        n = np.maximum(n, 0)
        reps = np.repeat(np.arange(len(n)), n)
        within = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
        return distinct_sorted(first[reps] + within * s[reps])

    def read(self, sub: "SubWindow") -> tuple:
        """The sub-window's slices at all members' cuts, kept with it: (version, start, end, slice
        starts, slice partials or None, per distinct aggregate its combine_columns or None, the sub-window
        weakly). A cut sub-window of an inner query with a RunStore is read in one vectorised pass
        (its slices' partials straight as columns); others slice by slice (slicing.slices_of)."""
        got = self._recent.get(id(sub))
        if got is not None and got[6]() is sub:  # (a sealed sub-window's read: the same until it goes)
            return got
        kept = kept_for(sub)
        got = kept.get(self._tag)
        if got is None:
            lo, hi = sub.start_ms, sub.end_ms
            safe = self._safe and -_SAFE < lo < hi < _SAFE
            cuts: np.ndarray | list[int] = self._cut_array(lo, hi) if safe else self.cuts(lo, hi)
            # (few cuts: a scan of each part costs less than making the sub-window's RunStore, as in slices_of)
            columns = self._reader.columns(sub, cuts) if len(cuts) >= SCANS_BEFORE_STORE and self._by_runs else None
            if columns is None:  # (slices_of keys its partials by Python ints)
                parts = [p for _, _, p in self._reader.read(sub, cuts.tolist() if isinstance(cuts, np.ndarray) else cuts)]
            else:
                parts = None
            if parts is not None and self._by_runs:
                columns = [a.fn.combine_columns(a, [p[i] for p in parts]) for i, a in enumerate(self._inner.aggs)]
                columns = None if any(c is None for c in columns) else columns
            if columns is not None:  # (the distinct aggregates' only)
                columns = [columns[x] for x in self._first]
            if safe:
                starts = np.empty(len(cuts) + 1, dtype=np.int64)
                starts[0], starts[1:] = lo, cuts
            else:
                starts = np.array([lo, *cuts], dtype=np.int64 if self._safe else object)
            got = kept[self._tag] = (sub.slide, lo, hi, starts, parts, columns, weakref.ref(sub))
        recent = self._recent
        if len(recent) >= 4 * self.n_q:  # (the newest 2 n_q kept: an execution reads at most n_q)
            recent = self._recent = dict(sorted(recent.items(), key=lambda e: e[1][1])[-2 * self.n_q:])
        recent[id(sub)] = got
        return got

    def _check(self) -> None:
        assert len(self._recent) <= 4 * self.n_q, "the recent reads of a few sub-windows only"
        assert all(r[6]() is None or id(r[6]()) == x for x, r in self._recent.items()), "each read under its sub-window's id"

    def _parts(self, read: tuple) -> list:
        """A read's slice partials (made now where its slices were read as columns only)."""
        if read[4] is not None:
            return read[4]
        sub = read[6]()
        assert sub is not None, "a sub-window read by the execution answering from it"
        return [p for _, _, p in self._reader.read(sub, self.cuts(read[1], read[2]))]

    # -- answering ---------------------------------------------------------------------------------
    def newest(self, reads: list) -> list[int | None]:
        """Per member, the newest of its windows lying entirely within the sub-windows read (its
        index k, Definition 9's delaying function at the end read), or None before one does: what
        it answers now (a periodic sliced query answers the newest window, slicing.SlicedHop)."""
        ks, has = self.newest_windows(reads)
        return [k if ok else None for k, ok in zip(ks.tolist(), has.tolist())]

    def newest_windows(self, reads: list) -> tuple[np.ndarray, np.ndarray]:
        """newest's as arrays over the members: each one's k (int64; Python ints in an object
        array near the int64 limits; 0 where it has none) and whether it has one, so that a caller
        picks the due members without a Python loop over all of them. Vectorised over the members
        where no bound is near the int64 limits."""
        count = len(self.plans)
        if not reads:
            return np.zeros(count, dtype=np.int64), np.zeros(count, dtype=bool)
        lo, hi = min(c[1] for c in reads), max(c[2] for c in reads)
        if not (self._safe and -_SAFE < lo < hi < _SAFE):
            ks = np.zeros(count, dtype=object)
            has = np.zeros(count, dtype=bool)
            for m, h in enumerate(self.hops):
                got = h.shape.indexes(lo, hi)
                if len(got):
                    ks[m], has[m] = got[-1], True
            return ks, has
        r, s = self._member_ranges, self._member_slides
        k = (hi - r) // s
        return k, k * s >= lo

    def answer(self, reads: list, due: list[tuple[int, int | None]]) -> "WindowAnswers":
        """Per (member, window k) of `due`, the member's answer over its window k (its plan's
        finish, as the plan alone answers that window; k None: its answer before any window),
        from the sub-windows `reads` (consecutive, any order) in one pass over their slices. The
        answers are columns over all the due windows, each made into its member's Answer when read
        (WindowAnswers)."""
        if len(reads) > 1 and reads[0][1] > reads[-1][1]:  # (youngest first, as a window lists them)
            reads = reads[::-1]
        if [c[1] for c in reads[1:]] != [c[2] for c in reads[:-1]]:  # (each one's start its predecessor's end: in order)
            reads = sorted(reads, key=lambda c: c[1])
            assert [c[1] for c in reads[1:]] == [c[2] for c in reads[:-1]], "the sub-windows read are consecutive"
        dtype = np.int64 if self._safe else object
        at, kt = zip(*due) if due else ((), ())
        if None in kt:  # (some members before any window: their answers made now, the others' places kept)
            xs: list[int] | None = [x for x, k in enumerate(kt) if k is not None]
            at, kt = tuple(at[x] for x in xs), tuple(kt[x] for x in xs)  # type: ignore[union-attr]  # (a list)
        else:
            xs = None  # (every answer a window's, in order)
        members = np.array(at, dtype=np.intp)
        ks = np.array(kt, dtype=dtype)
        los = ks * self._member_slides[members] if len(members) else ks
        his = los + self._member_ranges[members] if len(members) else ks
        values, inner = None, None
        if not reads or any(c[5] is None for c in reads) or (len(members) < FEW and all(c[4] is not None for c in reads)):
            parts = [p for c in reads for p in self._parts(c)]  # (few windows: each merges its slices, as alone)
            starts = np.concatenate([c[3] for c in reads]) if reads else np.empty(0, dtype=dtype)
            i, j = self._runs_of(reads, starts, los, his)
            inner = []
            for w, m in enumerate(members.tolist()):
                part = Partial()
                for y in range(int(i[w]), int(j[w])):
                    part.add(y, parts[y])
                inner.append(self.plans[m].finish_inner(part))
        else:  # each aggregate's combine of every window's run of slices, lowered at once
            with self._answering:  # (the joined slices and readers change with each answer's reads)
                starts, runs, off = self._joined.runs(reads, self._distinct)
                i, j = self._runs_of(reads, starts, los, his)
                keys = np.arange(len(members))
                i, j = i + off, j + off
                lowered = [a.fn.finish_unique(a, run(i, j), keys, self.strings).tolist()
                           for a, run in zip(self._distinct, runs)]
                values = [lowered[d] for d in self._at]
        made = {} if xs is None else {x: self.plans[m].finish_windows([]) for x, (m, k) in enumerate(due) if k is None}
        return WindowAnswers(self.plans, len(due), made, xs, members.tolist(), los.tolist(), his.tolist(), values, inner,
                             self._form_of[members], self._form_plans)

    @staticmethod
    def _runs_of(reads: list, starts: np.ndarray, los: np.ndarray, his: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every window [los, his)'s slices among those read: [i, j) of `starts`, by two searches of
        all bounds (object arrays of Python ints near the int64 limits)."""
        i = np.searchsorted(starts, los)
        j = np.searchsorted(starts, his)  # (a window ending where the reads end: past every slice's start)
        inside = j < len(starts)
        assert (i < j).all() and (starts[i] == los).all() and (starts[np.minimum(j, len(starts) - 1)] == his)[inside].all() \
            and (his[~inside] == (reads[-1][2] if reads else None)).all(), "windows within the sub-windows read, on slice edges"
        return i, j


class WindowAnswers(Sequence):
    """A shared execution's answers, one per due (member, window) in the order asked, kept as
    columns over all the due windows (their members, bounds, and per aggregate the values of every
    window) and made into Answers only when read: one when indexed, all of them at once when
    iterated (delivery), by answer form (Plan.window_form: the forms of the members found once per
    shared execution). Every window's values cost a few array operations for all windows, while
    an Answer costs some tenths of a microsecond of Python each (docs/windows.md, Benchmark).
    Read-only; an answer is made once."""

    def __init__(self, plans: list["Plan"], n: int, made: dict[int, "Answer"], xs: list[int] | None, members: list[int],
                 los: list[int], his: list[int], values: list[list] | None, inner: list | None,
                 forms: np.ndarray, form_plans: list["Plan"]):
        self._plans, self._n = plans, n
        self._made: list = [None] * n  # (None: not made yet)
        for x, got in made.items():
            self._made[x] = got
        self._pending = n - len(made)
        self._xs = xs  # the due windows' places among the answers (None: every answer's, in order)
        self._window_of: dict[int, int] | None = None  # (an answer's place -> its due window, made when indexed)
        self.members, self.los, self.his = members, los, his
        self.values = values  # per aggregate, one value per due window (None: `inner` answers)
        self._inner = inner
        self._forms, self._form_plans = forms, form_plans  # per due window its form, and a plan of each form
        self._columns: tuple | None = None  # every window's inner answer by column (values'), made at the first read
        self._check()

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, x):
        if isinstance(x, slice):
            return [self[y] for y in range(*x.indices(self._n))]
        if not -self._n <= x < self._n:
            raise IndexError(x)
        x %= self._n
        got = self._made[x]
        if got is None:
            if self._window_of is None:
                self._window_of = {p: w for w, p in enumerate(range(self._n) if self._xs is None else self._xs)}
            got = self._made[x] = self._make([self._window_of[x]])[0]
            self._pending -= 1
        return got

    def __iter__(self):
        """Every answer, those not read yet made at once (by answer form)."""
        if self._pending:
            if self._xs is None and self._pending == self._n:  # (none read yet: all of them, in order)
                self._made = self._make(None)
            else:
                xs = range(self._n) if self._xs is None else self._xs
                todo = [w for w, x in enumerate(xs) if self._made[x] is None]
                for w, got in zip(todo, self._make(todo)):
                    self._made[xs[w]] = got
            self._pending = 0
        return iter(self._made)

    def _make(self, ws: list[int] | None) -> list:
        """The Answers of due windows `ws` (None: all of them, in order): from their inner answers,
        or from the columns (every window's inner answer at once: one inner query for all members;
        then the windows of each answer form at once)."""
        plans, members, los, his = self._plans, self.members, self.los, self.his
        if self._inner is not None:
            return [plans[members[w]].finish_windows([(los[w], his[w], self._inner[w])])
                    for w in (range(len(members)) if ws is None else ws)]
        if self._columns is None:
            assert self.values is not None
            self._columns = self._form_plans[0].inner_columns(self.values) if members else ([], None)
        columns, keep = self._columns
        forms = self._forms if ws is None else self._forms[ws]
        if not len(forms):
            return []
        groups: list[tuple[int, list[int] | None]]
        if forms.min() == forms.max():  # (one form: the common case)
            groups = [(int(forms[0]), None)]
        else:
            groups = [(f, np.flatnonzero(forms == f).tolist()) for f in np.unique(forms).tolist()]
        out: list = [None] * len(forms)
        base = range(len(forms)) if ws is None else ws
        for f, ats in groups:
            picked = ws if ats is None else [base[at] for at in ats]  # (the form's due windows)
            if picked is None:
                got = self._form_plans[f].window_answers(los, his, columns, keep)
            else:
                got = self._form_plans[f].window_answers([los[w] for w in picked], [his[w] for w in picked],
                                                         [[c[w] for w in picked] for c in columns],
                                                         None if keep is None else [keep[w] for w in picked])
            if ats is None:
                return got
            for at, a in zip(ats, got):
                out[at] = a
        return out

    def _check(self) -> None:
        assert len(self._made) == self._n and self._pending == len(self.members), "each answer once"
        assert self._xs is None and len(self.members) == self._n or \
            self._xs is not None and all(self._made[x] is None for x in self._xs), "a due window's answer made when read"
        assert len(self.members) == len(self.los) == len(self.his) == len(self._forms)
        assert (self.values is None) != (self._inner is None), "values or inner answers"
        assert all(len(v) == len(self.members) for v in self.values or ()), "one value per window and aggregate"


def run_shared(shared: SharedSlices, due: list[tuple[int, int | None]] | None = None) -> "WindowAnswers":
    """Execute a shared execution against the current window in one go (no concurrency: tests,
    benchmarks): the youngest n_q sub-windows read, then the `due` windows answered (None: every
    member's newest window)."""
    reads = [shared.read(sub) for sub in shared.stream.window.youngest(shared.n_q)]
    if due is None:
        due = list(enumerate(shared.newest(reads)))
    return shared.answer(reads, due)
