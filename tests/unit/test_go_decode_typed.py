"""The typed decode (kubewire.schema.go_decode_typed) never accepts what the Go-decode walk
rejects, and accepts the valid objects of every kind, so the walk runs only for errors."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from typing import Any

import pytest

from kubewire.resources import REGISTRY
from kubewire.schema.go_decode import decode_error, walked_decode_error
from kubewire.schema.go_decode_typed import decodes_cleanly

_TIME = "2026-01-02T03:04:05Z"
_META = {"name": "x", "namespace": "default", "uid": "u", "resourceVersion": "5",
         "creationTimestamp": _TIME, "labels": {"a": "b"}, "annotations": {"c": "d"},
         "managedFields": [{"manager": "m", "operation": "Update", "apiVersion": "v1",
                            "time": _TIME, "fieldsType": "FieldsV1",
                            "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}}}}}]}
_CONTAINER = {"name": "c", "image": "i", "ports": [{"containerPort": 80, "protocol": "TCP"}],
              "resources": {"limits": {"cpu": "100m", "memory": "1Gi"},
                            "requests": {"cpu": "0.5"}},
              "livenessProbe": {"httpGet": {"port": "http", "path": "/"},
                                "periodSeconds": 10},
              "readinessProbe": {"tcpSocket": {"port": 8080}},
              "securityContext": {"runAsUser": 1000, "privileged": False,
                                  "capabilities": {"add": ["NET_ADMIN"]}},
              "env": [{"name": "E", "value": "v"}]}
SAMPLES: dict[tuple[str, str], dict[str, Any]] = {
    ("v1", "Pod"): {"metadata": _META, "spec": {
        "containers": [_CONTAINER], "activeDeadlineSeconds": 30,
        "tolerations": [{"key": "k", "operator": "Exists", "tolerationSeconds": 300}],
        "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1Gi"}}]},
        "status": {"phase": "Running", "startTime": _TIME, "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": _TIME}]}},
    ("apps/v1", "Deployment"): {"metadata": _META, "spec": {
        "replicas": 3, "selector": {"matchLabels": {"a": "b"}},
        "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [_CONTAINER]}}},
        "status": {"replicas": 3, "conditions": [{"type": "Available", "status": "True",
                                                  "lastUpdateTime": _TIME}]}},
    ("v1", "Service"): {"metadata": _META, "spec": {
        "ports": [{"port": 80, "targetPort": "http", "nodePort": 30000}],
        "clusterIP": "10.0.0.1", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 5}}}},
    ("v1", "Secret"): {"metadata": _META, "type": "Opaque",
                       "data": {"k": "aGVsbG8="}, "stringData": {"s": "t"}},
    ("v1", "Node"): {"metadata": _META, "status": {"capacity": {"cpu": "4", "pods": "110"},
                                                   "allocatable": {"memory": "8Gi"}}},
    ("coordination.k8s.io/v1", "Lease"): {"metadata": _META, "spec": {
        "holderIdentity": "h", "leaseDurationSeconds": 15,
        "renewTime": "2026-01-02T03:04:05.123456Z"}},
    ("v1", "ConfigMap"): {"metadata": _META, "data": {"a": "b"},
                          "binaryData": {"b": "aGk="}},
}
_VALUES: list[Any] = [
    None, 0, -1, 2**31 - 1, 2**31, -(2**31) - 1, 2**63, 1.5, 1.0, float("inf"), True, False,
    "", "x", "5", "100m", "1Gi", "1e3", "+1", "1.5.5", "25%", _TIME, "2026-02-30T00:00:00Z",
    "2026-01-02T03:04:05.123456Z", "2026-01-02 03:04:05", "aGVsbG8=", "aGVsbG8", "!!", [],
    [1, 256], [None, 0], [-1], ["x"], [True], {}, {"a": 1}, {"containerPort": "x"},
    {"name": 1}, [{"port": "x"}],
]
_NAMES = ["containerPort", "image", "ports", "port", "creationTimestamp", "renewTime", "cpu",
          "replicas", "data", "name", "maxSurge", "sizeLimit", "unknownField", "time",
          "tolerationSeconds", "privileged", "add", "fieldsV1"]


def _places(value: Any) -> list[tuple[Any, Any]]:
    """Every (container, key-or-index) in ``value``."""
    out: list[tuple[Any, Any]] = []
    if isinstance(value, dict):
        for key, child in value.items():
            out.append((value, key))
            out.extend(_places(child))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            out.append((value, index))
            out.extend(_places(child))
    return out


def mutated(obj: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    for _ in range(rng.randint(1, 3)):
        places = _places(out)
        container, key = rng.choice(places)
        if isinstance(container, dict) and rng.random() < 0.3:
            key = rng.choice(_NAMES)
        container[key] = copy.deepcopy(rng.choice(_VALUES))
    return out


@pytest.mark.parametrize("version_kind", sorted(SAMPLES), ids="/".join)
def test_valid_objects_take_the_typed_path(version_kind: tuple[str, str]) -> None:
    api_version, kind = version_kind
    obj = {"apiVersion": api_version, "kind": kind, **SAMPLES[version_kind]}
    assert walked_decode_error(api_version, kind, obj) is None
    assert decodes_cleanly(api_version, kind, obj)


Check = Callable[[str, str, dict[str, Any]], "str | None"]


def check_typed_fast_path(version_kind: tuple[str, str], walk: Check, answer: Check,
                          seed: str) -> None:
    """``answer`` (a check that asks the typed decode first) on 1,500 mutations of the
    kind's sample: every object the typed decode accepts is one ``walk`` accepts, and
    ``answer`` always says what ``walk`` says."""
    api_version, kind = version_kind
    obj = {"apiVersion": api_version, "kind": kind, **SAMPLES[version_kind]}
    assert walk(api_version, kind, obj) is None
    rng = random.Random(f"{seed}{api_version}/{kind}")
    accepted = rejected = 0
    for _ in range(1500):
        candidate = mutated(obj, rng)
        walked = walk(api_version, kind, candidate)
        if decodes_cleanly(api_version, kind, candidate):
            assert walked is None, candidate
            accepted += 1
        else:
            rejected += walked is not None
        assert answer(api_version, kind, candidate) == walked
    assert accepted > 100 and rejected > 100  # both sides of the line were exercised


@pytest.mark.parametrize("version_kind", sorted(SAMPLES), ids="/".join)
def test_the_typed_decode_accepts_nothing_the_walk_rejects(
        version_kind: tuple[str, str]) -> None:
    check_typed_fast_path(version_kind, walked_decode_error, decode_error, "")


RECURSIVE_KIND = "apiextensions.k8s.io/customresourcedefinitions"


def test_every_builtin_kind_has_a_typed_form() -> None:
    # The CRD's JSONSchemaProps is recursive, which no msgspec type expresses: walked instead.
    for resource in REGISTRY:
        if not resource.is_custom and resource.id != RECURSIVE_KIND:
            assert decodes_cleanly(resource.api_version, resource.kind,
                                   {"apiVersion": resource.api_version, "kind": resource.kind,
                                    "metadata": {"name": "x"}}), resource.id
