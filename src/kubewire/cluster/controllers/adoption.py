"""Adoption and release of pods (kube's ``controller_ref_manager.go`` ``ClaimPods``), for the
StatefulSet and DaemonSet controllers.

The decision is pure (``claims``): orphans matching the selector are adopted, owned pods that
no longer match are released, other controllers' pods are left alone. ``apply_claims`` sends
kube's strategic merge patches: ``{"metadata":{"ownerReferences":[<ref>],"uid":<pod>}}`` to
adopt (the uid is a precondition) and ``[{"$patch":"delete","uid":<owner>}]`` to release; an
owner being deleted adopts nothing (kube re-checks with a live GET first).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubewire.client import Api
from kubewire.client.errors import Conflict, Invalid, NotFound
from kubewire.cluster.controllers.history import controller_ref
from kubewire.selectors.errors import SelectorError
from kubewire.selectors.labels import label_selector_from_match

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Claims:
    """Pods the owner keeps (owned and matching, after adoption), adopts, and releases."""

    owned: list[Obj]
    adopt: list[Obj]
    release: list[Obj]


def _controller(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def selects(owner: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """Whether ``owner``'s (non-empty, valid) selector matches ``pod``'s labels."""
    try:
        selector = label_selector_from_match((owner.get("spec") or {}).get("selector") or {})
    except SelectorError:
        return False
    return not selector.is_empty and selector.matches(
        (pod.get("metadata") or {}).get("labels") or {})


def claims(owner: Mapping[str, Any], pods: Iterable[Obj]) -> Claims:
    """``ClaimPods`` decided: an invalid or empty selector adopts nothing (kube refuses an
    empty selector for these kinds)."""
    uid = (owner.get("metadata") or {}).get("uid")
    selector_of = (owner.get("spec") or {}).get("selector") or {}
    try:
        selector = label_selector_from_match(selector_of)
    except SelectorError:
        selector = None
    if selector is not None and selector.is_empty:
        selector = None
    owned: list[Obj] = []
    adopt: list[Obj] = []
    release: list[Obj] = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        matches = selector is not None and selector.matches(labels)
        ref = _controller(pod)
        if ref is not None and ref.get("uid") == uid:
            (owned if matches else release).append(pod)
        elif ref is None and matches and not meta.get("deletionTimestamp"):
            adopt.append(pod)
    return Claims(owned, adopt, release)


async def apply_claims(pods: Api[Obj], owner: Mapping[str, Any], decided: Claims,
                       owner_deleting: bool) -> list[Obj]:
    """Adopt and release as decided; returns the pods the owner now controls."""
    owner_uid = (owner.get("metadata") or {}).get("uid", "")
    namespace = (owner.get("metadata") or {}).get("namespace")
    kept = list(decided.owned)
    if not owner_deleting:
        for pod in decided.adopt:
            meta = pod["metadata"]
            with contextlib.suppress(NotFound, Conflict, Invalid):
                kept.append(await pods.patch(meta["name"], {"metadata": {
                    "ownerReferences": [controller_ref(owner)], "uid": meta.get("uid")}},
                    namespace=namespace))
    for pod in decided.release:
        meta = pod["metadata"]
        with contextlib.suppress(NotFound, Conflict, Invalid):
            await pods.patch(meta["name"], {"metadata": {
                "ownerReferences": [{"$patch": "delete", "uid": owner_uid}],
                "uid": meta.get("uid")}}, namespace=namespace)
    return kept
