"""A compiled rule's syntax tree, read from cel-cpp's serialized ``cel.expr.CheckedExpr``.

cel-expr-python exposes no AST, only ``Expression.serialize()`` (an ``Any`` holding the checked
expression). The cost estimate and the schema's field check need the tree, so this module reads
the few protobuf messages involved (``cel/expr/syntax.proto``, ``checked.proto``) with a
hand-written wire decoder (no protobuf dependency for six message types), and checks field
selections against the schema's ``DeclType`` as cel-go's checker does for kube's object types,
reporting ``undefined field '<name>'`` in cel-go's issue format.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from kubewire.server.apiextensions.validation_rules.cel_env import OLD_SELF, SELF, DeclType


@dataclass
class Expr:
    """One node: ``kind`` is const, ident, select, call, list, struct or comprehension."""

    id: int = 0
    kind: str = ""
    name: str = ""  # ident name, select field, call function
    const: object = None
    test_only: bool = False
    operand: Expr | None = None  # select operand, call target
    args: list[Expr] = field(default_factory=list)  # call args, list elements
    entries: list[tuple[Expr | None, Expr]] = field(default_factory=list)  # struct/map entries
    iter_var: str = ""
    accu_var: str = ""
    iter_range: Expr | None = None
    accu_init: Expr | None = None
    loop_condition: Expr | None = None
    loop_step: Expr | None = None
    result: Expr | None = None


@dataclass
class Checked:
    expr: Expr
    positions: dict[int, int]
    line_offsets: list[int]


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs: varints and fixed64 as int, length-delimited as bytes."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
            out.append((number, value))
        elif wire == 1:
            out.append((number, int.from_bytes(buf[pos:pos + 8], "little")))
            pos += 8
        elif wire == 2:
            length, pos = _varint(buf, pos)
            out.append((number, buf[pos:pos + length]))
            pos += length
        elif wire == 5:
            out.append((number, int.from_bytes(buf[pos:pos + 4], "little")))
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
    return out


def _bytes(value: int | bytes) -> bytes:
    return value if isinstance(value, bytes) else b""


def _signed(value: int | bytes) -> int:
    number = value if isinstance(value, int) else 0
    return number - (1 << 64) if number >= 1 << 63 else number


def _constant(buf: bytes) -> object:
    for number, value in _fields(buf):
        if number == 1:
            return None
        if number == 2:
            return bool(value)
        if number == 3:
            return _signed(value)
        if number == 4:
            return value
        if number == 5:
            return struct.unpack("<d", int(value).to_bytes(8, "little"))[0]
        if number == 6:
            return _bytes(value).decode()
        if number == 7:
            return _bytes(value)
    return None


def _ident(node: Expr, buf: bytes) -> None:
    node.kind = "ident"
    node.name = next((_bytes(v).decode() for n, v in _fields(buf) if n == 1), "")


def _select(node: Expr, buf: bytes) -> None:
    node.kind = "select"
    for n, v in _fields(buf):
        if n == 1:
            node.operand = _expr(_bytes(v))
        elif n == 2:
            node.name = _bytes(v).decode()
        elif n == 3:
            node.test_only = bool(v)


def _call(node: Expr, buf: bytes) -> None:
    node.kind = "call"
    for n, v in _fields(buf):
        if n == 1:
            node.operand = _expr(_bytes(v))
        elif n == 2:
            node.name = _bytes(v).decode()
        elif n == 3:
            node.args.append(_expr(_bytes(v)))


def _list(node: Expr, buf: bytes) -> None:
    node.kind = "list"
    node.args = [_expr(_bytes(v)) for n, v in _fields(buf) if n == 1]


def _struct(node: Expr, buf: bytes) -> None:
    node.kind = "struct"
    for n, v in _fields(buf):
        if n != 2:
            continue
        entry = dict(_fields(_bytes(v)))
        key = _expr(_bytes(entry[3])) if 3 in entry else None
        node.entries.append((key, _expr(_bytes(entry.get(4, b"")))))


_COMPREHENSION_PARTS = {2: "iter_range", 4: "accu_init", 5: "loop_condition", 6: "loop_step",
                        7: "result"}


def _comprehension(node: Expr, buf: bytes) -> None:
    node.kind = "comprehension"
    for n, v in _fields(buf):
        sub = _bytes(v)
        if n == 1:
            node.iter_var = sub.decode()
        elif n == 3:
            node.accu_var = sub.decode()
        elif n in _COMPREHENSION_PARTS:
            setattr(node, _COMPREHENSION_PARTS[n], _expr(sub))


def _const(node: Expr, buf: bytes) -> None:
    node.kind, node.const = "const", _constant(buf)


_KINDS = {3: _const, 4: _ident, 5: _select, 6: _call, 7: _list, 8: _struct, 9: _comprehension}


def _expr(buf: bytes) -> Expr:
    """``cel.expr.Expr``."""
    node = Expr()
    for number, value in _fields(buf):
        if number == 2:
            node.id = int(value)
        elif number in _KINDS:
            _KINDS[number](node, _bytes(value))
    return node


def _source_info(buf: bytes, positions: dict[int, int], line_offsets: list[int]) -> None:
    """``cel.expr.SourceInfo``: line offsets (packed) and node positions."""
    for n, v in _fields(buf):
        if n == 3:
            sub = _bytes(v)
            pos = 0
            while pos < len(sub):
                offset, pos = _varint(sub, pos)
                line_offsets.append(offset)
        elif n == 4:
            entry = dict(_fields(_bytes(v)))
            positions[int(entry.get(1, 0))] = int(entry.get(2, 0))


def decode(serialized: bytes) -> Checked:
    """The tree and source positions of ``Expression.serialize()`` (checked or parsed)."""
    payload = b""
    type_url = b""
    for number, value in _fields(serialized):
        if number == 1:
            type_url = _bytes(value)
        elif number == 2:
            payload = _bytes(value)
    expr_field, info_field = (2, 3) if type_url.endswith(b"ParsedExpr") else (4, 5)
    expr = Expr()
    positions: dict[int, int] = {}
    line_offsets: list[int] = []
    for number, value in _fields(payload):
        if number == expr_field:
            expr = _expr(_bytes(value))
        elif number == info_field:
            _source_info(_bytes(value), positions, line_offsets)
    return Checked(expr, positions, line_offsets)


def walk(node: Expr | None) -> list[Expr]:
    """Every node under ``node``, pre-order."""
    out: list[Expr] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if current is None:
            continue
        out.append(current)
        stack.extend([current.operand, current.iter_range, current.accu_init,
                      current.loop_condition, current.loop_step, current.result])
        stack.extend(current.args)
        for key, value in current.entries:
            stack.extend([key, value])
    return out


def uses_old_self(checked: Checked) -> bool:
    return any(n.kind == "ident" and n.name == OLD_SELF for n in walk(checked.expr))


def display_error(source: str, checked: Checked, node_id: int, message: str) -> str:
    """cel-go's ``Error.ToDisplayString``: ``ERROR: <input>:l:c: msg`` plus snippet and caret."""
    offset = checked.positions.get(node_id, 0)
    starts = [0] + [o for o in checked.line_offsets if o <= len(source)]
    starts = sorted(set(starts))
    line = 1
    line_start = 0
    for number, start in enumerate(starts, 1):
        if start <= offset:
            line, line_start = number, start
    column = offset - line_start
    lines = source.split("\n")
    snippet = lines[line - 1].replace("\t", " ") if line - 1 < len(lines) else ""
    indicator = "".join("\uff0e" if len(ch.encode()) > 1 else "." for ch in snippet[:column])
    caret = "\uff3e" if column < len(snippet) and len(snippet[column].encode()) > 1 else "^"
    return (f"ERROR: <input>:{line}:{column + 1}: {message}\n | {snippet}\n | {indicator}{caret}")


class TypeResolver:
    """Types through idents, selects, indexes and comprehensions; unknown elsewhere."""

    def __init__(self, self_type: DeclType, optional_old_self: bool) -> None:
        self.self_type = self_type
        self.optional_old_self = optional_old_self
        self.errors: list[tuple[int, str]] = []

    def type_of(self, node: Expr | None, scope: dict[str, DeclType | None]) -> DeclType | None:
        """The schema type of ``node`` (None: not a schema path), noting undefined fields."""
        if node is None:
            return None
        if node.kind == "ident":
            return self._ident(node, scope)
        if node.kind == "select":
            return self._select(node, self.type_of(node.operand, scope))
        if node.kind == "comprehension":
            self._comprehension(node, scope)
            return None
        if node.kind == "call":
            return self._call(node, scope)
        for child in node.args:
            self.type_of(child, scope)
        for key, value in node.entries:
            self.type_of(key, scope)
            self.type_of(value, scope)
        return None

    def _ident(self, node: Expr, scope: dict[str, DeclType | None]) -> DeclType | None:
        if node.name in scope:
            return scope[node.name]
        if node.name == SELF or (node.name == OLD_SELF and not self.optional_old_self):
            return self.self_type
        return None

    def _comprehension(self, node: Expr, scope: dict[str, DeclType | None]) -> None:
        elem = element_type(self.type_of(node.iter_range, scope))
        self.type_of(node.accu_init, scope)
        inner = {**scope, node.iter_var: elem, node.accu_var: None}
        self.type_of(node.loop_condition, inner)
        self.type_of(node.loop_step, inner)
        self.type_of(node.result, {**scope, node.accu_var: None})

    def _call(self, node: Expr, scope: dict[str, DeclType | None]) -> DeclType | None:
        target = self.type_of(node.operand, scope)
        args = [self.type_of(a, scope) for a in node.args]
        first = args[0] if args else None
        if node.name == "_[_]" and len(args) == 2 and first is not None:
            return first.elem if first.kind in ("list", "map") else None
        if node.name == "_?._" and len(args) == 2 and first is not None:
            field_name = node.args[1].const
            if isinstance(field_name, str) and first.kind == "object":
                self._select(Expr(id=node.id, kind="select", name=field_name), first)
            return None
        if node.name in ("value", "orValue"):
            return target
        return None

    def _select(self, node: Expr, operand: DeclType | None) -> DeclType | None:
        if operand is None:
            return None
        if operand.kind == "object":
            hit = operand.fields.get(node.name)
            if hit is None:
                self.errors.append((node.id, f"undefined field '{node.name}'"))
                return None
            return hit[1]
        if operand.kind == "map":
            return operand.elem
        return None


def element_type(container: DeclType | None) -> DeclType | None:
    """What a comprehension over ``container`` binds: list items, or map keys (strings)."""
    if container is None:
        return None
    if container.kind == "list":
        return container.elem
    if container.kind == "map":
        return DeclType("string")  # kube's map key type: StringType, MaxElements 0
    return None


def field_errors(checked: Checked, self_type: DeclType,
                 optional_old_self: bool) -> list[tuple[int, str]]:
    """(node id, message) for each selection of a field the schema does not declare."""
    checker = TypeResolver(self_type, optional_old_self)
    checker.type_of(checked.expr, {})
    return checker.errors


def result_type(checked: Checked, self_type: DeclType, optional_old_self: bool) -> DeclType | None:
    """The schema type of the whole expression when it is a path into ``self`` (else None)."""
    return TypeResolver(self_type, optional_old_self).type_of(checked.expr, {})


__all__ = ["Checked", "Expr", "TypeResolver", "decode", "display_error", "element_type",
           "field_errors", "result_type", "uses_old_self", "walk"]
