"""Kind-specific defaulting: what kube-apiserver fills in when it decodes a write body.

kube defaults every decoded object (create, update, patch result, ``/status`` body) before the
strategy runs; ``apply_kind_defaults`` is that step. It is pure: a new object comes back and the
input is never touched. Defaulting twice gives the same object as defaulting once.

Two layers, in this order (objects-and-clients.md §3):

1. the OpenAPI ``default`` values of the kind's schema (``schema.validate.fill_defaults``:
   ``ContainerPort.protocol``, ``ServicePort.protocol``, the rbd/iscsi/azureDisk/scaleIO volume
   fields). A custom resource gets every default of its CRD version's structural schema here
   (``custom_resources.default``), as apiextensions does while decoding (and server-side apply's
   field manager after merging), before the strategy compares old and new: defaulting after
   ``PrepareForUpdate`` made a re-applied Gateway or HTTPRoute look changed (its ``generation``
   bumped and the no-op update was written);
2. the hand-written defaulters (``SetDefaults_*`` in ``pkg/apis/<group>/v1/defaults.go`` and the
   generated ``zz_generated.defaults.go`` walk), a table keyed by ``Resource.id``. Shared pieces
   (pod spec, container, probe, volume) serve Pod and Deployment's pod template alike.

Malformed values (a string where a list belongs) are left alone for validation to report.
What kube defaults elsewhere is not repeated here: Namespace labels and finalizers and server
metadata (``lifecycle``), ClusterIPs, IP families and node ports (``allocation``).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from types import MappingProxyType

from kubewire import hpa_conversion
from kubewire.json_copy import copy_json
from kubewire.json_types import JSON
from kubewire.resources import Resource
from kubewire.schema import validate as schema_validate
from kubewire.server.apiextensions.crd.crd_defaults import default_crd
from kubewire.server.writes import custom_resources

Defaulter = Callable[[dict[str, JSON]], None]
"""Fills defaults into one object in place (it always gets a private copy)."""

DEFAULT_TERMINATION_GRACE_PERIOD_S = 30  # core/v1 DefaultTerminationGracePeriodSeconds
DEFAULT_VOLUME_MODE = 0o644  # 420: Secret/ConfigMap/DownwardAPI/Projected DefaultMode
DEFAULT_TOKEN_EXPIRATION_S = 3600  # SetDefaults_ServiceAccountTokenProjection
DEFAULT_CLIENT_IP_AFFINITY_S = 10800  # core/v1 DefaultClientIPServiceAffinitySeconds
_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
_MODE_SOURCES = ("secret", "configMap", "downwardAPI", "projected")
_EXTERNAL_TYPES = ("NodePort", "LoadBalancer")
# docker/distribution reference grammar, enough to tell "no tag" from "unparseable".
_PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_TAG = re.compile(r"[\w][\w.-]{0,127}")


# --- small helpers -------------------------------------------------------------------------------

def _is_zero(value: JSON) -> bool:
    """Go's zero value for a non-pointer field as decoded JSON: absent, null, "" or 0."""
    return value is None or value == "" or (type(value) is int and value == 0)


def _set_if_zero(target: dict[str, JSON], key: str, value: JSON) -> None:
    if _is_zero(target.get(key)):
        target[key] = value


def _set_if_nil(target: dict[str, JSON], key: str, value: JSON) -> None:
    if target.get(key) is None:
        target[key] = value


def _child(parent: Mapping[str, JSON], key: str) -> dict[str, JSON] | None:
    value = parent.get(key)
    return value if isinstance(value, dict) else None


def _items(parent: Mapping[str, JSON] | None,
           key: str) -> list[dict[str, JSON]] | tuple[()]:
    """The objects of the list ``parent[key]`` (no new list when there is none: most lists a
    defaulter looks for are absent)."""
    value = parent.get(key) if parent is not None else None
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else ()


# --- containers and probes -----------------------------------------------------------------------

@lru_cache(maxsize=1024)  # two regex matches per container; a cluster runs few images
def image_tag(image: str) -> str:
    """The tag kube's ``parsers.ParseImageName`` finds: ``latest`` when neither tag nor digest
    is given, ``""`` for a digest-only or unparseable reference."""
    name, _, digest = image.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    tag = name[colon + 1:] if colon > slash else ""
    repository = name[:colon] if colon > slash else name
    parts = repository.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]  # a registry host may hold upper case, dots and a port
    if not all(_PATH_COMPONENT.fullmatch(p) for p in parts) or (tag and not _TAG.fullmatch(tag)):
        return ""
    return tag or ("" if digest else "latest")


def _default_http_get(action: dict[str, JSON] | None) -> None:
    # SetDefaults_HTTPGetAction
    if action is not None:
        _set_if_zero(action, "path", "/")
        _set_if_zero(action, "scheme", "HTTP")


def default_probe(probe: dict[str, JSON]) -> None:
    """SetDefaults_Probe plus its handlers (httpGet path/scheme, ``grpc.service: ""``)."""
    _set_if_zero(probe, "timeoutSeconds", 1)
    _set_if_zero(probe, "periodSeconds", 10)
    _set_if_zero(probe, "successThreshold", 1)
    _set_if_zero(probe, "failureThreshold", 3)
    _default_http_get(_child(probe, "httpGet"))
    grpc = _child(probe, "grpc")
    if grpc is not None:
        _set_if_nil(grpc, "service", "")  # +default="" on GRPCAction.Service


def default_container(container: dict[str, JSON]) -> None:
    """SetDefaults_Container and the generated walk below it (ports, env, probes, lifecycle).
    Runs for every container of every pod and template written: the common steps are inline."""
    get = container.get
    if _is_zero(get("imagePullPolicy")):
        image = get("image")
        tag = image_tag(image) if isinstance(image, str) else ""
        container["imagePullPolicy"] = "Always" if tag == "latest" else "IfNotPresent"
    if _is_zero(get("terminationMessagePath")):
        container["terminationMessagePath"] = "/dev/termination-log"
    if _is_zero(get("terminationMessagePolicy")):
        container["terminationMessagePolicy"] = "File"
    for port in _items(container, "ports"):
        _set_if_zero(port, "protocol", "TCP")
    for env in _items(container, "env"):
        _default_field_ref(_child(env, "valueFrom"))
    for name in _PROBES:
        probe = get(name)
        if isinstance(probe, dict):
            default_probe(probe)
    lifecycle = get("lifecycle")
    if isinstance(lifecycle, dict):
        _default_lifecycle(lifecycle)


def _default_lifecycle(lifecycle: dict[str, JSON]) -> None:
    for hook in ("postStart", "preStop"):
        handler = _child(lifecycle, hook)
        if handler is not None:
            _default_http_get(_child(handler, "httpGet"))


def _default_field_ref(holder: dict[str, JSON] | None) -> None:
    # SetDefaults_ObjectFieldSelector
    ref = _child(holder, "fieldRef") if holder is not None else None
    if ref is not None:
        _set_if_zero(ref, "apiVersion", "v1")


# --- volumes -------------------------------------------------------------------------------------

def default_volume(volume: dict[str, JSON]) -> None:
    """SetDefaults_Volume and the per-source defaulters (modes 420, hostPath type, tokens)."""
    if all(value is None for key, value in volume.items() if key != "name"):
        volume["emptyDir"] = {}
    for source in _MODE_SOURCES:
        found = _child(volume, source)
        if found is not None:
            _set_if_nil(found, "defaultMode", DEFAULT_VOLUME_MODE)
    host_path = _child(volume, "hostPath")
    if host_path is not None:
        _set_if_nil(host_path, "type", "")
    for item in _items(_child(volume, "downwardAPI"), "items"):
        _default_field_ref(item)
    for projection in _items(_child(volume, "projected"), "sources"):
        for item in _items(_child(projection, "downwardAPI"), "items"):
            _default_field_ref(item)
        token = _child(projection, "serviceAccountToken")
        if token is not None:
            _set_if_nil(token, "expirationSeconds", DEFAULT_TOKEN_EXPIRATION_S)
    ephemeral = _child(volume, "ephemeral")
    template = _child(ephemeral, "volumeClaimTemplate") if ephemeral is not None else None
    claim_spec = _child(template, "spec") if template is not None else None
    if claim_spec is not None:
        _set_if_nil(claim_spec, "volumeMode", "Filesystem")


# --- pod spec, pod, pod template -----------------------------------------------------------------

def default_pod_spec(spec: dict[str, JSON]) -> None:
    """SetDefaults_PodSpec plus volumes and every container list (Pod and pod templates)."""
    get = spec.get
    if _is_zero(get("dnsPolicy")):
        spec["dnsPolicy"] = "ClusterFirst"
    if _is_zero(get("restartPolicy")):
        spec["restartPolicy"] = "Always"
    if get("securityContext") is None:
        spec["securityContext"] = {}
    if get("terminationGracePeriodSeconds") is None:
        spec["terminationGracePeriodSeconds"] = DEFAULT_TERMINATION_GRACE_PERIOD_S
    if _is_zero(get("schedulerName")):
        spec["schedulerName"] = "default-scheduler"
    for volume in _items(spec, "volumes"):
        default_volume(volume)
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in _items(spec, key):
            default_container(container)


def default_pod(pod: dict[str, JSON]) -> None:
    """SetDefaults_Pod (requests from limits, enableServiceLinks, host-network ports), then the
    pod spec. Pod only: templates get ``default_pod_spec`` alone."""
    spec = _child(pod, "spec")
    if spec is None:
        return
    for key in ("containers", "initContainers"):
        for container in _items(spec, key):
            if "resources" in container:
                _default_requests_from_limits(container)
    _set_if_nil(spec, "enableServiceLinks", True)
    if spec.get("hostNetwork") is True:
        for key in ("containers", "initContainers"):
            for container in _items(spec, key):
                for port in _items(container, "ports"):
                    if isinstance(port.get("containerPort"), int):
                        _set_if_zero(port, "hostPort", port["containerPort"])
    default_pod_spec(spec)


def _default_requests_from_limits(container: dict[str, JSON]) -> None:
    resources = _child(container, "resources")
    limits = _child(resources, "limits") if resources is not None else None
    if resources is None or limits is None:
        return
    requests = _child(resources, "requests")
    if requests is None:
        if resources.get("requests") is not None:
            return  # malformed: validation reports it
        requests = resources["requests"] = {}
    for name, quantity in limits.items():
        requests.setdefault(name, quantity)


def default_deployment(deployment: dict[str, JSON]) -> None:
    """apps/v1 SetDefaults_Deployment, then the pod template's spec."""
    spec = _child(deployment, "spec")
    if spec is None:
        return
    _set_if_nil(spec, "replicas", 1)
    strategy = spec.get("strategy")
    if strategy is None:
        strategy = spec["strategy"] = {}
    if isinstance(strategy, dict):
        _set_if_zero(strategy, "type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            _set_if_nil(strategy, "rollingUpdate", {})
            rolling = _child(strategy, "rollingUpdate")
            if rolling is not None:
                _set_if_nil(rolling, "maxUnavailable", "25%")
                _set_if_nil(rolling, "maxSurge", "25%")
    _set_if_nil(spec, "revisionHistoryLimit", 10)
    _set_if_nil(spec, "progressDeadlineSeconds", 600)
    _default_template(spec)


def _default_template(spec: dict[str, JSON]) -> None:
    """The generated walk into ``spec.template.spec`` (every apps/v1 workload), and the
    template's metadata as Go writes it back (``embedded_meta``)."""
    template = _child(spec, "template")
    if template is not None:
        embedded_meta(template)
    pod_spec = _child(template, "spec") if template is not None else None
    if pod_spec is not None:
        default_pod_spec(pod_spec)


_META_BEFORE_CREATION = ("name", "generateName", "namespace", "selfLink", "uid",
                         "resourceVersion", "generation")


def embedded_meta(holder: dict[str, JSON]) -> None:
    """An embedded ObjectMeta (a pod or claim template's) as kube encodes it: the struct is
    never omitted and its zero ``creationTimestamp`` is written as ``null`` (metav1.Time has
    no omitempty effect), in ObjectMeta's field order."""
    meta = holder.get("metadata")
    if meta is None:
        holder["metadata"] = {"creationTimestamp": None}
    elif isinstance(meta, dict) and "creationTimestamp" not in meta:
        before = {k: v for k, v in meta.items() if k in _META_BEFORE_CREATION}
        after = {k: v for k, v in meta.items() if k not in _META_BEFORE_CREATION}
        holder["metadata"] = {**before, "creationTimestamp": None, **after}


def default_replica_set(replica_set: dict[str, JSON]) -> None:
    """apps/v1 SetDefaults_ReplicaSet (``replicas: 1``), then the pod template's spec."""
    spec = _child(replica_set, "spec")
    if spec is None:
        return
    _set_if_nil(spec, "replicas", 1)
    _default_template(spec)


def default_replication_controller(controller: dict[str, JSON]) -> None:
    """core/v1 SetDefaults_ReplicationController: an empty selector, and empty labels of the
    controller itself, take the template's labels; ``replicas: 1``; then the generated walk
    into the template's pod spec (SetObjectDefaults_ReplicationController). A template with no
    labels leaves both alone (an empty Go map is omitted anyway)."""
    spec = _child(controller, "spec")
    if spec is None:
        return
    template = _child(spec, "template")
    template_meta = _child(template, "metadata") if template is not None else None
    labels = _child(template_meta, "labels") if template_meta is not None else None
    if labels:
        if not spec.get("selector"):
            spec["selector"] = dict(labels)
        meta = _child(controller, "metadata")
        if meta is None:
            meta = controller["metadata"] = {}
        if not meta.get("labels"):
            meta["labels"] = dict(labels)
    _set_if_nil(spec, "replicas", 1)
    _default_template(spec)


def default_stateful_set(stateful_set: dict[str, JSON]) -> None:
    """apps/v1 SetDefaults_StatefulSet (StatefulSetAutoDeletePVC is on in v1.32), then the pod
    template's spec and each volume claim template (SetDefaults_PersistentVolumeClaim: phase
    Pending; SetDefaults_PersistentVolumeClaimSpec: volumeMode Filesystem)."""
    spec = _child(stateful_set, "spec")
    if spec is None:
        return
    _set_if_zero(spec, "podManagementPolicy", "OrderedReady")
    strategy = spec.get("updateStrategy")
    if strategy is None:
        strategy = spec["updateStrategy"] = {}
    if isinstance(strategy, dict):
        if _is_zero(strategy.get("type")):
            strategy["type"] = "RollingUpdate"
            _set_if_nil(strategy, "rollingUpdate", {})
        rolling = _child(strategy, "rollingUpdate")
        if strategy["type"] == "RollingUpdate" and rolling is not None:
            _set_if_nil(rolling, "partition", 0)
    policy = spec.get("persistentVolumeClaimRetentionPolicy")
    if policy is None:
        policy = spec["persistentVolumeClaimRetentionPolicy"] = {}
    if isinstance(policy, dict):
        _set_if_zero(policy, "whenDeleted", "Retain")
        _set_if_zero(policy, "whenScaled", "Retain")
    _set_if_nil(spec, "replicas", 1)
    _set_if_nil(spec, "revisionHistoryLimit", 10)
    _default_template(spec)
    _default_claim_templates(spec)


def _default_claim_templates(spec: dict[str, JSON]) -> None:
    claims = spec.get("volumeClaimTemplates")
    if not isinstance(claims, list):
        return
    # kube writes each template's TypeMeta (``kind: PersistentVolumeClaim``, ``apiVersion:
    # v1``) when it converts the StatefulSet back to apps/v1: GitOps tools know the diff
    spec["volumeClaimTemplates"] = [
        {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
         **{k: v for k, v in claim.items() if k not in ("kind", "apiVersion")}}
        if isinstance(claim, dict) else claim for claim in claims]
    for claim in _items(spec, "volumeClaimTemplates"):
        embedded_meta(claim)
        status = claim.get("status")
        if status is None:
            status = claim["status"] = {}
        if isinstance(status, dict):
            _set_if_zero(status, "phase", "Pending")
        claim_spec = _child(claim, "spec")
        if claim_spec is not None:
            _set_if_nil(claim_spec, "volumeMode", "Filesystem")


def default_daemon_set(daemon_set: dict[str, JSON]) -> None:
    """apps/v1 SetDefaults_DaemonSet (RollingUpdate with maxUnavailable 1 and maxSurge 0,
    ``revisionHistoryLimit: 10``), then the pod template's spec."""
    spec = _child(daemon_set, "spec")
    if spec is None:
        return
    strategy = spec.get("updateStrategy")
    if strategy is None:
        strategy = spec["updateStrategy"] = {}
    if isinstance(strategy, dict):
        _set_if_zero(strategy, "type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            _set_if_nil(strategy, "rollingUpdate", {})
            rolling = _child(strategy, "rollingUpdate")
            if rolling is not None:
                _set_if_nil(rolling, "maxUnavailable", 1)
                _set_if_nil(rolling, "maxSurge", 0)
    _set_if_nil(spec, "revisionHistoryLimit", 10)
    _default_template(spec)


# --- services and the rest -----------------------------------------------------------------------

def default_service(service: dict[str, JSON]) -> None:
    """core/v1 SetDefaults_Service (affinity, type, ports, traffic policies, LB fields)."""
    spec = _child(service, "spec")
    if spec is None:
        return
    _default_session_affinity(spec)
    _set_if_zero(spec, "type", "ClusterIP")
    for port in _items(spec, "ports"):
        _set_if_zero(port, "protocol", "TCP")
        if _is_zero(port.get("targetPort")) and isinstance(port.get("port"), int):
            port["targetPort"] = port["port"]
    kind = spec["type"]
    externally_accessible = kind in _EXTERNAL_TYPES or (
        kind == "ClusterIP" and bool(spec.get("externalIPs")))  # service.ExternallyAccessible
    if externally_accessible:
        _set_if_zero(spec, "externalTrafficPolicy", "Cluster")
    if kind in ("ClusterIP", *_EXTERNAL_TYPES):
        _set_if_nil(spec, "internalTrafficPolicy", "Cluster")
    if kind == "LoadBalancer":
        _set_if_nil(spec, "allocateLoadBalancerNodePorts", True)
        status = _child(service, "status")
        balancer = _child(status, "loadBalancer") if status is not None else None
        for ingress in _items(balancer, "ingress"):
            if ingress.get("ip") and ingress.get("ipMode") is None:
                ingress["ipMode"] = "VIP"


def _default_session_affinity(spec: dict[str, JSON]) -> None:
    _set_if_zero(spec, "sessionAffinity", "None")
    if spec["sessionAffinity"] == "None":
        spec.pop("sessionAffinityConfig", None)
    elif spec["sessionAffinity"] == "ClientIP":
        config = _child(spec, "sessionAffinityConfig") or {}
        client_ip = _child(config, "clientIP") or {}
        if client_ip.get("timeoutSeconds") is None:
            spec["sessionAffinityConfig"] = {
                "clientIP": {"timeoutSeconds": DEFAULT_CLIENT_IP_AFFINITY_S}}


def default_node(node: dict[str, JSON]) -> None:
    """SetDefaults_NodeStatus: ``allocatable`` copies ``capacity`` when absent."""
    status = _child(node, "status")
    capacity = _child(status, "capacity") if status is not None else None
    if status is not None and capacity and status.get("allocatable") is None:
        status["allocatable"] = dict(capacity)


def default_secret(secret: dict[str, JSON]) -> None:
    """SetDefaults_Secret: ``type: Opaque``; and what decoding a v1 Secret does to it
    (``Convert_v1_Secret_To_core_Secret``): each ``stringData`` value overwrites ``data``'s
    under its key, base64-encoded, and ``stringData`` is gone (the stored Secret has no such
    field). Values of the wrong JSON type are left for the decode checks."""
    _set_if_zero(secret, "type", "Opaque")
    string_data = secret.get("stringData")
    if not isinstance(string_data, dict):
        return
    if string_data:
        data = secret.get("data")
        if data is None:
            data = secret["data"] = {}
        if isinstance(data, dict):
            for key, value in string_data.items():
                if isinstance(value, str):
                    data[key] = base64.b64encode(value.encode()).decode()
    if all(isinstance(value, str) for value in string_data.values()):
        del secret["stringData"]


def default_network_policy(policy: dict[str, JSON]) -> None:
    """networking/v1 SetDefaults_NetworkPolicy and SetDefaults_NetworkPolicyPort."""
    spec = _child(policy, "spec")
    if spec is None:
        return
    if not spec.get("policyTypes"):
        egress = spec.get("egress")
        spec["policyTypes"] = ["Ingress", "Egress"] if egress else ["Ingress"]
    for direction in ("ingress", "egress"):
        for rule in _items(spec, direction):
            for port in _items(rule, "ports"):
                _set_if_nil(port, "protocol", "TCP")


def default_endpoint_slice(slice_: dict[str, JSON]) -> None:
    """discovery/v1 SetDefaults_EndpointPort: ``name: ""``, ``protocol: TCP``."""
    for port in _items(slice_, "ports"):
        _set_if_nil(port, "name", "")
        _set_if_nil(port, "protocol", "TCP")


def default_binding(binding: dict[str, JSON]) -> None:
    """rbac/v1 SetDefaults_RoleBinding / _ClusterRoleBinding (an empty ``roleRef.apiGroup`` is
    ``rbac.authorization.k8s.io``) and SetDefaults_Subject (an empty ``apiGroup`` of a User or
    Group subject is ``rbac.authorization.k8s.io``; a ServiceAccount's stays "")."""
    role_ref = _child(binding, "roleRef")
    if role_ref is not None and not role_ref.get("apiGroup"):
        role_ref["apiGroup"] = _RBAC_GROUP
    for subject in _items(binding, "subjects"):
        if not subject.get("apiGroup") and subject.get("kind") in ("User", "Group"):
            subject["apiGroup"] = _RBAC_GROUP


_RBAC_GROUP = "rbac.authorization.k8s.io"

# --- quota, limits and storage (core/v1 and storage/v1 defaults.go) ----------------------------

def default_persistent_volume_claim(claim: dict[str, JSON]) -> None:
    """SetDefaults_PersistentVolumeClaim (``status.phase`` Pending) and _ClaimSpec
    (``spec.volumeMode`` Filesystem)."""
    spec = _child(claim, "spec")
    if spec is not None:
        _set_if_nil(spec, "volumeMode", "Filesystem")
    status = _child(claim, "status")
    if status is not None:
        _set_if_zero(status, "phase", "Pending")


def default_persistent_volume(volume: dict[str, JSON]) -> None:
    """SetDefaults_PersistentVolume: reclaim policy Retain, volumeMode Filesystem, phase
    Pending; SetDefaults_HostPathVolumeSource: an unset hostPath ``type`` is ""."""
    spec = _child(volume, "spec")
    if spec is not None:
        _set_if_zero(spec, "persistentVolumeReclaimPolicy", "Retain")
        _set_if_nil(spec, "volumeMode", "Filesystem")
        host_path = _child(spec, "hostPath")
        if host_path is not None:
            _set_if_nil(host_path, "type", "")
    status = _child(volume, "status")
    if status is not None:
        _set_if_zero(status, "phase", "Pending")


def default_storage_class(storage_class: dict[str, JSON]) -> None:
    """storage/v1 SetDefaults_StorageClass: reclaimPolicy Delete, volumeBindingMode
    Immediate."""
    _set_if_nil(storage_class, "reclaimPolicy", "Delete")
    _set_if_nil(storage_class, "volumeBindingMode", "Immediate")


def default_limit_range(limit_range: dict[str, JSON]) -> None:
    """SetDefaults_LimitRangeItem, for Container items: ``default`` from ``max``, then
    ``defaultRequest`` from ``default``, then from ``min`` (empty lists stay out: omitempty)."""
    for item in _items(_child(limit_range, "spec"), "limits"):
        if item.get("type") != "Container":
            continue
        default = dict(_child(item, "default") or {})
        request = dict(_child(item, "defaultRequest") or {})
        for key, value in (_child(item, "max") or {}).items():
            default.setdefault(key, value)
        for key, value in default.items():
            request.setdefault(key, value)
        for key, value in (_child(item, "min") or {}).items():
            request.setdefault(key, value)
        if default:
            item["default"] = default
        if request:
            item["defaultRequest"] = request

# --- issue 20: batch/v1, policy/v1, scheduling.k8s.io/v1, networking.k8s.io/v1 IngressClass ------

def _default_pod_failure_policy(spec: dict[str, JSON]) -> None:
    """SetDefaults_PodFailurePolicyOnPodConditionsPattern: a pattern's ``status`` is True."""
    policy = _child(spec, "podFailurePolicy")
    for rule in _items(policy, "rules"):
        for pattern in _items(rule, "onPodConditions"):
            _set_if_zero(pattern, "status", "True")


def _default_template_pod_spec(spec: dict[str, JSON]) -> None:
    template = _child(spec, "template")
    pod_spec = _child(template, "spec") if template is not None else None
    if pod_spec is not None:
        default_pod_spec(pod_spec)


def default_job(job: dict[str, JSON]) -> None:
    """batch/v1 SetDefaults_Job (v1.32: completions and parallelism 1 when both are unset,
    backoffLimit 6 (MaxInt32 with backoffLimitPerIndex), the template's labels as the Job's
    when it has none, completionMode NonIndexed, suspend false, podReplacementPolicy
    TerminatingOrFailed (Failed with a podFailurePolicy), manualSelector false), then the pod
    template's spec. The spec is a struct: defaulted even when the body has none."""
    if job.get("spec") is None:
        job["spec"] = {}
    spec = _child(job, "spec")
    if spec is None:
        return
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    _set_if_nil(spec, "parallelism", 1)
    _set_if_nil(spec, "backoffLimit",
                2**31 - 1 if spec.get("backoffLimitPerIndex") is not None else 6)
    template = _child(spec, "template")
    meta = _child(template, "metadata") if template is not None else None
    labels = meta.get("labels") if meta is not None else None
    job_meta = _child(job, "metadata")
    if isinstance(labels, dict) and job_meta is not None and not job_meta.get("labels"):
        job_meta["labels"] = dict(labels)
    _set_if_nil(spec, "completionMode", "NonIndexed")
    _set_if_nil(spec, "suspend", False)
    _default_pod_failure_policy(spec)
    _set_if_nil(spec, "podReplacementPolicy",
                "Failed" if spec.get("podFailurePolicy") is not None else "TerminatingOrFailed")
    _set_if_nil(spec, "manualSelector", False)
    _default_template_pod_spec(spec)


def default_cron_job(cron_job: dict[str, JSON]) -> None:
    """batch/v1 SetDefaults_CronJob (concurrencyPolicy Allow, suspend false, history limits 3
    and 1); the job template gets only its pod template's and pod failure policy's defaults
    (SetDefaults_Job is the Job type's)."""
    if cron_job.get("spec") is None:
        cron_job["spec"] = {}
    spec = _child(cron_job, "spec")
    if spec is None:
        return
    _set_if_zero(spec, "concurrencyPolicy", "Allow")
    _set_if_nil(spec, "suspend", False)
    _set_if_nil(spec, "successfulJobsHistoryLimit", 3)
    _set_if_nil(spec, "failedJobsHistoryLimit", 1)
    job_template = _child(spec, "jobTemplate")
    job_spec = _child(job_template, "spec") if job_template is not None else None
    if job_spec is not None:
        _default_pod_failure_policy(job_spec)
        _default_template_pod_spec(job_spec)


def default_priority_class(priority_class: dict[str, JSON]) -> None:
    """scheduling/v1 SetDefaults_PriorityClass: preemptionPolicy PreemptLowerPriority."""
    _set_if_nil(priority_class, "preemptionPolicy", "PreemptLowerPriority")


def default_ingress_class(ingress_class: dict[str, JSON]) -> None:
    """networking/v1 SetDefaults_IngressClass: parameters without a scope are Cluster's."""
    spec = _child(ingress_class, "spec")
    parameters = _child(spec, "parameters") if spec is not None else None
    if parameters is not None:
        _set_if_nil(parameters, "scope", "Cluster")


def default_api_service(api_service: dict[str, JSON]) -> None:
    """apiregistration/v1 SetDefaults_ServiceReference: a service's port is 443."""
    spec = _child(api_service, "spec")
    service = _child(spec, "service") if spec is not None else None
    if service is not None:
        _set_if_nil(service, "port", 443)


def default_endpoints(endpoints: dict[str, JSON]) -> None:
    """core/v1 SetDefaults_Endpoints: a port without a protocol gets TCP."""
    for subset in _items(endpoints, "subsets"):
        for port in _items(subset, "ports"):
            _set_if_zero(port, "protocol", "TCP")


# autoscaling/v2 GenerateHPAScaleUpRules / GenerateHPAScaleDownRules: what a rule that behavior
# names gets where it says nothing (scale-down keeps no window: the controller's 300 s applies)
_SCALE_UP_RULES: Mapping[str, JSON] = MappingProxyType({
    "stabilizationWindowSeconds": 0, "selectPolicy": "Max",
    "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                 {"type": "Percent", "value": 100, "periodSeconds": 15}]})
_SCALE_DOWN_RULES: Mapping[str, JSON] = MappingProxyType({
    "selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]})


def _hpa_rules(given: JSON, defaults: Mapping[str, JSON]) -> dict[str, JSON]:
    """``copyHPAScalingRules``: the defaults, with each field the object sets kept."""
    out = copy_json(dict(defaults))
    if isinstance(given, dict):
        for key in ("selectPolicy", "stabilizationWindowSeconds", "policies"):
            if given.get(key) is not None:
                out[key] = given[key]
    order = ("stabilizationWindowSeconds", "selectPolicy", "policies")  # Go struct order
    return {key: out[key] for key in order if key in out}


def default_horizontal_pod_autoscaler(hpa: dict[str, JSON]) -> None:
    """autoscaling/v2 SetDefaults_HorizontalPodAutoscaler (minReplicas 1, a CPU 80%
    utilization metric when none, the behavior's rules filled in when behavior is set);
    autoscaling/v1's sets only minReplicas (its CPU default comes with the conversion).
    Either version's decode drops v2's round-trip annotations where v2 is read."""
    spec = _child(hpa, "spec")
    if spec is None:
        return
    _set_if_nil(spec, "minReplicas", 1)
    if hpa.get("apiVersion") == hpa_conversion.V1:
        return
    hpa_conversion.drop_round_trip_annotations(hpa)
    if not spec.get("metrics"):
        spec["metrics"] = [{"type": "Resource", "resource": {"name": "cpu", "target": {
            "type": "Utilization", "averageUtilization": hpa_conversion.DEFAULT_CPU_UTILIZATION}}}]
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        behavior["scaleUp"] = _hpa_rules(behavior.get("scaleUp"), _SCALE_UP_RULES)
        behavior["scaleDown"] = _hpa_rules(behavior.get("scaleDown"), _SCALE_DOWN_RULES)


KIND_DEFAULTERS: Mapping[str, tuple[Defaulter, ...]] = MappingProxyType({
    "core/pods": (default_pod,),
    "apps/deployments": (default_deployment,),
    "apps/replicasets": (default_replica_set,),
    "core/replicationcontrollers": (default_replication_controller,),
    "apps/statefulsets": (default_stateful_set,),
    "apps/daemonsets": (default_daemon_set,),
    "apps/controllerrevisions": (),
    "core/services": (default_service,),
    "core/nodes": (default_node,),
    "core/secrets": (default_secret,),
    "networking.k8s.io/networkpolicies": (default_network_policy,),
    "discovery.k8s.io/endpointslices": (default_endpoint_slice,),
    "core/endpoints": (default_endpoints,),
    "apiextensions.k8s.io/customresourcedefinitions": (default_crd,),
    "rbac.authorization.k8s.io/rolebindings": (default_binding,),
    "rbac.authorization.k8s.io/clusterrolebindings": (default_binding,),
    "rbac.authorization.k8s.io/roles": (),
    "certificates.k8s.io/certificatesigningrequests": (),  # certificates/v1 has no defaulters
    "rbac.authorization.k8s.io/clusterroles": (),
    "core/persistentvolumeclaims": (default_persistent_volume_claim,),
    "core/persistentvolumes": (default_persistent_volume,),
    "storage.k8s.io/storageclasses": (default_storage_class,),
    "core/limitranges": (default_limit_range,),
    "core/resourcequotas": (),
    "batch/jobs": (default_job,),
    "batch/cronjobs": (default_cron_job,),
    "policy/poddisruptionbudgets": (),  # policy/v1 has no defaulter of its own
    "scheduling.k8s.io/priorityclasses": (default_priority_class,),
    "networking.k8s.io/ingressclasses": (default_ingress_class,),
    "apiregistration.k8s.io/apiservices": (default_api_service,),
    "autoscaling/horizontalpodautoscalers": (default_horizontal_pod_autoscaler,),
    # No visible defaults: ConfigMap's ``data: {}`` is dropped by omitempty; Ingress has none
    # (``pathType`` is required); ServiceAccount, Lease and both Events have no defaulter.
    "core/configmaps": (),
    "networking.k8s.io/ingresses": (),
    "core/serviceaccounts": (),
    "coordination.k8s.io/leases": (),
    "core/events": (),
    "events.k8s.io/events": (),
})
"""Hand-written defaulters per ``Resource.id``, run in order after the schema defaults."""


def apply_kind_defaults(resource: Resource, obj: Mapping[str, JSON], *,
                        owned: bool = False) -> dict[str, JSON]:
    """``obj`` with kube's defaults for ``resource`` filled in (a new object; ``obj`` untouched
    unless ``owned``: the caller's own copy, then defaulted in place where it can be).

    Schema ``default`` values first, then ``KIND_DEFAULTERS[resource.id]``.
    Idempotent. Never raises for malformed bodies: fields of the wrong JSON type are skipped.
    """
    out: dict[str, JSON] = (obj if owned else copy_json(obj)) if type(obj) is dict \
        else copy_json(dict(obj))
    if resource.crd is not None:
        custom_resources.default(resource, out)
        return out
    try:
        schema = schema_validate.builtin_root(resource.api_version, resource.kind)
    except KeyError:  # a kind without a generated schema
        pass
    else:
        schema_validate.fill_defaults(schema, out)  # on our own copy
    for defaulter in KIND_DEFAULTERS.get(resource.id, ()):
        defaulter(out)
    return out


__all__ = ["KIND_DEFAULTERS", "Defaulter", "apply_kind_defaults", "default_container",
           "default_daemon_set", "default_deployment", "default_pod", "default_pod_spec",
           "default_probe", "default_replica_set", "default_replication_controller",
           "default_service", "default_stateful_set",
           "default_volume", "image_tag"]
