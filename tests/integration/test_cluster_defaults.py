"""What every cluster has from its first second (controllers.md §10, objects-and-clients.md):
the ``default/kubernetes`` Service and EndpointSlice, a ``default`` ServiceAccount and the
``kube-root-ca.crt`` ConfigMap in every namespace, and the default admission plugins' marks on
new pods (ServiceAccount, Priority, DefaultTolerationSeconds).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.kinds import CONFIG_MAP, NAMESPACE, POD, SERVICE_ACCOUNT
from tests.integration.wire import call, create, get, ok, wait_for

ROOT_CA = "kube-root-ca.crt"
DESCRIPTION = ("Contains a CA bundle that can be used to verify the kube-apiserver when using "
               "internal endpoints such as the internal service IP or kubernetes.default.svc. "
               "No other usage is guaranteed across distributions of Kubernetes clusters.")
MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
DEFAULT_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300}]


@pytest.fixture
def tls_server(make_server: Callable[..., ServerThread]) -> ServerThread:
    return make_server(insecure_http=False)


@pytest.fixture
def core(tls_server: ServerThread) -> Iterator[k8s.CoreV1Api]:
    """The official client, through the admin kubeconfig kubewire wrote (TLS, client cert)."""
    api = k8s_config.new_client_from_config(str(tls_server.kubeconfig))
    try:
        yield k8s.CoreV1Api(api)
    finally:
        api.close()


def token_volume(name: str) -> dict[str, Any]:
    return {"name": name, "projected": {"sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": ROOT_CA, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
            "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}],
        "defaultMode": 420}}


# --- (a) default/kubernetes ---------------------------------------------------------------------

def test_kubernetes_service_and_endpointslice(tls_server: ServerThread,
                                              core: k8s.CoreV1Api) -> None:
    svc = wait_for(lambda: _read_or_none(core.read_namespaced_service, "kubernetes", "default"),
                   what="the kubernetes Service")
    assert svc.metadata.labels == {"component": "apiserver", "provider": "kubernetes"}
    assert svc.spec.cluster_ip == "10.96.0.1" and svc.spec.cluster_ips == ["10.96.0.1"]
    assert svc.spec.type == "ClusterIP" and svc.spec.session_affinity == "None"
    assert svc.spec.ip_families == ["IPv4"] and svc.spec.ip_family_policy == "SingleStack"
    [port] = svc.spec.ports
    assert (port.name, port.port, port.protocol, port.target_port) == (
        "https", 443, "TCP", tls_server.port)
    assert svc.spec.selector is None

    discovery = k8s.DiscoveryV1Api(core.api_client)
    slice_ = wait_for(lambda: _read_or_none(discovery.read_namespaced_endpoint_slice,
                                            "kubernetes", "default"),
                      what="the kubernetes EndpointSlice")
    assert slice_.metadata.labels == {"kubernetes.io/service-name": "kubernetes"}
    assert slice_.address_type == "IPv4"
    [endpoint] = slice_.endpoints
    assert endpoint.addresses == ["127.0.0.1"] and endpoint.conditions.ready is True
    [slice_port] = slice_.ports
    assert (slice_port.name, slice_port.port, slice_port.protocol) == (
        "https", tls_server.port, "TCP")

    # kept in place: deleted, they come back
    core.delete_namespaced_service("kubernetes", "default")
    discovery.delete_namespaced_endpoint_slice("kubernetes", "default")
    back = wait_for(lambda: _read_or_none(core.read_namespaced_service, "kubernetes", "default"),
                    what="the kubernetes Service again")
    assert back.spec.cluster_ip == "10.96.0.1" and back.metadata.uid != svc.metadata.uid
    wait_for(lambda: _read_or_none(discovery.read_namespaced_endpoint_slice, "kubernetes",
                                   "default"), what="the EndpointSlice again")


def test_kubernetes_endpoints(tls_server: ServerThread, core: k8s.CoreV1Api) -> None:
    """kube's endpoint reconciler also keeps an Endpoints ``kubernetes`` (skip-mirror label)."""
    eps = wait_for(lambda: _read_or_none(core.read_namespaced_endpoints, "kubernetes",
                                         "default"), what="the kubernetes Endpoints")
    assert eps.metadata.labels == {"endpointslice.kubernetes.io/skip-mirror": "true"}
    [subset] = eps.subsets
    assert [a.ip for a in subset.addresses] == ["127.0.0.1"]
    assert subset.not_ready_addresses is None
    [port] = subset.ports
    assert (port.name, port.port, port.protocol) == ("https", tls_server.port, "TCP")
    listed = kubectl.ok(tls_server, "get", "endpoints", "kubernetes", "-n", "default")
    assert re.split(r"\s+", listed.splitlines()[1])[:2] == [
        "kubernetes", f"127.0.0.1:{tls_server.port}"]
    # kept in place: deleted or changed, it comes back as it was
    core.delete_namespaced_endpoints("kubernetes", "default")
    back = wait_for(lambda: _read_or_none(core.read_namespaced_endpoints, "kubernetes",
                                          "default"), what="the Endpoints again")
    assert back.metadata.uid != eps.metadata.uid
    core.patch_namespaced_endpoints("kubernetes", "default", {"subsets": [
        {"addresses": [{"ip": "10.1.2.3"}], "ports": [{"port": 1}]}]})
    wait_for(lambda: core.read_namespaced_endpoints("kubernetes", "default").subsets[0]
             .addresses[0].ip == "127.0.0.1", what="the Endpoints set right")


def test_kubernetes_service_follows_the_port_after_restart(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server()
    path = "/api/v1/namespaces/default/services/kubernetes"
    first = wait_for(lambda: call(server, "GET", path).status == 200 and get(server, path))
    server.stop()
    server.config = server.config.__class__(**{**_fields(server.config), "port": 0})
    server.start()
    slices = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes"
    wait_for(lambda: get(server, path)["spec"]["ports"][0]["targetPort"] == server.port,
             what="the Service's targetPort to follow the new port")
    wait_for(lambda: get(server, slices)["ports"][0]["port"] == server.port,
             what="the EndpointSlice's port to follow the new port")
    assert get(server, path)["metadata"]["uid"] == first["metadata"]["uid"]


# --- (b) default ServiceAccount, (c) kube-root-ca.crt ---------------------------------------------

@kubectl.needs_kubectl
def test_new_namespace_gets_default_service_account_and_root_ca(tls_server: ServerThread,
                                                                core: k8s.CoreV1Api) -> None:
    kubectl.ok(tls_server, "create", "namespace", "new")
    out = wait_for(lambda: kubectl.run(tls_server, "get", "sa", "default", "-n", "new",
                                       "-o", "name").stdout.strip(),
                   what="the default ServiceAccount")
    assert out == "serviceaccount/default"
    ca = tls_server.config.data_dir.joinpath("pki", "ca.crt").read_text()
    cm = wait_for(lambda: _read_or_none(core.read_namespaced_config_map, ROOT_CA, "new"),
                  what="kube-root-ca.crt")
    assert cm.data == {"ca.crt": ca}
    assert cm.metadata.annotations == {"kubernetes.io/description": DESCRIPTION}
    # the system namespaces have them too
    for namespace in ("default", "kube-system", "kube-public", "kube-node-lease"):
        wait_for(lambda ns=namespace: _read_or_none(core.read_namespaced_service_account,
                                                    "default", ns), what=f"{namespace}'s SA")
        wait_for(lambda ns=namespace: _read_or_none(core.read_namespaced_config_map, ROOT_CA,
                                                    ns), what=f"{namespace}'s root CA")

    # deleted, the account comes back; an edited ConfigMap gets its data back
    old_uid = core.read_namespaced_service_account("default", "new").metadata.uid
    kubectl.ok(tls_server, "delete", "sa", "default", "-n", "new")
    back = wait_for(lambda: _read_or_none(core.read_namespaced_service_account, "default",
                                          "new"), what="the account again")
    assert back.metadata.uid != old_uid
    core.patch_namespaced_config_map(ROOT_CA, "new", {"data": {"ca.crt": "tampered"}})
    wait_for(lambda: core.read_namespaced_config_map(ROOT_CA, "new").data == {"ca.crt": ca},
             what="the CA to be put back")
    core.delete_namespaced_config_map(ROOT_CA, "new")
    wait_for(lambda: _read_or_none(core.read_namespaced_config_map, ROOT_CA, "new"),
             what="the ConfigMap again")


def test_without_a_ca_no_root_ca_config_map_is_published(server: ServerThread) -> None:
    """Plain HTTP and no CA ever made: the account appears, the ConfigMap does not."""
    create(server, NAMESPACE.collection(), NAMESPACE.obj("plain"))
    wait_for(lambda: call(server, "GET", SERVICE_ACCOUNT.item("default", "plain")).status == 200,
             what="the default ServiceAccount")
    _wait_idle(server)
    assert call(server, "GET", CONFIG_MAP.item(ROOT_CA, "plain")).status == 404


# --- (d) admission on pods ----------------------------------------------------------------------

def test_pod_create_gets_account_token_volume_priority_and_tolerations(
        tls_server: ServerThread, core: k8s.CoreV1Api) -> None:
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
            "spec": {"initContainers": [{"name": "init", "image": "busybox"}],
                     "containers": [{"name": "app", "image": "nginx"},
                                    {"name": "side", "image": "busybox", "volumeMounts": [
                                        {"name": "own", "mountPath": MOUNT_PATH}]}],
                     "volumes": [{"name": "own", "emptyDir": {}}]}}
    core.create_namespaced_pod("default", body)
    pod = core.api_client.sanitize_for_serialization(core.read_namespaced_pod("web", "default"))
    spec = pod["spec"]
    assert spec["serviceAccountName"] == "default" and spec["serviceAccount"] == "default"
    own, token = spec["volumes"]
    assert own == {"name": "own", "emptyDir": {}}
    assert re.fullmatch(r"kube-api-access-[bcdfghjklmnpqrstvwxz2456789]{5}", token["name"])
    assert token == token_volume(token["name"])
    mount = {"name": token["name"], "readOnly": True, "mountPath": MOUNT_PATH}
    assert spec["initContainers"][0]["volumeMounts"] == [mount]
    assert spec["containers"][0]["volumeMounts"] == [mount]
    # a container with its own mount at the path keeps it
    assert spec["containers"][1]["volumeMounts"] == [{"name": "own", "mountPath": MOUNT_PATH}]
    assert spec["priority"] == 0 and spec["preemptionPolicy"] == "PreemptLowerPriority"
    assert spec["tolerations"] == DEFAULT_TOLERATIONS
    # admission's additions belong to no manager, as in kube (managedFields come first)
    [entry] = pod["metadata"]["managedFields"]
    fields = entry["fieldsV1"]["f:spec"]
    assert "f:tolerations" not in fields and "f:priority" not in fields
    assert "f:serviceAccountName" not in fields


def test_pod_admission_respects_what_the_pod_says(server: ServerThread) -> None:
    create(server, SERVICE_ACCOUNT.collection(), SERVICE_ACCOUNT.obj(
        "quiet", automountServiceAccountToken=False) | {"automountServiceAccountToken": False,
                                                          "imagePullSecrets": [{"name": "reg"}]})
    tolerations = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                    "effect": "NoExecute", "tolerationSeconds": 5}]
    pod = create(server, POD.collection(), POD.obj("quiet") | {"spec": {
        "serviceAccount": "quiet", "tolerations": tolerations,
        "containers": [{"name": "c", "image": "busybox"}]}})
    spec = pod["spec"]
    assert spec["serviceAccountName"] == "quiet" and spec["serviceAccount"] == "quiet"
    assert "volumes" not in spec and "volumeMounts" not in spec["containers"][0]
    assert spec["imagePullSecrets"] == [{"name": "reg"}]
    assert spec["tolerations"] == [tolerations[0], DEFAULT_TOLERATIONS[1]]
    # the pod's own word beats the account's
    opted_in = create(server, POD.collection(), POD.obj("loud") | {"spec": {
        "serviceAccountName": "quiet", "automountServiceAccountToken": True,
        "containers": [{"name": "c", "image": "busybox"}]}})
    assert opted_in["spec"]["volumes"][0]["name"].startswith("kube-api-access-")
    # updates keep the priority and get the dropped default toleration back (else pod update
    # validation would refuse the change)
    replaced = dict(pod, spec={**{k: v for k, v in spec.items() if k != "priority"},
                               "tolerations": tolerations})
    again = ok(call(server, "PUT", POD.item("quiet"), replaced), 200)
    assert again["spec"]["priority"] == 0
    assert again["spec"]["tolerations"] == [tolerations[0], DEFAULT_TOLERATIONS[1]]


@pytest.mark.parametrize(("spec", "message"), [
    ({"serviceAccountName": "nobody"},
     "error looking up service account default/nobody: serviceaccount \"nobody\" not found"),
    ({"priorityClassName": "gold"}, "no PriorityClass with name gold was found"),
    ({"priority": 7}, "the integer value of priority (7) must not be provided in pod spec; "
                      "priority admission controller computed 0 from the given PriorityClass "
                      "name"),
    ({"preemptionPolicy": "Never"},
     "the string value of PreemptionPolicy (Never) must not be provided in pod spec; priority "
     "admission controller computed PreemptLowerPriority from the given PriorityClass name"),
])
def test_pod_admission_refusals(server: ServerThread, spec: dict[str, Any],
                                message: str) -> None:
    body = POD.obj("refused") | {"spec": {**spec, "containers": [{"name": "c", "image": "x"}]}}
    reply = call(server, "POST", POD.collection(), body)
    assert reply.status == 403, reply.json
    assert reply.json["message"] == f'pods "refused" is forbidden: {message}'
    assert reply.json["details"] == {"name": "refused", "kind": "pods"}
    assert call(server, "GET", POD.item("refused")).status == 404


def test_system_priority_class_resolves(server: ServerThread) -> None:
    pod = create(server, POD.collection("kube-system"), POD.obj("critical") | {"spec": {
        "priorityClassName": "system-cluster-critical",
        "containers": [{"name": "c", "image": "x"}]}})
    assert pod["spec"]["priority"] == 2000000000


def _read_or_none(read: Callable[..., Any], *args: str) -> Any:
    try:
        return read(*args)
    except k8s.ApiException as err:
        if err.status == 404:
            return None
        raise


def _wait_idle(server: ServerThread) -> None:
    assert server.server is not None
    controllers = server.server.controllers
    wait_for(lambda: server.call(lambda: controllers.idle), what="the controllers to settle")


def _fields(config: Any) -> dict[str, Any]:
    return {name: getattr(config, name) for name in config.__dataclass_fields__}
