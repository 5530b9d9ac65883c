"""Field selectors: parsing, matching and per-kind label conversion (apimachinery pkg/fields).

The parser follows kube-apiserver v1.32 byte for byte, error texts included (watch-protocol.md
§9.2, §9.3). Selectors are immutable values matched against ``field_sets.field_set``. Every parse
or conversion failure raises ``SelectorError`` with kube's exact text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kubewire.go_text import go_quote
from kubewire.resources import Resource
from kubewire.selectors.errors import SelectorError
from kubewire.selectors.field_sets import selectable_field_labels


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
    allowed = selectable_field_labels(resource)
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
    if resource.field_label_style == "batchv1.Job":  # pkg/apis/batch/v1/conversion.go
        return f"field label {go_quote(label)} not supported for batchv1.Job"
    # k8s pkg/apis/core/v1/conversion.go; apiextensions pkg/apiserver/conversion/converter.go
    return f"field label not supported: {label}"
