"""``POST serviceaccounts/<name>/token``: an authentication.k8s.io/v1 ``TokenRequest`` answered
with a signed token, as kube's ``TokenREST.Create`` (registry/core/serviceaccount/storage/
token.go) does; ``kubectl create token NAME --duration --audience`` calls it.

In kube's order: the body's name, if any, must be the service account's (422 ``must match the
service account name if specified``); the service account must exist (404); audiences default
to the server's (``--api-audiences``: its issuer) and ``expirationSeconds`` to 3600;
``ValidateTokenRequest`` wants at least 10 minutes and at most 2^32 seconds (422, with the
TokenRequest unnamed, as kube validates it). A ``boundObjectRef`` to a Pod needs the pod (404),
running as this service account (400) and with the referenced uid, if one is given (409);
its node, if it has one, is named in the token too (``ServiceAccountTokenPodNodeInfo``, on in
1.32; only its name when the Node is gone). A Secret (same namespace) or a Node
(``ServiceAccountTokenNodeBinding``, beta and on in 1.32) may be bound the same way; any other
kind is 400. ``--service-account-max-token-expiration`` shortens a longer request, with kube's
warning. With ``--service-account-extend-token-expiration`` (kube's default), a pod-bound
request for 3607 seconds with the server's audiences gets a year-long token that carries
``warnafter``.
The answer is 201 with the request, its ``status.token`` and ``status.expirationTimestamp``.
Tokens are signed by ``access/service_accounts.py`` and accepted by the authenticator there.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import msgspec

from kubewire.json_types import JSON
from kubewire.resources import Resource
from kubewire.server.access.service_accounts import (
    BoundObject,
    TokenSpec,
    issuer_for,
    token_claims,
)
from kubewire.server.context import ServerContext
from kubewire.server.patch.field_ownership import parse_tracked_write_options
from kubewire.server.request.routes import Route
from kubewire.server.wire.encoding import json_response, negotiate_json
from kubewire.server.wire.http_messages import Request, Response
from kubewire.server.writes.payloads import decode_payload, payload_name
from kubewire.status import (
    BadRequest,
    FieldError,
    MethodNotAllowed,
    conflict,
    invalid,
    invalid_object,
)
from kubewire.times import format_time

__all__ = ["expiration_errors", "serve_token_request"]

API_VERSION = "authentication.k8s.io/v1"
KIND = "TokenRequest"
GROUP = "authentication.k8s.io"
DEFAULT_EXPIRATION_S = 3600  # SetDefaults_TokenRequestSpec
MIN_EXPIRATION_S = 10 * 60
MAX_EXPIRATION_S = 1 << 32
WARN_ONLY_EXPIRATION_S = 3607  # token.WarnOnlyBoundTokenExpirationSeconds (kubelet's ask)
EXTENDED_EXPIRATION_S = 24 * 365 * 60 * 60  # token.ExpirationExtensionSeconds

_decode = msgspec.json.Decoder(dict[str, Any]).decode


def expiration_errors(seconds: JSON) -> list[FieldError]:
    """``ValidateTokenRequest``."""
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        return []  # the body's types were checked when it was decoded
    if seconds < MIN_EXPIRATION_S:
        return [invalid("spec.expirationSeconds", seconds,
                        "may not specify a duration less than 10 minutes")]
    if seconds > MAX_EXPIRATION_S:
        return [invalid("spec.expirationSeconds", seconds,
                        "may not specify a duration larger than 2^32 seconds")]
    return []


async def serve_token_request(ctx: ServerContext, request: Request, route: Route) -> Response:
    if request.method != "POST":
        raise MethodNotAllowed("the server does not allow this method on the requested resource",
                               {})
    negotiate_json(request.header("accept"))
    parse_tracked_write_options(request.query, request.header("user-agent"))  # 400s as a create
    token_request = decode_payload(request, route, API_VERSION, KIND)
    name = payload_name(token_request)
    if name and name != route.name:
        raise invalid_object(GROUP, KIND, route.name, [invalid(
            "metadata.name", name, "must match the service account name if specified")])
    account = await _current(ctx, "serviceaccounts", route.namespace, route.name)
    issuer = issuer_for(ctx.config)
    spec = token_request.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    audiences = spec.get("audiences") or list(issuer.audiences)
    expiration = spec.get("expirationSeconds")
    expiration = DEFAULT_EXPIRATION_S if expiration is None else expiration
    now = ctx.now()
    errors = expiration_errors(expiration)
    if errors:
        raise invalid_object(GROUP, KIND, "", errors)
    bound, pod_node = await _bound_object(ctx, route, spec.get("boundObjectRef"))
    cap = ctx.config.service_account_max_token_expiration_s
    warnings: list[str] = []
    if cap and expiration > cap:
        warnings.append(f"requested expiration of {expiration} seconds shortened to {cap} "
                        "seconds")
        expiration = cap
    lifetime, warn_after = int(expiration), 0
    if (bound is not None and bound.kind == "Pod" and lifetime == WARN_ONLY_EXPIRATION_S
            and set(audiences) <= set(issuer.audiences)):
        lifetime, warn_after = EXTENDED_EXPIRATION_S, WARN_ONLY_EXPIRATION_S
    claims = token_claims(issuer, account,
                          TokenSpec(tuple(audiences), lifetime, bound, warn_after, pod_node), now)
    meta = token_request["metadata"]
    out_meta: dict[str, JSON] = {"name": name or route.name, "namespace": route.namespace,
                                 "creationTimestamp": format_time(now)}
    for key in ("labels", "annotations"):
        if meta.get(key):
            out_meta[key] = meta[key]
    body = {"kind": KIND, "apiVersion": API_VERSION, "metadata": out_meta,
            "spec": {"audiences": audiences, "expirationSeconds": expiration,
                     "boundObjectRef": spec.get("boundObjectRef")},
            "status": {"token": issuer.sign(claims),
                       "expirationTimestamp": format_time(now + timedelta(seconds=expiration))}}
    return json_response(201, body, [
        ("Warning", '299 - "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"')
        for text in warnings])


async def _current(ctx: ServerContext, plural: str, namespace: str,
                   name: str) -> dict[str, Any]:
    """The object (one another replica just made included), or kube's 404."""
    return _decode((await ctx.live_now(_core(ctx, plural), namespace, name)).value)


async def _bound_object(ctx: ServerContext, route: Route,
                        ref: JSON) -> tuple[BoundObject | None, BoundObject | None]:
    """The object a ``boundObjectRef`` names, and a bound pod's node (kube's switch on the
    reference's group and kind)."""
    if not isinstance(ref, dict):
        return None, None
    api_version, kind = str(ref.get("apiVersion") or ""), str(ref.get("kind") or "")
    group, _, version = api_version.rpartition("/")
    plural = {"Pod": "pods", "Secret": "secrets", "Node": "nodes"}.get(kind)
    if group or plural is None:
        raise BadRequest(f"cannot bind token to object of type {group}/{version}, Kind={kind}")
    ref_name = str(ref.get("name") or "")
    found = await _current(ctx, plural, "" if kind == "Node" else route.namespace, ref_name)
    pod_node = None
    if kind == "Pod":
        spec = found.get("spec") or {}
        if spec.get("serviceAccountName") != route.name:
            raise BadRequest(f'cannot bind token for serviceaccount "{route.name}" to pod '
                             "running with different serviceaccount name.")
        node_name = str(spec.get("nodeName") or "")
        if node_name:  # a Node that is gone still gives its name (token.go)
            nodes = _core(ctx, "nodes")
            node = ctx.caches.for_resource(nodes).get(nodes.storage_key("", node_name))
            node_meta = (_decode(node.value).get("metadata") or {}) if node is not None else {}
            pod_node = BoundObject("Node", node_name, str(node_meta.get("uid") or ""))
    uid = str((found.get("metadata") or {}).get("uid") or "")
    if ref.get("uid") and ref["uid"] != uid:
        raise conflict("", kind, ref_name,
                       f"the UID in the bound object reference ({ref['uid']}) does not match "
                       "the UID in record. The object might have been deleted and then recreated")
    return BoundObject(kind, ref_name, uid), pod_node


def _core(ctx: ServerContext, plural: str) -> Resource:
    resource = ctx.registry.lookup("", "v1", plural)
    assert resource is not None
    return resource
