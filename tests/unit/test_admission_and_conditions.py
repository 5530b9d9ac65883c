"""The pure parts of pod admission (``writes/admission``) and of the namespace controller's
conditions (``controllers/namespace_conditions``): the cases the wire tests do not reach."""

from __future__ import annotations

from typing import Any

import pytest

from kubewire.schema.validate import go_zero_fields
from kubewire.server.controllers.namespace_conditions import (
    CONDITION_TYPES,
    ContentTotals,
    updated_conditions,
)
from kubewire.server.writes.admission import PodFacts, admit_pod_create, admit_pod_update
from kubewire.server.writes.limit_ranger import default_pod
from kubewire.status import Forbidden

ACCOUNT: dict[str, Any] = {"metadata": {"name": "default"}}


def pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}], **spec}}


def test_mirror_pods_are_left_alone() -> None:
    mirror = pod()
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "x"}
    assert admit_pod_create(mirror, "ns", PodFacts(None, "abcde")) == mirror


def test_an_existing_token_volume_is_reused_not_added_twice() -> None:
    given = pod(volumes=[{"name": "kube-api-access-zzzzz", "emptyDir": {}}])
    spec = admit_pod_create(given, "ns", PodFacts(ACCOUNT, "abcde"))["spec"]
    assert [v["name"] for v in spec["volumes"]] == ["kube-api-access-zzzzz"]
    assert spec["containers"][0]["volumeMounts"][0]["name"] == "kube-api-access-zzzzz"


def test_what_admission_adds_has_its_go_zero_values() -> None:
    # ``validate_admitted`` does not fill Go's zero values again after admission: everything
    # the mutating plugins add must already carry each field Go writes without omitempty.
    given = go_zero_fields("v1", "Pod", pod(initContainers=[{"name": "i"}]), only=("spec",))
    limits = {"spec": {"limits": [{"type": "Container", "default": {"cpu": "1"},
                                   "defaultRequest": {"memory": "1Mi"}}]}}
    default_pod(given, [limits])
    account = {"metadata": {"name": "default"}, "imagePullSecrets": [{"name": "registry"}]}
    classes = {"high": {"metadata": {"name": "high"}, "value": 1000,
                        "preemptionPolicy": "Never", "globalDefault": True}}
    admitted = admit_pod_create(given, "ns", PodFacts(account, "abcde", classes))
    spec = admitted["spec"]
    assert spec["volumes"] and spec["tolerations"] and spec["imagePullSecrets"]
    assert spec["containers"][0]["resources"]["limits"] == {"cpu": "1"}
    assert spec["priority"] == 1000
    assert go_zero_fields("v1", "Pod", admitted, only=("spec",))["spec"] is spec


def test_the_input_is_not_changed() -> None:
    given = pod()
    admit_pod_create(given, "ns", PodFacts(ACCOUNT, "abcde"))
    assert given == pod()


@pytest.mark.parametrize("toleration", [
    {"operator": "Exists"},  # empty key and effect tolerate every taint
    {"operator": "Exists", "effect": "NoExecute"},
])
def test_a_toleration_of_everything_needs_no_defaults(toleration: dict[str, Any]) -> None:
    spec = admit_pod_create(pod(tolerations=[toleration]), "ns",
                            PodFacts(ACCOUNT, "abcde"))["spec"]
    assert spec["tolerations"] == [toleration]


def test_a_generated_name_is_named_in_refusals() -> None:
    given = pod(serviceAccountName="gone")
    given["metadata"] = {"generateName": "web-"}
    with pytest.raises(Forbidden) as err:
        admit_pod_create(given, "ns", PodFacts(None, "abcde"))
    assert err.value.message.startswith('pods "web-" is forbidden: error looking up')


def test_update_keeps_stored_priority_and_policy() -> None:
    old = pod(priority=0, preemptionPolicy="PreemptLowerPriority")
    spec = admit_pod_update(old, pod())["spec"]
    assert spec["priority"] == 0 and spec["preemptionPolicy"] == "PreemptLowerPriority"


def test_conditions_keep_their_transition_time_while_their_status_holds() -> None:
    first = updated_conditions([], ContentTotals(remaining={("pods", ""): 2}), "T1")
    assert first is not None
    assert [c["type"] for c in first] == list(CONDITION_TYPES)
    assert updated_conditions(first, ContentTotals(remaining={("pods", ""): 2}), "T2") is None
    fewer = updated_conditions(first, ContentTotals(remaining={("pods", ""): 1}), "T3")
    assert fewer is not None
    remaining = next(c for c in fewer if c["type"] == "NamespaceContentRemaining")
    assert remaining["lastTransitionTime"] == "T1"  # still True: only the message changed
    assert remaining["message"] == "Some resources are remaining: pods. has 1 resource instances"
    done = updated_conditions(fewer, ContentTotals(), "T4")
    assert done is not None
    remaining = next(c for c in done if c["type"] == "NamespaceContentRemaining")
    assert (remaining["status"], remaining["lastTransitionTime"]) == ("False", "T4")


def test_other_conditions_stay() -> None:
    other = {"type": "example.com/Mine", "status": "True"}
    result = updated_conditions([other], ContentTotals(), "T")
    assert result is not None and result[0] == other
