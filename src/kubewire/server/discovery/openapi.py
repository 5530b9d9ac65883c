"""``/openapi/v3``: one OpenAPI 3.0 document per served group-version, built from schema facts.

Pure (paths and values in, bytes out). Documents are built lazily, once per registry, and kept
as encoded bytes; each is named in the root document by the upper-case hex SHA-512 of those
bytes, which is also its ETag (kube-openapi ``pkg/handler3/handler.go``). What clients rely on
(objects-and-clients.md §4.5):

- kubectl ``create/apply/replace`` send ``fieldValidation=Strict`` only when the kind's PATCH
  operation lists a ``fieldValidation`` parameter (cli-runtime ``query_param_verifier_v3.go``
  ``supportsQueryParamV3``), matched by the operation's ``x-kubernetes-group-version-kind`` map;
- ``kubectl explain`` finds the GVK on a list/get operation of the resource's path, then the
  component schema whose ``x-kubernetes-group-version-kind`` list holds it
  (kubectl ``explain/v2/templates/plaintext.tmpl``).

Operations are kube's (kube-apiserver v1.32 ``api/openapi-spec/v3``), built with
``kubewire.schema.openapi_operations`` (operationIds, tags, the ``401`` answer, GVKs, hoisted
parameters: shared with the documents of custom resources). This module lays out a built-in
kind's paths as installer.go does. The pod subresources kube answers with a string (``log``,
and ``exec``/``attach``/``portforward``, whose GVK is the options kind, ``PodExecOptions``) list
kube's options as path parameters (``STREAM_SUBRESOURCES``); ``binding``, ``eviction`` and
``serviceaccounts/token`` are creates of their own kinds, and create-only ``bindings`` has a
``post`` alone. Media types are the ones kubewire answers with (JSON; text for a log).

``/openapi/v2`` is ``openapi_v2``'s, answered before this module is asked.

Documents carry no descriptions of kube's: no upstream prose is copied (a group-version served
from CRDs has their documents, ``build_document``, whose schemas keep the CRD's own).
"""

from __future__ import annotations

import hashlib
import html
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import NamedTuple
from weakref import WeakKeyDictionary

import msgspec

from kubewire.go_json_bytes import GoJSONEncoder
from kubewire.json_types import JSON
from kubewire.resources import Registry, Resource
from kubewire.schema import kind_info, named_types
from kubewire.schema.openapi_operations import (
    DELETE_COLLECTION_PARAMS,
    DELETE_OPTIONS,
    DELETE_PARAMS,
    LIST_PARAMS,
    OPENAPI_INFO,
    PATCH,
    PATCH_PARAMS,
    PATCH_TYPES,
    SMP_TYPE,
    STATUS,
    WATCH_EVENT,
    WRITE_PARAMS,
    Operations,
    component_schemas,
    content,
    gvk_extension,
    iter_refs,
    path_item,
    request_body,
)
from kubewire.server.apiextensions.crd.openapi_docs import openapi_v3_paths_and_schemas
from kubewire.status import NotFound

OPENAPI_V3_PATH = "/openapi/v3"
# Subresource -> (HTTP methods served, apiVersion and kind of its body when not the parent's).
# kube serves scale as autoscaling/v1 Scale for every scalable kind; a POST is a create
# (x-kubernetes-action ``post``) whose body and answer are the named kind.
SUBRESOURCES: Mapping[str, tuple[tuple[str, ...], tuple[str, str] | None]] = {
    "status": (("get", "put", "patch"), None), "finalize": (("put",), None),
    "scale": (("get", "put", "patch"), ("autoscaling/v1", "Scale")),
    "ephemeralcontainers": (("get", "put", "patch"), None),
    "binding": (("post",), ("v1", "Binding")), "eviction": (("post",), ("policy/v1", "Eviction")),
    "token": (("post",), ("authentication.k8s.io/v1", "TokenRequest"))}


class StreamSubresource(NamedTuple):
    """A subresource whose answer kube documents as a string (a log, a stream it proxies to a
    kubelet): its options are query parameters of the path, and it has no request body.

    ``options_kind`` is the GVK kind of a ``connect`` operation (``PodExecOptions``, in the
    parent's group-version); None for a ``get`` (log), whose GVK is the parent's.
    """

    methods: tuple[str, ...]
    action: str
    options_kind: str | None
    params: tuple[str, ...]
    produces: tuple[str, ...]


_CONNECT = ("get", "post")
_STDIO = ("stderr", "stdin", "stdout", "tty")
# registry/core/pod/rest (log.go, subresources.go): kube's parameters, pretty only on log
STREAM_SUBRESOURCES: Mapping[str, StreamSubresource] = {
    "log": StreamSubresource(("get",), "get", None, (
        "container", "follow", "insecureSkipTLSVerifyBackend", "limitBytes", "pretty", "previous",
        "sinceSeconds", "stream", "tailLines", "timestamps"), ("text/plain", "application/json")),
    "exec": StreamSubresource(_CONNECT, "connect", "PodExecOptions",
                              ("command", "container", *_STDIO), ("*/*",)),
    "attach": StreamSubresource(_CONNECT, "connect", "PodAttachOptions", ("container", *_STDIO),
                                ("*/*",)),
    "portforward": StreamSubresource(_CONNECT, "connect", "PodPortForwardOptions", ("ports",),
                                     ("*/*",)),
}
_ITEM_METHODS = ("get", "put", "patch", "delete")
# installer.go's verb per HTTP method of an item (or subresource) path
_VERBS = {"get": "read", "put": "replace", "patch": "patch", "post": "create", "delete": "delete"}

_encode = GoJSONEncoder(order="sorted").encode  # handler3's json.Marshal: Go's HTML escapes


class OpenAPIResponse(NamedTuple):
    """An HTTP answer: status, body, Content-Type and further headers."""

    status: int
    body: bytes
    content_type: str
    headers: list[tuple[str, str]]


class OpenAPIDocument(NamedTuple):
    """One encoded document and its hash (upper-case hex SHA-512 of ``body``)."""

    body: bytes
    hash: str


# --- paths -------------------------------------------------------------------------------------

class _Target(NamedTuple):
    """What the operations of one path act on: a kind, how kube names and marks its operations
    (``ops``), its schema, and ``scope`` (``Namespaced`` or "")."""

    resource: Resource
    ops: Operations
    type_name: str
    scope: str

    def method(self, method: str, sub: str = "") -> dict[str, JSON]:
        """The ``get``/``put``/``patch``/``delete``/``post`` operation on this kind (or on its
        subresource ``sub``, whose body is this target's kind)."""
        own, ops = self.type_name, self.ops
        name = _VERBS[method] + self.scope + self.resource.kind + sub.title()
        if method == "get":
            return ops.operation(name, "get", (), {"200": own})
        if method == "delete":
            body = own if self.resource.return_deleted_object else STATUS
            return ops.operation(name, "delete", DELETE_PARAMS, {"200": body, "202": body},
                                 request_body(("*/*",), DELETE_OPTIONS, required=False))
        if method == "patch":
            media = (*PATCH_TYPES, SMP_TYPE)  # built-in kinds (a CRD's: openapi_docs)
            return ops.operation(name, "patch", PATCH_PARAMS, {"200": own, "201": own},
                                 request_body(sorted(media), PATCH))
        codes = ("200", "201", "202") if method == "post" else ("200", "201")
        return ops.operation(name, method, WRITE_PARAMS, dict.fromkeys(codes, own),
                             request_body(("*/*",), own))

    def collection(self, list_type: str | None) -> dict[str, JSON]:
        """A collection path's ``post`` and, when the kind has a list, ``get`` (list) and
        ``delete`` (deletecollection); a create-only kind (bindings) has ``post`` alone."""
        ops = {"post": self.method("post")}
        if list_type is not None:
            kind = self.scope + self.resource.kind
            ops["get"] = self.ops.operation("list" + kind, "list", LIST_PARAMS,
                                            {"200": list_type})
            ops["delete"] = self.ops.operation(
                "deleteCollection" + kind, "deletecollection", DELETE_COLLECTION_PARAMS,
                {"200": STATUS}, request_body(("*/*",), DELETE_OPTIONS, required=False))
        return ops

    def watch(self, action: str, name: str) -> dict[str, JSON]:
        return {"get": self.ops.operation("watch" + name, action, LIST_PARAMS,
                                          {"200": WATCH_EVENT})}

    def stream(self, sub: str, spec: StreamSubresource) -> dict[str, JSON]:
        """The operations of a subresource kube answers with a string (log, exec, ...)."""
        gvk = self.ops.gvk
        options_gvk = (gvk_extension(gvk["group"], gvk["version"], spec.options_kind)
                       if spec.options_kind else None)
        answers = {"200": content(spec.produces, {"type": "string"})}
        ops: dict[str, JSON] = {}
        for method in spec.methods:
            verb = f"connect{method.title()}" if spec.action == "connect" else _VERBS[method]
            name = verb + self.scope + self.resource.kind + sub.title()
            ops[method] = self.ops.answer(name, spec.action, answers, options_gvk)
        return ops


def _target(resource: Resource, api_version: str, kind: str, scope: str = "") -> _Target:
    info = kind_info(api_version, kind)
    if info is None:
        raise KeyError(f"no schema facts for {api_version} {kind}")
    gvk = gvk_extension(info.group, info.version, info.kind)
    return _Target(resource, Operations.of(resource.group, resource.version, gvk),
                   info.type_name, scope)


def resource_paths(resource: Resource) -> dict[str, JSON]:
    """Every path kubewire serves for ``resource`` with its operations (routes.py shapes).

    Raises KeyError when the schema facts lack the kind, its list or a subresource's kind.
    """
    scope = "Namespaced" if resource.namespaced else ""
    own = _target(resource, resource.api_version, resource.kind, scope)
    base, plural = resource.base_path, resource.plural
    ns_params = ("namespace",) if resource.namespaced else ()
    coll = f"{base}/namespaces/{{namespace}}/{plural}" if ns_params else f"{base}/{plural}"
    if resource.create_only:  # a Creater alone (bindings): POST to the collection
        return {coll: path_item(own.collection(None), ns_params)}
    list_type = _target(resource, resource.api_version, resource.list_kind).type_name
    everywhere = own._replace(scope="")
    item_params = (*ns_params, "name")
    kind = resource.kind
    watch = coll.replace(base, f"{base}/watch", 1)
    paths: dict[str, JSON] = {
        coll: path_item(own.collection(list_type), ns_params),
        f"{coll}/{{name}}": path_item({m: own.method(m) for m in _ITEM_METHODS}, item_params),
        watch: path_item(own.watch("watchlist", f"{scope}{kind}List"), ns_params),
        f"{watch}/{{name}}": path_item(own.watch("watch", scope + kind), item_params),
    }
    if ns_params:  # the all-namespaces list and watch
        every = everywhere.ops.operation(f"list{kind}ForAllNamespaces", "list", LIST_PARAMS,
                                         {"200": list_type})
        paths[f"{base}/{plural}"] = path_item({"get": every}, ())
        paths[f"{base}/watch/{plural}"] = path_item(
            everywhere.watch("watchlist", f"{kind}ListForAllNamespaces"), ())
    for sub in resource.subresources:
        path = f"{coll}/{{name}}/{sub}"
        stream = STREAM_SUBRESOURCES.get(sub)
        if stream is not None:
            paths[path] = path_item(own.stream(sub, stream), item_params, stream.params)
            continue
        methods, body_kind = SUBRESOURCES.get(sub, ((), None))
        target = own if body_kind is None else _target(resource, *body_kind, scope)
        if methods:
            paths[path] = path_item({m: target.method(m, sub) for m in methods}, item_params)
    return paths


# --- documents ---------------------------------------------------------------------------------

def build_document(registry: Registry, group: str, version: str) -> dict[str, JSON]:
    """The OpenAPI 3.0 document of one served group-version (not yet encoded).

    A resource served from a CustomResourceDefinition (``resource.crd``) has the paths and
    schemas apiextensions-apiserver builds from it (``apiextensions.openapi_docs``); the
    others, and the group-version's named types when it has any built-in kind, come from the
    schema facts.
    """
    paths: dict[str, JSON] = {}
    crd_schemas: dict[str, JSON] = {}
    built_in = False
    for resource in registry:
        if (resource.group, resource.version) != (group, version) or resource.computed:
            continue  # computed kinds (metrics.k8s.io): no schema facts, as kubewire has none
        crd = getattr(resource, "crd", None)  # set on entries a CRD serves
        if crd is None:
            built_in = True
            paths.update(resource_paths(resource))
        else:
            crd_paths, schemas = openapi_v3_paths_and_schemas(crd, resource.version)
            paths.update(crd_paths)
            crd_schemas.update(schemas)
    api_version = f"{group}/{version}" if group else version
    seeds = [*(named_types(api_version) if built_in else ()), *iter_refs(paths)]
    schemas = {**component_schemas([s for s in seeds if s not in crd_schemas]), **crd_schemas}
    return {"openapi": "3.0.0", "info": dict(OPENAPI_INFO), "paths": dict(sorted(paths.items())),
            "components": {"schemas": dict(sorted(schemas.items()))}}


def encode_document(document: Mapping[str, JSON]) -> OpenAPIDocument:
    """Compact JSON with sorted keys and Go's HTML escapes (handler3's ``json.Marshal``), and
    its hash (kube-openapi ``computeETag``)."""
    body = _encode(document)
    return OpenAPIDocument(body, hashlib.sha512(body).hexdigest().upper())


class OpenAPIDocuments:
    """The encoded documents of one registry, each built on first use and then kept."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        described = {(r.group, r.version) for r in registry if not r.computed}
        self._paths = {(f"apis/{g}/{v}" if g else f"api/{v}"): (g, v)  # keys of the root
                       for g, v in registry.group_versions() if (g, v) in described}
        self._documents: dict[str, OpenAPIDocument] = {}
        self._root: OpenAPIDocument | None = None

    def group_version_paths(self) -> list[str]:
        """``api/v1``, ``apis/apps/v1``, ... sorted."""
        return sorted(self._paths)

    def document(self, gv_path: str) -> OpenAPIDocument | None:
        """The document at ``api/v1``, ``apis/apps/v1``, ...; None when not served."""
        found = self._documents.get(gv_path)
        if found is None and gv_path in self._paths:
            found = encode_document(build_document(self._registry, *self._paths[gv_path]))
            self._documents[gv_path] = found
        return found

    def root(self) -> OpenAPIDocument:
        """``{"paths": {gv: {"serverRelativeURL": "/openapi/v3/<gv>?hash=<HASH>"}}}``."""
        if self._root is None:
            paths = {gv: {"serverRelativeURL": f"{OPENAPI_V3_PATH}/{gv}?hash={doc.hash}"}
                     for gv in self.group_version_paths() if (doc := self.document(gv))}
            self._root = encode_document({"paths": paths})
        return self._root


_BY_REGISTRY: WeakKeyDictionary[Registry, OpenAPIDocuments] = WeakKeyDictionary()


def documents_for(registry: Registry) -> OpenAPIDocuments:
    """The shared, lazily built documents of ``registry``."""
    found = _BY_REGISTRY.get(registry)
    if found is None:
        found = _BY_REGISTRY[registry] = OpenAPIDocuments(registry)
    return found


# --- HTTP --------------------------------------------------------------------------------------

def openapi_response(registry: Registry, path: str, query: Mapping[str, Sequence[str]],
                     headers: Mapping[str, str] | None = None, *,
                     now: datetime | None = None) -> OpenAPIResponse | None:
    """Answer ``/openapi/v3``, ``/openapi/v3/<gv>`` and (404) other ``/openapi/`` paths; None
    otherwise (``/openapi/v2`` is ``openapi_v2.openapi_v2_response``'s, asked first).

    ``headers`` maps lower-case names to values (``accept``, ``if-none-match``); ``now`` is
    the clock for ``Expires``. Semantics of kube-openapi ``handler3``: a ``hash`` that matches
    gives ``Cache-Control: public, immutable``; a stale one a 301 to the current URL; a
    matching ``If-None-Match`` a 304; an Accept without JSON a 406. Any other ``/openapi/``
    path is the 404 Status of an unknown path.
    """
    headers = headers or {}
    if path == OPENAPI_V3_PATH:
        return _serve(documents_for(registry).root(), headers, [])
    if not path.startswith("/openapi/"):
        return None
    gv_path = path.removeprefix(OPENAPI_V3_PATH + "/") if path.startswith(OPENAPI_V3_PATH) else ""
    document = documents_for(registry).document(gv_path) if gv_path else None
    if document is None:
        status = NotFound("the server could not find the requested resource", {})
        # msgspec keeps to_status()'s key order, which is kube's
        return OpenAPIResponse(404, msgspec.json.encode(status.to_status()), "application/json", [])
    if not accepts_json(headers.get("accept", "")):
        return OpenAPIResponse(406, b"", "text/plain; charset=utf-8", [("Vary", "Accept")])
    hashes = query.get("hash") or [""]
    extra = [("Vary", "Accept")]
    if hashes[0]:
        if hashes[0] != document.hash:
            return _redirect(f"{OPENAPI_V3_PATH}/{gv_path}?hash={document.hash}", document.hash)
        extra += [("Cache-Control", "public, immutable"), ("Expires", _expires(now))]
    return _serve(document, headers, extra)


def _serve(document: OpenAPIDocument, headers: Mapping[str, str],
           extra: list[tuple[str, str]]) -> OpenAPIResponse:
    """Go ``http.ServeContent``: 304 when If-None-Match lists the ETag (weakly) or ``*``."""
    etag = f'"{document.hash}"'
    out = [*extra, ("Etag", etag)]
    tags = {tag.strip().removeprefix("W/") for tag in headers.get("if-none-match", "").split(",")}
    if etag in tags or "*" in tags:
        return OpenAPIResponse(304, b"", "application/json", out)
    return OpenAPIResponse(200, document.body, "application/json", out)


def _redirect(url: str, document_hash: str) -> OpenAPIResponse:
    """Go ``http.Redirect`` for a GET: 301, Location and a one-line HTML body."""
    body = f'<a href="{html.escape(url)}">Moved Permanently</a>.\n\n'.encode()
    headers = [("Vary", "Accept"), ("Etag", f'"{document_hash}"'), ("Location", url)]
    return OpenAPIResponse(301, body, "text/html; charset=utf-8", headers)


def accepts_json(accept: str) -> bool:
    """Whether an Accept header admits ``application/json`` (empty means ``*/*``)."""
    if not accept.strip():
        return True
    for clause in accept.split(","):
        media, *params = (part.replace(" ", "").lower() for part in clause.split(";"))
        refused = any(p.startswith("q=") and not p[2:].strip("0.") for p in params)  # q=0
        if not refused and media in ("application/json", "application/*", "*/*"):
            return True
    return False


def _expires(now: datetime | None) -> str:
    """One year on, in Go's ``time.RFC1123`` layout (the zone is UTC)."""
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    try:
        later = moment.replace(year=moment.year + 1)
    except ValueError:  # 29 February: Go's AddDate normalizes to 1 March
        later = moment.replace(year=moment.year + 1, month=3, day=1)
    return later.strftime("%a, %d %b %Y %H:%M:%S UTC")


__all__ = ["OpenAPIDocument", "OpenAPIDocuments", "OpenAPIResponse", "build_document",
           "documents_for", "openapi_response"]
