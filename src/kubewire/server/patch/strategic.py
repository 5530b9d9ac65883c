"""Strategic merge patch (``application/strategic-merge-patch+json``) as kube-apiserver v1.32 does.

A pure port of the apply half of apimachinery ``pkg/util/strategicpatch/patch.go``
(``StrategicMergeMapPatch``: ``mergeMap``, ``mergeSlice``, ``mergePatchIntoOriginal``), driven by
the schema's patch facts instead of Go struct tags. A stored object (dict) and the body (bytes)
in, a new dict out; neither input is mutated.

Semantics, quirks included:

- maps merge recursively and ``null`` deletes a key; a patch value for a missing key (or of
  another JSON type) is taken with its ``null`` members and ``$patch`` maps dropped;
- lists with patch strategy ``merge`` merge element-wise by the merge key, primitive ones are
  unioned; other lists (no strategy, unknown fields) are replaced. Without
  ``$setElementOrder``, patch elements keep patch order and new ones are placed *before* the
  server-only elements (``mergeSortedSlice``); with it, the listed order wins;
- ``$patch: replace|delete`` on maps, ``$patch: delete|replace`` on list elements,
  ``$retainKeys``, ``$setElementOrder/<f>`` and ``$deleteFromPrimitiveList/<f>`` (which also
  deletes from lists without a strategy);
- keys are processed in patch order (Go's map order is random).

Errors (``handlers/patch.go`` ``strategicPatchObject``, ``interpretStrategicMergePatchError``):
a body that is not JSON or not an object is 400 with the bare decoder text; the ``mergepatch``
format sentinels are 400; ``lists of lists are not supported`` is 422 with the generic text;
every other merge error kube answers as a plain Go error (500, no reason); these are the
client's mistakes, and kubewire never answers 500 to a client's mistake, so they are 400
BadRequest with kube's text as message (``map: map[...] does not contain declared merge key:
name``). Where Go itself panics (comparing two maps or lists as merge-key values, a list
starting with ``null``) kube answers 500; kubewire answers 400 with ``PANIC_MESSAGE``'s cause.
A body of ``null`` changes nothing.

Not here, as in ``patch.py``: decoding the result into the kind (kube's typed round trip drops the
``null``s a new list element may carry, and unknown-field warnings), and the list-type facts of
server-side apply: kube 1.32 reads only ``patchStrategy``/``patchMergeKey`` struct tags, so a
``x-kubernetes-list-type: map`` list without a patch strategy is replaced, and a merge list
marked ``atomic`` still merges.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from kubewire.go_print import go_sprint
from kubewire.go_text import go_json_kind, go_type_name
from kubewire.json_types import JSON
from kubewire.resources import Resource
from kubewire.schema import TypeNode, type_for
from kubewire.server.patch.json_patch import PATCH_REJECTED_MESSAGE, decode_patch_body
from kubewire.status import BadRequest, Invalid, StatusError

PANIC_MESSAGE = "This request caused apiserver to panic. Look in the logs for details."
# What kubewire says where kube would panic: the patch compares values Go cannot compare.
UNMERGEABLE_MESSAGE = "the patch uses a map or list where a merge key value is expected"
_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_DELETE_PREFIX = "$deleteFromPrimitiveList"
_ORDER_PREFIX = "$setElementOrder"
# mergepatch/errors.go sentinels
_BAD_PRIMITIVE_LIST = "invalid patch format of primitive list"
_BAD_RETAIN_KEYS = "invalid patch format of retainKeys"
_BAD_ORDER_LIST = "invalid patch format of setElementOrder list"
_LISTS_OF_LISTS = "lists of lists are not supported"
_MAP_TYPE = "map[string]interface {}"
_LIST_TYPE = "[]interface {}"
_DROP = object()  # removeDirectives: this value is itself a directive, drop its key


def apply_strategic_merge_patch(doc: dict[str, JSON], patch: bytes, resource: Resource, *,
                                owned: bool = False) -> dict[str, JSON]:
    """Apply a strategic merge patch body to ``doc`` by ``resource``'s schema; return a copy
    (``owned``: ``doc`` is the caller's own copy, merged into in place).

    Raises BadRequest (body not a JSON object, bad directive format, any other merge error with
    apimachinery's text) or Invalid (a list of lists).
    """
    body = _decode_patch(patch)
    try:
        schema: TypeNode | None = type_for(resource.api_version, resource.kind)
    except KeyError:
        schema = None
    if body is None:
        return doc if owned else copy.deepcopy(doc)
    try:
        return _merge_map(doc if owned else copy.deepcopy(doc), body, schema)
    except _GoPanic:
        raise BadRequest(UNMERGEABLE_MESSAGE) from None


def _decode_patch(patch: bytes) -> JSON:
    # strategicPatchObject: kjson.UnmarshalStrict into map[string]interface{}; NewBadRequest(err)
    try:
        body = decode_patch_body(patch)
    except BadRequest as exc:
        raise BadRequest(exc.message.removeprefix("error decoding patch: ")) from None
    if body is not None and not isinstance(body, dict):
        raise BadRequest(f"json: cannot unmarshal {go_json_kind(body)} into Go value of type "
                         f"{_MAP_TYPE}")
    return body


# --- errors and Go value semantics --------------------------------------------------------------

class _GoPanic(Exception):
    """Where apimachinery's Go code would panic (uncomparable ``==``, unhashable map key)."""


def _failure(text: str) -> StatusError:
    # kube: a plain error, so ErrorToAPIStatus answers 500; it is the client's mistake: 400.
    return BadRequest(text)


def _unprocessable(text: str) -> Invalid:
    # errors.NewGenericServerResponse(422, ...): generic message, empty details.
    err = Invalid(PATCH_REJECTED_MESSAGE, {})
    err.add_note(text)
    return err


def _no_merge_key(item: dict[str, JSON], key: str) -> StatusError:
    return _failure(f"map: {go_sprint(item)} does not contain declared merge key: {key}")


def _bad_arg_type(expected: str, actual: JSON) -> StatusError:
    return _failure(f"expected a {expected}, but received a {_go_type(actual)}")


def _go_type(value: JSON) -> str:
    """``reflect.TypeOf`` of a decoded JSON value, printed with ``%s``."""
    return "%!s(<nil>)" if value is None else go_type_name(value)


def _go_equal(a: JSON, b: JSON) -> bool:
    """Go interface ``==``: dynamic types must match; maps and lists panic."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict | list):
        raise _GoPanic
    return bool(a == b)


def _go_key(value: JSON) -> tuple[type, JSON]:
    """A hashable stand-in for a Go ``map[interface{}]`` key (maps and lists panic)."""
    if isinstance(value, dict | list):
        raise _GoPanic
    return type(value), value


# --- schema facts -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Field:
    """``LookupPatchMetadataFor*``: the field's schema, strategy (retainKeys stripped), key."""

    node: TypeNode | None = None
    strategy: str = ""
    merge_key: str = ""

    @property
    def element(self) -> TypeNode | None:
        node = self.node
        return node.items if node is not None and node.type == "array" else None


def _lookup(node: TypeNode | None, key: str) -> _Field:
    # Fields outside the schema merge as plain JSON (kube would fail the struct lookup).
    child = node.child(key) if node is not None else None
    if child is None:
        return _Field()
    meta = child.patch_meta
    strategies = [s for s in meta.patch_strategy.split(",") if s and s != "retainKeys"]
    return _Field(child, strategies[0] if strategies else "", meta.patch_merge_key)


def _go_kind_name(node: TypeNode | None) -> str:
    """``reflect.Kind`` name of a Go element type, for the no-merge-key error."""
    if node is None or node.type == "any":
        return "interface"
    if node.type == "object":
        return "map" if node.values is not None and not node.properties else "struct"
    return {"integer": "int64", "number": "float64", "boolean": "bool"}.get(node.type, "string")


# --- maps ---------------------------------------------------------------------------------------

def _merge_map(original: dict[str, JSON], patch: dict[str, JSON],
               node: TypeNode | None) -> dict[str, JSON]:
    """patch.go ``mergeMap`` (MergeParallelList and IgnoreUnmatchedNulls both on)."""
    if _DIRECTIVE in patch:
        return _map_directive(patch[_DIRECTIVE], patch)
    _apply_retain_keys(original, patch)
    _merge_ordered_lists(original, patch, node)
    for key, value in patch.items():
        _merge_key(original, key, value, node)
    return original


def _map_directive(directive: JSON, patch: dict[str, JSON]) -> dict[str, JSON]:
    # handleDirectiveInMergeMap: "merge" is not accepted on maps.
    if directive == "replace":
        return {k: v for k, v in patch.items() if k != _DIRECTIVE}
    if directive == "delete":
        return {}
    raise _failure(f"unknown patch type: {go_sprint(directive, 's')} in map: {go_sprint(patch)}")


def _merge_key(original: dict[str, JSON], key: str, value: JSON, node: TypeNode | None) -> None:
    is_delete_list = key.startswith(_DELETE_PREFIX)
    if is_delete_list:
        key = _extract_key(key, _DELETE_PREFIX)
    if value is None:
        original.pop(key, None)
        return
    current = original.get(key, _DROP)
    if current is _DROP or type(current) is not type(value):
        if not is_delete_list:
            _take(original, key, value)
        return
    field = _lookup(node, key)
    if isinstance(current, dict):
        original[key] = value if field.strategy == "replace" else _merge_map(
            current, value, field.node)
    elif isinstance(current, list):
        original[key] = _merge_list_field(current, value, field, is_delete_list)
    else:
        original[key] = value


def _take(original: dict[str, JSON], key: str, value: JSON) -> None:
    # discardNullValuesFromPatch then removeDirectives (kubernetes#107705, #117568).
    kept = _without_directives(without_nulls(value))
    if kept is _DROP:
        original.pop(key, None)
    else:
        original[key] = kept


def without_nulls(value: JSON) -> JSON:
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def _without_directives(value: JSON) -> JSON:
    if isinstance(value, dict):
        if _DIRECTIVE in value:
            return _DROP
        pairs = ((k, _without_directives(v)) for k, v in value.items())
        return {k: v for k, v in pairs if v is not _DROP}
    if isinstance(value, list):
        return [v for v in map(_without_directives, value) if v is not _DROP]
    return value


def _extract_key(key: str, prefix: str) -> str:
    parts = key.split("/", 1)
    if len(parts) <= 1 or parts[0] != prefix:
        raise BadRequest(_BAD_PRIMITIVE_LIST if prefix == _DELETE_PREFIX else _BAD_ORDER_LIST)
    return parts[1]


def _apply_retain_keys(original: dict[str, JSON], patch: dict[str, JSON]) -> None:
    """``applyRetainKeysDirective``: clear keys of ``original`` missing from ``$retainKeys``."""
    if _RETAIN_KEYS not in patch:
        return
    keys = patch.pop(_RETAIN_KEYS)
    if not isinstance(keys, list):
        raise BadRequest(_BAD_RETAIN_KEYS)
    retained = {_go_key(k) for k in keys}
    for key, value in patch.items():
        if value is None or key.startswith((_DELETE_PREFIX, _ORDER_PREFIX)):
            continue
        if _go_key(key) not in retained:
            raise BadRequest(_BAD_RETAIN_KEYS)
    for key in [k for k in original if _go_key(k) not in retained]:
        del original[key]


# --- lists --------------------------------------------------------------------------------------

def _merge_ordered_lists(original: dict[str, JSON], patch: dict[str, JSON],
                         node: TypeNode | None) -> None:
    """``mergePatchIntoOriginal``: merge each ``$setElementOrder/<f>`` list and enforce order."""
    for directive in [k for k in patch if k.startswith(_ORDER_PREFIX)]:
        order = patch.pop(directive)
        if not isinstance(order, list):
            raise _bad_arg_type(_LIST_TYPE, order)
        name = _extract_key(directive, _ORDER_PREFIX)
        base, change = _list_at(original, name), _list_at(patch, name)
        field = _lookup(node, name)
        _check_order(change or [], order, field.merge_key)
        if base is not None and change is not None:
            merged = _merge_list_field(base, change, field, False)
        elif base is not None or change is not None:
            merged = base if base is not None else _without_directives(change)
        else:
            continue
        kind = _element_type(base or [], change or [])
        original[name] = _normalize(merged, order, base or [], field.merge_key, kind is dict)
        patch.pop(name, None)


def _list_at(parent: dict[str, JSON], name: str) -> list[JSON] | None:
    if name not in parent:
        return None
    value = parent[name]
    if not isinstance(value, list):
        raise _bad_arg_type(_LIST_TYPE, value)
    return value


def _check_order(items: list[JSON], order: list[JSON], key: str) -> None:
    """``validatePatchWithSetOrderList``: patch elements appear in the order list, in order."""
    if not items or not order:
        return
    kept = _split_deletes(items)[0] if key else items
    at_item = at_order = 0
    while at_item < len(kept) and at_order < len(order):
        item = kept[at_item]
        if isinstance(item, dict) and _DIRECTIVE in item:
            at_item += 1
            continue
        if _merge_key_equal(item, order[at_order], key):
            at_item += 1
        at_order += 1
    if at_item < len(kept):
        raise _failure(f"The order in patch list:\n{go_sprint(items)}\n doesn't match "
                       f"{_ORDER_PREFIX} list:\n{go_sprint(order)}\n")


def _merge_key_equal(left: JSON, right: JSON, key: str) -> bool:
    if not key:
        return _go_equal(left, right)
    for side in (left, right):
        if not isinstance(side, dict):
            raise _bad_arg_type(_MAP_TYPE, side)
    for side in (left, right):
        if key not in side:
            raise _no_merge_key(side, key)
    return _go_equal(left[key], right[key])


def _split_deletes(items: list[JSON]) -> tuple[list[JSON], list[JSON]]:
    """``extractToDeleteItems``: (kept, ``$patch: delete`` elements)."""
    kept: list[JSON] = []
    doomed: list[JSON] = []
    for item in items:
        if not isinstance(item, dict):
            raise _bad_arg_type(_MAP_TYPE, item)
        (doomed if item.get(_DIRECTIVE) == "delete" else kept).append(item)
    return kept, doomed


def _merge_list_field(current: list[JSON], value: list[JSON], field: _Field,
                      is_delete_list: bool) -> list[JSON]:
    # mergeSliceHandler: delete lists apply whatever the field's strategy.
    if field.strategy == "merge" or is_delete_list:
        return _merge_list(current, value, field, is_delete_list)
    return value


def _merge_list(original: list[JSON], patch: list[JSON], field: _Field,
                is_delete_list: bool) -> list[JSON]:
    """``mergeSlice``: union primitives, or merge maps by key; then enforce the order."""
    if not original and not patch:
        return original
    kind = _element_type(original, patch)
    key = field.merge_key
    if kind is not dict:
        if is_delete_list:
            doomed = {_go_key(v) for v in patch}
            return [v for v in original if _go_key(v) not in doomed]
        merged = _unique(original + patch)
    else:
        if not key:
            raise _failure("cannot merge lists without merge key for "
                           + _go_kind_name(field.element))
        original, patch = _apply_element_directives(original, patch, key)
        merged = _merge_elements(list(original), patch, key, field.element)
    return _normalize(merged, patch, original, key, kind is dict)


def _element_type(*lists: list[JSON]) -> type:
    """``sliceElementType``: the one JSON type of every element of ``lists``."""
    first: type | None = None
    for items in lists:
        for value in items:
            if first is None:
                if value is None:
                    raise _GoPanic  # reflect.TypeOf(nil).Kind()
                if isinstance(value, list):
                    raise _unprocessable(_LISTS_OF_LISTS)
                first = type(value)
            elif type(value) is not first:
                raise _failure("list element types are not identical: " + go_sprint(list(lists)))
    if first is None:
        raise _failure("no elements in any of the given slices")
    return first


def _unique(values: list[JSON]) -> list[JSON]:
    seen: set[tuple[type, JSON]] = set()
    out = []
    for value in values:
        if _go_key(value) not in seen:
            seen.add(_go_key(value))
            out.append(value)
    return out


def _apply_element_directives(original: list[JSON], patch: list[JSON],
                              key: str) -> tuple[list[JSON], list[JSON]]:
    """``mergeSliceWithSpecialElements``: apply ``$patch`` elements; return (original, rest)."""
    rest = []
    replace = False
    for item in patch:
        if _DIRECTIVE not in item:
            rest.append(item)
            continue
        directive = item[_DIRECTIVE]
        if directive == "delete":
            if key not in item:
                raise _no_merge_key(item, key)
            original = [e for e in original if not (key in e and _go_equal(e[key], item[key]))]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise _failure("merging lists cannot yet be specified in the patch")
        else:
            raise _failure(f"unknown patch type: {go_sprint(directive, 's')} in map: "
                           f"{go_sprint(item)}")
    return (rest, []) if replace else (original, rest)


def _merge_elements(original: list[JSON], patch: list[JSON], key: str,
                    element: TypeNode | None) -> list[JSON]:
    """``mergeSliceWithoutSpecialElements``: merge into the element with the same key, or add."""
    for item in patch:
        if key not in item:
            raise _no_merge_key(item, key)
        index = _find(original, key, item[key])
        if index is None:
            original.append(item)
        else:
            original[index] = _merge_map(original[index], item, element)
    return original


def _find(items: list[JSON], key: str, value: JSON) -> int | None:
    """``findMapInSliceBasedOnKeyValue``."""
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise _failure(f"value for key {index} is not a map.")
        if key in item and _go_equal(item[key], value):
            return index
    return None


# --- element order (normalizeElementOrder) -------------------------------------------------------

def _normalize(merged: list[JSON], order: list[JSON], server_order: list[JSON], key: str,
               is_map: bool) -> list[JSON]:
    """Items named in ``order`` follow it; the others keep ``server_order``; then interleave."""
    if key:
        named = [_named_in(item, order, key) for item in merged]
    else:
        present = {_go_key(v) for v in order}
        named = [_go_key(item) in present for item in merged]
    listed = [item for item, hit in zip(merged, named, strict=True) if hit]
    others = [item for item, hit in zip(merged, named, strict=True) if not hit]
    listed = _sort_like(listed, order, key, is_map)
    others = _sort_like(others, server_order, key, is_map)
    return _interleave(others, listed, server_order, key, is_map)


def _named_in(item: JSON, order: list[JSON], key: str) -> bool:
    # partitionMapsByPresentInList
    if not isinstance(item, dict):
        raise _bad_arg_type(_MAP_TYPE, item)
    if key not in item:
        raise _no_merge_key(item, key)
    return _find(order, key, item[key]) is not None


def _sort_like(items: list[JSON], order: list[JSON], key: str, is_map: bool) -> list[JSON]:
    """``normalizeSliceOrder``: stable sort by position in ``order``; deletions last."""
    doomed: list[JSON] = []
    if is_map:
        for item in (*items, *order):  # validateMergeKeyInLists
            if not isinstance(item, dict):
                raise _bad_arg_type(_MAP_TYPE, item)
            if key not in item:
                raise _no_merge_key(item, key)
        items, doomed = _split_deletes(items)
    pairs = [(_index(order, item, key, is_map), item) for item in items]
    if all(position >= 0 for position, _ in pairs):
        pairs.sort(key=lambda pair: pair[0])
    else:
        # sort.SliceStable's insertion sort: an element missing from `order` is "less".
        for start in range(1, len(pairs)):
            at = start
            while at > 0 and (pairs[at][0] < 0 or pairs[at - 1][0] < 0
                              or pairs[at][0] < pairs[at - 1][0]):
                pairs[at - 1], pairs[at] = pairs[at], pairs[at - 1]
                at -= 1
    return [item for _, item in pairs] + doomed


def _index(items: list[JSON], item: JSON, key: str, is_map: bool) -> int:
    """patch.go ``index``: position of ``item`` (by merge-key value for maps), or -1."""
    def value_of(entry: JSON) -> JSON:
        if not is_map:
            return entry
        return entry.get(key) if isinstance(entry, dict) else None

    wanted = value_of(item)
    for position, entry in enumerate(items):
        if _go_equal(wanted, value_of(entry)):
            return position
    return -1


def _interleave(server_only: list[JSON], listed: list[JSON], server_order: list[JSON],
                key: str, is_map: bool) -> list[JSON]:
    """``mergeSortedSlice``: a server-only item goes first only if the server ordered it so."""
    out: list[JSON] = []
    left = right = 0
    while left < len(server_only) or right < len(listed):
        take_left = right >= len(listed)
        if not take_left and left < len(server_only):
            li = _index(server_order, server_only[left], key, is_map)
            ri = _index(server_order, listed[right], key, is_map)
            take_left = 0 <= li < ri
        if take_left:
            out.append(server_only[left])
            left += 1
        else:
            out.append(listed[right])
            right += 1
    return out


__all__ = ["PANIC_MESSAGE", "UNMERGEABLE_MESSAGE", "apply_strategic_merge_patch", "without_nulls"]
