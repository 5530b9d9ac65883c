"""writes.validation.crds.check_schema: a CRD version's schema checked once per content (the
structural rules and every CEL rule compiled cost ~20 ms for Gateway's), the same answer after."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubewire.server.apiextensions.crd.gateway_crds import gateway_crds
from kubewire.server.apiextensions.validation_rules import cel_rules
from kubewire.server.writes.validation import crds

PATH = "spec.versions[0].schema.openAPIV3Schema"


def _schema() -> dict[str, Any]:
    crd = next(c for c in gateway_crds() if c["metadata"]["name"].startswith("gateways."))  # type: ignore[index, union-attr]
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]  # type: ignore[index, call-overload]
    return schema


def test_a_schema_is_compiled_once_per_content(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[str] = []
    real = cel_rules.compile_rules

    def counting(schema: Any, path: str) -> Any:
        compiled.append(path)
        return real(schema, path)

    monkeypatch.setattr(cel_rules, "compile_rules", counting)
    schema = _schema()
    schema["x-test-marker"] = "once"  # content no other test checks
    assert crds.check_schema(schema, PATH) == []
    assert crds.check_schema(copy.deepcopy(schema), PATH) == []  # equal content: kept
    assert compiled == [PATH]
    assert crds.check_schema(schema, "other") == [] and compiled == [PATH, "other"]


def test_errors_are_kept_and_handed_out_as_new_lists() -> None:
    schema = _schema()
    schema["properties"]["spec"]["x-kubernetes-validations"] = [{"rule": "self.nope >"}]
    first = crds.check_schema(schema, PATH)
    assert first and all(e.field.startswith(PATH) for e in first)
    first.clear()
    assert crds.check_schema(schema, PATH) != []  # the kept answer is not the caller's list


def test_the_number_of_schemas_kept_is_bounded() -> None:
    for i in range(crds.SCHEMA_CHECKS_KEPT + 5):
        crds.check_schema({"type": "object", "x-n": i}, PATH)
    assert len(crds._checked) <= crds.SCHEMA_CHECKS_KEPT
