"""Pod and container security contexts: sysctls, seccomp and AppArmor profiles.

Source: kubernetes pkg/apis/core/validation/validation.go (``validatePodSpecSecurityContext``,
``validateSysctls``, ``IsValidSysctlName``, ``ValidateHostSysctl``,
``validateSeccompProfileField``, ``validateSeccompProfileType``, ``validateLocalDescendingPath``,
``ValidateAppArmorProfileField``, and ``ValidateSecurityContext`` for containers) and
k8s.io/component-helpers node/util/sysctl (``GetNamespace``: which sysctls belong to the
host's network or IPC namespace). Only these rules of the two security contexts are here; the
user and group ids, capabilities and Windows options are not checked.

Where kube prints a struct holding a set pointer (a seccomp profile with a
``localhostProfile``), Go prints the pointer's address; kubewire prints a fixed one
(``meta.go_pointer``).

Pure: objects in, ``FieldError``s out.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping

from kubewire.go_text import GoLiteral, go_quote
from kubewire.json_types import JSON
from kubewire.server.writes.validation.meta import dict_at, go_pointer, text_at
from kubewire.status import FieldError, invalid, not_supported, required

PROFILE_TYPES = ("Localhost", "RuntimeDefault", "Unconfined")  # kube's list, in its order
SYSCTL_MAX_CHARS = 253
SYSCTL_REGEX = r"^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$"
SYSCTL_ERROR = f"must have at most {SYSCTL_MAX_CHARS} characters and match regex {SYSCTL_REGEX}"
# GetNamespace: sysctls in the pod's IPC or network namespace, by name or prefix
_IPC_SYSCTLS = ("kernel.sem",)
_PREFIXES = (("kernel.shm", "ipc"), ("kernel.msg", "ipc"), ("fs.mqueue.", "ipc"),
             ("net.", "net"))
_SYSCTL_RE = re.compile(SYSCTL_REGEX)
# unicode.IsSpace, which strings.TrimSpace trims (Python's isspace also counts \x1c-\x1f)
GO_SPACES = ("\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
             "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


def local_descending_path_errors(target: str, path: str) -> list[FieldError]:
    """``validateLocalDescendingPath``: relative, without a ``..`` element."""
    errors = [invalid(path, target, "must be a relative path")] if posixpath.isabs(target) else []
    if ".." in target.split("/"):
        errors.append(invalid(path, target, "must not contain '..'"))
    return errors


def seccomp_errors(profile: JSON, path: str) -> list[FieldError]:
    """``validateSeccompProfileField`` (nothing when the profile is unset)."""
    if not isinstance(profile, dict):
        return []
    kind, local = text_at(profile, "type"), profile.get("localhostProfile")
    errors: list[FieldError] = []
    if not kind:
        errors.append(required(f"{path}.type", "type is required when seccompProfile is set"))
    elif kind not in PROFILE_TYPES:
        errors.append(not_supported(f"{path}.type", kind, PROFILE_TYPES))
    if kind == "Localhost":
        if local is None:
            errors.append(required(f"{path}.localhostProfile",
                                   "must be set when seccomp type is Localhost"))
        else:
            errors += local_descending_path_errors(str(local), f"{path}.localhostProfile")
    elif local is not None:
        shown = (f"core.SeccompProfile{{Type:{go_quote(kind)}, "
                 f"LocalhostProfile:{go_pointer('*string', local)}}}")
        errors.append(invalid(f"{path}.localhostProfile", GoLiteral(shown),
                              "can only be set when seccomp type is Localhost"))
    return errors


def app_armor_errors(profile: JSON, path: str) -> list[FieldError]:
    """``ValidateAppArmorProfileField`` (nothing when the profile is unset; the 4095-byte
    limit on ``localhostProfile`` is not checked)."""
    if not isinstance(profile, dict):
        return []
    kind, local = text_at(profile, "type"), profile.get("localhostProfile")
    if kind == "Localhost":
        if local is None:
            return [required(f"{path}.localhostProfile",
                             "must be set when AppArmor type is Localhost")]
        text = str(local)
        if text.strip(GO_SPACES) != text:  # strings.TrimSpace
            return [invalid(f"{path}.localhostProfile", text, "must not be padded with whitespace")]
        if not text:
            return [required(f"{path}.localhostProfile",
                             "must be set when AppArmor type is Localhost")]
        return []
    if kind in ("RuntimeDefault", "Unconfined"):
        return [] if local is None else [invalid(
            f"{path}.localhostProfile", str(local),
            "can only be set when AppArmor type is Localhost")]
    if not kind:
        return [required(f"{path}.type", "type is required when appArmorProfile is set")]
    return [not_supported(f"{path}.type", kind, PROFILE_TYPES)]


def _sysctl_namespace(name: str) -> str:
    """``GetNamespace``'s namespace ("ipc", "net" or "") of a sysctl (names with '/' are
    normalized to dots first; a '*' ends the prefix)."""
    slash, dot = name.find("/"), name.find(".")
    if slash != -1 and (dot == -1 or slash < dot):  # NormalizeName: '/' and '.' swap
        name = name.translate(str.maketrans("./", "/."))
    name = name.split("*", 1)[0]
    if name in _IPC_SYSCTLS:
        return "ipc"
    return next((ns for prefix, ns in _PREFIXES if name.startswith(prefix)), "")


def sysctl_errors(spec: Mapping[str, JSON], sysctls: list[JSON], path: str) -> list[FieldError]:
    """``validateSysctls`` for a new pod: names required, valid and unique; none of the host's
    namespaces the pod shares (``hostNetwork``, ``hostIPC``)."""
    errors: list[FieldError] = []
    seen: set[str] = set()
    for i, item in enumerate(sysctls):
        name = text_at(item, "name") if isinstance(item, dict) else ""
        item_path = f"{path}[{i}].name"
        if not name:
            errors.append(required(item_path))
        elif len(name) > SYSCTL_MAX_CHARS or not _SYSCTL_RE.match(name):
            errors.append(invalid(item_path, name, SYSCTL_ERROR))
        elif name in seen:
            errors.append(FieldError("FieldValueDuplicate", item_path, name))
        namespace = _sysctl_namespace(name)
        if spec.get("hostNetwork") is True and namespace == "net":
            errors.append(invalid(item_path, name, "may not be specified when 'hostNetwork' is "
                                  "true"))
        elif spec.get("hostIPC") is True and namespace == "ipc":
            errors.append(invalid(item_path, name, "may not be specified when 'hostIPC' is true"))
        seen.add(name)
    return errors


def pod_security_context_errors(spec: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``validatePodSpecSecurityContext``'s sysctl, seccomp and AppArmor rules, in its order."""
    context = spec.get("securityContext")
    if not isinstance(context, dict):
        return []
    sysctls = context.get("sysctls")
    errors = sysctl_errors(spec, sysctls, f"{path}.sysctls") if isinstance(sysctls, list) else []
    errors += seccomp_errors(context.get("seccompProfile"), f"{path}.seccompProfile")
    errors += app_armor_errors(context.get("appArmorProfile"), f"{path}.appArmorProfile")
    return errors


def container_security_context_errors(container: Mapping[str, JSON],
                                      path: str) -> list[FieldError]:
    """``ValidateSecurityContext``'s seccomp and AppArmor rules for a container."""
    if not isinstance(container.get("securityContext"), dict):
        return []
    context = dict_at(container, "securityContext")
    return (seccomp_errors(context.get("seccompProfile"), f"{path}.seccompProfile")
            + app_armor_errors(context.get("appArmorProfile"), f"{path}.appArmorProfile"))
