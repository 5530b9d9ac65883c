"""The local APIServices kube-apiserver keeps, as decisions (pure).

kube-apiserver's aggregator layer registers an ``apiregistration.k8s.io/v1`` APIService for
every group/version it serves itself (cmd/kube-apiserver/app/aggregator.go
``apiServicesToRegister``: ``makeAPIService`` with the ``apiVersionPriorities`` table; a
group/version missing from the table gets none), labelled
``kube-aggregator.kubernetes.io/automanaged: onstart``, and one per served version of each
CustomResourceDefinition (apiextensions' ``crdregistration_controller.go``:
groupPriorityMinimum 1000, versionPriority 100, label ``true``). The autoregister controller
(kube-aggregator ``pkg/controllers/autoregister``) creates what is missing, puts back a changed
spec, deletes an automanaged APIService nobody wants any more and leaves the others alone (an
``onstart`` one only until it has synced it once after a start; a ``true`` one always); the
available controller (``pkg/controllers/status/available_controller.go``) marks an APIService
without ``spec.service`` ``Available=True`` reason ``Local``.

kubewire answers ``metrics.k8s.io`` itself (server/reads/resource_metrics) when it serves it:
its APIService is therefore Local (no ``spec.service``: there is no metrics-server Service a
client could find), with metrics-server's own priorities (100, 100).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

GROUP = "apiregistration.k8s.io"
AUTOMANAGED_LABEL = "kube-aggregator.kubernetes.io/automanaged"
ONSTART = "onstart"  # AddAPIServiceToSyncOnStart: the built-in group/versions
SYNCED = "true"  # AddAPIServiceToSync: the CRDs' group/versions
LOCAL_REASON = "Local"
LOCAL_MESSAGE = "Local APIServices are always available"

# kube v1.32 apiVersionPriorities (cmd/kube-apiserver/app/aggregator.go) merged over
# DefaultGenericAPIServicePriorities (pkg/controlplane/apiserver/aggregator.go), for the
# group/versions kube v1.32 serves: (group, version) -> (groupPriorityMinimum, versionPriority).
API_VERSION_PRIORITIES: Mapping[tuple[str, str], tuple[int, int]] = MappingProxyType({
    ("", "v1"): (18000, 1),
    ("apps", "v1"): (17800, 15),
    ("events.k8s.io", "v1"): (17750, 15),
    ("authentication.k8s.io", "v1"): (17700, 15),
    ("authorization.k8s.io", "v1"): (17600, 15),
    ("autoscaling", "v1"): (17500, 15),
    ("autoscaling", "v2"): (17500, 30),
    ("batch", "v1"): (17400, 15),
    ("certificates.k8s.io", "v1"): (17300, 15),
    ("networking.k8s.io", "v1"): (17200, 15),
    ("policy", "v1"): (17100, 15),
    ("rbac.authorization.k8s.io", "v1"): (17000, 15),
    ("storage.k8s.io", "v1"): (16800, 15),
    ("apiextensions.k8s.io", "v1"): (16700, 15),
    ("admissionregistration.k8s.io", "v1"): (16700, 15),
    ("scheduling.k8s.io", "v1"): (16600, 15),
    ("coordination.k8s.io", "v1"): (16500, 15),
    ("node.k8s.io", "v1"): (16300, 15),
    ("discovery.k8s.io", "v1"): (16200, 15),
    ("flowcontrol.apiserver.k8s.io", "v1"): (16100, 21),
})
# metrics-server's manifest (components.yaml) APIService v1beta1.metrics.k8s.io
METRICS = ("metrics.k8s.io", "v1beta1")
METRICS_PRIORITIES = (100, 100)
# crdregistration_controller.go handleVersionUpdate: "CRDs should have relatively low priority"
CRD_PRIORITIES = (1000, 100)


def apiservice_name(group: str, version: str) -> str:
    """``<version>.<group>``: ``v1.`` for the core group, ``v1.apps``."""
    return f"{version}.{group}"


def local_apiservice(group: str, version: str, priorities: tuple[int, int],
                     label: str) -> dict[str, Any]:
    """The APIService the autoregister controller creates (no status: the available
    controller writes it)."""
    return {"apiVersion": f"{GROUP}/v1", "kind": "APIService",
            "metadata": {"name": apiservice_name(group, version),
                         "labels": {AUTOMANAGED_LABEL: label}},
            "spec": {"group": group, "version": version,
                     "groupPriorityMinimum": priorities[0],
                     "versionPriority": priorities[1]}}


def builtin_apiservices(group_versions: Iterable[tuple[str, str]]) -> list[dict[str, Any]]:
    """One ``onstart`` APIService per served built-in group/version kube has a priority for
    (and metrics.k8s.io when served)."""
    out = []
    for group, version in dict.fromkeys(group_versions):
        if (group, version) == METRICS:
            out.append(local_apiservice(group, version, METRICS_PRIORITIES, ONSTART))
        elif (group, version) in API_VERSION_PRIORITIES:
            out.append(local_apiservice(group, version, API_VERSION_PRIORITIES[group, version],
                                        ONSTART))
    return out


def crd_apiservices(crds: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One ``true`` APIService per served version of each CRD (deduplicated by name)."""
    wanted: dict[str, dict[str, Any]] = {}
    for crd in crds:
        spec = crd.get("spec") or {}
        group = spec.get("group")
        if not isinstance(group, str) or not group:
            continue
        for version in spec.get("versions") or ():
            name = version.get("name") if isinstance(version, Mapping) else None
            if isinstance(name, str) and name and version.get("served"):
                wanted.setdefault(apiservice_name(group, name),
                                  local_apiservice(group, name, CRD_PRIORITIES, SYNCED))
    return list(wanted.values())


def desired_apiservices(group_versions: Iterable[tuple[str, str]],
                        crds: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every APIService the autoregister controller wants, by name (a built-in wins over a
    CRD version of the same name)."""
    desired = {o["metadata"]["name"]: o for o in crd_apiservices(crds)}
    desired.update({o["metadata"]["name"]: o for o in builtin_apiservices(group_versions)})
    return desired


@dataclass(frozen=True, slots=True)
class Plan:
    """What the autoregister controller does to reach the desired APIServices."""

    create: tuple[dict[str, Any], ...]
    update: tuple[dict[str, Any], ...]  # desired objects whose spec/label must be put back
    delete: tuple[str, ...]


def is_automanaged(obj: Mapping[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return bool(labels.get(AUTOMANAGED_LABEL))  # any value: autoregister manages it


def plan(desired: Mapping[str, dict[str, Any]], current: Mapping[str, Mapping[str, Any]],
         synced: Collection[str] = ()) -> Plan:
    """autoregister's ``checkAPIService`` over every name: create the missing, put back the
    spec of a changed automanaged one, delete an automanaged one not wanted; an APIService
    without the label is the user's and is left alone, wanted or not. An ``onstart`` one is
    looked after once per start: one in ``synced`` (already synced by this server) is left as
    it is, deleted or changed, until the next start."""
    create, update, delete = [], [], []
    for name, want in sorted(desired.items()):
        if name in synced and want["metadata"]["labels"][AUTOMANAGED_LABEL] == ONSTART:
            continue
        have = current.get(name)
        if have is None:
            create.append(want)
        elif is_automanaged(have) and have.get("spec") != want["spec"]:
            update.append(want)
    for name, have in sorted(current.items()):
        if name not in desired and is_automanaged(have):
            delete.append(name)
    return Plan(tuple(create), tuple(update), tuple(delete))


def with_desired_spec(current: dict[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    """The update autoregister sends: the live object with the desired spec."""
    current["spec"] = dict(desired["spec"])
    return current


def needs_local_status(obj: Mapping[str, Any]) -> bool:
    """A local APIService (no ``spec.service``) not yet ``Available=True`` reason ``Local``."""
    if (obj.get("spec") or {}).get("service") is not None:
        return False
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == "Available":
            return not bool(cond.get("status") == "True" and cond.get("reason") == LOCAL_REASON
                            and cond.get("message") == LOCAL_MESSAGE)
        continue
    return True


def with_local_status(obj: dict[str, Any], now: str) -> dict[str, Any]:
    """The available controller's ``Available`` condition for a local APIService (the
    transition time kept when the status was already True)."""
    status = obj.get("status") or {}
    conditions = [c for c in status.get("conditions") or () if isinstance(c, dict)]
    previous = next((c for c in conditions if c.get("type") == "Available"), None)
    when = (previous.get("lastTransitionTime") if previous is not None
            and previous.get("status") == "True" else None) or now
    available = {"type": "Available", "status": "True", "lastTransitionTime": when,
                 "reason": LOCAL_REASON, "message": LOCAL_MESSAGE}
    kept = [c for c in conditions if c.get("type") != "Available"]
    obj["status"] = {**status, "conditions": [available, *kept]}
    return obj
