"""The served kinds as test data: URLs and a minimal valid object for each.

Facts come from watch-protocol.md §1.1 and objects-and-clients.md §1, written out here on
purpose (not read from kubewire.resources) so the tests check the server against the reference.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

NS = "default"
JSON = dict[str, Any]


@dataclass(frozen=True)
class Kind:
    kind: str
    api_version: str
    plural: str
    namespaced: bool
    spec: JSON  # top-level fields besides apiVersion/kind/metadata of a valid object
    mutation: JSON  # a merge patch that changes the spec (or equivalent) validly
    has_status: bool = True
    is_custom: bool = False
    # a controller writes the new object's status (ResourceQuota: the quota controller), as
    # kube-controller-manager would: tests that need no other writer wait for it first
    controller_status: bool = False

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def base(self) -> str:
        prefix = "/apis" if "/" in self.api_version else "/api"
        return f"{prefix}/{self.api_version}"

    @property
    def group_resource(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def group_kind(self) -> str:
        return f"{self.kind}.{self.group}" if self.group else self.kind

    def collection(self, namespace: str | None = NS) -> str:
        if self.namespaced and namespace is not None:
            return f"{self.base}/namespaces/{namespace}/{self.plural}"
        return f"{self.base}/{self.plural}"

    def item(self, name: str, namespace: str | None = NS) -> str:
        return f"{self.collection(namespace)}/{name}"

    def obj(self, name: str, labels: dict[str, str] | None = None, **meta: Any) -> JSON:
        metadata: JSON = {"name": name, **meta}
        if labels:
            metadata["labels"] = dict(labels)
        return {"apiVersion": self.api_version, "kind": self.kind, "metadata": metadata,
                **copy.deepcopy(self.spec)}


_CONTAINERS = [{"name": "c", "image": "nginx:1.27"}]

POD = Kind("Pod", "v1", "pods", True, {"spec": {"containers": _CONTAINERS}},
           {"spec": {"activeDeadlineSeconds": 60}})
SERVICE = Kind("Service", "v1", "services", True,
               {"spec": {"ports": [{"port": 80}], "selector": {"app": "web"}}},
               {"spec": {"selector": {"app": "other"}}})
NODE = Kind("Node", "v1", "nodes", False, {"spec": {}}, {"spec": {"unschedulable": True}})
NAMESPACE = Kind("Namespace", "v1", "namespaces", False, {},
                 {"metadata": {"annotations": {"touched": "yes"}}})
DEPLOYMENT = Kind(
    "Deployment", "apps/v1", "deployments", True,
    {"spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
              "template": {"metadata": {"labels": {"app": "web"}},
                           "spec": {"containers": _CONTAINERS}}}},
    {"spec": {"replicas": 3}})
REPLICA_SET = Kind(
    "ReplicaSet", "apps/v1", "replicasets", True,
    {"spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
              "template": {"metadata": {"labels": {"app": "web"}},
                           "spec": {"containers": _CONTAINERS}}}},
    {"spec": {"replicas": 3}})
REPLICATION_CONTROLLER = Kind(
    "ReplicationController", "v1", "replicationcontrollers", True,
    {"spec": {"replicas": 1, "selector": {"app": "web"},
              "template": {"metadata": {"labels": {"app": "web"}},
                           "spec": {"containers": _CONTAINERS}}}},
    {"spec": {"replicas": 3}})
STATEFUL_SET = Kind(
    "StatefulSet", "apps/v1", "statefulsets", True,
    {"spec": {"replicas": 1, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
              "template": {"metadata": {"labels": {"app": "db"}},
                           "spec": {"containers": _CONTAINERS}}}},
    {"spec": {"replicas": 2}})
DAEMON_SET = Kind(
    "DaemonSet", "apps/v1", "daemonsets", True,
    {"spec": {"selector": {"matchLabels": {"app": "agent"}},
              "template": {"metadata": {"labels": {"app": "agent"}},
                           "spec": {"containers": _CONTAINERS}}}},
    {"spec": {"minReadySeconds": 5}})
CONTROLLER_REVISION = Kind(
    "ControllerRevision", "apps/v1", "controllerrevisions", True,
    {"data": {"spec": {"template": {"metadata": {"labels": {"app": "db"}}}}}, "revision": 1},
    {"revision": 2}, has_status=False)
EVENT = Kind(
    "Event", "events.k8s.io/v1", "events", True,
    {"eventTime": "2024-12-11T09:15:02.123456Z", "type": "Normal", "reason": "Testing",
     "action": "Test", "reportingController": "kubewire.io/tests",
     "reportingInstance": "tests-1", "note": "first",
     "regarding": {"kind": "Pod", "namespace": NS, "name": "web-0", "apiVersion": "v1"}},
    {"note": "second"}, has_status=False)
INGRESS = Kind(
    "Ingress", "networking.k8s.io/v1", "ingresses", True,
    {"spec": {"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}}},
    {"spec": {"defaultBackend": {"service": {"name": "web", "port": {"number": 8080}}}}})
NETWORK_POLICY = Kind(
    "NetworkPolicy", "networking.k8s.io/v1", "networkpolicies", True,
    {"spec": {"podSelector": {"matchLabels": {"app": "web"}}}},
    {"spec": {"podSelector": {"matchLabels": {"app": "db"}}}}, has_status=False)
ENDPOINT_SLICE = Kind(
    "EndpointSlice", "discovery.k8s.io/v1", "endpointslices", True,
    {"addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]}],
     "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
    {"endpoints": [{"addresses": ["10.0.0.2"]}]}, has_status=False)
ENDPOINTS = Kind(
    "Endpoints", "v1", "endpoints", True,
    {"subsets": [{"addresses": [{"ip": "10.0.0.1"}],
                  "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}]},
    {"subsets": [{"addresses": [{"ip": "10.0.0.2"}],
                  "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}]},
    has_status=False)
GATEWAY = Kind(
    "Gateway", "gateway.networking.k8s.io/v1", "gateways", True,
    {"spec": {"gatewayClassName": "example",
              "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}},
    {"spec": {"gatewayClassName": "other"}}, is_custom=True)
HTTP_ROUTE = Kind(
    "HTTPRoute", "gateway.networking.k8s.io/v1", "httproutes", True,
    {"spec": {"parentRefs": [{"name": "gw"}], "hostnames": ["a.example.com"]}},
    {"spec": {"hostnames": ["b.example.com"]}}, is_custom=True)

CONFIG_MAP = Kind("ConfigMap", "v1", "configmaps", True, {"data": {"key": "one"}},
                  {"data": {"key": "two"}}, has_status=False)
SECRET = Kind("Secret", "v1", "secrets", True, {"type": "Opaque", "data": {"key": "b25l"}},
              {"data": {"key": "dHdv"}}, has_status=False)
SERVICE_ACCOUNT = Kind("ServiceAccount", "v1", "serviceaccounts", True, {},
                       {"automountServiceAccountToken": False}, has_status=False)
LEASE = Kind("Lease", "coordination.k8s.io/v1", "leases", True,
             {"spec": {"holderIdentity": "tests-1", "leaseDurationSeconds": 15}},
             {"spec": {"holderIdentity": "tests-2"}}, has_status=False)

_RBAC = "rbac.authorization.k8s.io/v1"
_READ_PODS = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
_READ_NODES = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
ROLE = Kind("Role", _RBAC, "roles", True, {"rules": _READ_PODS}, {"rules": _READ_NODES},
            has_status=False)
CLUSTER_ROLE = Kind("ClusterRole", _RBAC, "clusterroles", False, {"rules": _READ_PODS},
                    {"rules": _READ_NODES}, has_status=False)
ROLE_BINDING = Kind(
    "RoleBinding", _RBAC, "rolebindings", True,
    {"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
     "subjects": [{"kind": "ServiceAccount", "name": "app", "namespace": NS}]},
    {"subjects": [{"kind": "ServiceAccount", "name": "other", "namespace": NS}]},
    has_status=False)
CLUSTER_ROLE_BINDING = Kind(
    "ClusterRoleBinding", _RBAC, "clusterrolebindings", False,
    {"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                 "name": "reader"},
     "subjects": [{"kind": "ServiceAccount", "name": "app", "namespace": NS}]},
    {"subjects": [{"kind": "ServiceAccount", "name": "other", "namespace": NS}]},
    has_status=False)

# a PKCS#10 request (EC P-256, CN=tests) made once with cryptography; a CSR's spec never
# changes after create (its mutation is a label)
_CSR_REQUEST = (
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KTUlISk1ISUNBUUF3RURFT01Bd0dBMVVFQXd3RmRHVnpk"
    "SE13V1RBVEJnY3Foa2pPUFFJQkJnZ3Foa2pPUFFNQgpCd05DQUFReW9ReVFaVW54dHFLMnVQTHgyZEc2czlSNU1EZ0wr"
    "SjVQd1N1Tm43UjFnODl5OGVIQWZPNG9zVm1LClRmOUpXVXZhQVhHaHhaalVaRnpoM3JTS2N5c25vQUF3Q2dZSUtvWkl6"
    "ajBFQXdJRFJ3QXdSQUlnVU5pZXBZcVIKUTYxN0tWNmZhYVlhZzdLZWdsSjJrNWhrdTlrOGw2eWFDNXNDSUY1MXY2bzBF"
    "SENicVRYNTF6M1VhM2hwR1dHYQpaSkpMK2xMaXF5Q1VjQm85Ci0tLS0tRU5EIENFUlRJRklDQVRFIFJFUVVFU1QtLS0t"
    "LQo=")
CERTIFICATE_SIGNING_REQUEST = Kind(
    "CertificateSigningRequest", "certificates.k8s.io/v1", "certificatesigningrequests", False,
    {"spec": {"request": _CSR_REQUEST, "signerName": "example.com/tests",
              "usages": ["client auth"]}},
    {"metadata": {"labels": {"mutated": "yes"}}})

# Quota, limits and storage: a quota on a kind nothing serves charges nothing (other tests'
# pods in the namespace stay free of it); claims may be given a volume once; StorageClasses
# change only what kube lets change.
RESOURCE_QUOTA = Kind("ResourceQuota", "v1", "resourcequotas", True,
                      {"spec": {"hard": {"count/widgets.example.com": "5"}}},
                      {"spec": {"hard": {"count/widgets.example.com": "6"}}},
                      controller_status=True)
LIMIT_RANGE = Kind(
    "LimitRange", "v1", "limitranges", True,
    {"spec": {"limits": [{"type": "PersistentVolumeClaim", "max": {"storage": "10Gi"}}]}},
    {"spec": {"limits": [{"type": "PersistentVolumeClaim", "max": {"storage": "20Gi"}}]}},
    has_status=False)
PERSISTENT_VOLUME_CLAIM = Kind(
    "PersistentVolumeClaim", "v1", "persistentvolumeclaims", True,
    {"spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
              "resources": {"requests": {"storage": "1Gi"}}}},
    {"spec": {"volumeName": "pv-tests"}})
PERSISTENT_VOLUME = Kind(
    "PersistentVolume", "v1", "persistentvolumes", False,
    {"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
              "hostPath": {"path": "/tmp/tests"}}},
    {"spec": {"persistentVolumeReclaimPolicy": "Delete"}})
STORAGE_CLASS = Kind("StorageClass", "storage.k8s.io/v1", "storageclasses", False,
                     {"provisioner": "example.com/tests"}, {"allowVolumeExpansion": True},
                     has_status=False)
# issue 20: batch/v1, policy/v1, scheduling.k8s.io/v1, networking.k8s.io/v1 IngressClass
_JOB_TEMPLATE = {"spec": {"containers": _CONTAINERS, "restartPolicy": "Never"}}
JOB = Kind("Job", "batch/v1", "jobs", True, {"spec": {"template": _JOB_TEMPLATE}},
           {"spec": {"parallelism": 2}})
CRON_JOB = Kind("CronJob", "batch/v1", "cronjobs", True,
                {"spec": {"schedule": "*/5 * * * *",
                          "jobTemplate": {"spec": {"template": _JOB_TEMPLATE}}}},
                {"spec": {"schedule": "*/10 * * * *"}})
POD_DISRUPTION_BUDGET = Kind(
    "PodDisruptionBudget", "policy/v1", "poddisruptionbudgets", True,
    {"spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}},
    {"spec": {"minAvailable": 2}})
PRIORITY_CLASS = Kind("PriorityClass", "scheduling.k8s.io/v1", "priorityclasses", False,
                      {"value": 1000, "description": "tests"}, {"description": "changed"},
                      has_status=False)
INGRESS_CLASS = Kind("IngressClass", "networking.k8s.io/v1", "ingressclasses", False,
                     {"spec": {"controller": "example.com/ingress"}},
                     {"spec": {"parameters": {"kind": "Params", "name": "p"}}},
                     has_status=False)
# autoscaling/v2 (the stored version; test_autoscalers.py covers the v1 view)
HORIZONTAL_POD_AUTOSCALER = Kind(
    "HorizontalPodAutoscaler", "autoscaling/v2", "horizontalpodautoscalers", True,
    {"spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
              "maxReplicas": 3}},
    {"spec": {"maxReplicas": 4}})

ALL_KINDS = [POD, SERVICE, NODE, NAMESPACE, DEPLOYMENT, REPLICA_SET, STATEFUL_SET, DAEMON_SET,
             CONTROLLER_REVISION, EVENT, INGRESS, NETWORK_POLICY, ENDPOINT_SLICE, GATEWAY,
             HTTP_ROUTE, CONFIG_MAP, SECRET, SERVICE_ACCOUNT, LEASE, ROLE, CLUSTER_ROLE,
             ROLE_BINDING, CLUSTER_ROLE_BINDING, CERTIFICATE_SIGNING_REQUEST,
             RESOURCE_QUOTA, LIMIT_RANGE, PERSISTENT_VOLUME_CLAIM, PERSISTENT_VOLUME,
             STORAGE_CLASS, JOB, CRON_JOB, POD_DISRUPTION_BUDGET, PRIORITY_CLASS, INGRESS_CLASS,
             ENDPOINTS, HORIZONTAL_POD_AUTOSCALER, REPLICATION_CONTROLLER]
NAMESPACED_KINDS = [k for k in ALL_KINDS if k.namespaced]


def kind_id(kind: Kind) -> str:
    return kind.kind
