"""The cost estimate sizes a comprehension's variable the way kube does when its range is not a
schema path (cel-go ``checker/cost.go`` paths, apiextensions ``compilation.go`` sizeEstimator).

cel-go gives the variable its range's path plus ``@items``; kube resolves a path from the rule's
root after cutting its first element. A range that is a call (``?:``, ``split``), a literal or a
macro has no path, so the variable is sized as the root itself: for an object, 0. Istio's
ServiceEntry CRD (1.30) relies on it and is accepted by kube-apiserver.
"""

from __future__ import annotations

from kubewire.server.apiextensions.validation_rules import cel_rules

ROOT = "spec.versions[0].schema.openAPIV3Schema"
UNBOUNDED_ADDRESSES = {"type": "array", "maxItems": 256, "items": {"type": "string"}}


def errors(rule: str) -> list[str]:
    spec = {"type": "object", "properties": {"addresses": UNBOUNDED_ADDRESSES,
                                             "resolution": {"type": "string", "maxLength": 32}},
            "x-kubernetes-validations": [{"rule": rule}]}
    _, errs = cel_rules.compile_rules({"type": "object", "properties": {"spec": spec}}, ROOT)
    return [str(e) for e in errs]


def test_iterating_a_schema_path_sizes_items_from_the_schema() -> None:
    # 256 items x an unbounded string's 3 MiB length: far over the 10M budget, as in kube.
    errs = errors('self.addresses.exists(k, k.contains("/"))')
    assert errs and "estimated rule cost exceeds budget" in errs[0]


def test_iterating_a_conditional_sizes_items_as_the_root_object() -> None:
    # Istio ServiceEntry's rule, verbatim: the range is a call, so kube sizes `k` as `self`.
    rule = ('!((has(self.addresses) ? self.addresses : []).exists(k, k.contains("/")) && '
            '!((has(self.resolution) ? self.resolution : "NONE") in ["STATIC", "NONE"]))')
    assert errors(rule) == []


def test_iterating_a_macro_result_sizes_items_as_the_root_object() -> None:
    assert errors('self.addresses.filter(a, a != "").exists(k, k.contains("/"))') == []
