"""Checks every write body passes before it reaches the store (all raise Status errors).

- type meta: the body's apiVersion/kind must name the URL's kind (kube handlers/create.go);
- Go decoding: builtin kinds are decoded into Go structs, so a wrong JSON type is a 400 decode
  error in create.go ``transformDecodeError``'s form (``schema.go_decode``), or for a JSON or
  merge patch the 422 that handlers/patch.go ``jsonPatcher`` makes of it;
- object meta and schema types: 422 Invalid with causes;
- unknown fields per ``fieldValidation`` (Strict: 400; Warn, the default: dropped with a
  ``Warning`` header; Ignore: dropped silently) (objects-and-clients.md §2.7);
- namespaced creates need an existing, non-terminating namespace (NamespaceLifecycle).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from kubewire import validation
from kubewire.go_text import go_quote
from kubewire.resources import Resource
from kubewire.schema import validate as schema_validate
from kubewire.schema.go_decode import decode_error
from kubewire.server import lifecycle
from kubewire.server.context import ServerContext
from kubewire.server.options import WriteOptions
from kubewire.status import BadRequest, FieldError, Invalid, invalid, invalid_object, not_found

# Patches whose result kube re-decodes from JSON (handlers/patch.go jsonPatcher).
_JSON_PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json")
_GO_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
                    "\u2029": "\\u2029"}
_GO_SHORT_ESCAPES = {"b": "\\u0008", "f": "\\u000c"}  # Go shortens only n, r, t
_JSON_ESCAPE = re.compile(r"\\(.)")
_encode_sorted = msgspec.json.Encoder(order="sorted").encode


def check_type_meta(resource: Resource, body: dict[str, Any], patch_type: str = "") -> None:
    """Check a write body's type meta, then that a builtin body decodes into its Go struct.

    Missing apiVersion/kind default to the URL's; different ones are rejected. A decode error
    is 400 in create.go ``transformDecodeError``'s form. For a patch's result (``patch_type``
    is the request's media type) kube decodes a JSON or merge patch's result and answers 422 on
    ``patch`` (handlers/patch.go ``jsonPatcher.applyPatchToCurrentObject``); a strategic merge
    patch's result is converted from a map instead and keeps ``validate``'s schema check.
    """
    _check_kind(resource, body)
    media = patch_type.split(";", 1)[0].strip().lower()
    if resource.is_custom or (patch_type and media not in _JSON_PATCH_TYPES):
        return
    error = decode_error(resource.api_version, resource.kind, body)
    if error is None:
        return
    if not patch_type:
        raise BadRequest(f'{resource.kind} in version "{resource.version}" cannot be handled '
                         f"as a {resource.kind}: {error}")
    cause = f"Invalid value: {go_quote(go_json(body))}: {error}"
    raise Invalid(f' "" is invalid: patch: {cause}',
                  {"causes": [{"reason": "FieldValueInvalid", "message": cause,
                               "field": "patch"}]})


def go_json(value: Any) -> str:
    """``value`` as Go's ``json.Marshal`` of maps writes it: compact, keys sorted, ``<>&`` and
    U+2028/2029 escaped, control characters as ``\\u00XX`` except ``\\n \\r \\t``."""
    text = _encode_sorted(value).decode()
    text = _JSON_ESCAPE.sub(lambda m: _GO_SHORT_ESCAPES.get(m[1], m[0]), text)
    for char, escaped in _GO_JSON_ESCAPES.items():
        text = text.replace(char, escaped)
    return text


def _check_kind(resource: Resource, body: dict[str, Any]) -> None:
    api_version = body.get("apiVersion") or resource.api_version
    kind = body.get("kind") or resource.kind
    if not isinstance(api_version, str) or not isinstance(kind, str):
        raise BadRequest("couldn't get version/kind; json parse error: apiVersion and kind "
                         "must be strings")
    if api_version != resource.api_version:
        raise BadRequest(f"the API version in the data ({api_version}) does not match the "
                         f"expected API version ({resource.api_version})")
    if kind != resource.kind:
        if resource.is_custom:
            name = _name_of(body)
            raise invalid_object(resource.group, kind, name, [
                invalid("kind", kind, f"must be {resource.kind}")])
        version = api_version.rsplit("/", 1)[-1]
        raise BadRequest(f'{kind} in version "{version}" cannot be handled as a {resource.kind}: '
                         f"the kind in the data ({kind}) does not match the expected kind "
                         f"({resource.kind})")


def _name_of(body: dict[str, Any]) -> str:
    meta = body.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else ""
    return name if isinstance(name, str) else ""


def validate(resource: Resource, obj: dict[str, Any], wopts: WriteOptions,
             old: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[str]]:
    """Validate a prepared object; returns it with unknown fields handled, and warnings."""
    del old  # update-specific rules live in lifecycle.prepare_update
    errors: list[FieldError] = list(validation.validate_object_meta(resource, obj))
    errors.extend(schema_validate.validate_types(resource.api_version, resource.kind, obj))
    if errors:
        raise invalid_object(resource.group, resource.kind, _name_of(obj), errors)
    warnings: list[str] = []
    unknown = schema_validate.unknown_fields(resource.api_version, resource.kind, obj)
    if unknown:
        texts = [f'unknown field "{path}"' for path in unknown]
        if wopts.field_validation == "Strict":
            raise BadRequest(f'{resource.kind} in version "{resource.version}" cannot be handled '
                             f"as a {resource.kind}: strict decoding error: " + ", ".join(texts))
        if wopts.field_validation != "Ignore":
            warnings.extend(texts)
        obj = schema_validate.prune_unknown_fields(resource.api_version, resource.kind, obj)
    if resource.is_custom:
        obj = schema_validate.apply_defaults(resource.api_version, resource.kind, obj)
    return obj, warnings


def check_namespace_usable(ctx: ServerContext, resource: Resource, namespace: str,
                           name: str) -> None:
    """404 ``namespaces "x" not found``; 403 while the namespace is terminating."""
    ns_resource = ctx.registry.lookup("", "v1", "namespaces")
    assert ns_resource is not None
    ns = ctx.caches.for_resource(ns_resource).get(ns_resource.storage_key("", namespace))
    if ns is None:
        raise not_found("", "namespaces", namespace)
    if ns.fields.get("status.phase") == "Terminating":
        raise lifecycle.namespace_terminating_error(resource, name, namespace)
