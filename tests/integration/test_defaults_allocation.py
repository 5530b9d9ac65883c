"""Defaulting on every write and Service clusterIP/nodePort allocation, over the real wire.

Expected objects are kube-apiserver v1.32's (objects-and-clients.md §3): defaults appear in what
a create, a PUT and a patch store and answer; Services get addresses from the service CIDR and
node ports from 30000-32767, with kube's exact 422s when a requested one is taken or out of range;
deletes and type changes give them back, and a restart keeps them unique.
"""

from __future__ import annotations

import copy
import ipaddress
from collections.abc import Callable
from typing import Any

from tests.integration.harness import ServerThread
from tests.integration.kinds import DEPLOYMENT, POD, SERVICE
from tests.integration.wire import call, create, get, ok, wait_for, watch

JSON = dict[str, Any]
KUBEADM_SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/12")


def status(code: int, reason: str, message: str, details: JSON) -> JSON:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "details": details, "code": code}


def service(name: str, **spec: Any) -> JSON:
    body = SERVICE.obj(name)
    body["spec"].update(spec)
    return body


def invalid_service(name: str, field: str, value: str, detail: str) -> JSON:
    message = f"Invalid value: {value}: {detail}"
    return status(422, "Invalid", f'Service "{name}" is invalid: {field}: {message}',
                  {"name": name, "kind": "Service",
                   "causes": [{"reason": "FieldValueInvalid", "message": message,
                               "field": field}]})


def services_snapshot(server: ServerThread) -> tuple[str, list[JSON]]:
    listed = get(server, SERVICE.collection())
    return listed["metadata"]["resourceVersion"], listed["items"]


# --- §3 defaults --------------------------------------------------------------------------------

def test_created_pod_reads_back_with_kube_defaults(server: ServerThread) -> None:
    body = POD.obj("web")
    body["spec"]["containers"] = [
        {"name": "pinned", "image": "nginx:1.27", "ports": [{"containerPort": 80}]},
        {"name": "floating", "image": "nginx",
         "readinessProbe": {"httpGet": {"port": 80}}}]
    created = create(server, POD.collection(), body)
    assert get(server, POD.item("web")) == created
    spec = created["spec"]
    assert {k: spec[k] for k in ("restartPolicy", "terminationGracePeriodSeconds", "dnsPolicy",
                                 "schedulerName", "securityContext", "enableServiceLinks")} == {
        "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
        "securityContext": {}, "enableServiceLinks": True}
    pinned, floating = spec["containers"]
    [token_volume] = spec["volumes"]  # ServiceAccount admission's (test_cluster_defaults.py)
    assert pinned == {"name": "pinned", "image": "nginx:1.27",
                      "ports": [{"containerPort": 80, "protocol": "TCP"}],
                      "imagePullPolicy": "IfNotPresent",
                      "terminationMessagePath": "/dev/termination-log",
                      "terminationMessagePolicy": "File",
                      "volumeMounts": [{"name": token_volume["name"], "readOnly": True,
                                        "mountPath": "/var/run/secrets/kubernetes.io/"
                                                     "serviceaccount"}]}
    assert floating["imagePullPolicy"] == "Always"  # no tag means :latest
    assert floating["readinessProbe"] == {
        "httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
        "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
    assert created["status"] == {"phase": "Pending", "qosClass": "BestEffort"}


def test_created_deployment_reads_back_with_kube_defaults(server: ServerThread) -> None:
    body = DEPLOYMENT.obj("web")
    del body["spec"]["replicas"]
    created = create(server, DEPLOYMENT.collection(), body)
    spec = created["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "RollingUpdate",
                                "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
    assert (spec["revisionHistoryLimit"], spec["progressDeadlineSeconds"]) == (10, 600)
    template = spec["template"]["spec"]
    assert template["restartPolicy"] == "Always"
    assert template["terminationGracePeriodSeconds"] == 30
    assert "enableServiceLinks" not in template  # a Pod default, not a template one
    assert template["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert created["metadata"]["generation"] == 1
    assert created["status"] == {}


def test_defaults_fill_a_put_body_and_a_patched_result(server: ServerThread) -> None:
    created = create(server, DEPLOYMENT.collection(), DEPLOYMENT.obj("web"))
    stripped = copy.deepcopy(created)
    for key in ("strategy", "revisionHistoryLimit", "progressDeadlineSeconds"):
        del stripped["spec"][key]
    del stripped["spec"]["template"]["spec"]["restartPolicy"]
    # The body defaults back to the stored object: nothing changes, not even the revision.
    replaced = ok(call(server, "PUT", DEPLOYMENT.item("web"), stripped), 200)
    assert replaced == created
    patched = ok(call(server, "PATCH", DEPLOYMENT.item("web"),
                      {"spec": {"revisionHistoryLimit": None, "strategy": None}}), 200)
    assert patched == created
    changed = ok(call(server, "PATCH", DEPLOYMENT.item("web"),
                      {"spec": {"revisionHistoryLimit": 3}}), 200)
    assert changed["spec"]["revisionHistoryLimit"] == 3
    assert changed["spec"]["strategy"] == created["spec"]["strategy"]
    assert changed["metadata"]["generation"] == 2


def test_created_service_reads_back_with_defaults_and_an_allocated_ip(
        server: ServerThread) -> None:
    created = create(server, SERVICE.collection(), service("web"))
    spec = created["spec"]
    assert ipaddress.ip_address(spec["clusterIP"]) in KUBEADM_SERVICE_CIDR
    assert spec["clusterIP"] != "10.96.0.1"  # reserved for the kubernetes Service
    assert spec == {"ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}],
                    "selector": {"app": "web"}, "clusterIP": spec["clusterIP"],
                    "clusterIPs": [spec["clusterIP"]], "type": "ClusterIP",
                    "sessionAffinity": "None", "ipFamilies": ["IPv4"],
                    "ipFamilyPolicy": "SingleStack", "internalTrafficPolicy": "Cluster"}
    assert created["status"] == {"loadBalancer": {}}
    assert get(server, SERVICE.item("web")) == created


def test_node_port_and_load_balancer_services_get_node_ports(server: ServerThread) -> None:
    node_port = create(server, SERVICE.collection(), service(
        "np", type="NodePort", ports=[{"name": "http", "port": 80},
                                      {"name": "https", "port": 443, "targetPort": "https"}]))
    ports = node_port["spec"]["ports"]
    assert [p["targetPort"] for p in ports] == [80, "https"]
    assert all(30000 <= p["nodePort"] <= 32767 for p in ports)
    assert ports[0]["nodePort"] != ports[1]["nodePort"]
    assert node_port["spec"]["externalTrafficPolicy"] == "Cluster"
    balancer = create(server, SERVICE.collection(), service("lb", type="LoadBalancer"))
    spec = balancer["spec"]
    assert spec["allocateLoadBalancerNodePorts"] is True
    assert 30000 <= spec["ports"][0]["nodePort"] <= 32767
    assert spec["ports"][0]["nodePort"] not in [p["nodePort"] for p in ports]
    assert spec["clusterIP"] != node_port["spec"]["clusterIP"]


def test_headless_service_gets_no_address(server: ServerThread) -> None:
    created = create(server, SERVICE.collection(), service("headless", clusterIP="None"))
    assert (created["spec"]["clusterIP"], created["spec"]["clusterIPs"]) == ("None", ["None"])


# --- §3 allocation errors change nothing --------------------------------------------------------

def test_a_taken_cluster_ip_is_refused_with_kubes_422(server: ServerThread) -> None:
    create(server, SERVICE.collection(), service("first", clusterIP="10.96.0.10"))
    before = services_snapshot(server)
    reply = call(server, "POST", SERVICE.collection(), service("second", clusterIP="10.96.0.10"))
    assert reply.json == invalid_service(
        "second", "spec.clusterIPs", '[]string{"10.96.0.10"}',
        "failed to allocate IP 10.96.0.10: provided IP is already allocated")
    assert services_snapshot(server) == before


def test_an_ip_outside_the_range_is_refused(server: ServerThread) -> None:
    reply = call(server, "POST", SERVICE.collection(), service("outside", clusterIP="10.0.0.1"))
    assert reply.json == invalid_service(
        "outside", "spec.clusterIPs", '[]string{"10.0.0.1"}',
        "failed to allocate IP 10.0.0.1: the provided IP (10.0.0.1) is not in the valid range. "
        "The range of valid IPs is 10.96.0.0/12")


def test_taken_and_out_of_range_node_ports_are_refused(server: ServerThread) -> None:
    create(server, SERVICE.collection(),
           service("first", type="NodePort", ports=[{"port": 80, "nodePort": 30080}]))
    before = services_snapshot(server)
    taken = call(server, "POST", SERVICE.collection(),
                 service("second", type="NodePort", ports=[{"port": 80, "nodePort": 30080}]))
    assert taken.json == invalid_service("second", "spec.ports[0].nodePort", "30080",
                                         "provided port is already allocated")
    outside = call(server, "POST", SERVICE.collection(),
                   service("third", type="NodePort", ports=[{"port": 80, "nodePort": 80}]))
    assert outside.json == invalid_service(
        "third", "spec.ports[0].nodePort", "80",
        "provided port is not in the valid range. The range of valid ports is 30000-32767")
    assert services_snapshot(server) == before


def test_a_failed_create_does_not_keep_what_it_allocated(server: ServerThread) -> None:
    create(server, SERVICE.collection(), service("web"))
    # Name taken: the address this attempt reserved goes back, so it can be asked for.
    reply = call(server, "POST", SERVICE.collection(),
                 service("web", clusterIP="10.96.0.20", type="NodePort",
                         ports=[{"port": 80, "nodePort": 30020}]))
    assert reply.status == 409
    other = create(server, SERVICE.collection(),
                   service("other", clusterIP="10.96.0.20", type="NodePort",
                           ports=[{"port": 80, "nodePort": 30020}]))
    assert other["spec"]["clusterIP"] == "10.96.0.20"


def test_dry_run_shows_an_address_but_keeps_none(server: ServerThread) -> None:
    body = service("web", clusterIP="10.96.0.30")
    dry = ok(call(server, "POST", SERVICE.collection(), body, params={"dryRun": "All"}), 201)
    assert dry["spec"]["clusterIPs"] == ["10.96.0.30"]
    assert call(server, "GET", SERVICE.item("web")).status == 404
    assert create(server, SERVICE.collection(), body)["spec"]["clusterIP"] == "10.96.0.30"


# --- release and reuse --------------------------------------------------------------------------

def test_deleting_a_service_frees_its_ip_and_node_port(server: ServerThread) -> None:
    body = service("web", clusterIP="10.96.0.40", type="NodePort",
                   ports=[{"port": 80, "nodePort": 30040}])
    create(server, SERVICE.collection(), body)
    ok(call(server, "DELETE", SERVICE.item("web")), 200)
    again = create(server, SERVICE.collection(), {**body, "metadata": {"name": "again"}})
    assert again["spec"]["clusterIP"] == "10.96.0.40"
    assert again["spec"]["ports"][0]["nodePort"] == 30040


def test_namespace_deletion_frees_its_services_addresses(server: ServerThread) -> None:
    ok(call(server, "POST", "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed"}}), 201)
    body = service("web", clusterIP="10.96.0.50")
    create(server, SERVICE.collection("doomed"), body)
    ok(call(server, "DELETE", "/api/v1/namespaces/doomed"), 200)
    wait_for(lambda: call(server, "GET", "/api/v1/namespaces/doomed").status == 404,
             what="namespace doomed removed")
    assert create(server, SERVICE.collection(), body)["spec"]["clusterIP"] == "10.96.0.50"


def test_updates_keep_allocations_and_type_changes_release_node_ports(
        server: ServerThread) -> None:
    created = create(server, SERVICE.collection(),
                     service("web", type="NodePort", ports=[{"name": "http", "port": 80}]))
    allocated = created["spec"]["ports"][0]["nodePort"]
    body = service("web", type="NodePort", ports=[{"name": "http", "port": 80}])
    body["spec"]["selector"] = {"app": "other"}
    # A PUT leaving out what the server allocated keeps it (patchAllocatedValues).
    replaced = ok(call(server, "PUT", SERVICE.item("web"), body), 200)
    assert replaced["spec"]["clusterIPs"] == created["spec"]["clusterIPs"]
    assert replaced["spec"]["ports"][0]["nodePort"] == allocated
    changed = call(server, "PUT", SERVICE.item("web"),
                   {**replaced, "spec": {**replaced["spec"], "clusterIP": "10.96.0.60",
                                         "clusterIPs": ["10.96.0.60"]}})
    assert changed.json == invalid_service("web", "spec.clusterIPs[0]",
                                           '[]string{"10.96.0.60"}', "may not change once set")
    to_cluster_ip = ok(call(server, "PATCH", SERVICE.item("web"),
                            {"spec": {"type": "ClusterIP", "externalTrafficPolicy": None}}), 200)
    assert "nodePort" not in to_cluster_ip["spec"]["ports"][0]
    assert to_cluster_ip["spec"]["clusterIP"] == created["spec"]["clusterIP"]
    reuse = create(server, SERVICE.collection(),
                   service("reuse", type="NodePort", ports=[{"port": 80, "nodePort": allocated}]))
    assert reuse["spec"]["ports"][0]["nodePort"] == allocated


def test_status_writes_leave_the_allocation_alone(server: ServerThread) -> None:
    created = create(server, SERVICE.collection(), service("web"))
    ingress = {"loadBalancer": {"ingress": [{"ip": "192.0.2.7"}]}}
    written = ok(call(server, "PATCH", SERVICE.item("web") + "/status",
                      {"status": ingress, "spec": {"clusterIP": "10.96.0.70"}}), 200)
    assert written["spec"] == created["spec"]
    assert written["status"] == ingress
    # A main-endpoint write of a Service that is no load balancer clears that status
    # (service/strategy.go dropTypeDependentFields); a LoadBalancer keeps it.
    patched = ok(call(server, "PATCH", SERVICE.item("web"),
                      {"spec": {"selector": {"app": "other"}}}), 200)
    assert patched["status"] == {"loadBalancer": {}}
    create(server, SERVICE.collection(), service("lb", type="LoadBalancer"))
    ok(call(server, "PATCH", SERVICE.item("lb") + "/status", {"status": ingress}), 200)
    kept = ok(call(server, "PATCH", SERVICE.item("lb"), {"spec": {"selector": {"app": "b"}}}),
              200)
    assert kept["status"] == {"loadBalancer": {"ingress": [{"ip": "192.0.2.7",
                                                            "ipMode": "VIP"}]}}


def test_a_restart_rebuilds_the_allocations_from_the_store(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server()
    first = create(server, SERVICE.collection(),
                   service("web", type="NodePort", ports=[{"port": 80}]))
    server.restart()
    ip, port = first["spec"]["clusterIP"], first["spec"]["ports"][0]["nodePort"]
    taken_ip = call(server, "POST", SERVICE.collection(), service("ip", clusterIP=ip))
    assert taken_ip.status == 422, taken_ip.body
    taken_port = call(server, "POST", SERVICE.collection(),
                      service("port", type="NodePort", ports=[{"port": 80, "nodePort": port}]))
    assert taken_port.status == 422, taken_port.body
    ok(call(server, "DELETE", SERVICE.item("web")), 200)
    assert create(server, SERVICE.collection(), service("ip", clusterIP=ip))["spec"][
        "clusterIP"] == ip


def test_the_service_range_is_configurable(make_server: Callable[..., ServerThread]) -> None:
    server = make_server(service_cluster_ip_range="192.168.50.0/28")
    addresses = {create(server, SERVICE.collection(), service(f"s{i}"))["spec"]["clusterIP"]
                 for i in range(13)}  # 16 addresses: network, broadcast, .1 are never given
    assert addresses == {f"192.168.50.{i}" for i in range(2, 15)}
    full = call(server, "POST", SERVICE.collection(), service("s13"))
    # kube's allocator answers a full range as its own failure, not the client's (alloc.go).
    text = "failed to allocate a serviceIP: range is full"
    assert full.json == status(500, "InternalError", f"Internal error occurred: {text}",
                               {"causes": [{"message": text}]})


# --- §1.11 graceful pods use the defaulted grace period ----------------------------------------

def test_scheduled_pod_deletion_waits_its_defaulted_grace(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server(pod_grace_cap_s=0.2)
    body = POD.obj("bound")
    body["spec"]["nodeName"] = "node-1"
    body["spec"]["terminationGracePeriodSeconds"] = 7
    create(server, POD.collection(), body)
    create(server, POD.collection(), POD.obj("unbound"))
    since = get(server, POD.collection())["metadata"]["resourceVersion"]
    with watch(server, POD.collection(), resourceVersion=since) as events:
        marked = ok(call(server, "DELETE", POD.item("bound")), 200)
        assert marked["metadata"]["deletionGracePeriodSeconds"] == 7
        gone = ok(call(server, "DELETE", POD.item("unbound")), 200)
        assert gone["metadata"]["deletionGracePeriodSeconds"] == 0
        seen = [(e["type"], e["object"]["metadata"]["name"]) for e in events.events(4)]
    assert seen[0] == ("MODIFIED", "bound")
    assert sorted(seen[1:]) == [("DELETED", "bound"), ("DELETED", "unbound"),
                                ("MODIFIED", "unbound")]
