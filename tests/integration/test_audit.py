"""The audit log (``--audit-log-path``, ``--audit-policy-file``): kube's events, real clients.

Each event line is compared whole (IDs and times apart) with what kube-apiserver 1.32 writes at
the Metadata level: both identities for an impersonated request, the authorization decision,
the 401 of a failed authentication, watches in two stages.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.api_only import API_ONLY
from tests.integration.harness import ServerThread
from tests.integration.kubectl import needs_kubectl, run
from tests.integration.test_access import POLICY, _token_of, ensure_namespaces, https, issue
from tests.reliability.proc import free_port

AUDIT_ALL = """\
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/readyz", "/livez", "/version", "/openapi/*"]
- level: None
  resources: [{group: "", resources: ["events"]}]
- level: Metadata
"""
MICRO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
Event = dict[str, Any]


@pytest.fixture
def audited(make_server: Callable[..., ServerThread], tmp_path: Path) -> ServerThread:
    (tmp_path / "abac.jsonl").write_text(POLICY + "\n")
    (tmp_path / "audit.yaml").write_text(AUDIT_ALL)
    server = make_server(insecure_http=False, authorization_policy_file=tmp_path / "abac.jsonl",
                         audit_log_path=str(tmp_path / "logs/audit.log"),
                         audit_policy_file=tmp_path / "audit.yaml")
    ensure_namespaces(server, "a", "b")
    return server


def events(server: ServerThread) -> list[Event]:
    """The log so far, each event checked for kube's envelope and then stripped of what
    varies (auditID, timestamps, source address, user agent, the admin's credential id)."""
    path = Path(str(server.config.audit_log_path))
    found = []
    for line in path.read_text().splitlines():
        event = json.loads(line)
        assert list(event)[:3] == ["kind", "apiVersion", "level"], event
        assert event["kind"] == "Event" and event["apiVersion"] == "audit.k8s.io/v1"
        audit_id = event.pop("auditID")
        assert audit_id == "my-request-1" or re.fullmatch(r"[0-9a-f-]{36}", audit_id), event
        received, stage = event.pop("requestReceivedTimestamp"), event.pop("stageTimestamp")
        assert MICRO_TIME.fullmatch(received) and MICRO_TIME.fullmatch(stage), event
        assert received <= stage
        assert event.pop("sourceIPs") == ["127.0.0.1"]
        event.pop("userAgent", None)
        event["user"].pop("extra", None)
        found.append(event)
    return found


def about(found: list[Event], resource: str, verb: str) -> list[Event]:
    return [e for e in found if e.get("objectRef", {}).get("resource") == resource
            and e["verb"] == verb]


ADMIN = {"username": "kubewire-admin", "groups": ["system:masters", "system:authenticated"]}
ALLOWED = {"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""}


@needs_kubectl
def test_an_impersonated_request_shows_both_identities(audited: ServerThread) -> None:
    done = run(audited, "--as=bob", "--as-group=viewers", "get", "pods", "-n", "b")
    assert done.returncode == 0, done.stderr
    listed = about(events(audited), "pods", "list")
    ref = {"resource": "pods", "namespace": "b", "apiVersion": "v1"}
    common = {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata",
              "requestURI": "/api/v1/namespaces/b/pods?limit=500", "verb": "list",
              "user": ADMIN}
    assert listed == [
        {**common, "stage": "RequestReceived", "objectRef": ref},
        {**common, "stage": "ResponseComplete",
         "impersonatedUser": {"username": "bob", "groups": ["viewers", "system:authenticated"]},
         "objectRef": ref, "responseStatus": {"metadata": {}, "code": 200},
         "annotations": ALLOWED},
    ]


def test_refusals_are_audited_with_their_status(audited: ServerThread) -> None:
    bob = _token_of(issue(audited, "bob", token=True))
    # Impersonation refused: no impersonated user, the 403 Status, no authorization decision.
    https(audited, "GET", "/api/v1/namespaces/a/pods", token=bob,
          headers=[("Impersonate-User", "alice")])
    # Authorization refused: the decision and ABAC's reason.
    https(audited, "GET", "/api/v1/namespaces/b/pods/x", token=bob)
    # Authentication failed: one ResponseStarted event, no user (kube's failed-auth audit).
    https(audited, "GET", "/api/v1/namespaces/b/pods?watch=true", token="wrong")
    found = [e for e in events(audited) if e["stage"] != "RequestReceived"][-3:]
    assert found[0]["user"]["username"] == "bob" and "impersonatedUser" not in found[0]
    assert found[0]["responseStatus"] == {
        "metadata": {}, "status": "Failure",
        "message": 'users "alice" is forbidden: User "bob" cannot impersonate resource "users" '
                   'in API group "" at the cluster scope: No policy matched.',
        "reason": "Forbidden", "details": {"name": "alice", "kind": "users"}, "code": 403}
    assert "annotations" not in found[0]
    assert found[1]["annotations"] == {"authorization.k8s.io/decision": "forbid",
                                       "authorization.k8s.io/reason": "No policy matched."}
    assert found[1]["objectRef"] == {"resource": "pods", "namespace": "b", "name": "x",
                                     "apiVersion": "v1"}
    assert found[1]["responseStatus"]["code"] == 403
    assert found[2] == {
        "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata",
        "stage": "ResponseStarted", "requestURI": "/api/v1/namespaces/b/pods?watch=true",
        "verb": "watch", "user": {},
        "objectRef": {"resource": "pods", "namespace": "b", "apiVersion": "v1"},
        "responseStatus": {"metadata": {}, "status": "Failure", "message": "Unauthorized",
                           "reason": "Unauthorized", "code": 401}}


def test_watches_creates_and_policy_levels(audited: ServerThread) -> None:
    admin = (audited.config.data_dir / "pki/admin.crt", audited.config.data_dir / "pki/admin.key")
    reply = https(audited, "GET", "/api/v1/namespaces/a/pods?watch=true&timeoutSeconds=1",
                  cert=admin, headers=[("Audit-ID", "my-request-1")])
    assert reply.status == 200
    body = {"metadata": {"generateName": "p-"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    created = https(audited, "POST", "/api/v1/namespaces/a/pods", cert=admin, body=body)
    assert created.status == 201
    named = {**body, "metadata": {"name": "q"}}
    assert https(audited, "POST", "/api/v1/namespaces/a/pods", cert=admin,
                 body=named).status == 201
    https(audited, "GET", "/healthz")  # level None: not logged
    lines = Path(str(audited.config.audit_log_path)).read_text().splitlines()
    watch = [json.loads(line) for line in lines if '"auditID":"my-request-1"' in line]
    assert [e["stage"] for e in watch] == ["RequestReceived", "ResponseStarted",
                                           "ResponseComplete"]
    assert watch[1]["responseStatus"] == {"metadata": {}, "code": 200}
    assert watch[2]["stageTimestamp"] > watch[1]["stageTimestamp"]
    creates = [e for e in about(events(audited), "pods", "create")
               if e["stage"] == "ResponseComplete"]
    # The name comes from the object sent; a generated name is not known yet.
    assert [e["objectRef"] for e in creates] == [
        {"resource": "pods", "namespace": "a", "apiVersion": "v1"},
        {"resource": "pods", "namespace": "a", "name": "q", "apiVersion": "v1"}]
    assert not [e for e in events(audited) if e["requestURI"].startswith("/healthz")]


def test_kubewire_serve_writes_events_to_stdout_and_refuses_bad_levels(tmp_path: Path) -> None:
    """``-`` is standard output; a policy with a level kube does not know is refused at
    start."""
    (tmp_path / "audit.yaml").write_text(AUDIT_ALL)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    data_dir, port = tmp_path / "served", free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubewire.cli", "serve", *API_ONLY, "--data-dir", str(data_dir),
         "--port",
         str(port), "--audit-log-path", "-", "--audit-policy-file", str(tmp_path / "audit.yaml"),
         # API_ONLY: no cluster components, whose requests would be audited between the test's
         "--log-level", "WARNING"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(b"kubewire ready:")
        served: Any = type("Served", (), {"port": port, "config": type(
            "C", (), {"data_dir": data_dir})})()
        admin = (data_dir / "pki/admin.crt", data_dir / "pki/admin.key")
        assert https(served, "GET", "/api/v1/namespaces", cert=admin).status == 200
        stages = [json.loads(proc.stdout.readline())["stage"] for _ in range(2)]
        assert stages == ["RequestReceived", "ResponseComplete"]
    finally:
        proc.terminate()
        proc.wait(30)
        if proc.stdout is not None:
            proc.stdout.close()
    (tmp_path / "bodies.yaml").write_text(AUDIT_ALL.replace("level: Metadata",
                                                            "level: Everything"))
    done = subprocess.run(
        [sys.executable, "-m", "kubewire.cli", "serve", *API_ONLY, "--data-dir", str(data_dir),
         "--port",
         str(port), "--audit-log-path", str(tmp_path / "a.log"), "--audit-policy-file",
         str(tmp_path / "bodies.yaml")], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 1
    assert ('rules[2].level: Unsupported value: "Everything": supported values: "None", '
            '"Metadata", "Request", "RequestResponse"') in done.stderr
