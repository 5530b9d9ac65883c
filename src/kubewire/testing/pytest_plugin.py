"""The kubewire pytest plugin: the ``pytest11`` entry point ``kubewire``, so installing the
package is enough (where entry points are off, ``PYTEST_DISABLE_PLUGIN_AUTOLOAD``, load it with
``-p kubewire.testing.pytest_plugin``; not both ways, or pytest registers it twice).

Fixtures:

- ``kubewire_server``: a ``kubewire.Server`` on a thread of its own, one per session (and so one
  per pytest-xdist worker); ``--kubewire-scope`` or the ini option ``kubewire_scope`` choose
  another scope. Before each test that uses it, the server is reset (``Server.reset``: the
  objects, faults and request record of earlier tests are gone, resourceVersions keep
  growing), or, with the ini option ``kubewire_reset = false`` (state shared by the tests of a
  module, say), only its request record is cleared.
- ``kubewire_kubeconfig``: the path of a kubeconfig for the server (the same path for the whole
  session), with ``KUBECONFIG`` set to it for the test, so the ``kubernetes`` package,
  kubernetes_asyncio, lightkube, kr8s and kopf's ``KopfRunner`` find the server unchanged.
- ``kubewire_namespace``: a fresh namespace per test (its name), deleted after it.
- ``kubewire_client``: a ``kubewire.client.Client`` for the server, for async tests (it is
  closed after the test, on the test's loop).
- ``@pytest.mark.kubewire(crds=[...])``: CustomResourceDefinitions (files, relative to the
  test's file, or dicts) installed and established before the test.

The server runs on its own thread and loop, so sync tests, pytest-asyncio and anyio tests all
use the same fixtures. The server is imported when a test first asks for it: every pytest run
of a project with kubewire installed loads this module, client-only installs included.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from kubewire.client import Client
    from kubewire.testing.server import Server

SCOPES = ("session", "package", "module", "class", "function")
FIXTURES = ("kubewire_server", "kubewire_kubeconfig", "kubewire_namespace", "kubewire_client")
# The modules of client libraries that read KUBECONFIG once, when first imported.
_KUBECONFIG_CONSTANTS = ("kubernetes.config.kube_config", "kubernetes.config",
                         "kubernetes_asyncio.config.kube_config", "kubernetes_asyncio.config")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kubewire")
    group.addoption("--kubewire-scope", choices=SCOPES, default=None,
                    help="scope of the kubewire_server fixture (default: session)")
    parser.addini("kubewire_scope", "scope of the kubewire_server fixture", default="session")
    parser.addini("kubewire_reset", "empty the server's state before each test using it",
                  type="bool", default=True)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kubewire(crds=[...]): install these CustomResourceDefinitions (files "
        "relative to the test's file, or dicts) before the test")


def server_scope(fixture_name: str, config: pytest.Config) -> Any:
    """The configured scope: the command line's, else the ini file's, else session."""
    scope = config.getoption("--kubewire-scope") or config.getini("kubewire_scope") or "session"
    if scope not in SCOPES:
        raise pytest.UsageError(f"kubewire_scope must be one of {', '.join(SCOPES)}: {scope!r}")
    return scope


@pytest.fixture(scope=server_scope)
def kubewire_server() -> Iterator[Server]:
    from kubewire.testing.server import Server

    with Server() as server:
        yield server


@pytest.fixture(autouse=True)
def _kubewire_per_test(request: pytest.FixtureRequest) -> None:
    """Before a test that uses the server: a fresh record (and state), its marker's CRDs."""
    marker = request.node.get_closest_marker("kubewire")
    if marker is None and "kubewire_server" not in request.fixturenames:
        return
    server: Server = request.getfixturevalue("kubewire_server")
    if request.config.getini("kubewire_reset"):
        server.reset_sync()  # no objects, faults or records of earlier tests
    else:
        server.clear_requests()
    if marker is not None:
        base = Path(str(request.node.path)).parent
        for crd in marker.kwargs.get("crds", ()):
            server.apply_sync(base / crd if isinstance(crd, str | Path) else crd)


@pytest.fixture(scope="session")
def _kubewire_kubeconfig_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kubewire") / "kubeconfig"


@pytest.fixture
def kubewire_kubeconfig(kubewire_server: Server, _kubewire_kubeconfig_path: Path,
                        monkeypatch: pytest.MonkeyPatch) -> Path:
    """One path for the session, holding the current server's kubeconfig: a client library
    that read ``KUBECONFIG`` when first imported keeps finding it."""
    path = _kubewire_kubeconfig_path
    text = kubewire_server.kubeconfig.read_text()
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
        path.chmod(0o600)
    monkeypatch.setenv("KUBECONFIG", str(path))
    for module_name in _KUBECONFIG_CONSTANTS:
        module = sys.modules.get(module_name)
        if module is not None and hasattr(module, "KUBE_CONFIG_DEFAULT_LOCATION"):
            monkeypatch.setattr(module, "KUBE_CONFIG_DEFAULT_LOCATION", str(path))
    return path


@pytest.fixture
def kubewire_namespace(kubewire_server: Server, request: pytest.FixtureRequest) -> Iterator[str]:
    name = namespace_name(request.node.name)
    kubewire_server.apply_sync({"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": name}})
    yield name
    from kubewire.client import NotFound

    with contextlib.suppress(NotFound):  # the test deleted it
        kubewire_server.delete_sync("v1", "Namespace", name)


def namespace_name(test_name: str) -> str:
    """``test_x[a-1]`` -> ``test-x-a-1-3f9c1``: a DNS label (at most 63), unique per call."""
    stem = re.sub(r"[^a-z0-9]+", "-", test_name.lower()).strip("-")[:50].strip("-") or "test"
    return f"{stem}-{secrets.token_hex(3)}"


@pytest.fixture
def kubewire_client(kubewire_server: Server) -> Iterator[Client]:
    """A client for the server, used from an async test; closed with the loop it ran on."""
    client = closed_with_its_loop(kubewire_server.client())
    yield client
    close_client(client)


def closed_with_its_loop(client: Client) -> Client:
    """``client``, closed when the loop it is first used on shuts down.

    Why: pytest-asyncio and anyio close a test's loop before the teardown of a synchronous
    fixture, and a client's connections can only be closed on their loop. ``asyncio.run`` and
    ``asyncio.Runner`` (which both use) close every suspended async generator of the loop
    before closing it (``shutdown_asyncgens``): the client's first request starts one whose
    ``finally`` closes the client."""
    transport = client.transport
    armed: list[object] = []

    async def closer() -> AsyncIterator[None]:
        try:
            yield
        finally:
            await client.close()

    def arm() -> None:
        if armed:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        agen = closer()
        armed.extend([agen, loop.create_task(_start(agen))])

    request, open_stream = transport.request, transport.open

    def arming_request(*args: Any, **kwargs: Any) -> Any:
        arm()
        return request(*args, **kwargs)

    def arming_open(*args: Any, **kwargs: Any) -> Any:
        arm()
        return open_stream(*args, **kwargs)

    setattr(transport, "request", arming_request)  # noqa: B010 (an instance's method)
    setattr(transport, "open", arming_open)  # noqa: B010
    return client


async def _start(agen: AsyncIterator[None]) -> None:
    await anext(agen)


def close_client(client: Client) -> None:
    """Close ``client`` now if its loop is still open (a loop of a wider scope)."""
    loop = client.transport.loop
    if loop is None or loop.is_closed():
        return
    if loop.is_running():  # another thread's loop: ask it
        asyncio.run_coroutine_threadsafe(client.close(), loop).result(10)
    else:
        loop.run_until_complete(client.close())
