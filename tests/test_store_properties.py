"""Property tests: window scan == synopsis scan == probe == brute force over the logical window."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from reference import answer, same
from windowstore.store import InvalidInput, Stream, WindowSpec, plan_query, run_plan
from windowstore.store.aggregates import Partial
from windowstore.store.query import Aggregate, KeyColumn, OrderBy, Predicate, Query, Range

KEYS = ["a", "b", "c", "d", "e"]


@st.composite
def scenarios(draw):
    n = draw(st.integers(1, 6))
    float_col = draw(st.booleans())
    schema = {"ts": "int64", "k": "string", "g": "int64", "x": "int64", "y": "float64" if float_col else "int64"}
    spec = WindowSpec(subwindows=n, subwindow_ms=100, group_by=("k", "g"), topk=draw(st.integers(1, 4)))
    slides = draw(st.integers(0, 2 * n + 1))
    batches = []
    for j in range(slides + 1):  # the last batch stays in the open buffer, invisible to queries
        size = draw(st.integers(0, 12))
        batches.append([
            {"ts": j * 100 + draw(st.integers(0, 99)), "k": draw(st.sampled_from(KEYS)),
             "g": draw(st.integers(-2, 2)), "x": draw(st.integers(-50, 50)),
             "y": draw(st.floats(-1e3, 1e3, allow_nan=False, width=32)) if float_col else draw(st.integers(0, 9))}
            for _ in range(size)])
    return schema, spec, batches


@st.composite
def queries(draw, n):
    numeric = ["x", "y", "ts"]
    group = draw(st.sampled_from([None, "k", "g", "x"]))
    funcs = draw(st.lists(st.sampled_from(["count", "count*", "sum", "avg", "min", "max", "count_distinct", "quantile"]), min_size=1, max_size=4))
    aggs = []
    for f in funcs:
        if f == "count*":
            aggs.append(Aggregate("count"))
        elif f == "count_distinct":
            aggs.append(Aggregate("count_distinct", draw(st.sampled_from(["k", "g", "x", "y"]))))
        elif f == "quantile":
            aggs.append(Aggregate("quantile", draw(st.sampled_from(numeric)), draw(st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.7, 0.9, 1.0]))))
        else:
            aggs.append(Aggregate(f, draw(st.sampled_from(numeric)) if f != "count" else draw(st.sampled_from(numeric))))
    where = ()
    if draw(st.booleans()):
        preds = [
            Predicate("x", draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="])), draw(st.integers(-20, 20))),
            Predicate("k", draw(st.sampled_from(["=", "!=", "<", ">="])), draw(st.sampled_from(KEYS + ["zz"]))),
            Predicate("k", draw(st.sampled_from(["in", "not in"])), tuple(draw(st.lists(st.sampled_from(KEYS + ["q"]), min_size=1, max_size=3)))),
            Predicate("g", "in", (0, 1)),
        ]
        where = tuple(tuple(draw(st.lists(st.sampled_from(preds), min_size=1, max_size=2))) for _ in range(draw(st.integers(1, 2))))
    items = ([KeyColumn(group)] if group else []) + aggs
    order = ()
    limit = None
    if group and draw(st.booleans()):
        order = (OrderBy(draw(st.integers(0, len(items) - 1)), draw(st.booleans())),)
        limit = draw(st.integers(1, 4))
    n_q = draw(st.integers(1, n))
    outer = ()
    labels = [it.label for it in items]
    if group and draw(st.integers(0, 4)) == 0 and len(set(labels)) == len(labels):  # outer names must be unique
        col = items[draw(st.integers(1, len(items) - 1))].label
        outer = (Aggregate("quantile", col, draw(st.sampled_from([0.0, 0.5, 0.9, 1.0]))), Aggregate("count"), Aggregate("max", col))
        order, limit = (), None
    return Query("s", tuple(items), where, group, order, limit, Range(n_q, "subwindows"), None, outer)


def build(schema, spec, batches):
    stream = Stream("s", schema, spec, created_ms=0)
    logical: list[list[dict]] = []
    for j, rows in enumerate(batches):
        if rows:
            stream.append({c: [r[c] for r in rows] for c in schema})
            stream.window._check()
        if j < len(batches) - 1:
            stream.window.slide((j + 1) * 100)
            stream.window._check()
            logical.append(rows)
    return stream, logical


@pytest.mark.slow
@given(scenarios(), st.data())
def test_every_access_path_equals_brute_force(scenario, data):
    schema, spec, batches = scenario
    stream, logical = build(*scenario)
    for _ in range(4):
        q = data.draw(queries(spec.subwindows))
        expected = answer(q, [r for sub in logical[max(0, len(logical) - q.range.value):] for r in sub])
        window = run_plan(plan_query(q, stream, access="window"))
        assert same(window.rows, expected), (q, window.rows, expected)
        best = plan_query(q, stream)
        got = run_plan(best)
        assert same(got.rows, expected), (q, best.access, got.rows, expected)
        if best.access == "probe":
            syn = run_plan(plan_query(q, stream, access="synopsis"))
            assert same(syn.rows, expected)


@pytest.mark.slow
@given(scenarios(), st.data())
def test_merge_order_and_removal(scenario, data):
    stream, logical = build(*scenario)
    q = data.draw(queries(stream.spec.subwindows))
    plan = plan_query(q, stream, access="window")
    subs = stream.window.youngest(plan.n_q)
    in_order = Partial()
    for s in subs:
        in_order.add(s.slide, plan.read(s))
    perm = data.draw(st.permutations(subs))
    shuffled = Partial()
    for s in perm:
        shuffled.add(s.slide, plan.read(s))
    assert plan.finish(in_order).rows == plan.finish(shuffled).rows
    # split into two partials and merge: same answer
    cut = data.draw(st.integers(0, len(perm)))
    left, right = Partial(), Partial()
    for s in perm[:cut]:
        left.add(s.slide, plan.read(s))
    for s in perm[cut:]:
        right.add(s.slide, plan.read(s))
    assert plan.finish(left.merge(right)).rows == plan.finish(in_order).rows
    # remove-then-add is the identity
    if subs:
        victim = data.draw(st.sampled_from(subs))
        shuffled.remove(victim.slide)
        shuffled.add(victim.slide, plan.read(victim))
        assert plan.finish(shuffled).rows == plan.finish(in_order).rows


@pytest.mark.slow
@given(scenarios(), st.integers(1, 3))
def test_approximate_topk_bounds_hold(scenario, k):
    schema, spec, batches = scenario
    stream, logical = build(*scenario)
    q = Query("s", (KeyColumn("k"), Aggregate("count")), group_by="k", order_by=(OrderBy(1, True),), limit=k, approximate=True)
    got = run_plan(plan_query(q, stream))
    truth: dict = {}
    for sub in logical[max(0, len(logical) - spec.subwindows):]:
        for r in sub:
            truth[r["k"]] = truth.get(r["k"], 0) + 1
    for key, lower in got.rows:
        assert lower <= truth[key]
    if got.guaranteed:
        exact_top = sorted(truth.values(), reverse=True)[:k]
        assert sorted((truth[key] for key, _ in got.rows), reverse=True) == exact_top


def test_forcing_an_access_path_that_cannot_answer_is_refused():
    stream = Stream("s", {"ts": "int64", "x": "int64"}, WindowSpec(subwindows=2, subwindow_ms=10), 0)
    q = Query("s", (Aggregate("count"),), where=((Predicate("x", ">", 1),),))
    try:
        plan_query(q, stream, access="synopsis")
    except InvalidInput as e:
        assert "cannot answer" in str(e)
    else:
        raise AssertionError("synopsis scan accepted a filtered query")


@pytest.mark.slow
@given(scenarios(), st.data())
def test_compacting_the_string_dictionary_changes_no_answer(scenario, data):
    stream, logical = build(*scenario)
    qs = [data.draw(queries(stream.spec.subwindows)) for _ in range(4)]
    paths = [(q, access) for q in qs for access in (None, "window")]
    before = [run_plan(plan_query(q, stream, access=a)).rows for q, a in paths]
    freed = stream.compact_strings()
    stream.window._check()
    assert len(stream.strings) == len(stream.window.live_codes())
    assert freed >= 0
    after = [run_plan(plan_query(q, stream, access=a)).rows for q, a in paths]
    assert after == before


_WORDS = st.sampled_from(["a", "b", "c", "d", "e", "f", "g", "h", "é", ""])


@pytest.mark.slow
@given(st.lists(st.tuples(st.lists(_WORDS, max_size=8), st.lists(st.integers(0, 7), max_size=12),
                          st.booleans()), max_size=12))
def test_string_dictionary_interns_as_a_python_dict_would(batches):
    """Codes are stable and new strings get the next codes in the order they are met (a
    dictionary-encoded batch: in its dictionary's order, duplicate entries included), whichever
    path maps them: Arrow's index_in against the stream's strings, or Python lookups."""
    import numpy as np
    import pyarrow as pa
    from windowstore.store.dictionary import StringDictionary

    d, ref = StringDictionary(), {}
    for words, picks, dictionary_encoded in batches:
        if dictionary_encoded:
            if not words:
                continue
            indices = [i % len(words) for i in picks]
            array = pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32()), pa.array(words, pa.string()))
            met = words  # the dictionary is mapped entry by entry
        else:
            array = pa.array([words[i % len(words)] for i in picks] if words else [], pa.string())
            met = array.to_pylist()
        for s in met:
            ref.setdefault(s, len(ref))
        codes = d.encode(array)
        assert codes.dtype == np.int32
        assert codes.tolist() == [ref[s] for s in array.to_pylist()]
        assert d.values == list(ref)
