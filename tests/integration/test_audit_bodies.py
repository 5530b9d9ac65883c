"""The audit log at the Request and RequestResponse levels, read right after requests from the
``kubernetes`` package and kubectl: requestObject, responseObject (none for watches),
omitManagedFields, per-rule matching, the Audit-Id header, and rotation."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch

from tests.integration.harness import ServerThread
from tests.integration.kubectl import needs_kubectl, run
from tests.integration.wire import call

POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
omitManagedFields: true
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*", "/version", "/openapi/*", "/api",
                    "/apis*"]
- level: RequestResponse
  resources: [{group: "", resources: [configmaps]}]
  namespaces: [bodies]
  omitManagedFields: false
- level: RequestResponse
  resources: [{group: "", resources: [configmaps]}]
  verbs: [get, list, watch, create, patch, delete]
- level: Request
  resources: [{group: "", resources: [secrets]}]
- level: Metadata
  users: [nobody-in-particular]
- level: None
"""
Event = dict[str, Any]


@pytest.fixture
def audited(make_server: Callable[..., ServerThread], tmp_path: Path) -> ServerThread:
    (tmp_path / "policy.yaml").write_text(POLICY)
    return make_server(audit_log_path=str(tmp_path / "logs/audit.log"),
                       audit_policy_file=tmp_path / "policy.yaml")


def events(server: ServerThread) -> list[Event]:
    lines = Path(str(server.config.audit_log_path)).read_text().splitlines()
    return [json.loads(line) for line in lines]


def _watch_events(server: ServerThread, until_stages: int, wait_s: float = 5.0) -> list[Event]:
    """The watch requests' events, once ``until_stages`` of them are in the log (or the wait
    is over: the assertion after it then says what was missing)."""
    deadline = time.monotonic() + wait_s
    while True:
        watched = [e for e in events(server) if e["verb"] == "watch"]
        if len(watched) >= until_stages or time.monotonic() > deadline:
            return watched
        time.sleep(0.02)


def by_id(server: ServerThread, audit_id: str) -> list[Event]:
    return [e for e in events(server) if e["auditID"] == audit_id]


def test_request_and_response_objects_from_the_kubernetes_package(
        audited: ServerThread) -> None:
    with client.ApiClient(client.Configuration(host=audited.url)) as api:
        core = client.CoreV1Api(api)
        for namespace in ("bodies", "lean"):
            core.create_namespace(client.V1Namespace(
                metadata=client.V1ObjectMeta(name=namespace)))
        made, _, headers = core.create_namespaced_config_map_with_http_info(
            "lean", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cm"),
                                       data={"a": "<1>"}))
        [create] = by_id(audited, headers["Audit-Id"])  # written before the answer left
        assert create["level"] == "RequestResponse" and create["stage"] == "ResponseComplete"
        keys = list(create)
        assert keys[keys.index("responseStatus"):keys.index("requestReceivedTimestamp")] == [
            "responseStatus", "requestObject", "responseObject"]
        # the object sent, with the kind and version kube's encoder writes first
        assert create["requestObject"] == {"kind": "ConfigMap", "apiVersion": "v1",
                                           "metadata": {"name": "cm"}, "data": {"a": "<1>"}}
        assert list(create["requestObject"])[:2] == ["kind", "apiVersion"]
        response = create["responseObject"]
        assert response["metadata"]["uid"] == made.metadata.uid
        assert "managedFields" not in response["metadata"]  # the policy's omitManagedFields
        assert create["objectRef"]["name"] == "cm"
        line = next(line for line in Path(str(audited.config.audit_log_path)).read_text()
                    .splitlines() if headers["Audit-Id"] in line)
        assert '"a":"\\u003c1\\u003e"' in line  # Go's HTML-safe escapes inside objects too

        # the rule for namespace "bodies" keeps managedFields (the rule overrides the policy)
        _, _, headers = core.create_namespaced_config_map_with_http_info(
            "bodies", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cm"),
                                         data={"a": "1"}))
        [kept] = by_id(audited, headers["Audit-Id"])
        assert kept["responseObject"]["metadata"]["managedFields"][0]["manager"]

        # a patch is logged as sent; a Status answer is the response object
        _, _, headers = core.patch_namespaced_config_map_with_http_info(
            "cm", "lean", {"data": {"b": "2"}})
        [patched] = by_id(audited, headers["Audit-Id"])
        assert patched["requestObject"] == {"data": {"b": "2"}}
        assert patched["responseObject"]["data"] == {"a": "<1>", "b": "2"}
        missing = call(audited, "GET", "/api/v1/namespaces/lean/configmaps/nope",
                       headers={"Audit-ID": "missing-1"})
        assert missing.status == 404 and missing.headers["audit-id"] == "missing-1"
        [absent] = by_id(audited, "missing-1")
        assert absent["responseObject"]["kind"] == "Status"
        assert absent["responseObject"]["code"] == 404
        assert "requestObject" not in absent

        # a list is the response object; an update is not audited by the verbs rule
        _, _, headers = core.list_namespaced_config_map_with_http_info("lean")
        [listed] = by_id(audited, headers["Audit-Id"])
        assert [i["metadata"]["name"] for i in listed["responseObject"]["items"]] == ["cm"]
        current = core.read_namespaced_config_map("cm", "lean")
        _, _, headers = core.replace_namespaced_config_map_with_http_info("cm", "lean", current)
        assert by_id(audited, headers["Audit-Id"]) == []

        # Request level: the secret sent, not the answer
        _, _, headers = core.create_namespaced_secret_with_http_info(
            "lean", client.V1Secret(metadata=client.V1ObjectMeta(name="s"),
                                    string_data={"k": "v"}))
        [secret] = by_id(audited, headers["Audit-Id"])
        assert secret["level"] == "Request"
        assert secret["requestObject"]["stringData"] == {"k": "v"}
        assert "responseObject" not in secret

        # a delete with a body logs its DeleteOptions
        _, _, headers = core.delete_namespaced_config_map_with_http_info(
            "cm", "lean", body=client.V1DeleteOptions(grace_period_seconds=0))
        [deleted] = by_id(audited, headers["Audit-Id"])
        assert deleted["requestObject"]["gracePeriodSeconds"] == 0

        # a watch: no response object in either stage
        for _ in watch.Watch().stream(core.list_namespaced_config_map, "bodies",
                                      timeout_seconds=1):
            pass
        # The client sees the stream end (the server's last chunk) a moment before the server
        # has finished the request and written its ResponseComplete: wait for it, bounded.
        watched = _watch_events(audited, until_stages=2)
        assert [e["stage"] for e in watched] == ["ResponseStarted", "ResponseComplete"]
        assert all("responseObject" not in e and "requestObject" not in e for e in watched)


@needs_kubectl
def test_kubectl_apply_shows_what_it_sent(make_server: Callable[..., ServerThread],
                                          tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY)
    server = make_server(insecure_http=False, audit_log_path=str(tmp_path / "audit.log"),
                         audit_policy_file=tmp_path / "policy.yaml")
    manifest = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n"
                "  namespace: default\ndata:\n  color: blue\n")
    done = run(server, "apply", "--server-side", "-f", "-", stdin=manifest)
    assert done.returncode == 0, done.stderr
    [applied] = [e for e in events(server) if e["verb"] == "patch"]
    assert applied["requestObject"]["data"] == {"color": "blue"}
    assert applied["responseObject"]["metadata"]["name"] == "applied"
    assert "managedFields" not in applied["responseObject"]["metadata"]
    assert applied["userAgent"].startswith("kubectl/")


def test_the_log_rotates_and_keeps_its_backups_bounded(
        make_server: Callable[..., ServerThread], tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY)
    log_dir = tmp_path / "rotated"
    server = make_server(audit_log_path=str(log_dir / "audit.log"),
                         audit_policy_file=tmp_path / "policy.yaml",
                         audit_log_maxsize_mb=1, audit_log_maxbackup=2)
    blob = "x" * 200_000  # each create logs it twice (request and response): ~400 KB
    for i in range(12):
        reply = call(server, "POST", "/api/v1/namespaces/default/configmaps",
                     {"metadata": {"name": f"cm{i}"}, "data": {"blob": blob}})
        assert reply.status == 201
    files = sorted(p.name for p in log_dir.iterdir())
    backups = [name for name in files if name != "audit.log"]
    assert "audit.log" in files and len(backups) == 2, files
    assert all(name.startswith("audit-") and name.endswith(".log") for name in backups)
    for path in log_dir.iterdir():
        assert path.stat().st_size <= 1024 * 1024
        for line in path.read_text().splitlines():
            assert json.loads(line)["kind"] == "Event"  # rotation splits between lines
