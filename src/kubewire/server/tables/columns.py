"""Printer columns per kind, as data: a table keyed by the registry entry's ``Resource.id``.

A column is a name, an OpenAPI type, a priority (1: only with ``-o wide``), a path into the
object and the name of a cell formatter. Built-in paths are dotted (``spec.nodeName``; empty
means the whole object); a path starting with ``.`` is a CRD ``additionalPrinterColumns``
JSONPath evaluated with kube's custom-resource rules (formatter ``crd``). Descriptions stay
empty: kube fills them with API prose that clients never show.

Source: ``kubernetes/kubernetes:pkg/printers/internalversion/printers.go`` (``AddHandlers``).
A kind served from a CRD gets its version's ``additionalPrinterColumns`` (``printer_for``), or
kube's default for custom kinds, ``Name`` + ``Age``; other kinds without an entry get
``Name`` + ``Created At``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from kubewire.json_types import JSON
from kubewire.resources import Resource
from kubewire.server.tables import apiservice_cells as apiservices
from kubewire.server.tables import autoscaling_cells as autoscaling
from kubewire.server.tables import cells
from kubewire.server.tables import kind_cells as kinds
from kubewire.server.tables import pod_cells as pods
from kubewire.server.tables import storage_cells as storage
from kubewire.server.tables import workload_cells as workloads
from kubewire.server.tables.cells import Cell, get_path
from kubewire.server.tables.jsonpath import crd_cell

CellFormatter = Callable[[JSON, datetime], Cell]


@dataclass(frozen=True, slots=True)
class Column:
    """One printer column: how it is declared and how its cell is computed."""

    name: str
    path: str = ""
    cell: str = "text"
    type: str = "string"
    format: str = ""
    priority: int = 0
    description: str = ""

    def definition(self) -> dict[str, JSON]:
        """The ``TableColumnDefinition``; all five keys are always present on the wire."""
        return {"name": self.name, "type": self.type, "format": self.format,
                "description": self.description, "priority": self.priority}


@dataclass(frozen=True, slots=True)
class PrinterSpec:
    """A kind's columns and, optionally, the named rule for its rows' ``conditions``."""

    columns: tuple[Column, ...]
    conditions: str = ""


CELL_FORMATTERS: Mapping[str, CellFormatter] = MappingProxyType({
    "text": cells.text, "text_or_none": cells.text_or_none, "set_or_none": cells.set_or_none,
    "text_or_unknown": cells.text_or_unknown, "integer": cells.integer, "count": cells.count,
    "age": cells.age, "rfc3339": cells.rfc3339, "labels": cells.labels,
    "selector": cells.selector, "selector_or_none": cells.selector_or_none,
    "container_names": cells.container_names, "container_images": cells.container_images,
    "replicas_ready": cells.replicas_ready,
    "pod_ready": pods.pod_ready, "pod_status": pods.pod_status,
    "pod_restarts": pods.pod_restarts, "pod_ip": pods.pod_ip,
    "pod_readiness_gates": pods.pod_readiness_gates,
    "service_cluster_ip": kinds.service_cluster_ip,
    "service_external_ip": kinds.service_external_ip, "service_ports": kinds.service_ports,
    "node_status": kinds.node_status, "node_roles": kinds.node_roles,
    "node_internal_ip": kinds.node_internal_ip, "node_external_ip": kinds.node_external_ip,
    "ingress_hosts": kinds.ingress_hosts, "ingress_address": kinds.ingress_address,
    "ingress_ports": kinds.ingress_ports, "slice_ports": kinds.slice_ports,
    "slice_endpoints": kinds.slice_endpoints, "endpoints_endpoints": kinds.endpoints_endpoints,
    "configmap_data": kinds.configmap_data,
    "event_last_seen": kinds.event_last_seen, "event_first_seen": kinds.event_first_seen,
    "event_count": kinds.event_count, "event_object": kinds.event_object,
    "event_subobject": kinds.event_subobject, "event_source": kinds.event_source,
    "event_message": kinds.event_message,
    "controller_of": kinds.controller_of,
    "binding_role": kinds.binding_role, "binding_users": kinds.binding_users,
    "binding_groups": kinds.binding_groups,
    "binding_service_accounts": kinds.binding_service_accounts,
    "csr_duration": kinds.csr_duration, "csr_condition": kinds.csr_condition,
    "quota_request": storage.quota_request, "quota_limit": storage.quota_limit,
    "access_modes": storage.access_modes, "volume_status": storage.volume_status,
    "storage_class": storage.storage_class, "or_unset": storage.or_unset,
    "claim_capacity": storage.claim_capacity, "claim_access_modes": storage.claim_access_modes,
    "volume_capacity": storage.volume_capacity, "volume_claim": storage.volume_claim,
    "class_name": storage.class_name, "reclaim_policy": storage.reclaim_policy,
    "binding_mode": storage.binding_mode, "allow_expansion": storage.allow_expansion,
    # issue 20 kinds (workload_cells)
    "job_status": workloads.job_status, "job_completions": workloads.job_completions,
    "job_duration": workloads.job_duration, "bool_pointer": workloads.bool_pointer,
    "last_schedule": workloads.last_schedule,
    "text_or_none_if_unset": workloads.text_or_none_if_unset,
    "int_or_string_or_na": workloads.int_or_string_or_na, "true_false": workloads.true_false,
    "ingress_class_parameters": workloads.ingress_class_parameters,
    "hpa_reference": autoscaling.hpa_reference, "hpa_targets": autoscaling.hpa_targets,
    "hpa_min_pods": autoscaling.hpa_min_pods,
    "apiservice_service": apiservices.apiservice_service,
    "apiservice_available": apiservices.apiservice_available,
})
"""Named cell formatters ``(value at path, now) -> cell``."""

ROW_CONDITIONS: Mapping[str, Callable[[JSON], list[dict[str, str]]]] = MappingProxyType({
    "pod": pods.pod_row_conditions,
})

NAME = Column("Name", "metadata.name", format="name")
AGE = Column("Age", "metadata.creationTimestamp", "age")
CREATED_AT = Column("Created At", "metadata.creationTimestamp", "rfc3339", type="date")
CONTAINERS = Column("Containers", "spec.template.spec.containers", "container_names", priority=1)
IMAGES = Column("Images", "spec.template.spec.containers", "container_images", priority=1)


def wide(name: str, path: str = "", cell: str = "text") -> Column:
    """A priority-1 column, shown by ``kubectl get -o wide`` only."""
    return Column(name, path, cell, priority=1)


def crd_column(name: str, json_path: str, column_type: str, priority: int = 0) -> Column:
    """An ``additionalPrinterColumns`` entry; the description is kube's generated one."""
    return Column(name, json_path, "crd", type=column_type, priority=priority,
                  description=f"Custom resource definition column (in JSONPath format): "
                              f"{json_path}")


CRD_AGE = crd_column("Age", ".metadata.creationTimestamp", "date")

_BINDINGS = PrinterSpec((
    NAME, Column("Role", "roleRef", "binding_role"), AGE,
    wide("Users", "subjects", "binding_users"), wide("Groups", "subjects", "binding_groups"),
    wide("ServiceAccounts", "subjects", "binding_service_accounts"),
))

PRINTERS: Mapping[str, PrinterSpec] = MappingProxyType({
    "core/namespaces": PrinterSpec((NAME, Column("Status", "status.phase"), AGE)),
    "core/nodes": PrinterSpec((
        NAME, Column("Status", cell="node_status"), Column("Roles", cell="node_roles"), AGE,
        Column("Version", "status.nodeInfo.kubeletVersion"),
        wide("Internal-IP", cell="node_internal_ip"),
        wide("External-IP", cell="node_external_ip"),
        wide("OS-Image", "status.nodeInfo.osImage", "text_or_unknown"),
        wide("Kernel-Version", "status.nodeInfo.kernelVersion", "text_or_unknown"),
        wide("Container-Runtime", "status.nodeInfo.containerRuntimeVersion", "text_or_unknown"),
    )),
    "core/pods": PrinterSpec((
        NAME, Column("Ready", cell="pod_ready"), Column("Status", cell="pod_status"),
        Column("Restarts", cell="pod_restarts"), AGE, wide("IP", cell="pod_ip"),
        wide("Node", "spec.nodeName", "text_or_none"),
        wide("Nominated Node", "status.nominatedNodeName", "text_or_none"),
        wide("Readiness Gates", cell="pod_readiness_gates"),
    ), conditions="pod"),
    "core/services": PrinterSpec((
        NAME, Column("Type", "spec.type"), Column("Cluster-IP", cell="service_cluster_ip"),
        Column("External-IP", cell="service_external_ip"),
        Column("Port(s)", cell="service_ports"), AGE, wide("Selector", "spec.selector", "labels"),
    )),
    "core/configmaps": PrinterSpec((NAME, Column("Data", cell="configmap_data"), AGE)),
    "core/secrets": PrinterSpec((
        NAME, Column("Type", "type"), Column("Data", "data", "count"), AGE)),
    "core/serviceaccounts": PrinterSpec((NAME, Column("Secrets", "secrets", "count"), AGE)),
    "coordination.k8s.io/leases": PrinterSpec((
        NAME, Column("Holder", "spec.holderIdentity"), AGE)),
    "apps/deployments": PrinterSpec((
        NAME, Column("Ready", cell="replicas_ready"),
        Column("Up-to-date", "status.updatedReplicas", "integer"),
        Column("Available", "status.availableReplicas", "integer"), AGE, CONTAINERS, IMAGES,
        wide("Selector", "spec.selector", "selector"),
    )),
    # printers.go replicaSetColumnDefinitions, statefulSetColumnDefinitions,
    # daemonSetColumnDefinitions, controllerRevisionColumnDefinition
    "apps/replicasets": PrinterSpec((
        NAME, Column("Desired", "spec.replicas", "integer", type="integer"),
        Column("Current", "status.replicas", "integer", type="integer"),
        Column("Ready", "status.readyReplicas", "integer", type="integer"), AGE, CONTAINERS,
        IMAGES, wide("Selector", "spec.selector", "selector_or_none"),
    )),
    # printers.go replicationControllerColumnDefinitions: the selector is a label map
    # (labels.FormatLabels)
    "core/replicationcontrollers": PrinterSpec((
        NAME, Column("Desired", "spec.replicas", "integer", type="integer"),
        Column("Current", "status.replicas", "integer", type="integer"),
        Column("Ready", "status.readyReplicas", "integer", type="integer"), AGE, CONTAINERS,
        IMAGES, wide("Selector", "spec.selector", "labels"),
    )),
    "apps/statefulsets": PrinterSpec((
        NAME, Column("Ready", cell="replicas_ready"), AGE, CONTAINERS, IMAGES,
    )),
    "apps/daemonsets": PrinterSpec((
        NAME, Column("Desired", "status.desiredNumberScheduled", "integer", type="integer"),
        Column("Current", "status.currentNumberScheduled", "integer", type="integer"),
        Column("Ready", "status.numberReady", "integer", type="integer"),
        Column("Up-to-date", "status.updatedNumberScheduled", "integer", type="integer"),
        Column("Available", "status.numberAvailable", "integer", type="integer"),
        Column("Node Selector", "spec.template.spec.nodeSelector", "labels"), AGE, CONTAINERS,
        IMAGES, wide("Selector", "spec.selector", "selector_or_none"),
    )),
    "apps/controllerrevisions": PrinterSpec((
        NAME, Column("Controller", cell="controller_of"),
        Column("Revision", "revision", "integer"), AGE,
    )),
    "events.k8s.io/events": PrinterSpec((
        Column("Last Seen", cell="event_last_seen"), Column("Type", "type"),
        Column("Reason", "reason"), Column("Object", cell="event_object"),
        wide("Subobject", cell="event_subobject"), wide("Source", cell="event_source"),
        Column("Message", cell="event_message"), wide("First Seen", cell="event_first_seen"),
        wide("Count", cell="event_count"),
        Column("Name", "metadata.name", format="name", priority=1),
    )),
    "networking.k8s.io/ingresses": PrinterSpec((
        NAME, Column("Class", "spec.ingressClassName", "set_or_none"),
        Column("Hosts", "spec.rules", "ingress_hosts"),
        Column("Address", "status.loadBalancer", "ingress_address"),
        Column("Ports", "spec.tls", "ingress_ports"), AGE,
    )),
    "networking.k8s.io/networkpolicies": PrinterSpec((
        NAME, Column("Pod-Selector", "spec.podSelector", "selector_or_none"), AGE)),
    # printers.go endpointColumnDefinitions
    "core/endpoints": PrinterSpec((
        NAME, Column("Endpoints", "subsets", "endpoints_endpoints"), AGE)),
    "discovery.k8s.io/endpointslices": PrinterSpec((
        NAME, Column("AddressType", "addressType"), Column("Ports", "ports", "slice_ports"),
        Column("Endpoints", "endpoints", "slice_endpoints"), AGE,
    )),
    # printers.go roleBindingsColumnDefinitions (both bindings); Roles and ClusterRoles have no
    # printer handler: the default table
    "rbac.authorization.k8s.io/rolebindings": _BINDINGS,
    "rbac.authorization.k8s.io/clusterrolebindings": _BINDINGS,
    "rbac.authorization.k8s.io/roles": PrinterSpec((NAME, CREATED_AT)),
    "rbac.authorization.k8s.io/clusterroles": PrinterSpec((NAME, CREATED_AT)),
    # printers.go certificateSigningRequestColumnDefinitions
    "certificates.k8s.io/certificatesigningrequests": PrinterSpec((
        NAME, AGE, Column("SignerName", "spec.signerName", "text_or_none"),
        Column("Requestor", "spec.username"),
        Column("RequestedDuration", "spec.expirationSeconds", "csr_duration"),
        Column("Condition", "status", "csr_condition"),
    )),
    # printers.go resourceQuotaColumnDefinitions, persistentVolumeClaimColumnDefinitions,
    # persistentVolumeColumnDefinitions, storageClassColumnDefinitions; LimitRanges have the
    # default table (limitrange/storage: NewDefaultTableConvertor)
    "core/resourcequotas": PrinterSpec((
        NAME, AGE, Column("Request", "", "quota_request"), Column("Limit", "", "quota_limit"),
    )),
    "core/limitranges": PrinterSpec((NAME, CREATED_AT)),
    "core/persistentvolumeclaims": PrinterSpec((
        NAME, Column("Status", "", "volume_status"), Column("Volume", "spec.volumeName"),
        Column("Capacity", "", "claim_capacity"),
        Column("Access Modes", "", "claim_access_modes"),
        Column("StorageClass", "", "storage_class"),
        Column("VolumeAttributesClass", "spec.volumeAttributesClassName", "or_unset"), AGE,
        wide("VolumeMode", "spec.volumeMode", "or_unset"),
    )),
    "core/persistentvolumes": PrinterSpec((
        NAME, Column("Capacity", "spec.capacity", "volume_capacity"),
        Column("Access Modes", "spec.accessModes", "access_modes"),
        Column("Reclaim Policy", "spec.persistentVolumeReclaimPolicy"),
        Column("Status", "", "volume_status"), Column("Claim", "spec.claimRef", "volume_claim"),
        Column("StorageClass", "", "storage_class"),
        Column("VolumeAttributesClass", "spec.volumeAttributesClassName", "or_unset"),
        Column("Reason", "status.reason"), AGE,
        wide("VolumeMode", "spec.volumeMode", "or_unset"),
    )),
    "storage.k8s.io/storageclasses": PrinterSpec((
        Column("Name", "", "class_name", format="name"), Column("Provisioner", "provisioner"),
        Column("ReclaimPolicy", "reclaimPolicy", "reclaim_policy"),
        Column("VolumeBindingMode", "volumeBindingMode", "binding_mode"),
        Column("AllowVolumeExpansion", "allowVolumeExpansion", "allow_expansion"), AGE,
    )),
    # printers.go jobColumnDefinitions, cronJobColumnDefinitions,
    # podDisruptionBudgetColumnDefinitions, priorityClassColumnDefinitions,
    # ingressClassColumnDefinitions
    "batch/jobs": PrinterSpec((
        NAME, Column("Status", cell="job_status"), Column("Completions", cell="job_completions"),
        Column("Duration", "status", "job_duration"), AGE, CONTAINERS, IMAGES,
        wide("Selector", "spec.selector", "selector_or_none"),
    )),
    "batch/cronjobs": PrinterSpec((
        NAME, Column("Schedule", "spec.schedule"),
        Column("Timezone", "spec.timeZone", "text_or_none_if_unset"),
        Column("Suspend", "spec.suspend", "bool_pointer", type="boolean"),
        Column("Active", "status.active", "count", type="integer"),
        Column("Last Schedule", "status.lastScheduleTime", "last_schedule"), AGE,
        wide("Containers", "spec.jobTemplate.spec.template.spec.containers", "container_names"),
        wide("Images", "spec.jobTemplate.spec.template.spec.containers", "container_images"),
        wide("Selector", "spec.jobTemplate.spec.selector", "selector_or_none"),
    )),
    "policy/poddisruptionbudgets": PrinterSpec((
        NAME, Column("Min Available", "spec.minAvailable", "int_or_string_or_na"),
        Column("Max Unavailable", "spec.maxUnavailable", "int_or_string_or_na"),
        Column("Allowed Disruptions", "status.disruptionsAllowed", "integer", type="integer"),
        AGE,
    )),
    "scheduling.k8s.io/priorityclasses": PrinterSpec((
        NAME, Column("Value", "value", "integer", type="integer"),
        Column("Global-Default", "globalDefault", "true_false", type="boolean"), AGE,
        Column("PreemptionPolicy", "preemptionPolicy", "text_or_none_if_unset"),
    )),
    "networking.k8s.io/ingressclasses": PrinterSpec((
        NAME, Column("Controller", "spec.controller"),
        Column("Parameters", "spec.parameters", "ingress_class_parameters"), AGE,
    )),
    # printers.go horizontalPodAutoscalerColumnDefinitions (cells read either version)
    "autoscaling/horizontalpodautoscalers": PrinterSpec((
        NAME, Column("Reference", cell="hpa_reference"), Column("Targets", cell="hpa_targets"),
        Column("MinPods", "spec", "hpa_min_pods"),
        Column("MaxPods", "spec.maxReplicas", "integer", type="integer"),
        Column("Replicas", "status.currentReplicas", "integer", type="integer"), AGE,
    )),
    # kube-aggregator's own ConvertToTable (registry/apiservice/etcd/etcd.go), which describes
    # its two columns itself
    "apiregistration.k8s.io/apiservices": PrinterSpec((
        NAME,
        Column("Service", "spec.service", "apiservice_service",
               description="The reference to the service that hosts this API endpoint."),
        Column("Available", "status", "apiservice_available",
               description="Whether this service is available."),
        AGE,
    )),
    # apiextensions-apiserver serves CRDs with the default table (no printer handlers)
    "apiextensions.k8s.io/customresourcedefinitions": PrinterSpec((NAME, CREATED_AT)),
})
"""Printer specs by ``Resource.id``; every served kind has one."""

DEFAULT_BUILTIN = PrinterSpec((NAME, CREATED_AT))
DEFAULT_CUSTOM = PrinterSpec((NAME, CRD_AGE))


def printer_for(resource: Resource) -> PrinterSpec:
    """The kind's spec, or kube's default table for kinds without printer columns."""
    if resource.crd is not None:
        meta = resource.crd.get("metadata") or {}
        return _crd_printer(str(meta.get("uid")), int(meta.get("generation") or 0),
                            resource.version, _columns_of(resource.crd, resource.version))
    spec = PRINTERS.get(resource.id)
    if spec is not None:
        return spec
    return DEFAULT_CUSTOM if resource.is_custom else DEFAULT_BUILTIN


def _columns_of(crd: Mapping[str, Any], version: str) -> tuple[tuple[str, str, str, int, str,
                                                                     str], ...]:
    for entry in (crd.get("spec") or {}).get("versions") or ():
        if isinstance(entry, Mapping) and entry.get("name") == version:
            return tuple((str(c.get("name", "")), str(c.get("jsonPath", "")),
                          str(c.get("type", "")), int(c.get("priority") or 0),
                          str(c.get("format") or ""), str(c.get("description") or ""))
                         for c in entry.get("additionalPrinterColumns") or ()
                         if isinstance(c, Mapping))
    return ()


@lru_cache(maxsize=256)
def _crd_printer(uid: str, generation: int, version: str,
                 columns: tuple[tuple[str, str, str, int, str, str], ...]) -> PrinterSpec:
    """A CRD version's table (apiextensions-apiserver ``tableconvertor.New``): Name, then its
    ``additionalPrinterColumns`` when it declares any, else kube's default Age column."""
    if not columns:
        return DEFAULT_CUSTOM
    out = [NAME]
    for name, json_path, column_type, priority, fmt, description in columns:
        column = crd_column(name, json_path, column_type, priority)
        if fmt or description:
            column = replace(column, format=fmt or column.format,
                             description=description or column.description)
        out.append(column)
    return PrinterSpec(tuple(out))


def column_definitions(resource: Resource) -> list[dict[str, JSON]]:
    """``columnDefinitions`` with every priority (the server always prints wide)."""
    return [column.definition() for column in printer_for(resource).columns]


def _cell(column: Column, obj: JSON, now: datetime) -> Cell:
    if column.cell == "crd":
        return crd_cell(column.type, obj, column.path, now)
    return CELL_FORMATTERS[column.cell](get_path(obj, column.path), now)


def row_cells(resource: Resource, obj: JSON, now: datetime) -> list[Cell]:
    """One row's cells, in column order; ages are measured against ``now``."""
    return [_cell(column, obj, now) for column in printer_for(resource).columns]


def row_conditions(resource: Resource, obj: JSON) -> list[dict[str, str]]:
    """The row's ``conditions`` (kube omits the key when empty)."""
    rule = printer_for(resource).conditions
    return ROW_CONDITIONS[rule](obj) if rule else []
