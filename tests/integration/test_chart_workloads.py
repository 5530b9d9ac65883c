"""Acceptance (issue 20): a Helm-style chart of workloads, rendered as ``helm template`` renders
it (its labels and release annotations on every object), through the real kubectl against a
server with the cluster's components (controllers, scheduler, one simulated node).

The 13 kinds (ServiceAccount, ConfigMap, Secret, Service, PersistentVolumeClaim, Deployment,
StatefulSet, Job, CronJob, HorizontalPodAutoscaler, PodDisruptionBudget, Ingress, NetworkPolicy)
are created by ``kubectl apply``; a second apply reports each ``unchanged`` and writes nothing
(but for the PodDisruptionBudget, which kubectl always reports ``configured``, as against kube-
apiserver: its selector's patchStrategy is replace; the server writes nothing for it either),
``kubectl diff`` is empty; the workloads run (the Deployment available, the StatefulSet ready,
the Job complete, the HPA reading the Deployment's simulated usage; the claim may stay Pending:
no provisioner); ``kubectl delete -f`` removes it all and the garbage collector the pods. The
Deployment leaves ``replicas`` to its HPA, as Helm's default chart does with autoscaling on, so
the controllers' writes are never the manifest's business.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import yaml

from tests.integration import kubectl as cli
from tests.integration.harness import ServerThread

pytestmark = cli.needs_kubectl
WAIT = "60s"
APP = {"app.kubernetes.io/name": "demo", "app.kubernetes.io/instance": "demo"}


def helm_meta(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """The metadata ``helm template demo ./demo`` writes: its labels and release annotations."""
    return {"name": name,
            "labels": {"helm.sh/chart": "demo-0.1.0", **APP, "app.kubernetes.io/version": "1.16.0",
                       "app.kubernetes.io/managed-by": "Helm", **(labels or {})},
            "annotations": {"meta.helm.sh/release-name": "demo",
                            "meta.helm.sh/release-namespace": "default"}}


def pod_template(component: str, restart: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "serviceAccountName": "demo",
        "containers": [{"name": "demo", "image": "nginx:1.16.0", "imagePullPolicy": "IfNotPresent",
                        "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
                        "envFrom": [{"configMapRef": {"name": "demo"}},
                                    {"secretRef": {"name": "demo"}}],
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                      "limits": {"cpu": "200m", "memory": "256Mi"}}}]}
    if restart:
        spec["restartPolicy"] = restart
    return {"metadata": {"labels": {**APP, "app.kubernetes.io/component": component}},
            "spec": spec}


def chart() -> str:
    web = {**APP, "app.kubernetes.io/component": "web"}
    db = {**APP, "app.kubernetes.io/component": "db"}
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": helm_meta("demo"),
         "automountServiceAccountToken": True},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": helm_meta("demo"),
         "data": {"LOG_LEVEL": "info", "FEATURES": "a,b"}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": helm_meta("demo"), "type": "Opaque",
         "data": {"PASSWORD": "c2VjcmV0"}},
        {"apiVersion": "v1", "kind": "Service", "metadata": helm_meta("demo"),
         "spec": {"type": "ClusterIP", "selector": web,
                  "ports": [{"port": 80, "targetPort": "http", "protocol": "TCP",
                             "name": "http"}]}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": helm_meta("demo"),
         "spec": {"accessModes": ["ReadWriteOnce"],
                  "resources": {"requests": {"storage": "1Gi"}}}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": helm_meta("demo"),
         "spec": {"selector": {"matchLabels": web}, "template": pod_template("web")}},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": helm_meta("demo-db"),
         "spec": {"serviceName": "demo", "replicas": 2, "selector": {"matchLabels": db},
                  "template": pod_template("db")}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": helm_meta("demo-migrate"),
         "spec": {"backoffLimit": 2, "template": pod_template("migrate", "Never")}},
        {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": helm_meta("demo-report"),
         "spec": {"schedule": "0 3 * * *", "jobTemplate": {
             "spec": {"template": pod_template("report", "OnFailure")}}}},
        {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
         "metadata": helm_meta("demo"),
         "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                     "name": "demo"},
                  "minReplicas": 1, "maxReplicas": 3,
                  "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                      "type": "Utilization", "averageUtilization": 80}}}]}},
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": helm_meta("demo"),
         "spec": {"minAvailable": 1, "selector": {"matchLabels": web}}},
        {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": helm_meta("demo"),
         "spec": {"rules": [{"host": "demo.local", "http": {"paths": [{
             "path": "/", "pathType": "ImplementationSpecific",
             "backend": {"service": {"name": "demo", "port": {"number": 80}}}}]}}]}},
        {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
         "metadata": helm_meta("demo"),
         "spec": {"podSelector": {"matchLabels": web}, "policyTypes": ["Ingress"],
                  "ingress": [{"ports": [{"protocol": "TCP", "port": 80}]}]}},
    ]
    return yaml.safe_dump_all(docs, sort_keys=False)


NAMES = ["serviceaccount/demo", "configmap/demo", "secret/demo", "service/demo",
         "persistentvolumeclaim/demo", "deployment.apps/demo", "statefulset.apps/demo-db",
         "job.batch/demo-migrate", "cronjob.batch/demo-report",
         "horizontalpodautoscaler.autoscaling/demo", "poddisruptionbudget.policy/demo",
         "ingress.networking.k8s.io/demo", "networkpolicy.networking.k8s.io/demo"]


def _until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def versions(server: ServerThread, manifests: str) -> dict[str, str]:
    out = cli.ok(server, "get", "-f", "-", "-o", "json", stdin=manifests)
    return {f"{item['kind']}/{item['metadata']['name']}": item["metadata"]["resourceVersion"]
            for item in json.loads(out)["items"]}


def _hpa_reads_usage(server: ServerThread) -> bool:
    hpa = json.loads(cli.ok(server, "get", "hpa", "demo", "-o", "json"))
    metrics = (hpa.get("status") or {}).get("currentMetrics") or []
    return bool(metrics) and metrics[0].get("resource", {}).get("current", {}).get(
        "averageUtilization") == 50


def test_workload_chart_applies_reapplies_unchanged_runs_and_deletes(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server(cluster=True)
    manifests = chart()
    out = cli.ok(server, "apply", "-f", "-", stdin=manifests)
    assert out.splitlines() == [f"{n} created" for n in NAMES]
    # the workloads run
    cli.ok(server, "rollout", "status", "deployment/demo", f"--timeout={WAIT}")
    cli.ok(server, "rollout", "status", "statefulset/demo-db", f"--timeout={WAIT}")
    cli.ok(server, "wait", "--for=condition=Complete", "job/demo-migrate", f"--timeout={WAIT}")
    assert cli.ok(server, "get", "pvc", "demo", "-o", "jsonpath={.status.phase}") in (
        "Pending", "Bound")
    # the HPA reads the Deployment's pods (half their CPU request: 50% of 80%), keeps 1 replica
    _until(lambda: _hpa_reads_usage(server), "the HPA's first reading", timeout=45)
    assert "cpu: 50%/80%" in cli.ok(server, "get", "hpa", "demo")
    # a second apply changes nothing, and kubectl diff agrees
    before = versions(server, manifests)
    out = cli.ok(server, "apply", "-f", "-", stdin=manifests)
    # kubectl's three-way patch always carries a PodDisruptionBudget's selector (policy/v1
    # marks it patchStrategy=replace, so the diff is never empty): kubectl says "configured"
    # against kube-apiserver too; the server finds nothing to change (no new resourceVersion)
    assert out.splitlines() == [
        f"{n} {'configured' if n.startswith('poddisruptionbudget') else 'unchanged'}"
        for n in NAMES]
    after = versions(server, manifests)
    # only what the controllers write moves on its own (the HPA's and the workloads' status);
    # the objects the apply alone could have touched keep their resourceVersion
    for name in ("ServiceAccount/demo", "ConfigMap/demo", "Secret/demo", "Service/demo",
                 "Ingress/demo", "NetworkPolicy/demo", "CronJob/demo-report",
                 "PodDisruptionBudget/demo"):
        assert after[name] == before[name], name
    diff = cli.run(server, "diff", "-f", "-", stdin=manifests)
    assert (diff.returncode, diff.stdout) == (0, ""), (diff.stdout, diff.stderr)
    # delete: every object, then the pods they owned
    out = cli.ok(server, "delete", "-f", "-", "--wait=true", stdin=manifests)
    assert out.splitlines() == ['{} "{}" deleted'.format(*n.split("/")) for n in NAMES]
    gone = cli.run(server, "get", "-f", "-", stdin=manifests)
    assert gone.returncode != 0 and gone.stdout == ""
    assert gone.stderr.count("NotFound") == len(NAMES)
    _until(lambda: cli.ok(server, "get", "pods", "-l", "app.kubernetes.io/instance=demo",
                          "-o", "name") == "", "the chart's pods garbage-collected")
