"""The API server: open the store, fill the watch caches, route requests to handlers.

Every failure a client can see is a ``Status`` (one mapping, here); anything else is a bug,
logged and answered 500 InternalError. A request that is not a watch gets kube's deadline
(``request_timeout``): a handler still running at it is cancelled and answered 504; what it
had queued in the store still commits and reaches watchers, as in kube, where the write goes
on after the client got its Timeout. Health checks (``observe/health``) ask the store's writer
to answer, so a stalled writer turns them red until it answers again.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING

import msgspec

from kubewire import __version__
from kubewire.resources import METRICS_RESOURCES, REGISTRY, RESOURCES, Registry
from kubewire.server.access.authn import UserInfo
from kubewire.server.access.authorizers import parse_modes
from kubewire.server.access.authz import Attributes
from kubewire.server.access.chain import (
    Access,
    TLSFiles,
    cluster_ca,
    is_public,
    resource_verb,
    server_ssl_context,
    tls_files,
)
from kubewire.server.access.kubeconfig import Credentials, kubeconfig_text, server_url
from kubewire.server.access.oidc_discovery import openid_response
from kubewire.server.access.rbac_escalation import Check
from kubewire.server.admin import endpoints as admin
from kubewire.server.admin.reset import Baseline, ResetReport, reset_to_baseline
from kubewire.server.context import DATABASE_NAME, ServerConfig, ServerContext
from kubewire.server.controllers.crds import served_at_start
from kubewire.server.controllers.manager import ControllerManager
from kubewire.server.conversion.objects import convert_or_fail
from kubewire.server.discovery.documents import discovery_answer
from kubewire.server.discovery.openapi import openapi_response
from kubewire.server.discovery.openapi_v2 import openapi_v2_response
from kubewire.server.faults.faults import Faults
from kubewire.server.observe import httplog
from kubewire.server.observe.health import ServerHealth
from kubewire.server.observe.httplog import assign_audit_id
from kubewire.server.observe.loop_slices import LoopSlices
from kubewire.server.observe.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from kubewire.server.observe.per_request import Observer, RequestInfo, TooManyInFlight
from kubewire.server.observe.request_record import RequestRecord, entry_of
from kubewire.server.reads import get_list as reads
from kubewire.server.reads.pod_connect import CONNECT_SUBRESOURCES, serve_connect
from kubewire.server.reads.resource_metrics import serve_metrics
from kubewire.server.reads.watch import serve_watch
from kubewire.server.request.options import parse_get_options, parse_list_options
from kubewire.server.request.routes import GroupVersionPath, Route, parse_route
from kubewire.server.request.timeout import (
    deadline_exceeded,
    is_long_running,
    request_timeout_s,
)
from kubewire.server.tables.output import negotiate_output
from kubewire.server.wire.http import HTTPServer
from kubewire.server.wire.http_messages import Request, Response, status_response
from kubewire.server.wire.websocket import HandshakeError
from kubewire.server.writes import create_update as writes
from kubewire.server.writes.access_reviews import GROUP as REVIEW_GROUP
from kubewire.server.writes.access_reviews import serve_access_review
from kubewire.server.writes.authn_reviews import GROUP as AUTHN_REVIEW_GROUP
from kubewire.server.writes.authn_reviews import serve_authentication_review
from kubewire.server.writes.eviction import serve_eviction
from kubewire.server.writes.pod_binding import serve_binding
from kubewire.server.writes.rbac_writes import REQUESTER, Requester, rbac_resolver
from kubewire.server.writes.scale_subresource import serve_scale
from kubewire.server.writes.token_request import serve_token_request
from kubewire.status import (
    BadRequest,
    MethodNotAllowed,
    NotFound,
    RequestEntityTooLarge,
    StatusError,
    Unauthorized,
    internal_error,
)
from kubewire.storage import deadlines
from kubewire.storage.base import StorageError, StorageTimeoutError, ValueTooLargeError
from kubewire.storage.cache import WatchCaches
from kubewire.storage.memory import MemoryStore
from kubewire.storage.sqlite.store import SQLiteStore
from kubewire.storage.versioned_store import VersionedStore

if TYPE_CHECKING:
    from pathlib import Path

    from kubewire.server.observe.audit_log import Auditor
    from kubewire.storage.etcd.store import EtcdStore

log = logging.getLogger(__name__)

NOT_FOUND_TEXT = b"404 page not found\n"
OFF_LOOP_QUERY_BYTES = 16 * 1024  # a LIST or watch query this long is parsed off the loop


class APIServer:
    """One kubewire server process: ``await start()``, serve, ``await stop()``."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        # refuse an --authorization-mode kube would refuse before anything is opened
        parse_modes(config.authorization_mode, config.authorization_policy_file is not None)
        config.data_dir.mkdir(parents=True, exist_ok=True)
        store = _open_store(config)
        store.on_commit = self._observe_commit
        store.max_value_bytes = config.limits.max_object_bytes
        caches = WatchCaches(store, REGISTRY, ring_capacity=config.ring_capacity,
                             bookmark_interval_s=config.bookmark_interval_s)
        # a cluster serves metrics.k8s.io as kind with metrics-server does (server/reads)
        metrics = config.cluster if config.metrics_api is None else config.metrics_api
        registry = Registry(RESOURCES + METRICS_RESOURCES) if metrics else REGISTRY
        self.ctx = ServerContext(config=config, store=store, caches=caches, registry=registry)
        assert isinstance(self.ctx.store, VersionedStore)
        self.ctx.store.webhook = partial(convert_or_fail, self.ctx)  # CRD conversion webhooks
        self.health = ServerHealth(store)
        # set if the store's writer hub drops it (serve --workers on SQLite): the worker exits,
        # and its parent starts another
        self.store_lost = asyncio.Event()
        if isinstance(store, SQLiteStore):
            store.on_writer_lost = self.store_lost.set
        self.http = HTTPServer(self.handle, config.limits, head_check=self._check_head)
        self.tls = None if config.insecure_http else tls_files(config)
        self.controllers = ControllerManager(self.ctx, cluster_ca(config, self.tls))
        self.access = Access(config, self.tls, self.ctx)
        self.rbac_resolver = rbac_resolver(self.ctx)  # escalation checks read RBAC objects here
        self.auditor = _auditor(config)  # None unless auditing: no cost per request then
        self.observer = Observer(self.ctx, config)
        store.on_request = self.observer.store_request
        if not isinstance(store, SQLiteStore):  # no file to measure: the store's own figure
            self.observer.storage_size_of = lambda: store.size_bytes
        if config.storage == "etcd":  # kube names the etcd cluster's storage "etcd-0"
            self.observer.storage_cluster_id = "etcd-0"
            self.observer.storage_db_sizes_of = lambda: getattr(store, "db_sizes", {})
        self._slices = LoopSlices()
        self.requests = RequestRecord(config.request_record_capacity)  # one entry per request
        self.faults = Faults(self.ctx, self.health, self.observer.metrics.registry)
        self.ctx.faults = self.faults
        self.address: tuple[str, int] = (config.host, config.port)
        self.url = ""
        self.ready = False
        self._baseline: Baseline | None = None
        # big queries' options are parsed here: one thread, so however many big queries clients
        # send, one parse at a time competes with the loop for the interpreter
        self._query_parser = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kw-query")

    def _observe_commit(self, seconds: float) -> None:
        """Each commit's duration (on the loop, as the writer process reports it): one histogram
        update, nothing that can block."""
        self.observer.metrics.commit_latency.observe((), seconds)

    async def start(self) -> tuple[str, int]:
        """Open the store, fill the caches, listen, and write ``DIR/kubeconfig`` for the admin."""
        await self.ctx.store.open()
        self.ctx.serve(await served_at_start(self.ctx.store, self.ctx.registry))
        await self.ctx.caches.start()
        self.health.caches_synced = True
        await self.ctx.start_allocations()  # kube's start-service-ip-repair-controllers hook
        await writes.ensure_initial_namespaces(self.ctx)
        self.health.namespaces_made = True
        self.controllers.start()
        ssl_context = server_ssl_context(self.tls) if self.tls else None
        self.address = await self.http.listen(self.config.host, self.config.port, ssl_context,
                                              reuse_port=self.config.worker)
        self.url = server_url(*self.address, tls=self.tls is not None)
        if not self.config.worker:
            write_admin_kubeconfig(self.config.data_dir, self.url, self.tls)
        self.controllers.serving(*self.address)
        self.controllers.serve_components(self.url, _loopback_ca(self.tls),
                                          self.access.loopback.issue)
        await self.controllers.settled()
        # what ``reset`` goes back to (read now from memory, or later from the SQLite history)
        self._baseline = await Baseline.capture(self.ctx.store,
                                                eager=self.config.storage == "memory")
        self.health.crds_served = True
        self.ready = True
        return self.address

    async def reset(self) -> ResetReport:
        """Back to the state right after ``start()``, resourceVersions still growing: what was
        created since is deleted, what was changed or deleted is put back
        (``server/admin/reset``)."""
        if self._baseline is None:
            raise RuntimeError("reset() before start()")
        return await reset_to_baseline(self.ctx.store, self._baseline, self.controllers)

    async def stop(self) -> None:
        self.ready = False
        self.health.stopping = True
        await self.controllers.stop_components()  # clients of this server: before it closes
        await self.http.close()
        await self.controllers.stop()
        await self.ctx.allocations.stop()
        await self.ctx.caches.stop()
        await self.ctx.store.close()
        self._query_parser.shutdown(wait=False, cancel_futures=True)
        if self.auditor is not None:
            self.auditor.close()  # after the streams ended: their last events are in

    async def handle(self, request: Request) -> Response | None:
        # After a turn if this batch has begun enough requests; after the watchers' due events
        # have gone out, if a flush is due (the requests it held take their slices again).
        await self._slices.begin(self.ctx.caches.due_flush)
        started = time.perf_counter()
        assign_audit_id(request)
        info = RequestInfo()
        response = await self._answer_in_time(request, info)
        verb = self.observer.finished(request, info, response, time.perf_counter() - started)
        code = info.answered_code(response)
        if self.requests.capacity:
            self.requests.add(entry_of(request, info, code))
        if info.audit is not None:
            info.audit.finish(request, response, info.error, code)
        if self.auditor is not None:
            self.auditor.flush()  # the request's events are in the log before its answer
        return _logged(request, verb, response, code, started, fault=info.fault)

    def _check_head(self, request: Request) -> Response | None:
        """A request with a body, on its head: the 401 it would get after its body, now, so
        an unauthenticated client cannot make the server hold a body (the same bytes as
        ``handle`` answers, and counted in the request metrics)."""
        try:
            self.access.authenticate_head(request)
        except StatusError as err:
            started = time.perf_counter()
            assign_audit_id(request)
            response = status_response(err)
            info = RequestInfo(code=err.code)
            verb = self.observer.finished(request, info, response, 0.0)
            self.requests.add(entry_of(request, info, err.code))
            return _logged(request, verb, response, err.code, started)
        return None

    async def _answer_in_time(self, request: Request, info: RequestInfo) -> Response | None:
        """``_answer`` within the request's deadline (none for watches), as kube's
        WithRequestDeadline and WithTimeoutForNonLongRunningRequests do before anything else."""
        route = parse_route(self.ctx.registry, request.path)
        if is_long_running(request.method, route, request.query):
            return await self._answer(request, info, route)
        try:
            timeout_s = request_timeout_s(request.query, self.config.limits.request_timeout_s)
        except BadRequest as err:
            info.code = err.code
            return status_response(err)
        # kube's deadline starts when the request is received: reading the body took part of it,
        # and a request whose time is up before its handler starts is not served at all
        left_s = timeout_s - (asyncio.get_running_loop().time() - request.received)
        if left_s <= 0:
            info.code = 504
            return status_response(deadline_exceeded())
        task = asyncio.current_task()
        assert task is not None
        expiry = _Expiry(task)
        deadline = deadlines.call_later(left_s, expiry)  # ~0.7 µs; asyncio.timeout ~3.7
        try:
            return await self._answer(request, info, route)
        except asyncio.CancelledError:
            if not expiry.has_fired or task.uncancel() > 0:  # not (only) ours: a disconnect
                raise
        finally:
            deadline.cancel()
        info.code = 504
        if request.stream is not None:  # kube: the head is out, so the connection breaks
            request.stream.abort()
            return None
        return status_response(deadline_exceeded())

    async def _answer(self, request: Request, info: RequestInfo,
                      route: Route | GroupVersionPath | None) -> Response | None:
        try:
            return await self._route(request, info, route)
        except StatusError as err:
            info.code = err.code
            info.error = err
            if request.stream is not None:  # headers already sent: end the stream
                request.stream.close()
                return None
            return status_response(err)
        except HandshakeError as err:  # x/net/websocket answers in plain text
            return Response(err.status, err.text.encode(), "text/plain; charset=utf-8")
        except TooManyInFlight as err:
            return err.response()
        except StorageError as err:  # too large, or the store failed (etcd unavailable)
            return self._storage_failed(request, info, err)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("internal error serving %s %s", request.method, request.path)
            info.code = 500
            if request.stream is not None:
                request.stream.close()
                return None
            return status_response(internal_error(f"{type(exc).__name__}: {exc}"))

    def _storage_failed(self, request: Request, info: RequestInfo,
                        err: StorageError) -> Response | None:
        status = storage_failure(err)
        if status.code != 413:
            log.warning("storage failed serving %s %s: %s", request.method, request.path, err)
        info.code = status.code
        if request.stream is not None:  # headers already sent: end the stream
            request.stream.close()
            return None
        return status_response(status)

    async def _health(self, request: Request) -> Response | None:
        """``/healthz``, ``/livez``, ``/readyz`` and their single checks (``observe/health``)."""
        found = await self.health.answer(request.path, request.query)
        if found is None:
            return None
        return Response(found.status, found.body, found.content_type, list(found.headers))

    async def _route(self, request: Request, info: RequestInfo,
                     route: Route | GroupVersionPath | None) -> Response | None:
        path = request.path
        public = is_public(path)
        if public and self.auditor is None:
            self.access.user(request, anonymous=True)  # bad credentials: 401 (kube's)
            return await self._public(request)
        if public:
            route = None
        info.route = route if isinstance(route, Route) else None
        info.user = self._identify(request, info, public)
        if public:
            return await self._public(request)
        if info.route is not None:
            info.verb = resource_verb(request, info.route)
            if self.faults.request_faults and await self.faults.before_request(request, info):
                return None  # its connection was reset
        if info.user is None or request.method not in _WRITE_METHODS:
            with self.observer.admit(request, info):
                return await self._dispatch(request, route, info.user)
        # who writes: the escalation checks on RBAC objects ask (writes/rbac_writes)
        token = REQUESTER.set(Requester(info.user, partial(self._allows, info.user),
                                        self.rbac_resolver))
        try:
            with self.observer.admit(request, info):
                return await self._dispatch(request, route, info.user)
        finally:
            REQUESTER.reset(token)

    def _allows(self, user: UserInfo, check: Check) -> bool:
        """Whether the server's authorizers allow ``user`` the escalation checks' ``check``."""
        attrs = Attributes(user, check.verb, resource_request=True, namespace=check.namespace,
                           api_group=check.api_group, api_version=check.api_version,
                           resource=check.resource, name=check.name)
        return self.access.authorizer.authorize(attrs)[0]

    async def _public(self, request: Request) -> Response:
        """Health and version: open to anyone."""
        return await self._health(request) or Response(200, VERSION_BODY)

    def _identify(self, request: Request, info: RequestInfo, public: bool) -> UserInfo | None:
        """Authentication, audit, impersonation, authorization: kube's filter order. The user
        the request runs as (None on public paths), or the Status it gets."""
        auditor = self.auditor
        if auditor is None:
            return None if public else self.access.check(request, info.route)
        try:  # on a public path, no credentials is kube's anonymous user, bad ones 401
            requestor = self.access.user(request, anonymous=public)
        except Unauthorized as err:
            auditor.unauthenticated(request, info.route, err)
            raise
        info.audit = auditor.begin(request, info.route, requestor)
        if public:
            return None
        return self.access.admit(request, info.route, requestor, info.audit)

    async def _dispatch(self, request: Request, route: Route | GroupVersionPath | None,
                        user: UserInfo | None) -> Response | None:
        path = request.path
        if path.rstrip("/") == "/metrics" and request.method in ("GET", "HEAD"):
            return Response(200, self.observer.metrics.render(), METRICS_CONTENT_TYPE)
        if route is None and admin.is_admin_path(path):
            return await admin.serve(self, request, user)
        if route is None:  # a single health check (/livez/ping), or OIDC issuer discovery
            found = (openid_response(path, request.method, self.config, self.address)
                     or await self._health(request))
            if found is not None:
                return found
        if request.method in ("GET", "HEAD"):
            found = self._describe(request)
            if found is not None:
                return found
        if route is None:
            return Response(404, NOT_FOUND_TEXT, "text/plain; charset=utf-8")
        if isinstance(route, GroupVersionPath):
            raise NotFound("the server could not find the requested resource", {})
        return await self._serve(request, route)

    def _describe(self, request: Request) -> Response | None:
        """Discovery and OpenAPI documents: precomputed bytes, shared by every request."""
        registry = self.ctx.registry
        host, port = self.address
        found = discovery_answer(registry, request.path, request.header("accept"),
                                 f"{host}:{port}", request.header("if-none-match"))
        if found is not None:
            return Response(found.status, found.body, found.content_type, list(found.headers))
        answer = (openapi_v2_response(registry, request.path, request.headers)
                  or openapi_response(registry, request.path, request.query, request.headers))
        if answer is not None:
            return Response(answer.status, answer.body, answer.content_type, answer.headers)
        return None

    async def _serve(self, request: Request, route: Route) -> Response | None:
        method = request.method
        ctx = self.ctx
        _warn_if_deprecated(request, route)
        # metrics.k8s.io's kinds: read-only, computed on each read
        handler = serve_metrics if route.resource.computed else \
            _SUBRESOURCE_HANDLERS.get(route.subresource)
        if handler is None and route.resource.create_only:
            handler = self._creater(route)
        if handler is not None:
            return await handler(ctx, request, route)
        if method in ("GET", "HEAD"):
            if route.is_collection or route.watch_path:
                return await self._get_collection(request, route)
            table = negotiate_output(request.header("accept"), request.query)
            return await reads.serve_get(ctx, route, parse_get_options(request.query), table)
        if method == "POST" and route.is_collection and not route.watch_path:
            return await writes.create(ctx, request, route)
        if method == "PUT" and not route.is_collection:
            return await writes.update(ctx, request, route)
        if method == "PATCH" and not route.is_collection:
            return await writes.patch(ctx, request, route)
        if method == "DELETE" and not route.watch_path:
            if route.is_collection:
                return await writes.delete_collection(ctx, request, route)
            return await writes.delete(ctx, request, route)
        raise MethodNotAllowed("the server does not allow this method on the requested resource",
                               {})

    def _creater(self, route: Route) -> SubresourceHandler:
        """The handler of a kind served by a Creater alone."""
        if route.resource.group == REVIEW_GROUP:  # authorization.k8s.io's reviews
            return partial(serve_access_review, authorizer=self.access.authorizer)
        if route.resource.group == AUTHN_REVIEW_GROUP:  # SelfSubjectReview, TokenReview
            return partial(serve_authentication_review, authenticator=self.access.authenticator)
        return serve_binding  # the core bindings collection

    async def _get_collection(self, request: Request, route: Route) -> Response | None:
        parse = partial(parse_list_options, request.query, route.resource,
                        force_watch=route.watch_path, path_name=route.name)
        # Selectors are parsed in pure Python: a query of hundreds of KiB can take tens of ms, so
        # a big one is parsed in a worker thread, where the interpreter's switch interval
        # gives the loop its turns meanwhile.
        opts = (await asyncio.get_running_loop().run_in_executor(self._query_parser, parse)
                if len(request.raw_query) > OFF_LOOP_QUERY_BYTES else parse())
        if opts.watch:
            await serve_watch(self.ctx, request, route, opts)
            return None
        table = negotiate_output(request.header("accept"), request.query)
        return await reads.serve_list(self.ctx, route, opts, table)


def _logged(request: Request, verb: str, response: Response | None, code: int,  # noqa: PLR0913
            started: float, *, fault: str = "") -> Response | None:
    """The answer with the request's ``Audit-Id``, and the request's httplog line (now, or
    when its stream ends)."""
    if response is not None:
        response.headers = [*request.answer_headers, *response.headers]
    if httplog.enabled():
        httplog.log_request(request, verb, response, code, started, fault=fault)
    return response


def _warn_if_deprecated(request: Request, route: Route) -> None:
    """A deprecated CRD version's ``Warning`` on every answer, errors and watches too. kube
    adds it before serving (``customresource_handler.go`` ``ServeHTTP``), so it comes before
    the request's own warnings."""
    text = route.resource.deprecation_warning
    if text is not None:
        request.answer_headers = (*request.answer_headers, _warning_header(text))


def _warning_header(text: str) -> tuple[str, str]:
    """``Warning: 299 - "<text>"`` (kube's warning recorder; ``\\`` and ``"`` escaped)."""
    return "Warning", '299 - "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


_WRITE_METHODS = frozenset({"POST", "PUT", "PATCH"})  # the writes that create or update
SubresourceHandler = Callable[[ServerContext, Request, Route], Awaitable[Response]]
# Subresources with handlers of their own (status and finalize go through the object's).
_SUBRESOURCE_HANDLERS: dict[str, SubresourceHandler] = {
    "scale": serve_scale, "binding": serve_binding, "eviction": serve_eviction,
    "token": serve_token_request,
    **dict.fromkeys(CONNECT_SUBRESOURCES, serve_connect)}


def _open_store(config: ServerConfig) -> SQLiteStore | MemoryStore | EtcdStore:
    """The store ``config.storage`` names: the SQLite file in the data dir (its writer in a
    process of its own), memory (no file: everything is gone when the server stops), or the
    etcd cluster at ``--etcd-servers`` (shared with any other replica)."""
    if config.storage == "memory":
        return MemoryStore(retention=config.retention)
    if config.storage == "etcd":
        from kubewire.storage.etcd.client import EtcdConfig  # grpc: only for etcd
        from kubewire.storage.etcd.store import EtcdStore

        etcd = EtcdConfig(config.etcd_servers, ca_file=_text(config.etcd_cafile),
                          cert_file=_text(config.etcd_certfile),
                          key_file=_text(config.etcd_keyfile))
        return EtcdStore(etcd, prefix=config.etcd_prefix, retention=config.retention,
                         compaction_interval_s=config.etcd_compaction_interval_s)
    if config.sqlite_hub is not None:  # a worker of serve --workers: the parent's writer hub
        return SQLiteStore(config.data_dir / DATABASE_NAME, durability=config.durability,
                           retention=config.retention, hub=config.sqlite_hub)
    return SQLiteStore(config.data_dir / DATABASE_NAME, durability=config.durability,
                       retention=config.retention, writer_process=True)


def write_admin_kubeconfig(data_dir: Path, url: str, tls: TLSFiles | None) -> Path:
    """``DIR/kubeconfig``: the admin's credentials for the server at ``url`` (written once by
    ``serve --workers``'s parent for all its workers)."""
    path = data_dir / "kubeconfig"
    if tls is None or tls.pki is None:
        text = kubeconfig_text(url, ca_cert=tls.client_ca.read_bytes() if tls else None)
    else:
        made = tls.pki
        admin = Credentials(client_cert=made.admin_cert.read_bytes(),
                            client_key=made.admin_key.read_bytes())
        text = kubeconfig_text(url, admin, ca_cert=made.ca_cert.read_bytes())
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.chmod(0o600)  # it holds the admin's key
    tmp.replace(path)
    return path


def _text(path: Path | None) -> str | None:
    return None if path is None else str(path)


def _auditor(config: ServerConfig) -> Auditor | None:
    if config.audit_log_path is None and config.audit_policy_file is None:
        return None  # the audit modules stay unimported
    from kubewire.server.observe.audit_log import Auditor
    from kubewire.server.observe.log_rotation import Rotation

    rotation = Rotation(config.audit_log_maxsize_mb, config.audit_log_maxbackup,
                        config.audit_log_maxage_days)
    return Auditor.from_files(config.audit_log_path, config.audit_policy_file, rotation)


class _Expiry:
    """Cancels a request's task at its deadline (a ``deadlines`` target)."""

    __slots__ = ("has_fired", "task")

    def __init__(self, task: asyncio.Task[object]) -> None:
        self.task = task
        self.has_fired = False

    def close(self) -> None:
        self.has_fired = True
        self.task.cancel()


def version_info() -> dict[str, str]:
    """``/version``: kube's version.Info shape; clients parse major/minor and gitVersion."""
    return {"major": "1", "minor": "32", "gitVersion": f"v1.32.0+kubewire.{__version__}",
            "gitCommit": "", "gitTreeState": "clean", "buildDate": "", "goVersion": "",
            "compiler": "python", "platform": "linux/amd64"}


# kube's routes/version.go answers with responsewriters.WriteRawJSON: json.MarshalIndent with
# two spaces and no final newline (not the API serializer), and never gzipped.
VERSION_BODY = msgspec.json.format(msgspec.json.encode(version_info()), indent=2)

# What the import made (the server's modules: functions, classes, tables, compiled patterns, and
# the libraries under them) lives as long as the process. Frozen (``gc.freeze``), it is left out
# of the collector's passes: the full pass that came during a process's first server start
# walked all of it (~50,000 objects, ~15 ms of a ~55 ms start); later passes walk only what was
# made since. Nothing frozen is freed by the collector, so garbage cycles made before this line
# (few, by the import machinery) stay; objects made afterwards are collected as ever.
gc.freeze()


def storage_failure(err: StorageError) -> StatusError:
    """What a client gets when the store fails: kube-apiserver relays a raw etcd error as a 500
    with its text and no reason (``ErrorToAPIStatus``); a store that did not answer in time is
    answered as the request's deadline is (kube gives etcd calls no shorter deadline). etcd's
    request-too-large is kube's 413."""
    if isinstance(err, ValueTooLargeError):
        return RequestEntityTooLarge(f"Request entity too large: the object is {err.size} bytes, "
                                     f"the limit is {err.limit}")
    if isinstance(err, StorageTimeoutError):
        return deadline_exceeded()
    return StatusError(str(err))


def _loopback_ca(tls: TLSFiles | None) -> bytes | None:
    """The CA the components verify this server with: kubewire's own, when it made the
    serving certificate (None: a user's certificate, whose CA is not known; loopback only)."""
    if tls is None or tls.pki is None:
        return None
    return tls.pki.ca_cert.read_bytes()
