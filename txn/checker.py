"""Isolation checker: classifies each committed query from a history alone (thesis 7.3.2).

- LWS (Definition 7.2): the versions it read (less those it removed) are exactly the window as
  of its commit: the window_len youngest slides then applied.
- WS only (Definition 7.1): they are exactly the window as of some earlier moment: a contiguous
  run ending at some slide L no later than the one applied at commit (clipped at slide 0 while the
  window was filling).
- torn: anything else.

The checker also verifies the history is self-consistent: each read names the version that the
sub-window held at that moment, slides are numbered 0, 1, 2, ... per stream.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable


@dataclass
class Verdict:
    stream: str
    txn: str
    level: str                 # "lws" | "ws" | "torn"
    versions: list[int]
    latest_at_commit: int
    window_len: int
    reflects: int | None       # the L of the window state it read, when ws or lws


@dataclass
class Report:
    verdicts: list[Verdict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)   # inconsistencies in the history itself
    aborts: int = 0

    def count(self, level: str) -> int:
        return sum(v.level == level for v in self.verdicts)

    def violations(self, expect: str) -> list[Verdict]:
        ok = {"lws": ("lws",), "ws": ("lws", "ws")}[expect]
        return [v for v in self.verdicts if v.level not in ok]

    def summary(self) -> dict:
        return {"committed": len(self.verdicts), "lws": self.count("lws"), "ws_only": self.count("ws"),
                "torn": self.count("torn"), "aborts": self.aborts, "errors": len(self.errors)}


def _window(latest: int, length: int) -> set[int]:
    return set(range(max(0, latest - length + 1), latest + 1))


def classify(versions: set[int], latest: int, window_len: int) -> tuple[str, int | None]:
    """("lws" | "ws" | "torn", the slide L of the window state read)."""
    if versions == _window(latest, window_len):
        return "lws", latest
    top = max(versions, default=-1)
    if top <= latest and versions == _window(top, window_len):
        return "ws", top
    return "torn", None


def check(events: Iterable[dict]) -> Report:
    report = Report()
    latest: dict[str, int] = {}
    position_of: dict[tuple[str, int], int] = {}  # (stream, version) -> sub-window it wrote
    open_txns: dict[tuple[str, str], dict] = {}
    for ev in events:
        stream, op, txn = ev.get("stream"), ev.get("op"), ev.get("txn")
        key = (stream, txn)
        if op == "w":
            v = ev["version"]
            expected = latest.get(stream, -1) + 1
            if v != expected:
                report.errors.append(f"seq {ev['seq']}: stream {stream!r} slide {v} applied, expected {expected}")
            latest[stream] = v
            position_of[(stream, v)] = ev["subwindow"]
        elif op == "b":
            open_txns[key] = {"reads": set(), "window_len": ev["window_len"]}
        elif op in ("r", "u"):
            st = open_txns.get(key)
            v = ev["version"]
            if st is None:
                report.errors.append(f"seq {ev['seq']}: {op} by {txn!r} outside a begun attempt")
            elif op == "r":
                if position_of.get((stream, v)) != ev["subwindow"]:
                    report.errors.append(f"seq {ev['seq']}: {txn!r} read version {v} from sub-window "
                                         f"{ev['subwindow']}, which that slide did not write")
                if v in st["reads"]:
                    report.errors.append(f"seq {ev['seq']}: {txn!r} read version {v} twice")
                st["reads"].add(v)
            elif v in st["reads"]:
                st["reads"].discard(v)
            else:
                report.errors.append(f"seq {ev['seq']}: {txn!r} removed version {v} it had not read")
        elif op == "c":
            st = open_txns.pop(key, None)
            if st is None:
                continue  # a slide's commit
            lat = latest.get(stream, -1)
            level, reflects = classify(st["reads"], lat, st["window_len"])
            report.verdicts.append(Verdict(stream, txn, level, sorted(st["reads"]), lat, st["window_len"], reflects))
        elif op == "a":
            if open_txns.pop(key, None) is not None:
                report.aborts += 1
    return report
