"""Acceptance (issue 19): a chart's RBAC manifests, rendered as Helm renders them (labels and
annotations on every object), through the real kubectl.

kube's behaviour, which kubewire must share: ``kubectl apply`` creates every object, and a second
apply reports each ``unchanged`` and writes nothing — the aggregated ClusterRole's rules, filled
by the aggregation controller, are not in the manifest nor in its last-applied annotation, so the
three-way patch leaves them alone. ``kubectl apply --server-side`` is idempotent too (the
controller owns ``.rules`` through its own forced apply). ``kubectl delete -f`` removes it all.
The aggregated rules follow the labels of the ClusterRoles they select, and a role labelled
``aggregate-to-view`` adds its rules to kube's default ``view``.

The manifest kube's own documentation once showed, ``rules: []`` on the aggregated role, is a
trap kube springs and kubewire must spring the same way: a client-side re-apply sends the empty
list (``configured``; the controller fills the rules back in), and a server-side apply conflicts
with ``clusterrole-aggregation-controller`` on ``.rules`` (kubernetes/website#56495).
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from tests.integration import kubectl as cli
from tests.integration.harness import ServerThread
from tests.integration.wire import get, wait_for

pytestmark = cli.needs_kubectl
GROUP = "rbac.authorization.k8s.io"
CLUSTER_ROLES = f"/apis/{GROUP}/v1/clusterroles"
AGGREGATE = "demo.example.com/aggregate"
WIDGETS = {"apiGroups": ["demo.example.com"], "resources": ["widgets"],
           "verbs": ["get", "list", "watch"]}
LEASES = {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
          "verbs": ["get", "update"]}


def helm_meta(name: str, namespace: str | None = None,
              labels: dict[str, str] | None = None) -> dict[str, Any]:
    """The metadata ``helm template demo ./demo`` writes: its labels and release annotations."""
    meta: dict[str, Any] = {
        "name": name,
        "labels": {"helm.sh/chart": "demo-0.1.0", "app.kubernetes.io/name": "demo",
                   "app.kubernetes.io/instance": "demo", "app.kubernetes.io/version": "1.16.0",
                   "app.kubernetes.io/managed-by": "Helm", **(labels or {})},
        "annotations": {"meta.helm.sh/release-name": "demo",
                        "meta.helm.sh/release-namespace": "default"}}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def chart(aggregate_rules: list[Any] | None = None) -> str:
    """The chart's objects, one YAML stream; ``aggregate_rules`` set: the aggregated role
    carries that ``rules`` key (kube's old documentation example had ``rules: []``)."""
    aggregate: dict[str, Any] = {
        "apiVersion": f"{GROUP}/v1", "kind": "ClusterRole", "metadata": helm_meta("demo"),
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {AGGREGATE: "true"}}]}}
    if aggregate_rules is not None:
        aggregate["rules"] = aggregate_rules
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": helm_meta("demo", "default")},
        {"apiVersion": f"{GROUP}/v1", "kind": "Role", "metadata": helm_meta("demo", "default"),
         "rules": [{"apiGroups": [""], "resources": ["configmaps", "secrets"],
                    "verbs": ["get", "list", "watch", "create", "update", "patch"]},
                   {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["lock"],
                    "verbs": ["delete"]}]},
        {"apiVersion": f"{GROUP}/v1", "kind": "RoleBinding",
         "metadata": helm_meta("demo", "default"),
         "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "demo"},
         "subjects": [{"kind": "ServiceAccount", "name": "demo", "namespace": "default"}]},
        aggregate,
        {"apiVersion": f"{GROUP}/v1", "kind": "ClusterRole",
         "metadata": helm_meta("demo-leases", labels={AGGREGATE: "true"}), "rules": [LEASES]},
        {"apiVersion": f"{GROUP}/v1", "kind": "ClusterRole",  # extends kube's default "view"
         "metadata": helm_meta("demo-view", labels={
             f"{GROUP}/aggregate-to-view": "true", f"{GROUP}/aggregate-to-edit": "true"}),
         "rules": [WIDGETS]},
        {"apiVersion": f"{GROUP}/v1", "kind": "ClusterRoleBinding",
         "metadata": helm_meta("demo"),
         "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "demo"},
         "subjects": [{"kind": "ServiceAccount", "name": "demo", "namespace": "default"}]},
    ]
    return yaml.safe_dump_all(docs, sort_keys=False)


NAMES = ["serviceaccount/demo", "role.rbac.authorization.k8s.io/demo",
         "rolebinding.rbac.authorization.k8s.io/demo",
         "clusterrole.rbac.authorization.k8s.io/demo",
         "clusterrole.rbac.authorization.k8s.io/demo-leases",
         "clusterrole.rbac.authorization.k8s.io/demo-view",
         "clusterrolebinding.rbac.authorization.k8s.io/demo"]


def rules_of(server: ServerThread, name: str) -> list[dict[str, Any]]:
    return list(get(server, f"{CLUSTER_ROLES}/{name}").get("rules") or [])


def versions(server: ServerThread, manifests: str) -> dict[str, str]:
    out = cli.ok(server, "get", "-f", "-", "-o", "json", stdin=manifests)
    return {f"{item['kind']}/{item['metadata']['name']}": item["metadata"]["resourceVersion"]
            for item in json.loads(out)["items"]}


def aggregated(server: ServerThread) -> None:
    wait_for(lambda: rules_of(server, "demo") == [LEASES], what="demo's rules aggregated")
    wait_for(lambda: WIDGETS in rules_of(server, "view"), what="view extended")


def deleted_cleanly(server: ServerThread, manifests: str) -> None:
    out = cli.ok(server, "delete", "-f", "-", stdin=manifests)
    assert out.splitlines() == ['{} "{}" deleted'.format(*n.split("/")) for n in NAMES]
    gone = cli.run(server, "get", "-f", "-", stdin=manifests)
    assert gone.returncode != 0 and gone.stdout == ""
    assert gone.stderr.count("NotFound") == len(NAMES)
    wait_for(lambda: WIDGETS not in rules_of(server, "view"), what="view without the chart's")


def test_helm_rendered_chart_applies_reapplies_unchanged_and_deletes(
        server: ServerThread) -> None:
    manifests = chart()
    out = cli.ok(server, "apply", "-f", "-", stdin=manifests)
    assert out.splitlines() == [f"{n} created" for n in NAMES]
    aggregated(server)
    assert rules_of(server, "edit").count(WIDGETS) == 1
    before = versions(server, manifests)
    out = cli.ok(server, "apply", "-f", "-", stdin=manifests)
    assert out.splitlines() == [f"{n} unchanged" for n in NAMES]
    assert versions(server, manifests) == before  # nothing written, the controller's rules kept
    assert rules_of(server, "demo") == [LEASES]
    # kubectl diff agrees: nothing to change (exit 0, no output)
    diff = cli.run(server, "diff", "-f", "-", stdin=manifests)
    assert (diff.returncode, diff.stdout) == (0, ""), diff.stderr
    deleted_cleanly(server, manifests)


def test_server_side_apply_is_idempotent(server: ServerThread) -> None:
    manifests = chart()
    out = cli.ok(server, "apply", "--server-side", "-f", "-", stdin=manifests)
    assert out.splitlines() == [f"{n} serverside-applied" for n in NAMES]
    aggregated(server)
    before = versions(server, manifests)
    cli.ok(server, "apply", "--server-side", "-f", "-", stdin=manifests)
    assert versions(server, manifests) == before
    role = get(server, f"{CLUSTER_ROLES}/demo")
    owners = {entry["manager"]: entry for entry in role["metadata"]["managedFields"]}
    assert "f:rules" in owners["clusterrole-aggregation-controller"]["fieldsV1"]
    assert "f:rules" not in owners["kubectl"]["fieldsV1"]
    deleted_cleanly(server, manifests)


def test_aggregated_rules_follow_labels(server: ServerThread) -> None:
    manifests = chart()
    cli.ok(server, "apply", "-f", "-", stdin=manifests)
    aggregated(server)
    cli.ok(server, "label", "clusterrole", "demo-leases", f"{AGGREGATE}-")
    wait_for(lambda: rules_of(server, "demo") == [], what="demo's rules gone with the label")
    cli.ok(server, "label", "clusterrole", "demo-view", f"{AGGREGATE}=true")
    wait_for(lambda: rules_of(server, "demo") == [WIDGETS], what="demo-view's rules added")
    # Re-applying the chart puts the label back (demo-leases configured) and the aggregated
    # role, whose rules the controller rewrote, is still unchanged for kubectl.
    out = cli.ok(server, "apply", "-f", "-", stdin=manifests)
    changed = [line for line in out.splitlines() if not line.endswith(" unchanged")]
    assert changed == ["clusterrole.rbac.authorization.k8s.io/demo-leases configured"]
    wait_for(lambda: rules_of(server, "demo") == [LEASES, WIDGETS], what="both selected")
    cli.ok(server, "delete", "clusterrole", "demo-leases")
    wait_for(lambda: rules_of(server, "demo") == [WIDGETS], what="deleted role's rules gone")


def test_rules_empty_list_on_an_aggregated_role_behaves_as_in_kube(
        server: ServerThread) -> None:
    manifests = chart(aggregate_rules=[])
    out = cli.ok(server, "apply", "-f", "-", stdin=manifests)
    assert out.splitlines() == [f"{n} created" for n in NAMES]
    aggregated(server)
    out = cli.ok(server, "apply", "-f", "-", stdin=manifests)
    aggregate = "clusterrole.rbac.authorization.k8s.io/demo"
    assert out.splitlines() == [f"{n} {'configured' if n == aggregate else 'unchanged'}"
                                for n in NAMES]
    aggregated(server)  # the controller fills them back in
    done = cli.run(server, "apply", "--server-side", "-f", "-", stdin=manifests)
    assert done.returncode == 1
    assert done.stderr.startswith('error: Apply failed with 1 conflict: conflict with '
                                  '"clusterrole-aggregation-controller": .rules\n')
    cli.ok(server, "apply", "--server-side", "--force-conflicts", "-f", "-", stdin=manifests)
    aggregated(server)
    deleted_cleanly(server, manifests)
