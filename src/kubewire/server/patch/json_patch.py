"""JSON patch (RFC 6902) and JSON merge patch (RFC 7386), applied as kube-apiserver applies them.

Pure functions: a stored object (dict) and the request body (bytes) in, a new dict out; the input
is never mutated. Errors are ``kubewire.status`` errors with kube-apiserver's exact Status:

- an unparseable body or one of the wrong JSON type: 400 BadRequest
  ``error decoding patch: <Go encoding/json error>`` (kube strict-decodes the body first under
  the default ``fieldValidation=Warn``; ``handlers/patch.go`` ``applyJSPatch``);
- a JSON patch of more than ``MAX_JSON_PATCH_OPERATIONS`` operations: 413;
- a JSON patch operation that does not apply (missing path, failed ``test``, bad index): 422
  Invalid with the generic ``PATCH_REJECTED_MESSAGE`` and empty details — kube drops the
  json-patch library's text (``errors.NewGenericServerResponse``). That text is kept as an
  exception note (``add_note``) for logs;
- a merge patch of ``null``: 400 ``Invalid JSON Patch`` (evanphx/json-patch ``ErrBadJSONPatch``).

Semantics follow the library kube vendors (``gopkg.in/evanphx/json-patch.v4``), quirks included:
``replace`` of a missing object member adds it, ``copy`` from a missing member copies ``null``,
array indexes accept a sign and negative values count from the end, ``add``/``remove`` on the
root path ``""`` fail while ``replace``/``test`` of ``""`` address the whole document; merge
patches drop ``null`` members (and ``null`` array items) from values they insert.

Not here: decoding the result into the kind (kube then answers 422 ``"" is invalid: patch: ...``
for a result that is not an object of the kind), unknown-field warnings, and the strategic merge
patch. ``apply_strategic_merge_patch(doc, patch, merge_info)`` belongs next to these two: it
reuses ``decode_patch_body`` (kube answers SMP decode errors 400 with the bare decoder text, no
``error decoding patch:`` prefix; ``handlers/patch.go`` ``strategicPatchObject``), ``_pruned`` and
``json_equal``, and adds merge keys and the ``$patch``/``$retainKeys``/``$setElementOrder``/
``$deleteFromPrimitiveList`` directives.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import msgspec

from kubewire.go_text import (
    go_json_error,
    go_json_kind,
    go_json_surrogates,
    go_quote,
    go_utf8,
)
from kubewire.json_types import JSON
from kubewire.server.wire.json_depth import too_deep
from kubewire.status import BadRequest, Invalid, RequestEntityTooLarge

MAX_JSON_PATCH_OPERATIONS = 10_000  # kube handlers/patch.go maxJSONPatchOperations
# kube's JSONPatchMaxCopyBytes (server/config.go, evanphx AccumulatedCopySizeLimit): the bytes
# "copy" operations of one patch may add; without it a few dozen copies of a map into itself
# double the object each time (exponential memory and time).
MAX_JSON_PATCH_COPY_BYTES = 3 * 1024 * 1024
PATCH_REJECTED_MESSAGE = "the server rejected our request due to an error in our request"
_MISSING = "missing value"  # evanphx ErrMissing
_BAD_INDEX = "invalid index referenced"  # evanphx ErrInvalidIndex
_ABSENT: Any = object()  # an operation without a "value" member (distinct from null)


def apply_json_patch(doc: dict[str, JSON], patch: bytes, *, owned: bool = False,
                     ) -> dict[str, JSON]:
    """Apply an RFC 6902 patch body to ``doc`` and return the patched copy (``owned``: ``doc``
    is the caller's own copy, patched in place; after an error it is partly patched).

    Raises BadRequest (body not a JSON array of operation objects), RequestEntityTooLarge (more
    than ``MAX_JSON_PATCH_OPERATIONS`` operations) or Invalid (an operation does not apply, or
    the result is not a JSON object).
    """
    ops = decode_patch_body(patch)
    _check_operations(ops)
    if ops is not None and len(ops) > MAX_JSON_PATCH_OPERATIONS:
        raise RequestEntityTooLarge(
            "Request entity too large: The allowed maximum operations in a JSON patch is "
            f"{MAX_JSON_PATCH_OPERATIONS}, got {len(ops)}")
    root: JSON = doc if owned else copy.deepcopy(doc)
    copied = [0]  # bytes added by copy operations so far
    for op in ops or ():
        try:
            if isinstance(op, dict) and op.get("op") == "copy":
                _check_copy_size(root, op, copied)
            root = _apply_operation(root, op or {})
        except _OperationError as exc:
            err = Invalid(PATCH_REJECTED_MESSAGE, {})
            err.add_note(str(exc))
            raise err from None
    if not isinstance(root, dict):
        raise _not_an_object(root)
    if too_deep(root):
        raise BadRequest("error decoding patch: exceeded max depth")
    return root


def _check_copy_size(root: JSON, op: dict[str, JSON], copied: list[int]) -> None:
    """evanphx ``AccumulatedCopySizeError`` once copies would add more than the limit."""
    source = op.get("from")
    found = _locate(root, source) if isinstance(source, str) else None
    if found is None:
        return  # the operation itself reports the missing source
    try:
        value = _get(*found)
    except Exception:
        return
    copied[0] += len(msgspec.json.encode(value))
    if copied[0] > MAX_JSON_PATCH_COPY_BYTES:
        raise _OperationError(
            "Unable to complete the copy, the accumulated size increase of copy is "
            f"{copied[0]}, exceeding the limit {MAX_JSON_PATCH_COPY_BYTES}")


def apply_merge_patch(doc: dict[str, JSON], patch: bytes, *, owned: bool = False,
                      ) -> dict[str, JSON]:
    """Apply an RFC 7386 merge patch body to ``doc`` and return the merged copy (``owned``:
    ``doc`` is the caller's own copy, merged into in place).

    ``null`` members delete, objects merge recursively, anything else replaces. Raises
    BadRequest when the body is not JSON, not an object, or ``null``.
    """
    body = decode_patch_body(patch)
    if body is None:
        raise BadRequest("Invalid JSON Patch")
    if not isinstance(body, dict):
        raise _type_error(body, "map[string]interface {}")
    return _merge_object(doc if owned else copy.deepcopy(doc), body)


def json_equal(a: JSON, b: JSON) -> bool:
    """Structural JSON equality as JSON text sees it: ``1``, ``1.0`` and ``true`` all differ."""
    if isinstance(a, dict):
        return (isinstance(b, dict) and a.keys() == b.keys()
                and all(json_equal(a[k], b[k]) for k in a))
    if isinstance(a, list):
        return (isinstance(b, list) and len(a) == len(b)
                and all(json_equal(x, y) for x, y in zip(a, b, strict=True)))
    return type(a) is type(b) and bool(a == b)


# --- decoding: Go encoding/json acceptance and error texts ---------------------------------------

def decode_patch_body(body: bytes) -> JSON:
    """Parse ``body`` as Go's encoding/json would, raising kube's 400 on a syntax error."""
    try:
        # Go reads invalid UTF-8 and unpaired surrogates as U+FFFD; NaN/Infinity are not JSON.
        value = _PATCH_DECODER.decode(go_json_surrogates(go_utf8(body)))
        if too_deep(value):
            raise RecursionError
        return value
    except RecursionError:
        raise BadRequest("error decoding patch: exceeded max depth") from None
    except ValueError:
        message = go_json_error(body)
    raise BadRequest(f"error decoding patch: {message}")


def _reject_constant(name: str) -> JSON:
    raise ValueError(name)


# ``json.loads`` with an argument builds a decoder per call: one, built once, does the same.
_PATCH_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _check_operations(ops: JSON) -> None:
    """kube's strict decode into ``[]jsonPatchOp``: the first Go type error, in document order."""
    if ops is None:
        return
    if not isinstance(ops, list):
        raise _type_error(ops, "[]handlers.jsonPatchOp")
    for op in ops:
        if op is None:
            continue
        if not isinstance(op, dict):
            raise _type_error(op, "handlers.jsonPatchOp")
        for key, value in op.items():
            if key in ("op", "path", "from") and value is not None and not isinstance(value, str):
                raise BadRequest("error decoding patch: json: cannot unmarshal "
                                 f"{go_json_kind(value)} into Go struct field jsonPatchOp.{key} "
                                 "of type string")


def _type_error(value: JSON, go_type: str) -> BadRequest:
    return BadRequest(f"error decoding patch: json: cannot unmarshal {go_json_kind(value)} "
                      f"into Go value of type {go_type}")


def _not_an_object(root: JSON) -> Invalid:
    # kube decodes the patched JSON into the kind; an array fails in the codec's kind sniffing
    # (handlers/patch.go applyPatchToCurrentObject: NewInvalid(GroupKind{}, "", patch: ...)).
    text = json.dumps(root, separators=(",", ":"), ensure_ascii=False)
    detail = ("couldn't get version/kind; json parse error: json: cannot unmarshal array into Go "
              'value of type struct { APIVersion string "json:\\"apiVersion,omitempty\\""; '
              'Kind string "json:\\"kind,omitempty\\"" }')
    body = f"Invalid value: {go_quote(text)}: {detail}"
    return Invalid(f' "" is invalid: patch: {body}',
                   {"causes": [{"reason": "FieldValueInvalid", "message": body,
                                "field": "patch"}]})


# --- RFC 6902 operations (evanphx/json-patch v4 patch.go) ----------------------------------------

class _OperationError(Exception):
    """An operation that does not apply; the text is evanphx/json-patch's."""


def _apply_operation(root: JSON, op: dict[str, JSON]) -> JSON:
    kind = op.get("op") if isinstance(op.get("op"), str) else "unknown"
    handler = _OPERATIONS.get(str(kind))
    if handler is None:
        raise _OperationError(f"Unexpected kind: {kind}")
    return handler(root, op)


def _member(op: dict[str, JSON], name: str) -> str | None:
    value = op.get(name)
    return value if isinstance(value, str) else None


def _require(op: dict[str, JSON], name: str, message: str) -> str:
    value = _member(op, name)
    if value is None:
        raise _OperationError(message)
    return value


def _locate(root: JSON, path: str) -> tuple[Any, str] | None:
    """evanphx ``findObject``: the parent container of ``path`` and the unescaped last token."""
    tokens = path.split("/")
    if len(tokens) < 2:
        return None
    node = root
    for token in tokens[1:-1]:
        try:
            node = _get(node, _unescape(token))
        except _OperationError:
            return None
        if not isinstance(node, dict | list):
            return None
    return node, _unescape(tokens[-1])


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _atoi(key: str) -> int:
    """Go ``strconv.Atoi``: optional sign, ASCII digits, 64-bit range."""
    digits = key[1:] if key[:1] in ("+", "-") else key
    if not digits or not all("0" <= c <= "9" for c in digits):
        raise _OperationError(f'strconv.Atoi: parsing "{key}": invalid syntax')
    value = int(key)
    if not -(2**63) <= value < 2**63:
        raise _OperationError(f'strconv.Atoi: parsing "{key}": value out of range')
    return value


def _bounded(idx: int, size: int) -> int:
    """An index into ``size`` slots; negative counts from the end (SupportNegativeIndices)."""
    if idx >= size or idx < -size:
        raise _OperationError(f"Unable to access invalid index: {idx}: {_BAD_INDEX}")
    return idx + size if idx < 0 else idx


def _get(container: Any, key: str) -> JSON:
    if isinstance(container, dict):
        return container.get(key)
    return container[_bounded(_atoi(key), len(container))]


def _add(container: Any, key: str, value: JSON) -> None:
    if isinstance(container, dict):
        container[key] = value
    elif key == "-":
        container.append(value)
    else:
        try:
            idx = _atoi(key)
        except _OperationError as exc:
            raise _OperationError(f"value was not a proper array index: '{key}': {exc}") from None
        container.insert(_bounded(idx, len(container) + 1), value)


def _remove(container: Any, key: str) -> None:
    if isinstance(container, list):
        del container[_bounded(_atoi(key), len(container))]
    elif key in container:
        del container[key]
    else:
        raise _OperationError(f"Unable to remove nonexistent key: {key}: {_MISSING}")


def _wrap(prefix: str, action: Callable[[], Any]) -> Any:
    try:
        return action()
    except _OperationError as exc:
        raise _OperationError(f"{prefix}: {exc}") from None


def _op_add(root: JSON, op: dict[str, JSON]) -> JSON:
    path = _require(op, "path", f"add operation failed to decode path: {_MISSING}")
    found = _locate(root, path)
    if found is None:
        raise _OperationError(f'add operation does not apply: doc is missing path: "{path}": '
                              f"{_MISSING}")
    _wrap(f"error in add for path: '{path}'", lambda: _add(*found, op.get("value")))
    return root


def _op_remove(root: JSON, op: dict[str, JSON]) -> JSON:
    path = _require(op, "path", f"remove operation failed to decode path: {_MISSING}")
    found = _locate(root, path)
    if found is None:
        raise _OperationError(f'remove operation does not apply: doc is missing path: "{path}": '
                              f"{_MISSING}")
    _wrap(f"error in remove for path: '{path}'", lambda: _remove(*found))
    return root


def _op_replace(root: JSON, op: dict[str, JSON]) -> JSON:
    path = _require(op, "path", "replace operation failed to decode path: operation missing "
                                f"path field: {_MISSING}")
    value = op.get("value", _ABSENT)
    if path == "":
        if not isinstance(value, dict | list):
            raise _OperationError("replace operation value must be object or array: %!w(<nil>)")
        return value
    found = _locate(root, path)
    if found is None:
        raise _OperationError(f"replace operation does not apply: doc is missing path: {path}: "
                              f"{_MISSING}")
    container, key = found
    new_value = None if value is _ABSENT else value
    if isinstance(container, dict):
        container[key] = new_value  # evanphx v4: a missing member is added, not refused
        return root
    try:
        container[_bounded(_atoi(key), len(container))] = new_value
    except _OperationError:
        raise _OperationError(f"replace operation does not apply: doc is missing key: {path}: "
                              f"{_MISSING}") from None
    return root


def _op_move(root: JSON, op: dict[str, JSON]) -> JSON:
    source = _require(op, "from", "move operation failed to decode from: operation, missing from "
                                  f"field: {_MISSING}")
    found = _locate(root, source)
    if found is None:
        raise _OperationError(f"move operation does not apply: doc is missing from path: {source}: "
                              f"{_MISSING}")
    value = _wrap(f"error in move for path: '{found[1]}'", lambda: _get(*found))
    _wrap(f"error in move for path: '{found[1]}'", lambda: _remove(*found))
    path = _require(op, "path", "move operation failed to decode path: operation missing path "
                                f"field: {_MISSING}")
    target = _locate(root, path)
    if target is None:
        raise _OperationError(f"move operation does not apply: doc is missing destination path: "
                              f"{path}: {_MISSING}")
    _wrap(f"error in move for path: '{path}'", lambda: _add(*target, value))
    return root


def _op_copy(root: JSON, op: dict[str, JSON]) -> JSON:
    source = _require(op, "from", "copy operation failed to decode from: operation, missing from "
                                  f"field: {_MISSING}")
    found = _locate(root, source)
    if found is None:
        raise _OperationError(f"copy operation does not apply: doc is missing from path: {source}: "
                              f"{_MISSING}")
    value = _wrap(f"error in copy for from: '{source}'", lambda: _get(*found))
    path = _require(op, "path", f"copy operation failed to decode path: {_MISSING}")
    target = _locate(root, path)
    if target is None:
        raise _OperationError(f"copy operation does not apply: doc is missing destination path: "
                              f"{path}: {_MISSING}")
    _wrap("error while adding value during copy", lambda: _add(*target, copy.deepcopy(value)))
    return root


def _op_test(root: JSON, op: dict[str, JSON]) -> JSON:
    path = _require(op, "path", "test operation failed to decode path: operation missing path "
                                f"field: {_MISSING}")
    expected = op.get("value", _ABSENT)
    failed = _OperationError(f"testing value {path} failed: test failed")
    if path == "":
        if expected is _ABSENT or not json_equal(root, expected):
            raise failed
        return root
    found = _locate(root, path)
    if found is None:
        raise _OperationError(f"test operation does not apply: is missing path: {path}: {_MISSING}")
    actual = _wrap(f"error in test for path: '{path}'", lambda: _get(*found))
    if actual is None:
        if expected is _ABSENT or expected is None:
            return root
        raise failed
    if expected is _ABSENT or not json_equal(actual, expected):
        raise failed
    return root


_OPERATIONS: dict[str, Callable[[JSON, dict[str, JSON]], JSON]] = {
    "add": _op_add, "remove": _op_remove, "replace": _op_replace,
    "move": _op_move, "copy": _op_copy, "test": _op_test,
}


# --- RFC 7386 merge (evanphx/json-patch v4 merge.go) ---------------------------------------------

def _merge_object(target: dict[str, JSON], patch: dict[str, JSON]) -> dict[str, JSON]:
    """``mergeDocs``: mutates ``target`` (a private copy) and returns it."""
    for key, value in patch.items():
        current = target.get(key)
        if value is None:
            target.pop(key, None)
        elif current is None:
            target[key] = _pruned(value)
        elif isinstance(current, dict) and isinstance(value, dict):
            _merge_object(current, value)
        elif isinstance(current, dict):
            target[key] = value  # evanphx merge(): a non-object patch value replaces unpruned
        else:
            target[key] = _pruned(value)
    return target


def _pruned(value: JSON) -> JSON:
    """``pruneNulls``: drop null members and null array items, recursively."""
    if isinstance(value, dict):
        return {k: _pruned(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_pruned(v) for v in value if v is not None]
    return value


__all__ = [
    "MAX_JSON_PATCH_OPERATIONS",
    "PATCH_REJECTED_MESSAGE",
    "apply_json_patch",
    "apply_merge_patch",
    "decode_patch_body",
    "json_equal",
]
