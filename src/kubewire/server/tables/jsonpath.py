"""Custom-resource printer columns: the JSONPath subset CRDs use, and kube's cell conversion.

Mirrors ``apiextensions-apiserver:pkg/registry/customresource/tableconvertor/tableconvertor.go``:
the path is evaluated with missing keys allowed, only the **first** result is used (so
``.status.addresses[*].value`` shows one address), ``string`` columns print it as client-go's
JSONPath printer does (lists and maps as compact JSON) and other types convert the JSON value
(``date`` becomes an age). Supported steps: ``.field``, ``[*]``, ``[N]`` and
``[?(@.a.b=="x")]`` / ``!=``; anything else yields no result (a null cell). Never raises.
"""

from __future__ import annotations

import re
from datetime import datetime

from kubewire.go_print import go_json
from kubewire.go_text import go_float as go_text_float
from kubewire.json_types import JSON
from kubewire.server.tables.cells import Cell, human_duration
from kubewire.times import parse_time_or_none

_STEP = re.compile(
    r"""\.([^.\[]+)"""  # .field
    r"""|\[\*\]|\[(-?\d+)\]"""  # [*] and [N]
    r"""|\[\?\(@\.([\w.]+)\s*(==|!=)\s*(?:"([^"]*)"|'([^']*)')\)\]""")  # [?(@.a=="x")]


def find_results(obj: JSON, path: str) -> list[JSON]:
    """Every value ``path`` selects in ``obj``, in document order; [] when unparsable."""
    values = [obj]
    pos = 0
    while pos < len(path):
        match = _STEP.match(path, pos)
        if match is None:
            return []
        values = _apply(match, values)
        pos = match.end()
    return values


def _apply(step: re.Match[str], values: list[JSON]) -> list[JSON]:
    field, index, key, op = step.group(1), step.group(2), step.group(3), step.group(4)
    if field is not None:
        return [v[field] for v in values if isinstance(v, dict) and field in v]
    lists = [v for v in values if isinstance(v, list)]
    if index is not None:
        i = int(index)
        return [v[i] for v in lists if -len(v) <= i < len(v)]
    if key is None:
        return [item for v in lists for item in v]
    literal = step.group(5) if step.group(5) is not None else step.group(6)
    return [item for v in lists for item in v
            if (_dig(item, key) == literal) is (op == "==")]


def _dig(value: JSON, dotted: str) -> JSON:
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def go_text(value: JSON) -> str | None:
    """client-go ``JSONPath.PrintResults`` of one value; None where Go fails (null).

    A map or a list prints as ``json.Marshal`` writes it (``go_print.go_json``: keys sorted,
    HTML characters, U+2028/U+2029 and invalid UTF-8 escaped, floats as ``floatEncoder``).
    """
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    return go_json(value)


def go_float(value: float) -> str:
    """Go's ``%v`` of a float64 (``kubewire.go_text.go_float``), except that negative zero
    prints ``0`` here as it always has."""
    return "0" if value == 0 else go_text_float(value)


def crd_cell(column_type: str, obj: JSON, path: str, now: datetime) -> Cell:
    """The cell of one ``additionalPrinterColumns`` entry (``cellForJSONValue``)."""
    results = find_results(obj, path)
    if not results:
        return None
    value = results[0]
    if column_type == "string":
        return go_text(value)
    if value is None:
        return None
    return _typed_cell(column_type, value, now)


def _typed_cell(column_type: str, value: JSON, now: datetime) -> Cell:
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    if column_type == "integer" and is_number:
        return int(value)
    if column_type == "number" and is_number:
        return float(value)
    if column_type == "boolean" and isinstance(value, bool):
        return value
    if column_type == "date" and isinstance(value, str):
        when = parse_time_or_none(value)
        return "<invalid>" if when is None else human_duration(now - when)
    return None
