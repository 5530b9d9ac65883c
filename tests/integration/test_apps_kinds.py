"""apps/v1 ReplicaSet, StatefulSet, DaemonSet and ControllerRevision through real clients:
kubectl (apply twice, ``get all -o wide``, ``scale``, ``patch``, the Invalid texts) and the
``kubernetes`` package (typed reads, the scale and status subresources).

What kube v1.32 answers is written out here; the shared CRUD, apply, watch and no-op matrices
(``kinds.py``) cover these kinds too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import yaml
from kubernetes import client

from kubewire.client.api import Api
from kubewire.client.client import create_client
from kubewire.models import ControllerRevision, DaemonSet, ObjectMeta, StatefulSet
from kubewire.models.apps_v1 import StatefulSetSpec
from kubewire.models.core_v1 import Container, PodSpec, PodTemplateSpec
from kubewire.models.meta_v1 import LabelSelector
from tests.integration import kubectl as cli
from tests.integration.harness import ServerThread
from tests.integration.kinds import (
    CONTROLLER_REVISION,
    DAEMON_SET,
    NS,
    REPLICA_SET,
    STATEFUL_SET,
    Kind,
    kind_id,
)
from tests.integration.wire import call, create, get, watch
from tests.unit.test_protobuf import encode_body

pytestmark = cli.needs_kubectl

MANIFESTS = """\
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: "nginx:1.27"}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: pg, image: "postgres:16"}]}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {kubernetes.io/os: linux}
      containers: [{name: a, image: busybox}]
---
apiVersion: apps/v1
kind: ControllerRevision
metadata:
  name: db-5d8f
  ownerReferences:
  - {apiVersion: apps/v1, kind: StatefulSet, name: db, uid: "0d1c", controller: true}
data: {spec: {template: {metadata: {labels: {app: db}}}}}
revision: 1
"""


def kubectl(server: ServerThread, *args: str, stdin: str | None = None) -> str:
    return cli.ok(server, *args, stdin=stdin)


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def versions(server: ServerThread) -> dict[str, str]:
    listed = json.loads(kubectl(server, "get", "rs,sts,ds,controllerrevisions", "-o", "json"))
    return {f"{i['kind']}/{i['metadata']['name']}": i["metadata"]["resourceVersion"]
            for i in listed["items"]}


@pytest.fixture
def applied(server: ServerThread) -> ServerThread:
    assert kubectl(server, "apply", "-f", "-", stdin=MANIFESTS).splitlines() == [
        "replicaset.apps/web created", "statefulset.apps/db created",
        "daemonset.apps/agent created", "controllerrevision.apps/db-5d8f created"]
    return server


def test_apply_twice_changes_nothing(applied: ServerThread) -> None:
    before = versions(applied)
    again = kubectl(applied, "apply", "-f", "-", stdin=MANIFESTS).splitlines()
    # kubectl's three-way patch resends an atomic list that the server defaulted
    # (volumeClaimTemplates): "configured", as against kube, but the write is a no-op
    assert again == ["replicaset.apps/web unchanged", "statefulset.apps/db configured",
                     "daemonset.apps/agent unchanged",
                     "controllerrevision.apps/db-5d8f unchanged"]
    assert versions(applied) == before


def test_get_all_wide(applied: ServerThread) -> None:
    tables = kubectl(applied, "get", "all", "-o", "wide").split("\n\n")
    daemon_sets = next(rows(b) for b in tables if b.startswith("NAME") and "NODE SELECTOR" in b)
    assert daemon_sets[0] == ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE",
                              "NODE", "SELECTOR", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    row = daemon_sets[1]
    assert row[:7] == ["daemonset.apps/agent", "0", "0", "0", "0", "0", "kubernetes.io/os=linux"]
    assert row[8:] == ["a", "busybox", "app=agent"]
    replica_sets = next(rows(b) for b in tables if "replicaset.apps/" in b)
    assert replica_sets[0] == ["NAME", "DESIRED", "CURRENT", "READY", "AGE", "CONTAINERS",
                               "IMAGES", "SELECTOR"]
    assert replica_sets[1][:4] == ["replicaset.apps/web", "1", "0", "0"]
    assert replica_sets[1][5:] == ["c", "nginx:1.27", "app=web"]
    stateful_sets = next(rows(b) for b in tables if "statefulset.apps/" in b)
    assert stateful_sets[0] == ["NAME", "READY", "AGE", "CONTAINERS", "IMAGES"]
    assert stateful_sets[1][:2] == ["statefulset.apps/db", "0/1"]
    assert stateful_sets[1][3:] == ["pg", "postgres:16"]
    assert "controllerrevision" not in kubectl(applied, "get", "all")  # not in category all
    revisions = rows(kubectl(applied, "get", "controllerrevisions"))
    assert revisions[0] == ["NAME", "CONTROLLER", "REVISION", "AGE"]
    assert revisions[1][:3] == ["db-5d8f", "statefulset.apps/db", "1"]


def test_short_names(applied: ServerThread) -> None:
    assert rows(kubectl(applied, "get", "rs,sts,ds", "-o", "name")) == [
        ["replicaset.apps/web"], ["statefulset.apps/db"], ["daemonset.apps/agent"]]


def test_stored_objects_carry_kubes_defaults(applied: ServerThread) -> None:
    sts = json.loads(kubectl(applied, "get", "sts", "db", "-o", "json"))
    spec = sts["spec"]
    assert spec["podManagementPolicy"] == "OrderedReady"
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain",
                                                            "whenScaled": "Retain"}
    assert spec["revisionHistoryLimit"] == 10
    claim = spec["volumeClaimTemplates"][0]
    assert claim["apiVersion"] == "v1" and claim["kind"] == "PersistentVolumeClaim"
    assert claim["spec"]["volumeMode"] == "Filesystem"
    assert claim["status"] == {"phase": "Pending"}
    assert sts["status"] == {"replicas": 0, "availableReplicas": 0}
    ds = json.loads(kubectl(applied, "get", "ds", "agent", "-o", "json"))
    assert ds["metadata"]["annotations"]["deprecated.daemonset.template.generation"] == "1"
    assert ds["spec"]["updateStrategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    assert ds["status"] == {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                            "desiredNumberScheduled": 0, "numberReady": 0}
    rs = json.loads(kubectl(applied, "get", "rs", "web", "-o", "json"))
    assert rs["spec"]["replicas"] == 1
    assert rs["status"] == {"replicas": 0}


def test_scale_and_patch(applied: ServerThread) -> None:
    assert kubectl(applied, "scale", "rs", "web", "--replicas=3") == \
        "replicaset.apps/web scaled\n"
    assert kubectl(applied, "scale", "sts", "db", "--replicas=2") == \
        "statefulset.apps/db scaled\n"
    rs = json.loads(kubectl(applied, "get", "rs", "web", "-o", "json"))
    assert (rs["spec"]["replicas"], rs["metadata"]["generation"]) == (3, 2)
    refused = cli.run(applied, "scale", "ds", "agent", "--replicas=2")
    assert refused.returncode != 0
    assert "the server could not find the requested resource" in refused.stderr
    kubectl(applied, "patch", "ds", "agent", "--type=merge",
            "-p", '{"spec":{"template":{"metadata":{"labels":{"v":"2"}}}}}')
    ds = json.loads(kubectl(applied, "get", "ds", "agent", "-o", "json"))
    assert ds["metadata"]["annotations"]["deprecated.daemonset.template.generation"] == "2"
    assert ds["metadata"]["generation"] == 2


@pytest.mark.parametrize(("args", "message"), [
    (("patch", "sts", "db", "-p", '{"spec":{"serviceName":"other"}}'),
     'The StatefulSet "db" is invalid: spec: Forbidden: updates to statefulset spec for fields '
     "other than 'replicas', 'ordinals', 'template', 'updateStrategy', "
     "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"),
    (("patch", "rs", "web", "--type=merge", "-p",
      '{"spec":{"selector":{"matchLabels":{"app":"x"}},'
      '"template":{"metadata":{"labels":{"app":"x"}}}}}'),
     'The ReplicaSet "web" is invalid: spec.selector: Invalid value: v1.LabelSelector'
     '{MatchLabels:map[string]string{"app":"x"}, MatchExpressions:[]v1.LabelSelectorRequirement'
     "(nil)}: field is immutable"),
    (("patch", "controllerrevision", "db-5d8f", "--type=merge", "-p", '{"data":null}'),
     'The ControllerRevision "db-5d8f" is invalid: \n* data: Required value: data is mandatory'
     "\n* data: Invalid value: null: field is immutable"),
])
def test_invalid_updates(applied: ServerThread, args: tuple[str, ...], message: str) -> None:
    before = versions(applied)
    done = cli.run(applied, *args)
    assert done.returncode != 0
    assert done.stderr.strip() == message
    assert versions(applied) == before


def test_stateful_set_names_are_dns_labels(server: ServerThread) -> None:
    body = MANIFESTS.split("---\n")[1].replace("name: db}", "name: db.v1}")
    done = cli.run(server, "create", "-f", "-", stdin=body)
    assert done.returncode != 0
    assert done.stderr == ('The StatefulSet "db.v1" is invalid: metadata.name: Invalid value: '
                           '"db.v1": must not contain dots\n')


# --- the kubernetes package -------------------------------------------------------------------

@pytest.fixture
def apps(applied: ServerThread) -> Iterator[client.AppsV1Api]:
    with client.ApiClient(client.Configuration(host=applied.url)) as api:
        yield client.AppsV1Api(api)


def test_typed_reads(apps: client.AppsV1Api) -> None:
    sts = apps.read_namespaced_stateful_set("db", NS)
    assert sts.spec.volume_claim_templates[0].spec.volume_mode == "Filesystem"
    assert sts.spec.update_strategy.rolling_update.partition == 0
    ds = apps.read_namespaced_daemon_set("agent", NS)
    assert ds.spec.update_strategy.rolling_update.max_unavailable == 1
    revision = apps.read_namespaced_controller_revision("db-5d8f", NS)
    assert revision.revision == 1
    assert revision.data == {"spec": {"template": {"metadata": {"labels": {"app": "db"}}}}}
    assert [r.metadata.name for r in apps.list_namespaced_replica_set(NS).items] == ["web"]


def test_scale_subresource(apps: client.AppsV1Api) -> None:
    scale = apps.read_namespaced_stateful_set_scale("db", NS)
    assert (scale.spec.replicas, scale.status.replicas, scale.status.selector) == (1, 0, "app=db")
    patched = apps.patch_namespaced_replica_set_scale("web", NS, {"spec": {"replicas": 4}})
    assert patched.spec.replicas == 4
    assert apps.read_namespaced_replica_set("web", NS).spec.replicas == 4
    scale = apps.read_namespaced_replica_set_scale("web", NS)
    scale.spec.replicas = -1
    with pytest.raises(client.ApiException) as info:
        apps.replace_namespaced_replica_set_scale("web", NS, scale)
    assert info.value.status == 422
    assert json.loads(info.value.body)["message"] == (
        'Scale.autoscaling "web" is invalid: spec.replicas: Invalid value: -1: must be greater '
        "than or equal to 0")


def test_status_subresource_writes_status_only(apps: client.AppsV1Api,
                                               applied: ServerThread) -> None:
    path = f"/apis/apps/v1/namespaces/{NS}/statefulsets/db/status"
    reply = call(applied, "PATCH", path, {"spec": {"replicas": 9},
                                          "status": {"replicas": 1, "readyReplicas": 1,
                                                     "availableReplicas": 1}})
    assert reply.status == 200, reply.json
    sts = apps.read_namespaced_stateful_set("db", NS)
    assert (sts.spec.replicas, sts.status.ready_replicas) == (1, 1)
    refused = call(applied, "PATCH", path, {"status": {"readyReplicas": 0}})
    assert refused.status == 422
    assert refused.json["message"] == (
        'StatefulSet.apps "db" is invalid: status.availableReplicas: Invalid value: 1: cannot be '
        "greater than status.readyReplicas")


# --- protobuf request bodies ------------------------------------------------------------------

PROTOBUF = "application/vnd.kubernetes.protobuf"


@pytest.mark.parametrize("manifest", [0, 1, 2, 3], ids=["rs", "sts", "ds", "revision"])
def test_protobuf_bodies_create_what_json_creates(server: ServerThread, manifest: int) -> None:
    """kubectl sends built-in kinds as protobuf: each kind decodes to what its JSON form
    makes (pointer scalars set to 0 stay, as ``partition: 0`` and ``maxSurge: 0`` must)."""
    obj = yaml.safe_load(MANIFESTS.split("---\n")[manifest])
    obj["metadata"]["name"] = "json"
    spec = obj.get("spec", {})
    if obj["kind"] in ("ReplicaSet", "StatefulSet"):
        spec["replicas"] = 0  # a pointer: an explicit 0 is not "unset" (defaulted to 1)
    if obj["kind"] == "StatefulSet":
        spec["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    if obj["kind"] == "DaemonSet":
        spec["revisionHistoryLimit"] = 0
    as_json = call(server, "POST", collection(obj), obj, params={"dryRun": "All"})
    assert as_json.status == 201, as_json.json
    as_proto = call(server, "POST", collection(obj), encode_body(obj),
                    {"Content-Type": PROTOBUF, "Accept": "application/json"},
                    params={"dryRun": "All"})
    assert as_proto.status == 201, as_proto.json
    if "replicas" in spec:
        assert as_proto.json["spec"]["replicas"] == 0
    strip = ("uid", "creationTimestamp")
    assert {**as_proto.json, "metadata": without(as_proto.json["metadata"], strip)} == \
        {**as_json.json, "metadata": without(as_json.json["metadata"], strip)}


def collection(obj: dict[str, object]) -> str:
    plural = {"ReplicaSet": "replicasets", "StatefulSet": "statefulsets",
              "DaemonSet": "daemonsets", "ControllerRevision": "controllerrevisions"}
    return f"/apis/apps/v1/namespaces/{NS}/{plural[str(obj['kind'])]}"


def without(meta: dict[str, object], keys: tuple[str, ...]) -> dict[str, object]:
    """``meta`` without ``keys`` and without its managedFields' times (two requests a moment
    apart may fall in different seconds)."""
    kept = {k: v for k, v in meta.items() if k not in keys}
    entries = kept.get("managedFields")
    if isinstance(entries, list):
        kept["managedFields"] = [{k: v for k, v in e.items() if k != "time"} for e in entries]
    return kept


# --- kubewire's client ------------------------------------------------------------------------

async def test_kubewire_client_models(server: ServerThread) -> None:
    async with await create_client(server.kubeconfig) as kw:
        stateful_sets = Api(StatefulSet, client=kw)
        made = await stateful_sets.create(StatefulSet(
            metadata=ObjectMeta(name="db"),
            spec=StatefulSetSpec(
                service_name="db", selector=LabelSelector(match_labels={"app": "db"}),
                template=PodTemplateSpec(metadata=ObjectMeta(labels={"app": "db"}),
                                         spec=PodSpec(containers=[
                                             Container(name="pg", image="postgres:16")])))))
        assert made.spec is not None and made.spec.pod_management_policy == "OrderedReady"
        assert made.status is not None and made.status.available_replicas == 0
        scale = await stateful_sets.scale("db", 3)
        assert scale.spec is not None and scale.spec.replicas == 3
        status = await stateful_sets.patch_status("db", {"status": {"replicas": 3}})
        assert status.status is not None and status.status.replicas == 3
        revisions = Api(ControllerRevision, client=kw)
        revision = await revisions.create(ControllerRevision(
            metadata=ObjectMeta(name="db-1"), data={"spec": {}}, revision=1))
        assert revision.revision == 1 and revision.data == {"spec": {}}
        daemon_sets = Api(DaemonSet, client=kw)
        assert list(await daemon_sets.list()) == []


@pytest.mark.parametrize("data", ["abc", [1, 2], {"spec": {}}], ids=["string", "list", "object"])
def test_controller_revision_data_is_any_json(server: ServerThread, data: object) -> None:
    """``data`` is a runtime.RawExtension: kube keeps whatever JSON value it is given."""
    body = {"apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": "r1"}, "data": data, "revision": 1}
    assert kubectl(server, "create", "-f", "-", stdin=json.dumps(body)) == \
        "controllerrevision.apps/r1 created\n"
    got = json.loads(kubectl(server, "get", "controllerrevision", "r1", "-o", "json"))
    assert got["data"] == data


# --- watch: the bookmark object is the kind's Go zero value -----------------------------------

_TEMPLATE_ZERO = {"metadata": {"creationTimestamp": None}, "spec": {"containers": None}}


@pytest.mark.parametrize(("plural", "zero"), [
    ("replicasets", {"spec": {"selector": None, "template": _TEMPLATE_ZERO},
                     "status": {"replicas": 0}}),
    ("statefulsets", {"spec": {"selector": None, "template": _TEMPLATE_ZERO,
                               "serviceName": "", "updateStrategy": {}},
                      "status": {"replicas": 0, "availableReplicas": 0}}),
    ("daemonsets", {"spec": {"selector": None, "template": _TEMPLATE_ZERO, "updateStrategy": {}},
                    "status": {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                               "desiredNumberScheduled": 0, "numberReady": 0}}),
    ("controllerrevisions", {"data": None, "revision": 0}),
])
def test_initial_events_end_bookmark(server: ServerThread, plural: str,
                                     zero: dict[str, object]) -> None:
    """kube encodes an empty typed object (json tags without omitempty stay)."""
    path = f"/apis/apps/v1/namespaces/{NS}/{plural}"
    with watch(server, path, sendInitialEvents="true", resourceVersionMatch="NotOlderThan",
               allowWatchBookmarks="true") as stream:
        event = stream.next_event()
    assert event["type"] == "BOOKMARK"
    obj = event["object"]
    assert list(obj) == ["kind", "apiVersion", "metadata", *zero]
    assert {k: v for k, v in obj.items() if k not in ("kind", "apiVersion", "metadata")} == zero


# --- server-side apply: list-map keys ---------------------------------------------------------

def test_status_conditions_are_a_map_keyed_by_type(applied: ServerThread) -> None:
    """Two controllers apply one condition each to a DaemonSet's status: the list is a map
    keyed by ``type``, so each keeps its own (and a pod template's containers by name)."""
    path = f"/apis/apps/v1/namespaces/{NS}/daemonsets/agent/status"
    head = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"}}
    for manager, kind in (("one", "A"), ("two", "B")):
        body = {**head, "status": {"conditions": [{"type": kind, "status": "True"}]}}
        reply = call(applied, "PATCH", path, json.dumps(body).encode(),
                     {"Content-Type": "application/apply-patch+yaml"},
                     params={"fieldManager": manager})
        assert reply.status == 200, reply.json
    assert [c["type"] for c in reply.json["status"]["conditions"]] == ["A", "B"]
    item = f"/apis/apps/v1/namespaces/{NS}/statefulsets/db"
    sidecar = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
               "spec": {"template": {"spec": {"containers": [
                   {"name": "sidecar", "image": "busybox"}]}}}}
    reply = call(applied, "PATCH", item, json.dumps(sidecar).encode(),
                 {"Content-Type": "application/apply-patch+yaml"},
                 params={"fieldManager": "injector"})
    assert reply.status == 200, reply.json
    containers = reply.json["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["pg", "sidecar"]


# --- dry-run and deletecollection -------------------------------------------------------------

@pytest.mark.parametrize("kind", [REPLICA_SET, STATEFUL_SET, DAEMON_SET, CONTROLLER_REVISION],
                         ids=kind_id)
def test_dry_run_and_deletecollection(server: ServerThread, kind: Kind) -> None:
    dry = call(server, "POST", kind.collection(), kind.obj("dry"), params={"dryRun": "All"})
    assert dry.status == 201, dry.json
    assert get(server, kind.collection())["items"] == []
    made = [create(server, kind.collection(), kind.obj(name)) for name in ("a1", "a2")]
    dry_delete = call(server, "DELETE", kind.collection(), params={"dryRun": "All"})
    assert dry_delete.status == 200
    assert len(get(server, kind.collection())["items"]) == 2
    reply = call(server, "DELETE", kind.collection())
    assert reply.status == 200
    assert (reply.json["kind"], reply.json["apiVersion"]) == (f"{kind.kind}List", "apps/v1")
    assert reply.json["items"] == [{k: v for k, v in obj.items()
                                    if k not in ("kind", "apiVersion")} for obj in made]
    assert get(server, kind.collection())["items"] == []
