"""``POST pods/<name>/binding`` and ``POST bindings``: assign a pod to a node (the scheduler's
write), as kube's ``BindingREST`` and ``LegacyBindingREST`` (registry/core/pod/storage).

The Binding's name must be the URL's (400 ``name in URL does not match name in Binding
object``); ``ValidatePodBinding`` wants ``target.name`` and a ``target.kind`` of ``Node`` or
nothing; kube returns those errors as a plain aggregate, which ``ErrorToAPIStatus`` answers
500 with no reason, so kubewire does too. The pod is then updated straight in storage
(``setPodNodeAndMetadata`` uses ``Storage.GuaranteedUpdate``: no strategy, no validation, no
managedFields): the Binding's uid and resourceVersion are preconditions, ``spec.nodeName`` is
set, the Binding's annotations are copied onto the pod and its ``PodScheduled`` condition
becomes True. A pod being deleted, already assigned or with scheduling gates is a 409
``Operation cannot be fulfilled on pods/binding "x": ...``; a missing pod is 404. Success is
``201`` with a ``Status`` ``Success``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from kubewire.json_types import JSON
from kubewire.resources import Resource
from kubewire.server.context import ServerContext
from kubewire.server.patch.field_ownership import parse_tracked_write_options
from kubewire.server.request.routes import Route
from kubewire.server.wire.encoding import negotiate_json
from kubewire.server.wire.http_messages import Request, Response
from kubewire.server.writes.payloads import (
    created_success,
    decode_payload,
    payload_name,
    set_pod_condition,
)
from kubewire.status import (
    BadRequest,
    FieldError,
    MethodNotAllowed,
    StatusError,
    aggregate_messages,
    conflict,
    not_found,
    not_supported,
    required,
)
from kubewire.storage.base import KeyNotFoundError, RevisionMismatchError, Update

__all__ = ["bind_refusal", "binding_errors", "serve_binding"]

UPDATE_RETRIES = 16

_decode = msgspec.json.Decoder(dict[str, Any]).decode


class AggregateError(StatusError):
    """A plain Go error (``field.ErrorList.ToAggregate``) answered by ``ErrorToAPIStatus``."""

    code = 500
    reason = ""


def binding_errors(binding: dict[str, Any]) -> list[FieldError]:
    """``ValidatePodBinding``."""
    target = binding.get("target")
    target = target if isinstance(target, dict) else {}
    errors: list[FieldError] = []
    kind = target.get("kind") or ""
    if kind and kind != "Node":
        errors.append(not_supported("target.kind", kind, ["Node", "<empty>"]))
    if not target.get("name"):
        errors.append(required("target.name"))
    return errors


def bind_refusal(pod: dict[str, Any]) -> str | None:
    """Why ``setPodNodeAndMetadata`` refuses to bind ``pod``, or None."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    name = meta.get("name", "")
    if meta.get("deletionTimestamp"):
        return f"pod {name} is being deleted, cannot be assigned to a host"
    if spec.get("nodeName"):
        return f'pod {name} is already assigned to node "{spec["nodeName"]}"'
    if spec.get("schedulingGates"):
        return f"pod {name} has non-empty .spec.schedulingGates"
    return None


async def serve_binding(ctx: ServerContext, request: Request, route: Route) -> Response:
    """Answer ``pods/<name>/binding`` or the ``bindings`` collection."""
    if request.method != "POST" or (route.resource.create_only and not route.is_collection):
        raise MethodNotAllowed("the server does not allow this method on the requested resource",
                               {})
    negotiate_json(request.header("accept"))
    wopts = parse_tracked_write_options(request.query, request.header("user-agent"))
    binding = decode_payload(request, route, "v1", "Binding")
    name = payload_name(binding)
    if route.name and name != route.name:  # LegacyBindingREST takes the Binding's own name
        raise BadRequest("name in URL does not match name in Binding object")
    errors = binding_errors(binding)
    if errors:
        raise AggregateError(aggregate_messages(errors))
    if not name:
        raise BadRequest("Name parameter required.")  # NamespaceKeyFunc
    pods = ctx.registry.lookup("", "v1", "pods")
    assert pods is not None
    await _assign(ctx, pods, route.namespace, binding, wopts.dry_run)
    return created_success()


async def _assign(ctx: ServerContext, pods: Resource, namespace: str, binding: dict[str, Any],
                  dry_run: bool) -> None:
    meta = binding["metadata"]
    name, node = meta["name"], binding["target"]["name"]
    annotations = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
    key = pods.storage_key(namespace, name)
    cache = ctx.caches.for_resource(pods)
    for _ in range(UPDATE_RETRIES):
        current = cache.get(key)
        if current is None:  # another replica may have just made it
            await ctx.caught_up()
            current = cache.get(key)
        if current is None:
            raise not_found("", "pods", name)
        pod = _decode(current.value)
        _check_preconditions(key, name, meta, pod)
        refusal = bind_refusal(pod)
        if refusal is not None:
            raise conflict("", "pods/binding", name, refusal)
        pod["spec"]["nodeName"] = node
        pod_meta: dict[str, JSON] = pod["metadata"]
        if not isinstance(pod_meta.get("annotations"), dict):
            pod_meta["annotations"] = {}
        pod_meta["annotations"].update(annotations)
        set_pod_condition(pod, {"type": "PodScheduled", "status": "True"}, ctx.now())
        if dry_run:
            return
        try:
            await ctx.store.write(Update(key, pod, current.revision))
        except RevisionMismatchError as err:  # again on the pod as it is now
            await ctx.caught_up(err.actual)
            continue
        except KeyNotFoundError:
            raise not_found("", "pods", name) from None
        return
    raise conflict("", "pods", name)


def _check_preconditions(key: str, name: str, meta: dict[str, Any],
                         pod: dict[str, Any]) -> None:
    """storage ``Preconditions.Check``, answered by ``InterpretUpdateError`` as a 409."""
    pod_meta = pod.get("metadata") or {}
    checks = (("UID", meta.get("uid"), pod_meta.get("uid", "")),
              ("ResourceVersion", meta.get("resourceVersion"),
               pod_meta.get("resourceVersion", "")))
    etcd_key = "/registry/pods/" + key.split("/", 2)[2]
    for what, wanted, found in checks:
        if wanted and wanted != found:
            raise conflict("", "pods", name,
                           f"StorageError: invalid object, Code: 4, Key: {etcd_key}, "
                           f"ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: "
                           f"{what} in precondition: {wanted}, {what} in object meta: {found}")
