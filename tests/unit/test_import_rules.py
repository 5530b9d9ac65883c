"""The rules of the house for imports (docs/architecture.md), checked on the source with ``ast``.

- the shared core (top-level modules, ``schema``, ``models``) imports no wing: not
  ``kubewire.server``, ``kubewire.storage`` or ``kubewire.client``;
- the client imports neither the server nor storage;
- no module imports another module's private (``_x``) name;
- module-level imports (``if TYPE_CHECKING:`` blocks aside) form no cycle.

Imports inside functions count for the first three rules: a lazy import is still a dependency.
Each failure names the importing module, its line and what it imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "kubewire"
WINGS = ("kubewire.server", "kubewire.storage", "kubewire.client")
# Top-level modules that only the server uses today. Issue 13's move takes them out of the top
# level into the server's rooms; until then they are exempt from the core rule by name.
SERVER_ONLY_TOP_LEVEL = frozenset({
    "kubewire.apps_validation", "kubewire.config_validation", "kubewire.conversions",
    "kubewire.discovery_validation", "kubewire.event_conversion", "kubewire.event_validation",
    "kubewire.go_print", "kubewire.kind_validation", "kubewire.lease_validation",
    "kubewire.networking_validation", "kubewire.node_validation", "kubewire.pod_validation",
    "kubewire.service_validation", "kubewire.validation",
})
# Not core: the command line wires every wing together; the package re-exports the client.
ENTRY_POINTS = frozenset({"kubewire", "kubewire.cli"})


@dataclass(frozen=True)
class Import:
    """One imported name: ``target`` is the module, ``name`` what was taken from it (if any)."""

    module: str
    line: int
    target: str
    name: str | None
    when: str  # "import" (runs on import), "typing" (``if TYPE_CHECKING:``), "call" (lazy)

    def __str__(self) -> str:
        what = f"{self.target}.{self.name}" if self.name else self.target
        return f"{self.module}:{self.line} imports {what}"


def module_name(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_modules(src: Path = SRC) -> dict[str, Path]:
    return {module_name(path, src): path for path in sorted((src / PACKAGE).rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


_DEFERRED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)  # bodies run later, if ever


def _walk(node: ast.AST, when: str) -> Iterator[tuple[ast.AST, str]]:
    """Every import node under ``node``, with when it runs (see ``Import.when``)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, when
        elif isinstance(child, _DEFERRED):
            yield from _walk(child, "call")
        elif isinstance(child, ast.If) and _is_type_checking(child) and when == "import":
            yield from _walk(child, "typing")
        else:
            yield from _walk(child, when)


def imports_of(module: str, path: Path, modules: set[str]) -> list[Import]:
    """The kubewire imports of one module; ``from pkg import sub`` counts as importing ``sub``."""
    found: list[Import] = []
    for node, when in _walk(ast.parse(path.read_text(), str(path)), "import"):
        if isinstance(node, ast.Import):
            found += [Import(module, node.lineno, alias.name, None, when)
                      for alias in node.names if alias.name.split(".")[0] == PACKAGE]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                if submodule in modules:
                    found.append(Import(module, node.lineno, submodule, None, when))
                else:
                    found.append(Import(module, node.lineno, node.module, alias.name, when))
    return found


def all_imports(src: Path = SRC) -> list[Import]:
    modules = source_modules(src)
    names = set(modules)
    return [found for module, path in modules.items()
            for found in imports_of(module, path, names)]


def _in(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)


def is_core(module: str) -> bool:
    return (not _in(module, WINGS) and module not in SERVER_ONLY_TOP_LEVEL
            and module not in ENTRY_POINTS)


def core_importing_wings(found: list[Import]) -> list[Import]:
    return [i for i in found if is_core(i.module) and _in(i.target, WINGS)]


def client_importing_server(found: list[Import]) -> list[Import]:
    return [i for i in found if _in(i.module, ("kubewire.client",))
            and _in(i.target, ("kubewire.server", "kubewire.storage"))]


def private_names(found: list[Import]) -> list[Import]:
    """``from kubewire.x import _y`` (or ``import kubewire._x``) from another module."""
    return [i for i in found if i.target != i.module and (
        (i.name is not None and i.name.startswith("_") and not i.name.startswith("__"))
        or any(part.startswith("_") and part != "__init__" for part in i.target.split(".")))]


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def import_cycles(found: list[Import], kinds: tuple[str, ...] = ("import",)) -> list[list[str]]:
    """The modules of each cycle among imports of ``kinds`` (each set of modules that reach one
    another), sorted; a graph of ~150 modules needs no cleverer algorithm."""
    graph: dict[str, set[str]] = {}
    for i in found:
        if i.when in kinds and i.target != i.module:
            graph.setdefault(i.module, set()).add(i.target)
    reach = {module: _reachable(graph, module) for module in graph}
    cycles = {tuple(sorted({module} | {other for other in reach[module]
                                       if module in reach.get(other, set())}))
              for module in graph if module in reach[module]}
    return sorted(list(cycle) for cycle in cycles)


@pytest.fixture(scope="module")
def found() -> list[Import]:
    return all_imports()


def test_the_core_imports_no_wing(found: list[Import]) -> None:
    assert [str(i) for i in core_importing_wings(found)] == []


def test_the_client_imports_neither_server_nor_storage(found: list[Import]) -> None:
    assert [str(i) for i in client_importing_server(found)] == []


def test_no_private_name_crosses_a_module_border(found: list[Import]) -> None:
    assert [str(i) for i in private_names(found)] == []


def test_module_level_imports_form_no_cycle(found: list[Import]) -> None:
    assert import_cycles(found) == []


def test_type_only_imports_close_no_cycle_either(found: list[Import]) -> None:
    """A cycle hidden behind ``TYPE_CHECKING`` is still two modules that need each other (the
    watch cache and its watchers used to be one): a small Protocol breaks it."""
    assert import_cycles(found, ("import", "typing")) == []


def test_the_server_only_exemptions_name_real_modules() -> None:
    """An exemption for a module that moved or vanished would hide nothing; drop it instead."""
    assert sorted(SERVER_ONLY_TOP_LEVEL - set(source_modules())) == []


# --- the checker itself, on a small tree written for the purpose ------------------------------

def _tree(tmp_path: Path, files: dict[str, str]) -> list[Import]:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return all_imports(tmp_path)


def test_the_checker_finds_each_kind_of_breach(tmp_path: Path) -> None:
    found = _tree(tmp_path, {
        "kubewire/__init__.py": "",
        "kubewire/status.py": "from kubewire.server.app import serve\n",
        "kubewire/names.py": ("from typing import TYPE_CHECKING\n"
                              "if TYPE_CHECKING:\n    from kubewire.client.api import Api\n"),
        "kubewire/server/__init__.py": "",
        "kubewire/server/app.py": "from kubewire.server.patch import _decode_body\n",
        "kubewire/server/patch.py": "import kubewire.server.app\n",
        "kubewire/client/__init__.py": "",
        "kubewire/client/api.py": "def f() -> None:\n    from kubewire.storage import base\n",
        "kubewire/storage/__init__.py": "",
        "kubewire/storage/base.py": "",
    })
    assert [str(i) for i in core_importing_wings(found)] == [
        "kubewire.names:3 imports kubewire.client.api.Api",
        "kubewire.status:1 imports kubewire.server.app.serve"]
    assert [str(i) for i in client_importing_server(found)] == [
        "kubewire.client.api:2 imports kubewire.storage.base"]
    assert [str(i) for i in private_names(found)] == [
        "kubewire.server.app:1 imports kubewire.server.patch._decode_body"]
    assert import_cycles(found) == [["kubewire.server.app", "kubewire.server.patch"]]


def test_type_checking_imports_make_no_cycle(tmp_path: Path) -> None:
    found = _tree(tmp_path, {
        "kubewire/__init__.py": "",
        "kubewire/a.py": "import kubewire.b\n",
        "kubewire/b.py": "import typing\nif typing.TYPE_CHECKING:\n    import kubewire.a\n",
    })
    assert import_cycles(found) == []
    assert import_cycles(found, ("import", "typing")) == [["kubewire.a", "kubewire.b"]]
