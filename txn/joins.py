"""Join queries as the scheduler runs them (issue 14): read-only transactions over several windows.

A JoinQueryPlan wraps a planned store.join.JoinPlan with what the scheduler needs to know:

- which streams the transaction reads (each distinct stream once, FROM order; a self-join reads its
  stream once and hands the same sub-window objects to every source that names it), and how many
  of each stream's youngest sub-windows (the largest RANGE among the sources of that stream);
- the re-execution period of a periodic join, per stream (see SLIDE below);
- `evaluate(reads)`: the join runs once, at commit, over the sub-windows the transaction read
  (references to sealed, immutable sub-windows: reading one is only keeping it). Each source gets
  the youngest n_q of its stream's sub-windows read;
- `refresh()`: eager maintenance of a periodic join's kept result after a slide of a joined stream.

SLIDE of a periodic join. Each source may carry its own SLIDE, counted in slides of that source's
stream (in that stream's units). The query is due when ANY source with a SLIDE has seen that many
slides of its stream since the state the query's last answer reflected; sources without SLIDE never
make it due (their slides are picked up by the next execution). At least one source needs SLIDE.
So `FROM a [RANGE 1 min SLIDE 10 s] JOIN b [RANGE 1 min]` re-executes every 10 s of a's slides;
putting SLIDE on both re-executes on either stream's schedule. Several sources of one stream (a
self-join): the smallest SLIDE among them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from windowstore.store import Answer, Stream, SubWindow
from windowstore.store.join import JoinPlan
from windowstore.store.kinds import AccessPath


@dataclass(frozen=True)
class StreamWindow:
    """What a join answer reflects of one joined stream: the newest slide read (-1: its window was
    empty) and the bounds of the sub-windows read."""

    stream: str
    slide: int
    window_start_ms: int | None
    window_end_ms: int | None


class JoinQueryPlan:
    """A join query bound to the scheduler's streams."""

    access = AccessPath.JOIN
    supports_remove = True  # reads are references: dropping one removes its contribution exactly

    def __init__(self, join: JoinPlan, streams: Mapping[str, Stream], eager: bool = True):
        self.join = join
        self.query = join.query
        self.labels = join.labels
        self.types = join.types
        names: list[str] = []
        for src in join.sources:
            if src.stream not in names:
                names.append(src.stream)
        self.names = names
        self.streams: list[Stream] = [streams[n] for n in names]
        self.stream = self.streams[0]  # the first source's stream: Answer.stream, ReadAnswers' slide
        self.n_q: dict[str, int] = {n: max(s.n_q for s in join.sources if s.stream == n) for n in names}
        every: dict[str, int] = {}
        for s in join.sources:
            if s.every is not None:
                every[s.stream] = min(every.get(s.stream, s.every), s.every)
        self.every = every
        # Eager or lazy (thesis 5.2, 5.4): lazy re-evaluation joins the sub-windows that arrived
        # since the last execution as groups, and gets cheaper as the re-evaluation interval grows;
        # its drawback, answers only at re-execution, costs nothing when answers are wanted only
        # every SLIDE anyway, and its no-restore semantics is what LWS asks. So a periodic join
        # that answers every slide of some stream is maintained eagerly (after every slide, as its
        # own step: the answer at commit is then cheap), one that answers every k > 1 slides lazily
        # (bench/join_bench.py: every 5 slides, lazy 17 ms vs eager 25 ms per slide).
        self.eager = eager and join.cache and any(e <= 1 for e in every.values())

    @property
    def stream_names(self) -> list[str]:
        return self.names

    def explain(self) -> dict:
        """As Plan.explain: a join reads every source stream's window and joins them."""
        mode = "eagerly (after every slide)" if self.eager else "at each execution"
        timing = self.join.explain_timing()  # timing conditions: the rule choosing the paper's algorithm
        return {"access": AccessPath.JOIN, "how": f"each source stream's window, one sub-window per read, joined {mode}"
                + timing.pop("how", ""),
                "streams": list(self.names), "subwindows": max(self.n_q.values()), "reads": sum(self.n_q.values()),
                "group_by": [], "aggregates": []} | timing

    def reads_stream(self, name: str) -> bool:
        return name in self.n_q

    def inputs(self, reads: Mapping[str, Mapping[int, SubWindow]]) -> list[list[SubWindow]]:
        """Per source (FROM order), the youngest n_q of its stream's sub-windows read."""
        out = []
        for src in self.join.sources:
            got = reads.get(src.stream, {})
            out.append([got[v] for v in sorted(got, reverse=True)[: src.n_q]])
        return out

    def evaluate(self, reads: Mapping[str, Mapping[int, SubWindow]]) -> Answer:
        return self.join.evaluate(self.inputs(reads))

    def current_inputs(self) -> list[list[SubWindow]]:
        by_name = {s.name: s for s in self.streams}
        return [by_name[src.stream].window.youngest(src.n_q) for src in self.join.sources]

    def refresh(self) -> None:
        """Eager evaluation and expiration: bring the kept join result to the current windows."""
        self.join.refresh(self.current_inputs())

    def provenance(self, reads: Mapping[str, Mapping[int, SubWindow]]) -> list[StreamWindow]:
        out = []
        for name in self.names:
            subs = list(reads.get(name, {}).values())
            starts = [s.start_ms for s in subs if s.start_ms is not None]
            ends = [s.end_ms for s in subs if s.end_ms is not None]
            out.append(StreamWindow(name, max((s.slide for s in subs), default=-1),
                                    min(starts) if starts else None, max(ends) if ends else None))
        return out


def stream_names(plan) -> list[str]:
    """The names of the streams a plan (single-stream Plan or JoinQueryPlan) reads."""
    return plan.names if isinstance(plan, JoinQueryPlan) else [plan.stream.name]


def first_with_slide(sources: Sequence) -> int | None:
    """The SLIDE (in sub-windows) of the first source that has one."""
    return next((s.every for s in sources if s.every is not None), None)
