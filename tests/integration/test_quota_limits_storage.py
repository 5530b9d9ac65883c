"""ResourceQuota, LimitRange and storage kinds as kube v1.32 serves and enforces them, through
kubectl and the wire.

- ``kubectl create quota --hard``: the quota controller fills ``status`` (``describe quota``
  shows used/hard, ``get quota`` kube's REQUEST/LIMIT columns); a pod over it is refused with
  kube's 403 text (``exceeded quota: ...``, ``failed quota: ...: must specify ...``), an admitted
  one moves ``status.used`` at once and its deletion gives it back; ``count/<resource>`` and
  the legacy names count other kinds.
- A LimitRange's defaults land on a created pod with kube's ``kubernetes.io/limit-ranger``
  annotation; its bounds refuse a pod with kube's text; its own validation is kube's.
- ``get pvc,pv,sc``: kube's columns and defaults (Filesystem, Retain, Delete, Immediate, the
  default class given to a claim without one); a claim's spec is immutable but for a bound
  claim's size.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.integration.harness import ServerThread
from tests.integration.kubectl import needs_kubectl, run
from tests.integration.kubectl import ok as kubectl
from tests.integration.wire import call, wait_for

pytestmark = needs_kubectl


def _pod(name: str, requests: dict[str, str] | None = None,
         limits: dict[str, str] | None = None) -> str:
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                       "spec": {"containers": [{"name": "app", "image": "nginx",
                                                "resources": resources}]}})


def _quota(server: ServerThread, namespace: str, name: str) -> dict[str, Any]:
    reply = call(server, "GET", f"/api/v1/namespaces/{namespace}/resourcequotas/{name}")
    assert reply.status == 200
    quota: dict[str, Any] = reply.json
    return quota


def _used(server: ServerThread, namespace: str, name: str) -> dict[str, str]:
    return dict(_quota(server, namespace, name).get("status", {}).get("used") or {})


def _settle(server: ServerThread, namespace: str, name: str, used: dict[str, str]) -> None:
    wait_for(lambda: _used(server, namespace, name) == used, what=f"used == {used}")


def test_quota_status_admission_and_release(server: ServerThread) -> None:
    kubectl(server, "create", "namespace", "team")
    kubectl(server, "-n", "team", "create", "quota", "compute",
            "--hard=pods=2,requests.cpu=1,limits.cpu=2,configmaps=3,count/secrets=1")
    # configmaps: kube-root-ca.crt would be there, but this server has no CA to publish
    _settle(server, "team", "compute", {"configmaps": "0", "count/secrets": "0",
                                        "limits.cpu": "0", "pods": "0", "requests.cpu": "0"})
    assert _quota(server, "team", "compute")["status"]["hard"] == {
        "configmaps": "3", "count/secrets": "1", "limits.cpu": "2", "pods": "2",
        "requests.cpu": "1"}

    refused = run(server, "-n", "team", "apply", "-f", "-", stdin=_pod("bare"))
    assert refused.returncode != 0
    assert ('pods "bare" is forbidden: failed quota: compute: must specify limits.cpu for: app; '
            "requests.cpu for: app") in refused.stderr

    kubectl(server, "-n", "team", "apply", "-f", "-",
            stdin=_pod("first", {"cpu": "600m"}, {"cpu": "1"}))
    # charged by admission before the pod is stored: no wait
    assert _used(server, "team", "compute")["requests.cpu"] == "600m"
    over = run(server, "-n", "team", "apply", "-f", "-",
               stdin=_pod("second", {"cpu": "500m"}, {"cpu": "1"}))
    assert over.returncode != 0
    assert ('Error from server (Forbidden): error when creating "STDIN": pods "second" is '
            "forbidden: exceeded quota: compute, requested: requests.cpu=500m, used: "
            "requests.cpu=600m, limited: requests.cpu=1") in over.stderr

    table = kubectl(server, "-n", "team", "get", "quota")
    assert table.split("\n")[0].split() == ["NAME", "AGE", "REQUEST", "LIMIT"]
    assert "configmaps: 0/3, count/secrets: 0/1, pods: 1/2, requests.cpu: 600m/1" in table
    assert "limits.cpu: 1/2" in table
    described = kubectl(server, "-n", "team", "describe", "quota", "compute")
    assert [line.split() for line in described.splitlines()[2:]] == [
        ["Resource", "Used", "Hard"], ["--------", "----", "----"],
        ["configmaps", "0", "3"], ["count/secrets", "0", "1"], ["limits.cpu", "1", "2"],
        ["pods", "1", "2"], ["requests.cpu", "600m", "1"]]

    kubectl(server, "-n", "team", "create", "secret", "generic", "one")
    second_secret = run(server, "-n", "team", "create", "secret", "generic", "two")
    assert ('secrets "two" is forbidden: exceeded quota: compute, requested: count/secrets=1, '
            "used: count/secrets=1, limited: count/secrets=1") in second_secret.stderr

    # the controller gives back what a deletion frees
    gone = run(server, "-n", "team", "delete", "pod", "first", "--grace-period=0", "--force")
    assert gone.returncode == 0, gone.stderr
    _settle(server, "team", "compute", {"configmaps": "0", "count/secrets": "1",
                                        "limits.cpu": "0", "pods": "0", "requests.cpu": "0"})
    kubectl(server, "-n", "team", "apply", "-f", "-",
            stdin=_pod("second", {"cpu": "500m"}, {"cpu": "1"}))


def test_dry_run_is_checked_but_charges_nothing(server: ServerThread) -> None:
    kubectl(server, "create", "quota", "pods", "--hard=pods=1")
    _settle(server, "default", "pods", {"pods": "0"})
    kubectl(server, "apply", "--dry-run=server", "-f", "-", stdin=_pod("dry"))
    assert _used(server, "default", "pods") == {"pods": "0"}
    kubectl(server, "apply", "-f", "-", stdin=_pod("real"))
    dry = run(server, "apply", "--dry-run=server", "-f", "-", stdin=_pod("more"))
    assert "exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1" in dry.stderr


def test_quota_status_unknown_refuses(make_server: Callable[..., ServerThread]) -> None:
    """Admission reads ``status``: a quota nobody has filled restricts nothing (kube checks
    ``status.hard``), one with ``hard`` but no ``used`` refuses what it restricts (kube's
    ``status unknown for quota``). The resourcequota controller is off here."""
    quiet = make_server(controllers=("*", "-resourcequota"))
    kubectl(quiet, "create", "quota", "pods", "--hard=pods=1")
    kubectl(quiet, "apply", "-f", "-", stdin=_pod("early"))
    assert _quota(quiet, "default", "pods")["status"] == {}
    kubectl(quiet, "patch", "quota", "pods", "--subresource=status", "-p",
            '{"status":{"hard":{"pods":"1"}}}')
    refused = run(quiet, "apply", "-f", "-", stdin=_pod("waiting"))
    assert ('pods "waiting" is forbidden: status unknown for quota: pods, resources: pods'
            in refused.stderr)
    kubectl(quiet, "create", "configmap", "free")


LIMITS = """
apiVersion: v1
kind: LimitRange
metadata: {name: limits}
spec:
  limits:
  - type: Container
    default: {cpu: 500m, memory: 256Mi}
    defaultRequest: {cpu: 100m}
    max: {cpu: "1"}
    min: {cpu: 50m}
"""


def test_limit_range_defaults_and_bounds(server: ServerThread) -> None:
    kubectl(server, "apply", "-f", "-", stdin=LIMITS)
    stored = call(server, "GET", "/api/v1/namespaces/default/limitranges/limits").json
    # SetDefaults_LimitRangeItem: defaultRequest memory from default
    assert stored["spec"]["limits"][0]["defaultRequest"] == {"cpu": "100m", "memory": "256Mi"}
    assert kubectl(server, "get", "limits").split()[:3] == ["NAME", "CREATED", "AT"]

    kubectl(server, "apply", "-f", "-", stdin=_pod("defaulted"))
    pod = call(server, "GET", "/api/v1/namespaces/default/pods/defaulted").json
    assert pod["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "500m", "memory": "256Mi"},
        "requests": {"cpu": "100m", "memory": "256Mi"}}
    assert pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: cpu, memory request for container app; cpu, memory limit for "
        "container app")

    too_big = run(server, "apply", "-f", "-", stdin=_pod("big", limits={"cpu": "2"}))
    assert ('pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 2'
            in too_big.stderr)
    both = run(server, "apply", "-f", "-",
               stdin=_pod("small", {"cpu": "10m"}, {"cpu": "20m"}))
    assert ('pods "small" is forbidden: minimum cpu usage per Container is 50m, but request is '
            "10m") in both.stderr


def test_limit_range_validation(server: ServerThread) -> None:
    bad = run(server, "apply", "-f", "-", stdin="""
apiVersion: v1
kind: LimitRange
metadata: {name: bad}
spec:
  limits:
  - type: Container
    min: {cpu: "2"}
    max: {cpu: "1"}
    default: {cpu: "1"}
""")
    assert bad.returncode != 0
    assert ('spec.limits[0].min[cpu]: Invalid value: resource.Quantity{i:resource.int64Amount'
            '{value:2, scale:0}, d:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, s:"2", '
            'Format:"DecimalSI"}: min value 2 is greater than max value 1') in bad.stderr


def test_quota_validation(server: ServerThread) -> None:
    bad = run(server, "create", "quota", "bad", "--hard=cpu=-1,foo=1")
    assert bad.returncode != 0
    assert ('ResourceQuota "bad" is invalid: [spec.hard[cpu]: Invalid value: "-1": must be '
            "greater than or equal to 0, spec.hard[foo]: Invalid value: foo: must be a standard "
            "resource for quota]") in bad.stderr


STORAGE = """
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: fast
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: example.com/fast
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: slow}
provisioner: example.com/slow
reclaimPolicy: Retain
volumeBindingMode: WaitForFirstConsumer
allowVolumeExpansion: true
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv1}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce, ReadOnlyMany]
  hostPath: {path: /tmp/pv1}
  claimRef: {namespace: default, name: data}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 512Mi}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: classless, namespace: default}
spec:
  storageClassName: ""
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
"""


def test_storage_kinds_defaults_and_tables(server: ServerThread) -> None:
    kubectl(server, "apply", "-f", "-", stdin=STORAGE)
    claim = call(server, "GET", "/api/v1/namespaces/default/persistentvolumeclaims/data").json
    assert claim["spec"]["storageClassName"] == "fast"  # DefaultStorageClass admission
    assert claim["spec"]["volumeMode"] == "Filesystem"
    assert claim["status"] == {"phase": "Pending"}
    classless = call(server, "GET",
                     "/api/v1/namespaces/default/persistentvolumeclaims/classless").json
    assert classless["spec"]["storageClassName"] == ""
    volume = call(server, "GET", "/api/v1/persistentvolumes/pv1").json
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert volume["spec"]["hostPath"] == {"path": "/tmp/pv1", "type": ""}
    assert volume["status"]["phase"] == "Pending"
    assert volume["status"]["lastPhaseTransitionTime"]
    fast = call(server, "GET", "/apis/storage.k8s.io/v1/storageclasses/fast").json
    assert (fast["reclaimPolicy"], fast["volumeBindingMode"]) == ("Delete", "Immediate")

    rows = [line.split() for line in kubectl(server, "get", "pvc,pv,sc").splitlines() if line]
    assert rows[0] == ["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS", "MODES", "STORAGECLASS",
            "VOLUMEATTRIBUTESCLASS", "AGE"]
    assert rows[1][:3] == ["persistentvolumeclaim/classless", "Pending", "<unset>"]
    assert rows[2][:4] == ["persistentvolumeclaim/data", "Pending", "fast", "<unset>"]
    assert rows[3] == ["NAME", "CAPACITY", "ACCESS", "MODES", "RECLAIM", "POLICY", "STATUS",
                       "CLAIM", "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "REASON", "AGE"]
    assert rows[4][:6] == ["persistentvolume/pv1", "1Gi", "RWO,ROX", "Retain", "Pending",
                           "default/data"]
    assert rows[5] == ["NAME", "PROVISIONER", "RECLAIMPOLICY", "VOLUMEBINDINGMODE",
                       "ALLOWVOLUMEEXPANSION", "AGE"]
    assert rows[6][:5] == ["storageclass.storage.k8s.io/fast", "(default)", "example.com/fast",
                           "Delete", "Immediate"]
    assert rows[7][:5] == ["storageclass.storage.k8s.io/slow", "example.com/slow", "Retain",
                           "WaitForFirstConsumer", "true"]
    wide = kubectl(server, "get", "pvc", "data", "-o", "wide")
    assert wide.split("\n")[1].split()[-1] == "Filesystem"


def test_claim_spec_is_immutable(server: ServerThread) -> None:
    kubectl(server, "apply", "-f", "-", stdin=STORAGE)
    grown = run(server, "patch", "pvc", "data", "-p",
                '{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}')
    assert ('The PersistentVolumeClaim "data" is invalid: spec: Forbidden: spec is immutable '
            "after creation except resources.requests and volumeAttributesClassName for bound "
            "claims") in grown.stderr
    # a bound claim may grow
    kubectl(server, "patch", "pvc", "data", "--subresource=status", "-p",
            '{"status":{"phase":"Bound","capacity":{"storage":"1Gi"}}}')
    kubectl(server, "patch", "pvc", "data", "-p",
            '{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}')
    shrunk = run(server, "patch", "pvc", "data", "-p",
                 '{"spec":{"resources":{"requests":{"storage":"1Gi"}}}}')
    assert ("spec.resources.requests.storage: Forbidden: field can not be less than "
            "status.capacity") in shrunk.stderr
    changed = run(server, "patch", "sc", "fast", "-p", '{"reclaimPolicy":"Retain"}')
    assert ('The StorageClass "fast" is invalid: reclaimPolicy: Forbidden: updates to '
            "reclaimPolicy are forbidden.") in changed.stderr


@pytest.mark.parametrize("resource", ["resourcequotas", "persistentvolumeclaims"])
def test_field_selectors(server: ServerThread, resource: str) -> None:
    """core/v1's conversion takes metadata.name and metadata.namespace only (the strategies'
    legacy ``name`` field cannot be selected)."""
    reply = call(server, "GET", f"/api/v1/namespaces/default/{resource}",
                 params={"fieldSelector": "name=x"})
    assert reply.status == 400
    assert reply.json["message"] == ('"name" is not a known field selector: only '
                                     '"metadata.name", "metadata.namespace"')


ROUTE = """
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: %s}
spec: {parentRefs: [{name: gw}]}
"""


def test_custom_resources_are_counted(server: ServerThread) -> None:
    """``count/<plural>.<group>`` counts a CRD's objects as any other kind's: admission charges
    a create, the controller gives a deletion back."""
    name = "count/httproutes.gateway.networking.k8s.io"
    kubectl(server, "create", "quota", "routes", f"--hard={name}=1")
    _settle(server, "default", "routes", {name: "0"})
    kubectl(server, "apply", "-f", "-", stdin=ROUTE % "a")
    refused = run(server, "apply", "-f", "-", stdin=ROUTE % "b")
    assert (f'httproutes.gateway.networking.k8s.io "b" is forbidden: exceeded quota: routes, '
            f"requested: {name}=1, used: {name}=1, limited: {name}=1") in refused.stderr
    kubectl(server, "delete", "httproute", "a")
    _settle(server, "default", "routes", {name: "0"})
    kubectl(server, "apply", "-f", "-", stdin=ROUTE % "b")


def test_volume_phase_transition_time(server: ServerThread) -> None:
    """persistentvolume's status strategy: a phase change stamps lastPhaseTransitionTime unless
    the client sets one; an unchanged phase keeps the client's."""
    kubectl(server, "apply", "-f", "-", stdin=STORAGE)
    old = "2020-01-01T00:00:00Z"
    kubectl(server, "patch", "pv", "pv1", "--subresource=status", "-p",
            json.dumps({"status": {"lastPhaseTransitionTime": old}}))
    assert call(server, "GET", "/api/v1/persistentvolumes/pv1").json["status"] == {
        "phase": "Pending", "lastPhaseTransitionTime": old}
    kubectl(server, "patch", "pv", "pv1", "--subresource=status", "-p",
            '{"status":{"phase":"Available"}}')
    status = call(server, "GET", "/api/v1/persistentvolumes/pv1").json["status"]
    assert status["phase"] == "Available"
    assert status["lastPhaseTransitionTime"] > old


def _gone(server: ServerThread, path: str) -> bool:
    return call(server, "GET", path).status == 404


def test_claims_and_volumes_in_use_are_protected(server: ServerThread) -> None:
    """StorageObjectInUseProtection puts kube's finalizers on; the pvc-protection controller
    lets a claim go once no scheduled pod names it, pv-protection a volume once not Bound."""
    kubectl(server, "apply", "-f", "-", stdin=STORAGE)
    claim_path = "/api/v1/namespaces/default/persistentvolumeclaims/data"
    volume_path = "/api/v1/persistentvolumes/pv1"
    assert call(server, "GET", claim_path).json["metadata"]["finalizers"] == [
        "kubernetes.io/pvc-protection"]
    assert call(server, "GET", volume_path).json["metadata"]["finalizers"] == [
        "kubernetes.io/pv-protection"]
    kubectl(server, "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "user"},
        "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "nginx"}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}}))
    kubectl(server, "delete", "pvc", "data", "--wait=false")
    kubectl(server, "patch", "pv", "pv1", "--subresource=status", "-p",
            '{"status":{"phase":"Bound"}}')
    kubectl(server, "delete", "pv", "pv1", "--wait=false")
    kubectl(server, "delete", "pvc", "classless")  # unused: released at once
    assert _gone(server, "/api/v1/namespaces/default/persistentvolumeclaims/classless")
    marked = call(server, "GET", claim_path).json
    assert marked["metadata"]["deletionTimestamp"]
    assert "Terminating" in kubectl(server, "get", "pvc", "data")
    assert call(server, "GET", volume_path).json["metadata"]["deletionTimestamp"]

    run(server, "delete", "pod", "user", "--grace-period=0", "--force")
    wait_for(lambda: _gone(server, claim_path), what="the claim to go with its last user")
    kubectl(server, "patch", "pv", "pv1", "--subresource=status", "-p",
            '{"status":{"phase":"Released"}}')
    wait_for(lambda: _gone(server, volume_path), what="the released volume to go")


def test_claim_growth_is_bounded_and_charged(server: ServerThread) -> None:
    """A bound claim's new size meets the LimitRange's max and the quota's requests.storage
    (kube's LimitRanger and quota evaluator take claim updates)."""
    kubectl(server, "apply", "-f", "-", stdin="""
apiVersion: v1
kind: LimitRange
metadata: {name: claims}
spec:
  limits:
  - type: PersistentVolumeClaim
    max: {storage: 5Gi}
""")
    kubectl(server, "create", "quota", "storage", "--hard=requests.storage=3Gi")
    _settle(server, "default", "storage", {"requests.storage": "0"})
    kubectl(server, "apply", "-f", "-", stdin=STORAGE)
    assert _used(server, "default", "storage") == {"requests.storage": "1536Mi"}
    kubectl(server, "patch", "pvc", "data", "--subresource=status", "-p",
            '{"status":{"phase":"Bound","capacity":{"storage":"512Mi"}}}')
    too_big = run(server, "patch", "pvc", "data", "-p",
                  '{"spec":{"resources":{"requests":{"storage":"6Gi"}}}}')
    assert ('persistentvolumeclaims "data" is forbidden: maximum storage usage per '
            "PersistentVolumeClaim is 5Gi, but request is 6Gi") in too_big.stderr
    over = run(server, "patch", "pvc", "data", "-p",
               '{"spec":{"resources":{"requests":{"storage":"2.5Gi"}}}}')
    assert ('persistentvolumeclaims "data" is forbidden: exceeded quota: storage, requested: '
            "requests.storage=2Gi, used: requests.storage=1536Mi, limited: "
            "requests.storage=3Gi") in over.stderr
    kubectl(server, "patch", "pvc", "data", "-p",
            '{"spec":{"resources":{"requests":{"storage":"1Gi"}}}}')
    assert _used(server, "default", "storage") == {"requests.storage": "2Gi"}
