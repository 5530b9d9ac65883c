"""What a write of a custom resource (a kind served from a CRD) goes through, in kube's order
(crds.md §4.1-4.6; apiextensions-apiserver ``customresource_handler.go`` and
``registry/customresource/strategy.go``, ``validator.go``).

1. decode: unknown fields pruned against the version's structural schema (``fieldValidation``
   Strict: 400; Warn, the default: a warning per field; Ignore: silent), non-nullable ``null``s
   without a default dropped, then defaults applied;
2. validate: the schema (types, formats, enums, bounds), the scale subresource's replicas,
   embedded resources, list types, then the CEL rules, which a blocking schema error skips
   (``hasBlockingErr``). An update ratchets (``CRDValidationRatcheting``, on in 1.32): schema
   errors on values unchanged from the old object are dropped, failing CEL rules on them
   become warnings, and list types are checked only when the old object passed them
   (``strategy.go`` ``ValidateUpdate``). A ``/status`` write checks ``status`` alone against
   its schema, the status replicas, list types as an update does, and CEL without ratcheting
   (``status_strategy.go`` ``ValidateUpdate``, ``validator.go`` ``ValidateStatusUpdate``).

The schema of each served version is compiled once per CRD generation (``compiled``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kubewire.json_types import JSON
from kubewire.resources import Resource
from kubewire.server.apiextensions.schemas import defaulting, pruning
from kubewire.server.apiextensions.schemas.embedded import validate_embedded
from kubewire.server.apiextensions.schemas.list_types import validate_list_types
from kubewire.server.apiextensions.schemas.openapi_validator import validate_update
from kubewire.server.apiextensions.schemas.schema_validation import validate_schema, validate_status
from kubewire.server.apiextensions.schemas.structural import Structural, parse
from kubewire.server.apiextensions.validation_rules import cel_rules
from kubewire.status import BadRequest, FieldError

# hasBlockingErr: a schema error of these types leaves the CEL rules unchecked.
_BLOCKING = frozenset({"FieldValueRequired", "FieldValueNotSupported", "FieldValueTooLong",
                       "FieldValueTooMany", "FieldValueTypeInvalid"})
_UNCHECKED_RULES = FieldError(
    "FieldValueInvalid", "<nil>", "null",
    "some validation rules were not checked because the object was invalid; correct the "
    "existing errors to complete validation")
_MAX_INT32 = 2**31 - 1


@dataclass(frozen=True, slots=True)
class CompiledVersion:
    """One served version of a CRD, ready for writes: its structural schema (None when the
    version has none, which v1 CRDs cannot have) and its CEL rules."""

    schema: Structural | None
    rules: cel_rules.CompiledRules | None
    spec_replicas_path: str | None
    status_replicas_path: str | None


def version_facts(crd: Mapping[str, Any], version: str) -> Mapping[str, Any]:
    """The ``spec.versions[]`` entry named ``version`` (with the top-level schema, subresources
    and columns as fallbacks, as v1 still allows them to be read)."""
    spec = crd.get("spec") or {}
    for entry in spec.get("versions") or ():
        if isinstance(entry, Mapping) and entry.get("name") == version:
            return entry
    return {}


def compiled(resource: Resource) -> CompiledVersion:
    """The compiled facts of ``resource``'s CRD version (cached per uid, generation, version)."""
    assert resource.crd is not None
    meta = resource.crd.get("metadata") or {}
    return _compiled(str(meta.get("uid")), int(meta.get("generation") or 0), resource.version,
                     _Frozen(resource.crd))


class _Frozen:
    """A CRD carried through ``lru_cache`` without taking part in its key."""

    __slots__ = ("crd",)

    def __init__(self, crd: Mapping[str, Any]) -> None:
        self.crd = crd

    def __hash__(self) -> int:
        return 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Frozen)


@lru_cache(maxsize=256)
def _compiled(uid: str, generation: int, version: str, frozen: _Frozen) -> CompiledVersion:
    facts = version_facts(frozen.crd, version)
    raw = (facts.get("schema") or {}).get("openAPIV3Schema")
    schema = parse(raw) if isinstance(raw, Mapping) else None
    rules = None
    if isinstance(raw, Mapping):
        rules, _ = cel_rules.compile_rules(raw, "")  # the CRD passed validation: no errors
        if rules.root is None:  # cel.NewValidator is nil without rules: nothing is "unchecked"
            rules = None
    scale = (facts.get("subresources") or {}).get("scale") or {}
    return CompiledVersion(schema, rules, scale.get("specReplicasPath"),
                           scale.get("statusReplicasPath"))


def decode(resource: Resource, obj: dict[str, JSON], field_validation: str) -> list[str]:
    """Step 1 on ``obj`` in place: prune, then default. Returns the unknown-field warnings;
    raises kube's 400 for ``fieldValidation=Strict``."""
    version = compiled(resource)
    if version.schema is None:
        return []
    unknown = pruning.prune(version.schema, obj)
    warnings: list[str] = []
    if unknown:
        texts = [f'unknown field "{path}"' for path in unknown]
        if field_validation == "Strict":
            raise BadRequest(f'{resource.kind} in version "{resource.version}" cannot be handled '
                             f"as a {resource.kind}: strict decoding error: " + ", ".join(texts))
        if field_validation != "Ignore":
            warnings.extend(texts)
    defaulting.apply_defaults(version.schema, obj)
    return warnings


def default(resource: Resource, obj: dict[str, JSON]) -> None:
    """Defaults of ``resource``'s version applied to ``obj`` in place (kube also defaults a
    custom resource read from storage)."""
    version = compiled(resource)
    if version.schema is not None:
        defaulting.apply_defaults(version.schema, obj)


def validate(resource: Resource, obj: Mapping[str, JSON], old: Mapping[str, JSON] | None,
             subresource: str = "") -> tuple[list[FieldError], list[str]]:
    """Step 2: the schema's errors, the scale replicas', embedded resources', list types',
    then the CEL rules' (or the note that they were not checked); and the warnings of rules
    that ratcheted."""
    version = compiled(resource)
    schema = version.schema
    status_only = subresource == "status" and old is not None
    errors: list[FieldError] = []
    if schema is not None:
        errors.extend(_schema_errors(schema, obj, old, status_only=status_only))
    errors.extend(_scale_replicas_errors(version, obj, spec=not status_only))
    if schema is not None:
        if not status_only:
            errors.extend(validate_embedded(schema, obj))
        # on update, only when the old object passed them
        if old is None or not validate_list_types(schema, old):
            errors.extend(validate_list_types(schema, obj))
    warnings: list[str] = []
    if version.rules is not None:
        if any(e.type in _BLOCKING for e in errors):
            errors.append(_UNCHECKED_RULES)
        elif old is not None and schema is not None and not status_only:
            rule_errors, warnings = cel_rules.evaluate_update(version.rules, schema, obj, old)
            errors.extend(rule_errors)
        else:
            errors.extend(cel_rules.evaluate(version.rules, obj, old))
    return errors, warnings


def _schema_errors(schema: Structural, obj: Mapping[str, JSON], old: Mapping[str, JSON] | None,
                   *, status_only: bool) -> list[FieldError]:
    """The OpenAPI schema's errors: of the whole object (an update's ratcheted), or of
    ``status`` alone with a validator rooted at its schema (kube-openapi's text then names the
    field without the ``status.`` prefix)."""
    if status_only:
        return validate_status(schema, obj)
    if old is not None:
        return validate_update(schema, obj, old)
    return validate_schema(schema, obj)


def _scale_replicas_errors(version: CompiledVersion, obj: Mapping[str, JSON], *,
                           spec: bool = True) -> list[FieldError]:
    """validator.go ``ValidateScaleSpec``/``ValidateScaleStatus``: the replicas at the scale
    paths are int32s that are not negative (path printed as the CRD declares it); a status
    write checks the status path only."""
    errors: list[FieldError] = []
    for path in (version.spec_replicas_path if spec else None, version.status_replicas_path):
        if not path:
            continue
        value: Any = obj
        for part in path.lstrip(".").split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if isinstance(value, bool) or not isinstance(value, int):
            continue  # absent, or the schema reports its type
        if value < 0:
            errors.append(FieldError("FieldValueInvalid", path, value,
                                     "should be a non-negative integer"))
        elif value > _MAX_INT32:
            errors.append(FieldError("FieldValueInvalid", path, value,
                                     f"should be less than or equal to {_MAX_INT32}"))
    return errors
