"""The linter's checks (pyproject.toml [tool.ruff]) hold over the whole repository: unused and
undefined names, statement and syntax errors, mutable default arguments. CI runs it with the tests."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing():
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", str(ROOT)],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-2000:]
