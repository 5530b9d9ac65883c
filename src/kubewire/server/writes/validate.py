"""Checks every write body passes before it reaches the store (all raise Status errors).

- type meta: the body's apiVersion/kind must name the URL's kind (kube handlers/create.go);
- Go decoding: builtin kinds are decoded into Go structs, so a wrong JSON type is a 400 decode
  error in create.go ``transformDecodeError``'s form (``schema.go_decode``); a patch's result
  that does not decode (JSON, merge) or convert (strategic, ``schema.go_convert``) is 422;
- object meta and schema types: 422 Invalid with causes;
- unknown fields per ``fieldValidation`` (Strict: 400; Warn, the default: dropped with a
  ``Warning`` header; Ignore: dropped silently) (objects-and-clients.md §2.7);
- namespaced creates need an existing, non-terminating namespace (NamespaceLifecycle).
"""

from __future__ import annotations

import json
from typing import Any

from kubewire.go_print import go_json, go_sprint
from kubewire.go_text import go_json_surrogates, go_quote, go_utf8
from kubewire.resources import Resource
from kubewire.schema import validate as schema_validate
from kubewire.schema.go_convert import convert_error
from kubewire.schema.go_decode import decode_error
from kubewire.schema.go_time_encoding import encode_times
from kubewire.schema.validate_typed import checks_cleanly
from kubewire.server.context import ServerContext
from kubewire.server.request.options import WriteOptions
from kubewire.server.wire.encoding import media_type
from kubewire.server.wire.http_messages import Request
from kubewire.server.writes import custom_resources, lifecycle
from kubewire.server.writes.validation import meta as validation
from kubewire.server.writes.validation.kinds import create_warnings, validate_kind
from kubewire.server.writes.validation.pods.spec import validate_ephemeral_containers_update
from kubewire.status import BadRequest, FieldError, Invalid, invalid, invalid_object, not_found

# Patches whose result kube re-decodes from JSON (handlers/patch.go jsonPatcher).
_JSON_PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json")
_STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


def check_type_meta(resource: Resource, body: dict[str, Any],
                    patch: Request | None = None) -> None:
    """Check a write body's type meta, then that a builtin body decodes into its Go struct.

    Missing apiVersion/kind default to the URL's; different ones are rejected. A decode error
    is 400 in create.go ``transformDecodeError``'s form. ``body`` is the result of the
    ``patch`` request when one is given: kube decodes a JSON or merge patch's result from JSON
    and converts a strategic merge patch's result from a map, and answers a failure with 422
    on ``patch`` (handlers/patch.go ``jsonPatcher``, ``applyPatchToObject``).
    """
    _check_kind(resource, body)
    if resource.is_custom:
        return
    if patch is None:
        error = decode_error(resource.api_version, resource.kind, body)
        if error is not None:
            raise BadRequest(f'{resource.kind} in version "{resource.version}" cannot be '
                             f"handled as a {resource.kind}: {error}")
        return
    media = media_type(patch.header("content-type"))
    if media in _JSON_PATCH_TYPES:
        error = decode_error(resource.api_version, resource.kind, body)
        if error is not None:
            raise _invalid_patch(go_json(body), error)  # string(patchedObjJS)
    elif media == _STRATEGIC_MERGE_PATCH:
        error = convert_error(resource.api_version, resource.kind, body)
        if error is not None:  # fmt.Sprintf("%+v", patchMap)
            raise _invalid_patch(go_sprint(_decoded(patch.body)), error)


def _invalid_patch(shown: str, error: str) -> Invalid:
    cause = f"Invalid value: {go_quote(shown)}: {error}"
    return Invalid(f' "" is invalid: patch: {cause}',
                   {"causes": [{"reason": "FieldValueInvalid", "message": cause,
                                "field": "patch"}]})


def _decoded(body: bytes) -> Any:
    try:  # as the patch itself was read: invalid UTF-8 and lone surrogates are U+FFFD
        return json.loads(go_json_surrogates(go_utf8(body)))
    except ValueError:
        return None  # the patch was applied, so it decoded: not reached


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


def validate(  # noqa: PLR0913 (two keyword-only switches)
        resource: Resource, obj: dict[str, Any], wopts: WriteOptions,
        old: dict[str, Any] | None = None, *, subresource: str = "",
        kind_rules: bool = True) -> tuple[dict[str, Any], list[str]]:
    """Validate a prepared object; returns it with unknown fields handled, and warnings.
    ``pods/ephemeralcontainers`` has a strategy of its own (``ValidateUpdate``).

    ``kind_rules`` False: the kind's own rules are left to ``validate_admitted``, which runs
    them on what admission makes of the object (a pod create: kube validates once, after
    mutating admission), unless the meta or type checks fail here, when they join this 422 as
    they always have."""
    if resource.crd is not None:
        return _validate_custom(resource, obj, wopts, old, subresource)
    errors: list[FieldError] = list(validation.validate_object_meta(resource, obj))
    # one walk: type errors, and the unknown fields that matter only when there are none.
    # Schema ``required`` does not bind: kube decodes a built-in into its Go struct and only the
    # kind's validation (``validate_kind``) requires anything.
    type_errors: list[FieldError] = []
    unknown: list[str] = []
    if not checks_cleanly(resource.api_version, resource.kind, obj):
        # the walk, for what the typed decode could not rule out
        type_errors, unknown = schema_validate.check_object(
            resource.api_version, resource.kind, obj, schema_required=False)
    errors.extend(type_errors)
    if subresource == "ephemeralcontainers" and old is not None:
        kind_errors = validate_ephemeral_containers_update(obj, old)
    elif kind_rules or errors:
        kind_errors = validate_kind(resource, obj, old, subresource=subresource)
    else:
        kind_errors = []  # ``validate_admitted`` runs them after admission
    # what the meta or type checks said is not repeated; the kind's own list is kept whole, as
    # kube's causes are (errors.NewInvalid: one cause per field error, repeats included)
    earlier = list(errors)
    errors.extend(e for e in kind_errors if e not in earlier)
    if errors:
        raise invalid_object(resource.invalid_group, resource.kind, _name_of(obj), errors)
    warnings: list[str] = []
    if unknown:
        texts = [f'unknown field "{path}"' for path in unknown]
        if wopts.field_validation == "Strict":
            raise BadRequest(f'{resource.kind} in version "{resource.version}" cannot be handled '
                             f"as a {resource.kind}: strict decoding error: " + ", ".join(texts))
        if wopts.field_validation != "Ignore":
            warnings.extend(texts)
        obj = schema_validate.prune_unknown_fields(resource.api_version, resource.kind, obj)
    if old is None and not subresource:  # the strategy's WarningsOnCreate
        warnings.extend(create_warnings(resource, obj))
    # stored as kube's Go structs encode them: times in UTC, Time in whole seconds, missing
    # scalars as ""/0
    obj = encode_times(resource.api_version, resource.kind, obj)
    obj = schema_validate.go_zero_fields(resource.api_version, resource.kind, obj)
    return obj, warnings


def _validate_custom(resource: Resource, obj: dict[str, Any], wopts: WriteOptions,
                     old: dict[str, Any] | None,
                     subresource: str) -> tuple[dict[str, Any], list[str]]:
    """A custom resource of a CRD: pruned and defaulted by its version's schema, then object
    meta, the schema and the CEL rules, all errors in one 422 (``writes.custom_resources``;
    ``subresource`` "status": the status endpoint's checks)."""
    warnings = custom_resources.decode(resource, obj, wopts.field_validation)
    errors: list[FieldError] = list(validation.validate_object_meta(resource, obj))
    schema_errors, ratcheted = custom_resources.validate(resource, obj, old, subresource)
    errors.extend(schema_errors)
    if errors:
        raise invalid_object(resource.group, resource.kind, _name_of(obj), errors)
    return obj, warnings + ratcheted


def validate_admitted(resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    """What ``validate`` (with ``kind_rules=False``) left for after pod admission: the kind's
    rules, run once, on what admission made of the object (it adds volumes, mounts,
    tolerations and more). Admission changes only the spec, with fields of the right JSON types
    that the schema knows, none of them a time, and no metadata: the meta and schema type
    checks (and unknown fields, and so warnings), the times (``encode_times`` gives its own
    output back) and Go's zero values are as the first pass left them. (What the plugins add
    carries every field Go writes without ``omitempty``: a token volume's projections, the
    mounts, pull secrets, tolerations, priority, LimitRanger's resource maps;
    tests/unit/test_admission_and_conditions.py holds them to it.)
    """
    errors = validate_kind(resource, obj, None)
    if errors:
        raise invalid_object(resource.invalid_group, resource.kind, _name_of(obj), errors)
    return obj


async def check_namespace_usable(ctx: ServerContext, resource: Resource, namespace: str,
                                 name: str) -> None:
    """404 ``namespaces "x" not found``; 403 while the namespace is terminating. A namespace
    the cache lacks is looked for again once it caught up with the store, as kube's
    NamespaceLifecycle asks storage when its informer lacks one (made on another replica)."""
    ns_resource = ctx.registry.lookup("", "v1", "namespaces")
    assert ns_resource is not None
    key = ns_resource.storage_key("", namespace)
    ns = ctx.caches.for_resource(ns_resource).get(key)
    if ns is None:
        await ctx.caught_up()
        ns = ctx.caches.for_resource(ns_resource).get(key)
    if ns is None:
        raise not_found("", "namespaces", namespace)
    if ns.fields.get("status.phase") == "Terminating":
        raise lifecycle.namespace_terminating_error(resource, name, namespace)
