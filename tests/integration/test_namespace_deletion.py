"""Namespace deletion as a cluster does it (objects-and-clients.md §1.9, controllers.md §9): the
DELETE marks the namespace Terminating and returns; the namespace controller empties it a moment
later, records its conditions, removes the ``kubernetes`` finalizer through ``/finalize`` and the
namespace disappears.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.kinds import CONFIG_MAP, NAMESPACE, POD, SERVICE
from tests.integration.wire import (
    call,
    create,
    get,
    list_rv,
    ok,
    types_and_names,
    wait_for,
    watch,
)

MANIFEST = """\
apiVersion: v1
kind: Namespace
metadata:
  name: shop
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: shop
data:
  color: blue
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
spec:
  ports:
  - port: 80
"""

OK_CONDITIONS = [
    ("NamespaceDeletionDiscoveryFailure", "False", "ResourcesDiscovered",
     "All resources successfully discovered"),
    ("NamespaceDeletionGroupVersionParsingFailure", "False", "ParsedGroupVersions",
     "All legacy kube types successfully parsed"),
    ("NamespaceDeletionContentFailure", "False", "ContentDeleted",
     "All content successfully deleted, may be waiting on finalization"),
    ("NamespaceContentRemaining", "False", "ContentRemoved", "All content successfully removed"),
    ("NamespaceFinalizersRemaining", "False", "ContentHasNoFinalizers",
     "All content-preserving finalizers finished"),
]


def conditions_of(obj: dict) -> list[tuple[str, str, str, str]]:
    return [(c["type"], c["status"], c["reason"], c["message"])
            for c in obj.get("status", {}).get("conditions", [])]


@kubectl.needs_kubectl
def test_kubectl_delete_f_with_the_namespace_first_succeeds(server: ServerThread,
                                                             tmp_path: Path) -> None:
    manifest = tmp_path / "shop.yaml"
    manifest.write_text(MANIFEST)
    kubectl.ok(server, "apply", "-f", str(manifest))
    done = kubectl.run(server, "delete", "-f", str(manifest))
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert done.stdout.splitlines() == ['namespace "shop" deleted',
                                        'configmap "settings" deleted', 'service "web" deleted']
    wait_for(lambda: call(server, "GET", NAMESPACE.item("shop")).status == 404,
             what="the namespace to go")


def test_namespace_goes_terminating_then_conditions_then_deleted(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server(namespace_deletion_delay_s=0.5)
    create(server, NAMESPACE.collection(), NAMESPACE.obj("doomed"))
    create(server, CONFIG_MAP.collection("doomed"), CONFIG_MAP.obj("c"))
    rv = list_rv(server, NAMESPACE.collection())
    with watch(server, NAMESPACE.collection(), resourceVersion=rv,
               fieldSelector="metadata.name=doomed") as namespaces, \
            watch(server, CONFIG_MAP.collection("doomed"), resourceVersion=rv) as maps:
        started = time.monotonic()
        answer = ok(call(server, "DELETE", NAMESPACE.item("doomed")), 200)
        assert answer["status"] == {"phase": "Terminating"}
        assert answer["spec"]["finalizers"] == ["kubernetes"]
        assert answer["metadata"]["deletionTimestamp"]
        # The controller waits: the content is still there right after the DELETE.
        assert get(server, CONFIG_MAP.item("c", "doomed"))["metadata"]["name"] == "c"
        events = namespaces.events_until(lambda e: e["type"] == "DELETED", timeout=15)
        assert time.monotonic() - started >= 0.5
        assert [e["type"] for e in events] == ["MODIFIED", "MODIFIED", "DELETED"]
        terminating, recorded, deleted = (e["object"] for e in events)
        assert terminating["status"] == {"phase": "Terminating"}
        assert recorded["status"]["phase"] == "Terminating"
        assert conditions_of(recorded) == OK_CONDITIONS
        assert recorded["spec"]["finalizers"] == ["kubernetes"]
        # the finalize update removed it: its DELETED carries the object as it was stored
        assert conditions_of(deleted) == OK_CONDITIONS
        assert types_and_names(maps.events_until(lambda e: e["type"] == "DELETED")) == [
            ("DELETED", "c")]
    assert call(server, "GET", NAMESPACE.item("doomed")).status == 404


def test_conditions_name_what_remains_and_its_finalizers(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server(namespace_deletion_delay_s=0)
    create(server, NAMESPACE.collection(), NAMESPACE.obj("held"))
    create(server, SERVICE.collection("held"), SERVICE.obj("s", finalizers=["example.com/f"]))
    create(server, CONFIG_MAP.collection("held"),
           CONFIG_MAP.obj("c", finalizers=["example.com/f", "example.com/g"]))
    ok(call(server, "DELETE", NAMESPACE.item("held")), 200)

    def remaining() -> list[tuple[str, str, str, str]] | None:
        found = conditions_of(get(server, NAMESPACE.item("held")))
        return found if any(c[1] == "True" for c in found) else None

    found = wait_for(remaining, what="the remaining-content conditions")
    assert found[:3] == OK_CONDITIONS[:3]
    assert found[3:] == [
        ("NamespaceContentRemaining", "True", "SomeResourcesRemain",
         "Some resources are remaining: configmaps. has 1 resource instances, "
         "services. has 1 resource instances"),
        ("NamespaceFinalizersRemaining", "True", "SomeFinalizersRemain",
         "Some content in the namespace has finalizers remaining: example.com/f in 2 resource "
         "instances, example.com/g in 1 resource instances")]
    # Creating in a Terminating namespace: NamespaceLifecycle admission's 403.
    late = call(server, "POST", POD.collection("held"), POD.obj("late"))
    assert late.status == 403
    assert late.json["message"] == ('pods "late" is forbidden: unable to create new content in '
                                      "namespace held because it is being terminated")
    # admission runs before the name is generated and before validation: a generateName
    # create is named by its prefix, and an invalid object gets the same 403
    generated = {"metadata": {"generateName": "gen-"}, "data": {"bad key!": "x"}}
    refused = call(server, "POST", CONFIG_MAP.collection("held"), generated)
    assert (refused.status, refused.json["message"]) == (
        403, 'configmaps "gen-" is forbidden: unable to create new content in namespace held '
        "because it is being terminated")
    for kind, name in ((SERVICE, "s"), (CONFIG_MAP, "c")):
        ok(call(server, "PATCH", kind.item(name, "held"),
                [{"op": "remove", "path": "/metadata/finalizers"}]), 200)
    wait_for(lambda: call(server, "GET", NAMESPACE.item("held")).status == 404,
             what="the namespace to go")


def test_finalize_subresource_removes_the_namespace(
        make_server: Callable[..., ServerThread]) -> None:
    """What the controller does, done by a client: a PUT to ``/finalize`` without the token."""
    server = make_server(namespace_deletion_delay_s=3600)
    create(server, NAMESPACE.collection(), NAMESPACE.obj("manual"))
    marked = ok(call(server, "DELETE", NAMESPACE.item("manual")), 200)
    # the main endpoint cannot change spec.finalizers
    same = dict(marked, spec={"finalizers": []})
    kept = ok(call(server, "PUT", NAMESPACE.item("manual"), same), 200)
    assert kept["spec"]["finalizers"] == ["kubernetes"]
    done = ok(call(server, "PUT", NAMESPACE.item("manual") + "/finalize",
                   dict(kept, spec={"finalizers": []})), 200)
    assert done["metadata"]["name"] == "manual"
    assert call(server, "GET", NAMESPACE.item("manual")).status == 404


def test_a_create_in_a_missing_namespace_is_404_before_any_validation(
        make_server: Callable[..., ServerThread]) -> None:
    """kube's create handler runs mutating admission (NamespaceLifecycle first) before it
    validates: an invalid object in a namespace that does not exist gets the namespace's 404."""
    server = make_server()
    invalid = {"metadata": {"name": "Not_A_Name"}, "data": {"bad key!": "x"}}
    missing = call(server, "POST", CONFIG_MAP.collection("nope"), invalid)
    assert (missing.status, missing.json["message"]) == (404, 'namespaces "nope" not found')
    present = call(server, "POST", CONFIG_MAP.collection("default"), invalid)
    assert present.status == 422  # where the namespace exists, validation speaks
    # an object with no name at all: the same order, and never a 500
    nameless = {"metadata": {}, "data": {"k": "v"}}
    assert call(server, "POST", CONFIG_MAP.collection("nope"), nameless).status == 404
    unnamed = call(server, "POST", CONFIG_MAP.collection("default"), nameless)
    assert unnamed.status == 422
    assert "name or generateName is required" in unnamed.json["message"]
