"""writes.validation.crds: a CRD create's answer is kept by what validation reads, so a second
server of a process validates its pre-installed CRDs once, and an object that differs in what is
read never gets another's answer."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubewire.resources import REGISTRY
from kubewire.server.apiextensions.crd import crd_strategy
from kubewire.server.apiextensions.crd.crd_defaults import default_crd
from kubewire.server.apiextensions.crd.crd_strategy import prepare_for_create
from kubewire.server.apiextensions.crd.gateway_crds import gateway_crds
from kubewire.server.writes.validation import crds as crd_validation

KIND = REGISTRY.by_id(crd_strategy.CRD_ID)
assert KIND is not None


def created(obj: dict[str, Any], uid: str) -> dict[str, Any]:
    """As the create path hands ``obj`` to validation, with an annotation that keeps it off
    the build-time list of known-valid creates (``known_valid_crds``), so the cache answers."""
    out = copy.deepcopy(obj)
    out["metadata"]["annotations"]["note"] = "cached"
    default_crd(out)
    prepare_for_create(out)
    out["metadata"].update(uid=uid, creationTimestamp="2024-01-01T00:00:00Z")
    return out


def answer(obj: dict[str, Any]) -> list[str]:
    return [str(e) for e in crd_validation.validate_custom_resource_definition(KIND, obj, None)]


@pytest.fixture(autouse=True)
def empty_cache() -> None:
    crd_validation._created.clear()


def test_the_same_crd_made_by_another_server_is_answered_from_the_cache() -> None:
    http_route = next(c for c in gateway_crds() if c["metadata"]["name"].startswith("httproutes"))
    assert answer(created(http_route, "a")) == []
    assert len(crd_validation._created) == 1
    assert answer(created(http_route, "b")) == []  # another uid and time: not read, same key
    assert len(crd_validation._created) == 1


def test_a_difference_in_what_is_read_is_validated_anew() -> None:
    http_route = next(c for c in gateway_crds() if c["metadata"]["name"].startswith("httproutes"))
    assert answer(created(http_route, "a")) == []
    renamed = created(http_route, "a")
    renamed["metadata"]["name"] = "routes.gateway.networking.k8s.io"
    assert answer(renamed) == [
        'metadata.name: Invalid value: "routes.gateway.networking.k8s.io": must be '
        'spec.names.plural+"."+spec.group']
    unapproved = created(http_route, "a")
    del unapproved["metadata"]["annotations"]["api-approved.kubernetes.io"]
    assert [e.split(":")[0] for e in answer(unapproved)] == [
        "metadata.annotations[api-approved.kubernetes.io]"]
    assert len(crd_validation._created) == 3


def test_the_cache_is_bounded() -> None:
    base = next(c for c in gateway_crds() if c["metadata"]["name"].startswith("gatewayclasses"))
    for i in range(crd_validation.CREATE_CHECKS_KEPT + 5):
        obj = created(base, "a")
        obj["metadata"]["annotations"]["note"] = str(i)
        assert answer(obj) == []
    assert len(crd_validation._created) == crd_validation.CREATE_CHECKS_KEPT
