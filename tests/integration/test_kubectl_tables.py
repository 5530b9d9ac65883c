"""``kubectl get`` against the real server prints kube's columns from the served Tables
(objects-and-clients.md §5): lists, single objects, several kinds, ``-o wide``, labels,
selectors and ``-w``. Objects are made over raw HTTP first; the printed text is parsed by the
header's column offsets and compared cell by cell, ages checked by pattern.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.integration import kubectl as cli
from tests.integration.harness import ServerThread
from tests.integration.kinds import (
    DEPLOYMENT,
    ENDPOINT_SLICE,
    GATEWAY,
    HTTP_ROUTE,
    INGRESS,
    NAMESPACE,
    NETWORK_POLICY,
    NODE,
    NS,
    POD,
    SERVICE,
)
from tests.integration.wire import call, create, ok, wait_for

AGE = re.compile(r"\d+s|\d+m\d*s?")  # a fresh object's age as kube's HumanDuration prints it
AGE_COLUMNS = frozenset({"AGE", "LAST SEEN"})

KUBECTL_TIMEOUT_S = cli.TIMEOUT_S
pytestmark = cli.needs_kubectl

Row = list[str]


# --- running kubectl and reading its tables -----------------------------------------------------

kubectl = cli.ok  # output of a successful run with nothing on stderr


def parse_table(text: str) -> tuple[Row, list[Row]]:
    """kubectl's aligned output: cells cut at the header's column starts, ages checked
    and replaced by ``<age>`` so rows compare exactly."""
    header_line, *lines = text.rstrip("\n").split("\n")
    starts = [m.start() for m in re.finditer(r"(?:^|(?<=  ))\S", header_line)]
    header = [header_line[a:b].strip() for a, b in zip(starts, [*starts[1:], None],
                                                         strict=True)]
    rows = []
    for line in lines:
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
        for i, name in enumerate(header):
            if name in AGE_COLUMNS:
                assert AGE.fullmatch(cells[i]), (name, cells[i], line)
                cells[i] = "<age>"
        rows.append(cells)
    return header, rows


def get_tables(server: ServerThread, *args: str) -> list[tuple[Row, list[Row]]]:
    """``kubectl get ARGS``; several kinds print one table each, separated by a blank line."""
    return [parse_table(block) for block in kubectl(server, "get", *args).split("\n\n")]


def get_table(server: ServerThread, *args: str) -> tuple[Row, list[Row]]:
    (table,) = get_tables(server, *args)
    return table


# --- objects ------------------------------------------------------------------------------------

def now_text(micro: bool = False) -> str:
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def write_status(server: ServerThread, path: str, status: dict[str, Any]) -> None:
    ok(call(server, "PATCH", f"{path}/status", {"status": status}), 200)


def make_pods(server: ServerThread) -> None:
    """web: scheduled, running, ready, restarted twice; db: just created (Pending)."""
    web = POD.obj("web", {"app": "web", "tier": "front"})
    web["spec"]["nodeName"] = "node-1"
    create(server, POD.collection(), web)
    write_status(server, POD.item("web"), {
        "phase": "Running", "podIP": "10.244.0.5", "podIPs": [{"ip": "10.244.0.5"}],
        "containerStatuses": [{"name": "c", "ready": True, "restartCount": 2, "started": True,
                               "image": "nginx:1.27", "imageID": "",
                               "state": {"running": {"startedAt": now_text()}}}]})
    create(server, POD.collection(), POD.obj("db", {"app": "db"}))


WEB = ["web", "1/1", "Running", "2", "<age>"]
DB = ["db", "0/1", "Pending", "0", "<age>"]
POD_HEADER = ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]


@pytest.fixture
def pods(server: ServerThread) -> ServerThread:
    make_pods(server)
    return server


# --- pods ---------------------------------------------------------------------------------------

def test_get_pods(pods: ServerThread) -> None:
    assert get_table(pods, "pods") == (POD_HEADER, [DB, WEB])


def test_get_pods_all_namespaces(pods: ServerThread) -> None:
    create(pods, NAMESPACE.collection(), NAMESPACE.obj("other"))
    create(pods, POD.collection("other"), POD.obj("far"))
    assert get_table(pods, "pods", "-A") == (
        ["NAMESPACE", *POD_HEADER],
        [[NS, *DB], [NS, *WEB], ["other", "far", "0/1", "Pending", "0", "<age>"]])


def test_get_pods_wide_shows_priority_one_columns(pods: ServerThread) -> None:
    assert get_table(pods, "pods", "-o", "wide") == (
        [*POD_HEADER, "IP", "NODE", "NOMINATED NODE", "READINESS GATES"],
        [[*DB, "<none>", "<none>", "<none>", "<none>"],
         [*WEB, "10.244.0.5", "node-1", "<none>", "<none>"]])


def test_get_pods_show_labels(pods: ServerThread) -> None:
    assert get_table(pods, "pods", "--show-labels") == (
        [*POD_HEADER, "LABELS"], [[*DB, "app=db"], [*WEB, "app=web,tier=front"]])


def test_get_pods_by_label_and_field_selector(pods: ServerThread) -> None:
    assert get_table(pods, "pods", "-l", "app=web") == (POD_HEADER, [WEB])
    assert get_table(pods, "pods", "-l", "tier!=front") == (POD_HEADER, [DB])
    assert get_table(pods, "pods", "--field-selector", "status.phase=Pending") == (
        POD_HEADER, [DB])
    assert get_table(pods, "pods", "--field-selector", "spec.nodeName=node-1") == (
        POD_HEADER, [WEB])


def test_get_pods_label_columns_sorting_and_chunks(pods: ServerThread) -> None:
    """``-L`` reads labels from the rows' objects, ``--sort-by`` asks for whole objects
    (includeObject=Object), ``--chunk-size`` pages the Table with continue tokens."""
    assert get_table(pods, "pods", "-L", "app,tier") == (
        [*POD_HEADER, "APP", "TIER"], [[*DB, "db", ""], [*WEB, "web", "front"]])
    assert get_table(pods, "pods", "--sort-by=.status.phase") == (POD_HEADER, [DB, WEB])
    # web's status was written before db was created (kubectl compares numbers naturally)
    assert get_table(pods, "pods", "--sort-by=.metadata.resourceVersion") == (
        POD_HEADER, [WEB, DB])
    assert get_table(pods, "pods", "--chunk-size=1") == (POD_HEADER, [DB, WEB])


def test_get_one_pod(pods: ServerThread) -> None:
    assert get_table(pods, "pod", "web") == (POD_HEADER, [WEB])
    assert get_table(pods, "pod", "db", "-o", "wide") == (
        [*POD_HEADER, "IP", "NODE", "NOMINATED NODE", "READINESS GATES"],
        [[*DB, "<none>", "<none>", "<none>", "<none>"]])


# --- other kinds --------------------------------------------------------------------------------

def test_get_deployments_and_services(server: ServerThread) -> None:
    create(server, DEPLOYMENT.collection(), DEPLOYMENT.obj("dep"))
    write_status(server, DEPLOYMENT.item("dep"), {
        "replicas": 1, "readyReplicas": 1, "updatedReplicas": 1, "availableReplicas": 1})
    svc = create(server, SERVICE.collection(), SERVICE.obj("svc"))
    edge = SERVICE.obj("edge")
    edge["spec"]["type"] = "NodePort"
    edge = create(server, SERVICE.collection(), edge)
    node_port = edge["spec"]["ports"][0]["nodePort"]
    deployments, services = get_tables(server, "deployments,services")
    assert deployments == (["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
                           [["deployment.apps/dep", "1/1", "1", "1", "<age>"]])
    assert services == (
        ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"],
        [["service/edge", "NodePort", edge["spec"]["clusterIP"], "<none>",
          f"80:{node_port}/TCP", "<age>"],
         # every cluster's own Service
         ["service/kubernetes", "ClusterIP", "10.96.0.1", "<none>", "443/TCP", "<age>"],
         ["service/svc", "ClusterIP", svc["spec"]["clusterIP"], "<none>", "80/TCP", "<age>"]])
    wide = get_table(server, "deployments", "-o", "wide")
    assert wide == (["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES",
                     "SELECTOR"], [["dep", "1/1", "1", "1", "<age>", "c", "nginx:1.27",
                                    "app=web"]])


def test_get_nodes(server: ServerThread) -> None:
    node = NODE.obj("node-1", {"node-role.kubernetes.io/control-plane": ""})
    create(server, NODE.collection(), node)
    write_status(server, NODE.item("node-1"), {
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                        "lastHeartbeatTime": now_text(), "lastTransitionTime": now_text()}],
        "addresses": [{"type": "InternalIP", "address": "192.168.1.10"},
                      {"type": "Hostname", "address": "node-1"}],
        "nodeInfo": {"kubeletVersion": "v1.32.0", "osImage": "Debian GNU/Linux 12",
                     "kernelVersion": "6.1.0", "containerRuntimeVersion": "containerd://1.7.24",
                     "kubeProxyVersion": "", "operatingSystem": "linux",
                     "architecture": "amd64", "machineID": "", "systemUUID": "",
                     "bootID": ""}})
    create(server, NODE.collection(), NODE.obj("node-2"))
    assert get_table(server, "nodes") == (
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
        [["node-1", "Ready", "control-plane", "<age>", "v1.32.0"],
         ["node-2", "Unknown", "<none>", "<age>", ""]])
    header, rows = get_table(server, "node", "node-1", "-o", "wide")
    assert header == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP", "EXTERNAL-IP",
                      "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME"]
    assert rows == [["node-1", "Ready", "control-plane", "<age>", "v1.32.0", "192.168.1.10",
                     "<none>", "Debian GNU/Linux 12", "6.1.0", "containerd://1.7.24"]]


def test_get_namespaces(server: ServerThread) -> None:
    create(server, NAMESPACE.collection(), NAMESPACE.obj("team-a"))
    assert get_table(server, "ns") == (
        ["NAME", "STATUS", "AGE"],
        [[name, "Active", "<age>"] for name in
         ("default", "kube-node-lease", "kube-public", "kube-system", "team-a")])


def test_get_events(server: ServerThread) -> None:
    create(server, "/apis/events.k8s.io/v1/namespaces/default/events", {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "web.1"},
        "eventTime": now_text(micro=True), "type": "Normal", "reason": "Started",
        "action": "Start", "reportingController": "kubelet", "reportingInstance": "node-1",
        "note": "Started container c",
        "regarding": {"kind": "Pod", "namespace": NS, "name": "web", "apiVersion": "v1"}})
    assert get_table(server, "events") == (
        ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        [["<age>", "Normal", "Started", "pod/web", "Started container c"]])


def test_get_networking_and_gateway_kinds(server: ServerThread) -> None:
    ingress = INGRESS.obj("web")
    ingress["spec"] = {"ingressClassName": "nginx", "tls": [{"hosts": ["a.example.com"]}],
                       "rules": [{"host": "a.example.com"}, {"host": "b.example.com"}]}
    create(server, INGRESS.collection(), ingress)
    create(server, NETWORK_POLICY.collection(), NETWORK_POLICY.obj("np"))
    create(server, ENDPOINT_SLICE.collection(), ENDPOINT_SLICE.obj("web-abc"))
    create(server, GATEWAY.collection(), GATEWAY.obj("gw"))
    create(server, HTTP_ROUTE.collection(), HTTP_ROUTE.obj("route"))
    tables = get_tables(server, "ingress,networkpolicy,endpointslices,gateways,httproutes")
    assert tables == [
        (["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"],
         [["ingress.networking.k8s.io/web", "nginx", "a.example.com,b.example.com", "",
           "80, 443", "<age>"]]),
        (["NAME", "POD-SELECTOR", "AGE"],
         [["networkpolicy.networking.k8s.io/np", "app=web", "<age>"]]),
        (["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"],
         # the kubernetes Service's slice: this server's port and address
         [["endpointslice.discovery.k8s.io/kubernetes", "IPv4", str(server.port), "127.0.0.1",
           "<age>"],
          ["endpointslice.discovery.k8s.io/web-abc", "IPv4", "80", "10.0.0.1", "<age>"]]),
        (["NAME", "CLASS", "ADDRESS", "PROGRAMMED", "AGE"],
         # the CRD's status default: Accepted and Programmed conditions, both Unknown
         [["gateway.gateway.networking.k8s.io/gw", "example", "", "Unknown", "<age>"]]),
        (["NAME", "HOSTNAMES", "AGE"],
         [["httproute.gateway.networking.k8s.io/route", '["a.example.com"]', "<age>"]]),
    ]


# --- watch --------------------------------------------------------------------------------------

class Background:
    """A kubectl process whose stdout lines are collected on a thread until it is stopped."""

    def __init__(self, server: ServerThread, *args: str) -> None:
        self.proc = cli.background(server, *args)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for_line(self, pattern: str) -> None:
        regex = re.compile(pattern)
        wait_for(lambda: any(regex.fullmatch(line) for line in self.lines),
                 timeout=KUBECTL_TIMEOUT_S, what=f"kubectl to print {pattern!r}: {self.lines}")

    def stop(self) -> str:
        """Stop kubectl; its stderr (it must not have failed before being stopped)."""
        if self.proc.poll() is None:
            self.proc.terminate()
        _, err = self.proc.communicate(timeout=KUBECTL_TIMEOUT_S)
        self._reader.join(KUBECTL_TIMEOUT_S)
        return err


@pytest.fixture
def background(pods: ServerThread) -> Iterator[list[Background]]:
    started: list[Background] = []
    yield started
    for process in started:
        process.stop()


def wait_for_watcher(server: ServerThread) -> None:
    def watching() -> bool:
        assert server.server is not None
        caches = server.server.ctx.caches
        return bool(server.call(caches.watcher_count))

    wait_for(watching, timeout=KUBECTL_TIMEOUT_S, what="kubectl's watch")


def watch_rows(lines: list[str]) -> list[Row]:
    """Watch output is flushed line by line, so widths vary: split on runs of spaces."""
    rows = [re.split(r"\s{2,}", line.strip()) for line in lines]
    for row in rows[1:]:
        age = row[-1]
        assert AGE.fullmatch(age), row
        row[-1] = "<age>"
    return rows


def change_and_delete_new_pod(server: ServerThread, process: Background) -> None:
    create(server, POD.collection(), POD.obj("new"))
    process.wait_for_line(r"ADDED\s+new\s.*")
    ok(call(server, "PATCH", POD.item("new"), {"metadata": {"labels": {"seen": "yes"}}}), 200)
    process.wait_for_line(r"MODIFIED\s+new\s.*Pending.*")
    ok(call(server, "DELETE", POD.item("new"), params={"gracePeriodSeconds": 0}), 200)
    process.wait_for_line(r"DELETED\s+new\s.*")


def test_get_pods_watch_with_events(pods: ServerThread, background: list[Background]) -> None:
    process = Background(pods, "get", "pods", "-w", "--output-watch-events")
    background.append(process)
    process.wait_for_line(r"ADDED\s+web\s.*")
    change_and_delete_new_pod(pods, process)
    assert process.stop() == ""
    new = ["new", "0/1", "Pending", "0", "<age>"]
    gone = ["new", "0/1", "Terminating", "0", "<age>"]
    assert watch_rows(process.lines) == [
        ["EVENT", *POD_HEADER], ["ADDED", *DB], ["ADDED", *WEB], ["ADDED", *new],
        ["MODIFIED", *new], ["MODIFIED", *gone], ["DELETED", *gone]]


def test_get_pods_watch_only(pods: ServerThread, background: list[Background]) -> None:
    process = Background(pods, "get", "pods", "--watch-only")
    background.append(process)
    wait_for_watcher(pods)  # kubectl lists first: an earlier create would not be an event
    create(pods, POD.collection(), POD.obj("first"))
    process.wait_for_line(r"first\s.*")
    assert process.stop() == ""
    assert watch_rows(process.lines) == [POD_HEADER, ["first", "0/1", "Pending", "0", "<age>"]]
