"""Pod spec validation: kube's most-hit ``ValidatePodSpec`` rules, in kube's order.

Source: kubernetes pkg/apis/core/validation/validation.go (``ValidatePodSpec``,
``validateContainers``, ``validateContainerCommon``, ``validateContainerPorts``, ``ValidateEnv``,
``ValidateVolumes``, ``ValidateVolumeMounts``, ``ValidateContainerResources``,
``ValidatePodUpdate``). Objects arrive defaulted (``server.defaults``), as kube validates them.
The same spec rules serve Pods (``spec``) and pod templates (``spec.template.spec``).
More of ``ValidatePodSpec`` lives in sibling modules, called from here in kube's order:
``env`` (env ``valueFrom``), ``containers`` (volume devices, resize policy),
``probes`` (probes, lifecycle hooks), ``security`` (sysctls, seccomp, AppArmor),
``scheduling`` (affinity, topology spread) and ``spec_rules`` (host aliases, ``os``).

Pure: objects in, ``FieldError``s out.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

from kubewire.json_copy import copy_json
from kubewire.json_types import JSON
from kubewire.names import (
    dns1123_label_ok,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_valid_port_name,
)
from kubewire.quantity import parse_quantity
from kubewire.resources import Resource
from kubewire.schema import type_for
from kubewire.server.writes.validation.meta import dict_at, int_at, text_at
from kubewire.server.writes.validation.pods import spec_rules as pod_spec_rules
from kubewire.server.writes.validation.pods.containers import (
    device_paths,
    mount_device_errors,
    resize_policy_errors,
    volume_device_errors,
)
from kubewire.server.writes.validation.pods.env import value_from_errors
from kubewire.server.writes.validation.pods.probes import container_handler_errors
from kubewire.server.writes.validation.pods.security import container_security_context_errors
from kubewire.status import FieldError, forbidden, invalid, not_supported, required

PORT_RANGE_ERROR = "must be between 1 and 65535, inclusive"  # validation.InclusiveRangeError
PROTOCOLS = ("SCTP", "TCP", "UDP")  # sets.List(supportedPortProtocols): sorted
RESTART_POLICIES = ("Always", "OnFailure", "Never")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
TERMINATION_MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")
ENV_NAME_ERROR = ("a valid environment variable name must consist only of printable ASCII "
                  "characters other than '='")  # IsRelaxedEnvVarName (on by default since 1.30)
UPDATABLE_POD_SPEC_FIELDS = (
    "`spec.containers[*].image`", "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`", "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously "
    "negative)")
POD_UPDATE_FORBIDDEN = ("pod updates may not change fields other than "
                        + ",".join(UPDATABLE_POD_SPEC_FIELDS))
_INT32_MAX = 2**31 - 1


def _list(parent: Mapping[str, JSON], key: str) -> list[JSON]:
    value = parent.get(key)
    return value if isinstance(value, list) else []


def port_number_errors(path: str, value: int) -> list[FieldError]:
    """``IsValidPortNum`` as field errors."""
    return [] if 1 <= value <= 65535 else [invalid(path, value, PORT_RANGE_ERROR)]


def port_name_problems(name: str) -> list[str]:
    """``validation.IsValidPortName`` (an IANA_SVC_NAME)."""
    return is_valid_port_name(name)


def enum_errors(path: str, value: str, supported: tuple[str, ...]) -> list[FieldError]:
    """The switch kube writes for a required enum: "" is Required, others NotSupported."""
    if value in supported:  # never "": every supported value is a word
        return []
    return [required(path)] if not value else [not_supported(path, value, supported)]


def dns_label_errors(path: str, value: str) -> list[FieldError]:
    if dns1123_label_ok(value):  # the common case, without building messages
        return []
    return [invalid(path, value, m) for m in is_dns1123_label(value)]


# --- volumes ----------------------------------------------------------------------------------

@functools.cache  # schema facts do not change; every Pod write asks
def _volume_source_keys() -> frozenset[str]:
    """The VolumeSource members: every Volume field but its name (from the schema facts)."""
    volumes = type_for("v1", "Pod").at(("spec", "volumes"))
    volume = volumes.items if volumes is not None else None
    return frozenset(volume.properties if volume is not None else ()) - {"name"}


# validateVolumeSource's order: the first source present is validated, each later one is
# Forbidden. Sources kube does not list keep the schema's order after these.
_SOURCE_ORDER = ("emptyDir", "hostPath", "gitRepo", "gcePersistentDisk", "awsElasticBlockStore",
                 "secret", "nfs", "iscsi", "glusterfs", "flocker", "persistentVolumeClaim", "rbd",
                 "cinder", "cephfs", "quobyte", "downwardAPI", "fc", "flexVolume", "configMap",
                 "azureFile", "vsphereVolume", "photonPersistentDisk", "portworxVolume",
                 "azureDisk", "storageos", "projected", "scaleIO", "csi", "ephemeral", "image")
_SOURCE_RANK = {key: rank for rank, key in enumerate(_SOURCE_ORDER)}


def _source_rank(key: str) -> int:
    return _SOURCE_RANK.get(key, len(_SOURCE_ORDER))
# Each source's string or list fields kube requires (``field.Required(child, detail)`` when
# empty): source -> (the path kube reports under, ((field, detail), ...)). kube reports
# gcePersistentDisk under ``persistentDisk``.
_SOURCE_REQUIRED: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "hostPath": ("hostPath", (("path", ""),)),
    "gitRepo": ("gitRepo", (("repository", ""),)),
    "gcePersistentDisk": ("persistentDisk", (("pdName", ""),)),
    "awsElasticBlockStore": ("awsElasticBlockStore", (("volumeID", ""),)),
    "secret": ("secret", (("secretName", ""),)),
    "nfs": ("nfs", (("server", ""), ("path", ""))),
    "iscsi": ("iscsi", (("targetPortal", ""), ("iqn", ""))),
    "glusterfs": ("glusterfs", (("endpoints", ""), ("path", ""))),
    "persistentVolumeClaim": ("persistentVolumeClaim", (("claimName", ""),)),
    "rbd": ("rbd", (("monitors", ""), ("image", ""))),
    "cinder": ("cinder", (("volumeID", ""),)),
    "cephfs": ("cephfs", (("monitors", ""),)),
    "quobyte": ("quobyte", (("registry", "must be a host:port pair or multiple pairs "
                                         "separated by commas"), ("volume", ""))),
    "flexVolume": ("flexVolume", (("driver", ""),)),
    "configMap": ("configMap", (("name", ""),)),
    "azureFile": ("azureFile", (("secretName", ""), ("shareName", ""))),
    "vsphereVolume": ("vsphereVolume", (("volumePath", ""),)),
    "photonPersistentDisk": ("photonPersistentDisk", (("pdID", ""),)),
    "portworxVolume": ("portworxVolume", (("volumeID", ""),)),
    "azureDisk": ("azureDisk", (("diskName", ""), ("diskURI", ""))),
    "storageos": ("storageos", (("volumeName", ""),)),
    "scaleIO": ("scaleIO", (("gateway", ""), ("system", ""), ("volumeName", ""))),
    "csi": ("csi", (("driver", ""),)),
    "ephemeral": ("ephemeral", (("volumeClaimTemplate", ""),)),
}


def _empty(value: JSON) -> bool:
    """A Go string, slice or pointer at its zero value (a JSON value equal to "" or [] is
    falsy, so a truthy value is answered first)."""
    return not value and (value is None or value == "" or value == [])


def _key_to_path_errors(items: list[JSON], path: str) -> list[FieldError]:
    """``validateKeyToPath`` for each item: key and path required."""
    errors: list[FieldError] = []
    for i, item in enumerate(items):
        if isinstance(item, dict) and (_empty(item.get("key")) or _empty(item.get("path"))):
            errors += [required(f"{path}[{i}].{key}") for key in ("key", "path")
                       if _empty(item.get(key))]
    return errors


def _downward_api_errors(items: list[JSON], path: str) -> list[FieldError]:
    """``validateDownwardAPIVolumeFile`` for each item; kube reports under the source's path,
    without the item's index."""
    errors: list[FieldError] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        if _empty(item.get("path")):
            errors.append(required(f"{path}.path"))
        if item.get("fieldRef") is None and item.get("resourceFieldRef") is None:
            errors.append(required(path, "one of fieldRef and resourceFieldRef is required"))
    return errors


def _items_of(value: Mapping[str, JSON]) -> list[JSON]:
    items = value.get("items")
    return items if isinstance(items, list) else []


def _projected_ref_errors(key: str, ref: JSON, path: str, i: int) -> list[FieldError]:
    """A projection's secret or configMap (``key``): a name, and keys and paths."""
    if not isinstance(ref, dict):
        return []
    errors: list[FieldError] = []
    if _empty(ref.get("name")):
        errors.append(required(f"{path}.sources[{i}].{key}.name"))
    items = _items_of(ref)
    if items:
        errors += _key_to_path_errors(items, f"{path}.sources[{i}].{key}.items")
    return errors


def _projected_downward_errors(_: str, downward: JSON, path: str, i: int) -> list[FieldError]:
    items = _items_of(downward) if isinstance(downward, dict) else []
    return _downward_api_errors(items, f"{path}.sources[{i}].downwardAPI") if items else []


def _projected_token_errors(_: str, token: JSON, path: str, i: int) -> list[FieldError]:
    if isinstance(token, dict) and _empty(token.get("path")):
        return [required(f"{path}.path")]  # kube names the projection's path
    return []


def _projected_bundle_errors(_: str, bundle: JSON, path: str, i: int) -> list[FieldError]:
    if isinstance(bundle, dict) and _empty(bundle.get("path")):
        return [required(f"{path}.sources[{i}].clusterTrustBundle.path")]
    return []


# validateProjectionSources' checks per projection, in its order (a source with several
# projections gets each one's errors in this order).
_PROJECTIONS: dict[str, Callable[[str, JSON, str, int], list[FieldError]]] = {
    "secret": _projected_ref_errors,
    "configMap": _projected_ref_errors,
    "downwardAPI": _projected_downward_errors,
    "serviceAccountToken": _projected_token_errors,
    "clusterTrustBundle": _projected_bundle_errors,
}


# A copy of the last projected sources found valid. Every pod's token volume projects the same
# three sources (the ServiceAccount plugin's), so one C-level comparison answers them. Sound
# because the checks read only what equal JSON shares: strings, presence and null, object and
# list shapes, truthiness (True == 1 and 1 == 1.0 agree on all of those); the path appears
# only in errors, and an equal list has the same errors, so none.
_last_valid_projection: list[list[JSON]] = []


def _projection_errors(sources: list[JSON], path: str) -> list[FieldError]:
    """``validateProjectionSources``' required fields (paths are built only for an error:
    every pod's token volume has three valid sources, one projection each)."""
    if _last_valid_projection and sources == _last_valid_projection[0]:
        return []
    errors = _projection_source_errors(sources, path)
    if not errors:
        _last_valid_projection[:] = [copy_json(sources)]
    return errors


def _projection_source_errors(sources: list[JSON], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for i, source in enumerate(sources):
        if not isinstance(source, dict):
            continue
        for key in source if len(source) == 1 else [k for k in _PROJECTIONS if k in source]:
            check = _PROJECTIONS.get(key)
            if check is not None:
                errors += check(key, source[key], path, i)
    return errors


def _volume_source_errors(key: str, source: JSON, path: str) -> list[FieldError]:
    """The required fields of the volume's (first) source, as kube's per-source validators
    report them."""
    if not isinstance(source, dict):
        return []
    errors: list[FieldError] = []
    shown, fields = _SOURCE_REQUIRED.get(key, (key, ()))
    for name, detail in fields:
        if _empty(source.get(name)):
            errors.append(required(f"{path}.{shown}.{name}", detail))
    if key == "projected":  # every pod's token volume
        sources = source.get("sources")
        if isinstance(sources, list) and sources:
            errors += _projection_errors(sources, f"{path}.projected")
    elif key == "nfs" and not str(source.get("path") or "").startswith("/"):
        errors.append(invalid(f"{path}.nfs.path", str(source.get("path") or ""),
                              "must be an absolute path"))
    elif key == "csi":
        driver = str(source.get("driver") or "")
        errors += [invalid(f"{path}.csi.driver", driver, m)
                   for m in is_dns1123_subdomain(driver.lower())]
    elif key in ("secret", "configMap"):
        errors += _key_to_path_errors(_list(source, "items"), f"{path}.{key}.items")
    elif key == "downwardAPI":
        errors += _downward_api_errors(_list(source, "items"), f"{path}.downwardAPI")
    return errors


def validate_volumes(volumes: list[JSON],
                     path: str) -> tuple[dict[str, dict[str, JSON]], list[FieldError]]:
    """``ValidateVolumes``: the valid volumes by name, and the errors."""
    sources = _volume_source_keys()
    names: dict[str, dict[str, JSON]] = {}
    errors: list[FieldError] = []
    for i, volume in enumerate(volumes):
        if not isinstance(volume, dict):
            continue
        item = f"{path}[{i}]"
        found = [key for key in volume if key in sources and volume[key] is not None]
        if len(found) > 1:
            found.sort(key=_source_rank)
        volume_errors: list[FieldError] = []
        if not found:
            volume_errors.append(required(item, "must specify a volume type"))
        else:
            volume_errors += _volume_source_errors(found[0], volume[found[0]], item)
            if len(found) > 1:
                volume_errors += [forbidden(f"{item}.{key}", "may not specify more than 1 "
                                            "volume type") for key in found[1:]]
        name = text_at(volume, "name")
        if not name:
            volume_errors.append(required(f"{item}.name"))
        elif not dns1123_label_ok(name):
            volume_errors += dns_label_errors(f"{item}.name", name)
        if name in names:
            volume_errors.append(FieldError("FieldValueDuplicate", f"{item}.name", name))
        if volume_errors:
            errors += volume_errors
        else:
            names[name] = volume
    return names, errors


# --- containers -------------------------------------------------------------------------------

def _port_errors(ports: list[JSON], path: str) -> list[FieldError]:
    """``validateContainerPorts``."""
    errors: list[FieldError] = []
    names: set[str] = set()
    for i, port in enumerate(ports):
        if not isinstance(port, dict):
            continue
        item = f"{path}[{i}]"
        name = text_at(port, "name")
        if name:
            problems = port_name_problems(name)
            if problems:
                errors += [invalid(f"{item}.name", name, m) for m in problems]
            elif name in names:
                errors.append(FieldError("FieldValueDuplicate", f"{item}.name", name))
            else:
                names.add(name)
        container_port = int_at(port, "containerPort") or 0
        if container_port == 0:
            errors.append(required(f"{item}.containerPort"))
        else:
            errors += port_number_errors(f"{item}.containerPort", container_port)
        host_port = int_at(port, "hostPort") or 0
        if host_port:
            errors += port_number_errors(f"{item}.hostPort", host_port)
        protocol = text_at(port, "protocol")
        if protocol not in PROTOCOLS:
            errors += enum_errors(f"{item}.protocol", protocol, PROTOCOLS)
    return errors


def _env_errors(env: list[JSON], path: str) -> list[FieldError]:
    """``ValidateEnv`` with the relaxed name rule."""
    errors: list[FieldError] = []
    for i, var in enumerate(env):
        if not isinstance(var, dict):
            continue
        name = text_at(var, "name")
        name_path = f"{path}[{i}].name"
        if not name:
            errors.append(required(name_path))
            errors.append(invalid(name_path, name, "environment variable name must be non-empty"))
        elif not (name.isascii() and name.isprintable()) or "=" in name:
            # printable ASCII is exactly 32..126 (isprintable: no control character, no DEL)
            errors.append(invalid(name_path, name, ENV_NAME_ERROR))
        errors += value_from_errors(var, f"{path}[{i}].valueFrom")
    return errors


def _mount_errors(mounts: list[JSON], volumes: Mapping[str, JSON], path: str,
                  devices: Mapping[str, str] | None = None) -> list[FieldError]:
    """``ValidateVolumeMounts``: a known volume, a unique mount path, no device's name or
    path (``devices``: the container's device paths by name)."""
    errors: list[FieldError] = []
    mount_paths: set[str] = set()
    for i, mount in enumerate(mounts):
        if not isinstance(mount, dict):
            continue
        name, mount_path = text_at(mount, "name"), text_at(mount, "mountPath")
        mount_paths_before = len(mount_paths)
        mount_paths.add(mount_path)
        if (name and name in volumes and mount_path and len(mount_paths) > mount_paths_before
                and not devices):
            continue  # the common case: no error, so no path to build
        item = f"{path}[{i}]"
        if not name:
            errors.append(required(f"{item}.name"))
        if name not in volumes:
            errors.append(FieldError("FieldValueNotFound", f"{item}.name", name))
        if not mount_path:
            errors.append(required(f"{item}.mountPath"))
        if len(mount_paths) == mount_paths_before:  # it was there already
            errors.append(invalid(f"{item}.mountPath", mount_path, "must be unique"))
        if devices:  # without devices, nothing to clash with
            errors += mount_device_errors(mount, devices, item)
    return errors


def _resource_errors(resources: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``ValidateContainerResources``: quantities not negative, requests within limits."""
    errors: list[FieldError] = []
    limits, requests = dict_at(resources, "limits"), dict_at(resources, "requests")
    for section, values in (("limits", limits), ("requests", requests)):
        for name, text in values.items():
            value = parse_quantity(str(text))
            if value is not None and value < 0:
                errors.append(invalid(f"{path}.{section}[{name}]", str(text),
                                      "must be greater than or equal to 0"))
            if section != "requests" or name not in limits:
                continue
            limit = parse_quantity(str(limits[name]))
            if value is not None and limit is not None and value > limit:
                errors.append(invalid(f"{path}.requests", str(text), "must be less than or equal "
                                      f"to {name} limit of {limits[name]}"))
    return errors


def _container_head_errors(container: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``validateContainerCommon``'s first checks: name, image, terminationMessagePolicy."""
    errors: list[FieldError] = []
    name = text_at(container, "name")
    if not name:
        errors.append(required(f"{path}.name"))
    elif not dns1123_label_ok(name):
        errors += dns_label_errors(f"{path}.name", name)
    if not text_at(container, "image"):
        errors.append(required(f"{path}.image"))
    policy = text_at(container, "terminationMessagePolicy")
    if policy not in TERMINATION_MESSAGE_POLICIES:
        errors += enum_errors(f"{path}.terminationMessagePolicy", policy,
                              TERMINATION_MESSAGE_POLICIES)
    return errors


def _container_volume_errors(container: Mapping[str, JSON],
                             volumes: Mapping[str, dict[str, JSON]],
                             path: str) -> list[FieldError]:
    """The mounts (``ValidateVolumeMounts``), then the devices (``ValidateVolumeDevices``)."""
    mounts, devices = container.get("volumeMounts"), container.get("volumeDevices")
    has_devices = isinstance(devices, list) and bool(devices)
    errors: list[FieldError] = []
    if isinstance(mounts, list) and mounts:
        errors += _mount_errors(mounts, volumes, f"{path}.volumeMounts",
                                device_paths(container) if has_devices else None)
    if has_devices:
        errors += volume_device_errors(container, volumes, f"{path}.volumeDevices")
    return errors


def _container_errors(container: Mapping[str, JSON], volumes: Mapping[str, dict[str, JSON]],
                      path: str) -> list[FieldError]:
    """``validateContainerCommon``. A check of a list or object field runs only when the field
    is set (each gives [] without it: it reads only that field), and paths are built only for
    a check that runs: a typical container sets a few of the dozen fields checked."""
    errors = _container_head_errors(container, path)
    ports = container.get("ports")
    if isinstance(ports, list) and ports:
        errors += _port_errors(ports, f"{path}.ports")
    env = container.get("env")
    if isinstance(env, list) and env:
        errors += _env_errors(env, f"{path}.env")
    errors += _container_volume_errors(container, volumes, path)
    pull_policy = text_at(container, "imagePullPolicy")
    if pull_policy not in PULL_POLICIES:
        errors += enum_errors(f"{path}.imagePullPolicy", pull_policy, PULL_POLICIES)
    resources = container.get("resources")
    if isinstance(resources, dict) and resources:
        errors += _resource_errors(resources, f"{path}.resources")
    resize = container.get("resizePolicy")
    if isinstance(resize, list) and resize:
        errors += resize_policy_errors(container, f"{path}.resizePolicy")
    if isinstance(container.get("securityContext"), dict):
        errors += container_security_context_errors(container, f"{path}.securityContext")
    return errors


def _containers_errors(containers: list[JSON], volumes: Mapping[str, dict[str, JSON]], path: str,
                       taken: set[str], required_list: bool) -> list[FieldError]:
    """``validateContainers`` / ``validateInitContainers``: names unique across ``taken``."""
    if not containers and required_list:
        return [required(path)]
    errors: list[FieldError] = []
    for i, container in enumerate(containers):
        if not isinstance(container, dict):
            continue
        item = f"{path}[{i}]"
        errors += _container_errors(container, volumes, item)
        name = text_at(container, "name")
        if name in taken:
            errors.append(FieldError("FieldValueDuplicate", f"{item}.name", name))
        else:
            taken.add(name)
        errors += container_handler_errors(container, item, init=not required_list)
    return errors


# --- the pod spec -----------------------------------------------------------------------------

def validate_pod_spec(spec: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``ValidatePodSpec``'s most-hit rules for the spec at ``path``."""
    volumes, errors = validate_volumes(_list(spec, "volumes"), f"{path}.volumes")
    init = _list(spec, "initContainers")
    if init:
        # Init containers are checked first; regular names must not repeat theirs (kube
        # reports the clash on the init container, so collect regular names before).
        regular = {text_at(c, "name") for c in _list(spec, "containers") if isinstance(c, dict)}
        errors += _containers_errors(init, volumes, f"{path}.initContainers", regular, False)
    errors += _containers_errors(_list(spec, "containers"), volumes, f"{path}.containers",
                                 set(), True)
    # kube defaults these even when the spec is missing (kubewire's defaulting needs one)
    restart_policy = text_at(spec, "restartPolicy") or "Always"
    if restart_policy not in RESTART_POLICIES:
        errors += enum_errors(f"{path}.restartPolicy", restart_policy, RESTART_POLICIES)
    dns_policy = text_at(spec, "dnsPolicy") or "ClusterFirst"
    if dns_policy not in DNS_POLICIES:
        errors += enum_errors(f"{path}.dnsPolicy", dns_policy, DNS_POLICIES)
    errors += pod_spec_rules.after_dns_policy(spec, path)
    deadline = int_at(spec, "activeDeadlineSeconds")
    if deadline is not None and not 1 <= deadline <= _INT32_MAX:
        errors.append(invalid(f"{path}.activeDeadlineSeconds", deadline,
                              f"must be between 1 and {_INT32_MAX}, inclusive"))
    for key in ("hostname", "subdomain"):
        if text_at(spec, key):
            errors += dns_label_errors(f"{path}.{key}", text_at(spec, key))
    errors += pod_spec_rules.after_hostname(spec, path)
    return errors


def _munged_spec(new: Mapping[str, JSON], old: Mapping[str, JSON]) -> dict[str, JSON]:
    """The new spec with the fields a pod update may change taken from the old one."""
    munged = dict(new)
    for key in ("containers", "initContainers"):
        old_items, new_items = _list(old, key), _list(new, key)
        if key in new and len(old_items) == len(new_items):
            munged[key] = [
                {**n, "image": o.get("image")} if isinstance(n, dict) and isinstance(o, dict)
                else n for n, o in zip(new_items, old_items, strict=True)]
    munged.pop("activeDeadlineSeconds", None)  # checked on its own
    if "activeDeadlineSeconds" in old:
        munged["activeDeadlineSeconds"] = old["activeDeadlineSeconds"]
    old_tolerations = _list(old, "tolerations")
    if all(t in _list(new, "tolerations") for t in old_tolerations):  # additions only
        munged.pop("tolerations", None)
        if "tolerations" in old:
            munged["tolerations"] = old["tolerations"]
    grace, old_grace = int_at(new, "terminationGracePeriodSeconds"), int_at(
        old, "terminationGracePeriodSeconds")
    if grace == 1 and old_grace is not None and old_grace < 0:
        munged["terminationGracePeriodSeconds"] = old_grace
    if _list(old, "schedulingGates"):  # a gated pod's gates may go (only deletions: checked)
        munged.pop("schedulingGates", None)
        if "schedulingGates" in old:
            munged["schedulingGates"] = old["schedulingGates"]
    return munged


def _only_deleted_scheduling_gates(new: Mapping[str, JSON],
                                   old: Mapping[str, JSON]) -> list[FieldError]:
    """validateOnlyDeletedSchedulingGates: a gate the old pod did not have is refused."""
    old_names = {g.get("name") for g in _list(old, "schedulingGates") if isinstance(g, dict)}
    errors = []
    for i, gate in enumerate(_list(new, "schedulingGates")):
        name = gate.get("name") if isinstance(gate, dict) else None
        if name not in old_names:
            errors.append(forbidden(f"spec.schedulingGates[{i}].name",
                                    "only deletion is allowed, but found new scheduling gate "
                                    f"'{name}'"))
    return errors


def _changed_fields(new: Mapping[str, JSON], old: Mapping[str, JSON]) -> list[str]:
    return [key for key in sorted(set(new) | set(old)) if new.get(key) != old.get(key)]


def validate_pod(resource: Resource, obj: Mapping[str, JSON],
                 old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """Errors for creating (``old`` None) or updating a Pod."""
    spec = dict_at(obj, "spec")
    errors = validate_pod_spec(spec, "spec")
    if old is None:
        return errors
    old_spec = dict_at(old, "spec")
    deadline, old_deadline = int_at(spec, "activeDeadlineSeconds"), int_at(old_spec,
                                                                       "activeDeadlineSeconds")
    if old_deadline is not None and (deadline is None or deadline > old_deadline):
        # ValidatePodUpdate: the deadline may only be set or shortened; kube stops here.
        return [*errors, invalid("spec.activeDeadlineSeconds",
                                 deadline if deadline is not None else "null",
                                 "must be less than or equal to previous value"
                                 if deadline is not None else
                                 "must not update from a positive integer to nil value")]
    errors += _only_deleted_scheduling_gates(spec, old_spec)
    munged = _munged_spec(spec, old_spec)
    if munged != old_spec:
        # kube appends cmp.Diff of the internal PodSpecs, whose spacing go-cmp randomizes on
        # purpose; the changed fields are listed instead.
        changed = ", ".join(_changed_fields(munged, old_spec))
        errors.append(forbidden("spec", f"{POD_UPDATE_FORBIDDEN}\n  changed: {changed}"))
    return errors


# --- ephemeral containers ---------------------------------------------------------------------

# EphemeralContainerCommon fields kube refuses (allowedEphemeralContainerFields false), in the
# struct's order, which is the order of the errors.
EPHEMERAL_FORBIDDEN_FIELDS = ("ports", "resources", "resizePolicy", "restartPolicy",
                              "livenessProbe", "readinessProbe", "startupProbe", "lifecycle")
EPHEMERAL_FORBIDDEN = "cannot be set for an Ephemeral Container"
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"


def _is_set(value: JSON) -> bool:
    """Not Go's zero value (an absent, null, empty or all-empty struct field)."""
    if isinstance(value, dict):
        return any(_is_set(v) for v in value.values())
    return value not in (None, "", 0, False)


def ephemeral_container_errors(spec: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``validateEphemeralContainers``: each as a container, names unique across every
    container, an existing non-ephemeral target, no forbidden field, no subPath."""
    volumes, _ = validate_volumes(_list(spec, "volumes"), f"{path}.volumes")
    others = {text_at(c, "name") for key in ("containers", "initContainers")
              for c in _list(spec, key) if isinstance(c, dict)}
    taken = set(others)
    errors: list[FieldError] = []
    for i, container in enumerate(_list(spec, "ephemeralContainers")):
        if not isinstance(container, dict):
            continue
        item = f"{path}.ephemeralContainers[{i}]"
        errors += _container_errors(container, volumes, item)
        name = text_at(container, "name")
        if name in taken:
            errors.append(FieldError("FieldValueDuplicate", f"{item}.name", name))
        else:
            taken.add(name)
        target = text_at(container, "targetContainerName")
        if target and target not in others:
            errors.append(FieldError("FieldValueNotFound", f"{item}.targetContainerName",
                                     target))
        errors += [forbidden(f"{item}.{key}", EPHEMERAL_FORBIDDEN)
                   for key in EPHEMERAL_FORBIDDEN_FIELDS if _is_set(container.get(key))]
        for j, mount in enumerate(_list(container, "volumeMounts")):
            if isinstance(mount, dict):
                errors += [forbidden(f"{item}.volumeMounts[{j}].{key}", EPHEMERAL_FORBIDDEN)
                           for key in ("subPath", "subPathExpr") if text_at(mount, key)]
    return errors


def validate_ephemeral_containers_update(obj: Mapping[str, JSON],
                                         old: Mapping[str, JSON]) -> list[FieldError]:
    """``ValidatePodEphemeralContainersUpdate``: the pod's spec as a whole, then that no
    existing ephemeral container is removed or changed. kube appends ``cmp.Diff`` of a
    changed one, whose spacing go-cmp randomizes; the changed fields are listed instead."""
    annotations = dict_at(dict_at(old, "metadata"), "annotations")
    if MIRROR_POD_ANNOTATION in annotations:
        return [forbidden("", "static pods do not support ephemeral containers")]
    spec = dict_at(obj, "spec")
    errors = validate_pod_spec(spec, "spec") + ephemeral_container_errors(spec, "spec")
    new_by_name = {text_at(c, "name"): c for c in _list(spec, "ephemeralContainers")
                   if isinstance(c, dict)}
    for was in _list(dict_at(old, "spec"), "ephemeralContainers"):
        if not isinstance(was, dict):
            continue
        name = text_at(was, "name")
        now = new_by_name.get(name)
        if now is None:
            errors.append(forbidden("spec.ephemeralContainers",
                                    f'existing ephemeral containers "{name}" may not be '
                                    "removed\n"))
        elif now != was:
            changed = ", ".join(key for key in _changed_fields(now, was)
                                if _is_set(now.get(key)) or _is_set(was.get(key)))
            errors.append(forbidden(f"spec.ephemeralContainers[{name}]",
                                    f'existing ephemeral containers "{name}" may not be '
                                    f"changed\n  changed: {changed}"))
    return errors
