"""``kubewire.Server``: a real kubewire server in process, for tests and embedding.

    async with kubewire.Server(crds=["crd.yaml"]) as server:   # on the caller's loop
        async with server.client() as client: ...

    with kubewire.Server() as server:                          # on a thread of its own
        subprocess.run(["kubectl", "--kubeconfig", server.kubeconfig, "get", "pods"])

Either way the server listens on a random loopback port (``url``) and ``kubeconfig`` is a file
any client reads unchanged (kubectl, ``kubernetes``, kubernetes_asyncio, lightkube, kr8s,
kopf). Leaving the block stops it and removes the data directory it made (one given as
``data_dir`` stays). The request record (``requests``), ``wait_for``, ``apply``, ``delete``,
``reset`` and ``faults`` work in both modes: the coroutines run on the server's loop, wherever
they are awaited from; ``*_sync`` twins serve synchronous code (not on the server's own loop).

Why a thread for ``with``: blocking clients (kubectl in a subprocess, the ``kubernetes``
package) and the test itself then run while the server answers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import secrets
import shutil
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar, cast

import yaml

from kubewire.client import Api, Client, PatchType, load_config
from kubewire.clock import ManualClock
from kubewire.json_types import JSON
from kubewire.server.access.kubeconfig import Credentials, kubeconfig_text
from kubewire.server.app import APIServer
from kubewire.server.context import ServerConfig
from kubewire.server.faults.faults import Faults
from kubewire.server.observe.request_record import RequestEntry
from kubewire.testing.waiting import Condition, Wanted, wait_for_object

T = TypeVar("T")
Manifest = Mapping[str, Any] | str | Path
FIELD_MANAGER = "kubewire-testing"
ADMIN = "kubewire-admin"
CRD_RESOURCE = "customresourcedefinitions.apiextensions.k8s.io"
START_TIMEOUT_S = 30.0


def _stack_of(thread: threading.Thread) -> str:
    """Where ``thread`` is now (Python frames), for a stop that did not finish."""
    frame = sys._current_frames().get(thread.ident or 0)
    return "".join(traceback.format_stack(frame)) if frame is not None else "(gone)"


class Server:
    """A kubewire server for the length of a ``with`` or ``async with`` block.

    - ``storage``: ``"memory"`` (the default: no file, nothing kept after the block),
      ``"sqlite"`` (a database file in the data directory, and its writer process) or
      ``"etcd"`` (the cluster at ``etcd_servers=[...]``, under ``etcd_prefix``: several servers
      on one etcd are replicas of one API).
    - ``data_dir``: where the store, certificates and ``kubeconfig`` go; a temporary directory,
      removed at exit, when not given.
    - ``tls``: HTTPS with certificates made in the data directory, the kubeconfig holding the
      admin's client certificate (default: plain HTTP, where every request is admin's, unless
      ``users`` are given).
    - ``users``: user name -> groups; each gets a bearer token (``token(user)``,
      ``kubeconfig_for(user)``) and anonymous requests get 401. TLS by default then (kubectl
      sends no token over plain HTTP); with ``tls=False`` the admin's kubeconfig holds a
      token too. Who may do
      what is ``authorization_mode`` (``ServerConfig`` fields, kube's syntax: ``"RBAC"``,
      ``"ABAC,RBAC"`` with ``authorization_policy_file``, ...; default: everyone authenticated
      may do everything).
    - ``crds``: CustomResourceDefinitions (YAML/JSON files or dicts) installed and established
      before the block starts.
    - ``cluster``: ``True`` runs a cluster's components as ``kubewire serve`` does by default
      (kube-controller-manager's workload loops, the garbage collector, the scheduler and
      ``nodes`` simulated nodes, default 1, set as ``serve --node-*`` sets them: ``node_cpu``,
      ``node_memory``, ``node_pods``, ``node_labels={...}``, ``node_name_prefix``,
      ``node_naming``, ``node_pod_cidr``, ``node_stages_file`` (kwok Stage YAML)), so
      Deployments roll out and Pods become Ready;
      ``False`` (the default) runs the API server with its own controllers (namespaces,
      service accounts, RBAC aggregation, quotas, CSRs) and nothing that acts on workloads, so
      a test sees only what it writes.
    - ``controllers``: which of kubewire's controllers run, as kube-controller-manager's
      ``--controllers`` list (a ``ServerConfig`` field): ``("*",)`` with ``cluster=True``;
      ``("*", "-namespace")`` leaves deleted namespaces Terminating; ``()`` runs none (an
      envtest-like server: nothing but the API server's own work writes).
    - any other ``ServerConfig`` field by keyword: ``Server(ring_capacity=64,
      request_record_capacity=100, manual_clock=True)``.
    """

    def __init__(  # noqa: PLR0913 (keyword-only options)
                 self, *, storage: Literal["memory", "sqlite", "etcd"] = "memory",
                 data_dir: str | Path | None = None,
                 tls: bool | None = None, users: Mapping[str, Sequence[str]] | None = None,
                 crds: Iterable[Manifest] = (), host: str = "127.0.0.1", port: int = 0,
                 cluster: bool = False, **config: Any) -> None:
        if storage not in ("memory", "sqlite", "etcd"):
            raise ValueError(f"storage must be 'memory', 'sqlite' or 'etcd', not {storage!r}")
        if storage == "etcd" and not config.get("etcd_servers"):
            raise ValueError("storage 'etcd' needs etcd_servers=[...] (its endpoints)")
        names = {f.name for f in dataclasses.fields(ServerConfig)}
        unknown = set(config) - names
        if unknown:
            raise TypeError(f"unknown ServerConfig fields: {', '.join(sorted(unknown))}")
        config["cluster"] = cluster  # off: the API server and its own controllers alone
        self._own_dir = data_dir is None
        self._data_dir = Path(data_dir) if data_dir is not None else None
        if tls is None:  # kubectl sends no token over plain HTTP
            tls = bool(users)
        self._options = dict(config, storage=storage, host=host, port=port,
                             insecure_http=not tls)
        self._users = {name: tuple(groups) for name, groups in (users or {}).items()}
        self._tokens: dict[str, str] = {}
        self._crds = list(crds)
        self.server: APIServer | None = None  # the running APIServer (white-box access)
        self.url = ""
        self._kubeconfig: Path | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None  # set to end the thread's loop
        self._admin_client: Client | None = None

    # -- the two ways to run it --------------------------------------------------------------
    async def __aenter__(self) -> Server:
        try:
            await self._start()
        except BaseException:
            await self._stop()
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self._stop()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> Server:
        """Start on a thread with its own loop; returns once the server is ready."""
        if self._thread is not None or self.server is not None:
            raise RuntimeError("the server is running already")
        started: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._run_thread, args=(started,),
                                        name="kubewire-server", daemon=True)
        self._thread.start()
        try:
            started.result(START_TIMEOUT_S)
        except BaseException:
            self._join()
            raise
        return self

    def stop(self) -> None:
        """Stop the thread's server (and remove its temporary data directory)."""
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stopped.set)
        self._join()

    def _join(self) -> None:
        if self._thread is not None:
            self._thread.join(START_TIMEOUT_S)
            if self._thread.is_alive():
                raise RuntimeError("the kubewire server thread did not stop; it is at:\n"
                                   + _stack_of(self._thread))
        self._thread = None

    def _run_thread(self, started: concurrent.futures.Future[None]) -> None:
        async def main() -> None:
            self._stopped = asyncio.Event()
            try:
                await self._start()
            except BaseException as exc:
                started.set_exception(exc)
                await self._stop()
                return
            started.set_result(None)
            await self._stopped.wait()
            await self._stop()

        asyncio.run(main())
        self._loop = None

    async def _start(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self._data_dir is None:
            self._data_dir = Path(tempfile.mkdtemp(prefix="kubewire-"))
        options = dict(self._options)
        if self._users:
            options.setdefault("token_auth_file", self._write_tokens(self._data_dir))
        self.server = APIServer(ServerConfig(data_dir=self._data_dir, **options))
        await self.server.start()
        self.url = self.server.url
        self._kubeconfig = self._data_dir / "kubeconfig"
        if self._users and not self.server.tls:  # no admin certificate: the admin's token
            self._kubeconfig = self.kubeconfig_for(ADMIN)
        for crd in self._crds:
            await self.install_crd(crd)

    async def _stop(self) -> None:
        if self._admin_client is not None:
            await self._admin_client.close()
            self._admin_client = None
        if self.server is not None:
            await self.server.stop()
            self.server = None
        if self._own_dir and self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)
            self._data_dir = None

    # -- where it is ---------------------------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        """A kubeconfig for the admin (``system:masters``)."""
        if self._kubeconfig is None:
            raise RuntimeError("the server is not running")
        return self._kubeconfig

    @property
    def data_dir(self) -> Path:
        if self._data_dir is None:
            raise RuntimeError("the server is not running")
        return self._data_dir

    def client(self) -> Client:
        """A ``kubewire.client.Client`` for the admin; ``async with server.client() as c``
        closes it (use it on the loop it was first used on)."""
        return Client(load_config(self.kubeconfig))

    def token(self, user: str) -> str:
        """The bearer token of one of ``users``."""
        try:
            return self._tokens[user]
        except KeyError:
            raise KeyError(f"no user {user!r}: Server(users=...) names them") from None

    def kubeconfig_for(self, user: str) -> Path:
        """A kubeconfig authenticating as one of ``users`` with its token."""
        path = self.data_dir / f"kubeconfig-{user}"
        tls = self.server.tls if self.server is not None else None
        ca = None if tls is None else (tls.pki.ca_cert if tls.pki else tls.client_ca).read_bytes()
        text = kubeconfig_text(self.url, Credentials(user=user, token=self.token(user)),
                               ca_cert=ca)
        path.write_text(text)
        path.chmod(0o600)
        return path

    def _write_tokens(self, data_dir: Path) -> Path:
        users = {ADMIN: ("system:masters",), **self._users}
        lines = []
        for user, groups in users.items():
            token = self._tokens[user] = secrets.token_urlsafe(24)
            lines.append(f'{token},{user},{user},"{",".join(groups)}"')
        path = data_dir / "tokens.csv"
        path.write_text("\n".join(lines) + "\n")
        path.chmod(0o600)
        return path

    # -- running coroutines on the server's loop ----------------------------------------------
    def _running(self) -> tuple[APIServer, asyncio.AbstractEventLoop]:
        if self.server is None or self._loop is None:
            raise RuntimeError("the server is not running")
        return self.server, self._loop

    async def _on_server_loop(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        _, loop = self._running()
        if asyncio.get_running_loop() is loop:
            return await make()
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(make(), loop))

    def _sync(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        _, loop = self._running()
        if _running_loop() is loop:
            raise RuntimeError("a *_sync method called on the server's own loop: await the "
                               "coroutine instead")
        return asyncio.run_coroutine_threadsafe(make(), loop).result()

    async def _admin(self) -> Client:
        if self._admin_client is None:
            self._admin_client = self.client()
        return self._admin_client

    # -- what it was asked ----------------------------------------------------------------------
    def requests(  # noqa: PLR0913
                 self, *, verb: str | None = None, resource: str | None = None,
                 namespace: str | None = None, name: str | None = None,
                 user: str | None = None, code: int | None = None,
                 **filters: object) -> list[RequestEntry]:
        """The recorded requests matching every filter given, oldest first
        (``server.requests(verb="patch", resource="pods")``); also ``group``, ``version``,
        ``subresource``, ``fault``."""
        server, _ = self._running()
        return server.requests.select(verb=verb, resource=resource, namespace=namespace,
                                      name=name, user=user, code=code, **filters)

    def clear_requests(self) -> None:
        self._running()[0].requests.clear()

    # -- between tests ------------------------------------------------------------------------
    async def reset(self) -> None:
        """Back to the state right after start (resourceVersions keep growing: clients'
        caches see the deletions), with no faults and an empty request record."""
        server, _ = self._running()
        await self._on_server_loop(lambda: _reset(server))

    def reset_sync(self) -> None:
        """``reset`` from synchronous code (a ``with`` server)."""
        server, _ = self._running()
        self._sync(lambda: _reset(server))

    # -- faults -------------------------------------------------------------------------------
    @property
    def faults(self) -> Faults:
        """The server's faults on demand (``server/faults``: ``drop_watches``,
        ``expire_history``, ``stall_streams``, ``inject_error``, ``fail_store``, ...). Each
        call runs on the server's loop, so a ``with`` server's faults are safe to call from
        the test's thread."""
        server, _ = self._running()
        return cast(Faults, _OnServerLoop(server.faults, self._call_now))

    def _call_now(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the server's loop: at once when already there, else by its thread."""
        _, loop = self._running()
        if _running_loop() is loop:
            return fn()

        async def call() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(call(), loop).result()

    def advance_clock(self, seconds: float) -> int:
        """Move a manual clock (``Server(manual_clock=True)``) ``seconds`` forward, firing the
        timers that fall due (graceful deletions, namespace finalization, timed stalls), as
        ``POST /kubewire/clock`` does; how many fired. ValueError on a real-time clock."""
        server, _ = self._running()
        clock = server.ctx.clock
        if not isinstance(clock, ManualClock):
            raise ValueError("the server's clock is real time: start it with "
                             "Server(manual_clock=True) to advance it")
        return self._call_now(lambda: clock.advance(seconds))

    # -- objects ------------------------------------------------------------------------------
    async def wait_for(  # noqa: PLR0913
                       self, resource: str, name: str, *, namespace: str = "",
                       condition: Condition | None = None, deleted: bool = False,
                       timeout: float = 10.0) -> dict[str, Any] | None:
        """Wait until the object satisfies ``condition`` (a callable on the object's dict, or
        ``("Ready", "True")``: a status condition of that type and status; None: it exists),
        or, with ``deleted=True``, until it is gone (returns None then). ``resource`` is a
        plural, qualified by its group for other groups than core: ``pods``,
        ``deployments.apps``, ``widgets.example.com``. Driven by the server's watch caches (no
        polling); TimeoutError, with the last object seen, after ``timeout`` seconds."""
        server, _ = self._running()
        wanted = Wanted(resource, name, namespace, condition, deleted, timeout)
        return await self._on_server_loop(lambda: wait_for_object(server.ctx, wanted))

    def wait_for_sync(  # noqa: PLR0913
                      self, resource: str, name: str, *, namespace: str = "",
                      condition: Condition | None = None, deleted: bool = False,
                      timeout: float = 10.0) -> dict[str, Any] | None:
        """``wait_for`` from synchronous code (a ``with`` server)."""
        server, _ = self._running()
        wanted = Wanted(resource, name, namespace, condition, deleted, timeout)
        return self._sync(lambda: wait_for_object(server.ctx, wanted))

    async def apply(self, manifest: Manifest | Sequence[Mapping[str, Any]]) -> list[JSON]:
        """Server-side apply each object of ``manifest`` (a dict, a list of dicts, YAML text,
        or a YAML/JSON file of one or more documents); CRDs are waited for until established.
        The applied objects, in order."""
        docs = load_manifests(manifest)
        return await self._on_server_loop(lambda: self._apply_all(docs))

    def apply_sync(self, manifest: Manifest | Sequence[Mapping[str, Any]]) -> list[JSON]:
        """``apply`` from synchronous code (a ``with`` server)."""
        docs = load_manifests(manifest)
        return self._sync(lambda: self._apply_all(docs))

    async def delete(self, api_version: str, kind: str, name: str,
                     namespace: str | None = None) -> None:
        """Delete one object (``kubewire.client.NotFound`` when there is none)."""
        await self._on_server_loop(lambda: self._delete(api_version, kind, name, namespace))

    def delete_sync(self, api_version: str, kind: str, name: str,
                    namespace: str | None = None) -> None:
        """``delete`` from synchronous code (a ``with`` server)."""
        self._sync(lambda: self._delete(api_version, kind, name, namespace))

    async def _delete(self, api_version: str, kind: str, name: str,
                      namespace: str | None) -> None:
        api = Api(dict, client=await self._admin(), api_version=api_version, kind=kind,
                  namespace=namespace)
        await api.delete(name)

    async def install_crd(self, crd: Manifest) -> None:
        """Apply CustomResourceDefinitions and return once each is established (served)."""
        await self.apply(crd)

    async def _apply_all(self, docs: list[dict[str, Any]]) -> list[JSON]:
        client = await self._admin()
        applied: list[JSON] = []
        for doc in docs:
            applied.append(await _apply_one(client, doc))
            if doc.get("kind") == "CustomResourceDefinition":
                server, _ = self._running()
                await wait_for_object(server.ctx, Wanted(
                    CRD_RESOURCE, doc["metadata"]["name"], condition=("Established", "True"),
                    timeout=START_TIMEOUT_S))
        return applied


async def _reset(server: APIServer) -> None:
    server.faults.clear()
    await server.reset()
    server.requests.clear()


class _OnServerLoop:
    """Forwards method calls on ``target`` to the server's loop (``call``)."""

    def __init__(self, target: object, call: Callable[[Callable[[], Any]], Any]) -> None:
        self._target = target
        self._call = call

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value):
            return value

        def forwarded(*args: Any, **kwargs: Any) -> Any:
            return self._call(lambda: value(*args, **kwargs))

        return forwarded


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, if any."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def _apply_one(client: Client, doc: dict[str, Any]) -> JSON:
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    meta = doc.get("metadata")
    if not isinstance(api_version, str) or not isinstance(kind, str) or not isinstance(
            meta, dict) or not isinstance(meta.get("name"), str):
        raise ValueError("a manifest needs apiVersion, kind and metadata.name")
    api = Api(dict, client=client, api_version=api_version, kind=kind)
    namespace = meta.get("namespace")
    result: JSON = await api.patch(meta["name"], doc, type=PatchType.APPLY,
                                   field_manager=FIELD_MANAGER, force=True,
                                   **({"namespace": namespace} if namespace else {}))
    return result


def load_manifests(manifest: Manifest | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The objects of a dict, a list of dicts, YAML text or a file (``---`` separated); the
    items of a ``List`` are taken one by one."""
    if isinstance(manifest, Path) or (isinstance(manifest, str) and "\n" not in manifest
                                      and Path(manifest).is_file()):
        manifest = Path(manifest).read_text()
    if isinstance(manifest, str):
        docs: list[Any] = [d for d in yaml.safe_load_all(manifest) if d is not None]
    elif isinstance(manifest, Mapping):
        docs = [manifest]
    else:
        docs = list(manifest)
    out: list[dict[str, Any]] = []
    for doc in docs:
        if not isinstance(doc, Mapping):
            raise ValueError(f"a manifest document must be an object, not {type(doc).__name__}")
        if str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
            out.extend(load_manifests(doc["items"]))
        else:
            out.append(dict(doc))
    return out
