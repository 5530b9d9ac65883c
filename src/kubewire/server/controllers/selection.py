"""Which controllers run: kube-controller-manager's ``--controllers`` list, decided as kube does.

A list of names: ``*`` turns on every controller that is on by default, ``name`` turns one on,
``-name`` turns one off; the first entry naming a controller decides it, and a list without
``*`` turns on only what it names (kube's ``IsControllerEnabled``). Names are kube v1.32's
canonical ones (``namespace-controller``) or their aliases (``namespace``); a name kube does not
know is refused with kube's message. kubewire accepts every name kube knows, so a flag copied
from a cluster's manifest works; ``CONTROLLERS`` says which of them kubewire runs, plus
kubewire's stand-in for kubelets (``pod-termination-controller``: graceful pod deletions end
when their grace period does). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

NAMESPACE = "namespace-controller"
SERVICE_ACCOUNT = "serviceaccount-controller"
SERVICE_ACCOUNT_TOKEN = "serviceaccount-token-controller"  # in the server: it signs tokens
ROOT_CA_PUBLISHER = "root-ca-certificate-publisher-controller"
POD_TERMINATION = "pod-termination-controller"  # kubewire's own: what kubelets do at a deletion
CLUSTERROLE_AGGREGATION = "clusterrole-aggregation-controller"
CSR_SIGNING = "certificatesigningrequest-signing-controller"
CSR_CLEANER = "certificatesigningrequest-cleaner-controller"
RESOURCE_QUOTA = "resourcequota-controller"
PVC_PROTECTION = "persistentvolumeclaim-protection-controller"
PV_PROTECTION = "persistentvolume-protection-controller"
GARBAGE_COLLECTOR = "garbage-collector-controller"  # kubewire.cluster (a client of the API)
KUBE_SCHEDULER = "kube-scheduler"  # kubewire.cluster's scheduler: switched here too
KUBELET = "kubelet"  # kubewire.cluster's simulated kubelets (``--nodes``)
# kubewire.cluster's stand-in for kind's local-path-provisioner addon (and its default class)
LOCAL_PATH_PROVISIONER = "local-path-provisioner"

# Those of them that are kubewire.cluster's components (its ``COMPONENTS`` registry; named here
# too so that a server running none of them never imports the client)
CLUSTER_COMPONENTS = (GARBAGE_COLLECTOR, "replicaset-controller",
                      "replicationcontroller-controller", "deployment-controller",
                      "statefulset-controller", "daemonset-controller",
                      "endpointslice-controller", "endpoints-controller",
                      "endpointslice-mirroring-controller", "job-controller",
                      "cronjob-controller", "ttl-after-finished-controller",
                      "node-lifecycle-controller",
                      "taint-eviction-controller", "disruption-controller",
                      "persistentvolume-binder-controller", LOCAL_PATH_PROVISIONER,
                      "horizontal-pod-autoscaler-controller",
                      KUBE_SCHEDULER, KUBELET)
# What kubewire runs, by the name that switches it.
CONTROLLERS = (NAMESPACE, SERVICE_ACCOUNT, ROOT_CA_PUBLISHER, POD_TERMINATION,
               CLUSTERROLE_AGGREGATION, CSR_SIGNING, CSR_CLEANER, RESOURCE_QUOTA,
               PVC_PROTECTION, PV_PROTECTION, SERVICE_ACCOUNT_TOKEN, *CLUSTER_COMPONENTS)

# kube v1.32's aliases (cmd/kube-controller-manager/names KCMControllerAliases), alias -> name.
ALIASES: dict[str, str] = {
    "serviceaccount-token": SERVICE_ACCOUNT_TOKEN,
    "endpoint": "endpoints-controller",
    "endpointslice": "endpointslice-controller",
    "endpointslicemirroring": "endpointslice-mirroring-controller",
    "replicationcontroller": "replicationcontroller-controller",
    "podgc": "pod-garbage-collector-controller",
    "resourcequota": RESOURCE_QUOTA,
    "namespace": NAMESPACE,
    "serviceaccount": SERVICE_ACCOUNT,
    "garbagecollector": "garbage-collector-controller",
    "daemonset": "daemonset-controller",
    "job": "job-controller",
    "deployment": "deployment-controller",
    "replicaset": "replicaset-controller",
    "horizontalpodautoscaling": "horizontal-pod-autoscaler-controller",
    "disruption": "disruption-controller",
    "statefulset": "statefulset-controller",
    "cronjob": "cronjob-controller",
    "csrsigning": CSR_SIGNING,
    "csrapproving": "certificatesigningrequest-approving-controller",
    "csrcleaner": CSR_CLEANER,
    "ttl": "ttl-controller",
    "bootstrapsigner": "bootstrap-signer-controller",
    "tokencleaner": "token-cleaner-controller",
    "nodeipam": "node-ipam-controller",
    "nodelifecycle": "node-lifecycle-controller",
    "service": "service-lb-controller",
    "route": "node-route-controller",
    "cloud-node-lifecycle": "cloud-node-lifecycle-controller",
    "persistentvolume-binder": "persistentvolume-binder-controller",
    "attachdetach": "persistentvolume-attach-detach-controller",
    "persistentvolume-expander": "persistentvolume-expander-controller",
    "clusterrole-aggregation": CLUSTERROLE_AGGREGATION,
    "pvc-protection": PVC_PROTECTION,
    "pv-protection": PV_PROTECTION,
    "ttl-after-finished": "ttl-after-finished-controller",
    "root-ca-cert-publisher": ROOT_CA_PUBLISHER,
    "service-ca-cert-publisher": "service-ca-certificate-publisher-controller",
    "ephemeral-volume": "ephemeral-volume-controller",
    "storage-version-gc": "storageversion-garbage-collector-controller",
    "resource-claim-controller": "resourceclaim-controller",
    "legacy-service-account-token-cleaner": "legacy-serviceaccount-token-cleaner-controller",
}
# Every name kube v1.32's controller manager knows, plus kubewire's own.
KNOWN = frozenset(ALIASES.values()) | {
    "validatingadmissionpolicy-status-controller", "service-cidr-controller",
    "taint-eviction-controller", "selinux-warning-controller",
    "volumeattributesclass-protection-controller", POD_TERMINATION, KUBE_SCHEDULER, KUBELET,
    LOCAL_PATH_PROVISIONER}
# kube's ControllersDisabledByDefault: ``*`` leaves these off.
DISABLED_BY_DEFAULT = frozenset({"bootstrap-signer-controller", "token-cleaner-controller",
                                 "selinux-warning-controller"})
DEFAULT = ("*",)


@dataclass(frozen=True, slots=True)
class Selection:
    """A parsed ``--controllers`` list: entries with their names made canonical."""

    entries: tuple[str, ...] = DEFAULT

    def enabled(self, name: str) -> bool:
        """kube's ``IsControllerEnabled``: the first entry naming it decides; else ``*``."""
        star = False
        for entry in self.entries:
            if entry == name:
                return True
            if entry == "-" + name:
                return False
            star = star or entry == "*"
        return star and name not in DISABLED_BY_DEFAULT


def canonical(name: str) -> str:
    return ALIASES.get(name, name)


def parse_controllers(entries: Iterable[str]) -> Selection:
    """The list as kube reads ``--controllers``; ValueError names the first unknown entry."""
    parsed: list[str] = []
    for raw in entries:
        entry = raw.strip()
        if not entry:
            continue
        if entry == "*":
            parsed.append(entry)
            continue
        off = entry.startswith("-")
        given = entry[1:] if off else entry
        name = canonical(given)
        if name not in KNOWN:
            raise ValueError(f'"{given}" is not in the list of known controllers')
        parsed.append("-" + name if off else name)
    return Selection(tuple(parsed))
