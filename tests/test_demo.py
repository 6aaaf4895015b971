"""`make demo` (`windowstore demo`), the newcomer's first command, run end to end as they run it:
a real server, the Spark feeder (a local JVM) and the periodic and one-time queries, for a few
seconds of answers; it must show answers fed by Spark and stop everything it started."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

pytest.importorskip("pyspark")

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_the_demo_shows_answers_fed_by_spark_and_stops_cleanly():
    proc = subprocess.run([sys.executable, "-m", "windowstore.server.cli", "demo", "--duration-s", "8",
                           "--rows-per-second", "2000"], capture_output=True, text=True, timeout=600)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert "data is flowing at 2,000 rows/s" in out
    assert "the feeder stopped early" not in out
    # the live view: each periodic query's newest answer, with its slide
    assert re.search(r"top talkers \(10 s, every 1 s\)\s+slide\s+\d+", out), out[-3000:]
    # and a one-time query's answer with its response time and access path
    assert re.search(r"one-time: SELECT .*\n    -> .*response [0-9.]+ ms, staleness .*access: \w+", out), out[-3000:]
    accepted = int(re.search(r"rows accepted (\d+)", out).group(1))
    slides = int(re.search(r"slides (\d+)", out).group(1))
    assert accepted > 0 and slides > 0, out[-2000:]
    assert "server stopped (exit 0)" in out
