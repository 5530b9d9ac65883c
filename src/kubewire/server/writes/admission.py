"""What kube-apiserver's default mutating admission plugins write into a Pod.

Written by hand from kube's plugins (v1.32), in the order the default plugin chain runs them:

- ServiceAccount (``plugin/pkg/admission/serviceaccount/admission.go``), on create: the pod runs
  as ``default`` unless it names an account; the account must exist (403 ``error looking up
  service account ...`` otherwise); unless ``automountServiceAccountToken: false`` on the pod (or,
  when the pod says nothing, on the account) every container and init container without a mount
  at ``/var/run/secrets/kubernetes.io/serviceaccount`` gets a read-only one of a projected volume
  ``kube-api-access-<5 random>`` (``TokenVolumeSource``: a bound token for 3607 s, the
  ``kube-root-ca.crt`` ConfigMap's ``ca.crt``, the pod's namespace from the downward API); a pod
  without ``imagePullSecrets`` gets the account's. The legacy ``spec.serviceAccount`` mirrors
  the name (core/v1 conversion: it is read when ``serviceAccountName`` is empty, and written back).
- Priority (``plugin/pkg/admission/priority/admission.go``): on create ``spec.priority`` and
  ``spec.preemptionPolicy`` from the PriorityClass the pod names (``PodFacts.priority_classes``,
  looked up by the caller; an unknown name is 403); a pod naming none gets the global default
  class's name, value and policy, or 0 and ``PreemptLowerPriority`` when there is none
  (``priority_classes.priority_for_pod``); a contradicting ``priority`` or
  ``preemptionPolicy`` in the body is 403; on update the stored values stay when the body
  leaves them out.
- DefaultTolerationSeconds (``plugin/pkg/admission/defaulttolerationseconds/admission.go``), on
  create and update: NoExecute tolerations of ``node.kubernetes.io/not-ready`` and
  ``.../unreachable`` for 300 s, unless the pod already tolerates those taints.

Pure: the pod and the facts the plugins look up (its ServiceAccount, a random suffix) go in,
the admitted pod comes out. Only pods themselves are admitted, never their subresources.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubewire.server.writes.priority_classes import (
    SYSTEM_CLASSES,
    PodPriority,
    priority_for_pod,
    system_classes,
)
from kubewire.status import Forbidden, forbidden_resource

DEFAULT_SERVICE_ACCOUNT = "default"
TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_VOLUME_PREFIX = "kube-api-access-"
ROOT_CA_CONFIG_MAP = "kube-root-ca.crt"
# serviceaccount.WarnOnlyBoundTokenExpirationSeconds: an hour and 7 s, so kube can tell the
# tokens it projects by default from ones a pod asked for
TOKEN_EXPIRATION_SECONDS = 3607
PROJECTED_DEFAULT_MODE = 420  # 0644, corev1.ProjectedVolumeSourceDefaultMode
DEFAULT_TOLERATION_SECONDS = 300  # --default-not-ready/unreachable-toleration-seconds
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
_DEFAULT_TOLERATED = (NOT_READY_TAINT, UNREACHABLE_TAINT)
# scheduling.SystemPriorityClasses(): created by every kube-apiserver at start
SYSTEM_PRIORITY_CLASSES = {name: value for name, (value, _) in SYSTEM_CLASSES.items()}
_SYSTEM_CLASS_OBJECTS = {c["metadata"]["name"]: {**c, "preemptionPolicy": PREEMPT_LOWER_PRIORITY}
                         for c in system_classes()}


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What the plugins look up for one pod create: its ServiceAccount (None when missing) and
    the 5 random characters of a new token volume's name."""

    service_account: Mapping[str, Any] | None
    volume_suffix: str
    # the PriorityClasses by name (the Priority plugin's lister); None: kube's system classes
    priority_classes: Mapping[str, Mapping[str, Any]] | None = None


def service_account_name(pod: Mapping[str, Any]) -> str:
    """The account a pod runs as: ``serviceAccountName``, else the legacy ``serviceAccount``
    (core/v1 conversion), else ``default`` (the ServiceAccount plugin)."""
    spec = pod.get("spec") or {}
    return str(spec.get("serviceAccountName") or spec.get("serviceAccount")
               or DEFAULT_SERVICE_ACCOUNT)


def admit_pod_create(pod: dict[str, Any], namespace: str, facts: PodFacts, *,
                     owned: bool = False) -> dict[str, Any]:
    """The pod as the ServiceAccount, Priority and DefaultTolerationSeconds plugins leave a
    create (a copy, unless ``owned``: the caller's own, changed in place); raises Forbidden as
    they do. Mirror pods are kubelet's: left alone."""
    if _is_mirror_pod(pod):
        return pod
    admitted = pod if owned else copy.deepcopy(pod)
    spec = admitted.setdefault("spec", {})
    name = admission_name(admitted)
    account = service_account_name(admitted)
    spec["serviceAccountName"] = account
    spec["serviceAccount"] = account
    if facts.service_account is None:
        raise _forbidden(name, f"error looking up service account {namespace}/{account}: "
                               f'serviceaccount "{account}" not found')
    if _should_automount(facts.service_account, spec):
        _mount_token(spec, TOKEN_VOLUME_PREFIX + facts.volume_suffix)
    if not spec.get("imagePullSecrets"):
        pulls = [{"name": s.get("name", "")}
                 for s in facts.service_account.get("imagePullSecrets") or []]
        if pulls:
            spec["imagePullSecrets"] = pulls
    classes = facts.priority_classes
    _admit_priority(spec, name, _SYSTEM_CLASS_OBJECTS if classes is None else classes)
    _add_default_tolerations(spec)
    return admitted


def admit_pod_update(old: Mapping[str, Any], new: dict[str, Any], *,
                     owned: bool = False) -> dict[str, Any]:
    """An update: Priority keeps the stored priority and preemption policy the body left out;
    DefaultTolerationSeconds adds its tolerations again if they were dropped. A copy, unless
    ``owned`` (``new`` is the caller's own: changed in place)."""
    admitted = new if owned else copy.deepcopy(new)
    spec = admitted.setdefault("spec", {})
    old_spec = old.get("spec") or {}
    for key in ("priority", "preemptionPolicy"):
        if spec.get(key) is None and old_spec.get(key) is not None:
            spec[key] = old_spec[key]
    if spec.get("serviceAccountName"):  # core/v1 conversion writes the legacy field back
        spec["serviceAccount"] = spec["serviceAccountName"]
    _add_default_tolerations(spec)
    return admitted


def _is_mirror_pod(pod: Mapping[str, Any]) -> bool:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return "kubernetes.io/config.mirror" in annotations


def admission_name(obj: Mapping[str, Any]) -> str:
    """The name admission errors give an object being created (admission/errors.go
    ``extractResourceName``: its name is not generated yet at admission): its name, else its
    generateName, else "Unknown"."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return "Unknown"
    for field in ("name", "generateName"):
        value = meta.get(field)
        if isinstance(value, str) and value:
            return value
    return "Unknown"


def _forbidden(name: str, why: str) -> Forbidden:
    return forbidden_resource("", "pods", name, why)


def _should_automount(account: Mapping[str, Any], spec: Mapping[str, Any]) -> bool:
    pod_says = spec.get("automountServiceAccountToken")
    if pod_says is not None:
        return bool(pod_says)
    account_says = account.get("automountServiceAccountToken")
    return True if account_says is None else bool(account_says)


def _mount_token(spec: dict[str, Any], new_volume: str) -> None:
    volumes = spec.get("volumes") or []
    existing = next((v.get("name") for v in volumes
                     if str(v.get("name", "")).startswith(TOKEN_VOLUME_PREFIX)), None)
    volume = existing or new_volume
    mount = {"name": volume, "readOnly": True, "mountPath": TOKEN_MOUNT_PATH}
    needed = False
    for kind in ("initContainers", "containers"):
        for container in spec.get(kind) or []:
            mounts = container.get("volumeMounts") or []
            if mounts and any(m.get("mountPath") == TOKEN_MOUNT_PATH for m in mounts):
                continue
            container["volumeMounts"] = [*mounts, dict(mount)]
            needed = True
    if needed and existing is None:
        spec["volumes"] = [*volumes, {"name": volume, "projected": _token_volume_source()}]


def _token_volume_source() -> dict[str, Any]:
    # admission.go TokenVolumeSource, in core/v1's field order
    return {
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS,
                                     "path": "token"}},
            {"configMap": {"name": ROOT_CA_CONFIG_MAP,
                           "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
                "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ],
        "defaultMode": PROJECTED_DEFAULT_MODE,
    }


def _admit_priority(spec: dict[str, Any], name: str,
                    classes: Mapping[str, Mapping[str, Any]]) -> None:
    resolved = priority_for_pod(str(spec.get("priorityClassName") or ""), classes)
    if not isinstance(resolved, PodPriority):
        raise _forbidden(name, resolved)
    if resolved.class_name:
        spec["priorityClassName"] = resolved.class_name
    priority = resolved.priority
    given = spec.get("priority")
    if given is not None and given != priority:
        raise _forbidden(name, f"the integer value of priority ({given}) must not be provided "
                               f"in pod spec; priority admission controller computed {priority} "
                               "from the given PriorityClass name")
    spec["priority"] = priority
    policy, computed = spec.get("preemptionPolicy"), resolved.preemption_policy
    if computed is None:  # a class stored without one: the pod keeps its own
        return
    if policy is not None and policy != computed:
        raise _forbidden(name, f"the string value of PreemptionPolicy ({policy}) must not be "
                               "provided in pod spec; priority admission controller computed "
                               f"{computed} from the given PriorityClass name")
    spec["preemptionPolicy"] = computed


def _add_default_tolerations(spec: dict[str, Any]) -> None:
    tolerations = list(spec.get("tolerations") or [])
    added = [taint for taint in _DEFAULT_TOLERATED
             if not any(_tolerates(t, taint) for t in tolerations)] if tolerations \
        else _DEFAULT_TOLERATED  # a pod without tolerations (most) gets both
    if not added:
        return
    spec["tolerations"] = tolerations + [
        {"key": taint, "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": DEFAULT_TOLERATION_SECONDS} for taint in added]


def _tolerates(toleration: Mapping[str, Any], taint: str) -> bool:
    key, effect = toleration.get("key") or "", toleration.get("effect") or ""
    return key in ("", taint) and effect in ("", "NoExecute")
