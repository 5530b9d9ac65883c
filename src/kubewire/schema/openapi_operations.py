"""kube's OpenAPI 3.0 shapes, shared by the documents of built-in kinds and of custom resources.

Pure. ``server.discovery.openapi`` lays out a built-in kind's paths as installer.go does, and
``server.apiextensions.crd.openapi_docs`` a custom resource's as apiextensions-apiserver's
``builder.go`` does; both build their operations, path items and component schemas here, so an
operation looks the same whoever serves it:

- ``operationId`` as the apiserver names it (``GetOperationIDAndTags``: installer.go's
  ``listNamespacedPod`` with the group-version spliced in after the verb,
  ``listCoreV1NamespacedPod``), ``tags``, a ``401`` answer, ``x-kubernetes-action`` and the GVK;
- a query parameter every operation of a path lists sits on the path (kube-openapi
  ``findCommonParameters``);
- component schemas are the named types of the schema facts, converted from their compact form,
  with every ``$ref`` they reach; kinds carry ``x-kubernetes-group-version-kind``.

No descriptions: no upstream prose is copied.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cache
from typing import NamedTuple

from kubewire.json_types import JSON
from kubewire.schema import kinds, named_type

OPENAPI_INFO = {"title": "Kubernetes", "version": "v1.32.0"}

REF_PREFIX = "#/components/schemas/"
META = "io.k8s.apimachinery.pkg.apis.meta.v1."
DELETE_OPTIONS, STATUS, WATCH_EVENT, PATCH = (
    META + "DeleteOptions", META + "Status", META + "WatchEvent", META + "Patch")

# Compact node types of the schema facts that OpenAPI spells differently (upstream v3 documents).
_INT, _NUMBER, _STRING = {"type": "integer"}, {"type": "number"}, {"type": "string"}
_COMPACT_TYPES: Mapping[str, Mapping[str, JSON]] = {
    "int-or-string": {"format": "int-or-string", "oneOf": [_INT, _STRING]},
    "quantity": {"oneOf": [_STRING, _NUMBER]}, "any": {}}

# Query parameters kube lists per action (kube-apiserver v1.32 api/openapi-spec/v3), limited to
# the ones kubewire reads, and the options of the pod subresources kube proxies to a kubelet
# (PodLogOptions, PodExecOptions, ...: all of them, as kube lists them). Types not listed here
# are strings.
PARAM_TYPES = {"allowWatchBookmarks": "boolean", "force": "boolean", "orphanDependents": "boolean",
                "sendInitialEvents": "boolean", "watch": "boolean", "gracePeriodSeconds": "integer",
                "limit": "integer", "timeoutSeconds": "integer",
                "follow": "boolean", "insecureSkipTLSVerifyBackend": "boolean",
                "previous": "boolean", "timestamps": "boolean", "stderr": "boolean",
                "stdin": "boolean", "stdout": "boolean", "tty": "boolean",
                "limitBytes": "integer", "sinceSeconds": "integer", "tailLines": "integer",
                "ports": "integer"}
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
JSON_TYPES = ("application/json",)
STREAM_TYPES = ("application/json", "application/json;stream=watch")
_STREAMING_ACTIONS = frozenset({"list", "watch", "watchlist"})  # answer a stream with ?watch


# --- schemas -----------------------------------------------------------------------------------

def schema_ref(type_name: str) -> dict[str, JSON]:
    """``{"$ref": "#/components/schemas/<type_name>"}``."""
    return {"$ref": REF_PREFIX + type_name}


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


def iter_refs(value: JSON, prefix: str = REF_PREFIX) -> Iterator[str]:
    """Every type name a ``$ref`` (starting ``prefix``) in ``value`` points at (depth first)."""
    if isinstance(value, Mapping):
        ref = value.get("$ref")
        if isinstance(ref, str) and ref.startswith(prefix):
            yield ref.removeprefix(prefix)
    if isinstance(value, Mapping | list):
        for item in value.values() if isinstance(value, Mapping) else value:
            yield from iter_refs(item, prefix)


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
    return referenced_types(seeds, convert_schema, REF_PREFIX)


def referenced_types(seeds: Sequence[str], convert: Callable[[Mapping[str, JSON]], dict[str, JSON]],
                     ref_prefix: str, *, sort_kinds: bool = False) -> dict[str, JSON]:
    """The closure of ``seeds`` over ``$ref``s, each named type's facts ``convert``ed (v3's or
    v2's spelling); kinds get ``x-kubernetes-group-version-kind`` (their keys re-sorted with
    ``sort_kinds``, as v2 writes them). Raises KeyError for a name the facts lack."""
    out: dict[str, JSON] = {}
    pending = list(seeds)
    while pending:
        name = pending.pop()
        if name in out:
            continue
        schema = convert(named_type(name).raw)
        gvks = kind_gvks().get(name)
        if gvks:
            schema["x-kubernetes-group-version-kind"] = [gvk_extension(*g) for g in gvks]
            if sort_kinds:
                schema = dict(sorted(schema.items()))
        out[name] = schema
        pending.extend(ref for ref in iter_refs(schema, ref_prefix) if ref not in out)
    return dict(sorted(out.items()))


# --- operation ids -----------------------------------------------------------------------------

def valid_operation_id(text: str, capitalize_first: bool) -> str:
    """kube's ``ToValidOperationID``: letters and ``_`` kept (digits too, past the first
    character); anything else dropped and the next kept letter upper-cased."""
    out: list[str] = []
    capitalize = capitalize_first
    for index, char in enumerate(text):
        if char.isalpha() or char == "_" or (index and char.isdigit()):
            out.append(char.upper() if capitalize else char)
            capitalize = False
        else:
            capitalize = True
    return "".join(out)


def group_version_words(group: str, version: str) -> tuple[str, str]:
    """(``CoreV1``, ``core_v1``): the operationId infix and the tag of a group-version."""
    trimmed = (group or "core").removesuffix(".k8s.io")
    infix = valid_operation_id(trimmed, True) + valid_operation_id(version, True)
    return infix, f"{valid_operation_id(trimmed, False)}_{valid_operation_id(version, False)}"


def split_verb(name: str) -> tuple[str, str]:
    """installer.go's operation name, a lower-case verb and capitalized words (``connectGet``,
    ``deleteCollection``, ``Namespaced``, the kind), split after the verb:
    ``deleteCollectionNamespacedPod`` -> (``delete``, ``CollectionNamespacedPod``)."""
    verb, rest = name[:1], name[1:]
    while rest[:1].islower():
        verb, rest = verb + rest[0], rest[1:]
    return verb, rest


def operation_id(name: str, infix: str) -> str:
    """installer.go's operation name with the group-version spliced in after its verb
    (``split_verb``): ``listNamespacedPod`` -> ``listCoreV1NamespacedPod``."""
    verb, rest = split_verb(name)
    return verb + infix + valid_operation_id(rest, True)


def hoist_parameters(ops: Mapping[str, Mapping[str, JSON]],
                     ) -> tuple[dict[str, dict[str, JSON]], list[JSON]]:
    """kube-openapi ``findCommonParameters``: a parameter every operation of a path lists (but
    a body) moves to the path; returns the operations without them, and those parameters."""
    lists = [[p for p in op.get("parameters") or () if isinstance(p, Mapping)]
             for op in ops.values()]
    common = [p for p in (lists[0] if lists else ())
              if p.get("in") != "body" and all(p in other for other in lists[1:])]
    out: dict[str, dict[str, JSON]] = {}
    for method, op in ops.items():
        kept = [p for p in op.get("parameters") or () if p not in common]
        out[method] = {k: v for k, v in op.items() if k != "parameters"}
        if kept:
            out[method]["parameters"] = kept
    return out, common


# --- operations and paths ----------------------------------------------------------------------

def parameters(names: Sequence[str], path_params: Sequence[str] = ()) -> list[JSON]:
    """Path parameters ``path_params`` (required) and query parameters ``names``, by name."""
    params: list[JSON] = [{"in": "path", "name": name, "required": True,
                           "schema": {"type": "string", "uniqueItems": True}}
                          for name in path_params]
    params += [{"in": "query", "name": name,
                "schema": {"type": PARAM_TYPES.get(name, "string"), "uniqueItems": True}}
               for name in names]
    return sorted(params, key=lambda param: str(param["name"]))


def content(media_types: Sequence[str], schema: Mapping[str, JSON]) -> dict[str, JSON]:
    """``{"content": {media: {"schema": schema}}}`` for each media type."""
    return {"content": {media: {"schema": dict(schema)} for media in media_types}}


def request_body(media_types: Sequence[str], type_name: str, *, required: bool = True) -> JSON:
    """A ``requestBody`` of the named type in each media type."""
    return {**content(media_types, schema_ref(type_name)),
            **({"required": True} if required else {})}


class Operations(NamedTuple):
    """How kube names and marks the operations of one group-version's paths for a kind: its
    GVK, the operationId ``infix`` (``CoreV1``), the ``tag`` (``core_v1``) and the media types
    its answers come in (``produces``; None: JSON, and a watch stream too for list and watch
    actions, as kubewire lists them for built-in kinds)."""

    gvk: dict[str, str]
    infix: str
    tag: str
    produces: tuple[str, ...] | None = None

    @classmethod
    def of(cls, group: str, version: str, gvk: dict[str, str],
           produces: tuple[str, ...] | None = None) -> Operations:
        """The operations served under ``group``/``version`` whose GVK is ``gvk``."""
        return cls(gvk, *group_version_words(group, version), produces)

    def answer(self, name: str, action: str, responses: Mapping[str, JSON],
               gvk: dict[str, str] | None = None) -> dict[str, JSON]:
        """An operation without parameters or body: its id (``operation_id`` of installer.go's
        ``name``), answers (and 401), and GVK (``gvk`` or this kind's)."""
        return {"operationId": operation_id(name, self.infix),
                "responses": {**responses, "401": {}}, "tags": [self.tag],
                "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk or self.gvk}

    def operation(self, name: str, action: str, params: Sequence[str],
                  responses: Mapping[str, str], request: JSON = None) -> dict[str, JSON]:
        """One operation; ``responses`` maps codes to named types; ``params`` are query
        parameters, ``request`` a ``requestBody``."""
        media = self.produces
        if media is None:
            media = STREAM_TYPES if action in _STREAMING_ACTIONS else JSON_TYPES
        answers = {code: content(media, schema_ref(type_name))
                   for code, type_name in responses.items()}
        op = self.answer(name, action, answers)
        if params:
            op["parameters"] = parameters(params)
        if request:
            op["requestBody"] = request
        return op


def path_item(ops: Mapping[str, Mapping[str, JSON]], path_params: Sequence[str],
              own: Sequence[str] = ("pretty",)) -> dict[str, JSON]:
    """A path's operations and its parameters: ``path_params``, the query parameters ``own``
    and those every operation lists (``hoist_parameters``)."""
    kept, common = hoist_parameters(ops)
    params = sorted([*parameters(own, path_params), *common],
                    key=lambda p: str(p["name"]) if isinstance(p, Mapping) else "")
    return {**kept, "parameters": params}
