"""kube's Swagger 2.0 (``/openapi/v2``) shapes, shared by built-in kinds and custom resources.

Pure. ``server.discovery.openapi_v2`` lays out a built-in kind's paths as installer.go does and
``server.apiextensions.crd.openapi_docs`` a custom resource's as apiextensions-apiserver's
``builder.go`` does; both build their operations, parameters, path items and definitions here.
An operation has ``consumes``, ``produces``, ``schemes`` (``https``), responses with their
status texts (Swagger 2.0 requires them) and a ``401``, ``operationId`` and ``tags`` as the
apiserver names them (``kubewire.schema.openapi_operations``), ``x-kubernetes-action`` and the
GVK; parameters are inline, sorted by name, and those every operation of a path lists sit on
the path (kube-openapi's ``findCommonParameters``).

Compact facts become Swagger 2.0: ``int-or-string`` is ``string``/``int-or-string``, a quantity
``string``, free-form JSON a schema with no type; keys Swagger 2.0 lacks are dropped, since
gnostic refuses a document that has them, and so are defaults (kube's v2 has none).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from kubewire.json_types import JSON
from kubewire.schema.openapi_operations import (
    PARAM_TYPES,
    hoist_parameters,
    referenced_types,
    valid_operation_id,
)

REF_PREFIX = "#/definitions/"
STATUS_TEXTS = {"200": "OK", "201": "Created", "202": "Accepted", "401": "Unauthorized"}
JSON_TYPES = ("application/json",)
STREAM_TYPES = ("application/json", "application/json;stream=watch")
_STREAMING_ACTIONS = frozenset({"list", "watch", "watchlist"})

# Swagger 2.0 schema keys gnostic's compiler accepts (``NewSchema``), besides ``x-*``.
_SCHEMA_KEYS = frozenset({
    "$ref", "additionalProperties", "allOf", "default", "description", "discriminator", "enum",
    "example", "exclusiveMaximum", "exclusiveMinimum", "externalDocs", "format", "items",
    "maxItems", "maxLength", "maxProperties", "maximum", "minItems", "minLength",
    "minProperties", "minimum", "multipleOf", "pattern", "properties", "readOnly", "required",
    "title", "type", "uniqueItems", "xml"})
_COMPACT_TYPES: Mapping[str, Mapping[str, JSON]] = {
    "int-or-string": {"format": "int-or-string", "type": "string"},
    "quantity": {"type": "string"}, "any": {}}


# --- schemas -----------------------------------------------------------------------------------

def convert_schema(raw: Mapping[str, JSON]) -> dict[str, JSON]:
    """A compact schema-facts node as a Swagger 2.0 schema, keys sorted.

    ``ref`` becomes ``$ref`` with the facts written beside it kept beside it, as upstream v2;
    ``default`` is dropped (kube's v2 document carries no defaults, unlike v3).
    """
    out: dict[str, JSON] = {}
    for key, value in raw.items():
        if key == "properties" and isinstance(value, Mapping):
            out[key] = {name: convert_schema(node) for name, node in sorted(value.items())}
        elif key in ("items", "additionalProperties") and isinstance(value, Mapping):
            out[key] = convert_schema(value)
        elif key == "type" and isinstance(value, str) and value in _COMPACT_TYPES:
            out.update(_COMPACT_TYPES[value])
        elif key == "ref":
            out["$ref"] = REF_PREFIX + str(value)
        elif key != "default" and (key in _SCHEMA_KEYS or key.startswith("x-")):
            out[key] = value
    return dict(sorted(out.items()))


def definitions(seeds: Sequence[str]) -> dict[str, JSON]:
    """The named types ``seeds`` and all they reference, sorted by name; kinds carry their GVKs.

    Raises KeyError for a name the schema facts lack.
    """
    return referenced_types(seeds, convert_schema, REF_PREFIX, sort_kinds=True)


# --- parameters, operations, paths -------------------------------------------------------------

def query(name: str) -> JSON:
    """A query parameter (its type from ``PARAM_TYPES``, else string)."""
    return {"in": "query", "name": name, "type": PARAM_TYPES.get(name, "string"),
            "uniqueItems": True}


def path_param(name: str) -> JSON:
    return {"in": "path", "name": name, "required": True, "type": "string",
            "uniqueItems": True}


def body(type_name: str, *, required: bool = True) -> JSON:
    """The ``body`` parameter, of the named type."""
    out: dict[str, JSON] = {"in": "body", "name": "body", "schema": {"$ref": REF_PREFIX +
                                                                      type_name}}
    if required:
        out["required"] = True
    return dict(sorted(out.items()))


def sorted_params(params: Sequence[JSON]) -> list[JSON]:
    return sorted(params, key=lambda p: str(p["name"]) if isinstance(p, Mapping) else "")


class Op(NamedTuple):
    """An operation: ``verb`` and ``name`` are installer.go's operation name split after its
    verb (``list``, ``NamespacedPod``); a response is the name of a definition, a schema, or
    None (no schema)."""

    verb: str
    name: str
    action: str
    params: Sequence[JSON]
    responses: Mapping[str, str | dict[str, JSON] | None]
    consumes: Sequence[str] = ("*/*",)
    gvk: dict[str, str] | None = None
    produces: Sequence[str] | None = None  # None: by action (JSON, or a watch stream too)


def operation(spec: Op, gvk: dict[str, str], infix: str, tag: str) -> dict[str, JSON]:
    """One operation of a kind whose GVK is ``gvk`` (unless ``spec`` names another), served
    in the group-version whose operationId infix is ``infix`` and tag ``tag``."""
    verb, name, action, params, responses, consumes, own_gvk, produces = spec
    if produces is None:
        produces = STREAM_TYPES if action in _STREAMING_ACTIONS else JSON_TYPES
    codes: dict[str, JSON] = {}
    for code, schema in {**responses, "401": None}.items():
        answer: dict[str, JSON] = {"description": STATUS_TEXTS[code]}
        if isinstance(schema, str):
            answer["schema"] = {"$ref": REF_PREFIX + schema}
        elif schema is not None:
            answer["schema"] = schema
        codes[code] = answer
    op: dict[str, JSON] = {
        "consumes": list(consumes), "operationId": verb + infix + valid_operation_id(name, True),
        "produces": list(produces), "responses": codes, "schemes": ["https"],
        "tags": [tag], "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": own_gvk or gvk}
    if params:
        op["parameters"] = sorted_params(params)
    return dict(sorted(op.items()))


def path_item(ops: Mapping[str, Mapping[str, JSON]], params: Sequence[JSON],
              own: Sequence[str] = ("pretty",)) -> dict[str, JSON]:
    """A path's operations and its parameters: ``params``, the query parameters ``own`` and
    those every operation lists (``openapi_operations.hoist_parameters``)."""
    kept, common = hoist_parameters(ops)
    path_params = sorted_params([*params, *map(query, own), *common])
    return dict(sorted({**kept, "parameters": path_params}.items()))
