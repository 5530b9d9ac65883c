"""Validation of a CustomResourceDefinition on create, update and ``/status`` update.

Source: ``apiextensions-apiserver:pkg/apis/apiextensions/validation/validation.go`` at v0.32
(``ValidateCustomResourceDefinition``, ``ValidateCustomResourceDefinitionUpdate``,
``ValidateUpdateCustomResourceDefinitionStatus`` and what they call), read on the internal form
of the object (``crd_internal``: hoisted schema, subresources, columns and selectable fields
are reported at ``spec.validation``, ``spec.subresources``, ``spec.additionalPrinterColumns``,
``spec.selectableFields``), in kube's order, with kube's paths and texts (crds.md §1).

What is not here: the generic ObjectMeta rules (``metadata.name`` as a DNS-1123 subdomain,
labels, annotations, the update rules) that every kind gets from the write pipeline, and the
schema rules themselves (structural schema, defaults, list/map types, CEL): the caller passes
those as ``schema_check``, which is called once per schema with the path kube prints
(``spec.validation.openAPIV3Schema`` or ``spec.versions[<i>].schema.openAPIV3Schema``) after
this module's root rule for the status subresource. ``schema_check`` covers everything
``validateCustomResourceDefinitionValidation`` does from ``openAPIV3Schema.nullable`` on.

Versions of the schema rules that relax for objects kube stored before they tightened
(``requireStructuralSchema`` and friends on update) are the schema check's business; this module
applies ``requireOpenAPISchema`` and the conversion-review and CA-bundle relaxations.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping

from kubewire.go_text import GoLiteral, go_string_slice
from kubewire.json_types import JSON
from kubewire.names import is_dns1035_label, is_dns1123_subdomain
from kubewire.server.apiextensions.crd.crd_internal import (
    ESTABLISHED,
    InternalSpec,
    InternalVersion,
    as_dict,
    as_list,
    as_str,
    internal_spec,
    is_condition_true,
    open_api_schema,
    schema_has,
    strings,
)
from kubewire.server.apiextensions.crd.go_literals import go_schema_props, go_versions
from kubewire.server.apiextensions.crd.webhook_config import (
    URLError,
    ca_bundle_problem,
    parse_go_url,
    validate_ca_bundle,
    validate_webhook_service,
    validate_webhook_url,
)
from kubewire.status import FieldError, forbidden, invalid, not_supported, required

SchemaCheck = Callable[[Mapping[str, JSON], str], list[FieldError]]
"""(openAPIV3Schema, the path kube prints for it) -> the schema's field errors."""

MAX_SELECTABLE_FIELDS = 8
API_APPROVAL_ANNOTATION = "api-approved.kubernetes.io"
_PRINTER_COLUMN_TYPES = ("boolean", "date", "integer", "number", "string")
_PRINTER_COLUMN_FORMATS = ("byte", "date", "date-time", "double", "float", "int32", "int64",
                           "password")
_CONVERSION_REVIEW_VERSIONS = ("v1", "v1beta1")
_IMMUTABLE = "field is immutable"
# JSONSchemaProps fields in struct order, as JSON keys; a root schema with a status subresource
# may set only the allowed ones (``allowedFieldsAtRootSchema``).
_SCHEMA_FIELDS = (
    "id", "$schema", "$ref", "description", "type", "format", "title", "default", "maximum",
    "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern",
    "maxItems", "minItems", "uniqueItems", "multipleOf", "enum", "maxProperties",
    "minProperties", "required", "items", "allOf", "oneOf", "anyOf", "not", "properties",
    "additionalProperties", "patternProperties", "dependencies", "additionalItems",
    "definitions", "externalDocs", "example", "nullable", "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string",
    "x-kubernetes-list-map-keys", "x-kubernetes-list-type", "x-kubernetes-map-type",
    "x-kubernetes-validations")
_ALLOWED_AT_STATUS_ROOT = frozenset({
    "description", "type", "format", "title", "maximum", "exclusiveMaximum", "minimum",
    "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems",
    "uniqueItems", "multipleOf", "required", "items", "properties", "externalDocs", "example",
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-validations"})
_ALLOWED_AT_STATUS_ROOT_TEXT = (
    "[Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength "
    "MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties "
    "ExternalDocs Example XPreserveUnknownFields XValidations]")


class _Options:
    """``validationOptions``: what an update relaxes because the stored object predates it."""

    def __init__(self, old: Mapping[str, JSON] | None, old_spec: InternalSpec | None,
                 schema_check: SchemaCheck) -> None:
        self.schema_check = schema_check
        self.require_recognized_review_version = True
        self.require_immutable_names = False
        self.require_open_api_schema = True
        self.allow_invalid_ca_bundle = True
        if old is None or old_spec is None:
            return
        conversion = old_spec.conversion
        old_review = strings(conversion.get("conversionReviewVersions")) if conversion else []
        self.require_recognized_review_version = (
            conversion is None or not old_review
            or any(v in _CONVERSION_REVIEW_VERSIONS for v in old_review))
        self.require_immutable_names = is_condition_true(old, ESTABLISHED)
        self.require_open_api_schema = _all_versions_have_schema(old_spec)
        self.allow_invalid_ca_bundle = _allow_invalid_ca_bundle(old, old_spec)


def _all_versions_have_schema(spec: InternalSpec) -> bool:
    if open_api_schema(spec.validation) is not None:
        return True
    return all(open_api_schema(v.schema) is not None for v in spec.versions)


def _allow_invalid_ca_bundle(old: Mapping[str, JSON], old_spec: InternalSpec) -> bool:
    """``allowInvalidCABundle``: before Established, or when the stored bundle is invalid."""
    if not is_condition_true(old, ESTABLISHED):
        return True
    client = as_dict((old_spec.conversion or {}).get("webhookClientConfig"))
    bundle = client.get("caBundle")
    if not isinstance(bundle, str) or not bundle:
        return False
    return bool(validate_ca_bundle("caBundle", bundle))


# --- entry points -----------------------------------------------------------------------------

def validate_crd(crd: Mapping[str, JSON], old: Mapping[str, JSON] | None, *,
                 schema_check: SchemaCheck) -> list[FieldError]:
    """The CRD's field errors on create (``old`` None) or update, in kube's order.

    ``crd`` is the object as the strategy hands it to validation: v1 defaults applied
    (``crd_defaults.default_crd``) and its status prepared (``crd_strategy``).
    """
    spec = internal_spec(crd)
    old_spec = internal_spec(old) if old is not None else None
    opts = _Options(old, old_spec, schema_check)
    errors: list[FieldError] = []
    if old is None:
        errors += _metadata_name(crd, spec)
    errors += _validate_spec(spec, opts)
    if old_spec is not None:
        errors += _spec_update(spec, old_spec, opts)
    status = as_dict(crd.get("status"))
    errors += validate_names(as_dict(status.get("acceptedNames")), "status.acceptedNames")
    errors += validate_stored_versions(status.get("storedVersions"), spec.versions)
    errors += _api_approval(crd, old, spec.group)
    errors += _preserve_unknown_fields(spec, old_spec)
    return errors


def validate_crd_status(crd: Mapping[str, JSON], old: Mapping[str, JSON]) -> list[FieldError]:
    """``ValidateUpdateCustomResourceDefinitionStatus`` less the generic ObjectMeta update rules:
    only ``status.acceptedNames`` is checked (crds.md §2.1)."""
    del old  # kube passes it to ValidateObjectMetaUpdate only
    status = as_dict(crd.get("status"))
    return validate_names(as_dict(status.get("acceptedNames")), "status.acceptedNames")


# --- metadata, group, scope, names --------------------------------------------------------------

def _metadata_name(crd: Mapping[str, JSON], spec: InternalSpec) -> list[FieldError]:
    """The CRD's own part of its name rule: ``<plural>.<group>`` (the DNS-1123 subdomain part is
    the generic ObjectMeta check). A generateName gets the same rule, so it always fails."""
    meta = as_dict(crd.get("metadata"))
    wanted = as_str(spec.names.get("plural")) + "." + spec.group
    detail = 'must be spec.names.plural+"."+spec.group'
    errors: list[FieldError] = []
    generate = as_str(meta.get("generateName"))
    if generate and generate != wanted:
        errors.append(invalid("metadata.generateName", generate, detail))
    name = as_str(meta.get("name"))
    if name and name != wanted:
        errors.append(invalid("metadata.name", name, detail))
    return errors


def _dns1035(path: str, value: str) -> list[FieldError]:
    problems = is_dns1035_label(value)
    return [invalid(path, value, ",".join(problems))] if problems else []


def validate_names(names: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``ValidateCustomResourceDefinitionNames`` (spec.names and status.acceptedNames)."""
    errors: list[FieldError] = []
    for key in ("plural", "singular"):
        value = as_str(names.get(key))
        if value:
            errors += _dns1035(f"{path}.{key}", value)
    for key in ("kind", "listKind"):
        value = as_str(names.get(key))
        problems = is_dns1035_label(value.lower())
        if value and problems:
            errors.append(invalid(f"{path}.{key}", value,
                                  "may have mixed case, but should otherwise match: "
                                  + ",".join(problems)))
    for i, short in enumerate(as_list(names.get("shortNames"))):
        errors += _dns1035(f"{path}.shortNames[{i}]", as_str(short))
    kind, list_kind = as_str(names.get("kind")), as_str(names.get("listKind"))
    if kind and kind == list_kind:
        errors.append(invalid(f"{path}.listKind", list_kind,
                              "kind and listKind may not be the same"))
    for i, category in enumerate(as_list(names.get("categories"))):
        errors += _dns1035(f"{path}.categories[{i}]", as_str(category))
    return errors


def _group(group: str) -> list[FieldError]:
    if not group:
        return [required("spec.group")]
    problems = is_dns1123_subdomain(group)
    if problems:
        return [invalid("spec.group", group, ",".join(problems))]
    if "." not in group:
        return [invalid("spec.group", group, "should be a domain with at least one dot")]
    return []


def _enum(path: str, value: str, allowed: tuple[str, ...]) -> list[FieldError]:
    """``validateEnumStrings`` with required=true."""
    if not value:
        return [required(path)]
    return [] if value in allowed else [not_supported(path, value, allowed)]


# --- the spec -------------------------------------------------------------------------------

def _validate_spec(spec: InternalSpec, opts: _Options) -> list[FieldError]:
    """``validateCustomResourceDefinitionSpec`` for an object that came in as v1."""
    errors = _group(spec.group)
    errors += _enum("spec.scope", spec.scope, ("Cluster", "Namespaced"))
    errors += _schemas_present(spec, opts)
    if spec.preserve_unknown_fields and _any_schema_has_default(spec):
        errors.append(invalid("spec.preserveUnknownFields", True,
                              "must be false in order to use defaults in the schema"))
    errors += _versions(spec, opts)
    if spec.version:
        errors += _dns1035("spec.version", spec.version)
    errors += [required(f"spec.names.{key}")
               for key in ("plural", "singular", "kind", "listKind")
               if not as_str(spec.names.get(key))]
    errors += validate_names(spec.names, "spec.names")
    errors += _validation(spec.validation, _any_status(spec), "spec.validation", opts)
    errors += validate_subresources(spec.subresources, "spec.subresources")
    for i, col in enumerate(spec.columns):
        errors += validate_column(as_dict(col), f"spec.additionalPrinterColumns[{i}]")
    errors += _top_selectable_fields(spec)
    conversion = spec.conversion
    if conversion is not None and conversion.get("strategy") != "None" \
            and spec.preserve_unknown_fields:
        errors.append(invalid("spec.conversion.strategy", as_str(conversion.get("strategy")),
                              "must be None if spec.preserveUnknownFields is true"))
    errors += _conversion(conversion, opts)
    return errors


def _schemas_present(spec: InternalSpec, opts: _Options) -> list[FieldError]:
    """Every version needs a schema (or, for an object stored without one, every served version
    unless unknown fields are preserved)."""
    if open_api_schema(spec.validation) is not None:
        return []
    if opts.require_open_api_schema:
        return [required(f"spec.versions[{v.index}].schema.openAPIV3Schema", "schemas are required")
                for v in spec.versions if open_api_schema(v.schema) is None]
    if spec.preserve_unknown_fields:
        return []
    return [required(f"spec.versions[{v.index}].schema.openAPIV3Schema",
                     "because otherwise all fields are pruned")
            for v in spec.versions if v.served and open_api_schema(v.schema) is None]


def _top_selectable_fields(spec: InternalSpec) -> list[FieldError]:
    """Hoisted selectable fields; a hoisted list beside per-version schemas reads as missing."""
    if not spec.selectable_fields:
        return []
    if spec.validation is None:
        return [invalid("spec.selectableFields", "",
                        "selectableFields may only be set when validations.schema is included")]
    return validate_selectable_fields(spec.selectable_fields, open_api_schema(spec.validation),
                                      "spec.selectableFields")


def _any_schema_has_default(spec: InternalSpec) -> bool:
    schemas = [open_api_schema(spec.validation)] + [open_api_schema(v.schema)
                                                     for v in spec.versions]
    return any(schema_has(s, lambda node: node.get("default") is not None) for s in schemas)


def _status_enabled(subresources: Mapping[str, JSON] | None) -> bool:
    return subresources is not None and isinstance(subresources.get("status"), dict)


def _any_status(spec: InternalSpec) -> bool:
    return _status_enabled(spec.subresources) or any(
        _status_enabled(v.subresources) for v in spec.versions)


def _versions(spec: InternalSpec, opts: _Options) -> list[FieldError]:
    errors: list[FieldError] = []
    seen: set[str] = set()
    unique = True
    storage = 0
    per_version_subresources = any(v.subresources is not None for v in spec.versions)
    for v in spec.versions:
        storage += v.storage
        unique = unique and v.name not in seen
        seen.add(v.name)
        errors += _dns1035(f"spec.versions[{v.index}].name", v.name)
        subresources = v.subresources if per_version_subresources else spec.subresources
        errors += _version(v, _status_enabled(subresources), opts)
    if not unique:
        errors.append(invalid("spec.versions", go_versions(spec.versions),
                              "must contain unique version names"))
    if storage != 1:
        errors.append(invalid("spec.versions", go_versions(spec.versions),
                              "must have exactly one version marked as storage version"))
    return errors


def _version(v: InternalVersion, status_enabled: bool, opts: _Options) -> list[FieldError]:
    """``validateCustomResourceDefinitionVersion``."""
    path = f"spec.versions[{v.index}]"
    errors = [invalid(f"{path}.deprecationWarning", v.deprecation_warning, problem)
              for problem in deprecation_warning_problems(v.deprecated, v.deprecation_warning)]
    errors += _validation(v.schema, status_enabled, f"{path}.schema", opts)
    errors += validate_subresources(v.subresources, f"{path}.subresources")
    for i, col in enumerate(v.columns):
        errors += validate_column(as_dict(col), f"{path}.additionalPrinterColumns[{i}]")
    if v.selectable_fields:
        schema = open_api_schema(v.schema)
        if schema is None:
            errors.append(invalid(f"{path}.selectableFields", "",
                                  "selectableFields may only be set when "
                                  "version.schema.openAPIV3Schema is not included"))
        else:
            errors += validate_selectable_fields(v.selectable_fields, schema,
                                                 f"{path}.selectableFields")
    return errors


def deprecation_warning_problems(deprecated: bool, warning: str | None) -> list[str]:
    """``validateDeprecationWarning``."""
    if not deprecated and warning is not None:
        return ["can only be set for deprecated versions"]
    if warning is None:
        return []
    problems: list[str] = []
    data = warning.encode("utf-8", "surrogatepass")
    if len(data) > 256:
        problems.append("must be <= 256 characters long")
    if not warning:
        problems.append("must not be an empty string")
    offset = 0
    for char in warning:
        if not _is_print(char):
            problems.append("must only contain printable UTF-8 characters; non-printable "
                            f"character found at index {offset}")
            break
        offset += len(char.encode("utf-8", "surrogatepass"))
    if any(0xD800 <= ord(c) <= 0xDFFF for c in warning):
        problems.append("must only contain printable UTF-8 characters")
    return problems


def _is_print(char: str) -> bool:
    """Go's ``unicode.IsPrint``: letters, marks, numbers, punctuation, symbols and ASCII space."""
    if char == " ":
        return True
    return unicodedata.category(char)[0] in "LMNPS"


# --- schema, subresources, columns, selectable fields --------------------------------------

def _validation(validation: Mapping[str, JSON] | None, status_enabled: bool, path: str,
                opts: _Options) -> list[FieldError]:
    """``validateCustomResourceDefinitionValidation``: the status-subresource root rule here,
    then everything else through the caller's schema check."""
    schema = open_api_schema(validation)
    if schema is None:
        return []
    errors: list[FieldError] = []
    if status_enabled:
        for key in _SCHEMA_FIELDS:
            if _is_zero(schema.get(key)):
                continue
            if key == "type":
                if schema["type"] != "object":
                    errors.append(invalid(f"{path}.openAPIV3Schema.type", schema["type"],
                                          'only "object" is allowed as the type at the root of '
                                          "the schema if the status subresource is enabled"))
                    break
                continue
            if key not in _ALLOWED_AT_STATUS_ROOT:
                errors.append(invalid(f"{path}.openAPIV3Schema", go_schema_props(),
                                      f"only {_ALLOWED_AT_STATUS_ROOT_TEXT} fields are allowed "
                                      "at the root of the schema if the status subresource is "
                                      "enabled"))
                break
    return errors + opts.schema_check(schema, f"{path}.openAPIV3Schema")


def _is_zero(value: JSON) -> bool:
    """Go's zero value of a JSONSchemaProps field (absent, "", false, null)."""
    return value is None or value is False or value == ""


def validate_subresources(subresources: Mapping[str, JSON] | None,
                          path: str) -> list[FieldError]:
    """``ValidateCustomResourceDefinitionSubresources`` (the scale paths)."""
    scale = subresources.get("scale") if subresources is not None else None
    if not isinstance(scale, dict):
        return []
    errors: list[FieldError] = []
    for key, prefix, detail in (
            ("specReplicasPath", ".spec.", "should be a json path under .spec"),
            ("statusReplicasPath", ".status.", "should be a json path under .status")):
        value = as_str(scale.get(key))
        if not value:
            errors.append(required(f"{path}.scale.{key}"))
            continue
        problems = _simple_json_path(value, f"{path}.scale.{key}")
        if problems:
            errors += problems
        elif not value.startswith(prefix):
            errors.append(invalid(f"{path}.scale.{key}", value, detail))
    selector = as_str(scale.get("labelSelectorPath"))
    if selector:
        problems = _simple_json_path(selector, f"{path}.scale.labelSelectorPath")
        if problems:
            errors += problems
        elif not selector.startswith((".spec.", ".status.")):
            errors.append(invalid(f"{path}.scale.labelSelectorPath", selector,
                                  "should be a json path under either .spec or .status"))
    return errors


def _simple_json_path(value: str, path: str) -> list[FieldError]:
    """``validateSimpleJSONPath`` (its third case can never fire: a split is never empty)."""
    if not value:
        return [invalid(path, value, "must not be empty")]
    if not value.startswith("."):
        return [invalid(path, value, "must be a simple json path starting with .")]
    return []


def validate_column(col: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``ValidateCustomResourceColumnDefinition`` (the path says ``JSONPath``, crds.md §1.10)."""
    errors: list[FieldError] = []
    if not as_str(col.get("name")):
        errors.append(required(f"{path}.name"))
    types = "must be one of " + ",".join(_PRINTER_COLUMN_TYPES)
    kind = as_str(col.get("type"))
    if not kind:
        errors.append(required(f"{path}.type", types))
    elif kind not in _PRINTER_COLUMN_TYPES:
        errors.append(invalid(f"{path}.type", kind, types))
    fmt = as_str(col.get("format"))
    if fmt and fmt not in _PRINTER_COLUMN_FORMATS:
        errors.append(invalid(f"{path}.format", fmt,
                              "must be one of " + ",".join(_PRINTER_COLUMN_FORMATS)))
    json_path = as_str(col.get("jsonPath"))
    if not json_path:
        errors.append(required(f"{path}.JSONPath"))
    else:
        errors += _simple_json_path(json_path, f"{path}.JSONPath")
    return errors


class _PathError(ValueError):
    pass


def _tokens(json_path: str) -> list[str]:
    """The scanner of ``cel.ValidFieldPath``: ``.``, ``[``, ``]`` alone, quoted strings whole,
    other runs of text between delimiters."""
    tokens: list[str] = []
    i = 0
    while i < len(json_path):
        char = json_path[i]
        if char == "'":
            end = i + 1
            while end < len(json_path) and not (json_path[end] == "'"
                                                and json_path[end - 1] != "\\"):
                end += 1
            if end >= len(json_path):
                tokens.append(json_path[i:])
                break
            tokens.append(json_path[i:end + 1])
            i = end + 1
        elif char in ".[]":
            tokens.append(char)
            i += 1
        else:
            end = i
            while end < len(json_path) and json_path[end] not in ".[]":
                end += 1
            tokens.append(json_path[i:end])
            i = end
    return tokens


def valid_field_path(json_path: str,
                     schema: Mapping[str, JSON]) -> tuple[str, str, Mapping[str, JSON]]:
    """``cel.ValidFieldPath`` without array notation: (root segment, path, target schema);
    raises ``_PathError`` with kube's message."""
    tokens = _tokens(json_path)
    node: Mapping[str, JSON] = schema
    segments: list[tuple[str, bool]] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok == "[":
            raise _PathError("array notation is not allowed")
        if tok != ".":
            raise _PathError(f"expected [ or . but got: {tok}")
        if i + 1 >= len(tokens):
            raise _PathError("unexpected end of JSON path")
        name = tokens[i + 1]
        i += 2
        properties = node.get("properties")
        additional = node.get("additionalProperties")
        if isinstance(properties, dict):
            child = properties.get(name)
            if not isinstance(child, dict):
                raise _PathError("does not refer to a valid field")
            segments.append((name, True))
            node = child
        elif isinstance(additional, dict):
            segments.append((name, False))
            node = additional
        else:
            raise _PathError("does not refer to a valid field")
    text = ""
    for name, named in segments:
        text = (f"{text}.{name}" if text else name) if named else f"{text}[{name}]"
    root = segments[0][0] if segments else ""
    return root, text, node


def validate_selectable_fields(fields: list[JSON], schema: Mapping[str, JSON] | None,
                               path: str) -> list[FieldError]:
    """``ValidateCustomResourceSelectableFields``."""
    errors: list[FieldError] = []
    unique: set[str] = set()
    for i, entry in enumerate(fields):
        item = f"{path}[{i}].jsonPath"
        json_path = as_str(as_dict(entry).get("jsonPath"))
        if not json_path:
            errors.append(required(item))
            continue
        if schema is None:
            continue
        try:
            root, text, target = valid_field_path(json_path, schema)
        except _PathError as exc:
            errors.append(invalid(item, json_path, f"is an invalid path: {exc}"))
            continue
        if root == "metadata":
            errors.append(invalid(item, json_path, "must not point to fields in metadata"))
        if target.get("type") not in ("string", "boolean", "integer"):
            errors.append(invalid(item, json_path,
                                  "must point to a field of type string, boolean or integer. "
                                  "Enum string fields and strings with formats are allowed."))
        if text in unique:
            errors.append(FieldError("FieldValueDuplicate", item, json_path))
        else:
            unique.add(text)
    if len(unique) > MAX_SELECTABLE_FIELDS:
        errors.append(FieldError("FieldValueTooMany", path, len(unique),
                                 f"must have at most {MAX_SELECTABLE_FIELDS} items"))
    return errors


# --- conversion -------------------------------------------------------------------------------

def _conversion(conversion: Mapping[str, JSON] | None, opts: _Options) -> list[FieldError]:
    """``validateCustomResourceConversion`` (internal field names in the paths)."""
    if conversion is None:
        return []
    strategy = as_str(conversion.get("strategy"))
    errors = _enum("spec.conversion.strategy", strategy, ("None", "Webhook"))
    client = conversion.get("webhookClientConfig")
    reviews = conversion.get("conversionReviewVersions")
    if strategy != "Webhook":
        if client is not None:
            errors.append(forbidden("spec.conversion.webhookClientConfig",
                                    "should not be set when strategy is not set to Webhook"))
        if as_list(reviews):
            errors.append(forbidden("spec.conversion.conversionReviewVersions",
                                    "should not be set when strategy is not set to Webhook"))
        return errors
    if not isinstance(client, dict):
        errors.append(required("spec.conversion.webhookClientConfig",
                               "required when strategy is set to Webhook"))
    else:
        path = "spec.conversion.webhookClientConfig"
        url, service = client.get("url"), client.get("service")
        if (url is None) == (service is None):
            errors.append(required(path, "exactly one of url or service is required"))
        elif url is not None:
            errors += validate_webhook_url(f"{path}.url", as_str(url))
        else:
            errors += validate_webhook_service(f"{path}.service", as_dict(service))
        if client.get("caBundle") and not opts.allow_invalid_ca_bundle:
            errors += validate_ca_bundle(f"{path}.caBundle", client.get("caBundle"))
    errors += _review_versions(strings(reviews) if isinstance(reviews, list) else [],
                               opts.require_recognized_review_version)
    return errors


def _review_versions(versions: list[str], require_recognized: bool) -> list[FieldError]:
    """``validateConversionReviewVersions``."""
    path = "spec.conversion.conversionReviewVersions"
    if not versions:
        return [required(path)]
    errors: list[FieldError] = []
    seen: set[str] = set()
    for i, version in enumerate(versions):
        if version in seen:
            errors.append(invalid(f"{path}[{i}]", version, "duplicate version"))
            continue
        seen.add(version)
        errors += [invalid(f"{path}[{i}]", version, problem)
                   for problem in is_dns1035_label(version)]
    if require_recognized and not any(v in _CONVERSION_REVIEW_VERSIONS for v in versions):
        errors.append(invalid(path, go_string_slice(versions),
                              "must include at least one of " + ", ".join(
                                  _CONVERSION_REVIEW_VERSIONS)))
    return errors


# --- update-only rules, stored versions, approval, preserveUnknownFields ------------------

def _spec_update(spec: InternalSpec, old: InternalSpec, opts: _Options) -> list[FieldError]:
    """The immutable fields of ``validateCustomResourceDefinitionSpecUpdate``."""
    errors: list[FieldError] = []
    pairs = [("spec.group", spec.group, old.group),
             ("spec.names.plural", as_str(spec.names.get("plural")),
              as_str(old.names.get("plural")))]
    if opts.require_immutable_names:
        pairs[:0] = [("spec.scope", spec.scope, old.scope),
                     ("spec.names.kind", as_str(spec.names.get("kind")),
                      as_str(old.names.get("kind")))]
    for path, new, before in pairs:
        if new != before:
            errors.append(invalid(path, new, _IMMUTABLE))
    return errors


def validate_stored_versions(stored: JSON, versions: list[InternalVersion]) -> list[FieldError]:
    """``ValidateCustomResourceDefinitionStoredVersions`` (entries not in spec.versions are
    reported in their list order; kube walks a Go map, in random order)."""
    path = "status.storedVersions"
    names = strings(stored)
    value = go_string_slice(names)
    if not names:
        empty = "[]string{}" if isinstance(stored, list) else "[]string(nil)"
        return [invalid(path, GoLiteral(empty), "must have at least one stored version")]
    errors: list[FieldError] = []
    remaining = dict.fromkeys(names)
    for v in versions:
        if v.storage and v.name not in names:
            errors.append(invalid(path, value, "must have the storage version " + v.name))
        remaining.pop(v.name, None)
    errors += [invalid(f"{path}[{names.index(n)}]", n, "must appear in spec.versions")
               for n in remaining]
    return errors


def api_approval_state(annotations: Mapping[str, JSON]) -> tuple[str, str]:
    """``GetAPIApprovalState``: (state, reason) with state one of ``Missing``, ``Bypassed``,
    ``Approved``, ``Invalid``."""
    value = as_str(annotations.get(API_APPROVAL_ANNOTATION))
    quoted = f'"{API_APPROVAL_ANNOTATION}"'
    if not value:
        return ("Missing", f"protected groups must have approval annotation {quoted}, see "
                "https://github.com/kubernetes/enhancements/pull/1111")
    if value.startswith("unapproved"):
        return "Bypassed", f'not approved: "{value}"'
    try:
        url = parse_go_url(value)  # kube: url.ParseRequestURI, then a scheme and a host
        approved = bool(url.host and url.scheme)
    except URLError:
        approved = False
    if approved:
        return "Approved", f"approved in {value}"
    return ("Invalid", f"protected groups must have approval annotation {quoted} with either a "
            'URL or a reason starting with "unapproved", see '
            "https://github.com/kubernetes/enhancements/pull/1111")


def is_protected_group(group: str) -> bool:
    """``IsProtectedCommunityGroup``."""
    return group in ("k8s.io", "kubernetes.io") or group.endswith((".k8s.io", ".kubernetes.io"))


def _api_approval(crd: Mapping[str, JSON], old: Mapping[str, JSON] | None,
                  group: str) -> list[FieldError]:
    """``validateAPIApproval``."""
    if not is_protected_group(group):
        return []
    annotations = as_dict(as_dict(crd.get("metadata")).get("annotations"))
    state, reason = api_approval_state(annotations)
    if old is not None:
        old_state, _ = api_approval_state(as_dict(as_dict(old.get("metadata")).get("annotations")))
        if old_state == state:
            return []
    path = f"metadata.annotations[{API_APPROVAL_ANNOTATION}]"
    if state == "Missing":
        return [required(path, reason)]
    if state == "Invalid":
        return [invalid(path, as_str(annotations.get(API_APPROVAL_ANNOTATION)), reason)]
    return []


def _preserve_unknown_fields(spec: InternalSpec, old: InternalSpec | None) -> list[FieldError]:
    """``validatePreserveUnknownFields``: true only where the stored object already had it."""
    if old is not None and old.preserve_unknown_fields:
        return []
    if spec.preserve_unknown_fields:
        return [invalid("spec.preserveUnknownFields", True,
                        "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in "
                        "spec.versions[*].schema instead")]
    return []


__all__ = [
    "SchemaCheck",
    "api_approval_state",
    "ca_bundle_problem",
    "deprecation_warning_problems",
    "is_protected_group",
    "valid_field_path",
    "validate_column",
    "validate_crd",
    "validate_crd_status",
    "validate_names",
    "validate_selectable_fields",
    "validate_stored_versions",
    "validate_subresources",
]
