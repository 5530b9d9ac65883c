"""Go named types of builtin fields, which the OpenAPI documents do not carry.

kube-apiserver decodes builtin kinds into Go structs, and ``encoding/json`` names the Go type of
the field it could not fill (``... of type v1.RestartPolicy``). Struct, slice, map and pointer
types follow from the schema; a field declared with a named non-struct type (``type
RestartPolicy string``, ``type ResourceList map[ResourceName]resource.Quantity``) does not, so
those are listed here, per definition and JSON field name, as ``reflect.Type.String()`` prints
them (through a pointer the element type is named).

Source: the Go declarations in ``kubernetes/api`` (``core/v1/types.go``, ``apps/v1/types.go``,
``networking/v1/types.go``, ``discovery/v1/types.go``, ``coordination/v1/types.go``,
``certificates/v1/types.go``) and
``kubernetes/apimachinery`` (``pkg/apis/meta/v1/types.go``), release-1.32. ``gen_schema.py``
fails on an entry whose definition or field is not in the generated closure.
"""

from __future__ import annotations

_CORE = "io.k8s.api.core.v1."
_META = "io.k8s.apimachinery.pkg.apis.meta.v1."

_UID = "types.UID"
_RESOURCE_LIST = "v1.ResourceList"
_CONTAINER_FIELDS = {"imagePullPolicy": "v1.PullPolicy",
                     "restartPolicy": "v1.ContainerRestartPolicy",
                     "terminationMessagePolicy": "v1.TerminationMessagePolicy"}
_CONDITION_STATUS = "v1.ConditionStatus"

GO_NAMED_TYPES: dict[str, dict[str, str]] = {
    # core/v1
    _CORE + "AppArmorProfile": {"type": "v1.AppArmorProfileType"},
    _CORE + "AttachedVolume": {"name": "v1.UniqueVolumeName"},
    _CORE + "AzureDiskVolumeSource": {"cachingMode": "v1.AzureDataDiskCachingMode",
                                      "kind": "v1.AzureDataDiskKind"},
    _CORE + "Capabilities": {"add": "[]v1.Capability", "drop": "[]v1.Capability"},
    _CORE + "ConfigMapNodeConfigSource": {"uid": _UID},
    _CORE + "Container": _CONTAINER_FIELDS,
    _CORE + "ContainerPort": {"protocol": "v1.Protocol"},
    _CORE + "ContainerResizePolicy": {"resourceName": "v1.ResourceName",
                                      "restartPolicy": "v1.ResourceResizeRestartPolicy"},
    _CORE + "ContainerStatus": {"allocatedResources": _RESOURCE_LIST},
    _CORE + "EmptyDirVolumeSource": {"medium": "v1.StorageMedium"},
    _CORE + "EphemeralContainer": _CONTAINER_FIELDS,
    _CORE + "HTTPGetAction": {"scheme": "v1.URIScheme"},
    _CORE + "HostPathVolumeSource": {"type": "v1.HostPathType"},
    _CORE + "ImageVolumeSource": {"pullPolicy": "v1.PullPolicy"},
    _CORE + "LoadBalancerIngress": {"ipMode": "v1.LoadBalancerIPMode"},
    _CORE + "NamespaceCondition": {"status": _CONDITION_STATUS,
                                   "type": "v1.NamespaceConditionType"},
    _CORE + "NamespaceSpec": {"finalizers": "[]v1.FinalizerName"},
    _CORE + "NamespaceStatus": {"phase": "v1.NamespacePhase"},
    _CORE + "NodeAddress": {"type": "v1.NodeAddressType"},
    _CORE + "NodeCondition": {"status": _CONDITION_STATUS, "type": "v1.NodeConditionType"},
    _CORE + "NodeSelectorRequirement": {"operator": "v1.NodeSelectorOperator"},
    _CORE + "NodeStatus": {"allocatable": _RESOURCE_LIST, "capacity": _RESOURCE_LIST,
                           "phase": "v1.NodePhase", "volumesInUse": "[]v1.UniqueVolumeName"},
    _CORE + "ObjectReference": {"uid": _UID},
    _CORE + "PersistentVolumeClaimSpec": {"accessModes": "[]v1.PersistentVolumeAccessMode",
                                          "volumeMode": "v1.PersistentVolumeMode"},
    _CORE + "PersistentVolumeClaimCondition": {"status": _CONDITION_STATUS,
                                               "type": "v1.PersistentVolumeClaimConditionType"},
    _CORE + "PersistentVolumeClaimStatus": {
        "accessModes": "[]v1.PersistentVolumeAccessMode", "allocatedResources": _RESOURCE_LIST,
        "allocatedResourceStatuses": "map[v1.ResourceName]v1.ClaimResourceStatus",
        "capacity": _RESOURCE_LIST, "phase": "v1.PersistentVolumeClaimPhase"},
    _CORE + "PodCondition": {"status": _CONDITION_STATUS, "type": "v1.PodConditionType"},
    _CORE + "PodOS": {"name": "v1.OSName"},
    _CORE + "PodReadinessGate": {"conditionType": "v1.PodConditionType"},
    _CORE + "PodSecurityContext": {"fsGroupChangePolicy": "v1.PodFSGroupChangePolicy",
                                   "seLinuxChangePolicy": "v1.PodSELinuxChangePolicy",
                                   "supplementalGroupsPolicy": "v1.SupplementalGroupsPolicy"},
    _CORE + "PodSpec": {"dnsPolicy": "v1.DNSPolicy", "overhead": _RESOURCE_LIST,
                        "preemptionPolicy": "v1.PreemptionPolicy",
                        "restartPolicy": "v1.RestartPolicy"},
    _CORE + "PodStatus": {"phase": "v1.PodPhase", "qosClass": "v1.PodQOSClass",
                          "resize": "v1.PodResizeStatus"},
    _CORE + "PortStatus": {"protocol": "v1.Protocol"},
    _CORE + "ReplicationControllerCondition": {
        "status": _CONDITION_STATUS, "type": "v1.ReplicationControllerConditionType"},
    _CORE + "ResourceHealth": {"health": "v1.ResourceHealthStatus",
                               "resourceID": "v1.ResourceID"},
    _CORE + "ResourceRequirements": {"limits": _RESOURCE_LIST, "requests": _RESOURCE_LIST},
    _CORE + "ResourceStatus": {"name": "v1.ResourceName"},
    _CORE + "SeccompProfile": {"type": "v1.SeccompProfileType"},
    _CORE + "Secret": {"type": "v1.SecretType"},
    _CORE + "SecurityContext": {"procMount": "v1.ProcMountType"},
    _CORE + "ServicePort": {"protocol": "v1.Protocol"},
    _CORE + "ServiceSpec": {"externalTrafficPolicy": "v1.ServiceExternalTrafficPolicy",
                            "internalTrafficPolicy": "v1.ServiceInternalTrafficPolicy",
                            "ipFamilies": "[]v1.IPFamily", "ipFamilyPolicy": "v1.IPFamilyPolicy",
                            "sessionAffinity": "v1.ServiceAffinity", "type": "v1.ServiceType"},
    _CORE + "Taint": {"effect": "v1.TaintEffect"},
    _CORE + "Toleration": {"effect": "v1.TaintEffect", "operator": "v1.TolerationOperator"},
    _CORE + "TopologySpreadConstraint": {
        "nodeAffinityPolicy": "v1.NodeInclusionPolicy",
        "nodeTaintsPolicy": "v1.NodeInclusionPolicy",
        "whenUnsatisfiable": "v1.UnsatisfiableConstraintAction"},
    _CORE + "VolumeMount": {"mountPropagation": "v1.MountPropagationMode",
                            "recursiveReadOnly": "v1.RecursiveReadOnlyMode"},
    _CORE + "VolumeMountStatus": {"recursiveReadOnly": "v1.RecursiveReadOnlyMode"},
    _CORE + "VolumeResourceRequirements": {"limits": _RESOURCE_LIST,
                                           "requests": _RESOURCE_LIST},
    # apps/v1, networking/v1, discovery/v1, coordination/v1
    "io.k8s.api.apps.v1.DeploymentCondition": {"status": _CONDITION_STATUS,
                                               "type": "v1.DeploymentConditionType"},
    "io.k8s.api.apps.v1.DeploymentStrategy": {"type": "v1.DeploymentStrategyType"},
    "io.k8s.api.apps.v1.ReplicaSetCondition": {"status": _CONDITION_STATUS,
                                               "type": "v1.ReplicaSetConditionType"},
    "io.k8s.api.apps.v1.StatefulSetCondition": {"status": _CONDITION_STATUS,
                                                "type": "v1.StatefulSetConditionType"},
    "io.k8s.api.apps.v1.StatefulSetSpec": {"podManagementPolicy": "v1.PodManagementPolicyType"},
    "io.k8s.api.apps.v1.StatefulSetUpdateStrategy": {"type": "v1.StatefulSetUpdateStrategyType"},
    "io.k8s.api.apps.v1.StatefulSetPersistentVolumeClaimRetentionPolicy": {
        "whenDeleted": "v1.PersistentVolumeClaimRetentionPolicyType",
        "whenScaled": "v1.PersistentVolumeClaimRetentionPolicyType"},
    "io.k8s.api.apps.v1.DaemonSetCondition": {"status": _CONDITION_STATUS,
                                              "type": "v1.DaemonSetConditionType"},
    "io.k8s.api.apps.v1.DaemonSetUpdateStrategy": {"type": "v1.DaemonSetUpdateStrategyType"},
    "io.k8s.api.networking.v1.HTTPIngressPath": {"pathType": "v1.PathType"},
    "io.k8s.api.networking.v1.IngressPortStatus": {"protocol": "v1.Protocol"},
    "io.k8s.api.networking.v1.NetworkPolicyPort": {"protocol": "v1.Protocol"},
    "io.k8s.api.networking.v1.NetworkPolicySpec": {"policyTypes": "[]v1.PolicyType"},
    "io.k8s.api.discovery.v1.EndpointPort": {"protocol": "v1.Protocol"},
    "io.k8s.api.discovery.v1.EndpointSlice": {"addressType": "v1.AddressType"},
    "io.k8s.api.coordination.v1.LeaseSpec": {"strategy": "v1.CoordinatedLeaseStrategy"},
    # certificates/v1
    "io.k8s.api.certificates.v1.CertificateSigningRequestSpec": {"usages": "[]v1.KeyUsage"},
    "io.k8s.api.certificates.v1.CertificateSigningRequestCondition": {
        "status": _CONDITION_STATUS, "type": "v1.RequestConditionType"},
    # meta/v1
    _META + "APIResource": {"verbs": "v1.Verbs"},
    _META + "Condition": {"status": _CONDITION_STATUS},
    _META + "DeleteOptions": {"propagationPolicy": "v1.DeletionPropagation"},
    _META + "LabelSelectorRequirement": {"operator": "v1.LabelSelectorOperator"},
    _META + "ManagedFieldsEntry": {"operation": "v1.ManagedFieldsOperationType"},
    _META + "ObjectMeta": {"uid": _UID},
    _META + "OwnerReference": {"uid": _UID},
    _META + "Preconditions": {"uid": _UID},
    _META + "Status": {"reason": "v1.StatusReason"},
    _META + "StatusCause": {"reason": "v1.CauseType"},
    _META + "StatusDetails": {"uid": _UID},
}
