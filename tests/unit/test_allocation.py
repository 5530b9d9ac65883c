"""server/allocation.py: Service cluster IP and node port allocation with kube's messages."""

from __future__ import annotations

import copy
import ipaddress
import random
from typing import Any

import pytest

from kubewire.server.allocation.rules import ServiceAllocator
from kubewire.status import InternalError, Invalid


def svc(name: str = "web", **spec: Any) -> dict[str, Any]:
    spec.setdefault("selector", {"app": name})
    spec.setdefault("ports", [{"port": 80, "protocol": "TCP", "targetPort": 80}])
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def allocator(seed: int = 1, cidr: str = "10.96.0.0/12",
              ports: tuple[int, int] = (30000, 32767)) -> ServiceAllocator:
    return ServiceAllocator(cidr, ports, random.Random(seed))


def invalid_message(exc: pytest.ExceptionInfo[Invalid]) -> str:
    assert exc.value.code == 422
    return exc.value.message


# --- cluster IPs ---------------------------------------------------------------------------------

def test_allocates_a_cluster_ip_with_single_stack_fields() -> None:
    spec = allocator().allocate_on_create(svc())["spec"]
    ip = ipaddress.ip_address(spec["clusterIP"])
    assert ip in ipaddress.ip_network("10.96.0.0/12")
    assert spec["clusterIPs"] == [spec["clusterIP"]]
    assert spec["ipFamilies"] == ["IPv4"]
    assert spec["ipFamilyPolicy"] == "SingleStack"
    # dynamic picks come from the upper band; the first 256 addresses wait for static requests
    assert int(ip) - int(ipaddress.ip_address("10.96.0.1")) >= 256


def test_allocation_is_deterministic_given_the_rng() -> None:
    first, second = allocator(seed=7), allocator(seed=7)
    a = [first.allocate_on_create(svc(f"s{i}"))["spec"]["clusterIP"] for i in range(5)]
    b = [second.allocate_on_create(svc(f"s{i}"))["spec"]["clusterIP"] for i in range(5)]
    assert a == b
    assert len(set(a)) == 5


def test_input_is_not_modified() -> None:
    body = svc()
    original = copy.deepcopy(body)
    allocator().allocate_on_create(body)
    assert body == original


def test_requested_cluster_ip_is_honoured_and_reserved() -> None:
    alloc = allocator()
    spec = alloc.allocate_on_create(svc(clusterIP="10.96.0.10"))["spec"]
    assert spec["clusterIP"] == "10.96.0.10"
    assert spec["clusterIPs"] == ["10.96.0.10"]
    assert alloc.is_ip_allocated("10.96.0.10")
    with pytest.raises(Invalid) as exc:
        alloc.allocate_on_create(svc("dns", clusterIP="10.96.0.10"))
    assert invalid_message(exc) == (
        'Service "dns" is invalid: spec.clusterIPs: Invalid value: []string{"10.96.0.10"}: '
        "failed to allocate IP 10.96.0.10: provided IP is already allocated")
    assert exc.value.details == {"name": "dns", "kind": "Service", "causes": [{
        "reason": "FieldValueInvalid", "field": "spec.clusterIPs",
        "message": 'Invalid value: []string{"10.96.0.10"}: failed to allocate IP 10.96.0.10: '
                   "provided IP is already allocated"}]}


@pytest.mark.parametrize("ip", ["10.0.0.5", "10.96.0.0", "10.111.255.255"])
def test_requested_cluster_ip_out_of_range(ip: str) -> None:
    with pytest.raises(Invalid) as exc:
        allocator().allocate_on_create(svc(clusterIP=ip))
    assert invalid_message(exc) == (
        f'Service "web" is invalid: spec.clusterIPs: Invalid value: []string{{"{ip}"}}: '
        f"failed to allocate IP {ip}: the provided IP ({ip}) is not in the valid range. "
        "The range of valid IPs is 10.96.0.0/12")


def test_first_address_is_reserved_for_the_kubernetes_service() -> None:
    alloc = allocator()
    assert alloc.first_ip == "10.96.0.1"
    with pytest.raises(Invalid, match="provided IP is already allocated"):
        alloc.allocate_on_create(svc(clusterIP="10.96.0.1"))
    alloc.release(svc(clusterIP="10.96.0.1", clusterIPs=["10.96.0.1"]))
    assert alloc.is_ip_allocated("10.96.0.1")


def test_cluster_ip_range_exhaustion() -> None:
    alloc = allocator(cidr="10.0.0.0/29")  # 6 usable, the first reserved
    ips = {alloc.allocate_on_create(svc(f"s{i}"))["spec"]["clusterIP"] for i in range(5)}
    assert ips == {"10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"}
    with pytest.raises(InternalError) as exc:
        alloc.allocate_on_create(svc("full"))
    assert exc.value.code == 500
    assert exc.value.message == "Internal error occurred: failed to allocate a serviceIP: " \
                                "range is full"


def test_headless_services() -> None:
    alloc = allocator()
    with_selector = alloc.allocate_on_create(svc(clusterIP="None"))["spec"]
    assert with_selector["clusterIPs"] == ["None"]
    assert with_selector["ipFamilies"] == ["IPv4"]
    assert with_selector["ipFamilyPolicy"] == "SingleStack"
    selectorless = svc("raw", clusterIP="None")
    del selectorless["spec"]["selector"]
    spec = alloc.allocate_on_create(selectorless)["spec"]
    assert spec["clusterIP"] == "None"
    assert spec["ipFamilyPolicy"] == "RequireDualStack"  # kube's special case
    assert spec["ipFamilies"] == ["IPv4", "IPv6"]


def test_external_name_gets_nothing() -> None:
    alloc = allocator()
    body = svc(type="ExternalName", externalName="db.example.com")
    spec = alloc.allocate_on_create(body)["spec"]
    assert spec == body["spec"]


def test_require_dual_stack_on_a_single_stack_cluster() -> None:
    with pytest.raises(Invalid) as exc:
        allocator().allocate_on_create(svc(ipFamilyPolicy="RequireDualStack"))
    assert invalid_message(exc) == (
        'Service "web" is invalid: spec.ipFamilyPolicy: Invalid value: "RequireDualStack": '
        "this cluster is not configured for dual-stack services")
    prefer = allocator().allocate_on_create(svc(ipFamilyPolicy="PreferDualStack"))["spec"]
    assert prefer["ipFamilies"] == ["IPv4"]


def test_unconfigured_family_and_bad_ip() -> None:
    with pytest.raises(Invalid) as exc:
        allocator().allocate_on_create(svc(ipFamilies=["IPv6"]))
    assert invalid_message(exc).endswith(
        'spec.ipFamilies[0]: Invalid value: "IPv6": not configured on this cluster')
    with pytest.raises(Invalid) as exc:
        allocator().allocate_on_create(svc(clusterIP="fd00::10"))
    assert invalid_message(exc).endswith(
        'spec.clusterIPs[0]: Invalid value: []string{"fd00::10"}: '
        "IPv6 is not configured on this cluster")
    with pytest.raises(Invalid) as exc:
        allocator().allocate_on_create(svc(clusterIP="10.96.0.300"))
    assert invalid_message(exc).endswith(
        'spec.clusterIPs[0]: Invalid value: "10.96.0.300": must be a valid IP address, '
        "(e.g. 10.9.8.7 or 2001:db8::ffff)")
    with pytest.raises(Invalid) as exc:
        allocator().allocate_on_create(svc(clusterIP="10.96.0.9", clusterIPs=["10.96.0.8"]))
    assert invalid_message(exc).endswith(
        'spec.clusterIPs: Invalid value: []string{"10.96.0.8"}: '
        "first value must match `clusterIP`")


def test_ipv6_cluster() -> None:
    alloc = ServiceAllocator("fd00:10:96::/112", (30000, 32767), random.Random(3))
    spec = alloc.allocate_on_create(svc())["spec"]
    assert spec["ipFamilies"] == ["IPv6"]
    assert ipaddress.ip_address(spec["clusterIP"]) in ipaddress.ip_network("fd00:10:96::/112")


# --- node ports ----------------------------------------------------------------------------------

def test_node_ports_are_allocated_in_range() -> None:
    alloc = allocator()
    spec = alloc.allocate_on_create(svc(type="NodePort", ports=[
        {"name": "http", "port": 80, "protocol": "TCP"},
        {"name": "https", "port": 443, "protocol": "TCP"}]))["spec"]
    node_ports = [p["nodePort"] for p in spec["ports"]]
    assert len(set(node_ports)) == 2
    assert all(30000 + 86 <= n <= 32767 for n in node_ports)  # dynamic: upper band first
    assert all(alloc.is_port_allocated(n) for n in node_ports)


def test_node_port_allocation_is_deterministic() -> None:
    body = svc(type="NodePort")
    first = allocator(seed=5).allocate_on_create(body)["spec"]["ports"][0]["nodePort"]
    second = allocator(seed=5).allocate_on_create(body)["spec"]["ports"][0]["nodePort"]
    assert first == second


def test_requested_node_port_conflicts() -> None:
    alloc = allocator()
    ports = [{"port": 80, "protocol": "TCP", "nodePort": 30080}]
    spec = alloc.allocate_on_create(svc(type="NodePort", ports=ports))["spec"]
    assert spec["ports"][0]["nodePort"] == 30080
    with pytest.raises(Invalid) as exc:
        alloc.allocate_on_create(svc("other", type="NodePort", ports=ports))
    assert invalid_message(exc) == (
        'Service "other" is invalid: spec.ports[0].nodePort: Invalid value: 30080: '
        "provided port is already allocated")
    with pytest.raises(Invalid) as exc:
        alloc.allocate_on_create(svc("low", type="NodePort", ports=[
            {"port": 80, "protocol": "TCP"}, {"port": 81, "protocol": "TCP", "nodePort": 8080}]))
    assert invalid_message(exc) == (
        'Service "low" is invalid: spec.ports[1].nodePort: Invalid value: 8080: '
        "provided port is not in the valid range. The range of valid ports is 30000-32767")


def test_failed_create_keeps_nothing() -> None:
    alloc = allocator()
    alloc.allocate_on_create(svc(type="NodePort", ports=[
        {"port": 80, "protocol": "TCP", "nodePort": 30080}]))
    with pytest.raises(Invalid):
        alloc.allocate_on_create(svc("b", type="NodePort", clusterIP="10.96.0.20", ports=[
            {"port": 81, "protocol": "TCP"}, {"port": 80, "protocol": "TCP", "nodePort": 30080}]))
    assert not alloc.is_ip_allocated("10.96.0.20")
    assert alloc.allocate_on_create(svc("c", clusterIP="10.96.0.20"))["spec"]["clusterIP"]


def test_ports_sharing_a_number_share_a_node_port() -> None:
    spec = allocator().allocate_on_create(svc("dns", type="NodePort", ports=[
        {"name": "dns", "port": 53, "protocol": "UDP"},
        {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]))["spec"]
    assert spec["ports"][0]["nodePort"] == spec["ports"][1]["nodePort"]


def test_load_balancer_node_ports() -> None:
    alloc = allocator()
    spec = alloc.allocate_on_create(svc(type="LoadBalancer"))["spec"]
    assert spec["ports"][0]["nodePort"]
    without = alloc.allocate_on_create(svc("lb2", type="LoadBalancer",
                                           allocateLoadBalancerNodePorts=False))["spec"]
    assert "nodePort" not in without["ports"][0]
    requested = alloc.allocate_on_create(svc("lb3", type="LoadBalancer",
                                             allocateLoadBalancerNodePorts=False, ports=[
                                                 {"port": 80, "protocol": "TCP",
                                                  "nodePort": 31000},
                                                 {"port": 81, "protocol": "TCP"}]))["spec"]
    assert [p.get("nodePort") for p in requested["ports"]] == [31000, None]


def test_node_port_exhaustion() -> None:
    alloc = allocator(ports=(30000, 30002))
    for i in range(3):
        alloc.allocate_on_create(svc(f"s{i}", type="NodePort"))
    with pytest.raises(InternalError) as exc:
        alloc.allocate_on_create(svc("full", type="NodePort"))
    assert exc.value.message == "Internal error occurred: failed to allocate a nodePort: " \
                                "range is full"


def test_dry_run_keeps_nothing() -> None:
    alloc = allocator()
    spec = alloc.allocate_on_create(svc(type="NodePort"), dry_run=True)["spec"]
    assert not alloc.is_ip_allocated(spec["clusterIP"])
    assert not alloc.is_port_allocated(spec["ports"][0]["nodePort"])


# --- update and release --------------------------------------------------------------------------

def test_update_keeps_allocated_values_the_body_left_out() -> None:
    alloc = allocator()
    old = alloc.allocate_on_create(svc(type="NodePort", ports=[
        {"name": "http", "port": 80, "protocol": "TCP"}]))
    body = svc(type="NodePort", ports=[{"name": "http", "port": 80, "protocol": "TCP"},
                                       {"name": "metrics", "port": 9090, "protocol": "TCP"}])
    new = alloc.reconcile_on_update(old, body)
    assert new["spec"]["clusterIP"] == old["spec"]["clusterIP"]
    assert new["spec"]["clusterIPs"] == old["spec"]["clusterIPs"]
    assert new["spec"]["ports"][0]["nodePort"] == old["spec"]["ports"][0]["nodePort"]
    added = new["spec"]["ports"][1]["nodePort"]
    assert alloc.is_port_allocated(added)
    assert alloc.reconcile_on_update(new, new) == new  # a no-op update stays a no-op


def test_cluster_ip_may_not_change() -> None:
    alloc = allocator()
    old = alloc.allocate_on_create(svc(clusterIP="10.96.0.10"))
    with pytest.raises(Invalid) as exc:
        alloc.reconcile_on_update(old, svc(clusterIP="10.96.0.11"))
    assert invalid_message(exc) == (
        'Service "web" is invalid: spec.clusterIPs[0]: Invalid value: []string{"10.96.0.11"}: '
        "may not change once set")
    assert not alloc.is_ip_allocated("10.96.0.11")


def test_switching_to_cluster_ip_releases_node_ports_after_commit() -> None:
    alloc = allocator()
    old = alloc.allocate_on_create(svc(type="NodePort"))
    port = old["spec"]["ports"][0]["nodePort"]
    body = copy.deepcopy(old)
    body["spec"]["type"] = "ClusterIP"
    new = alloc.reconcile_on_update(old, body)
    assert "nodePort" not in new["spec"]["ports"][0]
    assert "externalTrafficPolicy" not in new["spec"]
    assert alloc.is_port_allocated(port)  # deferred until the write commits
    alloc.release(old, keep=new)
    assert not alloc.is_port_allocated(port)
    assert alloc.is_ip_allocated(new["spec"]["clusterIP"])


def test_switching_to_node_port_allocates() -> None:
    alloc = allocator()
    old = alloc.allocate_on_create(svc())
    new = alloc.reconcile_on_update(old, svc(type="NodePort"))
    assert alloc.is_port_allocated(new["spec"]["ports"][0]["nodePort"])
    assert new["spec"]["clusterIP"] == old["spec"]["clusterIP"]


def test_failed_update_is_reverted_with_release_keep_old() -> None:
    alloc = allocator()
    old = alloc.allocate_on_create(svc())
    new = alloc.reconcile_on_update(old, svc(type="NodePort"))
    alloc.release(new, keep=old)  # the store refused the write
    assert not alloc.is_port_allocated(new["spec"]["ports"][0]["nodePort"])
    assert alloc.is_ip_allocated(old["spec"]["clusterIP"])


def test_external_name_transitions() -> None:
    alloc = allocator()
    old = alloc.allocate_on_create(svc())
    ip = old["spec"]["clusterIP"]
    body = copy.deepcopy(old)
    body["spec"].update(type="ExternalName", externalName="db.example.com")
    external = alloc.reconcile_on_update(old, body)
    assert {"clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"}.isdisjoint(
        external["spec"])
    alloc.release(old, keep=external)
    assert not alloc.is_ip_allocated(ip)
    back = alloc.reconcile_on_update(external, svc())
    assert alloc.is_ip_allocated(back["spec"]["clusterIP"])
    assert back["spec"]["ipFamilies"] == ["IPv4"]


def test_release_on_delete() -> None:
    alloc = allocator()
    stored = alloc.allocate_on_create(svc(type="LoadBalancer"))
    alloc.release(stored)
    assert not alloc.is_ip_allocated(stored["spec"]["clusterIP"])
    assert not alloc.is_port_allocated(stored["spec"]["ports"][0]["nodePort"])
    again = alloc.allocate_on_create(svc("again", clusterIP=stored["spec"]["clusterIP"]))
    assert again["spec"]["clusterIP"] == stored["spec"]["clusterIP"]


def test_rebuild_from_stored_services() -> None:
    live = allocator(cidr="10.0.0.0/29", ports=(30000, 30003))
    stored = [live.allocate_on_create(svc(f"s{i}", type="NodePort")) for i in range(3)]
    stored.append(svc("ext", type="ExternalName", externalName="x.example.com"))
    stored.append(live.allocate_on_create(svc("h", clusterIP="None")))
    rebuilt = ServiceAllocator.from_services(stored, "10.0.0.0/29", (30000, 30003),
                                             random.Random(9))
    for body in stored[:3]:
        assert rebuilt.is_ip_allocated(body["spec"]["clusterIP"])
        assert rebuilt.is_port_allocated(body["spec"]["ports"][0]["nodePort"])
    spec = rebuilt.allocate_on_create(svc("new", type="NodePort"))["spec"]
    assert spec["clusterIP"] not in {b["spec"].get("clusterIP") for b in stored}
    assert spec["ports"][0]["nodePort"] not in {
        b["spec"]["ports"][0].get("nodePort") for b in stored if "ports" in b["spec"]}
    with pytest.raises(Invalid, match="provided port is already allocated"):
        rebuilt.allocate_on_create(svc("dup", type="NodePort", ports=[
            {"port": 80, "protocol": "TCP",
             "nodePort": stored[0]["spec"]["ports"][0]["nodePort"]}]))
