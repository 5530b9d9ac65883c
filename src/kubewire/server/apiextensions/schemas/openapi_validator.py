"""kube-openapi's schema validator over ``Structural`` trees, with its messages and error order.

A port of ``KO:pkg/validation/validate`` (``schema.go`` ``SchemaValidator.Validate``, ``type.go``,
``schema_props.go``, ``values.go``, ``slice_validator.go``, ``object_validator.go``,
``formats.go``, ``result.go``) and of the conversion of its result to field errors
(``AE:pkg/apiserver/validation/validation.go`` ``kubeOpenAPIResultToFieldErrors``):

- each node runs, in this order and each only where it applies, the type check, the junctors
  (``anyOf``, ``oneOf``, ``allOf``, ``not``), the string checks (``maxLength``, ``minLength``,
  ``pattern``: the first failing one), the format, the number checks (``multipleOf``,
  ``minimum``, ``maximum``), the array checks (items first, then ``minItems``, ``maxItems``),
  ``enum``, and the object checks (``min/maxProperties``, ``additionalProperties``, properties,
  ``required``). A failed type check does not stop the others (kube-openapi runs them all).
- ``null`` gets only the type check (an error unless ``nullable``) and the enum check (which
  ``null`` always fails). A key present with ``null`` satisfies ``required``.
- a result's errors are unique by message; ``anyOf``/``oneOf`` report the failing branch with
  the most passed checks (``MatchCount``), which is counted here as kube-openapi counts it.
- integers are checked against ``minimum``/``maximum``/``multipleOf`` truncated to integers
  (``MinimumNativeType`` and friends), so ``minimum: 1.5`` lets 1 pass, as in kube.
- ``crd_form``: the schema as kube builds it from the CRD (``NewSchemaValidator``:
  ``x-kubernetes-int-or-string`` is ``type: [integer, string]``, unsupported formats dropped);
  without it, as ``Structural.ToKubeOpenAPI`` builds it (CRD-time default validation).

Field paths: an error named ``spec.x`` lands at ``<prefix>.spec.x`` (``spec.x`` without a
prefix, kube's nil path); junctor errors and errors named by the root land at the prefix itself,
``<nil>`` without one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kubewire.go_text import go_float, go_quote
from kubewire.json_types import JSON
from kubewire.schema.validate import json_type
from kubewire.server.apiextensions.schemas import formats
from kubewire.server.apiextensions.schemas.go_values import field_value, go_equal, json_key
from kubewire.server.apiextensions.schemas.ratcheting import ABSENT, old_field, old_item, unchanged
from kubewire.server.apiextensions.schemas.structural import Structural
from kubewire.status import FieldError

NIL_PATH = "<nil>"  # how apimachinery prints a nil *field.Path
_TYPE_META = frozenset({"apiVersion", "kind"})

# errors.go codes kubeOpenAPIResultToFieldErrors tells apart; COMPOSITE marks the plain
# errors.New ones (junctors), which it reports at the prefix with an empty value.
COMPOSITE, INVALID_TYPE, REQUIRED, TOO_LONG, ENUM, MAX_ITEMS, TOO_MANY_PROPS, OTHER = range(8)
_NO_VALUE = object()


@dataclass(slots=True)
class _Error:
    code: int
    name: str
    value: JSON
    message: str
    valid: JSON = None
    values: tuple[JSON, ...] = ()


class _Result:
    """``validate.Result``: errors unique by message, and the match count."""

    __slots__ = ("errors", "match")

    def __init__(self) -> None:
        self.errors: list[_Error] = []
        self.match = 0

    def add(self, error: _Error) -> None:
        if all(e.message != error.message for e in self.errors):
            self.errors.append(error)

    def merge(self, other: _Result) -> None:
        for error in other.errors:
            self.add(error)
        self.match += other.match


def _is_json_integer(value: float) -> bool:
    """``swag.IsFloat64AJSONInteger``."""
    if not math.isfinite(value) or not -(2**53) + 1 <= value <= 2**53 - 1:
        return False
    if value.is_integer():
        return True
    g = float(int(value))
    diff = abs(value - g)
    return diff / min(abs(value) + abs(g), 1.7976931348623157e308) < 1e-9


def _type_error(path: str, type_name: str, value: str) -> _Error:
    return _Error(INVALID_TYPE, path, value,
                  f"{path} in body must be of type {type_name}: {go_quote(value)}")


def _check_type(types: tuple[str, ...], fmt: str, data: JSON, path: str) -> _Error | None:
    """``typeValidator.Validate`` for a non-null value."""
    sch_type, sch_format = json_type(data)
    float_int = sch_type == "number" and "integer" in types and _is_json_integer(data)
    int_float = sch_type == "integer" and "number" in types
    text_like = isinstance(data, str | list)
    if not text_like and fmt and not (sch_type in types or sch_format == fmt or float_int
                                      or int_float):
        return _type_error(path, fmt, sch_format)
    if fmt and text_like and "number" not in types and "integer" not in types:
        return None
    if not (sch_type in types or float_int or int_float):
        return _type_error(path, ",".join(types), sch_type)
    return None


def _enum_matches(data: JSON, candidate: JSON) -> bool:
    """``basicCommonValidator``: ``data`` converted to the enum value's Go type, DeepEqual."""
    if candidate is None or data is None:
        return False
    if isinstance(candidate, bool) or isinstance(data, bool):
        return type(candidate) is type(data) and candidate == data
    if isinstance(candidate, str):
        if isinstance(data, str):
            return data == candidate
        if isinstance(data, int):  # Go converts an integer to the string of that rune
            rune = chr(data) if 0 <= data <= 0x10FFFF and not 0xD800 <= data <= 0xDFFF \
                else "\ufffd"
            return rune == candidate
        return False
    if isinstance(candidate, int):
        if isinstance(data, int | float) and math.isfinite(data):
            return int(data) == candidate
        return False
    if isinstance(candidate, float):
        return isinstance(data, int | float) and float(data) == candidate
    return go_equal(data, candidate)


def _enum_error(path: str, data: JSON, enum: tuple[JSON, ...]) -> _Error:
    values = " ".join(_go_print(v) for v in enum)
    return _Error(ENUM, path, data, f"{path} in body should be one of [{values}]", values=enum)


def _go_print(value: JSON) -> str:
    """``%v`` of a decoded JSON value (only used inside messages kube never shows whole)."""
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "<nil>"
    return str(value)


# --- numbers -----------------------------------------------------------------------------------

def _num(value: float | int) -> str:
    return go_float(value) if isinstance(value, float) else str(value)


def _bound_error(path: str, data: float | int, bound: float | int, exclusive: bool,
                 upper: bool) -> _Error:
    if upper:
        relation = "less than" if exclusive else "less than or equal to"
    else:
        relation = "greater than" if exclusive else "greater than or equal to"
    return _Error(OTHER, path, data, f"{path} in body should be {relation} {_num(bound)}")


def _number_errors(s: Structural, data: float | int, path: str, result: _Result) -> None:
    """``numberValidator.Validate``: multipleOf, minimum, maximum (native integer forms for
    integer data: the bound truncated to an int64)."""
    is_int = isinstance(data, int)
    if s.multiple_of is not None:
        factor: float | int = int(s.multiple_of) if is_int else s.multiple_of
        if factor <= 0:
            result.add(_Error(OTHER, path, factor, f"factor MultipleOf declared for {path} must "
                                                   f"be positive: {_num(factor)}"))
        else:
            if is_int:
                ok = data % factor == 0
            else:
                mult = (1 / factor * data) if factor < 1 else data / factor
                ok = _is_json_integer(mult)
            if not ok:
                result.add(_Error(OTHER, path, data,
                                  f"{path} in body should be a multiple of {_num(factor)}"))
    if s.minimum is not None:
        low: float | int = int(s.minimum) if is_int else s.minimum
        if data < low or (s.exclusive_minimum and data <= low):
            result.add(_bound_error(path, data, low, s.exclusive_minimum, False))
    if s.maximum is not None:
        high: float | int = int(s.maximum) if is_int else s.maximum
        if data > high or (s.exclusive_maximum and data >= high):
            result.add(_bound_error(path, data, high, s.exclusive_maximum, True))


# --- the walk ----------------------------------------------------------------------------------

def validate_node(s: Structural, data: JSON, path: str, crd_form: bool,
                  old: JSON = ABSENT) -> _Result:
    """``SchemaValidator.Validate`` of ``data`` at kube-openapi path ``path``.

    ``old``: the correlated old value on an update with ratcheting (``ratchetingValueValidator``):
    a node equal to it reports no error, and its fields and map-list items are validated
    against their own old values. Junctor branches are validated without ratcheting.
    """
    result = _node_result(s, data, path, crd_form, old)
    if result.errors and old is not ABSENT and unchanged(s, data, old):
        return _Result()  # kube keeps them as warnings, which nobody reads
    return result


def _node_result(s: Structural, data: JSON, path: str, crd_form: bool, old: JSON) -> _Result:
    types, fmt = _types_and_format(s, crd_form)
    result = _Result()
    if data is None:
        return _null_result(s, types, path, result)
    if types or fmt:
        _type_result(s, data, path, crd_form, result)
    if s.any_of or s.one_of or s.all_of or s.not_ is not None:
        result.merge(_junctors(s, data, path, crd_form))
    else:
        result.match += 1
    result.match += 1
    if isinstance(data, str):
        _string_errors(s, data, path, fmt if crd_form or formats.known(fmt) else "", result)
    elif isinstance(data, int | float) and not isinstance(data, bool):
        if s.multiple_of is not None or s.minimum is not None or s.maximum is not None:
            _number_errors(s, data, path, result)
        result.match += 2
    elif isinstance(data, list):
        result.merge(_array_errors(s, data, path, crd_form, old))
        result.match += 2
    if s.enum is not None and not any(_enum_matches(data, v) for v in s.enum):
        result.add(_enum_error(path, data, s.enum))
    result.match += 1
    if isinstance(data, dict):
        result.merge(_object_errors(s, data, path, crd_form, old))
        result.match += 1
    result.match += 1
    return result


def _types_and_format(s: Structural, crd_form: bool) -> tuple[tuple[str, ...], str]:
    """The node's type list and format as kube-openapi sees them in either form."""
    if crd_form:
        return s.crd_types, s.crd_format
    return ((s.type,) if s.type else ()), s.format


def _type_result(s: Structural, data: JSON, path: str, crd_form: bool, result: _Result) -> None:
    """The type validator's part (a passing check counts one match more)."""
    if crd_form and type(data) in s.crd_plain:
        error = None
    else:
        types, fmt = _types_and_format(s, crd_form)
        error = _check_type(types, fmt, data, path)
    if error is None:
        result.match += 1
    else:
        result.add(error)
    result.match += 1


def _null_result(s: Structural, types: tuple[str, ...], path: str, result: _Result) -> _Result:
    """``null``: only the type validator and the enum (which null always fails)."""
    if types and "null" not in types and not s.nullable:
        result.add(_type_error(path, ",".join(types), "null"))
    else:
        result.match += 1
    if s.enum is not None:
        result.add(_enum_error(path, None, s.enum))
    return result


def _string_errors(s: Structural, data: str, path: str, fmt: str, result: _Result) -> None:
    """The string validator (its first failing check), then the format validator (``fmt``: a
    format the registry knows, else "")."""
    _length_and_pattern(s, data, path, result)
    result.match += 1
    if fmt:
        if not formats.check(fmt, data):
            result.add(_type_error(path, fmt, data))
        result.match += 1


def _length_and_pattern(s: Structural, data: str, path: str, result: _Result) -> None:
    if s.max_length is not None and len(data) > s.max_length:
        result.add(_Error(TOO_LONG, path, data,
                          f"{path} in body should be at most {s.max_length} chars long",
                          valid=s.max_length))
    elif s.min_length is not None and len(data) < s.min_length:
        result.add(_Error(OTHER, path, data,
                          f"{path} in body should be at least {s.min_length} chars long"))
    elif s.pattern_search is not None and s.pattern_search(data) is None:
        result.add(_Error(OTHER, path, data, f"{path} in body should match '{s.pattern}'"))


def _array_errors(s: Structural, data: list[JSON], path: str, crd_form: bool,
                  old: JSON) -> _Result:
    result = _Result()
    if s.items is not None:
        for i, item in enumerate(data):
            old_value = ABSENT if old is ABSENT else old_item(s, old, item)
            result.merge(validate_node(s.items, item, f"{path}[{i}]", crd_form, old_value))
    size = len(data)
    if s.min_items is not None and size < s.min_items:
        result.add(_Error(OTHER, path, size,
                          f"{path} in body should have at least {s.min_items} items"))
    if s.max_items is not None and size > s.max_items:
        result.add(_Error(MAX_ITEMS, path, size,
                          f"{path} in body should have at most {s.max_items} items",
                          valid=s.max_items))
    if s.unique_items and len({json_key(v) for v in data}) < size:
        result.add(_Error(OTHER, path, None, f"{path} in body shouldn't contain duplicates"))
    return result


def _object_errors(s: Structural, data: dict[str, JSON], path: str, crd_form: bool,
                   old: JSON) -> _Result:
    result = _Result()
    size = len(data)
    if s.min_properties is not None and size < s.min_properties:
        result.add(_Error(OTHER, path, size,
                          f"{path} in body should have at least {s.min_properties} properties"))
    if s.max_properties is not None and size > s.max_properties:
        result.add(_Error(TOO_MANY_PROPS, path, size,
                          f"{path} in body should have at most {s.max_properties} properties",
                          valid=s.max_properties))
    result.merge(_fields(s, data, path, crd_form, old))
    for key in s.required:
        if key not in data:
            result.add(_Error(REQUIRED, f"{path}.{key}", None, f"{path}.{key} in body is required"))
    return result


def _fields(s: Structural, data: dict[str, JSON], path: str, crd_form: bool,
            old: JSON) -> _Result:
    result = _Result()
    props = s.properties
    additional = s.additional_properties
    if additional is False:
        for key in data:
            if key not in props:
                result.add(_Error(OTHER, path, key,
                                  f"{path}.{key} in body is a forbidden property"))
    prefix = path + "." if path else ""
    ap_schema = additional if isinstance(additional, Structural) else None
    for key, value in data.items():
        prop = props.get(key)
        # SubPropertyValidator: the root's apiVersion and kind never ratchet
        old_value = ABSENT if old is ABSENT or (not path and key in _TYPE_META) \
            else old_field(s, old, key)
        if prop is not None:
            result.merge(validate_node(prop, value, prefix + key, crd_form, old_value))
        elif ap_schema is not None:
            result.merge(validate_node(ap_schema, value, f"{path}.{key}", crd_form, old_value))
    return result


def _composite(message: str) -> _Error:
    return _Error(COMPOSITE, "", None, message)


def _junctors(s: Structural, data: JSON, path: str, crd_form: bool) -> _Result:
    """``schemaPropsValidator.Validate``: anyOf, oneOf, allOf, not."""
    main = _Result()
    if s.any_of:
        _any_of(s.any_of, data, path, crd_form, main)
    if s.one_of:
        _one_of(s.one_of, data, path, crd_form, main)
    if s.all_of:
        validated = 0
        for branch in s.all_of:
            r = validate_node(branch, data, path, crd_form)
            validated += not r.errors
            main.merge(r)
        if validated != len(s.all_of):
            extra = ". None validated" if validated == 0 else ""
            main.add(_composite(f"{go_quote(path)} must validate all the schemas (allOf){extra}"))
    if s.not_ is not None and not validate_node(s.not_, data, path, crd_form).errors:
        main.add(_composite(f"{go_quote(path)} must not validate the schema (not)"))
    main.match += 1
    return main


def _any_of(branches: tuple[Structural, ...], data: JSON, path: str, crd_form: bool,
            main: _Result) -> None:
    best: _Result | None = None
    for branch in branches:
        r = validate_node(branch, data, path, crd_form)
        if not r.errors:  # the first success: its result, no error
            main.merge(r)
            return
        if best is None or r.match > best.match:
            best = r
    main.add(_composite(f"{go_quote(path)} must validate at least one schema (anyOf)"))
    if best is not None:
        main.merge(best)


def _one_of(branches: tuple[Structural, ...], data: JSON, path: str, crd_form: bool,
            main: _Result) -> None:
    best: _Result | None = None
    first_success: _Result | None = None
    validated = 0
    for branch in branches:
        r = validate_node(branch, data, path, crd_form)
        if not r.errors:
            validated += 1
            best = None
            first_success = first_success or r
        elif validated == 0 and (best is None or r.match > best.match):
            best = r
    if validated == 1 and first_success is not None:
        main.merge(first_success)
        return
    extra = "Found none valid" if validated == 0 else f"Found {validated} valid alternatives"
    main.add(_composite(f"{go_quote(path)} must validate one and only one schema (oneOf). {extra}"))
    if best is not None:
        main.merge(best)


# --- kubeOpenAPIResultToFieldErrors ------------------------------------------------------------

def to_field_errors(result: _Result, prefix: str | None) -> list[FieldError]:
    """The field errors kube makes of ``result``; ``prefix`` None is kube's nil path."""
    out: list[FieldError] = []
    base = NIL_PATH if prefix is None else prefix
    for e in result.errors:
        if e.code == COMPOSITE:
            out.append(FieldError("FieldValueInvalid", base, "", e.message))
            continue
        path = base
        if e.name and e.name != ".":
            name = e.name[1:] if e.name.startswith(".") else e.name
            path = name if prefix is None else f"{prefix}.{name}"
        if e.code == REQUIRED:
            out.append(FieldError("FieldValueRequired", path))
        elif e.code == ENUM:
            supported = ", ".join(go_quote(v if isinstance(v, str) else json_key(v))
                                  for v in e.values)
            out.append(FieldError("FieldValueNotSupported", path, field_value(e.value),
                                  "supported values: " + supported))
        elif e.code == TOO_LONG:
            unit = "byte" if e.valid == 1 else "bytes"  # field.TooLong
            out.append(FieldError("FieldValueTooLong", path,
                                  detail=f"may not be more than {e.valid} {unit}"))
        elif e.code in (MAX_ITEMS, TOO_MANY_PROPS):
            # TooMany prints the count; status.FieldError omits values of this type
            out.append(FieldError("FieldValueTooMany", path,
                                  detail=f"{e.value}: must have at most {e.valid} items"))
        elif e.code == INVALID_TYPE:
            out.append(FieldError("FieldValueTypeInvalid", path, field_value(e.value), e.message))
        else:
            value = "" if e.value is None else e.value
            out.append(FieldError("FieldValueInvalid", path, field_value(value), e.message))
    return out


def validate_value(schema: Structural, value: JSON, prefix: str | None = None,
                   crd_form: bool = True) -> list[FieldError]:
    """``ValidateCustomResource(prefix, value, <validator of schema>)``."""
    if is_valid(schema, value, crd_form):
        return []
    return to_field_errors(validate_node(schema, value, "", crd_form), prefix)


def validate_update(schema: Structural, value: JSON, old: JSON,
                    prefix: str | None = None) -> list[FieldError]:
    """``ValidateCustomResourceUpdate`` with ratcheting: what ``validate_value`` says, less
    the errors of nodes equal to their correlated ``old`` values."""
    if is_valid(schema, value, True):
        return []
    return to_field_errors(validate_node(schema, value, "", True, old), prefix)


# --- the fast path -----------------------------------------------------------------------------
# Whether ``validate_node`` would find no error, without building results: a node's result is
# empty exactly when each of its checks passes (junctors compose the same way), so valid objects,
# the common case, are walked once at this speed and only invalid ones get the full walk.

def is_valid(s: Structural, data: JSON, crd_form: bool = True) -> bool:
    """``not validate_node(s, data, ...).errors``."""
    kind = type(data)
    if data is None:
        types = s.crd_types if crd_form else ((s.type,) if s.type else ())
        return (not types or s.nullable or "null" in types) and s.enum is None
    if not (crd_form and kind in s.crd_plain):
        types = s.crd_types if crd_form else ((s.type,) if s.type else ())
        fmt = s.crd_format if crd_form else s.format
        if (types or fmt) and _check_type(types, fmt, data, "") is not None:
            return False
    if (s.any_of or s.one_of or s.all_of or s.not_ is not None) and \
            not _junctors_valid(s, data, crd_form):
        return False
    if not _kind_valid(s, data, kind, crd_form):
        return False
    return s.enum is None or any(_enum_matches(data, v) for v in s.enum)


def _kind_valid(s: Structural, data: JSON, kind: type, crd_form: bool) -> bool:
    """The object, string, array or number checks for ``data``'s kind."""
    if kind is dict:
        return _object_valid(s, data, crd_form)
    if kind is str:
        return _string_valid(s, data, crd_form)
    if kind is list:
        return _array_valid(s, data, crd_form)
    if (kind is int or kind is float) and (
            s.multiple_of is not None or s.minimum is not None or s.maximum is not None):
        probe = _Result()
        _number_errors(s, data, "", probe)
        return not probe.errors
    return True


def _junctors_valid(s: Structural, data: JSON, crd_form: bool) -> bool:
    if s.any_of and not any(is_valid(b, data, crd_form) for b in s.any_of):
        return False
    if s.one_of and sum(is_valid(b, data, crd_form) for b in s.one_of) != 1:
        return False
    if s.all_of and not all(is_valid(b, data, crd_form) for b in s.all_of):
        return False
    return s.not_ is None or not is_valid(s.not_, data, crd_form)


def _string_valid(s: Structural, data: str, crd_form: bool) -> bool:
    if s.max_length is not None and len(data) > s.max_length:
        return False
    if s.min_length is not None and len(data) < s.min_length:
        return False
    if s.pattern_search is not None and s.pattern_search(data) is None:
        return False
    fmt = s.crd_format if crd_form else s.format
    return not fmt or not (crd_form or formats.known(fmt)) or formats.check(fmt, data)


def _array_valid(s: Structural, data: list[JSON], crd_form: bool) -> bool:
    size = len(data)
    if (s.min_items is not None and size < s.min_items) or (
            s.max_items is not None and size > s.max_items):
        return False
    if s.unique_items and len({json_key(v) for v in data}) < size:
        return False
    items = s.items
    return items is None or all(is_valid(items, v, crd_form) for v in data)


def _object_valid(s: Structural, data: dict[str, JSON], crd_form: bool) -> bool:
    size = len(data)
    if (s.min_properties is not None and size < s.min_properties) or (
            s.max_properties is not None and size > s.max_properties):
        return False
    props = s.properties
    additional = s.additional_properties
    ap_schema = additional if isinstance(additional, Structural) else None
    for key, value in data.items():
        prop = props.get(key)
        if prop is not None:
            if not is_valid(prop, value, crd_form):
                return False
        elif additional is False or (ap_schema is not None
                                      and not is_valid(ap_schema, value, crd_form)):
            return False
    return all(key in data for key in s.required)


__all__ = ["NIL_PATH", "is_valid", "to_field_errors", "validate_node", "validate_update",
           "validate_value"]
