"""Table output: negotiation, kube's cell formatting per kind, the Table and watch shapes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from kubewire.resources import REGISTRY, Resource
from kubewire.server.tables.cells import human_duration
from kubewire.server.tables.columns import PRINTERS, column_definitions, printer_for, row_cells
from kubewire.server.tables.jsonpath import find_results, go_float, go_text
from kubewire.server.tables.output import (
    IncludeObject,
    NegotiatedTable,
    TableRequest,
    negotiate_output,
    negotiate_table,
    parse_include_object,
    table_event_object,
    table_for_list,
    table_for_object,
    table_request,
)
from kubewire.server.wire.encoding import negotiate_json
from kubewire.status import BadRequest, NotAcceptable
from tests.gateway_api import gateway_registry

NOW = datetime(2025, 3, 10, 12, 0, 0, tzinfo=UTC)
KUBECTL_ACCEPT = ("application/json;as=Table;v=v1;g=meta.k8s.io,"
                  "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")


def ago(seconds: float) -> str:
    return (NOW - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def res(resource_id: str) -> Resource:
    resource = gateway_registry().by_id(resource_id)  # Gateway API kinds: from their CRDs
    assert resource is not None
    return resource


def cells(resource_id: str, obj: dict[str, Any]) -> list[Any]:
    return row_cells(res(resource_id), obj, NOW)


def meta(name: str, age_s: float, **extra: Any) -> dict[str, Any]:
    return {"name": name, "namespace": "default", "uid": f"uid-{name}",
            "resourceVersion": "17", "creationTimestamp": ago(age_s), **extra}


def running(name: str, restarts: int = 0, last_finished_s: float | None = None,
            ready: bool = True) -> dict[str, Any]:
    status: dict[str, Any] = {"name": name, "ready": ready, "restartCount": restarts,
                              "started": True, "state": {"running": {"startedAt": ago(60)}}}
    if last_finished_s is not None:
        status["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error",
                                              "finishedAt": ago(last_finished_s)}}
    return status


def pod(name: str = "web-1", *, statuses: list[dict[str, Any]] | None = None,
        containers: int = 1, phase: str = "Running", **parts: Any) -> dict[str, Any]:
    spec = {"containers": [{"name": f"c{i}", "image": "nginx:1.27"} for i in range(containers)],
            "nodeName": "node-1", **parts.pop("spec", {})}
    status = {"phase": phase, "podIPs": [{"ip": "10.244.1.5"}], "podIP": "10.244.1.5",
              "conditions": [{"type": "Ready", "status": "True"}],
              "containerStatuses": statuses if statuses is not None else [running("c0")],
              **parts.pop("status", {})}
    return {"metadata": meta(name, 2 * 86400 + 3 * 3600, **parts.pop("metadata", {})),
            "spec": spec, "status": status}


# -- ages ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("seconds", "text"), [
    (-2, "<invalid>"), (-1.5, "0s"), (0, "0s"), (59, "59s"), (119, "119s"), (120, "2m"),
    (303, "5m3s"), (599, "9m59s"), (600, "10m"), (179 * 60 + 59, "179m"), (3 * 3600, "3h"),
    (7 * 3600 + 59 * 60, "7h59m"), (8 * 3600, "8h"), (47 * 3600, "47h"), (48 * 3600, "2d"),
    (50 * 3600, "2d2h"), (8 * 86400, "8d"), (729 * 86400, "729d"), (730 * 86400, "2y"),
    (800 * 86400, "2y70d"), (8 * 365 * 86400, "8y"),
])
def test_human_duration_matches_apimachinery(seconds: float, text: str) -> None:
    assert human_duration(timedelta(seconds=seconds)) == text


# -- negotiation -----------------------------------------------------------------------------

@pytest.mark.parametrize(("accept", "expected"), [
    (KUBECTL_ACCEPT, TableRequest("v1")),
    ("application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
     TableRequest("v1beta1")),
    ("application/json;as=Table;v=v1;g=meta.k8s.io", TableRequest("v1")),
    ("application/json; as=Table; v=v1; g=meta.k8s.io", TableRequest("v1")),
    ("application/json", None),
    ("application/json, */*", None),
    ("*/*", None),
    ("", None),
    ("application/json;stream=watch", None),
    ("application/json,application/json;as=Table;v=v1;g=meta.k8s.io", None),
    ("application/json;as=Table;v=v1;g=meta.k8s.io;q=0.5,application/json", None),
    ("application/json;q=0.5,application/json;as=Table;v=v1;g=meta.k8s.io", TableRequest("v1")),
    ("application/json;as=Table;v=v1alpha1;g=meta.k8s.io,application/json", None),
    ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json", None),
    ("application/yaml;as=Table;v=v1;g=meta.k8s.io,application/json", None),
    ("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,"
     "application/json;as=Table;v=v1;g=meta.k8s.io,application/json", TableRequest("v1")),
])
def test_negotiate_table(accept: str, expected: TableRequest | None) -> None:
    assert negotiate_table(accept) == expected


def test_table_only_accept_without_table_support_is_the_callers_406() -> None:
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io"
    assert negotiate_table(accept) is not None
    with pytest.raises(NotAcceptable):
        negotiate_json(accept, stream=True)  # what a watch-list request falls back to
    negotiate_json(KUBECTL_ACCEPT, stream=True)  # Table-then-JSON falls back to JSON


GENERAL_406 = ("only the following media types are accepted: application/json, "
               "application/yaml, application/vnd.kubernetes.protobuf")
STREAM_406 = ("only the following media types are accepted: application/json;stream=watch, "
              "application/vnd.kubernetes.protobuf;stream=watch")


@pytest.mark.parametrize(("accept", "query", "expected"), [
    (KUBECTL_ACCEPT, {}, NegotiatedTable("v1")),
    (KUBECTL_ACCEPT, {"includeObject": ["Object", "None"]}, NegotiatedTable("v1", "Object")),
    ("Application/JSON;as=Table;v=v1beta1;g=meta.k8s.io", {}, NegotiatedTable("v1beta1")),
    ("application/json", {"includeObject": ["Everything"]}, None),
    ("*/*", {}, None),
    ("", {}, None),
])
def test_negotiate_output(accept: str, query: dict[str, list[str]],
                          expected: NegotiatedTable | None) -> None:
    assert negotiate_output(accept, query) == expected
    assert negotiate_output(accept, query, watch=True) == expected


def test_negotiate_output_keeps_include_object_for_after_the_read() -> None:
    table = negotiate_output(KUBECTL_ACCEPT, {"includeObject": ["Everything"]})
    assert table == NegotiatedTable("v1", "Everything")
    with pytest.raises(BadRequest):
        table.resolve()
    assert NegotiatedTable("v1beta1", "None").resolve() == TableRequest("v1beta1", "None")


def test_watch_list_requests_are_never_tables() -> None:
    assert negotiate_output(KUBECTL_ACCEPT, {}, watch=True, watch_list=True) is None
    with pytest.raises(NotAcceptable) as info:  # kube's first (non-stream) negotiation fails
        negotiate_output("application/json;as=Table;v=v1;g=meta.k8s.io", {}, watch=True,
                         watch_list=True)
    assert info.value.message == GENERAL_406


@pytest.mark.parametrize(("accept", "watch", "message"), [
    ("text/html", False, GENERAL_406),
    ("application/json;as=Table;v=v2;g=meta.k8s.io", False, GENERAL_406),
    ("application/yaml", True, STREAM_406),
    ("application/yaml;q=0.5,text/html", True, STREAM_406),
    ("text/html", True, GENERAL_406),
    ("application/json;as=Table;v=v2;g=meta.k8s.io", True, GENERAL_406),
])
def test_negotiate_output_406(accept: str, watch: bool, message: str) -> None:
    with pytest.raises(NotAcceptable) as info:
        negotiate_output(accept, {}, watch=watch)
    assert info.value.message == message


@pytest.mark.parametrize(("value", "policy"), [
    ("", "Metadata"), ("Metadata", "Metadata"), ("None", "None"), ("Object", "Object")])
def test_include_object_values(value: str, policy: IncludeObject) -> None:
    assert parse_include_object(value) == policy
    assert table_request(KUBECTL_ACCEPT, value) == TableRequest("v1", policy)


def test_include_object_invalid_is_kubes_400_only_for_tables() -> None:
    with pytest.raises(BadRequest) as info:
        table_request(KUBECTL_ACCEPT, "Everything")
    assert info.value.message == (
        "Unable to convert to Table as requested: includeObject: Invalid value: "
        "\"Everything\": must be 'Metadata', 'Object', 'None', or empty")
    assert table_request("application/json", "Everything") is None


# -- columns ---------------------------------------------------------------------------------

def test_every_served_kind_has_printer_columns() -> None:
    for resource in REGISTRY:
        if resource.create_only:  # never read back (bindings): nothing to print
            continue
        assert resource.id in PRINTERS, resource.id
        # empty objects never crash a formatter and give one cell per column
        assert len(row_cells(resource, {}, NOW)) == len(printer_for(resource).columns)


def test_pod_column_definitions() -> None:
    assert column_definitions(res("core/pods")) == [
        {"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0},
        {"name": "Ready", "type": "string", "format": "", "description": "", "priority": 0},
        {"name": "Status", "type": "string", "format": "", "description": "", "priority": 0},
        {"name": "Restarts", "type": "string", "format": "", "description": "", "priority": 0},
        {"name": "Age", "type": "string", "format": "", "description": "", "priority": 0},
        {"name": "IP", "type": "string", "format": "", "description": "", "priority": 1},
        {"name": "Node", "type": "string", "format": "", "description": "", "priority": 1},
        {"name": "Nominated Node", "type": "string", "format": "", "description": "",
         "priority": 1},
        {"name": "Readiness Gates", "type": "string", "format": "", "description": "",
         "priority": 1},
    ]


@pytest.mark.parametrize(("resource_id", "names"), [
    ("core/namespaces", ["Name", "Status", "Age"]),
    ("core/nodes", ["Name", "Status", "Roles", "Age", "Version", "*Internal-IP",
                    "*External-IP", "*OS-Image", "*Kernel-Version", "*Container-Runtime"]),
    ("core/services", ["Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age",
                       "*Selector"]),
    ("core/configmaps", ["Name", "Data", "Age"]),
    ("core/secrets", ["Name", "Type", "Data", "Age"]),
    ("core/serviceaccounts", ["Name", "Secrets", "Age"]),
    ("coordination.k8s.io/leases", ["Name", "Holder", "Age"]),
    ("apps/deployments", ["Name", "Ready", "Up-to-date", "Available", "Age", "*Containers",
                          "*Images", "*Selector"]),
    ("events.k8s.io/events", ["Last Seen", "Type", "Reason", "Object", "*Subobject",
                              "*Source", "Message", "*First Seen", "*Count", "*Name"]),
    ("networking.k8s.io/ingresses", ["Name", "Class", "Hosts", "Address", "Ports", "Age"]),
    ("networking.k8s.io/networkpolicies", ["Name", "Pod-Selector", "Age"]),
    ("discovery.k8s.io/endpointslices", ["Name", "AddressType", "Ports", "Endpoints", "Age"]),
    ("gateway.networking.k8s.io/gateways", ["Name", "Class", "Address", "Programmed", "Age"]),
    ("gateway.networking.k8s.io/httproutes", ["Name", "Hostnames", "Age"]),
])
def test_column_names_and_wide_priorities(resource_id: str, names: list[str]) -> None:
    """``*`` marks priority 1 (``-o wide`` only)."""
    defs = column_definitions(res(resource_id))
    assert [("*" if d["priority"] else "") + d["name"] for d in defs] == names


def test_gateway_api_columns_follow_the_crd() -> None:
    defs = column_definitions(res("gateway.networking.k8s.io/gateways"))
    assert defs[0] == {"name": "Name", "type": "string", "format": "name", "description": "",
                       "priority": 0}
    assert defs[3] == {"name": "Programmed", "type": "string", "format": "", "priority": 0,
                       "description": "Custom resource definition column (in JSONPath format): "
                                      ".status.conditions[?(@.type==\"Programmed\")].status"}
    assert defs[4]["type"] == "date"


def test_kinds_without_printers_get_kubes_default_table() -> None:
    builtin = Resource("", "v1", "Widget", "widgets", "widget", namespaced=True)
    custom = Resource("example.com", "v1", "Gizmo", "gizmos", "gizmo", namespaced=True,
                      is_custom=True)
    obj = {"metadata": meta("w", 303)}
    assert [d["name"] for d in column_definitions(builtin)] == ["Name", "Created At"]
    assert column_definitions(builtin)[1]["type"] == "date"
    assert row_cells(builtin, obj, NOW) == ["w", ago(303)]
    assert [d["name"] for d in column_definitions(custom)] == ["Name", "Age"]
    assert row_cells(custom, obj, NOW) == ["w", "5m3s"]


# -- pods ------------------------------------------------------------------------------------

def test_pod_running_with_restarts_and_wide_columns() -> None:
    obj = pod(containers=2, statuses=[running("c0", restarts=1, last_finished_s=3600),
                                      running("c1", restarts=2, last_finished_s=300)])
    assert cells("core/pods", obj) == [
        "web-1", "2/2", "Running", "3 (5m ago)", "2d3h", "10.244.1.5", "node-1", "<none>",
        "<none>"]


def test_pod_pending_unscheduled() -> None:
    obj = pod(phase="Pending", statuses=[], spec={"nodeName": ""},
              status={"podIPs": [], "conditions": [], "nominatedNodeName": "node-2"})
    assert cells("core/pods", obj) == [
        "web-1", "0/1", "Pending", "0", "2d3h", "<none>", "<none>", "node-2", "<none>"]


@pytest.mark.parametrize(("state", "last", "expected"), [
    ({"waiting": {"reason": "ImagePullBackOff"}}, None, "ImagePullBackOff"),
    ({"waiting": {"reason": "CrashLoopBackOff"}}, {"terminated": {
        "exitCode": 1, "reason": "Error", "finishedAt": ago(42)}}, "CrashLoopBackOff"),
    ({"terminated": {"exitCode": 137}}, None, "ExitCode:137"),
    ({"terminated": {"exitCode": 0, "signal": 9}}, None, "Signal:9"),
    ({"terminated": {"exitCode": 1, "reason": "OOMKilled"}}, None, "OOMKilled"),
    ({"waiting": {}}, None, "Running"),
])
def test_pod_status_reasons(state: dict[str, Any], last: dict[str, Any] | None,
                            expected: str) -> None:
    status: dict[str, Any] = {"name": "c0", "ready": False, "restartCount": 4, "state": state}
    if last:
        status["lastState"] = last
    row = cells("core/pods", pod(statuses=[status]))
    assert row[1:4] == ["0/1", expected, "4 (42s ago)" if last else "4"]


def test_pod_init_containers() -> None:
    spec = {"initContainers": [{"name": "i0"}, {"name": "i1"}]}
    done = {"name": "i0", "restartCount": 0, "state": {"terminated": {"exitCode": 0}}}
    waiting = {"name": "i1", "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}
    crash = {"name": "i1", "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
    failed = {"name": "i1", "restartCount": 0, "state": {"terminated": {"exitCode": 3}}}
    main_waiting = [{"name": "c0", "restartCount": 0,
                     "state": {"waiting": {"reason": "PodInitializing"}}}]
    for inits, expected in [([done, waiting], "Init:1/2"), ([done, crash], "Init:CrashLoopBackOff"),
                            ([done, failed], "Init:ExitCode:3")]:
        obj = pod(phase="Pending", spec=spec, statuses=main_waiting,
                  status={"initContainerStatuses": inits, "conditions": []})
        assert cells("core/pods", obj)[1:4] == ["0/1", expected, str(inits[1]["restartCount"])]


def test_pod_sidecar_counts_towards_ready() -> None:
    spec = {"initContainers": [{"name": "proxy", "restartPolicy": "Always"}]}
    sidecar = {**running("proxy", restarts=1, last_finished_s=7200)}
    obj = pod(spec=spec, status={"initContainerStatuses": [sidecar]})
    assert cells("core/pods", obj)[1:4] == ["2/2", "Running", "1 (120m ago)"]


def test_pod_completed_has_row_condition() -> None:
    obj = pod(phase="Succeeded", statuses=[{"name": "c0", "ready": False, "restartCount": 0,
                                            "state": {"terminated": {"exitCode": 0,
                                                                     "reason": "Completed"}}}])
    table = table_for_object(res("core/pods"), obj, now=NOW)
    row = table["rows"][0]
    assert row["cells"][1:3] == ["0/1", "Completed"]
    assert row["conditions"] == [{"type": "Completed", "status": "True", "reason": "Succeeded",
                                  "message": "The pod has completed successfully."}]
    assert list(row) == ["cells", "conditions", "object"]


def test_pod_terminating_unknown_gated_and_readiness_gates() -> None:
    assert cells("core/pods", pod(metadata={"deletionTimestamp": ago(5)}))[2] == "Terminating"
    lost = pod(metadata={"deletionTimestamp": ago(5)}, status={"reason": "NodeLost"})
    assert cells("core/pods", lost)[2] == "Unknown"
    gated = pod(phase="Pending", statuses=[], status={"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]})
    assert cells("core/pods", gated)[2] == "SchedulingGated"
    gates = pod(spec={"readinessGates": [{"conditionType": "example.com/lb"},
                                         {"conditionType": "example.com/dns"}]},
                status={"conditions": [{"type": "Ready", "status": "True"},
                                       {"type": "example.com/lb", "status": "True"}]})
    assert cells("core/pods", gates)[8] == "1/2"


# -- other built-in kinds --------------------------------------------------------------------

def service(kind: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": meta("web", 303), "spec": {"type": kind, **spec},
            "status": spec.pop("status", {"loadBalancer": {}})}


def test_service_rows() -> None:
    ports = [{"port": 80, "protocol": "TCP", "targetPort": 8080},
             {"port": 443, "protocol": "TCP", "targetPort": 8443}]
    cluster = service("ClusterIP", clusterIP="10.96.0.10", clusterIPs=["10.96.0.10"],
                      ports=ports, selector={"tier": "fe", "app": "web"})
    assert cells("core/services", cluster) == [
        "web", "ClusterIP", "10.96.0.10", "<none>", "80/TCP,443/TCP", "5m3s", "app=web,tier=fe"]
    lb = service("LoadBalancer", clusterIPs=["10.96.0.11"],
                 ports=[{"port": 80, "protocol": "TCP", "nodePort": 30080}])
    assert cells("core/services", lb)[2:5] == ["10.96.0.11", "<pending>", "80:30080/TCP"]
    lb["status"] = {"loadBalancer": {"ingress": [{"ip": "203.0.113.9"},
                                                 {"hostname": "lb.example.com"}]}}
    assert cells("core/services", lb)[3] == "203.0.113.9,lb.example.com"
    lb["spec"]["externalIPs"] = ["198.51.100.1"]
    assert cells("core/services", lb)[3] == "203.0.113.9,lb.example.com,198.51.100.1"
    node_port = service("NodePort", clusterIPs=["10.96.0.12"], externalIPs=["198.51.100.2"])
    assert cells("core/services", node_port)[3:5] == ["198.51.100.2", "<none>"]
    external = service("ExternalName", externalName="db.example.com")
    assert cells("core/services", external) == [
        "web", "ExternalName", "<none>", "db.example.com", "<none>", "5m3s", "<none>"]


def test_node_rows() -> None:
    node = {"metadata": {"name": "cp-1", "creationTimestamp": ago(400 * 86400), "labels": {
                "node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "master",
                "kubernetes.io/hostname": "cp-1"}},
            "spec": {"unschedulable": True},
            "status": {"conditions": [{"type": "MemoryPressure", "status": "False"},
                                      {"type": "Ready", "status": "True"}],
                       "addresses": [{"type": "InternalIP", "address": "192.168.1.10"},
                                     {"type": "Hostname", "address": "cp-1"}],
                       "nodeInfo": {"kubeletVersion": "v1.32.0", "osImage": "Ubuntu 24.04 LTS",
                                    "kernelVersion": "6.8.0-45-generic",
                                    "containerRuntimeVersion": "containerd://1.7.22"}}}
    assert cells("core/nodes", node) == [
        "cp-1", "Ready,SchedulingDisabled", "control-plane,master", "400d", "v1.32.0",
        "192.168.1.10", "<none>", "Ubuntu 24.04 LTS", "6.8.0-45-generic", "containerd://1.7.22"]
    bare = {"metadata": {"name": "n2", "creationTimestamp": ago(30)},
            "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}
    assert cells("core/nodes", bare) == [
        "n2", "NotReady", "<none>", "30s", "", "<none>", "<none>", "<unknown>", "<unknown>",
        "<unknown>"]
    assert cells("core/nodes", {"metadata": {"name": "n3"}})[1:4] == [
        "Unknown", "<none>", "<unknown>"]


def test_namespace_configmap_secret_serviceaccount_lease_rows() -> None:
    ns = {"metadata": {"name": "default", "creationTimestamp": ago(400 * 86400)},
          "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
    assert cells("core/namespaces", ns) == ["default", "Active", "400d"]
    cm = {"metadata": meta("cfg", 61), "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}}
    assert cells("core/configmaps", cm) == ["cfg", 3, "61s"]
    secret = {"metadata": meta("tls", 3 * 86400), "type": "kubernetes.io/tls",
              "data": {"tls.crt": "Y3J0", "tls.key": "a2V5"}}
    assert cells("core/secrets", secret) == ["tls", "kubernetes.io/tls", 2, "3d"]
    assert cells("core/serviceaccounts", {"metadata": meta("default", 9)}) == ["default", 0, "9s"]
    sa = {"metadata": meta("builder", 9), "secrets": [{"name": "builder-token"}]}
    assert cells("core/serviceaccounts", sa) == ["builder", 1, "9s"]
    lease = {"metadata": meta("kube-scheduler", 3 * 3600 + 7 * 60),
             "spec": {"holderIdentity": "cp-1_4b7c", "leaseDurationSeconds": 15}}
    assert cells("coordination.k8s.io/leases", lease) == ["kube-scheduler", "cp-1_4b7c", "3h7m"]
    assert cells("coordination.k8s.io/leases", {"metadata": meta("free", 9), "spec": {}})[1] == ""


def test_deployment_rows() -> None:
    deploy = {"metadata": meta("web", 600),
              "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"},
                                                   "matchExpressions": [
                                                       {"key": "tier", "operator": "In",
                                                        "values": ["fe", "edge"]}]},
                       "template": {"spec": {"containers": [
                           {"name": "nginx", "image": "nginx:1.27"},
                           {"name": "sidecar", "image": "busybox:1.36"}]}}},
              "status": {"replicas": 3, "updatedReplicas": 3, "readyReplicas": 2,
                         "availableReplicas": 2}}
    assert cells("apps/deployments", deploy) == [
        "web", "2/3", 3, 2, "10m", "nginx,sidecar", "nginx:1.27,busybox:1.36",
        "app=web,tier in (edge,fe)"]
    fresh = {"metadata": meta("new", 1), "spec": {"replicas": 1, "selector": {}}, "status": {}}
    assert cells("apps/deployments", fresh) == ["new", "0/1", 0, 0, "1s", "", "", ""]


def test_event_rows() -> None:
    event_time = ago(91)[:-1] + ".500000Z"  # 90.5s ago: ages truncate to 90s
    event = {"metadata": meta("web-1.17f3a2b", 90), "eventTime": event_time,
             "reportingController": "kubelet", "reportingInstance": "node-1",
             "action": "Pulling", "reason": "Pulled", "type": "Normal",
             "regarding": {"kind": "Pod", "namespace": "default", "name": "web-1",
                           "fieldPath": "spec.containers{nginx}"},
             "note": "Successfully pulled image \"nginx:1.27\"\n"}
    assert cells("events.k8s.io/events", event) == [
        "90s", "Normal", "Pulled", "pod/web-1", "spec.containers{nginx}", "kubelet, node-1",
        "Successfully pulled image \"nginx:1.27\"", "90s", 1, "web-1.17f3a2b"]
    series = {**event, "series": {"count": 5, "lastObservedTime": ago(30)},
              "reportingInstance": "", "regarding": {"kind": "Node", "name": ""}}
    assert cells("events.k8s.io/events", series) == [
        "30s", "Normal", "Pulled", "node", "", "kubelet",
        "Successfully pulled image \"nginx:1.27\"", "90s", 5, "web-1.17f3a2b"]
    legacy = {**event, "deprecatedFirstTimestamp": ago(3600), "deprecatedLastTimestamp": ago(60),
              "deprecatedCount": 7, "deprecatedSource": {"component": "scheduler"}}
    assert cells("events.k8s.io/events", legacy)[0::5] == ["60s", "scheduler, node-1"]
    assert cells("events.k8s.io/events", legacy)[7:9] == ["60m", 7]


def test_ingress_rows() -> None:
    ing = {"metadata": meta("web", 3 * 3600),
           "spec": {"ingressClassName": "nginx", "tls": [{"hosts": ["a.example.com"]}],
                    "rules": [{"host": "a.example.com"}, {"http": {"paths": []}},
                              {"host": "b.example.com"}, {"host": "c.example.com"},
                              {"host": "d.example.com"}]},
           "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.10"},
                                                   {"hostname": "lb.example.com"},
                                                   {"ip": "203.0.113.10"}]}}}
    assert cells("networking.k8s.io/ingresses", ing) == [
        "web", "nginx", "a.example.com,b.example.com,c.example.com + 2 more...",
        "203.0.113.10,lb.example.com", "80, 443", "3h"]
    bare = {"metadata": meta("any", 5), "spec": {"defaultBackend": {}}, "status": {}}
    assert cells("networking.k8s.io/ingresses", bare) == ["any", "<none>", "*", "", "80", "5s"]


def test_networkpolicy_and_endpointslice_rows() -> None:
    deny = {"metadata": meta("deny-all", 5), "spec": {"podSelector": {}}}
    assert cells("networking.k8s.io/networkpolicies", deny) == ["deny-all", "<none>", "5s"]
    db = {"metadata": meta("db", 5), "spec": {"podSelector": {"matchLabels": {"role": "db"}}}}
    assert cells("networking.k8s.io/networkpolicies", db)[1] == "role=db"
    eps = {"metadata": meta("web-abc12", 5), "addressType": "IPv4",
           "ports": [{"name": "http", "port": 80, "protocol": "TCP"},
                     {"name": "metrics", "protocol": "TCP"}],
           "endpoints": [{"addresses": [f"10.0.0.{i}"]} for i in range(1, 6)]}
    assert cells("discovery.k8s.io/endpointslices", eps) == [
        "web-abc12", "IPv4", "80,metrics", "10.0.0.1,10.0.0.2,10.0.0.3 + 2 more...", "5s"]
    empty = {"metadata": meta("none", 5), "addressType": "IPv6", "endpoints": []}
    assert cells("discovery.k8s.io/endpointslices", empty)[2:4] == ["<unset>", "<unset>"]


def test_gateway_api_rows() -> None:
    gw = {"metadata": meta("gw", 3 * 3600), "spec": {"gatewayClassName": "istio"},
          "status": {"addresses": [{"type": "IPAddress", "value": "10.0.0.1"},
                                   {"type": "IPAddress", "value": "10.0.0.2"}],
                     "conditions": [{"type": "Accepted", "status": "True"},
                                    {"type": "Programmed", "status": "True"}]}}
    assert cells("gateway.networking.k8s.io/gateways", gw) == [
        "gw", "istio", "10.0.0.1", "True", "3h"]
    pending = {"metadata": meta("gw2", 120), "spec": {"gatewayClassName": "istio"},
               "status": {"conditions": [{"type": "Accepted", "status": "Unknown"},
                                         {"type": "Programmed", "status": "Unknown"}]}}
    assert cells("gateway.networking.k8s.io/gateways", pending) == [
        "gw2", "istio", None, "Unknown", "2m"]
    route = {"metadata": meta("r", 45), "spec": {"hostnames": ["example.com", "www.example.com"]}}
    assert cells("gateway.networking.k8s.io/httproutes", route) == [
        "r", '["example.com","www.example.com"]', "45s"]
    assert cells("gateway.networking.k8s.io/httproutes", {"metadata": meta("r2", 45)}) == [
        "r2", None, "45s"]


def test_crd_jsonpath_subset() -> None:
    obj = {"a": [{"k": "x", "v": 1}, {"k": "y", "v": 2.5}], "m": {"b": True}}
    assert find_results(obj, ".a[*].v") == [1, 2.5]
    assert find_results(obj, ".a[-1].k") == ["y"]
    assert find_results(obj, '.a[?(@.k!="x")].v') == [2.5]
    assert find_results(obj, ".missing.deeper") == []
    assert find_results(obj, "not a path") == []
    assert [go_float(v) for v in (2.5, 1e6, 123456.0, 1.5e-5, 3.0)] == [
        "2.5", "1e+06", "123456", "1.5e-05", "3"]


# client-go JSONPath.PrintResults writes a map or a list with json.Marshal (Go 1.23's
# encoding/json): keys sorted, encode.go appendString's escapes, floatEncoder's numbers.
@pytest.mark.parametrize(("value", "text"), [
    # appendString: U+2028/U+2029 escaped (JavaScript line terminators)
    ({"a": "x\u2028y\u2029"}, r'{"a":"x\u2028y\u2029"}'),
    # appendString: escapeHTML is on for json.Marshal, in keys as in values
    ({"<k>": "a&b"}, r'{"\u003ck\u003e":"a\u0026b"}'),
    # appendString (Go 1.22+): \b and \f short, other controls \u00XX, DEL raw
    (["\b\f\x01\x7f"], '["\\b\\f\\u0001\x7f"]'),
    # appendString: invalid UTF-8 (a lone surrogate here) becomes \ufffd, where it crashed
    ({"a": "\udc80"}, r'{"a":"\ufffd"}'),
    # non-ASCII is written raw
    ({"caf\u00e9": "\u65e5\U0001F600"}, '{"caf\u00e9":"\u65e5\U0001F600"}'),
    # floatEncoder: 'f' below 1e21 (integral floats without a fraction), 'e' from 1e21 with an
    # explicit sign, below 1e-6 with a one-digit exponent
    ([3.0, 1e20, 1e21, 1e-7, 1.5e-5, 0.1], "[3,100000000000000000000,1e+21,1e-7,0.000015,0.1]"),
])
def test_go_text_prints_maps_and_lists_as_json_marshal(value: Any, text: str) -> None:
    assert go_text(value) == text


# -- Table shape -----------------------------------------------------------------------------

def test_list_table_shape_with_partial_object_metadata() -> None:
    objs = [pod("a"), pod("b")]
    table = table_for_list(res("core/pods"), objs, now=NOW, list_meta={
        "resourceVersion": "42", "continue": "tok", "remainingItemCount": 3})
    assert list(table) == ["kind", "apiVersion", "metadata", "columnDefinitions", "rows"]
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"] == {"resourceVersion": "42", "continue": "tok",
                                 "remainingItemCount": 3}
    assert table["columnDefinitions"] == column_definitions(res("core/pods"))
    assert [r["cells"][0] for r in table["rows"]] == ["a", "b"]
    assert table["rows"][0]["object"] == {"kind": "PartialObjectMetadata",
                                          "apiVersion": "meta.k8s.io/v1",
                                          "metadata": objs[0]["metadata"]}


def test_empty_list_and_v1beta1() -> None:
    table = table_for_list(res("core/namespaces"), [], list_meta={"resourceVersion": "5"},
                           request=TableRequest("v1beta1"), now=NOW)
    body = msgspec.json.encode(table)
    assert body.startswith(b'{"kind":"Table","apiVersion":"meta.k8s.io/v1beta1",'
                           b'"metadata":{"resourceVersion":"5"},"columnDefinitions":[')
    assert body.endswith(b'],"rows":[]}')


@pytest.mark.parametrize("policy", ["None", "Object"])
def test_include_object_variants(policy: IncludeObject) -> None:
    obj = {"metadata": meta("cfg", 5), "data": {"k": "v"}}
    table = table_for_object(res("core/configmaps"), obj, now=NOW,
                             request=TableRequest(include_object=policy))
    row = table["rows"][0]
    if policy == "None":
        assert row == {"cells": ["cfg", 1, "5s"], "object": None}
    else:
        assert row["object"] == {"kind": "ConfigMap", "apiVersion": "v1", **obj}
        assert list(row["object"])[:2] == ["kind", "apiVersion"]


def test_single_object_table_carries_its_resource_version() -> None:
    table = table_for_object(res("core/pods"), pod(), now=NOW)
    assert table["metadata"] == {"resourceVersion": "17"}
    assert len(table["rows"]) == 1
    assert list(table["rows"][0]) == ["cells", "object"]


def test_watch_event_tables_send_column_definitions_only_first() -> None:
    resource = res("core/pods")
    first = table_event_object(resource, pod("a"), first=True, now=NOW)
    later = table_event_object(resource, pod("b"), first=False, now=NOW)
    assert first["columnDefinitions"] == column_definitions(resource)
    assert later["columnDefinitions"] is None
    assert b'"columnDefinitions":null' in msgspec.json.encode(later)
    assert later["rows"][0]["cells"][0] == "b"
    beta = table_event_object(resource, pod("c"), first=False, now=NOW,
                              request=TableRequest("v1beta1", "None"))
    assert beta["apiVersion"] == "meta.k8s.io/v1beta1" and beta["rows"][0]["object"] is None
