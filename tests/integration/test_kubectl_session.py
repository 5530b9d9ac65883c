"""A scripted kubectl 1.32 session against a fresh server, each step's output asserted.

The order is a person's at a terminal: a `get -w` running in the background the whole time
(its output checked at the end), objects created from files, looked at in every output format,
labelled, annotated, patched three ways, applied client-side twice and server-side once,
namespaces and deployments made with kubectl's typed commands, scaled, explained, deleted and
waited for.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from tests.integration.harness import ServerThread
from tests.integration.kubectl import background, needs_kubectl, ok, run, stop
from tests.integration.wire import call, wait_for

POD_YAML = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web, tier: front}
spec:
  containers:
  - name: c
    image: nginx:1.25
"""
OTHER_POD_YAML = POD_YAML.replace("name: web", "name: db").replace("tier: front", "tier: back")
DEPLOYMENT_YAML = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: site
spec:
  replicas: 2
  selector:
    matchLabels: {app: site}
  template:
    metadata:
      labels: {app: site}
    spec:
      containers:
      - name: site
        image: nginx:1.25
"""


def rows(text: str) -> list[list[str]]:
    """kubectl's aligned table as lists of cells (header first)."""
    return [re.split(r"\s{2,}", line.strip()) for line in text.strip().splitlines()]


def column(text: str, name: str) -> list[str]:
    header, *body = rows(text)
    index = header.index(name)
    return [row[index] for row in body]


def pod_watchers(server: ServerThread) -> int:
    text = call(server, "GET", "/metrics").body.decode()
    found = re.search(r'^apiserver_registered_watchers\{[^}]*kind="Pod"[^}]*\} (\d+)', text,
                      re.MULTILINE)
    return int(found.group(1)) if found else 0


@needs_kubectl
def test_a_kubectl_session(server: ServerThread, tmp_path: Path) -> None:
    other_file = tmp_path / "db.yaml"
    other_file.write_text(OTHER_POD_YAML)
    assert ok(server, "create", "-f", str(other_file)) == "pod/db created\n"
    watcher = background(server, "get", "pods", "--watch", "--output-watch-events")
    try:
        wait_for(lambda: pod_watchers(server) == 1, what="kubectl's watch to be registered")
        _session(server, tmp_path)
    finally:
        out, err = stop(watcher)
    assert err == ""
    events = [(row[0], row[1]) for row in rows(out)[1:]]
    assert rows(out)[0][:3] == ["EVENT", "NAME", "READY"]
    web = [kind for kind, name in events if name == "web"]
    # created; labelled, annotated, patched three ways; marked for deletion; deleted
    assert web == ["ADDED"] + ["MODIFIED"] * 6 + ["DELETED"], events
    assert [kind for kind, name in events if name == "db"] == ["ADDED"]


def _session(server: ServerThread, tmp_path: Path) -> None:
    pod_file = tmp_path / "web.yaml"
    pod_file.write_text(POD_YAML)
    assert ok(server, "create", "-f", str(pod_file)) == "pod/web created\n"

    listing = ok(server, "get", "pods")
    assert rows(listing)[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert column(listing, "NAME") == ["db", "web"]
    assert column(listing, "STATUS") == ["Pending", "Pending"]
    wide = ok(server, "get", "pods", "-o", "wide")
    assert rows(wide)[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE",
                             "NOMINATED NODE", "READINESS GATES"]
    every = ok(server, "get", "pods", "-A")
    assert column(every, "NAMESPACE") == ["default", "default"]
    assert column(ok(server, "get", "pods", "--show-labels"), "LABELS") == [
        "app=web,tier=back", "app=web,tier=front"]
    assert ok(server, "get", "pods", "-l", "tier=front", "-o", "name") == "pod/web\n"
    assert ok(server, "get", "pods", "--field-selector", "metadata.name=db",
              "-o", "name") == "pod/db\n"
    as_json = json.loads(ok(server, "get", "pod", "web", "-o", "json"))
    assert (as_json["kind"], as_json["metadata"]["name"]) == ("Pod", "web")
    assert as_json["spec"]["restartPolicy"] == "Always"  # defaulted by the server
    as_yaml = yaml.safe_load(ok(server, "get", "pod", "web", "-o", "yaml"))
    assert as_yaml["metadata"]["uid"] == as_json["metadata"]["uid"]

    assert ok(server, "label", "pod", "web", "env=prod") == "pod/web labeled\n"
    assert ok(server, "annotate", "pod", "web", "note=hi") == "pod/web annotated\n"
    assert ok(server, "patch", "pod", "web", "-p",
              '{"metadata":{"labels":{"p":"strategic"}}}') == "pod/web patched\n"
    assert ok(server, "patch", "pod", "web", "--type", "merge", "-p",
              '{"metadata":{"labels":{"m":"merge"}}}') == "pod/web patched\n"
    assert ok(server, "patch", "pod", "web", "--type", "json", "-p",
              '[{"op":"add","path":"/metadata/labels/j","value":"json"}]') == "pod/web patched\n"
    meta = json.loads(ok(server, "get", "pod", "web", "-o", "json"))["metadata"]
    assert meta["labels"] == {"app": "web", "tier": "front", "env": "prod", "p": "strategic",
                              "m": "merge", "j": "json"}
    assert meta["annotations"] == {"note": "hi"}
    refused = run(server, "patch", "pod", "web", "--type", "merge", "-p", '{"spec":{"x":1}}')
    assert refused.returncode != 0

    deployment_file = tmp_path / "site.yaml"
    deployment_file.write_text(DEPLOYMENT_YAML)
    assert ok(server, "apply", "-f", str(deployment_file)) == "deployment.apps/site created\n"
    deployment_file.write_text(DEPLOYMENT_YAML.replace("replicas: 2", "replicas: 3"))
    assert ok(server, "apply", "-f", str(deployment_file)) == "deployment.apps/site configured\n"
    assert ok(server, "apply", "--server-side", "-f", str(deployment_file)) == (
        "deployment.apps/site serverside-applied\n")
    site = json.loads(ok(server, "get", "deployment", "site", "-o", "json",
                         "--show-managed-fields"))
    assert site["spec"]["replicas"] == 3
    assert {m["manager"] for m in site["metadata"]["managedFields"]} >= {"kubectl"}

    assert ok(server, "create", "namespace", "team") == "namespace/team created\n"
    assert ok(server, "create", "deployment", "api", "--image=nginx", "--replicas=2",
              "-n", "team") == "deployment.apps/api created\n"
    assert ok(server, "scale", "deployment", "api", "--replicas=4", "-n", "team") == (
        "deployment.apps/api scaled\n")
    assert ok(server, "get", "deployment", "api", "-n", "team", "-o",
              "jsonpath={.spec.replicas}") == "4"
    deployments = ok(server, "get", "deployments", "-A")
    assert list(zip(column(deployments, "NAMESPACE"), column(deployments, "NAME"),
                    strict=True)) == [("default", "site"), ("team", "api")]
    explained = ok(server, "explain", "deployment.spec.replicas")
    assert "FIELD: replicas <integer>" in explained

    assert ok(server, "delete", "pod", "web") == 'pod "web" deleted\n'
    assert ok(server, "wait", "--for=delete", "pod/web", "--timeout=20s") in (
        "", "pod/web condition met\n")
    assert ok(server, "get", "pods", "-o", "name") == "pod/db\n"
    gone = run(server, "get", "pod", "web")
    assert gone.returncode == 1
    assert gone.stderr == 'Error from server (NotFound): pods "web" not found\n'
