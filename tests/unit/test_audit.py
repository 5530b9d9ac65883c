"""server/audit.py: kube's audit policy rules and the JSON of its events."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from kubewire.server.access.authn import UserInfo
from kubewire.server.access.authz import Attributes
from kubewire.server.observe.audit import (
    AuditEvent,
    PolicyError,
    RequestConfig,
    event_line,
    parse_policy,
    request_uri,
    response_status,
    source_ips,
    user_agent,
)

ALICE = UserInfo("alice", "", ("dev", "system:authenticated"))
POLICY = """
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: [system:kube-proxy]
- level: None
  userGroups: [robots]
  verbs: [watch]
- level: Metadata
  resources:
  - group: ""
    resources: ["pods/*", "*/scale"]
  - group: apps
    resources: [deployments]
    resourceNames: [web]
  omitStages: [ResponseStarted]
- level: None
  namespaces: [kube-system]
- level: Metadata
  nonResourceURLs: ["/api*", /version]
"""


def _resource(user: UserInfo, verb: str, resource: str, *, sub: str = "", group: str = "",
              namespace: str = "ns", name: str = "") -> Attributes:
    return Attributes(user=user, verb=verb, resource_request=True, namespace=namespace,
                      api_group=group, api_version="v1", resource=resource, subresource=sub,
                      name=name)


def test_rules_match_in_order_as_kubes_checker() -> None:
    policy = parse_policy(POLICY)
    none = RequestConfig("None", frozenset({"RequestReceived"}))
    metadata = RequestConfig("Metadata", frozenset({"RequestReceived", "ResponseStarted"}))
    proxy = UserInfo("system:kube-proxy")
    robot = UserInfo("r2", "", ("robots",))
    assert policy.evaluate(_resource(proxy, "get", "pods", sub="log"), proxy) == none
    assert policy.evaluate(_resource(robot, "watch", "pods", sub="log"), robot) == none
    assert policy.evaluate(_resource(robot, "get", "pods", sub="log"), robot) == metadata
    assert policy.evaluate(_resource(ALICE, "get", "pods"), ALICE) == metadata  # "pods/*"
    assert policy.evaluate(_resource(ALICE, "get", "services"), ALICE) == none
    assert policy.evaluate(_resource(ALICE, "patch", "deployments", sub="scale",
                                     group="apps", name="web"), ALICE) == none  # group ""
    assert policy.evaluate(_resource(ALICE, "patch", "replicationcontrollers", sub="scale"),
                           ALICE) == metadata
    assert policy.evaluate(_resource(ALICE, "get", "deployments", group="apps", name="web"),
                           ALICE) == metadata
    assert policy.evaluate(_resource(ALICE, "get", "deployments", group="apps", name="db"),
                           ALICE) == none
    path = Attributes(user=ALICE, verb="get", path="/apis/apps")
    assert policy.evaluate(path, ALICE).level == "Metadata"
    assert policy.evaluate(Attributes(user=ALICE, verb="get", path="/metrics"),
                           ALICE).level == "None"
    # A request that failed authentication has no user: user and group rules pass it by.
    assert parse_policy(POLICY.replace("users: [system:kube-proxy]", "users: ['*']")).evaluate(
        _resource(ALICE, "get", "pods", sub="log"), None) == metadata


@pytest.mark.parametrize(("text", "message"), [
    ("apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules: [{level: None}]",
     "unknown group version field audit.k8s.io/v1beta1, Kind=Policy in policy"),
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: []",
     "loaded illegal policy with 0 rules"),
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{}]", "rules[0].level: Required value"),
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Loud}]",
     'rules[0].level: Unsupported value: "Loud": supported values: "None", "Metadata", '
     '"Request", "RequestResponse"'),
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Request, "
     "omitManagedFields: sometimes}]",
     "rules[0].omitManagedFields: Invalid value: must be a boolean"),
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, nonResourceURLs: [x*y]}]",
     "[rules[0].nonResourceURLs[0]: Invalid value: \"x*y\": non-resource URL rules must begin "
     "with a '/' character, rules[0].nonResourceURLs[0]: Invalid value: \"x*y\": non-resource "
     "URL wildcards '*' must be the final character of the rule]"),
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [Later]\nrules: [{level: None}]",
     'omitStages[0]: Invalid value: "Later": allowed stages are RequestReceived,ResponseStarted,'
     "ResponseComplete,Panic"),
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, resources: "
     "[{resourceNames: [a]}]}]",
     'rules[0].resources.resourceNames: Invalid value: []string{"a"}: using resourceNames '
     "requires at least one resource"),
])
def test_policies_kube_refuses(text: str, message: str) -> None:
    with pytest.raises(PolicyError) as info:
        parse_policy(text, "p.yaml")
    assert str(info.value) == f"{message}: from file p.yaml"


def test_unknown_fields_are_warned_about_and_the_rest_read() -> None:
    policy = parse_policy("apiVersion: audit.k8s.io/v1\nkind: Policy\n"
                          "rules: [{level: Metadata, namespace: [a]}]")
    assert policy.warnings == ('unknown field "rules[0].namespace"',)
    assert policy.rules[0].namespaces == ()


def test_an_event_line_is_gos_json() -> None:
    received = datetime.datetime(2026, 1, 2, 3, 4, 5, 60, tzinfo=datetime.UTC)
    event = AuditEvent(level="Metadata", audit_id="id-1", request_uri="/api/v1/pods?a=1&b=<",
                       verb="list", user=UserInfo("bob", "u1", ("g",), (("k", ("v",)),)),
                       source_ips=["10.0.0.1"], user_agent="ua", object_ref={"resource": "pods"},
                       received=received)
    event.impersonated_user = UserInfo("alice", "", ("system:authenticated",))
    event.response_status = response_status(200)
    event.authorized(True, "")
    later = received + datetime.timedelta(seconds=1)
    assert event_line(event, "RequestReceived", later) == (
        b'{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"id-1",'
        b'"stage":"RequestReceived","requestURI":"/api/v1/pods?a=1\\u0026b=\\u003c",'
        b'"verb":"list","user":{"username":"bob","uid":"u1","groups":["g"],'
        b'"extra":{"k":["v"]}},"impersonatedUser":{"username":"alice",'
        b'"groups":["system:authenticated"]},"sourceIPs":["10.0.0.1"],"userAgent":"ua",'
        b'"objectRef":{"resource":"pods"},"responseStatus":{"metadata":{},"code":200},'
        b'"requestReceivedTimestamp":"2026-01-02T03:04:05.000060Z",'
        b'"stageTimestamp":"2026-01-02T03:04:05.000060Z",'
        b'"annotations":{"authorization.k8s.io/decision":"allow",'
        b'"authorization.k8s.io/reason":""}}\n')
    assert b'"stageTimestamp":"2026-01-02T03:04:06.000060Z"' in event_line(
        event, "ResponseComplete", later)
    empty = AuditEvent(level="Metadata", audit_id="x", request_uri="/", verb="get", user=None,
                       source_ips=[], user_agent="", object_ref=None, received=received)
    assert b'"verb":"get","user":{},"requestReceivedTimestamp"' in event_line(
        empty, "ResponseStarted", later)


def test_request_facts_as_kube_records_them() -> None:
    assert source_ips("1.2.3.4, junk, ::ffff:5.6.7.8", "9.9.9.9", "127.0.0.1") == [
        "1.2.3.4", "5.6.7.8", "9.9.9.9", "127.0.0.1"]
    assert source_ips("", "127.0.0.1", "127.0.0.1") == ["127.0.0.1"]
    assert source_ips("", "", "::1") == ["::1"]
    assert request_uri("/api/v1/namespaces/a b/pods", "watch=1") == (
        "/api/v1/namespaces/a%20b/pods?watch=1")
    assert request_uri("/apis", "") == "/apis"
    assert user_agent("x" * 1025) == "x" * 1024 + "...TRUNCATED"
    assert response_status(403, {"kind": "Status", "status": "Failure", "message": "m",
                                 "reason": "Forbidden", "details": {"kind": "pods"},
                                 "code": 403}) == {
        "metadata": {}, "status": "Failure", "message": "m", "reason": "Forbidden",
        "details": {"kind": "pods"}, "code": 403}


def test_a_policy_file_that_cannot_be_read_is_refused(tmp_path: Path) -> None:
    from kubewire.server.observe.audit_log import Auditor

    with pytest.raises(PolicyError, match="failed to read file path"):
        Auditor.from_files(str(tmp_path / "audit.log"), tmp_path / "missing.yaml")
    # As kube: a log without a policy (or a policy without a log) records nothing.
    assert Auditor.from_files(str(tmp_path / "audit.log"), None) is None


def test_go_duration_text() -> None:
    from kubewire.server.observe.httplog import go_duration

    assert go_duration(0) == "0s"
    assert go_duration(850e-9) == "850ns"
    assert go_duration(12.5e-6) == "12.5µs"
    assert go_duration(0.001234567) == "1.234567ms"
    assert go_duration(0.2) == "200ms"
    assert go_duration(2.5) == "2.5s"
    assert go_duration(90.25) == "1m30.25s"
    assert go_duration(3600) == "1h0m0s"
    assert go_duration(3601.000000001) == "1h0m1.000000001s"


def test_omit_managed_fields_rule_overrides_policy() -> None:
    from kubewire.server.observe.audit import without_managed_fields

    policy = parse_policy("""
apiVersion: audit.k8s.io/v1
kind: Policy
omitManagedFields: true
rules:
- level: RequestResponse
  resources: [{group: "", resources: [configmaps]}]
  omitManagedFields: false
- level: Request
""")
    assert policy.evaluate(_resource(ALICE, "get", "configmaps"), ALICE) == RequestConfig(
        "RequestResponse", frozenset(), False)
    assert policy.evaluate(_resource(ALICE, "get", "pods"), ALICE) == RequestConfig(
        "Request", frozenset(), True)
    obj = {"kind": "ConfigMap", "metadata": {"name": "a", "managedFields": [{}]}}
    assert without_managed_fields(obj) == {"kind": "ConfigMap", "metadata": {"name": "a"}}
    listed = {"kind": "ConfigMapList", "metadata": {}, "items": [obj, obj]}
    assert without_managed_fields(listed)["items"] == [{"kind": "ConfigMap",
                                                       "metadata": {"name": "a"}}] * 2
    status = {"kind": "Status", "code": 404}
    assert without_managed_fields(status) is status


def test_rotation_names_and_expiry_as_lumberjack() -> None:
    from kubewire.server.observe.log_rotation import Rotation, backup_name, backup_time

    now = datetime.datetime(2026, 11, 25, 23, 6, 21, 123456, tzinfo=datetime.UTC)
    log = Path("/var/log/audit.log")
    name = backup_name(log, now)
    assert name == Path("/var/log/audit-2026-11-25T23-06-21.123.log")
    assert backup_time(log, name) == now.replace(microsecond=123000)
    assert backup_time(log, Path("/var/log/audit.log")) is None
    assert backup_time(log, Path("/var/log/other-2026-11-25T23-06-21.123.log")) is None
    day = datetime.timedelta(days=1)
    backups = [(Path(f"b{i}"), now - i * day) for i in range(5)]
    assert Rotation(max_backups=2).expired(backups, now) == [Path("b2"), Path("b3"), Path("b4")]
    assert Rotation(max_age_days=3).expired(backups, now) == [Path("b4")]
    assert Rotation().expired(backups, now) == []
    assert Rotation().max_bytes == 100 * 1024 * 1024
    assert Rotation(1).needs_rotation(1024 * 1024 - 10, 11)
    assert not Rotation(1).needs_rotation(0, 5 * 1024 * 1024)  # an empty file takes any line
