"""A validation rule's ``fieldPath``: kube's ``ValidFieldPath`` (``schema/cel/validation.go``).

The path names a field below the rule's node in JSONPath-like steps, ``.name`` or
``['quoted name']`` (no list indexes); it is valid only if every step is a declared property or
a key of ``additionalProperties``. Its normalized form (``field.Path`` text) is appended to the
error path of a failing rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubewire.json_types import JSON

_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
            "'": "'", "\\": "\\"}


def _unescape_single_quote(text: str) -> str | None:
    """``unescapeSingleQuote``; None on an escape kube rejects."""
    out: list[str] = []
    pos = 0
    while pos < len(text):
        if text[pos] == "\\" and pos + 1 < len(text):
            replacement = _ESCAPES.get(text[pos + 1])
            if replacement is None:
                return None
            out.append(replacement)
            pos += 2
        else:
            out.append(text[pos])
            pos += 1
    return "".join(out)


def _quoted_end(data: str) -> int | None:
    return next((i for i in range(1, len(data)) if data[i] == "'" and data[i - 1] != "\\"), None)


def tokens(path: str) -> list[str]:
    """The scanner of ``ValidFieldPath``: delimiters ``.[]`` alone, quoted strings whole."""
    out: list[str] = []
    data = path
    while data:
        if data[0] == "'":
            end = _quoted_end(data)
            cut = len(data) if end is None else end + 1
        else:
            cut = next((i for i, c in enumerate(data) if c in ".[]"), len(data)) or 1
        out.append(data[:cut])
        data = data[cut:]
    return out


class _Walker:
    def __init__(self, schema: Mapping[str, JSON]) -> None:
        self.node: Any = schema
        self.text = ""

    def step(self, name: str) -> bool:
        """``appendToPath``: a declared property (``.name``) or a map key (``[name]``)."""
        node = self.node
        if not isinstance(node, Mapping):
            return False
        if node.get("properties") is not None:
            if name not in node["properties"]:
                return False
            self.text += ("." if self.text else "") + name
            self.node = node["properties"][name]
            return True
        if node.get("additionalProperties") is not None:
            self.text += f"[{name}]"
            self.node = node["additionalProperties"]
            return True
        return False


def valid_field_path(path: str, schema: Mapping[str, JSON]) -> str | None:
    """The normalized path (``field.Path`` text), or None when kube calls it invalid."""
    walker = _Walker(schema)
    parts = tokens(path)
    pos = 0
    while pos < len(parts):
        tok = parts[pos]
        if tok == "[" and pos + 2 < len(parts):
            quoted = parts[pos + 1]
            if len(quoted) < 2 or quoted[0] != "'" or quoted[-1] != "'":
                return None
            name = _unescape_single_quote(quoted[1:-1])
            if name is None or not walker.step(name) or parts[pos + 2] != "]":
                return None
            pos += 3
        elif tok == "." and pos + 1 < len(parts):
            if not walker.step(parts[pos + 1]):
                return None
            pos += 2
        else:
            return None
    return walker.text


__all__ = ["tokens", "valid_field_path"]
