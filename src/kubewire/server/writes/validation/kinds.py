"""Kind-specific validation rules, keyed by ``Resource.id`` (every served version of a kind).

Object-meta and schema-type checks apply to every kind (``kubewire.server.writes.validation.meta``,
``kubewire.schema``); the rules here are a kind's own strategy ``Validate``/``ValidateUpdate``
in kube. A validator gets the request's resource (its version may change the rules), the
object as the request wrote it and, for updates, the current object in the same version.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from kubewire.resources import Resource
from kubewire.server.writes.validation.apiregistration import (
    validate_api_service,
    validate_api_service_status,
)
from kubewire.server.writes.validation.apps import (
    validate_controller_revision,
    validate_daemon_set,
    validate_daemon_set_status,
    validate_deployment,
    validate_deployment_status,
    validate_replica_set,
    validate_replica_set_status,
    validate_stateful_set,
    validate_stateful_set_status,
)
from kubewire.server.writes.validation.autoscaling import (
    validate_horizontal_pod_autoscaler,
    validate_horizontal_pod_autoscaler_status,
)
from kubewire.server.writes.validation.batch import (
    cron_job_create_warnings,
    job_create_warnings,
    validate_cron_job,
    validate_job,
    validate_job_status,
)
from kubewire.server.writes.validation.certificates import (
    validate_certificate_signing_request,
    validate_certificate_signing_request_approval,
    validate_certificate_signing_request_status,
)
from kubewire.server.writes.validation.config import validate_config_map, validate_secret
from kubewire.server.writes.validation.crds import (
    validate_custom_resource_definition,
    validate_custom_resource_definition_status,
)
from kubewire.server.writes.validation.discovery import validate_endpoint_slice
from kubewire.server.writes.validation.endpoints import validate_endpoints
from kubewire.server.writes.validation.events import validate_event
from kubewire.server.writes.validation.ingress_class import validate_ingress_class
from kubewire.server.writes.validation.lease import validate_lease
from kubewire.server.writes.validation.networking import validate_ingress, validate_network_policy
from kubewire.server.writes.validation.node import validate_namespace, validate_node
from kubewire.server.writes.validation.pods.spec import validate_pod
from kubewire.server.writes.validation.policy import (
    validate_pod_disruption_budget,
    validate_pod_disruption_budget_status,
)
from kubewire.server.writes.validation.rbac import (
    validate_cluster_role,
    validate_cluster_role_binding,
    validate_role,
    validate_role_binding,
)
from kubewire.server.writes.validation.replication_controller import (
    validate_replication_controller,
    validate_replication_controller_status,
)
from kubewire.server.writes.validation.scheduling import validate_priority_class
from kubewire.server.writes.validation.service import validate_service
from kubewire.server.writes.validation.storage import (
    validate_limit_range,
    validate_persistent_volume,
    validate_persistent_volume_claim,
    validate_resource_quota,
    validate_storage_class,
)
from kubewire.status import FieldError

KindValidator = Callable[[Resource, Mapping[str, Any], Mapping[str, Any] | None],
                         list[FieldError]]

KIND_VALIDATORS: Mapping[str, KindValidator] = MappingProxyType({
    "events.k8s.io/events": validate_event,  # core/v1 and events.k8s.io/v1 Events
    "core/pods": validate_pod,
    "core/services": validate_service,
    "apps/deployments": validate_deployment,
    "apps/replicasets": validate_replica_set,
    "core/replicationcontrollers": validate_replication_controller,
    "apps/statefulsets": validate_stateful_set,
    "apps/daemonsets": validate_daemon_set,
    "apps/controllerrevisions": validate_controller_revision,
    "core/configmaps": validate_config_map,
    "core/secrets": validate_secret,
    "core/nodes": validate_node,
    "core/namespaces": validate_namespace,
    "networking.k8s.io/ingresses": validate_ingress,
    "networking.k8s.io/networkpolicies": validate_network_policy,
    "discovery.k8s.io/endpointslices": validate_endpoint_slice,
    "core/endpoints": validate_endpoints,
    "coordination.k8s.io/leases": validate_lease,
    "rbac.authorization.k8s.io/roles": validate_role,
    "rbac.authorization.k8s.io/clusterroles": validate_cluster_role,
    "rbac.authorization.k8s.io/rolebindings": validate_role_binding,
    "rbac.authorization.k8s.io/clusterrolebindings": validate_cluster_role_binding,
    "apiextensions.k8s.io/customresourcedefinitions": validate_custom_resource_definition,
    "certificates.k8s.io/certificatesigningrequests": validate_certificate_signing_request,
    "core/resourcequotas": validate_resource_quota,
    "core/limitranges": validate_limit_range,
    "core/persistentvolumeclaims": validate_persistent_volume_claim,
    "core/persistentvolumes": validate_persistent_volume,
    "storage.k8s.io/storageclasses": validate_storage_class,
    # issue 20 kinds
    "batch/jobs": validate_job,
    "batch/cronjobs": validate_cron_job,
    "policy/poddisruptionbudgets": validate_pod_disruption_budget,
    "scheduling.k8s.io/priorityclasses": validate_priority_class,
    "networking.k8s.io/ingressclasses": validate_ingress_class,
    "apiregistration.k8s.io/apiservices": validate_api_service,
    "autoscaling/horizontalpodautoscalers": validate_horizontal_pod_autoscaler,
})


# The ``/status`` subresource's own ``ValidateUpdate`` where a kind's status strategy has one
# narrower than the main resource's (the status write keeps the stored spec).
STATUS_VALIDATORS: Mapping[str, KindValidator] = MappingProxyType({
    "apiextensions.k8s.io/customresourcedefinitions": validate_custom_resource_definition_status,
    "batch/jobs": validate_job_status,
    "policy/poddisruptionbudgets": validate_pod_disruption_budget_status,
    "autoscaling/horizontalpodautoscalers": validate_horizontal_pod_autoscaler_status,
    "batch/cronjobs": lambda resource, obj, old: [],  # cronJobStatusStrategy: validates nothing
    "apps/deployments": validate_deployment_status,
    "apps/replicasets": validate_replica_set_status,
    "core/replicationcontrollers": validate_replication_controller_status,
    "apps/statefulsets": validate_stateful_set_status,
    "apps/daemonsets": validate_daemon_set_status,
    "certificates.k8s.io/certificatesigningrequests": validate_certificate_signing_request_status,
    "apiregistration.k8s.io/apiservices": validate_api_service_status,
})
# CertificateSigningRequests' ``/approval`` (ApprovalStrategy.ValidateUpdate)
APPROVAL_VALIDATORS: Mapping[str, KindValidator] = MappingProxyType({
    "certificates.k8s.io/certificatesigningrequests":
        validate_certificate_signing_request_approval,
})

# A kind's strategy ``WarningsOnCreate``: ``Warning: 299`` texts for a create it accepts.
CREATE_WARNINGS: Mapping[str, Callable[[Mapping[str, Any]], list[str]]] = MappingProxyType({
    "batch/jobs": job_create_warnings,
    "batch/cronjobs": cron_job_create_warnings,
})


def create_warnings(resource: Resource, obj: Mapping[str, Any]) -> list[str]:
    """The kind's ``WarningsOnCreate`` for ``obj`` ([] for kinds without)."""
    warn = CREATE_WARNINGS.get(resource.id)
    return [] if warn is None else warn(obj)


def validate_kind(resource: Resource, obj: Mapping[str, Any],
                  old: Mapping[str, Any] | None = None, *,
                  subresource: str = "") -> list[FieldError]:
    """The kind's own errors for a create (``old`` None) or an update (of ``subresource``, ""
    for the main resource); [] for other kinds."""
    validator = None
    if subresource == "status" and old is not None:
        validator = STATUS_VALIDATORS.get(resource.id)
    elif subresource == "approval" and old is not None:
        validator = APPROVAL_VALIDATORS.get(resource.id)
    if validator is None:
        validator = KIND_VALIDATORS.get(resource.id)
    return [] if validator is None else validator(resource, obj, old)
