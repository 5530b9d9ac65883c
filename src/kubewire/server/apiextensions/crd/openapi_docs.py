"""The OpenAPI v3 and v2 documents kube publishes for a CustomResourceDefinition's served version.

apiextensions-apiserver v1.32 ``pkg/controller/openapi/builder/builder.go``: ``generateBuilder``
lays out the routes, ``buildKubeNative`` and ``buildListSchema`` the kind's and its list's
schemas, kube-openapi's ``builder3`` (v3) and ``builder`` (v2) turn them into documents, with
the operations shaped as for built-in kinds (``kubewire.schema.openapi_operations`` and
``swagger_operations``, shared with ``server.discovery``).

Paths and operations (one served version), ``Namespaced`` and ``{namespace}`` for a namespaced
CRD, operationIds as ``GetOperationIDAndTags`` names them (``listGatewayNetworkingV1Namespaced
Gateway``):

- ``/apis/<g>/<v>/<plural>``: ``list<Kind>ForAllNamespaces`` (namespaced CRDs only);
- the collection: ``list`` (ListOptions' parameters: a watch is ``?watch=true``; kube publishes
  no ``/watch/`` paths for custom resources), ``create``, ``deletecollection`` (ListOptions'
  parameters, no body);
- ``{name}``: ``read`` (``resourceVersion``), ``replace``, ``delete`` (DeleteOptions, answered
  with a ``Status``), ``patch`` (JSON patch, merge patch, apply: no strategic merge);
- ``{name}/status`` (the CR kind) and ``{name}/scale`` (``autoscaling/v1`` Scale bodies) when the
  version enables them: ``read``, ``replace``, ``patch``; their GVK is the CR's own.

Every operation ``consumes`` and ``produces`` ``application/json`` and ``application/yaml`` (a
patch consumes the patch types); ``put`` and ``post`` answer 200/201 (and 202 for a post),
``patch`` 200 only, ``delete`` 200/202, plus 401.

The kind's schema is the version's structural schema as kube's ``Structural`` keeps it (the
CRD's descriptions and ``x-kubernetes-validations`` included; ``example``/``externalDocs`` and
Go zero values dropped), unfolded (``x-kubernetes-int-or-string`` gains
``anyOf: [{type: integer}, {type: string}]``), with ``apiVersion``/``kind`` (TypeMeta's
``string``s) and ``metadata`` (``$ref`` ObjectMeta) set, the same three added to every
``x-kubernetes-embedded-resource`` object (``kind`` and ``apiVersion`` required), and
``x-kubernetes-group-version-kind``; the list kind is ``{apiVersion, kind, metadata: ListMeta,
items: [kind]}``, ``items`` required. Both carry ``x-kubernetes-selectable-fields`` (field
paths without their leading dot; an empty list when the version has none: ``buildSelectableFields``
returns an empty slice then, and kube publishes it). Names are kube-openapi's
``ToRESTFriendlyName``: the group reversed, ``io.k8s.networking.gateway.v1.Gateway``.

v2 follows ``ToStructuralOpenAPIV2`` (``pkg/controller/openapi/v2/conversion.go``): ``allOf``,
``anyOf``, ``oneOf`` and ``not`` dropped; a ``nullable`` node loses its type, items and
properties; a ``x-kubernetes-preserve-unknown-fields`` node its items and properties (and
``type: object``); an array without items its type; nullable fields leave their parent's
``required`` (all of them when ``additionalProperties`` is nullable). A schema whose root
preserves unknown fields is ``{type: object}`` alone, and embedded resources that preserve
unknown fields get no ``apiVersion``/``kind``/``metadata``. Defaults are pruned
(``handler.PruneDefaults``, as the controller does before merging into ``/openapi/v2``).

Like kubewire's other documents these carry no prose of kube's own (TypeMeta, ObjectMeta and list
descriptions, response texts in v3); parameters are those kubewire reads (as for built-in kinds:
DeleteOptions' ``ignoreStoreReadErrorWithClusterBreakingPotential`` is not listed). A schema is
taken as structural: the CRD's validation refuses any other before it is stored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from kubewire.json_types import JSON
from kubewire.schema import openapi_operations as v3
from kubewire.schema import swagger_operations as v2

CR_MEDIA_TYPES = ("application/json", "application/yaml")
_PATCH_MEDIA_TYPES = tuple(sorted(v3.PATCH_TYPES))
_OBJECT_META = v3.META + "ObjectMeta"
_LIST_META = v3.META + "ListMeta"
_SCALE = "io.k8s.api.autoscaling.v1.Scale"
_GET_PARAMS = ("resourceVersion",)  # GetOptions

# JSONSchemaProps keys kube's Structural keeps (``ToKubeOpenAPI``); the rest are schemas.
_SCALARS = frozenset({"description", "type", "title", "format", "pattern",
                      "maximum", "minimum", "multipleOf", "maxLength", "minLength", "maxItems",
                      "minItems", "maxProperties", "minProperties"})
_FLAGS = frozenset({"nullable", "exclusiveMaximum", "exclusiveMinimum", "uniqueItems",
                    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource",
                    "x-kubernetes-int-or-string"})
_LISTS = frozenset({"enum", "required", "x-kubernetes-list-map-keys"})
_POINTERS = frozenset({"x-kubernetes-list-type", "x-kubernetes-map-type", "default"})
_JUNCTORS = ("allOf", "anyOf", "oneOf")
_FLOATS = frozenset({"maximum", "minimum", "multipleOf"})
_VALUES = _SCALARS | _FLAGS | _LISTS | _POINTERS | {"x-kubernetes-validations"}
_PRESERVE = "x-kubernetes-preserve-unknown-fields"
_INT_OR_STRING: list[JSON] = [{"type": "integer"}, {"type": "string"}]
_TYPE_META = {"apiVersion": {"type": "string"}, "kind": {"type": "string"}}

_Visit = Callable[[Mapping[str, JSON]], dict[str, JSON]]  # a visitor: a node in, a new node out


class CRDVersion(NamedTuple):
    """What the documents of one served version of a CRD are built from."""

    group: str
    version: str
    kind: str
    list_kind: str
    plural: str
    namespaced: bool
    schema: Mapping[str, JSON] | None  # spec.versions[].schema.openAPIV3Schema
    status: bool
    scale: bool
    selectable_fields: tuple[str, ...]  # their JSONPaths, leading dot removed

    @classmethod
    def of(cls, crd: Mapping[str, JSON], version: str) -> CRDVersion:
        """``version`` of ``crd`` (a CRD object); KeyError when the CRD has no such version."""
        spec: Mapping[str, JSON] = _mapping(crd.get("spec"))
        names = _mapping(spec.get("names"))
        for entry in spec.get("versions") or ():
            entry = _mapping(entry)
            if entry.get("name") == version:
                break
        else:
            raise KeyError(f"no version {version!r} in the CRD")
        subresources = _mapping(entry.get("subresources"))
        schema = _mapping(entry.get("schema")).get("openAPIV3Schema")
        kind = str(names.get("kind") or "")
        selectable = tuple(str(_mapping(field).get("jsonPath") or "").removeprefix(".")
                           for field in entry.get("selectableFields") or ())
        return cls(str(spec.get("group") or ""), version, kind,
                   str(names.get("listKind") or kind + "List"), str(names.get("plural") or ""),
                   spec.get("scope") == "Namespaced",
                   schema if isinstance(schema, Mapping) else None,
                   subresources.get("status") is not None,
                   subresources.get("scale") is not None, selectable)

    def gvk(self, kind: str | None = None) -> dict[str, str]:
        return v3.gvk_extension(self.group, self.version, kind or self.kind)

    def type_name(self, kind: str | None = None) -> str:
        """kube-openapi ``ToRESTFriendlyName`` of ``<group>/<version>.<kind>``."""
        return rest_friendly_name(self.group, self.version, kind or self.kind)


def rest_friendly_name(group: str, version: str, kind: str) -> str:
    """``io.k8s.networking.gateway.v1.Gateway``: the group's dotted parts reversed."""
    return ".".join(reversed(group.split("."))) + f".{version}.{kind}"


def _mapping(value: JSON) -> Mapping[str, JSON]:
    return value if isinstance(value, Mapping) else {}


# --- the schema, as kube's Structural holds it -------------------------------------------------

def _go_float(value: JSON) -> JSON:
    """A float64 as Go's encoder writes it: integral values without a fraction."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    return value


def _rules(rules: JSON) -> list[JSON]:
    """``x-kubernetes-validations`` as the v1 ``ValidationRule`` struct writes them."""
    out: list[JSON] = []
    for rule in rules if isinstance(rules, list) else ():
        rule = _mapping(rule)
        kept: dict[str, JSON] = {"rule": rule.get("rule") or ""}
        kept.update({k: rule[k] for k in ("message", "messageExpression", "fieldPath")
                     if rule.get(k)})
        kept.update({k: rule[k] for k in ("reason", "optionalOldSelf") if rule.get(k) is not None})
        out.append(kept)
    return out


def structural(node: Mapping[str, JSON], nested: bool = False) -> dict[str, JSON]:
    """A JSONSchemaProps as ``NewStructural`` then ``ToKubeOpenAPI`` give it back: the keys kube
    keeps, without Go zero values (false, "", empty lists and maps, null). ``nested``: inside
    ``allOf``/``anyOf``/``oneOf``/``not``, where a boolean ``additionalProperties`` is dropped."""
    out: dict[str, JSON] = {}
    for key, value in node.items():
        kept = _value(key, value) if key in _VALUES else _child(key, value, nested)
        if kept is not _DROPPED:
            out[key] = kept
    return out


_DROPPED: JSON = {"dropped": True}  # a sentinel, compared by identity


def _value(key: str, value: JSON) -> JSON:
    """A non-schema key's value as Go writes it back, or ``_DROPPED``."""
    if key in _SCALARS and value not in (None, ""):
        return _go_float(value) if key in _FLOATS else value
    if key in _FLAGS and value is True:
        return True
    if key in _LISTS and isinstance(value, list) and value:
        return list(value)
    if key in _POINTERS and value is not None:
        return value
    if key == "x-kubernetes-validations" and (rules := _rules(value)):
        return rules
    return _DROPPED


def _child(key: str, value: JSON, nested: bool) -> JSON:
    """A schema-valued key's value (recursing), or ``_DROPPED``."""
    if key == "properties" and isinstance(value, Mapping) and value:
        return {name: structural(_mapping(child), nested) for name, child in value.items()}
    if key in ("items", "not", "additionalProperties") and isinstance(value, Mapping):
        return structural(value, nested or key == "not")
    if key == "additionalProperties" and isinstance(value, bool) and not nested:
        return value
    if key in _JUNCTORS and isinstance(value, list) and value:
        return [structural(_mapping(clause), True) for clause in value]
    return _DROPPED


def unfold(node: Mapping[str, JSON]) -> dict[str, JSON]:
    """``Structural.Unfold``: an ``x-kubernetes-int-or-string`` node not already in one of the
    two int-or-string patterns gets ``anyOf: [{type: integer}, {type: string}]`` (prepended to
    ``allOf`` in an ``{anyOf}`` clause when it has an ``anyOf`` of its own)."""
    out = dict(node)
    if out.get("x-kubernetes-int-or-string") and not (
            out.get("anyOf") == _INT_OR_STRING
            or _mapping((out.get("allOf") or [None])[0]).get("anyOf") == _INT_OR_STRING):
        if "anyOf" not in out:
            out["anyOf"] = list(_INT_OR_STRING)
        else:
            out["allOf"] = [{"anyOf": list(_INT_OR_STRING)}, *(out.get("allOf") or [])]
    return _map_children(out, unfold)


def _map_children(node: dict[str, JSON], visit: _Visit) -> dict[str, JSON]:
    """``node`` with ``visit`` applied to its structural children (properties, items and a
    schema ``additionalProperties``), as kube's ``Visitor`` walks them."""
    if isinstance(node.get("properties"), Mapping):
        node["properties"] = {name: visit(_mapping(child))
                              for name, child in _mapping(node["properties"]).items()}
    for key in ("items", "additionalProperties"):
        child = node.get(key)
        if isinstance(child, Mapping):
            node[key] = visit(child)
    return node


def to_v2(node: Mapping[str, JSON]) -> dict[str, JSON]:
    """``ToStructuralOpenAPIV2`` (see the module docstring); the node's own changes first, then
    its remaining children, as kube's visitor does."""
    out = {k: v for k, v in node.items() if k not in (*_JUNCTORS, "not")}
    if out.pop("nullable", False):
        for key in ("type", "items", "properties"):
            out.pop(key, None)
    preserve = out.get(_PRESERVE) is True
    if preserve:
        out.pop("items", None)
        out.pop("properties", None)
    if "items" not in out and out.get("type") == "array":
        del out["type"]
    if preserve and out.get("type") == "object":
        del out["type"]
    required = out.get("required")
    if isinstance(required, list):
        nullable = {name for name, child in _mapping(out.get("properties")).items()
                    if _mapping(child).get("nullable") is True}
        if _mapping(out.get("additionalProperties")).get("nullable") is True:
            required = []
        required = [name for name in required if name not in nullable]
        if required:
            out["required"] = required
        else:
            del out["required"]
    return _map_children(out, to_v2)


def _embedded(node: dict[str, JSON], ref_prefix: str, is_v2: bool) -> dict[str, JSON]:
    """``addEmbeddedProperties``: children first; then an embedded resource gets TypeMeta and
    ObjectMeta (not in v2 when it preserves unknown fields)."""
    _map_children(node, lambda child: _embedded(dict(child), ref_prefix, is_v2))
    if is_v2 and node.get(_PRESERVE) is True:
        return node
    if node.get("x-kubernetes-embedded-resource") is True:
        _add_object_meta(node, ref_prefix)
        required = [str(name) for name in node.get("required") or ()]
        node["required"] = required + [k for k in ("kind", "apiVersion") if k not in required]
    return node


def _add_object_meta(node: dict[str, JSON], ref_prefix: str) -> None:
    properties = dict(_mapping(node.get("properties")))
    properties.update({**_TYPE_META, "metadata": {"$ref": ref_prefix + _OBJECT_META}})
    node["properties"] = properties


def _prune_defaults(node: JSON) -> JSON:
    """``handler.PruneDefaults``: every schema without ``default``."""
    if isinstance(node, Mapping):
        return {k: _prune_defaults(v) for k, v in node.items() if k != "default"}
    if isinstance(node, list):
        return [_prune_defaults(item) for item in node]
    return node


def kind_schema(cv: CRDVersion, is_v2: bool) -> dict[str, JSON]:
    """``buildKubeNative``: the custom resource's schema in v3 (or v2) form."""
    ref_prefix = v2.REF_PREFIX if is_v2 else v3.REF_PREFIX
    raw = structural(cv.schema) if cv.schema is not None else None
    if raw is None or (is_v2 and raw.get(_PRESERVE) is True):
        out: dict[str, JSON] = {"type": "object"}
    else:
        out = unfold(raw)
        if is_v2:
            out = to_v2(out)
        _add_object_meta(out, ref_prefix)
        out = _embedded(out, ref_prefix, is_v2)
    return _kind_extensions(cv, out, cv.kind)


def list_schema(cv: CRDVersion, is_v2: bool) -> dict[str, JSON]:
    """``buildListSchema``: ``<Kind>List``."""
    ref_prefix = v2.REF_PREFIX if is_v2 else v3.REF_PREFIX
    out: dict[str, JSON] = {
        "type": "object", "required": ["items"],
        "properties": {**_TYPE_META,
                       "items": {"type": "array", "items": {"$ref": ref_prefix + cv.type_name()}},
                       "metadata": {"$ref": ref_prefix + _LIST_META}}}
    return _kind_extensions(cv, out, cv.list_kind)


def _kind_extensions(cv: CRDVersion, schema: dict[str, JSON], kind: str) -> dict[str, JSON]:
    schema["x-kubernetes-group-version-kind"] = [cv.gvk(kind)]
    schema["x-kubernetes-selectable-fields"] = [{"fieldPath": path}
                                                for path in cv.selectable_fields]
    return schema


# --- paths -------------------------------------------------------------------------------------

class _Route(NamedTuple):
    """One of ``generateBuilder``'s routes: installer.go's operation name, the action, the
    query parameters of its options, its body's type (None: no body) and its answers."""

    name: str
    action: str
    options: Sequence[str]
    body: str | None
    answers: dict[str, str]


# path parameters and a path's routes by HTTP method in, the path item out (v3 or v2)
_BuildPath = Callable[[tuple[str, ...], dict[str, _Route]], dict[str, JSON]]


def _routes(cv: CRDVersion) -> dict[str, tuple[tuple[str, ...], dict[str, _Route]]]:
    """``generateBuilder``'s routes of one version: path -> (path parameters, routes)."""
    own, listed = cv.type_name(), cv.type_name(cv.list_kind)
    kind = ("Namespaced" if cv.namespaced else "") + cv.kind
    base = f"/apis/{cv.group}/{cv.version}"
    ns = ("namespace",) if cv.namespaced else ()
    coll = f"{base}/namespaces/{{namespace}}/{cv.plural}" if ns else f"{base}/{cv.plural}"
    item = (*ns, "name")
    out: dict[str, tuple[tuple[str, ...], dict[str, _Route]]] = {}
    if ns:
        out[f"{base}/{cv.plural}"] = ((), {"get": _Route(
            f"list{cv.kind}ForAllNamespaces", "list", v3.LIST_PARAMS, None, {"200": listed})})
    out[coll] = (ns, {
        "get": _Route(f"list{kind}", "list", v3.LIST_PARAMS, None, {"200": listed}),
        "post": _Route(f"create{kind}", "post", v3.WRITE_PARAMS, own,
                       dict.fromkeys(("200", "201", "202"), own)),
        "delete": _Route(f"deleteCollection{kind}", "deletecollection", v3.LIST_PARAMS, None,
                         {"200": v3.STATUS})})
    out[f"{coll}/{{name}}"] = (item, {
        **_object_routes(kind, "", own),
        "delete": _Route(f"delete{kind}", "delete", v3.DELETE_PARAMS, v3.DELETE_OPTIONS,
                         {"200": v3.STATUS, "202": v3.STATUS})})
    if cv.status:
        out[f"{coll}/{{name}}/status"] = (item, _object_routes(kind, "Status", own))
    if cv.scale:
        out[f"{coll}/{{name}}/scale"] = (item, _object_routes(kind, "Scale", _SCALE))
    return out


def _object_routes(kind: str, sub: str, own: str) -> dict[str, _Route]:
    """``get``, ``put`` and ``patch`` of an object (or of its status or scale)."""
    return {"get": _Route(f"read{kind}{sub}", "get", _GET_PARAMS, None, {"200": own}),
            "put": _Route(f"replace{kind}{sub}", "put", v3.WRITE_PARAMS, own,
                          {"200": own, "201": own}),
            "patch": _Route(f"patch{kind}{sub}", "patch", v3.PATCH_PARAMS, v3.PATCH,
                            {"200": own})}


def _paths(cv: CRDVersion, build: _BuildPath) -> dict[str, JSON]:
    """Each path with its operations, built by ``build`` (v3 or v2)."""
    return {path: build(params, routes)
            for path, (params, routes) in sorted(_routes(cv).items())}


def _v3_builder(cv: CRDVersion) -> _BuildPath:
    ops = v3.Operations.of(cv.group, cv.version, cv.gvk(), CR_MEDIA_TYPES)

    def build(params: tuple[str, ...], routes: dict[str, _Route]) -> dict[str, JSON]:
        operations: dict[str, dict[str, JSON]] = {}
        for method, route in routes.items():
            request = None
            if route.body is not None:
                media = _PATCH_MEDIA_TYPES if method == "patch" else CR_MEDIA_TYPES
                request = v3.request_body(media, route.body, required=method != "delete")
            operations[method] = ops.operation(route.name, route.action, route.options,
                                               route.answers, request)
        return v3.path_item(operations, params)
    return build


def _v2_builder(cv: CRDVersion) -> _BuildPath:
    gvk = cv.gvk()
    infix, tag = v3.group_version_words(cv.group, cv.version)

    def build(params: tuple[str, ...], routes: dict[str, _Route]) -> dict[str, JSON]:
        operations: dict[str, dict[str, JSON]] = {}
        for method, route in routes.items():
            query: list[JSON] = [*map(v2.query, route.options)]
            if route.body is not None:
                query.append(v2.body(route.body, required=method != "delete"))
            consumes = _PATCH_MEDIA_TYPES if method == "patch" else CR_MEDIA_TYPES
            spec = v2.Op(*v3.split_verb(route.name), route.action, query, route.answers,
                         consumes, produces=CR_MEDIA_TYPES)
            operations[method] = v2.operation(spec, gvk, infix, tag)
        return v2.path_item(operations, [*map(v2.path_param, params)])
    return build


# --- the documents' parts ----------------------------------------------------------------------

def openapi_v3_paths_and_schemas(crd: Mapping[str, JSON], version: str,
                                 ) -> tuple[dict[str, JSON], dict[str, JSON]]:
    """The paths and ``components.schemas`` kube publishes for ``crd`` at served ``version`` in
    ``/openapi/v3/apis/<group>/<version>``: the kind, its list, and the meta/v1 (and
    autoscaling/v1 Scale) types they reach, from kubewire's schema facts.

    Raises KeyError when the CRD has no such version.
    """
    cv = CRDVersion.of(crd, version)
    own = {cv.type_name(): kind_schema(cv, False),
           cv.type_name(cv.list_kind): list_schema(cv, False)}
    paths = _paths(cv, _v3_builder(cv))
    seeds = sorted({*v3.iter_refs(paths), *v3.iter_refs(own)} - set(own))
    return paths, dict(sorted({**own, **v3.component_schemas(seeds)}.items()))


def openapi_v2_paths_and_definitions(crd: Mapping[str, JSON], version: str,
                                     ) -> tuple[dict[str, JSON], dict[str, JSON]]:
    """The paths and ``definitions`` ``crd`` at served ``version`` adds to ``/openapi/v2``
    (v2 conversion of the schema, defaults pruned), with the meta/v1 (and autoscaling/v1 Scale)
    definitions they reach, from kubewire's schema facts.

    Raises KeyError when the CRD has no such version.
    """
    cv = CRDVersion.of(crd, version)
    own: dict[str, JSON] = {
        cv.type_name(): _sorted(_prune_defaults(kind_schema(cv, True))),
        cv.type_name(cv.list_kind): _sorted(list_schema(cv, True))}
    paths = _paths(cv, _v2_builder(cv))
    seeds = sorted({*v3.iter_refs(paths, v2.REF_PREFIX), *v3.iter_refs(own, v2.REF_PREFIX)}
                   - set(own))
    return paths, dict(sorted({**own, **v2.definitions(seeds)}.items()))


def _sorted(value: JSON) -> JSON:
    """Every object's keys sorted (v2 writes them so)."""
    if isinstance(value, Mapping):
        return {k: _sorted(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value


__all__ = ["CR_MEDIA_TYPES", "CRDVersion", "kind_schema", "list_schema",
           "openapi_v2_paths_and_definitions", "openapi_v3_paths_and_schemas",
           "rest_friendly_name"]
