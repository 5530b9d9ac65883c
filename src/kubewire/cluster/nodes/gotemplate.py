"""The part of Go's ``text/template`` that kwok's stage files use, over plain JSON objects.

kwok renders ``statusTemplate`` (and patch templates) with Go templates before reading the result
as YAML. No Python library renders Go templates, so this is written by hand and kept to what
kwok's own stage files need: text and ``{{ }}`` actions (with ``{{-``/``-}}`` trimming), fields
(``.spec.containers``, ``$x.name``), variables (``$now := Now``), pipelines (``.image | Quote``),
parenthesised calls, ``if``/``else if``/``else``, ``range`` (with ``$i, $item :=``), ``with``,
and the functions ``eq ne lt gt not and or index len printf`` plus kwok's ``Now Quote YAML
NodeIP NodeIPWith PodIP PodIPWith NodeName``. Anything else is refused (``TemplateError``) when
rendered, never guessed. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Func = Callable[..., Any]
_TOKEN = re.compile(r'\s*(\(|\)|\||:=|=|"(?:[^"\\]|\\.)*"|`[^`]*`|[^\s()|]+)')
_ACTION = re.compile(r"{{(-?)(.*?)(-?)}}", re.S)
NO_VALUE = "<no value>"
MAX_OUTPUT = 1 << 20


class TemplateError(ValueError):
    """A template outside the supported part, or one that fails to render."""


@dataclass
class _Node:
    kind: str  # text, action, if, range, with
    text: str = ""
    pipe: list[str] = field(default_factory=list)
    body: list[_Node] = field(default_factory=list)
    orelse: list[_Node] = field(default_factory=list)


def kwok_funcs(now: Callable[[], str], node_ip: Callable[..., str],
               pod_ip: Callable[..., str]) -> dict[str, Func]:
    """kwok's template functions for one object (``pkg/utils/gotpl/funcs.go`` and the pod
    controller's ``NodeIPWith``/``PodIPWith``)."""
    return {"Now": now, "NodeIP": node_ip, "NodeIPWith": node_ip, "PodIP": pod_ip,
            "PodIPWith": pod_ip, "NodeName": lambda *a: node_ip.__name__}


def _quote(value: Any) -> str:
    data = json.dumps(value)
    return data if data.startswith('"') else json.dumps(data)


def _truth(value: Any) -> bool:
    return bool(value) and value != NO_VALUE


def _printf(fmt: str, *args: Any) -> str:
    return re.sub(r"%[vsdq]", "%s", fmt) % tuple(_text(a) for a in args)


BUILTINS: dict[str, Func] = {
    "eq": lambda a, *bs: any(a == b for b in bs), "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b, "gt": lambda a, b: a > b, "not": lambda a: not _truth(a),
    "and": lambda *a: next((x for x in a if not _truth(x)), a[-1]),
    "or": lambda *a: next((x for x in a if _truth(x)), a[-1]),
    "index": lambda c, *ks: _index(c, ks), "len": lambda c: len(c or ()),
    "printf": _printf, "Quote": _quote, "YAML": lambda v, *_: json.dumps(v),
    # sprig's ``dict`` (kwok adds sprig's functions): kwok's chaos stages write
    # ``or .metadata.annotations dict``
    "dict": lambda *kv: _dict(kv),
}


def _dict(pairs: tuple[Any, ...]) -> dict[str, Any]:
    """sprig's ``dict k1 v1 k2 v2 ...``: keys as strings, a key without a value gets ``""``."""
    items = list(pairs) + ([""] if len(pairs) % 2 else [])
    return {_text(items[i]): items[i + 1] for i in range(0, len(items), 2)}


def _index(container: Any, keys: tuple[Any, ...]) -> Any:
    for key in keys:
        if isinstance(container, list) and isinstance(key, int) and 0 <= key < len(container):
            container = container[key]
        elif isinstance(container, dict):
            container = container.get(key)
        else:
            raise TemplateError(f"index of {key!r}: out of range")
    return container


def _text(value: Any) -> str:
    if value is None:
        return NO_VALUE
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def _parse(template: str) -> list[_Node]:
    pieces: list[tuple[str, str]] = []
    pos = 0
    for found in _ACTION.finditer(template):
        text = template[pos:found.start()]
        if found.group(1):
            text = text.rstrip()
        if pieces and pieces[-1][0] == "trim":
            text = text.lstrip()
            pieces.pop()
            pieces.append(("trimmed", ""))
        pieces.append(("text", text))
        pieces.append(("action", found.group(2).strip()))
        if found.group(3):
            pieces.append(("trim", ""))
        pos = found.end()
    tail = template[pos:]
    if pieces and pieces[-1][0] == "trim":
        tail = tail.lstrip()
    pieces.append(("text", tail))
    pieces = [p for p in pieces if p[0] in ("text", "action")]
    root, rest = _block(pieces, 0)
    if rest < len(pieces):
        raise TemplateError(f"unexpected {{{{{pieces[rest][1]}}}}}")
    return root


def _block(pieces: list[tuple[str, str]], i: int) -> tuple[list[_Node], int]:
    nodes: list[_Node] = []
    while i < len(pieces):
        kind, text = pieces[i]
        if kind == "text":
            if text:
                nodes.append(_Node("text", text))
            i += 1
            continue
        words = text.split(None, 1)
        head = words[0] if words else ""
        if head in ("end", "else") or text.startswith("/*"):
            if text.startswith("/*"):
                i += 1
                continue
            return nodes, i
        if head in ("if", "range", "with"):
            node, i = _opened(head, words[1] if len(words) > 1 else "", pieces, i + 1)
            nodes.append(node)
            continue
        nodes.append(_Node("action", pipe=_tokens(text)))
        i += 1
    return nodes, i


def _opened(head: str, pipe: str, pieces: list[tuple[str, str]],
            i: int) -> tuple[_Node, int]:
    """An ``if``/``range``/``with`` whose body starts at ``i``; returns it and the index after
    its ``end`` (an ``else if`` shares the outer ``end``)."""
    node = _Node(head, pipe=_tokens(pipe))
    node.body, i = _block(pieces, i)
    if i < len(pieces) and pieces[i][1].split(None, 1)[:1] == ["else"]:
        rest = pieces[i][1].split(None, 1)
        if len(rest) > 1 and rest[1].startswith("if "):
            nested, i = _opened("if", rest[1][3:], pieces, i + 1)
            node.orelse = [nested]
            return node, i
        node.orelse, i = _block(pieces, i + 1)
    if i >= len(pieces) or pieces[i][1] != "end":
        raise TemplateError(f"missing {{{{end}}}} after {{{{{head} {pipe}}}}}")
    return node, i + 1


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        found = _TOKEN.match(text, pos)
        if not found or not found.group(1):
            if text[pos:].strip():
                raise TemplateError(f"cannot read {text!r}")
            break
        out.append(found.group(1))
        pos = found.end()
    return out


class _Render:
    def __init__(self, funcs: Mapping[str, Func]) -> None:
        self.funcs = {**BUILTINS, **funcs}
        self.size = 0

    def nodes(self, nodes: list[_Node], dot: Any, scope: dict[str, Any], out: list[str]) -> None:
        scope = dict(scope)
        for node in nodes:
            if node.kind == "text":
                self.emit(out, node.text)
            elif node.kind == "action":
                value, printed = self.pipeline(node.pipe, dot, scope)
                if printed:
                    self.emit(out, _text(value))
            elif node.kind in ("if", "with"):
                value, _ = self.pipeline(node.pipe, dot, scope)
                if _truth(value):
                    self.nodes(node.body, value if node.kind == "with" else dot, scope, out)
                else:
                    self.nodes(node.orelse, dot, scope, out)
            else:
                self.range(node, dot, scope, out)

    def range(self, node: _Node, dot: Any, scope: dict[str, Any], out: list[str]) -> None:
        pipe, names = node.pipe, []
        if ":=" in pipe:
            at = pipe.index(":=")
            names = [t.rstrip(",") for t in pipe[:at] if t != ","]
            pipe = pipe[at + 1:]
        value, _ = self.pipeline(pipe, dot, scope)
        items = list(value.items()) if isinstance(value, dict) else \
            list(enumerate(value)) if isinstance(value, list) else []
        if not items:
            self.nodes(node.orelse, dot, scope, out)
        for key, item in items:
            inner = dict(scope)
            if len(names) == 1:
                inner[names[0]] = item
            elif len(names) == 2:
                inner[names[0]], inner[names[1]] = key, item
            self.nodes(node.body, item, inner, out)

    def emit(self, out: list[str], text: str) -> None:
        self.size += len(text)
        if self.size > MAX_OUTPUT:
            raise TemplateError("template output too large")
        out.append(text)

    def pipeline(self, tokens: list[str], dot: Any, scope: dict[str, Any]) -> tuple[Any, bool]:
        """The pipeline's value and whether it prints (an assignment does not)."""
        if len(tokens) >= 2 and tokens[1] in (":=", "=") and tokens[0].startswith("$"):
            scope[tokens[0]] = self.pipeline(tokens[2:], dot, scope)[0]
            return None, False
        commands: list[list[str]] = [[]]
        depth = 0
        for token in tokens:
            depth += token == "("
            depth -= token == ")"
            if token == "|" and depth == 0:
                commands.append([])
            else:
                commands[-1].append(token)
        value: Any = None
        for index, command in enumerate(commands):
            value = self.command(command, dot, scope, [value] if index else [])
        return value, True

    def command(self, tokens: list[str], dot: Any, scope: dict[str, Any],
                piped: list[Any]) -> Any:
        if not tokens:
            raise TemplateError("empty command")
        args, i = [], 0
        head = tokens[0]
        while i < len(tokens):
            value, i = self.operand(tokens, i, dot, scope)
            args.append(value)
        if head in self.funcs:
            return self.funcs[head](*args[1:], *piped)
        if piped or len(args) > 1:
            raise TemplateError(f"{head!r} is not a function")
        return args[0]

    def operand(self, tokens: list[str], i: int, dot: Any,
                scope: dict[str, Any]) -> tuple[Any, int]:
        token = tokens[i]
        if token == "(":
            depth, j = 1, i + 1
            while j < len(tokens) and depth:
                depth += tokens[j] == "("
                depth -= tokens[j] == ")"
                j += 1
            return self.pipeline(tokens[i + 1:j - 1], dot, scope)[0], j
        if token in self.funcs:  # an argument that names a function: Go calls it (no args)
            return (token if i == 0 else self.funcs[token]()), i + 1
        found, value = _constant(token)
        if found:
            return value, i + 1
        if token.startswith("$"):
            name, _, rest = token.partition(".")
            if name not in scope and name != "$":
                raise TemplateError(f"undefined variable {name!r}")
            return self.fields(scope.get(name, scope.get("$")), rest), i + 1
        if token.startswith("."):
            return self.fields(dot, token[1:]), i + 1
        raise TemplateError(f"function {token!r} not defined")

    @staticmethod
    def fields(value: Any, path: str) -> Any:
        for name in filter(None, path.split(".")):
            value = value.get(name) if isinstance(value, dict) else None
        return value


def _constant(token: str) -> tuple[bool, Any]:
    """A literal operand: a string, raw string, bool, nil or integer."""
    if token.startswith('"'):
        return True, json.loads(token)
    if token.startswith("`"):
        return True, token[1:-1]
    if token in ("true", "false", "nil"):
        return True, None if token == "nil" else token == "true"
    if re.fullmatch(r"-?\d+", token):
        return True, int(token)
    return False, None


def check_template(template: str) -> None:
    """``TemplateError`` when ``template`` does not parse (a stage file checked at start)."""
    try:
        _parse(template)
    except TemplateError:
        raise
    except (TypeError, ValueError, KeyError, IndexError) as err:
        raise TemplateError(str(err)) from err


def render(template: str, data: Any, funcs: Mapping[str, Func] | None = None) -> str:
    """Render ``template`` with ``data`` as ``.`` (and ``$``)."""
    out: list[str] = []
    try:
        _Render(funcs or {}).nodes(_parse(template), data, {"$": data}, out)
    except TemplateError:
        raise
    except (TypeError, ValueError, KeyError, IndexError) as err:
        raise TemplateError(str(err)) from err
    return "".join(out)
