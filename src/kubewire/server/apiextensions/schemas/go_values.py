"""Go's view of decoded JSON values, as apiextensions-apiserver's messages and comparisons see them.

A custom resource reaches kube as ``map[string]interface{}`` decoded by apimachinery's
``util/json`` (integral numbers ``int64``, others ``float64``), so:

- ``field_value``: what a ``field.Error`` prints for a bad value (``ErrorBody``: int64/float64/bool
  with ``%v``, strings with ``%q``, maps and slices with ``%#v``, nil as ``null``);
- ``sharp_v``: Go's ``%#v`` of such a value (``map[string]interface {}{"name":"a"}``);
- ``go_equal``: ``reflect.DeepEqual`` (an ``int64`` 1 is not the ``float64`` 1, ``true`` is not 1);
- ``scalar_key`` / ``json_key``: the identities ``listtype.validateListSet`` compares (Go interface
  equality for scalars, ``json.Marshal`` text for compound values).

Python's own ``==`` treats ``1 == 1.0 == True``; every comparison here keeps Go's types apart.
"""

from __future__ import annotations

from kubewire.go_print import go_json
from kubewire.go_text import GoLiteral, go_float, go_quote
from kubewire.json_copy import copy_json
from kubewire.json_types import JSON


def field_value(value: JSON) -> JSON:
    """``value`` as a ``FieldError`` value that prints as Go's ``ErrorBody`` does."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, str):
        quoted = go_quote(value)
        return value if quoted == '"' + value + '"' else GoLiteral(quoted)
    if isinstance(value, float):
        return GoLiteral(go_float(value))
    return GoLiteral(sharp_v(value))


def sharp_v(value: JSON) -> str:
    """Go's ``%#v`` of a decoded JSON value (map keys sorted, as fmt prints them)."""
    if value is None:
        return "interface {}(nil)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(sharp_v(v) for v in value) + "}"
    if isinstance(value, dict):
        items = ", ".join(f"{go_quote(k)}:{sharp_v(value[k])}" for k in sorted(value))
        return "map[string]interface {}{" + items + "}"
    return repr(value)


def go_equal(a: JSON, b: JSON) -> bool:
    """``reflect.DeepEqual`` of two decoded JSON values."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return len(a) == len(b) and all(k in b and go_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(go_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def scalar_key(value: JSON) -> tuple[type, JSON]:
    """A scalar's identity as a Go ``map[interface{}]`` key: its type and its value."""
    return type(value), value


def json_key(value: JSON) -> str:
    """``json.Marshal`` text of a decoded value (``go_print.go_json``: keys sorted, as Go
    writes maps; floats as ``floatEncoder``; strings as ``appendString`` escapes them)."""
    return go_json(value)


def deep_copy(value: JSON) -> JSON:
    """``runtime.DeepCopyJSONValue`` (``kubewire.json_copy``'s copy)."""
    return copy_json(value)


__all__ = ["deep_copy", "field_value", "go_equal", "json_key", "scalar_key", "sharp_v"]
