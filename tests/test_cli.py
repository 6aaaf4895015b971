"""The client commands' --timeout is a deadline for the whole command, through the real CLI against a
real server on 127.0.0.1 (or a listener that never answers): each command ends by itself."""
from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from conftest import wait_for
from windowstore.clients import Client
from windowstore.server.process import ServerProcess

pytestmark = pytest.mark.slow  # servers in subprocesses, or long property runs: make test-fast skips them

SCHEMA = {"ts": "int64", "v": "int64"}
SAFETY_NET_S = 120  # far beyond every --timeout here: hitting it means the command did not end by itself


def cli(*args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([sys.executable, "-m", "windowstore.server.cli", *args], capture_output=True,
                              text=True, timeout=SAFETY_NET_S)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"windowstore {' '.join(args)} was still running after {SAFETY_NET_S} s") from e


@pytest.fixture(scope="module")
def server():
    srv = ServerProcess()
    try:
        with Client(srv.target, timeout=30) as ws:
            # a processing-time stream slides every 100 ms by itself: its periodic query answers
            ws.create_stream("live", SCHEMA, subwindows=4, subwindow_ms=100)
            live = ws.register("SELECT COUNT(*) FROM live [SLIDE 100 ms]").id
            # a manual one never slides here: its periodic query never answers
            ws.create_stream("still", SCHEMA, subwindows=4, subwindow_ms=100, clock="manual")
            still = ws.register("SELECT COUNT(*) FROM still [SLIDE 100 ms]").id
        yield srv, live, still
    finally:
        srv.stop()


def test_subscribe_ends_at_its_timeout_with_the_answers_it_got(server):
    srv, live, _ = server
    out = cli("subscribe", "--target", srv.target, "--timeout", "3", live)
    assert out.returncode == 0, out
    got = out.stdout.count("-- answer ")
    assert got >= 1, out.stdout
    assert out.stderr.splitlines() == [f"-- subscription ended: --timeout 3 s reached after {got} answers"], out.stderr


def test_subscribe_without_an_answer_by_its_timeout_fails(server):
    srv, _, still = server
    out = cli("subscribe", "--target", srv.target, "--timeout", "2", still)
    assert out.returncode == 1, out
    assert out.stdout == ""
    assert out.stderr.splitlines() == ["error (DEADLINE_EXCEEDED): no answer within --timeout 2 s"], out.stderr


def test_subscribe_with_count_stops_before_its_timeout(server):
    srv, live, _ = server
    out = cli("subscribe", "--target", srv.target, "--timeout", "60", "--count", "2", live)
    assert out.returncode == 0 and out.stdout.count("-- answer ") == 2 and out.stderr == "", out


def test_subscribe_after_slide_prints_the_kept_answers_first(server):
    """A manual stream slides once after its query is registered, then never again: its kept
    answers are all a subscription can print, with --after-slide (without it, none would come)."""
    srv, _, _ = server
    with Client(srv.target, timeout=30) as ws:
        ws.create_stream("kept", SCHEMA, subwindows=4, subwindow_ms=100, clock="manual")
        q = ws.register("SELECT COUNT(*) FROM kept [SLIDE 1 SUBWINDOWS]").id
        ws.append("kept", {"ts": [0, 1], "v": [1, 2]})
        ws.slide("kept")
        wait_for(lambda: ws.read_answers(q)[0], "the slide's answer")
    out = cli("subscribe", "--target", srv.target, "--timeout", "60", "--count", "1", "--after-slide", "-1",
              "--output", "json", q)
    assert out.returncode == 0 and out.stdout.count('"slide": 0') == 1 and out.stderr == "", out


@pytest.fixture
def silent():
    """A loopback address that accepts connections and never says a word (no HTTP/2 handshake)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield f"127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize("command", [["query", "SELECT COUNT(*) FROM live"],
                                     ["register", "SELECT COUNT(*) FROM live [SLIDE 1 s]"],
                                     ["stats"], ["subscribe", "P1"]])
def test_every_client_command_is_bounded_by_its_timeout(silent, command):
    out = cli(*command, "--target", silent, "--timeout", "2")
    assert out.returncode == 1, out
    [line] = out.stderr.splitlines()
    assert line.startswith("error (DEADLINE_EXCEEDED)"), line


def test_the_help_says_what_timeout_means():
    for command in ("query", "register", "stats", "subscribe"):
        out = cli(command, "--help")
        assert out.returncode == 0
        assert "deadline in seconds for the whole" in " ".join(out.stdout.split()), out.stdout


def test_a_table_shows_a_double_as_it_is_and_bounds_without_float_noise():
    """The table output never rounds an answer (a DOUBLE prints as its shortest exact text), an
    integral bound prints as an integer, and a sketch answer (no guarantee applies) says only that
    it is approximate."""
    import io
    from types import SimpleNamespace

    from windowstore.server import cli_output

    assert cli_output.fmt_value(1971279 * 8 / 60) == "262837.2"
    assert (cli_output.fmt_value(True), cli_output.fmt_value(False), cli_output.fmt_value(None)) == ("true", "false", "null")
    assert float(cli_output.fmt_value(30049.066666666666)) == 30049.066666666666
    assert cli_output.fmt_number(1971279.0) == "1971279" and cli_output.fmt_number(2.0**60) == repr(2.0**60)
    bound = SimpleNamespace(row=0, column=1, rank_error=None, sketch="top-k lists", estimate=None, delta=212886.0,
                            lower=1971279.0, upper=1971279.0, confidence=1.0)
    a = SimpleNamespace(columns=["src", "sum(bytes)"], rows=[["x", 1971279]], slide=0, window_start_ms=None,
                        window_end_ms=None, staleness_ms=None, response_ms=1.0, restarts=0, policy="ttu",
                        access="synopsis", exact=False, guaranteed=None, bounds=[bound])
    out = io.StringIO()
    cli_output.answer(a, "table", out=out)
    text = out.getvalue()
    assert "true value in [1971279, 1971279], delta 212886 (" in text
    assert "; approximate)" in text and "guaranteed" not in text
