"""Service ranges kept in the SQLite store (``service_ranges_stored=True``), as on etcd.

By default only a shared store (etcd) holds kube's range objects; asked to, SQLite keeps them
too (``core/ranges/serviceips``, ``core/ranges/servicenodeports``): allocations and releases
change them with compare-and-swap writes, and a restart reads them back and repairs them.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import sqlite3
from pathlib import Path
from typing import Any

import httpx

from kubewire import Server
from kubewire.server.allocation.ranges import decode_bitmap

SERVICES = "/api/v1/namespaces/default/services"
FIRST = int(ipaddress.ip_address("10.96.0.1"))


def stored_range(data_dir: Path, name: str) -> dict[str, Any]:
    with sqlite3.connect(f"file:{data_dir / 'kubewire.db'}?mode=ro", uri=True) as db:
        row = db.execute("SELECT value FROM objects WHERE key = ?",
                         (f"core/ranges/{name}",)).fetchone()
    assert row is not None, name
    obj: dict[str, Any] = json.loads(row[0])
    return obj


def held(data_dir: Path) -> tuple[set[str], set[int]]:
    ips = stored_range(data_dir, "serviceips")
    ports = stored_range(data_dir, "servicenodeports")
    assert (ips["kind"], ips["range"], ports["range"]) == (
        "RangeAllocation", "10.96.0.0/12", "30000-32767")
    return ({str(ipaddress.ip_address(FIRST + o))
             for o in decode_bitmap(base64.b64decode(ips["data"]))},
            {30000 + o for o in decode_bitmap(base64.b64decode(ports["data"]))})


def sqlite_server(data_dir: Path) -> Server:
    return Server(storage="sqlite", data_dir=data_dir, service_ranges_stored=True,
                  service_repair_interval_s=0)


def test_sqlite_keeps_the_ranges_when_asked_and_a_restart_reads_them(tmp_path: Path) -> None:
    with sqlite_server(tmp_path) as first:
        body = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                "spec": {"type": "NodePort", "ports": [{"port": 80}]}}
        spec = httpx.post(first.url + SERVICES, json=body).json()["spec"]
        ip, port = spec["clusterIP"], spec["ports"][0]["nodePort"]
        assert held(tmp_path) == ({"10.96.0.1", ip}, {port})
    with sqlite_server(tmp_path) as again:
        copy = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "copy"},
                "spec": {"clusterIP": ip, "ports": [{"port": 80}]}}
        refused = httpx.post(again.url + SERVICES, json=copy)
        assert refused.status_code == 422
        assert "provided IP is already allocated" in refused.json()["message"]
        assert httpx.delete(f"{again.url}{SERVICES}/web").status_code == 200
        assert held(tmp_path) == ({"10.96.0.1"}, set())
        assert httpx.post(again.url + SERVICES, json=copy).status_code == 201
        assert held(tmp_path) == ({"10.96.0.1", ip}, set())


def test_by_default_only_a_shared_store_keeps_the_ranges(tmp_path: Path) -> None:
    with Server(storage="sqlite", data_dir=tmp_path) as server:
        body = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                "spec": {"ports": [{"port": 80}]}}
        assert httpx.post(server.url + SERVICES, json=body).status_code == 201
        with sqlite3.connect(f"file:{tmp_path / 'kubewire.db'}?mode=ro", uri=True) as db:
            rows = db.execute("SELECT key FROM objects WHERE key LIKE 'core/ranges/%'")
            assert rows.fetchall() == []
