"""kubewire.selectors: the package callers import selectors from re-exports its modules."""

from __future__ import annotations

from kubewire import go_text, selectors
from kubewire.selectors import errors as selector_error
from kubewire.selectors import field_sets
from kubewire.selectors import fields as field_selectors
from kubewire.selectors import labels as label_selectors

HOMES = {
    "FieldRequirement": field_selectors, "FieldSelector": field_selectors,
    "convert_field_selector": field_selectors, "parse_field_selector": field_selectors,
    "field_set": field_sets, "go_quote": go_text,
    "LabelSelector": label_selectors, "Operator": label_selectors,
    "Requirement": label_selectors, "format_label_selector": label_selectors,
    "label_selector_from_match": label_selectors, "new_requirement": label_selectors,
    "parse_label_selector": label_selectors, "SelectorError": selector_error,
}


def test_reexports_are_the_implementations() -> None:
    assert sorted(selectors.__all__) == sorted(HOMES)
    for name, home in HOMES.items():
        assert getattr(selectors, name) is getattr(home, name)


def test_selector_error_is_a_value_error_with_the_message() -> None:
    err = selectors.SelectorError("found 'b', expected: ',' or 'end of string'")
    assert isinstance(err, ValueError)
    assert err.message == str(err) == "found 'b', expected: ',' or 'end of string'"
