"""kube-apiserver's etcd key layout and JSON values (storage/etcd/keys.py), checked against
kube v1.32's table (the team's etcd storage reference, section 1.2) and Go's encoder rules."""

from __future__ import annotations

import pytest

from kubewire.go_json_bytes import GoJSONEncoder
from kubewire.resources import REGISTRY
from kubewire.storage.etcd.keys import EtcdKeys, read_value, stored_value

KEYS = EtcdKeys()


@pytest.mark.parametrize(("key", "etcd_key"), [
    ("core/pods/ns1/p", "/registry/pods/ns1/p"),
    ("core/services/ns1/s", "/registry/services/specs/ns1/s"),
    ("core/endpoints/ns1/s", "/registry/services/endpoints/ns1/s"),
    ("core/nodes/n1", "/registry/minions/n1"),
    ("core/replicationcontrollers/ns1/rc", "/registry/controllers/ns1/rc"),
    ("core/namespaces/ns1", "/registry/namespaces/ns1"),
    ("apps/deployments/ns1/d", "/registry/deployments/ns1/d"),
    ("networking.k8s.io/ingresses/ns1/i", "/registry/ingress/ns1/i"),
    ("events.k8s.io/events/ns1/e", "/registry/events/ns1/e"),
    ("discovery.k8s.io/endpointslices/ns1/x", "/registry/endpointslices/ns1/x"),
    ("coordination.k8s.io/leases/kube-system/l", "/registry/leases/kube-system/l"),
    ("rbac.authorization.k8s.io/clusterroles/admin", "/registry/clusterroles/admin"),
    ("apiextensions.k8s.io/customresourcedefinitions/a.b.io",
     "/registry/apiextensions.k8s.io/customresourcedefinitions/a.b.io"),
    ("gateway.networking.k8s.io/httproutes/ns1/r",
     "/registry/gateway.networking.k8s.io/httproutes/ns1/r"),
    ("example.com/widgets/w1", "/registry/example.com/widgets/w1"),
    ("core/ranges/serviceips", "/registry/ranges/serviceips"),
])
def test_keys_are_where_kube_apiserver_keeps_them(key: str, etcd_key: str) -> None:
    assert KEYS.to_etcd(key) == etcd_key.encode()
    assert KEYS.from_etcd(etcd_key.encode()) == key


def test_every_stored_kind_round_trips_through_the_layout() -> None:
    for resource in REGISTRY.stored():
        key = resource.storage_key("ns1" if resource.namespaced else "", "obj")
        assert KEYS.from_etcd(KEYS.to_etcd(key)) == key, key


@pytest.mark.parametrize("etcd_key", [
    b"/registry/health", b"/registry/ranges", b"/registry/masterleases/10.0.0.1/x/",
    b"compact_rev_key", b"/other/pods/ns/p", b"/registry/pods/ns/"])
def test_keys_that_are_not_objects_map_to_nothing(etcd_key: bytes) -> None:
    found = KEYS.from_etcd(etcd_key)
    assert found is None or (found.count("/") >= 2 and not found.endswith("/"))
    if etcd_key in (b"/registry/health", b"compact_rev_key", b"/other/pods/ns/p",
                    b"/registry/pods/ns/"):
        assert found is None


def test_prefix_is_normalised_as_kube_does() -> None:
    assert EtcdKeys("registry/").to_etcd("core/pods/a/b") == b"/registry/pods/a/b"
    assert EtcdKeys("/a/b/").to_etcd("core/pods/a/b") == b"/a/b/pods/a/b"
    with pytest.raises(ValueError):
        EtcdKeys("/a/../b")


def test_ranges_of_one_kind_keep_key_order_and_others_say_they_do_not() -> None:
    assert KEYS.range_of("core/services/ns1/") == (b"/registry/services/specs/ns1/", True)
    assert KEYS.range_of("core/") == (b"/registry/", False)
    assert KEYS.range_of("") == (b"/registry/", False)


def test_built_in_values_are_go_json_without_resource_version() -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "c", "namespace": "n", "selfLink": "/x",
                        "resourceVersion": "7", "uid": "u"},
           "data": {"html": "<a href='x'>&</a>", "sep": "\u2028"}}
    value = stored_value(obj, custom=False)
    assert value.startswith(b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{')
    assert value.endswith(b"}\n") and value.count(b"\n") == 1
    assert b"resourceVersion" not in value and b"selfLink" not in value
    assert b"\\u003ca href='x'\\u003e\\u0026\\u003c/a\\u003e" in value and b"\\u2028" in value
    assert obj["metadata"]["resourceVersion"] == "7"  # the caller's object is untouched
    back, encoded = read_value(value, 42)
    assert back["metadata"] == {"name": "c", "namespace": "n", "uid": "u",
                                "resourceVersion": "42"}
    assert back["data"] == obj["data"]
    assert encoded == GoJSONEncoder().encode(back)  # escaped as kube's encoder escapes
    assert encoded.startswith(b'{"kind":"ConfigMap","apiVersion":"v1",')  # as stored elsewhere


def test_custom_resource_values_have_every_key_sorted() -> None:
    obj = {"kind": "Widget", "apiVersion": "example.com/v1",
           "metadata": {"name": "w", "uid": "u", "labels": {"z": "1", "a": "2"}},
           "spec": {"size": 1, "color": "red"}}
    value = stored_value(obj, custom=True)
    assert value == (b'{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"labels":'
                     b'{"a":"2","z":"1"},"name":"w","uid":"u"},"spec":{"color":"red",'
                     b'"size":1}}\n')


def test_a_crd_is_stored_as_a_typed_object_and_a_custom_resource_sorted() -> None:
    """A CRD is a typed object in kube (apiextensions-apiserver's struct: kind and apiVersion
    first); only custom resources are unstructured maps."""
    crd_key = "apiextensions.k8s.io/customresourcedefinitions/gizmos.tests.kubewire.io"
    cr_key = "tests.kubewire.io/gizmos/default/g1"
    assert not KEYS.is_custom(crd_key)
    assert KEYS.is_custom(cr_key)
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "gizmos.tests.kubewire.io", "resourceVersion": "5"},
           "spec": {"group": "tests.kubewire.io"}}
    assert stored_value(crd, custom=KEYS.is_custom(crd_key)) == (
        b'{"kind":"CustomResourceDefinition","apiVersion":"apiextensions.k8s.io/v1",'
        b'"metadata":{"name":"gizmos.tests.kubewire.io"},"spec":{"group":"tests.kubewire.io"}}\n')
    gizmo = {"kind": "Gizmo", "apiVersion": "tests.kubewire.io/v1",
             "metadata": {"namespace": "default", "name": "g1"}, "spec": {"size": 1}}
    assert stored_value(gizmo, custom=KEYS.is_custom(cr_key)) == (
        b'{"apiVersion":"tests.kubewire.io/v1","kind":"Gizmo",'
        b'"metadata":{"name":"g1","namespace":"default"},"spec":{"size":1}}\n')


def test_a_stored_value_reads_back_kind_first_as_the_other_stores_hold_it() -> None:
    """A list drops ``{"kind":..,"apiVersion":..,`` from a built-in kind's items by prefix
    (wire/encoding.list_item): a value read back must begin with it, whoever wrote it."""
    for stored in (b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a"}}\n',
                   b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}\n',
                   b'{"metadata":{"name":"a"},"apiVersion":"v1","kind":"ConfigMap"}\n'):
        obj, value = read_value(stored, 7)
        assert value == (b'{"kind":"ConfigMap","apiVersion":"v1",'
                         b'"metadata":{"name":"a","resourceVersion":"7"}}')
        assert list(obj) == ["kind", "apiVersion", "metadata"]
    _, value = read_value(b'{"apiVersion":"tests.kubewire.io/v1","kind":"Gizmo",'
                          b'"metadata":{"name":"g1"},"spec":{"size":1}}\n', 3)
    assert value.startswith(b'{"kind":"Gizmo","apiVersion":"tests.kubewire.io/v1",')
