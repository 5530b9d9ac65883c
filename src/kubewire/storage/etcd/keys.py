"""kubewire's store keys <-> kube-apiserver's etcd keys, and kube's JSON values (pure).

A kubewire key is ``<group>/<plural>/[<namespace>/]<name>`` (``core`` for the core group). In
etcd, kube-apiserver v1.32 keeps an object at ``<prefix>/<resource prefix>/[<ns>/]<name>``,
where the resource prefix of a built-in kind is its plural without the group, or a special one
(``SPECIAL``: services under ``services/specs``, nodes under ``minions``, ...), and that of a kind
served by the apiextensions server (CRDs, custom resources) is ``<group>/<plural>``
(kubernetes ``pkg/kubeapiserver/default_storage_factory_builder.go``
``SpecialDefaultResourcePrefixes``; apiserver ``pkg/server/storage/storage_factory.go``
``ResourcePrefix``; ``SimpleStorageFactory`` for apiextensions). The two kinds of events share
``events`` (kube's cohabiting resources; kubewire stores both under ``events.k8s.io/events``).
The mapping keeps everything after the kind's two segments, so key order inside one kind is the
same in both spaces.

Values: kube-apiserver with ``--storage-media-type application/json`` stores Go's
``json.Encoder`` output: ``kind`` and ``apiVersion`` first, no ``metadata.resourceVersion``
(the revision is etcd's ``mod_revision``) and no ``selfLink``, ``<``, ``>`` and ``&`` escaped,
a ``\\n`` at the end; custom resources (unstructured maps; a CRD itself is typed) with every
object's keys sorted.
``stored_value`` writes that form; ``read_value`` turns it back into what kubewire's stores
hand out (``kind`` and ``apiVersion`` first, ``resourceVersion`` last in metadata).
Written by hand: a table of kube's names and a few byte rules, no library holds them.
"""

from __future__ import annotations

from typing import Any

import msgspec

from kubewire.go_json_bytes import GoJSONEncoder

__all__ = ["BUILTIN_RESOURCES", "SPECIAL", "EtcdKeys", "read_value", "stored_value"]

# kube-apiserver v1.32's built-in stored resources: kubewire id -> resource prefix in etcd.
# (Resources of these groups are keyed by plural alone; the rest by <group>/<plural>.)
_PLAIN: dict[str, tuple[str, ...]] = {
    "core": ("pods", "namespaces", "configmaps", "secrets", "serviceaccounts",
             "persistentvolumeclaims", "persistentvolumes", "podtemplates", "limitranges",
             "resourcequotas"),
    "apps": ("deployments", "replicasets", "statefulsets", "daemonsets",
             "controllerrevisions"),
    "batch": ("jobs", "cronjobs"),
    "autoscaling": ("horizontalpodautoscalers",),
    "policy": ("poddisruptionbudgets",),
    "networking.k8s.io": ("networkpolicies", "ingressclasses", "ipaddresses", "servicecidrs"),
    "discovery.k8s.io": ("endpointslices",),
    "coordination.k8s.io": ("leases", "leasecandidates"),
    "rbac.authorization.k8s.io": ("roles", "rolebindings", "clusterroles",
                                  "clusterrolebindings"),
    "storage.k8s.io": ("storageclasses", "csidrivers", "csinodes", "volumeattachments",
                       "csistoragecapacities", "volumeattributesclasses"),
    "scheduling.k8s.io": ("priorityclasses",),
    "node.k8s.io": ("runtimeclasses",),
    "certificates.k8s.io": ("certificatesigningrequests", "clustertrustbundles"),
    "admissionregistration.k8s.io": ("validatingwebhookconfigurations",
                                     "mutatingwebhookconfigurations",
                                     "validatingadmissionpolicies",
                                     "validatingadmissionpolicybindings"),
    "flowcontrol.apiserver.k8s.io": ("flowschemas", "prioritylevelconfigurations"),
    "resource.k8s.io": ("resourceclaims", "resourceclaimtemplates", "deviceclasses",
                        "resourceslices"),
    "internal.apiserver.k8s.io": ("storageversions",),
    "storagemigration.k8s.io": ("storageversionmigrations",),
}
SPECIAL: dict[str, str] = {
    "core/services": "services/specs",
    "core/endpoints": "services/endpoints",
    "core/nodes": "minions",
    "core/replicationcontrollers": "controllers",
    "networking.k8s.io/ingresses": "ingress",
    "events.k8s.io/events": "events",
    # not API objects: kube's allocator bitmaps (``/registry/ranges/serviceips``,
    # ``servicenodeports``), which kubewire keeps as ``core/ranges/<name>``
    "core/ranges": "ranges",
    # kube-apiserver replicas' registrations (``/registry/masterleases/...``)
    "core/masterleases": "masterleases",
}
BUILTIN_RESOURCES: dict[str, str] = {
    **{f"{group}/{plural}": plural for group, plurals in _PLAIN.items() for plural in plurals},
    **SPECIAL,
    "core/events": "events",  # cohabits with events.k8s.io/events, which kubewire keys
}
_CRDS = "apiextensions.k8s.io/customresourcedefinitions"
_REVERSE: dict[str, str] = {etcd: kw for kw, etcd in BUILTIN_RESOURCES.items()
                            if kw != "core/events"}
# the multi-segment resource prefixes, matched before the first segment alone
_REVERSE_TWO = {etcd: kw for etcd, kw in _REVERSE.items() if "/" in etcd}


def _kind_of(key: str) -> tuple[str, str] | None:
    """(kind id, rest) of a kubewire key or prefix: ``core/pods/ns/a`` -> (``core/pods``,
    ``/ns/a``); None when it does not name a kind yet (``""``, ``core/``, ``core``)."""
    first = key.find("/")
    if first < 0:
        return None
    second = key.find("/", first + 1)
    if second < 0:
        return None
    return key[:second], key[second:]


class EtcdKeys:
    """The mapping under one ``--etcd-prefix`` (normalised as kube does: a leading ``/``, no
    trailing one; keys get a ``/`` after it)."""

    def __init__(self, prefix: str = "/registry") -> None:
        parts = [p for p in prefix.split("/") if p]
        if any(p in (".", "..") for p in parts):
            raise ValueError(f"invalid etcd prefix: {prefix!r}")
        self.prefix = "/" + "/".join(parts)
        self.root = (self.prefix.rstrip("/") + "/").encode()  # every kubewire key is under it

    def etcd_kind(self, kind_id: str) -> str:
        """``core/pods`` -> ``pods``; a kind kube does not build in -> ``<group>/<plural>``."""
        return BUILTIN_RESOURCES.get(kind_id, kind_id)

    def is_custom(self, key: str) -> bool:
        """True for keys kube keeps as unstructured maps: custom resources. A CRD itself is a
        typed object in kube (apiextensions-apiserver's ``CustomResourceDefinition`` struct),
        stored ``kind`` and ``apiVersion`` first like a built-in kind."""
        kind = _kind_of(key)
        return kind is not None and kind[0] not in BUILTIN_RESOURCES and kind[0] != _CRDS

    def to_etcd(self, key: str) -> bytes:
        """The etcd key (or key prefix) of a kubewire key that names a kind."""
        kind = _kind_of(key)
        if kind is None:
            raise ValueError(f"not a key of a kind: {key!r}")
        kind_id, rest = kind
        return self.root + (self.etcd_kind(kind_id) + rest).encode()

    def from_etcd(self, etcd_key: bytes) -> str | None:
        """The kubewire key of an etcd key, or None for keys that are not objects of a kind
        (outside the prefix, ``<prefix>/health``, ``<prefix>/ranges/serviceips``, ...)."""
        if not etcd_key.startswith(self.root):
            return None
        rest = etcd_key[len(self.root):].decode("utf-8", "surrogateescape")
        parts = rest.split("/")
        if len(parts) >= 3 and f"{parts[0]}/{parts[1]}" in _REVERSE_TWO:
            kind_id, tail = _REVERSE_TWO[f"{parts[0]}/{parts[1]}"], parts[2:]
        elif parts[0] in _REVERSE:
            kind_id, tail = _REVERSE[parts[0]], parts[1:]
        elif len(parts) >= 3:
            kind_id, tail = f"{parts[0]}/{parts[1]}", parts[2:]
        else:
            return None
        if not tail or not all(tail):
            return None
        return kind_id + "/" + "/".join(tail)

    def range_of(self, prefix: str) -> tuple[bytes, bool]:
        """The etcd key prefix holding every kubewire key under ``prefix``, and whether it
        holds only those in the same order (else: filter the mapped keys and sort them)."""
        kind = _kind_of(prefix)
        if kind is None:
            return self.root, False
        return self.to_etcd(prefix), True


_encoder = GoJSONEncoder()
_sorted_encoder = GoJSONEncoder(order="sorted")
_decode = msgspec.json.Decoder(dict[str, Any]).decode


def stored_value(obj: dict[str, Any], *, custom: bool) -> bytes:
    """The bytes kube-apiserver (JSON media type) keeps in etcd for ``obj``."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and ("resourceVersion" in meta or "selfLink" in meta):
        meta = {k: v for k, v in meta.items() if k not in ("resourceVersion", "selfLink")}
    out: dict[str, Any] = {}
    if not custom:
        for name in ("kind", "apiVersion"):
            if name in obj:
                out[name] = obj[name]
    out.update(obj)
    if meta is not None:
        out["metadata"] = meta
    return (_sorted_encoder if custom else _encoder).encode(out) + b"\n"


def read_value(stored: bytes, revision: int) -> tuple[dict[str, Any], bytes]:
    """``(object, compact JSON)`` of a stored value at ``revision``: its resourceVersion set,
    ``kind`` and ``apiVersion`` first (as kubewire's other stores hold objects, and as a list
    expects to find them when it drops them from a built-in kind's items)."""
    obj = _decode(stored)
    if "apiVersion" in obj and "kind" in obj and list(obj)[:2] != ["kind", "apiVersion"]:
        obj = {"kind": obj.pop("kind"), "apiVersion": obj.pop("apiVersion"), **obj}
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    meta["resourceVersion"] = str(revision)
    return obj, _encoder.encode(obj)
