"""YAML request bodies decoded as kube-apiserver decodes them: ``sigs.k8s.io/yaml`` over its
go-yaml v2 fork (``YAMLToJSON`` for create and update bodies, ``yaml.Unmarshal`` for apply).

PyYAML composes (over libyaml's parser where it has it); go-yaml's rules are applied around it,
with go-yaml's texts:

- The reader: a body that is not UTF-8, or holds a control character, fails with the reader's
  problem (readerc.go ``yaml_parser_update_buffer``): ``yaml: invalid leading UTF-8 octet``,
  ``yaml: control characters are not allowed``, ...
- Aliases (the CVE-2019-11253 class): composing keeps an alias as a second reference to its
  anchor's node, so composing is linear in the body. Before any value is built, the nodes
  go-yaml's decoder would visit are counted in its order, aliases expanded, and the document is
  refused as soon as aliases do most of the work (decode.go ``unmarshal``, ``allowedAliasRatio``):
  ``yaml: document contains excessive aliasing``. The ratio keeps alias visits under 99 % of
  all visits, so the count costs at most ~100 visits per node of the body, and a few million in
  all, whatever the body.
- An alias inside its own anchor fails (``yaml: anchor 'x' value contains itself``), so does an
  unknown one (``yaml: unknown anchor 'x' referenced``); a later anchor of the same name
  replaces the earlier one.

Values come out as sigs.k8s.io/yaml hands them to JSON: timestamps stay strings, and a subtree
reached through several aliases is copied for each, so no two places share a container (Go
decodes every alias anew). Other PyYAML errors keep PyYAML's text: go-yaml words them otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec
import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from kubewire.go_text import go_quote

__all__ = ["EXCESSIVE_ALIASING", "YAMLBody", "YAMLBodyError", "allowed_alias_ratio",
           "load_yaml_body", "reader_problem"]

# decode.go: up to 400,000 decodes 99 % may come from aliases, from 4,000,000 on only 10 %.
_ALIAS_RATIO_RANGE_LOW = 400_000
_ALIAS_RATIO_RANGE_HIGH = 4_000_000
_MERGE_TAG = "tag:yaml.org,2002:merge"
_WANT_MAP = "yaml: map merge requires map or sequence of maps as the value"
EXCESSIVE_ALIASING = "yaml: document contains excessive aliasing"


class YAMLBodyError(Exception):
    """The body is not YAML kube accepts; ``str()`` is the error (go-yaml's text where known)."""


@dataclass(frozen=True, slots=True)
class YAMLBody:
    """A decoded body and the go-yaml strict-mode errors its text has (keys repeated in a map)."""

    value: Any
    repeated_keys: tuple[str, ...] = ()


def load_yaml_body(body: bytes) -> YAMLBody:
    """Decode the first document of ``body``; raises ``YAMLBodyError`` and, for nesting deeper
    than Python's stack, ``RecursionError``."""
    plain = _plain_json(body)
    if plain is not None:
        return YAMLBody(plain)
    return _composed(body)


# --- JSON bodies ---------------------------------------------------------------------------------
# Clients send apply bodies (``application/apply-patch+yaml``) as JSON: kubectl, client-go,
# controller-runtime, lightkube. Composing JSON text node by node costs PyYAML ~10x msgspec's
# decode (an apply's body parse was ~8% of its server CPU). A JSON object decodes to what
# composing gives when nothing in it reads differently as YAML: printable ASCII and line feeds,
# no escapes (so every '"' delimits a string, and keys can be counted in the text), no number
# but integers in int64 (a float's text can be a YAML string: "1e3"), each key on its colon's
# line and under YAML's 1,024-character simple-key bound, and no key repeated (composing
# reports those). Anything else is composed.
_JSON_DECODER = msgspec.json.Decoder()
_STRING = re.compile(rb'"[^"]*"(\s*:)?')
# any byte but a line feed and printable ASCII other than the backslash (DEL is not printable:
# YAML's reader refuses it where JSON takes it in a string)
_NOT_PLAIN = re.compile(rb"[^\n\x20-\x5b\x5d-\x7e]")
_MAX_PLAIN_KEY = 1000
_INT64 = (-(2**63), 2**63 - 1)


def _plain_json(body: bytes) -> dict[str, Any] | None:
    """``body``'s value when it is a JSON object that composes to the same value, else None."""
    if not body.lstrip().startswith(b"{") or _NOT_PLAIN.search(body) is not None:
        return None
    try:
        value = _JSON_DECODER.decode(body)
        keys = _plain_keys(value)
    except (msgspec.DecodeError, RecursionError):
        return None
    if not isinstance(value, dict) or keys < 0:
        return None
    # Without escapes no string holds a '"': each match is one whole string, a key when a
    # colon follows. Fewer keys decoded than written: one was repeated.
    written = 0
    for colon in _STRING.findall(body):
        if colon:
            if b"\n" in colon:  # YAML wants a simple key's colon on its line
                return None
            written += 1
    return value if written == keys else None


def _plain_keys(value: dict[str, Any] | list[Any]) -> int:
    """How many keys ``value``'s objects hold; -1 if it holds what composing reads otherwise."""
    children: Iterable[Any] = value
    total = 0
    if isinstance(value, dict):
        if any(len(key) > _MAX_PLAIN_KEY for key in value):
            return -1
        total, children = len(value), value.values()
    for child in children:
        if isinstance(child, dict | list):
            inner = _plain_keys(child)
            if inner < 0:
                return -1
            total += inner
        elif isinstance(child, float) or (
                isinstance(child, int) and not _INT64[0] <= child <= _INT64[1]):
            return -1
    return total


def _composed(body: bytes) -> YAMLBody:
    try:
        loader = _Loader(body)
        try:
            node = loader.get_single_node()
            if node is None:
                return YAMLBody(None)
            if loader.alias_edges:
                _check_aliases(node, loader.alias_edges)
            value = loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.reader.ReaderError as exc:
        raise YAMLBodyError(reader_problem(body) or _one_line(exc)) from None
    except yaml.YAMLError as exc:
        raise YAMLBodyError(_one_line(exc)) from None
    if loader.alias_edges:
        value = _unshared(value)
    return YAMLBody(value, tuple(loader.repeated_keys))


def _one_line(exc: yaml.YAMLError) -> str:
    return " ".join(str(exc).split())


# --- the reader ---------------------------------------------------------------------------------

# readerc.go: the characters YAML allows (tab, line breaks, printable ASCII, NEL, and Unicode
# but for the C1 controls, surrogates, U+FFFE and U+FFFF).
_DISALLOWED = re.compile("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def reader_problem(body: bytes) -> str | None:
    """go-yaml's text for the first character its reader refuses in ``body``; None when it reads
    every character (or the body is UTF-16, which is left to PyYAML)."""
    if body.startswith((b"\xff\xfe", b"\xfe\xff")):
        return None
    data = body[3:] if body.startswith(b"\xef\xbb\xbf") else body
    try:
        text, bad_at = data.decode("utf-8"), -1
    except UnicodeDecodeError as exc:
        text, bad_at = data[:exc.start].decode("utf-8"), exc.start
    if _DISALLOWED.search(text):
        return "yaml: control characters are not allowed"
    return None if bad_at < 0 else "yaml: " + _utf8_problem(data, bad_at)


def _utf8_problem(data: bytes, at: int) -> str:
    """readerc.go's checks, in its order, of the sequence at ``at`` (which is not UTF-8)."""
    lead = data[at]
    width = 2 if lead >> 5 == 0b110 else 3 if lead >> 4 == 0b1110 else \
        4 if lead >> 3 == 0b11110 else 0
    if width == 0:
        return "invalid leading UTF-8 octet"
    if at + width > len(data):
        return "incomplete UTF-8 octet sequence"
    trail = data[at + 1:at + width]
    if any(octet & 0xC0 != 0x80 for octet in trail):
        return "invalid trailing UTF-8 octet"
    value = lead & (0xFF >> (width + 1))
    for octet in trail:
        value = value << 6 | octet & 0x3F
    if value < (0x80, 0x800, 0x10000)[width - 2]:
        return "invalid length of a UTF-8 sequence"
    return "invalid Unicode character"  # a surrogate or past U+10FFFF


# --- composing ----------------------------------------------------------------------------------

Slot = tuple[int, int]  # (id of the parent node, child position: 2i, 2i+1 for a pair's key, value)


def _slot(parent: Node | None, index: Any) -> Slot:
    if isinstance(parent, MappingNode):
        return id(parent), 2 * len(parent.value) + (index is not None)
    if isinstance(parent, SequenceNode):
        return id(parent), int(index)
    return id(parent), 0


def _base_loader() -> type:
    """libyaml's parser under PyYAML's composer where PyYAML was built with it: go-yaml is a port
    of libyaml (the same scanner and its texts), and scanning in C is ~30x faster than PyYAML's
    pure-Python reader and scanner, which held the loop about a second per MB of body.
    Composing stays PyYAML's, so ``_Loader`` sees every alias."""
    try:
        from yaml.cyaml import CParser  # type: ignore[attr-defined]
    except ImportError:
        return yaml.SafeLoader

    class CSafeComposingLoader(Composer, CParser, SafeConstructor, Resolver):
        def __init__(self, stream: bytes) -> None:
            CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

    return CSafeComposingLoader


if TYPE_CHECKING:
    _Base = yaml.SafeLoader
else:
    _Base = _base_loader()


class _Loader(_Base):
    """SafeLoader that notes where aliases stand (``alias_edges``: slot -> anchor), keeps
    timestamps as strings, and notes every key repeated in a map as go-yaml's strict mode
    reports it."""

    def __init__(self, stream: bytes) -> None:
        super().__init__(stream)
        self.repeated_keys: list[str] = []
        self.alias_edges: dict[Slot, str] = {}

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        anchor = self.peek_event().anchor  # type: ignore[no-untyped-call]
        if self.check_event(AliasEvent):
            if anchor not in self.anchors:
                raise YAMLBodyError(f"yaml: unknown anchor '{anchor}' referenced")
            self.alias_edges[_slot(parent, index)] = anchor
        elif anchor is not None:
            self.anchors.pop(anchor, None)  # go-yaml: the later anchor wins
        node = super().compose_node(parent, index)
        assert node is not None  # every event left composes to a node
        return node

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        self.flatten_mapping(node)  # ``<<`` keys out, merged pairs in (the base class repeats it)
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, str | int | float | bool) and key in seen:
                shown = go_quote(key) if isinstance(key, str) else str(key)
                self.repeated_keys.append(
                    f"line {key_node.start_mark.line + 1}: key {shown} already set in map")
            elif isinstance(key, str | int | float | bool):
                seen.add(key)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


# --- go-yaml's alias budget ---------------------------------------------------------------------

def allowed_alias_ratio(decode_count: int) -> float:
    """decode.go ``allowedAliasRatio``: the share of decodes aliases may account for."""
    if decode_count <= _ALIAS_RATIO_RANGE_LOW:
        return 0.99
    if decode_count >= _ALIAS_RATIO_RANGE_HIGH:
        return 0.10
    return 0.99 - 0.89 * ((decode_count - _ALIAS_RATIO_RANGE_LOW)
                          / (_ALIAS_RATIO_RANGE_HIGH - _ALIAS_RATIO_RANGE_LOW))


# One step of the walk: visit a node (through the alias at a slot, or None), leave an alias, or
# merge a ``<<`` value.
_VISIT, _LEAVE, _MERGE, _MERGE_ITEM = range(4)
_Step = tuple[int, Node, Slot | None]


class _AliasBudget:
    """go-yaml's decoder walk, counting only: ``unmarshal`` of each node in its order."""

    def __init__(self, edges: dict[Slot, str]) -> None:
        self.edges = edges
        self.decodes = 1  # the document node
        self.aliases = 0
        self.depth = 0  # aliases being expanded
        self.expanding: set[Slot] = set()  # d.aliases: the alias nodes being expanded

    def count(self) -> None:
        self.decodes += 1
        if self.depth:
            self.aliases += 1
        if (self.aliases > 100 and self.decodes > 1000
                and self.aliases / self.decodes > allowed_alias_ratio(self.decodes)):
            raise YAMLBodyError(EXCESSIVE_ALIASING)

    def visit(self, node: Node, via: Slot | None, stack: list[_Step]) -> None:
        self.count()
        if via is not None:  # an alias node: then its anchor's node, one alias deeper
            if via in self.expanding:
                raise YAMLBodyError(f"yaml: anchor '{self.edges[via]}' value contains itself")
            self.expanding.add(via)
            self.depth += 1
            stack += [(_LEAVE, node, via), (_VISIT, node, None)]
        elif isinstance(node, SequenceNode):
            stack.extend((_VISIT, child, self._edge(node, i))
                         for i, child in reversed(list(enumerate(node.value))))
        elif isinstance(node, MappingNode):
            stack.extend(self._pair_steps(node))

    def _edge(self, parent: Node, position: int) -> Slot | None:
        slot = (id(parent), position)
        return slot if slot in self.edges else None

    def _pair_steps(self, node: MappingNode) -> list[_Step]:
        """decode.go ``mapping``: key then value, pair by pair; a ``<<`` key merges its value."""
        steps: list[_Step] = []
        for i, (key, value) in enumerate(node.value):
            key_edge, value_edge = self._edge(node, 2 * i), self._edge(node, 2 * i + 1)
            if key_edge is None and _is_merge(key):
                steps.append((_MERGE, value, value_edge))
            else:
                steps += [(_VISIT, key, key_edge), (_VISIT, value, value_edge)]
        steps.reverse()
        return steps

    def merge(self, node: Node, via: Slot | None, stack: list[_Step]) -> None:
        """decode.go ``merge``: a map, an alias of one, or a sequence of those (last first)."""
        if via is not None or isinstance(node, MappingNode):
            self.merge_item(node, via, stack)
        elif isinstance(node, SequenceNode):
            stack.extend((_MERGE_ITEM, child, self._edge(node, i))
                         for i, child in enumerate(node.value))
        else:
            raise YAMLBodyError(_WANT_MAP)

    def merge_item(self, node: Node, via: Slot | None, stack: list[_Step]) -> None:
        if not isinstance(node, MappingNode):
            raise YAMLBodyError(_WANT_MAP)
        stack.append((_VISIT, node, via))

    def leave(self, via: Slot) -> None:
        self.depth -= 1
        self.expanding.discard(via)


def _is_merge(node: Node) -> bool:
    """decode.go ``isMerge``: a plain (or ``!!merge``-tagged) ``<<`` scalar."""
    return isinstance(node, ScalarNode) and node.value == "<<" and node.tag == _MERGE_TAG


def _check_aliases(root: Node, edges: dict[Slot, str]) -> None:
    """Walk the composed document as go-yaml's decoder would, without building anything; raise
    YAMLBodyError at go-yaml's first alias error."""
    budget = _AliasBudget(edges)
    stack: list[_Step] = [(_VISIT, root, None)]  # a root alias could name no anchor
    while stack:
        action, node, via = stack.pop()
        if action == _VISIT:
            budget.visit(node, via, stack)
        elif action == _LEAVE:
            assert via is not None
            budget.leave(via)
        elif action == _MERGE:
            budget.merge(node, via, stack)
        else:
            budget.merge_item(node, via, stack)


def _unshared(value: Any) -> Any:
    """``value`` with every dict and list copied (no recursion), so a subtree that aliases put
    in several places is a separate copy in each."""
    holder = [value]
    stack: list[tuple[Any, Any]] = [(holder, 0)]
    while stack:
        parent, key = stack.pop()
        item = parent[key]
        if type(item) is dict:
            parent[key] = item = dict(item)
            stack.extend((item, k) for k in item)
        elif type(item) is list:
            parent[key] = item = list(item)
            stack.extend((item, i) for i in range(len(item)))
    return holder[0]
