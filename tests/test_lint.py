"""The linter's checks (pyproject.toml [tool.ruff]) hold over the whole repository: unused and
undefined names, statement and syntax errors, mutable default arguments. The type checker
(pyproject.toml [tool.mypy]) finds nothing in the core packages. CI runs both with the tests."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The packages mypy checks, by their installed names, and the directory each is installed from
# (pyproject.toml [tool.setuptools.package-dir]); windowstore.v1 is there for the imports it answers.
TYPED = {"store": "store", "txn": "txn", "server": "server", "clients": "clients"}
IMPORTED = {"v1": "proto/windowstore/v1"}


def test_ruff_finds_nothing():
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", str(ROOT)],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-2000:]


def mypy_tree() -> Path:
    """A windowstore/ directory of symlinks to the package directories: mypy cannot follow the
    editable install's import hook, and the directories are not named as the packages are. It sits
    in mypy's cache directory (untracked) at a fixed path, so reruns use the cache."""
    base = ROOT / ".mypy_cache" / "tree"
    pkg = base / "windowstore"
    pkg.mkdir(parents=True, exist_ok=True)
    for name, src in {**TYPED, **IMPORTED}.items():
        link = pkg / name
        if not (link.is_symlink() and link.resolve() == (ROOT / src).resolve()):
            link.unlink(missing_ok=True)
            link.symlink_to(ROOT / src, target_is_directory=True)
    return base


def test_mypy_finds_nothing():
    base = mypy_tree()
    cmd = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "--no-error-summary"]
    for name in TYPED:
        cmd += ["-p", f"windowstore.{name}"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600,
                         env={**os.environ, "MYPYPATH": str(base)})
    assert out.returncode == 0 and not out.stdout.strip(), out.stdout[-8000:] + out.stderr[-2000:]


def test_every_package_directory_is_in_the_wheel():
    """A package directory missing from pyproject's list works in this tree (editable) and fails
    only once installed from the wheel: every folder with an __init__.py is listed."""
    import tomllib

    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setup["packages"])
    found = set()
    for name, src in setup["package-dir"].items():
        for init in (ROOT / src).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / src)
            if "node_modules" not in rel.parts:
                found.add(".".join((name, *rel.parts)))
    assert found - listed == set(), f"add to [tool.setuptools] packages: {sorted(found - listed)}"
