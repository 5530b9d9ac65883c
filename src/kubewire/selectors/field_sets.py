"""The selectable fields of an object: what field selectors match against (kube's ``fields.Set``).

``field_set`` runs per event per watcher, so each ``Resource``'s field extraction is compiled once
and kept allocation-light. Values are rendered as Go formats scalars; odd shapes never raise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kubewire.json_types import JSON
from kubewire.resources import Resource

Extractor = Callable[[Mapping[str, JSON]], str]


def _walk(obj: JSON, path: tuple[str, ...]) -> JSON:
    for key in path:
        try:
            obj = obj.get(key)
        except AttributeError:  # a scalar or list on the way: the field is absent
            return None
    return obj


def _render(value: JSON) -> str:
    """A field value as kube's ``fields.Set`` holds it (Go formatting of scalars)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "" if value is None or isinstance(value, dict | list) else str(value)


def _compile_source(source: str) -> Extractor:
    """One ``Resource.field_labels`` source (see the formatter comment in resources.py)."""
    kind, has_formatter, rest = source.partition(":")
    if not has_formatter:
        path = tuple(source.split("."))
        return lambda obj: _render(_walk(obj, path))
    paths = [tuple(p.split(".")) for p in rest.split("|") if p]
    if kind == "never":
        return lambda obj: ""
    if kind == "int":
        return lambda obj: _render(_walk(obj, paths[0])) or "0"
    if kind == "bool":
        return lambda obj: "true" if _walk(obj, paths[0]) is True else "false"
    if kind == "or":
        return lambda obj: next((v for v in (_render(_walk(obj, p)) for p in paths) if v), "")
    if kind == "first_ip":
        return lambda obj: _first_ip(obj, paths)
    raise ValueError(f"unknown field-label formatter in {source!r}")


def _first_ip(obj: Mapping[str, JSON], paths: list[tuple[str, ...]]) -> str:
    items = _walk(obj, paths[0])
    if isinstance(items, list) and items:
        first = items[0]
        return _render(first.get("ip")) if isinstance(first, dict) else ""
    return _render(_walk(obj, paths[1])) if len(paths) > 1 else ""


@dataclass(frozen=True, slots=True)
class _CompiledFields:
    resource: Resource
    allowed: frozenset[str]
    extractors: tuple[tuple[str, Extractor], ...]


_COMPILED: dict[int, _CompiledFields] = {}


def _compiled(resource: Resource) -> _CompiledFields:
    # Resource holds mappings, so it is unhashable: key by identity and re-check it.
    entry = _COMPILED.get(id(resource))
    if entry is None or entry.resource is not resource:
        entry = _CompiledFields(
            resource, frozenset(resource.all_field_labels()),
            tuple((label, _compile_source(src)) for label, src in resource.field_labels.items()))
        _COMPILED[id(resource)] = entry
    return entry


def selectable_field_labels(resource: Resource) -> frozenset[str]:
    """Every field label ``resource`` accepts in a field selector, after alias conversion."""
    return _compiled(resource).allowed


def field_set(resource: Resource, obj: Mapping[str, JSON]) -> dict[str, str]:
    """The selectable field values of ``obj``: what field selectors match against.

    Always has ``metadata.name``; ``metadata.namespace`` for namespaced kinds; then every
    ``resource.field_labels`` entry (absent values are ``""``). Never raises on odd shapes.
    """
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    fields = {"metadata.name": _render(meta.get("name"))}
    if resource.namespaced:
        fields["metadata.namespace"] = _render(meta.get("namespace"))
    for label, extract in _compiled(resource).extractors:
        fields[label] = extract(obj)
    return fields
