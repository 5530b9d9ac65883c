"""The official ``kubernetes`` Python client (37.x) against the real server, for every kind.

What the client sends is in objects-and-clients.md §7.2: POST/PUT without Content-Type, a list
body to ``patch_*`` is a JSON patch, a dict body a strategic merge patch (CustomObjectsApi: a
merge patch), ``Watch.stream`` adds ``watch=True`` (the literal string ``True``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.integration.harness import ServerThread
from tests.integration.kinds import (
    ALL_KINDS,
    DEPLOYMENT,
    GATEWAY,
    NS,
    POD,
    SERVICE,
    Kind,
    kind_id,
)
from tests.integration.wire import wait_for

_TYPED_APIS: dict[str, tuple[type[Any], str]] = {
    "Pod": (client.CoreV1Api, "pod"),
    "Service": (client.CoreV1Api, "service"),
    "Node": (client.CoreV1Api, "node"),
    "Namespace": (client.CoreV1Api, "namespace"),
    "Deployment": (client.AppsV1Api, "deployment"),
    "ReplicaSet": (client.AppsV1Api, "replica_set"),
    "StatefulSet": (client.AppsV1Api, "stateful_set"),
    "DaemonSet": (client.AppsV1Api, "daemon_set"),
    "ControllerRevision": (client.AppsV1Api, "controller_revision"),
    "Event": (client.EventsV1Api, "event"),
    "Ingress": (client.NetworkingV1Api, "ingress"),
    "NetworkPolicy": (client.NetworkingV1Api, "network_policy"),
    "EndpointSlice": (client.DiscoveryV1Api, "endpoint_slice"),
    "ConfigMap": (client.CoreV1Api, "config_map"),
    "Endpoints": (client.CoreV1Api, "endpoints"),
    "ReplicationController": (client.CoreV1Api, "replication_controller"),
    "Secret": (client.CoreV1Api, "secret"),
    "ServiceAccount": (client.CoreV1Api, "service_account"),
    "Lease": (client.CoordinationV1Api, "lease"),
    "Role": (client.RbacAuthorizationV1Api, "role"),
    "ClusterRole": (client.RbacAuthorizationV1Api, "cluster_role"),
    "RoleBinding": (client.RbacAuthorizationV1Api, "role_binding"),
    "ClusterRoleBinding": (client.RbacAuthorizationV1Api, "cluster_role_binding"),
    "CertificateSigningRequest": (client.CertificatesV1Api, "certificate_signing_request"),
    "ResourceQuota": (client.CoreV1Api, "resource_quota"),
    "LimitRange": (client.CoreV1Api, "limit_range"),
    "PersistentVolumeClaim": (client.CoreV1Api, "persistent_volume_claim"),
    "PersistentVolume": (client.CoreV1Api, "persistent_volume"),
    "StorageClass": (client.StorageV1Api, "storage_class"),
    "Job": (client.BatchV1Api, "job"),
    "CronJob": (client.BatchV1Api, "cron_job"),
    "PodDisruptionBudget": (client.PolicyV1Api, "pod_disruption_budget"),
    "PriorityClass": (client.SchedulingV1Api, "priority_class"),
    "IngressClass": (client.NetworkingV1Api, "ingress_class"),
    "HorizontalPodAutoscaler": (client.AutoscalingV2Api, "horizontal_pod_autoscaler"),
}


@pytest.fixture
def api_client(server: ServerThread) -> Iterator[client.ApiClient]:
    config = client.Configuration(host=server.url)
    with client.ApiClient(config) as api:
        yield api


@dataclass
class Ops:
    """The client calls for one kind, each returning plain JSON (camelCase, as on the wire)."""

    kind: Kind
    api: client.ApiClient
    list_fn: Callable[..., Any]
    list_args: tuple[Any, ...]
    _create: Callable[..., Any]
    _read: Callable[..., Any]
    _patch: Callable[..., Any]
    _replace: Callable[..., Any]
    _delete: Callable[..., Any]
    _args: tuple[Any, ...]  # positional arguments after name (namespace, or group/.../plural)

    def json(self, obj: Any) -> dict[str, Any]:
        out = self.api.sanitize_for_serialization(obj)
        assert isinstance(out, dict)
        return out

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.json(self._create(*self._args, body))

    def list(self) -> dict[str, Any]:
        return self.json(self.list_fn(*self.list_args))

    def read(self, name: str) -> dict[str, Any]:
        return self.json(self._read(name, *self._args))

    def patch(self, name: str, body: Any) -> dict[str, Any]:
        if self.kind.is_custom and isinstance(body, list):
            # CustomObjectsApi always says merge-patch unless told otherwise.
            return self.json(self._patch(name, *self._args, body,
                                         _content_type="application/json-patch+json"))
        return self.json(self._patch(name, *self._args, body))

    def replace(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.json(self._replace(name, *self._args, body))

    def delete(self, name: str) -> Any:
        return self._delete(name, *self._args)


def ops_for(kind: Kind, api: client.ApiClient) -> Ops:
    if kind.is_custom:
        custom = client.CustomObjectsApi(api)
        args = (kind.group, "v1", NS, kind.plural)
        return Ops(kind, api, custom.list_namespaced_custom_object, args,
                   custom.create_namespaced_custom_object,
                   lambda name, *a: custom.get_namespaced_custom_object(*a, name),
                   lambda name, *a, **kw: custom.patch_namespaced_custom_object(
                       *a[:-1], name, a[-1], **kw),
                   lambda name, *a: custom.replace_namespaced_custom_object(*a[:-1], name, a[-1]),
                   lambda name, *a: custom.delete_namespaced_custom_object(*a, name),
                   args)
    api_class, snake = _TYPED_APIS[kind.kind]
    typed = api_class(api)
    scope = "namespaced_" if kind.namespaced else ""
    args = (NS,) if kind.namespaced else ()

    def verb(name: str) -> Callable[..., Any]:
        fn: Callable[..., Any] = getattr(typed, f"{name}_{scope}{snake}")
        return fn

    return Ops(kind, api, verb("list"), args, verb("create"), verb("read"), verb("patch"),
               verb("replace"), verb("delete"), args)


def _name(kind: Kind) -> str:
    return "kc-" + kind.plural[:-1].lower()


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    """User labels (without the one namespaces get by default, objects-and-clients.md §3)."""
    labels = dict(obj["metadata"].get("labels") or {})
    labels.pop("kubernetes.io/metadata.name", None)
    return labels


def _status_of(exc: ApiException) -> int:
    return int(exc.status)


@pytest.mark.parametrize("kind", ALL_KINDS, ids=kind_id)
def test_crud_round_trip(api_client: client.ApiClient, kind: Kind) -> None:
    ops = ops_for(kind, api_client)
    name = _name(kind)

    created = ops.create(kind.obj(name, labels={"app": "kc"}))
    assert created["metadata"]["name"] == name
    assert created["metadata"]["uid"]
    created_rv = int(created["metadata"]["resourceVersion"])

    listed = ops.list()
    assert name in [item["metadata"]["name"] for item in listed["items"]]
    assert int(listed["metadata"]["resourceVersion"]) >= created_rv

    if kind.controller_status:  # its controller writes status next (kube's would too)
        wait_for(lambda: bool(ops.read(name).get("status")), what=f"{kind.kind} status")
    read = ops.read(name)
    assert read["metadata"]["uid"] == created["metadata"]["uid"]
    if kind.controller_status:
        assert int(read["metadata"]["resourceVersion"]) > created_rv
    else:
        assert read["metadata"]["resourceVersion"] == str(created_rv)

    # JSON patch: the client sends a list body as application/json-patch+json.
    patched = ops.patch(name, [{"op": "add", "path": "/metadata/labels/patched", "value": "json"}])
    assert _labels(patched) == {"app": "kc", "patched": "json"}
    assert int(patched["metadata"]["resourceVersion"]) > created_rv

    if kind.is_custom:  # CustomObjectsApi sends a dict body as a merge patch
        merged = ops.patch(name, {"metadata": {"labels": {"patched": None, "merge": "yes"}}})
        assert _labels(merged) == {"app": "kc", "merge": "yes"}
        patched = merged

    # Replace: read-modify-write carrying the resourceVersion just read.
    current = ops.read(name)
    current["metadata"]["annotations"] = {"replaced": "yes"}
    replaced = ops.replace(name, current)
    assert replaced["metadata"]["annotations"]["replaced"] == "yes"
    assert int(replaced["metadata"]["resourceVersion"]) > int(
        patched["metadata"]["resourceVersion"])

    # The same body again carries a stale resourceVersion now: 409.
    current["metadata"]["annotations"] = {"replaced": "twice"}
    with pytest.raises(ApiException) as stale:
        ops.replace(name, current)
    assert _status_of(stale.value) == 409

    ops.delete(name)

    def gone() -> bool:
        try:
            ops.read(name)
        except ApiException as exc:
            assert _status_of(exc) == 404
            return True
        return False

    wait_for(gone, what=f"{kind.kind} {name} to be deleted")  # namespaces finish asynchronously


@pytest.mark.parametrize("kind", [k for k in ALL_KINDS if not k.is_custom], ids=kind_id)
def test_strategic_merge_patch_with_dict_body(api_client: client.ApiClient, kind: Kind) -> None:
    """A dict body to a typed ``patch_*`` goes out as application/strategic-merge-patch+json."""
    ops = ops_for(kind, api_client)
    name = _name(kind)
    ops.create(kind.obj(name, labels={"app": "kc"}))
    patched = ops.patch(name, {"metadata": {"labels": {"smp": "yes"}}})
    assert _labels(patched) == {"app": "kc", "smp": "yes"}


def test_strategic_merge_patch_merges_lists_by_key(api_client: client.ApiClient) -> None:
    apps = client.AppsV1Api(api_client)
    core = client.CoreV1Api(api_client)
    apps.create_namespaced_deployment(NS, DEPLOYMENT.obj("web"))
    env = {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "env": [{"name": "A", "value": "1"}]}]}}}}
    patched = apps.patch_namespaced_deployment("web", NS, env)
    container = patched.spec.template.spec.containers[0]
    assert (container.name, container.image) == ("c", "nginx:1.27")  # merged by name
    assert [(e.name, e.value) for e in container.env] == [("A", "1")]

    core.create_namespaced_service(NS, SERVICE.obj("svc"))
    two_ports = [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]  # both named
    service = core.patch_namespaced_service("svc", NS, {"spec": {"ports": two_ports}})
    assert sorted(p.port for p in service.spec.ports) == [80, 443]  # merged by port


def _watch_until_deleted(list_fn: Callable[..., Any], args: tuple[Any, ...],
                         rv: str) -> list[tuple[str, dict[str, Any]]]:
    """Stream from ``rv`` until a DELETED arrives; the stream is closed afterwards."""
    w = watch.Watch()
    events: list[tuple[str, dict[str, Any]]] = []
    stream = w.stream(list_fn, *args, resource_version=rv, timeout_seconds=10)
    try:
        for event in stream:
            raw = event["raw_object"]
            assert isinstance(raw, dict)
            events.append((event["type"], raw))
            if event["type"] in ("DELETED", "ERROR"):
                w.stop()
                break
    finally:
        stream.close()
    return events


@pytest.mark.parametrize("kind", [POD, DEPLOYMENT, GATEWAY], ids=kind_id)
def test_watch_from_list_rv_sees_create_update_delete(api_client: client.ApiClient,
                                                      kind: Kind) -> None:
    ops = ops_for(kind, api_client)
    ops.create(kind.obj("existing"))  # before the list: must not be replayed
    rv = ops.list()["metadata"]["resourceVersion"]

    created = ops.create(kind.obj("watched"))
    updated = ops.patch("watched", [{"op": "add", "path": "/metadata/labels",
                                     "value": {"step": "two"}}])
    ops.delete("watched")

    events = _watch_until_deleted(ops.list_fn, ops.list_args, rv)
    expected = [("ADDED", "watched"), ("MODIFIED", "watched")]
    if kind is POD:
        # A pod is graceful even with grace 0: kube writes the deletion mark (MODIFIED), then
        # removes it (store.go updateForGracefulDeletionAndFinalizers, lastGraceful == 0).
        expected.append(("MODIFIED", "watched"))
    expected.append(("DELETED", "watched"))
    assert [(t, o["metadata"]["name"]) for t, o in events] == expected
    rvs = [int(o["metadata"]["resourceVersion"]) for _, o in events]
    assert rvs[0] == int(created["metadata"]["resourceVersion"])
    assert rvs[1] == int(updated["metadata"]["resourceVersion"])
    assert rvs == sorted(set(rvs))
    assert all(o["kind"] == kind.kind and o["apiVersion"] == kind.api_version for _, o in events)
    assert events[-1][1]["metadata"]["labels"] == {"step": "two"}  # DELETED: the last state


def test_watch_deserializes_typed_objects(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, POD.obj("typed"))
    w = watch.Watch()
    stream = w.stream(core.list_namespaced_pod, NS, resource_version=rv, timeout_seconds=10)
    try:
        event = next(stream)
    finally:
        stream.close()
    assert event["type"] == "ADDED"
    assert isinstance(event["object"], client.V1Pod)
    assert event["object"].metadata.name == "typed"
    assert event["object"].spec.containers[0].image == "nginx:1.27"


def test_watch_without_rv_replays_existing_objects(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    for name in ("b", "a", "c"):
        core.create_namespaced_pod(NS, POD.obj(name))
    w = watch.Watch()
    stream = w.stream(core.list_namespaced_pod, NS, timeout_seconds=10)
    seen: list[tuple[str, str]] = []
    try:
        for event in stream:
            seen.append((event["type"], event["object"].metadata.name))
            if len(seen) == 3:
                w.stop()
                break
    finally:
        stream.close()
    assert seen == [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c")]


def test_api_exception_carries_status(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod("missing", NS)
    assert err.value.status == 404
    assert err.value.reason == "Not Found"
    assert '"message":"pods \\"missing\\" not found"' in err.value.body
