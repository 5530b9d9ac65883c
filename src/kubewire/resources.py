"""The registry: one data entry per served kind.

Everything kind-specific that the server or client needs is a field here (scope, names, field
selectors, subresources, lifecycle flags), so adding a kind is adding an entry — never a new code
path. Facts come from kube-apiserver v1.32 (see the shared reference docs, sections cited inline).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from kubewire.conversions import SchemaConversion

NameRule = Literal["subdomain", "label", "dns1035", "path"]
"""How ``metadata.name`` is validated (objects-and-clients.md §1.7)."""

FieldLabelStyle = Literal["core", "default", "crd", "batchv1.Job"]
"""Which converter rejects unknown field-selector labels (watch-protocol.md §9.3):
``core``/``crd``: ``field label not supported: X``; ``default``:
``"X" is not a known field selector: only "metadata.name", "metadata.namespace"``;
``batchv1.Job`` (pkg/apis/batch/v1/conversion.go): ``field label "X" not supported for
batchv1.Job``."""

GenerationPolicy = Literal["none", "spec", "spec_and_annotations", "non_metadata",
                           "non_metadata_and_labels", "create_only"]
"""When ``metadata.generation`` is set and bumped (objects-and-clients.md §1.4);
``create_only``: 1 at create, never bumped (PriorityClass's strategy)."""


@dataclass(frozen=True, slots=True)
class Resource:
    """API facts for one kind at one group/version."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    # Extra selectable fields beyond metadata.name (and metadata.namespace when namespaced):
    # label -> source. A source is a dotted JSON path, optionally prefixed by a formatter:
    # "bool:" renders a missing/false bool as "false", "first_ip:" takes the first
    # ``ip`` of a list of {ip: ...}, falling back to the path without the list; "never:" is
    # accepted but never has a value (status.podIPs, §9.3); "or:a|b" takes the first
    # non-empty path; "int:" renders a missing integer as "0" (Go's strconv.Itoa of an int32).
    field_labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # Aliases accepted by the field-label converter (pods: spec.host -> spec.nodeName).
    field_label_aliases: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    field_label_style: FieldLabelStyle = "core"
    name_rule: NameRule = "subdomain"
    generation: GenerationPolicy = "none"
    is_custom: bool = False  # served like a CRD: items carry kind/apiVersion, no SMP, ...
    return_deleted_object: bool = False  # DELETE answers the object, not a Success Status
    allow_create_on_update: bool = False  # PUT on a missing name creates it
    allow_unconditional_update: bool = True  # PUT without resourceVersion allowed
    has_watch_cache: bool = True  # periodic bookmarks (kube: events have none, §6.4)
    # A kind kube serves with a Creater alone and never stores (core ``bindings``: its
    # LegacyBindingREST sets a pod's node): discovery lists only ``create``, no watch cache.
    create_only: bool = False
    # A kind whose objects are computed on each read, never stored (metrics.k8s.io's PodMetrics
    # and NodeMetrics, served by metrics-server behind kube-aggregator): get and list only.
    computed: bool = False
    # The id of the entry whose stored objects this one serves in its own version (kube's
    # cohabiting resources: core/v1 Events are events.k8s.io/v1 Events); "" for a stored kind.
    # kubewire.conversions converts between the two; storage, caches and tables keyed by id
    # are shared.
    stored_as: str = ""
    # The group of kube's internal type where it differs from the served group: Invalid errors
    # name the internal kind (store.go BeforeCreate uses ObjectKinds of the internal object).
    internal_group: str | None = None
    # What Go's encoding/json writes of the kind's zero value besides kind, apiVersion and
    # metadata (fields without omitempty, and structs, which omitempty never drops), in struct
    # order: a built-in kind's BOOKMARK object is that zero value (watch-protocol.md §5.3).
    zero_fields: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    # A custom resource's CustomResourceDefinition (the stored object, apiextensions.k8s.io/v1)
    # the entry was built from: its schema, printer columns and scale paths for this version.
    # None for built-in kinds.
    crd: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    # The text of the ``Warning: 299`` header every request to this version gets (a CRD
    # version marked ``deprecated``, crds.md §6.4); None when not deprecated.
    deprecation_warning: str | None = None
    # How a custom resource's objects move between the CRD's versions (pruned and defaulted
    # with the versions' schemas, converted by the CRD's strategy); None for built-in kinds.
    conversion: SchemaConversion | None = field(default=None, compare=False, repr=False)
    # Derived from the fields above once, in ``__post_init__`` (also after
    # ``dataclasses.replace``): a create reads ``id`` ~35 times and ``api_version`` ~15, and as
    # properties each read built the string again.
    # ``id``: the storage prefix for this kind, ``core/pods``, ``apps/deployments`` (shared by
    # every version of one stored resource, see ``stored_as``).
    id: str = field(init=False, compare=False, repr=False)
    api_version: str = field(init=False, compare=False, repr=False)
    _prefix: str = field(init=False, compare=False, repr=False)  # ``storage_prefix()``

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", self.stored_as or f"{self.group or 'core'}/{self.plural}")
        object.__setattr__(self, "api_version",
                           f"{self.group}/{self.version}" if self.group else self.version)
        object.__setattr__(self, "_prefix", f"{self.id}/")

    @property
    def crd_name(self) -> str:
        """The name of the CRD this entry is served from; "" for a built-in kind."""
        return str(self.crd["metadata"]["name"]) if self.crd is not None else ""

    @property
    def invalid_group(self) -> str:
        """The group Invalid (422) errors name: ``Event "x" is invalid`` for events.k8s.io."""
        return self.group if self.internal_group is None else self.internal_group

    @property
    def list_kind(self) -> str:
        """``<Kind>List``, or a custom resource's accepted ``listKind``."""
        if self.crd is not None:
            status = self.crd.get("status")
            names = status.get("acceptedNames") if isinstance(status, dict) else None
            accepted = names.get("listKind") if isinstance(names, dict) else None
            if isinstance(accepted, str) and accepted:
                return accepted
        return self.kind + "List"

    @property
    def group_resource(self) -> str:
        """``pods``, ``deployments.apps``: the form used in error messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def group_kind(self) -> str:
        """``Pod``, ``Deployment.apps``: the form used in Invalid messages."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    @property
    def is_stored_version(self) -> bool:
        """True for the entry whose version the store holds; False for another version of it."""
        return not self.stored_as

    @property
    def version_kind(self) -> tuple[str, str]:
        """``(apiVersion, kind)``: what names this entry's objects on the wire."""
        return self.api_version, self.kind

    @property
    def base_path(self) -> str:
        """``/api/v1`` or ``/apis/<group>/<version>``."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    def storage_key(self, namespace: str, name: str) -> str:
        """``core/pods/<ns>/<name>``; cluster-scoped kinds have no namespace segment."""
        return f"{self.id}/{namespace}/{name}" if self.namespaced else f"{self.id}/{name}"

    def storage_prefix(self, namespace: str = "") -> str:
        """Prefix of every key in a collection (namespace ``""`` means all namespaces)."""
        if self.namespaced and namespace:
            return f"{self._prefix}{namespace}/"
        return self._prefix  # made once: feed handlers test every change's key against it

    def all_field_labels(self) -> tuple[str, ...]:
        base = ("metadata.name", "metadata.namespace") if self.namespaced else ("metadata.name",)
        return base + tuple(l for l in self.field_labels if l not in base)  # noqa: E741


_POD_FIELDS = MappingProxyType({
    "spec.nodeName": "spec.nodeName",
    "spec.restartPolicy": "spec.restartPolicy",
    "spec.schedulerName": "spec.schedulerName",
    "spec.serviceAccountName": "spec.serviceAccountName",
    "spec.hostNetwork": "bool:spec.hostNetwork",
    "status.phase": "status.phase",
    "status.podIP": "first_ip:status.podIPs|status.podIP",
    "status.podIPs": "never:",
    "status.nominatedNodeName": "status.nominatedNodeName",
})

_EVENT_FIELDS = MappingProxyType({
    "reason": "reason",
    "type": "type",
    "reportingController": "reportingController",
    "source": "or:deprecatedSource.component|reportingController",
    "regarding.kind": "regarding.kind",
    "regarding.namespace": "regarding.namespace",
    "regarding.name": "regarding.name",
    "regarding.uid": "regarding.uid",
    "regarding.apiVersion": "regarding.apiVersion",
    "regarding.resourceVersion": "regarding.resourceVersion",
    "regarding.fieldPath": "regarding.fieldPath",
})

# core/v1 names (pkg/apis/core/v1/conversion.go AddFieldLabelConversionsForEvent); the set is
# pkg/registry/core/event/strategy.go ToSelectableFields ("source" falls back to the reporter).
_CORE_EVENT_FIELDS = MappingProxyType({
    "involvedObject.kind": "involvedObject.kind",
    "involvedObject.namespace": "involvedObject.namespace",
    "involvedObject.name": "involvedObject.name",
    "involvedObject.uid": "involvedObject.uid",
    "involvedObject.apiVersion": "involvedObject.apiVersion",
    "involvedObject.resourceVersion": "involvedObject.resourceVersion",
    "involvedObject.fieldPath": "involvedObject.fieldPath",
    "reason": "reason",
    "reportingComponent": "reportingComponent",
    "source": "or:source.component|reportingComponent",
    "type": "type",
})

# Go zero values (see Resource.zero_fields), from the v1.32 types' json tags.
_POD_SPEC_ZERO = {"containers": None}
_ZERO_META = {"creationTimestamp": None}
_NODE_INFO_ZERO = dict.fromkeys(
    ("machineID", "systemUUID", "bootID", "kernelVersion", "osImage", "containerRuntimeVersion",
     "kubeletVersion", "kubeProxyVersion", "operatingSystem", "architecture"), "")
_ZERO: dict[str, Mapping[str, Any]] = {
    "Namespace": {"spec": {}, "status": {}},
    "Node": {"spec": {}, "status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
                                    "nodeInfo": _NODE_INFO_ZERO}},
    "Pod": {"spec": _POD_SPEC_ZERO, "status": {}},
    "Service": {"spec": {}, "status": {"loadBalancer": {}}},
    "Lease": {"spec": {}},
    "Deployment": {"spec": {"selector": None,
                            "template": {"metadata": _ZERO_META, "spec": _POD_SPEC_ZERO},
                            "strategy": {}},
                   "status": {}},
    # apps/v1 types.go: selector and template (and a StatefulSet's serviceName) have no
    # omitempty; each status has counters without it
    # core/v1 ReplicationControllerSpec: every field omitempty (replicas and template are
    # pointers); the status's replicas has no omitempty
    "ReplicationController": {"spec": {}, "status": {"replicas": 0}},
    "ReplicaSet": {"spec": {"selector": None,
                            "template": {"metadata": _ZERO_META, "spec": _POD_SPEC_ZERO}},
                   "status": {"replicas": 0}},
    "StatefulSet": {"spec": {"selector": None,
                             "template": {"metadata": _ZERO_META, "spec": _POD_SPEC_ZERO},
                             "serviceName": "", "updateStrategy": {}},
                    "status": {"replicas": 0, "availableReplicas": 0}},
    "DaemonSet": {"spec": {"selector": None,
                           "template": {"metadata": _ZERO_META, "spec": _POD_SPEC_ZERO},
                           "updateStrategy": {}},
                  "status": {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                             "desiredNumberScheduled": 0, "numberReady": 0}},
    "ControllerRevision": {"data": None, "revision": 0},  # RawExtension's zero encodes as null
    "events.k8s.io/Event": {"eventTime": None, "regarding": {}, "deprecatedSource": {},
                            "deprecatedFirstTimestamp": None, "deprecatedLastTimestamp": None},
    "Event": {"involvedObject": {}, "source": {}, "firstTimestamp": None, "lastTimestamp": None,
              "eventTime": None, "reportingComponent": "", "reportingInstance": ""},
    "Ingress": {"spec": {}, "status": {"loadBalancer": {}}},
    "NetworkPolicy": {"spec": {"podSelector": {}}},
    "EndpointSlice": {"addressType": "", "endpoints": None, "ports": None},
    # rbac/v1 RoleBinding and ClusterRoleBinding: roleRef has no omitempty
    "Binding": {"roleRef": {"apiGroup": "", "kind": "", "name": ""}},
    "Role": {"rules": None},  # rules has no omitempty
    # certificates/v1: spec.request and spec.signerName have no omitempty; status is a struct
    "CertificateSigningRequest": {"spec": {"request": None, "signerName": ""}, "status": {}},
    # core/v1 ResourceQuota, LimitRange (limits has no omitempty), PersistentVolumeClaim (its
    # spec.resources is a struct), PersistentVolume; storage/v1 StorageClass (provisioner has
    # no omitempty)
    "ResourceQuota": {"spec": {}, "status": {}},
    "LimitRange": {"spec": {"limits": None}},
    "PersistentVolumeClaim": {"spec": {"resources": {}}, "status": {}},
    "PersistentVolume": {"spec": {}, "status": {}},
    "StorageClass": {"provisioner": ""},
    # batch/v1: JobSpec.template, CronJobSpec.schedule and .jobTemplate have no omitempty (a
    # JobTemplateSpec's metadata and spec are structs)
    "Job": {"spec": {"template": {"metadata": _ZERO_META, "spec": _POD_SPEC_ZERO}}, "status": {}},
    "CronJob": {"spec": {"schedule": "", "jobTemplate": {
        "metadata": _ZERO_META,
        "spec": {"template": {"metadata": _ZERO_META, "spec": _POD_SPEC_ZERO}}}},
        "status": {}},
    # policy/v1 PodDisruptionBudgetStatus: four counters without omitempty
    "PodDisruptionBudget": {"spec": {}, "status": {
        "disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}},
    "PriorityClass": {"value": 0},  # scheduling/v1: value has no omitempty
    "IngressClass": {"spec": {}},
    # apiregistration/v1 APIServiceSpec: both priorities have no omitempty
    "APIService": {"spec": {"groupPriorityMinimum": 0, "versionPriority": 0}, "status": {}},
    # autoscaling/v2: scaleTargetRef (kind, name) and maxReplicas, status.desiredReplicas and
    # status.currentMetrics have no omitempty
    "HorizontalPodAutoscaler": {"spec": {"scaleTargetRef": {"kind": "", "name": ""},
                                         "maxReplicas": 0},
                                "status": {"desiredReplicas": 0, "currentMetrics": None}},
    # autoscaling/v1: both status counters have no omitempty
    "autoscaling/v1/HorizontalPodAutoscaler": {
        "spec": {"scaleTargetRef": {"kind": "", "name": ""}, "maxReplicas": 0},
        "status": {"currentReplicas": 0, "desiredReplicas": 0}},
}


def _zero(key: str) -> Mapping[str, Any]:
    return MappingProxyType(_ZERO[key])


_EVENTS_ID = "events.k8s.io/events"
_HPA_ID = "autoscaling/horizontalpodautoscalers"
_POD_SUBRESOURCES = ("status", "log", "exec", "attach", "portforward", "eviction", "binding",
                     "ephemeralcontainers")

RESOURCES: tuple[Resource, ...] = (
    Resource("", "v1", "Namespace", "namespaces", "namespace", namespaced=False,
             short_names=("ns",), subresources=("status", "finalize"),
             field_labels=MappingProxyType({"status.phase": "status.phase"}),
             name_rule="label", return_deleted_object=True, zero_fields=_zero("Namespace")),
    Resource("", "v1", "Node", "nodes", "node", namespaced=False, short_names=("no",),
             subresources=("status",),
             field_labels=MappingProxyType({"spec.unschedulable": "bool:spec.unschedulable"}),
             zero_fields=_zero("Node")),
    # kube's pod subresources but ``proxy`` and ``resize`` (registry/core/pod/storage)
    Resource("", "v1", "Pod", "pods", "pod", namespaced=True, short_names=("po",),
             categories=("all",), subresources=_POD_SUBRESOURCES, field_labels=_POD_FIELDS,
             field_label_aliases=MappingProxyType({"spec.host": "spec.nodeName"}),
             return_deleted_object=True, zero_fields=_zero("Pod")),
    Resource("", "v1", "Service", "services", "service", namespaced=True, short_names=("svc",),
             categories=("all",), subresources=("status",),
             field_labels=MappingProxyType({"spec.clusterIP": "spec.clusterIP",
                                            "spec.type": "spec.type"}),
             name_rule="dns1035", return_deleted_object=True, allow_create_on_update=True,
             zero_fields=_zero("Service")),
    # pkg/registry/core/endpoint: short name ``ep``, names are DNS subdomains, PUT creates
    # (AllowCreateOnUpdate true), default field labels; stored under services/endpoints.
    Resource("", "v1", "Endpoints", "endpoints", "endpoints", namespaced=True,
             short_names=("ep",), field_label_style="default", allow_create_on_update=True),
    # pkg/registry/core/replicationcontroller: short name ``rc``, category ``all``, ``/status``
    # and ``/scale``, a spec change bumps the generation (strategy.go PrepareForUpdate);
    # core/v1 conversion.go accepts metadata.name, metadata.namespace and status.replicas
    # with the core message (strategy.go ControllerToSelectableFields: strconv.Itoa).
    Resource("", "v1", "ReplicationController", "replicationcontrollers",
             "replicationcontroller", namespaced=True, short_names=("rc",), categories=("all",),
             subresources=("status", "scale"),
             field_labels=MappingProxyType({"status.replicas": "int:status.replicas"}),
             generation="spec", zero_fields=_zero("ReplicationController")),
    Resource("", "v1", "ConfigMap", "configmaps", "configmap", namespaced=True,
             short_names=("cm",), field_label_style="default"),
    Resource("", "v1", "Secret", "secrets", "secret", namespaced=True,
             field_labels=MappingProxyType({"type": "type"})),
    Resource("", "v1", "ServiceAccount", "serviceaccounts", "serviceaccount", namespaced=True,
             short_names=("sa",), subresources=("token",), field_label_style="default",
             return_deleted_object=True),  # kube's serviceaccount storage: ReturnDeletedObject
    Resource("", "v1", "Binding", "bindings", "binding", namespaced=True, create_only=True),
    Resource("coordination.k8s.io", "v1", "Lease", "leases", "lease", namespaced=True,
             field_label_style="default", zero_fields=_zero("Lease")),
    Resource("apps", "v1", "Deployment", "deployments", "deployment", namespaced=True,
             short_names=("deploy",), categories=("all",), subresources=("status", "scale"),
             field_label_style="default", generation="spec_and_annotations",
             zero_fields=_zero("Deployment")),
    # pkg/registry/apps/{replicaset,statefulset,daemonset}/strategy.go: a spec change bumps the
    # generation; storage.go: ShortNames, Categories "all", the scale subresource of
    # ReplicaSets and StatefulSets. StatefulSet names are DNS labels (ValidateStatefulSetName).
    Resource("apps", "v1", "ReplicaSet", "replicasets", "replicaset", namespaced=True,
             short_names=("rs",), categories=("all",), subresources=("status", "scale"),
             field_label_style="default", generation="spec", zero_fields=_zero("ReplicaSet")),
    Resource("apps", "v1", "StatefulSet", "statefulsets", "statefulset", namespaced=True,
             short_names=("sts",), categories=("all",), subresources=("status", "scale"),
             field_label_style="default", name_rule="label", generation="spec",
             zero_fields=_zero("StatefulSet")),
    Resource("apps", "v1", "DaemonSet", "daemonsets", "daemonset", namespaced=True,
             short_names=("ds",), categories=("all",), subresources=("status",),
             field_label_style="default", generation="spec", zero_fields=_zero("DaemonSet")),
    # controllerrevision/strategy.go: no status, no generation; no short name or category
    Resource("apps", "v1", "ControllerRevision", "controllerrevisions", "controllerrevision",
             namespaced=True, field_label_style="default",
             zero_fields=_zero("ControllerRevision")),
    # Served by the core event storage (registry/events/rest/storage_events.go), whose
    # strategy allows create on update.
    Resource("events.k8s.io", "v1", "Event", "events", "event", namespaced=True,
             short_names=("ev",), field_labels=_EVENT_FIELDS, has_watch_cache=False,
             internal_group="", allow_create_on_update=True,
             zero_fields=_zero("events.k8s.io/Event")),
    # Legacy validation names no rule for events (objects-and-clients.md §1.7); PUT creates
    # (registry/core/event/strategy.go AllowCreateOnUpdate).
    Resource("", "v1", "Event", "events", "event", namespaced=True, short_names=("ev",),
             field_labels=_CORE_EVENT_FIELDS, name_rule="path", has_watch_cache=False,
             allow_create_on_update=True, stored_as=_EVENTS_ID, zero_fields=_zero("Event")),
    Resource("networking.k8s.io", "v1", "Ingress", "ingresses", "ingress", namespaced=True,
             short_names=("ing",), subresources=("status",), field_label_style="default",
             generation="spec", zero_fields=_zero("Ingress")),
    Resource("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", "networkpolicy",
             namespaced=True, short_names=("netpol",), field_label_style="default",
             generation="spec", zero_fields=_zero("NetworkPolicy")),
    Resource("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", "endpointslice",
             namespaced=True, field_label_style="default", generation="non_metadata_and_labels",
             zero_fields=_zero("EndpointSlice")),
    # pkg/registry/rbac/*/strategy.go: no generation, no status, PUT needs no resourceVersion
    # and creates (AllowCreateOnUpdate true, AllowUnconditionalUpdate true); names are path
    # segments (validation.go minimalNameRequirements).
    Resource("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", "clusterrole",
             namespaced=False, field_label_style="default", name_rule="path",
             allow_create_on_update=True, zero_fields=_zero("Role")),
    Resource("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings",
             "clusterrolebinding", namespaced=False, field_label_style="default",
             name_rule="path", allow_create_on_update=True, zero_fields=_zero("Binding")),
    Resource("rbac.authorization.k8s.io", "v1", "Role", "roles", "role", namespaced=True,
             field_label_style="default", name_rule="path", allow_create_on_update=True,
             zero_fields=_zero("Role")),
    Resource("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", "rolebinding",
             namespaced=True, field_label_style="default", name_rule="path",
             allow_create_on_update=True, zero_fields=_zero("Binding")),
    # authentication.k8s.io/v1's reviews (pkg/registry/authentication/*): Creaters alone,
    # nothing stored; the answer is the review with its status (server/writes/authn_reviews.py).
    Resource("authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews",
             "selfsubjectreview", namespaced=False, create_only=True),
    Resource("authentication.k8s.io", "v1", "TokenReview", "tokenreviews", "tokenreview",
             namespaced=False, create_only=True),
    # authorization.k8s.io/v1's reviews (pkg/registry/authorization/*): Creaters alone, nothing
    # stored; the answer is the review with its status (server/writes/access_reviews.py).
    Resource("authorization.k8s.io", "v1", "LocalSubjectAccessReview",
             "localsubjectaccessreviews", "localsubjectaccessreview", namespaced=True,
             create_only=True),
    Resource("authorization.k8s.io", "v1", "SelfSubjectAccessReview",
             "selfsubjectaccessreviews", "selfsubjectaccessreview", namespaced=False,
             create_only=True),
    Resource("authorization.k8s.io", "v1", "SelfSubjectRulesReview", "selfsubjectrulesreviews",
             "selfsubjectrulesreview", namespaced=False, create_only=True),
    Resource("authorization.k8s.io", "v1", "SubjectAccessReview", "subjectaccessreviews",
             "subjectaccessreview", namespaced=False, create_only=True),
    # pkg/registry/certificates: cluster-scoped, short name ``csr`` (storage.go ShortNames),
    # ``/status`` and ``/approval`` with their own strategies (writes/csr_strategy), no
    # generation, PUT never creates; names are path segments (ValidateCertificateRequestName
    # accepts any); certificates/v1 conversion.go accepts the ``spec.signerName`` field label
    # with the core message.
    Resource("certificates.k8s.io", "v1", "CertificateSigningRequest",
             "certificatesigningrequests", "certificatesigningrequest", namespaced=False,
             short_names=("csr",), subresources=("approval", "status"),
             field_labels=MappingProxyType({"spec.signerName": "spec.signerName"}),
             name_rule="path", zero_fields=_zero("CertificateSigningRequest")),
    # Quota, limits and storage (pkg/registry/core/{resourcequota,limitrange,
    # persistentvolumeclaim,persistentvolume}, pkg/registry/storage/storageclass): names are
    # DNS subdomains; every storage but LimitRange's sets ReturnDeletedObject; LimitRange's
    # strategy alone creates on PUT. core/v1 conversion.go registers only metadata.name and
    # metadata.namespace for ResourceQuota and PersistentVolumeClaim (their strategies' "name"
    # field cannot be selected), the others get the default conversion: "default" style.
    Resource("", "v1", "ResourceQuota", "resourcequotas", "resourcequota", namespaced=True,
             short_names=("quota",), subresources=("status",), field_label_style="default",
             return_deleted_object=True, zero_fields=_zero("ResourceQuota")),
    Resource("", "v1", "LimitRange", "limitranges", "limitrange", namespaced=True,
             short_names=("limits",), field_label_style="default", allow_create_on_update=True,
             zero_fields=_zero("LimitRange")),
    Resource("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims",
             "persistentvolumeclaim", namespaced=True, short_names=("pvc",),
             subresources=("status",), field_label_style="default", return_deleted_object=True,
             zero_fields=_zero("PersistentVolumeClaim")),
    Resource("", "v1", "PersistentVolume", "persistentvolumes", "persistentvolume",
             namespaced=False, short_names=("pv",), subresources=("status",),
             field_label_style="default", return_deleted_object=True,
             zero_fields=_zero("PersistentVolume")),
    Resource("storage.k8s.io", "v1", "StorageClass", "storageclasses", "storageclass",
             namespaced=False, short_names=("sc",), field_label_style="default",
             return_deleted_object=True, zero_fields=_zero("StorageClass")),
    # --- issue 20: batch, policy, scheduling kinds and IngressClass ---
    # pkg/registry/batch/{job,cronjob}/strategy.go: a spec change bumps the generation, create
    # clears status; storage.go: Categories "all", CronJob's short name. A Job's selectable
    # fields add status.successful (job/strategy.go JobToSelectableFields).
    Resource("batch", "v1", "Job", "jobs", "job", namespaced=True, categories=("all",),
             subresources=("status",),
             field_labels=MappingProxyType({"status.successful": "int:status.succeeded"}),
             field_label_style="batchv1.Job", generation="spec", zero_fields=_zero("Job")),
    Resource("batch", "v1", "CronJob", "cronjobs", "cronjob", namespaced=True,
             short_names=("cj",), categories=("all",), subresources=("status",),
             field_label_style="default", generation="spec", zero_fields=_zero("CronJob")),
    # pkg/registry/policy/poddisruptionbudget: generation on spec changes, status cleared on
    # create; short name pdb.
    Resource("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets",
             "poddisruptionbudget", namespaced=True, short_names=("pdb",),
             subresources=("status",), field_label_style="default", generation="spec",
             zero_fields=_zero("PodDisruptionBudget")),
    # pkg/registry/scheduling/priorityclass: no status, generation 1 at create and never
    # bumped (PrepareForUpdate changes nothing), PUT does not create.
    Resource("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", "priorityclass",
             namespaced=False, short_names=("pc",), field_label_style="default",
             generation="create_only", zero_fields=_zero("PriorityClass")),
    # pkg/registry/networking/ingressclass: generation on spec changes, no status.
    Resource("networking.k8s.io", "v1", "IngressClass", "ingressclasses", "ingressclass",
             namespaced=False, field_label_style="default", generation="spec",
             zero_fields=_zero("IngressClass")),
    # kube-aggregator pkg/registry/apiservice: cluster-scoped, status subresource (create
    # clears status, updates keep it), no generation, PUT does not create; the name is any
    # path segment (ValidateAPIService then asks for version.group).
    Resource("apiregistration.k8s.io", "v1", "APIService", "apiservices", "apiservice",
             namespaced=False, categories=("api-extensions",), subresources=("status",),
             field_label_style="default", name_rule="path",
             zero_fields=_zero("APIService")),
    # pkg/registry/autoscaling/horizontalpodautoscaler: stored as autoscaling/v2 (v2 is listed
    # first: discovery's preferred version); v1 objects are v2 objects converted
    # (kubewire.hpa_conversion). Short name hpa, category all; create clears status, updates
    # keep it; no generation; PUT does not create; only the default field labels.
    Resource("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers",
             "horizontalpodautoscaler", namespaced=True, short_names=("hpa",),
             categories=("all",), subresources=("status",), field_label_style="default",
             zero_fields=_zero("HorizontalPodAutoscaler")),
    Resource("autoscaling", "v1", "HorizontalPodAutoscaler", "horizontalpodautoscalers",
             "horizontalpodautoscaler", namespaced=True, short_names=("hpa",),
             categories=("all",), subresources=("status",), field_label_style="default",
             stored_as=_HPA_ID, zero_fields=_zero("autoscaling/v1/HorizontalPodAutoscaler")),
    # apiextensions-apiserver's registry/customresourcedefinition: strategy bumps generation on
    # spec changes; ShortNames, Categories from etcd.go.
    Resource("apiextensions.k8s.io", "v1", "CustomResourceDefinition",
             "customresourcedefinitions", "customresourcedefinition", namespaced=False,
             short_names=("crd", "crds"), categories=("api-extensions",),
             subresources=("status",), field_label_style="default", generation="spec"),
)


METRICS_RESOURCES: tuple[Resource, ...] = (
    # metrics-server's resource metrics API (k8s.io/metrics pkg/apis/metrics/v1beta1): served
    # from the simulated usage (kubewire.simulated_usage) when the cluster runs
    # (ServerConfig.cluster, or metrics_api), as kind with metrics-server serves it; get and
    # list only, field selectors on metadata only (server/reads/resource_metrics).
    Resource("metrics.k8s.io", "v1beta1", "NodeMetrics", "nodes", "", namespaced=False,
             field_label_style="default", computed=True, has_watch_cache=False),
    Resource("metrics.k8s.io", "v1beta1", "PodMetrics", "pods", "", namespaced=True,
             field_label_style="default", computed=True, has_watch_cache=False),
)
"""The kinds a cluster serves besides ``RESOURCES`` (``Registry(RESOURCES +
METRICS_RESOURCES)``)."""


class Registry:
    """Lookup of served kinds by (group, version, plural), by id and by (apiVersion, kind)."""

    def __init__(self, resources: tuple[Resource, ...] = RESOURCES) -> None:
        self._by_path: dict[tuple[str, str, str], Resource] = {}
        self._by_id: dict[str, Resource] = {}
        self._by_gvk: dict[tuple[str, str], Resource] = {}
        for res in resources:
            key = (res.group, res.version, res.plural)
            if key in self._by_path:
                raise ValueError(f"duplicate resource {key}")
            self._by_path[key] = res
            if res.is_stored_version:  # an id names storage: its stored version answers
                self._by_id[res.id] = res
            self._by_gvk[(res.api_version, res.kind)] = res
        self._resources = resources
        # every request's route check asks; served (group, version) pairs never change
        self._group_versions = tuple(dict.fromkeys((r.group, r.version) for r in resources))
        self._served = frozenset(self._group_versions)

    def __iter__(self) -> Iterator[Resource]:
        return iter(self._resources)

    def stored(self) -> Iterator[Resource]:
        """Every kind with objects (watch caches, controllers): all but create-only kinds."""
        return (res for res in self._resources if not (res.create_only or res.computed))

    def lookup(self, group: str, version: str, plural: str) -> Resource | None:
        return self._by_path.get((group, version, plural))

    def by_id(self, resource_id: str) -> Resource | None:
        return self._by_id.get(resource_id)

    def by_kind(self, api_version: str, kind: str) -> Resource | None:
        return self._by_gvk.get((api_version, kind))

    def group_versions(self) -> list[tuple[str, str]]:
        """Served (group, version) pairs in registry order, core first."""
        return list(self._group_versions)

    def serves(self, group: str, version: str) -> bool:
        return (group, version) in self._served

    def resource_for_key(self, key: str) -> Resource | None:
        group, plural = key.split("/", 2)[:2]
        return self._by_id.get(f"{group}/{plural}")

    def with_custom(self, crd_name: str, entries: tuple[Resource, ...]) -> Registry:
        """A new registry serving ``entries`` in place of what CRD ``crd_name`` served (none:
        the CRD's kinds are no longer served). Registries never change: the server swaps its
        registry, so a request sees one consistent set of kinds, and documents built from a
        registry can be cached by it."""
        kept = tuple(res for res in self._resources if res.crd_name != crd_name)
        return Registry(kept + entries)

    def custom(self) -> Iterator[Resource]:
        """The entries served from CustomResourceDefinitions."""
        return (res for res in self._resources if res.crd is not None)


REGISTRY = Registry()
"""The kinds kubewire serves."""
