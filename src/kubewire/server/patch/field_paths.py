"""Field paths and field sets of server-side apply, as structured-merge-diff defines them.

A path is a tuple of path elements, each kept in its ``FieldsV1`` spelling: ``f:<field>``,
``k:<JSON object of the list-map keys>``, ``v:<JSON value>`` (set lists), ``i:<index>``. A field
set is a frozenset of paths; a path in the set is a *member* (its owner owns that node).

The walk reads the schema facts (``kubewire.schema``): an object with ``properties`` is a struct
whose declared fields are not members themselves; ``additionalProperties`` is a map whose entries
are members; ``x-kubernetes-map-type: atomic`` and lists without keys are one leaf. List types
follow kube-openapi ``schemaconv``: ``x-kubernetes-list-type`` when given, else patch strategy
``merge`` with a merge key is a map list and without one a set, else atomic. Sources:
``kubernetes-sigs/structured-merge-diff`` ``typed/tofieldset.go``, ``typed/compare.go``,
``fieldpath/serialize.go`` and ``fieldpath/element.go`` (``PathElement.String``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

import msgspec

from kubewire.go_text import go_type_name
from kubewire.json_types import JSON
from kubewire.schema import TypeNode

Path = tuple[str, ...]
FieldSet = frozenset[Path]
NodeKind = Literal["struct", "map", "atomic", "map-list", "set-list", "scalar"]
FieldPlanEntry = tuple[TypeNode | None, bool, NodeKind | None]
FieldPlan = dict[str, FieldPlanEntry]
"""A struct or map node's fields for the create walk: schema, always present, kind."""

__all__ = [
    "Comparison",
    "FieldSet",
    "FieldSetError",
    "MissingKeyError",
    "Path",
    "compare",
    "create_fields_v1",
    "field_set",
    "fields_v1",
    "list_element",
    "node_kind",
    "parse_fields_v1",
    "path_text",
    "without_subtree",
]


class MissingKeyError(ValueError):
    """A map-list element lacks a key field that has no schema default."""


@dataclass(slots=True)
class _NodeFacts:
    """What the walks need of one schema node, read once (the node's lookups are not cheap).
    Not to be changed once read, but for ``create_plan``, filled on a create walk's first
    visit (it reads the children's facts, so it cannot be read with the node's own: schemas
    are recursive)."""

    kind: NodeKind | None  # None: deduced from the value (free-form JSON)
    properties: Mapping[str, TypeNode]
    values: TypeNode | None
    items: TypeNode | None
    keys: tuple[str, ...]
    required: frozenset[str]
    is_closed: bool  # a struct whose undeclared fields are errors
    is_numeric: bool  # an integer or number scalar
    create_plan: _CreatePlan | None = None  # ``_plan``


def _facts(node: TypeNode) -> _NodeFacts:
    """The node's facts, read once and kept on the node (``TypeNode.walk_facts``)."""
    facts = node.walk_facts
    if type(facts) is _NodeFacts:
        return facts
    read = node.walk_facts = _read_facts(node)
    return read


def _read_facts(node: TypeNode) -> _NodeFacts:
    meta, node_type = node.patch_meta, node.type
    kind: NodeKind | None = None
    if node_type == "object":
        kind = "atomic" if meta.map_type == "atomic" else "struct" if node.properties else "map"
    elif node_type == "array":
        kind = _list_kind(node)
    elif node_type != "any":
        kind = "scalar"
    keys = meta.list_map_keys if meta.list_type == "map" else (meta.patch_merge_key,)
    is_closed = (node_type == "object" and bool(node.properties) and node.values is None
                 and not node.preserve_unknown_fields)
    return _NodeFacts(kind, node.properties if node_type == "object" else {},
                      node.values if node_type == "object" else None,
                      node.items if node_type == "array" else None, keys,
                      frozenset(node.required), is_closed, node_type in ("integer", "number"))


def node_kind(node: TypeNode | None, value: JSON) -> NodeKind:
    """How server-side apply treats ``value`` at schema ``node`` (None: outside the schema)."""
    kind = _facts(node).kind if node is not None else None
    if kind is not None:
        return kind
    # Deduced types (CR fields without schema): maps are granular, lists atomic.
    return "map" if isinstance(value, dict) else "atomic" if isinstance(value, list) \
        else "scalar"


def _list_kind(node: TypeNode) -> NodeKind:
    meta = node.patch_meta
    if meta.list_type == "map" and meta.list_map_keys:
        return "map-list"
    if meta.list_type == "set":
        return "set-list"
    if meta.list_type:
        return "atomic"
    if "merge" in meta.patch_strategy.split(","):
        return "map-list" if meta.patch_merge_key else "set-list"
    return "atomic"


def _json(value: JSON) -> str:
    return msgspec.json.encode(value, order="sorted").decode()


def list_element(node: TypeNode, kind: NodeKind, item: JSON) -> str:
    """The path element naming ``item`` of a map list (``k:``) or a set list (``v:``).

    Raises MissingKeyError when a key field is absent and its schema has no default
    (structured-merge-diff ``listItemToPathElement``).
    """
    if kind == "set-list":
        return "v:" + _json(item)
    facts = _facts(node)
    element = facts.items
    key: dict[str, JSON] = {}
    for name in facts.keys:
        value = item.get(name) if isinstance(item, dict) else None
        if value is None:
            child = element.child(name) if element is not None else None
            if child is None or not child.has_default:
                raise MissingKeyError(
                    f"associative list with keys has an element that omits key field "
                    f"{json.dumps(name)} (and doesn't have default value)")
            value = child.default
        key[name] = value
    return "k:" + _json(key)


def _child(node: TypeNode | None, name: str) -> tuple[TypeNode | None, bool]:
    """The schema of field ``name`` and whether it is a declared struct field."""
    if node is None:
        return None, False
    facts = _facts(node)
    prop = facts.properties.get(name)
    if prop is not None:
        return prop, True
    return facts.values, False


def _items(node: TypeNode | None) -> TypeNode | None:
    return _facts(node).items if node is not None else None


# --- ToFieldSet ---------------------------------------------------------------------------------

def field_set(value: JSON, node: TypeNode | None) -> FieldSet:
    """Every node ``value`` sets, as structured-merge-diff ``TypedValue.ToFieldSet`` walks it.

    Raises FieldSetError, with every problem in structured-merge-diff's words, when ``value``
    does not fit the schema: a field a struct does not declare, a map-list item without its
    keys, a key or set value listed twice.
    """
    walk = _FieldSetWalk()
    walk.visit(value, node, ())
    if walk.errors:
        if len(walk.errors) == 1:
            raise FieldSetError(walk.errors[0])
        raise FieldSetError("\n  ".join(["errors:", *walk.errors]))
    return frozenset(walk.out)


class FieldSetError(ValueError):
    """A value that does not fit its schema (``typed.ValidationErrors``)."""


@dataclass(slots=True)
class _FieldSetWalk:
    out: set[Path] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)

    def visit(self, value: JSON, node: TypeNode | None, path: Path) -> None:
        kind = node_kind(node, value)
        if node is not None and value is not None and _facts(node).is_numeric and (
                isinstance(value, bool) or not isinstance(value, int | float)):
            self.errors.append(f"{path_text(path)}: expected numeric (int or float), got "
                               f"{go_type_name(value)}")
        elif isinstance(value, dict) and kind in ("struct", "map"):
            self._visit_map(value, node, path)
        elif isinstance(value, list) and node is not None and kind in ("map-list", "set-list"):
            self._visit_list(value, node, kind, path)
        elif path:
            self.out.add(path)

    def _visit_map(self, value: dict[str, JSON], node: TypeNode | None, path: Path) -> None:
        for key, child_value in value.items():
            child, declared = _child(node, key)
            child_path = (*path, "f:" + key)
            if child is None and node is not None and _facts(node).is_closed:
                self.errors.append(f"{path_text(child_path)}: field not declared in schema")
                continue
            self.visit(child_value, child, child_path)
            if not declared or child_value is None or child_value == {}:
                self.out.add(child_path)

    def _visit_list(self, value: list[JSON], node: TypeNode, kind: NodeKind,
                    path: Path) -> None:
        seen: set[str] = set()
        for index, item in enumerate(value):
            try:
                element = list_element(node, kind, item)
            except MissingKeyError as exc:
                self.errors.append(f"{path_text(path)}: element {index}: {exc}")
                continue
            if element in seen:
                self.errors.append(f"{path_text(path)}: duplicate entries for key "
                                   f"{path_text((element,))}")
                continue
            seen.add(element)
            item_path = (*path, element)
            self.visit(item, _items(node), item_path)
            self.out.add(item_path)


# --- Compare ------------------------------------------------------------------------------------

@dataclass(slots=True)
class Comparison:
    """Leaves added, modified and removed between two objects (``typed.Comparison``)."""

    added: set[Path] = field(default_factory=set)
    modified: set[Path] = field(default_factory=set)
    removed: set[Path] = field(default_factory=set)

    @property
    def is_same(self) -> bool:
        return not (self.added or self.modified or self.removed)


_MISSING: JSON = object()


def compare(old: JSON, new: JSON, node: TypeNode | None, *, is_custom: bool) -> Comparison:
    """What changed from ``old`` to ``new``; ``null`` counts as absent.

    Leaves are compared; a map, list or list item that appears or disappears as a whole is
    reported too. A built-in object is a Go struct, so its declared struct fields and its
    fields without ``omitempty`` (the schema's ``required``) always exist and are never
    reported by themselves; a custom resource is unstructured and they are.
    """
    result = Comparison()
    _compare(old, new, node, (), _CompareRun(result, is_custom))
    return result


@dataclass(frozen=True, slots=True)
class _CompareRun:
    result: Comparison
    is_custom: bool
    always_present: set[Path] = field(default_factory=set)


def _compare(old: JSON, new: JSON, node: TypeNode | None, path: Path, run: _CompareRun) -> None:
    if old is new or (type(old) is type(new) and old == new):
        return  # most of an update is unchanged: skip the walk (Python's == is C)
    old = _MISSING if old is None else old
    new = _MISSING if new is None else new
    probe = new if new is not _MISSING else old
    kind = node_kind(node, probe)
    granular = kind in _GRANULAR
    same_shape = type(old) is type(new) or _MISSING in (old, new)
    if not granular or not same_shape or (not old and not new) or not isinstance(
            probe, dict | list):
        _leaf(old, new, path, run.result)
        return
    if isinstance(probe, dict):
        _compare_maps(old, new, node, path, run)
    elif node is not None:
        _compare_lists(old, new, node, path, run)
    if path and path not in run.always_present:
        if old is _MISSING:
            run.result.added.add(path)
        elif new is _MISSING:
            run.result.removed.add(path)


def _leaf(old: JSON, new: JSON, path: Path, result: Comparison) -> None:
    if not path:
        return
    if old is _MISSING:
        if new is not _MISSING:
            result.added.add(path)
    elif new is _MISSING:
        result.removed.add(path)
    elif old != new or type(old) is not type(new):
        result.modified.add(path)


def _compare_maps(old: JSON, new: JSON, node: TypeNode | None, path: Path,
                  run: _CompareRun) -> None:
    old_map = old if isinstance(old, dict) else {}
    new_map = new if isinstance(new, dict) else {}
    for key in dict.fromkeys([*old_map, *new_map]):
        child, declared = _child(node, key)
        child_path = (*path, "f:" + key)
        if declared and not run.is_custom and node is not None and _plan(node).builtin[key][1]:
            run.always_present.add(child_path)
        _compare(old_map.get(key), new_map.get(key), child, child_path, run)


def _compare_lists(old: JSON, new: JSON, node: TypeNode, path: Path, run: _CompareRun) -> None:
    kind = node_kind(node, new if new is not _MISSING else old)
    old_items = index_items(node, kind, old if isinstance(old, list) else [])
    new_items = index_items(node, kind, new if isinstance(new, list) else [])
    for element in dict.fromkeys([*old_items, *new_items]):
        _compare(old_items.get(element), new_items.get(element), _items(node),
                 (*path, element), run)


def index_items(node: TypeNode, kind: NodeKind, items: Iterable[JSON]) -> dict[str, JSON]:
    """A keyed list's items by path element; a repeated key keeps its first item."""
    out: dict[str, JSON] = {}
    for item in items:
        out.setdefault(list_element(node, kind, item), item)
    return out


# --- Compare against nothing (create) -----------------------------------------------------------

def create_fields_v1(new: dict[str, JSON], node: TypeNode | None, *, is_custom: bool,
                     stripped: Strip) -> dict[str, JSON]:
    """The ``FieldsV1`` JSON of the paths ``compare({}, new, ...)`` reports as added, less
    what ``stripped`` names (``Strip``).

    A create's writer owns exactly what it set, so this walks ``new`` once and writes the
    sorted ``FieldsV1`` levels as it returns from them (what ``fields_v1`` writes for those
    paths), with no diff against an empty object, no path tuples, no intermediate tree.
    Raises MissingKeyError where ``compare`` would.
    """
    plan = _plan(node) if node is not None else None
    if plan is not None and plan.is_struct:  # the stripped members left out as met
        return _added_struct(new, plan, stripped, is_custom) or {}
    fields = _added_map(new, node, True, is_custom)  # the top: never a member itself
    if not fields:
        return {}
    _strip(fields, stripped)
    return fields


def _strip(level: dict[str, dict[str, JSON]], stripped: Strip) -> None:
    """``level`` (an emitted ``FieldsV1`` level) less what ``stripped`` names."""
    for element, below in stripped:
        emitted = level.get(element)
        if emitted is None:
            continue
        if below is None:
            del level[element]
            continue
        if below and emitted:
            _strip(emitted, below)
        _drop_member(level, element)


def _drop_member(level: dict[str, dict[str, JSON]], element: str) -> None:
    """``level`` (an emitted ``FieldsV1`` level) without the member at ``element``: a leaf
    goes, a member with children keeps them, and one left without any goes
    (``Set.Difference`` of the one path)."""
    emitted = level[element]
    if not emitted or (len(emitted) == 1 and "." in emitted):
        del level[element]
    else:
        emitted.pop(".", None)


@dataclass(slots=True)
class _CreatePlan:
    """One schema node as the create walk reads it, worked out once per node and kept in its
    facts: per field its schema, whether ``compare`` counts it always present (on a built-in
    kind only: required, or a struct, as a Go struct's field exists in both objects; a
    custom resource is unstructured) and its kind; the same for an undeclared field (the
    map's values); a list's items; and the object shapes already met (``_Level``)."""

    node: TypeNode
    builtin: FieldPlan
    custom: FieldPlan
    undeclared: FieldPlanEntry
    is_struct: bool  # declared fields: the objects met repeat the same few shapes
    items: TypeNode | None
    items_kind: NodeKind | None
    items_plan: _CreatePlan | None = None  # a list of structs: theirs (``_added_list``)
    levels: dict[tuple[object, ...], _Level] = field(default_factory=dict)


_STRUCT, _LIST, _MAP = 0, 1, 2  # how ``_added_struct`` walks a field's value
Walk = tuple["str | None", str, int, Any, NodeKind, "bool | Strip"]
"""A walked field of a ``_Level``: element (None: walked, then left out), field, how, what
``how`` walks it with (the field's ``_CreatePlan``, or its schema for ``_MAP``), kind, and
its ``_added_struct`` mode."""
Strip = frozenset[tuple[str, "Strip | None"]]
"""What a create's entry leaves out of a level: per element, None for the whole field, else
its member and (recursively) what is left out below it (``endpoint_fields``)."""


@dataclass(frozen=True, slots=True)
class _Level:
    """The emitted ``FieldsV1`` of one shape of object at a struct node (its fields in order,
    each value's type, the parent's ``always`` and the kind of resource): the JSON of its
    sorted level with every leaf in place, ``"."`` first when it is a member, and the fields
    whose values are walked, in place as ``{}`` in the template. ``template`` None: the
    level adds nothing (it may still be a member)."""

    template: bytes | None
    walked: tuple[Walk, ...]


LEVEL_CACHE_SIZE = 64  # object shapes remembered per struct node; emptied when full
_decode = msgspec.json.Decoder().decode


def _plan(node: TypeNode) -> _CreatePlan:
    facts = _facts(node)
    plan = facts.create_plan
    if plan is None:
        builtin: FieldPlan = {}
        custom: FieldPlan = {}
        for key, child in facts.properties.items():
            kind = _facts(child).kind
            builtin[key] = (child, key in facts.required or kind == "struct", kind)
            custom[key] = (child, False, kind)
        values, items = facts.values, facts.items
        plan = facts.create_plan = _CreatePlan(
            node, builtin, custom,
            (values, False, _facts(values).kind if values is not None else None),
            bool(facts.properties), items, _facts(items).kind if items is not None else None)
    return plan


def _added_map(value: dict[str, JSON], node: TypeNode | None, always: bool,
               is_custom: bool) -> dict[str, JSON] | None:
    """The emitted ``FieldsV1`` of what the object ``value`` adds (None: nothing), as
    ``_compare_maps`` of nothing and ``value`` reports it, ``"."`` first when it is a member
    (not ``always`` present) with children, ``{}`` when it is a member without."""
    if node is None:
        return _sorted_level(_added_fields(value, None, is_custom), always)
    plan = _plan(node)
    if plan.is_struct:
        return _added_struct(value, plan, always, is_custom)
    return _added_plain_map(value, node, always, is_custom)


def _added_plain_map(value: dict[str, JSON], node: TypeNode | None, always: bool,
                     is_custom: bool) -> dict[str, JSON] | None:
    """``_added_map`` at a map: any keys, so no shapes to remember."""
    if _SCALARS.issuperset(map(type, value.values())):  # labels, annotations, data...
        if not value:
            return None if always else {}
        out: dict[str, JSON] = {"f:" + key: {} for key in sorted(value)}
        return out if always else {".": {}, **out}
    return _sorted_level(_added_fields(value, node, is_custom), always)


def _added_struct(value: dict[str, JSON], plan: _CreatePlan, mode: bool | Strip,
                  is_custom: bool) -> dict[str, JSON] | None:
    """``_added_map`` at a struct: the ``_Level`` of ``value``'s shape, its walked fields
    filled in. ``mode`` is ``always``, or what to strip (``Strip``; the level itself is then
    no member, as if always present)."""
    # its fields, then their values' types (the length tells where the types begin)
    shape = (mode, is_custom, *value, *map(type, value.values()))
    level = plan.levels.get(shape)
    if level is None:
        if len(plan.levels) >= LEVEL_CACHE_SIZE:
            plan.levels.clear()
        level = plan.levels[shape] = _read_level(value, plan, mode, is_custom)
    always = mode is not False
    if level.template is None:
        return None if always else {}
    out: dict[str, JSON] = _decode(level.template)
    if level.walked:
        for walk in level.walked:
            element, key, how, child, _, child_mode = walk
            emitted = (_added_struct(value[key], child, child_mode, is_custom)
                       if how == _STRUCT else _added_other(value[key], walk, is_custom))
            if element is None:
                continue  # walked for its errors only
            # {} is a member leaf, unless stripped
            if emitted or (emitted is not None and child_mode is False):
                out[element] = emitted
            else:
                del out[element]
        if len(out) == (0 if always else 1):  # only "." (a member) or nothing
            return None if always else {}
    return out


def _added_other(value: JSON, walk: Walk, is_custom: bool) -> dict[str, JSON] | None:
    """A walked field that is a list or a map (no struct): its emitted ``FieldsV1``, less
    what its mode strips below it."""
    _, _, how, child, kind, mode = walk
    always = mode is not False
    emitted = (_added_list(value, child, kind, always, is_custom) if how == _LIST else
               _added_plain_map(value, child, always, is_custom))
    if emitted and type(mode) is frozenset and mode:
        _strip(emitted, mode)
    return emitted


def _read_level(value: dict[str, JSON], plan: _CreatePlan, mode: bool | Strip,
                is_custom: bool) -> _Level:
    """The ``_Level`` of ``value``'s shape: ``_added_value``'s dispatch, which the types of
    the values and the schema decide (not the values themselves), done once."""
    fields = plan.custom if is_custom else plan.builtin
    spec: dict[str, Strip | None] = dict(mode) if isinstance(mode, frozenset) else {}
    elements: list[str] = []
    walked: list[Walk] = []
    for key, child_value in value.items():
        if child_value is None:  # null is absent: nothing added
            continue
        element = "f:" + key
        child, child_always, kind = fields.get(key, plan.undeclared)
        if kind is None:  # deduced types (CR fields without schema): maps granular
            kind = "map" if isinstance(child_value, dict) else "atomic"
        if kind not in _GRANULAR or not isinstance(child_value, dict | list):
            if element not in spec:  # a leaf: a stripped one goes
                elements.append(element)
            continue
        child_mode: bool | Strip = child_always
        walked_as: str | None = element
        if element in spec:
            below = spec[element]
            if below is None:
                walked_as = None  # left out, once walked
            else:
                child_mode = below or True  # its member goes, and those below it
        if walked_as is not None:
            elements.append(element)
        how, target = _walk_how(child_value, child)
        walked.append((walked_as, key, how, target, kind, child_mode))
    if not elements and not walked:
        return _Level(None, ())
    template: dict[str, JSON] = {} if mode is not False else {".": {}}
    template.update((element, {}) for element in sorted(elements))  # "f:": as text
    return _Level(msgspec.json.encode(template), tuple(walked))


def _walk_how(value: JSON, child: TypeNode | None) -> tuple[int, Any]:
    """How ``_added_struct`` walks a list or object ``value`` of schema ``child``, and with
    what."""
    if isinstance(value, list):
        assert child is not None  # a list's kind (not deduced) comes from its schema
        return _LIST, _plan(child)
    child_plan = _plan(child) if child is not None else None
    if child_plan is not None and child_plan.is_struct:
        return _STRUCT, child_plan
    return _MAP, child


def _sorted_level(fields: dict[str, dict[str, JSON]], always: bool) -> dict[str, JSON] | None:
    if not fields:
        return None if always else {}
    out: dict[str, JSON] = {} if always else {".": {}}
    out.update(sorted(fields.items()) if len(fields) > 1 else fields)  # "f:": as text
    return out


def _added_fields(value: dict[str, JSON], node: TypeNode | None,
                  is_custom: bool) -> dict[str, dict[str, JSON]]:
    """The emitted ``FieldsV1`` of each field of ``value`` that adds something, by its
    element, in ``value``'s order (``_compare_maps`` of nothing and ``value``)."""
    out: dict[str, dict[str, JSON]] = {}
    if node is None:
        for key, child_value in value.items():
            if child_value is not None:  # null is absent: nothing added
                emitted = _added_value(child_value, None, None, False, is_custom)
                if emitted is not None:
                    out["f:" + key] = emitted
        return out
    plan = _plan(node)
    fields = plan.custom if is_custom else plan.builtin
    for key, child_value in value.items():
        if type(child_value) in _SCALARS:  # what _added_value gives any scalar, at once
            out["f:" + key] = {}
        elif child_value is not None:
            child, always, kind = fields.get(key, plan.undeclared)
            emitted = _added_value(child_value, child, kind, always, is_custom)
            if emitted is not None:
                out["f:" + key] = emitted
    return out


_SCALARS = frozenset({str, int, float, bool})


def _added_value(value: JSON, node: TypeNode | None, kind: NodeKind | None, always: bool,
                 is_custom: bool) -> dict[str, JSON] | None:
    """The emitted ``FieldsV1`` of what ``value`` adds (None: nothing), as ``_compare``
    reports it: ``{}`` for a member leaf, ``"."`` first on a member with children."""
    if kind is None:  # deduced types (CR fields without schema): maps granular, lists atomic
        kind = "map" if isinstance(value, dict) else "atomic" if isinstance(value, list) \
            else "scalar"
    # the same dispatch as _compare: granular kinds walk by the value's shape
    if kind not in _GRANULAR:
        return {}
    if isinstance(value, dict):
        return _added_map(value, node, always, is_custom)
    if isinstance(value, list):
        return _added_list(value, _plan(node) if node is not None else None, kind, always,
                           is_custom)
    return {}


def _added_list(value: list[JSON], plan: _CreatePlan | None, kind: NodeKind, always: bool,
                is_custom: bool) -> dict[str, JSON] | None:
    children: dict[str, dict[str, JSON]] = {}
    if plan is not None:
        node, items, items_kind = plan.node, plan.items, plan.items_kind
        items_plan = plan.items_plan
        if items_plan is None and items is not None and items_kind == "struct":
            items_plan = plan.items_plan = _plan(items)
        skipped: set[str] = set()
        for item in value:
            element = list_element(node, kind, item)
            if element in children or element in skipped:  # the first of a repeated key
                continue
            if item is None:  # null: absent, but its key is taken
                skipped.add(element)
                continue
            emitted = (_added_struct(item, items_plan, False, is_custom)
                       if items_plan is not None and type(item) is dict else
                       _added_value(item, items, items_kind, False, is_custom))
            if emitted is not None:
                children[element] = emitted
    if not children:
        return None if always else {}
    out: dict[str, JSON] = {} if always else {".": {}}
    for element in sorted(children, key=element_order) if len(children) > 1 else children:
        out[element] = children[element]
    return out


_GRANULAR = frozenset({"struct", "map", "map-list", "set-list"})


# --- FieldsV1 -----------------------------------------------------------------------------------

def fields_v1(paths: Iterable[Path]) -> dict[str, JSON]:
    """The ``FieldsV1`` JSON of a field set: nested ``{element: {...}}``, ``".": {}`` marking a
    member that also has children, keys in structured-merge-diff's element order."""
    tree: dict[str, JSON] = {}
    for path in paths:
        level = tree
        for element in path:
            level = level.setdefault(element, {})
        level["."] = {}
    return _emit(tree, top=True)


def _emit(tree: dict[str, JSON], *, top: bool = False) -> dict[str, JSON]:
    out: dict[str, JSON] = {}
    children = {k: v for k, v in tree.items() if k != "."}
    if "." in tree and children and not top:
        out["."] = {}
    for key in sorted(children, key=element_order) if len(children) > 1 else children:
        out[key] = _emit(children[key])
    return out


def parse_fields_v1(fields: JSON) -> FieldSet:
    """The field set of a ``FieldsV1`` JSON object; malformed input gives what could be read."""
    out: set[Path] = set()
    _parse(fields, (), out)
    return frozenset(out)


def _parse(fields: JSON, path: Path, out: set[Path]) -> None:
    if not isinstance(fields, dict):
        return
    if path and (not fields or "." in fields):
        out.add(path)
    for key, child in fields.items():
        if key != ".":
            _parse(child, (*path, key), out)


_ELEMENT_RANK = {"f": 0, "k": 1, "v": 2, "i": 3}
ELEMENT_ORDER_CACHE_SIZE = 65536  # distinct path elements remembered; they repeat across writes


@lru_cache(maxsize=ELEMENT_ORDER_CACHE_SIZE)
def element_order(element: str) -> tuple[int, JSON]:
    """Sort key of a path element: fields, then keys, values, indexes (``PathElement.Compare``)."""
    prefix, _, text = element.partition(":")
    rank = _ELEMENT_RANK.get(prefix, 4)
    if prefix == "f":
        return rank, text
    if prefix == "i":
        return rank, (int(text) if text.isdigit() else 0,)
    try:
        value = json.loads(text)
    except ValueError:
        return rank, text
    if isinstance(value, dict):
        # Tagged like _value_order's kinds, so a map element compares with any other element
        # (only invalid objects mix them, but sorting must not raise on them).
        return rank, (5, tuple((k, _value_order(v)) for k, v in sorted(value.items())))
    return rank, _value_order(value)


def _value_order(value: JSON) -> tuple[int, JSON]:
    if isinstance(value, bool):
        return 1, int(value)
    if isinstance(value, int | float):
        return 2, value
    if isinstance(value, str):
        return 3, value
    return 4, _json(value)


# --- printing and subtrees ------------------------------------------------------------------------

def path_text(path: Path) -> str:
    """``fieldpath.Path.String``: ``.spec.containers[name="web"].image``, ``[=value]``, ``[0]``."""
    parts = []
    for element in path:
        prefix, _, text = element.partition(":")
        if prefix == "f":
            parts.append("." + text)
        elif prefix == "k":
            key: Mapping[str, JSON] = json.loads(text)
            parts.append("[" + ",".join(f"{k}={_json(v)}" for k, v in sorted(key.items())) + "]")
        elif prefix == "v":
            parts.append(f"[={text}]")
        else:
            parts.append(f"[{text}]")
    return "".join(parts)


def without_subtree(paths: Iterable[Path], prefix: Path) -> FieldSet:
    """``paths`` minus ``prefix`` and everything below it (``Set.RecursiveDifference``)."""
    return frozenset(p for p in paths if p[:len(prefix)] != prefix)
