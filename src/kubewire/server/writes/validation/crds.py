"""The CustomResourceDefinition kind's own validation: apiextensions-apiserver's
``ValidateCustomResourceDefinition`` and ``ValidateCustomResourceDefinitionUpdate``
(``server.apiextensions.crd_validation``), with each schema checked by the structural-schema
rules and compiled for its CEL rules (``schema_rules``, ``cel_rules``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubewire.json_types import JSON
from kubewire.resources import Resource
from kubewire.server.apiextensions import cel_rules, schema_rules
from kubewire.server.apiextensions.crd_validation import validate_crd
from kubewire.status import FieldError


def check_schema(schema: Mapping[str, JSON], path: str) -> list[FieldError]:
    """A version's ``openAPIV3Schema`` at ``path``: structural rules, then its CEL rules (which
    only a structural schema can have compiled)."""
    errors = schema_rules.schema_errors(schema, path)
    if errors:
        return errors
    _, cel_errors = cel_rules.compile_rules(schema, path)
    return cel_errors


def validate_custom_resource_definition(resource: Resource, obj: Mapping[str, Any],
                                        old: Mapping[str, Any] | None) -> list[FieldError]:
    return validate_crd(obj, old, schema_check=check_schema)
