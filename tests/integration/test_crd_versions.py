"""A CRD's versions with the ``None`` conversion strategy, against the real server.

Expectations from kube-apiserver v1.32 (crds.md §4.3, §6; checklist §9.31, 32, 34): objects are
stored in the storage version; a read in any served version is the stored object pruned and
defaulted with the schema of the version it is stored in, its apiVersion rewritten, then
pruned with the reading version's schema; deprecated versions warn on every request; a new
storage version is appended to ``storedVersions`` and old objects keep their encoding until
they are written again.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.test_crds import CRDS, established
from tests.integration.wire import call, create, get, ok, watch

CRD_NAME = "gizmos.example.com"
V1 = "/apis/example.com/v1/namespaces/default/gizmos"
V2 = "/apis/example.com/v2/namespaces/default/gizmos"
V1BETA1 = "/apis/example.com/v1beta1/namespaces/default/gizmos"


def _schema(**properties: Any) -> dict[str, Any]:
    return {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": properties}}}}


GIZMO_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": CRD_NAME},
    "spec": {
        "group": "example.com", "scope": "Namespaced",
        "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
        "versions": [
            {"name": "v1beta1", "served": True, "storage": False, "deprecated": True,
             "schema": _schema(color={"type": "string"})},
            {"name": "v1", "served": True, "storage": True,
             "schema": _schema(color={"type": "string", "default": "blue"},
                               size={"type": "integer"})},
            {"name": "v2", "served": True, "storage": False,
             "schema": _schema(color={"type": "string"}, shape={"type": "string"})},
        ],
    },
}


def install(server: ServerThread, crd: dict[str, Any] = GIZMO_CRD) -> dict[str, Any]:
    create(server, CRDS, crd)
    return established(server, CRD_NAME)


def gizmo(version: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"example.com/{version}", "kind": "Gizmo",
            "metadata": {"name": name}, "spec": spec}


def test_created_in_v1_read_listed_and_watched_in_v2_and_back(server: ServerThread) -> None:
    """§9.32: v2 sees the object with apiVersion v2 and without the fields v2 does not
    declare; v1 still sees them (the stored object keeps them)."""
    install(server)
    stream = watch(server, V2)
    created = create(server, V1, gizmo("v1", "g1", color="red", size=3))
    assert created["apiVersion"] == "example.com/v1" and created["spec"] == {
        "color": "red", "size": 3}
    in_v2 = get(server, f"{V2}/g1")
    assert in_v2["apiVersion"] == "example.com/v2"
    assert in_v2["spec"] == {"color": "red"}
    assert in_v2["metadata"]["uid"] == created["metadata"]["uid"]
    listed = get(server, V2)
    assert listed["apiVersion"] == "example.com/v2" and listed["kind"] == "GizmoList"
    assert [(i["apiVersion"], i["spec"]) for i in listed["items"]] == [
        ("example.com/v2", {"color": "red"})]
    event = stream.next_event(10)
    assert event["type"] == "ADDED"
    assert event["object"]["apiVersion"] == "example.com/v2"
    assert event["object"]["spec"] == {"color": "red"}
    stream.close()
    back = get(server, f"{V1}/g1")
    assert back["apiVersion"] == "example.com/v1" and back["spec"] == {"color": "red",
                                                                        "size": 3}


def test_written_in_v2_stored_in_v1(server: ServerThread) -> None:
    """A v2 write is stored in v1 (v2-only fields pruned by v1's schema); its answer and its
    reads are the stored object read back, defaulted with v1's schema (§4.3: v1's default
    shows through v2, which has none), and watchers of v1 see it in v1."""
    install(server)
    stream = watch(server, V1)
    created = create(server, V2, gizmo("v2", "g2", shape="round"))
    assert created["apiVersion"] == "example.com/v2"
    assert created["spec"] == {"color": "blue"}  # shape: not in v1, so not stored
    assert get(server, f"{V2}/g2")["spec"] == {"color": "blue"}
    assert get(server, f"{V1}/g2")["spec"] == {"color": "blue"}
    event = stream.next_event(10)
    assert event["object"]["apiVersion"] == "example.com/v1"
    assert event["object"]["spec"] == {"color": "blue"}
    stream.close()
    # an update in v2 keeps what only v1 declares? No: v2 never sees it, so a PUT drops it
    create(server, V1, gizmo("v1", "g3", color="red", size=7))
    current = get(server, f"{V2}/g3")
    current["spec"]["color"] = "green"
    updated = ok(call(server, "PUT", f"{V2}/g3", current), 200)
    assert updated["apiVersion"] == "example.com/v2" and updated["spec"] == {"color": "green"}
    assert get(server, f"{V1}/g3")["spec"] == {"color": "green"}


def test_deprecated_version_warns_on_every_request(server: ServerThread) -> None:
    """§9.31: the default text names the newest served, non-deprecated version; a
    ``deprecationWarning`` replaces it; errors get it too."""
    install(server)
    expected = '299 - "example.com/v1beta1 Gizmo is deprecated; use example.com/v2 Gizmo"'
    created = call(server, "POST", V1BETA1, gizmo("v1beta1", "g1", color="red"))
    assert created.status == 201 and created.headers["warning"] == expected
    assert call(server, "GET", V1BETA1).headers["warning"] == expected
    missing = call(server, "GET", f"{V1BETA1}/nope")
    assert missing.status == 404 and missing.headers["warning"] == expected
    stream = watch(server, V1BETA1)
    assert stream.response_headers["warning"] == expected
    stream.close()
    assert "warning" not in call(server, "GET", V1).headers
    done = kubectl.run(server, "get", "gizmos.v1beta1.example.com", "g1", "-o", "name")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "gizmo.example.com/g1\n"
    assert "Warning: example.com/v1beta1 Gizmo is deprecated; use example.com/v2 Gizmo" \
        in done.stderr
    crd = get(server, f"{CRDS}/{CRD_NAME}")
    crd["spec"]["versions"][0]["deprecationWarning"] = "v1beta1 \"gizmos\" go away"
    ok(call(server, "PUT", f"{CRDS}/{CRD_NAME}", crd), 200)

    def own_text() -> bool:
        return call(server, "GET", V1BETA1).headers.get("warning") == \
            '299 - "v1beta1 \\"gizmos\\" go away"'

    _wait(own_text, "the CRD's own deprecation warning")
    done = kubectl.run(server, "get", "gizmos.v1beta1.example.com", "-o", "name")
    assert 'Warning: v1beta1 "gizmos" go away' in done.stderr


def test_storage_version_switch(server: ServerThread) -> None:
    """§9.34 / §6.5: storedVersions grows; objects written before keep their v1 encoding (v1
    reads still show ``size``) until they are written again, then they are v2's."""
    install(server)
    create(server, V1, gizmo("v1", "old", color="red", size=3))
    crd = get(server, f"{CRDS}/{CRD_NAME}")
    assert crd["status"]["storedVersions"] == ["v1"]
    switched = copy.deepcopy(crd)
    for version in switched["spec"]["versions"]:
        version["storage"] = version["name"] == "v2"
    hash_before = _storage_version_hash(server)
    updated = ok(call(server, "PUT", f"{CRDS}/{CRD_NAME}", switched), 200)
    assert updated["status"]["storedVersions"] == ["v1", "v2"]
    _wait(lambda: _storage_version_hash(server) != hash_before,
          "discovery to announce the new storage version")
    create(server, V2, gizmo("v2", "new", shape="square"))
    assert get(server, f"{V2}/new")["spec"] == {"shape": "square"}  # stored in v2 now
    # read in v1: v2 (its stored version) defaults nothing, v1's default is not applied after
    # the conversion, and v1 prunes the shape
    assert get(server, f"{V1}/new")["spec"] == {}
    assert get(server, f"{V1}/old")["spec"] == {"color": "red", "size": 3}  # still v1 bytes
    # an unchanged PUT of an object stored in v1 still rewrites it (kube compares the new v2
    # encoding with the stored bytes): stored in v2 now, its size is gone
    old = get(server, f"{V1}/old")
    rewritten = ok(call(server, "PUT", f"{V1}/old", old), 200)
    assert rewritten["metadata"]["resourceVersion"] != old["metadata"]["resourceVersion"]
    assert get(server, f"{V1}/old")["spec"] == {"color": "red"}
    # stored as it would be stored now: an unchanged PUT writes nothing
    again = get(server, f"{V2}/new")
    same = ok(call(server, "PUT", f"{V2}/new", again), 200)
    assert same["metadata"]["resourceVersion"] == again["metadata"]["resourceVersion"]
    # the old storage version cannot be dropped from spec.versions while it is stored
    dropped = copy.deepcopy(get(server, f"{CRDS}/{CRD_NAME}"))
    dropped["spec"]["versions"] = [v for v in dropped["spec"]["versions"] if v["name"] != "v1"]
    reply = call(server, "PUT", f"{CRDS}/{CRD_NAME}", dropped)
    assert reply.status == 422
    assert 'status.storedVersions[0]: Invalid value: "v1": must appear in spec.versions' in \
        reply.status_object()["message"]


def _storage_version_hash(server: ServerThread) -> str:
    resources = get(server, "/apis/example.com/v2")["resources"]
    return str(next(r for r in resources if r["name"] == "gizmos")["storageVersionHash"])


def _wait(predicate: Any, what: str) -> None:
    from tests.integration.wire import wait_for
    wait_for(predicate, 10, what)
