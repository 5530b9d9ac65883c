"""The CustomResourceDefinition kind's own validation: apiextensions-apiserver's
``ValidateCustomResourceDefinition`` and ``ValidateCustomResourceDefinitionUpdate``
(``server.apiextensions.crd_validation``), with each schema checked by the structural-schema
rules and compiled for its CEL rules (``schema_rules``, ``cel_rules``).

A schema's check is a pure function of the schema and its path, and the costliest part of a
CRD write (every CEL rule compiled and costed: ~20 ms for Gateway's). Its answers are kept for
the last ``SCHEMA_CHECKS_KEPT`` schemas, keyed by the SHA-256 of their JSON, so a CRD's
``/status`` writes and the pre-installed Gateway API CRDs of each server started in one process
check a schema once.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import msgspec

from kubewire.json_types import JSON
from kubewire.resources import Resource
from kubewire.server.apiextensions import cel_rules, schema_rules
from kubewire.server.apiextensions.crd_validation import validate_crd
from kubewire.status import FieldError

SCHEMA_CHECKS_KEPT = 64
# (SHA-256 of the schema's JSON, path) -> its errors, least recently used first. Servers in
# threads of one process (the tests) share it: each step is one OrderedDict call (atomic), and
# one that finds the entry gone by another thread's eviction is simply skipped.
_checked: OrderedDict[tuple[bytes, str], tuple[FieldError, ...]] = OrderedDict()


def check_schema(schema: Mapping[str, JSON], path: str) -> list[FieldError]:
    """A version's ``openAPIV3Schema`` at ``path``: structural rules, then its CEL rules (which
    only a structural schema can have compiled)."""
    key = (hashlib.sha256(msgspec.json.encode(schema)).digest(), path)
    found = _checked.get(key)
    if found is not None:
        with contextlib.suppress(KeyError):
            _checked.move_to_end(key)
        return list(found)
    errors = schema_rules.schema_errors(schema, path)
    if not errors:
        _, errors = cel_rules.compile_rules(schema, path)
    _checked[key] = tuple(errors)
    while len(_checked) > SCHEMA_CHECKS_KEPT:
        try:
            _checked.popitem(last=False)
        except KeyError:
            break
    return errors


def validate_custom_resource_definition(resource: Resource, obj: Mapping[str, Any],
                                        old: Mapping[str, Any] | None) -> list[FieldError]:
    return validate_crd(obj, old, schema_check=check_schema)
