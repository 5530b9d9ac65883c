"""The rules of the house for imports (docs/architecture.md), checked on the source with ``ast``.

- the shared core (top-level modules, ``schema``, ``models``) imports no wing: not
  ``kubewire.server``, ``kubewire.storage`` or ``kubewire.client``;
- the client imports neither the server nor storage;
- no module imports another module's private (``_x``) name;
- module-level imports (``if TYPE_CHECKING:`` blocks aside) form no cycle;
- each room of the server imports only the rooms below it in the story of a request
  (``ROOMS``), so the folders keep telling that story;
- the pure rooms (``PURE``) reach no module that does I/O (asyncio, sockets, TLS, SQLite,
  threads, processes), however indirectly: they are decisions, testable without a loop.

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
WINGS = ("kubewire.server", "kubewire.storage", "kubewire.client", "kubewire.testing",
         "kubewire.cluster")
SHARED = frozenset({"core", "selectors", "schema", "models"})
# Each wing room and the rooms it may import besides itself and SHARED (docs/architecture.md
# draws the same table). A request meets the server's rooms roughly in this order.
ROOMS: dict[str, frozenset[str]] = {
    "storage": frozenset(),
    "client": frozenset(),
    # controllers, scheduler, simulated kubelets: clients of the API, never the server's insides
    "cluster": frozenset({"client"}),
    "server.wire": frozenset(),
    "server.request": frozenset({"server.wire"}),
    "server.allocation": frozenset({"storage"}),
    "server.context": frozenset({"server.wire", "server.allocation", "storage"}),
    "server.access": frozenset({"server.wire", "server.request", "server.context"}),
    "server.observe": frozenset({"server.wire", "server.request", "server.access",
                                 "server.context", "storage"}),
    "server.apiextensions": frozenset({"server.request"}),
    # conversion webhooks: HTTPS calls, and the objects and watch streams they convert
    "server.conversion": frozenset({"server.wire", "server.context", "server.apiextensions",
                                    "storage"}),
    "server.discovery": frozenset({"server.apiextensions"}),  # CRDs' OpenAPI documents
    "server.tables": frozenset({"server.wire", "server.request", "storage"}),
    "server.patch": frozenset({"server.wire", "server.request"}),
    "server.writes": frozenset({"server.wire", "server.request", "server.patch",
                                "server.apiextensions", "server.allocation", "server.context",
                                "server.access", "server.conversion", "storage"}),
    "server.reads": frozenset({"server.wire", "server.request", "server.tables",
                               "server.context", "server.conversion", "storage"}),
    # client: the public leader elector (client.leaderelection), driven through the server's
    # own write path
    # server.access: the token controller signs legacy tokens with the server's key
    "server.controllers": frozenset({"server.request", "server.writes", "server.context",
                                     "server.apiextensions", "server.access",
                                     "storage", "client", "cluster"}),
    "server.daemon": frozenset(),  # the server as a process: its lock, --detach, stop
    # faults on demand (requests, watch streams, the store) and the clock's admin endpoint
    "server.faults": frozenset({"server.wire", "server.request", "server.observe",
                                "server.context", "storage"}),
    # /kubewire/...: faults, the request record, reset, snapshots (for tests and operators)
    "server.admin": frozenset({"server.wire", "server.request", "server.access",
                               "server.observe", "server.context", "server.faults",
                               "storage"}),
    # the testing toolkit stands on top: the public Server, the pytest plugin, traces
    "testing": frozenset({"server.app", "server.wire", "server.request", "server.access",
                          "server.observe", "server.context", "server.admin",
                          "server.faults", "server.controllers", "server.daemon", "storage",
                          "client", "cluster"}),
}
# Where decisions live: no module here may reach I/O. Packages or single modules.
PURE = ("kubewire.selectors", "kubewire.schema", "kubewire.models", "kubewire.server.request",
        "kubewire.server.patch", "kubewire.server.discovery", "kubewire.server.tables.columns",
        "kubewire.server.allocation.rules", "kubewire.server.allocation.ranges",
        "kubewire.server.writes.validation", "kubewire.server.writes.lifecycle",
        "kubewire.server.writes.canonicalize", "kubewire.endpoints_subsets",
        "kubewire.server.writes.defaults", "kubewire.server.writes.scale",
        "kubewire.server.wire.http_messages", "kubewire.server.wire.http_parse",
        "kubewire.server.wire.encoding", "kubewire.server.wire.websocket",
        "kubewire.server.tables.output", "kubewire.server.controllers.namespace_conditions",
        "kubewire.server.controllers.selection",
        "kubewire.server.writes.admission", "kubewire.server.apiextensions",
        "kubewire.server.faults.rules", "kubewire.client.leaderelection.decision",
        "kubewire.rbac_rules", "kubewire.server.access.rbac_escalation",
        "kubewire.server.controllers.rbac_policy",
        "kubewire.server.controllers.csr_policy", "kubewire.server.writes.csr_strategy",
        "kubewire.client.leaderelection.record",
        "kubewire.cluster.scheduler.plugins", "kubewire.cluster.scheduler.queue",
        "kubewire.cluster.nodes.query", "kubewire.cluster.nodes.stages",
        "kubewire.cluster.nodes.gotemplate", "kubewire.cluster.nodes.pod_status",
        "kubewire.cluster.nodes.node_status", "kubewire.server.reads.simulated_logs",
        "kubewire.cluster.controllers.node_lifecycle_decisions",
        "kubewire.cluster.controllers.taint_eviction_decisions",
        "kubewire.cluster.controllers.options",
        "kubewire.cluster.controllers.history", "kubewire.cluster.controllers.pod_state",
        "kubewire.cluster.controllers.statefulset_rules",
        "kubewire.cluster.controllers.daemonset_rules", "kubewire.cluster.churn",
        "kubewire.cluster.event_correlation")
# (httptools is a parser, not I/O: the sans-I/O ``http_parse`` drives it.)
IO_LIBRARIES = frozenset({"asyncio", "socket", "ssl", "sqlite3", "uvloop", "threading",
                          "subprocess", "multiprocessing", "selectors"})
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
    return not _in(module, WINGS) and module not in ENTRY_POINTS


def room_of(module: str) -> str:
    """``server.<room>`` for the server's sub-packages and top modules (``server.app``,
    ``server.context``); ``storage``, ``client``, ``selectors``, ``schema``, ``models``; the
    entry points are ``entry``; every other top-level module is ``core``."""
    parts = module.split(".")
    if module in ENTRY_POINTS:
        return "entry"
    if parts[1:2] == ["server"]:
        return "server." + parts[2] if len(parts) > 2 else "server.app"
    if len(parts) > 1 and parts[1] in ("storage", "client", "selectors", "schema", "models",
                                       "testing", "cluster"):
        return parts[1]
    return "core"


def rooms_breached(found: list[Import]) -> list[Import]:
    """Imports from one room into another that ``ROOMS`` does not allow; the core rooms may
    import only each other, ``server.app`` and the entry points anything."""
    breaches = []
    for i in found:
        source, target = room_of(i.module), room_of(i.target)
        if source == target or source in ("entry", "server.app") or target in SHARED:
            continue
        if source in SHARED or target not in ROOMS.get(source, frozenset()):
            breaches.append(i)
    return breaches


def io_users(src: Path = SRC) -> dict[str, list[str]]:
    """Each module that imports an ``IO_LIBRARIES`` module when it runs, with those libraries."""
    users = {}
    for module, path in source_modules(src).items():
        libs = set()
        for node, when in _walk(ast.parse(path.read_text(), str(path)), "import"):
            if when == "typing":
                continue
            if isinstance(node, ast.Import):
                libs |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                libs.add(node.module.split(".")[0])
        if libs & IO_LIBRARIES:
            users[module] = sorted(libs & IO_LIBRARIES)
    return users


def impure(found: list[Import], users: dict[str, list[str]]) -> list[str]:
    """``PURE`` modules that reach an I/O user, each with one path of imports to it."""
    graph: dict[str, set[str]] = {}
    for i in found:
        if i.when != "typing" and i.target != i.module:
            graph.setdefault(i.module, set()).add(i.target)
    problems = []
    for module in sorted({i.module for i in found} | set(users)):
        if not _in(module, PURE):
            continue
        paths = {module: [module]}
        todo = [module]
        while todo:
            here = todo.pop(0)
            if here in users:
                chain = " -> ".join(paths[here])
                problems.append(f"{chain} (imports {', '.join(users[here])})")
                break
            for there in sorted(graph.get(here, ())):
                if there not in paths:
                    paths[there] = [*paths[here], there]
                    todo.append(there)
    return problems


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


def test_each_room_imports_only_the_rooms_below_it(found: list[Import]) -> None:
    assert [f"{i} ({room_of(i.module)} -> {room_of(i.target)})"
            for i in rooms_breached(found)] == []


def test_every_server_room_is_named_in_the_rules() -> None:
    """A new sub-package of the server gets a line in ``ROOMS`` (and in the architecture's
    table) before anything may import it."""
    rooms = {room_of(m) for m in source_modules()} - SHARED - {"entry", "server.app"}
    assert sorted(rooms - set(ROOMS)) == []


def test_pure_rooms_reach_no_io(found: list[Import]) -> None:
    assert impure(found, io_users()) == []


def test_module_level_imports_form_no_cycle(found: list[Import]) -> None:
    assert import_cycles(found) == []


def test_type_only_imports_close_no_cycle_either(found: list[Import]) -> None:
    """A cycle hidden behind ``TYPE_CHECKING`` is still two modules that need each other (the
    watch cache and its watchers used to be one): a small Protocol breaks it."""
    assert import_cycles(found, ("import", "typing")) == []


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
        "kubewire/server/app.py": "from kubewire.server.patch.json_patch import _decode_body\n",
        "kubewire/server/patch/json_patch.py": "import kubewire.server.app\n",
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
        "kubewire.server.app:1 imports kubewire.server.patch.json_patch._decode_body"]
    assert import_cycles(found) == [["kubewire.server.app", "kubewire.server.patch.json_patch"]]


def test_type_checking_imports_make_no_cycle(tmp_path: Path) -> None:
    found = _tree(tmp_path, {
        "kubewire/__init__.py": "",
        "kubewire/a.py": "import kubewire.b\n",
        "kubewire/b.py": "import typing\nif typing.TYPE_CHECKING:\n    import kubewire.a\n",
    })
    assert import_cycles(found) == []
    assert import_cycles(found, ("import", "typing")) == [["kubewire.a", "kubewire.b"]]
