"""Label and field selectors: the module callers import selector parsing and matching from.

Parsers follow kube-apiserver v1.32 byte for byte, error texts included, because clients match on
them (watch-protocol.md §9). Selectors are immutable values; ``matches`` and ``field_set`` run per
event per watcher. Every parse or conversion failure raises ``SelectorError`` (a ``ValueError``)
whose ``message`` is kube's exact text; the server answers it as a 400 BadRequest.

The implementation is split by responsibility: ``label_selectors`` (``labels.Parse`` and
``metav1.LabelSelector``), ``field_selectors`` (``fields.ParseSelector`` and per-kind label
conversion), ``field_sets`` (an object's selectable field values), ``names`` (key and value
rules) and ``go_text`` (Go's quoting).
"""

from __future__ import annotations

from kubewire.go_text import go_quote
from kubewire.selectors.errors import SelectorError
from kubewire.selectors.field_sets import field_set
from kubewire.selectors.fields import (
    FieldRequirement,
    FieldSelector,
    convert_field_selector,
    parse_field_selector,
)
from kubewire.selectors.labels import (
    LabelSelector,
    Operator,
    Requirement,
    format_label_selector,
    label_selector_from_match,
    new_requirement,
    parse_label_selector,
)

__all__ = [
    "FieldRequirement",
    "FieldSelector",
    "LabelSelector",
    "Operator",
    "Requirement",
    "SelectorError",
    "convert_field_selector",
    "field_set",
    "format_label_selector",
    "go_quote",
    "label_selector_from_match",
    "new_requirement",
    "parse_field_selector",
    "parse_label_selector",
]
