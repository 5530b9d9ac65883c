"""kwok Stages as kubewire reads them (pure): jq-like selector keys, Go-template status
templates, delays, the stage chosen for a pod, and the kubelet statuses the built-in stages
write."""

from __future__ import annotations

import random

import pytest

from kubewire.cluster.nodes import gotemplate
from kubewire.cluster.nodes.node_status import (
    FleetOptions,
    IPPool,
    fleet,
    node_names,
    parse_labels,
    renewed_lease,
)
from kubewire.cluster.nodes.pod_status import (
    Where,
    exited,
    normalized_image,
    pending,
    running,
    terminated,
)
from kubewire.cluster.nodes.query import QueryError, evaluate
from kubewire.cluster.nodes.stages import (
    StageError,
    choose,
    default_pod_stages,
    load_stages,
    parse_go_duration,
)

POD = {"metadata": {"name": "p", "namespace": "default", "uid": "u-1",
                    "ownerReferences": [{"kind": "ReplicaSet"}, {"kind": "Job"}],
                    "annotations": {"example.com/x": "1"}},
       "spec": {"nodeName": "n0", "restartPolicy": "Always",
                "containers": [{"name": "a", "image": "nginx"},
                               {"name": "b", "image": "ghcr.io/x/y:2",
                                "volumeMounts": [{"name": "v", "mountPath": "/v",
                                                  "readOnly": True}]}]},
       "status": {"phase": "Pending",
                  "conditions": [{"type": "Ready", "status": "False"},
                                 {"type": "PodScheduled", "status": "True"}]}}


@pytest.mark.parametrize(("expr", "want"), [
    (".status.phase", ["Pending"]),
    (".metadata.deletionTimestamp", [None]),
    (".metadata.ownerReferences.[].kind", ["ReplicaSet", "Job"]),
    (".metadata.ownerReferences[].kind", ["ReplicaSet", "Job"]),
    ('.metadata.annotations["example.com/x"]', ["1"]),
    ('.metadata.annotations."example.com/x"', ["1"]),
    ('.status.conditions.[] | select( .type == "Ready" ) | .status', ["False"]),
    (".spec.containers[1].name", ["b"]),
    (".spec.missing.[]", []),
])
def test_jq_keys(expr: str, want: list[object]) -> None:
    assert evaluate(expr, POD) == want


@pytest.mark.parametrize("expr", ["status.phase", ".a | length", '.a | select(.b != "c")',
                                  ".a[", "map(.x)"])
def test_unsupported_jq_is_refused(expr: str) -> None:
    with pytest.raises(QueryError):
        evaluate(expr, POD)


def test_go_durations() -> None:
    assert parse_go_duration("1m30s") == 90
    assert parse_go_duration("250ms") == pytest.approx(0.25)
    assert parse_go_duration("-2s") == -2
    with pytest.raises(ValueError):
        parse_go_duration("5 seconds")


def test_go_templates() -> None:
    funcs = gotemplate.kwok_funcs(now=lambda: "T", node_ip=lambda *_: "1.2.3.4",
                                  pod_ip=lambda *_: "10.0.0.2")
    template = """{{ $now := Now }}{{ $root := . }}
{{- range $i, $c := .spec.containers }}
- {{ $i }} {{ $c.name | Quote }} {{ index $root.spec.containers $i "image" }}
  {{- if eq $c.name "a" }} first{{ else if eq $c.name "b" }} second{{ else }} other{{ end }}
{{- end }}
{{ with .metadata }}{{ .name }}{{ end }} {{ or .spec.hostNetwork false }} {{ $now }}
{{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) | Quote }} {{ .missing }}
{{ range .spec.initContainers }}never{{ else }}none{{ end }} {{ len .spec.containers }}"""
    assert gotemplate.render(template, POD, funcs) == (
        '\n- 0 "a" nginx first\n- 1 "b" ghcr.io/x/y:2 second\n'
        'p false T\n"10.0.0.2" <no value>\nnone 2')
    with pytest.raises(gotemplate.TemplateError):
        gotemplate.render("{{ Unknown .x }}", POD)
    with pytest.raises(gotemplate.TemplateError):
        gotemplate.render("{{ if .x }}open", POD)


def test_a_function_named_as_an_argument_is_called_as_go_does() -> None:
    """kwok's chaos stages write ``or .metadata.annotations dict`` (sprig's ``dict``): Go calls
    a function given as an argument, so an object without annotations indexes an empty map."""
    template = ('{{ $a := or .metadata.annotations dict }}[{{ index $a "k" }}]'
                '{{ $d := dict "x" 1 "y" }} {{ index $d "x" }} {{ index $d "y" | Quote }}')
    assert gotemplate.render(template, {"metadata": {}}) == '[<no value>] 1 ""'
    assert gotemplate.render(template, {"metadata": {"annotations": {"k": "v"}}}) == \
        '[v] 1 ""'
    gotemplate.check_template(template)
    with pytest.raises(gotemplate.TemplateError):
        gotemplate.check_template("{{ if .x }}open")


STAGE = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: slow-fail}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchLabels: {fail: "yes"}
    matchExpressions:
    - {key: .status.phase, operator: In, values: [Running]}
  weight: 1
  delay:
    durationMilliseconds: 1000
    jitterDurationMilliseconds: 2000
  next:
    statusTemplate: "phase: Failed"
    event: {type: Warning, reason: Boom, message: it failed}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: skipped}
"""


def test_stage_files_are_read_as_kwok_writes_them() -> None:
    (stage,) = load_stages(STAGE)
    assert (stage.name, stage.kind, stage.weight) == ("slow-fail", "Pod", 1)
    assert stage.next.event is not None and stage.next.event.reason == "Boom"
    pod = {"metadata": {"labels": {"fail": "yes"}}, "status": {"phase": "Running"}}
    assert stage.matches(pod)
    assert not stage.matches({**pod, "status": {"phase": "Pending"}})
    assert not stage.matches({**pod, "metadata": {}})
    delays = {stage.delay.seconds(pod, 0.0, random.Random(i)) for i in range(20)}
    assert all(1.0 <= d <= 2.0 for d in delays) and len(delays) > 1
    with pytest.raises(StageError):
        load_stages(STAGE.replace("kwok.x-k8s.io/v1alpha1", "example/v1"))
    with pytest.raises(StageError):
        load_stages(STAGE.replace("operator: In", "operator: Near"))


def test_built_in_stages_follow_a_pod() -> None:
    stages = default_pod_stages()
    rng = random.Random(0)
    fresh = {"metadata": {"name": "p", "uid": "u"}, "spec": {"nodeName": "n"},
             "status": {"phase": "Pending"}}
    chosen = choose(stages, fresh, rng)
    assert chosen is not None and chosen.name == "pod-create"
    started = {**fresh, "status": {"phase": "Pending", "startTime": "T"}}
    chosen = choose(stages, started, rng)
    assert chosen is not None and chosen.name == "pod-ready"
    job = {**started, "metadata": {"ownerReferences": [{"kind": "Job"}]},
           "spec": {"restartPolicy": "Never"}, "status": {"phase": "Running", "startTime": "T"}}
    chosen = choose(stages, job, rng)
    assert chosen is not None and chosen.name == "pod-complete"
    assert choose(stages, {**job, "metadata": {}}, rng) is None
    deleting = {**started, "metadata": {"deletionTimestamp": "T"}}
    chosen = choose(stages, deleting, rng)
    assert chosen is not None and chosen.name == "pod-terminate"
    ended = {**deleting, "status": {"phase": "Succeeded"}}
    chosen = choose(stages, ended, rng)
    assert chosen is not None and chosen.name == "pod-delete" and chosen.next.delete


WHERE = Where("172.18.0.2", "10.224.0.2", "2026-01-01T00:00:00Z")


def test_kubelet_statuses() -> None:
    first = pending(POD, WHERE).status
    assert first["metadata"] == {"uid": "u-1"}
    status = first["status"]
    assert [c["type"] for c in status["$setElementOrder/conditions"]] == [
        "PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["message"] == "containers with unready status: [a b]"
    assert ready["reason"] == "ContainersNotReady"
    assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert status["containerStatuses"][0]["imageID"] == ""
    assert status["startTime"] == WHERE.now and "podIP" not in status

    pod = {**POD, "status": status}
    built = running(pod, WHERE)
    status = built.status["status"]
    assert status["phase"] == "Running" and status["podIPs"] == [{"ip": "10.224.0.2"}]
    b = status["containerStatuses"][1]
    assert b["image"] == "ghcr.io/x/y:2" and b["imageID"].startswith("ghcr.io/x/y@sha256:")
    assert b["volumeMounts"] == [{"name": "v", "mountPath": "/v", "readOnly": True,
                                  "recursiveReadOnly": "Disabled"}]
    assert [e.reason for e in built.events] == ["Pulling", "Pulled", "Created", "Started",
                                                "Pulled", "Created", "Started"]
    # PodScheduled was True before: its transition time is kept
    scheduled = next(c for c in status["conditions"] if c["type"] == "PodScheduled")
    assert "lastTransitionTime" in scheduled

    pod = {**POD, "status": status}
    gone = terminated(pod, WHERE)
    assert gone.status["status"]["phase"] == "Succeeded"
    assert [e.message for e in gone.events] == ["Stopping container a", "Stopping container b"]
    failing = {**pod, "metadata": {**pod["metadata"],
                                   "annotations": {"kubewire.io/exit-code": "2"}}}
    restarted = exited(failing, WHERE).status["status"]["containerStatuses"][0]
    assert restarted["restartCount"] == 1
    assert restarted["lastState"]["terminated"]["exitCode"] == 2
    never = {**failing, "spec": {**failing["spec"], "restartPolicy": "Never"}}
    assert exited(never, WHERE).status["status"]["phase"] == "Failed"


def test_image_names() -> None:
    assert normalized_image("nginx") == "docker.io/library/nginx:latest"
    assert normalized_image("bitnami/redis:7") == "docker.io/bitnami/redis:7"
    assert normalized_image("localhost:5000/x") == "localhost:5000/x:latest"
    assert normalized_image("nginx@sha256:ab") == "docker.io/library/nginx@sha256:ab"


def test_fleet_names_addresses_and_pools() -> None:
    assert node_names(FleetOptions(count=3, naming="kind", name_prefix="kubewire-worker")) == [
        "kubewire-worker", "kubewire-worker2", "kubewire-worker3"]
    nodes = fleet(FleetOptions(count=300))
    assert (nodes[299].ip, nodes[299].pod_cidr) == ("172.18.1.45", "10.225.43.0/24")
    with pytest.raises(ValueError, match="need a wider one"):
        fleet(FleetOptions(count=300, pod_cidr="10.244.0.0/16"))
    pool = IPPool("10.0.0.0/30")
    assert pool.get() == "10.0.0.2"
    with pytest.raises(ValueError, match="exhausted"):
        pool.get()
    pool.put("10.0.0.2")
    assert pool.get() == "10.0.0.2"


def test_a_lease_renewal_is_the_lease_last_written_with_a_new_renew_time() -> None:
    base = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "n0", "namespace": "kube-node-lease", "resourceVersion": "7",
                         "labels": {"x": "y"}},
            "spec": {"holderIdentity": "n0", "leaseDurationSeconds": 40,
                     "renewTime": "2026-01-01T00:00:00.000000Z"}}
    body = renewed_lease(base, "n0", "uid-1", "2026-01-01T00:00:10.000000Z")
    assert body["metadata"]["resourceVersion"] == "7" and body["metadata"]["labels"] == {"x": "y"}
    assert body["spec"] == {"holderIdentity": "n0", "leaseDurationSeconds": 40,
                            "renewTime": "2026-01-01T00:00:10.000000Z"}
    assert body["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "n0", "uid": "uid-1"}]
    assert base["spec"]["renewTime"] == "2026-01-01T00:00:00.000000Z"  # a copy
    assert "ownerReferences" not in base["metadata"]
    # an owner reference already there is kept; with no UID known none is added
    owned = renewed_lease(body, "n0", "uid-2", "t")
    assert owned["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert "ownerReferences" not in renewed_lease(base, "n0", "", "t")["metadata"]


def test_fleet_options_are_checked() -> None:
    assert parse_labels("a=b, example.com/c=") == {"a": "b", "example.com/c": ""}
    with pytest.raises(ValueError, match="want key=value"):
        parse_labels("a")
    for bad in (FleetOptions(cpu="lots"), FleetOptions(labels={"a b": "c"}),
                FleetOptions(count=-1), FleetOptions(naming="odd")):
        with pytest.raises(ValueError):
            bad.check()
    with pytest.raises(StageError, match="not YAML"):
        load_stages("a: [")
