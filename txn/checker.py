"""Isolation checker: classifies each committed query from a history alone (thesis 7.3.2).

- LWS (Definition 7.2): the versions it read (less those it removed) are exactly the window as
  of its commit: the window_len youngest slides then applied.
- WS only (Definition 7.1): they are exactly the window as of some earlier moment: a contiguous
  run ending at some slide L no later than the one applied at commit (clipped at slide 0 while the
  window was filling).
- torn: anything else.
- as_of: a pinned read (`AS OF SLIDE k`: its begin record has "as_of": k) that read exactly the
  window as of slide k (window_len slides ending at k, k applied before its commit). It asked for
  that past state, so it is judged against slide k, not its commit; it passes both the WS and the
  LWS expectation. One that read anything else is torn.

A join query (its begin records carry "streams") is one verdict over all its streams: LWS when, for
each joined stream, the versions it read (less those removed) are exactly the window_len youngest
slides of that stream as of its commit; WS when they are every joined stream's window as of one
and the same earlier moment (the snapshot covers all streams); torn otherwise.

The checker also verifies the history is self-consistent: each read names the version that the
sub-window held at that moment, slides are numbered 0, 1, 2, ... per stream.

A history may start mid-stream (the bounded in-memory history behind StreamHistory, a file cut at
the front): a stream whose first slide in it is k > 0 continues from k - 1; the reads of a
transaction that began before the history did are not judged (`unjudged`), nor is a query that
commits before its stream's first slide in the history (the window it saw is unknown); a read of a
version older than the history cannot have its sub-window checked.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from .history import Op
from .kinds import Level


@dataclass
class Verdict:
    stream: str
    txn: str
    level: Level
    versions: list[int]
    latest_at_commit: int
    window_len: int
    reflects: int | None       # the L of the window state it read, when ws or lws
    # A join (several streams): `stream` lists them ("a,b"), the fields above describe the first, and
    # parts has, per stream, level, versions, latest_at_commit, window_len and reflects.
    parts: dict[str, dict] | None = None


@dataclass
class Report:
    verdicts: list[Verdict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)   # inconsistencies in the history itself
    aborts: int = 0
    unjudged: int = 0  # a history starting mid-stream: queries it does not show whole

    def count(self, level: Level) -> int:
        return sum(v.level == level for v in self.verdicts)

    def violations(self, expect: Level) -> list[Verdict]:
        ok = {Level.LWS: (Level.LWS, Level.AS_OF), Level.WS: (Level.LWS, Level.WS, Level.AS_OF)}[expect]
        return [v for v in self.verdicts if v.level not in ok]

    def summary(self) -> dict:
        return {"committed": len(self.verdicts), "lws": self.count(Level.LWS), "ws_only": self.count(Level.WS),
                "as_of": self.count(Level.AS_OF), "torn": self.count(Level.TORN), "aborts": self.aborts,
                "errors": len(self.errors), **({"unjudged": self.unjudged} if self.unjudged else {})}


def _window(latest: int, length: int) -> set[int]:
    return set(range(max(0, latest - length + 1), latest + 1))


def classify(versions: set[int], latest: int, window_len: int) -> tuple[Level, int | None]:
    """(LWS, WS or TORN, the slide L of the window state read)."""
    if versions == _window(latest, window_len):
        return Level.LWS, latest
    top = max(versions, default=-1)
    if top <= latest and versions == _window(top, window_len):
        return Level.WS, top
    return Level.TORN, None


def _mid_stream(events: list[dict]) -> set[str]:
    """The streams a history shows from the middle: its first slide of them is not slide 0, or a
    read comes before that transaction's begin (it began before the history did)."""
    first_slide: dict[str, int] = {}
    begun: set[tuple[str, str | None]] = set()
    mid = set()
    stream: Any  # an event's fields: JSON values
    for ev in events:
        stream, op = ev.get("stream"), ev.get("op")
        if op == Op.WRITE and stream not in first_slide:
            first_slide[stream] = ev["version"]
            if ev["version"] != 0:
                mid.add(stream)
        elif op == Op.BEGIN:
            begun.add((stream, ev.get("txn")))
        elif op in (Op.READ, Op.REMOVE) and (stream, ev.get("txn")) not in begun:
            mid.add(stream)
    return mid


def check(events: Iterable[dict]) -> Report:
    report = Report()
    events = list(events)
    mid = _mid_stream(events)
    latest: dict[str, int] = {}
    position_of: dict[tuple[str, int], int] = {}  # (stream, version) -> sub-window it wrote
    applied_at: dict[tuple[str, int], int] = {}   # (stream, version) -> seq of the slide that wrote it
    open_txns: dict[tuple[str, str], dict] = {}
    groups: dict[str, dict] = {}                  # join txn -> its attempt's parts
    headless: set[tuple[str, str]] = set()        # attempts begun before a mid-stream history starts
    stream: Any  # an event's fields: JSON values
    txn: Any
    for ev in events:
        stream, op, txn = ev.get("stream"), ev.get("op"), ev.get("txn")
        key = (stream, txn)
        if op == Op.WRITE:
            v = ev["version"]
            if stream in mid and stream not in latest:
                latest[stream] = v - 1  # the history starts here
            expected = latest.get(stream, -1) + 1
            if v != expected:
                report.errors.append(f"seq {ev['seq']}: stream {stream!r} slide {v} applied, expected {expected}")
            latest[stream] = v
            position_of[(stream, v)] = ev["subwindow"]
            applied_at[(stream, v)] = ev["seq"]
        elif op == Op.BEGIN:
            group = None
            if ev.get("streams"):
                group = tuple(ev["streams"])
                if stream not in group:
                    report.errors.append(f"seq {ev['seq']}: {txn!r} begins on stream {stream!r}, not among its "
                                         f"streams {list(group)}")
                g = groups.get(txn)
                if g is None:
                    g = groups[txn] = {"streams": group, "begun": set(), "committed": {}, "aborted": False}
                elif g["streams"] != group:
                    report.errors.append(f"seq {ev['seq']}: {txn!r} begins with streams {list(group)}, its attempt "
                                         f"began with {list(g['streams'])}")
                g["begun"].add(stream)
            open_txns[key] = {"reads": set(), "window_len": ev["window_len"], "group": group, "as_of": ev.get("as_of")}
        elif op in (Op.READ, Op.REMOVE):
            st = open_txns.get(key)
            v = ev["version"]
            if st is None:
                if stream not in mid:
                    report.errors.append(f"seq {ev['seq']}: {op} by {txn!r} outside a begun attempt")
                headless.add(key)
            elif op == Op.READ:
                # a version written before a mid-stream history starts: its sub-window is unknown
                unknown = stream in mid and (stream, v) not in position_of and v <= latest.get(stream, v)
                if not unknown and position_of.get((stream, v)) != ev["subwindow"]:
                    report.errors.append(f"seq {ev['seq']}: {txn!r} read version {v} from sub-window "
                                         f"{ev['subwindow']}, which that slide did not write")
                if v in st["reads"]:
                    report.errors.append(f"seq {ev['seq']}: {txn!r} read version {v} twice")
                st["reads"].add(v)
            elif v in st["reads"]:
                st["reads"].discard(v)
            else:
                report.errors.append(f"seq {ev['seq']}: {txn!r} removed version {v} it had not read")
        elif op == Op.COMMIT:
            st = open_txns.pop(key, None)
            if st is None:
                if key in headless:
                    headless.discard(key)
                    report.unjudged += 1
                continue  # a slide's commit (or one of an attempt the history does not show whole)
            if st["group"] is None:
                if stream in mid and stream not in latest:
                    report.unjudged += 1  # committed before the history shows a slide: its window is unknown
                    continue
                lat = latest.get(stream, -1)
                if st["as_of"] is not None:  # pinned: judged against slide k
                    k = st["as_of"]
                    ok = k <= lat and st["reads"] == _window(k, st["window_len"])
                    level, reflects = (Level.AS_OF, k) if ok else (Level.TORN, None)
                else:
                    level, reflects = classify(st["reads"], lat, st["window_len"])
                report.verdicts.append(Verdict(stream, txn, level, sorted(st["reads"]), lat, st["window_len"], reflects))
                continue
            g = groups.get(txn)
            if g is None or g["aborted"]:
                report.errors.append(f"seq {ev['seq']}: {txn!r} commits on {stream!r} after its attempt aborted")
                continue
            g["committed"][stream] = st
            if set(g["committed"]) == set(g["streams"]):
                del groups[txn]
                report.verdicts.append(_join_verdict(txn, g, latest, applied_at))
        elif op == Op.ABORT:
            st = open_txns.pop(key, None)
            if st is None:
                continue
            if st["group"] is None:
                report.aborts += 1
                continue
            g = groups.get(txn)
            if g is not None:
                if not g["aborted"]:
                    report.aborts += 1
                    g["aborted"] = True
                if g["committed"]:
                    report.errors.append(f"seq {ev['seq']}: {txn!r} aborts on {stream!r} after committing on "
                                         f"{', '.join(g['committed'])}")
                if not any((n, txn) in open_txns for n in g["streams"]):
                    del groups[txn]
    return report


def _join_verdict(txn: str, g: dict, latest: dict[str, int], applied_at: dict[tuple[str, int], int]) -> Verdict:
    """A join's verdict at its commit (the last of its commit records): LWS when every joined stream's
    reads are exactly that stream's window then; WS when they are every stream's window as of ONE
    earlier moment (the per-stream window states read were all current at once); torn otherwise."""
    parts: dict[str, dict] = {}
    level = Level.LWS
    starts, ends = [], []
    for name in g["streams"]:
        st = g["committed"][name]
        lat = latest.get(name, -1)
        lv, reflects = classify(st["reads"], lat, st["window_len"])
        parts[name] = {"level": lv, "versions": sorted(st["reads"]), "latest_at_commit": lat,
                       "window_len": st["window_len"], "reflects": reflects}
        if lv == Level.TORN:
            level = Level.TORN
        elif lv == Level.WS and level == Level.LWS:
            level = Level.WS
        if reflects is not None:
            # the state `reflects` was current from its slide until the next slide of the stream
            starts.append(applied_at.get((name, reflects), -1) if reflects >= 0 else -1)
            ends.append(applied_at.get((name, reflects + 1), float("inf")) if reflects < lat else float("inf"))
    if level == Level.WS and not max(starts) < min(ends):
        level = Level.TORN  # each stream's window as of some moment, but not one moment for all
    first = parts[g["streams"][0]]
    return Verdict(",".join(g["streams"]), txn, level, first["versions"], first["latest_at_commit"],
                   first["window_len"], first["reflects"] if level != Level.TORN else None, parts)


def check_partitioned(histories: dict[str, Iterable[dict]], reads: Iterable[tuple[str, int, dict[str, str]]]) -> Report:
    """A partitioned stream's scatter-gather queries judged as one read each.

    `histories`: each partition's stream name -> its server's history of it (servers number their
    events independently, so each is checked on its own first); `reads`: one (name, slide k,
    {partition stream: its txn}) per scatter-gather query. The query is one read of slide k
    (Level.AS_OF, reflects k) when every partition's txn committed as a pinned read of exactly that
    partition's window as of the same slide k; torn when any did not, read another slide, or is
    missing from its history. Errors: the per-partition histories' own, prefixed by the partition."""
    out = Report()
    by_txn: dict[str, dict[str, Verdict]] = {}
    for name, events in histories.items():
        rep = check(events)
        out.errors += [f"{name}: {e}" for e in rep.errors]
        by_txn[name] = {v.txn: v for v in rep.verdicts}
    for query, k, txns in reads:
        parts: dict[str, dict] = {}
        level = Level.AS_OF
        for name, txn in sorted(txns.items()):
            v = by_txn.get(name, {}).get(txn)
            if v is None:
                parts[name] = {"level": None, "txn": txn}
                level = Level.TORN
                continue
            parts[name] = {"level": v.level, "txn": txn, "versions": v.versions, "latest_at_commit": v.latest_at_commit,
                           "window_len": v.window_len, "reflects": v.reflects}
            if v.level != Level.AS_OF or v.reflects != k:
                level = Level.TORN
        first = next(iter(parts.values()), {})
        out.verdicts.append(Verdict(",".join(sorted(txns)), query, level, first.get("versions", []),
                                    first.get("latest_at_commit", -1), first.get("window_len", 0),
                                    k if level == Level.AS_OF else None, parts))
    return out
