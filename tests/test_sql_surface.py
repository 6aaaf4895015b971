"""The SQL a user writes beyond the first query shapes (issue 32): what is refused says what is not
supported, where, and in words a newcomer can act on; never a misleading "expected FROM"."""
from __future__ import annotations

import pytest

from windowstore.store import QuerySyntaxError, parse_query
from windowstore.store.parser import parse_statement


def _refusal(text: str) -> QuerySyntaxError:
    with pytest.raises(QuerySyntaxError) as err:
        parse_statement(text)
    return err.value


@pytest.mark.parametrize("text, pos, token, reason", [
    # unknown functions, wherever a function can be written
    ("SELECT foo(x) FROM s", 7, "foo", "unknown function 'foo'"),
    ("SELECT src, stddev(bytes) FROM packets GROUP BY src", 12, "stddev", "unknown function 'stddev'"),
    ("SELECT COUNT(*) FROM s WHERE lower(k) = 'a'", 29, "lower", "unknown function 'lower'"),
    ("SELECT k, COUNT(*) FROM s GROUP BY k ORDER BY abs(k)", 46, "abs", "unknown function 'abs'"),
    # clauses and constructs not supported yet
    ("SELECT k, COUNT(*) FROM s GROUP BY k HAVING COUNT(*) > 1000", 37, "HAVING", "HAVING is not supported"),
    ("SELECT COUNT(*) FROM s HAVING COUNT(*) > 1", 23, "HAVING", "HAVING is not supported"),
    ("SELECT DISTINCT src FROM s", 7, "DISTINCT", "SELECT DISTINCT is not supported"),
    ("SELECT COUNT(*) FROM s LIMIT 3 OFFSET 2", 31, "OFFSET", "OFFSET is not supported"),
    ("SELECT src, dst, SUM(bytes) FROM s GROUP BY src, dst", 47, ",", "GROUP BY takes one column"),
    ("SELECT src, SUM(bytes) * 8 / 60 AS bps FROM s GROUP BY src", 23, "*", "expressions are not supported"),
    ("SELECT SUM(bytes) / COUNT(*) FROM s", 18, "/", "expressions are not supported"),
    ("SELECT SUM(bytes) -1 FROM s", 18, "-1", "expressions are not supported"),
    ("SELECT (bytes) FROM s", 7, "(", "expressions are not supported"),
    ("SELECT CASE WHEN port < 1024 THEN 'system' ELSE 'user' END FROM s", 7, "CASE", "CASE is not supported"),
    ("SELECT COUNT(*) FROM s WHERE bytes * 8 > 1e4", 35, "*", "expressions are not supported"),
    ("SELECT COUNT(*) FROM s WHERE bytes + 1 > 2", 35, "+", "expressions are not supported"),
    ("SELECT COUNT(*) FROM s WHERE 5 < x", 29, "5", "expected a column"),
    ("SELECT k, COUNT(*) FROM s GROUP BY k ORDER BY COUNT(*) * 2", 55, "*", "expressions are not supported"),
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

