"""``authentication.k8s.io/v1`` SelfSubjectReview and TokenReview: Creaters alone, nothing
stored, answered 201 with the review and its ``status`` (kube's
``pkg/registry/authentication/selfsubjectreview`` and ``tokenreview``).

- SelfSubjectReview (``kubectl auth whoami``): a new object, only its ``creationTimestamp``
  set, whose ``status.userInfo`` is the user the request runs as (after impersonation):
  ``username``, ``uid``, ``groups`` and ``extra``, each left out when empty.
- TokenReview (a webhook's check of a token): the request's own object back, ``spec`` as sent,
  ``status`` from ``access/token_review.py`` (``authenticated``, ``user``, ``audiences``,
  ``error``: Go's ``omitempty`` drops a false, an empty list or text, never the ``user``
  struct); an empty ``spec.token`` is kube's 400 ``token is required for TokenReview in
  authentication``.

Anything but a POST to the collection is 405, as for kube's other Creaters.
"""

from __future__ import annotations

from typing import Any

from kubewire.json_types import JSON
from kubewire.server.access.authn import Authenticator, UserInfo
from kubewire.server.access.service_accounts import ServiceAccountTokens
from kubewire.server.access.token_review import ReviewVerdict, review_token
from kubewire.server.context import ServerContext
from kubewire.server.patch.field_ownership import parse_tracked_write_options
from kubewire.server.request.routes import Route
from kubewire.server.wire.encoding import json_response, negotiate_json
from kubewire.server.wire.http_messages import Request, Response
from kubewire.server.writes.payloads import decode_payload
from kubewire.server.writes.rbac_writes import REQUESTER
from kubewire.status import BadRequest, MethodNotAllowed
from kubewire.times import format_time

__all__ = ["GROUP", "serve_authentication_review", "user_info"]

GROUP = "authentication.k8s.io"
API_VERSION = f"{GROUP}/v1"
# ObjectMeta in Go's field order: a TokenReview's metadata goes back as sent, in that order.
_META_ORDER = ("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion",
               "generation", "creationTimestamp", "deletionTimestamp",
               "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences",
               "finalizers", "managedFields")


def user_info(user: UserInfo) -> dict[str, JSON]:
    """``authentication.UserInfo`` as Go's JSON writes it (every field ``omitempty``)."""
    out: dict[str, JSON] = {}
    if user.name:
        out["username"] = user.name
    if user.uid:
        out["uid"] = user.uid
    if user.groups:
        out["groups"] = list(user.groups)
    if user.extra:
        out["extra"] = {key: list(values) for key, values in sorted(user.extra)}
    return out


async def serve_authentication_review(ctx: ServerContext, request: Request, route: Route, *,
                                      authenticator: Authenticator | None) -> Response:
    """Answer a SelfSubjectReview or TokenReview (``authenticator``: the server's, which a
    TokenReview asks)."""
    if request.method != "POST" or not route.is_collection or route.watch_path:
        raise MethodNotAllowed("the server does not allow this method on the requested resource",
                               {})
    negotiate_json(request.header("accept"))
    parse_tracked_write_options(request.query, request.header("user-agent"))  # 400s as a create
    kind = route.resource.kind
    review = decode_payload(request, route, API_VERSION, kind)
    if kind == "SelfSubjectReview":
        return json_response(201, _self_subject_review(ctx))
    return json_response(201, _token_review(ctx, review, authenticator))


def _self_subject_review(ctx: ServerContext) -> dict[str, Any]:
    requester = REQUESTER.get()
    if requester is None:
        raise BadRequest("no user present on request")
    return {"kind": "SelfSubjectReview", "apiVersion": API_VERSION,
            "metadata": {"creationTimestamp": format_time(ctx.now())},
            "status": {"userInfo": user_info(requester.user)}}


def _token_review(ctx: ServerContext, review: dict[str, Any],
                  authenticator: Authenticator | None) -> dict[str, Any]:
    spec = review.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    token = spec.get("token")
    if not isinstance(token, str) or not token:
        raise BadRequest("token is required for TokenReview in authentication")
    wanted = spec.get("audiences")
    wanted = [a for a in wanted if isinstance(a, str)] if isinstance(wanted, list) else []
    verdict = _verdict(ctx, token, wanted, authenticator)
    meta = review.get("metadata")
    meta = dict(meta) if isinstance(meta, dict) else {}
    meta.setdefault("creationTimestamp", None)
    ordered = {key: meta[key] for key in _META_ORDER if key in meta}
    ordered.update((key, value) for key, value in meta.items() if key not in ordered)
    out_spec: dict[str, JSON] = {"token": token}
    if wanted:
        out_spec["audiences"] = list(wanted)
    status = _status(review.get("status"), verdict)
    return {"kind": "TokenReview", "apiVersion": API_VERSION, "metadata": ordered,
            "spec": out_spec, "status": status}


def _verdict(ctx: ServerContext, token: str, wanted: list[str],
             authenticator: Authenticator | None) -> ReviewVerdict:
    config = ctx.config
    api_audiences = config.api_audiences or (config.service_account_issuer,)
    if authenticator is None:  # kube's REST without a token authenticator
        return ReviewVerdict(False)
    accounts = authenticator.service_accounts
    return review_token(token, wanted, api_audiences, authenticator.tokens,
                        accounts if isinstance(accounts, ServiceAccountTokens) else None)


def _status(sent: JSON, verdict: ReviewVerdict) -> dict[str, JSON]:
    """kube sets ``authenticated`` and ``error`` and, when a user was found, ``user`` and
    ``audiences``; a ``user`` the client sent stays otherwise (the object is its own)."""
    sent = sent if isinstance(sent, dict) else {}
    status: dict[str, JSON] = {}
    if verdict.authenticated:
        status["authenticated"] = True
    if verdict.user is not None:
        status["user"] = user_info(verdict.user)
        if verdict.audiences:
            status["audiences"] = list(verdict.audiences)
    else:
        user = sent.get("user")
        status["user"] = user if isinstance(user, dict) else {}
        audiences = sent.get("audiences")
        if isinstance(audiences, list) and audiences:
            status["audiences"] = audiences
    if verdict.error:
        status["error"] = verdict.error
    return status
