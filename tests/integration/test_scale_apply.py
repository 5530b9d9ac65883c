"""Server-side apply of a Scale (``PATCH <parent>/<name>/scale``, ``application/apply-patch+yaml``)
over the real wire, for a Deployment and for a custom resource whose CRD keeps its replicas at
another path (``specReplicasPath: .spec.size``).

Expectations from kube-apiserver v1.32: the Scale's field manager decides conflicts on the
parent's entries converted for the Scale (apimachinery ``scalehandler.go``), the parent's entries
come back converted (the applier owning the parent's replicas path, at the parent's apiVersion,
with no time for a new entry, as ``ToParent`` writes it), and ``ScaleREST.Update`` answers the
stored parent's Scale without managedFields. The sequence follows kube's
``test/integration/apiserver/apply/scale_test.go``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.kinds import DEPLOYMENT
from tests.integration.kubectl import needs_kubectl
from tests.integration.test_crds import CRDS, established
from tests.integration.wire import Reply, call, create, get, ok

JSON = dict[str, Any]
APPLY = {"Content-Type": "application/apply-patch+yaml"}
DIALS = "/apis/example.com/v1/namespaces/default/dials"
DIAL_CRD: JSON = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "dials.example.com"},
    "spec": {
        "group": "example.com", "scope": "Namespaced",
        "names": {"plural": "dials", "singular": "dial", "kind": "Dial", "listKind": "DialList"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "subresources": {"status": {}, "scale": {
                "specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size"}},
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {
                    "size": {"type": "integer", "minimum": 0},
                    "color": {"type": "string"}}},
                "status": {"type": "object", "properties": {"size": {"type": "integer"}}}}}},
        }],
    },
}


@dataclass(frozen=True)
class Parent:
    """A parent kind with a scale subresource: where it lives and keeps its replicas."""

    item: str
    api_version: str
    replicas_fields: JSON  # its replicas path as fieldsV1
    replicas_text: str  # and as a conflict names it on the parent

    @property
    def scale(self) -> str:
        return f"{self.item}/scale"

    def applied(self, replicas: int) -> JSON:
        if self.api_version == "apps/v1":
            body = DEPLOYMENT.obj("web", labels={"app": "web"})
            body["spec"]["replicas"] = replicas
            return body
        return {"apiVersion": self.api_version, "kind": "Dial", "metadata": {"name": "web"},
                "spec": {"size": replicas, "color": "red"}}


WEB = Parent(DEPLOYMENT.item("web"), "apps/v1", {"f:spec": {"f:replicas": {}}},
             ".spec.replicas")
DIAL = Parent(f"{DIALS}/web", "example.com/v1", {"f:spec": {"f:size": {}}}, ".spec.size")


def scale_body(replicas: Any, **meta: Any) -> JSON:
    return {"apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": "web", **meta}, "spec": {"replicas": replicas}}


def apply(server: ServerThread, path: str, body: Any, manager: str | None,
          **params: Any) -> Reply:
    payload = body if isinstance(body, bytes) else json.dumps(body).encode()
    query = {"fieldManager": manager} if manager is not None else {}
    return call(server, "PATCH", path, payload, APPLY, params={**query, **params})


def entries(server: ServerThread, parent: Parent) -> dict[str, JSON]:
    """The parent's managedFields by manager (each test's managers have one entry each)."""
    found: list[JSON] = get(server, parent.item)["metadata"]["managedFields"]
    return {entry["manager"]: entry for entry in found}


def owns_replicas(entry: JSON, parent: Parent) -> bool:
    spec = entry["fieldsV1"].get("f:spec", {})
    return bool(set(spec) & set(parent.replicas_fields["f:spec"]))


def replicas_owners(server: ServerThread, parent: Parent) -> set[str]:
    return {m for m, e in entries(server, parent).items() if owns_replicas(e, parent)}


def conflict(message: str, causes: list[tuple[str, str]]) -> JSON:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": "Conflict",
            "details": {"causes": [{"reason": "FieldManagerConflict", "message": m, "field": f}
                                   for m, f in causes]},
            "code": 409}


@pytest.fixture
def parent(request: pytest.FixtureRequest, server: ServerThread) -> Parent:
    chosen: Parent = request.param
    if chosen is DIAL:
        create(server, CRDS, DIAL_CRD)
        established(server, "dials.example.com")
    ok(apply(server, chosen.item, chosen.applied(2), "owner"), 201)
    return chosen


@pytest.mark.parametrize("parent", [WEB, DIAL], ids=["deployment", "custom"], indirect=True)
def test_apply_shares_conflicts_and_forces_the_replicas(server: ServerThread,
                                                        parent: Parent) -> None:
    owner_before = entries(server, parent)["owner"]
    # the same value as the parent's: ownership shared with the parent's applier
    shared = ok(apply(server, parent.scale, scale_body(2), "scaler"), 200)
    assert shared["kind"] == "Scale" and shared["spec"] == {"replicas": 2}
    assert "managedFields" not in shared["metadata"]  # ScaleREST.Update: scaleFrom<Parent>
    assert entries(server, parent) == {
        "owner": owner_before,
        "scaler": {"manager": "scaler", "operation": "Apply", "apiVersion": parent.api_version,
                   "fieldsType": "FieldsV1", "fieldsV1": parent.replicas_fields,
                   "subresource": "scale"}}

    # another value by a third manager: both owners conflict, on the Scale's path
    before = get(server, parent.item)
    refused = apply(server, parent.scale, scale_body(5), "other")
    assert refused.json == conflict(
        'Apply failed with 2 conflicts: conflicts with "owner":\n- .spec.replicas\n'
        'conflicts with "scaler" with subresource "scale":\n- .spec.replicas',
        [('conflict with "owner"', ".spec.replicas"),
         ('conflict with "scaler" with subresource "scale"', ".spec.replicas")])
    assert get(server, parent.item) == before

    # force: the ownership moves to the applier; the owner keeps its other fields
    forced = ok(apply(server, parent.scale, scale_body(5), "other", force="true"), 200)
    assert forced["spec"] == {"replicas": 5}
    stored = get(server, parent.item)
    assert forced["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert replicas_owners(server, parent) == {"other"}
    after = entries(server, parent)
    assert set(after) == {"owner", "other"}  # scaler owned nothing else: its entry is gone
    assert after["owner"]["fieldsV1"]["f:spec"] == {
        k: v for k, v in owner_before["fieldsV1"]["f:spec"].items()
        if k not in parent.replicas_fields["f:spec"]}
    assert after["other"]["apiVersion"] == parent.api_version

    # the parent's applier now conflicts with the Scale's, named with its subresource
    again = apply(server, parent.item, parent.applied(2), "owner")
    assert again.json == conflict(
        f'Apply failed with 1 conflict: conflict with "other" with subresource "scale": '
        f"{parent.replicas_text}",
        [('conflict with "other" with subresource "scale"', parent.replicas_text)])

    # an update of the Scale takes the replicas from every applier (an Update entry, which
    # ToParent makes with no time)
    ok(call(server, "PATCH", parent.scale, {"spec": {"replicas": 3}},
            params={"fieldManager": "hpa"}), 200)
    assert replicas_owners(server, parent) == {"hpa"}
    assert entries(server, parent)["hpa"] == {
        "manager": "hpa", "operation": "Update", "apiVersion": parent.api_version,
        "fieldsType": "FieldsV1", "fieldsV1": parent.replicas_fields, "subresource": "scale"}
    assert get(server, parent.scale)["spec"] == {"replicas": 3}
    # a PUT of 0: the typed Scale omits a zero spec.replicas, so the field is removed and
    # nobody owns it after (structured-merge-diff's Update: removed fields leave every owner)
    put = {**get(server, parent.scale), "spec": {"replicas": 0}}
    ok(call(server, "PUT", parent.scale, put, params={"fieldManager": "zero"}), 200)
    field = next(iter(parent.replicas_fields["f:spec"])).removeprefix("f:")
    assert get(server, parent.item)["spec"][field] == 0
    assert get(server, parent.scale)["spec"] == {}
    assert replicas_owners(server, parent) == set()
    assert set(entries(server, parent)) == {"owner"}


def test_apply_writes_only_the_replicas_back(server: ServerThread) -> None:
    """kube applies the whole Scale, but ``scaleUpdatedObjectInfo`` copies back only
    ``spec.replicas``, and ``ToParent`` only the ownership of the replicas."""
    ok(apply(server, WEB.item, WEB.applied(2), "owner"), 201)
    before = get(server, WEB.item)
    dry = ok(apply(server, WEB.scale, scale_body(6), "scaler", force="true", dryRun="All"), 200)
    assert dry["spec"] == {"replicas": 6}
    assert get(server, WEB.item) == before
    body = {**scale_body(4, labels={"tier": "web"}), "status": {"replicas": 42}}
    scaled = ok(apply(server, WEB.scale, body, "scaler", force="true"), 200)
    assert scaled["spec"] == {"replicas": 4} and scaled["status"]["replicas"] == 0
    stored = get(server, WEB.item)
    assert stored["spec"]["replicas"] == 4
    assert stored["metadata"]["labels"] == before["metadata"]["labels"]
    assert stored["metadata"]["generation"] == before["metadata"]["generation"] + 1
    assert entries(server, WEB)["scaler"]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}
    # an apply with no replicas of a Scale whose replicas it never owned changes nothing
    ok(apply(server, WEB.scale, {**scale_body(4), "spec": {}}, "labeller"), 200)
    assert get(server, WEB.item) == stored


def test_bad_apply_bodies_get_kubes_status(server: ServerThread) -> None:
    missing = apply(server, WEB.scale, scale_body(3), "scaler")
    assert missing.status == 404
    assert missing.status_object()["message"] == 'deployments.apps "web" not found'
    ok(apply(server, WEB.item, WEB.applied(2), "owner"), 201)
    before = get(server, WEB.item)
    rv = before["metadata"]["resourceVersion"]

    def refused(body: Any, manager: str | None = "scaler", **params: Any) -> tuple[int, str]:
        reply = apply(server, WEB.scale, body, manager, **params)
        return reply.status, reply.status_object()["message"]

    assert refused(scale_body(2), None) == (
        422, 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is '
        "required for apply patch")
    assert refused(WEB.applied(2)) == (400, "invalid object type: apps/v1, Kind=Deployment")
    assert refused(b"[1]") == (
        400, "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot "
        "unmarshal array into Go value of type map[string]interface {}")
    assert refused(b"a: b: c") == (
        400, "error decoding YAML: error converting YAML to JSON: mapping values are not "
        'allowed in this context in "<byte string>", line 1, column 5')
    assert refused(scale_body(2, managedFields=[])) == (
        400, "metadata.managedFields must be nil")
    assert refused(scale_body(2, name="other")) == (
        400, "the name of the object (other) does not match the name on the URL (web)")
    assert refused(scale_body("three")) == (
        400, "failed to create typed patch object (/web; autoscaling/v1, Kind=Scale): "
        ".spec.replicas: expected numeric (int or float), got string")
    assert refused(scale_body(-1), force="true") == (
        422, 'Scale.autoscaling "web" is invalid: spec.replicas: Invalid value: -1: must be '
        "greater than or equal to 0")
    assert refused(scale_body(2, resourceVersion=str(int(rv) - 1))) == (
        409, 'Operation cannot be fulfilled on deployments.apps "web": the object has been '
        "modified; please apply your changes to the latest version and try again")
    assert get(server, WEB.item) == before


@needs_kubectl
def test_kubectl_apply_subresource_scale(server: ServerThread, tmp_path: Path) -> None:
    """kubectl 1.32 has ``apply --server-side --subresource=scale``, but maps the manifest's
    kind to the resource it sends to: a Scale manifest maps to nothing (kubectl's own error),
    and the parent's manifest reaches the server, which wants a Scale (kube's 400)."""
    ok(apply(server, WEB.item, WEB.applied(2), "owner"), 201)
    manifest = tmp_path / "web.yaml"
    manifest.write_text(yaml.safe_dump(WEB.applied(3)))
    done = kubectl.run(server, "apply", "--server-side", "--subresource=scale",
                       "--field-manager=k", "-f", str(manifest))
    assert done.returncode == 1
    assert done.stderr == "Error from server (BadRequest): invalid object type: apps/v1, " \
                          "Kind=Deployment\n"
    assert get(server, WEB.item)["spec"]["replicas"] == 2


def test_an_updater_of_the_parent_conflicts_under_the_scales_version(server: ServerThread) -> None:
    """An updater's identity carries its apiVersion, which the Scale's view of its entry is
    (``ToSubresource``): kube names it ``using autoscaling/v1``."""
    ok(call(server, "POST", DEPLOYMENT.collection(), WEB.applied(2),
            params={"fieldManager": "creator"}), 201)
    refused = apply(server, WEB.scale, scale_body(3), "scaler")
    assert refused.json == conflict(
        'Apply failed with 1 conflict: conflict with "creator" using autoscaling/v1: '
        ".spec.replicas", [('conflict with "creator" using autoscaling/v1', ".spec.replicas")])
    ok(apply(server, WEB.scale, scale_body(3), "scaler", force="true"), 200)
    assert replicas_owners(server, WEB) == {"scaler"}
    assert entries(server, WEB)["creator"]["operation"] == "Update"

