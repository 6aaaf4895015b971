"""local_session's start: a JVM that exits before its gateway is up is started once more."""
import pytest

pytest.importorskip("pyspark")
from pyspark.errors import PySparkRuntimeError  # noqa: E402

from windowstore.clients.spark.source import get_or_create  # noqa: E402


class Builder:
    """Fails with the given conditions, in order, then returns a session."""

    def __init__(self, *conditions: str, **params: str):
        self.conditions, self.params, self.calls = list(conditions), params, 0

    def getOrCreate(self):
        self.calls += 1
        if self.conditions:
            raise PySparkRuntimeError(errorClass=self.conditions.pop(0), messageParameters=self.params)
        return "session"


def exited() -> str:
    return "JAVA_GATEWAY_EXITED"


def test_a_gateway_that_exited_once_is_started_again():
    b = Builder(exited())
    assert get_or_create(b) == "session"
    assert b.calls == 2


def test_a_gateway_that_exits_every_time_fails_after_the_attempts():
    b = Builder(exited(), exited(), exited())
    with pytest.raises(PySparkRuntimeError) as e:
        get_or_create(b, attempts=2)
    assert e.value.getCondition() == "JAVA_GATEWAY_EXITED"
    assert b.calls == 2


def test_another_failure_is_not_retried():
    b = Builder("JVM_ATTRIBUTE_NOT_SUPPORTED", attr_name="sparkContext")
    with pytest.raises(PySparkRuntimeError) as e:
        get_or_create(b)
    assert e.value.getCondition() == "JVM_ATTRIBUTE_NOT_SUPPORTED"
    assert b.calls == 1
