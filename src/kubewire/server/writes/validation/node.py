"""Node and Namespace validation (kube ``ValidateNode``, ``validateNodeTaints``,
``ValidateNamespace``, ``validateFinalizerName`` in pkg/apis/core/validation/validation.go).

kube validates node taints under ``metadata.taints`` (its path starts from ``metadata``), and
so does kubewire. Pure: objects in, ``FieldError``s out.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubewire.go_text import GoLiteral, go_quote
from kubewire.json_types import JSON
from kubewire.names import is_qualified_name, is_valid_label_value
from kubewire.resources import Resource
from kubewire.status import FieldError, invalid, not_supported, required

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion"})


def _go_taint(taint: Mapping[str, JSON]) -> GoLiteral:
    """A ``core.Taint`` as ``%#v`` prints it. A set TimeAdded prints as a pointer address in
    kube, which no client can rely on; it is shown as nil here."""
    added = "(*v1.Time)(nil)"
    return GoLiteral(f"core.Taint{{Key:{go_quote(str(taint.get('key', '')))}, "
                     f"Value:{go_quote(str(taint.get('value', '')))}, "
                     f"Effect:{go_quote(str(taint.get('effect', '')))}, TimeAdded:{added}}}")


def validate_taints(taints: list[JSON], path: str) -> list[FieldError]:
    """``validateNodeTaints``: key a qualified name, value a label value, a known effect, and
    each (key, effect) once."""
    errors: list[FieldError] = []
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(taints):
        if not isinstance(taint, dict):
            continue
        item = f"{path}[{i}]"
        key, value = str(taint.get("key") or ""), str(taint.get("value") or "")
        effect = str(taint.get("effect") or "")
        errors += [invalid(f"{item}.key", key, m) for m in is_qualified_name(key)]
        problems = is_valid_label_value(value)
        if problems:
            errors.append(invalid(f"{item}.value", value, ";".join(problems)))
        if not effect:
            errors.append(required(f"{item}.effect"))
        elif effect not in TAINT_EFFECTS:
            errors.append(not_supported(f"{item}.effect", effect, TAINT_EFFECTS))
        if (key, effect) in seen:
            errors.append(FieldError("FieldValueDuplicate", item, _go_taint(taint),
                                     "taints must be unique by key and effect pair"))
            continue
        seen.add((key, effect))
    return errors


def validate_node(resource: Resource, obj: Mapping[str, JSON],
                  old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    spec = obj.get("spec")
    taints = spec.get("taints") if isinstance(spec, dict) else None
    return validate_taints(taints, "metadata.taints") if isinstance(taints, list) else []


def finalizer_problems(name: str) -> list[str]:
    """``validateFinalizerName``: a qualified name; unqualified ones must be kube's own."""
    problems = is_qualified_name(name)
    if "/" not in name and name not in STANDARD_FINALIZERS:
        problems.append("name is neither a standard finalizer name nor is it fully qualified")
    return problems


def validate_namespace(resource: Resource, obj: Mapping[str, JSON],
                       old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    spec = obj.get("spec")
    finalizers = spec.get("finalizers") if isinstance(spec, dict) else None
    errors: list[FieldError] = []
    for name in finalizers if isinstance(finalizers, list) else []:
        if isinstance(name, str):
            errors += [invalid("spec.finalizers", name, m) for m in finalizer_problems(name)]
    return errors
