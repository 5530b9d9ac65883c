"""What the pod subresources that take a body of another kind share (``binding``,
``eviction``, ``ephemeralcontainers``' siblings): decoding that body, its identity checks, the
``201 Success`` kube answers, and setting a pod condition as ``podutil.UpdatePodCondition``.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from kubewire.json_types import JSON
from kubewire.resources import Resource
from kubewire.server.request.routes import Route
from kubewire.server.wire.encoding import decode_object, json_response
from kubewire.server.wire.http_messages import Request, Response
from kubewire.server.writes.lifecycle import ensure_namespace, metadata_of
from kubewire.server.writes.validate import check_type_meta
from kubewire.status import success_status
from kubewire.times import format_time

__all__ = ["created_success", "decode_payload", "payload_name", "set_pod_condition"]


def decode_payload(request: Request, route: Route, api_version: str, kind: str,
                   aliases: tuple[str, ...] = ()) -> dict[str, Any]:
    """The request body as ``api_version``/``kind`` (400 or 415 as a create would answer);
    ``aliases`` are other versions kube decodes to the same type (policy/v1beta1 Evictions).
    Its namespace defaults to the URL's and may not differ (handlers/create.go)."""
    group, _, version = api_version.rpartition("/")
    payload: Resource = replace(route.resource, group=group, version=version, kind=kind,
                                is_custom=False)
    body = decode_object(request.body, request.header("content-type"), route.resource,
                         as_kind=(api_version, kind))
    if body.get("apiVersion") in aliases:
        body["apiVersion"] = api_version
    check_type_meta(payload, body)
    ensure_namespace(payload, metadata_of(body), route.namespace)
    return body


def payload_name(body: dict[str, Any]) -> str:
    name = (body.get("metadata") or {}).get("name")
    return name if isinstance(name, str) else ""


def created_success() -> Response:
    """A Creater's ``&metav1.Status{Status: Success}``: the create handler fills in 201."""
    return json_response(201, {**success_status(), "code": 201})


def set_pod_condition(pod: dict[str, JSON], wanted: dict[str, str], now: datetime) -> None:
    """``podutil.UpdatePodCondition``: add or replace the condition of ``wanted``'s type (with
    its status, and reason and message if given); its lastTransitionTime moves only when its
    status changes. Keys in Go's field order."""
    pod_status = pod.get("status")
    if not isinstance(pod_status, dict):
        pod_status = pod["status"] = {}
    conditions = pod_status.get("conditions")
    if not isinstance(conditions, list):
        conditions = pod_status["conditions"] = []
    kind, status = wanted["type"], wanted["status"]
    condition: dict[str, JSON] = {"type": kind, "status": status, "lastProbeTime": None,
                                  "lastTransitionTime": format_time(now)}
    for extra in ("reason", "message"):
        if wanted.get(extra):
            condition[extra] = wanted[extra]
    for i, old in enumerate(conditions):
        if isinstance(old, dict) and old.get("type") == kind:
            if old.get("status") == status and "lastTransitionTime" in old:
                condition["lastTransitionTime"] = old["lastTransitionTime"]
            conditions[i] = condition
            return
    conditions.append(condition)
