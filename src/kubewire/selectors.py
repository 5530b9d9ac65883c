"""Label and field selectors: parsing, matching, and the selectable fields of an object.

Parsers follow kube-apiserver v1.32 byte for byte, error texts included, because clients match on
them (watch-protocol.md §9). Selectors are immutable values; ``matches`` and ``field_set`` run per
event per watcher, so field extraction is compiled once per ``Resource`` and kept allocation-light.

Errors: every parse or conversion failure raises ``SelectorError`` (a ``ValueError``) whose
``message`` is kube's exact text; the server answers it as a 400 BadRequest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from kubewire.resources import Resource

JSON = Any


class SelectorError(ValueError):
    """A selector kube-apiserver would reject; ``message`` is its exact error text."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# --- Go-compatible rendering ------------------------------------------------------------------

_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
               "\v": "\\v", '"': '\\"', "\\": "\\\\"}


def go_quote(text: str) -> str:
    """Quote ``text`` as Go's ``strconv.Quote`` (and so ``%q``) does; never raises."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    out = ['"']
    for ch in text:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def _byte_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


# --- name validation (apimachinery pkg/util/validation/validation.go) ---------------------------

_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_QNAME_CHARS = _ALNUM | frozenset("-_.")
_DNS_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_DNS_CHARS = _DNS_ALNUM | frozenset("-")
_QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QNAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
              "with an alphanumeric character")
_DNS_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_DNS_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
            "'-' or '.', and must start and end with an alphanumeric character")
_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', "
              "'_' or '.', and must start and end with an alphanumeric character")


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    # validation.RegexError: its "'x', " join is what puts two spaces before each "or".
    shown = "".join(("" if i == 0 else " or ") + f"'{e}', " for i, e in enumerate(examples))
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def _is_qualified_part(name: str) -> bool:
    # Same language as ^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$, without regex backtracking.
    return (bool(name) and name[0] in _ALNUM and name[-1] in _ALNUM
            and all(c in _QNAME_CHARS for c in name))


def _is_dns_subdomain(value: str) -> bool:
    return all(part and part[0] in _DNS_ALNUM and part[-1] in _DNS_ALNUM
               and all(c in _DNS_CHARS for c in part) for part in value.split("."))


def qualified_name_errors(value: str) -> list[str]:
    """``validation.IsQualifiedName``: the label-key rules, as kube's list of messages."""
    parts = value.split("/")
    if len(parts) > 2:
        return ["a qualified name " + _regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name",
                                                   "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    errs: list[str] = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            if _byte_len(prefix) > 253:
                errs.append("prefix part must be no more than 253 characters")
            if not _is_dns_subdomain(prefix):
                errs.append("prefix part " + _regex_error(_DNS_MSG, _DNS_FMT, "example.com"))
    if not name:
        errs.append("name part must be non-empty")
    elif _byte_len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if not _is_qualified_part(name):
        errs.append("name part " + _regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name",
                                                "123-abc"))
    return errs


def label_value_errors(value: str) -> list[str]:
    """``validation.IsValidLabelValue``: the label-value rules, as kube's list of messages."""
    errs: list[str] = []
    if _byte_len(value) > 63:
        errs.append("must be no more than 63 characters")
    if value and not _is_qualified_part(value):
        errs.append(_regex_error(_VALUE_MSG, f"({_QNAME_FMT})?", "MyValue", "my_value", "12345"))
    return errs


# --- label selectors (apimachinery pkg/labels/selector.go) -------------------------------------

class Operator(StrEnum):
    """``selection.Operator`` values."""

    IN = "in"
    NOT_IN = "notin"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


_SYMBOL = {Operator.EQUALS: "=", Operator.DOUBLE_EQUALS: "==", Operator.NOT_EQUALS: "!=",
           Operator.IN: " in ", Operator.NOT_IN: " notin ", Operator.GREATER_THAN: ">",
           Operator.LESS_THAN: "<"}


def _parse_int64(text: str) -> int | None:
    """Go ``strconv.ParseInt(text, 10, 64)``, or None where Go would fail."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ANDed term of a label selector; ``values`` are sorted and de-duplicated."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """kube's ``Requirement.Matches``: ``!=``/``notin`` also match a missing key."""
        op = self.operator
        value = labels.get(self.key)
        if op is Operator.EXISTS or op is Operator.DOES_NOT_EXIST:
            return (value is not None) is (op is Operator.EXISTS)
        if op is Operator.NOT_EQUALS or op is Operator.NOT_IN:
            return value is None or value not in self.values
        if value is None:
            return False
        if op is Operator.GREATER_THAN or op is Operator.LESS_THAN:
            have, want = _parse_int64(value), _parse_int64(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op is Operator.GREATER_THAN else have < want
        return value in self.values

    def __str__(self) -> str:
        if self.operator is Operator.EXISTS:
            return self.key
        if self.operator is Operator.DOES_NOT_EXIST:
            return "!" + self.key
        values = ",".join(self.values)
        if self.operator in (Operator.IN, Operator.NOT_IN):
            values = f"({values})"
        return self.key + _SYMBOL[self.operator] + values


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """An immutable label selector: requirements sorted by key, all ANDed."""

    requirements: tuple[Requirement, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True when every requirement holds; the empty selector matches everything."""
        return all(req.matches(labels) for req in self.requirements)

    def __str__(self) -> str:
        """Canonical form, as ``Selector.String()``: ``app=web,tier in (a,b)``."""
        return ",".join(str(req) for req in self.requirements)


def new_requirement(key: str, op: Operator, values: Iterable[str], *, key_path: str = "key"
                    ) -> Requirement:
    """``labels.NewRequirement`` with a nil field path; raises SelectorError with kube's text."""
    vals = tuple(sorted(set(values)))
    errs: list[str] = []
    key_errs = qualified_name_errors(key)
    if key_errs:
        errs.append(f"{key_path}: Invalid value: {go_quote(key)}: {'; '.join(key_errs)}")
    if op in (Operator.IN, Operator.NOT_IN) and not vals:
        errs.append("values: Invalid value: []string{}: for 'in', 'notin' operators, "
                    "values set can't be empty")
    if op in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and vals:
        shown = ", ".join(go_quote(v) for v in vals)
        errs.append(f"values: Invalid value: []string{{{shown}}}: values set must be empty for "
                    "exists and does not exist")
    if op in (Operator.GREATER_THAN, Operator.LESS_THAN):
        errs.extend(f"values[{i}]: Invalid value: {go_quote(v)}: for 'Gt', 'Lt' operators, the "
                    "value must be an integer" for i, v in enumerate(vals)
                    if _parse_int64(v) is None)
    for i, v in enumerate(vals):
        value_errs = label_value_errors(v)
        if value_errs:
            errs.append(f"values[{i}][{key}]: Invalid value: {go_quote(v)}: "
                        + "; ".join(value_errs))
    if errs:
        unique = list(dict.fromkeys(errs))
        raise SelectorError(unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]")
    return Requirement(key, op, vals)



_SPECIAL = frozenset("=!(),<>")
_WHITESPACE = frozenset(" \t\r\n")
_SYMBOLS = frozenset({"=", "==", "!=", "!", "(", ")", ",", "<", ">"})
_KEYWORDS = frozenset({"in", "notin"})
_EOS, _ID = "end", "id"
_OPERATOR_TOKENS = {"in": Operator.IN, "notin": Operator.NOT_IN, "=": Operator.EQUALS,
                    "==": Operator.DOUBLE_EQUALS, "!=": Operator.NOT_EQUALS,
                    ">": Operator.GREATER_THAN, "<": Operator.LESS_THAN}
Token = tuple[str, str]  # (kind, literal); kind is a symbol, a keyword, _ID or _EOS


def _scan_symbol(text: str, pos: int) -> tuple[Token, int]:
    # Lexer.scanSpecialSymbol: extend greedily while the buffer is still a known operator.
    buf, last = "", ""
    while pos < len(text):
        ch = text[pos]
        pos += 1
        if ch == "\0":
            break
        if ch not in _SPECIAL:
            pos -= 1
            break
        buf += ch
        if buf in _SYMBOLS:
            last = buf
        elif last:
            pos -= 1
            break
    if not last:
        return ("error", f"error expected: keyword found '{buf}'"), pos
    return (last, last), pos


def _lex(text: str) -> list[Token]:
    """``labels.Lexer``: Go reads a NUL byte exactly like the end of input."""
    tokens: list[Token] = []
    pos, end = 0, len(text)
    while True:
        while pos < end and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= end or text[pos] == "\0":
            tokens.append((_EOS, ""))
            return tokens
        if text[pos] in _SPECIAL:
            token, pos = _scan_symbol(text, pos)
            tokens.append(token)
            continue
        start = pos
        while pos < end and text[pos] not in _SPECIAL and text[pos] not in _WHITESPACE \
                and text[pos] != "\0":
            pos += 1
        literal = text[start:pos]
        if pos < end and text[pos] == "\0":
            pos += 1  # scanIDOrKeyword swallows the NUL that ends an identifier
        tokens.append((literal if literal in _KEYWORDS else _ID, literal))


class _LabelParser:
    """``labels.Parser``: recursive descent over the scanned tokens, kube's messages."""

    def __init__(self, text: str) -> None:
        self.tokens = _lex(text)
        self.pos = 0

    def peek(self, values: bool = True) -> Token:
        kind, literal = self.tokens[min(self.pos, len(self.tokens) - 1)]
        # In value context "in"/"notin" are plain identifiers (`x in (in)` is legal).
        return (_ID if values and kind in _KEYWORDS else kind), literal

    def take(self, values: bool = True) -> Token:
        token = self.peek(values)
        self.pos += 1
        return token

    def requirement(self) -> Requirement:
        key, op = self.key_and_operator()
        if op is None:
            token = self.take(values=False)
            op = _OPERATOR_TOKENS.get(token[0])
            if op is None:
                raise SelectorError(f"found '{token[1]}', expected: in, notin, =, ==, !=, gt, lt")
            values = self.set_values() if op in (Operator.IN, Operator.NOT_IN) \
                else self.exact_value()
        else:
            values = []
        return new_requirement(key, op, values)

    def key_and_operator(self) -> tuple[str, Operator | None]:
        kind, literal = self.take()
        op = None
        if kind == "!":
            op = Operator.DOES_NOT_EXIST
            kind, literal = self.take()
        if kind != _ID:
            raise SelectorError(f"found '{literal}', expected: identifier")
        errs = qualified_name_errors(literal)
        if errs:  # validated with the parser's nil field path, hence kube's literal "<nil>"
            raise SelectorError(f"<nil>: Invalid value: {go_quote(literal)}: {'; '.join(errs)}")
        if op is None and self.peek()[0] in (_EOS, ","):
            op = Operator.EXISTS
        return literal, op

    def set_values(self) -> list[str]:
        kind, literal = self.take()
        if kind != "(":
            raise SelectorError(f"found '{literal}' expected: '('")
        kind, literal = self.peek()
        if kind == ")":
            self.take()
            return [""]
        if kind not in (_ID, ","):
            raise SelectorError(f"found '{literal}', expected: ',', ')' or identifier")
        values = self.identifiers()
        if self.take()[0] != ")":
            raise SelectorError(f"found '{literal}', expected: ')'")
        return values

    def identifiers(self) -> list[str]:
        values: list[str] = []
        while True:
            kind, literal = self.take()
            if kind == _ID:
                values.append(literal)
                after, after_literal = self.peek()
                if after == ")":
                    return values
                if after != ",":
                    raise SelectorError(f"found '{after_literal}', expected: ',' or ')'")
            elif kind == ",":
                # Empty entries ("(,a)", "(a,)", "(a,,b)") stand for the empty value.
                after = self.peek()[0]
                if not values or after in (")", ","):
                    values.append("")
                if after == ")":
                    return values
                if after == ",":
                    self.take()
            else:
                raise SelectorError(f"found '{literal}', expected: ',', or identifier")

    def exact_value(self) -> list[str]:
        if self.peek()[0] in (_EOS, ","):
            return [""]
        kind, literal = self.take()
        if kind != _ID:
            raise SelectorError(f"found '{literal}', expected: identifier")
        return [literal]


def parse_label_selector(text: str) -> LabelSelector:
    """Parse a ``labelSelector`` query value (watch-protocol.md §9.1, ``labels.Parse``).

    Guarantees: the result is sorted by key (stable), ``""`` gives the empty selector, and
    ``parse_label_selector(str(sel)) == sel``. Raises SelectorError with kube's exact message.
    """
    parser = _LabelParser(text)
    requirements: list[Requirement] = []
    while True:
        kind, literal = parser.peek()
        if kind == _EOS:
            break
        if kind not in (_ID, "!"):
            raise SelectorError(f"found '{literal}', expected: !, identifier, or 'end of string'")
        try:
            requirements.append(parser.requirement())
        except SelectorError as exc:
            raise SelectorError(f"unable to parse requirement: {exc.message}") from None
        kind, literal = parser.take()
        if kind == _EOS:
            break
        if kind != ",":
            raise SelectorError(f"found '{literal}', expected: ',' or 'end of string'")
        kind, literal = parser.peek()
        if kind not in (_ID, "!"):
            raise SelectorError(f"found '{literal}', expected: identifier after ','")
    requirements.sort(key=lambda req: req.key)
    return LabelSelector(tuple(requirements))


_MATCH_OPERATORS = {"In": Operator.IN, "NotIn": Operator.NOT_IN, "Exists": Operator.EXISTS,
                    "DoesNotExist": Operator.DOES_NOT_EXIST}


def label_selector_from_match(sel: Mapping[str, JSON]) -> LabelSelector:
    """A ``metav1.LabelSelector`` dict as a selector (``metav1.LabelSelectorAsSelector``).

    ``{}`` selects everything. Raises SelectorError with kube's text for invalid keys, values or
    operators, and for fields of the wrong JSON type.
    """
    labels = sel.get("matchLabels") or {}
    expressions = sel.get("matchExpressions") or []
    if not isinstance(labels, Mapping) or not isinstance(expressions, list):
        raise SelectorError("matchLabels must be an object and matchExpressions a list")
    requirements = []
    for key, value in sorted(labels.items()):
        if not isinstance(value, str):
            raise SelectorError(f"matchLabels[{key}] must be a string")
        requirements.append(new_requirement(key, Operator.EQUALS, (value,)))
    for expr in expressions:
        expr = expr if isinstance(expr, Mapping) else {}
        key, name, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
        op = _MATCH_OPERATORS.get(name) if isinstance(name, str) else None
        if op is None:
            raise SelectorError(f"{go_quote(str(name))} is not a valid label selector operator")
        if not isinstance(key, str) or not isinstance(values, list) \
                or not all(isinstance(v, str) for v in values):
            raise SelectorError("matchExpressions entries need a string key and string values")
        requirements.append(new_requirement(key, op, values))
    requirements.sort(key=lambda req: req.key)
    return LabelSelector(tuple(requirements))


def format_label_selector(sel: Mapping[str, JSON]) -> str:
    """The query-string form of a ``metav1.LabelSelector`` dict, e.g. ``app=web``.

    Unlike ``metav1.FormatLabelSelector`` an empty selector gives ``""`` (not ``<none>``) and an
    invalid one raises SelectorError (not ``<error>``): this feeds ``labelSelector=`` and
    Scale ``status.selector``, which kube fills from ``selector.String()``.
    """
    return str(label_selector_from_match(sel))


# --- field selectors (apimachinery pkg/fields/selector.go) -------------------------------------

@dataclass(frozen=True, slots=True)
class FieldRequirement:
    """One ANDed term: ``field=value`` or ``field!=value`` (``==`` is stored as ``=``)."""

    field: str
    operator: str
    value: str

    def __str__(self) -> str:
        escaped = self.value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")
        return f"{self.field}{self.operator}{escaped}"


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """An immutable field selector; ``terms`` are in kube's order (sorted raw terms)."""

    terms: tuple[FieldRequirement, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.terms

    def matches(self, fields: Mapping[str, str]) -> bool:
        """True when every term holds; a field missing from ``fields`` reads as ``""``."""
        for term in self.terms:
            if (fields.get(term.field, "") == term.value) is not (term.operator == "="):
                return False
        return True

    def exact(self, label: str) -> str | None:
        """The value the selector requires ``label`` to equal, if any (``RequiresExactMatch``)."""
        for term in self.terms:
            if term.field == label and term.operator == "=":
                return term.value
        return None

    def __str__(self) -> str:
        return ",".join(str(term) for term in self.terms)


def _split_terms(text: str) -> list[str]:
    # fields.splitTerms: commas split terms unless backslash-escaped.
    terms, start, in_slash = [], 0, False
    for i, ch in enumerate(text):
        if in_slash:
            in_slash = False
        elif ch == "\\":
            in_slash = True
        elif ch == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    # fields.splitTerm: the leftmost operator wins, "!=" and "==" before "=".
    eq = term.find("=")
    if eq < 0:
        return None
    if eq > 0 and term[eq - 1] == "!":
        return term[:eq - 1], "!=", term[eq + 1:]
    if term.startswith("==", eq):
        return term[:eq], "=", term[eq + 2:]
    return term[:eq], "=", term[eq + 1:]


def _unescape_value(raw: str) -> str:
    # fields.UnescapeValue: only \\ \, \= are escapes; bare , and = are errors.
    if "\\" not in raw and "=" not in raw and "," not in raw:
        return raw
    out: list[str] = []
    in_slash = False
    for ch in raw:
        if in_slash:
            if ch not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            in_slash = False
        elif ch == "\\":
            in_slash = True
        elif ch in ",=":
            raise SelectorError(f"invalid field selector: unescaped character in value: {ord(ch)}")
        else:
            out.append(ch)
    if in_slash:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def parse_field_selector(text: str) -> FieldSelector:
    """Parse a ``fieldSelector`` query value (watch-protocol.md §9.2, ``fields.ParseSelector``).

    No whitespace trimming; empty terms are skipped. Labels are not checked here (see
    ``convert_field_selector``). Raises SelectorError with kube's exact message.
    """
    terms = []
    for part in sorted(_split_terms(text)) if text else ():
        if not part:
            continue
        split = _split_term(part)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        field, op, raw = split
        terms.append(FieldRequirement(field, op, _unescape_value(raw)))
    return FieldSelector(tuple(terms))


def convert_field_selector(resource: Resource, sel: FieldSelector) -> FieldSelector:
    """Apply the kind's field-label conversion: aliases, then reject unknown labels (§9.3).

    Raises SelectorError with the converter's message for ``resource.field_label_style``.
    """
    allowed = _compiled(resource).allowed
    terms = []
    for term in sel.terms:
        label = resource.field_label_aliases.get(term.field, term.field)
        if label not in allowed:
            raise SelectorError(_unsupported_label_message(resource, term.field))
        terms.append(term if label == term.field else FieldRequirement(label, term.operator,
                                                                       term.value))
    return FieldSelector(tuple(terms))


def _unsupported_label_message(resource: Resource, label: str) -> str:
    if resource.field_label_style == "default":
        # runtime.DefaultMetaV1FieldSelectorConversion
        return (f"{go_quote(label)} is not a known field selector: only "
                '"metadata.name", "metadata.namespace"')
    # k8s pkg/apis/core/v1/conversion.go; apiextensions pkg/apiserver/conversion/converter.go
    return f"field label not supported: {label}"


# --- selectable fields of an object ------------------------------------------------------------

Extractor = Callable[[Mapping[str, JSON]], str]


def _walk(obj: JSON, path: tuple[str, ...]) -> JSON:
    for key in path:
        try:
            obj = obj.get(key)
        except AttributeError:  # a scalar or list on the way: the field is absent
            return None
    return obj


def _render(value: JSON) -> str:
    """A field value as kube's ``fields.Set`` holds it (Go formatting of scalars)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "" if value is None or isinstance(value, dict | list) else str(value)


def _compile_source(source: str) -> Extractor:
    """One ``Resource.field_labels`` source (see the formatter comment in resources.py)."""
    kind, has_formatter, rest = source.partition(":")
    if not has_formatter:
        path = tuple(source.split("."))
        return lambda obj: _render(_walk(obj, path))
    paths = [tuple(p.split(".")) for p in rest.split("|") if p]
    if kind == "never":
        return lambda obj: ""
    if kind == "bool":
        return lambda obj: "true" if _walk(obj, paths[0]) is True else "false"
    if kind == "or":
        return lambda obj: next((v for v in (_render(_walk(obj, p)) for p in paths) if v), "")
    if kind == "first_ip":
        return lambda obj: _first_ip(obj, paths)
    raise ValueError(f"unknown field-label formatter in {source!r}")


def _first_ip(obj: Mapping[str, JSON], paths: list[tuple[str, ...]]) -> str:
    items = _walk(obj, paths[0])
    if isinstance(items, list) and items:
        first = items[0]
        return _render(first.get("ip")) if isinstance(first, dict) else ""
    return _render(_walk(obj, paths[1])) if len(paths) > 1 else ""


@dataclass(frozen=True, slots=True)
class _CompiledFields:
    resource: Resource
    allowed: frozenset[str]
    extractors: tuple[tuple[str, Extractor], ...]


_COMPILED: dict[int, _CompiledFields] = {}


def _compiled(resource: Resource) -> _CompiledFields:
    # Resource holds mappings, so it is unhashable: key by identity and re-check it.
    entry = _COMPILED.get(id(resource))
    if entry is None or entry.resource is not resource:
        entry = _CompiledFields(
            resource, frozenset(resource.all_field_labels()),
            tuple((label, _compile_source(src)) for label, src in resource.field_labels.items()))
        _COMPILED[id(resource)] = entry
    return entry


def field_set(resource: Resource, obj: Mapping[str, JSON]) -> dict[str, str]:
    """The selectable field values of ``obj``: what field selectors match against.

    Always has ``metadata.name``; ``metadata.namespace`` for namespaced kinds; then every
    ``resource.field_labels`` entry (absent values are ``""``). Never raises on odd shapes.
    """
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    fields = {"metadata.name": _render(meta.get("name"))}
    if resource.namespaced:
        fields["metadata.namespace"] = _render(meta.get("namespace"))
    for label, extract in _compiled(resource).extractors:
        fields[label] = extract(obj)
    return fields
