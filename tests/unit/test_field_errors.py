"""kubewire.status.FieldError: bodies as apimachinery's ``field.Error.ErrorBody`` renders them
(crds.md §0)."""

from __future__ import annotations

from kubewire.status import FieldError, forbidden, invalid, not_supported, required


def test_bodies() -> None:
    assert str(required("spec.x", "why")) == "spec.x: Required value: why"
    assert str(forbidden("spec.x", "no")) == "spec.x: Forbidden: no"
    assert str(invalid("spec.x", True, "bad")) == "spec.x: Invalid value: true: bad"
    assert str(not_supported("spec.x", "c", ("a", "b"))) == (
        'spec.x: Unsupported value: "c": supported values: "a", "b"')
    assert str(FieldError("FieldValueDuplicate", "spec.x", "a")) == 'spec.x: Duplicate value: "a"'
    assert str(FieldError("FieldValueTooLong", "spec.x", "abc", "may not be more than 2 bytes")) \
        == "spec.x: Too long: may not be more than 2 bytes"


def test_too_many_prints_the_count() -> None:
    """field.TooMany's BadValue is the actual quantity and ErrorBody prints it."""
    err = FieldError("FieldValueTooMany", "spec.selectableFields", 9, "must have at most 8 items")
    assert str(err) == "spec.selectableFields: Too many: 9: must have at most 8 items"
    assert err.to_cause() == {"reason": "FieldValueTooMany", "field": "spec.selectableFields",
                              "message": "Too many: 9: must have at most 8 items"}
