"""The pod subresources kube proxies to a kubelet: ``log``, ``exec``, ``attach``, ``portforward``.

kube-apiserver finds the pod, checks the container and the node, and then forwards the request
to the node's kubelet (``pkg/registry/core/pod/strategy.go`` ``LogLocation``,
``streamLocation``, ``PortForwardLocation``; ``pkg/registry/core/pod/rest/log.go`` and
``subresources.go``). What is relied on here, in kube's order:

- ``log``: the options are decoded from the query (a bad integer is 400 with ``strconv``'s text)
  and validated (``ValidatePodLogOptions``: ``tailLines`` >= 0, ``limitBytes`` > 0,
  ``sinceSeconds`` > 0 and not with ``sinceTime``; 422 ``PodLogOptions "x" is invalid``); then
  the pod (404 ``pods "x" not found``), the container (``validateContainer``: 400 ``container c
  is not valid for pod x``, or ``a container name must be specified ...`` when the pod has
  several); a pod without a node has an empty location, which ``StreamObject`` answers 204 No
  Content (no body).
- ``exec``, ``attach`` (GET or POST, with or without an upgrade): the pod, the container, then
  400 ``pod x does not have a host assigned`` — all before any protocol upgrade.
  ``portforward`` checks no container.
- With a node: ``NodeConnectionInfoGetter`` reads the Node (404 ``nodes "n" not found``) and its
  preferred address (kube's default ``--kubelet-preferred-address-types``: Hostname,
  InternalDNS, InternalIP, ExternalDNS, ExternalIP; none is a 500 ``no preferred addresses
  found; known addresses: [...]``) and port (``daemonEndpoints.kubeletEndpoint.Port``, else
  10250).

kubewire runs no kubelets (simulated nodes come later), so past that point it answers what a
kube cluster answers when it has no kubelet to give the request to, not an error of its own:

- ``exec``/``attach``/``portforward`` fail as kube's ``UpgradeAwareHandler`` does when the
  kubelet cannot be reached: a request that is not an upgrade gets 400 ``Upgrade request
  required``; an upgrade gets kube's dial failure, 500 ``error dialing backend: dial tcp
  HOST:PORT: connect: connection refused`` (a Status with no reason, as ``ErrorToAPIStatus``
  makes of a plain error). Nothing is dialled: there is no kubelet at that address to reach.
- ``log`` answers as the kubelet would from the pod's recorded status (the kubelet falls back to
  ``pod.Status`` when its status manager has none; ``validateContainerLogStatus``, relayed by
  the apiserver's response checker as a 400 with the kubelet's text): a container that is
  waiting gets ``container "c" in pod "x" is waiting to start: ContainerCreating``, one
  without a status ``... is not available``, and so on. A container that is running or has
  run gets 200 with an empty ``text/plain`` body: it has written nothing anyone kept, and an
  empty log is what every client handles (``kubectl logs`` prints nothing). A pod on one of
  kubewire's simulated nodes (``simulated_logs``) gets the short log its simulated kubelet
  would serve instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from kubewire.json_types import JSON
from kubewire.schema.go_values import time_error
from kubewire.server.context import ServerContext
from kubewire.server.reads.simulated_logs import LogWindow, is_simulated, simulated_log
from kubewire.server.request.query_params import Query, first_value, int64_param, parse_bool
from kubewire.server.request.routes import Route
from kubewire.server.wire.http_messages import Request, Response
from kubewire.status import (
    BadRequest,
    FieldError,
    MethodNotAllowed,
    StatusError,
    forbidden,
    invalid,
    invalid_object,
    not_found,
)

__all__ = ["CONNECT_SUBRESOURCES", "LogOptions", "log_option_errors", "parse_log_options",
           "serve_connect"]

CONNECT_SUBRESOURCES = frozenset({"log", "exec", "attach", "portforward"})
KUBELET_PORT = 10250  # kube-apiserver's --kubelet-port default
PREFERRED_ADDRESS_TYPES = ("Hostname", "InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP")
# ImagePull errors the kubelet words on its own (pkg/kubelet/images/types.go)
_WAITING_TEXT = {"ErrImagePull": "image can't be pulled",
                 "ImagePullBackOff": "trying and failing to pull image"}

_decode = msgspec.json.Decoder(dict[str, Any]).decode


class DialError(StatusError):
    """A plain Go error answered by ``ErrorToAPIStatus``: code 500, no reason."""

    code = 500
    reason = ""


@dataclass(frozen=True, slots=True)
class LogOptions:
    """``PodLogOptions`` as the query gives them (None: not set)."""

    container: str = ""
    follow: bool = False
    previous: bool = False
    timestamps: bool = False
    since_seconds: int | None = None
    since_time: str | None = None
    tail_lines: int | None = None
    limit_bytes: int | None = None


def _int_option(query: Query, name: str) -> int | None:
    text = first_value(query, name)
    return None if text is None else int64_param(text)


def _bool_option(query: Query, name: str) -> bool:
    text = first_value(query, name)
    return text is not None and parse_bool(text)


def parse_log_options(query: Query) -> LogOptions:
    """``Convert_url_Values_To_v1_PodLogOptions``: 400 with Go's text for a bad number or time."""
    since_time = first_value(query, "sinceTime")
    if since_time is not None:
        if since_time in ("", "null"):  # metav1.Time.UnmarshalQueryParameter: the zero time
            since_time = None
        else:
            error = time_error(since_time)  # metav1.Time: time.Parse(time.RFC3339, ...)
            if error is not None:
                raise BadRequest(error)
    return LogOptions(container=first_value(query, "container") or "",
                      follow=_bool_option(query, "follow"),
                      previous=_bool_option(query, "previous"),
                      timestamps=_bool_option(query, "timestamps"),
                      since_seconds=_int_option(query, "sinceSeconds"), since_time=since_time,
                      tail_lines=_int_option(query, "tailLines"),
                      limit_bytes=_int_option(query, "limitBytes"))


def log_option_errors(opts: LogOptions) -> list[FieldError]:
    """``ValidatePodLogOptions`` (pkg/apis/core/validation)."""
    errors: list[FieldError] = []
    if opts.tail_lines is not None and opts.tail_lines < 0:
        errors.append(invalid("tailLines", opts.tail_lines, "must be greater than or equal to 0"))
    if opts.limit_bytes is not None and opts.limit_bytes < 1:
        errors.append(invalid("limitBytes", opts.limit_bytes, "must be greater than 0"))
    if opts.since_seconds is not None and opts.since_time is not None:
        errors.append(forbidden("", "at most one of `sinceTime` or `sinceSeconds` may be "
                                "specified"))
    elif opts.since_seconds is not None and opts.since_seconds < 1:
        errors.append(invalid("sinceSeconds", opts.since_seconds, "must be greater than 0"))
    return errors


# --- the pod, its container and its node ------------------------------------------------------

def _items(parent: Mapping[str, JSON], key: str) -> list[Mapping[str, JSON]]:
    value = parent.get(key)
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _mapping(value: JSON) -> Mapping[str, JSON]:
    return value if isinstance(value, dict) else {}


def container_names(spec: Mapping[str, JSON]) -> list[str]:
    """``podutil.VisitContainers`` order: init containers, containers, ephemeral containers."""
    return [str(c.get("name") or "") for key in ("initContainers", "containers",
                                                  "ephemeralContainers")
            for c in _items(spec, key)]


def resolve_container(pod: Mapping[str, JSON], wanted: str) -> str:
    """``validateContainer``: the container a request addresses, or its 400."""
    spec = _mapping(pod.get("spec"))
    name = str(_mapping(pod.get("metadata")).get("name") or "")
    if wanted:
        if wanted not in container_names(spec):
            raise BadRequest(f"container {wanted} is not valid for pod {name}")
        return wanted
    containers = _items(spec, "containers")
    if len(containers) == 1:
        return str(containers[0].get("name") or "")
    if not containers:
        raise BadRequest(f"a container name must be specified for pod {name}")
    # Go's %s of a []string: [a b c]
    raise BadRequest(f"a container name must be specified for pod {name}, choose one of: "
                     f"[{' '.join(container_names(spec))}]")


def kubelet_address(node: Mapping[str, JSON]) -> tuple[str, int]:
    """``NodeConnectionInfoGetter``: the node's preferred address and kubelet port, or the
    500 kube gives a node without a usable address."""
    status = _mapping(node.get("status"))
    addresses = _items(status, "addresses")
    host = next((str(a.get("address") or "") for kind in PREFERRED_ADDRESS_TYPES
                 for a in addresses if a.get("type") == kind), None)
    if host is None:
        known = " ".join(f"{{{a.get('type') or ''} {a.get('address') or ''}}}" for a in addresses)
        raise DialError(f"no preferred addresses found; known addresses: [{known}]")
    endpoint = _mapping(_mapping(status.get("daemonEndpoints")).get("kubeletEndpoint"))
    port = endpoint.get("Port")
    return host, port if isinstance(port, int) and port > 0 else KUBELET_PORT


def join_host_port(host: str, port: int) -> str:
    """Go's ``net.JoinHostPort``."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def kubelet_log_refusal(pod: Mapping[str, JSON], container: str, previous: bool) -> str | None:
    """The kubelet's ``validateContainerLogStatus`` on the pod's recorded status: why it would
    refuse the log (its 400 text), or None when it would serve one."""
    name = str(_mapping(pod.get("metadata")).get("name") or "")
    status = _mapping(pod.get("status"))
    found = next((s for key in ("containerStatuses", "initContainerStatuses",
                                "ephemeralContainerStatuses")
                  for s in _items(status, key) if s.get("name") == container), None)
    who = f'container "{container}" in pod "{name}"'
    if found is None:
        return f"{who} is not available"
    state, last = _mapping(found.get("state")), _mapping(found.get("lastState"))
    last_terminated = _mapping(last.get("terminated")) if "terminated" in last else None
    if previous:
        if last_terminated is None or not last_terminated.get("containerID"):
            return f"previous terminated {who} not found"
        return None
    if "running" in state:
        return None
    if "terminated" in state:
        if _mapping(state.get("terminated")).get("containerID"):
            return None
        if last_terminated is not None and last_terminated.get("containerID"):
            return None
        return f"{who} is terminated"
    if last_terminated is not None:
        return None if last_terminated.get("containerID") else f"{who} is terminated"
    if "waiting" in state:
        reason = str(_mapping(state.get("waiting")).get("reason") or "")
        return f"{who} is waiting to start: {_WAITING_TEXT.get(reason, reason)}"
    return f"{who} is waiting to start - no logs yet"


def is_upgrade_request(request: Request) -> bool:
    """``httpstream.IsUpgradeRequest``: a ``Connection`` header naming ``upgrade``."""
    return any(token.strip().lower() == "upgrade"
               for value in request.header_values("connection") for token in value.split(","))


# --- serving ----------------------------------------------------------------------------------

async def serve_connect(ctx: ServerContext, request: Request, route: Route) -> Response:
    """Answer ``pods/<name>/{log,exec,attach,portforward}`` as kube does without a kubelet."""
    if route.subresource == "log":
        if request.method not in ("GET", "HEAD"):
            raise _not_allowed()
        return _log(ctx, route, request.query)
    if request.method not in ("GET", "POST"):
        raise _not_allowed()
    pod = _pod(ctx, route)
    if route.subresource != "portforward":
        resolve_container(pod, first_value(request.query, "container") or "")
    node_name = str(_mapping(pod.get("spec")).get("nodeName") or "")
    if not node_name:
        raise BadRequest(f"pod {route.name} does not have a host assigned")
    host, port = kubelet_address(_node(ctx, node_name))
    if not is_upgrade_request(request):
        raise BadRequest("Upgrade request required")
    raise DialError(f"error dialing backend: dial tcp {join_host_port(host, port)}: connect: "
                    "connection refused")


def _log(ctx: ServerContext, route: Route, query: Query) -> Response:
    opts = parse_log_options(query)
    errors = log_option_errors(opts)
    if errors:
        raise invalid_object("", "PodLogOptions", route.name, errors)
    pod = _pod(ctx, route)
    container = resolve_container(pod, opts.container)
    node_name = str(_mapping(pod.get("spec")).get("nodeName") or "")
    if not node_name:
        return Response(204, b"", "")
    node = _node(ctx, node_name)
    kubelet_address(node)
    refusal = kubelet_log_refusal(pod, container, opts.previous)
    if refusal is not None:
        raise BadRequest(refusal)
    if not is_simulated(node):
        return Response(200, b"", "text/plain")
    since = (_parsed_time(opts.since_time) if opts.since_time else
             datetime.now(UTC) - timedelta(seconds=opts.since_seconds)
             if opts.since_seconds is not None else None)
    window = LogWindow(previous=opts.previous, timestamps=opts.timestamps, since=since,
                       tail_lines=opts.tail_lines, limit_bytes=opts.limit_bytes)
    return Response(200, simulated_log(pod, container, window), "text/plain")


def _parsed_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _pod(ctx: ServerContext, route: Route) -> dict[str, Any]:
    return _decode(ctx.live(route.resource, route.namespace, route.name).value)


def _node(ctx: ServerContext, name: str) -> dict[str, Any]:
    nodes = ctx.registry.lookup("", "v1", "nodes")
    assert nodes is not None
    found = ctx.caches.for_resource(nodes).get(nodes.storage_key("", name))
    if found is None:
        raise not_found("", "nodes", name)
    return _decode(found.value)


def _not_allowed() -> MethodNotAllowed:
    return MethodNotAllowed("the server does not allow this method on the requested resource", {})
