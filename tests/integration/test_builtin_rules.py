"""kube's hand-written rules for fields the OpenAPI ``required`` lists used to stand in for.

Since built-in kinds are no longer held to their schema's ``required`` lists
(``test_builtin_required``), kube's own ``pkg/apis/<group>/validation`` rules must reject what
kube rejects: env ``valueFrom`` selectors, volume devices, resize policies, probe and lifecycle
handlers, sysctls, seccomp and AppArmor profiles, affinity, topology spread constraints, host
aliases, ``os``, owner references. Each case posts a Pod (or the named kind) and expects kube
v1.32's exact 422 causes; each rule has a valid counterpart that is created.

Messages are written out from kube's source (pkg/apis/core/validation/validation.go,
apimachinery's objectmeta.go and util/validation), not derived from kubewire.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubewire.server.context import ServerConfig
from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.kinds import CONFIG_MAP, DEPLOYMENT, EVENT, POD
from tests.integration.wire import call

Cause = tuple[str, str, str]

_C = "spec.containers[0]"
_SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters,"
              " '-' or '.', and must start and end with an alphanumeric character (e.g. "
              "'example.com', regex used for validation is "
              "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
_QUALIFIED = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start"
              " and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
              "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
_PORT_RANGE = "must be between 1 and 65535, inclusive"
_ENV_PATHS = ('"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", '
              '"spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", '
              '"status.podIPs"')
_SYSCTL_RE = r"^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$"
_TOPOLOGY = "topology.kubernetes.io/zone"
_SELECTOR = {"matchLabels": {"app": "web"}}


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """One server for the module: every case is a create that either fails or has its name."""
    data_dir: Path = tmp_path_factory.mktemp("rules")
    server = ServerThread(ServerConfig(data_dir=data_dir, host="127.0.0.1", port=0,
                                       insecure_http=True)).start()
    yield server
    server.stop()


def _merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _name(case: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", case.lower()).strip("-")[:60]


def _container(**fields: Any) -> dict[str, Any]:
    return {"name": "c", "image": "nginx:1.27", **fields}


def _pod(case: str, spec: dict[str, Any]) -> dict[str, Any]:
    return _merged(POD.obj(_name(case)), {"spec": spec})


def _with(**fields: Any) -> dict[str, Any]:
    """A pod spec whose one container has ``fields``."""
    return {"containers": [_container(**fields)]}


def _env(value_from: dict[str, Any], **var: Any) -> dict[str, Any]:
    return _with(env=[{"name": "E", "valueFrom": value_from, **var}])


def _causes(reply: Any) -> list[Cause]:
    assert reply.status == 422, reply.body
    assert reply.json["reason"] == "Invalid"
    return [(c["reason"], c["field"], c["message"]) for c in reply.json["details"]["causes"]]


_PVC = {"name": "data", "persistentVolumeClaim": {"claimName": "claim"}}

# (case, pod spec, causes kube returns)
REJECTED: list[tuple[str, dict[str, Any], list[Cause]]] = [
    # --- env valueFrom -------------------------------------------------------------------
    ("env-no-source", _env({}), [
        ("FieldValueInvalid", f"{_C}.env[0].valueFrom",
         'Invalid value: "": must specify one of: `fieldRef`, `resourceFieldRef`, '
         "`configMapKeyRef` or `secretKeyRef`")]),
    ("env-configmap-key-ref-empty", _env({"configMapKeyRef": {}}), [
        ("FieldValueInvalid", f"{_C}.env[0].valueFrom.configMapKeyRef.name",
         f'Invalid value: "": {_SUBDOMAIN}'),
        ("FieldValueRequired", f"{_C}.env[0].valueFrom.configMapKeyRef.key", "Required value")]),
    ("env-secret-key-format", _env({"secretKeyRef": {"name": "s", "key": "a b"}}), [
        ("FieldValueInvalid", f"{_C}.env[0].valueFrom.secretKeyRef.key",
         "Invalid value: \"a b\": a valid config key must consist of alphanumeric characters, "
         "'-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for "
         "validation is '[-._a-zA-Z0-9]+')")]),
    ("env-field-path-missing", _env({"fieldRef": {}}), [
        ("FieldValueRequired", f"{_C}.env[0].valueFrom.fieldRef.fieldPath", "Required value")]),
    ("env-field-path-unsupported", _env({"fieldRef": {"fieldPath": "status.phase"}}), [
        ("FieldValueNotSupported", f"{_C}.env[0].valueFrom.fieldRef.fieldPath",
         f'Unsupported value: "status.phase": supported values: {_ENV_PATHS}')]),
    ("env-field-api-version", _env({"fieldRef": {"apiVersion": "v2",
                                                 "fieldPath": "metadata.name"}}), [
        ("FieldValueInvalid", f"{_C}.env[0].valueFrom.fieldRef.fieldPath",
         'Invalid value: "metadata.name": error converting fieldPath: unsupported pod '
         "version: v2")]),
    ("env-field-bad-label-subscript", _env({"fieldRef": {"fieldPath": "metadata.labels['a b']"}}),
     [("FieldValueInvalid", f"{_C}.env[0].valueFrom.fieldRef",
       f'Invalid value: "a b": {_QUALIFIED}')]),
    ("env-resource-missing", _env({"resourceFieldRef": {}}), [
        ("FieldValueRequired", f"{_C}.env[0].valueFrom.resourceFieldRef.resource",
         "Required value")]),
    ("env-resource-unsupported", _env({"resourceFieldRef": {"resource": "limits.gpu"}}), [
        ("FieldValueNotSupported", f"{_C}.env[0].valueFrom.resourceFieldRef.resource",
         'Unsupported value: "limits.gpu": supported values: "limits.cpu", '
         '"limits.ephemeral-storage", "limits.memory", "requests.cpu", '
         '"requests.ephemeral-storage", "requests.memory"')]),
    ("env-two-sources", _env({"fieldRef": {"fieldPath": "metadata.name"},
                              "secretKeyRef": {"name": "s", "key": "k"}}), [
        ("FieldValueInvalid", f"{_C}.env[0].valueFrom",
         'Invalid value: "": may not have more than one field specified at a time')]),
    ("env-value-and-source", _env({"fieldRef": {"fieldPath": "metadata.name"}}, value="x"), [
        ("FieldValueInvalid", f"{_C}.env[0].valueFrom",
         'Invalid value: "": may not be specified when `value` is not empty')]),
    # --- volume devices ------------------------------------------------------------------
    ("device-empty", _with(volumeDevices=[{}]), [
        ("FieldValueRequired", f"{_C}.volumeDevices[0].name", "Required value"),
        ("FieldValueNotFound", f"{_C}.volumeDevices[0].name", 'Not found: ""'),
        ("FieldValueRequired", f"{_C}.volumeDevices[0].devicePath", "Required value")]),
    ("device-not-a-claim", {**_with(volumeDevices=[{"name": "tmp", "devicePath": "/dev/x"}]),
                            "volumes": [{"name": "tmp", "emptyDir": {}}]}, [
        ("FieldValueInvalid", f"{_C}.volumeDevices[0].name",
         'Invalid value: "tmp": can only use volume source type of PersistentVolumeClaim or '
         "Ephemeral for block mode")]),
    ("device-also-mounted", {**_with(volumeDevices=[{"name": "data", "devicePath": "/dev/x"}],
                                     volumeMounts=[{"name": "data", "mountPath": "/data"}]),
                             "volumes": [_PVC]}, [
        ("FieldValueInvalid", f"{_C}.volumeMounts[0].name",
         'Invalid value: "data": must not already exist in volumeDevices'),
        ("FieldValueInvalid", f"{_C}.volumeDevices[0].name",
         'Invalid value: "data": must not already exist in volumeMounts')]),
    ("device-backsteps", {**_with(volumeDevices=[{"name": "data", "devicePath": "/dev/../x"}]),
                          "volumes": [_PVC]}, [
        ("FieldValueInvalid", f"{_C}.volumeDevices[0].devicePath",
         "Invalid value: \"/dev/../x\": can not contain backsteps ('..')")]),
    # --- resize policy -------------------------------------------------------------------
    ("resize-empty", _with(resizePolicy=[{}]), [
        ("FieldValueRequired", f"{_C}.resizePolicy", "Required value"),
        ("FieldValueRequired", f"{_C}.resizePolicy", "Required value")]),
    ("resize-unsupported", _with(resizePolicy=[{"resourceName": "gpu",
                                                "restartPolicy": "Sometimes"}]), [
        ("FieldValueNotSupported", f"{_C}.resizePolicy",
         'Unsupported value: "gpu": supported values: "cpu", "memory"'),
        ("FieldValueNotSupported", f"{_C}.resizePolicy",
         'Unsupported value: "Sometimes": supported values: "NotRequired", "RestartContainer"')]),
    ("resize-duplicate", _with(resizePolicy=[
        {"resourceName": "cpu", "restartPolicy": "NotRequired"},
        {"resourceName": "cpu", "restartPolicy": "NotRequired"}]), [
        ("FieldValueDuplicate", f"{_C}.resizePolicy[1]", 'Duplicate value: "cpu"')]),
    # --- probes and lifecycle handlers ---------------------------------------------------
    ("probe-no-handler", _with(readinessProbe={}), [
        ("FieldValueRequired", f"{_C}.readinessProbe", "Required value: must specify a handler "
         "type")]),
    ("probe-http-port-missing", _with(livenessProbe={"httpGet": {}}), [
        ("FieldValueInvalid", f"{_C}.livenessProbe.httpGet.port",
         f"Invalid value: 0: {_PORT_RANGE}")]),
    ("probe-tcp-port-name", _with(startupProbe={"tcpSocket": {"port": "Web"}}), [
        ("FieldValueInvalid", f"{_C}.startupProbe.tcpSocket.port",
         'Invalid value: "Web": must contain only alpha-numeric characters (a-z, 0-9), and '
         "hyphens (-)")]),
    ("probe-grpc-port-missing", _with(readinessProbe={"grpc": {}}), [
        ("FieldValueInvalid", f"{_C}.readinessProbe.grpc.port",
         f"Invalid value: 0: {_PORT_RANGE}")]),
    ("probe-two-handlers", _with(readinessProbe={"exec": {"command": ["true"]},
                                                 "tcpSocket": {"port": 80}}), [
        ("FieldValueForbidden", f"{_C}.readinessProbe.tcpSocket",
         "Forbidden: may not specify more than 1 handler type")]),
    ("probe-exec-command", _with(livenessProbe={"exec": {}}), [
        ("FieldValueRequired", f"{_C}.livenessProbe.exec.command", "Required value")]),
    ("lifecycle-no-handler", _with(lifecycle={"preStop": {}}), [
        ("FieldValueRequired", f"{_C}.lifecycle.preStop", "Required value: must specify a "
         "handler type")]),
    ("lifecycle-port-range", _with(lifecycle={"postStart": {"httpGet": {"port": 70000}}}), [
        ("FieldValueInvalid", f"{_C}.lifecycle.postStart.httpGet.port",
         f"Invalid value: 70000: {_PORT_RANGE}")]),
    ("init-container-probe", {**_with(), "initContainers": [
        _container(name="init", readinessProbe={"tcpSocket": {"port": 80}})]}, [
        ("FieldValueForbidden", "spec.initContainers[0].readinessProbe",
         "Forbidden: may not be set for init containers without restartPolicy=Always")]),
    ("sidecar-probe-port", {**_with(), "initContainers": [
        _container(name="init", restartPolicy="Always", readinessProbe={"tcpSocket": {}})]}, [
        ("FieldValueInvalid", "spec.initContainers[0].readinessProbe.tcpSocket.port",
         f"Invalid value: 0: {_PORT_RANGE}")]),
    # --- sysctls, seccomp, AppArmor ------------------------------------------------------
    ("sysctl-name-missing", {**_with(), "securityContext": {"sysctls": [{"value": "1"}]}}, [
        ("FieldValueRequired", "spec.securityContext.sysctls[0].name", "Required value")]),
    ("sysctl-name-format", {**_with(), "securityContext": {"sysctls": [
        {"name": "Kernel.Foo", "value": "1"}]}}, [
        ("FieldValueInvalid", "spec.securityContext.sysctls[0].name",
         f'Invalid value: "Kernel.Foo": must have at most 253 characters and match regex '
         f"{_SYSCTL_RE}")]),
    ("sysctl-duplicate", {**_with(), "securityContext": {"sysctls": [
        {"name": "kernel.shm_rmid_forced", "value": "1"},
        {"name": "kernel.shm_rmid_forced", "value": "0"}]}}, [
        ("FieldValueDuplicate", "spec.securityContext.sysctls[1].name",
         'Duplicate value: "kernel.shm_rmid_forced"')]),
    ("sysctl-host-network", {**_with(), "hostNetwork": True, "securityContext": {"sysctls": [
        {"name": "net.core.somaxconn", "value": "1024"}]}}, [
        ("FieldValueInvalid", "spec.securityContext.sysctls[0].name",
         "Invalid value: \"net.core.somaxconn\": may not be specified when 'hostNetwork' is "
         "true")]),
    ("seccomp-type-missing", {**_with(), "securityContext": {"seccompProfile": {}}}, [
        ("FieldValueRequired", "spec.securityContext.seccompProfile.type",
         "Required value: type is required when seccompProfile is set")]),
    ("seccomp-localhost-profile", {**_with(), "securityContext": {"seccompProfile": {
        "type": "Localhost"}}}, [
        ("FieldValueRequired", "spec.securityContext.seccompProfile.localhostProfile",
         "Required value: must be set when seccomp type is Localhost")]),
    ("seccomp-container-type", _with(securityContext={"seccompProfile": {"type": "Custom"}}), [
        ("FieldValueNotSupported", f"{_C}.securityContext.seccompProfile.type",
         'Unsupported value: "Custom": supported values: "Localhost", "RuntimeDefault", '
         '"Unconfined"')]),
    ("seccomp-profile-path", _with(securityContext={"seccompProfile": {
        "type": "Localhost", "localhostProfile": "/p/../q.json"}}), [
        ("FieldValueInvalid", f"{_C}.securityContext.seccompProfile.localhostProfile",
         'Invalid value: "/p/../q.json": must be a relative path'),
        ("FieldValueInvalid", f"{_C}.securityContext.seccompProfile.localhostProfile",
         "Invalid value: \"/p/../q.json\": must not contain '..'")]),
    ("seccomp-profile-not-localhost", {**_with(), "securityContext": {"seccompProfile": {
        "type": "RuntimeDefault", "localhostProfile": "p.json"}}}, [
        ("FieldValueInvalid", "spec.securityContext.seccompProfile.localhostProfile",
         'Invalid value: core.SeccompProfile{Type:"RuntimeDefault", '
         "LocalhostProfile:(*string)(0xc000000000)}: can only be set when seccomp type is "
         "Localhost")]),
    ("apparmor-type-missing", {**_with(), "securityContext": {"appArmorProfile": {}}}, [
        ("FieldValueRequired", "spec.securityContext.appArmorProfile.type",
         "Required value: type is required when appArmorProfile is set")]),
    ("apparmor-type-unsupported", _with(securityContext={"appArmorProfile": {"type": "Strict"}}),
     [("FieldValueNotSupported", f"{_C}.securityContext.appArmorProfile.type",
       'Unsupported value: "Strict": supported values: "Localhost", "RuntimeDefault", '
       '"Unconfined"')]),
    ("apparmor-localhost-padded", _with(securityContext={"appArmorProfile": {
        "type": "Localhost", "localhostProfile": " p"}}), [
        ("FieldValueInvalid", f"{_C}.securityContext.appArmorProfile.localhostProfile",
         'Invalid value: " p": must not be padded with whitespace')]),
    ("apparmor-profile-not-localhost", _with(securityContext={"appArmorProfile": {
        "type": "Unconfined", "localhostProfile": "p"}}), [
        ("FieldValueInvalid", f"{_C}.securityContext.appArmorProfile.localhostProfile",
         'Invalid value: "p": can only be set when AppArmor type is Localhost')]),
    # --- affinity ------------------------------------------------------------------------
    ("node-affinity-weight", {**_with(), "affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"preference": {}}]}}}, [
        ("FieldValueInvalid", "spec.affinity.nodeAffinity."
         "preferredDuringSchedulingIgnoredDuringExecution[0].weight",
         "Invalid value: 0: must be in the range 1-100")]),
    ("node-affinity-no-terms", {**_with(), "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}}, [
        ("FieldValueRequired", "spec.affinity.nodeAffinity."
         "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
         "Required value: must have at least one node selector term")]),
    ("node-affinity-operator", {**_with(), "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In"},
                                  {"key": "disk", "operator": "Has"}]}]}}}}, [
        ("FieldValueRequired", "spec.affinity.nodeAffinity."
         "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]."
         "matchExpressions[0].values",
         "Required value: must be specified when `operator` is 'In' or 'NotIn'"),
        ("FieldValueInvalid", "spec.affinity.nodeAffinity."
         "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]."
         "matchExpressions[1].operator", 'Invalid value: "Has": not a valid selector operator')]),
    ("pod-anti-affinity-topology-key", {**_with(), "affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": _SELECTOR}]}}}, [
        ("FieldValueRequired", "spec.affinity.podAntiAffinity."
         "requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
         "Required value: can not be empty"),
        ("FieldValueInvalid", "spec.affinity.podAntiAffinity."
         "requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
         'Invalid value: "": name part must be non-empty'),
        ("FieldValueInvalid", "spec.affinity.podAntiAffinity."
         "requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
         f'Invalid value: "": {_QUALIFIED}')]),
    ("pod-affinity-weight", {**_with(), "affinity": {"podAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 101, "podAffinityTerm": {"topologyKey": _TOPOLOGY}}]}}}, [
        ("FieldValueInvalid", "spec.affinity.podAffinity."
         "preferredDuringSchedulingIgnoredDuringExecution[0].weight",
         "Invalid value: 101: must be in the range 1-100")]),
    # --- topology spread -----------------------------------------------------------------
    ("spread-empty", {**_with(), "topologySpreadConstraints": [{}]}, [
        ("FieldValueInvalid", "spec.topologySpreadConstraints[0].maxSkew",
         "Invalid value: 0: must be greater than zero"),
        ("FieldValueRequired", "spec.topologySpreadConstraints[0].topologyKey",
         "Required value: can not be empty"),
        ("FieldValueNotSupported", "spec.topologySpreadConstraints[0].whenUnsatisfiable",
         'Unsupported value: "": supported values: "DoNotSchedule", "ScheduleAnyway"')]),
    ("spread-min-domains", {**_with(), "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": _TOPOLOGY, "whenUnsatisfiable": "ScheduleAnyway",
         "minDomains": 2}]}, [
        ("FieldValueInvalid", "spec.topologySpreadConstraints[0].minDomains",
         "Invalid value: 2: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not "
         "ScheduleAnyway")]),
    ("spread-duplicate", {**_with(), "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": _TOPOLOGY, "whenUnsatisfiable": "DoNotSchedule"},
        {"maxSkew": 2, "topologyKey": _TOPOLOGY, "whenUnsatisfiable": "DoNotSchedule"}]}, [
        ("FieldValueDuplicate",
         "spec.topologySpreadConstraints[0].{topologyKey, whenUnsatisfiable}",
         f'Duplicate value: "{{{_TOPOLOGY}, DoNotSchedule}}"')]),
    ("spread-selector", {**_with(), "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": _TOPOLOGY, "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists",
                                                 "values": ["web"]}]}}]}, [
        ("FieldValueForbidden",
         "spec.topologySpreadConstraints[0].labelSelector.matchExpressions[0].values",
         "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'")]),
    # --- host aliases, os ----------------------------------------------------------------
    ("host-alias-ip", {**_with(), "hostAliases": [{"hostnames": ["db.local"]},
                                                  {"ip": "10.0.0.300"}]}, [
        ("FieldValueInvalid", "spec.hostAliases[0].ip",
         'Invalid value: "": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)'),
        ("FieldValueInvalid", "spec.hostAliases[1].ip",
         'Invalid value: "10.0.0.300": must be a valid IP address, (e.g. 10.9.8.7 or '
         "2001:db8::ffff)")]),
    ("os-name-missing", {**_with(), "os": {}}, [
        ("FieldValueRequired", "spec.os.name", "Required value: cannot be empty")]),
    ("os-name-unsupported", {**_with(), "os": {"name": "plan9"}}, [
        ("FieldValueNotSupported", "spec.os",
         'Unsupported value: "plan9": supported values: "linux", "windows"')]),
]

ACCEPTED: list[tuple[str, dict[str, Any]]] = [
    ("env-sources", _with(env=[
        {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
        {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "spec.host"}}},
        {"name": "D", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}},
        {"name": "E", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k.v"}}},
        {"name": "F", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
        {"name": "G", "valueFrom": {"resourceFieldRef": {"resource": "requests.hugepages-2Mi"}}},
    ])),
    ("device-on-claim", {**_with(volumeDevices=[{"name": "data", "devicePath": "/dev/xvda"}]),
                         "volumes": [_PVC]}),
    ("resize-policy", _with(resizePolicy=[
        {"resourceName": "cpu", "restartPolicy": "NotRequired"},
        {"resourceName": "memory", "restartPolicy": "RestartContainer"}])),
    ("handlers", {**_with(
        readinessProbe={"tcpSocket": {"port": "web"}},
        livenessProbe={"httpGet": {"port": 8080, "httpHeaders": [{"name": "X-A", "value": "1"}]}},
        startupProbe={"grpc": {"port": 9000}},
        lifecycle={"preStop": {"exec": {"command": ["sh", "-c", "sleep 1"]}},
                   "postStart": {"httpGet": {"port": "web"}}},
        ports=[{"name": "web", "containerPort": 80}]),
        "initContainers": [_container(name="init", restartPolicy="Always",
                                      startupProbe={"tcpSocket": {"port": 80}})]}),
    ("security", {**_with(securityContext={
        "seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/a.json"},
        "appArmorProfile": {"type": "Localhost", "localhostProfile": "k8s-apparmor"}}),
        "securityContext": {"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"},
                                        {"name": "net/ipv4/ip_local_port_range",
                                         "value": "1024 65000"}],
                            "seccompProfile": {"type": "RuntimeDefault"},
                            "appArmorProfile": {"type": "Unconfined"}}}),
    ("scheduling", {**_with(), "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]},
                                      {"key": "cores", "operator": "Gt", "values": ["4"]}],
                 "matchFields": [{"key": "metadata.name", "operator": "In",
                                  "values": ["node-1"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "preference": {"matchExpressions": [
                    {"key": "gpu", "operator": "Exists"}]}}]},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": {"labelSelector": _SELECTOR,
                                              "topologyKey": "kubernetes.io/hostname"}}]}},
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": _TOPOLOGY, "whenUnsatisfiable": "DoNotSchedule",
             "minDomains": 3, "labelSelector": _SELECTOR, "matchLabelKeys": ["pod-template-hash"],
             "nodeAffinityPolicy": "Honor", "nodeTaintsPolicy": "Ignore"}]}),
    ("host-aliases-os", {**_with(), "os": {"name": "linux"}, "hostAliases": [
        {"ip": "10.1.2.3", "hostnames": ["db.local"]}, {"ip": "2001:db8::1"}]}),
]


@pytest.mark.parametrize(("case", "spec", "causes"), REJECTED, ids=[c[0] for c in REJECTED])
def test_pod_rule_rejects_as_kube_does(shared: ServerThread, case: str, spec: dict[str, Any],
                                       causes: list[Cause]) -> None:
    reply = call(shared, "POST", POD.collection(), _pod(case, spec))
    assert _causes(reply) == causes
    assert call(shared, "GET", POD.item(_name(case))).status == 404  # nothing stored


@pytest.mark.parametrize(("case", "spec"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_pod_rule_accepts_what_kube_accepts(shared: ServerThread, case: str,
                                            spec: dict[str, Any]) -> None:
    reply = call(shared, "POST", POD.collection(), _pod(case, spec))
    assert reply.status == 201, reply.body


def test_deployment_template_gets_the_pod_rules(shared: ServerThread) -> None:
    template = {"spec": {"template": {"spec": {"containers": [
        _container(livenessProbe={"httpGet": {"port": 0}})]}}}}
    body = _merged(DEPLOYMENT.obj("probe-port"), template)
    assert _causes(call(shared, "POST", DEPLOYMENT.collection(), body)) == [
        ("FieldValueInvalid", "spec.template.spec.containers[0].livenessProbe.httpGet.port",
         f"Invalid value: 0: {_PORT_RANGE}")]


@kubectl.needs_kubectl
def test_kubectl_create_shows_the_probe_port_error(make_server: Any, tmp_path: Path) -> None:
    server = make_server(insecure_http=False)
    manifest = tmp_path / "pod.json"
    manifest.write_text(json.dumps(_pod("web", _with(readinessProbe={"httpGet": {"port": 0}}))))
    done = kubectl.run(server, "create", "-f", str(manifest))
    assert done.returncode == 1
    assert done.stderr == (
        'The Pod "web" is invalid: spec.containers[0].readinessProbe.httpGet.port: '
        f"Invalid value: 0: {_PORT_RANGE}\n")


@kubectl.needs_kubectl
def test_kubectl_create_shows_each_env_error(make_server: Any, tmp_path: Path) -> None:
    server = make_server(insecure_http=False)
    manifest = tmp_path / "pod.json"
    manifest.write_text(json.dumps(_pod("web", _env({"configMapKeyRef": {"name": "cm"}}))))
    done = kubectl.run(server, "create", "-f", str(manifest))
    assert done.returncode == 1
    assert done.stderr == (
        'The Pod "web" is invalid: spec.containers[0].env[0].valueFrom.configMapKeyRef.key: '
        "Required value\n")


# --- owner references (every kind) ------------------------------------------------------------

def _owner(kind: str, name: str, uid: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind, "name": name, "uid": uid, **extra}


def test_an_event_cannot_own_anything(shared: ServerThread) -> None:
    body = CONFIG_MAP.obj("owned-by-event", ownerReferences=[_owner("Event", "e", "u1")])
    assert _causes(call(shared, "POST", CONFIG_MAP.collection(), body)) == [
        ("FieldValueInvalid", "metadata.ownerReferences",
         'Invalid value: v1.OwnerReference{APIVersion:"v1", Kind:"Event", Name:"e", UID:"u1", '
         "Controller:(*bool)(nil), BlockOwnerDeletion:(*bool)(nil)}: /v1, Kind=Event is "
         "disallowed from being an owner")]


def test_only_one_owner_is_the_controller(shared: ServerThread) -> None:
    owners = [_owner("Pod", "a", "u1", controller=True),
              _owner("Pod", "b", "u2", controller=True)]
    body = CONFIG_MAP.obj("two-controllers", ownerReferences=owners)
    shown = ", ".join(
        f'v1.OwnerReference{{APIVersion:"v1", Kind:"Pod", Name:"{n}", UID:"{u}", '
        "Controller:(*bool)(0xc000000000), BlockOwnerDeletion:(*bool)(nil)}"
        for n, u in (("a", "u1"), ("b", "u2")))
    assert _causes(call(shared, "POST", CONFIG_MAP.collection(), body)) == [
        ("FieldValueInvalid", "metadata.ownerReferences",
         f"Invalid value: []v1.OwnerReference{{{shown}}}: Only one reference can have "
         'Controller set to true. Found "true" in references for Pod/a and Pod/b')]


def test_one_controller_among_owners_is_accepted(shared: ServerThread) -> None:
    owners = [_owner("Pod", "a", "u1", controller=True, blockOwnerDeletion=True),
              _owner("Pod", "b", "u2", controller=False), _owner("Node", "n", "u3")]
    body = CONFIG_MAP.obj("one-controller", ownerReferences=owners)
    reply = call(shared, "POST", CONFIG_MAP.collection(), body)
    assert reply.status == 201, reply.body


# --- event series ---------------------------------------------------------------------------

def test_events_k8s_io_series_needs_count_and_time(shared: ServerThread) -> None:
    body = _merged(EVENT.obj("series"), {"series": {}})
    assert _causes(call(shared, "POST", EVENT.collection(), body)) == [
        ("FieldValueInvalid", "series.count", 'Invalid value: "": should be at least 2'),
        ("FieldValueRequired", "series.lastObservedTime", "Required value")]


def test_core_v1_event_series_is_not_checked(shared: ServerThread) -> None:
    """ValidateEventCreate stops after legacyValidateEvent for core/v1 requests."""
    body = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "old-series"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "R", "series": {"count": 1}}
    reply = call(shared, "POST", "/api/v1/namespaces/default/events", body)
    assert reply.status == 201, reply.body
    assert reply.json["series"]["count"] == 1


def test_secret_string_data_is_stored_in_data(shared: ServerThread) -> None:
    """kube decodes a v1 Secret into its internal form, which has no ``stringData``: each value
    overwrites ``data``'s under its key, base64-encoded, on create, update, patch and apply."""
    path = "/api/v1/namespaces/default/secrets"
    manifest = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sd"},
                "data": {"kept": "YQ==", "over": "eA=="},
                "stringData": {"over": "written", "new": "ünï"}}
    created = call(shared, "POST", path, manifest)
    assert created.status == 201, created.body
    assert "stringData" not in created.json
    assert created.json["data"] == {"kept": "YQ==", "over": "d3JpdHRlbg==", "new": "w7xuw68="}
    assert call(shared, "GET", f"{path}/sd").json["data"] == created.json["data"]
    patched = call(shared, "PATCH", f"{path}/sd", {"stringData": {"kept": "b"}})
    assert patched.status == 200, patched.body
    assert "stringData" not in patched.json and patched.json["data"]["kept"] == "Yg=="
    applied = kubectl.ok(shared, "apply", "-o", "json", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "sd-applied", "namespace": "default"},
        "stringData": {"password": "s3cret"}}))
    assert json.loads(applied)["data"] == {"password": "czNjcmV0"}
    assert "stringData" not in json.loads(applied)
    again = kubectl.run(shared, "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "sd-applied", "namespace": "default"},
        "stringData": {"password": "s3cret"}}))
    assert again.returncode == 0, again.stderr
