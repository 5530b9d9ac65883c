"""The DefaultIngressClass admission plugin (pure): a new Ingress that names no class, neither
in ``spec.ingressClassName`` nor in the legacy ``kubernetes.io/ingress.class`` annotation, gets
the default IngressClass's name — the class annotated
``ingressclass.kubernetes.io/is-default-class: "true"``, the newest one when several are (ties by
name) — ``plugin/pkg/admission/network/defaultingressclass/admission.go`` v1.32 (create only).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubewire.times import parse_time_or_none

__all__ = ["IS_DEFAULT_CLASS", "LEGACY_CLASS_ANNOTATION", "admit_ingress", "default_class"]

IS_DEFAULT_CLASS = "ingressclass.kubernetes.io/is-default-class"
LEGACY_CLASS_ANNOTATION = "kubernetes.io/ingress.class"


def default_class(classes: Iterable[Mapping[str, Any]]) -> str | None:
    """``getDefaultClass``: the newest class marked default (by creationTimestamp, then name)."""
    marked = []
    for candidate in classes:
        meta = candidate.get("metadata") or {}
        if (meta.get("annotations") or {}).get(IS_DEFAULT_CLASS) == "true":
            created = parse_time_or_none(meta.get("creationTimestamp"))
            stamp = created.timestamp() if created is not None else 0.0
            marked.append((-stamp, str(meta.get("name") or "")))
    return min(marked)[1] if marked else None


def admit_ingress(ingress: dict[str, Any], classes: Iterable[Mapping[str, Any]]) -> None:
    """Set ``spec.ingressClassName`` in place when the plugin would."""
    spec = ingress.get("spec")
    if not isinstance(spec, dict):
        if spec is not None:
            return
        spec = {}
    if spec.get("ingressClassName") is not None:
        return
    annotations = (ingress.get("metadata") or {}).get("annotations") or {}
    if isinstance(annotations, dict) and LEGACY_CLASS_ANNOTATION in annotations:
        return
    name = default_class(classes)
    if name is not None:
        ingress["spec"] = {"ingressClassName": name, **spec}  # IngressSpec's first field
