"""authorization.k8s.io/v1's reviews, validated as kube v1.32's
``pkg/apis/authorization/validation`` does: exactly one of ``resourceAttributes`` and
``nonResourceAttributes``; a SubjectAccessReview (and a local one) names a user or a group;
``fieldSelector`` / ``labelSelector`` hold a ``rawSelector`` or ``requirements``, not both, each
requirement checked as ``metav1validation`` does with unknown operators allowed (newer clients
may know operators this server does not); metadata must be empty (a local review's may hold its
namespace, which ``spec.resourceAttributes.namespace`` must equal); a local review takes no
non-resource attributes. SelfSubjectRulesReview has no rules.

Bad values print as Go's ``field.Error`` prints them: a nil pointer as ``"null"``, a struct with
``%#v`` (``GoLiteral``: ``authorization.NonResourceAttributes{Path:"/x", Verb:"get"}``, the
internal type, which is what kube validates; the metadata as ``v1.ObjectMeta{...}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubewire.go_text import GoLiteral, go_quote
from kubewire.json_types import JSON
from kubewire.names import is_qualified_name, is_valid_label_value
from kubewire.status import FieldError, forbidden, invalid, required

__all__ = ["metadata_is_empty", "validate_local_subject_access_review",
           "validate_self_subject_access_review", "validate_subject_access_review"]

_SPEC = "spec"
_ATTRIBUTES = "spec.resourceAttributes"
_IN_OPERATORS = ("In", "NotIn")
_EXISTS_OPERATORS = ("Exists", "DoesNotExist")
_GO_POINTER = "0xc000000000"  # an address, as kube's message would show one
# ObjectMeta's fields in Go struct order, with how ``%#v`` prints each when unset.
_META_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("name", "Name", "string"), ("generateName", "GenerateName", "string"),
    ("namespace", "Namespace", "string"), ("selfLink", "SelfLink", "string"),
    ("uid", "UID", "string"), ("resourceVersion", "ResourceVersion", "string"),
    ("generation", "Generation", "int"), ("creationTimestamp", "CreationTimestamp", "time"),
    ("deletionTimestamp", "DeletionTimestamp", "*time"),
    ("deletionGracePeriodSeconds", "DeletionGracePeriodSeconds", "*int64"),
    ("labels", "Labels", "map"), ("annotations", "Annotations", "map"),
    ("ownerReferences", "OwnerReferences", "owners"), ("finalizers", "Finalizers", "strings"),
    ("managedFields", "ManagedFields", "managed"),
)
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")


def validate_subject_access_review(review: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateSubjectAccessReview``."""
    errors = _subject_spec_errors(_dict(review.get("spec")))
    meta = _dict(review.get("metadata"))
    if not metadata_is_empty(meta):
        errors.append(invalid("metadata", go_object_meta(meta), "must be empty"))
    return errors


def validate_self_subject_access_review(review: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateSelfSubjectAccessReview``."""
    errors = _self_spec_errors(_dict(review.get("spec")))
    meta = _dict(review.get("metadata"))
    if not metadata_is_empty(meta):
        errors.append(invalid("metadata", go_object_meta(meta), "must be empty"))
    return errors


def validate_local_subject_access_review(review: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateLocalSubjectAccessReview`` (the namespace is the URL's by now)."""
    spec = _dict(review.get("spec"))
    errors = _subject_spec_errors(spec)
    meta = _dict(review.get("metadata"))
    namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else ""
    if not metadata_is_empty(meta, except_namespace=True):
        errors.append(invalid("metadata", go_object_meta(meta),
                              "must be empty except for namespace"))
    attributes = spec.get("resourceAttributes")
    if isinstance(attributes, dict):
        asked = attributes.get("namespace")
        asked = asked if isinstance(asked, str) else ""
        if asked != namespace:
            errors.append(invalid("spec.resourceAttributes.namespace", asked,
                                  "must match metadata.namespace"))
    non_resource = spec.get("nonResourceAttributes")
    if isinstance(non_resource, dict):
        errors.append(invalid("spec.nonResourceAttributes", _go_non_resource(non_resource),
                              "disallowed on this kind of request"))
    return errors


def _dict(value: JSON) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _one_of_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    """The two attribute pointers: one must be set, not both."""
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    has_resource, has_non_resource = isinstance(resource, dict), isinstance(non_resource, dict)
    errors: list[FieldError] = []
    if has_resource and has_non_resource:
        assert isinstance(non_resource, dict)
        errors.append(invalid(f"{_SPEC}.nonResourceAttributes", _go_non_resource(non_resource),
                              "cannot be specified in combination with resourceAttributes"))
    if not has_resource and not has_non_resource:
        # the value shown is the nil nonResourceAttributes pointer
        errors.append(invalid(f"{_SPEC}.resourceAttributes", "null",
                              "exactly one of nonResourceAttributes or resourceAttributes "
                              "must be specified"))
    return errors


def _subject_spec_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateSubjectAccessReviewSpec``."""
    errors = _one_of_errors(spec)
    user = spec.get("user") if isinstance(spec.get("user"), str) else ""
    groups = spec.get("groups")
    if not user and not (isinstance(groups, list) and groups):
        errors.append(invalid(f"{_SPEC}.user", user, "at least one of user or group must be "
                              "specified"))
    return errors + _resource_attribute_errors(spec.get("resourceAttributes"))


def _self_spec_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateSelfSubjectAccessReviewSpec``."""
    return _one_of_errors(spec) + _resource_attribute_errors(spec.get("resourceAttributes"))


def _resource_attribute_errors(attributes: JSON) -> list[FieldError]:
    """``validateResourceAttributes``: the field selector's, then the label selector's."""
    if not isinstance(attributes, dict):
        return []
    return (_selector_errors(attributes.get("fieldSelector"), f"{_ATTRIBUTES}.fieldSelector",
                             _field_requirement_errors)
            + _selector_errors(attributes.get("labelSelector"), f"{_ATTRIBUTES}.labelSelector",
                               _label_requirement_errors))


def _selector_errors(selector: JSON, path: str, requirement_errors: Any) -> list[FieldError]:
    """``validateFieldSelectorAttributes`` / ``validateLabelSelectorAttributes``."""
    if not isinstance(selector, dict):
        return []
    raw = selector.get("rawSelector") if isinstance(selector.get("rawSelector"), str) else ""
    requirements = selector.get("requirements")
    requirements = requirements if isinstance(requirements, list) else []
    errors: list[FieldError] = []
    if raw and requirements:
        errors.append(invalid(f"{path}.rawSelector", raw,
                              "may not specified at the same time as requirements"))
    if not raw and not requirements:
        errors.append(required(f"{path}.requirements", f"when {path} is specified, "
                               "requirements or rawSelector is required"))
    for i, requirement in enumerate(requirements):
        errors += requirement_errors(_dict(requirement), f"{path}.requirements[{i}]")
    return errors


def _strings(parent: Mapping[str, Any], key: str) -> list[str]:
    value = parent.get(key)
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _operator_errors(requirement: Mapping[str, Any], path: str) -> list[FieldError]:
    """The operator/values pairing both requirement kinds share (unknown operators pass)."""
    operator, values = requirement.get("operator"), _strings(requirement, "values")
    if operator in _IN_OPERATORS and not values:
        return [required(f"{path}.values",
                         "must be specified when `operator` is 'In' or 'NotIn'")]
    if operator in _EXISTS_OPERATORS and values:
        return [forbidden(f"{path}.values",
                          "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")]
    return []


def _field_requirement_errors(requirement: Mapping[str, Any], path: str) -> list[FieldError]:
    """``metav1validation.ValidateFieldSelectorRequirement``: a key, then the operator's."""
    errors: list[FieldError] = []
    if not requirement.get("key"):
        errors.append(required(f"{path}.key", "must be specified"))
    return errors + _operator_errors(requirement, path)


def _label_requirement_errors(requirement: Mapping[str, Any], path: str) -> list[FieldError]:
    """``metav1validation.ValidateLabelSelectorRequirement``: the operator's, the key as a
    label name, each value as a label value."""
    errors = _operator_errors(requirement, path)
    key = requirement.get("key")
    key = key if isinstance(key, str) else ""
    errors += [invalid(f"{path}.key", key, m) for m in is_qualified_name(key)]
    for j, value in enumerate(_strings(requirement, "values")):
        errors += [invalid(f"{path}.values[{j}]", value, m) for m in is_valid_label_value(value)]
    return errors


# --- metadata ----------------------------------------------------------------------------------

def metadata_is_empty(meta: Mapping[str, Any], *, except_namespace: bool = False) -> bool:
    """Whether the decoded ObjectMeta equals Go's zero value (``apiequality.Semantic``: an empty
    map or list is nil), managedFields aside (the create handler set them)."""
    for key, value in meta.items():
        if key == "managedFields" or (except_namespace and key == "namespace"):
            continue
        if key == "deletionGracePeriodSeconds":
            if value is not None:  # a pointer: 0 is set
                return False
        elif value not in (None, "", 0, False, {}, []):
            return False
    return True


def _go_non_resource(attributes: Mapping[str, Any]) -> GoLiteral:
    path = attributes.get("path") if isinstance(attributes.get("path"), str) else ""
    verb = attributes.get("verb") if isinstance(attributes.get("verb"), str) else ""
    return GoLiteral(f"authorization.NonResourceAttributes{{Path:{go_quote(str(path))}, "
                     f"Verb:{go_quote(str(verb))}}}")


def _go_time(value: JSON) -> str:
    """``time.Time.GoString`` of an RFC 3339 timestamp (UTC), or of the zero time."""
    text = value if isinstance(value, str) else ""
    try:
        date, clock = text.rstrip("Z").split("T")
        year, month, day = (int(p) for p in date.split("-"))
        hour, minute, second = (int(float(p)) for p in clock.split(":"))
    except ValueError:
        year, month, day, hour, minute, second = 1, 1, 1, 0, 0, 0
    return (f"time.Date({year}, time.{_MONTHS[month - 1]}, {day}, {hour}, {minute}, "
            f"{second}, 0, time.UTC)")


def _go_strings(values: JSON, type_name: str = "[]string") -> str:
    if not isinstance(values, list):
        return f"{type_name}(nil)"
    return type_name + "{" + ", ".join(go_quote(str(v)) for v in values) + "}"


def _go_map(value: JSON) -> str:
    if not isinstance(value, dict):
        return "map[string]string(nil)"
    return "map[string]string{" + ", ".join(
        f"{go_quote(k)}:{go_quote(str(value[k]))}" for k in sorted(value)) + "}"


def _go_pointer(type_name: str, value: JSON) -> str:
    return f"(*{type_name})({'nil' if value is None else _GO_POINTER})"


def _go_owner(owner: JSON) -> str:
    ref = _dict(owner)

    def text(key: str) -> str:
        return go_quote(str(ref.get(key) or ""))

    return (f"v1.OwnerReference{{APIVersion:{text('apiVersion')}, Kind:{text('kind')}, "
            f"Name:{text('name')}, UID:{text('uid')}, "
            f"Controller:{_go_pointer('bool', ref.get('controller'))}, "
            f"BlockOwnerDeletion:{_go_pointer('bool', ref.get('blockOwnerDeletion'))}}}")


def _go_managed(entry: JSON) -> str:
    item = _dict(entry)

    def text(key: str) -> str:
        return go_quote(str(item.get(key) or ""))

    return (f"v1.ManagedFieldsEntry{{Manager:{text('manager')}, "
            f"Operation:{text('operation')}, APIVersion:{text('apiVersion')}, "
            f"Time:{_go_pointer('v1.Time', item.get('time'))}, "
            f"FieldsType:{text('fieldsType')}, "
            f"FieldsV1:{_go_pointer('v1.FieldsV1', item.get('fieldsV1'))}, "
            f"Subresource:{text('subresource')}}}")


def go_object_meta(meta: Mapping[str, Any]) -> GoLiteral:
    """``%#v`` of ``metav1.ObjectMeta`` (pointers print an address, as Go's would)."""
    parts: list[str] = []
    for key, go_name, kind in _META_FIELDS:
        value = meta.get(key)
        if kind == "string":
            shown = go_quote(value if isinstance(value, str) else "")
        elif kind == "int":
            shown = str(value if isinstance(value, int) else 0)
        elif kind == "time":
            shown = _go_time(value)
        elif kind == "*time":
            shown = _go_pointer("v1.Time", value)
        elif kind == "*int64":
            shown = _go_pointer("int64", value)
        elif kind == "map":
            shown = _go_map(value)
        elif kind == "strings":
            shown = _go_strings(value)
        elif kind == "owners":
            shown = ("[]v1.OwnerReference{" + ", ".join(_go_owner(o) for o in value) + "}"
                     if isinstance(value, list) else "[]v1.OwnerReference(nil)")
        else:
            shown = ("[]v1.ManagedFieldsEntry{" + ", ".join(_go_managed(e) for e in value) + "}"
                     if isinstance(value, list) else "[]v1.ManagedFieldsEntry(nil)")
        parts.append(f"{go_name}:{shown}")
    return GoLiteral("v1.ObjectMeta{" + ", ".join(parts) + "}")
