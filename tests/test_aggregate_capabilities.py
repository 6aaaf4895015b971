"""An aggregate's optional access paths are types (store/functions.py): a class whose check can
say yes to a path (probe_ok, synopsis_ok, ...) has that path's reader by being an instance of its
capability class, and a class with a capability has a check that can take it. The planner calls
a reader only where the check said yes, so a missing reader would fail only on that path."""
from __future__ import annotations

import pytest

import windowstore.store.approx  # noqa: F401  (registers the sketch aggregates)
from windowstore.store.functions import (FUNCTIONS, AggregateFunction, Combines, CombinesRuns, Inverts, JoinsByKey,
                                         Probes, ReadsKeySynopsis, ReadsSynopsis)

# capability -> the checks that lead to its reader (the base class's default says no)
PATHS = {
    Probes: ("probe_ok",),
    ReadsSynopsis: ("synopsis_ok",),
    ReadsKeySynopsis: ("key_synopsis_ok", "key_running_ok"),
    CombinesRuns: ("combine_columns", "run_columns"),
    JoinsByKey: ("join_by_key_ok",),
    Combines: ("combine_ok", "join_synopsis_ok"),
    Inverts: ("invertible",),
}


def _overrides(fn: AggregateFunction, method: str) -> bool:
    return getattr(type(fn), method) is not getattr(AggregateFunction, method)


def test_the_registry_holds_the_aggregates_of_every_family():
    assert {"count", "sum", "avg", "min", "max", "count_distinct", "quantile"} <= set(FUNCTIONS)
    assert any(isinstance(fn, ReadsSynopsis) and not fn.exact for fn in FUNCTIONS.values()), "a sketch aggregate"


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_a_path_an_aggregate_may_take_has_its_reader_and_no_reader_is_dead(name):
    fn = FUNCTIONS[name]
    for capability, checks in PATHS.items():
        may = any(_overrides(fn, c) for c in checks)
        assert may == isinstance(fn, capability), (name, capability.__name__, checks)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_an_input_type_the_probe_takes_has_a_probe(name):
    fn = FUNCTIONS[name]
    for t in sorted(fn.inputs) + [None]:
        if fn.probe_ok(t):
            assert isinstance(fn, Probes), (name, t)


def test_the_base_class_has_no_reader_of_an_optional_path():
    for capability in PATHS:
        for method in capability.__abstractmethods__:
            assert not hasattr(AggregateFunction, method), method
