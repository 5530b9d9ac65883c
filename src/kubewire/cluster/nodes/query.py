"""The jq-like keys of kwok's Stage selectors, evaluated over plain JSON objects.

kwok's ``matchExpressions[].key`` is a jq expression (kwok compiles it with gojq). Stage files use
a small part of jq: paths (``.status.phase``, ``.metadata.ownerReferences.[].kind``,
``.metadata.annotations["x/y"]``), iteration (``.[]``), pipes and ``select(<path> == <literal>)``
(``.status.conditions.[] | select( .type == "Ready" ) | .status``). That part is written here by
hand rather than pulling in a jq implementation: an unsupported expression is refused when the
Stage is read (``QueryError``), never evaluated wrongly.

``evaluate(expr, obj)`` yields jq's output stream as a list (a missing field is ``None``, as jq's
``null``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Value = Any
Step = Callable[[Value], list[Value]]

_SELECT = re.compile(r"^select\s*\((.*)\)$", re.S)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class QueryError(ValueError):
    """An expression outside the supported part of jq."""


@dataclass(frozen=True, slots=True)
class Query:
    """A compiled expression: a pipeline of steps."""

    text: str
    steps: tuple[Step, ...]

    def __call__(self, obj: Value) -> list[Value]:
        values = [obj]
        for step in self.steps:
            values = [out for value in values for out in step(value)]
        return values


def compile_query(text: str) -> Query:
    """Compile ``text``; ``QueryError`` when it uses jq beyond paths, pipes and select(==)."""
    return Query(text, tuple(_segment(part.strip(), text) for part in _split(text, "|")))


def evaluate(text: str, obj: Value) -> list[Value]:
    return compile_query(text)(obj)


def _split(text: str, sep: str) -> list[str]:
    """Split at ``sep`` outside quotes, brackets and parentheses."""
    parts, depth, quote, start = [], 0, "", 0
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == sep and depth == 0 and text.startswith(sep, i) and (
                sep != "=" or text[i:i + 2] == "=="):
            parts.append(text[start:i])
            start = i + len(sep)
            i += len(sep)
            continue
        i += 1
    parts.append(text[start:])
    return parts


def _segment(part: str, whole: str) -> Step:
    found = _SELECT.match(part)
    if found:
        return _select(found.group(1).strip(), whole)
    return _path(part, whole)


def _select(condition: str, whole: str) -> Step:
    sides = condition.split("==")
    if len(sides) != 2:
        raise QueryError(f"unsupported select in {whole!r}: only select(<path> == <literal>)")
    path = _path(sides[0].strip(), whole)
    literal = _literal(sides[1].strip(), whole)

    def step(value: Value) -> list[Value]:
        return [value] if any(out == literal for out in path(value)) else []

    return step


def _literal(text: str, whole: str) -> Value:
    try:
        return json.loads(text)
    except ValueError as err:
        raise QueryError(f"unsupported literal {text!r} in {whole!r}") from err


def _path(text: str, whole: str) -> Step:
    if not text.startswith("."):
        raise QueryError(f"unsupported expression {whole!r}: a path must start with '.'")
    ops: list[tuple[str, Value]] = []
    i = 1
    while i < len(text):
        if text[i] == ".":
            i += 1
            continue
        if text[i] == "[":
            end = text.find("]", i)
            if end < 0:
                raise QueryError(f"unclosed '[' in {whole!r}")
            ops.append(_bracket(text[i + 1:end].strip(), whole))
            i = end + 1
        elif text[i] == '"':
            end = i + 1
            while end < len(text) and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            ops.append(("field", _literal(text[i:end + 1], whole)))
            i = end + 1
        else:
            found = _NAME.match(text, i)
            if not found:
                raise QueryError(f"unsupported expression {whole!r} at {text[i:]!r}")
            ops.append(("field", found.group(0)))
            i = found.end()
    return lambda value: _walk(value, ops)


def _bracket(inner: str, whole: str) -> tuple[str, Value]:
    """``[]``, ``[N]`` or ``["key"]``."""
    if not inner:
        return "iter", None
    if inner.lstrip("-").isdigit():
        return "index", int(inner)
    key = _literal(inner, whole)
    if not isinstance(key, str):
        raise QueryError(f"unsupported key {inner!r} in {whole!r}")
    return "field", key


def _walk(value: Value, ops: list[tuple[str, Value]]) -> list[Value]:
    values = [value]
    for op, arg in ops:
        out: list[Value] = []
        for item in values:
            if op == "field":
                out.append(item.get(arg) if isinstance(item, dict) else None)
            elif op == "index":
                out.append(item[arg] if isinstance(item, list) and -len(item) <= arg < len(item)
                           else None)
            elif isinstance(item, list):
                out.extend(item)
            elif isinstance(item, dict):
                out.extend(item.values())
        values = out
    return values
