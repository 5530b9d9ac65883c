"""A container's probes and lifecycle hooks: kube's ``validateProbe`` and ``validateHandler``.

Source: kubernetes pkg/apis/core/validation/validation.go (``validateLivenessProbe``,
``validateReadinessProbe``, ``validateStartupProbe``, ``validateProbe``, ``validateHandler``,
``validateExecAction``, ``validateHTTPGetAction``, ``ValidatePortNumOrName``,
``validateTCPSocketAction``, ``validateGRPCAction``, ``validateLifecycle``, and the probe and
lifecycle branches of ``validateContainers``/``validateInitContainers``). Objects arrive
defaulted (``httpGet.path`` "/", ``scheme`` HTTP, the probe's periods and thresholds), as kube
validates them. A ``sleep`` handler counts as a handler; its seconds are not checked here.

Pure: objects in, ``FieldError``s out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kubewire.json_types import JSON
from kubewire.names import is_valid_port_name, regex_error
from kubewire.server.writes.validation.meta import dict_at, int_at, text_at
from kubewire.status import FieldError, forbidden, invalid, not_supported, required

PORT_RANGE_ERROR = "must be between 1 and 65535, inclusive"  # validation.InclusiveRangeError
HTTP_SCHEMES = ("HTTP", "HTTPS")  # sets.List(supportedHTTPSchemes)
NEGATIVE = "must be greater than or equal to 0"
HEADER_NAME_FMT = "[-A-Za-z0-9]+"  # validation.IsHTTPHeaderName
HEADER_NAME_ERROR = regex_error("a valid HTTP header must consist of alphanumeric characters or "
                                "'-'", HEADER_NAME_FMT, "X-Header-Name")
INIT_FORBIDDEN = "may not be set for init containers without restartPolicy=Always"
_PROBE_HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")
_LIFECYCLE_HANDLERS = ("exec", "httpGet", "tcpSocket", "sleep")
_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
_PROBE_COUNTS = ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold",
                 "failureThreshold")


def port_num_or_name_errors(port: JSON, path: str) -> list[FieldError]:
    """``ValidatePortNumOrName``: a number in 1-65535 or an IANA service name; a missing port
    is the int 0."""
    if isinstance(port, str):
        return [invalid(path, port, m) for m in is_valid_port_name(port)]
    number = port if isinstance(port, int) and not isinstance(port, bool) else 0
    return [] if 1 <= number <= 65535 else [invalid(path, number, PORT_RANGE_ERROR)]


def _http_get_errors(action: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``validateHTTPGetAction``."""
    errors = [required(f"{path}.path")] if not text_at(action, "path") else []
    errors += port_num_or_name_errors(action.get("port"), f"{path}.port")
    scheme = text_at(action, "scheme")
    if scheme not in HTTP_SCHEMES:
        errors.append(not_supported(f"{path}.scheme", scheme, HTTP_SCHEMES))
    for header in action.get("httpHeaders") or []:
        name = text_at(header, "name") if isinstance(header, dict) else ""
        if not re.fullmatch(HEADER_NAME_FMT, name):
            errors.append(invalid(f"{path}.httpHeaders", name, HEADER_NAME_ERROR))
    return errors


def _action_errors(kind: str, action: Mapping[str, JSON], path: str) -> list[FieldError]:
    if kind == "exec":
        return [required(f"{path}.command")] if not action.get("command") else []
    if kind == "httpGet":
        return _http_get_errors(action, path)
    if kind in ("tcpSocket", "grpc"):
        port = action.get("port")
        if kind == "grpc" and not isinstance(port, int):  # an int32 field
            port = 0
        return port_num_or_name_errors(port, f"{path}.port")
    return []  # sleep: its seconds need the grace period (not checked)


def handler_errors(handler: Mapping[str, JSON], kinds: tuple[str, ...],
                   path: str) -> list[FieldError]:
    """``validateHandler``: exactly one handler type, the first one validated."""
    errors: list[FieldError] = []
    found = False
    for kind in kinds:
        action = handler.get(kind)
        if action is None:
            continue
        if found:
            errors.append(forbidden(f"{path}.{kind}", "may not specify more than 1 handler type"))
            continue
        found = True
        errors += _action_errors(kind, action if isinstance(action, dict) else {},
                                 f"{path}.{kind}")
    if not found:
        errors.append(required(path, "must specify a handler type"))
    return errors


def probe_errors(name: str, probe: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``validateLivenessProbe``/``validateReadinessProbe``/``validateStartupProbe``."""
    errors = handler_errors(probe, _PROBE_HANDLERS, path)
    for key in _PROBE_COUNTS:
        value = int_at(probe, key) or 0
        if value < 0:
            errors.append(invalid(f"{path}.{key}", value, NEGATIVE))
    grace = int_at(probe, "terminationGracePeriodSeconds")
    if grace is not None and grace <= 0:
        errors.append(invalid(f"{path}.terminationGracePeriodSeconds", grace,
                              "must be greater than 0"))
    success = int_at(probe, "successThreshold") or 0
    if name in ("livenessProbe", "startupProbe") and success != 1:
        errors.append(invalid(f"{path}.successThreshold", success, "must be 1"))
    if name == "readinessProbe" and grace is not None:
        errors.append(invalid(f"{path}.terminationGracePeriodSeconds", grace,
                              "must not be set for readinessProbes"))
    return errors


def container_handler_errors(container: Mapping[str, JSON], path: str,
                             init: bool) -> list[FieldError]:
    """The lifecycle and probe rules of ``validateContainers`` (``init`` False) and
    ``validateInitContainers``: an init container without ``restartPolicy: Always`` may set
    none of them."""
    if init and text_at(container, "restartPolicy") != "Always":
        return [forbidden(f"{path}.{key}", INIT_FORBIDDEN)
                for key in ("lifecycle", *_PROBES) if container.get(key) is not None]
    errors: list[FieldError] = []
    lifecycle = container.get("lifecycle")
    if isinstance(lifecycle, dict):
        for hook in ("postStart", "preStop"):
            if lifecycle.get(hook) is not None:
                errors += handler_errors(dict_at(lifecycle, hook), _LIFECYCLE_HANDLERS,
                                         f"{path}.lifecycle.{hook}")
    for key in _PROBES:
        if container.get(key) is not None:
            errors += probe_errors(key, dict_at(container, key), f"{path}.{key}")
    return errors
