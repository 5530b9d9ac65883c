"""The pure parts of CRD versions: the storage codec (``versions``) and the ConversionReview
checks (``conversion_review``), with kube's texts (webhook_converter.go, crds.md §4.3, §6)."""

from __future__ import annotations

from typing import Any

import pytest

from kubewire.server.apiextensions.crd.conversion_review import (
    ConversionFailure,
    checked_object,
    converted_objects,
    gvk_text,
    review_request,
    review_version,
)
from kubewire.server.apiextensions.crd.versions import CRDConversion


def _crd(strategy: str = "None") -> dict[str, Any]:
    def version(name: str, storage: bool, props: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "served": True, "storage": storage, "schema": {"openAPIV3Schema": {
            "type": "object", "properties": {"spec": {"type": "object", "properties": props}}}}}

    return {"metadata": {"name": "gizmos.example.com"}, "spec": {
        "group": "example.com", "conversion": {"strategy": strategy, "webhook": {
            "conversionReviewVersions": ["v2", "v1beta1", "v1"]}},
        "versions": [version("v1", True, {"a": {"type": "string", "default": "x"},
                                          "b": {"type": "integer"}}),
                     version("v2", False, {"a": {"type": "string"}, "c": {"type": "string"}})]}}


def _obj(version: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"example.com/{version}", "kind": "Gizmo",
            "metadata": {"name": "g", "uid": "u1"}, "spec": spec}


def test_read_prunes_and_defaults_in_the_stored_version_then_prunes_in_the_read_one() -> None:
    conversion = CRDConversion(_crd())
    read = conversion.read(_obj("v1", b=3, z=1), "example.com/v2")
    assert read["apiVersion"] == "example.com/v2" and read["spec"] == {"a": "x"}
    stored_v2 = conversion.read(_obj("v2", c="k"), "example.com/v1")
    assert stored_v2["spec"] == {}  # v2 defaults nothing; v1 prunes c and adds no default
    assert conversion.read(_obj("v1"), "example.com/v1")["spec"] == {"a": "x"}


def test_write_converts_and_prunes_with_the_storage_schema() -> None:
    written = CRDConversion(_crd()).write(_obj("v2", a="y", c="k"), "example.com/v1")
    assert written["apiVersion"] == "example.com/v1" and written["spec"] == {"a": "y"}


def test_a_webhook_crd_reads_without_changing_the_version() -> None:
    conversion = CRDConversion(_crd("Webhook"))
    assert conversion.webhook
    read = conversion.read(_obj("v1", b=3), "example.com/v2")
    assert read["apiVersion"] == "example.com/v1" and read["spec"] == {"a": "x", "b": 3}
    assert conversion.converted(_obj("v2", b=3, c="k"), "example.com/v2")["spec"] == {"c": "k"}


def test_review_request_and_version() -> None:
    assert review_version(_crd()) == "v1beta1"  # the first one kube can send
    assert review_request("v1", "id", "example.com/v2", [{"x": 1}]) == {
        "kind": "ConversionReview", "apiVersion": "apiextensions.k8s.io/v1",
        "request": {"uid": "id", "desiredAPIVersion": "example.com/v2", "objects": [{"x": 1}]}}
    assert gvk_text("example.com/v1", "Gizmo") == "example.com/v1, Kind=Gizmo"


def _answer(**response: Any) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": "id", "result": {"status": "Success"}, **response}}


@pytest.mark.parametrize(("answer", "message"), [
    ({"apiVersion": "v1", "kind": "Status"},
     "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got /v1, "
     "Kind=Status"),
    ({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"},
     "no response provided"),
    (_answer(uid="other"), 'expected response.uid="id", got "other"'),
    (_answer(result={"status": "Failure", "message": "no"}), "no"),
    (_answer(result={}), "response.result.status was '', not 'Success'"),
])
def test_bad_answers(answer: dict[str, Any], message: str) -> None:
    with pytest.raises(ConversionFailure) as err:
        converted_objects("v1", "id", answer)
    assert str(err.value) == message


def test_v1beta1_answers_are_not_checked_for_kind_or_uid() -> None:
    answer = {"response": {"uid": "x", "result": {"status": "Success"}, "convertedObjects": [1]}}
    assert converted_objects("v1beta1", "id", answer) == [1]


def test_checked_object_restores_metadata_but_labels_and_annotations() -> None:
    original = _obj("v1")
    original["metadata"]["labels"] = {"a": "1"}
    answered = _obj("v2")
    answered["metadata"] = {"name": "g", "uid": "u1", "labels": {"b": "2"}, "generation": 9}
    out = checked_object(original, answered, "example.com/v2", 0, False)
    assert out["metadata"] == {"name": "g", "uid": "u1", "labels": {"b": "2"}}
    answered["metadata"]["labels"] = {"bad key!": "x"}
    with pytest.raises(ConversionFailure) as err:
        checked_object(original, answered, "example.com/v2", 0, False)
    assert str(err.value).startswith(
        'returned invalid metadata: metadata.labels: Invalid value: "bad key!": name part must')
    wrong = _obj("v3")
    with pytest.raises(ConversionFailure) as err:
        checked_object(original, wrong, "example.com/v2", 2, True)
    assert str(err.value) == ("returned invalid converted object at index 2: invalid "
                              "groupVersion (expected example.com/v2, received example.com/v3)")
