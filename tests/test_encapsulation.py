"""The server's modules talk to each other through public names: none reads another object's
private attribute or calls its `_private` method (`x._y` where x is not `self` or `cls`), so a
module's private state can change without breaking another (the driver's modules, the service,
the log)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def private_reaches(source: str) -> list[tuple[int, str]]:
    """(line, expression) of each `x._y` in `source` where x is not self or cls (dunders allowed)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            out.append((node.lineno, ast.unparse(node)))
    return out


def test_the_check_finds_a_reach_into_another_objects_private_fields():
    assert private_reaches("def f(self, sched):\n    sched._due_slide()\n    self.engine._check()\n") == [
        (2, "sched._due_slide"), (3, "self.engine._check")]
    assert private_reaches("class A:\n    def f(self):\n        return self._x, cls._y, type(self).__name__\n") == []


def test_no_server_module_reads_another_objects_private_fields():
    found = [f"{path.relative_to(ROOT)}:{line}: {expr}"
             for path in sorted((ROOT / "server").rglob("*.py"))
             for line, expr in private_reaches(path.read_text(encoding="utf-8"))]
    assert found == []
