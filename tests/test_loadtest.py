"""The load-test smoke run that CI executes: locust against a real server under ttu, bounded in
time, no request failing, and the server's history checked for latest-window serializability. The
latency goals (query and staleness p95) are judged by `make loadtest`, not here: they depend on the
machine's load (--no-timing-goals)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.long  # (~20 s: make test-long; `make loadtest` runs the full load with its goals)
def test_smoke_load_run_has_no_errors_and_is_lws(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "loadtest" / "run.py"), "--policy", "ttu", "--duration-s", "15",
                           "--users", "16", "--no-timing-goals", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (result,) = json.loads((tmp_path / "results.json").read_text())
    assert result["queries"] > 0 and result["error_ratio"] == 0.0 and result["problems"] == []
    h = result["history"]
    assert h["committed"] > 0 and h["lws"] == h["committed"] and h["errors"] == 0
    assert (tmp_path / "report.md").exists() and (tmp_path / "staleness.png").stat().st_size > 0


@pytest.mark.slow
@pytest.mark.long  # make test-long (TLS and tokens themselves: tests/test_security.py in make test)
def test_smoke_load_run_over_mutual_tls_with_tokens(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "loadtest" / "run.py"), "--policy", "ttu", "--duration-s", "10",
                           "--users", "8", "--secure", "--no-plots", "--no-timing-goals", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (result,) = json.loads((tmp_path / "results.json").read_text())
    assert result["secure"] and result["queries"] > 0 and result["error_ratio"] == 0.0
    assert result["history"]["lws"] == result["history"]["committed"] > 0
