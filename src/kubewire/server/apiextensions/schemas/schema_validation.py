"""Request-time validation of a custom resource against its version's structural schema.

What ``AE:pkg/registry/customresource/strategy.go`` ``customResourceStrategy.Validate`` runs
after the type-meta and object-meta checks, in its order:

1. the OpenAPI schema over the whole object (``validator.go`` ``Validate`` →
   ``AE:pkg/apiserver/validation/validation.go`` ``ValidateCustomResource`` with a nil path):
   kube-openapi's checks and messages (``openapi_validator``), e.g.
   ``spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer:
   "string"``; the root's declared ``apiVersion``/``kind``/``metadata`` properties included.
   (The scale-subresource replica checks come next in kube; the server runs those.)
2. embedded resources' ``apiVersion``/``kind``/``metadata`` (``embedded``);
3. ``x-kubernetes-list-type`` set/map uniqueness (``list_types``).

``validate`` returns all three, in that order. ``validate_status`` is the ``/status`` form: the
``status`` value against ``properties.status`` with the path prefix ``status`` (kube-openapi's
own text then lacks the prefix: ``status.replicas: Invalid value: -1: replicas in body should
be greater than or equal to 0``). CEL rules and update ratcheting are not part of this module.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubewire.json_types import JSON
from kubewire.server.apiextensions.schemas.embedded import validate_embedded
from kubewire.server.apiextensions.schemas.list_types import validate_list_types
from kubewire.server.apiextensions.schemas.openapi_validator import NIL_PATH, validate_value
from kubewire.server.apiextensions.schemas.structural import Structural
from kubewire.status import FieldError


def validate_schema(schema: Structural, obj: Mapping[str, JSON]) -> list[FieldError]:
    """Step 1 alone: the OpenAPI schema's errors for the whole object."""
    return validate_value(schema, obj, None)


def validate(schema: Structural, obj: Mapping[str, JSON]) -> list[FieldError]:
    """Steps 1-3 for a whole custom resource (already pruned and defaulted)."""
    errors = validate_value(schema, obj, None)
    errors += validate_embedded(schema, obj)
    errors += validate_list_types(schema, obj)
    return errors


def validate_status(schema: Structural, obj: Mapping[str, JSON]) -> list[FieldError]:
    """``ValidateStatusUpdate``'s schema part: ``status`` (when present) against
    ``properties.status``, prefixed ``status``."""
    status_schema = schema.properties.get("status")
    if "status" not in obj or status_schema is None:
        return []
    return validate_value(status_schema, obj["status"], "status")


__all__ = ["NIL_PATH", "validate", "validate_schema", "validate_status"]
