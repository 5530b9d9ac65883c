"""The RBAC defaults on replicas: servers starting together on one etcd each reconcile the
bootstrap policy (the other's creates answer AlreadyExists, its updates conflict and are
retried), and all serve the same roles, stored under kube's keys."""

from __future__ import annotations

import base64
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

import kubewire
from tests.etcd_cluster import ETCD, etcd_cluster

pytestmark = pytest.mark.skipif(ETCD is None, reason="no etcd binary: tools/ensure-etcd")
ROLES = "/apis/rbac.authorization.k8s.io/v1/clusterroles"


def test_replicas_starting_together_share_one_set_of_defaults(
        caplog: pytest.LogCaptureFixture) -> None:
    with etcd_cluster(1) as cluster:
        servers = [kubewire.Server(storage="etcd", etcd_servers=cluster.endpoints,
                                   etcd_prefix="/rbac/registry") for _ in range(3)]
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(lambda s: s.start(), servers))
        try:
            seen = []
            for server in servers:
                items = httpx.get(server.url + ROLES).json()["items"]
                seen.append(sorted((i["metadata"]["name"], i["metadata"]["uid"])
                                   for i in items))
                names = [name for name, _ in seen[-1]]
                assert len(names) == len(set(names)) and "cluster-admin" in names
            assert seen[0] == seen[1] == seen[2]  # one object each, the same on every replica
            admin = httpx.get(servers[0].url + ROLES + "/admin").json()
            assert admin["rules"]  # aggregated by whichever server leads
            # kube's key (etcd's gRPC gateway: base64 keys)
            key = base64.b64encode(b"/rbac/registry/clusterroles/admin").decode()
            found = httpx.post(cluster.endpoints[0] + "/v3/kv/range", json={"key": key}).json()
            assert found["count"] == "1"
            failed = [r.getMessage() for r in caplog.records
                      if r.name.endswith("rbac_bootstrap") and r.levelname == "ERROR"]
            assert failed == []  # the races were benign
        finally:
            for server in servers:
                server.stop()
