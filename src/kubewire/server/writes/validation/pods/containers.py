"""Container rules beside pod.py's: volume devices, their overlap with mounts, resize policy.

Source: kubernetes pkg/apis/core/validation/validation.go (``ValidateVolumeDevices``,
``isMatchedDevice``, the volumeDevices checks of ``ValidateVolumeMounts``,
``validatePathNoBacksteps``, ``validateResizePolicy``). A device must name a valid volume whose
source is a PersistentVolumeClaim or an ephemeral volume (``volumes`` maps each valid volume's
name to the volume, as ``pod.validate_volumes`` returns them). The resize-policy rule that
needs the pod's ``restartPolicy`` (Never allows only NotRequired) is not checked here.

Pure: objects in, ``FieldError``s out.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubewire.json_types import JSON
from kubewire.server.writes.validation.meta import text_at
from kubewire.status import FieldError, invalid, not_supported, required

RESIZE_RESOURCES = ("cpu", "memory")  # sets.List(supportedResizeResources)
RESIZE_POLICIES = ("NotRequired", "RestartContainer")  # sets.List(supportedResizePolicies)


def _items(container: Mapping[str, JSON], key: str) -> list[dict[str, JSON]]:
    value = container.get(key)
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def device_paths(container: Mapping[str, JSON]) -> dict[str, str]:
    """``GetVolumeDeviceMap``: each device's name -> its path (a later device wins)."""
    return {text_at(d, "name"): text_at(d, "devicePath")
            for d in _items(container, "volumeDevices")}


def mount_device_errors(mount: Mapping[str, JSON], devices: Mapping[str, str],
                        path: str) -> list[FieldError]:
    """The volumeDevices checks ``ValidateVolumeMounts`` makes on the mount at ``path``."""
    name, mount_path = text_at(mount, "name"), text_at(mount, "mountPath")
    errors = []
    if name in devices:
        errors.append(invalid(f"{path}.name", name, "must not already exist in volumeDevices"))
    if mount_path in devices.values():
        errors.append(invalid(f"{path}.mountPath", mount_path,
                              "must not already exist as a path in volumeDevices"))
    return errors


def _is_block_source(volume: Mapping[str, JSON]) -> bool:
    return volume.get("persistentVolumeClaim") is not None or volume.get("ephemeral") is not None


def _device_name_errors(name: str, names: set[str],
                        volumes: Mapping[str, Mapping[str, JSON]], path: str) -> list[FieldError]:
    errors = [required(path)] if not name else []
    if name in names:
        errors.append(invalid(path, name, "must be unique"))
    volume = volumes.get(name)
    if volume is None:
        errors.append(FieldError("FieldValueNotFound", path, name))
    elif not _is_block_source(volume):
        errors.append(invalid(path, name, "can only use volume source type of "
                              "PersistentVolumeClaim or Ephemeral for block mode"))
    return errors


def volume_device_errors(container: Mapping[str, JSON], volumes: Mapping[str, Mapping[str, JSON]],
                         path: str) -> list[FieldError]:
    """``ValidateVolumeDevices`` for the container's ``volumeDevices`` at ``path``."""
    mounts = {text_at(m, "name"): text_at(m, "mountPath")
              for m in _items(container, "volumeMounts")}
    errors: list[FieldError] = []
    names: set[str] = set()
    paths: set[str] = set()
    for i, device in enumerate(_items(container, "volumeDevices")):
        item = f"{path}[{i}]"
        name, device_path = text_at(device, "name"), text_at(device, "devicePath")
        errors += _device_name_errors(name, names, volumes, f"{item}.name")
        if not device_path:
            errors.append(required(f"{item}.devicePath"))
        if device_path in paths:
            errors.append(invalid(f"{item}.devicePath", device_path, "must be unique"))
        if device_path and ".." in device_path.split("/"):
            errors.append(invalid(f"{item}.devicePath", device_path,
                                  "can not contain backsteps ('..')"))
        else:
            paths.add(device_path)
        if name in mounts:
            errors.append(invalid(f"{item}.name", name, "must not already exist in volumeMounts"))
        if device_path in mounts.values():
            errors.append(invalid(f"{item}.devicePath", device_path,
                                  "must not already exist as a path in volumeMounts"))
        if name:
            names.add(name)
    return errors


def resize_policy_errors(container: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``validateResizePolicy`` for the container's ``resizePolicy`` at ``path``: kube reports
    a missing or unsupported value on the list, a repeated resource on its item."""
    errors: list[FieldError] = []
    seen: set[str] = set()
    for i, policy in enumerate(_items(container, "resizePolicy")):
        resource, restart = text_at(policy, "resourceName"), text_at(policy, "restartPolicy")
        if resource in seen:
            errors.append(FieldError("FieldValueDuplicate", f"{path}[{i}]", resource))
        seen.add(resource)
        for value, supported in ((resource, RESIZE_RESOURCES), (restart, RESIZE_POLICIES)):
            if not value:
                errors.append(required(path))
            elif value not in supported:
                errors.append(not_supported(path, value, supported))
    return errors
