"""Audit: kube-apiserver's audit policy and its ``audit.k8s.io/v1`` events, without I/O.

- ``parse_policy`` reads ``--audit-policy-file`` as kube's loader does (YAML or JSON, apiVersion
  ``audit.k8s.io/v1``, kind ``Policy``, ``validation.ValidatePolicy``, at least one rule), at
  every level: ``None``, ``Metadata``, ``Request`` (and the request's object) and
  ``RequestResponse`` (and the response's object).
- ``AuditPolicy.evaluate`` is kube's ``policy/checker.go``: the first rule matching the user, its
  groups, the verb, and either the resource (group, resources with ``*``, ``*/sub`` and
  ``res/*`` forms, resourceNames) and namespace or the non-resource URL (``*``, exact, or a
  ``/prefix*``) gives the level, the stages to omit (the rule's and the policy's) and whether
  to omit managedFields (the rule's ``omitManagedFields`` if set, else the policy's); no match
  is level ``None``.
- ``request_object``/``response_object`` make the event's ``requestObject`` and
  ``responseObject`` (``LogRequestObject``, ``LogRequestPatch``, ``LogResponseObject``): JSON,
  compacted, managedFields dropped from an object or a list's items when asked
  (``copyWithoutManagedFields``).
- ``AuditEvent`` holds what the filters record (``LogRequestMetadata``, the impersonated user,
  authorization annotations, the response status) and ``event_line`` writes one stage of it as
  Go's JSON encoder would: Go's field order, omitted empties, HTML-safe escapes, microsecond UTC
  times.

``audit_log.py`` holds the I/O side: the file, and when each stage is written.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import msgspec

from kubewire.go_json_bytes import GoJSONEncoder
from kubewire.go_text import go_quote, go_string_slice
from kubewire.server.access.authn import UserInfo
from kubewire.server.access.authz import Attributes
from kubewire.times import format_micro_time

API_VERSION = "audit.k8s.io/v1"
LEVEL_NONE, LEVEL_METADATA = "None", "Metadata"
LEVEL_REQUEST, LEVEL_REQUEST_RESPONSE = "Request", "RequestResponse"
LEVELS = (LEVEL_NONE, LEVEL_METADATA, LEVEL_REQUEST, LEVEL_REQUEST_RESPONSE)
RECEIVED, STARTED, COMPLETE, PANIC = ("RequestReceived", "ResponseStarted", "ResponseComplete",
                                      "Panic")
STAGES = (RECEIVED, STARTED, COMPLETE, PANIC)
DECISION_KEY = "authorization.k8s.io/decision"
REASON_KEY = "authorization.k8s.io/reason"
MAX_USER_AGENT = 1024
_RULE_FIELDS = frozenset({"level", "users", "userGroups", "verbs", "resources", "namespaces",
                          "nonResourceURLs", "omitStages", "omitManagedFields"})
_POLICY_FIELDS = frozenset({"apiVersion", "kind", "metadata", "rules", "omitStages",
                            "omitManagedFields"})
_GROUP_RESOURCE_FIELDS = frozenset({"group", "resources", "resourceNames"})
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


class PolicyError(ValueError):
    """An audit policy kube-apiserver (or kubewire) would refuse to start with."""


# --- the policy ---------------------------------------------------------------------------------

def request_uri(path: str, raw_query: str) -> str:
    """Go's ``URL.RequestURI()``: the path escaped as ``url.EscapedPath`` does, and the query."""
    escaped = quote(path, safe="$&+,/:;=@")
    return f"{escaped}?{raw_query}" if raw_query else escaped


@dataclass(frozen=True, slots=True)
class GroupResources:
    group: str = ""
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PolicyRule:
    level: str
    users: tuple[str, ...] = ()
    user_groups: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()
    resources: tuple[GroupResources, ...] = ()
    namespaces: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()
    omit_stages: frozenset[str] = frozenset()
    omit_managed_fields: bool | None = None  # None: the policy's

    def matches(self, attrs: Attributes, user: UserInfo | None) -> bool:
        """``ruleMatches``; ``user`` None for a request that failed authentication."""
        if self.users and (user is None or user.name not in self.users):
            return False
        if self.user_groups and (user is None
                                 or not any(g in self.user_groups for g in user.groups)):
            return False
        if self.verbs and attrs.verb not in self.verbs:
            return False
        if self.namespaces or self.resources:
            return self._matches_resource(attrs)
        if self.non_resource_urls:
            return not attrs.resource_request and any(
                _path_matches(attrs.path, spec) for spec in self.non_resource_urls)
        return True

    def _matches_resource(self, attrs: Attributes) -> bool:
        if not attrs.resource_request:
            return False
        if self.namespaces and attrs.namespace not in self.namespaces:
            return False
        if not self.resources:
            return True
        return any(_group_matches(gr, attrs) for gr in self.resources)


def _group_matches(gr: GroupResources, attrs: Attributes) -> bool:
    if gr.group != attrs.api_group:
        return False
    if not gr.resources:
        return True
    if gr.resource_names and attrs.name not in gr.resource_names:
        return False
    sub = attrs.subresource
    combined = f"{attrs.resource}/{sub}" if sub else attrs.resource
    return any(res in (combined, "*")
               or (sub and res.startswith("*/") and res[2:] == sub)
               or (res.endswith("/*") and res[:-2] == attrs.resource)
               for res in gr.resources)


def _path_matches(path: str, spec: str) -> bool:
    if spec in ("*", path):
        return True
    return spec.endswith("*") and path.startswith(spec.rstrip("*"))


@dataclass(frozen=True, slots=True)
class RequestConfig:
    """``RequestAuditConfig``: the level a request is audited at and the stages left out."""

    level: str
    omit_stages: frozenset[str] = frozenset()
    omit_managed_fields: bool = False


@dataclass(frozen=True, slots=True)
class AuditPolicy:
    rules: tuple[PolicyRule, ...]
    omit_stages: frozenset[str] = frozenset()
    warnings: tuple[str, ...] = ()  # unknown fields: kube warns and reads the rest
    omit_managed_fields: bool = False

    def evaluate(self, attrs: Attributes, user: UserInfo | None) -> RequestConfig:
        """``EvaluatePolicyRule``: the first matching rule's level (its stages joined with the
        policy's), else ``None``."""
        for rule in self.rules:
            if rule.matches(attrs, user):
                omit = (self.omit_managed_fields if rule.omit_managed_fields is None
                        else rule.omit_managed_fields)
                return RequestConfig(rule.level, rule.omit_stages | self.omit_stages, omit)
        return RequestConfig(LEVEL_NONE, self.omit_stages, self.omit_managed_fields)


def parse_policy(text: str, source: str = "audit policy") -> AuditPolicy:
    """A policy file as ``LoadPolicyFromBytes`` reads it; ``PolicyError`` with kube's texts."""
    import yaml  # only when a policy is given

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise PolicyError(f"failed decoding: {err}: from file {source}") from None
    if not isinstance(doc, dict):
        raise PolicyError(f"failed decoding: Object 'Kind' is missing in '{text[:80]}': from "
                          f"file {source}")
    if doc.get("apiVersion") != API_VERSION or doc.get("kind") != "Policy":
        raise PolicyError(f"unknown group version field {doc.get('apiVersion')}, "
                          f"Kind={doc.get('kind')} in policy: from file {source}")
    errors: list[str] = []
    warnings: list[str] = []
    policy = _policy(doc, errors, warnings)
    if errors:
        message = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        raise PolicyError(f"{message}: from file {source}")
    if not policy.rules:
        raise PolicyError(f"loaded illegal policy with 0 rules: from file {source}")
    return policy


def _policy(doc: dict[str, Any], errors: list[str], warnings: list[str]) -> AuditPolicy:
    _unknown_fields(doc, _POLICY_FIELDS, "", warnings)
    rules_doc = doc.get("rules") or []
    if not isinstance(rules_doc, list):
        errors.append("rules: Invalid value: must be a list")
        rules_doc = []
    omit = _stages(doc.get("omitStages"), "omitStages", errors)
    rules = tuple(_rule(rule, f"rules[{i}]", errors, warnings)
                  for i, rule in enumerate(rules_doc))
    omit_fields = _bool(doc.get("omitManagedFields"), "omitManagedFields", errors)
    return AuditPolicy(rules, omit, tuple(warnings), bool(omit_fields))


def _bool(value: Any, path: str, errors: list[str]) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    errors.append(f"{path}: Invalid value: must be a boolean")
    return None


def _rule(doc: Any, path: str, errors: list[str], warnings: list[str]) -> PolicyRule:
    if not isinstance(doc, dict):
        errors.append(f"{path}: Invalid value: must be an object")
        return PolicyRule(LEVEL_NONE)
    _unknown_fields(doc, _RULE_FIELDS, f"{path}.", warnings)
    level = _level(doc.get("level"), f"{path}.level", errors)
    urls = _strings(doc.get("nonResourceURLs"), f"{path}.nonResourceURLs", errors)
    _check_urls(urls, f"{path}.nonResourceURLs", errors)
    resources = _group_resources(doc.get("resources"), f"{path}.resources", errors, warnings)
    namespaces = _strings(doc.get("namespaces"), f"{path}.namespaces", errors)
    if urls and (resources or namespaces):
        errors.append(f"{path}.nonResourceURLs: Invalid value: {go_string_slice(urls)}: rules "
                      "cannot apply to both regular resources and non-resource URLs")
    return PolicyRule(level=level,
                      users=_strings(doc.get("users"), f"{path}.users", errors),
                      user_groups=_strings(doc.get("userGroups"), f"{path}.userGroups", errors),
                      verbs=_strings(doc.get("verbs"), f"{path}.verbs", errors),
                      resources=resources, namespaces=namespaces, non_resource_urls=urls,
                      omit_stages=_stages(doc.get("omitStages"), f"{path}.omitStages", errors),
                      omit_managed_fields=_bool(doc.get("omitManagedFields"),
                                                f"{path}.omitManagedFields", errors))


def _level(value: Any, path: str, errors: list[str]) -> str:
    if value in (None, ""):
        errors.append(f"{path}: Required value")
        return LEVEL_NONE
    if value not in LEVELS:
        supported = ", ".join(f'"{level}"' for level in LEVELS)
        errors.append(f"{path}: Unsupported value: {go_quote(str(value))}: supported values: "
                      f"{supported}")
        return LEVEL_NONE
    return str(value)


def _stages(value: Any, path: str, errors: list[str]) -> frozenset[str]:
    stages = _strings(value, path, errors)
    for i, stage in enumerate(stages):
        if stage not in STAGES:
            errors.append(f"{path}[{i}]: Invalid value: {go_quote(stage)}: allowed stages are "
                          + ",".join(STAGES))
    return frozenset(stages)


def _check_urls(urls: tuple[str, ...], path: str, errors: list[str]) -> None:
    for i, url in enumerate(urls):
        if url == "*":
            continue
        if not url.startswith("/"):
            errors.append(f"{path}[{i}]: Invalid value: {go_quote(url)}: non-resource URL "
                          "rules must begin with a '/' character")
        if url and "*" in url[:-1]:
            errors.append(f"{path}[{i}]: Invalid value: {go_quote(url)}: non-resource URL "
                          "wildcards '*' must be the final character of the rule")


def _group_resources(value: Any, path: str, errors: list[str], warnings: list[str],
                     ) -> tuple[GroupResources, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        errors.append(f"{path}: Invalid value: must be a list of objects")
        return ()
    found = []
    for i, item in enumerate(value):
        _unknown_fields(item, _GROUP_RESOURCE_FIELDS, f"{path}[{i}].", warnings)
        group = item.get("group") or ""
        if not isinstance(group, str):
            errors.append(f"{path}[{i}].group: Invalid value: must be a string")
            group = ""
        if group and (len(group) > 253 or not _DNS_SUBDOMAIN.fullmatch(group)):
            errors.append(f"{path}.group: Invalid value: {go_quote(group)}: a lowercase RFC "
                          "1123 subdomain must consist of lower case alphanumeric characters, "
                          "'-' or '.', and must start and end with an alphanumeric character")
        resources = _strings(item.get("resources"), f"{path}[{i}].resources", errors)
        names = _strings(item.get("resourceNames"), f"{path}[{i}].resourceNames", errors)
        if names and not resources:
            errors.append(f"{path}.resourceNames: Invalid value: {go_string_slice(names)}: using "
                          "resourceNames requires at least one resource")
        found.append(GroupResources(group, resources, names))
    return tuple(found)


def _strings(value: Any, path: str, errors: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        errors.append(f"{path}: Invalid value: must be a list of strings")
        return ()
    return tuple(value)


def _unknown_fields(doc: Mapping[str, Any], known: frozenset[str], prefix: str,
                    warnings: list[str]) -> None:
    """kube decodes strictly first; on unknown fields it warns and decodes leniently."""
    warnings.extend(f'unknown field "{prefix}{key}"' for key in doc if key not in known)


# --- events ---------------------------------------------------------------------------------------

@dataclass(slots=True)
class AuditEvent:
    """One request's audit event as the filters fill it in; ``event_line`` writes a stage."""

    level: str
    audit_id: str
    request_uri: str
    verb: str
    user: UserInfo | None  # None: authentication failed
    source_ips: list[str]
    user_agent: str
    object_ref: dict[str, str] | None
    received: datetime.datetime
    impersonated_user: UserInfo | None = None
    response_status: dict[str, Any] | None = None
    annotations: dict[str, str] = field(default_factory=dict)
    request_object: bytes | None = None  # compact JSON (``Request`` level and above)
    response_object: bytes | None = None  # compact JSON (``RequestResponse`` level)

    def authorized(self, allowed: bool, reason: str) -> None:
        """``WithAuthorization``'s annotations."""
        self.annotations[DECISION_KEY] = "allow" if allowed else "forbid"
        self.annotations[REASON_KEY] = reason


def user_json(user: UserInfo | None) -> dict[str, Any]:
    """``authenticationv1.UserInfo``: username, uid, groups, extra; empty ones omitted."""
    out: dict[str, Any] = {}
    if user is None:
        return out
    if user.name:
        out["username"] = user.name
    if user.uid:
        out["uid"] = user.uid
    if user.groups:
        out["groups"] = list(user.groups)
    if user.extra:
        out["extra"] = {key: list(values) for key, values in sorted(user.extra)}
    return out


def object_ref(attrs: Attributes) -> dict[str, str] | None:
    """The event's ``objectRef`` for a resource request (``LogRequestMetadata``)."""
    if not attrs.resource_request:
        return None
    fields = (("resource", attrs.resource), ("namespace", attrs.namespace),
              ("name", attrs.name), ("apiGroup", attrs.api_group),
              ("apiVersion", attrs.api_version), ("subresource", attrs.subresource))
    return {key: value for key, value in fields if value}


_REF_ORDER = ("resource", "namespace", "name", "uid", "apiGroup", "apiVersion",
              "resourceVersion", "subresource")


def complete_object_ref(ref: dict[str, str], obj: Mapping[str, Any]) -> dict[str, str]:
    """``LogRequestObject`` at Metadata level: namespace, name, uid and resourceVersion of the
    object a create or update sent, where the URL did not give them."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return ref
    merged = dict(ref)
    for key in ("namespace", "name", "uid", "resourceVersion"):
        value = meta.get(key)
        if isinstance(value, str) and value and not merged.get(key):
            merged[key] = value
    return {key: merged[key] for key in _REF_ORDER if merged.get(key)}


def response_status(code: int, status: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The event's ``responseStatus``: the bounded fields of a Status answer
    (``LogResponseObject``), else only the code."""
    out: dict[str, Any] = {"metadata": {}}
    if status is not None:
        for key in ("status", "message", "reason", "details"):
            if status.get(key):
                out[key] = status[key]
    if code:
        out["code"] = code
    return out


def user_agent(header: str) -> str:
    if len(header) > MAX_USER_AGENT:
        return header[:MAX_USER_AGENT] + "...TRUNCATED"
    return header


def source_ips(forwarded_for: str, real_ip: str, remote_host: str | None) -> list[str]:
    """``utilnet.SourceIPs``: X-Forwarded-For's addresses, X-Real-Ip unless among them, then
    the peer's address unless it is already last."""
    found: list[str] = []
    for part in forwarded_for.split(",") if forwarded_for else ():
        ip = _go_ip(part.strip())
        if ip is not None:
            found.append(ip)
    real = _go_ip(real_ip) if real_ip else None
    if real is not None and real not in found:
        found.append(real)
    remote = _go_ip(remote_host) if remote_host else None
    if remote is not None and (not found or found[-1] != remote):
        found.append(remote)
    return found


def _go_ip(text: str) -> str | None:
    """An address as Go's ``net.IP.String`` prints it (IPv4-mapped IPv6 as IPv4)."""
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def without_managed_fields(obj: Any) -> Any:
    """``copyWithoutManagedFields``: ``obj`` (or each item of a list) without
    ``metadata.managedFields``; other values as they are."""
    if not isinstance(obj, dict):
        return obj
    items = obj.get("items")
    if isinstance(items, list) and str(obj.get("kind", "")).endswith("List"):
        return {**obj, "items": [without_managed_fields(item) for item in items]}
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return obj


def object_json(obj: Any, omit_managed_fields: bool) -> bytes:
    """An event's ``requestObject``/``responseObject``: ``obj`` as compact JSON."""
    return _ENCODER.encode(without_managed_fields(obj) if omit_managed_fields else obj)


def raw_json(body: bytes, omit_managed_fields: bool) -> bytes | None:
    """JSON ``body`` (an answer, a patch) compacted as Go's encoder compacts raw JSON (and
    without managedFields when asked); None if it is not JSON."""
    try:
        obj = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None
    return object_json(obj, omit_managed_fields)


_ENCODER = GoJSONEncoder()  # as Go's encoding/json escapes (HTML-safe, line terminators)


def event_line(event: AuditEvent, stage: str, now: datetime.datetime) -> bytes:
    """One JSON line for ``stage`` of ``event`` (``now``: the stage's time; RequestReceived
    takes the time the request arrived, as kube's ``processAuditEvent`` does)."""
    stamp = event.received if stage == RECEIVED else now
    doc: dict[str, Any] = {"kind": "Event", "apiVersion": API_VERSION, "level": event.level,
                           "auditID": event.audit_id, "stage": stage,
                           "requestURI": event.request_uri, "verb": event.verb,
                           "user": user_json(event.user)}
    optional = (
        ("impersonatedUser", None if event.impersonated_user is None
         else user_json(event.impersonated_user)),
        ("sourceIPs", event.source_ips or None),
        ("userAgent", event.user_agent or None),
        ("objectRef", event.object_ref),
        ("responseStatus", event.response_status),
        ("requestObject", None if event.request_object is None
         else msgspec.Raw(event.request_object)),
        ("responseObject", None if event.response_object is None
         else msgspec.Raw(event.response_object)))
    doc.update((key, value) for key, value in optional if value is not None)
    doc["requestReceivedTimestamp"] = format_micro_time(event.received)
    doc["stageTimestamp"] = format_micro_time(stamp)
    if event.annotations:
        doc["annotations"] = dict(sorted(event.annotations.items()))
    return _ENCODER.encode(doc) + b"\n"

