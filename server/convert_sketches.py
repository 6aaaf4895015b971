"""The merged sketches a query returns on request (QueryRequest.return_sketches): one MergedSketch
per sketch aggregate of the answer (and of a periodic query's answers when it was registered with
RegisterQueryRequest.return_sketches), so that the client of a partitioned stream merges the
partitions' sketches with the library's merge (clients/sketch_merge.py, docs/partitions.md)."""
from __future__ import annotations

from windowstore.store.approx import merged_sketch
from windowstore.v1 import windowstore_pb2 as pb


def sketches_to_pb(answer, out: pb.Answer) -> None:
    """Fill `out.sketches` from a core answer's sketch cells (none for a query without sketch
    aggregates)."""
    for column, estimate in getattr(answer, "sketches", None) or ():
        # a one-time answer's Estimate, or a periodic one's sketch serialized when it was answered
        kind, size, data, dropped = estimate if isinstance(estimate, tuple) else merged_sketch(estimate)
        out.sketches.add(column=column, kind=kind, size=size, data=data, dropped_error=dropped)
