"""networking.k8s.io/v1 IngressClass validation, after kube v1.32
``pkg/apis/networking/validation`` (``ValidateIngressClass``, ``ValidateIngressClassUpdate``):
the controller (a domain-prefixed path of at most 250 characters, immutable) and the
parameters reference (kind and name path segments, an optional DNS-subdomain apiGroup, a scope
of Cluster or Namespace with a namespace only for the latter).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kubewire.json_types import JSON
from kubewire.names import is_dns1123_label, is_dns1123_subdomain, is_path_segment_name, regex_error
from kubewire.resources import Resource
from kubewire.server.writes.validation.meta import dict_at
from kubewire.status import FieldError, forbidden, invalid, not_supported, required

MAX_CONTROLLER = 250
_HTTP_PATH_FMT = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+"
_HTTP_PATH = re.compile(_HTTP_PATH_FMT)
_SCOPES = ("Cluster", "Namespace")


def domain_prefixed_path_errors(value: str, path: str) -> list[FieldError]:
    """apimachinery ``IsDomainPrefixedPath``."""
    if not value:
        return [required(path)]
    host, slash, rest = value.partition("/")
    if not slash or not host or not rest:
        return [invalid(path, value, 'must be a domain-prefixed path (such as "acme.io/foo")')]
    errors = [invalid(path, host, message) for message in is_dns1123_subdomain(host)]
    if not _HTTP_PATH.fullmatch(rest):
        errors.append(invalid(path, rest, regex_error("Invalid path", _HTTP_PATH_FMT)))
    return errors


def _parameters_errors(params: JSON, path: str) -> list[FieldError]:
    """``validateIngressClassParametersReference``."""
    if not isinstance(params, dict):
        return []
    errors: list[FieldError] = []
    group = params.get("apiGroup")
    if isinstance(group, str):
        errors += [invalid(f"{path}.apiGroup", group, m) for m in is_dns1123_subdomain(group)]
    for key in ("kind", "name"):
        value = str(params.get(key) or "")
        if not value:
            errors.append(required(f"{path}.{key}", f"{key} is required"))
        else:
            errors += [invalid(f"{path}.{key}", value, m) for m in is_path_segment_name(value)]
    scope = params.get("scope")
    if scope is None:
        errors.append(required(f"{path}.scope"))
        return errors
    namespace = params.get("namespace")
    if scope not in _SCOPES:
        errors.append(not_supported(f"{path}.scope", scope, _SCOPES))
    elif scope == "Namespace":
        if namespace is None:
            errors.append(required(f"{path}.namespace",
                                   "`parameters.scope` is set to 'Namespace'"))
        else:
            errors += [invalid(f"{path}.namespace", namespace, m)
                       for m in is_dns1123_label(str(namespace))]
    elif namespace is not None:
        errors.append(forbidden(f"{path}.namespace", "`parameters.scope` is set to 'Cluster'"))
    return errors


def _spec_errors(spec: Mapping[str, JSON]) -> list[FieldError]:
    controller = str(spec.get("controller") or "")
    errors: list[FieldError] = []
    if len(controller) > MAX_CONTROLLER:
        errors.append(FieldError("FieldValueTooLong", "spec.controller",
                                 detail=f"may not be more than {MAX_CONTROLLER} bytes"))
    errors += domain_prefixed_path_errors(controller, "spec.controller")
    errors += _parameters_errors(spec.get("parameters"), "spec.parameters")
    return errors


def validate_ingress_class(resource: Resource, obj: Mapping[str, JSON],
                           old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """``ValidateIngressClass``; an update checks the controller's immutability first."""
    spec = dict_at(obj, "spec")
    errors: list[FieldError] = []
    if old is not None:
        controller = str(spec.get("controller") or "")
        if controller != str(dict_at(old, "spec").get("controller") or ""):
            errors.append(invalid("spec.controller", controller, "field is immutable"))
    return errors + _spec_errors(spec)
