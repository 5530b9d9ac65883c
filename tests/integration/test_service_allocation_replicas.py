"""Service ClusterIPs and NodePorts stay unique across replicas on one etcd (issue 18).

Two ``kubewire.Server``s with ``storage="etcd"`` on one etcd (each on its own thread and loop),
or two ``kubewire serve`` processes, are replicas of one API. Each keeps kube's range objects
(``/registry/ranges/serviceips``, ``/registry/ranges/servicenodeports``: ``v1 RangeAllocation``
bitmaps) with compare-and-swap writes, so Services created concurrently on both get distinct
addresses, the bitmaps in etcd match the Services, deletes free addresses for either replica,
and a restart rebuilds from the stored ranges, its repair adding back a lost entry and freeing
a leaked one.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kubewire import Server
from kubewire.server.allocation.ranges import decode_bitmap, encode_bitmap
from tests.api_only import API_ONLY
from tests.etcd_cluster import ETCD, Cluster, etcd_cluster, free_port

pytestmark = pytest.mark.skipif(ETCD is None, reason="no etcd binary")

IPS_KEY = "/registry/ranges/serviceips"
PORTS_KEY = "/registry/ranges/servicenodeports"
IP_BASE = int(ipaddress.ip_address("10.96.0.1"))  # offset 0 of the IP bitmap (default range)
PORT_BASE = 30000
# small ranges, nearly filled: replicas that did not share their allocations would collide
SMALL_CIDR, SMALL_FIRST, SMALL_PORTS = "10.0.0.0/26", "10.0.0.1", (30000, 30039)
SERVICES = "/api/v1/namespaces/default/services"


@pytest.fixture(scope="module")
def etcd() -> Iterator[Cluster]:
    with etcd_cluster(1) as cluster:
        yield cluster


def replica(cluster: Cluster, prefix: str, **config: Any) -> Server:
    return Server(storage="etcd", etcd_servers=cluster.endpoints, etcd_prefix=prefix,
                  service_repair_interval_s=0, **config)


def etcd_get(cluster: Cluster, key: str) -> dict[str, Any] | None:
    body = {"key": base64.b64encode(key.encode()).decode()}
    reply = httpx.post(f"{cluster.endpoints[0]}/v3/kv/range", json=body).json()
    kvs = reply.get("kvs") or []
    return json.loads(base64.b64decode(kvs[0]["value"])) if kvs else None


def etcd_put(cluster: Cluster, key: str, value: dict[str, Any]) -> None:
    raw = json.dumps(value, separators=(",", ":")).encode() + b"\n"
    body = {"key": base64.b64encode(key.encode()).decode(),
            "value": base64.b64encode(raw).decode()}
    httpx.post(f"{cluster.endpoints[0]}/v3/kv/put", json=body).raise_for_status()


def stored_ips(cluster: Cluster, prefix: str, first: str = "10.96.0.1") -> set[str]:
    obj = etcd_get(cluster, prefix + IPS_KEY[len("/registry"):])
    assert obj is not None
    base = int(ipaddress.ip_address(first))
    return {str(ipaddress.ip_address(base + o))
            for o in decode_bitmap(base64.b64decode(obj["data"]))}


def stored_ports(cluster: Cluster, prefix: str) -> set[int]:
    obj = etcd_get(cluster, prefix + PORTS_KEY[len("/registry"):])
    assert obj is not None
    return {PORT_BASE + o for o in decode_bitmap(base64.b64decode(obj["data"]))}


def service(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"ports": [{"port": 80}], **spec}}


def services(url: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = httpx.get(url + "/api/v1/services").json()["items"]
    return items


async def create_many(urls: list[str], count: int) -> list[httpx.Response]:
    async with httpx.AsyncClient(timeout=60) as client:
        return await asyncio.gather(*(
            client.post(urls[i % len(urls)] + SERVICES,
                        json=service(f"s{i}", type="NodePort" if i % 2 else "ClusterIP"))
            for i in range(count)))


def test_replicas_allocate_unique_addresses_kept_in_kubes_bitmaps(etcd: Cluster) -> None:
    prefix = "/registry"
    small = {"service_cluster_ip_range": SMALL_CIDR, "service_node_port_range": SMALL_PORTS}
    with replica(etcd, prefix, **small) as a, replica(etcd, prefix, **small) as b:
        # 60 of the 61 free addresses, 30 of the 40 ports, half on each replica, all at once
        answers = asyncio.run(create_many([a.url, b.url], 60))
        assert [r.status_code for r in answers] == [201] * 60
        created = [r.json()["spec"] for r in answers]
        ips = [spec["clusterIP"] for spec in created]
        ports = [p["nodePort"] for spec in created for p in spec["ports"] if "nodePort" in p]
        assert len(set(ips)) == 60 and len(ports) == 30 and len(set(ports)) == 30
        assert SMALL_FIRST not in ips
        last = httpx.post(b.url + SERVICES, json=service("last"))
        assert last.status_code == 201
        full = httpx.post(a.url + SERVICES, json=service("full"))
        assert full.status_code == 500
        assert full.json()["message"] == ("Internal error occurred: failed to allocate a "
                                          "serviceIP: range is full")
        assert httpx.delete(f"{b.url}{SERVICES}/last").status_code == 200

        # the ranges in etcd are kube's RangeAllocation objects, matching the Services
        obj = etcd_get(etcd, IPS_KEY)
        assert obj is not None
        assert list(obj)[:3] == ["kind", "apiVersion", "metadata"]
        assert (obj["kind"], obj["apiVersion"], obj["range"]) == (
            "RangeAllocation", "v1", SMALL_CIDR)
        ports_obj = etcd_get(etcd, PORTS_KEY)
        assert ports_obj is not None and ports_obj["range"] == "30000-30039"
        every = services(a.url)
        assert stored_ips(etcd, prefix, SMALL_FIRST) == {s["spec"]["clusterIP"] for s in every}
        assert stored_ports(etcd, prefix) == set(ports)

        # deleting on one replica frees the addresses for the other
        freed = [s for s in created if s["type"] == "NodePort"][:5]
        for i in range(1, 10, 2):
            assert httpx.delete(f"{a.url}{SERVICES}/s{i}").status_code == 200
        gone = {s["clusterIP"] for s in freed}
        gone_ports = {s["ports"][0]["nodePort"] for s in freed}
        assert not gone & stored_ips(etcd, prefix, SMALL_FIRST)
        assert not gone_ports & stored_ports(etcd, prefix)
        for i, spec in enumerate(freed):
            body = service(f"again{i}", type="NodePort", clusterIP=spec["clusterIP"],
                           ports=[{"port": 80, "nodePort": spec["ports"][0]["nodePort"]}])
            reply = httpx.post(b.url + SERVICES, json=body)
            assert reply.status_code == 201, reply.text
        # ... and what one replica holds the other refuses, with kube's message
        taken = httpx.post(a.url + SERVICES, json=service("dup", clusterIP=ips[0]))
        assert taken.status_code == 422
        assert f"failed to allocate IP {ips[0]}: provided IP is already allocated" in (
            taken.json()["message"])
        every = services(b.url)
        assert stored_ips(etcd, prefix, SMALL_FIRST) == {s["spec"]["clusterIP"] for s in every}
        assert stored_ports(etcd, prefix) == {p["nodePort"] for s in every
                                              for p in s["spec"]["ports"] if "nodePort" in p}


def test_a_restart_rebuilds_from_the_stored_ranges_and_repairs_them(etcd: Cluster) -> None:
    prefix = "/restart"
    with replica(etcd, prefix) as a:
        held = httpx.post(a.url + SERVICES, json=service("held", type="NodePort")).json()
    held_ip = held["spec"]["clusterIP"]
    held_port = held["spec"]["ports"][0]["nodePort"]
    leaked_ip, leaked_port = "10.96.7.7", 31999
    # the stored bitmaps lose the Service's entries and gain a leaked IP and port
    for key, values, base in ((IPS_KEY, {"10.96.0.1", leaked_ip}, IP_BASE),
                              (PORTS_KEY, {leaked_port}, PORT_BASE)):
        obj = etcd_get(etcd, prefix + key[len("/registry"):])
        assert obj is not None
        offsets = [(int(ipaddress.ip_address(v)) if isinstance(v, str) else v) - base
                   for v in values]
        obj["data"] = base64.b64encode(encode_bitmap(offsets)).decode()
        etcd_put(etcd, prefix + key[len("/registry"):], obj)

    with replica(etcd, prefix) as b:
        # the start's repair put the lost entries back; the leaks are kept for now
        assert stored_ips(etcd, prefix) == {"10.96.0.1", held_ip, leaked_ip}
        assert stored_ports(etcd, prefix) == {held_port, leaked_port}
        refused = httpx.post(b.url + SERVICES, json=service("copy", clusterIP=held_ip))
        assert refused.status_code == 422
        leaked = httpx.post(b.url + SERVICES, json=service("leak", clusterIP=leaked_ip))
        assert leaked.status_code == 422  # a leak is kept for kube's three repair runs
        assert b.server is not None and b._loop is not None
        allocations = b.server.ctx.allocations
        for _ in range(2):
            asyncio.run_coroutine_threadsafe(allocations.repair(), b._loop).result(30)
        assert stored_ips(etcd, prefix) == {"10.96.0.1", held_ip}
        assert stored_ports(etcd, prefix) == {held_port}
        body = service("leak", type="NodePort", clusterIP=leaked_ip,
                       ports=[{"port": 80, "nodePort": leaked_port}])
        assert httpx.post(b.url + SERVICES, json=body).status_code == 201


def test_updates_and_failed_creates_keep_the_stored_ranges_exact(etcd: Cluster) -> None:
    prefix = "/updates"
    with replica(etcd, prefix) as a, replica(etcd, prefix) as b:
        made = httpx.post(a.url + SERVICES, json=service("web", type="NodePort")).json()
        port = made["spec"]["ports"][0]["nodePort"]
        assert port in stored_ports(etcd, prefix)
        # a type change on the other replica gives the node port back ...
        patch = {"spec": {"type": "ClusterIP"}}
        reply = httpx.patch(f"{b.url}{SERVICES}/web", json=patch,
                            headers={"content-type": "application/merge-patch+json"})
        assert reply.status_code == 200 and "nodePort" not in reply.json()["spec"]["ports"][0]
        assert port not in stored_ports(etcd, prefix)
        # ... and changing it back takes one again, in the bitmap
        patch = {"spec": {"type": "NodePort"}}
        reply = httpx.patch(f"{a.url}{SERVICES}/web", json=patch,
                            headers={"content-type": "application/merge-patch+json"})
        again = reply.json()["spec"]["ports"][0]["nodePort"]
        assert stored_ports(etcd, prefix) == {again}
        # a create that fails (the name is taken) keeps nothing it reserved
        body = service("web", type="NodePort", clusterIP="10.96.5.5",
                       ports=[{"port": 80, "nodePort": 31234}])
        assert httpx.post(b.url + SERVICES, json=body).status_code == 409
        assert "10.96.5.5" not in stored_ips(etcd, prefix)
        assert stored_ports(etcd, prefix) == {again}
        # a dry run reserves nothing either
        dry = httpx.post(b.url + SERVICES + "?dryRun=All", json=service("dry", type="NodePort"))
        assert dry.status_code == 201
        assert stored_ports(etcd, prefix) == {again}
        assert stored_ips(etcd, prefix) == {"10.96.0.1", made["spec"]["clusterIP"]}


def test_a_deleted_range_is_made_again_by_the_next_allocation(etcd: Cluster) -> None:
    prefix = "/deleted"
    with replica(etcd, prefix) as a:
        first = httpx.post(a.url + SERVICES, json=service("one")).json()["spec"]["clusterIP"]
        key = base64.b64encode(f"{prefix}/ranges/serviceips".encode()).decode()
        httpx.post(f"{etcd.endpoints[0]}/v3/kv/deleterange", json={"key": key})
        assert etcd_get(etcd, f"{prefix}/ranges/serviceips") is None
        second = httpx.post(a.url + SERVICES, json=service("two")).json()["spec"]["clusterIP"]
        assert stored_ips(etcd, prefix) == {"10.96.0.1", first, second}


@pytest.mark.parametrize("workers", [1, 2], ids=["two-processes", "workers-2"])
def test_serve_processes_hand_out_unique_addresses(etcd: Cluster, tmp_path: Path,
                                                   workers: int) -> None:
    """Two ``kubewire serve`` processes, or one with ``--workers 2`` (its worker processes
    share the port), on one etcd."""
    prefix, processes, urls = f"/processes{workers}", [], []
    try:
        for i in range(3 - workers):
            port = free_port()
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "kubewire.cli", "serve", *API_ONLY,
                 "--data-dir", str(tmp_path / str(i)), "--port", str(port),
                 "--insecure-http", "--log-level", "WARNING", "--workers", str(workers),
                 "--storage-backend", "etcd3", "--etcd-servers", etcd.endpoints[0],
                 "--etcd-prefix", prefix, "--service-cluster-ip-range", "10.0.0.0/25"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            urls.append(f"http://127.0.0.1:{port}")
        deadline = time.monotonic() + 30
        for url in urls:
            while True:
                try:
                    if httpx.get(url + "/readyz").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "kubewire serve did not become ready"
                time.sleep(0.1)
        # 100 of the 125 free addresses, all at once (on many connections)
        answers = asyncio.run(create_many(urls, 100))
        assert [r.status_code for r in answers] == [201] * 100
        created = [r.json()["spec"] for r in answers]
        ips = {spec["clusterIP"] for spec in created}
        ports = {p["nodePort"] for spec in created for p in spec["ports"] if "nodePort" in p}
        assert len(ips) == 100 and len(ports) == 50
        assert stored_ips(etcd, prefix, "10.0.0.1") == ips | {"10.0.0.1"}
        assert stored_ports(etcd, prefix) == ports
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
