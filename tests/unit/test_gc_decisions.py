"""The garbage collector's pure decisions (kube ``pkg/controller/garbagecollector``) and the
DELETE finalizers of ``store.go deletionFinalizersForGarbageCollection``."""

from __future__ import annotations

from typing import Any

from kubewire.cluster.controllers import gc_decisions as gc
from kubewire.server.writes.lifecycle import DeleteRequest, gc_finalizers


def owner(uid: str, *finalizers: str, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"uid": uid, "finalizers": list(finalizers)}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


def test_owners_are_solid_dangling_or_waiting() -> None:
    refs = [{"uid": "a"}, {"uid": "b"}, {"uid": "c"}, {"uid": "d"}]
    found = gc.classify(refs, {"a": owner("a"), "b": None,
                               "c": owner("c", "foregroundDeletion", deleting=True),
                               "d": owner("d", "orphan", deleting=True)})
    assert [r["uid"] for r in found.solid] == ["a", "d"]
    assert [r["uid"] for r in found.dangling] == ["b"]
    assert [r["uid"] for r in found.waiting] == ["c"]


def test_deletion_policy() -> None:
    waiting = gc.Classified((), (), ({"uid": "c"},))
    dangling = gc.Classified((), ({"uid": "b"},), ())
    assert gc.deletion_policy(owner("x"), True, waiting) == "Foreground"
    assert gc.deletion_policy(owner("x"), False, waiting) == "Background"
    assert gc.deletion_policy(owner("x", "orphan"), True, dangling) == "Orphan"
    assert gc.deletion_policy(owner("x", "foregroundDeletion"), True, dangling) == "Foreground"


def test_invalid_namespace_message_is_kubes() -> None:
    ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u1"}
    assert gc.invalid_namespace_message(ref, "ns1") == (
        'ownerRef [apps/v1/ReplicaSet, namespace: ns1, name: rs, uid: u1] does not exist in '
        'namespace "ns1"')


def test_refs_match_by_group_not_version() -> None:
    identity = gc.Identity("apps/v1", "ReplicaSet", "ns", "rs", "u1")
    assert gc.ref_matches({"apiVersion": "apps/v1beta2", "kind": "ReplicaSet", "name": "rs",
                           "uid": "u1"}, identity)
    assert not gc.ref_matches({"apiVersion": "v1", "kind": "ReplicaSet", "name": "rs",
                               "uid": "u1"}, identity)


def request(**kw: Any) -> DeleteRequest:
    return DeleteRequest(garbage_collection=True, **kw)


def test_delete_finalizers_follow_the_policy() -> None:
    assert gc_finalizers([], request(propagation_policy="Foreground"), "Delete") == [
        "foregroundDeletion"]
    assert gc_finalizers([], request(propagation_policy="Orphan"), "Delete") == ["orphan"]
    assert gc_finalizers([], request(propagation_policy="Background"), "Delete") is None
    # orphanDependents wins over the object's own finalizers
    assert gc_finalizers(["foregroundDeletion", "x"], request(orphan_dependents=True),
                         "Delete") == ["x", "orphan"]
    # no options: the object's finalizer, then the kind's default
    assert gc_finalizers(["orphan"], request(), "Delete") is None
    assert gc_finalizers([], request(), "Orphan") == ["orphan"]
    assert gc_finalizers([], request(propagation_policy="Foreground"), "Unsupported") is None
    # no collector: nothing added
    assert gc_finalizers([], DeleteRequest(propagation_policy="Orphan"), "Delete") is None
