"""Every code example in README.md and docs/*.md runs, in page order, against a real server.

Each page gets a fresh `windowstore serve --in-memory` on a free loopback port. The examples are
written for the default address 127.0.0.1:50051; the test puts the server's address in its place.

- ```python blocks run in one namespace per page, in order (a later block may use an earlier one's
  names). A block that uses Spark is marked by the comment `<!-- docs-test: spark -->` on the line
  before its fence: the page's Spark run (marked `spark`) runs every block of the page, the plain
  run every block but those.
- ```sql blocks run as queries through the SDK after the page's blocks before them: a periodic
  query (SLIDE in its window) is registered (so the server binds it) and unregistered; any other
  runs once.
- ```console blocks marked `<!-- docs-test: run -->` run each `$ windowstore ...` line and must
  exit 0.

A failing example fails the test naming the file and the line of its fence.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

from windowstore.server.process import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DEFAULT_TARGET = "127.0.0.1:50051"
_FENCE = re.compile(r"^(\s*)(```+)\s*([A-Za-z0-9_+-]*)")
_MARK = re.compile(r"<!--\s*docs-test:\s*([a-z ,-]+?)\s*-->")


@dataclass
class Example:
    page: Path
    line: int          # 1-based line of the opening fence
    lang: str
    code: str
    marks: frozenset[str]

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def examples(page: Path) -> list[Example]:
    """The fenced blocks of a page that are examples: python, sql, and console blocks marked run."""
    out, lines, i = [], page.read_text().splitlines(), 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang, start = m.group(1), m.group(2), m.group(3).lower(), i
        body = []
        i += 1
        while i < len(lines) and lines[i].strip() != fence:
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        prev = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        mark = _MARK.search(prev)
        marks = frozenset(w.strip() for w in mark.group(1).replace(",", " ").split()) if mark else frozenset()
        if lang == "python" or lang == "sql" or (lang == "console" and "run" in marks):
            out.append(Example(page, start + 1, lang, "\n".join(body) + "\n", marks))
    return out


def test_the_extractor_finds_fences_marks_and_lines(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# t\n\n```python\nx = 1\n```\n\n<!-- docs-test: spark -->\n```python\ny = 2\n```\n"
                    "```console\n$ windowstore stats\n```\n<!-- docs-test: run -->\n```console\n$ ls\n```\n"
                    "```sql\nSELECT 1\n```\n```text\nnot code\n```\n")
    global ROOT
    root, ROOT = ROOT, tmp_path
    try:
        found = examples(page)
    finally:
        ROOT = root
    assert [(e.line, e.lang, e.code, sorted(e.marks)) for e in found] == [
        (3, "python", "x = 1\n", []), (8, "python", "y = 2\n", ["spark"]), (15, "console", "$ ls\n", ["run"]),
        (18, "sql", "SELECT 1\n", [])]


def _pages_with(pred) -> list:
    return [pytest.param(p, id=str(p.relative_to(ROOT))) for p in PAGES if any(pred(e) for e in examples(p))]


def _run_python(ex: Example, namespace: dict, target: str) -> None:
    code = ex.code.replace(DEFAULT_TARGET, target)
    exec(compile(code, ex.where, "exec"), namespace)


def _run_sql(ex: Example, target: str) -> None:
    from windowstore.clients import Client

    text = " ".join(ex.code.split())
    with Client(target, timeout=60) as ws:
        if re.search(r"\[[^\]]*\bSLIDE\b", text, re.IGNORECASE):  # periodic: the server binds it at registration
            ws.unregister(ws.register(text).id)
        else:
            ws.query(text)


def _run_console(ex: Example, target: str) -> None:
    exe = Path(sys.executable).parent / "windowstore"
    for line in ex.code.splitlines():
        if not line.startswith("$ "):
            continue
        argv = shlex.split(line[2:].replace(DEFAULT_TARGET, target))
        if Path(argv[0]).name == "windowstore":  # `windowstore` or `.venv/bin/windowstore`: this environment's
            argv[0] = str(exe)
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert r.returncode == 0, f"{line!r} exited {r.returncode}: {r.stdout}{r.stderr}"


def run_page(page: Path, with_spark: bool, times: int = 1) -> None:
    """Run the page's examples in order against a fresh server, `times` times over (each pass in a
    namespace of its own, on the same server)."""
    page_examples = examples(page)
    namespace: dict = {}
    with ServerProcess() as server:
        for ex in page_examples * times:
            if ex is page_examples[0]:  # a new pass
                namespace = {"__name__": "__docs_example__"}
            if "spark" in ex.marks and not with_spark:
                continue
            try:
                if ex.lang == "python":
                    _run_python(ex, namespace, server.target)
                elif ex.lang == "sql":
                    _run_sql(ex, server.target)
                else:
                    _run_console(ex, server.target)
            except BaseException as e:  # noqa: BLE001 - reported with the example's place
                if isinstance(e, KeyboardInterrupt):
                    raise
                pytest.fail(f"the example at {ex.where} failed:\n{ex.code}\n{traceback.format_exc()}", pytrace=False)
        spark = namespace.get("spark")
        if spark is not None and hasattr(spark, "stop"):
            spark.stop()


@pytest.mark.parametrize("page", _pages_with(lambda e: "spark" not in e.marks))
def test_examples_run(page):
    run_page(page, with_spark=False)


def test_the_readme_quickstart_can_be_run_again():
    """Pasting the README's examples a second time into the same server works too."""
    run_page(ROOT / "README.md", with_spark=False, times=2)


@pytest.mark.spark
@pytest.mark.parametrize("page", _pages_with(lambda e: "spark" in e.marks))
def test_spark_examples_run(page):
    run_page(page, with_spark=True)


def test_examples_are_found_in_the_pages_that_need_them():
    """The quickstart and the reference pages carry examples (a broken fence would hide them)."""
    by_page = {p.relative_to(ROOT).as_posix(): examples(p) for p in PAGES}
    for name in ("README.md", "docs/getting-started.md", "docs/query-language.md", "docs/spark.md"):
        assert by_page.get(name), f"no examples found in {name}"
    assert any("spark" in e.marks for e in by_page["README.md"])
    assert os.path.exists(ROOT / "mkdocs.yml")
