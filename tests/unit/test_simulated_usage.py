"""The simulated usage rule (``kubewire.simulated_usage``) and the metrics objects built from
it (``server/reads/metrics_objects``)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from kubewire import simulated_usage as usage
from kubewire.server.reads import metrics_objects as objects


def pod(cpu_usage: str | None = None, *requests: str) -> dict[str, Any]:
    annotations = {} if cpu_usage is None else {"kubewire.io/cpu-usage": cpu_usage}
    return {"metadata": {"name": "p", "namespace": "ns", "annotations": annotations},
            "spec": {"nodeName": "n", "containers": [
                {"name": f"c{i}", "resources": {"requests": {"cpu": r}}}
                for i, r in enumerate(requests)]},
            "status": {"phase": "Running"}}


def test_pod_usage_is_the_annotation_else_half_the_requests() -> None:
    assert usage.pod_usage(pod("250m", "100m"), "cpu") == Fraction(1, 4)
    assert usage.pod_usage(pod(None, "100m", "300m"), "cpu") == Fraction(1, 5)
    assert usage.pod_usage(pod("-1", "100m"), "cpu") == Fraction(1, 20)  # nonsense: ignored
    assert usage.pod_usage(pod(None, "100m"), "memory") == 0


def test_containers_split_by_requests_and_sum_to_the_pod() -> None:
    split = usage.container_usages(pod("100m", "1", "1", "1"))
    assert [u["cpu"] for _, u in split] == [33333334, 33333333, 33333333]
    assert sum(u["cpu"] for _, u in split) == 100_000_000
    assert usage.container_usage(pod("100m", "1", "3"), "cpu", "c1") == Fraction(3, 40)
    assert usage.container_usage(pod("100m", "1"), "cpu", "none") is None
    even = usage.container_usages(pod("90m", "0", "0"))
    assert [u["cpu"] for _, u in even] == [45_000_000, 45_000_000]


def test_quantities_as_metrics_server_writes_them() -> None:
    assert objects.quantity("cpu", 1_916_003) == "1916003n"
    assert objects.quantity("cpu", 150_000_000) == "150m"
    assert objects.quantity("memory", 13_381_632) == "13068Ki"
    assert objects.quantity("memory", 1000) == "1k"  # Go: below 1024 is DecimalSI


def test_node_usage_counts_running_pods_and_the_base() -> None:
    pending = {**pod("1"), "status": {"phase": "Pending"}}
    running = objects.pod_usage(pod("200m", "1"))
    assert running.running and running.node == "n" and running.total["cpu"] == 200_000_000
    total = objects.node_usage([running, objects.pod_usage(pending)])
    assert total == {"cpu": objects.NODE_BASE["cpu"] + 200_000_000,
                     "memory": objects.NODE_BASE["memory"]}
    assert not objects.pod_usage(pending).running


def test_pod_metrics_lists_containers_as_metrics_server() -> None:
    usage = objects.pod_usage(pod("300m", "100m", "200m"))
    made = objects.pod_metrics({"name": "p", "namespace": "ns", "labels": {}}, usage, "T")
    assert made["containers"] == [{"name": "c0", "usage": {"cpu": "100m", "memory": "0"}},
                                  {"name": "c1", "usage": {"cpu": "200m", "memory": "0"}}]
    assert made["metadata"] == {"name": "p", "namespace": "ns", "creationTimestamp": "T"}
