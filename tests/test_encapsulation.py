"""Modules talk to each other through public names, so a module's private state can change
without breaking another. The server's modules never read another object's private attribute or
call its `_private` method (`x._y` where x is not `self` or `cls`: the driver's modules, the
service, the log); the modules of store/, txn/ and clients/ never reach a private name another
module defines (ALLOWED lists the exceptions, each with its reason)."""
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


# The core and client packages (store/, txn/, clients/) hold to the same across modules: a module
# may reach a private name of another object only where it defines that name itself (a class
# comparing or recursing into another instance of itself, a mixin's part of one class), through
# super(), or where the name is in ALLOWED, each with its reason.
ALLOWED = {
    "_check": "the invariants hook of every stateful class (it asserts and changes nothing): an owner's _check "
              "calls its parts' (the engine the scheduler's and each window's, the scheduler its policy's, "
              "sources', tasks', counters'), and the property tests call them after every step",
}


def defined_private_names(tree: ast.AST) -> set[str]:
    """The private names a module defines: its functions, methods and classes, names assigned at
    module or class level (dataclass fields too), names in __slots__, and attributes it assigns on
    self or cls."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name)
              and node.value.id in ("self", "cls")):
            names.add(node.attr)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets):
            names |= {c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def cross_module_reaches(source: str) -> list[tuple[int, str]]:
    """(line, expression) of each `x._y` in `source` where x is not self, cls or super(), the
    module does not define `_y` itself, and `_y` is not in ALLOWED."""
    tree = ast.parse(source)
    own = defined_private_names(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            base = node.value
            if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                continue
            if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super":
                continue
            if node.attr in own or node.attr in ALLOWED:
                continue
            out.append((node.lineno, ast.unparse(node)))
    return sorted(out)


def test_the_cross_module_check_finds_a_reach_into_another_modules_private_names():
    assert cross_module_reaches("def f(engine, sched):\n    engine._emit(1)\n    sched._tasks_changed = True\n"
                                "    return self.engine._out, engine.sched._count\n") == [
        (2, "engine._emit"), (3, "sched._tasks_changed"), (4, "engine.sched._count"), (4, "self.engine._out")]
    own = ("class Node:\n    __slots__ = ('_kids',)\n\n    def _values(self):\n        return [k._values() for k in self._kids]\n\n"
           "    def same(self, other):\n        return other._kids == self._kids and other._n == 0\n\n"
           "    def size(self):\n        self._n = 1\n        return super()._size() + 1\n")
    assert cross_module_reaches(own) == []  # its own names on another instance of itself, and super()'s
    assert cross_module_reaches("def check(engine):\n    engine.sched._check()\n") == []  # ALLOWED
    assert cross_module_reaches("import m\nm._helper()\n_helper = 1\n") == []  # a name it defines itself
    assert cross_module_reaches("import m\nm._helper()\n") == [(2, "m._helper")]


def test_no_store_txn_or_clients_module_reaches_into_another_modules_private_names():
    found = [f"{path.relative_to(ROOT)}:{line}: {expr}"
             for package in ("store", "txn", "clients")
             for path in sorted((ROOT / package).rglob("*.py"))
             for line, expr in cross_module_reaches(path.read_text(encoding="utf-8"))]
    assert found == []


def test_every_allowed_private_name_is_still_reached_across_modules():
    """An exception that nothing needs any more goes from ALLOWED."""
    reached = {node.attr
               for package in ("store", "txn", "clients")
               for path in sorted((ROOT / package).rglob("*.py"))
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, ast.Attribute) and not (isinstance(node.value, ast.Name)
                                                           and node.value.id in ("self", "cls"))}
    assert set(ALLOWED) <= reached, set(ALLOWED) - reached
