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

``/openapi/v2`` is ``openapi_v2``'s, answered before this module is asked.

Documents carry no descriptions: no upstream prose is copied.
"""

from __future__ import annotations

import hashlib
import html
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from functools import cache
from typing import NamedTuple
from weakref import WeakKeyDictionary

import msgspec

from kubewire.json_types import JSON
from kubewire.resources import Registry, Resource
from kubewire.schema import kind_info, kinds, named_type, named_types
from kubewire.status import NotFound

OPENAPI_V3_PATH = "/openapi/v3"
OPENAPI_INFO = {"title": "Kubernetes", "version": "v1.32.0"}

_REF_PREFIX = "#/components/schemas/"
_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
_DELETE_OPTIONS, _STATUS, _WATCH_EVENT, _PATCH = (
    _META + "DeleteOptions", _META + "Status", _META + "WatchEvent", _META + "Patch")

# Compact node types of the schema facts that OpenAPI spells differently (upstream v3 documents).
_INT, _NUMBER, _STRING = {"type": "integer"}, {"type": "number"}, {"type": "string"}
_COMPACT_TYPES: Mapping[str, Mapping[str, JSON]] = {
    "int-or-string": {"format": "int-or-string", "oneOf": [_INT, _STRING]},
    "quantity": {"oneOf": [_STRING, _NUMBER]}, "any": {}}

# Query parameters kube lists per action (kube-apiserver v1.32 api/openapi-spec/v3), limited to
# the ones kubewire reads. Types not listed here are strings.
PARAM_TYPES = {"allowWatchBookmarks": "boolean", "force": "boolean", "orphanDependents": "boolean",
                "sendInitialEvents": "boolean", "watch": "boolean", "gracePeriodSeconds": "integer",
                "limit": "integer", "timeoutSeconds": "integer"}
LIST_PARAMS = ("allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit",
                "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds",
                "watch")
WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation")
PATCH_PARAMS = (*WRITE_PARAMS, "force")
DELETE_PARAMS = ("dryRun", "gracePeriodSeconds", "orphanDependents", "propagationPolicy")
DELETE_COLLECTION_PARAMS = tuple(sorted(
    {*LIST_PARAMS, *DELETE_PARAMS} - {"allowWatchBookmarks", "watch"}))

PATCH_TYPES = ("application/apply-patch+yaml", "application/json-patch+json",
                "application/merge-patch+json")
SMP_TYPE = "application/strategic-merge-patch+json"  # built-in kinds only, not CRDs
_JSON_TYPES = ("application/json",)
_STREAM_TYPES = ("application/json", "application/json;stream=watch")

# Subresource -> (HTTP methods served, apiVersion and kind of its body when not the parent's).
# kube serves scale as autoscaling/v1 Scale for every scalable kind.
SUBRESOURCES: Mapping[str, tuple[tuple[str, ...], tuple[str, str] | None]] = {
    "status": (("get", "put", "patch"), None), "finalize": (("put",), None),
    "scale": (("get", "put", "patch"), ("autoscaling/v1", "Scale"))}
_ITEM_METHODS = ("get", "put", "patch", "delete")
_STREAMING_ACTIONS = frozenset({"list", "watch", "watchlist"})  # answer a stream with ?watch

_encode = msgspec.json.Encoder(order="sorted").encode


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


# --- schemas -----------------------------------------------------------------------------------

def schema_ref(type_name: str) -> dict[str, JSON]:
    """``{"$ref": "#/components/schemas/<type_name>"}``."""
    return {"$ref": _REF_PREFIX + type_name}


def convert_schema(raw: Mapping[str, JSON]) -> dict[str, JSON]:
    """A compact schema-facts node as an OpenAPI 3.0 schema.

    ``ref`` becomes ``$ref``; a reference with facts beside it (defaults, patch and list
    markers) is wrapped in ``allOf`` as upstream v3 documents do.
    """
    out: dict[str, JSON] = {}
    for key, value in raw.items():
        if key == "properties":
            out[key] = {name: convert_schema(node) for name, node in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, Mapping):
            out[key] = convert_schema(value)
        elif key == "type" and value in _COMPACT_TYPES:
            out.update(_COMPACT_TYPES[value])
        elif key != "ref":
            out[key] = value
    ref = raw.get("ref")
    if not ref:
        return out
    return {"allOf": [schema_ref(ref)], **out} if out else schema_ref(ref)


def iter_refs(value: JSON) -> Iterator[str]:
    """Every type name a ``$ref`` in ``value`` points at (depth first)."""
    if isinstance(value, Mapping):
        ref = value.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
            yield ref.removeprefix(_REF_PREFIX)
    if isinstance(value, Mapping | list):
        for item in value.values() if isinstance(value, Mapping) else value:
            yield from iter_refs(item)


@cache
def kind_gvks() -> Mapping[str, list[tuple[str, str, str]]]:
    """Type name -> the (group, version, kind) triples it is the schema of, sorted."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    for info in sorted(kinds(), key=lambda i: (i.group, i.version, i.kind)):
        out.setdefault(info.type_name, []).append((info.group, info.version, info.kind))
    return out


def gvk_extension(group: str, version: str, kind: str) -> dict[str, str]:
    return {"group": group, "kind": kind, "version": version}


def component_schemas(seeds: Sequence[str]) -> dict[str, JSON]:
    """The named types ``seeds`` and everything they reference, by upstream name.

    Kinds' schemas carry ``x-kubernetes-group-version-kind`` (a list, as upstream).
    Raises KeyError for a name the schema facts lack.
    """
    out: dict[str, JSON] = {}
    pending = list(seeds)
    while pending:
        name = pending.pop()
        if name in out:
            continue
        schema = convert_schema(named_type(name).raw)
        gvks = kind_gvks().get(name)
        if gvks:
            schema["x-kubernetes-group-version-kind"] = [gvk_extension(*g) for g in gvks]
        out[name] = schema
        pending.extend(ref for ref in iter_refs(schema) if ref not in out)
    return dict(sorted(out.items()))


# --- paths -------------------------------------------------------------------------------------

def _parameters(names: Sequence[str], path_params: Sequence[str] = ()) -> list[JSON]:
    params: list[JSON] = [{"in": "path", "name": name, "required": True,
                           "schema": {"type": "string", "uniqueItems": True}}
                          for name in path_params]
    params += [{"in": "query", "name": name,
                "schema": {"type": PARAM_TYPES.get(name, "string"), "uniqueItems": True}}
               for name in names]
    return sorted(params, key=lambda param: str(param["name"]))


def _content(media_types: Sequence[str], type_name: str) -> dict[str, JSON]:
    return {"content": {media: {"schema": schema_ref(type_name)} for media in media_types}}


def _body(media_types: Sequence[str], type_name: str, *, required: bool = True) -> JSON:
    return {**_content(media_types, type_name), **({"required": True} if required else {})}


class _Target(NamedTuple):
    """What the operations of one path act on: a kind's GVK and its schema."""

    resource: Resource
    gvk: dict[str, str]
    type_name: str

    def operation(self, action: str, params: Sequence[str], responses: Mapping[str, str],
                  request: JSON = None) -> dict[str, JSON]:
        media = _STREAM_TYPES if action in _STREAMING_ACTIONS else _JSON_TYPES
        op: dict[str, JSON] = {
            "responses": {code: _content(media, name) for code, name in responses.items()},
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": self.gvk,
        }
        if params:
            op["parameters"] = _parameters(params)
        if request:
            op["requestBody"] = request
        return op

    def method(self, method: str) -> dict[str, JSON]:
        """The ``get``/``put``/``patch``/``delete``/``post`` operation on this kind."""
        own = self.type_name
        if method == "get":
            return self.operation("get", (), {"200": own})
        if method == "delete":
            body = own if self.resource.return_deleted_object else _STATUS
            return self.operation("delete", DELETE_PARAMS, {"200": body, "202": body},
                                  _body(("*/*",), _DELETE_OPTIONS, required=False))
        if method == "patch":
            media = (*PATCH_TYPES, *(() if self.resource.is_custom else (SMP_TYPE,)))
            return self.operation("patch", PATCH_PARAMS, {"200": own, "201": own},
                                  _body(sorted(media), _PATCH))
        codes = ("200", "201", "202") if method == "post" else ("200", "201")
        return self.operation(method, WRITE_PARAMS, dict.fromkeys(codes, own),
                              _body(("*/*",), own))

    def collection(self, list_type: str, *, writable: bool) -> dict[str, JSON]:
        ops = {"get": self.operation("list", LIST_PARAMS, {"200": list_type})}
        if writable:
            ops["post"] = self.method("post")
            ops["delete"] = self.operation("deletecollection", DELETE_COLLECTION_PARAMS,
                                           {"200": _STATUS},
                                           _body(("*/*",), _DELETE_OPTIONS, required=False))
        return ops

    def watch(self, action: str) -> dict[str, JSON]:
        return {"get": self.operation(action, LIST_PARAMS, {"200": _WATCH_EVENT})}


def _target(resource: Resource, api_version: str, kind: str) -> _Target:
    info = kind_info(api_version, kind)
    if info is None:
        raise KeyError(f"no schema facts for {api_version} {kind}")
    return _Target(resource, gvk_extension(info.group, info.version, info.kind), info.type_name)


def _path_item(ops: dict[str, JSON], path_params: Sequence[str]) -> dict[str, JSON]:
    return {**ops, "parameters": _parameters(("pretty",), path_params)}


def resource_paths(resource: Resource) -> dict[str, JSON]:
    """Every path kubewire serves for ``resource`` with its operations (routes.py shapes).

    Raises KeyError when the schema facts lack the kind, its list or a subresource's kind.
    """
    own = _target(resource, resource.api_version, resource.kind)
    list_type = _target(resource, resource.api_version, resource.list_kind).type_name
    base, plural = resource.base_path, resource.plural
    ns_params = ("namespace",) if resource.namespaced else ()
    item_params = (*ns_params, "name")
    coll = f"{base}/namespaces/{{namespace}}/{plural}" if ns_params else f"{base}/{plural}"
    watch = coll.replace(base, f"{base}/watch", 1)
    paths: dict[str, JSON] = {
        coll: _path_item(own.collection(list_type, writable=True), ns_params),
        f"{coll}/{{name}}": _path_item({m: own.method(m) for m in _ITEM_METHODS}, item_params),
        watch: _path_item(own.watch("watchlist"), ns_params),
        f"{watch}/{{name}}": _path_item(own.watch("watch"), item_params),
    }
    if ns_params:  # the all-namespaces list and watch
        paths[f"{base}/{plural}"] = _path_item(own.collection(list_type, writable=False), ())
        paths[f"{base}/watch/{plural}"] = _path_item(own.watch("watchlist"), ())
    for sub in resource.subresources:
        methods, body_kind = SUBRESOURCES.get(sub, ((), None))
        target = own if body_kind is None else _target(resource, *body_kind)
        if methods:
            paths[f"{coll}/{{name}}/{sub}"] = _path_item({m: target.method(m) for m in methods},
                                                         item_params)
    return paths


# --- documents ---------------------------------------------------------------------------------

def build_document(registry: Registry, group: str, version: str) -> dict[str, JSON]:
    """The OpenAPI 3.0 document of one served group-version (not yet encoded)."""
    paths: dict[str, JSON] = {}
    for resource in registry:
        # a create-only kind (bindings) has no schema facts yet: undocumented, still served
        if (resource.group, resource.version) == (group, version) and not resource.create_only:
            paths.update(resource_paths(resource))
    api_version = f"{group}/{version}" if group else version
    seeds = [*named_types(api_version), *iter_refs(paths)]
    return {"openapi": "3.0.0", "info": dict(OPENAPI_INFO), "paths": dict(sorted(paths.items())),
            "components": {"schemas": component_schemas(seeds)}}


def encode_document(document: Mapping[str, JSON]) -> OpenAPIDocument:
    """Compact JSON with sorted keys, and its hash (kube-openapi ``computeETag``)."""
    body = _encode(document)
    return OpenAPIDocument(body, hashlib.sha512(body).hexdigest().upper())


class OpenAPIDocuments:
    """The encoded documents of one registry, each built on first use and then kept."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._paths = {(f"apis/{g}/{v}" if g else f"api/{v}"): (g, v)  # keys of the root
                       for g, v in registry.group_versions()}
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
