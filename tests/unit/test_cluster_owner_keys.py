"""``owner_keys.OwnerKeys``: which owner a child's change wakes (the ReplicaSet, Deployment,
StatefulSet and DaemonSet controllers' shared ``resolveControllerRef``/``getPodXs``), over a
real informer cache (never started: nothing here talks to a server)."""

from __future__ import annotations

from typing import Any

from kubewire.client import Api, Client
from kubewire.client.config import ClientConfig
from kubewire.client.informers.informer import Informer
from kubewire.cluster.controllers.owner_keys import OwnerKeys

Obj = dict[str, Any]


def _owner(name: str, uid: str, selector: Obj | None, namespace: str = "ns") -> Obj:
    spec: Obj = {} if selector is None else {"selector": selector}
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": namespace, "uid": uid}, "spec": spec}


def _pod(labels: dict[str, str], *refs: Obj, namespace: str = "ns") -> Obj:
    meta: Obj = {"name": "p", "namespace": namespace, "labels": labels}
    if refs:
        meta["ownerReferences"] = list(refs)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta}


def _ref(kind: str, name: str, uid: str, *, controller: bool = True) -> Obj:
    return {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid,
            "controller": controller}


def _keys() -> OwnerKeys:
    client = Client(ClientConfig(server="https://127.0.0.1:1"))
    informer: Informer[Obj] = Informer(Api(dict, client=client, namespace=None,
                                           api_version="apps/v1", kind="ReplicaSet"))
    for owner in (_owner("web", "u-web", {"matchLabels": {"app": "web"}}),
                  _owner("all", "u-all", {}),  # an empty selector adopts nothing
                  _owner("bad", "u-bad", {"matchExpressions": [
                      {"key": "app", "operator": "Bogus", "values": ["web"]}]}),
                  _owner("web2", "u-web2", {"matchExpressions": [
                      {"key": "app", "operator": "In", "values": ["web", "api"]}]}),
                  _owner("web", "u-other-ns", {"matchLabels": {"app": "web"}},
                         namespace="other")):
        informer.cache.upsert(informer.key_of(owner), owner)
    return OwnerKeys(informer, "ReplicaSet")


def test_a_controlled_child_wakes_its_cached_controller_only() -> None:
    keys = _keys()
    pod = _pod({"app": "web"}, _ref("ReplicaSet", "web", "u-web"))
    assert keys.controller(pod) == "ns/web"
    assert keys.wake(pod) == ["ns/web"]  # not the other owners that select it


def test_a_reference_to_another_uid_or_kind_wakes_nothing() -> None:
    keys = _keys()
    recreated = _pod({"app": "web"}, _ref("ReplicaSet", "web", "u-old"))
    assert keys.controller(recreated) is None and keys.wake(recreated) == []
    other_kind = _pod({"app": "web"}, _ref("StatefulSet", "web", "u-web"))
    assert keys.wake(other_kind) == []  # controlled by another kind: no adoption either
    gone = _pod({"app": "web"}, _ref("ReplicaSet", "missing", "u-x"))
    assert keys.wake(gone) == []


def test_an_orphan_wakes_every_owner_of_its_namespace_that_selects_it() -> None:
    keys = _keys()
    orphan = _pod({"app": "web"})
    assert sorted(keys.wake(orphan)) == ["ns/web", "ns/web2"]  # not empty, invalid, other ns
    assert keys.selecting(orphan) == keys.wake(orphan)
    # a non-controller owner reference leaves it an orphan
    owned_loosely = _pod({"app": "api"}, _ref("ReplicaSet", "web", "u-web", controller=False))
    assert keys.wake(owned_loosely) == ["ns/web2"]
    assert keys.wake(_pod({"app": "db"})) == []
