"""The default cluster roles and bindings, and how kube reconciles them at start, as decisions.

The data (``rbac_bootstrap_policy.json``, package data) is kube's bootstrap policy
(plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go ``ClusterRoles``,
``ClusterRoleBindings``): ``cluster-admin``, ``admin``/``edit``/``view`` with their aggregation
rules and ``aggregate-to-*`` labels, ``system:aggregate-to-*``, ``system:discovery``,
``system:basic-user``, ``system:public-info-viewer``, ``system:monitoring``,
``system:auth-delegator``, ``system:service-account-issuer-discovery`` and their bindings,
each with the ``kubernetes.io/bootstrapping: rbac-defaults`` label and the
``rbac.authorization.kubernetes.io/autoupdate: "true"`` annotation. Of kube's roles for its own
components and controllers, those of the components kubewire runs (``system:kube-controller-
manager``, ``system:kube-scheduler``, ``system:controller:generic-garbage-collector``, from
testdata/controller-roles.yaml) and their bindings; the others are left out.

Reconciliation is kube's (pkg/registry/rbac/reconciliation, ``computeReconciledRole`` and
``computeReconciledRoleBinding`` with ``RemoveExtraPermissions``/``RemoveExtraSubjects`` off,
as the RBAC post-start hook runs them): a missing object is created; an existing one gets the
expected labels and annotations it lacks (its own values win), the rules it misses (added after
its own) and the aggregation selectors it misses, a binding the subjects it misses, unless its
``autoupdate`` annotation is ``"false"`` (a user's own copy: left alone). A binding whose
``roleRef`` differs is deleted and made again. Pure: objects in, the object to write out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any, Literal

import msgspec

from kubewire.json_copy import copy_json
from kubewire.rbac_rules import Rule, covers, rules_of

AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate"
DATA_FILE = "rbac_bootstrap_policy.json"

Operation = Literal["none", "update", "recreate"]


@cache
def _policy() -> dict[str, Any]:
    data = resources.files("kubewire.server.controllers").joinpath(DATA_FILE).read_bytes()
    doc: dict[str, Any] = msgspec.json.decode(data)
    return doc


def default_cluster_roles() -> list[dict[str, Any]]:
    """The bootstrap ClusterRoles (new dicts each call)."""
    return [copy_json(role) for role in _policy()["clusterRoles"]]


def default_cluster_role_bindings() -> list[dict[str, Any]]:
    """The bootstrap ClusterRoleBindings (new dicts each call)."""
    return [copy_json(binding) for binding in _policy()["clusterRoleBindings"]]


def is_protected(existing: Mapping[str, Any]) -> bool:
    """``autoupdate: "false"``: the user has taken the object over."""
    annotations = (existing.get("metadata") or {}).get("annotations") or {}
    return annotations.get(AUTOUPDATE) == "false"


def _merged_meta(existing: dict[str, Any], expected: Mapping[str, Any]) -> bool:
    """Add the expected labels and annotations ``existing`` lacks; True when any was added."""
    meta = existing.setdefault("metadata", {})
    changed = False
    for key in ("annotations", "labels"):
        wanted = (expected.get("metadata") or {}).get(key) or {}
        have = meta.get(key) or {}
        merged = {**wanted, **have}
        if merged != have:
            meta[key] = merged
            changed = True
    return changed


def _selectors(role: Mapping[str, Any]) -> list[Any]:
    rule = role.get("aggregationRule")
    selectors = rule.get("clusterRoleSelectors") if isinstance(rule, dict) else None
    return list(selectors) if isinstance(selectors, list) else []


def reconcile_role(existing: Mapping[str, Any],
                   expected: Mapping[str, Any]) -> tuple[Operation, dict[str, Any]]:
    """``computeReconciledRole`` in the union mode: the operation, and the object to write."""
    result = copy_json(dict(existing))
    if is_protected(existing):
        return "none", result
    changed = _merged_meta(result, expected)
    owned = rules_of(existing)
    _, missing = covers(list(owned), rules_of(expected))
    if missing:
        raw = result.get("rules")
        result["rules"] = [*(raw if isinstance(raw, list) else []),
                           *(rule.to_json() for rule in missing)]
        changed = True
    expected_selectors, existing_selectors = _selectors(expected), _selectors(existing)
    if expected.get("aggregationRule") is None and existing.get("aggregationRule") is not None:
        result.pop("aggregationRule", None)
        changed = True
    else:
        absent = [s for s in expected_selectors if s not in existing_selectors]
        if absent:
            result["aggregationRule"] = {"clusterRoleSelectors": existing_selectors + absent}
            changed = True
    return ("update" if changed else "none"), result


def reconcile_binding(existing: Mapping[str, Any],
                      expected: Mapping[str, Any]) -> tuple[Operation, dict[str, Any]]:
    """``computeReconciledRoleBinding`` in the union mode: a different ``roleRef`` is a
    recreate (roleRef is immutable), missing subjects are added after the binding's own."""
    result = copy_json(dict(existing))
    if is_protected(existing):
        return "none", result
    if existing.get("roleRef") != expected.get("roleRef"):
        fresh = copy_json(dict(expected))
        _merged_meta(fresh, existing)
        return "recreate", fresh
    changed = _merged_meta(result, expected)
    have = existing.get("subjects")
    subjects = list(have) if isinstance(have, list) else []
    absent = [s for s in expected.get("subjects") or [] if s not in subjects]
    if absent:
        result["subjects"] = subjects + absent
        changed = True
    return ("update" if changed else "none"), result


def aggregated_rules(role_name: str,
                     matches: Sequence[Sequence[tuple[str, Mapping[str, Any]]]],
                     ) -> list[dict[str, Any]]:
    """``syncClusterRole`` of kube's ClusterRole aggregation controller: for each of the role's
    selectors, the ClusterRoles it matched (name, object), in name order, each distinct rule
    once; the role itself is skipped."""
    out: list[dict[str, Any]] = []
    seen: list[Rule] = []
    for matched in matches:
        for name, role in sorted(matched, key=lambda item: item[0]):
            if name == role_name:
                continue
            raw = role.get("rules")
            for item in raw if isinstance(raw, list) else []:
                if not isinstance(item, dict):
                    continue
                rule = Rule.from_json(item)
                if rule not in seen:
                    seen.append(rule)
                    out.append(copy_json(item))
    return out


def same_rules(a: Any, b: Any) -> bool:
    """``equality.Semantic.DeepEqual`` of two rule lists: null and [] are equal, and so are a
    missing and an empty list inside a rule."""
    left = [Rule.from_json(r) for r in a] if isinstance(a, list) else []
    right = [Rule.from_json(r) for r in b] if isinstance(b, list) else []
    return left == right
