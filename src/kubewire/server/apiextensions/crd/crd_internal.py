"""A CRD as apiextensions validates it: the *internal* form of a v1 object, and small readers.

kube converts a v1 CustomResourceDefinition to its internal type before validating it
(``apiextensions-apiserver:pkg/apis/apiextensions/v1/conversion.go``
``Convert_v1_CustomResourceDefinitionSpec_To_apiextensions_CustomResourceDefinitionSpec``):
``version`` becomes ``versions[0].name``; a per-version ``schema``, ``subresources``,
``additionalPrinterColumns`` or ``selectableFields`` that is identical in **every** version is
hoisted to the top-level ``validation``, ``subresources``, ``additionalPrinterColumns``,
``selectableFields`` and cleared in the versions; ``conversion.webhook.{clientConfig,
conversionReviewVersions}`` become ``conversion.{webhookClientConfig,conversionReviewVersions}``.
Error paths are printed on that form (crds.md §1.14), so the validator reads it, not the v1 body.

"Identical" is apimachinery's ``Semantic.DeepEqual``: empty and absent slices and maps are equal,
a set pointer never equals an absent one. ``semantic_equal`` approximates it on JSON: an absent
key, ``null``, ``[]`` and ``{}`` are the same value inside objects (kubewire cannot tell an
empty struct pointer from an empty map there), booleans never equal numbers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubewire.json_types import JSON

ESTABLISHED = "Established"
NAMES_ACCEPTED = "NamesAccepted"
TERMINATING = "Terminating"

_EMPTY: tuple[JSON, ...] = (None, [], {})


def semantic_equal(a: JSON, b: JSON) -> bool:
    """``apiequality.Semantic.DeepEqual`` of two JSON values (see the module docstring)."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = {k for k, v in a.items() if not _is_empty(v)} | {
            k for k, v in b.items() if not _is_empty(v)}
        return all(semantic_equal(a.get(k), b.get(k)) for k in keys)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(semantic_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if _is_empty(a) and _is_empty(b):
        return True
    if isinstance(a, dict | list) or isinstance(b, dict | list):
        return False
    return bool(a == b)


def _is_empty(value: JSON) -> bool:
    return value is None or (isinstance(value, list | dict) and not value)


def as_dict(value: JSON) -> dict[str, JSON]:
    """``value`` when it is an object, else {} (Go's zero value for a mistyped field)."""
    return value if isinstance(value, dict) else {}


def as_list(value: JSON) -> list[JSON]:
    return value if isinstance(value, list) else []


def as_str(value: JSON) -> str:
    return value if isinstance(value, str) else ""


def strings(value: JSON) -> list[str]:
    return [v for v in as_list(value) if isinstance(v, str)]


@dataclass
class InternalVersion:
    """One ``spec.versions[i]`` of the internal form (hoisted fields are None / empty)."""

    index: int
    name: str
    served: bool
    storage: bool
    deprecated: bool
    deprecation_warning: str | None
    has_deprecation_warning: bool
    schema: dict[str, JSON] | None  # the CustomResourceValidation ({openAPIV3Schema: ...})
    subresources: dict[str, JSON] | None
    columns: list[JSON]
    selectable_fields: list[JSON]


@dataclass
class InternalSpec:
    """The internal ``CustomResourceDefinitionSpec`` fields validation reads."""

    group: str
    version: str
    names: dict[str, JSON]
    scope: str
    validation: dict[str, JSON] | None
    subresources: dict[str, JSON] | None
    versions: list[InternalVersion]
    columns: list[JSON]
    selectable_fields: list[JSON]
    # {strategy, webhookClientConfig?, conversionReviewVersions?}
    conversion: dict[str, JSON] | None
    preserve_unknown_fields: bool
    raw_versions: list[dict[str, JSON]] = field(default_factory=list)


def _object_or_none(value: JSON) -> dict[str, JSON] | None:
    return value if isinstance(value, dict) else None


def internal_spec(crd: Mapping[str, JSON]) -> InternalSpec:
    """The internal form of ``crd['spec']`` (the module docstring says what moves where)."""
    spec = as_dict(crd.get("spec"))
    raw_versions = [as_dict(v) for v in as_list(spec.get("versions"))]
    versions = [
        InternalVersion(
            index=i, name=as_str(v.get("name")), served=v.get("served") is True,
            storage=v.get("storage") is True, deprecated=v.get("deprecated") is True,
            deprecation_warning=(v["deprecationWarning"]
                                 if isinstance(v.get("deprecationWarning"), str) else None),
            has_deprecation_warning=isinstance(v.get("deprecationWarning"), str),
            schema=_object_or_none(v.get("schema")),
            subresources=_object_or_none(v.get("subresources")),
            columns=as_list(v.get("additionalPrinterColumns")),
            selectable_fields=as_list(v.get("selectableFields")))
        for i, v in enumerate(raw_versions)]
    internal = InternalSpec(
        group=as_str(spec.get("group")), version=versions[0].name if versions else "",
        names=as_dict(spec.get("names")), scope=as_str(spec.get("scope")), validation=None,
        subresources=None, versions=versions, columns=[], selectable_fields=[],
        conversion=_internal_conversion(spec.get("conversion")),
        preserve_unknown_fields=spec.get("preserveUnknownFields") is True,
        raw_versions=raw_versions)
    if not versions:
        return internal
    first = versions[0]
    if all(_same_pointer(v.subresources, first.subresources) for v in versions):
        internal.subresources = first.subresources
        for v in versions:
            v.subresources = None
    if all(_same_pointer(v.schema, first.schema) for v in versions):
        internal.validation = first.schema
        for v in versions:
            v.schema = None
    if all(semantic_equal(v.columns, first.columns) for v in versions):
        internal.columns = first.columns
        for v in versions:
            v.columns = []
    if all(semantic_equal(v.selectable_fields, first.selectable_fields) for v in versions):
        internal.selectable_fields = first.selectable_fields
        for v in versions:
            v.selectable_fields = []
    return internal


def _same_pointer(a: dict[str, JSON] | None, b: dict[str, JSON] | None) -> bool:
    """DeepEqual of two struct pointers: both nil, or both set to semantically equal values."""
    return (a is None) == (b is None) and semantic_equal(a, b)


def _internal_conversion(value: JSON) -> dict[str, JSON] | None:
    """``Convert_v1_CustomResourceConversion_To_apiextensions_CustomResourceConversion``."""
    if not isinstance(value, dict):
        return None
    out: dict[str, JSON] = {"strategy": as_str(value.get("strategy"))}
    webhook = value.get("webhook")
    if isinstance(webhook, dict):
        if webhook.get("conversionReviewVersions") is not None:
            out["conversionReviewVersions"] = webhook["conversionReviewVersions"]
        if isinstance(webhook.get("clientConfig"), dict):
            out["webhookClientConfig"] = webhook["clientConfig"]
    return out


def open_api_schema(validation: Mapping[str, JSON] | None) -> dict[str, JSON] | None:
    """``validation.openAPIV3Schema`` when set."""
    if validation is None:
        return None
    return _object_or_none(validation.get("openAPIV3Schema"))


def subschemas(schema: Mapping[str, JSON]) -> Iterator[Mapping[str, JSON]]:
    """The direct child schemas ``SchemaHas`` visits (items, *Of, not, properties, ...)."""
    items = schema.get("items")
    if isinstance(items, dict):
        yield items
    elif isinstance(items, list):
        yield from (s for s in items if isinstance(s, dict))
    for key in ("allOf", "anyOf", "oneOf"):
        yield from (s for s in as_list(schema.get(key)) if isinstance(s, dict))
    for key in ("not", "additionalProperties", "additionalItems"):
        if isinstance(schema.get(key), dict):
            yield schema[key]
    for key in ("properties", "patternProperties", "definitions", "dependencies"):
        yield from (s for s in as_dict(schema.get(key)).values() if isinstance(s, dict))


def schema_has(schema: Mapping[str, JSON] | None, pred: Any) -> bool:
    """``SchemaHas``: whether ``pred`` holds for ``schema`` or any schema below it."""
    if schema is None:
        return False
    stack: list[Mapping[str, JSON]] = [schema]
    while stack:
        node = stack.pop()
        if pred(node):
            return True
        stack.extend(subschemas(node))
    return False


# --- small readers of the v1 object --------------------------------------------------------

def storage_version(crd: Mapping[str, JSON]) -> str | None:
    """The name of the first version marked ``storage: true``."""
    for version in as_list(as_dict(crd.get("spec")).get("versions")):
        if isinstance(version, dict) and version.get("storage") is True:
            return as_str(version.get("name"))
    return None


def find_condition(crd: Mapping[str, JSON], kind: str) -> dict[str, JSON] | None:
    """``FindCRDCondition``: the status condition of type ``kind``."""
    for cond in as_list(as_dict(crd.get("status")).get("conditions")):
        if isinstance(cond, dict) and cond.get("type") == kind:
            return cond
    return None


def is_condition_true(crd: Mapping[str, JSON], kind: str) -> bool:
    """``IsCRDConditionTrue``: the condition is present and its status is ``True``."""
    cond = find_condition(crd, kind)
    return cond is not None and cond.get("status") == "True"
