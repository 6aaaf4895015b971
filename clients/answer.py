"""Answers as the SDK returns them."""
from __future__ import annotations

from dataclasses import dataclass

from windowstore.v1 import windowstore_pb2 as pb

_ACCESS = {pb.ACCESS_PATH_PROBE: "probe", pb.ACCESS_PATH_SYNOPSIS: "synopsis", pb.ACCESS_PATH_WINDOW: "window"}


def _value(v: pb.Value):
    kind = v.WhichOneof("kind")
    return None if kind is None else getattr(v, kind)


@dataclass
class Answer:
    columns: list[str]
    rows: list[tuple]
    slide: int                     # newest slide reflected (-1: empty window)
    window_start_ms: int | None
    window_end_ms: int | None
    staleness_ms: float | None
    response_ms: float             # server-side: submit to answer
    restarts: int
    policy: str
    access: str
    exact: bool
    guaranteed: bool | None
    query_id: str
    execution: int
    late_slides: int
    inter_exec_ms: float | None
    answered_ms: float
    stream: str

    @classmethod
    def from_pb(cls, a: pb.Answer) -> "Answer":
        return cls(
            columns=list(a.columns), rows=[tuple(_value(v) for v in r.values) for r in a.rows], slide=a.slide,
            window_start_ms=a.window_start_ms if a.HasField("window_start_ms") else None,
            window_end_ms=a.window_end_ms if a.HasField("window_end_ms") else None,
            staleness_ms=a.staleness_ms if a.HasField("staleness_ms") else None,
            response_ms=a.response_ms, restarts=a.restarts, policy=a.policy, access=_ACCESS.get(a.access, "?"),
            exact=a.exact, guaranteed=a.guaranteed if a.HasField("guaranteed") else None, query_id=a.query_id,
            execution=a.execution, late_slides=a.late_slides,
            inter_exec_ms=a.inter_exec_ms if a.HasField("inter_exec_ms") else None,
            answered_ms=a.answered_ms, stream=a.stream)

    def to_arrow(self):
        import pyarrow as pa

        cols = list(zip(*self.rows)) if self.rows else [[] for _ in self.columns]
        return pa.table({name: list(values) for name, values in zip(self.columns, cols)})

    def to_pandas(self):
        import pandas as pd

        return pd.DataFrame(self.rows, columns=self.columns)
