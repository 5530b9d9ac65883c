"""Who may do what, per request: TLS set-up, authentication, impersonation, authorization.

The order is kube-apiserver's filter chain: authenticate (401), then (the app audits here)
impersonate (``impersonation.py``: 400, or 403 for each part the requester may not
impersonate), then authorize the user the request runs as (403).

Request attributes follow kube-apiserver's ``RequestInfoFactory``: a resource request's verb
comes from the method and the path (``list`` becomes ``watch`` with ``watch=true`` or under
``/watch/``; DELETE on a collection is ``deletecollection``; a list or watch whose field
selector requires ``metadata.name=X`` asks for X by name); a path under ``/api/VERSION/`` or
``/apis/GROUP/VERSION/`` that no route serves is still a resource request, as kube parses it
(``unrouted_attributes``); any other path is a non-resource request whose verb is the
lower-cased method. ``/healthz``, ``/livez``, ``/readyz`` and
``/version`` are open to anyone (kube's anonymous user, as kube 1.32 with anonymous
authentication limited to those paths); every other path needs credentials (401 without),
unless ``--anonymous-auth`` makes a request without them ``system:anonymous`` everywhere,
authorized as any user's (kube's default).
Credentials that do not authenticate are 401 on every path, the public ones too: kube's
authenticator fails on them before it would fall back to anonymous (``union.NewFailOnError``).
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from kubewire.selectors.errors import SelectorError
from kubewire.selectors.fields import parse_field_selector
from kubewire.server.access import impersonation
from kubewire.server.access.authn import (
    ANONYMOUS_USER,
    Authenticator,
    InvalidCredentials,
    IssuedTokens,
    TokenFile,
    UserInfo,
)
from kubewire.server.access.authorizers import Chain, build_chain, parse_modes
from kubewire.server.access.authz import Attributes, forbidden, load_policy_file
from kubewire.server.access.rbac_objects import CachedRbacObjects
from kubewire.server.access.service_accounts import ServiceAccountTokens
from kubewire.server.context import ServerConfig, ServerContext
from kubewire.server.request.query_params import optional_bool
from kubewire.server.request.routes import Route, is_watch
from kubewire.server.wire.http_messages import Request
from kubewire.server.wire.websocket import BearerProtocolError, bearer_token
from kubewire.status import Unauthorized

if TYPE_CHECKING:
    from kubewire.server.access.client_certs import ClientCertificates
    from kubewire.server.access.pki import ServerPKI

log = logging.getLogger(__name__)

PUBLIC_PATHS = frozenset({"/healthz", "/livez", "/readyz", "/version"})
_WRITE_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}
_decode = msgspec.json.Decoder(dict[str, Any]).decode
INSECURE_USER = UserInfo("kubewire-insecure", "", ("system:masters", "system:authenticated"))


def token_file_path(config: ServerConfig) -> Path:
    """``--token-auth-file``, else ``DIR/tokens.csv`` (where ``kubewire user --token`` writes)."""
    return config.token_auth_file or config.data_dir / "tokens.csv"


@dataclass(frozen=True, slots=True)
class TLSFiles:
    cert: Path
    key: Path
    client_ca: Path
    pki: ServerPKI | None  # set when kubewire made the certificates itself


def tls_files(config: ServerConfig) -> TLSFiles:
    """The serving pair and client CA: the user's own files, or ones made in ``DIR/pki``."""
    from kubewire.server.access.pki import ensure_server_pki  # cryptography: only when serving TLS

    made = ensure_server_pki(config.data_dir / "pki", config.tls_sans)
    if config.tls_cert_file and config.tls_key_file:
        return TLSFiles(config.tls_cert_file, config.tls_key_file,
                        config.client_ca_file or made.ca_cert, made)
    return TLSFiles(made.serving_cert, made.serving_key, config.client_ca_file or made.ca_cert,
                    made)


def cluster_ca(config: ServerConfig, files: TLSFiles | None) -> bytes | None:
    """The CA a pod would verify this server with (what kube publishes as ``kube-root-ca.crt``):
    the CA kubewire made when it made the serving certificate too; with ``--insecure-http`` the
    one an earlier TLS start made in ``DIR/pki``, if any. None when the user brought the serving
    pair (its CA is not known) or no CA was ever made."""
    if files is None:
        path = config.data_dir / "pki" / "ca.crt"
        return path.read_bytes() if path.is_file() else None
    if files.pki is None or files.cert != files.pki.serving_cert:
        return None
    return files.pki.ca_cert.read_bytes()


def server_ssl_context(files: TLSFiles) -> ssl.SSLContext:
    """TLS 1.2+; client certificates asked for and never required, and any accepted in the
    handshake, as Go's ``tls.RequestClientCert``: each request verifies its connection's
    certificate (``client_certs.py``), so a bad one costs that credential, not the connection.

    No TLS 1.3 session tickets: OpenSSL makes and sends two after every handshake. Kubernetes
    clients keep their connections open and do not resume sessions, so the work is wasted, and
    with glibc's default malloc settings it left ~8 KB more of each idle connection resident
    (``python -m bench.idle_memory --only tls``; see ``cli.mmap_tls_read_buffers``). TLS 1.2
    tickets stay: they keep no state in the server, while without them OpenSSL would keep each
    TLS 1.2 session in its server-side cache.
    """
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(files.cert, files.key)
    ctx.load_verify_locations(files.client_ca)
    ctx.set_alpn_protocols(["http/1.1"])
    ctx.num_tickets = 0
    from kubewire.server.access.client_certs import request_client_certificates

    request_client_certificates(ctx)  # last: it checks the context's settings
    return ctx


class Decisions(Protocol):
    """What ``Access.admit`` reports as it decides (an audit record records it)."""

    def impersonated(self, user: UserInfo) -> None: ...

    def authorized(self, allowed: bool, reason: str) -> None: ...


class Access:
    """Authenticates and authorizes each request; ``open`` when serving insecure HTTP alone."""

    def __init__(self, config: ServerConfig, tls: TLSFiles | None = None,
                 ctx: ServerContext | None = None) -> None:
        tokens = TokenFile(token_file_path(config))
        # the flags first (kube validates them before it reads any file)
        modes = parse_modes(config.authorization_mode,
                            config.authorization_policy_file is not None)
        policies = (load_policy_file(config.authorization_policy_file)
                    if config.authorization_policy_file else None)
        service_accounts = None
        if ctx is not None:  # tokens name objects: accepted only where they can be looked up
            service_accounts = ServiceAccountTokens(config, CachedObjects(ctx))
        # the file's tokens, behind the ones the server issues its components (``loopback``)
        self.loopback = IssuedTokens(tokens)
        self.authenticator = Authenticator(self.loopback, service_accounts)
        self.client_certs: ClientCertificates | None = None
        if tls is not None:
            from kubewire.server.access.client_certs import ClientCertificates

            self.client_certs = ClientCertificates.from_file(tls.client_ca)
        rbac = CachedRbacObjects(ctx) if ctx is not None else None
        # the union of system:masters and the modes (kube's chain): ``decide``, ``authorize``,
        # ``rules_for``
        self.authorizer: Chain = build_chain(modes, policies, rbac)
        # --insecure-http without a token file: a local sandbox where everyone is admin.
        self.open = config.insecure_http and not config.token_auth_file
        self.anonymous = config.anonymous_auth  # system:anonymous on every path

    def user(self, request: Request, anonymous: bool = False) -> UserInfo:
        """The request's user; 401 for bad credentials and for anonymous requests (with
        ``anonymous``, for a public path, or with ``--anonymous-auth`` on any, a request
        without credentials is ``system:anonymous``; bad credentials are still 401)."""
        if self.open:
            return INSECURE_USER
        if isinstance(request.authenticated, UserInfo):
            return request.authenticated  # on its head, before the body (``authenticate_head``)
        authorization = request.header("authorization")
        try:
            if not authorization:
                token = bearer_token(request.headers)  # a browser's WebSocket carries it here
                authorization = f"Bearer {token}" if token else ""
            certificate = (self.client_certs.verdict(request.extra("ssl_object"))
                           if self.client_certs is not None else None)
            user = self.authenticator.authenticate(authorization, certificate)
        except (InvalidCredentials, BearerProtocolError) as err:
            log.debug("Unable to authenticate the request: %s", err)
            raise Unauthorized("Unauthorized") from None
        if user is ANONYMOUS_USER and not (anonymous or self.anonymous):
            raise Unauthorized("Unauthorized")
        return user

    def check(self, request: Request, route: Route | None) -> UserInfo | None:
        """Raise the Status a request must get before it is served; None for public paths.

        Returns the user the request runs as (the impersonated one, if it impersonates)."""
        if is_public(request.path):
            self.user(request, anonymous=True)  # bad credentials: 401 here too
            return None
        return self.admit(request, route, self.user(request))

    def admit(self, request: Request, route: Route | None, requestor: UserInfo,
              decisions: Decisions | None = None) -> UserInfo:
        """Impersonation, then authorization, for an authenticated ``requestor`` (kube's
        filter order): the user the request runs as, or the Status it gets. ``decisions``
        hears of each outcome (the audit record)."""
        user = self.impersonate(request, requestor)
        if decisions is not None and user is not requestor:
            decisions.impersonated(user)
        if user is not INSECURE_USER:
            attrs = attributes(user, request, route)
            allowed, reason = self.authorizer.authorize(attrs)
            if decisions is not None:
                decisions.authorized(allowed, reason)
            if not allowed:
                raise forbidden(attrs, reason)
        return user

    def impersonate(self, request: Request, requestor: UserInfo) -> UserInfo:
        """The user ``Impersonate-*`` headers ask for, each part authorized for ``requestor``
        (``impersonation.py``); ``requestor`` itself when there are none. The headers are
        dropped afterwards, as kube does."""
        if not impersonation.is_requested(request.headers):
            return requestor
        wanted = impersonation.wanted(list(request.headers), request.header_values)
        for item in wanted:
            attrs = item.attributes(requestor)
            allowed, reason = self.authorizer.authorize(attrs)
            if not allowed:
                raise forbidden(attrs, reason)
        request.drop_headers(impersonation.consumed_headers(list(request.headers)))
        user = impersonation.impersonated_user(wanted)
        log.debug("%s is impersonating %s", user_text(requestor), user_text(user))
        return user

    def authenticate_head(self, request: Request) -> None:
        """Authentication alone, on a request's head before its body is read (kube's filters
        authenticate before any handler reads a body): raises ``Unauthorized`` as ``check``
        would, so a client without credentials is answered before it can send a body."""
        request.authenticated = self.user(request, anonymous=is_public(request.path))


class CachedObjects:
    """Core objects as the watch caches hold them now (``ObjectLookup``)."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx

    def current(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        resource = self.ctx.registry.lookup("", "v1", plural)
        if resource is None:
            return None
        found = self.ctx.caches.for_resource(resource).get(resource.storage_key(namespace, name))
        return None if found is None else _decode(found.value)


def is_public(path: str) -> bool:
    """Open to anyone, without credentials (kube's public-info paths)."""
    return path in PUBLIC_PATHS or path.rstrip("/") in PUBLIC_PATHS


def user_text(user: UserInfo) -> str:
    """kube's ``userString`` for its log: ``name[group,...]``."""
    name = user.name or "<empty>"
    return f"{name}[{','.join(user.groups)}]" if user.groups else name


def resource_verb(request: Request, route: Route) -> str:
    """requestinfo.go ``NewRequestInfo``: a GET is ``watch`` when it is served as one
    (``is_watch``), else ``list`` of a collection and ``get`` of an object."""
    method = request.method
    if method in ("GET", "HEAD"):
        if is_watch(method, route, request.query):
            return "watch"
        return "list" if route.is_collection else "get"
    if method == "DELETE":
        return "deletecollection" if route.is_collection else "delete"
    return _WRITE_VERBS.get(method, method.lower())


def attributes(user: UserInfo, request: Request, route: Route | None) -> Attributes:
    if route is None:
        return unrouted_attributes(user, request)
    resource = route.resource
    namespace = route.namespace
    if resource.kind == "Namespace" and route.name:
        namespace = route.name  # kube: a namespace's own requests are in that namespace
    verb = resource_verb(request, route)
    name = route.name
    if not name and verb in ("list", "watch"):
        name = selected_name(request.query)
    return Attributes(user=user, verb=verb, path=request.path,
                      resource_request=True, namespace=namespace, api_group=resource.group,
                      api_version=resource.version, resource=resource.plural,
                      subresource=route.subresource, name=name)


_SPECIAL_VERBS = frozenset({"proxy", "watch"})
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_METHOD_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update",
                 "PATCH": "patch", "DELETE": "delete"}


def unrouted_attributes(user: UserInfo, request: Request) -> Attributes:
    """A path no route serves, read as kube's ``RequestInfoFactory`` reads every path: under
    ``/api/VERSION/...`` or ``/apis/GROUP/VERSION/...`` a resource request (kube authorizes it
    before it finds no such resource: 403 for who may not, 404 for who may), anything else a
    non-resource path whose verb is the method's."""
    method = request.method
    path = request.path
    non_resource = Attributes(user=user, verb="get" if method == "HEAD" else method.lower(),
                              path=path)
    parts = path.strip("/").split("/")
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return non_resource
    group, rest = "", parts[1:]
    if parts[0] == "apis":
        if len(rest) < 3:
            return non_resource
        group, rest = rest[0], rest[1:]
    version, rest = rest[0], rest[1:]
    if rest[0] in _SPECIAL_VERBS:
        if len(rest) < 2:
            return non_resource  # kube: "unable to determine kind and namespace from url"
        verb, rest = rest[0], rest[1:]
    else:
        verb = _METHOD_VERBS.get(method, "")
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    name = rest[1] if len(rest) >= 2 else ""
    subresource = rest[2] if len(rest) >= 3 and verb != "proxy" else ""
    if not name and verb == "get":
        verb = "watch" if optional_bool(request.query, "watch") else "list"
        name = selected_name(request.query)
    if not name and verb == "delete":
        verb = "deletecollection"
    return Attributes(user=user, verb=verb, path=path, resource_request=True,
                      namespace=namespace, api_group=group, api_version=version,
                      resource=rest[0], subresource=subresource, name=name)


def selected_name(query: Mapping[str, list[str]]) -> str:
    """requestinfo.go: a list or watch whose ``fieldSelector`` requires ``metadata.name`` to
    equal a valid path segment name asks for that object by name (so a rule with
    ``resourceNames`` allows it: ``kubectl get pod -w``, informers on one object); "" when it
    does not, or the selector does not parse (kube leaves the name unset then)."""
    values = query.get("fieldSelector")
    if not values:
        return ""
    try:
        name = parse_field_selector(values[0]).exact("metadata.name")
    except SelectorError:
        return ""
    if not name or name in (".", "..") or "/" in name or "%" in name:  # IsValidPathSegmentName
        return ""
    return name
