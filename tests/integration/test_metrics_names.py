"""``/metrics`` carries what kube users look for, parsed by prometheus_client's parser after
traffic from the ``kubernetes`` package: process and Python runtime metrics, long-running
requests, response and watch event sizes, the store's size and request latency."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, watch
from prometheus_client import CollectorRegistry, GCCollector, ProcessCollector, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.integration.harness import ServerThread
from tests.integration.wire import call, wait_for
from tests.storage_choice import on_etcd

Samples = list[Sample]


def scrape(server: ServerThread) -> tuple[dict[str, str], Samples]:
    """Each family's type, and every sample, from a real Prometheus text parser."""
    reply = call(server, "GET", "/metrics")
    assert reply.status == 200
    assert reply.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    types: dict[str, str] = {}
    samples: Samples = []
    for family in text_string_to_metric_families(reply.body.decode()):
        types[family.name] = family.type
        samples.extend(family.samples)
    return types, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    return sum(s.value for s in samples
               if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


def bucket(samples: Samples, name: str, le: float, **labels: str) -> float:
    """The cumulative count of ``name``'s bucket ``le`` (the text writes ``4096``, as Go)."""
    return value([s for s in samples if s.name == f"{name}_bucket"
                  and float(s.labels["le"]) == le], f"{name}_bucket", **labels)


def buckets(samples: Samples, name: str, **labels: str) -> list[float]:
    return sorted({float(s.labels["le"]) for s in samples if s.name == f"{name}_bucket"
                   and all(s.labels.get(k) == v for k, v in labels.items())})


@pytest.fixture
def core(server: ServerThread) -> Iterator[client.CoreV1Api]:
    with client.ApiClient(client.Configuration(host=server.url)) as api:
        yield client.CoreV1Api(api)


def test_process_and_python_metrics_agree_with_prometheus_client(server: ServerThread) -> None:
    types, samples = scrape(server)
    ours = {s.name: s for s in samples}
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)  # the same process: the test runs the server in-thread
    GCCollector(registry=registry)
    theirs = {s.name: s for family in text_string_to_metric_families(
        generate_latest(registry).decode()) for s in family.samples}
    for name in ("process_virtual_memory_bytes", "process_resident_memory_bytes",
                 "process_start_time_seconds", "process_cpu_seconds_total", "process_open_fds",
                 "process_max_fds"):
        assert name in ours, name
        assert ours[name].value == pytest.approx(theirs[name].value, rel=0.2), name
    assert ours["process_start_time_seconds"].value == theirs["process_start_time_seconds"].value
    assert ours["process_max_fds"].value == theirs["process_max_fds"].value
    assert types["process_cpu_seconds"] == "counter"
    assert types["process_resident_memory_bytes"] == "gauge"
    for name in ("python_gc_objects_collected", "python_gc_objects_uncollectable",
                 "python_gc_collections"):
        assert types[name] == "counter"
        assert {s.labels["generation"] for s in samples if s.name == f"{name}_total"} == \
            {"0", "1", "2"}
    info = [s for s in samples if s.name == "python_info"]
    assert len(info) == 1 and info[0].value == 1
    assert info[0].labels["implementation"] == "CPython"
    assert info[0].labels["major"] == "3"
    assert ours["process_open_fds"].value == pytest.approx(len(os.listdir("/proc/self/fd")),
                                                          abs=10)


def test_request_store_and_watch_metrics_move_with_client_traffic(
        server: ServerThread, core: client.CoreV1Api) -> None:
    big = "x" * 3000  # each event line past 2 KiB
    for i in range(3):
        core.create_namespaced_config_map("default", client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=f"cm{i}"), data={"blob": big}))
    core.list_namespaced_config_map("default")
    core.read_namespaced_config_map("cm0", "default")

    stop = threading.Event()
    seen: list[str] = []

    def watching() -> None:
        w = watch.Watch()
        for event in w.stream(core.list_namespaced_config_map, "default", timeout_seconds=20):
            seen.append(event["object"].metadata.name)
            if stop.is_set() or len(seen) >= 5:
                w.stop()

    thread = threading.Thread(target=watching, daemon=True)
    thread.start()
    watch_labels = {"verb": "WATCH", "resource": "configmaps", "version": "v1",
                    "scope": "namespace", "component": "apiserver"}
    wait_for(lambda: value(scrape(server)[1], "apiserver_longrunning_requests",
                           **watch_labels) == 1, what="the watch to be counted as long-running")
    core.create_namespaced_config_map("default", client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="cm3"), data={"blob": big}))
    core.delete_namespaced_config_map("cm3", "default")
    thread.join(20)
    assert not thread.is_alive() and len(seen) == 5
    wait_for(lambda: value(scrape(server)[1], "apiserver_longrunning_requests",
                           **watch_labels) == 0, what="the ended watch to be uncounted")

    types, samples = scrape(server)
    assert types["apiserver_longrunning_requests"] == "gauge"
    # response sizes: GET and LIST only, kube's buckets (1 KB .. 1 GB)
    assert types["apiserver_response_sizes"] == "histogram"
    assert buckets(samples, "apiserver_response_sizes") == [
        1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, float("inf")]
    listed = {"verb": "LIST", "resource": "configmaps", "scope": "namespace"}
    assert value(samples, "apiserver_response_sizes_count", **listed) == 1
    assert value(samples, "apiserver_response_sizes_sum", **listed) > 9000
    assert value(samples, "apiserver_response_sizes_count", verb="GET",
                 resource="configmaps") == 1
    assert value(samples, "apiserver_response_sizes_count", verb="POST") == 0
    # watch events: 3 initial ADDED + ADDED + DELETED, each over 2 KiB and under 4 KiB
    kind = {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert value(samples, "apiserver_watch_events_total", **kind) == 5
    assert types["apiserver_watch_events_sizes"] == "histogram"
    assert buckets(samples, "apiserver_watch_events_sizes") == [
        1024.0 * 2 ** i for i in range(8)] + [float("inf")]
    assert value(samples, "apiserver_watch_events_sizes_count", **kind) == 5
    assert bucket(samples, "apiserver_watch_events_sizes", 2048.0, **kind) == 0
    assert bucket(samples, "apiserver_watch_events_sizes", 4096.0, **kind) == 5
    # the store: its requests under kube's etcd metric, its size on disk
    assert types["etcd_request_duration_seconds"] == "histogram"
    assert value(samples, "etcd_request_duration_seconds_count", operation="create",
                 type="configmaps") == 4
    assert value(samples, "etcd_request_duration_seconds_count", operation="delete",
                 type="configmaps") == 1
    assert value(samples, "etcd_request_duration_seconds_count", operation="create",
                 type="namespaces") >= 1  # the initial namespaces, at start
    assert buckets(samples, "etcd_request_duration_seconds")[:3] == [0.005, 0.025, 0.05]
    sizes = [s for s in samples if s.name == "apiserver_storage_size_bytes"]
    assert len(sizes) == 1 and sizes[0].value > 0
    # SQLite's database id; on etcd kube's label of the first (only) cluster
    cluster_id = sizes[0].labels["storage_cluster_id"]
    assert cluster_id == "etcd-0" if on_etcd() else len(cluster_id) == 16
    assert value(samples, "apiserver_storage_objects", resource="configmaps") == 3


def test_a_memory_store_reports_the_bytes_it_holds(make_server: Any) -> None:
    """No database file to measure: ``apiserver_storage_size_bytes`` is what the store holds."""
    server = make_server(storage="memory")
    before = value(scrape(server)[1], "apiserver_storage_size_bytes")
    assert before > 0  # the start-up objects
    assert call(server, "POST", "/api/v1/namespaces/default/configmaps", {
        "metadata": {"name": "big"}, "data": {"k": "x" * 10_000}}).status == 201
    after = value(scrape(server)[1], "apiserver_storage_size_bytes")
    assert after >= before + 2 * 10_000  # the object and its change
