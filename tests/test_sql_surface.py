"""The SQL a user writes beyond the first query shapes (issue 32): what is refused says what is not
supported, where, and in words a newcomer can act on; never a misleading "expected FROM"."""
from __future__ import annotations

from decimal import Decimal
from random import Random

import pytest

from windowstore.server.convert import query_from_pb, query_to_pb
from windowstore.store import QueryError, QuerySyntaxError, Stream, WindowSpec, parse_query, plan_query
from windowstore.store.parser import parse_statement, to_text
from windowstore.store.planner import run_plan


def _refusal(text: str) -> QuerySyntaxError:
    with pytest.raises(QuerySyntaxError) as err:
        parse_statement(text)
    return err.value


@pytest.mark.parametrize("text, pos, token, reason", [
    # unknown functions, wherever a function can be written
    ("SELECT foo(x) FROM s", 7, "foo", "unknown function 'foo'"),
    ("SELECT src, stddev(bytes) FROM packets GROUP BY src", 12, "stddev", "unknown function 'stddev'"),
    ("SELECT COUNT(*) FROM s WHERE lower2(k) = 'a'", 29, "lower2", "unknown function 'lower2'"),
    ("SELECT k, COUNT(*) FROM s GROUP BY k ORDER BY absolute(k)", 46, "absolute", "unknown function 'absolute'"),
    ("SELECT k, COUNT(*) FROM s GROUP BY foo(k)", 35, "foo", "unknown function 'foo'"),
    # clauses and constructs not supported yet
    ("SELECT COUNT(*) FROM s LIMIT 3 OFFSET 2", 31, "OFFSET", "OFFSET is not supported"),
    ("SELECT COUNT(*) FROM s WHERE x SIMILAR TO 'a'", 31, "SIMILAR", "SIMILAR is not supported"),
    ("SELECT COUNT(*) FROM s WHERE src ILIKE 'a%'", 33, "ILIKE", "ILIKE is not supported"),
    ("SELECT COUNT(*) FROM s WHERE x IN (SELECT y FROM t)", 35, "SELECT", "IN (SELECT ...) is not supported"),
    ("SELECT SUM(x) OVER (PARTITION BY k) FROM s", 14, "OVER", "window functions (OVER) are not supported"),
    ("SELECT SUM(DISTINCT x) FROM s", 11, "DISTINCT", "SUM(DISTINCT ...) is not supported"),
    ("SELECT CAST(x AS BLOB) FROM s", 17, "BLOB", "CAST to BLOB is not supported"),
    ("SELECT lower(x, y) FROM s", 7, "lower", "lower() takes 1 arguments, not 2"),
    ("SELECT COUNT(*) FROM s ORDER BY x NULLS MIDDLE", 40, "MIDDLE", "expected FIRST or LAST after NULLS"),
    ("SELECT x + 1 FROM a JOIN b ON a.k = b.k", 20, "JOIN", "a join with expressions is not supported"),
])
def test_unsupported_sql_is_named_with_its_position(text, pos, token, reason):
    err = _refusal(text)
    assert (err.position, err.token) == (pos, token), str(err)
    assert err.reason.startswith(reason), str(err)
    assert str(err).startswith(f"{reason}") and f"at position {pos} (near {token!r})" in str(err), str(err)
    assert "expected FROM" not in str(err)


def test_an_unknown_function_lists_the_known_ones():
    err = _refusal("SELECT foo(x) FROM s")
    assert str(err).startswith("unknown function 'foo' at position 7 (near 'foo')"), str(err)
    for name in ("COUNT", "SUM", "AVG", "MIN", "MAX", "QUANTILE", "MEDIAN"):
        assert name in str(err), str(err)


def test_a_name_that_is_no_function_call_stays_a_name():
    """A column or stream that happens to be called like a function is still a column."""
    q = parse_query('SELECT lower, COUNT(*) FROM s GROUP BY lower')
    assert q.items[0].column == "lower"
    q = parse_query('SELECT COUNT(*) FROM s WHERE "having" = 1')
    assert q.where[0][0].column == "having"


# -- GROUP BY several columns -------------------------------------------------------------------------

KEYS_SCHEMA = {"ts": "int64", "src": "string", "dst": "string", "port": "int64", "ok": "boolean",
               "at": "timestamp", "day": "date", "price": "decimal(12,2)", "bytes": "int64", "f": "float64"}


def _keys_stream(seed: int, declared=("src",)) -> tuple[Stream, list[dict]]:
    """A stream of 3 sub-windows after 5 slides of random rows with nulls in every key column, and
    the rows the window holds (the oracle's input)."""
    rng = Random(seed)
    s = Stream("s", KEYS_SCHEMA, WindowSpec(subwindows=3, subwindow_ms=10, clock="manual", group_by=declared), 0)
    visible = []
    for slide in range(5):
        batch = []
        for i in range(rng.randrange(0, 30)):
            def maybe(v):
                return None if rng.random() < 0.15 else v
            batch.append({"ts": slide * 10 + i % 10, "src": maybe(rng.choice("abc")), "dst": maybe(rng.choice("xyz")),
                          "port": maybe(rng.choice([22, 80, 443, -2**63, 2**63 - 1])), "ok": maybe(rng.random() < 0.5),
                          "at": maybe(rng.choice([0, -1, 10**15])), "day": maybe(rng.choice([0, -3, 20_000])),
                          "price": maybe(rng.choice([Decimal("1.50"), Decimal("-0.25"), Decimal("0.00")])),
                          "bytes": maybe(rng.randrange(-5, 1000)), "f": rng.random()})
        if batch:
            s.append({c: [r[c] for r in batch] for c in KEYS_SCHEMA})
        s.window.slide((slide + 1) * 10)
        visible.append(batch)
    return s, [r for batch in visible[-3:] for r in batch]


def _oracle(rows: list[dict], keys: list[str], desc_key: int | None = None, limit: int | None = None) -> list[tuple]:
    """key columns, COUNT(*), SUM(bytes), MIN(dst) per group of `keys`, ordered by the keys ascending
    (NULLs last), or first by key `desc_key` descending (NULLs last too); LIMIT."""
    groups: dict = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), []).append(r)
    out = []
    for key, members in groups.items():
        b = [m["bytes"] for m in members if m["bytes"] is not None]
        d = [m["dst"] for m in members if m["dst"] is not None]
        out.append((*key, len(members), sum(b) if b else None, min(d) if d else None))
    for i in reversed(range(len(keys))):
        out.sort(key=lambda t: (t[i] is None, t[i] if t[i] is not None else 0))
    if desc_key is not None:
        out.sort(key=lambda t: (t[desc_key] is not None, t[desc_key] if t[desc_key] is not None else 0), reverse=True)
    return out if limit is None else out[:limit]


@pytest.mark.parametrize("keys", [["src", "dst"], ["dst", "src"], ["port", "ok"], ["at", "day", "src"],
                                  ["price", "ok"], ["src", "port", "ok", "day"], ["ok", "ok", "src"]])
@pytest.mark.parametrize("seed", range(4))
def test_group_by_several_columns_matches_a_brute_force_oracle(keys, seed):
    s, rows = _keys_stream(seed)
    unique = list(dict.fromkeys(keys))
    text = f"SELECT {', '.join(unique)}, COUNT(*), SUM(bytes), MIN(dst) FROM s GROUP BY {', '.join(keys)}"
    for access in (None, "window"):
        a = run_plan(plan_query(parse_query(text), s, access))
        assert a.access == "window"  # the synopses are per column: several keys scan
        assert a.rows == _oracle(rows, unique), text
        assert a.columns[:len(unique)] == unique
    a = run_plan(plan_query(parse_query(text + f" ORDER BY {unique[-1]} DESC LIMIT 3"), s))
    assert a.rows == _oracle(rows, unique, desc_key=len(unique) - 1, limit=3)


def test_group_by_several_columns_orders_by_a_key_that_is_not_selected_and_by_aggregates():
    s, rows = _keys_stream(7)
    a = run_plan(plan_query(parse_query("SELECT src, COUNT(*) AS n FROM s GROUP BY src, dst ORDER BY dst DESC, 1"), s))
    expected = [(r[0], r[2]) for r in _oracle(rows, ["src", "dst"], desc_key=1)]
    assert a.rows == expected
    a = run_plan(plan_query(parse_query("SELECT dst, src, COUNT(*) FROM s GROUP BY src, dst ORDER BY 3 DESC LIMIT 4"), s))
    full = _oracle(rows, ["src", "dst"])
    full.sort(key=lambda t: t[2], reverse=True)  # stable: ties keep key order (src, dst)
    assert a.rows == [(r[1], r[0], r[2]) for r in full[:4]]


def test_group_by_several_columns_feeds_a_sub_query():
    s, rows = _keys_stream(3)
    a = run_plan(plan_query(parse_query(
        "SELECT COUNT(*), SUM(n), MAX(n) FROM (SELECT src, dst, COUNT(*) AS n FROM s GROUP BY src, dst)"), s))
    groups = _oracle(rows, ["src", "dst"])
    assert a.rows == [(len(groups), sum(g[2] for g in groups), max(g[2] for g in groups))]


def test_one_declared_key_keeps_its_synopsis_paths_and_several_scan():
    s, _ = _keys_stream(1, declared=("src", "dst"))
    assert plan_query(parse_query("SELECT src, COUNT(*), SUM(bytes) FROM s GROUP BY src"), s).access == "probe"
    assert plan_query(parse_query("SELECT src, SUM(f) FROM s GROUP BY src"), s).access == "synopsis"
    assert plan_query(parse_query("SELECT src, dst, COUNT(*) FROM s GROUP BY src, dst"), s).access == "window"
    with pytest.raises(Exception, match="cannot answer"):
        plan_query(parse_query("SELECT src, dst, COUNT(*) FROM s GROUP BY src, dst"), s, "synopsis")


@pytest.mark.parametrize("text, pos, token, msg", [
    ("SELECT src, COUNT(*) FROM s GROUP BY src, f", 42, "f", "GROUP BY column 'f' must be"),
    ("SELECT src, COUNT(*) FROM s GROUP BY src, nope", 42, "nope", "unknown column 'nope'"),
    ("SELECT port, COUNT(*) FROM s GROUP BY src, dst", 7, "port", "must be aggregated or be a GROUP BY column"),
    ("SELECT src, COUNT(*) FROM s GROUP BY src, dst ORDER BY bytes", 55, "bytes", "a GROUP BY column or a select"),
    ("SELECT src, dst, COUNT(*) FROM s GROUP BY src, dst LIMIT 3 APPROXIMATE", 0, "SELECT", "APPROXIMATE needs"),
])
def test_group_by_several_columns_errors_name_the_column(text, pos, token, msg):
    s, _ = _keys_stream(0)
    with pytest.raises(QueryError, match=msg) as err:
        plan_query(parse_query(text), s)
    assert (err.value.position, err.value.token) == (pos, token), str(err.value)


def test_a_join_groups_by_one_column_and_says_so():
    err = _refusal("SELECT a.src, COUNT(*) FROM s a JOIN t b ON a.src = b.src GROUP BY a.src, b.dst")
    assert err.reason == "a join's GROUP BY takes one column" and err.token == ",", str(err)


def test_group_by_several_columns_round_trips_through_text():
    for text in ("SELECT src, dst, COUNT(*) FROM s GROUP BY src, dst ORDER BY dst DESC LIMIT 2",
                 'SELECT "order", COUNT(*) FROM s GROUP BY src, "order", ok'):
        q = parse_query(text)
        assert parse_query(to_text(q)) == q
        assert q.group_columns == (("src", "dst") if "dst" in text else ("src", "order", "ok"))
    assert parse_query("SELECT COUNT(*) FROM s GROUP BY src").group_by_more == ()


def test_group_by_several_columns_in_the_structured_form():
    several = parse_query("SELECT src, dst, COUNT(*) FROM s GROUP BY src, dst ORDER BY dst DESC")
    msg = query_to_pb(several)
    assert list(msg.group_by_columns) == ["src", "dst"] and msg.group_by == ""
    assert query_from_pb(msg) == several
    one = parse_query("SELECT src, COUNT(*) FROM s GROUP BY src")
    msg = query_to_pb(one)
    assert msg.group_by == "src" and not msg.group_by_columns  # the field every client knows
    assert query_from_pb(msg) == one
    msg.ClearField("group_by")
    msg.group_by_columns.append("src")
    assert query_from_pb(msg) == one

    s, rows = _keys_stream(2)
    msg = query_to_pb(several)
    msg.group_by = "src"
    with pytest.raises(QueryError, match="not both") as err:
        query_from_pb(msg)
    assert err.value.field == "group_by_columns"
    msg = query_to_pb(parse_query("SELECT src, COUNT(*) FROM s GROUP BY src, f"))
    with pytest.raises(QueryError, match="GROUP BY column 'f'") as err:
        plan_query(query_from_pb(msg), s)
    assert err.value.field == "group_by_columns[1]"
    msg.group_by_columns[1] = ""
    with pytest.raises(QueryError, match="needs a name") as err:
        query_from_pb(msg)
    assert err.value.field == "group_by_columns[1]"
    join = query_to_pb(parse_statement("SELECT a.src, COUNT(*) FROM s a JOIN t b ON a.src = b.src GROUP BY a.src"))
    join.ClearField("group_by")
    join.group_by_columns.extend(["a.src", "b.dst"])
    with pytest.raises(QueryError, match="join's GROUP BY takes one column") as err:
        query_from_pb(join)
    assert err.value.field == "group_by_columns[1]"


# -- HAVING ---------------------------------------------------------------------------------------------
def _groups(rows: list[dict], keys: list[str]) -> dict:
    out: dict = {}
    for r in rows:
        out.setdefault(tuple(r[k] for k in keys), []).append(r)
    return out


def _sum(members, c):
    vals = [m[c] for m in members if m[c] is not None]
    return sum(vals) if vals else None


def _sorted_keys(groups: dict) -> list:
    keys = list(groups)
    for i in reversed(range(len(keys[0]) if keys else 0)):
        keys.sort(key=lambda k: (k[i] is None, k[i] if k[i] is not None else 0))
    return keys


@pytest.mark.parametrize("seed", range(4))
def test_having_filters_groups_with_three_valued_logic(seed):
    s, rows = _keys_stream(seed)
    groups = _groups(rows, ["src"])

    def expect(pred):  # (src, COUNT(*), SUM(bytes)) of the groups where pred is True
        return [(k[0], len(groups[k]), _sum(groups[k], "bytes")) for k in _sorted_keys(groups) if pred(k[0], groups[k]) is True]

    def gt(v, x):
        return None if v is None else v > x

    def not_(v):
        return None if v is None else not v

    cases = [
        ("HAVING COUNT(*) > 3", lambda k, m: len(m) > 3),
        ("HAVING SUM(bytes) > 2000 OR src = 'a'", lambda k, m: True if gt(_sum(m, "bytes"), 2000) is True or k == "a"
         else None if _sum(m, "bytes") is None or k is None else False),
        ("HAVING NOT SUM(bytes) > 2000", lambda k, m: not_(gt(_sum(m, "bytes"), 2000))),
        ("HAVING MAX(port) >= 443 AND src IS NOT NULL",  # a hidden aggregate
         lambda k, m: (lambda v: None if v is None else v >= 443 and k is not None)(
             max([x["port"] for x in m if x["port"] is not None], default=None))),
        ("HAVING total IS NULL OR (n <= 5 AND NOT src IN ('b'))",
         lambda k, m: True if _sum(m, "bytes") is None or (len(m) <= 5 and k is not None and k != "b")
         else None if k is None and len(m) <= 5 else False),
    ]
    for clause, pred in cases:
        text = f"SELECT src, COUNT(*) AS n, SUM(bytes) AS total FROM s GROUP BY src {clause}"
        for access in (None, "window"):
            a = run_plan(plan_query(parse_query(text), s, access))
            assert a.rows == expect(pred), text


def test_having_before_order_by_and_limit_and_with_several_keys():
    s, rows = _keys_stream(5)
    groups = _groups(rows, ["src", "dst"])
    kept = [k for k in _sorted_keys(groups) if len(groups[k]) < 4]
    kept.sort(key=lambda k: len(groups[k]), reverse=True)
    text = "SELECT src, dst, COUNT(*) FROM s GROUP BY src, dst HAVING COUNT(*) < 4 ORDER BY 3 DESC LIMIT 2"
    assert run_plan(plan_query(parse_query(text), s)).rows == [(*k, len(groups[k])) for k in kept[:2]]
    # the groups pruned before a LIMIT would be wrong here: only the filter decides
    many = Stream("m", {"ts": "int64", "k": "int64"}, WindowSpec(subwindows=1, subwindow_ms=10, clock="manual"), 0)
    many.append({"ts": [0] * 60, "k": [i for i in range(20) for _ in range(i % 5 + 1)][:60]})
    many.window.slide(10)
    a = run_plan(plan_query(parse_query("SELECT k, COUNT(*) FROM m GROUP BY k HAVING COUNT(*) < 2 "
                                        "ORDER BY 2 DESC LIMIT 2"), many))
    assert a.rows == [(0, 1), (5, 1)]


def test_having_without_group_by_keeps_or_drops_the_one_row():
    s, rows = _keys_stream(2)
    for access in (None, "window"):
        assert run_plan(plan_query(parse_query("SELECT COUNT(*) FROM s HAVING COUNT(*) > 100000"), s, access)).rows == []
        assert run_plan(plan_query(parse_query("SELECT COUNT(*) FROM s HAVING COUNT(*) >= 0"), s, access)).rows == \
            [(len(rows),)]


def test_having_keeps_the_synopsis_paths():
    s, _ = _keys_stream(1, declared=("src",))
    assert plan_query(parse_query("SELECT src, COUNT(*) FROM s GROUP BY src HAVING COUNT(*) > 2"), s).access == "probe"
    assert plan_query(parse_query("SELECT src, COUNT(*) FROM s GROUP BY src HAVING SUM(f) > 2"), s).access == "synopsis"
    assert plan_query(parse_query("SELECT COUNT(*) FROM s HAVING SUM(bytes) > 2"), s).access == "probe"


def test_having_compares_decimals_temporals_and_booleans_exactly():
    s, rows = _keys_stream(3)
    groups = _groups(rows, ["ok"])
    want = [(k[0], _sum(groups[k], "price")) for k in _sorted_keys(groups)
            if _sum(groups[k], "price") is not None and _sum(groups[k], "price") > Decimal("1.25")]
    assert run_plan(plan_query(parse_query("SELECT ok, SUM(price) FROM s GROUP BY ok HAVING SUM(price) > 1.25"),
                               s)).rows == want
    a = run_plan(plan_query(parse_query("SELECT ok, COUNT(*) FROM s GROUP BY ok HAVING ok = TRUE"), s))
    assert a.rows == [(True, len(groups[(True,)]))]
    a = run_plan(plan_query(parse_query("SELECT day, COUNT(*) FROM s GROUP BY day HAVING day < DATE '1970-01-01'"), s))
    assert [r[0] for r in a.rows] == [-3]


@pytest.mark.parametrize("text, pos, token, msg", [
    ("SELECT src, COUNT(*) FROM s GROUP BY src HAVING bytes > 1", 48, "bytes", "must be a GROUP BY column, or be aggregated"),
    ("SELECT src, COUNT(*) FROM s GROUP BY src HAVING nope > 1", 48, "nope", "names no select item or column"),
    ("SELECT src, COUNT(*) FROM s GROUP BY src HAVING src > 1", 48, "src", "'src' is string; cannot compare"),
    ("SELECT src, COUNT(*) FROM s GROUP BY src HAVING COUNT(*) = 'a'", 48, "COUNT", "is int64; cannot compare"),
    ("SELECT src, COUNT(*) FROM s GROUP BY src HAVING SUM(src) > 1", 48, "SUM", "numeric"),
    ("SELECT src FROM s HAVING src = 'a'", 25, "src", "HAVING needs an aggregate or GROUP BY"),
])
def test_having_errors_name_their_place(text, pos, token, msg):
    s, _ = _keys_stream(0)
    with pytest.raises(QueryError, match=msg) as err:
        plan_query(parse_query(text), s)
    assert (err.value.position, err.value.token) == (pos, token), str(err.value)


def test_having_round_trips_through_text_and_is_refused_where_it_has_no_place():
    for text in ("SELECT src, COUNT(*) AS n FROM s GROUP BY src HAVING n > 2 AND (SUM(bytes) < 1e3 OR NOT src IN ('a'))",
                 "SELECT COUNT(*) FROM s HAVING MAX(x) IS NULL OR MAX(x) <> 2.5"):
        q = parse_query(text)
        assert parse_query(to_text(q)) == q
    err = _refusal("SELECT COUNT(*) FROM s a JOIN t b ON a.k = b.k GROUP BY a.k HAVING COUNT(*) > 1")
    assert err.reason == "HAVING is not available for joins"
    # an outer query with its own clauses is a query with expressions now (tests/test_sql_expr.py)
    q = parse_statement("SELECT SUM(n) FROM (SELECT k, COUNT(*) AS n FROM s GROUP BY k) HAVING SUM(n) > 1")
    assert q.expr is not None and q.expr.inner is not None and q.expr.having is not None


# -- SELECT DISTINCT -----------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(3))
def test_select_distinct_is_the_group_by_of_its_columns(seed):
    s, rows = _keys_stream(seed, declared=("src",))
    for cols in (["src"], ["dst", "src"], ["ok", "port", "day"], ["price"]):
        text = f"SELECT DISTINCT {', '.join(cols)} FROM s"
        want = [k for k in _sorted_keys(_groups(rows, cols))]
        for access in (None, "window"):
            a = run_plan(plan_query(parse_query(text), s, access))
            assert a.rows == want, text
            assert a.columns == cols
        desc = run_plan(plan_query(parse_query(text + f" ORDER BY {cols[-1]} DESC LIMIT 2"), s)).rows
        want.sort(key=lambda k: (k[-1] is not None, k[-1] if k[-1] is not None else 0), reverse=True)
        assert desc == want[:2]
    assert plan_query(parse_query("SELECT DISTINCT src FROM s"), s).access == "probe"  # running per-key totals
    assert plan_query(parse_query("SELECT DISTINCT src FROM s WHERE port > 80"), s).access == "window"
    a = run_plan(plan_query(parse_query("SELECT COUNT(*) FROM (SELECT DISTINCT src, dst FROM s)"), s))
    assert a.rows == [(len(_groups(rows, ["src", "dst"])),)]


def test_select_distinct_after_slides_drops_keys_that_left_the_window():
    s = Stream("d", {"ts": "int64", "k": "string"}, WindowSpec(subwindows=2, subwindow_ms=10, clock="manual",
                                                              group_by=("k",)), 0)
    for i, keys in enumerate([["a", "b"], ["b"], ["c"], []]):
        if keys:
            s.append({"ts": [i * 10] * len(keys), "k": keys})
        s.window.slide((i + 1) * 10)
    for access in (None, "synopsis", "window"):
        assert run_plan(plan_query(parse_query("SELECT DISTINCT k FROM d"), s, access)).rows == [("c",)]


@pytest.mark.parametrize("text, pos, token, msg", [
    ("SELECT DISTINCT src, COUNT(*) FROM s", 21, "COUNT", "SELECT DISTINCT with an aggregate is not supported"),
    ("SELECT DISTINCT src FROM s GROUP BY src", 36, "src", "SELECT DISTINCT with GROUP BY is not supported"),
    ("SELECT DISTINCT src FROM s HAVING src = 'a'", 34, "src", "SELECT DISTINCT with HAVING is not supported"),
    ("SELECT DISTINCT src FROM s ORDER BY COUNT(*)", 36, "COUNT", "orders by its selected columns"),
    ("SELECT DISTINCT src, f FROM s", 21, "f", "float64 column 'f' is not supported"),
    ("SELECT DISTINCT src, nope FROM s", 21, "nope", "unknown column 'nope'"),
])
def test_select_distinct_errors_name_their_place(text, pos, token, msg):
    s, _ = _keys_stream(0)
    with pytest.raises(QueryError, match=msg) as err:
        plan_query(parse_query(text), s)
    assert (err.value.position, err.value.token) == (pos, token), str(err.value)


def test_select_distinct_round_trips_through_text():
    q = parse_query('SELECT DISTINCT src, "order" FROM s WHERE port > 1 ORDER BY 2 DESC LIMIT 3')
    assert q.distinct and parse_query(to_text(q)) == q
    assert not parse_query("SELECT src FROM s").distinct


def test_having_and_distinct_in_the_structured_form():
    for text in ("SELECT src, COUNT(*) AS n FROM s GROUP BY src, dst HAVING n > 2 AND (SUM(bytes) < 1e3 OR "
                 "NOT src IN ('a', 'b')) AND MAX(port) IS NOT NULL ORDER BY 2 LIMIT 3",
                 "SELECT DISTINCT src, dst FROM s WHERE port = 22 ORDER BY dst DESC"):
        q = parse_query(text)
        msg = query_to_pb(q)
        assert query_from_pb(msg) == q
    s, rows = _keys_stream(4)
    msg = query_to_pb(parse_query("SELECT src, COUNT(*) FROM s GROUP BY src HAVING COUNT(*) >= 1 AND src = 'a'"))
    msg.having.all_of.parts[1].test.values[0].int64_value = 3
    with pytest.raises(QueryError, match="'src' is string; cannot compare it with 3") as err:
        plan_query(query_from_pb(msg), s)
    assert err.value.field == "having.all_of.parts[1].test.name"
    msg.having.all_of.parts[1].test.op = "~"
    with pytest.raises(QueryError, match="unknown comparison") as err:
        query_from_pb(msg)
    assert err.value.field == "having.all_of.parts[1].test.op"
    del msg.having.all_of.parts[1:]
    with pytest.raises(QueryError, match="two or more") as err:
        query_from_pb(msg)
    assert err.value.field == "having.all_of.parts"
    join = query_to_pb(parse_statement("SELECT COUNT(*) FROM s a JOIN t b ON a.k = b.k"))
    join.distinct = True
    with pytest.raises(QueryError, match="SELECT DISTINCT is not available for joins"):
        query_from_pb(join)
    err = _refusal("SELECT DISTINCT a.k FROM s a JOIN t b ON a.k = b.k")
    assert (err.reason, err.token) == ("SELECT DISTINCT is not available for joins", "DISTINCT")


def test_the_spark_reader_maps_each_group_key_item_to_its_own_column():
    """A Spark filter on a key's output column goes into WHERE on that key's column; the event-time
    key comes as a TIMESTAMP wherever it stands in GROUP BY."""
    pytest.importorskip("pyspark")
    from windowstore.clients import Client
    from windowstore.clients.spark.layout import _answer_layout
    from windowstore.server.process import ServerProcess

    with ServerProcess() as server, Client(server.target) as ws:
        ws.create_stream("p", {"ts": "int64", "src": "string", "port": "int64"}, subwindows=2, subwindow_ms=1000,
                         clock="manual")
        for text in ("SELECT src, port, COUNT(*) FROM p GROUP BY src, port", "SELECT DISTINCT src, port FROM p"):
            layout = _answer_layout({"target": server.target, "query": text})
            assert layout.pushable == {"src": ("src", "string"), "port": ("port", "int64")}, text
        layout = _answer_layout({"target": server.target, "event_time_as_timestamp": "true",
                                 "query": "SELECT src, ts, COUNT(*) FROM p GROUP BY src, ts"})
        assert [t for _, t in layout.columns][:2] == ["STRING", "TIMESTAMP"]
