"""CRD-time checks of the ``default`` values in a structural schema.

A port of ``AE:pkg/apiserver/schema/defaulting/validation.go`` ``ValidateDefaults`` (the root
taken as a resource, as kube clones it with ``x-kubernetes-embedded-resource``). For each node
with a ``default`` outside resource meta (walking ``properties`` and ``items``, never
``additionalProperties``):

1. the default must already be pruned: ``<path>.default: Invalid value: <v>: must not have
   unknown fields`` (``pruning.Prune`` of a copy changes it);
2. else embedded resources inside it must coerce (``apiVersion``/``kind`` strings,
   ``metadata`` decodable: ``objectmeta.Coerce``) and validate (``objectmeta.Validate``);
3. else it must pass the node's OpenAPI schema, in ``Structural.ToKubeOpenAPI``'s form (formats
   as written, int-or-string by its ``anyOf``), errors under ``<path>.default``.

A default inside resource meta (``apiVersion``, ``kind``, ``metadata`` of the root or an embedded
resource) is checked against its own schema only; kube also requires the surrounding object to
make valid metadata (``must result in valid metadata: ...``), which is not checked here. CEL rules
on defaults are the CEL module's.
"""

from __future__ import annotations

from kubewire.json_types import JSON
from kubewire.server.apiextensions.schemas.embedded import decode_error, validate_embedded
from kubewire.server.apiextensions.schemas.go_values import deep_copy, field_value, go_equal
from kubewire.server.apiextensions.schemas.openapi_validator import validate_value
from kubewire.server.apiextensions.schemas.pruning import prune_unknown
from kubewire.server.apiextensions.schemas.structural import Structural
from kubewire.status import FieldError, invalid

_META = frozenset({"apiVersion", "kind", "metadata"})


def default_errors(root: Structural, path: str) -> list[FieldError]:
    """``ValidateDefaults(path, root, isResourceRoot=true, requirePrunedDefaults=true)``."""
    errors: list[FieldError] = []
    _walk(root, path, False, True, errors)
    return errors


def _walk(s: Structural, path: str, inside_meta: bool, embedded: bool,
          errors: list[FieldError]) -> None:
    embedded = embedded or s.embedded_resource
    if embedded:
        inside_meta = False
    if s.has_default:
        at = f"{path}.default"
        if inside_meta:
            errors.extend(validate_value(s, s.default, at, crd_form=False))
        else:
            errors.extend(_check_default(s, at, embedded))
    if s.items is not None:
        _walk(s.items, f"{path}.items", inside_meta, False, errors)
    for name, prop in s.properties.items():
        _walk(prop, f"{path}.properties[{name}]", inside_meta or (embedded and name in _META),
              False, errors)


def _check_default(s: Structural, at: str, embedded: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    pruned = deep_copy(s.default)
    prune_unknown(s, pruned, root=embedded)
    if not go_equal(pruned, s.default):
        errors.append(invalid(at, field_value(s.default), "must not have unknown fields"))
    coerce = _coerce_error(s.default, s, at, embedded)
    if coerce is not None:
        errors.append(coerce)
        return errors
    meta_errors = validate_embedded(s, s.default, at, root_embedded=embedded)
    if meta_errors:
        return errors + meta_errors
    return errors + validate_value(s, s.default, at, crd_form=False)


def _coerce_error(x: JSON, s: Structural | None, path: str, embedded: bool) -> FieldError | None:
    """The first error of ``objectmeta.Coerce(path, x, s, embedded, false)``."""
    if s is None:
        return None
    if isinstance(x, dict):
        return _coerce_map_error(x, s, path, embedded or s.embedded_resource)
    if isinstance(x, list):
        for i, v in enumerate(x):
            error = _coerce_error(v, s.items, f"{path}[{i}]", False)
            if error is not None:
                return error
    return None


def _meta_coerce_error(k: str, v: JSON, path: str) -> FieldError | None:
    if k in ("apiVersion", "kind") and not isinstance(v, str):
        return invalid(f"{path}.{k}", field_value(v), "must be a string")
    if k == "metadata" and (problem := decode_error(v)):
        return invalid(f"{path}.metadata", field_value(v), problem)
    return None


def _coerce_map_error(x: dict[str, JSON], s: Structural, path: str,
                      embedded: bool) -> FieldError | None:
    for k, v in x.items():
        error = _meta_coerce_error(k, v, path) if embedded else None
        if error is None:
            prop = s.properties.get(k)
            if prop is not None:
                error = _coerce_error(v, prop, f"{path}.{k}", False)
            elif s.additional_properties is not None:
                error = _coerce_error(v, s.additional_schema, f"{path}[{k}]", False)
        if error is not None:
            return error
    return None


__all__ = ["default_errors"]
