"""What a user may do: kube-apiserver's ABAC policy file and its Forbidden answer.

A policy file holds one JSON object per line (``--authorization-policy-file``), each
``{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {...}}``
with ``user`` / ``group`` (``*`` for any), ``readonly`` (get, list, watch only), and either
``namespace`` / ``resource`` / ``apiGroup`` (``*`` for any) for resource requests or
``nonResourcePath`` (exact, ``*``, or a ``/prefix/*``) for others. A request is allowed when
any line matches (plugin/pkg/auth/authorizer/abac; ``authorizers.AbacAuthorizer``).

A refusal is 403 with ``responsewriters.Forbidden``'s message, ending in the authorizers' reasons.

``Decision`` (kube's ``Authorize`` result: allowed, denied, reason, evaluation error) and
``RulesResult`` (``RulesFor``'s) are the shapes every authorizer of the chain answers with
(``authorizers.py`` builds the chain; the access reviews answer with them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubewire.go_text import go_quote
from kubewire.server.access.authn import UserInfo
from kubewire.status import Forbidden

MASTERS = "system:masters"
READONLY_VERBS = frozenset({"get", "list", "watch"})
NO_POLICY_MATCHED = "No policy matched."
_POLICY_VERSIONS = ("abac.authorization.kubernetes.io/v1beta1",)


@dataclass(frozen=True, slots=True)
class Attributes:
    """One request as an authorizer sees it (``authorizer.AttributesRecord``)."""

    user: UserInfo
    verb: str
    path: str = ""
    resource_request: bool = False
    namespace: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""


@dataclass(frozen=True)
class Decision:
    """An authorizer's answer (``authorizer.Decision``, reason, error): allowed and denied are
    both False for "no opinion"."""

    allowed: bool
    denied: bool
    reason: str
    evaluation_error: str = ""


@dataclass(frozen=True)
class RulesResult:
    """``RulesFor``: the rules a user holds in a namespace, in kube's JSON shape
    (``ResourceRule``: verbs, apiGroups, resources, resourceNames; ``NonResourceRule``: verbs,
    nonResourceURLs), ``incomplete`` when an authorizer could not list them all."""

    resource_rules: list[dict[str, Any]]
    non_resource_rules: list[dict[str, Any]]
    incomplete: bool
    evaluation_error: str


@dataclass(frozen=True, slots=True)
class Policy:
    user: str = ""
    group: str = ""
    readonly: bool = False
    namespace: str = ""
    resource: str = ""
    api_group: str = ""
    non_resource_path: str = ""

    def subject_matches(self, user: UserInfo) -> bool:
        matched = False
        if self.user:
            if self.user != "*" and self.user != user.name:
                return False
            matched = True
        if self.group:
            if self.group != "*" and self.group not in user.groups:
                return False
            matched = True
        return matched

    def allows(self, attrs: Attributes) -> bool:
        if not self.subject_matches(attrs.user):
            return False
        if self.readonly and attrs.verb not in READONLY_VERBS:
            return False
        if attrs.resource_request:
            return (_wild_or(self.namespace, attrs.namespace)
                    and _wild_or(self.resource, attrs.resource)
                    and _wild_or(self.api_group, attrs.api_group))
        return _path_matches(self.non_resource_path, attrs.path)


def _wild_or(pattern: str, value: str) -> bool:
    return pattern == "*" or pattern == value


def _path_matches(pattern: str, path: str) -> bool:
    if pattern in ("*", path):
        return True
    return pattern.endswith("*") and path.startswith(pattern[:-1])


class PolicyFileError(ValueError):
    """A policy file kube-apiserver would refuse to start with."""


def parse_policy_line(line: str, where: str) -> Policy:
    try:
        doc = json.loads(line)
    except json.JSONDecodeError as exc:
        raise PolicyFileError(f"{where}: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("spec"), dict):
        raise PolicyFileError(f"{where}: not a Policy object")
    if doc.get("apiVersion") not in _POLICY_VERSIONS or doc.get("kind") != "Policy":
        raise PolicyFileError(f"{where}: unknown policy apiVersion/kind "
                              f"{doc.get('apiVersion')!r}/{doc.get('kind')!r}")
    spec: dict[str, Any] = doc["spec"]

    def text(key: str) -> str:
        value = spec.get(key, "")
        if not isinstance(value, str):
            raise PolicyFileError(f"{where}: spec.{key} must be a string")
        return value

    readonly = spec.get("readonly", False)
    if not isinstance(readonly, bool):
        raise PolicyFileError(f"{where}: spec.readonly must be a boolean")
    return Policy(user=text("user"), group=text("group"), readonly=readonly,
                  namespace=text("namespace"), resource=text("resource"),
                  api_group=text("apiGroup"), non_resource_path=text("nonResourcePath"))


def parse_policy_file(text: str, source: str = "policy file") -> list[Policy]:
    policies = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            policies.append(parse_policy_line(stripped, f"{source}:{line_no}"))
    return policies


def load_policy_file(path: Path) -> list[Policy]:
    return parse_policy_file(path.read_text(), str(path))


def forbidden_message(attrs: Attributes) -> str:
    """responsewriters ``forbiddenMessage``."""
    user = attrs.user.name
    if not attrs.resource_request:
        return f"User {go_quote(user)} cannot {attrs.verb} path {go_quote(attrs.path)}"
    resource = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
    head = (f"User {go_quote(user)} cannot {attrs.verb} resource {go_quote(resource)} "
            f"in API group {go_quote(attrs.api_group)}")
    if attrs.namespace:
        return f"{head} in the namespace {go_quote(attrs.namespace)}"
    return f"{head} at the cluster scope"


_SANITIZE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def forbidden(attrs: Attributes, reason: str) -> Forbidden:
    """``apierrors.NewForbidden(groupResource, name, err)`` as the authorization filter sends it
    (``ForbiddenStatusError``: the message HTML-escaped, so no answer looks like markup)."""
    detail = forbidden_message(attrs).translate(_SANITIZE) + (f": {reason}" if reason else "")
    qualified = attrs.resource + (f".{attrs.api_group}" if attrs.api_group else "")
    if not attrs.resource_request:
        return Forbidden(f"forbidden: {detail}", {})
    subject = f"{qualified} {go_quote(attrs.name)}" if attrs.name else qualified
    details: dict[str, Any] = {}
    if attrs.name:
        details["name"] = attrs.name
    if attrs.api_group:
        details["group"] = attrs.api_group
    details["kind"] = attrs.resource
    return Forbidden(f"{subject} is forbidden: {detail}", details)

