"""apiregistration.k8s.io/v1 APIServices as kube-apiserver serves them: one local APIService per
served built-in group/version (``onstart``) and per CRD-served group/version (``true``, kept in
step with the CRDs), Available=True reason Local, kube-aggregator's table, ValidateAPIService's
texts for a user's APIService, and a restart that rewrites nothing."""

from __future__ import annotations

import copy
import time
from typing import Any

from tests.integration import kubectl
from tests.integration.custom_kinds import CRDS, GIZMO_CRD, established
from tests.integration.harness import ServerThread
from tests.integration.wire import call, create, get, ok, wait_for, watch

pytestmark = kubectl.needs_kubectl

APISERVICES = "/apis/apiregistration.k8s.io/v1/apiservices"
LABEL = "kube-aggregator.kubernetes.io/automanaged"


def _names(server: ServerThread) -> dict[str, dict[str, Any]]:
    items = get(server, APISERVICES)["items"]
    return {item["metadata"]["name"]: item for item in items}


def _user_apiservice(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": name},
            "spec": {"group": "wardle.example.com", "version": "v1alpha1",
                     "groupPriorityMinimum": 1000, "versionPriority": 15,
                     "service": {"namespace": "wardle", "name": "api"}, **spec}}


def test_kubectl_get_apiservices_lists_the_local_group_versions(server: ServerThread) -> None:
    lines = kubectl.ok(server, "get", "apiservices").splitlines()
    assert lines[0].split() == ["NAME", "SERVICE", "AVAILABLE", "AGE"]
    rows = {line.split()[0]: line.split()[1:3] for line in lines[1:]}
    for name in ("v1.", "v1.apps", "v1.batch", "v2.autoscaling", "v1.autoscaling",
                 "v1.rbac.authorization.k8s.io", "v1.apiextensions.k8s.io"):
        assert rows[name] == ["Local", "True"], name
    # a group kubewire does not serve has none; metrics.k8s.io only where it is served
    assert "v1.admissionregistration.k8s.io" not in rows
    assert "v1beta1.metrics.k8s.io" not in rows
    # sorted by name, as kubectl receives the list
    assert [line.split()[0] for line in lines[1:]] == sorted(rows)


def test_get_one_as_yaml_shows_kubes_fields(server: ServerThread) -> None:
    text = kubectl.ok(server, "get", "apiservice", "v1.apps", "-o", "yaml")
    assert f"    {LABEL}: onstart" in text
    for line in ("  group: apps", "  groupPriorityMinimum: 17800", "  version: v1",
                 "  versionPriority: 15", "    message: Local APIServices are always available",
                 "    reason: Local", '    status: "True"', "    type: Available"):
        assert line in text.splitlines(), line
    core = get(server, f"{APISERVICES}/v1.")
    assert core["spec"] == {"group": "", "version": "v1", "groupPriorityMinimum": 18000,
                            "versionPriority": 1}
    assert get(server, f"{APISERVICES}/v2.autoscaling")["spec"]["versionPriority"] == 30


def test_a_crds_group_version_appears_and_goes_and_a_watch_sees_it(
        server: ServerThread) -> None:
    name = "v1.tests.kubewire.io"
    assert name not in _names(server)
    rv = get(server, APISERVICES)["metadata"]["resourceVersion"]
    crd = copy.deepcopy(GIZMO_CRD)
    crd["spec"]["versions"].append({**crd["spec"]["versions"][0], "name": "v2",
                                    "storage": False})
    with watch(server, APISERVICES, resourceVersion=rv) as stream:
        create(server, CRDS, crd)
        established(server, crd["metadata"]["name"])
        added = stream.events_until(lambda e: e["type"] == "ADDED"
                                    and e["object"]["metadata"]["name"] == name)
        assert added[-1]["object"]["metadata"]["labels"] == {LABEL: "true"}
        found = wait_for(lambda: (_names(server).get(name) or {}).get("status"), 10,
                         "the CRD's APIService to be available")
        assert found["conditions"][0]["reason"] == "Local"
        services = _names(server)
        assert services[name]["spec"] == {"group": "tests.kubewire.io", "version": "v1",
                                          "groupPriorityMinimum": 1000,
                                          "versionPriority": 100}
        assert "v2.tests.kubewire.io" in services
        rows = {line.split()[0]: line.split()[1:3]
                for line in kubectl.ok(server, "get", "apiservices").splitlines()[1:]}
        assert rows[name] == ["Local", "True"]
        ok(call(server, "DELETE", f"{CRDS}/{crd['metadata']['name']}"))
        stream.events_until(lambda e: e["type"] == "DELETED"
                            and e["object"]["metadata"]["name"] == name, timeout=15)
    wait_for(lambda: "v2.tests.kubewire.io" not in _names(server), 10,
             "the CRD's other version's APIService to go")


def test_a_user_apiservice_is_validated_as_kube_does(server: ServerThread) -> None:
    reply = call(server, "POST", APISERVICES, _user_apiservice("wrong"))
    assert reply.status == 422
    assert reply.status_object()["message"] == (
        'APIService.apiregistration.k8s.io "wrong" is invalid: metadata.name: Invalid value: '
        '"wrong": must be `spec.version+"."+spec.group`: "v1alpha1.wardle.example.com"')
    reply = call(server, "POST", APISERVICES, _user_apiservice(
        "v1alpha1.wardle.example.com", groupPriorityMinimum=0, versionPriority=1001))
    assert reply.status_object()["message"] == (
        'APIService.apiregistration.k8s.io "v1alpha1.wardle.example.com" is invalid: '
        "[spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000, "
        "spec.versionPriority: Invalid value: 1001: must be positive and less than 1000]")
    local = _user_apiservice("v1alpha1.wardle.example.com", insecureSkipTLSVerify=True)
    del local["spec"]["service"]
    reply = call(server, "POST", APISERVICES, local)
    assert reply.status_object()["message"] == (
        'APIService.apiregistration.k8s.io "v1alpha1.wardle.example.com" is invalid: '
        "spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have "
        "insecureSkipTLSVerify")
    assert "v1alpha1.wardle.example.com" not in _names(server)
    # a valid one: the port defaults to 443; the user's own is left alone by autoregistration
    made = create(server, APISERVICES, _user_apiservice("v1alpha1.wardle.example.com"))
    assert made["spec"]["service"] == {"namespace": "wardle", "name": "api", "port": 443}
    rows = {line.split()[0]: line.split()[1:3]
            for line in kubectl.ok(server, "get", "apiservices").splitlines()[1:]}
    assert rows["v1alpha1.wardle.example.com"] == ["wardle/api", "Unknown"]
    reply = call(server, "PUT", f"{APISERVICES}/v1alpha1.wardle.example.com/status",
                 {**made, "status": {"conditions": [{"type": "Available", "status": "Maybe"}]}})
    assert reply.status_object()["message"] == (
        'APIService.apiregistration.k8s.io "v1alpha1.wardle.example.com" is invalid: '
        'status.conditions[0].status: Unsupported value: "Maybe": supported values: "True", '
        '"False", "Unknown"')


def test_autoregistration_puts_back_what_it_manages_and_a_restart_rewrites_nothing(
        make_server: Any) -> None:
    server = make_server()
    # a CRD's (``true``) APIService is kept in step all the time
    create(server, CRDS, GIZMO_CRD)
    established(server, GIZMO_CRD["metadata"]["name"])
    crd_service = f"{APISERVICES}/v1.tests.kubewire.io"
    wait_for(lambda: call(server, "GET", crd_service).status == 200, 10, "the CRD's APIService")
    ok(call(server, "PATCH", crd_service, {"spec": {"versionPriority": 7}}))
    wait_for(lambda: get(server, crd_service)["spec"]["versionPriority"] == 100, 10,
             "the autoregistration to put the CRD's spec back")
    # a built-in (``onstart``) one is synced once per start: a change or delete holds until
    # the next start, which puts it back
    ok(call(server, "PATCH", f"{APISERVICES}/v1.batch", {"spec": {"versionPriority": 7}}))
    ok(call(server, "DELETE", f"{APISERVICES}/v1.policy"))
    time.sleep(0.5)  # time enough for a sync that would put them back (asserting absence)
    assert get(server, f"{APISERVICES}/v1.batch")["spec"]["versionPriority"] == 7
    assert "v1.policy" not in _names(server)
    server.restart()
    assert get(server, f"{APISERVICES}/v1.batch")["spec"]["versionPriority"] == 15
    assert _names(server)["v1.policy"]["status"]["conditions"][0]["reason"] == "Local"
    before = {n: o["metadata"]["resourceVersion"] for n, o in _names(server).items()}
    server.restart()
    after = {n: o["metadata"]["resourceVersion"] for n, o in _names(server).items()}
    assert after == before


def test_a_server_serving_metrics_has_its_apiservice(make_server: Any) -> None:
    server = make_server(metrics_api=True)
    found = get(server, f"{APISERVICES}/v1beta1.metrics.k8s.io")
    assert found["spec"] == {"group": "metrics.k8s.io", "version": "v1beta1",
                             "groupPriorityMinimum": 100, "versionPriority": 100}
    assert found["status"]["conditions"][0]["status"] == "True"
