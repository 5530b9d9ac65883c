"""Object-metadata validation with kube-apiserver's exact messages.

Sources: ``apimachinery:pkg/api/validation/objectmeta.go`` (``ValidateObjectMetaAccessor``,
annotations, finalizers), ``.../api/validation/generic.go`` (``maskTrailingDash`` for
generateName), ``kubernetes:pkg/registry/core/pod/strategy.go`` (``WarningsOnCreate``); per-kind
name rules in objects-and-clients.md §1.7. The name, key and label-value rules themselves
(``apimachinery:pkg/util/validation``) are in ``kubewire.names``, shared with label selectors.

Owner references follow ``ValidateOwnerReferences``/``validateOwnerReference`` (read from
kubernetes' staging apimachinery objectmeta.go): a core/v1 Event may not be an owner, and only
one reference may be the controller. Those errors carry the references as Go's ``%#v`` prints
them; where Go prints a set pointer's address (``Controller:(*bool)(0xc...)``), which changes
with every kube-apiserver request, kubewire prints a fixed address.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

from kubewire.go_text import GoLiteral, go_quote, go_string_slice
from kubewire.json_types import JSON
from kubewire.names import (
    dns1123_label_ok,
    dns1123_subdomain_ok,
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_path_segment_name,
    is_qualified_name,
    is_valid_label_value,
)
from kubewire.resources import NameRule, Resource
from kubewire.status import FieldError, forbidden, invalid, required

TOTAL_ANNOTATION_SIZE_MAX_BYTES = 256 * 1024  # objectmeta.go TotalAnnotationSizeLimitB
BANNED_OWNERS = frozenset({("", "v1", "Event")})  # BannedOwners as (group, version, kind)
GO_POINTER_ADDRESS = "0xc000000000"  # stands in for the address Go prints for a set pointer

_JSON_TYPE_NAMES = {str: "string", bool: "boolean", int: "integer", float: "number",
                    list: "array"}
_FINALIZER_ORPHAN = "orphan"
_FINALIZER_FOREGROUND = "foregroundDeletion"


# --- names ------------------------------------------------------------------------------------

_NAME_CHECKS: dict[NameRule, Callable[[str], list[str]]] = {
    "subdomain": is_dns1123_subdomain,
    "label": is_dns1123_label,
    "dns1035": is_dns1035_label,
    "path": lambda _: [],
}
# The rules with a cheap test for a valid name: a valid DNS name also passes the path-segment
# check (it has no '/' or '%' and is not '.' or '..'), so it has no problem at all.
_NAME_OK: dict[NameRule, Callable[[str], bool]] = {
    "subdomain": dns1123_subdomain_ok,
    "label": dns1123_label_ok,
}


def name_problems(rule: NameRule, name: str, prefix: bool = False) -> list[str]:
    """Messages for ``name`` under ``rule``; ``prefix`` validates a generateName.

    The kind's rule runs first; only when it passes does the generic path-segment check of
    ``rest.BeforeCreate`` run (a second validation pass in kube, so never both).
    """
    if prefix:  # a kind's generateName is the same on every create: its answer is kept
        return list(_prefix_problems(rule, name))
    ok = _NAME_OK.get(rule)
    if ok is not None and ok(name):
        return []
    return _NAME_CHECKS[rule](name) or is_path_segment_name(name)


@functools.lru_cache(maxsize=1024)
def _prefix_problems(rule: NameRule, name: str) -> tuple[str, ...]:
    """``name_problems`` of a generateName."""
    # generic.go maskTrailingDash: a generateName may end in '-' (a suffix follows). kube
    # slices off two characters, not one; reproduced because it decides which names pass.
    checked = name[:-2] + "a" if len(name) > 1 and name.endswith("-") else name
    return tuple(_NAME_CHECKS[rule](checked) or is_path_segment_name(name, True))


def validate_name(resource: Resource, name: str) -> list[FieldError]:
    """``metadata.name`` errors for ``resource``'s name rule (objects-and-clients.md §1.7)."""
    if not name:
        return [required("metadata.name", "name or generateName is required")]
    return [invalid("metadata.name", name, m) for m in name_problems(resource.name_rule, name)]


def pod_name_warnings(name: str) -> list[str]:
    """Warning texts for a Pod whose name is not a DNS-1123 label (``WarningsOnCreate``)."""
    if dns1123_label_ok(name):
        return []
    problems = is_dns1123_label(name)
    return ["metadata.name: this is used in the Pod's hostname, which can result in surprising "
            f"behavior; a DNS label is recommended: [{' '.join(problems)}]"]


# --- object metadata --------------------------------------------------------------------------

def dict_at(parent: Mapping[str, JSON], key: str) -> dict[str, JSON]:
    """``parent[key]`` when it is an object, else {}: kind validators read absent or mistyped
    fields as Go's zero value (schema checks report the type)."""
    value = parent.get(key)
    return value if isinstance(value, dict) else {}


def int_at(parent: Mapping[str, JSON], key: str) -> int | None:
    """``parent[key]`` when it is an integer (not a bool), else None."""
    value = parent.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def text_at(parent: Mapping[str, JSON], key: str) -> str:
    """``parent[key]`` when it is a string, else ""."""
    value = parent.get(key)
    return value if isinstance(value, str) else ""


def _string_map(meta: Mapping[str, JSON], key: str) -> Mapping[str, str]:
    value = meta.get(key)
    return value if isinstance(value, dict) else {}


def validate_labels(labels: Mapping[str, str], path: str = "metadata.labels") -> list[FieldError]:
    """``ValidateLabels``: each key a qualified name, each value a label value."""
    errors: list[FieldError] = []
    for key, value in labels.items():
        problems = _key_problems(key)
        if problems:
            errors += [invalid(path, key, m) for m in problems]
        if isinstance(value, str):
            problems = _label_value_problems(value)
            if problems:
                errors += [invalid(path, value, m) for m in problems]
    return errors


@functools.lru_cache(maxsize=4096)  # label and annotation keys repeat across objects
def _key_problems(key: str) -> tuple[str, ...]:
    return tuple(is_qualified_name(key))


@functools.lru_cache(maxsize=4096)  # label values repeat across a kind's objects
def _label_value_problems(value: str) -> tuple[str, ...]:
    return tuple(is_valid_label_value(value))


def _utf8_len(text: str) -> int:
    """``len(text.encode())`` (raising as it does on a lone surrogate), without the copy when
    ``text`` is ASCII (``isascii`` reads a flag)."""
    return len(text) if text.isascii() else len(text.encode())


def validate_annotations(annotations: Mapping[str, str],
                         path: str = "metadata.annotations") -> list[FieldError]:
    """``ValidateAnnotations``: keys are qualified names (case-insensitive); 256 KiB in total."""
    errors: list[FieldError] = []
    total = 0
    for key, value in annotations.items():
        problems = _key_problems(key.lower())
        if problems:
            errors += [invalid(path, key, m) for m in problems]
        total += _utf8_len(key) + _utf8_len(str(value))
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
        errors.append(invalid(path, go_string_slice(finalizers),
                              f"finalizer {_FINALIZER_ORPHAN} and {_FINALIZER_FOREGROUND} "
                              "cannot be both set"))
    return errors


def go_pointer(type_name: str, value: JSON) -> str:
    """A pointer field as Go's ``%#v`` prints it: ``(*bool)(nil)``, or, when set, an address.

    Go prints the pointer's address, which differs per request in kube-apiserver; kubewire
    prints a fixed one (``GO_POINTER_ADDRESS``) so the text has kube's shape."""
    return f"({type_name})({'nil' if value is None else GO_POINTER_ADDRESS})"


def go_owner_reference(owner: Mapping[str, JSON]) -> str:
    """A ``metav1.OwnerReference`` as Go's ``%#v`` prints it (no String method on the value)."""
    fields = ", ".join(f"{go}:{go_quote(text_at(owner, key))}" for go, key in (
        ("APIVersion", "apiVersion"), ("Kind", "kind"), ("Name", "name"), ("UID", "uid")))
    controller = go_pointer("*bool", owner.get("controller"))
    block = go_pointer("*bool", owner.get("blockOwnerDeletion"))
    return f"v1.OwnerReference{{{fields}, Controller:{controller}, BlockOwnerDeletion:{block}}}"


def validate_owner_references(owners: list[dict[str, JSON]],
                              path: str = "metadata.ownerReferences") -> list[FieldError]:
    """``ValidateOwnerReferences``: ``validateOwnerReference`` for each reference (empty fields
    are Invalid, not Required, reported under the list's path without an index; a banned owner,
    ``BannedOwners``: a core/v1 Event), then at most one reference with ``controller: true``."""
    errors: list[FieldError] = []
    first_controller = ""
    for owner in owners:
        api_version, kind = text_at(owner, "apiVersion"), text_at(owner, "kind")
        # schema.FromAPIVersionAndKind: an unparsable apiVersion ("a/b/c") has no version
        version = api_version.rsplit("/", 1)[-1] if api_version.count("/") <= 1 else ""
        for field, value, empty in (("apiVersion", api_version, not version),
                                    ("kind", kind, not kind),
                                    ("name", text_at(owner, "name"), not text_at(owner, "name")),
                                    ("uid", text_at(owner, "uid"), not text_at(owner, "uid"))):
            if empty:
                shown = "version" if field == "apiVersion" else field
                errors.append(invalid(f"{path}.{field}", value, f"{shown} must not be empty"))
        group = api_version.rsplit("/", 1)[0] if api_version.count("/") == 1 else ""
        if (group, version, kind) in BANNED_OWNERS:  # gvk.String(): "/v1, Kind=Event"
            errors.append(invalid(path, GoLiteral(go_owner_reference(owner)),
                                  f"{group}/{version}, Kind={kind} is disallowed from being an "
                                  "owner"))
        if owner.get("controller") is True:
            current = f"{kind}/{text_at(owner, 'name')}"
            if not first_controller:
                first_controller = current
                continue
            shown_all = ", ".join(go_owner_reference(o) for o in owners)
            errors.append(invalid(path, GoLiteral(f"[]v1.OwnerReference{{{shown_all}}}"),
                                  "Only one reference can have Controller set to true. Found "
                                  f'"true" in references for {first_controller} and {current}'))
    return errors


def _validate_names(resource: Resource, meta: Mapping[str, JSON]) -> list[FieldError]:
    errors: list[FieldError] = []
    generate_name = meta.get("generateName") or ""
    if isinstance(generate_name, str) and generate_name:
        problems = _prefix_problems(resource.name_rule, generate_name)
        if problems:
            errors += [invalid("metadata.generateName", generate_name, m) for m in problems]
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
    if dns1123_label_ok(namespace):
        return []
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
    owners = meta.get("ownerReferences")
    if isinstance(owners, list):
        errors += validate_owner_references([o for o in owners if isinstance(o, dict)])
    finalizers = meta.get("finalizers")
    if isinstance(finalizers, list):
        errors += validate_finalizers([f for f in finalizers if isinstance(f, str)])
    return errors
