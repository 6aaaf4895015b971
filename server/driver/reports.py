"""What the driver reports: per-stream statistics (StreamStats), the Prometheus snapshot, the log's
state, and how a query would run (explain). Read-only, on the event loop (one consistent view
between two engine operations): nothing here changes the engine or the driver.

Response times are measured at the edge, not by the engine (whose clock only advances between its
operations): a one-time query's from the call's arrival at its handler to its reply ready to send
(service.py, then `Driver.note_answer`), including the waits in the loop, for a seal or a due
slide, and the restarts; a periodic execution's as it was published (periodic.py). They are kept
per stream in `Metrics` (not state: they start afresh with the process).
"""
from __future__ import annotations

import collections
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Metrics", "durability_stats", "explain", "metrics_snapshot", "percentiles", "stats"]


@dataclass
class Metrics:
    """Per-stream answer statistics, fed with the response times measured at the edge (not state:
    they start afresh with the process)."""

    staleness: collections.deque = field(default_factory=lambda: collections.deque(maxlen=10_000))
    response: collections.deque = field(default_factory=lambda: collections.deque(maxlen=10_000))


def percentiles(values) -> dict:
    if not values:
        return {"count": 0, "p50": 0.0, "p90": 0.0, "p99": 0.0, "max": 0.0}
    a = np.fromiter(values, dtype=float)
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return {"count": len(a), "p50": float(p50), "p90": float(p90), "p99": float(p99), "max": float(a.max())}


def explain(engine, query) -> dict:
    """How `query` (parsed) would run now, without running it (Plan.explain), with its period
    in slides (0: one-time) and whether it would share its execution."""
    from windowstore.store.query import JoinQuery

    if isinstance(query, JoinQuery):
        periodic = any(s.slide is not None for s in query.sources)
    else:
        periodic = query.slide is not None
    plan = engine.plan(query, periodic=periodic)
    out = plan.explain()
    if isinstance(query, JoinQuery):  # a join: its most frequent source
        out["every_slides"] = min(plan.every.values()) if plan.every else 0
    else:
        out["every_slides"] = plan.bound.every or 0
    sharing = engine.sched.sharing
    if not periodic:
        out["sharing"] = "a one-time query runs alone"
    elif sharing is None:
        out["sharing"] = "runs alone: shared execution is off (--sharing none)"
    else:  # which group it would join and why (txn/sharing/runtime.py)
        out["sharing"] = sharing.explain(plan, out["every_slides"])
    return out


def metrics_snapshot(driver) -> dict:
    """Everything the Prometheus collector exports, in one driver turn."""
    s = stats(driver, None)
    for st in s["streams"]:
        stream = driver.stream(st["stream"])
        w = stream.window
        held = sum(a.nbytes for sub in w.subs if sub is not None for a in sub.columns.values())
        held += sum(sub.synopsis.nbytes for sub in w.subs if sub is not None)
        buffer, slots = w.open_chunks()
        chunks = buffer + [ch for chunks in slots.values() for ch in chunks]
        chunks += w.cutting.chunks if w.cutting is not None else ()
        held += sum(a.nbytes for ch in chunks for a in ch.values())
        held += sum(keys.nbytes for keys in w.running_keys.values())
        st["bytes"] = held
        st["strings"] = len(stream.strings)
    s["subscriber_drops"] = driver.periodic_answers.dropped()
    s["shed"] = driver.shed
    sched = driver.sched
    s["offload"] = {"jobs": sched.jobs, "discarded": sched.jobs_discarded, "holds": sched.holds,
                    "recalled": sched.reads_recalled}
    s["replica_lag"] = driver.replication.lag() if driver.replication is not None else {}
    return s


def stats(driver, name: str | None) -> dict:
    """One stream's statistics (every stream's without a name), the policy's and the log's."""
    sched, engine = driver.sched, driver.engine
    names = [name] if name else list(sched.streams)
    out = []
    for n in names:
        stream = driver.stream(n)
        c = sched.by_stream[n]
        book = engine.books[n]
        m = driver.metrics[n]
        out.append({"stream": n, "slides": c.slides, "queries": c.committed, "aborts": c.aborts,
                    "restarts": c.restarts, "failed": c.failed, "errors": c.errors, "fallbacks": c.fallbacks,
                    "catch_up_slides": driver.catch_up.get(n, 0), "discarded_rows": book.discarded_rows,
                    "staged_rows": sum(t.num_rows for ats in book.staged.values() for cs in ats.values()
                                       for t in cs.values()),
                    "late_rows": stream.window.late_rows,
                    "duplicate_batches": book.duplicate_batches, "accepted_rows": book.accepted_rows,
                    "staleness_ms": percentiles(m.staleness), "response_ms": percentiles(m.response),
                    "slide_delay_ms": percentiles(sched.slide_delays[n]),
                    "seal_ms": percentiles(sched.seal_ms[n]), "stopped": sched.failed.get(n),
                    "seconds_like_batches": driver.seconds_like[n],
                    "split_batches": book.split_batches, "pending_commits": len(book.pending)})
    return {"policy": sched.policy, "streams": out, "durability": durability_stats(driver),
            "onetime": sched.by_class["onetime"].as_dict(), "periodic": sched.by_class["periodic"].as_dict(),
            "sharing": sched.sharing.stats() if sched.sharing is not None else {"mode": "none"},
            "answer_cache": answer_cache_stats(sched.answer_cache)}


def answer_cache_stats(cache) -> dict:
    """The answer cache's counters and bounds (all 0: off)."""
    if cache is None:
        return {"hits": 0, "misses": 0, "entries": 0, "bytes": 0, "evictions": 0, "max_entries": 0, "max_bytes": 0,
                "requests": 0}
    return {**cache.stats(), "max_entries": cache.max_entries, "max_bytes": cache.max_bytes}


def durability_stats(driver) -> dict:
    dur = driver.durability
    if dur is None:
        return {"enabled": False}
    rec = driver.recovery_stats
    return {"enabled": True, "fsync": dur.wal.policy, "last_lsn": dur.wal.next_lsn - 1,
            "log_bytes": dur.wal.bytes_written, "snapshots": dur.snapshots_taken,
            "last_snapshot_pause_ms": dur.last_capture_ms, "max_snapshot_pause_ms": dur.max_capture_ms,
            "write_failure": driver.write_failure or "", "snapshot_error": dur.snapshot_error or "",
            "recovery_s": rec.get("seconds", 0.0), "recovered_records": rec.get("replayed", 0),
            "snapshot_lsn": rec.get("snapshot_lsn", 0)}
