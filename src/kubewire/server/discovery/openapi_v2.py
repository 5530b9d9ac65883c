"""``/openapi/v2``: the one Swagger 2.0 document of everything served, as JSON or protobuf.

Pure (a registry and request headers in, an answer out); the document is built once per
registry, from the same schema facts as ``/openapi/v3`` (``openapi``), and kept as bytes.

Shape (kube-apiserver v1.32 ``/openapi/v2``): ``swagger``, ``info`` (as ``/openapi/v3``),
``paths``, ``definitions`` (named as upstream, ``io.k8s.api.core.v1.Pod``; kinds carry their
``x-kubernetes-group-version-kind`` list; patch strategies, merge keys and list/map types kept),
``securityDefinitions`` and ``security`` (``BearerToken``). Each path kubewire serves has kube's
operations: ``operationId`` as the apiserver names them (installer.go's ``listNamespacedPod``
with the group-version spliced in by ``endpoints/openapi.GetOperationIDAndTags``:
``listCoreV1NamespacedPod``), ``tags``, ``x-kubernetes-action`` and the GVK; parameters sit
where kube puts them (path-level for paths and watches and for those every operation of a
path lists, as kube-openapi's ``findCommonParameters``; per operation for the rest), inline
rather than under kube's hashed ``#/parameters/`` names, and only those kubewire reads (the
same lists as ``/openapi/v3``, which also describe the pod subresources and create-only
``bindings``). Media types are the ones kubewire answers with (JSON; text for a log).
Operations, parameters, path items and definitions are built with
``kubewire.schema.swagger_operations`` (shared with the documents of custom resources).
Compact facts become Swagger 2.0: ``int-or-string`` is ``string``/``int-or-string``, a quantity
``string``, free-form JSON a schema with no type; keys Swagger 2.0 lacks are dropped, since
gnostic refuses a document that has them, and so are defaults (kube's v2 has none). No
descriptions are copied, save the HTTP status texts a response must carry. Known differences
from kube's document: no discovery or ``/version`` paths, and ``DeleteOptions``/``WatchEvent``
list only the core GVK (as ``/openapi/v3``), not one per group-version.

Serving follows kube-openapi ``pkg/handler/handler.go`` (the version kube 1.32 vendors):

- Accept is parsed and ordered as ``goautoneg.ParseAccept`` does (by q, then specific before
  ``*``; no other ordering, q=0 not excluded), and the first clause matching, in turn,
  ``application/json``, ``application/com.github.proto-openapi.spec.v2@v1.0+protobuf`` or
  ``application/com.github.proto-openapi.spec.v2.v1.0+protobuf`` picks the answer; the protobuf
  answer's Content-Type is the second (dotted) spelling. No match: 406 with an empty body. An
  empty Accept is ``*/*`` (JSON).
- ``Vary: Accept-Encoding`` (gziphandler) and ``Vary: Accept`` on every answer; the ETag is the
  upper-case hex SHA-512 of the JSON bytes, shared by the protobuf form ("because of the Vary
  header"); ``http.ServeContent`` adds ``Last-Modified`` (when the JSON was built) and
  ``Accept-Ranges``, and answers 304 to a matching ``If-None-Match`` (weak compare, ``*``) or,
  without one, to an ``If-Modified-Since`` not before ``Last-Modified``. No ``Expires`` and no
  ``Cache-Control`` of its own: the apiserver's ``no-cache, private`` applies (unlike
  ``/openapi/v3``'s hashed URLs). Range requests are not honoured (whole body, 200).
- gziphandler compresses a body of 1400 bytes or more when Accept-Encoding gives ``gzip`` a
  q above 0 (its own parser: the last ``gzip`` entry wins), at gzip's default level.

The JSON bytes are what kube-openapi writes: ``Swagger.MarshalJSON`` is
``DeterministicMarshal`` (json-experiment ``Marshal``), so they end without a newline (unlike
the API's ``json.Encoder`` answers); struct fields in Go order at the top (``swagger``,
``info``, ``paths``, ``definitions``, ``securityDefinitions``, ``security``) and every map's
keys sorted. This module writes that order at the top and sorts every nested object's keys
(kube writes nested structs, such as a schema, in Go field order; no client reads the order).
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from functools import cached_property
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
    group_version_words,
    gvk_extension,
    iter_refs,
)
from kubewire.schema.swagger_operations import (
    REF_PREFIX,
    Op,
    definitions,
    operation,
    path_item,
    path_param,
    query,
)
from kubewire.schema.swagger_operations import (
    body as body_param,
)
from kubewire.server.apiextensions.crd.openapi_docs import openapi_v2_paths_and_definitions
from kubewire.server.discovery import openapi_v2_proto
from kubewire.server.discovery.openapi import (
    STREAM_SUBRESOURCES,
    SUBRESOURCES,
    OpenAPIResponse,
    StreamSubresource,
)

OPENAPI_V2_PATH = "/openapi/v2"
JSON_MEDIA_TYPE = "application/json"
PROTOBUF_MEDIA_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
_PROTOBUF_DEPRECATED = "com.github.proto-openapi.spec.v2@v1.0+protobuf"
# (type, subtype, Content-Type answered, protobuf?) in kube-openapi's order
_ACCEPTED = (("application", "json", JSON_MEDIA_TYPE, False),
             ("application", _PROTOBUF_DEPRECATED, PROTOBUF_MEDIA_TYPE, True),
             ("application", PROTOBUF_MEDIA_TYPE.split("/")[1], PROTOBUF_MEDIA_TYPE, True))
GZIP_MIN_BYTES = 1400  # gziphandler.DefaultMinSize
_MAX_ACCEPT_CLAUSES = 64  # bounds the insertion sort; later clauses are ignored

_SECURITY_DEFINITIONS: dict[str, JSON] = {"BearerToken": {
    "description": "Bearer Token authentication", "in": "header", "name": "authorization",
    "type": "apiKey"}}
_SECURITY: list[JSON] = [{"BearerToken": []}]


# --- paths -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Kind:
    """What one path's operations act on, and how kube names them."""

    resource: Resource
    gvk: dict[str, str]
    type_name: str
    list_type: str
    infix: str  # CoreV1
    tag: str  # core_v1
    namespaced: str = field(default="")  # "Namespaced" on namespaced collection/item paths

    def operation(self, spec: Op) -> dict[str, JSON]:
        """One operation of this kind."""
        return operation(spec, self.gvk, self.infix, self.tag)

    def write(self, method: str, sub: str, body_type: str,
              gvk: dict[str, str] | None) -> dict[str, JSON]:
        """``put``, ``patch`` or ``post`` of the kind (or its subresource ``sub``)."""
        name = f"{self.namespaced}{self.resource.kind}{sub.title()}"
        if method == "patch":
            media = (*PATCH_TYPES, SMP_TYPE)  # built-in kinds (a CRD's: openapi_docs)
            params = [body_param(PATCH), *map(query, PATCH_PARAMS)]
            return self.operation(Op("patch", name, "patch", params,
                                     {"200": body_type, "201": body_type}, sorted(media), gvk))
        codes = ("200", "201", "202") if method == "post" else ("200", "201")
        verb = "create" if method == "post" else "replace"
        params = [body_param(body_type), *map(query, WRITE_PARAMS)]
        return self.operation(Op(verb, name, method, params, dict.fromkeys(codes, body_type),
                                 gvk=gvk))

    def read(self, sub: str, body_type: str, gvk: dict[str, str] | None) -> dict[str, JSON]:
        name = f"{self.namespaced}{self.resource.kind}{sub.title()}"
        return self.operation(Op("read", name, "get", (), {"200": body_type}, gvk=gvk))

    def delete(self) -> dict[str, JSON]:
        answer = self.type_name if self.resource.return_deleted_object else STATUS
        params = [body_param(DELETE_OPTIONS, required=False), *map(query, DELETE_PARAMS)]
        return self.operation(Op("delete", self.namespaced + self.resource.kind, "delete",
                                 params, {"200": answer, "202": answer}))

    def watch(self, action: str, name: str) -> dict[str, JSON]:
        """A watch path's only operation (its parameters are the path's)."""
        return {"get": self.operation(Op("watch", name, action, (), {"200": WATCH_EVENT}))}

    def collection(self) -> dict[str, JSON]:
        """``get`` (list), ``post`` and ``delete`` (deletecollection) of a collection path."""
        name = self.namespaced + self.resource.kind
        params = [body_param(DELETE_OPTIONS, required=False), *map(query, DELETE_COLLECTION_PARAMS)]
        return {
            "delete": self.operation(Op("delete", "collection" + name, "deletecollection",
                                        params, {"200": STATUS})),
            "get": self.operation(Op("list", name, "list", [*map(query, LIST_PARAMS)],
                                     {"200": self.list_type})),
            "post": self.write("post", "", self.type_name, None),
        }

    def stream(self, sub: str, spec: StreamSubresource) -> dict[str, JSON]:
        """The operations of a subresource kube answers with a string (log, exec, ...)."""
        gvk = (gvk_extension(self.gvk["group"], self.gvk["version"], spec.options_kind)
               if spec.options_kind else None)
        name = f"{self.namespaced}{self.resource.kind}{sub.title()}"
        ops: dict[str, JSON] = {}
        for method in spec.methods:
            verb, prefix = ("connect", method.title()) if spec.action == "connect" else ("read", "")
            ops[method] = self.operation(Op(verb, prefix + name, spec.action, (),
                                            {"200": {"type": "string"}}, gvk=gvk,
                                            produces=spec.produces))
        return ops


def resource_paths(resource: Resource) -> dict[str, JSON]:
    """Every path kubewire serves for ``resource`` (as ``openapi.resource_paths``), kube's v2 way.

    Raises KeyError when the schema facts lack the kind, its list or a subresource's kind.
    """
    own = kind_info(resource.api_version, resource.kind)
    listed = None if resource.create_only else kind_info(resource.api_version, resource.list_kind)
    if own is None or (listed is None and not resource.create_only):
        raise KeyError(f"no schema facts for {resource.api_version} {resource.kind}")
    infix, tag = group_version_words(resource.group, resource.version)
    gvk = gvk_extension(own.group, own.version, own.kind)
    list_type = listed.type_name if listed else ""
    everywhere = _Kind(resource, gvk, own.type_name, list_type, infix, tag)
    scoped = _Kind(resource, gvk, own.type_name, list_type, infix, tag,
                   "Namespaced" if resource.namespaced else "")
    base, plural, kind = resource.base_path, resource.plural, resource.kind
    ns = [path_param("namespace")] if resource.namespaced else []
    item = [path_param("name"), *ns]
    coll = f"{base}/namespaces/{{namespace}}/{plural}" if ns else f"{base}/{plural}"
    if resource.create_only:  # a Creater alone (bindings): POST to the collection
        return {coll: path_item({"post": scoped.write("post", "", own.type_name, None)}, ns)}
    watch = coll.replace(base, f"{base}/watch", 1)
    listing = [*map(query, LIST_PARAMS)]
    paths: dict[str, JSON] = {
        coll: path_item(scoped.collection(), ns),
        f"{coll}/{{name}}": path_item({"delete": scoped.delete(),
                                       "get": scoped.read("", own.type_name, None),
                                       "patch": scoped.write("patch", "", own.type_name, None),
                                       "put": scoped.write("put", "", own.type_name, None)},
                                      item),
        watch: path_item(scoped.watch("watchlist", f"{scoped.namespaced}{kind}List"),
                         [*listing, *ns]),
        f"{watch}/{{name}}": path_item(scoped.watch("watch", scoped.namespaced + kind),
                                       [*listing, *item]),
    }
    if ns:  # the all-namespaces list and watch
        every = everywhere.operation(Op("list", f"{kind}ForAllNamespaces", "list", (),
                                        {"200": list_type}))
        paths[f"{base}/{plural}"] = path_item({"get": every}, listing)
        paths[f"{base}/watch/{plural}"] = path_item(
            everywhere.watch("watchlist", f"{kind}ListForAllNamespaces"), listing)
    for sub in resource.subresources:
        path = f"{coll}/{{name}}/{sub}"
        stream = STREAM_SUBRESOURCES.get(sub)
        if stream is not None:
            paths[path] = path_item(scoped.stream(sub, stream), item, stream.params)
            continue
        methods, body_kind = SUBRESOURCES.get(sub, ((), None))
        info = kind_info(*body_kind) if body_kind else own
        if info is None:
            raise KeyError(f"no schema facts for {body_kind}")
        sub_gvk = gvk_extension(info.group, info.version, info.kind) if body_kind else None
        ops = {m: (scoped.read(sub, info.type_name, sub_gvk) if m == "get"
                   else scoped.write(m, sub, info.type_name, sub_gvk)) for m in methods}
        if ops:
            paths[path] = path_item(ops, item)
    return paths


def build_swagger(registry: Registry) -> dict[str, JSON]:
    """The Swagger 2.0 document of every served resource (not yet encoded).

    A resource served from a CustomResourceDefinition (``resource.crd``) adds the paths and
    definitions apiextensions-apiserver builds from it (``apiextensions.openapi_docs``); the
    others, and the named types of each group-version with a built-in kind, come from the
    schema facts.
    """
    paths: dict[str, JSON] = {}
    crd_definitions: dict[str, JSON] = {}
    built_in: dict[tuple[str, str], None] = {}
    for resource in registry:
        crd = getattr(resource, "crd", None)  # set on entries a CRD serves
        if resource.computed:  # metrics.k8s.io: kubewire has no schema facts for it
            continue
        if crd is None:
            built_in[resource.group, resource.version] = None
            paths.update(resource_paths(resource))
        else:
            crd_paths, found = openapi_v2_paths_and_definitions(crd, resource.version)
            paths.update(crd_paths)
            crd_definitions.update(found)
    seeds: list[str] = []
    for group, version in built_in:
        seeds += named_types(f"{group}/{version}" if group else version)
    seeds += iter_refs(paths, REF_PREFIX)
    named = definitions([s for s in seeds if s not in crd_definitions])
    return {"swagger": "2.0", "info": dict(OPENAPI_INFO), "paths": dict(sorted(paths.items())),
            "definitions": dict(sorted({**named, **crd_definitions}.items())),
            "securityDefinitions": _SECURITY_DEFINITIONS, "security": _SECURITY}


# --- the encoded document ------------------------------------------------------------------------

_encode = GoJSONEncoder().encode  # kube-openapi's json.Marshal: Go's HTML escapes


class _Body(NamedTuple):
    plain: bytes
    gzipped: bytes


def _bodies(data: bytes) -> _Body:
    compressed = gzip.compress(data, mtime=0) if len(data) >= GZIP_MIN_BYTES else b""
    return _Body(data, compressed)


class SwaggerDocument:
    """One registry's document: JSON and protobuf bytes (each also gzipped), built on first use.

    ``last_modified`` is when the JSON was built (kube-openapi's ``timedSpec``)."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self.last_modified = datetime.now(UTC)

    @cached_property
    def _document(self) -> dict[str, JSON]:
        return build_swagger(self._registry)

    @cached_property
    def json(self) -> _Body:
        self.last_modified = datetime.now(UTC).replace(microsecond=0)
        return _bodies(_encode(self._document))

    @cached_property
    def etag(self) -> str:
        return hashlib.sha512(self.json.plain).hexdigest().upper()

    @cached_property
    def protobuf(self) -> _Body:
        return _bodies(openapi_v2_proto.document(msgspec.json.decode(self.json.plain)))


_BY_REGISTRY: WeakKeyDictionary[Registry, SwaggerDocument] = WeakKeyDictionary()


def swagger_for(registry: Registry) -> SwaggerDocument:
    """The shared, lazily built document of ``registry``."""
    found = _BY_REGISTRY.get(registry)
    if found is None:
        found = _BY_REGISTRY[registry] = SwaggerDocument(registry)
    return found


# --- HTTP --------------------------------------------------------------------------------------

class AcceptClause(NamedTuple):
    type: str
    subtype: str
    q: float


def _go_float(text: str) -> float:
    """Go ``strconv.ParseFloat``'s value, 0 on a syntax error (the error is ignored)."""
    try:
        value = float(text)
    except ValueError:
        return 0.0
    return value if text.strip() == text and "_" not in text else 0.0


def parse_accept(header: str) -> list[AcceptClause]:
    """``goautoneg.ParseAccept``: clauses without a ``/`` (but ``*``) are skipped, and the rest
    ordered by Go's ``sort.Sort`` of its ``Less`` (an insertion sort for short lists)."""
    clauses: list[AcceptClause] = []
    for part in header.split(",")[:_MAX_ACCEPT_CLAUSES]:
        media, *params = part.strip(" ").split(";")
        pieces = media.split("/")
        kind = pieces[0].strip(" ")
        if len(pieces) == 1 and kind == "*":
            subtype = "*"
        elif len(pieces) == 2:
            subtype = pieces[1].strip(" ")
        else:
            continue
        q = 1.0
        for param in params:
            name, eq, value = param.partition("=")
            if eq and name.strip(" ") == "q":
                q = _go_float(value)
        clauses.append(AcceptClause(kind, subtype, q))

    def less(a: AcceptClause, b: AcceptClause) -> bool:
        return (a.q > b.q or (a.type != "*" and b.type == "*")
                or (a.subtype != "*" and b.subtype == "*"))

    for i in range(1, len(clauses)):
        j = i
        while j > 0 and less(clauses[j], clauses[j - 1]):
            clauses[j], clauses[j - 1] = clauses[j - 1], clauses[j]
            j -= 1
    return clauses


def gzip_accepted(accept_encoding: str) -> bool:
    """gziphandler's ``acceptsGzip``: the last ``gzip`` coding has q > 0 (q clamped to [0, 1];
    a later parameter resets q to 1; a bad q drops the entry)."""
    accepted: dict[str, float] = {}
    for entry in accept_encoding.split(","):
        coding, q, bad = "", 1.0, False
        for index, part in enumerate(entry.split(";")):
            part = part.strip()
            q = 1.0
            if index == 0:
                coding = part.lower()
            elif part.startswith("q="):
                try:
                    q = min(max(float(part[2:]), 0.0), 1.0)
                except ValueError:
                    q, bad = 0.0, True
        if coding and not bad:
            accepted[coding] = q
    return accepted.get("gzip", 0.0) > 0.0


def _not_modified(headers: Mapping[str, str], etag: str, last_modified: datetime) -> bool:
    """Go ``checkIfNoneMatch``, else ``checkIfModifiedSince`` (GET and HEAD)."""
    none_match = headers.get("if-none-match")
    if none_match is not None:
        tags = {tag.strip().removeprefix("W/") for tag in none_match.split(",")}
        return etag in tags or "*" in tags
    since = headers.get("if-modified-since", "")
    if not since:
        return False
    try:
        moment = parsedate_to_datetime(since)
    except (TypeError, ValueError):
        return False
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return last_modified.replace(microsecond=0) <= moment


def http_time(moment: datetime) -> str:
    """Go's ``http.TimeFormat``."""
    return moment.astimezone(UTC).strftime("%a, %d %b %Y %H:%M:%S GMT")


def openapi_v2_response(registry: Registry, path: str, headers: Mapping[str, str] | None = None,
                        ) -> OpenAPIResponse | None:
    """Answer ``/openapi/v2`` (kube-openapi ``handler.go``, see the module docstring); None for
    any other path. ``headers`` maps lower-case names to values."""
    if path != OPENAPI_V2_PATH:
        return None
    headers = headers or {}
    vary = [("Vary", "Accept-Encoding"), ("Vary", "Accept")]
    for clause in parse_accept(headers.get("accept") or "*/*"):
        for kind, subtype, content_type, is_protobuf in _ACCEPTED:
            if clause.type not in (kind, "*") or clause.subtype not in (subtype, "*"):
                continue
            document = swagger_for(registry)
            body = document.protobuf if is_protobuf else document.json
            etag = f'"{document.etag}"'
            if _not_modified(headers, etag, document.last_modified):
                return OpenAPIResponse(304, b"", content_type, [*vary, ("Etag", etag)])
            out = [*vary, ("Etag", etag), ("Accept-Ranges", "bytes"),
                   ("Last-Modified", http_time(document.last_modified))]
            if body.gzipped and gzip_accepted(headers.get("accept-encoding", "")):
                return OpenAPIResponse(200, body.gzipped, content_type,
                                       [*out, ("Content-Encoding", "gzip")])
            return OpenAPIResponse(200, body.plain, content_type, out)
    return OpenAPIResponse(406, b"", "text/plain; charset=utf-8", vary)


__all__ = ["OPENAPI_V2_PATH", "PROTOBUF_MEDIA_TYPE", "SwaggerDocument", "build_swagger",
           "openapi_v2_response", "parse_accept", "resource_paths", "swagger_for"]
