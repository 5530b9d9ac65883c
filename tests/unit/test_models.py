"""Generated models: regeneration is stable, decoding is typed, unknown fields survive."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import pytest

import kubewire.models as models
from kubewire.models import (
    KINDS,
    Deployment,
    ObjectMeta,
    Pod,
    Status,
    decode,
    encode,
    model_for,
    to_dict,
)
from kubewire.resources import REGISTRY
from tests.integration.kinds import ALL_KINDS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import gen_models  # noqa: E402


def test_committed_models_match_the_generator() -> None:
    generated = gen_models.generate()
    package = ROOT / "src/kubewire/models"
    committed = {p.name for p in package.glob("*.py")} - {"base.py"}
    assert committed == set(generated)
    for name, text in generated.items():
        assert (package / name).read_text() == text, f"{name} is stale: run tools/gen_models.py"


@pytest.mark.parametrize(("wire", "python"), [
    ("podIPs", "pod_ips"), ("hostIPC", "host_ipc"), ("apiVersion", "api_version"),
    ("clusterIP", "cluster_ip"), ("IPFamilies", "ip_families"), ("continue", "continue_"),
    ("from", "from_"), ("targetCPUUtilizationPercentage", "target_cpu_utilization_percentage"),
])
def test_snake_case_names(wire: str, python: str) -> None:
    assert gen_models.snake_case(wire) == python


def test_every_served_kind_has_a_model_with_its_api_facts() -> None:
    assert {(c.API_VERSION, c.KIND) for c in KINDS} == {(r.api_version, r.kind)
                                                         for r in REGISTRY}
    for res in REGISTRY:
        cls = model_for(res.api_version, res.kind)
        assert cls is not None
        assert (res.plural, res.namespaced) == (cls.PLURAL, cls.NAMESPACED)
    assert model_for("v1", "Nope") is None


@pytest.mark.parametrize("kind", [k for k in ALL_KINDS if not k.is_custom],
                         ids=lambda k: k.kind)  # custom kinds have no model: clients use dicts
def test_sample_objects_round_trip_through_models(kind: object) -> None:
    sample = kind.obj("x", labels={"app": "web"})  # type: ignore[attr-defined]
    cls = model_for(sample["apiVersion"], sample["kind"])
    assert cls is not None
    obj = decode(cls, msgspec.json.encode(sample))
    assert to_dict(msgspec.structs.replace(obj, _source=None)) == sample


def test_attributes_are_snake_case_and_typed() -> None:
    data = (b'{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d",'
            b'"resourceVersion":"7"},"spec":{"replicas":2,"selector":{"matchLabels":{"a":"b"}},'
            b'"template":{"spec":{"containers":[{"name":"c","image":"i",'
            b'"ports":[{"containerPort":80}]}]}}}}')
    dep = decode(Deployment, data)
    assert dep.metadata is not None and dep.metadata.resource_version == "7"
    assert dep.spec is not None and dep.spec.replicas == 2
    assert dep.spec.template is not None and dep.spec.template.spec is not None
    assert dep.spec.template.spec.containers is not None
    assert dep.spec.template.spec.containers[0].ports is not None
    assert dep.spec.template.spec.containers[0].ports[0].container_port == 80
    with pytest.raises(msgspec.ValidationError, match=r"\$\.spec\.replicas"):
        decode(Deployment, data.replace(b'"replicas":2', b'"replicas":"two"'))


NEWER_POD = (b'{"apiVersion":"v1","kind":"Pod","futureTop":{"a":[1,2]},'
             b'"metadata":{"name":"p","labels":{"x":"y"},"futureMeta":"m"},'
             b'"spec":{"futureSpec":true,"containers":['
             b'{"name":"a","image":"i","futureContainer":1},'
             b'{"name":"b","image":"j","futureContainer":2}]}}')


def test_replace_keeps_fields_the_models_do_not_know() -> None:
    pod = decode(Pod, NEWER_POD)
    assert pod.metadata is not None and pod.spec is not None and pod.spec.containers
    relabelled = msgspec.structs.replace(
        pod, metadata=msgspec.structs.replace(pod.metadata, labels={"x": "z"}))
    # Reordering containers must not move one container's unknown field to the other.
    reordered = msgspec.structs.replace(
        relabelled, spec=msgspec.structs.replace(
            pod.spec, containers=list(reversed(pod.spec.containers))))
    out = msgspec.json.decode(encode(reordered))
    assert out["futureTop"] == {"a": [1, 2]}
    assert out["metadata"] == {"name": "p", "labels": {"x": "z"}, "futureMeta": "m"}
    assert out["spec"]["futureSpec"] is True
    assert [(c["name"], c["futureContainer"]) for c in out["spec"]["containers"]] \
        == [("b", 2), ("a", 1)]


def test_clearing_a_known_field_clears_it() -> None:
    pod = decode(Pod, NEWER_POD)
    assert pod.metadata is not None
    out = to_dict(msgspec.structs.replace(
        pod, metadata=msgspec.structs.replace(pod.metadata, labels=None)))
    assert "labels" not in out["metadata"]
    assert out["metadata"]["futureMeta"] == "m"


def test_new_objects_get_api_version_and_kind() -> None:
    pod = Pod(metadata=ObjectMeta(name="n"))
    assert msgspec.json.decode(encode(pod)) == {"apiVersion": "v1", "kind": "Pod",
                                                 "metadata": {"name": "n"}}
    assert encode({"a": 1}) == b'{"a":1}'


def test_meta_types_decode() -> None:
    status = msgspec.json.decode(
        b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired",'
        b'"code":410,"details":{"causes":[{"reason":"x","field":"f"}]}}', type=Status)
    assert (status.code, status.reason) == (410, "Expired")
    assert status.details is not None and status.details.causes is not None
    assert status.details.causes[0].field == "f"
    assert set(models.__all__) >= {"ObjectMeta", "ListMeta", "Status", "WatchEvent",
                                   "DeleteOptions"}
