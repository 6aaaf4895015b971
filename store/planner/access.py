"""Choosing a bound query's access path (kinds.AccessPath), best first: probe, synopsis, window
(see the package docstring for what each reads). Which path answers which aggregate is each
function's own statement (functions.py); this module only asks. It must not read windows or
build answers."""
from __future__ import annotations

from ..binder import BoundQuery
from ..errors import InvalidInput
from ..kinds import AccessPath
from ..stream import Stream


def resolve_access(bound: BoundQuery, stream: Stream, access: str | None) -> AccessPath:
    """The path a plan takes: the best one, or `access` when forced and able to answer the query
    ('window' always is; 'synopsis' and 'probe' only where they answer it)."""
    best = _choose_access(bound, stream)
    if bound.hop is not None and best == AccessPath.PROBE:  # a probe reads one window, not each
        best = AccessPath.SYNOPSIS if _synopsis_answers(bound, stream) else AccessPath.WINDOW
    if access is None or access == best:
        return best
    if access == AccessPath.SYNOPSIS and best == AccessPath.PROBE and _synopsis_answers(bound, stream):
        return AccessPath.SYNOPSIS
    if access != AccessPath.WINDOW or bound.approximate:
        raise InvalidInput(f"access path {str(access)!r} cannot answer this query (best: {str(best)!r})")
    return AccessPath.WINDOW


def _synopsis_answers(b: BoundQuery, stream: Stream) -> bool:
    declared = set(stream.spec.group_by)
    if len(b.group_keys) > 1:
        return False
    if b.group_by is None:
        return all(a.fn.synopsis_ok(a, declared) for a in b.aggs)
    return b.group_by in declared and all(a.fn.key_synopsis_ok(a) for a in b.aggs)


def _choose_access(b: BoundQuery, stream: Stream) -> AccessPath:
    if b.approximate:
        return AccessPath.SYNOPSIS
    if b.where or b.projection or len(b.group_keys) > 1:
        return AccessPath.WINDOW
    # a probe reads the window-level synopses of the current state only: AS OF SLIDE scans
    if b.query.as_of_slide is None:
        if b.group_by is None and all(a.fn.probe_ok(a.input_type) for a in b.aggs):
            return AccessPath.PROBE
        if b.group_by in stream.window.running_keys and all(a.fn.key_running_ok(a) for a in b.aggs):
            return AccessPath.PROBE  # running per-key totals (key_running.py)
    return AccessPath.SYNOPSIS if _synopsis_answers(b, stream) else AccessPath.WINDOW
