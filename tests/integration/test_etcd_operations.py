"""A server on etcd, as operators see it: health checks on the store, etcd's metrics, and the
`serve` flags kube-apiserver names (real etcd from tests/etcd_cluster.py, the public
``kubewire.Server`` and ``kubewire serve``)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import kubewire
from tests.api_only import API_ONLY
from tests.etcd_cluster import ETCD, Cluster, etcd_cluster

pytestmark = pytest.mark.skipif(ETCD is None, reason="no etcd binary: tools/ensure-etcd")


@pytest.fixture(scope="module")
def etcd() -> Iterator[Cluster]:
    with etcd_cluster(1) as cluster:
        yield cluster


def test_health_and_metrics_reflect_etcd(etcd: Cluster) -> None:
    with kubewire.Server(storage="etcd", etcd_servers=etcd.endpoints,
                         etcd_prefix="/ops-a/registry") as server, httpx.Client(
            base_url=server.url) as http:
        assert http.get("/readyz/etcd").text == "ok"
        assert http.get("/livez/etcd").text == "ok"
        http.post("/api/v1/namespaces/default/configmaps",
                  json={"metadata": {"name": "c"}, "data": {"a": "1"}}).raise_for_status()
        text = http.get("/metrics").text
        assert 'apiserver_storage_size_bytes{storage_cluster_id="etcd-0"}' in text
        assert 'etcd_request_duration_seconds_count{operation="create",type="configmaps"}' in text
        # each member's database size, polled in the background (first at the first tick)
        sample = f'apiserver_storage_db_total_size_in_bytes{{endpoint="{etcd.endpoints[0]}"}} '
        deadline = time.monotonic() + 15
        while sample not in text and time.monotonic() < deadline:
            time.sleep(0.2)
            text = http.get("/metrics").text
        size = float(text.split(sample, 1)[1].split("\n", 1)[0])
        assert size > 0


def test_serve_refuses_etcd_flags_kube_refuses(tmp_path: Path) -> None:
    run = [sys.executable, "-m", "kubewire.cli", "serve", *API_ONLY, "--data-dir", str(tmp_path),
           "--port", "0"]
    missing = subprocess.run([*run, "--storage-backend", "etcd3"], capture_output=True,
                             text=True, timeout=60)
    assert missing.returncode == 1
    assert "--etcd-servers must be specified" in missing.stderr
    retired = subprocess.run([*run, "--storage-backend", "etcd2"], capture_output=True,
                             text=True, timeout=60)
    assert retired.returncode == 2
    assert "etcd2 is no longer a supported storage backend" in retired.stderr


def _slice_port_and_rv(http: httpx.Client) -> tuple[int, str]:
    found = http.get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes")
    found.raise_for_status()
    body = found.json()
    return body["ports"][0]["port"], body["metadata"]["resourceVersion"]


def test_replicas_agree_on_the_kubernetes_endpoints_and_hand_over_when_one_stops(
        etcd: Cluster) -> None:
    """Two servers on one etcd (kube's lease endpoint reconciler): the endpoints name the
    replica on the lowest port and stay put (no replica rewrites the other's), and when it stops
    the other takes over at once."""
    options = {"storage": "etcd", "etcd_servers": etcd.endpoints,
               "etcd_prefix": "/ops-b/registry"}
    with kubewire.Server(**options) as first, kubewire.Server(**options) as second, \
            httpx.Client(base_url=first.url) as http:
        ports = sorted(int(s.url.rsplit(":", 1)[1]) for s in (first, second))
        deadline = time.monotonic() + 5
        while _slice_port_and_rv(http)[0] != ports[0] and time.monotonic() < deadline:
            time.sleep(0.05)
        port, revision = _slice_port_and_rv(http)
        assert port == ports[0]
        time.sleep(1.0)
        assert _slice_port_and_rv(http) == (port, revision)  # nobody rewrote it
        lower = first if first.url.endswith(f":{ports[0]}") else second
        higher = second if lower is first else first
        lower.stop()
        with httpx.Client(base_url=higher.url) as remaining:
            assert _slice_port_and_rv(remaining)[0] == ports[1]


def test_serve_talks_tls_to_etcd_with_kube_apiservers_flags(tmp_path: Path) -> None:
    """``--etcd-cafile/--etcd-certfile/--etcd-keyfile`` against a member that requires client
    certificates."""
    from tests.integration.test_cli import Server
    from tests.integration.test_etcd_client import _tls_files

    files = _tls_files(tmp_path)
    extra = ["--cert-file", str(files["cert"]), "--key-file", str(files["key"]),
             "--trusted-ca-file", str(files["ca"]), "--client-cert-auth"]
    with etcd_cluster(1, extra) as cluster:
        server = Server(tmp_path / "data", "--port", "0", "--insecure-http",
                        "--etcd-servers", cluster.endpoints[0],
                        "--etcd-cafile", str(files["ca"]),
                        "--etcd-certfile", str(files["client_cert"]),
                        "--etcd-keyfile", str(files["client_key"]))
        try:
            with httpx.Client(base_url=server.url) as http:
                http.post("/api/v1/namespaces/default/configmaps",
                          json={"metadata": {"name": "over-tls"}}).raise_for_status()
                assert http.get("/readyz/etcd").text == "ok"
        finally:
            server.stop()


def test_replicas_on_etcd_elect_one_controller_manager(etcd: Cluster) -> None:
    """On etcd, ``--leader-elect`` is on by default (kube-controller-manager's default): one
    replica holds ``kube-system/kube-controller-manager`` and its controllers serve both (a
    namespace made through the other replica gets its default ServiceAccount; a deleted one is
    emptied and goes)."""
    options = {"storage": "etcd", "etcd_servers": etcd.endpoints,
               "etcd_prefix": "/ops-c/registry", "namespace_deletion_delay_s": 0.0}
    with kubewire.Server(**options) as first, kubewire.Server(**options) as second, \
            httpx.Client(base_url=first.url) as a, httpx.Client(base_url=second.url) as b:
        lease_path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/"
        deadline = time.monotonic() + 20
        holder = ""
        while not holder and time.monotonic() < deadline:
            found = a.get(lease_path + "kube-controller-manager")
            if found.status_code == 200:
                holder = found.json()["spec"].get("holderIdentity") or ""
            time.sleep(0.1)
        assert holder
        b.post("/api/v1/namespaces", json={"metadata": {"name": "team"}}).raise_for_status()
        deadline = time.monotonic() + 20
        while (a.get("/api/v1/namespaces/team/serviceaccounts/default").status_code != 200
               and time.monotonic() < deadline):
            time.sleep(0.1)
        assert b.get("/api/v1/namespaces/team/serviceaccounts/default").status_code == 200
        b.delete("/api/v1/namespaces/team").raise_for_status()
        while (a.get("/api/v1/namespaces/team").status_code != 404
               and time.monotonic() < deadline):
            time.sleep(0.1)
        assert b.get("/api/v1/namespaces/team").status_code == 404
        # still one holder, and the same
        assert a.get(lease_path + "kube-controller-manager").json()["spec"][
            "holderIdentity"] == holder
