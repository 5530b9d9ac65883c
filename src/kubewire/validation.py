"""Object-metadata validation with kube-apiserver's exact messages.

Sources: ``apimachinery:pkg/util/validation/validation.go`` (DNS-1123/1035 names, qualified
names, label values, ``RegexError``), ``apimachinery:pkg/api/validation/objectmeta.go``
(``ValidateObjectMetaAccessor``, annotations, finalizers), ``.../api/validation/generic.go``
(``maskTrailingDash`` for generateName), ``.../api/validation/path/name.go`` (path segments),
``kubernetes:pkg/registry/core/pod/strategy.go`` (``WarningsOnCreate``); per-kind name rules in
objects-and-clients.md §1.7.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from kubewire.resources import NameRule, Resource
from kubewire.status import FieldError, forbidden, invalid, required

JSON = Any

DNS1123_LABEL_MAX_CHARS = 63
DNS1123_SUBDOMAIN_MAX_CHARS = 253
DNS1035_LABEL_MAX_CHARS = 63
QUALIFIED_NAME_MAX_CHARS = 63
LABEL_VALUE_MAX_CHARS = 63
TOTAL_ANNOTATION_SIZE_MAX_BYTES = 256 * 1024  # objectmeta.go TotalAnnotationSizeLimitB

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _QUALIFIED_NAME_FMT + ")?"

_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1035_LABEL_RE = re.compile(_DNS1035_LABEL_FMT)
_QUALIFIED_NAME_RE = re.compile(_QUALIFIED_NAME_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)

_DNS1123_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric "
                      "characters or '-', and must start and end with an alphanumeric character")
_DNS1123_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case "
                          "alphanumeric characters, '-' or '.', and must start and end with an "
                          "alphanumeric character")
_DNS1035_LABEL_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or "
                      "'-', start with an alphabetic character, and end with an alphanumeric "
                      "character")
_QUALIFIED_NAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start "
                       "and end with an alphanumeric character")
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric "
                    "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                    "character")

_JSON_TYPE_NAMES = {str: "string", bool: "boolean", int: "integer", float: "number",
                    list: "array"}
_FINALIZER_ORPHAN = "orphan"
_FINALIZER_FOREGROUND = "foregroundDeletion"


# --- apimachinery pkg/util/validation ----------------------------------------------------------

def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """``RegexError``: message, examples and the regex, spacing exactly as kube prints it."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def is_dns1123_label(value: str) -> list[str]:
    """``IsDNS1123Label``: problems of ``value`` as a DNS-1123 label (empty when valid)."""
    errs = [max_len_error(DNS1123_LABEL_MAX_CHARS)] if len(value) > DNS1123_LABEL_MAX_CHARS else []
    if not _DNS1123_LABEL_RE.fullmatch(value):
        if _DNS1123_SUBDOMAIN_RE.fullmatch(value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    """``IsDNS1123Subdomain``: problems of ``value`` as a DNS-1123 subdomain."""
    errs = ([max_len_error(DNS1123_SUBDOMAIN_MAX_CHARS)]
            if len(value) > DNS1123_SUBDOMAIN_MAX_CHARS else [])
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_dns1035_label(value: str) -> list[str]:
    """``IsDNS1035Label``: problems of ``value`` as a DNS-1035 label."""
    errs = [max_len_error(DNS1035_LABEL_MAX_CHARS)] if len(value) > DNS1035_LABEL_MAX_CHARS else []
    if not _DNS1035_LABEL_RE.fullmatch(value):
        errs.append(regex_error(_DNS1035_LABEL_MSG, _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def is_path_segment_name(value: str, prefix: bool = False) -> list[str]:
    """``ValidatePathSegmentName``: not ``.``/``..`` (unless a prefix), no ``/`` or ``%``."""
    if not prefix and value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]


def is_qualified_name(value: str) -> list[str]:
    """``IsQualifiedName`` (label and annotation keys, finalizers)."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) > 2:
        return [f"a qualified name {_qualified_regex_error()} with an optional DNS subdomain "
                "prefix and '/' (e.g. 'example.com/MyName')"]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += ["prefix part " + m for m in is_dns1123_subdomain(prefix)]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX_CHARS:
        errs.append("name part " + max_len_error(QUALIFIED_NAME_MAX_CHARS))
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errs.append("name part " + _qualified_regex_error())
    return errs


def _qualified_regex_error() -> str:
    return regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")


def is_valid_label_value(value: str) -> list[str]:
    """``IsValidLabelValue``."""
    errs = [max_len_error(LABEL_VALUE_MAX_CHARS)] if len(value) > LABEL_VALUE_MAX_CHARS else []
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value",
                                "12345"))
    return errs


# --- names ------------------------------------------------------------------------------------

_NAME_CHECKS: dict[NameRule, Callable[[str], list[str]]] = {
    "subdomain": is_dns1123_subdomain,
    "label": is_dns1123_label,
    "dns1035": is_dns1035_label,
    "path": lambda _: [],
}


def name_problems(rule: NameRule, name: str, prefix: bool = False) -> list[str]:
    """Messages for ``name`` under ``rule``; ``prefix`` validates a generateName.

    The kind's rule runs first; only when it passes does the generic path-segment check of
    ``rest.BeforeCreate`` run (a second validation pass in kube, so never both).
    """
    # generic.go maskTrailingDash: a generateName may end in '-' (a suffix follows). kube
    # slices off two characters, not one; reproduced because it decides which names pass.
    checked = name[:-2] + "a" if prefix and len(name) > 1 and name.endswith("-") else name
    problems = _NAME_CHECKS[rule](checked)
    return problems or is_path_segment_name(name, prefix)


def validate_name(resource: Resource, name: str) -> list[FieldError]:
    """``metadata.name`` errors for ``resource``'s name rule (objects-and-clients.md §1.7)."""
    if not name:
        return [required("metadata.name", "name or generateName is required")]
    return [invalid("metadata.name", name, m) for m in name_problems(resource.name_rule, name)]


def pod_name_warnings(name: str) -> list[str]:
    """Warning texts for a Pod whose name is not a DNS-1123 label (``WarningsOnCreate``)."""
    problems = is_dns1123_label(name)
    if not problems:
        return []
    return ["metadata.name: this is used in the Pod's hostname, which can result in surprising "
            f"behavior; a DNS label is recommended: [{' '.join(problems)}]"]


# --- object metadata --------------------------------------------------------------------------

class _GoStrings:
    """A ``[]string`` rendered as Go's ``%#v`` does in field errors."""

    def __init__(self, values: list[str]) -> None:
        self.values = values

    def __repr__(self) -> str:
        inner = ", ".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
                          for v in self.values)
        return "[]string{" + inner + "}"


def _string_map(meta: Mapping[str, JSON], key: str) -> Mapping[str, str]:
    value = meta.get(key)
    return value if isinstance(value, dict) else {}


def validate_labels(labels: Mapping[str, str], path: str = "metadata.labels") -> list[FieldError]:
    """``ValidateLabels``: each key a qualified name, each value a label value."""
    errors: list[FieldError] = []
    for key, value in labels.items():
        errors += [invalid(path, key, m) for m in is_qualified_name(key)]
        if isinstance(value, str):
            errors += [invalid(path, value, m) for m in is_valid_label_value(value)]
    return errors


def validate_annotations(annotations: Mapping[str, str],
                         path: str = "metadata.annotations") -> list[FieldError]:
    """``ValidateAnnotations``: keys are qualified names (case-insensitive); 256 KiB in total."""
    errors: list[FieldError] = []
    total = 0
    for key, value in annotations.items():
        errors += [invalid(path, key, m) for m in is_qualified_name(key.lower())]
        total += len(key.encode()) + len(str(value).encode())
    if total > TOTAL_ANNOTATION_SIZE_MAX_BYTES:
        errors.append(FieldError("FieldValueTooLong", path, "",
                                 f"must have at most {TOTAL_ANNOTATION_SIZE_MAX_BYTES} bytes"))
    return errors


def validate_finalizers(finalizers: list[str],
                        path: str = "metadata.finalizers") -> list[FieldError]:
    """``ValidateFinalizers``: qualified names; ``orphan`` and ``foregroundDeletion`` exclusive."""
    errors: list[FieldError] = []
    for finalizer in finalizers:
        errors += [invalid(path, finalizer, m) for m in is_qualified_name(finalizer)]
    if _FINALIZER_ORPHAN in finalizers and _FINALIZER_FOREGROUND in finalizers:
        errors.append(invalid(path, _GoStrings(finalizers),
                              f"finalizer {_FINALIZER_ORPHAN} and {_FINALIZER_FOREGROUND} "
                              "cannot be both set"))
    return errors


def _validate_names(resource: Resource, meta: Mapping[str, JSON]) -> list[FieldError]:
    errors: list[FieldError] = []
    generate_name = meta.get("generateName") or ""
    if isinstance(generate_name, str) and generate_name:
        errors += [invalid("metadata.generateName", generate_name, m)
                   for m in name_problems(resource.name_rule, generate_name, prefix=True)]
    name = meta.get("name") or ""
    errors += validate_name(resource, name if isinstance(name, str) else "")
    return errors


def _validate_namespace(resource: Resource, meta: Mapping[str, JSON]) -> list[FieldError]:
    namespace = meta.get("namespace") or ""
    if not isinstance(namespace, str):
        return []
    if not resource.namespaced:
        return [forbidden("metadata.namespace", "not allowed on this type")] if namespace else []
    if not namespace:
        return [required("metadata.namespace")]
    return [invalid("metadata.namespace", namespace, m) for m in is_dns1123_label(namespace)]


def validate_object_meta(resource: Resource, obj: Mapping[str, JSON]) -> list[FieldError]:
    """``ValidateObjectMetaAccessor`` for ``obj``: name/generateName, namespace, generation,
    labels, annotations and finalizers, in kube's order.

    Callers set the namespace first as ``rest.BeforeCreate`` does (from the URL; cleared for
    cluster-scoped kinds). Wrong JSON types are ``validate_types``'s concern and skipped here,
    except a non-object ``metadata``.
    """
    meta = obj.get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        actual = _JSON_TYPE_NAMES.get(type(meta), "object")
        return [FieldError("FieldValueTypeInvalid", "metadata", actual,
                           f'metadata in body must be of type object: "{actual}"')]
    errors = _validate_names(resource, meta) + _validate_namespace(resource, meta)
    generation = meta.get("generation")
    if isinstance(generation, int) and not isinstance(generation, bool) and generation < 0:
        errors.append(invalid("metadata.generation", generation,
                              "must be greater than or equal to 0"))
    errors += validate_labels(_string_map(meta, "labels"))
    errors += validate_annotations(_string_map(meta, "annotations"))
    finalizers = meta.get("finalizers")
    if isinstance(finalizers, list):
        errors += validate_finalizers([f for f in finalizers if isinstance(f, str)])
    return errors
