"""The local APIServices' pure rules (server/controllers/apiservice_rules) and their table cells:
what autoregistration wants, what it writes to get there, and the Available condition."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kubewire.server.controllers import apiservice_rules as rules
from kubewire.server.tables.apiservice_cells import apiservice_available, apiservice_service

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _crd(group: str, *versions: tuple[str, bool]) -> dict[str, Any]:
    return {"spec": {"group": group,
                     "versions": [{"name": n, "served": s} for n, s in versions]}}


def test_built_ins_with_a_priority_and_crd_versions_that_are_served() -> None:
    desired = rules.desired_apiservices(
        [("", "v1"), ("apps", "v1"), ("autoscaling", "v2"), ("example.com", "v9"),
         ("metrics.k8s.io", "v1beta1")],
        [_crd("tests.io", ("v1", True), ("v2", False))])
    assert sorted(desired) == ["v1.", "v1.apps", "v1.tests.io", "v1beta1.metrics.k8s.io",
                               "v2.autoscaling"]
    assert desired["v1."]["spec"] == {"group": "", "version": "v1",
                                      "groupPriorityMinimum": 18000, "versionPriority": 1}
    assert desired["v2.autoscaling"]["spec"]["versionPriority"] == 30
    assert desired["v1.tests.io"]["metadata"]["labels"] == {rules.AUTOMANAGED_LABEL: "true"}
    assert desired["v1.apps"]["metadata"]["labels"] == {rules.AUTOMANAGED_LABEL: "onstart"}
    assert "service" not in desired["v1beta1.metrics.k8s.io"]["spec"]


def test_plan_creates_puts_back_deletes_and_leaves_the_users_alone() -> None:
    desired = rules.desired_apiservices([("apps", "v1"), ("batch", "v1")], [])
    changed = {**desired["v1.batch"], "spec": {**desired["v1.batch"]["spec"],
                                                "versionPriority": 7}}
    gone = rules.local_apiservice("old.io", "v1", (1000, 100), rules.SYNCED)
    users = {"metadata": {"name": "v1.users.io"}, "spec": {"group": "users.io"}}
    todo = rules.plan(desired, {"v1.batch": changed, "v1.old.io": gone, "v1.users.io": users})
    assert [o["metadata"]["name"] for o in todo.create] == ["v1.apps"]
    assert [o["metadata"]["name"] for o in todo.update] == ["v1.batch"]
    assert todo.delete == ("v1.old.io",)
    # in step: nothing to write (a restart rewrites nothing)
    assert rules.plan(desired, desired) == rules.Plan((), (), ())
    # onstart ones are synced once per start: once synced, a change or a delete holds
    synced = rules.plan(desired, {"v1.batch": changed}, synced={"v1.apps", "v1.batch"})
    assert synced == rules.Plan((), (), ())


def test_the_available_condition_of_a_local_apiservice() -> None:
    obj = rules.local_apiservice("apps", "v1", (17800, 15), rules.ONSTART)
    assert rules.needs_local_status(obj)
    done = rules.with_local_status(obj, "2026-01-01T00:00:00Z")
    assert done["status"]["conditions"] == [{
        "type": "Available", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z",
        "reason": "Local", "message": "Local APIServices are always available"}]
    assert not rules.needs_local_status(done)
    remote = {"spec": {"service": {"namespace": "a", "name": "b"}}}
    assert not rules.needs_local_status(remote)


def test_table_cells_as_kube_aggregator_prints_them() -> None:
    assert apiservice_service(None, NOW) == "Local"
    assert apiservice_service({"namespace": "kube-system", "name": "m"}, NOW) == "kube-system/m"
    assert apiservice_available({}, NOW) == "Unknown"
    assert apiservice_available({"conditions": [{"type": "Available", "status": "True"}]},
                                NOW) == "True"
    assert apiservice_available({"conditions": [{"type": "Available", "status": "False",
                                                 "reason": "ServiceNotFound"}]},
                                NOW) == "False (ServiceNotFound)"
